/* SPDX-License-Identifier: MIT */
/* renewal.c - renewing a batch of held locks and queued waiters.
 *
 * A batch is split into script calls over items of one group (held
 * exclusively, with one lease; held shared, with one lease; or waiting), at
 * most RENEW_BATCH items each, and all the calls go out as one pipeline: the
 * renewal of 10,000 locks is 40 script calls and one round trip.
 *
 * On a Redis Cluster a script touches keys of one hash slot only: a call
 * there takes the items of one slot, the calls of the slots of one node go
 * out as one pipeline to it, and every node's pipeline is sent before any
 * is waited for (renew_on_nodes). */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"
#include "replies.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_MIN_US 1000000 /* a cluster node's run of renewals is given at least */

enum group { HELD_EXCLUSIVE, HELD_SHARED, WAITING };

typedef struct slot {
    unsigned hash_slot; /* a cluster's; 0 on one server */
    enum group group;
    int64_t lease_ms;
    size_t item;
} slot;

static int by_group(const void *pa, const void *pb)
{
    const slot *a = pa, *b = pb;
    if (a->hash_slot != b->hash_slot)
        return a->hash_slot < b->hash_slot ? -1 : 1;
    if (a->group != b->group)
        return (int) a->group - (int) b->group;
    return (a->lease_ms > b->lease_ms) - (a->lease_ms < b->lease_ms);
}

static enum group group_of(const dlock__renewal *it)
{
    const rlock *l = RLOCK(it->lock);
    if (it->kind == DLOCK__RENEW_WAITER)
        return WAITING;
    return l->spec.kind == DLOCK__READ || l->spec.kind == DLOCK__SEMAPHORE ? HELD_SHARED
                                                                           : HELD_EXCLUSIVE;
}

/* One node's run of a cluster's renewal calls, sent on a thread of its
 * own when other nodes have theirs. */
typedef struct node_run {
    dlock__rconn *conn;
    size_t n;
    const evalcall *calls;
    redisReply **replies;
    int64_t deadline;
    int rc;
    char err[300];
    pthread_t thread;
    int threaded;
} node_run;

static void *send_run(void *arg)
{
    node_run *r = arg;
    r->rc = dlock__redis_run_scripts(r->conn, r->n, r->calls, r->deadline, r->replies);
    if (r->rc != DLOCK_OK)
        snprintf(r->err, sizeof r->err, "%s", dlock_errmsg());
    return NULL;
}

/* A cluster's renewal: the calls (one slot each, sorted by slot, so a
 * node's slots come in runs) of each node as one pipeline to it, every
 * node's sent before any is waited for (a thread per node but the
 * first, which goes on the caller's). The replies of a node that failed
 * stay NULL (its items failed); DLOCK_OK unless every node failed. */
static int renew_on_nodes(rbackend *b, const slot *order, const size_t *first, size_t nchunks,
                          const evalcall *calls, int64_t deadline, redisReply **replies)
{
    node_run *runs = calloc(nchunks, sizeof *runs);
    size_t nruns = 0, failed = 0;
    int rc = DLOCK_OK;

    if (runs == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t c = 0, end; c < nchunks; c = end) {
        dlock__rconn *conn =
            dlock__rcluster_node_conn(b->cluster, order[first[c]].hash_slot, deadline);
        for (end = c + 1;
             end < nchunks &&
             dlock__rcluster_node_conn(b->cluster, order[first[end]].hash_slot, deadline) == conn;
             end++)
            ;
        runs[nruns++] = (node_run){.conn = conn,
                                   .n = end - c,
                                   .calls = calls + c,
                                   .replies = replies + c,
                                   .deadline = deadline};
    }
    /* Each node's run is given half the time left (a second at least): a
     * node that does not answer (frozen) then leaves time for the next
     * try, after the map was read again from the other nodes, at the
     * node serving the slot then (a promoted replica) while the lease
     * lasts. */
    int64_t now = dlock__now_us(), half = (deadline - now) / 2;
    int64_t run_deadline = now + (half > RUN_MIN_US ? half : RUN_MIN_US);
    for (size_t i = 0; i < nruns && run_deadline < deadline; i++)
        runs[i].deadline = run_deadline;
    for (size_t i = 1; i < nruns; i++)
        runs[i].threaded = pthread_create(&runs[i].thread, NULL, send_run, &runs[i]) == 0;
    for (size_t i = 0; i < nruns; i++) {
        if (i == 0 || !runs[i].threaded)
            send_run(&runs[i]);
        else
            pthread_join(runs[i].thread, NULL);
    }
    for (size_t i = 0; i < nruns; i++) {
        if (runs[i].rc == DLOCK_OK)
            continue;
        if (failed++ == 0)
            rc = dlock__fail(runs[i].rc, "%s", runs[i].err);
        for (size_t k = 0; k < runs[i].n; k++)
            runs[i].replies[k] = NULL;
    }
    free(runs);
    return failed == nruns ? rc : DLOCK_OK;
}

int dlock__redis_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline)
{
    rbackend *b = RBACKEND(s);
    slot *order = calloc(n, sizeof *order);
    size_t *first = calloc(n + 1, sizeof *first); /* chunk c: order[first[c]..first[c+1]) */
    evalcall *calls = calloc(n, sizeof *calls);
    redisReply **replies = calloc(n, sizeof *replies);
    /* per chunk: numkeys and lease; per item: its fence */
    char(*numbers)[24] = calloc(3 * n, sizeof *numbers);
    /* per chunk: EVALSHA sha numkeys lease kind; per item: its lock key,
     * token and fence */
    const char **argv = calloc(5 * n + 3 * n, sizeof *argv);
    size_t *lens = calloc(5 * n + 3 * n, sizeof *lens);
    size_t nchunks = 0, nargs = 0;
    dlock__rrenewal renewed[RENEW_BATCH]; /* one chunk's results */
    int rc = DLOCK_OK;

    for (size_t i = 0; i < n; i++)
        items[i].result = DLOCK__RENEW_FAILED;
    if (order == NULL || first == NULL || calls == NULL || replies == NULL || numbers == NULL ||
        argv == NULL || lens == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        order[i].group = group_of(&items[i]);
        order[i].lease_ms = items[i].kind == DLOCK__RENEW_WAITER ? 0 : items[i].lease_ms;
        order[i].item = i;
        order[i].hash_slot = b->cluster != NULL ? RLOCK(items[i].lock)->slot : 0;
    }
    qsort(order, n, sizeof *order, by_group);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || i - first[nchunks - 1] == RENEW_BATCH ||
            by_group(&order[i - 1], &order[i]) != 0)
            first[nchunks++] = i;
    }
    first[nchunks] = n;

    for (size_t c = 0; c < nchunks; c++) {
        const dlock__renewal *lead = &items[order[first[c]].item];
        enum group g = order[first[c]].group;
        size_t count = first[c + 1] - first[c], at = 2;
        evalcall *call = &calls[c];

        call->script = g == WAITING ? DLOCK__S_HEARTBEAT : DLOCK__S_RENEW;
        call->argv = argv + nargs;
        call->lens = lens + nargs;
        call->argv[at] = numbers[2 * c];
        call->lens[at++] = NUM(numbers[2 * c], count);
        for (size_t i = first[c]; i < first[c + 1]; i++) {
            const rlock *l = RLOCK(items[order[i].item].lock);
            call->argv[at] = l->keys[0];
            call->lens[at++] = l->key_lens[0];
        }
        call->argv[at] = numbers[2 * c + 1];
        call->lens[at++] =
            NUM(numbers[2 * c + 1], g == WAITING ? b->cfg.waiter_lease_ms : lead->lease_ms);
        if (g != WAITING) {
            call->argv[at] = g == HELD_SHARED ? "s" : "x";
            call->lens[at++] = 1;
        }
        for (size_t i = first[c]; i < first[c + 1]; i++) {
            call->argv[at] = items[order[i].item].token;
            call->lens[at++] = strlen(items[order[i].item].token);
        }
        /* the fences holds are held under (renew.lua): 0 for an interop
         * key's, where nothing queues */
        for (size_t i = first[c]; g != WAITING && i < first[c + 1]; i++) {
            const dlock__renewal *it = &items[order[i].item];
            char *num = numbers[2 * n + order[i].item];
            call->argv[at] = num;
            call->lens[at++] = NUM(num, RLOCK(it->lock)->spec.simple ? 0 : it->held_fence);
        }
        call->argc = at;
        nargs += at;
    }

    long long acked = -1;
    if (b->cluster == NULL) {
        rc =
            dlock__redis_step(b, b->pool[0], NULL, nchunks, calls, deadline, NULL, replies, &acked);
    } else {
        rc = renew_on_nodes(b, order, first, nchunks, calls, deadline, replies);
    }
    if (rc != DLOCK_OK)
        goto out;
    if (dlock__redis_unconfirmed(b, acked)) {
        /* Renewed on the master only: not counted, so a hold whose
         * replicas stay behind for a lease is reported lost (a failover
         * then would lose it), as if the master had not answered. */
        for (size_t c = 0; c < nchunks; c++)
            freeReplyObject(replies[c]);
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "%s: renewed on the master, but %lld of the %u replicas asked (wait=%u) "
                         "acknowledged it in time",
                         b->label, acked, b->sync_replicas, b->sync_replicas);
        goto out;
    }
    for (size_t c = 0; c < nchunks; c++) {
        size_t count = first[c + 1] - first[c];
        int hb = calls[c].script == DLOCK__S_HEARTBEAT;
        if (replies[c] == NULL)
            continue; /* its node did not answer (a cluster's): its items failed */
        if (dlock__reply_renew(replies[c], count, hb, renewed) != 0) {
            rc = dlock__redis_bad_reply(b, "renewal", replies[c]);
            continue;
        }
        for (size_t i = 0; i < count; i++) {
            static const enum dlock__renew_result results[] = {
                [DLOCK__RRENEWED_OK] = DLOCK__RENEW_OK,
                [DLOCK__RRENEWED_GRANTED] = DLOCK__RENEW_GRANTED,
                [DLOCK__RRENEWED_GONE] = DLOCK__RENEW_GONE,
            };
            dlock__renewal *it = &items[order[first[c] + i].item];
            it->result = results[renewed[i].result];
            if (hb)
                it->fence = renewed[i].fence;
        }
    }
    for (size_t c = 0; c < nchunks; c++)
        freeReplyObject(replies[c]);
out:
    free(order);
    free(first);
    free(calls);
    free(replies);
    free(numbers);
    free(argv);
    free(lens);
    return rc;
}
