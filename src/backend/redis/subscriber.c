/* SPDX-License-Identifier: MIT */
/* subscriber.c - the one pub/sub connection of a client, read by its
 * waiters.
 *
 * A release that hands a lock to a queued waiter publishes "<token> <wait id>
 * <fence>" on the channel PREFIX:wake:<client id> of the waiter's client,
 * which the waiter named when it queued. Each client subscribes once, to
 * that one channel, so it hears every hand-over meant for it, for any lock
 * name, and none of other clients'. (Not a pattern per client: the server
 * matches every PUBLISH against every pattern, which with 200 clients cut
 * its PUBLISH rate from 570k/s to 24k/s; a channel is one lookup.)
 *
 * Nobody needs those messages but waiting threads, so a waiting thread
 * reads them itself: one waiter at a time holds the reader role, reads the
 * socket and posts every hand-over it reads on the client's board (its own
 * included, which then costs no thread switch at all); the others park on
 * the board. A reader that leaves hands the role to a parked waiter. While
 * nobody waits, nobody reads; messages for waiters that gave up are ignored.
 *
 * The subscription must be live before a waiter joins a queue, or the
 * hand-over could be published to nobody: waiters connect first
 * (dlock__rsub_connect). When the connection drops, wake-ups may have been
 * lost, so all waiters are told to check again, and the next one connects
 * anew. */
#include "subscriber.h"

#include "replies.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How often a reader looks up from the socket for wake-ups posted by
 * others (a cancel, a grant found by a heartbeat). */
#define READER_SLICE_US 50000

enum sub_state { SUB_DOWN, SUB_CONNECTING, SUB_READY };

struct dlock__rsub {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* state changes */
    enum sub_state state;
    dlock__rlink *link; /* READY: the subscribed connection (its reader parses) */
    unsigned moved;     /* *ep.moved when it was dialed (conn.h) */
    int reading;        /* a waiter holds the reader role */

    dlock__rendpoint ep; /* strings borrowed from the backend, which outlives us */
    char channel[160];
    dlock__board *board;
};

int dlock__rsub_new(const dlock__rendpoint *ep, const char *channel, dlock__board *board,
                    dlock__rsub **out)
{
    dlock__rsub *s = calloc(1, sizeof *s);

    *out = NULL;
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->ep = *ep;
    snprintf(s->channel, sizeof s->channel, "%s", channel);
    s->board = board;
    pthread_mutex_init(&s->mu, NULL);
    dlock__cond_init(&s->cv);
    *out = s;
    return DLOCK_OK;
}

void dlock__rsub_free(dlock__rsub *s)
{
    if (s == NULL)
        return;
    dlock__rlink_close(s->link);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* With mu held: subscribed to a node that may no longer be the master. */
static int moved_locked(const dlock__rsub *s)
{
    return s->ep.moved != NULL && atomic_load(s->ep.moved) != s->moved;
}

int dlock__rsub_ready(dlock__rsub *s)
{
    pthread_mutex_lock(&s->mu);
    int ready = s->state == SUB_READY && !moved_locked(s);
    pthread_mutex_unlock(&s->mu);
    return ready;
}

/* Connects and subscribes; returns the link or NULL (detail recorded). */
static dlock__rlink *subscribe(dlock__rsub *s, int64_t deadline_us, int *code)
{
    dlock__rlink *l = dlock__rconn_dial(&s->ep, deadline_us, code);
    redisReply *r;

    if (l == NULL)
        return NULL;
    r = dlock__rlink_commandf(l, dlock__now_us() + s->ep.command_timeout_ms * 1000, "SUBSCRIBE %s",
                              s->channel);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "subscribe") != 0) {
        *code = r != NULL && r->type == REDIS_REPLY_ERROR ? DLOCK_ESERVER : DLOCK_EUNREACHABLE;
        char why[512];
        dlock__fail(*code, "%s: SUBSCRIBE failed: %s", s->ep.label,
                    r == NULL ? l->errstr
                              : dlock__reply_reason(r, "unexpected reply", why, sizeof why));
        freeReplyObject(r);
        dlock__rlink_close(l);
        return NULL;
    }
    freeReplyObject(r);
    int on = 1;
    setsockopt(l->fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    /* A read blocks at most one slice (see pump). */
    if (dlock__rlink_set_timeout(l, READER_SLICE_US / 1000) != 0) {
        *code = DLOCK_EUNREACHABLE;
        dlock__fail(*code, "%s: cannot set the subscriber's read timeout: %s", s->ep.label,
                    strerror(errno));
        dlock__rlink_close(l);
        return NULL;
    }
    return l;
}

int dlock__rsub_connect(dlock__rsub *s, int64_t deadline_us)
{
    int rc = DLOCK_OK;

    pthread_mutex_lock(&s->mu);
    while (s->state == SUB_CONNECTING) {
        struct timespec ts = dlock__timespec(deadline_us);
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) {
            pthread_mutex_unlock(&s->mu);
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: subscriber connection not ready in time",
                               s->ep.label);
        }
    }
    int stale = s->state == SUB_READY && !s->reading && moved_locked(s);
    if (stale) {
        /* (a reader sees the move within a slice, and drops it itself);
         * waiters already queued may miss their notices: they check */
        dlock__rlink_close(s->link);
        s->link = NULL;
        s->state = SUB_DOWN;
    }
    if (s->state == SUB_DOWN) {
        s->state = SUB_CONNECTING;
        pthread_mutex_unlock(&s->mu);
        unsigned moved = s->ep.moved != NULL ? atomic_load(s->ep.moved) : 0;
        dlock__rlink *l = subscribe(s, deadline_us, &rc);
        pthread_mutex_lock(&s->mu);
        if (l != NULL) {
            dlock__rlink_close(s->link);
            s->moved = moved;
            s->link = l;
            s->state = SUB_READY;
        } else {
            s->state = SUB_DOWN;
        }
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (stale)
        dlock__board_recheck(s->board, NULL);
    return rc;
}

/* ---------------------------------------------------------------- reading */

static void handle_message(dlock__rsub *s, const redisReply *r)
{
    dlock__notice n;

    /* anything but a hand-over is dropped: its waiter asks the store again */
    if (dlock__reply_message(r, &n) == 0)
        dlock__board_grant(s->board, n.token, n.wait_id, n.fence);
}

/* The reader's loop: read and post hand-overs until w is woken or until_us.
 * Returns 0, or -1 when the connection is gone. */
static int pump(dlock__rsub *s, dlock__waiter *w, int64_t until_us)
{
    char buf[8192];

    while (!dlock__board_woken(s->board, w)) {
        int64_t now = dlock__now_us();
        /* subscribed to a node that may no longer be the master (Sentinel):
         * subscribe again, to the master, and have every waiter check */
        if (s->ep.moved != NULL && atomic_load(s->ep.moved) != s->moved)
            return -1;
        if (now >= until_us)
            return 0;
        /* The link's receive timeout is one slice: a whole slice needs
         * no deadline (one system call per notice); a shorter one, up to
         * until_us, has one. */
        redisReader *reader = s->link->reader;
        ssize_t got = dlock__rlink_read(s->link, buf, sizeof buf,
                                        until_us - now < READER_SLICE_US ? until_us : 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (got <= 0 || reader->len - reader->pos + (size_t) got > DLOCK__REPLY_MAX_BYTES ||
            redisReaderFeed(reader, buf, (size_t) got) != REDIS_OK)
            return -1; /* broken, or junk: reconnect */
        for (;;) {
            void *reply = NULL;
            if (redisReaderGetReply(reader, &reply) != REDIS_OK)
                return -1;
            if (reply == NULL)
                break;
            handle_message(s, reply);
            freeReplyObject(reply);
        }
    }
    return 0;
}

static int take_role(void *source)
{
    dlock__rsub *s = source;
    pthread_mutex_lock(&s->mu);
    int take = s->state == SUB_READY && !s->reading;
    if (take)
        s->reading = 1;
    pthread_mutex_unlock(&s->mu);
    return take;
}

static int read_as_reader(void *source, dlock__waiter *w, int64_t until_us)
{
    return pump(source, w, until_us);
}

static void leave_role(void *source, int broken)
{
    dlock__rsub *s = source;
    pthread_mutex_lock(&s->mu);
    s->reading = 0;
    if (broken && s->state == SUB_READY) {
        dlock__rlink_close(s->link);
        s->link = NULL;
        s->state = SUB_DOWN;
    }
    pthread_mutex_unlock(&s->mu);
}

enum dlock__wake dlock__rsub_wait(dlock__rsub *s, dlock__waiter *w, int64_t until_us)
{
    const dlock__reading reading = {s, take_role, read_as_reader, leave_role};
    return dlock__board_wait_reading(s->board, w, until_us, &reading);
}
