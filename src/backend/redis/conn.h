/* SPDX-License-Identifier: MIT */
/* conn.h - a Redis command connection shared by many threads.
 *
 * Callers on any thread submit commands and block until
 * their replies arrive. Commands from concurrent callers are pipelined on the
 * one socket: whichever caller finds the socket idle writes everything that
 * is queued, and one caller at a time reads replies for everybody, handing
 * each to its owner in order. An uncontended call therefore costs exactly a
 * write and a read on the calling thread, as a bare hiredis loop does.
 *
 * The connection is opened on first use and re-opened after a failure. */
#ifndef DLOCK_REDIS_CONN_H
#define DLOCK_REDIS_CONN_H

#include "../log.h"
#include "transport.h"

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dlock__rconn dlock__rconn;

typedef struct dlock__rendpoint {
    const char *host; /* NULL for a unix socket */
    int port;
    const char *unix_path; /* used when host is NULL */
    const char *user;      /* may be NULL */
    const char *password;  /* NULL: no AUTH */
    int db;                /* SELECT when > 0 */
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    const dlock__rtls *tls; /* rediss://: TLS with these settings; NULL: plain */
    const char *label;      /* "redis://host:port" for messages */
    dlock__log *log;        /* the client's (connects, losses); NULL: none */
    const char *tls_scheme; /* the scheme to name in a "use TLS" hint; NULL: rediss:// */
    atomic_int *reached;    /* set to 1 by every connection made (its handshake answered);
                               NULL: not kept */
    /* Set by every dial: 1 when it found no Redis server there (nothing
     * took the connection: refused, no such host, the connect timeout; or
     * another service answered, "H:P answered, but not as Redis"), 0 when
     * one answered, refused us, or took the connection and kept silent (a
     * frozen server may wake). NULL: not kept. */
    atomic_int *absent;
    /* Set to 1 once the server showed that it is a node of a Redis
     * Cluster where the URL names one server (single) or independent
     * masters (its INFO cluster, a MOVED...): another kind of server than
     * the URL asks for, so no store of that kind was reached, whatever
     * `reached` says. NULL: not kept. */
    atomic_int *in_cluster;
    /* A changeable endpoint (Sentinel's master, sentinel.h): when dial is
     * set, every connection to ep is made by dial(ep, ...), which finds
     * the node to connect to, and `moved` counts the times that node
     * changed: a connection made before the count it sees now is to a
     * node that may no longer be the master, and is made again. NULL for
     * one fixed server (host, port or unix_path above). */
    dlock__rlink *(*dial)(const struct dlock__rendpoint *ep, int64_t deadline_us, int *code);
    void *node;         /* dial's state */
    atomic_uint *moved; /* NULL: never moves */
    /* What routes commands to this endpoint's node: the Redis Cluster it
     * belongs to (cluster.h), which a MOVED or ASK reply from it names
     * another node of; NULL: none. */
    void *router;
    /* One server named alone (redis://, rediss://, redis+unix://): its
     * handshake also asks INFO cluster, in the same write as its AUTH or
     * PING, and a node of a Redis Cluster is refused there
     * (DLOCK_EUNREACHABLE, "H:P answered, but not as a single Redis
     * server": the URL names one node of many), before a name whose slot it serves
     * can make the wrong URL look right. */
    int single;
    /* One of `independent` masters that a quorum spans (redlock://; 0:
     * not): its handshake asks INFO cluster too, and a node of a Redis
     * Cluster, or a replica, is refused as for `single`, the message
     * saying what Redlock needs. */
    size_t independent;
} dlock__rendpoint;

/* Copies what it needs from ep. Does not connect. */
int dlock__rconn_new(const dlock__rendpoint *ep, dlock__rconn **out);
void dlock__rconn_free(dlock__rconn *c);

/* One command as an argument vector (binary-safe). */
typedef struct dlock__rcmd {
    size_t argc;
    const char *const *argv;
    const size_t *lens;
} dlock__rcmd;

/*
 * Sends n commands as one pipelined batch and waits for their replies until
 * deadline_us (monotonic; capped by the command timeout).
 * On DLOCK_OK every replies[i] is set (the caller frees them with
 * freeReplyObject). Error replies (-ERR ...) are replies, not failures.
 * Fails with DLOCK_EUNREACHABLE (cannot connect, the connection broke, or
 * no reply in time: the commands may or may not have run, unless they were
 * still held back, never sent, which the message says), DLOCK_EPROTO
 * (garbage from the server, or a reply beyond the bounds below; the
 * connection is dropped) or DLOCK_ESERVER (AUTH/SELECT refused at connect).
 * On failure no reply is returned.
 */
int dlock__rconn_call(dlock__rconn *c, size_t n, const dlock__rcmd *cmds, int64_t deadline_us,
                      redisReply **replies);

/* The endpoint label, for messages. */
const char *dlock__rconn_label(const dlock__rconn *c);
/* Which connection c is, for its log lines ("command connection 2 of 2");
 * before it is used. */
void dlock__rconn_describe(dlock__rconn *c, const char *what);
/* The endpoint's router (NULL: none). */
void *dlock__rconn_router(const dlock__rconn *c);

/* Commands held back because replies are due: they go out in one write
 * when the next replies arrive. For tests and diagnostics. */
size_t dlock__rconn_held_back(dlock__rconn *c);

/* A reply parser that refuses what no reply of ours can be: an array of more
 * than DLOCK__REPLY_MAX_ELEMENTS elements (hiredis would allocate it whole
 * before reading any of it). Callers also bound the bytes they buffer. */
#define DLOCK__REPLY_MAX_ELEMENTS (1 << 20)
#define DLOCK__REPLY_MAX_BYTES    (64u << 20)
redisReader *dlock__rreader_new(void);
/* Whether the last parse error on this thread was a refused array. */
int dlock__rreader_refused(void);

/* Opens a link to ep (transport.h: a socket, or TLS) and runs AUTH/SELECT
 * over it, within the connect timeout and deadline_us; its socket is
 * close-on-exec, its timeout the command timeout (or what is left before
 * deadline_us) and its parser bounded as above. On failure
 * returns NULL with the detail recorded (dlock_errmsg) and *code set.
 * Shared with the subscriber connection. */
dlock__rlink *dlock__rconn_dial(const dlock__rendpoint *ep, int64_t deadline_us, int *code);
/* The same to host:port (or unix_path) of ep, whatever its dial: what a
 * dial of a changeable endpoint uses once it knows the node. */
dlock__rlink *dlock__rconn_dial_at(const dlock__rendpoint *ep, int64_t deadline_us, int *code);

/* Whether reply r of c to request `what` says that the URL names the
 * wrong kind of server, and if so fails saying which and what to use
 * instead: a Redis Cluster's MOVED, ASK, CLUSTERDOWN or CROSSSLOT to a URL
 * of one server or of independent masters (DLOCK_EUNREACHABLE, as another
 * kind of server at the port: "H:P answered, but not as a single Redis
 * server (a node of a Redis Cluster: ...): use redis+cluster://...", and
 * ep.in_cluster set), a replica's READONLY
 * or MASTERDOWN to a fixed endpoint (DLOCK_ESERVER, as every read-only
 * refusal: "this server is a replica (read-only): point the URL at the
 * master, or use redis+sentinel://..."; of independent masters: "H:P is a
 * replica (read-only): Redlock needs N independent masters"). DLOCK_OK,
 * nothing recorded, for any other reply
 * (and for every reply on a connection of a cluster or Sentinel client,
 * which follow these themselves). */
int dlock__rconn_wrong_server(const dlock__rconn *c, const char *what, const redisReply *r);

/* The node of a changeable endpoint is not the master any more (a reply
 * READONLY, LOADING or MASTERDOWN came from it): every connection to the
 * endpoint is made again, to the node found then; returns 1. A fixed
 * endpoint: nothing, returns 0. */
int dlock__rconn_moved(dlock__rconn *c);
/* Whether a reply says that its node does not take writes as a master
 * now (READONLY, LOADING, MASTERDOWN): the command did not run, and may
 * be sent again once the master is found. */
int dlock__rreply_not_master(const redisReply *r);

#endif
