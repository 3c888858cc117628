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

typedef struct node {
    char *host;
    int port;
    char label[300];
    dlock__rconn *pool[MAX_NODEPOOL];
} node;

struct dlock__rcluster {
    dlock__rendpoint tmpl; /* auth, timeouts, log of every node (host and label not used) */
    size_t npool;
    pthread_mutex_t mu; /* guards adding nodes and reading the map */
    node *nodes[MAX_NODES];
    _Atomic size_t nnodes; /* nodes[0..nnodes) are set for good */
    size_t nseeds;
    atomic_int loaded;                         /* the map was read once */
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
    snprintf(nd->label, sizeof nd->label,
             strchr(nd->host, ':') != NULL ? "redis+cluster node [%s]:%d"
                                           : "redis+cluster node %s:%d",
             nd->host, port);
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

void dlock__rcluster_refresh(dlock__rcluster *cl, int64_t deadline_us)
{
    static const char *const argv[] = {"CLUSTER", "SLOTS"};
    static const size_t lens[] = {7, 5};
    const dlock__rcmd cmd = {2, argv, lens};

    pthread_mutex_lock(&cl->mu);
    size_t n = atomic_load(&cl->nnodes);
    for (size_t i = 0; i < n && dlock__now_us() < deadline_us; i++) {
        redisReply *r = NULL;
        dlock__saved_error saved;
        dlock__save_error(&saved);
        int rc = dlock__rconn_call(cl->nodes[i]->pool[0], 1, &cmd, deadline_us, &r);
        dlock__restore_error(&saved);
        if (rc != DLOCK_OK)
            continue;
        int ok = read_map(cl, r);
        freeReplyObject(r);
        if (ok) {
            atomic_store(&cl->loaded, 1);
            break;
        }
    }
    pthread_mutex_unlock(&cl->mu);
}

static int index_of(dlock__rcluster *cl, unsigned slot, int64_t deadline_us)
{
    if (!atomic_load_explicit(&cl->loaded, memory_order_acquire)) {
        int64_t cap = dlock__now_us() + cl->tmpl.connect_timeout_ms * 1000;
        dlock__rcluster_refresh(cl, deadline_us < cap ? deadline_us : cap);
    }
    /* acquire: the node it names (made, then published by the release of
     * this store) is seen whole */
    int k = atomic_load_explicit(&cl->slots[slot % DLOCK__CLUSTER_SLOTS], memory_order_acquire);
    return k >= 0 ? k : 0;
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
    /* A script on a node whose slot is migrating touched a key of the
     * lock that has left already (the scripts declare only the lock's
     * base key, which Redis checks before running them): the same again
     * until the slot has moved and the node answers MOVED. The scripts
     * are made to be sent again (a reply may always be lost). */
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
    if (k >= 0 && what == DLOCK__RR_MOVED)
        atomic_store(&cl->slots[slot], (short) k);
    pthread_mutex_unlock(&cl->mu);
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
