/* SPDX-License-Identifier: MIT */
/* sqltable.c - the lock table's statements and answers (sqltable.h). No I/O.
 *
 * One row per lock: its holder (owner token and info; '' when free), its
 * last fence and its lease's end on the server's clock. Every condition on
 * time is the server's (UTC_TIMESTAMP(6): one value per statement), never
 * the client's.
 *
 * The fence is a hybrid of a counter and the server's clock: each new holder
 * gets GREATEST(fence + 1, the server's time in microseconds since 1970). It
 * strictly increases for each new holder while the row lives (the + 1), and
 * a row deleted by an operator starts again above every fence it gave (the
 * clock has moved past the last grant: a grant is a write, well over a
 * microsecond), unless the server's clock was set back by more than the
 * time between the last grant and the new one. dlock itself never deletes a
 * row: a release and force_unlock clear its holder and keep its fence. */
#include "sqltable.h"

#include "../../base/error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW     "UTC_TIMESTAMP(6)"
#define NOW_US  "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', " NOW ")"
#define ENDED   "'1970-01-01 00:00:01'" /* a lease that ended: the row is free */
#define MS_LEFT "CEIL(TIMESTAMPDIFF(MICROSECOND, " NOW ", expires) / 1000)"

/* PostgreSQL: now() is the statement's (autocommit) start, one value per
 * statement like UTC_TIMESTAMP(6); names and owners are bytea (byte-exact),
 * read back as text. Each request is one statement (data-modifying CTEs),
 * its one result the row(s) MariaDB's last statement gives. */
#define PG_NOW_US  "(EXTRACT(EPOCH FROM now()) * 1000000)::bigint"
#define PG_ENDED   "'epoch'::timestamptz"
#define PG_TEXT(x) "convert_from(" x ", 'UTF8')"
/* The lock's waiters told, when u (the row freed) has a row. (%s: the key.) */
#define PG_NOTIFY                                                                                  \
    "(SELECT pg_notify('" DLOCK__SQLT_NOTIFY                                                       \
    "', encode(substring(%s FROM 1 FOR " STR(DLOCK__SQLT_TAG_BYTES) "), 'hex')) FROM u)"
#define STR(x)  STR_(x)
#define STR_(x) #x

/* A growing string; NULL once out of memory (every later add does nothing). */
typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    if (b->s == NULL && b->cap != 0)
        return; /* out of memory before */
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        goto oom;
    if (b->len + (size_t) n + 1 > b->cap) {
        size_t cap = (b->len + (size_t) n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (s == NULL)
            goto oom;
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t) n;
    return;
oom:
    free(b->s);
    b->s = NULL;
    b->cap = 1;
}

char *dlock__sqlt_exists(enum dlock__sqlt_dialect d)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG) {
        add(&b, "SELECT (to_regclass('" DLOCK__SQLT_TABLE
                "') IS NOT NULL)::int + (to_regclass('" DLOCK__SQLT_WAIT
                "') IS NOT NULL)::int, (EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
                "to_regclass('" DLOCK__SQLT_WAIT "') AND attname = 'since' AND NOT "
                "attisdropped))::int");
        return b.s;
    }
    add(&b, "SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
            "DATABASE() AND TABLE_NAME IN ('" DLOCK__SQLT_TABLE "', '" DLOCK__SQLT_WAIT
            "')), (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
            "DATABASE() AND TABLE_NAME = '" DLOCK__SQLT_WAIT "' AND COLUMN_NAME = 'since')");
    return b.s;
}

int dlock__sqlt_lacks(const char *tables, const char *since)
{
    if (tables == NULL || strcmp(tables, "2") != 0)
        return DLOCK__SQLT_LACKS_TABLES;
    return since == NULL || strcmp(since, "1") != 0 ? DLOCK__SQLT_LACKS_SINCE : 0;
}

char *dlock__sqlt_schema(enum dlock__sqlt_dialect d)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG) {
        add(&b, "CREATE TABLE IF NOT EXISTS " DLOCK__SQLT_TABLE
                " (name bytea PRIMARY KEY, lock_name bytea NOT NULL, owner bytea NOT NULL, "
                "info text NOT NULL, fence bigint NOT NULL, expires timestamptz NOT NULL); "
                "CREATE TABLE IF NOT EXISTS " DLOCK__SQLT_WAIT
                " (name bytea NOT NULL, owner bytea NOT NULL, lock_name bytea NOT NULL, "
                "expires timestamptz NOT NULL, since timestamptz NOT NULL DEFAULT " PG_ENDED
                ", PRIMARY KEY (name, owner))");
        return b.s;
    }
    add(&b, "CREATE TABLE IF NOT EXISTS " DLOCK__SQLT_TABLE
            " (name VARBINARY(256) NOT NULL PRIMARY KEY, "
            "lock_name VARBINARY(2048) NOT NULL, owner VARBINARY(255) NOT NULL, "
            "info TEXT CHARACTER SET utf8mb4 NOT NULL, fence BIGINT UNSIGNED NOT NULL, "
            "expires DATETIME(6) NOT NULL) ENGINE=InnoDB; "
            "CREATE TABLE IF NOT EXISTS " DLOCK__SQLT_WAIT
            " (name VARBINARY(256) NOT NULL, owner VARBINARY(255) NOT NULL, "
            "lock_name VARBINARY(2048) NOT NULL, expires DATETIME(6) NOT NULL, "
            "since DATETIME(6) NOT NULL DEFAULT " ENDED ", "
            "PRIMARY KEY (name, owner)) ENGINE=InnoDB");
    return b.s;
}

/* A table made by an earlier dlock gets the column with a default that
 * makes its rows the oldest (waiters of a client that does not write
 * since: served first, each for one waiter lease at most). ADD COLUMN IF
 * NOT EXISTS: two clients upgrading at once both succeed (the table's
 * metadata lock orders them; the second finds the column there). */
char *dlock__sqlt_upgrade(enum dlock__sqlt_dialect d)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG)
        add(&b, "ALTER TABLE " DLOCK__SQLT_WAIT
                " ADD COLUMN IF NOT EXISTS since timestamptz NOT NULL DEFAULT " PG_ENDED);
    else
        add(&b, "ALTER TABLE " DLOCK__SQLT_WAIT
                " ADD COLUMN IF NOT EXISTS since DATETIME(6) NOT NULL DEFAULT " ENDED);
    return b.s;
}

/* First in line (README.md): the live waiters of key older than owner's
 * wait (its own live row's since; now when it has none, so that every
 * live waiter is older than a contender that does not wait yet), as one
 * scalar subquery. A free row goes to a contender only when it is 0. */
static void older(sbuf *b, enum dlock__sqlt_dialect d, const char *key, const char *owner)
{
    const char *now = d == DLOCK__SQLT_PG ? "now()" : NOW;
    add(b,
        "(SELECT COUNT(*) FROM " DLOCK__SQLT_WAIT " q WHERE q.name = %s AND q.owner <> %s AND "
        "q.expires > %s AND q.since < COALESCE((SELECT m.since FROM " DLOCK__SQLT_WAIT
        " m WHERE m.name = %s AND m.owner = %s AND m.expires > %s), %s))",
        key, owner, now, key, owner, now, now);
}

char *dlock__sqlt_older(enum dlock__sqlt_dialect d, const char *key, const char *owner)
{
    sbuf b = {0};
    older(&b, d, key, owner);
    return b.s;
}

/* MariaDB: a waiter's row while the lock is someone else's (its lease kept
 * up by each poll, its since kept while it is live: a lapsed row is a new
 * wait); gone once it holds (@dlock_t), with the expired ones. Two
 * statements, each after a ';'. */
static void wait_rows(sbuf *b, const char *key, const char *owner, const char *lock_name,
                      const char *wait_us)
{
    add(b,
        "; INSERT INTO " DLOCK__SQLT_WAIT " (name, owner, lock_name, expires, since) SELECT "
        "%s, %s, %s, " NOW " + INTERVAL %s MICROSECOND, " NOW " FROM DUAL WHERE @dlock_t "
        "IS NOT TRUE ON DUPLICATE KEY UPDATE since = IF(expires <= " NOW
        ", VALUES(since), since), expires = VALUES(expires); DELETE FROM " DLOCK__SQLT_WAIT
        " WHERE name = %s AND (expires <= " NOW " OR (owner = %s AND @dlock_t IS TRUE))",
        key, owner, lock_name, wait_us, key, owner);
}

/* PostgreSQL's take: one statement (sqltable.h, dlock__sqlt_take_expr).
 * wait_owner: the owner of the caller's waiter row (a mutex's is under
 * DLOCK__SQLT_MUTEX_WAIT, so that a release can tell it from a reader's
 * or a semaphore's: README.md, "The hand-over"). */
static char *pg_take(const char *key, const char *lock_name, const char *owner, const char *info,
                     const char *lease_us, const char *wait_us, const char *wait_owner,
                     const char *guard)
{
    sbuf b = {0}, o = {0}, e = {0};
    older(&o, DLOCK__SQLT_PG, key, wait_owner);
    /* The lease: never lowered by the owner's own take again (a handle of
     * the same token), but a row handed to this waiter by a release
     * (its waiter row still live: the take deletes it) gets the take's
     * own lease, not the hand-over's. Someone else's row taken (lapsed:
     * its lease is over) gets the take's too, without a look at the
     * waiter rows (CASE: the first branch that holds, so a take of a free
     * row, the common case, does not run the EXISTS) */
    if (wait_us != NULL)
        add(&e,
            "CASE WHEN l.owner <> EXCLUDED.owner THEN EXCLUDED.expires WHEN EXISTS (SELECT 1 "
            "FROM " DLOCK__SQLT_WAIT " h WHERE h.name = %s AND h.owner = %s AND h.expires > "
            "now()) THEN EXCLUDED.expires ELSE GREATEST(l.expires, EXCLUDED.expires) END",
            key, wait_owner);
    else
        add(&e, "GREATEST(l.expires, EXCLUDED.expires)");
    if (o.s == NULL || e.s == NULL) {
        free(o.s);
        free(e.s);
        return NULL;
    }
    /* g first: the guard, evaluated once (a CTE with a volatile function
     * is not inlined) before anything is written, every write below
     * conditional on it. ON CONFLICT ... DO UPDATE ... WHERE locks the row
     * and looks at its latest version: of two takers one wins. A name with
     * no row yet goes to the first in line too (its waiters may have
     * waited for session mode, which writes no row here: before, the
     * first to poll made the row, a new user's trial saw 4 orders of 6) */
    add(&b,
        "WITH g AS (SELECT (%s) AS ok), t AS (INSERT INTO " DLOCK__SQLT_TABLE
        " AS l (name, lock_name, owner, info, fence, expires) SELECT %s, %s, %s, "
        "%s, " PG_NOW_US ", now() + %s * interval '1 microsecond' FROM g WHERE g.ok AND "
        "(EXISTS (SELECT 1 FROM " DLOCK__SQLT_TABLE " x WHERE x.name = %s) OR %s = 0) "
        "ON CONFLICT (name) DO UPDATE SET "
        "fence = GREATEST(l.fence + 1, EXCLUDED.fence), lock_name = EXCLUDED.lock_name, "
        "owner = EXCLUDED.owner, info = EXCLUDED.info, expires = %s WHERE "
        "l.owner = EXCLUDED.owner OR (l.expires <= now() AND %s = 0) RETURNING l.fence)",
        guard != NULL ? guard : "true", key, lock_name, owner, info, lease_us, key, o.s, e.s, o.s);
    if (wait_us != NULL)
        /* a lapsed row is a new wait: a new since; kept out by the guard
         * (session mode holds the name) the waiter keeps its place too,
         * which session grants give way to (pg/pg.h: DLOCK__PG_CHECK_SQL) */
        add(&b,
            ", w AS (INSERT INTO " DLOCK__SQLT_WAIT " AS v (name, owner, lock_name, expires, "
            "since) SELECT %s, %s, %s, now() + %s * interval '1 microsecond', now() FROM g "
            "WHERE NOT EXISTS (SELECT 1 FROM t) ON CONFLICT (name, owner) DO UPDATE "
            "SET since = CASE WHEN v.expires <= now() THEN EXCLUDED.since ELSE v.since END, "
            "expires = EXCLUDED.expires RETURNING 1), x AS (DELETE FROM " DLOCK__SQLT_WAIT
            " WHERE name = %s AND EXISTS (SELECT 1 FROM g WHERE g.ok) AND ((owner = %s AND "
            "EXISTS (SELECT 1 FROM t)) OR (owner <> %s AND expires <= now())) RETURNING 1)",
            key, wait_owner, lock_name, wait_us, key, wait_owner, wait_owner);
    add(&b,
        " SELECT t.fence, CASE WHEN t.fence IS NULL THEN 0 ELSE 1 END, CEIL(EXTRACT(EPOCH "
        "FROM (o.expires - now())) * 1000)::bigint, %s, (SELECT g.ok::int FROM g), "
        "convert_from(o.owner, 'UTF8') FROM (SELECT 1) d LEFT JOIN t ON true LEFT "
        "JOIN " DLOCK__SQLT_TABLE " o ON o.name = %s",
        o.s, key);
    free(o.s);
    free(e.s);
    return b.s;
}

/* take_expr with the MariaDB answer's further columns (more: NULL, or SQL
 * text of columns) */
static char *take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                  const char *owner, const char *info, const char *lease_us, const char *wait_us,
                  const char *guard, const char *more)
{
    sbuf b = {0}, o = {0};
    if (d == DLOCK__SQLT_PG)
        return pg_take(key, lock_name, owner, info, lease_us, wait_us, owner, guard);
    older(&o, d, key, owner);
    if (o.s == NULL)
        return NULL;
    /* ON DUPLICATE KEY UPDATE assigns left to right, each seeing the ones
     * before: the condition (expires and owner still as they were, the
     * older waiters counted) evaluated once, by the first, into @dlock_t,
     * and every column under it, owner last but one, expires last (on
     * whether owner is ours now). The VALUES row, evaluated before the
     * duplicate key is found, sets @dlock_t to 1: a new row is a take.
     * So the statements after it know whether it took without reading the
     * table.
     *
     * One transaction (DLOCK__SQLT_TAKE_BEGIN), COMMIT last: a request that
     * fails after the INSERT took the row (a deadlock on the waiter's rows
     * after the retries, the deadline, a dropped connection) leaves
     * nothing, and one sent again after a deadlock never takes twice.
     * Autocommitted, the INSERT kept the row claimed under the owner's
     * token for the whole lease while the caller was told it had failed,
     * and no give-back is safe (handles of one owner, dlock_lock_dup,
     * share the token: it could end another handle's hold).
     *
     * The older waiters are counted first, into @dlock_o, by a SELECT of
     * its own before the transaction: a plain read, which locks nothing
     * (the answer gives the same count). Counted inside the INSERT (a
     * statement that writes), the waiters' rows were read with shared
     * locks, which under REPEATABLE READ cover the gaps beside them too,
     * up to the next name's first row; held to the COMMIT, takes of
     * different names deadlocked (../mysql/README.md, "Table mode"). The
     * count is as good as one taken in the INSERT: every take that writes
     * a waiter's row of the name holds its GET_LOCK (the guard around the
     * request), as this one does, so until the INSERT a waiter counted can
     * only lapse or leave, and a count too high only has the take poll
     * again. */
    add(&b,
        "SELECT @dlock_o := %s; " DLOCK__SQLT_TAKE_BEGIN "; INSERT INTO " DLOCK__SQLT_TABLE
        " (name, lock_name, owner, info, fence, expires) "
        "VALUES (%s, %s, %s, %s, IF(@dlock_t := 1, " NOW_US ", 0), " NOW
        " + INTERVAL %s MICROSECOND) "
        "ON DUPLICATE KEY UPDATE fence = IF(@dlock_t := (owner = VALUES(owner) OR (expires <= " NOW
        " AND @dlock_o = 0)), GREATEST(fence + 1, VALUES(fence)), fence), "
        "info = IF(@dlock_t, VALUES(info), info), lock_name = IF(@dlock_t, VALUES(lock_name), "
        "lock_name), owner = IF(@dlock_t, VALUES(owner), owner), "
        "expires = IF(owner = VALUES(owner), GREATEST(expires, VALUES(expires)), expires); "
        "SELECT fence, owner = %s, " MS_LEFT
        ", IF(@dlock_t, 0, @dlock_o), owner%s%s FROM " DLOCK__SQLT_TABLE " WHERE name = %s",
        o.s, key, lock_name, owner, info, lease_us, owner, more != NULL ? ", " : "",
        more != NULL ? more : "", key);
    free(o.s);
    if (wait_us != NULL)
        wait_rows(&b, key, owner, lock_name, wait_us);
    add(&b, "; COMMIT");
    return b.s;
}

char *dlock__sqlt_take_expr(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                            const char *owner, const char *info, const char *lease_us,
                            const char *wait_us, const char *wait_owner, const char *guard)
{
    if (d == DLOCK__SQLT_PG)
        return pg_take(key, lock_name, owner, info, lease_us, wait_us,
                       wait_owner != NULL ? wait_owner : owner, guard);
    return take(d, key, lock_name, owner, info, lease_us, wait_us, guard, NULL);
}

char *dlock__sqlt_take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                       const char *owner, const char *info, int64_t lease_ms, int64_t wait_ms,
                       const char *more)
{
    char lease_us[24], wait_us[24];
    snprintf(lease_us, sizeof lease_us, "%" PRId64, lease_ms * 1000);
    snprintf(wait_us, sizeof wait_us, "%" PRId64, wait_ms * 1000);
    return take(d, key, lock_name, owner, info, lease_us, wait_ms > 0 ? wait_us : NULL, NULL, more);
}

int dlock__sqlt_taken(const char *fence, const char *mine, const char *left, const char *ahead,
                      int waits, uint64_t *fence_out, int64_t *left_ms)
{
    *fence_out = 0;
    *left_ms = -1;
    if (fence != NULL && mine != NULL && strcmp(mine, "1") == 0) {
        *fence_out = strtoull(fence, NULL, 10);
        if (*fence_out > 0)
            return 1;
    }
    /* a live holder's lease left; none (-1) when the row is free but
     * claimed by an older waiter (it takes it at its next poll) */
    if (left != NULL && strtoll(left, NULL, 10) > 0)
        *left_ms = strtoll(left, NULL, 10);
    /* A free row claimed by an older waiter: those near the head of the
     * line look again soon, the first every DLOCK__SQLT_HEAD_POLL_MS, the
     * next twice as long each (the core's step is bounded by the lease
     * answered here), as the one claiming it takes it at its next poll.
     * Behind a live holder a waiter keeps the core's backoff: a holder that
     * never lets go is not flooded (the conformance suite's
     * no_flood_behind_holder: at most 20 requests a second). */
    long n = ahead != NULL ? strtol(ahead, NULL, 10) : DLOCK__SQLT_NEAR_HEAD;
    if (waits && *left_ms < 0 && n >= 0 && n < DLOCK__SQLT_NEAR_HEAD)
        *left_ms = (int64_t) DLOCK__SQLT_HEAD_POLL_MS << n;
    return 0;
}

char *dlock__sqlt_leave(enum dlock__sqlt_dialect d, const char *key, const char *owner)
{
    sbuf b = {0};
    (void) d; /* the same in both */
    add(&b, "DELETE FROM " DLOCK__SQLT_WAIT " WHERE name = %s AND owner = %s", key, owner);
    return b.s;
}

char *dlock__sqlt_pg_wait_row(const char *key, const char *owner, const char *wait_us)
{
    sbuf b = {0};
    add(&b,
        "INSERT INTO " DLOCK__SQLT_WAIT " AS v (name, owner, lock_name, expires, since) VALUES "
        "(%s, %s, %s, now() + %s * interval '1 microsecond', now()) ON CONFLICT (name, owner) DO "
        "UPDATE SET since = CASE WHEN v.expires <= now() THEN EXCLUDED.since ELSE v.since END, "
        "expires = EXCLUDED.expires",
        key, owner, key, wait_us);
    return b.s;
}

char *dlock__sqlt_pg_leave(const char *key, const char *wait_owner, const char *owner,
                           const char *readers)
{
    sbuf b = {0};
    /* A row handed to the waiter by a release and not taken yet (owner's,
     * with the waiter's row still live: a take deletes that row in the
     * statement that takes) is freed with the waiter's row, and the
     * lock's waiters told, so that a wait given up passes it on at once;
     * or, a writer's, turned into its owner's readers' when the owner's
     * reader joined it meanwhile (a downgrade's read beside the handed
     * write: freed, the row would let a mutex in beside that reader) */
    add(&b,
        "WITH d AS (DELETE FROM " DLOCK__SQLT_WAIT " WHERE name = %s AND owner = %s RETURNING "
        "expires), m AS (SELECT (%s)::timestamptz AS e), u AS (UPDATE " DLOCK__SQLT_TABLE
        " l SET owner = CASE WHEN m.e IS NULL THEN ''::bytea ELSE '" DLOCK__SQLT_READERS
        "'::bytea END, info = '', expires = CASE WHEN m.e IS NULL THEN " PG_ENDED
        " ELSE GREATEST(m.e, now()) END FROM m WHERE l.name = %s AND l.owner = %s AND "
        "l.expires > now() AND EXISTS (SELECT 1 FROM d WHERE d.expires > now()) RETURNING 1) "
        "SELECT (SELECT count(*) FROM u), " PG_NOTIFY,
        key, wait_owner, readers != NULL ? readers : "NULL", key, owner, key);
    return b.s;
}

/* PG: the live waiter rows of key (q) other than owner's (a mutex's is
 * under DLOCK__SQLT_MUTEX_WAIT and its token). */
static void others_waiting(sbuf *b, const char *key, const char *owner)
{
    add(b,
        "q.name = %s AND q.expires > now() AND q.owner <> %s AND q.owner <> "
        "'" DLOCK__SQLT_MUTEX_WAIT "'::bytea || %s",
        key, owner, owner);
}

/* PG: the answer of a release, from u (the rows it let go, their owner now:
 * '' when freed, a waiter's when handed over). */
static void release_answer(sbuf *b, const char *key)
{
    add(b,
        " SELECT (SELECT count(*) FROM u), (SELECT " PG_TEXT(
            "owner") " FROM " DLOCK__SQLT_TABLE
                     " WHERE name = %s AND owner <> ''::bytea AND expires > now()), (SELECT "
                     "pg_notify('" DLOCK__SQLT_NOTIFY "', encode(substring(%s FROM 1 FOR " STR(
                         DLOCK__SQLT_TAG_BYTES) "), 'hex') || CASE WHEN u.owner = ''::bytea THEN "
                                                "'' ELSE ' ' || encode(u.owner, "
                                                "'hex') END) FROM u), "
                                                "set_config('synchronous_commit', 'off', true)",
        key, key);
}

char *dlock__sqlt_release(enum dlock__sqlt_dialect d, const char *key, const char *owner)
{
    sbuf b = {0}, q = {0};
    if (d == DLOCK__SQLT_PG) {
        /* The row freed only when no other live waiter of the name is
         * there (one look at the waiters' key, evaluated once: the common
         * case of a lock nobody waits for). With a waiter the row is left
         * as it is: matched 0 while the holder before it is owner, and
         * the caller hands it over with dlock__sqlt_pg_handover
         * (README.md, "The hand-over"). Kept this small on purpose: the
         * server sets up every node and expression of a statement's plan
         * at each execution, run or not, so the hand-over's in here cost
         * every release.
         *
         * Its commit does not wait for the WAL's flush (synchronous_commit
         * off for its transaction, as session mode's release, ../pg/pg.c):
         * a release lost in a server crash leaves the row held until its
         * lease ends, so the next holder waits longer, never takes it
         * early; a take after it waits for its own flush, which carries
         * the release's WAL before it */
        others_waiting(&q, key, owner);
        if (q.s == NULL)
            return NULL;
        add(&b,
            "WITH u AS (UPDATE " DLOCK__SQLT_TABLE " l SET owner = ''::bytea, expires = " PG_ENDED
            " WHERE l.name = %s AND l.owner = %s AND l.expires > now() AND NOT EXISTS (SELECT 1 "
            "FROM " DLOCK__SQLT_WAIT " q WHERE %s) RETURNING l.owner)",
            key, owner, q.s);
        release_answer(&b, key);
        free(q.s);
        return b.s;
    }
    add(&b,
        "UPDATE " DLOCK__SQLT_TABLE " SET owner = '', expires = " ENDED " WHERE name = %s AND "
        "owner = %s AND expires > " NOW "; SELECT owner FROM " DLOCK__SQLT_TABLE
        " WHERE name = %s AND owner <> '' AND expires > " NOW,
        key, owner, key);
    return b.s;
}

char *dlock__sqlt_pg_handover(const char *key, const char *owner)
{
    sbuf b = {0}, q = {0};
    /* The hand-over (README.md): when the oldest live waiter of the name
     * (n) waits for a mutex or a write (its row's owner under
     * DLOCK__SQLT_MUTEX_WAIT or DLOCK__SQLT_WRITER), the row becomes its
     * in this statement, under the row's lock: a new fence, a lease that
     * ends with its waiter row's (a dead waiter holds it no longer than
     * that), and a notice that names it (tag, space, the hex of its row's
     * owner), so that only its client looks again; its take then finds
     * the row its own (and takes its own lease and fence). A reader's or
     * a semaphore's waiter first in line (their rows are under the bare
     * token), or none left: the row freed, every waiter of the tag woken,
     * as a plain release. Its commit does not wait for the WAL's flush
     * either (dlock__sqlt_release). */
    others_waiting(&q, key, owner);
    if (q.s == NULL)
        return NULL;
    add(&b,
        "WITH n AS (SELECT CASE WHEN substring(q.owner FROM 1 FOR 2) = "
        "'" DLOCK__SQLT_MUTEX_WAIT "'::bytea THEN substring(q.owner FROM 3) ELSE q.owner END "
        "AS owner, q.expires, substring(q.owner FROM 1 FOR 2) IN "
        "('" DLOCK__SQLT_MUTEX_WAIT "'::bytea, '" DLOCK__SQLT_WRITER
        "'::bytea) AS ex FROM " DLOCK__SQLT_WAIT " q WHERE %s ORDER BY q.since, q.owner "
        "LIMIT 1), u AS (UPDATE " DLOCK__SQLT_TABLE " l SET owner = COALESCE(n.owner, "
        "''::bytea), info = CASE WHEN n.owner IS NULL THEN l.info ELSE '' END, fence = CASE "
        "WHEN n.owner IS NULL THEN l.fence ELSE GREATEST(l.fence + 1, " PG_NOW_US ") END, "
        "expires = COALESCE(n.expires, " PG_ENDED ") FROM (SELECT 1) d LEFT JOIN n ON n.ex "
        "WHERE l.name = %s AND l.owner = %s AND l.expires > now() RETURNING l.owner)",
        q.s, key, owner);
    release_answer(&b, key);
    add(&b, ", (SELECT count(*) FROM u WHERE u.owner <> ''::bytea)");
    free(q.s);
    return b.s;
}

char *dlock__sqlt_extend(enum dlock__sqlt_dialect d, const char *key, const char *owner,
                         int64_t lease_ms, int at_least)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG) {
        if (at_least && lease_ms <= 0)
            add(&b,
                "SELECT count(*) FROM " DLOCK__SQLT_TABLE
                " WHERE name = %s AND owner = %s AND expires > now()",
                key, owner);
        else
            add(&b,
                "WITH u AS (UPDATE " DLOCK__SQLT_TABLE " SET expires = %snow() + %" PRId64
                " * interval '1 microsecond'%s WHERE name = %s AND owner = %s AND expires > now() "
                "RETURNING 1) SELECT count(*) FROM u",
                at_least ? "GREATEST(expires, " : "", lease_ms * 1000, at_least ? ")" : "", key,
                owner);
        return b.s;
    }
    if (at_least && lease_ms <= 0)
        add(&b, "DO 0; ");
    else
        add(&b,
            "UPDATE " DLOCK__SQLT_TABLE " SET expires = %s" NOW " + INTERVAL %" PRId64
            " MICROSECOND%s WHERE name = %s AND owner = %s AND expires > " NOW "; ",
            at_least ? "GREATEST(expires, " : "", lease_ms * 1000, at_least ? ")" : "", key, owner);
    add(&b,
        "SELECT COUNT(*) FROM " DLOCK__SQLT_TABLE " WHERE name = %s AND owner = %s AND "
        "expires > " NOW,
        key, owner);
    return b.s;
}

char *dlock__sqlt_renew(enum dlock__sqlt_dialect d, const dlock__sqlt_hold *h, size_t n)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG) {
        add(&b, "UPDATE " DLOCK__SQLT_TABLE " SET expires = now() + CASE name");
        for (size_t i = 0; i < n; i++)
            add(&b, " WHEN %s THEN %" PRId64, h[i].key_lit, h[i].lease_ms * 1000);
        add(&b, " END * interval '1 microsecond' WHERE expires > now() AND (name, owner) IN (");
        for (size_t i = 0; i < n; i++)
            add(&b, "%s(%s, %s)", i ? ", " : "", h[i].key_lit, h[i].owner_lit);
        add(&b, ") RETURNING " PG_TEXT("name") ", " PG_TEXT("owner"));
        return b.s;
    }
    add(&b, "UPDATE " DLOCK__SQLT_TABLE " SET expires = " NOW " + INTERVAL CASE name");
    for (size_t i = 0; i < n; i++)
        add(&b, " WHEN %s THEN %" PRId64, h[i].key_lit, h[i].lease_ms * 1000);
    add(&b, " END MICROSECOND WHERE expires > " NOW " AND name IN (");
    for (size_t i = 0; i < n; i++)
        add(&b, "%s%s", i ? ", " : "", h[i].key_lit);
    add(&b, ") AND (name, owner) IN (");
    for (size_t i = 0; i < n; i++)
        add(&b, "%s(%s, %s)", i ? ", " : "", h[i].key_lit, h[i].owner_lit);
    add(&b,
        "); SELECT name, owner FROM " DLOCK__SQLT_TABLE " WHERE expires > " NOW " AND name IN (");
    for (size_t i = 0; i < n; i++)
        add(&b, "%s%s", i ? ", " : "", h[i].key_lit);
    add(&b, ")");
    return b.s;
}

char *dlock__sqlt_renew_waits(enum dlock__sqlt_dialect d, const dlock__sqlt_hold *h, size_t n)
{
    sbuf b = {0};
    const char *now = d == DLOCK__SQLT_PG ? "now()" : NOW;
    if (d == DLOCK__SQLT_PG)
        add(&b, "UPDATE " DLOCK__SQLT_WAIT " SET expires = now() + CASE name");
    else
        add(&b, "UPDATE " DLOCK__SQLT_WAIT " SET expires = " NOW " + INTERVAL CASE name");
    for (size_t i = 0; i < n; i++)
        add(&b, " WHEN %s THEN %" PRId64, h[i].key_lit, h[i].lease_ms * 1000);
    add(&b, " END%s WHERE expires > %s AND %s(name, owner) IN (",
        d == DLOCK__SQLT_PG ? " * interval '1 microsecond'" : " MICROSECOND", now,
        d == DLOCK__SQLT_PG ? "(" : "");
    for (size_t i = 0; i < n; i++)
        add(&b, "%s(%s, %s)", i ? ", " : "", h[i].key_lit, h[i].owner_lit);
    if (d == DLOCK__SQLT_PG) {
        /* a mutex's waiter row is under DLOCK__SQLT_MUTEX_WAIT and its
         * token (README.md, "The hand-over"): answered under the token */
        add(&b, ")");
        for (size_t i = 0; i < n; i++)
            add(&b, " OR (name = %s AND owner = '" DLOCK__SQLT_MUTEX_WAIT "'::bytea || %s)",
                h[i].key_lit, h[i].owner_lit);
        add(&b, ") RETURNING " PG_TEXT("name") ", " PG_TEXT(
                    "CASE WHEN substring(owner FROM 1 FOR 2) = '" DLOCK__SQLT_MUTEX_WAIT
                    "'::bytea THEN substring(owner FROM 3) ELSE owner END"));
        return b.s;
    }
    add(&b, "); SELECT name, owner FROM " DLOCK__SQLT_WAIT " WHERE expires > " NOW
            " AND (name, owner) IN (");
    for (size_t i = 0; i < n; i++)
        add(&b, "%s(%s, %s)", i ? ", " : "", h[i].key_lit, h[i].owner_lit);
    add(&b, ")");
    return b.s;
}

void dlock__sqlt_renewed(dlock__sqlt_hold *h, size_t n, const char *key, const char *owner)
{
    if (key == NULL || owner == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(h[i].key, key) == 0 && strcmp(h[i].owner, owner) == 0)
            h[i].held = 1;
    }
}

char *dlock__sqlt_query(enum dlock__sqlt_dialect d, const char *key)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG) {
        add(&b,
            "SELECT " PG_TEXT(
                "l.owner") ", l.info, l.fence, CEIL(EXTRACT(EPOCH FROM (l.expires - "
                           "now())) * 1000)::bigint, (SELECT count(*) FROM " DLOCK__SQLT_WAIT
                           " WHERE name = %s AND expires > now()) FROM (SELECT 1) d LEFT "
                           "JOIN " DLOCK__SQLT_TABLE " l ON l.name = %s",
            key, key);
        return b.s;
    }
    add(&b,
        "SELECT l.owner, l.info, l.fence, CEIL(TIMESTAMPDIFF(MICROSECOND, " NOW
        ", l.expires) / 1000), (SELECT COUNT(*) FROM " DLOCK__SQLT_WAIT " WHERE name = %s AND "
        "expires > " NOW ") FROM (SELECT 1) d LEFT JOIN " DLOCK__SQLT_TABLE " l ON l.name = %s",
        key, key);
    return b.s;
}

char *dlock__sqlt_force(enum dlock__sqlt_dialect d, const char *key)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG) {
        add(&b,
            "WITH u AS (UPDATE " DLOCK__SQLT_TABLE " SET owner = ''::bytea, expires = " PG_ENDED
            " WHERE name = %s RETURNING 1) SELECT " PG_NOTIFY,
            key, key);
        return b.s;
    }
    add(&b, "UPDATE " DLOCK__SQLT_TABLE " SET owner = '', expires = " ENDED " WHERE name = %s",
        key);
    return b.s;
}

char *dlock__sqlt_list(enum dlock__sqlt_dialect d, const char *prefix)
{
    sbuf b = {0};
    if (d == DLOCK__SQLT_PG) {
        /* (n, k) as MariaDB's, k an int */
        add(&b,
            "SELECT " PG_TEXT(
                "lock_name") " AS n, CASE WHEN substring(owner FROM 1 FOR 2) = "
                             "'" DLOCK__SQLT_PERMITS
                             "'::bytea THEN 2 WHEN owner = '" DLOCK__SQLT_READERS
                             "'::bytea OR substring(owner FROM 1 FOR 2) = '" DLOCK__SQLT_WRITER
                             "'::bytea THEN 1 ELSE 0 END AS k FROM " DLOCK__SQLT_TABLE
                             " WHERE substring(lock_name FROM 1 FOR length(%s)) = %s AND owner <> "
                             "''::bytea AND "
                             "expires > now() UNION SELECT " PG_TEXT(
                                 "lock_name") ", 0 FROM " DLOCK__SQLT_WAIT
                                              " WHERE substring(lock_name FROM 1 FOR length(%s)) = "
                                              "%s AND expires > now()",
            prefix, prefix, prefix, prefix);
        return b.s;
    }
    /* MariaDB: (n, k), k 1 for the read-write lock's names, 2 for a
     * semaphore's, a name once
     * with its kind's k (a caller adding rows wraps it: GROUP BY n) */
    add(&b,
        "SELECT lock_name AS n, IF(LEFT(owner, 2) = '" DLOCK__SQLT_PERMITS
        "', 2, owner = '" DLOCK__SQLT_READERS "' OR LEFT(owner, 2) = '" DLOCK__SQLT_WRITER
        "') AS k FROM " DLOCK__SQLT_TABLE " WHERE LEFT(lock_name, LENGTH(%s)) = %s AND "
        "owner <> '' AND expires > " NOW " UNION SELECT lock_name, 0 FROM " DLOCK__SQLT_WAIT
        " WHERE LEFT(lock_name, LENGTH(%s)) = %s AND expires > " NOW,
        prefix, prefix, prefix, prefix);
    return b.s;
}

/* ---------------------------------------------------------------- the read-write lock (MariaDB) */

/* The read-write lock and the semaphore (../mysql/README.md, "Read locks
 * and semaphores"). The name's row in
 * DLOCK__SQLT_TABLE is the whole lock for everyone else: a writer holds it
 * as a mutex does, under its owner with DLOCK__SQLT_WRITER before it; while
 * readers hold it, its owner is DLOCK__SQLT_READERS and its lease ends no
 * sooner than the last reader's. So a mutex, a writer and every other mode
 * decide from that row alone, as before. Each reader has a row of its own
 * in DLOCK__SQLT_SHARE (its fence, info and lease), and every change to the
 * readers' rows is made with the name's row locked first, in the same
 * transaction: the name's row is what orders them. Readers' rows are read
 * with locking reads only (the latest committed rows, never a snapshot:
 * PostgreSQL's race 1 was a snapshot's). */

int dlock__sqlt_holder_kind(const char *owner, const char **token)
{
    *token = owner;
    if (owner == NULL || owner[0] == '\0')
        return 0;
    if (strcmp(owner, DLOCK__SQLT_READERS) == 0)
        return 'r';
    if (strncmp(owner, DLOCK__SQLT_WRITER, strlen(DLOCK__SQLT_WRITER)) == 0) {
        *token = owner + strlen(DLOCK__SQLT_WRITER);
        return 'w';
    }
    if (strncmp(owner, DLOCK__SQLT_PERMITS, strlen(DLOCK__SQLT_PERMITS)) == 0) {
        *token = owner + strlen(DLOCK__SQLT_PERMITS); /* its permits */
        return 's';
    }
    return 'm';
}

int dlock__sqlt_group(int kind)
{
    return kind == 'r' ? 'w' : kind;
}

const char *dlock__sqlt_held_why(int row_kind, int asks, const char *ahead)
{
    if (row_kind == 'r' && asks == 'r' && ahead != NULL && strtol(ahead, NULL, 10) > 0)
        return DLOCK__WHY_WRITER_FIRST;
    return NULL;
}

enum dlock__held_as dlock__sqlt_held_as(int row_kind, int asks)
{
    if (row_kind == 0 || dlock__sqlt_group(row_kind) == dlock__sqlt_group(asks))
        return DLOCK__HELD_AS_SAME;
    return row_kind == 'm'   ? DLOCK__HELD_AS_MUTEX
           : row_kind == 's' ? DLOCK__HELD_AS_SEMAPHORE
                             : DLOCK__HELD_AS_RW;
}

int dlock__sqlt_holds_as_other(const char *row, const char *token, int asks)
{
    const char *t;
    int kind = dlock__sqlt_holder_kind(row, &t);
    if (kind == 'r' || kind == 's')
        return kind == asks ? 0 : -1;
    if (kind == 0 || strcmp(t, token) != 0)
        return 0;
    return kind == 'm' ? asks != 'm' : asks == 'm' || asks == 's';
}

int dlock__sqlt_refuse_self(const char *name, const char *row, int asks)
{
    static const char *const words[] = {['m'] = "a mutex",
                                        ['r'] = "the read lock",
                                        ['w'] = "the write lock",
                                        ['s'] = "a semaphore"};
    const char *t;
    int kind = dlock__sqlt_holder_kind(row, &t);
    return dlock__fail(DLOCK_EDEADLK,
                       "lock '%s': this owner holds it as %s already: asking for %s too would "
                       "wait for itself (one name is one lock; release it first)",
                       name, kind != 0 ? words[kind] : "another kind", words[asks]);
}

int dlock__sqlt_check_permits(const char *name, int row_kind, const char *in_use, int semaphore,
                              unsigned permits)
{
    if (row_kind != 's' || !semaphore || strtoul(in_use, NULL, 10) == permits)
        return DLOCK_OK;
    return dlock__fail(DLOCK_EINVAL,
                       "semaphore '%s' is in use with %s permits, not %u: every user of a "
                       "semaphore must give the same number",
                       name, in_use, permits);
}

char *dlock__sqlt_share_schema(enum dlock__sqlt_dialect d)
{
    sbuf b = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    add(&b, "CREATE TABLE IF NOT EXISTS " DLOCK__SQLT_SHARE
            " (name VARBINARY(256) NOT NULL, owner VARBINARY(255) NOT NULL, "
            "lock_name VARBINARY(2048) NOT NULL, info TEXT CHARACTER SET utf8mb4 NOT NULL, "
            "fence BIGINT UNSIGNED NOT NULL, count INT UNSIGNED NOT NULL DEFAULT 1, "
            "expires DATETIME(6) NOT NULL, PRIMARY KEY (name, owner)) ENGINE=InnoDB");
    return b.s;
}

#define WRITER_OF(owner) "CONCAT('" DLOCK__SQLT_WRITER "', " owner ")"
/* Whether a lock row's owner (col) is its shared holders': readers, or a
 * semaphore's permit holders. */
#define SHARED_BY(col)                                                                             \
    "(" col " = '" DLOCK__SQLT_READERS "' OR LEFT(" col ", 2) = '" DLOCK__SQLT_PERMITS "')"

/* A shared take's end, after the name's row (@dlock_t: taken, @dlock_f:
 * the fence): the holder's row (count: its holds or permits; on_dup: the
 * assignments when it has one), the answer as a take's (fence, mine,
 * ms_left, ahead, owner, shares; older: the older waiters' count), a
 * waiter's rows (wait_ms > 0), and only then COMMIT. Nothing after the
 * COMMIT can fail, so a request sent again (a deadlock, 1213, makes the
 * caller send the whole text again) never runs a take that committed:
 * a deadlock in the waiters' rows, after the COMMIT, had the take run
 * twice, a reader's hold counted twice (its release left one: the name
 * held, by nobody, until the lease's end). InnoDB rolls a deadlock's
 * victim back whole, and the connection is closed, never pooled. */
static void holder_tail(sbuf *b, const char *key, const char *owner, const char *lock_name,
                        const char *info, unsigned count, const char *on_dup, int64_t lease_ms,
                        int64_t wait_ms, const char *older, const char *shares)
{
    add(b,
        "INSERT INTO " DLOCK__SQLT_SHARE " (name, owner, lock_name, info, fence, count, expires) "
        "SELECT %s, %s, %s, %s, @dlock_f, %u, " NOW " + INTERVAL %" PRId64 " MICROSECOND FROM "
        "DUAL WHERE @dlock_t IS TRUE ON DUPLICATE KEY UPDATE %s; "
        "SELECT IF(@dlock_t, @dlock_f, fence), @dlock_t IS TRUE, " MS_LEFT
        ", IF(@dlock_t, 0, %s), owner, %s FROM " DLOCK__SQLT_TABLE " WHERE name = %s",
        key, owner, lock_name, info, count, lease_ms * 1000, on_dup, older, shares, key);
    if (wait_ms > 0) {
        char wait_us[24];
        snprintf(wait_us, sizeof wait_us, "%" PRId64, wait_ms * 1000);
        wait_rows(b, key, owner, lock_name, wait_us);
    }
    add(b, "; COMMIT");
}

char *dlock__sqlt_read_take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                            const char *owner, const char *info, int64_t lease_ms, int64_t wait_ms)
{
    sbuf b = {0}, o = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    older(&o, d, key, owner);
    if (o.s == NULL)
        return NULL;
    /* The name's row: taken for readers when it is free or expired, or
     * joined while readers hold it, in both cases only with no older live
     * waiter (a writer waiting is not overtaken); or the owner's own write
     * holds it (a downgrade: the row stays the writer's until it lets go).
     * @dlock_t decides (the first assignment), @dlock_f is the fence. The
     * lease is raised to the reader's end, never lowered. One transaction
     * with the reader's row: a reader's release that locks the name's row
     * next sees that row (autocommitted one by one, a release between the
     * two lowered the name's lease below the new reader's, or freed it). */
    add(&b,
        DLOCK__SQLT_BEGIN
        "; "
        "INSERT INTO " DLOCK__SQLT_TABLE " (name, lock_name, owner, info, fence, expires) "
        "VALUES (%s, %s, '" DLOCK__SQLT_READERS "', '', IF(@dlock_t := 1, @dlock_f := " NOW_US
        ", 0), " NOW " + INTERVAL %" PRId64 " MICROSECOND) "
        "ON DUPLICATE KEY UPDATE fence = IF(@dlock_t := ((expires > " NOW " AND owner = " WRITER_OF(
            "%s") ") OR (%s = 0 AND (expires <= " NOW " OR owner = '" DLOCK__SQLT_READERS
                  "'))), @dlock_f := GREATEST(fence + 1, VALUES(fence)), fence), "
                  "info = IF(@dlock_t AND owner <> " WRITER_OF(
                      "%s") ", '', info), lock_name = IF(@dlock_t, VALUES(lock_name), lock_name), "
                            "expires = IF(@dlock_t, GREATEST(expires, VALUES(expires)), expires), "
                            "owner = IF(@dlock_t AND owner <> " WRITER_OF(
                                "%s") ", '" DLOCK__SQLT_READERS "', owner); ",
        key, lock_name, lease_ms * 1000, owner, o.s, owner, owner);
    /* the reader's own row: one more hold of its owner's while it is live
     * (handles that share a token, dlock_lock_dup: each release takes one
     * off), its end the later of theirs; a new one otherwise */
    char *shares = dlock__sqlt_shares(d, key, owner);
    if (shares != NULL)
        holder_tail(&b, key, owner, lock_name, info, 1,
                    "count = IF(expires > " NOW ", count + 1, 1), fence = VALUES(fence), "
                    "info = VALUES(info), lock_name = VALUES(lock_name), expires = IF(count > 1, "
                    "GREATEST(expires, VALUES(expires)), VALUES(expires))",
                    lease_ms, wait_ms, o.s, shares);
    int ok = shares != NULL;
    free(shares);
    free(o.s);
    if (!ok) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *dlock__sqlt_shares(enum dlock__sqlt_dialect d, const char *key, const char *owner)
{
    sbuf b = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    add(&b,
        "IF(" SHARED_BY("owner") ", EXISTS(SELECT 1 FROM " DLOCK__SQLT_SHARE
                                 " WHERE name = %s AND owner = %s AND expires > " NOW "), 0)",
        key, owner);
    return b.s;
}

char *dlock__sqlt_sem_take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                           const char *owner, const char *info, int64_t lease_ms, int64_t wait_ms,
                           unsigned permits, unsigned take)
{
    sbuf b = {0}, o = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    older(&o, d, key, owner);
    char *shares = dlock__sqlt_shares(d, key, owner);
    if (o.s == NULL || shares == NULL) {
        free(o.s);
        free(shares);
        return NULL;
    }
    /* the name's row locked first (as every change of its holders' rows),
     * then the permits others hold, a locking read (@dlock_u); the row
     * taken when free or expired, or joined while the semaphore of the
     * same permits holds it and they leave room, in both cases with no
     * older live waiter (a large request at the head is not overtaken) */
    add(&b,
        DLOCK__SQLT_BEGIN
        "; SELECT owner FROM " DLOCK__SQLT_TABLE " WHERE name = %s FOR UPDATE; "
        "SELECT @dlock_u := COALESCE(SUM(count), 0) FROM " DLOCK__SQLT_SHARE
        " WHERE name = %s AND owner <> %s AND expires > " NOW " LOCK IN SHARE MODE; "
        "INSERT INTO " DLOCK__SQLT_TABLE " (name, lock_name, owner, info, fence, expires) "
        "VALUES (%s, %s, '" DLOCK__SQLT_PERMITS "%u', '', IF(@dlock_t := 1, @dlock_f := " NOW_US
        ", 0), " NOW " + INTERVAL %" PRId64 " MICROSECOND) "
        "ON DUPLICATE KEY UPDATE fence = IF(@dlock_t := (%s = 0 AND (expires <= " NOW
        " OR (owner = '" DLOCK__SQLT_PERMITS "%u' AND @dlock_u + %u <= %u))), "
        "@dlock_f := GREATEST(fence + 1, VALUES(fence)), fence), info = IF(@dlock_t, '', info), "
        "lock_name = IF(@dlock_t, VALUES(lock_name), lock_name), "
        "expires = IF(@dlock_t, GREATEST(expires, VALUES(expires)), expires), "
        "owner = IF(@dlock_t, VALUES(owner), owner); ",
        key, key, owner, key, lock_name, permits, lease_ms * 1000, o.s, permits, take, permits);
    holder_tail(&b, key, owner, lock_name, info, take,
                "fence = VALUES(fence), info = VALUES(info), lock_name = VALUES(lock_name), "
                "count = VALUES(count), expires = VALUES(expires)",
                lease_ms, wait_ms, o.s, shares);
    free(o.s);
    free(shares);
    return b.s;
}

/* The readers' latest end into @dlock_m (NULL: none live), a locking read. */
#define LAST_READER                                                                                \
    "SELECT @dlock_m := MAX(expires) FROM " DLOCK__SQLT_SHARE                                      \
    " WHERE name = %s AND expires > " NOW " LOCK IN SHARE MODE; "

char *dlock__sqlt_read_release(enum dlock__sqlt_dialect d, const char *key, const char *owner,
                               int counted)
{
    sbuf b = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    /* the name's row locked; one hold off the reader's row (counted: a
     * semaphore's permits all at once; matched: 1 when it held), the row
     * gone at none, lapsed ones with it; the name's row freed when no
     * holder is left, else its lease lowered to the last one's end */
    add(&b,
        DLOCK__SQLT_BEGIN
        "; SELECT owner FROM " DLOCK__SQLT_TABLE " WHERE name = %s FOR UPDATE; "
        "UPDATE " DLOCK__SQLT_SHARE " SET count = %s WHERE name = %s AND owner = %s AND "
        "expires > " NOW "; DELETE FROM " DLOCK__SQLT_SHARE " WHERE name = %s AND (expires <= " NOW
        " OR (owner = %s AND count = 0)); " LAST_READER "UPDATE " DLOCK__SQLT_TABLE
        " SET owner = IF(@dlock_m IS NULL, '', owner), expires = "
        "IF(@dlock_m IS NULL, " ENDED
        ", @dlock_m) WHERE name = %s AND " SHARED_BY("owner") " AND expires > " NOW "; COMMIT",
        key, counted ? "count - 1" : "0", key, owner, key, owner, key, key);
    return b.s;
}

char *dlock__sqlt_write_release(enum dlock__sqlt_dialect d, const char *key, const char *owner)
{
    sbuf b = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    /* the write's end: the readers' when the owner took the read lock
     * beside it (a downgrade), else the row freed. Only the owner's own
     * reader's row counts: no other reader holds the name beside a write,
     * and another's row live here is a lost reader's (the name's row was
     * deleted or forced away under it, its renewal still lengthened it) */
    add(&b,
        DLOCK__SQLT_BEGIN
        "; SELECT owner FROM " DLOCK__SQLT_TABLE
        " WHERE name = %s FOR UPDATE; SELECT @dlock_m := MAX(expires) FROM " DLOCK__SQLT_SHARE
        " WHERE name = %s AND owner = %s AND expires > " NOW " LOCK IN SHARE MODE; "
        "UPDATE " DLOCK__SQLT_TABLE " SET owner = IF(@dlock_m IS NULL, '', '" DLOCK__SQLT_READERS
        "'), info = '', expires = "
        "IF(@dlock_m IS NULL, " ENDED ", GREATEST(@dlock_m, " NOW ")) WHERE name = %s AND "
        "owner = " WRITER_OF("%s") " AND expires > " NOW
                                   "; COMMIT; SELECT owner FROM " DLOCK__SQLT_TABLE
                                   " WHERE name = %s AND owner <> '' AND expires > " NOW,
        key, key, owner, key, owner, key);
    return b.s;
}

char *dlock__sqlt_read_extend(enum dlock__sqlt_dialect d, const char *key, const char *owner,
                              int64_t lease_ms, int at_least, int counted)
{
    sbuf b = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    /* (a reader's row that handles of one owner share, counted, is never
     * lowered while more than one holds it: each has a lease of its own,
     * and the row is the longest; the last one's sets it) */
    const char *raise = at_least  ? "GREATEST(expires, "
                        : counted ? "IF(count > 1, GREATEST(expires, "
                                  : "";
    const char *raised = at_least ? ")" : counted ? "), " : "";
    if (at_least && lease_ms <= 0) {
        add(&b, "DO 0; DO 0; DO 0; DO 0; DO 0; DO 0; ");
    } else {
        add(&b,
            DLOCK__SQLT_BEGIN "; SELECT owner FROM " DLOCK__SQLT_TABLE
                              " WHERE name = %s FOR UPDATE; UPDATE " DLOCK__SQLT_SHARE
                              " SET expires = %s" NOW " + INTERVAL %" PRId64 " MICROSECOND%s",
            key, raise, lease_ms * 1000, raised);
        if (counted && !at_least)
            add(&b, NOW " + INTERVAL %" PRId64 " MICROSECOND)", lease_ms * 1000);
        add(&b,
            " WHERE name = %s AND owner = %s AND expires > " NOW "; UPDATE " DLOCK__SQLT_TABLE
            " SET expires = GREATEST(expires, COALESCE((SELECT "
            "s.expires FROM " DLOCK__SQLT_SHARE " s WHERE s.name = %s AND s.owner = %s), expires)) "
            "WHERE name = %s AND (" SHARED_BY("owner") " OR owner = " WRITER_OF(
                "%s") ") AND expires > " NOW "; COMMIT; ",
            key, owner, key, owner, key, owner);
    }
    add(&b,
        "SELECT COUNT(*) FROM " DLOCK__SQLT_SHARE " s JOIN " DLOCK__SQLT_TABLE
        " l ON l.name = s.name WHERE s.name = %s AND s.owner = %s AND s.expires > " NOW
        " AND l.expires > " NOW
        " AND (" SHARED_BY("l.owner") " OR l.owner = " WRITER_OF("s.owner") ")",
        key, owner);
    return b.s;
}

/* The (name, owner) pairs of h, a list for IN (...) (col: SQL text). */
static void pairs(sbuf *b, const char *col, const dlock__sqlt_hold *h, size_t n)
{
    add(b, "%s IN (", col);
    for (size_t i = 0; i < n; i++)
        add(b, "%s(%s, %s)", i ? ", " : "", h[i].key_lit, h[i].owner_lit);
    add(b, ")");
}

/* Whether a shared holder's row s is its lock row l's: l live, of the
 * shared holders, or of s's owner's own write (a downgrade). */
#define HOLDS_ROW                                                                                  \
    "l.expires > " NOW " AND (" SHARED_BY("l.owner") " OR l.owner = " WRITER_OF("s.owner") ")"

char *dlock__sqlt_read_renew(enum dlock__sqlt_dialect d, const dlock__sqlt_hold *h, size_t n)
{
    sbuf b = {0}, end = {0}, held = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    /* each holder's new end, and its (name, owner) in the batch */
    add(&end, NOW " + INTERVAL CASE");
    for (size_t i = 0; i < n; i++)
        add(&end, " WHEN s.name = %s AND s.owner = %s THEN %" PRId64, h[i].key_lit, h[i].owner_lit,
            h[i].lease_ms * 1000);
    add(&end, " END MICROSECOND");
    pairs(&held, "(s.name, s.owner)", h, n);
    if (end.s == NULL || held.s == NULL)
        goto done;
    /* the names' rows locked first (as every change of their holders'
     * rows); then each holder's row set to its new end, only while its
     * lock's row is its (a holder whose row was taken over or deleted is
     * not lengthened); a reader's row that handles of one owner share
     * (counted) never lowered while more than one holds it; then each
     * name's row raised to its holders' new ends, paired: only a holder
     * whose own row is live and whose lock's row it is raises it (a
     * lapsed reader's renewal, or another owner's write, raised nothing) */
    add(&b, DLOCK__SQLT_BEGIN "; SELECT name FROM " DLOCK__SQLT_TABLE " WHERE name IN (");
    for (size_t i = 0; i < n; i++)
        add(&b, "%s%s", i ? ", " : "", h[i].key_lit);
    add(&b, ") FOR UPDATE; UPDATE " DLOCK__SQLT_SHARE " s JOIN " DLOCK__SQLT_TABLE
            " l ON l.name = s.name SET s.expires = IF(s.count > 1 AND (s.name, s.owner) IN (");
    int counted = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i].counted)
            add(&b, "%s(%s, %s)", counted++ ? ", " : "", h[i].key_lit, h[i].owner_lit);
    if (counted == 0)
        add(&b, "(NULL, NULL)");
    add(&b,
        "), GREATEST(s.expires, %s), %s) WHERE s.expires > " NOW " AND " HOLDS_ROW " AND %s; "
        "UPDATE " DLOCK__SQLT_TABLE " l SET l.expires = GREATEST(l.expires, COALESCE((SELECT "
        "MAX(s.expires) FROM " DLOCK__SQLT_SHARE " s WHERE s.name = l.name AND s.expires > " NOW
        " AND " HOLDS_ROW " AND %s), l.expires)) WHERE l.name IN (",
        end.s, end.s, held.s, held.s);
    for (size_t i = 0; i < n; i++)
        add(&b, "%s%s", i ? ", " : "", h[i].key_lit);
    add(&b,
        ") AND l.expires > " NOW "; COMMIT; SELECT s.name, s.owner FROM " DLOCK__SQLT_SHARE
        " s JOIN " DLOCK__SQLT_TABLE " l ON l.name = s.name WHERE s.expires > " NOW
        " AND " HOLDS_ROW " AND %s",
        held.s);
done:;
    int ok = end.s != NULL && held.s != NULL;
    free(end.s);
    free(held.s);
    if (!ok) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *dlock__sqlt_readers(enum dlock__sqlt_dialect d, const char *key)
{
    sbuf b = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    add(&b,
        "SELECT owner, info, count FROM " DLOCK__SQLT_SHARE " WHERE name = %s AND expires > " NOW
        " ORDER BY fence",
        key);
    return b.s;
}

char *dlock__sqlt_share_force(enum dlock__sqlt_dialect d, const char *key)
{
    sbuf b = {0};
    if (d != DLOCK__SQLT_MARIADB)
        return NULL;
    add(&b,
        "UPDATE " DLOCK__SQLT_SHARE " SET expires = " ENDED " WHERE name = %s AND expires > " NOW,
        key);
    return b.s;
}
