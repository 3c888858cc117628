/* SPDX-License-Identifier: MIT */
/* read.c - table mode's read-write lock (mode=table; the statements are
 * ../sqltable's, "the read-write lock"). The name's row of dlock_lock is
 * the lock for everyone else: a writer holds it as a mutex does (its owner
 * after "w:"), readers under the owner "r:" with a lease that ends no
 * sooner than the last reader's; each reader has a row of its own in
 * dlock_share. Every change to a reader's row is one transaction that
 * locks the name's row first, so the name's row orders them; requests
 * that open a transaction run on a connection that is closed, never
 * pooled, when they fail (table.c: dlock__myt_run_tx). A writer is
 * table.c's (a mutex's steps, under its own owner), and so are the
 * operator calls; mysql.c hands a reader's steps here. */
#include "../../base/error.h"
#include "../sqltable/sqltable.h"
#include "my.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D DLOCK__SQLT_MARIADB

int dlock__myt_read_acquire(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a)
{
    dlock__myres res;
    int shut, sem = l->base.spec.kind == DLOCK__SEMAPHORE;
    int rc = dlock__myt_share(p, a->deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    int64_t wait_ms = a->wait ? p->base.host.cfg->waiter_lease_ms : 0;
    char *owner = dlock__my_literal(a->token, 1), *first = dlock__myt_guard(p, l, a->wait);
    char *take =
        owner == NULL || first == NULL ? NULL
        : sem ? dlock__sqlt_sem_take(D, l->key_lit, l->name_lit, owner, p->info_lit, a->lease_ms,
                                     wait_ms, l->base.spec.permits, l->base.spec.take)
              : dlock__sqlt_read_take(D, l->key_lit, l->name_lit, owner, p->info_lit, a->lease_ms,
                                      wait_ms);
    free(owner);
    size_t len = take != NULL ? strlen(first) + strlen(take) + strlen(l->lit) + 100 : 0;
    char *sql = take != NULL ? malloc(len) : NULL;
    if (sql != NULL)
        snprintf(sql, len, "%s; %s; DO RELEASE_LOCK(%s)", first, take, l->lit);
    free(first);
    free(take);
    /* (its statements: the guard's two, then the transaction's two
     * (DLOCK__SQLT_BEGIN), [the name's row locked, the permits held by
     * others,] the name's row, the holder's row, the answer, [a waiter's
     * rows,] COMMIT: the answer is statement 6 (8); a mutex take's is 5:
     * the guard's two, its count, START TRANSACTION and INSERT first) */
    rc = dlock__myt_run_take(p, sql, a->deadline_us, &res, &shut, 0, NULL);
    if (rc != DLOCK_OK)
        return rc;
    dlock__myres answer = {0};
    if (!shut) {
        /* the answer where a take's is: dlock__myt_took reads statement 5 */
        answer.rows[5] = res.rows[sem ? 8 : 6];
        answer.n = 6;
    }
    rc = dlock__myt_took(p, l, a, &answer, shut);
    dlock__my_res_free(&res);
    return rc;
}

int dlock__myt_read_release(dlock__mystore *p, dlock__mylock *l, const char *token,
                            int64_t deadline_us)
{
    dlock__myres res;
    char *owner = dlock__my_literal(token, 1);
    /* (a reader's holds are counted: handles of one owner; a semaphore's
     * permits go back at once) */
    int counted = l->base.spec.kind == DLOCK__READ;
    char *sql = owner != NULL ? dlock__sqlt_read_release(D, l->key_lit, owner, counted) : NULL;
    free(owner);
    int rc = dlock__myt_run_tx(p, sql, deadline_us, &res, "releasing a read hold");
    if (rc != DLOCK_OK)
        return rc;
    if (res.affected[3] != 1)
        rc = dlock__fail(DLOCK_ELOST,
                         "lock '%s': this owner's %s was not held any more (its lease ran out, "
                         "or it was force-unlocked)",
                         l->name, counted ? "read hold" : "permits");
    dlock__my_res_free(&res);
    return rc;
}

int dlock__myt_read_extend(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t lease_ms,
                           int at_least, int64_t deadline_us)
{
    dlock__myres res;
    char *owner = dlock__my_literal(token, 1);
    char *sql = owner != NULL ? dlock__sqlt_read_extend(D, l->key_lit, owner, lease_ms, at_least,
                                                        l->base.spec.kind == DLOCK__READ)
                              : NULL;
    free(owner);
    int rc = dlock__myt_run_tx(p, sql, deadline_us, &res, "extending a read hold's lease");
    if (rc != DLOCK_OK)
        return rc;
    const char *v = dlock__my_value(&res, 6, 0);
    if (v == NULL || strcmp(v, "1") != 0)
        rc = dlock__fail(DLOCK_ELOST,
                         "lock '%s': this owner's %s is not held any more (its lease ran out, "
                         "or it was force-unlocked)",
                         l->name, l->base.spec.kind == DLOCK__READ ? "read hold" : "permits");
    dlock__my_res_free(&res);
    return rc;
}

/* A read hold or a semaphore's of a renewal. */
static int shared_hold(const dlock__renewal *it)
{
    if (it->kind != DLOCK__RENEW_HOLD || it->session != NULL)
        return 0;
    enum dlock__kind kind = MYLOCK(it->lock)->base.spec.kind;
    return kind == DLOCK__READ || kind == DLOCK__SEMAPHORE;
}

size_t dlock__myt_read_renew(dlock__mystore *p, dlock__renewal *items, size_t n,
                             int64_t deadline_us)
{
    /* (one transaction; the holders now: the seventh statement's rows) */
    return dlock__myt_renew_some(p, items, n, shared_hold, dlock__sqlt_read_renew, 6, 1,
                                 deadline_us);
}
