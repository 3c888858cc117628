/* SPDX-License-Identifier: MIT */
/* test_mysql_lock.c - the MariaDB/MySQL backend (mysql://), session mode (mode=session),
 * against a real MariaDB started once for the program: the name mapping
 * (long names, upper case, exact names, and a lock shared with SQL that
 * calls GET_LOCK itself), a holder's connection killed from the server
 * side (KILL), a wait blocked in GET_LOCK: its slices, a try that never
 * blocks, and a cancel that reaches it; bad input; and processes
 * incrementing a fenced counter through one lock.
 *
 * The server is looked at with the mariadb client (dt_server_cli), never
 * through the library. Tests that fork do so before they open a client. */
#define _GNU_SOURCE
#include "../support/child_holder.h"
#include "../support/harness.h"

#include "backend/mysql/my.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static dt_server srv;

/* A client of session mode (mode=table is the default: test_mysql_table.c);
 * options: "&lease=2s", NULL. */
static dlock_client *client(const char *options)
{
    char opts[200];
    snprintf(opts, sizeof opts, "?mode=session%s", options != NULL ? options : "");
    return dt_client(srv.url, opts);
}

/* The mariadb client's one-line answer, as a number (-1: NULL). */
static long long sql_number(const char *sql)
{
    const char *out = dt_server_cli(&srv, "-e \"%s\"", sql);
    if (strncmp(out, "NULL", 4) == 0)
        return -1;
    return strtoll(out, NULL, 10);
}

static const char *server_name(const char *name, int exact)
{
    static char out[DLOCK__MY_NAME_MAX * 4 + 1];
    CHECK_RC(dlock__my_name(name, exact, out, sizeof out), DLOCK_OK);
    return out;
}

/* Whether the GET_LOCK name is held (by anyone). */
static int held(const char *server)
{
    char sql[300];
    snprintf(sql, sizeof sql, "SELECT IS_USED_LOCK('%s') IS NOT NULL", server);
    return (int) sql_number(sql);
}

/* How many connections wait in GET_LOCK for a dlock-mapped name. */
static long long waiting(const char *server)
{
    char sql[600], hex[300];
    size_t n = 0;
    for (const unsigned char *t = (const unsigned char *) server; *t != '\0'; t++)
        n += (size_t) snprintf(hex + n, sizeof hex - n, "%02x", *t);
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND "
             "INFO LIKE '%%%s%%'",
             hex);
    return sql_number(sql);
}

/* ---------------------------------------------------------------- names */

/* The documented mapping: "dlock:" + a plain lower-case name, "dlock#" + 40
 * hex digits of SHA-256 otherwise; the server holds exactly that name, and
 * names that GET_LOCK would confuse (case, length) stay apart. */
static void name_mapping(void)
{
    char long_a[200], long_b[200];
    memset(long_a, 'a', sizeof long_a - 1);
    long_a[sizeof long_a - 1] = '\0';
    snprintf(long_b, sizeof long_b, "%s", long_a);
    long_b[sizeof long_b - 2] = 'b';

    CHECK(strcmp(server_name("jobs/nightly-1", 0), "dlock:jobs/nightly-1") == 0);
    /* SHA-256("Hello") = 185f8db3... */
    CHECK(strcmp(server_name("Hello", 0), "dlock#185f8db32271fe25f561a6fc938b2e264306ec30") == 0);
    CHECK_INT(strlen(server_name(long_a, 0)), ==, 46);
    char a[100];
    snprintf(a, sizeof a, "%s", server_name(long_a, 0));
    CHECK(strcmp(a, server_name(long_b, 0)) != 0);
    snprintf(a, sizeof a, "%s", server_name("job", 0));
    CHECK(strcmp(a, server_name("JOB", 0)) != 0);
    CHECK(strcmp(a, server_name("job ", 0)) != 0); /* GET_LOCK ignores trailing spaces */
    CHECK(strcmp(server_name("MyJob", 1), "MyJob") == 0);

    /* distinct dlock names are distinct locks, even where GET_LOCK's own
     * names would not be */
    dlock_client *c = client(NULL), *c2 = client(NULL);
    dlock_lock *lo = dt_lock(c, "job", 0), *up = dt_lock(c2, "JOB", 0);
    dlock_lock *la = dt_lock(c, long_a, 0), *lb = dt_lock(c2, long_b, 0);
    CHECK_RC(dlock_acquire(lo, 5000), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(up), DLOCK_OK);
    CHECK_RC(dlock_acquire(la, 5000), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(lb), DLOCK_OK);
    CHECK_INT(held("dlock:job"), ==, 1);
    CHECK_INT(held(server_name("JOB", 0)), ==, 1);
    CHECK_INT(held(server_name(long_b, 0)), ==, 1);
    CHECK_RC(dlock_release(lo), DLOCK_OK);
    CHECK_RC(dlock_release(up), DLOCK_OK);
    CHECK_RC(dlock_release(la), DLOCK_OK);
    CHECK_RC(dlock_release(lb), DLOCK_OK);
    CHECK_INT(held("dlock:job"), ==, 0);
    dlock_lock_free(lo);
    dlock_lock_free(up);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* names=exact: the name goes to GET_LOCK as it is, so dlock and SQL that
 * calls GET_LOCK itself with the same name exclude one another (MariaDB
 * compares the names exactly; MySQL 5.7+ without regard to case); a name
 * GET_LOCK cannot take is refused. */
static void exact_names(void)
{
    char url[300];
    snprintf(url, sizeof url, "%s?mode=session&names=exact", srv.url);
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "MyJob", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(held("MyJob"), ==, 1);
    /* SQL of its own on the same name: GET_LOCK fails */
    CHECK_INT(sql_number("SELECT GET_LOCK('MyJob', 0)"), ==, 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(held("MyJob"), ==, 0);
    /* and the other way: held by SQL (the client in the background), dlock waits */
    dt_server_cli(&srv, "-e \"SELECT GET_LOCK('MyJob', 5); SELECT SLEEP(1.5)\" >/dev/null 2>&1 "
                        "</dev/null &");
    DT_WAIT_UNTIL(held("MyJob") == 1, 5000);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, >=, 500);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);

    /* 65 characters cannot be exact */
    char name[80];
    memset(name, 'x', 65);
    name[65] = '\0';
    dlock_lock *bad = NULL;
    int rc = dlock_lock_open(c, name, 0, &bad);
    if (rc == DLOCK_OK)
        rc = dlock_try_acquire(bad);
    CHECK_RC(rc, DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "names=exact") != NULL);
    dlock_lock_free(bad);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- killed */

/* The holder's connection is killed in the server (KILL, as an operator
 * would): the loss is reported within the lease, and another client gets
 * the lock with a larger fence. */
/* The holder's connection is killed and the holder releases before its
 * renewer has noticed (a `dlock run` whose command ends then): the release
 * says the lock was lost (it went with the connection, maybe before the
 * work was done), not that it merely may not have reached the store. */
static void released_after_kill(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "kill-rel", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:kill-rel')");
    CHECK_INT(id, >, 0);
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    /* found by the release, or reported at once (the socket watched) */
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK(strstr(dlock_errmsg(), "lost with its connection") != NULL ||
          strstr(dlock_errmsg(), "closed the connection") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Issue 23: a holder whose connection the server ends (KILL) is told at
 * once (a passive read on the idle socket, src/backend/sockwatch.h), not at
 * its next renewal (a third of a 30 s lease: 10 s). */
static void killed_holder_told_at_once(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("&lease=30s");
    dlock_lock *l = dt_lock(c, "know", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:know')");
    CHECK_INT(id, >, 0);
    int64_t t0 = dt_now_ms();
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 9000);
    long long took = dt_now_ms() - t0;
    printf("killed: loss reported after %lld ms: %s\n", took, box.why);
    CHECK_INT(took, <, 2000);
    CHECK(strstr(box.why, "closed the connection") != NULL);
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void killed_holder(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("&lease=2s"), *c2 = client(NULL);
    dlock_lock *l = dt_lock(c, "term", 0), *l2 = dt_lock(c2, "term", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_EBUSY);
    /* a session's lock ends with its connection: never "no lease" */
    if (strstr(dlock_errmsg(), "never ends by itself") != NULL)
        dt_fail(__FILE__, __LINE__, "a session holder called endless: %s", dlock_errmsg());
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:term')");
    CHECK_INT(id, >, 0);
    char sql[100];
    snprintf(sql, sizeof sql, "KILL %lld", id);
    int64_t t0 = dt_now_ms();
    dt_server_cli(&srv, "-e \"%s\"", sql);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 2000 + 1000);
    printf("killed: loss reported after %lld ms: %s\n", (long long) (dt_now_ms() - t0), box.why);
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

/* A holder whose connection dropped (KILL from the server's side) leaves
 * its row's lease running: the lock is held until it ends (the next taker
 * waits for it, README.md), so status says held, and force-unlock ends it
 * at once. (It said free while a try said held, and force-unlock, finding
 * no connection holding the named lock, left the lease running.) */
static void force_unlock_after_kill(void)
{
    dlock_client *c = client(NULL), *op = client(NULL);
    dlock_lock *l = dt_lock(c, "fk", 0), *l2 = dt_lock(op, "fk", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:fk')");
    CHECK_INT(id, >, 0);
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    DT_WAIT_UNTIL(sql_number("SELECT IS_USED_LOCK('dlock:fk')") == -1, 5000);
    dlock_status st;
    CHECK_RC(dlock_query(op, "fk", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, dlock_lock_token(l)) == 0);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_EBUSY);
    CHECK_RC(dlock_force_unlock(op, "fk", 0), DLOCK_OK);
    CHECK_RC(dlock_query(op, "fk", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_OK);
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(op);
}

/* Status says for how long a holder whose connection the server ended
 * (KILL) still holds: its row's lease runs, and the next taker waits for it
 * (as PostgreSQL's status does after pg_terminate_backend); it said "none
 * (held by its holder's session)", a session that was gone. The lease told
 * is the truth: the next taker gets the lock at its end, not before. A
 * holder alive holds as long as its connection: no lease to tell. */
static void status_after_kill(void)
{
    dlock_client *c = client("&lease=3s"), *op = client(NULL);
    dlock_lock *l = dt_lock(c, "sk", 0), *l2 = dt_lock(op, "sk", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    dlock_status st = dt_query(op, "sk", 0);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.lease_ms, ==, -1);
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:sk')");
    CHECK_INT(id, >, 0);
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    DT_WAIT_UNTIL(sql_number("SELECT IS_USED_LOCK('dlock:sk')") == -1, 5000);
    dt_dead_holder_status_true(op, "sk", l, l2, 3000);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(op);
}

/* A holder that freezes (SIGSTOP: its socket stays open, its renewals
 * stop) loses its lock in the server within about a lease and a half (the
 * connection's wait_timeout), not MariaDB's default 8 hours; the next
 * holder's fence is larger. */
static void frozen_holder(void)
{
    char url[300];
    unsigned long long fence = 0;
    snprintf(url, sizeof url, "%s?mode=session&lease=2s", srv.url);
    pid_t pid = dt_child_hold(url, "frozen", DT_CHILD_FREEZE, &fence);
    int64_t t0 = dt_now_ms();
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "frozen", 0);
    CHECK_RC(dlock_acquire(l, 15000), DLOCK_OK);
    int64_t took = dt_now_ms() - t0;
    printf("frozen holder (lease 2 s): the lock was free again after %lld ms\n", (long long) took);
    CHECK_INT(took, <, 2 * 2000 + 1500);
    CHECK_INT(dlock_lock_fence(l), >, fence);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_kill_reap(pid);
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

/* A wait blocks in GET_LOCK (one connection in state "User lock", no
 * polling), for its whole wait; a try never blocks; a budget ends on time;
 * a cancel of the blocked wait returns at once and leaves nothing waiting
 * in the server. */
static void blocked_wait(void)
{
    /* timeout 2s: a request's bound, which the wait outlasts */
    dlock_client *h = client(NULL), *c = client("&timeout=2s");
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

    /* past two command timeouts, then cancelled */
    struct waiter w = {.l = l, .wait_ms = 60000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("dlock:bw") == 1, 5000);
    dt_sleep_ms(4000); /* two command timeouts and more */
    CHECK(!atomic_load(&w.done));
    CHECK_INT(waiting("dlock:bw"), ==, 1);
    int64_t cancel_at = dt_now_ms();
    CHECK_RC(dlock_cancel(l), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 2000);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_ECANCELED);
    long long cancel_took = atomic_load(&w.ended_ms) - cancel_at;
    printf("blocked wait: cancelled in %lld ms\n", cancel_took);
    CHECK_INT(cancel_took, <, 300);
    CHECK_INT(waiting("dlock:bw"), ==, 0);

    /* a release wakes a blocked waiter at once */
    struct waiter w2 = {.l = l, .wait_ms = 60000};
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w2), ==, 0);
    DT_WAIT_UNTIL(waiting("dlock:bw") == 1, 5000);
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

/* A wait blocked in GET_LOCK on a server that is then paused (SIGSTOP),
 * cancelled: it returns within its bound, not when the server comes back.
 * The KILL QUERY that ends a wait in the server connects anew, and a
 * paused server takes the TCP connection but never answers; sent from the
 * waiting thread, it held the cancelled wait for its own timeouts (2 s
 * each, over 4 s in all here), and the fault suite's waits overran their
 * bound. It is now sent from a thread of its own, and the wait gives up
 * on its connection 150 ms after the cancel. A wait's budget that ends
 * while the server is paused ends on time too. */
static void cancel_when_paused(void)
{
    dlock_client *h = client(NULL), *c = client("&timeout=2s&lease=1s");
    dlock_lock *hl = dt_lock(h, "cp", 0), *l = dt_lock(c, "cp", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    struct waiter w = {.l = l, .wait_ms = 20000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("dlock:cp") == 1, 5000);
    dt_server_pause(&srv);
    int64_t cancel_at = dt_now_ms();
    CHECK_RC(dlock_cancel(l), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 8000);
    pthread_join(t, NULL);
    long long cancel_took = atomic_load(&w.ended_ms) - cancel_at;
    dt_server_resume(&srv);
    printf("wait on a paused server: cancelled in %lld ms (rc %d)\n", cancel_took,
           atomic_load(&w.rc));
    CHECK_RC(atomic_load(&w.rc), DLOCK_ECANCELED);
    CHECK_INT(cancel_took, <, 500);
    /* served again: the lock is still the holder's, and goes on */
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

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

/* A waiter keeps its place in GET_LOCK's queue of the name for its whole
 * wait, not for a command timeout: A, queued first, is served first when
 * the holder lets go, ahead of clients that take the name in a loop.
 * Before, a wait left the server's queue at every slice's end (about
 * 400 ms with A's timeout=500ms) and joined again at its back, behind five
 * loopers holding 150 ms each: its turn was always further than a slice
 * away, and A was not served (the fault suite's starved multi-lock waiter,
 * mysql session mode, seeds 10 and 15; issue 23). */
static void waiter_keeps_place(void)
{
    enum { LOOPERS = 5 };
    dlock_client *h = client("&timeout=500ms"), *a = client("&timeout=500ms");
    dlock_client *lc[LOOPERS];
    struct looper lp[LOOPERS];
    pthread_t lt[LOOPERS], at;
    _Atomic int stop = 0, turns = 0, a_done = 0;
    dlock_lock *hl = dt_lock(h, "fifo", 0), *al = dt_lock(a, "fifo", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);

    struct waiter w = {.l = al, .wait_ms = 20000};
    CHECK_INT(pthread_create(&at, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("dlock:fifo") == 1, 5000);
    for (int i = 0; i < LOOPERS; i++) {
        lc[i] = client("&timeout=5s"); /* (their places kept either way) */
        lp[i] = (struct looper){
            .l = dt_lock(lc[i], "fifo", 0), .stop = &stop, .turns = &turns, .a_done = &a_done};
        CHECK_INT(pthread_create(&lt[i], NULL, loop_thread, &lp[i]), ==, 0);
    }
    DT_WAIT_UNTIL(waiting("dlock:fifo") == 1 + LOOPERS, 5000);
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

/* The waiter first in line keeps its place while the row's lease of a
 * holder whose connection dropped runs out: A, queued first in GET_LOCK,
 * gets the named lock when the holder's connection is killed, finds the
 * lease running, and waits it out holding the named lock; the loopers
 * queued behind it stay queued (in state "User lock"), and A is served
 * first when the lease ends. Before, every waiter let go of the named lock
 * and polled until the lease ended, and the first poll after its end won:
 * A's place was lost (the fault suite's seed 7, session mode, under load:
 * a plain waiter of mx0 served 14 s after the last heal while ten others
 * took it; issue 23). */
static void waiter_keeps_place_after_kill(void)
{
    enum { LOOPERS = 5 };
    dlock_client *h = client("&lease=3s"), *a = client(NULL);
    dlock_client *lc[LOOPERS];
    struct looper lp[LOOPERS];
    pthread_t lt[LOOPERS], at;
    _Atomic int stop = 0, turns = 0, a_done = 0;
    dlock_lock *hl = dt_lock(h, "fifok", 0), *al = dt_lock(a, "fifok", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    struct waiter w = {.l = al, .wait_ms = 20000};
    CHECK_INT(pthread_create(&at, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("dlock:fifok") == 1, 5000);
    for (int i = 0; i < LOOPERS; i++) {
        lc[i] = client(NULL);
        lp[i] = (struct looper){
            .l = dt_lock(lc[i], "fifok", 0), .stop = &stop, .turns = &turns, .a_done = &a_done};
        CHECK_INT(pthread_create(&lt[i], NULL, loop_thread, &lp[i]), ==, 0);
    }
    DT_WAIT_UNTIL(waiting("dlock:fifok") == 1 + LOOPERS, 5000);
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:fifok')");
    CHECK_INT(id, >, 0);
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    /* the holder's row lease (3 s) runs: half of it gone, the loopers are
     * still queued behind A (before: all polling, none or one queued) */
    DT_WAIT_UNTIL(sql_number("SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires) < "
                             "1500000 FROM dlock_fence WHERE name = 'dlock:fifok'") == 1,
                  5000);
    long long queued = waiting("dlock:fifok");
    /* status counts A too, which keeps the named lock while it waits the
     * lease out (before: one waiter fewer, A out of the count) */
    dlock_client *q = client(NULL);
    dlock_status st = dt_query(q, "fifok", 0);
    dlock_client_close(q);
    CHECK(!atomic_load(&w.done));
    printf("status during the dead holder's lease: held %d, %u waiters\n", st.held, st.waiters);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.waiters, ==, 1 + LOOPERS);
    DT_WAIT_UNTIL(atomic_load(&w.done), 10000);
    atomic_store(&a_done, 1);
    int before = 0;
    for (int i = 0; i < LOOPERS; i++)
        before += atomic_load(&lp[i].before_a);
    printf("after a kill: %lld loopers queued during the lease; A served after %d loopers' "
           "turns (rc %d)\n",
           queued, before, atomic_load(&w.rc));
    CHECK_RC(atomic_load(&w.rc), DLOCK_OK);
    CHECK_INT(queued, ==, LOOPERS);
    CHECK_INT(before, ==, 0);
    pthread_join(at, NULL);
    CHECK_INT(dlock_lock_fence(al), >, dlock_lock_fence(hl));
    CHECK_RC(dlock_release(al), DLOCK_OK);
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

/* A wait that keeps the named lock while a dropped holder's row lease
 * runs (waiter_keeps_place_after_kill) is cancelled at once: its nap in
 * the server ends by KILL QUERY, the named lock is let go, and the next
 * client takes the name once the lease ends. */
static void cancel_while_lease_waited(void)
{
    char sql[200];
    dlock_client *h = client("&lease=3s"), *a = client(NULL), *b = client(NULL);
    dlock_lock *hl = dt_lock(h, "cwl", 0), *al = dt_lock(a, "cwl", 0), *bl = dt_lock(b, "cwl", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    struct waiter w = {.l = al, .wait_ms = 20000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("dlock:cwl") == 1, 5000);
    long long id = sql_number("SELECT IS_USED_LOCK('dlock:cwl')");
    CHECK_INT(id, >, 0);
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    /* A has the named lock while the lease runs */
    snprintf(sql, sizeof sql, "SELECT COALESCE(IS_USED_LOCK('dlock:cwl'), %lld) <> %lld", id, id);
    DT_WAIT_UNTIL(sql_number(sql) == 1, 5000);
    CHECK(!atomic_load(&w.done));
    int64_t cancel_at = dt_now_ms();
    CHECK_RC(dlock_cancel(al), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 5000);
    long long took = atomic_load(&w.ended_ms) - cancel_at;
    pthread_join(t, NULL);
    printf("cancel while the lease was waited out: %lld ms (rc %d)\n", took, atomic_load(&w.rc));
    CHECK_RC(atomic_load(&w.rc), DLOCK_ECANCELED);
    CHECK_INT(took, <, 500);
    DT_WAIT_UNTIL(held("dlock:cwl") == 0, 5000);
    CHECK_RC(dlock_acquire(bl, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(bl), >, dlock_lock_fence(hl));
    CHECK_RC(dlock_release(bl), DLOCK_OK);
    dlock_lock_free(al);
    dlock_lock_free(bl);
    dlock_lock_free(hl);
    dlock_client_close(a);
    dlock_client_close(b);
    dlock_client_close(h);
}

/* A server that goes silent (paused) under a wait blocked in it for long
 * is noticed about as soon as a request's bound would: the wait's watch
 * (another connection asks the server every half command timeout) ends
 * it, the core rides the outage for unreachable_wait and gives up, long
 * before the wait's budget. Once the server is back the name is served
 * again. */
static void silent_server_under_wait(void)
{
    dlock_client *h = client(NULL);
    /* a short lease: the given-up wait may still be granted in the server
     * after the resume (its KILL QUERY sent while the server was paused),
     * write its row, and let go as its closed connection is found; the
     * next holder then waits out that row's lease (README, "Waiting") */
    dlock_client *c = client("&timeout=500ms&unreachable_wait=1s&lease=1500ms");
    dlock_lock *hl = dt_lock(h, "sil", 0), *l = dt_lock(c, "sil", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    struct waiter w = {.l = l, .wait_ms = 30000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("dlock:sil") == 1, 5000);
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
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* ---------------------------------------------------------------- the pool */

struct churner {
    dlock_client *c;
    int idx;
    _Atomic int *stop;
    _Atomic long rounds;
};

/* Tries and releases its own name as fast as it can: every round takes a
 * connection from the pool and puts it back. Errors are expected (its
 * connections are killed under it); only the rounds are counted. */
/* A server silent for longer than a command timeout but shorter than the
 * lease costs no hold: the renewal sent into the silence is kept out on
 * its connection (which is the lock), its answer read by a retry due
 * before the validity ends. Before, the connection was closed at the
 * command timeout, and the lock with it (a 7 s freeze with a 10 s lease). */
static void paused_shorter_than_lease(void)
{
    dlock_client *c = client("&timeout=500ms&lease=3s");
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

static void *churn_thread(void *arg)
{
    struct churner *ch = arg;
    char name[32];
    snprintf(name, sizeof name, "churn-%d", ch->idx);
    dlock_lock *l = dt_lock(ch->c, name, 0);
    while (!atomic_load(ch->stop)) {
        if (dlock_try_acquire(l) == DLOCK_OK)
            (void) dlock_release(l);
        atomic_fetch_add(&ch->rounds, 1);
    }
    dlock_lock_free(l);
    return NULL;
}

/* Connections of the pool are killed in the server again and again while
 * threads take them from the pool and the renewer pings them (a lease of
 * 40 ms: a ping every 13 ms, and sessions given up on when a ping is
 * late). A ping that finds its connection killed, or a session given up
 * on, closes the connection and ends its session, which frees it when
 * nothing else refers to it. A thread that had just taken it from the
 * pool, and waited for its mutex, then used freed memory: the fault
 * suite's session-mode workers aborted with glibc's "malloc(): unsorted
 * double linked list corrupted". The race is a matter of timing: before
 * the fix, ThreadSanitizer reported it (conn_free on the renewer's thread
 * against dlock__my_get's unlock) in one run of two to four of this test;
 * ASan only when the freed block is touched. Each thread must keep going,
 * and every connection must be closed in the end. */
static void pool_under_kills(void)
{
    enum { THREADS = 8 };
    dlock_client *c = client("&lease=40ms");
    _Atomic int stop = 0;
    struct churner ch[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        ch[i] = (struct churner){.c = c, .idx = i, .stop = &stop};
        CHECK_INT(pthread_create(&t[i], NULL, churn_thread, &ch[i]), ==, 0);
    }
    MYSQL *k = mysql_init(NULL);
    CHECK(k != NULL);
    CHECK(mysql_real_connect(k, "127.0.0.1", "dlock", "dlock", "dlock", (unsigned) srv.port, NULL,
                             0) != NULL);
    int64_t end = dt_now_ms() + 3000;
    long kills = 0;
    while (dt_now_ms() < end) {
        /* the idle ones: in the pool, or being pinged */
        CHECK_INT(mysql_query(k, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = "
                                 "'dlock' AND ID <> CONNECTION_ID() AND COMMAND = 'Sleep'"),
                  ==, 0);
        MYSQL_RES *r = mysql_store_result(k);
        CHECK(r != NULL);
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(r)) != NULL) {
            char sql[64];
            snprintf(sql, sizeof sql, "KILL %s", row[0]);
            if (mysql_query(k, sql) == 0)
                kills++;
        }
        mysql_free_result(r);
        dt_sleep_ms(5);
    }
    atomic_store(&stop, 1);
    long rounds = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        rounds += atomic_load(&ch[i].rounds);
    }
    printf("pool under kills: %ld connections killed, %ld rounds\n", kills, rounds);
    CHECK_INT(kills, >, 10);
    CHECK_INT(rounds, >, 100);
    dlock_client_close(c);
    DT_WAIT_UNTIL(sql_number("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = "
                             "'dlock' AND ID <> CONNECTION_ID()") == 1,
                  5000);
    mysql_close(k);
}

/* ---------------------------------------------------------------- bad input */

static void bad_input(void)
{
    char url[300];
    dlock_client *c = NULL;
    dlock_lock *l;

    snprintf(url, sizeof url, "mysql://dlock:wrong@127.0.0.1:%d/dlock", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "Access denied") != NULL);
    CHECK(strstr(dlock_errmsg(), "a wrong password") != NULL);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    dlock_lock_free(l);
    dlock_client_close(c);

    snprintf(url, sizeof url, "mariadb://dlock:dlock@127.0.0.1:%d/nosuchdb", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "nosuchdb") != NULL);
    /* the server says "access denied" of a database that is not there */
    CHECK(strstr(dlock_errmsg(), "does the database in the URL's path exist?") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);

    snprintf(url, sizeof url, "%s?mode=rows", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "unknown mode 'rows'") != NULL);
    snprintf(url, sizeof url, "%s?mode=table&names=exact", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "names=exact") != NULL);
    snprintf(url, sizeof url, "%s?mode=row&names=exact", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "names=exact") != NULL);
    snprintf(url, sizeof url, "%s?names=upper", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    snprintf(url, sizeof url, "mysql://dlock:dlock@127.0.0.1:%d", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "database") != NULL);
    snprintf(url, sizeof url, "%s?mode=session", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_client_close(c);

    /* nobody listens: unreachable, within the core's bound for a store
     * never reached */
    snprintf(url, sizeof url, "mysql://dlock:dlock@127.0.0.1:%d/dlock", dt_free_port());
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    l = dt_lock(c, "bad", 0);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 30000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 3000);
    CHECK(strstr(dlock_errmsg(), "refused") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A grant that has seen its name's row leaves out the INSERT (README.md,
 * "The grant"); the row deleted by hand meanwhile, the next grant finds
 * none, and is sent again with it: taken, with a row written; the next
 * grant (no INSERT: the row is back) bumps the fence above it. */
static void row_deleted_between_grants(void)
{
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "rowgone", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    char sql[400];
    snprintf(sql, sizeof sql, "DELETE FROM dlock_fence WHERE name = '%s'; SELECT ROW_COUNT()",
             server_name("rowgone", 0));
    CHECK_INT(sql_number(sql), ==, 1);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    uint64_t again = dlock_lock_fence(l);
    CHECK_INT(again, >, 0);
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM dlock_fence WHERE name = '%s' AND holder <> ''",
             server_name("rowgone", 0));
    CHECK_INT(sql_number(sql), ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    /* and again without the INSERT: the row is there */
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, again);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* sql as the server's root (on its private socket: dlock's user may not
 * set globals). */
static void root_sql(const char *sql)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mariadb --no-defaults --socket=%s/mysqld.sock -uroot -e \"%s\"",
             srv.dir, sql);
    CHECK_INT(system(cmd), ==, 0);
}

/* A server whose init_connect turns autocommit off for dlock's user: each
 * mode's statements are meant to commit one by one (the table take, the
 * grant's fence and row lease, the release), and with autocommit off the
 * first would stay in an open transaction holding its row locks, unseen
 * by other clients. dlock sets autocommit on its sessions itself. */
static void autocommit_off_by_server(void)
{
    static const char *const modes[] = {"?mode=session", "?mode=table", "?mode=row"};
    root_sql("SET GLOBAL init_connect = 'SET autocommit = 0'");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char opts[64];
        snprintf(opts, sizeof opts, "%s&timeout=1s", modes[i]);
        dlock_client *a = dt_client(srv.url, opts), *b = dt_client(srv.url, opts);
        dlock_lock *la = dt_lock(a, "nocommit", 0), *lb = dt_lock(b, "nocommit", 0);
        CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
        uint64_t first = dlock_lock_fence(la);
        CHECK_RC(dlock_release(la), DLOCK_OK);
        int rc = dlock_acquire(lb, 2000);
        printf("%s: the second client's acquire after the first's release: %s\n", modes[i],
               dlock_strerror(rc));
        CHECK_RC(rc, DLOCK_OK);
        CHECK_INT(dlock_lock_fence(lb), >, first);
        CHECK_RC(dlock_release(lb), DLOCK_OK);
        dlock_lock_free(la);
        dlock_lock_free(lb);
        dlock_client_close(a);
        dlock_client_close(b);
    }
    root_sql("SET GLOBAL init_connect = ''");
}

/* ---------------------------------------------------------------- processes */

/* Processes increment a counter through the lock, each write fenced (a
 * fence not above the last one written is refused): exact count, never two
 * inside at once, no stale fence. */
static void fenced_processes(void)
{
    char url[300];
    snprintf(url, sizeof url, "%s?mode=session", srv.url);
    dt_fenced_processes(url, "procs", 6, 25);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"name_mapping", name_mapping},
        {"exact_names", exact_names},
        {"killed_holder", killed_holder},
        {"killed_holder_told_at_once", killed_holder_told_at_once},
        {"released_after_kill", released_after_kill},
        {"frozen_holder", frozen_holder},
        {"blocked_wait", blocked_wait},
        {"bad_input", bad_input},
        {"fenced_processes", fenced_processes},
        {"force_unlock_after_kill", force_unlock_after_kill},
        {"status_after_kill", status_after_kill},
        {"pool_under_kills", pool_under_kills},
        {"cancel_when_paused", cancel_when_paused},
        {"waiter_keeps_place", waiter_keeps_place},
        {"waiter_keeps_place_after_kill", waiter_keeps_place_after_kill},
        {"cancel_while_lease_waited", cancel_while_lease_waited},
        {"silent_server_under_wait", silent_server_under_wait},
        {"paused_shorter_than_lease", paused_shorter_than_lease},
        {"row_deleted_between_grants", row_deleted_between_grants},
        {"autocommit_off_by_server", autocommit_off_by_server},
    };
    dt_server_start(&srv, "mariadb", 0, NULL); /* once for every test (each a fork) */
    return DT_RUN(tests);
}
