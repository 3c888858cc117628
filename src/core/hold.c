/* SPDX-License-Identifier: MIT */
/* hold.c - a lock this handle holds: the lease on the renewer, giving it
 * up, extending and renewing it, and asking whether it is still held (of
 * the renewer, for dlock_lock_check in calls.c; of the store: verify). */
#include "lock.h"

#include "../base/clock.h"
#include "../base/error.h"

#include <stdio.h>
#include <string.h>

int64_t dlock__validity_end(int64_t sent_us, int64_t lease_ms)
{
    return sent_us + lease_ms * 1000 - dlock__drift_us(lease_ms);
}

/* DLOCK_ELOST (and nothing held) if the lease, counted from sent_us, could
 * be over already. */
static int start(dlock_lock *l, uint64_t fence, uint64_t checked, dlock__session *session,
                 int64_t lease_ms, int64_t granted_ms, int renew, int64_t sent_us)
{
    dlock__lease *e = &l->lease;

    l->holds = 1;
    dlock__lock_owner(l)->token_used = 1; /* the store holds it under the token */
    if (fence != 0)
        l->fence = fence;
    e->fence = checked; /* (0: not checked; never the last hold's) */
    e->kind = DLOCK__RENEW_HOLD;
    e->session = session;
    e->last_ok_us = sent_us;
    if (session != NULL) {
        /* Valid as long as the session: checked every third of its lease. */
        e->lease_ms = dlock__session_lease_ms(session);
        e->renew = 1;
        e->valid_until_us = DLOCK__NEVER;
        e->due_us = sent_us + e->lease_ms * 1000 / 3;
    } else {
        /* granted_ms until the first renewal, which sets lease_ms */
        e->lease_ms = lease_ms;
        e->renew = renew;
        e->valid_until_us = dlock__validity_end(sent_us, granted_ms);
        e->due_us = renew ? sent_us + granted_ms * 1000 / 3 : DLOCK__NEVER;
        if (e->valid_until_us <= dlock__now_us()) {
            /* the grant's lease could be over already: never a hold */
            l->holds = 0;
            return DLOCK_ELOST;
        }
    }
    int rc = dlock__renewer_add(&l->client->renewer, e);
    if (rc != DLOCK_OK) {
        dlock__renewer_remove(&l->client->renewer, e, NULL, 0); /* drops the session */
        l->holds = 0;
    } else if (e->renew) {
        dlock__client_check_lease(l->client, l->name, e->lease_ms); /* (a session's, or ours) */
    }
    return rc;
}

int dlock__lock_start_holding(dlock_lock *l, uint64_t fence, uint64_t checked,
                              dlock__session *session, int64_t lease_ms, int renew, int64_t sent_us)
{
    return start(l, fence, checked, session, lease_ms, lease_ms, renew, sent_us);
}

int dlock__lock_start_handed(dlock_lock *l, uint64_t fence, int64_t lease_ms, int64_t granted_ms,
                             int renew, int64_t since_us)
{
    return start(l, fence, fence, NULL, lease_ms, granted_ms, renew, since_us);
}

void dlock__lock_stop_holding(dlock_lock *l)
{
    pthread_mutex_lock(&l->report_mu); /* waits for a callback under way */
    dlock__renewer_remove(&l->client->renewer, &l->lease, NULL, 0);
    l->holds = 0;
    if (l->parent == NULL && l->nmembers == 0)
        atomic_store(&l->settled, 0);
    pthread_mutex_unlock(&l->report_mu);
}

int dlock__lock_settle(dlock_lock *l)
{
    char why[sizeof l->lease.why];

    /* under report_mu, as the renewer's report (lease_report): a loss is
     * either found here or reported after, never both, never neither */
    pthread_mutex_lock(&l->report_mu);
    int ok =
        dlock__renewer_check(&l->client->renewer, &l->lease, NULL, why, sizeof why) == DLOCK_OK;
    if (ok)
        atomic_store(&l->settled, 1);
    pthread_mutex_unlock(&l->report_mu);
    if (ok)
        return DLOCK_OK;
    dlock__lock_stop_holding(l);
    return dlock__fail(DLOCK_ELOST, "lock '%s' was lost as it was taken: %s", l->name, why);
}

int dlock__lock_take_loss(dlock_lock *l)
{
    char why[sizeof l->lease.why];

    if (l->holds == 0)
        return DLOCK_OK;
    if (dlock__renewer_check(&l->client->renewer, &l->lease, NULL, why, sizeof why) == DLOCK_OK)
        return DLOCK_OK;
    dlock__lock_stop_holding(l);
    return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
}

/* ---------------------------------------------------------------- release */

int dlock__lock_give(dlock_lock *l, int all, int64_t deadline)
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
    /* Off the renewer first: a renewal racing the release would find the
     * lock gone and report it lost. What it found before is told here. */
    char why[sizeof l->lease.why];
    pthread_mutex_lock(&l->report_mu);
    int lost = dlock__renewer_remove(&c->renewer, &l->lease, why, sizeof why);
    pthread_mutex_unlock(&l->report_mu);
    if (lost) {
        dlock__lock_stop_holding(l);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
    }
    if (deadline == 0)
        deadline = dlock__lock_op_deadline(l);
    rc = c->backend->release(c->store, l->sl, l->token, l->lease.fence, deadline);
    if (rc == DLOCK_OK) {
        dlock__lock_stop_holding(l);
        DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "lock '%s' released (fence %llu)", l->name,
                   (unsigned long long) l->fence);
        return DLOCK_OK;
    }
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_ELOST) {
        dlock__lock_stop_holding(l);
        DLOCK__LOG(&c->log, DLOCK_LOG_ERROR, "lock '%s' lost: the release found it gone: %s",
                   l->name, dlock_errmsg());
        return dlock__fail_context(DLOCK_ELOST, "lock '%s' was lost before the release", l->name);
    }
    DLOCK__LOG(&c->log, DLOCK_LOG_WARN,
               "lock '%s' given up, but its release may not have reached the store (it ends "
               "with its lease there): %s",
               l->name, dlock_errmsg());
    /* Unknown outcome: the hold is given up here all the same, so that
     * the handle's next acquire is a new one, not a re-entry into a lock
     * the caller let go; if the release did not reach the store, the lock
     * ends with its lease there (a session's: when its store deletes it). */
    dlock__lock_stop_holding(l);
    return dlock__fail_context(rc,
                               "lock '%s' is given up here, but its release may not have "
                               "reached the store",
                               l->name);
}

/* ---------------------------------------------------------------- lease */

/* The store says the handle no longer holds the lock (extend, renew). */
static int lost_in_store(dlock_lock *l, const char *what)
{
    DLOCK__LOG(&l->client->log, DLOCK_LOG_ERROR, "lock '%s' lost: %s found it gone: %s", l->name,
               what, dlock_errmsg());
    dlock__lock_stop_holding(l);
    return dlock__fail_context(DLOCK_ELOST, "lock '%s' was lost", l->name);
}

static int extend_one(dlock_lock *l, int64_t lease_ms)
{
    int rc = dlock__lock_take_loss(l);
    int64_t sent;

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    sent = dlock__now_us();
    rc = l->client->backend->extend(l->client->store, l->sl, l->token, l->lease.fence, lease_ms, 0,
                                    dlock__lock_op_deadline(l));
    if (rc == DLOCK_ELOST)
        return lost_in_store(l, "dlock_extend");
    if (rc == DLOCK_OK) {
        /* A set lease is the grant's own, not its session's any more (a
         * store of session leases gives the hold a lease of its own):
         * renewing it from now on (keepalive, renew) is renewing that
         * lease. */
        if (l->lease.session != NULL)
            dlock__renewer_leave_session(&l->client->renewer, &l->lease);
        dlock__renewer_update(&l->client->renewer, &l->lease, 0, lease_ms,
                              dlock__validity_end(sent, lease_ms));
        DLOCK__LOG(&l->client->log, DLOCK_LOG_DEBUG,
                   "lock '%s' extended: a fixed lease of %lld ms, not renewed", l->name,
                   (long long) lease_ms);
    }
    return rc;
}

/* Back to the full lease now, renewal as it was. A hold that lives by a
 * session has no lease of its own: it is confirmed. */
static int renew_one(dlock_lock *l)
{
    dlock_client *c = l->client;
    int rc = dlock__lock_take_loss(l);
    int64_t sent, lease_ms = l->lease.lease_ms;
    int session = l->lease.session != NULL;

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    if (!session) {
        rc = dlock__client_require(c, DLOCK_CAP_EXTEND, "dlock_renew (set a lease)");
        if (rc != DLOCK_OK)
            return rc;
    }
    sent = dlock__now_us();
    rc = c->backend->extend(c->store, l->sl, l->token, l->lease.fence, session ? 0 : lease_ms,
                            session, dlock__lock_op_deadline(l));
    if (rc == DLOCK_ELOST)
        return lost_in_store(l, "dlock_renew");
    if (rc == DLOCK_OK && !session)
        dlock__renewer_update(&c->renewer, &l->lease, l->lease.renew, lease_ms,
                              dlock__validity_end(sent, lease_ms));
    if (rc == DLOCK_OK)
        DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "lock '%s' renewed: %s", l->name,
                   session          ? "confirmed (its session keeps it)"
                   : l->lease.renew ? "full lease again, renewed as before"
                                    : "its fixed lease again from now");
    return rc;
}

static int keepalive_one(dlock_lock *l)
{
    int rc = dlock__lock_take_loss(l);

    if (rc != DLOCK_OK)
        return rc;
    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    if (l->lease.session == NULL)
        dlock__renewer_update(&l->client->renewer, &l->lease, 1, l->client->cfg.lease_ms, 0);
    DLOCK__LOG(&l->client->log, DLOCK_LOG_DEBUG, "lock '%s': renewed automatically from now on",
               l->name);
    return DLOCK_OK; /* a session's hold is always kept */
}

int dlock__lock_extend(dlock_lock *l, int64_t lease_ms, enum dlock__extend_mode mode)
{
    switch (mode) {
    case DLOCK__EXTEND_KEEPALIVE:
        return keepalive_one(l);
    case DLOCK__EXTEND_RENEW:
        return renew_one(l);
    default:
        return extend_one(l, lease_ms);
    }
}

/* ---------------------------------------------------------------- state */

int dlock__lock_verify(dlock_lock *l)
{
    dlock_client *c = l->client;
    char why[sizeof l->lease.why];

    if (l->holds == 0)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is not held by this handle", l->name);
    if (dlock__renewer_check(&c->renewer, &l->lease, NULL, why, sizeof why) != DLOCK_OK) {
        /* Its session ended or its validity ran out, and the renewer has
         * not got round to it: found here, so reported here, on this
         * thread, before this returns (dlock.h). */
        if (!dlock__renewer_lose(&c->renewer, &l->lease, why))
            dlock__renewer_wait_reported(&c->renewer, &l->lease);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
    }
    /* at_least with no lease: the store confirms and changes nothing */
    int rc = c->backend->extend(c->store, l->sl, l->token, l->lease.fence, 0, 1,
                                dlock__lock_op_deadline(l));
    if (rc == DLOCK_ELOST) {
        /* Not ended here: reported like a loss the renewer found, so the
         * handle and its callback tell it as they tell any other. */
        snprintf(why, sizeof why, "the store no longer has it under this owner (%s)",
                 dlock_errmsg());
        /* (the store may have ended the hold's session as it answered:
         * the renewer's report of it is then done before this returns) */
        if (!dlock__renewer_lose(&c->renewer, &l->lease, why))
            dlock__renewer_wait_reported(&c->renewer, &l->lease);
        return dlock__fail(DLOCK_ELOST, "lock '%s' was lost: %s", l->name, why);
    }
    if (rc == DLOCK_OK)
        DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "lock '%s' verified: the store has it (fence %llu)",
                   l->name, (unsigned long long) l->fence);
    return rc;
}
