/* SPDX-License-Identifier: MIT */
/* node.c - a lock's node: the state a handle keeps of it (guarded by the
 * lock's mutex: the renewal thread reads it), making a contender node,
 * ranking a path's contenders, deleting a node (in the background when
 * ZooKeeper does not confirm it), and this client's read-write holds. */
#include "internal.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- deletes */

void dlock__zk_forget_rw_hold(zstore *z, const char *node)
{
    pthread_mutex_lock(&z->mu);
    for (rw_hold **p = &z->rw_holds; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->node, node) == 0) {
            rw_hold *h = *p;
            *p = h->next;
            free(h->node);
            free(h->token);
            free(h);
            break;
        }
    }
    pthread_mutex_unlock(&z->mu);
}

/* Deletes node (ours, in conn), waiting for ZooKeeper's answer until
 * deadline (0: not at all); one not confirmed by then is deleted in the
 * background (conn.h), until it is gone or its session is. Consumes the
 * caller's reference to conn and node. Returns the ZooKeeper code of the
 * attempt made now (ZOPERATIONTIMEOUT when not waited for). */
int dlock__zk_delete_node(zstore *z, dlock__zconn *conn, char *node, int64_t deadline)
{
    int zrc = ZOPERATIONTIMEOUT;
    if (deadline != 0 && dlock__now_us() < deadline)
        zrc = dlock__zk_delete(conn, node, deadline);
    dlock__zk_forget_rw_hold(z, node);
    if (zrc != ZOK && zrc != ZNONODE && !dlock__zk_session_over(zrc) && dlock__zconn_alive(conn))
        dlock__zconn_forget(conn, node);
    free(node);
    dlock__zconn_unref(conn);
    return zrc;
}

/* ---------------------------------------------------------------- per-lock state */

/* Takes the lock's node state (the caller owns node and conn then). */
void dlock__zk_take_node(zlock *l, char **node, dlock__zconn **conn)
{
    pthread_mutex_lock(&l->mu);
    *node = l->node;
    *conn = NULL;
    if (l->node != NULL) {
        *conn = l->conn;
        l->node = NULL;
        if (l->nleases > 0)
            dlock__zconn_ref(*conn); /* the leases keep theirs */
        else
            l->conn = NULL;
    }
    l->fence = 0;
    pthread_mutex_unlock(&l->mu);
}

/* Takes a semaphore's lease nodes (the caller owns them, and conn). */
char **dlock__zk_take_leases(zlock *l, unsigned *n, dlock__zconn **conn)
{
    pthread_mutex_lock(&l->mu);
    char **leases = l->leases;
    *n = l->nleases;
    *conn = NULL;
    if (l->nleases > 0) {
        *conn = l->conn;
        if (l->node != NULL)
            dlock__zconn_ref(*conn); /* the admission node keeps its */
        else
            l->conn = NULL;
    }
    l->leases = NULL;
    l->nleases = 0;
    l->lease_fence = 0;
    pthread_mutex_unlock(&l->mu);
    return leases;
}

/* Sets the lock's node, whose stat is st; conn is a reference, given to the
 * lock unless it has one to that connection already. */
void dlock__zk_set_node(zlock *l, char *node, dlock__zconn *conn, const struct Stat *st)
{
    pthread_mutex_lock(&l->mu);
    l->node = node;
    if (l->conn == NULL)
        l->conn = conn;
    else
        dlock__zconn_unref(conn);
    l->fence = dlock__zk_fence_of(st);
    l->czxid = st->czxid;
    pthread_mutex_unlock(&l->mu);
}

/* Drops the node state without deleting (its session is gone). */
void dlock__zk_drop_node(zlock *l)
{
    char *node;
    dlock__zconn *conn, *lconn;
    unsigned n;
    dlock__zk_take_node(l, &node, &conn);
    char **leases = dlock__zk_take_leases(l, &n, &lconn);
    free(node);
    dlock__zconn_unref(conn);
    for (unsigned i = 0; i < n; i++)
        free(leases[i]);
    free(leases);
    dlock__zconn_unref(lconn);
}

enum dlock__zk_marker dlock__zk_marker_of(const zlock *l)
{
    switch (l->base.spec.kind) {
    case DLOCK__READ:
        return DLOCK__ZK_READ;
    case DLOCK__WRITE:
        return DLOCK__ZK_WRITE;
    default:
        return DLOCK__ZK_LOCK;
    }
}

const enum dlock__zk_marker dlock__zk_mutex_markers[] = {DLOCK__ZK_LOCK, DLOCK__ZK_KAZOO};
static const enum dlock__zk_marker rw_markers[] = {DLOCK__ZK_READ, DLOCK__ZK_WRITE};

int dlock__zk_is_rw(const zlock *l)
{
    return l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__WRITE;
}

/* Whether a contender with this marker is one of l's own kind: the path of
 * a name holds the mutex's and the read-write lock's nodes together (one
 * name is one lock: the acquire ranks them all, dlock__zk_rank_all), but an
 * operator's call (query, holders, force-unlock) is about one kind. */
static int own_marker(const zlock *l, int marker)
{
    if (dlock__zk_is_rw(l))
        return marker == DLOCK__ZK_READ || marker == DLOCK__ZK_WRITE;
    return marker == DLOCK__ZK_LOCK || marker == DLOCK__ZK_KAZOO ||
           (l->base.spec.kind == DLOCK__SEMAPHORE && marker == DLOCK__ZK_LEASE);
}

/* Puts l's own kind's contenders among children first, ranked, and returns
 * how many there are. A lock's path also holds the paths of longer names
 * (`a/b` under `a`), a semaphore's own nodes and the contenders of the
 * name's other kinds, which are none of this kind's holders or waiters
 * (names.h keeps the first two from looking like contenders): ranked among
 * them, a path like `a/0` would come first and block `a` while it
 * exists. */
int dlock__zk_rank_own(const zlock *l, char **children, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (own_marker(l, dlock__zk_contender(children[i]))) {
            char *other = children[m];
            children[m++] = children[i];
            children[i] = other;
        }
    }
    if (dlock__zk_is_rw(l))
        dlock__zk_rank(children, (size_t) m, rw_markers, 2);
    else
        dlock__zk_rank(children, (size_t) m, dlock__zk_mutex_markers, 2);
    return m;
}

/* What a contender's node holds: "FIRST\nINFO", FIRST the owner token (a
 * lease node: "TOKEN TAKE/PERMITS") and INFO the client's owner_info
 * (backend.h), so that an operator can tell who holds a lock. Whatever
 * reads a node's owner reads its first line only (split_data). */
void dlock__zk_node_data(const zstore *z, const char *first, char *buf, size_t len)
{
    snprintf(buf, len, "%s\n%s", first, z->base.host.cfg->owner_info);
}

/* Lets go of a request whose answer is not wanted (its completion frees it). */
void dlock__zk_discard(dlock__zreq *q)
{
    dlock__zresult r;
    if (q != NULL) {
        dlock__zreq_wait(q, 0, &r);
        dlock__zresult_clear(&r);
    }
}

/* Makes an EPHEMERAL_SEQUENTIAL child of dir named "_c_<fresh uuid>-<marker>"
 * holding data: its full path in *out (the caller's) and its stat. A node
 * made whose reply the caller does not get (no reply in time, the
 * connection lost) is deleted in the background (dlock__zreq_create_owned):
 * the next attempt makes a fresh one.
 *
 * With listing not NULL, a list of dir's children goes out right behind the
 * create, in the same round trip: ZooKeeper runs a session's requests in
 * the order they were sent, so it sees the node made. *listing is that
 * request, to be waited for, once the create succeeded (NULL if it could
 * not be sent). */
int dlock__zk_create_child(zstore *z, zlock *l, dlock__zconn *c, const char *dir,
                           enum dlock__zk_marker marker, const char *data, int64_t deadline,
                           char **out, struct Stat *st, dlock__zreq **listing)
{
    char prefix[96], path[PATH_MAX_LEN];
    dlock__zresult r;

    *out = NULL;
    if (listing != NULL)
        *listing = NULL;
    if (dlock__zk_uuid(l->uuid) != 0)
        return dlock__fail(DLOCK_ENOMEM, "no randomness for a node name");
    dlock__zk_node_prefix(prefix, sizeof prefix, l->uuid, marker);
    snprintf(path, sizeof path, "%s/%s", dir, prefix);
    for (int tries = 0; tries < 3; tries++) {
        int zrc = ZOK;
        dlock__zreq *q = dlock__zreq_create_owned(c, path, data, (int) strlen(data), &zrc);
        int lrc = ZOK;
        dlock__zreq *list =
            q != NULL && listing != NULL ? dlock__zreq_children(c, dir, &lrc) : NULL;
        zrc = dlock__zk_run(q, zrc, deadline, &r);
        if (zrc == ZOK) {
            *out = r.path;
            *st = r.stat;
            r.path = NULL;
            dlock__zresult_clear(&r);
            if (listing != NULL)
                *listing = list;
            return DLOCK_OK;
        }
        dlock__zresult_clear(&r);
        dlock__zk_discard(list);
        if (zrc == ZNONODE) {
            /* the lock's path (or a parent) is missing: containers are
             * reaped once empty, also between making them and this */
            zrc = dlock__zk_make_parents(c, path, deadline);
            if (zrc == ZOK)
                continue;
        }
        return dlock__zk_fail(zrc, z->label, "create a lock node");
    }
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: the lock's path keeps disappearing", z->label);
}

/* Whether node (a full path) is a write hold of this client under token. */
int dlock__zk_own_write_hold(zstore *z, const char *node, const char *token)
{
    int own = 0;
    pthread_mutex_lock(&z->mu);
    for (rw_hold *h = z->rw_holds; h != NULL; h = h->next) {
        if (h->writer && strcmp(h->node, node) == 0 && strcmp(h->token, token) == 0)
            own = 1;
    }
    pthread_mutex_unlock(&z->mu);
    return own;
}

/* Whether token holds the read lock at path in this client. */
int dlock__zk_own_read_hold(zstore *z, const char *path, const char *token)
{
    size_t n = strlen(path);
    int own = 0;
    pthread_mutex_lock(&z->mu);
    for (rw_hold *h = z->rw_holds; h != NULL; h = h->next) {
        if (!h->writer && strncmp(h->node, path, n) == 0 && h->node[n] == '/' &&
            strcmp(h->token, token) == 0)
            own = 1;
    }
    pthread_mutex_unlock(&z->mu);
    return own;
}

void dlock__zk_remember_rw_hold(zstore *z, const char *node, const char *token, int writer)
{
    rw_hold *h = calloc(1, sizeof *h);
    if (h == NULL || (h->node = strdup(node)) == NULL || (h->token = strdup(token)) == NULL) {
        if (h != NULL)
            free(h->node);
        free(h);
        return; /* only the deadlock check and the downgrade miss it */
    }
    h->writer = writer;
    pthread_mutex_lock(&z->mu);
    h->next = z->rw_holds;
    z->rw_holds = h;
    pthread_mutex_unlock(&z->mu);
}
