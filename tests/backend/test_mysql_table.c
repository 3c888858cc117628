/* SPDX-License-Identifier: MIT */
/* test_mysql_table.c - the MariaDB/MySQL backend's lock table
 * (mysql://...?mode=table) against a real MariaDB started once for the
 * program: a holder frozen past its lease (SIGSTOP) loses the lock to the
 * next holder, with a larger fence, and is told; a row deleted by an
 * operator is reported lost and the next fence is still larger; many held
 * locks are renewed by one UPDATE (counted with the server's Com_update);
 * bad input (an unknown mode, a user who may not create the missing
 * table); a free row goes to the oldest live waiter (issue 23), and a
 * waiters' table of an earlier version gets its column since; a take that
 * fails part-way leaves no claim on the name (issue 23).
 *
 * The server is looked at and changed with the mariadb client
 * (dt_server_cli as the test's user; root on the server's own socket to
 * make users), never through the library. Tests that fork do so before
 * they open a client. */
#define _GNU_SOURCE
#include "../support/harness.h"
#include "../support/hot_name.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static dt_server srv;

static dlock_client *client(const char *options)
{
    char opts[200];
    snprintf(opts, sizeof opts, "?mode=table%s%s", options != NULL ? "&" : "",
             options != NULL ? options : "");
    return dt_client(srv.url, opts);
}

/* The mariadb client's one-line answer, as a number (-1: NULL or none). */
static long long sql_number(const char *sql)
{
    const char *out = dt_server_cli(&srv, "-e \"%s\"", sql);
    if (out[0] == '\0' || strncmp(out, "NULL", 4) == 0)
        return -1;
    return strtoll(out, NULL, 10);
}

/* ---------------------------------------------------------------- frozen */

/* A child holding name (as flags) with lease=1s, frozen (SIGSTOP) once it
 * holds: its pid, *fence its fence. Once it runs again (thaw) it waits to
 * be told of the loss, and its release must say ELOST. Called before any
 * client of this process. */
static pid_t frozen_child(const char *name, unsigned flags, unsigned long long *fence)
{
    int fds[2];
    CHECK_INT(pipe(fds), ==, 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dt_lost_box box = {0};
        dlock_client *c = client("lease=1s");
        dlock_lock *l = dt_lock(c, name, flags);
        dlock_lock_on_lost(l, dt_on_lost, &box);
        if (dlock_acquire(l, 5000) != DLOCK_OK)
            _exit(2);
        unsigned long long f = dlock_lock_fence(l);
        if (write(fds[1], &f, sizeof f) != (ssize_t) sizeof f)
            _exit(3);
        raise(SIGSTOP);
        int64_t until = dt_now_ms() + 5000;
        while (!atomic_load(&box.lost) && dt_now_ms() < until)
            usleep(10000);
        if (!atomic_load(&box.lost))
            _exit(4);
        if (dlock_release(l) != DLOCK_ELOST)
            _exit(5);
        dlock_lock_free(l);
        dlock_client_close(c);
        _exit(0);
    }
    close(fds[1]);
    *fence = 0;
    CHECK_INT(read(fds[0], fence, sizeof *fence), ==, (ssize_t) sizeof *fence);
    close(fds[0]);
    int status = 0;
    CHECK_INT(waitpid(pid, &status, WUNTRACED), ==, pid);
    CHECK(WIFSTOPPED(status));
    return pid;
}

/* The frozen child runs again: it was told it lost the lock. */
static void thaw(pid_t pid)
{
    int status = 0;
    CHECK_INT(kill(pid, SIGCONT), ==, 0);
    CHECK_INT(waitpid(pid, &status, 0), ==, pid);
    CHECK(WIFEXITED(status));
    CHECK_INT(WEXITSTATUS(status), ==, 0);
}

/* A holder frozen past its lease (SIGSTOP: no renewal) loses the lock to
 * the next taker, whose fence is larger, and once it runs again it is told
 * it lost it (its release says so too). */
static void frozen_holder(void)
{
    unsigned long long fence;
    pid_t pid = frozen_child("frozen", 0, &fence);
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "frozen", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
    printf("frozen: taken after %lld ms (the holder's lease: 1 s)\n",
           (long long) (dt_now_ms() - t0));
    CHECK_INT(dlock_lock_fence(l), >, fence);
    thaw(pid);
    /* the new holder kept it */
    CHECK_RC(dlock_lock_verify(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- deleted */

/* An operator deletes the lock's row: the holder is told at its next
 * renewal, and the next holder's fence is still larger than the lost
 * one's (the fence does not start again with the row). */
static void deleted_row(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("lease=1s"), *c2 = client(NULL);
    dlock_lock *l = dt_lock(c, "deleted", 0), *l2 = dt_lock(c2, "deleted", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_lock WHERE name = 'dlock:deleted'"), ==, 1);
    int64_t t0 = dt_now_ms();
    dt_server_cli(&srv, "-e \"DELETE FROM dlock_lock WHERE name = 'dlock:deleted'\"");
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

/* ---------------------------------------------------------------- batches */

#define MANY 40

/* MANY locks held by one client are renewed together: the server counts
 * an UPDATE per renewal (Com_update), not one per lock. A renewal is seen
 * as a change of a row's expiry. (Locks taken slowly, as under a sanitizer,
 * may take a renewal or two to fall into one batch: the bound is far below
 * one per lock, 3 * MANY, rather than exactly 3.) */
static void batched_renewal(void)
{
    dlock_client *c = client("lease=1500ms");
    dlock_lock *ls[MANY];
    char name[32];
    for (int i = 0; i < MANY; i++) {
        snprintf(name, sizeof name, "batch-%02d", i);
        ls[i] = dt_lock(c, name, 0);
        CHECK_RC(dlock_acquire(ls[i], 5000), DLOCK_OK);
    }
    const char *expiry = "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires) FROM dlock_lock "
                         "WHERE name = 'dlock:batch-00'";
    long long e = sql_number(expiry);
    for (int renewals = 0; renewals < 2; renewals++) { /* falling into step */
        long long prev = e;
        DT_WAIT_UNTIL((e = sql_number(expiry)) != prev, 3000);
    }
    long long u0 = sql_number("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
                              "VARIABLE_NAME = 'COM_UPDATE'");
    e = sql_number(expiry);
    for (int renewals = 0; renewals < 3; renewals++) {
        long long prev = e;
        DT_WAIT_UNTIL((e = sql_number(expiry)) != prev, 3000);
    }
    long long u1 = sql_number("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
                              "VARIABLE_NAME = 'COM_UPDATE'");
    printf("batches: %d locks, 3 renewals seen, %lld UPDATE statements\n", MANY, u1 - u0);
    /* 3 renewals seen (1 UPDATE each in a plain build), perhaps a 4th
     * under way; one per lock would be 3 * MANY */
    CHECK_INT(u1 - u0, >=, 3);
    CHECK_INT(u1 - u0, <, MANY / 2);
    for (int i = 0; i < MANY; i++) {
        CHECK_RC(dlock_lock_verify(ls[i]), DLOCK_OK);
        CHECK_RC(dlock_release(ls[i]), DLOCK_OK);
        dlock_lock_free(ls[i]);
    }
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- bad input */

/* As root on the server's own socket (the test's user may not make users). */
static void root_sql(const char *sql)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "mariadb --no-defaults --socket=%s/mysqld.sock -uroot -e \"%s\"",
             srv.dir, sql);
    CHECK_INT(system(cmd), ==, 0);
}

static void bad_input(void)
{
    dlock_client *c = NULL;
    char url[400];

    snprintf(url, sizeof url, "%s?mode=tables", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "unknown mode 'tables'") != NULL);

    /* a user with rights on the rows but not to create the missing table:
     * the first request says what is missing */
    root_sql("CREATE DATABASE IF NOT EXISTS weakdb; "
             "CREATE USER IF NOT EXISTS 'weak'@'127.0.0.1' IDENTIFIED BY 'weak'; "
             "GRANT SELECT, INSERT, UPDATE, DELETE ON weakdb.* TO 'weak'@'127.0.0.1'");
    snprintf(url, sizeof url, "mysql://weak:weak@127.0.0.1:%d/weakdb?mode=table", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "weak", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    printf("no CREATE: %s\n", dlock_errmsg());
    CHECK(strstr(dlock_errmsg(), "needs CREATE") != NULL);
    CHECK(strstr(dlock_errmsg(), "dlock_lock") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* the tables made by someone who may: the same user takes locks */
    root_sql("GRANT CREATE ON weakdb.* TO 'weak'@'127.0.0.1'");
    snprintf(url, sizeof url, "mysql://weak:weak@127.0.0.1:%d/weakdb?mode=table", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "weak", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    root_sql("REVOKE CREATE ON weakdb.* FROM 'weak'@'127.0.0.1'");
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "weak", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK); /* the tables are there: no CREATE needed */
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- both modes */

struct waiter {
    dlock_lock *l;
    int64_t wait_ms;
    _Atomic int started, done, rc;
    _Atomic long long started_ms, ended_ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->started_ms, dt_now_ms());
    atomic_store(&w->started, 1);
    int rc = dlock_acquire(w->l, w->wait_ms);
    atomic_store(&w->ended_ms, dt_now_ms());
    atomic_store(&w->rc, rc);
    atomic_store(&w->done, 1);
    return NULL;
}

/* mysql://... (the lock table) and mysql://...?mode=session (GET_LOCK) are
 * one lock per name: a holder in either mode keeps the other mode's takers
 * out (a try is EBUSY, a wait with a budget times out) until it lets go,
 * and fences go on increasing across the modes. (They were two locks:
 * both held a name at once.) */
static dlock_client *session_client(void)
{
    char url[300];
    dlock_client *s = NULL;
    snprintf(url, sizeof url, "%s?mode=session", srv.url);
    CHECK_RC(dlock_client_open(url, &s), DLOCK_OK);
    return s;
}

/* A session holder keeps table takers out; a table waiter gets the lock
 * when it lets go, not before. */
static void session_holder_excludes_table(void)
{
    dlock_client *t = client(NULL), *s = session_client();
    dlock_lock *tl = dt_lock(t, "xs", 0), *sl = dt_lock(s, "xs", 0);
    CHECK_RC(dlock_acquire(sl, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(sl);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(tl, 300), DLOCK_ETIMEDOUT);
    CHECK_INT(dt_now_ms() - t0, >=, 290);
    CHECK_RC(dlock_release(sl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(tl), >, fence);
    CHECK_RC(dlock_release(tl), DLOCK_OK);

    CHECK_RC(dlock_acquire(sl, 5000), DLOCK_OK);
    struct waiter w = {.l = tl, .wait_ms = 10000};
    pthread_t th;
    CHECK_INT(pthread_create(&th, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(atomic_load(&w.started), 2000);
    DT_WAIT_UNTIL(dt_now_ms() - atomic_load(&w.started_ms) >= 300, 2000); /* a few polls */
    CHECK(!atomic_load(&w.done));
    int64_t released_at = dt_now_ms();
    CHECK_RC(dlock_release(sl), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 5000);
    pthread_join(th, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_OK);
    CHECK_INT(atomic_load(&w.ended_ms), >=, released_at);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    dlock_lock_free(tl);
    dlock_lock_free(sl);
    dlock_client_close(t);
    dlock_client_close(s);
}

/* A table holder keeps session takers out (and they leave no GET_LOCK
 * behind); a session taker after it gets a larger fence, and a table taker
 * after that a larger one again. */
static void table_holder_excludes_session(void)
{
    dlock_client *t = client(NULL), *s = session_client();
    dlock_lock *tl = dt_lock(t, "xt", 0), *sl = dt_lock(s, "xt", 0);
    CHECK_RC(dlock_acquire(tl, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(tl);
    CHECK_RC(dlock_try_acquire(sl), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(sl, 300), DLOCK_ETIMEDOUT);
    CHECK_INT(dt_now_ms() - t0, >=, 290);
    CHECK_INT(sql_number("SELECT IS_USED_LOCK('dlock:xt') IS NULL"), ==, 1);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(sl), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(sl), >, fence);
    fence = dlock_lock_fence(sl);
    CHECK_RC(dlock_release(sl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(tl), >, fence);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    dlock_lock_free(tl);
    dlock_lock_free(sl);
    dlock_client_close(t);
    dlock_client_close(s);
}

/* A session holder whose connection dropped (KILL from the server's side:
 * the named lock is free at once) may not know it yet: table takers wait
 * for its row's lease (1 s) as session takers do. */
static void table_waits_for_dropped_session_holder(void)
{
    char url[300];
    dlock_client *t = client(NULL), *s = NULL;
    snprintf(url, sizeof url, "%s?mode=session&lease=1s", srv.url);
    CHECK_RC(dlock_client_open(url, &s), DLOCK_OK);
    dlock_lock *tl = dt_lock(t, "xd", 0), *sl = dt_lock(s, "xd", 0);
    CHECK_RC(dlock_acquire(sl, 5000), DLOCK_OK);
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:xd')");
    CHECK_INT(id, >, 0);
    int64_t t0 = dt_now_ms();
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    DT_WAIT_UNTIL(sql_number("SELECT IS_USED_LOCK('dlock:xd')") == -1, 5000);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_EBUSY);
    DT_WAIT_UNTIL(dlock_try_acquire(tl) == DLOCK_OK, 3000);
    printf("dropped session holder: the table taker got the lock after %lld ms\n",
           (long long) (dt_now_ms() - t0));
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    dlock_lock_free(tl);
    dlock_lock_free(sl);
    dlock_client_close(t);
    dlock_client_close(s);
}

/* The tables dropped under clients that made them (a database wiped or
 * restored: the fault suite's restart with its data wiped): the next take
 * makes them again and succeeds, in either mode, rather than failing with
 * "table doesn't exist" until the client is opened again. */
static void tables_dropped(void)
{
    dlock_client *t = client(NULL), *s = session_client();
    dlock_lock *tl = dt_lock(t, "wiped", 0), *sl = dt_lock(s, "wiped2", 0);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(sl), DLOCK_OK);
    CHECK_RC(dlock_release(sl), DLOCK_OK);
    dt_server_cli(&srv, "-e \"DROP TABLE dlock_lock, dlock_lock_wait, dlock_fence\"");
    CHECK_INT(sql_number("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                         "DATABASE() AND TABLE_NAME LIKE 'dlock%'"),
              ==, 0);
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    dt_server_cli(&srv, "-e \"DROP TABLE dlock_lock, dlock_lock_wait, dlock_fence\"");
    CHECK_RC(dlock_acquire(sl, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(sl), DLOCK_OK);

    /* the shared holds' table too, once the client's takes name it: every
     * kind is taken again (a 600 s fault run: every take after a wiped
     * database failed on dlock_share, for good) */
    dlock_lock *rl = dt_lock(t, "wiped-r", DLOCK_READ), *sem = NULL;
    CHECK_RC(dlock_semaphore_open(t, "wiped-s", 2, 1, &sem), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(rl), DLOCK_OK);
    CHECK_RC(dlock_release(rl), DLOCK_OK);
    dt_server_cli(&srv, "-e \"DROP TABLE dlock_lock, dlock_lock_wait, dlock_fence, dlock_share\"");
    CHECK_RC(dlock_try_acquire(tl), DLOCK_OK);
    CHECK_RC(dlock_release(tl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(rl), DLOCK_OK);
    CHECK_RC(dlock_release(rl), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(sem), DLOCK_OK);
    CHECK_RC(dlock_release(sem), DLOCK_OK);
    dlock_lock_free(rl);
    dlock_lock_free(sem);
    dlock_lock_free(tl);
    dlock_lock_free(sl);
    dlock_client_close(t);
    dlock_client_close(s);
}

/* ---------------------------------------------------------------- first in line */

/* Issue 23 (the fault suite's seed 7: a multi-lock waiter not served in
 * 14 s): a waiter polls with a backoff that grows to 64 ms while a client
 * that has just released asks again at once, and used to lose every round.
 * A free row now goes to the oldest live waiter first: a plain waiter and
 * a multi-lock waiter on the hot name and another are each served well
 * within their budget beside clients taking the hot name in tight loops,
 * and every one of those is served too. */
static void waiter_not_starved(void)
{
    dt_hot_name_serves_waiters(srv.url, "?mode=table&lease=5s");
}

/* A free row waited for by an older live waiter is that waiter's: the
 * holder that releases cannot take it straight back, nor can a try. A
 * waiter that stops polling (a row of a client that is gone) claims the
 * name for the rest of its waiter lease, no longer; a lapsed row claims
 * nothing. */
static void free_name_goes_to_waiter(void)
{
    dlock_client *c = client("lease=5s"), *w = client("lease=5s");
    dlock_lock *h = dt_lock(c, "q", 0), *t = dt_lock(c, "q", 0), *wl = dt_lock(w, "q", 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    struct waiter wt = {.l = wl, .wait_ms = 5000};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_thread, &wt) == 0);
    DT_WAIT_UNTIL(dt_query(c, "q", 0).waiters == 1, 5000);
    CHECK_RC(dlock_release(h), DLOCK_OK);
    /* held by the waiter already, or left to it: either way not ours */
    CHECK_RC(dlock_try_acquire(t), DLOCK_EBUSY);
    printf("a try after the release, beside a waiter: %s\n", dlock_errmsg());
    pthread_join(th, NULL);
    CHECK_RC(atomic_load(&wt.rc), DLOCK_OK);
    CHECK_RC(dlock_release(wl), DLOCK_OK);

    /* a waiter that stopped polling: its row claims the free name until
     * its lease ends (1.5 s here), then a wait gets it */
    dt_server_cli(&srv, "-e \"INSERT INTO dlock_lock_wait (name, owner, lock_name, expires, since) "
                        "VALUES ('dlock:q', 'gone', 'q', UTC_TIMESTAMP(6) + INTERVAL 1500000 "
                        "MICROSECOND, UTC_TIMESTAMP(6))\"");
    CHECK_RC(dlock_try_acquire(t), DLOCK_EBUSY);
    /* (a try refused for a free name says why: status shows it free) */
    CHECK(strstr(dlock_errmsg(), "waiters are in line") != NULL);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(t, 5000), DLOCK_OK);
    int64_t took = dt_now_ms() - t0;
    printf("a wait behind a waiter that stopped polling (1500 ms left): %lld ms\n",
           (long long) took);
    CHECK_INT(took, >=, 1000);
    CHECK_INT(took, <, 3000);
    CHECK_RC(dlock_release(t), DLOCK_OK);

    /* a lapsed row claims nothing */
    dt_server_cli(&srv, "-e \"INSERT INTO dlock_lock_wait (name, owner, lock_name, expires, since) "
                        "VALUES ('dlock:q', 'lapsed', 'q', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, "
                        "'2000-01-01')\"");
    CHECK_RC(dlock_try_acquire(t), DLOCK_OK);
    CHECK_RC(dlock_release(t), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(t);
    dlock_lock_free(wl);
    dlock_client_close(c);
    dlock_client_close(w);
}

/* The bell (src/backend/mysql/bell.c): a holder that waited for its lock
 * rings one for its waiters, who wait for it in the server (GET_LOCK, not
 * polls) and go round when it lets go. A bell whose connection ended
 * (KILL) tells a waiter nothing: it polls, and does not take the live
 * holder's lock; the holder's release still succeeds. A force-unlock ends
 * the holder's bell, and the waiter takes the name. */
#define BELL_HOLDER                                                                                \
    "SELECT IS_USED_LOCK(CONCAT('dlock%', LEFT(SHA2(name, 256), 40), '.', HEX(fence))) FROM "      \
    "dlock_lock WHERE name = 'dlock:bell'"

static int waits_on_bell(void)
{
    return sql_number("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User "
                      "lock' AND INFO LIKE '%@dlock_b%'") >= 1;
}

static void bell_wakes_waiter(void)
{
    dlock_client *c = client("lease=5s"), *w = client("lease=5s");
    dlock_lock *x = dt_lock(c, "bell", 0), *a = dt_lock(w, "bell", 0), *b = dt_lock(c, "bell", 0),
               *d = dt_lock(w, "bell", 0);
    pthread_t th;

    /* a waits behind x, so that it rings a bell once it holds */
    CHECK_RC(dlock_acquire(x, 0), DLOCK_OK);
    struct waiter wa = {.l = a, .wait_ms = 10000};
    CHECK(pthread_create(&th, NULL, wait_thread, &wa) == 0);
    DT_WAIT_UNTIL(dt_query(c, "bell", 0).waiters == 1, 5000);
    CHECK_RC(dlock_release(x), DLOCK_OK);
    pthread_join(th, NULL);
    CHECK_RC(atomic_load(&wa.rc), DLOCK_OK);

    /* b waits for a's bell in the server */
    struct waiter wb = {.l = b, .wait_ms = 10000};
    CHECK(pthread_create(&th, NULL, wait_thread, &wb) == 0);
    DT_WAIT_UNTIL(waits_on_bell(), 5000);
    CHECK(!atomic_load(&wb.done));
    int64_t released_at = dt_now_ms();
    CHECK_RC(dlock_release(a), DLOCK_OK);
    pthread_join(th, NULL);
    CHECK_RC(atomic_load(&wb.rc), DLOCK_OK);
    CHECK_INT(atomic_load(&wb.ended_ms), >=, released_at);
    printf("b got the lock %lld ms after a's release\n",
           (long long) (atomic_load(&wb.ended_ms) - released_at));
    CHECK_INT(dlock_lock_fence(b), >, dlock_lock_fence(a));

    /* b rings one too; d waits for it; b's bell's connection killed */
    struct waiter wd = {.l = d, .wait_ms = 10000};
    CHECK(pthread_create(&th, NULL, wait_thread, &wd) == 0);
    DT_WAIT_UNTIL(waits_on_bell(), 5000);
    long long id = sql_number(BELL_HOLDER);
    CHECK_INT(id, >, 0);
    char kill[64];
    snprintf(kill, sizeof kill, "KILL %lld", id);
    root_sql(kill);
    /* d wakes, finds b's lease running and no bell: it polls on */
    DT_WAIT_UNTIL(!waits_on_bell(), 5000);
    dt_sleep_ms(300);
    CHECK(!atomic_load(&wd.done));
    CHECK_RC(dlock_lock_check(b), DLOCK_OK);
    released_at = dt_now_ms();
    CHECK_RC(dlock_release(b), DLOCK_OK);
    pthread_join(th, NULL);
    CHECK_RC(atomic_load(&wd.rc), DLOCK_OK);
    CHECK_INT(atomic_load(&wd.ended_ms), >=, released_at);
    CHECK_INT(dlock_lock_fence(d), >, dlock_lock_fence(b));

    /* d rings one (it waited); x waits for it; a force-unlock of d ends
     * d's bell (its connection killed), and x takes the name */
    struct waiter wx = {.l = x, .wait_ms = 10000};
    CHECK(pthread_create(&th, NULL, wait_thread, &wx) == 0);
    DT_WAIT_UNTIL(waits_on_bell(), 5000);
    long long bell_conn = sql_number(BELL_HOLDER);
    CHECK_INT(bell_conn, >, 0);
    CHECK_RC(dlock_force_unlock(c, "bell", 0), DLOCK_OK);
    char gone[160];
    snprintf(gone, sizeof gone,
             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %lld", bell_conn);
    DT_WAIT_UNTIL(sql_number(gone) == 0, 5000); /* killed, not left to d's release */
    pthread_join(th, NULL);
    CHECK_RC(atomic_load(&wx.rc), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(x), >, dlock_lock_fence(d));
    CHECK_RC(dlock_release(d), DLOCK_ELOST);
    CHECK_RC(dlock_release(x), DLOCK_OK);
    dlock_lock_free(x);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(d);
    dlock_client_close(c);
    dlock_client_close(w);
}

/* The waiters' table of an earlier dlock (no since) is upgraded by the
 * first client that needs it, and locks work as before. */
static void old_table_upgraded(void)
{
    dt_server_cli(&srv, "-e \"DROP TABLE IF EXISTS dlock_lock, dlock_lock_wait\"");
    dt_server_cli(&srv,
                  "-e \"CREATE TABLE dlock_lock (name VARBINARY(256) NOT NULL PRIMARY KEY, "
                  "lock_name VARBINARY(2048) NOT NULL, owner VARBINARY(255) NOT NULL, info TEXT "
                  "CHARACTER SET utf8mb4 NOT NULL, fence BIGINT UNSIGNED NOT NULL, expires "
                  "DATETIME(6) NOT NULL) ENGINE=InnoDB; CREATE TABLE dlock_lock_wait (name "
                  "VARBINARY(256) NOT NULL, owner VARBINARY(255) NOT NULL, lock_name "
                  "VARBINARY(2048) NOT NULL, expires DATETIME(6) NOT NULL, PRIMARY KEY (name, "
                  "owner)) ENGINE=InnoDB\"");
    const char *col = "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                      "DATABASE() AND TABLE_NAME = 'dlock_lock_wait' AND COLUMN_NAME = 'since'";
    CHECK_INT(sql_number(col), ==, 0);
    dlock_client *a = client(NULL), *b = client(NULL);
    dlock_lock *la = dt_lock(a, "up", 0), *lb = dt_lock(b, "up", 0);
    CHECK_RC(dlock_try_acquire(la), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(lb), DLOCK_EBUSY);
    CHECK_INT(sql_number(col), ==, 1);
    CHECK_RC(dlock_release(la), DLOCK_OK);
    CHECK_RC(dlock_acquire(lb, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(lb), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* ---------------------------------------------------------------- readers */

/* A reader frozen past its lease (SIGSTOP) beside another reader: the
 * other's release leaves the name to the frozen one (a writer is refused),
 * not free; the writer gets it once the frozen reader's lease has run out,
 * with a larger fence; the frozen reader is told once it runs again. */
/* A reader refused because a writer waits is told so (trial41: "held by
 * someone else" left a user who read "readers share it" puzzled). */
static void reader_behind_writer_told(void)
{
    dlock_client *c = client(NULL), *d = client(NULL);
    dlock_lock *r = dt_lock(c, "behind-writer", DLOCK_READ);
    dlock_lock *r2 = dt_lock(c, "behind-writer", DLOCK_READ);
    dlock_lock *w = dt_lock(d, "behind-writer", DLOCK_WRITE);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    struct waiter wt = {.l = w, .wait_ms = 10000};
    pthread_t th;
    CHECK_INT(pthread_create(&th, NULL, wait_thread, &wt), ==, 0);
    DT_WAIT_UNTIL(
        sql_number("SELECT COUNT(*) FROM dlock_lock_wait WHERE name = 'dlock:behind-writer'") == 1,
        5000);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_EBUSY);
    if (strstr(dlock_errmsg(), "a writer has waited longer and goes first") == NULL)
        dt_fail(__FILE__, __LINE__, "a reader behind a waiting writer: %s", dlock_errmsg());
    CHECK_RC(dlock_release(r), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&wt.done), 5000);
    pthread_join(th, NULL);
    CHECK_RC(atomic_load(&wt.rc), DLOCK_OK);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(c);
    dlock_client_close(d);
}

static void frozen_reader(void)
{
    unsigned long long fence;
    pid_t pid = frozen_child("frozen-reader", DLOCK_READ, &fence);
    dlock_client *c = client(NULL);
    dlock_lock *r = dt_lock(c, "frozen-reader", DLOCK_READ);
    dlock_lock *w = dt_lock(c, "frozen-reader", DLOCK_WRITE);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(r), >, fence);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY); /* the frozen reader's still */
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(w, 10000), DLOCK_OK);
    printf("frozen reader: the writer got it after %lld ms (the reader's lease: 1 s)\n",
           (long long) (dt_now_ms() - t0));
    CHECK_INT(dlock_lock_fence(w), >, fence);
    thaw(pid);
    CHECK_RC(dlock_lock_verify(w), DLOCK_OK);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* A forced unlock of the read-write lock ends every reader: each is told
 * (its renewal finds its row ended), a writer takes the name at once. The
 * rows: the name's owner is r: while readers hold it, each reader has a
 * row of its own in dlock_share (README.md). */
static void force_unlock_readers(void)
{
    dt_lost_box box1 = {0}, box2 = {0};
    dlock_client *c = client("lease=1s"), *c2 = client("lease=1s"), *op = client(NULL);
    dlock_lock *r1 = dt_lock(c, "forced-readers", DLOCK_READ);
    dlock_lock *r2 = dt_lock(c2, "forced-readers", DLOCK_READ);
    dlock_lock *w = dt_lock(op, "forced-readers", DLOCK_WRITE);
    dlock_lock_on_lost(r1, dt_on_lost, &box1);
    dlock_lock_on_lost(r2, dt_on_lost, &box2);
    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK);
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_lock WHERE name = 'dlock:forced-readers' "
                         "AND owner = 'r:'"),
              ==, 1);
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_share WHERE name = 'dlock:forced-readers' "
                         "AND expires > UTC_TIMESTAMP(6)"),
              ==, 2);
    CHECK_RC(dlock_force_unlock(op, "forced-readers", DLOCK_WRITE), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&box1.lost) == 1 && atomic_load(&box2.lost) == 1, 3000);
    printf("forced readers: %s\n", box1.why);
    CHECK_RC(dlock_release(r1), DLOCK_ELOST);
    CHECK_RC(dlock_release(r2), DLOCK_ELOST);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(c);
    dlock_client_close(c2);
    dlock_client_close(op);
}

/* The name's row never ends before a live reader's (README.md, "Read
 * locks"), a downgrade's either: the owner of the write takes the read
 * lock for a fixed 20 s, then its write's lease is set again (dlock_renew:
 * what the renewer does, a full lease of 1 s from now) or shortened
 * (dlock_extend): the rows say the name's end is never below the
 * reader's. (That another client's writer stays out meanwhile is
 * conformance rw_dup_leases, on every store.) (The rows' ends are two
 * statements' UTC_TIMESTAMP(6): the reader's may be some microseconds
 * later than the name's; a lease set below it is seconds.) */
static void downgrade_keeps_reader_lease(void)
{
    dlock_client *c = client("lease=1s");
    dlock_lock *w = dt_lock(c, "downgrade-lease", DLOCK_WRITE), *r = NULL;
    CHECK_RC(dlock_acquire(w, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &r), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(r, 0, 20000), DLOCK_OK);
    static const char *const below =
        "SELECT COUNT(*) FROM dlock_lock l JOIN dlock_share s ON s.name = l.name WHERE "
        "l.name = 'dlock:downgrade-lease' AND s.expires > UTC_TIMESTAMP(6) AND "
        "l.expires < s.expires - INTERVAL 50000 MICROSECOND";
    CHECK_INT(sql_number(below), ==, 0);
    CHECK_RC(dlock_renew(w), DLOCK_OK);
    CHECK_INT(sql_number(below), ==, 0);
    CHECK_RC(dlock_extend(w, 100), DLOCK_OK);
    CHECK_INT(sql_number(below), ==, 0);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    (void) dlock_release(w);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* A forced unlock through a session URL (one lock per name) ends the
 * readers too: a reader that comes in before the old one's next renewal
 * does not keep the old one holding, untold (its row was left live and
 * the name's row was the readers' again: its renewal said held). */
static void force_unlock_readers_session_url(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("lease=3s"), *c2 = client(NULL), *op = session_client();
    dlock_lock *r1 = dt_lock(c, "forced-session", DLOCK_READ);
    dlock_lock *r2 = dt_lock(c2, "forced-session", DLOCK_READ);
    dlock_lock_on_lost(r1, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    CHECK_RC(dlock_force_unlock(op, "forced-session", 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK); /* before r1's renewal (a second) */
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_share WHERE name = 'dlock:forced-session' "
                         "AND expires > UTC_TIMESTAMP(6)"),
              ==, 1);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 4000);
    CHECK_RC(dlock_release(r1), DLOCK_ELOST);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_client_close(c);
    dlock_client_close(c2);
    dlock_client_close(op);
}

/* Read handles that share an owner token (dlock_lock_dup) hold the name
 * twice in one reader's row, counted. (That one's release leaves the
 * other's hold, and a writer out, is conformance rw_dup_readers_counted;
 * a short lease of one, renewed and let go, not ending the other's is
 * conformance rw_dup_reader_released.) */
static void shared_read_holds_counted(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *r1 = dt_lock(c, "rw-dup", DLOCK_READ), *r2 = NULL;
    CHECK_RC(dlock_try_acquire(r1), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(r1, DLOCK_READ, &r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK);
    CHECK_INT(sql_number("SELECT count FROM dlock_share WHERE name = 'dlock:rw-dup'"), ==, 2);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_INT(sql_number("SELECT count FROM dlock_share WHERE name = 'dlock:rw-dup'"), ==, 1);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_client_close(c);
}

/* A renewal raises only what the renewing holder still holds. The rows
 * are set as a lost reader finds them (an operator's edits stand for a
 * deletion, a lapse, a name taken by a write), each end read in the same
 * client call as the edit (a number: microseconds since 1970), and again
 * once the reader was told of the loss (its renewal ran). */
static long long end_after(const char *edit, const char *row)
{
    char sql[1200];
    snprintf(sql, sizeof sql,
             "%s; SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires) FROM %s", edit, row);
    return sql_number(sql);
}

/* The reader's lock row deleted and taken by a writer: the reader's
 * renewal tells it, and does not lengthen its row (it did: a reader
 * joining later, then letting go, left the name to that row's end). */
static void renewal_after_takeover(void)
{
    dt_lost_box box = {0};
    char row[300];
    dlock_client *c = client("lease=1s"), *d = client(NULL);
    dlock_lock *r = dt_lock(c, "taken-over", DLOCK_READ);
    dlock_lock *w = dt_lock(d, "taken-over", DLOCK_WRITE);
    dlock_lock_on_lost(r, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    snprintf(row, sizeof row, "dlock_share WHERE name = 'dlock:taken-over' AND owner = '%s'",
             dlock_lock_token(r));
    long long e0 = end_after("DELETE FROM dlock_lock WHERE name = 'dlock:taken-over'", row);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 3000);
    CHECK_INT(end_after("DO 0", row), ==, e0);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_release(r), DLOCK_ELOST);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_close(c);
    dlock_client_close(d);
}

/* A reader whose own row lapsed (as a frozen one's) beside a live reader
 * with a fixed lease: its renewal tells it, and leaves the name's row at
 * the live reader's end (it raised it to its own new end: a writer kept
 * out by nobody). */
static void renewal_of_lapsed_reader(void)
{
    dt_lost_box box = {0};
    char edit[600], row[100];
    dlock_client *c = client("lease=3s"), *d = client(NULL);
    dlock_lock *r = dt_lock(c, "lapsed-reader", DLOCK_READ);
    dlock_lock *live = dt_lock(d, "lapsed-reader", DLOCK_READ);
    dlock_lock_on_lost(r, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(live, 0, 2500), DLOCK_OK);
    snprintf(edit, sizeof edit,
             "UPDATE dlock_share SET expires = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE name "
             "= 'dlock:lapsed-reader' AND owner = '%s'; UPDATE dlock_lock SET expires = (SELECT "
             "expires FROM dlock_share WHERE name = 'dlock:lapsed-reader' AND owner = '%s') "
             "WHERE name = 'dlock:lapsed-reader'",
             dlock_lock_token(r), dlock_lock_token(live));
    snprintf(row, sizeof row, "dlock_lock WHERE name = 'dlock:lapsed-reader'");
    long long e0 = end_after(edit, row);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 3000);
    CHECK_INT(end_after("DO 0", row), ==, e0);
    CHECK_RC(dlock_release(r), DLOCK_ELOST);
    CHECK_RC(dlock_release(live), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(live);
    dlock_client_close(c);
    dlock_client_close(d);
}

/* Two readers of one client on two names, renewed together; one name's
 * row written as the other reader's owner's write (a token it holds on
 * the other name): the first reader's renewal tells it, and does not
 * raise that row (the writers' owners of a batch were one list, not
 * paired with their names: any name of the batch held by any of them
 * was raised). */
static void renewal_pairs_writer_with_name(void)
{
    dt_lost_box box = {0};
    char edit[400];
    dlock_client *c = client("lease=1s");
    dlock_lock *x = dt_lock(c, "pair-a", DLOCK_READ), *y = dt_lock(c, "pair-b", DLOCK_READ);
    dlock_lock_on_lost(x, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(x, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(y, 0), DLOCK_OK);
    snprintf(edit, sizeof edit,
             "UPDATE dlock_lock SET owner = 'w:%s', expires = UTC_TIMESTAMP(6) + INTERVAL 400000 "
             "MICROSECOND WHERE name = 'dlock:pair-a'",
             dlock_lock_token(y));
    long long e0 = end_after(edit, "dlock_lock WHERE name = 'dlock:pair-a'");
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 3000);
    CHECK_INT(end_after("DO 0", "dlock_lock WHERE name = 'dlock:pair-a'"), ==, e0);
    CHECK_RC(dlock_lock_verify(y), DLOCK_OK);
    CHECK_RC(dlock_release(x), DLOCK_ELOST);
    CHECK_RC(dlock_release(y), DLOCK_OK);
    dlock_lock_free(x);
    dlock_lock_free(y);
    dlock_client_close(c);
}

/* A reader's row left live under a writer (the name's row deleted by an
 * operator: the reader is told at its renewal, which lengthened its row
 * all the same) is not a reader of the writer's: the write's release
 * frees the name (it made the row the readers' again, and kept the next
 * writer out for a lease with nobody holding it). */
static void write_release_ignores_lost_reader(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("lease=1s"), *d = client(NULL);
    dlock_lock *r = dt_lock(c, "lost-reader", DLOCK_READ);
    dlock_lock *w = dt_lock(d, "lost-reader", DLOCK_WRITE);
    dlock_lock *w2 = dt_lock(d, "lost-reader", DLOCK_WRITE);
    dlock_lock_on_lost(r, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    dt_server_cli(&srv, "-e \"DELETE FROM dlock_lock WHERE name = 'dlock:lost-reader'\"");
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 3000);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_OK);
    CHECK_RC(dlock_release(w2), DLOCK_OK);
    CHECK_RC(dlock_release(r), DLOCK_ELOST);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_lock_free(w2);
    dlock_client_close(c);
    dlock_client_close(d);
}

/* A user who may not create tables, in a database whose dlock_lock an
 * administrator made: mutexes work, and the read-write lock says the
 * table it needs, until it is there. */
static void readers_table_missing(void)
{
    char url[400];
    dlock_client *c = NULL;
    root_sql("CREATE DATABASE IF NOT EXISTS rwdb; "
             "CREATE USER IF NOT EXISTS 'rw'@'127.0.0.1' IDENTIFIED BY 'rw'; "
             "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON rwdb.* TO 'rw'@'127.0.0.1'");
    snprintf(url, sizeof url, "mysql://rw:rw@127.0.0.1:%d/rwdb?mode=table", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *m = dt_lock(c, "rw", 0);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK); /* makes dlock_lock, not dlock_share */
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_client_close(c);
    root_sql("DROP TABLE IF EXISTS rwdb.dlock_share; "
             "REVOKE CREATE ON rwdb.* FROM 'rw'@'127.0.0.1'");
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    m = dt_lock(c, "rw", 0);
    dlock_lock *r = dt_lock(c, "rw", DLOCK_READ);
    CHECK_RC(dlock_try_acquire(r), DLOCK_ESERVER);
    printf("no dlock_share: %s\n", dlock_errmsg());
    CHECK(strstr(dlock_errmsg(), "dlock_share") != NULL);
    CHECK(strstr(dlock_errmsg(), "needs CREATE") != NULL);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(r);
    dlock_client_close(c);
    /* (a database's grants reach connections made after them) */
    root_sql("GRANT CREATE ON rwdb.* TO 'rw'@'127.0.0.1'");
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    m = dt_lock(c, "rw", 0);
    r = dt_lock(c, "rw", DLOCK_READ);
    CHECK_RC(dlock_try_acquire(r), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_EBUSY);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(r);
    dlock_client_close(c);
}

/* A semaphore's rows: the lock's row is s:PERMITS while permits are held,
 * each holder's permits a row of dlock_share; a holder whose fixed lease
 * runs out (as a dead one's) gives its permits back, and a request that
 * needs them gets them then, not before. */
static void semaphore_rows(void)
{
    dlock_client *c = client(NULL), *c2 = client(NULL);
    dlock_lock *one = NULL, *two = NULL, *more = NULL;
    CHECK_RC(dlock_semaphore_open(c, "pool3", 3, 1, &one), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c2, "pool3", 3, 2, &two), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c2, "pool3", 3, 1, &more), DLOCK_OK);
    CHECK_RC(dlock_acquire(one, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(two, 0, 1000), DLOCK_OK); /* not renewed: gone in 1 s */
    CHECK_INT(dlock_lock_fence(two), >, dlock_lock_fence(one));
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_lock WHERE name = 'dlock:pool3' AND owner = "
                         "'s:3'"),
              ==, 1);
    CHECK_INT(sql_number("SELECT SUM(count) FROM dlock_share WHERE name = 'dlock:pool3' AND "
                         "expires > UTC_TIMESTAMP(6)"),
              ==, 3);
    dlock_status st;
    CHECK_RC(dlock_query(c, "pool3", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits_used, ==, 3);
    CHECK_INT(st.permits, ==, 3);
    CHECK_INT(st.shared, ==, 2);
    CHECK_RC(dlock_try_acquire(more), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(more, 5000), DLOCK_OK);
    int64_t waited = dt_now_ms() - t0;
    printf("semaphore: a permit came back after %lld ms (the fixed lease: 1 s)\n",
           (long long) waited);
    CHECK_INT(waited, >=, 500);
    CHECK_RC(dlock_query(c, "pool3", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits_used, ==, 2);
    CHECK_RC(dlock_release(two), DLOCK_ELOST);
    CHECK_RC(dlock_release(more), DLOCK_OK);
    CHECK_RC(dlock_release(one), DLOCK_OK);
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_lock WHERE name = 'dlock:pool3' AND owner = "
                         "'' AND expires < UTC_TIMESTAMP(6)"),
              ==, 1); /* free once the last permit is back */
    dlock_lock_free(one);
    dlock_lock_free(two);
    dlock_lock_free(more);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* Many threads of one client, each a semaphore and a reader on names of
 * their own and on one name they share: every take and release succeeds.
 * (Their transactions under REPEATABLE READ locked the gap after a name's
 * holders' rows, the next name's first row: takes and releases of
 * different names deadlocked, 1213, and failed after their retries.) */
#define SHARED_THREADS 50

static void *shared_holds_thread(void *arg)
{
    dlock_client *c = ((void **) arg)[0];
    long i = (long) ((void **) arg)[1];
    char own[32];
    snprintf(own, sizeof own, "many-%ld", i);
    dlock_lock *mine = NULL, *ours = NULL, *reader = dt_lock(c, own, DLOCK_READ);
    long failed = 0;
    if (dlock_semaphore_open(c, "many-shared", 2, 1, &ours) != DLOCK_OK ||
        dlock_semaphore_open(c, own, 2, 1, &mine) != DLOCK_OK)
        return (void *) 1000;
    for (int k = 0; k < 20; k++) {
        /* names of its own first, then the one they share */
        dlock_lock *l = k >= 16 ? ours : k % 2 ? mine : reader;
        if (dlock_acquire(l, 60000) != DLOCK_OK) {
            fprintf(stderr, "take: %s\n", dlock_errmsg());
            failed++;
            continue;
        }
        if (dlock_release(l) != DLOCK_OK) {
            fprintf(stderr, "release: %s\n", dlock_errmsg());
            failed++;
        }
    }
    dlock_lock_free(mine);
    dlock_lock_free(ours);
    dlock_lock_free(reader);
    return (void *) failed;
}

static void shared_holds_many_names(void)
{
    dlock_client *c = client(NULL);
    pthread_t t[SHARED_THREADS];
    void *args[SHARED_THREADS][2];
    for (long i = 0; i < SHARED_THREADS; i++) {
        args[i][0] = c;
        args[i][1] = (void *) i;
        CHECK_INT(pthread_create(&t[i], NULL, shared_holds_thread, args[i]), ==, 0);
    }
    long failed = 0;
    for (int i = 0; i < SHARED_THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        failed += (long) r;
    }
    printf("shared holds: %d threads x 20 takes, %ld failed\n", SHARED_THREADS, failed);
    CHECK_INT(failed, ==, 0);
    dlock_client_close(c);
}

/* One name is one lock, and each kind asked about is that lock: status,
 * holders and force-unlock of a kind do not name or end a holder of
 * another kind (a new user's trial: `dlock unlock --force NAME` ended two
 * readers, and `dlock status NAME` called them a mutex's holders). A
 * session URL, which has the mutex only, lists such a name as a mutex and
 * names its holders in words, not as r: (the trial: `dlock list` through
 * it failed, "cannot do a read-write lock"). */
static void count_name(const char *name, unsigned flags, void *arg)
{
    if (strcmp(name, "kinds-apart") == 0 && flags == 0)
        ++*(int *) arg;
}

static void kinds_apart(void)
{
    dlock_client *c = client(NULL), *op = client(NULL), *sess = NULL;
    dlock_lock *r = dt_lock(c, "kinds-apart", DLOCK_READ), *m = dt_lock(c, "kinds-apart2", 0);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    dlock_status st;
    CHECK_RC(dlock_query(op, "kinds-apart", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0); /* not as a mutex */
    CHECK_RC(dlock_query(op, "kinds-apart", DLOCK_WRITE, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.shared, ==, 1);
    CHECK_RC(dlock_query(op, "kinds-apart2", DLOCK_READ, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0); /* a mutex's: not the read-write lock's */
    int was_held = -1;
    CHECK_RC(dlock_force_unlock2(op, "kinds-apart", 0, &was_held), DLOCK_OK);
    CHECK_INT(was_held, ==, 0);
    CHECK_RC(dlock_force_unlock2(op, "kinds-apart2", DLOCK_WRITE, &was_held), DLOCK_OK);
    CHECK_INT(was_held, ==, 0);
    CHECK_RC(dlock_lock_verify(r), DLOCK_OK); /* neither was ended */
    CHECK_RC(dlock_lock_verify(m), DLOCK_OK);
    /* through session mode's URL: listed as a mutex, its holder in words */
    char url[400];
    snprintf(url, sizeof url, "%s?mode=session", srv.url);
    CHECK_RC(dlock_client_open(url, &sess), DLOCK_OK);
    int seen = 0;
    CHECK_RC(dlock_list(sess, "kinds-apart", 0, count_name, &seen), DLOCK_OK);
    CHECK_INT(seen, ==, 1);
    CHECK_RC(dlock_query(sess, "kinds-apart", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 1);
    printf("kinds apart: through the session URL, held by '%s'\n", st.owner);
    CHECK(strcmp(st.owner, "r:") != 0 && strstr(st.owner, "readers") != NULL);
    /* the kind it is: ended */
    CHECK_RC(dlock_force_unlock2(op, "kinds-apart", DLOCK_WRITE, &was_held), DLOCK_OK);
    CHECK_INT(was_held, ==, 1);
    CHECK_RC(dlock_release(r), DLOCK_ELOST);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(m);
    dlock_client_close(sess);
    dlock_client_close(op);
    dlock_client_close(c);
}

/* A read take sent again after a deadlock (1213) counts the hold once.
 * Its waiter's statements (a waiting take's, on dlock_lock_wait) ran
 * after its COMMIT: a deadlock there made the client send the whole
 * request again, and the take ran twice (count 2 for one handle: its
 * release left the name held by nobody until the lease's end). The
 * deadlock is made: another session (the mariadb client, a transaction
 * made heavy with 2000 rows written, so InnoDB picks the take as the
 * victim) locks one waiter row of the name; the take's DELETE of the
 * name's expired waiter rows deletes the other (expired) one and waits
 * for it; the session then asks for the one the take deleted. */
typedef struct take_job {
    dlock_lock *lock;
    int rc;
} take_job;

static void *take_thread(void *arg)
{
    take_job *j = arg;
    j->rc = dlock_acquire(j->lock, 20000);
    return NULL;
}

static void retried_take_counts_once(void)
{
    char cmd[400];
    dlock_client *c = client(NULL), *d = client(NULL);
    dlock_lock *r = dt_lock(c, "retried", DLOCK_READ), *w = dt_lock(d, "retried", DLOCK_WRITE);
    CHECK_RC(dlock_try_acquire(r), DLOCK_OK); /* (the tables made) */
    CHECK_RC(dlock_release(r), DLOCK_OK);
    dt_server_cli(&srv,
                  "-e \"CREATE TABLE IF NOT EXISTS ballast (n INT) ENGINE=InnoDB; "
                  "REPLACE INTO dlock_lock_wait (name, owner, lock_name, expires, since) "
                  "VALUES ('dlock:retried', 'a', 'retried', '1970-01-01 00:00:01', "
                  "'1970-01-01 00:00:01'), ('dlock:retried', 'b', 'retried', "
                  "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)\"");
    snprintf(cmd, sizeof cmd,
             "mariadb --no-defaults -h 127.0.0.1 -P %d -udlock -pdlock -D dlock -N -B "
             ">/dev/null 2>&1",
             srv.port);
    FILE *other = popen(cmd, "w");
    CHECK(other != NULL);
    fprintf(other,
            "BEGIN; INSERT INTO ballast SELECT seq FROM seq_1_to_2000; SELECT owner FROM "
            "dlock_lock_wait WHERE name = 'dlock:retried' AND owner = 'b' LOCK IN SHARE MODE; "
            "SELECT GET_LOCK('ballast', 0);\n");
    fflush(other);
    DT_WAIT_UNTIL(sql_number("SELECT IS_USED_LOCK('ballast') IS NOT NULL") == 1, 5000);
    take_job job = {.lock = r, .rc = -1};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, take_thread, &job), ==, 0);
    /* the take's DELETE waits for the row the other session holds */
    DT_WAIT_UNTIL(sql_number("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO "
                             "LIKE 'DELETE FROM dlock_lock_wait%'") >= 1,
                  5000);
    fprintf(other, "SELECT owner FROM dlock_lock_wait WHERE name = 'dlock:retried' AND owner = "
                   "'a' FOR UPDATE; ROLLBACK;\n");
    fflush(other);
    pthread_join(t, NULL);
    CHECK_INT(pclose(other), ==, 0);
    CHECK_RC(job.rc, DLOCK_OK);
    CHECK_INT(sql_number("SELECT count FROM dlock_share WHERE name = 'dlock:retried'"), ==, 1);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK); /* no hold left */
    CHECK_RC(dlock_release(w), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_close(c);
    dlock_client_close(d);
}

/* A server that logs statements (--log-bin, binlog_format=STATEMENT)
 * refuses InnoDB writes in a READ COMMITTED transaction (error 1665):
 * mutexes work there (their statements run under the session's own
 * isolation; table mode's connections had READ COMMITTED for every
 * statement, and a mutex's take failed with the raw 1665), and the
 * read-write lock and the semaphore are refused before anything is
 * held, naming binlog_format. A server of its own (the only test that
 * needs one: about a second to install and start). */
static void statement_binlog(void)
{
    dt_server own;
    char url[300];
    dlock_client *c = NULL;
    dt_server_start(&own, "mariadb", 0, "--log-bin", "--binlog-format=STATEMENT", NULL);
    snprintf(url, sizeof url, "%s?mode=table", own.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *m = dt_lock(c, "logged", 0), *r = dt_lock(c, "logged-rw", DLOCK_READ);
    dlock_lock *w = dt_lock(c, "logged-rw", DLOCK_WRITE), *s = NULL;
    CHECK_RC(dlock_semaphore_open(c, "logged-sem", 2, 1, &s), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    CHECK_RC(dlock_extend(m, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock *shared[] = {r, w, s};
    for (int i = 0; i < 3; i++) {
        CHECK_RC(dlock_try_acquire(shared[i]), DLOCK_ESERVER);
        CHECK(strstr(dlock_errmsg(), "binlog_format") != NULL);
    }
    printf("binlog_format=STATEMENT: %s\n", dlock_errmsg());
    CHECK_RC(dlock_acquire(m, 1000), DLOCK_OK);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_lock_free(s);
    dlock_client_close(c);
    dt_server_stop(&own);
}

/* The renewal's warning says why it failed. The lock table's renewal is
 * several requests, and the store answers the batch OK with its items
 * failed: the core said "no answer" where the connect's error was known
 * (trial43: a holder whose server was stopped). */
static pthread_mutex_t said_mu = PTHREAD_MUTEX_INITIALIZER;
static char said[512];

static void on_renewal_log(int level, const char *msg, void *arg)
{
    (void) arg;
    pthread_mutex_lock(&said_mu);
    if (level == DLOCK_LOG_WARN && strstr(msg, "renewal failed") != NULL && said[0] == '\0')
        snprintf(said, sizeof said, "%s", msg);
    pthread_mutex_unlock(&said_mu);
}

static int renewal_said(void)
{
    pthread_mutex_lock(&said_mu);
    int yes = said[0] != '\0';
    pthread_mutex_unlock(&said_mu);
    return yes;
}

static void renewal_failure_says_why(void)
{
    dt_proxy proxy;
    char url[300];
    dlock_client *c = NULL;
    dt_proxy_start(&proxy, srv.port, 1);
    dt_server_url_at(&srv, proxy.ports[0], url, sizeof url - 64);
    strcat(url, "?mode=table&lease=3s&timeout=500ms&connect_timeout=500ms");
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, on_renewal_log, NULL), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "renewal_why", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    dt_proxy_set(&proxy, 0, DT_CUT); /* reset, and new connections refused */
    DT_WAIT_UNTIL(renewal_said(), 5000);
    pthread_mutex_lock(&said_mu);
    printf("the renewal's warning: %s\n", said);
    CHECK(said[0] != '\0');
    CHECK(strstr(said, ": no answer;") == NULL);
    pthread_mutex_unlock(&said_mu);
    dt_proxy_set(&proxy, 0, DT_PASS);
    (void) dlock_release(l);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_proxy_stop(&proxy);
}

/* A take whose request fails after its INSERT has claimed the name's row
 * (issue 23: here the waiter rows' DELETE, refused by a trigger an
 * operator might have put there; in the field a deadlock after the
 * retries, the deadline, a connection that drops) leaves the row as it
 * was: the caller was told it did not get the name, and another client
 * takes it at once, not after the failed take's lease (30 s). For a mutex
 * and a writer (the same request). */
static void failed_take_leaves_no_claim(void)
{
    static const struct {
        const char *name;
        unsigned flags;
    } kinds[] = {{"stuck", 0}, {"stuck-w", DLOCK_WRITE}};
    dlock_client *c = client("lease=30s"), *d = client("lease=30s");
    dlock_lock *first = dt_lock(c, "stuck-tables", 0);
    CHECK_RC(dlock_try_acquire(first), DLOCK_OK); /* (the tables made) */
    CHECK_RC(dlock_release(first), DLOCK_OK);
    dt_server_cli(&srv, "--delimiter=// -e \"CREATE TRIGGER refuse_stuck BEFORE DELETE ON "
                        "dlock_lock_wait FOR EACH ROW IF OLD.owner = 'stuck' THEN SIGNAL "
                        "SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF//\"");
    CHECK_INT(sql_number("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_NAME = "
                         "'refuse_stuck'"),
              ==, 1);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        /* a lapsed waiter's row: the waiter take's DELETE of lapsed rows
         * meets the trigger, after its INSERT took the free row */
        dt_server_cli(&srv,
                      "-e \"INSERT INTO dlock_lock_wait (name, owner, lock_name, expires, since) "
                      "VALUES ('dlock:%s', 'stuck', '%s', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, "
                      "'2000-01-01')\"",
                      kinds[i].name, kinds[i].name);
        dlock_lock *l = dt_lock(c, kinds[i].name, kinds[i].flags);
        dlock_lock *other = dt_lock(d, kinds[i].name, kinds[i].flags);
        CHECK_RC(dlock_acquire(l, 2000), DLOCK_ESERVER);
        printf("%s: a take that failed after its INSERT: %s\n", kinds[i].name, dlock_errmsg());
        CHECK(strstr(dlock_errmsg(), "refused by the test") != NULL);
        /* nothing of it is left: the name is free for another client now */
        CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
        CHECK_RC(dlock_release(other), DLOCK_OK);
        dlock_lock_free(l);
        dlock_lock_free(other);
    }
    dt_server_cli(&srv, "-e \"DROP TRIGGER refuse_stuck; DELETE FROM dlock_lock_wait WHERE owner "
                        "= 'stuck'\"");
    dlock_lock_free(first);
    dlock_client_close(c);
    dlock_client_close(d);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"frozen_holder", frozen_holder},
        {"deleted_row", deleted_row},
        {"batched_renewal", batched_renewal},
        {"bad_input", bad_input},
        {"session_holder_excludes_table", session_holder_excludes_table},
        {"table_holder_excludes_session", table_holder_excludes_session},
        {"table_waits_for_dropped_session_holder", table_waits_for_dropped_session_holder},
        {"tables_dropped", tables_dropped},
        {"waiter_not_starved", waiter_not_starved},
        {"free_name_goes_to_waiter", free_name_goes_to_waiter},
        {"old_table_upgraded", old_table_upgraded},
        {"frozen_reader", frozen_reader},
        {"reader_behind_writer_told", reader_behind_writer_told},
        {"force_unlock_readers", force_unlock_readers},
        {"readers_table_missing", readers_table_missing},
        {"semaphore_rows", semaphore_rows},
        {"shared_holds_many_names", shared_holds_many_names},
        {"downgrade_keeps_reader_lease", downgrade_keeps_reader_lease},
        {"force_unlock_readers_session_url", force_unlock_readers_session_url},
        {"shared_read_holds_counted", shared_read_holds_counted},
        {"write_release_ignores_lost_reader", write_release_ignores_lost_reader},
        {"kinds_apart", kinds_apart},
        {"renewal_after_takeover", renewal_after_takeover},
        {"renewal_of_lapsed_reader", renewal_of_lapsed_reader},
        {"renewal_pairs_writer_with_name", renewal_pairs_writer_with_name},
        {"statement_binlog", statement_binlog},
        {"retried_take_counts_once", retried_take_counts_once},
        {"failed_take_leaves_no_claim", failed_take_leaves_no_claim},
        {"renewal_failure_says_why", renewal_failure_says_why},
        {"bell_wakes_waiter", bell_wakes_waiter},
    };
    dt_server_start(&srv, "mariadb", 0, NULL); /* once for every test (each a fork) */
    return DT_RUN(tests);
}
