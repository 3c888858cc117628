/* SPDX-License-Identifier: MIT */
/* steps.c - each step of the lock protocol for one lock of any kind (take
 * or queue, take several at once, cancel a wait, release, force, extend,
 * status) as one request: one script call (scripts/, EVALSHA), the
 * uncontended mutex included (acquire.lua). An attempt to take a lock
 * carries the client's owner record ahead of its script, in the same
 * write, when the record is due. The renewer's batches are in renewal.c,
 * holders and listing in holders.c. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "internal.h"
#include "replies.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_WRITE_US 1000000 /* a cluster's owner record write, at most */

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

/* Gives back a lock this attempt may have taken when its script failed
 * half-way (Redis does not roll a script back). Token-checked: it touches
 * nothing that is not this owner's. */
static int run_release(rbackend *b, rlock *l, const char *token, uint64_t fence, int with_wait,
                       int64_t deadline);

static void undo_take(rbackend *b, rlock *l, const char *token, int64_t deadline)
{
    dlock__saved_error saved;
    dlock__save_error(&saved);
    run_release(b, l, token, 0, 0, deadline); /* no WAIT: nobody was told it is held */
    dlock__restore_error(&saved);
}

/* An attempt's script on c, with the client's owner record ahead of it
 * when the record is due (one write), as a step of replicas.c. */
static int step_with_record(rbackend *b, dlock__rconn *c, const evalcall *call, int64_t lease_ms,
                            int64_t deadline, redisReply **r, long long *acked)
{
    dlock__owner_write record;
    if (!dlock__redis_owner_due(b, lease_ms, &record))
        return dlock__redis_step(b, c, NULL, 1, call, deadline, NULL, r, acked);
    redisReply *written = NULL;
    if (b->cluster != NULL) {
        /* the record lives in its own slot, maybe on another node: a call
         * of its own there (once a day at most; MOVED followed), then the
         * step. A second at most: a node that does not answer must not
         * take the attempt's time (the record informs, the lock does not
         * need it, and the next attempt writes it). */
        dlock__saved_error saved;
        int64_t until = dlock__now_us() + RECORD_WRITE_US;
        dlock__save_error(&saved);
        if (dlock__redis_call(dlock__redis_owner_conn(b, b->owner_key), &record.cmd,
                              until < deadline ? until : deadline, &written) != DLOCK_OK)
            written = NULL;
        dlock__restore_error(&saved);
        dlock__redis_owner_sent(b, &record, written);
        return dlock__redis_step(b, c, NULL, 1, call, deadline, NULL, r, acked);
    }
    int rc = dlock__redis_step(b, c, &record.cmd, 1, call, deadline, &written, r, acked);
    dlock__redis_owner_sent(b, &record, written);
    return rc;
}

/* A grant the master made that fewer replicas than wait=N acknowledged in
 * time (it has been given back). Fewer replicas than that connected to the
 * master is a setting to change, not an outage to wait out: refused at
 * once; else the replicas are behind, and a wait may try again. */
static int not_replicated(rbackend *b, rlock *l, const char *key, long long acked, int64_t deadline)
{
    long long connected =
        dlock__redis_replicas_connected(b, dlock__redis_conn(b, l, deadline), deadline);
    if (connected >= 0 && connected < (long long) b->sync_replicas)
        return dlock__fail(DLOCK_ESERVER,
                           "%s: the master has %lld connected replica%s, and wait=%u asks %u to "
                           "acknowledge every change: lower wait= or attach replicas (took %s "
                           "and gave it back)",
                           b->label, connected, connected == 1 ? "" : "s", b->sync_replicas,
                           b->sync_replicas, key);
    return dlock__fail(DLOCK_EUNREACHABLE,
                       "%s: took %s on the master, but %lld of the %u replicas asked (wait=%u) "
                       "acknowledged it within %lld ms, so a failover could lose it: gave it back "
                       "(are the replicas connected and in sync? INFO replication on the master)",
                       b->label, key, acked, b->sync_replicas, b->sync_replicas,
                       (long long) b->sync_timeout_ms);
}

static int acquire_script(rbackend *b, rlock *l, dlock__attempt *a, int join, const char *lease,
                          size_t nlease)
{
    static const enum dlock__script_id scripts[] = {
        [DLOCK__MUTEX] = DLOCK__S_ACQUIRE,         [DLOCK__FAIR] = DLOCK__S_ACQUIRE,
        [DLOCK__READ] = DLOCK__S_RW_ACQUIRE,       [DLOCK__WRITE] = DLOCK__S_RW_ACQUIRE,
        [DLOCK__SEMAPHORE] = DLOCK__S_SEM_ACQUIRE,
    };
    char flags[4], waiter[192], permits[24], take[24]; /* waiter: the prefix is at most 64 */
    const char *argv[16];
    size_t lens[16];
    redisReply *r = NULL;
    /* simple: N and the name's fence counter; else L, and N goes last */
    size_t n = put_keys(l, argv, lens, l->spec.simple ? 2 : 1);
    int rc;

    /* Few arguments: each costs the server about as much as a small
     * command (scripts/README.md). What only a queued attempt needs goes
     * in one, as the waiter's place keeps it. */
    flags[0] = a->again ? '1' : '0';
    flags[1] = join ? '1' : '0';
    flags[2] = '\0';
    if (l->spec.kind == DLOCK__MUTEX || l->spec.kind == DLOCK__FAIR)
        flags[2] = l->spec.simple ? 'i' : l->spec.kind == DLOCK__FAIR ? '1' : '0';
    else if (l->spec.kind != DLOCK__SEMAPHORE)
        flags[2] = kind_letter(l)[0];
    flags[3] = '\0';
    argv[n] = a->token;
    lens[n++] = strlen(a->token);
    argv[n] = lease;
    lens[n++] = nlease;
    argv[n] = flags;
    lens[n++] = strlen(flags);
    /* the place a queued waiter keeps, but its lease and kind: how to send
     * its hand-over notice ("s" stream, else the channel) last */
    int len = join ? snprintf(waiter, sizeof waiter, "%" PRId64 " %s %" PRIu64 " %s",
                              b->cfg.waiter_lease_ms, b->cfg.client_id, a->wait_id,
                              b->cluster != NULL ? "c"
                              : b->notify_stream ? "s"
                                                 : b->wake_channel)
                   : 0;
    if (len < 0 || (size_t) len >= sizeof waiter)
        return dlock__fail(DLOCK_EINVAL, "the wake-up channel's name is too long");
    argv[n] = waiter;
    lens[n++] = (size_t) len;
    if (l->spec.kind == DLOCK__SEMAPHORE) {
        argv[n] = permits;
        lens[n++] = NUM(permits, l->spec.permits);
        argv[n] = take;
        lens[n++] = NUM(take, l->spec.take);
    }
    if (!l->spec.simple) {
        /* The name's interop key, which kinds.lua looks at: an argument,
         * not a key, so that a user whose ACL covers only the prefix can
         * take locks (the script then cannot look at it). */
        argv[n] = l->keys[2];
        lens[n++] = l->key_lens[2];
    }
    evalcall call = {scripts[l->spec.kind], n, argv, lens};
    long long acked;
    rc = step_with_record(b, dlock__redis_conn(b, l, a->deadline_us), &call, a->lease_ms,
                          a->deadline_us, &r, &acked);
    if (rc == DLOCK_ESERVER && l->spec.kind != DLOCK__SEMAPHORE && l->spec.kind != DLOCK__READ)
        undo_take(b, l, a->token, a->deadline_us); /* it may have set L before failing */
    if (rc != DLOCK_OK)
        return rc;
    dlock__racquire got;
    if (dlock__reply_acquire(r, &got) != 0) {
        rc = dlock__redis_bad_reply(b, "acquire", r);
    } else if (got.outcome == DLOCK__RACQUIRE_TAKEN && dlock__redis_unconfirmed(b, acked)) {
        undo_take(b, l, a->token, a->deadline_us);
        rc = not_replicated(b, l, l->keys[0], acked, a->deadline_us);
    } else if (got.outcome == DLOCK__RACQUIRE_TAKEN) {
        a->outcome = DLOCK__TAKEN;
        a->fence = got.fence;
    } else if (got.outcome == DLOCK__RACQUIRE_UPGRADE) {
        rc = dlock__fail(DLOCK_EDEADLK,
                         "this owner holds the read lock: taking the write lock too would wait "
                         "for itself (release the read lock first; upgrades are refused)");
    } else if (got.outcome == DLOCK__RACQUIRE_WAITING) {
        rc = dlock__fail(DLOCK_EDEADLK,
                         "another handle of this owner (dlock_lock_dup) waits for this read-write "
                         "lock as the other kind: one owner waits for it one way at a time");
    } else if (got.outcome == DLOCK__RACQUIRE_SELF) {
        rc = dlock__fail(DLOCK_EDEADLK,
                         "this owner holds the name as another kind of lock: asking for it as "
                         "this kind would wait for itself (one name is one lock)");
    } else if (got.outcome == DLOCK__RACQUIRE_PERMITS) {
        rc = dlock__fail(DLOCK_EINVAL,
                         "semaphore '%s' is in use with %s permits, not %u: every user of a "
                         "semaphore must give the same number",
                         l->keys[2], got.permits, l->spec.permits);
    } else {
        a->holder_ttl_ms = holder_ttl(got.holder_pttl);
        a->outcome = got.queued ? DLOCK__QUEUED : DLOCK__HELD;
        a->keep_place = got.queued;
        a->held_as = (enum dlock__held_as) got.held_as;
        if (got.writer_first) {
            a->held_why = DLOCK__WHY_WRITER_FIRST;
            if (!a->wait)
                a->holder_ttl_ms = DLOCK__TTL_UNKNOWN; /* (the readers' is not when it frees) */
        }
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
    int join = a->wait && !l->spec.simple && dlock__redis_notices_flow(b, l);
    int rc = acquire_script(b, l, a, join, lease, nlease);

    /* Held as another kind of lock, and not queued behind it (another kind
     * waits already): no notice comes from that kind's release, so poll
     * (bounded by its lease). Queueing behind it needs notices flowing
     * first, as any queueing does (kinds.lua). */
    if (rc == DLOCK_OK && a->outcome == DLOCK__HELD)
        a->next = l->spec.simple || !a->wait ||
                          (a->held_as != DLOCK__HELD_AS_SAME && dlock__redis_notices_flow(b, l))
                      ? DLOCK__NEXT_POLL
                      : DLOCK__NEXT_PREPARE;
    return rc;
}

int dlock__redis_acquire_many(dlock__store *s, dlock__store_lock *const *bls, size_t n,
                              const char *token, int64_t lease_ms, int64_t deadline_us,
                              uint64_t *fences, dlock__session **sessions, size_t *busy,
                              int64_t *busy_ttl_ms)
{
    rbackend *b = RBACKEND(s);
    const rlock *first = RLOCK(bls[0]);

    (void) sessions; /* own leases: they stay NULL */
    char lease[24], count[24];
    const char **argv = calloc(2 * n + 5, sizeof *argv);
    size_t *lens = calloc(2 * n + 5, sizeof *lens);
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
    for (size_t i = 0; i < n; i++) {
        const rlock *l = RLOCK(bls[i]);
        argv[at] = l->keys[2];
        lens[at++] = l->key_lens[2];
    }
    evalcall call = {DLOCK__S_MULTI_ACQUIRE, at, argv, lens};
    long long acked;
    rc = step_with_record(b, dlock__redis_conn(b, first, deadline_us), &call, lease_ms, deadline_us,
                          &r, &acked);
    if (rc == DLOCK_OK) {
        int busy_held;
        long long pttl;
        if (dlock__reply_multi_acquire(r, n, fences, &busy_held, busy, &pttl) != 0) {
            rc = dlock__redis_bad_reply(b, "multi-lock acquire", r);
        } else if (busy_held) {
            *busy_ttl_ms = holder_ttl(pttl);
            rc = DLOCK_EBUSY;
        } else if (dlock__redis_unconfirmed(b, acked)) {
            for (size_t i = 0; i < n; i++)
                undo_take(b, RLOCK(bls[i]), token, deadline_us);
            rc = not_replicated(b, RLOCK(bls[0]), first->keys[0], acked, deadline_us);
        }
    }
    freeReplyObject(r);
    free(argv);
    free(lens);
    return rc;
}

int dlock__redis_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline)
{
    rbackend *b = RBACKEND(s);
    rlock *l = RLOCK(sl);
    const char *argv[6];
    size_t lens[6];
    redisReply *r = NULL;
    int rc;

    if (l->spec.simple)
        return DLOCK_OK; /* never queued */
    size_t n = put_keys(l, argv, lens, 1);
    argv[n] = token;
    lens[n++] = strlen(token);
    argv[n] = kind_letter(l);
    lens[n++] = 1;
    evalcall call = {DLOCK__S_CANCEL, n, argv, lens};
    rc = dlock__redis_run_script(dlock__redis_conn(b, l, deadline), &call, deadline, &r);
    freeReplyObject(r);
    return rc;
}

/* The release script of l's kind, for token (NULL: forced) and the fence
 * it holds the lock under (0: unknown; an interop key's is not looked at:
 * nothing queues there). */
static int run_release(rbackend *b, rlock *l, const char *token, uint64_t fence, int with_wait,
                       int64_t deadline)
{
    const char *argv[9];
    size_t lens[9];
    char fence_arg[24];
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
    snprintf(fence_arg, sizeof fence_arg, "%llu",
             token != NULL && !l->spec.simple ? (unsigned long long) fence : 0ULL);
    argv[n++] = fence_arg;
    for (size_t i = 4; i < n; i++)
        lens[i] = strlen(argv[i]);
    evalcall call = {script, n, argv, lens};
    long long acked = -1;
    rc = with_wait
             ? dlock__redis_step(b, dlock__redis_conn(b, l, deadline), NULL, 1, &call, deadline,
                                 NULL, &r, &acked)
             : dlock__redis_run_script(dlock__redis_conn(b, l, deadline), &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    enum dlock__rrelease released;
    if (dlock__reply_release(r, &released) != 0)
        rc = dlock__redis_bad_reply(b, "release", r);
    else if (released == DLOCK__RRELEASE_OK && dlock__redis_unconfirmed(b, acked))
        /* Released on the master: what the replicas still have ends with
         * its lease (a failover meanwhile brings back a hold that expires). */
        DLOCK__LOG(b->base.host.log, DLOCK_LOG_WARN,
                   "%s: released %s, but %lld of %u replicas acknowledged it in time (wait=%u)",
                   b->label, l->keys[0], acked, b->sync_replicas, b->sync_replicas);
    else if (released == DLOCK__RRELEASE_NOTOWNER)
        rc = dlock__fail(DLOCK_ENOTOWNER, "%s is held by another owner", l->keys[0]);
    else if (released == DLOCK__RRELEASE_LOST)
        rc = dlock__fail(DLOCK_ELOST,
                         "%s is not held by this owner any more (its lease had run out or it "
                         "was removed)",
                         l->keys[0]);
    freeReplyObject(r);
    return rc;
}

int dlock__redis_release(dlock__store *s, dlock__store_lock *l, const char *token, uint64_t fence,
                         int64_t deadline)
{
    return run_release(RBACKEND(s), RLOCK(l), token, fence, 1, deadline);
}

int dlock__redis_force_unlock(dlock__store *s, dlock__store_lock *l, int64_t deadline)
{
    return run_release(RBACKEND(s), RLOCK(l), NULL, 0, 1, deadline);
}

int dlock__redis_extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                        int64_t lease_ms, int at_least, int64_t deadline)
{
    rbackend *b = RBACKEND(s);
    rlock *l = RLOCK(sl);
    char lease[24], fence_arg[24];
    const char *argv[9];
    size_t lens[9];
    size_t n = put_keys(l, argv, lens, 1);
    redisReply *r = NULL;
    int rc;

    argv[n] = token;
    lens[n++] = strlen(token);
    argv[n] = lease;
    lens[n++] = NUM(lease, lease_ms);
    argv[n] = at_least ? "1" : "0";
    lens[n++] = 1;
    argv[n] = l->spec.kind == DLOCK__READ ? "r" : is_shared(l) ? "s" : "x";
    lens[n++] = 1;
    argv[n] = fence_arg; /* (an interop key's is not looked at: nothing queues there) */
    lens[n++] = NUM(fence_arg, l->spec.simple ? 0 : fence);
    evalcall call = {DLOCK__S_EXTEND, n, argv, lens};
    long long acked;
    rc = dlock__redis_step(b, dlock__redis_conn(b, l, deadline), NULL, 1, &call, deadline, NULL, &r,
                           &acked);
    if (rc != DLOCK_OK)
        return rc;
    int extended;
    if (dlock__reply_extend(r, &extended) != 0)
        rc = dlock__redis_bad_reply(b, "extend", r);
    else if (!extended)
        rc = dlock__fail(DLOCK_ELOST, "%s is no longer held by this owner", l->keys[0]);
    else if (dlock__redis_unconfirmed(b, acked))
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "%s: extended %s on the master, but %lld of the %u replicas asked "
                         "(wait=%u) acknowledged it in time: not counted",
                         b->label, l->keys[0], acked, b->sync_replicas, b->sync_replicas);
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
    dlock__rconn *c = dlock__redis_conn(b, l, deadline);
    rc = dlock__redis_note_replica(b, c, deadline);
    if (rc == DLOCK_OK)
        rc = dlock__redis_run_script(c, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__reply_status(r, st) != 0)
        rc = dlock__redis_bad_reply(b, "status", r);
    freeReplyObject(r);
    return rc;
}
