/* SPDX-License-Identifier: MIT */
/* server_redlock.c - the "redlock" server kind: 3 independent redis-servers
 * started and stopped as one server (server.h), reached by
 * redlock://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3. The dt_server is the
 * first node; the other two are its group, each a dt_server of kind redis
 * of its own, so every one-server call works on them (dt_redlock_node).
 * "redlock-tls" is the same over TLS (rediss+redlock://...?cacert=): three
 * redis-tls servers with the first one's certificates. */
#include "harness.h"
#include "redis_node.h"
#include "server_kind.h"

#include <stdio.h>
#include <string.h>

#define NNODES 3

static void node_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    dt__redis_kind.argv(s, argv, bufs);
}

static int node_answers(const dt_server *s)
{
    return dt__redis_kind.answers(s);
}

static int node_shutdown(dt_server *s, int keep)
{
    return dt__redis_kind.shutdown(s, keep);
}

static void node_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    dt__redis_kind.cli_prefix(s, buf, len);
}

static void group_start(dt_server *s)
{
    dt__redis_group_start(s, NNODES, &dt__redis_kind, "redlock");
    snprintf(s->url, sizeof s->url, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", s->port,
             dt_redlock_node(s, 1)->port, dt_redlock_node(s, 2)->port);
}

static void tls_node_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    dt__redis_tls_kind.argv(s, argv, bufs);
}

static int tls_node_answers(const dt_server *s)
{
    return dt__redis_tls_kind.answers(s);
}

static int tls_node_shutdown(dt_server *s, int keep)
{
    return dt__redis_tls_kind.shutdown(s, keep);
}

static void tls_node_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    dt__redis_tls_kind.cli_prefix(s, buf, len);
}

static void tls_group_start(dt_server *s)
{
    char dir[200];
    /* the others use the first node's certificates (made by its start) */
    snprintf(dir, sizeof dir, "%s/tls", s->dir);
    if (s->nargs == DT_SERVER_MAX_ARGS || (size_t) snprintf(s->args[s->nargs], sizeof s->args[0],
                                                            "tls-dir:%s", dir) >= sizeof s->args[0])
        dt_fail(__FILE__, __LINE__, "no room for the redlock-tls group's tls-dir:%s", dir);
    s->nargs++;
    dt__redis_group_start(s, NNODES, &dt__redis_tls_kind, "redlock");
    if ((size_t) snprintf(
            s->url, sizeof s->url,
            "rediss+redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d?cacert=%s/ca.crt", s->port,
            dt_redlock_node(s, 1)->port, dt_redlock_node(s, 2)->port, dir) >= sizeof s->url)
        dt_fail(__FILE__, __LINE__, "the redlock-tls URL does not fit: %s", dir);
}

dt_server *dt_redlock_node(dt_server *s, int i)
{
    return dt__redis_group_node(s, i, "redlock");
}

/* Node 0 is the group's own dt_server, whose stop and kill stop the group
 * (group_stop): with the group set aside they act on node 0 alone. */
void dt_redlock_node_kill(dt_server *s, int i)
{
    dt_server *node = dt_redlock_node(s, i);
    void *group = node->group;
    node->group = NULL;
    dt_server_kill(node);
    node->group = group;
}

void dt_redlock_node_stop(dt_server *s, int i)
{
    dt_server *node = dt_redlock_node(s, i);
    void *group = node->group;
    node->group = NULL;
    dt_server_stop(node);
    node->group = group;
}

/* The redis kind's operations; node 0's kind has none of its own (the
 * group's would have to act on every node), so it is asked as a redis
 * node, and a change of its flags (persist) is kept. */
int dt_redlock_node_op(dt_server *s, int i, const char *op, const char *arg)
{
    dt_server *node = dt_redlock_node(s, i);
    if (i > 0)
        return dt_server_op(node, op, arg);
    dt_server view = *node;
    view.kind = &dt__redis_kind;
    view.group = NULL;
    int rc = dt_server_op(&view, op, arg);
    node->flags = view.flags;
    return rc;
}

static void node_wipe(const dt_server *s)
{
    dt__redis_kind.wipe(s);
}

const dt_server_kind dt__redlock_kind = {
    .name = "redlock",
    .scheme = "redlock",
    .start_timeout_ms = 10000,
    .argv = node_argv,
    .answers = node_answers,
    .wipe = node_wipe, /* node 0's own data (a restart of node 0 alone) */
    .shutdown = node_shutdown,
    .cli_prefix = node_cli_prefix,
    .group_start = group_start,
    .group_stop = dt__redis_group_stop,
};

const dt_server_kind dt__redlock_tls_kind = {
    .name = "redlock-tls",
    .scheme = "rediss+redlock",
    .needs_peer_port = 1,
    .start_timeout_ms = 10000,
    .argv = tls_node_argv,
    .answers = tls_node_answers,
    .shutdown = tls_node_shutdown,
    .cli_prefix = tls_node_cli_prefix,
    .group_start = tls_group_start,
    .group_stop = dt__redis_group_stop,
};
