/* renewer.h - one thread per client that keeps leases alive and notices
 * when they end.
 *
 * Every lock a client holds has a lease entry here, and so does every waiter
 * queued on the server (its place is kept by heartbeats). The thread renews
 * all entries that are due, and those due within the next half period, in
 * one batch: the backend pipelines it, so N held locks cost a few round
 * trips per period, not N. It also watches each held lock's local validity
 * and reports the lock lost the moment validity runs out or the server
 * refuses a renewal. A renewal only ever extends a lease still held by its
 * token: it never takes back a lock that has lapsed.
 *
 * Entries live in shards, each with its own mutex, so that threads taking
 * and releasing locks at once do not queue on one lock; the thread visits
 * every shard. */
#ifndef DLOCK_CORE_RENEWER_H
#define DLOCK_CORE_RENEWER_H

#include "../backend/backend.h"
#include "board.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct dlock__lease {
    struct dlock__lease *prev, *next;
    int linked;
    unsigned gen;
    int in_flight;
    /* what to renew */
    int waiter;       /* 0: a held lock, 1: a queued waiter */
    uint64_t wait_id; /* waiter: the wait it keeps queued */
    dlock_lock *lock;
    void *bl;
    const char *token;
    int64_t lease_ms;
    int renew;              /* held: renewed automatically; else watched only */
    int64_t due_us;         /* next renewal or heartbeat, DLOCK__NEVER if none */
    int64_t valid_until_us; /* held: end of local validity */
    int64_t last_ok_us;     /* held: send time of the last successful renewal */
    /* outcome */
    int lost;
    char why[200];
} dlock__lease;

#define DLOCK__RENEWER_SHARDS 16

typedef struct dlock__renewer_shard {
    pthread_mutex_t mu; /* guards the entries of the shard */
    dlock__lease list;  /* sentinel */
} __attribute__((aligned(64))) dlock__renewer_shard;

typedef struct dlock__renewer {
    pthread_mutex_t mu; /* thread state, with cv */
    pthread_cond_t cv;
    pthread_t thread;
    int running, stopping;
    _Atomic int64_t wake_at_us;        /* when the sleeping thread wakes; 0 while awake */
    _Atomic int64_t earliest_added_us; /* earliest event added since the last scan */
    dlock__renewer_shard shards[DLOCK__RENEWER_SHARDS];
    const dlock__backend_ops *ops;
    void *be;
    dlock__board *board;
    const dlock__client_cfg *cfg;
    char last_error[200];
} dlock__renewer;

void dlock__renewer_init(dlock__renewer *r, const dlock__backend_ops *ops, void *be,
                         dlock__board *board, const dlock__client_cfg *cfg);
/* Stops the thread; entries left are dropped. */
void dlock__renewer_fini(dlock__renewer *r);

/* Starts watching e (fields above filled by the caller). Returns DLOCK_OK,
 * or DLOCK_ENOMEM if the thread cannot start. */
int dlock__renewer_add(dlock__renewer *r, dlock__lease *e);
/* Stops watching e. Safe if e is not watched. Returns whether e had been
 * reported lost (and fills why). */
int dlock__renewer_remove(dlock__renewer *r, dlock__lease *e, char *why, size_t why_len);

/* Changes a held entry (after a reentry, extend, keepalive or failed
 * release): renew on/off, and lease_ms / valid_until_us unless 0. Turning
 * renewal on makes a renewal due at once. */
void dlock__renewer_update(dlock__renewer *r, dlock__lease *e, int renew, int64_t lease_ms,
                           int64_t valid_until_us);

/* Guard fields of e's owner shared with the thread (the lost callback). */
void dlock__renewer_lock(dlock__renewer *r, dlock__lease *e);
void dlock__renewer_unlock(dlock__renewer *r, dlock__lease *e);

/* The end of e's local validity (held entries). */
int64_t dlock__renewer_valid_until(dlock__renewer *r, dlock__lease *e);

/* Local state of a held entry: DLOCK_OK with *left_us, or DLOCK_ELOST
 * (validity over or reported lost; why filled). */
int dlock__renewer_check(dlock__renewer *r, dlock__lease *e, int64_t *left_us, char *why,
                         size_t why_len);

/* The drift margin subtracted from a lease, in microseconds: 1% + 2 ms. */
int64_t dlock__drift_us(int64_t lease_ms);

/* Provided by lock.c: take / drop a reference on a handle, and report a
 * loss to its owner (called on the renewer thread). */
void dlock__lock_ref(dlock_lock *lock);
void dlock__lock_unref(dlock_lock *lock);
void dlock__lock_report_lost(dlock_lock *lock, const char *why);

#endif
