/* SPDX-License-Identifier: MIT */
/* lock.c - a lock in the SQLite store: take, give back, keep alive.
 *
 * A hold is one row of dlock_hold (name, owner token, expiry, the holding
 * process). A contender first looks in a read transaction (WAL readers
 * never wait); only when nobody else holds the name live does it take the
 * write lock (BEGIN IMMEDIATE), look again, delete the rows that are no
 * longer holds (rows.c: an earlier boot, an expired lease, a dead
 * process), count the name's fence up and write its row, all in one
 * transaction. The fence counter (dlock_fence) is a row per name that is
 * only ever incremented and never deleted, so fences strictly increase
 * for every new holder, whatever happened to the rows of the holds.
 *
 * SQLite cannot wake anyone, so the store's processes wake each other
 * (wake.c): a waiter that finds the name held sleeps on the name's wake
 * counter for a slice (HELD, DLOCK__NEXT_RETRY), looking again whenever a
 * release counts it up, and every WAKE_LOOK_MS for what no release
 * announces. Without the counters (a file that cannot be mapped) it
 * answers HELD with DLOCK__NEXT_POLL and the holder's lease left, and the
 * core polls with its backoff (bounded by that lease).
 *
 * First in line. Polling alone lets a waiter starve: its backoff grows to
 * 64 ms while a client that has just released polls again from 1 ms, and
 * under steady load the long waiter loses every round. So a waiter keeps a
 * row in dlock_wait with the time it began to wait (since), and a free
 * name goes to the oldest live waiter: anyone else, a waiter younger than
 * it or a contender with no row (a try, a first attempt, a multi-lock's
 * one-step take), finds the name "held" while that waiter is there. A
 * waiter row counts while it is live as a hold is (this boot, its process
 * not gone) and its waiter lease is not over: the row is renewed when half
 * of it is gone, so a waiter that stops polling (paused, stuck) keeps the
 * name at most one waiter lease, as a hand-over to it would on a store
 * that queues. The first in line polls at a short step (HEAD_POLL_MS,
 * through the holder's lease left that bounds the core's backoff), so a
 * release reaches it within that step, not the backoff's 64 ms.
 *
 * No deadlock: the oldest live waiter of a free name takes it at its next
 * attempt whatever else it waits for, so a claim lasts one poll; waiters
 * hold names only as holds, and a multi-lock takes its names in one order
 * (the core's), so no two wait for each other. A waiter is served after
 * the waiters older than it on its name, each one hold: in bounded time.
 *
 * The cost is on a hot name: a hand-over is three commits (the release,
 * the next holder's take, the releaser's row in the line) where a client
 * that had just released used to take the name straight back.
 *
 * Kinds. One name is one lock, whatever kind its users ask for: a row's
 * kind says which (mutex, read, write, semaphore). Read holds share the
 * name with read holds, a semaphore's holds with holds of the semaphore
 * while their permits add up to no more than it has; anything else
 * excludes. An owner's second read hold (handles that share a token,
 * dlock_lock_dup) counts up its row; an owner holding the write
 * lock may take the read lock beside it (a downgrade); any other second
 * kind of one owner would wait for itself (DLOCK_EDEADLK). The line is
 * one for all kinds: a waiter is held back only by older waiters it could
 * not hold the name beside (a reader by no older reader; a semaphore's
 * request by older requests when the permits would not cover them and it
 * too), so readers at the head go in together and a large request at the
 * head is not overtaken. */
#include "lock.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often the first waiter in line looks, at most (ms); the next ones
 * twice as long each, up to the core's backoff (64 ms). */
#define HEAD_POLL_MS 4
#define NEAR_HEAD    5 /* waiters counted ahead: beyond, the backoff rules */

/* How often a waiter that sleeps on the wake counters (wake.c) looks again
 * all the same (ms, at most 50: it asks for cancellation as often): what
 * no release announces is found then (a holder whose process died or
 * whose lease ran out, a waiter ahead that stopped waiting, a release by a
 * process that could not map the counters). */
#define WAKE_LOOK_MS 32

/* What the holds and waiters of a name say to a contender. */
/* What a contender asks for. */
typedef struct want {
    int kind;        /* DLOCK__SQ_* */
    int64_t take;    /* 1; a semaphore's permits taken */
    int64_t permits; /* a semaphore's permits; 0 */
} want;

typedef struct view {
    int held;             /* someone else holds it live, in the way: */
    int64_t holder_until; /* the longest expiry of those holds */
    int holder_kind;
    int own;           /* the contender has a live row of the name and kind already */
    int64_t own_count; /* that row's count */
    int64_t own_end;   /* that row's expiry */
    int deadlock;      /* the contender holds the name as a kind it cannot take this beside */
    int own_kind;      /* that kind */
    int64_t used;      /* a semaphore's permits held by others */
    int64_t sem_until; /* the first expiry of those holds */
    int64_t clash;     /* the permits another user of the semaphore declared, if not ours */
    size_t stale;      /* rows that hold nothing any more */
    int behind;        /* an older live waiter has the first claim on the name */
    int writer_ahead;  /* one of those is a writer, and others' readers hold the name */
    int readers;       /* others' live read holds (a reader's contender: beside it) */
    int ahead;         /* live waiters older than the contender (up to NEAR_HEAD) */
    int64_t own_until; /* the expiry of the contender's waiter row (0: none) */
    size_t waiters;    /* waiter rows of the name, live or not */
} view;

/* A hold of the caller is live by its boot and lease alone: the caller is
 * the process that would be judged, and it runs. */
static int own_live(const dlock__sq_store *s, const dlock__sq_row *r, int64_t now_ms)
{
    return strcmp(r->boot, s->boot) == 0 && r->expires_ms > now_ms;
}

static int is_own(const dlock__sq_row *r, const char *token)
{
    return token != NULL && strcmp(r->owner, token) == 0;
}

static want want_of(const dlock__sq_lock *l)
{
    const dlock__lock_spec *spec = &l->base.spec;
    want w = {dlock__sq_kind(spec), 1, 0};
    if (w.kind == DLOCK__SQ_SEMAPHORE) {
        w.take = spec->take;
        w.permits = spec->permits;
    }
    return w;
}

/* Whether a hold of kind stands in the way of a contender of w's kind. */
static int excludes(int kind, const want *w)
{
    if (w->kind == DLOCK__SQ_READ)
        return kind != DLOCK__SQ_READ;
    if (w->kind == DLOCK__SQ_SEMAPHORE)
        return kind != DLOCK__SQ_SEMAPHORE;
    return 1;
}

static void note_holder(view *v, const dlock__sq_row *r)
{
    if (!v->held || r->expires_ms > v->holder_until) {
        v->holder_until = r->expires_ms;
        v->holder_kind = r->kind;
    }
    v->held = 1;
}

static void look(const dlock__sq_store *s, const dlock__sq_row *rows, size_t n, const char *token,
                 const want *w, int64_t now_ms, view *v)
{
    memset(v, 0, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        const dlock__sq_row *r = &rows[i];
        if (is_own(r, token)) {
            if (!own_live(s, r, now_ms)) {
                v->stale++;
            } else if (r->kind == w->kind) {
                v->own = 1;
                v->own_count = r->count;
                v->own_end = r->expires_ms;
            } else if (!(w->kind == DLOCK__SQ_READ && r->kind == DLOCK__SQ_WRITE)) {
                v->deadlock = 1; /* (the write lock's owner may read: a downgrade) */
                v->own_kind = r->kind;
            }
        } else if (!dlock__sq_row_live(s, r, now_ms, NULL)) {
            v->stale++;
        } else if (excludes(r->kind, w)) {
            note_holder(v, r);
        } else if (w->kind == DLOCK__SQ_READ) {
            v->readers++;
        } else if (w->kind == DLOCK__SQ_SEMAPHORE) {
            if (r->permits != w->permits && v->clash == 0)
                v->clash = r->permits;
            if (v->sem_until == 0 || r->expires_ms < v->sem_until)
                v->sem_until = r->expires_ms;
            v->used += r->count;
        }
    }
    /* a semaphore too full for the request: held until a holder lets go */
    if (!v->held && w->kind == DLOCK__SQ_SEMAPHORE && v->used + w->take > w->permits) {
        v->held = 1;
        v->holder_until = v->sem_until;
        v->holder_kind = DLOCK__SQ_SEMAPHORE;
    }
}

/* Deletes the rows of name that hold nothing (in a write transaction). */
static int sweep(dlock__sq_store *s, const char *name, const dlock__sq_row *rows, size_t n,
                 const char *token, int64_t now_ms)
{
    for (size_t i = 0; i < n; i++) {
        const dlock__sq_row *r = &rows[i];
        const char *why = "its lease ran out";
        int live =
            is_own(r, token) ? own_live(s, r, now_ms) : dlock__sq_row_live(s, r, now_ms, &why);
        if (live)
            continue;
        DLOCK__LOG(s->base.host.log, DLOCK_LOG_INFO,
                   "%s: lock '%s': the hold of %s (pid %lld) is over: %s", s->label, name, r->owner,
                   (long long) r->proc.pid, why);
        int rc = dlock__sq_delete(s, name, r->owner, r->kind);
        if (rc != DLOCK_OK)
            return rc;
    }
    return DLOCK_OK;
}

static int next_fence(dlock__sq_store *s, const char *name, uint64_t *fence)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_NEXT_FENCE);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *fence = (uint64_t) sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, rc, "counting the fence");
}

static void bind_proc(dlock__sq_store *s, sqlite3_stmt *st, int first)
{
    const dlock__sq_proc *me = dlock__sq_me(s);
    sqlite3_bind_int64(st, first, me->pid);
    sqlite3_bind_int64(st, first + 1, me->start);
    sqlite3_bind_text(st, first + 2, me->pidns, -1, SQLITE_STATIC);
}

/* Sets the expiry of (name, token) and binds the hold to this process
 * (the one that keeps it alive now, after an adoption too). */
static int set_lease(dlock__sq_store *s, const char *name, const char *token, int kind,
                     int64_t until_ms)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_LEASE);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, token, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, until_ms);
    bind_proc(s, st, 4);
    sqlite3_bind_int(st, 7, kind);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, rc, "renewing a hold");
}

/* Writes a new hold of name for token, with the name's next fence. */
static int insert_hold(dlock__sq_store *s, const char *name, const char *token, const want *w,
                       int64_t until_ms, uint64_t *fence)
{
    int rc = next_fence(s, name, fence);
    if (rc != DLOCK_OK)
        return rc;
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_INSERT);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, token, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, w->kind);
    sqlite3_bind_int64(st, 4, w->take);
    sqlite3_bind_text(st, 5, s->base.host.cfg->owner_info, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (sqlite3_int64) *fence);
    sqlite3_bind_text(st, 7, s->boot, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, until_ms);
    bind_proc(s, st, 9);
    sqlite3_bind_int64(st, 12, w->permits);
    int src = sqlite3_step(st);
    sqlite3_reset(st);
    return src == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, src, "writing a hold");
}

/* Sets the count of an owner's shared hold (read holds, or permits), and
 * its fence to at least fence (0: kept). */
static int set_count(dlock__sq_store *s, const char *name, const char *token, int kind,
                     int64_t count, uint64_t fence)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_SET_COUNT);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, token, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, kind);
    sqlite3_bind_int64(st, 4, count);
    sqlite3_bind_int64(st, 5, (sqlite3_int64) fence);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, rc, "counting a shared hold");
}

/* A waiter's row: the waiter counts (query) and its name is listed until
 * it takes the lock, gives up (cancel), or stops polling for a waiter
 * lease (its row expires, or its process dies). */
static int wait_put(dlock__sq_store *s, const char *name, const char *token, const want *w,
                    int64_t now_ms, int64_t until_ms)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_WAIT_PUT);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, token, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, s->boot, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, until_ms);
    bind_proc(s, st, 5);
    sqlite3_bind_int64(st, 8, now_ms); /* since, if the row is new or had lapsed */
    sqlite3_bind_int(st, 9, w->kind);
    sqlite3_bind_int64(st, 10, w->take);
    sqlite3_bind_int64(st, 11, w->permits);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, rc, "writing a waiter");
}

static int wait_del(dlock__sq_store *s, const char *name, const char *token)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_WAIT_DEL);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, token, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, rc, "deleting a waiter");
}

/* Deletes the waiter rows of name whose lease ran out or of another boot. */
static int wait_sweep(dlock__sq_store *s, const char *name, int64_t now_ms)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_WAIT_SWEEP);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, s->boot, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now_ms);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, rc, "deleting old waiters");
}

/* Whether an older live waiter r holds back a contender of w: one it could
 * not hold the name beside. Readers go in together; a semaphore's
 * requests are served in order while the permits cover them (*reserved
 * counts those of older requests). */
static int holds_back(const dlock__sq_row *r, const want *w, const view *v, int64_t *reserved)
{
    if (w->kind == DLOCK__SQ_READ && r->kind == DLOCK__SQ_READ)
        return 0;
    if (w->kind == DLOCK__SQ_SEMAPHORE && r->kind == DLOCK__SQ_SEMAPHORE) {
        *reserved += r->count;
        return v->used + *reserved + w->take > w->permits;
    }
    return 1;
}

/* Where the contender stands among the waiters of name (in v): how many
 * live waiters older than it hold it back (behind one, it may not take
 * the name) and its own row's expiry. Rows come oldest first; a row of the
 * contender's that lapsed starts again (wait_put) and counts as none. */
static int line_up(dlock__sq_store *s, const char *name, const char *token, const want *w,
                   int64_t now_ms, view *v)
{
    dlock__sq_row *rows;
    size_t n;
    int64_t reserved = 0;
    int rc = dlock__sq_rows(s, SQ_WAITS, name, &rows, &n);
    v->waiters = n;
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++) {
        const dlock__sq_row *r = &rows[i];
        if (is_own(r, token)) {
            if (strcmp(r->boot, s->boot) == 0)
                v->own_until = r->expires_ms;
            if (own_live(s, r, now_ms))
                break; /* the rows after it are younger */
        } else if (dlock__sq_row_live(s, r, now_ms, NULL)) {
            if (w->kind == DLOCK__SQ_SEMAPHORE && r->kind == DLOCK__SQ_SEMAPHORE &&
                r->permits != w->permits && v->clash == 0)
                v->clash = r->permits;
            if (holds_back(r, w, v, &reserved)) {
                v->behind = 1;
                if (r->kind == DLOCK__SQ_WRITE && v->readers > 0)
                    v->writer_ahead = 1;
                if (v->ahead < NEAR_HEAD)
                    v->ahead++;
            }
        }
    }
    free(rows);
    return rc;
}

static const char *kind_words(int kind)
{
    switch (kind) {
    case DLOCK__SQ_READ:
        return "the read lock";
    case DLOCK__SQ_WRITE:
        return "the write lock";
    case DLOCK__SQ_SEMAPHORE:
        return "a semaphore";
    default:
        return "a mutex";
    }
}

/* Looks at name (any transaction) and, in a write transaction (take),
 * takes it for token unless someone else holds it live in the way or an
 * older live waiter holds the contender back: *v says what was found,
 * *fence the fence taken. A taker's waiter row goes with the take.
 * DLOCK_EDEADLK when the contender holds the name as a kind it cannot take
 * this beside, DLOCK_EINVAL when the semaphore's other users declared
 * other permits. */
static int look_take(dlock__sq_store *s, const char *name, const char *token, const want *w,
                     int64_t lease_ms, int take, view *v, int64_t *now_ms, uint64_t *fence)
{
    dlock__sq_row *rows;
    size_t n;
    memset(v, 0, sizeof *v);
    int rc = dlock__sq_rows(s, SQ_ROWS, name, &rows, &n);
    if (rc != DLOCK_OK)
        return rc;
    *now_ms = dlock__sq_boot_ms();
    look(s, rows, n, token, w, *now_ms, v);
    rc = line_up(s, name, token, w, *now_ms, v);
    if (rc == DLOCK_OK && v->deadlock)
        rc = dlock__fail(DLOCK_EDEADLK,
                         "lock '%s': this owner holds it as %s already: asking for %s too would "
                         "wait for itself (one name is one lock; release it first)",
                         name, kind_words(v->own_kind), kind_words(w->kind));
    else if (rc == DLOCK_OK && v->clash != 0)
        rc = dlock__fail(DLOCK_EINVAL,
                         "semaphore '%s' is in use with %lld permits, not %lld: every user of a "
                         "semaphore must give the same number",
                         name, (long long) v->clash, (long long) w->permits);
    if (rc == DLOCK_OK && take && !v->held && !v->behind) {
        if (v->stale > 0)
            rc = sweep(s, name, rows, n, token, *now_ms);
        if (rc == DLOCK_OK && v->own && w->kind == DLOCK__SQ_READ) {
            /* another hold of the owner's (a handle sharing its token):
             * counted in its row, which the releases count down */
            rc = next_fence(s, name, fence);
            if (rc == DLOCK_OK)
                rc = set_count(s, name, token, w->kind, v->own_count + w->take, *fence);
            /* never below the end another handle's hold counts on (a
             * fixed 20 s cut to this take's lease of 1 s let a writer in
             * beside that reader: conformance rw_dup_reader_released) */
            int64_t end = *now_ms + lease_ms;
            if (rc == DLOCK_OK)
                rc = set_lease(s, name, token, w->kind, v->own_end > end ? v->own_end : end);
        } else {
            /* A live row of ours is a hold the caller no longer has: one
             * it was told it lost (the library ends a lease a margin
             * before the row does), or an attempt whose answer it never
             * got. Either way this is a new hold: a new row with the next
             * fence, never the old hold's fence again. */
            if (rc == DLOCK_OK && v->own)
                rc = dlock__sq_delete(s, name, token, w->kind);
            if (rc == DLOCK_OK)
                rc = insert_hold(s, name, token, w, *now_ms + lease_ms, fence);
        }
        if (rc == DLOCK_OK && v->waiters > 0)
            rc = wait_del(s, name, token);
        if (rc == DLOCK_OK && v->waiters > 0)
            rc = wait_sweep(s, name, *now_ms);
    }
    free(rows);
    return rc;
}

/* One attempt: a look at the name and, when it is the contender's to take,
 * the take; the outcome in a (TAKEN, or HELD as for a poll). */
static int attempt_once(dlock__sq_store *s, dlock__sq_lock *l, dlock__attempt *a)
{
    int64_t waiter_ms = s->base.host.cfg->waiter_lease_ms;
    want w = want_of(l);
    view v;
    int64_t now_ms = 0;
    uint64_t fence = 0;

    /* A read first: a contender that finds the name held or claimed (most
     * polls) takes no write lock, unless its waiter row needs writing (new,
     * or half its lease gone). */
    for (int write = 0; write <= 1; write++) {
        int rc = dlock__sq_begin(s, write, a->deadline_us);
        if (rc != DLOCK_OK)
            return rc;
        rc = look_take(s, l->name, a->token, &w, a->lease_ms, write, &v, &now_ms, &fence);
        int busy = v.held || v.behind;
        if (rc == DLOCK_OK && busy && a->wait && write)
            rc = wait_put(s, l->name, a->token, &w, now_ms, now_ms + waiter_ms);
        int renew_wait = busy && a->wait && v.own_until - now_ms < waiter_ms / 2;
        rc = dlock__sq_end(s, write && rc == DLOCK_OK, rc);
        if (rc != DLOCK_OK)
            return rc;
        if (busy && (write || !renew_wait)) {
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_POLL;
            /* free but claimed by an older waiter: no lease to wait for
             * (that waiter takes it at its next poll) */
            a->holder_ttl_ms = v.held ? v.holder_until - now_ms : DLOCK__TTL_UNKNOWN;
            /* Those near the head of the line look again soon, the first
             * every HEAD_POLL_MS, the next twice as long each: a release
             * reaches the first within that step, and a new first was
             * looking often already. The core's step is bounded by the
             * lease left that is answered here. */
            int64_t step_ms = (int64_t) HEAD_POLL_MS << v.ahead;
            if (a->wait && v.ahead < NEAR_HEAD &&
                (a->holder_ttl_ms < 0 || a->holder_ttl_ms > step_ms))
                a->holder_ttl_ms = step_ms;
            a->held_as = v.held ? dlock__sq_held_as(v.holder_kind, w.kind) : DLOCK__HELD_AS_SAME;
            if (!v.held && v.writer_ahead)
                a->held_why = DLOCK__WHY_WRITER_FIRST;
            return DLOCK_OK;
        }
        if (write) {
            a->outcome = DLOCK__TAKEN;
            a->fence = fence;
            a->session = NULL;
            snprintf(l->token, sizeof l->token, "%s", a->token);
            /* a shared hold: the next waiter may share it too, now */
            if (v.waiters > 0 && (w.kind == DLOCK__SQ_READ || w.kind == DLOCK__SQ_SEMAPHORE))
                dlock__sq_wake(s, l->name);
            return DLOCK_OK;
        }
    }
    return DLOCK_OK; /* not reached */
}

int dlock__sq_acquire(dlock__store *st, dlock__store_lock *sl, dlock__attempt *a)
{
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_lock *l = SQLOCK(sl);

    /* A waiter blocks here for a slice (backend.h, NEXT_RETRY): it sleeps on
     * the name's wake counter and looks again when a release wakes it, or
     * every WAKE_LOOK_MS for what no release announces. The slice ends by
     * the wait's budget or the request's bound less a reply's reserve. */
    int missing;
    int rc = dlock__sq_ready(s, 1, a->deadline_us, &missing); /* (before s->wake is read) */
    if (rc != DLOCK_OK)
        return rc;
    int64_t slice_end = a->wait_until_us;
    int64_t bound = a->deadline_us - s->timeout_ms * 1000 / 5;
    if (bound < slice_end)
        slice_end = bound;
    int block = a->wait && a->cancelled != NULL && s->wake != NULL &&
                slice_end > dlock__now_us() + WAKE_LOOK_MS * 1000;
    for (;;) {
        uint32_t seq = block ? dlock__sq_wake_seq(s, l->name) : 0;
        rc = attempt_once(s, l, a);
        if (rc == DLOCK_OK && a->outcome == DLOCK__HELD && a->wait)
            dlock__sq_wake_explain(s); /* once: why this process polls, if it does */
        if (rc != DLOCK_OK || a->outcome != DLOCK__HELD || !block)
            return rc;
        int64_t now = dlock__now_us();
        if (now >= slice_end || a->cancelled(a->cancel_arg))
            break;
        int64_t until = now + WAKE_LOOK_MS * 1000;
        dlock__sq_wake_wait(s, l->name, seq, until < slice_end ? until : slice_end);
    }
    a->next = DLOCK__NEXT_RETRY;
    a->due_us = slice_end;
    return DLOCK_OK;
}

int dlock__sq_cancel(dlock__store *st, dlock__store_lock *sl, const char *token,
                     int64_t deadline_us)
{
    dlock__sq_store *s = SQSTORE(st);
    int rc = dlock__sq_begin(s, 1, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    rc = wait_del(s, SQLOCK(sl)->name, token);
    rc = dlock__sq_end(s, rc == DLOCK_OK, rc);
    if (rc == DLOCK_OK) /* it may have been first in line: the next one is now */
        dlock__sq_wake(s, SQLOCK(sl)->name);
    return rc;
}

int dlock__sq_acquire_many(dlock__store *st, dlock__store_lock *const *ls, size_t n,
                           const char *token, int64_t lease_ms, int64_t deadline_us,
                           uint64_t *fences, dlock__session **sessions, size_t *busy,
                           int64_t *busy_ttl_ms)
{
    dlock__sq_store *s = SQSTORE(st);
    const want mutex = {DLOCK__SQ_MUTEX, 1, 0}; /* a multi-lock's names are mutexes */
    view v = {0};
    int64_t now_ms = 0;
    int rc = dlock__sq_begin(s, 1, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    /* all in one transaction: a name found held rolls back the others */
    size_t i;
    for (i = 0; i < n && rc == DLOCK_OK; i++) {
        sessions[i] = NULL;
        rc = look_take(s, SQLOCK(ls[i])->name, token, &mutex, lease_ms, 1, &v, &now_ms, &fences[i]);
        if (rc == DLOCK_OK && (v.held || v.behind))
            break;
    }
    int taken = !v.held && !v.behind;
    rc = dlock__sq_end(s, rc == DLOCK_OK && taken, rc);
    if (rc != DLOCK_OK)
        return rc;
    if (!taken) {
        *busy = i;
        *busy_ttl_ms = v.held ? v.holder_until - now_ms : DLOCK__TTL_UNKNOWN;
        return dlock__fail(DLOCK_EBUSY, "lock '%s' is held by someone else", SQLOCK(ls[i])->name);
    }
    for (i = 0; i < n; i++)
        snprintf(SQLOCK(ls[i])->token, sizeof SQLOCK(ls[i])->token, "%s", token);
    return DLOCK_OK;
}

/* The caller's own hold of name, live: 1, with *r; 0 if it has none. */
static int own_hold(dlock__sq_store *s, const char *name, const char *token, int kind,
                    int64_t now_ms, dlock__sq_row *r, int *other_live, int *rc)
{
    dlock__sq_row *rows;
    size_t n;
    int found = 0;

    *other_live = 0;
    *rc = dlock__sq_rows(s, SQ_ROWS, name, &rows, &n);
    for (size_t i = 0; *rc == DLOCK_OK && i < n; i++) {
        if (is_own(&rows[i], token) && rows[i].kind == kind) {
            *r = rows[i];
            found = 1;
        } else if (dlock__sq_row_live(s, &rows[i], now_ms, NULL)) {
            *other_live = 1;
        }
    }
    free(rows);
    return found;
}

int dlock__sq_release(dlock__store *st, dlock__store_lock *sl, const char *token, uint64_t fence,
                      int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_lock *l = SQLOCK(sl);
    dlock__sq_row r;
    int other, rc = dlock__sq_begin(s, 1, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    int64_t now_ms = dlock__sq_boot_ms();
    want w = want_of(l);
    int found = own_hold(s, l->name, token, w.kind, now_ms, &r, &other, &rc);
    int live = found && own_live(s, &r, now_ms);
    if (rc == DLOCK_OK && live && r.count > w.take) /* another handle's hold stays */
        rc = set_count(s, l->name, token, w.kind, r.count - w.take, 0);
    else if (rc == DLOCK_OK && found)
        rc = dlock__sq_delete(s, l->name, token, w.kind);
    rc = dlock__sq_end(s, rc == DLOCK_OK && found, rc);
    if (rc != DLOCK_OK)
        return rc;
    if (found)
        dlock__sq_wake(s, l->name);
    if (live)
        return DLOCK_OK;
    if (found)
        return dlock__fail(DLOCK_ELOST, "lock '%s': its lease had run out in %s", l->name,
                           s->label);
    if (other)
        return dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is held by another owner", l->name);
    return dlock__fail(DLOCK_ELOST, "lock '%s' is not held", l->name);
}

/* The end a hold's lease is set to when `asked` is asked for: never below the
 * row's when only lengthening (at_least), nor below a read row's that
 * other handles of its owner count on (dlock_lock_dup: one row, count > 1;
 * a short lease set through one cut another's longer fixed lease, and a
 * writer got in beside it: conformance rw_dup_leases). */
static int64_t lease_end(const dlock__sq_row *r, int kind, int64_t asked, int at_least)
{
    int keep = at_least || (kind == DLOCK__SQ_READ && r->count > 1);
    return keep && r->expires_ms > asked ? r->expires_ms : asked;
}

int dlock__sq_extend(dlock__store *st, dlock__store_lock *sl, const char *token, uint64_t fence,
                     int64_t lease_ms, int at_least, int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_lock *l = SQLOCK(sl);
    dlock__sq_row r;
    int confirm = at_least && lease_ms == 0; /* dlock_lock_verify: change nothing */
    int other, rc = dlock__sq_begin(s, !confirm, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    int64_t now_ms = dlock__sq_boot_ms();
    int kind = dlock__sq_kind(&l->base.spec);
    int found = own_hold(s, l->name, token, kind, now_ms, &r, &other, &rc);
    int live = found && own_live(s, &r, now_ms);
    int write = 0;
    if (rc == DLOCK_OK && found && !live && !confirm) {
        rc = dlock__sq_delete(s, l->name, token, kind);
        write = 1;
    } else if (rc == DLOCK_OK && live && !confirm &&
               lease_end(&r, kind, now_ms + lease_ms, at_least) != r.expires_ms) {
        rc = set_lease(s, l->name, token, kind, lease_end(&r, kind, now_ms + lease_ms, at_least));
        write = 1;
    }
    rc = dlock__sq_end(s, write && rc == DLOCK_OK, rc);
    if (rc != DLOCK_OK)
        return rc;
    if (!live)
        return dlock__fail(DLOCK_ELOST, "lock '%s' is %s", l->name,
                           found ? "no longer held: its lease had run out"
                                 : "no longer held under this owner");
    /* The handle holds it under this token now (an adoption confirms with
     * this call): a detach then unbinds the hold from this process. */
    snprintf(l->token, sizeof l->token, "%s", token);
    return DLOCK_OK;
}

int dlock__sq_renew(dlock__store *st, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_row r;
    int other, rc;

    for (size_t i = 0; i < n; i++)
        items[i].result = DLOCK__RENEW_FAILED;
    rc = dlock__sq_begin(s, 1, deadline_us); /* the whole batch in one transaction */
    if (rc != DLOCK_OK)
        return rc;
    /* a file removed or replaced under the holds: they exclude no one */
    const char *file_gone = dlock__sq_file_gone(s);
    int64_t now_ms = dlock__sq_boot_ms();
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        dlock__renewal *it = &items[i];
        if (it->kind != DLOCK__RENEW_HOLD || file_gone != NULL) {
            it->result = DLOCK__RENEW_GONE; /* no queues, no sessions here */
            it->why = it->kind == DLOCK__RENEW_HOLD ? file_gone : NULL;
            continue;
        }
        const char *name = SQLOCK(it->lock)->name;
        int kind = dlock__sq_kind(&it->lock->spec);
        int found = own_hold(s, name, it->token, kind, now_ms, &r, &other, &rc);
        if (rc != DLOCK_OK)
            break;
        if (found && own_live(s, &r, now_ms)) {
            rc = set_lease(s, name, it->token, kind, lease_end(&r, kind, now_ms + it->lease_ms, 0));
            it->result = DLOCK__RENEW_OK;
        } else {
            if (found)
                rc = dlock__sq_delete(s, name, it->token, kind);
            it->result = DLOCK__RENEW_GONE;
            /* what the rows tell: its own row out of time; or none, and
             * another holder of a lock that has one (a forced unlock and a
             * lease that ran out both delete the row: which, they do not
             * tell) */
            int shared = kind == DLOCK__SQ_READ || kind == DLOCK__SQ_SEMAPHORE;
            it->why = found ? "its lease had run out in the store before it was renewed (the "
                              "process was paused, or the store slow, for longer than the lease)"
                      : other && !shared
                          ? "its row was taken over by another holder (after its lease ran out, "
                            "or a force-unlock)"
                          : "its row was deleted: it was force-unlocked, or cleared after its "
                            "lease ran out";
        }
    }
    rc = dlock__sq_end(s, rc == DLOCK_OK, rc);
    if (rc != DLOCK_OK) {
        for (size_t i = 0; i < n; i++)
            items[i].result = DLOCK__RENEW_FAILED;
    }
    return rc;
}

void dlock__sq_detach(dlock__store *st, dlock__store_lock *sl)
{
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_lock *l = SQLOCK(sl);
    int64_t deadline = dlock__now_us() + s->timeout_ms * 1000;

    if (l->token[0] == '\0')
        return;
    /* A detached hold outlives this process: bind it to none (pid 0), so
     * that it lasts its lease rather than end when this process does. */
    int rc = dlock__sq_begin(s, 1, deadline);
    if (rc == DLOCK_OK) {
        sqlite3_stmt *q = dlock__sq_stmt(s, SQ_DETACH);
        sqlite3_bind_text(q, 1, l->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, l->token, -1, SQLITE_STATIC);
        sqlite3_bind_int(q, 3, dlock__sq_kind(&l->base.spec));
        int src = sqlite3_step(q);
        rc = src == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, src, "detaching a hold");
        rc = dlock__sq_end(s, rc == DLOCK_OK, rc);
    }
    if (rc != DLOCK_OK)
        DLOCK__LOG(s->base.host.log, DLOCK_LOG_WARN,
                   "%s: lock '%s' detached, but still bound to this process (it ends when this "
                   "process does): %s",
                   s->label, l->name, dlock_errmsg());
}
