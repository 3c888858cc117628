/* SPDX-License-Identifier: MIT */
/* operator.c - what an operator asks of an etcd lock without holding it:
 * query, holders, force-unlock; and the listing of the locks whose name
 * starts with a prefix. Reads of the contenders' keys (names.h says where
 * they are), and deletes of the holders' for force-unlock. */
#define _GNU_SOURCE
#include "operator.h"
#include "names.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ESTORE(s) DLOCK__STORE_OF(dlock__etcd_store, s)
#define ELOCK(l)  DLOCK__STORE_OF(dlock__etcd_lock, l)

/* ---------------------------------------------------------------- operators */

/* Every contender, oldest first. */
static int contenders(dlock__etcd_store *e, const dlock__etcd_lock *l, int64_t deadline,
                      dlock__etcd_range_result *out)
{
    dlock__etcd_range q = {.key = l->prefix,
                           .range_end = l->prefix_end,
                           .sort_order = DLOCK__ETCD_SORT_ASCEND,
                           .sort_target = DLOCK__ETCD_SORT_BY_CREATE};
    return dlock__etcd_kv_range(e->cli, &q, deadline, out);
}

/* Whether a key's value can be a dlock owner token (printable ASCII, no
 * spaces): what another program put there is not shown as one. */
static int valid_token(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i] <= ' ' || v[i] > '~')
            return 0;
    }
    return n > 0;
}

/* Who put a contender's key, from its value "TOKEN\nINFO" (a semaphore's
 * after its "TAKE/PERMITS\n" line): the owner shown is the token, or, when
 * the value has none a dlock client could have made (Go and etcdctl put it
 * empty), the key's name after the lock's prefix: the lease id in hex.
 * *info is what follows the token's line, NULL if nothing does (or the
 * token is not one). Returns owner (in buf, len bytes) or a pointer into
 * kv's key. */
static const char *owner_of(const dlock__etcd_lock *l, const dlock__etcd_kv *kv, char *buf,
                            size_t len, const char **info)
{
    const char *v = kv->value, *end = kv->value + kv->value_len;
    const char *nl;

    *info = NULL;
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        nl = memchr(v, '\n', kv->value_len);
        v = nl != NULL ? nl + 1 : end; /* an older dlock's "2/3": no owner */
    }
    nl = memchr(v, '\n', (size_t) (end - v));
    size_t n = nl != NULL ? (size_t) (nl - v) : (size_t) (end - v);
    if (n >= len || !valid_token(v, n))
        return kv->key + strlen(l->prefix);
    memcpy(buf, v, n);
    buf[n] = '\0';
    /* the value is NUL-terminated (codec.h): the info runs to its end */
    if (nl != NULL && nl[1] != '\0')
        *info = nl + 1;
    return buf;
}

static int is_writer(const dlock__etcd_lock *l, const dlock__etcd_kv *kv)
{
    return strncmp(kv->key, l->writers, strlen(l->writers)) == 0;
}

/* How many of the contenders (oldest first) hold the lock. */
static size_t count_holders(const dlock__etcd_lock *l, const dlock__etcd_range_result *r,
                            unsigned *used, unsigned *permits)
{
    size_t k = 0;
    *used = 0;
    *permits = 0;
    switch (l->base.spec.kind) {
    case DLOCK__READ:
    case DLOCK__WRITE:
        if (r->n_kvs > 0 && is_writer(l, &r->kvs[0]))
            return 1;
        while (k < r->n_kvs && !is_writer(l, &r->kvs[k]))
            k++;
        return k;
    case DLOCK__SEMAPHORE:
        for (; k < r->n_kvs; k++) {
            unsigned take, n;
            if (!dlock__etcd_parse_permits(&r->kvs[k], &take, &n))
                break;
            if (*permits == 0)
                *permits = n;
            if (n != *permits || *used + take > n)
                break;
            *used += take;
        }
        return k;
    default:
        return r->n_kvs > 0 ? 1 : 0;
    }
}

int dlock__etcd_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    dlock__etcd_range_result r;
    unsigned used, permits;

    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    deadline = dlock__etcd_deadline_of(e, deadline);
    int rc = contenders(e, l, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    size_t n = count_holders(l, &r, &used, &permits);
    for (size_t i = 0; i < n; i++) {
        if ((uint64_t) r.kvs[i].create_revision > st->last_fence)
            st->last_fence = (uint64_t) r.kvs[i].create_revision;
    }
    st->held = n > 0;
    st->waiters = (unsigned) (r.n_kvs - n);
    int rw = l->base.spec.kind == DLOCK__READ || l->base.spec.kind == DLOCK__WRITE;
    int exclusive =
        n == 1 && l->base.spec.kind != DLOCK__SEMAPHORE && (!rw || is_writer(l, &r.kvs[0]));
    if (exclusive) {
        /* the holder's token starts its key's value; a key another client
         * made (etcdctl lock) has none: its name says who (the lease id) */
        char token[sizeof st->owner];
        const char *info;
        st->holds = 1;
        snprintf(st->owner, sizeof st->owner, "%s",
                 owner_of(l, &r.kvs[0], token, sizeof token, &info));
        if (r.kvs[0].lease != 0) {
            dlock__etcd_lease_ttl t = {0};
            if (dlock__etcd_lease_timetolive(e->cli, r.kvs[0].lease, 0, deadline, &t) == DLOCK_OK &&
                t.ttl >= 0)
                st->lease_ms = t.ttl * 1000;
            dlock__etcd_lease_ttl_free(&t);
        }
    } else {
        st->shared = (unsigned) n;
    }
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        st->permits_used = used;
        st->permits = permits;
    }
    dlock__etcd_range_result_free(&r);
    return DLOCK_OK;
}

int dlock__etcd_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    dlock__etcd_range_result r;
    unsigned used, permits;

    deadline = dlock__etcd_deadline_of(e, deadline);
    int rc = contenders(e, l, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    size_t n = count_holders(l, &r, &used, &permits);
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        int deleted;
        /* only that holder's key: a new one of the same name is not it */
        rc = dlock__etcd_delete_key(e, r.kvs[i].key, r.kvs[i].create_revision, deadline, &deleted);
    }
    dlock__etcd_range_result_free(&r);
    return rc;
}

/* One holder's key, as holders() reports it. */
typedef struct held_key {
    size_t at; /* its place among the contenders */
    char token[72];
    const char *owner, *info;
    unsigned count;
    int merged; /* counted with an older key of the same owner */
} held_key;

static int by_owner(const void *a, const void *b)
{
    const held_key *x = *(const held_key *const *) a, *y = *(const held_key *const *) b;
    int c = strcmp(x->owner, y->owner);
    return c != 0 ? c : (x->at > y->at) - (x->at < y->at);
}

/* The holders, oldest first, once per owner: handles made by
 * dlock_lock_dup share their owner token and have a key each, so an
 * owner's read holds (or permits) are the sum over its keys. */
int dlock__etcd_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                        int64_t deadline)
{
    dlock__etcd_store *e = ESTORE(s);
    dlock__etcd_lock *l = ELOCK(sl);
    dlock__etcd_range_result r;
    held_key *h = NULL, **sorted = NULL;
    unsigned used, permits;

    int rc = contenders(e, l, dlock__etcd_deadline_of(e, deadline), &r);
    if (rc != DLOCK_OK)
        return rc;
    size_t n = count_holders(l, &r, &used, &permits);
    if (n == 0)
        goto out;
    h = calloc(n, sizeof *h);
    sorted = calloc(n, sizeof *sorted);
    if (h == NULL || sorted == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned take = 1, of;
        /* count_holders() read every holder's permits already */
        if (l->base.spec.kind == DLOCK__SEMAPHORE)
            dlock__etcd_parse_permits(&r.kvs[i], &take, &of);
        h[i].at = i;
        h[i].count = take;
        h[i].owner = owner_of(l, &r.kvs[i], h[i].token, sizeof h[i].token, &h[i].info);
        sorted[i] = &h[i];
    }
    qsort(sorted, n, sizeof *sorted, by_owner);
    /* each owner's keys are together now, its oldest first */
    for (size_t i = 0, j; i < n; i = j) {
        held_key *first = sorted[i];
        for (j = i + 1; j < n && strcmp(sorted[j]->owner, first->owner) == 0; j++) {
            first->count += sorted[j]->count;
            if (first->info == NULL)
                first->info = sorted[j]->info;
            sorted[j]->merged = 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (h[i].merged)
            continue;
        dlock__holder_raw raw = {.owner = h[i].owner, .count = h[i].count, .info = h[i].info};
        if (sink(arg, &raw) != 0)
            break;
    }
out:
    free(sorted);
    free(h);
    dlock__etcd_range_result_free(&r);
    return rc;
}

/* ---------------------------------------------------------------- listing */

#define LIST_PAGE     500 /* keys per range of a walk: ours are at most ~560 bytes */
#define SEEN_BUCKETS0 64

/* The locks a walk has reported, by name and kind. */
typedef struct seen_lock {
    struct seen_lock *next;
    enum dlock__kind kind;
    char name[];
} seen_lock;

typedef struct seen_set {
    seen_lock **buckets;
    size_t n_buckets, count;
} seen_set;

static size_t seen_hash(const char *name, enum dlock__kind kind, size_t n_buckets)
{
    uint64_t h = 14695981039346656037u ^ (uint64_t) kind;
    for (const unsigned char *p = (const unsigned char *) name; *p != '\0'; p++)
        h = (h ^ *p) * 1099511628211u;
    return (size_t) (h % n_buckets);
}

/* 1 if name/kind is new (and now remembered), 0 if seen, -1 out of memory. */
static int seen_add(seen_set *set, const char *name, enum dlock__kind kind)
{
    if (set->count >= 2 * set->n_buckets) {
        size_t grown = set->n_buckets == 0 ? SEEN_BUCKETS0 : 4 * set->n_buckets;
        seen_lock **b = calloc(grown, sizeof *b);
        if (b == NULL)
            return -1;
        for (size_t i = 0; i < set->n_buckets; i++) {
            while (set->buckets[i] != NULL) {
                seen_lock *it = set->buckets[i];
                set->buckets[i] = it->next;
                size_t at = seen_hash(it->name, it->kind, grown);
                it->next = b[at];
                b[at] = it;
            }
        }
        free(set->buckets);
        set->buckets = b;
        set->n_buckets = grown;
    }
    size_t at = seen_hash(name, kind, set->n_buckets);
    for (const seen_lock *it = set->buckets[at]; it != NULL; it = it->next) {
        if (it->kind == kind && strcmp(it->name, name) == 0)
            return 0;
    }
    size_t len = strlen(name) + 1;
    seen_lock *it = malloc(sizeof *it + len);
    if (it == NULL)
        return -1;
    it->kind = kind;
    memcpy(it->name, name, len);
    it->next = set->buckets[at];
    set->buckets[at] = it;
    set->count++;
    return 1;
}

static void seen_free(seen_set *set)
{
    for (size_t i = 0; i < set->n_buckets; i++) {
        while (set->buckets[i] != NULL) {
            seen_lock *it = set->buckets[i];
            set->buckets[i] = it->next;
            free(it);
        }
    }
    free(set->buckets);
}

/* The lock a key is a contender of (names.h): its name into name (len
 * bytes) and its kind. 0 when the key is not a contender's of a name this
 * backend writes. */
static int lock_of_key(const dlock__etcd_kv *kv, char *name, size_t len, enum dlock__kind *kind)
{
    /* contenders' keys live on leases */
    return kv->lease != 0 && dlock__etcd_key_lock(kv->key, kv->key_len, name, len, kind);
}

/* Where the page after one ending with kv starts. Usually at kv's key
 * itself (the caller skips it when it comes again: a key cannot be given
 * as "just after"), but past every key that cannot be a contender's when
 * kv's key could not be sent (too long for a request's key, or holding a
 * NUL): a walk always moves on. NULL with *done when nothing is left. */
static char *next_start(const dlock__etcd_kv *kv, int *skip_start, int *done)
{
    size_t n = strlen(kv->key);
    char *next;

    *skip_start = 0;
    *done = 0;
    if (n >= DLOCK__ETCD_MAX_KEY) {
        /* every key beginning as this one is as long: none is a contender's */
        char cut[DLOCK__ETCD_MAX_KEY + 1];
        memcpy(cut, kv->key, DLOCK__ETCD_MAX_KEY);
        cut[DLOCK__ETCD_MAX_KEY] = '\0';
        next = dlock__etcd_prefix_end(cut);
        if (next != NULL && next[0] == '\0') {
            free(next);
            *done = 1;
            return NULL;
        }
    } else if (n < kv->key_len) {
        /* key "K\0...": every key beginning "K\0" holds a NUL; go on at "K\1" */
        next = malloc(n + 2);
        if (next != NULL) {
            memcpy(next, kv->key, n);
            next[n] = '\001';
            next[n + 1] = '\0';
        }
    } else {
        next = strdup(kv->key);
        *skip_start = 1;
    }
    if (next == NULL)
        dlock__fail(DLOCK_ENOMEM, "out of memory");
    return next;
}

/* Walks the keys from prefix on, a page at a time, and reports each lock
 * whose name starts with prefix once per kind. Key order is not name order
 * (the keys of "a" come around those of "a/1f"), hence the set. */
int dlock__etcd_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                     int64_t deadline_us)
{
    dlock__etcd_store *e = ESTORE(s);
    size_t plen = strlen(prefix);
    seen_set seen = {0};
    char name[DLOCK_NAME_MAX + 1];
    int rc = DLOCK_OK, skip_start = 0, done = 0;

    /* No name begins below ' ' (names hold no control characters), and
     * etcd takes no empty key: " " stands for "every name". */
    char *start = dlock__etcd_list_start(prefix), *end = NULL;
    if (start != NULL && start[0] == '\0') {
        free(start);
        start = strdup(" ");
        end = strdup("");
    } else if (start != NULL) {
        end = dlock__etcd_prefix_end(start);
    }
    if (start == NULL || end == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    while (!done) {
        dlock__etcd_range q = {.key = start, .range_end = end, .limit = LIST_PAGE, .keys_only = 1};
        dlock__etcd_range_result r;
        rc = dlock__etcd_kv_range(e->cli, &q, dlock__etcd_deadline_of(e, deadline_us), &r);
        if (rc != DLOCK_OK)
            goto out;
        for (size_t i = 0; i < r.n_kvs && !done; i++) {
            enum dlock__kind kind;
            if (i == 0 && skip_start && r.kvs[0].key_len == strlen(start) &&
                strcmp(r.kvs[0].key, start) == 0)
                continue; /* the last page's last key */
            if (!lock_of_key(&r.kvs[i], name, sizeof name, &kind) ||
                strncmp(name, prefix, plen) != 0)
                continue;
            int fresh = seen_add(&seen, name, kind);
            if (fresh < 0) {
                rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
                done = 1;
            } else if (fresh && sink(arg, name, kind) != 0) {
                done = 1;
            }
        }
        if (!done && (!r.more || r.n_kvs == 0))
            done = 1;
        if (!done) {
            free(start);
            start = next_start(&r.kvs[r.n_kvs - 1], &skip_start, &done);
            if (start == NULL && !done)
                rc = DLOCK_ENOMEM;
            if (start == NULL)
                done = 1;
        }
        dlock__etcd_range_result_free(&r);
    }
out:
    seen_free(&seen);
    free(start);
    free(end);
    return rc;
}
