/* SPDX-License-Identifier: MIT */
/* table.c - the PostgreSQL backend's table mode (mode=table): a lock is a
 * row of dlock's lock table, dlock_lock, with its holder, its fence and a
 * lease on the server's clock, as MariaDB's (../mysql/README.md: "Table
 * mode"); the statements and their answers are ../sqltable/ (the PG
 * dialect: each request one statement), run here on the store's pooled
 * connections (conn.c). No hold depends on a connection; a release
 * notifies the lock's waiters, who park until then (listen.c) or until
 * the holder's lease ends, their rows kept by the renewer; every held lock
 * of a batch is renewed by one UPDATE, every waiter's row by another.
 *
 * Calls both ways with shares.c: the read-write lock's and the
 * semaphore's steps are there, and their requests run on the tables made
 * here. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../sqltable/sqltable.h"
#include "pg.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D DLOCK__SQLT_PG

/* The hot path's statements, prepared on each connection on first use (as
 * "dlock_<which>": session mode's are below 8, pg.c) and then only bound
 * and executed: their text names every value as a parameter, so it is the
 * same for every lock and store, made once per process. Sent as text they
 * were parsed and planned at every cycle, most of a take's time in the
 * server. A take is two of them (its guard, then the take: TAKE_GUARD). */
enum {
    PREP_HANDOVER = 7, /* (session mode's are 0 to 4) */
    PREP_TAKE_TRY,
    PREP_TAKE_WAIT,
    PREP_RELEASE,
    PREP_TAKE_GUARD = DLOCK__PGT_PREP_GUARD
};

void dlock__pgt_tag(const char *name, char *tag)
{
    size_t n = strlen(name);
    if (n > DLOCK__SQLT_TAG_BYTES)
        n = DLOCK__SQLT_TAG_BYTES;
    for (size_t i = 0; i < n; i++)
        snprintf(tag + 2 * i, 3, "%02x", (unsigned char) name[i]);
    tag[2 * n] = '\0';
}

char *dlock__pgt_bytea(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(2 * n + 16);
    if (out == NULL)
        return NULL;
    size_t k = (size_t) sprintf(out, "'\\x");
    for (size_t i = 0; i < n; i++)
        k += (size_t) sprintf(out + k, "%02x", (unsigned char) text[i]);
    sprintf(out + k, "'::bytea");
    return out;
}

/* One request on a pooled connection, bounded by a command timeout: sql
 * as text, or (which < NOT_PREPARED) the statement prepared as which on the
 * connection (dlock__pg_exec_prepared: parsed and planned once per
 * connection) with its params; a take (PREP_TAKE_TRY, PREP_TAKE_WAIT) is
 * its guard and then the take, a hand-over or a leave the row's lock and
 * then the step, in one pipeline (pipeline_of). DLOCK_OK
 * with *res (PQclear it), or the failure recorded; state (if not NULL, 6
 * bytes) gets the SQLSTATE of an error the server answered. */
#define NOT_PREPARED 32u
#define LEAVE        33u /* a waiter's leave: text statements, after the row's lock */
static int pipeline_of(dlock__pgstore *p, dlock__pgconn *c, unsigned which, const char *sql,
                       int nparams, const char *const *params, int64_t deadline, PGresult **res);
static int exchange(dlock__pgstore *p, unsigned which, const char *sql, int nparams,
                    const char *const *params, int64_t deadline, PGresult **res, const char *what,
                    char *state)
{
    dlock__pgconn *c;
    *res = NULL;
    int rc = dlock__pg_get_for_request(p, &deadline, &c);
    if (rc == DLOCK_OK) {
        rc = which == PREP_TAKE_TRY || which == PREP_TAKE_WAIT || which == PREP_HANDOVER ||
                     which == LEAVE
                 ? pipeline_of(p, c, which, sql, nparams, params, deadline, res)
             : which < NOT_PREPARED ? dlock__pg_exec_prepared(p, c, which, sql, nparams, params,
                                                              deadline, NULL, NULL, res)
                                    : dlock__pg_exec(p, c, sql, 0, NULL, deadline, NULL, NULL, res);
        dlock__pg_done(p, c, rc == DLOCK_OK);
    }
    if (rc == DLOCK_OK && PQresultStatus(*res) != PGRES_TUPLES_OK &&
        PQresultStatus(*res) != PGRES_COMMAND_OK) {
        if (state != NULL)
            snprintf(state, 6, "%s", dlock__pg_state(*res));
        rc = dlock__pg_fail(p, *res, what);
        PQclear(*res);
        *res = NULL;
    }
    return rc;
}

/* A request of sql as text (freed here). */
static int request_state(dlock__pgstore *p, char *sql, int64_t deadline, PGresult **res,
                         const char *what, char *state)
{
    *res = NULL;
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = exchange(p, NOT_PREPARED, sql, 0, NULL, deadline, res, what, state);
    free(sql);
    return rc;
}

static int request(dlock__pgstore *p, char *sql, int64_t deadline, PGresult **res, const char *what)
{
    return request_state(p, sql, deadline, res, what, NULL);
}

static const char *value(const PGresult *r, int row, int col)
{
    if (r == NULL || row >= PQntuples(r) || col >= PQnfields(r) || PQgetisnull(r, row, col))
        return NULL;
    return PQgetvalue(r, row, col);
}

/* What dlock's tables lack (dlock__sqlt_lacks) into *lacks. */
static int look_tables(dlock__pgstore *p, int64_t deadline, int *lacks)
{
    PGresult *res;
    int rc = request(p, dlock__sqlt_exists(D), deadline, &res, "looking for dlock's table");
    if (rc != DLOCK_OK)
        return rc;
    *lacks = dlock__sqlt_lacks(value(res, 0, 0), value(res, 0, 1));
    PQclear(res);
    return DLOCK_OK;
}

/* One step of the schema (sql, freed); what is missing said when the role
 * may not make it. */
static int schema_step(dlock__pgstore *p, char *sql, int64_t deadline, const char *what,
                       const char *needs)
{
    PGresult *res;
    int rc = request(p, sql, deadline, &res, what);
    if (rc == DLOCK_ESERVER) {
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        return dlock__fail(DLOCK_ESERVER, "%s; %s", why, needs);
    }
    if (rc == DLOCK_OK)
        PQclear(res);
    return rc;
}

/* The tables, made when missing; a waiters' table of an earlier version
 * gets its column since. */
static int ensure_table(dlock__pgstore *p, int64_t deadline)
{
    pthread_mutex_lock(&p->mu);
    int ready = p->table_ready;
    pthread_mutex_unlock(&p->mu);
    if (ready)
        return DLOCK_OK;
    int lacks;
    int rc = look_tables(p, deadline, &lacks);
    if (rc == DLOCK_OK && lacks == DLOCK__SQLT_LACKS_TABLES) {
        rc = schema_step(p, dlock__sqlt_schema(D), deadline, "creating dlock's table",
                         "the role needs CREATE on the schema, or an administrator creates the "
                         "tables " DLOCK__SQLT_TABLE " and " DLOCK__SQLT_WAIT);
        /* a waiters' table may have been there; and two clients creating a
         * table at once: one fails (a duplicate row of pg_type) where the
         * other made it */
        int made = rc;
        if (rc == DLOCK_OK || rc == DLOCK_ESERVER)
            rc = look_tables(p, deadline, &lacks);
        if (rc == DLOCK_OK && made != DLOCK_OK && lacks == DLOCK__SQLT_LACKS_TABLES)
            rc = made;
    }
    if (rc == DLOCK_OK && lacks == DLOCK__SQLT_LACKS_SINCE)
        rc = schema_step(p, dlock__sqlt_upgrade(D), deadline,
                         "adding the column since to " DLOCK__SQLT_WAIT,
                         "the table " DLOCK__SQLT_WAIT " of an earlier dlock needs the column "
                         "since: the role must own it once, or an administrator adds it");
    if (rc != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&p->mu);
    p->table_ready = 1;
    pthread_mutex_unlock(&p->mu);
    return DLOCK_OK;
}

/* The tables gone under a running client (a database wiped, or the
 * tables dropped: the fault suite's restart with its data wiped, after
 * which every request failed until a new client came): made again, the
 * session mode's too (the take's guard reads them), so that the request
 * can be tried once more. */
static int remake_tables(dlock__pgstore *p, int64_t deadline)
{
    pthread_mutex_lock(&p->mu);
    p->table_ready = 0;
    pthread_mutex_unlock(&p->mu);
    dlock__pgconn *c;
    int rc = dlock__pg_get(p, deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__pg_make_tables(p, c, deadline);
    dlock__pg_done(p, c, rc != DLOCK_EUNREACHABLE);
    return rc == DLOCK_OK ? ensure_table(p, deadline) : rc;
}

/* A request (as exchange) once the tables are there, tried again once
 * when they are gone (SQLSTATE 42P01: nothing ran). */
static int run_on(dlock__pgstore *p, unsigned which, const char *sql, int nparams,
                  const char *const *params, int64_t deadline, PGresult **res, const char *what)
{
    char state[6] = "";
    *res = NULL;
    int rc = ensure_table(p, deadline);
    if (rc == DLOCK_OK)
        rc = exchange(p, which, sql, nparams, params, deadline, res, what, state);
    if (rc == DLOCK_ESERVER && strcmp(state, "42P01") == 0) {
        rc = remake_tables(p, deadline);
        if (rc == DLOCK_OK)
            rc = exchange(p, which, sql, nparams, params, deadline, res, what, NULL);
    }
    return rc;
}

int dlock__pgt_ready(dlock__pgstore *p, int64_t deadline_us)
{
    return ensure_table(p, deadline_us);
}

int dlock__pgt_remake(dlock__pgstore *p, int64_t deadline_us)
{
    return remake_tables(p, deadline_us);
}

int dlock__pgt_request(dlock__pgstore *p, char *sql, int64_t deadline_us, PGresult **res,
                       const char *what)
{
    *res = NULL;
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = run_on(p, NOT_PREPARED, sql, 0, NULL, deadline_us, res, what);
    free(sql);
    return rc;
}

/* A request of sql as text (freed here). */
static int run(dlock__pgstore *p, char *sql, int64_t deadline, PGresult **res, const char *what)
{
    *res = NULL;
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = run_on(p, NOT_PREPARED, sql, 0, NULL, deadline, res, what);
    free(sql);
    return rc;
}

/* The take ($1 the name's bytes, $2 the owner token's, $3 the owner info,
 * $4 the lease in µs, $5 the advisory key; for a try $6 the owner of the
 * caller's waiter row (wait_param: a poller's own row is not an older
 * waiter's), for a caller that waits $6 its waiter lease in µs and $7
 * that owner), the release and the hand-over ($1, $2), a waiter's leave
 * ($1, $2 its waiter row's owner, $3 its lock owner; a writer's, [1], $4
 * its token). */
static char *take_sql[2], *release_sql, *handover_sql, *leave_sql[2];
static int statements_made;
static pthread_once_t statements_once = PTHREAD_ONCE_INIT;

static void make_statements(void)
{
    take_sql[0] = dlock__sqlt_take_expr(D, "$1::bytea", "$1::bytea", "$2::bytea", "$3::text",
                                        "$4::bigint", NULL, "$6::bytea", DLOCK__PGT_SESSION_GUARD);
    take_sql[1] =
        dlock__sqlt_take_expr(D, "$1::bytea", "$1::bytea", "$2::bytea", "$3::text", "$4::bigint",
                              "$6::bigint", "$7::bytea", DLOCK__PGT_SESSION_GUARD);
    release_sql = dlock__sqlt_release(D, "$1::bytea", "$2::bytea");
    handover_sql = dlock__sqlt_pg_handover("$1::bytea", "$2::bytea");
    leave_sql[0] = dlock__sqlt_pg_leave("$1::bytea", "$2::bytea", "$3::bytea", NULL);
    /* a writer's: its owner's readers ($4 its token) */
    leave_sql[1] = dlock__sqlt_pg_leave("$1::bytea", "$2::bytea", "$3::bytea",
                                        "SELECT max(expires) FROM " DLOCK__PGT_SHARE
                                        " WHERE name = $1::bytea AND owner = "
                                        "$4::bytea AND expires > now()");
    statements_made = take_sql[0] != NULL && take_sql[1] != NULL && release_sql != NULL &&
                      handover_sql != NULL && leave_sql[0] != NULL && leave_sql[1] != NULL;
}

/* A prepared statement once the tables are there. */
static int run_prepared(dlock__pgstore *p, unsigned which, int nparams, const char *const *params,
                        int64_t deadline, PGresult **res, const char *what)
{
    *res = NULL;
    pthread_once(&statements_once, make_statements);
    if (!statements_made)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    const char *sql = which == PREP_RELEASE    ? release_sql
                      : which == PREP_HANDOVER ? handover_sql
                      : which == LEAVE         ? leave_sql[nparams > 3]
                                               : take_sql[which == PREP_TAKE_WAIT];
    return run_on(p, which, sql, nparams, params, deadline, res, what);
}

/* A step after the statement that must come first in its transaction, in
 * one pipeline: a take after its guard (DLOCK__PGT_GUARD_SQL, on the
 * advisory key, params[4]); a hand-over or a leave after the row's lock
 * (DLOCK__PGT_LOCK_ROW_SQL, params[0]: the two are in turn, and the one
 * after sees what the other did; the hand-over never picks a waiter whose
 * leave is done, and a leave finds a row handed to it). *res is the
 * step's answer, or the first one's error (the step did not run then). */
static int pipeline_of(dlock__pgstore *p, dlock__pgconn *c, unsigned which, const char *sql,
                       int nparams, const char *const *params, int64_t deadline, PGresult **res)
{
    int take = which == PREP_TAKE_TRY || which == PREP_TAKE_WAIT;
    /* a leave is seldom: sent as text, not prepared (a round trip the
     * first time on each connection, which a wait given up on a slow link
     * cannot spare) */
    unsigned lock_row = which == LEAVE ? DLOCK__PG_UNNAMED : DLOCK__PGT_PREP_LOCK_ROW;
    const char *lead[1] = {take ? params[4] : params[0]};
    dlock__pg_stmt st[2] = {take ? (dlock__pg_stmt){PREP_TAKE_GUARD, DLOCK__PGT_GUARD_SQL, 1, lead}
                                 : (dlock__pg_stmt){lock_row, DLOCK__PGT_LOCK_ROW_SQL, 1, lead},
                            {which == LEAVE ? DLOCK__PG_UNNAMED : which, sql, nparams, params}};
    PGresult *out[2];
    int rc = dlock__pg_exec_pipeline(p, c, 2, st, deadline, NULL, NULL, NULL, out);
    if (rc != DLOCK_OK)
        return rc;
    /* the first error (a failed PREPARE leaves the later ones NULL) */
    int first = out[0] == NULL || PQresultStatus(out[0]) == PGRES_TUPLES_OK ? 1 : 0;
    *res = out[first];
    PQclear(out[1 - first]);
    if (*res == NULL)
        return dlock__fail(DLOCK_EPROTO, "%s: no answer to the %s", p->label,
                           take ? "take" : "hand-over or leave");
    return DLOCK_OK;
}

/* text's bytes as a bytea parameter (its text form, \x and hex), malloc'd. */
static char *bytea_param(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(2 * n + 3);
    if (out == NULL)
        return NULL;
    out[0] = '\\';
    out[1] = 'x';
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 + 2 * i, 3, "%02x", (unsigned char) text[i]);
    out[2 + 2 * n] = '\0';
    return out;
}

/* ---------------------------------------------------------------- kinds */

static int kind_of(const dlock__pglock *l)
{
    switch (l->base.spec.kind) {
    case DLOCK__READ:
        return 'r';
    case DLOCK__WRITE:
        return 'w';
    case DLOCK__SEMAPHORE:
        return 's';
    default:
        return 'm';
    }
}

static int shared_kind(const dlock__pglock *l)
{
    return l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__SEMAPHORE;
}

/* The owner a row of l names for token: a writer's is "w:" and its token. */
static char *owner_param(const dlock__pglock *l, const char *token)
{
    size_t len = strlen(DLOCK__SQLT_WRITER) + strlen(token) + 1;
    char *own = malloc(len), *hex = NULL;
    if (own != NULL) {
        snprintf(own, len, "%s%s", l->base.spec.kind == DLOCK__WRITE ? DLOCK__SQLT_WRITER : "",
                 token);
        hex = bytea_param(own);
    }
    free(own);
    return hex;
}

/* The owner of l's waiter row for token, as a parameter: a writer's is
 * its lock owner, a mutex's "m:" and its token (sqltable.h:
 * DLOCK__SQLT_MUTEX_WAIT), so that a release hands the row only to a
 * waiter of an exclusive kind. */
static char *wait_param(const dlock__pglock *l, const char *token)
{
    size_t len = strlen(DLOCK__SQLT_MUTEX_WAIT) + strlen(token) + 1;
    char *own = malloc(len), *hex = NULL;
    if (own != NULL) {
        snprintf(own, len, "%s%s",
                 l->base.spec.kind == DLOCK__WRITE ? DLOCK__SQLT_WRITER : DLOCK__SQLT_MUTEX_WAIT,
                 token);
        hex = bytea_param(own);
    }
    free(own);
    return hex;
}

/* Whether an owner asking for l's name (token its token) holds it as
 * another kind already (dlock__sqlt_holds_as_other); when shared holders
 * of another kind hold it, whether the owner is one of them (shares: the
 * take's answer said so, or NULL: not known, looked up). */
static int holds_as_other(dlock__pgstore *p, dlock__pglock *l, const char *row, const char *token,
                          const char *shares, int64_t deadline_us)
{
    int self = dlock__sqlt_holds_as_other(row, token, kind_of(l));
    if (self >= 0)
        return self;
    if (shares != NULL)
        return strcmp(shares, "1") == 0;
    PGresult *res;
    if (dlock__pgts_readers(p, l, deadline_us, &res) != DLOCK_OK)
        return 0; /* not known: held (its holder tells at the next try) */
    int mine = 0;
    for (int i = 0; i < PQntuples(res) && !mine; i++)
        mine = strcmp(PQgetvalue(res, i, 0), token) == 0;
    PQclear(res);
    return mine;
}

/* ---------------------------------------------------------------- a lock's life */

/* A take's answer (res: fence, mine, ms left, waiters ahead, the guard's
 * verdict, the row's owner, [whether this owner holds a shared row of
 * it]) into the attempt; woken: the waiter is watched for notices. */
static int took(dlock__pgstore *p, dlock__pglock *l, dlock__attempt *a, PGresult *res, int woken)
{
    const char *guard = value(res, 0, 4);
    if (guard == NULL || strcmp(guard, "1") != 0) {
        a->outcome = DLOCK__HELD; /* by a session (pg.c): no lease to tell */
        a->next = DLOCK__NEXT_POLL;
        a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
        /* said so: a semaphore's refusal would name its permits, none of
         * which may be in use (a new user's trial) */
        if (l->base.spec.kind != DLOCK__MUTEX && l->base.spec.kind != DLOCK__FAIR)
            a->held_why = "session mode holds it (an advisory lock of the name, or a lease a "
                          "session holder may still count on: see the URL without ?mode=table)";
        return DLOCK_OK;
    }
    uint64_t fence;
    int64_t left_ms;
    const char *row = value(res, 0, 5);
    if (dlock__sqlt_taken(value(res, 0, 0), value(res, 0, 1), value(res, 0, 2), value(res, 0, 3),
                          a->wait, &fence, &left_ms)) {
        a->outcome = DLOCK__TAKEN;
        a->fence = fence;
        a->session = NULL;
        if (woken)
            dlock__pgl_unwatch(p->listen, a->token);
        return DLOCK_OK;
    }
    if (left_ms > 0 &&
        holds_as_other(p, l, row, a->token, PQnfields(res) > 6 ? value(res, 0, 6) : NULL,
                       a->deadline_us)) {
        if (woken)
            dlock__pgl_unwatch(p->listen, a->token);
        return dlock__sqlt_refuse_self(l->name, row, kind_of(l));
    }
    const char *t = NULL;
    int kind = left_ms > 0 ? dlock__sqlt_holder_kind(row, &t) : 0;
    int rc = dlock__sqlt_check_permits(l->name, kind, t, l->base.spec.kind == DLOCK__SEMAPHORE,
                                       l->base.spec.permits);
    if (rc != DLOCK_OK) {
        if (woken)
            dlock__pgl_unwatch(p->listen, a->token);
        return rc;
    }
    /* held, or free but an older waiter's (no lease to tell): asked again
     * when a release is notified, or within the lease left, or soon near
     * the head of the line; its row kept meanwhile by the renewer (a
     * waiter that cannot listen polls, keeping it) */
    const char *left = value(res, 0, 2);
    int live = left != NULL && strtoll(left, NULL, 10) > 0; /* a live holder's lease */
    a->outcome = woken && live ? DLOCK__QUEUED : DLOCK__HELD;
    a->keep_place = a->outcome == DLOCK__QUEUED;
    a->in_line = a->wait && a->outcome == DLOCK__HELD; /* its waiter row */
    a->next = a->outcome == DLOCK__QUEUED              ? DLOCK__NEXT_RETRY
              : a->wait && p->listen != NULL && !woken ? DLOCK__NEXT_PREPARE
                                                       : DLOCK__NEXT_POLL;
    a->holder_ttl_ms = left_ms >= 0 ? left_ms : DLOCK__TTL_UNKNOWN;
    /* a waiter queued behind a mutex or a writer parks at most its waiter
     * lease: a release may hand the row to an older waiter that never
     * takes it (dead, frozen), for the rest of that one's waiter row, and
     * wakes no one else (shared holders are never handed a row) */
    int64_t wl = p->base.host.cfg->waiter_lease_ms;
    if (a->outcome == DLOCK__QUEUED && (kind == 'm' || kind == 'w') && wl > 0 &&
        (a->holder_ttl_ms < 0 || a->holder_ttl_ms > wl))
        a->holder_ttl_ms = wl;
    a->held_as = dlock__sqlt_held_as(kind, kind_of(l));
    a->held_why = dlock__sqlt_held_why(kind, kind_of(l), value(res, 0, 3));
    if (a->held_why != NULL && !a->wait)
        a->holder_ttl_ms = DLOCK__TTL_UNKNOWN; /* (the readers' lease is not when it frees) */
    return DLOCK_OK;
}

int dlock__pgt_acquire(dlock__pgstore *p, dlock__pglock *l, dlock__attempt *a)
{
    PGresult *res = NULL;
    /* A waiter woken by notices (listen.c) is watched before it asks, so
     * that a release answered meanwhile wakes it too */
    int woken = a->wait && p->listen != NULL && dlock__pgl_ready(p->listen);
    if (woken) {
        char tag[DLOCK__PGL_TAG_MAX];
        dlock__pgt_tag(l->name, tag);
        dlock__pgl_watch(p->listen, tag, a->token);
    }
    int rc;
    if (shared_kind(l)) {
        rc = dlock__pgts_take(p, l, a, &res);
    } else {
        char lease_us[24], wait_us[24];
        snprintf(lease_us, sizeof lease_us, "%lld", (long long) a->lease_ms * 1000);
        snprintf(wait_us, sizeof wait_us, "%lld",
                 (long long) (a->wait ? p->base.host.cfg->waiter_lease_ms : 0) * 1000);
        int waits = a->wait && p->base.host.cfg->waiter_lease_ms > 0;
        /* (a writer's release looks at its owner's readers: their table
         * made first) */
        rc = l->base.spec.kind == DLOCK__WRITE ? dlock__pgts_ready(p, a->deadline_us) : DLOCK_OK;
        char *owner_hex = rc == DLOCK_OK ? owner_param(l, a->token) : NULL;
        char *wait_hex = rc == DLOCK_OK ? wait_param(l, a->token) : NULL;
        const char *params[7] = {l->name_hex, owner_hex, p->base.host.cfg->owner_info, lease_us,
                                 l->key_text};
        params[5] = waits ? wait_us : wait_hex; /* (take_sql) */
        params[6] = wait_hex;
        if (rc == DLOCK_OK)
            rc = owner_hex != NULL && wait_hex != NULL
                     ? run_prepared(p, waits ? PREP_TAKE_WAIT : PREP_TAKE_TRY, waits ? 7 : 6,
                                    params, a->deadline_us, &res, "taking the lock's row")
                     : dlock__fail(DLOCK_ENOMEM, "out of memory");
        free(owner_hex);
        free(wait_hex);
    }
    if (rc == DLOCK_OK)
        rc = took(p, l, a, res, woken);
    else if (woken)
        dlock__pgl_unwatch(p->listen, a->token);
    PQclear(res);
    return rc;
}

int dlock__pgt_cancel(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t deadline_us)
{
    PGresult *res;
    if (p->listen != NULL)
        dlock__pgl_unwatch(p->listen, token);
    int rc;
    if (shared_kind(l)) {
        char *owner = dlock__pgt_bytea(token);
        rc = run(p, owner != NULL ? dlock__sqlt_leave(D, l->key_lit, owner) : NULL, deadline_us,
                 &res, "leaving the waiters");
        free(owner);
    } else {
        /* a row handed to it meanwhile passed on (sqltable.h), after the
         * row's lock (pipeline_of) */
        char *owner = owner_param(l, token), *waiter = wait_param(l, token);
        char *bare = bytea_param(token);
        const char *params[4] = {l->name_hex, waiter, owner, bare};
        int writer = l->base.spec.kind == DLOCK__WRITE;
        rc = owner != NULL && waiter != NULL && bare != NULL
                 ? run_prepared(p, LEAVE, writer ? 4 : 3, params, deadline_us, &res,
                                "leaving the waiters")
                 : dlock__fail(DLOCK_ENOMEM, "out of memory");
        free(owner);
        free(waiter);
        free(bare);
    }
    if (rc == DLOCK_OK)
        PQclear(res);
    return rc;
}

int dlock__pgt_release(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t deadline_us)
{
    if (shared_kind(l))
        return dlock__pgts_release(p, l, token, deadline_us);
    if (l->base.spec.kind == DLOCK__WRITE)
        return dlock__pgts_write_release(p, l, token, deadline_us);
    /* The plain release, unless the last one handed the row over (a lock
     * that others wait for: l->handing): it frees the row when nobody
     * waits, else leaves it (still the caller's), and the hand-over
     * follows in a second request (sqltable.h; README.md, "The
     * hand-over") */
    PGresult *res = NULL;
    char *owner_hex = bytea_param(token);
    const char *params[2] = {l->name_hex, owner_hex};
    int handover = l->handing;
    int rc = owner_hex != NULL ? run_prepared(p, handover ? PREP_HANDOVER : PREP_RELEASE, 2, params,
                                              deadline_us, &res, "releasing the lock's row")
                               : dlock__fail(DLOCK_ENOMEM, "out of memory");
    /* the plain release left the row, still the caller's: a waiter is there */
    const char *matched = value(res, 0, 0), *holder = value(res, 0, 1);
    if (rc == DLOCK_OK && !handover && matched != NULL && strcmp(matched, "0") == 0 &&
        holder != NULL && strcmp(holder, token) == 0) {
        PQclear(res);
        handover = 1;
        rc = run_prepared(p, PREP_HANDOVER, 2, params, deadline_us, &res,
                          "handing the lock's row over");
    }
    free(owner_hex);
    if (rc != DLOCK_OK)
        return rc;
    const char *handed = value(res, 0, 4);
    l->handing = handover && handed != NULL && strcmp(handed, "1") == 0;
    const char *n = value(res, 0, 0);
    if (n == NULL || strcmp(n, "1") != 0)
        rc = value(res, 0, 1) != NULL
                 ? dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is held by someone else", l->name)
                 : dlock__fail(DLOCK_ELOST,
                               "lock '%s' was not held by this owner any more (its lease ran "
                               "out, or it was force-unlocked)",
                               l->name);
    PQclear(res);
    return rc;
}

int dlock__pgt_extend(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t lease_ms,
                      int at_least, int64_t deadline_us)
{
    if (shared_kind(l) || l->base.spec.kind == DLOCK__WRITE)
        return dlock__pgts_extend(p, l, token, lease_ms, at_least, deadline_us);
    PGresult *res;
    char *owner = dlock__pgt_bytea(token);
    char *sql = owner != NULL ? dlock__sqlt_extend(D, l->key_lit, owner, lease_ms, at_least) : NULL;
    free(owner);
    int rc = run(p, sql, deadline_us, &res, "extending the lock's lease");
    if (rc != DLOCK_OK)
        return rc;
    const char *v = value(res, 0, 0);
    if (v == NULL || strcmp(v, "1") != 0)
        rc = dlock__fail(DLOCK_ELOST,
                         "lock '%s' is not held by this owner any more (its lease ran out, or it "
                         "was force-unlocked)",
                         l->name);
    PQclear(res);
    return rc;
}

int dlock__pgt_renew(dlock__pgstore *p, dlock__sqlt_hold *h, size_t n, int waits,
                     int64_t deadline_us)
{
    PGresult *res;
    int rc = run(p, waits ? dlock__sqlt_renew_waits(D, h, n) : dlock__sqlt_renew(D, h, n),
                 deadline_us, &res, waits ? "keeping waiters' places" : "renewing leases");
    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < PQntuples(res); i++)
        dlock__sqlt_renewed(h, n, value(res, i, 0), value(res, i, 1));
    PQclear(res);
    return DLOCK_OK;
}

/* (owner, info, fence, ms left, waiters) of the lock; *held: a live holder. */
static int row_of(dlock__pgstore *p, const char *key_lit, int64_t deadline, PGresult **res,
                  int *held)
{
    int rc = run(p, dlock__sqlt_query(D, key_lit), deadline, res, "reading the lock's row");
    if (rc != DLOCK_OK)
        return rc;
    const char *owner = value(*res, 0, 0), *left = value(*res, 0, 3);
    *held = owner != NULL && owner[0] != '\0' && left != NULL && strtoll(left, NULL, 10) > 0;
    return DLOCK_OK;
}

/* The holder's kind of a live row (dlock__sqlt_holder_kind), 0 when it is not l's
 * kind's (one name is one lock: a holder of another kind is not this
 * lock's; asked as that kind, it is); any: every kind, as a mutex's. */
static int row_kind(const dlock__pglock *l, int any, const char *owner, const char **token)
{
    int kind = dlock__sqlt_holder_kind(owner, token);
    if (!any && kind != 0 && dlock__sqlt_group(kind) != dlock__sqlt_group(kind_of(l)))
        return 0;
    return kind;
}

/* How the session URL (any) names a table row's shared holders. */
static const char *shared_words(int kind)
{
    return kind == 'r' ? "readers (table mode: ask its URL)"
                       : "a semaphore's holders (table mode: ask its URL)";
}

int dlock__pgt_query(dlock__pgstore *p, dlock__pglock *l, int any, dlock_status *st,
                     int64_t deadline_us)
{
    PGresult *res;
    int held;
    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    int rc = row_of(p, l->key_lit, deadline_us, &res, &held);
    if (rc != DLOCK_OK)
        return rc;
    const char *fence = value(res, 0, 2), *waiters = value(res, 0, 4), *token;
    st->last_fence = fence != NULL ? strtoull(fence, NULL, 10) : 0;
    st->waiters = waiters != NULL ? (unsigned) strtoul(waiters, NULL, 10) : 0;
    int kind = held ? row_kind(l, any, value(res, 0, 0), &token) : 0;
    int shared = kind == 'r' || kind == 's';
    if (kind != 0) {
        st->held = 1;
        st->holds = any || !shared;
        st->lease_ms = strtoll(value(res, 0, 3), NULL, 10);
        snprintf(st->owner, sizeof st->owner, "%s",
                 any && shared ? shared_words(kind)
                 : !shared     ? token
                               : "");
    }
    if (kind == 's' && !any)
        st->permits = (unsigned) strtoul(token, NULL, 10);
    PQclear(res);
    if (!any && (shared || kind == 'w')) {
        /* the readers (beside the owner's own write: a downgrade), the
         * semaphore's holders and the permits they hold */
        rc = dlock__pgts_readers(p, l, deadline_us, &res);
        for (int i = 0; rc == DLOCK_OK && i < PQntuples(res); i++) {
            st->shared++;
            if (kind == 's')
                st->permits_used += (unsigned) strtoul(PQgetvalue(res, i, 2), NULL, 10);
        }
        if (rc == DLOCK_OK)
            PQclear(res);
    }
    return rc;
}

int dlock__pgt_holders(dlock__pgstore *p, dlock__pglock *l, int any, dlock__holder_sink sink,
                       void *arg, int64_t deadline_us)
{
    PGresult *res;
    int held, stop = 0;
    int rc = row_of(p, l->key_lit, deadline_us, &res, &held);
    if (rc != DLOCK_OK)
        return rc;
    const char *token;
    int kind = held ? row_kind(l, any, value(res, 0, 0), &token) : 0;
    if (kind == 'm' || kind == 'w' || (any && kind != 0)) {
        int shared = kind == 'r' || kind == 's';
        dlock__holder_raw h = {.owner = shared ? shared_words(kind) : token,
                               .count = 1,
                               .info = shared ? "" : value(res, 0, 1)};
        stop = sink(arg, &h);
    }
    PQclear(res);
    if (!stop && !any && (kind == 'r' || kind == 'w' || kind == 's') &&
        (rc = dlock__pgts_readers(p, l, deadline_us, &res)) == DLOCK_OK) {
        for (int i = 0; i < PQntuples(res); i++) {
            dlock__holder_raw h = {.owner = PQgetvalue(res, i, 0),
                                   .count = (unsigned) strtoul(PQgetvalue(res, i, 2), NULL, 10),
                                   .info = PQgetvalue(res, i, 1)};
            if (sink(arg, &h) != 0)
                break;
        }
        PQclear(res);
    }
    return rc;
}

/* The row's holder cleared (its fence kept): the holder finds it at its
 * next renewal, and the next taker takes the row at once. */
int dlock__pgt_force_unlock(dlock__pgstore *p, dlock__pglock *l, int any, int64_t deadline_us)
{
    return dlock__pgts_force(p, l, any ? 0 : dlock__sqlt_group(kind_of(l)), deadline_us);
}

int dlock__pgt_list(dlock__pgstore *p, const char *prefix, int kinds, dlock__name_sink sink,
                    void *arg, int64_t deadline_us)
{
    PGresult *res;
    char *lit = dlock__pgt_bytea(prefix);
    if (lit == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *own = dlock__sqlt_list(D, lit), *sql = NULL;
    if (own != NULL) {
        size_t len = strlen(own) + 2 * strlen(lit) + strlen(DLOCK__PG_SESSION_LIVE) +
                     strlen(DLOCK__PG_RW_HOLDS) + 300;
        sql = malloc(len);
        if (sql != NULL)
            /* each name once, as the read-write lock or the semaphore
             * when it holds it: table mode's kinds through the table URL,
             * session mode's through the session URL (each URL's status
             * sees the other mode's holder as a mutex's) */
            snprintf(sql, len,
                     "SELECT n, max(k) FROM (SELECT n, %s FROM (%s) AS t(n, k) UNION SELECT "
                     "f.name, CASE WHEN %s THEN 1 ELSE 0 END FROM dlock_fence f WHERE "
                     "substring(convert_to(f.name, 'UTF8') FROM 1 FOR length(%s)) = %s "
                     "AND " DLOCK__PG_SESSION_LIVE ") AS x(n, k) GROUP BY n",
                     kinds ? "0" : "k", own, kinds ? DLOCK__PG_RW_HOLDS : "false", lit, lit);
        free(own);
    }
    int rc = run(p, sql, deadline_us, &res, "listing the locks held");
    free(lit);
    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *v = value(res, i, 0), *k = value(res, i, 1);
        enum dlock__kind kind = k == NULL             ? DLOCK__MUTEX
                                : strcmp(k, "2") == 0 ? DLOCK__SEMAPHORE
                                : strcmp(k, "1") == 0 ? DLOCK__WRITE
                                                      : DLOCK__MUTEX;
        if (v != NULL && sink(arg, v, kind) != 0)
            break;
    }
    PQclear(res);
    return DLOCK_OK;
}
