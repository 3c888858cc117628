/* SPDX-License-Identifier: MIT */
/* redis_node.h - what the harness's Redis kinds share (server_redis.c,
 * server_sentinel.c, server_cluster.c, server_redlock.c): the arguments of
 * every redis-server they start, and the harness's own connections to a
 * node (its plain port, AUTH when the node has a password). */
#ifndef DLOCK_TEST_REDIS_NODE_H
#define DLOCK_TEST_REDIS_NODE_H

#include "server.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>

/* Fills argv from argv[0] with what every redis-server the harness starts
 * is given: the plain port `port` (into bufs[0]), loopback only, no RDB
 * snapshots, an AOF only with DT_PERSIST, s->dir, the foreground, DEBUG
 * allowed (DEBUG SLEEP is one of the faults), and replicas synced at once
 * (no 5 s diskless delay). Returns how many entries it wrote. */
int dt__redis_node_args(const dt_server *s, int port, const char **argv, char bufs[][256]);
/* The node's password (its "--requirepass" "X" arguments), or NULL. */
const char *dt__redis_password(const dt_server *s);
/* A connection to 127.0.0.1:port with send/receive timeouts, AUTH sent
 * first when password is not NULL; NULL if it cannot connect. */
redisContext *dt__redis_connect(int port, const char *password, int timeout_ms);
/* One command on a connection of its own; the reply (an error reply
 * included), or NULL. */
redisReply *dt__redis_ask(int port, const char *password, int timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
redisReply *dt__redis_vask(int port, const char *password, int timeout_ms, const char *fmt,
                           va_list ap);
/* Whether a reply to PING says the node is up: PONG, or NOAUTH (alive, and
 * wants a password); LOADING is not up yet. */
int dt__redis_pong(const redisReply *r);
/* Removes a node's data files from s->dir (dump.rdb, appendonlydir). */
void dt__redis_wipe_files(const dt_server *s);

/* A group of like nodes started as one server (the redlock and cluster
 * kinds): s is the first, launched by server.c; the others are dt_servers
 * of `kind` with s's arguments, kept in a static pool (a dt_server may
 * live in memory shared with forked tests, where LeakSanitizer sees no
 * pointer to a heap block). `what` names the kind in failures. */
#define DT_REDIS_GROUP_NODES 6 /* the most nodes in a group, s included */
void dt__redis_group_start(dt_server *s, int nodes, const dt_server_kind *kind, const char *what);
/* Stops the others from the last (kill: kill -9), before s itself is. */
void dt__redis_group_stop(dt_server *s, int kill);
/* Node i of the group (0: s itself). */
dt_server *dt__redis_group_node(dt_server *s, int i, const char *what);

#endif
