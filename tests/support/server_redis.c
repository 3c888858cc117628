/* SPDX-License-Identifier: MIT */
/* server_redis.c - the "redis" server kind: redis-server, and the Redis
 * faults a test can inject through dt_server_op(). Commands go through
 * hiredis, never by hand.
 *
 * The "redis-tls" kind is the same server taking clients over TLS only
 * (rediss://) on its port, with a throwaway CA made in its temp dir (see
 * tls_files); the harness itself talks to it over a plain port on
 * loopback, its peer_port, so every operation below works on both. */
#define _GNU_SOURCE
#include "harness.h"
#include "redis_node.h"
#include "server_kind.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The harness's own connections: the plain port. */
static int admin_port(const dt_server *s)
{
    return s->kind->needs_peer_port ? s->peer_port : s->port;
}

static int redis_argv_common(const dt_server *s, const char **argv, char bufs[][256])
{
    int argc = dt__redis_node_args(s, admin_port(s), argv, bufs);
    argv[argc++] = "--appendfsync";
    argv[argc++] = "always";
    return argc;
}

static void redis_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    int argc = redis_argv_common(s, argv, bufs);
    for (int i = 0; i < s->nargs && argc < 62; i++)
        argv[argc++] = s->args[i];
    argv[argc] = NULL;
}

static redisContext *connect_to(const dt_server *s, int timeout_ms)
{
    return dt__redis_connect(admin_port(s), NULL, timeout_ms);
}

static int redis_answers(const dt_server *s)
{
    redisReply *r = dt__redis_ask(admin_port(s), NULL, 200, "PING");
    int ok = dt__redis_pong(r);
    freeReplyObject(r);
    return ok;
}

static int redis_shutdown(dt_server *s, int keep)
{
    redisContext *c = connect_to(s, 1000);
    if (c == NULL)
        return -1;
    /* A clean shutdown answers nothing and closes the connection. */
    redisReply *r = redisCommand(c, keep ? "SHUTDOWN SAVE" : "SHUTDOWN NOSAVE");
    int asked = r == NULL;
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return asked ? 0 : -1;
}

static void redis_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "redis-cli -p %d ", admin_port(s));
}

/* ---------------------------------------------------------------- operations */

/* Runs one command; 0 if it got a reply that is not an error. */
static int command(dt_server *s, const char *what, redisReply **out, const char *fmt, ...)
{
    va_list ap;
    redisContext *c = connect_to(s, 2000);
    if (c == NULL) {
        fprintf(stderr, "redis %s: cannot connect to port %d\n", what, admin_port(s));
        return -1;
    }
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    int rc = 0;
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "redis %s: %s\n", what, r != NULL ? r->str : c->errstr);
        rc = -1;
    }
    if (out != NULL && rc == 0)
        *out = r;
    else if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return rc;
}

static int op_wipe(dt_server *s, const char *arg)
{
    (void) arg;
    return command(s, "wipe", NULL, "FLUSHALL");
}

/* Every key of lock NAME: they all carry the hash tag {NAME} (and simple
 * mode's key is NAME itself). */
static int op_drop_lock(dt_server *s, const char *name)
{
    char pattern[600];
    unsigned long long cursor = 0;
    int rc = 0;

    if (name == NULL || strpbrk(name, "*?[]\\") != NULL) {
        fprintf(stderr, "redis drop_lock: want a plain lock name\n");
        return -1;
    }
    snprintf(pattern, sizeof pattern, "*{%s}*", name);
    redisContext *c = connect_to(s, 2000);
    if (c == NULL)
        return -1;
    do {
        redisReply *r = redisCommand(c, "SCAN %llu MATCH %s COUNT 1000", cursor, pattern);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            rc = -1;
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        cursor = strtoull(r->element[0]->str, NULL, 10);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *d = redisCommand(c, "DEL %s", r->element[1]->element[i]->str);
            if (d != NULL)
                freeReplyObject(d);
        }
        freeReplyObject(r);
    } while (cursor != 0);
    redisReply *d = redisCommand(c, "DEL %s", name);
    if (d != NULL)
        freeReplyObject(d);
    redisFree(c);
    return rc;
}

static int op_pause_clients(dt_server *s, const char *ms)
{
    return command(s, "pause_clients", NULL, "CLIENT PAUSE %s ALL", ms != NULL ? ms : "1000");
}

/* DEBUG SLEEP blocks the whole server, our connection too: send it and
 * leave without the reply (the server runs it all the same). */
static int op_sleep(dt_server *s, const char *ms)
{
    char secs[32];
    redisContext *c = connect_to(s, 2000);
    if (c == NULL)
        return -1;
    snprintf(secs, sizeof secs, "%.3f", (ms != NULL ? atof(ms) : 1000.0) / 1000.0);
    struct timeval tv = {0, 100000};
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, "DEBUG SLEEP %s", secs);
    int rc = 0;
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "redis sleep: %s\n", r->str);
        rc = -1;
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return rc;
}

static long long info_field(redisContext *c, const char *section, const char *field)
{
    long long v = -1;
    redisReply *r = redisCommand(c, "INFO %s", section);
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        char key[64];
        snprintf(key, sizeof key, "\n%s:", field);
        const char *at = strstr(r->str, key);
        if (at != NULL)
            v = strtoll(at + strlen(key), NULL, 10);
    }
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

static void free_reply(redisReply *r)
{
    if (r != NULL)
        freeReplyObject(r);
}

/* Memory pressure: fill the server with recent filler keys, then cap its
 * memory below what it holds with allkeys-lru, so it evicts the least
 * recently used keys (the locks' idle keys before the fresh filler) until
 * it fits; then lift the cap and drop the filler that is left. */
static int op_evict(dt_server *s, const char *arg)
{
    enum { FILL = 3000, SIZE = 512 };
    char value[SIZE + 1];
    (void) arg;
    redisContext *c = connect_to(s, 5000);
    if (c == NULL)
        return -1;
    memset(value, 'x', SIZE);
    value[SIZE] = '\0';
    long long before = info_field(c, "memory", "used_memory");
    long long evicted = info_field(c, "stats", "evicted_keys");
    for (int i = 0; i < FILL; i++)
        redisAppendCommand(c, "SET dt:fill:%d %s", i, value);
    for (int i = 0; i < FILL; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **) &r) != REDIS_OK)
            break;
        free_reply(r);
    }
    free_reply(redisCommand(c, "CONFIG SET maxmemory-policy allkeys-lru"));
    free_reply(redisCommand(c, "CONFIG SET maxmemory %lld", before > 0 ? before : 1000000));
    /* Eviction runs on the next write. */
    free_reply(redisCommand(c, "SET dt:fill:trigger 1"));
    long long now = info_field(c, "stats", "evicted_keys");
    free_reply(redisCommand(c, "CONFIG SET maxmemory 0"));
    free_reply(redisCommand(c, "CONFIG SET maxmemory-policy noeviction"));
    unsigned long long cursor = 0;
    do {
        redisReply *r = redisCommand(c, "SCAN %llu MATCH dt:fill:* COUNT 1000", cursor);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            free_reply(r);
            break;
        }
        cursor = strtoull(r->element[0]->str, NULL, 10);
        for (size_t i = 0; i < r->element[1]->elements; i++)
            redisAppendCommand(c, "UNLINK %s", r->element[1]->element[i]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *u = NULL;
            if (redisGetReply(c, (void **) &u) == REDIS_OK)
                free_reply(u);
        }
        freeReplyObject(r);
    } while (cursor != 0);
    redisFree(c);
    if (now <= evicted) {
        fprintf(stderr, "redis evict: nothing was evicted\n");
        return -1;
    }
    return 0;
}

static int op_persist(dt_server *s, const char *onoff)
{
    int on = onoff == NULL || strcmp(onoff, "on") == 0;
    if (command(s, "persist", NULL, "CONFIG SET appendonly %s", on ? "yes" : "no") != 0)
        return -1;
    if (on)
        s->flags |= DT_PERSIST;
    else
        s->flags &= ~(unsigned) DT_PERSIST;
    if (!on)
        return 0;
    /* Turning it on rewrites the AOF from the data set: wait for that, so a
     * kill -9 right after keeps what was there. */
    redisContext *c = connect_to(s, 2000);
    if (c == NULL)
        return -1;
    int64_t until = dt_now_ms() + 10000;
    while (dt_now_ms() < until && (info_field(c, "persistence", "aof_rewrite_in_progress") != 0 ||
                                   info_field(c, "persistence", "aof_rewrite_scheduled") != 0))
        dt_sleep_ms(10);
    redisFree(c);
    return 0;
}

static int op_kill_clients(dt_server *s, const char *arg)
{
    (void) arg;
    int rc = command(s, "kill_clients", NULL, "CLIENT KILL TYPE normal");
    if (rc == 0)
        rc = command(s, "kill_clients", NULL, "CLIENT KILL TYPE pubsub");
    return rc;
}

static const dt_server_op_entry redis_ops[] = {
    {"wipe", "FLUSHALL: every key is gone", op_wipe, 1},
    {"drop_lock", "DEL every key of lock NAME (its hash tag {NAME}, and NAME)", op_drop_lock, 2},
    {"pause_clients", "CLIENT PAUSE MS ALL: no client command runs for MS", op_pause_clients, 0},
    {"sleep", "DEBUG SLEEP: the server stalls for MS (returns at once)", op_sleep, 0},
    {"evict", "maxmemory below the data set with allkeys-lru: idle keys are evicted", op_evict, 1},
    {"persist", "on|off: appendonly with fsync always (data survives kill -9)", op_persist, 0},
    {"kill_clients", "CLIENT KILL every client connection (normal and pub/sub)", op_kill_clients,
     0},
    {NULL, NULL, NULL, 0},
};

/* Waiters woken by pub/sub or by streams, queued per client or not. */
static const char *const redis_url_variants[] = {
    "", "notify=stream", "local_queue=on", "notify=stream&local_queue=on", NULL,
};

const dt_server_kind dt__redis_kind = {
    .name = "redis",
    .scheme = "redis",
    .start_timeout_ms = 10000,
    .argv = redis_argv,
    .answers = redis_answers,
    .wipe = dt__redis_wipe_files,
    .shutdown = redis_shutdown,
    .cli_prefix = redis_cli_prefix,
    .ops = redis_ops,
    .url_variants = redis_url_variants,
};

/* ---------------------------------------------------------------- redis-tls */

/* Makes, once per server dir, DIR/tls/: ca.crt (the CA the server's
 * certificate and the client's are signed by), server.crt/.key (for
 * 127.0.0.1 and localhost), client.crt/.key, and other-ca.crt (a CA that
 * signed nothing here: a wrong cacert). EC keys: each takes milliseconds. */
#define K "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
void dt__redis_tls_files(const dt_server *s)
{
    char dir[200], script[4096], done[256];
    struct stat st;

    snprintf(dir, sizeof dir, "%s/tls", s->dir);
    snprintf(done, sizeof done, "%s/other-ca.crt", dir);
    if (stat(done, &st) == 0)
        return;
    snprintf(script, sizeof script,
             "set -e; mkdir -p %s; cd %s; "
             "openssl req -x509 " K " -keyout ca.key -out ca.crt -days 3 -subj /CN=dlock-test-ca; "
             "openssl req -x509 " K " -keyout other-ca.key -out other.tmp -days 3 "
             "-subj /CN=dlock-other-ca; "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext; "
             "openssl req " K " -keyout server.key -out server.csr -subj /CN=localhost; "
             "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out server.crt -days 3 -extfile server.ext; "
             "openssl req " K " -keyout client.key -out client.csr -subj /CN=dlock-test-client; "
             "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out client.crt -days 3; "
             "mv other.tmp other-ca.crt",
             dir, dir);
    char cmd[4500];
    snprintf(cmd, sizeof cmd, "sh -c \"%s\" >%s/openssl.log 2>&1", script, s->dir);
    if (system(cmd) != 0)
        dt_fail(__FILE__, __LINE__,
                "openssl could not make the test certificates (see %s/openssl.log)", s->dir);
}

int dt__redis_tls_args(const dt_server *s, const char *dir, const char **argv, int argc,
                       char bufs[][256])
{
    snprintf(bufs[1], 256, "%d", s->port);
    snprintf(bufs[2], 256, "%s/server.crt", dir);
    snprintf(bufs[3], 256, "%s/server.key", dir);
    snprintf(bufs[4], 256, "%s/ca.crt", dir);
    argv[argc++] = "--tls-port";
    argv[argc++] = bufs[1];
    argv[argc++] = "--tls-cert-file";
    argv[argc++] = bufs[2];
    argv[argc++] = "--tls-key-file";
    argv[argc++] = bufs[3];
    argv[argc++] = "--tls-ca-cert-file";
    argv[argc++] = bufs[4];
    /* a test asks for client certificates with "--tls-auth-clients yes" */
    argv[argc++] = "--tls-auth-clients";
    argv[argc++] = "no";
    return argc;
}

/* The certificates a redis-tls server uses: a group's ("tls-dir:D", its
 * first node's: one CA for the group), or made in its own dir. */
static void redis_tls_dir(const dt_server *s, char *dir, size_t len)
{
    for (int i = 0; i < s->nargs; i++) {
        if (strncmp(s->args[i], "tls-dir:", 8) == 0) {
            snprintf(dir, len, "%s", s->args[i] + 8);
            return;
        }
    }
    dt__redis_tls_files(s);
    snprintf(dir, len, "%s/tls", s->dir);
}

static void redis_tls_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    char dir[200];
    redis_tls_dir(s, dir, sizeof dir);
    int argc = dt__redis_tls_args(s, dir, argv, redis_argv_common(s, argv, bufs), bufs);
    for (int i = 0; i < s->nargs && argc < 62; i++) {
        if (strncmp(s->args[i], "tls-dir:", 8) != 0)
            argv[argc++] = s->args[i];
    }
    argv[argc] = NULL;
}

static void redis_tls_url_options(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "?cacert=%s/tls/ca.crt", s->dir);
}

const dt_server_kind dt__redis_tls_kind = {
    .name = "redis-tls",
    .scheme = "rediss",
    .needs_peer_port = 1,
    .start_timeout_ms = 10000,
    .argv = redis_tls_argv,
    .answers = redis_answers,
    .wipe = dt__redis_wipe_files,
    .shutdown = redis_shutdown,
    .cli_prefix = redis_cli_prefix,
    .ops = redis_ops,
    .url_options = redis_tls_url_options,
};
