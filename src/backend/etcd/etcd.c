/* SPDX-License-Identifier: MIT */
/* etcd.c - the etcd backend: etcd://host:port[,host:port...][?options].
 *
 * Design note.
 *
 * Layout. A mutex is etcd's concurrency.Mutex, so that `dlock run -u etcd://H
 * NAME` and `etcdctl lock NAME` are one lock: every contender puts a key
 * NAME/<lease id in lower-case hex> holding "TOKEN\nINFO", its owner token
 * and who its client is (client_cfg.owner_info; Go puts the value empty
 * and never reads it), attached to its lease, in one Txn that also
 * reads where it stands (compare create_revision == 0, else read the key
 * back). The holder is the key with the lowest create revision under NAME/;
 * any other contender watches only the newest key older than its own for
 * its deletion, from now (quicker than from a past revision, which etcd
 * serves only after a catch-up pass); when etcd created the watch past the
 * revision of the read that found the key, a delete in between may have
 * been missed, and the waiter looks again at once (WATCH_LATE). Looking
 * again is a Txn that only reads while the waiter's key is still there. A
 * release deletes the key, which wakes the one waiter behind it.
 * The fence is the holder key's create revision: a later holder's key was
 * created after every earlier holder's was (it either queued behind it or
 * came after its delete), so fences strictly increase. The read-write lock
 * and the semaphore are layouts of our own on the same scheme
 * (docs/etcd.md): keys under NAME.rwlock/ and NAME.semaphore/.
 *
 * One name is one lock: the kinds of a name exclude each other, first come,
 * first served by create revision (etcd's one order of writes). The Txn that
 * puts a key or looks again also reads, for each other kind, the newest key
 * older than ours (views_op): any keeps us out, and we wait for the newest
 * of those that do, as within a kind. No one waits for a newer key, so two
 * contenders never wait for each other; and the reads ride in the Txn that
 * is sent anyway. Only a contender that finds an older key of another kind
 * reads that kind's holders' values (owner_holds_other): if one is its own
 * owner's, it would wait for itself, and it is EDEADLK.
 *
 * Slots. One client has one session lease, and the Mutex gives a lease one
 * key per name: two handles of one client waiting for one name would share
 * it and both think they hold. So the first handle of a client takes the
 * key NAME/<hex>, a second one at the same time NAME/<hex>-1, and so on.
 * etcdctl and Go rank any key under NAME/ by create revision, so the extra
 * slots keep the interop. A slot is claimed until its key is known to be
 * gone (a delete whose outcome is unknown keeps it claimed until a retry
 * confirms it), so a new attempt never finds an old key of ours and takes
 * it for its own.
 *
 * Liveness. Grants live by the client's session: a lease of the URL's
 * `lease` in whole seconds, granted on first use, kept alive by the core's
 * renewer through renew() (lease.c; one keepalive round trip), ended when
 * etcd says the lease is gone, and revoked when the core gives up on it
 * and at close. Holds are checked in renew() (the key still there with our create
 * revision), so a key deleted by an operator is reported lost. After a
 * loss, what is left to do in etcd (revoke the lost session, delete a lost
 * hold's key) only tidies: it ends by itself with its lease. It waits for
 * etcd 300 ms at most (store.h, dlock__etcd_tidy_deadline), then is left
 * to the background, so a frozen etcd does not hold up a close (dlock run
 * exits about 0.6 s after the loss; test_etcd_lock
 * run_exits_on_frozen_etcd). A fixed
 * lease (dlock_acquire_for) is a lease of the hold's own, never kept alive:
 * a first attempt grants it and puts the key on it; a waiter waits on the
 * session and moves its key to a lease of its own when it is granted (a
 * put keeps the key's create revision, so its place and fence stay).
 *
 * etcd issue 11456 (3.4's Mutex grants after the wait without looking at
 * its own key): a grant is only reported from a Txn that read our key back
 * at that revision (so its lease was alive then), under a session the core
 * still counts valid; a key that vanished while waiting is put again, at
 * the back of the queue, and a lease that vanished ends the session.
 *
 * Threads. The handle's key state is read by the renewal thread and so is
 * guarded by the handle's mutex; everything else of a handle is its
 * owner's. Store-wide state (the current session, slots, work to retry,
 * read-write holds: store.c) is under the store's mutex, never taken while
 * a handle's mutex is held. Watch callbacks only post on the board.
 *
 * Files. This one has the store (open, close, the backend table) and a
 * lock's acquire and release; lease.c keeps holds alive (extend, renewal,
 * the moves to a fixed lease), operator.c answers query, holders and
 * force-unlock and lists locks, store.c keeps the bookkeeping above
 * (README.md has the map). */
#define _GNU_SOURCE
#include "etcd.h"
#include "lease.h"
#include "names.h"
#include "operator.h"
#include "store.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CONNECT_MS 2000
#define ROUNDS             8 /* attempts within one acquire before giving up */

extern const dlock__backend dlock__etcd_backend;

/* A watch's context: whose waiter to wake. */
typedef struct dlock__etcd_wake {
    dlock__etcd_store *store;
    char token[72];
    int range;        /* a prefix watch (it stays after an event) */
    _Atomic int over; /* the watched key went, or etcd ended the watch */
} dlock__etcd_wake;

#define ESTORE(s) DLOCK__STORE_OF(dlock__etcd_store, s)
#define ELOCK(l)  DLOCK__STORE_OF(dlock__etcd_lock, l)

/* ---------------------------------------------------------------- watches */

static void on_watch(void *arg, const dlock__etcd_watch_note *note)
{
    dlock__etcd_wake *w = arg;
    if (note->kind == DLOCK__ETCD_WATCH_EVENT)
        atomic_fetch_add(&w->store->stat_wakeups, 1);
    if (note->kind == DLOCK__ETCD_WATCH_CANCELED ||
        (note->kind == DLOCK__ETCD_WATCH_EVENT && !w->range))
        atomic_store(&w->over, 1);
    /* A broken stream is resumed without loss, but a waiter looks again
     * anyway: its wait may be bounded by what it missed meanwhile. */
    dlock__board_recheck(w->store->base.host.board, w->token);
}

static void watch_drop(dlock__etcd_store *e, dlock__etcd_lock *l)
{
    if (l->watch == NULL)
        return;
    dlock__etcd_watch_cancel(e->cli, l->watch_id); /* its callback is over after this */
    free(l->watch);
    free(l->watched);
    l->watch = NULL;
    l->watched = NULL;
}

/* What a waiter waits for. */
typedef struct standing {
    int holder;
    int64_t revision; /* of the read it is based on */
    char *watch_key;  /* a key to wait for, or the prefix (watch_range) */
    int watch_range;  /* every delete under the prefix (the semaphore's first waiter) */
    int watch_puts;   /* puts too (the semaphore waiter ahead is granted) */
    int einval;       /* semaphore: in use with another number of permits */
    char why[160];
    enum dlock__held_as held_as; /* kept out by another kind of lock only: which */
    int64_t writer_rev;          /* a reader kept out by a writer (only): its key's revision */
    unsigned others_before;      /* bit i: a contender of l->others[i] came before us */
} standing;

static void standing_clear(standing *st)
{
    free(st->watch_key);
    memset(st, 0, sizeof *st);
}

static int watch_set(dlock__etcd_store *e, dlock__etcd_lock *l, const standing *st,
                     const char *token)
{
    if (l->watch != NULL && !atomic_load(&l->watch->over) && l->watch->range == st->watch_range &&
        strcmp(l->watched, st->watch_key) == 0)
        return DLOCK_OK; /* the same wait: the watch is still good */
    watch_drop(e, l);
    dlock__etcd_wake *w = calloc(1, sizeof *w);
    char *watched = strdup(st->watch_key);
    if (w == NULL || watched == NULL) {
        free(w);
        free(watched);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    w->store = e;
    w->range = st->watch_range;
    snprintf(w->token, sizeof w->token, "%s", token);
    atomic_init(&w->over, 0);
    dlock__etcd_watch_spec spec = {.key = st->watch_key,
                                   .range_end = st->watch_range ? l->prefix_end : NULL,
                                   .start_revision = 0,
                                   .seen_revision = st->revision,
                                   .no_put = !st->watch_puts};
    int rc = dlock__etcd_watch_add(e->cli, &spec, on_watch, w, &l->watch_id);
    if (rc != DLOCK_OK) {
        free(w);
        free(watched);
        return rc;
    }
    l->watch = w;
    l->watched = watched;
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- where a key stands */

/* The read that says where a contender with create revision rev stands
 * (rev 0: its key was put just now in the same Txn, so it is the newest). */
static void view_op(const dlock__etcd_lock *l, int64_t rev, dlock__etcd_op *op)
{
    memset(op, 0, sizeof *op);
    op->type = DLOCK__ETCD_OP_RANGE;
    dlock__etcd_range *r = &op->range;
    r->sort_target = DLOCK__ETCD_SORT_BY_CREATE;
    switch (l->base.spec.kind) {
    case DLOCK__SEMAPHORE:
        /* every contender up to us, in order, with their permits */
        r->key = l->prefix;
        r->range_end = l->prefix_end;
        r->sort_order = DLOCK__ETCD_SORT_ASCEND;
        r->max_create_revision = rev;
        break;
    case DLOCK__READ:
        /* the newest writer older than us */
        r->key = l->writers;
        r->range_end = l->writers_end;
        r->sort_order = DLOCK__ETCD_SORT_DESCEND;
        r->max_create_revision = rev > 0 ? rev - 1 : 0;
        r->limit = 1;
        r->keys_only = 1;
        break;
    default:
        /* the newest contender older than us (and us, when just put) */
        r->key = l->prefix;
        r->range_end = l->prefix_end;
        r->sort_order = DLOCK__ETCD_SORT_DESCEND;
        r->max_create_revision = rev > 0 ? rev - 1 : 0;
        r->limit = rev > 0 ? 1 : 2;
        r->keys_only = 1;
        break;
    }
}

/* The reads that say where a contender stands: its own kind's (view_op),
 * then the newest contender of each other kind of the name older than it
 * (one name is one lock: every other kind's contender that came first,
 * holder or waiter, keeps it out). In the Txn that takes or looks again:
 * they cost no round trip. Fills ops[0..NVIEWS). */
#define NVIEWS 3

static void views_op(const dlock__etcd_lock *l, int64_t rev, dlock__etcd_op *ops)
{
    view_op(l, rev, &ops[0]);
    for (int i = 0; i < 2; i++) {
        dlock__etcd_op *op = &ops[1 + i];
        memset(op, 0, sizeof *op);
        op->type = DLOCK__ETCD_OP_RANGE;
        op->range = (dlock__etcd_range){.key = l->others[i],
                                        .range_end = l->others_end[i],
                                        .sort_target = DLOCK__ETCD_SORT_BY_CREATE,
                                        .sort_order = DLOCK__ETCD_SORT_DESCEND,
                                        .max_create_revision = rev > 0 ? rev - 1 : 0,
                                        .limit = 1,
                                        .keys_only = 1};
    }
}

/* Whether a Txn's responses from `at` on are the NVIEWS reads. */
static int views_in(const dlock__etcd_txn_result *r, size_t at)
{
    if (r->n_responses != at + NVIEWS)
        return 0;
    for (size_t i = at; i < r->n_responses; i++) {
        if (r->responses[i].type != DLOCK__ETCD_OP_RANGE)
            return 0;
    }
    return 1;
}

/* Whether the writer (its key's create revision writer_rev) that keeps a
 * reader's try out only waits, behind readers that hold the name: the
 * oldest contender is a reader. One more read, on such a refusal only
 * (not known: 0). */
static int writer_waits(dlock__etcd_store *e, const dlock__etcd_lock *l, int64_t writer_rev,
                        int64_t deadline)
{
    dlock__etcd_range q = {.key = l->prefix,
                           .range_end = l->prefix_end,
                           .sort_target = DLOCK__ETCD_SORT_BY_CREATE,
                           .sort_order = DLOCK__ETCD_SORT_ASCEND,
                           .max_create_revision = writer_rev - 1,
                           .limit = 1,
                           .keys_only = 1};
    dlock__etcd_range_result r;
    if (dlock__etcd_kv_range(e->cli, &q, deadline, &r) != DLOCK_OK)
        return 0;
    size_t n = strlen(l->prefix);
    int waits = r.n_kvs == 1 && r.kvs[0].key_len > n + 2 && strncmp(r.kvs[0].key + n, "r-", 2) == 0;
    dlock__etcd_range_result_free(&r);
    return waits;
}

/* Reads the views' results (views_op) for the contender `key` with create
 * revision rev. */
static int interpret(dlock__etcd_store *e, const dlock__etcd_lock *l, const char *token,
                     const char *key, int64_t rev, const dlock__etcd_op_result *views, standing *st)
{
    const dlock__lock_spec *spec = &l->base.spec;
    const dlock__etcd_range_result *view = &views[0].range;
    const dlock__etcd_kv *ahead = NULL, *other = NULL;
    enum dlock__held_as other_as = DLOCK__HELD_AS_SAME;

    /* the newest contender of another kind that came before us */
    for (int i = 0; i < 2; i++) {
        const dlock__etcd_range_result *o = &views[1 + i].range;
        if (o->n_kvs > 0 && o->kvs[0].create_revision < rev &&
            (other == NULL || o->kvs[0].create_revision > other->create_revision)) {
            other = &o->kvs[0];
            other_as = l->others_as[i];
        }
        if (o->n_kvs > 0 && o->kvs[0].create_revision < rev)
            st->others_before |= 1u << i;
    }
    if (spec->kind != DLOCK__SEMAPHORE) {
        for (size_t i = 0; i < view->n_kvs && ahead == NULL; i++) {
            if (view->kvs[i].create_revision < rev)
                ahead = &view->kvs[i];
        }
        int own = ahead == NULL;
        if (spec->kind == DLOCK__READ && ahead != NULL &&
            dlock__etcd_own_write_hold(e, ahead->key, token))
            own = 1; /* our own write: a downgrade */
        st->holder = own && other == NULL;
        if (st->holder)
            return DLOCK_OK;
        if (spec->kind == DLOCK__READ && !own && other == NULL)
            st->writer_rev = ahead->create_revision;
        /* wait for the newest of those that keep us out: the nearest ahead */
        if (own || (other != NULL && other->create_revision > ahead->create_revision))
            ahead = other;
        st->held_as = own ? other_as : DLOCK__HELD_AS_SAME;
        st->watch_key = strdup(ahead->key);
        if (st->watch_key == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        return DLOCK_OK;
    }

    /* Semaphore: first come, first served; a contender holds when the
     * permits of everyone before it and its own fit. */
    uint64_t before = 0;
    for (size_t i = 0; i < view->n_kvs; i++) {
        const dlock__etcd_kv *kv = &view->kvs[i];
        unsigned take, permits;
        if (kv->create_revision >= rev || strcmp(kv->key, key) == 0)
            continue;
        if (!dlock__etcd_parse_permits(kv, &take, &permits)) {
            st->einval = 1;
            snprintf(st->why, sizeof st->why, "key %.60s is not a dlock semaphore's", kv->key);
            return DLOCK_OK;
        }
        if (permits != spec->permits) {
            st->einval = 1;
            snprintf(st->why, sizeof st->why,
                     "is in use with %u permits, not %u: every user of a semaphore must give the "
                     "same number",
                     permits, spec->permits);
            return DLOCK_OK;
        }
        before += take;
        ahead = kv;
    }
    st->holder = before + spec->take <= spec->permits;
    if (other != NULL) {
        /* another kind came first: wait for it to go */
        st->held_as = st->holder ? other_as : DLOCK__HELD_AS_SAME;
        st->holder = 0;
        st->watch_key = strdup(other->key);
        if (st->watch_key == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        return DLOCK_OK;
    }
    if (st->holder)
        return DLOCK_OK;
    /* The first waiter may go in on any release ahead of it; the others
     * wait for the one before them to go in or away. */
    st->watch_range = before <= spec->permits;
    st->watch_puts = !st->watch_range;
    st->watch_key = strdup(st->watch_range ? l->prefix : ahead->key);
    if (st->watch_key == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

/* Whether a key's value is "TOKEN\n..." (our keys' values: make_value). */
static int owned_by(const dlock__etcd_kv *kv, const char *token)
{
    size_t n = strlen(token);
    return kv->value_len > n && memcmp(kv->value, token, n) == 0 && kv->value[n] == '\n';
}

/* A range of the keys under prefix (to its end), oldest first. */
static dlock__etcd_op oldest_op(const char *prefix, const char *end, int64_t limit, int keys_only)
{
    dlock__etcd_op op = {.type = DLOCK__ETCD_OP_RANGE};
    op.range = (dlock__etcd_range){.key = prefix,
                                   .range_end = end,
                                   .sort_target = DLOCK__ETCD_SORT_BY_CREATE,
                                   .sort_order = DLOCK__ETCD_SORT_ASCEND,
                                   .limit = limit,
                                   .keys_only = keys_only};
    return op;
}

/* Whether token holds the name as another kind than l's, a contender of
 * which came before ours (create revision rev; st->others_before): an
 * owner asking for its name as another kind than it holds it (a handle
 * made by dlock_lock_dup) would wait for itself. Read only then: a name
 * used as one kind pays nothing. The holders of that kind are its oldest
 * key (a mutex's, a writer's) or its readers at the head, older than every
 * key of the other kinds (one name is one lock); their values start with
 * their owner's token. A semaphore's keys are never an owner's other kind:
 * a semaphore handle has a token of its own (dlock_lock_dup makes none and
 * copies none's), so they are not read, nor is anything for a semaphore. */
static int owner_holds_other(dlock__etcd_store *e, const dlock__etcd_lock *l, const char *token,
                             int64_t rev, unsigned others_before, int64_t deadline, int *holds)
{
    enum { PAGE = 64 }; /* readers at a time */
    int i = l->others_as[0] == DLOCK__HELD_AS_SEMAPHORE ? 1 : 0;
    int rw = l->others_as[i] == DLOCK__HELD_AS_RW;
    size_t plen = strlen(l->others[i]);
    dlock__etcd_txn_result r;
    dlock__etcd_range_result more = {0};

    *holds = 0;
    if (l->base.spec.kind == DLOCK__SEMAPHORE || !(others_before & (1u << i)))
        return DLOCK_OK;
    /* that kind's head, and the oldest key of each of the other two */
    dlock__etcd_op ops[3] = {oldest_op(l->others[i], l->others_end[i], rw ? PAGE : 1, 0),
                             oldest_op(l->prefix, l->prefix_end, 1, 1),
                             oldest_op(l->others[1 - i], l->others_end[1 - i], 1, 1)};
    ops[0].range.max_create_revision = rev - 1;
    dlock__etcd_txn reads = {.success = ops, .n_success = 3};
    int rc = dlock__etcd_kv_txn(e->cli, &reads, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    for (size_t k = 0; k < 3; k++) {
        if (r.n_responses != 3 || r.responses[k].type != DLOCK__ETCD_OP_RANGE) {
            dlock__etcd_txn_result_free(&r);
            return dlock__fail(DLOCK_EPROTO,
                               "%s: the lock's reads came back in an unexpected shape",
                               e->base.label);
        }
    }
    int64_t bound = rev; /* a key of that kind from here on holds nothing */
    for (size_t k = 1; k < 3; k++) {
        const dlock__etcd_range_result *o = &r.responses[k].range;
        if (o->n_kvs > 0 && o->kvs[0].create_revision < bound)
            bound = o->kvs[0].create_revision;
    }
    dlock__etcd_range q = ops[0].range;
    const dlock__etcd_range_result *page = &r.responses[0].range;
    for (;;) {
        int end = 0;
        for (size_t k = 0; k < page->n_kvs && !end; k++) {
            const dlock__etcd_kv *kv = &page->kvs[k];
            int writer = rw && strncmp(kv->key + plen, "w-", 2) == 0;
            /* a writer behind readers holds nothing; one at the head, alone */
            end = kv->create_revision >= bound || (writer && q.min_create_revision > 0);
            if (end)
                break;
            *holds = owned_by(kv, token);
            q.min_create_revision = kv->create_revision + 1;
            end = *holds || writer;
        }
        if (end || !(rw && page->more))
            break;
        /* more readers at the head than a page (rare) */
        dlock__etcd_range_result_free(&more);
        q.max_create_revision = bound - 1;
        rc = dlock__etcd_kv_range(e->cli, &q, deadline, &more);
        if (rc != DLOCK_OK)
            break;
        page = &more;
    }
    dlock__etcd_range_result_free(&more);
    dlock__etcd_txn_result_free(&r);
    return rc;
}

/* What our key holds: "TOKEN\nINFO" (dlock_status.owner is the token; the
 * info tells an operator who the holder is), after "TAKE/PERMITS\n" for a
 * semaphore, whose first line every contender checks. */
static int make_value(const dlock__etcd_store *e, dlock__etcd_lock *l, const char *token)
{
    const dlock__lock_spec *spec = &l->base.spec;
    const char *info = e->base.host.cfg->owner_info;
    int n;

    if (spec->kind == DLOCK__SEMAPHORE)
        n = snprintf(l->value, sizeof l->value, "%u/%u\n%s\n%s", spec->take, spec->permits, token,
                     info);
    else
        n = snprintf(l->value, sizeof l->value, "%s\n%s", token, info);
    if (n < 0 || (size_t) n >= sizeof l->value)
        return dlock__fail(DLOCK_EINVAL, "%s: the owner record does not fit in a key's value",
                           e->base.label);
    l->value_len = (size_t) n;
    snprintf(l->value_token, sizeof l->value_token, "%s", token);
    return DLOCK_OK;
}

/* One round trip: puts our key on `lease` if it is not there (reading it
 * back if it is), and reads where it stands (views_op). Sets l->k.rev.
 * DLOCK_ELOST: the lease is gone. */
static int stand(dlock__etcd_store *e, dlock__etcd_lock *l, const char *token, int64_t lease,
                 int64_t deadline, standing *st)
{
    const char *key = l->k.key;
    int64_t known = l->k.rev;
    dlock__etcd_compare cmp = {
        .key = key, .target = DLOCK__ETCD_TARGET_CREATE, .result = DLOCK__ETCD_CMP_EQUAL};
    dlock__etcd_op ok[1 + NVIEWS], ko[1 + NVIEWS];
    dlock__etcd_txn_result r, extra = {0};
    const dlock__etcd_op_result *views = NULL;
    int64_t rev;
    int rc;

    memset(st, 0, sizeof *st);
    memset(ok, 0, sizeof ok);
    memset(ko, 0, sizeof ko);
    if (l->value_len == 0 || strcmp(l->value_token, token) != 0) {
        /* set before the first put of an acquisition, so before any hold
         * the renewer reads */
        rc = make_value(e, l, token);
        if (rc != DLOCK_OK)
            return rc;
    }
    if (known > 0) {
        /* Our key was there at `known` (a waiter looking again after a
         * watch event): read whether it still is, and where it stands, in a
         * Txn with no put in it, which etcd answers without a raft write. */
        dlock__etcd_compare same = {.key = key,
                                    .target = DLOCK__ETCD_TARGET_CREATE,
                                    .result = DLOCK__ETCD_CMP_EQUAL,
                                    .number = known};
        ko[0].type = DLOCK__ETCD_OP_RANGE;
        ko[0].range.key = key;
        ko[0].range.keys_only = 1;
        views_op(l, known, &ko[1]);
        dlock__etcd_txn ro = {
            .compare = &same, .n_compare = 1, .success = ko, .n_success = 1 + NVIEWS};
        atomic_fetch_add(&e->stat_rounds, 1);
        rc = dlock__etcd_kv_txn(e->cli, &ro, deadline, &r);
        if (rc != DLOCK_OK)
            return rc;
        if (r.succeeded && views_in(&r, 1) && r.responses[0].range.n_kvs == 1) {
            st->revision = r.revision;
            rc = interpret(e, l, token, key, known, &r.responses[1], st);
            dlock__etcd_txn_result_free(&r);
            return rc;
        }
        dlock__etcd_txn_result_free(&r); /* gone: put it again below */
        memset(ko, 0, sizeof ko);
    }
    ok[0].type = DLOCK__ETCD_OP_PUT;
    ok[0].put =
        (dlock__etcd_put){.key = key, .value = l->value, .value_len = l->value_len, .lease = lease};
    views_op(l, 0, &ok[1]);
    ko[0].type = DLOCK__ETCD_OP_RANGE;
    ko[0].range.key = key;
    ko[0].range.keys_only = 1;
    size_t nko = 1;
    if (known > 0) {
        views_op(l, known, &ko[1]);
        nko += NVIEWS;
    }
    dlock__etcd_txn t = {.compare = &cmp,
                         .n_compare = 1,
                         .success = ok,
                         .n_success = 1 + NVIEWS,
                         .failure = ko,
                         .n_failure = nko};
    atomic_fetch_add(&e->stat_rounds, 1);
    rc = dlock__etcd_kv_txn(e->cli, &t, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    st->revision = r.revision;
    if (r.succeeded && views_in(&r, 1)) {
        rev = r.revision;
        views = &r.responses[1];
    } else if (!r.succeeded && r.n_responses == nko &&
               r.responses[0].type == DLOCK__ETCD_OP_RANGE && r.responses[0].range.n_kvs == 1) {
        rev = r.responses[0].range.kvs[0].create_revision;
        if (nko > 1 && rev == known && views_in(&r, 1))
            views = &r.responses[1];
    } else {
        dlock__etcd_txn_result_free(&r);
        return dlock__fail(DLOCK_EPROTO, "%s: the lock Txn's reply has an unexpected shape",
                           e->base.label);
    }
    pthread_mutex_lock(&l->mu);
    l->k.rev = rev;
    pthread_mutex_unlock(&l->mu);
    if (views == NULL) {
        /* found our key without knowing its revision before (an earlier
         * put's outcome was unknown): where does it stand? */
        dlock__etcd_op ops[NVIEWS];
        views_op(l, rev, ops);
        dlock__etcd_txn reads = {.success = ops, .n_success = NVIEWS};
        rc = dlock__etcd_kv_txn(e->cli, &reads, deadline, &extra);
        if (rc != DLOCK_OK)
            goto out;
        if (!views_in(&extra, 0)) {
            rc = dlock__fail(DLOCK_EPROTO, "%s: the lock's reads came back in an unexpected shape",
                             e->base.label);
            goto out;
        }
        st->revision = extra.revision;
        views = extra.responses;
    }
    rc = interpret(e, l, token, key, rev, views, st);
out:
    dlock__etcd_txn_result_free(&extra);
    dlock__etcd_txn_result_free(&r);
    return rc;
}

/* Tells the semaphore waiter behind us that we went in: a put of our key
 * (unchanged) is the event it waits for. */
static int tell_next(dlock__etcd_store *e, dlock__etcd_lock *l, int64_t deadline)
{
    dlock__etcd_compare cmp = {.key = l->k.key,
                               .target = DLOCK__ETCD_TARGET_CREATE,
                               .result = DLOCK__ETCD_CMP_EQUAL,
                               .number = l->k.rev};
    dlock__etcd_op put = {
        .type = DLOCK__ETCD_OP_PUT,
        .put = {.key = l->k.key,
                .value = l->value,
                .value_len = l->value_len,
                .lease = l->k.own_lease != 0 ? l->k.own_lease : l->k.sess->lease}};
    dlock__etcd_txn t = {.compare = &cmp, .n_compare = 1, .success = &put, .n_success = 1};
    dlock__etcd_txn_result r;
    int rc = dlock__etcd_kv_txn(e->cli, &t, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    int ok = r.succeeded;
    dlock__etcd_txn_result_free(&r);
    return ok ? DLOCK_OK
              : dlock__fail(DLOCK_ELOST, "%s: the semaphore's key is gone", e->base.label);
}

/* ---------------------------------------------------------------- acquire */

static void forget_release(dlock__etcd_lock *l)
{
    free(l->releasing);
    l->releasing = NULL;
}

/* Makes a fresh key name for a contender on `lease`. */
static int new_key(dlock__etcd_store *e, dlock__etcd_lock *l, int64_t lease, char **out)
{
    char base[DLOCK_NAME_MAX + 64];
    snprintf(base, sizeof base, "%s%s%" PRIx64, l->prefix, l->marker, (uint64_t) lease);
    return dlock__etcd_claim_key(e, base, out);
}

static int etcd_acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *a)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    int64_t deadline = dlock__etcd_deadline_of(e, a->deadline_us);
    int rc = DLOCK_OK;

    if (dlock__etcd_has_pending(e))
        dlock__etcd_retry_pending(e, deadline);
    dlock__etcd_rw_forget(e, l); /* not held while we try */
    forget_release(l);
    if (l->base.spec.kind == DLOCK__WRITE && dlock__etcd_own_read_hold(e, l, a->token))
        return dlock__fail(DLOCK_EDEADLK,
                           "this owner holds the read lock: taking the write lock too would wait "
                           "for itself (release the read lock first; upgrades are refused)");
    if (!a->again)
        l->queued = 0;
    for (int round = 0; round < ROUNDS; round++) {
        dlock__etcd_key k;
        dlock__etcd_session *es = NULL;
        int64_t lease;

        dlock__etcd_take_key(l, &k);
        if (k.key != NULL && k.own_lease != 0) {
            /* on a lease of its own: an earlier fixed hold that was lost, or
             * a first try whose outcome was unknown (nobody keeps that lease
             * alive, but it may be long) */
            dlock__etcd_remove_key(e, &k, deadline);
        }
        if (k.key == NULL && a->fixed && round == 0) {
            /* a first try of a fixed lease: straight onto a lease of its own */
            dlock__etcd_lease own = {0};
            rc =
                dlock__etcd_lease_grant(e->cli, dlock__etcd_ttl_of(a->lease_ms), 0, deadline, &own);
            if (rc == DLOCK_OK)
                rc = new_key(e, l, own.id, &k.key);
            if (rc != DLOCK_OK) {
                if (own.id != 0)
                    dlock__etcd_pend_revoke(e, own.id);
                return rc;
            }
            k.own_lease = own.id;
            k.own_ttl_s = own.ttl > 0 ? own.ttl : dlock__etcd_ttl_of(a->lease_ms);
            lease = own.id;
        } else {
            rc = dlock__etcd_session_get(e, deadline, &es);
            if (rc != DLOCK_OK) {
                dlock__etcd_put_key(l, &k);
                return rc;
            }
            if (k.key != NULL && (k.own_lease != 0 || k.sess != es)) {
                /* made under a session that is over: so is the key */
                dlock__etcd_discard_key(e, &k);
            }
            if (k.key == NULL) {
                rc = new_key(e, l, es->lease, &k.key);
                if (rc != DLOCK_OK) {
                    dlock__etcd_session_unref(es);
                    return rc;
                }
                k.sess = dlock__etcd_session_ref(es);
            }
            lease = es->lease;
            dlock__etcd_session_unref(es);
        }
        dlock__etcd_put_key(l, &k);

        standing st;
        rc = stand(e, l, a->token, lease, deadline, &st);
        if (rc == DLOCK_ELOST) {
            /* the lease is gone: its session ended, the key with it */
            dlock__etcd_take_key(l, &k);
            if (k.sess != NULL)
                dlock__etcd_session_end(e, k.sess, "etcd says the lease is gone");
            dlock__etcd_discard_key(e, &k);
            continue;
        }
        if (rc != DLOCK_OK) {
            if (!a->wait) {
                dlock__etcd_take_key(l, &k);
                dlock__etcd_remove_key(e, &k, deadline); /* a try leaves nothing behind */
            }
            return rc;
        }
        if (st.einval) {
            dlock__etcd_take_key(l, &k);
            dlock__etcd_remove_key(e, &k, deadline);
            rc = dlock__fail(DLOCK_EINVAL, "semaphore '%s' %s", l->name, st.why);
            standing_clear(&st);
            return rc;
        }
        int self = 0;
        if (!st.holder && st.others_before != 0) {
            rc = owner_holds_other(e, l, a->token, l->k.rev, st.others_before, deadline, &self);
            if (rc != DLOCK_OK || self) {
                standing_clear(&st);
                if (self || !a->wait) {
                    dlock__etcd_take_key(l, &k);
                    dlock__etcd_remove_key(e, &k, deadline);
                }
                if (self)
                    rc = dlock__fail(DLOCK_EDEADLK, "this owner holds the name as another kind of "
                                                    "lock: asking for it as this kind would wait "
                                                    "for itself (one name is one lock)");
                return rc;
            }
        }
        if (st.holder) {
            standing_clear(&st);
            dlock__session *grant = NULL;
            if (l->k.own_lease == 0) {
                grant = dlock__etcd_session_for_grant(e, l->k.sess);
                if (grant == NULL)
                    continue; /* the session ended meanwhile (11456): start over */
                if (a->fixed) {
                    rc = dlock__etcd_to_own_lease(e, l, a->lease_ms, deadline);
                    dlock__session_unref(grant);
                    grant = NULL;
                    if (rc == DLOCK_ELOST)
                        continue; /* our key went: queue again */
                    if (rc != DLOCK_OK)
                        return rc;
                }
            }
            if (l->base.spec.kind == DLOCK__SEMAPHORE && l->queued) {
                rc = tell_next(e, l, deadline);
                if (rc != DLOCK_OK) {
                    if (grant != NULL)
                        dlock__session_unref(grant);
                    if (rc == DLOCK_ELOST)
                        continue;
                    return rc;
                }
            }
            watch_drop(e, l);
            l->queued = 0;
            if (l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__WRITE)
                dlock__etcd_rw_remember(e, l, l->k.key, a->token);
            a->outcome = DLOCK__TAKEN;
            a->fence = (uint64_t) l->k.rev;
            a->session = grant;
            return DLOCK_OK;
        }
        a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
        a->held_as = st.held_as;
        /* (a waiter's too: said when its wait runs out; one read, when a
         * writer ahead keeps a reader out) */
        if (st.writer_rev > 0 && writer_waits(e, l, st.writer_rev, deadline))
            a->held_why = DLOCK__WHY_WRITER_FIRST;
        if (!a->wait || l->k.own_lease != 0) {
            /* a try leaves no key behind; a fixed lease's first try waits on
             * the session instead (a lease of its own is not kept alive) */
            standing_clear(&st);
            dlock__etcd_take_key(l, &k);
            dlock__etcd_remove_key(e, &k, deadline);
            if (a->wait)
                continue;
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_POLL;
            return DLOCK_OK;
        }
        rc = watch_set(e, l, &st, a->token);
        standing_clear(&st);
        if (rc != DLOCK_OK)
            return rc;
        l->queued = 1;
        a->outcome = DLOCK__QUEUED;
        a->keep_place = 0; /* the session's lease keeps the key */
        return DLOCK_OK;
    }
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: the %s's keys keep changing under us",
                       e->base.label, dlock__etcd_kind_name(l));
}

/* ---------------------------------------------------------------- release */

static int etcd_release(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                        int64_t deadline)
{
    (void) fence; /* a hold here is known by its token alone */
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    dlock__etcd_key k;

    (void) token;
    deadline = dlock__etcd_deadline_of(e, deadline);
    dlock__etcd_take_key(l, &k);
    watch_drop(e, l);
    dlock__etcd_rw_forget(e, l);
    l->queued = 0;
    if (k.key == NULL && l->releasing != NULL) {
        /* again, after etcd did not confirm it: is it done now? */
        dlock__etcd_retry_pending(e, deadline);
        if (dlock__etcd_pending_has(e, l->releasing))
            return dlock__fail(DLOCK_EUNREACHABLE,
                               "%s: %s '%s': etcd still does not answer; the release is retried "
                               "in the background",
                               e->base.label, dlock__etcd_kind_name(l), l->name);
        forget_release(l);
        return DLOCK_OK;
    }
    if (k.key == NULL)
        return dlock__fail(DLOCK_ELOST, "%s: %s '%s' is not held", e->base.label,
                           dlock__etcd_kind_name(l), l->name);
    char *what = strdup(k.key);
    int there = dlock__etcd_remove_key(e, &k, deadline);
    int rc = DLOCK_OK;
    if (there == 0) {
        rc = dlock__fail(DLOCK_ELOST, "%s: key %s is gone (deleted, or its lease ended)",
                         e->base.label, what != NULL ? what : l->name);
    } else if (there < 0) {
        /* Not known to be gone: say so, and delete it in the background
         * (until etcd answers; at the latest the lease ends it). */
        forget_release(l);
        l->releasing = what;
        what = NULL;
        rc = dlock__fail_context(DLOCK_EUNREACHABLE,
                                 "%s '%s': the release is retried in the background",
                                 dlock__etcd_kind_name(l), l->name);
    }
    free(what);
    return rc;
}

static int etcd_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    dlock__etcd_key k;

    (void) token;
    dlock__etcd_take_key(l, &k);
    watch_drop(e, l);
    dlock__etcd_rw_forget(e, l);
    forget_release(l);
    l->queued = 0;
    dlock__etcd_remove_key(e, &k, dlock__etcd_deadline_of(e, deadline));
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- locks */

static void elock_free(dlock__etcd_lock *l)
{
    if (l == NULL)
        return;
    free(l->name);
    free(l->prefix);
    free(l->prefix_end);
    free(l->writers);
    free(l->writers_end);
    for (int i = 0; i < 2; i++) {
        free(l->others[i]);
        free(l->others_end[i]);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->moving);
    free(l);
}

/* The other kinds' key ranges of the name (lock_new): a kind's prefix is
 * dlock__etcd_lock_prefix's, the read-write lock's both modes alike. */
static int other_kinds(dlock__etcd_lock *l, const char *name)
{
    static const enum dlock__kind kinds[] = {DLOCK__MUTEX, DLOCK__WRITE, DLOCK__SEMAPHORE};
    static const enum dlock__held_as as[] = {DLOCK__HELD_AS_MUTEX, DLOCK__HELD_AS_RW,
                                             DLOCK__HELD_AS_SEMAPHORE};
    enum dlock__kind mine = l->base.spec.kind == DLOCK__READ ? DLOCK__WRITE : l->base.spec.kind;
    if (mine == DLOCK__FAIR)
        mine = DLOCK__MUTEX;
    size_t k = 0;
    for (size_t i = 0; i < 3; i++) {
        if (kinds[i] == mine)
            continue;
        l->others_as[k] = as[i];
        l->others[k] = dlock__etcd_lock_prefix(name, kinds[i]);
        if (l->others[k] == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        l->others_end[k] = dlock__etcd_prefix_end(l->others[k]);
        if (l->others_end[k++] == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

static int etcd_lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                         dlock__store_lock **out)
{
    dlock__etcd_lock *l;
    int rc = DLOCK_OK;

    (void) s;
    *out = NULL;
    l = calloc(1, sizeof *l);
    if (l == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->moving, NULL);
    l->base.spec = *spec;
    l->marker = "";
    l->prefix = dlock__etcd_lock_prefix(name, spec->kind);
    l->name = strdup(name);
    if (l->prefix == NULL || l->name == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto fail;
    }
    if (spec->kind == DLOCK__READ || spec->kind == DLOCK__WRITE) {
        l->marker = spec->kind == DLOCK__READ ? "r-" : "w-";
        size_t n = strlen(l->prefix) + 3;
        l->writers = malloc(n);
        if (l->writers != NULL)
            snprintf(l->writers, n, "%sw-", l->prefix);
        if (l->writers == NULL || (l->writers_end = dlock__etcd_prefix_end(l->writers)) == NULL)
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    if (rc == DLOCK_OK && (l->prefix_end = dlock__etcd_prefix_end(l->prefix)) == NULL)
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc == DLOCK_OK)
        rc = other_kinds(l, name);
    if (rc != DLOCK_OK)
        goto fail;
    *out = &l->base;
    return DLOCK_OK;
fail:
    elock_free(l);
    return rc;
}

/* The handle leaves its hold: its key stays, on its own lease (a fixed
 * lease) or the session's (until the client closes, or the session ends),
 * and is only forgotten here. */
static void etcd_detach(dlock__store *s, dlock__store_lock *sl)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    dlock__etcd_key k;

    /* (not while a renewal moves the key to a lease of its own: it would
     * find the key taken and revoke the lease the key is now on) */
    pthread_mutex_lock(&l->moving);
    dlock__etcd_take_key(l, &k);
    pthread_mutex_unlock(&l->moving);
    watch_drop(e, l);
    dlock__etcd_rw_forget(e, l);
    forget_release(l);
    char own[DLOCK_NAME_MAX + 64];
    size_t n = (size_t) snprintf(own, sizeof own, "%s%s%" PRIx64, l->prefix, l->marker,
                                 (uint64_t) k.own_lease);
    if (k.own_lease != 0 && k.key != NULL && strncmp(k.key, own, n) == 0 &&
        (k.key[n] == '\0' || k.key[n] == '-')) {
        /* named after a lease of its own (not the session's, as a key moved
         * to its own lease after a wait is): no other attempt can make
         * that name, so it needs no claim */
        dlock__etcd_discard_key(e, &k);
        return;
    }
    /* The name stays claimed while the key may exist (as long as the
     * session): another handle of this client must not put the same key.
     * One claim per key left held, as many as etcd keeps. */
    free(k.key);
    dlock__etcd_session_unref(k.sess);
}

static void etcd_lock_free(dlock__store *s, dlock__store_lock *sl)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    dlock__etcd_key k;

    dlock__etcd_take_key(l, &k);
    watch_drop(e, l);
    dlock__etcd_rw_forget(e, l);
    forget_release(l);
    /* A key left here is one the core did not release: its hold was lost
     * (its session's or its own lease ran out, or it was deleted), or an
     * attempt left it. It ends with its lease: deleting it is tidying. */
    dlock__etcd_remove_key(e, &k, dlock__etcd_tidy_deadline(e, DLOCK__NEVER));
    elock_free(l);
}

/* ---------------------------------------------------------------- the store */

static void etcd_close(dlock__store *s, int64_t deadline)
{
    dlock__etcd_store *e = ESTORE(s);

    if (e == NULL)
        return;
    if (e->cli != NULL) {
        /* work left, and a lost session's revoke: tidying, in one short
         * time for both (see dlock__etcd_tidy_deadline) */
        int64_t tidy = dlock__etcd_tidy_deadline(e, deadline);
        dlock__etcd_retry_pending(e, tidy);
        if (e->cur != NULL) {
            pthread_mutex_lock(&e->mu);
            int ended = e->cur->session == NULL;
            int alive = !ended && dlock__session_alive(e->cur->session);
            pthread_mutex_unlock(&e->mu);
            /* its keys go at once, not a TTL later; an ended session was
             * revoked already, or its revoke is among the work left; a
             * lost one's lease runs out by itself (nobody keeps it alive
             * any more) */
            if (!ended)
                dlock__etcd_lease_revoke(e->cli, e->cur->lease, alive ? deadline : tidy);
            dlock__etcd_session_end(e, e->cur, "the client closed");
        }
    }
    dlock__etcd_session_unref(e->cur);
    dlock__etcd_free(e->cli); /* stops the watch stream */
    dlock__etcd_store_fini(e);
    free((char *) e->base.label);
    free(e);
}

/* "h1:p1,h2:p2" from the URL's hosts. */
static int endpoints_of(const dlock__url *url, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    if (url->nhosts == 0)
        return dlock__fail(DLOCK_EINVAL, "%s: want at least one host (etcd://host:port)",
                           url->text);
    for (size_t i = 0; i < url->nhosts; i++) {
        const char *h = url->hosts[i].name;
        int port = url->hosts[i].port ? url->hosts[i].port : 2379;
        int n = snprintf(buf + used, len - used, strchr(h, ':') ? "%s[%s]:%d" : "%s%s:%d",
                         i ? "," : "", h, port);
        if (n < 0 || (size_t) n >= len - used)
            return dlock__fail(DLOCK_EINVAL, "%s: host list too long", url->text);
        used += (size_t) n;
    }
    return DLOCK_OK;
}

static int etcd_open(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    dlock__etcd_store *e = calloc(1, sizeof *e);
    char endpoints[1024];
    int64_t connect_ms = DEFAULT_CONNECT_MS;
    int rc;

    *out = NULL;
    dlock__url_user_is_a_name(url); /* etcd://alice@host: a user, in messages too */
    if (e == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__etcd_store_init(e);
    e->base.backend = &dlock__etcd_backend;
    e->base.caps = dlock__etcd_backend.caps;
    e->base.host = *host;
    e->timeout_ms = host->cfg->command_timeout_ms;
    e->ttl_s = dlock__etcd_ttl_of(host->cfg->lease_ms);
    rc = endpoints_of(url, endpoints, sizeof endpoints);
    if (rc == DLOCK_OK && url->path[0] != '\0')
        rc = dlock__fail(DLOCK_EINVAL,
                         "%s: an etcd URL has no path (a lock's keys are its name: NAME/...)",
                         url->text);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "connect_timeout", 1, &connect_ms);
    if (rc == DLOCK_OK) {
        dlock__etcd_config cfg = {.endpoints = endpoints,
                                  .user = url->user,
                                  .password = url->password,
                                  .userinfo = url->userinfo,
                                  .connect_timeout_ms = connect_ms,
                                  .request_timeout_ms = e->timeout_ms,
                                  .log = host->log};
        rc = dlock__etcd_new(&cfg, &e->cli);
    }
    if (rc == DLOCK_OK && (e->base.label = strdup(dlock__etcd_label(e->cli))) == NULL)
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc != DLOCK_OK) {
        etcd_close(&e->base, dlock__now_us());
        return rc;
    }
    *out = &e->base;
    return DLOCK_OK;
}

void dlock__etcd_store_stats_get(dlock__store *s, dlock__etcd_store_stats *out)
{
    dlock__etcd_store *e = ESTORE(s);
    out->wakeups = atomic_load(&e->stat_wakeups);
    out->rounds = atomic_load(&e->stat_rounds);
    out->sessions = atomic_load(&e->stat_sessions);
    pthread_mutex_lock(&e->mu);
    out->pending = e->npending;
    pthread_mutex_unlock(&e->mu);
}

dlock__etcd *dlock__etcd_store_client(dlock__store *s)
{
    return ESTORE(s)->cli;
}

static int etcd_reached(dlock__store *s)
{
    return dlock__etcd_answered(ESTORE(s)->cli);
}

static const char *const schemes[] = {"etcd", NULL};

const dlock__backend dlock__etcd_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "etcd",
    .schemes = schemes,
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_FORCE_UNLOCK |
            DLOCK_CAP_QUERY | DLOCK_CAP_FAIR | DLOCK_CAP_READ_WRITE | DLOCK_CAP_SEMAPHORE |
            DLOCK_CAP_NOTIFY | DLOCK_CAP_SESSION | DLOCK_CAP_LIST,
    .open = etcd_open,
    .close = etcd_close,
    .lock_new = etcd_lock_new,
    .lock_free = etcd_lock_free,
    .detach = etcd_detach,
    .acquire = etcd_acquire,
    .cancel = etcd_cancel,
    .release = etcd_release,
    .extend = dlock__etcd_extend,
    .renew = dlock__etcd_renew,
    .session_lost = dlock__etcd_session_lost,
    .query = dlock__etcd_query,
    .force_unlock = dlock__etcd_force_unlock,
    .holders = dlock__etcd_holders,
    .list = dlock__etcd_list,
    .reached = etcd_reached,
};
