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
#define MARK_MS "2000"
/* The client's owner record (who it is, for holders()): kept two days,
 * written again with an attempt when less than a day is left, as
 * redis://'s (../redis/owner.c). */
#define RECORD_TTL_MS   (48LL * 3600 * 1000)
#define RECORD_RENEW_MS (24LL * 3600 * 1000)
#define FORGET_MS       250 /* the bound of deleting the record at close */
#define LIST_BATCH      128 /* names asked about in one round of list() */

typedef struct rlbackend {
    dlock__store base;
    dlock__client_cfg cfg;
    char *prefix;
    char *label;
    dlock__rlnodes *nodes;
    size_t n, quorum;
    /* Per node: a connection to it was made once (its endpoint's `reached`) */
    atomic_int reached[DLOCK__REDLOCK_MAX_NODES];
    char *record_key;             /* P:owner:<client id> */
    char *records;                /* P:owner: */
    _Atomic int64_t record_until; /* the owner record lasts until then on a quorum (0: never
                                     written) */
    atomic_int record_writing;    /* an attempt is writing it */
    atomic_int record_kept;       /* a hold was detached: the record outlives the client */
} rlbackend;

typedef struct rllock {
    dlock__store_lock base;
    char *keys[3]; /* L (or N in simple mode), the fence counter, the name N (keys.h;
                      one block at keys[0]) */
    size_t key_lens[3];
    char *other;   /* the name's key of the other layout: N for a mutex, L for simple */
    char *waiting; /* P:{E}:waiting, the polling waiters' marks (node.lua) */
} rllock;

#define RLB(s) DLOCK__STORE_OF(rlbackend, s)
#define RLL(l) DLOCK__STORE_OF(rllock, l)

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

/* ---------------------------------------------------------------- replies */

/* An integer reply, or the first element of an array; `fallback` if none. */
static long long int_at(const redisReply *r, size_t i, long long fallback)
{
    if (r == NULL)
        return fallback;
    if (r->type == REDIS_REPLY_INTEGER && i == 0)
        return r->integer;
    if (r->type == REDIS_REPLY_ARRAY && i < r->elements &&
        r->element[i]->type == REDIS_REPLY_INTEGER)
        return r->element[i]->integer;
    return fallback;
}

/* What node i said to call k: 1, 0, -1 as the script says; 2: no answer
 * (or an error reply). */
#define NO_ANSWER 2
static int said(const dlock__rlanswer *a, size_t k)
{
    if (!a->done || a->rc != DLOCK_OK || a->replies[k]->type == REDIS_REPLY_ERROR)
        return NO_ANSWER;
    return (int) int_at(a->replies[k], 0, NO_ANSWER);
}

/* The message naming the nodes that did not answer: "h1:p1 (why); ...",
 * in len bytes: the nodes that do not fit are counted ("and 2 more"), so
 * that the text never ends mid-word. A node that had not answered yet is
 * named only when the wait ran out (timed_out): a round decided before it
 * answered did not wait for it, and it may well be up. */
static void unanswered(const rlbackend *b, const dlock__rlanswer *a, int timed_out, char *buf,
                       size_t len)
{
    enum { MORE = 16 }; /* room kept for " and 15 more" */
    size_t used = 0, more = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < b->n; i++) {
        if (!a[i].done && !timed_out)
            continue;
        const char *why = !a[i].done                                   ? "no reply in time"
                          : a[i].rc != DLOCK_OK                        ? a[i].err
                          : a[i].replies[0]->type == REDIS_REPLY_ERROR ? a[i].replies[0]->str
                                                                       : NULL;
        if (why == NULL)
            continue;
        const char *label = dlock__rlnodes_label(b->nodes, i);
        size_t label_len = strlen(label);
        if (strncmp(why, label, label_len) == 0 && strncmp(why + label_len, ": ", 2) == 0)
            why += label_len + 2; /* (the connection's message names the node too) */
        size_t need = (used ? 2 : 0) + label_len + strlen(why) + 3;
        if (more > 0 || used + need + MORE >= len) {
            more++;
            continue;
        }
        used +=
            (size_t) snprintf(buf + used, len - used, "%s%s (%s)", used ? "; " : "", label, why);
    }
    if (more > 0)
        snprintf(buf + used, len - used, "%s%zu more", used ? " and " : "", more);
}

/* A decision on call k: yes from a quorum, or a quorum out of reach (no +
 * failed beyond n - quorum). */
typedef struct verdict {
    const rlbackend *b;
    size_t k; /* the call of each node's batch */
    int yes;  /* the answer that counts as yes */
} verdict;

/* Counts call k's answers: yes, answered otherwise, and not answered. */
static void tally(const dlock__rlanswer *a, size_t n, size_t k, int yes_is, size_t *yes, size_t *no,
                  size_t *none)
{
    *yes = *no = *none = 0;
    for (size_t i = 0; i < n; i++) {
        int says = said(&a[i], k);
        if (says == NO_ANSWER)
            (*none)++;
        else if (says == yes_is)
            (*yes)++;
        else
            (*no)++;
    }
}

/* Nodes that have not answered (or failed) yet. */
static size_t pending_of(const dlock__rlanswer *a, size_t n)
{
    size_t pending = 0;
    for (size_t i = 0; i < n; i++)
        pending += !a[i].done;
    return pending;
}

/* Decided once the outcome is known: yes from a quorum, no from more than
 * a quorum spares, or neither whatever the nodes not heard from yet say
 * (too many failed). Not before: a live node that is a little slower is
 * waited for rather than counted out. */
static int decided_one(void *arg, const dlock__rlanswer *a, size_t n)
{
    const verdict *v = arg;
    size_t yes, no, none, pending = pending_of(a, n), q = v->b->quorum;
    tally(a, n, v->k, v->yes, &yes, &no, &none);
    return yes >= q || no > n - q || (yes + pending < q && no + pending <= n - q);
}

/* A round of one script call (the same on every node), sent. NULL when out
 * of memory (recorded). */
static dlock__rlround *send_one(rlbackend *b, const rllock *l, size_t argc, const char **argv,
                                size_t *lens, int64_t deadline_us)
{
    /* numkeys, the three keys, then the step's arguments */
    const char *all[16] = {"3", l->keys[0], l->keys[1], l->waiting};
    size_t all_lens[16] = {1, l->key_lens[0], l->key_lens[1], strlen(l->waiting)};
    for (size_t i = 0; i < argc && i < 12; i++) {
        all[4 + i] = argv[i];
        all_lens[4 + i] = lens[i];
    }
    dlock__rlround *r = dlock__rlround_new(1);
    if (r == NULL) {
        dlock__fail(DLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    if (dlock__rlround_set(r, 0, argc + 4, all, all_lens) != DLOCK_OK) {
        dlock__rlround_drop(r);
        return NULL;
    }
    dlock__rlround_send(b->nodes, r, deadline_us);
    return r;
}

/* Sends the release of token to every node, answered or not, without
 * waiting: what an attempt took is given back. A waiter's give-back keeps
 * its waiting mark: it goes on polling. */
static void release_everywhere(rlbackend *b, const rllock *l, const char *token, int waiter)
{
    const char *argv[] = {"release", token, waiter ? "1" : "0"};
    size_t lens[] = {7, strlen(token), 1};
    dlock__rlround *r =
        send_one(b, l, 3, argv, lens, dlock__now_us() + b->cfg.command_timeout_ms * 1000);
    dlock__rlround_drop(r);
}

/* ---------------------------------------------------------------- steps */

/* Decided once a quorum answered, or so many failed that it cannot. */
static int answered_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    const rlbackend *b = arg;
    size_t answered = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        int says = said(&a[i], 0);
        answered += says != NO_ANSWER;
        failed += a[i].done && says == NO_ANSWER;
    }
    return answered >= b->quorum || failed > n - b->quorum;
}

/* Decided once taken on a quorum, or once the nodes not heard from yet
 * can change neither that nor whether the others failed beyond what a
 * quorum spares (EUNREACHABLE) or not (held: a poll). */
static int take_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    const rlbackend *b = arg;
    size_t yes = 0, failed = 0, pending = 0, q = b->quorum;
    for (size_t i = 0; i < n; i++) {
        int says = said(&a[i], 0);
        if (!a[i].done)
            pending++;
        else if (says == 1)
            yes++;
        else if (says == NO_ANSWER)
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
    dlock__rlround *r = send_one(b, l, 2, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    verdict v = {b, 0, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(r, decided_one, &v, until_us);
    size_t yes, no, none;
    int rc = DLOCK_OK;
    tally(a, b->n, 0, 1, &yes, &no, &none);
    if (yes < b->quorum) {
        char why[700];
        unanswered(b, a, !decided_one(&v, a, b->n), why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "%s: the fence could not be written to a quorum of %zu of %zu nodes in "
                         "time: %s",
                         b->label, b->quorum, b->n, why);
    }
    dlock__rlround_drop(r);
    return rc;
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

static int acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *att)
{
    rlbackend *b = RLB(s);
    rllock *l = RLL(sl);
    int64_t start = dlock__now_us(), record_until = 0, record_ms = 0;
    char lease[24], record_ttl[24] = "";
    int record = record_due(b, att->lease_ms, &record_until, &record_ms);
    const char *mark = att->wait ? MARK_MS : "0";
    const char *argv[] = {"take",
                          att->token,
                          lease,
                          l->other,
                          mark,
                          record ? b->record_key : "",
                          record ? b->cfg.owner_info : "",
                          record_ttl};
    size_t lens[] = {4,
                     strlen(att->token),
                     number(lease, att->lease_ms),
                     strlen(l->other),
                     strlen(mark),
                     record ? strlen(b->record_key) : 0,
                     record ? strlen(b->cfg.owner_info) : 0,
                     record ? number(record_ttl, record_ms) : 0};
    /* past this the lock would be invalid on arrival: no reason to wait */
    int64_t valid_until = start + att->lease_ms * 1000 - drift_us(att->lease_ms);
    int64_t until = att->deadline_us < valid_until ? att->deadline_us : valid_until;
    int rc = DLOCK_OK;

    dlock__rlround *r = send_one(b, l, 8, argv, lens, att->deadline_us);
    if (r == NULL) {
        atomic_store(&b->record_writing, 0);
        return DLOCK_ENOMEM;
    }
    const dlock__rlanswer *a = dlock__rlround_wait(r, take_decided, b, until);
    size_t taken = 0, held = 0, failed = 0, held_other = 0;
    long long counter = 0, ttl = -1;
    for (size_t i = 0; i < b->n; i++) {
        int says = said(&a[i], 0);
        if (says == NO_ANSWER) {
            failed++;
            continue;
        }
        long long c = int_at(a[i].replies[0], 1, 0);
        if (says == 1) {
            taken++;
            if (c > counter)
                counter = c;
        } else {
            held++;
            held_other += int_at(a[i].replies[0], 3, 0) == 1;
            long long t = int_at(a[i].replies[0], 2, -1);
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
    if (taken >= b->quorum) {
        uint64_t fence = (uint64_t) counter + 1;
        if (dlock__now_us() >= valid_until) {
            rc = dlock__fail(DLOCK_EUNREACHABLE,
                             "%s: a quorum answered only after the lease of %" PRId64
                             " ms had run out",
                             b->label, att->lease_ms);
        } else {
            rc = write_fence(b, l, fence, until, att->deadline_us);
        }
        if (rc == DLOCK_OK && dlock__now_us() >= valid_until)
            rc = dlock__fail(DLOCK_EUNREACHABLE,
                             "%s: the fence reached a quorum only after the lease of %" PRId64
                             " ms had run out",
                             b->label, att->lease_ms);
        if (rc == DLOCK_OK) {
            att->outcome = DLOCK__TAKEN;
            att->fence = fence;
            att->session = NULL;
        } else {
            release_everywhere(b, l, att->token, 0);
        }
        goto out;
    }
    /* not taken: give back what was taken (and what may still be) */
    if (taken > 0 || failed > 0)
        release_everywhere(b, l, att->token, att->wait);
    if (failed > b->n - b->quorum) {
        char why[700];
        unanswered(b, a, !take_decided(b, a, b->n), why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: a quorum of %zu of %zu nodes is out of reach: %s",
                         b->label, b->quorum, b->n, why);
        goto out;
    }
    att->outcome = DLOCK__HELD;
    att->next = DLOCK__NEXT_POLL;
    att->holder_ttl_ms = ttl > 0 ? ttl : DLOCK__TTL_UNKNOWN;
    att->held_as = held_other == 0            ? DLOCK__HELD_AS_SAME
                   : l->base.spec.simple != 0 ? DLOCK__HELD_AS_MUTEX
                                              : DLOCK__HELD_AS_SIMPLE;
out:
    dlock__rlround_drop(r);
    return rc;
}

static int release(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    const char *argv[] = {"release", token};
    size_t lens[] = {7, strlen(token)};
    dlock__rlround *r = send_one(b, RLL(sl), 2, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    /* the release goes to every node; its outcome is known from a quorum */
    const dlock__rlanswer *a = dlock__rlround_wait(r, answered_decided, b, deadline_us);
    size_t deleted = 0, other = 0, answered = 0;
    for (size_t i = 0; i < b->n; i++) {
        int says = said(&a[i], 0);
        answered += says != NO_ANSWER;
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
    else {
        char why[700];
        unanswered(b, a, !answered_decided(b, a, b->n), why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: release: a quorum of %zu did not answer: %s",
                         b->label, b->quorum, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* A waiter gives up. It never queues (waiters poll), but an attempt that
 * gave up may have left a take on a node that answered late: give it back,
 * with its waiting mark, on a quorum before it returns (a query that
 * follows counts it gone). */
static int cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    const char *argv[] = {"release", token};
    size_t lens[] = {7, strlen(token)};
    dlock__rlround *r = send_one(b, RLL(sl), 2, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    dlock__rlround_wait(r, answered_decided, b, deadline_us);
    dlock__rlround_drop(r);
    return DLOCK_OK;
}

static int extend(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t lease_ms,
                  int at_least, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    char lease[24];
    const char *argv[] = {"renew", token, lease, at_least ? "1" : "0"};
    size_t lens[] = {5, strlen(token), number(lease, lease_ms), 1};
    dlock__rlround *r = send_one(b, RLL(sl), 4, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    verdict v = {b, 0, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(r, decided_one, &v, deadline_us);
    size_t yes, no, none;
    tally(a, b->n, 0, 1, &yes, &no, &none);
    int rc = DLOCK_OK;
    if (yes < b->quorum && no > b->n - b->quorum) {
        rc = dlock__fail(DLOCK_ELOST, "%s: the lock is no longer held on a quorum of %zu nodes",
                         b->label, b->quorum);
    } else if (yes < b->quorum) {
        char why[700];
        unanswered(b, a, !decided_one(&v, a, b->n), why, sizeof why);
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
        verdict v = {bv->b, k, 1};
        if (!decided_one(&v, a, nnodes))
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
        const char *argv[] = {"2", l->keys[0], l->keys[1], "renew", items[k].token, lease, "0"};
        size_t lens[] = {1, l->key_lens[0],         l->key_lens[1],
                         5, strlen(items[k].token), number(lease, items[k].lease_ms),
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
        tally(a, b->n, k, 1, &yes, &no, &none);
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
        unanswered(b, a, timed_out, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "renewal: a quorum of %zu of %zu nodes did not answer: %s", b->quorum,
                         b->n, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* ---------------------------------------------------------------- locks */

/* P:{E}:waiting from the name's fence counter P:{E}:fence (malloc'ed). */
static char *waiting_key(const char *fence_key, size_t len)
{
    static const char fence[] = "fence", waiting[] = "waiting";
    size_t stem = len - (sizeof fence - 1);
    char *key = malloc(stem + sizeof waiting);
    if (key != NULL) {
        memcpy(key, fence_key, stem);
        memcpy(key + stem, waiting, sizeof waiting);
    }
    return key;
}

static int lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                    dlock__store_lock **out)
{
    rlbackend *b = RLB(s);
    rllock *l = calloc(1, sizeof *l);
    *out = NULL;
    if (l == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    l->base.spec = *spec;
    int rc =
        dlock__redis_keys_of(b->prefix, name, DLOCK__MUTEX, spec->simple, l->keys, l->key_lens);
    if (rc != DLOCK_OK) {
        free(l);
        return rc;
    }
    if (spec->simple) {
        char *keys[3];
        size_t lens[3];
        rc = dlock__redis_keys_of(b->prefix, name, DLOCK__MUTEX, 0, keys, lens);
        if (rc == DLOCK_OK) {
            l->other = strdup(keys[0]);
            free(keys[0]);
        }
    } else {
        l->other = strdup(l->keys[2]);
    }
    if (rc == DLOCK_OK)
        l->waiting = waiting_key(l->keys[1], l->key_lens[1]);
    if (rc == DLOCK_OK && (l->other == NULL || l->waiting == NULL))
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc != DLOCK_OK) {
        free(l->keys[0]);
        free(l->other);
        free(l->waiting);
        free(l);
        return rc;
    }
    *out = &l->base;
    return DLOCK_OK;
}

static void lock_free(dlock__store *s, dlock__store_lock *sl)
{
    (void) s;
    if (sl == NULL)
        return;
    free(RLL(sl)->keys[0]);
    free(RLL(sl)->other);
    free(RLL(sl)->waiting);
    free(RLL(sl));
}

/* A hold left in the store: it keeps its lease, and the client's owner
 * record outlives the client to name its holder. */
static void detach(dlock__store *s, dlock__store_lock *sl)
{
    (void) sl;
    atomic_store(&RLB(s)->record_kept, 1);
}

/* ---------------------------------------------------------------- operators */

/* What a quorum says of a name (status rounds): held by the value a quorum
 * of nodes has in one key (the lock's, else the other layout's), free when
 * no value can have a quorum any more, unknown when too few nodes answered
 * to tell (those that failed or stayed silent could hold it). */
enum rlverdict { RL_PENDING, RL_HELD, RL_FREE, RL_UNKNOWN };

typedef struct rlstate {
    enum rlverdict verdict;
    const redisReply *owner; /* RL_HELD: the value held */
    int64_t lease_ms;        /* the quorum's: the quorum-th longest PTTL; -1 none */
    unsigned waiters;        /* the quorum's: the quorum-th largest count of waiting marks */
    uint64_t fence;          /* the highest fence counter */
    const char *record;      /* the holder's owner record, NULL if none */
} rlstate;

/* Node i's reply to status call k, if well formed (node.lua: 8 elements). */
static const redisReply *status_reply(const dlock__rlanswer *a, size_t k)
{
    if (!a->done || a->rc != DLOCK_OK)
        return NULL;
    const redisReply *r = a->replies[k];
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 8)
        return NULL;
    static const int types[8] = {REDIS_REPLY_STRING,  REDIS_REPLY_INTEGER, REDIS_REPLY_STRING,
                                 REDIS_REPLY_INTEGER, REDIS_REPLY_INTEGER, REDIS_REPLY_INTEGER,
                                 REDIS_REPLY_STRING,  REDIS_REPLY_STRING};
    for (size_t e = 0; e < 8; e++) {
        if (r->element[e]->type != types[e])
            return NULL;
    }
    return r;
}

static int same_value(const redisReply *x, const redisReply *y)
{
    return x->len == y->len && memcmp(x->str, y->str, x->len) == 0;
}

/* The k-th largest of v[0..n) (k from 1), sorting v. */
static long long kth_largest(long long *v, size_t n, size_t k)
{
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && v[j] > v[j - 1]; j--) {
            long long t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    }
    return v[(k < n ? k : n) - 1];
}

/* The state of call k of a status round from the answers so far. */
static void state_of(const rlbackend *b, const dlock__rlanswer *a, size_t k, rlstate *st)
{
    const redisReply *rs[DLOCK__REDLOCK_MAX_NODES];
    size_t n = b->n, ok = 0, pending = 0, best = 0, best_at = 0, best_key = 0;
    long long counts[DLOCK__REDLOCK_MAX_NODES];

    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    for (size_t i = 0; i < n; i++) {
        rs[i] = status_reply(&a[i], k);
        pending += !a[i].done;
        if (rs[i] == NULL)
            continue;
        counts[ok++] = rs[i]->element[5]->integer;
        if ((uint64_t) rs[i]->element[4]->integer > st->fence)
            st->fence = (uint64_t) rs[i]->element[4]->integer;
    }
    /* the value most nodes have, in the lock's key (0) or the other one (2) */
    for (size_t key = 0; key <= 2; key += 2) {
        for (size_t i = 0; i < n; i++) {
            if (rs[i] == NULL || rs[i]->element[key]->len == 0)
                continue;
            size_t c = 0;
            for (size_t j = 0; j < n; j++)
                c += rs[j] != NULL && same_value(rs[i]->element[key], rs[j]->element[key]);
            if (c > best) {
                best = c;
                best_at = i;
                best_key = key;
            }
        }
    }
    if (ok > 0)
        st->waiters = (unsigned) kth_largest(counts, ok, b->quorum);
    if (best >= b->quorum) {
        const redisReply *v = rs[best_at]->element[best_key];
        long long pttls[DLOCK__REDLOCK_MAX_NODES];
        size_t m = 0;
        for (size_t j = 0; j < n; j++) {
            if (rs[j] == NULL || !same_value(v, rs[j]->element[best_key]))
                continue;
            long long t = rs[j]->element[best_key + 1]->integer;
            pttls[m++] = t < 0 ? INT64_MAX : t; /* -1: no expiry */
            if (st->record == NULL && rs[j]->element[6 + best_key / 2]->len > 0)
                st->record = rs[j]->element[6 + best_key / 2]->str;
        }
        long long left = kth_largest(pttls, m, b->quorum);
        st->verdict = RL_HELD;
        st->owner = v;
        st->lease_ms = left == INT64_MAX ? -1 : left;
    } else if (best + (n - ok) < b->quorum) {
        st->verdict = RL_FREE;
    } else {
        st->verdict = pending > 0 ? RL_PENDING : RL_UNKNOWN;
    }
}

typedef struct status_verdict {
    const rlbackend *b;
    size_t ncalls;
} status_verdict;

static int status_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    const status_verdict *v = arg;
    (void) n;
    for (size_t k = 0; k < v->ncalls; k++) {
        rlstate st;
        state_of(v->b, a, k, &st);
        if (st.verdict == RL_PENDING)
            return 0;
    }
    return 1;
}

/* One status round on l: *r (the caller drops it) and the state decided,
 * or DLOCK_EUNREACHABLE when too few nodes answered alike to tell. */
static int read_state(rlbackend *b, rllock *l, int64_t deadline_us, dlock__rlround **r, rlstate *st)
{
    const char *argv[] = {"status", l->other, b->records};
    size_t lens[] = {6, strlen(l->other), strlen(b->records)};
    *r = send_one(b, l, 3, argv, lens, deadline_us);
    if (*r == NULL)
        return DLOCK_ENOMEM;
    status_verdict v = {b, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(*r, status_decided, &v, deadline_us);
    state_of(b, a, 0, st);
    if (st->verdict == RL_HELD || st->verdict == RL_FREE)
        return DLOCK_OK;
    char why[700];
    unanswered(b, a, 1, why, sizeof why);
    return dlock__fail(DLOCK_EUNREACHABLE,
                       "%s: the nodes that answered do not say alike whether the lock is held "
                       "(a quorum of %zu of %zu nodes must): %s",
                       b->label, b->quorum, b->n, why);
}

static int query(dlock__store *s, dlock__store_lock *sl, dlock_status *out, int64_t deadline_us)
{
    dlock__rlround *r = NULL;
    rlstate st;
    int rc = read_state(RLB(s), RLL(sl), deadline_us, &r, &st);

    memset(out, 0, sizeof *out);
    if (rc == DLOCK_OK) {
        out->held = st.verdict == RL_HELD;
        if (out->held)
            snprintf(out->owner, sizeof out->owner, "%.*s", (int) st.owner->len, st.owner->str);
        out->holds = out->held ? 1 : 0;
        out->lease_ms = st.lease_ms;
        out->last_fence = st.fence;
        out->waiters = st.waiters;
    }
    dlock__rlround_drop(r);
    return rc;
}

static int holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                   int64_t deadline_us)
{
    dlock__rlround *r = NULL;
    rlstate st;
    int rc = read_state(RLB(s), RLL(sl), deadline_us, &r, &st);

    if (rc == DLOCK_OK && st.verdict == RL_HELD) {
        dlock__holder_raw h = {.owner = st.owner->str, .count = 1, .info = st.record};
        sink(arg, &h);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* The operator's release: the lock's key and the other layout's deleted on
 * every node that answers; done once a quorum did (the holder's next
 * renewal finds it gone from more nodes than a quorum spares: lost). */
static int force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    rllock *l = RLL(sl);
    const char *argv[] = {"unlock", l->other};
    size_t lens[] = {6, strlen(l->other)};
    dlock__rlround *r = send_one(b, l, 2, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    verdict v = {b, 0, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(r, decided_one, &v, deadline_us);
    size_t yes, no, none;
    int rc = DLOCK_OK;
    tally(a, b->n, 0, 1, &yes, &no, &none);
    if (yes < b->quorum) {
        char why[700];
        unanswered(b, a, !decided_one(&v, a, b->n), why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "%s: force-unlock: a quorum of %zu of %zu nodes did not answer (the "
                         "nodes that did let go): %s",
                         b->label, b->quorum, b->n, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* ---------------------------------------------------------------- listing */

typedef struct names {
    char **v;
    size_t n, cap;
} names;

static int add_name(names *all, const char *name)
{
    if (all->n == all->cap) {
        size_t more = all->cap ? all->cap * 2 : 64;
        char **grown = realloc(all->v, more * sizeof *grown);
        if (grown == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        all->v = grown;
        all->cap = more;
    }
    if ((all->v[all->n] = strdup(name)) == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    all->n++;
    return DLOCK_OK;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(*(char *const *) x, *(char *const *) y);
}

/* Waits for every node asked. */
static int never_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    (void) arg;
    (void) a;
    (void) n;
    return 0;
}

/* One page of node i's SCAN: the names of the keys that are a sign of a
 * lock (its key, its waiting marks) added to *all, *cursor moved on; "0"
 * when the walk is over. */
static int scan_page(rlbackend *b, size_t i, const char *pattern, const char *prefix,
                     char cursor[32], names *all, int64_t until)
{
    const char *argv[] = {"0", "scan", cursor, pattern, "1000"};
    size_t lens[] = {1, 4, strlen(cursor), strlen(pattern), 4};
    dlock__rlround *r = dlock__rlround_new(1);
    int rc = DLOCK_OK;

    if (r == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    rc = dlock__rlround_set(r, 0, 5, argv, lens);
    if (rc != DLOCK_OK)
        goto out;
    dlock__rlround_send_to(b->nodes, r, i, until);
    const dlock__rlanswer *a = dlock__rlround_wait(r, never_decided, NULL, until);
    const redisReply *rep = a[i].done && a[i].rc == DLOCK_OK ? a[i].replies[0] : NULL;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING || rep->element[0]->len >= 32 ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s",
                         !a[i].done                       ? "no reply in time"
                         : a[i].rc != DLOCK_OK            ? a[i].err
                         : rep->type == REDIS_REPLY_ERROR ? rep->str
                                                          : "unexpected reply to SCAN");
        goto out;
    }
    memcpy(cursor, rep->element[0]->str, rep->element[0]->len + 1);
    for (size_t e = 0; e < rep->element[1]->elements && rc == DLOCK_OK; e++) {
        const redisReply *key = rep->element[1]->element[e];
        char name[DLOCK_NAME_MAX + 1];
        const char *rest;
        if (key->type != REDIS_REPLY_STRING ||
            !dlock__redis_key_lock(b->prefix, key->str, key->len, name, sizeof name, &rest) ||
            (strcmp(rest, "") != 0 && strcmp(rest, ":waiting") != 0) ||
            strncmp(name, prefix, strlen(prefix)) != 0)
            continue;
        rc = add_name(all, name);
    }
out:
    dlock__rlround_drop(r);
    return rc;
}

/* Asks a quorum about names[0..n) in one round; reports those held or
 * waited for. *stop when the sink said so. */
static int list_batch(rlbackend *b, char **batch, size_t n, dlock__name_sink sink, void *arg,
                      int64_t deadline_us, int *stop)
{
    dlock__rlround *r = dlock__rlround_new(n);
    rllock *ls = calloc(n, sizeof *ls);
    int rc = r == NULL || ls == NULL ? dlock__fail(DLOCK_ENOMEM, "out of memory") : DLOCK_OK;
    dlock__lock_spec spec = {.kind = DLOCK__MUTEX};

    for (size_t k = 0; k < n && rc == DLOCK_OK; k++) {
        dlock__store_lock *sl = NULL;
        rc = lock_new(&b->base, batch[k], &spec, &sl);
        if (rc != DLOCK_OK)
            break;
        ls[k] = *RLL(sl);
        free(sl); /* its keys live on in ls[k] */
        const char *argv[] = {"3",      ls[k].keys[0], ls[k].keys[1], ls[k].waiting,
                              "status", ls[k].other,   b->records};
        size_t lens[] = {1, ls[k].key_lens[0],   ls[k].key_lens[1], strlen(ls[k].waiting),
                         6, strlen(ls[k].other), strlen(b->records)};
        rc = dlock__rlround_set(r, k, 7, argv, lens);
    }
    if (rc == DLOCK_OK) {
        int64_t until = dlock__now_us() + b->cfg.command_timeout_ms * 1000;
        if (until > deadline_us)
            until = deadline_us;
        dlock__rlround_send(b->nodes, r, until);
        status_verdict v = {b, n};
        const dlock__rlanswer *a = dlock__rlround_wait(r, status_decided, &v, until);
        for (size_t k = 0; k < n && !*stop; k++) {
            rlstate st;
            state_of(b, a, k, &st);
            /* unknown (nodes silent, a split vote): not known to be held */
            if (st.verdict == RL_HELD || st.waiters > 0)
                *stop = sink(arg, batch[k], DLOCK__MUTEX) != 0;
        }
    }
    for (size_t k = 0; ls != NULL && k < n; k++) {
        free(ls[k].keys[0]);
        free(ls[k].other);
        free(ls[k].waiting);
    }
    free(ls);
    dlock__rlround_drop(r);
    return rc;
}

/* Every node's keys walked (SCAN, node after node, each page bounded by the
 * command timeout: a silent node costs one), then the names found asked of
 * a quorum as query() does, LIST_BATCH names a round. A name is listed when
 * a quorum holds it or polling waiters mark it. */
static int list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    names all = {0};
    char *pattern = dlock__redis_list_pattern(b->prefix, prefix);
    char failed[700] = "";
    size_t walked = 0, used = 0;
    int rc = DLOCK_OK, stop = 0;

    if (pattern == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < b->n && rc == DLOCK_OK; i++) {
        char cursor[32] = "0";
        int page_rc;
        do {
            int64_t until = dlock__now_us() + b->cfg.command_timeout_ms * 1000;
            page_rc = scan_page(b, i, pattern, prefix, cursor, &all,
                                until < deadline_us ? until : deadline_us);
        } while (page_rc == DLOCK_OK && strcmp(cursor, "0") != 0 && dlock__now_us() < deadline_us);
        if (page_rc == DLOCK_ENOMEM)
            rc = page_rc;
        else if (page_rc == DLOCK_OK && strcmp(cursor, "0") == 0)
            walked++;
        else if (used < sizeof failed)
            used +=
                (size_t) snprintf(failed + used, sizeof failed - used, "%s%s (%s)",
                                  used ? "; " : "", dlock__rlnodes_label(b->nodes, i),
                                  page_rc == DLOCK_OK ? "listing took too long" : dlock_errmsg());
    }
    if (rc == DLOCK_OK && walked < b->quorum)
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "%s: list: a quorum of %zu of %zu nodes could not be walked: %s", b->label,
                         b->quorum, b->n, failed);
    if (rc != DLOCK_OK)
        goto out;
    if (all.n > 1)
        qsort(all.v, all.n, sizeof *all.v, by_name);
    size_t unique = 0;
    for (size_t i = 0; i < all.n; i++) {
        if (unique > 0 && strcmp(all.v[unique - 1], all.v[i]) == 0) {
            free(all.v[i]);
            continue;
        }
        all.v[unique++] = all.v[i];
    }
    all.n = unique;
    for (size_t from = 0; from < all.n && rc == DLOCK_OK && !stop; from += LIST_BATCH) {
        size_t n = all.n - from < LIST_BATCH ? all.n - from : LIST_BATCH;
        if (dlock__now_us() >= deadline_us)
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: listing locks took too long", b->label);
        else
            rc = list_batch(b, all.v + from, n, sink, arg, deadline_us, &stop);
    }
out:
    for (size_t i = 0; i < all.n; i++)
        free(all.v[i]);
    free(all.v);
    free(pattern);
    return rc;
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
    dlock__rlnodes_free(b->nodes, deadline_us);
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
    size_t used = (size_t) snprintf(label, sizeof label, "redlock://");
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
            .log = host->log,
            .reached = &b->reached[i],
        };
    }
    rc = dlock__rlnodes_new(eps, b->n, dlock__redlock_script, DLOCK__REDLOCK_SCRIPT_SHA, &b->nodes);
    if (rc != DLOCK_OK)
        goto fail;
    b->base.label = b->label;
    *out = &b->base;
    return DLOCK_OK;
fail:
    close_backend(&b->base, dlock__now_us());
    return rc;
}

/* Reached once a quorum of nodes was: with fewer, the store as a whole
 * was never there (a majority mistyped or never up), and a wait gives up
 * as soon as for a server never reached. */
static int reached(dlock__store *s)
{
    const rlbackend *b = RLB(s);
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        n += atomic_load(&b->reached[i]) != 0;
    return n >= b->quorum;
}

static const char *const schemes[] = {"redlock", NULL};

const dlock__backend dlock__redlock_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "Redlock",
    .schemes = schemes,
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_INTEROP |
            DLOCK_CAP_QUERY | DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_LIST,
    .open = open_backend,
    .close = close_backend,
    .lock_new = lock_new,
    .lock_free = lock_free,
    .detach = detach,
    .acquire = acquire,
    .cancel = cancel,
    .release = release,
    .extend = extend,
    .renew = renew,
    .query = query,
    .force_unlock = force_unlock,
    .holders = holders,
    .list = list,
    .reached = reached,
};
