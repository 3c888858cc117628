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

typedef struct rlbackend {
    dlock__store base;
    dlock__client_cfg cfg;
    char *prefix;
    char *label;
    dlock__rlnodes *nodes;
    size_t n, quorum;
    /* Per node: a connection to it was made once (its endpoint's `reached`) */
    atomic_int reached[DLOCK__REDLOCK_MAX_NODES];
} rlbackend;

typedef struct rllock {
    dlock__store_lock base;
    char *keys[3]; /* L (or N in simple mode), the fence counter, the name N (keys.h;
                      one block at keys[0]) */
    size_t key_lens[3];
    char *other; /* the name's key of the other layout: N for a mutex, L for simple */
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

/* The message naming the nodes that did not answer: "h1:p1 (why); ..." */
static void unanswered(const rlbackend *b, const dlock__rlanswer *a, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < b->n && used < len; i++) {
        const char *why = !a[i].done                                   ? "no reply yet"
                          : a[i].rc != DLOCK_OK                        ? a[i].err
                          : a[i].replies[0]->type == REDIS_REPLY_ERROR ? a[i].replies[0]->str
                                                                       : NULL;
        if (why == NULL)
            continue;
        const char *label = dlock__rlnodes_label(b->nodes, i);
        size_t label_len = strlen(label);
        if (strncmp(why, label, label_len) == 0 && strncmp(why + label_len, ": ", 2) == 0)
            why += label_len + 2; /* (the connection's message names the node too) */
        int w = snprintf(buf + used, len - used, "%s%s (%s)", used ? "; " : "", label, why);
        if (w < 0)
            break;
        used += (size_t) w;
    }
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

static int decided_one(void *arg, const dlock__rlanswer *a, size_t n)
{
    const verdict *v = arg;
    size_t yes, no, none, done = 0;
    tally(a, n, v->k, v->yes, &yes, &no, &none);
    for (size_t i = 0; i < n; i++)
        done += a[i].done;
    /* no, or failed (done without an answer), beyond what a quorum spares */
    return yes >= v->b->quorum || no + (none - (n - done)) > n - v->b->quorum;
}

/* A round of one script call (the same on every node), sent. NULL when out
 * of memory (recorded). */
static dlock__rlround *send_one(rlbackend *b, const rllock *l, size_t argc, const char **argv,
                                size_t *lens, int64_t deadline_us)
{
    /* numkeys, the two keys, then the step's arguments */
    const char *all[12] = {"2", l->keys[0], l->keys[1]};
    size_t all_lens[12] = {1, l->key_lens[0], l->key_lens[1]};
    for (size_t i = 0; i < argc; i++) {
        all[3 + i] = argv[i];
        all_lens[3 + i] = lens[i];
    }
    dlock__rlround *r = dlock__rlround_new(1);
    if (r == NULL) {
        dlock__fail(DLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    if (dlock__rlround_set(r, 0, argc + 3, all, all_lens) != DLOCK_OK) {
        dlock__rlround_drop(r);
        return NULL;
    }
    dlock__rlround_send(b->nodes, r, deadline_us);
    return r;
}

/* Sends the release of token to every node, answered or not, without
 * waiting: what an attempt took is given back. */
static void release_everywhere(rlbackend *b, const rllock *l, const char *token)
{
    const char *argv[] = {"release", token};
    size_t lens[] = {7, strlen(token)};
    dlock__rlround *r =
        send_one(b, l, 2, argv, lens, dlock__now_us() + b->cfg.command_timeout_ms * 1000);
    dlock__rlround_drop(r);
}

/* ---------------------------------------------------------------- steps */

static int take_decided(void *arg, const dlock__rlanswer *a, size_t n)
{
    const rlbackend *b = arg;
    size_t yes = 0, no = 0;
    for (size_t i = 0; i < n; i++) {
        if (!a[i].done)
            continue;
        if (said(&a[i], 0) == 1)
            yes++;
        else
            no++;
    }
    return yes >= b->quorum || no > n - b->quorum;
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
        unanswered(b, a, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE,
                         "%s: the fence could not be written to a quorum of %zu of %zu nodes in "
                         "time: %s",
                         b->label, b->quorum, b->n, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

static int acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *att)
{
    rlbackend *b = RLB(s);
    rllock *l = RLL(sl);
    int64_t start = dlock__now_us();
    char lease[24];
    const char *argv[] = {"take", att->token, lease, l->other};
    size_t lens[] = {4, strlen(att->token), number(lease, att->lease_ms), strlen(l->other)};
    /* past this the lock would be invalid on arrival: no reason to wait */
    int64_t valid_until = start + att->lease_ms * 1000 - drift_us(att->lease_ms);
    int64_t until = att->deadline_us < valid_until ? att->deadline_us : valid_until;
    int rc = DLOCK_OK;

    dlock__rlround *r = send_one(b, l, 4, argv, lens, att->deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
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
            release_everywhere(b, l, att->token);
        }
        goto out;
    }
    /* not taken: give back what was taken (and what may still be) */
    if (taken > 0 || failed > 0)
        release_everywhere(b, l, att->token);
    if (failed > b->n - b->quorum) {
        char why[700];
        unanswered(b, a, why, sizeof why);
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
    verdict v = {b, 0, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(r, decided_one, &v, deadline_us);
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
        unanswered(b, a, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: release: a quorum of %zu did not answer: %s",
                         b->label, b->quorum, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* A waiter gives up. It never queues (waiters poll), but an attempt that
 * gave up may have left a take on a node that answered late: give it back. */
static int cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline_us)
{
    (void) deadline_us;
    release_everywhere(RLB(s), RLL(sl), token);
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
        unanswered(b, a, why, sizeof why);
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
    size_t failed = 0;
    for (size_t i = 0; i < b->n; i++)
        failed += a[i].rc != DLOCK_OK || !a[i].done;
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
        char why[700];
        unanswered(b, a, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: renewal: a quorum of %zu did not answer: %s",
                         b->label, b->quorum, why);
    }
    dlock__rlround_drop(r);
    return rc;
}

/* ---------------------------------------------------------------- locks */

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
    if (rc == DLOCK_OK && l->other == NULL)
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc != DLOCK_OK) {
        free(l->keys[0]);
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
    free(RLL(sl));
}

/* ---------------------------------------------------------------- client */

static void close_backend(dlock__store *s, int64_t deadline_us)
{
    rlbackend *b = RLB(s);
    if (b == NULL)
        return;
    dlock__rlnodes_free(b->nodes, deadline_us);
    free(b->prefix);
    free(b->label);
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
    if (b->prefix == NULL || b->label == NULL) {
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
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_INTEROP,
    .open = open_backend,
    .close = close_backend,
    .lock_new = lock_new,
    .lock_free = lock_free,
    .acquire = acquire,
    .cancel = cancel,
    .release = release,
    .extend = extend,
    .renew = renew,
    .reached = reached,
};
