/* SPDX-License-Identifier: MIT */
/* test_redis_tls.c - rediss:// (TLS under the connection layer,
 * transport.h) and ACL users with the least permissions (issue 22).
 *
 * main() starts one redis-server taking clients over TLS only (server kind
 * "redis-tls": a throwaway CA, server and client certificates made in its
 * temp dir); the test of client certificates starts a second one that
 * requires them. Each test runs in a process of its own (dt_run). */
#include "../support/harness.h"
#include "backend/redis/conn.h"
#include "base/clock.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static dt_server srv; /* started by main() */

/* The URL of srv with options of ours ("" or "&opt=..." after its own). */
static const char *url_with(const char *options)
{
    static char url[600];
    snprintf(url, sizeof url, "%s%s", srv.url, options);
    return url;
}

static const char *file_of(const dt_server *s, const char *name)
{
    static char path[4][300];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/tls/%s", s->dir, name);
    return p;
}

/* One command over the server's plain admin port. */
static redisReply *admin(const dt_server *s, const char *fmt, ...)
{
    va_list ap;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->peer_port, tv);
    if (c == NULL || c->err)
        dt_fail(__FILE__, __LINE__, "cannot connect to the admin port %d", s->peer_port);
    redisSetTimeout(c, tv);
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    if (r == NULL)
        dt_fail(__FILE__, __LINE__, "no reply from the admin port");
    return r;
}

static long long connections_received(void)
{
    redisReply *r = admin(&srv, "INFO stats");
    const char *at =
        r->type == REDIS_REPLY_STRING ? strstr(r->str, "total_connections_received:") : NULL;
    long long n = at != NULL ? atoll(at + strlen("total_connections_received:")) : -1;
    freeReplyObject(r);
    return n;
}

/* ---------------------------------------------------------------- the lock cycle */

typedef struct waiter_arg {
    dlock_lock *lock;
    int rc;
    int64_t acquired_at;
} waiter_arg;

static void *wait_for_lock(void *p)
{
    waiter_arg *w = p;
    w->rc = dlock_acquire(w->lock, 20000);
    w->acquired_at = dt_now_ms();
    return NULL;
}

static void count_name(const char *name, unsigned flags, void *arg)
{
    (void) flags;
    if (strcmp(name, "tls-cycle") == 0)
        ++*(int *) arg;
}

/* acquire, a waiter woken by the release (no polling: the heartbeat is
 * 6 s), renew, extend, status, list, release: the whole cycle over url.
 * hold_ms > 0: the waiter waits that long first (its heartbeats keep its
 * place: give a short waiter_lease). */
static void whole_cycle_holding(const char *url, int hold_ms)
{
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *a = dt_lock(c, "tls-cycle", 0);
    waiter_arg w = {.lock = dt_lock(c, "tls-cycle", 0)};
    pthread_t t;
    dlock_status st;

    CHECK_RC(dlock_acquire_for(a, 0, 30000), DLOCK_OK);
    CHECK_RC(dlock_extend(a, 30000), DLOCK_OK);
    pthread_create(&t, NULL, wait_for_lock, &w);
    DT_WAIT_UNTIL(dlock_query(c, "tls-cycle", 0, &st) == DLOCK_OK && st.waiters == 1, 5000);
    CHECK(strcmp(st.owner, dlock_lock_token(a)) == 0);
    int found = 0;
    CHECK_RC(dlock_list(c, "", 100, count_name, &found), DLOCK_OK);
    CHECK_INT(found, ==, 1);
    if (hold_ms > 0) {
        dt_sleep_ms(hold_ms); /* the time heartbeats must bridge */
        CHECK_RC(dlock_query(c, "tls-cycle", 0, &st), DLOCK_OK);
        CHECK_INT(st.waiters, ==, 1);
    }
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(a), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    /* woken by the hand-over notice, not by a heartbeat (6 s) */
    CHECK_INT(w.acquired_at - released, <, 2000);
    CHECK_INT(dlock_lock_fence(w.lock), >, dlock_lock_fence(a));
    CHECK_RC(dlock_renew(w.lock), DLOCK_OK); /* a renewal, now */
    CHECK_RC(dlock_lock_verify(w.lock), DLOCK_OK);
    CHECK_RC(dlock_release(w.lock), DLOCK_OK);
    CHECK_RC(dlock_query(c, "tls-cycle", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0);
    dlock_lock_free(a);
    dlock_lock_free(w.lock);
    dlock_client_close(c);
}

static void whole_cycle(const char *url)
{
    whole_cycle_holding(url, 0);
}

static void cycle_verified(void)
{
    whole_cycle(url_with(""));
}

static void cycle_stream(void)
{
    whole_cycle(url_with("&notify=stream"));
}

/* By name (localhost is in the server's certificate), sent as SNI. */
static void cycle_by_name(void)
{
    char url[600];
    snprintf(url, sizeof url, "rediss://localhost:%d?cacert=%s", srv.port, file_of(&srv, "ca.crt"));
    whole_cycle(url);
}

/* ---------------------------------------------------------------- verification */

static void expect_acquire_fails(const char *url, int code, const char *says)
{
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "tls-refused", 0);
    int64_t started = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), code);
    if (strstr(dlock_errmsg(), says) == NULL)
        dt_fail(__FILE__, __LINE__, "'%s' does not say '%s'", dlock_errmsg(), says);
    CHECK_INT(dt_now_ms() - started, <, 5000); /* a clear error, not a hang */
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void wrong_ca_refused(void)
{
    char url[600];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?cacert=%s", srv.port,
             file_of(&srv, "other-ca.crt"));
    expect_acquire_fails(url, DLOCK_ESERVER, "certificate is not trusted");
    /* the system's CAs do not know the test CA either */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", srv.port);
    expect_acquire_fails(url, DLOCK_ESERVER, "certificate is not trusted");
    /* a name the certificate is not for */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?cacert=%s&sni=elsewhere.example", srv.port,
             file_of(&srv, "ca.crt"));
    expect_acquire_fails(url, DLOCK_ESERVER, "certificate is not trusted");
    /* rediss+cluster://: its seeds are dialled over TLS and verified the
     * same (this server is no cluster: its certificate is refused before
     * anything is asked of it) */
    snprintf(url, sizeof url, "rediss+cluster://127.0.0.1:%d?cacert=%s", srv.port,
             file_of(&srv, "other-ca.crt"));
    expect_acquire_fails(url, DLOCK_ESERVER, "certificate is not trusted");
}

static void insecure_works(void)
{
    char url[600];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?insecure=1", srv.port);
    whole_cycle(url);
}

/* TLS to a plain port, and plain to a TLS port: clear errors, in time. */
static void wrong_protocol(void)
{
    char url[600];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?insecure=1&connect_timeout=500ms",
             srv.peer_port);
    expect_acquire_fails(url, DLOCK_EUNREACHABLE, "TLS");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=500ms", srv.port);
    expect_acquire_fails(url, DLOCK_EUNREACHABLE, "127.0.0.1");
}

/* The time the message says the TLS handshake was given ("... in N ms"). */
static int64_t handshake_said_ms(const char *msg)
{
    const char *at = strstr(msg, "no reply to the TLS handshake in ");
    if (at == NULL)
        dt_fail(__FILE__, __LINE__, "not a silent handshake: %s", msg);
    return atoll(at + strlen("no reply to the TLS handshake in "));
}

typedef struct asker {
    dlock_client *client;
    int rc;
    int64_t ended_ms;
} asker;

static void *ask_status(void *p)
{
    asker *a = p;
    dlock_status st;
    a->rc = dlock_query(a->client, "tls-silent", 0, &st);
    a->ended_ms = dt_now_ms();
    return NULL;
}

/* TLS to a plain port, which says nothing to a ClientHello: one handshake
 * timeout (2 s), and a message that says so, for status and list (each
 * asked a ROLE first, which made a handshake of its own: 4 s) and for
 * calls of two threads at once (the second waited for the first one's
 * handshake, then made its own). */
static void one_handshake_at_a_plain_port(void)
{
    char url[600];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?insecure=1", srv.peer_port);
    dlock_client *c = dt_client(url, NULL);
    dlock_status st;
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_query(c, "tls-silent", 0, &st), DLOCK_EUNREACHABLE);
    int64_t took = dt_now_ms() - t0, said = handshake_said_ms(dlock_errmsg());
    CHECK_INT(said, >=, 1900);
    if (took > said + 700)
        dt_fail(__FILE__, __LINE__, "status took %lld ms, the message says %lld: %s",
                (long long) took, (long long) said, dlock_errmsg());
    int listed = 0;
    t0 = dt_now_ms();
    CHECK_RC(dlock_list(c, "", 0, count_name, &listed), DLOCK_EUNREACHABLE);
    took = dt_now_ms() - t0;
    said = handshake_said_ms(dlock_errmsg());
    if (took > said + 700)
        dt_fail(__FILE__, __LINE__, "list took %lld ms, the message says %lld: %s",
                (long long) took, (long long) said, dlock_errmsg());

    /* a try, and a status from another thread while its handshake waits */
    dlock_lock *l = dt_lock(c, "tls-silent", 0);
    asker other = {c, -1, 0};
    pthread_t t;
    t0 = dt_now_ms();
    CHECK(pthread_create(&t, NULL, ask_status, &other) == 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    said = handshake_said_ms(dlock_errmsg());
    pthread_join(t, NULL);
    CHECK_RC(other.rc, DLOCK_EUNREACHABLE);
    if (other.ended_ms - t0 > said + 700)
        dt_fail(__FILE__, __LINE__,
                "two threads at once: the second ended after %lld ms, a handshake is %lld",
                (long long) (other.ended_ms - t0), (long long) said);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void bad_options(void)
{
    static const struct {
        const char *url, *says;
    } cases[] = {
        {"redis://127.0.0.1:1?cacert=/x", "is for TLS"},
        {"rediss://127.0.0.1:1?cacert=/nonexistent/ca.crt", "option cacert="},
        {"rediss://127.0.0.1:1?insecure=maybe", "option insecure=maybe"},
        {"rediss://127.0.0.1:1?insecure=1&key=/x", "needs cert="},
        {"rediss://127.0.0.1:1?insecure=1&cert=/nonexistent.crt", "option cert="},
        {"rediss+sentinel://127.0.0.1:1/m?cacert=/nonexistent/ca.crt", "option cacert="},
        {"redis+sentinel://127.0.0.1:1/m?cacert=/x", "is for TLS"},
    };
    dlock_client *c = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_RC(dlock_client_open(cases[i].url, &c), DLOCK_EINVAL);
        if (strstr(dlock_errmsg(), cases[i].says) == NULL)
            dt_fail(__FILE__, __LINE__, "%s: '%s' does not say '%s'", cases[i].url, dlock_errmsg(),
                    cases[i].says);
    }
}

/* A server that requires a client certificate: refused without one (a
 * clear error), served with one. */
static void client_certificate(void)
{
    dt_server strict;
    char url[800];

    dt_server_start(&strict, "redis-tls", 0, "--tls-auth-clients", "yes", NULL);
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?cacert=%s", strict.port,
             file_of(&strict, "ca.crt"));
    expect_acquire_fails(url, DLOCK_EUNREACHABLE, "certificate");
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?cacert=%s&cert=%s&key=%s", strict.port,
             file_of(&strict, "ca.crt"), file_of(&strict, "client.crt"),
             file_of(&strict, "client.key"));
    whole_cycle(url);
    dt_server_stop(&strict);
}

/* ---------------------------------------------------------------- one SSL object, many threads */

typedef struct echo_arg {
    dlock__rconn *c;
    int id, bad, failed;
} echo_arg;

/* ECHOes words of its own; every reply must be its own word, in order. */
static void *echo_many(void *p)
{
    echo_arg *e = p;
    for (int i = 0; i < 300; i++) {
        char word[64];
        snprintf(word, sizeof word, "t%d-%d-%0*d", e->id, i, i % 7 * 300, 0);
        const char *argv[] = {"ECHO", word};
        size_t lens[] = {4, strlen(word)};
        dlock__rcmd cmd = {2, argv, lens};
        redisReply *r = NULL;
        if (dlock__rconn_call(e->c, 1, &cmd, dlock__now_us() + 10000000, &r) != DLOCK_OK) {
            e->failed++;
            continue;
        }
        e->bad += r->type != REDIS_REPLY_STRING || strcmp(r->str, word) != 0;
        freeReplyObject(r);
    }
    return NULL;
}

/* Many threads on one pipelined TLS connection: one reads while another
 * writes (conn.c's roles), which one SSL object allows only under the
 * link's mutex (transport.h). Every reply reaches its thread. */
static void threads_share_one_connection(void)
{
    enum { N = 12 };
    dlock__rtls_opts opts = {.cacert = file_of(&srv, "ca.crt")};
    dlock__rtls *tls = NULL;
    CHECK_RC(dlock__rtls_new(&opts, &tls), DLOCK_OK);
    dlock__rendpoint ep = {.host = "127.0.0.1",
                           .port = srv.port,
                           .tls = tls,
                           .connect_timeout_ms = 2000,
                           .command_timeout_ms = 10000,
                           .label = "rediss test"};
    dlock__rconn *c = NULL;
    CHECK_RC(dlock__rconn_new(&ep, &c), DLOCK_OK);
    pthread_t t[N];
    echo_arg e[N];
    for (int i = 0; i < N; i++) {
        e[i] = (echo_arg){.c = c, .id = i};
        pthread_create(&t[i], NULL, echo_many, &e[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT(e[i].failed, ==, 0);
        CHECK_INT(e[i].bad, ==, 0);
    }
    dlock__rconn_free(c);
    dlock__rtls_free(tls);
}

/* ---------------------------------------------------------------- hang-ups */

/* A connection left idle (the server's TLS 1.3 session tickets arrived
 * after the handshake) is used again, not taken for a hang-up; a real
 * hang-up (CLIENT KILL) is seen and the next call connects again. */
static void idle_and_hang_up(void)
{
    dlock_client *c = dt_client(url_with(""), "&pool=1");
    dlock_status st;

    CHECK_RC(dlock_query(c, "tls-idle", 0, &st), DLOCK_OK);
    long long before = connections_received();
    for (int i = 0; i < 5; i++) {
        dt_sleep_ms(3); /* idle past the connection's hang-up check (1 ms) */
        CHECK_RC(dlock_query(c, "tls-idle", 0, &st), DLOCK_OK);
    }
    CHECK_INT(connections_received() - before, ==, 1); /* the INFO's own only */
    CHECK_RC(dt_server_op(&srv, "kill_clients", NULL), 0);
    dt_sleep_ms(3);
    CHECK_RC(dlock_query(c, "tls-idle", 0, &st), DLOCK_OK); /* connected again */
    dlock_client_close(c);
}

static int lost_calls;
static void on_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l;
    (void) why;
    (void) arg;
    CHECK_RC(code, DLOCK_ELOST);
    __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

/* The server restarted empty under a held lock: reported lost, as over
 * TCP; the client connects again by itself. */
static void restart_reported_lost(void)
{
    dt_server own; /* restarted here: a server of this test's process */
    dt_server_start(&own, "redis-tls", 0, NULL);
    dlock_client *c = dt_client(own.url, "&lease=600ms&timeout=300ms");
    dlock_lock *a = dt_lock(c, "tls-restart", 0);

    dlock_lock_on_lost(a, on_lost, NULL);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    dt_server_restart(&own, DT_KILL | DT_WIPE);
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 5000);
    CHECK_RC(dlock_lock_check(a), DLOCK_ELOST);
    dlock_lock *b = dt_lock(c, "tls-restart", 0);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    dt_server_stop(&own);
}

/* ---------------------------------------------------------------- ACL */

/* The line of src/backend/redis/README.md, for the default prefix. */
#define ACL_RULES                                                                                  \
    "resetkeys ~dlock:* resetchannels &dlock:wake:* -@all +ping +select +client|id "               \
    "+client|unblock +evalsha +eval +subscribe +xread +mget +scan +set +del +get +exists "         \
    "+pexpire +pttl +incr +incrby +decrby +hdel +hexists +hget +hincrby +hkeys +hlen +hset "       \
    "+hvals +lindex +llen +lpop +lpos +lrem +rpush +publish +time +xadd +zadd +zcard +zrange "     \
    "+zrangebyscore +zrem +zremrangebyscore +zscore"

static void acl_user(void)
{
    char rules[1024], url[800];
    snprintf(rules, sizeof rules, ACL_RULES);
    /* ACL SETUSER takes the rules as separate arguments */
    const char *argv[80];
    size_t lens[80];
    int argc = 0;
    argv[argc++] = "ACL";
    argv[argc++] = "SETUSER";
    argv[argc++] = "locker";
    argv[argc++] = "on";
    argv[argc++] = ">s3cret";
    for (char *tok = strtok(rules, " "); tok != NULL && argc < 80; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    struct timeval tv = {2, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", srv.peer_port, tv);
    CHECK(ctx != NULL && !ctx->err);
    redisReply *r = redisCommandArgv(ctx, argc, argv, lens);
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(ctx);

    snprintf(url, sizeof url, "rediss://locker:s3cret@127.0.0.1:%d?cacert=%s&waiter_lease=300ms",
             srv.port, file_of(&srv, "ca.crt"));
    whole_cycle_holding(url, 500);
    snprintf(url, sizeof url, "rediss://locker:s3cret@127.0.0.1:%d?cacert=%s&notify=stream",
             srv.port, file_of(&srv, "ca.crt"));
    whole_cycle(url);

    /* a wrong password, an unknown user: refused, clearly */
    snprintf(url, sizeof url, "rediss://locker:wrong@127.0.0.1:%d?cacert=%s", srv.port,
             file_of(&srv, "ca.crt"));
    expect_acquire_fails(url, DLOCK_ESERVER, "AUTH refused");
    snprintf(url, sizeof url, "rediss://nobody:s3cret@127.0.0.1:%d?cacert=%s", srv.port,
             file_of(&srv, "ca.crt"));
    expect_acquire_fails(url, DLOCK_ESERVER, "AUTH refused");

    /* one permission less (no EVALSHA): the lock cycle fails, it says why */
    freeReplyObject(admin(&srv, "ACL SETUSER locker -evalsha"));
    snprintf(url, sizeof url, "rediss://locker:s3cret@127.0.0.1:%d?cacert=%s", srv.port,
             file_of(&srv, "ca.crt"));
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "tls-acl", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "permission") != NULL || strstr(dlock_errmsg(), "NOPERM") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"bad_options", bad_options},
        {"cycle_verified", cycle_verified},
        {"cycle_stream", cycle_stream},
        {"cycle_by_name", cycle_by_name},
        {"wrong_ca_refused", wrong_ca_refused},
        {"insecure_works", insecure_works},
        {"wrong_protocol", wrong_protocol},
        {"one_handshake_at_a_plain_port", one_handshake_at_a_plain_port},
        {"client_certificate", client_certificate},
        {"threads_share_one_connection", threads_share_one_connection},
        {"idle_and_hang_up", idle_and_hang_up},
        {"acl_user", acl_user},
        {"restart_reported_lost", restart_reported_lost},
    };
    dt_server_start(&srv, "redis-tls", 0, NULL);
    int rc = DT_RUN(tests);
    dt_server_stop(&srv);
    return rc;
}
