/* SPDX-License-Identifier: MIT */
/* test_redis_sentinel.c - redis+sentinel://: the URL and its mistakes, the
 * sentinels' and the data nodes' auth, and failovers while a lock is held
 * and waited for (issue 22).
 *
 * One Sentinel group (server kind "sentinel": a master, a replica, 3
 * sentinels) is started by main() for the tests that fail over; each test
 * runs in a process of its own (dt_run) and asks the group which node is
 * the master now. The tests of auth start groups of their own. The test of
 * READONLY needs a master demoted under a live connection, which real
 * sentinels never leave (they kill the clients of the nodes they
 * reconfigure): it runs two plain servers and a stand-in sentinel, a thread
 * of the test that names whichever node the test says. */
#include "../support/harness.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static dt_server group; /* started by main(): "sentinel", or "sentinel-tls" */

/* The port to ask a process of the group on: plain, whatever the clients
 * use (sentinel-tls: TLS on .port, plain on .peer_port). */
static int admin_port(const dt_server *s)
{
    return s->peer_port != 0 ? s->peer_port : s->port;
}

/* A client of the group with URL options "?a=b&..." (after the group's own
 * options, the TLS group's cacert=, if any). */
static dlock_client *group_client(const char *options)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%s", group.url, options != NULL ? options : "");
    char *second = strchr(url, '?') != NULL ? strchr(strchr(url, '?') + 1, '?') : NULL;
    if (second != NULL)
        *second = '&';
    return dt_client(url, NULL);
}

/* One command to the server on port (AUTH password first unless NULL). */
static redisReply *command(int port, const char *password, const char *fmt, ...)
{
    va_list ap;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL || c->err)
        dt_fail(__FILE__, __LINE__, "cannot connect to port %d", port);
    redisSetTimeout(c, tv);
    if (password != NULL)
        freeReplyObject(redisCommand(c, "AUTH %s", password));
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    if (r == NULL)
        dt_fail(__FILE__, __LINE__, "no reply from port %d", port);
    return r;
}

static long long integer(int port, const char *fmt, const char *arg)
{
    redisReply *r = command(port, NULL, fmt, arg);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* Every key of lock `name` (its hash tag) on the server at port. */
static void drop_lock(int port, const char *name)
{
    char pattern[300];
    snprintf(pattern, sizeof pattern, "*{%s}*", name);
    redisReply *r = command(port, NULL, "KEYS %s", pattern);
    CHECK(r->type == REDIS_REPLY_ARRAY && r->elements > 0);
    for (size_t i = 0; i < r->elements; i++)
        freeReplyObject(command(port, NULL, "DEL %s", r->element[i]->str));
    freeReplyObject(r);
}

/* The replica has every key the master has (async replication caught up:
 * on loopback, at once). */
static void wait_replicated(void)
{
    int m = dt_sentinel_master(&group);
    CHECK(m >= 0);
    int master = admin_port(dt_sentinel_node(&group, m));
    int replica = admin_port(dt_sentinel_node(&group, 1 - m));
    DT_WAIT_UNTIL(integer(master, "DBSIZE", NULL) == integer(replica, "DBSIZE", NULL), 5000);
}

/* ---------------------------------------------------------------- the URL */

static void expect_open_fails(const char *url, int code, const char *says)
{
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(url, &c), code);
    if (strstr(dlock_errmsg(), says) == NULL)
        dt_fail(__FILE__, __LINE__, "%s: the message does not say '%s': %s", url, says,
                dlock_errmsg());
}

static void bad_urls(void)
{
    expect_open_fails("redis+sentinel://127.0.0.1:26379", DLOCK_EINVAL, "no master name");
    expect_open_fails("redis+sentinel://127.0.0.1:26379/", DLOCK_EINVAL, "no master name");
    expect_open_fails("redis+sentinel:///mymaster", DLOCK_EINVAL, "sentinels");
    expect_open_fails("redis+sentinel://127.0.0.1:26379/my master", DLOCK_EINVAL, "");
    expect_open_fails("redis+sentinel://127.0.0.1:26379/m?sentinel_user=u", DLOCK_EINVAL,
                      "sentinel_password");
    expect_open_fails("redis+sentinel://127.0.0.1:26379/m?wait=65", DLOCK_EINVAL, "wait=65");
    expect_open_fails("redis+sentinel://127.0.0.1:26379/m?db=x", DLOCK_EINVAL, "db");
    expect_open_fails("redis+sentinel://127.0.0.1:26379/m?bogus=1", DLOCK_EINVAL, "bogus");
    /* what is well formed opens (no connection is made yet) */
    dlock_client *c = dt_client("redis+sentinel://127.0.0.1,[::1]:26380/m",
                                "?sentinel_password=x&db=2&pool=3&wait=1");
    dlock_client_close(c);
}

/* No sentinel answers: a clear EUNREACHABLE naming them, within the
 * command timeout (and a connect timeout) of the call. */
static void no_sentinel_answers(void)
{
    char url[256], where[64];
    int a = dt_free_port(), b = dt_free_port();
    snprintf(url, sizeof url,
             "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/m?connect_timeout=500ms&timeout=1s", a, b);
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "x", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <=, 500 + 1000 + 1500);
    snprintf(where, sizeof where, "127.0.0.1:%d", a);
    if (strstr(dlock_errmsg(), where) == NULL ||
        strstr(dlock_errmsg(), "no sentinel answered") == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not say why: %s", dlock_errmsg());
    /* each sentinel with its why (the first alone was named: trial42) */
    snprintf(where, sizeof where, "sentinel 127.0.0.1:%d: connect", b);
    if (strstr(dlock_errmsg(), where) == NULL)
        dt_fail(__FILE__, __LINE__, "want '%s': %s", where, dlock_errmsg());
    /* a wait tries within its budget, then says why */
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 1000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <=, 1000 + 1000 + 1500);
    dlock_lock_free(l);
    dlock_client_close(c);
    /* With the default options and a long wait: a store never reached is
     * given a moment (1 s), as redis:// is, not the command timeout once
     * per attempt (it took 10 s) */
    snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/m", a, b);
    c = dt_client(url, NULL);
    l = dt_lock(c, "x", 0);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 30000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <=, 1000 + 1500);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* url at a port of another kind of server, a wait without a bound:
 * DLOCK_EUNREACHABLE in about a second (a store never reached, as for
 * another service at the port: exit 69 in the CLI), saying so. */
static void expect_other_kind(const char *url, const char *says)
{
    dlock_client *c = dt_client(url, "?unreachable_wait=20s");
    dlock_lock *l = dt_lock(c, "other-kind", 0);
    int64_t t0 = dt_now_ms();
    int rc = dlock_acquire(l, DLOCK_WAIT_FOREVER);
    int64_t took = dt_now_ms() - t0;
    if (rc != DLOCK_EUNREACHABLE || strstr(dlock_errmsg(), says) == NULL)
        dt_fail(__FILE__, __LINE__, "%s: got %d (%s), want DLOCK_EUNREACHABLE saying '%s'", url, rc,
                dlock_errmsg(), says);
    CHECK_INT(took, <, 2500);
    dlock_status st;
    CHECK_RC(dlock_query(c, "other-kind", 0, &st), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), says) != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* redis+sentinel:// at a plain Redis, and redis:// at a sentinel: "H:P
 * answered, but not as ..." (they were DLOCK_ESERVER, a refusal of
 * SENTINEL or of the first script: exit 70), with the URL to use. */
static void wrong_kind_of_port(void)
{
    char url[512], says[256];
    int data = admin_port(dt_sentinel_node(&group, 0));
    int sentinel = admin_port(dt_sentinel_sentinel(&group, 0));
    snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/%s", data, DT_SENTINEL_MASTER);
    snprintf(says, sizeof says,
             "127.0.0.1:%d answered, but not as a Redis Sentinel (ERR unknown command "
             "'SENTINEL': a Redis server; for that server use redis://127.0.0.1:%d",
             data, data);
    expect_other_kind(url, says);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", sentinel);
    snprintf(says, sizeof says,
             "127.0.0.1:%d answered, but not as a Redis server (a Redis Sentinel: "
             "redis_mode:sentinel): for the master it watches use redis+sentinel://127.0.0.1:%d/",
             sentinel, sentinel);
    expect_other_kind(url, says);
}

static void unknown_master(void)
{
    char url[4096];
    snprintf(url, sizeof url, "%.*s/nosuch", (int) (strrchr(group.url, '/') - group.url),
             group.url);
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "x", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_ESERVER); /* not waited for: waiting will not help */
    CHECK_INT(dt_now_ms() - t0, <, 1000);
    if (strstr(dlock_errmsg(), "knows no master named 'nosuch'") == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not say why: %s", dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* The first sentinel is gone: the next one is asked. */
static void first_sentinel_down(void)
{
    char url[4096];
    snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d,%s", dt_free_port(),
             group.url + strlen("redis+sentinel://"));
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "first_sentinel_down", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- auth */

static void with_auth(void)
{
    dt_server g;
    char base[4096], url[8192];
    dt_server_start(&g, "sentinel", 0, "--requirepass", "datapw", "--masterauth", "datapw",
                    "sentinel:sentinel auth-pass " DT_SENTINEL_MASTER " datapw",
                    "sentinel:requirepass sentpw", "sentinel:sentinel sentinel-pass sentpw", NULL);
    const char *hosts = g.url + strlen("redis+sentinel://");
    snprintf(base, sizeof base, "redis+sentinel://:datapw@%s", hosts);

    /* both passwords right */
    snprintf(url, sizeof url, "%s?sentinel_password=sentpw", base);
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "auth", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);

    struct {
        const char *url_fmt, *says;
    } wrong[] = {
        {"%s", "sentinel_password"},                   /* none given to the sentinels */
        {"%s?sentinel_password=nope", "AUTH refused"}, /* a wrong one */
        {"%s?sentinel_password=sentpw&sentinel_user=nobody", "AUTH refused"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        snprintf(url, sizeof url, wrong[i].url_fmt, base);
        c = dt_client(url, NULL);
        l = dt_lock(c, "auth", 0);
        int64_t t0 = dt_now_ms();
        CHECK_RC(dlock_acquire(l, 5000), DLOCK_ESERVER);
        CHECK_INT(dt_now_ms() - t0, <, 1000);
        if (strstr(dlock_errmsg(), wrong[i].says) == NULL)
            dt_fail(__FILE__, __LINE__, "%s: the message does not say '%s': %s", url, wrong[i].says,
                    dlock_errmsg());
        dlock_lock_free(l);
        dlock_client_close(c);
    }
    /* the data nodes' password wrong */
    snprintf(url, sizeof url, "redis+sentinel://:nope@%s?sentinel_password=sentpw", hosts);
    c = dt_client(url, NULL);
    l = dt_lock(c, "auth", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_ESERVER);
    if (strstr(dlock_errmsg(), "AUTH refused") == NULL || strstr(dlock_errmsg(), "master") == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not say why: %s", dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&g);
}

/* ---------------------------------------------------------------- failover */

typedef struct waiter {
    const char *url, *name;
    int rc;
    uint64_t fence;
    int64_t got_ms;
    dlock_client *c;
    dlock_lock *l;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->l, 60000);
    w->got_ms = dt_now_ms();
    w->fence = dlock_lock_fence(w->l);
    return NULL;
}

static void start_waiter(waiter *w, const char *name, const char *options, pthread_t *t)
{
    memset(w, 0, sizeof *w);
    w->name = name;
    w->c = group_client(options);
    w->l = dt_lock(w->c, name, 0);
    CHECK(pthread_create(t, NULL, wait_for_lock, w) == 0);
}

/* The key survives the failover (replicated before it): the holder keeps
 * the lock through it (its renewals reach the new master), then releases
 * it there, and the waiter, queued before the failover, is handed it on the
 * new master with a larger fence. */
static void failover_key_survives(const char *options)
{
    char name[64];
    dt_lost_box lost = {0};
    pthread_t t;
    waiter w;

    snprintf(name, sizeof name, "survives%s", options);
    dlock_client *a = group_client(options);
    dlock_lock *la = dt_lock(a, name, 0);
    dlock_lock_on_lost(la, dt_on_lost, &lost);
    CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
    uint64_t fence_a = dlock_lock_fence(la);
    start_waiter(&w, name, options, &t);
    DT_WAIT_UNTIL(dt_query(a, name, 0).waiters == 1, 5000);
    wait_replicated();

    int64_t t0 = dt_now_ms();
    int m = dt_sentinel_failover(&group);
    printf("failover to node %d took %lld ms\n", m, (long long) (dt_now_ms() - t0));
    /* a renewal period (lease 3 s: every second) and more on the new master */
    dt_sleep_ms(2500);
    if (atomic_load(&lost.lost))
        dt_fail(__FILE__, __LINE__,
                "the holder was told it lost the lock %lld ms after the "
                "failover began: %s",
                (long long) (atomic_load(&lost.at_ms) - t0), lost.why);
    CHECK_RC(dlock_lock_verify(la), DLOCK_OK);
    CHECK_INT(w.got_ms, ==, 0); /* still waiting */
    CHECK_INT(dt_query(a, name, 0).waiters, ==, 1);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(la), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > fence_a);
    printf("the waiter got it %lld ms after the release on the new master\n",
           (long long) (w.got_ms - released));
    CHECK_INT(w.got_ms - released, <, 3000);
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_client_close(w.c);
    dlock_lock_free(la);
    dlock_client_close(a);
}

static void failover_key_survives_pubsub(void)
{
    failover_key_survives("?lease=3s");
}

static void failover_key_survives_stream(void)
{
    failover_key_survives("?lease=3s&notify=stream");
}

/* The key did not survive (async replication lost it: the test drops it
 * on the new master right after the failover): the holder is told it lost
 * the lock by its next renewal, within a renewal period; the waiter gets
 * the lock, with a larger fence. Never two holders that do not know. */
static void failover_key_lost(void)
{
    const char *name = "lost";
    dt_lost_box lost = {0};
    pthread_t t;
    waiter w;

    dlock_client *a = group_client("?lease=3s");
    dlock_lock *la = dt_lock(a, name, 0);
    dlock_lock_on_lost(la, dt_on_lost, &lost);
    CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
    uint64_t fence_a = dlock_lock_fence(la);
    start_waiter(&w, name, "?lease=3s", &t);
    DT_WAIT_UNTIL(dt_query(a, name, 0).waiters == 1, 5000);
    wait_replicated();

    int m = dt_sentinel_failover(&group);
    int64_t dropped = dt_now_ms();
    drop_lock(admin_port(dt_sentinel_node(&group, m)), name);
    /* lease 3 s: renewed every second; told within a period and a retry */
    DT_WAIT_UNTIL(atomic_load(&lost.lost) == 1, 3000);
    printf("the holder was told %lld ms after its key was lost: %s\n",
           (long long) (atomic_load(&lost.at_ms) - dropped), lost.why);
    CHECK_RC(dlock_lock_check(la), DLOCK_ELOST);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > fence_a);
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_client_close(w.c);
    CHECK_RC(dlock_release(la), DLOCK_ELOST);
    dlock_lock_free(la);
    dlock_client_close(a);
}

/* wait=1 on the group: a grant and a release are on the replica when they
 * return (WAIT; test_redis_replicas has the rest of the option). */
static void wait_for_the_replica(void)
{
    wait_replicated();
    int m = dt_sentinel_master(&group);
    CHECK(m >= 0);
    int replica = admin_port(dt_sentinel_node(&group, 1 - m));
    dlock_client *c = group_client("?wait=1");
    dlock_lock *l = dt_lock(c, "synced", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_INT(integer(replica, "EXISTS %s", "dlock:{synced}"), ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(integer(replica, "EXISTS %s", "dlock:{synced}"), ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- READONLY */

/* A stand-in sentinel: answers PING and SENTINEL GET-MASTER-ADDR-BY-NAME
 * with the port in `names`, one connection at a time, until `stop`. */
typedef struct fake_sentinel {
    int fd, port;
    atomic_int names;
    atomic_int stop;
    atomic_int asked;
    pthread_t thread;
} fake_sentinel;

static void serve_one(fake_sentinel *f, int conn)
{
    redisReader *reader = redisReaderCreate();
    char buf[4096];
    ssize_t got;
    while ((got = read(conn, buf, sizeof buf)) > 0) {
        redisReaderFeed(reader, buf, (size_t) got);
        void *req = NULL;
        while (redisReaderGetReply(reader, &req) == REDIS_OK && req != NULL) {
            redisReply *r = req;
            char out[256];
            int n;
            if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                strcasecmp(r->element[0]->str, "SENTINEL") == 0) {
                char port[16];
                snprintf(port, sizeof port, "%d", atomic_load(&f->names));
                atomic_fetch_add(&f->asked, 1);
                n = snprintf(out, sizeof out, "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n",
                             strlen(port), port);
            } else {
                n = snprintf(out, sizeof out, "+PONG\r\n");
            }
            if (send(conn, out, (size_t) n, MSG_NOSIGNAL) != n)
                break;
            freeReplyObject(req);
            req = NULL;
        }
    }
    redisReaderFree(reader);
}

static void *fake_sentinel_main(void *arg)
{
    fake_sentinel *f = arg;
    while (!atomic_load(&f->stop)) {
        int conn = accept(f->fd, NULL, NULL);
        if (conn < 0)
            continue;
        struct timeval tv = {1, 0};
        setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        serve_one(f, conn);
        close(conn);
    }
    return NULL;
}

static void fake_sentinel_start(fake_sentinel *f, int names)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(f->fd >= 0 && bind(f->fd, (struct sockaddr *) &a, sizeof a) == 0 &&
          listen(f->fd, 16) == 0 && getsockname(f->fd, (struct sockaddr *) &a, &len) == 0);
    struct timeval tv = {0, 100000}; /* accept() looks at `stop` this often */
    setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    f->port = ntohs(a.sin_port);
    atomic_store(&f->names, names);
    CHECK(pthread_create(&f->thread, NULL, fake_sentinel_main, f) == 0);
}

static void fake_sentinel_stop(fake_sentinel *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    close(f->fd);
}

static void replicaof(int port, int of)
{
    redisReply *r = of == 0 ? command(port, NULL, "REPLICAOF NO ONE")
                            : command(port, NULL, "REPLICAOF 127.0.0.1 %d", of);
    CHECK(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
}

/* The master is demoted under the client's live connection (no sentinel
 * killed it): the next step gets READONLY, finds the master again through
 * the sentinel, and is done there; a node the sentinel names but which is
 * not the master (ROLE) is not used. */
static void readonly_finds_the_master(void)
{
    dt_server x, y;
    fake_sentinel f = {0};
    char url[256];

    dt_server_start(&x, "redis", 0, "--repl-diskless-sync-delay", "0", NULL);
    dt_server_start(&y, "redis", 0, "--repl-diskless-sync-delay", "0", NULL);
    replicaof(y.port, x.port);
    fake_sentinel_start(&f, x.port);
    snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/m?lease=30s&pool=1", f.port);
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "ro", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    DT_WAIT_UNTIL(integer(y.port, "EXISTS %s", "dlock:{ro}") == 1, 5000);

    /* y becomes the master, x its replica; the client's connection to x lives */
    int asked = atomic_load(&f.asked);
    replicaof(y.port, 0);
    replicaof(x.port, y.port);
    atomic_store(&f.names, y.port);
    CHECK_RC(dlock_release(l), DLOCK_OK); /* READONLY from x, then done on y */
    CHECK(atomic_load(&f.asked) > asked);
    CHECK_INT(integer(y.port, "EXISTS %s", "dlock:{ro}"), ==, 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK(dlock_lock_fence(l) > fence);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    /* the sentinel names a replica: refused by its ROLE, never written to */
    atomic_store(&f.names, x.port);
    dlock_client *c2 = dt_client(url, "&timeout=1s");
    dlock_lock *l2 = dt_lock(c2, "ro2", 0);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_EUNREACHABLE);
    if (strstr(dlock_errmsg(), "its role is slave") == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not say why: %s", dlock_errmsg());
    dlock_lock_free(l2);
    dlock_client_close(c2);

    dlock_lock_free(l);
    dlock_client_close(c);
    fake_sentinel_stop(&f);
    dt_server_kill(&y);
    dt_server_kill(&x);
}

/* The master freezes (SIGSTOP: connections are taken, nothing answers)
 * before a new client's first take: the sentinels answered, so the store
 * was reached and the frozen master is an outage ridden out within the
 * wait, up to the failover (before: "the store was never reached" after one
 * command timeout, exit 69, while the sentinels named the new master). */
static void frozen_master_failover(void)
{
    int m = dt_sentinel_master(&group);
    CHECK_INT(m, >=, 0);
    dt_server *old = dt_sentinel_node(&group, m);
    dt_server_pause(old);
    dlock_client *c = group_client("");
    dlock_lock *l = dt_lock(c, "frozen", 0);
    int64_t t0 = dt_now_ms();
    int rc = dlock_acquire(l, 30000);
    long long took = dt_now_ms() - t0;
    printf("master frozen: taken after %lld ms (rc %d: %s)\n", took, rc,
           rc != DLOCK_OK ? dlock_errmsg() : "");
    dt_server_resume(old);
    CHECK_RC(rc, DLOCK_OK);
    CHECK_INT(dt_sentinel_master(&group), ==, 1 - m);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c); /* (the last test: the roles stay swapped) */
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"bad_urls", bad_urls},
        {"no_sentinel_answers", no_sentinel_answers},
        {"unknown_master", unknown_master},
        {"wrong_kind_of_port", wrong_kind_of_port},
        {"first_sentinel_down", first_sentinel_down},
        {"with_auth", with_auth},
        {"wait_for_the_replica", wait_for_the_replica},
        {"failover_key_survives_pubsub", failover_key_survives_pubsub},
        {"failover_key_survives_stream", failover_key_survives_stream},
        {"failover_key_lost", failover_key_lost},
        {"readonly_finds_the_master", readonly_finds_the_master},
        {"frozen_master_failover", frozen_master_failover},
    };
    /* rediss+sentinel://: the same failovers with every link over TLS */
    static const dt_test tls_tests[] = {
        {"wait_for_the_replica", wait_for_the_replica},
        {"failover_key_survives_pubsub", failover_key_survives_pubsub},
        {"failover_key_survives_stream", failover_key_survives_stream},
        {"failover_key_lost", failover_key_lost},
    };
    const char *kind = getenv("DT_SENTINEL_KIND");
    int tls = kind != NULL && strcmp(kind, "sentinel-tls") == 0;
    /* once for the program, before any test forks (no threads yet) */
    dt_server_start(&group, tls ? "sentinel-tls" : "sentinel", 0, NULL);
    int rc = tls ? DT_RUN(tls_tests) : DT_RUN(tests);
    dt_server_stop(&group);
    return rc;
}
