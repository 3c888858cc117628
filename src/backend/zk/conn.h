/* SPDX-License-Identifier: MIT */
/* conn.h - one ZooKeeper session of a client: its handle, its dlock session
 * (../session.h), requests bounded by deadlines, and the nodes it still
 * has to get rid of.
 *
 * The ZooKeeper C client (libzookeeper_mt) runs an I/O thread and a
 * completion thread of its own, pings the server, and reconnects within the
 * session by itself. Its synchronous calls have no deadline, so every
 * request here is asynchronous and waited for up to a deadline; a request
 * given up on is left to its completion, which frees it.
 *
 * Nothing here blocks a caller past the deadline it gives: a session is
 * opened in the background and waited for (dlock__zconn_ready), and a
 * handle is closed by its own completion thread (zookeeper_close may wait
 * seconds for a server that does not answer; close.c says why there).
 *
 * A connection is alive until its session expires, its authentication
 * fails, it is not established within the connect timeout, or it is killed
 * (the core gave up on it, or the store closes): then it is dead for good,
 * its handle is closed, and the store opens a new one for new grants.
 *
 * Three files implement it, sharing conn_int.h: conn.c (opening the
 * session, requests, watches), close.c (the end of a connection) and
 * orphans.c (the nodes it still has to delete). */
#ifndef DLOCK_ZK_CONN_H
#define DLOCK_ZK_CONN_H

#include "../board.h"
#include "../session.h"

#include <stdint.h>
#include <zookeeper/zookeeper.h>

typedef struct dlock__zconn dlock__zconn;

typedef struct dlock__zconn_cfg {
    const char *hosts;   /* "h1:p1,h2:p2" */
    const char *auth;    /* "user:password" for digest auth, or NULL */
    const char *label;   /* for messages */
    int64_t session_ms;  /* session timeout asked for */
    int64_t connect_ms;  /* how long a session may take to be established */
    dlock__board *board; /* waiters' wake-ups */
    dlock__sessions *sessions;
} dlock__zconn_cfg;

/* Starts opening a session and returns at once: DLOCK_OK with *out (one
 * reference), to be waited for with dlock__zconn_ready(); DLOCK_EUNREACHABLE
 * (the client library refused the hosts) or DLOCK_ENOMEM. */
int dlock__zconn_open(const dlock__zconn_cfg *cfg, dlock__zconn **out);

/* Waits until c's session is established (and, with credentials, they were
 * accepted), at most until deadline_us: DLOCK_OK, DLOCK_EUNREACHABLE (not
 * yet; once the connect timeout has passed, c is dead), or DLOCK_ESERVER
 * (authentication refused; c is dead). The first caller to see it
 * established makes one round trip and starts the core's session, valid
 * from that round trip's send time. */
int dlock__zconn_ready(dlock__zconn *c, int64_t deadline_us);

void dlock__zconn_ref(dlock__zconn *c);
/* Drops a reference (from any thread, ZooKeeper's too); the last one
 * starts closing the handle, and c is freed once it is closed. */
void dlock__zconn_unref(dlock__zconn *c);

/* Whether the session can still be used for new requests. */
int dlock__zconn_alive(dlock__zconn *c);
/* Whether it is over for good (a new one must replace it); one still being
 * opened is not. */
int dlock__zconn_dead(dlock__zconn *c);
/* Whether the client library is connected to a server right now (it
 * reconnects by itself after a connection is lost). */
int dlock__zconn_connected(dlock__zconn *c);
/* Ends its session now and closes its handle in the background, so that the
 * server deletes its nodes (the core gave up on it, or the store closes);
 * its waiters look again, and it is detached (below). Returns at once. */
void dlock__zconn_kill(dlock__zconn *c, const char *why);
/* The client lets go of c (it closes): c no longer touches the client's
 * board or sessions, whatever its handle's threads do until it is closed. */
void dlock__zconn_detach(dlock__zconn *c);
/* Waits until a killed connection's handle is closed (every callback of it
 * has run), at most until deadline_us. */
void dlock__zconn_wait_closed(dlock__zconn *c, int64_t deadline_us);

/* The core's session for it (the connection's reference), and the
 * ZooKeeper session id (the ephemeralOwner of its nodes). */
dlock__session *dlock__zconn_session(dlock__zconn *c);
int64_t dlock__zconn_id(dlock__zconn *c);
/* A reference to the core's session for a grant, or NULL once it ended
 * (the nodes of it are gone). */
dlock__session *dlock__zconn_session_ref(dlock__zconn *c);

/* ---------------------------------------------------------------- orphans */

/* Deletes node (ours, in c's session) in the background: asked again after
 * every reconnect and at every dlock__zconn_kick() until ZooKeeper confirms
 * it is gone, or the session is over (which takes the node with it).
 * Returns at once. When more nodes wait than a session may keep, the
 * session is ended instead (the server then deletes them all). */
void dlock__zconn_forget(dlock__zconn *c, const char *node);
/* Sends again the background requests that failed (after a reconnect, the
 * ZooKeeper watcher does it by itself). Returns at once. */
void dlock__zconn_kick(dlock__zconn *c);
/* Nodes still to delete in the background (for tests and checks). */
int dlock__zconn_orphans(dlock__zconn *c);

/* ---------------------------------------------------------------- requests */

/* One asynchronous request and what it returned. */
typedef struct dlock__zreq dlock__zreq;

typedef struct dlock__zresult {
    int rc;           /* ZOK, Z... */
    struct Stat stat; /* exists, get, create2 */
    int have_stat;
    char *path;      /* create: the node made */
    char **children; /* get_children */
    int nchildren;
    char *data; /* get */
    int datalen;
    int nops; /* multi: each op's error, and the path each create made */
    int *op_errors;
    char **op_paths;
} dlock__zresult;

void dlock__zresult_clear(dlock__zresult *r);

/* Each starts a request and returns it (NULL: the request could not even be
 * sent; the reason is in *rc). dlock__zreq_wait() collects it. */
dlock__zreq *dlock__zreq_create(dlock__zconn *c, const char *path, const char *data, int datalen,
                                int mode, int *rc);
/* An EPHEMERAL_SEQUENTIAL node of ours, path "DIR/_c_<uuid>-<marker>"
 * (Curator's protection: the uuid is fresh for each create). The caller
 * owns the node only when dlock__zreq_wait() returns ZOK. Whatever else
 * happens (no reply by the deadline, a reply that comes later, the
 * connection lost with the outcome unknown), a node it made is found (by
 * its uuid) and deleted in the background, in this session. */
dlock__zreq *dlock__zreq_create_owned(dlock__zconn *c, const char *path, const char *data,
                                      int datalen, int *rc);
dlock__zreq *dlock__zreq_delete(dlock__zconn *c, const char *path, int *rc);
dlock__zreq *dlock__zreq_exists(dlock__zconn *c, const char *path, int *rc);
dlock__zreq *dlock__zreq_get(dlock__zconn *c, const char *path, int *rc);
dlock__zreq *dlock__zreq_children(dlock__zconn *c, const char *path, int *rc);
/* get with a watch that posts a recheck on the board for `token` when the
 * node changes or goes (Curator's predecessor watch: getData, which leaves
 * no watch behind when the node is already gone). */
dlock__zreq *dlock__zreq_watch(dlock__zconn *c, const char *path, const char *token, int *rc);
/* getChildren with such a watch: a recheck when a child comes or goes. */
dlock__zreq *dlock__zreq_watch_children(dlock__zconn *c, const char *path, const char *token,
                                        int *rc);
/* Several creates and deletes as one transaction (ops and the strings they
 * point to are copied). A create of a contender node (DIR/_c_<uuid>-...)
 * is owned as dlock__zreq_create_owned's: the caller owns the nodes only
 * when dlock__zreq_wait() returns ZOK (op_paths names them); whatever else
 * happens, the nodes the transaction made are deleted in the background. A
 * transaction that fails makes nothing; op_errors says which op failed
 * (the others say ZOK or ZRUNTIMEINCONSISTENCY). */
dlock__zreq *dlock__zreq_multi(dlock__zconn *c, int n, const zoo_op_t *ops, int *rc);

/* Waits for req until deadline_us and moves its result to *out (the caller
 * clears it). Returns out->rc, or ZOPERATIONTIMEOUT if the deadline came
 * first (the request then finishes on its own). Consumes req. */
int dlock__zreq_wait(dlock__zreq *req, int64_t deadline_us, dlock__zresult *out);

/* Whether a ZooKeeper code says the session is over (its nodes with it). */
int dlock__zk_session_over(int zrc);

/* A ZooKeeper return code as a dlock code with a message naming what. */
int dlock__zk_fail(int zrc, const char *label, const char *what);

#endif
