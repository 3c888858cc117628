/* SPDX-License-Identifier: MIT */
/* server_cluster.c - the "cluster" server kind: a Redis Cluster of 3
 * masters and 3 replicas (one of each master) started and stopped as one
 * server (server.h), reached by
 * redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3 (the masters).
 * The dt_server is the first master; the other five processes are its
 * group, each a dt_server of its own so that every one-server call works
 * on them (dt_cluster_node). Each node's cluster bus listens on its
 * peer_port (cluster-port), a free port like its client port, not on
 * port + 10000. The slots are assigned, the nodes introduced (MEET) and
 * the replicas attached (REPLICATE) by commands through hiredis, and the
 * start returns once every node says cluster_state:ok and every replica's
 * link to its master is up: no sleep stands in for that.
 *
 * "cluster-tls" is the same cluster speaking TLS everywhere (tls-cluster,
 * tls-replication), with certificates of one test CA (the first node's
 * dir/tls, server_redis.c): clients reach each node on its port (s->port)
 * over TLS, and CLUSTER SLOTS and MOVED name the TLS ports to them. The
 * harness asks each node over a plain port of its own (s->peer_port); the
 * cluster bus is then on s->election_port. Its url is
 * rediss+cluster://127.0.0.1:P1,...?cacert=DIR/tls/ca.crt. */
#define _GNU_SOURCE
#include "harness.h"
#include "redis_node.h"
#include "server_kind.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NMASTERS  3
#define NNODES    (2 * NMASTERS)
#define READY_MS  30000 /* the most a start or a failover may take */
#define NODE_ID_N 41

/* The group speaks TLS to its clients (cluster-tls): three ports a node. */
static int tls_group(const dt_server *s)
{
    return s->kind->needs_peer_port == 2;
}

/* The port the harness asks a node on: plain, whatever its clients use. */
static int admin(const dt_server *s)
{
    return tls_group(s) ? s->peer_port : s->port;
}

/* Whether port is node n's, for its clients or the harness. */
static int port_is(const dt_server *n, int port)
{
    return port != 0 && (port == n->port || port == admin(n));
}

/* The group's certificates: the dir a node was given ("tls-dir:D"), or
 * the first node's own, made now. */
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

static void node_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    int argc = dt__redis_node_args(s, admin(s), argv, bufs);
    snprintf(bufs[5], 256, "%d", tls_group(s) ? s->election_port : s->peer_port);
    snprintf(bufs[6], 256, "%s/nodes.conf", s->dir);
    argv[argc++] = "--cluster-enabled";
    argv[argc++] = "yes";
    argv[argc++] = "--cluster-port";
    argv[argc++] = bufs[5];
    argv[argc++] = "--cluster-config-file";
    argv[argc++] = bufs[6];
    if (tls_group(s)) {
        char dir[200];
        tls_dir(s, dir, sizeof dir);
        argc = dt__redis_tls_args(s, dir, argv, argc, bufs);
        /* the bus, the replication and what CLUSTER SLOTS names: TLS */
        argv[argc++] = "--tls-cluster";
        argv[argc++] = "yes";
        argv[argc++] = "--tls-replication";
        argv[argc++] = "yes";
    }
    /* a failed master is replaced within seconds, not the default 15 */
    argv[argc++] = "--cluster-node-timeout";
    argv[argc++] = "2000";
    argv[argc++] = "--maxmemory";
    argv[argc++] = "64mb";
    if (dt__redis_password(s) != NULL) {
        argv[argc++] = "--masterauth";
        argv[argc++] = dt__redis_password(s);
    }
    for (int i = 0; i < s->nargs && argc < 62; i++) {
        if (strncmp(s->args[i], "tls-dir:", 8) != 0)
            argv[argc++] = s->args[i];
    }
    argv[argc] = NULL;
}

/* One command to a node (AUTH first if it has a password); the reply, or
 * NULL. */
static redisReply *ask(const dt_server *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = dt__redis_vask(admin(n), dt__redis_password(n), 1000, fmt, ap);
    va_end(ap);
    return r;
}

static int reply_ok(const redisReply *r)
{
    return r != NULL && r->type != REDIS_REPLY_ERROR;
}

/* A command that must succeed during the start. */
static void must(const dt_server *n, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = dt__redis_vask(admin(n), dt__redis_password(n), 2000, fmt, ap);
    va_end(ap);
    if (!reply_ok(r))
        dt_fail(__FILE__, __LINE__, "cluster node on port %d: %s: %s", n->port, what,
                r != NULL ? r->str : "no reply");
    freeReplyObject(r);
}

static int node_answers(const dt_server *s)
{
    redisReply *r = ask(s, "PING");
    int ok = dt__redis_pong(r);
    freeReplyObject(r);
    return ok;
}

/* SHUTDOWN NOW: a master does not wait for its replicas (shutdown-timeout
 * 10 s, the harness's whole wait). */
static int node_shutdown(dt_server *s, int keep)
{
    redisReply *r = ask(s, keep ? "SHUTDOWN SAVE NOW" : "SHUTDOWN NOSAVE NOW");
    int asked = r == NULL; /* a clean shutdown answers nothing */
    freeReplyObject(r);
    return asked ? 0 : -1;
}

static void node_wipe(const dt_server *s)
{
    char path[256];
    dt__redis_wipe_files(s);
    snprintf(path, sizeof path, "%s/nodes.conf", s->dir);
    dt__remove_tree(path);
}

static void node_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "redis-cli -p %d ", admin(s));
}

static const dt_server_kind node_tls_kind = {
    .name = "cluster-node-tls",
    .scheme = "rediss",
    .needs_peer_port = 2,
    .start_timeout_ms = 10000,
    .argv = node_argv,
    .answers = node_answers,
    .wipe = node_wipe,
    .shutdown = node_shutdown,
    .cli_prefix = node_cli_prefix,
};

static const dt_server_kind node_kind = {
    .name = "cluster-node",
    .scheme = "redis",
    .needs_peer_port = 1,
    .start_timeout_ms = 10000,
    .argv = node_argv,
    .answers = node_answers,
    .wipe = node_wipe,
    .shutdown = node_shutdown,
    .cli_prefix = node_cli_prefix,
};

dt_server *dt_cluster_node(dt_server *s, int i)
{
    return dt__redis_group_node(s, i, "cluster");
}

/* Node i's id (CLUSTER MYID) into id. */
static void node_id(dt_server *s, int i, char id[NODE_ID_N])
{
    redisReply *r = ask(dt_cluster_node(s, i), "CLUSTER MYID");
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len >= NODE_ID_N)
        dt_fail(__FILE__, __LINE__, "cluster node %d: no id", i);
    snprintf(id, NODE_ID_N, "%s", r->str);
    freeReplyObject(r);
}

/* A field of CLUSTER INFO ("cluster_state"), 0 if node i has none. */
static int info_is(dt_server *s, int i, const char *field, const char *value)
{
    char want[96];
    redisReply *r = ask(dt_cluster_node(s, i), "CLUSTER INFO");
    snprintf(want, sizeof want, "%s:%s\r\n", field, value);
    int yes = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        yes = strstr(r->str, want) != NULL;
    freeReplyObject(r);
    return yes;
}

/* "master", "slave" or "" for node i; for a replica, whether its link to
 * the master is up and the port of that master. */
static const char *role_of(dt_server *s, int i, int *linked, int *master_port)
{
    static char role[32];
    redisReply *r = ask(dt_cluster_node(s, i), "ROLE");
    role[0] = '\0';
    *linked = 0;
    *master_port = 0;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        snprintf(role, sizeof role, "%s", r->element[0]->str);
        /* slave: [role, host, port, state, offset] */
        if (r->elements >= 4 && r->element[2]->type == REDIS_REPLY_INTEGER)
            *master_port = (int) r->element[2]->integer;
        *linked = r->elements >= 4 && r->element[3]->type == REDIS_REPLY_STRING &&
                  strcmp(r->element[3]->str, "connected") == 0;
    }
    freeReplyObject(r);
    return role;
}

/* Whether every node knows all NNODES (none in handshake any more). */
static int all_met(dt_server *s)
{
    for (int i = 0; i < NNODES; i++) {
        redisReply *r = ask(dt_cluster_node(s, i), "CLUSTER NODES");
        int lines = 0, ok = r != NULL && r->type == REDIS_REPLY_STRING;
        if (ok) {
            for (const char *p = r->str; *p != '\0'; p++)
                lines += *p == '\n';
            ok = lines == NNODES && strstr(r->str, "handshake") == NULL &&
                 strstr(r->str, "noaddr") == NULL;
        }
        freeReplyObject(r);
        if (!ok)
            return 0;
    }
    return 1;
}

/* Every node says cluster_state:ok and knows every node; every master
 * node has a replica linked to it. */
static int settled(dt_server *s)
{
    int masters = 0;
    for (int i = 0; i < NNODES; i++) {
        int linked, port;
        if (!info_is(s, i, "cluster_state", "ok") || !info_is(s, i, "cluster_known_nodes", "6"))
            return 0;
        const char *role = role_of(s, i, &linked, &port);
        if (strcmp(role, "master") == 0)
            masters++;
        else if (strcmp(role, "slave") != 0 || !linked)
            return 0;
    }
    return masters == NMASTERS;
}

static void wait_for(dt_server *s, int (*cond)(dt_server *), const char *what)
{
    int64_t until = dt_now_ms() + READY_MS;
    while (!cond(s)) {
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__,
                    "cluster group (first node port %d, dirs under %s): not %s after %d ms",
                    s->port, s->dir, what, READY_MS);
        dt_sleep_ms(50);
    }
}

static void group_start(dt_server *s)
{
    char id[NODE_ID_N], dir[200];

    if (tls_group(s)) {
        /* the others use the first node's certificates (made by its start) */
        snprintf(dir, sizeof dir, "%s/tls", s->dir);
        if (s->nargs == DT_SERVER_MAX_ARGS ||
            (size_t) snprintf(s->args[s->nargs], sizeof s->args[0], "tls-dir:%s", dir) >=
                sizeof s->args[0])
            dt_fail(__FILE__, __LINE__, "no room for the cluster-tls group's tls-dir:%s", dir);
        s->nargs++;
    }
    dt__redis_group_start(s, NNODES, tls_group(s) ? &node_tls_kind : &node_kind, "cluster");
    /* distinct epochs, set while each node knows only itself: no collision
     * to resolve later */
    for (int i = 0; i < NNODES; i++)
        must(dt_cluster_node(s, i), "CLUSTER SET-CONFIG-EPOCH", "CLUSTER SET-CONFIG-EPOCH %d",
             i + 1);
    for (int i = 0; i < NMASTERS; i++) {
        int lo = i * 16384 / NMASTERS, hi = (i + 1) * 16384 / NMASTERS - 1;
        must(dt_cluster_node(s, i), "CLUSTER ADDSLOTSRANGE", "CLUSTER ADDSLOTSRANGE %d %d", lo, hi);
    }
    for (int i = 1; i < NNODES; i++)
        must(dt_cluster_node(s, i), "CLUSTER MEET", "CLUSTER MEET 127.0.0.1 %d %d", s->port,
             tls_group(s) ? s->election_port : s->peer_port);
    wait_for(s, all_met, "all met");
    for (int i = 0; i < NMASTERS; i++) {
        node_id(s, i, id);
        must(dt_cluster_node(s, NMASTERS + i), "CLUSTER REPLICATE", "CLUSTER REPLICATE %s", id);
    }
    wait_for(s, settled, "settled (cluster_state:ok everywhere, every replica linked)");
    size_t used = (size_t) snprintf(s->url, sizeof s->url, "%s://", s->kind->scheme);
    for (int i = 0; i < NMASTERS && used < sizeof s->url; i++)
        used += (size_t) snprintf(s->url + used, sizeof s->url - used, "%s127.0.0.1:%d",
                                  i > 0 ? "," : "", dt_cluster_node(s, i)->port);
    if (tls_group(s) && used < sizeof s->url &&
        (size_t) snprintf(s->url + used, sizeof s->url - used, "?cacert=%s/ca.crt", dir) >=
            sizeof s->url - used)
        dt_fail(__FILE__, __LINE__, "the cluster-tls URL does not fit: %s", dir);
}

int dt_cluster_master_of(dt_server *s, int slot)
{
    redisReply *r = ask(s, "CLUSTER SLOTS");
    int port = 0;
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->elements >= 3 && slot >= e->element[0]->integer && slot <= e->element[1]->integer)
            port = (int) e->element[2]->element[1]->integer;
    }
    freeReplyObject(r);
    for (int i = 0; i < NNODES; i++) {
        if (port_is(dt_cluster_node(s, i), port))
            return i;
    }
    return -1;
}

void dt_cluster_wait_settled(dt_server *s)
{
    wait_for(s, settled, "settled (cluster_state:ok everywhere, every replica linked)");
}

static int failover_target = -1;

static int failed_over(dt_server *s)
{
    int linked, port;
    return strcmp(role_of(s, failover_target, &linked, &port), "master") == 0 && settled(s);
}

int dt_cluster_failover(dt_server *s, int master)
{
    int linked, port, replica = -1;
    for (int i = 0; i < NNODES && replica < 0; i++) {
        if (strcmp(role_of(s, i, &linked, &port), "slave") == 0 &&
            port_is(dt_cluster_node(s, master), port))
            replica = i;
    }
    if (replica < 0)
        dt_fail(__FILE__, __LINE__, "cluster node %d: no replica to fail over to", master);
    must(dt_cluster_node(s, replica), "CLUSTER FAILOVER", "CLUSTER FAILOVER");
    failover_target = replica;
    wait_for(s, failed_over, "failed over");
    return replica;
}

const dt_server_kind dt__cluster_kind = {
    .name = "cluster",
    .scheme = "redis+cluster",
    .needs_peer_port = 1,
    .start_timeout_ms = 10000,
    .argv = node_argv,
    .answers = node_answers,
    .wipe = node_wipe,
    .shutdown = node_shutdown,
    .cli_prefix = node_cli_prefix,
    .group_start = group_start,
    .group_stop = dt__redis_group_stop,
};

const dt_server_kind dt__cluster_tls_kind = {
    .name = "cluster-tls",
    .scheme = "rediss+cluster",
    .needs_peer_port = 2,
    .start_timeout_ms = 10000,
    .argv = node_argv,
    .answers = node_answers,
    .wipe = node_wipe,
    .shutdown = node_shutdown,
    .cli_prefix = node_cli_prefix,
    .group_start = group_start,
    .group_stop = dt__redis_group_stop,
};
