/* SPDX-License-Identifier: MIT */
/* nodes.h - the N independent Redis masters of redlock://, and one request
 * sent to all of them at once.
 *
 * Each node has one pipelined connection (../redis/conn.h) and one worker
 * thread that sends to it: a round (the same commands for every node) is
 * handed to every worker at once, so the N round trips overlap, and the
 * caller waits only until it can decide (a quorum answered, or the quorum is
 * out of reach), never for the slowest node. The round lives on, counted,
 * until every worker is done with it: a late reply is read and dropped, and
 * what a caller sends without waiting (a release) still goes out, in order
 * behind what it sent before to the same node.
 *
 * A worker blocked on a node that does not answer (frozen: the kernel
 * takes the connection, the server never replies) is not waited for at
 * close: it ends by itself once its request times out, and the last of the
 * workers to end frees what they share (connections, the TLS context). */
#ifndef DLOCK_REDLOCK_NODES_H
#define DLOCK_REDLOCK_NODES_H

#include "../redis/conn.h"

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#define DLOCK__REDLOCK_MAX_NODES 16

typedef struct dlock__rlnodes dlock__rlnodes;
typedef struct dlock__rlround dlock__rlround;

/* What one node answered in a round: rc DLOCK_OK with every reply set
 * (a script's error is a reply), or the failure, with its detail in err. */
typedef struct dlock__rlanswer {
    int done;
    int rc;
    redisReply **replies; /* ncmds of them */
    char err[256];
} dlock__rlanswer;

/* One endpoint per node (copied), script: the Lua text run with EVALSHA
 * sha (EVAL on NOSCRIPT). tls: the nodes' TLS context (NULL: plain), which
 * the nodes own from now on, failure or not (freed after the last link
 * made with it). Starts the workers; connects lazily. */
int dlock__rlnodes_new(const dlock__rendpoint *eps, size_t n, const char *script, const char *sha,
                       dlock__rtls *tls, dlock__rlnodes **out);
/* Stops the workers: what was queued is still sent, each request bounded
 * by deadline_us (later ones are dropped unsent). Waits for the workers
 * until wait_until_us, but not for one whose node was found out of reach
 * (its last request failed): a worker still busy then is left to end by
 * itself, by deadline_us and its request in flight at the latest, and the
 * last worker to end frees what they share. From the return on, nothing is
 * logged to the client's log (the endpoints' `log`) and nothing of the
 * endpoints is used. */
void dlock__rlnodes_free(dlock__rlnodes *ns, int64_t deadline_us, int64_t wait_until_us);
size_t dlock__rlnodes_count(const dlock__rlnodes *ns);
const char *dlock__rlnodes_label(const dlock__rlnodes *ns, size_t i);
/* How many nodes answered this client (a connection's first exchange)
 * since the nodes were made. */
size_t dlock__rlnodes_reached(const dlock__rlnodes *ns);
/* How many nodes never answered this client and, at the last try, had no
 * Redis server at their address (conn.h `absent`: nothing took the
 * connection, or another service answered). */
size_t dlock__rlnodes_absent(const dlock__rlnodes *ns);
/* Node i's being out of reach is told: an error about to be returned
 * names it (and why), so the node's warning would say it again. Once per
 * outage: told again after the node has answered. */
void dlock__rlnodes_told(dlock__rlnodes *ns, size_t i);
/* Whether node i showed that it is a node of a Redis Cluster (conn.h
 * `in_cluster`): the URL is wrong, and the node refused from then on. */
int dlock__rlnodes_in_cluster(const dlock__rlnodes *ns, size_t i);
/* Whether node i has been busy with a request, unanswered, for us or more
 * (a node stopped or hung: not worth a short wait for its answer). */
int dlock__rlnodes_silent_for(dlock__rlnodes *ns, size_t i, int64_t us);

/* A round of ncmds script calls, the same for every node: each call's
 * arguments after EVALSHA sha (numkeys, keys, args), copied. */
dlock__rlround *dlock__rlround_new(size_t ncmds);
/* Sets call i; DLOCK_OK or DLOCK_ENOMEM. */
int dlock__rlround_set(dlock__rlround *r, size_t i, size_t argc, const char *const *argv,
                       const size_t *lens);
/* Hands the round to every node's worker, each request bounded by
 * deadline_us. The caller keeps its reference. */
void dlock__rlround_send(dlock__rlnodes *ns, dlock__rlround *r, int64_t deadline_us);
/* The same for node i alone: the others' answers are done at once, with
 * DLOCK_ENOTSUP ("not asked"). For what differs per node (a SCAN's cursor). */
void dlock__rlround_send_to(dlock__rlnodes *ns, dlock__rlround *r, size_t i, int64_t deadline_us);
/* Waits until decided(arg, answers, n) returns nonzero, every node has
 * answered, or until_us; answers[i] is node i's (done 0: not yet). decided
 * runs with the round's lock held, on the caller's thread or on a worker's
 * as an answer comes in (only while the caller waits: so it reads only arg
 * and the answers, and must not block), so that the caller is woken once,
 * when it can decide. On return
 * `answers` is a snapshot the caller may read until it drops the round:
 * an entry done stays as it is. */
const dlock__rlanswer *dlock__rlround_wait(dlock__rlround *r,
                                           int (*decided)(void *arg, const dlock__rlanswer *a,
                                                          size_t n),
                                           void *arg, int64_t until_us);
/* Drops the caller's reference (the workers hold theirs). A node found
 * out of reach while the caller held the round is warned of here, on the
 * caller's thread (unless told already: dlock__rlnodes_told), so that the
 * warning comes before what the caller goes on to report. */
void dlock__rlround_drop(dlock__rlround *r);

#endif
