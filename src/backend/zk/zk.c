/* SPDX-License-Identifier: MIT */
/* zk.c - the ZooKeeper backend: zk://host:port[,host:port...][/base][?options].
 *
 * Locks are Apache Curator's recipes (recipe.h), so that dlock and Curator
 * exclude one another on the same path: the lock `name` under the URL's base
 * is the znode BASE/name, and each contender creates an ephemeral sequential
 * child there. A contender holds the lock when it ranks first (a mutex), or
 * when no writer ranks ahead of it (a reader); any other watches the one
 * just ahead of it, so a release wakes one waiter, never all.
 *
 * Liveness is the client's ZooKeeper session (conn.h): every grant names it,
 * and the core reports every lock lost when the session expires or could
 * have expired (its validity is counted from the last round trip that
 * succeeded).
 *
 * Fences (fence_of): the holder node's creation time on the server (ctime,
 * ms) times 2^20 plus its creation zxid (czxid). ZooKeeper orders every write
 * of the ensemble by zxid, and a later holder's node was created after every
 * earlier holder's, so while the ensemble keeps its data the zxid part grows
 * and the time part does not shrink (leaders' clocks are not set back):
 * fences strictly increase. An ensemble rebuilt from nothing starts its
 * zxids again near 0; the time part still puts later fences above earlier
 * ones once the rebuild took longer than old czxid / 2^20 ms (about 4 s per
 * 2^32 zxids, i.e. per election epoch). The node's sequence number is no use:
 * it restarts whenever the lock's container is reaped.
 *
 * Node data: every contender's node holds "TOKEN\nINFO", its owner token, a
 * newline and the client's owner_info (backend.h; a lease node's first line
 * is "TOKEN TAKE/PERMITS"), so that an operator sees who holds a lock
 * (zk_holders). A peer's node (Curator's, kazoo's) has no newline: all of
 * its data is its owner. Only the first line is ever read as the owner.
 *
 * State per handle (zlock): the node it created for its current wait or
 * hold. The renewal thread reads it to check a hold, so it is guarded by the
 * lock's mutex.
 *
 * No node outlives the attempt that made it while its session lives (it
 * would block everyone behind it): a try that does not take the lock, or
 * fails half way, deletes what it made before it returns; a wait that gives
 * up is cancelled by the core, which deletes it; a release deletes it. A
 * delete that ZooKeeper does not confirm in time, and a create whose outcome
 * the caller never learned, are left to the connection's orphan list
 * (conn.h), which deletes them in the background until ZooKeeper confirms.
 * A release whose delete was not confirmed says DLOCK_EUNREACHABLE.
 *
 * Every call ends by the deadline the core gives: opening a session is
 * waited for only that long (conn.h), a session is closed in the
 * background, and background deletes are never waited for. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../backend.h"
#include "conn.h"
#include "names.h"
#include "recipe.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT       2181
#define DEFAULT_BASE       "/dlock"
#define DEFAULT_CONNECT_MS 5000
#define PATH_MAX_LEN       1024
#define NODE_DATA_MAX      512 /* a token, its lease's take/permits, the owner_info */

extern const dlock__backend dlock__zk_backend;

/* A hold of a read-write lock in this client: a reader asking to write gets
 * EDEADLK, and a writer's own read hold passes its write node (downgrade). */
typedef struct rw_hold {
    struct rw_hold *next;
    char *node; /* full path */
    char *token;
    int writer;
} rw_hold;

typedef struct zstore {
    dlock__store base;
    dlock__zconn_cfg cfg;
    char *hosts, *auth, *base_path, *label;
    int64_t timeout_ms;

    pthread_mutex_t mu; /* conn, connecting, rw_holds */
    pthread_cond_t cv;  /* connecting ends (CLOCK_MONOTONIC) */
    dlock__zconn *conn; /* the current session (a reference), NULL before the first */
    int connecting;
    rw_hold *rw_holds;
    atomic_int reached; /* a session was established once */
} zstore;

typedef struct zlock {
    dlock__store_lock base;
    char *path;         /* BASE/name */
    pthread_mutex_t mu; /* node, conn, fence: read by the renewal thread */
    char *node;         /* our node for the current wait or hold (full path) */
    dlock__zconn *conn; /* the session it lives in (a reference) */
    uint64_t fence;
    int64_t czxid; /* node's creation zxid: its place among the contenders of every
                      kind of the name (see "One name, one lock") */
    /* a semaphore: node is the admission node (in locks/) while it waits;
     * leases are its lease nodes (in leases/), `take` of them once admitted */
    char *locks_path, *leases_path;
    char **leases;
    unsigned nleases;
    uint64_t lease_fence; /* the largest of the lease nodes' fences */
    char uuid[37];        /* of the node being made */
} zlock;

#define ZSTORE(s) DLOCK__STORE_OF(zstore, s)
#define ZLOCK(l)  DLOCK__STORE_OF(zlock, l)

static int64_t deadline_of(const zstore *z, int64_t deadline_us)
{
    int64_t cap = dlock__now_us() + z->timeout_ms * 1000;
    return deadline_us < cap ? deadline_us : cap;
}

/* The deadline of a release: the core's, but only a tenth of a command
 * timeout while the client library is not connected (the connection was
 * lost: the delete waits for a reconnect). Such a release says at once
 * that it is not confirmed, and goes on in the background: several
 * releases in a row (a multi-lock's members) do not each wait a command
 * timeout for a server that is gone. */
static int64_t release_deadline(const zstore *z, dlock__zconn *c, int64_t deadline_us)
{
    int64_t deadline = deadline_of(z, deadline_us);
    int64_t soon = dlock__now_us() + z->timeout_ms * 100;
    if (c != NULL && soon < deadline && !dlock__zconn_connected(c))
        deadline = soon;
    return deadline;
}

/* The fence of a holder's node (see the design note). */
static uint64_t fence_of(const struct Stat *st)
{
    return ((uint64_t) st->ctime << 20) + (uint64_t) st->czxid;
}

/* ---------------------------------------------------------------- the session */

/* The current session, opened if there is none alive, waited for until
 * deadline at most. *out is a reference. */
static int get_conn(zstore *z, int64_t deadline, dlock__zconn **out)
{
    dlock__zconn *c = NULL, *old = NULL;
    int rc = DLOCK_OK;

    *out = NULL;
    pthread_mutex_lock(&z->mu);
    for (;;) {
        if (z->conn != NULL && !dlock__zconn_dead(z->conn)) {
            c = z->conn;
            dlock__zconn_ref(c);
            break;
        }
        if (!z->connecting) {
            /* replace it: this thread opens the next one */
            z->connecting = 1;
            old = z->conn;
            z->conn = NULL;
            break;
        }
        /* another thread opens it (zookeeper_init returns at once) */
        struct timespec ts = dlock__timespec(deadline);
        if (pthread_cond_timedwait(&z->cv, &z->mu, &ts) == ETIMEDOUT && z->connecting) {
            pthread_mutex_unlock(&z->mu);
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: no ZooKeeper session yet", z->label);
        }
    }
    pthread_mutex_unlock(&z->mu);
    if (c == NULL) {
        if (old != NULL) {
            dlock__zconn_kill(old, "replaced by a new session");
            dlock__zconn_unref(old);
        }
        rc = dlock__zconn_open(&z->cfg, &c);
        pthread_mutex_lock(&z->mu);
        z->connecting = 0;
        z->conn = c;
        if (c != NULL)
            dlock__zconn_ref(c);
        pthread_cond_broadcast(&z->cv);
        pthread_mutex_unlock(&z->mu);
        if (rc != DLOCK_OK)
            return rc;
    }
    rc = dlock__zconn_ready(c, deadline);
    if (rc != DLOCK_OK) {
        dlock__zconn_unref(c);
        return rc;
    }
    atomic_store(&z->reached, 1);
    *out = c;
    return DLOCK_OK;
}

static int zk_reached(dlock__store *s)
{
    return atomic_load(&ZSTORE(s)->reached);
}

/* The opening of a call: *deadline capped at one command timeout, then
 * the session (a reference in *out), waited for until then. */
static int open_call(zstore *z, int64_t *deadline, dlock__zconn **out)
{
    *deadline = deadline_of(z, *deadline);
    return get_conn(z, *deadline, out);
}

/* A grant found the session over (it ended after the call began): its
 * nodes are gone; the next call opens a new one. */
static int session_ended(const zstore *z)
{
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: the ZooKeeper session ended during the request",
                       z->label);
}

/* ---------------------------------------------------------------- requests */

/* Runs one request to its end: the ZooKeeper code. */
static int run(dlock__zreq *q, int zrc, int64_t deadline, dlock__zresult *r)
{
    memset(r, 0, sizeof *r);
    if (q == NULL) {
        r->rc = zrc;
        return zrc;
    }
    return dlock__zreq_wait(q, deadline, r);
}

static int zk_children(dlock__zconn *c, const char *path, int64_t deadline, dlock__zresult *r)
{
    int zrc = ZOK;
    dlock__zreq *q = dlock__zreq_children(c, path, &zrc);
    return run(q, zrc, deadline, r);
}

static int zk_exists(dlock__zconn *c, const char *path, int64_t deadline, dlock__zresult *r)
{
    int zrc = ZOK;
    dlock__zreq *q = dlock__zreq_exists(c, path, &zrc);
    return run(q, zrc, deadline, r);
}

static int zk_delete(dlock__zconn *c, const char *path, int64_t deadline)
{
    dlock__zresult r;
    int zrc = ZOK;
    dlock__zreq *q = dlock__zreq_delete(c, path, &zrc);
    zrc = run(q, zrc, deadline, &r);
    dlock__zresult_clear(&r);
    return zrc;
}

/* Creates every missing ancestor of path (not path itself) as a container
 * node, as Curator does (the server removes them once empty). */
static int make_parents(dlock__zconn *c, const char *path, int64_t deadline)
{
    char buf[PATH_MAX_LEN];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = strchr(buf + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
        *p = '\0';
        dlock__zresult r;
        int zrc = ZOK;
        dlock__zreq *q = dlock__zreq_create(c, buf, NULL, -1, ZOO_CONTAINER, &zrc);
        zrc = run(q, zrc, deadline, &r);
        dlock__zresult_clear(&r);
        *p = '/';
        if (zrc != ZOK && zrc != ZNODEEXISTS)
            return zrc;
    }
    return ZOK;
}

/* ---------------------------------------------------------------- deletes */

static void forget_rw_hold(zstore *z, const char *node)
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
static int delete_node(zstore *z, dlock__zconn *conn, char *node, int64_t deadline)
{
    int zrc = ZOPERATIONTIMEOUT;
    if (deadline != 0 && dlock__now_us() < deadline)
        zrc = zk_delete(conn, node, deadline);
    forget_rw_hold(z, node);
    if (zrc != ZOK && zrc != ZNONODE && !dlock__zk_session_over(zrc) && dlock__zconn_alive(conn))
        dlock__zconn_forget(conn, node);
    free(node);
    dlock__zconn_unref(conn);
    return zrc;
}

/* ---------------------------------------------------------------- per-lock state */

/* Takes the lock's node state (the caller owns node and conn then). */
static void take_node(zlock *l, char **node, dlock__zconn **conn)
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
static char **take_leases(zlock *l, unsigned *n, dlock__zconn **conn)
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
static void set_node(zlock *l, char *node, dlock__zconn *conn, const struct Stat *st)
{
    pthread_mutex_lock(&l->mu);
    l->node = node;
    if (l->conn == NULL)
        l->conn = conn;
    else
        dlock__zconn_unref(conn);
    l->fence = fence_of(st);
    l->czxid = st->czxid;
    pthread_mutex_unlock(&l->mu);
}

/* Drops the node state without deleting (its session is gone). */
static void drop_node(zlock *l)
{
    char *node;
    dlock__zconn *conn, *lconn;
    unsigned n;
    take_node(l, &node, &conn);
    char **leases = take_leases(l, &n, &lconn);
    free(node);
    dlock__zconn_unref(conn);
    for (unsigned i = 0; i < n; i++)
        free(leases[i]);
    free(leases);
    dlock__zconn_unref(lconn);
}

static enum dlock__zk_marker marker_of(const zlock *l)
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

static const enum dlock__zk_marker mutex_markers[] = {DLOCK__ZK_LOCK, DLOCK__ZK_KAZOO};
static const enum dlock__zk_marker rw_markers[] = {DLOCK__ZK_READ, DLOCK__ZK_WRITE};

static int is_rw(const zlock *l)
{
    return l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__WRITE;
}

/* Whether a contender with this marker is one of l's own kind: the path of
 * a name holds the mutex's and the read-write lock's nodes together (one
 * name is one lock: the acquire ranks them all, dlock__zk_rank_all), but an
 * operator's call (query, holders, force-unlock) is about one kind. */
static int own_marker(const zlock *l, int marker)
{
    if (is_rw(l))
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
static int rank(const zlock *l, char **children, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (own_marker(l, dlock__zk_contender(children[i]))) {
            char *other = children[m];
            children[m++] = children[i];
            children[i] = other;
        }
    }
    if (is_rw(l))
        dlock__zk_rank(children, (size_t) m, rw_markers, 2);
    else
        dlock__zk_rank(children, (size_t) m, mutex_markers, 2);
    return m;
}

/* What a contender's node holds: "FIRST\nINFO", FIRST the owner token (a
 * lease node: "TOKEN TAKE/PERMITS") and INFO the client's owner_info
 * (backend.h), so that an operator can tell who holds a lock. Whatever
 * reads a node's owner reads its first line only (split_data). */
static void node_data(const zstore *z, const char *first, char *buf, size_t len)
{
    snprintf(buf, len, "%s\n%s", first, z->base.host.cfg->owner_info);
}

/* Lets go of a request whose answer is not wanted (its completion frees it). */
static void discard(dlock__zreq *q)
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
static int create_child(zstore *z, zlock *l, dlock__zconn *c, const char *dir,
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
        zrc = run(q, zrc, deadline, &r);
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
        discard(list);
        if (zrc == ZNONODE) {
            /* the lock's path (or a parent) is missing: containers are
             * reaped once empty, also between making them and this */
            zrc = make_parents(c, path, deadline);
            if (zrc == ZOK)
                continue;
        }
        return dlock__zk_fail(zrc, z->label, "create a lock node");
    }
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: the lock's path keeps disappearing", z->label);
}

/* Whether node (a full path) is a write hold of this client under token. */
static int own_write_hold(zstore *z, const char *node, const char *token)
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
static int own_read_hold(zstore *z, const char *path, const char *token)
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

static void remember_rw_hold(zstore *z, const char *node, const char *token, int writer)
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

/* ---------------------------------------------------------------- one name, one lock */

/*
 * One name is one lock: the mutex, the read-write lock and the semaphore of
 * a name exclude each other, first come, first served (a contender waits
 * for every contender of another kind that came before it, holder or
 * waiter, as it does for its own kind's). The mutex's and the read-write
 * lock's nodes share the name's path, so their sequence orders them
 * (dlock__zk_rank_all, standing). The semaphore's nodes are one level down
 * (locks/ to be admitted, leases/ to hold), so between the semaphore and
 * the other kinds the order is the creation zxid, ZooKeeper's order of
 * every write: a semaphore contender's place is its admission node's.
 *
 *  - A mutex or read-write contender that no node of the path keeps out
 *    waits for any lease node (a holder, or the contender admitted and
 *    waiting for room) and for an admission node made before its own node
 *    (semaphore_ahead). It lists locks/ before leases/: a semaphore
 *    contender deletes its admission node only after its lease nodes are
 *    made, so one of the two lists shows it.
 *  - A semaphore contender at the head of admission, before it makes its
 *    lease nodes, waits for the oldest mutex or read-write node of the
 *    path if that was made before its admission node (kinds_ahead).
 *
 * Each side makes its node first and looks after, so of two contenders the
 * later one sees the earlier; neither waits for a later one, so two never
 * wait for each other. A semaphore contender makes lease nodes only once it
 * found no older node of another kind, so a lease node keeps out only those
 * that came after its holder. A lock used as one kind only pays nothing for
 * this: a mutex's listing (sent with its create) shows no locks/ or leases/,
 * and a semaphore's listing of the path goes with its admission listing.
 * Curator's and kazoo's recipes look only at their own kind: they do not
 * wait for dlock's other kinds (docs/zookeeper.md). A contender that finds
 * another kind at the head reads those holders' data (owner_leads): if it
 * is its own owner's, it would wait for itself, and it is EDEADLK.
 */

/* The kind of lock a child of a lock's path contends for (SAME: none). */
static enum dlock__held_as kind_of_node(const char *child)
{
    switch (dlock__zk_contender(child)) {
    case DLOCK__ZK_LOCK:
    case DLOCK__ZK_KAZOO:
        return DLOCK__HELD_AS_MUTEX;
    case DLOCK__ZK_READ:
    case DLOCK__ZK_WRITE:
        return DLOCK__HELD_AS_RW;
    default:
        return DLOCK__HELD_AS_SAME;
    }
}

static enum dlock__held_as kind_of_lock(const zlock *l)
{
    if (l->base.spec.kind == DLOCK__SEMAPHORE)
        return DLOCK__HELD_AS_SEMAPHORE;
    return is_rw(l) ? DLOCK__HELD_AS_RW : DLOCK__HELD_AS_MUTEX;
}

/* Whether a lock path's children include a semaphore's (locks/, leases/). */
static int has_semaphore(char **children, int n)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(children[i], "locks") == 0 || strcmp(children[i], "leases") == 0)
            return 1;
    }
    return 0;
}

/* A mutex or read-write contender whose node was made at zxid mine, and
 * which no node of the path keeps out: the node of the semaphore of its
 * name to wait for (full path into blocker, PATH_MAX_LEN bytes), or "".
 * A ZooKeeper code; ZNONODE: a node went while we looked, look again. */
static int semaphore_ahead(const zlock *l, dlock__zconn *c, int64_t mine, int64_t deadline,
                           char *blocker)
{
    char locks[PATH_MAX_LEN], leases[PATH_MAX_LEN];
    dlock__zresult adm, held, st;
    int asent = ZOK, lsent = ZOK;

    blocker[0] = '\0';
    snprintf(locks, sizeof locks, "%s/locks", l->path);
    snprintf(leases, sizeof leases, "%s/leases", l->path);
    /* admission first (see above), both in one round trip */
    dlock__zreq *aq = dlock__zreq_children(c, locks, &asent);
    dlock__zreq *lq = dlock__zreq_children(c, leases, &lsent);
    int azrc = run(aq, asent, deadline, &adm);
    int lzrc = run(lq, lsent, deadline, &held);
    int zrc = azrc != ZOK && azrc != ZNONODE ? azrc : lzrc != ZOK && lzrc != ZNONODE ? lzrc : ZOK;
    memset(&st, 0, sizeof st);
    if (zrc != ZOK)
        goto out;
    dlock__zk_rank_all(held.children, (size_t) held.nchildren);
    dlock__zk_rank_all(adm.children, (size_t) adm.nchildren);
    if (held.nchildren > 0 && dlock__zk_contender(held.children[0]) >= 0) {
        snprintf(blocker, PATH_MAX_LEN, "%s/leases/%s", l->path, held.children[0]);
    } else if (adm.nchildren > 0 && dlock__zk_contender(adm.children[0]) >= 0) {
        /* the oldest admission node (a path's sequence follows its creates) */
        char oldest[PATH_MAX_LEN];
        snprintf(oldest, sizeof oldest, "%s/locks/%s", l->path, adm.children[0]);
        zrc = zk_exists(c, oldest, deadline, &st);
        if (zrc == ZOK && st.stat.czxid < mine)
            snprintf(blocker, PATH_MAX_LEN, "%s", oldest);
    }
out:
    dlock__zresult_clear(&adm);
    dlock__zresult_clear(&held);
    dlock__zresult_clear(&st);
    return zrc;
}

/* A semaphore contender at the head of admission, whose admission node was
 * made at zxid mine: the oldest mutex or read-write contender among
 * children (the name's path's), if it came first (full path into blocker,
 * PATH_MAX_LEN bytes, its kind in *held_as), else "". A ZooKeeper code;
 * ZNONODE: it went while we looked, look again. */
static int kinds_ahead(const zlock *l, dlock__zconn *c, char **children, int n, int64_t mine,
                       int64_t deadline, char *blocker, enum dlock__held_as *held_as)
{
    dlock__zresult st;
    int first = -1, zrc;

    blocker[0] = '\0';
    dlock__zk_rank_all(children, (size_t) n);
    for (int i = 0; i < n && first < 0; i++) {
        if (kind_of_node(children[i]) != DLOCK__HELD_AS_SAME)
            first = i;
    }
    if (first < 0)
        return ZOK;
    char oldest[PATH_MAX_LEN];
    snprintf(oldest, sizeof oldest, "%s/%s", l->path, children[first]);
    zrc = zk_exists(c, oldest, deadline, &st);
    if (zrc == ZOK && st.stat.czxid < mine) {
        snprintf(blocker, PATH_MAX_LEN, "%s", oldest);
        *held_as = kind_of_node(children[first]);
    }
    dlock__zresult_clear(&st);
    return zrc;
}

/* ---------------------------------------------------------------- semaphore */

/*
 * Curator's InterProcessSemaphoreV2 on PATH: an InterProcessMutex on
 * PATH/locks admits one contender at a time; the admitted one creates its
 * lease node(s) PATH/leases/_c_<uuid>-lease-<seq>, waits (a children watch
 * on leases/) until leases/ has at most `permits` children, and then lets
 * the next one in. A holder is its lease nodes; a release deletes them.
 * Curator takes n leases one admission each; dlock takes its `take` leases
 * in one admission, which only makes the others wait a little longer: both
 * count every child of leases/, so they count against each other. Holders
 * never have more than `permits` nodes between them: a contender goes in
 * only when every existing lease node and its own fit. Lease nodes of ours
 * hold "<token> <take>/<permits>", so that users disagreeing on permits are
 * told (Curator's hold its host's address and cannot be).
 */

/* Deletes the admission node and the lease nodes (in the background if
 * need be): the contender leaves. */
static void sem_give_up(zstore *z, zlock *l, int64_t deadline)
{
    char *node;
    dlock__zconn *c, *lc;
    unsigned n;

    take_node(l, &node, &c);
    char **leases = take_leases(l, &n, &lc);
    for (unsigned i = 0; i < n; i++) {
        dlock__zconn_ref(lc);
        delete_node(z, lc, leases[i], deadline);
    }
    free(leases);
    dlock__zconn_unref(lc);
    if (node != NULL)
        delete_node(z, c, node, deadline);
}

/* Whether a lease node's data says another number of permits (*other). */
static int other_permits(const char *data, unsigned permits, unsigned *other)
{
    unsigned take = 0, p = 0;
    char token[33];
    if (data == NULL || sscanf(data, "%32[0-9a-f] %u/%u", token, &take, &p) != 3 || p == 0)
        return 0;
    *other = p;
    return p != permits;
}

/* Reads every lease node but ours (pipelined): DLOCK_EINVAL if a dlock
 * user declared another number of permits. */
static int sem_check_permits(zstore *z, zlock *l, dlock__zconn *c, char **children, int n,
                             int64_t deadline)
{
    dlock__zreq **reqs = calloc((size_t) n + 1, sizeof *reqs);
    unsigned other = 0;
    int rc = DLOCK_OK, differs = 0;

    if (reqs == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (dlock__zk_is_ours(children[i], l->uuid))
            continue;
        char node[PATH_MAX_LEN];
        int zrc = ZOK;
        snprintf(node, sizeof node, "%s/%s", l->leases_path, children[i]);
        reqs[i] = dlock__zreq_get(c, node, &zrc);
    }
    for (int i = 0; i < n; i++) {
        dlock__zresult r;
        if (reqs[i] == NULL)
            continue;
        if (dlock__zreq_wait(reqs[i], deadline, &r) == ZOK && !differs)
            differs = other_permits(r.data, l->base.spec.permits, &other);
        dlock__zresult_clear(&r);
    }
    free(reqs);
    if (differs)
        rc = dlock__fail(DLOCK_EINVAL,
                         "%s: semaphore '%s' is in use with %u permits, not %u: every user must "
                         "give the same number",
                         z->label, l->path, other, l->base.spec.permits);
    return rc;
}

static int sem_attempt(zstore *z, zlock *l, dlock__zconn *c, dlock__attempt *a, int64_t deadline)
{
    const unsigned take = l->base.spec.take, permits = l->base.spec.permits;
    char lease[96], data[NODE_DATA_MAX], admission[NODE_DATA_MAX];
    int rc;

    snprintf(lease, sizeof lease, "%s %u/%u", a->token, take, permits);
    node_data(z, lease, data, sizeof data);
    node_data(z, a->token, admission, sizeof admission);
    for (int round = 0; round < 8 + (int) take; round++) {
        a->held_as = DLOCK__HELD_AS_SAME;
        pthread_mutex_lock(&l->mu);
        int stale = (l->node != NULL || l->nleases > 0) && l->conn != c;
        char *adm = l->node != NULL ? strdup(l->node) : NULL;
        int64_t mine = l->czxid;
        unsigned nleases = l->nleases;
        pthread_mutex_unlock(&l->mu);
        if (stale) {
            /* made in a session that is gone: so are the nodes */
            drop_node(l);
            free(adm);
            continue;
        }
        if (nleases < take) {
            char *made = NULL;
            struct Stat st;
            if (adm == NULL) {
                /* queue for admission */
                rc = create_child(z, l, c, l->locks_path, DLOCK__ZK_LOCK, admission, deadline,
                                  &made, &st, NULL);
                if (rc != DLOCK_OK)
                    return rc;
                dlock__zconn_ref(c);
                set_node(l, made, c, &st);
                continue;
            }
            /* the admission queue, and in the same round trip the name's
             * path: the other kinds' contenders */
            dlock__zresult r, kinds;
            int sent = ZOK, ksent = ZOK;
            dlock__zreq *aq = dlock__zreq_children(c, l->locks_path, &sent);
            dlock__zreq *kq = dlock__zreq_children(c, l->path, &ksent);
            int zrc = run(aq, sent, deadline, &r);
            int kzrc = run(kq, ksent, deadline, &kinds);
            if ((zrc != ZOK && zrc != ZNONODE) || (kzrc != ZOK && kzrc != ZNONODE)) {
                dlock__zresult_clear(&r);
                dlock__zresult_clear(&kinds);
                free(adm);
                return dlock__zk_fail(zrc != ZOK && zrc != ZNONODE ? zrc : kzrc, z->label,
                                      "list the semaphore's admission queue");
            }
            kzrc = ZOK; /* a path that is gone has no contenders */
            dlock__zk_rank(r.children, (size_t) r.nchildren, mutex_markers, 2);
            int me = -1;
            for (int i = 0; i < r.nchildren; i++) {
                if (strcmp(r.children[i], strrchr(adm, '/') + 1) == 0)
                    me = i;
            }
            char ahead[PATH_MAX_LEN] = "";
            if (me > 0)
                snprintf(ahead, sizeof ahead, "%s/%s", l->locks_path, r.children[me - 1]);
            dlock__zresult_clear(&r);
            free(adm);
            if (me == 0) {
                /* first to be admitted: not before another kind's older
                 * contender is gone */
                kzrc = kinds_ahead(l, c, kinds.children, kinds.nchildren, mine, deadline, ahead,
                                   &a->held_as);
            }
            dlock__zresult_clear(&kinds);
            if (kzrc == ZNONODE)
                continue;
            if (kzrc != ZOK)
                return dlock__zk_fail(kzrc, z->label, "look at the lock's other kinds");
            if (me < 0) {
                /* our admission node is gone (an operator): queue again */
                char *gone;
                dlock__zconn *in;
                take_node(l, &gone, &in);
                free(gone);
                dlock__zconn_unref(in);
                continue;
            }
            if (ahead[0] != '\0') {
                a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
                if (!a->wait) {
                    sem_give_up(z, l, deadline);
                    a->outcome = DLOCK__HELD;
                    a->next = DLOCK__NEXT_POLL;
                    return DLOCK_OK;
                }
                zrc = ZOK;
                dlock__zreq *q = dlock__zreq_watch(c, ahead, a->token, &zrc);
                zrc = run(q, zrc, deadline, &r);
                dlock__zresult_clear(&r);
                if (zrc == ZNONODE)
                    continue;
                if (zrc != ZOK)
                    return dlock__zk_fail(zrc, z->label, "watch the node ahead");
                a->outcome = DLOCK__QUEUED;
                a->keep_place = 0; /* the session keeps it */
                return DLOCK_OK;
            }
            /* admitted: our lease nodes, all of them in this admission */
            while (nleases < take) {
                rc = create_child(z, l, c, l->leases_path, DLOCK__ZK_LEASE, data, deadline, &made,
                                  &st, NULL);
                if (rc != DLOCK_OK)
                    return rc;
                pthread_mutex_lock(&l->mu);
                char **more = realloc(l->leases, (l->nleases + 1) * sizeof *more);
                if (more != NULL) {
                    l->leases = more;
                    l->leases[l->nleases++] = made;
                    made = NULL;
                    if (fence_of(&st) > l->lease_fence)
                        l->lease_fence = fence_of(&st);
                }
                nleases = l->nleases;
                pthread_mutex_unlock(&l->mu);
                if (made != NULL) {
                    dlock__zconn_ref(c);
                    delete_node(z, c, made, deadline);
                    return dlock__fail(DLOCK_ENOMEM, "out of memory");
                }
            }
            continue;
        }
        free(adm);
        /* Every lease node of ours exists: count them all. A waiter sets a
         * children watch (woken by any release); only the admitted
         * contender waits here, so a release wakes one. */
        dlock__zresult r;
        int zrc = ZOK;
        dlock__zreq *q = a->wait ? dlock__zreq_watch_children(c, l->leases_path, a->token, &zrc)
                                 : dlock__zreq_children(c, l->leases_path, &zrc);
        zrc = run(q, zrc, deadline, &r);
        if (zrc != ZOK && zrc != ZNONODE) {
            dlock__zresult_clear(&r);
            return dlock__zk_fail(zrc, z->label, "list the semaphore's leases");
        }
        unsigned found = 0;
        uint64_t fence = 0;
        pthread_mutex_lock(&l->mu);
        for (unsigned k = 0; k < l->nleases; k++) {
            const char *name = strrchr(l->leases[k], '/') + 1;
            for (int i = 0; i < r.nchildren; i++) {
                if (strcmp(r.children[i], name) == 0) {
                    found++;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&l->mu);
        if (found < take) {
            /* a lease node of ours is gone (an operator): start again */
            dlock__zresult_clear(&r);
            sem_give_up(z, l, deadline);
            continue;
        }
        rc = sem_check_permits(z, l, c, r.children, r.nchildren, deadline);
        int fits = r.nchildren <= (int) permits;
        dlock__zresult_clear(&r);
        if (rc != DLOCK_OK || (!fits && !a->wait)) {
            sem_give_up(z, l, deadline);
            if (rc != DLOCK_OK)
                return rc;
            a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_POLL;
            return DLOCK_OK;
        }
        if (!fits) {
            a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
            a->outcome = DLOCK__QUEUED;
            a->keep_place = 0;
            return DLOCK_OK;
        }
        /* in: let the next contender into admission */
        char *node;
        dlock__zconn *in;
        take_node(l, &node, &in);
        if (node != NULL)
            delete_node(z, in, node, deadline);
        /* the fence: the newest lease node's, from its create (never 0, as
         * one asked for again could be when the server does not answer) */
        pthread_mutex_lock(&l->mu);
        fence = l->lease_fence;
        l->fence = fence;
        pthread_mutex_unlock(&l->mu);
        a->session = dlock__zconn_session_ref(c);
        if (a->session == NULL) {
            drop_node(l); /* its nodes went with it */
            return session_ended(z);
        }
        a->outcome = DLOCK__TAKEN;
        a->fence = fence;
        return DLOCK_OK;
    }
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: the semaphore's nodes keep changing under us",
                       z->label);
}

static int sem_acquire(zstore *z, zlock *l, dlock__zconn *c, dlock__attempt *a, int64_t deadline)
{
    int rc = sem_attempt(z, l, c, a, deadline);
    if (rc != DLOCK_OK && !a->wait)
        sem_give_up(z, l, deadline); /* a try that failed half way leaves nothing */
    return rc;
}

/* Releases a semaphore's permits: its lease nodes. */
static int sem_release(zstore *z, zlock *l, int64_t deadline)
{
    dlock__zconn *c;
    unsigned n;
    char **leases = take_leases(l, &n, &c);
    int gone = 0, unconfirmed = ZOK, alive = c != NULL && dlock__zconn_alive(c);

    deadline = release_deadline(z, c, deadline);
    if (n == 0)
        return dlock__fail(DLOCK_ELOST, "%s: semaphore '%s' is not held", z->label, l->path);
    for (unsigned i = 0; i < n; i++) {
        dlock__zconn_ref(c);
        int zrc = delete_node(z, c, leases[i], deadline);
        gone |= zrc == ZNONODE || (zrc != ZOK && (!alive || dlock__zk_session_over(zrc)));
        if (zrc != ZOK && zrc != ZNONODE)
            unconfirmed = zrc;
    }
    free(leases);
    dlock__zconn_unref(c);
    if (gone)
        return dlock__fail(DLOCK_ELOST,
                           "%s: semaphore '%s': a lease node is gone (removed, or its "
                           "session ended)",
                           z->label, l->path);
    if (unconfirmed != ZOK) {
        dlock__zk_fail(unconfirmed, z->label, "delete a lease node");
        return dlock__fail_context(DLOCK_EUNREACHABLE,
                                   "semaphore '%s': the release is not confirmed; its lease "
                                   "nodes are deleted in the background",
                                   l->path);
    }
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- acquire */

/*
 * Where our node stands among the children of the lock's path, ranked by
 * dlock__zk_rank_all (every kind's contenders together: one name is one
 * lock): -1 if it is not among them, else its index; *ahead is the child to
 * watch (NULL: no contender of the path keeps us out), and *held_as the
 * kind of the first contender when that is another kind than ours.
 */
static int standing(zstore *z, const zlock *l, char **children, int n, const char *ours,
                    const char *token, const char **ahead, enum dlock__held_as *held_as)
{
    int me = -1;
    *ahead = NULL;
    *held_as = DLOCK__HELD_AS_SAME;
    for (int i = 0; i < n; i++) {
        if (strcmp(children[i], ours) == 0)
            me = i;
    }
    if (me < 0)
        return -1;
    if (me > 0 && kind_of_node(children[0]) != kind_of_lock(l))
        *held_as = kind_of_node(children[0]);
    if (l->base.spec.kind != DLOCK__READ) {
        if (me > 0)
            *ahead = children[me - 1];
        return me;
    }
    /* A reader holds unless a writer or a mutex contender ranks ahead of it
     * (its own write hold aside: a downgrade); it watches the nearest. */
    for (int i = me - 1; i >= 0; i--) {
        if (dlock__zk_contender(children[i]) == DLOCK__ZK_READ)
            continue;
        char node[PATH_MAX_LEN];
        snprintf(node, sizeof node, "%s/%s", l->path, children[i]);
        if (own_write_hold(z, node, token))
            continue;
        *ahead = children[i];
        break;
    }
    return me;
}

static int owner_leads(zstore *z, const zlock *l, dlock__zconn *c, char **children, int n, int me,
                       const char *token, int64_t deadline, int *leads);

static int zk_acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *a)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    int64_t deadline = a->deadline_us;
    dlock__zconn *c = NULL;
    dlock__zreq *listing = NULL; /* the children, asked for right behind our create */
    int rc = open_call(z, &deadline, &c);

    if (rc != DLOCK_OK)
        return rc;
    dlock__zconn_kick(c);
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        rc = sem_acquire(z, l, c, a, deadline);
        goto out;
    }
    if (l->base.spec.kind == DLOCK__WRITE && own_read_hold(z, l->path, a->token)) {
        rc = dlock__fail(DLOCK_EDEADLK,
                         "this owner holds the read lock: taking the write lock too would wait "
                         "for itself (release the read lock first; upgrades are refused)");
        goto out;
    }
    for (int round = 0; round < 8; round++) {
        pthread_mutex_lock(&l->mu);
        int stale = l->node != NULL && l->conn != c;
        char *node = l->node != NULL ? strdup(l->node) : NULL;
        int64_t mine = l->czxid;
        pthread_mutex_unlock(&l->mu);
        if (stale) {
            /* made in a session that is gone: so is the node */
            drop_node(l);
            free(node);
            node = NULL;
        }
        if (node == NULL) {
            char *made = NULL;
            struct Stat st;
            char data[NODE_DATA_MAX];
            node_data(z, a->token, data, sizeof data);
            rc = create_child(z, l, c, l->path, marker_of(l), data, deadline, &made, &st, &listing);
            if (rc != DLOCK_OK)
                goto out;
            dlock__zconn_ref(c);
            set_node(l, made, c, &st);
            continue;
        }
        dlock__zresult r;
        int listed_early = listing != NULL;
        int zrc = listed_early ? dlock__zreq_wait(listing, deadline, &r)
                               : zk_children(c, l->path, deadline, &r);
        listing = NULL;
        if (zrc != ZOK && zrc != ZNONODE) {
            dlock__zresult_clear(&r);
            free(node);
            rc = dlock__zk_fail(zrc, z->label, "list the lock's nodes");
            goto out;
        }
        dlock__zk_rank_all(r.children, (size_t) r.nchildren);
        const char *ahead = NULL;
        enum dlock__held_as held_as;
        int me = standing(z, l, r.children, r.nchildren, strrchr(node, '/') + 1, a->token, &ahead,
                          &held_as);
        if (me < 0 && listed_early) {
            /* not in the listing sent behind its create: not trusted, list again */
            dlock__zresult_clear(&r);
            free(node);
            continue;
        }
        if (me < 0) {
            /* our node is gone (removed by an operator): make another */
            dlock__zresult_clear(&r);
            free(node);
            drop_node(l);
            continue;
        }
        int self = 0;
        rc = held_as == DLOCK__HELD_AS_SAME
                 ? DLOCK_OK
                 : owner_leads(z, l, c, r.children, r.nchildren, me, a->token, deadline, &self);
        if (rc != DLOCK_OK || self) {
            dlock__zresult_clear(&r);
            free(node);
            if (self) {
                char *ours;
                dlock__zconn *in;
                take_node(l, &ours, &in);
                delete_node(z, in, ours, deadline);
                rc = dlock__fail(DLOCK_EDEADLK,
                                 "this owner holds the name as another kind of lock: asking for "
                                 "it as this kind would wait for itself (one name is one lock)");
            }
            goto out;
        }
        char watched[PATH_MAX_LEN] = "";
        if (ahead != NULL) {
            snprintf(watched, sizeof watched, "%s/%s", l->path, ahead);
        } else if (has_semaphore(r.children, r.nchildren)) {
            zrc = semaphore_ahead(l, c, mine, deadline, watched);
            if (zrc == ZNONODE) {
                dlock__zresult_clear(&r);
                free(node);
                continue;
            }
            if (zrc != ZOK) {
                dlock__zresult_clear(&r);
                free(node);
                rc = dlock__zk_fail(zrc, z->label, "look at the semaphore of the same name");
                goto out;
            }
            if (watched[0] != '\0')
                held_as = DLOCK__HELD_AS_SEMAPHORE;
        }
        if (watched[0] == '\0') {
            a->session = dlock__zconn_session_ref(c);
            if (a->session == NULL) {
                dlock__zresult_clear(&r);
                free(node);
                drop_node(l); /* it went with the session */
                rc = session_ended(z);
                goto out;
            }
            a->outcome = DLOCK__TAKEN;
            pthread_mutex_lock(&l->mu);
            a->fence = l->fence;
            pthread_mutex_unlock(&l->mu);
            if (is_rw(l))
                remember_rw_hold(z, node, a->token, l->base.spec.kind == DLOCK__WRITE);
            dlock__zresult_clear(&r);
            free(node);
            rc = DLOCK_OK;
            goto out;
        }
        a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
        a->held_as = held_as;
        if (!a->wait) {
            /* a try: leave no node behind */
            dlock__zresult_clear(&r);
            free(node);
            char *ours;
            dlock__zconn *in;
            take_node(l, &ours, &in);
            delete_node(z, in, ours, deadline);
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_POLL;
            rc = DLOCK_OK;
            goto out;
        }
        /* Watch the one ahead; if it is already gone, look again. */
        dlock__zresult_clear(&r);
        free(node);
        zrc = ZOK;
        dlock__zreq *q = dlock__zreq_watch(c, watched, a->token, &zrc);
        zrc = run(q, zrc, deadline, &r);
        dlock__zresult_clear(&r);
        if (zrc == ZNONODE)
            continue;
        if (zrc != ZOK) {
            rc = dlock__zk_fail(zrc, z->label, "watch the node ahead");
            goto out;
        }
        a->outcome = DLOCK__QUEUED;
        a->keep_place = 0; /* the session keeps it */
        rc = DLOCK_OK;
        goto out;
    }
    rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: the lock's nodes keep changing under us", z->label);
out:
    discard(listing);
    if (rc != DLOCK_OK && !a->wait) {
        /* a try that failed half way leaves nothing behind (no cancel
         * follows a try) */
        char *ours;
        dlock__zconn *in;
        take_node(l, &ours, &in);
        if (ours != NULL)
            delete_node(z, in, ours, deadline);
    }
    dlock__zconn_unref(c);
    return rc;
}

/* ---------------------------------------------------------------- multi-locks */

/*
 * A multi-lock's members in one step (acquire_many): every member's
 * contender node is created in one transaction (zoo_multi), so a free
 * multi-lock is one write; then, pipelined, each member's children and each
 * new node's stat. A member is taken when its node ranks first (Curator's
 * ranking, as for a single mutex), with the fence of its node, as a single
 * mutex's. All first: the grant, each member bound to the session. Else
 * every node goes again in one transaction, and DLOCK_EBUSY names a member
 * held by someone else: the core then takes the members one by one in its
 * order, waiting.
 *
 * Two multi-locks do not block each other here: the transaction that came
 * first has the lower sequence number under every path they share, so the
 * later one finds itself behind and gives all back (and the core's one by
 * one order keeps them from deadlocking after that).
 *
 * Failures. A missing lock path (or parent of it) fails the whole
 * transaction (ZNONODE): every member's path is made (pipelined) and the
 * transaction sent again, at most three times as a single create. A
 * transaction whose outcome is unknown (no reply in time, the connection
 * lost) is a single create's case (conn.h): the nodes it made, if any, are
 * found by their uuids and deleted in the background, never adopted. That,
 * a session that ended, and a server's refusal on one member are
 * DLOCK_ENOTSUP: the core takes the members one by one, whose waits ride
 * out an unreachable store and whose errors name their member.
 */

#define MULTI_MAX 256 /* members in one transaction (a request is at most 1 MiB) */

/* Makes every lock path of ls and its missing ancestors as containers (as
 * make_parents), all requests pipelined: ZooKeeper applies a session's
 * requests in order, so a parent is made before its child. */
static int make_paths(dlock__zconn *c, dlock__store_lock *const *ls, size_t n, int64_t deadline)
{
    size_t cap = 0, count = 0;
    char **made = NULL;
    dlock__zreq **reqs = NULL;
    int *sent = NULL, zrc = ZOK;

    for (size_t i = 0; i < n; i++) {
        for (const char *p = ZLOCK(ls[i])->path; *p != '\0'; p++)
            cap += *p == '/';
    }
    made = calloc(cap, sizeof *made);
    reqs = calloc(cap, sizeof *reqs);
    sent = calloc(cap, sizeof *sent);
    if (made == NULL || reqs == NULL || sent == NULL) {
        zrc = ZSYSTEMERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *path = ZLOCK(ls[i])->path;
        for (const char *p = strchr(path + 1, '/');; p = strchr(p + 1, '/')) {
            size_t len = p != NULL ? (size_t) (p - path) : strlen(path);
            int seen = 0;
            for (size_t k = 0; k < count && !seen; k++)
                seen = strlen(made[k]) == len && strncmp(made[k], path, len) == 0;
            if (!seen && count < cap && (made[count] = strndup(path, len)) != NULL) {
                sent[count] = ZOK;
                reqs[count] =
                    dlock__zreq_create(c, made[count], NULL, -1, ZOO_CONTAINER, &sent[count]);
                count++;
            }
            if (p == NULL)
                break;
        }
    }
    /* every reply is collected, also after an error: each request is
     * consumed once */
    for (size_t k = 0; k < count; k++) {
        dlock__zresult r;
        int one = run(reqs[k], sent[k], zrc == ZOK ? deadline : 0, &r);
        dlock__zresult_clear(&r);
        if (one != ZOK && one != ZNODEEXISTS && zrc == ZOK)
            zrc = one;
    }
out:
    for (size_t k = 0; k < count; k++)
        free(made[k]);
    free(made);
    free(reqs);
    free(sent);
    return zrc;
}

/* Deletes nodes [0, n) of ours in one transaction; what it does not
 * confirm is deleted one by one in the background. Frees the names. */
static void delete_nodes(dlock__zconn *c, char **nodes, size_t n, int64_t deadline)
{
    zoo_op_t *ops = calloc(n, sizeof *ops);
    int zrc = ZSYSTEMERROR;

    if (ops != NULL) {
        for (size_t i = 0; i < n; i++)
            zoo_delete_op_init(&ops[i], nodes[i], -1);
        dlock__zresult r;
        dlock__zreq *q = dlock__zreq_multi(c, (int) n, ops, &zrc);
        zrc = run(q, zrc, deadline, &r);
        dlock__zresult_clear(&r);
        free(ops);
    }
    for (size_t i = 0; i < n; i++) {
        if (zrc != ZOK && !dlock__zk_session_over(zrc) && dlock__zconn_alive(c))
            dlock__zconn_forget(c, nodes[i]);
        free(nodes[i]);
        nodes[i] = NULL;
    }
}

/* Creates a node in each of ls's paths in one transaction: *made (the
 * caller's) names them. A ZooKeeper code. */
static int create_nodes(zstore *z, dlock__zconn *c, dlock__store_lock *const *ls, size_t n,
                        const char *token, int64_t deadline, char **made)
{
    char data[NODE_DATA_MAX], prefix[96];
    zoo_op_t *ops = calloc(n, sizeof *ops);
    char(*paths)[PATH_MAX_LEN] = calloc(n, sizeof *paths);
    int zrc = ZSYSTEMERROR;

    if (ops == NULL || paths == NULL)
        goto out;
    node_data(z, token, data, sizeof data);
    for (int tries = 0; tries < 3; tries++) {
        for (size_t i = 0; i < n; i++) {
            zlock *l = ZLOCK(ls[i]);
            if (dlock__zk_uuid(l->uuid) != 0) {
                zrc = ZSYSTEMERROR;
                goto out;
            }
            dlock__zk_node_prefix(prefix, sizeof prefix, l->uuid, DLOCK__ZK_LOCK);
            snprintf(paths[i], PATH_MAX_LEN, "%s/%s", l->path, prefix);
            zoo_create_op_init(&ops[i], paths[i], data, (int) strlen(data), &ZOO_OPEN_ACL_UNSAFE,
                               ZOO_EPHEMERAL_SEQUENTIAL, NULL, PATH_MAX_LEN);
        }
        dlock__zresult r;
        zrc = ZOK;
        dlock__zreq *q = dlock__zreq_multi(c, (int) n, ops, &zrc);
        zrc = run(q, zrc, deadline, &r);
        if (zrc == ZOK) {
            for (size_t i = 0; i < n; i++) {
                made[i] = r.op_paths[i];
                r.op_paths[i] = NULL;
            }
        }
        dlock__zresult_clear(&r);
        if (zrc != ZNONODE)
            break;
        /* a lock's path (or a parent) is missing, as for a single create
         * (containers are reaped once empty, also between making them and
         * this) */
        zrc = make_paths(c, ls, n, deadline);
        if (zrc != ZOK)
            break;
        zrc = ZNONODE;
    }
out:
    free(ops);
    free(paths);
    return zrc;
}

static int zk_acquire_many(dlock__store *s, dlock__store_lock *const *ls, size_t n,
                           const char *token, int64_t lease_ms, int64_t deadline_us,
                           uint64_t *fences, dlock__session **sessions, size_t *busy,
                           int64_t *busy_ttl_ms)
{
    zstore *z = ZSTORE(s);
    int64_t deadline = deadline_of(z, deadline_us);
    dlock__zconn *c = NULL;
    char **made = NULL;
    dlock__zreq **reqs = NULL;
    struct Stat *stats = NULL; /* of the nodes made */
    int *sent = NULL, found_busy = 0;
    int rc = DLOCK_OK;

    (void) lease_ms; /* the session's */
    if (n > MULTI_MAX)
        return DLOCK_ENOTSUP;
    for (size_t i = 0; i < n; i++) {
        zlock *l = ZLOCK(ls[i]);
        pthread_mutex_lock(&l->mu);
        int fresh = l->node == NULL && l->nleases == 0;
        pthread_mutex_unlock(&l->mu);
        if (l->base.spec.kind != DLOCK__MUTEX || l->base.spec.simple || !fresh)
            return DLOCK_ENOTSUP; /* what a single attempt knows how to go on with */
    }
    made = calloc(n, sizeof *made);
    reqs = calloc(2 * n, sizeof *reqs);
    sent = calloc(2 * n, sizeof *sent);
    stats = calloc(n, sizeof *stats);
    if (made == NULL || reqs == NULL || sent == NULL || stats == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    rc = get_conn(z, deadline, &c);
    if (rc != DLOCK_OK)
        goto out;
    dlock__zconn_kick(c);
    int zrc = create_nodes(z, c, ls, n, token, deadline, made);
    if (zrc != ZOK) {
        rc = zrc == ZNONODE
                 ? dlock__fail(DLOCK_EUNREACHABLE, "%s: a lock's path keeps disappearing", z->label)
                 : dlock__zk_fail(zrc, z->label, "create a multi-lock's nodes");
        goto out;
    }
    /* where each node stands, and its stat (the fence): every request
     * first (ZooKeeper pipelines them), then every reply */
    for (size_t i = 0; i < n; i++) {
        sent[2 * i] = sent[2 * i + 1] = ZOK;
        reqs[2 * i] = dlock__zreq_children(c, ZLOCK(ls[i])->path, &sent[2 * i]);
        reqs[2 * i + 1] = dlock__zreq_exists(c, made[i], &sent[2 * i + 1]);
    }
    for (size_t i = 0; i < n; i++) {
        zlock *l = ZLOCK(ls[i]);
        dlock__zresult kids, st;
        int kzrc = run(reqs[2 * i], sent[2 * i], rc == DLOCK_OK ? deadline : 0, &kids);
        int szrc = run(reqs[2 * i + 1], sent[2 * i + 1], rc == DLOCK_OK ? deadline : 0, &st);
        if (rc == DLOCK_OK && (kzrc != ZOK || szrc != ZOK)) {
            /* our node gone (an operator) is a failure too: one by one */
            rc =
                dlock__zk_fail(kzrc != ZOK ? kzrc : szrc, z->label, "look at a multi-lock's nodes");
        } else if (rc == DLOCK_OK) {
            const char *ahead = NULL;
            enum dlock__held_as held_as;
            dlock__zk_rank_all(kids.children, (size_t) kids.nchildren);
            int me = standing(z, l, kids.children, kids.nchildren, strrchr(made[i], '/') + 1, token,
                              &ahead, &held_as);
            if (me < 0) {
                rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: %s is gone", z->label, made[i]);
            } else if (ahead == NULL && has_semaphore(kids.children, kids.nchildren)) {
                /* the semaphore of that name may hold it: one by one */
                rc = DLOCK_ENOTSUP;
            } else if (ahead != NULL && !found_busy) {
                found_busy = 1;
                *busy = i;
            }
            fences[i] = fence_of(&st.stat);
            stats[i] = st.stat;
        }
        dlock__zresult_clear(&kids);
        dlock__zresult_clear(&st);
    }
    if (rc == DLOCK_OK && found_busy) {
        *busy_ttl_ms = DLOCK__TTL_UNKNOWN;
        rc = DLOCK_EBUSY;
    }
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++) {
        sessions[i] = dlock__zconn_session_ref(c);
        if (sessions[i] == NULL)
            rc = session_ended(z);
    }
    if (rc != DLOCK_OK) {
        for (size_t i = 0; i < n; i++) {
            dlock__session_unref(sessions[i]);
            sessions[i] = NULL;
        }
        /* none taken: nothing is left behind */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (made[i] != NULL)
                made[k++] = made[i];
        }
        if (k > 0)
            delete_nodes(c, made, k, release_deadline(z, c, deadline_us));
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        dlock__zconn_ref(c);
        set_node(ZLOCK(ls[i]), made[i], c, &stats[i]);
        made[i] = NULL;
    }
out:
    for (size_t i = 0; made != NULL && i < n; i++)
        free(made[i]);
    free(made);
    free(reqs);
    free(sent);
    free(stats);
    dlock__zconn_unref(c);
    /* not in one step now: the core takes them one by one (see above) */
    if (rc != DLOCK_OK && rc != DLOCK_EBUSY && rc != DLOCK_ENOMEM)
        rc = DLOCK_ENOTSUP;
    return rc;
}

/* ---------------------------------------------------------------- release */

static int zk_release(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    char *node;
    dlock__zconn *c;

    (void) token;
    if (l->base.spec.kind == DLOCK__SEMAPHORE)
        return sem_release(z, l, deadline);
    take_node(l, &node, &c);
    if (node == NULL)
        return dlock__fail(DLOCK_ELOST, "%s: lock '%s' is not held", z->label, l->path);
    int alive = dlock__zconn_alive(c);
    char what[PATH_MAX_LEN];
    snprintf(what, sizeof what, "%s", node);
    int zrc = delete_node(z, c, node, release_deadline(z, c, deadline));
    if (zrc == ZNONODE || (zrc != ZOK && (!alive || dlock__zk_session_over(zrc))))
        return dlock__fail(DLOCK_ELOST, "%s: %s is gone (removed, or its session ended)", z->label,
                           what);
    if (zrc != ZOK) {
        /* Not known to be gone: never OK. The node goes in the background
         * (conn.h), at the latest with its session. */
        dlock__zk_fail(zrc, z->label, "delete the lock node");
        return dlock__fail_context(DLOCK_EUNREACHABLE,
                                   "lock '%s': the release is not confirmed; its node is deleted "
                                   "in the background",
                                   l->path);
    }
    return DLOCK_OK;
}

/* The waiter leaves: its node is deleted, waited for only a moment (a
 * cancel must end its wait soon, whatever the store does), then in the
 * background. */
static int zk_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    int64_t soon = dlock__now_us() + z->timeout_ms * 100; /* a tenth of a command timeout */
    char *node;
    dlock__zconn *c;

    (void) token;
    deadline = deadline_of(z, deadline);
    if (soon < deadline)
        deadline = soon;
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        sem_give_up(z, l, deadline);
        return DLOCK_OK;
    }
    take_node(l, &node, &c);
    if (node != NULL)
        delete_node(z, c, node, deadline);
    return DLOCK_OK;
}

/* A copy of the node that stands for the hold (a semaphore's first lease
 * node), and its connection (a reference); NULL if there is none. */
static char *hold_node(zlock *l, dlock__zconn **conn)
{
    pthread_mutex_lock(&l->mu);
    const char *node = l->base.spec.kind != DLOCK__SEMAPHORE ? l->node
                       : l->nleases > 0                      ? l->leases[0]
                                                             : NULL;
    char *copy = node != NULL ? strdup(node) : NULL;
    *conn = copy != NULL ? l->conn : NULL;
    if (*conn != NULL)
        dlock__zconn_ref(*conn);
    pthread_mutex_unlock(&l->mu);
    return copy;
}

/* Confirms the hold (a session's lease cannot be set). */
static int zk_extend(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t lease_ms,
                     int at_least, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zresult r;

    (void) token, (void) lease_ms, (void) at_least;
    dlock__zconn *c;
    char *node = hold_node(l, &c);
    if (node == NULL)
        return dlock__fail(DLOCK_ELOST, "%s: lock '%s' is not held", z->label, l->path);
    int zrc = zk_exists(c, node, deadline_of(z, deadline), &r);
    int rc = DLOCK_OK;
    if (zrc == ZNONODE || (zrc == ZOK && r.stat.ephemeralOwner != dlock__zconn_id(c)))
        rc = dlock__fail(DLOCK_ELOST, "%s: %s is gone", z->label, node);
    else if (zrc != ZOK)
        rc = dlock__zk_fail(zrc, z->label, "check the lock node");
    dlock__zresult_clear(&r);
    free(node);
    dlock__zconn_unref(c);
    return rc;
}

/* ---------------------------------------------------------------- renewal */

static int zk_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    dlock__zreq **reqs = calloc(n, sizeof *reqs);
    dlock__zconn **conns = calloc(n, sizeof *conns);
    int *sent = calloc(n, sizeof *sent);
    int rc = DLOCK_OK;

    deadline = deadline_of(z, deadline);
    if (reqs == NULL || conns == NULL || sent == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&z->mu);
    dlock__zconn *current = z->conn;
    if (current != NULL)
        dlock__zconn_ref(current);
    pthread_mutex_unlock(&z->mu);
    if (current != NULL) {
        dlock__zconn_kick(current); /* background deletes that failed */
        dlock__zconn_unref(current);
    }
    /* every request first (ZooKeeper pipelines them), then every reply */
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *it = &items[i];
        int zrc = ZOK;
        it->result = DLOCK__RENEW_FAILED;
        if (it->kind == DLOCK__RENEW_SESSION) {
            conns[i] = dlock__session_data(it->session);
            dlock__zconn_ref(conns[i]);
            if (!dlock__zconn_alive(conns[i])) {
                it->result = DLOCK__RENEW_GONE;
                continue;
            }
            reqs[i] = dlock__zreq_exists(conns[i], "/", &zrc);
        } else if (it->kind == DLOCK__RENEW_HOLD) {
            char *node = hold_node(ZLOCK(it->lock), &conns[i]);
            if (node == NULL) {
                it->result = DLOCK__RENEW_GONE;
                continue;
            }
            reqs[i] = dlock__zreq_exists(conns[i], node, &zrc);
            free(node);
        }
        sent[i] = reqs[i] != NULL;
        if (!sent[i] && (zrc == ZINVALIDSTATE || zrc == ZSESSIONEXPIRED))
            it->result = DLOCK__RENEW_GONE;
    }
    int answered = 0;
    char error[200] = "";
    for (size_t i = 0; i < n; i++) {
        if (!sent[i])
            continue;
        dlock__zresult r;
        int zrc = dlock__zreq_wait(reqs[i], deadline, &r);
        dlock__renewal *it = &items[i];
        if (zrc == ZOK) {
            answered = 1;
            it->result =
                it->kind == DLOCK__RENEW_HOLD && r.stat.ephemeralOwner != dlock__zconn_id(conns[i])
                    ? DLOCK__RENEW_GONE
                    : DLOCK__RENEW_OK;
        } else if (zrc == ZNONODE) {
            answered = 1;
            it->result = DLOCK__RENEW_GONE;
        } else if (zrc == ZSESSIONEXPIRED || zrc == ZINVALIDSTATE || zrc == ZAUTHFAILED) {
            it->result = DLOCK__RENEW_GONE;
        } else if (error[0] == '\0') {
            snprintf(error, sizeof error, "%s",
                     zrc == ZOPERATIONTIMEOUT ? "no reply within the command timeout"
                                              : zerror(zrc));
        }
        dlock__zresult_clear(&r);
    }
    if (!answered && error[0] != '\0')
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: %s", z->label, error);
out:
    for (size_t i = 0; conns != NULL && i < n; i++)
        dlock__zconn_unref(conns[i]);
    free(reqs);
    free(conns);
    free(sent);
    return rc;
}

static void zk_session_lost(dlock__store *s, dlock__session *session, int64_t deadline)
{
    (void) s, (void) deadline;
    /* Close it now: the server then deletes its nodes at once, and nothing
     * granted under it outlives the loss the core reported. */
    dlock__zconn_kill(dlock__session_data(session),
                      "no round trip to ZooKeeper succeeded within the session timeout");
}

/* ---------------------------------------------------------------- operators */

/* The holders among sorted children: [0, *n). */
static int holders(const zlock *l, char **children, int n)
{
    if (n == 0)
        return 0;
    if (!is_rw(l) || dlock__zk_is_writer(children[0]))
        return 1;
    int k = 0;
    while (k < n && !dlock__zk_is_writer(children[k]))
        k++;
    return k;
}

/* One holder's node, read. */
typedef struct held_node {
    dlock__zresult got; /* its get, the data split in place (split_data) */
    const char *owner;  /* into got: the owner token, "" if none */
    const char *info;   /* into got: its client's owner_info, NULL if none */
    unsigned permits;   /* a lease node of ours: the permits it declares; else 0 */
} held_node;

/* Who holds a lock now, as its nodes say. */
typedef struct holding {
    held_node *nodes; /* the holders' nodes in rank order (a semaphore: lease nodes) */
    int n;
    int exclusive;    /* nodes[0] is a mutex's holder or a writer */
    unsigned waiters; /* contenders not holding (a semaphore: its admission queue) */
    unsigned permits; /* a semaphore: the permits its dlock users declare, 0 if none */
} holding;

static void holding_clear(holding *h)
{
    for (int i = 0; i < h->n; i++)
        dlock__zresult_clear(&h->nodes[i].got);
    free(h->nodes);
    memset(h, 0, sizeof *h);
}

/* Splits a node's data in place (node_data): returns the owner, the first
 * line (a lease node of ours: the token before " TAKE/PERMITS", *permits
 * set), and *info, what follows the newline. A peer's node has no newline
 * (Curator's holds its host's address, kazoo's an identifier): all of it is
 * the owner, and *info is NULL. */
static const char *split_data(char *data, int lease, const char **info, unsigned *permits)
{
    *info = NULL;
    *permits = 0;
    if (data == NULL)
        return "";
    char *nl = strchr(data, '\n');
    if (nl != NULL) {
        *nl = '\0';
        *info = nl + 1;
    }
    char *sp = lease ? strchr(data, ' ') : NULL;
    unsigned take = 0, declared = 0;
    char more;
    if (sp != NULL && sscanf(sp, " %u/%u%c", &take, &declared, &more) == 2 && declared > 0) {
        *sp = '\0';
        *permits = declared;
    }
    return data;
}

/* Reads the nodes dir/names[0..n) (pipelined) into h->nodes, lease nodes
 * if `lease`. A node gone meanwhile is left out: it holds nothing now. */
static int read_nodes(zstore *z, dlock__zconn *c, const char *dir, char **names, int n, int lease,
                      int64_t deadline, holding *h)
{
    dlock__zreq **reqs = calloc((size_t) n + 1, sizeof *reqs);
    int *sent = calloc((size_t) n + 1, sizeof *sent);
    int rc = DLOCK_OK;

    h->n = 0;
    h->nodes = calloc((size_t) n + 1, sizeof *h->nodes);
    if (reqs == NULL || sent == NULL || h->nodes == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        char node[PATH_MAX_LEN];
        snprintf(node, sizeof node, "%s/%s", dir, names[i]);
        sent[i] = ZOK;
        reqs[i] = dlock__zreq_get(c, node, &sent[i]);
    }
    /* every reply is collected, also after an error: each request is
     * consumed once */
    for (int i = 0; i < n; i++) {
        held_node *hn = &h->nodes[h->n];
        int zrc = run(reqs[i], sent[i], rc == DLOCK_OK ? deadline : 0, &hn->got);
        if (zrc == ZOK) {
            hn->owner = split_data(hn->got.data, lease, &hn->info, &hn->permits);
            h->n++;
            continue;
        }
        dlock__zresult_clear(&hn->got);
        if (zrc != ZNONODE && rc == DLOCK_OK)
            rc = dlock__zk_fail(zrc, z->label, "read a holder's node");
    }
out:
    free(reqs);
    free(sent);
    return rc;
}

/* Whether token holds the name as the other kind that leads children (n,
 * all kinds ranked together, the asking contender at me > 0): an owner
 * asking for its name as another kind than it holds it (a handle made by
 * dlock_lock_dup) would wait for itself. Read only when another kind
 * leads: a name used as one kind pays nothing. The holders are the first
 * node, or the readers at the head, unless the semaphore of the name keeps
 * them out (they wait); their data starts with their owner's token. */
static int owner_leads(zstore *z, const zlock *l, dlock__zconn *c, char **children, int n, int me,
                       const char *token, int64_t deadline, int *leads)
{
    holding h;
    int64_t czxid = 0;
    int heads = 1;

    *leads = 0;
    memset(&h, 0, sizeof h);
    while (dlock__zk_contender(children[0]) == DLOCK__ZK_READ && heads < me &&
           dlock__zk_contender(children[heads]) == DLOCK__ZK_READ)
        heads++;
    int rc = read_nodes(z, c, l->path, children, heads, 0, deadline, &h);
    for (int i = 0; rc == DLOCK_OK && i < h.n && !*leads; i++) {
        *leads = strcmp(h.nodes[i].owner, token) == 0;
        czxid = h.nodes[i].got.stat.czxid;
    }
    holding_clear(&h);
    if (*leads && has_semaphore(children, n)) {
        char blocker[PATH_MAX_LEN];
        int zrc = ZNONODE;
        for (int tries = 0; zrc == ZNONODE && tries < 3; tries++)
            zrc = semaphore_ahead(l, c, czxid, deadline, blocker); /* ZNONODE: look again */
        if (zrc != ZOK)
            rc = dlock__zk_fail(zrc, z->label, "look at the semaphore of the same name");
        *leads = zrc == ZOK && blocker[0] == '\0';
    }
    return rc;
}

/* The holders of l now: a mutex's first node, a read-write lock's writer or
 * readers at the head, a semaphore's lease nodes but those of the
 * contender admitted and still waiting for room (they hold nothing yet). */
static int read_holders(zstore *z, zlock *l, dlock__zconn *c, int64_t deadline, holding *h)
{
    dlock__zresult r, w;
    char *admitted = NULL;
    int rc = DLOCK_OK, zrc, zrc2;

    memset(h, 0, sizeof *h);
    memset(&r, 0, sizeof r);
    memset(&w, 0, sizeof w);
    if (l->base.spec.kind != DLOCK__SEMAPHORE) {
        zrc = zk_children(c, l->path, deadline, &r);
        if (zrc != ZOK && zrc != ZNONODE) {
            rc = dlock__zk_fail(zrc, z->label, "list the lock's nodes");
            goto out;
        }
        int ranked = rank(l, r.children, r.nchildren);
        int n = holders(l, r.children, ranked);
        h->exclusive = n > 0 && (!is_rw(l) || dlock__zk_is_writer(r.children[0]));
        h->waiters = (unsigned) (ranked - n);
        rc = read_nodes(z, c, l->path, r.children, n, 0, deadline, h);
        goto out;
    }
    zrc = zk_children(c, l->leases_path, deadline, &r);
    zrc2 = zk_children(c, l->locks_path, deadline, &w);
    if ((zrc != ZOK && zrc != ZNONODE) || (zrc2 != ZOK && zrc2 != ZNONODE)) {
        rc = dlock__zk_fail(zrc != ZOK && zrc != ZNONODE ? zrc : zrc2, z->label,
                            "list the semaphore's nodes");
        goto out;
    }
    h->waiters = (unsigned) w.nchildren;
    if (w.nchildren > 0) {
        /* the first in the admission queue may have made its lease nodes
         * and wait for room: its owner */
        holding first;
        memset(&first, 0, sizeof first);
        dlock__zk_rank(w.children, (size_t) w.nchildren, mutex_markers, 2);
        rc = read_nodes(z, c, l->locks_path, w.children, 1, 0, deadline, &first);
        if (rc == DLOCK_OK && first.n == 1) {
            admitted = strdup(first.nodes[0].owner);
            if (admitted == NULL)
                rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        holding_clear(&first);
        if (rc != DLOCK_OK)
            goto out;
    }
    rc = read_nodes(z, c, l->leases_path, r.children, r.nchildren, 1, deadline, h);
    int kept = 0;
    for (int i = 0; rc == DLOCK_OK && i < h->n; i++) {
        held_node *hn = &h->nodes[i];
        if (hn->permits > 0)
            h->permits = hn->permits;
        if (admitted != NULL && hn->permits > 0 && strcmp(hn->owner, admitted) == 0) {
            dlock__zresult_clear(&hn->got);
            continue;
        }
        h->nodes[kept++] = *hn;
    }
    if (rc == DLOCK_OK)
        h->n = kept;
out:
    if (rc != DLOCK_OK)
        holding_clear(h);
    free(admitted);
    dlock__zresult_clear(&r);
    dlock__zresult_clear(&w);
    return rc;
}

static int zk_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zconn *c = NULL;
    holding h;
    int rc;

    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    rc = open_call(z, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = read_holders(z, l, c, deadline, &h);
    dlock__zconn_unref(c);
    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < h.n; i++) {
        if (fence_of(&h.nodes[i].got.stat) > st->last_fence)
            st->last_fence = fence_of(&h.nodes[i].got.stat);
    }
    st->held = h.n > 0;
    st->waiters = h.waiters;
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        /* a permit per lease node; a holder of ours is the nodes of one
         * token, a peer's node is a holder of its own */
        st->permits = h.permits;
        st->permits_used = (unsigned) h.n;
        for (int i = 0; i < h.n; i++) {
            int seen = 0;
            for (int k = 0; k < i && !seen && h.nodes[i].permits > 0; k++)
                seen = h.nodes[k].permits > 0 && strcmp(h.nodes[k].owner, h.nodes[i].owner) == 0;
            st->shared += !seen;
        }
    } else {
        if (h.exclusive && h.n > 0)
            snprintf(st->owner, sizeof st->owner, "%s", h.nodes[0].owner);
        st->holds = st->owner[0] != '\0' ? 1 : 0;
        st->shared = is_rw(l) && !h.exclusive ? (unsigned) h.n : 0;
    }
    holding_clear(&h);
    return DLOCK_OK;
}

/* Whether nodes a and b are holds of one holder: the same owner (a
 * reader's read holds, a semaphore holder's permits). A peer's lease node
 * is a holder of its own: Curator's data is its host's address. */
static int same_holder(const zlock *l, const held_node *a, const held_node *b)
{
    if (l->base.spec.kind == DLOCK__SEMAPHORE && (a->permits == 0 || b->permits == 0))
        return 0;
    return strcmp(a->owner, b->owner) == 0;
}

static int zk_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zconn *c = NULL;
    holding h;
    int rc;

    rc = open_call(z, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = read_holders(z, l, c, deadline, &h);
    dlock__zconn_unref(c);
    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < h.n; i++) {
        int seen = 0;
        unsigned count = 1;
        for (int k = 0; k < h.n && !seen; k++) {
            if (k != i && same_holder(l, &h.nodes[k], &h.nodes[i])) {
                seen = k < i;
                count++;
            }
        }
        if (seen)
            continue;
        dlock__holder_raw raw = {
            .owner = h.nodes[i].owner, .count = h.exclusive ? 1 : count, .info = h.nodes[i].info};
        if (sink(arg, &raw) != 0)
            break;
    }
    holding_clear(&h);
    return DLOCK_OK;
}

static int zk_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zconn *c = NULL;
    dlock__zresult r;
    int rc;

    rc = open_call(z, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    /* a semaphore's holders are every lease node */
    const char *dir = l->base.spec.kind == DLOCK__SEMAPHORE ? l->leases_path : l->path;
    int zrc = zk_children(c, dir, deadline, &r);
    if (zrc != ZOK && zrc != ZNONODE) {
        rc = dlock__zk_fail(zrc, z->label, "list the lock's nodes");
        goto out;
    }
    int ranked = rank(l, r.children, r.nchildren);
    int n = l->base.spec.kind == DLOCK__SEMAPHORE ? ranked : holders(l, r.children, ranked);
    for (int i = 0; i < n && rc == DLOCK_OK; i++) {
        char node[PATH_MAX_LEN];
        snprintf(node, sizeof node, "%s/%s", dir, r.children[i]);
        zrc = zk_delete(c, node, deadline);
        if (zrc != ZOK && zrc != ZNONODE)
            rc = dlock__zk_fail(zrc, z->label, "delete the holder's node");
    }
out:
    dlock__zresult_clear(&r);
    dlock__zconn_unref(c);
    return rc;
}

/* ---------------------------------------------------------------- listing */

/*
 * dlock_list walks the tree under the base path, depth first. A node is a
 * lock when its path is one names.h writes for a name (the name listed is
 * that name) and it has contender children (dlock__zk_contender): a mutex when
 * one has a mutex marker (Curator's or kazoo's), a read-write lock when one
 * has a read or write marker (both, when both share the path). A node with
 * a `leases` child is a semaphore, taken or waited for when its `leases` or
 * `locks` has a contender child; those two are its own, never parts of
 * names. Every other child is walked as part of a longer name, unless no
 * name under it can start with the prefix, or the name would be longer than
 * a lock's may be (zk_lock_new): that bounds the depth. At most
 * LIST_MAX_NODES znodes are listed (more is DLOCK_EINVAL: a longer prefix
 * will do), LIST_BATCH at a time (pipelined), each request bounded by the
 * command timeout and the whole walk by the caller's deadline. Contender
 * nodes are ephemeral, so never walked into.
 */
#define LIST_MAX_NODES 100000
#define LIST_BATCH     64

typedef struct walk_item {
    char *path;  /* the znode */
    size_t name; /* where its lock name starts in path (the base: at its end) */
    int sem;     /* a semaphore's path: list its leases/ and locks/ */
} walk_item;

typedef struct walk {
    walk_item *items; /* a stack */
    size_t n, cap;
} walk;

/* Pushes path (taken: freed if it cannot be). */
static int walk_push(walk *w, char *path, size_t name, int sem)
{
    if (path == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (w->n == w->cap) {
        size_t cap = w->cap != 0 ? w->cap * 2 : 64;
        walk_item *more = realloc(w->items, cap * sizeof *more);
        if (more == NULL) {
            free(path);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        w->items = more;
        w->cap = cap;
    }
    w->items[w->n++] = (walk_item){path, name, sem};
    return DLOCK_OK;
}

/* Whether a name at or under `name` (name/...) may start with prefix. */
static int may_match(const char *name, const char *prefix)
{
    size_t n = strlen(name), p = strlen(prefix);
    if (strncmp(name, prefix, n < p ? n : p) != 0)
        return 0;
    return n >= p || prefix[n] == '/';
}

/* One walked node's children in r (a semaphore: r[0] its leases, r[1] its
 * locks): reports the locks it is, and pushes the children to walk. */
static int visit(zstore *z, walk *w, const walk_item *it, dlock__zresult *r, const char *prefix,
                 dlock__name_sink sink, void *arg, int *stop)
{
    const char *rel = it->path + it->name;
    char name[DLOCK_NAME_MAX + 1];
    int root = strcmp(it->path, "/") == 0;
    /* only a path as names.h writes a name's is a lock (a peer's node may
     * be under the base too) */
    int named = rel[0] != '\0' &&
                dlock__zk_name_of(strcmp(z->base_path, "/") == 0, rel, name, sizeof name) &&
                strncmp(name, prefix, strlen(prefix)) == 0;
    int nr = it->sem ? 2 : 1, mutex = 0, rw = 0, sem = 0;

    for (int j = 0; j < nr; j++) {
        if (r[j].rc != ZOK && r[j].rc != ZNONODE)
            return dlock__zk_fail(r[j].rc, z->label, "list the locks");
    }
    if (it->sem) {
        int found = 0;
        for (int j = 0; j < nr; j++) {
            for (int i = 0; i < r[j].nchildren; i++)
                found |= dlock__zk_contender(r[j].children[i]) >= 0;
        }
        *stop = found && sink(arg, name, DLOCK__SEMAPHORE) != 0;
        return DLOCK_OK;
    }
    for (int i = 0; i < r->nchildren; i++) {
        int m = dlock__zk_contender(r->children[i]);
        mutex |= m == DLOCK__ZK_LOCK || m == DLOCK__ZK_KAZOO;
        rw |= m == DLOCK__ZK_READ || m == DLOCK__ZK_WRITE;
        sem |= strcmp(r->children[i], "leases") == 0;
    }
    if ((named && mutex && sink(arg, name, DLOCK__MUTEX) != 0) ||
        (named && rw && sink(arg, name, DLOCK__WRITE) != 0)) {
        *stop = 1;
        return DLOCK_OK;
    }
    int rc = DLOCK_OK;
    if (named && sem)
        rc = walk_push(w, strdup(it->path), it->name, 1);
    for (int i = 0; i < r->nchildren && rc == DLOCK_OK; i++) {
        const char *child = r->children[i];
        /* a name's part is never "leases" or "locks" (names.h): those are
         * a semaphore's own */
        if (dlock__zk_contender(child) >= 0 || (root && strcmp(child, "zookeeper") == 0) ||
            strcmp(child, "leases") == 0 || strcmp(child, "locks") == 0)
            continue;
        char path[PATH_MAX_LEN];
        int len = snprintf(path, sizeof path, "%s/%s", root ? "" : it->path, child);
        if (len < 0 || (size_t) len + 64 > PATH_MAX_LEN)
            continue; /* longer than a lock's path may be, and so is all under it */
        /* the child's name: its path past the base, and the '/' after it */
        size_t at = rel[0] != '\0' ? it->name : it->name + (root ? 0 : 1);
        char text[DLOCK_NAME_MAX + 1];
        if (dlock__zk_no_name_under(path + at, text, sizeof text) || !may_match(text, prefix))
            continue;
        rc = walk_push(w, strdup(path), at, 0);
    }
    return rc;
}

static int zk_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline)
{
    zstore *z = ZSTORE(s);
    dlock__zconn *c = NULL;
    walk w = {0};
    size_t listed = 0;
    int stop = 0;
    int rc = get_conn(z, deadline_of(z, deadline), &c);

    if (rc != DLOCK_OK)
        return rc;
    rc = walk_push(&w, strdup(z->base_path), strlen(z->base_path), 0);
    while (rc == DLOCK_OK && !stop && w.n > 0) {
        walk_item batch[LIST_BATCH];
        dlock__zreq *reqs[2 * LIST_BATCH];
        int sent[2 * LIST_BATCH];
        size_t nb = 0, need = 0;

        if (dlock__now_us() >= deadline) {
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: listing locks took too long", z->label);
            break;
        }
        for (size_t i = w.n; i > 0 && nb < LIST_BATCH; i--) {
            need += w.items[i - 1].sem ? 2 : 1;
            nb++;
        }
        if (listed + need > LIST_MAX_NODES) {
            rc = dlock__fail(DLOCK_EINVAL,
                             "%s: more than %d nodes to walk under %s: give a longer prefix",
                             z->label, LIST_MAX_NODES, z->base_path);
            break;
        }
        listed += need;
        for (size_t i = 0; i < nb; i++) {
            walk_item *it = &batch[i];
            char path[PATH_MAX_LEN];
            *it = w.items[--w.n];
            for (int j = 0; j < (it->sem ? 2 : 1); j++) {
                snprintf(path, sizeof path, "%s%s", it->path,
                         !it->sem ? ""
                         : j == 0 ? "/leases"
                                  : "/locks");
                sent[2 * i + j] = ZOK;
                reqs[2 * i + j] = dlock__zreq_children(c, path, &sent[2 * i + j]);
            }
        }
        /* every reply is collected, also after an error or a stop: each
         * request is consumed once */
        int64_t step = deadline_of(z, deadline);
        for (size_t i = 0; i < nb; i++) {
            dlock__zresult r[2];
            int nr = batch[i].sem ? 2 : 1;
            memset(r, 0, sizeof r);
            for (int j = 0; j < nr; j++)
                run(reqs[2 * i + j], sent[2 * i + j], rc == DLOCK_OK && !stop ? step : 0, &r[j]);
            if (rc == DLOCK_OK && !stop)
                rc = visit(z, &w, &batch[i], r, prefix, sink, arg, &stop);
            for (int j = 0; j < nr; j++)
                dlock__zresult_clear(&r[j]);
            free(batch[i].path);
        }
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.items[i].path);
    free(w.items);
    dlock__zconn_unref(c);
    return rc;
}

/* ---------------------------------------------------------------- locks */

static int zk_lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                       dlock__store_lock **out)
{
    zstore *z = ZSTORE(s);
    zlock *l;
    int rc;

    *out = NULL;
    char path[PATH_MAX_LEN];
    rc = dlock__zk_path_of(z->base_path, name, path, sizeof path);
    if (rc != DLOCK_OK)
        return rc;
    l = calloc(1, sizeof *l);
    if (l == NULL || (l->path = strdup(path)) == NULL) {
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    l->base.spec = *spec;
    if (spec->kind == DLOCK__SEMAPHORE) {
        size_t n = strlen(l->path) + 8;
        l->locks_path = malloc(n);
        l->leases_path = malloc(n);
        if (l->locks_path == NULL || l->leases_path == NULL) {
            free(l->locks_path);
            free(l->leases_path);
            free(l->path);
            free(l);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        snprintf(l->locks_path, n, "%s/locks", l->path);
        snprintf(l->leases_path, n, "%s/leases", l->path);
    }
    pthread_mutex_init(&l->mu, NULL);
    *out = &l->base;
    return DLOCK_OK;
}

/* The handle leaves its hold: its nodes stay for as long as the session
 * lives (until the client closes, or the session ends), and are only
 * forgotten here. */
static void zk_detach(dlock__store *s, dlock__store_lock *sl)
{
    zlock *l = ZLOCK(sl);
    char *node;
    dlock__zconn *c, *lc;
    unsigned n;

    take_node(l, &node, &c);
    char **leases = take_leases(l, &n, &lc);
    for (unsigned i = 0; i < n; i++)
        free(leases[i]);
    free(leases);
    dlock__zconn_unref(lc);
    if (node != NULL)
        forget_rw_hold(ZSTORE(s), node);
    free(node);
    dlock__zconn_unref(c);
}

static void zk_lock_free(dlock__store *s, dlock__store_lock *sl)
{
    zlock *l = ZLOCK(sl);

    sem_give_up(ZSTORE(s), l, 0); /* anything left: in the background */
    pthread_mutex_destroy(&l->mu);
    free(l->path);
    free(l->locks_path);
    free(l->leases_path);
    free(l);
}

/* ---------------------------------------------------------------- the store */

static void zk_close(dlock__store *s, int64_t deadline)
{
    zstore *z = ZSTORE(s);

    if (z == NULL)
        return;
    if (z->conn != NULL) {
        /* The server deletes every node of the session, orphans too. The
         * close is waited for only a moment: dlock_client_close has a
         * command timeout in all, which a renewal in flight may have used
         * (a server that does not answer keeps zookeeper_close 1.5 s). */
        dlock__zconn_kill(z->conn, "the client closed");
        int64_t moment = dlock__now_us() + z->timeout_ms * 100;
        dlock__zconn_wait_closed(z->conn, moment < deadline ? moment : deadline);
        dlock__zconn_unref(z->conn);
    }
    while (z->rw_holds != NULL) {
        rw_hold *h = z->rw_holds;
        z->rw_holds = h->next;
        free(h->node);
        free(h->token);
        free(h);
    }
    pthread_mutex_destroy(&z->mu);
    pthread_cond_destroy(&z->cv);
    free(z->hosts);
    free(z->auth);
    free(z->base_path);
    free(z->label);
    free(z);
}

static int parse_url(zstore *z, dlock__url *url)
{
    char hosts[1024] = "", label[1600];
    size_t used = 0;

    if (url->nhosts == 0)
        return dlock__fail(DLOCK_EINVAL, "%s: want at least one host (zk://host:port)", url->text);
    for (size_t i = 0; i < url->nhosts; i++) {
        const char *h = url->hosts[i].name;
        int port = url->hosts[i].port ? url->hosts[i].port : DEFAULT_PORT;
        int n = snprintf(hosts + used, sizeof hosts - used,
                         strchr(h, ':') ? "%s[%s]:%d" : "%s%s:%d", i ? "," : "", h, port);
        if (n < 0 || (size_t) n >= sizeof hosts - used)
            return dlock__fail(DLOCK_EINVAL, "%s: host list too long", url->text);
        used += (size_t) n;
    }
    const char *base = url->path[0] != '\0' ? url->path : DEFAULT_BASE + 1;
    char base_path[512];
    snprintf(base_path, sizeof base_path, "/%s", base);
    /* a trailing '/' is harmless in a URL */
    size_t bl = strlen(base_path);
    while (bl > 1 && base_path[bl - 1] == '/')
        base_path[--bl] = '\0';
    if (strcmp(base_path, "/") != 0) {
        char name[sizeof base_path], path[PATH_MAX_LEN];
        if (strcmp(base_path, "/zookeeper") == 0 || strncmp(base_path, "/zookeeper/", 11) == 0)
            return dlock__fail(DLOCK_EINVAL, "%s: /zookeeper is ZooKeeper's own", url->text);
        /* a base is a path dlock would write for a name (names.h): so no
         * base's path is another's lock node, whatever the two hold */
        if (dlock__zk_no_name_under(base_path + 1, name, sizeof name))
            return dlock__fail(DLOCK_EINVAL,
                               "%s: base path '%s' has a '%%' that is not an escape (%%XX)",
                               url->text, base_path);
        if (!dlock__zk_name_of(1, base_path + 1, name, sizeof name)) {
            int rc = dlock__zk_path_of("/", name, path, sizeof path);
            return rc != DLOCK_OK ? rc
                                  : dlock__fail(DLOCK_EINVAL,
                                                "%s: base path '%s' is not written as dlock writes "
                                                "paths (docs/zookeeper.md, Names): write '%s'",
                                                url->text, base_path, path);
        }
    }
    snprintf(label, sizeof label, "zk://%s%s", hosts, base_path);
    z->hosts = strdup(hosts);
    z->base_path = strdup(base_path);
    z->label = strdup(label);
    if (url->user != NULL || url->password != NULL) {
        size_t n =
            (url->user ? strlen(url->user) : 0) + (url->password ? strlen(url->password) : 0) + 2;
        z->auth = malloc(n);
        if (z->auth != NULL)
            snprintf(z->auth, n, "%s:%s", url->user ? url->user : "",
                     url->password ? url->password : "");
        if (z->auth == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    if (z->hosts == NULL || z->base_path == NULL || z->label == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

static int zk_open(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    zstore *z = calloc(1, sizeof *z);
    int64_t session_ms = host->cfg->lease_ms, connect_ms = DEFAULT_CONNECT_MS;
    int rc;

    *out = NULL;
    if (z == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_condattr_t attr;
    pthread_mutex_init(&z->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&z->cv, &attr);
    pthread_condattr_destroy(&attr);
    z->base.backend = &dlock__zk_backend;
    z->base.caps = dlock__zk_backend.caps;
    z->base.host = *host;
    z->timeout_ms = host->cfg->command_timeout_ms;
    rc = parse_url(z, url);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "session_timeout", 100, &session_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "connect_timeout", 1, &connect_ms);
    if (rc != DLOCK_OK) {
        zk_close(&z->base, dlock__now_us());
        return rc;
    }
    z->cfg = (dlock__zconn_cfg){.hosts = z->hosts,
                                .auth = z->auth,
                                .label = z->label,
                                .session_ms = session_ms,
                                .connect_ms = connect_ms,
                                .board = host->board,
                                .sessions = host->sessions};
    z->base.label = z->label;
    *out = &z->base;
    return DLOCK_OK;
}

static const char *const schemes[] = {"zk", NULL};

const dlock__backend dlock__zk_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "ZooKeeper",
    .schemes = schemes,
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY | DLOCK_CAP_FAIR |
            DLOCK_CAP_READ_WRITE | DLOCK_CAP_SEMAPHORE | DLOCK_CAP_MULTI_ATOMIC | DLOCK_CAP_NOTIFY |
            DLOCK_CAP_SESSION | DLOCK_CAP_LIST,
    .open = zk_open,
    .close = zk_close,
    .lock_new = zk_lock_new,
    .lock_free = zk_lock_free,
    .detach = zk_detach,
    .acquire = zk_acquire,
    .acquire_many = zk_acquire_many,
    .cancel = zk_cancel,
    .release = zk_release,
    .extend = zk_extend,
    .renew = zk_renew,
    .session_lost = zk_session_lost,
    .query = zk_query,
    .force_unlock = zk_force_unlock,
    .holders = zk_holders,
    .list = zk_list,
    .reached = zk_reached,
};
