/* SPDX-License-Identifier: MIT */
/* row.c - the MariaDB/MySQL backend's row mode (mode=row): a lock is
 * SELECT ... FOR UPDATE on the name's row of dlock_row, inside a
 * transaction that a connection of its own keeps open for the lock's whole
 * life (seed 003's pessimistic lock). README.md, "Row mode", has the
 * design; in short:
 *
 *   holder's connection: SET SESSION innodb_lock_wait_timeout = SLICE;
 *                        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
 *                        START TRANSACTION;
 *                        INSERT IGNORE INTO dlock_row ... WHERE NOT EXISTS (the row);
 *                        SELECT 1 FROM dlock_row WHERE name = K FOR UPDATE [NOWAIT]
 *   a pooled connection: the fence and the row's lease in dlock_fence
 *                        (session mode's table), autocommitted, under
 *                        GET_LOCK(N) as a session grant writes them
 *   release:             UPDATE dlock_fence SET expires = now ...; COMMIT
 *                        (on the holder's connection: the lease ends and
 *                        the row is let go in one commit)
 *
 * Fences: the holder's transaction is rolled back when its connection
 * dies, so nothing it writes there may carry the fence. The counter is
 * dlock_fence's, bumped by a committed statement on another connection
 * while the row is held: the next holder can only bump it after this
 * holder's transaction has ended, so fences strictly increase. The row's
 * lease there (renewed by the renewer on a pooled connection) makes the
 * next holder wait until a dead holder has been told (as in session mode),
 * and keeps table and session modes off the name meanwhile (one lock per
 * name across the three modes). */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../sqltable/sqltable.h"
#include "my.h"

#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SLICE_US         20000    /* a shorter slice is a try */
#define MAX_SLICE_US         60000000 /* a wait blocked in the server goes round after that */
#define GUARD_S              "0.05"   /* a waiter's wait for the name's GET_LOCK guard */
#define ER_LOCK_NOWAIT_MYSQL 3572     /* MySQL 8's NOWAIT refusal (MariaDB: 1205) */

/* ---------------------------------------------------------------- helpers */

/* How long a cancelled wait's connection waits for its KILL QUERY to be
 * answered before it is closed instead (us). */
#define KILL_SETTLE_US 1000000

/* The holder's connection ends its transaction (how: ROLLBACK, or COMMIT)
 * and goes back to the pool, or is closed (no answer, or a KILL QUERY
 * still not answered after KILL_SETTLE_US). A cancelled wait's KILL is
 * waited for, then the transaction ends on the connection: closed at
 * once, the server ended the killed statement on its own time, and a
 * count of the name's waiters made just after the cancel returned still
 * saw it (conformance query_state in row mode, under TSan). A KILL that
 * came after its statement's end ends the next one: then once more. */
static void end_transaction(dlock__mystore *p, dlock__myconn *c, const char *how, int64_t deadline)
{
    dlock__myres res;
    int64_t settle = dlock__now_us() + KILL_SETTLE_US;
    if (settle > deadline)
        settle = deadline;
    while (dlock__my_kill_in_flight(c) && dlock__now_us() < settle)
        dlock__sleep_until(dlock__now_us() + 1000);
    if (dlock__my_kill_in_flight(c)) {
        dlock__my_discard(p, c, "closed after a cancelled attempt");
        return;
    }
    int ok = 0;
    for (int i = 0; i < 2 && !ok; i++) {
        int rc = dlock__my_exec(p, c, how, deadline, NULL, NULL, &res);
        ok = rc == DLOCK_OK && res.err == 0;
        int interrupted = rc == DLOCK_OK && res.err == ER_QUERY_INTERRUPTED;
        if (rc == DLOCK_OK)
            dlock__my_res_free(&res);
        if (!interrupted)
            break;
    }
    if (ok)
        dlock__my_put(p, c);
    else
        dlock__my_discard(p, c, "closed after a failed attempt");
}

static void roll_back(dlock__mystore *p, dlock__myconn *c, int64_t deadline)
{
    end_transaction(p, c, "ROLLBACK", deadline);
}

/* A pooled connection whose request may have left it holding the name's
 * GET_LOCK guard lets go of it, or is closed. */
static void put_guard(dlock__mystore *p, dlock__myconn *o, int64_t deadline)
{
    dlock__myres res;
    int rc = dlock__my_exec(p, o, "DO RELEASE_ALL_LOCKS()", deadline, NULL, NULL, &res);
    int ok = rc == DLOCK_OK && res.err == 0;
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    if (ok)
        dlock__my_put(p, o);
    else
        dlock__my_discard(p, o, "closed after a failed grant");
}

/* Sleeps until `until`, asking cancelled() every 50 ms: 1 if it said so. */
static int sleep_until(int64_t until, int (*cancelled)(void *), void *arg)
{
    for (;;) {
        int64_t now = dlock__now_us();
        if (cancelled != NULL && cancelled(arg))
            return 1;
        if (now >= until)
            return 0;
        dlock__sleep_until(until - now > 50000 ? now + 50000 : until);
    }
}

/* A wait blocked in FOR UPDATE ends at the caller's cancel (KILL QUERY),
 * and at the slice's end: in the server on MariaDB (max_statement_time, in
 * fractional seconds), by KILL QUERY on MySQL (innodb_lock_wait_timeout is
 * whole seconds: end_us set). */
struct wait_end {
    int (*cancelled)(void *);
    void *arg;
    int64_t end_us; /* 0: none */
    int timed_out;  /* ended at end_us */
};

static int wait_over(void *arg)
{
    struct wait_end *w = arg;
    if (w->cancelled != NULL && w->cancelled(w->arg))
        return 1;
    if (w->end_us != 0 && dlock__now_us() >= w->end_us) {
        w->timed_out = 1;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- acquire */

/* The grant's second step, on a pooled connection: the fence bumped and
 * the row's lease written in dlock_fence for the holder's connection c,
 * under the name's GET_LOCK (as session mode's grant and table mode's take
 * write theirs: table.c, dlock__my_grant_sql) and only if no lease runs
 * there nor table mode's holder's (nothing written otherwise: a waiter
 * consumes no fence). Fills
 * *state: 1 the lease is ours (*fence), 0 another holder's lease runs
 * (*left_ms), -1 the name is held in another mode or its guard is busy. */
static int grant(dlock__mystore *p, dlock__mylock *l, dlock__myconn *c, const char *token,
                 int block, int64_t deadline, int *state, uint64_t *fence, int64_t *left_ms)
{
    char conn[24];
    snprintf(conn, sizeof conn, "%lu", c->id);
    char *sql = dlock__my_grant_sql(p, l, block ? GUARD_S : "0", conn, c->nonce, token, 1, 1);
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__myconn *o;
    int rc = dlock__my_get(p, deadline, &o);
    if (rc != DLOCK_OK) {
        free(sql);
        return rc;
    }
    dlock__myres res;
    rc = dlock__my_exec(p, o, sql, deadline, NULL, NULL, &res);
    free(sql);
    if (rc != DLOCK_OK) {
        dlock__my_discard(p, o, "closed: a grant got no answer");
        return rc;
    }
    const char *got = dlock__my_value(&res, 0, 0), *mine = dlock__my_value(&res, 3, 0),
               *f = dlock__my_value(&res, 3, 1), *left = dlock__my_value(&res, 3, 2);
    if (res.err == ER_NO_SUCH_TABLE) {
        dlock__my_res_free(&res);
        put_guard(p, o, deadline);
        rc = dlock__myt_remake(p, deadline);
        *state = -1;
        return rc;
    }
    if (res.err != 0) {
        rc = dlock__my_fail(p, &res, "writing the row lock's fence (dlock_fence)");
        dlock__my_res_free(&res);
        put_guard(p, o, deadline);
        return rc;
    }
    int64_t ms = left != NULL ? strtoll(left, NULL, 10) : 0;
    if (got == NULL || strcmp(got, "1") != 0 || f == NULL) {
        /* a session holder, a table take in flight */
        *state = -1;
    } else if (mine != NULL && strcmp(mine, "1") == 0) {
        *state = 1;
        *fence = strtoull(f, NULL, 10);
    } else if (ms > 0 && (mine == NULL || strcmp(mine, "1") != 0)) {
        /* nothing written: another holder's lease runs (its connection
         * dropped: it may not know yet) */
        *state = 0;
        *left_ms = ms;
    } else {
        /* nothing written: table mode's holder */
        *state = -1;
    }
    dlock__my_res_free(&res);
    dlock__my_put(p, o); /* (its guard let go by the request's last statement) */
    return DLOCK_OK;
}

/* The first step, on the holder's connection: the row taken (FOR UPDATE),
 * waiting in the server until slice_end at most. *got: 1 the row is ours
 * (the transaction open), 0 held (the connection given back), -1 the row
 * is missing (made, the connection given back: try again). A cancelled or
 * timed-out wait leaves *got 0 with the connection closed. */
static int take_row(dlock__mystore *p, dlock__mylock *l, dlock__myconn *c, dlock__attempt *a,
                    int block, int64_t slice_end, int64_t bound, int *got)
{
    size_t len = 3 * strlen(l->key_lit) + strlen(l->name_lit) + 700;
    char *sql = malloc(len), statement_time[80] = "";
    if (sql == NULL) {
        dlock__my_put(p, c);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    int64_t now = dlock__now_us();
    int64_t slice_us = slice_end - now > 1000 ? slice_end - now : 1000;
    const char *server = mysql_get_server_info(c->m);
    int maria = server != NULL && strstr(server, "MariaDB") != NULL;
    /* (a try: 0, no wait at all, on MariaDB; MySQL's least is 1 s) */
    long long slice_s = block ? (slice_us + 999999) / 1000000 : maria ? 0 : 1;
    if (block && maria) {
        /* the server ends the wait on time; its lock wait timeout later */
        snprintf(statement_time, sizeof statement_time,
                 "SET STATEMENT max_statement_time = %lld.%06lld FOR ",
                 (long long) (slice_us / 1000000), (long long) (slice_us % 1000000));
        slice_s++;
    }
    /* The row is made inside the transaction when it is not there (the
     * name's first use): it is then ours, and committed with the release.
     * NOT EXISTS is a consistent read under READ COMMITTED, so when the row
     * is there (always, after the first use) the INSERT takes no lock and
     * never waits; a first use racing another waits for the other's
     * transaction there, as its FOR UPDATE would. (An INSERT IGNORE
     * outside the transaction waited for the S lock of its duplicate
     * check behind the holder: the fault suite's first tries of a name
     * ran into the command timeout.) */
    snprintf(sql, len,
             "SET SESSION innodb_lock_wait_timeout = %lld; "
             "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; "
             "%sINSERT IGNORE INTO dlock_row (name, lock_name) SELECT %s, %s FROM DUAL WHERE NOT "
             "EXISTS (SELECT 1 FROM dlock_row WHERE name = %s); "
             "%sSELECT 1 FROM dlock_row WHERE name = %s FOR UPDATE%s",
             slice_s, statement_time, l->key_lit, l->name_lit, l->key_lit, statement_time,
             l->key_lit, block ? "" : " NOWAIT");
    struct wait_end we = {
        .cancelled = a->cancelled, .arg = a->cancel_arg, .end_us = block && !maria ? slice_end : 0};
    dlock__my_watch watch = {
        .every_us = p->timeout_ms * 1000 / 2, .bound_us = p->timeout_ms * 1000, .asked_us = now};
    dlock__myres res;
    *got = 0;
    int rc = dlock__my_exec_watched(p, c, sql, bound, block ? wait_over : NULL, &we,
                                    block ? &watch : NULL, &res);
    free(sql);
    a->due_us = watch.asked_us;
    if (rc != DLOCK_OK) {
        dlock__my_discard(p, c, "closed: an attempt got no answer");
        /* a wait ended at its slice's end by KILL QUERY whose answer was
         * late: closing the connection ended it (the server was answering
         * the watch), so it is a wait that ran out, not an outage */
        if (rc == DLOCK_EUNREACHABLE && we.timed_out && !watch.silent)
            rc = DLOCK_OK;
        return rc;
    }
    if (res.err == 0 && !res.killed && res.n == 5) {
        *got = res.rows[4] != NULL && mysql_num_rows(res.rows[4]) == 1 ? 1 : -1;
        dlock__my_res_free(&res);
        if (*got == 1)
            return DLOCK_OK;
        /* the row went between the two (an operator deleted it): again */
        roll_back(p, c, bound);
        return DLOCK_OK;
    }
    unsigned err = res.err;
    int killed = res.killed;
    if (err != 0 && !killed && err != ER_LOCK_WAIT_TIMEOUT && err != ER_LOCK_NOWAIT_MYSQL &&
        err != ER_LOCK_DEADLOCK && err != ER_QUERY_INTERRUPTED && err != ER_NO_SUCH_TABLE &&
        err != ER_STATEMENT_TIMEOUT) {
        rc = dlock__my_fail(p, &res, "taking the lock's row (SELECT ... FOR UPDATE)");
        dlock__my_res_free(&res);
        roll_back(p, c, bound);
        return rc;
    }
    dlock__my_res_free(&res);
    roll_back(p, c, bound);
    if (err == ER_NO_SUCH_TABLE) {
        rc = dlock__myt_remake(p, a->deadline_us);
        *got = -1;
    }
    return rc;
}

int dlock__myr_acquire(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a)
{
    dlock__myconn *c;
    int64_t now = dlock__now_us();
    /* The slice (backend.h): the whole wait, up to MAX_SLICE_US, blocked in
     * the server's queue of the row; the request bounded by the slice's
     * end and a fifth of a command timeout, or the core's bound when later. */
    int64_t reserve = p->timeout_ms * 1000 / 5;
    int64_t slice_end = a->wait_until_us;
    if (slice_end - now > MAX_SLICE_US)
        slice_end = now + MAX_SLICE_US;
    int block = a->wait && slice_end - now >= MIN_SLICE_US;
    int64_t bound = a->deadline_us;
    if (block && slice_end + reserve > bound)
        bound = slice_end + reserve;
    a->due_us = now;
    /* (a row hold ends with its holder's session, or its lease: never
     * "no lease", though the row says not when) */
    a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
    int rc = dlock__myt_other_table(p, a->deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    int got = -1;
    for (int round = 0; round < 2 && got == -1; round++) {
        rc = dlock__my_get(p, a->deadline_us, &c);
        if (rc != DLOCK_OK)
            return rc;
        rc = take_row(p, l, c, a, block, slice_end, bound, &got);
        if (rc != DLOCK_OK)
            return rc;
    }
    if (got != 1) {
        a->outcome = DLOCK__HELD;
        a->next = got == 0 ? DLOCK__NEXT_RETRY : DLOCK__NEXT_POLL;
        a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
        return DLOCK_OK;
    }
    /* the row is ours: the fence and the row's lease, waiting for a dead
     * holder's lease to end within the slice (the row kept meanwhile) */
    char *token = dlock__my_literal(a->token, 0);
    if (token == NULL) {
        roll_back(p, c, bound);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    int state = 0;
    uint64_t fence = 0;
    int64_t left_ms = 0;
    /* c stays ours (out of the pool) but is unlocked while the grant runs
     * on another connection: no thread holds two connections' mutexes at
     * once (ThreadSanitizer saw a lock-order inversion between the two
     * roles, swapped from one attempt to the next). The renewer may ping
     * c meanwhile; the reference keeps it while it could close it. */
    dlock__session *mine = c->session;
    dlock__session_ref(mine);
    pthread_mutex_unlock(&c->mu);
    for (;;) {
        /* (a request that does not block: one command timeout) */
        rc = grant(p, l, c, token, block, dlock__now_us() + p->timeout_ms * 1000, &state, &fence,
                   &left_ms);
        if (rc != DLOCK_OK || state != 0)
            break;
        int64_t end = dlock__now_us() + left_ms * 1000;
        if (!block || end > slice_end || sleep_until(end, a->cancelled, a->cancel_arg))
            break;
    }
    free(token);
    pthread_mutex_lock(&c->mu);
    if (rc == DLOCK_OK && state == 1 && (c->m == NULL || atomic_load(&c->lost))) {
        /* closed meanwhile (its session given up): the row went with it;
         * its lease, just written, ends by itself */
        state = 0;
        left_ms = DLOCK__TTL_UNKNOWN;
    }
    if (rc != DLOCK_OK || state != 1) {
        /* The row (made by this transaction at the name's first use) is
         * kept: rolled back, the next poll would make it again, a write
         * at every poll beside a session or table holder. The transaction
         * wrote nothing else. */
        end_transaction(p, c, rc == DLOCK_OK ? "COMMIT" : "ROLLBACK", bound);
        dlock__session_unref(mine); /* (after: c may be freed with it) */
        if (rc != DLOCK_OK)
            return rc;
        a->outcome = DLOCK__HELD;
        a->next = state == 0 ? DLOCK__NEXT_RETRY : DLOCK__NEXT_POLL;
        a->holder_ttl_ms = state == 0 ? left_ms : DLOCK__TTL_UNKNOWN;
        return DLOCK_OK;
    }
    if ((c->held_lit = strdup(l->lit)) == NULL) {
        roll_back(p, c, bound);
        dlock__session_unref(mine);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    a->outcome = DLOCK__TAKEN;
    a->fence = fence;
    atomic_store(&c->holding, 1);
    l->conn = c;
    dlock__session_ref(c->session); /* the lock's */
    dlock__session_ref(c->session); /* the attempt's */
    a->session = c->session;
    pthread_mutex_unlock(&c->mu);
    dlock__session_unref(mine);
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- release, confirm */

/* The connection back to the pool (or closed), and the lock's reference to
 * its session with it. */
static void unbind(dlock__mystore *p, dlock__mylock *l, int discard, const char *why)
{
    dlock__myconn *c = l->conn;
    dlock__session *session = c->session;
    l->conn = NULL;
    if (discard)
        dlock__my_discard(p, c, why);
    else
        dlock__my_put(p, c);
    dlock__session_unref(session);
}

/* The row's lease ends and the row is let go in one commit. */
int dlock__myr_release(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us)
{
    if (l->conn == NULL)
        return dlock__fail(DLOCK_ELOST, "lock '%s' is not held here", l->name);
    dlock__myconn *c = l->conn;
    pthread_mutex_lock(&c->mu);
    if (c->m == NULL || atomic_load(&c->lost)) {
        unbind(p, l, 1, "its session was lost");
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost with its connection, which had closed",
                           l->name);
    }
    char sql[2000];
    snprintf(sql, sizeof sql,
             "UPDATE dlock_fence SET expires = UTC_TIMESTAMP(6) WHERE name = %s AND holder = "
             "'%s' AND expires > UTC_TIMESTAMP(6); COMMIT",
             l->lit, c->nonce);
    dlock__myres res;
    int rc = dlock__my_exec(p, c, sql, deadline_us, NULL, NULL, &res);
    if (rc != DLOCK_OK) {
        /* the connection is gone (and its transaction with it: the row was
         * let go when it went, maybe before the holder's work was done) */
        unsigned err = c->m != NULL ? mysql_errno(c->m) : 2006;
        int gone = rc == DLOCK_EUNREACHABLE && (err == 2006 || err == 2013 || err == 1927);
        char why[300];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        unbind(p, l, 1, "closed: a release got no answer");
        if (gone)
            return dlock__fail(DLOCK_ELOST, "lock '%s' was lost with its connection: %s", l->name,
                               why);
        return rc;
    }
    int discard = 0;
    if (res.err != 0) {
        rc = dlock__my_fail(p, &res, "releasing the row lock (COMMIT)");
        discard = 1;
    } else if (res.n < 2 || res.affected[0] != 1) {
        /* the row's lease had ended (the holder was frozen past it) or was
         * ended by force_unlock: another mode may have taken the name */
        rc = dlock__fail(DLOCK_ELOST, "lock '%s': its row's lease had ended", l->name);
    }
    dlock__my_res_free(&res);
    unbind(p, l, discard, "closed after a failed release");
    return rc;
}

/* Whether the lock's connection is open and its row's lease still runs
 * (READ COMMITTED: the transaction sees the renewer's commits). */
int dlock__myr_confirm(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us)
{
    if (l->conn == NULL)
        return dlock__fail(DLOCK_ELOST, "lock '%s' is not held here", l->name);
    dlock__myconn *c = l->conn;
    pthread_mutex_lock(&c->mu);
    char sql[1000];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM dlock_fence WHERE name = %s AND holder = '%s' AND expires > "
             "UTC_TIMESTAMP(6)",
             l->lit, c->nonce);
    dlock__myres res;
    int rc = c->m == NULL || atomic_load(&c->lost)
                 ? dlock__fail(DLOCK_ELOST,
                               "lock '%s' was lost with its connection, which had closed", l->name)
                 : dlock__my_exec(p, c, sql, deadline_us, NULL, NULL, &res);
    if (rc == DLOCK_EUNREACHABLE) {
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        dlock__my_discard(p, c, why);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
    }
    if (rc == DLOCK_OK) {
        const char *v = dlock__my_value(&res, 0, 0);
        if (res.err != 0)
            rc = dlock__my_fail(p, &res, "confirming the row lock");
        else if (v == NULL || strcmp(v, "1") != 0)
            rc = dlock__fail(DLOCK_ELOST, "lock '%s': its row's lease has ended", l->name);
        dlock__my_res_free(&res);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---------------------------------------------------------------- renewal */

static dlock__myconn *conn_of(const dlock__renewal *it)
{
    return it->session != NULL ? dlock__session_data(it->session) : NULL;
}

/* Every row hold's lease in one request on a pooled connection (the
 * holder's connection is inside its transaction: a write there would not
 * be seen by others until the release), then every connection pinged
 * (conn.c): two round trips for any number of holds. */
int dlock__myr_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    dlock__mystore *p = MYSTORE(s);
    size_t nh = 0, len = 300;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind == DLOCK__RENEW_HOLD && items[i].session != NULL) {
            nh++;
            len += 2 * strlen(MYLOCK(items[i].lock)->lit) + 120;
        }
    }
    char *live = NULL; /* per item: 1 its lease runs, 0 not, -1 unknown */
    if (nh > 0) {
        char *cond = malloc(len), *sql = malloc(2 * len + 400);
        live = malloc(n);
        if (cond == NULL || sql == NULL || live == NULL) {
            free(cond);
            free(sql);
            free(live);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        size_t used = 0;
        for (size_t i = 0; i < n; i++) {
            live[i] = -1;
            if (items[i].kind != DLOCK__RENEW_HOLD || items[i].session == NULL)
                continue;
            used += (size_t) snprintf(cond + used, len - used, "%s(name = %s AND holder = '%s')",
                                      used ? " OR " : "", MYLOCK(items[i].lock)->lit,
                                      conn_of(&items[i])->nonce);
        }
        snprintf(sql, 2 * len + 400,
                 "UPDATE dlock_fence SET expires = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND "
                 "WHERE (%s) AND expires > UTC_TIMESTAMP(6); SELECT holder FROM dlock_fence "
                 "WHERE (%s) AND expires > UTC_TIMESTAMP(6)",
                 p->lease_us, cond, cond);
        free(cond);
        dlock__myres res;
        int rc = dlock__my_operate(p, sql, deadline_us, &res, "renewing row locks' leases");
        free(sql);
        if (rc == DLOCK_OK) {
            for (size_t i = 0; i < n; i++) {
                if (items[i].kind == DLOCK__RENEW_HOLD && items[i].session != NULL)
                    live[i] = 0;
            }
            MYSQL_ROW row;
            while (res.n >= 2 && res.rows[1] != NULL &&
                   (row = mysql_fetch_row(res.rows[1])) != NULL) {
                for (size_t i = 0; i < n; i++) {
                    if (live[i] == 0 && row[0] != NULL &&
                        strcmp(row[0], conn_of(&items[i])->nonce) == 0)
                        live[i] = 1;
                }
            }
            dlock__my_res_free(&res);
        }
    }
    int rc = dlock__my_renew(s, items, n, deadline_us);
    /* A hold whose lease is not its own any more is lost. A connection is
     * confirmed (its session's validity, which its holds live by) only
     * when a lease of it was renewed too: a connection alive whose lease
     * lapsed unseen could die the next moment, and the next holder would
     * not wait for it. (A hold released meanwhile finds its lease ended:
     * the core ignores it; its connection is not touched here.) */
    for (size_t i = 0; live != NULL && i < n; i++) {
        dlock__myconn *c = conn_of(&items[i]);
        if (c == NULL || items[i].result != DLOCK__RENEW_OK)
            continue;
        int confirmed = -2; /* -2: no row hold of c in the batch */
        for (size_t j = 0; j < n; j++) {
            if (items[j].kind == DLOCK__RENEW_HOLD && conn_of(&items[j]) == c && live[j] != -1)
                confirmed = confirmed == 1 || live[j] == 1 ? 1 : 0;
            else if (items[j].kind == DLOCK__RENEW_HOLD && conn_of(&items[j]) == c &&
                     confirmed == -2)
                confirmed = -1;
        }
        if (items[i].kind == DLOCK__RENEW_HOLD && live[i] == 0)
            items[i].result = DLOCK__RENEW_GONE;
        else if (confirmed == -1 || (confirmed == 0 && items[i].kind == DLOCK__RENEW_SESSION))
            items[i].result = DLOCK__RENEW_FAILED;
    }
    free(live);
    return rc;
}

/* ---------------------------------------------------------------- operators */

/* The row's holder (dlock_fence's lease: a session or table holder of the
 * name shows there too), its fence, the connections waiting in FOR UPDATE
 * on the row (those the user can see in the process list), and the lease
 * left: the row's (kept by a live holder's renewals; a holder whose
 * connection ended holds until it runs out, as the next taker waits for
 * it), NULL for a session holder whose connection has the named lock (it
 * holds as long as that connection). */
static int holder_of(dlock__mystore *p, dlock__mylock *l, int64_t deadline, dlock__myres *res)
{
    char hex[DLOCK__MY_NAME_MAX * 8 + 1], sql[3000];
    size_t n = 0;
    for (const unsigned char *t = (const unsigned char *) l->server_name; *t != '\0'; t++)
        n += (size_t) snprintf(hex + n, sizeof hex - n, "%02x", *t);
    hex[n] = '\0';
    snprintf(sql, sizeof sql,
             "SELECT f.owner, f.info, f.conn, (SELECT fence FROM dlock_fence WHERE name = %s), "
             "(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
             "AND INFO LIKE '%%FROM dlock_row WHERE name = X''%s''%%'), "
             "IF(IS_USED_LOCK(%s) <=> f.conn, NULL, " DLOCK__MY_MS_LEFT ") "
             "FROM (SELECT 1) d LEFT JOIN dlock_fence f ON f.name = %s AND f.expires > "
             "UTC_TIMESTAMP(6)",
             l->lit, hex, l->lit, l->lit);
    return dlock__my_operate(p, sql, deadline, res, "reading the row lock's holder");
}

/* holder_of(), and when no lease runs in dlock_fence, table mode's holder
 * of the name (one lock per name): *owner, *info (NULL: free), *lease_ms
 * (-1: none to tell, see holder_of). other: free it. */
static int holder_in_any_mode(dlock__mystore *p, dlock__mylock *l, int64_t deadline,
                              dlock__myres *res, dlock__myres *other, const char **owner,
                              const char **info, int64_t *lease_ms)
{
    int rc = holder_of(p, l, deadline, res);
    if (rc != DLOCK_OK)
        return rc;
    const char *left = dlock__my_value(res, 0, 5);
    *owner = dlock__my_value(res, 0, 0);
    *info = dlock__my_value(res, 0, 1);
    *lease_ms = *owner != NULL && left != NULL ? strtoll(left, NULL, 10) : -1;
    return dlock__my_other_holder(p, l, deadline, res, other, owner, info, lease_ms);
}

int dlock__myr_query(dlock__mystore *p, dlock__mylock *l, dlock_status *st, int64_t deadline_us)
{
    dlock__myres res, other;
    const char *owner, *info;
    memset(st, 0, sizeof *st);
    int rc = holder_in_any_mode(p, l, deadline_us, &res, &other, &owner, &info, &st->lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    const char *fence = dlock__my_value(&res, 0, 3), *waiters = dlock__my_value(&res, 0, 4);
    st->last_fence = dlock__my_last_fence(fence, &other);
    st->waiters = waiters != NULL ? (unsigned) strtoul(waiters, NULL, 10) : 0;
    if (owner != NULL) {
        st->held = 1;
        st->holds = 1;
        snprintf(st->owner, sizeof st->owner, "%s", owner);
    }
    dlock__my_res_free(&res);
    dlock__my_res_free(&other);
    return DLOCK_OK;
}

int dlock__myr_holders(dlock__mystore *p, dlock__mylock *l, dlock__holder_sink sink, void *arg,
                       int64_t deadline_us)
{
    dlock__myres res, other;
    const char *owner, *info;
    int64_t lease_ms;
    int rc = holder_in_any_mode(p, l, deadline_us, &res, &other, &owner, &info, &lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    if (owner != NULL) {
        dlock__holder_raw h = {.owner = owner, .count = 1, .info = info};
        (void) sink(arg, &h);
    }
    dlock__my_res_free(&res);
    dlock__my_res_free(&other);
    return DLOCK_OK;
}

/* The holder in session or row mode, whichever URL asks (one lock per name:
 * README.md): the connection of dlock_fence's row whose lease runs (a row
 * holder, which has no named lock; a session holder, which has both; a
 * holder whose connection ended), else the connection that has the named
 * lock (a session holder whose lease lapsed, or code of its own with
 * names=exact). Its lease is ended and its connection killed (KILL
 * CONNECTION: a row holder's transaction rolls back and the row goes to
 * the next waiter, a session holder's named lock is let go), then this
 * waits until the connection is gone. A holder whose connection has
 * already ended (KILL answers "Unknown thread id") loses only its lease,
 * and the next taker takes the name at once. KILL needs the holder's
 * user, or CONNECTION ADMIN / SUPER: without it, an error says so. The
 * fence is not touched. Before, each mode acted on its own holders only:
 * session mode's force of a row holder ended its lease but left the row
 * locked, and neither touched table mode (mysql.c). */
int dlock__my_force_fenced(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us)
{
    dlock__myres res;
    char sql[2000], id[32];
    int64_t cap = dlock__now_us() + p->timeout_ms * 1000;
    if (deadline_us > cap)
        deadline_us = cap;
    snprintf(sql, sizeof sql,
             "SELECT COALESCE((SELECT conn FROM dlock_fence WHERE name = %s AND expires > "
             "UTC_TIMESTAMP(6)), IS_USED_LOCK(%s))",
             l->lit, l->lit);
    int rc = dlock__my_operate(p, sql, deadline_us, &res, "reading the lock's holder");
    if (rc != DLOCK_OK)
        return rc;
    const char *v = dlock__my_value(&res, 0, 0);
    snprintf(id, sizeof id, "%s", v != NULL ? v : "");
    dlock__my_res_free(&res);
    if (id[0] == '\0')
        return DLOCK_OK;
    snprintf(sql, sizeof sql,
             "UPDATE dlock_fence SET expires = UTC_TIMESTAMP(6) WHERE name = %s AND conn = %s AND "
             "expires > UTC_TIMESTAMP(6); KILL CONNECTION %s",
             l->lit, id, id);
    rc = dlock__my_operate(p, sql, deadline_us, &res, "ending the holder's connection (KILL)");
    if (rc != DLOCK_OK && !strstr(dlock_errmsg(), "Unknown thread id")) {
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        return dlock__fail(rc,
                           "%s: lock '%s' is still held by MariaDB connection %s: %s (KILL needs "
                           "the holder's user, or CONNECTION ADMIN / SUPER)",
                           p->label, l->name, id, why);
    }
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    /* the killed connection lets go when its thread sees the kill */
    snprintf(sql, sizeof sql,
             "SELECT COALESCE(IS_USED_LOCK(%s), 0) = %s OR EXISTS (SELECT 1 FROM "
             "information_schema.PROCESSLIST WHERE ID = %s)",
             l->lit, id, id);
    for (;;) {
        rc = dlock__my_operate(p, sql, deadline_us, &res, "reading the holder's connection");
        if (rc != DLOCK_OK)
            return rc;
        v = dlock__my_value(&res, 0, 0);
        int still = v != NULL && strcmp(v, "0") != 0;
        dlock__my_res_free(&res);
        if (!still)
            return DLOCK_OK;
        if (dlock__now_us() + 20000 >= deadline_us)
            return dlock__fail(DLOCK_ETIMEDOUT,
                               "%s: lock '%s': its holder's connection %s did not end in time",
                               p->label, l->name, id);
        dlock__sleep_until(dlock__now_us() + 10000);
    }
}

/* The names of dlock_fence under prefix whose row meets `live` (an SQL
 * condition on it): the list of row mode and of session mode; and table
 * mode's held and waited-for names when its table is there (one lock per
 * name: status names a table holder through these URLs too). */
int dlock__my_list_fenced(dlock__mystore *p, const char *prefix, const char *live,
                          dlock__name_sink sink, void *arg, int64_t deadline_us)
{
    int rc = dlock__myt_other_table(p, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    char *lit = dlock__my_literal(prefix, 1);
    if (lit == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *table =
        atomic_load(&p->other_table) == 1 ? dlock__sqlt_list(DLOCK__SQLT_MARIADB, lit) : strdup("");
    size_t len = strlen(lit) * 2 + strlen(live) + (table != NULL ? strlen(table) : 0) + 200;
    char *sql = table != NULL ? malloc(len) : NULL;
    if (sql == NULL) {
        free(lit);
        free(table);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    snprintf(sql, len,
             "SELECT n, MAX(k) FROM (SELECT lock_name AS n, 0 AS k FROM dlock_fence WHERE "
             "LEFT(lock_name, LENGTH(%s)) = %s AND (%s)%s%s) x GROUP BY n",
             lit, lit, live, table[0] != '\0' ? " UNION " : "", table);
    free(lit);
    free(table);
    dlock__myres res;
    rc = dlock__my_operate(p, sql, deadline_us, &res, "listing the locks held (dlock_fence)");
    free(sql);
    if (rc != DLOCK_OK)
        return rc;
    if (res.rows[0] != NULL) {
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(res.rows[0])) != NULL) {
            /* (k: 1 for a name table mode's read-write lock holds, 2 a
             * semaphore) */
            enum dlock__kind kind = row[1] == NULL             ? DLOCK__MUTEX
                                    : strcmp(row[1], "2") == 0 ? DLOCK__SEMAPHORE
                                    : strcmp(row[1], "1") == 0 ? DLOCK__WRITE
                                                               : DLOCK__MUTEX;
            /* a kind this URL cannot ask about (session and row modes have
             * the mutex only) is listed as one, which its status shows */
            if ((kind == DLOCK__SEMAPHORE && !(p->base.caps & DLOCK_CAP_SEMAPHORE)) ||
                (kind == DLOCK__WRITE && !(p->base.caps & DLOCK_CAP_READ_WRITE)))
                kind = DLOCK__MUTEX;
            if (row[0] != NULL && sink(arg, row[0], kind) != 0)
                break;
        }
    }
    dlock__my_res_free(&res);
    return DLOCK_OK;
}

/* The names whose row lease runs (held in row mode, or in session mode), and
 * table mode's. */
int dlock__myr_list(dlock__mystore *p, const char *prefix, dlock__name_sink sink, void *arg,
                    int64_t deadline_us)
{
    return dlock__my_list_fenced(p, prefix, "expires > UTC_TIMESTAMP(6)", sink, arg, deadline_us);
}
