/* SPDX-License-Identifier: MIT */
/* sem.c - the semaphore (Curator's InterProcessSemaphoreV2): admission,
 * lease nodes, release. */
#include "internal.h"

#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Curator's InterProcessSemaphoreV2 on PATH: an InterProcessMutex on
 * PATH/locks admits one contender at a time; the admitted one creates its
 * lease node(s) PATH/leases/_c_<uuid>-lease-<seq>, waits (a children watch
 * on leases/) until leases/ has at most `permits` children, and then lets
 * the next one in. A holder is its lease nodes; a release deletes them.
 * Curator takes n leases one admission each; dlock takes its `take` leases
 * in one admission, which only makes the others wait a little longer: both
 * count every child of leases/, so they count against each other. Holders
 * never have more than `permits` nodes between them: a contender goes in
 * only when every existing lease node and its own fit. Lease nodes of ours
 * hold "<token> <take>/<permits>", so that users disagreeing on permits are
 * told (Curator's hold its host's address and cannot be).
 */

/* Deletes the admission node and the lease nodes (in the background if
 * need be): the contender leaves. */
void dlock__zk_sem_give_up(zstore *z, zlock *l, int64_t deadline)
{
    char *node;
    dlock__zconn *c, *lc;
    unsigned n;

    dlock__zk_take_node(l, &node, &c);
    char **leases = dlock__zk_take_leases(l, &n, &lc);
    for (unsigned i = 0; i < n; i++) {
        dlock__zconn_ref(lc);
        dlock__zk_delete_node(z, lc, leases[i], deadline);
    }
    free(leases);
    dlock__zconn_unref(lc);
    if (node != NULL)
        dlock__zk_delete_node(z, c, node, deadline);
}

/* Whether a lease node's data says another number of permits (*other). */
static int other_permits(const char *data, unsigned permits, unsigned *other)
{
    unsigned take = 0, p = 0;
    char token[33];
    if (data == NULL || sscanf(data, "%32[0-9a-f] %u/%u", token, &take, &p) != 3 || p == 0)
        return 0;
    *other = p;
    return p != permits;
}

/* Reads every lease node but ours (pipelined): DLOCK_EINVAL if a dlock
 * user declared another number of permits. */
static int sem_check_permits(zstore *z, zlock *l, dlock__zconn *c, char **children, int n,
                             int64_t deadline)
{
    dlock__zreq **reqs = calloc((size_t) n + 1, sizeof *reqs);
    unsigned other = 0;
    int rc = DLOCK_OK, differs = 0;

    if (reqs == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (dlock__zk_is_ours(children[i], l->uuid))
            continue;
        char node[PATH_MAX_LEN];
        int zrc = ZOK;
        snprintf(node, sizeof node, "%s/%s", l->leases_path, children[i]);
        reqs[i] = dlock__zreq_get(c, node, &zrc);
    }
    for (int i = 0; i < n; i++) {
        dlock__zresult r;
        if (reqs[i] == NULL)
            continue;
        if (dlock__zreq_wait(reqs[i], deadline, &r) == ZOK && !differs)
            differs = other_permits(r.data, l->base.spec.permits, &other);
        dlock__zresult_clear(&r);
    }
    free(reqs);
    if (differs) {
        /* the name as the user gave it: the path after the base (as
         * escaped there, for a name with a '/') */
        size_t nb = strlen(z->base_path);
        const char *name = strncmp(l->path, z->base_path, nb) == 0 && l->path[nb] == '/'
                               ? l->path + nb + 1
                               : l->path;
        rc = dlock__fail(DLOCK_EINVAL,
                         "semaphore '%s' is in use with %u permits, not %u: every user of a "
                         "semaphore must give the same number",
                         name, other, l->base.spec.permits);
    }
    return rc;
}

static int sem_attempt(zstore *z, zlock *l, dlock__zconn *c, dlock__attempt *a, int64_t deadline)
{
    const unsigned take = l->base.spec.take, permits = l->base.spec.permits;
    char lease[96], data[NODE_DATA_MAX], admission[NODE_DATA_MAX];
    int rc;

    snprintf(lease, sizeof lease, "%s %u/%u", a->token, take, permits);
    dlock__zk_node_data(z, lease, data, sizeof data);
    dlock__zk_node_data(z, a->token, admission, sizeof admission);
    for (int round = 0; round < 8 + (int) take; round++) {
        a->held_as = DLOCK__HELD_AS_SAME;
        pthread_mutex_lock(&l->mu);
        int stale = (l->node != NULL || l->nleases > 0) && l->conn != c;
        char *adm = l->node != NULL ? strdup(l->node) : NULL;
        int64_t mine = l->czxid;
        unsigned nleases = l->nleases;
        pthread_mutex_unlock(&l->mu);
        if (stale) {
            /* made in a session that is gone: so are the nodes */
            dlock__zk_drop_node(l);
            free(adm);
            continue;
        }
        if (nleases < take) {
            char *made = NULL;
            struct Stat st;
            if (adm == NULL) {
                /* queue for admission */
                rc = dlock__zk_create_child(z, l, c, l->locks_path, DLOCK__ZK_LOCK, admission,
                                            deadline, &made, &st, NULL);
                if (rc != DLOCK_OK)
                    return rc;
                dlock__zconn_ref(c);
                dlock__zk_set_node(l, made, c, &st);
                continue;
            }
            /* the admission queue, and in the same round trip the name's
             * path: the other kinds' contenders */
            dlock__zresult r, kinds;
            int sent = ZOK, ksent = ZOK;
            dlock__zreq *aq = dlock__zreq_children(c, l->locks_path, &sent);
            dlock__zreq *kq = dlock__zreq_children(c, l->path, &ksent);
            int zrc = dlock__zk_run(aq, sent, deadline, &r);
            int kzrc = dlock__zk_run(kq, ksent, deadline, &kinds);
            if ((zrc != ZOK && zrc != ZNONODE) || (kzrc != ZOK && kzrc != ZNONODE)) {
                dlock__zresult_clear(&r);
                dlock__zresult_clear(&kinds);
                free(adm);
                return dlock__zk_fail(zrc != ZOK && zrc != ZNONODE ? zrc : kzrc, z->label,
                                      "list the semaphore's admission queue");
            }
            kzrc = ZOK; /* a path that is gone has no contenders */
            dlock__zk_rank(r.children, (size_t) r.nchildren, dlock__zk_mutex_markers, 2);
            int me = -1;
            for (int i = 0; i < r.nchildren; i++) {
                if (strcmp(r.children[i], strrchr(adm, '/') + 1) == 0)
                    me = i;
            }
            char ahead[PATH_MAX_LEN] = "";
            if (me > 0)
                snprintf(ahead, sizeof ahead, "%s/%s", l->locks_path, r.children[me - 1]);
            dlock__zresult_clear(&r);
            free(adm);
            if (me == 0) {
                /* first to be admitted: not before another kind's older
                 * contender is gone */
                kzrc = dlock__zk_kinds_ahead(l, c, kinds.children, kinds.nchildren, mine, deadline,
                                             ahead, &a->held_as);
            }
            dlock__zresult_clear(&kinds);
            if (kzrc == ZNONODE)
                continue;
            if (kzrc != ZOK)
                return dlock__zk_fail(kzrc, z->label, "look at the lock's other kinds");
            if (me < 0) {
                /* our admission node is gone (an operator): queue again */
                char *gone;
                dlock__zconn *in;
                dlock__zk_take_node(l, &gone, &in);
                free(gone);
                dlock__zconn_unref(in);
                continue;
            }
            if (ahead[0] != '\0') {
                a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
                if (!a->wait) {
                    dlock__zk_sem_give_up(z, l, deadline);
                    a->outcome = DLOCK__HELD;
                    a->next = DLOCK__NEXT_POLL;
                    return DLOCK_OK;
                }
                zrc = ZOK;
                dlock__zreq *q = dlock__zreq_watch(c, ahead, a->token, &zrc);
                zrc = dlock__zk_run(q, zrc, deadline, &r);
                dlock__zresult_clear(&r);
                if (zrc == ZNONODE)
                    continue;
                if (zrc != ZOK)
                    return dlock__zk_fail(zrc, z->label, "watch the node ahead");
                a->outcome = DLOCK__QUEUED;
                a->keep_place = 0; /* the session keeps it */
                return DLOCK_OK;
            }
            /* admitted: our lease nodes, all of them in this admission */
            while (nleases < take) {
                rc = dlock__zk_create_child(z, l, c, l->leases_path, DLOCK__ZK_LEASE, data,
                                            deadline, &made, &st, NULL);
                if (rc != DLOCK_OK)
                    return rc;
                pthread_mutex_lock(&l->mu);
                char **more = realloc(l->leases, (l->nleases + 1) * sizeof *more);
                if (more != NULL) {
                    l->leases = more;
                    l->leases[l->nleases++] = made;
                    made = NULL;
                    if (dlock__zk_fence_of(&st) > l->lease_fence)
                        l->lease_fence = dlock__zk_fence_of(&st);
                }
                nleases = l->nleases;
                pthread_mutex_unlock(&l->mu);
                if (made != NULL) {
                    dlock__zconn_ref(c);
                    dlock__zk_delete_node(z, c, made, deadline);
                    return dlock__fail(DLOCK_ENOMEM, "out of memory");
                }
            }
            continue;
        }
        free(adm);
        /* Every lease node of ours exists: count them all. A waiter sets a
         * children watch (woken by any release); only the admitted
         * contender waits here, so a release wakes one. */
        dlock__zresult r;
        int zrc = ZOK;
        dlock__zreq *q = a->wait ? dlock__zreq_watch_children(c, l->leases_path, a->token, &zrc)
                                 : dlock__zreq_children(c, l->leases_path, &zrc);
        zrc = dlock__zk_run(q, zrc, deadline, &r);
        if (zrc != ZOK && zrc != ZNONODE) {
            dlock__zresult_clear(&r);
            return dlock__zk_fail(zrc, z->label, "list the semaphore's leases");
        }
        unsigned found = 0;
        uint64_t fence = 0;
        pthread_mutex_lock(&l->mu);
        for (unsigned k = 0; k < l->nleases; k++) {
            const char *name = strrchr(l->leases[k], '/') + 1;
            for (int i = 0; i < r.nchildren; i++) {
                if (strcmp(r.children[i], name) == 0) {
                    found++;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&l->mu);
        if (found < take) {
            /* a lease node of ours is gone (an operator): start again */
            dlock__zresult_clear(&r);
            dlock__zk_sem_give_up(z, l, deadline);
            continue;
        }
        rc = sem_check_permits(z, l, c, r.children, r.nchildren, deadline);
        int fits = r.nchildren <= (int) permits;
        dlock__zresult_clear(&r);
        if (rc != DLOCK_OK || (!fits && !a->wait)) {
            dlock__zk_sem_give_up(z, l, deadline);
            if (rc != DLOCK_OK)
                return rc;
            a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_POLL;
            return DLOCK_OK;
        }
        if (!fits) {
            a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
            a->outcome = DLOCK__QUEUED;
            a->keep_place = 0;
            return DLOCK_OK;
        }
        /* in: let the next contender into admission */
        char *node;
        dlock__zconn *in;
        dlock__zk_take_node(l, &node, &in);
        if (node != NULL)
            dlock__zk_delete_node(z, in, node, deadline);
        /* the fence: the newest lease node's, from its create (never 0, as
         * one asked for again could be when the server does not answer) */
        pthread_mutex_lock(&l->mu);
        fence = l->lease_fence;
        l->fence = fence;
        pthread_mutex_unlock(&l->mu);
        a->session = dlock__zconn_session_ref(c);
        if (a->session == NULL) {
            dlock__zk_drop_node(l); /* its nodes went with it */
            return dlock__zk_session_ended(z);
        }
        a->outcome = DLOCK__TAKEN;
        a->fence = fence;
        return DLOCK_OK;
    }
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: the semaphore's nodes keep changing under us",
                       z->label);
}

int dlock__zk_sem_acquire(zstore *z, zlock *l, dlock__zconn *c, dlock__attempt *a, int64_t deadline)
{
    int rc = sem_attempt(z, l, c, a, deadline);
    if (rc != DLOCK_OK && !a->wait)
        dlock__zk_sem_give_up(z, l, deadline); /* a try that failed half way leaves nothing */
    return rc;
}

/* Releases a semaphore's permits: its lease nodes. */
int dlock__zk_sem_release(zstore *z, zlock *l, int64_t deadline)
{
    dlock__zconn *c;
    unsigned n;
    char **leases = dlock__zk_take_leases(l, &n, &c);
    int gone = 0, unconfirmed = ZOK, alive = c != NULL && dlock__zconn_alive(c);

    deadline = dlock__zk_release_deadline(z, c, deadline);
    if (n == 0)
        return dlock__fail(DLOCK_ELOST, "%s: semaphore '%s' is not held", z->label, l->path);
    for (unsigned i = 0; i < n; i++) {
        dlock__zconn_ref(c);
        int zrc = dlock__zk_delete_node(z, c, leases[i], deadline);
        gone |= zrc == ZNONODE || (zrc != ZOK && (!alive || dlock__zk_session_over(zrc)));
        if (zrc != ZOK && zrc != ZNONODE)
            unconfirmed = zrc;
    }
    free(leases);
    dlock__zconn_unref(c);
    if (gone)
        return dlock__fail(DLOCK_ELOST,
                           "%s: semaphore '%s': a lease node is gone (removed, or its "
                           "session ended)",
                           z->label, l->path);
    if (unconfirmed != ZOK) {
        dlock__zk_fail(unconfirmed, z->label, "delete a lease node");
        return dlock__fail_context(DLOCK_EUNREACHABLE,
                                   "semaphore '%s': the release is not confirmed; its lease "
                                   "nodes are deleted in the background",
                                   l->path);
    }
    return DLOCK_OK;
}
