/* SPDX-License-Identifier: MIT */
/* test_zk_interop.c - dlock's ZooKeeper locks against the peers on the same
 * path: kazoo's Lock (Debian python3-kazoo, run with /usr/bin/python3) and
 * Apache Curator's InterProcessMutex and InterProcessSemaphoreV2 (Debian's
 * jars, a small program compiled with javac here). Each excludes the other,
 * both ways, and a dlock waiter is woken when the peer lets go.
 *
 * A peer is a helper process that reads one command a line and answers one
 * line (see kazoo_lock.py, CuratorPeer.java); it is started before the test
 * opens any dlock client (no fork from a threaded process). */
#define _GNU_SOURCE
#include "../support/harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DT_SOURCE_DIR
#define DT_SOURCE_DIR "."
#endif

#define JARS                                                                                       \
    "/usr/share/java/curator-recipes.jar:/usr/share/java/curator-framework.jar:"                   \
    "/usr/share/java/curator-client.jar:/usr/share/java/zookeeper.jar:"                            \
    "/usr/share/java/zookeeper-jute.jar:/usr/share/java/guava.jar:"                                \
    "/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar"

static dt_server srv;

typedef struct peer {
    pid_t pid;
    int to, from; /* its stdin, its stdout */
} peer;

/* Starts argv with pipes on its stdin and stdout; waits for "ready". */
static void peer_start(peer *p, const char *const *argv)
{
    int to[2], from[2];
    CHECK(pipe(to) == 0 && pipe(from) == 0);
    p->pid = fork();
    CHECK(p->pid >= 0);
    if (p->pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        execv(argv[0], (char *const *) argv);
        _exit(127);
    }
    dt_track_pid(p->pid);
    close(to[0]);
    close(from[1]);
    p->to = to[1];
    p->from = from[0];
}

/* A line from the peer within ms (without its newline). */
static const char *peer_line(peer *p, int ms)
{
    static char line[512];
    size_t used = 0;
    int64_t until = dt_now_ms() + ms;
    for (;;) {
        struct pollfd pf = {.fd = p->from, .events = POLLIN};
        int left = (int) (until - dt_now_ms());
        char ch;
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            dt_fail(__FILE__, __LINE__, "no answer from the peer within %d ms", ms);
        if (read(p->from, &ch, 1) != 1)
            dt_fail(__FILE__, __LINE__, "the peer ended");
        if (ch == '\n')
            break;
        if (used + 1 < sizeof line)
            line[used++] = ch;
    }
    line[used] = '\0';
    return line;
}

/* Sends a command, returns its answer. */
static const char *peer_ask(peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *peer_ask(peer *p, const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd - 1, fmt, ap);
    va_end(ap);
    strcat(cmd, "\n");
    CHECK(write(p->to, cmd, strlen(cmd)) == (ssize_t) strlen(cmd));
    return peer_line(p, 30000);
}

static void peer_stop(peer *p)
{
    if (write(p->to, "quit\n", 5) != 5) {
        /* gone already */
    }
    close(p->to);
    close(p->from);
    int status = 0;
    int64_t until = dt_now_ms() + 10000;
    while (waitpid(p->pid, &status, WNOHANG) == 0 && dt_now_ms() < until)
        dt_sleep_ms(20);
    dt_kill_reap(p->pid);
    dt_untrack_pid(p->pid);
}

static void kazoo_start(peer *p, const char *path)
{
    char script[512], hosts[64];
    snprintf(script, sizeof script, "%s/tests/interop/kazoo_lock.py", DT_SOURCE_DIR);
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d", srv.port);
    const char *argv[] = {"/usr/bin/python3", script, hosts, path, NULL};
    peer_start(p, argv);
    CHECK(strcmp(peer_line(p, 30000), "ready") == 0);
}

/* Compiles CuratorPeer.java into dir and starts it. */
static void curator_start(peer *p)
{
    char dir[128], cmd[1024], hosts[64];
    dt_make_temp_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "javac -nowarn -d %s -cp %s %s/tests/interop/CuratorPeer.java", dir,
             JARS, DT_SOURCE_DIR);
    CHECK_INT(system(cmd), ==, 0);
    snprintf(cmd, sizeof cmd, "%s:%s", dir, JARS);
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d", srv.port);
    const char *argv[] = {"/usr/bin/java",
                          "-XX:+UseSerialGC",
                          "-XX:TieredStopAtLevel=1",
                          "-Xshare:auto",
                          "-cp",
                          cmd,
                          "CuratorPeer",
                          hosts,
                          NULL};
    peer_start(p, argv);
    CHECK(strcmp(peer_line(p, 60000), "ready") == 0);
}

static dlock_client *client(void)
{
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    return c;
}

/* An acquisition on a thread of its own. */
typedef struct waiter {
    pthread_t thread;
    dlock_lock *lock;
    atomic_int done;
    int rc;
} waiter;

static void *waiter_run(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->lock, 20000);
    atomic_store(&w->done, 1);
    return NULL;
}

static void wait_async(waiter *w, dlock_lock *l)
{
    memset(w, 0, sizeof *w);
    w->lock = l;
    CHECK_INT(pthread_create(&w->thread, NULL, waiter_run, w), ==, 0);
}

static int count_nodes(dlock_client *c, const char *name)
{
    dlock_status st;
    CHECK_RC(dlock_query(c, name, 0, &st), DLOCK_OK);
    return (int) (st.held + st.waiters);
}

/* kazoo and dlock on one path: each finds the other's hold, and each
 * waiter is woken by the other's release. */
static void kazoo_both_ways(void)
{
    peer k;
    dlock_lock *l;

    dt_server_start(&srv, "zookeeper", 0, NULL);
    kazoo_start(&k, "/dlock/shared");
    dlock_client *c = client();
    CHECK_RC(dlock_lock_open(c, "shared", 0, &l), DLOCK_OK);

    /* dlock holds: kazoo is refused */
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK(strcmp(peer_ask(&k, "try"), "busy") == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK(strcmp(peer_ask(&k, "try"), "acquired") == 0);

    /* kazoo holds: dlock is refused, then woken by kazoo's release */
    CHECK(strncmp(peer_ask(&k, "hold"), "held ", 5) == 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    dlock_status st;
    CHECK_RC(dlock_query(c, "shared", 0, &st), DLOCK_OK);
    CHECK(st.held && strcmp(st.owner, "kazoo") == 0);
    waiter w;
    wait_async(&w, l);
    DT_WAIT_UNTIL(count_nodes(c, "shared") == 2, 5000);
    CHECK(!atomic_load(&w.done));
    int64_t t0 = dt_now_ms();
    CHECK(strcmp(peer_ask(&k, "release"), "released") == 0);
    pthread_join(w.thread, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 2000);

    /* and a kazoo waiter behind dlock's hold */
    CHECK(write(k.to, "hold\n", 5) == 5);
    DT_WAIT_UNTIL(count_nodes(c, "shared") == 2, 10000);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK(strncmp(peer_line(&k, 10000), "held ", 5) == 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    CHECK(strcmp(peer_ask(&k, "release"), "released") == 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    peer_stop(&k);
}

/* Curator and dlock on one path: the mutex both ways, a dlock waiter woken
 * by Curator's release, and the semaphore's permits counted together. */
static void curator_both_ways(void)
{
    peer j;
    dlock_lock *l, *s1, *s2;

    dt_server_start(&srv, "zookeeper", 0, NULL);
    curator_start(&j);
    dlock_client *c = client();
    CHECK_RC(dlock_lock_open(c, "jobs/nightly", 0, &l), DLOCK_OK);

    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK(strcmp(peer_ask(&j, "try /dlock/jobs/nightly"), "busy") == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK(strcmp(peer_ask(&j, "try /dlock/jobs/nightly"), "acquired") == 0);

    CHECK(strcmp(peer_ask(&j, "hold /dlock/jobs/nightly"), "held") == 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    waiter w;
    wait_async(&w, l);
    DT_WAIT_UNTIL(count_nodes(c, "jobs/nightly") == 2, 5000);
    CHECK(!atomic_load(&w.done));
    int64_t t0 = dt_now_ms();
    CHECK(strcmp(peer_ask(&j, "release"), "released") == 0);
    pthread_join(w.thread, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    CHECK(strcmp(peer_ask(&j, "try /dlock/jobs/nightly"), "busy") == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    /* a semaphore of 2: Curator holds one lease, dlock cannot take 2 but
     * takes 1; then Curator finds none free */
    CHECK(strcmp(peer_ask(&j, "semhold /dlock/pool 2"), "held") == 0);
    CHECK_RC(dlock_semaphore_open(c, "pool", 2, 2, &s2), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c, "pool", 2, 1, &s1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s2), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(s1), DLOCK_OK);
    CHECK(strcmp(peer_ask(&j, "semtry /dlock/pool 2"), "busy") == 0);
    dlock_status st;
    CHECK_RC(dlock_query(c, "pool", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    CHECK_INT(st.permits_used, ==, 2);
    CHECK_INT(st.shared, ==, 2);
    CHECK_RC(dlock_release(s1), DLOCK_OK);
    /* a dlock waiter for 2 gets them when Curator returns its lease */
    waiter ws;
    wait_async(&ws, s2);
    DT_WAIT_UNTIL(dlock_query(c, "pool", DLOCK_SEMAPHORE, &st) == DLOCK_OK && st.waiters == 1,
                  5000);
    CHECK(!atomic_load(&ws.done));
    CHECK(strcmp(peer_ask(&j, "semrelease"), "released") == 0);
    pthread_join(ws.thread, NULL);
    CHECK_RC(ws.rc, DLOCK_OK);
    CHECK(strcmp(peer_ask(&j, "semtry /dlock/pool 2"), "busy") == 0);
    CHECK_RC(dlock_release(s2), DLOCK_OK);
    CHECK(strcmp(peer_ask(&j, "semtry /dlock/pool 2"), "acquired") == 0);

    dlock_lock_free(l);
    dlock_lock_free(s1);
    dlock_lock_free(s2);
    dlock_client_close(c);
    peer_stop(&j);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"kazoo_both_ways", kazoo_both_ways},
        {"curator_both_ways", curator_both_ways},
    };
    return DT_RUN(tests);
}
