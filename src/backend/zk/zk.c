/* SPDX-License-Identifier: MIT */
/* zk.c - the ZooKeeper backend: zk://host:port[,host:port...][/base][?options].
 *
 * This file is the store: the URL, open and close, lock handles, and the
 * backend's table. The other files each hold one idea (README.md);
 * internal.h is what they share.
 *
 * Locks are Apache Curator's recipes (recipe.h), so that dlock and Curator
 * exclude one another on the same path: the lock `name` under the URL's base
 * is the znode BASE/name, and each contender creates an ephemeral sequential
 * child there. A contender holds the lock when it ranks first (a mutex), or
 * when no writer ranks ahead of it (a reader); any other watches the one
 * just ahead of it, so a release wakes one waiter, never all.
 *
 * Liveness is the client's ZooKeeper session (conn.h): every grant names it,
 * and the core reports every lock lost when the session expires or could
 * have expired (its validity is counted from the last round trip that
 * succeeded).
 *
 * Fences (dlock__zk_fence_of, session.c): the holder node's creation time
 * on the server (ctime, ms) times 2^20 plus its creation zxid (czxid). ZooKeeper orders every write
 * of the ensemble by zxid, and a later holder's node was created after every
 * earlier holder's, so while the ensemble keeps its data the zxid part grows
 * and the time part does not shrink (leaders' clocks are not set back):
 * fences strictly increase. An ensemble rebuilt from nothing starts its
 * zxids again near 0; the time part still puts later fences above earlier
 * ones once the rebuild took longer than old czxid / 2^20 ms (about 4 s per
 * 2^32 zxids, i.e. per election epoch). The node's sequence number is no use:
 * it restarts whenever the lock's container is reaped.
 *
 * Node data: every contender's node holds "TOKEN\nINFO", its owner token, a
 * newline and the client's owner_info (backend.h; a lease node's first line
 * is "TOKEN TAKE/PERMITS"), so that an operator sees who holds a lock
 * (ops.c). A peer's node (Curator's, kazoo's) has no newline: all of
 * its data is its owner. Only the first line is ever read as the owner.
 *
 * State per handle (zlock): the node it created for its current wait or
 * hold. The renewal thread reads it to check a hold, so it is guarded by the
 * lock's mutex.
 *
 * No node outlives the attempt that made it while its session lives (it
 * would block everyone behind it): a try that does not take the lock, or
 * fails half way, deletes what it made before it returns; a wait that gives
 * up is cancelled by the core, which deletes it; a release deletes it. A
 * delete that ZooKeeper does not confirm in time, and a create whose outcome
 * the caller never learned, are left to the connection's orphan list
 * (conn.h), which deletes them in the background until ZooKeeper confirms.
 * A release whose delete was not confirmed says DLOCK_EUNREACHABLE.
 *
 * Every call ends by the deadline the core gives: opening a session is
 * waited for only that long (conn.h), a session is closed in the
 * background, and background deletes are never waited for. */
#include "internal.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "names.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT       2181
#define DEFAULT_BASE       "/dlock"
#define DEFAULT_CONNECT_MS 5000

extern const dlock__backend dlock__zk_backend;

/* ---------------------------------------------------------------- locks */

static int zk_lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                       dlock__store_lock **out)
{
    zstore *z = ZSTORE(s);
    zlock *l;
    int rc;

    *out = NULL;
    char path[PATH_MAX_LEN];
    rc = dlock__zk_path_of(z->base_path, name, path, sizeof path);
    if (rc != DLOCK_OK)
        return rc;
    l = calloc(1, sizeof *l);
    if (l == NULL || (l->path = strdup(path)) == NULL) {
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    l->base.spec = *spec;
    if (spec->kind == DLOCK__SEMAPHORE) {
        size_t n = strlen(l->path) + 8;
        l->locks_path = malloc(n);
        l->leases_path = malloc(n);
        if (l->locks_path == NULL || l->leases_path == NULL) {
            free(l->locks_path);
            free(l->leases_path);
            free(l->path);
            free(l);
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        }
        snprintf(l->locks_path, n, "%s/locks", l->path);
        snprintf(l->leases_path, n, "%s/leases", l->path);
    }
    pthread_mutex_init(&l->mu, NULL);
    *out = &l->base;
    return DLOCK_OK;
}

/* The handle leaves its hold: its nodes stay for as long as the session
 * lives (until the client closes, or the session ends), and are only
 * forgotten here. */
static void zk_detach(dlock__store *s, dlock__store_lock *sl)
{
    zlock *l = ZLOCK(sl);
    char *node;
    dlock__zconn *c, *lc;
    unsigned n;

    dlock__zk_take_node(l, &node, &c);
    char **leases = dlock__zk_take_leases(l, &n, &lc);
    for (unsigned i = 0; i < n; i++)
        free(leases[i]);
    free(leases);
    dlock__zconn_unref(lc);
    if (node != NULL)
        dlock__zk_forget_rw_hold(ZSTORE(s), node);
    free(node);
    dlock__zconn_unref(c);
}

static void zk_lock_free(dlock__store *s, dlock__store_lock *sl)
{
    zlock *l = ZLOCK(sl);

    dlock__zk_sem_give_up(ZSTORE(s), l, 0); /* anything left: in the background */
    pthread_mutex_destroy(&l->mu);
    free(l->path);
    free(l->locks_path);
    free(l->leases_path);
    free(l);
}

/* ---------------------------------------------------------------- the store */

static void zk_close(dlock__store *s, int64_t deadline)
{
    zstore *z = ZSTORE(s);

    if (z == NULL)
        return;
    if (z->conn != NULL) {
        /* The server deletes every node of the session, orphans too. The
         * close is waited for only a moment: dlock_client_close has a
         * command timeout in all, which a renewal in flight may have used
         * (a server that does not answer keeps zookeeper_close 1.5 s). */
        dlock__zconn_kill(z->conn, "the client closed");
        int64_t moment = dlock__now_us() + z->timeout_ms * 100;
        dlock__zconn_wait_closed(z->conn, moment < deadline ? moment : deadline);
        dlock__zconn_unref(z->conn);
    }
    while (z->rw_holds != NULL) {
        rw_hold *h = z->rw_holds;
        z->rw_holds = h->next;
        free(h->node);
        free(h->token);
        free(h);
    }
    pthread_mutex_destroy(&z->mu);
    pthread_cond_destroy(&z->cv);
    free(z->hosts);
    free(z->auth);
    free(z->base_path);
    free(z->label);
    free(z);
}

static int zk_reached(dlock__store *s)
{
    return atomic_load(&ZSTORE(s)->reached);
}

static int parse_url(zstore *z, dlock__url *url)
{
    char hosts[1024] = "", label[1600];
    size_t used = 0;

    if (url->nhosts == 0)
        return dlock__fail(DLOCK_EINVAL, "%s: want at least one host (zk://host:port)", url->text);
    for (size_t i = 0; i < url->nhosts; i++) {
        const char *h = url->hosts[i].name;
        int port = url->hosts[i].port ? url->hosts[i].port : DEFAULT_PORT;
        int n = snprintf(hosts + used, sizeof hosts - used,
                         strchr(h, ':') ? "%s[%s]:%d" : "%s%s:%d", i ? "," : "", h, port);
        if (n < 0 || (size_t) n >= sizeof hosts - used)
            return dlock__fail(DLOCK_EINVAL, "%s: host list too long", url->text);
        used += (size_t) n;
    }
    const char *base = url->path[0] != '\0' ? url->path : DEFAULT_BASE + 1;
    char base_path[512];
    snprintf(base_path, sizeof base_path, "/%s", base);
    /* a trailing '/' is harmless in a URL */
    size_t bl = strlen(base_path);
    while (bl > 1 && base_path[bl - 1] == '/')
        base_path[--bl] = '\0';
    if (strcmp(base_path, "/") != 0) {
        char name[sizeof base_path], path[PATH_MAX_LEN];
        if (strcmp(base_path, "/zookeeper") == 0 || strncmp(base_path, "/zookeeper/", 11) == 0)
            return dlock__fail(DLOCK_EINVAL, "%s: /zookeeper is ZooKeeper's own", url->text);
        /* a base is a path dlock would write for a name (names.h): so no
         * base's path is another's lock node, whatever the two hold */
        if (dlock__zk_no_name_under(base_path + 1, name, sizeof name))
            return dlock__fail(DLOCK_EINVAL,
                               "%s: base path '%s' has a '%%' that is not an escape (%%XX)",
                               url->text, base_path);
        if (!dlock__zk_name_of(1, base_path + 1, name, sizeof name)) {
            int rc = dlock__zk_path_of("/", name, path, sizeof path);
            return rc != DLOCK_OK ? rc
                                  : dlock__fail(DLOCK_EINVAL,
                                                "%s: base path '%s' is not written as dlock writes "
                                                "paths (docs/zookeeper.md, Names): write '%s'",
                                                url->text, base_path, path);
        }
    }
    /* the user name (never the password): who asked is part of what a
     * refusal means */
    snprintf(label, sizeof label, "zk://%s%s%s", url->userinfo, hosts, base_path);
    z->hosts = strdup(hosts);
    z->base_path = strdup(base_path);
    z->label = strdup(label);
    if (url->user != NULL || url->password != NULL) {
        size_t n =
            (url->user ? strlen(url->user) : 0) + (url->password ? strlen(url->password) : 0) + 2;
        z->auth = malloc(n);
        if (z->auth != NULL)
            snprintf(z->auth, n, "%s:%s", url->user ? url->user : "",
                     url->password ? url->password : "");
        if (z->auth == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    if (z->hosts == NULL || z->base_path == NULL || z->label == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

static int zk_open(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    zstore *z = calloc(1, sizeof *z);
    int64_t session_ms = host->cfg->lease_ms, connect_ms = DEFAULT_CONNECT_MS;
    int rc;

    *out = NULL;
    dlock__url_user_is_a_name(url); /* zk://alice@host: digest user alice, in messages too */
    if (z == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&z->mu, NULL);
    dlock__cond_init(&z->cv);
    z->base.backend = &dlock__zk_backend;
    z->base.caps = dlock__zk_backend.caps;
    z->base.host = *host;
    z->timeout_ms = host->cfg->command_timeout_ms;
    rc = parse_url(z, url);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "session_timeout", 100, &session_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "connect_timeout", 1, &connect_ms);
    if (rc != DLOCK_OK) {
        zk_close(&z->base, dlock__now_us());
        return rc;
    }
    z->cfg = (dlock__zconn_cfg){.hosts = z->hosts,
                                .auth = z->auth,
                                .label = z->label,
                                .session_ms = session_ms,
                                .connect_ms = connect_ms,
                                .board = host->board,
                                .sessions = host->sessions};
    z->base.label = z->label;
    *out = &z->base;
    return DLOCK_OK;
}

static const char *const schemes[] = {"zk", "zookeeper", NULL};

const dlock__backend dlock__zk_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "ZooKeeper",
    .schemes = schemes,
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY | DLOCK_CAP_FAIR |
            DLOCK_CAP_READ_WRITE | DLOCK_CAP_SEMAPHORE | DLOCK_CAP_MULTI_ATOMIC | DLOCK_CAP_NOTIFY |
            DLOCK_CAP_SESSION | DLOCK_CAP_LIST,
    .open = zk_open,
    .close = zk_close,
    .lock_new = zk_lock_new,
    .lock_free = zk_lock_free,
    .detach = zk_detach,
    .acquire = dlock__zk_acquire,
    .acquire_many = dlock__zk_acquire_many,
    .cancel = dlock__zk_cancel,
    .release = dlock__zk_release,
    .extend = dlock__zk_extend,
    .renew = dlock__zk_renew,
    .session_lost = dlock__zk_session_lost,
    .query = dlock__zk_query,
    .force_unlock = dlock__zk_force_unlock,
    .holders = dlock__zk_holders,
    .list = dlock__zk_list,
    .reached = zk_reached,
};
