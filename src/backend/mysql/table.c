/* SPDX-License-Identifier: MIT */
/* table.c - the MariaDB/MySQL backend's table mode (mode=table): a lock is
 * a row of dlock's lock table, dlock_lock, with its holder, its fence and a
 * lease on the server's clock. The statements and their answers are
 * ../sqltable/ (shared with the other SQL stores); this file runs them on
 * the store's pooled connections (conn.c).
 *
 * No hold depends on a connection: every request takes any idle connection
 * of the pool and gives it back, so many locks share a few connections. A
 * waiter polls (the core's backoff, bounded by the holder's lease left);
 * the renewer renews every table hold of the client in one request. A
 * holder whose row was taken over (its lease ran out) or freed by an
 * operator finds it at its next renewal, extend or release: lost. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../sqltable/sqltable.h"
#include "my.h"

#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D DLOCK__SQLT_MARIADB

/* dlock_lock, created when missing: a user with DML rights on it but no
 * CREATE takes locks in a table made for it (README.md). */
static int ensure_table(dlock__mystore *p, int64_t deadline)
{
    pthread_mutex_lock(&p->mu);
    int ready = p->schema_ready;
    pthread_mutex_unlock(&p->mu);
    if (ready)
        return DLOCK_OK;
    char *sql = dlock__sqlt_exists(D);
    dlock__myres res;
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__my_operate(p, sql, deadline, &res, "looking for dlock's table");
    free(sql);
    if (rc != DLOCK_OK)
        return rc;
    const char *v = dlock__my_value(&res, 0, 0);
    int exists = v != NULL && strcmp(v, "2") == 0;
    dlock__my_res_free(&res);
    if (!exists) {
        sql = dlock__sqlt_schema(D);
        if (sql == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        rc = dlock__my_operate(p, sql, deadline, &res, "creating dlock's table");
        free(sql);
        if (rc == DLOCK_ESERVER) {
            char why[600];
            snprintf(why, sizeof why, "%s", dlock_errmsg());
            return dlock__fail(DLOCK_ESERVER,
                               "%s; the user needs CREATE on the database, or an administrator "
                               "creates the tables " DLOCK__SQLT_TABLE " and " DLOCK__SQLT_WAIT
                               " (its schema: src/backend/mysql/README.md)",
                               why);
        }
        if (rc != DLOCK_OK)
            return rc;
        dlock__my_res_free(&res);
    }
    pthread_mutex_lock(&p->mu);
    p->schema_ready = 1;
    pthread_mutex_unlock(&p->mu);
    return DLOCK_OK;
}

/* Runs a request of the table (and frees sql): the table made first if
 * need be. A statement InnoDB chose as a deadlock's victim (1213: takers,
 * waiters' rows and renewals lock the same rows in different orders under
 * contention) changed nothing: it is sent again, twice at most. */
static int run(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res, const char *what)
{
    memset(res, 0, sizeof *res);
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = ensure_table(p, deadline);
    for (int tries = 1; rc == DLOCK_OK; tries++) {
        rc = dlock__my_operate(p, sql, deadline, res, what);
        if (rc == DLOCK_ESERVER && res->err == ER_LOCK_DEADLOCK && tries < 3)
            rc = DLOCK_OK;
        else
            break;
    }
    free(sql);
    return rc;
}

int dlock__myt_acquire(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a)
{
    dlock__myres res;
    char *owner = dlock__my_literal(a->token, 1);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *sql = dlock__sqlt_take(D, l->key_lit, l->name_lit, owner, p->info_lit, a->lease_ms,
                                 a->wait ? p->base.host.cfg->waiter_lease_ms : 0);
    free(owner);
    int rc = run(p, sql, a->deadline_us, &res, "taking the lock's row");
    if (rc != DLOCK_OK)
        return rc;
    uint64_t fence;
    int64_t left_ms;
    if (dlock__sqlt_taken(dlock__my_value(&res, 1, 0), dlock__my_value(&res, 1, 1),
                          dlock__my_value(&res, 1, 2), &fence, &left_ms)) {
        a->outcome = DLOCK__TAKEN;
        a->fence = fence;
        a->session = NULL;
    } else {
        a->outcome = DLOCK__HELD;
        a->next = DLOCK__NEXT_POLL;
        a->holder_ttl_ms = left_ms;
    }
    dlock__my_res_free(&res);
    return DLOCK_OK;
}

int dlock__myt_cancel(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t deadline_us)
{
    dlock__myres res;
    char *owner = dlock__my_literal(token, 1);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *sql = dlock__sqlt_leave(D, l->key_lit, owner);
    free(owner);
    int rc = run(p, sql, deadline_us, &res, "leaving the waiters");
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    return rc;
}

int dlock__myt_release(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t deadline_us)
{
    dlock__myres res;
    char *owner = dlock__my_literal(token, 1);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *sql = dlock__sqlt_release(D, l->key_lit, owner);
    free(owner);
    int rc = run(p, sql, deadline_us, &res, "releasing the lock's row");
    if (rc != DLOCK_OK)
        return rc;
    if (res.affected[0] != 1)
        rc = dlock__my_value(&res, 1, 0) != NULL
                 ? dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is held by someone else", l->name)
                 : dlock__fail(DLOCK_ELOST,
                               "lock '%s' was not held by this owner any more (its lease ran "
                               "out, or it was force-unlocked)",
                               l->name);
    dlock__my_res_free(&res);
    return rc;
}

int dlock__myt_extend(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t lease_ms,
                      int at_least, int64_t deadline_us)
{
    dlock__myres res;
    char *owner = dlock__my_literal(token, 1);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *sql = dlock__sqlt_extend(D, l->key_lit, owner, lease_ms, at_least);
    free(owner);
    int rc = run(p, sql, deadline_us, &res, "extending the lock's lease");
    if (rc != DLOCK_OK)
        return rc;
    const char *v = dlock__my_value(&res, 1, 0);
    if (v == NULL || strcmp(v, "1") != 0)
        rc = dlock__fail(DLOCK_ELOST,
                         "lock '%s' is not held by this owner any more (its lease ran out, or it "
                         "was force-unlocked)",
                         l->name);
    dlock__my_res_free(&res);
    return rc;
}

size_t dlock__myt_renew(dlock__mystore *p, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += items[i].kind == DLOCK__RENEW_HOLD && items[i].session == NULL;
    if (m == 0)
        return 0;
    dlock__sqlt_hold *h = calloc(m, sizeof *h);
    size_t k = 0;
    int ok = h != NULL;
    for (size_t i = 0; i < n && ok; i++) {
        if (items[i].kind != DLOCK__RENEW_HOLD || items[i].session != NULL)
            continue;
        dlock__mylock *l = MYLOCK(items[i].lock);
        h[k].key_lit = l->key_lit;
        h[k].key = l->server_name;
        h[k].owner = items[i].token;
        h[k].lease_ms = items[i].lease_ms;
        ok = (h[k].owner_lit = dlock__my_literal(items[i].token, 1)) != NULL;
        k++;
    }
    dlock__myres res;
    int rc = ok ? run(p, dlock__sqlt_renew(D, h, k), deadline_us, &res, "renewing leases")
                : DLOCK_ENOMEM;
    if (rc == DLOCK_OK && res.rows[1] != NULL) {
        MYSQL_ROW row;
        mysql_data_seek(res.rows[1], 0);
        while ((row = mysql_fetch_row(res.rows[1])) != NULL)
            dlock__sqlt_renewed(h, k, row[0], row[1]);
    }
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != DLOCK__RENEW_HOLD || items[i].session != NULL)
            continue;
        items[i].result = rc != DLOCK_OK ? DLOCK__RENEW_FAILED
                          : h[k].held    ? DLOCK__RENEW_OK
                                         : DLOCK__RENEW_GONE;
        if (h != NULL)
            free((char *) h[k].owner_lit);
        k++;
    }
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    free(h);
    return m;
}

/* The row of l: (owner, info, fence, ms left), the lock held when owner is
 * not empty and the lease runs. */
static int row_of(dlock__mystore *p, dlock__mylock *l, int64_t deadline, dlock__myres *res,
                  int *held)
{
    int rc = run(p, dlock__sqlt_query(D, l->key_lit), deadline, res, "reading the lock's row");
    if (rc != DLOCK_OK)
        return rc;
    const char *owner = dlock__my_value(res, 0, 0), *left = dlock__my_value(res, 0, 3);
    *held = owner != NULL && owner[0] != '\0' && left != NULL && strtoll(left, NULL, 10) > 0;
    return DLOCK_OK;
}

int dlock__myt_query(dlock__mystore *p, dlock__mylock *l, dlock_status *st, int64_t deadline_us)
{
    dlock__myres res;
    int held;
    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    int rc = row_of(p, l, deadline_us, &res, &held);
    if (rc != DLOCK_OK)
        return rc;
    const char *fence = dlock__my_value(&res, 0, 2), *waiters = dlock__my_value(&res, 0, 4);
    st->last_fence = fence != NULL ? strtoull(fence, NULL, 10) : 0;
    st->waiters = waiters != NULL ? (unsigned) strtoul(waiters, NULL, 10) : 0;
    if (held) {
        st->held = 1;
        st->holds = 1;
        snprintf(st->owner, sizeof st->owner, "%s", dlock__my_value(&res, 0, 0));
        st->lease_ms = strtoll(dlock__my_value(&res, 0, 3), NULL, 10);
    }
    dlock__my_res_free(&res);
    return DLOCK_OK;
}

int dlock__myt_holders(dlock__mystore *p, dlock__mylock *l, dlock__holder_sink sink, void *arg,
                       int64_t deadline_us)
{
    dlock__myres res;
    int held;
    int rc = row_of(p, l, deadline_us, &res, &held);
    if (rc != DLOCK_OK)
        return rc;
    if (held) {
        dlock__holder_raw h = {
            .owner = dlock__my_value(&res, 0, 0), .count = 1, .info = dlock__my_value(&res, 0, 1)};
        (void) sink(arg, &h);
    }
    dlock__my_res_free(&res);
    return DLOCK_OK;
}

/* The row's holder cleared (its fence kept): the holder finds it at its
 * next renewal, and the next taker takes the row at once. */
int dlock__myt_force_unlock(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us)
{
    dlock__myres res;
    int rc = run(p, dlock__sqlt_force(D, l->key_lit), deadline_us, &res, "clearing the lock's row");
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    return rc;
}

int dlock__myt_list(dlock__mystore *p, const char *prefix, dlock__name_sink sink, void *arg,
                    int64_t deadline_us)
{
    dlock__myres res;
    char *lit = dlock__my_literal(prefix, 1);
    if (lit == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = run(p, dlock__sqlt_list(D, lit), deadline_us, &res, "listing the locks held");
    free(lit);
    if (rc != DLOCK_OK)
        return rc;
    if (res.rows[0] != NULL) {
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(res.rows[0])) != NULL) {
            if (row[0] != NULL && sink(arg, row[0], DLOCK__MUTEX) != 0)
                break;
        }
    }
    dlock__my_res_free(&res);
    return DLOCK_OK;
}
