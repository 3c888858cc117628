/* SPDX-License-Identifier: MIT */
/* server_sentinel.c - the "sentinel" server kind: a Sentinel deployment
 * (a master, a replica of it, 3 sentinels) started and stopped as one
 * server (server.h). The dt_server is the first master; the other four
 * processes are its group, each a dt_server of its own so that every
 * one-server call works on them. Commands go through hiredis.
 *
 * "sentinel-tls" is the same group speaking TLS everywhere: clients reach
 * every process on its port (s->port) over TLS, the data nodes replicate
 * and the sentinels talk to them and to each other over TLS
 * (tls-replication), all with certificates of one test CA (the first
 * master's dir/tls, server_redis.c). The harness itself asks each process
 * over a plain port of its own (s->peer_port). */
#define _GNU_SOURCE
#include "harness.h"
#include "redis_node.h"
#include "server_kind.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#define NSENTINELS 3
#define READY_MS   30000 /* the most a start or a failover may take */

typedef struct group {
    int used;
    dt_server replica;
    dt_server sentinels[NSENTINELS];
} group;

/* Static, not malloc'd: a dt_server may live in memory shared with forked
 * tests (the conformance runner's), where LeakSanitizer sees no pointer to
 * a heap block. */
#define MAX_GROUPS 4
static group groups[MAX_GROUPS];

/* The group speaks TLS to its clients (sentinel-tls). */
static int tls_group(const dt_server *s)
{
    return s->kind->needs_peer_port;
}

/* The port the harness asks a process on: plain, whatever its clients use. */
static int admin(const dt_server *s)
{
    return tls_group(s) ? s->peer_port : s->port;
}

/* The password given to the sentinels ("sentinel:requirepass X"), or NULL. */
static const char *sentinel_password(const dt_server *s)
{
    static char pw[128];
    for (int i = 0; i < s->nargs; i++) {
        if (sscanf(s->args[i], "sentinel:requirepass %127s", pw) == 1)
            return pw;
    }
    return NULL;
}

/* ---------------------------------------------------------------- data nodes */

/* The group's certificates: the dir a member was given ("tls-dir:D"), or
 * the first master's own, made now. */
static void tls_dir(const dt_server *s, char *buf, size_t len)
{
    for (int i = 0; i < s->nargs; i++) {
        if (strncmp(s->args[i], "tls-dir:", 8) == 0) {
            snprintf(buf, len, "%s", s->args[i] + 8);
            return;
        }
    }
    dt__redis_tls_files(s);
    snprintf(buf, len, "%s/tls", s->dir);
}

static void data_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    int argc = dt__redis_node_args(s, admin(s), argv, bufs);
    if (tls_group(s)) {
        char dir[200];
        tls_dir(s, dir, sizeof dir);
        argc = dt__redis_tls_args(s, dir, argv, argc, bufs);
        /* to its master over TLS, and announcing its TLS port */
        argv[argc++] = "--tls-replication";
        argv[argc++] = "yes";
    }
    for (int i = 0; i < s->nargs && argc < 62; i++) {
        if (strncmp(s->args[i], "sentinel:", 9) != 0 && strncmp(s->args[i], "tls-dir:", 8) != 0)
            argv[argc++] = s->args[i];
    }
    argv[argc] = NULL;
}

/* SHUTDOWN NOW: redis-server 7.0 given SIGTERM waits up to 10 s for its
 * replicas (shutdown-timeout), and the harness's wait is 10 s. */
static int data_shutdown(dt_server *s, int keep)
{
    redisContext *c = dt__redis_connect(admin(s), dt__redis_password(s), 1000);
    if (c == NULL)
        return -1;
    /* a clean shutdown answers nothing and closes the connection */
    redisReply *r = redisCommand(c, keep ? "SHUTDOWN SAVE NOW" : "SHUTDOWN NOSAVE NOW");
    int asked = r == NULL;
    freeReplyObject(r);
    redisFree(c);
    return asked ? 0 : -1;
}

/* The replica: a data node of its own kind (no group), the master's
 * arguments and --replicaof it. */
static int data_answers(const dt_server *s)
{
    return dt__redis_kind.answers(s);
}

static const dt_server_kind replica_kind = {
    .name = "redis",
    .scheme = "redis",
    .start_timeout_ms = 10000,
    .argv = data_argv,
    .answers = data_answers,
    .shutdown = data_shutdown,
};

static const dt_server_kind replica_tls_kind = {
    .name = "redis-tls",
    .scheme = "rediss",
    .needs_peer_port = 1,
    .start_timeout_ms = 10000,
    .argv = data_argv,
    .answers = data_answers,
    .shutdown = data_shutdown,
};

/* ---------------------------------------------------------------- sentinels */

/* A sentinel's config: args[0] is the master's port, the rest are lines. */
static void sentinel_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    char path[256];
    snprintf(path, sizeof path, "%s/sentinel.conf", s->dir);
    /* a restart keeps what the sentinel rewrote it with (what it learnt);
     * a first start writes it, again when it tries new ports */
    FILE *f = s->restarts > 0 ? fopen(path, "r") : NULL;
    if (f != NULL) {
        fclose(f);
    } else {
        f = fopen(path, "w");
        if (f == NULL)
            dt_fail(__FILE__, __LINE__, "cannot write %s", path);
        if (tls_group(s))
            fprintf(f, "port %d\ntls-port %d\n", s->peer_port, s->port);
        else
            fprintf(f, "port %d\n", s->port);
        fprintf(f,
                "bind 127.0.0.1\ndaemonize no\ndir %s\n"
                "sentinel monitor %s 127.0.0.1 %s 2\n"
                "sentinel down-after-milliseconds %s 1000\n"
                "sentinel failover-timeout %s 4000\n"
                "sentinel parallel-syncs %s 1\n",
                s->dir, DT_SENTINEL_MASTER, s->args[0], DT_SENTINEL_MASTER, DT_SENTINEL_MASTER,
                DT_SENTINEL_MASTER);
        for (int i = 1; i < s->nargs; i++)
            fprintf(f, "%s\n", s->args[i]);
        fclose(f);
    }
    snprintf(bufs[0], 256, "%s", path);
    argv[0] = "redis-server";
    argv[1] = bufs[0];
    argv[2] = "--sentinel";
    argv[3] = NULL;
}

static const dt_server_kind sentinel_process_kind = {
    .name = "redis-sentinel",
    .scheme = "redis",
    .start_timeout_ms = 10000,
    .argv = sentinel_argv,
    .answers = data_answers,
};

static const dt_server_kind sentinel_tls_process_kind = {
    .name = "redis-sentinel-tls",
    .scheme = "rediss",
    .needs_peer_port = 1,
    .start_timeout_ms = 10000,
    .argv = sentinel_argv,
    .answers = data_answers,
};

/* ---------------------------------------------------------------- the group */

static int reply_ok(const redisReply *r)
{
    return r != NULL && r->type != REDIS_REPLY_ERROR;
}

/* The port sentinel i names as the master's; 0 if none. */
static int named_master(dt_server *s, int i)
{
    group *g = s->group;
    redisReply *r = dt__redis_ask(admin(&g->sentinels[i]), sentinel_password(s), 1000,
                                  "SENTINEL GET-MASTER-ADDR-BY-NAME %s", DT_SENTINEL_MASTER);
    int port = 0;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(r->element[1]->str);
    freeReplyObject(r);
    return port;
}

/* "master", "slave" or "" for data node i; for a replica, whether its
 * link to the master is up. */
static const char *role_of(dt_server *s, int i, int *linked)
{
    static char role[32];
    dt_server *n = dt_sentinel_node(s, i);
    redisReply *r = dt__redis_ask(admin(n), dt__redis_password(s), 1000, "ROLE");
    role[0] = '\0';
    *linked = 0;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        snprintf(role, sizeof role, "%s", r->element[0]->str);
        /* slave: [role, host, port, state, offset] */
        *linked = r->elements >= 4 && r->element[3]->type == REDIS_REPLY_STRING &&
                  strcmp(r->element[3]->str, "connected") == 0;
    }
    freeReplyObject(r);
    return role;
}

/* Every sentinel names node m, which is the master, and the other node
 * is its replica, linked, and known to every sentinel with the quorum
 * reachable: a failover can be asked for. */
static int settled(dt_server *s, int m)
{
    group *g = s->group;
    int linked;
    if (strcmp(role_of(s, m, &linked), "master") != 0)
        return 0;
    if (strcmp(role_of(s, 1 - m, &linked), "slave") != 0 || !linked)
        return 0;
    for (int i = 0; i < NSENTINELS; i++) {
        if (named_master(s, i) != dt_sentinel_node(s, m)->port)
            return 0;
        redisReply *r = dt__redis_ask(admin(&g->sentinels[i]), sentinel_password(s), 1000,
                                      "SENTINEL CKQUORUM %s", DT_SENTINEL_MASTER);
        int ok = reply_ok(r);
        freeReplyObject(r);
        if (!ok)
            return 0;
        r = dt__redis_ask(admin(&g->sentinels[i]), sentinel_password(s), 1000,
                          "SENTINEL REPLICAS %s", DT_SENTINEL_MASTER);
        ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1;
        /* a replica still flagged down (s_down) after its master changed */
        for (size_t k = 0; ok && k < r->elements; k++) {
            const redisReply *e = r->element[k];
            for (size_t f = 0; f + 1 < e->elements; f += 2) {
                if (strcmp(e->element[f]->str, "flags") == 0 &&
                    (strstr(e->element[f + 1]->str, "down") != NULL ||
                     strstr(e->element[f + 1]->str, "disconnected") != NULL))
                    ok = 0;
            }
        }
        freeReplyObject(r);
        if (!ok)
            return 0;
    }
    return 1;
}

static void wait_settled(dt_server *s, int m, const char *what)
{
    int64_t until = dt_now_ms() + READY_MS;
    while (!settled(s, m)) {
        if (dt_now_ms() > until)
            dt_fail(
                __FILE__, __LINE__,
                "sentinel group (first master port %d, dirs under %s): not settled with node %d "
                "as master %d ms after %s",
                s->port, s->dir, m, READY_MS, what);
        dt_sleep_ms(100);
    }
}

static void group_start(dt_server *s)
{
    group *g = NULL;
    const char *args[DT_SERVER_MAX_ARGS + 10];
    char port[16], dir[200], lines[5][256];
    int n = 0, tls = tls_group(s);

    for (int i = 0; i < MAX_GROUPS && g == NULL; i++) {
        if (!groups[i].used)
            g = &groups[i];
    }
    if (g == NULL)
        dt_fail(__FILE__, __LINE__, "more than %d sentinel groups at once", MAX_GROUPS);
    memset(g, 0, sizeof *g);
    g->used = 1;
    s->group = g;
    snprintf(port, sizeof port, "%d", s->port);
    for (int i = 0; i < s->nargs; i++) {
        if (strncmp(s->args[i], "sentinel:", 9) != 0)
            args[n++] = s->args[i];
    }
    args[n++] = "--replicaof";
    args[n++] = "127.0.0.1";
    args[n++] = port;
    if (tls) {
        snprintf(dir, sizeof dir, "%s/tls", s->dir); /* made by s's start */
        snprintf(lines[0], sizeof lines[0], "tls-dir:%s", dir);
        args[n++] = lines[0];
    }
    args[n] = NULL;
    dt__server_start_kind(&g->replica, tls ? &replica_tls_kind : &replica_kind, s->flags, args);
    n = 0;
    args[n++] = port;
    for (int i = 0; i < s->nargs; i++) {
        if (strncmp(s->args[i], "sentinel:", 9) == 0)
            args[n++] = s->args[i] + 9;
    }
    if (tls) {
        /* to the data nodes and to each other over TLS, announcing the
         * TLS port */
        snprintf(lines[1], sizeof lines[1], "tls-cert-file %s/server.crt", dir);
        snprintf(lines[2], sizeof lines[2], "tls-key-file %s/server.key", dir);
        snprintf(lines[3], sizeof lines[3], "tls-ca-cert-file %s/ca.crt", dir);
        for (int i = 1; i < 4; i++)
            args[n++] = lines[i];
        args[n++] = "tls-auth-clients no";
        args[n++] = "tls-replication yes";
    }
    args[n] = NULL;
    for (int i = 0; i < NSENTINELS; i++)
        dt__server_start_kind(&g->sentinels[i],
                              tls ? &sentinel_tls_process_kind : &sentinel_process_kind, 0, args);
    size_t used = (size_t) snprintf(s->url, sizeof s->url, "%s://", s->kind->scheme);
    for (int i = 0; i < NSENTINELS && used < sizeof s->url; i++)
        used += (size_t) snprintf(s->url + used, sizeof s->url - used, "%s127.0.0.1:%d",
                                  i > 0 ? "," : "", g->sentinels[i].port);
    if (used < sizeof s->url)
        used += (size_t) snprintf(s->url + used, sizeof s->url - used, "/%s", DT_SENTINEL_MASTER);
    if (tls && used < sizeof s->url &&
        (size_t) snprintf(s->url + used, sizeof s->url - used, "?cacert=%.*s/ca.crt",
                          (int) (sizeof s->url - used), dir) >= sizeof s->url - used)
        dt_fail(__FILE__, __LINE__, "the sentinel-tls URL does not fit: %s", dir);
    wait_settled(s, 0, "the start");
}

static void group_stop(dt_server *s, int kill)
{
    group *g = s->group;
    if (g == NULL)
        return;
    /* the sentinels first: none fails over what is being stopped. Killed
     * (they keep nothing a test needs): redis-sentinel 7.0 takes more than
     * 10 s to act on SIGTERM */
    for (int i = 0; i < NSENTINELS; i++)
        dt_server_kill(&g->sentinels[i]);
    if (kill)
        dt_server_kill(&g->replica);
    else
        dt_server_stop(&g->replica);
    s->group = NULL;
    g->used = 0;
}

dt_server *dt_sentinel_node(dt_server *s, int i)
{
    group *g = s->group;
    if (g == NULL || i < 0 || i > 1)
        dt_fail(__FILE__, __LINE__, "no data node %d in a sentinel group", i);
    return i == 0 ? s : &g->replica;
}

dt_server *dt_sentinel_sentinel(dt_server *s, int i)
{
    group *g = s->group;
    if (g == NULL || i < 0 || i >= NSENTINELS)
        dt_fail(__FILE__, __LINE__, "no sentinel %d in a sentinel group", i);
    return &g->sentinels[i];
}

/* Node 0 is the group's own dt_server, whose stop and kill stop the group
 * (group_stop): with the group set aside they act on node 0 alone. */
void dt_sentinel_node_kill(dt_server *s, int i)
{
    dt_server *node = dt_sentinel_node(s, i);
    void *g = node->group;
    node->group = NULL;
    dt_server_kill(node);
    node->group = g;
}

int dt_sentinel_master(dt_server *s)
{
    int port = named_master(s, 0);
    return port == s->port ? 0 : port == dt_sentinel_node(s, 1)->port ? 1 : -1;
}

int dt_sentinel_failover(dt_server *s)
{
    int from = dt_sentinel_master(s);
    if (from < 0)
        dt_fail(__FILE__, __LINE__, "no master named before a failover");
    int64_t until = dt_now_ms() + READY_MS;
    for (;;) {
        /* refused while a replica is not ready (NOGOODSLAVE) or a failover
         * is under way (INPROG): asked again */
        redisReply *r = dt__redis_ask(admin(dt_sentinel_sentinel(s, 0)), sentinel_password(s), 1000,
                                      "SENTINEL FAILOVER %s", DT_SENTINEL_MASTER);
        int ok = reply_ok(r);
        freeReplyObject(r);
        if (ok)
            break;
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__, "SENTINEL FAILOVER refused for %d ms", READY_MS);
        dt_sleep_ms(100);
    }
    wait_settled(s, 1 - from, "SENTINEL FAILOVER");
    return 1 - from;
}

static void group_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "redis-cli -p %d ", admin(s));
}

const dt_server_kind dt__sentinel_kind = {
    .name = "sentinel",
    .scheme = "redis+sentinel",
    .start_timeout_ms = 10000,
    .argv = data_argv,
    .answers = data_answers,
    .shutdown = data_shutdown,
    .cli_prefix = group_cli_prefix,
    .group_start = group_start,
    .group_stop = group_stop,
    .url_path = "/" DT_SENTINEL_MASTER,
};

const dt_server_kind dt__sentinel_tls_kind = {
    .name = "sentinel-tls",
    .scheme = "rediss+sentinel",
    .needs_peer_port = 1,
    .start_timeout_ms = 10000,
    .argv = data_argv,
    .answers = data_answers,
    .shutdown = data_shutdown,
    .cli_prefix = group_cli_prefix,
    .group_start = group_start,
    .group_stop = group_stop,
    .url_path = "/" DT_SENTINEL_MASTER,
};
