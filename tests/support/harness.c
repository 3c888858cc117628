/* SPDX-License-Identifier: MIT */
/* harness.c - see harness.h. */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef DT_DEFAULT_BIN_DIR
#define DT_DEFAULT_BIN_DIR "."
#endif

static const char *current_test = "?";

static void stop_all(void);
static int keep_dirs; /* a check failed: leave the logs */

void dt_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s at %s:%d: ", current_test, file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    keep_dirs = 1;
    stop_all();
    _exit(1);
}

int64_t dt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dt_on_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    dt_lost_box *b = arg;
    (void) l;
    CHECK_RC(code, DLOCK_ELOST);
    snprintf(b->why, sizeof b->why, "%s", why);
    atomic_store(&b->at_ms, dt_now_ms());
    atomic_store(&b->lost, 1);
}

void dt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

const char *dt_bin(const char *name)
{
    static char path[4][512];
    static int next;
    const char *dir = getenv("DT_BIN_DIR");
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir != NULL ? dir : DT_DEFAULT_BIN_DIR, name);
    return p;
}

/* The first port of the kernel's ephemeral range (the local ports of
 * outgoing connections), 32768 unless /proc says otherwise. */
static int ephemeral_low(void)
{
    int low = 32768, high = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        if (fscanf(f, "%d %d", &low, &high) != 2)
            low = 32768;
        fclose(f);
    }
    return low;
}

/* Whether nobody listens on (or is bound to) 127.0.0.1:port now. */
static int port_free(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t) port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *) &a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A port below the ephemeral range, picked at random: a port the kernel
 * picked (bind to port 0) is one it may give next to an outgoing
 * connection's local end, which then takes it before the server started
 * on it binds it (a ZooKeeper in CI: "Address already in use"). */
int dt_free_port(void)
{
    /* per thread, and seeded again in a forked child (its own picks) */
    static _Thread_local unsigned seed;
    static _Thread_local pid_t seeded_in;
    int low = 10000, high = ephemeral_low() - 1;
    if (seeded_in != getpid()) {
        seeded_in = getpid();
        seed = (unsigned) getpid() * 2654435761u ^ (unsigned) dt_now_ms() ^
               (unsigned) (uintptr_t) &seed;
    }
    for (int tries = 0; high - low > 1000 && tries < 200; tries++) {
        int port = low + (int) (rand_r(&seed) % (unsigned) (high - low));
        if (port_free(port))
            return port;
    }
    /* no room below the range: the kernel's pick */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *) &a, &len) != 0)
        dt_fail(__FILE__, __LINE__, "no free port: %s", strerror(errno));
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* ---------------------------------------------------------------- cleanup */

/* Helper processes still running when the test process exits are killed by
 * pid: the structs describing them usually lived on a test's stack. Only the
 * process that registered them does it: a forked worker inherits these
 * tables and its atexit handlers, and must not stop the test's servers. */
#define MAX_TRACKED 64
static pid_t tracked[MAX_TRACKED];
static char dirs[MAX_TRACKED][160];
static pid_t registrar; /* the process the tables belong to */

void dt_kill_reap(pid_t pid)
{
    int status;
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

static void stop_all(void)
{
    if (registrar != getpid())
        return;
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i] > 0)
            dt_kill_reap(tracked[i]);
        tracked[i] = 0;
    }
    const char *keep = getenv("DT_KEEP");
    if (keep_dirs || (keep != NULL && strcmp(keep, "1") == 0)) {
        for (int i = 0; i < MAX_TRACKED; i++) {
            if (dirs[i][0] != '\0')
                fprintf(stderr, "kept %s\n", dirs[i]);
        }
        return;
    }
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (dirs[i][0] != '\0')
            dt__remove_tree(dirs[i]);
        dirs[i][0] = '\0';
    }
}

static void adopt_tables(void)
{
    static int hooked;
    if (registrar != getpid()) {
        /* A fork's copy of the parent's tables: not this process's to clean. */
        memset(tracked, 0, sizeof tracked);
        memset(dirs, 0, sizeof dirs);
        registrar = getpid();
    }
    if (!hooked) {
        atexit(stop_all);
        hooked = 1;
    }
}

void dt_track_pid(pid_t pid)
{
    adopt_tables();
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i] == 0) {
            tracked[i] = pid;
            return;
        }
    }
    dt_fail(__FILE__, __LINE__, "more than %d helper processes", MAX_TRACKED);
}

void dt_untrack_pid(pid_t pid)
{
    for (int i = 0; i < MAX_TRACKED && registrar == getpid(); i++) {
        if (tracked[i] == pid)
            tracked[i] = 0;
    }
}

void dt_track_dir(const char *dir)
{
    adopt_tables();
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (dirs[i][0] == '\0') {
            snprintf(dirs[i], sizeof dirs[i], "%s", dir);
            return;
        }
    }
}

void dt_make_temp_dir(char *buf, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, len, "%s/dlock-test-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(buf) == NULL)
        dt_fail(__FILE__, __LINE__, "mkdtemp %s: %s", buf, strerror(errno));
    dt_track_dir(buf);
}

/* The state letter of /proc/<pid>/task/<tid>/stat ('?' if unreadable). */
static char task_state(const char *path)
{
    char stat[512];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '?';
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* "tid (comm) S ...": comm may hold spaces and parens, the state
     * follows the last ')' */
    const char *p = strrchr(stat, ')');
    return p != NULL && p[1] == ' ' ? p[2] : '?';
}

/* 1: every thread of pid is stopped; 0: one still runs; -1: pid is gone. */
static int all_stopped(pid_t pid)
{
    char dir[64], path[64 + sizeof(((struct dirent *) 0)->d_name) + 8];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int) pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int stopped = 1, seen = 0;
    struct dirent *e;
    while (stopped == 1 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
        char st = task_state(path);
        if (st == '?')
            continue; /* a thread that just ended */
        seen++;
        if (st == 'Z' || st == 'X') {
            if (atoi(e->d_name) == (int) pid)
                stopped = -1; /* the process is gone */
            /* else a thread on its way out */
        } else if (st != 'T' && st != 't') {
            stopped = 0;
        }
    }
    closedir(d);
    return seen == 0 ? -1 : stopped;
}

int dt_wait_stopped(pid_t pid)
{
    int64_t until = dt_now_ms() + 2000;
    while (dt_now_ms() < until) {
        int st = all_stopped(pid);
        if (st != 0)
            return st == 1;
        dt_sleep_ms(1);
    }
    return 0;
}

void dt_keep_dirs(void)
{
    keep_dirs = 1;
}

/* ---------------------------------------------------------------- runner */

static int run_one(const dt_test *t)
{
    int status;
    int64_t start_ms = dt_now_ms();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        current_test = t->name;
        t->fn();
        fflush(NULL);
        exit(0); /* runs atexit: servers of this test stop */
    }
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && WIFSIGNALED(status))
        fprintf(stderr, "FAIL %s: killed by signal %d\n", t->name, WTERMSIG(status));
    printf("%s %s (%lld ms)\n", ok ? "ok  " : "FAIL", t->name,
           (long long) (dt_now_ms() - start_ms));
    fflush(stdout);
    return ok;
}

int dt_run(int argc, char **argv, const dt_test *tests, size_t n)
{
    int failed = 0, ran = 0;

    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
            continue;
        ran++;
        if (!run_one(&tests[i]))
            failed++;
    }
    if (ran == 0) {
        fprintf(stderr, "no test named '%s'\n", argc > 1 ? argv[1] : "");
        return 1;
    }
    printf("%d/%d passed\n", ran - failed, ran);
    return failed ? 1 : 0;
}

/* ---------------------------------------------------------------- set-up */

dlock_client *dt_client(const char *url, const char *options)
{
    char full[1024];
    dlock_client *c = NULL;
    snprintf(full, sizeof full, "%s%s", url, options != NULL ? options : "");
    CHECK_RC(dlock_client_open(full, &c), DLOCK_OK);
    return c;
}

dlock_lock *dt_lock(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock *l = NULL;
    CHECK_RC(dlock_lock_open(c, name, flags, &l), DLOCK_OK);
    return l;
}

dlock_status dt_query(dlock_client *c, const char *name, unsigned flags)
{
    dlock_status st;
    CHECK_RC(dlock_query(c, name, flags, &st), DLOCK_OK);
    return st;
}

static void on_holder(const dlock_holder *h, void *arg)
{
    dt_holders *s = arg;
    CHECK(s->n < 8);
    snprintf(s->h[s->n].owner, sizeof s->h[s->n].owner, "%s", h->owner);
    snprintf(s->h[s->n].host, sizeof s->h[s->n].host, "%s", h->host);
    snprintf(s->h[s->n].label, sizeof s->h[s->n].label, "%s", h->label);
    s->h[s->n].count = h->count;
    s->h[s->n].pid = h->pid;
    s->h[s->n].started_ms = h->started_ms;
    s->n++;
}

dt_holders dt_query_holders(dlock_client *c, const char *name, unsigned flags)
{
    dt_holders s;
    memset(&s, 0, sizeof s);
    CHECK_RC(dlock_query_holders(c, name, flags, on_holder, &s), DLOCK_OK);
    return s;
}
