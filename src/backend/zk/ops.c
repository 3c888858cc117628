/* SPDX-License-Identifier: MIT */
/* ops.c - the operators' calls, read from the holders' nodes: query,
 * holders, force-unlock; and dlock__zk_owner_leads, acquire's check for an
 * owner that would wait for itself, which reads holders' nodes the same way. */
#include "internal.h"

#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The holders among sorted children: [0, *n). */
static int holders(const zlock *l, char **children, int n)
{
    if (n == 0)
        return 0;
    if (!dlock__zk_is_rw(l) || dlock__zk_is_writer(children[0]))
        return 1;
    int k = 0;
    while (k < n && !dlock__zk_is_writer(children[k]))
        k++;
    return k;
}

/* One holder's node, read. */
typedef struct held_node {
    dlock__zresult got; /* its get, the data split in place (split_data) */
    const char *owner;  /* into got: the owner token, "" if none */
    const char *info;   /* into got: its client's owner_info, NULL if none */
    unsigned permits;   /* a lease node of ours: the permits it declares; else 0 */
} held_node;

/* Who holds a lock now, as its nodes say. */
typedef struct holding {
    held_node *nodes; /* the holders' nodes in rank order (a semaphore: lease nodes) */
    int n;
    int exclusive;    /* nodes[0] is a mutex's holder or a writer */
    unsigned waiters; /* contenders not holding (a semaphore: its admission queue) */
    unsigned permits; /* a semaphore: the permits its dlock users declare, 0 if none */
} holding;

static void holding_clear(holding *h)
{
    for (int i = 0; i < h->n; i++)
        dlock__zresult_clear(&h->nodes[i].got);
    free(h->nodes);
    memset(h, 0, sizeof *h);
}

/* Splits a node's data in place (dlock__zk_node_data): returns the owner, the first
 * line (a lease node of ours: the token before " TAKE/PERMITS", *permits
 * set), and *info, what follows the newline. A peer's node has no newline
 * (Curator's holds its host's address, kazoo's an identifier): all of it is
 * the owner, and *info is NULL. */
static const char *split_data(char *data, int lease, const char **info, unsigned *permits)
{
    *info = NULL;
    *permits = 0;
    if (data == NULL)
        return "";
    char *nl = strchr(data, '\n');
    if (nl != NULL) {
        *nl = '\0';
        *info = nl + 1;
    }
    char *sp = lease ? strchr(data, ' ') : NULL;
    unsigned take = 0, declared = 0;
    char more;
    if (sp != NULL && sscanf(sp, " %u/%u%c", &take, &declared, &more) == 2 && declared > 0) {
        *sp = '\0';
        *permits = declared;
    }
    return data;
}

/* Reads the nodes dir/names[0..n) (pipelined) into h->nodes, lease nodes
 * if `lease`. A node gone meanwhile is left out: it holds nothing now. */
static int read_nodes(zstore *z, dlock__zconn *c, const char *dir, char **names, int n, int lease,
                      int64_t deadline, holding *h)
{
    dlock__zreq **reqs = calloc((size_t) n + 1, sizeof *reqs);
    int *sent = calloc((size_t) n + 1, sizeof *sent);
    int rc = DLOCK_OK;

    h->n = 0;
    h->nodes = calloc((size_t) n + 1, sizeof *h->nodes);
    if (reqs == NULL || sent == NULL || h->nodes == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        char node[PATH_MAX_LEN];
        snprintf(node, sizeof node, "%s/%s", dir, names[i]);
        sent[i] = ZOK;
        reqs[i] = dlock__zreq_get(c, node, &sent[i]);
    }
    /* every reply is collected, also after an error: each request is
     * consumed once */
    for (int i = 0; i < n; i++) {
        held_node *hn = &h->nodes[h->n];
        int zrc = dlock__zk_run(reqs[i], sent[i], rc == DLOCK_OK ? deadline : 0, &hn->got);
        if (zrc == ZOK) {
            hn->owner = split_data(hn->got.data, lease, &hn->info, &hn->permits);
            h->n++;
            continue;
        }
        dlock__zresult_clear(&hn->got);
        if (zrc != ZNONODE && rc == DLOCK_OK)
            rc = dlock__zk_fail(zrc, z->label, "read a holder's node");
    }
out:
    free(reqs);
    free(sent);
    return rc;
}

/* Whether token holds the name as the other kind that leads children (n,
 * all kinds ranked together, the asking contender at me > 0): an owner
 * asking for its name as another kind than it holds it (a handle made by
 * dlock_lock_dup) would wait for itself. Read only when another kind
 * leads: a name used as one kind pays nothing. The holders are the first
 * node, or the readers at the head, unless the semaphore of the name keeps
 * them out (they wait); their data starts with their owner's token. */
int dlock__zk_owner_leads(zstore *z, const zlock *l, dlock__zconn *c, char **children, int n,
                          int me, const char *token, int64_t deadline, int *leads)
{
    holding h;
    int64_t czxid = 0;
    int heads = 1;

    *leads = 0;
    memset(&h, 0, sizeof h);
    while (dlock__zk_contender(children[0]) == DLOCK__ZK_READ && heads < me &&
           dlock__zk_contender(children[heads]) == DLOCK__ZK_READ)
        heads++;
    int rc = read_nodes(z, c, l->path, children, heads, 0, deadline, &h);
    for (int i = 0; rc == DLOCK_OK && i < h.n && !*leads; i++) {
        *leads = strcmp(h.nodes[i].owner, token) == 0;
        czxid = h.nodes[i].got.stat.czxid;
    }
    holding_clear(&h);
    if (*leads && dlock__zk_has_semaphore(children, n)) {
        char blocker[PATH_MAX_LEN];
        int zrc = ZNONODE;
        for (int tries = 0; zrc == ZNONODE && tries < 3; tries++)
            zrc =
                dlock__zk_semaphore_ahead(l, c, czxid, deadline, blocker); /* ZNONODE: look again */
        if (zrc != ZOK)
            rc = dlock__zk_fail(zrc, z->label, "look at the semaphore of the same name");
        *leads = zrc == ZOK && blocker[0] == '\0';
    }
    return rc;
}

/* The holders of l now: a mutex's first node, a read-write lock's writer or
 * readers at the head, a semaphore's lease nodes but those of the
 * contender admitted and still waiting for room (they hold nothing yet). */
static int read_holders(zstore *z, zlock *l, dlock__zconn *c, int64_t deadline, holding *h)
{
    dlock__zresult r, w;
    char *admitted = NULL;
    int rc = DLOCK_OK, zrc, zrc2;

    memset(h, 0, sizeof *h);
    memset(&r, 0, sizeof r);
    memset(&w, 0, sizeof w);
    if (l->base.spec.kind != DLOCK__SEMAPHORE) {
        zrc = dlock__zk_children(c, l->path, deadline, &r);
        if (zrc != ZOK && zrc != ZNONODE) {
            rc = dlock__zk_fail(zrc, z->label, "list the lock's nodes");
            goto out;
        }
        int ranked = dlock__zk_rank_own(l, r.children, r.nchildren);
        int n = holders(l, r.children, ranked);
        h->exclusive = n > 0 && (!dlock__zk_is_rw(l) || dlock__zk_is_writer(r.children[0]));
        h->waiters = (unsigned) (ranked - n);
        rc = read_nodes(z, c, l->path, r.children, n, 0, deadline, h);
        goto out;
    }
    zrc = dlock__zk_children(c, l->leases_path, deadline, &r);
    zrc2 = dlock__zk_children(c, l->locks_path, deadline, &w);
    if ((zrc != ZOK && zrc != ZNONODE) || (zrc2 != ZOK && zrc2 != ZNONODE)) {
        rc = dlock__zk_fail(zrc != ZOK && zrc != ZNONODE ? zrc : zrc2, z->label,
                            "list the semaphore's nodes");
        goto out;
    }
    h->waiters = (unsigned) w.nchildren;
    if (w.nchildren > 0) {
        /* the first in the admission queue may have made its lease nodes
         * and wait for room: its owner */
        holding first;
        memset(&first, 0, sizeof first);
        dlock__zk_rank(w.children, (size_t) w.nchildren, dlock__zk_mutex_markers, 2);
        rc = read_nodes(z, c, l->locks_path, w.children, 1, 0, deadline, &first);
        if (rc == DLOCK_OK && first.n == 1) {
            admitted = strdup(first.nodes[0].owner);
            if (admitted == NULL)
                rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        holding_clear(&first);
        if (rc != DLOCK_OK)
            goto out;
    }
    rc = read_nodes(z, c, l->leases_path, r.children, r.nchildren, 1, deadline, h);
    int kept = 0;
    for (int i = 0; rc == DLOCK_OK && i < h->n; i++) {
        held_node *hn = &h->nodes[i];
        if (hn->permits > 0)
            h->permits = hn->permits;
        if (admitted != NULL && hn->permits > 0 && strcmp(hn->owner, admitted) == 0) {
            dlock__zresult_clear(&hn->got);
            continue;
        }
        h->nodes[kept++] = *hn;
    }
    if (rc == DLOCK_OK)
        h->n = kept;
out:
    if (rc != DLOCK_OK)
        holding_clear(h);
    free(admitted);
    dlock__zresult_clear(&r);
    dlock__zresult_clear(&w);
    return rc;
}

int dlock__zk_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zconn *c = NULL;
    holding h;
    int rc;

    memset(st, 0, sizeof *st);
    st->lease_ms = -1;
    rc = dlock__zk_open_call(z, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = read_holders(z, l, c, deadline, &h);
    dlock__zconn_unref(c);
    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < h.n; i++) {
        if (dlock__zk_fence_of(&h.nodes[i].got.stat) > st->last_fence)
            st->last_fence = dlock__zk_fence_of(&h.nodes[i].got.stat);
    }
    st->held = h.n > 0;
    st->waiters = h.waiters;
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        /* a permit per lease node; a holder of ours is the nodes of one
         * token, a peer's node is a holder of its own */
        st->permits = h.permits;
        st->permits_used = (unsigned) h.n;
        for (int i = 0; i < h.n; i++) {
            int seen = 0;
            for (int k = 0; k < i && !seen && h.nodes[i].permits > 0; k++)
                seen = h.nodes[k].permits > 0 && strcmp(h.nodes[k].owner, h.nodes[i].owner) == 0;
            st->shared += !seen;
        }
    } else {
        if (h.exclusive && h.n > 0)
            snprintf(st->owner, sizeof st->owner, "%s", h.nodes[0].owner);
        st->holds = st->owner[0] != '\0' ? 1 : 0;
        st->shared = dlock__zk_is_rw(l) && !h.exclusive ? (unsigned) h.n : 0;
    }
    holding_clear(&h);
    return DLOCK_OK;
}

/* Whether nodes a and b are holds of one holder: the same owner (a
 * reader's read holds, a semaphore holder's permits). A peer's lease node
 * is a holder of its own: Curator's data is its host's address. */
static int same_holder(const zlock *l, const held_node *a, const held_node *b)
{
    if (l->base.spec.kind == DLOCK__SEMAPHORE && (a->permits == 0 || b->permits == 0))
        return 0;
    return strcmp(a->owner, b->owner) == 0;
}

int dlock__zk_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zconn *c = NULL;
    holding h;
    int rc;

    rc = dlock__zk_open_call(z, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = read_holders(z, l, c, deadline, &h);
    dlock__zconn_unref(c);
    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < h.n; i++) {
        int seen = 0;
        unsigned count = 1;
        for (int k = 0; k < h.n && !seen; k++) {
            if (k != i && same_holder(l, &h.nodes[k], &h.nodes[i])) {
                seen = k < i;
                count++;
            }
        }
        if (seen)
            continue;
        dlock__holder_raw raw = {
            .owner = h.nodes[i].owner, .count = h.exclusive ? 1 : count, .info = h.nodes[i].info};
        if (sink(arg, &raw) != 0)
            break;
    }
    holding_clear(&h);
    return DLOCK_OK;
}

int dlock__zk_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zconn *c = NULL;
    dlock__zresult r;
    int rc;

    rc = dlock__zk_open_call(z, &deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    /* a semaphore's holders are every lease node */
    const char *dir = l->base.spec.kind == DLOCK__SEMAPHORE ? l->leases_path : l->path;
    int zrc = dlock__zk_children(c, dir, deadline, &r);
    if (zrc != ZOK && zrc != ZNONODE) {
        rc = dlock__zk_fail(zrc, z->label, "list the lock's nodes");
        goto out;
    }
    int ranked = dlock__zk_rank_own(l, r.children, r.nchildren);
    int n = l->base.spec.kind == DLOCK__SEMAPHORE ? ranked : holders(l, r.children, ranked);
    for (int i = 0; i < n && rc == DLOCK_OK; i++) {
        char node[PATH_MAX_LEN];
        snprintf(node, sizeof node, "%s/%s", dir, r.children[i]);
        zrc = dlock__zk_delete(c, node, deadline);
        if (zrc != ZOK && zrc != ZNONODE)
            rc = dlock__zk_fail(zrc, z->label, "delete the holder's node");
    }
out:
    dlock__zresult_clear(&r);
    dlock__zconn_unref(c);
    return rc;
}
