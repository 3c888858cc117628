/* SPDX-License-Identifier: MIT */
/* redlock.c - redlock://h1:p1,h2:p2,h3:p3: a mutex over N independent Redis
 * masters (Redlock), with a fence written back to a quorum. README.md has
 * the protocol step by step and the assumptions it rests on.
 *
 * Every step is one round sent to all N nodes at once (nodes.h) and decided
 * as soon as a quorum (N/2+1) said yes, or as many said no (or failed) that
 * a quorum is out of reach: the slowest node is never waited for.
 *
 * Assumptions (as Redlock's): a node keeps its data across a restart
 * (appendonly with fsync), or stays down for one maximum lease before it
 * comes back empty: else a lock it granted can be granted again while still
 * held, and a fence counter it lost can let a later quorum read a lower
 * count. The clocks of the nodes run at about the same rate (the drift
 * margin: 1% of the lease + 2 ms); no clock is compared with another.
 * Process pauses are what the fence is for: a protected resource that
 * refuses a fence lower than one it saw is safe from a holder that paused
 * past its validity. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../backend.h"
#include "../redis/keys.h"
#include "../redis/transport.h"
#include "internal.h"
#include "nodes.h"
#include "redlock_script.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT   6379
#define DEFAULT_PREFIX "redlock"
#define MIN_NODES      3
/* A polling waiter's mark (P:{E}:waiting) lives this long after its last
 * attempt: waiters poll every 64 ms at most, so a live one keeps it; one
 * that died is counted no longer. */
#define MARK_MS_N 2000
#define TEXT_(x)  #x
#define TEXT(x)   TEXT_(x)
#define MARK_MS   TEXT(MARK_MS_N)
/* The client's owner record (who it is, for holders()): kept two days,
 * written again with an attempt when less than a day is left, as
 * redis://'s (../redis/owner.c). */
#define RECORD_TTL_MS   (48LL * 3600 * 1000)
#define RECORD_RENEW_MS (24LL * 3600 * 1000)
#define FORGET_MS       250 /* the bound of deleting the record at close */
#define CLOSE_WAIT_MS   250 /* how long close waits for what is queued for the nodes */
/* A wait's budget bounds its attempts' requests too, frozen nodes
 * included; an attempt sent at (or after) the budget's end still gets this
 * share of the command timeout, for a node that answers to answer. */
#define LAST_ROUND_MIN_MS 200
#define LAST_ROUND_SHARE  10 /* a tenth of the command timeout, at least the above */
/* A take found a quorum out of reach before every node answered (those
 * that failed did so at once): the others get this long more to answer,
 * for the message only, so that a healthy node that was a little slower is
 * counted as answered, not "not heard from yet" one attempt in two. */
#define COUNT_GRACE_MS 100

extern const dlock__backend dlock__redlock_backend;

/* The drift margin of a lease (Redlock's: 1% and 2 ms). */
static int64_t drift_us(int64_t lease_ms)
{
    return lease_ms * 10 + 2000;
}

static size_t number(char *buf, int64_t v)
{
    return (size_t) snprintf(buf, 24, "%" PRId64, v);
}

/* Sends the release of token to every node, answered or not, without
 * waiting: what an attempt took is given back. A waiter's give-back keeps
 * its waiting mark: it goes on polling. */
static void release_everywhere(rlbackend *b, const rllock *l, const char *token, int waiter)
{
    const char *argv[] = {l->release_op, token, waiter ? "1" : "0"};
    size_t lens[] = {strlen(l->release_op), strlen(token), 1};
    dlock__rlround *r =
        dlock__rl_send_one(b, l, 3, argv, lens, dlock__now_us() + b->cfg.command_timeout_ms * 1000);
    dlock__rlround_drop(r);
}

/* ---------------------------------------------------------------- steps */

/* What a take's refusal says holds the name (node.lua: take's KIND). */
enum {
    HELD_SAME = 0,    /* this kind: a holder, or a waiting mark a reader lets go first */
    HELD_OTHER = 1,   /* the other layout's key: N for a mutex, P:{E} for simple */
    HELD_RW = 2,      /* the read-write lock */
    HELD_MUTEX = 3,   /* the mutex P:{E} (to the read-write lock) */
    HELD_INTEROP = 4, /* the interop key N (to the read-write lock) */
    HELD_KINDS = 5,
    HELD_WRITER_FIRST = 6, /* readers hold it, and a writer waits from before this reader */
    HELD_TURN = 7,         /* free, but a reader waiting from before this writer goes first */
    HELD_UPGRADE = 8,      /* the caller reads, and asks to write */
    HELD_SELF = 9,         /* the caller's token holds the name as another kind */
};

/* The kind of lock that most refusals named (the same kind if none). */
static enum dlock__held_as held_as(const rllock *l, const size_t as[HELD_KINDS])
{
    size_t most = 0;
    for (size_t k = 1; k < HELD_KINDS; k++) {
        if (as[k] > as[most])
            most = k;
    }
    switch (most) {
    case HELD_OTHER:
        return l->base.spec.simple ? DLOCK__HELD_AS_MUTEX : DLOCK__HELD_AS_SIMPLE;
    case HELD_RW:
        return DLOCK__HELD_AS_RW;
    case HELD_MUTEX:
        return DLOCK__HELD_AS_MUTEX;
    case HELD_INTEROP:
        return DLOCK__HELD_AS_SIMPLE;
    default:
        return DLOCK__HELD_AS_SAME;
    }
}

/* Decided once a quorum answered, or so many failed that it cannot. */
static int answered_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    const rlbackend *b = arg;
    size_t answered = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        int says = dlock__rl_said(&a[i], 0);
        answered += says != DLOCK__RL_NO_ANSWER;
        failed += a[i].done && says == DLOCK__RL_NO_ANSWER;
    }
    return answered >= b->quorum || failed > n - b->quorum;
}

/* Decided once taken on a quorum, or once the nodes not heard from yet
 * can change neither that nor whether the others failed beyond what a
 * quorum spares (EUNREACHABLE) or not (held: a poll). */
/* Never decided: a wait for every node's answer (or the time given). */
static int all_answered(void *arg, const dlock__rlanswer *a, size_t n)
{
    (void) arg;
    (void) a;
    (void) n;
    return 0;
}

static int take_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    const rlbackend *b = arg;
    size_t yes = 0, failed = 0, pending = 0, q = b->quorum;
    for (size_t i = 0; i < n; i++) {
        int says = dlock__rl_said(&a[i], 0);
        if (!a[i].done)
            pending++;
        else if (says == 1)
            yes++;
        else if (says == DLOCK__RL_NO_ANSWER)
            failed++;
    }
    return yes >= q || (yes + pending < q && (failed + pending <= n - q || failed > n - q));
}

/* Writes fence back to a quorum (the counter becomes at least fence on
 * each node): DLOCK_OK, or DLOCK_EUNREACHABLE naming the nodes that did not
 * take it. */
static int write_fence(rlbackend *b, const rllock *l, uint64_t fence, int64_t until_us,
                       int64_t deadline_us)
{
    char value[24];
    const char *argv[] = {"fence", value};
    size_t lens[] = {5, number(value, (int64_t) fence)};
    return dlock__rl_quorum_call(b, l, 2, argv, lens, until_us, deadline_us,
                                 "the fence could not be written to");
}

/* Whether the client's owner record goes with this attempt: never written,
 * or less than a day (or the lease, if longer) left of it; one attempt at
 * a time writes it. */
static int record_due(rlbackend *b, int64_t lease_ms, int64_t *until_us, int64_t *ttl_ms)
{
    int64_t now = dlock__now_us();
    int64_t keep_ms = lease_ms > RECORD_RENEW_MS ? lease_ms : RECORD_RENEW_MS;

    if (atomic_load(&b->record_until) - now > keep_ms * 1000 ||
        atomic_exchange(&b->record_writing, 1))
        return 0;
    *ttl_ms = keep_ms + RECORD_TTL_MS - RECORD_RENEW_MS;
    *until_us = now + *ttl_ms * 1000; /* counted from before it is sent */
    return 1;
}

/* The bound of an attempt's rounds (each node's request and the wait for
 * a quorum): the request's, and within a wait with a budget no later than
 * the budget's end, so that nodes that do not answer cost the wait what is
 * left of it and no more (the core would let a request run half a command
 * timeout past it, and a node frozen before it was ever reached is silent
 * for all of that); an attempt at the very end gets a short share. */
static int64_t attempt_bound(const rlbackend *b, const dlock__attempt *att, int64_t start)
{
    int64_t bound = att->deadline_us;
    if (att->wait_until_us == 0 || att->wait_until_us == DLOCK__NEVER)
        return bound; /* a try, or a wait without a budget */
    int64_t share_ms = b->cfg.command_timeout_ms / LAST_ROUND_SHARE;
    if (share_ms < LAST_ROUND_MIN_MS)
        share_ms = LAST_ROUND_MIN_MS;
    int64_t end = start + share_ms * 1000;
    if (att->wait_until_us > end)
        end = att->wait_until_us;
    return end < bound ? end : bound;
}

/* The single-server rule (the core's), per node of the quorum: a server
 * that never answered this client is given a moment (a wrong address, a
 * server down: reported within about a second), one that answered before
 * has its outage ridden out up to unreachable_wait (a restart, a failover).
 * So the store counts as reached once any node answered, unless the nodes
 * that never answered and have nobody at their address (refused, the
 * connect timeout, another service there: nodes.h) leave fewer than a
 * quorum: then no quorum can form until they are started or the URL
 * mended, and a wait gives up as for a server never reached, not after
 * unreachable_wait. A node that took the connection and is silent (frozen),
 * or one that answered once and is down now (restarting), may answer soon:
 * a quorum out of reach with such nodes in it is an outage, ridden out and
 * reported as one ("still unreachable when the wait ran out"). */
static int quorum_in_reach(const rlbackend *b)
{
    return b->n - dlock__rlnodes_absent(b->nodes) >= b->quorum;
}

/* The place in line of a read-write lock's wait (README: turns): the
 * nodes' clocks at its first refusal, each node's reply to it, of which it
 * takes the middle one (a node whose clock is off does not move it), then
 * sent alike to every node with each attempt after it, so that every node
 * puts two waits in the same order (a node's own clock at the first
 * refusal that reached it could order them otherwise than another node's,
 * and two waits of the other kinds refused, each, where the other goes
 * first, would never make a quorum while a node is down). */
static void place_in_line(rllock *l, const dlock__rlanswer *a, size_t n)
{
    long long at[DLOCK__REDLOCK_MAX_NODES];
    size_t k = 0;
    for (size_t i = 0; i < n && k < DLOCK__REDLOCK_MAX_NODES; i++) {
        long long since =
            dlock__rl_said(&a[i], 0) == 0 ? dlock__rl_int_at(a[i].replies[0], 4, 0) : 0;
        if (since > 0)
            at[k++] = since;
    }
    for (size_t i = 1; i < k; i++) {
        for (size_t j = i; j > 0 && at[j - 1] > at[j]; j--) {
            long long t = at[j];
            at[j] = at[j - 1];
            at[j - 1] = t;
        }
    }
    if (k > 0)
        l->since_ms = at[(k - 1) / 2];
}

static int acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *att)
{
    rlbackend *b = RLB(s);
    rllock *l = RLL(sl);
    int64_t start = dlock__now_us(), record_until = 0, record_ms = 0;
    char lease[24], record_ttl[24] = "", since[24] = "";
    int record = record_due(b, att->lease_ms, &record_until, &record_ms);
    const char *mark = att->wait ? MARK_MS : "0";
    /* A place kept since the last attempt of this wait; a try, or an
     * attempt after the marks would have lapsed (a wait that ended without
     * a cancel reaching the nodes), starts a new one. */
    if (!att->wait || start - l->since_sent_us > MARK_MS_N * 1000LL)
        l->since_ms = 0;
    if (l->since_ms > 0)
        l->since_sent_us = start;
    const char *argv[] = {l->take_op,
                          att->token,
                          lease,
                          l->other,
                          mark,
                          record ? b->record_key : "",
                          record ? b->cfg.owner_info : "",
                          record_ttl,
                          since};
    size_t lens[] = {strlen(l->take_op),
                     strlen(att->token),
                     number(lease, att->lease_ms),
                     strlen(l->other),
                     strlen(mark),
                     record ? strlen(b->record_key) : 0,
                     record ? strlen(b->cfg.owner_info) : 0,
                     record ? number(record_ttl, record_ms) : 0,
                     l->since_ms > 0 ? number(since, l->since_ms) : 0};
    /* past this the lock would be invalid on arrival: no reason to wait */
    int64_t valid_until = start + att->lease_ms * 1000 - drift_us(att->lease_ms);
    int64_t bound = attempt_bound(b, att, start);
    int64_t until = bound < valid_until ? bound : valid_until;
    int rc = DLOCK_OK;

    l->out_of_reach = 0;
    l->refused_self = 0;
    dlock__rlround *r = dlock__rl_send_one(b, l, l->rw ? 9 : 8, argv, lens, bound);
    if (r == NULL) {
        atomic_store(&b->record_writing, 0);
        return DLOCK_ENOMEM;
    }
    const dlock__rlanswer *a = dlock__rlround_wait(r, take_decided, b, until);
    size_t taken = 0, held = 0, failed = 0, self = 0, upgrade = 0, turn = 0, first = 0;
    size_t as[HELD_KINDS] = {0}; /* the refusals, by the kind that holds the name */
    long long counter = 0, ttl = -1;
    for (size_t i = 0; i < b->n; i++) {
        int says = dlock__rl_said(&a[i], 0);
        if (says == DLOCK__RL_NO_ANSWER) {
            failed++;
            continue;
        }
        long long c = dlock__rl_int_at(a[i].replies[0], 1, 0);
        if (says == 1) {
            taken++;
            if (c > counter)
                counter = c;
        } else {
            held++;
            long long kind = dlock__rl_int_at(a[i].replies[0], 3, 0);
            self += kind == HELD_SELF;
            upgrade += kind == HELD_UPGRADE;
            turn += kind == HELD_TURN;
            first += kind == HELD_WRITER_FIRST;
            if (kind > 0 && kind < HELD_KINDS)
                as[kind]++;
            if (kind == HELD_SELF || kind == HELD_UPGRADE)
                continue;
            long long t = dlock__rl_int_at(a[i].replies[0], 2, -1);
            if (t > 0 && (ttl < 0 || t < ttl))
                ttl = t;
        }
    }
    if (record) {
        /* on a quorum, it is on a node of every later holder's quorum */
        if (taken + held >= b->quorum)
            atomic_store(&b->record_until, record_until);
        atomic_store(&b->record_writing, 0);
    }
    /* a node of a Redis Cluster among them: a wrong URL, said at once
     * (a quorum of the others would hide it until that node mattered) */
    rc = dlock__rl_wrong_url(b, a);
    if (rc != DLOCK_OK) {
        l->out_of_reach = 1; /* (the cancel that follows: not waited for) */
        release_everywhere(b, l, att->token, 0);
        goto out;
    }
    if (taken >= b->quorum) {
        /* The highest counter the take stored; where a quorum of the
         * nodes that took it stored that very value, the take was its
         * write-back (README: Fence), else it is written back now. */
        uint64_t fence = (uint64_t) counter;
        size_t stored = 0;
        for (size_t i = 0; i < b->n; i++)
            stored +=
                dlock__rl_said(&a[i], 0) == 1 && dlock__rl_int_at(a[i].replies[0], 1, 0) == counter;
        if (dlock__now_us() >= valid_until) {
            rc = dlock__fail(DLOCK_EUNREACHABLE,
                             "%s: a quorum answered only after the lease of %" PRId64
                             " ms had run out",
                             b->label, att->lease_ms);
        } else if (stored < b->quorum) {
            rc = write_fence(b, l, fence, until, bound);
        }
        if (rc == DLOCK_OK && dlock__now_us() >= valid_until)
            rc = dlock__fail(DLOCK_EUNREACHABLE,
                             "%s: the fence reached a quorum only after the lease of %" PRId64
                             " ms had run out",
                             b->label, att->lease_ms);
        if (rc == DLOCK_OK) {
            l->since_ms = 0; /* the wait is over */
            att->outcome = DLOCK__TAKEN;
            att->fence = fence;
            att->session = NULL;
        } else {
            release_everywhere(b, l, att->token, 0);
        }
        goto out;
    }
    /* not taken: give back what was taken (and what may still be). Not
     * when a node answered that this owner holds the name already (as
     * another kind, or a reader beside its write), whatever the others
     * did: a release goes by the token, and would end the hold of the
     * owner's other handle (dlock_lock_dup) on every node. A second write
     * handle's refusal gave back its owner's write, and another client's
     * reader got in beside the owner's write handle (conformance
     * rw_dup_writer_keeps_reader, rw_dup_writer_release_tells), also when
     * a node that missed the owner's read took it (test_redlock_rw
     * dup_writer_refused_on_mixed_nodes). What such a node took is under
     * the owner's token: the owner's release of the name ends it, else
     * its lease (README: "Self-deadlock"). */
    if (self + upgrade == 0 && (taken > 0 || failed > 0))
        release_everywhere(b, l, att->token, att->wait);
    l->refused_self = self + upgrade > 0;
    if (self + upgrade > 0) {
        /* The caller's own token holds the name as another kind (a handle
         * of dlock_lock_dup), on a node at least: its hold there is on a
         * quorum, which every quorum meets, or was given back and a node
         * missed it (then it ends with its lease). It could only wait for
         * itself. */
        rc = upgrade > 0 ? dlock__fail(DLOCK_EDEADLK,
                                       "this owner holds the read lock: taking the write lock "
                                       "too would wait for itself (release the read lock "
                                       "first; upgrades are refused)")
                         : dlock__fail(DLOCK_EDEADLK,
                                       "this owner holds the name as another kind of lock: "
                                       "asking for it as this kind would wait for itself (one "
                                       "name is one lock)");
        goto out;
    }
    if (failed > b->n - b->quorum) {
        /* counted as the message lists them: those that failed, and
         * those still silent only when the round ran out of time (not
         * when a quorum was already out of reach) */
        /* Every node counted once, as answered, refused (a replica...),
         * out of reach, or not heard from when the round was decided
         * without it: the counts add up to N. */
        int timed_out = !take_decided(b, a, b->n);
        if (!timed_out && dlock__rl_pending_of(a, b->n) > 0) {
            int64_t grace = dlock__now_us() + COUNT_GRACE_MS * 1000;
            a = dlock__rlround_wait(r, all_answered, NULL, grace < until ? grace : until);
        }
        dlock__rlcount c;
        char counts[320] = "; ";
        dlock__rl_count(a, b->n, timed_out, &c);
        /* the nodes that refused and those out of reach are counted in
         * the message's head: not again in the counts */
        c.refused = c.out = 0;
        dlock__rl_count_text(&c, counts + 2, sizeof counts - 2);
        size_t absent = dlock__rlnodes_absent(b->nodes);
        if (!quorum_in_reach(b))
            snprintf(counts + strlen(counts), sizeof counts - strlen(counts),
                     "; %zu never answered this client and nothing answers as Redis at their "
                     "address: no quorum until they are started (or the URL mended)",
                     absent);
        l->out_of_reach = 1;
        rc = dlock__rl_fail_no_quorum(b, a, timed_out, NULL, "", counts);
        goto out;
    }
    if (l->rw && att->wait && l->since_ms == 0) {
        place_in_line(l, a, b->n);
        l->since_sent_us = start;
    }
    att->outcome = DLOCK__HELD;
    att->next = DLOCK__NEXT_POLL;
    att->holder_ttl_ms = ttl > 0 ? ttl : DLOCK__TTL_UNKNOWN;
    att->held_as = held_as(l, as);
    /* no holder seen, only a reader's turn: said so, not "held" */
    if (turn > 0 && ttl <= 0)
        att->held_why = "a reader waiting from before this writer goes first "
                        "(src/backend/redlock/README.md, 'Turns')";
    /* most refusals: readers hold it, a writer goes first (its lease is
     * not when it frees) */
    if (first * 2 > held) {
        att->held_why = DLOCK__WHY_WRITER_FIRST;
        if (!att->wait)
            att->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
    }
out:
    dlock__rlround_drop(r);
    return rc;
}

static int release(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                   int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    rlbackend *b = RLB(s);
    const char *argv[] = {RLL(sl)->release_op, token};
    size_t lens[] = {strlen(RLL(sl)->release_op), strlen(token)};
    dlock__rlround *r = dlock__rl_send_one(b, RLL(sl), 2, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    /* the release goes to every node; its outcome is known from a quorum */
    const dlock__rlanswer *a = dlock__rlround_wait(r, answered_decided, b, deadline_us);
    size_t deleted = 0, other = 0, answered = 0;
    for (size_t i = 0; i < b->n; i++) {
        int says = dlock__rl_said(&a[i], 0);
        answered += says != DLOCK__RL_NO_ANSWER;
        deleted += says == 1;
        other += says == -1;
    }
    int rc = DLOCK_OK;
    if (deleted > 0)
        rc = DLOCK_OK;
    else if (other >= b->quorum)
        rc = dlock__fail(DLOCK_ENOTOWNER, "%s: the lock is held by another owner", b->label);
    else if (answered >= b->quorum)
        rc = dlock__fail(DLOCK_ELOST, "%s: the lock was not held any more (its lease ran out)",
                         b->label);
    else if ((rc = dlock__rl_wrong_url(b, a)) != DLOCK_OK)
        ;
    else {
        char why[1500];
        dlock__rl_unanswered(b, a, !answered_decided(b, a, b->n), NULL, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: release: a quorum of %zu did not answer: %s",
                         b->label, b->quorum, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* A waiter gives up. It never queues (waiters poll), but an attempt that
 * gave up may have left a take on a node that answered late: give it back,
 * with its waiting mark, on a quorum before it returns (a query that
 * follows counts it gone). After an attempt that found a quorum out of
 * reach (whose take was given back already), it is sent, not waited for:
 * no quorum would answer it, and the wait's budget is spent. */
static int cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    rllock *l = RLL(sl);
    const char *argv[] = {l->release_op, token};
    size_t lens[] = {strlen(l->release_op), strlen(token)};
    l->since_ms = 0; /* its place goes with its mark */
    if (l->refused_self)
        return DLOCK_OK; /* (its earlier attempts' marks end with their 2 s) */
    dlock__rlround *r = dlock__rl_send_one(b, l, 2, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    if (!l->out_of_reach)
        dlock__rlround_wait(r, answered_decided, b, deadline_us);
    dlock__rlround_drop(r);
    return DLOCK_OK;
}

static int extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                  int64_t lease_ms, int at_least, int64_t deadline_us)
{
    (void) fence; /* a hold here is known by its token alone */
    rlbackend *b = RLB(s);
    char lease[24];
    const char *argv[] = {RLL(sl)->renew_op, token, lease, at_least ? "1" : "0"};
    size_t lens[] = {strlen(RLL(sl)->renew_op), strlen(token), number(lease, lease_ms), 1};
    dlock__rlround *r = dlock__rl_send_one(b, RLL(sl), 4, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    dlock__rlverdict v = {b, 0, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(r, dlock__rl_decided_one, &v, deadline_us);
    size_t yes, no, none;
    dlock__rl_tally(a, b->n, 0, 1, &yes, &no, &none);
    int rc = DLOCK_OK;
    if (yes < b->quorum && no > b->n - b->quorum) {
        rc = dlock__fail(DLOCK_ELOST, "%s: the lock is no longer held on a quorum of %zu nodes",
                         b->label, b->quorum);
    } else if (yes < b->quorum && (rc = dlock__rl_wrong_url(b, a)) != DLOCK_OK) {
        /* (a node of a Redis Cluster: the URL is wrong) */
    } else if (yes < b->quorum) {
        char why[1500];
        dlock__rl_unanswered(b, a, !dlock__rl_decided_one(&v, a, b->n), NULL, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: a quorum of %zu did not confirm the lock: %s",
                         b->label, b->quorum, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* The renewal batch: every item's renew in one pipelined batch per node,
 * the N batches at once. Decided once every item has a quorum of yes, or
 * cannot have one any more. */
typedef struct batch_verdict {
    const rlbackend *b;
    size_t n;
} batch_verdict;

static int batch_decided(void *arg, const dlock__rlanswer *a, size_t nnodes)
{
    const batch_verdict *bv = arg;
    for (size_t k = 0; k < bv->n; k++) {
        dlock__rlverdict v = {bv->b, k, 1};
        if (!dlock__rl_decided_one(&v, a, nnodes))
            return 0;
    }
    return 1;
}

static int renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    dlock__rlround *r = dlock__rlround_new(n);
    int rc = DLOCK_OK;

    if (r == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t k = 0; k < n && rc == DLOCK_OK; k++) {
        const rllock *l = RLL(items[k].lock);
        char lease[24];
        const char *argv[] = {"2", l->keys[0], l->keys[1], l->renew_op, items[k].token, lease, "0"};
        size_t lens[] = {1,
                         l->key_lens[0],
                         l->key_lens[1],
                         strlen(l->renew_op),
                         strlen(items[k].token),
                         number(lease, items[k].lease_ms),
                         1};
        rc = dlock__rlround_set(r, k, 7, argv, lens);
    }
    if (rc != DLOCK_OK) {
        dlock__rlround_drop(r);
        return rc;
    }
    dlock__rlround_send(b->nodes, r, deadline_us);
    batch_verdict bv = {b, n};
    const dlock__rlanswer *a = dlock__rlround_wait(r, batch_decided, &bv, deadline_us);
    /* a node not heard from counts only if the wait ran out before it */
    int timed_out = !batch_decided(&bv, a, b->n);
    size_t failed = 0;
    for (size_t i = 0; i < b->n; i++)
        failed += a[i].done ? a[i].rc != DLOCK_OK : timed_out;
    for (size_t k = 0; k < n; k++) {
        size_t yes, no, none;
        dlock__rl_tally(a, b->n, k, 1, &yes, &no, &none);
        /* gone from so many nodes that no quorum can hold it: lost; one
         * node's "gone" while the quorum holds is not a loss */
        if (yes >= b->quorum)
            items[k].result = DLOCK__RENEW_OK;
        else if (no > b->n - b->quorum)
            items[k].result = DLOCK__RENEW_GONE;
        else
            items[k].result = DLOCK__RENEW_FAILED;
    }
    if (failed > b->n - b->quorum) {
        /* Short, and without the store's label (the renewer names the
         * store): the loss this may become quotes it in a line of its own
         * (a lost lock's reason is 200 bytes at most). */
        char why[96];
        dlock__rl_unanswered(b, a, timed_out, NULL, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "renewal: a quorum of %zu of %zu nodes did not answer: %s", b->quorum,
                         b->n, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* A hold left in the store: it keeps its lease, and the client's owner
 * record outlives the client to name its holder. */
static void detach(dlock__store *s, dlock__store_lock *sl)
{
    (void) sl;
    atomic_store(&RLB(s)->record_kept, 1);
}

/* ---------------------------------------------------------------- client */

/* Deletes the client's owner record on the nodes, briefly: best effort, a
 * record left behind ends by itself. */
static void forget_record(rlbackend *b, int64_t deadline_us)
{
    const char *argv[] = {"0", "forget", b->record_key};
    size_t lens[] = {1, 6, strlen(b->record_key)};
    int64_t bound_ms =
        b->cfg.command_timeout_ms < FORGET_MS ? b->cfg.command_timeout_ms : FORGET_MS;
    int64_t until = dlock__now_us() + bound_ms * 1000;
    dlock__saved_error saved;

    if (until > deadline_us)
        until = deadline_us;
    dlock__save_error(&saved);
    dlock__rlround *r = dlock__rlround_new(1);
    if (r != NULL && dlock__rlround_set(r, 0, 3, argv, lens) == DLOCK_OK) {
        dlock__rlround_send(b->nodes, r, until);
        dlock__rlround_wait(r, answered_decided, b, until);
    }
    dlock__rlround_drop(r);
    dlock__restore_error(&saved);
}

static void close_backend(dlock__store *s, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    if (b == NULL)
        return;
    if (b->nodes != NULL && atomic_load(&b->record_until) != 0 && !atomic_load(&b->record_kept))
        forget_record(b, deadline_us);
    /* What is still queued for the nodes (a release given back without
     * waiting, the record's deletion) is sent until the deadline, but the
     * close waits for it a moment only, and not at all for a node found
     * out of reach: a frozen node would hold it up a command timeout. */
    int64_t wait_until = dlock__now_us() + CLOSE_WAIT_MS * 1000;
    dlock__rlnodes_free(b->nodes, deadline_us, wait_until < deadline_us ? wait_until : deadline_us);
    dlock__rtls_free(b->tls); /* not handed to the nodes (a failed open) */
    free(b->prefix);
    free(b->label);
    free(b->record_key);
    free(b->records);
    free(b);
}

static int open_backend(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    rlbackend *b = calloc(1, sizeof *b);
    dlock__rendpoint eps[DLOCK__REDLOCK_MAX_NODES];
    char labels[DLOCK__REDLOCK_MAX_NODES][300];
    char label[1024];
    int64_t connect_timeout_ms = 2000;
    int rc;

    *out = NULL;
    if (b == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    b->base.backend = &dlock__redlock_backend;
    b->base.caps = dlock__redlock_backend.caps;
    b->base.host = *host;
    b->cfg = *host->cfg;
    if (url->nhosts < MIN_NODES) {
        rc = dlock__fail(DLOCK_EINVAL,
                         "%s: Redlock wants at least %d independent Redis masters "
                         "(redlock://h1:port,h2:port,h3:port), got %zu; for one server use "
                         "redis://",
                         url->text, MIN_NODES, url->nhosts);
        goto fail;
    }
    if (url->path[0] != '\0') {
        rc = dlock__fail(DLOCK_EINVAL, "%s: redlock:// takes no path (/%s): no database number",
                         url->text, url->path);
        goto fail;
    }
    b->n = url->nhosts;
    b->quorum = b->n / 2 + 1;
    /* the user name (never the password): who asked is part of what a
     * refusal means */
    size_t used = (size_t) snprintf(label, sizeof label, "%s://%s", url->scheme, url->userinfo);
    for (size_t i = 0; i < b->n; i++) {
        const dlock__url_host *h = &url->hosts[i];
        int port = h->port ? h->port : DEFAULT_PORT;
        snprintf(labels[i], sizeof labels[i], strchr(h->name, ':') ? "[%s]:%d" : "%s:%d", h->name,
                 port);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(labels[i], labels[j]) == 0) {
                rc = dlock__fail(DLOCK_EINVAL,
                                 "%s: node %s is listed twice: a quorum needs independent "
                                 "masters",
                                 url->text, labels[i]);
                goto fail;
            }
        }
        if (used < sizeof label)
            used += (size_t) snprintf(label + used, sizeof label - used, "%s%s", i ? "," : "",
                                      labels[i]);
    }
    const char *prefix = dlock__url_get(url, "prefix");
    rc = dlock__redis_check_prefix(prefix != NULL ? prefix : DEFAULT_PREFIX);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "connect_timeout", 1, &connect_timeout_ms);
    if (rc != DLOCK_OK)
        goto fail;
    b->prefix = strdup(prefix != NULL ? prefix : DEFAULT_PREFIX);
    b->label = strdup(label);
    b->records = malloc(strlen(b->prefix) + 8);
    b->record_key = malloc(strlen(b->prefix) + 8 + sizeof b->cfg.client_id);
    if (b->records != NULL)
        sprintf(b->records, "%s:owner:", b->prefix);
    if (b->record_key != NULL)
        sprintf(b->record_key, "%s:owner:%s", b->prefix, b->cfg.client_id);
    if (b->prefix == NULL || b->label == NULL || b->records == NULL || b->record_key == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto fail;
    }
    const char *user = url->user, *password = url->password;
    if (user != NULL && password == NULL) {
        password = user; /* redlock://secret@...: the user-info is the password, as redis:// */
        user = NULL;
    }
    for (size_t i = 0; i < b->n; i++) {
        eps[i] = (dlock__rendpoint){
            .host = url->hosts[i].name,
            .port = url->hosts[i].port ? url->hosts[i].port : DEFAULT_PORT,
            .user = user,
            .password = password,
            .connect_timeout_ms = connect_timeout_ms,
            .command_timeout_ms = b->cfg.command_timeout_ms,
            .label = labels[i],
            .tls_scheme = "rediss+redlock://",
            .log = host->log,
            .independent = b->n,
        };
    }
    /* (insecure=1 is logged at the first connection) */
    rc = dlock__rtls_from_url(url, strcmp(url->scheme, "rediss+redlock") == 0, "rediss+redlock://",
                              &b->tls);
    if (rc == DLOCK_OK) {
        /* the nodes own the context from here on, failure or not */
        struct dlock__rtls *tls = b->tls;
        b->tls = NULL;
        rc = dlock__rlnodes_new(eps, b->n, dlock__redlock_script, DLOCK__REDLOCK_SCRIPT_SHA, tls,
                                &b->nodes);
    }
    if (rc != DLOCK_OK)
        goto fail;
    b->base.label = b->label;
    *out = &b->base;
    return DLOCK_OK;
fail:
    close_backend(&b->base, dlock__now_us());
    return rc;
}

/* Reached: see quorum_in_reach; and -1 while a node of a Redis Cluster
 * is among the nodes (another kind of server than the URL asks for: the
 * URL is wrong, as for redis:// at one, whatever the others answered;
 * said at once, backend.h). */
static int reached(dlock__store *s)
{
    rlbackend *b = RLB(s);
    for (size_t i = 0; i < b->n; i++) {
        if (dlock__rlnodes_in_cluster(b->nodes, i))
            return -1;
    }
    return dlock__rlnodes_reached(b->nodes) > 0 && quorum_in_reach(b);
}

static const char *const schemes[] = {"redlock", "rediss+redlock", NULL};

const dlock__backend dlock__redlock_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "Redlock",
    .schemes = schemes,
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_ADOPT |
            DLOCK_CAP_READ_WRITE | DLOCK_CAP_INTEROP | DLOCK_CAP_QUERY | DLOCK_CAP_FORCE_UNLOCK |
            DLOCK_CAP_LIST,
    .open = open_backend,
    .close = close_backend,
    .lock_new = dlock__rl_lock_new,
    .lock_free = dlock__rl_lock_free,
    .detach = detach,
    .acquire = acquire,
    .cancel = cancel,
    .release = release,
    .extend = extend,
    .renew = renew,
    .query = dlock__rl_query,
    .force_unlock = dlock__rl_force_unlock,
    .holders = dlock__rl_holders,
    .list = dlock__rl_list,
    .reached = reached,
};
