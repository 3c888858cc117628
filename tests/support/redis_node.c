/* SPDX-License-Identifier: MIT */
/* redis_node.c - see redis_node.h. */
#define _GNU_SOURCE
#include "redis_node.h"

#include "harness.h"
#include "server_kind.h"

#include <stdio.h>
#include <string.h>

int dt__redis_node_args(const dt_server *s, int port, const char **argv, char bufs[][256])
{
    int argc = 0;
    snprintf(bufs[0], 256, "%d", port);
    argv[argc++] = "redis-server";
    argv[argc++] = "--port";
    argv[argc++] = bufs[0];
    argv[argc++] = "--bind";
    argv[argc++] = "127.0.0.1";
    argv[argc++] = "--save";
    argv[argc++] = "";
    argv[argc++] = "--appendonly";
    argv[argc++] = (s->flags & DT_PERSIST) ? "yes" : "no";
    argv[argc++] = "--dir";
    argv[argc++] = s->dir;
    argv[argc++] = "--daemonize";
    argv[argc++] = "no";
    /* Redis 7 refuses DEBUG by default */
    argv[argc++] = "--enable-debug-command";
    argv[argc++] = "local";
    argv[argc++] = "--repl-diskless-sync-delay";
    argv[argc++] = "0";
    return argc;
}

const char *dt__redis_password(const dt_server *s)
{
    for (int i = 0; i + 1 < s->nargs; i++) {
        if (strcmp(s->args[i], "--requirepass") == 0)
            return s->args[i + 1];
    }
    return NULL;
}

redisContext *dt__redis_connect(int port, const char *password, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL)
        return NULL;
    if (c->err) {
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (password != NULL)
        freeReplyObject(redisCommand(c, "AUTH %s", password));
    return c;
}

redisReply *dt__redis_vask(int port, const char *password, int timeout_ms, const char *fmt,
                           va_list ap)
{
    redisContext *c = dt__redis_connect(port, password, timeout_ms);
    if (c == NULL)
        return NULL;
    redisReply *r = redisvCommand(c, fmt, ap);
    redisFree(c);
    return r;
}

redisReply *dt__redis_ask(int port, const char *password, int timeout_ms, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = dt__redis_vask(port, password, timeout_ms, fmt, ap);
    va_end(ap);
    return r;
}

int dt__redis_pong(const redisReply *r)
{
    return r != NULL && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                         (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
}

void dt__redis_wipe_files(const dt_server *s)
{
    char path[256];
    snprintf(path, sizeof path, "%s/dump.rdb", s->dir);
    dt__remove_tree(path);
    snprintf(path, sizeof path, "%s/appendonlydir", s->dir);
    dt__remove_tree(path);
}

/* ---------------------------------------------------------------- groups */

typedef struct group {
    int used;
    int nodes;
    dt_server others[DT_REDIS_GROUP_NODES - 1];
} group;

#define MAX_GROUPS 4
static group groups[MAX_GROUPS];

void dt__redis_group_start(dt_server *s, int nodes, const dt_server_kind *kind, const char *what)
{
    group *g = NULL;
    const char *args[DT_SERVER_MAX_ARGS + 1];

    if (nodes < 1 || nodes > DT_REDIS_GROUP_NODES)
        dt_fail(__FILE__, __LINE__, "a %s group of %d nodes (1 to %d)", what, nodes,
                DT_REDIS_GROUP_NODES);
    for (int i = 0; i < MAX_GROUPS && g == NULL; i++) {
        if (!groups[i].used)
            g = &groups[i];
    }
    if (g == NULL)
        dt_fail(__FILE__, __LINE__, "more than %d %s groups at once", MAX_GROUPS, what);
    memset(g, 0, sizeof *g);
    g->used = 1;
    g->nodes = nodes;
    s->group = g;
    for (int i = 0; i < s->nargs; i++)
        args[i] = s->args[i];
    args[s->nargs] = NULL;
    for (int i = 0; i < nodes - 1; i++)
        dt__server_start_kind(&g->others[i], kind, s->flags, args);
}

void dt__redis_group_stop(dt_server *s, int kill)
{
    group *g = s->group;
    if (g == NULL)
        return;
    for (int i = g->nodes - 2; i >= 0; i--) {
        if (kill)
            dt_server_kill(&g->others[i]);
        else
            dt_server_stop(&g->others[i]);
    }
    s->group = NULL;
    g->used = 0;
}

dt_server *dt__redis_group_node(dt_server *s, int i, const char *what)
{
    group *g = s->group;
    if (g == NULL || i < 0 || i >= g->nodes)
        dt_fail(__FILE__, __LINE__, "no node %d in a %s group", i, what);
    return i == 0 ? s : &g->others[i - 1];
}
