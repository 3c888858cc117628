/* SPDX-License-Identifier: MIT */
/* kinds.c - one name, one lock: where a contender stands against the
 * other kinds of lock of its name (mutex, read-write lock, semaphore). */
#include "internal.h"

#include "../../base/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * One name is one lock: the mutex, the read-write lock and the semaphore of
 * a name exclude each other, first come, first served (a contender waits
 * for every contender of another kind that came before it, holder or
 * waiter, as it does for its own kind's). The mutex's and the read-write
 * lock's nodes share the name's path, so their sequence orders them
 * (dlock__zk_rank_all, dlock__zk_standing in lock.c). The semaphore's
 * nodes are one level down (locks/ to be admitted, leases/ to hold), so between the semaphore and
 * the other kinds the order is the creation zxid, ZooKeeper's order of
 * every write: a semaphore contender's place is its admission node's.
 *
 *  - A mutex or read-write contender that no node of the path keeps out
 *    waits for any lease node (a holder, or the contender admitted and
 *    waiting for room) and for an admission node made before its own node
 *    (dlock__zk_semaphore_ahead). It lists locks/ before leases/: a semaphore
 *    contender deletes its admission node only after its lease nodes are
 *    made, so one of the two lists shows it.
 *  - A semaphore contender at the head of admission, before it makes its
 *    lease nodes, waits for the oldest mutex or read-write node of the
 *    path if that was made before its admission node (dlock__zk_kinds_ahead).
 *
 * Each side makes its node first and looks after, so of two contenders the
 * later one sees the earlier; neither waits for a later one, so two never
 * wait for each other. A semaphore contender makes lease nodes only once it
 * found no older node of another kind, so a lease node keeps out only those
 * that came after its holder. A lock used as one kind only pays nothing for
 * this: a mutex's listing (sent with its create) shows no locks/ or leases/,
 * and a semaphore's listing of the path goes with its admission listing.
 * Curator's and kazoo's recipes look only at their own kind: they do not
 * wait for dlock's other kinds (docs/zookeeper.md). A contender that finds
 * another kind at the head reads those holders' data
 * (dlock__zk_owner_leads, ops.c): if it is its own owner's, it would wait for itself, and it is
 * EDEADLK.
 */

/* The kind of lock a child of a lock's path contends for (SAME: none). */
enum dlock__held_as dlock__zk_kind_of_node(const char *child)
{
    switch (dlock__zk_contender(child)) {
    case DLOCK__ZK_LOCK:
    case DLOCK__ZK_KAZOO:
        return DLOCK__HELD_AS_MUTEX;
    case DLOCK__ZK_READ:
    case DLOCK__ZK_WRITE:
        return DLOCK__HELD_AS_RW;
    default:
        return DLOCK__HELD_AS_SAME;
    }
}

enum dlock__held_as dlock__zk_kind_of_lock(const zlock *l)
{
    if (l->base.spec.kind == DLOCK__SEMAPHORE)
        return DLOCK__HELD_AS_SEMAPHORE;
    return dlock__zk_is_rw(l) ? DLOCK__HELD_AS_RW : DLOCK__HELD_AS_MUTEX;
}

/* Whether a lock path's children include a semaphore's (locks/, leases/). */
int dlock__zk_has_semaphore(char **children, int n)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(children[i], "locks") == 0 || strcmp(children[i], "leases") == 0)
            return 1;
    }
    return 0;
}

/* A mutex or read-write contender whose node was made at zxid mine, and
 * which no node of the path keeps out: the node of the semaphore of its
 * name to wait for (full path into blocker, PATH_MAX_LEN bytes), or "".
 * A ZooKeeper code; ZNONODE: a node went while we looked, look again. */
int dlock__zk_semaphore_ahead(const zlock *l, dlock__zconn *c, int64_t mine, int64_t deadline,
                              char *blocker)
{
    char locks[PATH_MAX_LEN], leases[PATH_MAX_LEN];
    dlock__zresult adm, held, st;
    int asent = ZOK, lsent = ZOK;

    blocker[0] = '\0';
    snprintf(locks, sizeof locks, "%s/locks", l->path);
    snprintf(leases, sizeof leases, "%s/leases", l->path);
    /* admission first (see above), both in one round trip */
    dlock__zreq *aq = dlock__zreq_children(c, locks, &asent);
    dlock__zreq *lq = dlock__zreq_children(c, leases, &lsent);
    int azrc = dlock__zk_run(aq, asent, deadline, &adm);
    int lzrc = dlock__zk_run(lq, lsent, deadline, &held);
    int zrc = azrc != ZOK && azrc != ZNONODE ? azrc : lzrc != ZOK && lzrc != ZNONODE ? lzrc : ZOK;
    memset(&st, 0, sizeof st);
    if (zrc != ZOK)
        goto out;
    dlock__zk_rank_all(held.children, (size_t) held.nchildren);
    dlock__zk_rank_all(adm.children, (size_t) adm.nchildren);
    if (held.nchildren > 0 && dlock__zk_contender(held.children[0]) >= 0) {
        snprintf(blocker, PATH_MAX_LEN, "%s/leases/%s", l->path, held.children[0]);
    } else if (adm.nchildren > 0 && dlock__zk_contender(adm.children[0]) >= 0) {
        /* the oldest admission node (a path's sequence follows its creates) */
        char oldest[PATH_MAX_LEN];
        snprintf(oldest, sizeof oldest, "%s/locks/%s", l->path, adm.children[0]);
        zrc = dlock__zk_exists(c, oldest, deadline, &st);
        if (zrc == ZOK && st.stat.czxid < mine)
            snprintf(blocker, PATH_MAX_LEN, "%s", oldest);
    }
out:
    dlock__zresult_clear(&adm);
    dlock__zresult_clear(&held);
    dlock__zresult_clear(&st);
    return zrc;
}

/* A semaphore contender at the head of admission, whose admission node was
 * made at zxid mine: the oldest mutex or read-write contender among
 * children (the name's path's), if it came first (full path into blocker,
 * PATH_MAX_LEN bytes, its kind in *held_as), else "". A ZooKeeper code;
 * ZNONODE: it went while we looked, look again. */
int dlock__zk_kinds_ahead(const zlock *l, dlock__zconn *c, char **children, int n, int64_t mine,
                          int64_t deadline, char *blocker, enum dlock__held_as *held_as)
{
    dlock__zresult st;
    int first = -1, zrc;

    blocker[0] = '\0';
    dlock__zk_rank_all(children, (size_t) n);
    for (int i = 0; i < n && first < 0; i++) {
        if (dlock__zk_kind_of_node(children[i]) != DLOCK__HELD_AS_SAME)
            first = i;
    }
    if (first < 0)
        return ZOK;
    char oldest[PATH_MAX_LEN];
    snprintf(oldest, sizeof oldest, "%s/%s", l->path, children[first]);
    zrc = dlock__zk_exists(c, oldest, deadline, &st);
    if (zrc == ZOK && st.stat.czxid < mine) {
        snprintf(blocker, PATH_MAX_LEN, "%s", oldest);
        *held_as = dlock__zk_kind_of_node(children[first]);
    }
    dlock__zresult_clear(&st);
    return zrc;
}
