/* SPDX-License-Identifier: MIT */
/* pg.c - the PostgreSQL backend (postgres://, postgresql://), session mode:
 * a lock is a session-level advisory lock (README.md has the key mapping,
 * the schema and what this mode cannot do).
 *
 * An attempt takes a connection (conn.c: a wait one that holds nothing, a
 * try any that does not hold the key) and, in one statement, takes the
 * advisory lock and bumps the name's fence counter under it:
 *
 *   WITH s AS (SELECT set_config('lock_timeout', $3, true)),
 *        l AS (SELECT pg_advisory_lock($1) FROM s)
 *   INSERT INTO dlock_fence ... SELECT ... FROM l
 *   ON CONFLICT (name) DO UPDATE SET fence = greatest(fence + 1, base + xid),
 *     holder, lease = ours unless a lease (or the run rule) holds it
 *   RETURNING fence, whether ours, the lease left
 *
 * The INSERT reads l's row first, so the counter moves only under the
 * lock. Its commit does not wait for the WAL's flush: what a crash can
 * lose of it is covered by the server run's epoch (fences) and the run
 * rule (leases), both at TAKE_ROW below. A waiter blocks in the server
 * for a slice (lock_timeout, backend.h: NEXT_RETRY) that lasts its whole
 * wait (up to MAX_SLICE_US), so it keeps its place in the server's queue,
 * while another connection asks the server every half command timeout
 * whether it still answers, bounded by one (conn.c: dlock__pg_watch); a
 * try uses pg_try_advisory_lock and blocks nowhere. A session-level
 * advisory lock outlives the failed statement it was taken in, so after
 * any failed attempt the connection lets go of the key (it did not hold
 * it before) or is closed. The connection that took the lock holds it
 * until the release (pg_advisory_unlock); it may hold other names' locks
 * beside it, and goes back to the pool when it holds none. */
#include "pg.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT       5432
#define DEFAULT_CONNECT_MS 2000
#define MIN_SLICE_US       20000    /* a shorter slice is a try */
#define MAX_SLICE_US       60000000 /* a wait queued in the server goes round after that */

#define COMMON_CAPS  (DLOCK_CAP_FENCE | DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY | DLOCK_CAP_LIST)
#define SESSION_CAPS (COMMON_CAPS | DLOCK_CAP_NOTIFY | DLOCK_CAP_SESSION | DLOCK_CAP_READ_WRITE)
#define TABLE_CAPS                                                                                 \
    (COMMON_CAPS | DLOCK_CAP_NOTIFY | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_ADOPT | \
     DLOCK_CAP_FAIR | DLOCK_CAP_READ_WRITE | DLOCK_CAP_SEMAPHORE)

/* The statements of the hot path, prepared once per connection
 * (dlock__pg_exec_prepared): the grant (a try, a wait), the release, and
 * the unlock after a failed attempt. */
enum {
    PREP_TRY = DLOCK__PGP_TRY,
    PREP_WAIT = DLOCK__PGP_WAIT,
    PREP_RELEASE = DLOCK__PGP_RELEASE,
    PREP_UNLOCK = DLOCK__PGP_UNLOCK,
    PREP_CHECK = DLOCK__PGP_CHECK
};
#define UNLOCK_SQL "SELECT pg_advisory_unlock($1::bigint)"

/* The release, in one statement: the row's lease ends (the row stays
 * locked by the UPDATE until the commit, so the next holder, blocked on it
 * in its grant, sees it ended), then the advisory lock, which the
 * aggregate over u keeps after the UPDATE. Its commit does not wait for
 * the WAL's flush (synchronous_commit off for this transaction): a lease
 * end lost in a server crash only makes a next holder wait for the rest of
 * the lease, never take a lock early. The row no longer names the
 * connection (holder ''): its renewal, which renews every row naming it,
 * would otherwise start the released lease again while the connection
 * holds other locks (a try of the name by another client was refused for
 * a lease after the release). */
#define RELEASE_SQL                                                                                \
    "WITH u AS (UPDATE dlock_fence SET expires = clock_timestamp(), holder = '' WHERE name = $2 "  \
    "AND holder = $3 RETURNING 1) SELECT pg_advisory_unlock($1::bigint), "                         \
    "set_config('synchronous_commit', 'off', true) FROM (SELECT count(*) FROM u) AS x"

/* One lock per name across the modes: a holder in table mode's lock
 * table (table.c) excludes a session holder of the same name. A grant on
 * a connection that has seen that table runs this check after it, in the
 * same round trip and transaction (a pipeline: a statement of its own,
 * so its snapshot is taken after the advisory lock was granted, and a
 * table holder whose take held the key until its commit is seen): the ms
 * left of a live table holder's lease, 0 when there is none ($1: the
 * name's bytes). A table take holds the key (shared) through its own
 * transaction, so it fails while a session holds the lock (table.c). */
#define CHECK_SQL DLOCK__PG_CHECK_SQL

typedef dlock__pglock pglock;

extern const dlock__backend dlock__pg_backend;

/* ---------------------------------------------------------------- keys */

int64_t dlock__pg_key(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    for (const unsigned char *s = (const unsigned char *) name; *s != '\0'; s++) {
        h ^= *s;
        h *= 0x100000001b3ULL;
    }
    return (int64_t) ((DLOCK__PG_KEY_NAMESPACE << 48) | (h & 0xffffffffffffULL));
}

/* ---------------------------------------------------------------- locks */

static int pg_lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                       dlock__store_lock **out)
{
    (void) s;
    *out = NULL;
    pglock *l = calloc(1, sizeof *l);
    if (l == NULL || (l->name = strdup(name)) == NULL) {
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    l->base.spec = *spec;
    if ((l->key_lit = dlock__pgt_bytea(name)) == NULL) {
        free(l->name);
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    size_t len = strlen(name);
    if ((l->name_hex = malloc(2 * len + 3)) == NULL) {
        free(l->key_lit);
        free(l->name);
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    memcpy(l->name_hex, "\\x", 2);
    for (size_t i = 0; i < len; i++)
        snprintf(l->name_hex + 2 + 2 * i, 3, "%02x", (unsigned char) name[i]);
    l->name_hex[2 + 2 * len] = '\0';
    l->key = dlock__pg_key(name);
    uint64_t k = (uint64_t) l->key;
    snprintf(l->key_text, sizeof l->key_text, "%" PRId64, l->key);
    snprintf(l->classid, sizeof l->classid, "%u", (unsigned) (k >> 32));
    snprintf(l->objid, sizeof l->objid, "%u", (unsigned) (k & 0xffffffffULL));
    *out = &l->base;
    return DLOCK_OK;
}

void dlock__pg_unbind(dlock__pgstore *p, pglock *l, int discard, const char *why)
{
    dlock__pgconn *c = l->conn;
    dlock__pg_held_remove(p, l);
    dlock__session *session = c->session;
    l->conn = NULL;
    if (discard)
        dlock__pg_discard(p, c, why);
    else
        dlock__pg_put(p, c);
    dlock__session_unref(session);
}

/* A hold the core will not release (lost, or freed without a release):
 * its connection lets go of the key (closed if it cannot say so: other
 * locks it holds are then lost, and reported). */
static void let_go(dlock__pgstore *p, pglock *l)
{
    dlock__pgconn *c = l->conn;
    PGresult *r = NULL;
    const char *params[] = {l->key_text};
    int shared = l->base.spec.kind == DLOCK__READ;
    pthread_mutex_lock(&c->mu);
    dlock__pg_unhold(c, l->key);
    int rc =
        c->pg == NULL
            ? DLOCK_EUNREACHABLE
            : dlock__pg_exec_prepared(p, c, shared ? DLOCK__PGP_READ_UNLOCK : PREP_UNLOCK,
                                      shared ? DLOCK__PG_READ_UNLOCK_SQL : UNLOCK_SQL, 1, params,
                                      dlock__now_us() + p->timeout_ms * 1000, NULL, NULL, &r);
    int ok = rc == DLOCK_OK && PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    dlock__pg_unbind(p, l, !ok, "closed: it could not let go of a lock");
}

static void pg_lock_free(dlock__store *s, dlock__store_lock *sl)
{
    pglock *l = PGLOCK(sl);
    if (l->conn != NULL)
        let_go(PGSTORE(s), l); /* never released (the core releases before freeing) */
    free(l->name);
    free(l->key_lit);
    free(l->name_hex);
    free(l);
}

/* The hold stays in the server as long as its connection: the connection
 * stays open, out of the pool, until the client closes. */
static void pg_detach(dlock__store *s, dlock__store_lock *sl)
{
    pglock *l = PGLOCK(sl);
    if (l->conn != NULL) {
        dlock__pg_held_remove(PGSTORE(s), l); /* (no handle of the owner's holds it now) */
        dlock__session *session = l->conn->session;
        l->conn = NULL;
        dlock__session_unref(session);
    }
}

/* ---------------------------------------------------------------- acquire */

/* The grant, in one statement: the advisory lock ($1), then the name's row
 * ($2) under it: the fence bumped, and the row made ours (holder: the
 * connection's random id $6; owner: "dlock:TOKEN" $4 and the server pid,
 * for operators; expires = now + the lease $5) unless a holder's lease is
 * still running there (a holder whose connection dropped before it could
 * know: see README.md). ON CONFLICT DO UPDATE sees the row's latest version,
 * whatever the statement's snapshot, and every CASE the same old row.
 * Answers the fence, whether the row is ours, and the ms left of the lease
 * it still has.
 *
 * The fence is the row's counter + 1, raised to base = (E << 32) + xid when
 * that is larger, where xid is the grant's transaction id (xid8, 64 bits)
 * and E the server run's epoch ($7 is E << 32; conn.c: RUN_EPOCH_SQL).
 *
 * - Within one run of the server (no crash), xid strictly increases: the
 *   transaction takes its id after the advisory lock (its first write, or
 *   the call in the select list, runs once the lock's row is there), so
 *   under one name's lock every later grant's base is larger. So a row
 *   deleted (by an operator, a DELETE, a TRUNCATE) does not make fences
 *   go back: it starts again at a base above every fence of the run (the
 *   fault suite's drop_lock found them going back from 1 once).
 * - Across a crash. The grant's commit does not wait for the WAL's flush
 *   (TAKE_SET), so a crash may lose the last grants' fence bumps, and the
 *   transaction ids they used are then handed out again: xid alone would
 *   repeat fences. E covers it. It is the value of a sequence
 *   (dlock_epoch), kept in an unlogged table (dlock_run), which crash
 *   recovery empties (a clean shutdown keeps it); the first connection
 *   set-up that finds it empty puts the sequence's next value there, in a
 *   transaction whose commit waits for the flush, so it is on disk before
 *   any grant uses it, and a sequence never goes back over a flushed
 *   value. A crash kills every session, so every advisory lock is free
 *   after it and every grant after it runs on a connection set up after
 *   it, with E' > E: its base, (E' << 32) + xid', is above every fence of
 *   the runs before, (E << 32) + xid, as long as the ids a crash hands
 *   out again span less than 2^32 transactions (it loses only commits
 *   not flushed yet: about three wal_writer_delay's worth).
 *   pg_postmaster_start_time() would not do for E: a crash-restart after
 *   a backend's crash keeps it.
 * - They still go back on a re-created cluster, a dropped sequence, or a
 *   restored backup (its sequence and ids start from the backup's), as
 *   etcd's revisions would. */
/* The run rule. The grant's commit does not wait for the WAL's flush
 * (TAKE_SET), so a crash may lose its row write whole: the holder and the
 * lease it started. The row then looks as it was (an earlier holder's
 * lease, ended or running), or is not there at all; yet the lost holder,
 * whose session died with the server, may still think it holds until its
 * next renewal fails, up to its lease after the crash. So a row not
 * written by a grant of this run (its run column below the run's epoch
 * $8, or no row) counts as held until $9: the run's start (the first
 * set-up after the crash, so after it) plus the largest lease any client
 * recorded (dlock_owner.lease_ms, each written by a connection's set-up,
 * whose commit waits for the flush, before any grant on it; conn.c:
 * RUN_EPOCH_SQL). A lost holder's lease ended before that. A row written
 * in this run is exact, as before: the grant that wrote it waited for
 * the rule, and a later crash starts another run. A clean shutdown loses
 * no commit and keeps dlock_run: no wait after it. */
#define EARLY      DLOCK__PG_EARLY
#define STILL_HELD DLOCK__PG_STILL_HELD
/* What a refusal says while the rule holds a name no holder has. */
#define RULE_WHY                                                                                   \
    "the PostgreSQL server restarted after a crash, and a holder whose grant the crash lost may "  \
    "still believe it holds: every name's first grant since waits one lease from the restart "     \
    "(src/backend/pg/README.md, 'The run rule'; dlock status shows no holder meanwhile)"
/* A new row made in the run rule's time is no one's: held until $9. */
#define NEW_ROW                                                                                    \
    "CASE WHEN " EARLY " THEN '' ELSE $6 END, "                                                    \
    "CASE WHEN " EARLY " THEN $9::timestamptz ELSE clock_timestamp() + $5::interval END, "         \
    "CASE WHEN " EARLY " THEN '' ELSE $4 END, "                                                    \
    "CASE WHEN " EARLY " THEN 0 ELSE pg_backend_pid() END, "                                       \
    "CASE WHEN " EARLY " THEN 0 ELSE $8::bigint END "
#define TAKE_ROW                                                                                   \
    "INSERT INTO dlock_fence AS f (name, key, fence, holder, expires, owner, holder_pid, run) "    \
    "SELECT $2, $1::bigint, $7::bigint + pg_current_xact_id()::text::bigint, " NEW_ROW             \
    "FROM l %s ON CONFLICT (name) DO UPDATE SET fence = greatest(f.fence + 1, excluded.fence), "   \
    "holder = CASE WHEN " STILL_HELD " THEN f.holder ELSE $6 END, "                                \
    "owner = CASE WHEN " STILL_HELD " THEN f.owner ELSE $4 END, "                                  \
    "holder_pid = CASE WHEN " STILL_HELD " THEN f.holder_pid ELSE pg_backend_pid() END, "          \
    "expires = CASE WHEN " STILL_HELD                                                              \
    " THEN f.expires ELSE clock_timestamp() + $5::interval END, "                                  \
    "run = CASE WHEN " STILL_HELD " THEN f.run ELSE $8::bigint END "                               \
    "RETURNING f.fence, f.holder = $6, "                                                           \
    "ceil(extract(epoch FROM (greatest(f.expires, CASE WHEN f.run < $8::bigint THEN "              \
    "$9::timestamptz END) - clock_timestamp())) * 1000)::bigint, "                                 \
    "to_regclass('" DLOCK__SQLT_TABLE "') IS NOT NULL, "                                           \
    "f.holder <> $6 AND f.run < $8::bigint AND (f.holder = '' OR f.expires <= "                    \
    "clock_timestamp()), "                                                                         \
    "f.shared_until > clock_timestamp()"
/* The grant's commit does not wait for the WAL's flush (synchronous_commit
 * off for its transaction): a fence bump lost in a crash is not handed out
 * again, as every grant after the crash has a larger epoch in $7 (above),
 * and a lease start lost with it is covered by the run rule (above). */
#define TAKE_SET                                                                                   \
    "WITH s AS (SELECT set_config('lock_timeout', $3, true), "                                     \
    "set_config('synchronous_commit', 'off', true)), "

static const char *const take_sql[2] = {
    /* a try */
    TAKE_SET "l AS (SELECT pg_try_advisory_lock($1::bigint) AS ok FROM s) " TAKE_ROW,
    /* a wait of a slice */
    TAKE_SET "l AS (SELECT pg_advisory_lock($1::bigint) FROM s) " TAKE_ROW,
};

/* After a failed attempt: the connection lets go of the key, which the
 * statement may have taken before it failed (a session lock outlives the
 * failed statement; the connection did not hold it before), or is closed. */
static void after_failure(dlock__pgstore *p, dlock__pgconn *c, const pglock *l, int64_t deadline)
{
    if (l->base.spec.kind == DLOCK__READ) {
        dlock__pg_read_after_failure(p, c, l->key_text, deadline);
        return;
    }
    PGresult *r = NULL;
    const char *params[] = {l->key_text};
    int rc =
        dlock__pg_exec_prepared(p, c, PREP_UNLOCK, UNLOCK_SQL, 1, params, deadline, NULL, NULL, &r);
    int ok = rc == DLOCK_OK && PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    if (ok)
        dlock__pg_put(p, c);
    else
        dlock__pg_discard(p, c, "closed after a failed attempt");
}

int dlock__pg_sleep_until(int64_t until, int (*cancelled)(void *), void *arg)
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

/* The lock is ours in the server, but its row still has a holder's lease
 * running (or the run rule holds it: above): wait for its end within the
 * slice, then make the row ours.
 * DLOCK_OK with *taken set, or a failure (c given back or closed). */
static int take_over(dlock__pgstore *p, pglock *l, dlock__pgconn *c, dlock__attempt *a,
                     int64_t left_ms, int64_t slice_end, int64_t bound, int block, int *taken)
{
    PGresult *r = NULL;
    int64_t end = dlock__now_us() + left_ms * 1000 + 2000; /* (a little past it, by our clock) */
    *taken = 0;
    /* A wait sleeps to the lease's end, or to the slice's: holding the
     * advisory lock, it keeps its place ahead of later waiters. */
    int cancelled = block && dlock__pg_sleep_until(end < slice_end ? end : slice_end, a->cancelled,
                                                   a->cancel_arg);
    if (block && !cancelled && end <= slice_end) {
        char app[96];
        snprintf(app, sizeof app, "%s%s",
                 l->base.spec.kind == DLOCK__WRITE ? DLOCK__PG_WRITER : "dlock:", a->token);
        const char *params[] = {l->name, p->lease_text, c->nonce, app, c->run_epoch, c->run_until};
        int rc = dlock__pg_exec(p, c,
                                "UPDATE dlock_fence SET holder = $3, owner = $4, holder_pid = "
                                "pg_backend_pid(), expires = clock_timestamp() + $2::interval, "
                                "run = $5::bigint WHERE name = $1 AND expires <= clock_timestamp() "
                                "AND (run >= $5::bigint OR $6::timestamptz <= clock_timestamp())",
                                6, params, bound, NULL, NULL, &r);
        if (rc != DLOCK_OK) {
            dlock__pg_discard(p, c, "closed: an attempt got no answer");
            return rc;
        }
        *taken = PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdTuples(r), "1") == 0;
        PQclear(r);
        if (*taken)
            return DLOCK_OK;
    }
    /* not in this slice: let go, and say how long the lease has left */
    a->holder_ttl_ms = left_ms;
    after_failure(p, c, l, bound);
    return DLOCK_OK;
}

/* An exclusive grant (the row made ours) on a name whose readers' leases
 * may run (read.c): waits, holding the key and the row, until none runs,
 * within the slice; else it lets go (the row's lease ended, the key
 * unlocked) and says how long the longest has left. DLOCK_OK with *taken
 * set, or a failure (c given back or closed). */
static int wait_readers(dlock__pgstore *p, pglock *l, dlock__pgconn *c, dlock__attempt *a,
                        int64_t slice_end, int64_t bound, int block, int *taken)
{
    for (;;) {
        int64_t left_ms = 0;
        int rc = dlock__pg_readers_left(p, c, l, bound, &left_ms);
        if (rc == DLOCK_EUNREACHABLE) {
            dlock__pg_discard(p, c, "closed: an attempt got no answer");
            return rc;
        }
        if (rc == DLOCK_OK && left_ms <= 0)
            return DLOCK_OK;
        int64_t end = dlock__now_us() + left_ms * 1000 + 2000;
        if (rc != DLOCK_OK || !block || end > slice_end ||
            dlock__pg_sleep_until(end, a->cancelled, a->cancel_arg)) {
            *taken = 0;
            a->holder_ttl_ms = left_ms > 0 ? left_ms : DLOCK__TTL_UNKNOWN;
            const char *params[] = {l->key_text, l->name, c->nonce};
            PGresult *r = NULL;
            int rrc = dlock__pg_exec_prepared(p, c, PREP_RELEASE, RELEASE_SQL, 3, params, bound,
                                              NULL, NULL, &r);
            int ok = rrc == DLOCK_OK && PQresultStatus(r) == PGRES_TUPLES_OK;
            PQclear(r);
            if (ok)
                dlock__pg_put(p, c);
            else
                dlock__pg_discard(p, c, "closed: it could not let go of a lock");
            /* readers hold it: the read-write lock's, a mutex's other kind */
            a->held_as =
                l->base.spec.kind == DLOCK__WRITE ? DLOCK__HELD_AS_SAME : DLOCK__HELD_AS_RW;
            return rc;
        }
    }
}

/* The grant found a live holder of the name in table mode's lock table, or
 * a table waiter ahead of it in that table's line (CHECK_SQL: older than
 * its place there, or than its wait's beginning): it lets go
 * of what it took, the lock and its row's lease (taken) or the advisory
 * lock alone, and the attempt counts as held, for table_ms more (the table
 * holder's lease left; 0: not known). Kept out by either, a wait takes a
 * place in the line (join_table_line). Before, a table waiter beside
 * session clients taking the name in turn never found the key free. */
/* A session waiter kept out by a table holder takes (or keeps) a place in
 * the lock table's line, a waiter row under DLOCK__SQLT_SESSION_WAIT and
 * its token, its lease the client's waiter lease, kept up by each poll:
 * table mode's release hands the row on only to an exclusive table
 * waiter first in line, and table takers let an older waiter go first, so
 * the session waiter gets the name in its turn (a row handed from one
 * table holder to the next is never free). Best effort: a failure leaves
 * the waiter polling as before, its error not the attempt's. */
static void join_table_line(dlock__pgstore *p, pglock *l, const dlock__attempt *a, int64_t bound)
{
    int64_t wl = p->base.host.cfg->waiter_lease_ms;
    if (!a->wait || wl <= 0)
        return;
    size_t len = strlen(DLOCK__SQLT_SESSION_WAIT) + strlen(a->token) + 1;
    char *own = malloc(len), *owner = NULL, wait_us[24];
    if (own != NULL) {
        snprintf(own, len, "%s%s", DLOCK__SQLT_SESSION_WAIT, a->token);
        owner = dlock__pgt_bytea(own);
    }
    free(own);
    snprintf(wait_us, sizeof wait_us, "%lld", (long long) wl * 1000);
    dlock__saved_error saved;
    dlock__save_error(&saved);
    PGresult *r;
    if (owner != NULL &&
        dlock__pgt_request(p, dlock__sqlt_pg_wait_row(l->key_lit, owner, wait_us), bound, &r,
                           "taking a place in the lock table's line") == DLOCK_OK) {
        l->table_line = 1;
        PQclear(r);
    }
    free(owner);
    dlock__restore_error(&saved);
}

/* The place join_table_line took, given up (the wait is over). */
static void leave_table_line(dlock__pgstore *p, pglock *l, const char *token, int64_t bound)
{
    if (!l->table_line)
        return;
    l->table_line = 0;
    size_t len = strlen(DLOCK__SQLT_SESSION_WAIT) + strlen(token) + 1;
    char *own = malloc(len), *owner = NULL;
    if (own != NULL) {
        snprintf(own, len, "%s%s", DLOCK__SQLT_SESSION_WAIT, token);
        owner = dlock__pgt_bytea(own);
    }
    free(own);
    dlock__saved_error saved;
    dlock__save_error(&saved);
    PGresult *r;
    if (owner != NULL && dlock__pgt_request(p, dlock__sqlt_leave(DLOCK__SQLT_PG, l->key_lit, owner),
                                            bound, &r, "leaving the lock table's line") == DLOCK_OK)
        PQclear(r);
    free(owner);
    dlock__restore_error(&saved);
}

static int give_back(dlock__pgstore *p, pglock *l, dlock__pgconn *c, int taken, dlock__attempt *a,
                     int64_t table_ms, int line_ahead, int64_t bound)
{
    if (taken) {
        int reader = l->base.spec.kind == DLOCK__READ;
        const char *params[] = {l->key_text, l->name, c->nonce};
        PGresult *r = NULL;
        int rc = dlock__pg_exec_prepared(p, c, reader ? DLOCK__PGP_READ_RELEASE : PREP_RELEASE,
                                         reader ? DLOCK__PG_READ_RELEASE_SQL : RELEASE_SQL, 3,
                                         params, bound, NULL, NULL, &r);
        int ok = rc == DLOCK_OK && PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
        if (ok)
            dlock__pg_put(p, c);
        else
            dlock__pg_discard(p, c, "closed: it could not let go of a lock");
    } else {
        after_failure(p, c, l, bound);
    }
    if (table_ms > 0 || line_ahead)
        join_table_line(p, l, a, bound);
    a->outcome = DLOCK__HELD;
    a->next = DLOCK__NEXT_POLL; /* a table holder's release wakes no session waiter */
    a->holder_ttl_ms = table_ms > 0 ? table_ms : DLOCK__TTL_UNKNOWN;
    return DLOCK_OK;
}

static int pg_acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *a)
{
    dlock__pgstore *p = PGSTORE(s);
    pglock *l = PGLOCK(sl);
    dlock__pgconn *c;
    char timeout[24], app[96];

    if (p->table)
        return dlock__pgt_acquire(p, l, a);
    if (l->conn != NULL)
        let_go(p, l); /* a hold the core found lost (and so never released here) */
    dlock__pgconn *beside = NULL;
    int owner_holds = 0;
    if (dlock__pg_owner_clash(p, l, a->token, &beside, &owner_holds))
        return dlock__fail(DLOCK_EDEADLK,
                           "lock '%s': this owner holds it already through another handle (as "
                           "a reader, a writer or a mutex): asking for it %s too would wait for "
                           "itself (one name is one lock; release it first)",
                           l->name,
                           l->base.spec.kind == DLOCK__READ    ? "to read"
                           : l->base.spec.kind == DLOCK__WRITE ? "to write"
                                                               : "as a mutex");
    /* the read-write lock: readers share the key, a writer takes it as a
     * mutex does (README.md, "Read locks") */
    int reader = l->base.spec.kind == DLOCK__READ;
    int64_t now = dlock__now_us();
    /* The slice (backend.h): the whole wait, up to MAX_SLICE_US, so the
     * waiter keeps its place in the server's queue (one that left it at
     * every command timeout and joined again at its back could be
     * overtaken for ever: issue 23); the server watched meanwhile. The
     * request is bounded by the slice's end and a fifth of a command
     * timeout for the reply (and what follows a grant), or the core's
     * bound when that is later (a short wait). */
    int64_t reserve = p->timeout_ms * 1000 / 5;
    int64_t slice_end = a->wait_until_us;
    if (slice_end - now > MAX_SLICE_US)
        slice_end = now + MAX_SLICE_US;
    int block = a->wait && slice_end - now >= MIN_SLICE_US;
    if (beside != NULL) {
        /* a read beside the owner's write: on the writer's connection,
         * which has the key, so it waits for nothing (a try) */
        int got = dlock__pg_beside_lock(p, beside, l->key, a->token);
        if (got == 0)
            return dlock__fail(DLOCK_EDEADLK,
                               "lock '%s': this owner writes it and reads it beside the write "
                               "already (one read beside a write; release it first)",
                               l->name);
        if (got == 1)
            block = 0;
        else
            beside = NULL; /* the write went meanwhile: an ordinary read */
    }
    int64_t bound = a->deadline_us;
    if (block && slice_end + reserve > bound)
        bound = slice_end + reserve; /* (never shorter than the core's bound) */
    dlock__pg_watch watch = {
        .every_us = p->timeout_ms * 1000 / 2, .bound_us = p->timeout_ms * 1000, .asked_us = now};
    a->due_us = now;
    /* a wait keeps its connection busy for a slice: one that holds nothing */
    int rc = beside != NULL ? (c = beside, DLOCK_OK)
             : block        ? dlock__pg_get(p, a->deadline_us, &c)
                            : dlock__pg_get_shared(p, l->key, a->deadline_us, &c);
    if (rc != DLOCK_OK)
        return rc;
    now = dlock__now_us();
    int64_t slice_ms = block ? (slice_end - now) / 1000 : p->timeout_ms / 2;
    if (slice_ms < 1)
        slice_ms = 1;
    snprintf(timeout, sizeof timeout, "%lld", (long long) slice_ms);
    snprintf(app, sizeof app, "%s%s",
             l->base.spec.kind == DLOCK__WRITE ? DLOCK__PG_WRITER : "dlock:", a->token);
    const char *params[] = {l->key_text, l->name,       timeout,      app,         p->lease_text,
                            c->nonce,    c->fence_base, c->run_epoch, c->run_until};
    /* a wait's place in the one line, before it has a row there: its
     * beginning (a table waiter that came after it is not ahead of it,
     * though it blocked in the server meanwhile and its grant comes after
     * that waiter's row; trial 48) */
    char began[24];
    if (a->wait && l->wait_until_us != a->wait_until_us) {
        l->wait_until_us = a->wait_until_us; /* a new wait */
        l->wait_began_us = now;
    }
    snprintf(began, sizeof began, "%lld", (long long) (dlock__now_us() - l->wait_began_us));
    const char *check_params[] = {l->name_hex, a->token, a->wait ? began : NULL};
    dlock__pg_stmt grant[2] = {{reader  ? (block ? DLOCK__PGP_READ_WAIT : DLOCK__PGP_READ_TRY)
                                : block ? PREP_WAIT
                                        : PREP_TRY,
                                reader  ? dlock__pg_read_sql[block]
                                : block ? p->take_wait
                                        : p->take_try,
                                9, params},
                               {PREP_CHECK, CHECK_SQL, 3, check_params}};
    PGresult *res[2] = {NULL, NULL};
    /* with the table check when the connection has seen table mode's table */
    int checked = c->lock_table;
    watch.asked_us = dlock__now_us();
    rc = dlock__pg_exec_pipeline(p, c, checked ? 2 : 1, grant, bound, block ? a->cancelled : NULL,
                                 a->cancel_arg, block ? &watch : NULL, res);
    /* silent, if it is, since the server was last asked (backend.h: due_us) */
    a->due_us = watch.asked_us;
    if (rc != DLOCK_OK) {
        dlock__pg_discard(p, c, "closed: an attempt got no answer");
        return rc;
    }
    PGresult *r = res[0];
    if (checked && (r == NULL || (res[1] != NULL && PQresultStatus(res[1]) == PGRES_FATAL_ERROR))) {
        /* the check failed (and the grant's transaction with it, not its
         * session lock): the table gone (dropped) is seen again at the
         * next grant; anything else is the server's error */
        int gone = strcmp(dlock__pg_state(res[1]), "42P01") == 0;
        rc = gone ? DLOCK_OK : dlock__pg_fail(p, res[1], "looking at the lock table");
        c->lock_table = !gone;
        PQclear(res[0]);
        PQclear(res[1]);
        after_failure(p, c, l, bound);
        a->outcome = DLOCK__HELD;
        a->next = DLOCK__NEXT_RETRY;
        return rc;
    }
    ExecStatusType st = PQresultStatus(r);
    a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
    if (st == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        uint64_t fence = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
        int taken = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
        int64_t left_ms = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        int table_seen = strcmp(PQgetvalue(r, 0, 3), "t") == 0;
        /* no holder known: the run rule (above) counts it held */
        int by_rule = strcmp(PQgetvalue(r, 0, 4), "t") == 0;
        /* readers' leases may run on the name (read.c) */
        int readers_seen = strcmp(PQgetvalue(r, 0, 5), "t") == 0;
        PQclear(r);
        int got = checked && PQntuples(res[1]) == 1;
        int64_t table_ms = got ? strtoll(PQgetvalue(res[1], 0, 0), NULL, 10) : 0;
        /* (not when the owner holds the name already, a read beside its
         * write or another read: the waiter ahead waits for that hold,
         * which would wait for this grant) */
        int line_ahead = got && !owner_holds && strcmp(PQgetvalue(res[1], 0, 1), "t") == 0;
        PQclear(res[1]);
        if (!checked && table_seen) {
            /* the table is new to this connection: looked at once now */
            c->lock_table = 1;
            rc = dlock__pg_exec_prepared(p, c, PREP_CHECK, CHECK_SQL, 3, check_params, bound, NULL,
                                         NULL, &r);
            if (rc != DLOCK_OK) {
                dlock__pg_discard(p, c, "closed: an attempt got no answer");
                return rc;
            }
            if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
                rc = dlock__pg_fail(p, r, "looking at the lock table");
                PQclear(r);
                give_back(p, l, c, taken, a, 0, 0, bound);
                return rc;
            }
            table_ms = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            line_ahead = !owner_holds && strcmp(PQgetvalue(r, 0, 1), "t") == 0;
            PQclear(r);
        }
        if (table_ms > 0 || line_ahead)
            return give_back(p, l, c, taken, a, table_ms, line_ahead, bound);
        if (!taken && reader) {
            /* a writer's row lease (its connection ended) or the run rule
             * holds the name: looked at again within that (a reader does
             * not write the row to wait it out) */
            a->held_why = by_rule ? RULE_WHY : NULL;
            after_failure(p, c, l, bound);
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_POLL;
            a->holder_ttl_ms = left_ms > 0 ? left_ms : 1;
            return DLOCK_OK;
        }
        if (!taken) {
            a->held_why = by_rule ? RULE_WHY : NULL;
            rc = take_over(p, l, c, a, left_ms > 0 ? left_ms : 1, slice_end, bound, block, &taken);
            if (rc != DLOCK_OK)
                return rc;
        }
        if (taken && readers_seen) {
            /* readers' leases may still run (a reader whose connection
             * ended: it may still believe it reads): waited out as a row
             * lease is, holding the key, within the slice */
            rc = wait_readers(p, l, c, a, slice_end, bound, block, &taken);
            if (rc != DLOCK_OK)
                return rc;
        }
        if (taken && dlock__pg_hold(c, l->key) != DLOCK_OK) {
            after_failure(p, c, l, bound);
            return DLOCK_ENOMEM;
        }
        if (taken) {
            a->outcome = DLOCK__TAKEN;
            a->fence = fence;
            l->conn = c;
            dlock__pg_held_add(p, l, a->token);
            dlock__session_ref(c->session); /* the lock's */
            dlock__session_ref(c->session); /* the attempt's */
            a->session = c->session;
            pthread_mutex_unlock(&c->mu);
            leave_table_line(p, l, a->token, a->deadline_us);
            l->wait_until_us = 0; /* (the wait is over: the next begins afresh) */
            return DLOCK_OK;
        }
    } else if (st == PGRES_TUPLES_OK) {
        PQclear(r); /* a try that found it held */
        PQclear(res[1]);
        int broken = 0;
        dlock__pg_held_by(p, c, l, bound, a, &broken);
        dlock__pg_done(p, c, !broken);
    } else {
        PQclear(res[1]); /* (aborted after the grant's error) */
        const char *state = dlock__pg_state(r);
        if (strcmp(state, "42P01") == 0) {
            /* dlock's tables are gone (a database wiped under the client):
             * made again, and the attempt goes round at once */
            PQclear(r);
            rc = dlock__pg_make_tables(p, c, bound);
            if (rc == DLOCK_EUNREACHABLE) {
                dlock__pg_discard(p, c, "closed: a request got no answer");
                return rc;
            }
            after_failure(p, c, l, bound);
            if (rc != DLOCK_OK)
                return rc;
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_RETRY;
            return DLOCK_OK;
        }
        /* 55P03: lock_timeout ended the slice; 57014: dlock_cancel() */
        int ran_out = strcmp(state, "55P03") == 0; /* (state is r's: read before r goes) */
        int slice_over = ran_out || strcmp(state, "57014") == 0;
        if (!slice_over)
            rc = dlock__pg_fail(p, r, "taking the advisory lock");
        PQclear(r);
        if (ran_out && l->base.spec.kind == DLOCK__READ) {
            /* a reader's slice ran out: said why, if a writer waits first
             * (one query, at the slice's end only) */
            int broken = 0;
            dlock__pg_held_by(p, c, l, bound, a, &broken);
            if (broken) {
                dlock__pg_discard(p, c, "closed: a request got no answer");
                a->outcome = DLOCK__HELD;
                a->next = DLOCK__NEXT_RETRY;
                return DLOCK_OK;
            }
        }
        after_failure(p, c, l, bound);
        if (!slice_over)
            return rc;
    }
    a->outcome = DLOCK__HELD;
    a->next = DLOCK__NEXT_RETRY;
    return DLOCK_OK;
}

/* Nothing is queued in the server: a wait there ended with its request. */
static int pg_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline_us)
{
    if (PGSTORE(s)->table) /* table mode: the waiter's row goes */
        return dlock__pgt_cancel(PGSTORE(s), PGLOCK(sl), token, deadline_us);
    leave_table_line(PGSTORE(s), PGLOCK(sl), token, deadline_us); /* (if it took a place) */
    PGLOCK(sl)->wait_until_us = 0; /* (the wait is over: the next begins afresh) */
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- release, extend */

static int pg_release(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                      int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__pgstore *p = PGSTORE(s);
    pglock *l = PGLOCK(sl);
    if (p->table)
        return dlock__pgt_release(p, l, token, deadline_us);
    if (l->conn == NULL)
        return dlock__fail(DLOCK_ELOST, "lock '%s' is not held here", l->name);
    int reader = l->base.spec.kind == DLOCK__READ; /* (read.c: a reader's row too) */
    dlock__pgconn *c = l->conn;
    pthread_mutex_lock(&c->mu);
    if (c->pg == NULL) {
        dlock__pg_unbind(p, l, 1, "");
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost with its connection, which had closed",
                           l->name);
    }
    const char *params[] = {l->key_text, l->name, c->nonce};
    PGresult *r = NULL;
    int rc = dlock__pg_exec_prepared(p, c, reader ? DLOCK__PGP_READ_RELEASE : PREP_RELEASE,
                                     reader ? DLOCK__PG_READ_RELEASE_SQL : RELEASE_SQL, 3, params,
                                     deadline_us, NULL, NULL, &r);
    if (rc != DLOCK_OK) {
        /* The connection is gone (the server ended it: an operator's
         * pg_terminate_backend, a shutdown; or its link broke): the lock
         * went with it, maybe before the holder's work was done, so it is
         * lost, not merely unreleased. (No answer in time: closing the
         * connection lets go of the lock as soon as the server sees it.) */
        int gone = rc == DLOCK_EUNREACHABLE && (c->pg == NULL || PQstatus(c->pg) == CONNECTION_BAD);
        char why[300];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        dlock__pg_unbind(p, l, 1, "closed: a release got no answer");
        if (gone)
            return dlock__fail(DLOCK_ELOST, "lock '%s' was lost with its connection: %s", l->name,
                               why);
        return rc;
    }
    int released = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                   strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = dlock__pg_fail(
            p, r, reader ? "releasing the shared advisory lock" : "releasing the advisory lock");
    else if (!released)
        rc = dlock__fail(DLOCK_ELOST, "lock '%s': its connection no longer held it", l->name);
    PQclear(r);
    dlock__pg_unhold(c, l->key);
    dlock__pg_unbind(p, l, rc == DLOCK_ESERVER, "closed after a failed release");
    return rc;
}

/* Whether the lock's connection still holds its advisory lock. */
static int pg_extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                     int64_t lease_ms, int at_least, int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__pgstore *p = PGSTORE(s);
    pglock *l = PGLOCK(sl);
    if (p->table)
        return dlock__pgt_extend(p, l, token, lease_ms, at_least, deadline_us);
    if (l->conn == NULL)
        return dlock__fail(DLOCK_ELOST, "lock '%s' is not held here", l->name);
    dlock__pgconn *c = l->conn;
    pthread_mutex_lock(&c->mu);
    const char *params[] = {l->classid, l->objid};
    PGresult *r = NULL;
    int rc =
        c->pg == NULL
            ? dlock__fail(DLOCK_ELOST, "lock '%s' was lost with its connection, which had closed",
                          l->name)
            : dlock__pg_exec(p, c,
                             "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE " DLOCK__PG_LOCK_ROWS
                             " AND l.pid = pg_backend_pid() AND l.granted)",
                             2, params, deadline_us, NULL, NULL, &r);
    if (rc == DLOCK_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = dlock__pg_fail(p, r, "confirming the advisory lock");
    else if (rc == DLOCK_OK && strcmp(PQgetvalue(r, 0, 0), "t") != 0)
        rc = dlock__fail(DLOCK_ELOST, "lock '%s': its connection no longer holds it", l->name);
    PQclear(r);
    if (rc == DLOCK_EUNREACHABLE && c->pg != NULL && PQstatus(c->pg) == CONNECTION_BAD) {
        /* the connection is gone, and the lock with it */
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        dlock__pg_discard(p, c, why);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* What a renewal item is to table mode: a mutex hold's lease (1), a
 * queued waiter's place (2), a hold of the read-write lock or a
 * semaphore's (3: shares.c), or neither (0: a session, for conn.c). */
static int table_item(const dlock__pgstore *p, const dlock__renewal *it)
{
    if (!p->table)
        return 0;
    if (it->kind == DLOCK__RENEW_HOLD && it->session == NULL)
        return dlock__pg_mutex_kind(PGLOCK(it->lock)) ? 1 : 3;
    return it->kind == DLOCK__RENEW_WAITER ? 2 : 0;
}

/* The table's rows of kind (table_item) among items, in one request:
 * each item's result set. */
static void renew_rows(dlock__pgstore *p, dlock__renewal *items, size_t n, int kind,
                       int64_t deadline_us)
{
    size_t m = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        m += table_item(p, &items[i]) == kind;
    if (m == 0)
        return;
    dlock__sqlt_hold *h = calloc(m, sizeof *h);
    int *write = calloc(m, sizeof *write); /* each one's kind: dlock__pgts_renew */
    int rc = h != NULL && write != NULL ? DLOCK_OK : DLOCK_ENOMEM;
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        if (table_item(p, &items[i]) != kind)
            continue;
        pglock *l = PGLOCK(items[i].lock);
        h[k].key_lit = l->key_lit;
        h[k].key = l->name;
        h[k].lease_ms = items[i].lease_ms;
        write[k] = l->base.spec.kind == DLOCK__WRITE  ? 'w'
                   : l->base.spec.kind == DLOCK__READ ? 'r'
                                                      : 's';
        /* a writer's waiter row is under "w:" and its token (table.c) */
        size_t len = strlen(DLOCK__SQLT_WRITER) + strlen(items[i].token) + 1;
        char *owner = malloc(len);
        if (owner != NULL)
            snprintf(owner, len, "%s%s", kind == 2 && write[k] == 'w' ? DLOCK__SQLT_WRITER : "",
                     items[i].token);
        h[k].owner = owner;
        h[k].owner_lit = owner != NULL ? dlock__pgt_bytea(owner) : NULL;
        if (h[k++].owner_lit == NULL)
            rc = DLOCK_ENOMEM;
    }
    if (rc == DLOCK_OK)
        rc = kind == 3 ? dlock__pgts_renew(p, h, k, write, deadline_us)
                       : dlock__pgt_renew(p, h, k, kind == 2, deadline_us);
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (table_item(p, &items[i]) != kind)
            continue;
        items[i].result = rc != DLOCK_OK ? DLOCK__RENEW_FAILED
                          : h[k].held    ? DLOCK__RENEW_OK
                                         : DLOCK__RENEW_GONE;
        if (h != NULL) {
            free((char *) h[k].owner);
            free((char *) h[k++].owner_lit);
        }
    }
    free(h);
    free(write);
}

/* Table mode's holds and queued waiters in a request each (table.c); the
 * connections' sessions pinged (conn.c): in table mode every pooled
 * connection is still a session of the renewer, kept alive but holding
 * nothing. */
static int pg_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    dlock__pgstore *p = PGSTORE(s);
    size_t rest_n = 0;
    for (size_t i = 0; i < n; i++)
        rest_n += table_item(p, &items[i]) == 0;
    if (rest_n == n)
        return dlock__pg_renew(s, items, n, deadline_us);
    renew_rows(p, items, n, 1, deadline_us);
    renew_rows(p, items, n, 2, deadline_us);
    renew_rows(p, items, n, 3, deadline_us);
    if (rest_n == 0)
        return DLOCK_OK;
    dlock__renewal *rest = calloc(rest_n, sizeof *rest);
    if (rest == NULL) {
        for (size_t i = 0; i < n; i++) {
            if (table_item(p, &items[i]) == 0)
                items[i].result = DLOCK__RENEW_FAILED;
        }
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (table_item(p, &items[i]) == 0)
            rest[k++] = items[i];
    }
    int rc = dlock__pg_renew(s, rest, rest_n, deadline_us);
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (table_item(p, &items[i]) == 0)
            items[i].result = rest[k++].result;
    }
    free(rest);
    return rc;
}

/* Table mode: the client's wake-up connection made (listen.c), within a
 * connect timeout. Session mode never queues. */
static int pg_prepare_wait(dlock__store *s, dlock__store_lock *l, int64_t deadline_us)
{
    dlock__pgstore *p = PGSTORE(s);
    (void) l;
    if (p->listen == NULL)
        return dlock__fail(DLOCK_ENOTSUP, "%s: session mode has no wake-ups", p->label);
    int64_t cap = dlock__now_us() + p->connect_ms * 1000;
    return dlock__pgl_connect(p->listen, deadline_us < cap ? deadline_us : cap);
}

static enum dlock__wake pg_wait(dlock__store *s, dlock__store_lock *l, dlock__waiter *w,
                                int64_t until_us)
{
    dlock__pgstore *p = PGSTORE(s);
    (void) l;
    if (p->listen != NULL)
        return dlock__pgl_wait(p->listen, w, until_us);
    return dlock__board_park(p->base.host.board, w, until_us);
}

static int pg_reached(dlock__store *s)
{
    return atomic_load(&PGSTORE(s)->reached);
}

/* ---------------------------------------------------------------- open, close */

static void pg_close(dlock__store *s, int64_t deadline_us)
{
    dlock__pgstore *p = PGSTORE(s);
    dlock__pg_close_all(p, deadline_us);
    dlock__sockwatch_free(p->watch); /* after every connection was removed */
    dlock__pgl_free(p->listen);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static void param(dlock__pgstore *p, size_t *n, const char *key, const char *value)
{
    p->keys[*n] = key;
    p->vals[*n] = value;
    (*n)++;
}

static int pg_open(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    *out = NULL;
    dlock__url_user_is_a_name(url); /* postgres://alice@host: a user, in messages too */
    /* a misspelt or empty value, as a misspelt option name: what was meant */
    static const char *const modes[] = {"session", "table"};
    const char *mode;
    int rc = dlock__url_choice(url, "mode", modes, 2, 0, &mode);
    if (rc != DLOCK_OK)
        return rc;
    int table = mode != NULL && strcmp(mode, "table") == 0;
    if (url->nhosts != 1)
        return dlock__fail(DLOCK_EINVAL, "%s: want one host (postgres://user:pass@host:port/db)",
                           url->text);
    if (strchr(url->path, '/') != NULL)
        return dlock__fail(DLOCK_EINVAL, "%s: the path is the database's name, one word",
                           url->text);
    int64_t connect_ms = DEFAULT_CONNECT_MS;
    rc = dlock__url_duration(url, "connect_timeout", 1, &connect_ms);
    if (rc != DLOCK_OK)
        return rc;
    /* libpq's modes; a typo is a bad URL, told at open, not at the first
     * connection (where libpq would refuse it without a server) */
    static const char *const sslmodes[] = {"disable", "allow",     "prefer",
                                           "require", "verify-ca", "verify-full"};
    const char *sslmode;
    rc = dlock__url_choice(url, "sslmode", sslmodes, 6, 2, &sslmode);
    if (rc != DLOCK_OK)
        return rc;

    dlock__pgstore *p = calloc(1, sizeof *p);
    if (p == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&p->mu, NULL);
    p->base.backend = &dlock__pg_backend;
    p->table = table;
    p->base.caps = dlock__pg_backend.caps & (table ? TABLE_CAPS : SESSION_CAPS);
    p->base.host = *host;
    p->base.label = p->label;
    p->timeout_ms = host->cfg->command_timeout_ms;
    p->connect_ms = connect_ms;
    p->lease_ms = host->cfg->lease_ms;
    int port = url->hosts[0].port ? url->hosts[0].port : DEFAULT_PORT;
    snprintf(p->host, sizeof p->host, "%s", url->hosts[0].name);
    snprintf(p->port, sizeof p->port, "%d", port);
    /* (the user, never the password: who asked is part of a refusal) */
    snprintf(p->label, sizeof p->label, "%s://%s%s%s%s:%d%s%s%s%s", url->scheme, url->userinfo,
             strchr(p->host, ':') ? "[" : "", p->host, strchr(p->host, ':') ? "]" : "", port,
             url->path[0] ? "/" : "", url->path, mode != NULL ? "?mode=" : "",
             mode != NULL ? mode : "");
    p->base.kind = table ? "PostgreSQL in table mode" : "PostgreSQL in session mode";
    /* The server's own bound on a dead or frozen holder, close to the lease
     * (README.md): keepalives find a dead peer in about half a lease, and a
     * session that sends nothing for 1.5 leases (its renewer pings every
     * third of one) is ended by the server. A backend whose client closed
     * the connection (a wait given up on while blocked in the server)
     * notices it within a command timeout, and leaves the lock's queue. */
    int64_t lease_s = p->lease_ms / 1000;
    int idle_s = (int) (lease_s / 3 > 1 ? lease_s / 3 : 1);
    int interval_s = (int) (lease_s / 9 > 1 ? lease_s / 9 : 1);
    snprintf(p->options, sizeof p->options,
             "-c idle_session_timeout=%lld -c tcp_keepalives_idle=%d "
             "-c tcp_keepalives_interval=%d -c tcp_keepalives_count=3 -c tcp_user_timeout=%lld "
             "-c client_connection_check_interval=%lld -c standard_conforming_strings=on "
             "-c default_transaction_isolation=read\\ committed",
             (long long) (p->lease_ms * 3 / 2), idle_s, interval_s, (long long) p->lease_ms,
             (long long) p->timeout_ms);
    snprintf(p->lease_text, sizeof p->lease_text, "%lld milliseconds", (long long) p->lease_ms);
    snprintf(p->connect_timeout, sizeof p->connect_timeout, "%lld",
             (long long) (connect_ms + 999) / 1000);
    snprintf(p->keepalives_idle, sizeof p->keepalives_idle, "%d", idle_s);
    snprintf(p->keepalives_interval, sizeof p->keepalives_interval, "%d", interval_s);
    snprintf(p->user_timeout, sizeof p->user_timeout, "%lld", (long long) p->lease_ms);
    size_t n = 0;
    param(p, &n, "host", p->host);
    param(p, &n, "port", p->port);
    if (url->user != NULL) {
        snprintf(p->user, sizeof p->user, "%s", url->user);
        param(p, &n, "user", p->user);
    }
    if (url->password != NULL) {
        snprintf(p->password, sizeof p->password, "%s", url->password);
        param(p, &n, "password", p->password);
    }
    if (url->path[0] != '\0') {
        snprintf(p->dbname, sizeof p->dbname, "%s", url->path);
        param(p, &n, "dbname", p->dbname);
    }
    if (sslmode != NULL) {
        snprintf(p->sslmode, sizeof p->sslmode, "%s", sslmode);
        param(p, &n, "sslmode", p->sslmode);
    }
    param(p, &n, "application_name", "dlock");
    param(p, &n, "connect_timeout", p->connect_timeout);
    param(p, &n, "keepalives", "1");
    param(p, &n, "keepalives_idle", p->keepalives_idle);
    param(p, &n, "keepalives_interval", p->keepalives_interval);
    param(p, &n, "keepalives_count", "3");
    param(p, &n, "tcp_user_timeout", p->user_timeout);
    param(p, &n, "options", p->options);
    p->keys[n] = NULL;
    p->vals[n] = NULL;
    snprintf(p->take_try, sizeof p->take_try, take_sql[0], "WHERE l.ok");
    snprintf(p->take_wait, sizeof p->take_wait, take_sql[1], "");
    p->prep_sql[PREP_TRY] = p->take_try;
    p->prep_sql[PREP_WAIT] = p->take_wait;
    p->prep_sql[PREP_RELEASE] = RELEASE_SQL;
    p->prep_sql[PREP_UNLOCK] = UNLOCK_SQL;
    if ((table ? dlock__pgl_new(p, &p->listen)
               : dlock__sockwatch_new(dlock__pg_watch_check, p, &p->watch)) != DLOCK_OK) {
        pg_close(&p->base, dlock__now_us());
        return DLOCK_ENOMEM;
    }
    *out = &p->base;
    return DLOCK_OK;
}

static const char *const schemes[] = {"postgres", "postgresql", NULL};

const dlock__backend dlock__pg_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "PostgreSQL",
    .schemes = schemes,
    .caps = SESSION_CAPS | TABLE_CAPS,
    .open = pg_open,
    .close = pg_close,
    .lock_new = pg_lock_new,
    .lock_free = pg_lock_free,
    .detach = pg_detach,
    .acquire = pg_acquire,
    .prepare_wait = pg_prepare_wait,
    .wait = pg_wait,
    .cancel = pg_cancel,
    .release = pg_release,
    .extend = pg_extend,
    .renew = pg_renew,
    .session_lost = dlock__pg_session_lost,
    .query = dlock__pg_query,
    .force_unlock = dlock__pg_force_unlock,
    .holders = dlock__pg_holders,
    .list = dlock__pg_list,
    .reached = pg_reached,
};
