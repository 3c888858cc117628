/* renewer.c - the client's lease thread. See renewer.h for the contract.
 *
 * Timing. A held lock renewed automatically is renewed every lease/3; a
 * queued waiter sends a heartbeat every waiter_lease/3. When the thread
 * wakes for the earliest due entry it also takes every entry due within the
 * next half period, so after a few periods entries fall into step and a
 * whole client's leases go out together. Validity is
 *
 *     send time of the last successful renewal + lease - drift
 *
 * on CLOCK_MONOTONIC: the server started counting the lease after we sent,
 * so our end comes first, by at least the drift margin. A renewal that fails
 * is retried quickly until validity runs out; then the lock is lost.
 *
 * The thread is woken by a new entry only when it is due before the thread
 * would wake anyway; with entries coming and going on the hot path this is
 * rare, so taking and releasing locks does not wake it. An entry added while
 * the thread is awake (scanning or renewing) is noted in earliest_added_us,
 * which the thread reads before it goes to sleep. */
#include "renewer.h"

#include "clock.h"
#include "error.h"
#include "thread.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MIN_US 20000
#define RETRY_MAX_US 1000000

int64_t dlock__drift_us(int64_t lease_ms)
{
    return lease_ms * 10 + 2000;
}

static int64_t period_us(const dlock__renewer *r, const dlock__lease *e)
{
    int64_t lease_ms = e->waiter ? r->cfg->waiter_lease_ms : e->lease_ms;
    return lease_ms * 1000 / 3;
}

static int64_t retry_us(const dlock__renewer *r, const dlock__lease *e)
{
    int64_t t = period_us(r, e) / 10;
    return t < RETRY_MIN_US ? RETRY_MIN_US : t > RETRY_MAX_US ? RETRY_MAX_US : t;
}

/* The next moment the thread must look at e. */
static int64_t next_event(const dlock__lease *e)
{
    int64_t t = e->in_flight ? DLOCK__NEVER : e->due_us;
    if (!e->waiter && e->valid_until_us < t)
        t = e->valid_until_us;
    return t;
}

static void unlink_locked(dlock__lease *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = NULL;
    e->linked = 0;
}

/* An entry's shard follows from its address, so it never changes. */
static dlock__renewer_shard *shard_of(dlock__renewer *r, const dlock__lease *e)
{
    return &r->shards[((uintptr_t) e >> 6) % DLOCK__RENEWER_SHARDS];
}

void dlock__renewer_init(dlock__renewer *r, const dlock__backend_ops *ops, void *be,
                         dlock__board *board, const dlock__client_cfg *cfg)
{
    pthread_condattr_t attr;

    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &attr);
    pthread_condattr_destroy(&attr);
    for (unsigned i = 0; i < DLOCK__RENEWER_SHARDS; i++) {
        pthread_mutex_init(&r->shards[i].mu, NULL);
        r->shards[i].list.prev = r->shards[i].list.next = &r->shards[i].list;
    }
    atomic_init(&r->wake_at_us, 0);
    atomic_init(&r->earliest_added_us, DLOCK__NEVER);
    r->ops = ops;
    r->be = be;
    r->board = board;
    r->cfg = cfg;
}

void dlock__renewer_fini(dlock__renewer *r)
{
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    pthread_cond_signal(&r->cv);
    int running = r->running;
    pthread_mutex_unlock(&r->mu);
    if (running)
        pthread_join(r->thread, NULL);
    for (unsigned i = 0; i < DLOCK__RENEWER_SHARDS; i++) {
        dlock__lease *list = &r->shards[i].list;
        while (list->next != list)
            unlink_locked(list->next);
        pthread_mutex_destroy(&r->shards[i].mu);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

/* ---------------------------------------------------------------- the thread */

typedef struct batch {
    dlock__lease **entries;
    dlock__renewal *items;
    unsigned *gens;
    size_t n, cap;
} batch;

static int batch_push(batch *b, dlock__lease *e)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        dlock__lease **entries = realloc(b->entries, cap * sizeof *entries);
        if (entries == NULL)
            return -1;
        b->entries = entries;
        dlock__renewal *items = realloc(b->items, cap * sizeof *items);
        if (items == NULL)
            return -1;
        b->items = items;
        unsigned *gens = realloc(b->gens, cap * sizeof *gens);
        if (gens == NULL)
            return -1;
        b->gens = gens;
        b->cap = cap;
    }
    b->entries[b->n] = e;
    b->gens[b->n] = e->gen;
    b->items[b->n] = (dlock__renewal){.lock = e->bl,
                                      .token = e->token,
                                      .lease_ms = e->lease_ms,
                                      .waiter = e->waiter,
                                      .result = DLOCK__RENEW_FAILED};
    b->n++;
    return 0;
}

/* Locks whose loss is to be reported once no lock is held. */
typedef struct reports {
    dlock_lock **locks;
    size_t n, cap;
} reports;

/* With the entry's shard locked: marks e lost and queues the report. */
static void lose_locked(dlock__lease *e, reports *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void lose_locked(dlock__lease *e, reports *out, const char *fmt, ...)
{
    va_list ap;

    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        dlock_lock **grown = realloc(out->locks, cap * sizeof *grown);
        if (grown == NULL)
            return; /* reported by the owner's next call all the same */
        out->locks = grown;
        out->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    e->lost = 1;
    unlink_locked(e);
    dlock__lock_ref(e->lock);
    out->locks[out->n++] = e->lock;
}

static void report(reports *out)
{
    for (size_t i = 0; i < out->n; i++) {
        dlock__lock_report_lost(out->locks[i], NULL);
        dlock__lock_unref(out->locks[i]);
    }
    out->n = 0;
}

/* With the entry's shard locked: applies one result of a batch. */
static void apply_locked(dlock__renewer *r, dlock__lease *e, const dlock__renewal *it,
                         int64_t sent_us, int64_t now, reports *out)
{
    e->in_flight = 0;
    if (e->waiter) {
        switch (it->result) {
        case DLOCK__RENEW_OK:
            dlock__board_queued(r->board, e->token, sent_us);
            e->due_us = sent_us + period_us(r, e);
            break;
        case DLOCK__RENEW_GRANTED:
            dlock__board_grant(r->board, e->token, e->wait_id, it->fence);
            e->due_us = DLOCK__NEVER;
            break;
        case DLOCK__RENEW_GONE:
            dlock__board_recheck(r->board, e->token);
            e->due_us = DLOCK__NEVER;
            break;
        default:
            e->due_us = now + retry_us(r, e);
            break;
        }
        return;
    }
    switch (it->result) {
    case DLOCK__RENEW_OK:
        e->last_ok_us = sent_us;
        e->valid_until_us = sent_us + e->lease_ms * 1000 - dlock__drift_us(e->lease_ms);
        e->due_us = sent_us + period_us(r, e);
        break;
    case DLOCK__RENEW_GONE:
        lose_locked(e, out,
                    "renewal refused: the lock expired, was deleted, or is held by another "
                    "owner");
        break;
    default:
        e->due_us = now + retry_us(r, e);
        break;
    }
}

/* One pass over every shard: reports expired leases, collects due entries
 * into b (marking them in flight; *deadline becomes the earliest end of
 * validity among them), and returns the next event. */
static int64_t scan(dlock__renewer *r, batch *b, reports *out, int64_t *deadline)
{
    int64_t next = DLOCK__NEVER;

    for (unsigned i = 0; i < DLOCK__RENEWER_SHARDS; i++) {
        dlock__renewer_shard *sh = &r->shards[i];
        int64_t now = dlock__now_us();
        pthread_mutex_lock(&sh->mu);
        for (dlock__lease *e = sh->list.next, *following; e != &sh->list; e = following) {
            following = e->next;
            if (!e->waiter && e->valid_until_us <= now) {
                if (e->renew)
                    lose_locked(e, out, "lease ran out: no successful renewal for %lld ms (%s)",
                                (long long) ((now - e->last_ok_us) / 1000),
                                r->last_error[0] ? r->last_error : "no reply");
                else
                    lose_locked(e, out, "fixed lease of %lld ms expired", (long long) e->lease_ms);
                continue;
            }
            if (!e->in_flight && e->due_us <= now + period_us(r, e) / 2) {
                if (batch_push(b, e) == 0) {
                    e->in_flight = 1;
                    dlock__lock_ref(e->lock); /* its owner may free it meanwhile */
                    if (!e->waiter && e->valid_until_us < *deadline)
                        *deadline = e->valid_until_us;
                }
            }
            int64_t t = next_event(e);
            if (t < next)
                next = t;
        }
        pthread_mutex_unlock(&sh->mu);
    }
    return next;
}

/* Sleeps until `next` or until an earlier entry arrives; returns whether
 * to stop. */
static int sleep_until(dlock__renewer *r, int64_t next)
{
    pthread_mutex_lock(&r->mu);
    /* Announce the plan first, then pick up what was added during the
     * scan: an entry added after this exchange sees the plan and signals. */
    atomic_store(&r->wake_at_us, next);
    int64_t added = atomic_exchange(&r->earliest_added_us, DLOCK__NEVER);
    if (added < next)
        next = added;
    if (!r->stopping && next > dlock__now_us()) {
        atomic_store(&r->wake_at_us, next);
        if (next == DLOCK__NEVER) {
            pthread_cond_wait(&r->cv, &r->mu);
        } else {
            struct timespec ts = dlock__timespec(next);
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        }
    }
    atomic_store(&r->wake_at_us, 0);
    int stopping = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return stopping;
}

static void *run(void *arg)
{
    dlock__renewer *r = arg;
    batch b = {0};
    reports out = {0};

    for (;;) {
        b.n = 0;
        int64_t deadline = dlock__now_us() + r->cfg->command_timeout_ms * 1000;
        int64_t next = scan(r, &b, &out, &deadline);
        report(&out);
        if (b.n == 0) {
            if (sleep_until(r, next))
                break;
            continue;
        }

        int64_t sent = dlock__now_us();
        if (r->ops->renew(r->be, b.items, b.n, deadline) != DLOCK_OK)
            snprintf(r->last_error, sizeof r->last_error, "%s", dlock_errmsg());

        int64_t now = dlock__now_us();
        for (size_t i = 0; i < b.n; i++) {
            dlock__lease *e = b.entries[i];
            dlock__renewer_shard *sh = shard_of(r, e);
            pthread_mutex_lock(&sh->mu);
            if (e->linked && e->gen == b.gens[i])
                apply_locked(r, e, &b.items[i], sent, now, &out);
            pthread_mutex_unlock(&sh->mu);
        }
        report(&out);
        for (size_t i = 0; i < b.n; i++)
            dlock__lock_unref(b.entries[i]->lock);

        pthread_mutex_lock(&r->mu);
        int stopping = r->stopping;
        pthread_mutex_unlock(&r->mu);
        if (stopping)
            break;
    }
    free(b.entries);
    free(b.items);
    free(b.gens);
    free(out.locks);
    return NULL;
}

/* ---------------------------------------------------------------- entries */

/* Wakes the thread if e is due before it would wake anyway. */
static void note_event(dlock__renewer *r, int64_t t)
{
    int64_t seen = atomic_load(&r->earliest_added_us);
    while (t < seen && !atomic_compare_exchange_weak(&r->earliest_added_us, &seen, t))
        ;
    int64_t wake = atomic_load(&r->wake_at_us);
    if (wake != 0 && t < wake) {
        pthread_mutex_lock(&r->mu);
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
}

int dlock__renewer_add(dlock__renewer *r, dlock__lease *e)
{
    int rc = DLOCK_OK;

    pthread_mutex_lock(&r->mu);
    if (!r->running && !r->stopping) {
        if (dlock__thread_start(&r->thread, run, r) != 0)
            rc = dlock__fail(DLOCK_ENOMEM, "cannot start the renewal thread");
        else
            r->running = 1;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc != DLOCK_OK)
        return rc;

    dlock__renewer_shard *sh = shard_of(r, e);
    pthread_mutex_lock(&sh->mu);
    e->gen++;
    e->in_flight = 0;
    e->lost = 0;
    e->why[0] = '\0';
    e->prev = sh->list.prev;
    e->next = &sh->list;
    sh->list.prev->next = e;
    sh->list.prev = e;
    e->linked = 1;
    int64_t t = next_event(e);
    pthread_mutex_unlock(&sh->mu);
    note_event(r, t);
    return DLOCK_OK;
}

int dlock__renewer_remove(dlock__renewer *r, dlock__lease *e, char *why, size_t why_len)
{
    dlock__renewer_shard *sh = shard_of(r, e);
    int lost;

    pthread_mutex_lock(&sh->mu);
    if (e->linked)
        unlink_locked(e);
    lost = e->lost;
    if (lost && why != NULL)
        snprintf(why, why_len, "%s", e->why);
    e->lost = 0;
    pthread_mutex_unlock(&sh->mu);
    return lost;
}

void dlock__renewer_update(dlock__renewer *r, dlock__lease *e, int renew, int64_t lease_ms,
                           int64_t valid_until_us)
{
    dlock__renewer_shard *sh = shard_of(r, e);

    pthread_mutex_lock(&sh->mu);
    int was_renewed = e->renew;
    e->renew = renew;
    if (lease_ms > 0)
        e->lease_ms = lease_ms;
    if (valid_until_us > 0) {
        e->valid_until_us = valid_until_us;
        e->last_ok_us = dlock__now_us();
    }
    if (!renew)
        e->due_us = DLOCK__NEVER;
    else if (!was_renewed)
        e->due_us = dlock__now_us();
    int64_t t = e->linked ? next_event(e) : DLOCK__NEVER;
    pthread_mutex_unlock(&sh->mu);
    if (t != DLOCK__NEVER)
        note_event(r, t);
}

void dlock__renewer_lock(dlock__renewer *r, dlock__lease *e)
{
    pthread_mutex_lock(&shard_of(r, e)->mu);
}

void dlock__renewer_unlock(dlock__renewer *r, dlock__lease *e)
{
    pthread_mutex_unlock(&shard_of(r, e)->mu);
}

int64_t dlock__renewer_valid_until(dlock__renewer *r, dlock__lease *e)
{
    dlock__renewer_shard *sh = shard_of(r, e);
    pthread_mutex_lock(&sh->mu);
    int64_t t = e->valid_until_us;
    pthread_mutex_unlock(&sh->mu);
    return t;
}

int dlock__renewer_check(dlock__renewer *r, dlock__lease *e, int64_t *left_us, char *why,
                         size_t why_len)
{
    dlock__renewer_shard *sh = shard_of(r, e);
    int rc = DLOCK_OK;
    int64_t now = dlock__now_us();

    pthread_mutex_lock(&sh->mu);
    if (e->lost) {
        snprintf(why, why_len, "%s", e->why);
        rc = DLOCK_ELOST;
    } else if (e->valid_until_us <= now) {
        /* The thread has not got round to it yet; the lease is over all
         * the same. */
        snprintf(why, why_len, "%s",
                 e->renew ? "lease ran out before a renewal succeeded" : "fixed lease expired");
        rc = DLOCK_ELOST;
    } else if (left_us != NULL) {
        *left_us = e->valid_until_us - now;
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}
