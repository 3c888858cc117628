/* SPDX-License-Identifier: MIT */
/* test_etcd_wire.c - the etcd v3 wire layer (src/backend/etcd/) against a
 * real etcd 3.4 started by each test on free loopback ports: the codec on
 * its own, leases, the concurrency.Mutex transactions, the shared watch
 * stream, a server killed and restarted, authentication, malformed replies
 * from a fake server, sockets closed on exec, and interop with
 * `etcdctl lock`.
 *
 * `test_etcd_wire measure [SECONDS]` is not a test: it prints JSON lines
 * with txn+delete cycles per second through this layer (1 and 50 threads)
 * and through the curl CLI on one keep-alive connection, with raft
 * proposals per cycle. */
#define _GNU_SOURCE
#include "../support/harness.h"
#include "backend/etcd/client.h"
#include "backend/etcd/transport.h" /* dlock__etcd_endpoint_failed */
#include "base/clock.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

/* ================================================================ etcd */

/* A throwaway single-node etcd (kept small and local so it can move to
 * tests/support later). Killed by the kernel if the test dies
 * (PR_SET_PDEATHSIG), by pid at exit otherwise. */
typedef struct etcd_srv {
    pid_t pid;
    int port, peer_port;
    char dir[128];
    char endpoint[32]; /* 127.0.0.1:PORT */
    const char *extra[8];
} etcd_srv;

/* Pids and data dirs are kept here by value: the etcd_srv structs usually
 * live on a test's stack, gone by the time atexit runs. */
#define MAX_SRV 16
static pid_t live_pids[MAX_SRV];
static char live_dirs[MAX_SRV][128];

static void stop_all_etcd(void)
{
    for (int i = 0; i < MAX_SRV; i++) {
        if (live_pids[i] > 0) {
            kill(live_pids[i], SIGKILL);
            waitpid(live_pids[i], NULL, 0);
            live_pids[i] = 0;
        }
    }
    for (int i = 0; i < MAX_SRV; i++) {
        if (live_dirs[i][0] != '\0') {
            char cmd[sizeof live_dirs + 16];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", live_dirs[i]);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", live_dirs[i]);
            live_dirs[i][0] = '\0';
        }
    }
}

static void remember_pid(pid_t pid, pid_t old)
{
    for (int i = 0; i < MAX_SRV; i++) {
        if (live_pids[i] == old) {
            live_pids[i] = pid;
            return;
        }
    }
}

static size_t sink(char *p, size_t size, size_t n, void *arg)
{
    char *buf = arg;
    size_t len = strlen(buf), add = size * n;
    if (len + add < 256) {
        memcpy(buf + len, p, add);
        buf[len + add] = '\0';
    }
    return size * n;
}

/* GET http://endpoint/path into out (256 bytes); the HTTP status or 0. */
static long http_get(const char *endpoint, const char *path, char *out)
{
    char url[128];
    long status = 0;
    CURL *h = curl_easy_init();

    out[0] = '\0';
    snprintf(url, sizeof url, "http://%s%s", endpoint, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 500L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    return status;
}

static void etcd_spawn(etcd_srv *s)
{
    char client[64], peer[64], cluster[96], data[160], token[32], log[160], body[256];
    const char *argv[40];
    int argc = 0;

    snprintf(client, sizeof client, "http://127.0.0.1:%d", s->port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", s->peer_port);
    snprintf(cluster, sizeof cluster, "n1=%s", peer);
    snprintf(data, sizeof data, "%s/data", s->dir);
    snprintf(token, sizeof token, "t%d", s->port);
    snprintf(log, sizeof log, "%s/etcd.log", s->dir);
    snprintf(s->endpoint, sizeof s->endpoint, "127.0.0.1:%d", s->port);
    const char *fixed[] = {"etcd", "--name", "n1", "--data-dir", data, "--listen-client-urls",
                           client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
                           "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
                           "--initial-cluster-state", "new", "--initial-cluster-token", token,
                           /* a 1 s lease is allowed when the election timeout is short */
                           "--heartbeat-interval", "10", "--election-timeout", "100", "--logger",
                           "zap", "--log-level", "warn"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[argc++] = fixed[i];
    for (int i = 0; i < 8 && s->extra[i] != NULL; i++)
        argv[argc++] = s->extra[i];
    argv[argc] = NULL;

    s->pid = fork();
    if (s->pid < 0)
        dt_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (s->pid == 0) {
        struct utsname u;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* etcd 3.4 runs only on amd64 and ppc64le without this */
        if (uname(&u) == 0 && strcmp(u.machine, "x86_64") != 0 && strcmp(u.machine, "ppc64le") != 0)
            setenv("ETCD_UNSUPPORTED_ARCH", strcmp(u.machine, "aarch64") == 0 ? "arm64" : u.machine,
                   1);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execvp("etcd", (char *const *) argv);
        _exit(127);
    }
    remember_pid(s->pid, 0);
    int64_t until = dt_now_ms() + 20000;
    while (http_get(s->endpoint, "/health", body) != 200 || strstr(body, "true") == NULL) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            remember_pid(0, s->pid);
            s->pid = 0;
            dt_fail(__FILE__, __LINE__, "etcd exited at start (log %s)", log);
        }
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__, "etcd on port %d not healthy in 20 s (log %s)", s->port,
                    log);
        dt_sleep_ms(20);
    }
}

/* Starts etcd with extra flags (NULL-terminated). */
static void etcd_start(etcd_srv *s, ...)
{
    va_list ap;
    const char *a;
    int n = 0;

    memset(s, 0, sizeof *s);
    va_start(ap, s);
    while ((a = va_arg(ap, const char *)) != NULL && n < 7)
        s->extra[n++] = a;
    va_end(ap);
    snprintf(s->dir, sizeof s->dir, "/tmp/dlock-etcd-XXXXXX");
    if (mkdtemp(s->dir) == NULL)
        dt_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
    for (int i = 0; i < MAX_SRV; i++) {
        if (live_dirs[i][0] == '\0') {
            snprintf(live_dirs[i], sizeof live_dirs[i], "%s", s->dir);
            break;
        }
    }
    s->port = dt_free_port();
    do
        s->peer_port = dt_free_port();
    while (s->peer_port == s->port);
    static int hooked;
    if (!hooked) {
        atexit(stop_all_etcd);
        hooked = 1;
    }
    etcd_spawn(s);
}

static void etcd_kill(etcd_srv *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        remember_pid(0, s->pid);
        s->pid = 0;
    }
}

/* Runs a shell command line; its exit status, stdout+stderr in out. */
static int sh(char *out, size_t size, const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    size_t used = 0;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        dt_fail(__FILE__, __LINE__, "popen: %s", strerror(errno));
    if (out != NULL && size > 0)
        out[0] = '\0';
    int c;
    while ((c = fgetc(p)) != EOF) {
        if (out != NULL && used + 1 < size) {
            out[used++] = (char) c;
            out[used] = '\0';
        }
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ================================================================ helpers */

static int64_t in_ms(int64_t ms)
{
    return dlock__now_us() + ms * 1000;
}

static dlock__etcd *client_cfg(const char *endpoints, const char *user, const char *password)
{
    dlock__etcd_config cfg = {.endpoints = endpoints,
                              .user = user,
                              .password = password,
                              .connect_timeout_ms = 1000,
                              .request_timeout_ms = 5000};
    dlock__etcd *c = NULL;
    CHECK_RC(dlock__etcd_new(&cfg, &c), DLOCK_OK);
    return c;
}

/* A client of endpoints with short timeouts, for tests of silent members. */
static dlock__etcd *client_timed(const char *endpoints, int64_t connect_ms, int64_t request_ms)
{
    dlock__etcd_config cfg = {
        .endpoints = endpoints, .connect_timeout_ms = connect_ms, .request_timeout_ms = request_ms};
    dlock__etcd *c = NULL;
    CHECK_RC(dlock__etcd_new(&cfg, &c), DLOCK_OK);
    return c;
}

static dlock__etcd *client_for(const etcd_srv *s)
{
    return client_cfg(s->endpoint, NULL, NULL);
}

static int64_t grant(dlock__etcd *c, int64_t ttl)
{
    dlock__etcd_lease l;
    CHECK_RC(dlock__etcd_lease_grant(c, ttl, 0, in_ms(5000), &l), DLOCK_OK);
    CHECK(l.id > 0);
    CHECK_INT(l.ttl, ==, ttl);
    return l.id;
}

static int64_t count_prefix(dlock__etcd *c, const char *prefix)
{
    char *end = dlock__etcd_prefix_end(prefix);
    dlock__etcd_range r = {.key = prefix, .range_end = end, .count_only = 1};
    dlock__etcd_range_result res;
    CHECK_RC(dlock__etcd_kv_range(c, &r, in_ms(5000), &res), DLOCK_OK);
    int64_t n = res.count;
    dlock__etcd_range_result_free(&res);
    free(end);
    return n;
}

static int64_t put(dlock__etcd *c, const char *key, const char *value)
{
    dlock__etcd_put p = {.key = key, .value = value, .value_len = strlen(value)};
    int64_t rev = 0;
    CHECK_RC(dlock__etcd_kv_put(c, &p, in_ms(5000), &rev), DLOCK_OK);
    CHECK(rev > 0);
    return rev;
}

static int64_t del(dlock__etcd *c, const char *key)
{
    dlock__etcd_delete d = {.key = key};
    int64_t rev = 0, deleted = -1;
    CHECK_RC(dlock__etcd_kv_delete(c, &d, in_ms(5000), &rev, &deleted), DLOCK_OK);
    return deleted;
}

/* The concurrency.Mutex acquire: one txn that creates NAME/<lease hex> if
 * it does not exist (else reads it) and reads the owner (the lowest
 * create_revision under NAME/). */
typedef struct mutex_try {
    char key[256];
    int64_t my_rev;
    int created; /* the txn created the key (else it existed) */
    int held;    /* we are the owner */
    char owner[256];
    int64_t revision; /* header revision of the txn */
} mutex_try;

static int mutex_acquire(dlock__etcd *c, const char *name, int64_t lease, mutex_try *out)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/", name);
    snprintf(out->key, sizeof out->key, "%s/%" PRIx64, name, (uint64_t) lease);
    char *end = dlock__etcd_prefix_end(prefix);
    dlock__etcd_compare cmp = {
        .key = out->key, .target = DLOCK__ETCD_TARGET_CREATE, .result = DLOCK__ETCD_CMP_EQUAL};
    dlock__etcd_op owner = {.type = DLOCK__ETCD_OP_RANGE,
                            .range = {.key = prefix,
                                      .range_end = end,
                                      .sort_target = DLOCK__ETCD_SORT_BY_CREATE,
                                      .sort_order = DLOCK__ETCD_SORT_ASCEND,
                                      .limit = 1}};
    dlock__etcd_op success[2] = {
        {.type = DLOCK__ETCD_OP_PUT, .put = {.key = out->key, .lease = lease}}, owner};
    dlock__etcd_op failure[2] = {{.type = DLOCK__ETCD_OP_RANGE, .range = {.key = out->key}}, owner};
    dlock__etcd_txn t = {&cmp, 1, success, 2, failure, 2};
    dlock__etcd_txn_result res;
    int rc = dlock__etcd_kv_txn(c, &t, in_ms(5000), &res);
    free(end);
    if (rc != DLOCK_OK)
        return rc;
    CHECK_INT(res.n_responses, ==, 2);
    out->created = res.succeeded;
    out->revision = res.revision;
    if (res.succeeded) {
        CHECK_INT(res.responses[0].type, ==, DLOCK__ETCD_OP_PUT);
        out->my_rev = res.revision;
    } else {
        CHECK_INT(res.responses[0].type, ==, DLOCK__ETCD_OP_RANGE);
        CHECK_INT(res.responses[0].range.n_kvs, ==, 1);
        out->my_rev = res.responses[0].range.kvs[0].create_revision;
    }
    const dlock__etcd_range_result *o = &res.responses[1].range;
    CHECK_INT(res.responses[1].type, ==, DLOCK__ETCD_OP_RANGE);
    out->owner[0] = '\0';
    if (o->n_kvs > 0)
        snprintf(out->owner, sizeof out->owner, "%s", o->kvs[0].key);
    out->held = o->n_kvs == 0 || o->kvs[0].create_revision == out->my_rev;
    dlock__etcd_txn_result_free(&res);
    return DLOCK_OK;
}

/* The newest key under NAME/ created before my_rev ("" when none), and the
 * header revision of the read. */
static int64_t predecessor(dlock__etcd *c, const char *name, int64_t my_rev, char *key, size_t size)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/", name);
    char *end = dlock__etcd_prefix_end(prefix);
    dlock__etcd_range r = {.key = prefix,
                           .range_end = end,
                           .sort_target = DLOCK__ETCD_SORT_BY_CREATE,
                           .sort_order = DLOCK__ETCD_SORT_DESCEND,
                           .max_create_revision = my_rev - 1,
                           .limit = 1};
    dlock__etcd_range_result res;
    CHECK_RC(dlock__etcd_kv_range(c, &r, in_ms(5000), &res), DLOCK_OK);
    key[0] = '\0';
    if (res.n_kvs > 0) {
        CHECK(res.kvs[0].create_revision < my_rev);
        snprintf(key, size, "%s", res.kvs[0].key);
    }
    int64_t rev = res.revision;
    dlock__etcd_range_result_free(&res);
    free(end);
    return rev;
}

/* Watch notes, recorded for the test thread to look at. */
typedef struct rec_note {
    int64_t watch;
    int kind, type, code;
    char key[128];
    char reason[200]; /* CANCELED, BROKEN */
    int64_t mod_revision, compact, revision;
} rec_note;

typedef struct recorder {
    pthread_mutex_t mu;
    rec_note notes[512];
    int n;
    atomic_int calls;
} recorder;

static void record(void *arg, const dlock__etcd_watch_note *n)
{
    recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n < 512) {
        rec_note *x = &r->notes[r->n++];
        memset(x, 0, sizeof *x);
        x->watch = n->watch;
        x->kind = n->kind;
        x->code = n->code;
        x->compact = n->compact_revision;
        x->revision = n->revision;
        if (n->reason != NULL)
            snprintf(x->reason, sizeof x->reason, "%s", n->reason);
        if (n->event != NULL) {
            x->type = n->event->type;
            x->mod_revision = n->event->kv.mod_revision;
            snprintf(x->key, sizeof x->key, "%s", n->event->kv.key);
        }
    }
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_add(&r->calls, 1);
}

static void recorder_init(recorder *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

/* Notes of one watch (0: any) and kind; the last one into *out. */
static int notes(recorder *r, int64_t watch, int kind, rec_note *out)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++) {
        if ((watch == 0 || r->notes[i].watch == watch) && r->notes[i].kind == kind) {
            n++;
            if (out != NULL)
                *out = r->notes[i];
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int64_t watch_key(dlock__etcd *c, recorder *r, const char *key, int64_t start, int no_put)
{
    dlock__etcd_watch_spec spec = {.key = key, .start_revision = start, .no_put = no_put};
    int64_t id = 0;
    CHECK_RC(dlock__etcd_watch_add(c, &spec, record, r, &id), DLOCK_OK);
    CHECK(id > 0);
    return id;
}

static uint64_t created(dlock__etcd *c)
{
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    return st.watches_created;
}

/* ================================================================ codec */

static void test_codec_base64(void)
{
    char enc[64], dec[64];
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        CHECK_INT(dlock__etcd_b64_encode(plain[i], strlen(plain[i]), enc), ==, strlen(coded[i]));
        CHECK(strcmp(enc, coded[i]) == 0);
        CHECK_INT(dlock__etcd_b64_decode(coded[i], strlen(coded[i]), dec), ==, strlen(plain[i]));
        CHECK(strcmp(dec, plain[i]) == 0);
    }
    /* binary, with a NUL inside */
    CHECK_INT(dlock__etcd_b64_decode("AP8A", 4, dec), ==, 3);
    CHECK(dec[0] == 0 && (unsigned char) dec[1] == 0xff && dec[2] == 0);
    const char *bad[] = {"Zg=",  "Zg",    "Z===",   "====", "Zg==Zg==", " Zg=",
                         "Zg =", "Z\ng=", "Zm9v\n", "Zm-v", "Zm_v",     "=Zg="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_INT(dlock__etcd_b64_decode(bad[i], strlen(bad[i]), dec), ==, -1);
}

static void test_codec_int64(void)
{
    int64_t v;
    CHECK(dlock__etcd_parse_int64("0", 1, &v) == 0 && v == 0);
    CHECK(dlock__etcd_parse_int64("9223372036854775807", 19, &v) == 0 && v == INT64_MAX);
    CHECK(dlock__etcd_parse_int64("-9223372036854775808", 20, &v) == 0 && v == INT64_MIN);
    CHECK(dlock__etcd_parse_int64("-1", 2, &v) == 0 && v == -1);
    const char *bad[] = {"",
                         "-",
                         "+1",
                         "1.5",
                         "1e3",
                         " 1",
                         "1 ",
                         "0x10",
                         "9223372036854775808",
                         "-9223372036854775809",
                         "99999999999999999999",
                         "12a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_INT(dlock__etcd_parse_int64(bad[i], strlen(bad[i]), &v), ==, -1);

    char *end = dlock__etcd_prefix_end("lock/");
    CHECK(strcmp(end, "lock0") == 0);
    free(end);
    end = dlock__etcd_prefix_end("a\xff\xff");
    CHECK(strcmp(end, "b") == 0);
    free(end);
    end = dlock__etcd_prefix_end("\xff");
    CHECK(strcmp(end, "") == 0);
    free(end);
}

/* A request's JSON, parsed back, says what etcd's gateway expects. */
static void test_codec_requests(void)
{
    char *text;
    size_t len;
    dlock__etcd_compare cmp = {.key = "m/1f", .target = DLOCK__ETCD_TARGET_CREATE};
    dlock__etcd_op ok[2] = {{.type = DLOCK__ETCD_OP_PUT, .put = {.key = "m/1f", .lease = 31}},
                            {.type = DLOCK__ETCD_OP_RANGE,
                             .range = {.key = "m/",
                                       .range_end = "m0",
                                       .sort_target = DLOCK__ETCD_SORT_BY_CREATE,
                                       .sort_order = DLOCK__ETCD_SORT_DESCEND,
                                       .limit = 1,
                                       .max_create_revision = 41}}};
    dlock__etcd_op ko[1] = {{.type = DLOCK__ETCD_OP_DELETE, .del = {.key = "m/1f"}}};
    dlock__etcd_txn t = {&cmp, 1, ok, 2, ko, 1};
    CHECK_RC(dlock__etcd_encode_txn(&t, &text, &len), DLOCK_OK);
    CHECK_INT(strlen(text), ==, len);
    json_object *o = json_tokener_parse(text), *v;
    CHECK(o != NULL);
    CHECK(json_pointer_get(o, "/compare/0/key", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "bS8xZg==") == 0);
    CHECK(json_pointer_get(o, "/compare/0/target", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "CREATE") == 0);
    CHECK(json_pointer_get(o, "/compare/0/result", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "EQUAL") == 0);
    CHECK(json_pointer_get(o, "/compare/0/create_revision", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "0") == 0);
    CHECK(json_pointer_get(o, "/success/0/request_put/lease", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "31") == 0);
    /* an empty value is left out, as the gateway itself does */
    CHECK(json_pointer_get(o, "/success/0/request_put/value", &v) != 0);
    CHECK(json_pointer_get(o, "/success/1/request_range/range_end", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "bTA=") == 0);
    CHECK(json_pointer_get(o, "/success/1/request_range/sort_order", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "DESCEND") == 0);
    CHECK(json_pointer_get(o, "/success/1/request_range/max_create_revision", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "41") == 0);
    CHECK(json_pointer_get(o, "/failure/0/request_delete_range/key", &v) == 0);
    json_object_put(o);
    free(text);

    dlock__etcd_watch_create w = {
        .key = "k", .range_end = "", .start_revision = 7, .watch_id = 3, .no_put = 1};
    CHECK_RC(dlock__etcd_encode_watch_create(&w, &text, &len), DLOCK_OK);
    CHECK(text[len - 1] == '\n');
    o = json_tokener_parse(text);
    CHECK(json_pointer_get(o, "/create_request/range_end", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "AA==") == 0); /* "" stands for "\0" */
    CHECK(json_pointer_get(o, "/create_request/filters/0", &v) == 0);
    CHECK(strcmp(json_object_get_string(v), "NOPUT") == 0);
    CHECK(json_pointer_get(o, "/create_request/watch_id", &v) == 0);
    json_object_put(o);
    free(text);

    /* arguments refused before anything is sent */
    dlock__etcd_range empty = {.key = ""};
    CHECK_RC(dlock__etcd_encode_range(&empty, &text, &len), DLOCK_EINVAL);
    char long_key[DLOCK__ETCD_MAX_KEY + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    dlock__etcd_put p = {.key = long_key};
    CHECK_RC(dlock__etcd_encode_put(&p, &text, &len), DLOCK_EINVAL);
    dlock__etcd_op many[DLOCK__ETCD_MAX_TXN_OPS + 1];
    for (int i = 0; i <= DLOCK__ETCD_MAX_TXN_OPS; i++)
        many[i] = ko[0];
    dlock__etcd_txn big = {NULL, 0, many, DLOCK__ETCD_MAX_TXN_OPS + 1, NULL, 0};
    CHECK_RC(dlock__etcd_encode_txn(&big, &text, &len), DLOCK_EINVAL);
    CHECK_RC(dlock__etcd_encode_lease_grant(0, 0, &text, &len), DLOCK_EINVAL);
    CHECK_RC(dlock__etcd_encode_lease_id(0, 0, &text, &len), DLOCK_EINVAL);
}

#define S(lit) lit, sizeof(lit) - 1

/* Replies as etcd 3.4.23's gateway sends them (zero values left out). */
static void test_codec_replies(void)
{
    dlock__etcd_txn_result t;
    CHECK_RC(dlock__etcd_decode_txn(
                 S("{\"header\":{\"cluster_id\":\"1\",\"revision\":\"10\",\"raft_term\":\"2\"},"
                   "\"succeeded\":true,\"responses\":[{\"response_put\":{\"header\":{\"revision\":"
                   "\"10\"}}},{\"response_range\":{\"header\":{\"revision\":\"10\"},\"kvs\":[{"
                   "\"key\":\"bGsvNGJj\",\"create_revision\":\"10\",\"mod_revision\":\"10\","
                   "\"version\":\"1\",\"lease\":\"5459103851346037519\"}],\"count\":\"1\"}}]}\n"),
                 &t),
             DLOCK_OK);
    CHECK_INT(t.revision, ==, 10);
    CHECK_INT(t.succeeded, ==, 1);
    CHECK_INT(t.n_responses, ==, 2);
    CHECK_INT(t.responses[0].type, ==, DLOCK__ETCD_OP_PUT);
    CHECK_INT(t.responses[1].type, ==, DLOCK__ETCD_OP_RANGE);
    CHECK_INT(t.responses[1].range.n_kvs, ==, 1);
    CHECK(strcmp(t.responses[1].range.kvs[0].key, "lk/4bc") == 0);
    CHECK_INT(t.responses[1].range.kvs[0].lease, ==, 5459103851346037519LL);
    CHECK_INT(t.responses[1].range.kvs[0].value_len, ==, 0); /* omitted: empty */
    CHECK(t.responses[1].range.kvs[0].value[0] == '\0');
    dlock__etcd_txn_result_free(&t);

    /* failed txn: no "succeeded"; an empty range has no kvs and no count */
    CHECK_RC(dlock__etcd_decode_txn(S("{\"header\":{\"revision\":\"11\"},\"responses\":[{"
                                      "\"response_range\":{\"header\":{\"revision\":\"11\"}}}]}"),
                                    &t),
             DLOCK_OK);
    CHECK_INT(t.succeeded, ==, 0);
    CHECK_INT(t.responses[0].range.n_kvs, ==, 0);
    CHECK_INT(t.responses[0].range.count, ==, 0);
    dlock__etcd_txn_result_free(&t);

    /* int64 as JSON numbers too (etcdctl's JSON, a 3.5 gateway) */
    dlock__etcd_range_result r;
    CHECK_RC(dlock__etcd_decode_range(S("{\"header\":{\"revision\":12},\"kvs\":[{\"key\":\"YQ==\","
                                        "\"create_revision\":3,\"value\":\"eA==\"}],\"count\":1,"
                                        "\"more\":true}"),
                                      &r),
             DLOCK_OK);
    CHECK_INT(r.revision, ==, 12);
    CHECK_INT(r.kvs[0].create_revision, ==, 3);
    CHECK(strcmp(r.kvs[0].value, "x") == 0);
    CHECK_INT(r.more, ==, 1);
    dlock__etcd_range_result_free(&r);

    dlock__etcd_lease l;
    dlock__etcd_status st;
    CHECK_RC(dlock__etcd_decode_keepalive(
                 S("{\"result\":{\"header\":{\"revision\":\"11\"},\"ID\":\"12345\"}}\n"), &l, &st),
             DLOCK_OK);
    CHECK_INT(l.id, ==, 12345);
    CHECK_INT(l.ttl, ==, 0); /* a dead lease: no TTL */
    CHECK_INT(st.code, ==, 0);

    dlock__etcd_watch_response w;
    CHECK_RC(dlock__etcd_decode_watch(
                 S("{\"result\":{\"header\":{\"revision\":\"2283\"},\"watch_id\":\"7\",\"events\":["
                   "{\"kv\":{\"key\":\"YQ==\",\"create_revision\":\"2280\",\"mod_revision\":"
                   "\"2283\",\"version\":\"2\",\"value\":\"aGk=\"}},{\"type\":\"DELETE\",\"kv\":{"
                   "\"key\":\"Yg==\",\"mod_revision\":\"2284\"}}]}}"),
                 &w),
             DLOCK_OK);
    CHECK_INT(w.watch_id, ==, 7);
    CHECK_INT(w.n_events, ==, 2);
    CHECK_INT(w.events[0].type, ==, DLOCK__ETCD_EV_PUT);
    CHECK(strcmp(w.events[0].kv.value, "hi") == 0);
    CHECK_INT(w.events[1].type, ==, DLOCK__ETCD_EV_DELETE);
    CHECK_INT(w.events[1].kv.mod_revision, ==, 2284);
    dlock__etcd_watch_response_free(&w);
    CHECK_RC(dlock__etcd_decode_watch(S("{\"result\":{\"header\":{\"revision\":\"5\"},\"watch_id\":"
                                        "\"11\",\"canceled\":true,\"compact_revision\":\"12\"}}"),
                                      &w),
             DLOCK_OK);
    CHECK(w.canceled && w.compact_revision == 12 && !w.created);
    dlock__etcd_watch_response_free(&w);
    CHECK_RC(dlock__etcd_decode_watch(S("{\"result\":{\"header\":{\"revision\":\"5\"},\"watch_id\":"
                                        "\"-1\",\"created\":true,\"canceled\":true,"
                                        "\"cancel_reason\":\"mvcc: duplicate watch ID\"}}"),
                                      &w),
             DLOCK_OK);
    CHECK(w.watch_id == -1 && strstr(w.cancel_reason, "duplicate") != NULL);
    dlock__etcd_watch_response_free(&w);

    /* error bodies, unary and stream forms, and what they map to */
    CHECK_RC(dlock__etcd_decode_status(S("{\"error\":\"etcdserver: requested lease not found\","
                                         "\"message\":\"etcdserver: requested lease not found\","
                                         "\"code\":5}"),
                                       &st),
             DLOCK_OK);
    CHECK_INT(st.code, ==, 5);
    CHECK_INT(dlock__etcd_status_kind(&st), ==, DLOCK__ETCD_ST_LEASE_NOT_FOUND);
    CHECK_RC(dlock__etcd_fail_status(&st, 404, "etcd://x", "/v3/lease/revoke"), DLOCK_ELOST);
    CHECK_RC(dlock__etcd_decode_status(S("{\"error\":{\"grpc_code\":14,\"http_code\":503,"
                                         "\"message\":\"etcdserver: no leader\",\"http_status\":"
                                         "\"Service Unavailable\"}}"),
                                       &st),
             DLOCK_OK);
    CHECK_RC(dlock__etcd_fail_status(&st, 503, "etcd://x", "/v3/kv/txn"), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "no leader") != NULL);
    CHECK_RC(dlock__etcd_decode_status(S("{\"error\":\"etcdserver: authentication failed, invalid "
                                         "user ID or password\",\"code\":3}"),
                                       &st),
             DLOCK_OK);
    CHECK_RC(dlock__etcd_fail_status(&st, 400, "etcd://x", "/v3/auth/authenticate"), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "authentication failed") != NULL);
    CHECK_RC(dlock__etcd_decode_status(S("Not Found\n"), &st), DLOCK_EPROTO);
}

/* Everything a reply may say wrong is DLOCK_EPROTO, never a value. */
static void test_codec_invalid(void)
{
    static const char *const bad_txn[] = {
        "{\"header\":{\"revision\":\"-3\"}}",
        "{\"header\":{\"revision\":\"abc\"}}",
        "{\"header\":{\"revision\":1.5}}",
        "{\"header\":{\"revision\":\"99999999999999999999\"}}",
        "{\"header\":{\"revision\":99999999999999999999}}",
        "{\"header\":{\"revision\":true}}",
        "{\"header\":[]}",
        "{\"revision\":\"3\"}", /* no header: not an etcd reply */
        "{\"header\":{},\"succeeded\":\"yes\"}",
        "{\"header\":{},\"responses\":{}}",
        "{\"header\":{},\"responses\":[{}]}",
        "{\"header\":{},\"responses\":[3]}",
        "{\"header\":{},\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":\"a\"}]}}]}",
        "{\"header\":{},\"responses\":[{\"response_range\":{\"kvs\":[{\"value\":\"YQ==\"}]}}]}",
        "{\"header\":{},\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":\"YQ==\","
        "\"lease\":\"-1\"}]}}]}",
        "{\"header\":{},\"responses\":[{\"response_range\":{\"count\":\"-1\"}}]}",
        "{\"header\":{}} x",
        "{\"header\":{}",
        "",
        "[]",
        "null",
        "\"header\"",
        "{\"header\":{}}{\"header\":{}}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    };
    dlock__etcd_txn_result t;
    for (size_t i = 0; i < sizeof bad_txn / sizeof bad_txn[0]; i++) {
        int rc = dlock__etcd_decode_txn(bad_txn[i], strlen(bad_txn[i]), &t);
        if (rc != DLOCK_EPROTO)
            dt_fail(__FILE__, __LINE__, "reply %zu (%s) gave %d, not EPROTO", i, bad_txn[i], rc);
        CHECK(t.responses == NULL && t.n_responses == 0);
    }
    dlock__etcd_lease l;
    dlock__etcd_status st;
    CHECK_RC(dlock__etcd_decode_lease_grant(S("{\"header\":{},\"ID\":\"-5\",\"TTL\":\"10\"}"), &l),
             DLOCK_EPROTO);
    CHECK_RC(dlock__etcd_decode_lease_grant(S("{\"header\":{},\"TTL\":\"10\"}"), &l),
             DLOCK_EPROTO); /* a grant with no id */
    CHECK_RC(dlock__etcd_decode_keepalive(
                 S("{\"result\":{\"header\":{},\"ID\":\"1\",\"TTL\":\"-4\"}}"), &l, &st),
             DLOCK_EPROTO);
    dlock__etcd_watch_response w;
    CHECK_RC(dlock__etcd_decode_watch(S("{\"result\":{\"header\":{},\"events\":[{\"type\":\"MOVE\","
                                        "\"kv\":{\"key\":\"YQ==\"}}]}}"),
                                      &w),
             DLOCK_EPROTO);
    CHECK_RC(dlock__etcd_decode_watch(S("{\"result\":{\"header\":{},\"watch_id\":\"-2\"}}"), &w),
             DLOCK_EPROTO);
    char *token;
    CHECK_RC(dlock__etcd_decode_token(S("{\"header\":{},\"token\":\"\"}"), &token), DLOCK_EPROTO);
    CHECK_RC(dlock__etcd_decode_token(S("{\"header\":{},\"token\":\"a\\r\\nX: y\"}"), &token),
             DLOCK_EPROTO);
    /* a NUL inside the reply */
    CHECK_RC(dlock__etcd_decode_header("{\"header\":{}}\0", 14, &l.revision), DLOCK_EPROTO);
}

/* ================================================================ leases */

static void test_lease_lifecycle(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    int64_t id = grant(c, 30);
    dlock__etcd_lease l;
    CHECK_RC(dlock__etcd_lease_keepalive(c, id, in_ms(5000), &l), DLOCK_OK);
    CHECK_INT(l.id, ==, id);
    CHECK_INT(l.ttl, ==, 30);

    char key[64];
    snprintf(key, sizeof key, "owned/%" PRIx64, (uint64_t) id);
    dlock__etcd_put p = {.key = key, .lease = id};
    int64_t rev;
    CHECK_RC(dlock__etcd_kv_put(c, &p, in_ms(5000), &rev), DLOCK_OK);
    dlock__etcd_lease_ttl ttl;
    CHECK_RC(dlock__etcd_lease_timetolive(c, id, 1, in_ms(5000), &ttl), DLOCK_OK);
    CHECK_INT(ttl.granted_ttl, ==, 30);
    CHECK(ttl.ttl > 0 && ttl.ttl <= 30);
    CHECK_INT(ttl.n_keys, ==, 1);
    CHECK(strcmp(ttl.keys[0], key) == 0);
    dlock__etcd_lease_ttl_free(&ttl);

    CHECK_RC(dlock__etcd_lease_revoke(c, id, in_ms(5000)), DLOCK_OK);
    CHECK_INT(count_prefix(c, "owned/"), ==, 0); /* its key went with it */
    /* "lease not found" is told apart from any other refusal */
    CHECK_RC(dlock__etcd_lease_keepalive(c, id, in_ms(5000), &l), DLOCK_ELOST);
    CHECK_RC(dlock__etcd_lease_revoke(c, id, in_ms(5000)), DLOCK_ELOST);
    CHECK(strstr(dlock_errmsg(), "lease not found") != NULL);
    CHECK_RC(dlock__etcd_kv_put(c, &p, in_ms(5000), &rev), DLOCK_ELOST);
    CHECK_RC(dlock__etcd_lease_timetolive(c, id, 0, in_ms(5000), &ttl), DLOCK_OK);
    CHECK_INT(ttl.ttl, ==, -1);
    dlock__etcd_lease_ttl_free(&ttl);
    dlock__etcd_free(c);
}

static void test_lease_expires(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    int64_t id = grant(c, 1);
    dlock__etcd_put p = {.key = "expiring/a", .lease = id};
    int64_t rev;
    dlock__etcd_lease l;
    CHECK_RC(dlock__etcd_kv_put(c, &p, in_ms(5000), &rev), DLOCK_OK);
    CHECK_INT(count_prefix(c, "expiring/"), ==, 1);
    /* not kept alive: the key goes with the lease, within a few seconds */
    DT_WAIT_UNTIL(count_prefix(c, "expiring/") == 0, 5000);
    CHECK_RC(dlock__etcd_lease_keepalive(c, id, in_ms(5000), &l), DLOCK_ELOST);
    dlock__etcd_free(c);
}

/* ================================================================ mutex */

static void test_mutex_txn(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    int64_t lease = grant(c, 30);
    mutex_try a, again;
    CHECK_RC(mutex_acquire(c, "job", lease, &a), DLOCK_OK);
    CHECK(a.created && a.held);
    CHECK_INT(a.my_rev, ==, a.revision);
    CHECK(strcmp(a.owner, a.key) == 0);
    /* the same session again finds its key: same revision, still held */
    CHECK_RC(mutex_acquire(c, "job", lease, &again), DLOCK_OK);
    CHECK(!again.created && again.held);
    CHECK_INT(again.my_rev, ==, a.my_rev);
    CHECK(strcmp(again.key, a.key) == 0);

    /* the key is as etcdctl writes it: empty value, on the lease */
    dlock__etcd_range r = {.key = a.key};
    dlock__etcd_range_result res;
    CHECK_RC(dlock__etcd_kv_range(c, &r, in_ms(5000), &res), DLOCK_OK);
    CHECK_INT(res.n_kvs, ==, 1);
    CHECK_INT(res.kvs[0].lease, ==, lease);
    CHECK_INT(res.kvs[0].value_len, ==, 0);
    CHECK_INT(res.kvs[0].version, ==, 1);
    dlock__etcd_range_result_free(&res);

    /* a put on a dead session lease fails as ELOST, not as a conflict */
    CHECK_RC(dlock__etcd_lease_revoke(c, lease, in_ms(5000)), DLOCK_OK);
    CHECK_RC(mutex_acquire(c, "job", lease, &a), DLOCK_ELOST);
    dlock__etcd_free(c);
}

/* Compares on value, version, lease and mod revision; keys_only. */
static void test_txn_compares(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    int64_t lease = grant(c, 30);
    dlock__etcd_put p = {.key = "cmp/k", .value = "v\0w", .value_len = 3, .lease = lease};
    int64_t rev;
    CHECK_RC(dlock__etcd_kv_put(c, &p, in_ms(5000), &rev), DLOCK_OK);
    dlock__etcd_compare all[4] = {
        {.key = "cmp/k", .target = DLOCK__ETCD_TARGET_VALUE, .value = "v\0w", .value_len = 3},
        {.key = "cmp/k", .target = DLOCK__ETCD_TARGET_VERSION, .number = 1},
        {.key = "cmp/k", .target = DLOCK__ETCD_TARGET_LEASE, .number = lease},
        {.key = "cmp/k",
         .target = DLOCK__ETCD_TARGET_MOD,
         .result = DLOCK__ETCD_CMP_LESS,
         .number = rev + 1}};
    dlock__etcd_op get = {.type = DLOCK__ETCD_OP_RANGE, .range = {.key = "cmp/k", .keys_only = 1}};
    dlock__etcd_op drop = {.type = DLOCK__ETCD_OP_DELETE, .del = {.key = "cmp/k"}};
    dlock__etcd_txn_result res;
    for (int wrong = 0; wrong < 4; wrong++) {
        dlock__etcd_compare cmp[4];
        memcpy(cmp, all, sizeof cmp);
        if (wrong == 0)
            cmp[0].value = "v\0x";
        else if (wrong == 1)
            cmp[1].number = 2;
        else if (wrong == 2)
            cmp[2].number = lease + 1;
        else
            cmp[3].result = DLOCK__ETCD_CMP_GREATER;
        dlock__etcd_txn t = {cmp, 4, &drop, 1, &get, 1};
        CHECK_RC(dlock__etcd_kv_txn(c, &t, in_ms(5000), &res), DLOCK_OK);
        CHECK(!res.succeeded);
        CHECK_INT(res.responses[0].type, ==, DLOCK__ETCD_OP_RANGE);
        CHECK_INT(res.responses[0].range.n_kvs, ==, 1);
        CHECK_INT(res.responses[0].range.kvs[0].value_len, ==, 0); /* keys only */
        CHECK_INT(res.responses[0].range.kvs[0].lease, ==, lease);
        dlock__etcd_txn_result_free(&res);
    }
    dlock__etcd_txn t = {all, 4, &drop, 1, &get, 1};
    CHECK_RC(dlock__etcd_kv_txn(c, &t, in_ms(5000), &res), DLOCK_OK);
    CHECK(res.succeeded);
    CHECK_INT(res.responses[0].type, ==, DLOCK__ETCD_OP_DELETE);
    CHECK_INT(res.responses[0].deleted, ==, 1);
    CHECK_INT(res.revision, ==, rev + 1);
    dlock__etcd_txn_result_free(&res);
    dlock__etcd_free(c);
}

static void test_mutex_ranking(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    int64_t la = grant(c, 30), lb = grant(c, 30), lc = grant(c, 30);
    mutex_try a, b, d;
    char pred[256];
    CHECK_RC(mutex_acquire(c, "q", la, &a), DLOCK_OK);
    CHECK_RC(mutex_acquire(c, "q", lb, &b), DLOCK_OK);
    put(c, "q0", "outside the prefix");
    put(c, "q", "nor this");
    CHECK_RC(mutex_acquire(c, "q", lc, &d), DLOCK_OK);
    CHECK(a.held && !b.held && !d.held);
    CHECK(strcmp(b.owner, a.key) == 0 && strcmp(d.owner, a.key) == 0);
    CHECK(a.my_rev < b.my_rev && b.my_rev < d.my_rev);

    /* each waiter's predecessor is the newest key older than its own */
    predecessor(c, "q", d.my_rev, pred, sizeof pred);
    CHECK(strcmp(pred, b.key) == 0);
    predecessor(c, "q", b.my_rev, pred, sizeof pred);
    CHECK(strcmp(pred, a.key) == 0);
    predecessor(c, "q", a.my_rev, pred, sizeof pred);
    CHECK(pred[0] == '\0');

    /* the owner leaves: b owns it, d's predecessor is still b */
    CHECK_INT(del(c, a.key), ==, 1);
    CHECK_RC(mutex_acquire(c, "q", lb, &b), DLOCK_OK);
    CHECK(b.held);
    CHECK_RC(mutex_acquire(c, "q", lc, &d), DLOCK_OK);
    CHECK(!d.held && strcmp(d.owner, b.key) == 0);
    /* a waiter in the middle leaves: the one after it waits for the one before */
    CHECK_RC(mutex_acquire(c, "q", la, &a), DLOCK_OK); /* a queues again, after d */
    CHECK(!a.held);
    CHECK_INT(del(c, d.key), ==, 1);
    predecessor(c, "q", a.my_rev, pred, sizeof pred);
    CHECK(strcmp(pred, b.key) == 0);
    dlock__etcd_free(c);
}

/* ================================================================ watch */

static void test_watch_delete(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    recorder r;
    recorder_init(&r);
    int64_t lease = grant(c, 30), other = grant(c, 30);
    mutex_try holder, waiter;
    char pred[256];
    CHECK_RC(mutex_acquire(c, "w", lease, &holder), DLOCK_OK);
    CHECK_RC(mutex_acquire(c, "w", other, &waiter), DLOCK_OK);
    CHECK(!waiter.held);
    int64_t rev = predecessor(c, "w", waiter.my_rev, pred, sizeof pred);
    CHECK(strcmp(pred, holder.key) == 0);

    /* as waitDeletes does: watch the predecessor from the read's revision */
    int64_t id = watch_key(c, &r, pred, rev, 1);
    put(c, pred, "a put is filtered out");
    int64_t del_rev = put(c, "unrelated", "x") + 1;
    CHECK_INT(del(c, holder.key), ==, 1);
    rec_note n;
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, &n) == 1, 5000);
    CHECK_INT(n.type, ==, DLOCK__ETCD_EV_DELETE);
    CHECK(strcmp(n.key, holder.key) == 0);
    CHECK_INT(n.mod_revision, ==, del_rev);
    CHECK_RC(mutex_acquire(c, "w", other, &waiter), DLOCK_OK);
    CHECK(waiter.held);

    /* a delete that happened before the watch was added is not missed */
    int64_t at = put(c, "gone-before", "x");
    CHECK_INT(del(c, "gone-before"), ==, 1);
    int64_t late = watch_key(c, &r, "gone-before", at + 1, 1);
    DT_WAIT_UNTIL(notes(&r, late, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    CHECK_INT(notes(&r, 0, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 0);
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.streams_opened, ==, 1);
    dlock__etcd_free(c);
}

/* Watches added while the stream is open join it: the create_request
 * lines are written into the open request body over time, and every event
 * reaches its own watch. */
static void test_watch_many_one_stream(void)
{
    enum { N = 8 };
    dlock__etcd_stats st;
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    recorder r;
    recorder_init(&r);
    int64_t ids[N];
    char key[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(key[i], sizeof key[i], "many/%d", i);
        put(c, key[i], "v");
    }
    for (int i = 0; i < N; i++) {
        ids[i] = watch_key(c, &r, key[i], 0, 0);
        /* each one confirmed before the next is added: they join one by one */
        DT_WAIT_UNTIL(created(c) == (uint64_t) i + 1, 5000);
    }
    /* deletes in reverse order, each seen by its own watch only */
    for (int i = N - 1; i >= 0; i--)
        CHECK_INT(del(c, key[i]), ==, 1);
    for (int i = 0; i < N; i++) {
        rec_note n = {0};
        DT_WAIT_UNTIL(notes(&r, ids[i], DLOCK__ETCD_WATCH_EVENT, &n) == 1, 5000);
        CHECK(strcmp(n.key, key[i]) == 0);
        CHECK_INT(n.type, ==, DLOCK__ETCD_EV_DELETE);
    }
    /* a canceled watch hears nothing more; the others still do. Its
     * cancel_request, written into the open body, is confirmed by etcd. */
    dlock__etcd_watch_cancel(c, ids[0]);
    DT_WAIT_UNTIL((dlock__etcd_get_stats(c, &st), st.cancels_confirmed == 1), 5000);
    int before = notes(&r, ids[0], DLOCK__ETCD_WATCH_EVENT, NULL);
    put(c, key[0], "after cancel");
    put(c, key[1], "v2");
    DT_WAIT_UNTIL(notes(&r, ids[1], DLOCK__ETCD_WATCH_EVENT, NULL) == 2, 5000);
    CHECK_INT(notes(&r, ids[0], DLOCK__ETCD_WATCH_EVENT, NULL), ==, before);
    /* a put is an event too when not filtered */
    rec_note n = {0};
    CHECK_INT(notes(&r, ids[1], DLOCK__ETCD_WATCH_EVENT, &n), ==, 2); /* n: the last */
    CHECK_INT(n.type, ==, DLOCK__ETCD_EV_PUT);

    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.streams_opened, ==, 1);
    CHECK_INT(st.watches_created, ==, N);
    CHECK_INT(st.watches, ==, N - 1);
    CHECK_INT(notes(&r, 0, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 0);
    dlock__etcd_free(c);
}

static void test_watch_compacted(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    recorder r;
    recorder_init(&r);
    int64_t first = put(c, "compacted/k", "1");
    put(c, "compacted/k", "2");
    int64_t last = put(c, "compacted/k", "3");
    CHECK_RC(dlock__etcd_compact(c, last, in_ms(5000)), DLOCK_OK);
    int64_t id = watch_key(c, &r, "compacted/k", first, 0);
    rec_note n;
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_CANCELED, &n) == 1, 5000);
    CHECK_INT(n.compact, ==, last);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL), ==, 0);
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.watches, ==, 0); /* a canceled watch is gone */
    /* the stream itself goes on: a new watch from a live revision works */
    int64_t ok = watch_key(c, &r, "compacted/k", last, 0);
    DT_WAIT_UNTIL(notes(&r, ok, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.streams_opened, ==, 1);
    dlock__etcd_free(c);
}

/* A callback may cancel its own watch and add others; cancel from another
 * thread waits out a callback in progress. */
typedef struct reentry {
    dlock__etcd *c;
    recorder rec;
    atomic_llong self, added;
} reentry;

static void reentrant(void *arg, const dlock__etcd_watch_note *n)
{
    reentry *re = arg;
    record(&re->rec, n);
    if (n->kind == DLOCK__ETCD_WATCH_EVENT && atomic_load(&re->added) == 0) {
        dlock__etcd_watch_spec spec = {.key = "reentry/next"};
        int64_t id = 0;
        if (dlock__etcd_watch_add(re->c, &spec, record, &re->rec, &id) == DLOCK_OK)
            atomic_store(&re->added, id);
        dlock__etcd_watch_cancel(re->c, n->watch);
    }
}

static void test_watch_reentrant(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    reentry re = {.c = client_for(&s)};
    recorder_init(&re.rec);
    dlock__etcd_watch_spec spec = {.key = "reentry/first"};
    int64_t id;
    CHECK_RC(dlock__etcd_watch_add(re.c, &spec, reentrant, &re, &id), DLOCK_OK);
    DT_WAIT_UNTIL(created(re.c) == 1, 5000);
    put(re.c, "reentry/first", "1");
    DT_WAIT_UNTIL(atomic_load(&re.added) != 0, 5000);
    DT_WAIT_UNTIL(created(re.c) == 2, 5000);
    put(re.c, "reentry/first", "2"); /* canceled: not heard */
    put(re.c, "reentry/next", "1");
    DT_WAIT_UNTIL(notes(&re.rec, atomic_load(&re.added), DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    CHECK_INT(notes(&re.rec, id, DLOCK__ETCD_WATCH_EVENT, NULL), ==, 1);
    dlock__etcd_free(re.c);
}

/* A watch "from now" given the revision its caller last read at: told
 * WATCH_LATE when etcd created it later than that (a change in between is
 * not delivered), and not told when nothing changed. */
static void test_watch_late(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    recorder r;
    recorder_init(&r);
    int64_t seen = put(c, "late/a", "1");
    dlock__etcd_watch_spec quiet = {.key = "late/a", .seen_revision = seen};
    int64_t on_time = 0, late = 0;
    CHECK_RC(dlock__etcd_watch_add(c, &quiet, record, &r, &on_time), DLOCK_OK);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    put(c, "late/a", "2"); /* after the create: an event, not a LATE */
    DT_WAIT_UNTIL(notes(&r, on_time, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    CHECK_INT(notes(&r, on_time, DLOCK__ETCD_WATCH_LATE, NULL), ==, 0);

    seen = put(c, "late/b", "1");
    put(c, "late/b", "2"); /* missed by a watch created from now */
    dlock__etcd_watch_spec missed = {.key = "late/b", .seen_revision = seen};
    CHECK_RC(dlock__etcd_watch_add(c, &missed, record, &r, &late), DLOCK_OK);
    rec_note n;
    DT_WAIT_UNTIL(notes(&r, late, DLOCK__ETCD_WATCH_LATE, &n) == 1, 5000);
    CHECK(n.revision > seen);
    CHECK_INT(notes(&r, late, DLOCK__ETCD_WATCH_EVENT, NULL), ==, 0);
    dlock__etcd_free(c);
}

/* ================================================================ faults */

typedef struct slow_call {
    dlock__etcd *c;
    int rc;
    char msg[512];
    atomic_int done;
} slow_call;

static void *range_in_thread(void *arg)
{
    slow_call *sc = arg;
    dlock__etcd_range r = {.key = "any"};
    dlock__etcd_range_result res;
    sc->rc = dlock__etcd_kv_range(sc->c, &r, in_ms(20000), &res);
    if (sc->rc == DLOCK_OK)
        dlock__etcd_range_result_free(&res);
    snprintf(sc->msg, sizeof sc->msg, "%s", dlock_errmsg());
    atomic_store(&sc->done, 1);
    return NULL;
}

/* Connections to port whose bytes wait unread in the server's receive
 * queue (a stopped server's requests). */
static int requests_queued(int port)
{
    char line[512];
    int n = 0;
    FILE *fp = fopen("/proc/self/net/tcp", "r");
    while (fp != NULL && fgets(line, sizeof line, fp) != NULL) {
        char local[64], queues[64];
        if (sscanf(line, "%*s %63s %*s %*s %63s", local, queues) != 2)
            continue;
        char *colon = strrchr(local, ':'), *rx = strchr(queues, ':');
        if (colon != NULL && rx != NULL && strtol(colon + 1, NULL, 16) == port &&
            strtoul(rx + 1, NULL, 16) > 0)
            n++;
    }
    if (fp != NULL)
        fclose(fp);
    return n;
}

static void test_server_killed(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    recorder r;
    recorder_init(&r);
    put(c, "killed/k", "v");
    int64_t id = watch_key(c, &r, "killed/k", 0, 1);
    DT_WAIT_UNTIL(created(c) == 1, 5000);

    /* hung server: no reply in time is EUNREACHABLE, never a conflict */
    kill(s.pid, SIGSTOP);
    CHECK(dt_wait_stopped(s.pid));
    dlock__etcd_range q = {.key = "killed/k"};
    dlock__etcd_range_result res;
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(300), &res), DLOCK_EUNREACHABLE);
    CHECK(dt_now_ms() - t0 < 2000);
    CHECK(strstr(dlock_errmsg(), "no reply") != NULL);

    /* killed with a request in flight: the request fails at once */
    int queued = requests_queued(s.port);
    slow_call sc = {.c = c};
    pthread_t th;
    pthread_create(&th, NULL, range_in_thread, &sc);
    DT_WAIT_UNTIL(requests_queued(s.port) > queued, 5000); /* sent, unread by etcd */
    etcd_kill(&s);
    DT_WAIT_UNTIL(atomic_load(&sc.done), 3000);
    pthread_join(th, NULL);
    CHECK_INT(sc.rc, ==, DLOCK_EUNREACHABLE);
    CHECK(strstr(sc.msg, s.endpoint) != NULL);
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(2000), &res), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "cannot connect") != NULL);
    rec_note n;
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, &n) == 1, 5000);
    CHECK_INT(n.code, ==, DLOCK_EUNREACHABLE);

    /* back on the same port with the same data: requests and the watch resume */
    etcd_spawn(&s);
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(5000), &res), DLOCK_OK);
    CHECK_INT(res.n_kvs, ==, 1);
    dlock__etcd_range_result_free(&res);
    DT_WAIT_UNTIL(created(c) == 2, 10000);
    CHECK_INT(del(c, "killed/k"), ==, 1);
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 1); /* told once per outage */
    dlock__etcd_free(c);
}

/* A loopback TCP proxy to a server, which can cut every connection and
 * refuse new ones while the server stays up for other clients. */
typedef struct proxy {
    int listen_fd, port, target_port;
    atomic_int up;  /* forwarding; when 0, new connections are closed at once */
    atomic_int cut; /* set by the test, cleared by the proxy once done */
    atomic_int stop;
    pthread_t thread;
} proxy;

#define MAX_PAIRS 32

static void *proxy_run(void *arg)
{
    proxy *px = arg;
    int pairs[MAX_PAIRS][2], np = 0;
    char buf[65536];

    while (!atomic_load(&px->stop)) {
        struct pollfd pfd[1 + 2 * MAX_PAIRS];
        if (atomic_load(&px->cut)) {
            for (int i = 0; i < np; i++) {
                close(pairs[i][0]);
                close(pairs[i][1]);
            }
            np = 0;
            atomic_store(&px->cut, 0);
        }
        pfd[0] = (struct pollfd){.fd = px->listen_fd, .events = POLLIN};
        for (int i = 0; i < np; i++) {
            pfd[1 + 2 * i] = (struct pollfd){.fd = pairs[i][0], .events = POLLIN};
            pfd[2 + 2 * i] = (struct pollfd){.fd = pairs[i][1], .events = POLLIN};
        }
        if (poll(pfd, (nfds_t) (1 + 2 * np), 10) <= 0)
            continue;
        /* Forward first, over the pairs just polled only: a pair accepted
         * below has no poll result yet, and a read on it would block (etcd
         * says nothing before the request, which waits on the other side). */
        for (int i = np - 1; i >= 0; i--) {
            for (int side = 0; side < 2; side++) {
                if (!(pfd[1 + 2 * i + side].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                ssize_t n = read(pairs[i][side], buf, sizeof buf);
                if (n <= 0 || send(pairs[i][1 - side], buf, (size_t) n, MSG_NOSIGNAL) != n) {
                    close(pairs[i][0]);
                    close(pairs[i][1]);
                    pairs[i][0] = pairs[np - 1][0];
                    pairs[i][1] = pairs[np - 1][1];
                    np--;
                    break;
                }
            }
        }
        if (pfd[0].revents & POLLIN) {
            int cfd = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            struct sockaddr_in a = {.sin_family = AF_INET,
                                    .sin_port = htons((uint16_t) px->target_port),
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            int ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (cfd >= 0 && atomic_load(&px->up) && np < MAX_PAIRS &&
                connect(ufd, (struct sockaddr *) &a, sizeof a) == 0) {
                pairs[np][0] = cfd;
                pairs[np][1] = ufd;
                np++;
            } else {
                if (cfd >= 0)
                    close(cfd);
                close(ufd);
            }
        }
    }
    for (int i = 0; i < np; i++) {
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
    return NULL;
}

static void proxy_start(proxy *px, int target_port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    memset(px, 0, sizeof *px);
    px->target_port = target_port;
    atomic_store(&px->up, 1);
    px->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(bind(px->listen_fd, (struct sockaddr *) &a, sizeof a) == 0);
    CHECK(listen(px->listen_fd, 16) == 0);
    CHECK(getsockname(px->listen_fd, (struct sockaddr *) &a, &len) == 0);
    px->port = ntohs(a.sin_port);
    pthread_create(&px->thread, NULL, proxy_run, px);
}

static void proxy_stop(proxy *px)
{
    atomic_store(&px->stop, 1);
    pthread_join(px->thread, NULL);
    close(px->listen_fd);
}

/* Events that happen while the stream is down are delivered once it is
 * back, exactly once: the watch is re-created from the revision after the
 * last event it delivered. etcd stays up; only our client is cut off. */
static void test_watch_resumes_without_loss(void)
{
    etcd_srv s;
    proxy px;
    char via[32];
    etcd_start(&s, NULL);
    proxy_start(&px, s.port);
    snprintf(via, sizeof via, "127.0.0.1:%d", px.port);
    dlock__etcd *c = client_cfg(via, NULL, NULL), *other = client_for(&s);
    recorder r;
    recorder_init(&r);
    put(other, "resume/a", "1");
    int64_t id = watch_key(c, &r, "resume/a", 0, 0);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    int64_t first = put(other, "resume/a", "2");
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);

    atomic_store(&px.up, 0);
    atomic_store(&px.cut, 1);
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, NULL) == 1, 5000);
    int64_t del_rev = put(other, "resume/b", "x") + 1;
    CHECK_INT(del(other, "resume/a"), ==, 1);
    int64_t again = put(other, "resume/a", "3");
    CHECK_INT(created(c), ==, 1); /* still cut off */

    atomic_store(&px.up, 1);
    int64_t until = dt_now_ms() + 10000;
    while (notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL) < 3 && dt_now_ms() < until)
        dt_sleep_ms(5);
    /* on failure, say which part did not come */
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    if (st.watches_created != 2)
        fprintf(stderr, "streams opened %llu, watches created %llu\n",
                (unsigned long long) st.streams_opened, (unsigned long long) st.watches_created);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 1);
    CHECK_INT(created(c), ==, 2);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL), ==, 3);
    pthread_mutex_lock(&r.mu);
    int64_t seen[3];
    int k = 0;
    for (int i = 0; i < r.n && k < 3; i++) {
        if (r.notes[i].kind == DLOCK__ETCD_WATCH_EVENT)
            seen[k++] = r.notes[i].mod_revision;
    }
    pthread_mutex_unlock(&r.mu);
    CHECK_INT(seen[0], ==, first);
    CHECK_INT(seen[1], ==, del_rev);
    CHECK_INT(seen[2], ==, again);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 1);
    dlock__etcd_free(other);
    dlock__etcd_free(c);
    proxy_stop(&px);
}

/* A member that goes silent with the stream open (paused, or cut off
 * behind a middlebox): after a second with nothing received the stream asks
 * for progress, and when neither that nor a status request is answered
 * within the request timeout it drops the member and goes on at the next
 * endpoint, from the revision it had reached, so the event that came
 * meanwhile is delivered. (Before, the stream sat on the silent member for
 * good.) */
static void test_watch_silent_member(void)
{
    etcd_srv s;
    dt_proxy p;
    char eps[64];
    etcd_start(&s, NULL);
    dt_proxy_start(&p, s.port, 1);
    snprintf(eps, sizeof eps, "127.0.0.1:%d,%s", p.ports[0], s.endpoint);
    dlock__etcd *c = client_timed(eps, 500, 800), *other = client_for(&s);
    recorder r;
    recorder_init(&r);
    int64_t id = watch_key(c, &r, "silent/a", 0, 0);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    CHECK_INT(dt_proxy_connections(&p, 0), ==, 1); /* the stream is on the first member */
    /* idle, it is kept: progress requests are answered */
    dt_sleep_ms(2500); /* a span of idle time, not a wait for a condition */
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 0);

    dt_proxy_set(&p, 0, DT_BLACKHOLE);
    int64_t t0 = dt_now_ms();
    int64_t rev = put(other, "silent/a", "1");
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    int64_t took = dt_now_ms() - t0;
    /* at most: a second of silence, a progress and a status request's
     * timeouts, a reconnection */
    CHECK_INT(took, <=, 1000 + 800 + 800 + 700);
    rec_note n;
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, &n), ==, 1);
    CHECK_INT(n.mod_revision, ==, rev);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, &n), ==, 1);
    if (strstr(n.reason, "answered neither a progress request") == NULL)
        dt_fail(__FILE__, __LINE__, "broken for another reason: %s", n.reason);
    dlock__etcd_free(c);
    dlock__etcd_free(other);
    dt_proxy_stop(&p);
}

/* A member cut off from the quorum (both others paused) still answers its
 * stream's progress requests from a store that no longer moves. The stream
 * asks for a leader, so the member ends it within three election timeouts
 * (the gateway closes it), and the client moves on. (Before, it stayed.) */
static void test_watch_no_leader(void)
{
    dt_ensemble e;
    char eps[128];
    dt_ensemble_start(&e, "etcd", 3, NULL);
    snprintf(eps, sizeof eps, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", e.members[0].port,
             e.members[1].port, e.members[2].port);
    dlock__etcd *c = client_timed(eps, 500, 1000);
    recorder r;
    recorder_init(&r);
    int64_t id = watch_key(c, &r, "noleader/a", 0, 0);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    CHECK_INT(dlock__etcd_endpoint(c), ==, 0);
    dt_ensemble_pause(&e, 1);
    dt_ensemble_pause(&e, 2);
    /* election timeout 500 ms: no leader after one or two, streams ended
     * after three more, checked every election timeout */
    rec_note n;
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, &n) >= 1, 8000);
    if (strstr(n.reason, "no leader") == NULL && strstr(n.reason, "closed the stream") == NULL)
        dt_fail(__FILE__, __LINE__, "broken for another reason: %s", n.reason);
    CHECK_INT(dlock__etcd_endpoint(c), !=, 0); /* moved on */
    dt_ensemble_resume(&e, 1);
    dt_ensemble_resume(&e, 2);
    dlock__etcd_free(c);
    dt_ensemble_stop(&e);
}

static void test_endpoints_failover(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    char list[128];
    int dead = dt_free_port();
    snprintf(list, sizeof list, "127.0.0.1:%d,%s", dead, s.endpoint);
    dlock__etcd *c = client_cfg(list, NULL, NULL);
    CHECK(strstr(dlock__etcd_label(c), list) != NULL);
    put(c, "failover/k", "v"); /* the dead one refuses: the next one answers */
    put(c, "failover/k", "w");
    recorder r;
    recorder_init(&r);
    int64_t id = watch_key(c, &r, "failover/k", 0, 0);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    put(c, "failover/k", "x");
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    dlock__etcd_free(c);

    /* nobody there at all */
    snprintf(list, sizeof list, "127.0.0.1:%d", dead);
    c = client_cfg(list, NULL, NULL);
    dlock__etcd_range q = {.key = "k"};
    dlock__etcd_range_result res;
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(2000), &res), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "cannot connect") != NULL);
    dlock__etcd_free(c);

    const char *bad[] = {"",     "h:0",   "h:70000",  "h:x",       "h:1:2",
                         "[::1", "a b:1", "h:1,,h:2", "http://h:1"};
    dlock__etcd_config cfg = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg.endpoints = bad[i];
        CHECK_RC(dlock__etcd_new(&cfg, &c), DLOCK_EINVAL);
    }
    cfg.endpoints = "[::1]:2379,localhost";
    CHECK_RC(dlock__etcd_new(&cfg, &c), DLOCK_OK);
    CHECK(strcmp(dlock__etcd_label(c), "etcd://[::1]:2379,localhost:2379") == 0);
    dlock__etcd_free(c);
}

static void test_auth(void)
{
    etcd_srv s;
    char out[512];
    etcd_start(&s, NULL);
    CHECK_INT(sh(out, sizeof out, "etcdctl --endpoints %s user add root:s3cret", s.endpoint), ==,
              0);
    CHECK_INT(sh(out, sizeof out, "etcdctl --endpoints %s auth enable", s.endpoint), ==, 0);

    dlock__etcd *c = client_cfg(s.endpoint, "root", "wrong-pass");
    dlock__etcd_range q = {.key = "auth/k"};
    dlock__etcd_range_result res;
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(5000), &res), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "authentication failed") != NULL);
    CHECK(strstr(dlock_errmsg(), "wrong-pass") == NULL);
    CHECK(strstr(dlock__etcd_label(c), "root:***@") != NULL);
    CHECK(strstr(dlock__etcd_label(c), "wrong-pass") == NULL);
    dlock__etcd_free(c);

    c = client_for(&s); /* no user at all */
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(5000), &res), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "requires authentication") != NULL);
    dlock__etcd_free(c);

    c = client_cfg(s.endpoint, "root", "s3cret");
    recorder r;
    recorder_init(&r);
    int64_t id = watch_key(c, &r, "auth/k", 0, 0);
    int64_t lease = grant(c, 30);
    mutex_try m;
    CHECK_RC(mutex_acquire(c, "auth", lease, &m), DLOCK_OK);
    CHECK(m.held);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    put(c, "auth/k", "v");
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.authentications, ==, 1); /* one token for every request and the stream */
    /* Setting a user's password (here to the same one) drops its tokens,
     * as expiry would ("invalid auth token"): the next request
     * authenticates again and succeeds. */
    CHECK_INT(sh(out, sizeof out,
                 "echo s3cret | etcdctl --endpoints %s --user root:s3cret user passwd root "
                 "--interactive=false",
                 s.endpoint),
              ==, 0);
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(5000), &res), DLOCK_OK);
    dlock__etcd_range_result_free(&res);
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.authentications, ==, 2);
    put(c, "auth/k", "w");
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL) == 2, 5000);
    /* The stream's token was dropped too: etcd refuses the next create on
     * it ("permission denied"), and the stream is reopened once with the
     * new token instead of the watch being given up. */
    int64_t late = watch_key(c, &r, "auth/j", 0, 0);
    rec_note n;
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, &n) == 1, 5000);
    CHECK_INT(n.code, ==, DLOCK_ESERVER);
    DT_WAIT_UNTIL(created(c) == 4, 5000); /* auth/k and auth/j on the new stream */
    put(c, "auth/j", "v");
    DT_WAIT_UNTIL(notes(&r, late, DLOCK__ETCD_WATCH_EVENT, NULL) == 1, 5000);
    CHECK_INT(notes(&r, 0, DLOCK__ETCD_WATCH_CANCELED, NULL), ==, 0);
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.streams_opened, ==, 2);
    CHECK_INT(st.authentications, ==, 2); /* the request already got the new token */
    dlock__etcd_free(c);

    /* A user without read permission: the create is refused again on the
     * reopened stream, and then the watch is given up (once, no loop). */
    CHECK_INT(sh(out, sizeof out,
                 "etcdctl --endpoints %s --user root:s3cret user add limited:pw && "
                 "etcdctl --endpoints %s --user root:s3cret role add nothing && "
                 "etcdctl --endpoints %s --user root:s3cret user grant-role limited nothing",
                 s.endpoint, s.endpoint, s.endpoint),
              ==, 0);
    c = client_cfg(s.endpoint, "limited", "pw");
    recorder_init(&r);
    id = watch_key(c, &r, "secret", 0, 0);
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_CANCELED, NULL) == 1, 5000);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 1);
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.streams_opened, ==, 2);
    CHECK_INT(st.watches, ==, 0);
    CHECK_RC(dlock__etcd_kv_range(c, &q, in_ms(5000), &res), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "permission denied") != NULL);
    dlock__etcd_free(c);

    /* a user given to a server without auth is fine (as etcd's Go client) */
    etcd_srv plain;
    etcd_start(&plain, NULL);
    c = client_cfg(plain.endpoint, "root", "whatever");
    put(c, "k", "v");
    put(c, "k", "w");
    dlock__etcd_free(c);
}

/* ================================================================ fake server */

/* A loopback HTTP server thread answering every request with one canned
 * reply (or none), for replies etcd never sends. */
#define FAKE_CONNS 16

typedef struct fake {
    int fd, port;
    const char *reply; /* NULL: close without answering; "" : never answer */
    size_t reply_len;
    size_t pad; /* bytes of spaces sent after reply */
    /* when set, requests for this path get this reply instead, and with
     * path_hold 1 the connection then stays open until the client goes
     * (path_hold > 1: for that many ms) */
    const char *path, *path_reply;
    int path_hold;
    pthread_t thread;
    pthread_t conns[FAKE_CONNS]; /* a thread per connection */
    int n_conns;
    atomic_int stop;
    atomic_int served; /* requests read */
} fake;

typedef struct fake_conn {
    fake *f;
    int fd;
} fake_conn;

/* Reads until the client goes or the fake stops. */
static void fake_hold(fake *f, int cfd)
{
    char buf[8192];
    for (;;) {
        ssize_t n = read(cfd, buf, sizeof buf);
        if (n == 0 || atomic_load(&f->stop) || (n < 0 && errno != EAGAIN))
            break;
    }
}

static void *fake_serve(void *arg)
{
    fake_conn *fc = arg;
    fake *f = fc->f;
    int cfd = fc->fd;
    char buf[8192];
    size_t got = 0;
    char *end = NULL;
    free(fc);
    /* read the header and a Content-Length body (not the watch's GiB) */
    while (end == NULL && got < sizeof buf - 1) {
        ssize_t n = read(cfd, buf + got, sizeof buf - 1 - got);
        if (n <= 0 && !(n < 0 && errno == EAGAIN && !atomic_load(&f->stop)))
            break;
        if (n <= 0)
            continue;
        got += (size_t) n;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    buf[got] = '\0';
    atomic_fetch_add(&f->served, 1);
    const char *reply = f->reply;
    int hold = 0;
    if (f->path != NULL && strstr(buf, f->path) != NULL) {
        reply = f->path_reply;
        hold = f->path_hold;
    }
    if (reply != NULL && reply[0] == '\0') {
        fake_hold(f, cfd);
    } else if (reply != NULL) {
        if (send(cfd, reply, reply == f->reply ? f->reply_len : strlen(reply), MSG_NOSIGNAL) < 0)
            perror("fake write");
        char spaces[4096];
        memset(spaces, ' ', sizeof spaces);
        for (size_t sent = 0; sent < f->pad; sent += sizeof spaces) {
            if (send(cfd, spaces, sizeof spaces, MSG_NOSIGNAL) <
                0) /* the client may have hung up */
                break;
        }
        if (hold == 1)
            fake_hold(f, cfd);
        else if (hold > 1)
            dt_sleep_ms(hold);
    }
    close(cfd);
    return NULL;
}

static void *fake_run(void *arg)
{
    fake *f = arg;
    while (!atomic_load(&f->stop)) {
        int cfd = accept4(f->fd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            continue;
        struct timeval tv = {0, 100000}; /* so that a read notices the stop */
        setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        fake_conn *fc = malloc(sizeof *fc);
        if (f->n_conns == FAKE_CONNS || fc == NULL) {
            free(fc);
            close(cfd);
            continue;
        }
        fc->f = f;
        fc->fd = cfd;
        pthread_create(&f->conns[f->n_conns++], NULL, fake_serve, fc);
    }
    for (int i = 0; i < f->n_conns; i++)
        pthread_join(f->conns[i], NULL);
    return NULL;
}

/* A fake server answering every request with reply (and pad spaces), or
 * those whose request head holds path (if not NULL) with path_reply, then
 * (path_hold) keeping their connection open until the client goes. */
static void fake_start(fake *f, const char *reply, size_t pad, const char *path,
                       const char *path_reply, int path_hold)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    memset(f, 0, sizeof *f);
    f->reply = reply;
    f->reply_len = reply != NULL ? strlen(reply) : 0;
    f->pad = pad;
    f->path = path;
    f->path_reply = path_reply;
    f->path_hold = path_hold;
    f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(f->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    CHECK(bind(f->fd, (struct sockaddr *) &a, sizeof a) == 0);
    CHECK(listen(f->fd, 16) == 0);
    CHECK(getsockname(f->fd, (struct sockaddr *) &a, &len) == 0);
    f->port = ntohs(a.sin_port);
    struct timeval tv = {0, 100000};
    setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    pthread_create(&f->thread, NULL, fake_run, f);
}

static void fake_stop(fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    close(f->fd);
}

static void test_garbage_replies(void)
{
    /* status line NULL: reply is sent as it is; else a Content-Length is added */
    static const struct {
        const char *status;
        const char *reply;
        size_t pad;
        int want;
        const char *says;
    } cases[] = {
        /* another service's port: as unreachable as no etcd there */
        {NULL, "this is not http\r\n\r\n", 0, DLOCK_EUNREACHABLE,
         "answered, but not as etcd (not an HTTP/1.1 server"},
        {"200 OK", "hello", 0, DLOCK_EPROTO, "not JSON"},
        {"200 OK", "{\"header\":{\"revision\":\"-3\"}}", 0, DLOCK_EPROTO, "revision"},
        {"200 OK", "{\"header\":{\"revision\":\"12a\"}}", 0, DLOCK_EPROTO, "revision"},
        {"200 OK", "{\"unrelated\":1}", 0, DLOCK_EPROTO, "header"},
        {"200 OK", "{\"header\":{}}{\"header\":{}}", 0, DLOCK_EPROTO, "after"},
        {NULL, "HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n{", 8388608, DLOCK_EPROTO,
         "larger than"},
        {NULL, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n", 2 << 20,
         DLOCK_EPROTO, "larger than"},
        {"500 Oops", "oops", 0, DLOCK_EPROTO, "HTTP 500"},
        /* no gRPC code: not etcd's error shape */
        {"404 Not Found", "{\"error\":\"etcdserver: requested lease not found\"}", 0, DLOCK_EPROTO,
         "HTTP 404"},
        {"503 Service Unavailable",
         "{\"error\":\"etcdserver: no leader\",\"message\":\"etcdserver: no leader\",\"code\":14}",
         0, DLOCK_EUNREACHABLE, "no leader"},
        {"400 Bad Request",
         "{\"error\":\"x\",\"message\":\"etcdserver: key is not provided\","
         "\"code\":3}",
         0, DLOCK_EINVAL, "key is not provided"},
        {NULL, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"header\":", 0, DLOCK_EUNREACHABLE,
         "broke"}, /* cut short */
        /* closed without a reply, never an answer before: another service */
        {NULL, NULL, 0, DLOCK_EUNREACHABLE, "answered, but not as etcd (the connection broke"},
        {NULL, "", 0, DLOCK_EUNREACHABLE, "no reply"}, /* never answers */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake f;
        char ep[32], reply[512];
        const char *raw = cases[i].reply;
        if (cases[i].status != NULL) {
            snprintf(reply, sizeof reply,
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\n\r\n%s",
                     cases[i].status, strlen(cases[i].reply), cases[i].reply);
            raw = reply;
        }
        fake_start(&f, raw, cases[i].pad, NULL, NULL, 0);
        snprintf(ep, sizeof ep, "127.0.0.1:%d", f.port);
        dlock__etcd_config cfg = {.endpoints = ep, .max_reply_bytes = 1 << 20};
        dlock__etcd *c;
        CHECK_RC(dlock__etcd_new(&cfg, &c), DLOCK_OK);
        dlock__etcd_range q = {.key = "k"};
        dlock__etcd_range_result res;
        int rc = dlock__etcd_kv_range(c, &q, in_ms(500), &res);
        if (rc != cases[i].want || strstr(dlock_errmsg(), cases[i].says) == NULL)
            dt_fail(__FILE__, __LINE__, "case %zu: got %d (%s), want %d saying \"%s\"", i, rc,
                    dlock_errmsg(), cases[i].want, cases[i].says);
        dlock__etcd_free(c);
        fake_stop(&f);
    }

    /* a watch stream that answers garbage is reported broken, as EPROTO */
    fake f;
    char ep[32];
    fake_start(&f, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nnope!\n\r\n", 0, NULL,
               NULL, 0);
    snprintf(ep, sizeof ep, "127.0.0.1:%d", f.port);
    dlock__etcd *c = client_cfg(ep, NULL, NULL);
    recorder r;
    recorder_init(&r);
    rec_note n;
    int64_t id = watch_key(c, &r, "k", 5, 1);
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, &n) == 1, 5000);
    CHECK_INT(n.code, ==, DLOCK_EPROTO);
    dlock__etcd_free(c);
    fake_stop(&f);
}

/* An HTTP/1.1 reply with a JSON body. */
static void http_reply(char *out, size_t size, const char *json)
{
    snprintf(out, size,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(json), json);
}

/* A leader paused or cut off, and not yet told of the next term, renews
 * leases in its own memory (etcd 3.4): its replies carry its old raft term.
 * Here a fake member plays it (term 1, every lease alive for 30 s) beside a
 * real one at a later term. The client does not believe it: the keepalive
 * and the TTL query go on to the real member; with no other member, they
 * fail as unreachable, never as renewed. A lease said gone is believed.
 * And a cluster made anew (wiped: its terms start again) is followed from
 * its first grant. */
static void test_stale_term_not_believed(void)
{
    etcd_srv s;
    fake f;
    char ka[512], ttl[512], eps[64];
    etcd_start(&s, NULL);
    etcd_kill(&s); /* started again: a later term than the fake's */
    etcd_spawn(&s);
    http_reply(ka, sizeof ka,
               "{\"result\":{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":"
               "\"5\",\"raft_term\":\"1\"},\"ID\":\"7\",\"TTL\":\"30\"}}");
    http_reply(ttl, sizeof ttl,
               "{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":\"5\","
               "\"raft_term\":\"1\"},\"ID\":\"7\",\"TTL\":\"30\",\"grantedTTL\":\"30\"}");
    fake_start(&f, ka, 0, "/v3/lease/timetolive", ttl, 0);
    snprintf(eps, sizeof eps, "%s,127.0.0.1:%d", s.endpoint, f.port);
    dlock__etcd *c = client_cfg(eps, NULL, NULL);
    dlock__etcd_lease l;
    CHECK_RC(dlock__etcd_lease_grant(c, 10, 0, in_ms(5000), &l), DLOCK_OK);
    if (l.raft_term <= 1)
        dt_fail(__FILE__, __LINE__, "etcd restarted at raft term %lld: the fake's 1 is not behind",
                (long long) l.raft_term);
    int64_t id = l.id, term = l.raft_term;

    /* the fake answers first: not believed, the real member renews */
    dlock__etcd_endpoint_failed(c, 0);
    CHECK_RC(dlock__etcd_lease_keepalive(c, id, in_ms(5000), &l), DLOCK_OK);
    CHECK_INT(atomic_load(&f.served), ==, 1);
    CHECK_INT(l.ttl, <=, 10);
    CHECK_INT(l.raft_term, ==, term);
    dlock__etcd_endpoint_failed(c, 0);
    dlock__etcd_lease_ttl t;
    CHECK_RC(dlock__etcd_lease_timetolive(c, id, 0, in_ms(5000), &t), DLOCK_OK);
    CHECK_INT(atomic_load(&f.served), ==, 2);
    CHECK_INT(t.granted_ttl, ==, 10);
    dlock__etcd_lease_ttl_free(&t);

    /* the real member gone: nobody left to believe */
    etcd_kill(&s);
    dlock__etcd_endpoint_failed(c, 0);
    CHECK_RC(dlock__etcd_lease_keepalive(c, id, in_ms(5000), &l), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "not believed") != NULL);
    CHECK_RC(dlock__etcd_lease_timetolive(c, id, 0, in_ms(5000), &t), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "not believed") != NULL);
    dlock__etcd_free(c);
    fake_stop(&f);

    /* The cluster made anew: its terms start again. A client that saw the
     * old one's later term believes the new one's "lease not found" (a
     * loss is believed from any term), and follows the new cluster from its
     * first grant on. */
    etcd_spawn(&s);
    c = client_for(&s);
    id = grant(c, 10);
    etcd_kill(&s);
    CHECK_INT(sh(NULL, 0, "rm -rf %s/data", s.dir), ==, 0);
    etcd_spawn(&s);
    CHECK_RC(dlock__etcd_lease_keepalive(c, id, in_ms(5000), &l), DLOCK_ELOST);
    CHECK_RC(dlock__etcd_lease_grant(c, 10, 0, in_ms(5000), &l), DLOCK_OK);
    if (l.raft_term >= term)
        dt_fail(__FILE__, __LINE__, "the wiped etcd is at raft term %lld, not below %lld",
                (long long) l.raft_term, (long long) term);
    CHECK_RC(dlock__etcd_lease_keepalive(c, l.id, in_ms(5000), &l), DLOCK_OK);
    CHECK_INT(l.ttl, ==, 10);
    dlock__etcd_free(c);
}

/* A member that serves but keeps its progress to itself (later etcd
 * releases answer a progress request only while every watch of the stream
 * is synced and not ahead of the store): its status request is answered, so
 * the stream stays on it, and asks for progress less and less often. */
static void test_watch_quiet_member_kept(void)
{
    fake f;
    char ep[32], status[256];
    http_reply(status, sizeof status, "{\"header\":{\"revision\":\"5\",\"raft_term\":\"2\"}}");
    /* the watch: a header, the create confirmed, then silence */
    static const char watch[] =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        "45\r\n{\"result\":{\"header\":{\"revision\":\"5\"},\"watch_id\":\"1\",\"created\":true}}"
        "\n\r\n";
    fake_start(&f, status, 0, "/v3/watch", watch, 1);
    snprintf(ep, sizeof ep, "127.0.0.1:%d", f.port);
    dlock__etcd *c = client_timed(ep, 500, 500);
    recorder r;
    recorder_init(&r);
    int64_t id = watch_key(c, &r, "quiet/a", 6, 1);
    CHECK_INT(id, ==, 1); /* the id the fake confirms */
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    /* a first progress request (after 1 s) and its status request (0.5 s
     * later), then a second after 2 s more and its status */
    DT_WAIT_UNTIL(atomic_load(&f.served) >= 3, 6000);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_BROKEN, NULL), ==, 0);
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    CHECK_INT(st.streams_opened, ==, 1);
    dlock__etcd_free(c);
    fake_stop(&f);
}

/* A member that takes the watch stream (200, the watch created) and ends it
 * soon after, time and again, as one without a leader does ("no leader"
 * after three election timeouts): the stream is opened again after a
 * pause that grows (jittered), not every 50 ms. (Before, its 200 reset the
 * pause, so a flapping member was reopened at the floor.) */
static void test_watch_reopen_backs_off(void)
{
    enum { WATCH_MS = 3000, MAX_OPENS = 10 };
    fake f;
    char ep[32];
    static const char watch[] =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        "45\r\n{\"result\":{\"header\":{\"revision\":\"5\"},\"watch_id\":\"1\",\"created\":true}}"
        "\n\r\n";
    fake_start(&f, NULL, 0, "/v3/watch", watch, 100); /* ended 100 ms after */
    snprintf(ep, sizeof ep, "127.0.0.1:%d", f.port);
    dlock__etcd *c = client_timed(ep, 500, 500);
    recorder r;
    recorder_init(&r);
    watch_key(c, &r, "flap/a", 6, 1);
    dt_sleep_ms(WATCH_MS); /* the member flaps meanwhile */
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    printf("a flapping member: the watch stream opened %llu times in %d ms\n",
           (unsigned long long) st.streams_opened, WATCH_MS);
    CHECK(st.streams_opened >= 3); /* it did flap */
    CHECK_INT(st.streams_opened, <=, MAX_OPENS);
    dlock__etcd_free(c);
    fake_stop(&f);
}

/* ================================================================ exec */

/* Inodes of the TCP connections to port (IPv4 and IPv6), from /proc. */
static int connections_to(int port, unsigned long *inodes, int max)
{
    const char *files[] = {"/proc/self/net/tcp", "/proc/self/net/tcp6"};
    char line[512];
    int n = 0;
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (fp == NULL)
            continue;
        while (fgets(line, sizeof line, fp) != NULL && n < max) {
            char local[64], remote[64];
            unsigned long inode;
            /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
            if (sscanf(line, "%*s %63s %63s %*s %*s %*s %*s %*s %*s %lu", local, remote, &inode) !=
                3)
                continue;
            char *colon = strrchr(remote, ':');
            if (colon != NULL && strtol(colon + 1, NULL, 16) == port && inode != 0)
                inodes[n++] = inode;
        }
        fclose(fp);
    }
    return n;
}

static int listed(unsigned long inode, const unsigned long *inodes, int n)
{
    for (int i = 0; i < n; i++) {
        if (inodes[i] == inode)
            return 1;
    }
    return 0;
}

/* Sockets of ours connected to the server; all must be close-on-exec. */
static int own_connections(const unsigned long *inodes, int n)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char path[300], target[64];
    int found = 0;
    while ((e = readdir(d)) != NULL) {
        unsigned long inode;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) == 1 && listed(inode, inodes, n)) {
            found++;
            int flags = fcntl(atoi(e->d_name), F_GETFD);
            if (!(flags & FD_CLOEXEC))
                dt_fail(__FILE__, __LINE__, "fd %s (a connection to etcd) is not close-on-exec",
                        e->d_name);
        }
    }
    closedir(d);
    return found;
}

/* A command run under a lock (fork + exec) inherits none of the client's
 * sockets: the request pool's and the watch stream's connections are
 * opened with SOCK_CLOEXEC, and libcurl 7.88's own wakeup socketpairs (one
 * per multi handle, and one inside each easy handle: curl issue #13618,
 * fixed in 8.8) are made close-on-exec as they are created. */
static void test_cloexec(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    recorder r;
    recorder_init(&r);
    watch_key(c, &r, "exec/k", 0, 0);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    put(c, "exec/k", "v"); /* a kept-alive request connection too */

    unsigned long inodes[256];
    int n = connections_to(s.port, inodes, 256);
    CHECK_INT(own_connections(inodes, n), ==, 2); /* the pool's one and the stream */
    char out[8192];
    CHECK_INT(sh(out, sizeof out, "for f in /proc/$$/fd/*; do readlink $f || true; done"), ==, 0);
    CHECK(strstr(out, "socket:[") == NULL);
    dlock__etcd_free(c);
}

/* ================================================================ interop */

static pid_t spawn(const char *const *argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        execvp(argv[0], (char *const *) argv);
        _exit(127);
    }
    return pid;
}

/* Our key held: `etcdctl lock NAME -- true` waits behind it, runs once we
 * delete it, and leaves nothing behind. */
static void test_interop_etcdctl_waits(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    int64_t lease = grant(c, 30);
    mutex_try m;
    CHECK_RC(mutex_acquire(c, "shared", lease, &m), DLOCK_OK);
    CHECK(m.held);
    /* the command records the revision at which etcdctl got the lock */
    char file[200], script[300], text[64] = "";
    snprintf(file, sizeof file, "%s/lock_rev", s.dir);
    snprintf(script, sizeof script, "echo $ETCD_LOCK_REV > %s", file);
    const char *argv[] = {"etcdctl", "--endpoints", s.endpoint, "lock", "shared",
                          "--",      "sh",          "-c",       script, NULL};
    pid_t pid = spawn(argv);
    DT_WAIT_UNTIL(count_prefix(c, "shared/") == 2, 10000); /* it queued behind us */
    mutex_try again;
    CHECK_RC(mutex_acquire(c, "shared", lease, &again), DLOCK_OK);
    CHECK(again.held);
    int64_t released = put(c, "unrelated", "x") + 1;
    CHECK_INT(del(c, m.key), ==, 1);
    int status;
    DT_WAIT_UNTIL(waitpid(pid, &status, WNOHANG) == pid, 10000);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* it ran its command only after our delete */
    FILE *fp = fopen(file, "r");
    CHECK(fp != NULL && fgets(text, sizeof text, fp) != NULL);
    fclose(fp);
    CHECK_INT(strtoll(text, NULL, 10), >=, released);
    CHECK_INT(count_prefix(c, "shared/"), ==, 0);
    dlock__etcd_free(c);
}

/* `etcdctl lock NAME` holding: our txn sees itself second, waits for the
 * predecessor's delete on the watch stream, then owns the lock. */
static void test_interop_etcdctl_holds(void)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd *c = client_for(&s);
    const char *argv[] = {"etcdctl", "--endpoints", s.endpoint, "lock", "shared", NULL};
    pid_t pid = spawn(argv);
    DT_WAIT_UNTIL(count_prefix(c, "shared/") == 1, 10000);
    int64_t lease = grant(c, 30);
    mutex_try m;
    CHECK_RC(mutex_acquire(c, "shared", lease, &m), DLOCK_OK);
    CHECK(m.created && !m.held);
    CHECK(m.owner[0] != '\0' && strcmp(m.owner, m.key) != 0);
    char pred[256];
    int64_t rev = predecessor(c, "shared", m.my_rev, pred, sizeof pred);
    CHECK(strcmp(pred, m.owner) == 0);
    recorder r;
    recorder_init(&r);
    int64_t id = watch_key(c, &r, pred, rev, 1);
    DT_WAIT_UNTIL(created(c) == 1, 5000);
    CHECK_INT(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, NULL), ==, 0);
    kill(pid, SIGTERM); /* etcdctl unlocks on SIGTERM */
    int status;
    waitpid(pid, &status, 0);
    rec_note n;
    DT_WAIT_UNTIL(notes(&r, id, DLOCK__ETCD_WATCH_EVENT, &n) == 1, 5000);
    CHECK_INT(n.type, ==, DLOCK__ETCD_EV_DELETE);
    CHECK(strcmp(n.key, pred) == 0);
    CHECK_RC(mutex_acquire(c, "shared", lease, &m), DLOCK_OK);
    CHECK(m.held);
    dlock__etcd_free(c);
}

/* ================================================================ threads */

typedef struct cycler {
    dlock__etcd *c;
    int index, cycles, failures;
    int64_t lease;
    char msg[256];
} cycler;

static void *cycle_thread(void *arg)
{
    cycler *t = arg;
    char name[32];
    snprintf(name, sizeof name, "par/%d", t->index);
    for (int i = 0; i < t->cycles; i++) {
        mutex_try m;
        if (mutex_acquire(t->c, name, t->lease, &m) != DLOCK_OK || !m.held) {
            t->failures++;
            snprintf(t->msg, sizeof t->msg, "%s", dlock_errmsg());
            continue;
        }
        dlock__etcd_delete d = {.key = m.key};
        int64_t deleted = 0;
        if (dlock__etcd_kv_delete(t->c, &d, in_ms(10000), NULL, &deleted) != DLOCK_OK ||
            deleted != 1)
            t->failures++;
    }
    return NULL;
}

static void test_threads_share_client(void)
{
    enum { THREADS = 50, CYCLES = 10, POOL = 8 };
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd_config cfg = {.endpoints = NULL, .max_connections = POOL};
    cfg.endpoints = s.endpoint;
    dlock__etcd *c;
    CHECK_RC(dlock__etcd_new(&cfg, &c), DLOCK_OK);
    int64_t lease = grant(c, 60);
    cycler t[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        t[i] = (cycler){.c = c, .index = i, .cycles = CYCLES, .lease = lease};
        pthread_create(&th[i], NULL, cycle_thread, &t[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        if (t[i].failures != 0)
            dt_fail(__FILE__, __LINE__, "thread %d: %d failures (%s)", i, t[i].failures, t[i].msg);
    }
    dlock__etcd_stats st;
    dlock__etcd_get_stats(c, &st);
    CHECK(st.connections_made >= 2 && st.connections_made <= POOL);
    CHECK_INT(count_prefix(c, "par/"), ==, 0);
    dlock__etcd_free(c);
}

/* ================================================================ measure */

static double proposals(const char *endpoint)
{
    char url[96], cmd[200], out[8192];
    snprintf(url, sizeof url, "http://%s/metrics", endpoint);
    snprintf(cmd, sizeof cmd, "curl -s %s | grep '^etcd_server_proposals_committed_total'", url);
    if (sh(out, sizeof out, "%s", cmd) != 0)
        return -1;
    char *sp = strchr(out, ' ');
    return sp != NULL ? strtod(sp + 1, NULL) : -1;
}

typedef struct bench_worker {
    dlock__etcd *c;
    int index;
    int64_t lease, until_us, cycles;
    int failed;
} bench_worker;

static void *bench_thread(void *arg)
{
    bench_worker *b = arg;
    char name[32];
    snprintf(name, sizeof name, "bench/%d", b->index);
    while (dlock__now_us() < b->until_us) {
        mutex_try m;
        if (mutex_acquire(b->c, name, b->lease, &m) != DLOCK_OK || !m.held ||
            dlock__etcd_kv_delete(b->c, &(dlock__etcd_delete){.key = m.key}, in_ms(10000), NULL,
                                  NULL) != DLOCK_OK) {
            b->failed = 1;
            break;
        }
        b->cycles++;
    }
    return NULL;
}

static void measure_layer(dlock__etcd *c, const char *endpoint, int threads, double seconds)
{
    bench_worker w[64];
    pthread_t th[64];
    int64_t lease = grant(c, 60), start = dlock__now_us(), total = 0;
    double p0 = proposals(endpoint);
    for (int i = 0; i < threads; i++) {
        w[i] = (bench_worker){
            .c = c, .index = i, .lease = lease, .until_us = start + (int64_t) (seconds * 1e6)};
        pthread_create(&th[i], NULL, bench_thread, &w[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        total += w[i].cycles;
        if (w[i].failed)
            fprintf(stderr, "worker %d failed: %s\n", i, dlock_errmsg());
    }
    double elapsed = (double) (dlock__now_us() - start) / 1e6, p1 = proposals(endpoint);
    printf("{\"lib\":\"dlock-etcd-wire\",\"wl\":\"%s\",\"conc\":%d,\"cycles\":%" PRId64
           ",\"cycles_per_s\":%.0f,\"proposals_per_cycle\":%.2f}\n",
           threads == 1 ? "seq" : "par", threads, total, (double) total / elapsed,
           (p1 - p0) / (double) total);
    fflush(stdout);
}

/* The same txn+delete loop with the curl CLI: one process, one keep-alive
 * connection, `--next` between requests. */
static void measure_curl(dlock__etcd *c, const char *endpoint, int cycles)
{
    int64_t lease = grant(c, 60);
    char key[64], b64key[128], b64p[64], b64e[64], path[] = "/tmp/dlock-curl-XXXXXX";
    snprintf(key, sizeof key, "curl/%" PRIx64, (uint64_t) lease);
    dlock__etcd_b64_encode(key, strlen(key), b64key);
    dlock__etcd_b64_encode("curl/", 5, b64p);
    dlock__etcd_b64_encode("curl0", 5, b64e);
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < cycles; i++) {
        fprintf(
            f,
            "%surl = \"http://%s/v3/kv/txn\"\nsilent\noutput = /dev/null\ndata = "
            "\"{\\\"compare\\\":[{\\\"key\\\":\\\"%s\\\",\\\"target\\\":\\\"CREATE\\\","
            "\\\"result\\\":\\\"EQUAL\\\",\\\"create_revision\\\":\\\"0\\\"}],\\\"success\\\":[{"
            "\\\"request_put\\\":{\\\"key\\\":\\\"%s\\\",\\\"lease\\\":\\\"%" PRId64
            "\\\"}},{\\\"request_range\\\":{\\\"key\\\":\\\"%s\\\",\\\"range_end\\\":\\\"%s\\\","
            "\\\"sort_target\\\":\\\"CREATE\\\",\\\"sort_order\\\":\\\"ASCEND\\\",\\\"limit\\\":"
            "\\\"1\\\"}}],\\\"failure\\\":[{\\\"request_range\\\":{\\\"key\\\":\\\"%s\\\"}},{"
            "\\\"request_range\\\":{\\\"key\\\":\\\"%s\\\",\\\"range_end\\\":\\\"%s\\\","
            "\\\"sort_target\\\":\\\"CREATE\\\",\\\"sort_order\\\":\\\"ASCEND\\\",\\\"limit\\\":"
            "\\\"1\\\"}}]}\"\nnext\nurl = \"http://%s/v3/kv/deleterange\"\nsilent\noutput = "
            "/dev/null\ndata = \"{\\\"key\\\":\\\"%s\\\"}\"\n",
            i == 0 ? "" : "next\n", endpoint, b64key, b64key, lease, b64p, b64e, b64key, b64p, b64e,
            endpoint, b64key);
    }
    fclose(f);
    double p0 = proposals(endpoint);
    int64_t start = dlock__now_us();
    if (sh(NULL, 0, "curl -K %s", path) != 0)
        fprintf(stderr, "curl loop failed\n");
    double elapsed = (double) (dlock__now_us() - start) / 1e6, p1 = proposals(endpoint);
    unlink(path);
    printf("{\"lib\":\"curl-cli-keepalive\",\"wl\":\"seq\",\"conc\":1,\"cycles\":%d,"
           "\"cycles_per_s\":%.0f,\"proposals_per_cycle\":%.2f}\n",
           cycles, cycles / elapsed, (p1 - p0) / cycles);
    fflush(stdout);
}

static int measure(double seconds)
{
    etcd_srv s;
    etcd_start(&s, NULL);
    dlock__etcd_config cfg = {.endpoints = s.endpoint};
    dlock__etcd *c;
    if (dlock__etcd_new(&cfg, &c) != DLOCK_OK)
        return 1;
    measure_curl(c, s.endpoint, 200);
    measure_layer(c, s.endpoint, 1, seconds);
    measure_layer(c, s.endpoint, 50, seconds);
    measure_curl(c, s.endpoint, 200);
    dlock__etcd_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"codec_base64", test_codec_base64},
        {"codec_int64", test_codec_int64},
        {"codec_requests", test_codec_requests},
        {"codec_replies", test_codec_replies},
        {"codec_invalid", test_codec_invalid},
        {"lease_lifecycle", test_lease_lifecycle},
        {"lease_expires", test_lease_expires},
        {"mutex_txn", test_mutex_txn},
        {"txn_compares", test_txn_compares},
        {"mutex_ranking", test_mutex_ranking},
        {"watch_delete", test_watch_delete},
        {"watch_many_one_stream", test_watch_many_one_stream},
        {"watch_compacted", test_watch_compacted},
        {"watch_reentrant", test_watch_reentrant},
        {"watch_late", test_watch_late},
        {"server_killed", test_server_killed},
        {"watch_resumes_without_loss", test_watch_resumes_without_loss},
        {"watch_silent_member", test_watch_silent_member},
        {"watch_quiet_member_kept", test_watch_quiet_member_kept},
        {"watch_reopen_backs_off", test_watch_reopen_backs_off},
        {"watch_no_leader", test_watch_no_leader},
        {"endpoints_failover", test_endpoints_failover},
        {"auth", test_auth},
        {"garbage_replies", test_garbage_replies},
        {"stale_term_not_believed", test_stale_term_not_believed},
        {"cloexec", test_cloexec},
        {"interop_etcdctl_waits", test_interop_etcdctl_waits},
        {"interop_etcdctl_holds", test_interop_etcdctl_holds},
        {"threads_share_client", test_threads_share_client},
    };
    if (argc > 1 && strcmp(argv[1], "measure") == 0) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return measure(argc > 2 ? atof(argv[2]) : 3.0);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT); /* for the health checks */
    return DT_RUN(tests);
}
