/* SPDX-License-Identifier: MIT */
/* operator.c - Redlock's operator calls, decided by a quorum as every step
 * is: who holds a name (query, holders), force-unlock, and list. A holder
 * is the owner a quorum of nodes has; a minority's leftover is free. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../redis/keys.h"
#include "../redis/replies.h"
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_BATCH    128    /* names asked about in one round of list() */
#define LIST_GRACE_US 250000 /* list(): the nodes beyond a quorum, waited for */

/* ---------------------------------------------------------------- operators */

static int same_value(const redisReply *x, const redisReply *y)
{
    return x->len == y->len && memcmp(x->str, y->str, x->len) == 0;
}

/* What a quorum says of a name (status rounds): held by the value a quorum
 * of nodes has in one key (the lock's, else the other layout's), free when
 * no value can have a quorum any more, unknown when too few nodes answered
 * to tell (those that failed or stayed silent could hold it). */
enum rlverdict { RL_PENDING, RL_HELD, RL_FREE, RL_UNKNOWN };

typedef struct rlstate {
    enum rlverdict verdict;
    const redisReply *owner;        /* RL_HELD: the value held */
    int64_t lease_ms;               /* the quorum's: the quorum-th longest PTTL; -1 none */
    unsigned waiters;               /* the quorum's: the quorum-th largest count of waiting marks */
    uint64_t fence;                 /* the highest fence counter */
    size_t fence_stored;            /* the nodes that answered with that very counter */
    const char *record;             /* the holder's owner record, NULL if none */
    unsigned readers;               /* the read-write lock: the readers a quorum holds */
    int64_t readers_ms;             /* the longest of their leases (each the quorum's); -1 none */
    const dlock__rlanswer *answers; /* read_state: the round's answers it decided on */
} rlstate;

/* Node i's reply to status call k, if well formed (node.lua: 8 elements,
 * and for the read-write lock 3 arrays of as many readers: tokens, leases
 * left, records). */
static const redisReply *status_reply(const dlock__rlanswer *a, size_t k)
{
    if (!a->done || a->rc != DLOCK_OK)
        return NULL;
    const redisReply *r = a->replies[k];
    if (r->type != REDIS_REPLY_ARRAY || (r->elements != 8 && r->elements != 11))
        return NULL;
    static const int types[11] = {REDIS_REPLY_STRING,  REDIS_REPLY_INTEGER, REDIS_REPLY_STRING,
                                  REDIS_REPLY_INTEGER, REDIS_REPLY_INTEGER, REDIS_REPLY_INTEGER,
                                  REDIS_REPLY_STRING,  REDIS_REPLY_STRING,  REDIS_REPLY_STRING,
                                  REDIS_REPLY_INTEGER, REDIS_REPLY_STRING};
    for (size_t e = 0; e < r->elements; e++) {
        if (e < 8 && r->element[e]->type != types[e])
            return NULL;
        if (e >= 8 && (r->element[e]->type != REDIS_REPLY_ARRAY ||
                       r->element[e]->elements != r->element[8]->elements))
            return NULL;
        for (size_t j = 0; e >= 8 && j < r->element[e]->elements; j++) {
            if (r->element[e]->element[j]->type != types[e])
                return NULL;
        }
    }
    return r;
}

/* A node answered a status round: call 0's reply well formed. */
static int status_answered(const dlock__rlanswer *a)
{
    return status_reply(a, 0) != NULL;
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

/* Where token (of node i's readers) is among node j's readers, or -1. */
static long reader_at(const redisReply *rj, const redisReply *token)
{
    for (size_t e = 0; e < rj->element[8]->elements; e++) {
        if (same_value(rj->element[8]->element[e], token))
            return (long) e;
    }
    return -1;
}

/* Calls each(arg, token, record) for every reader that a quorum of the
 * nodes that answered (rs[i] != NULL) holds, and counts them, with the
 * longest of their leases, each the quorum's (the quorum-th longest left);
 * *open when a token could still reach a quorum on the nodes that did not
 * answer (unanswered of them). each may be NULL. */
typedef void (*reader_fn)(void *arg, const redisReply *token, const char *record);
static unsigned readers_of(const rlbackend *b, const redisReply *const *rs, size_t unanswered,
                           int64_t *lease_ms, int *open, reader_fn each, void *arg)
{
    unsigned count = 0;
    *lease_ms = -1;
    *open = 0;
    for (size_t i = 0; i < b->n; i++) {
        for (size_t e = 0; rs[i] != NULL && e < rs[i]->element[8]->elements; e++) {
            const redisReply *token = rs[i]->element[8]->element[e];
            size_t seen = 0, m = 0;
            long long lefts[DLOCK__REDLOCK_MAX_NODES];
            for (size_t j = 0; j < i && seen == 0; j++)
                seen += rs[j] != NULL && reader_at(rs[j], token) >= 0;
            if (seen > 0)
                continue; /* counted with the first node that has it */
            const char *record = NULL;
            for (size_t j = i; j < b->n; j++) {
                long at = rs[j] != NULL ? reader_at(rs[j], token) : -1;
                if (at < 0)
                    continue;
                lefts[m++] = rs[j]->element[9]->element[at]->integer;
                if (record == NULL && rs[j]->element[10]->element[at]->len > 0)
                    record = rs[j]->element[10]->element[at]->str;
            }
            if (m >= b->quorum) {
                long long left = kth_largest(lefts, m, b->quorum);
                if (left > *lease_ms)
                    *lease_ms = left;
                count++;
                if (each != NULL)
                    each(arg, token, record);
            } else if (m + unanswered >= b->quorum) {
                *open = 1;
            }
        }
    }
    return count;
}

static size_t first_ok(const redisReply *const *rs, size_t n)
{
    size_t i = 0;
    while (i < n - 1 && rs[i] == NULL)
        i++;
    return i;
}

/* The state of call k of a status round from the answers so far. */
static void state_of(const rlbackend *b, const dlock__rlanswer *a, size_t k, rlstate *st)
{
    const redisReply *rs[DLOCK__REDLOCK_MAX_NODES];
    size_t n = b->n, ok = 0, pending = 0, best = 0, best_at = 0, best_key = 0;
    long long counts[DLOCK__REDLOCK_MAX_NODES];

    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    st->readers_ms = -1;
    for (size_t i = 0; i < n; i++) {
        rs[i] = status_reply(&a[i], k);
        pending += !a[i].done;
        if (rs[i] == NULL)
            continue;
        counts[ok++] = rs[i]->element[5]->integer;
        if ((uint64_t) rs[i]->element[4]->integer > st->fence)
            st->fence = (uint64_t) rs[i]->element[4]->integer;
    }
    for (size_t i = 0; i < n; i++)
        st->fence_stored += rs[i] != NULL && (uint64_t) rs[i]->element[4]->integer == st->fence;
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
    int open = 0;
    if (ok > 0 && rs[first_ok(rs, n)]->elements == 11)
        st->readers = readers_of(b, rs, n - ok, &st->readers_ms, &open, NULL, NULL);
    /* a reader that the nodes not heard from could still make a quorum's */
    if (open && st->verdict != RL_UNKNOWN)
        st->verdict = pending > 0 ? RL_PENDING : RL_UNKNOWN;
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

static int never_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    (void) arg;
    (void) a;
    (void) n;
    return 0;
}

/* How long a status round waits, once decided, for the nodes still to
 * answer; not for a node silent for SILENT_US already. */
#define STATUS_GRACE_US 50000
#define SILENT_US       200000

/* Whether a node still to answer a round may answer within a grace: one
 * silent for long is not waited for (dlock list with a node stopped paid
 * the grace twice a name: 100 ms a name, 3.5 s for 30). */
static int worth_a_grace(rlbackend *b, const dlock__rlanswer *a)
{
    for (size_t i = 0; i < b->n; i++) {
        if (!a[i].done && !dlock__rlnodes_silent_for(b->nodes, i, SILENT_US))
            return 1;
    }
    return 0;
}

/* What each node that answered a status round said of the name, for a
 * split vote's message ("H:P held, H:P free"; the holders' tokens are not
 * shown: an owner's token is the key to its lock). */
static void said_by_node(const rlbackend *b, const dlock__rlanswer *a, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < b->n && used < len; i++) {
        const redisReply *r = status_reply(&a[i], 0);
        if (r == NULL)
            continue;
        unsigned readers = r->elements == 11 ? (unsigned) r->element[8]->elements : 0;
        char what[48];
        if (r->element[0]->len > 0 || r->element[2]->len > 0)
            snprintf(what, sizeof what, "held");
        else if (readers > 0)
            snprintf(what, sizeof what, "read by %u", readers);
        else
            snprintf(what, sizeof what, "free");
        used += (size_t) snprintf(buf + used, len - used, "%s%s says %s", used > 0 ? ", " : "",
                                  dlock__rlnodes_label(b->nodes, i), what);
    }
}

/* One status round on l: *r (the caller drops it) and the state decided,
 * or DLOCK_EUNREACHABLE when too few nodes answered alike to tell. */
static int read_state(rlbackend *b, rllock *l, int64_t deadline_us, dlock__rlround **r, rlstate *st)
{
    /* the read-write lock's: its writer, and its readers (no other key) */
    const char *argv[] = {"status", l->rw ? "" : l->other, b->records, "rw"};
    size_t lens[] = {6, l->rw ? 0 : strlen(l->other), strlen(b->records), 2};
    *r = dlock__rl_send_one(b, l, l->rw ? 4 : 3, argv, lens, deadline_us);
    if (*r == NULL)
        return DLOCK_ENOMEM;
    status_verdict v = {b, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(*r, status_decided, &v, deadline_us);
    state_of(b, a, 0, st);
    /* A lease read from part of the nodes is only a lower bound: one still
     * to answer may have taken an extend after another answered (the holder
     * is told yes by a quorum, not by every node). Their answers are waited
     * for a little: an unreachable node costs that much, a live one none. */
    if ((st->verdict == RL_HELD || st->readers > 0) && dlock__rl_pending_of(a, b->n) > 0 &&
        worth_a_grace(b, a)) {
        int64_t until = dlock__now_us() + STATUS_GRACE_US;
        a = dlock__rlround_wait(*r, never_decided, NULL, until < deadline_us ? until : deadline_us);
        state_of(b, a, 0, st);
    }
    st->answers = a;
    if (st->verdict == RL_HELD || st->verdict == RL_FREE)
        return DLOCK_OK;
    int wrong = dlock__rl_wrong_url(b, a);
    if (wrong != DLOCK_OK)
        return wrong;
    size_t answered = 0;
    for (size_t i = 0; i < b->n; i++)
        answered += status_reply(&a[i], 0) != NULL;
    if (answered < b->quorum) {
        char counts[32];
        snprintf(counts, sizeof counts, "; %zu answered", answered);
        return dlock__rl_fail_no_quorum(b, a, 1, status_answered, "", counts);
    }
    char why[1500];
    dlock__rl_unanswered(b, a, 1, status_answered, why, sizeof why);
    char said[600];
    said_by_node(b, a, said, sizeof said);
    return dlock__fail(DLOCK_EUNREACHABLE,
                       "%s: the nodes that answered do not say alike whether the lock is held "
                       "(a quorum of %zu of %zu nodes must): %s; %s",
                       b->label, b->quorum, b->n, said, why);
}

/* The fence a holder is reported with (and an adopter takes over,
 * dlock_lock_adopt) is the highest counter read: at least the holder's.
 * Where a quorum does not store that very value (a node whose take failed
 * moved its counter on), it is written back to a quorum first, as an
 * acquisition does: else a later holder's quorum, which need not include
 * that node, could be given a lower fence than the one reported. */
static int write_back_fence(rlbackend *b, rllock *l, const rlstate *st, int64_t deadline_us)
{
    char value[24];
    uint64_t fence = st->fence;
    if (fence == 0 || st->fence_stored >= b->quorum)
        return DLOCK_OK;
    const char *argv[] = {"fence", value};
    size_t lens[] = {5, (size_t) snprintf(value, sizeof value, "%" PRIu64, fence)};
    return dlock__rl_quorum_call(b, l, 2, argv, lens, deadline_us, deadline_us,
                                 "the fence read could not be written back to");
}

int dlock__rl_query(dlock__store *s, dlock__store_lock *sl, dlock_status *out, int64_t deadline_us)
{
    dlock__rlround *r = NULL;
    rlstate st;
    int rc = read_state(RLB(s), RLL(sl), deadline_us, &r, &st);

    memset(out, 0, sizeof *out);
    if (rc == DLOCK_OK && st.verdict == RL_HELD)
        rc = write_back_fence(RLB(s), RLL(sl), &st, deadline_us);
    if (rc == DLOCK_OK) {
        out->held = st.verdict == RL_HELD || st.readers > 0;
        if (st.verdict == RL_HELD)
            snprintf(out->owner, sizeof out->owner, "%.*s", (int) st.owner->len, st.owner->str);
        out->holds = st.verdict == RL_HELD ? 1 : 0;
        out->shared = st.readers;
        out->lease_ms = st.verdict == RL_HELD ? st.lease_ms : st.readers_ms;
        out->last_fence = st.fence;
        out->waiters = st.waiters;
    }
    dlock__rlround_drop(r);
    return rc;
}

/* Readers handed to a holder sink (dlock__rl_holders), until it says stop. */
typedef struct reader_sink {
    dlock__holder_sink sink;
    void *arg;
    int stop;
} reader_sink;

static void each_reader(void *arg, const redisReply *token, const char *record)
{
    reader_sink *rsk = arg;
    if (rsk->stop)
        return;
    dlock__holder_raw h = {.owner = token->str, .count = 1, .info = record};
    rsk->stop = rsk->sink(rsk->arg, &h) != 0;
}

int dlock__rl_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline_us)
{
    dlock__rlround *r = NULL;
    rlstate st;
    int rc = read_state(RLB(s), RLL(sl), deadline_us, &r, &st), stop = 0;

    if (rc == DLOCK_OK && st.verdict == RL_HELD) {
        dlock__holder_raw h = {.owner = st.owner->str, .count = 1, .info = st.record};
        stop = sink(arg, &h);
    }
    if (rc == DLOCK_OK && st.readers > 0 && !stop) {
        const redisReply *rs[DLOCK__REDLOCK_MAX_NODES];
        size_t answered = 0;
        for (size_t i = 0; i < RLB(s)->n; i++) {
            rs[i] = status_reply(&st.answers[i], 0);
            answered += rs[i] != NULL;
        }
        reader_sink rsk = {sink, arg, 0};
        int64_t lease;
        int open;
        readers_of(RLB(s), rs, RLB(s)->n - answered, &lease, &open, each_reader, &rsk);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* The operator's release: the lock's key and the other layout's deleted on
 * every node that answers; done once a quorum did (the holder's next
 * renewal finds it gone from more nodes than a quorum spares: lost). */
int dlock__rl_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    rllock *l = RLL(sl);
    /* the read-write lock: its writer and readers (the name's other kinds
     * are not this lock) */
    const char *argv[] = {"unlock", l->rw ? "" : l->other, l->rw ? "rw" : ""};
    size_t lens[] = {6, l->rw ? 0 : strlen(l->other), l->rw ? 2 : 0};
    return dlock__rl_quorum_call(b, l, 3, argv, lens, deadline_us, deadline_us,
                                 "force-unlock (done on the nodes that answered) did not reach");
}

/* ---------------------------------------------------------------- listing */

/* The names found, each with its kind first: 'm' the mutex (and its
 * interop key), 'w' the read-write lock; sorted, each once. */
typedef struct names {
    char **v;
    size_t n, cap;
} names;

static int add_name(names *all, char kind, const char *name)
{
    if (all->n == all->cap) {
        size_t more = all->cap ? all->cap * 2 : 64;
        char **grown = realloc(all->v, more * sizeof *grown);
        if (grown == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        all->v = grown;
        all->cap = more;
    }
    if ((all->v[all->n] = malloc(strlen(name) + 2)) == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    all->v[all->n][0] = kind;
    strcpy(all->v[all->n] + 1, name);
    all->n++;
    return DLOCK_OK;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(*(char *const *) x, *(char *const *) y);
}

/* A SCAN page's call in round r: `cursor` (copied). */
static int set_page(dlock__rlround *r, const char *pattern, const char *cursor)
{
    const char *argv[] = {"0", "scan", cursor, pattern, "1000"};
    size_t lens[] = {1, 4, strlen(cursor), strlen(pattern), 4};
    return dlock__rlround_set(r, 0, 5, argv, lens);
}

/* A node's answer a to a page of its SCAN: the names of the keys that are
 * a sign of a lock (its key, its readers, its waiting marks) added to
 * *all, with the kind, *cursor moved on; "0" when the walk is over. */
static int read_page(rlbackend *b, const dlock__rlanswer *a, const char *prefix, char cursor[32],
                     names *all)
{
    const redisReply *rep = a->done && a->rc == DLOCK_OK ? a->replies[0] : NULL;
    int rc = DLOCK_OK;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING || rep->element[0]->len >= 32 ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        char why[512];
        /* (a node of a Redis Cluster: the URL is wrong, list() says so) */
        return dlock__fail(
            a->done && a->rc == DLOCK_ESERVER ? DLOCK_ESERVER : DLOCK_EUNREACHABLE, "%s",
            !a->done ? "no reply in time"
            : a->rc != DLOCK_OK
                ? a->err
                : dlock__reply_reason(rep, "unexpected reply to SCAN", why, sizeof why));
    }
    memcpy(cursor, rep->element[0]->str, rep->element[0]->len + 1);
    for (size_t e = 0; e < rep->element[1]->elements && rc == DLOCK_OK; e++) {
        const redisReply *key = rep->element[1]->element[e];
        char name[DLOCK_NAME_MAX + 1];
        const char *rest;
        if (key->type != REDIS_REPLY_STRING ||
            !dlock__redis_key_lock(b->prefix, key->str, key->len, name, sizeof name, &rest) ||
            strncmp(name, prefix, strlen(prefix)) != 0)
            continue;
        if (strcmp(rest, "") == 0 || strcmp(rest, ":waiting") == 0)
            rc = add_name(all, 'm', name);
        else if (strcmp(rest, ":rw") == 0 || strcmp(rest, ":rw:r") == 0 ||
                 strcmp(rest, ":rw:waiting") == 0 || strcmp(rest, ":rw:writing") == 0)
            rc = add_name(all, 'w', name);
    }
    return rc;
}

/* The next page of node i's SCAN (read_page). On a failure the round is
 * handed to *failed, for the caller to drop once it knows whether its
 * error names the node (dlock__rlround_drop warns of a node lost, unless
 * told). */
static int scan_page(rlbackend *b, size_t i, const char *pattern, const char *prefix,
                     char cursor[32], names *all, int64_t until, dlock__rlround **failed)
{
    dlock__rlround *r = dlock__rlround_new(1);
    int rc = r == NULL ? dlock__fail(DLOCK_ENOMEM, "out of memory") : set_page(r, pattern, cursor);

    if (rc == DLOCK_OK) {
        dlock__rlround_send_to(b->nodes, r, i, until);
        const dlock__rlanswer *a = dlock__rlround_wait(r, never_decided, NULL, until);
        rc = read_page(b, &a[i], prefix, cursor, all);
        if (rc != DLOCK_OK && rc != DLOCK_ENOMEM) {
            *failed = r;
            return rc;
        }
    }
    dlock__rlround_drop(r);
    return rc;
}

/* dlock__rlround_wait: a quorum of nodes answered the first page. */
static int quorum_answered(void *arg, const dlock__rlanswer *a, size_t n)
{
    const rlbackend *b = arg;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += a[i].done && a[i].rc == DLOCK_OK;
    return ok >= b->quorum;
}

/* A node's walk (dlock__rl_list) that went to the end. */
static int walk_done(const dlock__rlanswer *a)
{
    return a->done && a->rc == DLOCK_OK;
}

/* Asks a quorum about names[0..n) in one round; reports those held or
 * waited for. *stop when the sink said so. */
static int list_batch(rlbackend *b, char **batch, size_t n, dlock__name_sink sink, void *arg,
                      int64_t deadline_us, int *stop)
{
    dlock__rlround *r = dlock__rlround_new(n);
    rllock *ls = calloc(n, sizeof *ls);
    int rc = r == NULL || ls == NULL ? dlock__fail(DLOCK_ENOMEM, "out of memory") : DLOCK_OK;

    for (size_t k = 0; k < n && rc == DLOCK_OK; k++) {
        dlock__store_lock *sl = NULL;
        dlock__lock_spec spec = {.kind = batch[k][0] == 'w' ? DLOCK__WRITE : DLOCK__MUTEX};
        rc = dlock__rl_lock_new(&b->base, batch[k] + 1, &spec, &sl);
        if (rc != DLOCK_OK)
            break;
        ls[k] = *RLL(sl);
        free(sl); /* its keys live on in ls[k] */
        const char *other = ls[k].rw ? "" : ls[k].other;
        const char *argv[] = {"3",      ls[k].keys[0], ls[k].keys[1], ls[k].waiting,
                              "status", other,         b->records,    "rw"};
        size_t lens[] = {1, ls[k].key_lens[0], ls[k].key_lens[1],  strlen(ls[k].waiting),
                         6, strlen(other),     strlen(b->records), 2};
        rc = dlock__rlround_set(r, k, ls[k].rw ? 8 : 7, argv, lens);
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
            if (st.verdict == RL_HELD || st.readers > 0 || st.waiters > 0)
                *stop = sink(arg, batch[k] + 1, ls[k].rw ? DLOCK__WRITE : DLOCK__MUTEX) != 0;
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

/* Every node's keys walked (SCAN), then the names found asked of a quorum
 * as query() does, LIST_BATCH names a round. A name is listed when a
 * quorum holds it or polling waiters mark it: a name a quorum holds is on
 * a node of every quorum, so the walks of a quorum find it. The first page
 * goes to every node at once, and the others are waited for LIST_GRACE_US
 * once a quorum has answered (a hung node cost a whole command timeout, 5
 * s, when the nodes were walked one after another); a node that answered
 * it goes on with its walk, each page bounded by the command timeout. */
int dlock__rl_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    names all = {0};
    char *pattern = dlock__redis_list_pattern(b->prefix, prefix);
    /* each node's walk as an answer: done, DLOCK_OK when walked */
    dlock__rlanswer walks[DLOCK__REDLOCK_MAX_NODES] = {0};
    dlock__rlround *failed[DLOCK__REDLOCK_MAX_NODES] = {0};
    size_t walked = 0;
    int rc = DLOCK_OK, stop = 0;

    dlock__rlround *first = pattern != NULL ? dlock__rlround_new(1) : NULL;
    if (first == NULL || set_page(first, pattern, "0") != DLOCK_OK) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    int64_t until = dlock__now_us() + b->cfg.command_timeout_ms * 1000;
    if (until > deadline_us)
        until = deadline_us;
    dlock__rlround_send(b->nodes, first, until);
    dlock__rlround_wait(first, quorum_answered, b, until);
    int64_t grace = dlock__now_us() + LIST_GRACE_US;
    const dlock__rlanswer *firsts =
        dlock__rlround_wait(first, never_decided, NULL, grace < until ? grace : until);
    for (size_t i = 0; i < b->n && rc == DLOCK_OK; i++) {
        char cursor[32] = "0";
        int page_rc = read_page(b, &firsts[i], prefix, cursor, &all);
        while (page_rc == DLOCK_OK && strcmp(cursor, "0") != 0 && dlock__now_us() < deadline_us) {
            until = dlock__now_us() + b->cfg.command_timeout_ms * 1000;
            dlock__rlround_drop(failed[i]);
            failed[i] = NULL;
            page_rc = scan_page(b, i, pattern, prefix, cursor, &all,
                                until < deadline_us ? until : deadline_us, &failed[i]);
        }
        walks[i].done = 1;
        walks[i].rc =
            page_rc == DLOCK_OK && strcmp(cursor, "0") != 0 ? DLOCK_EUNREACHABLE : page_rc;
        snprintf(walks[i].err, sizeof walks[i].err, "%s",
                 page_rc == DLOCK_OK ? "listing took too long" : dlock_errmsg());
        if (page_rc == DLOCK_ENOMEM)
            rc = page_rc;
        else if (page_rc != DLOCK_OK && dlock__rlnodes_in_cluster(b->nodes, i))
            rc = dlock__fail_context(page_rc, "%s", b->label);
        else
            walked += walks[i].rc == DLOCK_OK;
    }
    if (rc == DLOCK_OK && walked < b->quorum) {
        /* the nodes it names are told: not warned of again (below) */
        char counts[32];
        snprintf(counts, sizeof counts, "; %zu walked", walked);
        rc = dlock__rl_fail_no_quorum(b, walks, 1, walk_done, "list: ", counts);
    }
    /* a node lost that the error does not name (a spare node, while a
     * quorum was walked) is warned of here, before anything is listed */
    for (size_t i = 0; i < b->n; i++)
        dlock__rlround_drop(failed[i]);
    dlock__rlround_drop(first);
    first = NULL;
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
    if (first != NULL)
        dlock__rlround_drop(first);
    for (size_t i = 0; i < all.n; i++)
        free(all.v[i]);
    free(all.v);
    free(pattern);
    return rc;
}
