/* SPDX-License-Identifier: MIT */
/* test_etcd_lock.c - the etcd backend (etcd://) against a real etcd 3.4:
 * concurrency.Mutex's key layout and interop with `etcdctl lock` both ways,
 * fences as create revisions, one wake-up per release, the guard against
 * etcd issue 11456, sessions and holds lost behind the client's back, etcd
 * killed and restarted, a frozen holder, a blackholed connection, fixed
 * leases, the read-write lock and the semaphore layouts, who holds a lock
 * (the owner record in each key's value), listing locks, and bad input. */
#define _GNU_SOURCE
#include "../support/harness.h"
#include "backend/etcd/codec.h"
#include "backend/etcd/etcd.h"
#include "base/clock.h"
#include "core/client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static dt_server srv;

/* ---------------------------------------------------------------- helpers */

static dlock_client *client(const char *options)
{
    char url[256];
    dlock_client *c = NULL;
    snprintf(url, sizeof url, "%s%s", srv.url, options != NULL ? options : "");
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    return c;
}

/* Starts etcd and a one-link fault proxy in front of it; a client through
 * the proxy, with URL options (e.g. "?lease=6s&timeout=1s"). */
static dlock_client *proxied_client(dt_proxy *p, const char *options)
{
    char url[256];
    dlock_client *c = NULL;
    dt_server_start(&srv, "etcd", 0, NULL);
    dt_proxy_start(p, srv.port, 1);
    dt_server_url_at(&srv, p->ports[0], url, sizeof url - 64);
    strcat(url, options);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    return c;
}

static dlock__etcd_store_stats stats(dlock_client *c)
{
    dlock__etcd_store_stats st;
    dlock__etcd_store_stats_get(c->store, &st);
    return st;
}

static dlock__etcd_stats wire_stats(dlock_client *c)
{
    dlock__etcd_stats st;
    dlock__etcd_get_stats(dlock__etcd_store_client(c->store), &st);
    return st;
}

/* A key as etcdctl shows it. */
typedef struct kv {
    char key[600];
    int64_t create;
    int64_t lease;
    char value[600];
    size_t value_len;
} kv;

static int64_t json_i64(json_object *o, const char *field)
{
    json_object *v;
    return json_object_object_get_ex(o, field, &v) ? json_object_get_int64(v) : 0;
}

static void b64_field(json_object *o, const char *field, char *out, size_t len, size_t *n)
{
    json_object *v;
    out[0] = '\0';
    if (n != NULL)
        *n = 0;
    if (!json_object_object_get_ex(o, field, &v))
        return;
    const char *text = json_object_get_string(v);
    size_t tl = strlen(text);
    CHECK(3 * (tl / 4) + 1 <= len);
    long got = dlock__etcd_b64_decode(text, tl, out);
    CHECK(got >= 0);
    if (n != NULL)
        *n = (size_t) got;
}

/* The keys under prefix, oldest first (by create revision). */
static int keys_under(const char *prefix, kv *out, int max)
{
    const char *text =
        dt_server_cli(&srv, "get --prefix '%s' -w json --order=ASCEND --sort-by=CREATE", prefix);
    json_object *root = json_tokener_parse(text), *kvs;
    int n = 0;
    if (root == NULL)
        dt_fail(__FILE__, __LINE__, "etcdctl get: not JSON: %s", text);
    if (json_object_object_get_ex(root, "kvs", &kvs)) {
        for (size_t i = 0; i < json_object_array_length(kvs) && n < max; i++, n++) {
            json_object *o = json_object_array_get_idx(kvs, i);
            b64_field(o, "key", out[n].key, sizeof out[n].key, NULL);
            b64_field(o, "value", out[n].value, sizeof out[n].value, &out[n].value_len);
            out[n].create = json_i64(o, "create_revision");
            out[n].lease = json_i64(o, "lease");
        }
    }
    json_object_put(root);
    return n;
}

static int count_keys(const char *prefix)
{
    kv kvs[16];
    return keys_under(prefix, kvs, 16);
}

/* The TTL etcd granted lease (hex), or -1 if it is gone. */
static int granted_ttl(int64_t lease)
{
    const char *out = dt_server_cli(&srv, "lease timetolive %" PRIx64, (uint64_t) lease);
    const char *at = strstr(out, "granted with TTL(");
    return at != NULL ? atoi(at + 17) : -1;
}

static int lease_count(void)
{
    const char *out = dt_server_cli(&srv, "lease list");
    int n = -1;
    sscanf(out, "found %d leases", &n);
    return n;
}

/* An acquisition on a thread of its own. */
typedef struct waiter {
    pthread_t thread;
    dlock_lock *lock;
    int64_t wait_ms;
    int64_t lease_ms; /* > 0: dlock_acquire_for */
    atomic_int done;
    int rc;
    uint64_t fence;
} waiter;

static void *waiter_run(void *arg)
{
    waiter *w = arg;
    w->rc = w->lease_ms > 0 ? dlock_acquire_for(w->lock, w->wait_ms, w->lease_ms)
                            : dlock_acquire(w->lock, w->wait_ms);
    w->fence = dlock_lock_fence(w->lock);
    atomic_store(&w->done, 1);
    return NULL;
}

static void wait_async(waiter *w, dlock_lock *l, int64_t wait_ms)
{
    memset(w, 0, sizeof *w);
    w->lock = l;
    w->wait_ms = wait_ms;
    CHECK_INT(pthread_create(&w->thread, NULL, waiter_run, w), ==, 0);
}

static void join(waiter *w)
{
    pthread_join(w->thread, NULL);
}

/* Runs argv in a child with stdout to *out_fd (if not NULL); its pid. */
/* Starts argv; with out_fd, its file descriptor `to` (1: stdout, 2:
 * stderr) is a pipe read from *out_fd. */
static pid_t spawn_to(const char *const *argv, int to, int *out_fd)
{
    int fds[2] = {-1, -1};
    if (out_fd != NULL)
        CHECK_INT(pipe(fds), ==, 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (out_fd != NULL) {
            dup2(fds[1], to);
            close(fds[0]);
            close(fds[1]);
        }
        execvp(argv[0], (char *const *) argv);
        _exit(127);
    }
    if (out_fd != NULL) {
        close(fds[1]);
        *out_fd = fds[0];
    }
    return pid;
}

static pid_t spawn(const char *const *argv, int *out_fd)
{
    return spawn_to(argv, 1, out_fd);
}

/* A line from fd within ms (without its newline); 0 if none came. */
static int read_line(int fd, char *buf, size_t len, int ms)
{
    size_t used = 0;
    int64_t until = dt_now_ms() + ms;
    while (used + 1 < len) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int) (until - dt_now_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return 0;
        char ch;
        if (read(fd, &ch, 1) != 1)
            return 0;
        if (ch == '\n')
            break;
        buf[used++] = ch;
    }
    buf[used] = '\0';
    return 1;
}

static int exit_status(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

static void read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
}

static const char *endpoint(void)
{
    static char ep[64];
    snprintf(ep, sizeof ep, "127.0.0.1:%d", srv.port);
    return ep;
}

/* ---------------------------------------------------------------- layout */

/* The key is concurrency.Mutex's: NAME/<session lease in hex>, holding the
 * owner token and the client's owner record, "TOKEN\nINFO" (Go puts it
 * empty; nothing there reads it), on the session
 * lease (TTL: the URL's lease, rounded up to seconds); the
 * fence is its create revision; a try that fails leaves nothing behind. */
static void layout_and_try(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client("?lease=4500ms");
    dlock_lock *l = dt_lock(c, "job", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    kv kvs[4];
    CHECK_INT(keys_under("job/", kvs, 4), ==, 1);
    char want[64];
    snprintf(want, sizeof want, "job/%" PRIx64, (uint64_t) kvs[0].lease);
    CHECK(strcmp(kvs[0].key, want) == 0);
    char value[600];
    snprintf(value, sizeof value, "%s\n%s", dlock_lock_token(l), c->cfg.owner_info);
    CHECK_INT(kvs[0].value_len, ==, strlen(value));
    CHECK(strcmp(kvs[0].value, value) == 0);
    CHECK_INT((int64_t) dlock_lock_fence(l), ==, kvs[0].create);
    CHECK_INT(granted_ttl(kvs[0].lease), ==, 5);
    uint64_t first = dlock_lock_fence(l);
    /* re-entry: counted in the handle, the same key and fence */
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(l), ==, 2);
    CHECK_INT(dlock_lock_fence(l), ==, first);
    CHECK_INT(count_keys("job/"), ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(count_keys("job/"), ==, 1);
    CHECK(dlock_lock_remaining_ms(l) > 3000);

    /* Tries from another client, plain and with a fixed lease: busy, and
     * no key or lease of theirs stays. */
    dlock_client *c2 = client(NULL);
    dlock_lock *l2 = dt_lock(c2, "job", 0);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_EBUSY);
    CHECK_INT(count_keys("job/"), ==, 1);
    int leases = lease_count(); /* the two clients' sessions */
    CHECK_INT(leases, ==, 2);
    CHECK_RC(dlock_acquire_for(l2, 0, 3000), DLOCK_EBUSY);
    CHECK_INT(count_keys("job/"), ==, 1);
    CHECK_INT(lease_count(), ==, leases);

    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(count_keys("job/"), ==, 0);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_OK);
    CHECK(dlock_lock_fence(l2) > first);
    CHECK_INT(keys_under("job/", kvs, 4), ==, 1);
    CHECK_INT((int64_t) dlock_lock_fence(l2), ==, kvs[0].create);
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    CHECK_RC(dlock_release(l2), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(c2);
    /* closing revoked the sessions: nothing of ours is left */
    CHECK_INT(lease_count(), ==, 0);
}

/* Two handles of one client (one session lease) on one name exclude each
 * other: the second takes the next slot, NAME/<hex>-1. */
static void one_client_two_handles(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL);
    dlock_lock *a = dt_lock(c, "dup", 0), *b = dt_lock(c, "dup", 0);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
    waiter w;
    wait_async(&w, b, 10000);
    DT_WAIT_UNTIL(dt_query(c, "dup", 0).waiters == 1, 5000);
    kv kvs[4];
    CHECK_INT(keys_under("dup/", kvs, 4), ==, 2);
    char want[sizeof kvs[0].key + 8];
    snprintf(want, sizeof want, "%s-1", kvs[0].key);
    CHECK(strcmp(kvs[1].key, want) == 0);
    CHECK_INT(kvs[0].lease, ==, kvs[1].lease);
    CHECK(!atomic_load(&w.done));
    CHECK_RC(dlock_release(a), DLOCK_OK);
    join(&w);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK((int64_t) w.fence == kvs[1].create);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- interop */

/* dlock holds; `etcdctl lock` waits until dlock releases. */
static void interop_etcdctl_waits(void)
{
    char file[256], cmd[300], got[128];
    dt_server_start(&srv, "etcd", 0, NULL);
    snprintf(file, sizeof file, "%s/etcdctl-ran", srv.dir);
    snprintf(cmd, sizeof cmd, "echo \"$ETCD_LOCK_KEY\" > %s", file);
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "shared", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    const char *argv[] = {"etcdctl", "--endpoints", endpoint(), "lock", "shared",
                          "--",      "sh",          "-c",       cmd,    NULL};
    pid_t pid = spawn(argv, NULL);
    DT_WAIT_UNTIL(dt_query(c, "shared", 0).waiters == 1, 10000);
    CHECK(!file_exists(file)); /* queued behind us, not running */
    CHECK_RC(dlock_release(l), DLOCK_OK);
    DT_WAIT_UNTIL(file_exists(file), 10000);
    CHECK_INT(exit_status(pid), ==, 0);
    read_file(file, got, sizeof got);
    CHECK(strncmp(got, "shared/", 7) == 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* `etcdctl lock` holds; `dlock run` waits until it lets go. */
static void interop_dlock_run_waits(void)
{
    char file[256], cmd[300], line[256], url[200];
    dt_server_start(&srv, "etcd", 0, NULL);
    snprintf(file, sizeof file, "%s/dlock-ran", srv.dir);
    snprintf(cmd, sizeof cmd, "echo \"$DLOCK_FENCE\" > %s", file);
    snprintf(url, sizeof url, "%s", srv.url);
    const char *holder[] = {"etcdctl", "--endpoints", endpoint(), "lock", "shared", NULL};
    int out;
    pid_t etcdctl = spawn(holder, &out);
    CHECK(read_line(out, line, sizeof line, 10000));
    CHECK(strncmp(line, "shared/", 7) == 0);
    kv kvs[4];
    CHECK_INT(keys_under("shared/", kvs, 4), ==, 1);
    CHECK(strcmp(kvs[0].key, line) == 0);

    const char *run[] = {dt_bin("dlock"), "run", "-u", url,  "-w", "30",
                         "shared",        "--",  "sh", "-c", cmd,  NULL};
    pid_t dlock = spawn(run, NULL);
    dlock_client *c = client(NULL);
    DT_WAIT_UNTIL(dt_query(c, "shared", 0).waiters == 1, 10000);
    CHECK(!file_exists(file));
    /* etcdctl's key holds no token: the owner shown is its lease id */
    CHECK(strcmp(dt_query(c, "shared", 0).owner, line + 7) == 0);
    kill(etcdctl, SIGTERM); /* etcdctl deletes its key and exits */
    exit_status(etcdctl);
    close(out);
    DT_WAIT_UNTIL(file_exists(file), 10000);
    CHECK_INT(exit_status(dlock), ==, 0);
    char fence[64];
    read_file(file, fence, sizeof fence);
    CHECK(strtoll(fence, NULL, 10) > kvs[0].create);
    CHECK_INT(count_keys("shared/"), ==, 0);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- fences */

/* Processes and threads (two handles per client) take one lock in turns:
 * never two at once, and every holder's fence is above the last one's. */
typedef struct fence_log {
    atomic_int inside;
    atomic_int bad;
    _Atomic int64_t last;
    atomic_int turns;
} fence_log;

typedef struct turn_arg {
    dlock_lock *lock;
    fence_log *log;
    int cycles;
} turn_arg;

static void *take_turns(void *arg)
{
    turn_arg *t = arg;
    for (int i = 0; i < t->cycles; i++) {
        if (dlock_acquire(t->lock, 20000) != DLOCK_OK) {
            atomic_fetch_add(&t->log->bad, 1);
            continue;
        }
        int64_t fence = (int64_t) dlock_lock_fence(t->lock);
        if (atomic_fetch_add(&t->log->inside, 1) != 0)
            atomic_fetch_add(&t->log->bad, 1);
        if (fence <= atomic_load(&t->log->last))
            atomic_fetch_add(&t->log->bad, 1);
        atomic_store(&t->log->last, fence);
        atomic_fetch_add(&t->log->turns, 1);
        atomic_fetch_sub(&t->log->inside, 1);
        if (dlock_release(t->lock) != DLOCK_OK)
            atomic_fetch_add(&t->log->bad, 1);
    }
    return NULL;
}

static void fences_increase(void)
{
    enum { PROCS = 3, THREADS = 2, CYCLES = 12 };
    fence_log *log =
        mmap(NULL, sizeof *log, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(log != MAP_FAILED);
    dt_server_start(&srv, "etcd", 0, NULL);
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        CHECK(pids[p] >= 0);
        if (pids[p] != 0)
            continue;
        dlock_client *c = client(NULL);
        pthread_t th[THREADS];
        turn_arg args[THREADS];
        for (int t = 0; t < THREADS; t++) {
            args[t] = (turn_arg){.lock = dt_lock(c, "fenced", 0), .log = log, .cycles = CYCLES};
            CHECK_INT(pthread_create(&th[t], NULL, take_turns, &args[t]), ==, 0);
        }
        for (int t = 0; t < THREADS; t++) {
            pthread_join(th[t], NULL);
            dlock_lock_free(args[t].lock);
        }
        dlock_client_close(c);
        _exit(0);
    }
    for (int p = 0; p < PROCS; p++)
        CHECK_INT(exit_status(pids[p]), ==, 0);
    CHECK_INT(atomic_load(&log->bad), ==, 0);
    CHECK_INT(atomic_load(&log->turns), ==, PROCS * THREADS * CYCLES);
    CHECK_INT(count_keys("fenced/"), ==, 0);
}

/* ---------------------------------------------------------------- waking */

/* Waiters queue in order, and each release wakes exactly the next one:
 * one watch event and one round trip per hand-over, whatever the number
 * of waiters; one watch stream for the whole client. */
typedef struct relay {
    waiter w;
    atomic_int release; /* told to let go */
    int order;          /* when it got the lock (1 = first) */
} relay;

static atomic_int relay_turn;

static void *relay_run(void *arg)
{
    relay *r = arg;
    r->w.rc = dlock_acquire(r->w.lock, 30000);
    r->order = atomic_fetch_add(&relay_turn, 1) + 1;
    atomic_store(&r->w.done, 1);
    while (!atomic_load(&r->release))
        dt_sleep_ms(2);
    if (r->w.rc == DLOCK_OK)
        r->w.rc = dlock_release(r->w.lock);
    return NULL;
}

static void one_wakeup_per_release(void)
{
    enum { N = 6 };
    relay rs[N];
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL);
    dlock_lock *holder = dt_lock(c, "hot", 0);
    CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].w.lock = dt_lock(c, "hot", 0);
        CHECK_INT(pthread_create(&rs[i].w.thread, NULL, relay_run, &rs[i]), ==, 0);
        DT_WAIT_UNTIL(dt_query(c, "hot", 0).waiters == (unsigned) i + 1, 5000);
    }
    dlock__etcd_store_stats before = stats(c);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        DT_WAIT_UNTIL(atomic_load(&rs[i].w.done), 10000);
        CHECK_RC(rs[i].w.rc, DLOCK_OK);
        CHECK_INT(rs[i].order, ==, i + 1);
        dlock__etcd_store_stats now = stats(c);
        CHECK_INT(now.wakeups - before.wakeups, ==, 1);
        CHECK_INT(now.rounds - before.rounds, ==, 1);
        for (int j = i + 1; j < N; j++)
            CHECK(!atomic_load(&rs[j].w.done));
        before = now;
        atomic_store(&rs[i].release, 1);
        join(&rs[i].w);
        CHECK_RC(rs[i].w.rc, DLOCK_OK);
    }
    CHECK_INT(wire_stats(c).streams_opened, ==, 1);
    for (int i = 0; i < N; i++)
        dlock_lock_free(rs[i].w.lock);
    dlock_lock_free(holder);
    dlock_client_close(c);
}

/* A waiter cancelled leaves the queue: its key goes. */
static void cancel_leaves(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL), *c2 = client(NULL);
    dlock_lock *a = dt_lock(c, "cancel", 0), *b = dt_lock(c2, "cancel", 0);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    waiter w;
    wait_async(&w, b, DLOCK_WAIT_FOREVER);
    DT_WAIT_UNTIL(count_keys("cancel/") == 2, 5000);
    CHECK_RC(dlock_cancel(b), DLOCK_OK);
    join(&w);
    CHECK_RC(w.rc, DLOCK_ECANCELED);
    CHECK_INT(count_keys("cancel/"), ==, 1);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- 11456 */

/* A waiter whose lease ends while it waits is not granted when the holder
 * lets go (etcd 3.4's own Mutex would grant it: issue 11456): the one
 * behind it is, and it queues again at the back. */
static void lease_gone_while_waiting(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *ca = client(NULL), *cb = client("?lease=3s"), *cc = client(NULL);
    dlock_lock *a = dt_lock(ca, "g", 0), *b = dt_lock(cb, "g", 0), *cl = dt_lock(cc, "g", 0);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    waiter wb, wc;
    wait_async(&wb, b, 30000);
    DT_WAIT_UNTIL(count_keys("g/") == 2, 5000);
    wait_async(&wc, cl, 30000);
    DT_WAIT_UNTIL(count_keys("g/") == 3, 5000);
    kv kvs[4];
    CHECK_INT(keys_under("g/", kvs, 4), ==, 3);
    int64_t b_lease = kvs[1].lease;
    dt_server_cli(&srv, "lease revoke %" PRIx64, (uint64_t) b_lease);
    /* b finds out (its keepalive fails) and queues again, behind c */
    DT_WAIT_UNTIL(
        keys_under("g/", kvs, 4) == 3 && kvs[2].lease != b_lease && kvs[1].lease != b_lease, 10000);
    int64_t c_rev = kvs[1].create;
    CHECK_RC(dlock_release(a), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&wc.done), 10000);
    join(&wc);
    CHECK_RC(wc.rc, DLOCK_OK);
    CHECK_INT((int64_t) wc.fence, ==, c_rev);
    CHECK(!atomic_load(&wb.done));
    CHECK_INT(dt_query(ca, "g", 0).waiters, ==, 1);
    CHECK_RC(dlock_release(cl), DLOCK_OK);
    join(&wb);
    CHECK_RC(wb.rc, DLOCK_OK);
    CHECK(wb.fence > wc.fence);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(cl);
    dlock_client_close(ca);
    dlock_client_close(cb);
    dlock_client_close(cc);
}

/* ---------------------------------------------------------------- losses */

/* The session lease revoked behind the client's back: the hold is
 * reported lost; the next acquisition starts a new session. */
static void session_revoked(void)
{
    dt_lost_box box = {0};
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client("?lease=3s");
    dlock_lock *l = dt_lock(c, "rv", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    uint64_t first = dlock_lock_fence(l);
    kv kvs[2];
    CHECK_INT(keys_under("rv/", kvs, 2), ==, 1);
    dt_server_cli(&srv, "lease revoke %" PRIx64, (uint64_t) kvs[0].lease);
    DT_WAIT_UNTIL(atomic_load(&box.lost), 5000);
    CHECK(strstr(box.why, "lease") != NULL);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK(dlock_lock_fence(l) > first);
    CHECK_INT(keys_under("rv/", kvs, 2), ==, 1);
    CHECK(kvs[0].lease != 0 && granted_ttl(kvs[0].lease) == 3);
    CHECK_INT(stats(c).sessions, ==, 2);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* An operator deletes the holder's key: the holder is told at its next
 * check (a third of the lease). */
static void key_deleted(void)
{
    dt_lost_box box = {0};
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client("?lease=3s");
    dlock_lock *l = dt_lock(c, "kd", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    kv kvs[2];
    CHECK_INT(keys_under("kd/", kvs, 2), ==, 1);
    dt_server_cli(&srv, "del '%s'", kvs[0].key);
    DT_WAIT_UNTIL(atomic_load(&box.lost), 4000);
    CHECK(strstr(box.why, "force-unlocked or deleted") != NULL);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* dlock_force_unlock deletes the holder's key: the next waiter gets the
 * lock, the holder is told. dlock_query names the holder and its fence. */
static void query_and_force_unlock(void)
{
    dt_lost_box box = {0};
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *ca = client("?lease=3s"), *cb = client(NULL);
    dlock_lock *a = dt_lock(ca, "fu", 0), *b = dt_lock(cb, "fu", 0);
    dlock_lock_on_lost(a, dt_on_lost, &box);
    dlock_status st = dt_query(cb, "fu", 0);
    CHECK(!st.held);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    waiter w;
    wait_async(&w, b, 20000);
    DT_WAIT_UNTIL(dt_query(cb, "fu", 0).waiters == 1, 5000);
    kv kvs[2];
    CHECK_INT(keys_under("fu/", kvs, 2), ==, 2);
    st = dt_query(cb, "fu", 0);
    CHECK(st.held);
    CHECK_INT(st.holds, ==, 1);
    CHECK_INT(st.last_fence, ==, dlock_lock_fence(a));
    CHECK(strcmp(st.owner, dlock_lock_token(a)) == 0);
    CHECK(st.lease_ms > 0 && st.lease_ms <= 3000);
    CHECK_RC(dlock_force_unlock(cb, "fu", 0), DLOCK_OK);
    join(&w);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > dlock_lock_fence(a));
    DT_WAIT_UNTIL(atomic_load(&box.lost), 4000);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    CHECK_RC(dlock_force_unlock(cb, "fu", 0), DLOCK_OK); /* free: fine */
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(ca);
    dlock_client_close(cb);
}

/* ---------------------------------------------------------------- faults */

/* etcd killed and back within the lease: holds and waits survive. */
static void restart_within_lease(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *ca = client("?lease=8s&timeout=1s"), *cb = client("?lease=8s&timeout=1s");
    dlock_lock *a = dt_lock(ca, "rs", 0), *b = dt_lock(cb, "rs", 0);
    dt_lost_box box = {0};
    dlock_lock_on_lost(a, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    waiter w;
    wait_async(&w, b, 60000);
    DT_WAIT_UNTIL(count_keys("rs/") == 2, 5000);
    dt_server_kill(&srv);
    dt_server_start_again(&srv, 0);
    CHECK_INT(count_keys("rs/"), ==, 2);
    CHECK_RC(dlock_lock_check(a), DLOCK_OK);
    CHECK(!atomic_load(&w.done));
    CHECK_RC(dlock_release(a), DLOCK_OK);
    join(&w);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > dlock_lock_fence(a));
    CHECK(!atomic_load(&box.lost));
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(ca);
    dlock_client_close(cb);
}

/* etcd down longer than the lease: the holder is told, and the waiter gets
 * the lock once etcd is back and the old lease has ended, with a larger
 * fence. */
static void outage_longer_than_lease(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *ca = client("?lease=2s&timeout=500ms"), *cb = client("?lease=2s&timeout=500ms");
    dlock_lock *a = dt_lock(ca, "out", 0), *b = dt_lock(cb, "out", 0);
    dt_lost_box box = {0};
    dlock_lock_on_lost(a, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    waiter w;
    wait_async(&w, b, 60000);
    DT_WAIT_UNTIL(count_keys("out/") == 2, 5000);
    dt_server_kill(&srv);
    DT_WAIT_UNTIL(atomic_load(&box.lost), 5000);
    CHECK(!atomic_load(&w.done));
    dt_server_start_again(&srv, 0);
    join(&w);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > dlock_lock_fence(a));
    CHECK_RC(dlock_lock_check(a), DLOCK_ELOST);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(ca);
    dlock_client_close(cb);
}

/* A holder frozen (SIGSTOP) past its lease: another client gets the lock
 * with a larger fence; the first, resumed, is told it lost it. */
static void frozen_holder(void)
{
    int up[2];
    CHECK_INT(pipe(up), ==, 0);
    dt_server_start(&srv, "etcd", 0, NULL);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        dt_lost_box box = {0};
        char line[64];
        dlock_client *c = client("?lease=1s");
        dlock_lock *l = dt_lock(c, "frozen", 0);
        dlock_lock_on_lost(l, dt_on_lost, &box);
        if (dlock_acquire(l, 0) != DLOCK_OK)
            _exit(2);
        int n = snprintf(line, sizeof line, "%" PRIu64 "\n", dlock_lock_fence(l));
        if (write(up[1], line, (size_t) n) != n)
            _exit(3);
        while (!atomic_load(&box.lost))
            dt_sleep_ms(5);
        n = snprintf(line, sizeof line, "lost %d\n", dlock_lock_check(l));
        if (write(up[1], line, (size_t) n) != n)
            _exit(3);
        _exit(0);
    }
    close(up[1]);
    char line[64];
    CHECK(read_line(up[0], line, sizeof line, 10000));
    uint64_t first = strtoull(line, NULL, 10);
    kill(child, SIGSTOP);
    CHECK(dt_wait_stopped(child));
    dlock_client *c = client(NULL);
    dlock_lock *l = dt_lock(c, "frozen", 0);
    CHECK_RC(dlock_acquire(l, 20000), DLOCK_OK);
    CHECK(dlock_lock_fence(l) > first);
    kill(child, SIGCONT);
    CHECK(read_line(up[0], line, sizeof line, 10000));
    char want[32];
    snprintf(want, sizeof want, "lost %d", DLOCK_ELOST);
    CHECK(strcmp(line, want) == 0);
    CHECK_INT(exit_status(child), ==, 0);
    CHECK_RC(dlock_lock_check(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* dlock run over an etcd that freezes (SIGSTOP) and stays frozen: the lock
 * is reported lost when its lease can no longer be confirmed, and dlock
 * exits 75 within about a second of that report, though etcd answers none
 * of the requests that tidy up after a loss (the lost session's revoke, the
 * key's delete, the close); and no renewal is logged as done after the
 * loss, as etcd answered none. */
static void run_exits_on_frozen_etcd(void)
{
    char url[256], line[512], bad[512] = "";
    dt_server_start(&srv, "etcd", 0, NULL);
    snprintf(url, sizeof url, "%s?lease=2s", srv.url);
    const char *run[] = {dt_bin("dlock"), "run", "-vv",   "-u", url,
                         "frozen-etcd",   "--",  "sleep", "60", NULL};
    /* a dlock built with ThreadSanitizer sleeps 1 s at exit by default
     * (atexit_sleep_ms): not dlock's time */
    const char *tsan = getenv("TSAN_OPTIONS");
    char tsan_opts[1024];
    snprintf(tsan_opts, sizeof tsan_opts, "%s%satexit_sleep_ms=0", tsan != NULL ? tsan : "",
             tsan != NULL && tsan[0] != '\0' ? ":" : "");
    setenv("TSAN_OPTIONS", tsan_opts, 1);
    int err;
    pid_t dlock = spawn_to(run, 2, &err);
    int acquired = 0;
    while (!acquired && read_line(err, line, sizeof line, 10000))
        acquired = strstr(line, "acquired in") != NULL;
    CHECK(acquired);
    dt_server_pause(&srv);
    int64_t lost_at = 0;
    /* every line until dlock and its command are gone (the pipe's end) */
    while (read_line(err, line, sizeof line, 20000)) {
        if (lost_at == 0 && strstr(line, "lost") != NULL)
            lost_at = dt_now_ms();
        const char *renewed = strstr(line, ": renewed ");
        if (lost_at != 0 && renewed != NULL && strtoul(renewed + 10, NULL, 10) > 0 &&
            bad[0] == '\0')
            snprintf(bad, sizeof bad, "%s", line);
    }
    int64_t gone_at = dt_now_ms();
    close(err);
    int code = exit_status(dlock);
    dt_server_resume(&srv);
    CHECK(lost_at != 0);
    printf("etcd frozen: dlock run exited %lld ms after the loss report\n",
           (long long) (gone_at - lost_at));
    CHECK_INT(code, ==, 75);
    CHECK_INT(gone_at - lost_at, <, 1500);
    if (bad[0] != '\0')
        dt_fail(__FILE__, __LINE__, "a renewal logged as done after the loss: %s", bad);
}

/* A holder whose connection goes silent (blackholed): it is told within
 * its lease; a client that can reach etcd then gets the lock with a larger
 * fence; healed, the first one can take it again. */
static void blackholed_holder(void)
{
    dt_proxy p;
    dt_lost_box box = {0};
    dlock_client *cp = proxied_client(&p, "?lease=2s&timeout=500ms");
    dlock_client *cd = client(NULL);
    dlock_lock *a = dt_lock(cp, "bh", 0), *b = dt_lock(cd, "bh", 0);
    dlock_lock_on_lost(a, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    dt_proxy_set(&p, -1, DT_BLACKHOLE);
    DT_WAIT_UNTIL(atomic_load(&box.lost), 5000);
    CHECK_RC(dlock_acquire(b, 20000), DLOCK_OK);
    CHECK(dlock_lock_fence(b) > dlock_lock_fence(a));
    dt_proxy_set(&p, -1, DT_PASS);
    CHECK_RC(dlock_lock_check(a), DLOCK_ELOST);
    CHECK_RC(dlock_release(a), DLOCK_ELOST); /* reported, and cleared */
    waiter w;
    wait_async(&w, a, 20000);
    DT_WAIT_UNTIL(dt_query(cd, "bh", 0).waiters == 1, 10000);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    join(&w);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > dlock_lock_fence(b));
    CHECK_RC(dlock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(cp);
    dlock_client_close(cd);
    dt_proxy_stop(&p);
}

/* A waiter's connections cut (reset) and back: its watch stream comes
 * back, it keeps its place, and the release still wakes it. */
static void cut_waiter(void)
{
    dt_proxy p;
    dlock_client *cw = proxied_client(&p, "?lease=6s&timeout=1s");
    dlock_client *ch = client(NULL);
    dlock_lock *h = dt_lock(ch, "cut", 0), *w = dt_lock(cw, "cut", 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    waiter wt;
    wait_async(&wt, w, 30000);
    DT_WAIT_UNTIL(dt_query(ch, "cut", 0).waiters == 1, 5000);
    kv before[2];
    CHECK_INT(keys_under("cut/", before, 2), ==, 2);
    dt_proxy_set(&p, -1, DT_CUT);
    DT_WAIT_UNTIL(dt_proxy_connections(&p, -1) == 0, 5000);
    dt_proxy_set(&p, -1, DT_PASS);
    /* back on a new stream: the waiter's watch is created again */
    DT_WAIT_UNTIL(wire_stats(cw).streams_opened >= 2, 5000);
    kv after[2];
    CHECK_INT(keys_under("cut/", after, 2), ==, 2);
    CHECK_INT(after[1].create, ==, before[1].create); /* same place */
    CHECK(!atomic_load(&wt.done));
    CHECK_RC(dlock_release(h), DLOCK_OK);
    join(&wt);
    CHECK_RC(wt.rc, DLOCK_OK);
    CHECK_INT((int64_t) wt.fence, ==, before[1].create);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(w);
    dlock_client_close(cw);
    dlock_client_close(ch);
    dt_proxy_stop(&p);
}

/* A release etcd does not answer: EUNREACHABLE (not a false OK), the hold
 * is given up locally, and the key is deleted in the background once etcd
 * is back. */
static void release_unconfirmed(void)
{
    dt_proxy p;
    dlock_client *c = proxied_client(&p, "?lease=6s&timeout=300ms");
    dlock_lock *l = dt_lock(c, "ru", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    dt_proxy_set(&p, -1, DT_BLACKHOLE);
    CHECK_RC(dlock_release(l), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "background") != NULL);
    CHECK_INT(count_keys("ru/"), ==, 1);
    /* the hold is given up here all the same (the core's rule) */
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK_RC(dlock_release(l), DLOCK_ENOTOWNER);
    dt_proxy_set(&p, -1, DT_PASS);
    DT_WAIT_UNTIL(count_keys("ru/") == 0, 5000); /* the renewal thread retried it */
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_proxy_stop(&p);
}

typedef struct reset_later {
    dt_proxy *proxy;
    int after_ms;
    pthread_t thread;
} reset_later;

static void *reset_run(void *arg)
{
    reset_later *r = arg;
    dt_sleep_ms(r->after_ms); /* the schedule of the fault, not a wait */
    dt_proxy_reset(r->proxy, -1);
    return NULL;
}

/* A release whose kept-alive connection is reset halfway through its
 * timeout, while a new connection would be accepted and never answered:
 * libcurl sends the request again on a new connection, and that retry must
 * not get a timeout of its own. The release ends within the command
 * timeout (before the fix: 0.5 s past it). */
static void release_reset_midway(void)
{
    dt_proxy p;
    dlock_client *c = proxied_client(&p, "?lease=6s&timeout=1s");
    dlock_lock *l = dt_lock(c, "rr", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    dt_proxy_set(&p, -1, DT_DROP);
    reset_later r = {&p, 500, 0};
    pthread_create(&r.thread, NULL, reset_run, &r);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(l), DLOCK_EUNREACHABLE);
    int64_t took = dt_now_ms() - t0;
    pthread_join(r.thread, NULL);
    CHECK_INT(took, <=, 1000 + 150);
    dt_proxy_set(&p, -1, DT_PASS);
    DT_WAIT_UNTIL(count_keys("rr/") == 0, 5000); /* deleted in the background */
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_proxy_stop(&p);
}

/* A member that takes connections and never answers (paused; here a
 * blackholed proxy in front of the first endpoint) costs a request that
 * may run twice half its time, not all of it: the release goes on to the
 * next endpoint and succeeds. (The ensemble test found a release sent to a
 * paused member fail after its whole timeout while two members were up.) */
static void release_member_silent(void)
{
    dt_proxy p;
    char url[256];
    dlock_client *c = NULL;
    dt_server_start(&srv, "etcd", 0, NULL);
    dt_proxy_start(&p, srv.port, 1);
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d,127.0.0.1:%d?lease=6s&timeout=600ms", p.ports[0],
             srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "rs", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_INT(dt_proxy_connections(&p, 0), >, 0); /* the first endpoint serves it */
    dt_proxy_set(&p, 0, DT_BLACKHOLE);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(l), DLOCK_OK);
    int64_t took = dt_now_ms() - t0;
    CHECK_INT(took, >=, 300 - 10); /* it waited for the silent member first */
    CHECK_INT(took, <=, 600 + 150);
    CHECK_INT(count_keys("rs/"), ==, 0);
    /* the lock is free: another handle takes it at once */
    dlock_lock *l2 = dt_lock(c, "rs", 0);
    CHECK_RC(dlock_acquire(l2, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_proxy_stop(&p);
}

/* A delete etcd refuses (here: permission taken away; while it restarts
 * etcd answers errors too) stays pending, and its key claimed, until it
 * goes through: a new attempt then puts a new key and gets a larger fence.
 * (The fault suite found the claim dropped after one refusal: a new
 * attempt found the old key still there and took its revision, an old
 * fence, for a new grant.) */
/* Role pd's read-write permission on the locks pd and pe (every key
 * starting so: the other kinds' keys of a name too, which an attempt
 * reads): given (after auth is on, as root) or taken away. */
static void pd_permissions(int grant)
{
    static const char *const prefixes[] = {"pd", "pe"};
    for (int i = 0; i < 2; i++)
        CHECK(strstr(dt_server_cli(&srv, "--user root:s3cret role %s pd %s%s --prefix=true 2>&1",
                                   grant ? "grant-permission" : "revoke-permission",
                                   grant ? "readwrite " : "", prefixes[i]),
                     grant ? "updated" : "revoked") != NULL);
}

static void refused_delete_stays_pending(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dt_server_cli(&srv, "user add root:s3cret 2>&1");
    dt_server_cli(&srv, "user grant-role root root 2>&1");
    dt_server_cli(&srv, "user add u:pw 2>&1");
    dt_server_cli(&srv, "role add pd 2>&1");
    dt_server_cli(&srv, "user grant-role u pd 2>&1");
    CHECK(strstr(dt_server_cli(&srv, "auth enable 2>&1"), "Enabled") != NULL);
    pd_permissions(1);
    char url[200];
    snprintf(url, sizeof url, "etcd://u:pw@127.0.0.1:%d?lease=10s", srv.port);
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "pd", 0), *other = dt_lock(c, "pe", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    uint64_t first = dlock_lock_fence(l);

    pd_permissions(0);
    CHECK_RC(dlock_release(l), DLOCK_EUNREACHABLE); /* retried in the background */
    CHECK(strstr(dlock_errmsg(), "permission denied") != NULL);
    /* other calls retry it first, and are refused too */
    CHECK_RC(dlock_acquire(other, 0), DLOCK_ESERVER);
    CHECK_RC(dlock_acquire(other, 0), DLOCK_ESERVER);

    pd_permissions(1);
    /* (15 s: a renewer's retry sent before the grant leaves the old key
     * until its next pass, a third of the lease later) */
    CHECK_RC(dlock_acquire(l, 15000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, first);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- fixed leases */

/* dlock_acquire_for: the key is on a lease of its own (whole seconds,
 * rounded up), not kept alive: it runs out, the holder is told, the next
 * one gets a larger fence. dlock_extend moves the key to a new lease and
 * keeps its create revision (the fence); dlock_keepalive keeps it alive. */
static void fixed_lease(void)
{
    dt_lost_box box = {0};
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL), *c2 = client(NULL);
    dlock_lock *l = dt_lock(c, "fx", 0), *l2 = dt_lock(c2, "fx", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire_for(l, 0, 1500), DLOCK_OK);
    kv kvs[2];
    CHECK_INT(keys_under("fx/", kvs, 2), ==, 1);
    CHECK_INT(granted_ttl(kvs[0].lease), ==, 2);
    CHECK_INT((int64_t) dlock_lock_fence(l), ==, kvs[0].create);
    CHECK_INT(lease_count(), ==, 1); /* no session needed */
    CHECK_RC(dlock_acquire(l2, 10000), DLOCK_OK);
    CHECK(atomic_load(&box.lost));
    CHECK(dlock_lock_fence(l2) > dlock_lock_fence(l));
    CHECK_RC(dlock_release(l2), DLOCK_OK);

    /* extend: same key, same create revision, a new lease */
    CHECK_RC(dlock_acquire_for(l, 0, 2000), DLOCK_ELOST); /* the loss, reported once */
    CHECK_RC(dlock_acquire_for(l, 0, 2000), DLOCK_OK);
    CHECK_INT(keys_under("fx/", kvs, 2), ==, 1);
    int64_t rev = kvs[0].create, lease = kvs[0].lease;
    CHECK_RC(dlock_extend(l, 5000), DLOCK_OK);
    CHECK_INT(keys_under("fx/", kvs, 2), ==, 1);
    CHECK_INT(kvs[0].create, ==, rev);
    CHECK(kvs[0].lease != lease);
    CHECK_INT(granted_ttl(kvs[0].lease), ==, 5);
    CHECK_INT(granted_ttl(lease), ==, -1); /* the old one was revoked */
    CHECK(dlock_lock_remaining_ms(l) > 3000);
    /* keepalive: renewed from now on, past its 5 s */
    CHECK_RC(dlock_keepalive(l), DLOCK_OK);
    CHECK_RC(dlock_acquire(l2, 7000), DLOCK_ETIMEDOUT);
    CHECK_RC(dlock_lock_check(l), DLOCK_OK);
    CHECK_INT(keys_under("fx/", kvs, 2), ==, 1);
    CHECK_INT(kvs[0].create, ==, rev);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(count_keys("fx/"), ==, 0);

    /* a waiter with a fixed lease waits on its session and gets a lease of
     * its own when granted */
    CHECK_RC(dlock_acquire(l2, 0), DLOCK_OK);
    waiter w;
    memset(&w, 0, sizeof w);
    w.lock = l;
    w.wait_ms = 10000;
    w.lease_ms = 3000;
    CHECK_INT(pthread_create(&w.thread, NULL, waiter_run, &w), ==, 0);
    DT_WAIT_UNTIL(count_keys("fx/") == 2, 5000);
    CHECK_INT(keys_under("fx/", kvs, 2), ==, 2);
    int64_t session_lease = kvs[1].lease;
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    join(&w);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(keys_under("fx/", kvs, 2), ==, 1);
    CHECK(kvs[0].lease != session_lease);
    CHECK_INT(granted_ttl(kvs[0].lease), ==, 3);
    CHECK_INT((int64_t) w.fence, ==, kvs[0].create);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- kinds */

/* Read-write: readers share, a writer is alone, a reader behind a waiting
 * writer waits (writers are not starved), a downgrade, and EDEADLK. */
static void read_write(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL), *c2 = client(NULL);
    dlock_lock *r1 = dt_lock(c, "rw", DLOCK_READ), *r2 = dt_lock(c2, "rw", DLOCK_READ);
    dlock_lock *w1 = dt_lock(c2, "rw", DLOCK_WRITE), *r3 = dt_lock(c, "rw", DLOCK_READ);
    dlock_lock *mx = dt_lock(c, "rw", 0);
    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(mx, 0), DLOCK_EBUSY); /* one name is one lock */
    CHECK_INT(count_keys("rw/"), ==, 0);         /* the try left nothing */
    dlock_status st = dt_query(c, "rw", DLOCK_READ);
    CHECK(st.held);
    CHECK_INT(st.shared, ==, 2);
    kv kvs[4];
    CHECK_INT(keys_under("rw.rwlock/", kvs, 4), ==, 2);
    CHECK(strncmp(kvs[0].key, "rw.rwlock/r-", 12) == 0);
    CHECK_RC(dlock_try_acquire(w1), DLOCK_EBUSY);
    CHECK_INT(count_keys("rw.rwlock/"), ==, 2);
    waiter ww, wr;
    wait_async(&ww, w1, 20000);
    DT_WAIT_UNTIL(dt_query(c, "rw", DLOCK_READ).waiters == 1, 5000);
    wait_async(&wr, r3, 20000); /* behind the writer */
    DT_WAIT_UNTIL(dt_query(c, "rw", DLOCK_READ).waiters == 2, 5000);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_INT(dt_query(c, "rw", DLOCK_READ).shared, ==, 1);
    CHECK(!atomic_load(&ww.done));
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    join(&ww);
    CHECK_RC(ww.rc, DLOCK_OK);
    st = dt_query(c, "rw", DLOCK_WRITE);
    CHECK(st.held);
    CHECK_INT(st.holds, ==, 1);
    CHECK(!atomic_load(&wr.done));
    /* downgrade: the writer's owner takes the read lock, then lets the
     * write lock go */
    dlock_lock *down = NULL;
    CHECK_RC(dlock_lock_dup(w1, DLOCK_READ, &down), DLOCK_OK);
    CHECK_RC(dlock_acquire(down, 0), DLOCK_OK);
    CHECK_RC(dlock_release(w1), DLOCK_OK);
    join(&wr);
    CHECK_RC(wr.rc, DLOCK_OK);
    CHECK(wr.fence > ww.fence);
    CHECK_INT(dt_query(c, "rw", DLOCK_READ).shared, ==, 2);
    /* a reader asking to write would wait for itself */
    dlock_lock *up = NULL;
    CHECK_RC(dlock_lock_dup(down, DLOCK_WRITE, &up), DLOCK_OK);
    CHECK_RC(dlock_acquire(up, 1000), DLOCK_EDEADLK);
    CHECK_RC(dlock_release(down), DLOCK_OK);
    CHECK_RC(dlock_release(r3), DLOCK_OK);
    CHECK_INT(count_keys("rw.rwlock/"), ==, 0);
    /* a name ending as another kind's prefix has its dot escaped (names.h) */
    dlock_lock *own = dt_lock(c, "rw.rwlock", 0);
    CHECK_RC(dlock_acquire(own, 0), DLOCK_OK);
    CHECK_INT(count_keys("rw%2Erwlock/"), ==, 1);
    CHECK_INT(count_keys("rw.rwlock/"), ==, 0);
    CHECK_RC(dlock_release(own), DLOCK_OK);
    dlock_lock_free(own);
    dlock_lock_free(up);
    dlock_lock_free(down);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(r3);
    dlock_lock_free(w1);
    dlock_lock_free(mx);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* An owner holding the read lock behind more readers than one read brings
 * back (a page: 64) asks for the mutex (a dlock_lock_dup handle): still
 * EDEADLK at once, its key gone; the readers' keys are read only because a
 * contender of another kind came first. */
static void self_deadlock_many_readers(void)
{
    enum { READERS = 70 };
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL), *c2 = client(NULL);
    dlock_lock *readers[READERS], *mine = dt_lock(c, "many", DLOCK_READ), *mutex = NULL;
    for (int i = 0; i < READERS; i++) {
        readers[i] = dt_lock(c2, "many", DLOCK_READ);
        CHECK_RC(dlock_acquire(readers[i], 0), DLOCK_OK);
    }
    CHECK_RC(dlock_acquire(mine, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(mine, 0, &mutex), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(mutex, 20000), DLOCK_EDEADLK);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    CHECK_INT(count_keys("many/"), ==, 0);
    CHECK_RC(dlock_release(mine), DLOCK_OK);
    CHECK_RC(dlock_acquire(mutex, 0), DLOCK_EBUSY); /* the other readers' now */
    for (int i = 0; i < READERS; i++) {
        CHECK_RC(dlock_release(readers[i]), DLOCK_OK);
        dlock_lock_free(readers[i]);
    }
    CHECK_RC(dlock_acquire(mutex, 0), DLOCK_OK);
    CHECK_RC(dlock_release(mutex), DLOCK_OK);
    dlock_lock_free(mutex);
    dlock_lock_free(mine);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* Semaphore of 3: takes of 2 and 1 fit, a third of 2 waits and is not
 * overtaken by a later take of 1; all or nothing; another number of
 * permits is refused while in use. */
static void semaphore(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL), *c2 = client(NULL);
    dlock_lock *a = NULL, *b = NULL, *big = NULL, *small = NULL, *other = NULL;
    CHECK_RC(dlock_semaphore_open(c, "pool", 3, 2, &a), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c2, "pool", 3, 1, &b), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c2, "pool", 3, 2, &big), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c, "pool", 3, 1, &small), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c, "pool", 4, 1, &other), DLOCK_OK);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(b, 0), DLOCK_OK);
    dlock_status st = dt_query(c, "pool", DLOCK_SEMAPHORE);
    CHECK_INT(st.permits_used, ==, 3);
    CHECK_INT(st.permits, ==, 3);
    CHECK_INT(st.shared, ==, 2);
    kv kvs[8];
    CHECK_INT(keys_under("pool.semaphore/", kvs, 8), ==, 2);
    char value[600];
    snprintf(value, sizeof value, "2/3\n%s\n%s", dlock_lock_token(a), c->cfg.owner_info);
    CHECK(strcmp(kvs[0].value, value) == 0);
    CHECK_RC(dlock_try_acquire(small), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(other, 0), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "3 permits") != NULL);
    CHECK_INT(count_keys("pool.semaphore/"), ==, 2);
    waiter wbig, wsmall;
    wait_async(&wbig, big, 20000);
    DT_WAIT_UNTIL(dt_query(c, "pool", DLOCK_SEMAPHORE).waiters == 1, 5000);
    wait_async(&wsmall, small, 20000);
    DT_WAIT_UNTIL(dt_query(c, "pool", DLOCK_SEMAPHORE).waiters == 2, 5000);
    CHECK_RC(dlock_release(b), DLOCK_OK); /* 1 free: not enough for big, small stays behind */
    DT_WAIT_UNTIL(dt_query(c, "pool", DLOCK_SEMAPHORE).shared == 1, 5000);
    CHECK(!atomic_load(&wbig.done));
    CHECK(!atomic_load(&wsmall.done));
    CHECK_RC(dlock_release(a), DLOCK_OK); /* now both go in: 2 + 1 */
    join(&wbig);
    join(&wsmall);
    CHECK_RC(wbig.rc, DLOCK_OK);
    CHECK_RC(wsmall.rc, DLOCK_OK);
    CHECK(wsmall.fence > wbig.fence);
    st = dt_query(c, "pool", DLOCK_SEMAPHORE);
    CHECK_INT(st.permits_used, ==, 3);
    CHECK_RC(dlock_release(big), DLOCK_OK);
    CHECK_RC(dlock_release(small), DLOCK_OK);
    CHECK_RC(dlock_acquire(other, 0), DLOCK_OK); /* idle: any number goes */
    CHECK_RC(dlock_release(other), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(big);
    dlock_lock_free(small);
    dlock_lock_free(other);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A multi-lock takes its members one by one, each a Mutex key. */
static void multi_lock(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL);
    const char *names[] = {"m2", "m1"};
    dlock_lock *m = NULL;
    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    CHECK_INT(count_keys("m1/"), ==, 1);
    CHECK_INT(count_keys("m2/"), ==, 1);
    CHECK(dlock_lock_fence(dlock_lock_member(m, 1)) > dlock_lock_fence(dlock_lock_member(m, 0)));
    CHECK_RC(dlock_release(m), DLOCK_OK);
    CHECK_INT(count_keys("m1/") + count_keys("m2/"), ==, 0);
    dlock_lock_free(m);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- who holds */

/* The holder b->h[i] is owner, recorded by this process under label. */
static void check_holder(const dt_holders *b, int i, const char *owner, unsigned count,
                         const char *label)
{
    char host[256];
    CHECK_INT(gethostname(host, sizeof host), ==, 0);
    host[sizeof host - 1] = '\0';
    CHECK(strcmp(b->h[i].owner, owner) == 0);
    CHECK_INT(b->h[i].count, ==, count);
    CHECK(strcmp(b->h[i].host, host) == 0);
    CHECK_INT(b->h[i].pid, ==, getpid());
    CHECK(b->h[i].started_ms > 1600000000000LL &&
          b->h[i].started_ms <= (int64_t) time(NULL) * 1000 + 1000);
    CHECK(strcmp(b->h[i].label, label) == 0);
}

/* Every key holds "TOKEN\nINFO" (a semaphore's after "TAKE/PERMITS\n"):
 * dlock_query still shows the token alone, and dlock_query_holders the
 * holders (never the waiters) with the host, pid and label= of their
 * client: an owner's read holds and a semaphore holder's permits. */
static void owner_record(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client("?label=nightly"), *c2 = client(NULL);
    dlock_lock *l = dt_lock(c, "who", 0), *w = dt_lock(c2, "who", 0);
    CHECK_INT(dt_query_holders(c2, "who", 0).n, ==, 0); /* free: no call */
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    waiter wt;
    wait_async(&wt, w, 20000);
    DT_WAIT_UNTIL(dt_query(c, "who", 0).waiters == 1, 5000);
    kv kvs[4];
    CHECK_INT(keys_under("who/", kvs, 4), ==, 2);
    char value[600];
    snprintf(value, sizeof value, "%s\n%s", dlock_lock_token(l), c->cfg.owner_info);
    CHECK(strcmp(kvs[0].value, value) == 0);
    CHECK(strncmp(c->cfg.owner_info, "dlock1 ", 7) == 0);
    CHECK(strcmp(dt_query(c2, "who", 0).owner, dlock_lock_token(l)) == 0);
    dt_holders b = dt_query_holders(c2, "who", 0);
    CHECK_INT(b.n, ==, 1);
    check_holder(&b, 0, dlock_lock_token(l), 1, "nightly");
    CHECK_RC(dlock_release(l), DLOCK_OK);
    join(&wt);
    CHECK_RC(wt.rc, DLOCK_OK);
    b = dt_query_holders(c, "who", 0);
    CHECK_INT(b.n, ==, 1);
    check_holder(&b, 0, dlock_lock_token(w), 1, "");
    CHECK_RC(dlock_release(w), DLOCK_OK);

    /* readers: one owner with two read holds (a dup shares the token),
     * another with one; a writer waiting behind them is not a holder */
    dlock_lock *r1 = dt_lock(c, "who", DLOCK_READ), *r2 = NULL;
    dlock_lock *r3 = dt_lock(c2, "who", DLOCK_READ), *wr = dt_lock(c2, "who", DLOCK_WRITE);
    CHECK_RC(dlock_lock_dup(r1, DLOCK_READ, &r2), DLOCK_OK);
    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r3, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK);
    wait_async(&wt, wr, 20000);
    DT_WAIT_UNTIL(dt_query(c, "who", DLOCK_READ).waiters == 1, 5000);
    b = dt_query_holders(c2, "who", DLOCK_READ);
    CHECK_INT(b.n, ==, 2);
    check_holder(&b, 0, dlock_lock_token(r1), 2, "nightly");
    check_holder(&b, 1, dlock_lock_token(r3), 1, "");
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_RC(dlock_release(r3), DLOCK_OK);
    join(&wt);
    CHECK_RC(wt.rc, DLOCK_OK);
    b = dt_query_holders(c, "who", DLOCK_WRITE);
    CHECK_INT(b.n, ==, 1);
    check_holder(&b, 0, dlock_lock_token(wr), 1, "");
    CHECK_RC(dlock_release(wr), DLOCK_OK);

    /* semaphore: each holder with its permits; the waiter is not one */
    dlock_lock *s1 = NULL, *s2 = NULL, *s3 = NULL;
    CHECK_RC(dlock_semaphore_open(c, "who", 4, 3, &s1), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c2, "who", 4, 1, &s2), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c2, "who", 4, 2, &s3), DLOCK_OK);
    CHECK_RC(dlock_acquire(s1, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(s2, 0), DLOCK_OK);
    wait_async(&wt, s3, 20000);
    DT_WAIT_UNTIL(dt_query(c, "who", DLOCK_SEMAPHORE).waiters == 1, 5000);
    CHECK_INT(keys_under("who.semaphore/", kvs, 4), ==, 3);
    snprintf(value, sizeof value, "3/4\n%s\n%s", dlock_lock_token(s1), c->cfg.owner_info);
    CHECK(strcmp(kvs[0].value, value) == 0);
    b = dt_query_holders(c, "who", DLOCK_SEMAPHORE);
    CHECK_INT(b.n, ==, 2);
    check_holder(&b, 0, dlock_lock_token(s1), 3, "nightly");
    check_holder(&b, 1, dlock_lock_token(s2), 1, "");
    CHECK_RC(dlock_release(s1), DLOCK_OK);
    join(&wt);
    CHECK_RC(wt.rc, DLOCK_OK);
    CHECK_RC(dlock_release(s2), DLOCK_OK);
    CHECK_RC(dlock_release(s3), DLOCK_OK);
    CHECK_INT(dt_query_holders(c, "who", DLOCK_SEMAPHORE).n, ==, 0);
    dlock_lock *locks[] = {l, w, r1, r2, r3, wr, s1, s2, s3};
    for (size_t i = 0; i < sizeof locks / sizeof locks[0]; i++)
        dlock_lock_free(locks[i]);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A key put as Go's concurrency.Mutex and `etcdctl lock` put it (an empty
 * value) shows as a holder with its lease id for owner and nothing else;
 * so does a key whose value is not ours. */
static void holders_foreign(void)
{
    char line[256];
    dt_server_start(&srv, "etcd", 0, NULL);
    const char *holder[] = {"etcdctl", "--endpoints", endpoint(), "lock", "shared", NULL};
    int out;
    pid_t etcdctl = spawn(holder, &out);
    CHECK(read_line(out, line, sizeof line, 10000));
    CHECK(strncmp(line, "shared/", 7) == 0);
    kv kvs[2];
    CHECK_INT(keys_under("shared/", kvs, 2), ==, 1);
    CHECK_INT(kvs[0].value_len, ==, 0);
    dlock_client *c = client(NULL);
    dt_holders b = dt_query_holders(c, "shared", 0);
    CHECK_INT(b.n, ==, 1);
    CHECK(strcmp(b.h[0].owner, line + 7) == 0);
    CHECK_INT(b.h[0].count, ==, 1);
    CHECK(strcmp(b.h[0].host, "") == 0);
    CHECK_INT(b.h[0].pid, ==, 0);
    CHECK_INT(b.h[0].started_ms, ==, 0);
    CHECK(strcmp(b.h[0].label, "") == 0);
    CHECK(strcmp(dt_query(c, "shared", 0).owner, line + 7) == 0);
    kill(etcdctl, SIGTERM);
    exit_status(etcdctl);
    close(out);
    CHECK_INT(dt_query_holders(c, "shared", 0).n, ==, 0);

    /* a token alone (an older dlock's value): the token, no record */
    const char *granted = dt_server_cli(&srv, "lease grant 60");
    char lease[32] = "";
    CHECK(sscanf(granted, "lease %31s granted", lease) == 1);
    dt_server_cli(&srv, "put --lease=%s old/%s tok-1", lease, lease);
    b = dt_query_holders(c, "old", 0);
    CHECK_INT(b.n, ==, 1);
    CHECK(strcmp(b.h[0].owner, "tok-1") == 0);
    CHECK_INT(b.h[0].pid, ==, 0);
    CHECK(strcmp(dt_query(c, "old", 0).owner, "tok-1") == 0);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- listing */

/* What dlock_list reported: "NAME KIND" for each lock. */
typedef struct name_box {
    int n;
    char names[1600][48];
} name_box;

static void on_name(const char *name, unsigned flags, void *arg)
{
    name_box *b = arg;
    /* the read-write lock: flags as dlock_query() takes them */
    const char *kind = flags == 0                 ? "mutex"
                       : flags == DLOCK_WRITE     ? "rw"
                       : flags == DLOCK_SEMAPHORE ? "sem"
                                                  : NULL;
    if (kind == NULL)
        dt_fail(__FILE__, __LINE__, "lock %s: flags %u", name, flags);
    CHECK(b->n < 1600);
    snprintf(b->names[b->n++], sizeof b->names[0], "%s %s", name, kind);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The locks under prefix, sorted, joined by ','. */
static const char *listed(dlock_client *c, const char *prefix)
{
    static name_box b;
    static char text[4096];
    size_t used = 0;
    b.n = 0;
    CHECK_RC(dlock_list(c, prefix, 0, on_name, &b), DLOCK_OK);
    qsort(b.names, (size_t) b.n, sizeof b.names[0], cmp_names);
    text[0] = '\0';
    for (int i = 0; i < b.n && used < sizeof text; i++)
        used +=
            (size_t) snprintf(text + used, sizeof text - used, "%s%s", i ? "," : "", b.names[i]);
    return text;
}

/* dlock_list finds each lock with a contender's key under the prefix, once
 * per name and kind (a name's mutex held and its semaphore waited for are
 * two), by the name each key spells (not by etcd's prefix range: "a" also
 * ranges over "ab", "a/b" over "a/bb"); keys that are no contender's are
 * left out; a released lock is gone. */
static void list_locks(void)
{
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL), *c2 = client(NULL);
    CHECK(dlock_client_caps(c) & DLOCK_CAP_LIST);
    CHECK(strcmp(listed(c, ""), "") == 0);
    dlock_lock *abc = dt_lock(c, "a/b/c", 0), *abb = dt_lock(c, "a/bb", 0);
    dlock_lock *abb2 = dt_lock(c2, "a/bb", 0), *ab = dt_lock(c, "ab", 0);
    dlock_lock *r1 = dt_lock(c, "rw/x", DLOCK_READ), *r2 = dt_lock(c2, "rw/x", DLOCK_READ);
    dlock_lock *sem = NULL;
    CHECK_RC(dlock_semaphore_open(c, "a/bb", 2, 1, &sem), DLOCK_OK);
    CHECK_RC(dlock_acquire(abc, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(abb, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(ab, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK);
    waiter wt, ws; /* a second key of a/bb: a waiter */
    wait_async(&wt, abb2, 20000);
    DT_WAIT_UNTIL(dt_query(c, "a/bb", 0).waiters == 1, 5000);
    wait_async(&ws, sem, 20000); /* behind the mutex a/bb: one name is one lock */
    DT_WAIT_UNTIL(count_keys("a%2Fbb.semaphore/") == 1, 5000);
    /* not contenders' keys: no lease, or a last part that is no lease id */
    dt_server_cli(&srv, "put a/b/zz/1f data");
    const char *granted = dt_server_cli(&srv, "lease grant 60");
    char lease[32] = "";
    CHECK(sscanf(granted, "lease %31s granted", lease) == 1);
    dt_server_cli(&srv, "put --lease=%s a/q/notanid data", lease);
    dt_server_cli(&srv, "put --lease=%s a/x.rwlock/q-1f data", lease);
    /* etcdctl's lock `a/b` (a '/' dlock writes %2F): no name of dlock's */
    dt_server_cli(&srv, "put --lease=%s a/b/1f data", lease);

    CHECK(strcmp(listed(c, ""), "a/b/c mutex,a/bb mutex,a/bb sem,ab mutex,rw/x rw") == 0);
    CHECK(strcmp(listed(c, "a/"), "a/b/c mutex,a/bb mutex,a/bb sem") == 0);
    CHECK(strcmp(listed(c, "a/b"), "a/b/c mutex,a/bb mutex,a/bb sem") == 0);
    CHECK(strcmp(listed(c, "a/b/"), "a/b/c mutex") == 0);
    CHECK(strcmp(listed(c, "a"), "a/b/c mutex,a/bb mutex,a/bb sem,ab mutex") == 0);
    CHECK(strcmp(listed(c, "a/bb."), "") == 0); /* keys a/bb.semaphore/..: name a/bb */
    CHECK(strcmp(listed(c, "rw"), "rw/x rw") == 0);
    CHECK(strcmp(listed(c, "zz"), "") == 0);
    static name_box b;
    CHECK_RC(dlock_list(c, "", 2, on_name, &b), DLOCK_OK); /* at most 2 */
    CHECK_INT(b.n, ==, 2);

    CHECK_RC(dlock_release(ab), DLOCK_OK);
    CHECK_RC(dlock_cancel(sem), DLOCK_OK);
    join(&ws);
    CHECK_RC(ws.rc, DLOCK_ECANCELED);
    CHECK(strcmp(listed(c, ""), "a/b/c mutex,a/bb mutex,rw/x rw") == 0);
    CHECK_RC(dlock_release(abb), DLOCK_OK);
    join(&wt);
    CHECK_RC(wt.rc, DLOCK_OK);
    CHECK(strcmp(listed(c, "a/b"), "a/b/c mutex,a/bb mutex") == 0); /* its waiter holds now */
    CHECK_RC(dlock_release(abb2), DLOCK_OK);
    CHECK_RC(dlock_release(abc), DLOCK_OK);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK(strcmp(listed(c, ""), "") == 0);
    dlock_lock *locks[] = {abc, abb, abb2, ab, r1, r2, sem};
    for (size_t i = 0; i < sizeof locks / sizeof locks[0]; i++)
        dlock_lock_free(locks[i]);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* More locks than one range returns: the walk goes on page after page and
 * still reports each name once (each has two keys, and some a lock nested
 * under them, whose '/' is written %2F: its key sorts before theirs). */
static void list_pages(void)
{
    enum { NAMES = 1300 };
    dt_server_start(&srv, "etcd", 0, NULL);
    dlock_client *c = client(NULL);
    dlock__etcd *wire = dlock__etcd_store_client(c->store);
    dlock__etcd_lease lease;
    CHECK_RC(dlock__etcd_lease_grant(wire, 60, 0, dlock__now_us() + 10000000, &lease), DLOCK_OK);
    static char keys[3 * NAMES][64];
    dlock__etcd_op ops[DLOCK__ETCD_MAX_TXN_OPS];
    int nkeys = 0, nested = 0;
    for (int i = 0; i < NAMES; i++) {
        snprintf(keys[nkeys++], sizeof keys[0], "pg%%2F%04d/%" PRIx64, i, (uint64_t) lease.id);
        snprintf(keys[nkeys++], sizeof keys[0], "pg%%2F%04d/%" PRIx64 "-1", i, (uint64_t) lease.id);
        if (i % 7 == 0) {
            /* lock "pg/NNNN/<hex>-0" */
            snprintf(keys[nkeys++], sizeof keys[0], "pg%%2F%04d%%2F%" PRIx64 "-0/%" PRIx64, i,
                     (uint64_t) lease.id, (uint64_t) lease.id);
            nested++;
        }
    }
    for (int from = 0; from < nkeys; from += DLOCK__ETCD_MAX_TXN_OPS) {
        int n = nkeys - from < DLOCK__ETCD_MAX_TXN_OPS ? nkeys - from : DLOCK__ETCD_MAX_TXN_OPS;
        for (int i = 0; i < n; i++) {
            memset(&ops[i], 0, sizeof ops[i]);
            ops[i].type = DLOCK__ETCD_OP_PUT;
            ops[i].put = (dlock__etcd_put){.key = keys[from + i], .lease = lease.id};
        }
        dlock__etcd_txn t = {.success = ops, .n_success = (size_t) n};
        dlock__etcd_txn_result r;
        CHECK_RC(dlock__etcd_kv_txn(wire, &t, dlock__now_us() + 10000000, &r), DLOCK_OK);
        dlock__etcd_txn_result_free(&r);
    }
    static name_box b;
    b.n = 0;
    CHECK_RC(dlock_list(c, "pg/", 0, on_name, &b), DLOCK_OK);
    CHECK_INT(b.n, ==, NAMES + nested);
    qsort(b.names, (size_t) b.n, sizeof b.names[0], cmp_names);
    for (int i = 1; i < b.n; i++)
        CHECK(strcmp(b.names[i - 1], b.names[i]) != 0);
    char want[64];
    CHECK(strcmp(b.names[0], "pg/0000 mutex") == 0);
    snprintf(want, sizeof want, "pg/0000/%" PRIx64 "-0 mutex", (uint64_t) lease.id);
    CHECK(strcmp(b.names[1], want) == 0);
    b.n = 0;
    CHECK_RC(dlock_list(c, "pg/", 700, on_name, &b), DLOCK_OK);
    CHECK_INT(b.n, ==, 700);
    CHECK_RC(dlock__etcd_lease_revoke(wire, lease.id, dlock__now_us() + 10000000), DLOCK_OK);
    CHECK(strcmp(listed(c, "pg/"), "") == 0);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- bad input */

/* The warnings a client logs: how many, and the first. */
typedef struct warn_log {
    atomic_int count;
    char first[256];
} warn_log;

static void collect_warnings(int level, const char *msg, void *arg)
{
    warn_log *w = arg;
    if (level != DLOCK_LOG_WARN)
        return;
    if (atomic_fetch_add(&w->count, 1) == 0)
        snprintf(w->first, sizeof w->first, "%s", msg);
}

static void bad_input(void)
{
    dlock_client *c = NULL;
    char url[200];
    const char *bad[] = {
        "etcd://",
        "etcd://127.0.0.1:2379/some/path",
        "etcd://127.0.0.1:99999",
        "etcd://127.0.0.1:2379?nonsense=1",
        "etcd://127.0.0.1:2379?connect_timeout=soon",
        "etcd://127.0.0.1:2379?lease=-1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(dlock_client_open(bad[i], &c), DLOCK_EINVAL);
        CHECK(c == NULL);
        CHECK(dlock_errmsg()[0] != '\0');
    }

    /* nobody listening: unreachable, promptly */
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d?connect_timeout=300ms&timeout=1s",
             dt_free_port());
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK(dlock_client_caps(c) & DLOCK_CAP_SESSION);
    CHECK(strcmp(dlock_client_store(c), "etcd") == 0);
    dlock_lock *l = dt_lock(c, "x", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 0), DLOCK_EUNREACHABLE);
    CHECK(dt_now_ms() - t0 < 3000);
    CHECK(strstr(dlock_errmsg(), "127.0.0.1") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* names the layout cannot take, and names the core refuses */
    dt_server_start(&srv, "etcd", 0, NULL);
    c = client(NULL);
    CHECK_RC(dlock_lock_open(c, "", 0, &l), DLOCK_EINVAL);
    CHECK_RC(dlock_lock_open(c, "tab\there", 0, &l), DLOCK_EINVAL);
    dlock_status st;
    CHECK_RC(dlock_query(c, "x.semaphore", DLOCK_SEMAPHORE, &st), DLOCK_OK);
    /* '/' is escaped: `a` ranks every key under `a/`, so `/locks/job`
     * under it would be a contender of `/locks` */
    CHECK_RC(dlock_lock_open(c, "/locks/job", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_INT(count_keys("/locks/job/"), ==, 0);
    CHECK_INT(count_keys("%2Flocks%2Fjob/"), ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* credentials for a server without authentication: not an error (as
     * etcd's own client), but said once, without the password */
    warn_log warned = {0};
    snprintf(url, sizeof url, "etcd://someone:hush@127.0.0.1:%d", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, collect_warnings, &warned), DLOCK_OK);
    l = dt_lock(c, "noauth", 0);
    for (int i = 0; i < 2; i++) {
        CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    CHECK_INT(atomic_load(&warned.count), ==, 1);
    CHECK(strstr(warned.first, "authentication is not enabled") != NULL);
    CHECK(strstr(warned.first, "'someone'") != NULL);
    CHECK(strstr(warned.first, "hush") == NULL);

    /* wrong credentials, none, then the right ones */
    dt_server_cli(&srv, "user add root:s3cret 2>&1");
    dt_server_cli(&srv, "user grant-role root root 2>&1");
    CHECK(strstr(dt_server_cli(&srv, "auth enable 2>&1"), "Enabled") != NULL);
    const char *creds[] = {"root:badpass@", "", "root:s3cret@"};
    int want[] = {DLOCK_ESERVER, DLOCK_ESERVER, DLOCK_OK};
    const char *says[] = {"authentication failed", "authentication", NULL};
    for (int i = 0; i < 3; i++) {
        snprintf(url, sizeof url, "etcd://%s127.0.0.1:%d", creds[i], srv.port);
        CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
        l = dt_lock(c, "auth", 0);
        CHECK_RC(dlock_acquire(l, 0), want[i]);
        if (says[i] != NULL) {
            CHECK(strstr(dlock_errmsg(), says[i]) != NULL);
            CHECK(strstr(dlock_errmsg(), "badpass") == NULL); /* no password in messages */
            /* refused, not unreachable: a wait without a budget says so at once */
            int64_t refused_at = dt_now_ms();
            CHECK_RC(dlock_acquire(l, DLOCK_WAIT_FOREVER), want[i]);
            CHECK_INT(dt_now_ms() - refused_at, <, 1000);
        } else {
            CHECK_RC(dlock_release(l), DLOCK_OK);
        }
        dlock_lock_free(l);
        dlock_client_close(c);
    }
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"layout_and_try", layout_and_try},
        {"one_client_two_handles", one_client_two_handles},
        {"interop_etcdctl_waits", interop_etcdctl_waits},
        {"interop_dlock_run_waits", interop_dlock_run_waits},
        {"fences_increase", fences_increase},
        {"one_wakeup_per_release", one_wakeup_per_release},
        {"cancel_leaves", cancel_leaves},
        {"lease_gone_while_waiting", lease_gone_while_waiting},
        {"session_revoked", session_revoked},
        {"key_deleted", key_deleted},
        {"query_and_force_unlock", query_and_force_unlock},
        {"restart_within_lease", restart_within_lease},
        {"outage_longer_than_lease", outage_longer_than_lease},
        {"frozen_holder", frozen_holder},
        {"run_exits_on_frozen_etcd", run_exits_on_frozen_etcd},
        {"blackholed_holder", blackholed_holder},
        {"release_unconfirmed", release_unconfirmed},
        {"release_reset_midway", release_reset_midway},
        {"release_member_silent", release_member_silent},
        {"refused_delete_stays_pending", refused_delete_stays_pending},
        {"cut_waiter", cut_waiter},
        {"fixed_lease", fixed_lease},
        {"read_write", read_write},
        {"self_deadlock_many_readers", self_deadlock_many_readers},
        {"semaphore", semaphore},
        {"multi_lock", multi_lock},
        {"owner_record", owner_record},
        {"holders_foreign", holders_foreign},
        {"list_locks", list_locks},
        {"list_pages", list_pages},
        {"bad_input", bad_input},
    };
    return DT_RUN(tests);
}
