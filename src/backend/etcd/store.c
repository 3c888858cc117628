/* SPDX-License-Identifier: MIT */
/* store.c - the etcd store's bookkeeping: sessions, claimed key names,
 * work retried until etcd answers, read-write holds. See store.h. */
#define _GNU_SOURCE
#include "store.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEX_MAX 24 /* "-" + slot digits after 16 hex digits */

void dlock__etcd_store_init(dlock__etcd_store *e)
{
    pthread_mutex_init(&e->mu, NULL);
    dlock__cond_init(&e->cv);
}

void dlock__etcd_store_fini(dlock__etcd_store *e)
{
    for (size_t i = 0; i < e->npending; i++)
        free(e->pending[i].key);
    e->npending = 0;
    for (size_t b = 0; b < DLOCK__ETCD_CLAIM_BUCKETS; b++) {
        while (e->claims[b] != NULL) {
            dlock__etcd_claim *c = e->claims[b];
            e->claims[b] = c->next;
            free(c);
        }
    }
    while (e->rw_holds != NULL) {
        dlock__etcd_rw_hold *h = e->rw_holds;
        e->rw_holds = h->next;
        free(h->key);
        free(h);
    }
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
}

/* ---------------------------------------------------------------- for the lock's files */

int64_t dlock__etcd_deadline_of(const dlock__etcd_store *e, int64_t deadline_us)
{
    int64_t cap = dlock__now_us() + e->timeout_ms * 1000;
    return deadline_us < cap ? deadline_us : cap;
}

int64_t dlock__etcd_tidy_deadline(const dlock__etcd_store *e, int64_t deadline_us)
{
    int64_t tidy_ms = e->timeout_ms < DLOCK__ETCD_TIDY_MS ? e->timeout_ms : DLOCK__ETCD_TIDY_MS;
    int64_t cap = dlock__now_us() + tidy_ms * 1000;
    return deadline_us < cap ? deadline_us : cap;
}

/* Whole seconds, rounded up: etcd leases have no finer grain. */
int64_t dlock__etcd_ttl_of(int64_t lease_ms)
{
    int64_t s = (lease_ms + 999) / 1000;
    return s < 1 ? 1 : s;
}

const char *dlock__etcd_kind_name(const dlock__etcd_lock *l)
{
    switch (l->base.spec.kind) {
    case DLOCK__READ:
    case DLOCK__WRITE:
        return "read-write lock";
    case DLOCK__SEMAPHORE:
        return "semaphore";
    default:
        return "lock";
    }
}

/* "take/permits" of a semaphore key (its value's first line); 0 if it is
 * not one of ours. */
int dlock__etcd_parse_permits(const dlock__etcd_kv *kv, unsigned *take, unsigned *permits)
{
    char buf[32];
    unsigned long t, p;
    char *end;
    const char *nl = memchr(kv->value, '\n', kv->value_len);
    size_t n = nl != NULL ? (size_t) (nl - kv->value) : kv->value_len;
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, kv->value, n);
    buf[n] = '\0';
    t = strtoul(buf, &end, 10);
    if (end == buf || *end != '/')
        return 0;
    const char *q = end + 1;
    p = strtoul(q, &end, 10);
    if (end == q || *end != '\0' || t == 0 || p == 0 || t > p || p > UINT32_MAX)
        return 0;
    *take = (unsigned) t;
    *permits = (unsigned) p;
    return 1;
}

/* ---------------------------------------------------------------- sessions */

dlock__etcd_session *dlock__etcd_session_ref(dlock__etcd_session *es)
{
    atomic_fetch_add(&es->refs, 1);
    return es;
}

void dlock__etcd_session_unref(dlock__etcd_session *es)
{
    if (es != NULL && atomic_fetch_sub(&es->refs, 1) == 1)
        free(es);
}

static void es_free_data(void *data)
{
    dlock__etcd_session_unref(data);
}

/* The session is over in etcd (or given up): its holds are lost. */
void dlock__etcd_session_end(dlock__etcd_store *e, dlock__etcd_session *es, const char *why)
{
    pthread_mutex_lock(&e->mu);
    dlock__session *s = es->session;
    es->session = NULL;
    pthread_mutex_unlock(&e->mu);
    if (s == NULL)
        return;
    char text[400];
    snprintf(text, sizeof text, "%s: lease %" PRIx64 ": %s", e->base.label, (uint64_t) es->lease,
             why);
    dlock__session_end(s, text);
    /* waiters: their keys went with the lease */
    dlock__board_recheck(e->base.host.board, NULL);
}

/* The current session, started if there is none alive. *out is a reference. */
int dlock__etcd_session_get(dlock__etcd_store *e, int64_t deadline, dlock__etcd_session **out)
{
    *out = NULL;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        dlock__etcd_session *c = e->cur;
        if (c != NULL && c->session != NULL && dlock__session_alive(c->session)) {
            *out = dlock__etcd_session_ref(c);
            pthread_mutex_unlock(&e->mu);
            return DLOCK_OK;
        }
        if (!e->starting)
            break;
        /* another thread starts it */
        struct timespec until = dlock__timespec(deadline);
        if (deadline != DLOCK__NEVER &&
            pthread_cond_timedwait(&e->cv, &e->mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&e->mu);
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: no session lease from etcd in time",
                               e->base.label);
        }
        if (deadline == DLOCK__NEVER)
            pthread_cond_wait(&e->cv, &e->mu);
    }
    e->starting = 1;
    dlock__etcd_session *old = e->cur;
    e->cur = NULL;
    pthread_mutex_unlock(&e->mu);
    /* A session that is not alive any more was ended, or its validity ran
     * out and the renewer is asking us to end it (session_lost). */
    dlock__etcd_session_unref(old);

    dlock__etcd_lease lease = {0};
    dlock__etcd_session *es = NULL;
    int64_t sent = dlock__now_us();
    int rc = dlock__etcd_lease_grant(e->cli, e->ttl_s, 0, deadline, &lease);
    if (rc == DLOCK_OK && (es = calloc(1, sizeof *es)) == NULL)
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc == DLOCK_OK) {
        atomic_init(&es->refs, 2); /* the store's and the core session's */
        es->lease = lease.id;
        es->ttl_s = lease.ttl > 0 ? lease.ttl : e->ttl_s;
        /* etcd may grant more than asked (its minimum TTL); the lease counts
         * from when etcd got the request, after `sent`. */
        rc = dlock__session_start(e->base.host.sessions, es->ttl_s * 1000, sent, es, es_free_data,
                                  &es->session);
        if (rc != DLOCK_OK) {
            free(es);
            es = NULL;
        }
    }
    if (rc != DLOCK_OK && lease.id != 0 && es == NULL)
        dlock__etcd_lease_revoke(e->cli, lease.id, deadline);
    if (rc == DLOCK_OK)
        atomic_fetch_add(&e->stat_sessions, 1);
    pthread_mutex_lock(&e->mu);
    e->starting = 0;
    e->cur = es;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (es != NULL)
        *out = dlock__etcd_session_ref(es);
    return rc;
}

/* A reference to es's core session for a grant, if it is still alive. */
dlock__session *dlock__etcd_session_for_grant(dlock__etcd_store *e, dlock__etcd_session *es)
{
    pthread_mutex_lock(&e->mu);
    dlock__session *s = es->session;
    if (s != NULL && dlock__session_alive(s))
        dlock__session_ref(s);
    else
        s = NULL;
    pthread_mutex_unlock(&e->mu);
    return s;
}

/* ---------------------------------------------------------------- slots */

static unsigned hash_key(const char *key)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *) key; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    return h % DLOCK__ETCD_CLAIM_BUCKETS;
}

static int claimed_locked(const dlock__etcd_store *e, const char *key)
{
    for (const dlock__etcd_claim *c = e->claims[hash_key(key)]; c != NULL; c = c->next) {
        if (strcmp(c->key, key) == 0)
            return 1;
    }
    return 0;
}

/* Claims the first free slot base, base-1, base-2... into *out. */
int dlock__etcd_claim_key(dlock__etcd_store *e, const char *base, char **out)
{
    size_t n = strlen(base) + HEX_MAX;
    dlock__etcd_claim *c = malloc(sizeof *c + n);
    if (c == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_lock(&e->mu);
    for (unsigned slot = 0;; slot++) {
        if (slot == 0)
            snprintf(c->key, n, "%s", base);
        else
            snprintf(c->key, n, "%s-%u", base, slot);
        if (!claimed_locked(e, c->key))
            break;
    }
    unsigned b = hash_key(c->key);
    c->next = e->claims[b];
    e->claims[b] = c;
    pthread_mutex_unlock(&e->mu);
    *out = strdup(c->key);
    if (*out == NULL) {
        pthread_mutex_lock(&e->mu);
        e->claims[b] = c->next;
        pthread_mutex_unlock(&e->mu);
        free(c);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

void dlock__etcd_unclaim_key(dlock__etcd_store *e, const char *key)
{
    if (key == NULL)
        return;
    pthread_mutex_lock(&e->mu);
    for (dlock__etcd_claim **p = &e->claims[hash_key(key)]; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->key, key) == 0) {
            dlock__etcd_claim *c = *p;
            *p = c->next;
            free(c);
            break;
        }
    }
    pthread_mutex_unlock(&e->mu);
}

/* ---------------------------------------------------------------- key state */

void dlock__etcd_take_key(dlock__etcd_lock *l, dlock__etcd_key *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->k;
    memset(&l->k, 0, sizeof l->k);
    pthread_mutex_unlock(&l->mu);
}

void dlock__etcd_put_key(dlock__etcd_lock *l, const dlock__etcd_key *k)
{
    pthread_mutex_lock(&l->mu);
    l->k = *k;
    pthread_mutex_unlock(&l->mu);
}

/* Forgets a key without touching etcd (its lease is gone, or it is). */
void dlock__etcd_discard_key(dlock__etcd_store *e, dlock__etcd_key *k)
{
    dlock__etcd_unclaim_key(e, k->key);
    free(k->key);
    dlock__etcd_session_unref(k->sess);
    memset(k, 0, sizeof *k);
}

/* Hands k to the background: retried until etcd answers. */
static void pend_key(dlock__etcd_store *e, dlock__etcd_key *k)
{
    pthread_mutex_lock(&e->mu);
    if (e->npending < DLOCK__ETCD_MAX_PENDING) {
        e->pending[e->npending++] = (dlock__etcd_pending){
            .key = k->key, .rev = k->own_lease != 0 ? 0 : k->rev, .lease = k->own_lease};
    } else {
        /* no room: given up on, but never unclaimed, as it may still be
         * there (a claim is small; so many unconfirmed deletes are not
         * expected) */
        free(k->key);
    }
    k->key = NULL; /* claimed until then */
    pthread_mutex_unlock(&e->mu);
    dlock__etcd_discard_key(e, k);
}

void dlock__etcd_pend_revoke(dlock__etcd_store *e, int64_t lease)
{
    pthread_mutex_lock(&e->mu);
    if (e->npending < DLOCK__ETCD_MAX_PENDING)
        e->pending[e->npending++] = (dlock__etcd_pending){.lease = lease};
    pthread_mutex_unlock(&e->mu);
}

/* Deletes key if its create revision is still rev (any, when rev is 0).
 * DLOCK_OK with *deleted, or the request's error. */
int dlock__etcd_delete_key(dlock__etcd_store *e, const char *key, int64_t rev, int64_t deadline,
                           int *deleted)
{
    int rc;
    *deleted = 0;
    if (rev == 0) {
        dlock__etcd_delete d = {.key = key};
        int64_t revision, n = 0;
        rc = dlock__etcd_kv_delete(e->cli, &d, deadline, &revision, &n);
        *deleted = n > 0;
        return rc;
    }
    dlock__etcd_compare cmp = {.key = key,
                               .target = DLOCK__ETCD_TARGET_CREATE,
                               .result = DLOCK__ETCD_CMP_EQUAL,
                               .number = rev};
    dlock__etcd_op del = {.type = DLOCK__ETCD_OP_DELETE, .del = {.key = key}};
    dlock__etcd_txn t = {.compare = &cmp, .n_compare = 1, .success = &del, .n_success = 1};
    dlock__etcd_txn_result r;
    int replayed = 0;
    rc = dlock__etcd_kv_txn_again(e->cli, &t, deadline, &r, &replayed);
    if (rc == DLOCK_OK) {
        /* Sent twice (a member did not answer in time): a key found gone
         * may be the first send's delete, so it counts as deleted. A hold
         * that lapsed is told by its own clock, not by this answer. */
        *deleted = r.succeeded || replayed;
        dlock__etcd_txn_result_free(&r);
    }
    return rc;
}

/* Removes k from etcd (its own lease revoked, or the key deleted), or
 * hands that to the background. Returns whether it was there: 1, 0 (gone
 * already), -1 (not known now). */
int dlock__etcd_remove_key(dlock__etcd_store *e, dlock__etcd_key *k, int64_t deadline)
{
    int rc, deleted = 0;
    if (k->key == NULL)
        return 0;
    if (k->own_lease != 0) {
        rc = dlock__etcd_lease_revoke(e->cli, k->own_lease, deadline);
        deleted = rc == DLOCK_OK;
        if (rc == DLOCK_ELOST)
            rc = DLOCK_OK;
    } else {
        rc = dlock__etcd_delete_key(e, k->key, k->rev, deadline, &deleted);
    }
    if (rc == DLOCK_OK || rc == DLOCK_EINVAL) {
        dlock__etcd_discard_key(e, k);
        return deleted;
    }
    pend_key(e, k);
    return -1;
}

/* Retries what could not be confirmed, each at most once, until one fails
 * (so a call costs one failed request at most). What fails stays pending,
 * and its key claimed: a new attempt of ours must never find such a key
 * and take its old revision (and the permit or place it may have held)
 * for a new grant. */
void dlock__etcd_retry_pending(dlock__etcd_store *e, int64_t deadline)
{
    pthread_mutex_lock(&e->mu);
    size_t todo = e->npending;
    pthread_mutex_unlock(&e->mu);
    for (; todo > 0; todo--) {
        pthread_mutex_lock(&e->mu);
        if (e->npending == 0) {
            pthread_mutex_unlock(&e->mu);
            return;
        }
        dlock__etcd_pending p = e->pending[--e->npending];
        pthread_mutex_unlock(&e->mu);
        dlock__saved_error saved;
        dlock__save_error(&saved);
        int rc, deleted;
        if (p.lease != 0) {
            rc = dlock__etcd_lease_revoke(e->cli, p.lease, deadline);
            if (rc == DLOCK_ELOST)
                rc = DLOCK_OK;
        } else {
            rc = dlock__etcd_delete_key(e, p.key, p.rev, deadline, &deleted);
        }
        dlock__restore_error(&saved);
        if (rc != DLOCK_OK && rc != DLOCK_EINVAL) {
            /* not done (etcd away, or answering with an error while it
             * restarts): back to the bottom of the list, so the others
             * get their turn */
            pthread_mutex_lock(&e->mu);
            int kept = e->npending < DLOCK__ETCD_MAX_PENDING;
            if (kept) {
                memmove(&e->pending[1], &e->pending[0], sizeof e->pending[0] * e->npending);
                e->pending[0] = p;
                e->npending++;
            }
            pthread_mutex_unlock(&e->mu);
            if (!kept)
                free(p.key); /* no room: given up on, still claimed */
            return;
        }
        dlock__etcd_unclaim_key(e, p.key);
        free(p.key);
    }
}

/* Whether key is still waiting in the background. */
int dlock__etcd_pending_has(dlock__etcd_store *e, const char *key)
{
    int found = 0;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->npending && !found; i++)
        found = e->pending[i].key != NULL && strcmp(e->pending[i].key, key) == 0;
    pthread_mutex_unlock(&e->mu);
    return found;
}

int dlock__etcd_has_pending(dlock__etcd_store *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->npending > 0;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* ---------------------------------------------------------------- read-write holds */

void dlock__etcd_rw_remember(dlock__etcd_store *e, dlock__etcd_lock *l, const char *key,
                             const char *token)
{
    dlock__etcd_rw_hold *h = calloc(1, sizeof *h);
    if (h == NULL || (h->key = strdup(key)) == NULL) {
        free(h);
        return; /* only the deadlock check and the downgrade miss it */
    }
    h->owner = l;
    h->prefix = l->prefix;
    h->writer = l->base.spec.kind == DLOCK__WRITE;
    snprintf(h->token, sizeof h->token, "%s", token);
    pthread_mutex_lock(&e->mu);
    h->next = e->rw_holds;
    e->rw_holds = h;
    pthread_mutex_unlock(&e->mu);
}

void dlock__etcd_rw_forget(dlock__etcd_store *e, const dlock__etcd_lock *l)
{
    pthread_mutex_lock(&e->mu);
    for (dlock__etcd_rw_hold **p = &e->rw_holds; *p != NULL;) {
        dlock__etcd_rw_hold *h = *p;
        if (h->owner == l) {
            *p = h->next;
            free(h->key);
            free(h);
        } else {
            p = &h->next;
        }
    }
    pthread_mutex_unlock(&e->mu);
}

/* Whether token holds the write key `key` in this client. */
int dlock__etcd_own_write_hold(dlock__etcd_store *e, const char *key, const char *token)
{
    int own = 0;
    pthread_mutex_lock(&e->mu);
    for (const dlock__etcd_rw_hold *h = e->rw_holds; h != NULL && !own; h = h->next)
        own = h->writer && strcmp(h->key, key) == 0 && strcmp(h->token, token) == 0;
    pthread_mutex_unlock(&e->mu);
    return own;
}

/* Whether token holds the read lock of l's name in this client. */
int dlock__etcd_own_read_hold(dlock__etcd_store *e, const dlock__etcd_lock *l, const char *token)
{
    int own = 0;
    pthread_mutex_lock(&e->mu);
    for (const dlock__etcd_rw_hold *h = e->rw_holds; h != NULL && !own; h = h->next)
        own = !h->writer && strcmp(h->prefix, l->prefix) == 0 && strcmp(h->token, token) == 0;
    pthread_mutex_unlock(&e->mu);
    return own;
}
