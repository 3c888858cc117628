/* SPDX-License-Identifier: MIT */
/* conn.c - the PostgreSQL backend's connections: opened with a deadline,
 * pooled while idle, each one a session of the host's renewer, and every
 * request on them bounded by a deadline (libpq's blocking calls have
 * none: everything here runs on its non-blocking calls and poll()).
 *
 * A connection is a session (session.h): the renewer keeps it alive by a
 * ping (renew() below: every connection's ping sent first, then every
 * answer read, so N connections cost one round trip, not N). A ping that
 * finds the connection closed (the server restarted, pg_terminate_backend,
 * a broken link) ends its session: every lock under it is reported lost.
 * A ping that finds the connection busy with a wait of its own (an
 * attempt blocked in pg_advisory_lock: it holds nothing yet) counts as
 * alive, since that request finds a dead connection by itself. */
#define _GNU_SOURCE
#include "pg.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/random.h"
#include "../../base/thread.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX       8      /* idle connections kept, or as many as are busy */
#define CANCEL_STEP_US 50000  /* how often a blocked request asks whether it is cancelled */
#define CANCEL_WAIT_US 150000 /* how long a cancelled request waits for its answer */

/* ---------------------------------------------------------------- helpers */

/* Waits until fd has `events` or until_us: 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, int64_t until_us)
{
    for (;;) {
        int64_t left = until_us - dlock__now_us();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, (int) ((left + 999) / 1000));
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return 1; /* let libpq find the error */
    }
}

/* libpq's last message on one line, without its trailing newline. */
static const char *message_of(PGconn *pg, char *buf, size_t len)
{
    /* one line: libpq's lines ("...refused\n\tIs the server running...")
     * joined as sentences, every run of blanks one space */
    const char *m = pg != NULL ? PQerrorMessage(pg) : "no connection";
    size_t n = 0;
    while (*m != '\0' && n + 3 < len) {
        if (!isspace((unsigned char) *m)) {
            buf[n++] = *m++;
            continue;
        }
        int lines = 0;
        for (; isspace((unsigned char) *m); m++)
            lines |= *m == '\n';
        if (*m == '\0' || n == 0)
            continue;
        if (lines && strchr(".:;?!", buf[n - 1]) == NULL)
            buf[n++] = '.';
        buf[n++] = ' ';
    }
    buf[n] = '\0';
    return buf;
}

/* The server's own words in a failed connection's message: without
 * libpq's "connection to server at "HOST", port N failed: " (the store's
 * label names them) and a refusal's "FATAL: ". */
static const char *own_words(const char *msg)
{
    const char *failed = strstr(msg, " failed: ");
    if (strncmp(msg, "connection to server", 20) == 0 && failed != NULL)
        msg = failed + strlen(" failed: ");
    if (strncmp(msg, "FATAL: ", 7) == 0)
        msg += 7;
    return msg;
}

const char *dlock__pg_state(const PGresult *r)
{
    const char *s = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return s != NULL ? s : "";
}

int dlock__pg_fail(dlock__pgstore *p, const PGresult *r, const char *what)
{
    /* the server's words (not libpq's layout: "ERROR:  ...\n") */
    char msg[512];
    const char *primary = r != NULL ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    snprintf(msg, sizeof msg, "%s",
             primary != NULL ? primary
             : r != NULL     ? PQresultErrorMessage(r)
                             : "no result");
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    const char *state = dlock__pg_state(r);
    return dlock__fail(DLOCK_ESERVER, "%s: %s: %s (SQLSTATE %s)%s", p->label, what, msg, state,
                       strcmp(state, "42501") == 0
                           ? ": the user needs rights on dlock's tables (the grants: "
                             "src/backend/pg/README.md in dlock's source, Schema, Privileges)"
                           : "");
}

/* Notices (CREATE TABLE IF NOT EXISTS, an unlock of a lock not held) are
 * not for the user's stderr. */
static void no_notice(void *arg, const char *message)
{
    (void) arg, (void) message;
}

static void cancel_unref(struct cancel_job *j);

static void conn_free(void *arg)
{
    dlock__pgconn *c = arg;
    cancel_unref(c->cancel);
    if (c->pg != NULL)
        PQfinish(c->pg);
    free(c->keys);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---------------------------------------------------------------- requests */

/* A cancel request in flight: libpq's PQcancel (before PostgreSQL 17's
 * PQcancelStart, the only way to send one) connects and waits for the
 * server to close that connection, with no bound: a paused server, or a
 * link that is silent or drops bytes, kept the dlock_cancel()led request
 * (and its wait's budget) waiting until the fault ended (the fault suite's
 * stalls on postgres, seed 10: 1.2-2.1 s past a wait's bound). So it runs
 * on a thread of its own, which the request does not wait for: the
 * request goes on reading its answer within its own deadline (the server
 * ends the wait when the cancel arrives, or when the slice's lock_timeout
 * does). The job is shared by the thread and the connection, freed by
 * whichever lets go last. */
typedef struct cancel_job {
    PGcancel *cn;
    _Atomic int done; /* the server has it (or it failed) */
    _Atomic int refs;
} cancel_job;

#define CANCELS_MAX 16 /* cancel threads in flight in the process, at most */
static _Atomic int cancels_running;

static void cancel_unref(cancel_job *j)
{
    if (j != NULL && atomic_fetch_sub(&j->refs, 1) == 1) {
        PQfreeCancel(j->cn);
        free(j);
    }
}

static void *cancel_main(void *arg)
{
    cancel_job *j = arg;
    char err[256];
    (void) PQcancel(j->cn, err, sizeof err);
    atomic_store(&j->done, 1);
    atomic_fetch_sub(&cancels_running, 1);
    cancel_unref(j);
    return NULL;
}

/* Sends a cancel for c's request without waiting for it. With no thread
 * to spare, none is sent: the slice's lock_timeout ends the wait. */
static void send_cancel(dlock__pgconn *c)
{
    if (atomic_fetch_add(&cancels_running, 1) >= CANCELS_MAX) {
        atomic_fetch_sub(&cancels_running, 1);
        return;
    }
    cancel_job *j = calloc(1, sizeof *j);
    pthread_t t;
    if (j != NULL)
        j->cn = PQgetCancel(c->pg);
    if (j == NULL || j->cn == NULL) {
        free(j);
        atomic_fetch_sub(&cancels_running, 1);
        return;
    }
    atomic_store(&j->refs, 2);
    if (dlock__thread_start(&t, cancel_main, j) != 0) {
        PQfreeCancel(j->cn);
        free(j);
        atomic_fetch_sub(&cancels_running, 1);
        return;
    }
    pthread_detach(t);
    cancel_unref(c->cancel); /* an earlier one's, done or not */
    c->cancel = j;
}

/* 1 while a cancel sent for an earlier request of c may still reach the
 * server: it would end whatever c runs then. */
static int cancel_in_flight(dlock__pgconn *c)
{
    if (c->cancel == NULL)
        return 0;
    if (!atomic_load(&c->cancel->done))
        return 1;
    cancel_unref(c->cancel);
    c->cancel = NULL;
    return 0;
}

/* Asks the server on another connection (one holding nothing: it is
 * closed when it gets no answer) whether it still answers, while a
 * request blocks there: DLOCK_OK (it answered, or the probe could not be
 * made for a reason that is not silence), DLOCK_EUNREACHABLE (no answer
 * by bound), or 1 (cancelled meanwhile: the caller cancels its request). */
static int probe(dlock__pgstore *p, dlock__pg_watch *w, int64_t bound, int (*cancelled)(void *),
                 void *arg)
{
    dlock__pgconn *o;
    w->asked_us = dlock__now_us();
    int rc = dlock__pg_get(p, bound, &o);
    if (rc != DLOCK_OK)
        return rc == DLOCK_EUNREACHABLE ? rc : DLOCK_OK;
    if (dlock__pg_send(o, "SELECT 1", 0, NULL) != DLOCK_OK) {
        dlock__pg_discard(p, o, "closed: a probe could not be sent");
        return DLOCK_EUNREACHABLE;
    }
    for (;;) {
        if (PQconsumeInput(o->pg) == 0)
            break;
        int done = 0;
        while (!done && !PQisBusy(o->pg)) {
            PGresult *r = PQgetResult(o->pg);
            done = r == NULL;
            PQclear(r);
        }
        if (done && PQstatus(o->pg) != CONNECTION_BAD) {
            dlock__pg_put(p, o);
            return DLOCK_OK;
        }
        if (done)
            break;
        int64_t now = dlock__now_us();
        if (cancelled != NULL && cancelled(arg)) {
            dlock__pg_discard(p, o, "closed: a probe was cut short");
            return 1;
        }
        if (now >= bound)
            break;
        wait_fd(PQsocket(o->pg), POLLIN,
                bound - now > CANCEL_STEP_US ? now + CANCEL_STEP_US : bound);
    }
    dlock__pg_discard(p, o, "closed: a probe got no answer");
    return DLOCK_EUNREACHABLE;
}

/* Reads every result of the request in flight until deadline: a
 * request's (npipe 0: the first error, else the last result, in *res), or
 * a pipeline's of npipe queries and its sync (query i's in res[i]; a query
 * skipped after an earlier one's error has PGRES_PIPELINE_ABORTED). With a
 * watch, the server is probed while the request blocks (pg.h). */
static int collect_n(dlock__pgstore *p, dlock__pgconn *c, int64_t deadline,
                     int (*cancelled)(void *), void *arg, PGresult **res, int npipe,
                     dlock__pg_watch *w)
{
    PGresult *keep = NULL;
    int cancel_sent = 0, query = 0;
    int64_t next_probe = w != NULL ? dlock__now_us() + w->every_us : 0;
    char msg[512];

    for (int i = 0; i < (npipe > 0 ? npipe : 1); i++)
        res[i] = NULL;
    for (;;) {
        int flushing = PQflush(c->pg);
        if (flushing < 0)
            goto broken;
        while (!PQisBusy(c->pg)) {
            PGresult *r = PQgetResult(c->pg);
            if (r == NULL) {
                if (PQstatus(c->pg) == CONNECTION_BAD)
                    goto broken;
                if (npipe == 0) {
                    c->pending = 0;
                    *res = keep;
                    return keep != NULL ? DLOCK_OK
                                        : dlock__fail(DLOCK_EPROTO, "%s: no result", p->label);
                }
                if (query < npipe)
                    res[query] = keep; /* that query's end */
                else
                    PQclear(keep);
                keep = NULL;
                query++;
                continue;
            }
            if (npipe > 0 && PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
                PQclear(r);
                c->pending = 0;
                if (query < npipe || PQexitPipelineMode(c->pg) != 1)
                    goto broken;
                return DLOCK_OK;
            }
            /* the first error, else the last result */
            if (keep == NULL || (PQresultStatus(r) == PGRES_FATAL_ERROR &&
                                 PQresultStatus(keep) != PGRES_FATAL_ERROR)) {
                PQclear(keep);
                keep = r;
            } else if (PQresultStatus(keep) != PGRES_FATAL_ERROR) {
                PQclear(keep);
                keep = r;
            } else {
                PQclear(r);
            }
        }
        int64_t now = dlock__now_us();
        if (now >= deadline) {
            PQclear(keep);
            for (int i = 0; i < npipe; i++) {
                PQclear(res[i]);
                res[i] = NULL;
            }
            c->pending = 1;
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: %s", p->label,
                               cancel_sent ? "no answer to a cancelled request"
                                           : "no answer within the request's bound");
        }
        if (!cancel_sent && cancelled != NULL && cancelled(arg)) {
            send_cancel(c);
            cancel_sent = 1;
            /* the server answers a cancelled wait at once; one that does
             * not (paused, cut off) is given up on soon: the caller
             * wanted out, and the connection is then closed */
            if (deadline > now + CANCEL_WAIT_US)
                deadline = now + CANCEL_WAIT_US;
        }
        /* (a request whose own bound is as near finds silence as soon) */
        if (w != NULL && !cancel_sent && now >= next_probe && deadline - now > w->bound_us) {
            int silent = probe(p, w, now + w->bound_us, cancelled, arg);
            if (silent == DLOCK_EUNREACHABLE) {
                /* the server's wait is ended too when the server is back
                 * (and the closed connection's backend notices it: the
                 * client_connection_check_interval of pg.c's options) */
                send_cancel(c);
                PQclear(keep);
                for (int i = 0; i < npipe; i++) {
                    PQclear(res[i]);
                    res[i] = NULL;
                }
                c->pending = 1;
                return dlock__fail(DLOCK_EUNREACHABLE,
                                   "%s: no answer to a probe within %lld ms while a wait was "
                                   "blocked in the server",
                                   p->label, (long long) (w->bound_us / 1000));
            }
            now = dlock__now_us();
            next_probe = now + w->every_us;
            continue; /* (asks cancelled() again, reads what came meanwhile) */
        }
        int64_t until = deadline;
        if (cancelled != NULL && !cancel_sent && until - now > CANCEL_STEP_US)
            until = now + CANCEL_STEP_US;
        if (w != NULL && !cancel_sent && deadline - now > w->bound_us && until > next_probe)
            until = next_probe; /* (none asked nearer the bound: no wake-up for it either) */
        wait_fd(PQsocket(c->pg), (short) (POLLIN | (flushing ? POLLOUT : 0)), until);
        if (PQconsumeInput(c->pg) == 0)
            goto broken;
    }
broken:
    PQclear(keep);
    for (int i = 0; i < npipe; i++) {
        PQclear(res[i]);
        res[i] = NULL;
    }
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection lost: %s", p->label,
                       message_of(c->pg, msg, sizeof msg));
}

static int collect(dlock__pgstore *p, dlock__pgconn *c, int64_t deadline, int (*cancelled)(void *),
                   void *arg, PGresult **res)
{
    return collect_n(p, c, deadline, cancelled, arg, res, 0, NULL);
}

/* Prepares sql as `name` (one round trip, once per connection). */
static int prepare(dlock__pgstore *p, dlock__pgconn *c, const char *name, const char *sql,
                   int nparams, int64_t deadline_us, PGresult **res)
{
    char msg[512];

    *res = NULL;
    if (c->pending) {
        PGresult *old = NULL;
        int rc = collect(p, c, deadline_us, NULL, NULL, &old);
        PQclear(old);
        if (rc != DLOCK_OK)
            return rc;
    }
    if (!PQsendPrepare(c->pg, name, sql, nparams, NULL))
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection lost: %s", p->label,
                           message_of(c->pg, msg, sizeof msg));
    return collect(p, c, deadline_us, NULL, NULL, res);
}

int dlock__pg_exec(dlock__pgstore *p, dlock__pgconn *c, const char *sql, int nparams,
                   const char *const *params, int64_t deadline_us, int (*cancelled)(void *),
                   void *arg, PGresult **res)
{
    char msg[512];

    *res = NULL;
    if (c->pg == NULL)
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection closed", p->label);
    if (c->pending) {
        /* a renewal's ping still out: its answer comes first */
        PGresult *old = NULL;
        int rc = collect(p, c, deadline_us, NULL, NULL, &old);
        PQclear(old);
        if (rc != DLOCK_OK)
            return rc;
    }
    int sent = nparams > 0 ? PQsendQueryParams(c->pg, sql, nparams, NULL, params, NULL, NULL, 0)
                           : PQsendQuery(c->pg, sql);
    if (!sent)
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection lost: %s", p->label,
                           message_of(c->pg, msg, sizeof msg));
    return collect(p, c, deadline_us, cancelled, arg, res);
}

int dlock__pg_exec_prepared(dlock__pgstore *p, dlock__pgconn *c, unsigned which, const char *sql,
                            int nparams, const char *const *params, int64_t deadline_us,
                            int (*cancelled)(void *), void *arg, PGresult **res)
{
    char msg[512], name[24];

    *res = NULL;
    snprintf(name, sizeof name, "dlock_%u", which);
    if (c->pg != NULL && !(c->prepared & (1u << which))) {
        int rc = prepare(p, c, name, sql, nparams, deadline_us, res);
        if (rc != DLOCK_OK || PQresultStatus(*res) != PGRES_COMMAND_OK)
            return rc;
        PQclear(*res);
        *res = NULL;
        c->prepared |= 1u << which;
    }
    if (c->pg == NULL)
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection closed", p->label);
    if (c->pending) {
        PGresult *old = NULL;
        int rc = collect(p, c, deadline_us, NULL, NULL, &old);
        PQclear(old);
        if (rc != DLOCK_OK)
            return rc;
    }
    if (!PQsendQueryPrepared(c->pg, name, nparams, params, NULL, NULL, 0))
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection lost: %s", p->label,
                           message_of(c->pg, msg, sizeof msg));
    return collect(p, c, deadline_us, cancelled, arg, res);
}

int dlock__pg_exec_pipeline(dlock__pgstore *p, dlock__pgconn *c, int n, const dlock__pg_stmt *st,
                            int64_t deadline_us, int (*cancelled)(void *), void *arg,
                            dlock__pg_watch *watch, PGresult **res)
{
    char msg[512], name[24];

    for (int i = 0; i < n; i++)
        res[i] = NULL;
    if (c->pg == NULL)
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection closed", p->label);
    if (c->pending) {
        PGresult *old = NULL;
        int rc = collect(p, c, deadline_us, NULL, NULL, &old);
        PQclear(old);
        if (rc != DLOCK_OK)
            return rc;
    }
    for (int i = 0; i < n; i++) {
        if (st[i].which == DLOCK__PG_UNNAMED || (c->prepared & (1u << st[i].which)))
            continue;
        snprintf(name, sizeof name, "dlock_%u", st[i].which);
        int rc = prepare(p, c, name, st[i].sql, st[i].nparams, deadline_us, &res[i]);
        if (rc != DLOCK_OK || PQresultStatus(res[i]) != PGRES_COMMAND_OK)
            return rc; /* (its error result in res[i]: nothing ran) */
        PQclear(res[i]);
        res[i] = NULL;
        c->prepared |= 1u << st[i].which;
    }
    int sent = PQenterPipelineMode(c->pg);
    for (int i = 0; sent && i < n; i++) {
        snprintf(name, sizeof name, "dlock_%u", st[i].which);
        sent = st[i].which == DLOCK__PG_UNNAMED
                   ? PQsendQueryParams(c->pg, st[i].sql, st[i].nparams, NULL, st[i].params, NULL,
                                       NULL, 0)
                   : PQsendQueryPrepared(c->pg, name, st[i].nparams, st[i].params, NULL, NULL, 0);
    }
    if (!sent || !PQpipelineSync(c->pg))
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection lost: %s", p->label,
                           message_of(c->pg, msg, sizeof msg));
    return collect_n(p, c, deadline_us, cancelled, arg, res, n, watch);
}

int dlock__pg_send(dlock__pgconn *c, const char *sql, int nparams, const char *const *params)
{
    if (c->pg == NULL || c->pending ||
        !PQsendQueryParams(c->pg, sql, nparams, NULL, params, NULL, NULL, 0))
        return DLOCK_EUNREACHABLE;
    (void) PQflush(c->pg);
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- connecting */

/* dlock's tables, made when missing (README.md: schema). */
static const char schema[] =
    "SELECT pg_advisory_xact_lock(7236828461357345792);"
    /* created only when missing: a role without CREATE on the schema
     * uses tables made for it (README.md: privileges) */
    "DO $dlock$ BEGIN "
    "IF to_regclass('dlock_fence') IS NULL THEN "
    "CREATE TABLE dlock_fence (name text PRIMARY KEY, key bigint NOT NULL, "
    "fence bigint NOT NULL, holder text NOT NULL, expires timestamptz NOT NULL, "
    "owner text NOT NULL, holder_pid integer NOT NULL, run bigint NOT NULL DEFAULT 0); END IF; "
    "IF to_regclass('dlock_owner') IS NULL THEN "
    "CREATE TABLE dlock_owner (pid integer PRIMARY KEY, info text NOT NULL, "
    "since timestamptz NOT NULL DEFAULT now(), lease_ms bigint NOT NULL DEFAULT 0, "
    "holder text NOT NULL DEFAULT ''); END IF; "
    /* the columns of the run rule (pg.c), added to tables made before them */
    "IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'dlock_fence'::regclass "
    "AND attname = 'run' AND NOT attisdropped) THEN "
    "ALTER TABLE dlock_fence ADD COLUMN run bigint NOT NULL DEFAULT 0; END IF; "
    "IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'dlock_owner'::regclass "
    "AND attname = 'lease_ms' AND NOT attisdropped) THEN "
    "ALTER TABLE dlock_owner ADD COLUMN lease_ms bigint NOT NULL DEFAULT 0; END IF; "
    /* the connection's id (pg.c: a holder's record is told from a later
     * connection's of the same server pid by it), added likewise */
    "IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'dlock_owner'::regclass "
    "AND attname = 'holder' AND NOT attisdropped) THEN "
    "ALTER TABLE dlock_owner ADD COLUMN holder text NOT NULL DEFAULT ''; END IF; "
    /* the read-write lock's readers (read.c): a lease row each, and the
     * name's row says until when any may run */
    "IF to_regclass('dlock_share') IS NULL THEN "
    "CREATE TABLE dlock_share (name text NOT NULL, holder text NOT NULL, "
    "expires timestamptz NOT NULL, owner text NOT NULL, holder_pid integer NOT NULL, "
    "PRIMARY KEY (name, holder)); END IF; "
    "IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'dlock_fence'::regclass "
    "AND attname = 'shared_until' AND NOT attisdropped) THEN "
    "ALTER TABLE dlock_fence ADD COLUMN shared_until timestamptz NOT NULL "
    "DEFAULT '-infinity'; END IF; "
    /* the run's epoch (pg.c: the fence): a durable counter, and its
     * current value in an unlogged table, which a crash empties */
    "IF to_regclass('dlock_epoch') IS NULL THEN CREATE SEQUENCE dlock_epoch; END IF; "
    "IF to_regclass('dlock_run') IS NULL THEN "
    "CREATE UNLOGGED TABLE dlock_run (id integer PRIMARY KEY CHECK (id = 1), "
    "epoch bigint NOT NULL, started timestamptz NOT NULL, lease_ms bigint NOT NULL); END IF; "
    "END $dlock$;";

/* A holding connection's renewal (README.md): the row leases of its
 * exclusive holds, and of its read holds (read.c: dlock_share, and the
 * name's shared_until raised with them); the names it reads are left out
 * of the last UPDATE (one row is never updated twice in one statement):
 * the row of a name it reads beside its own write (a downgrade: the row
 * names this connection) has its exclusive lease renewed with its
 * shared_until. $1 the lease, $2 the connection's id. */
#define RENEW_SQL                                                                                  \
    "WITH r AS (UPDATE dlock_share SET expires = clock_timestamp() + $1::interval WHERE holder = " \
    "$2 RETURNING name), u AS (UPDATE dlock_fence SET shared_until = greatest(shared_until, "      \
    "clock_timestamp() + $1::interval), expires = CASE WHEN holder = $2 THEN clock_timestamp() + " \
    "$1::interval ELSE expires END WHERE name IN (SELECT name FROM r)) UPDATE dlock_fence "        \
    "SET expires = clock_timestamp() + $1::interval WHERE holder = $2 AND name NOT IN (SELECT "    \
    "name FROM r)"

/* The server's run (pg.c: the fence, the run rule), taken by a set-up:
 * the one in dlock_run, or, when that is empty (a new table, or the server
 * crashed since: crash recovery empties an unlogged table), a new one put
 * there: the next value of the sequence dlock_epoch, the time (the
 * server's clock, after the crash), and the largest lease any client
 * recorded in dlock_owner. The set-up's commit waits for the WAL's flush
 * (synchronous_commit on for its transaction): a new epoch is on disk
 * before any grant uses it. ON CONFLICT: two set-ups that find it empty
 * together; the later statement waits for the earlier's commit, then
 * does nothing. It runs before the set-up records its own lease (below),
 * so no connection of the new run has overwritten a record of the last
 * one (a pid used again) when the largest lease is read. */
#define RUN_EPOCH_SQL                                                                              \
    "INSERT INTO dlock_run (id, epoch, started, lease_ms) SELECT 1, nextval('dlock_epoch'), "      \
    "clock_timestamp(), (SELECT coalesce(max(lease_ms), 0) FROM dlock_owner) WHERE NOT EXISTS "    \
    "(SELECT FROM dlock_run) ON CONFLICT (id) DO NOTHING"

int dlock__pg_make_tables(dlock__pgstore *p, dlock__pgconn *c, int64_t deadline_us)
{
    PGresult *r = NULL;
    int rc = dlock__pg_exec(p, c, schema, 0, NULL, deadline_us, NULL, NULL, &r);
    if (rc == DLOCK_OK && PQresultStatus(r) != PGRES_COMMAND_OK &&
        PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = dlock__pg_fail(p, r, "setting up dlock's tables");
    PQclear(r);
    return rc;
}

/* Creates dlock's tables if missing (README.md: schema), once per store,
 * under a transaction-level advisory lock so that clients starting
 * together do not race in CREATE TABLE; and records this connection's
 * owner info under its server pid. */
static int set_up(dlock__pgstore *p, dlock__pgconn *c, int64_t deadline, int with_schema)
{
    const dlock__client_cfg *cfg = p->base.host.cfg;
    char *info = PQescapeLiteral(c->pg, cfg->owner_info, strlen(cfg->owner_info));
    if (info == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_lock(&p->mu);
    int ready = p->schema_ready && !with_schema;
    pthread_mutex_unlock(&p->mu);
    size_t len = sizeof schema + strlen(info) + 1024;
    for (size_t i = 0; i < 8 && p->prep_sql[i] != NULL; i++)
        len += strlen(p->prep_sql[i]) + 32;
    char *sql = malloc(len);
    if (sql == NULL) {
        PQfreemem(info);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    /* the connection's lease, recorded before any grant on it (the run
     * rule, pg.c); a table mode client's none (its leases are its rows') */
    snprintf(sql, len,
             "SELECT set_config('synchronous_commit', 'on', true); %s" RUN_EPOCH_SQL
             "; INSERT INTO dlock_owner (pid, info, lease_ms, holder) VALUES (pg_backend_pid(), "
             "%s, %lld, '%s') ON CONFLICT (pid) DO UPDATE SET info = excluded.info, since = now(), "
             "lease_ms = excluded.lease_ms, holder = excluded.holder",
             ready ? "" : schema, info, (long long) (p->table ? 0 : p->lease_ms), c->nonce);
    PQfreemem(info);
    /* the hot path's statements, prepared in the same round trip (after
     * the tables they name) */
    unsigned prepared = 0;
    for (unsigned i = 0; i < 8 && p->prep_sql[i] != NULL; i++) {
        size_t used = strlen(sql);
        snprintf(sql + used, len - used, "; PREPARE dlock_%u AS %s", i, p->prep_sql[i]);
        prepared |= 1u << i;
    }
    /* last, its answer the request's: whether table mode's lock table is
     * there (pg.c: a session grant then looks at the name's row) */
    size_t used = strlen(sql);
    snprintf(sql + used, len - used,
             "; SELECT to_regclass('" DLOCK__SQLT_TABLE "') IS NOT NULL, "
             "(SELECT epoch FROM dlock_run), "
             "(SELECT started + lease_ms * interval '1 millisecond' FROM dlock_run)");
    PGresult *r = NULL;
    int rc = dlock__pg_exec(p, c, sql, 0, NULL, deadline, NULL, NULL, &r);
    free(sql);
    /* made once per store, but gone since (a database wiped or re-created
     * under the client, the fault suite's wiped restart: every set-up
     * after it failed until another client made them): made again */
    int gone = rc == DLOCK_OK && ready && strcmp(dlock__pg_state(r), "42P01") == 0;
    if (rc == DLOCK_OK && !gone && PQresultStatus(r) != PGRES_COMMAND_OK &&
        PQresultStatus(r) != PGRES_TUPLES_OK)
        rc = dlock__pg_fail(p, r,
                            ready ? "recording the owner info (table dlock_owner)"
                                  : "setting up dlock's tables");
    if (rc == DLOCK_OK && !gone) {
        c->prepared = prepared;
        c->lock_table = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        /* the fences of this connection's grants start at epoch << 32 */
        long long epoch =
            PQntuples(r) == 1 && !PQgetisnull(r, 0, 1) ? strtoll(PQgetvalue(r, 0, 1), NULL, 10) : 0;
        const char *until = PQntuples(r) == 1 && !PQgetisnull(r, 0, 2) ? PQgetvalue(r, 0, 2) : "";
        if (epoch <= 0 || epoch >= (1LL << 30) || until[0] == '\0' ||
            strlen(until) >= sizeof c->run_until) {
            rc = dlock__fail(DLOCK_ESERVER,
                             "the server's run (table dlock_run, its epoch from the sequence "
                             "dlock_epoch) is missing or out of range (epoch 1 to 2^30)");
        } else {
            snprintf(c->fence_base, sizeof c->fence_base, "%lld", epoch << 32);
            snprintf(c->run_epoch, sizeof c->run_epoch, "%lld", epoch);
            snprintf(c->run_until, sizeof c->run_until, "%s", until);
        }
    }
    PQclear(r);
    if (gone)
        return set_up(p, c, deadline, 1);
    if (rc == DLOCK_OK && !ready) {
        pthread_mutex_lock(&p->mu);
        p->schema_ready = 1;
        pthread_mutex_unlock(&p->mu);
    }
    return rc;
}

/* What to do about a connection the client's own settings made fail
 * after the server answered (libpq says these without the server's
 * FATAL), or NULL when msg is not one: a refusal like a wrong password,
 * not an outage to wait out. */
static const char *settings_refused(const char *msg)
{
    if (strstr(msg, "no password supplied") != NULL)
        return "the server wants a password and none was given: put it in the URL "
               "(postgres://user:PASSWORD@host:port/db), or in libpq's PGPASSWORD or "
               "~/.pgpass";
    if (strstr(msg, "SSL was required") != NULL || strstr(msg, "does not support SSL") != NULL)
        return "the URL's sslmode asks for SSL and the server has none: use sslmode=prefer "
               "or disable, or turn ssl on in the server";
    if (strstr(msg, "root certificate file") != NULL ||
        strstr(msg, "does not match host name") != NULL ||
        strstr(msg, "certificate verify failed") != NULL)
        return "the server's certificate cannot be verified as the URL's sslmode asks "
               "(verify-ca, verify-full): install the CA's certificate for libpq "
               "(~/.postgresql/root.crt), or use sslmode=require";
    return NULL;
}

/* A new connection, set up, its session started; its mutex held. */
static int connect_one(dlock__pgstore *p, int64_t deadline, dlock__pgconn **out)
{
    int64_t sent = dlock__now_us();
    int64_t until = sent + p->connect_ms * 1000;
    char msg[512];
    int rc;

    *out = NULL;
    if (until > deadline)
        until = deadline;
    dlock__pgconn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->pg = PQconnectStartParams(p->keys, p->vals, 0);
    if (c->pg == NULL) {
        conn_free(c);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    PostgresPollingStatusType st =
        PQstatus(c->pg) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
        short ev = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
        if (!wait_fd(PQsocket(c->pg), ev, until)) {
            if (PQstatus(c->pg) != CONNECTION_STARTED)
                /* connected, and the startup (or SSL request) not answered:
                 * another service's port waits for its own first words */
                rc = dlock__fail(DLOCK_EUNREACHABLE,
                                 "%s: %s:%s accepted the connection, but did not answer as "
                                 "PostgreSQL within %lld ms: another service's port (Redis, etcd "
                                 "and ZooKeeper wait so), or a server that hangs",
                                 p->label, p->host, p->port[0] ? p->port : "5432",
                                 (long long) ((dlock__now_us() - sent) / 1000));
            else
                rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: no connection within %lld ms", p->label,
                                 (long long) ((dlock__now_us() - sent) / 1000));
            goto fail;
        }
        st = PQconnectPoll(c->pg);
    }
    if (st == PGRES_POLLING_FAILED) {
        message_of(c->pg, msg, sizeof msg);
        /* The server answered and refused (a password, a database that is
         * not there, pg_hba.conf, too many connections): not an outage. */
        if (strstr(msg, "FATAL") != NULL && strstr(msg, "the database system is") != NULL) {
            /* shutting down, starting up, in recovery, not yet accepting
             * connections (57P03): an outage to ride out, as a server that
             * does not answer is */
            atomic_store(&p->reached, 1);
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: the server is not taking connections now: %s",
                             p->label, own_words(msg));
        } else if (strstr(msg, "FATAL") != NULL) {
            atomic_store(&p->reached, 1);
            rc = dlock__fail(DLOCK_ESERVER, "%s: the server refused the connection: %s%s", p->label,
                             own_words(msg),
                             strstr(msg, "password authentication failed") != NULL
                                 ? " (a wrong password, or a user the server does not know)"
                             : p->dbname[0] == '\0' && getenv("PGDATABASE") == NULL &&
                                     strstr(msg, "does not exist") != NULL &&
                                     strstr(msg, "database \"") != NULL
                                 ? " (the URL names no database, so libpq asked for the one named "
                                   "as the user: add /DATABASE to the URL)"
                                 : "");
        } else if (settings_refused(msg) != NULL) {
            /* refused as a wrong password is: told at once, not retried */
            atomic_store(&p->reached, 1);
            rc = dlock__fail(DLOCK_ESERVER, "%s: %s (%s)", p->label, settings_refused(msg),
                             own_words(msg));
        } else if (strstr(msg, "invalid response to SSL negotiation") != NULL ||
                   strstr(msg, "expected authentication request from server") != NULL) {
            /* libpq's words for a first reply that is no PostgreSQL's (an
             * HTTP server's begins "HTTP/": libpq shows its first byte) */
            int http =
                strstr(msg, "SSL negotiation: H") != NULL || strstr(msg, "received H") != NULL;
            rc = dlock__fail(DLOCK_EUNREACHABLE,
                             "%s: %s:%s answered, but not as PostgreSQL (%s): %s", p->label,
                             p->host, p->port[0] ? p->port : "5432", own_words(msg),
                             http ? "an HTTP server's port?"
                                  : "another service's port (a MySQL or MariaDB server greets "
                                    "so: mysql://)?");
        } else {
            rc =
                dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot connect: %s", p->label, own_words(msg));
        }
        goto fail;
    }
    atomic_store(&p->reached, 1);
    if (PQsetnonblocking(c->pg, 1) != 0) {
        rc =
            dlock__fail(DLOCK_EUNREACHABLE, "%s: %s", p->label, message_of(c->pg, msg, sizeof msg));
        goto fail;
    }
    c->pid = PQbackendPID(c->pg);
    if (dlock__random_hex(c->nonce, 8) != 0) {
        rc = dlock__fail(DLOCK_ENOMEM, "no random bytes for a connection's id");
        goto fail;
    }
    PQsetNoticeProcessor(c->pg, no_notice, NULL);
    rc = set_up(p, c, deadline, 0);
    if (rc != DLOCK_OK)
        goto fail;
    pthread_mutex_lock(&c->mu);
    rc = dlock__session_start(p->base.host.sessions, p->lease_ms, sent, c, conn_free, &c->session);
    if (rc != DLOCK_OK) {
        pthread_mutex_unlock(&c->mu);
        goto fail;
    }
    pthread_mutex_lock(&p->mu);
    c->next_all = p->all;
    if (p->all != NULL)
        p->all->prev_all = c;
    p->all = c;
    p->nall++;
    pthread_mutex_unlock(&p->mu);
    dlock__sockwatch_add(p->watch, PQsocket(c->pg), c);
    *out = c;
    return DLOCK_OK;
fail:
    conn_free(c);
    return rc;
}

/* ---------------------------------------------------------------- the pool */

/* Whether an idle connection still looks open: a passive read of what the
 * server sent meanwhile (a FATAL before it closed, the close itself). */
static int still_open(dlock__pgconn *c)
{
    if (c->pg == NULL || atomic_load(&c->lost) || PQstatus(c->pg) == CONNECTION_BAD)
        return 0;
    struct pollfd pfd = {.fd = PQsocket(c->pg), .events = POLLIN};
    if (poll(&pfd, 1, 0) > 0) {
        if (PQconsumeInput(c->pg) == 0 || PQstatus(c->pg) == CONNECTION_BAD)
            return 0;
        if (!c->pending) {
            /* nothing was asked: whatever came is a notice; drop results */
            PGresult *r;
            while (!PQisBusy(c->pg) && (r = PQgetResult(c->pg)) != NULL)
                PQclear(r);
        }
    }
    return 1;
}

int dlock__pg_hold(dlock__pgconn *c, int64_t key)
{
    if (c->nkeys == c->capkeys) {
        size_t cap = c->capkeys ? c->capkeys * 2 : 4;
        int64_t *grown = realloc(c->keys, cap * sizeof *grown);
        if (grown == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        c->keys = grown;
        c->capkeys = cap;
    }
    c->keys[c->nkeys++] = key;
    atomic_fetch_add(&c->nheld, 1);
    return DLOCK_OK;
}

void dlock__pg_unhold(dlock__pgconn *c, int64_t key)
{
    for (size_t i = 0; i < c->nkeys; i++) {
        if (c->keys[i] == key) {
            c->keys[i] = c->keys[--c->nkeys];
            atomic_fetch_sub(&c->nheld, 1);
            return;
        }
    }
}

static int holds_key(const dlock__pgconn *c, int64_t key)
{
    for (size_t i = 0; i < c->nkeys; i++) {
        if (c->keys[i] == key)
            return 1;
    }
    return 0;
}

int dlock__pg_get_shared(dlock__pgstore *p, int64_t key, int64_t deadline_us, dlock__pgconn **out)
{
    dlock__pgconn *found = NULL;
    /* (a trylock under the store's mutex: the usual order is a
     * connection's, then the store's, so it must not wait here) */
    pthread_mutex_lock(&p->mu);
    for (int pass = 0; pass < 2 && found == NULL; pass++) {
        for (dlock__pgconn *c = p->all; c != NULL; c = c->next_all) {
            if ((pass == 0) != (atomic_load(&c->nheld) > 0) || c->in_pool)
                continue;
            if (pthread_mutex_trylock(&c->mu) != 0)
                continue;
            if (c->pg != NULL && !atomic_load(&c->lost) && !holds_key(c, key)) {
                found = c;
                break;
            }
            pthread_mutex_unlock(&c->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (found != NULL && still_open(found)) {
        *out = found;
        return DLOCK_OK;
    }
    if (found != NULL)
        dlock__pg_discard(p, found, "its connection was closed");
    return dlock__pg_get(p, deadline_us, out);
}

/* Takes c's mutex, c being listed in the store (idle or all) and the
 * store's mutex held, which it lets go of: 1, or 0 when c was closed
 * meanwhile. Between the store's mutex and c's, the renewer (a ping that
 * found c dead) or session_lost may close c and drop the store's
 * reference to its session, the last one, and c's memory with it: a
 * thread about to lock c's mutex then locked freed memory (the fault
 * suite's worker that never stopped, postgres seed 9: blocked for ever in
 * pthread_mutex_lock). So a reference of our own keeps c's memory until
 * its mutex is held; c is then either open (with the store's reference:
 * closing c needs its mutex) or closed, and let go of. */
static int lock_listed(dlock__pgstore *p, dlock__pgconn *c)
{
    dlock__session *session = c->session;
    dlock__session_ref(session);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_lock(&c->mu);
    if (c->pg != NULL) {
        dlock__session_unref(session); /* not the last: the store's is there while c is open */
        return 1;
    }
    pthread_mutex_unlock(&c->mu);
    dlock__session_unref(session); /* may free c */
    return 0;
}

int dlock__pg_get(dlock__pgstore *p, int64_t deadline_us, dlock__pgconn **out)
{
    for (;;) {
        pthread_mutex_lock(&p->mu);
        dlock__pgconn *c = p->idle;
        if (c == NULL) {
            pthread_mutex_unlock(&p->mu);
            return connect_one(p, deadline_us, out);
        }
        p->idle = c->next_idle;
        p->nidle--;
        c->in_pool = 0;
        c->next_idle = NULL;
        if (!lock_listed(p, c))
            continue; /* closed meanwhile */
        if (still_open(c)) {
            *out = c;
            return DLOCK_OK;
        }
        dlock__pg_discard(p, c, "its connection was closed");
    }
}

int dlock__pg_get_for_request(dlock__pgstore *p, int64_t *deadline_us, dlock__pgconn **out)
{
    int64_t cap = dlock__now_us() + p->timeout_ms * 1000;
    if (*deadline_us > cap)
        *deadline_us = cap;
    return dlock__pg_get(p, *deadline_us, out);
}

void dlock__pg_done(dlock__pgstore *p, dlock__pgconn *c, int answered)
{
    if (answered)
        dlock__pg_put(p, c);
    else
        dlock__pg_discard(p, c, "closed: a request got no answer");
}

void dlock__pg_put(dlock__pgstore *p, dlock__pgconn *c)
{
    if (atomic_load(&c->nheld) > 0 && c->pg != NULL && !atomic_load(&c->lost)) {
        pthread_mutex_unlock(&c->mu); /* it holds locks: not idle */
        return;
    }
    if (c->pg == NULL || atomic_load(&c->lost) || PQstatus(c->pg) == CONNECTION_BAD) {
        dlock__pg_discard(p, c, "its connection was closed");
        return;
    }
    if (cancel_in_flight(c)) { /* it would cancel the next request of whoever takes it */
        dlock__pg_discard(p, c, "closed: a cancel sent for its wait may still arrive");
        return;
    }
    pthread_mutex_lock(&p->mu);
    /* a client whose waits keep N connections busy keeps N idle (else
     * every wait beyond the 8th would connect anew: TCP, a backend, SCRAM) */
    int keep = p->nidle < POOL_MAX || p->nidle < p->nall - p->nidle;
    if (keep) {
        c->next_idle = p->idle;
        p->idle = c;
        p->nidle++;
        c->in_pool = 1;
    }
    pthread_mutex_unlock(&p->mu);
    if (keep)
        pthread_mutex_unlock(&c->mu);
    else
        dlock__pg_discard(p, c, "closed: the pool has enough idle connections");
}

void dlock__pg_discard(dlock__pgstore *p, dlock__pgconn *c, const char *why)
{
    pthread_mutex_lock(&p->mu);
    if (c->in_pool) {
        dlock__pgconn **pp = &p->idle;
        while (*pp != NULL && *pp != c)
            pp = &(*pp)->next_idle;
        if (*pp == c)
            *pp = c->next_idle;
        p->nidle--;
        c->in_pool = 0;
    }
    int listed = c->pg != NULL;
    if (listed) {
        if (c->prev_all != NULL)
            c->prev_all->next_all = c->next_all;
        else if (p->all == c)
            p->all = c->next_all;
        if (c->next_all != NULL)
            c->next_all->prev_all = c->prev_all;
        c->prev_all = c->next_all = NULL;
        p->nall--;
    }
    pthread_mutex_unlock(&p->mu);
    if (listed)
        dlock__sockwatch_remove(p->watch, c); /* before its socket closes */
    if (c->pg != NULL) {
        PQfinish(c->pg); /* (non-blocking: the goodbye is sent if it can be) */
        c->pg = NULL;
    }
    dlock__session *s = c->session;
    pthread_mutex_unlock(&c->mu);
    if (listed)
        dlock__session_end(s, why); /* the store's reference: c may be freed */
}

enum dlock__sockwatch_verdict dlock__pg_watch_check(void *arg, void *item)
{
    dlock__pgstore *p = arg;
    dlock__pgconn *c = item;
    char why[600], msg[300];

    if (pthread_mutex_trylock(&c->mu) != 0)
        return DLOCK__SW_LATER; /* a request reads it */
    if (c->pg == NULL || c->pending || atomic_load(&c->lost)) {
        pthread_mutex_unlock(&c->mu); /* a late answer is the renewal's to read */
        return DLOCK__SW_LATER;
    }
    if (PQconsumeInput(c->pg) == 1 && PQstatus(c->pg) == CONNECTION_OK) {
        pthread_mutex_unlock(&c->mu); /* a notice, a parameter's new value */
        return DLOCK__SW_KEEP;
    }
    /* short: a loss's reason is kept in 200 bytes (libpq's own text
     * for this case is two sentences) */
    message_of(c->pg, msg, sizeof msg);
    if (strstr(msg, "closed the connection unexpectedly") != NULL)
        snprintf(why, sizeof why,
                 "%s: the server closed the connection (dlock unlock --force, "
                 "pg_terminate_backend, a restart or a crash)",
                 p->label);
    else
        snprintf(why, sizeof why, "%s: the server closed the connection: %.120s", p->label, msg);
    dlock__pg_discard(p, c, why);
    return DLOCK__SW_GONE;
}

void dlock__pg_close_all(dlock__pgstore *p, int64_t deadline_us)
{
    for (;;) {
        pthread_mutex_lock(&p->mu);
        dlock__pgconn *c = p->all;
        if (c == NULL) {
            pthread_mutex_unlock(&p->mu);
            return;
        }
        if (!lock_listed(p, c))
            continue; /* closed meanwhile */
        if (atomic_load(&c->nheld) > 0 && c->pg != NULL && !c->pending &&
            dlock__now_us() < deadline_us) {
            /* detached locks: their rows' leases end with them, so that
             * the next holders do not wait for them (closing the
             * connection frees the advisory locks) */
            const char *params[] = {c->nonce};
            PGresult *r = NULL;
            (void) dlock__pg_exec(p, c,
                                  "WITH d AS (DELETE FROM dlock_share WHERE holder = $1) UPDATE "
                                  "dlock_fence SET expires = clock_timestamp() WHERE holder = $1",
                                  1, params, deadline_us, NULL, NULL, &r);
            PQclear(r);
        }
        dlock__pg_discard(p, c, "the client closed");
    }
}

void dlock__pg_session_lost(dlock__store *s, dlock__session *session, int64_t deadline_us)
{
    dlock__pgconn *c = dlock__session_data(session);
    (void) deadline_us;
    atomic_store(&c->lost, 1);
    /* busy: its user finds it lost when done, and closes it */
    if (pthread_mutex_trylock(&c->mu) == 0) {
        if (c->pg != NULL)
            dlock__pg_discard(PGSTORE(s), c, "its session was lost");
        else
            pthread_mutex_unlock(&c->mu);
    }
}

/* ---------------------------------------------------------------- renewal */

enum ping { PING_NONE, PING_SENT, PING_ALIVE, PING_BUSY_WAITING, PING_BUSY, PING_DEAD, PING_LATE };

struct pinged {
    dlock__pgconn *c;
    enum ping state;
};

static dlock__pgconn *conn_of(const dlock__renewal *it)
{
    if (it->kind == DLOCK__RENEW_SESSION)
        return it->session != NULL ? dlock__session_data(it->session) : NULL;
    if (it->session != NULL)
        return dlock__session_data(it->session);
    return NULL;
}

int dlock__pg_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    dlock__pgstore *p = PGSTORE(s);
    struct pinged *ps = calloc(n > 0 ? n : 1, sizeof *ps);
    size_t np = 0;
    char why[600];

    if (ps == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    /* every connection once: its ping sent */
    for (size_t i = 0; i < n; i++) {
        dlock__pgconn *c = conn_of(&items[i]);
        size_t j = 0;
        while (j < np && ps[j].c != c)
            j++;
        if (c == NULL || j < np)
            continue;
        ps[np].c = c;
        if (pthread_mutex_trylock(&c->mu) != 0) {
            /* in use: a wait blocked in the server holds nothing, and finds
             * a dead connection by itself; a holder's call is short */
            ps[np++].state = atomic_load(&c->nheld) > 0 ? PING_BUSY : PING_BUSY_WAITING;
            continue;
        }
        if (c->pg == NULL || atomic_load(&c->lost)) {
            pthread_mutex_unlock(&c->mu);
            ps[np++].state = PING_DEAD;
            continue;
        }
        if (c->pending) {
            /* what came of the last request meanwhile (read, not waited
             * for: 1 ms), so that a server silent for a while and back
             * now is asked again at once */
            PGresult *old = NULL;
            if (collect(p, c, dlock__now_us() + 1000, NULL, NULL, &old) == DLOCK_OK)
                PQclear(old);
        }
        /* a connection holding locks renews their rows' leases in one
         * statement (README.md); another one is only pinged */
        const char *params[] = {p->lease_text, c->nonce};
        int sent = c->pending                   ? DLOCK_EUNREACHABLE
                   : atomic_load(&c->nheld) > 0 ? dlock__pg_send(c, RENEW_SQL, 2, params)
                                                : dlock__pg_send(c, "SELECT 1", 0, NULL);
        ps[np++].state = sent == DLOCK_OK ? PING_SENT : c->pending ? PING_LATE : PING_DEAD;
        if (ps[np - 1].state == PING_DEAD) {
            snprintf(why, sizeof why, "%s: connection lost: %s", p->label, PQerrorMessage(c->pg));
            dlock__pg_discard(p, c, why);
        } else if (ps[np - 1].state == PING_LATE) {
            pthread_mutex_unlock(&c->mu);
        }
    }
    /* then every answer */
    for (size_t j = 0; j < np; j++) {
        if (ps[j].state != PING_SENT)
            continue;
        dlock__pgconn *c = ps[j].c;
        PGresult *r = NULL;
        int rc = collect(p, c, deadline_us, NULL, NULL, &r);
        int renewed = rc == DLOCK_OK && (PQresultStatus(r) == PGRES_TUPLES_OK ||
                                         PQresultStatus(r) == PGRES_COMMAND_OK);
        if (renewed) {
            ps[j].state = PING_ALIVE;
            pthread_mutex_unlock(&c->mu);
        } else if (rc == DLOCK_EUNREACHABLE && c->pending) {
            ps[j].state = PING_LATE; /* no answer yet: read before its next use */
            pthread_mutex_unlock(&c->mu);
        } else {
            ps[j].state = PING_DEAD;
            snprintf(why, sizeof why, "%s", dlock_errmsg());
            if (rc == DLOCK_OK)
                snprintf(why, sizeof why, "%s: the connection failed: %s", p->label,
                         PQresultErrorMessage(r));
            dlock__pg_discard(p, c, why);
        }
        PQclear(r);
    }
    for (size_t i = 0; i < n; i++) {
        dlock__pgconn *c = conn_of(&items[i]);
        enum ping st = PING_DEAD;
        for (size_t j = 0; j < np; j++) {
            if (ps[j].c == c)
                st = ps[j].state;
        }
        items[i].result = st == PING_ALIVE || st == PING_BUSY_WAITING ? DLOCK__RENEW_OK
                          : st == PING_DEAD                           ? DLOCK__RENEW_GONE
                                                                      : DLOCK__RENEW_FAILED;
    }
    free(ps);
    return DLOCK_OK;
}
