/* SPDX-License-Identifier: MIT */
/* test_safety.c - faults: many processes on one lock, holders killed or
 * frozen past their lease. Every test ends with nothing lost: no two holders
 * overlap unless the later one has the larger fence, a killed holder's lock
 * frees within its lease, and a frozen holder is told of its loss. */
#include "../support/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static dt_server srv;

/* A counter in a file, read, incremented and written back non-atomically:
 * without mutual exclusion, updates are lost. */
static long read_counter(const char *path)
{
    char buf[32] = {0};
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? strtol(buf, NULL, 10) : 0;
}

static void write_counter(const char *path, long v)
{
    char buf[32];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = snprintf(buf, sizeof buf, "%ld\n", v);
    CHECK(fd >= 0 && write(fd, buf, (size_t) n) == n);
    close(fd);
}

static void exclusion_run(unsigned flags, int fixed_lease)
{
    enum { PROCS = 6, ITERS = 40 };
    char path[256];
    pid_t pids[PROCS];

    dt_server_start(&srv, "redis", 0, NULL);
    snprintf(path, sizeof path, "%s/counter", srv.dir);
    write_counter(path, 0);
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            dlock_client *c = dt_client(srv.url, NULL);
            dlock_lock *l;
            CHECK_RC(dlock_lock_open(c, "counter", flags, &l), DLOCK_OK);
            for (int i = 0; i < ITERS; i++) {
                if (fixed_lease)
                    CHECK_RC(dlock_acquire_for(l, 30000, 10000), DLOCK_OK);
                else
                    CHECK_RC(dlock_acquire(l, 30000), DLOCK_OK);
                long v = read_counter(path);
                usleep(100); /* widen the window a lost update needs */
                write_counter(path, v + 1);
                CHECK_RC(dlock_release(l), DLOCK_OK);
            }
            dlock_lock_free(l);
            dlock_client_close(c);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK_INT(read_counter(path), ==, PROCS * ITERS);
}

static void exclusion_across_processes(void)
{
    exclusion_run(0, 0);
}

static void exclusion_fixed_lease(void)
{
    exclusion_run(0, 1);
}

static void exclusion_simple_mode(void)
{
    exclusion_run(DLOCK_SIMPLE, 1);
}

/* Threads of one client, each its own handle, on one lock. */
typedef struct thread_arg {
    dlock_client *client;
    const char *path;
    int iters;
} thread_arg;

static void *thread_body(void *p)
{
    thread_arg *a = p;
    dlock_lock *l;
    CHECK_RC(dlock_lock_open(a->client, "threads", 0, &l), DLOCK_OK);
    for (int i = 0; i < a->iters; i++) {
        CHECK_RC(dlock_acquire(l, 30000), DLOCK_OK);
        long v = read_counter(a->path);
        write_counter(a->path, v + 1);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
    return NULL;
}

static void exclusion_across_threads(void)
{
    enum { THREADS = 8, ITERS = 50 };
    char path[256];
    pthread_t t[THREADS];

    dt_server_start(&srv, "redis", 0, NULL);
    snprintf(path, sizeof path, "%s/counter", srv.dir);
    write_counter(path, 0);
    dlock_client *c = dt_client(srv.url, NULL);
    thread_arg a = {c, path, ITERS};
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, thread_body, &a);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(read_counter(path), ==, THREADS * ITERS);
    dlock_client_close(c);
}

/* A child that takes `name` (renewed, lease from the URL) and reports on a
 * pipe: "H <fence>" once held, then "L" if told the lock is lost. */
static int report_fd = -1;

static void child_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l;
    (void) code;
    (void) why;
    (void) arg;
    if (write(report_fd, "L\n", 2) != 2)
        _exit(3);
}

static pid_t spawn_holder(const char *name, const char *options, int *read_end)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        report_fd = fds[1];
        dlock_client *c = dt_client(srv.url, options);
        dlock_lock *l;
        char line[64];
        CHECK_RC(dlock_lock_open(c, name, 0, &l), DLOCK_OK);
        dlock_lock_on_lost(l, child_lost, NULL);
        CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
        int n = snprintf(line, sizeof line, "H %llu\n", (unsigned long long) dlock_lock_fence(l));
        CHECK(write(report_fd, line, (size_t) n) == n);
        /* After a loss every call says so too. */
        for (;;) {
            if (dlock_lock_check(l) == DLOCK_ELOST) {
                CHECK(write(report_fd, "C\n", 2) == 2);
                pause();
            }
            dt_sleep_ms(10);
        }
    }
    close(fds[1]);
    *read_end = fds[0];
    return pid;
}

/* Reads one line from fd within ms. */
static void read_line(int fd, char *buf, size_t len, int ms)
{
    size_t used = 0;
    int64_t until = dt_now_ms() + ms;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    while (used + 1 < len) {
        ssize_t n = read(fd, buf + used, 1);
        if (n == 1) {
            if (buf[used] == '\n')
                break;
            used++;
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN))
            dt_fail(__FILE__, __LINE__, "report pipe closed");
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__, "no report within %d ms", ms);
        dt_sleep_ms(2);
    }
    buf[used] = '\0';
}

static void killed_holder_frees_within_lease(void)
{
    char line[64];
    int rd;

    dt_server_start(&srv, "redis", 0, NULL);
    pid_t child = spawn_holder("crash", "?lease=1s", &rd);
    read_line(rd, line, sizeof line, 10000);
    CHECK(line[0] == 'H');
    unsigned long long first = strtoull(line + 2, NULL, 10);

    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *l;
    CHECK_RC(dlock_lock_open(c, "crash", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    int64_t killed = dt_now_ms();
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
    /* freed by its 1 s lease, not held on by anything */
    CHECK_INT(dt_now_ms() - killed, <=, 1500);
    CHECK_INT(dlock_lock_fence(l), >, first);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void frozen_holder_is_told_and_fenced_out(void)
{
    char line[64];
    int rd;
    dlock_status st;

    dt_server_start(&srv, "redis", 0, NULL);
    pid_t child = spawn_holder("frozen", "?lease=600ms", &rd);
    read_line(rd, line, sizeof line, 10000);
    CHECK(line[0] == 'H');
    unsigned long long stale_fence = strtoull(line + 2, NULL, 10);

    kill(child, SIGSTOP); /* a GC pause, a VM migration... */
    CHECK(dt_wait_stopped(child));
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *l;
    CHECK_RC(dlock_lock_open(c, "frozen", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
    /* A second holder while the first still thinks it holds: the fence is
     * what lets the resource tell them apart. */
    CHECK_INT(dlock_lock_fence(l), >, stale_fence);

    kill(child, SIGCONT);
    read_line(rd, line, sizeof line, 5000);
    CHECK(strcmp(line, "L") == 0 || strcmp(line, "C") == 0);
    read_line(rd, line, sizeof line, 5000);
    CHECK(strcmp(line, "L") == 0 || strcmp(line, "C") == 0);
    /* and its renewal did not take the lock back */
    CHECK_RC(dlock_query(c, "frozen", 0, &st), DLOCK_OK);
    CHECK(strcmp(st.owner, dlock_lock_token(l)) == 0);
    CHECK_RC(dlock_lock_check(l), DLOCK_OK);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void killed_waiter_does_not_stall_queue(void)
{
    dlock_status st;

    dt_server_start(&srv, "redis", 0, NULL);
    /* A waiter in another process (forked before this one has threads)
     * queues behind the holder, then dies. */
    pid_t child = fork();
    if (child == 0) {
        dlock_client *cc = dt_client(srv.url, "?waiter_lease=300ms");
        dlock_lock *w;
        CHECK_RC(dlock_lock_open(cc, "queue", 0, &w), DLOCK_OK);
        DT_WAIT_UNTIL(dlock_query(cc, "queue", 0, &st) == DLOCK_OK && st.held, 5000);
        dlock_acquire(w, 60000);
        _exit(0);
    }
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *holder, *later;
    CHECK_RC(dlock_lock_open(c, "queue", 0, &holder), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "queue", 0, &later), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    DT_WAIT_UNTIL(dlock_query(c, "queue", 0, &st) == DLOCK_OK && st.waiters == 1, 5000);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    /* The fault: the dead waiter stays silent past its 300 ms place. */
    dt_sleep_ms(400);

    /* the release skips the dead waiter and the queue does not stall */
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    CHECK_RC(dlock_query(c, "queue", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0);
    CHECK_RC(dlock_try_acquire(later), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(later);
    dlock_client_close(c);
}

typedef struct waiter_arg {
    dlock_client *client;
    int rc;
} waiter_arg;

static void *wait_and_release(void *p)
{
    waiter_arg *w = p;
    dlock_lock *l;
    CHECK_RC(dlock_lock_open(w->client, "notified", 0, &l), DLOCK_OK);
    w->rc = dlock_acquire(l, 20000);
    if (w->rc == DLOCK_OK)
        w->rc = dlock_release(l);
    dlock_lock_free(l);
    return NULL;
}

static void subscriber_connection_killed(void)
{
    enum { N = 3 };
    dlock_status st;
    pthread_t t[N];
    waiter_arg w[N];

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL), *holder_client = dt_client(srv.url, NULL);
    dlock_lock *holder;
    CHECK_RC(dlock_lock_open(holder_client, "notified", 0, &holder), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        w[i] = (waiter_arg){c, -1};
        pthread_create(&t[i], NULL, wait_and_release, &w[i]);
    }
    DT_WAIT_UNTIL(dlock_query(c, "notified", 0, &st) == DLOCK_OK && st.waiters == N, 5000);
    /* the network drops the waiters' pub/sub connection */
    CHECK(atoi(dt_server_cli(&srv, "CLIENT KILL TYPE pubsub")) >= 1);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECK_RC(w[i].rc, DLOCK_OK);
    }
    /* they reconnected and were handed the lock in turn, well before the
     * 30 s lease would have bounded their wait */
    CHECK_INT(dt_now_ms() - released, <, 10000);
    dlock_lock_free(holder);
    dlock_client_close(holder_client);
    dlock_client_close(c);
}

/* A loss the owner's own call reports ends the hold: a callback under way
 * for it finishes before that call returns, and none comes after. */
static _Atomic int cb_started;
static _Atomic int64_t cb_ended_ms;
static void slow_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l, (void) code, (void) why, (void) arg;
    atomic_store(&cb_started, 1);
    dt_sleep_ms(300); /* a callback that takes its time */
    atomic_store(&cb_ended_ms, dt_now_ms());
}

static void no_callback_after_the_loss_was_returned(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_lock *l = NULL;
    CHECK_RC(dlock_lock_open(c, "told", 0, &l), DLOCK_OK);
    dlock_lock_on_lost(l, slow_lost, NULL);
    CHECK_RC(dlock_acquire_for(l, 0, 200), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&cb_started), 3000); /* the fixed lease ran out */
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    int64_t returned = dt_now_ms();
    CHECK_INT(atomic_load(&cb_ended_ms), >, 0);
    CHECK_INT(atomic_load(&cb_ended_ms), <=, returned);
    CHECK_RC(dlock_release(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A renewal that meets the release on the server finds the lock gone: that
 * is the release, not a loss. Holds last about one renewal period, so the
 * two meet often. */
static _Atomic int spurious;
static void count_spurious(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l, (void) code, (void) arg;
    /* (a lease that ran out on a machine too busy to renew in time is not
     * what this test looks for) */
    if (strstr(why, "lease ran out") == NULL && atomic_fetch_add(&spurious, 1) == 0)
        fprintf(stderr, "on_lost: %s\n", why);
}

static void release_racing_a_renewal_is_no_loss(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=90ms");
    dlock_lock *l = NULL;
    CHECK_RC(dlock_lock_open(c, "race", 0, &l), DLOCK_OK);
    dlock_lock_on_lost(l, count_spurious, NULL);
    for (int i = 0; i < 150; i++) {
        CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
        dt_sleep_ms(30); /* a third of the lease: a renewal is due */
        int rc = dlock_release(l);
        if (rc == DLOCK_ELOST && strstr(dlock_errmsg(), "lease ran out") != NULL)
            continue; /* too busy a machine: see count_spurious */
        if (rc != DLOCK_OK)
            fprintf(stderr, "release: %s\n", dlock_errmsg());
        CHECK_RC(rc, DLOCK_OK);
    }
    CHECK_INT(atomic_load(&spurious), ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"exclusion_across_processes", exclusion_across_processes},
        {"exclusion_fixed_lease", exclusion_fixed_lease},
        {"exclusion_simple_mode", exclusion_simple_mode},
        {"exclusion_across_threads", exclusion_across_threads},
        {"killed_holder_frees_within_lease", killed_holder_frees_within_lease},
        {"frozen_holder_is_told_and_fenced_out", frozen_holder_is_told_and_fenced_out},
        {"killed_waiter_does_not_stall_queue", killed_waiter_does_not_stall_queue},
        {"subscriber_connection_killed", subscriber_connection_killed},
        {"no_callback_after_the_loss_was_returned", no_callback_after_the_loss_was_returned},
        {"release_racing_a_renewal_is_no_loss", release_racing_a_renewal_is_no_loss},
    };
    return DT_RUN(tests);
}
