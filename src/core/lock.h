/* SPDX-License-Identifier: MIT */
/* lock.h - the lock handle's insides, shared by the files of the core that
 * serve it: calls.c (the owner's public calls, which dispatch to the
 * others), multi.c (several locks as one), acquire.c (taking a lock: the
 * wait loop), hold.c (a lock held: release, extend, check), operator.c
 * (query, force-unlock, adopt) and handle.c (making and freeing handles,
 * their state, cancellation). README.md says what may call what.
 *
 * A handle is idle (holds == 0) or holding (holds > 0, with a fence and a
 * lease entry on the client's renewer). Only the owner's calls change holds
 * and fence, and they never overlap (busy flag). The renewer may mark the
 * entry lost at any time; every call looks at that first, so a loss is
 * reported by the next call as well as by the callback. */
#ifndef DLOCK_CORE_LOCK_H
#define DLOCK_CORE_LOCK_H

#include "client.h"

#include <pthread.h>
#include <stdatomic.h>

#define DLOCK__TOKEN_MAX 64

struct dlock_lock {
    dlock_client *client;
    char *name;
    dlock__lock_spec spec;
    /* The owner token of the current (or last) acquisition; token_used:
     * the store may have something under it (a hold had it, acquired or
     * adopted; or an acquisition failed in a way that may have left a
     * queue place or a grant), so the next acquisition makes a new one; a
     * try answered "busy" keeps it. token_shared: dlock_lock_dup() gave the
     * token to another handle (or this one has it from one): one owner
     * across handles, so it is kept for good. */
    char token[DLOCK__TOKEN_MAX + 1];
    int token_used;
    atomic_int token_shared;
    dlock__store_lock *sl; /* the store's state; NULL for a multi-lock */
    atomic_int busy;
    atomic_int refs;

    /* Cancellation (dlock_cancel). A wait has a number; the state word is
     * (number of the current or last wait) << 1 | (a wait is in progress),
     * and cancel_for the number of the wait a cancel ends: the one in
     * progress, else the next. */
    _Atomic uint64_t wait_state;
    _Atomic uint64_t cancel_for;

    /* owner's state: changed only inside the owner's (non-overlapping) calls */
    unsigned holds;
    uint64_t fence;
    dlock__lease lease; /* on the renewer while holds > 0, or while queued */
    /* when the owner's call in progress began (dlock__lock_enter): a try's
     * requests and clean-up share one command timeout from then */
    int64_t call_began_us;

    dlock_lost_fn on_lost; /* guarded by the lease's renewer shard */
    void *on_lost_arg;
    /* Held (recursive: the callback may end the hold itself) while the
     * on_lost callback runs and while a hold ends: a callback never comes
     * after the call that ended the hold returned, and none comes for a
     * loss that call already reported. */
    pthread_mutex_t report_mu;

    /* settled: the hold is the caller's (its acquire or adopt returned
     * DLOCK_OK; on a multi-lock, it holds all its members): only then is a
     * loss reported through on_lost. Before, the acquire itself finds it
     * and waits on (dlock__lock_settle); a member's loss is its
     * multi-lock's, by the multi-lock's settled.
     * a multi-lock: its members, in canonical order; a member: its owner. */
    atomic_int settled;
    dlock_lock **members;
    size_t nmembers;
    dlock_lock *parent;
};

/* The handle whose calls own the wait: a member's is its multi-lock. */
static inline dlock_lock *dlock__lock_owner(dlock_lock *l)
{
    return l->parent != NULL ? l->parent : l;
}

/* handle.c */

/* A handle for name and spec (NULL spec: a multi-lock, no store state),
 * with no token yet. */
int dlock__lock_new(dlock_client *c, const char *name, const dlock__lock_spec *spec,
                    dlock_lock **out);
void dlock__lock_unref(dlock_lock *l);
/* Enters / leaves an owner's call on the handle. */
int dlock__lock_enter(dlock_lock *l);
int dlock__lock_leave(dlock_lock *l, int rc);
/* The bound of one request made now. */
int64_t dlock__lock_op_deadline(const dlock_lock *l);
/* The bound of one request made during a wait that ends at `deadline`
 * (DLOCK__NEVER: no end): a command timeout, and never more than a tenth
 * of one (200 ms at least, half of one at most) past the end of the wait,
 * so that `dlock run -w 1` at a server that stopped answering returns
 * after about 1.5 s, not 3.5. The clean-up (leaving the queue, giving back
 * a grant) may take the rest of one command timeout past the end, so that
 * a wait overruns its budget by at most one command timeout however its
 * requests fare. A try (deadline 0)
 * has no budget: its requests (a multi-lock's one-step request and its
 * members' tries) all end one command timeout after its call began, the
 * first request's bound. A clean-up left no time is not sent: the place or
 * grant it would give back ends with its waiter lease or lease in the
 * store. */
int64_t dlock__lock_request_deadline(const dlock_lock *l, int64_t deadline);
/* How long a wait's last request may go on past the wait (above), and a
 * wait that found the store unreachable waits for its clean-up. */
int64_t dlock__lock_past_wait_us(const dlock_lock *l);
/* The bound of a clean-up (several requests, one after another) after a
 * wait that ends at wait_deadline (DLOCK__NEVER: none): a command timeout
 * from now, never more than one past the wait's end; after a try (0): what
 * its requests left of its command timeout. The requests share it, so that
 * a call returns within its budget plus one command timeout however many
 * members a multi-lock gives back. */
int64_t dlock__lock_cleanup_deadline(const dlock_lock *l, int64_t wait_deadline);
/* The spec a set of public flags asks for; semaphore: whether
 * DLOCK_SEMAPHORE is accepted (operator calls). */
int dlock__spec_of(unsigned flags, int semaphore, dlock__lock_spec *spec);
/* Refuses (DLOCK_ENOTSUP) a spec the client's store cannot serve. */
int dlock__client_supports_spec(dlock_client *c, const dlock__lock_spec *spec);
/* A fresh owner token of client c in out (33 bytes): the client's id, then
 * 16 random hex digits. 0, or -1 without randomness. */
int dlock__token_make(const dlock_client *c, char *out);
/* Makes the handle (and its members) a new owner for the acquisition that
 * begins: a fresh token if the store may have something under the one it
 * has (token_used), unless handles share it (token_shared). A store can come
 * back with an older state (a failover to a replica that missed the last
 * writes): a hold of an earlier acquisition (or the queue place it was
 * granted from), released since, is there again under its token. Under
 * a new token it is someone else's: the new acquisition neither takes it
 * over (with a fence perhaps below one handed out since) nor renews it as
 * its own. DLOCK_OK or DLOCK_ENOMEM. */
int dlock__lock_new_owner(dlock_lock *l);
/* Numbers a call's wait (begin: in progress; end: over), so that a
 * dlock_cancel() ends the one in progress, or the next. */
void dlock__lock_begin_wait(dlock_lock *l);
void dlock__lock_end_wait(dlock_lock *l);
/* Whether the wait the handle (or its multi-lock) is in was cancelled. */
int dlock__lock_cancelled(dlock_lock *l);

/* acquire.c: one lock (not a multi-lock), inside the owner's call: take it
 * (waiting until deadline_us, DLOCK__NEVER, or not at all when 0). */
int dlock__lock_take(dlock_lock *l, int64_t deadline_us, int64_t lease_ms, int renew);
/* Sleeps *step_us and up to half as much again (jitter), never past
 * deadline, waking early if the wait is cancelled; then doubles *step_us,
 * up to max_us. */
void dlock__lock_back_off(dlock_lock *l, int64_t *step_us, int64_t max_us, int64_t deadline);

/* hold.c: a held lock, inside the owner's call. */
/* Starts holding: the renewer watches (and renews) the lease, or the session.
 * checked: the fence the store's renewals and release check the hold by
 * (backend.h, release), 0 for none (a hold taken at once). */
int dlock__lock_start_holding(dlock_lock *l, uint64_t fence, uint64_t checked,
                              dlock__session *session, int64_t lease_ms, int renew,
                              int64_t sent_us);
/* Starts holding a hand-over the store keeps granted_ms (<= lease_ms) from
 * since_us: valid that long, and renewed (to lease_ms) within a third of
 * it. */
int dlock__lock_start_handed(dlock_lock *l, uint64_t fence, int64_t lease_ms, int64_t granted_ms,
                             int renew, int64_t since_us);
void dlock__lock_stop_holding(dlock_lock *l);
/* A hold just started becomes the caller's (settled): DLOCK_OK, or
 * DLOCK_ELOST, the hold ended, if it was lost before (never told through
 * on_lost: the caller had not been given it). */
int dlock__lock_settle(dlock_lock *l);
/* Gives up one hold, or all of them; the release's request ends by
 * deadline (0: one command timeout from now). A release that could not be
 * sent in time is given up here all the same, and the lock ends with its
 * lease (or session) in the store. */
int dlock__lock_give(dlock_lock *l, int all, int64_t deadline);
/* Sets the lease of a held lock, renews it from now on, or renews it now. */
enum dlock__extend_mode {
    DLOCK__EXTEND_SET,       /* dlock_extend: a fixed lease of lease_ms */
    DLOCK__EXTEND_KEEPALIVE, /* dlock_keepalive: renewed from now on */
    DLOCK__EXTEND_RENEW,     /* dlock_renew: the full lease now, renewal as it was */
};
int dlock__lock_extend(dlock_lock *l, int64_t lease_ms, enum dlock__extend_mode mode);
/* Asks the store whether the handle still holds the lock (a loss it finds
 * is reported, not ended). */
int dlock__lock_verify(dlock_lock *l);
/* Clears and reports a loss of a held lock: DLOCK_OK or DLOCK_ELOST. */
int dlock__lock_take_loss(dlock_lock *l);
/* The end of validity of a lease granted at sent_us. */
int64_t dlock__validity_end(int64_t sent_us, int64_t lease_ms);

/* multi.c: the multi-lock versions of the owner's calls (calls.c). */
int dlock__multi_acquire(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, int renew);
int dlock__multi_release(dlock_lock *l, int all);
int dlock__multi_extend(dlock_lock *l, int64_t lease_ms, enum dlock__extend_mode mode);
int dlock__multi_verify(dlock_lock *l);
int dlock__multi_check(dlock_lock *l, int64_t *left_ms);
void dlock__multi_forget(dlock_lock *l); /* drop holds without releasing (detach) */

#endif
