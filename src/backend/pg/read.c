/* SPDX-License-Identifier: MIT */
/* read.c - session mode's read-write lock: its readers, and what the
 * exclusive grants (pg.c) need to know of them (README.md, "Read locks").
 *
 * A reader holds the name's advisory key shared (pg_advisory_lock_shared),
 * a writer exclusively, as a mutex does: readers share, a writer or a
 * mutex excludes them, and PostgreSQL's queue of the key serves a waiting
 * writer before a later reader (a request that conflicts with a waiting
 * one waits behind it), so readers do not starve writers.
 *
 * Beside the key, a reader has a row lease of its own in dlock_share (one
 * row per reader connection of a name: several readers, several rows),
 * for the same reason an exclusive holder has one in dlock_fence: a
 * reader whose connection ended may believe it reads until its renewal
 * fails, so a writer that gets the key waits until no reader's lease runs.
 * So that an exclusive grant need not look at dlock_share every time,
 * every reader's grant and renewal raises the name's dlock_fence row's
 * shared_until to its lease's end: while that is past, no reader lease
 * runs, and the grant (one more column of its answer) looks no further.
 * A reader's grant bumps the fence counter (every new holder's fence is
 * above every earlier holder's, whatever its kind) without touching the
 * row's exclusive holder or lease, and is refused while a writer's row
 * lease or the run rule holds the name. A reader's release is pg.c's, with
 * the statement below (DLOCK__PG_READ_RELEASE_SQL). */
#include "pg.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The grant: the key shared, then, only while no exclusive holder's lease
 * nor the run rule holds the row (its latest version: ON CONFLICT DO
 * UPDATE ... WHERE), the fence bumped and shared_until raised, and the
 * reader's lease row written. The answer's columns are the exclusive
 * grant's (pg.c): fence, ours, ms left of what holds it, table mode's
 * table there, held by the run rule alone, readers seen (never: a reader
 * does not wait for readers); no row when a try found the key held. The
 * last read of the row (the lease left) is of the statement's snapshot,
 * older than the grant when it waited: it only paces the next look. A row
 * held by this connection itself is its owner's write (a downgrade,
 * pg_acquire): the read goes beside it. */
#define READ_ROW                                                                                   \
    "g AS (INSERT INTO dlock_fence AS f (name, key, fence, holder, expires, owner, holder_pid, "   \
    "run, shared_until) SELECT $2, $1::bigint, $7::bigint + pg_current_xact_id()::text::bigint, "  \
    "'', clock_timestamp(), '', 0, $8::bigint, clock_timestamp() + $5::interval FROM l WHERE "     \
    "l.ok AND NOT " DLOCK__PG_EARLY " ON CONFLICT (name) DO UPDATE SET fence = greatest(f.fence "  \
    "+ 1, excluded.fence), shared_until = greatest(f.shared_until, excluded.shared_until) WHERE "  \
    "(NOT " DLOCK__PG_STILL_HELD " OR f.holder = $6) RETURNING f.fence), "                         \
    "w AS (INSERT INTO dlock_share (name, holder, expires, owner, holder_pid) SELECT $2, $6, "     \
    "clock_timestamp() + $5::interval, $4, pg_backend_pid() FROM g ON CONFLICT (name, holder) DO " \
    "UPDATE SET expires = excluded.expires, owner = excluded.owner, holder_pid = "                 \
    "excluded.holder_pid RETURNING 1) "                                                            \
    "SELECT coalesce((SELECT fence FROM g), 0), EXISTS (SELECT FROM g) AND EXISTS (SELECT FROM "   \
    "w), coalesce(ceil(extract(epoch FROM (greatest(f.expires, CASE WHEN f.run < $8::bigint THEN " \
    "$9::timestamptz END) - clock_timestamp())) * 1000)::bigint, ceil(extract(epoch FROM "         \
    "($9::timestamptz - clock_timestamp())) * 1000)::bigint), to_regclass('" DLOCK__SQLT_TABLE     \
    "') IS NOT NULL, NOT EXISTS (SELECT FROM g) AND (f.name IS NULL OR (f.run < $8::bigint AND "   \
    "(f.holder = '' OR f.expires <= clock_timestamp()))), false "                                  \
    "FROM l LEFT JOIN dlock_fence f ON f.name = $2 WHERE l.ok"
#define READ_SET                                                                                   \
    "WITH s AS (SELECT set_config('lock_timeout', $3, true), "                                     \
    "set_config('synchronous_commit', 'off', true)), "

/* Once the key is had, the second key (DLOCK__PG_KEY2) exclusively until
 * the commit: a table take in flight (it holds that key shared, and the
 * key too, which a reader shares) is waited for, so the table check after
 * the grant (pg.c: CHECK_SQL, its snapshot after this) sees its row; and
 * a table take that comes meanwhile is refused the second key, so it
 * finds this reader's lease committed when it looks again. Before, both
 * could look before the other committed, and both held (README.md, "Read
 * locks": across the modes). Readers of one name take their grants'
 * statements one at a time by it; their holds still share. */
#define KEY2_AFTER(ok)                                                                             \
    "l AS (SELECT " ok " AND (CASE WHEN " ok " THEN pg_advisory_xact_lock(" DLOCK__PG_KEY2(        \
        "$1::bigint") ")::text END) IS NOT NULL AS ok FROM l0), "

const char *const dlock__pg_read_sql[2] = {
    /* a try */
    READ_SET
    "l0 AS (SELECT pg_try_advisory_lock_shared($1::bigint) AS ok FROM s), " KEY2_AFTER("l0.ok")
        READ_ROW,
    /* a wait of a slice */
    READ_SET
    "l0 AS (SELECT pg_advisory_lock_shared($1::bigint) AS v, true AS ok FROM s), " KEY2_AFTER(
        "l0.ok") READ_ROW,
};

/* The longest reader lease of a name still running, in ms (0: none). FOR
 * UPDATE: a reader's release in flight (its row deleted, not committed
 * yet) is waited for, and then not counted. $1: the name. */
#define SHARE_CHECK_SQL                                                                            \
    "SELECT coalesce(max(ceil(extract(epoch FROM (expires - clock_timestamp())) * 1000)"           \
    "::bigint), 0) FROM (SELECT expires FROM dlock_share WHERE name = $1 AND expires > "           \
    "clock_timestamp() FOR UPDATE) AS s"

void dlock__pg_read_after_failure(dlock__pgstore *p, dlock__pgconn *c, const char *key,
                                  int64_t deadline)
{
    PGresult *r = NULL;
    const char *params[] = {key};
    int rc = dlock__pg_exec_prepared(p, c, DLOCK__PGP_READ_UNLOCK, DLOCK__PG_READ_UNLOCK_SQL, 1,
                                     params, deadline, NULL, NULL, &r);
    int ok = rc == DLOCK_OK && PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    if (ok)
        dlock__pg_put(p, c);
    else
        dlock__pg_discard(p, c, "closed after a failed attempt");
}

int dlock__pg_readers_left(dlock__pgstore *p, dlock__pgconn *c, dlock__pglock *l,
                           int64_t deadline_us, int64_t *left_ms)
{
    PGresult *r = NULL;
    const char *params[] = {l->name};
    *left_ms = 0;
    int rc = dlock__pg_exec_prepared(p, c, DLOCK__PGP_SHARE_CHECK, SHARE_CHECK_SQL, 1, params,
                                     deadline_us, NULL, NULL, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        rc = dlock__pg_fail(p, r, "looking at the readers' leases");
    else
        *left_ms = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return rc;
}

void dlock__pg_held_by(dlock__pgstore *p, dlock__pgconn *c, dlock__pglock *l, int64_t deadline_us,
                       dlock__attempt *a, int *broken)
{
    /* Who has the key: readers (shared), or an exclusive holder, a writer
     * when its row says so; and whether an exclusive request waits in the
     * key's queue (readers hold it, and a reader's try is refused behind a
     * waiting writer). Only after a try was refused: a message's detail,
     * not worth a failure of its own. */
    const char *params[] = {l->classid, l->objid, l->name};
    PGresult *r = NULL;
    int rc = dlock__pg_exec(
        p, c,
        "SELECT coalesce(bool_or(l.granted AND l.mode = 'ShareLock'), false), "
        "coalesce((SELECT starts_with(owner, '" DLOCK__PG_WRITER "') FROM dlock_fence WHERE name = "
        "$3), false), coalesce(bool_or(NOT l.granted AND l.mode = 'ExclusiveLock'), false) FROM "
        "pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.classid = $1::oid AND "
        "l.objid = $2::oid AND l.database = (SELECT oid FROM pg_database WHERE datname = "
        "current_database())",
        3, params, deadline_us, NULL, NULL, &r);
    a->held_as = DLOCK__HELD_AS_SAME;
    if (rc == DLOCK_OK && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        int shared = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        int rw = shared || strcmp(PQgetvalue(r, 0, 1), "t") == 0;
        int mine_rw = l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__WRITE;
        if (rw != mine_rw)
            a->held_as = rw ? DLOCK__HELD_AS_RW : DLOCK__HELD_AS_MUTEX;
        if (shared && l->base.spec.kind == DLOCK__READ && strcmp(PQgetvalue(r, 0, 2), "t") == 0)
            a->held_why = DLOCK__WHY_WRITER_FIRST;
    }
    PQclear(r);
    *broken = rc == DLOCK_EUNREACHABLE;
    dlock__clear_error();
}

int dlock__pg_owner_clash(dlock__pgstore *p, dlock__pglock *l, const char *token,
                          dlock__pgconn **beside, int *holds)
{
    int clash = 0;
    dlock__pglock *writer = NULL;
    *beside = NULL;
    *holds = 0;
    pthread_mutex_lock(&p->mu);
    for (dlock__pglock *h = p->held; h != NULL && !clash; h = h->next_held) {
        if (h == l || h->key != l->key || strcmp(h->owner, token) != 0)
            continue;
        *holds = 1;
        /* several reads of one owner share the key (each on its own
         * connection); a read beside the owner's write is a downgrade;
         * anything else of the owner's would wait for itself */
        if (l->base.spec.kind == DLOCK__READ && h->base.spec.kind == DLOCK__WRITE)
            writer = h;
        else
            clash = !(h->base.spec.kind == DLOCK__READ && l->base.spec.kind == DLOCK__READ);
    }
    if (!clash && writer != NULL && writer->conn != NULL) {
        *beside = writer->conn;
        dlock__session_ref(writer->conn->session); /* until its mutex is held (beside_lock) */
    }
    pthread_mutex_unlock(&p->mu);
    return clash;
}

int dlock__pg_beside_lock(dlock__pgstore *p, dlock__pgconn *c, int64_t key, const char *token)
{
    dlock__session *session = c->session;
    pthread_mutex_lock(&c->mu);
    /* the owner's write still on c: between dlock__pg_owner_clash and here
     * another thread of the owner may have released it, and c gone back
     * to the pool and to another hold of the name, whose key a read taken
     * there would share (a session's own advisory locks never conflict:
     * two holders). Looked at under c's mutex, which a release takes: a
     * write found here stays until c is let go. (c before the store: the
     * order connect_one takes them in.) */
    int writer = 0;
    pthread_mutex_lock(&p->mu);
    for (dlock__pglock *h = p->held; h != NULL && !writer; h = h->next_held)
        writer = h->conn == c && h->key == key && h->base.spec.kind == DLOCK__WRITE &&
                 strcmp(h->owner, token) == 0;
    pthread_mutex_unlock(&p->mu);
    size_t n = 0;
    for (size_t i = 0; i < c->nkeys; i++)
        n += c->keys[i] == key;
    /* still open, and holding the key for the writer alone (a read beside
     * it there already would share the reader's lease row) */
    int ok = !writer || c->pg == NULL || atomic_load(&c->lost) ? -1 : n == 1 ? 1 : 0;
    if (ok != 1)
        pthread_mutex_unlock(&c->mu);
    dlock__session_unref(session); /* (the writer's reference keeps c while ok) */
    return ok;
}

void dlock__pg_held_add(dlock__pgstore *p, dlock__pglock *l, const char *token)
{
    pthread_mutex_lock(&p->mu);
    snprintf(l->owner, sizeof l->owner, "%s", token);
    l->next_held = p->held;
    p->held = l;
    pthread_mutex_unlock(&p->mu);
}

void dlock__pg_held_remove(dlock__pgstore *p, dlock__pglock *l)
{
    pthread_mutex_lock(&p->mu);
    for (dlock__pglock **at = &p->held; *at != NULL; at = &(*at)->next_held) {
        if (*at == l) {
            *at = l->next_held;
            break;
        }
    }
    l->next_held = NULL;
    pthread_mutex_unlock(&p->mu);
}

/* ---------------------------------------------------------------- kinds */

int dlock__pg_is_rw(const dlock__pglock *l)
{
    return l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__WRITE;
}

int dlock__pg_of_kind(const dlock__pglock *l, int any, int reader, const char *owner)
{
    if (any)
        return 1;
    int rw = reader || strncmp(owner, DLOCK__PG_WRITER, strlen(DLOCK__PG_WRITER)) == 0;
    return rw == dlock__pg_is_rw(l);
}

/* The part of pg_locks that is l's key, granted ($1 classid, $2 objid as
 * literals: the statements below have no parameters). */
#define KEY_GRANTED                                                                                \
    "l.locktype = 'advisory' AND l.objsubid = 1 AND l.classid = %s AND l.objid = %s AND "          \
    "l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.granted"
/* Readers' leases of the name %s run (a session holding the key
 * exclusively meanwhile waits them out: a waiter, not a holder). */
#define READERS_RUN                                                                                \
    "EXISTS (SELECT FROM dlock_share r WHERE r.name = %s AND r.expires > clock_timestamp())"

int dlock__pg_force_sql(const dlock__pglock *l, const char *name, const char *wait_ms, char *sql,
                        size_t len)
{
    int n;
    if (dlock__pg_is_rw(l)) {
        /* The read-write lock: every reader's lease ends and its session
         * is ended, and the writer's, when one holds (no reader lease
         * runs: a session holding the key then waits them out). A mutex
         * holder, or one waiting out the readers, is not touched. The
         * updates run before the first terminate (the IN's subquery reads
         * them), and their rows stay locked until the commit: the next
         * holder sees the leases ended. */
        n = snprintf(sql, len,
                     "WITH rd AS (UPDATE dlock_share SET expires = clock_timestamp() WHERE name = "
                     "%s AND expires > clock_timestamp() RETURNING holder_pid), "
                     "wr AS (UPDATE dlock_fence SET expires = clock_timestamp() WHERE name = %s "
                     "AND expires > clock_timestamp() AND starts_with(owner, '" DLOCK__PG_WRITER
                     "') AND NOT " READERS_RUN " RETURNING holder_pid) "
                     "SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid, %s)), count(*), "
                     "to_regclass('" DLOCK__SQLT_TABLE
                     "') IS NOT NULL FROM pg_locks l WHERE " KEY_GRANTED
                     " AND l.pid IN (SELECT holder_pid FROM rd UNION ALL SELECT "
                     "holder_pid FROM wr)",
                     name, name, name, wait_ms, l->classid, l->objid);
    } else {
        /* The mutex: nothing while the read-write lock holds the name
         * (DLOCK__PG_RW_HOLDS); else the row's lease ends first, and the
         * row stays locked until the holder's session has ended (the
         * next holder sees it ended), then every session holding the key
         * is ended (a session that is not dlock's too). */
        n = snprintf(sql, len,
                     "UPDATE dlock_fence f SET expires = clock_timestamp() WHERE f.name = %s AND "
                     "f.expires > clock_timestamp() AND NOT " DLOCK__PG_RW_HOLDS "; "
                     "SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid, %s)), count(*), "
                     "to_regclass('" DLOCK__SQLT_TABLE
                     "') IS NOT NULL FROM pg_locks l WHERE " KEY_GRANTED
                     " AND NOT EXISTS (SELECT FROM dlock_fence f WHERE f.name = %s "
                     "AND " DLOCK__PG_RW_HOLDS ") AND NOT " READERS_RUN,
                     name, wait_ms, l->classid, l->objid, name, name);
    }
    if (n < 0 || (size_t) n >= len)
        return dlock__fail(DLOCK_EINVAL, "lock '%.64s...': name too long", l->name);
    return DLOCK_OK;
}
