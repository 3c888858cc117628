/* SPDX-License-Identifier: MIT */
/* renewer.h - the threads of a client that keep leases alive and notice
 * when they end.
 *
 * Every lock a client holds has a lease entry here; so does every waiter
 * whose place in a store's queue is kept by heartbeats, and every session
 * of the store (backend/session.h). Two threads serve them:
 *
 *   - the renewal thread sends, in one batch, every renewal, heartbeat and
 *     session keep-alive that is due (and those due within the next half
 *     period): the backend pipelines the batch, so N held locks cost a few
 *     round trips per period, not N. A renewal only ever extends a lease
 *     its token still holds: it never takes back a lock that has lapsed.
 *     Failures are retried with a growing, jittered delay.
 *   - the watchdog never talks to the store: it sleeps until the earliest
 *     end of validity and reports each lock lost the moment its validity
 *     runs out, so a request stuck on a slow connection never delays a
 *     report. Losses the renewal thread learns from the store (a refused
 *     renewal, a session the store ended) are reported at once as well.
 *
 * Validity of a hold is the send time of its last successful renewal +
 * lease - drift on CLOCK_MONOTONIC, and for a hold that lives by a session,
 * no later than the session's own validity.
 *
 * Entries live in shards, each with its own mutex, so that threads taking
 * and releasing locks at once do not queue on one lock. */
#ifndef DLOCK_CORE_RENEWER_H
#define DLOCK_CORE_RENEWER_H

#include "../backend/backend.h"
#include "../backend/session.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct dlock__lease dlock__lease;

/* Who owns an entry: kept alive while a thread of the renewer uses it, and
 * told when the entry is lost. */
typedef struct dlock__lease_owner {
    void (*ref)(dlock__lease *e);
    void (*unref)(dlock__lease *e);
    /* The entry was lost (e->why says why); called on a renewer thread,
     * outside every lock of the renewer. */
    void (*report)(dlock__lease *e);
} dlock__lease_owner;

struct dlock__lease {
    dlock__lease *prev, *next;
    int linked;
    unsigned gen;
    int in_flight;
    int64_t in_flight_us; /* when it was taken into the batch that is out now */
    /* what to renew; set by the owner while the entry is not watched */
    enum dlock__renew_kind kind;
    const dlock__lease_owner *owner;
    dlock__store_lock *lock; /* HOLD, WAITER */
    const char *token;       /* HOLD, WAITER */
    uint64_t fence;          /* HOLD: the fence it was taken under (0: unknown) */
    uint64_t wait_id;        /* WAITER: the attempt whose place it keeps */
    dlock__session *session; /* HOLD: the session it lives by (a reference), or NULL;
                                SESSION: the session itself */
    int64_t lease_ms;
    int renew;              /* HOLD: renewed (own lease) or checked (session) automatically */
    int64_t due_us;         /* next renewal or heartbeat, DLOCK__NEVER if none */
    int64_t valid_until_us; /* HOLD, SESSION: end of local validity */
    int64_t last_ok_us;     /* HOLD, SESSION: send time of the last successful renewal */
    unsigned failures;      /* renewals failed in a row */
    /* outcome */
    int lost;
    int reporting; /* lost, and its report (owner->report) not done yet: under the shard's mu */
    char why[200];
    const char *name; /* HOLD, WAITER: the lock's, for the log */
};

#define DLOCK__RENEWER_SHARDS 16

typedef struct dlock__renewer_shard {
    pthread_mutex_t mu;      /* guards the entries of the shard */
    pthread_cond_t reported; /* an entry's report is done (reporting back to 0) */
    dlock__lease list;       /* sentinel */
} __attribute__((aligned(64))) dlock__renewer_shard;

/* A thread of the renewer and when it next wakes. */
typedef struct dlock__renewer_thread {
    pthread_t thread;
    pthread_cond_t cv;
    _Atomic int64_t wake_at_us;        /* when it wakes; 0 while awake */
    _Atomic int64_t earliest_added_us; /* earliest event added since its last scan */
} dlock__renewer_thread;

struct dlock__renewer {
    pthread_mutex_t mu; /* thread state, the cvs, lost_sessions */
    int running, stopping;
    dlock__renewer_thread renewal, watchdog;
    dlock__renewer_shard shards[DLOCK__RENEWER_SHARDS];
    dlock__store *store;
    const dlock__client_cfg *cfg;
    dlock__log *log;                /* the client's */
    dlock__session **lost_sessions; /* waiting for the store's session_lost() */
    size_t nlost, lost_cap;
    int64_t next_retry_note_us; /* renewal thread: an outage's next retry logged at info */
    int recovery_noted;         /* renewal thread: the outage's first recovery was logged at info */
};

typedef struct dlock__renewer dlock__renewer;

void dlock__renewer_init(dlock__renewer *r, dlock__store *store, const dlock__client_cfg *cfg,
                         dlock__log *log);
/* Stops the threads (entries stay: sessions can still be ended). */
void dlock__renewer_stop(dlock__renewer *r);
/* Stops the threads if need be; entries left are dropped. */
void dlock__renewer_fini(dlock__renewer *r);

/* Starts watching e (fields above filled by the owner). Returns DLOCK_OK,
 * or DLOCK_ENOMEM if a thread cannot start. */
int dlock__renewer_add(dlock__renewer *r, dlock__lease *e);
/* Stops watching e, dropping its session reference. Safe if e is not
 * watched. Returns whether e had been reported lost (and fills why). */
int dlock__renewer_remove(dlock__renewer *r, dlock__lease *e, char *why, size_t why_len);

/* Changes a held entry (after a reentry, extend, keepalive or failed
 * release): renew on/off, and lease_ms / valid_until_us unless 0. Turning
 * renewal on makes a renewal due at once. */
void dlock__renewer_update(dlock__renewer *r, dlock__lease *e, int renew, int64_t lease_ms,
                           int64_t valid_until_us);

/* Marks a held entry lost now (its owner found out from the store) and
 * reports it as the threads do, on the calling thread. Returns 1 if it did,
 * 0 if e was not watched or already lost. */
int dlock__renewer_lose(dlock__renewer *r, dlock__lease *e, const char *why);
/* Waits until a report of e's loss under way on another thread (its
 * callback) is done. */
void dlock__renewer_wait_reported(dlock__renewer *r, dlock__lease *e);

/* A held entry that lived by its session has a lease of its own now (the
 * store moved it: dlock_extend): it drops the session, and its validity
 * and renewals are its own lease's. */
void dlock__renewer_leave_session(dlock__renewer *r, dlock__lease *e);

/* Guard fields of e's owner shared with the threads (the lost callback). */
void dlock__renewer_lock(dlock__renewer *r, dlock__lease *e);
void dlock__renewer_unlock(dlock__renewer *r, dlock__lease *e);

/* The end of e's local validity (held entries), its session's included. */
int64_t dlock__renewer_valid_until(dlock__renewer *r, dlock__lease *e);

/* Local state of a held entry: DLOCK_OK with *left_us, or DLOCK_ELOST
 * (validity over or reported lost; why filled). */
int dlock__renewer_check(dlock__renewer *r, dlock__lease *e, int64_t *left_us, char *why,
                         size_t why_len);

/* The lease a session was started with (its holds are checked every third). */
int64_t dlock__session_lease_ms(const dlock__session *s);

/* The margin subtracted from a lease, in microseconds: 1% + 2 ms for clock
 * drift, plus a scheduling allowance of 5% of the lease, at most 50 ms. */
int64_t dlock__drift_us(int64_t lease_ms);

#endif
