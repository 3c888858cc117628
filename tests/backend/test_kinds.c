/* SPDX-License-Identifier: MIT */
/* test_kinds.c - the lock family against a real redis-server: fair lock,
 * read-write lock, semaphore, multi-lock, and the in-process wait queue. */
#include "../support/harness.h"
#include "backend/redis/scripts.h"
#include "core/lock.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static dt_server srv;

static unsigned waiters(dlock_client *c, const char *name, unsigned flags)
{
    dlock_status st;
    CHECK_RC(dlock_query(c, name, flags, &st), DLOCK_OK);
    return st.waiters;
}

/* ---------------------------------------------------------------- fair */

/* Processes queue one after another behind a holder; each appends its
 * number to a file when it gets the lock. */
static void fair_order_across_processes(void)
{
    enum { P = 5 };
    char path[256];
    pid_t pids[P];
    dlock_status st;

    dt_server_start(&srv, "redis", 0, NULL);
    snprintf(path, sizeof path, "%s/order", srv.dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fclose(f);
    /* fork first: the parent has no threads yet */
    for (int i = 0; i < P; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            dlock_client *c = dt_client(srv.url, NULL);
            dlock_lock *l = dt_lock(c, "fifo", DLOCK_FAIR);
            /* queue once the lock is held and every earlier one queued */
            DT_WAIT_UNTIL(dlock_query(c, "fifo", DLOCK_FAIR, &st) == DLOCK_OK && st.held &&
                              st.waiters == (unsigned) i,
                          10000);
            CHECK_RC(dlock_acquire(l, 30000), DLOCK_OK);
            FILE *out = fopen(path, "a");
            fprintf(out, "%d\n", i);
            fclose(out);
            CHECK_RC(dlock_release(l), DLOCK_OK);
            dlock_lock_free(l);
            dlock_client_close(c);
            _exit(0);
        }
    }
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(c, "fifo", DLOCK_FAIR);
    CHECK_RC(dlock_try_acquire(holder), DLOCK_OK);
    DT_WAIT_UNTIL(waiters(c, "fifo", DLOCK_FAIR) == P, 10000);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    for (int i = 0; i < P; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    f = fopen(path, "r");
    for (int i = 0; i < P; i++) {
        int who = -1;
        CHECK(fscanf(f, "%d", &who) == 1);
        CHECK_INT(who, ==, i); /* granted in the order they queued */
    }
    fclose(f);
    dlock_lock_free(holder);
    dlock_client_close(c);
}

/* A holder's lease runs out while a fair waiter is queued (and frozen, so
 * it cannot take the lock itself yet): a newcomer may not overtake it. */
static void fair_no_overtaking(void)
{
    int ready[2];
    dlock_status st;

    dt_server_start(&srv, "redis", 0, NULL);
    CHECK(pipe(ready) == 0);
    pid_t waiter = fork();
    if (waiter == 0) {
        dlock_client *c = dt_client(srv.url, NULL);
        dlock_lock *l = dt_lock(c, "queue", DLOCK_FAIR);
        DT_WAIT_UNTIL(dlock_query(c, "queue", DLOCK_FAIR, &st) == DLOCK_OK && st.held, 10000);
        CHECK(write(ready[1], dlock_lock_token(l), 32) == 32);
        CHECK_RC(dlock_acquire(l, 60000), DLOCK_OK);
        _exit(0);
    }
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(c, "queue", DLOCK_FAIR);
    dlock_lock *newcomer = dt_lock(c, "queue", DLOCK_FAIR);
    dlock_lock *plain = dt_lock(c, "queue", 0);
    char token[33] = {0};
    CHECK_RC(dlock_acquire_for(holder, 0, 800), DLOCK_OK);
    CHECK(read(ready[0], token, 32) == 32);
    DT_WAIT_UNTIL(waiters(c, "queue", DLOCK_FAIR) == 1, 10000);
    kill(waiter, SIGSTOP);
    CHECK(dt_wait_stopped(waiter));
    /* the holder's lease lapses: the lock is free, its waiter queued */
    DT_WAIT_UNTIL(dlock_query(c, "queue", 0, &st) == DLOCK_OK && !st.held, 10000);
    CHECK_RC(dlock_try_acquire(newcomer), DLOCK_EBUSY);
    /* ...and the fair attempt handed it to the waiter */
    CHECK_RC(dlock_query(c, "queue", 0, &st), DLOCK_OK);
    CHECK(strcmp(st.owner, token) == 0);
    CHECK_RC(dlock_try_acquire(plain), DLOCK_EBUSY);
    kill(waiter, SIGCONT);
    int status;
    waitpid(waiter, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* it got the lock */
    dlock_lock_free(holder);
    dlock_lock_free(newcomer);
    dlock_lock_free(plain);
    dlock_client_close(c);
}

static void fair_timed_out_waiter_leaves_no_trace(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(c, "trace", DLOCK_FAIR);
    dlock_lock *late = dt_lock(c, "trace", DLOCK_FAIR);
    dlock_status st;

    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    CHECK_RC(dlock_acquire(late, 300), DLOCK_ETIMEDOUT);
    CHECK_INT(waiters(c, "trace", DLOCK_FAIR), ==, 0);
    CHECK(strcmp(dt_server_cli(&srv, "KEYS 'dlock:{trace}:w:*'"), "") == 0);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    CHECK_RC(dlock_query(c, "trace", DLOCK_FAIR, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0); /* not handed to the one that gave up */
    dlock_lock_free(holder);
    dlock_lock_free(late);
    dlock_client_close(c);
}

static void fair_killed_waiter_bounded(void)
{
    dlock_status st;

    dt_server_start(&srv, "redis", 0, NULL);
    pid_t child = fork();
    if (child == 0) {
        dlock_client *cc = dt_client(srv.url, "?waiter_lease=300ms");
        dlock_lock *w = dt_lock(cc, "dead", DLOCK_FAIR);
        DT_WAIT_UNTIL(dlock_query(cc, "dead", DLOCK_FAIR, &st) == DLOCK_OK && st.held, 5000);
        dlock_acquire(w, 60000);
        _exit(0);
    }
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(c, "dead", DLOCK_FAIR), *next = dt_lock(c, "dead", DLOCK_FAIR);
    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    DT_WAIT_UNTIL(waiters(c, "dead", DLOCK_FAIR) == 1, 5000);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    dt_sleep_ms(400); /* the fault: the dead waiter stays silent past its place */
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    CHECK_RC(dlock_acquire(next, 5000), DLOCK_OK); /* the dead place is skipped */
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    dlock_lock_free(holder);
    dlock_lock_free(next);
    dlock_client_close(c);
}

/* Waiters queue in order behind a holder and are killed (kill -9); a live
 * one queues behind them; the holder lets go while the dead waiters' places
 * still live. A hand-over carries only the rest of the waiter's place, and
 * the live waiter's heartbeat hands on a lock that lapsed: the lock reaches
 * the live waiter within about one waiter lease, not a lease (before: the
 * first dead waiter was handed a whole 30 s lease, and the live one waited
 * for its end). For 1, 2 and 5 dead waiters, and for every kind. */
typedef struct handed_on {
    dlock_lock *lock;
    int rc;
    int64_t at_ms;
} handed_on;

static void *take_then_note(void *arg)
{
    handed_on *h = arg;
    h->rc = dlock_acquire(h->lock, 10000);
    h->at_ms = dt_now_ms();
    return NULL;
}

static dlock_lock *open_kind(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock *l = NULL;
    if (flags == DLOCK_SEMAPHORE)
        CHECK_RC(dlock_semaphore_open(c, name, 1, 1, &l), DLOCK_OK);
    else
        l = dt_lock(c, name, flags);
    return l;
}

static void dead_waiters_cost_a_waiter_lease(void)
{
    static const struct {
        unsigned flags;
        int dead;
    } cases[] = {{0, 1}, {0, 2}, {0, 5}, {DLOCK_FAIR, 2}, {DLOCK_WRITE, 2}, {DLOCK_SEMAPHORE, 2}};
    enum { NCASES = sizeof cases / sizeof cases[0], MOST = 5 };
    pid_t kids[NCASES][MOST];
    char name[NCASES][16];
    dlock_status st;

    dt_server_start(&srv, "redis", 0, NULL);
    for (size_t k = 0; k < NCASES; k++)
        snprintf(name[k], sizeof name[k], "gone%zu", k);
    /* fork first: the parent has no threads yet */
    for (size_t k = 0; k < NCASES; k++) {
        for (int i = 0; i < cases[k].dead; i++) {
            kids[k][i] = fork();
            if (kids[k][i] == 0) {
                dlock_client *cc = dt_client(srv.url, "?waiter_lease=1s");
                dlock_lock *w = open_kind(cc, name[k], cases[k].flags);
                DT_WAIT_UNTIL(dlock_query(cc, name[k], cases[k].flags, &st) == DLOCK_OK &&
                                  st.held && st.waiters == (unsigned) i,
                              20000);
                dlock_acquire(w, 60000);
                _exit(0);
            }
        }
    }
    dlock_client *c = dt_client(srv.url, "?waiter_lease=1s");
    for (size_t k = 0; k < NCASES; k++) {
        dlock_lock *holder = open_kind(c, name[k], cases[k].flags);
        handed_on next = {.lock = open_kind(c, name[k], cases[k].flags)};
        pthread_t t;
        CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK); /* a renewed 30 s lease */
        DT_WAIT_UNTIL(waiters(c, name[k], cases[k].flags) == (unsigned) cases[k].dead, 20000);
        for (int i = 0; i < cases[k].dead; i++)
            dt_kill_reap(kids[k][i]);
        CHECK(pthread_create(&t, NULL, take_then_note, &next) == 0);
        DT_WAIT_UNTIL(waiters(c, name[k], cases[k].flags) == (unsigned) cases[k].dead + 1, 5000);
        int64_t t0 = dt_now_ms();
        CHECK_RC(dlock_release(holder), DLOCK_OK); /* handed to a dead waiter */
        pthread_join(t, NULL);
        CHECK_RC(next.rc, DLOCK_OK);
        /* one waiter lease (1 s), a heartbeat (a third of it), and slack */
        CHECK_INT(next.at_ms - t0, <, 2500);
        CHECK_RC(dlock_release(next.lock), DLOCK_OK);
        dlock_lock_free(holder);
        dlock_lock_free(next.lock);
    }
    dlock_client_close(c);
}

/* One name is one lock on Redis: the interop key N and the name's own
 * keys exclude each other both ways, a key set by another client (SET N
 * token NX PX, as redis-py's Lock) holds the name for every kind, and a
 * kind waiting for another kind takes the name soon after it is let go (it
 * polls; no notice crosses kinds). */
static atomic_int waits_logged;

static void count_waits(int level, const char *msg, void *arg)
{
    (void) level;
    (void) arg;
    if (strstr(msg, "waiting") != NULL)
        atomic_fetch_add(&waits_logged, 1);
}

static void interop_key_is_the_same_lock(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_DEBUG, count_waits, NULL), DLOCK_OK);
    dlock_lock *simple = dt_lock(c, "mix", DLOCK_SIMPLE), *mutex = dt_lock(c, "mix", 0);
    dlock_lock *writer = dt_lock(c, "mix", DLOCK_WRITE), *sem = NULL;
    CHECK_RC(dlock_semaphore_open(c, "mix", 2, 1, &sem), DLOCK_OK);

    CHECK_RC(dlock_try_acquire(mutex), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(simple), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held as a mutex") != NULL);
    CHECK_RC(dlock_release(mutex), DLOCK_OK);

    CHECK_RC(dlock_try_acquire(simple), DLOCK_OK);
    dlock_lock *kinds[] = {mutex, writer, sem};
    for (size_t i = 0; i < 3; i++) {
        CHECK_RC(dlock_try_acquire(kinds[i]), DLOCK_EBUSY);
        CHECK(strstr(dlock_errmsg(), "held as an interop key") != NULL);
    }
    /* a waiting kind gets it soon after the release */
    handed_on w = {.lock = writer};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, take_then_note, &w) == 0);
    DT_WAIT_UNTIL(atomic_load(&waits_logged) > 0, 5000); /* it found the name held */
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(simple), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(w.at_ms - t0, <, 500);
    CHECK_RC(dlock_try_acquire(simple), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held as a read-write lock") != NULL);
    CHECK_RC(dlock_release(writer), DLOCK_OK);

    /* another client's key, as redis-py's Lock sets it */
    dt_redis_cli(&srv, "SET mix foreign PX 30000");
    for (size_t i = 0; i < 3; i++)
        CHECK_RC(dlock_try_acquire(kinds[i]), DLOCK_EBUSY);
    dt_redis_cli(&srv, "DEL mix");
    CHECK_RC(dlock_try_acquire(sem), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(simple), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held as a semaphore") != NULL);
    CHECK_RC(dlock_release(sem), DLOCK_OK);

    dlock_lock_free(simple);
    dlock_lock_free(mutex);
    dlock_lock_free(writer);
    dlock_lock_free(sem);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- read-write */

static void readers_overlap_writer_alone(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *r[3], *w = dt_lock(c, "doc", DLOCK_WRITE), *w2 = dt_lock(c, "doc", DLOCK_WRITE);
    dlock_status st;
    uint64_t last = 0;

    for (int i = 0; i < 3; i++) {
        r[i] = dt_lock(c, "doc", DLOCK_READ);
        CHECK_RC(dlock_try_acquire(r[i]), DLOCK_OK);
        CHECK_INT(dlock_lock_fence(r[i]), >, last);
        last = dlock_lock_fence(r[i]);
    }
    CHECK_RC(dlock_query(c, "doc", DLOCK_READ, &st), DLOCK_OK);
    CHECK_INT(st.shared, ==, 3);
    CHECK(st.held && st.owner[0] == '\0' && st.lease_ms > 0);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY);
    /* one name is one lock: the mutex of the same name is held too */
    dlock_lock *m = dt_lock(c, "doc", 0);
    CHECK_RC(dlock_try_acquire(m), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held as a read-write lock") != NULL);
    dlock_lock_free(m);
    for (int i = 0; i < 3; i++)
        CHECK_RC(dlock_release(r[i]), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(w), >, last);
    CHECK_RC(dlock_try_acquire(r[0]), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(w, 0), DLOCK_OK); /* re-entry */
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r[0]), DLOCK_EBUSY); /* still held once */
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r[0]), DLOCK_OK);
    CHECK_RC(dlock_acquire(r[0], 0), DLOCK_OK); /* readers re-enter too */
    CHECK_RC(dlock_release(r[0]), DLOCK_OK);
    CHECK_RC(dlock_query(c, "doc", DLOCK_READ, &st), DLOCK_OK);
    CHECK_INT(st.shared, ==, 1);
    CHECK_RC(dlock_release(r[0]), DLOCK_OK);
    CHECK_RC(dlock_query(c, "doc", DLOCK_READ, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(r[i]);
    dlock_lock_free(w);
    dlock_lock_free(w2);
    dlock_client_close(c);
}

static void downgrade_and_upgrade(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *w = dt_lock(c, "cfg", DLOCK_WRITE), *r, *other = dt_lock(c, "cfg", DLOCK_READ);
    dlock_lock *w2 = dt_lock(c, "cfg", DLOCK_WRITE), *up;

    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &r), DLOCK_OK);
    CHECK(strcmp(dlock_lock_token(r), dlock_lock_token(w)) == 0);
    CHECK_RC(dlock_try_acquire(other), DLOCK_EBUSY); /* the writer excludes others */
    CHECK_RC(dlock_try_acquire(r), DLOCK_OK);        /* but not its own reader */
    CHECK_RC(dlock_release(w), DLOCK_OK);            /* downgraded */
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);    /* readers share again */
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    /* a reader asking for the write lock would wait for itself */
    CHECK_RC(dlock_lock_dup(r, DLOCK_WRITE, &up), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(up, 5000), DLOCK_EDEADLK);
    CHECK_INT(dt_now_ms() - t0, <, 1000); /* at once, not after the budget */
    CHECK(strstr(dlock_errmsg(), "upgrade") != NULL);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(up), DLOCK_OK);
    CHECK_RC(dlock_release(up), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(r);
    dlock_lock_free(other);
    dlock_lock_free(w2);
    dlock_lock_free(up);
    dlock_client_close(c);
}

typedef struct stream_arg {
    dlock_client *client;
    atomic_int *stop;
    atomic_int *readers_in;
    atomic_int *violations;
    atomic_int *writer_in;
} stream_arg;

static void *reader_stream(void *p)
{
    stream_arg *a = p;
    dlock_lock *r = dt_lock(a->client, "hotdoc", DLOCK_READ);
    while (!atomic_load(a->stop)) {
        CHECK_RC(dlock_acquire(r, 20000), DLOCK_OK);
        atomic_fetch_add(a->readers_in, 1);
        if (atomic_load(a->writer_in))
            atomic_fetch_add(a->violations, 1);
        dt_sleep_ms(15); /* readers overlap: some reader always holds it */
        atomic_fetch_sub(a->readers_in, 1);
        CHECK_RC(dlock_release(r), DLOCK_OK);
    }
    dlock_lock_free(r);
    return NULL;
}

static void writer_not_starved(void)
{
    enum { READERS = 4 };
    atomic_int stop = 0, readers_in = 0, violations = 0, writer_in = 0;
    pthread_t t[READERS];

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    stream_arg a = {c, &stop, &readers_in, &violations, &writer_in};
    for (int i = 0; i < READERS; i++)
        pthread_create(&t[i], NULL, reader_stream, &a);
    DT_WAIT_UNTIL(atomic_load(&readers_in) > 0, 5000);
    dlock_lock *w = dt_lock(c, "hotdoc", DLOCK_WRITE);
    for (int round = 0; round < 3; round++) {
        CHECK_RC(dlock_acquire(w, 5000), DLOCK_OK); /* not starved */
        atomic_store(&writer_in, 1);
        CHECK_INT(atomic_load(&readers_in), ==, 0); /* and alone */
        dt_sleep_ms(10);
        atomic_store(&writer_in, 0);
        CHECK_RC(dlock_release(w), DLOCK_OK);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(atomic_load(&violations), ==, 0);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- semaphore */

typedef struct waiter_arg {
    dlock_lock *lock;
    int rc;
} waiter_arg;

static void *wait_for_it(void *p)
{
    waiter_arg *w = p;
    w->rc = dlock_acquire(w->lock, 20000);
    return NULL;
}

static void semaphore_never_more_than_n(void)
{
    enum { N = 3, P = 6 };
    atomic_int *shared =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    atomic_int *inside = &shared[0], *most = &shared[1], *done = &shared[2],
               *victim_in = &shared[3];
    pid_t pids[P];

    dt_server_start(&srv, "redis", 0, NULL);
    atomic_store(inside, 0);
    atomic_store(most, 0);
    atomic_store(done, 0);
    atomic_store(victim_in, 0);
    for (int i = 0; i < P; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            dlock_client *c = dt_client(srv.url, "?lease=1s");
            dlock_lock *s;
            CHECK_RC(dlock_semaphore_open(c, "pool", N, 1, &s), DLOCK_OK);
            for (int k = 0; k < 40; k++) {
                CHECK_RC(dlock_acquire(s, 20000), DLOCK_OK);
                int now = atomic_fetch_add(inside, 1) + 1;
                int seen = atomic_load(most);
                while (now > seen && !atomic_compare_exchange_weak(most, &seen, now))
                    ;
                dt_sleep_ms(2);
                atomic_fetch_sub(inside, 1);
                if (dlock_release(s) != DLOCK_OK)
                    _exit(3);
            }
            atomic_fetch_add(done, 1);
            _exit(0);
        }
    }
    /* one holder dies holding a permit mid-run: its permit comes back with
     * its lease, and the others carry on */
    pid_t victim = fork();
    if (victim == 0) {
        dlock_client *c = dt_client(srv.url, "?lease=1s");
        dlock_lock *s;
        CHECK_RC(dlock_semaphore_open(c, "pool", N, 1, &s), DLOCK_OK);
        CHECK_RC(dlock_acquire(s, 20000), DLOCK_OK);
        atomic_fetch_add(inside, 1);
        atomic_store(victim_in, 1);
        pause();
    }
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_status st;
    DT_WAIT_UNTIL(atomic_load(victim_in) == 1, 10000);
    kill(victim, SIGKILL);
    waitpid(victim, NULL, 0);
    atomic_fetch_sub(inside, 1); /* it is gone; its permit lingers until its lease ends */
    for (int i = 0; i < P; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK_INT(atomic_load(most), <=, N);
    CHECK_INT(atomic_load(most), >=, 2); /* and they did share it */
    CHECK_RC(dlock_query(c, "pool", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits_used, <=, 1);
    dlock_client_close(c);
    munmap(shared, 4096);
}

static void semaphore_takes_k_at_once(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *a, *b, *small, *again;
    dlock_status st;

    CHECK_RC(dlock_semaphore_open(c, "slots", 5, 6, &a), DLOCK_EINVAL);
    CHECK_RC(dlock_semaphore_open(c, "slots", 5, 0, &a), DLOCK_EINVAL);
    CHECK_RC(dlock_semaphore_open(c, "slots", 5, 3, &a), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c, "slots", 5, 3, &b), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c, "slots", 5, 2, &small), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c, "slots", 5, 1, &again), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY); /* 3 of the 2 left: none taken */
    CHECK(strstr(dlock_errmsg(), "permits") != NULL);
    CHECK_RC(dlock_query(c, "slots", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits_used, ==, 3);
    CHECK_INT(st.shared, ==, 1);
    CHECK_INT(st.permits, ==, 5);
    CHECK_RC(dlock_try_acquire(small), DLOCK_OK);
    CHECK_RC(dlock_query(c, "slots", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits_used, ==, 5);
    CHECK_RC(dlock_release(small), DLOCK_OK);

    /* a user that declares another number while the semaphore is in use is
     * told so, and changes nothing */
    dlock_lock *other;
    CHECK_RC(dlock_semaphore_open(c, "slots", 7, 1, &other), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(other), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "in use with 5 permits, not 7") != NULL);
    CHECK_RC(dlock_query(c, "slots", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits, ==, 5);
    CHECK_INT(st.permits_used, ==, 3);

    /* a big request at the head of the queue is not overtaken */
    pthread_t t;
    waiter_arg w = {b, -1};
    pthread_create(&t, NULL, wait_for_it, &w);
    DT_WAIT_UNTIL(waiters(c, "slots", DLOCK_SEMAPHORE) == 1, 5000);
    CHECK_RC(dlock_try_acquire(again), DLOCK_EBUSY); /* 1 would fit, but b is first */
    CHECK_RC(dlock_release(a), DLOCK_OK);            /* b goes in */
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_RC(dlock_try_acquire(again), DLOCK_OK);
    CHECK_RC(dlock_query(c, "slots", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits_used, ==, 4);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    CHECK_RC(dlock_release(again), DLOCK_OK);
    /* idle, it takes the new number */
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_query(c, "slots", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits, ==, 7);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(small);
    dlock_lock_free(again);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- multi-lock */

static void *multi_loop(void *p)
{
    const char **names = p;
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *m;
    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    for (int i = 0; i < 60; i++) {
        CHECK_RC(dlock_acquire(m, 20000), DLOCK_OK);
        CHECK_RC(dlock_release(m), DLOCK_OK);
    }
    dlock_lock_free(m);
    dlock_client_close(c);
    return NULL;
}

static void multi_opposite_orders_no_deadlock(void)
{
    static const char *ab[] = {"alpha", "beta"}, *ba[] = {"beta", "alpha"};
    pthread_t t1, t2;

    dt_server_start(&srv, "redis", 0, NULL);
    int64_t t0 = dt_now_ms();
    pthread_create(&t1, NULL, multi_loop, (void *) ab);
    pthread_create(&t2, NULL, multi_loop, (void *) ba);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_INT(dt_now_ms() - t0, <, 20000); /* both finished: no deadlock */
}

static void multi_one_slot_all_or_nothing(void)
{
    /* names that begin with one hash tag share a slot (keys.h) */
    static const char *names[] = {"{42}:stock", "{42}:order", "{42}:stock"};
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *m, *other = dt_lock(c, "{42}:order", 0);
    dlock_status st;

    CHECK_RC(dlock_multi_open(c, names, 3, 0, &m), DLOCK_OK);
    CHECK_INT(dlock_lock_members(m), ==, 2); /* duplicates count once */
    CHECK(strcmp(dlock_lock_name(dlock_lock_member(m, 0)), "{42}:order") == 0);
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "{42}:order") != NULL);
    CHECK_RC(dlock_query(c, "{42}:stock", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0); /* nothing taken */
    CHECK_RC(dlock_release(other), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(m), ==, 1);
    for (size_t i = 0; i < 2; i++) {
        const dlock_lock *member = dlock_lock_member(m, i);
        CHECK(dlock_lock_fence(member) > 0);
        CHECK_RC(dlock_query(c, dlock_lock_name(member), 0, &st), DLOCK_OK);
        CHECK(strcmp(st.owner, dlock_lock_token(m)) == 0);
    }
    CHECK_INT(dlock_lock_fence(m), ==, dlock_lock_fence(dlock_lock_member(m, 0)));
    CHECK_RC(dlock_try_acquire(other), DLOCK_EBUSY);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(other);
    dlock_client_close(c);
}

static void multi_rolls_back_on_timeout(void)
{
    static const char *names[] = {"left", "right"};
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *m, *right = dt_lock(c, "right", 0);
    dlock_status st;

    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(right, 0, 30000), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 300), DLOCK_ETIMEDOUT);
    CHECK(strstr(dlock_errmsg(), "left,right") != NULL);
    CHECK_RC(dlock_query(c, "left", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0); /* given back */
    CHECK_INT(dlock_lock_holds(m), ==, 0);
    CHECK_RC(dlock_release(right), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 1000), DLOCK_OK);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(right);
    dlock_client_close(c);
}

static int multi_lost_calls;
static void on_multi_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) why;
    CHECK(l == arg);
    CHECK_RC(code, DLOCK_ELOST);
    __atomic_add_fetch(&multi_lost_calls, 1, __ATOMIC_SEQ_CST);
}

static void multi_loss_reported(void)
{
    static const char *names[] = {"one", "two"};
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=600ms");
    dlock_lock *m;

    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    dlock_lock_on_lost(m, on_multi_lost, m);
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    dt_server_cli(&srv, "DEL dlock:{two}");
    DT_WAIT_UNTIL(__atomic_load_n(&multi_lost_calls, __ATOMIC_SEQ_CST) == 1, 5000);
    CHECK_RC(dlock_lock_check(m), DLOCK_ELOST);
    CHECK_RC(dlock_release(m), DLOCK_ELOST);
    dlock_status st;
    CHECK_RC(dlock_query(c, "one", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0); /* the member still held was released */
    dlock_lock_free(m);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- local queue */

typedef struct local_arg {
    dlock_client *client;
    int index;
    int rc;
    int *order;
    atomic_int *next;
} local_arg;

static void *local_waiter(void *p)
{
    local_arg *a = p;
    dlock_lock *l = dt_lock(a->client, "busy", 0);
    a->rc = dlock_acquire(l, 20000);
    if (a->rc == DLOCK_OK) {
        a->order[atomic_fetch_add(a->next, 1)] = a->index;
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
    return NULL;
}

/* How many times the server ran a command (as INFO commandstats names it). */
static long command_calls(const char *name)
{
    char field[64];
    snprintf(field, sizeof field, "cmdstat_%s:calls=", name);
    const char *stats = strstr(dt_server_cli(&srv, "INFO commandstats"), field);
    return stats != NULL ? strtol(stats + strlen(field), NULL, 10) : 0;
}

/* Uncontended tries so far (MULTI/SET NX/.../EXEC). */
static long exec_calls(void)
{
    return command_calls("exec");
}

static void local_queue_order_and_limit(void)
{
    enum { N = 4 };
    int order[N];
    atomic_int next = 0;
    pthread_t t[N];
    local_arg a[N];

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?local_queue=on&max_local_waiters=3");
    dlock_client *other = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(other, "busy", 0), *probe = dt_lock(c, "busy", 0);
    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    long tries = 0;
    for (int i = 0; i < N; i++) {
        a[i] = (local_arg){c, i, -1, order, &next};
        pthread_create(&t[i], NULL, local_waiter, &a[i]);
        DT_WAIT_UNTIL(dlock__lq_waiting(c->lq, (int) probe->spec.kind, probe->name) ==
                          (unsigned) i + 1,
                      5000);
        if (i == 0) {
            DT_WAIT_UNTIL(waiters(other, "busy", 0) == 1, 5000);
            tries = exec_calls();
        }
    }
    /* one place on the server for the whole client, and the threads behind
     * the first did not even try the lock there */
    CHECK_INT(waiters(other, "busy", 0), ==, 1);
    CHECK_INT(exec_calls(), ==, tries);
    /* the limit: 3 waiting beyond the one on the server */
    CHECK_RC(dlock_acquire(probe, 5000), DLOCK_EQUEUEFULL);
    CHECK(strstr(dlock_errmsg(), "limit is 3") != NULL);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECK_RC(a[i].rc, DLOCK_OK);
    }
    for (int i = 0; i < N; i++)
        CHECK_INT(order[i], ==, i); /* in arrival order */
    dlock_lock_free(holder);
    dlock_lock_free(probe);
    dlock_client_close(other);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- streams */

static void *wait_long(void *p)
{
    waiter_arg *w = p;
    w->rc = dlock_acquire(w->lock, 20000);
    return NULL;
}

static void stream_notices(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    /* heartbeats every 10 s: only a notice can wake the waiter sooner */
    dlock_client *c = dt_client(srv.url, "?notify=stream&waiter_lease=30s");
    dlock_client *other = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(other, "streamed", 0);
    waiter_arg w = {dt_lock(c, "streamed", 0), -1};
    pthread_t t;

    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    pthread_create(&t, NULL, wait_long, &w);
    DT_WAIT_UNTIL(waiters(other, "streamed", 0) == 1, 5000);
    /* the waiter's reading connection drops, and the release happens
     * before it is back: the notice waits in the stream */
    DT_WAIT_UNTIL(strstr(dt_server_cli(&srv, "CLIENT LIST"), "cmd=xread") != NULL, 5000);
    char list[4096];
    snprintf(list, sizeof list, "%s", dt_server_cli(&srv, "CLIENT LIST"));
    char *line = strstr(list, "cmd=xread");
    while (line > list && line[-1] != '\n')
        line--;
    long id = strtol(strstr(line, "id=") + 3, NULL, 10);
    CHECK(strcmp(dt_server_cli(&srv, "CLIENT KILL ID %ld", id), "1") == 0);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(dt_now_ms() - released, <, 5000);
    CHECK(strcmp(dt_server_cli(&srv, "TYPE 'dlock:{streamed}:wake:%s'", c->cfg.client_id),
                 "stream") == 0);
    uint64_t first = dlock_lock_fence(w.lock);
    CHECK_RC(dlock_release(w.lock), DLOCK_OK);

    /* a second wait reads on from where the first stopped: the stale
     * notice still in the stream does not wake it early */
    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    pthread_create(&t, NULL, wait_long, &w);
    DT_WAIT_UNTIL(waiters(other, "streamed", 0) == 1, 5000);
    CHECK_INT(dlock_lock_holds(w.lock), ==, 0);
    released = dt_now_ms();
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(dt_now_ms() - released, <, 5000);
    CHECK(dlock_lock_fence(w.lock) > first + 1);
    CHECK(strcmp(dt_server_cli(&srv, "XLEN 'dlock:{streamed}:wake:%s'", c->cfg.client_id), "2") ==
          0);
    CHECK_RC(dlock_release(w.lock), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_close(other);
    dlock_client_close(c);
}

/* notify=pubsub: the release publishes to the waiter's client's own channel,
 * which the client subscribed to (no pattern the server would have to match
 * every PUBLISH against). Heartbeats every 10 s and a 30 s lease: only the
 * notice can hand the lock over within 5 s. */
static void pubsub_notices(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?waiter_lease=30s");
    dlock_client *other = dt_client(srv.url, NULL);
    dlock_lock *holder = dt_lock(other, "published", 0);
    waiter_arg w = {dt_lock(c, "published", 0), -1};
    pthread_t t;

    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    pthread_create(&t, NULL, wait_long, &w);
    DT_WAIT_UNTIL(waiters(other, "published", 0) == 1, 5000);
    CHECK(strstr(dt_server_cli(&srv, "PUBSUB NUMSUB dlock:wake:%s", c->cfg.client_id), "\n1") !=
          NULL);
    CHECK(strcmp(dt_server_cli(&srv, "PUBSUB NUMPAT"), "0") == 0);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(dt_now_ms() - released, <, 5000);
    CHECK_RC(dlock_release(w.lock), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_close(other);
    dlock_client_close(c);
}

/* A second lock waited for while the reading connection is blocked on the
 * first one's stream: that XREAD is cut short (CLIENT UNBLOCK) so the next
 * covers both. A wait that starts in the instant between two XREADs needs
 * no cut (the next XREAD covers it anyway), so up to three second locks
 * are tried; without the cut, none of them sees one. */
static void stream_second_lock_joins(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?notify=stream&waiter_lease=30s");
    dlock_client *other = dt_client(srv.url, NULL);
    dlock_lock *h1 = dt_lock(other, "first", 0);
    waiter_arg w1 = {dt_lock(c, "first", 0), -1};
    pthread_t t1;
    int cut = 0;

    CHECK_RC(dlock_acquire_for(h1, 0, 30000), DLOCK_OK);
    pthread_create(&t1, NULL, wait_long, &w1);
    DT_WAIT_UNTIL(strstr(dt_server_cli(&srv, "CLIENT LIST"), "cmd=xread") != NULL, 5000);
    CHECK_INT(command_calls("client|unblock"), ==, 0);
    for (int attempt = 0; attempt < 3 && !cut; attempt++) {
        char name[32];
        snprintf(name, sizeof name, "second-%d", attempt);
        dlock_lock *h2 = dt_lock(other, name, 0);
        waiter_arg w2 = {dt_lock(c, name, 0), -1};
        pthread_t t2;
        CHECK_RC(dlock_acquire_for(h2, 0, 30000), DLOCK_OK);
        pthread_create(&t2, NULL, wait_long, &w2);
        DT_WAIT_UNTIL(waiters(other, name, 0) == 1, 5000);
        /* the cut is sent right after the waiter queues, before it waits */
        int64_t until = dt_now_ms() + 2000;
        while (!(cut = command_calls("client|unblock") == 1) && dt_now_ms() < until)
            dt_sleep_ms(5);
        CHECK_RC(dlock_release(h2), DLOCK_OK);
        pthread_join(t2, NULL);
        CHECK_RC(w2.rc, DLOCK_OK);
        CHECK_INT(dlock_lock_holds(w1.lock), ==, 0); /* the first still waits */
        CHECK_RC(dlock_release(w2.lock), DLOCK_OK);
        dlock_lock_free(h2);
        dlock_lock_free(w2.lock);
    }
    CHECK(cut);
    CHECK_RC(dlock_release(h1), DLOCK_OK);
    pthread_join(t1, NULL);
    CHECK_RC(w1.rc, DLOCK_OK);
    CHECK_RC(dlock_release(w1.lock), DLOCK_OK);
    dlock_lock_free(h1);
    dlock_lock_free(w1.lock);
    dlock_client_close(other);
    dlock_client_close(c);
}

/* A reader handed its share while it was queued, and who missed the
 * notice (a waiter behind another kind looks again on its polling steps,
 * each under a fresh wait id, so a notice meant for the step before is
 * ignored), takes the share when it asks again: it does not queue again
 * behind the writer that waits for that very share, which would hold the
 * name for nobody until the share's lease ran out. The scripts step by
 * step, as the clients would run them (one at a time: no race to lose). */
static redisReply *rw_acquire(redisContext *rc, const char *token, const char *flags,
                              const char *waiter)
{
    const dlock__script *s = dlock__script_get(DLOCK__S_RW_ACQUIRE);
    const char *argv[] = {"EVAL",  s->body, "1",    "t:{handed}:rw", token,
                          "30000", flags,   waiter, "handed"};
    size_t lens[9];
    for (int i = 0; i < 9; i++)
        lens[i] = i == 1 ? s->len : strlen(argv[i]);
    redisReply *r = redisCommandArgv(rc, 9, argv, lens);
    CHECK(r != NULL);
    return r;
}

static void reader_takes_share_handed_while_polling(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    struct timeval tv = {5, 0};
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    CHECK(rc != NULL && rc->err == 0);
    redisSetTimeout(rc, tv);
    /* a mutex holds the name; the reader queues behind it (held as 1) */
    freeReplyObject(redisCommand(rc, "SET t:{handed} mutex-holder PX 30000"));
    redisReply *r = rw_acquire(rc, "reader", "01r", "6000 c1 1 ch1");
    CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    CHECK_INT(r->element[1]->integer, ==, 1);
    CHECK_INT(r->element[2]->integer, ==, 1);
    freeReplyObject(r);
    /* the mutex lets go (telling the reader nothing); a writer comes, finds
     * the name free and the reader at the head: the reader is handed its
     * share (its notice to ch1 is missed), the writer queues behind it */
    freeReplyObject(redisCommand(rc, "DEL t:{handed}"));
    r = rw_acquire(rc, "writer", "01w", "6000 c2 1 ch2");
    CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    CHECK_INT(r->element[1]->integer, ==, 1);
    freeReplyObject(r);
    r = redisCommand(rc, "HGET t:{handed}:rw:holders reader");
    CHECK(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    /* the reader's next polling step, under its next wait id: it holds */
    r = rw_acquire(rc, "reader", "11r", "6000 c1 2 ch1");
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    freeReplyObject(r);
    r = redisCommand(rc, "LRANGE t:{handed}:rw:queue 0 -1");
    CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    CHECK(strcmp(r->element[0]->str, "writer") == 0);
    freeReplyObject(r);
    /* with the lease it asked for, not what was left of its place */
    r = redisCommand(rc, "ZSCORE t:{handed}:rw:exp reader");
    redisReply *now = redisCommand(rc, "TIME");
    CHECK(r->type == REDIS_REPLY_STRING && now->type == REDIS_REPLY_ARRAY);
    long long left =
        atoll(r->str) - (atoll(now->element[0]->str) * 1000 + atoll(now->element[1]->str) / 1000);
    CHECK_INT(left, >, 20000);
    freeReplyObject(r);
    freeReplyObject(now);
    /* A reader newcomer hands the reader its share the same way. Queueing
     * again, the reader would have been handed a second share after it
     * (one token, two holds), of which its one release gives back one: the
     * other held the name for nobody until its lease ran out (the 30 s
     * timeouts of kinds_never_overlap). */
    freeReplyObject(redisCommand(rc, "DEL t:{handed}:rw:holders t:{handed}:rw:exp "
                                     "t:{handed}:rw:queue t:{handed}:rw:w:writer"));
    freeReplyObject(redisCommand(rc, "SET t:{handed} mutex-holder PX 30000"));
    freeReplyObject(rw_acquire(rc, "reader", "01r", "6000 c1 3 ch1"));
    freeReplyObject(redisCommand(rc, "DEL t:{handed}"));
    r = rw_acquire(rc, "reader2", "01r", "6000 c3 1 ch3");
    CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    freeReplyObject(r);
    r = rw_acquire(rc, "reader", "11r", "6000 c1 4 ch1");
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    freeReplyObject(r);
    r = redisCommand(rc, "HGET t:{handed}:rw:holders reader");
    CHECK(r->type == REDIS_REPLY_STRING && strcmp(r->str, "1") == 0);
    freeReplyObject(r);
    /* A heartbeat finding the name free hands the reader its share (and
     * says so for the wait id it keeps, the step before). With nobody
     * ahead, the reader's next step took a second share beside it, with a
     * whole lease: one release later, the name stayed held for its lease. */
    freeReplyObject(redisCommand(rc, "DEL t:{handed}:rw:holders t:{handed}:rw:exp "
                                     "t:{handed}:rw:queue t:{handed}:rw:w:reader2"));
    freeReplyObject(redisCommand(rc, "SET t:{handed} mutex-holder PX 30000"));
    freeReplyObject(rw_acquire(rc, "reader", "01r", "6000 c1 5 ch1"));
    freeReplyObject(redisCommand(rc, "DEL t:{handed}"));
    const dlock__script *hb = dlock__script_get(DLOCK__S_HEARTBEAT);
    const char *argv[] = {"EVAL", hb->body, "1", "t:{handed}:rw", "6000", "reader"};
    size_t lens[6];
    for (int i = 0; i < 6; i++)
        lens[i] = i == 1 ? hb->len : strlen(argv[i]);
    r = redisCommandArgv(rc, 6, argv, lens);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    CHECK_INT(r->element[0]->integer, ==, 2); /* handed to it */
    freeReplyObject(r);
    r = rw_acquire(rc, "reader", "11r", "6000 c1 6 ch1");
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    freeReplyObject(r);
    r = redisCommand(rc, "HGET t:{handed}:rw:holders reader");
    CHECK(r->type == REDIS_REPLY_STRING && strcmp(r->str, "1") == 0);
    freeReplyObject(r);
    redisFree(rc);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"fair_order_across_processes", fair_order_across_processes},
        {"fair_no_overtaking", fair_no_overtaking},
        {"fair_timed_out_waiter_leaves_no_trace", fair_timed_out_waiter_leaves_no_trace},
        {"fair_killed_waiter_bounded", fair_killed_waiter_bounded},
        {"dead_waiters_cost_a_waiter_lease", dead_waiters_cost_a_waiter_lease},
        {"interop_key_is_the_same_lock", interop_key_is_the_same_lock},
        {"readers_overlap_writer_alone", readers_overlap_writer_alone},
        {"downgrade_and_upgrade", downgrade_and_upgrade},
        {"writer_not_starved", writer_not_starved},
        {"reader_takes_share_handed_while_polling", reader_takes_share_handed_while_polling},
        {"semaphore_never_more_than_n", semaphore_never_more_than_n},
        {"semaphore_takes_k_at_once", semaphore_takes_k_at_once},
        {"multi_opposite_orders_no_deadlock", multi_opposite_orders_no_deadlock},
        {"multi_one_slot_all_or_nothing", multi_one_slot_all_or_nothing},
        {"multi_rolls_back_on_timeout", multi_rolls_back_on_timeout},
        {"multi_loss_reported", multi_loss_reported},
        {"local_queue_order_and_limit", local_queue_order_and_limit},
        {"pubsub_notices", pubsub_notices},
        {"stream_notices", stream_notices},
        {"stream_second_lock_joins", stream_second_lock_joins},
    };
    return DT_RUN(tests);
}
