/* SPDX-License-Identifier: MIT */
/* bell.c - table mode's bell: a contended holder's wake-up for the waiters
 * near the head of its line, and the waiters' looks (README.md, "The
 * bell").
 *
 * MariaDB cannot notify, so a table-mode waiter polled with takes, each
 * under the name's guard and writing its waiter row, and with 8 processes
 * on one name the first in line waited behind the others' takes (108
 * hand-overs a second). A holder that waited for its lock (others are
 * likely to wait for it) holds a named lock of its hold, its bell, from
 * the take's transaction on, on a connection kept out of the pool, and
 * lets go of it after its release. A waiter looks with reads only; near
 * the head of the line it waits in the server for the holder's bell
 * (GET_LOCK) and looks again as soon as it is let go of: at the release,
 * when the holder's connection ends, or when a force-unlock kills that
 * connection. Only the first in line of a free row takes. The bell is a
 * hint, never the lock: the row decides, and a waiter that finds no bell
 * rung for a live holder polls as before.
 *
 * The bell's name comes from the row (its key and fence), so it is new at
 * every take: one left over from an older hold is never waited for. The
 * take's transaction holds it before it commits, so a waiter that sees the
 * row sees its bell held; a release lets the row go before the bell, so a
 * waiter that finds the bell free and the row still the same holder's
 * knows the holder rang none (it took the lock without a wait, or its
 * bell's connection ended) and polls. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../sqltable/sqltable.h"
#include "my.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BELL_OF_ROW DLOCK__MYB_BELL_OF_ROW
/* A live holder's row of key (%s). */
#define LIVE_ROW                                                                                   \
    "FROM " DLOCK__SQLT_TABLE " WHERE name = %s AND owner <> '' AND expires > UTC_TIMESTAMP(6)"

#define MIN_WAIT_US 20000   /* a shorter wait polls */
#define MAX_WAIT_US 1000000 /* looked at again after that (a force-unlock the bell missed) */
#define MAX_ROUNDS  16      /* looks after a ring, at most, before a take */

char *dlock__myb_take_column(const char *owner)
{
    size_t len = strlen(owner) + 200;
    char *col = malloc(len);
    if (col != NULL)
        snprintf(col, len, "IF(owner = %s, GET_LOCK(" BELL_OF_ROW ", 0), NULL)", owner);
    return col;
}

void dlock__myb_hold(dlock__mylock *l, dlock__myconn *c)
{
    dlock__session_ref(c->session); /* the bell's (conn.c: the renewer may close it) */
    l->bell = c;
    pthread_mutex_unlock(&c->mu);
}

void dlock__myb_let_go(dlock__mystore *p, dlock__mylock *l, int close, int64_t deadline_us)
{
    dlock__myconn *c = l->bell;
    if (c == NULL)
        return;
    l->bell = NULL;
    dlock__session *session = c->session;
    pthread_mutex_lock(&c->mu);
    dlock__myres res;
    int64_t cap = dlock__now_us() + p->timeout_ms * 1000;
    int ok = !close && c->m != NULL && !atomic_load(&c->lost) &&
             dlock__my_exec(p, c, "DO RELEASE_ALL_LOCKS()", deadline_us < cap ? deadline_us : cap,
                            NULL, NULL, &res) == DLOCK_OK;
    if (ok) {
        ok = res.err == 0;
        dlock__my_res_free(&res);
    }
    if (ok)
        dlock__my_put(p, c);
    else
        dlock__my_discard(p, c,
                          close ? "closed: its bell's hold ended"
                                : "closed: its bell could not be let go of");
    dlock__session_unref(session);
}

void dlock__myb_silence(dlock__mystore *p, const dlock__myres *res, int64_t deadline_us)
{
    const char *bell = res->n > 0 ? dlock__my_value(res, res->n - 1, 0) : NULL;
    const char *id = res->n > 0 ? dlock__my_value(res, res->n - 1, 1) : NULL;
    if (bell == NULL || id == NULL || strspn(id, "0123456789") != strlen(id) ||
        strspn(bell, "dlock%.0123456789abcdefABCDEF") != strlen(bell))
        return;
    /* killed only if it holds that bell still, checked in the statement
     * that kills (its connection could go back to a pool otherwise, and
     * another request die with it); EXECUTE IMMEDIATE is MariaDB's */
    char sql[400];
    snprintf(sql, sizeof sql, "EXECUTE IMMEDIATE IF(IS_USED_LOCK('%s') <=> %s, 'KILL %s', 'DO 0')",
             bell, id, id);
    dlock__myres out;
    if (dlock__my_operate(p, sql, deadline_us, &out, "ending a force-unlocked hold's bell") ==
        DLOCK_OK)
        dlock__my_res_free(&out);
}

/* The wait's request (owner: the waiter's, its line's place): first the
 * live holder's bell (@dlock_b), its lease left in ms and the waiters
 * ahead; then one answer: 2 when the name is free and the waiter first in
 * line, 3 when it is free for an older waiter, -1 when the holder rang no
 * bell, 1 when the holder changed meanwhile, else GET_LOCK's (1 rung, 0
 * the wait's end, NULL killed); the bell let go of at once. */
static char *wait_sql(const dlock__mylock *l, const char *owner, int64_t wait_ms)
{
    char *older = dlock__sqlt_older(DLOCK__SQLT_MARIADB, l->key_lit, owner);
    size_t len = older != NULL ? 4 * strlen(l->key_lit) + strlen(older) + 1200 : 0;
    char *sql = older != NULL ? malloc(len) : NULL;
    if (sql != NULL)
        snprintf(sql, len,
                 "SELECT @dlock_b := (SELECT " BELL_OF_ROW " " LIVE_ROW
                 "), @dlock_l := (SELECT " DLOCK__MY_MS_LEFT " " LIVE_ROW "), %s; "
                 "SELECT IF(@dlock_b IS NULL, IF(%s = 0, 2, 3), IF(IS_USED_LOCK(@dlock_b) IS NULL, "
                 "IF(EXISTS(SELECT 1 " LIVE_ROW " AND " BELL_OF_ROW " = @dlock_b), -1, 1), "
                 "GET_LOCK(@dlock_b, LEAST(%lld.%03lld, (@dlock_l + 1) / 1000)))); "
                 "DO IF(@dlock_b IS NULL, 0, RELEASE_LOCK(@dlock_b))",
                 l->key_lit, l->key_lit, older, older, l->key_lit, (long long) (wait_ms / 1000),
                 (long long) (wait_ms % 1000));
    free(older);
    return sql;
}

/* One look (and wait) on c, to end at the latest (blocked in the server,
 * watched, cancellable); DLOCK__BELL_FAILED when it could not be made or
 * was cut off (c may hold the bell then: closed), DLOCK__BELL_UNREACHED
 * (*failed: the request's error, said) when it got no answer. */
static int ask(dlock__mystore *p, dlock__myconn *c, const dlock__mylock *l, dlock__attempt *a,
               const char *owner, int64_t end, int64_t *left_ms, long *ahead, int *failed)
{
    int64_t now = dlock__now_us();
    char *sql = wait_sql(l, owner, end > now ? (end - now) / 1000 : 0);
    if (sql == NULL)
        return DLOCK__BELL_FAILED;
    int64_t bound = end + p->timeout_ms * 1000 / 5;
    if (bound < a->deadline_us)
        bound = a->deadline_us;
    dlock__my_watch watch = {
        .every_us = p->timeout_ms * 1000 / 2, .bound_us = p->timeout_ms * 1000, .asked_us = now};
    dlock__myres res;
    int rc = dlock__my_exec_watched(p, c, sql, bound, a->cancelled, a->cancel_arg, &watch, &res);
    a->due_us = watch.asked_us;
    free(sql);
    if (rc != DLOCK_OK) {
        *failed = rc;
        return DLOCK__BELL_UNREACHED;
    }
    int clean = res.err == 0 && !res.killed && res.n == 3 && !dlock__my_kill_in_flight(c);
    const char *v = dlock__my_value(&res, 1, 0), *left = dlock__my_value(&res, 0, 1),
               *older = dlock__my_value(&res, 0, 2);
    int answer = clean && v != NULL ? (int) strtol(v, NULL, 10) : DLOCK__BELL_FAILED;
    *left_ms = left != NULL ? strtoll(left, NULL, 10) : -1;
    *ahead = older != NULL ? strtol(older, NULL, 10) : DLOCK__SQLT_NEAR_HEAD;
    dlock__my_res_free(&res);
    return answer >= DLOCK__BELL_NONE && answer <= DLOCK__BELL_CLAIMED ? answer
                                                                       : DLOCK__BELL_FAILED;
}

int dlock__myb_wait(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a, const char *owner,
                    int block, int64_t *left_ms, long *ahead, int *failed)
{
    *failed = DLOCK_OK;
    int64_t now = dlock__now_us();
    int64_t end = block ? a->wait_until_us : now;
    /* the waiter's row lives by its takes: one at least every third of its
     * lease */
    int64_t row_end = l->took_us + p->base.host.cfg->waiter_lease_ms * 1000 / 3;
    if (end > row_end)
        end = row_end;
    if (end > now + MAX_WAIT_US)
        end = now + MAX_WAIT_US;
    if (block && end - now < MIN_WAIT_US)
        return DLOCK__BELL_FAILED;
    dlock__myconn *c;
    if ((*failed = dlock__my_get(p, a->deadline_us, &c)) != DLOCK_OK)
        return DLOCK__BELL_UNREACHED;
    int answer;
    /* rung: the row looked at again (a take only for the first in line:
     * every waiter of the bell wakes) */
    for (int round = 0;
         (answer = ask(p, c, l, a, owner, end, left_ms, ahead, failed)) == DLOCK__BELL_RUNG &&
         round < MAX_ROUNDS && (!block || dlock__now_us() + MIN_WAIT_US < end);
         round++)
        ;
    if (!block && answer == DLOCK__BELL_END)
        answer = DLOCK__BELL_NONE; /* a look: the bell rings, for others */
    if (answer == DLOCK__BELL_UNREACHED)
        dlock__my_discard(p, c, "closed: a look at the lock's row got no answer");
    else if (answer == DLOCK__BELL_FAILED)
        dlock__my_discard(p, c, "closed: a wait for a bell was cut off"); /* may hold it */
    else
        dlock__my_put(p, c);
    return answer;
}
