/* SPDX-License-Identifier: MIT */
/* replicas.c - replicas of the master: option wait=N, and reading one.
 *
 * wait=N: a step that changes a lock counts only once N replicas of the
 * master have it (Redis WAIT), so that a failover to one of them keeps it.
 *
 * WAIT blocks the connection it is sent on until the replicas acknowledge
 * the writes made on that connection, or its timeout: on the pooled
 * connections, which other threads' commands share, one slow replica would
 * hold every thread back. So each step runs, with its WAIT, on a
 * connection of its own, taken from a small set of idle ones (made when
 * none is idle) and given back after. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"
#include "replies.h"

#include <stdlib.h>
#include <string.h>

/* Idle connections kept for the next steps; more are made when threads
 * step at once, and closed when given back beyond these. */
#define SYNC_IDLE_MAX (sizeof((rbackend *) 0)->sync_idle / sizeof(dlock__rconn *))

static dlock__rconn *take(rbackend *b)
{
    dlock__rconn *c = NULL;
    pthread_mutex_lock(&b->sync_mu);
    if (b->sync_nidle > 0)
        c = b->sync_idle[--b->sync_nidle];
    pthread_mutex_unlock(&b->sync_mu);
    if (c == NULL) {
        if (dlock__rconn_new(&b->ep, &c) != DLOCK_OK)
            c = NULL;
        else
            dlock__rconn_describe(c, "a connection for WAIT");
    }
    return c;
}

static void give_back(rbackend *b, dlock__rconn *c)
{
    pthread_mutex_lock(&b->sync_mu);
    if (b->sync_nidle < SYNC_IDLE_MAX) {
        b->sync_idle[b->sync_nidle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&b->sync_mu);
    dlock__rconn_free(c);
}

void dlock__redis_replicas_close(rbackend *b)
{
    for (size_t i = 0; i < b->sync_nidle; i++)
        dlock__rconn_free(b->sync_idle[i]);
    b->sync_nidle = 0;
}

int dlock__redis_step(rbackend *b, dlock__rconn *c, const dlock__rcmd *before, size_t n,
                      const evalcall *calls, int64_t deadline, redisReply **before_reply,
                      redisReply **replies, long long *acked)
{
    *acked = -1;
    if (b->sync_replicas == 0)
        return dlock__redis_run_between(c, before, n, calls, NULL, deadline, before_reply, replies,
                                        NULL);

    /* WAIT's own bound: the option's, within what is left of the request
     * (its reply must come back before the deadline); never 0, which
     * would wait for ever. */
    int64_t left_ms = (deadline - dlock__now_us()) / 1000;
    int64_t ms = b->sync_timeout_ms < left_ms * 3 / 4 ? b->sync_timeout_ms : left_ms * 3 / 4;
    char replicas[24], timeout[24];
    const char *argv[] = {"WAIT", replicas, timeout};
    size_t lens[] = {4, NUM(replicas, b->sync_replicas), NUM(timeout, ms > 1 ? ms : 1)};
    dlock__rcmd wait = {3, argv, lens};
    redisReply *waited = NULL;

    dlock__rconn *own = take(b);
    if (own == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    int rc = dlock__redis_run_between(own, before, n, calls, &wait, deadline, before_reply, replies,
                                      &waited);
    give_back(b, own);
    if (rc != DLOCK_OK)
        return rc;
    if (waited->type == REDIS_REPLY_INTEGER) {
        *acked = waited->integer;
    } else {
        /* WAIT refused (a replica itself, an ACL without it): confirmed by none */
        char why[512];
        DLOCK__LOG(b->base.host.log, DLOCK_LOG_WARN, "%s: WAIT refused: %s", b->label,
                   dlock__reply_reason(waited, "(not a number)", why, sizeof why));
        *acked = 0;
    }
    freeReplyObject(waited);
    return DLOCK_OK;
}

int dlock__redis_unconfirmed(const rbackend *b, long long acked)
{
    return acked >= 0 && acked < (long long) b->sync_replicas;
}

long long dlock__redis_replicas_connected(rbackend *b, dlock__rconn *c, int64_t deadline)
{
    const char *argv[] = {"ROLE"};
    size_t lens[] = {4};
    dlock__rcmd role = {1, argv, lens};
    redisReply *r = NULL;
    long long n = -1;

    (void) b;
    dlock__saved_error saved;
    dlock__save_error(&saved);
    /* ROLE of a master: "master", its offset, and one entry per connected replica */
    if (dlock__rconn_call(c, 1, &role, deadline, &r) == DLOCK_OK && r->type == REDIS_REPLY_ARRAY &&
        r->elements >= 3 && r->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(r->element[0]->str, "master") == 0 && r->element[2]->type == REDIS_REPLY_ARRAY)
        n = (long long) r->element[2]->elements;
    freeReplyObject(r);
    dlock__restore_error(&saved);
    return n;
}

/* ---------------------------------------------------------------- reading one */

int dlock__redis_note_replica(rbackend *b, dlock__rconn *c, int64_t deadline)
{
    const char *argv[1] = {"ROLE"};
    size_t lens[1] = {4};
    dlock__rcmd cmd = {1, argv, lens};
    redisReply *r = NULL;

    /* a cluster's reads go to masters; a URL that names a replica reads it
     * as well as a master (a lock is never taken there: READONLY) */
    if (b->cluster != NULL || atomic_exchange(&b->role_asked, 1))
        return DLOCK_OK;
    /* a server without ROLE (renamed, or refused by an ACL) reads on; one
     * that cannot be reached ends the read here, rather than cost the
     * read's own request a connect timeout more */
    int rc = dlock__redis_call(c, &cmd, deadline, &r);
    if (rc == DLOCK_EUNREACHABLE)
        atomic_store(&b->role_asked, 0);
    if (rc != DLOCK_OK)
        return rc == DLOCK_EUNREACHABLE ? rc : DLOCK_OK;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
        r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "slave") == 0 &&
        r->element[1]->type == REDIS_REPLY_STRING && r->element[2]->type == REDIS_REPLY_INTEGER)
        DLOCK__LOG(b->base.host.log, DLOCK_LOG_WARN,
                   "%s: reading a replica (of %s:%lld): what it shows may lag the master; point "
                   "the URL at the master (or use redis+sentinel://) for what holds now",
                   b->label, r->element[1]->str, (long long) r->element[2]->integer);
    freeReplyObject(r);
    return DLOCK_OK;
}
