/* lock.c - the lock handle: one owner's state machine over a backend.
 *
 * A handle is idle (holds == 0) or holding (holds > 0, with a fence, a lease
 * and an entry on the client's renewer). Only the owner's calls change holds
 * and fence, and they never overlap (busy flag). The renewer may, at any
 * time, mark the entry lost; every call looks at that first, so a loss is
 * reported by the next call as well as by the callback.
 *
 * Waiting: an attempt that finds the lock held joins the server's queue
 * (when the backend can wake waiters), so the release hands the lock
 * straight to the head of the queue and wakes that one waiter through the
 * board. While queued, the waiter's place is kept by heartbeats from the
 * renewer. Every park is bounded by the holder's remaining lease, so a
 * missed wake-up costs at most that long. Backends without wake-ups are
 * polled with a capped exponential backoff, also bounded by the lease.
 *
 * The kinds of lock (mutex, fair, read, write, semaphore) differ only in the
 * backend's steps; a multi-lock is a handle over member handles (multi.c). */
#include "lock.h"

#include "clock.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- lifetime */

void dlock__lock_ref(dlock_lock *l)
{
    atomic_fetch_add(&l->refs, 1);
}

static void destroy(dlock_lock *l)
{
    for (size_t i = 0; i < l->nmembers; i++)
        dlock__lock_unref(l->members[i]);
    free(l->members);
    if (l->bl != NULL)
        l->client->ops->lock_free(l->client->be, l->bl);
    free(l->name);
    free(l);
}

void dlock__lock_unref(dlock_lock *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1)
        destroy(l);
}

void dlock__lock_report_lost(dlock_lock *l, const char *why)
{
    char text[sizeof l->lease.why];
    dlock__renewer *r = &l->client->renewer;

    if (why == NULL) {
        dlock__renewer_lock(r, &l->lease);
        snprintf(text, sizeof text, "%s", l->lease.why);
        dlock__renewer_unlock(r, &l->lease);
    } else {
        snprintf(text, sizeof text, "%s", why);
    }
    /* A member's loss is its multi-lock's. */
    dlock_lock *target = l->parent != NULL ? l->parent : l;
    dlock__renewer_lock(r, &target->lease);
    dlock_lost_fn fn = target->on_lost;
    void *arg = target->on_lost_arg;
    dlock__renewer_unlock(r, &target->lease);
    if (fn != NULL)
        fn(target, DLOCK_ELOST, text, arg);
}

/* The kind a set of flags asks for. */
static int spec_of(unsigned flags, dlock__lock_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    switch (flags) {
    case 0:
        spec->kind = DLOCK__MUTEX;
        return DLOCK_OK;
    case DLOCK_SIMPLE:
        spec->kind = DLOCK__MUTEX;
        spec->simple = 1;
        return DLOCK_OK;
    case DLOCK_FAIR:
        spec->kind = DLOCK__FAIR;
        return DLOCK_OK;
    case DLOCK_READ:
        spec->kind = DLOCK__READ;
        return DLOCK_OK;
    case DLOCK_WRITE:
        spec->kind = DLOCK__WRITE;
        return DLOCK_OK;
    default:
        return dlock__fail(DLOCK_EINVAL,
                           "flags 0x%x: want one of 0, DLOCK_SIMPLE, DLOCK_FAIR, DLOCK_READ, "
                           "DLOCK_WRITE",
                           flags);
    }
}

int dlock__lock_new(dlock_client *c, const char *name, const dlock__lock_spec *spec,
                    dlock_lock **out)
{
    dlock_lock *l;
    int rc;

    if (out == NULL)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (c == NULL)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    rc = dlock__check_name(name);
    if (rc != DLOCK_OK)
        return rc;
    l = calloc(1, sizeof *l);
    if (l == NULL || (l->name = strdup(name)) == NULL) {
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    if (spec != NULL) {
        rc = c->ops->lock_new(c->be, name, spec, &l->bl);
        if (rc != DLOCK_OK) {
            free(l->name);
            free(l);
            return rc;
        }
        l->spec = *spec;
    }
    l->client = c;
    atomic_init(&l->refs, 1);
    atomic_init(&l->busy, 0);
    atomic_init(&l->cancel, 0);
    l->lease.lock = l;
    l->lease.bl = l->bl;
    l->lease.token = l->token;
    *out = l;
    return DLOCK_OK;
}

static int new_token(dlock_lock **l)
{
    if (dlock__random_hex((*l)->token, 16) == 0)
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
    if (flags == DLOCK_SEMAPHORE)
        return dlock__fail(DLOCK_EINVAL, "a semaphore is opened with dlock_semaphore_open()");
    rc = spec_of(flags, &spec);
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
    rc = spec_of(flags, &spec);
    if (rc == DLOCK_OK)
        rc = dlock__lock_new(l->client, l->name, &spec, out);
    if (rc == DLOCK_OK)
        snprintf((*out)->token, sizeof(*out)->token, "%s", l->token);
    return rc;
}

int dlock_semaphore_open(dlock_client *c, const char *name, unsigned permits, unsigned take,
                         dlock_lock **out)
{
    dlock__lock_spec spec = {.kind = DLOCK__SEMAPHORE, .permits = permits, .take = take};
    int rc;

    dlock__clear_error();
    if (permits == 0 || take == 0 || take > permits || permits > 1000000000u)
        return dlock__fail(DLOCK_EINVAL,
                           "semaphore '%s': want 0 < take (%u) <= permits (%u) <= 10^9",
                           name != NULL ? name : "", take, permits);
    rc = dlock__lock_new(c, name, &spec, out);
    return rc == DLOCK_OK ? new_token(out) : rc;
}

/* ---------------------------------------------------------------- helpers */

static int enter(dlock_lock *l)
{
    dlock__clear_error();
    if (l == NULL)
        return dlock__fail(DLOCK_EINVAL, "lock handle is NULL");
    if (l->parent != NULL)
        return dlock__fail(DLOCK_EINVAL,
                           "lock '%s' is a member of a multi-lock: use the "
                           "multi-lock",
                           l->name);
    if (atomic_exchange(&l->busy, 1) != 0)
        return dlock__fail(DLOCK_EINVAL,
                           "lock handle '%s' is in use by another call (one owner, one call "
                           "at a time)",
                           l->name);
    return DLOCK_OK;
}

static int leave(dlock_lock *l, int rc)
{
    atomic_store(&l->busy, 0);
    return rc;
}

static int64_t op_deadline(const dlock_lock *l)
{
    return dlock__now_us() + l->client->cfg.command_timeout_ms * 1000;
}

static int64_t validity_end(int64_t sent_us, int64_t lease_ms)
{
    return sent_us + lease_ms * 1000 - dlock__drift_us(lease_ms);
}

/* Starts holding: the renewer watches (and maybe renews) the lease. */
int dlock__lock_start_holding(dlock_lock *l, uint64_t fence, int64_t lease_ms, int renew,
                              int64_t sent_us)
{
    dlock__lease *e = &l->lease;

    l->holds = 1;
    if (fence != 0)
        l->fence = fence;
    e->waiter = 0;
    e->lease_ms = lease_ms;
    e->renew = renew;
    e->last_ok_us = sent_us;
    e->valid_until_us = validity_end(sent_us, lease_ms);
    e->due_us = renew ? sent_us + lease_ms * 1000 / 3 : DLOCK__NEVER;
    return dlock__renewer_add(&l->client->renewer, e);
}

static void stop_holding(dlock_lock *l)
{
    dlock__renewer_remove(&l->client->renewer, &l->lease, NULL, 0);
    l->holds = 0;
}

int dlock__lock_take_loss(dlock_lock *l)
{
    char why[sizeof l->lease.why];

    if (l->holds == 0)
        return DLOCK_OK;
    if (dlock__renewer_check(&l->client->renewer, &l->lease, NULL, why, sizeof why) == DLOCK_OK)
        return DLOCK_OK;
    stop_holding(l);
    return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
}

/* ---------------------------------------------------------------- acquire */

/* Re-entry: the handle already holds the lock. The count is the handle's;
 * the server is asked only to confirm the token still holds it and to make
 * the lease at least lease_ms. */
static int reenter(dlock_lock *l, int64_t lease_ms, int renew)
{
    dlock_client *c = l->client;
    int64_t sent = dlock__now_us();
    int rc = c->ops->extend(c->be, l->bl, l->token, lease_ms, 1, op_deadline(l));

    if (rc == DLOCK_ELOST) {
        stop_holding(l);
        return dlock__fail(DLOCK_ELOST,
                           "lock '%s' was lost: the server no longer has it under "
                           "this owner",
                           l->name);
    }
    if (rc != DLOCK_OK)
        return rc;
    l->holds++;
    /* The lease now runs at least lease_ms from `sent`; once renewed, a
     * lock stays renewed until released. */
    int64_t until = validity_end(sent, lease_ms);
    if (until < dlock__renewer_valid_until(&c->renewer, &l->lease))
        until = 0;
    if (l->lease.renew || renew)
        dlock__renewer_update(&c->renewer, &l->lease, 1, c->cfg.lease_ms, until);
    else if (until != 0)
        dlock__renewer_update(&c->renewer, &l->lease, 0, lease_ms, until);
    return DLOCK_OK;
}

/* Leaves the server's queue after giving up. */
static void cancel_wait(dlock_lock *l)
{
    l->client->ops->cancel(l->client->be, l->bl, l->token, op_deadline(l));
}

static int64_t jitter_us(int64_t max)
{
    char hex[5];
    if (max <= 0 || dlock__random_hex(hex, 2) != 0)
        return 0;
    return (int64_t) (strtoul(hex, NULL, 16) % (unsigned long) max);
}

static int busy_error(const dlock_lock *l, int64_t ttl_ms)
{
    const char *what =
        l->spec.kind == DLOCK__SEMAPHORE ? "has too few permits free" : "is held by someone else";
    if (ttl_ms >= 0)
        return dlock__fail(DLOCK_EBUSY, "lock '%s' %s (a lease ends in %lld ms)", l->name, what,
                           (long long) ttl_ms);
    return dlock__fail(DLOCK_EBUSY, "lock '%s' %s, with no lease (it never ends by itself)",
                       l->name, what);
}

/* Takes a lock this handle does not hold: deadline_us 0 for one attempt. */
static int take(dlock_lock *l, int64_t deadline, int64_t lease_ms, int renew)
{
    dlock_client *c = l->client;
    int64_t start = dlock__now_us();
    int waits = deadline != 0;
    int notify = waits ? c->ops->can_notify(c->be, l->bl) : 0;
    int prepared = notify == 2, on_board = 0, on_renewer = 0, queued = 0, local = 0, held = 0, rc;
    int64_t poll_us = 1000;
    dlock__waiter w = {.token = l->token, .wait_id = dlock__client_wait_id(c)};
    dlock__lq_ticket ticket;

    for (;;) {
        if (waits && atomic_exchange(&l->cancel, 0)) {
            rc = dlock__fail(DLOCK_ECANCELED, "wait for lock '%s' cancelled", l->name);
            goto give_up;
        }
        /* With the local queue on, a thread queues on the server only in
         * its turn, and does not even try while another thread of this
         * client waits for the lock: the try would fail. */
        if (waits && !local && c->lq != NULL && (held || dlock__lq_waiting(c->lq, l) > 0)) {
            rc = dlock__lq_enter(c->lq, l, deadline, &l->cancel, &ticket);
            if (rc == DLOCK_ETIMEDOUT)
                goto timed_out;
            if (rc != DLOCK_OK)
                goto done;
            local = 1;
        }
        int join = notify && prepared && (local || c->lq == NULL);
        if (join && !on_board) {
            dlock__board_enter(&c->board, &w);
            on_board = 1;
        }
        dlock__attempt a = {.token = l->token,
                            .lease_ms = lease_ms,
                            .join_queue = join,
                            .was_queued = queued,
                            .wait_id = w.wait_id,
                            .deadline_us = op_deadline(l)};
        int64_t sent = dlock__now_us();
        rc = c->ops->acquire(c->be, l->bl, &a);
        if (rc != DLOCK_OK)
            goto give_up;
        if (a.outcome == DLOCK__TAKEN) {
            /* The lease entry served the wait; it now serves the hold. */
            if (on_renewer) {
                dlock__renewer_remove(&c->renewer, &l->lease, NULL, 0);
                on_renewer = 0;
            }
            rc = dlock__lock_start_holding(l, a.fence, lease_ms, renew, sent);
            goto done;
        }
        if (!waits) {
            rc = busy_error(l, a.holder_ttl_ms);
            goto done;
        }
        if (!local && c->lq != NULL) {
            /* Within this client, one thread at a time waits on the server
             * for this lock; the others wait in the local queue, in order
             * (above), and try again in their turn: the lock may have
             * changed hands meanwhile. */
            held = 1;
            continue;
        }
        if (notify && !prepared) {
            /* First contention: make wake-ups flow, then queue up. */
            rc = c->ops->prepare_wait(c->be, l->bl, deadline);
            if (rc == DLOCK_OK)
                prepared = 1;
            else if (rc == DLOCK_ETIMEDOUT)
                goto timed_out;
            else
                notify = 0; /* fall back to polling */
            continue;
        }
        int64_t now = dlock__now_us();
        if (now >= deadline)
            goto timed_out;

        int64_t ttl_us = a.holder_ttl_ms >= 0 ? a.holder_ttl_ms * 1000 + 1000 : DLOCK__NEVER;
        int64_t until;
        if (a.queued) {
            queued = 1;
            dlock__board_queued(&c->board, l->token, sent);
            if (!on_renewer) {
                /* Not on the renewer now: its fields are ours to set. */
                l->lease.waiter = 1;
                l->lease.wait_id = w.wait_id;
                l->lease.lease_ms = lease_ms;
                l->lease.renew = 0;
                l->lease.valid_until_us = DLOCK__NEVER;
                l->lease.due_us = sent + c->cfg.waiter_lease_ms * 1000 / 3;
                rc = dlock__renewer_add(&c->renewer, &l->lease);
                if (rc != DLOCK_OK)
                    goto give_up;
                on_renewer = 1;
            }
            /* Woken by the hand-over; the holder's lease bounds the wait
             * in case the wake-up is lost. */
            until = ttl_us == DLOCK__NEVER ? now + lease_ms * 1000 : now + ttl_us;
        } else {
            int64_t step = poll_us + jitter_us(poll_us / 2);
            poll_us = poll_us * 2 > 64000 ? 64000 : poll_us * 2;
            until = now + (step < ttl_us ? step : ttl_us);
        }
        if (until > deadline)
            until = deadline;

        if (!on_board) {
            /* polling steps are short (<= 64 ms): a cancel is seen soon */
            dlock__sleep_until(until);
            continue;
        }
        enum dlock__wake wake = c->ops->wait(c->be, l->bl, &w, until);
        if (wake != DLOCK__WAKE_GRANTED)
            continue;

        /* Handed over. The grant happened after the server last said we
         * were queued; count validity from then. If that is long ago,
         * confirm with an extend so the caller gets a full lease. */
        int64_t since = w.queued_at_us;
        uint64_t fence = w.fence;
        if (on_renewer) {
            dlock__renewer_remove(&c->renewer, &l->lease, NULL, 0);
            on_renewer = 0;
        }
        dlock__board_leave(&c->board, &w);
        on_board = 0;
        if (validity_end(since, lease_ms) - dlock__now_us() < lease_ms * 1000 / 2) {
            since = dlock__now_us();
            rc = c->ops->extend(c->be, l->bl, l->token, lease_ms, 0, op_deadline(l));
            if (rc == DLOCK_ELOST)
                continue; /* taken from us already (forced unlock): wait on */
            if (rc != DLOCK_OK)
                goto give_up;
        }
        rc = dlock__lock_start_holding(l, fence, lease_ms, renew, since);
        goto done;
    }

timed_out:
    rc = dlock__fail(DLOCK_ETIMEDOUT, "lock '%s' is still held by someone else after %lld ms",
                     l->name, (long long) ((dlock__now_us() - start) / 1000));
give_up:
    if (on_board || on_renewer) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dlock_errmsg());
        cancel_wait(l);
        dlock__fail(rc, "%s", detail);
    }
done:
    if (on_renewer)
        dlock__renewer_remove(&c->renewer, &l->lease, NULL, 0);
    if (on_board)
        dlock__board_leave(&c->board, &w);
    if (local)
        dlock__lq_leave(c->lq, &ticket);
    return rc;
}

int dlock__lock_take(dlock_lock *l, int64_t deadline_us, int64_t lease_ms, int renew)
{
    int rc = dlock__lock_take_loss(l);

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds > 0)
        return reenter(l, lease_ms, renew);
    return take(l, deadline_us, lease_ms, renew);
}

static int acquire_entry(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, int renew)
{
    int rc = enter(l);

    if (rc != DLOCK_OK)
        return rc;
    if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
        return leave(l, dlock__fail(DLOCK_EINVAL,
                                    "wait of %lld ms: want >= 0 or "
                                    "DLOCK_WAIT_FOREVER",
                                    (long long) wait_ms));
    if (lease_ms <= 0)
        return leave(l, dlock__fail(DLOCK_EINVAL, "lease of %lld ms: a lease must be > 0",
                                    (long long) lease_ms));
    if (l->nmembers > 0)
        return leave(l, dlock__multi_acquire(l, wait_ms, lease_ms, renew));
    int64_t deadline = wait_ms == 0  ? 0
                       : wait_ms < 0 ? DLOCK__NEVER
                                     : dlock__deadline_after_ms(dlock__now_us(), wait_ms);
    return leave(l, dlock__lock_take(l, deadline, lease_ms, renew));
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

/* ---------------------------------------------------------------- release */

int dlock__lock_give(dlock_lock *l, int all)
{
    dlock_client *c = l->client;
    int rc = dlock__lock_take_loss(l);

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    if (l->holds > 1 && !all) {
        l->holds--; /* an inner hold: the lock stays held */
        return DLOCK_OK;
    }
    rc = c->ops->release(c->be, l->bl, l->token, op_deadline(l));
    if (rc == DLOCK_OK) {
        stop_holding(l);
        return DLOCK_OK;
    }
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_ELOST) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dlock_errmsg());
        stop_holding(l);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost before the release: %s", l->name,
                           detail);
    }
    /* Unknown outcome: stop renewing so that, if the release did not
     * happen, the lock still ends with its lease. A retry may succeed. */
    dlock__renewer_update(&c->renewer, &l->lease, 0, 0, 0);
    return rc;
}

static int release(dlock_lock *l, int all)
{
    return l->nmembers > 0 ? dlock__multi_release(l, all) : dlock__lock_give(l, all);
}

int dlock_release(dlock_lock *l)
{
    int rc = enter(l);
    return rc != DLOCK_OK ? rc : leave(l, release(l, 0));
}

void dlock_lock_free(dlock_lock *l)
{
    if (l == NULL)
        return;
    if (enter(l) == DLOCK_OK) {
        if (l->holds > 0)
            release(l, 1);
        stop_holding(l);
        leave(l, DLOCK_OK);
    }
    dlock__lock_unref(l);
}

void dlock_lock_detach(dlock_lock *l)
{
    if (l == NULL)
        return;
    if (enter(l) == DLOCK_OK) {
        if (l->nmembers > 0)
            dlock__multi_forget(l);
        stop_holding(l);
        leave(l, DLOCK_OK);
    }
    dlock__lock_unref(l);
}

/* ---------------------------------------------------------------- lease */

static int extend_one(dlock_lock *l, int64_t lease_ms)
{
    int rc = dlock__lock_take_loss(l);
    int64_t sent;

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    sent = dlock__now_us();
    rc = l->client->ops->extend(l->client->be, l->bl, l->token, lease_ms, 0, op_deadline(l));
    if (rc == DLOCK_ELOST) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dlock_errmsg());
        stop_holding(l);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, detail);
    }
    if (rc == DLOCK_OK)
        dlock__renewer_update(&l->client->renewer, &l->lease, 0, lease_ms,
                              validity_end(sent, lease_ms));
    return rc;
}

static int keepalive_one(dlock_lock *l)
{
    int rc = dlock__lock_take_loss(l);

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    dlock__renewer_update(&l->client->renewer, &l->lease, 1, l->client->cfg.lease_ms, 0);
    return DLOCK_OK;
}

int dlock__lock_extend(dlock_lock *l, int64_t lease_ms, int keepalive)
{
    return keepalive ? keepalive_one(l) : extend_one(l, lease_ms);
}

int dlock_extend(dlock_lock *l, int64_t lease_ms)
{
    int rc = enter(l);

    if (rc != DLOCK_OK)
        return rc;
    if (lease_ms <= 0)
        return leave(l, dlock__fail(DLOCK_EINVAL, "lease of %lld ms: a lease must be > 0",
                                    (long long) lease_ms));
    return leave(l,
                 l->nmembers > 0 ? dlock__multi_extend(l, lease_ms, 0) : extend_one(l, lease_ms));
}

int dlock_keepalive(dlock_lock *l)
{
    int rc = enter(l);

    if (rc != DLOCK_OK)
        return rc;
    return leave(l, l->nmembers > 0 ? dlock__multi_extend(l, 0, 1) : keepalive_one(l));
}

int dlock_cancel(dlock_lock *l)
{
    if (l == NULL)
        return dlock__fail(DLOCK_EINVAL, "lock handle is NULL");
    atomic_store(&l->cancel, 1);
    dlock__board_recheck(&l->client->board, l->token);
    if (l->client->lq != NULL)
        dlock__lq_wake(l->client->lq);
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- state */

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

/* ---------------------------------------------------------------- operators */

int dlock_lock_adopt(dlock_client *c, const char *name, const char *token, unsigned flags,
                     dlock_lock **out)
{
    dlock__lock_spec spec;
    dlock_status st;
    int64_t sent;
    int rc;

    dlock__clear_error();
    if (token == NULL || token[0] == '\0' || strlen(token) > DLOCK__TOKEN_MAX)
        return dlock__fail(DLOCK_EINVAL, "owner token must be 1..%d characters", DLOCK__TOKEN_MAX);
    for (const char *p = token; *p != '\0'; p++) {
        if ((unsigned char) *p <= ' ' || *p == 0x7f)
            return dlock__fail(DLOCK_EINVAL, "owner token contains a space or control "
                                             "character");
    }
    rc = spec_of(flags, &spec);
    if (rc == DLOCK_OK && spec.kind == DLOCK__READ)
        rc = dlock__fail(DLOCK_ENOTSUP, "a read hold cannot be adopted (only an exclusive one)");
    if (rc == DLOCK_OK)
        rc = dlock__lock_new(c, name, &spec, out);
    if (rc != DLOCK_OK)
        return rc;
    dlock_lock *l = *out;
    snprintf(l->token, sizeof l->token, "%s", token);
    sent = dlock__now_us();
    rc = c->ops->query(c->be, l->bl, &st, op_deadline(l));
    if (rc == DLOCK_OK && strcmp(st.owner, token) != 0)
        rc = dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is %s", name,
                         st.held ? "held under another owner token" : "not held");
    if (rc == DLOCK_OK && st.lease_ms <= 0)
        rc = dlock__fail(DLOCK_ENOTSUP, "lock '%s' has no lease on the server", name);
    if (rc == DLOCK_OK)
        rc = dlock__lock_start_holding(l, st.last_fence, st.lease_ms, 0, sent);
    if (rc != DLOCK_OK) {
        dlock__lock_unref(l);
        *out = NULL;
    }
    return rc;
}

static int with_temp_lock(dlock_client *c, const char *name, unsigned flags, dlock_status *st)
{
    dlock__lock_spec spec;
    void *bl = NULL;
    int64_t deadline;
    int rc;

    dlock__clear_error();
    if (c == NULL)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    if (flags == DLOCK_SEMAPHORE) {
        memset(&spec, 0, sizeof spec);
        spec.kind = DLOCK__SEMAPHORE;
        rc = DLOCK_OK;
    } else {
        rc = spec_of(flags, &spec);
    }
    if (rc == DLOCK_OK)
        rc = dlock__check_name(name);
    if (rc == DLOCK_OK)
        rc = c->ops->lock_new(c->be, name, &spec, &bl);
    if (rc != DLOCK_OK)
        return rc;
    deadline = dlock__now_us() + c->cfg.command_timeout_ms * 1000;
    if (st != NULL)
        rc = c->ops->query(c->be, bl, st, deadline);
    else
        rc = c->ops->force_unlock(c->be, bl, deadline);
    c->ops->lock_free(c->be, bl);
    return rc;
}

int dlock_query(dlock_client *c, const char *name, unsigned flags, dlock_status *out)
{
    if (out == NULL)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    memset(out, 0, sizeof *out);
    return with_temp_lock(c, name, flags, out);
}

int dlock_force_unlock(dlock_client *c, const char *name, unsigned flags)
{
    return with_temp_lock(c, name, flags, NULL);
}
