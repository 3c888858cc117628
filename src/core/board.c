/* SPDX-License-Identifier: MIT */
/* board.c - the wait board. See backend/board.h. */
#include "../backend/board.h"

#include "../base/clock.h"

#include <errno.h>
#include <string.h>

static void pass_reading_locked(dlock__board *b, dlock__waiter *except);

static unsigned hash_token(const char *token)
{
    unsigned h = 2166136261u;
    for (const char *p = token; *p != '\0'; p++)
        h = (h ^ (unsigned char) *p) * 16777619u;
    return h % DLOCK__BOARD_BUCKETS;
}

void dlock__board_init(dlock__board *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
}

void dlock__board_fini(dlock__board *b)
{
    pthread_mutex_destroy(&b->mu);
}

void dlock__board_enter(dlock__board *b, dlock__waiter *w)
{

    dlock__cond_init(&w->cv);
    w->wake = DLOCK__WAKE_NONE;
    w->fence = 0;
    w->queued_at_us = 0;
    w->bucket = hash_token(w->token);
    pthread_mutex_lock(&b->mu);
    w->next = b->buckets[w->bucket];
    b->buckets[w->bucket] = w;
    pthread_mutex_unlock(&b->mu);
}

void dlock__board_leave(dlock__board *b, dlock__waiter *w)
{
    pthread_mutex_lock(&b->mu);
    if (w->wake == DLOCK__WAKE_READ)
        pass_reading_locked(b, w);
    for (dlock__waiter **p = &b->buckets[w->bucket]; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&w->cv);
}

enum dlock__wake dlock__board_park(dlock__board *b, dlock__waiter *w, int64_t until_us)
{
    enum dlock__wake wake;
    struct timespec ts = dlock__timespec(until_us);

    pthread_mutex_lock(&b->mu);
    while (w->wake == DLOCK__WAKE_NONE) {
        if (pthread_cond_timedwait(&w->cv, &b->mu, &ts) == ETIMEDOUT)
            break;
    }
    wake = w->wake;
    w->wake = DLOCK__WAKE_NONE;
    pthread_mutex_unlock(&b->mu);
    return wake;
}

void dlock__board_rename(dlock__board *b, dlock__waiter *w, uint64_t wait_id)
{
    pthread_mutex_lock(&b->mu);
    w->wait_id = wait_id;
    w->queued_at_us = 0;
    if (w->wake == DLOCK__WAKE_GRANTED)
        w->wake = DLOCK__WAKE_NONE; /* a grant to an earlier attempt: the next one finds it */
    pthread_mutex_unlock(&b->mu);
}

void dlock__board_queued(dlock__board *b, const char *token, uint64_t wait_id, int64_t sent_us)
{
    pthread_mutex_lock(&b->mu);
    for (dlock__waiter *w = b->buckets[hash_token(token)]; w != NULL; w = w->next) {
        if (w->wait_id == wait_id && strcmp(w->token, token) == 0 && sent_us > w->queued_at_us)
            w->queued_at_us = sent_us;
    }
    pthread_mutex_unlock(&b->mu);
}

/* With mu held: asks a waiter other than `except`, idle so far, to read. */
static void pass_reading_locked(dlock__board *b, dlock__waiter *except)
{
    for (unsigned i = 0; i < DLOCK__BOARD_BUCKETS; i++) {
        for (dlock__waiter *w = b->buckets[i]; w != NULL; w = w->next) {
            if (w != except && w->wake == DLOCK__WAKE_NONE) {
                w->wake = DLOCK__WAKE_READ;
                pthread_cond_signal(&w->cv);
                return;
            }
        }
    }
}

/* With mu held: posts wake to w; a request to read that it replaces goes
 * to another waiter, so that somebody still reads. */
static void post_locked(dlock__board *b, dlock__waiter *w, enum dlock__wake wake)
{
    if (w->wake == DLOCK__WAKE_READ)
        pass_reading_locked(b, w);
    w->wake = wake;
    pthread_cond_signal(&w->cv);
}

void dlock__board_grant(dlock__board *b, const char *token, uint64_t wait_id, uint64_t fence)
{
    pthread_mutex_lock(&b->mu);
    dlock__waiter *w = b->buckets[hash_token(token)];
    while (w != NULL && (w->wait_id != wait_id || strcmp(w->token, token) != 0))
        w = w->next;
    if (w != NULL) {
        w->fence = fence;
        post_locked(b, w, DLOCK__WAKE_GRANTED);
    }
    pthread_mutex_unlock(&b->mu);
}

int dlock__board_woken(dlock__board *b, dlock__waiter *w)
{
    pthread_mutex_lock(&b->mu);
    int woken = w->wake == DLOCK__WAKE_GRANTED || w->wake == DLOCK__WAKE_RECHECK;
    pthread_mutex_unlock(&b->mu);
    return woken;
}

enum dlock__wake dlock__board_take(dlock__board *b, dlock__waiter *w)
{
    pthread_mutex_lock(&b->mu);
    enum dlock__wake wake = w->wake;
    w->wake = DLOCK__WAKE_NONE;
    pthread_mutex_unlock(&b->mu);
    return wake;
}

void dlock__board_pass_reading(dlock__board *b, dlock__waiter *except)
{
    pthread_mutex_lock(&b->mu);
    pass_reading_locked(b, except);
    pthread_mutex_unlock(&b->mu);
}

enum dlock__wake dlock__board_wait_reading(dlock__board *b, dlock__waiter *w, int64_t until_us,
                                           const dlock__reading *r)
{
    for (;;) {
        if (!r->take_role(r->source)) {
            enum dlock__wake wake = dlock__board_park(b, w, until_us);
            if (wake == DLOCK__WAKE_READ)
                continue; /* the reader left: take its place */
            return wake;
        }
        int broken = r->read(r->source, w, until_us) != 0;
        r->leave_role(r->source, broken);
        if (broken)
            dlock__board_recheck(b, NULL); /* hand-overs may have been lost */
        else
            dlock__board_pass_reading(b, w);
        enum dlock__wake wake = dlock__board_take(b, w);
        if (wake != DLOCK__WAKE_NONE && wake != DLOCK__WAKE_READ)
            return wake;
        if (dlock__now_us() >= until_us)
            return DLOCK__WAKE_NONE;
    }
}

static void recheck_locked(dlock__board *b, dlock__waiter *w)
{
    /* A grant already posted stays: it is the stronger news. */
    if (w->wake != DLOCK__WAKE_GRANTED)
        post_locked(b, w, DLOCK__WAKE_RECHECK);
}

void dlock__board_recheck(dlock__board *b, const char *token)
{
    pthread_mutex_lock(&b->mu);
    if (token != NULL) {
        /* every wait of the token (a read and a write handle of one owner
         * share it) */
        for (dlock__waiter *w = b->buckets[hash_token(token)]; w != NULL; w = w->next) {
            if (strcmp(w->token, token) == 0)
                recheck_locked(b, w);
        }
    } else {
        for (unsigned i = 0; i < DLOCK__BOARD_BUCKETS; i++) {
            for (dlock__waiter *w = b->buckets[i]; w != NULL; w = w->next)
                recheck_locked(b, w);
        }
    }
    pthread_mutex_unlock(&b->mu);
}

void dlock__sleep_until(int64_t until_us)
{
    for (;;) {
        int64_t left = until_us - dlock__now_us();
        if (left <= 0)
            return;
        struct timespec ts = {.tv_sec = left / 1000000, .tv_nsec = (left % 1000000) * 1000};
        if (nanosleep(&ts, NULL) == 0)
            return;
    }
}
