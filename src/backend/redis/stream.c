/* SPDX-License-Identifier: MIT */
/* stream.c - hand-over notices through Redis Streams (notify=stream).
 *
 * With pub/sub, a notice published while a client's subscriber connection
 * is down is gone: the client asks the server again when it is back (a
 * recheck), and a waiter may wait up to a heartbeat for its turn. With
 * streams, the grant is appended to the stream <lock>:wake:<client id>
 * (XADD, trimmed to about 64 entries, expiring an hour after the last), and
 * stays there: a client reads it whenever it can, from where it stopped, so
 * a release that happened while its connection was down is still seen.
 * The price is a key per lock and client that waited, and an XREAD round
 * trip per reading slice while anyone waits.
 *
 * As with pub/sub (subscriber.c), waiting threads read for each other: one
 * at a time holds the reader role and runs XREAD BLOCK over the streams of
 * every lock some thread of the client waits for, posting the notices on
 * the board; the others park there. Stale notices (of an earlier wait) are
 * ignored by their wait id. A stream first watched while an XREAD is
 * blocked without it has that XREAD cut short (CLIENT UNBLOCK, sent by the
 * caller on another connection), so the next one covers it at once. */
#include "stream.h"

#include "replies.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/random.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_SLICE_MS 50
#define AWAY_MAX_MS   1000 /* the longest pause between reads of a server that is away */
#define MAX_KEPT      4096 /* streams watched, or idle with their read position */

typedef struct watched {
    char *key;
    char last_id[48]; /* read up to here; "0" at first: all the stream holds */
    unsigned users;
    int in_read; /* part of the XREAD under way */
} watched;

struct dlock__rstream {
    pthread_mutex_t mu;
    int reading;  /* a waiter holds the reader role */
    int in_xread; /* an XREAD BLOCK is under way on link */
    int away_ms;  /* the reader role's: the pause after the next failed read */
    dlock__rlink *link;
    long long ctx_id;    /* CLIENT ID of link; 0 if unknown */
    unsigned ctx_moved;  /* *ep.moved when link was dialed (conn.h) */
    dlock__rendpoint ep; /* strings borrowed from the backend */
    dlock__board *board;
    watched *keys;
    size_t nkeys, cap;
};

int dlock__rstream_new(const dlock__rendpoint *ep, dlock__board *board, dlock__rstream **out)
{
    dlock__rstream *s = calloc(1, sizeof *s);
    *out = NULL;
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->ep = *ep;
    s->board = board;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return DLOCK_OK;
}

void dlock__rstream_free(dlock__rstream *s)
{
    if (s == NULL)
        return;
    dlock__rlink_close(s->link);
    for (size_t i = 0; i < s->nkeys; i++)
        free(s->keys[i].key);
    free(s->keys);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* A stream no waiter watches any more keeps its entry (users 0) and the id
 * read up to, so the next wait on that lock reads only what is new rather
 * than the stale notices the stream still holds; idle entries are dropped
 * when room is needed. */
static void drop(dlock__rstream *s, size_t i)
{
    free(s->keys[i].key);
    s->keys[i] = s->keys[--s->nkeys];
}

static int make_room(dlock__rstream *s)
{
    if (s->nkeys == MAX_KEPT) {
        size_t idle = 0;
        while (idle < s->nkeys && s->keys[idle].users > 0)
            idle++;
        if (idle == s->nkeys)
            return dlock__fail(DLOCK_ENOMEM, "more than %d locks waited for at once", MAX_KEPT);
        drop(s, idle);
    }
    if (s->nkeys == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        watched *grown = realloc(s->keys, cap * sizeof *grown);
        if (grown == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        s->keys = grown;
        s->cap = cap;
    }
    return DLOCK_OK;
}

int dlock__rstream_watch(dlock__rstream *s, const char *key, long long *interrupt_id)
{
    int rc = DLOCK_OK;
    watched *w = NULL;

    *interrupt_id = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nkeys; i++) {
        if (strcmp(s->keys[i].key, key) == 0) {
            w = &s->keys[i];
            w->users++;
            goto out;
        }
    }
    rc = make_room(s);
    if (rc != DLOCK_OK)
        goto out;
    w = &s->keys[s->nkeys];
    w->key = strdup(key);
    if (w->key == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(w->last_id, sizeof w->last_id, "0");
    w->users = 1;
    w->in_read = 0;
    s->nkeys++;
out:
    if (rc == DLOCK_OK && s->in_xread && !w->in_read)
        *interrupt_id = s->ctx_id;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void dlock__rstream_unwatch(dlock__rstream *s, const char *key)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nkeys; i++) {
        if (strcmp(s->keys[i].key, key) == 0) {
            s->keys[i].users--;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---------------------------------------------------------------- reading */

static void on_notice(void *arg, const dlock__notice *n)
{
    dlock__rstream *s = arg;
    dlock__board_grant(s->board, n->token, n->wait_id, n->fence);
}

static void on_read(void *arg, const char *key, const char *last_id)
{
    dlock__rstream *s = arg;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nkeys; i++) {
        if (strcmp(s->keys[i].key, key) == 0)
            snprintf(s->keys[i].last_id, sizeof s->keys[i].last_id, "%s", last_id);
    }
    pthread_mutex_unlock(&s->mu);
}

/* One XREAD BLOCK over the watched streams. Returns 0, or -1 if the
 * connection failed (it is dropped and made again next time). */
static int read_once(dlock__rstream *s, int block_ms)
{
    int code;

    if (s->link != NULL && s->ep.moved != NULL && atomic_load(s->ep.moved) != s->ctx_moved) {
        dlock__rlink_close(s->link); /* to a node that may no longer be the master */
        s->link = NULL;
    }
    if (s->link == NULL) {
        s->ctx_moved = s->ep.moved != NULL ? atomic_load(s->ep.moved) : 0;
        s->link = dlock__rconn_dial(
            &s->ep, dlock__now_us() + (s->ep.connect_timeout_ms + s->ep.command_timeout_ms) * 1000,
            &code);
        if (s->link == NULL)
            return -1;
        redisReply *id = dlock__rlink_commandf(
            s->link, dlock__now_us() + s->ep.command_timeout_ms * 1000, "CLIENT ID");
        long long ctx_id = id != NULL && id->type == REDIS_REPLY_INTEGER ? id->integer : 0;
        freeReplyObject(id);
        pthread_mutex_lock(&s->mu);
        s->ctx_id = ctx_id;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&s->mu);
    size_t n = 0;
    for (size_t i = 0; i < s->nkeys; i++)
        n += s->keys[i].users > 0;
    const char **argv = calloc(2 * n + 4, sizeof *argv);
    size_t *lens = calloc(2 * n + 4, sizeof *lens);
    char block[24];
    if (argv == NULL || lens == NULL || n == 0) {
        pthread_mutex_unlock(&s->mu);
        free(argv);
        free(lens);
        return 0;
    }
    snprintf(block, sizeof block, "%d", block_ms);
    argv[0] = "XREAD";
    argv[1] = "BLOCK";
    argv[2] = block;
    argv[3] = "STREAMS";
    for (size_t i = 0, k = 0; i < s->nkeys; i++) {
        s->keys[i].in_read = s->keys[i].users > 0;
        if (!s->keys[i].in_read)
            continue;
        argv[4 + k] = strdup(s->keys[i].key);
        argv[4 + n + k] = strdup(s->keys[i].last_id);
        k++;
    }
    s->in_xread = 1;
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < 2 * n + 4; i++)
        lens[i] = argv[i] != NULL ? strlen(argv[i]) : 0;
    redisReply *r = dlock__rlink_command(
        s->link, dlock__now_us() + (block_ms + s->ep.command_timeout_ms) * 1000, (int) (2 * n + 4),
        argv, lens);
    pthread_mutex_lock(&s->mu);
    s->in_xread = 0;
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 4; i < 2 * n + 4; i++)
        free((char *) argv[i]);
    free(argv);
    free(lens);
    if (r == NULL) {
        dlock__rlink_close(s->link);
        s->link = NULL;
        pthread_mutex_lock(&s->mu);
        s->ctx_id = 0;
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    /* nil when the block timed out; an error (say, a stream key of another
     * type) posts nothing, and waiters ask the store again in time */
    const dlock__rxread_sink sink = {s, on_notice, on_read};
    dlock__reply_xread(r, &sink);
    freeReplyObject(r);
    return 0;
}

static int take_role(void *source)
{
    dlock__rstream *s = source;
    pthread_mutex_lock(&s->mu);
    int take = !s->reading;
    s->reading = 1;
    pthread_mutex_unlock(&s->mu);
    return take;
}

/* Reads in slices, so that streams of locks waited for meanwhile join the
 * next XREAD. A server that is away is tried again after a pause that
 * doubles from a slice to AWAY_MAX_MS (jittered), not dialled every slice:
 * what was added to the streams meanwhile is still there. */
static int read_as_reader(void *source, dlock__waiter *w, int64_t until_us)
{
    dlock__rstream *s = source;
    while (!dlock__board_woken(s->board, w)) {
        int64_t left = until_us - dlock__now_us();
        if (left <= 0)
            break;
        int ms = left / 1000 < READ_SLICE_MS ? (int) (left / 1000) + 1 : READ_SLICE_MS;
        if (read_once(s, ms) == 0) {
            s->away_ms = 0;
            continue;
        }
        s->away_ms = s->away_ms == 0 ? READ_SLICE_MS : s->away_ms * 2;
        if (s->away_ms > AWAY_MAX_MS)
            s->away_ms = AWAY_MAX_MS;
        int64_t resume =
            dlock__now_us() + s->away_ms * 1000 + dlock__random_below(s->away_ms * 500);
        if (resume > until_us)
            resume = until_us;
        /* in slices: a wake-up (a cancel) is seen as soon as before */
        for (int64_t now = dlock__now_us(); now < resume && !dlock__board_woken(s->board, w);
             now = dlock__now_us())
            dlock__sleep_until(resume - now > READ_SLICE_MS * 1000 ? now + READ_SLICE_MS * 1000
                                                                   : resume);
    }
    return 0;
}

static void leave_role(void *source, int broken)
{
    dlock__rstream *s = source;
    (void) broken;
    pthread_mutex_lock(&s->mu);
    s->reading = 0;
    pthread_mutex_unlock(&s->mu);
}

enum dlock__wake dlock__rstream_wait(dlock__rstream *s, dlock__waiter *w, int64_t until_us)
{
    const dlock__reading reading = {s, take_role, read_as_reader, leave_role};
    return dlock__board_wait_reading(s->board, w, until_us, &reading);
}
