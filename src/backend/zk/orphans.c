/* SPDX-License-Identifier: MIT */
/* orphans.c - the nodes of a ZooKeeper connection that nobody holds or
 * waits with any more, deleted in the background. See conn.h.
 *
 * Orphans. A node of ours that nobody holds or waits with any more must not
 * outlive the attempt that made it while the session lives, or it blocks
 * everyone behind it for as long as the client runs. Two kinds are kept on
 * the connection's orphan list and retried, from ZooKeeper's completion
 * thread, after every reconnect and whenever the store kicks it (each
 * renewal, each attempt), until ZooKeeper answers:
 *   - a node whose delete was not confirmed: deleted again;
 *   - a create whose outcome the caller never learned (no reply by its
 *     deadline, or the connection lost): if its reply comes later with the
 *     node's name, that node is deleted; if the connection was lost, the
 *     node may exist or not, so the directory is listed and every child
 *     named with the create's fresh uuid is deleted (Curator's protection
 *     mode; the listing is repeated once later, for a server that had not
 *     applied the create yet).
 * Requests given up on and replies that come late are thereby harmless in
 * any order. */
#include "conn_int.h"

#include "../../base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ORPHANS     4096
#define SEARCH_AGAIN_US 200000 /* the second listing for a lost create, at the earliest */

static void orphans_kick(dlock__zconn *c);

int dlock__zk_session_over(int zrc)
{
    return zrc == ZSESSIONEXPIRED || zrc == ZCLOSING || zrc == ZINVALIDSTATE || zrc == ZAUTHFAILED;
}

/* With mu held: o leaves the list. */
static void orphan_drop_locked(dlock__zconn *c, orphan *o)
{
    for (orphan **p = &c->orphans; *p != NULL; p = &(*p)->next) {
        if (*p == o) {
            *p = o->next;
            c->norphans--;
            break;
        }
    }
    free(o->path);
    free(o);
}

/* A node to delete (uuid NULL), or a directory to search for a node named
 * with uuid; sent at once. Past MAX_ORPHANS the session is ended instead:
 * the server deletes every node of it. */
void dlock__zk_orphan_add(dlock__zconn *c, const char *path, const char *uuid)
{
    orphan *o = calloc(1, sizeof *o);
    int full;

    if (o != NULL && (o->path = strdup(path)) == NULL) {
        free(o);
        o = NULL;
    }
    if (o != NULL) {
        o->conn = c;
        if (uuid != NULL)
            snprintf(o->uuid, sizeof o->uuid, "%s", uuid);
    }
    pthread_mutex_lock(&c->mu);
    full = o == NULL || c->norphans >= MAX_ORPHANS;
    if (!full) {
        o->next = c->orphans;
        c->orphans = o;
        c->norphans++;
    }
    pthread_mutex_unlock(&c->mu);
    if (full) {
        if (o != NULL)
            free(o->path);
        free(o);
        /* The last resort. Closing only starts here (the handle's own
         * completion thread closes it), so this is safe on ZooKeeper's
         * threads too. */
        dlock__zk_end_session(c, "too many nodes of this client could not be deleted");
        dlock__zk_begin_close(c);
        return;
    }
    orphans_kick(c);
}

static void on_orphan_deleted(int rc, const void *data)
{
    orphan *o = (orphan *) data;
    dlock__zconn *c = o->conn;

    pthread_mutex_lock(&c->mu);
    if (rc == ZOK || rc == ZNONODE || dlock__zk_session_over(rc))
        orphan_drop_locked(c, o); /* gone, or its session is (and the node with it) */
    else
        o->busy = 0; /* the connection was lost: after the reconnect */
    pthread_mutex_unlock(&c->mu);
    dlock__zconn_unref(c);
}

static void on_orphan_children(int rc, const struct String_vector *v, const void *data)
{
    orphan *o = (orphan *) data;
    dlock__zconn *c = o->conn;
    char mark[48], node[1200];
    int found = 0;

    snprintf(mark, sizeof mark, "_c_%s-", o->uuid);
    for (int i = 0; rc == ZOK && v != NULL && i < v->count; i++) {
        if (strncmp(v->data[i], mark, strlen(mark)) != 0)
            continue;
        snprintf(node, sizeof node, "%s/%s", strcmp(o->path, "/") == 0 ? "" : o->path, v->data[i]);
        dlock__zk_orphan_add(c, node, NULL);
        found = 1;
    }
    pthread_mutex_lock(&c->mu);
    if (found || rc == ZNONODE || dlock__zk_session_over(rc) || (rc == ZOK && ++o->searches >= 2)) {
        orphan_drop_locked(c, o);
    } else {
        /* not there (yet), or no answer: once more, a moment later */
        o->busy = 0;
        o->not_before = dlock__now_us() + SEARCH_AGAIN_US;
    }
    pthread_mutex_unlock(&c->mu);
    dlock__zconn_unref(c);
}

/* Sends a request for every orphan that has none in flight. Safe on
 * ZooKeeper's threads (a request is only queued there). */
static void orphans_kick(dlock__zconn *c)
{
    for (;;) {
        int64_t now = dlock__now_us();
        orphan *o;
        pthread_mutex_lock(&c->mu);
        for (o = c->orphans; o != NULL; o = o->next) {
            if (!o->busy && o->not_before <= now)
                break;
        }
        if (o != NULL)
            o->busy = 1;
        pthread_mutex_unlock(&c->mu);
        if (o == NULL)
            return;
        dlock__zconn_ref(c); /* the request's */
        int zrc = o->uuid[0] != '\0'
                      ? start(c, zoo_aget_children(ZH, o->path, 0, on_orphan_children, o))
                      : start(c, zoo_adelete(ZH, o->path, -1, on_orphan_deleted, o));
        if (zrc != ZOK) {
            /* not even queued: the handle is closed (the session with it)
             * or the library refuses for now; the next kick tries again */
            pthread_mutex_lock(&c->mu);
            if (dlock__zk_session_over(zrc))
                orphan_drop_locked(c, o);
            else
                o->busy = 0;
            pthread_mutex_unlock(&c->mu);
            dlock__zconn_unref(c);
            if (!dlock__zk_session_over(zrc))
                return;
        }
    }
}

void dlock__zconn_forget(dlock__zconn *c, const char *node)
{
    dlock__zk_orphan_add(c, node, NULL);
}

void dlock__zconn_kick(dlock__zconn *c)
{
    orphans_kick(c);
}

int dlock__zconn_orphans(dlock__zconn *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->norphans;
    pthread_mutex_unlock(&c->mu);
    return n;
}
