/* steps.c - each step of the lock protocol, for every kind of lock, as one
 * request: a script call (scripts/), or for the uncontended mutex a
 * MULTI/EXEC transaction. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Puts the lock's first nkeys keys (1: L; 2: and its fence counter) as a
 * script's keys at argv[2]. Returns the next free index. */
static size_t put_keys(const rlock *l, const char **argv, size_t *lens, size_t nkeys)
{
    argv[2] = nkeys == 1 ? "1" : "2";
    lens[2] = 1;
    for (size_t i = 0; i < nkeys; i++) {
        argv[3 + i] = l->keys[i];
        lens[3 + i] = l->key_lens[i];
    }
    return 3 + nkeys;
}

static int is_shared(const rlock *l)
{
    return l->spec.kind == DLOCK__READ || l->spec.kind == DLOCK__SEMAPHORE;
}

/* The kind letter of a waiter or holder in scripts. */
static const char *kind_letter(const rlock *l)
{
    switch (l->spec.kind) {
    case DLOCK__READ:
        return "r";
    case DLOCK__WRITE:
        return "w";
    case DLOCK__SEMAPHORE:
        return "s";
    default:
        return "x";
    }
}

/* A holder's PTTL as the core reads it: -1 (a key without expiry, set by
 * someone else) means the lock never ends by itself. */
static int64_t holder_ttl(long long pttl)
{
    return pttl >= 0 ? pttl : pttl == -1 ? DLOCK__TTL_NONE : DLOCK__TTL_UNKNOWN;
}

static const redisReply *exec_element(const redisReply *r, size_t i)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements > i ? r->element[i] : NULL;
}

/* Fence counters below this were never seeded from the server's clock
 * (scripts/queue.lua, next_fence). */
#define FENCE_SEEDED 1000000000000LL

/* After the transaction's INCR found the counter missing or unseeded: seed
 * it from the server's clock (fence.lua). *fence is a fresh fence if token
 * still holds the lock, else 0. */
static int seed_fence(rbackend *b, rlock *l, const char *token, int64_t deadline, uint64_t *fence)
{
    const char *argv[6];
    size_t lens[6];
    redisReply *r = NULL;
    size_t n = put_keys(l, argv, lens, 2);
    int rc;

    argv[n] = token;
    lens[n++] = strlen(token);
    evalcall call = {DLOCK__S_FENCE, n, argv, lens};
    rc = dlock__redis_run_script(l->conn, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0)
        rc = dlock__redis_bad_reply(b, "fence", r);
    else
        *fence = (uint64_t) r->integer;
    freeReplyObject(r);
    return rc;
}

/* Gives back a lock this attempt took when the rest of its transaction
 * failed (MULTI/EXEC does not roll back). */
static void undo_take(rbackend *b, rlock *l, const char *token, int64_t deadline)
{
    dlock__saved_error saved;
    dlock__save_error(&saved);
    dlock__redis_release(&b->base, &l->base, token, deadline);
    dlock__restore_error(&saved);
}

/*
 * An attempt that will not queue, without a script: MULTI, SET NX PX,
 * INCR, PTTL, EXEC, one round trip and a fraction of a script's cost on the
 * server. The INCR runs even when the SET finds the lock held, so fences
 * skip numbers; they still strictly increase from one holder to the next,
 * because a holder's INCR comes after every earlier holder's and before
 * every later one's. PTTL tells a refused caller how long the holder has.
 * A counter the store lost (the INCR gives a small number) is seeded from
 * the server's clock before its value is used, by whoever saw it small.
 * (A caller that already holds the lock under its token, after a lost
 * reply, is refused here; when it waits, the queueing script finds it.)
 */
static int take_plain(rbackend *b, rlock *l, dlock__attempt *a, const char *lease, size_t nlease)
{
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    const char *set[] = {"SET", l->keys[0], a->token, "NX", "PX", lease};
    const char *incr[] = {"INCR", l->keys[1]}, *pttl[] = {"PTTL", l->keys[0]};
    size_t multi_len[] = {5}, exec_len[] = {4}, incr_len[] = {4, l->key_lens[1]};
    size_t set_len[] = {3, l->key_lens[0], strlen(a->token), 2, 2, nlease};
    size_t pttl_len[] = {4, l->key_lens[0]};
    dlock__rcmd cmds[5] = {{1, multi, multi_len},
                           {6, set, set_len},
                           {2, incr, incr_len},
                           {2, pttl, pttl_len},
                           {1, exec, exec_len}};
    redisReply *r[5];
    int rc = dlock__rconn_call(l->conn, 5, cmds, a->deadline_us, r);

    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < 5 && rc == DLOCK_OK; i++) {
        if (r[i]->type == REDIS_REPLY_ERROR)
            rc = dlock__fail(DLOCK_ESERVER, "%s: server refused %s: %s%s", b->label,
                             i == 4 ? "EXEC" : "MULTI", r[i]->str,
                             strncmp(r[i]->str, "NOAUTH", 6) == 0
                                 ? " (the server wants a password: redis://:PASSWORD@host)"
                                 : "");
    }
    const redisReply *taken = exec_element(r[4], 0), *fence = exec_element(r[4], 1),
                     *ttl = exec_element(r[4], 2);
    int took = rc == DLOCK_OK && taken != NULL && taken->type == REDIS_REPLY_STATUS;
    if (rc == DLOCK_OK && fence != NULL && fence->type == REDIS_REPLY_ERROR) {
        rc = dlock__fail(DLOCK_ESERVER, "%s: server refused INCR %s: %s", b->label, l->keys[1],
                         fence->str);
    } else if (rc == DLOCK_OK) {
        if (taken == NULL || fence == NULL || ttl == NULL || fence->type != REDIS_REPLY_INTEGER ||
            ttl->type != REDIS_REPLY_INTEGER ||
            (taken->type != REDIS_REPLY_STATUS && taken->type != REDIS_REPLY_NIL) ||
            fence->integer <= 0)
            rc = dlock__redis_bad_reply(b, "acquire", r[4]);
    }
    if (rc == DLOCK_OK) {
        uint64_t value = (uint64_t) fence->integer;
        if (fence->integer < FENCE_SEEDED)
            rc = seed_fence(b, l, took ? a->token : "", a->deadline_us, &value);
        if (rc == DLOCK_OK && took && value > 0) {
            a->outcome = DLOCK__TAKEN;
            a->fence = value;
        } else if (rc == DLOCK_OK) {
            /* held by someone else (or, rarely, our lease ran out before the
             * fence was seeded: try again) */
            a->outcome = DLOCK__HELD;
            a->holder_ttl_ms = took ? 0 : holder_ttl(ttl->integer);
        }
    }
    if (rc != DLOCK_OK && took)
        undo_take(b, l, a->token, a->deadline_us);
    for (int i = 0; i < 5; i++)
        freeReplyObject(r[i]);
    return rc;
}

static int acquire_script(rbackend *b, rlock *l, dlock__attempt *a, int join, const char *lease,
                          size_t nlease)
{
    static const enum dlock__script_id scripts[] = {
        [DLOCK__MUTEX] = DLOCK__S_ACQUIRE,         [DLOCK__FAIR] = DLOCK__S_ACQUIRE,
        [DLOCK__READ] = DLOCK__S_RW_ACQUIRE,       [DLOCK__WRITE] = DLOCK__S_RW_ACQUIRE,
        [DLOCK__SEMAPHORE] = DLOCK__S_SEM_ACQUIRE,
    };
    char wlease[24], wait_id[24], permits[24], take[24];
    const char *argv[16];
    size_t lens[16];
    redisReply *r = NULL;
    size_t n = put_keys(l, argv, lens, 1);
    int rc;

    argv[n] = a->token;
    lens[n++] = strlen(a->token);
    argv[n] = lease;
    lens[n++] = nlease;
    argv[n] = wlease;
    lens[n++] = NUM(wlease, b->cfg.waiter_lease_ms);
    argv[n] = b->cfg.client_id;
    lens[n++] = 16;
    argv[n] = a->again ? "1" : "0";
    lens[n++] = 1;
    argv[n] = wait_id;
    lens[n++] = NUM(wait_id, a->wait_id);
    /* how to send the hand-over notice: "s" stream, else the channel */
    argv[n] = b->notify_stream ? "s" : b->wake_channel;
    lens[n] = strlen(argv[n]);
    n++;
    argv[n] = join ? "1" : "0";
    lens[n++] = 1;
    switch (l->spec.kind) {
    case DLOCK__MUTEX:
    case DLOCK__FAIR:
        argv[n] = l->spec.kind == DLOCK__FAIR ? "1" : "0";
        lens[n++] = 1;
        break;
    case DLOCK__READ:
    case DLOCK__WRITE:
        argv[n] = "";
        lens[n++] = 0;
        argv[n] = kind_letter(l);
        lens[n++] = 1;
        break;
    case DLOCK__SEMAPHORE:
        argv[n] = "";
        lens[n++] = 0;
        argv[n] = permits;
        lens[n++] = NUM(permits, l->spec.permits);
        argv[n] = take;
        lens[n++] = NUM(take, l->spec.take);
        break;
    }
    evalcall call = {scripts[l->spec.kind], n, argv, lens};
    rc = dlock__redis_run_script(l->conn, &call, a->deadline_us, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
        a->outcome = DLOCK__TAKEN;
        a->fence = (uint64_t) r->integer;
    } else if (r->type == REDIS_REPLY_INTEGER && r->integer == -3) {
        rc = dlock__fail(DLOCK_EDEADLK,
                         "this owner holds the read lock: taking the write lock too would wait "
                         "for itself (release the read lock first; upgrades are refused)");
    } else if (r->type == REDIS_REPLY_STRING && strncmp(r->str, "permits ", 8) == 0) {
        rc = dlock__fail(DLOCK_EINVAL,
                         "semaphore %s is in use with %s permits, not %u: every user of a "
                         "semaphore must give the same number",
                         l->keys[0], r->str + 8, l->spec.permits);
    } else if (dlock__redis_int_array(r, 2) && r->elements == 2 &&
               (r->element[1]->integer == 0 || r->element[1]->integer == 1)) {
        a->holder_ttl_ms = holder_ttl(r->element[0]->integer);
        a->outcome = r->element[1]->integer == 1 ? DLOCK__QUEUED : DLOCK__HELD;
        a->keep_place = a->outcome == DLOCK__QUEUED;
    } else {
        rc = dlock__redis_bad_reply(b, "acquire", r);
    }
    freeReplyObject(r);
    return rc;
}

int dlock__redis_acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *a)
{
    rbackend *b = RBACKEND(s);
    rlock *l = RLOCK(sl);
    char lease[24];
    size_t nlease = NUM(lease, a->lease_ms);
    /* Queue only where the hand-over notice can reach us: interop keys have
     * no queue, and notices flow once prepare_wait() has set them up. */
    int join = a->wait && !l->spec.simple && dlock__redis_notices_flow(b);
    int rc = l->spec.kind == DLOCK__MUTEX && !join ? take_plain(b, l, a, lease, nlease)
                                                   : acquire_script(b, l, a, join, lease, nlease);

    if (rc == DLOCK_OK && a->outcome == DLOCK__HELD)
        a->next = l->spec.simple || !a->wait ? DLOCK__NEXT_POLL : DLOCK__NEXT_PREPARE;
    return rc;
}

int dlock__redis_acquire_many(dlock__store *s, dlock__store_lock *const *bls, size_t n,
                              const char *token, int64_t lease_ms, int64_t deadline_us,
                              uint64_t *fences, size_t *busy, int64_t *busy_ttl_ms)
{
    rbackend *b = RBACKEND(s);
    const rlock *first = RLOCK(bls[0]);
    char lease[24], count[24];
    const char **argv = calloc(n + 5, sizeof *argv);
    size_t *lens = calloc(n + 5, sizeof *lens);
    redisReply *r = NULL;
    int rc;

    /* One script can only take keys of one hash slot, served by one node. */
    for (size_t i = 0; i < n; i++) {
        const rlock *l = RLOCK(bls[i]);
        if (l->slot != first->slot || l->spec.kind != DLOCK__MUTEX || l->spec.simple) {
            free(argv);
            free(lens);
            return DLOCK_ENOTSUP;
        }
    }
    if (argv == NULL || lens == NULL) {
        free(argv);
        free(lens);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    size_t at = 2;
    argv[at] = count;
    lens[at++] = NUM(count, n);
    for (size_t i = 0; i < n; i++) {
        const rlock *l = RLOCK(bls[i]);
        argv[at] = l->keys[0];
        lens[at++] = l->key_lens[0];
    }
    argv[at] = token;
    lens[at++] = strlen(token);
    argv[at] = lease;
    lens[at++] = NUM(lease, lease_ms);
    evalcall call = {DLOCK__S_MULTI_ACQUIRE, at, argv, lens};
    rc = dlock__redis_run_script(first->conn, &call, deadline_us, &r);
    if (rc == DLOCK_OK) {
        if (dlock__redis_int_array(r, 3) && r->element[0]->integer == -1 &&
            r->element[1]->integer >= 1 && (size_t) r->element[1]->integer <= n) {
            *busy = (size_t) r->element[1]->integer - 1;
            *busy_ttl_ms = holder_ttl(r->element[2]->integer);
            rc = DLOCK_EBUSY;
        } else if (dlock__redis_int_array(r, n) && r->elements == n) {
            for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
                if (r->element[i]->integer <= 0)
                    rc = dlock__redis_bad_reply(b, "multi-lock acquire", r);
                else
                    fences[i] = (uint64_t) r->element[i]->integer;
            }
        } else {
            rc = dlock__redis_bad_reply(b, "multi-lock acquire", r);
        }
    }
    freeReplyObject(r);
    free(argv);
    free(lens);
    return rc;
}

int dlock__redis_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline)
{
    rlock *l = RLOCK(sl);
    const char *argv[6];
    size_t lens[6];
    redisReply *r = NULL;
    int rc;

    (void) s;
    if (l->spec.simple)
        return DLOCK_OK; /* never queued */
    size_t n = put_keys(l, argv, lens, 1);
    argv[n] = token;
    lens[n++] = strlen(token);
    argv[n] = kind_letter(l);
    lens[n++] = 1;
    evalcall call = {DLOCK__S_CANCEL, n, argv, lens};
    rc = dlock__redis_run_script(l->conn, &call, deadline, &r);
    freeReplyObject(r);
    return rc;
}

/* The release script of l's kind, for token (NULL: forced). */
static int run_release(rbackend *b, rlock *l, const char *token, int64_t deadline)
{
    const char *argv[8];
    size_t lens[8];
    redisReply *r = NULL;
    size_t n = put_keys(l, argv, lens, 1);
    enum dlock__script_id script;
    int rc;

    argv[n] = token != NULL ? token : "";
    lens[n++] = token != NULL ? strlen(token) : 0;
    switch (l->spec.kind) {
    case DLOCK__READ:
    case DLOCK__WRITE:
        script = DLOCK__S_RW_RELEASE;
        argv[n++] = kind_letter(l);
        argv[n++] = token == NULL ? "1" : "0";
        break;
    case DLOCK__SEMAPHORE:
        script = DLOCK__S_SEM_RELEASE;
        argv[n++] = token == NULL ? "1" : "0";
        break;
    default:
        script = DLOCK__S_RELEASE;
        argv[n++] = token == NULL ? "f" : l->spec.simple ? "s" : "";
        break;
    }
    for (size_t i = 4; i < n; i++)
        lens[i] = strlen(argv[i]);
    evalcall call = {script, n, argv, lens};
    rc = dlock__redis_run_script(l->conn, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_INTEGER)
        rc = dlock__redis_bad_reply(b, "release", r);
    else if (r->integer == -1)
        rc = dlock__fail(DLOCK_ENOTOWNER, "%s is held by another owner", l->keys[0]);
    else if (r->integer == -2)
        rc = dlock__fail(DLOCK_ELOST,
                         "%s is not held by this owner any more (its lease had run out or it "
                         "was removed)",
                         l->keys[0]);
    freeReplyObject(r);
    return rc;
}

int dlock__redis_release(dlock__store *s, dlock__store_lock *l, const char *token, int64_t deadline)
{
    return run_release(RBACKEND(s), RLOCK(l), token, deadline);
}

int dlock__redis_force_unlock(dlock__store *s, dlock__store_lock *l, int64_t deadline)
{
    return run_release(RBACKEND(s), RLOCK(l), NULL, deadline);
}

int dlock__redis_extend(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t lease_ms,
                        int at_least, int64_t deadline)
{
    rbackend *b = RBACKEND(s);
    rlock *l = RLOCK(sl);
    char lease[24];
    const char *argv[8];
    size_t lens[8];
    size_t n = put_keys(l, argv, lens, 1);
    redisReply *r = NULL;
    int rc;

    argv[n] = token;
    lens[n++] = strlen(token);
    argv[n] = lease;
    lens[n++] = NUM(lease, lease_ms);
    argv[n] = at_least ? "1" : "0";
    lens[n++] = 1;
    argv[n] = is_shared(l) ? "s" : "x";
    lens[n++] = 1;
    evalcall call = {DLOCK__S_EXTEND, n, argv, lens};
    rc = dlock__redis_run_script(l->conn, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_INTEGER)
        rc = dlock__redis_bad_reply(b, "extend", r);
    else if (r->integer != 1)
        rc = dlock__fail(DLOCK_ELOST, "%s is no longer held by this owner", l->keys[0]);
    freeReplyObject(r);
    return rc;
}

int dlock__redis_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline)
{
    rbackend *b = RBACKEND(s);
    rlock *l = RLOCK(sl);
    const char *argv[8];
    size_t lens[8];
    redisReply *r = NULL;
    size_t n = put_keys(l, argv, lens, 2);
    int rc;

    memset(st, 0, sizeof *st);
    argv[n] = l->spec.simple ? "0" : "1"; /* has a queue */
    lens[n++] = 1;
    argv[n] = l->spec.kind == DLOCK__READ || l->spec.kind == DLOCK__WRITE ? "r"
              : l->spec.kind == DLOCK__SEMAPHORE                          ? "s"
                                                                          : "";
    lens[n] = strlen(argv[n]);
    n++;
    evalcall call = {DLOCK__S_STATUS, n, argv, lens};
    rc = dlock__redis_run_script(l->conn, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 8 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        rc = dlock__redis_bad_reply(b, "status", r);
    } else {
        for (size_t i = 1; i < 8; i++) {
            long long v = r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : -3;
            /* counts are non-negative; the pttl and the last lease end may be
             * -1 or -2 (none) */
            if (v < (i == 1 || i == 7 ? -2 : 0) || (i != 1 && i != 2 && i != 7 && v > UINT_MAX))
                rc = dlock__redis_bad_reply(b, "status", r);
        }
    }
    if (rc == DLOCK_OK) {
        snprintf(st->owner, sizeof st->owner, "%s", r->element[0]->str);
        st->shared = (unsigned) r->element[4]->integer;
        st->held = st->owner[0] != '\0' || st->shared > 0;
        st->holds = st->owner[0] != '\0' ? 1 : 0;
        st->lease_ms = st->owner[0] != '\0' ? r->element[1]->integer
                       : st->shared > 0     ? r->element[7]->integer
                                            : -1;
        st->last_fence = (uint64_t) r->element[2]->integer;
        st->waiters = (unsigned) r->element[3]->integer;
        st->permits_used = (unsigned) r->element[5]->integer;
        st->permits = (unsigned) r->element[6]->integer;
    }
    freeReplyObject(r);
    return rc;
}
