/* SPDX-License-Identifier: MIT */
/* table.c - the MariaDB/MySQL backend's table mode (mode=table): a lock is
 * a row of dlock's lock table, dlock_lock, with its holder, its fence and a
 * lease on the server's clock. The statements and their answers are
 * ../sqltable/ (shared with the other SQL stores); this file runs them on
 * the store's pooled connections (conn.c).
 *
 * No hold depends on a connection: every request takes any idle connection
 * of the pool and gives it back, so many locks share a few connections (a
 * hold that rings a bell keeps one: bell.c). A waiter polls (the core's
 * backoff, bounded by the holder's lease left) or waits for a bell;
 * the renewer renews every table hold of the client in one request. A
 * holder whose row was taken over (its lease ran out) or freed by an
 * operator finds it at its next renewal, extend or release: lost. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../sqltable/sqltable.h"
#include "my.h"

#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D DLOCK__SQLT_MARIADB

/* What dlock's tables lack (dlock__sqlt_lacks) into *lacks. */
static int look_tables(dlock__mystore *p, int64_t deadline, int *lacks)
{
    char *sql = dlock__sqlt_exists(D);
    dlock__myres res;
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__my_operate(p, sql, deadline, &res, "looking for dlock's table");
    free(sql);
    if (rc != DLOCK_OK)
        return rc;
    *lacks = dlock__sqlt_lacks(dlock__my_value(&res, 0, 0), dlock__my_value(&res, 0, 1));
    dlock__my_res_free(&res);
    return DLOCK_OK;
}

/* One step of the schema (sql, freed here); what is missing said when the
 * user may not make it. */
static int schema_step(dlock__mystore *p, char *sql, int64_t deadline, const char *what,
                       const char *needs)
{
    dlock__myres res;
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__my_operate(p, sql, deadline, &res, what);
    free(sql);
    if (rc == DLOCK_ESERVER) {
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        return dlock__fail(DLOCK_ESERVER, "%s; %s (its schema: src/backend/mysql/README.md)", why,
                           needs);
    }
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    return rc;
}

/* dlock_lock, created when missing: a user with DML rights on it but no
 * CREATE takes locks in a table made for it (README.md); a waiters' table
 * of an earlier version gets its column since. */
static int ensure_table(dlock__mystore *p, int64_t deadline)
{
    pthread_mutex_lock(&p->mu);
    int ready = p->schema_ready;
    pthread_mutex_unlock(&p->mu);
    if (ready)
        return DLOCK_OK;
    int lacks;
    int rc = look_tables(p, deadline, &lacks);
    if (rc == DLOCK_OK && lacks == DLOCK__SQLT_LACKS_TABLES) {
        rc = schema_step(p, dlock__sqlt_schema(D), deadline, "creating dlock's table",
                         "the user needs CREATE on the database, or an administrator creates "
                         "the tables " DLOCK__SQLT_TABLE " and " DLOCK__SQLT_WAIT);
        if (rc == DLOCK_OK)
            rc = look_tables(p, deadline, &lacks); /* a waiters' table may have been there */
    }
    if (rc == DLOCK_OK && lacks == DLOCK__SQLT_LACKS_SINCE)
        rc = schema_step(p, dlock__sqlt_upgrade(D), deadline,
                         "adding the column since to " DLOCK__SQLT_WAIT,
                         "the table " DLOCK__SQLT_WAIT " of an earlier dlock needs the column "
                         "since: the user needs ALTER on it once, or an administrator adds it");
    if (rc != DLOCK_OK)
        return rc;
    pthread_mutex_lock(&p->mu);
    p->schema_ready = 1;
    pthread_mutex_unlock(&p->mu);
    return DLOCK_OK;
}

int dlock__myt_remake(dlock__mystore *p, int64_t deadline_us)
{
    pthread_mutex_lock(&p->mu);
    p->schema_ready = 0;
    pthread_mutex_unlock(&p->mu);
    atomic_store(&p->other_table, 0);
    /* the shared holds' table too, when the client's statements name it
     * (a take's does once it is known to be there): else every take after
     * a wiped database failed on it (the fault suite, 600 s) */
    int shares = atomic_exchange(&p->share_table, 0) == 1;
    int rc = DLOCK_OK;
    if (p->table) {
        rc = ensure_table(p, deadline_us);
    } else {
        dlock__myres res;
        rc = dlock__my_operate(
            p, p->row ? DLOCK__MY_FENCE_SCHEMA "; " DLOCK__MY_ROW_SCHEMA : DLOCK__MY_FENCE_SCHEMA,
            deadline_us, &res, "making dlock's tables again");
        if (rc == DLOCK_OK) {
            dlock__my_res_free(&res);
            pthread_mutex_lock(&p->mu);
            p->schema_ready = 1;
            pthread_mutex_unlock(&p->mu);
        }
    }
    if (rc == DLOCK_OK)
        rc = dlock__myt_other_table(p, deadline_us);
    if (rc == DLOCK_OK && shares)
        rc = dlock__myt_share(p, deadline_us);
    return rc;
}

/* Whether a failed statement is worth sending again (twice at most): one
 * InnoDB chose as a deadlock's victim (1213: takers, waiters' rows and
 * renewals lock the same rows in different orders under contention)
 * changed nothing; so did one refused because a row it locked changed
 * after its transaction's snapshot (1020, with innodb_snapshot_isolation
 * on: a take's waiter rows, which a giving-up waiter deletes without the
 * name's GET_LOCK; its request is closed, which rolls it back: review42);
 * one that found a table gone (1146: the database was wiped or restored
 * under the client) finds it again once it is made. */
static int again(dlock__mystore *p, unsigned err, int64_t deadline)
{
    if (err == ER_LOCK_DEADLOCK || err == ER_CHECKREAD)
        return 1;
    return err == ER_NO_SUCH_TABLE && dlock__myt_remake(p, deadline) == DLOCK_OK;
}

/* Runs a request of the table (and frees sql): the table made first if
 * need be; sent again as again() says. */
static int run(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res, const char *what)
{
    memset(res, 0, sizeof *res);
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = ensure_table(p, deadline);
    for (int tries = 1; rc == DLOCK_OK; tries++) {
        rc = dlock__my_operate(p, sql, deadline, res, what);
        if (rc == DLOCK_ESERVER && tries < 3 && again(p, res->err, deadline))
            rc = DLOCK_OK;
        else
            break;
    }
    free(sql);
    return rc;
}

int dlock__myt_run(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res,
                   const char *what)
{
    return run(p, sql, deadline, res, what);
}

int dlock__myt_run_tx(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res,
                      const char *what)
{
    memset(res, 0, sizeof *res);
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int64_t cap = dlock__now_us() + p->timeout_ms * 1000;
    if (deadline > cap)
        deadline = cap;
    int rc = ensure_table(p, deadline);
    for (int tries = 1; rc == DLOCK_OK; tries++) {
        dlock__myconn *c;
        rc = dlock__my_get(p, deadline, &c);
        if (rc != DLOCK_OK)
            break;
        rc = dlock__my_exec(p, c, sql, deadline, NULL, NULL, res);
        if (rc != DLOCK_OK) {
            dlock__my_discard(p, c, "closed: a request got no answer");
            break;
        }
        if (res->err == 0) {
            dlock__my_put(p, c);
            break;
        }
        dlock__my_discard(p, c, "closed: a transaction of the lock table failed");
        if (tries < 3 && again(p, res->err, deadline)) {
            dlock__my_res_free(res);
            continue;
        }
        rc = dlock__my_fail(p, res, what);
        dlock__my_res_free(res);
    }
    free(sql);
    return rc;
}

int dlock__myt_other_table(dlock__mystore *p, int64_t deadline_us)
{
    if (atomic_load(&p->other_table) != 0)
        return DLOCK_OK;
    dlock__myres res;
    char *sql = p->table ? strdup(DLOCK__MY_FENCE_SCHEMA) : dlock__sqlt_schema(D);
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__my_operate(p, sql, deadline_us, &res, "making the other mode's table");
    free(sql);
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    if (rc == DLOCK_ESERVER) {
        /* not allowed to make it: it may be there all the same */
        rc = dlock__my_operate(p,
                               p->table ? "SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                                          "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dlock_fence'"
                                        : "SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                                          "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = "
                                          "'" DLOCK__SQLT_TABLE "'",
                               deadline_us, &res, "looking for the other mode's table");
        if (rc == DLOCK_OK) {
            const char *v = dlock__my_value(&res, 0, 0);
            atomic_store(&p->other_table, v != NULL && strcmp(v, "1") == 0 ? 1 : -1);
            dlock__my_res_free(&res);
        }
        return rc;
    }
    if (rc == DLOCK_OK)
        atomic_store(&p->other_table, 1);
    return rc;
}

int dlock__my_other_holder(dlock__mystore *p, dlock__mylock *l, int64_t deadline, dlock__myres *res,
                           dlock__myres *other, const char **owner, const char **info,
                           int64_t *lease_ms)
{
    char sql[DLOCK__MY_NAME_MAX * 8 + 400];
    memset(other, 0, sizeof *other);
    int rc = dlock__myt_other_table(p, deadline);
    if (rc != DLOCK_OK || atomic_load(&p->other_table) != 1) {
        if (rc != DLOCK_OK)
            dlock__my_res_free(res);
        return rc;
    }
    /* The other table's fence counter always, free or held (one name, one
     * fence sequence: status through every mode shows the highest any
     * mode issued; before, a free name's last fence was only the asking
     * mode's own counter, so table, session and row URLs each showed
     * another); its holder, when it has a live one. The lease left: a
     * row's, unless its holder's connection has the named lock (a session
     * holder alive: it holds as long as that). */
    if (p->table)
        snprintf(sql, sizeof sql,
                 "SELECT IF(f.expires > UTC_TIMESTAMP(6), f.owner, NULL), IF(f.expires > "
                 "UTC_TIMESTAMP(6), f.info, NULL), IF(IS_USED_LOCK(f.name) <=> f.conn, NULL, "
                 "CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), f.expires) / 1000)), f.fence "
                 "FROM (SELECT 1) d LEFT JOIN dlock_fence f ON f.name = %s",
                 l->lit);
    else
        snprintf(sql, sizeof sql,
                 "SELECT IF(t.owner <> '' AND t.expires > UTC_TIMESTAMP(6), CASE WHEN "
                 "LEFT(t.owner, 2) = '" DLOCK__SQLT_WRITER "' THEN SUBSTRING(t.owner, 3) WHEN "
                 "t.owner = '" DLOCK__SQLT_READERS "' THEN 'readers (table mode: ask its URL)' "
                 "WHEN LEFT(t.owner, 2) = '" DLOCK__SQLT_PERMITS "' THEN 'a semaphore''s "
                 "holders (table mode: ask its URL)' ELSE t.owner END, NULL), "
                 "t.info, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), t.expires) / 1000), "
                 "t.fence FROM (SELECT 1) d LEFT JOIN " DLOCK__SQLT_TABLE " t ON t.name = %s",
                 l->key_lit);
    rc = dlock__my_operate(p, sql, deadline, other, "reading the other mode's holder");
    if (rc != DLOCK_OK)
        dlock__my_res_free(res);
    else if (*owner == NULL && dlock__my_value(other, 0, 0) != NULL) {
        const char *left = dlock__my_value(other, 0, 2);
        *owner = dlock__my_value(other, 0, 0);
        *info = dlock__my_value(other, 0, 1);
        *lease_ms = left != NULL ? strtoll(left, NULL, 10) : -1;
    }
    return rc;
}

/* The grant's request, session and row modes' both (README.md, "The
 * grant"): under the name's GET_LOCK, and only while neither a lease of
 * dlock_fence's row nor table mode's holder of the name runs, the fence is
 * bumped above both tables' and the row's lease written for holder nonce
 * on connection conn. Nothing is written otherwise: a waiter beside
 * another mode's holder, or a dead holder's lease, consumes no fence and
 * writes nothing at its polls (the new-user trial: a session-mode waiter
 * beside a row-mode holder bumped the fence at every poll).
 *
 * Statements: 0 GET_LOCK (and the session variables reset); 1 the row
 * updated, when it exists; 2 the row inserted, when it did not (left out
 * without insert: a name's row, once made, stays, so a grant that has seen
 * it saves the statement; one that finds no row then answers -1 with the
 * GET_LOCK let go, and is sent again with it); 3 the answer — @dlock_w (1
 * if the row was written for nonce now, -1 no row), the fence (the row's,
 * written or not; NULL with no row), ms left of the row's lease before
 * the request (NULL with no row), and the GET_LOCK let go: always
 * (release), or unless the row was written (a poll that found the name
 * held needs no second round trip to let go).
 *
 * The answer comes from session variables the writes set (@dlock_w
 * written: -1 no row, 0 not written, 1 written; @dlock_f; @dlock_left),
 * not from a read of the table: an UPDATE of the row that exists (the
 * usual case) and no upsert, whose duplicate-key path and INSERT ...
 * SELECT reading its own table (a temporary table) cost about half a
 * grant's server time; the answer's own read of the row was another
 * fifth. The UPDATE's first assignment decides (they run left to right),
 * and every column follows it. The INSERT sets @dlock_w in its select
 * list, evaluated once for the row it inserts, not in its WHERE: the
 * optimizer evaluates a WHERE on DUAL once to plan and again to run, and
 * the second saw the first's assignment. */
static char *grant_sql(dlock__mystore *p, dlock__mylock *l, const char *take, const char *conn,
                       const char *nonce, const char *token, int release, int insert);

char *dlock__my_grant_sql(dlock__mystore *p, dlock__mylock *l, const char *wait_s, const char *conn,
                          const char *nonce, const char *token, int release, int insert)
{
    char take[DLOCK__MY_NAME_MAX * 8 + 100];
    snprintf(take, sizeof take, "GET_LOCK(%s, %s)", l->lit, wait_s);
    return grant_sql(p, l, take, conn, nonce, token, release, insert);
}

char *dlock__my_regrant_sql(dlock__mystore *p, dlock__mylock *l, const char *nap_s,
                            const char *nonce, const char *token)
{
    char take[DLOCK__MY_NAME_MAX * 8 + 100];
    snprintf(take, sizeof take, "(SLEEP(%s) = 0 AND IS_USED_LOCK(%s) = CONNECTION_ID())", nap_s,
             l->lit);
    return grant_sql(p, l, take, "CONNECTION_ID()", nonce, token, DLOCK__MY_KEEP_PLACE, 0);
}

static char *grant_sql(dlock__mystore *p, dlock__mylock *l, const char *take, const char *conn,
                       const char *nonce, const char *token, int release, int insert)
{
    char table_free[DLOCK__MY_NAME_MAX * 8 + 200], table_fence[DLOCK__MY_NAME_MAX * 8 + 200];
    if (atomic_load(&p->other_table) == 1) {
        snprintf(table_free, sizeof table_free,
                 " AND NOT EXISTS (SELECT 1 FROM dlock_lock WHERE name = %s AND owner <> '' AND "
                 "expires > UTC_TIMESTAMP(6))",
                 l->key_lit);
        snprintf(table_fence, sizeof table_fence,
                 "COALESCE((SELECT fence FROM dlock_lock WHERE name = %s), 0) + 1", l->key_lit);
    } else {
        table_free[0] = '\0';
        snprintf(table_fence, sizeof table_fence, "1");
    }
    /* the UPDATE's both in one read of table mode's row: its fence, or -1
     * while a holder's lease runs there (@dlock_tf). A variable read in the
     * statement that sets it is typed by the value it had before: given
     * none (NULL), the fence computed from it was a DOUBLE
     * ("1.795846793712841e15", read as 1 by the client: test_cli's
     * force_unlock_any_mode). So the first statement gives every variable
     * an integer, and the fence is cast. */
    char upd_free[DLOCK__MY_NAME_MAX * 8 + 300], upd_fence[32];
    if (atomic_load(&p->other_table) == 1) {
        snprintf(upd_free, sizeof upd_free,
                 " AND (@dlock_tf := COALESCE((SELECT IF(owner <> '' AND expires > "
                 "UTC_TIMESTAMP(6), -1, fence) FROM dlock_lock WHERE name = %s), 0)) >= 0",
                 l->key_lit);
        snprintf(upd_fence, sizeof upd_fence, "@dlock_tf + 1");
    } else {
        upd_free[0] = '\0';
        snprintf(upd_fence, sizeof upd_fence, "1");
    }
    size_t len = strlen(take) + 14 * strlen(l->lit) + 4 * strlen(l->key_lit) +
                 2 * strlen(l->name_lit) + 2 * strlen(token) + 2 * strlen(p->info_lit) + 3600;
    char *sql = malloc(len);
    if (sql == NULL)
        return NULL;
    char release_lit[DLOCK__MY_NAME_MAX * 8 + 200];
    if (release == DLOCK__MY_LET_GO)
        snprintf(release_lit, sizeof release_lit, "RELEASE_LOCK(%s)", l->lit);
    else
        snprintf(release_lit, sizeof release_lit,
                 "IF(@dlock_w = 1%s, 0, IF(IS_USED_LOCK(%s) = CONNECTION_ID(), RELEASE_LOCK(%s), "
                 "0))",
                 release == DLOCK__MY_KEEP_PLACE ? " OR (@dlock_w = 0 AND @dlock_left > 0)" : "",
                 l->lit, l->lit);
    snprintf(sql, len,
             "SELECT %s, @dlock_w := -1, @dlock_f := CAST(NULL AS UNSIGNED), "
             "@dlock_left := CAST(NULL AS SIGNED), @dlock_tf := 0; "
             "UPDATE dlock_fence SET "
             "fence = IF(@dlock_w := (IS_USED_LOCK(%s) = CONNECTION_ID() AND expires <= "
             "UTC_TIMESTAMP(6)%s) IS TRUE, @dlock_f := CAST(GREATEST(fence + 1, %s) AS UNSIGNED), "
             "@dlock_f := fence), "
             "holder = IF(@dlock_w, '%s', holder), conn = IF(@dlock_w, %s, conn), "
             "owner = IF(@dlock_w, %s, owner), info = IF(@dlock_w, %s, info), "
             "lock_name = IF(@dlock_w, %s, lock_name), "
             "expires = IF(@dlock_w, UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, expires) "
             "WHERE name = %s AND (@dlock_left := CEIL(TIMESTAMPDIFF(MICROSECOND, "
             "UTC_TIMESTAMP(6), expires) / 1000)) IS NOT NULL; ",
             take, l->lit, upd_free, upd_fence, nonce, conn, token, p->info_lit, l->name_lit,
             p->lease_us, l->lit);
    size_t n = strlen(sql);
    if (insert)
        snprintf(sql + n, len - n,
                 "INSERT INTO dlock_fence (name, lock_name, fence, conn, holder, expires, owner, "
                 "info) SELECT %s, %s, IF(@dlock_w := 1, @dlock_f := %s, 0), %s, '%s', "
                 "UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, %s, %s FROM DUAL WHERE @dlock_w = "
                 "-1 AND IS_USED_LOCK(%s) = CONNECTION_ID()%s; ",
                 l->lit, l->name_lit, table_fence, conn, nonce, p->lease_us, token, p->info_lit,
                 l->lit, table_free);
    n = strlen(sql);
    snprintf(sql + n, len - n, "SELECT @dlock_w, CAST(@dlock_f AS UNSIGNED), @dlock_left, %s",
             release_lit);
    return sql;
}

/* One lock per name across the two modes (README.md): a take holds the
 * name's GET_LOCK (session mode's lock of the name: the same mapped name
 * as the row's key) while it writes the row, in the same request:
 *
 *   SELECT GET_LOCK(N, 0);
 *   SELECT (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE <the name is not
 *           free for a take>);
 *   <the take>;
 *   DO RELEASE_LOCK(N)
 *
 * The name is not free when GET_LOCK failed (a session holder has it, or
 * another take is writing the row) or a session holder's row lease still
 * runs (its connection dropped: it may not know yet). The second statement
 * then fails (1242: a subquery of two rows where one is wanted), and
 * nothing after it runs: the lock is held. A session grant takes GET_LOCK
 * first and then reads this table, so it sees every row written under it
 * (the write commits before the release).
 *
 * A waiter's take waits up to GUARD_WAIT for the GET_LOCK (the other
 * takes of the name are brief), a try's up to GUARD_TRY (at none, a
 * reader's try beside readers met a writer's poll in flight and was
 * refused as if a session held the name: test_mysql_table
 * reader_behind_writer_told, 2 runs in 6; a try of a name a session
 * holds answers that much later). Without it every
 * poll that met another poll's take in flight was "held by a session",
 * with no lease to tell, and went back to the core's longest step: with
 * the first in line polling often (../sqltable), the oldest waiter lost
 * most of its looks that way (8 clients on one name: 17 hand-overs a
 * second). */
#define GUARD_WAIT "0.05" /* seconds: GET_LOCK takes fractions (MariaDB) */
#define GUARD_TRY  "0.02"

char *dlock__myt_guard(dlock__mystore *p, dlock__mylock *l, int waits)
{
    int fence_table = atomic_load(&p->other_table) == 1;
    size_t len = 3 * strlen(l->lit) + 400;
    char *sql = malloc(len);
    if (sql == NULL)
        return NULL;
    snprintf(sql, len,
             "SELECT GET_LOCK(%s, %s); SELECT (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE NOT "
             "(IS_USED_LOCK(%s) <=> CONNECTION_ID())%s%s%s)",
             l->lit, waits ? GUARD_WAIT : GUARD_TRY, l->lit,
             fence_table ? " OR EXISTS (SELECT 1 FROM dlock_fence WHERE name = " : "",
             fence_table ? l->lit : "", fence_table ? " AND expires > UTC_TIMESTAMP(6))" : "");
    return sql;
}

/* Runs a guarded take (sql, freed here; the tables made first): DLOCK_OK
 * with *res, and *shut set when the name was not free for a take (nothing
 * written). A connection that may still hold the name's GET_LOCK (a
 * statement after it failed) is closed, never pooled. */
int dlock__myt_run_take(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res,
                        int *shut, unsigned bell_col, dlock__myconn **bell)
{
    dlock__myconn *c;
    *shut = 0;
    memset(res, 0, sizeof *res);
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int64_t cap = dlock__now_us() + p->timeout_ms * 1000;
    if (deadline > cap)
        deadline = cap;
    int rc = DLOCK_OK;
    for (int tries = 1; rc == DLOCK_OK; tries++) {
        rc = dlock__my_get(p, deadline, &c);
        if (rc != DLOCK_OK)
            break;
        rc = dlock__my_exec(p, c, sql, deadline, NULL, NULL, res);
        if (rc != DLOCK_OK) {
            dlock__my_discard(p, c, "closed: a request got no answer");
            break;
        }
        const char *got = dlock__my_value(res, 0, 0);
        int guarded = res->n == 1 && res->err == ER_SUBQUERY_NO_1_ROW;
        if (res->err == 0 || (guarded && got != NULL && strcmp(got, "1") != 0)) {
            /* done, or GET_LOCK said no and nothing else ran */
            *shut = res->err != 0;
            const char *rung = bell != NULL && res->err == 0
                                   ? dlock__my_value(res, DLOCK__MYT_ANSWER, bell_col)
                                   : NULL;
            if (rung != NULL && strcmp(rung, "1") == 0 && !dlock__my_kill_in_flight(c))
                *bell = c; /* it holds the hold's bell */
            else
                dlock__my_put(p, c);
            break;
        }
        if (guarded && got != NULL)
            *shut = 1; /* GET_LOCK was ours, but a session holder's row lease runs */
        dlock__my_discard(p, c, "closed: it may hold the name's GET_LOCK after a failed take");
        if (*shut)
            break;
        if (tries < 3 && again(p, res->err, deadline)) {
            dlock__my_res_free(res);
            continue;
        }
        rc = dlock__my_fail(p, res, "taking the lock's row");
        dlock__my_res_free(res);
    }
    free(sql);
    return rc;
}

/* ---------------------------------------------------------------- kinds */

int dlock__myt_kind_of(const dlock__mylock *l)
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

char *dlock__myt_owner(const dlock__mylock *l, const char *token)
{
    if (l->base.spec.kind != DLOCK__WRITE)
        return dlock__my_literal(token, 1);
    size_t len = strlen(DLOCK__SQLT_WRITER) + strlen(token) + 1;
    char *own = malloc(len), *lit = NULL;
    if (own != NULL) {
        snprintf(own, len, DLOCK__SQLT_WRITER "%s", token);
        lit = dlock__my_literal(own, 1);
    }
    free(own);
    return lit;
}

/* Whether the shared holds' table is in the URL's database (*there),
 * looked for, not made. */
static int share_there(dlock__mystore *p, int64_t deadline_us, int *there)
{
    dlock__myres res;
    *there = 0;
    int rc = dlock__my_operate(p,
                               "SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                               "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '" DLOCK__SQLT_SHARE "'",
                               deadline_us, &res,
                               "looking for dlock's table of shared holds (dlock_share)");
    if (rc != DLOCK_OK)
        return rc;
    const char *v = dlock__my_value(&res, 0, 0);
    *there = v != NULL && strcmp(v, "1") == 0;
    dlock__my_res_free(&res);
    return DLOCK_OK;
}

int dlock__myt_share(dlock__mystore *p, int64_t deadline_us)
{
    if (atomic_load(&p->share_table) == 1)
        return DLOCK_OK;
    dlock__myres res;
    char *sql = dlock__sqlt_share_schema(D);
    if (sql == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__my_operate(p, sql, deadline_us, &res,
                               "creating dlock's table of shared holds (dlock_share)");
    free(sql);
    if (rc == DLOCK_ESERVER) {
        /* not allowed to make it: an administrator may have */
        char why[600];
        snprintf(why, sizeof why, "%s", dlock_errmsg());
        int there;
        rc = share_there(p, deadline_us, &there);
        if (rc != DLOCK_OK)
            return rc;
        if (!there)
            return dlock__fail(
                DLOCK_ESERVER,
                "%s; the read-write lock and the semaphore need the table " DLOCK__SQLT_SHARE
                ": the user needs CREATE on the database, or an "
                "administrator creates it (its schema: "
                "src/backend/mysql/README.md in dlock's source)",
                why);
    } else if (rc != DLOCK_OK) {
        return rc;
    } else {
        dlock__my_res_free(&res);
    }
    /* The shared holds' transactions run under READ COMMITTED, which a
     * server logging statements (binlog_format=STATEMENT) refuses at
     * their first write (error 1665): found here, before anything is
     * held, once per store (a write lock taken there could not be let
     * go). The probe writes nothing. */
    rc = dlock__myt_run_tx(p,
                           strdup(DLOCK__SQLT_BEGIN "; DELETE FROM " DLOCK__SQLT_SHARE
                                                    " WHERE name = '' AND owner = ''; ROLLBACK"),
                           deadline_us, &res,
                           "trying a READ COMMITTED write, as the read-write lock and the "
                           "semaphore make");
    if (rc != DLOCK_OK)
        return rc;
    dlock__my_res_free(&res);
    atomic_store(&p->share_table, 1);
    return DLOCK_OK;
}

int dlock__myt_readers(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us, dlock__myres *res)
{
    int rc = dlock__myt_share(p, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    return dlock__myt_run(p, dlock__sqlt_readers(D, l->key_lit), deadline_us, res,
                          "reading the lock's readers");
}

/* "a, b" (either may be NULL), NULL when both are, or out of memory. */
static char *joined(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a != NULL ? strdup(a) : b != NULL ? strdup(b) : NULL;
    size_t n = strlen(a) + strlen(b) + 3;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s, %s", a, b);
    return s;
}

/* The take (its guard around it): l's row taken, or why not into a;
 * *ahead: the waiters ahead of the owner's (DLOCK__SQLT_NEAR_HEAD when not
 * known), *shut: the guard kept it out (another mode's holder). After a wait it rings a bell for
 * the next waiters (bell.c): its answer's last column, after the shares'. */
static int take(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a, const char *owner,
                long *ahead, int *shut_out)
{
    dlock__myres res;
    int shut = 0;
    char *token = dlock__my_literal(a->token, 1);
    char *first = dlock__myt_guard(p, l, a->wait), *sql = NULL, *reads = NULL;
    int shares = atomic_load(&p->share_table) == 1;
    if (token != NULL && shares)
        reads = dlock__sqlt_shares(D, l->key_lit, token); /* its own reader's row or permits */
    char *ring = l->waited && l->bell == NULL ? dlock__myb_take_column(owner) : NULL;
    char *more = joined(reads, ring);
    char *body = first != NULL && (reads != NULL || !shares) &&
                         (more != NULL || (reads == NULL && ring == NULL))
                     ? dlock__sqlt_take(D, l->key_lit, l->name_lit, owner, p->info_lit, a->lease_ms,
                                        a->wait ? p->base.host.cfg->waiter_lease_ms : 0, more)
                     : NULL;
    unsigned bell_col = reads != NULL ? 6 : 5;
    int bell = ring != NULL;
    free(token);
    free(reads);
    free(ring);
    free(more);
    size_t len = body != NULL ? strlen(first) + strlen(body) + strlen(l->lit) + 100 : 0;
    if (body != NULL && (sql = malloc(len)) != NULL)
        snprintf(sql, len, "%s; %s; DO RELEASE_LOCK(%s)", first, body, l->lit);
    free(first);
    free(body);
    dlock__myconn *rung = NULL;
    int64_t sent = dlock__now_us();
    int rc =
        dlock__myt_run_take(p, sql, a->deadline_us, &res, &shut, bell_col, bell ? &rung : NULL);
    if (rc != DLOCK_OK)
        return rc;
    /* answered: the waiter's row was kept from then at least (a take that
     * got no answer keeps nothing: the looks would count on a row that may
     * lapse in a long outage) */
    l->took_us = sent;
    *shut_out = shut;
    rc = dlock__myt_took(p, l, a, &res, shut);
    const char *n = shut ? NULL : dlock__my_value(&res, DLOCK__MYT_ANSWER, 3);
    *ahead = n != NULL ? strtol(n, NULL, 10) : DLOCK__SQLT_NEAR_HEAD;
    dlock__my_res_free(&res);
    if (rung != NULL) {
        if (rc == DLOCK_OK && a->outcome == DLOCK__TAKEN)
            dlock__myb_hold(l, rung);
        else
            dlock__my_discard(p, rung, "closed: it holds a bell of no hold");
    }
    return rc;
}

/* Held, and the waiter in line: looked at again within ttl_ms. */
static void in_line(dlock__attempt *a, int64_t ttl_ms)
{
    a->outcome = DLOCK__HELD;
    a->next = DLOCK__NEXT_POLL;
    a->in_line = 1;
    a->holder_ttl_ms = ttl_ms > 0 ? ttl_ms : DLOCK__TTL_UNKNOWN;
    a->held_as = DLOCK__HELD_AS_SAME;
    a->held_why = NULL;
}

#define CLAIMED_GROW_US 50000

/* The look of a waiter behind the free row's claimant (a read): 2 ms for
 * the next in line, twice as long each further back; twice as long again
 * for every 50 ms the row has been claimed (since_us: the first look that
 * found it so), a claimant that does not take (paused, dead) keeping the
 * name until its waiter row lapses. The core's step is bounded by it. */
static int64_t claimed_step_ms(long ahead, int64_t since_us)
{
    int64_t waited = since_us > 0 ? (dlock__now_us() - since_us) / CLAIMED_GROW_US : 0;
    int shift = (ahead <= 1  ? 0
                 : ahead > 6 ? 5
                             : (int) ahead - 1) +
                (waited > 5 ? 5 : (int) waited);
    int64_t step = (int64_t) 2 << shift;
    return step > 64 ? 64 : step;
}

#define QUICK_US 20000 /* a look that took longer: the take goes in the next attempt */

int dlock__myt_acquire(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a)
{
    int64_t start = dlock__now_us();
    /* a bell of an earlier hold, found lost (never released here) */
    dlock__myb_let_go(p, l, 0, a->deadline_us);
    /* the other table's state first: the guard's SQL depends on it */
    int rc = ensure_table(p, a->deadline_us);
    if (rc == DLOCK_OK)
        rc = dlock__myt_other_table(p, a->deadline_us);
    if (rc == DLOCK_OK && l->base.spec.kind == DLOCK__WRITE)
        rc = dlock__myt_share(p, a->deadline_us); /* its release looks there */
    if (rc != DLOCK_OK)
        return rc;
    char *owner = dlock__myt_owner(l, a->token);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int64_t left_ms;
    long ahead = l->ahead;
    int keeps_row = start - l->took_us < p->base.host.cfg->waiter_lease_ms * 1000 / 3;
    if (l->look && a->wait && keeps_row && !l->take_next) {
        /* A waiter looks (near the head of the line: waits for the
         * holder's bell), and takes only when it may: the others' takes,
         * each under the name's guard and writing, held the first in line
         * back (8 processes on one name: a take waited 2 to 8 ms for the
         * guard; 5 takes a hand-over) */
        int failed;
        int b = dlock__myb_wait(p, l, a, owner, l->ahead < DLOCK__SQLT_NEAR_HEAD, &left_ms, &ahead,
                                &failed);
        if (b == DLOCK__BELL_UNREACHED) {
            /* the store's silence is the attempt's (never "held") */
            free(owner);
            return failed;
        }
        l->claimed_us = b != DLOCK__BELL_CLAIMED ? 0 : l->claimed_us > 0 ? l->claimed_us : start;
        if (b == DLOCK__BELL_CLAIMED || b == DLOCK__BELL_NONE) {
            free(owner);
            l->ahead = ahead;
            in_line(a, b == DLOCK__BELL_CLAIMED ? claimed_step_ms(ahead, l->claimed_us) : left_ms);
            return DLOCK_OK;
        }
        int64_t now = dlock__now_us();
        if (now - start > QUICK_US) {
            /* it waited: the take goes in an attempt of its own, counted
             * from its own send (a grant's lease runs from there, and the
             * request has its own bound); at the wait's end, only when the
             * waiter's row needs it (else it looks again) */
            free(owner);
            l->ahead = ahead;
            l->take_next = b != DLOCK__BELL_END ||
                           now - l->took_us >= p->base.host.cfg->waiter_lease_ms * 1000 / 4;
            in_line(a, -1);
            a->next = DLOCK__NEXT_RETRY;
            a->news = b != DLOCK__BELL_FAILED;
            return DLOCK_OK;
        }
    }
    l->take_next = 0;
    int shut = 0;
    rc = take(p, l, a, owner, &ahead, &shut);
    l->waited = rc == DLOCK_OK && a->outcome == DLOCK__HELD && a->wait;
    /* (kept out by another mode's holder, the guard: no look, it says
     * nothing of that holder) */
    l->look = l->waited && !shut;
    /* (the next attempt looks, and near the head of the line waits for
     * the bell: this one returns first, so that the wait is said to be in
     * line, which the fault suite's fair-order check goes by) */
    l->ahead = ahead;
    free(owner);
    return rc;
}

/* Whether an owner asking for l's name (token its token) holds it as
 * another kind already (dlock__sqlt_holds_as_other); when shared holders
 * of another kind hold it, whether the owner is one of them (shares: the
 * take's answer). */
static int self_as_other(const dlock__mylock *l, const char *row, const char *token,
                         const char *shares)
{
    int self = dlock__sqlt_holds_as_other(row, token, dlock__myt_kind_of(l));
    return self >= 0 ? self : shares != NULL && strcmp(shares, "1") == 0;
}

int dlock__myt_took(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a, const dlock__myres *res,
                    int shut)
{
    (void) p;
    uint64_t fence;
    int64_t left_ms;
    const char *row = dlock__my_value(res, DLOCK__MYT_ANSWER, 4);
    if (shut) {
        /* held in session mode: its holder's lease is not in this table */
        a->outcome = DLOCK__HELD;
        a->next = DLOCK__NEXT_POLL;
        a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
    } else if (dlock__sqlt_taken(dlock__my_value(res, DLOCK__MYT_ANSWER, 0),
                                 dlock__my_value(res, DLOCK__MYT_ANSWER, 1),
                                 dlock__my_value(res, DLOCK__MYT_ANSWER, 2),
                                 dlock__my_value(res, DLOCK__MYT_ANSWER, 3), a->wait, &fence,
                                 &left_ms)) {
        a->outcome = DLOCK__TAKEN;
        a->fence = fence;
        a->session = NULL;
    } else if (left_ms > 0 &&
               self_as_other(l, row, a->token, dlock__my_value(res, DLOCK__MYT_ANSWER, 5))) {
        return dlock__sqlt_refuse_self(l->name, row, dlock__myt_kind_of(l));
    } else {
        /* held, or free but an older waiter's (no lease to tell): polled
         * again within the lease left, or soon near the head of the line */
        const char *t = NULL;
        int kind = left_ms > 0 ? dlock__sqlt_holder_kind(row, &t) : 0;
        int rc = dlock__sqlt_check_permits(l->name, kind, t, l->base.spec.kind == DLOCK__SEMAPHORE,
                                           l->base.spec.permits);
        if (rc != DLOCK_OK)
            return rc;
        a->outcome = DLOCK__HELD;
        a->next = DLOCK__NEXT_POLL;
        a->in_line = a->wait; /* its waiter row */
        a->holder_ttl_ms = left_ms >= 0 ? left_ms : DLOCK__TTL_UNKNOWN;
        a->held_as = dlock__sqlt_held_as(kind, dlock__myt_kind_of(l));
        a->held_why = dlock__sqlt_held_why(kind, dlock__myt_kind_of(l),
                                           dlock__my_value(res, DLOCK__MYT_ANSWER, 3));
        if (a->held_why != NULL && !a->wait)
            a->holder_ttl_ms = DLOCK__TTL_UNKNOWN; /* (the readers' lease is not when it frees) */
        const char *ahead = dlock__my_value(res, DLOCK__MYT_ANSWER, 3);
        if (a->held_why == NULL && !a->wait && left_ms < 0 && ahead != NULL &&
            strtol(ahead, NULL, 10) > 0)
            a->held_why = DLOCK__WHY_IN_LINE; /* (free: status says so) */
    }
    return DLOCK_OK;
}

int dlock__myt_cancel(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t deadline_us)
{
    l->waited = l->look = l->take_next = 0; /* (its next wait takes first: no row) */
    dlock__myres res;
    char *owner = dlock__myt_owner(l, token);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *sql = dlock__sqlt_leave(D, l->key_lit, owner);
    free(owner);
    int rc = run(p, sql, deadline_us, &res, "leaving the waiters");
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    return rc;
}

int dlock__myt_release(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t deadline_us)
{
    dlock__myres res;
    int write = l->base.spec.kind == DLOCK__WRITE;
    char *owner = dlock__my_literal(token, 1), *mine = dlock__myt_owner(l, token);
    char *sql = owner == NULL || mine == NULL ? NULL
                : write                       ? dlock__sqlt_write_release(D, l->key_lit, owner)
                                              : dlock__sqlt_release(D, l->key_lit, mine);
    free(owner);
    free(mine);
    int rc = write ? dlock__myt_run_tx(p, sql, deadline_us, &res, "releasing the write lock")
                   : run(p, sql, deadline_us, &res, "releasing the lock's row");
    dlock__myb_let_go(p, l, 0, deadline_us); /* after the row: its waiters find it let go */
    if (rc != DLOCK_OK)
        return rc;
    /* (the write's: its UPDATE and the holder now are statements 4 and 6) */
    if (res.affected[write ? 4 : 0] != 1)
        rc = dlock__my_value(&res, write ? 6 : 1, 0) != NULL
                 ? dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is held by someone else", l->name)
                 : dlock__fail(DLOCK_ELOST,
                               "lock '%s' was not held by this owner any more (its lease ran "
                               "out, or it was force-unlocked)",
                               l->name);
    dlock__my_res_free(&res);
    return rc;
}

/* A writer's lease set (its renewal, dlock_renew, dlock_extend: now plus a
 * lease) is not the whole row's: its owner may read beside it (a
 * downgrade), and the row must not end before that reader's row (a fixed
 * lease of its own, dlock_acquire_for). So, in one transaction with the
 * lease set (sql, freed here: its statements, the name's rows locked by
 * the first), each writer's row of keys (a list of literals) is raised to
 * its owner's live reader's end: the row stays the writer's until then,
 * or until it lets go. Statements 0 and 1 begin it (DLOCK__SQLT_BEGIN). */
static char *raised_to_own_reader(char *sql, const char *keys)
{
    if (sql == NULL)
        return NULL;
    size_t len = strlen(sql) + strlen(keys) + 400;
    char *tx = malloc(len);
    if (tx != NULL)
        snprintf(tx, len,
                 DLOCK__SQLT_BEGIN
                 "; %s; UPDATE " DLOCK__SQLT_TABLE " l JOIN " DLOCK__SQLT_SHARE
                 " s ON s.name = l.name AND l.owner = CONCAT('" DLOCK__SQLT_WRITER
                 "', s.owner) SET l.expires = s.expires WHERE l.name IN (%s) AND l.expires > "
                 "UTC_TIMESTAMP(6) AND s.expires > l.expires; COMMIT",
                 sql, keys);
    free(sql);
    return tx;
}

int dlock__myt_extend(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t lease_ms,
                      int at_least, int64_t deadline_us)
{
    dlock__myres res;
    int write = l->base.spec.kind == DLOCK__WRITE;
    if (write) {
        int rc = dlock__myt_share(p, deadline_us);
        if (rc != DLOCK_OK)
            return rc;
    }
    char *owner = dlock__myt_owner(l, token);
    if (owner == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *sql = dlock__sqlt_extend(D, l->key_lit, owner, lease_ms, at_least);
    free(owner);
    if (write)
        sql = raised_to_own_reader(sql, l->key_lit);
    int rc = write
                 ? dlock__myt_run_tx(p, sql, deadline_us, &res, "extending the write lock's lease")
                 : run(p, sql, deadline_us, &res, "extending the lock's lease");
    if (rc != DLOCK_OK)
        return rc;
    const char *v = dlock__my_value(&res, write ? 3 : 1, 0);
    if (v == NULL || strcmp(v, "1") != 0)
        rc = dlock__fail(DLOCK_ELOST,
                         "lock '%s' is not held by this owner any more (its lease ran out, or it "
                         "was force-unlocked)",
                         l->name);
    dlock__my_res_free(&res);
    return rc;
}

/* An item of a renewal that is a hold of table mode's (of a mutex or a
 * writer: 1; a reader or a semaphore's: 2, renewed by read.c), or 0. */
static int table_hold(const dlock__renewal *it)
{
    if (it->kind != DLOCK__RENEW_HOLD || it->session != NULL)
        return 0;
    enum dlock__kind kind = MYLOCK(it->lock)->base.spec.kind;
    return kind == DLOCK__READ || kind == DLOCK__SEMAPHORE ? 2 : 1;
}

/* A renewal's item pick() takes, of mutexes and writers (1). */
static int row_hold(const dlock__renewal *it)
{
    return table_hold(it) == 1;
}

size_t dlock__myt_renew_some(dlock__mystore *p, dlock__renewal *items, size_t n,
                             int (*pick)(const dlock__renewal *),
                             char *(*request)(enum dlock__sqlt_dialect, const dlock__sqlt_hold *,
                                              size_t),
                             int answer, int tx, int64_t deadline_us)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += pick(&items[i]) != 0;
    if (m == 0)
        return 0;
    dlock__sqlt_hold *h = calloc(m, sizeof *h);
    size_t k = 0;
    int ok = h != NULL;
    for (size_t i = 0; i < n && ok; i++) {
        if (!pick(&items[i]))
            continue;
        dlock__mylock *l = MYLOCK(items[i].lock);
        const char *prefix = l->base.spec.kind == DLOCK__WRITE ? DLOCK__SQLT_WRITER : "";
        size_t len = strlen(prefix) + strlen(items[i].token) + 1;
        char *own = malloc(len);
        if (own != NULL)
            snprintf(own, len, "%s%s", prefix, items[i].token);
        h[k].key_lit = l->key_lit;
        h[k].key = l->server_name;
        h[k].owner = own;
        h[k].lease_ms = items[i].lease_ms;
        h[k].counted = l->base.spec.kind == DLOCK__READ;
        h[k].owner_lit = own != NULL ? dlock__my_literal(own, 1) : NULL;
        ok = own != NULL && h[k].owner_lit != NULL;
        k++;
    }
    /* the writers' names: their rows raised to their owners' readers (a
     * downgrade: raised_to_own_reader) */
    char *writers = NULL;
    size_t wlen = 1;
    for (size_t i = 0; i < n && ok; i++)
        if (pick(&items[i]) && MYLOCK(items[i].lock)->base.spec.kind == DLOCK__WRITE)
            wlen += strlen(MYLOCK(items[i].lock)->key_lit) + 2;
    if (ok && wlen > 1 && dlock__myt_share(p, deadline_us) == DLOCK_OK &&
        (writers = malloc(wlen)) != NULL) {
        writers[0] = '\0';
        for (size_t i = 0; i < n; i++)
            if (pick(&items[i]) && MYLOCK(items[i].lock)->base.spec.kind == DLOCK__WRITE)
                snprintf(writers + strlen(writers), wlen - strlen(writers), "%s%s",
                         writers[0] != '\0' ? ", " : "", MYLOCK(items[i].lock)->key_lit);
    }
    dlock__myres res;
    char *sql = ok ? request(D, h, k) : NULL;
    if (writers != NULL)
        sql = raised_to_own_reader(sql, writers); /* (its BEGIN first) */
    int rc = !ok ? DLOCK_ENOMEM
             : tx || writers != NULL
                 ? dlock__myt_run_tx(p, sql, deadline_us, &res, "renewing leases")
                 : run(p, sql, deadline_us, &res, "renewing leases");
    answer += writers != NULL ? 2 : 0; /* (its BEGIN's two statements first) */
    free(writers);
    if (rc == DLOCK_OK && res.rows[answer] != NULL) {
        MYSQL_ROW row;
        mysql_data_seek(res.rows[answer], 0);
        while ((row = mysql_fetch_row(res.rows[answer])) != NULL)
            dlock__sqlt_renewed(h, k, row[0], row[1]);
    }
    for (size_t j = 0; j < k; j++) {
        free((char *) h[j].owner);
        free((char *) h[j].owner_lit);
    }
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pick(&items[i]))
            continue;
        items[i].result = rc != DLOCK_OK ? DLOCK__RENEW_FAILED
                          : h[k].held    ? DLOCK__RENEW_OK
                                         : DLOCK__RENEW_GONE;
        k++;
    }
    if (rc == DLOCK_OK)
        dlock__my_res_free(&res);
    free(h);
    return m;
}

size_t dlock__myt_renew(dlock__mystore *p, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    /* (the holders now: the second statement's rows) */
    return dlock__myt_renew_some(p, items, n, row_hold, dlock__sqlt_renew, 1, 0, deadline_us);
}

uint64_t dlock__my_last_fence(const char *own, const dlock__myres *other)
{
    const char *theirs = dlock__my_value(other, 0, 3);
    uint64_t f = own != NULL ? strtoull(own, NULL, 10) : 0;
    uint64_t g = theirs != NULL ? strtoull(theirs, NULL, 10) : 0;
    return f > g ? f : g;
}

/* The row of l: (owner, info, fence, ms left), the lock held when owner is
 * not empty and the lease runs. */
static int row_of(dlock__mystore *p, dlock__mylock *l, int64_t deadline, dlock__myres *res,
                  int *held)
{
    int rc = run(p, dlock__sqlt_query(D, l->key_lit), deadline, res, "reading the lock's row");
    if (rc != DLOCK_OK)
        return rc;
    const char *owner = dlock__my_value(res, 0, 0), *left = dlock__my_value(res, 0, 3);
    *held = owner != NULL && owner[0] != '\0' && left != NULL && strtoll(left, NULL, 10) > 0;
    return DLOCK_OK;
}

/* row_of(), and when the row has no live holder, a session or row holder
 * of the name (one lock per name): *owner, *info; *lease_ms the holder's
 * lease left (dlock__my_other_holder for another mode's). other: free it. */
static int holder_in_any_mode(dlock__mystore *p, dlock__mylock *l, int64_t deadline,
                              dlock__myres *res, dlock__myres *other, const char **owner,
                              const char **info, int64_t *lease_ms)
{
    int held;
    int rc = row_of(p, l, deadline, res, &held);
    if (rc != DLOCK_OK)
        return rc;
    *owner = held ? dlock__my_value(res, 0, 0) : NULL;
    *info = held ? dlock__my_value(res, 0, 1) : NULL;
    *lease_ms = held ? strtoll(dlock__my_value(res, 0, 3), NULL, 10) : -1;
    return dlock__my_other_holder(p, l, deadline, res, other, owner, info, lease_ms);
}

int dlock__myt_query(dlock__mystore *p, dlock__mylock *l, dlock_status *st, int64_t deadline_us)
{
    dlock__myres res, other;
    const char *owner, *info;
    memset(st, 0, sizeof *st);
    int rc = holder_in_any_mode(p, l, deadline_us, &res, &other, &owner, &info, &st->lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    const char *fence = dlock__my_value(&res, 0, 2), *waiters = dlock__my_value(&res, 0, 4);
    st->last_fence = dlock__my_last_fence(fence, &other);
    st->waiters = waiters != NULL ? (unsigned) strtoul(waiters, NULL, 10) : 0;
    const char *token;
    int kind = owner != NULL ? dlock__sqlt_holder_kind(owner, &token) : 0;
    if (kind != 0 && dlock__sqlt_group(kind) != dlock__sqlt_group(dlock__myt_kind_of(l)))
        kind = 0; /* held as another kind: not this lock's (asked as that kind, it is) */
    int shared = kind == 'r' || kind == 's';
    if (kind != 0) {
        st->held = 1;
        st->holds = !shared;
        snprintf(st->owner, sizeof st->owner, "%s", !shared ? token : "");
    }
    if (kind == 's')
        st->permits = (unsigned) strtoul(token, NULL, 10);
    if (shared || kind == 'w') {
        /* the readers (beside the owner's own write: a downgrade), the
         * semaphore's holders and the permits they hold */
        dlock__myres holders;
        rc = dlock__myt_readers(p, l, deadline_us, &holders);
        MYSQL_ROW row;
        while (rc == DLOCK_OK && holders.rows[0] != NULL &&
               (row = mysql_fetch_row(holders.rows[0])) != NULL) {
            st->shared++;
            if (kind == 's' && row[2] != NULL)
                st->permits_used += (unsigned) strtoul(row[2], NULL, 10);
        }
        if (rc == DLOCK_OK)
            dlock__my_res_free(&holders);
    }
    dlock__my_res_free(&res);
    dlock__my_res_free(&other);
    return rc;
}

int dlock__myt_holders(dlock__mystore *p, dlock__mylock *l, dlock__holder_sink sink, void *arg,
                       int64_t deadline_us)
{
    dlock__myres res, other;
    const char *owner, *info;
    int64_t lease_ms;
    int rc = holder_in_any_mode(p, l, deadline_us, &res, &other, &owner, &info, &lease_ms);
    if (rc != DLOCK_OK)
        return rc;
    const char *token;
    int kind = owner != NULL ? dlock__sqlt_holder_kind(owner, &token) : 0, stop = 0;
    if (kind != 0 && dlock__sqlt_group(kind) != dlock__sqlt_group(dlock__myt_kind_of(l)))
        kind = 0; /* held as another kind (dlock__myt_query) */
    if (kind == 'm' || kind == 'w') {
        dlock__holder_raw h = {.owner = token, .count = 1, .info = info};
        stop = sink(arg, &h);
    }
    dlock__myres readers;
    if (!stop && (kind == 'r' || kind == 'w' || kind == 's') &&
        (rc = dlock__myt_readers(p, l, deadline_us, &readers)) == DLOCK_OK) {
        MYSQL_ROW row;
        while (readers.rows[0] != NULL && (row = mysql_fetch_row(readers.rows[0])) != NULL) {
            dlock__holder_raw h = {.owner = row[0],
                                   .count =
                                       row[2] != NULL ? (unsigned) strtoul(row[2], NULL, 10) : 1,
                                   .info = row[1]};
            if (row[0] != NULL && sink(arg, &h) != 0)
                break;
        }
        dlock__my_res_free(&readers);
    }
    dlock__my_res_free(&res);
    dlock__my_res_free(&other);
    return rc;
}

/* The row's holder cleared (its fence kept): the holder finds it at its
 * next renewal, and the next taker takes the row at once. Through session
 * and row modes' URLs too (one lock per name), when the table is there:
 * it is not made for a force. */
/* A force's statements (sql, freed here) with the row's bell read before
 * and after (bell.c: dlock__myb_silence); NULL when out of memory. */
static char *with_bell(const dlock__mylock *l, char *sql)
{
    size_t len = sql != NULL ? strlen(sql) + strlen(l->key_lit) + 300 : 0;
    char *all = sql != NULL ? malloc(len) : NULL;
    if (all != NULL) {
        int n = snprintf(all, len, DLOCK__MYB_FORCE_FIRST, l->key_lit);
        snprintf(all + n, len - (size_t) n, "; %s; " DLOCK__MYB_FORCE_LAST, sql);
    }
    free(sql);
    return all;
}

int dlock__myt_force_unlock(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us)
{
    dlock__myres res;
    int rc;
    if (p->table) {
        /* the holder of l's kind only (one name is one lock: a holder of
         * another kind is not this lock's, as status does not name it):
         * with its shared holders' rows, in one statement, the name's row
         * first (a reader left with a live row was never told when another
         * reader took the name before its next renewal) */
        int kind = dlock__sqlt_group(dlock__myt_kind_of(l));
        const char *of_kind = kind == 's'   ? "LEFT(l.owner, 2) = '" DLOCK__SQLT_PERMITS "'"
                              : kind == 'w' ? "(l.owner = '" DLOCK__SQLT_READERS
                                              "' OR LEFT(l.owner, 2) = '" DLOCK__SQLT_WRITER "')"
                                            : "l.owner <> '" DLOCK__SQLT_READERS
                                              "' AND LEFT(l.owner, 2) NOT IN ('" DLOCK__SQLT_WRITER
                                              "', '" DLOCK__SQLT_PERMITS "')";
        /* (the shared holders' table made by another client, or found:
         * without it there is none, but a writer may hold) */
        int shared = kind != 'm' && dlock__myt_share(p, deadline_us) == DLOCK_OK;
        size_t len = strlen(l->key_lit) + 600;
        char *sql = malloc(len);
        if (sql != NULL && shared)
            snprintf(sql, len,
                     "UPDATE " DLOCK__SQLT_TABLE " l LEFT JOIN " DLOCK__SQLT_SHARE
                     " s ON s.name = l.name AND s.expires > UTC_TIMESTAMP(6) SET l.owner = "
                     "'', l.expires = '1970-01-01 00:00:01', s.expires = '1970-01-01 "
                     "00:00:01' WHERE l.name = %s AND %s",
                     l->key_lit, of_kind);
        else if (sql != NULL)
            snprintf(sql, len,
                     "UPDATE " DLOCK__SQLT_TABLE " l SET l.owner = '', l.expires = '1970-01-01 "
                     "00:00:01' WHERE l.name = %s AND %s",
                     l->key_lit, of_kind);
        rc = run(p, with_bell(l, sql), deadline_us, &res, "clearing the lock's row");
    } else {
        rc = dlock__myt_other_table(p, deadline_us);
        if (rc != DLOCK_OK || atomic_load(&p->other_table) != 1)
            return rc;
        /* and table mode's readers' rows when that table is there, in one
         * statement with the row (the name's row locked first, as every
         * change of them): a reader left with a live row was never told
         * when another reader took the name before its next renewal */
        int readers;
        rc = share_there(p, deadline_us, &readers);
        if (rc != DLOCK_OK)
            return rc;
        char *sql = NULL;
        if (readers) {
            size_t len = strlen(l->key_lit) + 400;
            if ((sql = malloc(len)) != NULL)
                snprintf(sql, len,
                         "UPDATE " DLOCK__SQLT_TABLE " l LEFT JOIN " DLOCK__SQLT_SHARE
                         " s ON s.name = l.name AND s.expires > UTC_TIMESTAMP(6) SET l.owner = "
                         "'', l.expires = '1970-01-01 00:00:01', s.expires = '1970-01-01 "
                         "00:00:01' WHERE l.name = %s",
                         l->key_lit);
        } else {
            sql = dlock__sqlt_force(D, l->key_lit);
        }
        if ((sql = with_bell(l, sql)) == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        rc = dlock__my_operate(p, sql, deadline_us, &res, "clearing table mode's row of the lock");
        free(sql);
    }
    if (rc == DLOCK_OK) {
        dlock__myb_silence(p, &res, deadline_us);
        dlock__my_res_free(&res);
    }
    return rc;
}

int dlock__myt_list(dlock__mystore *p, const char *prefix, dlock__name_sink sink, void *arg,
                    int64_t deadline_us)
{
    dlock__myres res;
    char *lit = dlock__my_literal(prefix, 1);
    if (lit == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    /* and the names a session or row holder's lease keeps (status calls
     * them held: one lock per name) */
    int rc = dlock__myt_other_table(p, deadline_us);
    char *own = rc == DLOCK_OK ? dlock__sqlt_list(D, lit) : NULL, *sql = NULL;
    if (own != NULL) {
        /* each name once, as the read-write lock when it holds it */
        int fenced = atomic_load(&p->other_table) == 1;
        size_t len = strlen(own) + 2 * strlen(lit) + 300;
        sql = malloc(len);
        if (sql != NULL)
            snprintf(sql, len, "SELECT n, MAX(k) FROM (%s%s%s%s%s%s) x GROUP BY n", own,
                     fenced ? " UNION SELECT lock_name, 0 FROM dlock_fence WHERE LEFT(lock_name, "
                              "LENGTH("
                            : "",
                     fenced ? lit : "", fenced ? ")) = " : "", fenced ? lit : "",
                     fenced ? " AND expires > UTC_TIMESTAMP(6)" : "");
        free(own);
    }
    if (rc == DLOCK_OK)
        rc = run(p, sql, deadline_us, &res, "listing the locks held");
    free(lit);
    if (rc != DLOCK_OK)
        return rc;
    if (res.rows[0] != NULL) {
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(res.rows[0])) != NULL) {
            enum dlock__kind kind = row[1] == NULL             ? DLOCK__MUTEX
                                    : strcmp(row[1], "2") == 0 ? DLOCK__SEMAPHORE
                                    : strcmp(row[1], "1") == 0 ? DLOCK__WRITE
                                                               : DLOCK__MUTEX;
            if (row[0] != NULL && sink(arg, row[0], kind) != 0)
                break;
        }
    }
    dlock__my_res_free(&res);
    return DLOCK_OK;
}
