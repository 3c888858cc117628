/* SPDX-License-Identifier: MIT */
/* shards.c - sharded pub/sub notices of a Redis Cluster client (shards.h).
 *
 * A channel is subscribed where its slot lives, and a slot moves: a
 * migration (SETSLOT NODE) or a failover makes the node that served it
 * drop its subscribers with a `sunsubscribe` of the channel, and a
 * connection may break. Either way notices may have been lost: every
 * waiter of the client is told to look again (RECHECK), and its next wait
 * subscribes anew at the master the map names then. A subscription
 * answered MOVED (a map out of date) corrects the map and is made again
 * there. A notice lost while the slot moves costs a waiter one poll step
 * (waiting.c), never its wait.
 *
 * One thread per client (started at the first subscription) reads every
 * node's connection with poll(); a single-server client lets its waiters
 * read their one connection themselves (subscriber.c), but here the
 * sources are many, and a waiter reading one node's would leave the
 * others' notices unread when it leaves. Subscribing threads write their
 * SSUBSCRIBE on the connection (a socket takes a writer beside its
 * reader) and wait for the reader thread to see the server confirm it.
 * Only the reader thread closes a connection (broken, or idle: no waiter
 * on its node for IDLE_US), and only under mu, so the connection it polls
 * outside mu stays valid. A channel stays subscribed when its last waiter
 * leaves (no SUNSUBSCRIBE: the next wait on the name finds it live) until
 * its connection closes. */
#define _GNU_SOURCE /* pipe2 */
#include "shards.h"

#include "notice.h"
#include "replies.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SLICE_MS        1000     /* the longest the reader's poll sleeps with links open */
#define IDLE_US         10000000 /* a node's connection without waiters this long is closed */
#define BUCKETS         256
#define SUBSCRIBE_TRIES 3 /* MOVED answers followed by one subscription */

enum chan_state { CH_NONE, CH_PENDING, CH_LIVE };

typedef struct chan {
    struct chan *next;
    int refs; /* waiters of this client watching it now */
    int node; /* where it is (being) subscribed; -1: nowhere */
    enum chan_state state;
    unsigned seq;    /* PENDING: its SSUBSCRIBE's number on the node's link */
    int refused;     /* its last SSUBSCRIBE was answered with an error */
    int moved;       /* ... which was MOVED (the map now names the node) */
    char error[160]; /* the error */
    char name[];
} chan;

typedef struct shard {
    dlock__rlink *link; /* NULL: none open */
    unsigned sent;      /* SSUBSCRIBEs sent on link */
    unsigned answered;  /* and answered */
    int64_t used_us;    /* last watched or unwatched (monotonic) */
} shard;

struct dlock__rshards {
    dlock__rcluster *cl;
    dlock__board *board;
    dlock__log *log;
    pthread_mutex_t mu; /* guards all below but stop */
    pthread_cond_t cv;  /* a subscription answered, a link closed */
    shard nodes[DLOCK__CLUSTER_MAX_NODES];
    chan *chans[BUCKETS];
    pthread_t reader;
    int reading;     /* the reader thread runs */
    int wake[2];     /* the reader's poll is woken by a byte here */
    atomic_int stop; /* the reader ends */
};

static unsigned bucket_of(const char *name)
{
    unsigned h = 2166136261u;
    for (const char *p = name; *p != '\0'; p++)
        h = (h ^ (unsigned char) *p) * 16777619u;
    return h % BUCKETS;
}

/* With mu held: the channel of that name, or NULL. */
static chan *find(dlock__rshards *s, const char *name, size_t len)
{
    for (chan *c = s->chans[bucket_of(name)]; c != NULL; c = c->next) {
        if (strlen(c->name) == len && memcmp(c->name, name, len) == 0)
            return c;
    }
    return NULL;
}

/* With mu held: c, subscribed nowhere, is forgotten if no waiter watches
 * it. */
static void forget_unwatched(dlock__rshards *s, chan *c)
{
    if (c->refs > 0 || c->state != CH_NONE)
        return;
    for (chan **p = &s->chans[bucket_of(c->name)]; *p != NULL; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    free(c);
}

int dlock__rshards_new(dlock__rcluster *cl, dlock__board *board, dlock__log *log,
                       dlock__rshards **out)
{
    dlock__rshards *s = calloc(1, sizeof *s);

    *out = NULL;
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->cl = cl;
    s->board = board;
    s->log = log;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    dlock__cond_init(&s->cv);
    *out = s;
    return DLOCK_OK;
}

void dlock__rshards_free(dlock__rshards *s)
{
    if (s == NULL)
        return;
    if (s->reading) {
        atomic_store(&s->stop, 1);
        ssize_t w = write(s->wake[1], "x", 1);
        (void) w; /* a full pipe is already a wake-up */
        pthread_join(s->reader, NULL);
    }
    for (size_t i = 0; i < DLOCK__CLUSTER_MAX_NODES; i++)
        dlock__rlink_close(s->nodes[i].link);
    for (size_t i = 0; i < BUCKETS; i++) {
        while (s->chans[i] != NULL) {
            chan *c = s->chans[i];
            s->chans[i] = c->next;
            free(c);
        }
    }
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* ---------------------------------------------------------------- reading */

/* With mu held: node k's link is gone (broken, idle): its channels are
 * subscribed nowhere. Returns whether a waiter watched one of them. */
static int drop_link(dlock__rshards *s, int k)
{
    int watched = 0;
    dlock__rlink_close(s->nodes[k].link);
    s->nodes[k].link = NULL;
    s->nodes[k].sent = s->nodes[k].answered = 0;
    for (size_t i = 0; i < BUCKETS; i++) {
        for (chan **p = &s->chans[i]; *p != NULL;) {
            chan *c = *p;
            if (c->node == k) {
                watched |= c->refs > 0;
                c->node = -1;
                c->state = CH_NONE;
            }
            if (c->refs == 0 && c->state == CH_NONE) {
                *p = c->next;
                free(c);
            } else {
                p = &c->next;
            }
        }
    }
    pthread_cond_broadcast(&s->cv);
    return watched;
}

static int is_push(const redisReply *r, const char *kind)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
           r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, kind) == 0 &&
           r->element[1]->type == REDIS_REPLY_STRING;
}

/* With mu held: the answer to node k's oldest SSUBSCRIBE not answered. */
static void answered(dlock__rshards *s, int k, const redisReply *r)
{
    unsigned seq = ++s->nodes[k].answered;
    for (size_t i = 0; i < BUCKETS; i++) {
        for (chan *c = s->chans[i]; c != NULL; c = c->next) {
            if (c->node != k || c->state != CH_PENDING || c->seq != seq)
                continue;
            if (r->type == REDIS_REPLY_ERROR) {
                dlock__rconn *to;
                c->state = CH_NONE;
                c->node = -1;
                c->refused = 1;
                c->moved = dlock__rcluster_redirect(s->cl, r, &to) == DLOCK__RR_MOVED;
                snprintf(c->error, sizeof c->error, "%.*s", DLOCK__REASON(r));
            } else {
                c->state = CH_LIVE;
            }
            pthread_cond_broadcast(&s->cv);
            return;
        }
    }
}

/* One reply read on node k's link; returns whether the client's waiters
 * must look again (a subscription they watched was dropped). */
static int handle(dlock__rshards *s, int k, const redisReply *r)
{
    dlock__notice n;
    int recheck = 0;

    if (dlock__reply_smessage(r, &n) == 0) {
        dlock__board_grant(s->board, n.token, n.wait_id, n.fence);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (is_push(r, "sunsubscribe")) {
        /* the slot left the node (a migration, a failover) */
        chan *c = find(s, r->element[1]->str, r->element[1]->len);
        if (c != NULL && c->node == k) {
            recheck = c->refs > 0;
            c->node = -1;
            c->state = CH_NONE;
            DLOCK__LOG(s->log, DLOCK_LOG_INFO,
                       "%s dropped the subscription to %s (its slot moved): waiters look again",
                       dlock__rcluster_node_label(s->cl, k), c->name);
            forget_unwatched(s, c);
        }
    } else if (is_push(r, "ssubscribe") || r->type == REDIS_REPLY_ERROR) {
        answered(s, k, r);
    }
    pthread_mutex_unlock(&s->mu);
    return recheck;
}

/* Reads what node k's link has; returns -1 when it broke, else whether
 * waiters must look again. */
static int read_node(dlock__rshards *s, int k, dlock__rlink *link)
{
    char buf[8192];
    int recheck = 0;

    ssize_t got = dlock__rlink_read(link, buf, sizeof buf, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    redisReader *reader = link->reader;
    if (got <= 0 || reader->len - reader->pos + (size_t) got > DLOCK__REPLY_MAX_BYTES ||
        redisReaderFeed(reader, buf, (size_t) got) != REDIS_OK)
        return -1;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(reader, &reply) != REDIS_OK)
            return -1;
        if (reply == NULL)
            break;
        recheck |= handle(s, k, reply);
        freeReplyObject(reply);
    }
    return recheck;
}

/* With mu held: closes the links of nodes no waiter has watched for
 * IDLE_US (dropping their subscriptions). */
static void close_idle(dlock__rshards *s, int64_t now)
{
    for (int k = 0; k < DLOCK__CLUSTER_MAX_NODES; k++) {
        shard *nd = &s->nodes[k];
        if (nd->link == NULL || now - nd->used_us < IDLE_US)
            continue;
        int watched = 0;
        for (size_t i = 0; i < BUCKETS && !watched; i++) {
            for (chan *c = s->chans[i]; c != NULL && !watched; c = c->next)
                watched = c->node == k && c->refs > 0;
        }
        if (!watched)
            drop_link(s, k);
    }
}

static void *reader_run(void *arg)
{
    dlock__rshards *s = arg;
    struct pollfd fds[DLOCK__CLUSTER_MAX_NODES + 1];
    int nodes[DLOCK__CLUSTER_MAX_NODES + 1];
    dlock__rlink *links[DLOCK__CLUSTER_MAX_NODES + 1];

    while (!atomic_load(&s->stop)) {
        nfds_t n = 1;
        fds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pthread_mutex_lock(&s->mu);
        close_idle(s, dlock__now_us());
        for (int k = 0; k < DLOCK__CLUSTER_MAX_NODES; k++) {
            if (s->nodes[k].link == NULL)
                continue;
            fds[n] = (struct pollfd){.fd = s->nodes[k].link->fd, .events = POLLIN};
            nodes[n] = k;
            links[n++] = s->nodes[k].link;
        }
        pthread_mutex_unlock(&s->mu);
        /* no link: nothing to read or to close when idle, until a new
         * link or the end pokes the pipe */
        if (poll(fds, n, n > 1 ? SLICE_MS : -1) <= 0)
            continue;
        if (fds[0].revents != 0) {
            char drain[64];
            while (read(s->wake[0], drain, sizeof drain) > 0)
                ;
        }
        int recheck = 0;
        for (nfds_t i = 1; i < n; i++) {
            if (fds[i].revents == 0)
                continue;
            int got = read_node(s, nodes[i], links[i]);
            if (got < 0) {
                pthread_mutex_lock(&s->mu);
                DLOCK__LOG(s->log, DLOCK_LOG_INFO,
                           "%s: the subscriber connection broke: waiters look again",
                           dlock__rcluster_node_label(s->cl, nodes[i]));
                recheck |= drop_link(s, nodes[i]);
                pthread_mutex_unlock(&s->mu);
            } else {
                recheck |= got;
            }
        }
        if (recheck)
            dlock__board_recheck(s->board, NULL); /* notices may have been lost */
    }
    return NULL;
}

/* ---------------------------------------------------------------- watching */

int dlock__rshards_live(dlock__rshards *s, const char *channel, unsigned slot)
{
    int k = dlock__rcluster_node_index(s->cl, slot, dlock__now_us());
    pthread_mutex_lock(&s->mu);
    chan *c = find(s, channel, strlen(channel));
    int live = c != NULL && c->state == CH_LIVE && c->node == k;
    pthread_mutex_unlock(&s->mu);
    return live;
}

/* With mu held: a link to node k, dialed (mu let go meanwhile) if there
 * is none, the reader thread started; NULL on failure (recorded). */
static dlock__rlink *link_to(dlock__rshards *s, int k, int64_t deadline_us, int *code)
{
    if (s->nodes[k].link != NULL)
        return s->nodes[k].link;
    if (s->wake[0] < 0 && pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        *code = DLOCK_ENOMEM;
        dlock__fail(*code, "cannot make a pipe for the cluster's subscriber: %s", strerror(errno));
        return NULL;
    }
    if (!s->reading) {
        if (dlock__thread_start(&s->reader, reader_run, s) != 0) {
            *code = DLOCK_ENOMEM;
            dlock__fail(*code, "cannot start the cluster's subscriber thread");
            return NULL;
        }
        s->reading = 1;
    }
    pthread_mutex_unlock(&s->mu);
    dlock__rlink *l = dlock__rcluster_dial(s->cl, k, deadline_us, code);
    pthread_mutex_lock(&s->mu);
    if (l == NULL)
        return s->nodes[k].link; /* another thread's, or none */
    if (s->nodes[k].link != NULL) {
        dlock__rlink_close(l); /* another thread dialed it meanwhile */
        return s->nodes[k].link;
    }
    int on = 1;
    setsockopt(l->fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    s->nodes[k].link = l;
    s->nodes[k].used_us = dlock__now_us();
    ssize_t w = write(s->wake[1], "x", 1); /* the reader polls it from now on */
    (void) w;
    return l;
}

/* With mu held: sends SSUBSCRIBE channel on node k's link. */
static int send_subscribe(dlock__rshards *s, int k, chan *c, dlock__rlink *l)
{
    const char *argv[] = {"SSUBSCRIBE", c->name};
    size_t lens[] = {10, strlen(c->name)};
    char *cmd = NULL;
    long long len = redisFormatCommandArgv(&cmd, 2, argv, lens);
    size_t at = 0;

    if (len < 0)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    while (at < (size_t) len) {
        ssize_t w = dlock__rlink_write(l, cmd + at, (size_t) len - at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = errno;
            free(cmd);
            /* the reader sees the end, and drops the link */
            dlock__rlink_shutdown(l);
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot send SSUBSCRIBE: %s",
                               dlock__rcluster_node_label(s->cl, k), strerror(err));
        }
        at += (size_t) w;
    }
    free(cmd);
    c->node = k;
    c->state = CH_PENDING;
    c->refused = 0;
    c->seq = ++s->nodes[k].sent;
    return DLOCK_OK;
}

int dlock__rshards_watch(dlock__rshards *s, const char *channel, unsigned slot, int64_t deadline_us)
{
    size_t len = strlen(channel);
    int rc = DLOCK_OK;

    pthread_mutex_lock(&s->mu);
    chan *c = find(s, channel, len);
    if (c == NULL) {
        c = calloc(1, sizeof *c + len + 1);
        if (c == NULL) {
            pthread_mutex_unlock(&s->mu);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        memcpy(c->name, channel, len + 1);
        c->node = -1;
        unsigned b = bucket_of(channel);
        c->next = s->chans[b];
        s->chans[b] = c;
    }
    c->refs++; /* kept by c until unwatch: drop_link frees only unwatched ones */
    for (int tries = 0; tries < SUBSCRIBE_TRIES; tries++) {
        pthread_mutex_unlock(&s->mu);
        int k = dlock__rcluster_node_index(s->cl, slot, deadline_us);
        pthread_mutex_lock(&s->mu);
        s->nodes[k].used_us = dlock__now_us();
        if (c->state != CH_NONE && c->node != k) {
            /* subscribed at a node that no longer serves the slot (its
             * sunsubscribe is on its way): subscribe where it is now */
            c->state = CH_NONE;
            c->node = -1;
        }
        if (c->state == CH_NONE) {
            dlock__rlink *l = link_to(s, k, deadline_us, &rc);
            if (l == NULL)
                break;
            if (c->state == CH_NONE && (rc = send_subscribe(s, k, c, l)) != DLOCK_OK)
                break;
        }
        while (c->state == CH_PENDING) {
            struct timespec ts = dlock__timespec(deadline_us);
            if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
                break;
        }
        if (c->state == CH_LIVE) {
            rc = DLOCK_OK;
            break;
        }
        if (c->state == CH_PENDING) {
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: SSUBSCRIBE %s not answered in time",
                             dlock__rcluster_node_label(s->cl, k), channel);
            break;
        }
        if (c->refused && !c->moved) {
            rc = dlock__fail(DLOCK_ESERVER, "%s: SSUBSCRIBE %s refused: %s",
                             dlock__rcluster_node_label(s->cl, k), channel, c->error);
            break;
        }
        /* MOVED (the map says where now), or the link dropped: again */
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: SSUBSCRIBE %s: %s",
                         dlock__rcluster_node_label(s->cl, k), channel,
                         c->refused ? c->error : "the connection closed");
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void dlock__rshards_unwatch(dlock__rshards *s, const char *channel)
{
    pthread_mutex_lock(&s->mu);
    chan *c = find(s, channel, strlen(channel));
    if (c != NULL && c->refs > 0) {
        c->refs--;
        if (c->node >= 0)
            s->nodes[c->node].used_us = dlock__now_us();
        forget_unwatched(s, c);
    }
    pthread_mutex_unlock(&s->mu);
}
