/* SPDX-License-Identifier: MIT */
/* acquire.c - taking a lock: one attempt, or the wait loop around it.
 *
 * Each attempt asks the store once (backend.h says what it may answer):
 *
 *   TAKEN   the caller holds the lock, by its own lease or by a session;
 *   HELD    not taken, not queued: with a wait budget, either poll (a
 *           backoff bounded by the holder's lease), make the store's
 *           wake-ups flow first (prepare_wait) and try again, or try again
 *           at once (a store that waited inside the server for a slice);
 *   QUEUED  the caller has a place in the store's queue and parks on the
 *           client's board until the store wakes it: with the lock itself
 *           (GRANTED, a hand-over) or with news to look at (RECHECK). Each
 *           park is bounded by the holder's lease, so a lost wake-up costs at
 *           most that. A place kept by heartbeats sits on the renewer.
 *
 * Every attempt that may queue carries a fresh wait id, and the store names
 * it in its hand-over notice: a notice meant for an earlier attempt (one
 * that arrives late, after the place it was for had lapsed and the caller
 * had queued again) is ignored, so a stale grant is never taken for a fresh
 * one. A grant's validity is counted from the send time of the last attempt
 * the store answered "queued" for that same id, which came before the
 * grant; when that is long ago, the hold is confirmed with the store first.
 *
 * A wait rides out a store that stops answering for a while (a restart, a
 * failover): the attempt is repeated with a growing, jittered delay, within
 * the budget and for at most the client's unreachable_wait from the first
 * failure. A store never reached since the client opened (a wrong address,
 * a server that is down) gets a moment only, FIRST_CONTACT_MS, enough for a
 * restart under way: it is reported within seconds, not after the budget. A
 * grant whose reply came after its lease could have run out counts as such
 * a failure (the store does not answer in time), never as a reason to try
 * again at once. The other paths that go round again without a wait of
 * their own (the store asks for it; a hand-over gone before it was
 * confirmed; a wake-up with nothing for us) go at once the first time and
 * after a growing delay when they repeat: no path of the loop sends without
 * a floor. dlock_cancel() (handle.c) ends the wait in progress (or the next
 * one), also one that was just granted: the lock is passed on. */
#include "lock.h"

#include "../base/clock.h"
#include "../base/error.h"
#include "../base/random.h"

#include <stdio.h>
#include <string.h>

#define POLL_MIN_US        1000
#define POLL_MAX_US        64000
#define UNREACHABLE_MIN_US 50000
#define UNREACHABLE_MAX_US 1000000
#define LAST_TRY_US        20000 /* the last try of an unreachable store, before the end */
#define FIRST_CONTACT_MS   1000  /* how long a store never reached is tried */
#define BLOCKED_SAY_US     50000 /* a request blocked in the store this long: waiting */
#define AGAIN_MIN_US       1000  /* the floor of a repeated quick retry, growing to: */
#define AGAIN_MAX_US       250000
#define CANCEL_SLICE_US    50000 /* how soon a sleeping waiter sees a cancel */

/* ---------------------------------------------------------------- cancel */

static int lq_cancelled(void *arg)
{
    return dlock__lock_cancelled(arg);
}

/* Sleeps until `until`, waking early if the wait is cancelled. */
static void pause_until(dlock_lock *l, int64_t until)
{
    for (;;) {
        int64_t now = dlock__now_us();
        if (now >= until || dlock__lock_cancelled(l))
            return;
        dlock__sleep_until(until - now > CANCEL_SLICE_US ? now + CANCEL_SLICE_US : until);
    }
}

/* ---------------------------------------------------------------- helpers */

void dlock__lock_back_off(dlock_lock *l, int64_t *step_us, int64_t max_us, int64_t deadline)
{
    int64_t until = dlock__now_us() + *step_us + dlock__random_below(*step_us / 2);
    *step_us = *step_us * 2 > max_us ? max_us : *step_us * 2;
    pause_until(l, until < deadline ? until : deadline);
}

/* " as a semaphore, and a mutex was asked for: ..." when the name is
 * held as another kind of lock than l's, else "". */
static const char *other_kind(const dlock_lock *l, enum dlock__held_as held_as, char *buf,
                              size_t size)
{
    static const char *const as[] = {
        [DLOCK__HELD_AS_MUTEX] = "a mutex",
        [DLOCK__HELD_AS_SIMPLE] = "an interop key (--simple)",
        [DLOCK__HELD_AS_RW] = "a read-write lock",
        [DLOCK__HELD_AS_SEMAPHORE] = "a semaphore",
    };
    const char *mine = l->spec.simple                     ? "an interop key (--simple)"
                       : l->spec.kind == DLOCK__READ      ? "the read lock"
                       : l->spec.kind == DLOCK__WRITE     ? "the write lock"
                       : l->spec.kind == DLOCK__SEMAPHORE ? "a semaphore"
                                                          : "a mutex";
    if (held_as == DLOCK__HELD_AS_SAME || (unsigned) held_as >= sizeof as / sizeof as[0]) {
        buf[0] = '\0';
        return buf;
    }
    snprintf(buf, size,
             " as %s, and %s was asked for: one name is one lock, so every user of a name "
             "must ask for the same kind",
             as[held_as], mine);
    return buf;
}

static int busy_error(const dlock_lock *l, int64_t ttl_ms, enum dlock__held_as held_as,
                      const char *why)
{
    char as[192];
    if (why != NULL && ttl_ms >= 0)
        return dlock__fail(DLOCK_EBUSY, "lock '%s' is not free yet, for %lld ms more: %s", l->name,
                           (long long) ttl_ms, why);
    if (why != NULL)
        return dlock__fail(DLOCK_EBUSY, "lock '%s' is not free yet: %s", l->name, why);
    const char *what = held_as != DLOCK__HELD_AS_SAME     ? "is held"
                       : l->spec.kind == DLOCK__SEMAPHORE ? "has too few permits free"
                                                          : "is held by someone else";
    other_kind(l, held_as, as, sizeof as);
    if (ttl_ms >= 0)
        return dlock__fail(DLOCK_EBUSY,
                           "lock '%s' %s%s (its lease has %lld ms left unless renewed)", l->name,
                           what, as, (long long) ttl_ms);
    if (ttl_ms == DLOCK__TTL_NONE)
        return dlock__fail(DLOCK_EBUSY, "lock '%s' %s%s, with no lease (it never ends by itself)",
                           l->name, what, as);
    return dlock__fail(DLOCK_EBUSY, "lock '%s' %s%s", l->name, what, as);
}

/* Leaves the store's queue after giving up (passing on a lock handed to
 * it meanwhile), keeping the error at hand; asking until `until`. */
static void leave_queue_by(dlock_lock *l, int64_t until)
{
    dlock__saved_error saved;
    dlock__save_error(&saved);
    l->client->backend->cancel(l->client->store, l->sl, l->token, until);
    dlock__restore_error(&saved);
}

/* The same, for the wait that ends at deadline. */
static void leave_queue(dlock_lock *l, int64_t deadline)
{
    leave_queue_by(l, dlock__lock_cleanup_deadline(l, deadline));
}

/* Gives back a grant this wait will not use (cancelled, or its lease ran
 * out before the reply came). */
static void give_back(dlock_lock *l, int64_t deadline)
{
    dlock__saved_error saved;
    dlock__save_error(&saved);
    l->client->backend->release(l->client->store, l->sl, l->token, 0,
                                dlock__lock_cleanup_deadline(l, deadline));
    dlock__restore_error(&saved);
}

/* Re-entry: the handle already holds the lock. The count is the handle's;
 * the store is asked only to confirm the token still holds it and to make
 * the lease at least lease_ms, as a request of the wait (or try) that ends
 * at deadline. */
static int reenter(dlock_lock *l, int64_t deadline, int64_t lease_ms, int renew)
{
    dlock_client *c = l->client;
    int64_t sent = dlock__now_us();
    int rc = c->backend->extend(c->store, l->sl, l->token, l->lease.fence, lease_ms, 1,
                                dlock__lock_request_deadline(l, deadline));

    if (rc == DLOCK_ELOST) {
        dlock__lock_stop_holding(l);
        DLOCK__LOG(&c->log, DLOCK_LOG_ERROR,
                   "lock '%s' lost: a re-entry found it gone from the store", l->name);
        return dlock__fail(DLOCK_ELOST,
                           "lock '%s' was lost: the store no longer has it under "
                           "this owner",
                           l->name);
    }
    if (rc != DLOCK_OK)
        return rc;
    l->holds++;
    DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "lock '%s' entered again (%u holds, fence %llu)", l->name,
               l->holds, (unsigned long long) l->fence);
    if (l->lease.session != NULL)
        return DLOCK_OK; /* lives by its session: nothing to change */
    /* The lease now runs at least lease_ms from `sent`; once renewed, a
     * lock stays renewed until released. */
    int64_t until = dlock__validity_end(sent, lease_ms);
    if (until < dlock__renewer_valid_until(&c->renewer, &l->lease))
        until = 0;
    if (l->lease.renew || renew)
        dlock__renewer_update(&c->renewer, &l->lease, 1, c->cfg.lease_ms, until);
    else if (until != 0)
        dlock__renewer_update(&c->renewer, &l->lease, 0, lease_ms, until);
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- the wait loop */

/* State of one take() across its attempts. */
typedef struct take_state {
    dlock__waiter w; /* on the board while attempts may queue */
    int on_board;
    int on_renewer;              /* the lease entry keeps the queue place (heartbeats) */
    int queued;                  /* an attempt of this wait was queued */
    int placed;                  /* ...or may have been: one that could queue was not taken */
    int local;                   /* holds the local queue's turn */
    int held_here;               /* the lock was found held: the local queue decides turns */
    int poll_only;               /* the store cannot wake waiters of this lock */
    int64_t poll_us;             /* next polling step */
    int64_t unreachable_us;      /* next delay after an unreachable store */
    int64_t outage_since;        /* send time of the outage's first failed attempt, or 0 */
    int64_t again_us;            /* floor of the next quick retry (pace) */
    int waited;                  /* found held: the caller waits (for the log) */
    int unreachable;             /* the store was unreachable: tried again (for the log) */
    enum dlock__held_as held_as; /* the last attempt found another kind holding the name */
    const char *held_why;        /* ... or the store's reason to count it held (attempt) */
    dlock__lq_ticket ticket;
    /* the call, as take() was asked */
    int64_t deadline; /* the wait's end: DLOCK__NEVER for none, 0 for a try */
    int64_t lease_ms;
    int renew;
    int waits;     /* deadline != 0: the caller waits while the lock is held */
    int64_t start; /* when the call began (for messages) */
} take_state;

/* The next polling step: short, growing, jittered. */
static int64_t poll_step(take_state *st)
{
    int64_t step = st->poll_us + dlock__random_below(st->poll_us / 2);
    st->poll_us = st->poll_us * 2 > POLL_MAX_US ? POLL_MAX_US : st->poll_us * 2;
    return step;
}

/* The queue place is kept by the renewer's heartbeats, for attempt wait_id. */
static int keep_place(dlock_lock *l, take_state *st, int64_t lease_ms, int64_t sent)
{
    dlock_client *c = l->client;
    if (st->on_renewer)
        dlock__renewer_remove(&c->renewer, &l->lease, NULL, 0);
    l->lease.kind = DLOCK__RENEW_WAITER;
    l->lease.wait_id = st->w.wait_id;
    l->lease.lease_ms = lease_ms;
    l->lease.session = NULL;
    l->lease.renew = 0;
    l->lease.valid_until_us = DLOCK__NEVER;
    l->lease.due_us = sent + c->cfg.waiter_lease_ms * 1000 / 3;
    int rc = dlock__renewer_add(&c->renewer, &l->lease);
    st->on_renewer = rc == DLOCK_OK;
    return rc;
}

static void drop_place(dlock_lock *l, take_state *st)
{
    if (st->on_renewer)
        dlock__renewer_remove(&l->client->renewer, &l->lease, NULL, 0);
    st->on_renewer = 0;
}

/* Before going round again at once after an attempt sent at `sent` that
 * came to nothing: the first time at once, then after a floor that doubles
 * (jittered) while the retries keep coming quickly; one that comes slowly
 * by itself starts the floor afresh. */
static void pace(dlock_lock *l, take_state *st, int64_t sent, int64_t deadline)
{
    if (dlock__now_us() - sent >= AGAIN_MAX_US) {
        st->again_us = 0;
        return;
    }
    if (st->again_us > 0) {
        int64_t until = sent + st->again_us + dlock__random_below(st->again_us / 2);
        pause_until(l, until < deadline ? until : deadline);
    }
    st->again_us = st->again_us == 0                 ? AGAIN_MIN_US
                   : st->again_us * 2 > AGAIN_MAX_US ? AGAIN_MAX_US
                                                     : st->again_us * 2;
}

enum ride { RIDE_AGAIN, RIDE_CANCELLED, RIDE_OVER };

/* After an attempt sent at `sent` that found the store unreachable (the
 * detail recorded): waits out the next delay and says RIDE_AGAIN, or, past
 * what the outage is given, RIDE_OVER with the detail put in context (or
 * RIDE_CANCELLED). The outage runs from its first failed attempt; it is
 * given unreachable_wait, or FIRST_CONTACT_MS at most if the store never
 * answered this client, and never more than the wait's budget. */
static enum ride ride_outage(dlock_lock *l, take_state *st, int64_t sent, int64_t deadline)
{
    dlock_client *c = l->client;
    int reached = dlock__client_reached(c);
    int64_t given_ms = c->cfg.unreachable_wait_ms;

    /* another kind of server at the URL's address: said at once (the
     * detail says what answered), neither retried nor called unreached */
    if (!reached && dlock__client_wrong_store(c))
        return RIDE_OVER;
    if (!reached && (given_ms < 0 || given_ms > FIRST_CONTACT_MS))
        given_ms = FIRST_CONTACT_MS;
    if (st->outage_since == 0)
        st->outage_since = sent;
    int64_t over =
        given_ms < 0 ? DLOCK__NEVER : dlock__deadline_after_ms(st->outage_since, given_ms);
    int64_t end = over < deadline ? over : deadline;
    if (dlock__now_us() + LAST_TRY_US < end) {
        /* The store may be back soon (a restart, a failover): try again, the
         * last time just before the end. */
        int64_t until = sent + st->unreachable_us + dlock__random_below(st->unreachable_us / 4);
        st->unreachable_us = st->unreachable_us * 2 > UNREACHABLE_MAX_US ? UNREACHABLE_MAX_US
                                                                         : st->unreachable_us * 2;
        if (until > end - LAST_TRY_US)
            until = end - LAST_TRY_US;
        int64_t in_ms = (until - dlock__now_us()) / 1000; /* < 0: the request was slow */
        char bound[96] = "";
        if (!reached)
            snprintf(bound, sizeof bound, " (never reached yet: given %lld ms)",
                     (long long) given_ms);
        else if (over != DLOCK__NEVER && over <= deadline)
            snprintf(bound, sizeof bound, " (unreachable_wait: given %lld ms)",
                     (long long) given_ms);
        /* a warning once per outage, the retries after it at info */
        DLOCK__LOG(&c->log, st->unreachable ? DLOCK_LOG_INFO : DLOCK_LOG_WARN,
                   "lock '%s': %s; trying again in %lld ms%s", l->name, dlock_errmsg(),
                   (long long) (in_ms > 0 ? in_ms : 1), bound); /* at once: "in 1 ms", not 0 */
        st->unreachable = 1;
        pause_until(l, until);
        return RIDE_AGAIN;
    }
    /* The last try failed just before the end: the wait still takes its
     * time up to the end (a cancel ends it sooner). */
    pause_until(l, end);
    if (dlock__lock_cancelled(l))
        return RIDE_CANCELLED;
    int64_t for_ms = (dlock__now_us() - st->outage_since) / 1000;
    if (!reached)
        dlock__fail_context(DLOCK_EUNREACHABLE,
                            "lock '%s': the store was never reached (tried for %lld ms)", l->name,
                            (long long) for_ms);
    else if (over > deadline)
        dlock__fail_context(DLOCK_EUNREACHABLE,
                            "lock '%s': the store was still unreachable when the wait ran out",
                            l->name);
    else
        dlock__fail_context(DLOCK_EUNREACHABLE,
                            "lock '%s': the store stayed unreachable for %lld ms, past the "
                            "client's unreachable_wait of %lld ms",
                            l->name, (long long) for_ms, (long long) given_ms);
    return RIDE_OVER;
}

/* An attempt came to something (a grant held, or the lock found held):
 * the outage, if there was one, is over. */
static void outage_over(dlock_lock *l, take_state *st)
{
    st->unreachable_us = UNREACHABLE_MIN_US;
    st->outage_since = 0;
    if (st->unreachable) {
        st->unreachable = 0;
        DLOCK__LOG(&l->client->log, DLOCK_LOG_INFO, "lock '%s': %s answers again", l->name,
                   l->client->store->label);
    }
}

/* A hand-over arrived on the board: hold it. */
static int take_grant(dlock_lock *l, take_state *st, int64_t deadline, int64_t lease_ms, int renew)
{
    dlock_client *c = l->client;
    int64_t since = st->w.queued_at_us;
    uint64_t fence = st->w.fence;

    drop_place(l, st);
    if (dlock__lock_cancelled(l)) {
        /* Cancelled just as it was handed over: pass it on. */
        leave_queue(l, deadline);
        DLOCK__LOG(&c->log, DLOCK_LOG_INFO,
                   "wait for lock '%s' cancelled as it was handed over: passed on", l->name);
        return dlock__fail(DLOCK_ECANCELED, "wait for lock '%s' cancelled", l->name);
    }
    /* The grant came after the store last said this attempt was queued
     * (its attempt or a heartbeat): count validity from then. A hand-over
     * carries the waiter's place, not a whole lease (backend.h): at least
     * the shorter of the lease and the waiter lease from then, until the
     * holder renews it. If too little of that is left, or the send time is
     * unknown, or a fixed lease must be made whole, confirm with the store
     * now (which sets the whole lease). */
    int64_t granted_ms = lease_ms < c->cfg.waiter_lease_ms ? lease_ms : c->cfg.waiter_lease_ms;
    if (since == 0 || (!renew && granted_ms < lease_ms) ||
        dlock__validity_end(since, granted_ms) - dlock__now_us() < granted_ms * 1000 / 2) {
        since = dlock__now_us();
        granted_ms = lease_ms;
        int rc = c->backend->extend(c->store, l->sl, l->token, fence, lease_ms, 0,
                                    dlock__lock_request_deadline(l, deadline));
        if (rc != DLOCK_OK)
            return rc;
    }
    int rc = dlock__lock_start_handed(l, fence, lease_ms, granted_ms, renew, since);
    return rc == DLOCK_OK && l->parent == NULL ? dlock__lock_settle(l) : rc;
}

/* ---------------------------------------------------------------- take(), step by step */

/* take() (at the end) goes round attempt() until a step settles the wait,
 * then finish()es. One round, in order: take_turn (the local queue),
 * onto_board, send_attempt, and by the store's answer hold_taken (TAKEN),
 * wait_held (HELD) or wait_queued (QUEUED, then a hand-over). */

/* What a step of take() leaves it to do next. */
enum step {
    STEP_NEXT,      /* go on with this attempt */
    STEP_AGAIN,     /* go round again: another attempt */
    STEP_DONE,      /* return rc */
    STEP_GIVE_UP,   /* leave the store's queue (passing on what may be ours), return rc */
    STEP_CANCELLED, /* the wait was cancelled */
    STEP_TIMED_OUT, /* the budget ran out, the lock still held */
};

/* With the local queue on, a thread waits in the store only in its turn,
 * and does not even try while another thread of this client waits for the
 * lock: the try would fail. */
static enum step take_turn(dlock_lock *l, take_state *st, int *rc)
{
    dlock_client *c = l->client;

    if (st->waits && !st->local && c->lq != NULL &&
        (st->held_here || dlock__lq_waiting(c->lq, (int) l->spec.kind, l->name) > 0)) {
        *rc = dlock__lq_enter(c->lq, (int) l->spec.kind, l->name, st->deadline, lq_cancelled, l,
                              &st->ticket);
        if (*rc == DLOCK_ETIMEDOUT)
            return STEP_TIMED_OUT;
        if (*rc != DLOCK_OK)
            return STEP_DONE;
        st->local = 1;
    }
    return STEP_NEXT;
}

/* Whether this attempt may queue in the store. If so, the waiter is on the
 * board before the request goes out, so that a hand-over overtaking the
 * reply is kept; under a fresh wait id. */
static int onto_board(dlock_lock *l, take_state *st)
{
    dlock_client *c = l->client;
    int may_queue = st->waits && !st->poll_only && (st->local || c->lq == NULL);

    if (may_queue) {
        if (!st->on_board) {
            st->w.wait_id = dlock__client_wait_id(c);
            dlock__board_enter(&c->board, &st->w);
            st->on_board = 1;
        } else {
            dlock__board_rename(&c->board, &st->w, dlock__client_wait_id(c));
        }
    }
    return may_queue;
}

/* What the log calls l's kind before its name: "read lock 'x'". */
static const char *kind_noun(const dlock_lock *l)
{
    return l->spec.simple                     ? "lock"
           : l->spec.kind == DLOCK__READ      ? "read lock"
           : l->spec.kind == DLOCK__WRITE     ? "write lock"
           : l->spec.kind == DLOCK__SEMAPHORE ? "semaphore"
                                              : "lock";
}

/* Says once that the wait has begun, and how it waits. */
static void say_waiting(dlock_lock *l, take_state *st, const char *how)
{
    if (st->waited)
        return;
    st->waited = 1;
    DLOCK__LOG(&l->client->log, DLOCK_LOG_INFO, "%s '%s' is held by someone else: waiting (%s)",
               kind_noun(l), l->name, how);
}

/* An attempt out to the store, as its cancelled() sees it. */
typedef struct attempt_out {
    dlock_lock *l;
    take_state *st;
    int64_t sent;
    int64_t asked; /* when cancelled() was first asked (0: not yet) */
} attempt_out;

/* attempt.cancelled: only a store that blocks in the server asks it, at
 * least every 50 ms while it does (backend.h). Asked again 50 ms after its
 * first ask, the request still out, it says that the wait has begun (dlock
 * -v), rather than when the slice ends, and a grant that came at once says
 * nothing. Counted from the first ask, not from the send: a store asks
 * once its blocking request is out, and what came before it (a connection
 * made, slow under a sanitizer or a loaded machine) is no wait for a
 * holder (it made a free name look held, "waiting (blocked in the
 * store)", then "acquired after a wait"). */
static int blocked_cancelled(void *arg)
{
    attempt_out *o = arg;
    int64_t now = dlock__now_us();
    if (o->asked == 0)
        o->asked = now;
    if (!o->st->waited && now - o->asked >= BLOCKED_SAY_US)
        say_waiting(o->l, o->st, "blocked in the store");
    return dlock__lock_cancelled(o->l);
}

/* Asks the store once (backend.h: acquire), noting when the request was
 * sent and when it was answered. */
static int send_attempt(dlock_lock *l, take_state *st, int may_queue, dlock__attempt *a,
                        int64_t *sent, int64_t *answered)
{
    dlock_client *c = l->client;
    attempt_out out = {l, st, dlock__now_us(), 0};

    *a = (dlock__attempt){.token = l->token,
                          .lease_ms = st->lease_ms,
                          .fixed = !st->renew,
                          .wait = may_queue,
                          .again = st->queued,
                          .wait_id = st->w.wait_id,
                          .deadline_us = dlock__lock_request_deadline(l, st->deadline),
                          .wait_until_us = st->deadline,
                          .cancelled = blocked_cancelled,
                          .cancel_arg = &out,
                          .holder_ttl_ms = -1};
    *sent = out.sent;
    int rc = c->backend->acquire(c->store, l->sl, a);
    *answered = dlock__now_us();
    if (rc == DLOCK_OK && a->outcome == DLOCK__QUEUED)
        st->queued = 1;
    if (may_queue && (rc != DLOCK_OK || a->outcome != DLOCK__TAKEN))
        st->placed = 1;
    return rc;
}

/* The store answered TAKEN: hold the lock (settled, unless a member's). */
static enum step hold_taken(dlock_lock *l, take_state *st, const dlock__attempt *a, int64_t sent,
                            int64_t answered, int *rc)
{
    dlock_client *c = l->client;

    drop_place(l, st); /* the entry now serves the hold */
    /* Taken at once: no place of this acquisition's token can be in the
     * store's queue to be served again (backend.h, release), so its
     * renewals and release check nothing (a fence of 0), as they did. */
    *rc = dlock__lock_start_holding(l, a->fence, st->placed ? a->fence : 0, a->session,
                                    st->lease_ms, st->renew, sent);
    int late = *rc == DLOCK_ELOST;
    if (*rc == DLOCK_OK && l->parent == NULL)
        *rc = dlock__lock_settle(l); /* lost before the caller had it: wait on */
    if (*rc == DLOCK_OK)
        outage_over(l, st);
    if (*rc == DLOCK_OK)
        DLOCK__LOG(&c->log, st->waited ? DLOCK_LOG_INFO : DLOCK_LOG_DEBUG,
                   "%s '%s' acquired%s (fence %llu, %s)", kind_noun(l), l->name,
                   st->waited ? " after a wait" : "", (unsigned long long) l->fence,
                   a->session != NULL ? "held by its session"
                   : st->renew        ? "renewed"
                                      : "fixed lease");
    if (*rc == DLOCK_ELOST) {
        /* the store's reply came after the lease it granted could
         * have run out (late), or the grant was lost (its session
         * ended) before it was the caller's: nothing to hold on to,
         * and as good as no answer. A store that is that slow is
         * tried again as an unreachable one is, never at once. */
        give_back(l, st->deadline);
        if (late)
            *rc = dlock__fail(DLOCK_EUNREACHABLE,
                              "%s answered after %lld ms, when the lease of %lld ms it "
                              "granted could have run out",
                              c->store->label, (long long) ((answered - sent) / 1000),
                              (long long) st->lease_ms);
        else
            *rc = DLOCK_EUNREACHABLE;
        if (st->waits) {
            enum ride ride = ride_outage(l, st, sent, st->deadline);
            if (ride == RIDE_AGAIN)
                return STEP_AGAIN;
            if (ride == RIDE_CANCELLED)
                return STEP_CANCELLED;
        }
    }
    return STEP_DONE;
}

/* The store answered HELD (not queued): try again at once (it waited for a
 * slice), after making its wake-ups flow, or after a polling step. */
static void wait_held(dlock_lock *l, take_state *st, const dlock__attempt *a, int64_t sent,
                      int64_t now, int64_t ttl_us)
{
    dlock_client *c = l->client;
    const dlock__backend *b = c->backend;

    if (a->next == DLOCK__NEXT_RETRY) {
        if (a->news)
            st->again_us = 0; /* a release: at once, and the floor afresh */
        else
            pace(l, st, sent, st->deadline);
        return;
    }
    if (a->next == DLOCK__NEXT_PREPARE && !st->poll_only) {
        int rc = b->prepare_wait != NULL ? b->prepare_wait(c->store, l->sl, st->deadline)
                                         : DLOCK_ENOTSUP;
        if (rc != DLOCK_OK)
            st->poll_only = 1; /* no wake-ups for us: poll */
        pace(l, st, sent, st->deadline);
        return;
    }
    /* Poll: a short, growing, jittered step, bounded by the lease. */
    int64_t step = poll_step(st);
    int64_t until = now + (step < ttl_us ? step : ttl_us);
    pause_until(l, until < st->deadline ? until : st->deadline);
}

/* The store answered QUEUED: parked until the store wakes us, bounded by
 * the holder's lease in case the wake-up is lost; a hand-over is held. */
static enum step wait_queued(dlock_lock *l, take_state *st, const dlock__attempt *a, int64_t sent,
                             int64_t now, int64_t ttl_us, int *rc)
{
    dlock_client *c = l->client;
    const dlock__backend *b = c->backend;

    dlock__board_queued(&c->board, l->token, st->w.wait_id, sent);
    if (a->keep_place) {
        *rc = keep_place(l, st, st->lease_ms, sent);
        if (*rc != DLOCK_OK)
            return STEP_GIVE_UP;
    }
    int64_t until = ttl_us == DLOCK__NEVER ? now + st->lease_ms * 1000 : now + ttl_us;
    if (a->held_as != DLOCK__HELD_AS_SAME) {
        /* Queued behind another kind of lock of the name: that kind's
         * release tells this one nothing, so look again on the polling
         * period (the place keeps newcomers of that kind behind us). */
        int64_t step = poll_step(st);
        if (now + step < until)
            until = now + step;
    }
    if (until > st->deadline)
        until = st->deadline;
    enum dlock__wake wake = b->wait != NULL ? b->wait(c->store, l->sl, &st->w, until)
                                            : dlock__board_park(&c->board, &st->w, until);
    if (wake != DLOCK__WAKE_GRANTED) {
        /* slow by itself, unless the wake-ups flood; a release's news
         * is acted on at once (backend.h: next) */
        if (wake != DLOCK__WAKE_RECHECK || a->next != DLOCK__NEXT_RETRY)
            pace(l, st, sent, st->deadline);
        return STEP_AGAIN;
    }
    dlock__board_leave(&c->board, &st->w);
    st->on_board = 0;
    *rc = take_grant(l, st, st->deadline, st->lease_ms, st->renew);
    if (*rc == DLOCK_ELOST) {
        DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG,
                   "lock '%s' was handed over but gone before it was confirmed: waiting on",
                   l->name);
        pace(l, st, sent, st->deadline);
        return STEP_AGAIN; /* taken from us already (expired, forced): wait on */
    }
    if (*rc == DLOCK_OK)
        DLOCK__LOG(&c->log, DLOCK_LOG_INFO,
                   "%s '%s' handed over by the store after a wait of %lld ms (fence %llu)",
                   kind_noun(l), l->name, (long long) ((dlock__now_us() - st->start) / 1000),
                   (unsigned long long) l->fence);
    if (*rc != DLOCK_OK && *rc != DLOCK_ECANCELED)
        return STEP_GIVE_UP; /* pass on what may be ours */
    return STEP_DONE;
}

/* One round of the wait loop: an attempt, and what its answer asks for. */
static enum step attempt(dlock_lock *l, take_state *st, int *rc)
{
    dlock_client *c = l->client;
    dlock__attempt a;
    int64_t sent, answered;

    if (st->waits && dlock__lock_cancelled(l))
        return STEP_CANCELLED;
    enum step step = take_turn(l, st, rc);
    if (step != STEP_NEXT)
        return step;
    int may_queue = onto_board(l, st);
    *rc = send_attempt(l, st, may_queue, &a, &sent, &answered);
    if (st->waits && dlock__lock_cancelled(l)) {
        /* cancelled while the request was out: whatever it did is
         * undone (a lock taken is passed on, a place left) */
        if (*rc == DLOCK_OK && a.outcome == DLOCK__TAKEN) {
            dlock__session_unref(a.session);
            give_back(l, st->deadline);
        }
        return STEP_CANCELLED;
    }
    if (*rc == DLOCK_EUNREACHABLE && st->waits) {
        /* a wait blocked in the store is silent until its slice ends */
        int64_t silent = a.due_us > sent && a.due_us < answered ? a.due_us : sent;
        enum ride ride = ride_outage(l, st, silent, st->deadline);
        if (ride == RIDE_AGAIN)
            return STEP_AGAIN;
        if (ride == RIDE_CANCELLED)
            return STEP_CANCELLED;
        return STEP_GIVE_UP;
    }
    if (*rc != DLOCK_OK)
        return STEP_GIVE_UP;
    if (a.outcome == DLOCK__TAKEN)
        return hold_taken(l, st, &a, sent, answered, rc);

    outage_over(l, st);
    if (!st->waits) {
        *rc = busy_error(l, a.holder_ttl_ms, a.held_as, a.held_why);
        return STEP_DONE;
    }
    if (!st->local && c->lq != NULL) {
        /* Within this client, one thread at a time waits in the store
         * for this lock; the others wait in the local queue, in order,
         * and try again in their turn. */
        st->held_here = 1;
        return STEP_AGAIN;
    }
    st->held_as = a.held_as;
    st->held_why = a.held_why;
    int64_t now = dlock__now_us();
    /* Said once the wait has begun: not while wake-ups are still being set
     * up for it (the attempt after that queues, and a newcomer is behind),
     * unless the budget is spent already (a first answer slower than the
     * wait: the lock was held, and the wait is over) */
    int preparing = a.outcome == DLOCK__HELD && a.next == DLOCK__NEXT_PREPARE && !st->poll_only;
    if (!preparing || now >= st->deadline)
        say_waiting(l, st,
                    a.outcome == DLOCK__QUEUED && a.next == DLOCK__NEXT_RETRY
                        ? "woken by the store when the holder lets go"
                    : a.outcome == DLOCK__QUEUED              ? "queued in the store"
                    : a.next == DLOCK__NEXT_RETRY             ? "blocked in the store"
                    : a.next == DLOCK__NEXT_POLL && a.in_line ? "in line in the store, polling"
                    : a.next == DLOCK__NEXT_POLL              ? "polling"
                                                              : "woken by the store");
    if (now >= st->deadline)
        return STEP_TIMED_OUT;
    int64_t ttl_us = a.holder_ttl_ms >= 0 ? a.holder_ttl_ms * 1000 + 1000 : DLOCK__NEVER;
    if (a.outcome == DLOCK__HELD) {
        wait_held(l, st, &a, sent, now, ttl_us);
        return STEP_AGAIN;
    }
    return wait_queued(l, st, &a, sent, now, ttl_us, rc);
}

/* How take() ends (step: the last one's outcome): the failure described
 * (cancelled, timed out), the store's queue left unless the wait is done,
 * and all it set up taken down. */
static int finish(dlock_lock *l, take_state *st, enum step step, int rc)
{
    dlock_client *c = l->client;

    if (step == STEP_CANCELLED) {
        rc = dlock__fail(DLOCK_ECANCELED, "wait for lock '%s' cancelled", l->name);
        DLOCK__LOG(&c->log, DLOCK_LOG_INFO, "wait for lock '%s' cancelled after %lld ms", l->name,
                   (long long) ((dlock__now_us() - st->start) / 1000));
    } else if (step == STEP_TIMED_OUT) {
        char as[192];
        if (st->held_why != NULL)
            rc = dlock__fail(DLOCK_ETIMEDOUT, "lock '%s' is still not free after %lld ms: %s",
                             l->name, (long long) ((dlock__now_us() - st->start) / 1000),
                             st->held_why);
        else if (st->held_as == DLOCK__HELD_AS_SAME && l->spec.kind == DLOCK__SEMAPHORE)
            /* the words of a try's refusal (busy_error): permits, not one holder */
            rc = dlock__fail(DLOCK_ETIMEDOUT,
                             "lock '%s' still has too few permits free after %lld ms", l->name,
                             (long long) ((dlock__now_us() - st->start) / 1000));
        else
            rc = dlock__fail(DLOCK_ETIMEDOUT, "lock '%s' is still held%s after %lld ms%s", l->name,
                             st->held_as != DLOCK__HELD_AS_SAME ? "" : " by someone else",
                             (long long) ((dlock__now_us() - st->start) / 1000),
                             other_kind(l, st->held_as, as, sizeof as));
        DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "%s", dlock_errmsg());
    }
    /* A store this client never reached has nothing of this wait to drop;
     * one that stayed unreachable to the end is given a moment only, as
     * long as a wait's last request (the request is sent all the same; the
     * entry's waiter lease ends it anyway). (Either way, before, a frozen
     * server cost one more command timeout after the verdict.) */
    if (step != STEP_DONE && (st->on_board || st->on_renewer || st->queued) &&
        dlock__client_reached(c)) {
        int64_t until = dlock__lock_cleanup_deadline(l, st->deadline);
        int64_t moment = dlock__now_us() + dlock__lock_past_wait_us(l);
        leave_queue_by(l, rc == DLOCK_EUNREACHABLE && until > moment ? moment : until);
    }
    drop_place(l, st);
    if (st->on_board)
        dlock__board_leave(&c->board, &st->w);
    if (st->local)
        dlock__lq_leave(c->lq, &st->ticket);
    return rc;
}

/* Takes the lock: attempt after attempt until one settles the wait. */
static int take(dlock_lock *l, int64_t deadline, int64_t lease_ms, int renew)
{
    take_state st = {.w = {.token = l->token},
                     .poll_us = POLL_MIN_US,
                     .unreachable_us = UNREACHABLE_MIN_US,
                     .deadline = deadline,
                     .lease_ms = lease_ms,
                     .renew = renew,
                     .waits = deadline != 0,
                     .start = dlock__now_us()};
    enum step step;
    int rc = DLOCK_OK;

    do
        step = attempt(l, &st, &rc);
    while (step == STEP_AGAIN);
    return finish(l, &st, step, rc);
}

int dlock__lock_take(dlock_lock *l, int64_t deadline_us, int64_t lease_ms, int renew)
{
    int rc = dlock__lock_take_loss(l);

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds > 0)
        return reenter(l, deadline_us, lease_ms, renew);
    return take(l, deadline_us, lease_ms, renew);
}
