/* SPDX-License-Identifier: MIT */
/* server_redlock.c - the "redlock" server kind: 3 independent redis-servers
 * started and stopped as one server (server.h), reached by
 * redlock://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3. The dt_server is the
 * first node; the other two are its group, each a dt_server of kind redis
 * of its own, so every one-server call works on them (dt_redlock_node). */
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

dt_server *dt_redlock_node(dt_server *s, int i)
{
    return dt__redis_group_node(s, i, "redlock");
}

const dt_server_kind dt__redlock_kind = {
    .name = "redlock",
    .scheme = "redlock",
    .start_timeout_ms = 10000,
    .argv = node_argv,
    .answers = node_answers,
    .shutdown = node_shutdown,
    .cli_prefix = node_cli_prefix,
    .group_start = group_start,
    .group_stop = dt__redis_group_stop,
};
