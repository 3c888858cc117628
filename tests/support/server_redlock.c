/* SPDX-License-Identifier: MIT */
/* server_redlock.c - the "redlock" server kind: 3 independent redis-servers
 * started and stopped as one server (server.h), reached by
 * redlock://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3. The dt_server is the
 * first node; the other two are its group, each a dt_server of kind redis
 * of its own, so every one-server call works on them (dt_redlock_node). */
#include "harness.h"
#include "server_kind.h"

#include <stdio.h>
#include <string.h>

#define NNODES 3

typedef struct group {
    int used;
    dt_server others[NNODES - 1];
} group;

/* Static, not malloc'd: a dt_server may live in memory shared with forked
 * tests (the conformance runner's), where LeakSanitizer sees no pointer to
 * a heap block. */
#define MAX_GROUPS 4
static group groups[MAX_GROUPS];

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
    group *g = NULL;
    const char *args[DT_SERVER_MAX_ARGS + 1];

    for (int i = 0; i < MAX_GROUPS && g == NULL; i++) {
        if (!groups[i].used)
            g = &groups[i];
    }
    if (g == NULL)
        dt_fail(__FILE__, __LINE__, "more than %d redlock groups at once", MAX_GROUPS);
    memset(g, 0, sizeof *g);
    g->used = 1;
    s->group = g;
    for (int i = 0; i < s->nargs; i++)
        args[i] = s->args[i];
    args[s->nargs] = NULL;
    for (int i = 0; i < NNODES - 1; i++)
        dt__server_start_kind(&g->others[i], &dt__redis_kind, s->flags, args);
    snprintf(s->url, sizeof s->url, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", s->port,
             g->others[0].port, g->others[1].port);
}

static void group_stop(dt_server *s, int kill)
{
    group *g = s->group;
    if (g == NULL)
        return;
    for (int i = 0; i < NNODES - 1; i++) {
        if (kill)
            dt_server_kill(&g->others[i]);
        else
            dt_server_stop(&g->others[i]);
    }
    s->group = NULL;
    g->used = 0;
}

dt_server *dt_redlock_node(dt_server *s, int i)
{
    group *g = s->group;
    if (g == NULL || i < 0 || i >= NNODES)
        dt_fail(__FILE__, __LINE__, "no node %d in a redlock group", i);
    return i == 0 ? s : &g->others[i - 1];
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
    .group_stop = group_stop,
};
