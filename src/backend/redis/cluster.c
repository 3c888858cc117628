/* SPDX-License-Identifier: MIT */
/* cluster.c - the nodes of a Redis Cluster and its slot map (cluster.h). */
#include "cluster.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES    DLOCK__CLUSTER_MAX_NODES
#define MAX_NODEPOOL 64
#define DEFAULT_PORT 6379
/* A node asked for the map is given a second (or the connect timeout if
 * less): a frozen one costs that, and the next is asked. A read of the
 * map takes three seconds at most. A call to a suspect node is given a
 * second. */
#define ASK_NODE_MS     1000
#define REFRESH_MS      3000
#define SUSPECT_CALL_MS 1000

typedef struct node {
    char *host;
    int port;
    char label[300];
    dlock__rconn *pool[MAX_NODEPOOL];
    _Atomic int64_t suspect_us; /* when a call found it unreachable last; 0: it answers */
} node;

struct dlock__rcluster {
    dlock__rendpoint tmpl; /* auth, timeouts, log of every node (host and label not used) */
    char *userinfo;        /* the URL's, as labels show it */
    size_t npool;
    pthread_mutex_t mu; /* guards adding nodes and reading the map */
    node *nodes[MAX_NODES];
    _Atomic size_t nnodes; /* nodes[0..nnodes) are set for good */
    size_t nseeds;
    atomic_int loaded;      /* the map was read once */
    atomic_int stale;       /* a node did not answer: read the map again */
    atomic_int suspects;    /* nodes whose suspect_us is set */
    atomic_int not_cluster; /* 1 + the index of a node that said it is not in cluster mode */
    _Atomic short slots[DLOCK__CLUSTER_SLOTS]; /* node index, -1: none known */
};

static void node_free(node *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < MAX_NODEPOOL; i++)
        dlock__rconn_free(n->pool[i]);
    free(n->host);
    free(n);
}

/* The index of host:port, added if new (cl->mu held); -1 if it cannot be. */
static int node_index(dlock__rcluster *cl, const char *host, size_t hlen, int port)
{
    size_t n = atomic_load(&cl->nnodes);
    for (size_t i = 0; i < n; i++) {
        if (cl->nodes[i]->port == port && strlen(cl->nodes[i]->host) == hlen &&
            memcmp(cl->nodes[i]->host, host, hlen) == 0)
            return (int) i;
    }
    if (n == MAX_NODES)
        return -1;
    node *nd = calloc(1, sizeof *nd);
    if (nd == NULL || (nd->host = strndup(host, hlen)) == NULL) {
        free(nd);
        return -1;
    }
    nd->port = port;
    /* the URL's user, as every label names it (never the password) */
    snprintf(nd->label, sizeof nd->label,
             strchr(nd->host, ':') != NULL ? "%s node %s[%s]:%d" : "%s node %s%s:%d",
             cl->tmpl.tls != NULL ? "rediss+cluster" : "redis+cluster", cl->userinfo, nd->host,
             port);
    dlock__rendpoint ep = cl->tmpl;
    ep.host = nd->host;
    ep.port = port;
    ep.unix_path = NULL;
    ep.label = nd->label;
    for (size_t i = 0; i < cl->npool; i++) {
        if (dlock__rconn_new(&ep, &nd->pool[i]) != DLOCK_OK) {
            node_free(nd);
            return -1;
        }
        char what[48];
        snprintf(what, sizeof what, "command connection %zu of %zu", i + 1, cl->npool);
        dlock__rconn_describe(nd->pool[i], what);
    }
    cl->nodes[n] = nd;
    atomic_store(&cl->nnodes, n + 1);
    return (int) n;
}

int dlock__rcluster_new(dlock__url *url, const dlock__rendpoint *tmpl, size_t npool,
                        dlock__rcluster **out)
{
    *out = NULL;
    if (url->nhosts == 0)
        return dlock__fail(DLOCK_EINVAL,
                           "%s: want one or more seed nodes (redis+cluster://h1:port,h2:port)",
                           url->text);
    if (url->path[0] != '\0')
        return dlock__fail(DLOCK_EINVAL,
                           "%s: a Redis Cluster has only database 0: leave out the path /%s",
                           url->text, url->path);
    if (npool > MAX_NODEPOOL)
        npool = MAX_NODEPOOL;
    dlock__rcluster *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    cl->tmpl = *tmpl;
    cl->tmpl.router = cl;
    cl->npool = npool;
    pthread_mutex_init(&cl->mu, NULL);
    for (size_t i = 0; i < DLOCK__CLUSTER_SLOTS; i++)
        atomic_store(&cl->slots[i], -1);
    cl->userinfo = strdup(url->userinfo);
    if (cl->userinfo == NULL) {
        dlock__rcluster_free(cl);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < url->nhosts; i++) {
        const char *h = url->hosts[i].name;
        if (node_index(cl, h, strlen(h), url->hosts[i].port ? url->hosts[i].port : DEFAULT_PORT) <
            0) {
            dlock__rcluster_free(cl);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
    }
    cl->nseeds = atomic_load(&cl->nnodes);
    *out = cl;
    return DLOCK_OK;
}

void dlock__rcluster_free(dlock__rcluster *cl)
{
    if (cl == NULL)
        return;
    size_t n = atomic_load(&cl->nnodes);
    for (size_t i = 0; i < n; i++)
        node_free(cl->nodes[i]);
    pthread_mutex_destroy(&cl->mu);
    free(cl->userinfo);
    free(cl);
}

/* Reads CLUSTER SLOTS' reply into the map (cl->mu held); 1 if it was one. */
static int read_map(dlock__rcluster *cl, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
        return 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
            return 0;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        const redisReply *m = e->element[2];
        if (lo < 0 || hi >= DLOCK__CLUSTER_SLOTS || lo > hi || m->element[0]->len == 0)
            continue;
        int k =
            node_index(cl, m->element[0]->str, m->element[0]->len, (int) m->element[1]->integer);
        for (long long s = lo; k >= 0 && s <= hi; s++)
            atomic_store(&cl->slots[s], (short) k);
    }
    return 1;
}

/* ---------------------------------------------------------------- suspects */

/* The node c is a connection of, or NULL (the pools are fixed when a node
 * is published, so no lock is needed). */
static node *node_with(dlock__rcluster *cl, const dlock__rconn *c)
{
    size_t n = atomic_load(&cl->nnodes);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < cl->npool; j++) {
            if (cl->nodes[i]->pool[j] == c)
                return cl->nodes[i];
        }
    }
    return NULL;
}

static void suspect(dlock__rcluster *cl, node *nd)
{
    if (atomic_exchange(&nd->suspect_us, dlock__now_us()) == 0)
        atomic_fetch_add(&cl->suspects, 1);
    atomic_store(&cl->stale, 1);
}

static void trust(dlock__rcluster *cl, node *nd)
{
    if (atomic_load(&nd->suspect_us) != 0 && atomic_exchange(&nd->suspect_us, 0) != 0)
        atomic_fetch_sub(&cl->suspects, 1);
}

int dlock__rcluster_noted(dlock__rcluster *cl, const dlock__rconn *c, int rc)
{
    if (rc != DLOCK_EUNREACHABLE && (rc != DLOCK_OK || atomic_load(&cl->suspects) == 0))
        return rc; /* the common case: answered, and nobody is suspect */
    node *nd = node_with(cl, c);
    if (nd != NULL && rc == DLOCK_EUNREACHABLE)
        suspect(cl, nd);
    else if (nd != NULL)
        trust(cl, nd);
    return rc;
}

int64_t dlock__rcluster_bound(dlock__rcluster *cl, const dlock__rconn *c, int64_t deadline_us)
{
    if (atomic_load(&cl->suspects) == 0)
        return deadline_us;
    node *nd = node_with(cl, c);
    if (nd == NULL || atomic_load(&nd->suspect_us) == 0)
        return deadline_us;
    int64_t until = dlock__now_us() + SUSPECT_CALL_MS * 1000;
    return until < deadline_us ? until : deadline_us;
}

/* ---------------------------------------------------------------- the map */

/* Asks node i for the map until until_us (cl->mu held); 1 if it gave one. */
static int ask_map(dlock__rcluster *cl, size_t i, int64_t until_us)
{
    static const char *const argv[] = {"CLUSTER", "SLOTS"};
    static const size_t lens[] = {7, 5};
    const dlock__rcmd cmd = {2, argv, lens};
    node *nd = cl->nodes[i];
    redisReply *r = NULL;

    int rc = dlock__rconn_call(nd->pool[0], 1, &cmd, until_us, &r);
    if (rc == DLOCK_EUNREACHABLE)
        suspect(cl, nd);
    if (rc != DLOCK_OK)
        return 0;
    trust(cl, nd);
    int ok = read_map(cl, r);
    /* "ERR This instance has cluster support disabled": a plain Redis
     * (dlock__rcluster_check) */
    if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "cluster support disabled") != NULL)
        atomic_store(&cl->not_cluster, (int) i + 1);
    freeReplyObject(r);
    return ok;
}

/* Reads the map from the first node that answers (cl->mu held): the
 * nodes not suspect first (seeds first: they come first), then the
 * suspect ones, each given ASK_NODE_MS (or the connect timeout if less),
 * all of them until deadline_us. A frozen node costs its second, not the
 * whole read. */
static void refresh_locked(dlock__rcluster *cl, int64_t deadline_us)
{
    unsigned char late[MAX_NODES];
    size_t n = atomic_load(&cl->nnodes);
    int64_t each_ms =
        cl->tmpl.connect_timeout_ms < ASK_NODE_MS ? cl->tmpl.connect_timeout_ms : ASK_NODE_MS;
    int64_t cap = dlock__now_us() + REFRESH_MS * 1000;
    dlock__saved_error saved;

    if (deadline_us > cap)
        deadline_us = cap;
    /* cleared first: a node lost while this read runs asks for another */
    atomic_store(&cl->stale, 0);
    for (size_t i = 0; i < n; i++)
        late[i] = atomic_load(&cl->nodes[i]->suspect_us) != 0;
    dlock__save_error(&saved);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            int64_t now = dlock__now_us(), until = now + each_ms * 1000;
            if (late[i] != pass)
                continue;
            if (now >= deadline_us)
                goto out;
            if (ask_map(cl, i, until < deadline_us ? until : deadline_us)) {
                atomic_store_explicit(&cl->loaded, 1, memory_order_release);
                goto out;
            }
        }
    }
out:
    dlock__restore_error(&saved);
}

void dlock__rcluster_refresh(dlock__rcluster *cl, int64_t deadline_us)
{
    pthread_mutex_lock(&cl->mu);
    refresh_locked(cl, deadline_us);
    pthread_mutex_unlock(&cl->mu);
}

/* The map read first if it never was, or again after a node did not
 * answer, if deadline_us leaves time. Another thread reading it already:
 * the map as it is (but the first read, which is waited for). */
static void refresh_if_due(dlock__rcluster *cl, int64_t deadline_us)
{
    int loaded = atomic_load_explicit(&cl->loaded, memory_order_acquire);
    if ((loaded && !atomic_load(&cl->stale)) || dlock__now_us() >= deadline_us)
        return;
    if (!loaded)
        pthread_mutex_lock(&cl->mu);
    else if (pthread_mutex_trylock(&cl->mu) != 0)
        return;
    if (!atomic_load(&cl->loaded) || atomic_load(&cl->stale))
        refresh_locked(cl, deadline_us);
    pthread_mutex_unlock(&cl->mu);
}

int dlock__rcluster_check(dlock__rcluster *cl)
{
    int k = atomic_load(&cl->not_cluster) - 1;
    if (k < 0 || atomic_load_explicit(&cl->loaded, memory_order_acquire))
        return DLOCK_OK;
    node *nd = cl->nodes[k];
    const char *scheme = cl->tmpl.tls != NULL ? "rediss" : "redis";
    const char *open = strchr(nd->host, ':') != NULL ? "[" : "";
    const char *close = open[0] != '\0' ? "]" : "";
    /* another kind of server than the URL asks for, as another service at
     * the port would be: DLOCK_EUNREACHABLE, no such store there (and
     * dlock__rcluster_wrong_kind tells the core it was never reached) */
    if (cl->nseeds == 1)
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "%s: %s%s%s:%d answered, but not as a node of a Redis Cluster (it is "
                           "not in cluster mode: cluster_enabled:0): for that one server use "
                           "%s://%s%s%s:%d",
                           cl->tmpl.label, open, nd->host, close, nd->port, scheme, open, nd->host,
                           close, nd->port);
    return dlock__fail(DLOCK_EUNREACHABLE,
                       "%s: %s%s%s:%d answered, but not as a node of a Redis Cluster (it is not "
                       "in cluster mode: cluster_enabled:0), and no other seed gave the "
                       "cluster's slots: for that one server use %s://%s%s%s:%d",
                       cl->tmpl.label, open, nd->host, close, nd->port, scheme, open, nd->host,
                       close, nd->port);
}

int dlock__rcluster_wrong_kind(dlock__rcluster *cl)
{
    return atomic_load(&cl->not_cluster) > 0 &&
           !atomic_load_explicit(&cl->loaded, memory_order_acquire);
}

static int index_of(dlock__rcluster *cl, unsigned slot, int64_t deadline_us)
{
    refresh_if_due(cl, deadline_us);
    /* acquire: the node it names (made, then published by the release of
     * this store) is seen whole */
    int k = atomic_load_explicit(&cl->slots[slot % DLOCK__CLUSTER_SLOTS], memory_order_acquire);
    if (k >= 0)
        return k;
    /* no map: a seed, which redirects; one that answered, if any did */
    for (size_t i = 0; i < cl->nseeds; i++) {
        if (atomic_load(&cl->nodes[i]->suspect_us) == 0)
            return (int) i;
    }
    return 0;
}

static node *node_of(dlock__rcluster *cl, unsigned slot, int64_t deadline_us)
{
    return cl->nodes[index_of(cl, slot, deadline_us)];
}

int dlock__rcluster_node_index(dlock__rcluster *cl, unsigned slot, int64_t deadline_us)
{
    return index_of(cl, slot, deadline_us);
}

dlock__rlink *dlock__rcluster_dial(dlock__rcluster *cl, int k, int64_t deadline_us, int *code)
{
    /* nodes[k] was published before any k was handed out (node_of) */
    node *nd = cl->nodes[k];
    dlock__rendpoint ep = cl->tmpl;
    ep.host = nd->host;
    ep.port = nd->port;
    ep.unix_path = NULL;
    ep.label = nd->label;
    return dlock__rconn_dial(&ep, deadline_us, code);
}

const char *dlock__rcluster_node_label(dlock__rcluster *cl, int k)
{
    return cl->nodes[k]->label;
}

dlock__rconn *dlock__rcluster_conn(dlock__rcluster *cl, unsigned slot, int64_t deadline_us)
{
    return node_of(cl, slot, deadline_us)->pool[slot % cl->npool];
}

dlock__rconn *dlock__rcluster_node_conn(dlock__rcluster *cl, unsigned slot, int64_t deadline_us)
{
    return node_of(cl, slot, deadline_us)->pool[0];
}

enum dlock__rredirect dlock__rcluster_redirect(dlock__rcluster *cl, const redisReply *r,
                                               dlock__rconn **to)
{
    char host[256];
    unsigned slot;
    int port;
    enum dlock__rredirect what;

    if (r == NULL || r->type != REDIS_REPLY_ERROR)
        return DLOCK__RR_NONE;
    if (strncmp(r->str, "TRYAGAIN", 8) == 0 || strncmp(r->str, "CLUSTERDOWN", 11) == 0)
        return DLOCK__RR_RETRY;
    /* A script on a node whose slot is migrating touched a key that is
     * not there (one of the lock's that has left already, or one it would
     * make: the scripts declare only the lock's base key, and Redis checks
     * each command of theirs on such a slot): the same again until the
     * slot has moved and the node answers MOVED (calls.c). The scripts are
     * made to be sent again (a reply may always be lost). */
    if (strncmp(r->str, "ERR Script attempted to access a non local key", 46) == 0)
        return DLOCK__RR_RETRY;
    if (strncmp(r->str, "MOVED ", 6) == 0)
        what = DLOCK__RR_MOVED;
    else if (strncmp(r->str, "ASK ", 4) == 0)
        what = DLOCK__RR_ASK;
    else
        return DLOCK__RR_NONE;
    /* MOVED 3999 127.0.0.1:6381 (an IPv6 address has colons: the port
     * follows the last) */
    const char *at = strchr(r->str, ' ') + 1, *sp = strchr(at, ' ');
    if (sp == NULL || sscanf(at, "%u", &slot) != 1 || slot >= DLOCK__CLUSTER_SLOTS)
        return DLOCK__RR_NONE;
    const char *colon = strrchr(sp + 1, ':');
    size_t hlen = colon != NULL ? (size_t) (colon - sp - 1) : 0;
    if (colon == NULL || hlen >= sizeof host || sscanf(colon + 1, "%d", &port) != 1 || port <= 0)
        return DLOCK__RR_NONE;
    memcpy(host, sp + 1, hlen);
    host[hlen] = '\0';
    if (hlen == 0)
        return DLOCK__RR_NONE; /* "MOVED 3999 :6381": an unknown endpoint */
    pthread_mutex_lock(&cl->mu);
    int k = node_index(cl, host, hlen, port);
    int full = k < 0 && atomic_load(&cl->nnodes) == MAX_NODES;
    if (k >= 0 && what == DLOCK__RR_MOVED)
        atomic_store(&cl->slots[slot], (short) k);
    pthread_mutex_unlock(&cl->mu);
    if (full) {
        dlock__fail(DLOCK_ESERVER,
                    "%s: slot %u is served by %s:%d, a node past the %d this client follows "
                    "(a cluster of more than %d nodes is not supported)",
                    cl->tmpl.label, slot, host, port, MAX_NODES, MAX_NODES);
        return DLOCK__RR_FULL;
    }
    if (k < 0)
        return DLOCK__RR_NONE;
    *to = cl->nodes[k]->pool[slot % cl->npool];
    return what;
}

size_t dlock__rcluster_masters(dlock__rcluster *cl, int64_t deadline_us, dlock__rconn **out,
                               size_t max)
{
    unsigned char serves[MAX_NODES] = {0};
    size_t n = 0;

    dlock__rcluster_refresh(cl, deadline_us);
    for (size_t s = 0; s < DLOCK__CLUSTER_SLOTS; s++) {
        int k = atomic_load(&cl->slots[s]);
        if (k >= 0)
            serves[k] = 1;
    }
    size_t nn = atomic_load(&cl->nnodes);
    for (size_t i = 0; i < nn && n < max; i++) {
        if (serves[i])
            out[n++] = cl->nodes[i]->pool[0];
    }
    return n;
}
