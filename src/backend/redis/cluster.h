/* SPDX-License-Identifier: MIT */
/* cluster.h - the nodes of a Redis Cluster (redis+cluster://h1:p1,h2:p2)
 * and which of them serves each hash slot.
 *
 * Each master the client learns of is a node with its own endpoint and
 * pool of connections (conn.h). The slot map is read (CLUSTER SLOTS) from
 * the first node that answers, seeds first, at the first call, and again
 * whenever a node answers CLUSTERDOWN or a node does not answer; a MOVED
 * reply moves its one slot to the node it names at once. Nodes are only
 * ever added (a node that stops serving slots keeps its idle connections
 * until the client closes), so a connection handed out stays valid until
 * dlock__rcluster_free.
 *
 * A node that does not answer (refuses, or accepts and then says nothing,
 * as a stopped process or a hung host does) is suspect until it answers
 * again: the map is read again at the next call, from the other nodes
 * first, each given a second, so that call goes to the node serving the
 * slot then (a replica promoted meanwhile); and calls to a suspect node
 * are given a second, not the command timeout. */
#ifndef DLOCK_REDIS_CLUSTER_H
#define DLOCK_REDIS_CLUSTER_H

#include "../../base/url.h"
#include "conn.h"

#define DLOCK__CLUSTER_SLOTS 16384

typedef struct dlock__rcluster dlock__rcluster;

/* The seeds of url (6379 when no port is given), each a node reached with
 * tmpl's auth and timeouts; npool connections per node. DLOCK_OK,
 * DLOCK_EINVAL (detail recorded) or DLOCK_ENOMEM. Does not connect. */
int dlock__rcluster_new(dlock__url *url, const dlock__rendpoint *tmpl, size_t npool,
                        dlock__rcluster **out);
void dlock__rcluster_free(dlock__rcluster *cl);

/* The connection to use for slot (the map read first if it is not yet,
 * or again after a node did not answer, while deadline_us leaves time):
 * the node that serves it as far as the client knows, or the first seed
 * not suspect when none is known (which then redirects, or fails with its
 * own error). Never NULL. */
dlock__rconn *dlock__rcluster_conn(dlock__rcluster *cl, unsigned slot, int64_t deadline_us);

/* The same node's first connection, whatever the slot: what a batch of
 * calls to several slots of one node is sent over. */
dlock__rconn *dlock__rcluster_node_conn(dlock__rcluster *cl, unsigned slot, int64_t deadline_us);

/* DLOCK_OK, or DLOCK_EUNREACHABLE saying so ("H:P answered, but not as a
 * node of a Redis Cluster") when no slot map was read and a seed answered
 * CLUSTER SLOTS that it is not in cluster mode: the URL names a plain Redis
 * (use redis://), as it would name another service's port, and a call sent
 * to it would work there, unlike a cluster's. Every call through the
 * cluster checks it, after the connection was picked (which reads the map
 * if due). */
int dlock__rcluster_check(dlock__rcluster *cl);
/* Whether that is the case (no error recorded): no cluster was reached. */
int dlock__rcluster_wrong_kind(dlock__rcluster *cl);

/* The index of the node serving slot now (the map read first if it is
 * not yet), as dlock__rcluster_conn picks it: stable for the client's
 * life, below DLOCK__CLUSTER_MAX_NODES. */
#define DLOCK__CLUSTER_MAX_NODES 64
int dlock__rcluster_node_index(dlock__rcluster *cl, unsigned slot, int64_t deadline_us);
/* A link of its own to node k (dlock__rconn_dial: AUTH done), for a
 * connection that is not the pool's (the sharded subscriber, shards.h);
 * NULL with *code and the detail recorded on failure. */
dlock__rlink *dlock__rcluster_dial(dlock__rcluster *cl, int k, int64_t deadline_us, int *code);
/* Node k's label ("redis+cluster node 127.0.0.1:7000"), for messages. */
const char *dlock__rcluster_node_label(dlock__rcluster *cl, int k);

/* What a reply asks of the client, for a command on a key of a slot. */
enum dlock__rredirect {
    DLOCK__RR_NONE,  /* not a redirection: the reply stands */
    DLOCK__RR_MOVED, /* the slot lives at *to now (the map says so from now on) */
    DLOCK__RR_ASK,   /* send ASKING then the command to *to, this once (a
                        script waits instead: calls.c) */
    DLOCK__RR_RETRY, /* TRYAGAIN, CLUSTERDOWN: the same again a little later */
    DLOCK__RR_FULL,  /* MOVED or ASK to a node past the most a client follows
                        (DLOCK__CLUSTER_MAX_NODES): the error is recorded */
};
/* Reads r (an error reply); on MOVED and ASK *to is the node's
 * connection (a node not known before is added). A reply naming a node
 * that cannot be added for want of memory is NONE; one past
 * DLOCK__CLUSTER_MAX_NODES nodes is FULL, with a clear error recorded
 * (DLOCK_ESERVER: "more than 64 nodes"). A slot map naming more nodes
 * leaves their slots to the nodes that redirect to them. */
enum dlock__rredirect dlock__rcluster_redirect(dlock__rcluster *cl, const redisReply *r,
                                               dlock__rconn **to);
/* Reads the slot map again from the first node that answers (after
 * CLUSTERDOWN), nodes that are not suspect first, each given a second (or
 * the connect timeout if less), all of them until deadline_us and three
 * seconds at most. */
void dlock__rcluster_refresh(dlock__rcluster *cl, int64_t deadline_us);

/* What a call through c (a connection of one of cl's nodes) came to:
 * DLOCK_EUNREACHABLE makes its node suspect and the map to be read again
 * at the next call (dlock__rcluster_conn and the like, when they are
 * given time); DLOCK_OK clears its suspicion; other codes change nothing.
 * Returns rc. */
int dlock__rcluster_noted(dlock__rcluster *cl, const dlock__rconn *c, int rc);
/* The deadline of a call through c: deadline_us, or a second from now
 * if that is sooner and c's node is suspect. */
int64_t dlock__rcluster_bound(dlock__rcluster *cl, const dlock__rconn *c, int64_t deadline_us);

/* The first connection of every node serving slots now, at most max, in
 * out; returns their number. */
size_t dlock__rcluster_masters(dlock__rcluster *cl, int64_t deadline_us, dlock__rconn **out,
                               size_t max);

#endif
