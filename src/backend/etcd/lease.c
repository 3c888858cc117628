/* SPDX-License-Identifier: MIT */
/* lease.c - keeping etcd holds alive: the move of a held key to a fixed
 * lease of its own (dlock_acquire_for, dlock_extend), extend, the renewal
 * the core's renewer runs (session keepalives, holds checked), and a
 * session given up. See etcd.c's design note ("Liveness"). */
#define _GNU_SOURCE
#include "lease.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ESTORE(s) DLOCK__STORE_OF(dlock__etcd_store, s)
#define ELOCK(l)  DLOCK__STORE_OF(dlock__etcd_lock, l)

/* ---------------------------------------------------------------- a lease of its own */

/* Moves our key to a lease of its own of lease_ms (rounded up to seconds),
 * if it still has our create revision. DLOCK_ELOST: it does not. */
static int move_to_own_lease(dlock__etcd_store *e, dlock__etcd_lock *l, int64_t lease_ms,
                             int64_t deadline)
{
    pthread_mutex_lock(&l->mu);
    char *key = l->k.key != NULL ? strdup(l->k.key) : NULL;
    int64_t rev = l->k.rev, old = l->k.own_lease;
    pthread_mutex_unlock(&l->mu);
    dlock__etcd_lease lease = {0};
    dlock__etcd_txn_result r;
    int rc;

    if (key == NULL)
        return dlock__fail(DLOCK_ELOST, "%s: the lock's key is gone", e->base.label);
    rc = dlock__etcd_lease_grant(e->cli, dlock__etcd_ttl_of(lease_ms), 0, deadline, &lease);
    if (rc != DLOCK_OK)
        goto out;
    dlock__etcd_compare cmp = {.key = key,
                               .target = DLOCK__ETCD_TARGET_CREATE,
                               .result = DLOCK__ETCD_CMP_EQUAL,
                               .number = rev};
    dlock__etcd_op put = {
        .type = DLOCK__ETCD_OP_PUT,
        .put = {.key = key, .value = l->value, .value_len = l->value_len, .lease = lease.id}};
    dlock__etcd_txn t = {.compare = &cmp, .n_compare = 1, .success = &put, .n_success = 1};
    rc = dlock__etcd_kv_txn(e->cli, &t, deadline, &r);
    if (rc != DLOCK_OK) {
        dlock__etcd_pend_revoke(e, lease.id); /* holds nothing, or a key we give up on */
        goto out;
    }
    int moved = r.succeeded;
    dlock__etcd_txn_result_free(&r);
    if (!moved) {
        dlock__etcd_lease_revoke(e->cli, lease.id, deadline);
        rc = dlock__fail(DLOCK_ELOST, "%s: key %s is gone", e->base.label, key);
        goto out;
    }
    pthread_mutex_lock(&l->mu);
    int same = l->k.key != NULL && strcmp(l->k.key, key) == 0 && l->k.rev == rev;
    if (same) {
        l->k.own_lease = lease.id;
        l->k.own_ttl_s = lease.ttl > 0 ? lease.ttl : dlock__etcd_ttl_of(lease_ms);
    }
    pthread_mutex_unlock(&l->mu);
    if (!same) {
        /* released meanwhile (the renewal thread moves a key while its owner
         * may release it): let the key go with its new lease */
        dlock__etcd_lease_revoke(e->cli, lease.id, deadline);
        rc = dlock__fail(DLOCK_ELOST, "%s: key %s was released", e->base.label, key);
    } else if (old != 0) {
        dlock__saved_error saved;
        dlock__save_error(&saved);
        if (dlock__etcd_lease_revoke(e->cli, old, deadline) == DLOCK_EUNREACHABLE)
            dlock__etcd_pend_revoke(e, old); /* holds nothing now; only tidiness */
        dlock__restore_error(&saved);
    }
out:
    free(key);
    return rc;
}

int dlock__etcd_to_own_lease(dlock__etcd_store *e, dlock__etcd_lock *l, int64_t lease_ms,
                             int64_t deadline)
{
    pthread_mutex_lock(&l->moving);
    int rc = move_to_own_lease(e, l, lease_ms, deadline);
    pthread_mutex_unlock(&l->moving);
    return rc;
}

/* ---------------------------------------------------------------- extend */

/* DLOCK_OK if key still has create revision rev, else DLOCK_ELOST. */
static int confirm(dlock__etcd_store *e, const char *key, int64_t rev, int64_t deadline)
{
    dlock__etcd_range q = {.key = key, .keys_only = 1};
    dlock__etcd_range_result r;
    int rc = dlock__etcd_kv_range(e->cli, &q, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    int ours = r.n_kvs == 1 && r.kvs[0].create_revision == rev;
    dlock__etcd_range_result_free(&r);
    return ours ? DLOCK_OK
                : dlock__fail(DLOCK_ELOST, "%s: key %s is gone (deleted, or its lease ended)",
                              e->base.label, key);
}

/* Confirms the hold; with a lease asked for (!at_least, or a lease of its
 * own shorter than asked), moves the key to a lease of its own of that
 * length. */
int dlock__etcd_extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                       int64_t lease_ms, int at_least, int64_t deadline)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    int rc;

    (void) token;
    deadline = dlock__etcd_deadline_of(e, deadline);
    pthread_mutex_lock(&l->mu);
    char *key = l->k.key != NULL ? strdup(l->k.key) : NULL;
    int64_t rev = l->k.rev, own = l->k.own_lease;
    pthread_mutex_unlock(&l->mu);
    if (key == NULL)
        return dlock__fail(DLOCK_ELOST, "%s: %s '%s' is not held", e->base.label,
                           dlock__etcd_kind_name(l), l->name);
    if (at_least && own == 0) {
        rc = confirm(e, key, rev, deadline); /* its session keeps it */
    } else if (at_least) {
        dlock__etcd_lease_ttl t = {0};
        rc = dlock__etcd_lease_timetolive(e->cli, own, 0, deadline, &t);
        if (rc == DLOCK_OK && t.ttl < 0)
            rc = dlock__fail(DLOCK_ELOST, "%s: the lease of key %s ended", e->base.label, key);
        else if (rc == DLOCK_OK && t.ttl * 1000 >= lease_ms)
            rc = confirm(e, key, rev, deadline);
        else if (rc == DLOCK_OK)
            rc = dlock__etcd_to_own_lease(e, l, lease_ms, deadline);
        dlock__etcd_lease_ttl_free(&t);
    } else {
        rc = dlock__etcd_to_own_lease(e, l, lease_ms, deadline);
    }
    free(key);
    return rc;
}

/* ---------------------------------------------------------------- renewal */

static void note_error(char *error, size_t len)
{
    if (error[0] == '\0')
        snprintf(error, len, "%s", dlock_errmsg());
}

int dlock__etcd_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_key *held = calloc(n, sizeof *held);
    dlock__etcd_op *ops = calloc(n, sizeof *ops);
    size_t *which = calloc(n, sizeof *which);
    char error[300] = "";
    int answered = 0, rc = DLOCK_OK;

    deadline = dlock__etcd_deadline_of(e, deadline);
    if (held == NULL || ops == NULL || which == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    /* sessions: one keepalive round trip each (first: they keep every
     * hold of the session) */
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *it = &items[i];
        it->result = DLOCK__RENEW_FAILED;
        if (it->kind != DLOCK__RENEW_SESSION)
            continue;
        dlock__etcd_session *es = dlock__session_data(it->session);
        dlock__etcd_lease ka;
        int krc = dlock__etcd_lease_keepalive(e->cli, es->lease, deadline, &ka);
        if (krc == DLOCK_OK) {
            answered = 1;
            it->result = DLOCK__RENEW_OK;
        } else if (krc == DLOCK_ELOST) {
            answered = 1;
            it->result = DLOCK__RENEW_GONE;
            dlock__etcd_session_end(e, es, "etcd says the lease expired or was revoked");
        } else {
            note_error(error, sizeof error);
        }
    }

    if (dlock__etcd_has_pending(e))
        dlock__etcd_retry_pending(e, deadline);

    /* holds: keys on leases of their own are kept alive (or moved to a
     * longer one), then every key is checked in one Txn per 128 */
    size_t nops = 0;
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *it = &items[i];
        if (it->kind != DLOCK__RENEW_HOLD)
            continue;
        dlock__etcd_lock *l = ELOCK(it->lock);
        pthread_mutex_lock(&l->mu);
        if (l->k.key != NULL) {
            held[i] = l->k;
            held[i].key = strdup(l->k.key);
            held[i].sess = NULL;
        }
        pthread_mutex_unlock(&l->mu);
        if (held[i].key == NULL) {
            it->result = DLOCK__RENEW_GONE;
            continue;
        }
        if (held[i].own_lease != 0 && it->session == NULL) {
            int krc;
            if (held[i].own_ttl_s * 1000 >= it->lease_ms) {
                dlock__etcd_lease ka;
                krc = dlock__etcd_lease_keepalive(e->cli, held[i].own_lease, deadline, &ka);
            } else {
                krc = dlock__etcd_to_own_lease(e, l, it->lease_ms, deadline);
            }
            if (krc == DLOCK_ELOST) {
                answered = 1;
                it->result = DLOCK__RENEW_GONE;
                continue;
            }
            if (krc != DLOCK_OK) {
                note_error(error, sizeof error);
                continue;
            }
        }
        ops[nops].type = DLOCK__ETCD_OP_RANGE;
        ops[nops].range = (dlock__etcd_range){.key = held[i].key, .keys_only = 1};
        which[nops++] = i;
    }
    for (size_t from = 0; from < nops; from += DLOCK__ETCD_MAX_TXN_OPS) {
        size_t count =
            nops - from < DLOCK__ETCD_MAX_TXN_OPS ? nops - from : DLOCK__ETCD_MAX_TXN_OPS;
        dlock__etcd_txn t = {.success = ops + from, .n_success = count};
        dlock__etcd_txn_result r;
        if (dlock__etcd_kv_txn(e->cli, &t, deadline, &r) != DLOCK_OK) {
            note_error(error, sizeof error);
            continue;
        }
        answered = 1;
        for (size_t j = 0; j < count && j < r.n_responses; j++) {
            size_t i = which[from + j];
            const dlock__etcd_range_result *got = &r.responses[j].range;
            int ours = got->n_kvs == 1 && got->kvs[0].create_revision == held[i].rev;
            items[i].result = ours ? DLOCK__RENEW_OK : DLOCK__RENEW_GONE;
        }
        dlock__etcd_txn_result_free(&r);
    }
    if (!answered && error[0] != '\0')
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s", error);
out:
    for (size_t i = 0; held != NULL && i < n; i++)
        free(held[i].key);
    free(held);
    free(ops);
    free(which);
    return rc;
}

void dlock__etcd_session_lost(dlock__store *s, dlock__session *session, int64_t deadline)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_session *es = dlock__session_data(session);

    /* Revoke it now: etcd then deletes its keys at once, and nothing granted
     * under it outlives the loss the core reported. If etcd does not answer
     * soon, the lease runs out by itself (nobody keeps it alive), and the
     * revoke is retried. Only tidying: a full command timeout spent on a
     * frozen etcd would only hold up the close after the loss (the renewal
     * thread is joined there). */
    int rc = dlock__etcd_lease_revoke(e->cli, es->lease, dlock__etcd_tidy_deadline(e, deadline));
    if (rc != DLOCK_OK && rc != DLOCK_ELOST)
        dlock__etcd_pend_revoke(e, es->lease);
    dlock__etcd_session_end(e, es, "no keepalive reached etcd within the lease's TTL");
}
