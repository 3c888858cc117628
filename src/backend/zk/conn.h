/* conn.h - one ZooKeeper session of a client: its handle, its dlock session
 * (core/session.h), and requests bounded by deadlines.
 *
 * The ZooKeeper C client (libzookeeper_mt) runs an I/O thread and a
 * completion thread of its own, pings the server, and reconnects within the
 * session by itself. Its synchronous calls have no deadline, so every
 * request here is asynchronous and waited for up to a deadline; a request
 * given up on is left to its completion, which frees it.
 *
 * A connection is alive until its session expires, its authentication
 * fails, or the core gives up on it (the session's validity ran out): then
 * it is dead for good, its handle is closed by the next caller outside the
 * client's own threads, and the store opens a new one for new grants. */
#ifndef DLOCK_ZK_CONN_H
#define DLOCK_ZK_CONN_H

#include "../../core/board.h"
#include "../../core/session.h"

#include <stdint.h>
#include <zookeeper/zookeeper.h>

typedef struct dlock__zconn dlock__zconn;

typedef struct dlock__zconn_cfg {
    const char *hosts;   /* "h1:p1,h2:p2" */
    const char *auth;    /* "user:password" for digest auth, or NULL */
    const char *label;   /* for messages */
    int64_t session_ms;  /* session timeout asked for */
    int64_t connect_ms;  /* how long to wait for the session */
    dlock__board *board; /* waiters' wake-ups */
    dlock__sessions *sessions;
} dlock__zconn_cfg;

/* Opens a session and waits until it is established (or the connect
 * timeout): DLOCK_OK with *out (one reference), DLOCK_EUNREACHABLE,
 * DLOCK_ESERVER (authentication refused) or DLOCK_ENOMEM. */
int dlock__zconn_open(const dlock__zconn_cfg *cfg, dlock__zconn **out);

void dlock__zconn_ref(dlock__zconn *c);
/* Drops a reference; the last one closes the handle (never call it on a
 * ZooKeeper thread: zookeeper_close would wait for itself). */
void dlock__zconn_unref(dlock__zconn *c);

/* Whether the session can still be used for new requests. */
int dlock__zconn_alive(dlock__zconn *c);
/* Ends its session and closes its handle now, so that the server deletes
 * its nodes (the core gave up on it, or the store closes). Not on a
 * ZooKeeper thread. */
void dlock__zconn_kill(dlock__zconn *c, const char *why);

/* The core's session for it (the connection's reference), and the
 * ZooKeeper session id (the ephemeralOwner of its nodes). */
dlock__session *dlock__zconn_session(dlock__zconn *c);
int64_t dlock__zconn_id(dlock__zconn *c);

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
 * point to are copied). */
dlock__zreq *dlock__zreq_multi(dlock__zconn *c, int n, const zoo_op_t *ops, int *rc);

/* Waits for req until deadline_us and moves its result to *out (the caller
 * clears it). Returns out->rc, or ZOPERATIONTIMEOUT if the deadline came
 * first (the request then finishes on its own). Consumes req. */
int dlock__zreq_wait(dlock__zreq *req, int64_t deadline_us, dlock__zresult *out);

/* A ZooKeeper return code as a dlock code with a message naming what. */
int dlock__zk_fail(int zrc, const char *label, const char *what);

#endif
