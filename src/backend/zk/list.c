/* SPDX-License-Identifier: MIT */
/* list.c - listing the names of the locks under the base path. */
#include "internal.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * dlock_list walks the tree under the base path, depth first. A node is a
 * lock when its path is one names.h writes for a name (the name listed is
 * that name) and it has contender children (dlock__zk_contender): a mutex when
 * one has a mutex marker (Curator's or kazoo's), a read-write lock when one
 * has a read or write marker (both, when both share the path). A node with
 * a `leases` child is a semaphore, taken or waited for when its `leases` or
 * `locks` has a contender child; those two are its own, never parts of
 * names. Every other child is walked as part of a longer name, unless no
 * name under it can start with the prefix, or the name would be longer than
 * a lock's may be (zk_lock_new, zk.c): that bounds the depth. At most
 * LIST_MAX_NODES znodes are listed (more is DLOCK_EINVAL: a longer prefix
 * will do), LIST_BATCH at a time (pipelined), each request bounded by the
 * command timeout and the whole walk by the caller's deadline. Contender
 * nodes are ephemeral, so never walked into.
 */
#define LIST_MAX_NODES 100000
#define LIST_BATCH     64

typedef struct walk_item {
    char *path;  /* the znode */
    size_t name; /* where its lock name starts in path (the base: at its end) */
    int sem;     /* a semaphore's path: list its leases/ and locks/ */
} walk_item;

typedef struct walk {
    walk_item *items; /* a stack */
    size_t n, cap;
} walk;

/* Pushes path (taken: freed if it cannot be). */
static int walk_push(walk *w, char *path, size_t name, int sem)
{
    if (path == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (w->n == w->cap) {
        size_t cap = w->cap != 0 ? w->cap * 2 : 64;
        walk_item *more = realloc(w->items, cap * sizeof *more);
        if (more == NULL) {
            free(path);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        w->items = more;
        w->cap = cap;
    }
    w->items[w->n++] = (walk_item){path, name, sem};
    return DLOCK_OK;
}

/* Whether a name at or under `name` (name/...) may start with prefix. */
static int may_match(const char *name, const char *prefix)
{
    size_t n = strlen(name), p = strlen(prefix);
    if (strncmp(name, prefix, n < p ? n : p) != 0)
        return 0;
    return n >= p || prefix[n] == '/';
}

/* One walked node's children in r (a semaphore: r[0] its leases, r[1] its
 * locks): reports the locks it is, and pushes the children to walk. */
static int visit(zstore *z, walk *w, const walk_item *it, dlock__zresult *r, const char *prefix,
                 dlock__name_sink sink, void *arg, int *stop)
{
    const char *rel = it->path + it->name;
    char name[DLOCK_NAME_MAX + 1];
    int root = strcmp(it->path, "/") == 0;
    /* only a path as names.h writes a name's is a lock (a peer's node may
     * be under the base too) */
    int named = rel[0] != '\0' &&
                dlock__zk_name_of(strcmp(z->base_path, "/") == 0, rel, name, sizeof name) &&
                strncmp(name, prefix, strlen(prefix)) == 0;
    int nr = it->sem ? 2 : 1, mutex = 0, rw = 0, sem = 0;

    for (int j = 0; j < nr; j++) {
        if (r[j].rc != ZOK && r[j].rc != ZNONODE)
            return dlock__zk_fail(r[j].rc, z->label, "list the locks");
    }
    if (it->sem) {
        int found = 0;
        for (int j = 0; j < nr; j++) {
            for (int i = 0; i < r[j].nchildren; i++)
                found |= dlock__zk_contender(r[j].children[i]) >= 0;
        }
        *stop = found && sink(arg, name, DLOCK__SEMAPHORE) != 0;
        return DLOCK_OK;
    }
    for (int i = 0; i < r->nchildren; i++) {
        int m = dlock__zk_contender(r->children[i]);
        mutex |= m == DLOCK__ZK_LOCK || m == DLOCK__ZK_KAZOO;
        rw |= m == DLOCK__ZK_READ || m == DLOCK__ZK_WRITE;
        sem |= strcmp(r->children[i], "leases") == 0;
    }
    if ((named && mutex && sink(arg, name, DLOCK__MUTEX) != 0) ||
        (named && rw && sink(arg, name, DLOCK__WRITE) != 0)) {
        *stop = 1;
        return DLOCK_OK;
    }
    int rc = DLOCK_OK;
    if (named && sem)
        rc = walk_push(w, strdup(it->path), it->name, 1);
    for (int i = 0; i < r->nchildren && rc == DLOCK_OK; i++) {
        const char *child = r->children[i];
        /* a name's part is never "leases" or "locks" (names.h): those are
         * a semaphore's own */
        if (dlock__zk_contender(child) >= 0 || (root && strcmp(child, "zookeeper") == 0) ||
            strcmp(child, "leases") == 0 || strcmp(child, "locks") == 0)
            continue;
        char path[PATH_MAX_LEN];
        int len = snprintf(path, sizeof path, "%s/%s", root ? "" : it->path, child);
        if (len < 0 || (size_t) len + 64 > PATH_MAX_LEN)
            continue; /* longer than a lock's path may be, and so is all under it */
        /* the child's name: its path past the base, and the '/' after it */
        size_t at = rel[0] != '\0' ? it->name : it->name + (root ? 0 : 1);
        char text[DLOCK_NAME_MAX + 1];
        if (dlock__zk_no_name_under(path + at, text, sizeof text) || !may_match(text, prefix))
            continue;
        rc = walk_push(w, strdup(path), at, 0);
    }
    return rc;
}

int dlock__zk_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline)
{
    zstore *z = ZSTORE(s);
    dlock__zconn *c = NULL;
    walk w = {0};
    size_t listed = 0;
    int stop = 0;
    int rc = dlock__zk_get_conn(z, dlock__zk_deadline_of(z, deadline), &c);

    if (rc != DLOCK_OK)
        return rc;
    rc = walk_push(&w, strdup(z->base_path), strlen(z->base_path), 0);
    while (rc == DLOCK_OK && !stop && w.n > 0) {
        walk_item batch[LIST_BATCH];
        dlock__zreq *reqs[2 * LIST_BATCH];
        int sent[2 * LIST_BATCH];
        size_t nb = 0, need = 0;

        if (dlock__now_us() >= deadline) {
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: listing locks took too long", z->label);
            break;
        }
        for (size_t i = w.n; i > 0 && nb < LIST_BATCH; i--) {
            need += w.items[i - 1].sem ? 2 : 1;
            nb++;
        }
        if (listed + need > LIST_MAX_NODES) {
            rc = dlock__fail(DLOCK_EINVAL,
                             "%s: more than %d nodes to walk under %s: give a longer prefix",
                             z->label, LIST_MAX_NODES, z->base_path);
            break;
        }
        listed += need;
        for (size_t i = 0; i < nb; i++) {
            walk_item *it = &batch[i];
            char path[PATH_MAX_LEN];
            *it = w.items[--w.n];
            for (int j = 0; j < (it->sem ? 2 : 1); j++) {
                snprintf(path, sizeof path, "%s%s", it->path,
                         !it->sem ? ""
                         : j == 0 ? "/leases"
                                  : "/locks");
                sent[2 * i + j] = ZOK;
                reqs[2 * i + j] = dlock__zreq_children(c, path, &sent[2 * i + j]);
            }
        }
        /* every reply is collected, also after an error or a stop: each
         * request is consumed once */
        int64_t step = dlock__zk_deadline_of(z, deadline);
        for (size_t i = 0; i < nb; i++) {
            dlock__zresult r[2];
            int nr = batch[i].sem ? 2 : 1;
            memset(r, 0, sizeof r);
            for (int j = 0; j < nr; j++)
                dlock__zk_run(reqs[2 * i + j], sent[2 * i + j], rc == DLOCK_OK && !stop ? step : 0,
                              &r[j]);
            if (rc == DLOCK_OK && !stop)
                rc = visit(z, &w, &batch[i], r, prefix, sink, arg, &stop);
            for (int j = 0; j < nr; j++)
                dlock__zresult_clear(&r[j]);
            free(batch[i].path);
        }
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.items[i].path);
    free(w.items);
    dlock__zconn_unref(c);
    return rc;
}
