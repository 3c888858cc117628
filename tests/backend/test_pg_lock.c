/* SPDX-License-Identifier: MIT */
/* test_pg_lock.c - the PostgreSQL backend (postgres://), session mode,
 * against a real PostgreSQL started once for the program: the name-to-key
 * mapping (and a lock shared with SQL that calls pg_advisory_lock itself),
 * a holder's connection ended from the server side (pg_terminate_backend),
 * a wait blocked in the server: its place in the server's queue kept for
 * the whole wait, a server gone silent under it, a try that never blocks,
 * and a cancel that reaches it; a release that ends the row's lease; bad input; and processes
 * incrementing a fenced counter through one lock.
 *
 * The server is looked at with psql (dt_server_cli), never through the
 * library. Tests that fork do so before they open a client. */
#define _GNU_SOURCE
#include "../support/child_holder.h"
#include "../support/harness.h"
#include "../support/hot_name.h"
#include "../support/proxy.h"

#include "backend/pg/pg.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static dt_server srv;

static dlock_client *client(const char *options)
{
    return dt_client(srv.url, options);
}

/* psql's one-line answer, as a number. */
static long long sql_number(const char *sql)
{
    const char *out = dt_server_cli(&srv, "-c \"%s\"", sql);
    return strtoll(out, NULL, 10);
}

/* How many sessions of server s hold (granted) or wait for the advisory
 * key of name. */
static long long advisory_rows_of(dt_server *s, const char *name, int granted)
{
    uint64_t key = (uint64_t) dlock__pg_key(name);
    const char *out = dt_server_cli(
        s,
        "-c \"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %u AND "
        "objid = %u AND objsubid = 1 AND granted = %s\"",
        (unsigned) (key >> 32), (unsigned) (key & 0xffffffffu), granted ? "true" : "false");
    return strtoll(out, NULL, 10);
}

static long long advisory_rows(const char *name, int granted)
{
    return advisory_rows_of(&srv, name, granted);
}

/* ---------------------------------------------------------------- keys */

/* The documented mapping: FNV-1a 64 of the name's bytes, its low 48 bits
 * under 0x646c ("dl"); the key is the one the server shows, and SQL that
 * takes that key itself is excluded by dlock's holder and excludes it. */
static void key_mapping(void)
{
    /* FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c */
    CHECK(dlock__pg_key("a") == (int64_t) 0x646cdc4c8601ec8cLL);
    CHECK(dlock__pg_key("") == (int64_t) 0x646c9ce484222325LL);
    CHECK(((uint64_t) dlock__pg_key("some/long name ✓") >> 48) == 0x646c);
    CHECK(dlock__pg_key("a") != dlock__pg_key("b"));
    CHECK(dlock__pg_key("a") != dlock__pg_key("A"));

    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "a", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(advisory_rows("a", 1), ==, 1);
    /* SQL of its own on the same key: pg_try_advisory_lock fails */
    CHECK_INT(sql_number("SELECT pg_try_advisory_lock(7236400922501442700)::int"), ==, 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(advisory_rows("a", 1), ==, 0);
    /* and the other way: held by SQL (psql in the background), dlock waits */
    dt_server_cli(&srv,
                  "-c 'SELECT pg_advisory_lock(7236400922501442700)' -c 'SELECT pg_sleep(1.5)' "
                  ">/dev/null 2>&1 </dev/null &");
    DT_WAIT_UNTIL(advisory_rows("a", 1) == 1, 5000);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, >=, 500);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- terminated */

/* The holder's connection is ended by the server (pg_terminate_backend, as
 * an operator or a failover would): the loss is reported within the lease,
 * and another client gets the lock with a larger fence. */
/* The holder's connection is terminated and the holder releases before its
 * renewer has noticed (a `dlock run` whose command ends then): the release
 * says the lock was lost (it went with the connection, maybe before the
 * work was done), not that it merely may not have reached the store. */
static void released_after_terminate(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "term-rel", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    uint64_t key = (uint64_t) dlock__pg_key("term-rel");
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_locks "
             "WHERE locktype = 'advisory' AND classid = %u AND objid = %u AND granted",
             (unsigned) (key >> 32), (unsigned) (key & 0xffffffffu));
    CHECK_INT(sql_number(sql), ==, 1);
    /* found by the release, or reported at once (the socket watched) */
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK(strstr(dlock_errmsg(), "lost with its connection") != NULL ||
          strstr(dlock_errmsg(), "closed the connection") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A role that may not create tables in the schema (least privilege: only
 * DML on dlock's tables, made for it) takes locks: the tables are created
 * only when missing (README.md: privileges). */
static void role_without_create(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *made = dt_lock(c, "made", 0);
    CHECK_RC(dlock_acquire(made, 5000), DLOCK_OK); /* the tables exist from here on */
    CHECK_RC(dlock_release(made), DLOCK_OK);
    dlock_lock_free(made);
    dlock_client_close(c);
    sql_number("SELECT 1; CREATE ROLE dlock_lim LOGIN PASSWORD 'lim'; "
               "GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_fence, dlock_owner, dlock_run TO "
               "dlock_lim; GRANT USAGE ON SEQUENCE dlock_epoch TO dlock_lim; "
               "REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    CHECK_INT(sql_number("SELECT count(*) FROM pg_roles WHERE rolname = 'dlock_lim' AND NOT "
                         "has_schema_privilege('dlock_lim', 'public', 'CREATE')"),
              ==, 1);
    char url[512];
    const char *at = strchr(srv.url, '@');
    CHECK(at != NULL);
    snprintf(url, sizeof url, "postgres://dlock_lim:lim%s", at);
    dlock_client *lim = dt_client(url, NULL);
    dlock_lock *l = dt_lock(lim, "limited", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(lim);

    /* a role without those grants: the server's words and where the
     * grants are, not libpq's layout ("ERROR:  ") */
    sql_number("SELECT 1; CREATE ROLE dlock_none LOGIN PASSWORD 'none'");
    snprintf(url, sizeof url, "postgres://dlock_none:none%s", at);
    dlock_client *none = dt_client(url, NULL);
    l = dt_lock(none, "limited", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_ESERVER);
    if (strstr(dlock_errmsg(), "permission denied for table") == NULL ||
        strstr(dlock_errmsg(), "Privileges") == NULL || strstr(dlock_errmsg(), "ERROR") != NULL ||
        strstr(dlock_errmsg(), "  ") != NULL)
        dt_fail(__FILE__, __LINE__, "a role without grants: %s", dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(none);
}

/* Ends the server sessions holding name's advisory lock (as an operator's
 * pg_terminate_backend would), waiting until they are gone: how many. */
static long long terminate_holders(const char *name)
{
    uint64_t key = (uint64_t) dlock__pg_key(name);
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_locks "
             "WHERE locktype = 'advisory' AND classid = %u AND objid = %u AND granted",
             (unsigned) (key >> 32), (unsigned) (key & 0xffffffffu));
    return sql_number(sql);
}

static void terminated_holder(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("?lease=2s"), *c2 = client(NULL);
    dlock_lock *l = dt_lock(c, "term", 0), *l2 = dt_lock(c2, "term", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_INT(terminate_holders("term"), ==, 1);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 2000 + 1000);
    printf("terminated: loss reported after %lld ms: %s\n", (long long) (dt_now_ms() - t0),
           box.why);
    /* status says what a take finds: held until the dead holder's row
     * lease ends (before: "free", while a try said "held") */
    dlock_status st = dt_query(c2, "term", 0);
    CHECK(st.held);
    CHECK_INT(st.lease_ms, >, 0);
    CHECK(strcmp(st.owner, dlock_lock_token(l)) == 0);
    /* and holders names it as status does (before: no holder line) */
    dt_holders hs = dt_query_holders(c2, "term", 0);
    CHECK_INT(hs.n, ==, 1);
    CHECK(strcmp(hs.h[0].owner, dlock_lock_token(l)) == 0);
    CHECK_INT(hs.h[0].pid, ==, (long) getpid());
    CHECK_RC(dlock_acquire(l2, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l2), >, fence);
    /* not before the holder was told */
    CHECK_INT(atomic_load(&box.at_ms), <=, dt_now_ms());
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    /* the lost handle takes it again, on a new connection */
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, dlock_lock_fence(l2));
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* Issue 23: a holder whose connection the server ends is told at once (a
 * passive read on the idle socket, ../src/backend/sockwatch.h), not at its
 * next renewal (a third of a 30 s lease: 10 s). */
static void terminated_holder_told_at_once(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("?lease=30s");
    dlock_lock *l = dt_lock(c, "tnow", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_INT(terminate_holders("tnow"), ==, 1);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 9000);
    long long took = dt_now_ms() - t0;
    printf("terminated: loss reported after %lld ms: %s\n", took, box.why);
    CHECK_INT(took, <, 2000);
    CHECK(strstr(box.why, "closed the connection") != NULL);
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Read locks (README.md, "Read locks"): readers share the key and each
 * has a row lease of its own. A reader whose connection the server ends
 * is told, and a writer does not get the name before that reader's lease
 * has run out (it may still believe it reads), nor before it was told;
 * status counts both readers meanwhile, holders names them; fences grow
 * with every new holder, readers too. Without the readers' leases the
 * writer's try succeeded at once after the terminate. */
static void reader_lease_waited_out(void)
{
    dt_lost_box box = {0};
    dlock_client *c1 = client("?lease=2s"), *c2 = client(NULL), *c3 = client(NULL);
    dlock_lock *r1 = dt_lock(c1, "rdead", DLOCK_READ), *r2 = dt_lock(c2, "rdead", DLOCK_READ);
    dlock_lock *w = dt_lock(c3, "rdead", DLOCK_WRITE);
    dlock_lock_on_lost(r1, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(r1, 5000), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(r2), >, dlock_lock_fence(r1));
    CHECK_INT(advisory_rows("rdead", 1), ==, 2);
    dlock_status st = dt_query(c3, "rdead", DLOCK_WRITE);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.shared, ==, 2);
    dt_holders hs = dt_query_holders(c3, "rdead", DLOCK_READ);
    CHECK_INT(hs.n, ==, 2);
    /* one lock per name across the modes: table mode's take is refused */
    dlock_client *tc = client("?mode=table");
    dlock_lock *tl = dt_lock(tc, "rdead", 0);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_EBUSY);
    dlock_lock_free(tl);
    dlock_client_close(tc);
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FILTER (WHERE pg_terminate_backend(holder_pid, 5000)) FROM "
             "dlock_share WHERE owner = 'dlock:%s'",
             dlock_lock_token(r1));
    CHECK_INT(sql_number(sql), ==, 1);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 3000);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_INT(advisory_rows("rdead", 1), ==, 0);
    /* the dead reader's lease still runs: counted, and the writer waits */
    st = dt_query(c3, "rdead", DLOCK_WRITE);
    CHECK_INT(st.shared, ==, 1);
    CHECK_INT(st.lease_ms, >, 0);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(w, 5000), DLOCK_OK);
    printf("the writer got the name %lld ms after the dead reader's release was refused\n",
           (long long) (dt_now_ms() - t0));
    CHECK_INT(atomic_load(&box.at_ms), <=, dt_now_ms());
    CHECK_INT(dlock_lock_fence(w), >, dlock_lock_fence(r2));
    st = dt_query(c3, "rdead", DLOCK_READ);
    CHECK_INT(st.shared, ==, 0);
    CHECK(strcmp(st.owner, dlock_lock_token(w)) == 0); /* a writer's row names its token */
    CHECK_RC(dlock_release(r1), DLOCK_ELOST);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    /* a reader after the writer: a new fence again */
    CHECK_RC(dlock_acquire(r2, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(r2), >, dlock_lock_fence(w));
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(c1);
    dlock_client_close(c2);
    dlock_client_close(c3);
}

/* One name is one lock (as Redis, SQLite): a forced unlock of the mutex
 * leaves readers and a writer alone, saying it was not held, one of the
 * read-write lock a mutex. Before, every force ended every holder. */
static void force_by_kind(void)
{
    const char *names[3] = {"fk-r", "fk-w", "fk-m"};
    unsigned kinds[3] = {DLOCK_READ, DLOCK_WRITE, 0}, wrong[3] = {0, 0, DLOCK_WRITE};
    dlock_client *c = client(NULL), *op = client(NULL);
    for (int i = 0, was = -1; i < 3; i++) {
        dt_lost_box lost = {0};
        dlock_lock *l = dt_lock(c, names[i], kinds[i]);
        dlock_lock_on_lost(l, dt_on_lost, &lost);
        CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
        CHECK(dlock_force_unlock2(op, names[i], wrong[i], &was) == DLOCK_OK && was == 0);
        CHECK_INT(advisory_rows(names[i], 1), ==, 1); /* (a terminate is waited for) */
        CHECK(dlock_force_unlock2(op, names[i], kinds[i], &was) == DLOCK_OK && was == 1);
        CHECK_INT(advisory_rows(names[i], 1), ==, 0);
        DT_WAIT_UNTIL(atomic_load(&lost.lost) == 1, 3000);
        dlock_lock_free(l);
    }
    dlock_client_close(c);
    dlock_client_close(op);
}

static void note_kind(const char *name, unsigned flags, void *arg)
{
    ((unsigned *) arg)[name[3] == 'r' ? 0 : name[3] == 'w' ? 1 : 2] = flags | 0x80000000u;
}

/* Status and holders say held for the kind asked about only, list names
 * the kind (table mode's table there). Before, status and holders named
 * any kind's holders, and list called a read name a mutex. */
static void status_by_kind(void)
{
    dlock_client *c = client(NULL), *tc = client("?mode=table");
    dlock_lock *t = dt_lock(tc, "sk-t", 0); /* its take makes table mode's table */
    CHECK_RC(dlock_acquire(t, 5000), DLOCK_OK);
    dlock_lock *l[3] = {dt_lock(c, "sk-r", DLOCK_READ), dt_lock(c, "sk-w", DLOCK_WRITE),
                        dt_lock(c, "sk-m", 0)};
    for (int i = 0; i < 3; i++)
        CHECK_RC(dlock_acquire(l[i], 5000), DLOCK_OK);
    CHECK(dt_query(c, "sk-r", 0).held + dt_query(c, "sk-w", 0).held == 0);
    CHECK_INT(dt_query(c, "sk-r", DLOCK_READ).shared, ==, 1);
    CHECK(strcmp(dt_query(c, "sk-w", DLOCK_WRITE).owner, dlock_lock_token(l[1])) == 0);
    CHECK(dt_query(c, "sk-m", DLOCK_READ).held == 0 && dt_query(c, "sk-m", 0).held == 1);
    CHECK_INT(dt_query_holders(c, "sk-r", 0).n + dt_query_holders(c, "sk-w", 0).n, ==, 0);
    CHECK_INT(dt_query_holders(c, "sk-m", DLOCK_WRITE).n, ==, 0);
    unsigned kinds[3] = {0, 0, 0};
    CHECK_RC(dlock_list(c, "sk-", 0, note_kind, kinds), DLOCK_OK);
    CHECK((kinds[0] & DLOCK_WRITE) && (kinds[1] & DLOCK_WRITE));
    CHECK(kinds[2] != 0 && !(kinds[2] & DLOCK_WRITE));
    for (int i = 0; i < 3; i++)
        dlock_lock_free(l[i]);
    dlock_lock_free(t);
    dlock_client_close(tc);
    dlock_client_close(c);
}

/* Readers whose connections are gone show the longest lease of theirs
 * (as a dead exclusive holder), live readers none (before: the longest of
 * all). A writer that waited out a dead mutex's lease is a writer (before:
 * its row said a mutex). */
static void reader_gone_status(void)
{
    dlock_client *c1 = client("?lease=2s"), *c2 = client(NULL);
    dlock_lock *r1 = dt_lock(c1, "rg", DLOCK_READ), *r2 = dt_lock(c2, "rg", DLOCK_READ);
    CHECK_RC(dlock_acquire(r1, 5000), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 5000), DLOCK_OK);
    dlock_status st = dt_query(c2, "rg", DLOCK_READ);
    CHECK(st.shared == 2 && st.lease_ms == -1);
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FILTER (WHERE pg_terminate_backend(holder_pid, 5000)) FROM "
             "dlock_share WHERE owner = 'dlock:%s'",
             dlock_lock_token(r1));
    CHECK_INT(sql_number(sql), ==, 1);
    st = dt_query(c2, "rg", DLOCK_READ);
    CHECK(st.shared == 2 && st.lease_ms > 0 && st.lease_ms <= 2000);
    dlock_lock *m = dt_lock(c1, "rg-m", 0), *w = dt_lock(c2, "rg-m", DLOCK_WRITE);
    CHECK_RC(dlock_acquire(m, 5000), DLOCK_OK);
    CHECK_INT(terminate_holders("rg-m"), ==, 1);
    CHECK_RC(dlock_acquire(w, 5000), DLOCK_OK); /* after m's row lease */
    CHECK(strcmp(dt_query(c2, "rg-m", DLOCK_WRITE).owner, dlock_lock_token(w)) == 0);
    dlock_lock *all[4] = {m, w, r1, r2};
    for (int i = 0; i < 4; i++)
        dlock_lock_free(all[i]);
    dlock_client_close(c1);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- waits */

struct waiter {
    dlock_lock *l;
    int64_t wait_ms;
    _Atomic int rc;
    _Atomic int done;
    _Atomic long long ended_ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    int rc = dlock_acquire(w->l, w->wait_ms);
    atomic_store(&w->ended_ms, dt_now_ms());
    atomic_store(&w->rc, rc);
    atomic_store(&w->done, 1);
    return NULL;
}

/* While a waiter waits out a terminated holder's row lease it holds the
 * advisory key (README, "The row's lease"): status and holders name the
 * holder whose lease runs and count the waiter as waiting. They named the
 * waiter as the holder, with no waiter (stop 33's new-user trial). The
 * holder's info is its server pid's record in dlock_owner while that is
 * its own: once a later connection of the same pid (server pids are used
 * again) has overwritten it, as the UPDATE below does, no info is named
 * (before, the later connection's client was named the holder's). */
static void status_while_lease_waited_out(void)
{
    dlock_client *c = client("?lease=5s"), *c2 = client(NULL), *op = client(NULL);
    dlock_lock *l = dt_lock(c, "wout", 0), *l2 = dt_lock(c2, "wout", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(terminate_holders("wout"), ==, 1);
    struct waiter w = {.l = l2, .wait_ms = 10000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(advisory_rows("wout", 1) == 1, 5000);
    dlock_status st = dt_query(op, "wout", 0);
    dt_holders hs = dt_query_holders(op, "wout", 0);
    /* the holder's pid used again by another client's connection */
    dt_server_cli(&srv, "-c \"UPDATE dlock_owner SET holder = 'a later connection' WHERE pid = "
                        "(SELECT holder_pid FROM dlock_fence WHERE name = 'wout')\"");
    dt_holders reused = dt_query_holders(op, "wout", 0);
    int waited = !atomic_load(&w.done); /* the answers came while it waited */
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_OK);
    CHECK(waited);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, dlock_lock_token(l)) == 0);
    CHECK_INT(st.lease_ms, >, 0);
    CHECK_INT(st.waiters, ==, 1);
    CHECK_INT(hs.n, ==, 1);
    CHECK(strcmp(hs.h[0].owner, dlock_lock_token(l)) == 0);
    CHECK_INT(hs.h[0].pid, ==, (long) getpid());
    CHECK_INT(reused.n, ==, 1);
    CHECK(strcmp(reused.h[0].owner, dlock_lock_token(l)) == 0);
    CHECK_INT(reused.h[0].pid, ==, 0); /* no info: not the holder's record */
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(c2);
    dlock_client_close(op);
}

/* A wait blocks in the server (one waiting row in pg_locks, no polling),
 * for longer than a command timeout; a try never blocks; a budget ends on time; a cancel
 * of the blocked wait returns at once and leaves nothing in the server. */
static void blocked_wait(void)
{
    /* timeout 2s: the wait outlives it */
    dlock_client *h = client(NULL), *c = client("?timeout=2s");
    dlock_lock *hl = dt_lock(h, "bw", 0), *l = dt_lock(c, "bw", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);

    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    CHECK_INT(dt_now_ms() - t0, <, 500);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 700), DLOCK_ETIMEDOUT);
    int64_t took = dt_now_ms() - t0;
    CHECK_INT(took, >=, 690);
    CHECK_INT(took, <, 1500);

    /* across two command timeouts, then cancelled */
    struct waiter w = {.l = l, .wait_ms = 60000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(advisory_rows("bw", 0) == 1, 5000);
    dt_sleep_ms(4000); /* two command timeouts and more */
    CHECK(!atomic_load(&w.done));
    CHECK_INT(advisory_rows("bw", 0), ==, 1);
    int64_t cancel_at = dt_now_ms();
    CHECK_RC(dlock_cancel(l), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 2000);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_ECANCELED);
    long long cancel_took = atomic_load(&w.ended_ms) - cancel_at;
    printf("blocked wait: cancelled in %lld ms\n", cancel_took);
    CHECK_INT(cancel_took, <, 300);
    CHECK_INT(advisory_rows("bw", 0), ==, 0);

    /* a release wakes a blocked waiter at once */
    struct waiter w2 = {.l = l, .wait_ms = 60000};
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w2), ==, 0);
    DT_WAIT_UNTIL(advisory_rows("bw", 0) == 1, 5000);
    int64_t released_at = dt_now_ms();
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w2.done), 2000);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w2.rc), DLOCK_OK);
    CHECK_INT(atomic_load(&w2.ended_ms) - released_at, <, 300);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* ---------------------------------------------------------------- the queue */

struct looper {
    dlock_lock *l;
    _Atomic int *stop;
    _Atomic int *turns; /* turns taken by all loopers */
    _Atomic int *a_done;
    _Atomic int before_a; /* this looper's turns taken before A was served */
};

/* Takes and releases the name until told to stop, holding it 150 ms each
 * time (the work under the lock), waiting in the server in between. */
static void *loop_thread(void *arg)
{
    struct looper *lp = arg;
    while (!atomic_load(lp->stop)) {
        if (dlock_acquire(lp->l, 20000) != DLOCK_OK)
            continue;
        if (!atomic_load(lp->a_done))
            atomic_fetch_add(&lp->before_a, 1);
        atomic_fetch_add(lp->turns, 1);
        dt_sleep_ms(150);
        dlock_release(lp->l);
    }
    return NULL;
}

/* A waiter keeps its place in PostgreSQL's queue (FIFO for one lock) for
 * its whole wait, not for a command timeout: A, queued first, is served
 * first when the holder lets go, ahead of clients that take the name in a
 * loop. Before, a wait left the server's queue at every slice's end (about
 * 400 ms with A's timeout=500ms) and joined again at its back, behind five
 * loopers holding 150 ms each (their timeout long enough to keep their
 * places): its turn was always further than a slice away, and A was never
 * served (the fault suite's starved multi-lock waiter, postgres seed 7;
 * issue 23). */
static void waiter_keeps_place(void)
{
    enum { LOOPERS = 5 };
    dlock_client *h = client("?timeout=500ms"), *a = client("?timeout=500ms");
    dlock_client *lc[LOOPERS];
    struct looper lp[LOOPERS];
    pthread_t lt[LOOPERS], at;
    _Atomic int stop = 0, turns = 0, a_done = 0;
    dlock_lock *hl = dt_lock(h, "fifo", 0), *al = dt_lock(a, "fifo", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);

    struct waiter w = {.l = al, .wait_ms = 20000};
    CHECK_INT(pthread_create(&at, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(advisory_rows("fifo", 0) == 1, 15000); /* (a loaded TSan run: over 5 s) */
    for (int i = 0; i < LOOPERS; i++) {
        lc[i] = client("?timeout=5s"); /* (their places kept either way) */
        lp[i] = (struct looper){
            .l = dt_lock(lc[i], "fifo", 0), .stop = &stop, .turns = &turns, .a_done = &a_done};
        CHECK_INT(pthread_create(&lt[i], NULL, loop_thread, &lp[i]), ==, 0);
    }
    DT_WAIT_UNTIL(advisory_rows("fifo", 0) == 1 + LOOPERS, 5000);
    /* the holder works on for two of the old slices, then lets go */
    dt_sleep_ms(1000);
    int64_t released_at = dt_now_ms();
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 5000);
    atomic_store(&a_done, 1);
    long long served_after = atomic_load(&w.ended_ms) - released_at;
    int before = 0;
    for (int i = 0; i < LOOPERS; i++)
        before += atomic_load(&lp[i].before_a);
    printf("queue: A served %lld ms after the release, after %d loopers' turns\n", served_after,
           before);
    CHECK_RC(atomic_load(&w.rc), DLOCK_OK);
    CHECK_INT(before, <=, 1);
    CHECK_INT(served_after, <, 1000);
    pthread_join(at, NULL);
    CHECK_RC(dlock_release(al), DLOCK_OK);
    /* and the loopers go on */
    int seen = atomic_load(&turns);
    DT_WAIT_UNTIL(atomic_load(&turns) >= seen + LOOPERS, 10000);
    atomic_store(&stop, 1);
    for (int i = 0; i < LOOPERS; i++) {
        pthread_join(lt[i], NULL);
        dlock_lock_free(lp[i].l);
        dlock_client_close(lc[i]);
    }
    dlock_lock_free(al);
    dlock_lock_free(hl);
    dlock_client_close(a);
    dlock_client_close(h);
}

/* The CPU time the calling thread has used, in ms: the wait runs on it.
 * (The process's time also counts the holder's renewer and the probe.)
 * Waiting well: ~22 ms plain, 120-157 ms under TSan. */
static long long cpu_ms(void)
{
    struct rusage ru;
    CHECK_INT(getrusage(RUSAGE_THREAD, &ru), ==, 0);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000LL +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* A long wait blocked in the server sleeps to its end: in its last command
 * timeout, when no question is asked any more (the request's own bound is
 * as near), its watch set no wake-up either. Before, the wake-up for the
 * next question, already past, was waited for over and over: the last
 * command timeout of every wait that ran out was spent spinning (about
 * 500 ms of CPU here). */
static void wait_end_does_not_spin(void)
{
    dlock_client *h = client(NULL), *c = client("?timeout=500ms");
    dlock_lock *hl = dt_lock(h, "spin", 0), *l = dt_lock(c, "spin", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    long long cpu0 = cpu_ms();
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 2000), DLOCK_ETIMEDOUT);
    long long took = dt_now_ms() - t0, cpu = cpu_ms() - cpu0;
    printf("a 2 s wait that ran out: %lld ms, %lld ms of CPU\n", took, cpu);
    CHECK_INT(took, >=, 1990);
    CHECK_INT(cpu, <, 150 * DT_CPU_SCALE); /* (spinning: 233 ms plain, 480 under TSan) */
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* A server that goes silent (paused) under a wait blocked in it for long
 * is noticed about as soon as a request's bound would: the wait's watch
 * (another connection asks the server every half command timeout) ends
 * it, the core rides the outage for unreachable_wait and gives up, long
 * before the wait's budget. Once the server is back, the given-up wait
 * leaves the server's queue (its cancel, or the closed connection) and
 * the name is served again. */
static void silent_server_under_wait(void)
{
    dlock_client *h = client(NULL);
    dlock_client *c = client("?timeout=500ms&unreachable_wait=1s");
    dlock_lock *hl = dt_lock(h, "sil", 0), *l = dt_lock(c, "sil", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    struct waiter w = {.l = l, .wait_ms = 30000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(advisory_rows("sil", 0) == 1, 5000);
    dt_sleep_ms(1200); /* blocked for longer than a command timeout */
    CHECK(!atomic_load(&w.done));
    dt_server_pause(&srv);
    int64_t paused_at = dt_now_ms();
    DT_WAIT_UNTIL(atomic_load(&w.done), 10000);
    long long took = atomic_load(&w.ended_ms) - paused_at;
    dt_server_resume(&srv);
    pthread_join(t, NULL);
    printf("silent server under a wait: given up %lld ms after the pause (rc %d)\n", took,
           atomic_load(&w.rc));
    CHECK_RC(atomic_load(&w.rc), DLOCK_EUNREACHABLE);
    CHECK_INT(took, <, 4000);
    /* the abandoned wait leaves the server's queue */
    DT_WAIT_UNTIL(advisory_rows("sil", 0) == 0, 5000);
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* A server silent for longer than a command timeout but shorter than the
 * lease costs no hold: the renewal sent into the silence is answered when
 * the server is back, and read by a retry due before the validity ends
 * (before, a retry only looked for an answer without reading one, and
 * could be due after the validity: the hold was lost to a 7 s freeze with
 * a 10 s lease). */
static void paused_shorter_than_lease(void)
{
    dlock_client *c = client("?timeout=500ms&lease=3s");
    dlock_lock *l = dt_lock(c, "psl", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    int64_t taken = dt_now_ms();
    dt_server_pause(&srv);
    dt_sleep_ms(2000); /* the fault itself: silent for 4 command timeouts */
    dt_server_resume(&srv);
    /* past the validity the last renewal before the pause gave */
    dt_sleep_ms(3500 - (dt_now_ms() - taken));
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A cancel of a wait blocked in a server that is paused (or behind a
 * silent link) returns at once too. libpq's PQcancel waits, with no
 * bound, for the server to take the cancel: the fault suite's
 * pause-server, drop and blackhole kept a cancelled wait until the fault
 * ended (postgres seed 10: 1.2-2.1 s past its bound). */
static void cancel_when_paused(void)
{
    dlock_client *h = client(NULL), *c = client("?timeout=2s&lease=1s");
    dlock_lock *hl = dt_lock(h, "cp", 0), *l = dt_lock(c, "cp", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    struct waiter w = {.l = l, .wait_ms = 20000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(advisory_rows("cp", 0) == 1, 5000);
    dt_server_pause(&srv);
    int64_t cancel_at = dt_now_ms();
    CHECK_RC(dlock_cancel(l), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 5000);
    pthread_join(t, NULL);
    long long cancel_took = atomic_load(&w.ended_ms) - cancel_at;
    dt_server_resume(&srv);
    printf("wait on a paused server: cancelled in %lld ms (rc %d)\n", cancel_took,
           atomic_load(&w.rc));
    CHECK_RC(atomic_load(&w.rc), DLOCK_ECANCELED);
    CHECK_INT(cancel_took, <, 500);
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    /* the store is served again. The closed connection's backend, still
     * queued for the lock when the server went on, may take it and write
     * the row before it finds its client gone: the row's lease (1 s) then
     * runs out first. */
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* A waiter's thread, its kernel id known (to see it blocked). */
struct tid_waiter {
    struct waiter w;
    _Atomic int tid;
};

static void *tid_wait_thread(void *arg)
{
    struct tid_waiter *tw = arg;
    atomic_store(&tw->tid, (int) gettid());
    return wait_thread(&tw->w);
}

/* Whether thread tid of this process is asleep (state S in its stat). */
static int thread_sleeping(int tid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *state = strrchr(stat, ')');
    return state != NULL && state[1] == ' ' && state[2] == 'S';
}

/* A wait takes the pool's idle connection while the renewer's ping on it
 * is out (its answer held back: the ping holds the connection), and the
 * ping then finds it dead (reset) and closes it. Before, the waiter's thread could
 * lock the mutex of that connection after the ping had closed and freed
 * it: the fault suite's worker that never stopped (postgres seed 9, a
 * thread blocked for ever in pthread_mutex_lock on freed memory; under
 * ASan a heap-use-after-free). Now the wait goes on, on a new connection,
 * and gets the lock. A race: a few rounds make it likely to show. */
static void pooled_closed_by_ping(void)
{
    dt_proxy px;
    char url[256];
    dlock_client *c = NULL;
    dt_proxy_start(&px, srv.port, 1);
    dt_server_url_at(&srv, px.ports[0], url, sizeof url - 64);
    strcat(url, "?lease=2s&timeout=1500ms");
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "pp", 0);
    for (int round = 0; round < 6; round++) {
        CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK); /* one connection, idle once released */
        CHECK_RC(dlock_release(l), DLOCK_OK);
        long long chunks, bytes, before;
        dt_proxy_sent(&px, 0, &before, &bytes);
        dt_proxy_delay(&px, 0, 5000);
        /* the renewer pings the idle connection (every third of a lease) */
        DT_WAIT_UNTIL((dt_proxy_sent(&px, 0, &chunks, &bytes), chunks > before), 3000);
        struct tid_waiter tw = {.w = {.l = l, .wait_ms = 10000}};
        pthread_t t;
        CHECK_INT(pthread_create(&t, NULL, tid_wait_thread, &tw), ==, 0);
        /* the wait took the connection and waits for the ping to let go of it */
        DT_WAIT_UNTIL(atomic_load(&tw.tid) != 0 && thread_sleeping(atomic_load(&tw.tid)), 1000);
        dt_proxy_delay(&px, 0, 0);
        dt_proxy_reset(&px, 0); /* the ping finds it dead */
        DT_WAIT_UNTIL(atomic_load(&tw.w.done), 9000);
        pthread_join(t, NULL);
        CHECK_RC(atomic_load(&tw.w.rc), DLOCK_OK);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_proxy_stop(&px);
}

/* Fences keep increasing when the lock's row of dlock_fence is deleted
 * (an operator's DELETE): before, the counter started again from 1 (the
 * fault suite's drop_lock on postgres, seed 7: a fence below one handed
 * out before). */
static void fence_after_row_deleted(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "rd", 0);
    uint64_t last = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
        CHECK_INT(dlock_lock_fence(l), >, last);
        last = dlock_lock_fence(l);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dt_server_cli(&srv, "-c \"DELETE FROM dlock_fence WHERE name = 'rd'\"");
    CHECK_INT(sql_number("SELECT count(*) FROM dlock_fence WHERE name = 'rd'"), ==, 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, last);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- hand-over */

/* The release (one statement: the row's lease ended, then the advisory
 * lock; README.md: what a cycle costs) leaves the row's lease ended, so a
 * try of another client takes the lock at once, with a higher fence; and a
 * client's second cycle on one connection runs the prepared statements. */
static void release_ends_lease(void)
{
    dlock_client *c = client(NULL), *h = client(NULL);
    dlock_lock *a = dt_lock(c, "handover", 0), *b = dt_lock(h, "handover", 0);
    for (int round = 0; round < 2; round++) {
        CHECK_RC(dlock_try_acquire(a), DLOCK_OK);
        CHECK_INT(sql_number("SELECT count(*) FROM dlock_fence WHERE name = 'handover' AND "
                             "expires > clock_timestamp()"),
                  ==, 1);
        CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
        CHECK_RC(dlock_release(a), DLOCK_OK);
        CHECK_INT(advisory_rows("handover", 1), ==, 0);
        CHECK_INT(sql_number("SELECT count(*) FROM dlock_fence WHERE name = 'handover' AND "
                             "expires <= clock_timestamp()"),
                  ==, 1);
        CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
        CHECK_INT(dlock_lock_fence(b), >, dlock_lock_fence(a));
        CHECK_RC(dlock_release(b), DLOCK_OK);
    }
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* A name released on a connection that holds other locks stays free: the
 * connection's renewal renews every row naming it, and the release left
 * the row naming it, so the renewal started the released lease again and
 * another client's try was refused for a lease after the release. */
static void released_not_renewed(void)
{
    dlock_client *c = client("?lease=3s"), *h = client(NULL);
    dlock_lock *a = dt_lock(c, "rn-a", 0), *b = dt_lock(c, "rn-b", 0);
    dlock_lock *other = dt_lock(h, "rn-a", 0);
    CHECK_RC(dlock_try_acquire(a), DLOCK_OK);
    /* a try shares a's connection, unless that connection was busy for a
     * moment (its watcher, a ping: under load): then another try */
    long long conns = 0;
    for (int tries = 0; tries < 50; tries++) {
        CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
        conns = sql_number("SELECT count(DISTINCT holder) FROM dlock_fence WHERE name IN "
                           "('rn-a', 'rn-b')");
        if (conns == 1)
            break;
        CHECK_RC(dlock_release(b), DLOCK_OK);
        dt_sleep_ms(10);
    }
    CHECK_INT(conns, ==, 1);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    long long before = sql_number(
        "SELECT (extract(epoch FROM expires) * 1000000)::bigint FROM dlock_fence WHERE name = "
        "'rn-b'");
    /* a renewal of b's connection (every second) */
    DT_WAIT_UNTIL(sql_number("SELECT (extract(epoch FROM expires) * 1000000)::bigint FROM "
                             "dlock_fence WHERE name = 'rn-b'") > before,
                  5000);
    CHECK_INT(sql_number("SELECT count(*) FROM dlock_fence WHERE name = 'rn-a' AND expires > "
                         "clock_timestamp()"),
              ==, 0);
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(other);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* ---------------------------------------------------------------- connections */

/* Advisory locks re-enter per connection: two handles of one client on one
 * name must not share the connection that holds it (they exclude each
 * other); locks of different names share connections (a client holding 8
 * does not need 8). */
static void shared_connections(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *a1 = dt_lock(c, "same", 0), *a2 = dt_lock(c, "same", 0);
    CHECK_RC(dlock_try_acquire(a1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(a2), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(a2, 300), DLOCK_ETIMEDOUT);
    dlock_lock *many[8];
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "many-%d", i);
        many[i] = dt_lock(c, name, 0);
        CHECK_RC(dlock_try_acquire(many[i]), DLOCK_OK);
    }
    long long conns = sql_number("SELECT count(*) FROM pg_stat_activity WHERE application_name "
                                 "= 'dlock'");
    printf("shared connections: 9 locks held on %lld connections\n", conns);
    CHECK_INT(conns, <=, 3);
    CHECK_RC(dlock_try_acquire(a2), DLOCK_EBUSY);
    CHECK_RC(dlock_release(a1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(a2), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(a2), >, dlock_lock_fence(a1));
    for (int i = 0; i < 8; i++) {
        CHECK_INT(advisory_rows(dlock_lock_name(many[i]), 1), ==, 1);
        CHECK_RC(dlock_release(many[i]), DLOCK_OK);
        CHECK_INT(advisory_rows(dlock_lock_name(many[i]), 1), ==, 0);
        dlock_lock_free(many[i]);
    }
    CHECK_RC(dlock_release(a2), DLOCK_OK);
    dlock_lock_free(a1);
    dlock_lock_free(a2);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- bad input */

static void bad_input(void)
{
    char url[300];
    dlock_client *c = NULL;
    dlock_lock *l;

    snprintf(url, sizeof url, "postgres://dlock:wrong@127.0.0.1:%d/postgres", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "password authentication failed") != NULL);
    CHECK(strstr(dlock_errmsg(), "a wrong password") != NULL);
    /* the server's words, not libpq's layout ("FATAL:  ", its own host) */
    if (strstr(dlock_errmsg(), "FATAL") != NULL || strstr(dlock_errmsg(), "  ") != NULL ||
        strstr(dlock_errmsg(), "connection to server at") != NULL)
        dt_fail(__FILE__, __LINE__, "libpq's layout shows: %s", dlock_errmsg());
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* no password, to a server that wants one, and SSL asked of a server
     * without it: refused as a wrong password is (not an outage waited
     * out: that was EUNREACHABLE, exit 69), saying what to do */
    unsetenv("PGPASSWORD");
    setenv("PGPASSFILE", "/nonexistent/dlock-test-pgpass", 1);
    snprintf(url, sizeof url, "postgres://dlock@127.0.0.1:%d/postgres", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "wants a password") != NULL);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    dlock_lock_free(l);
    dlock_client_close(c);
    snprintf(url, sizeof url, "%s?sslmode=require", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "sslmode=prefer") != NULL);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    dlock_lock_free(l);
    dlock_client_close(c);
    /* a mode libpq does not know: a bad URL */
    snprintf(url, sizeof url, "%s?sslmode=required", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "unknown sslmode 'required' (did you mean sslmode=require? "
                                 "want sslmode=disable") != NULL);

    snprintf(url, sizeof url, "postgresql://dlock:dlock@127.0.0.1:%d/nosuchdb", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "\"nosuchdb\" does not exist") != NULL);
    CHECK(strstr(dlock_errmsg(), "names no database") == NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
    /* no database: libpq asks for the user's name as one, and is told so */
    unsetenv("PGDATABASE");
    snprintf(url, sizeof url, "postgresql://dlock:dlock@127.0.0.1:%d", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "the URL names no database") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);

    snprintf(url, sizeof url, "%s?mode=rows", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "unknown mode 'rows'") != NULL);
    snprintf(url, sizeof url, "%s?mode=table", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_client_close(c);
    /* a refusal names the mode, and the URL keeps it: the default table
     * mode of another store could do a fixed lease */
    snprintf(url, sizeof url, "%s?mode=session", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    CHECK_RC(dlock_acquire_for(l, 1000, 1000), DLOCK_ENOTSUP);
    CHECK(strstr(dlock_errmsg(), "?mode=session: PostgreSQL in session mode cannot do") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* nobody listens: unreachable, within the core's bound for a store
     * never reached */
    snprintf(url, sizeof url, "postgres://dlock:dlock@127.0.0.1:%d/postgres", dt_free_port());
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 30000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 3000);
    CHECK(strstr(dlock_errmsg(), "Connection refused. Is the server running") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- processes */

/* Processes increment a counter through the lock, each write fenced (a
 * fence not above the last one written is refused): exact count, never two
 * inside at once, no stale fence. */
static void fenced_processes(void)
{
    dt_fenced_processes(srv.url, "procs", 6, 25);
}

/* ---------------------------------------------------------------- table mode */

/* mode=table: an operator deletes the lock's row; the holder is told at its
 * next renewal, and the next holder's fence is still larger than the lost
 * one's (the fence does not start again with the row: ../sqltable). */
static void table_deleted_row(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("?mode=table&lease=1s"), *c2 = client("?mode=table");
    dlock_lock *l = dt_lock(c, "tdel", 0), *l2 = dt_lock(c2, "tdel", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_EBUSY);
    CHECK_INT(sql_number("SELECT count(*) FROM dlock_lock WHERE name = 'tdel'::bytea"), ==, 1);
    int64_t t0 = dt_now_ms();
    dt_server_cli(&srv, "-c \"DELETE FROM dlock_lock WHERE name = 'tdel'::bytea\"");
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 3000);
    printf("deleted: loss reported after %lld ms: %s\n", (long long) (dt_now_ms() - t0), box.why);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l2), >, fence);
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* dlock's tables dropped under a client that made them (a database wiped
 * and restarted under it: the fault suite's wiped restart-server, seed 7):
 * the next grant on a pooled connection, and the set-up of a new
 * connection, make them again. Before, both failed with "relation does
 * not exist" until another client made them. */
static void tables_dropped(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "td", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_server_cli(&srv, "-c 'DROP TABLE dlock_fence, dlock_owner'");
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK); /* the pooled connection's grant */
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_server_cli(&srv, "-c 'DROP TABLE dlock_fence, dlock_owner'");
    CHECK_INT(sql_number("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM "
                         "pg_stat_activity WHERE application_name = 'dlock'"),
              >=, 1);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK); /* a new connection's set-up */
    CHECK_INT(sql_number("SELECT count(*) FROM dlock_fence WHERE name = 'td'"), ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Table mode's tables dropped under a running client (a database wiped
 * under it): its next take makes them again, on a pooled connection whose
 * statements were prepared before the drop, and takes the lock. */
static void table_tables_dropped(void)
{
    dlock_client *c = client("?mode=table");
    dlock_lock *l = dt_lock(c, "ttd", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_server_cli(&srv, "-c 'DROP TABLE dlock_lock, dlock_lock_wait, dlock_fence, dlock_owner'");
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(sql_number("SELECT count(*) FROM dlock_lock WHERE name = 'ttd'::bytea AND "
                         "owner <> ''::bytea"),
              ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* One lock per name across the modes: a session holder (an advisory
 * lock) blocks a table-mode take of the same name, and a table holder (a
 * row of dlock_lock) blocks a session grant; each gets the lock once the
 * other released it. */
static void modes_exclude(void)
{
    dlock_client *sc = client(NULL), *tc = client("?mode=table");
    dlock_lock *sl = dt_lock(sc, "both", 0), *tl = dt_lock(tc, "both", 0);
    /* session first (the lock table may not be there yet) */
    CHECK_RC(dlock_acquire(sl, 5000), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(tl, 300), DLOCK_ETIMEDOUT);
    CHECK_RC(dlock_release(sl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    /* a session grant sees the table holder, on a connection that looked
     * before the table was made and on a new one */
    dlock_client *sc2 = client(NULL);
    dlock_lock *sl2 = dt_lock(sc2, "both", 0);
    CHECK_RC(dlock_try_acquire(sl), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(sl2), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(sl, 300), DLOCK_ETIMEDOUT);
    CHECK_INT(advisory_rows("both", 1), ==, 0); /* given back */
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    CHECK_RC(dlock_acquire(sl2, 5000), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_EBUSY);
    CHECK_RC(dlock_release(sl2), DLOCK_OK);
    /* a session waiter gets it when the table holder releases */
    CHECK_RC(dlock_acquire(tl, 5000), DLOCK_OK);
    struct waiter w = {.l = sl, .wait_ms = 10000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 8000);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_EBUSY);
    CHECK_RC(dlock_release(sl), DLOCK_OK);
    /* other names are not touched */
    dlock_lock *other = dt_lock(tc, "both2", 0);
    CHECK_RC(dlock_acquire(sl, 5000), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    CHECK_RC(dlock_release(sl), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(sl);
    dlock_lock_free(sl2);
    dlock_lock_free(tl);
    dlock_client_close(sc);
    dlock_client_close(sc2);
    dlock_client_close(tc);
}

/* Status and holders through either mode's URL name the holder in the
 * other mode (one lock per name): a waiter's notice said "with waiters
 * ahead in its queue", status "free" (the new-user trial). The last fence
 * is the holder's or above. */
static void status_across_modes(void)
{
    dlock_client *sc = client(NULL), *tc = client("?mode=table");
    dlock_lock *sl = dt_lock(sc, "xmode", 0), *tl = dt_lock(tc, "xmode", 0);
    for (int table_holds = 0; table_holds < 2; table_holds++) {
        dlock_lock *held = table_holds ? tl : sl;
        dlock_client *seer = table_holds ? sc : tc;
        CHECK_RC(dlock_acquire(held, 5000), DLOCK_OK);
        dlock_status st = dt_query(seer, "xmode", 0);
        dt_holders hs = dt_query_holders(seer, "xmode", 0);
        if (!st.held || strcmp(st.owner, dlock_lock_token(held)) != 0 ||
            st.last_fence < dlock_lock_fence(held) || hs.n != 1 ||
            strcmp(hs.h[0].owner, dlock_lock_token(held)) != 0 || hs.h[0].pid != (long) getpid())
            dt_fail(__FILE__, __LINE__,
                    "held in %s mode by %s (fence %llu): the other mode's status says %s, owner "
                    "'%s', last fence %llu, %d holders ('%s', pid %ld)",
                    table_holds ? "table" : "session", dlock_lock_token(held),
                    (unsigned long long) dlock_lock_fence(held), st.held ? "held" : "free",
                    st.owner, (unsigned long long) st.last_fence, hs.n,
                    hs.n > 0 ? hs.h[0].owner : "", hs.n > 0 ? hs.h[0].pid : 0L);
        /* a session holder lives with its connection: no lease to show;
         * a table holder's lease runs */
        if (table_holds)
            CHECK_INT(st.lease_ms, >, 0);
        else
            CHECK_INT(st.lease_ms, ==, -1);
        CHECK_RC(dlock_release(held), DLOCK_OK);
        st = dt_query(seer, "xmode", 0);
        CHECK_INT(st.held, ==, 0);
        CHECK_INT(dt_query_holders(seer, "xmode", 0).n, ==, 0);
    }
    dlock_lock_free(sl);
    dlock_lock_free(tl);
    dlock_client_close(sc);
    dlock_client_close(tc);
}

/* One lock per name across the modes when a session holder's connection
 * was ended in the server: its row's lease still runs (the holder learns
 * at its next renewal), and a table take waits for it as a session grant
 * does, so the holder is told before the table holder gets the lock. */
static void table_waits_session_lease(void)
{
    dt_lost_box box = {0};
    dlock_client *sc = client("?lease=2s"), *tc = client("?mode=table&lease=2s");
    dlock_lock *ls = dt_lock(sc, "dropped", 0), *lt = dt_lock(tc, "dropped", 0);
    dlock_lock_on_lost(ls, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(ls, 5000), DLOCK_OK);
    CHECK_INT(terminate_holders("dropped"), ==, 1);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(lt), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(lt, 5000), DLOCK_OK);
    int64_t got = dt_now_ms();
    printf("table take after a dropped session holder: %lld ms; the holder told after %lld ms\n",
           (long long) (got - t0), (long long) (atomic_load(&box.at_ms) - t0));
    CHECK_INT(atomic_load(&box.lost), ==, 1);
    CHECK_INT(atomic_load(&box.at_ms), <=, got);
    CHECK_RC(dlock_release(lt), DLOCK_OK);
    CHECK_RC(dlock_release(ls), DLOCK_ELOST);
    dlock_lock_free(ls);
    dlock_lock_free(lt);
    dlock_client_close(sc);
    dlock_client_close(tc);
}

/* A downgrade (dlock.h, DLOCK_READ): the writer's owner takes the read
 * lock beside its write (on the writer's connection, which has the key),
 * then lets the write go; other readers then share, a writer waits. Both
 * rows' leases are renewed meanwhile. Before, the read was DLOCK_EDEADLK. */
static void downgrade(void)
{
    dlock_client *c = client("?lease=1s"), *c2 = client(NULL);
    dlock_lock *w = dt_lock(c, "down", DLOCK_WRITE), *r2 = dt_lock(c2, "down", DLOCK_READ);
    dlock_lock *w2 = dt_lock(c2, "down", DLOCK_WRITE), *down = NULL, *again = NULL, *up = NULL;
    CHECK_RC(dlock_acquire(w, 5000), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &down), DLOCK_OK);
    CHECK_RC(dlock_acquire(down, 5000), DLOCK_OK); /* a wait: served at once */
    CHECK_INT(dlock_lock_fence(down), >, dlock_lock_fence(w));
    /* a second read beside the write: refused, nothing lost */
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &again), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(again), DLOCK_EDEADLK);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_EBUSY); /* the write still holds */
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    /* both leases renewed: three leases later, the write still holds and
     * its row's lease runs */
    int64_t until = dt_now_ms() + 3000;
    while (dt_now_ms() < until) {
        CHECK_RC(dlock_lock_check(w), DLOCK_OK);
        CHECK_RC(dlock_lock_check(down), DLOCK_OK);
        dt_sleep_ms(100);
    }
    CHECK_INT(sql_number("SELECT count(*) FROM dlock_fence WHERE name = 'down' AND expires > "
                         "clock_timestamp() + interval '300 milliseconds'"),
              ==, 1);
    CHECK_INT(sql_number("SELECT count(*) FROM dlock_share WHERE name = 'down' AND expires > "
                         "clock_timestamp() + interval '300 milliseconds'"),
              ==, 1);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_INT(advisory_rows("down", 1), ==, 1); /* the read's, shared */
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    CHECK_INT(dt_query(c2, "down", DLOCK_READ).shared, ==, 2);
    /* a reader asking to write would still wait for itself */
    CHECK_RC(dlock_lock_dup(down, DLOCK_WRITE, &up), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(up), DLOCK_EDEADLK);
    CHECK_RC(dlock_release(down), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(w2), >, dlock_lock_fence(down));
    CHECK_RC(dlock_release(w2), DLOCK_OK);
    dlock_lock_free(up);
    dlock_lock_free(again);
    dlock_lock_free(down);
    dlock_lock_free(w);
    dlock_lock_free(w2);
    dlock_lock_free(r2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A raw connection's one-number answer (-1 when it failed). */
static long long pq_number(PGconn *pq, const char *sql)
{
    PGresult *r = PQexec(pq, sql);
    long long n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                      ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
                      : -1;
    PQclear(r);
    return n;
}

struct releaser {
    dlock_lock *l;
    _Atomic int rc;
};

static void *release_thread(void *arg)
{
    struct releaser *r = arg;
    atomic_store(&r->rc, dlock_release(r->l));
    return NULL;
}

struct downgrader {
    dlock_lock *l;
    _Atomic int tid;
    _Atomic int rc;
};

static void *downgrade_thread(void *arg)
{
    struct downgrader *d = arg;
    atomic_store(&d->tid, (int) gettid());
    atomic_store(&d->rc, dlock_try_acquire(d->l));
    return NULL;
}

/* Whether thread tid of this process is blocked in futex() (a mutex). */
static int in_futex(int tid)
{
    char path[64], line[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    int ok = fgets(line, sizeof line, f) != NULL && atol(line) == SYS_futex;
    fclose(f);
    return ok;
}

/* The downgrade's read of downgrade_other_owner: a thread that runs only
 * when its CPU has nothing else to run (SCHED_IDLE; the test's threads
 * share one CPU), so that once woken it still comes after what the main
 * thread does next without sleeping. */
static void *downgrade_idle_thread(void *arg)
{
    struct downgrader *d = arg;
    struct sched_param sp = {0};
    (void) pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    atomic_store(&d->tid, (int) gettid());
    atomic_store(&d->rc, dlock_try_acquire(d->l));
    return NULL;
}

struct down_helper {
    PGconn *pq;
    struct downgrader *d;
    pthread_t dt;
    _Atomic int ok; /* 1: the read was seen waiting and the release let go */
};

/* Starts the read once the release is held up in the server, and lets the
 * release go once the read waits for the connection's mutex. */
static void *down_helper_thread(void *arg)
{
    struct down_helper *h = arg;
    int64_t until = dt_now_ms() + 5000;
    while (dt_now_ms() < until &&
           pq_number(h->pq, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = "
                            "'advisory' AND objid = 424244") < 1)
        dt_sleep_ms(5);
    if (pthread_create(&h->dt, NULL, downgrade_idle_thread, h->d) != 0)
        return NULL;
    while (dt_now_ms() < until &&
           !(atomic_load(&h->d->tid) != 0 && in_futex(atomic_load(&h->d->tid))))
        dt_sleep_ms(5);
    int waited = atomic_load(&h->d->tid) != 0 && in_futex(atomic_load(&h->d->tid));
    int let_go =
        pq_number(h->pq, "SELECT count(*) FROM (SELECT pg_advisory_unlock(424244)) x") == 1;
    atomic_store(&h->ok, waited && let_go);
    return NULL;
}

/* ---------------------------------------------------------------- held up in the server */

/* A function of the server shadowed on the clients opened after
 * shadow_on(): schema.fn(k bigint), which first waits for the advisory
 * lock gate (the test holds it: the caller is held up in the server until
 * the test lets it go) when k is key (0: always), then does what
 * pg_catalog.fn does. */
static void shadow_pause(PGconn *pq, const char *schema, const char *fn, long long key, int gate)
{
    char sql[1200], cond[64];
    snprintf(cond, sizeof cond, key != 0 ? "k = %lld" : "true", key);
    snprintf(sql, sizeof sql,
             "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s; CREATE FUNCTION %s.%s(k bigint) "
             "RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$ BEGIN IF %s THEN PERFORM "
             "pg_catalog.pg_advisory_lock_shared(%d); PERFORM "
             "pg_catalog.pg_advisory_unlock_shared(%d); END IF; RETURN pg_catalog.%s(k); END $f$",
             schema, schema, schema, fn, cond, gate, gate, fn);
    PGresult *r = PQexec(pq, sql);
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK);
    PQclear(r);
}

/* The connections made from now on find schema's functions first. */
static void shadow_on(PGconn *pq, const char *schema)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "DO $d$ BEGIN EXECUTE format('ALTER DATABASE %%I SET search_path = public, %s, "
             "pg_catalog', current_database()); END $d$",
             schema);
    PGresult *r = PQexec(pq, sql);
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK);
    PQclear(r);
}

static void shadow_off(PGconn *pq, const char *schema)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "DO $d$ BEGIN EXECUTE format('ALTER DATABASE %%I RESET search_path', "
             "current_database()); END $d$; DROP SCHEMA %s CASCADE",
             schema);
    PGresult *r = PQexec(pq, sql);
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK);
    PQclear(r);
}

/* Race 2 of review37 (e0fbd7e) itself: the owner's write released while
 * the downgrade's read waits for the write's connection c, and another
 * owner's hold of the name taken on c (back in the pool) before the read
 * gets c's mutex. Before, the read then went beside that hold on c (a
 * session's own advisory locks re-enter; the name's row names c): both
 * held. Now it goes the ordinary way and is refused. The order is made so:
 * the release is held up in the server (pg_advisory_unlock shadowed on
 * this client, as in downgrade_beside_released) while the read comes and
 * waits for c's mutex; the read's thread runs only when the one CPU the
 * test's threads share is idle, and the main thread, once its release
 * returns, takes the other owner's lock at once (it sleeps only in the
 * server's answer, holding c's mutex). */
static void downgrade_other_owner(void)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    CHECK_INT(sched_setaffinity(0, sizeof one, &one), ==,
              0); /* threads made from here inherit it */
    PGconn *pq = PQconnectdb(srv.url);
    CHECK(PQstatus(pq) == CONNECTION_OK);
    shadow_pause(pq, "dlock_pause_other", "pg_advisory_unlock",
                 (long long) dlock__pg_key("downother"), 424244);
    shadow_on(pq, "dlock_pause_other");
    dlock_client *c = client(NULL);
    dlock_lock *w = dt_lock(c, "downother", DLOCK_WRITE), *down = NULL;
    dlock_lock *other = dt_lock(c, "downother", DLOCK_WRITE); /* another owner */
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &down), DLOCK_OK);
    CHECK_RC(dlock_acquire(w, 5000), DLOCK_OK);

    CHECK_INT(pq_number(pq, "SELECT count(*) FROM (SELECT pg_advisory_lock(424244)) x"), ==, 1);
    struct downgrader d = {.l = down};
    struct down_helper h = {.pq = pq, .d = &d};
    pthread_t ht;
    CHECK_INT(pthread_create(&ht, NULL, down_helper_thread, &h), ==, 0);
    int rel_rc = dlock_release(w);
    int other_rc = dlock_try_acquire(other);
    pthread_join(ht, NULL);
    CHECK(atomic_load(&h.ok));
    pthread_join(h.dt, NULL);
    int down_rc = atomic_load(&d.rc);
    printf("release: %s; the other owner: %s; the read: %s\n", dlock_strerror(rel_rc),
           dlock_strerror(other_rc), dlock_strerror(down_rc));
    shadow_off(pq, "dlock_pause_other");
    PQfinish(pq);
    CHECK_RC(rel_rc, DLOCK_OK);
    CHECK(!(other_rc == DLOCK_OK && down_rc == DLOCK_OK));
    /* (the read first, had the scheduler not kept the order: then the
     * other owner is the one refused) */
    CHECK(other_rc == DLOCK_OK || down_rc == DLOCK_OK);
    CHECK_RC(dlock_release(other_rc == DLOCK_OK ? other : down), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(down);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* A downgrade whose write is released meanwhile by another thread of the
 * owner (race 2 of review37, e0fbd7e): the read found the write on its
 * connection c (dlock__pg_owner_clash), then waited for c's mutex, which
 * the release held. Once it had it, the write was gone from c; the read
 * still went beside it on c (a session's own advisory locks re-enter),
 * whatever c held then: nothing (DLOCK_EDEADLK, "reads it beside the
 * write already"), or another owner's hold of the name, taken there
 * meanwhile from the pool (both held). Now the read goes the ordinary
 * way. The release is held up in the server, its pg_advisory_unlock
 * shadowed on the writer's client (as reader_in_take_snapshot does) by a
 * function that waits for an advisory lock this test holds; the read
 * comes meanwhile, and is seen blocked on a mutex before the release is
 * let go. */
static void downgrade_beside_released(void)
{
    PGconn *pq = PQconnectdb(srv.url);
    CHECK(PQstatus(pq) == CONNECTION_OK);
    shadow_pause(pq, "dlock_pause_down", "pg_advisory_unlock",
                 (long long) dlock__pg_key("downrace"), 424243);
    shadow_on(pq, "dlock_pause_down");
    dlock_client *c = client(NULL);
    dlock_lock *w = dt_lock(c, "downrace", DLOCK_WRITE), *down = NULL;
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &down), DLOCK_OK);
    CHECK_RC(dlock_acquire(w, 5000), DLOCK_OK);

    CHECK_INT(pq_number(pq, "SELECT count(*) FROM (SELECT pg_advisory_lock(424243)) x"), ==, 1);
    struct releaser rel = {.l = w};
    pthread_t rt, dt;
    CHECK_INT(pthread_create(&rt, NULL, release_thread, &rel), ==, 0);
    /* the release in the server, its connection's mutex held */
    DT_WAIT_UNTIL(pq_number(pq, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = "
                                "'advisory' AND objid = 424243") > 0,
                  5000);
    struct downgrader d = {.l = down};
    CHECK_INT(pthread_create(&dt, NULL, downgrade_thread, &d), ==, 0);
    /* the read found the write, and waits for its connection */
    DT_WAIT_UNTIL(atomic_load(&d.tid) != 0 && in_futex(atomic_load(&d.tid)), 5000);
    CHECK_INT(pq_number(pq, "SELECT count(*) FROM (SELECT pg_advisory_unlock(424243)) x"), ==, 1);
    pthread_join(rt, NULL);
    pthread_join(dt, NULL);
    int down_rc = atomic_load(&d.rc);
    printf("release: %s; the read (after the write went): %s\n",
           dlock_strerror(atomic_load(&rel.rc)), dlock_strerror(down_rc));
    shadow_off(pq, "dlock_pause_down");
    CHECK_RC(atomic_load(&rel.rc), DLOCK_OK);
    /* an ordinary read: the name was free */
    CHECK_RC(down_rc, DLOCK_OK);
    CHECK_INT(advisory_rows("downrace", 1), ==, 1);
    /* and a read: a writer of another client is refused, another reader shares */
    dlock_client *c2 = client(NULL);
    dlock_lock *w2 = dt_lock(c2, "downrace", DLOCK_WRITE),
               *r2 = dt_lock(c2, "downrace", DLOCK_READ);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_RC(dlock_release(down), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_OK);
    CHECK_RC(dlock_release(w2), DLOCK_OK);
    PQfinish(pq);
    dlock_lock_free(w2);
    dlock_lock_free(r2);
    dlock_lock_free(down);
    dlock_lock_free(w);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/* A session reader's grant and a table take of one name in flight at
 * once: each looked at the other's table before the other committed (the
 * table take at dlock_share, the reader at the lock table), the shared
 * key excluded neither, and both held. Here the take is held up in
 * flight, past its guard, by a row lock a raw connection keeps on the
 * name's row of the lock table; the reader's try comes meanwhile, and the
 * row is let go. One of the two may have the name, never both. */
static void reader_beside_table_take(void)
{
    dlock_client *tc = client("?mode=table"), *sc = client(NULL);
    dlock_lock *tl = dt_lock(tc, "xrace", 0), *rl = dt_lock(sc, "xrace", DLOCK_READ);
    /* the row there, and the reader's connection has seen the table */
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(rl), DLOCK_OK);
    CHECK_RC(dlock_release(rl), DLOCK_OK);

    PGconn *pq = PQconnectdb(srv.url);
    CHECK(PQstatus(pq) == CONNECTION_OK);
    PGresult *r = PQexec(pq, "BEGIN; SELECT 1 FROM " DLOCK__SQLT_TABLE
                             " WHERE name = convert_to('xrace', 'UTF8') FOR UPDATE");
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1);
    PQclear(r);
    struct waiter take = {.l = tl, .wait_ms = 0}, read = {.l = rl, .wait_ms = 0};
    pthread_t tt, rt;
    CHECK_INT(pthread_create(&tt, NULL, wait_thread, &take), ==, 0);
    /* the take waits for the row, its guard passed (it holds the key) */
    DT_WAIT_UNTIL(pq_number(pq, "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid <> "
                                "pg_backend_pid()") > 0 &&
                      advisory_rows("xrace", 1) == 1,
                  5000);
    CHECK_INT(atomic_load(&take.done), ==, 0);
    CHECK_INT(pthread_create(&rt, NULL, wait_thread, &read), ==, 0);
    /* the reader's answer, or the reader waiting for the take's commit */
    DT_WAIT_UNTIL(atomic_load(&read.done) ||
                      pq_number(pq, "SELECT count(*) FROM pg_locks WHERE NOT granted AND "
                                    "locktype = 'advisory' AND objsubid = 2") > 0,
                  5000);
    r = PQexec(pq, "COMMIT");
    PQclear(r);
    PQfinish(pq);
    pthread_join(tt, NULL);
    pthread_join(rt, NULL);
    int took = atomic_load(&take.rc) == DLOCK_OK, read_ok = atomic_load(&read.rc) == DLOCK_OK;
    printf("table take: %s; reader: %s\n", dlock_strerror(atomic_load(&take.rc)),
           dlock_strerror(atomic_load(&read.rc)));
    CHECK(!(took && read_ok));
    CHECK_RC(atomic_load(&take.rc), DLOCK_OK); /* first in flight: its row */
    CHECK_RC(atomic_load(&read.rc), DLOCK_EBUSY);
    CHECK_RC(dlock_release(tl), DLOCK_OK);

    /* the other way: the reader held up in flight (its grant writes the
     * name's row of dlock_fence), and the table take's try meanwhile */
    pq = PQconnectdb(srv.url);
    CHECK(PQstatus(pq) == CONNECTION_OK);
    r = PQexec(pq, "BEGIN; SELECT 1 FROM dlock_fence WHERE name = 'xrace' FOR UPDATE");
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1);
    PQclear(r);
    read = (struct waiter){.l = rl, .wait_ms = 0};
    CHECK_INT(pthread_create(&rt, NULL, wait_thread, &read), ==, 0);
    DT_WAIT_UNTIL(pq_number(pq, "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid <> "
                                "pg_backend_pid()") > 0,
                  5000);
    int table_rc = dlock_try_acquire(tl);
    r = PQexec(pq, "COMMIT");
    PQclear(r);
    PQfinish(pq);
    pthread_join(rt, NULL);
    printf("reader: %s; table take: %s\n", dlock_strerror(atomic_load(&read.rc)),
           dlock_strerror(table_rc));
    CHECK(!(table_rc == DLOCK_OK && atomic_load(&read.rc) == DLOCK_OK));
    CHECK_RC(atomic_load(&read.rc), DLOCK_OK);
    CHECK_RC(table_rc, DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_EBUSY); /* the reader's lease, committed */
    CHECK_RC(dlock_release(rl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    dlock_lock_free(tl);
    dlock_lock_free(rl);
    dlock_client_close(tc);
    dlock_client_close(sc);
}

/* A table take in flight holds the name's key shared for its statement
 * (its guard): the table URL's status is not to call the name held for
 * it. It did ("pg pid N"), and conformance_postgres_table's fair_fifo
 * failed once in CI: a waiter that asked then took the name ahead of the
 * first holder. The take is held up in its guard (its first call shadowed
 * on its client's search_path, as reader_in_take_snapshot does) while
 * another table client asks. */
static void take_guard_not_a_holder(void)
{
    PGconn *pq = PQconnectdb(srv.url);
    CHECK(PQstatus(pq) == CONNECTION_OK);
    /* the guard's second try, of the two-int form (the name's key is held
     * by then) */
    PGresult *r = PQexec(
        pq, "DROP SCHEMA IF EXISTS dlock_pause_q CASCADE; CREATE SCHEMA dlock_pause_q; CREATE "
            "FUNCTION dlock_pause_q.pg_try_advisory_xact_lock_shared(a int4, b int4) RETURNS "
            "boolean LANGUAGE plpgsql VOLATILE AS $f$ BEGIN PERFORM "
            "pg_catalog.pg_advisory_lock_shared(424245); PERFORM "
            "pg_catalog.pg_advisory_unlock_shared(424245); RETURN "
            "pg_catalog.pg_try_advisory_xact_lock_shared(a, b); END $f$");
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK);
    PQclear(r);
    dlock_client *asker = client("?mode=table"); /* before the search_path: not held up */
    dlock_status st;
    CHECK_RC(dlock_query(asker, "guardq", 0, &st), DLOCK_OK);
    shadow_on(pq, "dlock_pause_q");
    dlock_client *tc = client("?mode=table");
    dlock_lock *tl = dt_lock(tc, "guardq", 0);
    CHECK_INT(pq_number(pq, "SELECT count(*) FROM (SELECT pg_advisory_lock(424245)) x"), ==, 1);
    struct waiter take = {.l = tl, .wait_ms = 0};
    pthread_t tt;
    CHECK_INT(pthread_create(&tt, NULL, wait_thread, &take), ==, 0);
    /* the take's guard held up in its statement, the name's key held */
    DT_WAIT_UNTIL(pq_number(pq, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = "
                                "'advisory' AND objid = 424245") > 0,
                  5000);
    int held = dlock_query(asker, "guardq", 0, &st) == DLOCK_OK ? st.held : -1;
    CHECK_INT(pq_number(pq, "SELECT count(*) FROM (SELECT pg_advisory_unlock(424245)) x"), ==, 1);
    pthread_join(tt, NULL);
    shadow_off(pq, "dlock_pause_q");
    PQfinish(pq);
    printf("a take in flight: status said held=%d; the take: %s\n", held,
           dlock_strerror(atomic_load(&take.rc)));
    CHECK_INT(held, ==, 0);
    CHECK_RC(atomic_load(&take.rc), DLOCK_OK);
    CHECK_RC(dlock_query(asker, "guardq", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 1); /* and once it holds, held */
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    dlock_lock_free(tl);
    dlock_client_close(tc);
    dlock_client_close(asker);
}

/* A statement's snapshot (READ COMMITTED) is taken when it starts. The
 * table take's guard tries the second key (which a reader's grant holds
 * exclusively until its commit) and then looks at dlock_share: if both
 * were in the take's one statement, a reader that committed between that
 * statement's start and its try of the second key would be unseen (the
 * try succeeds: the reader's grant is over) and both would hold. The take
 * is held up there by a function that shadows the guard's first call
 * (pg_try_advisory_xact_lock_shared(bigint), on the table client's
 * search_path only) and first waits for an advisory lock this test
 * holds; the reader takes the name meanwhile and commits. */
static void reader_in_take_snapshot(void)
{
    PGconn *pq = PQconnectdb(srv.url);
    CHECK(PQstatus(pq) == CONNECTION_OK);
    shadow_pause(pq, "dlock_pause", "pg_try_advisory_xact_lock_shared", 0, 424242);
    dlock_client *sc = client(NULL); /* before the search_path: the reader is not held up */
    dlock_lock *rl = dt_lock(sc, "snaprace", DLOCK_READ);
    CHECK_RC(dlock_try_acquire(rl), DLOCK_OK); /* the reader's connection made */
    CHECK_RC(dlock_release(rl), DLOCK_OK);
    shadow_on(pq, "dlock_pause");
    dlock_client *tc = client("?mode=table");
    dlock_lock *tl = dt_lock(tc, "snaprace", 0);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK); /* the row there; not held up */
    CHECK_RC(dlock_release(tl), DLOCK_OK);

    CHECK_INT(pq_number(pq, "SELECT count(*) FROM (SELECT pg_advisory_lock(424242)) x"), ==, 1);
    struct waiter take = {.l = tl, .wait_ms = 0};
    pthread_t tt;
    CHECK_INT(pthread_create(&tt, NULL, wait_thread, &take), ==, 0);
    /* the take's statement started, held up before its guard's tries */
    DT_WAIT_UNTIL(pq_number(pq, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = "
                                "'advisory' AND objid = 424242") > 0,
                  5000);
    int read_rc = dlock_try_acquire(rl); /* granted and committed meanwhile */
    CHECK_INT(pq_number(pq, "SELECT count(*) FROM (SELECT pg_advisory_unlock(424242)) x"), ==, 1);
    pthread_join(tt, NULL);
    int take_rc = atomic_load(&take.rc);
    printf("reader (while the take was held up): %s; table take: %s\n", dlock_strerror(read_rc),
           dlock_strerror(take_rc));
    shadow_off(pq, "dlock_pause");
    PQfinish(pq);
    CHECK(!(read_rc == DLOCK_OK && take_rc == DLOCK_OK));
    CHECK_RC(read_rc, DLOCK_OK);
    CHECK_RC(take_rc, DLOCK_EBUSY);
    CHECK_RC(dlock_release(rl), DLOCK_OK);
    dlock_lock_free(tl);
    dlock_lock_free(rl);
    dlock_client_close(tc);
    dlock_client_close(sc);
}

/* A server to crash, whose WAL writer waits 10 s between rounds: a commit
 * that does not wait for the WAL's flush stays in the server's memory until
 * the WAL writer's next round, or until the WAL page it is on is full (the
 * WAL writer is woken to write it), or another commit waits for the flush.
 * Ready once the WAL writer has done its first round (which would write
 * out whatever is there) and waits. */
static void crash_server_start(dt_server *crash)
{
    dt_server_start(crash, "postgres", 0, "-c", "wal_writer_delay=10000", NULL);
    DT_WAIT_UNTIL(strcmp(dt_server_cli(crash, "-c \"SELECT wait_event FROM pg_stat_activity "
                                              "WHERE backend_type = 'walwriter'\""),
                         "WalWriterMain") == 0,
                  10000);
}

/* Everything in the WAL so far is flushed, and what comes next starts a
 * new WAL segment (pg_switch_wal): a few commits that do not wait for the
 * flush then stay on its first page, unwritten, and a kill loses them. */
static void wal_switch(dt_server *crash)
{
    dt_server_cli(crash, "-c \"SELECT pg_switch_wal()\"");
}

/* A crash (kill -9 of the server) loses the commits of the last grants
 * (a grant's commit does not wait for the WAL's flush): the next grant's
 * fence is still larger than every fence handed out before the crash (the
 * server run's epoch, pg.c). Checked: the row's fence after the restart
 * is below the last one handed out (the grants were lost). */
static void crash_fence(void)
{
    dt_server crash;
    crash_server_start(&crash);
    /* a short lease: the first grant after the crash waits for one (the
     * run rule, lost_grant_lease) */
    dlock_client *c = dt_client(crash.url, "?lease=1s");
    dlock_lock *l = dt_lock(c, "crash", 0);
    /* the client's connection set up (its commit waits for the flush),
     * and the row on disk, before the grants to lose */
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    uint64_t last = dlock_lock_fence(l);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    wal_switch(&crash);
    for (int i = 0; i < 5; i++) {
        CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
        uint64_t f = dlock_lock_fence(l);
        CHECK(f > last);
        last = f;
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_restart(&crash, DT_KILL);
    /* the last grants' commits were lost (else this test shows nothing) */
    const char *row = dt_server_cli(&crash, "-c \"SELECT fence FROM dlock_fence WHERE name = "
                                            "'crash'\"");
    CHECK(strtoull(row, NULL, 10) < last);
    c = dt_client(crash.url, "?lease=1s");
    l = dt_lock(c, "crash", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK(dlock_lock_fence(l) > last);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&crash);
}

/* One row of dlock_fence on the crash server, as psql prints it. */
static long long crash_row(dt_server *crash, const char *what, const char *name)
{
    const char *out =
        dt_server_cli(crash, "-c \"SELECT %s FROM dlock_fence WHERE name = '%s'\"", what, name);
    return strtoll(out, NULL, 10);
}

/* A crash loses a grant's row write (its commit does not wait for the WAL's
 * flush): the holder and the lease it started. The holder's session died
 * with the server, but its process may think it holds until its lease
 * runs out; the first grant of the name after the restart must not come
 * before that (the run rule, pg.c), whether the row was lost whole (a
 * name new to the server) or shows its state before (an older row). A try
 * meanwhile finds the name held, in table mode too. After the rule's time,
 * grants are as before. */
static void lost_grant_lease(void)
{
    enum { LEASE_MS = 6000 };
    dt_server crash;
    crash_server_start(&crash);
    /* "old" has a row on disk before the crash (flushed by the next
     * connection's set-up) */
    dlock_client *c = dt_client(crash.url, "?lease=1s");
    dlock_lock *l = dt_lock(c, "old", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    long long old_fence = crash_row(&crash, "fence", "old");
    CHECK(old_fence > 0);

    /* the holder: its connection set up (a try of another name), then
     * granted both on it (tries: a second connection's set-up, whose
     * commit waits for the flush, would flush the first grant too), then
     * the server is killed at once */
    dlock_client *a = dt_client(crash.url, "?lease=6s");
    dlock_lock *la_new = dt_lock(a, "new", 0), *la_old = dt_lock(a, "old", 0);
    dlock_lock *la_warm = dt_lock(a, "warm", 0);
    CHECK_RC(dlock_acquire(la_warm, 0), DLOCK_OK);
    CHECK_RC(dlock_release(la_warm), DLOCK_OK);
    dlock_lock_free(la_warm);
    wal_switch(&crash);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(la_new, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(la_old, 0), DLOCK_OK);
    uint64_t fence_old = dlock_lock_fence(la_old);
    dt_server_restart(&crash, DT_KILL);
    int64_t restarted = dt_now_ms() - t0;
    /* both grants' writes were lost (else this test shows nothing) */
    CHECK_INT(crash_row(&crash, "count(*)", "new"), ==, 0);
    CHECK_INT(crash_row(&crash, "fence", "old"), ==, old_fence);

    dlock_client *b = dt_client(crash.url, "?lease=1s");
    dlock_lock *lb_new = dt_lock(b, "new", 0), *lb_old = dt_lock(b, "old", 0);
    /* the refusal names the crash: no holder is known (dlock status says
     * free), for a name with no row and for an older one */
    CHECK_RC(dlock_acquire(lb_new, 0), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "restarted after a crash") != NULL);
    CHECK_RC(dlock_acquire(lb_old, 0), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "restarted after a crash") != NULL);
    /* a table mode take too (one lock per name across the modes) */
    dlock_client *t = dt_client(crash.url, "?mode=table&lease=1s");
    dlock_lock *lt_old = dt_lock(t, "old", 0);
    CHECK_RC(dlock_acquire(lt_old, 0), DLOCK_EBUSY);
    dlock_lock_free(lt_old);
    dlock_client_close(t);
    /* waiters of both hold the keys while they wait out the rule's time:
     * status and holders name no holder (none is known) and count each as
     * a waiter (before, the waiter was named the holder, or an earlier
     * run's holder whose server pid it had) */
    struct waiter w_new = {.l = lb_new, .wait_ms = 15000}, w_old = {.l = lb_old, .wait_ms = 15000};
    pthread_t t_new, t_old;
    CHECK_INT(pthread_create(&t_new, NULL, wait_thread, &w_new), ==, 0);
    CHECK_INT(pthread_create(&t_old, NULL, wait_thread, &w_old), ==, 0);
    DT_WAIT_UNTIL(
        advisory_rows_of(&crash, "new", 1) == 1 && advisory_rows_of(&crash, "old", 1) == 1, 5000);
    dlock_client *op = dt_client(crash.url, NULL);
    dlock_status st_new = dt_query(op, "new", 0), st_old = dt_query(op, "old", 0);
    dt_holders hs_new = dt_query_holders(op, "new", 0), hs_old = dt_query_holders(op, "old", 0);
    int waited = !atomic_load(&w_new.done) && !atomic_load(&w_old.done);
    dlock_client_close(op);
    pthread_join(t_new, NULL);
    pthread_join(t_old, NULL);
    CHECK(waited); /* (the answers came while both waited) */
    CHECK_INT(st_new.held, ==, 0);
    CHECK_INT(st_new.waiters, ==, 1);
    CHECK_INT(hs_new.n, ==, 0);
    CHECK_INT(st_old.held, ==, 0);
    CHECK(st_old.owner[0] == '\0');
    CHECK_INT(st_old.waiters, ==, 1);
    CHECK_INT(hs_old.n, ==, 0);
    CHECK_RC(atomic_load(&w_new.rc), DLOCK_OK);
    CHECK_RC(atomic_load(&w_old.rc), DLOCK_OK);
    int64_t took_new = atomic_load(&w_new.ended_ms) - t0;
    int64_t took_old = atomic_load(&w_old.ended_ms) - t0;
    printf("after the crash (restarted %lld ms after the lost grants): granted again after "
           "%lld ms (a new name), %lld ms (an older row); the lost holder's lease %d ms\n",
           (long long) restarted, (long long) took_new, (long long) took_old, LEASE_MS);
    CHECK_INT(took_new, >=, LEASE_MS);
    CHECK_INT(took_old, >=, LEASE_MS);
    CHECK(dlock_lock_fence(lb_old) > fence_old);
    /* rows written in this run are exact: a hand-over waits for nothing */
    CHECK_RC(dlock_release(lb_new), DLOCK_OK);
    dlock_lock *again = dt_lock(b, "new", 0);
    CHECK_RC(dlock_acquire(again, 0), DLOCK_OK);
    CHECK_RC(dlock_release(again), DLOCK_OK);
    dlock_lock_free(again);
    CHECK_RC(dlock_release(lb_old), DLOCK_OK);
    dlock_lock_free(lb_new);
    dlock_lock_free(lb_old);
    dlock_client_close(b);
    dlock_lock_free(la_new);
    dlock_lock_free(la_old);
    dlock_client_close(a);
    dt_server_stop(&crash);
}

/* mode=table, issue 23: a waiter behind a holder is woken by the
 * release's NOTIFY (listen.c), not by polling: while it waits it sends
 * next to nothing (its place's heartbeat; a polling waiter sent ~12
 * requests a second), and it has the lock soon after the release. */
static void table_waiter_notified(void)
{
    dt_proxy px;
    char url[256];
    dlock_client *w = NULL;
    dt_proxy_start(&px, srv.port, 1);
    dt_server_url_at(&srv, px.ports[0], url, sizeof url - 64);
    strcat(url, "?mode=table&lease=10s");
    CHECK_RC(dlock_client_open(url, &w), DLOCK_OK);
    dlock_client *h = client("?mode=table&lease=10s");
    dlock_lock *hl = dt_lock(h, "tn", 0), *l = dt_lock(w, "tn", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    struct waiter wt = {.l = l, .wait_ms = 20000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &wt), ==, 0);
    DT_WAIT_UNTIL(sql_number("SELECT count(*) FROM dlock_lock_wait WHERE expires > now()") == 1,
                  5000);
    long long before, after, bytes;
    dt_sleep_ms(200); /* its wake-up connection made, it parks */
    dt_proxy_sent(&px, 0, &before, &bytes);
    dt_sleep_ms(2000); /* the window measured */
    dt_proxy_sent(&px, 0, &after, &bytes);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&wt.done), 5000);
    pthread_join(t, NULL);
    long long took = atomic_load(&wt.ended_ms) - t0;
    printf("table mode: %lld requests in 2 s of waiting; granted %lld ms after the release\n",
           after - before, took);
    CHECK_RC(atomic_load(&wt.rc), DLOCK_OK);
    CHECK_INT(after - before, <=, 4);
    CHECK_INT(took, <, 1000);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(w);
    dlock_client_close(h);
    dt_proxy_stop(&px);
}

/* ---------------------------------------------------------------- first in line */

/* mode=table, issue 23: a free row goes to the oldest live waiter, so a
 * plain waiter and a multi-lock waiter on a name that other clients take
 * in tight loops are served within their budget, and the clients in the
 * loops in turn (tests/support/hot_name.c). */
static void table_waiter_not_starved(void)
{
    dt_hot_name_serves_waiters(srv.url, "?mode=table&lease=5s");
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"key_mapping", key_mapping},
        {"terminated_holder", terminated_holder},
        {"status_while_lease_waited_out", status_while_lease_waited_out},
        {"terminated_holder_told_at_once", terminated_holder_told_at_once},
        {"released_after_terminate", released_after_terminate},
        {"blocked_wait", blocked_wait},
        {"cancel_when_paused", cancel_when_paused},
        {"paused_shorter_than_lease", paused_shorter_than_lease},
        {"waiter_keeps_place", waiter_keeps_place},
        {"silent_server_under_wait", silent_server_under_wait},
        {"wait_end_does_not_spin", wait_end_does_not_spin},
        {"pooled_closed_by_ping", pooled_closed_by_ping},
        {"shared_connections", shared_connections},
        {"bad_input", bad_input},
        {"role_without_create", role_without_create},
        {"fenced_processes", fenced_processes},
        {"release_ends_lease", release_ends_lease},
        {"released_not_renewed", released_not_renewed},
        {"table_deleted_row", table_deleted_row},
        {"fence_after_row_deleted", fence_after_row_deleted},
        {"tables_dropped", tables_dropped},
        {"table_tables_dropped", table_tables_dropped},
        {"modes_exclude", modes_exclude},
        {"table_waits_session_lease", table_waits_session_lease},
        {"status_across_modes", status_across_modes},
        {"reader_lease_waited_out", reader_lease_waited_out}, /* (makes table mode's table) */
        {"reader_beside_table_take", reader_beside_table_take},
        {"reader_in_take_snapshot", reader_in_take_snapshot},
        {"take_guard_not_a_holder", take_guard_not_a_holder},
        {"downgrade", downgrade},
        {"downgrade_beside_released", downgrade_beside_released},
        {"downgrade_other_owner", downgrade_other_owner},
        {"force_by_kind", force_by_kind},
        {"status_by_kind", status_by_kind},
        {"reader_gone_status", reader_gone_status},
        {"crash_fence", crash_fence},
        {"lost_grant_lease", lost_grant_lease},
        {"table_waiter_not_starved", table_waiter_not_starved},
        {"table_waiter_notified", table_waiter_notified},
    };
    dt_server_start(&srv, "postgres", 0, NULL); /* once for every test (each a fork) */
    return DT_RUN(tests);
}
