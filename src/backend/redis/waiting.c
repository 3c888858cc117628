/* SPDX-License-Identifier: MIT */
/* waiting.c - a queued waiter waits for its hand-over notice: PUBLISHed to
 * the client's channel (subscriber.c) or XADDed to its stream (stream.c,
 * notify=stream), whichever the URL chose, and read by one connection of
 * the client's for all its waiters, which wakes the one a notice names. On
 * a Redis Cluster, SPUBLISHed on the lock's slot's master, to a channel of
 * the name and the client (shards.c), and the waiter looks for its
 * hand-over itself now and then, beneath. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A queued waiter's look again on a cluster: while its notices flow, a
 * fallback for the notice lost when its slot moved (a failover, a
 * migration: its subscription is dropped, and it looks again at once
 * anyway); else what it waits by. */
#define CLUSTER_POLL_US         10000
#define CLUSTER_NOTICED_POLL_US 100000

int dlock__redis_notices_flow(rbackend *b, rlock *l)
{
    if (b->cluster != NULL)
        /* subscribed, or tried to be (a waiter that could not be looks
         * for its hand-over on the short poll: it queues all the same) */
        return atomic_load(&l->prepared) ||
               dlock__rshards_live(b->shards, l->wake_channel, l->slot);
    pthread_mutex_lock(&b->mu);
    int ready = b->notify_stream ? b->stream != NULL : b->sub != NULL && dlock__rsub_ready(b->sub);
    pthread_mutex_unlock(&b->mu);
    return ready;
}

int dlock__redis_prepare_wait(dlock__store *store, dlock__store_lock *l, int64_t deadline_us)
{
    rbackend *b = RBACKEND(store);
    int rc = DLOCK_OK;
    int64_t cap = dlock__now_us() + (b->ep.connect_timeout_ms + b->cfg.command_timeout_ms) * 1000;

    if (RLOCK(l)->spec.simple)
        return DLOCK_ENOTSUP; /* other clients publish nothing: poll */
    if (b->cluster != NULL) {
        /* subscribed before the waiter queues; a subscription that fails
         * leaves it polling (cluster_wait), queued all the same */
        rlock *rl = RLOCK(l);
        if (dlock__rshards_watch(b->shards, rl->wake_channel, rl->slot,
                                 deadline_us < cap ? deadline_us : cap) != DLOCK_OK)
            dlock__clear_error();
        dlock__rshards_unwatch(b->shards, rl->wake_channel);
        atomic_store(&rl->prepared, 1);
        return DLOCK_OK;
    }
    pthread_mutex_lock(&b->mu);
    if (b->notify_stream) {
        if (b->stream == NULL)
            rc = dlock__rstream_new(&b->ep, b->board, &b->stream);
        pthread_mutex_unlock(&b->mu);
        return rc;
    }
    if (b->sub == NULL)
        rc = dlock__rsub_new(&b->ep, b->wake_channel, b->board, &b->sub);
    pthread_mutex_unlock(&b->mu);
    return rc != DLOCK_OK ? rc : dlock__rsub_connect(b->sub, deadline_us < cap ? deadline_us : cap);
}

/* Cuts short the XREAD blocked on connection `id` (it returns as if timed
 * out). If this fails, the reader still comes round within a slice. */
static void interrupt_reading(dlock__rconn *c, long long id, int64_t until_us)
{
    char digits[24];
    const char *argv[] = {"CLIENT", "UNBLOCK", digits};
    size_t lens[] = {6, 7, 0};
    redisReply *r = NULL;

    lens[2] = (size_t) snprintf(digits, sizeof digits, "%lld", id);
    dlock__rcmd cmd = {3, argv, lens};
    if (dlock__rconn_call(c, 1, &cmd, until_us, &r) == DLOCK_OK)
        freeReplyObject(r);
    dlock__clear_error();
}

/* Whether lock l, exclusive, was handed to token: 1 with its fence (the
 * name's counter, which nobody else moves while token holds it). One
 * MGET of two keys of the lock's slot. */
static int handed_to(rbackend *b, const rlock *l, const char *token, int64_t until_us,
                     uint64_t *fence)
{
    const char *argv[] = {"MGET", l->keys[0], l->keys[1]};
    size_t lens[] = {4, l->key_lens[0], l->key_lens[1]};
    dlock__rcmd cmd = {3, argv, lens};
    redisReply *r = NULL;
    int yes = 0;

    /* as every call on a cluster: a suspect node gets a second, redirects
     * are followed */
    if (dlock__redis_call(dlock__redis_conn(b, l, until_us), &cmd, until_us, &r) != DLOCK_OK) {
        dlock__clear_error(); /* the next attempt meets it, and says so */
        return 0;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
        strcmp(r->element[0]->str, token) == 0) {
        *fence = strtoull(r->element[1]->str, NULL, 10);
        yes = *fence > 0;
    }
    freeReplyObject(r);
    return yes;
}

/* On a cluster a queued waiter is woken by its notice (shards.c), and
 * looks every poll step whether the lock was handed to it all the same (an
 * exclusive one: its base key names the holder), and is then granted it
 * as by a notice; a shared one (reader, semaphore) is looked at by the
 * core's next attempt. A notice is a grant, as on one server: the lock
 * lives on its slot's master alone, whose script made the hand-over and
 * SPUBLISHed it; a failover that loses the grant loses it as it loses a
 * held lock, and renewal says so. */
static enum dlock__wake cluster_wait(rbackend *b, const rlock *l, dlock__waiter *w,
                                     int64_t until_us)
{
    int exclusive =
        l->spec.kind == DLOCK__MUTEX || l->spec.kind == DLOCK__FAIR || l->spec.kind == DLOCK__WRITE;
    int64_t cap = dlock__now_us() + (b->ep.connect_timeout_ms + b->cfg.command_timeout_ms) * 1000;
    /* subscribed already, unless its slot moved since (or the first
     * attempt queued at once): then now, while queued */
    int live = dlock__rshards_watch(b->shards, l->wake_channel, l->slot,
                                    until_us < cap ? until_us : cap) == DLOCK_OK;
    if (!live)
        dlock__clear_error(); /* polls instead */
    enum dlock__wake wake;
    for (;;) {
        int64_t step = dlock__now_us() + (live ? CLUSTER_NOTICED_POLL_US : CLUSTER_POLL_US);
        wake = dlock__board_park(b->board, w, until_us < step ? until_us : step);
        if (wake != DLOCK__WAKE_NONE || !exclusive || step >= until_us)
            break;
        uint64_t fence;
        if (handed_to(b, l, w->token, until_us, &fence))
            dlock__board_grant(b->board, w->token, w->wait_id, fence);
        live = dlock__rshards_live(b->shards, l->wake_channel, l->slot);
    }
    dlock__rshards_unwatch(b->shards, l->wake_channel);
    return wake;
}

enum dlock__wake dlock__redis_wait(dlock__store *store, dlock__store_lock *sl, dlock__waiter *w,
                                   int64_t until_us)
{
    rbackend *b = RBACKEND(store);
    if (b->cluster != NULL)
        return cluster_wait(b, RLOCK(sl), w, until_us);
    if (b->notify_stream) {
        const rlock *l = RLOCK(sl);
        char key[1100];
        snprintf(key, sizeof key, "%s:wake:%s", l->keys[0], b->cfg.client_id);
        long long reading_id;
        if (dlock__rstream_watch(b->stream, key, &reading_id) != DLOCK_OK)
            return dlock__board_park(b->board, w, until_us);
        if (reading_id != 0)
            interrupt_reading(l->conn, reading_id, until_us);
        enum dlock__wake wake = dlock__rstream_wait(b->stream, w, until_us);
        dlock__rstream_unwatch(b->stream, key);
        return wake;
    }
    /* The subscriber exists: dlock__redis_prepare_wait made it before anyone queued. */
    if (!dlock__rsub_ready(b->sub))
        dlock__redis_prepare_wait(store, sl, until_us); /* dropped meanwhile: come back */
    return dlock__rsub_wait(b->sub, w, until_us);
}
