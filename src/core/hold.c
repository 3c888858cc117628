/* hold.c - a lock this handle holds: the lease on the renewer, giving it
 * up, extending it, and asking whether it is still held. */
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
int dlock__lock_start_holding(dlock_lock *l, uint64_t fence, dlock__session *session,
                              int64_t lease_ms, int renew, int64_t sent_us)
{
    dlock__lease *e = &l->lease;

    l->holds = 1;
    if (fence != 0)
        l->fence = fence;
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
        e->lease_ms = lease_ms;
        e->renew = renew;
        e->valid_until_us = dlock__validity_end(sent_us, lease_ms);
        e->due_us = renew ? sent_us + lease_ms * 1000 / 3 : DLOCK__NEVER;
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
    }
    return rc;
}

void dlock__lock_stop_holding(dlock_lock *l)
{
    pthread_mutex_lock(&l->report_mu); /* waits for a callback under way */
    dlock__renewer_remove(&l->client->renewer, &l->lease, NULL, 0);
    l->holds = 0;
    pthread_mutex_unlock(&l->report_mu);
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
    rc = c->backend->release(c->store, l->sl, l->token, dlock__lock_op_deadline(l));
    if (rc == DLOCK_OK) {
        dlock__lock_stop_holding(l);
        return DLOCK_OK;
    }
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_ELOST) {
        dlock__lock_stop_holding(l);
        return dlock__fail_context(DLOCK_ELOST, "lock '%s' was lost before the release", l->name);
    }
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

int dlock_release(dlock_lock *l)
{
    int rc = dlock__lock_enter(l);
    if (rc != DLOCK_OK)
        return rc;
    return dlock__lock_leave(l,
                             l->nmembers > 0 ? dlock__multi_release(l, 0) : dlock__lock_give(l, 0));
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
    rc = l->client->backend->extend(l->client->store, l->sl, l->token, lease_ms, 0,
                                    dlock__lock_op_deadline(l));
    if (rc == DLOCK_ELOST) {
        dlock__lock_stop_holding(l);
        return dlock__fail_context(DLOCK_ELOST, "lock '%s' was lost", l->name);
    }
    if (rc == DLOCK_OK)
        dlock__renewer_update(&l->client->renewer, &l->lease, 0, lease_ms,
                              dlock__validity_end(sent, lease_ms));
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
    return DLOCK_OK; /* a session's hold is always kept */
}

int dlock__lock_extend(dlock_lock *l, int64_t lease_ms, int keepalive)
{
    return keepalive ? keepalive_one(l) : extend_one(l, lease_ms);
}

int dlock_extend(dlock_lock *l, int64_t lease_ms)
{
    int rc = dlock__lock_enter(l);

    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__client_require(l->client, DLOCK_CAP_EXTEND, "dlock_extend (set a lease)");
    if (rc == DLOCK_OK && (lease_ms <= 0 || lease_ms > DLOCK_DURATION_MAX_MS))
        rc = dlock__fail(DLOCK_EINVAL, "lease of %lld ms: a lease must be > 0 and at most %lld ms",
                         (long long) lease_ms, (long long) DLOCK_DURATION_MAX_MS);
    if (rc == DLOCK_OK)
        rc = l->nmembers > 0 ? dlock__multi_extend(l, lease_ms, 0) : extend_one(l, lease_ms);
    return dlock__lock_leave(l, rc);
}

int dlock_keepalive(dlock_lock *l)
{
    int rc = dlock__lock_enter(l);

    if (rc != DLOCK_OK)
        return rc;
    return dlock__lock_leave(l, l->nmembers > 0 ? dlock__multi_extend(l, 0, 1) : keepalive_one(l));
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
