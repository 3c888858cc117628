/* SPDX-License-Identifier: MIT */
/* lock.c - one lock of one handle: acquire (a mutex or a read-write lock;
 * a semaphore's is sem.c's), cancel, release, extend, and the renewal's
 * check of every hold. */
#include "internal.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- acquire */

/*
 * Where our node stands among the children of the lock's path, ranked by
 * dlock__zk_rank_all (every kind's contenders together: one name is one
 * lock): -1 if it is not among them, else its index; *ahead is the child to
 * watch (NULL: no contender of the path keeps us out), and *held_as the
 * kind of the first contender when that is another kind than ours.
 */
int dlock__zk_standing(zstore *z, const zlock *l, char **children, int n, const char *ours,
                       const char *token, const char **ahead, enum dlock__held_as *held_as)
{
    int me = -1;
    *ahead = NULL;
    *held_as = DLOCK__HELD_AS_SAME;
    for (int i = 0; i < n; i++) {
        if (strcmp(children[i], ours) == 0)
            me = i;
    }
    if (me < 0)
        return -1;
    if (me > 0 && dlock__zk_kind_of_node(children[0]) != dlock__zk_kind_of_lock(l))
        *held_as = dlock__zk_kind_of_node(children[0]);
    if (l->base.spec.kind != DLOCK__READ) {
        if (me > 0)
            *ahead = children[me - 1];
        return me;
    }
    /* A reader holds unless a writer or a mutex contender ranks ahead of it
     * (its own write hold aside: a downgrade); it watches the nearest. */
    for (int i = me - 1; i >= 0; i--) {
        if (dlock__zk_contender(children[i]) == DLOCK__ZK_READ)
            continue;
        char node[PATH_MAX_LEN];
        snprintf(node, sizeof node, "%s/%s", l->path, children[i]);
        if (dlock__zk_own_write_hold(z, node, token))
            continue;
        *ahead = children[i];
        break;
    }
    return me;
}

int dlock__zk_acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *a)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    int64_t deadline = a->deadline_us;
    dlock__zconn *c = NULL;
    dlock__zreq *listing = NULL; /* the children, asked for right behind our create */
    int rc = dlock__zk_open_call(z, &deadline, &c);

    if (rc != DLOCK_OK)
        return rc;
    dlock__zconn_kick(c);
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        rc = dlock__zk_sem_acquire(z, l, c, a, deadline);
        goto out;
    }
    if (l->base.spec.kind == DLOCK__WRITE && dlock__zk_own_read_hold(z, l->path, a->token)) {
        rc = dlock__fail(DLOCK_EDEADLK,
                         "this owner holds the read lock: taking the write lock too would wait "
                         "for itself (release the read lock first; upgrades are refused)");
        goto out;
    }
    for (int round = 0; round < 8; round++) {
        pthread_mutex_lock(&l->mu);
        int stale = l->node != NULL && l->conn != c;
        char *node = l->node != NULL ? strdup(l->node) : NULL;
        int64_t mine = l->czxid;
        pthread_mutex_unlock(&l->mu);
        if (stale) {
            /* made in a session that is gone: so is the node */
            dlock__zk_drop_node(l);
            free(node);
            node = NULL;
        }
        if (node == NULL) {
            char *made = NULL;
            struct Stat st;
            char data[NODE_DATA_MAX];
            dlock__zk_node_data(z, a->token, data, sizeof data);
            rc = dlock__zk_create_child(z, l, c, l->path, dlock__zk_marker_of(l), data, deadline,
                                        &made, &st, &listing);
            if (rc != DLOCK_OK)
                goto out;
            dlock__zconn_ref(c);
            dlock__zk_set_node(l, made, c, &st);
            continue;
        }
        dlock__zresult r;
        int listed_early = listing != NULL;
        int zrc = listed_early ? dlock__zreq_wait(listing, deadline, &r)
                               : dlock__zk_children(c, l->path, deadline, &r);
        listing = NULL;
        if (zrc != ZOK && zrc != ZNONODE) {
            dlock__zresult_clear(&r);
            free(node);
            rc = dlock__zk_fail(zrc, z->label, "list the lock's nodes");
            goto out;
        }
        dlock__zk_rank_all(r.children, (size_t) r.nchildren);
        const char *ahead = NULL;
        enum dlock__held_as held_as;
        int me = dlock__zk_standing(z, l, r.children, r.nchildren, strrchr(node, '/') + 1, a->token,
                                    &ahead, &held_as);
        if (me < 0 && listed_early) {
            /* not in the listing sent behind its create: not trusted, list again */
            dlock__zresult_clear(&r);
            free(node);
            continue;
        }
        if (me < 0) {
            /* our node is gone (removed by an operator): make another */
            dlock__zresult_clear(&r);
            free(node);
            dlock__zk_drop_node(l);
            continue;
        }
        int self = 0;
        rc = held_as == DLOCK__HELD_AS_SAME
                 ? DLOCK_OK
                 : dlock__zk_owner_leads(z, l, c, r.children, r.nchildren, me, a->token, deadline,
                                         &self);
        if (rc != DLOCK_OK || self) {
            dlock__zresult_clear(&r);
            free(node);
            if (self) {
                char *ours;
                dlock__zconn *in;
                dlock__zk_take_node(l, &ours, &in);
                dlock__zk_delete_node(z, in, ours, deadline);
                rc = dlock__fail(DLOCK_EDEADLK,
                                 "this owner holds the name as another kind of lock: asking for "
                                 "it as this kind would wait for itself (one name is one lock)");
            }
            goto out;
        }
        char watched[PATH_MAX_LEN] = "";
        if (ahead != NULL) {
            snprintf(watched, sizeof watched, "%s/%s", l->path, ahead);
        } else if (dlock__zk_has_semaphore(r.children, r.nchildren)) {
            zrc = dlock__zk_semaphore_ahead(l, c, mine, deadline, watched);
            if (zrc == ZNONODE) {
                dlock__zresult_clear(&r);
                free(node);
                continue;
            }
            if (zrc != ZOK) {
                dlock__zresult_clear(&r);
                free(node);
                rc = dlock__zk_fail(zrc, z->label, "look at the semaphore of the same name");
                goto out;
            }
            if (watched[0] != '\0')
                held_as = DLOCK__HELD_AS_SEMAPHORE;
        }
        if (watched[0] == '\0') {
            a->session = dlock__zconn_session_ref(c);
            if (a->session == NULL) {
                dlock__zresult_clear(&r);
                free(node);
                dlock__zk_drop_node(l); /* it went with the session */
                rc = dlock__zk_session_ended(z);
                goto out;
            }
            a->outcome = DLOCK__TAKEN;
            pthread_mutex_lock(&l->mu);
            a->fence = l->fence;
            pthread_mutex_unlock(&l->mu);
            if (dlock__zk_is_rw(l))
                dlock__zk_remember_rw_hold(z, node, a->token, l->base.spec.kind == DLOCK__WRITE);
            dlock__zresult_clear(&r);
            free(node);
            rc = DLOCK_OK;
            goto out;
        }
        a->holder_ttl_ms = DLOCK__TTL_UNKNOWN;
        a->held_as = held_as;
        /* a reader kept out by a writer while the first contender, a
         * reader, holds: that writer only waits, and goes first */
        if (l->base.spec.kind == DLOCK__READ && ahead != NULL &&
            dlock__zk_contender(r.children[0]) == DLOCK__ZK_READ)
            a->held_why = DLOCK__WHY_WRITER_FIRST;
        if (!a->wait) {
            /* a try: leave no node behind */
            dlock__zresult_clear(&r);
            free(node);
            char *ours;
            dlock__zconn *in;
            dlock__zk_take_node(l, &ours, &in);
            dlock__zk_delete_node(z, in, ours, deadline);
            a->outcome = DLOCK__HELD;
            a->next = DLOCK__NEXT_POLL;
            rc = DLOCK_OK;
            goto out;
        }
        /* Watch the one ahead; if it is already gone, look again. */
        dlock__zresult_clear(&r);
        free(node);
        zrc = ZOK;
        dlock__zreq *q = dlock__zreq_watch(c, watched, a->token, &zrc);
        zrc = dlock__zk_run(q, zrc, deadline, &r);
        dlock__zresult_clear(&r);
        if (zrc == ZNONODE)
            continue;
        if (zrc != ZOK) {
            rc = dlock__zk_fail(zrc, z->label, "watch the node ahead");
            goto out;
        }
        a->outcome = DLOCK__QUEUED;
        a->keep_place = 0; /* the session keeps it */
        rc = DLOCK_OK;
        goto out;
    }
    rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: the lock's nodes keep changing under us", z->label);
out:
    dlock__zk_discard(listing);
    if (rc != DLOCK_OK && !a->wait) {
        /* a try that failed half way leaves nothing behind (no cancel
         * follows a try) */
        char *ours;
        dlock__zconn *in;
        dlock__zk_take_node(l, &ours, &in);
        if (ours != NULL)
            dlock__zk_delete_node(z, in, ours, deadline);
    }
    dlock__zconn_unref(c);
    return rc;
}

/* ---------------------------------------------------------------- release */

int dlock__zk_release(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                      int64_t deadline)
{
    (void) fence; /* a hold here is known by its token alone */
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    char *node;
    dlock__zconn *c;

    (void) token;
    if (l->base.spec.kind == DLOCK__SEMAPHORE)
        return dlock__zk_sem_release(z, l, deadline);
    dlock__zk_take_node(l, &node, &c);
    if (node == NULL)
        return dlock__fail(DLOCK_ELOST, "%s: lock '%s' is not held", z->label, l->path);
    int alive = dlock__zconn_alive(c);
    char what[PATH_MAX_LEN];
    snprintf(what, sizeof what, "%s", node);
    int zrc = dlock__zk_delete_node(z, c, node, dlock__zk_release_deadline(z, c, deadline));
    if (zrc == ZNONODE || (zrc != ZOK && (!alive || dlock__zk_session_over(zrc))))
        return dlock__fail(DLOCK_ELOST, "%s: %s is gone (removed, or its session ended)", z->label,
                           what);
    if (zrc != ZOK) {
        /* Not known to be gone: never OK. The node goes in the background
         * (conn.h), at the latest with its session. */
        dlock__zk_fail(zrc, z->label, "delete the lock node");
        return dlock__fail_context(DLOCK_EUNREACHABLE,
                                   "lock '%s': the release is not confirmed; its node is deleted "
                                   "in the background",
                                   l->path);
    }
    return DLOCK_OK;
}

/* The waiter leaves: its node is deleted, waited for only a moment (a
 * cancel must end its wait soon, whatever the store does), then in the
 * background. */
int dlock__zk_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    int64_t soon = dlock__now_us() + z->timeout_ms * 100; /* a tenth of a command timeout */
    char *node;
    dlock__zconn *c;

    (void) token;
    deadline = dlock__zk_deadline_of(z, deadline);
    if (soon < deadline)
        deadline = soon;
    if (l->base.spec.kind == DLOCK__SEMAPHORE) {
        dlock__zk_sem_give_up(z, l, deadline);
        return DLOCK_OK;
    }
    dlock__zk_take_node(l, &node, &c);
    if (node != NULL)
        dlock__zk_delete_node(z, c, node, deadline);
    return DLOCK_OK;
}

/* A copy of the node that stands for the hold (a semaphore's first lease
 * node), and its connection (a reference); NULL if there is none. */
static char *hold_node(zlock *l, dlock__zconn **conn)
{
    pthread_mutex_lock(&l->mu);
    const char *node = l->base.spec.kind != DLOCK__SEMAPHORE ? l->node
                       : l->nleases > 0                      ? l->leases[0]
                                                             : NULL;
    char *copy = node != NULL ? strdup(node) : NULL;
    *conn = copy != NULL ? l->conn : NULL;
    if (*conn != NULL)
        dlock__zconn_ref(*conn);
    pthread_mutex_unlock(&l->mu);
    return copy;
}

/* Confirms the hold (a session's lease cannot be set). */
int dlock__zk_extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                     int64_t lease_ms, int at_least, int64_t deadline)
{
    (void) fence; /* a hold here is known by its token alone */
    zstore *z = ZSTORE(s);
    zlock *l = ZLOCK(sl);
    dlock__zresult r;

    (void) token, (void) lease_ms, (void) at_least;
    dlock__zconn *c;
    char *node = hold_node(l, &c);
    if (node == NULL)
        return dlock__fail(DLOCK_ELOST, "%s: lock '%s' is not held", z->label, l->path);
    int zrc = dlock__zk_exists(c, node, dlock__zk_deadline_of(z, deadline), &r);
    int rc = DLOCK_OK;
    if (zrc == ZNONODE || (zrc == ZOK && r.stat.ephemeralOwner != dlock__zconn_id(c)))
        rc = dlock__fail(DLOCK_ELOST, "%s: %s is gone", z->label, node);
    else if (zrc != ZOK)
        rc = dlock__zk_fail(zrc, z->label, "check the lock node");
    dlock__zresult_clear(&r);
    free(node);
    dlock__zconn_unref(c);
    return rc;
}

/* ---------------------------------------------------------------- renewal */

int dlock__zk_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline)
{
    zstore *z = ZSTORE(s);
    dlock__zreq **reqs = calloc(n, sizeof *reqs);
    dlock__zconn **conns = calloc(n, sizeof *conns);
    int *sent = calloc(n, sizeof *sent);
    int rc = DLOCK_OK;

    deadline = dlock__zk_deadline_of(z, deadline);
    if (reqs == NULL || conns == NULL || sent == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&z->mu);
    dlock__zconn *current = z->conn;
    if (current != NULL)
        dlock__zconn_ref(current);
    pthread_mutex_unlock(&z->mu);
    if (current != NULL) {
        dlock__zconn_kick(current); /* background deletes that failed */
        dlock__zconn_unref(current);
    }
    /* every request first (ZooKeeper pipelines them), then every reply */
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *it = &items[i];
        int zrc = ZOK;
        it->result = DLOCK__RENEW_FAILED;
        if (it->kind == DLOCK__RENEW_SESSION) {
            conns[i] = dlock__session_data(it->session);
            dlock__zconn_ref(conns[i]);
            if (!dlock__zconn_alive(conns[i])) {
                it->result = DLOCK__RENEW_GONE;
                continue;
            }
            reqs[i] = dlock__zreq_exists(conns[i], "/", &zrc);
        } else if (it->kind == DLOCK__RENEW_HOLD) {
            char *node = hold_node(ZLOCK(it->lock), &conns[i]);
            if (node == NULL) {
                it->result = DLOCK__RENEW_GONE;
                continue;
            }
            reqs[i] = dlock__zreq_exists(conns[i], node, &zrc);
            free(node);
        }
        sent[i] = reqs[i] != NULL;
        if (!sent[i] && (zrc == ZINVALIDSTATE || zrc == ZSESSIONEXPIRED))
            it->result = DLOCK__RENEW_GONE;
    }
    int answered = 0;
    char error[200] = "";
    for (size_t i = 0; i < n; i++) {
        if (!sent[i])
            continue;
        dlock__zresult r;
        int zrc = dlock__zreq_wait(reqs[i], deadline, &r);
        dlock__renewal *it = &items[i];
        if (zrc == ZOK) {
            answered = 1;
            it->result =
                it->kind == DLOCK__RENEW_HOLD && r.stat.ephemeralOwner != dlock__zconn_id(conns[i])
                    ? DLOCK__RENEW_GONE
                    : DLOCK__RENEW_OK;
        } else if (zrc == ZNONODE) {
            answered = 1;
            it->result = DLOCK__RENEW_GONE;
        } else if (zrc == ZSESSIONEXPIRED || zrc == ZINVALIDSTATE || zrc == ZAUTHFAILED) {
            it->result = DLOCK__RENEW_GONE;
        } else if (error[0] == '\0') {
            snprintf(error, sizeof error, "%s",
                     zrc == ZOPERATIONTIMEOUT ? "no reply within the command timeout"
                                              : zerror(zrc));
        }
        dlock__zresult_clear(&r);
    }
    if (!answered && error[0] != '\0')
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: %s", z->label, error);
out:
    for (size_t i = 0; conns != NULL && i < n; i++)
        dlock__zconn_unref(conns[i]);
    free(reqs);
    free(conns);
    free(sent);
    return rc;
}

void dlock__zk_session_lost(dlock__store *s, dlock__session *session, int64_t deadline)
{
    (void) s, (void) deadline;
    /* Close it now: the server then deletes its nodes at once, and nothing
     * granted under it outlives the loss the core reported. */
    dlock__zconn_kill(dlock__session_data(session),
                      "no round trip to ZooKeeper succeeded within the session timeout");
}
