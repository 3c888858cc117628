/* lock.h - the lock handle's insides, shared by lock.c (one lock) and
 * multi.c (several as one). */
#ifndef DLOCK_CORE_LOCK_H
#define DLOCK_CORE_LOCK_H

#include "client.h"

#include <stdatomic.h>

#define DLOCK__TOKEN_MAX 64

struct dlock_lock {
    dlock_client *client;
    char *name;
    dlock__lock_spec spec;
    char token[DLOCK__TOKEN_MAX + 1];
    void *bl; /* the backend's state; NULL for a multi-lock */
    atomic_int busy;
    atomic_int refs;
    atomic_int cancel; /* dlock_cancel() asked the current or next wait to end */

    /* owner's state: changed only inside the owner's (non-overlapping) calls */
    unsigned holds;
    uint64_t fence;
    dlock__lease lease; /* on the renewer while holds > 0 */

    dlock_lost_fn on_lost; /* guarded by the lease's renewer shard */
    void *on_lost_arg;

    /* a multi-lock: its members, in canonical order; a member: its owner */
    dlock_lock **members;
    size_t nmembers;
    dlock_lock *parent;
};

/* A handle for name and spec, with no token yet. */
int dlock__lock_new(dlock_client *c, const char *name, const dlock__lock_spec *spec,
                    dlock_lock **out);

/* One lock (not a multi-lock), called inside the owner's call:
 * take it (waiting until deadline_us, DLOCK__NEVER, or not at all when
 * deadline_us is 0), give up one hold or all of them, record a hold the
 * backend reported taken. */
int dlock__lock_take(dlock_lock *l, int64_t deadline_us, int64_t lease_ms, int renew);
int dlock__lock_give(dlock_lock *l, int all);
int dlock__lock_start_holding(dlock_lock *l, uint64_t fence, int64_t lease_ms, int renew,
                              int64_t sent_us);
/* Sets the lease of a held lock (or, with keepalive, renews it from now on). */
int dlock__lock_extend(dlock_lock *l, int64_t lease_ms, int keepalive);
/* Clears and reports a loss of a held lock: DLOCK_OK or DLOCK_ELOST. */
int dlock__lock_take_loss(dlock_lock *l);

/* multi.c: the multi-lock versions of the public calls. */
int dlock__multi_acquire(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, int renew);
int dlock__multi_release(dlock_lock *l, int all);
int dlock__multi_extend(dlock_lock *l, int64_t lease_ms, int keepalive);
int dlock__multi_check(dlock_lock *l, int64_t *left_ms);
void dlock__multi_forget(dlock_lock *l); /* drop holds without releasing (detach) */

#endif
