/* SPDX-License-Identifier: MIT */
/* board.h - where a client's waiting threads park until the store wakes them.
 *
 * A waiter is entered on the board under its owner token before it asks to
 * join the server's queue, so a wake-up that overtakes the reply to that
 * request is kept, not lost. Backends post wake-ups by token; the renewal
 * thread posts what waiter heartbeats learn.
 *
 * A service of the host to its stores (backend.h, dlock__host.board):
 * declared here for them, implemented by the core (core/board.c). */
#ifndef DLOCK_BACKEND_BOARD_H
#define DLOCK_BACKEND_BOARD_H

#include <pthread.h>
#include <stdint.h>

enum dlock__wake {
    DLOCK__WAKE_NONE = 0,
    DLOCK__WAKE_GRANTED = 1, /* the lock was handed to the waiter */
    DLOCK__WAKE_RECHECK = 2, /* a wake-up may have been missed: try again */
    DLOCK__WAKE_READ = 3,    /* backend: take over reading wake-ups (see subscriber.c) */
};

typedef struct dlock__waiter {
    struct dlock__waiter *next;
    const char *token;
    uint64_t wait_id; /* this wait's name in hand-over notices */
    unsigned bucket;
    pthread_cond_t cv;
    enum dlock__wake wake;
    uint64_t fence;       /* GRANTED */
    int64_t queued_at_us; /* send time of the latest request the store answered "queued"
                             for this wait id: a grant to it came after that */
} dlock__waiter;

#define DLOCK__BOARD_BUCKETS 64

typedef struct dlock__board {
    pthread_mutex_t mu;
    dlock__waiter *buckets[DLOCK__BOARD_BUCKETS];
} dlock__board;

void dlock__board_init(dlock__board *b);
void dlock__board_fini(dlock__board *b);

/* Puts w (token set by the caller) on the board. */
void dlock__board_enter(dlock__board *b, dlock__waiter *w);
void dlock__board_leave(dlock__board *b, dlock__waiter *w);

/* Waits until w is woken or until_us passes. Returns the wake (and clears
 * it), or DLOCK__WAKE_NONE on timeout. */
enum dlock__wake dlock__board_park(dlock__board *b, dlock__waiter *w, int64_t until_us);

/* Names w's next attempt (a fresh wait id): notices for its earlier
 * attempts are ignored from now on, and its queued time starts again. */
void dlock__board_rename(dlock__board *b, dlock__waiter *w, uint64_t wait_id);

/* Records that the store answered "queued" to the attempt wait_id of token,
 * sent at sent_us. */
void dlock__board_queued(dlock__board *b, const char *token, uint64_t wait_id, int64_t sent_us);

/* The lock was handed to the wait `wait_id` of token with this fence.
 * Notices for an earlier wait of the same token are ignored. */
void dlock__board_grant(dlock__board *b, const char *token, uint64_t wait_id, uint64_t fence);

/* token's waiter (or, with token NULL, every waiter) should try again. */
void dlock__board_recheck(dlock__board *b, const char *token);

/* Whether w has a grant or a recheck waiting (without taking it). */
int dlock__board_woken(dlock__board *b, dlock__waiter *w);

/* Takes w's wake, if any, without waiting. */
enum dlock__wake dlock__board_take(dlock__board *b, dlock__waiter *w);

/* Asks one waiter other than `except` that has nothing better to do to take
 * over reading wake-ups (DLOCK__WAKE_READ). */
void dlock__board_pass_reading(dlock__board *b, dlock__waiter *except);

/* A source of wake-ups that one waiting thread at a time reads for all the
 * others (the reader role): a backend's notice connection. */
typedef struct dlock__reading {
    void *source;
    /* Takes the reader role if it is free and the source can be read:
     * returns 1 if the caller is now the reader. */
    int (*take_role)(void *source);
    /* As the reader: posts the wake-ups read until w is woken or until_us
     * passes. Returns 0, or -1 if the source broke (wake-ups may be lost). */
    int (*read)(void *source, dlock__waiter *w, int64_t until_us);
    /* Gives the role back; `broken` as read() returned. */
    void (*leave_role)(void *source, int broken);
} dlock__reading;

/* Waits for w's wake as dlock__board_park(), reading the source for every
 * waiter meanwhile if nobody else does; when the reader leaves, another
 * waiter takes over (or, after a break, every waiter asks the server
 * again). */
enum dlock__wake dlock__board_wait_reading(dlock__board *b, dlock__waiter *w, int64_t until_us,
                                           const dlock__reading *r);

/* Sleeps until until_us (monotonic) without being on the board. */
void dlock__sleep_until(int64_t until_us);

#endif
