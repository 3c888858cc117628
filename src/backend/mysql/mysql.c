/* SPDX-License-Identifier: MIT */
/* mysql.c - the MariaDB/MySQL backend (mysql://, mariadb://): the URL and
 * its mode, and session mode (mode=session): a lock is a GET_LOCK named
 * lock (README.md has the name mapping, the schema and what this mode
 * cannot do). The lock table (mode=table, the default) is table.c: each
 * step below hands it over first.
 *
 * An attempt takes a connection of the pool (conn.c) and, in one request
 * of four statements (table.c: dlock__my_grant_sql), takes the named lock
 * and bumps its fence counter under it, unless a lease runs in the row
 * (a row-mode holder, a holder whose connection dropped) or table mode's
 * row of the name has a live holder (the modes are one lock: README.md):
 *
 *   SELECT GET_LOCK(N, SLICE), (the session variables reset);
 *   UPDATE dlock_fence SET fence = IF(@w := the named lock is ours, the row's
 *     lease ended, no live dlock_lock row of N; GREATEST(fence + 1, dlock_lock's
 *     fence of N + 1), fence), (the rest if @w) WHERE name = N;
 *   INSERT INTO dlock_fence ... SELECT ... WHERE (no row of N) AND (the same);
 *   SELECT @w, the fence, ms left of the row's lease before,
 *     IF(the named lock is ours but the row was not written, RELEASE_LOCK(N), 0)
 *
 * The counter moves only while this connection holds the lock, and only
 * for a new holder, so fences strictly increase per GET_LOCK name and a
 * waiter consumes none. A lease found running is polled (the named lock
 * let go), bounded by what it has left, by a try; a blocking wait keeps
 * the named lock and waits it out in the server (its place in the queue
 * kept: README.md, "The row's lease"). A waiter blocks in the server for a
 * slice (GET_LOCK's timeout, in fractional seconds: backend.h, NEXT_RETRY)
 * that lasts its whole wait (up to MAX_SLICE_US), so it keeps its place in
 * the server's queue, while another connection asks the server every half
 * command timeout whether it still answers (conn.c: dlock__my_watch);
 * a try uses a timeout of 0 and blocks nowhere; dlock_cancel() reaches a
 * waiter by KILL QUERY from another connection (conn.c). After any failed
 * or cancelled attempt the connection lets go of everything
 * (RELEASE_ALL_LOCKS: it holds nothing else) or is closed. The connection
 * that took the lock holds it until the release: it leaves the pool, and
 * goes back after RELEASE_LOCK. */
#include "my.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT       3306
#define DEFAULT_CONNECT_MS 2000
#define MIN_SLICE_US       20000    /* a shorter slice is a try */
#define MAX_SLICE_US       60000000 /* a wait queued in the server goes round after that */
#define KEEP_NAP_MS        100      /* a kept named lock: the row's lease looked at again after */
#define COMMON_CAPS        (DLOCK_CAP_FENCE | DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY | DLOCK_CAP_LIST)
#define SESSION_CAPS       (COMMON_CAPS | DLOCK_CAP_NOTIFY | DLOCK_CAP_SESSION)
#define TABLE_CAPS                                                                                 \
    (COMMON_CAPS | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_ADOPT | DLOCK_CAP_FAIR |   \
     DLOCK_CAP_READ_WRITE | DLOCK_CAP_SEMAPHORE)

typedef dlock__mylock mylock;

extern const dlock__backend dlock__my_backend;

/* ---------------------------------------------------------------- locks */

/* Table mode's shared holds (read.c): readers, a semaphore's. */
static int shared_kind(const dlock__mylock *l)
{
    return l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__SEMAPHORE;
}

static int my_lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                       dlock__store_lock **out)
{
    dlock__mystore *p = MYSTORE(s);
    *out = NULL;
    mylock *l = calloc(1, sizeof *l);
    if (l == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__my_name(name, p->exact_names, l->server_name, sizeof l->server_name);
    if (rc != DLOCK_OK) {
        free(l);
        return rc;
    }
    l->base.spec = *spec;
    l->name = strdup(name);
    l->lit = dlock__my_literal(l->server_name, 0);
    l->name_lit = dlock__my_literal(name, 1);
    l->key_lit = dlock__my_literal(l->server_name, 1);
    if (l->name == NULL || l->lit == NULL || l->name_lit == NULL || l->key_lit == NULL) {
        free(l->name);
        free(l->lit);
        free(l->name_lit);
        free(l->key_lit);
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = &l->base;
    return DLOCK_OK;
}

/* The connection goes back to the pool (or is closed), and the lock's
 * reference to its session with it. */
static void unbind(dlock__mystore *p, mylock *l, int discard, const char *why)
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

static void my_lock_free(dlock__store *s, dlock__store_lock *sl)
{
    mylock *l = MYLOCK(sl);
    dlock__myb_let_go(MYSTORE(s), l, 1, 0);
    if (l->conn != NULL) {
        /* never released (the core releases before freeing): close it */
        pthread_mutex_lock(&l->conn->mu);
        unbind(MYSTORE(s), l, 1, "its lock handle was freed");
    }
    free(l->name);
    free(l->lit);
    free(l->name_lit);
    free(l->key_lit);
    free(l);
}

/* The hold stays in the server as long as its connection: the connection
 * stays open, out of the pool, until the client closes. */
static void my_detach(dlock__store *s, dlock__store_lock *sl)
{
    mylock *l = MYLOCK(sl);
    /* (a bell rings for a handle's hold: the waiters poll a detached one) */
    dlock__myb_let_go(MYSTORE(s), l, 1, 0);
    if (l->conn != NULL) {
        dlock__session *session = l->conn->session;
        l->conn = NULL;
        dlock__session_unref(session);
    }
}

/* ---------------------------------------------------------------- acquire */

/* After a failed or cancelled attempt on l: the connection lets go of
 * whatever the request may have taken before it failed, or is closed. A
 * KILL QUERY that came after the request's end may end the next statement
 * instead: then once more. A grant cut off after it wrote the name's row
 * (a cancel's KILL between its statements) left a row lease under this
 * connection's nonce, which nobody holds: it ends too, or the name would
 * look held, and be waited for, until that lease ran out. */
static void after_failure(dlock__mystore *p, dlock__myconn *c, dlock__mylock *l, int64_t deadline)
{
    dlock__myres res;
    char end_row[DLOCK__MY_NAME_MAX * 8 + 200];
    snprintf(end_row, sizeof end_row,
             "UPDATE dlock_fence SET expires = UTC_TIMESTAMP(6) WHERE name = %s AND holder = "
             "'%s' AND expires > UTC_TIMESTAMP(6)",
             l->lit, c->nonce);
    int ok = 0;
    if (dlock__my_kill_in_flight(c)) {
        /* closing it lets go of everything, and no later request meets
         * the KILL; the row's lease is ended on another connection */
        dlock__my_discard(p, c, "closed after a cancelled attempt");
        if (dlock__my_operate(p, end_row, deadline, &res, "ending a cancelled grant's row") ==
            DLOCK_OK)
            dlock__my_res_free(&res);
        return;
    }
    for (int i = 0; i < 2 && !ok; i++) {
        char sql[sizeof end_row + 64];
        snprintf(sql, sizeof sql, "%s; DO RELEASE_ALL_LOCKS()", end_row);
        int rc = dlock__my_exec(p, c, sql, deadline, NULL, NULL, &res);
        ok = rc == DLOCK_OK && res.err == 0;
        dlock__my_res_free(&res);
        if (rc != DLOCK_OK || (res.err != ER_QUERY_INTERRUPTED && !ok))
            break;
    }
    if (ok)
        dlock__my_put(p, c);
    else
        dlock__my_discard(p, c, "closed after a failed attempt");
}

static int my_acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *a)
{
    dlock__mystore *p = MYSTORE(s);
    mylock *l = MYLOCK(sl);
    dlock__myconn *c;

    if (p->table && shared_kind(l))
        return dlock__myt_read_acquire(p, l, a);
    if (p->table)
        return dlock__myt_acquire(p, l, a);
    if (l->conn != NULL) {
        /* the connection of a hold the core found lost (and so never
         * released here): closed, so that nothing of it lives on */
        pthread_mutex_lock(&l->conn->mu);
        unbind(p, l, 1, "closed: its lock was lost");
    }
    if (p->row)
        return dlock__myr_acquire(p, l, a);
    int64_t now = dlock__now_us();
    /* The slice (backend.h): the whole wait, up to MAX_SLICE_US, so the
     * waiter keeps its place in GET_LOCK's queue of the name (one that
     * left it at every command timeout and joined again at its back could
     * be overtaken for ever: issue 23); the server watched meanwhile. The
     * request is bounded by the slice's end and a fifth of a command
     * timeout for the reply (and what follows a grant), or the core's
     * bound when that is later (a short wait). */
    int64_t reserve = p->timeout_ms * 1000 / 5;
    int64_t slice_end = a->wait_until_us;
    if (slice_end - now > MAX_SLICE_US)
        slice_end = now + MAX_SLICE_US;
    int block = a->wait && slice_end - now >= MIN_SLICE_US;
    int64_t bound = a->deadline_us;
    if (block && slice_end + reserve > bound)
        bound = slice_end + reserve; /* (never shorter than the core's bound) */
    dlock__my_watch watch = {
        .every_us = p->timeout_ms * 1000 / 2, .bound_us = p->timeout_ms * 1000, .asked_us = now};
    a->due_us = now;
    int rc = dlock__myt_other_table(p, a->deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__my_get(p, a->deadline_us, &c);
    if (rc != DLOCK_OK)
        return rc;
    now = dlock__now_us();
    int64_t slice_ms = block ? (slice_end - now) / 1000 : 0;
    if (slice_ms < 0)
        slice_ms = 0;
    char *token = dlock__my_literal(a->token, 0), wait_s[48];
    snprintf(wait_s, sizeof wait_s, "%lld.%03lld", (long long) (slice_ms / 1000),
             (long long) (slice_ms % 1000));
    /* One lock per name across the modes (README.md): under the named
     * lock, the row is written only if no lease runs in dlock_fence (a
     * row-mode holder, a session holder whose connection dropped) nor in
     * table mode's row of the name (a take there holds the named lock
     * while it writes it, so every row written is seen) */
    int insert = !atomic_load(&l->row_seen);
    /* A blocking wait that finds a lease running in the row (a holder
     * whose connection dropped) keeps the named lock and waits the lease
     * out in the server, in naps of at most KEEP_NAP_MS (a row-mode
     * holder's lease is renewed: its release is seen within a nap):
     * letting go, every waiter queued behind it polled, and the first poll
     * after the lease's end took the name, whatever its place (issue 23;
     * test_mysql_lock waiter_keeps_place_after_kill). kept: the named
     * lock is this connection's from an earlier round. */
    int keep = block ? DLOCK__MY_KEEP_PLACE : DLOCK__MY_KEEP_OURS, kept = 0;
    dlock__myres res;
    const char *got, *mine, *fence, *left;
    for (;;) {
        char nap_s[48];
        if (kept) {
            now = dlock__now_us();
            int64_t nap_ms = kept > KEEP_NAP_MS ? KEEP_NAP_MS : kept;
            if (nap_ms > (slice_end - now) / 1000)
                nap_ms = (slice_end - now) / 1000;
            snprintf(nap_s, sizeof nap_s, "%lld.%03lld", (long long) (nap_ms / 1000),
                     (long long) (nap_ms % 1000));
        }
        char *sql = token == NULL ? NULL
                    : kept        ? dlock__my_regrant_sql(p, l, nap_s, c->nonce, token)
                           : dlock__my_grant_sql(p, l, wait_s, "CONNECTION_ID()", c->nonce, token,
                                                 keep, insert);
        if (sql == NULL) {
            if (kept)
                after_failure(p, c, l, bound);
            else
                dlock__my_put(p, c);
            free(token);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        rc = dlock__my_exec_watched(p, c, sql, bound, block ? a->cancelled : NULL, a->cancel_arg,
                                    block ? &watch : NULL, &res);
        /* silent, if it is, since the server was last asked (backend.h: due_us) */
        a->due_us = watch.asked_us;
        free(sql);
        if (rc != DLOCK_OK) {
            free(token);
            dlock__my_discard(p, c, "closed: an attempt got no answer");
            return rc;
        }
        got = dlock__my_value(&res, 0, 0);
        mine = dlock__my_value(&res, insert ? 3 : 2, 0);
        fence = dlock__my_value(&res, insert ? 3 : 2, 1);
        left = dlock__my_value(&res, insert ? 3 : 2, 2);
        if (keep == DLOCK__MY_KEEP_PLACE && res.err == 0 && !res.killed && got != NULL &&
            strcmp(got, "1") == 0 && mine != NULL && strcmp(mine, "0") == 0 && left != NULL &&
            strtoll(left, NULL, 10) > 0) {
            /* the named lock kept (the request's last statement): the
             * lease waited out on this connection, to the slice's end */
            kept = (int) strtoll(left, NULL, 10) + 1;
            insert = 0; /* (the row is there) */
            dlock__my_res_free(&res);
            if (dlock__now_us() / 1000 + 1 < slice_end / 1000)
                continue;
            /* the slice is over: let go, and round again (NEXT_RETRY) */
            free(token);
            after_failure(p, c, l, bound);
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_RETRY;
            a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
            return DLOCK_OK;
        }
        if (kept && (res.err != 0 || res.killed || got == NULL || strcmp(got, "1") != 0))
            break; /* cancelled in its nap, or failed: after_failure below */
        if (insert || kept || res.err != 0 || res.killed || got == NULL || strcmp(got, "1") != 0 ||
            mine == NULL || strcmp(mine, "-1") != 0)
            break;
        /* the name's row is gone (deleted by hand): sent again with the
         * INSERT (the GET_LOCK was let go by the request's last statement) */
        dlock__my_res_free(&res);
        insert = 1;
    }
    free(token);
    int ours = fence != NULL && mine != NULL && strcmp(mine, "1") == 0;
    atomic_store(&l->row_seen, fence != NULL);
    /* a session's lock ends with its holder's connection: not "no lease
     * (it never ends by itself)", which the trial read it as */
    a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
    if (res.err == 0 && !res.killed && got != NULL && strcmp(got, "1") == 0 &&
        res.n >= (insert ? 4 : 3) && !ours) {
        /* the named lock was ours and the row was not written: a lease
         * runs in dlock_fence (a row-mode holder, or a holder whose
         * connection dropped: it may not know yet), polled within what it
         * has left; or the name is held in table mode, whose lease is in
         * its own row: polled. The request's last statement let go of the
         * named lock: held while the poll waited, it would stop a row-mode
         * grant and look like the holder to status. */
        int64_t left_ms = left != NULL ? strtoll(left, NULL, 10) : 0;
        dlock__my_res_free(&res);
        if (dlock__my_kill_in_flight(c))
            after_failure(p, c, l, bound);
        else
            dlock__my_put(p, c);
        a->outcome = DLOCK__HELD;
        a->next = DLOCK__NEXT_POLL;
        a->holder_ttl_ms = left_ms > 0 ? left_ms : DLOCK__TTL_UNKNOWN;
        return DLOCK_OK;
    }
    if (res.err == 0 && !res.killed && got != NULL && strcmp(got, "1") == 0 && fence != NULL) {
        uint64_t fence_value = strtoull(fence, NULL, 10);
        dlock__my_res_free(&res);
        if ((c->held_lit = strdup(l->lit)) == NULL) {
            after_failure(p, c, l, bound);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        a->outcome = DLOCK__TAKEN;
        a->fence = fence_value;
        atomic_store(&c->holding, 1);
        l->conn = c;
        dlock__session_ref(c->session); /* the lock's */
        dlock__session_ref(c->session); /* the attempt's */
        a->session = c->session;
        pthread_mutex_unlock(&c->mu);
        return DLOCK_OK;
    }
    if (res.err == 0 && !res.killed && got != NULL && strcmp(got, "0") == 0 && !kept) {
        /* held by another: this connection holds nothing */
        dlock__my_res_free(&res);
        dlock__my_put(p, c);
    } else {
        /* cancelled (KILL QUERY), or a failure; a table found gone (the
         * database wiped or restored under the client) is made again, and
         * the attempt goes round again, as after InnoDB chose its write as
         * a deadlock's victim (rolled back: nothing written; the named lock
         * let go below). (The grant's upsert before 224dda4 read its own
         * table's gaps and deadlocked against another name's first grant:
         * dlock bench --workload par, error 1213.) */
        int gone = res.err == ER_NO_SUCH_TABLE;
        int slice_over =
            res.killed || gone || res.err == ER_LOCK_DEADLOCK || (kept && res.err == 0);
        if (!slice_over)
            rc = res.err != 0
                     ? dlock__my_fail(p, &res, "taking the named lock (GET_LOCK)")
                     : dlock__fail(DLOCK_ESERVER, "%s: GET_LOCK answered %s for lock '%s' (%s)",
                                   p->label, got ? got : "NULL", l->name, l->server_name);
        dlock__my_res_free(&res);
        after_failure(p, c, l, bound);
        if (!slice_over)
            return rc;
        if (gone && (rc = dlock__myt_remake(p, bound)) != DLOCK_OK)
            return rc;
    }
    a->outcome = DLOCK__HELD;
    a->next = DLOCK__NEXT_RETRY;
    return DLOCK_OK;
}

/* Session mode: nothing is queued in the server, a wait there ended with
 * its request. Table mode: the waiter's row goes. */
static int my_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline_us)
{
    if (MYSTORE(s)->table)
        return dlock__myt_cancel(MYSTORE(s), MYLOCK(sl), token, deadline_us);
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- release, extend */

static int my_release(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                      int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__mystore *p = MYSTORE(s);
    mylock *l = MYLOCK(sl);
    if (p->table && shared_kind(l))
        return dlock__myt_read_release(p, l, token, deadline_us);
    if (p->table)
        return dlock__myt_release(p, l, token, deadline_us);
    if (p->row)
        return dlock__myr_release(p, l, deadline_us);
    if (l->conn == NULL)
        return dlock__fail(DLOCK_ELOST, "lock '%s' is not held here", l->name);
    dlock__myconn *c = l->conn;
    pthread_mutex_lock(&c->mu);
    if (c->m == NULL || atomic_load(&c->lost)) {
        unbind(p, l, 1, "its session was lost");
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost with its connection, which had closed",
                           l->name);
    }
    /* the row's lease ends first, then the named lock: the next holder sees
     * the row ended */
    char sql[2000];
    snprintf(sql, sizeof sql,
             "UPDATE dlock_fence SET expires = UTC_TIMESTAMP(6) WHERE name = %s AND holder = "
             "'%s'; SELECT RELEASE_LOCK(%s)",
             l->lit, c->nonce, l->lit);
    dlock__myres res;
    int rc = dlock__my_exec(p, c, sql, deadline_us, NULL, NULL, &res);
    if (rc != DLOCK_OK) {
        /* The connection is gone (killed by the server: KILL, a shutdown;
         * or its link broke: 2006, 2013, MariaDB's 1927): the lock went
         * with it, maybe before the holder's work was done, so it is lost,
         * not merely unreleased. (No answer in time: closing the connection
         * lets go of the lock as soon as the server sees it.) */
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
    const char *v = dlock__my_value(&res, 1, 0);
    if (res.err != 0)
        rc = dlock__my_fail(p, &res, "releasing the named lock (RELEASE_LOCK)");
    else if (v == NULL || strcmp(v, "1") != 0)
        rc = dlock__fail(DLOCK_ELOST, "lock '%s': its connection no longer held it", l->name);
    dlock__my_res_free(&res);
    unbind(p, l, rc == DLOCK_ESERVER, "closed after a failed release");
    return rc;
}

/* Whether the lock's connection still holds its named lock. */
static int my_extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                     int64_t lease_ms, int at_least, int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__mystore *p = MYSTORE(s);
    mylock *l = MYLOCK(sl);
    if (p->table && shared_kind(l))
        return dlock__myt_read_extend(p, l, token, lease_ms, at_least, deadline_us);
    if (p->table)
        return dlock__myt_extend(p, l, token, lease_ms, at_least, deadline_us);
    if (p->row)
        return dlock__myr_confirm(p, l, deadline_us);
    if (l->conn == NULL)
        return dlock__fail(DLOCK_ELOST, "lock '%s' is not held here", l->name);
    dlock__myconn *c = l->conn;
    pthread_mutex_lock(&c->mu);
    char sql[1000];
    snprintf(sql, sizeof sql, "SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", l->lit);
    dlock__myres res;
    int rc = c->m == NULL || atomic_load(&c->lost)
                 ? dlock__fail(DLOCK_ELOST,
                               "lock '%s' was lost with its connection, which had closed", l->name)
                 : dlock__my_exec(p, c, sql, deadline_us, NULL, NULL, &res);
    if (rc == DLOCK_EUNREACHABLE) {
        /* the connection is gone, or left mid-request: the lock with it */
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        dlock__my_discard(p, c, why);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
    }
    if (rc == DLOCK_OK) {
        const char *v = dlock__my_value(&res, 0, 0);
        if (res.err != 0)
            rc = dlock__my_fail(p, &res, "confirming the named lock");
        else if (v == NULL || strcmp(v, "1") != 0)
            rc = dlock__fail(DLOCK_ELOST, "lock '%s': its connection no longer holds it", l->name);
        dlock__my_res_free(&res);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---------------------------------------------------------------- operators */

/* The holder of l: its connection id, owner token, info and the last
 * fence, and the number of connections waiting in GET_LOCK for it (those
 * the user can see in the process list: its own, or all with PROCESS),
 * and the one that has the named lock while another holder's row lease
 * runs (a waiter waiting the lease out, keeping its place: README.md;
 * before, status counted one waiter fewer).
 * A row whose lease still runs names the holder, whoever has the named
 * lock: a row-mode holder (which holds no named lock), a holder whose
 * connection dropped (README.md: the next taker waits for its lease), while
 * another connection has the named lock for a moment (a waiter's poll, a
 * row-mode grant). Else the named lock's connection is the holder. */
#define HOLDER_SQL                                                                                 \
    "SELECT h.id, f.owner, f.info, (SELECT fence FROM dlock_fence WHERE name = %s), "              \
    "(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND "          \
    "INFO LIKE '%%GET_LOCK(CONVERT(X''%s'' USING%%') + IFNULL(h.id IS NOT NULL AND f.expires > "   \
    "UTC_TIMESTAMP(6) AND NOT f.conn <=> h.id, 0), "                                               \
    "IF(f.conn <=> h.id, NULL, " DLOCK__MY_MS_LEFT ") "                                            \
    "FROM (SELECT IS_USED_LOCK(%s) AS id) h LEFT JOIN dlock_fence f ON f.name = %s AND "           \
    "(f.expires > UTC_TIMESTAMP(6) OR f.conn = h.id)"

static int holder_of(dlock__mystore *p, mylock *l, int64_t deadline, dlock__myres *res)
{
    char hex[DLOCK__MY_NAME_MAX * 8 + 1], sql[3000];
    size_t n = 0;
    for (const unsigned char *t = (const unsigned char *) l->server_name; *t != '\0'; t++)
        n += (size_t) snprintf(hex + n, sizeof hex - n, "%02x", *t);
    hex[n] = '\0';
    snprintf(sql, sizeof sql, HOLDER_SQL, l->lit, hex, l->lit, l->lit);
    return dlock__my_operate(p, sql, deadline, res, "reading the named lock's holder");
}

static const char *owner_of(const char *owner, const char *id, char *buf, size_t len)
{
    if (owner != NULL && owner[0] != '\0')
        snprintf(buf, len, "%s", owner);
    else
        snprintf(buf, len, "mysql connection %s", id);
    return buf;
}

/* holder_of(), and table mode's holder of the name when no row names one
 * (one lock per name: a connection that has the named lock for a moment
 * meanwhile is a table take in flight or a waiter's poll, not the
 * holder): *id (NULL: none, or table mode's holder), *owner, *info;
 * *lease_ms the lease left, or -1 while the holder's connection has the
 * named lock (the lock lives as long as that connection). A holder whose
 * connection ended (KILL, a crash) has no named lock, but its row's lease
 * runs, and the next taker waits for it: held, for that long (as
 * PostgreSQL's status after pg_terminate_backend). other: free it. */
static int holder_in_any_mode(dlock__mystore *p, mylock *l, int64_t deadline, dlock__myres *res,
                              dlock__myres *other, const char **id, const char **owner,
                              const char **info, int64_t *lease_ms)
{
    int rc = holder_of(p, l, deadline, res);
    if (rc != DLOCK_OK)
        return rc;
    const char *left = dlock__my_value(res, 0, 5);
    *id = dlock__my_value(res, 0, 0);
    *owner = dlock__my_value(res, 0, 1);
    *info = dlock__my_value(res, 0, 2);
    *lease_ms = *owner != NULL && left != NULL ? strtoll(left, NULL, 10) : -1;
    const char *named = *owner;
    rc = dlock__my_other_holder(p, l, deadline, res, other, owner, info, lease_ms);
    if (*owner != named)
        *id = NULL;
    return rc;
}

static int my_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline_us)
{
    dlock__myres res, other;
    const char *id, *owner, *info;
    if (MYSTORE(s)->table)
        return dlock__myt_query(MYSTORE(s), MYLOCK(sl), st, deadline_us);
    if (MYSTORE(s)->row)
        return dlock__myr_query(MYSTORE(s), MYLOCK(sl), st, deadline_us);
    memset(st, 0, sizeof *st);
    int rc = holder_in_any_mode(MYSTORE(s), MYLOCK(sl), deadline_us, &res, &other, &id, &owner,
                                &info, &st->lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    const char *fence = dlock__my_value(&res, 0, 3), *waiters = dlock__my_value(&res, 0, 4);
    st->last_fence = dlock__my_last_fence(fence, &other);
    st->waiters = waiters != NULL ? (unsigned) strtoul(waiters, NULL, 10) : 0;
    if (id != NULL || owner != NULL) {
        st->held = 1;
        st->holds = 1;
        owner_of(owner, id, st->owner, sizeof st->owner);
    }
    dlock__my_res_free(&res);
    dlock__my_res_free(&other);
    return DLOCK_OK;
}

static int my_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline_us)
{
    dlock__myres res, other;
    const char *id, *owner, *info;
    if (MYSTORE(s)->table)
        return dlock__myt_holders(MYSTORE(s), MYLOCK(sl), sink, arg, deadline_us);
    if (MYSTORE(s)->row)
        return dlock__myr_holders(MYSTORE(s), MYLOCK(sl), sink, arg, deadline_us);
    int64_t lease_ms;
    int rc = holder_in_any_mode(MYSTORE(s), MYLOCK(sl), deadline_us, &res, &other, &id, &owner,
                                &info, &lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    if (id != NULL || owner != NULL) {
        char buf[300];
        dlock__holder_raw h = {.owner = owner_of(owner, id, buf, sizeof buf),
                               .count = 1,
                               .info = owner != NULL ? info : NULL};
        (void) sink(arg, &h);
    }
    dlock__my_res_free(&res);
    dlock__my_res_free(&other);
    return DLOCK_OK;
}

/* One lock per name (README.md): the holder is released in whichever mode
 * it holds, whatever the URL's mode, as status names it in any. Table
 * mode's row is cleared (its fence kept), and a session or row holder's
 * connection killed (row.c: dlock__my_force_fenced). Before, each mode
 * acted on its own holders only, while status (and so
 * dlock_force_unlock2's "it was held") saw every mode's: `dlock unlock
 * --force --check` through the table URL exited 0 and a session holder
 * ran on. A failure (KILL not allowed) is returned, never a success. */
static int my_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline_us)
{
    dlock__mystore *p = MYSTORE(s);
    mylock *l = MYLOCK(sl);
    int rc = dlock__myt_force_unlock(p, l, deadline_us);
    if (rc == DLOCK_OK && p->table)
        rc = dlock__myt_other_table(p, deadline_us);
    /* (session and row holders hold mutexes: a table URL's other kinds
     * are not theirs) */
    if (rc == DLOCK_OK && (!p->table || atomic_load(&p->other_table) == 1) &&
        dlock__myt_kind_of(l) == 'm')
        rc = dlock__my_force_fenced(p, l, deadline_us);
    return rc;
}

/* The names of dlock_fence whose GET_LOCK name is held now, or whose row
 * lease runs (a holder whose connection ended, a row holder: status calls
 * them held; before, `dlock list` after a kill -9 of a session holder said
 * nothing was held while status named it for the rest of its lease), and
 * table mode's (row.c). */
static int my_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline_us)
{
    dlock__mystore *p = MYSTORE(s);
    if (p->table)
        return dlock__myt_list(p, prefix, sink, arg, deadline_us);
    if (p->row)
        return dlock__myr_list(p, prefix, sink, arg, deadline_us);
    return dlock__my_list_fenced(p, prefix,
                                 "IS_USED_LOCK(name) IS NOT NULL OR expires > UTC_TIMESTAMP(6)",
                                 sink, arg, deadline_us);
}

/* Table holds in one request (table.c), connections' sessions pinged
 * (conn.c): both in table mode, where every pooled connection is still a
 * session of the renewer, kept alive but holding nothing. */
static int my_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    dlock__mystore *p = MYSTORE(s);
    if (p->row)
        return dlock__myr_renew(s, items, n, deadline_us);
    size_t held = 0; /* table holds: readers (read.c), the others (table.c) */
    if (p->table) {
        held = dlock__myt_read_renew(p, items, n, deadline_us);
        held += dlock__myt_renew(p, items, n, deadline_us);
    }
    if (held == 0)
        return dlock__my_renew(s, items, n, deadline_us);
    size_t m = 0;
    dlock__renewal *rest = calloc(n, sizeof *rest);
    if (rest == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != DLOCK__RENEW_HOLD || items[i].session != NULL)
            rest[m++] = items[i];
    }
    int rc = m > 0 ? dlock__my_renew(s, rest, m, deadline_us) : DLOCK_OK;
    m = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != DLOCK__RENEW_HOLD || items[i].session != NULL)
            items[i].result = rest[m++].result;
    }
    free(rest);
    return rc;
}

static int my_reached(dlock__store *s)
{
    return atomic_load(&MYSTORE(s)->reached);
}

/* ---------------------------------------------------------------- open, close */

static void my_close(dlock__store *s, int64_t deadline_us)
{
    dlock__mystore *p = MYSTORE(s);
    dlock__my_close_all(p, deadline_us);
    dlock__sockwatch_free(p->watch); /* after every connection was removed */
    pthread_mutex_destroy(&p->mu);
    free(p->info_lit);
    free(p);
}

static int my_open(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    *out = NULL;
    dlock__url_user_is_a_name(url); /* mysql://alice@host: a user, in messages too */
    /* a misspelt or empty value, as a misspelt option name: what was meant */
    static const char *const modes[] = {"table", "session", "row"};
    static const char *const namings[] = {"mapped", "exact"};
    const char *mode, *names;
    int rc = dlock__url_choice(url, "mode", modes, 3, 0, &mode);
    if (rc == DLOCK_OK)
        rc = dlock__url_choice(url, "names", namings, 2, 0, &names);
    if (rc != DLOCK_OK)
        return rc;
    int table = mode == NULL || strcmp(mode, "table") == 0;
    int row = mode != NULL && strcmp(mode, "row") == 0;
    if ((table || row) && names != NULL && strcmp(names, "exact") == 0)
        return dlock__fail(DLOCK_EINVAL,
                           "%s: names=exact shares a GET_LOCK name with other code: it is for "
                           "mode=session, not mode=%s: use mode=session",
                           url->text, row ? "row" : "table (the default)");
    if (url->nhosts != 1)
        return dlock__fail(DLOCK_EINVAL, "%s: want one host (mysql://user:pass@host:port/db)",
                           url->text);
    if (url->path[0] == '\0' || strchr(url->path, '/') != NULL)
        return dlock__fail(DLOCK_EINVAL,
                           "%s: the path is the database's name, one word (dlock keeps its "
                           "tables there)",
                           url->text);
    int64_t connect_ms = DEFAULT_CONNECT_MS;
    rc = dlock__url_duration(url, "connect_timeout", 1, &connect_ms);
    if (rc != DLOCK_OK)
        return rc;

    dlock__mystore *p = calloc(1, sizeof *p);
    if (p == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    p->info_lit = dlock__my_literal(host->cfg->owner_info, 0);
    if (p->info_lit == NULL) {
        free(p);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    p->base.backend = &dlock__my_backend;
    p->table = table;
    p->row = row;
    p->base.caps = dlock__my_backend.caps & (table ? TABLE_CAPS : SESSION_CAPS);
    p->base.host = *host;
    p->base.label = p->label;
    p->timeout_ms = host->cfg->command_timeout_ms;
    p->connect_ms = connect_ms;
    p->lease_ms = host->cfg->lease_ms;
    snprintf(p->lease_us, sizeof p->lease_us, "%lld", (long long) p->lease_ms * 1000);
    p->exact_names = names != NULL && strcmp(names, "exact") == 0;
    p->port = (unsigned) (url->hosts[0].port ? url->hosts[0].port : DEFAULT_PORT);
    snprintf(p->host, sizeof p->host, "%s", url->hosts[0].name);
    /* the user name (never the password): who asked is part of what a
     * refusal means */
    snprintf(p->label, sizeof p->label, "%s://%s%s%s%s:%u/%s%s%s", url->scheme, url->userinfo,
             strchr(p->host, ':') ? "[" : "", p->host, strchr(p->host, ':') ? "]" : "", p->port,
             url->path, mode != NULL ? "?mode=" : "", mode != NULL ? mode : "");
    p->base.kind = table ? "MariaDB/MySQL in table mode"
                   : row ? "MariaDB/MySQL in row mode"
                         : "MariaDB/MySQL in session mode";
    if (url->user != NULL)
        snprintf(p->user, sizeof p->user, "%s", url->user);
    if (url->password != NULL)
        snprintf(p->password, sizeof p->password, "%s", url->password);
    snprintf(p->dbname, sizeof p->dbname, "%s", url->path);
    if (!table && dlock__sockwatch_new(dlock__my_watch_check, p, &p->watch) != 0) {
        my_close(&p->base, dlock__now_us());
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = &p->base;
    return DLOCK_OK;
}

static const char *const schemes[] = {"mysql", "mariadb", NULL};

const dlock__backend dlock__my_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "MariaDB/MySQL",
    .schemes = schemes,
    .caps = SESSION_CAPS | TABLE_CAPS,
    .open = my_open,
    .close = my_close,
    .lock_new = my_lock_new,
    .lock_free = my_lock_free,
    .detach = my_detach,
    .acquire = my_acquire,
    .cancel = my_cancel,
    .release = my_release,
    .extend = my_extend,
    .renew = my_renew,
    .session_lost = dlock__my_session_lost,
    .query = my_query,
    .force_unlock = my_force_unlock,
    .holders = my_holders,
    .list = my_list,
    .reached = my_reached,
};
