/* SPDX-License-Identifier: MIT */
/* bench.c - `dlock bench`: lock throughput and cost, one JSON line per run.
 *
 * The fields match the peer programs in bench/peers (lib, wl, conc,
 * cycles_per_s, p50_us, p99_us; one cycle = acquire + release), so lines
 * can be compared side by side; bench/compare.sh does that. Each line is a
 * JSON document built with json-c (json.c): "version" first, then
 * "dlock_version". Workloads:
 *
 *   seq    one thread, lock+unlock of its own lock
 *   par    --threads N threads of one client, each its own lock
 *   hot    --procs P processes, one thread each, all on one lock; adds each
 *          process's share (min_proc, max_proc cycles/s)
 *   herd   one holder and --waiters W waiters on one lock (W+1 threads over up to 8
 *          processes): hand-overs and their latency on any store; on Redis,
 *          also the commands executed per hand-over, from the server's INFO
 *          (it must not grow with W). Other stores' counters are not read
 *          here (ZooKeeper's mntr, etcd's /metrics over HTTP): the line has
 *          the hand-over count, and bench/compare.py reads the counters
 *          around two runs of different lengths, whose difference leaves
 *          out the set-up
 *   renew  --locks K held locks renewed by one client for --seconds:
 *          commands and client CPU per renewal period, locks lost (0); Redis only
 *   memory --locks K held locks: client bytes and Redis bytes per lock; Redis only
 *
 * The lock calls go through the public API only; the server's counters are
 * read with hiredis on a connection of the benchmark's own. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char bench_usage[] =
    "usage: dlock bench [-u URL] [--workload seq|par|hot|herd|renew|memory] [--threads N]\n"
    "                   [--procs P] [--waiters W] [--locks K] [--seconds S] [--lease DUR]\n"
    "                   [--kind K] [--permits N] [--simple] [--lib NAME] [-v | -vv]\n"
    "\n"
    "Measures lock+unlock cycles against the store at URL and prints one JSON line\n"
    "(version, dlock_version, lib, wl, kind, conc, cycles_per_s, p50_us, p99_us, and\n"
    "per workload extras).\n"
    "Use a throwaway server: it takes locks named bench:* (keys PREFIX:{bench:...}).\n"
    "herd reads Redis's counters on redis:// URLs only (elsewhere it counts the hand-overs);\n"
    "renew and memory measure Redis's counters and need a redis:// URL.\n"
    "\n"
    "  --workload W   seq (default), par, hot, herd, renew, memory\n"
    "  --threads N    par: threads of one client (default 50); hot: per process (default 1)\n"
    "  --procs P      hot: processes on one lock (default 8)\n"
    "  --waiters W    herd: waiters behind the holder of one lock (default 16)\n"
    "  --locks K      renew, memory: locks held (default 10000)\n"
    "  --seconds S    length of the run (default 3)\n"
    "  --lease DUR    renew: the renewed lease (default 3s: a renewal every 1 s)\n"
    "  --kind K       mutex (default), fair, read, write, semaphore (--permits N, default 2;\n"
    "                 each cycle takes 1), multi (two locks in one hash slot)\n"
    "  --simple       interop mode keys\n"
    "  --lib NAME     the lib field (default dlock)\n";

typedef struct bench_opts {
    const char *url, *workload, *lib, *kind;
    int threads, procs, waiters, locks, simple;
    unsigned permits;
    int hot_threads; /* hot: threads per process */
    double seconds;
    int64_t lease_ms;
} bench_opts;

/* ---------------------------------------------------------------- helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* A log-linear latency histogram in microseconds: exact below 1024 us, then
 * 64 steps per power of two (1.6 % resolution). Fixed size, so processes
 * can send theirs through a pipe. */
#define HIST_LINEAR 1024
#define HIST_SUB    64
#define HIST_SIZE   (HIST_LINEAR + 24 * HIST_SUB)
typedef struct histogram {
    uint64_t count;
    uint64_t bucket[HIST_SIZE];
} histogram;

static void hist_add(histogram *h, double us)
{
    uint64_t v = us < 0 ? 0 : (uint64_t) us;
    size_t i;
    if (v < HIST_LINEAR) {
        i = v;
    } else {
        int p = 63 - __builtin_clzll(v); /* v in [2^p, 2^(p+1)) , p >= 10 */
        size_t sub = (size_t) ((v - (1ull << p)) * HIST_SUB >> p);
        i = HIST_LINEAR + (size_t) (p - 10) * HIST_SUB + sub;
        if (i >= HIST_SIZE)
            i = HIST_SIZE - 1;
    }
    h->bucket[i]++;
    h->count++;
}

static double hist_value(size_t i)
{
    if (i < HIST_LINEAR)
        return (double) i;
    size_t p = (i - HIST_LINEAR) / HIST_SUB + 10, sub = (i - HIST_LINEAR) % HIST_SUB;
    return ldexp(1.0 + ((double) sub + 0.5) / HIST_SUB, (int) p);
}

static double hist_quantile(const histogram *h, double q)
{
    uint64_t want = (uint64_t) (q * (double) h->count), seen = 0;
    for (size_t i = 0; i < HIST_SIZE; i++) {
        seen += h->bucket[i];
        if (seen > want)
            return hist_value(i);
    }
    return 0;
}

static void hist_merge(histogram *into, const histogram *h)
{
    into->count += h->count;
    for (size_t i = 0; i < HIST_SIZE; i++)
        into->bucket[i] += h->bucket[i];
}

static int fail_rc(int rc, const char *what)
{
    return cli_fail(rc, what);
}

/* ---------------------------------------------------------------- server stats */

typedef struct server {
    redisContext *ctx;
} server;

static int is_redis_url(const char *url)
{
    return strncmp(url, "redis://", 8) == 0;
}

/* Connects to the URL's server to read its counters (INFO, MEMORY USAGE):
 * redis://[user:password@]host[:port] only. Returns 0, or an exit code
 * after saying why (the workload `wl` needs it). */

static int server_open(const char *url, const char *wl, server *s)
{
    char host[256] = "127.0.0.1", auth[256] = "";
    int port = 6379;
    const char *p = url + 8;

    s->ctx = NULL;
    if (!is_redis_url(url)) {
        fprintf(stderr,
                "dlock bench: %s measures Redis's own counters (INFO, MEMORY USAGE): it needs a "
                "redis:// URL\n",
                wl);
        return EXIT_USAGE;
    }
    const char *at = strchr(p, '@');
    if (at != NULL && at < p + strcspn(p, "/?")) {
        snprintf(auth, sizeof auth, "%.*s", (int) (at - p), p);
        p = at + 1;
    }
    size_t n = strcspn(p, ":/?");
    if (n > 0 && n < sizeof host) {
        memcpy(host, p, n);
        host[n] = '\0';
    }
    if (p[n] == ':')
        port = atoi(p + n + 1);
    const char *slash = strchr(p + n, '/');
    int db = slash != NULL && slash < p + n + strcspn(p + n, "?") ? atoi(slash + 1) : 0;
    s->ctx = redisConnect(host, port);
    if (s->ctx == NULL || s->ctx->err) {
        fprintf(stderr, "dlock bench: %s: %s:%d: %s\n", wl, host, port,
                s->ctx != NULL ? s->ctx->errstr : "out of memory");
        if (s->ctx != NULL)
            redisFree(s->ctx);
        s->ctx = NULL;
        return EXIT_UNREACHABLE;
    }
    if (auth[0] != '\0') {
        char *colon = strchr(auth, ':');
        redisReply *r = colon == NULL   ? redisCommand(s->ctx, "AUTH %s", auth)
                        : colon == auth ? redisCommand(s->ctx, "AUTH %s", colon + 1)
                                        : redisCommand(s->ctx, "AUTH %b %s", auth,
                                                       (size_t) (colon - auth), colon + 1);
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (!ok)
            fprintf(stderr, "dlock bench: %s: AUTH: %s\n", wl,
                    r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : s->ctx->errstr);
        freeReplyObject(r);
        if (!ok) {
            redisFree(s->ctx);
            s->ctx = NULL;
            return EXIT_FAILURE_OTHER;
        }
    }
    if (db != 0)
        freeReplyObject(redisCommand(s->ctx, "SELECT %d", db));
    return 0;
}

/* The URL's key prefix option, else the default. */
static void url_prefix(const char *url, char *out, size_t size)
{
    const char *q = strchr(url, '?'), *p = q;
    snprintf(out, size, "dlock");
    while (p != NULL) {
        p++;
        if (strncmp(p, "prefix=", 7) == 0) {
            snprintf(out, size, "%.*s", (int) strcspn(p + 7, "&"), p + 7);
            return;
        }
        p = strchr(p, '&');
    }
}

/* Sum of calls of every command in INFO commandstats but INFO itself, and
 * the calls of EVALSHA/EVAL alone. */
static void server_calls(server *s, uint64_t *all, uint64_t *scripts)
{
    *all = *scripts = 0;
    redisReply *r = s->ctx != NULL ? redisCommand(s->ctx, "INFO commandstats") : NULL;
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return;
    }
    for (char *line = r->str; line != NULL && *line != '\0';) {
        char name[128];
        unsigned long long calls;
        if (sscanf(line, "cmdstat_%127[^:]:calls=%llu", name, &calls) == 2 &&
            strcmp(name, "info") != 0) {
            *all += calls;
            if (strcmp(name, "evalsha") == 0 || strcmp(name, "eval") == 0)
                *scripts += calls;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    freeReplyObject(r);
}

static long long server_info_number(server *s, const char *section, const char *field)
{
    long long v = -1;
    redisReply *r = s->ctx != NULL ? redisCommand(s->ctx, "INFO %s", section) : NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *at = strstr(r->str, field);
        if (at != NULL && at[strlen(field)] == ':')
            v = atoll(at + strlen(field) + 1);
    }
    freeReplyObject(r);
    return v;
}

static void server_close(server *s)
{
    if (s->ctx != NULL)
        redisFree(s->ctx);
}

/* ---------------------------------------------------------------- cycles */

/* A handle of the benchmark's kind of lock for name. */
static int open_kind(dlock_client *c, const bench_opts *o, const char *name, dlock_lock **out)
{
    const char *k = o->kind;
    if (strcmp(k, "fair") == 0)
        return dlock_lock_open(c, name, DLOCK_FAIR, out);
    if (strcmp(k, "read") == 0)
        return dlock_lock_open(c, name, DLOCK_READ, out);
    if (strcmp(k, "write") == 0)
        return dlock_lock_open(c, name, DLOCK_WRITE, out);
    if (strcmp(k, "semaphore") == 0)
        return dlock_semaphore_open(c, name, o->permits, 1, out);
    if (strcmp(k, "multi") == 0) {
        /* two locks in one hash slot: taken in one step */
        char a[256], b[256];
        snprintf(a, sizeof a, "%s:a:{%s}", name, name);
        snprintf(b, sizeof b, "%s:b:{%s}", name, name);
        const char *names[] = {a, b};
        return dlock_multi_open(c, names, 2, 0, out);
    }
    return dlock_lock_open(c, name, o->simple ? DLOCK_SIMPLE : 0, out);
}

typedef struct worker {
    dlock_client *client;
    const bench_opts *o;
    char name[96];
    double until;
    uint64_t cycles;
    int rc;
    char msg[256]; /* why rc is not DLOCK_OK */
    histogram hist;
} worker;

static void *cycle_loop(void *arg)
{
    worker *w = arg;
    dlock_lock *l;

    w->rc = open_kind(w->client, w->o, w->name, &l);
    if (w->rc != DLOCK_OK) {
        snprintf(w->msg, sizeof w->msg, "%s: %s", w->name, dlock_errmsg());
        return NULL;
    }
    while (now_s() < w->until) {
        double t0 = now_s();
        w->rc = dlock_acquire(l, DLOCK_WAIT_FOREVER);
        if (w->rc == DLOCK_OK)
            w->rc = dlock_release(l);
        if (w->rc != DLOCK_OK) {
            snprintf(w->msg, sizeof w->msg, "%s: %s", w->name, dlock_errmsg());
            break;
        }
        hist_add(&w->hist, (now_s() - t0) * 1e6);
        w->cycles++;
    }
    dlock_lock_free(l);
    return NULL;
}

/* Runs n threads of one client, each on its own lock named by fmt (with
 * the pid and thread index), or all on `shared` when not NULL. Fills
 * *total and *merged; on failure, msg (of msg_size bytes) says why. */
static int run_threads(const bench_opts *o, dlock_client *c, int n, const char *fmt,
                       const char *shared, double seconds, uint64_t *total, histogram *merged,
                       char *msg, size_t msg_size)
{
    worker *w = calloc((size_t) n, sizeof *w);
    pthread_t *t = calloc((size_t) n, sizeof *t);
    double until = now_s() + seconds;
    int rc = DLOCK_OK;

    if (w == NULL || t == NULL) {
        free(w);
        free(t);
        return DLOCK_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        w[i].client = c;
        w[i].o = o;
        w[i].until = until;
        if (shared != NULL)
            snprintf(w[i].name, sizeof w[i].name, "%s", shared);
        else
            snprintf(w[i].name, sizeof w[i].name, fmt, (int) getpid(), i);
        pthread_create(&t[i], NULL, cycle_loop, &w[i]);
    }
    *total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        *total += w[i].cycles;
        hist_merge(merged, &w[i].hist);
        if (w[i].rc != DLOCK_OK && rc == DLOCK_OK) {
            rc = w[i].rc;
            snprintf(msg, msg_size, "%s", w[i].msg);
        }
    }
    free(w);
    free(t);
    return rc;
}

/* Prints one JSON document: version and dlock_version, the fields every
 * peer program prints (lib, wl, conc, cycles_per_s, p50_us, p99_us; null
 * for the workloads that time no cycles, h == NULL), then the workload's
 * own fields from `extra` (consumed; may be NULL). */
static void print_line(const bench_opts *o, const char *wl, int conc, double cycles_per_s,
                       const histogram *h, json_object *extra)
{
    json_object *doc = cli_json_doc();

    json_object_object_add(doc, "dlock_version", json_object_new_string(dlock_version()));
    json_object_object_add(doc, "lib", cli_json_text(o->lib, 0));
    json_object_object_add(doc, "wl", json_object_new_string(wl));
    json_object_object_add(doc, "kind", json_object_new_string(o->kind));
    json_object_object_add(doc, "conc", json_object_new_int(conc));
    json_object_object_add(doc, "cycles_per_s", h != NULL ? cli_json_fixed(cycles_per_s, 0) : NULL);
    json_object_object_add(doc, "p50_us",
                           h != NULL ? cli_json_fixed(hist_quantile(h, 0.5), 0) : NULL);
    json_object_object_add(doc, "p99_us",
                           h != NULL ? cli_json_fixed(hist_quantile(h, 0.99), 0) : NULL);
    if (extra != NULL) {
        json_object_object_foreach(extra, key, value)
        {
            json_object_object_add(doc, key, json_object_get(value));
        }
        json_object_put(extra);
    }
    cli_json_print(doc);
}

static int bench_threads(const bench_opts *o, int n, const char *wl)
{
    dlock_client *c;
    histogram *h = calloc(1, sizeof *h);
    uint64_t total = 0;
    int code = cli_open(o->url, &c);

    if (code != 0 || h == NULL) {
        free(h);
        return code != 0 ? code : EXIT_FAILURE_OTHER;
    }
    /* a short warm-up: connections made, scripts loaded */
    char msg[256] = "";
    double t0 = 0, elapsed = 0;
    int rc = run_threads(o, c, n, "bench:warm:%d:%d", NULL, 0.2, &total, h, msg, sizeof msg);
    if (rc == DLOCK_OK) {
        memset(h, 0, sizeof *h);
        t0 = now_s();
        rc = run_threads(o, c, n, "bench:%d:%d", NULL, o->seconds, &total, h, msg, sizeof msg);
        elapsed = now_s() - t0;
    }
    dlock_client_close(c);
    if (rc != DLOCK_OK) {
        free(h);
        return cli_fail_msg(rc, "bench", msg);
    }
    print_line(o, wl, n, (double) total / elapsed, h, NULL);
    free(h);
    return 0;
}

/* ---------------------------------------------------------------- processes */

typedef struct proc_result {
    uint64_t cycles;
    double elapsed;
    int rc;
    char msg[256];
    histogram hist;
} proc_result;

/* Forks nprocs processes of `threads` threads each, all on one lock; they
 * warm up, start together, and put their results in shared memory (each
 * its own slot). With s, the server's command counters are read just
 * before the start and once every process has finished its cycles. The
 * results are freed with free_results(). */
static int run_processes(const bench_opts *o, int nprocs, int total, const char *name, server *s,
                         uint64_t counters[4], proc_result **out)
{
    int ready[2], go[2];
    pid_t *pids = calloc((size_t) nprocs, sizeof *pids);
    size_t size = (size_t) nprocs * sizeof(proc_result);
    proc_result *res = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    *out = NULL;
    if (pids == NULL || res == MAP_FAILED || pipe(ready) != 0 || pipe(go) != 0) {
        free(pids);
        if (res != MAP_FAILED)
            munmap(res, size);
        return -1;
    }
    memset(res, 0, size);
    fflush(NULL);
    for (int p = 0; p < nprocs; p++) {
        pids[p] = fork();
        if (pids[p] != 0)
            continue;
        /* child: connect, warm up, wait for the start, run, report */
        proc_result *r = &res[p];
        int threads = total / nprocs + (p < total % nprocs);
        dlock_client *c;
        char byte = 0;
        r->rc = dlock_client_open(o->url, &c);
        if (r->rc != DLOCK_OK) {
            snprintf(r->msg, sizeof r->msg, "%s", dlock_errmsg());
        } else {
            uint64_t ignored;
            histogram *scratch = calloc(1, sizeof *scratch);
            r->rc = scratch == NULL ? DLOCK_ENOMEM
                                    : run_threads(o, c, threads, NULL, name, 0.1, &ignored, scratch,
                                                  r->msg, sizeof r->msg);
            free(scratch);
        }
        if (write(ready[1], "r", 1) != 1 || read(go[0], &byte, 1) != 1)
            _exit(1);
        if (r->rc == DLOCK_OK) {
            double t0 = now_s();
            r->rc = run_threads(o, c, threads, NULL, name, o->seconds, &r->cycles, &r->hist, r->msg,
                                sizeof r->msg);
            r->elapsed = now_s() - t0;
        }
        if (write(ready[1], "d", 1) != 1)
            _exit(1);
        if (c != NULL)
            dlock_client_close(c);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    for (int p = 0; p < nprocs; p++) {
        char byte;
        if (read(ready[0], &byte, 1) != 1)
            break;
    }
    if (s != NULL)
        server_calls(s, &counters[0], &counters[1]);
    for (int p = 0; p < nprocs; p++) {
        if (write(go[1], "g", 1) != 1)
            break;
    }
    for (int p = 0; p < nprocs; p++) {
        char byte;
        if (read(ready[0], &byte, 1) != 1)
            break;
    }
    if (s != NULL)
        server_calls(s, &counters[2], &counters[3]);
    for (int p = 0; p < nprocs; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || res[p].elapsed <= 0) {
            if (res[p].rc == DLOCK_OK)
                res[p].rc = DLOCK_EUNREACHABLE;
        }
    }
    close(ready[0]);
    close(go[1]);
    free(pids);
    *out = res;
    return 0;
}

static void free_results(proc_result *res, int nprocs)
{
    munmap(res, (size_t) nprocs * sizeof *res);
}

/* 0 if every process ran, else the exit code, having said why once. */
static int failed_process(const proc_result *res, int nprocs)
{
    for (int p = 0; p < nprocs; p++) {
        if (res[p].rc != DLOCK_OK)
            return cli_fail_msg(res[p].rc, "bench: a process failed", res[p].msg);
    }
    return 0;
}

static int bench_hot(const bench_opts *o)
{
    proc_result *res;
    histogram *all = calloc(1, sizeof *all);
    double total = 0, min = 1e18, max = 0;
    json_object *extra;

    int threads = o->hot_threads;
    if (all == NULL ||
        run_processes(o, o->procs, o->procs * threads, "bench:hot", NULL, NULL, &res) != 0) {
        free(all);
        return EXIT_FAILURE_OTHER;
    }
    int failed = failed_process(res, o->procs);
    if (failed != 0) {
        free_results(res, o->procs);
        free(all);
        return failed;
    }
    for (int p = 0; p < o->procs; p++) {
        double rate = (double) res[p].cycles / res[p].elapsed;
        total += rate;
        min = rate < min ? rate : min;
        max = rate > max ? rate : max;
        hist_merge(all, &res[p].hist);
    }
    extra = json_object_new_object();
    json_object_object_add(extra, "procs", json_object_new_int(o->procs));
    json_object_object_add(extra, "threads_per_proc", json_object_new_int(threads));
    json_object_object_add(extra, "min_proc", cli_json_fixed(min, 0));
    json_object_object_add(extra, "max_proc", cli_json_fixed(max, 0));
    json_object_object_add(extra, "share", cli_json_fixed(max > 0 ? min / max : 0, 2));
    print_line(o, "hot", o->procs * threads, total, all, extra);
    free_results(res, o->procs);
    free(all);
    return 0;
}

static int bench_herd(const bench_opts *o)
{
    int contenders = o->waiters + 1; /* a holder and W waiters at any time */
    int procs = contenders < 8 ? contenders : 8;
    server s;
    proc_result *res;
    uint64_t counters[4] = {0}, handoffs = 0;
    histogram *h = calloc(1, sizeof *h);
    json_object *extra;
    double elapsed = 0;

    /* Only Redis's counters are read here; on another store the line
     * carries the hand-over count for whoever reads that store's own. */
    int counted = is_redis_url(o->url);
    int code = h == NULL ? EXIT_FAILURE_OTHER : counted ? server_open(o->url, "herd", &s) : 0;
    if (code != 0) {
        free(h);
        return code;
    }
    if (!counted)
        s.ctx = NULL;
    if (run_processes(o, procs, contenders, "bench:herd", counted ? &s : NULL, counters, &res) !=
        0) {
        server_close(&s);
        free(h);
        return EXIT_FAILURE_OTHER;
    }
    int failed = failed_process(res, procs);
    if (failed != 0) {
        server_close(&s);
        free_results(res, procs);
        free(h);
        return failed;
    }
    for (int p = 0; p < procs; p++) {
        handoffs += res[p].cycles;
        hist_merge(h, &res[p].hist);
        elapsed = res[p].elapsed > elapsed ? res[p].elapsed : elapsed;
    }
    extra = json_object_new_object();
    json_object_object_add(extra, "waiters", json_object_new_int(o->waiters));
    json_object_object_add(extra, "procs", json_object_new_int(procs));
    json_object_object_add(extra, "handoffs", json_object_new_int64((int64_t) handoffs));
    json_object_object_add(extra, "elapsed_s", cli_json_fixed(elapsed, 3));
    json_object_object_add(
        extra, "cmds_per_handoff",
        counted ? cli_json_fixed(
                      handoffs ? (double) (counters[2] - counters[0]) / (double) handoffs : 0, 2)
                : NULL);
    json_object_object_add(
        extra, "scripts_per_handoff",
        counted ? cli_json_fixed(
                      handoffs ? (double) (counters[3] - counters[1]) / (double) handoffs : 0, 2)
                : NULL);
    print_line(o, "herd", contenders, (double) handoffs / elapsed, h, extra);
    server_close(&s);
    free_results(res, procs);
    free(h);
    return 0;
}

/* ---------------------------------------------------------------- renewal, memory */

static int lost_count;
static void count_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l;
    (void) code;
    (void) why;
    (void) arg;
    __atomic_add_fetch(&lost_count, 1, __ATOMIC_RELAXED);
}

/* Opens a client with a lease and takes K locks. */
static int hold_many(const bench_opts *o, const char *lease, dlock_client **c, dlock_lock ***locks)
{
    char url[1024];
    const char *sep = strchr(o->url, '?') ? "&" : "?";
    int rc;

    snprintf(url, sizeof url, "%s%s%s", o->url, lease ? sep : "", lease ? lease : "");
    rc = dlock_client_open(url, c);
    if (rc != DLOCK_OK)
        return rc;
    *locks = calloc((size_t) o->locks, sizeof **locks);
    if (*locks == NULL)
        return DLOCK_ENOMEM;
    for (int i = 0; i < o->locks; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench:held:%d:%d", (int) getpid(), i);
        rc = open_kind(*c, o, name, &(*locks)[i]);
        if (rc == DLOCK_OK) {
            dlock_lock_on_lost((*locks)[i], count_lost, NULL);
            rc = dlock_acquire((*locks)[i], 0);
        }
        if (rc != DLOCK_OK)
            return rc;
    }
    return DLOCK_OK;
}

static void free_many(const bench_opts *o, dlock_client *c, dlock_lock **locks)
{
    for (int i = 0; locks != NULL && i < o->locks; i++)
        dlock_lock_free(locks[i]);
    free(locks);
    dlock_client_close(c);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6 +
           (double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec / 1e6;
}

static int bench_renew(const bench_opts *o)
{
    server s;
    dlock_client *c = NULL;
    dlock_lock **locks = NULL;
    char lease[64];
    json_object *extra;
    uint64_t all0, scripts0, all1, scripts1;

    int code = server_open(o->url, "renew", &s);
    if (code != 0)
        return code;
    snprintf(lease, sizeof lease, "lease=%" PRId64 "ms", o->lease_ms);
    int rc = hold_many(o, lease, &c, &locks);
    if (rc != DLOCK_OK) {
        free_many(o, c, locks);
        server_close(&s);
        return fail_rc(rc, "bench renew");
    }
    /* measure whole periods, after the acquisitions settled */
    double period = (double) o->lease_ms / 3000.0;
    server_calls(&s, &all0, &scripts0);
    double cpu0 = cpu_seconds(), t0 = now_s();
    while (now_s() - t0 < o->seconds) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    double elapsed = now_s() - t0, cpu = cpu_seconds() - cpu0;
    server_calls(&s, &all1, &scripts1);
    double periods = elapsed / period;
    int still = 0;
    for (int i = 0; i < o->locks; i++)
        still += dlock_lock_check(locks[i]) == DLOCK_OK;
    extra = json_object_new_object();
    json_object_object_add(extra, "locks", json_object_new_int(o->locks));
    json_object_object_add(extra, "lease_ms", json_object_new_int64(o->lease_ms));
    json_object_object_add(extra, "periods", cli_json_fixed(periods, 1));
    json_object_object_add(extra, "cmds_per_period",
                           cli_json_fixed((double) (all1 - all0) / periods, 1));
    json_object_object_add(extra, "scripts_per_period",
                           cli_json_fixed((double) (scripts1 - scripts0) / periods, 1));
    json_object_object_add(
        extra, "locks_per_script",
        scripts1 > scripts0
            ? cli_json_fixed((double) o->locks * periods / (double) (scripts1 - scripts0), 0)
            : NULL);
    json_object_object_add(extra, "cpu_ms_per_period", cli_json_fixed(cpu * 1000 / periods, 2));
    json_object_object_add(extra, "held_at_end", json_object_new_int(still));
    json_object_object_add(extra, "lost",
                           json_object_new_int(__atomic_load_n(&lost_count, __ATOMIC_RELAXED)));
    print_line(o, "renew", o->locks, 0, NULL, extra);
    free_many(o, c, locks);
    server_close(&s);
    return 0;
}

static int bench_memory(const bench_opts *o)
{
    server s;
    dlock_client *c = NULL;
    dlock_lock **locks = NULL;
    json_object *extra;

    int code = server_open(o->url, "memory", &s);
    if (code != 0)
        return code;
    long long redis0 = server_info_number(&s, "memory", "used_memory");
    struct mallinfo2 m0 = mallinfo2();
    int rc = hold_many(o, NULL, &c, &locks);
    struct mallinfo2 m1 = mallinfo2();
    long long redis1 = server_info_number(&s, "memory", "used_memory");
    if (rc != DLOCK_OK) {
        free_many(o, c, locks);
        server_close(&s);
        return fail_rc(rc, "bench memory");
    }
    char key[400], prefix[256];
    url_prefix(o->url, prefix, sizeof prefix);
    if (o->simple)
        snprintf(key, sizeof key, "bench:held:%d:0", (int) getpid());
    else
        snprintf(key, sizeof key, "%s:{bench:held:%d:0}", prefix, (int) getpid());
    redisReply *r = redisCommand(s.ctx, "MEMORY USAGE %s", key);
    long long lock_key = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    snprintf(key, sizeof key, "%s:{bench:held:%d:0}:fence", prefix, (int) getpid());
    r = redisCommand(s.ctx, "MEMORY USAGE %s", key);
    long long fence_key = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    /* The two key figures are for a mutex's layout (scripts/README.md);
     * the other kinds keep their state in other keys: null. */
    if (strcmp(o->kind, "mutex") != 0)
        lock_key = fence_key = -1;
    extra = json_object_new_object();
    json_object_object_add(extra, "locks", json_object_new_int(o->locks));
    json_object_object_add(extra, "client_bytes_per_lock",
                           cli_json_fixed((double) (m1.uordblks - m0.uordblks) / o->locks, 0));
    json_object_object_add(extra, "redis_bytes_per_lock",
                           cli_json_fixed((double) (redis1 - redis0) / o->locks, 0));
    json_object_object_add(extra, "lock_key_bytes",
                           lock_key >= 0 ? json_object_new_int64(lock_key) : NULL);
    json_object_object_add(extra, "fence_key_bytes",
                           fence_key >= 0 ? json_object_new_int64(fence_key) : NULL);
    print_line(o, "memory", o->locks, 0, NULL, extra);
    free_many(o, c, locks);
    server_close(&s);
    return 0;
}

/* ---------------------------------------------------------------- main */

/* Before any workload: one try on a probe lock, so that a store that is
 * down or refuses us is a clear error at once, not a wait forever. */
static int probe_store(const bench_opts *o)
{
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    int rc = dlock_client_open(o->url, &c);
    if (rc == DLOCK_OK) {
        /* a kind the store cannot do is said as run says it, before a
         * worker names one of bench's own locks */
        rc = open_kind(c, o, "bench:probe", &l);
        dlock_lock_free(l);
        l = NULL;
        if (rc == DLOCK_ENOTSUP) {
            cli_note_opened(o->url);
            rc = cli_fail_unsupported("bench", "--kind");
            dlock_client_close(c);
            return rc;
        }
    }
    if (rc == DLOCK_OK)
        rc = dlock_lock_open(c, "bench:probe", 0, &l);
    if (rc == DLOCK_OK)
        rc = dlock_try_acquire(l);
    if (rc == DLOCK_OK)
        rc = dlock_release(l);
    else if (rc == DLOCK_EBUSY)
        rc = DLOCK_OK; /* reached: someone else benches too */
    if (rc != DLOCK_OK)
        rc = fail_rc(rc, "store");
    dlock_lock_free(l);
    dlock_client_close(c);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    static const struct option options[] = {
        {"url", required_argument, NULL, 'u'},
        {"workload", required_argument, NULL, 'W'},
        {"threads", required_argument, NULL, 't'},
        {"procs", required_argument, NULL, 'p'},
        {"waiters", required_argument, NULL, 'w'},
        {"locks", required_argument, NULL, 'k'},
        {"seconds", required_argument, NULL, 's'},
        {"lease", required_argument, NULL, 'l'},
        {"simple", no_argument, NULL, 'S'},
        {"lib", required_argument, NULL, 'L'},
        {"kind", required_argument, NULL, 'K'},
        {"permits", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {"verbose", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    bench_opts o = {.workload = "seq",
                    .lib = "dlock",
                    .kind = "mutex",
                    .permits = 2,
                    .threads = 50,
                    .procs = 8,
                    .waiters = 16,
                    .locks = 10000,
                    .seconds = 3,
                    .lease_ms = 3000};
    const char *url_flag = NULL;
    int opt, threads_given = 0, verbose = 0;

    argv[0] = "dlock bench"; /* for getopt's own messages */
    optind = 1;
    while ((opt = getopt_long(argc, argv, "u:hv", options, NULL)) != -1) {
        char *end = NULL;
        long v = 0;
        if (opt == 't' || opt == 'p' || opt == 'w' || opt == 'k' || opt == 'P') {
            v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > 1000000) {
                fprintf(stderr, "dlock bench: %s: want a count >= 1\n", optarg);
                return EXIT_USAGE;
            }
        }
        switch (opt) {
        case 'u':
            url_flag = optarg;
            break;
        case 'W':
            o.workload = optarg;
            break;
        case 't':
            o.threads = (int) v;
            threads_given = 1;
            break;
        case 'K':
            o.kind = optarg;
            if (strcmp(o.kind, "mutex") != 0 && strcmp(o.kind, "fair") != 0 &&
                strcmp(o.kind, "read") != 0 && strcmp(o.kind, "write") != 0 &&
                strcmp(o.kind, "semaphore") != 0 && strcmp(o.kind, "multi") != 0) {
                fprintf(stderr,
                        "dlock bench: --kind %s: want mutex, fair, read, write, "
                        "semaphore or multi\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'P':
            o.permits = (unsigned) v;
            break;
        case 'p':
            o.procs = (int) v;
            break;
        case 'w':
            o.waiters = (int) v;
            break;
        case 'k':
            o.locks = (int) v;
            break;
        case 's':
            o.seconds = strtod(optarg, &end);
            if (*end != '\0' || !(o.seconds > 0)) {
                fprintf(stderr, "dlock bench: --seconds %s: want a number > 0\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'l':
            if (cli_duration_option("bench", "--lease", optarg, 30, &o.lease_ms) != 0)
                return EXIT_USAGE;
            break;
        case 'S':
            o.simple = 1;
            break;
        case 'L':
            o.lib = optarg;
            break;
        case 'v':
            verbose++;
            break;
        case 'h':
            fputs(bench_usage, stdout);
            return 0;
        default: /* getopt said what */
            fputs("Try 'dlock bench --help'.\n", stderr);
            return EXIT_USAGE;
        }
    }
    cli_log_level = cli_log_level_of(verbose);
    if (optind != argc)
        return cli_usage_error("bench", "'%s': bench takes no operands", argv[optind]);
    o.url = cli_url(url_flag);
    o.hot_threads = threads_given ? o.threads : 1;
    int probe = probe_store(&o);
    if (probe != 0)
        return probe;
    if (strcmp(o.workload, "seq") == 0)
        return bench_threads(&o, 1, "seq");
    if (strcmp(o.workload, "par") == 0)
        return bench_threads(&o, o.threads, "par");
    if (strcmp(o.workload, "hot") == 0)
        return bench_hot(&o);
    if (strcmp(o.workload, "herd") == 0)
        return bench_herd(&o);
    if (strcmp(o.workload, "renew") == 0)
        return bench_renew(&o);
    if (strcmp(o.workload, "memory") == 0)
        return bench_memory(&o);
    return cli_usage_error("bench",
                           "unknown workload '%s': want seq, par, hot, herd, renew or "
                           "memory",
                           o.workload);
}
