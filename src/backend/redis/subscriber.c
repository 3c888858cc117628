/* subscriber.c - the one pub/sub connection of a client.
 *
 * A release that hands a lock to a queued waiter publishes "<token> <fence>"
 * on the channel PREFIX:{name}:wake:<client id> of the waiter's client. Each
 * client subscribes once, to the pattern PREFIX:*:wake:<client id>, so it
 * hears every hand-over meant for it, for any lock name, without a
 * subscription per name, and without hearing other clients' wake-ups. A
 * thread reads the connection and posts each wake-up on the client's board.
 *
 * The subscription must be live before a waiter joins a queue, or the
 * hand-over could be published to nobody: waiters call
 * dlock__rsub_wait_ready() first. When the connection drops, wake-ups may
 * be lost until it is back, so after every re-subscription all waiters are
 * told to check again. */
#include "subscriber.h"

#include "../../core/clock.h"
#include "../../core/error.h"
#include "../../core/thread.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum sub_state { SUB_CONNECTING, SUB_READY, SUB_FAILED };

struct dlock__rsub {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stopping;
    enum sub_state state;
    int fd; /* of the live connection, for shutdown() on stop; -1 if none */
    int fail_code;
    char fail_msg[256];
    unsigned subscriptions; /* successful subscriptions so far */

    dlock__rendpoint ep; /* strings borrowed from the backend, which outlives us */
    char pattern[160];
    dlock__board *board;
};

static void handle_message(dlock__rsub *s, redisReply *r)
{
    /* ["pmessage", pattern, channel, "<token> <fence>"] */
    char token[80];
    uint64_t fence;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "pmessage") != 0 ||
        r->element[3]->type != REDIS_REPLY_STRING)
        return;
    if (sscanf(r->element[3]->str, "%79s %" SCNu64, token, &fence) != 2)
        return;
    dlock__board_grant(s->board, token, fence);
}

static void set_state(dlock__rsub *s, enum sub_state state, int fd)
{
    pthread_mutex_lock(&s->mu);
    s->state = state;
    s->fd = fd;
    if (state == SUB_FAILED) {
        s->fail_code = DLOCK_EUNREACHABLE;
        snprintf(s->fail_msg, sizeof s->fail_msg, "%s (subscriber connection)", dlock_errmsg());
    }
    if (state == SUB_READY) {
        s->subscriptions++;
        if (s->stopping)
            shutdown(fd, SHUT_RDWR); /* stop() came while we were connecting */
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Connects and subscribes. Returns the context, or NULL (detail recorded). */
static redisContext *subscribe(dlock__rsub *s)
{
    int code;
    redisContext *ctx = dlock__rconn_dial(&s->ep, &code);
    redisReply *r;

    if (ctx == NULL)
        return NULL;
    r = redisCommand(ctx, "PSUBSCRIBE %s", s->pattern);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        strcmp(r->element[0]->str, "psubscribe") != 0) {
        dlock__fail(DLOCK_EUNREACHABLE, "%s: PSUBSCRIBE failed: %s", s->ep.label,
                    r == NULL                      ? ctx->errstr
                    : r->type == REDIS_REPLY_ERROR ? r->str
                                                   : "unexpected reply");
        freeReplyObject(r);
        redisFree(ctx);
        return NULL;
    }
    freeReplyObject(r);
    /* An idle subscriber waits for messages indefinitely; a dead peer is
     * found by keepalive, and waiters never depend on it alone. */
    struct timeval none = {0, 0};
    redisSetTimeout(ctx, none);
    redisEnableKeepAlive(ctx);
    return ctx;
}

static void *run(void *arg)
{
    dlock__rsub *s = arg;
    int64_t backoff_us = 50000;

    for (;;) {
        pthread_mutex_lock(&s->mu);
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stopping)
            break;

        redisContext *ctx = subscribe(s);
        if (ctx == NULL) {
            set_state(s, SUB_FAILED, -1);
            pthread_mutex_lock(&s->mu);
            struct timespec ts = dlock__timespec(dlock__now_us() + backoff_us);
            if (!s->stopping)
                pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            pthread_mutex_unlock(&s->mu);
            backoff_us = backoff_us * 2 > 2000000 ? 2000000 : backoff_us * 2;
            continue;
        }
        backoff_us = 50000;
        pthread_mutex_lock(&s->mu);
        int again = s->subscriptions > 0;
        pthread_mutex_unlock(&s->mu);
        set_state(s, SUB_READY, ctx->fd);
        if (again)
            dlock__board_recheck(s->board, NULL); /* wake-ups may have been missed */

        for (;;) {
            void *reply = NULL;
            if (redisGetReply(ctx, &reply) != REDIS_OK)
                break;
            handle_message(s, reply);
            freeReplyObject(reply);
        }
        dlock__fail(DLOCK_EUNREACHABLE, "%s: subscriber connection lost: %s", s->ep.label,
                    ctx->errstr);
        set_state(s, SUB_CONNECTING, -1);
        redisFree(ctx);
        /* Wake-ups may be lost until we are back: waiters ask the server
         * themselves (and learn at once if it is gone). */
        dlock__board_recheck(s->board, NULL);
    }
    return NULL;
}

int dlock__rsub_start(const dlock__rendpoint *ep, const char *pattern, dlock__board *board,
                      dlock__rsub **out)
{
    dlock__rsub *s = calloc(1, sizeof *s);
    pthread_condattr_t attr;

    *out = NULL;
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->ep = *ep;
    snprintf(s->pattern, sizeof s->pattern, "%s", pattern);
    s->board = board;
    s->fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (dlock__thread_start(&s->thread, run, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return dlock__fail(DLOCK_ENOMEM, "cannot start the subscriber thread");
    }
    *out = s;
    return DLOCK_OK;
}

int dlock__rsub_wait_ready(dlock__rsub *s, int64_t deadline_us)
{
    int rc = DLOCK_OK;

    pthread_mutex_lock(&s->mu);
    while (s->state != SUB_READY) {
        if (s->state == SUB_FAILED) {
            rc = dlock__fail(s->fail_code, "%s", s->fail_msg);
            break;
        }
        struct timespec ts = dlock__timespec(deadline_us);
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) {
            rc = dlock__fail(DLOCK_ETIMEDOUT, "%s: subscriber connection not ready in time",
                             s->ep.label);
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int dlock__rsub_ready(dlock__rsub *s)
{
    pthread_mutex_lock(&s->mu);
    int ready = s->state == SUB_READY;
    pthread_mutex_unlock(&s->mu);
    return ready;
}

void dlock__rsub_stop(dlock__rsub *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    if (s->fd >= 0)
        shutdown(s->fd, SHUT_RDWR);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
