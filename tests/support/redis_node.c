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
