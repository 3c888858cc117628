/* SPDX-License-Identifier: MIT */
/* multi.c - a multi-lock's members taken in one transaction. */
#include "internal.h"

#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A multi-lock's members in one step (acquire_many): every member's
 * contender node is created in one transaction (zoo_multi), so a free
 * multi-lock is one write; then, pipelined, each member's children and each
 * new node's stat. A member is taken when its node ranks first (Curator's
 * ranking, as for a single mutex), with the fence of its node, as a single
 * mutex's. All first: the grant, each member bound to the session. Else
 * every node goes again in one transaction, and DLOCK_EBUSY names a member
 * held by someone else: the core then takes the members one by one in its
 * order, waiting.
 *
 * Two multi-locks do not block each other here: the transaction that came
 * first has the lower sequence number under every path they share, so the
 * later one finds itself behind and gives all back (and the core's one by
 * one order keeps them from deadlocking after that).
 *
 * Failures. A missing lock path (or parent of it) fails the whole
 * transaction (ZNONODE): every member's path is made (pipelined) and the
 * transaction sent again, at most three times as a single create. A
 * transaction whose outcome is unknown (no reply in time, the connection
 * lost) is a single create's case (conn.h): the nodes it made, if any, are
 * found by their uuids and deleted in the background, never adopted. That,
 * a session that ended, and a server's refusal on one member are
 * DLOCK_ENOTSUP: the core takes the members one by one, whose waits ride
 * out an unreachable store and whose errors name their member.
 */

#define MULTI_MAX 256 /* members in one transaction (a request is at most 1 MiB) */

/* Makes every lock path of ls and its missing ancestors as containers (as
 * dlock__zk_make_parents), all requests pipelined: ZooKeeper applies a session's
 * requests in order, so a parent is made before its child. */
static int make_paths(dlock__zconn *c, dlock__store_lock *const *ls, size_t n, int64_t deadline)
{
    size_t cap = 0, count = 0;
    char **made = NULL;
    dlock__zreq **reqs = NULL;
    int *sent = NULL, zrc = ZOK;

    for (size_t i = 0; i < n; i++) {
        for (const char *p = ZLOCK(ls[i])->path; *p != '\0'; p++)
            cap += *p == '/';
    }
    made = calloc(cap, sizeof *made);
    reqs = calloc(cap, sizeof *reqs);
    sent = calloc(cap, sizeof *sent);
    if (made == NULL || reqs == NULL || sent == NULL) {
        zrc = ZSYSTEMERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *path = ZLOCK(ls[i])->path;
        for (const char *p = strchr(path + 1, '/');; p = strchr(p + 1, '/')) {
            size_t len = p != NULL ? (size_t) (p - path) : strlen(path);
            int seen = 0;
            for (size_t k = 0; k < count && !seen; k++)
                seen = strlen(made[k]) == len && strncmp(made[k], path, len) == 0;
            if (!seen && count < cap && (made[count] = strndup(path, len)) != NULL) {
                sent[count] = ZOK;
                reqs[count] =
                    dlock__zreq_create(c, made[count], NULL, -1, ZOO_CONTAINER, &sent[count]);
                count++;
            }
            if (p == NULL)
                break;
        }
    }
    /* every reply is collected, also after an error: each request is
     * consumed once */
    for (size_t k = 0; k < count; k++) {
        dlock__zresult r;
        int one = dlock__zk_run(reqs[k], sent[k], zrc == ZOK ? deadline : 0, &r);
        dlock__zresult_clear(&r);
        if (one != ZOK && one != ZNODEEXISTS && zrc == ZOK)
            zrc = one;
    }
out:
    for (size_t k = 0; k < count; k++)
        free(made[k]);
    free(made);
    free(reqs);
    free(sent);
    return zrc;
}

/* Deletes nodes [0, n) of ours in one transaction; what it does not
 * confirm is deleted one by one in the background. Frees the names. */
static void delete_nodes(dlock__zconn *c, char **nodes, size_t n, int64_t deadline)
{
    zoo_op_t *ops = calloc(n, sizeof *ops);
    int zrc = ZSYSTEMERROR;

    if (ops != NULL) {
        for (size_t i = 0; i < n; i++)
            zoo_delete_op_init(&ops[i], nodes[i], -1);
        dlock__zresult r;
        dlock__zreq *q = dlock__zreq_multi(c, (int) n, ops, &zrc);
        zrc = dlock__zk_run(q, zrc, deadline, &r);
        dlock__zresult_clear(&r);
        free(ops);
    }
    for (size_t i = 0; i < n; i++) {
        if (zrc != ZOK && !dlock__zk_session_over(zrc) && dlock__zconn_alive(c))
            dlock__zconn_forget(c, nodes[i]);
        free(nodes[i]);
        nodes[i] = NULL;
    }
}

/* Creates a node in each of ls's paths in one transaction: *made (the
 * caller's) names them. A ZooKeeper code. */
static int create_nodes(zstore *z, dlock__zconn *c, dlock__store_lock *const *ls, size_t n,
                        const char *token, int64_t deadline, char **made)
{
    char data[NODE_DATA_MAX], prefix[96];
    zoo_op_t *ops = calloc(n, sizeof *ops);
    char(*paths)[PATH_MAX_LEN] = calloc(n, sizeof *paths);
    int zrc = ZSYSTEMERROR;

    if (ops == NULL || paths == NULL)
        goto out;
    dlock__zk_node_data(z, token, data, sizeof data);
    for (int tries = 0; tries < 3; tries++) {
        for (size_t i = 0; i < n; i++) {
            zlock *l = ZLOCK(ls[i]);
            if (dlock__zk_uuid(l->uuid) != 0) {
                zrc = ZSYSTEMERROR;
                goto out;
            }
            dlock__zk_node_prefix(prefix, sizeof prefix, l->uuid, DLOCK__ZK_LOCK);
            snprintf(paths[i], PATH_MAX_LEN, "%s/%s", l->path, prefix);
            zoo_create_op_init(&ops[i], paths[i], data, (int) strlen(data), &ZOO_OPEN_ACL_UNSAFE,
                               ZOO_EPHEMERAL_SEQUENTIAL, NULL, PATH_MAX_LEN);
        }
        dlock__zresult r;
        zrc = ZOK;
        dlock__zreq *q = dlock__zreq_multi(c, (int) n, ops, &zrc);
        zrc = dlock__zk_run(q, zrc, deadline, &r);
        if (zrc == ZOK) {
            for (size_t i = 0; i < n; i++) {
                made[i] = r.op_paths[i];
                r.op_paths[i] = NULL;
            }
        }
        dlock__zresult_clear(&r);
        if (zrc != ZNONODE)
            break;
        /* a lock's path (or a parent) is missing, as for a single create
         * (containers are reaped once empty, also between making them and
         * this) */
        zrc = make_paths(c, ls, n, deadline);
        if (zrc != ZOK)
            break;
        zrc = ZNONODE;
    }
out:
    free(ops);
    free(paths);
    return zrc;
}

int dlock__zk_acquire_many(dlock__store *s, dlock__store_lock *const *ls, size_t n,
                           const char *token, int64_t lease_ms, int64_t deadline_us,
                           uint64_t *fences, dlock__session **sessions, size_t *busy,
                           int64_t *busy_ttl_ms)
{
    zstore *z = ZSTORE(s);
    int64_t deadline = dlock__zk_deadline_of(z, deadline_us);
    dlock__zconn *c = NULL;
    char **made = NULL;
    dlock__zreq **reqs = NULL;
    struct Stat *stats = NULL; /* of the nodes made */
    int *sent = NULL, found_busy = 0;
    int rc = DLOCK_OK;

    (void) lease_ms; /* the session's */
    if (n > MULTI_MAX)
        return DLOCK_ENOTSUP;
    for (size_t i = 0; i < n; i++) {
        zlock *l = ZLOCK(ls[i]);
        pthread_mutex_lock(&l->mu);
        int fresh = l->node == NULL && l->nleases == 0;
        pthread_mutex_unlock(&l->mu);
        if (l->base.spec.kind != DLOCK__MUTEX || l->base.spec.simple || !fresh)
            return DLOCK_ENOTSUP; /* what a single attempt knows how to go on with */
    }
    made = calloc(n, sizeof *made);
    reqs = calloc(2 * n, sizeof *reqs);
    sent = calloc(2 * n, sizeof *sent);
    stats = calloc(n, sizeof *stats);
    if (made == NULL || reqs == NULL || sent == NULL || stats == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    rc = dlock__zk_get_conn(z, deadline, &c);
    if (rc != DLOCK_OK)
        goto out;
    dlock__zconn_kick(c);
    int zrc = create_nodes(z, c, ls, n, token, deadline, made);
    if (zrc != ZOK) {
        rc = zrc == ZNONODE
                 ? dlock__fail(DLOCK_EUNREACHABLE, "%s: a lock's path keeps disappearing", z->label)
                 : dlock__zk_fail(zrc, z->label, "create a multi-lock's nodes");
        goto out;
    }
    /* where each node stands, and its stat (the fence): every request
     * first (ZooKeeper pipelines them), then every reply */
    for (size_t i = 0; i < n; i++) {
        sent[2 * i] = sent[2 * i + 1] = ZOK;
        reqs[2 * i] = dlock__zreq_children(c, ZLOCK(ls[i])->path, &sent[2 * i]);
        reqs[2 * i + 1] = dlock__zreq_exists(c, made[i], &sent[2 * i + 1]);
    }
    for (size_t i = 0; i < n; i++) {
        zlock *l = ZLOCK(ls[i]);
        dlock__zresult kids, st;
        int kzrc = dlock__zk_run(reqs[2 * i], sent[2 * i], rc == DLOCK_OK ? deadline : 0, &kids);
        int szrc =
            dlock__zk_run(reqs[2 * i + 1], sent[2 * i + 1], rc == DLOCK_OK ? deadline : 0, &st);
        if (rc == DLOCK_OK && (kzrc != ZOK || szrc != ZOK)) {
            /* our node gone (an operator) is a failure too: one by one */
            rc =
                dlock__zk_fail(kzrc != ZOK ? kzrc : szrc, z->label, "look at a multi-lock's nodes");
        } else if (rc == DLOCK_OK) {
            const char *ahead = NULL;
            enum dlock__held_as held_as;
            dlock__zk_rank_all(kids.children, (size_t) kids.nchildren);
            int me = dlock__zk_standing(z, l, kids.children, kids.nchildren,
                                        strrchr(made[i], '/') + 1, token, &ahead, &held_as);
            if (me < 0) {
                rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: %s is gone", z->label, made[i]);
            } else if (ahead == NULL && dlock__zk_has_semaphore(kids.children, kids.nchildren)) {
                /* the semaphore of that name may hold it: one by one */
                rc = DLOCK_ENOTSUP;
            } else if (ahead != NULL && !found_busy) {
                found_busy = 1;
                *busy = i;
            }
            fences[i] = dlock__zk_fence_of(&st.stat);
            stats[i] = st.stat;
        }
        dlock__zresult_clear(&kids);
        dlock__zresult_clear(&st);
    }
    if (rc == DLOCK_OK && found_busy) {
        *busy_ttl_ms = DLOCK__TTL_UNKNOWN;
        rc = DLOCK_EBUSY;
    }
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++) {
        sessions[i] = dlock__zconn_session_ref(c);
        if (sessions[i] == NULL)
            rc = dlock__zk_session_ended(z);
    }
    if (rc != DLOCK_OK) {
        for (size_t i = 0; i < n; i++) {
            dlock__session_unref(sessions[i]);
            sessions[i] = NULL;
        }
        /* none taken: nothing is left behind */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (made[i] != NULL)
                made[k++] = made[i];
        }
        if (k > 0)
            delete_nodes(c, made, k, dlock__zk_release_deadline(z, c, deadline_us));
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        dlock__zconn_ref(c);
        dlock__zk_set_node(ZLOCK(ls[i]), made[i], c, &stats[i]);
        made[i] = NULL;
    }
out:
    for (size_t i = 0; made != NULL && i < n; i++)
        free(made[i]);
    free(made);
    free(reqs);
    free(sent);
    free(stats);
    dlock__zconn_unref(c);
    /* not in one step now: the core takes them one by one (see above) */
    if (rc != DLOCK_OK && rc != DLOCK_EBUSY && rc != DLOCK_ENOMEM)
        rc = DLOCK_ENOTSUP;
    return rc;
}
