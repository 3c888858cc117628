/* SPDX-License-Identifier: MIT */
/* session.c - the store's ZooKeeper session for a call (opened when none is
 * alive, waited for until the call's deadline at most), the deadlines and
 * fences every call uses, and one request run to its end. */
#include "internal.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int64_t dlock__zk_deadline_of(const zstore *z, int64_t deadline_us)
{
    int64_t cap = dlock__now_us() + z->timeout_ms * 1000;
    return deadline_us < cap ? deadline_us : cap;
}

/* The deadline of a release: the core's, but only a tenth of a command
 * timeout while the client library is not connected (the connection was
 * lost: the delete waits for a reconnect). Such a release says at once
 * that it is not confirmed, and goes on in the background: several
 * releases in a row (a multi-lock's members) do not each wait a command
 * timeout for a server that is gone. */
int64_t dlock__zk_release_deadline(const zstore *z, dlock__zconn *c, int64_t deadline_us)
{
    int64_t deadline = dlock__zk_deadline_of(z, deadline_us);
    int64_t soon = dlock__now_us() + z->timeout_ms * 100;
    if (c != NULL && soon < deadline && !dlock__zconn_connected(c))
        deadline = soon;
    return deadline;
}

/* The fence of a holder's node (see the design note). */
uint64_t dlock__zk_fence_of(const struct Stat *st)
{
    return ((uint64_t) st->ctime << 20) + (uint64_t) st->czxid;
}

/* ---------------------------------------------------------------- the session */

/* The current session, opened if there is none alive, waited for until
 * deadline at most. *out is a reference. */
int dlock__zk_get_conn(zstore *z, int64_t deadline, dlock__zconn **out)
{
    dlock__zconn *c = NULL, *old = NULL;
    int rc = DLOCK_OK;

    *out = NULL;
    pthread_mutex_lock(&z->mu);
    for (;;) {
        if (z->conn != NULL && !dlock__zconn_dead(z->conn)) {
            c = z->conn;
            dlock__zconn_ref(c);
            break;
        }
        if (!z->connecting) {
            /* replace it: this thread opens the next one */
            z->connecting = 1;
            old = z->conn;
            z->conn = NULL;
            break;
        }
        /* another thread opens it (zookeeper_init returns at once) */
        struct timespec ts = dlock__timespec(deadline);
        if (pthread_cond_timedwait(&z->cv, &z->mu, &ts) == ETIMEDOUT && z->connecting) {
            pthread_mutex_unlock(&z->mu);
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: no ZooKeeper session yet", z->label);
        }
    }
    pthread_mutex_unlock(&z->mu);
    if (c == NULL) {
        if (old != NULL) {
            dlock__zconn_kill(old, "replaced by a new session");
            dlock__zconn_unref(old);
        }
        rc = dlock__zconn_open(&z->cfg, &c);
        pthread_mutex_lock(&z->mu);
        z->connecting = 0;
        z->conn = c;
        if (c != NULL)
            dlock__zconn_ref(c);
        pthread_cond_broadcast(&z->cv);
        pthread_mutex_unlock(&z->mu);
        if (rc != DLOCK_OK)
            return rc;
    }
    rc = dlock__zconn_ready(c, deadline);
    if (rc != DLOCK_OK) {
        dlock__zconn_unref(c);
        return rc;
    }
    atomic_store(&z->reached, 1);
    *out = c;
    return DLOCK_OK;
}

/* The opening of a call: *deadline capped at one command timeout, then
 * the session (a reference in *out), waited for until then. */
int dlock__zk_open_call(zstore *z, int64_t *deadline, dlock__zconn **out)
{
    *deadline = dlock__zk_deadline_of(z, *deadline);
    return dlock__zk_get_conn(z, *deadline, out);
}

/* A grant found the session over (it ended after the call began): its
 * nodes are gone; the next call opens a new one. */
int dlock__zk_session_ended(const zstore *z)
{
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: the ZooKeeper session ended during the request",
                       z->label);
}

/* ---------------------------------------------------------------- requests */

/* Runs one request to its end: the ZooKeeper code. */
int dlock__zk_run(dlock__zreq *q, int zrc, int64_t deadline, dlock__zresult *r)
{
    memset(r, 0, sizeof *r);
    if (q == NULL) {
        r->rc = zrc;
        return zrc;
    }
    return dlock__zreq_wait(q, deadline, r);
}

int dlock__zk_children(dlock__zconn *c, const char *path, int64_t deadline, dlock__zresult *r)
{
    int zrc = ZOK;
    dlock__zreq *q = dlock__zreq_children(c, path, &zrc);
    return dlock__zk_run(q, zrc, deadline, r);
}

int dlock__zk_exists(dlock__zconn *c, const char *path, int64_t deadline, dlock__zresult *r)
{
    int zrc = ZOK;
    dlock__zreq *q = dlock__zreq_exists(c, path, &zrc);
    return dlock__zk_run(q, zrc, deadline, r);
}

int dlock__zk_delete(dlock__zconn *c, const char *path, int64_t deadline)
{
    dlock__zresult r;
    int zrc = ZOK;
    dlock__zreq *q = dlock__zreq_delete(c, path, &zrc);
    zrc = dlock__zk_run(q, zrc, deadline, &r);
    dlock__zresult_clear(&r);
    return zrc;
}

/* Creates every missing ancestor of path (not path itself) as a container
 * node, as Curator does (the server removes them once empty). */
int dlock__zk_make_parents(dlock__zconn *c, const char *path, int64_t deadline)
{
    char buf[PATH_MAX_LEN];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = strchr(buf + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
        *p = '\0';
        dlock__zresult r;
        int zrc = ZOK;
        dlock__zreq *q = dlock__zreq_create(c, buf, NULL, -1, ZOO_CONTAINER, &zrc);
        zrc = dlock__zk_run(q, zrc, deadline, &r);
        dlock__zresult_clear(&r);
        *p = '/';
        if (zrc != ZOK && zrc != ZNODEEXISTS)
            return zrc;
    }
    return ZOK;
}
