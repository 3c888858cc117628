/* SPDX-License-Identifier: MIT */
/* renewer.c - the client's lease threads and its sessions. See renewer.h
 * and backend/session.h for the contracts.
 *
 * Timing. A held lock renewed automatically is renewed every lease/3; a
 * queued waiter sends a heartbeat every waiter_lease/3; a session is kept
 * alive every lease/3. When the renewal thread wakes for the earliest due
 * entry it also takes every entry due within the next half period, so after
 * a few periods entries fall into step and a whole client's leases go out
 * together. An entry whose renewal failed is not pulled forward that way: it
 * waits out its retry delay, which doubles with each failure (jittered, at
 * most a period), so a store that refuses every renewal sees a few requests
 * per period, not a loop.
 *
 * Validity is
 *
 *     send time of the last successful renewal + lease - drift
 *
 * on CLOCK_MONOTONIC: the store started counting the lease after we sent, so
 * our end comes first, by at least the drift margin. A hold that lives by a
 * session is valid no longer than the session; the session's end of
 * validity is mirrored in an atomic so the watchdog can read it from any
 * shard without taking the session's lock.
 *
 * The watchdog sleeps until the earliest end of validity of any entry and
 * reports what ran out; it never waits on the store. Each thread is woken by
 * a new entry only when that entry needs it before it would wake anyway; an
 * entry added while the thread is scanning is noted in earliest_added_us,
 * which the thread reads before it goes to sleep. */
#include "renewer.h"

#include "../base/clock.h"
#include "../base/error.h"
#include "../base/random.h"
#include "../base/thread.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MIN_US  20000
#define RETRY_NOTE_US 1000000 /* an outage's retries are logged at info this often */

struct dlock__session {
    dlock__lease lease; /* its own entry (kind SESSION); owner: session_owner */
    dlock__renewer *renewer;
    _Atomic int refs;
    _Atomic int ended;              /* lost, or ended by the store */
    _Atomic int64_t valid_until_us; /* mirror of lease.valid_until_us */
    void *data;
    void (*free_data)(void *);
};

int64_t dlock__drift_us(int64_t lease_ms)
{
    /* Clock drift (1% + 2 ms, as Redlock's), and an allowance for the
     * watchdog waking late on a busy machine (5% of the lease, at most
     * 50 ms): it must report a loss before the store's lease ends. */
    int64_t allowance = lease_ms * 50 < 50000 ? lease_ms * 50 : 50000;
    return lease_ms * 10 + 2000 + allowance;
}

static int64_t period_us(const dlock__renewer *r, const dlock__lease *e)
{
    int64_t lease_ms = e->kind == DLOCK__RENEW_WAITER ? r->cfg->waiter_lease_ms : e->lease_ms;
    return lease_ms * 1000 / 3;
}

/* The delay before retrying e after `failures` failed renewals in a row. */
static int64_t retry_us(const dlock__renewer *r, const dlock__lease *e)
{
    int64_t period = period_us(r, e), t = period / 10;
    unsigned shift = e->failures > 7 ? 6 : e->failures - 1;
    char hex[5];

    if (t < RETRY_MIN_US)
        t = RETRY_MIN_US;
    t <<= shift;
    if (t > period && period > RETRY_MIN_US)
        t = period;
    /* +-25%: entries that failed together do not retry in lockstep */
    if (dlock__random_hex(hex, 2) == 0)
        t += (int64_t) (strtoul(hex, NULL, 16) % 1000) * t / 2000 - t / 4;
    return t;
}

static int64_t session_valid_until(const dlock__lease *e)
{
    return e->session != NULL ? atomic_load(&e->session->valid_until_us) : DLOCK__NEVER;
}

/* The end of validity of a held entry or session, its session's included. */
static int64_t valid_until(const dlock__lease *e)
{
    int64_t own = e->valid_until_us, of_session = session_valid_until(e);
    if (e->kind == DLOCK__RENEW_SESSION)
        return own;
    return own < of_session ? own : of_session;
}

static int watched_for_validity(const dlock__lease *e)
{
    return e->kind != DLOCK__RENEW_WAITER;
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

static void thread_init(dlock__renewer_thread *t)
{

    dlock__cond_init(&t->cv);
    atomic_init(&t->wake_at_us, 0);
    atomic_init(&t->earliest_added_us, DLOCK__NEVER);
}

void dlock__renewer_init(dlock__renewer *r, dlock__store *store, const dlock__client_cfg *cfg,
                         dlock__log *log)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    thread_init(&r->renewal);
    thread_init(&r->watchdog);
    for (unsigned i = 0; i < DLOCK__RENEWER_SHARDS; i++) {
        pthread_mutex_init(&r->shards[i].mu, NULL);
        pthread_cond_init(&r->shards[i].reported, NULL);
        r->shards[i].list.prev = r->shards[i].list.next = &r->shards[i].list;
    }
    r->store = store;
    r->cfg = cfg;
    r->log = log;
}

void dlock__renewer_stop(dlock__renewer *r)
{
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    pthread_cond_signal(&r->renewal.cv);
    pthread_cond_signal(&r->watchdog.cv);
    int running = r->running;
    r->running = 0;
    pthread_mutex_unlock(&r->mu);
    if (running) {
        pthread_join(r->renewal.thread, NULL);
        pthread_join(r->watchdog.thread, NULL);
    }
}

void dlock__renewer_fini(dlock__renewer *r)
{
    dlock__renewer_stop(r);
    for (size_t i = 0; i < r->nlost; i++)
        dlock__session_unref(r->lost_sessions[i]);
    free(r->lost_sessions);
    for (unsigned i = 0; i < DLOCK__RENEWER_SHARDS; i++) {
        dlock__lease *list = &r->shards[i].list;
        while (list->next != list)
            unlink_locked(list->next);
        pthread_mutex_destroy(&r->shards[i].mu);
        pthread_cond_destroy(&r->shards[i].reported);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->renewal.cv);
    pthread_cond_destroy(&r->watchdog.cv);
}

/* ---------------------------------------------------------------- reports */

/* Entries whose loss is to be reported once no lock is held, and the
 * sessions among them to end in the store once that is done. */
typedef struct reports {
    dlock__lease **entries;
    size_t n, cap;
    dlock__session **ended;
    size_t nended, ended_cap;
} reports;

/* With the entry's shard locked: marks e lost and queues the report. */
static void lose_locked(dlock__lease *e, reports *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void lose_locked(dlock__lease *e, reports *out, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    dlock__fit_words(e->why, sizeof e->why, vsnprintf(e->why, sizeof e->why, fmt, ap));
    va_end(ap);
    e->lost = 1;
    unlink_locked(e);
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        dlock__lease **grown = realloc(out->entries, cap * sizeof *grown);
        if (grown == NULL)
            return; /* reported by the owner's next call all the same */
        out->entries = grown;
        out->cap = cap;
    }
    e->owner->ref(e);
    e->reporting = 1;
    out->entries[out->n++] = e;
}

static const char *store_label(const dlock__renewer *r)
{
    return r->store != NULL ? r->store->label : "the store";
}

/* What a session's end means, in the log: on a store whose locks keep
 * leases of their own (no DLOCK_CAP_SESSION: a lock table's pooled
 * connections are sessions of the renewer) it is a connection's end, and
 * no lock goes with it. */
static const char *session_words(const dlock__renewer *r, const char *what)
{
    int own_leases = r->store != NULL && !(r->store->caps & DLOCK_CAP_SESSION);
    if (strcmp(what, "ended") == 0)
        return own_leases ? "a connection to the store ended (no lock lives by it: each keeps "
                            "its own lease)"
                          : "session ended (a lock held in it, if any, is lost and reported)";
    return own_leases ? "a connection to the store was lost (no lock lives by it: each keeps "
                        "its own lease)"
                      : "session lost (a lock held in it, if any, is lost and reported)";
}

/* Every loss is logged here, whoever found it (threads, verify). */
static void log_loss(dlock__renewer *r, dlock__lease *e)
{
    char why[sizeof e->why];

    /* a session's loss is news (info): each lock held in it (if any: a
     * session may only have carried waits) is logged as lost by itself */
    int level = e->kind == DLOCK__RENEW_SESSION ? DLOCK_LOG_INFO : DLOCK_LOG_ERROR;
    if (!dlock__log_on(r->log, level))
        return;
    dlock__renewer_lock(r, e);
    snprintf(why, sizeof why, "%s", e->why);
    dlock__renewer_unlock(r, e);
    if (e->kind == DLOCK__RENEW_SESSION)
        dlock__log_emit(r->log, level, "%s: %s: %s", store_label(r), session_words(r, "lost"), why);
    else
        dlock__log_emit(r->log, DLOCK_LOG_ERROR, "lock '%s' lost: %s", e->name ? e->name : "?",
                        why);
}

/* Set while this thread runs a loss report (an on_lost callback): a call
 * the callback makes that would wait for reports under way must not wait
 * for its own. */
static _Thread_local int reporting_here;

static void report(dlock__renewer *r, reports *out)
{
    for (size_t i = 0; i < out->n; i++) {
        dlock__lease *e = out->entries[i];
        log_loss(r, e);
        reporting_here = 1;
        e->owner->report(e);
        reporting_here = 0;
        dlock__renewer_shard *sh = shard_of(r, e);
        pthread_mutex_lock(&sh->mu);
        e->reporting = 0;
        pthread_cond_broadcast(&sh->reported);
        pthread_mutex_unlock(&sh->mu);
        e->owner->unref(e);
    }
    out->n = 0;
}

/* ---------------------------------------------------------------- sleeping */

/* Wakes thread t if an event at `at` comes before it would wake anyway. */
static void note_event(dlock__renewer *r, dlock__renewer_thread *t, int64_t at)
{
    int64_t seen = atomic_load(&t->earliest_added_us);
    while (at < seen && !atomic_compare_exchange_weak(&t->earliest_added_us, &seen, at))
        ;
    int64_t wake = atomic_load(&t->wake_at_us);
    if (wake != 0 && at < wake) {
        pthread_mutex_lock(&r->mu);
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&r->mu);
    }
}

/* Sleeps until `next` or until an earlier event is noted; returns whether
 * to stop. */
static int sleep_until(dlock__renewer *r, dlock__renewer_thread *t, int64_t next)
{
    pthread_mutex_lock(&r->mu);
    /* Announce the plan first, then pick up what was noted during the scan:
     * an event noted after this exchange sees the plan and signals. */
    atomic_store(&t->wake_at_us, next);
    int64_t added = atomic_exchange(&t->earliest_added_us, DLOCK__NEVER);
    if (added < next)
        next = added;
    if (t == &r->renewal && r->nlost > 0)
        next = 0; /* sessions to end in the store */
    if (!r->stopping && next > dlock__now_us()) {
        atomic_store(&t->wake_at_us, next);
        if (next == DLOCK__NEVER) {
            pthread_cond_wait(&t->cv, &r->mu);
        } else {
            struct timespec ts = dlock__timespec(next);
            pthread_cond_timedwait(&t->cv, &r->mu, &ts);
        }
    }
    atomic_store(&t->wake_at_us, 0);
    int stopping = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return stopping;
}

/* ---------------------------------------------------------------- the watchdog */

static void queue_lost_session(dlock__renewer *r, dlock__session *s);

/* With e's shard locked: why e's validity ran out unrenewed, for its loss
 * report: the last renewal's failure, or a renewal still out with no
 * answer (a store that stopped answering fails nothing before the
 * validity ends: its request is still waited for). */
static void why_unrenewed(dlock__renewer *r, const dlock__lease *e, int64_t now, char *out,
                          size_t len)
{
    if (e->in_flight && (e->why[0] == '\0' || e->failures == 0))
        snprintf(out, len,
                 "%.60s has not answered the renewal sent %lld ms ago; it may be "
                 "stopped, hung or overloaded%s%.60s",
                 store_label(r), (long long) ((now - e->in_flight_us) / 1000),
                 e->why[0] ? "; before it: " : "", e->why);
    else
        snprintf(out, len, "%s", e->why);
}

/* With the session's shard locked: the session's validity ran out. Its
 * holds follow on their own (their validity is bounded by it); the store is
 * asked to end it by the renewal thread. */
static void lose_session_locked(dlock__renewer *r, dlock__lease *e, reports *out, int64_t now)
{
    dlock__session *s = e->session;
    char error[2 * sizeof e->why]; /* (cut to e->why's size by lose_locked) */

    why_unrenewed(r, e, now, error, sizeof error);
    lose_locked(e, out, "session lost: no successful renewal for %lld ms%s%s%s",
                (long long) ((now - e->last_ok_us) / 1000), error[0] ? " (" : "", error,
                error[0] ? ")" : "");
    atomic_store(&s->ended, 1); /* after its why: readers of `ended` read the why */
    if (out->nended == out->ended_cap) {
        size_t cap = out->ended_cap ? out->ended_cap * 2 : 8;
        dlock__session **grown = realloc(out->ended, cap * sizeof *grown);
        if (grown == NULL) {
            queue_lost_session(r, s); /* ended late is worse than told late */
            return;
        }
        out->ended = grown;
        out->ended_cap = cap;
    }
    dlock__session_ref(s);
    out->ended[out->nended++] = s;
}

/* After report(): the sessions the scan found lost go to the renewal
 * thread, which ends them in the store (deleting their keys or nodes).
 * Not before: until every hold of a session is told of its loss, another
 * client must not be able to take its locks. */
static void end_reported_sessions(dlock__renewer *r, reports *out)
{
    for (size_t i = 0; i < out->nended; i++) {
        queue_lost_session(r, out->ended[i]);
        dlock__session_unref(out->ended[i]);
    }
    out->nended = 0;
}

/* The store is asked to end s (backend session_lost) by the renewal
 * thread: a session lost here must not live on in the store, holding its
 * locks from everyone while nobody holds them. */
static void queue_lost_session(dlock__renewer *r, dlock__session *s)
{
    pthread_mutex_lock(&r->mu);
    if (r->nlost == r->lost_cap) {
        size_t cap = r->lost_cap ? r->lost_cap * 2 : 8;
        dlock__session **grown = realloc(r->lost_sessions, cap * sizeof *grown);
        if (grown != NULL) {
            r->lost_sessions = grown;
            r->lost_cap = cap;
        }
    }
    if (r->nlost < r->lost_cap) {
        dlock__session_ref(s);
        r->lost_sessions[r->nlost++] = s;
        pthread_cond_signal(&r->renewal.cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* With the entry's shard locked: a renewed lease ran out; the last
 * renewal's error, if any, says why. */
static void lose_expired_locked(dlock__renewer *r, dlock__lease *e, reports *out, int64_t now)
{
    char error[2 * sizeof e->why]; /* (cut to e->why's size by lose_locked) */

    why_unrenewed(r, e, now, error, sizeof error);
    lose_locked(e, out, "lease ran out: no successful renewal for %lld ms%s%s%s",
                (long long) ((now - e->last_ok_us) / 1000), error[0] ? " (" : "", error,
                error[0] ? ")" : "");
}

/* One pass: reports every entry whose validity ran out or whose session
 * ended; returns the earliest end of validity left. Sessions first, every
 * shard of them, so that the holds of a session lost in this pass are
 * lost in it too (whatever shard they are in), and reported with it. */
static int64_t watch_scan(dlock__renewer *r, reports *out)
{
    int64_t next = DLOCK__NEVER;

    for (unsigned k = 0; k < 2 * DLOCK__RENEWER_SHARDS; k++) {
        int sessions = k < DLOCK__RENEWER_SHARDS;
        dlock__renewer_shard *sh = &r->shards[k % DLOCK__RENEWER_SHARDS];
        int64_t now = dlock__now_us();
        pthread_mutex_lock(&sh->mu);
        for (dlock__lease *e = sh->list.next, *following; e != &sh->list; e = following) {
            following = e->next;
            if (!watched_for_validity(e) || sessions != (e->kind == DLOCK__RENEW_SESSION))
                continue;
            int64_t until = valid_until(e);
            if (sessions) {
                if (until <= now)
                    lose_session_locked(r, e, out, now);
                else if (until < next)
                    next = until;
                continue;
            }
            if (e->session != NULL && atomic_load(&e->session->ended)) {
                lose_locked(e, out, "%s",
                            e->session->lease.why[0] ? e->session->lease.why : "its session ended");
            } else if (until <= now) {
                if (until < e->valid_until_us)
                    lose_locked(e, out, "its session's validity ran out");
                else if (e->renew)
                    lose_expired_locked(r, e, out, now);
                else
                    lose_locked(e, out, "fixed lease of %lld ms expired", (long long) e->lease_ms);
            } else if (until < next) {
                next = until;
            }
        }
        pthread_mutex_unlock(&sh->mu);
    }
    return next;
}

static void *watchdog_run(void *arg)
{
    dlock__renewer *r = arg;
    reports out = {0};

    for (;;) {
        int64_t next = watch_scan(r, &out);
        report(r, &out);
        end_reported_sessions(r, &out);
        if (sleep_until(r, &r->watchdog, next))
            break;
    }
    free(out.entries);
    free(out.ended);
    return NULL;
}

/* ---------------------------------------------------------------- renewals */

/* A batch out to the store. Each item's token is a copy: the handle makes
 * a new token for its next acquisition once the entry is off the renewer,
 * which may be while this batch is still out. */
typedef char batch_token[72];
typedef struct batch {
    dlock__lease **entries;
    dlock__renewal *items;
    unsigned *gens;
    batch_token *tokens;
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
        batch_token *tokens = realloc(b->tokens, cap * sizeof *tokens);
        if (tokens == NULL)
            return -1;
        b->tokens = tokens;
        for (size_t i = 0; i < b->n; i++)
            if (b->items[i].token != NULL)
                b->items[i].token = b->tokens[i];
        b->cap = cap;
    }
    b->entries[b->n] = e;
    b->gens[b->n] = e->gen;
    if (e->token != NULL)
        snprintf(b->tokens[b->n], sizeof b->tokens[b->n], "%s", e->token);
    b->items[b->n] = (dlock__renewal){.kind = e->kind,
                                      .lock = e->lock,
                                      .token = e->token != NULL ? b->tokens[b->n] : NULL,
                                      .held_fence = e->fence,
                                      .lease_ms = e->lease_ms,
                                      .session = e->session,
                                      .result = DLOCK__RENEW_FAILED};
    /* the hold may leave its session while the batch is out (dlock_extend) */
    if (e->kind == DLOCK__RENEW_HOLD && e->session != NULL)
        dlock__session_ref(e->session);
    b->n++;
    return 0;
}

/* What a batch did, for the log (written after the shards are unlocked).
 * Counted by what the user has, one count per kind of entry (the batch's
 * entries, failed ones, recovered ones): a waiter's only lease is its
 * place in the queue, and a session's lease is not a lock. */
enum { NOTE_HOLD, NOTE_WAITER, NOTE_SESSION, NOTE_KINDS };

typedef struct batch_note {
    size_t renewed; /* applied, and the store answered it kept (not lost meanwhile) */
    size_t failed, recovered, gone_waiters;
    size_t newly_failed; /* failed after a success: the first failure of an outage */
    size_t in_batch[NOTE_KINDS], failed_of[NOTE_KINDS], recovered_of[NOTE_KINDS];
    /* of an entry the batch holds a reference to, by kind (not the session's) */
    const char *failed_name[NOTE_KINDS], *recovered_name[NOTE_KINDS];
    unsigned most_failures; /* in a row, before one recovered */
    int64_t retry_us;       /* the soonest retry */
    int64_t valid_left_us;  /* the least validity left of a failed entry */
} batch_note;

static int note_kind(const dlock__lease *e)
{
    switch (e->kind) {
    case DLOCK__RENEW_WAITER:
        return NOTE_WAITER;
    case DLOCK__RENEW_SESSION:
        return NOTE_SESSION;
    default:
        return NOTE_HOLD;
    }
}

/* With the entry's shard locked: notes e's result before it is applied. */
static void note_locked(batch_note *note, const dlock__lease *e, const dlock__renewal *it,
                        int64_t now)
{
    int kind = note_kind(e);
    /* a lock's name, NULL for the client's session */
    const char *name = kind == NOTE_SESSION ? NULL : e->name;

    note->in_batch[kind]++;
    if (it->result == DLOCK__RENEW_OK || it->result == DLOCK__RENEW_GRANTED)
        note->renewed++;
    if (it->result == DLOCK__RENEW_FAILED) {
        note->failed++;
        note->failed_of[kind]++;
        if (note->failed_name[kind] == NULL)
            note->failed_name[kind] = name;
        if (e->failures == 0)
            note->newly_failed++;
        if (e->kind != DLOCK__RENEW_WAITER) {
            int64_t left = valid_until(e) - now;
            if (note->failed == 1 || left < note->valid_left_us)
                note->valid_left_us = left;
        }
    } else if (e->failures > 0) {
        note->recovered++;
        note->recovered_of[kind]++;
        if (note->recovered_name[kind] == NULL)
            note->recovered_name[kind] = name;
        if (e->failures > note->most_failures)
            note->most_failures = e->failures;
    }
    if (it->result == DLOCK__RENEW_GONE && e->kind == DLOCK__RENEW_WAITER)
        note->gone_waiters++;
}

/* Writes what of[] counts, of the batch's in_batch[], in the user's words:
 * "the held lock 'a'", "the queue place for 'a'", "the session",
 * "2 of 3 held locks ('a' and another)", joined by ", " and " and ". */
static void describe(char *buf, size_t len, const batch_note *note, const size_t *of,
                     const char *const *names)
{
    static const char *const one[NOTE_KINDS] = {"the held lock", "the queue place for",
                                                "the session"};
    static const char *const many[NOTE_KINDS] = {"held locks", "queue places", "sessions"};
    size_t used = 0, parts = 0, total = 0;

    for (int k = 0; k < NOTE_KINDS; k++)
        parts += of[k] > 0;
    buf[0] = '\0';
    for (int k = 0; k < NOTE_KINDS && used < len; k++) {
        if (of[k] == 0)
            continue;
        total++;
        const char *sep = total == 1 ? "" : total == parts ? " and " : ", ";
        const char *name = names[k];
        int w;
        if (note->in_batch[k] == 1 && name != NULL)
            w = snprintf(buf + used, len - used, "%s%s '%s'", sep, one[k], name);
        else if (note->in_batch[k] == 1)
            w = snprintf(buf + used, len - used, "%s%s", sep, one[k]);
        else if (name != NULL)
            w = snprintf(buf + used, len - used, "%s%zu of %zu %s ('%s'%s)", sep, of[k],
                         note->in_batch[k], many[k], name,
                         of[k] == 1   ? ""
                         : of[k] == 2 ? " and another"
                                      : " and others");
        else
            w = snprintf(buf + used, len - used, "%s%zu of %zu %s", sep, of[k], note->in_batch[k],
                         many[k]);
        if (w < 0)
            break;
        used += (size_t) w < len - used ? (size_t) w : len - used - 1;
    }
}

static void log_batch(dlock__renewer *r, const batch_note *note, const char *error, int64_t sent_us,
                      int64_t now)
{
    /* A warning when an outage starts; its retries at info every
     * RETRY_NOTE_US (the entries' retries are jittered apart: one line
     * each would be a flood at -v), each of them at debug. */
    int level = DLOCK_LOG_DEBUG;
    char what[400];
    if (note->newly_failed > 0)
        level = DLOCK_LOG_WARN;
    else if (now >= r->next_retry_note_us)
        level = DLOCK_LOG_INFO;
    if (note->failed > 0 && level != DLOCK_LOG_DEBUG) {
        r->next_retry_note_us = now + RETRY_NOTE_US;
        r->recovery_noted = 0; /* a failure said at info: its end is worth a line */
    }
    if (note->failed > 0 && dlock__log_on(r->log, level)) {
        char left[64] = "";
        if (note->valid_left_us > 0)
            snprintf(left, sizeof left, "; %.3f s of validity left",
                     (double) note->valid_left_us / 1e6);
        describe(what, sizeof what, note, note->failed_of, note->failed_name);
        /* the store's label once: most errors begin with it too */
        const char *label = store_label(r), *why = error[0] ? error : "no answer";
        size_t n = strlen(label);
        if (strncmp(why, label, n) == 0 && strncmp(why + n, ": ", 2) == 0)
            why += n + 2;
        dlock__log_emit(r->log, level, "%s: renewal failed for %s: %s; retrying in %lld ms%s",
                        label, what, why,
                        (long long) (note->retry_us >= 1000 ? note->retry_us / 1000 : 1), left);
    }
    /* One line at info per outage: the entries' retries are jittered
     * apart, so they succeed again one batch after another (a session,
     * then its hold; a hundred locks), each of the others at debug. */
    int recovered_level = r->recovery_noted ? DLOCK_LOG_DEBUG : DLOCK_LOG_INFO;
    if (note->recovered > 0 && dlock__log_on(r->log, recovered_level)) {
        describe(what, sizeof what, note, note->recovered_of, note->recovered_name);
        dlock__log_emit(
            r->log, recovered_level, "%s: renewals succeed again (%s, after %u failed attempt%s)",
            store_label(r), what, note->most_failures, note->most_failures == 1 ? "" : "s");
    }
    if (note->recovered > 0)
        r->recovery_noted = 1;
    /* not the batch's size - failed: an entry lost or dropped while its
     * renewal was out is neither, and a lease the store said is gone was
     * not renewed */
    DLOCK__LOG(r->log, DLOCK_LOG_DEBUG,
               "%s: renewed %zu of %zu (%zu held locks, %zu queue places, %zu sessions) in "
               "%.1f ms",
               store_label(r), note->renewed,
               note->in_batch[NOTE_HOLD] + note->in_batch[NOTE_WAITER] +
                   note->in_batch[NOTE_SESSION],
               note->in_batch[NOTE_HOLD], note->in_batch[NOTE_WAITER], note->in_batch[NOTE_SESSION],
               (double) (now - sent_us) / 1000);
}

/* With the entry's shard locked: applies one result of a batch. */
static void apply_locked(dlock__renewer *r, dlock__lease *e, const dlock__renewal *it,
                         int64_t sent_us, int64_t now, const char *error, int cut_short,
                         reports *out)
{
    e->in_flight = 0;
    if (it->result == DLOCK__RENEW_FAILED) {
        e->failures++;
        int64_t delay = retry_us(r, e);
        /* a retry is due before the validity ends, while it can still
         * keep the hold (a server silent for a while answers a late one):
         * at most half of what is left */
        int64_t left = watched_for_validity(e) ? valid_until(e) - now : DLOCK__NEVER;
        if (left > 0 && delay > left / 2)
            delay = left / 2 > RETRY_MIN_US ? left / 2 : RETRY_MIN_US;
        e->due_us = now + delay;
        /* named if the lease runs out; a last retry the validity cut short
         * ("no reply in 0 ms") does not hide why the full ones failed */
        if (error[0] != '\0' && e->kind != DLOCK__RENEW_WAITER && !(cut_short && e->why[0]))
            dlock__fit_words(e->why, sizeof e->why, snprintf(e->why, sizeof e->why, "%s", error));
        /* The store may be down, which a waiter parked behind a holder
         * would learn only when the holder's lease ends: the first failure
         * in a row wakes this waiter (its heartbeat failed) or every waiter
         * of the client (a session's or a hold's renewal), to try once
         * itself; one the store does not answer starts riding the outage,
         * within unreachable_wait (acquire.c). */
        if (e->failures == 1)
            dlock__board_recheck(r->store->host.board,
                                 e->kind == DLOCK__RENEW_WAITER ? e->token : NULL);
        return;
    }
    e->failures = 0;
    if (e->kind == DLOCK__RENEW_WAITER) {
        dlock__board *board = r->store->host.board;
        switch (it->result) {
        case DLOCK__RENEW_OK:
            dlock__board_queued(board, e->token, e->wait_id, sent_us);
            e->due_us = sent_us + period_us(r, e);
            break;
        case DLOCK__RENEW_GRANTED:
            dlock__board_grant(board, e->token, e->wait_id, it->fence);
            e->due_us = DLOCK__NEVER;
            break;
        default:
            dlock__board_recheck(board, e->token);
            e->due_us = DLOCK__NEVER;
            break;
        }
        return;
    }
    if (it->result == DLOCK__RENEW_GONE) {
        if (e->kind == DLOCK__RENEW_SESSION) {
            lose_locked(e, out, "the store ended the session");
            atomic_store(&e->session->ended, 1); /* after its why */
            queue_lost_session(r, e->session);   /* ended there for sure */
            note_event(r, &r->watchdog, now);    /* its holds go too */
        } else if (e->session != NULL && atomic_load(&e->session->ended)) {
            /* its session ended first (a connection lost): that is why
             * (its why is written before ended is set, and never again) */
            lose_locked(e, out, "its session ended: %s", e->session->lease.why);
        } else if (it->why != NULL) {
            lose_locked(e, out, "%s", it->why);
        } else {
            lose_locked(e, out,
                        e->session != NULL
                            ? "the store no longer has this lock (it was force-unlocked or deleted)"
                            : "renewal refused: the lock expired, was deleted, or is held by "
                              "another owner");
        }
        return;
    }
    e->why[0] = '\0';
    e->due_us = sent_us + period_us(r, e);
    if (e->session != NULL && e->kind == DLOCK__RENEW_HOLD)
        return; /* checked: its validity is the session's */
    e->last_ok_us = sent_us;
    e->valid_until_us = sent_us + e->lease_ms * 1000 - dlock__drift_us(e->lease_ms);
    if (e->kind == DLOCK__RENEW_SESSION)
        atomic_store(&e->session->valid_until_us, e->valid_until_us);
}

/* One pass: collects due entries into b (marking them in flight; *deadline
 * becomes the earliest end of validity among them) and returns when the
 * next one is due. */
static int64_t renew_scan(dlock__renewer *r, batch *b, int64_t *deadline)
{
    int64_t next = DLOCK__NEVER;

    for (unsigned i = 0; i < DLOCK__RENEWER_SHARDS; i++) {
        dlock__renewer_shard *sh = &r->shards[i];
        int64_t now = dlock__now_us();
        pthread_mutex_lock(&sh->mu);
        for (dlock__lease *e = sh->list.next; e != &sh->list; e = e->next) {
            if (e->in_flight)
                continue;
            /* Falling into step: take what is due soon too, unless it is
             * waiting out a retry delay. */
            int64_t window = e->failures == 0 ? period_us(r, e) / 2 : 0;
            if (e->due_us <= now + window && batch_push(b, e) == 0) {
                e->in_flight = 1;
                e->in_flight_us = now;
                e->owner->ref(e); /* its owner may drop it meanwhile */
                int64_t until = watched_for_validity(e) ? valid_until(e) : DLOCK__NEVER;
                if (until < *deadline)
                    *deadline = until;
                continue;
            }
            if (e->due_us < next)
                next = e->due_us;
        }
        pthread_mutex_unlock(&sh->mu);
    }
    return next;
}

/* Asks the store to end the sessions the watchdog gave up on. */
static void end_lost_sessions(dlock__renewer *r)
{
    for (;;) {
        pthread_mutex_lock(&r->mu);
        dlock__session *s = r->nlost > 0 ? r->lost_sessions[--r->nlost] : NULL;
        pthread_mutex_unlock(&r->mu);
        if (s == NULL)
            return;
        if (r->store->backend->session_lost != NULL)
            r->store->backend->session_lost(r->store, s,
                                            dlock__now_us() + r->cfg->command_timeout_ms * 1000);
        dlock__session_unref(s);
    }
}

static void *renewal_run(void *arg)
{
    dlock__renewer *r = arg;
    batch b = {0};
    reports out = {0};
    char error[200];

    for (;;) {
        end_lost_sessions(r);
        b.n = 0;
        int64_t deadline = dlock__now_us() + r->cfg->command_timeout_ms * 1000;
        int64_t next = renew_scan(r, &b, &deadline);
        if (b.n == 0) {
            if (sleep_until(r, &r->renewal, next))
                break;
            continue;
        }

        int64_t sent = dlock__now_us();
        /* the batch's time was cut short by a validity about to end (its
         * failure, "no reply in 3 ms", says little) */
        int cut_short = deadline - sent < r->cfg->command_timeout_ms * 1000 / 10;
        error[0] = '\0';
        dlock__clear_error();
        /* A store whose batch is several requests may answer OK with
         * some items failed: the detail its failing request left says why
         * (the call began with none), else the batch's line said "no answer" */
        if (r->store->backend->renew(r->store, b.items, b.n, deadline) != DLOCK_OK ||
            dlock_errmsg()[0] != '\0')
            dlock__fit_words(error, sizeof error,
                             snprintf(error, sizeof error, "%s", dlock_errmsg()));

        int64_t now = dlock__now_us();
        batch_note note = {0};
        for (size_t i = 0; i < b.n; i++) {
            dlock__lease *e = b.entries[i];
            dlock__renewer_shard *sh = shard_of(r, e);
            pthread_mutex_lock(&sh->mu);
            if (e->linked && e->gen == b.gens[i]) {
                note_locked(&note, e, &b.items[i], now);
                apply_locked(r, e, &b.items[i], sent, now, error, cut_short, &out);
                if (b.items[i].result == DLOCK__RENEW_FAILED &&
                    (note.failed == 1 || e->due_us - now < note.retry_us))
                    note.retry_us = e->due_us - now;
            } else {
                e->in_flight = 0;
            }
            pthread_mutex_unlock(&sh->mu);
        }
        report(r, &out);
        log_batch(r, &note, error, sent, now); /* names: the batch holds its entries */
        for (size_t i = 0; i < b.n; i++) {
            if (b.items[i].kind == DLOCK__RENEW_HOLD)
                dlock__session_unref(b.items[i].session);
            b.entries[i]->owner->unref(b.entries[i]);
        }

        pthread_mutex_lock(&r->mu);
        int stopping = r->stopping;
        pthread_mutex_unlock(&r->mu);
        if (stopping)
            break;
    }
    free(b.entries);
    free(b.items);
    free(b.gens);
    free(b.tokens);
    free(out.entries);
    return NULL;
}

/* ---------------------------------------------------------------- entries */

static int start_threads(dlock__renewer *r)
{
    int rc = DLOCK_OK;

    pthread_mutex_lock(&r->mu);
    if (!r->running && !r->stopping) {
        if (dlock__thread_start(&r->renewal.thread, renewal_run, r) != 0) {
            rc = dlock__fail(DLOCK_ENOMEM, "cannot start the renewal thread");
        } else if (dlock__thread_start(&r->watchdog.thread, watchdog_run, r) != 0) {
            r->stopping = 1;
            pthread_cond_signal(&r->renewal.cv);
            pthread_mutex_unlock(&r->mu);
            pthread_join(r->renewal.thread, NULL);
            pthread_mutex_lock(&r->mu);
            r->stopping = 0;
            rc = dlock__fail(DLOCK_ENOMEM, "cannot start the lease watchdog thread");
        } else {
            r->running = 1;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* Tells the threads about e's next events (shard unlocked). */
static void note_entry(dlock__renewer *r, int64_t due, int64_t until)
{
    if (due != DLOCK__NEVER)
        note_event(r, &r->renewal, due);
    if (until != DLOCK__NEVER)
        note_event(r, &r->watchdog, until);
}

int dlock__renewer_add(dlock__renewer *r, dlock__lease *e)
{
    int rc = start_threads(r);

    if (rc != DLOCK_OK)
        return rc;
    dlock__renewer_shard *sh = shard_of(r, e);
    pthread_mutex_lock(&sh->mu);
    e->gen++;
    e->in_flight = 0;
    e->failures = 0;
    e->lost = 0;
    e->why[0] = '\0';
    e->prev = sh->list.prev;
    e->next = &sh->list;
    sh->list.prev->next = e;
    sh->list.prev = e;
    e->linked = 1;
    int64_t due = e->due_us, until = watched_for_validity(e) ? valid_until(e) : DLOCK__NEVER;
    pthread_mutex_unlock(&sh->mu);
    note_entry(r, due, until);
    return DLOCK_OK;
}

int dlock__renewer_remove(dlock__renewer *r, dlock__lease *e, char *why, size_t why_len)
{
    dlock__renewer_shard *sh = shard_of(r, e);
    dlock__session *session = NULL;
    int lost;

    pthread_mutex_lock(&sh->mu);
    if (e->linked)
        unlink_locked(e);
    lost = e->lost;
    if (lost && why != NULL)
        snprintf(why, why_len, "%s", e->why);
    e->lost = 0;
    if (e->kind == DLOCK__RENEW_HOLD) {
        session = e->session;
        e->session = NULL;
    }
    pthread_mutex_unlock(&sh->mu);
    if (session != NULL)
        dlock__session_unref(session);
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
    int64_t due = e->linked ? e->due_us : DLOCK__NEVER;
    int64_t until = e->linked ? valid_until(e) : DLOCK__NEVER;
    pthread_mutex_unlock(&sh->mu);
    note_entry(r, due, until);
}

int dlock__renewer_lose(dlock__renewer *r, dlock__lease *e, const char *why)
{
    dlock__renewer_shard *sh = shard_of(r, e);
    reports out = {0};
    int lost = 0;

    pthread_mutex_lock(&sh->mu);
    if (e->linked && !e->lost) {
        lose_locked(e, &out, "%s", why);
        lost = 1;
    }
    pthread_mutex_unlock(&sh->mu);
    report(r, &out);
    free(out.entries);
    return lost;
}

void dlock__renewer_wait_reported(dlock__renewer *r, dlock__lease *e)
{
    dlock__renewer_shard *sh = shard_of(r, e);

    if (reporting_here)
        return; /* called from an on_lost callback: its own report is under way */
    pthread_mutex_lock(&sh->mu);
    while (e->reporting)
        pthread_cond_wait(&sh->reported, &sh->mu);
    pthread_mutex_unlock(&sh->mu);
}

void dlock__renewer_leave_session(dlock__renewer *r, dlock__lease *e)
{
    dlock__renewer_shard *sh = shard_of(r, e);

    pthread_mutex_lock(&sh->mu);
    dlock__session *s = e->session;
    e->session = NULL;
    pthread_mutex_unlock(&sh->mu);
    dlock__session_unref(s);
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
    int64_t t = valid_until(e);
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
    int64_t until = valid_until(e);
    if (e->lost) {
        snprintf(why, why_len, "%s", e->why);
        rc = DLOCK_ELOST;
    } else if (e->session != NULL && atomic_load(&e->session->ended)) {
        snprintf(why, why_len, "its session ended");
        rc = DLOCK_ELOST;
    } else if (until <= now) {
        /* The watchdog has not got round to it yet; the lease is over all
         * the same. */
        snprintf(why, why_len, "%s",
                 until < e->valid_until_us ? "its session's validity ran out"
                 : e->renew                ? "lease ran out before a renewal succeeded"
                                           : "fixed lease expired");
        rc = DLOCK_ELOST;
    } else if (left_us != NULL) {
        *left_us = until - now;
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

/* ---------------------------------------------------------------- sessions */

static dlock__session *session_of(dlock__lease *e)
{
    return (dlock__session *) (void *) e; /* the entry is the session's first member */
}

static void session_entry_ref(dlock__lease *e)
{
    dlock__session_ref(session_of(e));
}

static void session_entry_unref(dlock__lease *e)
{
    dlock__session_unref(session_of(e));
}

static void session_entry_report(dlock__lease *e)
{
    (void) e; /* its holds report themselves */
}

static const dlock__lease_owner session_owner = {
    .ref = session_entry_ref,
    .unref = session_entry_unref,
    .report = session_entry_report,
};

int dlock__session_start(dlock__sessions *r, int64_t lease_ms, int64_t sent_us, void *data,
                         void (*free_data)(void *), dlock__session **out)
{
    dlock__session *s = calloc(1, sizeof *s);
    int rc;

    *out = NULL;
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->renewer = r;
    atomic_init(&s->refs, 1);
    atomic_init(&s->ended, 0);
    s->data = data;
    s->free_data = free_data;
    s->lease.kind = DLOCK__RENEW_SESSION;
    s->lease.owner = &session_owner;
    s->lease.session = s;
    s->lease.lease_ms = lease_ms;
    s->lease.renew = 1;
    s->lease.last_ok_us = sent_us;
    s->lease.valid_until_us = sent_us + lease_ms * 1000 - dlock__drift_us(lease_ms);
    s->lease.due_us = sent_us + lease_ms * 1000 / 3;
    atomic_init(&s->valid_until_us, s->lease.valid_until_us);
    rc = dlock__renewer_add(r, &s->lease);
    if (rc != DLOCK_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return DLOCK_OK;
}

void *dlock__session_data(const dlock__session *s)
{
    return s->data;
}

int64_t dlock__session_lease_ms(const dlock__session *s)
{
    return s->lease.lease_ms;
}

int dlock__session_alive(dlock__session *s)
{
    return !atomic_load(&s->ended) && atomic_load(&s->valid_until_us) > dlock__now_us();
}

void dlock__session_ref(dlock__session *s)
{
    atomic_fetch_add(&s->refs, 1);
}

static void session_release(dlock__session *s)
{
    if (s->free_data != NULL)
        s->free_data(s->data);
    free(s);
}

void dlock__session_unref(dlock__session *s)
{
    if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1)
        session_release(s);
}

void dlock__session_end(dlock__session *s, const char *why)
{
    dlock__renewer *r = s->renewer;
    dlock__renewer_shard *sh = shard_of(r, &s->lease);

    pthread_mutex_lock(&sh->mu);
    int ends = !atomic_load(&s->ended);
    if (ends) {
        snprintf(s->lease.why, sizeof s->lease.why, "%s", why);
        atomic_store(&s->ended, 1);
        if (s->lease.linked)
            unlink_locked(&s->lease);
    }
    pthread_mutex_unlock(&sh->mu);
    pthread_mutex_lock(&r->mu);
    int closing = r->stopping; /* the client closes: an end, not a failure */
    pthread_mutex_unlock(&r->mu);
    /* news (info) when something depends on it (a hold, an attempt: a
     * reference beside the store's), each lock held in it logged as lost
     * by itself; an idle pooled connection's end is no news (debug) */
    int depended = atomic_load(&s->refs) > 1;
    if (ends)
        DLOCK__LOG(r->log, closing || !depended ? DLOCK_LOG_DEBUG : DLOCK_LOG_INFO, "%s: %s: %s",
                   store_label(r), session_words(r, "ended"), why);
    note_event(r, &r->watchdog, dlock__now_us()); /* its holds go now */
    dlock__session_unref(s);
}
