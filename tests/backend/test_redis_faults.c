/* SPDX-License-Identifier: MIT */
/* test_redis_faults.c - what a Redis store can do to a lock that the
 * scripts and the client must survive: a waiter frozen while its hand-over
 * lapses, renewals that arrive after a lease ended, a store that loses its
 * fence counters, one key of a shared lock or a queue, a transaction
 * whose second half fails, a user who may not run scripts. Each was a bug
 * once (issue 9); each test fails without its fix. */
#include "../support/harness.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static dt_redis srv;

/* ---------------------------------------------------------------- item 1 */

/* A waiter frozen while the lock is handed to it, whose grant lapses and
 * goes to someone else, must not take the old hand-over notice for a fresh
 * grant when it resumes: it waits, and holds only after the other holder
 * is done, with a larger fence. */
static void frozen_waiter_ignores_stale_grant(void)
{
    int report[2], go[2];
    dt_redis_start(&srv, NULL);
    CHECK(pipe(report) == 0 && pipe(go) == 0);
    /* Forked before this process starts a client's threads (a fork of a
     * threaded process may not start threads under TSan); the child waits
     * for the word that A holds the lock. */
    pid_t w = fork();
    if (w == 0) {
        char word;
        close(report[0]);
        close(go[1]);
        if (read(go[0], &word, 1) != 1)
            _exit(3);
        dlock_client *c = dt_client(srv.url, "?lease=1s&waiter_lease=5s");
        dlock_lock *l = dt_lock(c, "L", 0);
        int rc = dlock_acquire(l, 30000);
        int64_t got[3] = {rc, dt_now_ms(), (int64_t) dlock_lock_fence(l)};
        dt_sleep_ms(200);
        if (write(report[1], got, sizeof got) != sizeof got)
            _exit(2);
        dlock_release(l);
        _exit(0);
    }
    close(report[1]);
    close(go[0]);
    dlock_client *a = dt_client(srv.url, "?lease=1s");
    dlock_lock *la = dt_lock(a, "L", 0);
    CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
    CHECK(write(go[1], "g", 1) == 1);
    close(go[1]);
    DT_WAIT_UNTIL(dt_query(a, "L", 0).waiters == 1, 5000);
    kill(w, SIGSTOP);
    CHECK(dt_wait_stopped(w));
    CHECK_RC(dlock_release(la), DLOCK_OK); /* handed to the frozen waiter */
    DT_WAIT_UNTIL(dt_query(a, "L", 0).held == 1, 2000);
    DT_WAIT_UNTIL(dt_query(a, "L", 0).held == 0, 5000); /* its 1 s grant lapsed */
    dlock_client *x = dt_client(srv.url, NULL);
    dlock_lock *lx = dt_lock(x, "L", 0);
    CHECK_RC(dlock_acquire_for(lx, 0, 5000), DLOCK_OK);
    kill(w, SIGCONT);
    dt_sleep_ms(1500); /* the waiter would have started by now if it believed the notice */
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(lx), DLOCK_OK);
    int64_t got[3];
    CHECK(read(report[0], got, sizeof got) == sizeof got);
    CHECK_RC((int) got[0], DLOCK_OK);
    CHECK_INT(got[1], >=, released);
    CHECK_INT((uint64_t) got[2], >, dlock_lock_fence(lx));
    int status;
    waitpid(w, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    dlock_lock_free(la);
    dlock_lock_free(lx);
    dlock_client_close(a);
    dlock_client_close(x);
}

/* ---------------------------------------------------------------- item 2 */

static int lost_calls;
static void count_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l, (void) code, (void) why, (void) arg;
    __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

/* Renewals sent before a shared hold's lease ended but run by the server
 * after it (the server was frozen) must not bring the hold back. */
static void late_renewal_does_not_revive_shared_holds(void)
{
    dt_redis_start(&srv, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=1s&timeout=5s");
    dlock_client *probe = dt_client(srv.url, NULL);
    dlock_lock *reader = dt_lock(c, "shared", DLOCK_READ), *sem = NULL;
    CHECK_RC(dlock_semaphore_open(c, "sem", 3, 1, &sem), DLOCK_OK);
    dlock_lock_on_lost(reader, count_lost, NULL);
    dlock_lock_on_lost(sem, count_lost, NULL);
    CHECK_RC(dlock_acquire(reader, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(sem, 0), DLOCK_OK);
    dt_sleep_ms(400); /* a renewal or two went through */
    kill(srv.pid, SIGSTOP);
    CHECK(dt_wait_stopped(srv.pid));
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 2, 3000);
    dt_sleep_ms(500);       /* the server-side leases are over too */
    kill(srv.pid, SIGCONT); /* the renewals sent meanwhile run now */
    dt_sleep_ms(300);
    dlock_status st = dt_query(probe, "shared", DLOCK_READ);
    CHECK_INT(st.shared, ==, 0);
    CHECK_INT(st.held, ==, 0);
    st = dt_query(probe, "sem", DLOCK_SEMAPHORE);
    CHECK_INT(st.shared, ==, 0);
    CHECK_INT(st.permits_used, ==, 0);
    CHECK_RC(dlock_release(reader), DLOCK_ELOST);
    CHECK_RC(dlock_release(sem), DLOCK_ELOST);
    dlock_lock_free(reader);
    dlock_lock_free(sem);
    dlock_client_close(c);
    dlock_client_close(probe);
}

/* The store loses one key of a shared lock and keeps the other (eviction
 * takes keys one at a time): L:holders without L:exp, or L:exp without
 * L:holders. The holds are lost, as when the store loses a mutex's key:
 * their holders are told, and the lock is free again at once, never held
 * for good by holders that have no lease end (a fault run found a
 * semaphore left held that way). */
static void partly_lost_shared_state_heals(void)
{
    static const char *const lost_keys[] = {"exp", "holders"};
    dt_redis_start(&srv, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=1s");
    dlock_client *probe = dt_client(srv.url, NULL);
    for (int k = 0; k < 2; k++) {
        __atomic_store_n(&lost_calls, 0, __ATOMIC_SEQ_CST);
        dlock_lock *reader = dt_lock(c, "part", DLOCK_READ), *sem = NULL;
        CHECK_RC(dlock_semaphore_open(c, "psem", 3, 2, &sem), DLOCK_OK);
        dlock_lock_on_lost(reader, count_lost, NULL);
        dlock_lock_on_lost(sem, count_lost, NULL);
        CHECK_RC(dlock_acquire(reader, 0), DLOCK_OK);
        CHECK_RC(dlock_acquire(sem, 0), DLOCK_OK);
        CHECK_INT(dt_query(probe, "psem", DLOCK_SEMAPHORE).permits_used, ==, 2);
        dt_redis_cli(&srv, "DEL dlock:{part}:rw:%s dlock:{psem}:sem:%s", lost_keys[k],
                     lost_keys[k]);

        dlock_status st = dt_query(probe, "part", DLOCK_READ);
        CHECK_INT(st.shared, ==, 0);
        st = dt_query(probe, "psem", DLOCK_SEMAPHORE);
        CHECK_INT(st.shared, ==, 0);
        CHECK_INT(st.permits_used, ==, 0);
        /* free for others at once: every permit, and the write lock */
        dlock_lock *all = NULL, *writer = dt_lock(probe, "part", DLOCK_WRITE);
        CHECK_RC(dlock_semaphore_open(probe, "psem", 3, 3, &all), DLOCK_OK);
        CHECK_RC(dlock_try_acquire(all), DLOCK_OK);
        CHECK_RC(dlock_try_acquire(writer), DLOCK_OK);
        /* the count dlock 0.1 clients read is right again too */
        CHECK(strcmp(dt_redis_cli(&srv, "GET dlock:{psem}:sem:used"), "3") == 0);
        /* the holders learn it at their next renewal */
        DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 2, 3000);
        CHECK_RC(dlock_release(reader), DLOCK_ELOST);
        CHECK_RC(dlock_release(sem), DLOCK_ELOST);
        CHECK_RC(dlock_release(all), DLOCK_OK);
        CHECK_RC(dlock_release(writer), DLOCK_OK);
        dlock_lock_free(all);
        dlock_lock_free(writer);
        dlock_lock_free(reader);
        dlock_lock_free(sem);
    }
    dlock_client_close(c);
    dlock_client_close(probe);
}

/* A handle that takes a lock, holds it a moment and queues for it again,
 * until told to stop: two of them keep a lock handed from one to the other. */
typedef struct taker {
    dlock_lock *l;
    int *stop;
} taker;

static void *take_turns(void *arg)
{
    taker *t = arg;
    while (!__atomic_load_n(t->stop, __ATOMIC_SEQ_CST)) {
        if (dlock_acquire(t->l, 10000) == DLOCK_OK) {
            dt_sleep_ms(20);
            dlock_release(t->l);
        }
    }
    return NULL;
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
    int done;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->l, 6000);
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* The store loses a lock's queue and keeps a waiter's place: the waiter
 * joins the queue again at its next heartbeat. Before, it stayed out of the
 * queue, and while others kept the lock busy (handing it over from one to
 * the next) it never reached the head, until its wait ran out. */
static void waiter_rejoins_a_lost_queue(void)
{
    dt_redis_start(&srv, NULL);
    dlock_client *h = dt_client(srv.url, NULL), *a = dt_client(srv.url, "?waiter_lease=600ms");
    dlock_client *others = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(h, "q", 0);
    CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK);
    waiter w = {dt_lock(a, "q", 0), -1, 0};
    pthread_t wt;
    CHECK(pthread_create(&wt, NULL, wait_for_lock, &w) == 0);
    DT_WAIT_UNTIL(dt_query(h, "q", 0).waiters == 1, 3000);
    dt_redis_cli(&srv, "DEL dlock:{q}:queue");

    int stop = 0;
    taker t[2] = {{dt_lock(others, "q", 0), &stop}, {dt_lock(others, "q", 0), &stop}};
    pthread_t tt[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&tt[i], NULL, take_turns, &t[i]) == 0);
    DT_WAIT_UNTIL(dt_query(h, "q", 0).waiters >= 2, 3000);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    DT_WAIT_UNTIL(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), 4000);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 2; i++) {
        pthread_join(tt[i], NULL);
        dlock_lock_free(t[i].l);
    }
    pthread_join(wt, NULL);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
    dlock_client_close(h);
    dlock_client_close(a);
    dlock_client_close(others);
}

/* ---------------------------------------------------------------- item 3 */

/* One acquire/release of `name` of the given kind; returns the fence. */
static uint64_t cycle(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock *l = NULL;
    if (flags == DLOCK_SEMAPHORE)
        CHECK_RC(dlock_semaphore_open(c, name, 2, 1, &l), DLOCK_OK);
    else
        l = dt_lock(c, name, flags);
    CHECK_RC(dlock_acquire(l, 1000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    return fence;
}

/* Fences keep increasing when the store loses its counters: FLUSHALL, a
 * restart without persistence, eviction of the counter alone. */
static void fences_survive_a_lost_counter(void)
{
    static const unsigned kinds[] = {0, DLOCK_FAIR, DLOCK_READ, DLOCK_WRITE, DLOCK_SEMAPHORE};
    dt_redis_start(&srv, NULL);
    dlock_client *c = dt_client(srv.url, NULL);

    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        uint64_t last = 0;
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 3; i++) {
                uint64_t f = cycle(c, "f", kinds[k]);
                CHECK_INT(f, >, last);
                last = f;
            }
            if (round == 0)
                dt_redis_cli(&srv, "FLUSHALL");
            else if (round == 1)
                dt_redis_cli(&srv, "DEL dlock:{f}:fence"); /* every kind's counter */
        }
    }
    /* a restart that keeps nothing */
    uint64_t before = cycle(c, "r", 0);
    dt_redis_stop(&srv);
    dt_redis_start_on(&srv, srv.port);
    CHECK_INT(cycle(c, "r", 0), >, before);

    /* a multi-lock in one step, and a hand-over, after the counter is gone */
    const char *names[] = {"m:{1}", "n:{1}"};
    dlock_lock *m = NULL;
    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(dlock_lock_member(m, 0));
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dt_redis_cli(&srv, "FLUSHALL");
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(dlock_lock_member(m, 0)), >, f1);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- item 4 */

/* When the fence fails half-way through the acquire script, the SET that
 * ran before it is undone (Redis does not roll a script back): the lock is
 * not left held by nobody. */
static void failed_fence_leaves_nothing_held(void)
{
    dt_redis_start(&srv, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *l = dt_lock(c, "broken", 0);
    dt_redis_cli(&srv, "HSET dlock:{broken}:fence x 1"); /* the fence fails: WRONGTYPE */
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "WRONGTYPE") != NULL);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK(strcmp(dt_redis_cli(&srv, "EXISTS dlock:{broken}"), "0") == 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- item 7 */

static char lost_why[256];
static void remember_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l, (void) code, (void) arg;
    snprintf(lost_why, sizeof lost_why, "%s", why);
    __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

/* calls=N of cmdstat_evalsha in INFO commandstats */
static long evalsha_calls(void)
{
    const char *info = dt_redis_cli(&srv, "INFO commandstats");
    const char *line = strstr(info, "cmdstat_evalsha:");
    const char *r = line != NULL ? strstr(line, "calls=") : NULL;
    return r != NULL ? strtol(r + 6, NULL, 10) : 0;
}

/* Renewals the server refuses are retried with a growing delay, not in a
 * loop, and the loss names the server's reason. */
static void refused_renewals_back_off(void)
{
    char url[256];
    dt_redis_start(&srv, NULL);
    /* a user whose scripts may take a lock (SET PX) but not renew it
     * (PEXPIRE): every renewal is refused with NOPERM */
    dt_redis_cli(&srv, "ACL SETUSER norenew on '>pw' '~*' '&*' +@all -pexpire");
    snprintf(url, sizeof url, "redis://norenew:pw@127.0.0.1:%d?lease=3s", srv.port);
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "ro", 0);
    dlock_lock_on_lost(l, remember_lost, NULL);
    lost_calls = 0;
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    long calls_before = evalsha_calls();
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 6000);
    long renewals = evalsha_calls() - calls_before;
    if (renewals > 40)
        dt_fail(__FILE__, __LINE__, "%ld renewals refused in one lease: retries do not back off",
                renewals);
    if (strstr(lost_why, "refused renew") == NULL || strstr(lost_why, "can't run") == NULL)
        dt_fail(__FILE__, __LINE__, "the loss does not name the server's reason: %s", lost_why);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* the server gone: retrying costs little CPU */
    c = dt_client(srv.url, "?lease=3s");
    l = dt_lock(c, "down", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    dt_redis_stop(&srv);
    dt_sleep_ms(2500);
    getrusage(RUSAGE_SELF, &after);
    long cpu_ms = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000 +
                  (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1000 +
                  (after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1000 +
                  (after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1000;
    if (cpu_ms > 300)
        dt_fail(__FILE__, __LINE__, "%ld ms of CPU retrying renewals for 2.5 s", cpu_ms);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void *wait_without_budget(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->l, DLOCK_WAIT_FOREVER);
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* With notify=stream, a waiter reads its stream on a connection of its
 * own. When the server goes away the reader dials it again after a pause
 * that grows (jittered) up to a second, not every 50 ms slice. */
static void stream_reader_backs_off(void)
{
    enum { WATCH_MS = 3000, MAX_DIALS = 15 };
    dt_proxy proxy;
    char url[256];
    dlock_client *c = NULL;

    dt_redis_start(&srv, NULL);
    dt_proxy_start(&proxy, srv.port, 1); /* before the clients' threads */
    dlock_client *holder = dt_client(srv.url, "");
    dlock_lock *h = dt_lock(holder, "s", 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    /* heartbeats every 10 s and no bound: only the reader dials meanwhile */
    snprintf(url, sizeof url,
             "redis://127.0.0.1:%d?notify=stream&waiter_lease=30s"
             "&unreachable_wait=forever",
             proxy.ports[0]);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "s", 0);
    waiter w = {.l = l};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_without_budget, &w) == 0);
    DT_WAIT_UNTIL(dt_query(holder, "s", 0).waiters == 1, 5000);
    dt_redis_stop(&srv); /* the proxy stays: every dial is accepted, then reset */
    long long before = dt_proxy_accepted(&proxy, 0);
    dt_sleep_ms(WATCH_MS);
    long long dials = dt_proxy_accepted(&proxy, 0) - before;
    printf("the server away for %d ms: %lld connection attempts\n", WATCH_MS, dials);
    CHECK(dials >= 3); /* it did try */
    CHECK_INT(dials, <=, MAX_DIALS);
    CHECK_RC(dlock_cancel(l), DLOCK_OK);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(w.rc, DLOCK_ECANCELED);
    dlock_lock_free(l);
    dlock_lock_free(h);
    dlock_client_close(c);
    dlock_client_close(holder);
    dt_proxy_stop(&proxy);
}

/* A wait's budget bounds it at a server that stopped answering: its last
 * request ends a tenth of a command timeout (200 ms at least) after the
 * budget, not half a command timeout (2.5 s of the default 5 s), and
 * leaving the line takes as long at most (1 s, before). */
static void budget_bounds_frozen_server(void)
{
    dt_redis_start(&srv, NULL);
    dlock_client *c = dt_client(srv.url, NULL); /* timeout: the default 5 s */
    dlock_lock *l = dt_lock(c, "frozen", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK); /* reached */
    CHECK_RC(dlock_release(l), DLOCK_OK);
    for (int reached = 1; reached >= 0; reached--) {
        dlock_client *fresh = reached ? NULL : dt_client(srv.url, NULL);
        dlock_lock *w = reached ? l : dt_lock(fresh, "frozen", 0);
        dt_server_pause(&srv);
        int64_t t0 = dt_now_ms();
        CHECK_RC(dlock_acquire(w, 1000), DLOCK_EUNREACHABLE);
        long long took = dt_now_ms() - t0;
        dt_server_resume(&srv);
        printf("%s: a 1 s wait at a frozen server returned after %lld ms: %s\n",
               reached ? "reached before" : "never reached", took, dlock_errmsg());
        CHECK_INT(took, >=, 900);
        CHECK_INT(took, <, 2500); /* 1000 + 500 + 500, and slack; 4500 before */
        if (!reached) {
            CHECK(strstr(dlock_errmsg(), "never reached") != NULL);
            dlock_lock_free(w);
            dlock_client_close(fresh);
        }
    }
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A holder whose server freezes loses the lock when its validity ends,
 * its renewal still out: the loss says the server has not answered it
 * (before, it said only "no successful renewal for N ms"). */
static void frozen_server_loss_names_why(void)
{
    dt_redis_start(&srv, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=3s");
    dlock_lock *l = dt_lock(c, "frozenloss", 0);
    dlock_lock_on_lost(l, remember_lost, NULL);
    lost_calls = 0;
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    dt_server_pause(&srv);
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 6000);
    dt_server_resume(&srv);
    printf("lost: %s\n", lost_why);
    /* The renewal is either still out ("has not answered") or failed on
     * its own timeout before the validity ran out ("no reply"): both name
     * the server and its silence. */
    if ((strstr(lost_why, "has not answered the renewal sent") == NULL &&
         strstr(lost_why, "no reply") == NULL) ||
        strstr(lost_why, srv.url) == NULL)
        dt_fail(__FILE__, __LINE__, "the loss does not say the server did not answer: %s",
                lost_why);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_redis_stop(&srv);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"frozen_waiter_ignores_stale_grant", frozen_waiter_ignores_stale_grant},
        {"late_renewal_does_not_revive_shared_holds", late_renewal_does_not_revive_shared_holds},
        {"partly_lost_shared_state_heals", partly_lost_shared_state_heals},
        {"waiter_rejoins_a_lost_queue", waiter_rejoins_a_lost_queue},
        {"fences_survive_a_lost_counter", fences_survive_a_lost_counter},
        {"failed_fence_leaves_nothing_held", failed_fence_leaves_nothing_held},
        {"refused_renewals_back_off", refused_renewals_back_off},
        {"stream_reader_backs_off", stream_reader_backs_off},
        {"budget_bounds_frozen_server", budget_bounds_frozen_server},
        {"frozen_server_loss_names_why", frozen_server_loss_names_why},
    };
    return DT_RUN(tests);
}
