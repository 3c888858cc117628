/* SPDX-License-Identifier: MIT */
/* local_queue.h - the in-process queue of a client's waiters (seed 004).
 *
 * With it on, the threads of one client that wait for the same lock do not
 * each queue on the server: one of them does, and the others wait here, in
 * arrival order, each taking its turn when the one before is done waiting
 * (it got the lock, gave up, or failed). A client thus holds one place in
 * the server's queue per lock, and a maximum count of local waiters turns
 * callers away at once (DLOCK_EQUEUEFULL) instead of piling them up. */
#ifndef DLOCK_CORE_LOCAL_QUEUE_H
#define DLOCK_CORE_LOCAL_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct dlock__lq dlock__lq;

/* A caller's place in a local queue (caller-owned, on its stack). */
typedef struct dlock__lq_ticket {
    struct dlock__lq_ticket *next;
    struct dlock__lq_entry *entry;
    pthread_cond_t cv; /* signalled when it becomes the head */
} dlock__lq_ticket;

/* max_waiters: how many may wait here per lock beyond the one whose turn
 * it is (0: no limit). */
int dlock__lq_new(unsigned max_waiters, dlock__lq **out);
void dlock__lq_free(dlock__lq *q);

/* A cancellation check: nonzero when the caller's wait was cancelled. */
typedef int (*dlock__lq_cancelled)(void *arg);

/* Waits for the turn of the caller to wait on the server for the lock
 * `name` of kind `kind`. DLOCK_OK (its turn: dlock__lq_leave() must
 * follow), DLOCK_ETIMEDOUT, DLOCK_ECANCELED (cancelled(arg) said so) or
 * DLOCK_EQUEUEFULL. */
int dlock__lq_enter(dlock__lq *q, int kind, const char *name, int64_t deadline_us,
                    dlock__lq_cancelled cancelled, void *arg, dlock__lq_ticket *t);
void dlock__lq_leave(dlock__lq *q, dlock__lq_ticket *t);

/* How many of this client's threads wait for that lock here, the one whose
 * turn it is included (for tests and operators). */
unsigned dlock__lq_waiting(dlock__lq *q, int kind, const char *name);

/* Makes every local waiter look at its cancel flag. */
void dlock__lq_wake(dlock__lq *q);

#endif
