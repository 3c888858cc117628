/* SPDX-License-Identifier: MIT */
/* shares.c - table mode's read-write lock and semaphore (mode=table), as
 * MariaDB's (../mysql/README.md, "Read locks and semaphores"): the name's
 * row of dlock_lock is the lock for everyone else. A writer holds it as a
 * mutex does, under "w:" and its owner token; readers under "r:", a
 * semaphore's holders under "s:N" (N its permits), with a lease that ends
 * no sooner than the last shared holder's. Each shared holder has a row of
 * its own in dlock_lock_share (its fence, info, count and lease).
 *
 * Every change to the shared holders' rows is one transaction (a pipeline
 * of prepared statements, one round trip) whose first statement locks the
 * name's row: the statements after it start after the lock was got, so
 * under READ COMMITTED they see every change committed before it, and the
 * name's row orders them all. (One statement could not: its snapshot is
 * taken before it waits for the row, and a semaphore's permits counted
 * there would miss a holder that committed meanwhile.) A take's guard
 * (pg.h: DLOCK__PGT_GUARD_SQL) comes first, as a mutex's take, so that the
 * session mode's holders of the name exclude it. A writer's release, lease
 * set and renewal look at its owner's own reader (a downgrade) and run
 * here too.
 *
 * Calls both ways with table.c: table.c hands a shared holder's steps
 * here, and its requests run on table.c's tables (made, or made again
 * when found gone). */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prepared statements' numbers (pg.h: session mode's are below 8,
 * table.c's 7 to 11, read.c's 12 to 16). */
enum {
    PREP_MAKE_ROW = 17,
    PREP_READ_TRY,
    PREP_READ_WAIT,
    PREP_SEM_TRY,
    PREP_SEM_WAIT,
    PREP_LOCK_ROW = DLOCK__PGT_PREP_LOCK_ROW, /* (22: table.c uses it too) */
    PREP_DROP,
    PREP_CLEAN,
    PREP_LOWER,
    PREP_WRITE_RELEASE,
    PREP_EXTEND,
    PREP_WRITE_EXTEND,
    PREP_LOCK_ROWS,
    PREP_RENEW,
    PREP_WRITE_RENEW,
};

#define SHARE     DLOCK__PGT_SHARE
#define LEASE(us) "now() + " us " * interval '1 microsecond'"
/* the owner's row of a writer ($2: its token) */
#define MY_WRITE "('" DLOCK__SQLT_WRITER "'::bytea || $2::bytea)"
/* a row's owner is its shared holders': readers, or a semaphore's */
#define SHARED(col)                                                                                \
    "(" col " = '" DLOCK__SQLT_READERS "'::bytea OR substring(" col " FROM 1 FOR 2) = "            \
    "'" DLOCK__SQLT_PERMITS "'::bytea)"
/* the waiters of $1 older than $2's wait (first in line: sqltable.c) */
#define OLDER                                                                                      \
    "(SELECT count(*) FROM " DLOCK__SQLT_WAIT " q WHERE q.name = $1::bytea AND q.owner <> "        \
    "$2::bytea AND q.expires > now() AND q.since < COALESCE((SELECT m.since "                      \
    "FROM " DLOCK__SQLT_WAIT                                                                       \
    " m WHERE m.name = $1::bytea AND m.owner = $2::bytea AND m.expires > now()), now()))"
#define NOTIFY_OF(cond)                                                                            \
    "(SELECT pg_notify('" DLOCK__SQLT_NOTIFY "', encode(substring($1::bytea FROM 1 FOR "           \
    "32), 'hex')) FROM u WHERE " cond ")"
/* the waiters told of a release (u: the name's row changed): the row
 * freed, handed to readers, or a shared holder gone (the permits a
 * waiter needs may be back) */
#define NOTIFY_RELEASED NOTIFY_OF("true")

/* The name's row, made free when missing, and locked ($1 the name). ON
 * CONFLICT ... DO UPDATE ... WHERE false locks the row it found and
 * writes nothing. */
#define MAKE_ROW_SQL                                                                               \
    "INSERT INTO " DLOCK__SQLT_TABLE " AS l (name, lock_name, owner, info, fence, expires) "       \
    "VALUES ($1::bytea, $1::bytea, ''::bytea, '', 0, 'epoch'::timestamptz) ON CONFLICT (name) "    \
    "DO UPDATE SET fence = l.fence WHERE false"
#define LOCK_ROW_SQL DLOCK__PGT_LOCK_ROW_SQL

/* A shared take after MAKE_ROW_SQL: (how, its columns) the row's change
 * and the holder's row; then, for a waiter, its waiter's row ($W); the
 * answer is a mutex take's (table.c) with the row's owner and whether
 * this owner holds a shared row of the name; behind shared holders the
 * lease told is the first of theirs to end (permits may come back then). $1 the name, $2 the owner
 * token, $3 its info, $4 the lease in µs, $5 the advisory key. */
#define TAKE_HEAD                                                                                  \
    "WITH g AS (SELECT (" DLOCK__PGT_SESSION_GUARD                                                 \
    ") AS ok), c AS (SELECT owner, expires FROM " DLOCK__SQLT_TABLE                                \
    " WHERE name = $1::bytea), t AS (UPDATE " DLOCK__SQLT_TABLE " l SET "                          \
    "fence = GREATEST(l.fence + 1, (EXTRACT(EPOCH FROM now()) * 1000000)::bigint), lock_name = "   \
    "$1::bytea, expires = GREATEST(l.expires, " LEASE("$4::bigint") "), "
#define WAIT_ROWS(w)                                                                               \
    ", w AS (INSERT INTO " DLOCK__SQLT_WAIT " AS v (name, owner, lock_name, expires, since) "      \
    "SELECT $1::bytea, $2::bytea, $1::bytea, " LEASE(                                              \
        w) ", now() FROM g WHERE NOT "                                                             \
           "EXISTS (SELECT 1 FROM t) ON CONFLICT (name, owner) DO UPDATE SET since = CASE WHEN "   \
           "v.expires <= now() THEN EXCLUDED.since ELSE v.since END, expires = EXCLUDED.expires "  \
           "RETURNING 1), x AS (DELETE FROM " DLOCK__SQLT_WAIT                                     \
           " WHERE name = $1::bytea AND EXISTS "                                                   \
           "(SELECT 1 FROM g WHERE g.ok) AND ((owner = $2::bytea AND EXISTS (SELECT 1 FROM t)) "   \
           "OR "                                                                                   \
           "(owner <> $2::bytea AND expires <= now())) RETURNING 1)"
#define TAKE_ANSWER                                                                                \
    " SELECT t.fence, (t.fence IS NOT NULL)::int, CEIL(EXTRACT(EPOCH FROM (CASE WHEN " SHARED(     \
        "c.owner") " THEN COALESCE((SELECT min(expires) FROM " SHARE " WHERE name = "              \
                   "$1::bytea AND expires > now()), c.expires) ELSE c.expires END - now())) * "    \
                   "1000)::bigint, " OLDER ", (SELECT g.ok::int FROM g), convert_from(c.owner, "   \
                   "'UTF8'), (EXISTS (SELECT 1 FROM " SHARE                                        \
                   " WHERE name = $1::bytea AND owner = $2::bytea AND expires > now()))::int "     \
                   "FROM (SELECT "                                                                 \
                   "1) d LEFT JOIN t ON true LEFT JOIN c ON true"

/* A reader: the row taken for readers when free or expired, or joined
 * while readers hold it, in both cases only with no older live waiter (a
 * writer waiting is not overtaken); or its owner's own write holds it (a
 * downgrade: the row stays the writer's until it lets go). The lease is
 * raised to the reader's end, never lowered. The reader's row: one more
 * hold of its owner's while it is live (handles that share a token,
 * dlock_lock_dup: each release takes one off), its end the later of
 * theirs. */
#define READ_TAKE                                                                                  \
    TAKE_HEAD                                                                                      \
    "info = CASE WHEN l.owner = " MY_WRITE " THEN l.info ELSE '' END, owner = CASE "               \
    "WHEN l.owner = " MY_WRITE " THEN l.owner ELSE '" DLOCK__SQLT_READERS "'::bytea "              \
    "END FROM g WHERE l.name = $1::bytea AND g.ok AND ((l.owner = " MY_WRITE " AND "               \
    "l.expires > now()) OR (" OLDER " = 0 AND (l.expires <= now() OR l.owner = "                   \
    "'" DLOCK__SQLT_READERS "'::bytea))) RETURNING l.fence), s AS (INSERT INTO " SHARE             \
    " AS s (name, owner, info, fence, count, expires) SELECT $1::bytea, $2::bytea, "               \
    "$3::text, t.fence, 1, " LEASE("$4::bigint") " FROM t ON CONFLICT (name, owner) DO "           \
                                                 "UPDATE SET count = CASE WHEN s.expires > "       \
                                                 "now() THEN s.count + 1 ELSE 1 END, fence "       \
                                                 "= EXCLUDED.fence, info = EXCLUDED.info, "        \
                                                 "expires = CASE WHEN s.expires > now() "          \
                                                 "THEN GREATEST(s.expires, EXCLUDED.expires) "     \
                                                 "ELSE EXCLUDED.expires END RETURNING 1)"
/* A semaphore's holder ($6 the permits, $7 the permits it takes): the
 * row taken when free or expired, or joined while the semaphore of the
 * same permits holds it and the permits others hold leave room, in both
 * cases with no older live waiter (a large request at the head is not
 * overtaken). */
#define SEM_OWNER "convert_to('" DLOCK__SQLT_PERMITS "' || $6::int::text, 'UTF8')"
#define SEM_TAKE                                                                                   \
    TAKE_HEAD "info = '', owner = " SEM_OWNER                                                      \
              " FROM g WHERE l.name = $1::bytea AND g.ok AND " OLDER                               \
              " = 0 AND (l.expires <= now() OR (l.owner = " SEM_OWNER " AND (SELECT "              \
              "COALESCE(sum(count), 0) FROM " SHARE " WHERE name = $1::bytea AND owner <> "        \
              "$2::bytea AND expires > now()) + $7::int <= $6::int)) RETURNING l.fence), s AS "    \
              "(INSERT INTO " SHARE " AS s (name, owner, info, fence, count, expires) SELECT "     \
              "$1::bytea, $2::bytea, $3::text, t.fence, $7::int, " LEASE(                          \
                  "$4::bigint") " FROM t "                                                         \
                                "ON CONFLICT (name, owner) DO UPDATE SET count = EXCLUDED.count, " \
                                "fence = "                                                         \
                                "EXCLUDED.fence, info = EXCLUDED.info, expires = "                 \
                                "EXCLUDED.expires RETURNING 1)"

/* A shared holder's release, after LOCK_ROW_SQL: one hold off its row
 * ($3: 1 a reader's, one of its handles; 0 a semaphore's permits, all at
 * once), the row gone at none, lapsed ones with it; the name's row freed
 * when no holder is left, else its lease lowered to the last one's end;
 * its waiters told either way. */
#define DROP_SQL                                                                                   \
    "UPDATE " SHARE " SET count = CASE WHEN $3::int = 1 THEN count - 1 ELSE 0 END WHERE name = "   \
    "$1::bytea AND owner = $2::bytea AND expires > now() RETURNING 1"
#define CLEAN_SQL                                                                                  \
    "DELETE FROM " SHARE " WHERE name = $1::bytea AND (expires <= now() OR (owner = $2::bytea "    \
    "AND count <= 0))"
#define LOWER_SQL                                                                                  \
    "WITH m AS (SELECT max(expires) AS e FROM " SHARE " WHERE name = $1::bytea AND expires > "     \
    "now()), u AS (UPDATE " DLOCK__SQLT_TABLE " l SET owner = CASE WHEN m.e IS NULL THEN "         \
    "''::bytea ELSE l.owner END, expires = COALESCE(m.e, 'epoch'::timestamptz) FROM m WHERE "      \
    "l.name = $1::bytea AND " SHARED(                                                              \
        "l.owner") " AND l.expires > now() RETURNING m.e) SELECT " NOTIFY_RELEASED                 \
                   ", set_config('synchronous_commit', 'off', true)"
/* A writer's release, after LOCK_ROW_SQL: the readers' when its owner
 * took the read lock beside it (a downgrade), else the row freed. Only
 * the owner's own reader's row counts: no other reader holds the name
 * beside a write, and another's row live here is a lost reader's. Its
 * waiters told either way (readers may share it now). The answer:
 * released (1), the holder now. */
#define WRITE_RELEASE_SQL                                                                          \
    "WITH m AS (SELECT max(expires) AS e FROM " SHARE " WHERE name = $1::bytea AND owner = "       \
    "$2::bytea AND expires > now()), u AS (UPDATE " DLOCK__SQLT_TABLE " l SET owner = CASE WHEN "  \
    "m.e IS NULL THEN ''::bytea ELSE '" DLOCK__SQLT_READERS "'::bytea END, info = '', expires = "  \
    "CASE WHEN m.e IS NULL THEN 'epoch'::timestamptz ELSE GREATEST(m.e, now()) END FROM m WHERE "  \
    "l.name = $1::bytea AND l.owner = " MY_WRITE " AND l.expires > now() RETURNING m.e) SELECT "   \
    "(SELECT count(*) FROM u), (SELECT convert_from(owner, 'UTF8') FROM " DLOCK__SQLT_TABLE        \
    " WHERE name = $1::bytea AND owner <> ''::bytea AND expires > now()), " NOTIFY_RELEASED ", "   \
    "set_config('synchronous_commit', 'off', true)"

/* A shared holder's lease set, after LOCK_ROW_SQL ($3 the lease in µs, $4
 * 1: at least that; $5 1: a reader's): only while the name's row is its
 * kind's (or its owner's write's), and a reader's never lowered while
 * other handles of its owner count on it (count > 1; a semaphore's count
 * is its permits); the name's row raised to it. The answer: 1 when held. */
#define EXTEND_SQL                                                                                 \
    "WITH s AS (UPDATE " SHARE " s SET expires = CASE WHEN $4::int = 1 OR ($5::int = 1 AND "       \
    "s.count > 1) THEN GREATEST(s.expires, " LEASE("$3::bigint") ") ELSE " LEASE(                  \
        "$3::bigint") " END WHERE s.name = $1::bytea AND s.owner = $2::bytea AND s.expires > "     \
                      "now() AND EXISTS "                                                          \
                      "(SELECT 1 FROM " DLOCK__SQLT_TABLE                                          \
                      " l WHERE l.name = $1::bytea AND l.expires > now() AND "                     \
                      "(" SHARED(                                                                  \
                          "l.owner") " OR l.owner = " MY_WRITE                                     \
                                     ")) RETURNING s.expires), u AS (UPDATE " DLOCK__SQLT_TABLE    \
                                     " l SET expires = GREATEST(l.expires, s.expires) FROM s "     \
                                     "WHERE l.name = "                                             \
                                     "$1::bytea RETURNING 1) SELECT count(*) FROM s"
/* A writer's lease set, after LOCK_ROW_SQL: never below its owner's own
 * reader's end (a downgrade whose reader has a longer lease of its own:
 * the row stays the writer's until then, or until it lets go). */
#define WRITE_EXTEND_SQL                                                                           \
    "WITH u AS (UPDATE " DLOCK__SQLT_TABLE " l SET expires = GREATEST(CASE WHEN $4::int = 1 THEN " \
    "GREATEST(l.expires, " LEASE("$3::bigint") ") ELSE " LEASE(                                    \
        "$3::bigint") " END, "                                                                     \
                      "COALESCE((SELECT max(s.expires) FROM " SHARE                                \
                      " s WHERE s.name = l.name AND s.owner = "                                    \
                      "$2::bytea AND s.expires > now()), 'epoch'::timestamptz)) WHERE l.name = "   \
                      "$1::bytea AND "                                                             \
                      "l.owner = " MY_WRITE                                                        \
                      " AND l.expires > now() RETURNING 1) SELECT count(*) FROM u"

/* A renewal's holds: the names' rows locked first, in the names' order (two
 * renewals never wait for each other in a circle), then the shared holds
 * and the writers' ($1 their names, $2 their tokens, hex; $3 their leases
 * in µs; $4 1 for a reader's). A shared holder's row is lengthened only
 * while the name's row is its kind's or its owner's write's (a reader's
 * never lowered while other handles count on it), and the name's row
 * raised to it; a writer's row never set below its owner's own reader's
 * end. The answer: (name, token) of each hold renewed, by statement: a
 * downgrading owner's reader and writer are told apart. */
#define LOCK_ROWS_SQL                                                                              \
    "SELECT 1 FROM " DLOCK__SQLT_TABLE " WHERE name IN (SELECT decode(unnest($1::text[]), "        \
    "'hex')) ORDER BY name FOR UPDATE"
#define HOLDS                                                                                      \
    "h AS (SELECT decode(n, 'hex') AS name, decode(o, 'hex') AS owner, us, r FROM "                \
    "unnest($1::text[], $2::text[], $3::bigint[], $4::int[]) AS x(n, o, us, r))"
#define RENEW_SQL                                                                                  \
    "WITH " HOLDS ", s AS (UPDATE " SHARE " s SET expires = CASE WHEN h.r = 1 AND s.count > 1 "    \
    "THEN GREATEST(s.expires, " LEASE("h.us") ") ELSE " LEASE(                                     \
        "h.us") " END FROM h, " DLOCK__SQLT_TABLE                                                  \
                " l WHERE s.name = h.name AND s.owner = h.owner AND s.expires > now() AND "        \
                "l.name = h.name AND l.expires > now() AND (" SHARED(                              \
                    "l.owner") " OR l.owner = "                                                    \
                               "'" DLOCK__SQLT_WRITER                                              \
                               "'::bytea || h.owner) RETURNING s.name, s.owner, s.expires), u AS " \
                               "(UPDATE " DLOCK__SQLT_TABLE                                        \
                               " l SET expires = GREATEST(l.expires, m.e) FROM (SELECT name, "     \
                               "max(expires) AS e FROM s GROUP BY name) m WHERE l.name = m.name "  \
                               "RETURNING 1) SELECT "                                              \
                               "convert_from(name, 'UTF8'), convert_from(owner, 'UTF8') FROM s"
#define WRITE_RENEW_SQL                                                                            \
    "WITH " HOLDS ", u AS (UPDATE " DLOCK__SQLT_TABLE " l SET expires = GREATEST(" LEASE(          \
        "h.us") ", COALESCE((SELECT max(s.expires) FROM " SHARE                                    \
                " s WHERE s.name = l.name AND s.owner = "                                          \
                "h.owner AND s.expires > now()), 'epoch'::timestamptz)) FROM h WHERE l.name = "    \
                "h.name AND "                                                                      \
                "l.owner = '" DLOCK__SQLT_WRITER                                                   \
                "'::bytea || h.owner AND l.expires > now() RETURNING l.name, "                     \
                "h.owner) SELECT convert_from(name, 'UTF8'), convert_from(owner, 'UTF8') FROM u"

#define SHARE_SCHEMA                                                                               \
    "CREATE TABLE IF NOT EXISTS " SHARE " (name bytea NOT NULL, owner bytea NOT NULL, info text "  \
    "NOT NULL, fence bigint NOT NULL, count integer NOT NULL DEFAULT 1, expires timestamptz NOT "  \
    "NULL, PRIMARY KEY (name, owner))"

int dlock__pgts_ready(dlock__pgstore *p, int64_t deadline_us)
{
    if (atomic_load(&p->share_ready) == 1)
        return DLOCK_OK;
    PGresult *res;
    int rc = dlock__pgt_ready(p, deadline_us);
    if (rc == DLOCK_OK)
        rc = dlock__pgt_request(p, strdup(SHARE_SCHEMA), deadline_us, &res,
                                "creating dlock's table of shared holds (" SHARE ")");
    if (rc == DLOCK_ESERVER) {
        /* not allowed to make it (or two clients made it at once): an
         * administrator, or the other client, may have */
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        rc = dlock__pgt_request(p, strdup("SELECT to_regclass('" SHARE "') IS NOT NULL"),
                                deadline_us, &res, "looking for dlock's table of shared holds");
        if (rc != DLOCK_OK)
            return rc;
        int there = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        PQclear(res);
        if (!there)
            return dlock__fail(DLOCK_ESERVER,
                               "%s; the read-write lock and the semaphore need the table " SHARE
                               ": the role needs CREATE on the schema, or an administrator "
                               "creates it (its schema: src/backend/pg/README.md in dlock's "
                               "source)",
                               why);
    } else if (rc != DLOCK_OK) {
        return rc;
    } else {
        PQclear(res);
    }
    atomic_store(&p->share_ready, 1);
    return DLOCK_OK;
}

/* The n statements of st in one transaction on a pooled connection (a
 * pipeline: one round trip), bounded by a command timeout: DLOCK_OK with
 * every res[i] an answer (PQclear them), or the first error recorded and
 * none kept (*state: its SQLSTATE). A connection whose request got no
 * answer is closed. */
static int transaction_once(dlock__pgstore *p, int n, const dlock__pg_stmt *st, int64_t deadline,
                            PGresult **res, const char *what, char *state)
{
    dlock__pgconn *c;
    int rc = dlock__pg_get_for_request(p, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__pg_exec_pipeline(p, c, n, st, deadline, NULL, NULL, NULL, res);
    dlock__pg_done(p, c, rc == DLOCK_OK);
    /* the first error (a failed PREPARE leaves the others NULL; after an
     * error in the pipeline the later ones are aborted) */
    for (int i = 0; rc == DLOCK_OK && i < n; i++) {
        ExecStatusType s = res[i] != NULL ? PQresultStatus(res[i]) : PGRES_TUPLES_OK;
        if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK || s == PGRES_PIPELINE_ABORTED)
            continue;
        snprintf(state, 6, "%s", dlock__pg_state(res[i]));
        rc = dlock__pg_fail(p, res[i], what);
    }
    for (int i = 0; rc == DLOCK_OK && i < n; i++) {
        if (res[i] == NULL || PQresultStatus(res[i]) == PGRES_PIPELINE_ABORTED)
            rc = dlock__fail(DLOCK_EPROTO, "%s: no answer %s", p->label, what);
    }
    if (rc != DLOCK_OK) {
        for (int i = 0; i < n; i++) {
            PQclear(res[i]);
            res[i] = NULL;
        }
    }
    return rc;
}

/* transaction_once, tried once more when a table was gone (SQLSTATE
 * 42P01: nothing ran; a database wiped under the client), the tables
 * made again first. */
static int transaction(dlock__pgstore *p, int n, const dlock__pg_stmt *st, int64_t deadline,
                       PGresult **res, const char *what)
{
    char state[6] = "";
    int rc = transaction_once(p, n, st, deadline, res, what, state);
    if (rc == DLOCK_ESERVER && strcmp(state, "42P01") == 0) {
        atomic_store(&p->share_ready, 0);
        rc = dlock__pgt_remake(p, deadline);
        if (rc == DLOCK_OK)
            rc = dlock__pgts_ready(p, deadline);
        if (rc == DLOCK_OK)
            rc = transaction_once(p, n, st, deadline, res, what, state);
    }
    return rc;
}

static void clear_all(PGresult **res, int n)
{
    for (int i = 0; i < n; i++)
        PQclear(res[i]);
}

/* text's bytes as a bytea parameter's text (\x and hex), malloc'd. */
static char *hex_param(const char *text, int plain)
{
    size_t n = strlen(text);
    char *out = malloc(2 * n + 3), *at = out;
    if (out == NULL)
        return NULL;
    if (!plain) {
        *at++ = '\\';
        *at++ = 'x';
    }
    for (size_t i = 0; i < n; i++)
        snprintf(at + 2 * i, 3, "%02x", (unsigned char) text[i]);
    at[2 * n] = '\0';
    return out;
}

int dlock__pgts_take(dlock__pgstore *p, dlock__pglock *l, dlock__attempt *a, PGresult **answer)
{
    *answer = NULL;
    int rc = dlock__pgts_ready(p, a->deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    int sem = l->base.spec.kind == DLOCK__SEMAPHORE;
    int waits = a->wait && p->base.host.cfg->waiter_lease_ms > 0;
    char lease_us[24], wait_us[24], permits[16], take[16];
    snprintf(lease_us, sizeof lease_us, "%" PRId64, a->lease_ms * 1000);
    snprintf(wait_us, sizeof wait_us, "%" PRId64, p->base.host.cfg->waiter_lease_ms * 1000);
    snprintf(permits, sizeof permits, "%u", l->base.spec.permits);
    snprintf(take, sizeof take, "%u", l->base.spec.take);
    char *owner = hex_param(a->token, 0);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const char *params[8] = {l->name_hex, owner, p->base.host.cfg->owner_info, lease_us,
                             l->key_text};
    int np = 5;
    if (sem) {
        params[np++] = permits;
        params[np++] = take;
    }
    if (waits)
        params[np++] = wait_us;
    const char *key[1] = {l->key_text};
    static const char *const takes[2][2] = {
        {READ_TAKE TAKE_ANSWER, READ_TAKE WAIT_ROWS("$6::bigint") TAKE_ANSWER},
        {SEM_TAKE TAKE_ANSWER, SEM_TAKE WAIT_ROWS("$8::bigint") TAKE_ANSWER}};
    unsigned which =
        sem ? (waits ? PREP_SEM_WAIT : PREP_SEM_TRY) : (waits ? PREP_READ_WAIT : PREP_READ_TRY);
    dlock__pg_stmt st[3] = {{DLOCK__PGT_PREP_GUARD, DLOCK__PGT_GUARD_SQL, 1, key},
                            {PREP_MAKE_ROW, MAKE_ROW_SQL, 1, params},
                            {which, takes[sem][waits], np, params}};
    PGresult *res[3];
    rc = transaction(p, 3, st, a->deadline_us, res, sem ? "taking permits" : "taking a read hold");
    free(owner);
    if (rc != DLOCK_OK)
        return rc;
    PQclear(res[0]);
    PQclear(res[1]);
    *answer = res[2];
    return DLOCK_OK;
}

int dlock__pgts_release(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t deadline_us)
{
    int counted = l->base.spec.kind == DLOCK__READ;
    char *owner = hex_param(token, 0);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const char *params[3] = {l->name_hex, owner, counted ? "1" : "0"};
    dlock__pg_stmt st[4] = {{PREP_LOCK_ROW, LOCK_ROW_SQL, 1, params},
                            {PREP_DROP, DROP_SQL, 3, params},
                            {PREP_CLEAN, CLEAN_SQL, 2, params},
                            {PREP_LOWER, LOWER_SQL, 1, params}};
    PGresult *res[4];
    int rc = transaction(p, 4, st, deadline_us, res,
                         counted ? "releasing a read hold" : "releasing permits");
    free(owner);
    if (rc != DLOCK_OK)
        return rc;
    if (PQntuples(res[1]) != 1)
        rc = dlock__fail(DLOCK_ELOST,
                         "lock '%s': this owner's %s was not held any more (its lease ran out, "
                         "or it was force-unlocked)",
                         l->name, counted ? "read hold" : "permits");
    clear_all(res, 4);
    return rc;
}

int dlock__pgts_write_release(dlock__pgstore *p, dlock__pglock *l, const char *token,
                              int64_t deadline_us)
{
    int rc = dlock__pgts_ready(p, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    char *owner = hex_param(token, 0);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const char *params[2] = {l->name_hex, owner};
    dlock__pg_stmt st[2] = {{PREP_LOCK_ROW, LOCK_ROW_SQL, 1, params},
                            {PREP_WRITE_RELEASE, WRITE_RELEASE_SQL, 2, params}};
    PGresult *res[2];
    rc = transaction(p, 2, st, deadline_us, res, "releasing the write lock");
    free(owner);
    if (rc != DLOCK_OK)
        return rc;
    const char *n = PQntuples(res[1]) == 1 ? PQgetvalue(res[1], 0, 0) : NULL;
    if (n == NULL || strcmp(n, "1") != 0)
        rc = !PQgetisnull(res[1], 0, 1)
                 ? dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is held by someone else", l->name)
                 : dlock__fail(DLOCK_ELOST,
                               "lock '%s' was not held by this owner any more (its lease ran "
                               "out, or it was force-unlocked)",
                               l->name);
    clear_all(res, 2);
    return rc;
}

int dlock__pgts_extend(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t lease_ms,
                       int at_least, int64_t deadline_us)
{
    int rc = dlock__pgts_ready(p, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    int write = l->base.spec.kind == DLOCK__WRITE;
    char lease_us[24];
    snprintf(lease_us, sizeof lease_us, "%" PRId64, (lease_ms > 0 ? lease_ms : 0) * 1000);
    char *owner = hex_param(token, 0);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const char *params[5] = {l->name_hex, owner, lease_us, at_least ? "1" : "0",
                             l->base.spec.kind == DLOCK__READ ? "1" : "0"};
    dlock__pg_stmt st[2] = {{PREP_LOCK_ROW, LOCK_ROW_SQL, 1, params},
                            {write ? PREP_WRITE_EXTEND : PREP_EXTEND,
                             write ? WRITE_EXTEND_SQL : EXTEND_SQL, write ? 4 : 5, params}};
    PGresult *res[2];
    rc = transaction(p, 2, st, deadline_us, res, "extending the lock's lease");
    free(owner);
    if (rc != DLOCK_OK)
        return rc;
    const char *v = PQntuples(res[1]) == 1 ? PQgetvalue(res[1], 0, 0) : NULL;
    if (v == NULL || strcmp(v, "0") == 0)
        rc = dlock__fail(DLOCK_ELOST,
                         "lock '%s': this owner's %s is not held any more (its lease ran out, "
                         "or it was force-unlocked)",
                         l->name,
                         write                              ? "write lock"
                         : l->base.spec.kind == DLOCK__READ ? "read hold"
                                                            : "permits");
    clear_all(res, 2);
    return rc;
}

/* The holds of h of a kind (kind[i]: 'w' writers, else the shared
 * holds; 0: all) as the arrays of a renewal's statement: names[],
 * tokens[] (hex), leases[] (µs) and readers[] (1 a reader's), each
 * "{...}", malloc'd. */
static int arrays(const dlock__sqlt_hold *h, size_t n, const int *kind, int of, char **out)
{
    size_t len = 8;
    for (size_t i = 0; i < n; i++)
        len += 2 * strlen(h[i].key) + 2 * strlen(h[i].owner) + 48;
    for (int k = 0; k < 4; k++) {
        if ((out[k] = malloc(len)) == NULL)
            return DLOCK_ENOMEM;
        strcpy(out[k], "{");
    }
    size_t at[4] = {1, 1, 1, 1};
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (of != 0 && (kind[i] == 'w') != (of == 'w'))
            continue;
        char *name = hex_param(h[i].key, 1), *token = hex_param(h[i].owner, 1);
        if (name == NULL || token == NULL) {
            free(name);
            free(token);
            return DLOCK_ENOMEM;
        }
        const char *sep = first ? "" : ",";
        at[0] += (size_t) sprintf(out[0] + at[0], "%s%s", sep, name);
        at[1] += (size_t) sprintf(out[1] + at[1], "%s%s", sep, token);
        at[2] += (size_t) sprintf(out[2] + at[2], "%s%" PRId64, sep, h[i].lease_ms * 1000);
        at[3] += (size_t) sprintf(out[3] + at[3], "%s%d", sep, kind[i] == 'r');
        first = 0;
        free(name);
        free(token);
    }
    for (int k = 0; k < 4; k++)
        strcpy(out[k] + at[k], "}");
    return DLOCK_OK;
}

int dlock__pgts_renew(dlock__pgstore *p, dlock__sqlt_hold *h, size_t n, const int *kind,
                      int64_t deadline_us)
{
    char *all[4] = {0}, *shared[4] = {0}, *writers[4] = {0};
    int rc = DLOCK_OK;
    if (arrays(h, n, kind, 0, all) != DLOCK_OK || arrays(h, n, kind, 's', shared) != DLOCK_OK ||
        arrays(h, n, kind, 'w', writers) != DLOCK_OK)
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    PGresult *res[3];
    if (rc == DLOCK_OK) {
        dlock__pg_stmt st[3] = {
            {PREP_LOCK_ROWS, LOCK_ROWS_SQL, 1, (const char *const *) all},
            {PREP_RENEW, RENEW_SQL, 4, (const char *const *) shared},
            {PREP_WRITE_RENEW, WRITE_RENEW_SQL, 4, (const char *const *) writers}};
        rc = transaction(p, 3, st, deadline_us, res, "renewing leases");
    }
    for (int k = 0; k < 4; k++) {
        free(all[k]);
        free(shared[k]);
        free(writers[k]);
    }
    if (rc != DLOCK_OK)
        return rc;
    /* each statement's rows are its own kind's holds: a downgrading
     * owner's reader renewed does not say its write is held */
    for (int k = 1; k < 3; k++) {
        for (int r = 0; r < PQntuples(res[k]); r++) {
            const char *name = PQgetvalue(res[k], r, 0), *token = PQgetvalue(res[k], r, 1);
            for (size_t i = 0; i < n; i++) {
                if ((kind[i] == 'w') == (k == 2) && strcmp(h[i].key, name) == 0 &&
                    strcmp(h[i].owner, token) == 0)
                    h[i].held = 1;
            }
        }
    }
    clear_all(res, 3);
    return DLOCK_OK;
}

int dlock__pgts_readers(dlock__pgstore *p, dlock__pglock *l, int64_t deadline_us, PGresult **res)
{
    *res = NULL;
    int rc = dlock__pgts_ready(p, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    size_t len = strlen(l->key_lit) + 200;
    char *sql = malloc(len);
    if (sql != NULL)
        snprintf(sql, len,
                 "SELECT convert_from(owner, 'UTF8'), info, count FROM " SHARE
                 " WHERE name = %s AND expires > now() ORDER BY fence",
                 l->key_lit);
    return dlock__pgt_request(p, sql, deadline_us, res, "reading the lock's shared holders");
}

int dlock__pgts_force(dlock__pgstore *p, dlock__pglock *l, int kind, int64_t deadline_us)
{
    /* the holder of l's kind only ('m' the mutex, 'w' the read-write
     * lock, 's' the semaphore; 0: any, the session URL's), with its shared
     * holders' rows when that table is there, the name's row locked first
     * (a reader left with a live row was never told when another reader
     * took the name before its next renewal); its waiters told */
    PGresult *res;
    int rc = dlock__pgt_request(p, strdup("SELECT to_regclass('" SHARE "') IS NOT NULL"),
                                deadline_us, &res, "looking for dlock's table of shared holds");
    if (rc != DLOCK_OK)
        return rc;
    int shares = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    const char *of_kind =
        kind == 's'   ? "substring(l.owner FROM 1 FOR 2) = '" DLOCK__SQLT_PERMITS "'::bytea"
        : kind == 'w' ? "(l.owner = '" DLOCK__SQLT_READERS "'::bytea OR substring(l.owner FROM 1 "
                        "FOR 2) = '" DLOCK__SQLT_WRITER "'::bytea)"
        : kind == 'm' ? "NOT (" SHARED("l.owner") " OR substring(l.owner FROM 1 FOR 2) = "
                                                  "'" DLOCK__SQLT_WRITER "'::bytea)"
                      : "true";
    char sql[1200];
    snprintf(sql, sizeof sql,
             "WITH u AS (UPDATE " DLOCK__SQLT_TABLE " l SET owner = ''::bytea, expires = "
             "'epoch'::timestamptz WHERE l.name = $1::bytea AND %s RETURNING 1)%s SELECT "
             "pg_notify('" DLOCK__SQLT_NOTIFY "', encode(substring($1::bytea FROM 1 FOR 32), "
             "'hex')) FROM u",
             of_kind,
             shares ? ", s AS (UPDATE " SHARE " SET expires = 'epoch'::timestamptz WHERE name = "
                      "$1::bytea AND expires > now() AND EXISTS (SELECT 1 FROM u) RETURNING 1)"
                    : "");
    const char *params[1] = {l->name_hex};
    dlock__pgconn *c;
    rc = dlock__pg_get_for_request(p, &deadline_us, &c);
    if (rc != DLOCK_OK)
        return rc;
    PGresult *out[2] = {NULL, NULL};
    /* (as text: its statement differs by kind) */
    rc = dlock__pg_exec(p, c, "BEGIN", 0, NULL, deadline_us, NULL, NULL, &out[0]);
    PQclear(out[0]);
    if (rc == DLOCK_OK) {
        rc = dlock__pg_exec(p, c, LOCK_ROW_SQL, 1, params, deadline_us, NULL, NULL, &out[0]);
        PQclear(out[0]);
    }
    if (rc == DLOCK_OK)
        rc = dlock__pg_exec(p, c, sql, 1, params, deadline_us, NULL, NULL, &out[1]);
    if (rc == DLOCK_OK && PQresultStatus(out[1]) != PGRES_TUPLES_OK)
        rc = dlock__pg_fail(p, out[1], "clearing the lock's row");
    PQclear(out[1]);
    out[1] = NULL;
    if (rc != DLOCK_EUNREACHABLE) {
        int ok = rc == DLOCK_OK;
        int rc2 = dlock__pg_exec(p, c, ok ? "COMMIT" : "ROLLBACK", 0, NULL, deadline_us, NULL, NULL,
                                 &out[1]);
        if (ok && rc2 == DLOCK_OK && PQresultStatus(out[1]) != PGRES_COMMAND_OK)
            rc2 = dlock__pg_fail(p, out[1], "clearing the lock's row");
        PQclear(out[1]);
        if (ok)
            rc = rc2;
    }
    dlock__pg_done(p, c, rc != DLOCK_EUNREACHABLE);
    return rc;
}
