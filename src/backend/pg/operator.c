/* SPDX-License-Identifier: MIT */
/* operator.c - the PostgreSQL backend's operator calls (status, holders,
 * force-unlock, list) in either mode, one lock per name across the modes
 * (README.md, "One lock per name across the modes"): a name's holder is
 * told, released or listed in whichever mode it holds. pg.c serves the
 * locks' own steps. */
#include "pg.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef dlock__pglock pglock;

#define LOCK_ROWS DLOCK__PG_LOCK_ROWS

/* The run rule (pg.c, at EARLY) holds the name's row f: no grant of this
 * server run wrote it, and the rule's time has not passed (dlock_run: the
 * run's epoch and start, and the largest lease recorded then). */
#define RULE_RUNS                                                                                  \
    "(f.run < (SELECT epoch FROM dlock_run) AND (SELECT started + lease_ms * interval "            \
    "'1 millisecond' FROM dlock_run) > clock_timestamp())"

/* A granted row l of LOCK_ROWS whose session only waits, holding the key:
 * out another holder's row lease (f: the name's dlock_fence row; README,
 * "The row's lease"), or out the run rule's time after a crash (a row no
 * grant of this run wrote: whatever pid it names, server pids are used
 * again after a restart). The name is the row's holder's until its lease
 * ends (ROW_HOLDER), or no one's. */
#define WAITS_OUT                                                                                  \
    "(l.granted AND ((l.pid IS DISTINCT FROM f.holder_pid AND f.expires > clock_timestamp()) "     \
    "OR " RULE_RUNS "))"
/* The row names a holder whose lease runs (the run rule's rows name none). */
#define ROW_HOLDER "(f.holder <> '' AND f.expires > clock_timestamp())"
/* The owner record (dlock_owner o) of the row's holder: by its server pid,
 * and only while no later connection of that pid has overwritten it (a
 * server pid is used again; the record names the connection's id). */
#define HOLDER_RECORD "o.pid = f.holder_pid AND o.holder = f.holder"

/* 'text' as an SQL literal (standard_conforming_strings is on: the
 * connection sets it). */
static int literal_of(const char *text, char *buf, size_t len)
{
    size_t n = 0;
    buf[n++] = '\'';
    for (const char *t = text; *t != '\0'; t++) {
        if (n + 3 >= len)
            return DLOCK_EINVAL;
        if (*t == '\'')
            buf[n++] = '\'';
        buf[n++] = *t;
    }
    buf[n++] = '\'';
    buf[n] = '\0';
    return DLOCK_OK;
}

/* Runs an operator's query on a pooled connection. */
static int operate(dlock__pgstore *p, const char *sql, int n, const char *const *params,
                   int64_t deadline, PGresult **res)
{
    dlock__pgconn *c;
    int rc = dlock__pg_get_for_request(p, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__pg_exec(p, c, sql, n, params, deadline, NULL, NULL, res);
    dlock__pg_done(p, c, rc == DLOCK_OK);
    if (rc != DLOCK_OK)
        return rc;
    if (PQresultStatus(*res) != PGRES_TUPLES_OK) {
        rc = dlock__pg_fail(p, *res, "reading pg_locks");
        PQclear(*res);
        *res = NULL;
    }
    return rc;
}

/* The owner token of a holder from its row's owner ("dlock:TOKEN"), or
 * "pg pid N" for a session that is not dlock's. */
static const char *owner_of(const char *app, const char *pid, char *buf, size_t len)
{
    size_t wn = strlen(DLOCK__PG_WRITER);
    if (strncmp(app, DLOCK__PG_WRITER, wn) == 0 && app[wn] != '\0')
        snprintf(buf, len, "%s", app + wn); /* a writer's */
    else if (strncmp(app, "dlock:", 6) == 0 && app[6] != '\0')
        snprintf(buf, len, "%s", app + 6);
    else
        snprintf(buf, len, "pg pid %s", pid);
    return buf;
}

/* Session mode's state of l (advisory lock, row lease); *table_there:
 * whether table mode's lock table is there (to look at next). One name is
 * one lock: only the holders of l's kind (dlock__pg_of_kind) make it held,
 * as on every store, and the holders of the other kind are found by
 * asking as that kind; any: every kind (the table URL's view). */
static int session_query(dlock__pgstore *p, pglock *l, int any, dlock_status *st, int *table_there,
                         int64_t deadline_us)
{
    const char *params[] = {l->classid, l->objid, l->name};
    PGresult *r = NULL;
    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    /* the owner is the row's, when its server pid holds the key */
    int rc =
        operate(p,
                "SELECT count(*) FILTER (WHERE l.granted), count(*) FILTER (WHERE NOT "
                "l.granted), coalesce(max(CASE WHEN l.granted AND l.pid = f.holder_pid THEN "
                "f.owner END), ''), coalesce(max(l.pid) FILTER (WHERE l.granted), 0), "
                "(SELECT coalesce(max(fence), 0) FROM dlock_fence WHERE name = $3), "
                "(SELECT owner FROM dlock_fence WHERE name = $3 AND holder <> '' AND "
                "expires > clock_timestamp()), (SELECT ceil(extract(epoch FROM (expires - "
                "clock_timestamp())) * 1000)::bigint FROM dlock_fence WHERE name = $3), "
                "coalesce(bool_or(" WAITS_OUT "), false), "
                "to_regclass('" DLOCK__SQLT_TABLE "') IS NOT NULL, "
                /* the readers (read.c): their lease rows; waiting
                 * readers; a session holding the key exclusively
                 * (waiting them out while their leases run); the
                 * readers whose connections are gone, and the
                 * longest lease of them */
                "(SELECT count(*) FROM dlock_share WHERE name = $3 AND expires > "
                "clock_timestamp()), "
                "count(*) FILTER (WHERE NOT l.granted AND l.mode = 'ShareLock'), "
                "count(*) FILTER (WHERE l.granted AND l.mode = 'ExclusiveLock'), "
                "(SELECT count(*) FROM dlock_share r WHERE r.name = $3 AND " DLOCK__PG_READER_GONE
                "), (SELECT ceil(extract(epoch FROM (max(r.expires) - "
                "clock_timestamp())) * 1000)::bigint FROM dlock_share r WHERE r.name = $3 "
                "AND " DLOCK__PG_READER_GONE ") "
                "FROM pg_locks l LEFT JOIN dlock_fence f ON f.name = $3 WHERE " LOCK_ROWS,
                3, params, deadline_us, &r);
    if (rc != DLOCK_OK)
        return rc;
    unsigned held = (unsigned) strtoul(PQgetvalue(r, 0, 0), NULL, 10);
    unsigned readers = (unsigned) strtoul(PQgetvalue(r, 0, 9), NULL, 10);
    unsigned reading_waiters = (unsigned) strtoul(PQgetvalue(r, 0, 10), NULL, 10);
    unsigned exclusive = (unsigned) strtoul(PQgetvalue(r, 0, 11), NULL, 10);
    unsigned gone = (unsigned) strtoul(PQgetvalue(r, 0, 12), NULL, 10);
    *table_there = strcmp(PQgetvalue(r, 0, 8), "t") == 0;
    st->waiters = (unsigned) strtoul(PQgetvalue(r, 0, 1), NULL, 10);
    /* a waiting reader waits for the read-write lock (a waiting writer
     * or mutex cannot be told apart: counted by both kinds) */
    if (!any && !dlock__pg_is_rw(l))
        st->waiters -= reading_waiters;
    st->last_fence = strtoull(PQgetvalue(r, 0, 4), NULL, 10);
    if (readers > 0) {
        /* read: counted by their lease rows (a reader whose connection
         * ended among them until its lease ends, as a writer waits for
         * it); a session holding the key exclusively meanwhile waits them
         * out; a table take's guard that holds the key shared for its
         * statement is no reader. The lease shown is the longest of the
         * readers whose connections are gone (the name frees when it
         * ends, once the live readers let go), none while every reader's
         * session holds the key (as an exclusive holder's). */
        st->waiters += exclusive;
        if (dlock__pg_of_kind(l, any, 1, "")) {
            st->held = 1;
            st->shared = readers;
            if (gone > 0)
                st->lease_ms = strtoll(PQgetvalue(r, 0, 13), NULL, 10);
        }
        PQclear(r);
        return DLOCK_OK;
    }
    if (any)
        /* the table URL's view: the key held shared with no reader is a
         * table take's guard in flight (its statement's own lock, gone at
         * its commit), not a holder: a fair waiter that asked while the
         * first holder's take was under way saw the name held and took it
         * itself (conformance_postgres_table fair_fifo, once in CI) */
        held = exclusive;
    if (held == 1 && strcmp(PQgetvalue(r, 0, 7), "t") == 0) {
        /* the session holding the key waits out another holder's row lease
         * (README, "The row's lease"): that holder is the one told below;
         * or the run rule's time, when no holder is known (none told) */
        held = 0;
        st->waiters++;
    }
    if (held == 1 && dlock__pg_of_kind(l, any, 0, PQgetvalue(r, 0, 2))) {
        st->held = 1;
        st->holds = 1;
        owner_of(PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3), st->owner, sizeof st->owner);
    } else if (held > 1 && dlock__pg_of_kind(l, any, 0, "")) {
        /* sessions that are not dlock's holding it shared: a mutex's */
        st->held = 1;
        st->shared = held;
    } else if (held == 0 && !PQgetisnull(r, 0, 5) &&
               dlock__pg_of_kind(l, any, 0, PQgetvalue(r, 0, 5))) {
        /* no session holds it, but a holder's row lease runs (its
         * connection ended: it may still believe it holds): held, as a
         * take finds it, until the lease ends */
        st->held = 1;
        st->holds = 1;
        st->lease_ms = strtoll(PQgetvalue(r, 0, 6), NULL, 10);
        owner_of(PQgetvalue(r, 0, 5), "?", st->owner, sizeof st->owner);
    }
    PQclear(r);
    return DLOCK_OK;
}

/* One lock per name across the modes (README: a session holder and a
 * table holder exclude each other): the state told through either mode's
 * URL is the holder's in whichever mode it holds, and its waiters are both
 * modes' (one line). The other mode is asked whenever table mode's table
 * exists (one request more); before, a waiter's notice through one mode
 * said "with waiters ahead in its queue" of the other mode's holder, and
 * the session URL's status left out the table waiters of a name session
 * mode held. A holder there gives its owner, lease and waiters, and the
 * fence is the larger of the modes' counters (each mode's fences are its
 * own: README, table mode). */
static void other_mode(dlock_status *st, const dlock_status *other)
{
    if (st->held) {
        /* (held in this mode: the other's waiters wait for it too) */
        st->waiters += other->waiters;
        return;
    }
    if (!other->held)
        return;
    st->held = 1;
    st->holds = other->holds;
    snprintf(st->owner, sizeof st->owner, "%s", other->owner);
    st->lease_ms = other->lease_ms;
    st->shared = other->shared;
    st->permits_used = other->permits_used;
    if (other->permits != 0)
        st->permits = other->permits;
    st->waiters += other->waiters;
    if (other->last_fence > st->last_fence)
        st->last_fence = other->last_fence;
}

/* A mutex's handle (plain or fair): the one kind whose status looks at
 * the other mode's holder too (one lock per name). */
int dlock__pg_mutex_kind(const pglock *l)
{
    return l->base.spec.kind == DLOCK__MUTEX || l->base.spec.kind == DLOCK__FAIR;
}

int dlock__pg_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline_us)
{
    dlock__pgstore *p = PGSTORE(s);
    pglock *l = PGLOCK(sl);
    dlock_status other;
    int table_there = 1;
    int rc = p->table ? dlock__pgt_query(p, l, 0, st, deadline_us)
                      : session_query(p, l, 0, st, &table_there, deadline_us);
    /* a mutex's status counts a holder of any kind in the other mode
     * (table mode's shared holders named in words through the session
     * URL); another kind's, a holder of its own kind there (it said free,
     * and dlock status then "held as a mutex" of the other mode's readers) */
    if (rc != DLOCK_OK || !table_there)
        return rc;
    int any = dlock__pg_mutex_kind(l);
    rc = p->table ? session_query(p, l, any, &other, &table_there, deadline_us)
                  : dlock__pgt_query(p, l, any, &other, deadline_us);
    if (rc == DLOCK_OK)
        other_mode(st, &other);
    return rc;
}

/* A sink that counts the holders it passes on. */
typedef struct counted_sink {
    dlock__holder_sink sink;
    void *arg;
    unsigned n;
} counted_sink;

static int count_holder(void *arg, const dlock__holder_raw *h)
{
    counted_sink *c = arg;
    c->n++;
    return c->sink(c->arg, h);
}

/* Session mode's holders of l, into sink; *table_there as session_query. */
static int session_holders(dlock__pgstore *p, pglock *l, int any, dlock__holder_sink sink,
                           void *arg, int *table_there, int64_t deadline_us)
{
    const char *params[] = {l->classid, l->objid, l->name};
    PGresult *r = NULL;
    /* a session that holds the key while it waits out another holder's row
     * lease is no holder: the row's holder is (its owner record, if no
     * later connection of its server pid overwrote it); one that waits out
     * the run rule's time with no holder in the row is none, and names
     * none (the last column) */
    int rc = operate(
        p,
        "SELECT coalesce(CASE WHEN l.pid = f.holder_pid OR " WAITS_OUT
        " THEN f.owner END, ''), CASE WHEN " WAITS_OUT " THEN f.holder_pid ELSE l.pid "
        "END, o.info, coalesce(" WAITS_OUT " AND NOT " ROW_HOLDER ", false), "
        "to_regclass('" DLOCK__SQLT_TABLE "') IS NOT NULL, false "
        "FROM (SELECT 1) d LEFT JOIN (pg_locks l LEFT JOIN dlock_fence f ON f.name = $3 "
        "LEFT JOIN dlock_owner o ON " HOLDER_RECORD " AND (l.pid = f.holder_pid OR " WAITS_OUT
        ")) ON " LOCK_ROWS " AND l.granted AND l.mode = 'ExclusiveLock' "
        /* while readers' leases run, a session holding the key waits
         * them out (as status counts it) */
        "AND NOT EXISTS (SELECT FROM dlock_share r WHERE r.name = $3 AND r.expires > "
        "clock_timestamp()) "
        /* no session holds the key, but the row's lease runs (a holder
         * whose connection ended: it may still believe it holds, and a
         * take finds it held): the row's holder, as session_query
         * names it. Before, holders named none while status named it. */
        "UNION ALL SELECT f.owner, f.holder_pid, o.info, false, true, false FROM dlock_fence f "
        "LEFT JOIN dlock_owner o ON " HOLDER_RECORD " WHERE f.name = $3 AND " ROW_HOLDER
        " AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE " LOCK_ROWS " AND l.granted) "
        /* the readers (read.c), by their lease rows */
        "UNION ALL SELECT r.owner, r.holder_pid, o.info, false, true, true FROM dlock_share r "
        "LEFT JOIN dlock_owner o ON o.pid = r.holder_pid AND o.holder = r.holder WHERE "
        "r.name = $3 AND r.expires > clock_timestamp()",
        3, params, deadline_us, &r);
    if (rc != DLOCK_OK)
        return rc;
    /* one row at least (the table's presence), with no lock row when no
     * session holds the key */
    *table_there = PQntuples(r) > 0 && strcmp(PQgetvalue(r, 0, 4), "t") == 0;
    for (int i = 0; i < PQntuples(r); i++) {
        if (PQgetisnull(r, i, 1))
            continue;
        if (strcmp(PQgetvalue(r, i, 3), "t") == 0)
            continue;
        /* of l's kind only (session_query) */
        if (!dlock__pg_of_kind(l, any, strcmp(PQgetvalue(r, i, 5), "t") == 0, PQgetvalue(r, i, 0)))
            continue;
        char owner[80];
        dlock__holder_raw h = {
            .owner = owner_of(PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), owner, sizeof owner),
            .count = 1,
            .info = PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2)};
        if (sink(arg, &h) != 0)
            break;
    }
    PQclear(r);
    return DLOCK_OK;
}

/* The holders in either mode (one lock per name: pg_query). */
int dlock__pg_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline_us)
{
    dlock__pgstore *p = PGSTORE(s);
    pglock *l = PGLOCK(sl);
    counted_sink c = {.sink = sink, .arg = arg};
    int table_there = 1;
    int rc = p->table ? dlock__pgt_holders(p, l, 0, count_holder, &c, deadline_us)
                      : session_holders(p, l, 0, count_holder, &c, &table_there, deadline_us);
    if (rc != DLOCK_OK || c.n > 0 || !table_there)
        return rc;
    int any = dlock__pg_mutex_kind(l); /* (as pg_query) */
    return p->table ? session_holders(p, l, any, sink, arg, &table_there, deadline_us)
                    : dlock__pgt_holders(p, l, any, sink, arg, deadline_us);
}

/* Releases the holder in whichever mode it holds, whatever the URL's mode
 * (one lock per name: status names it in either). Session mode's holder:
 * its row's lease ends and its session is ended in the server
 * (pg_terminate_backend, waiting until it is gone): the lock goes to the
 * next waiter there, and the holder finds its connection closed. Table
 * mode's: its row's holder is cleared (dlock__pgt_force_unlock), when the
 * table is there (a force does not make it). Fences are not touched.
 * Through the table URL only sessions that hold the key exclusively are
 * ended: a shared holder of it is a table take in flight (its guard), not
 * a holder. Before, each URL acted on its own mode's holder only, while
 * status (and so dlock_force_unlock2's "it was held") saw both:
 * `dlock unlock --force --check` exited 0 and the holder ran on. Through
 * the session URL only the kind asked about is released (read.c:
 * dlock__pg_force_sql; a table holder is a mutex's), as on every store. */
int dlock__pg_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline_us)
{
    dlock__pgstore *p = PGSTORE(s);
    pglock *l = PGLOCK(sl);
    char wait_ms[24];
    int64_t left = (deadline_us - dlock__now_us()) / 1000 - 100;
    if (left > p->timeout_ms)
        left = p->timeout_ms;
    snprintf(wait_ms, sizeof wait_ms, "%lld", (long long) (left > 1 ? left : 1));
    char sql[4800], name[1100];
    if (literal_of(l->name, name, sizeof name) != DLOCK_OK)
        return dlock__fail(DLOCK_EINVAL, "lock '%.64s...': name too long", l->name);
    /* the session URL: the holders of the kind asked about only (read.c);
     * the table URL (a mutex's only) ends every session holder, as below */
    int rw = dlock__pg_is_rw(l);
    if (p->table && !dlock__pg_mutex_kind(l)) /* table mode's read-write lock, semaphore */
        return dlock__pgt_force_unlock(p, l, 0, deadline_us);
    if (!p->table && dlock__pg_force_sql(l, name, wait_ms, sql, sizeof sql) != DLOCK_OK)
        return DLOCK_EINVAL;
    /* the row's lease ends first, and the row stays locked until the
     * holder's session has ended: the next holder sees it ended */
    if (p->table)
        snprintf(sql, sizeof sql,
                 "UPDATE dlock_fence SET expires = clock_timestamp() WHERE name = %s AND expires "
                 "> clock_timestamp(); "
                 "UPDATE dlock_share SET expires = clock_timestamp() WHERE name = %s AND expires "
                 "> clock_timestamp(); "
                 "SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid, %s)), count(*), "
                 "to_regclass('" DLOCK__SQLT_TABLE "') IS NOT NULL "
                 "FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.classid "
                 "= %s AND l.objid = %s AND l.database = (SELECT oid FROM pg_database WHERE "
                 "datname = current_database()) AND l.granted AND (l.mode = 'ExclusiveLock' OR "
                 "l.pid IN (SELECT holder_pid FROM dlock_share WHERE name = %s))",
                 name, name, wait_ms, l->classid, l->objid, name);
    PGresult *r = NULL;
    int rc = operate(p, sql, 0, NULL, deadline_us, &r);
    if (rc != DLOCK_OK)
        return rc;
    int table_there = strcmp(PQgetvalue(r, 0, 2), "t") == 0;
    if (strcmp(PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1)) != 0)
        rc = dlock__fail(DLOCK_ESERVER,
                         "%s: lock '%s' is still held by a PostgreSQL session: it did not end "
                         "(pg_terminate_backend needs the holder's role, or pg_signal_backend)",
                         p->label, l->name);
    PQclear(r);
    /* a table holder is a mutex's */
    if (rc == DLOCK_OK && (p->table || (table_there && !rw)))
        rc = dlock__pgt_force_unlock(p, l, !p->table, deadline_us);
    return rc;
}

/* The names held or waited for in either mode (one lock per name: status
 * names a holder through either URL), a session holder whose connection
 * ended among them while its row lease runs. Before, the session URL
 * listed only names whose key was in pg_locks: after a kill -9 of a
 * holder, list said nothing was held while status named it. */
int dlock__pg_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline_us)
{
    const char *params[] = {prefix};
    PGresult *r = NULL;
    dlock__pgstore *p = PGSTORE(s);
    int rc = p->table ? DLOCK_OK
                      : operate(p, "SELECT to_regclass('" DLOCK__SQLT_TABLE "') IS NOT NULL", 0,
                                NULL, deadline_us, &r);
    if (rc != DLOCK_OK)
        return rc;
    int table_there = p->table || strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (table_there)
        return dlock__pgt_list(p, prefix, !p->table, sink, arg, deadline_us);
    rc = operate(p,
                 "SELECT f.name, " DLOCK__PG_RW_HOLDS " FROM dlock_fence f WHERE "
                 "starts_with(f.name, $1) AND " DLOCK__PG_SESSION_LIVE,
                 1, params, deadline_us, &r);
    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        enum dlock__kind kind = strcmp(PQgetvalue(r, i, 1), "t") == 0 ? DLOCK__WRITE : DLOCK__MUTEX;
        if (sink(arg, PQgetvalue(r, i, 0), kind) != 0)
            break;
    }
    PQclear(r);
    return DLOCK_OK;
}
