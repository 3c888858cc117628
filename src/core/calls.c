/* SPDX-License-Identifier: MIT */
/* calls.c - the public calls on a lock handle (include/dlock.h): opening
 * one, and the owner's calls, each of which checks its arguments, enters
 * the owner's call (dlock__lock_enter) and dispatches: to multi.c for a
 * multi-lock, to acquire.c and hold.c for one lock. This is the top of the
 * core's lock machinery: multi.c uses the single-lock steps, and nothing
 * below calls back up here. (dlock_multi_open() is multi.c's; the calls
 * about a name rather than a hold are operator.c's.) */
#include "lock.h"

#include "../base/clock.h"
#include "../base/error.h"

#include <stdio.h>

/* ---------------------------------------------------------------- open */

static int new_token(dlock_lock **l)
{
    if (dlock__token_make((*l)->client, (*l)->token) == 0)
        return DLOCK_OK;
    dlock_lock_free(*l);
    *l = NULL;
    return dlock__fail(DLOCK_ENOMEM, "no randomness for the owner token");
}

int dlock_lock_open(dlock_client *c, const char *name, unsigned flags, dlock_lock **out)
{
    dlock__lock_spec spec;
    int rc;

    dlock__clear_error();
    if (out != NULL)
        *out = NULL; /* also when the flags are refused */
    rc = dlock__spec_of(flags, 0, &spec);
    if (rc == DLOCK_OK)
        rc = dlock__lock_new(c, name, &spec, out);
    return rc == DLOCK_OK ? new_token(out) : rc;
}

int dlock_lock_dup(const dlock_lock *l, unsigned flags, dlock_lock **out)
{
    dlock__lock_spec spec;
    int rc;

    dlock__clear_error();
    if (l == NULL || l->nmembers > 0 || l->spec.kind == DLOCK__SEMAPHORE)
        return dlock__fail(DLOCK_EINVAL, "dlock_lock_dup: want a lock handle (not a semaphore "
                                         "or multi-lock)");
    rc = dlock__spec_of(flags, 0, &spec);
    if (rc == DLOCK_OK)
        rc = dlock__lock_new(l->client, l->name, &spec, out);
    if (rc == DLOCK_OK) {
        /* one owner across the handles: neither makes a new token again */
        snprintf((*out)->token, sizeof(*out)->token, "%s", l->token);
        atomic_store(&(*out)->token_shared, 1);
        atomic_store(&((dlock_lock *) l)->token_shared, 1);
    }
    return rc;
}

int dlock_semaphore_open(dlock_client *c, const char *name, unsigned permits, unsigned take,
                         dlock_lock **out)
{
    dlock__lock_spec spec = {.kind = DLOCK__SEMAPHORE, .permits = permits, .take = take};
    int rc;

    dlock__clear_error();
    if (out != NULL)
        *out = NULL; /* on every failure, as the other open calls */
    if (permits == 0 || take == 0 || take > permits || permits > 1000000000u)
        return dlock__fail(DLOCK_EINVAL,
                           "semaphore '%s': want 0 < take (%u) <= permits (%u) <= 10^9",
                           name != NULL ? name : "", take, permits);
    rc = dlock__lock_new(c, name, &spec, out);
    return rc == DLOCK_OK ? new_token(out) : rc;
}

/* ---------------------------------------------------------------- acquire */

/* A fixed lease's length: DLOCK_LEASE_MIN_MS..DLOCK_DURATION_MAX_MS, else
 * DLOCK_EINVAL saying so. */
static int check_lease(int64_t lease_ms)
{
    if (lease_ms < DLOCK_LEASE_MIN_MS)
        return dlock__fail(
            DLOCK_EINVAL,
            "lease of %lld ms: a lease must be at least %d ms " DLOCK__LEASE_FLOOR_WHY,
            (long long) lease_ms, DLOCK_LEASE_MIN_MS);
    if (lease_ms > DLOCK_DURATION_MAX_MS)
        return dlock__fail(DLOCK_EINVAL, "lease of %lld ms: a lease must be at most %lld ms",
                           (long long) lease_ms, (long long) DLOCK_DURATION_MAX_MS);
    return DLOCK_OK;
}

static int acquire_entry(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, int renew)
{
    int rc = dlock__lock_enter(l);

    if (rc != DLOCK_OK)
        return rc;
    if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
        rc = dlock__fail(DLOCK_EINVAL, "wait of %lld ms: want >= 0 or DLOCK_WAIT_FOREVER",
                         (long long) wait_ms);
    else if (wait_ms > DLOCK_DURATION_MAX_MS)
        rc = dlock__fail(DLOCK_EINVAL,
                         "wait of %lld ms: want at most %lld ms, or DLOCK_WAIT_FOREVER",
                         (long long) wait_ms, (long long) DLOCK_DURATION_MAX_MS);
    else if (!renew)
        rc = check_lease(lease_ms);
    if (rc == DLOCK_OK && !renew)
        rc = dlock__client_require(l->client, DLOCK_CAP_FIXED_LEASE,
                                   "a fixed lease (dlock_acquire_for)");
    if (rc == DLOCK_OK && l->holds == 0)
        rc = dlock__lock_new_owner(l);
    if (rc != DLOCK_OK)
        return dlock__lock_leave(l, rc);
    /* every call is numbered, a try too: a cancel aimed at it ends with it */
    dlock__lock_begin_wait(l);
    if (l->nmembers > 0) {
        rc = dlock__multi_acquire(l, wait_ms, lease_ms, renew);
    } else {
        int64_t deadline = wait_ms == 0  ? 0
                           : wait_ms < 0 ? DLOCK__NEVER
                                         : dlock__deadline_after_ms(dlock__now_us(), wait_ms);
        rc = dlock__lock_take(l, deadline, lease_ms, renew);
    }
    dlock__lock_end_wait(l);
    /* A failed acquisition may have left a queue place or a grant under
     * its token (a leave or give-back lost, an answer not heard): the next
     * one is a new owner. A try the store answered "busy" left nothing. */
    if (rc != DLOCK_OK && l->holds == 0 &&
        !(wait_ms == 0 && (rc == DLOCK_EBUSY || rc == DLOCK_EDEADLK)))
        l->token_used = 1;
    return dlock__lock_leave(l, rc);
}

int dlock_acquire(dlock_lock *l, int64_t wait_ms)
{
    return acquire_entry(l, wait_ms, l != NULL ? l->client->cfg.lease_ms : 1, 1);
}

int dlock_acquire_for(dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return acquire_entry(l, wait_ms, lease_ms, 0);
}

int dlock_try_acquire(dlock_lock *l)
{
    return dlock_acquire(l, 0);
}

/* ---------------------------------------------------------------- cancel */

int dlock_cancel(dlock_lock *l)
{
    if (l == NULL)
        return dlock__fail(DLOCK_EINVAL, "lock handle is NULL");
    dlock_lock *o = dlock__lock_owner(l);
    /* The wait in progress, else the next one. */
    uint64_t state = atomic_load(&o->wait_state);
    uint64_t target = state & 1 ? state >> 1 : (state >> 1) + 1;
    uint64_t seen = atomic_load(&o->cancel_for);
    while (seen < target && !atomic_compare_exchange_weak(&o->cancel_for, &seen, target))
        ;
    /* Members of a multi-lock share its token: this wakes whichever waits.
     * Only a wait in progress is on the board; its token stays until the
     * owner's next acquisition (dlock__lock_new_owner), which comes after
     * that wait ended. */
    if (state & 1)
        dlock__board_recheck(&o->client->board, o->token);
    if (o->client->lq != NULL)
        dlock__lq_wake(o->client->lq);
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- release */

int dlock_release(dlock_lock *l)
{
    int rc = dlock__lock_enter(l);
    if (rc != DLOCK_OK)
        return rc;
    return dlock__lock_leave(l, l->nmembers > 0 ? dlock__multi_release(l, 0)
                                                : dlock__lock_give(l, 0, 0));
}

/* ---------------------------------------------------------------- lease */

int dlock_extend(dlock_lock *l, int64_t lease_ms)
{
    int rc = dlock__lock_enter(l);

    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__client_require(l->client, DLOCK_CAP_EXTEND, "dlock_extend (set a lease)");
    if (rc == DLOCK_OK)
        rc = check_lease(lease_ms);
    if (rc == DLOCK_OK)
        rc = l->nmembers > 0 ? dlock__multi_extend(l, lease_ms, DLOCK__EXTEND_SET)
                             : dlock__lock_extend(l, lease_ms, DLOCK__EXTEND_SET);
    return dlock__lock_leave(l, rc);
}

int dlock_keepalive(dlock_lock *l)
{
    int rc = dlock__lock_enter(l);

    if (rc != DLOCK_OK)
        return rc;
    return dlock__lock_leave(l, l->nmembers > 0
                                    ? dlock__multi_extend(l, 0, DLOCK__EXTEND_KEEPALIVE)
                                    : dlock__lock_extend(l, 0, DLOCK__EXTEND_KEEPALIVE));
}

int dlock_renew(dlock_lock *l)
{
    int rc = dlock__lock_enter(l);

    if (rc != DLOCK_OK)
        return rc;
    return dlock__lock_leave(l, l->nmembers > 0 ? dlock__multi_extend(l, 0, DLOCK__EXTEND_RENEW)
                                                : dlock__lock_extend(l, 0, DLOCK__EXTEND_RENEW));
}

/* ---------------------------------------------------------------- state */

uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return l != NULL ? l->fence : 0;
}

const char *dlock_lock_token(const dlock_lock *l)
{
    return l != NULL ? l->token : "";
}

const char *dlock_lock_name(const dlock_lock *l)
{
    return l != NULL ? l->name : "";
}

unsigned dlock_lock_holds(const dlock_lock *l)
{
    return l != NULL ? l->holds : 0;
}

size_t dlock_lock_members(const dlock_lock *l)
{
    return l == NULL ? 0 : l->nmembers > 0 ? l->nmembers : 1;
}

const dlock_lock *dlock_lock_member(const dlock_lock *l, size_t i)
{
    if (l == NULL)
        return NULL;
    if (l->nmembers == 0)
        return i == 0 ? l : NULL;
    return i < l->nmembers ? l->members[i] : NULL;
}

void dlock_lock_on_lost(dlock_lock *l, dlock_lost_fn fn, void *arg)
{
    if (l == NULL)
        return;
    dlock__renewer_lock(&l->client->renewer, &l->lease);
    l->on_lost = fn;
    l->on_lost_arg = arg;
    dlock__renewer_unlock(&l->client->renewer, &l->lease);
}

int dlock_lock_check(dlock_lock *l)
{
    char why[sizeof l->lease.why];

    dlock__clear_error();
    if (l == NULL)
        return dlock__fail(DLOCK_EINVAL, "lock handle is NULL");
    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    if (l->nmembers > 0)
        return dlock__multi_check(l, NULL);
    if (dlock__renewer_check(&l->client->renewer, &l->lease, NULL, why, sizeof why) != DLOCK_OK)
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
    return DLOCK_OK;
}

int dlock_lock_verify(dlock_lock *l)
{
    int rc = dlock__lock_enter(l);

    if (rc != DLOCK_OK)
        return rc;
    return dlock__lock_leave(l, l->nmembers > 0 ? dlock__multi_verify(l) : dlock__lock_verify(l));
}

int64_t dlock_lock_remaining_ms(dlock_lock *l)
{
    char why[sizeof l->lease.why];
    int64_t left = 0;

    if (l == NULL || l->holds == 0)
        return 0;
    if (l->nmembers > 0)
        return dlock__multi_check(l, &left) == DLOCK_OK ? left : 0;
    if (dlock__renewer_check(&l->client->renewer, &l->lease, &left, why, sizeof why) != DLOCK_OK)
        return 0;
    return left / 1000;
}

/* ---------------------------------------------------------------- end */

static int release_all(dlock_lock *l)
{
    return l->nmembers > 0 ? dlock__multi_release(l, 1) : dlock__lock_give(l, 1, 0);
}

void dlock_lock_free(dlock_lock *l)
{
    if (l == NULL)
        return;
    if (dlock__lock_enter(l) == DLOCK_OK) {
        if (l->holds > 0)
            release_all(l);
        dlock__lock_stop_holding(l);
        dlock__lock_leave(l, DLOCK_OK);
    }
    dlock__lock_unref(l);
}

void dlock_lock_detach(dlock_lock *l)
{
    if (l == NULL)
        return;
    if (dlock__lock_enter(l) == DLOCK_OK) {
        const dlock__backend *b = l->client->backend;
        int held = l->holds > 0;
        /* off the renewer first: a renewal must not find the hold gone */
        if (l->nmembers > 0)
            dlock__multi_forget(l);
        dlock__lock_stop_holding(l);
        if (held && b->detach != NULL) {
            /* the store keeps what it holds: lock_free must not give it up */
            for (size_t i = 0; i < l->nmembers; i++)
                b->detach(l->client->store, l->members[i]->sl);
            if (l->nmembers == 0)
                b->detach(l->client->store, l->sl);
        }
        dlock__lock_leave(l, DLOCK_OK);
    }
    dlock__lock_unref(l);
}
