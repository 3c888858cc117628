/* SPDX-License-Identifier: MIT */
/* sqlite.c - the SQLite backend: sqlite:///absolute/path/to/file.db.
 *
 * Design note.
 *
 * Locks between the processes of one host, with no server to run: the
 * store is one SQLite database file in WAL mode, which every client opens
 * (one connection per client). The lock tables are made at the first
 * open (README.md has the schema): dlock_hold, a row per hold (name,
 * owner token, the holding process, the expiry), and dlock_fence, a fence
 * counter per name that only ever goes up and is never deleted.
 *
 * Time. A hold's expiry is a time on CLOCK_BOOTTIME in ms, which all the
 * processes of a host share and which never goes back; the row also keeps
 * the boot id, and a row of another boot is no hold. The core counts a
 * grant's validity from before the request on its own monotonic clock, so
 * the holder always gives up first.
 *
 * Dead holders. On one host a holder's death is known exactly: a row keeps
 * the holder's pid, its start time and its pid namespace, and a contender
 * that finds that process gone (or the pid taken by another process)
 * deletes the row and takes the lock at once, with the next fence, instead
 * of waiting out the lease (host.c, rows.c). A detached hold is bound to
 * no process and lasts its lease.
 *
 * Waiting. SQLite cannot notify: the processes of the host wake each
 * other through counters in a file mapped beside the database (wake.c),
 * and a waiter blocks in the store for a slice, looking again when a
 * release wakes it, or every few tens of ms for what no release announces.
 * Looks that find the name held are reads, which in WAL mode take no lock.
 *
 * What it is not: a store for processes of several hosts (SQLite's locks
 * on a network file system are not to be trusted, and pids and boot ids
 * mean nothing across hosts); no fair queue (waiters are served oldest
 * first, but a paused waiter holds the line up for its waiter lease).
 *
 * Files: this one has the store's life and the backend table; db.c the
 * connection and transactions; host.c the clock and processes; rows.c the
 * holds as rows; lock.c take, release, keep alive; wake.c waking waiters;
 * operator.c query, holders, force-unlock, list (README.md has the map). */
#include "lock.h"
#include "operator.h"

#include "../../base/error.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const dlock__backend dlock__sqlite_backend;

static int parse_url(dlock__sq_store *s, dlock__url *url)
{
    /* sqlite:///tmp/x.db has no host and the path "tmp/x.db"; a host
     * means the path was given relative (sqlite://x.db, sqlite://./x.db):
     * the message gives the absolute URL of that file */
    char cwd[PATH_MAX], rel[PATH_MAX];
    if (url->nhosts > 0 && url->user == NULL && url->hosts[0].port == 0 &&
        getcwd(cwd, sizeof cwd) != NULL) {
        const char *host = url->hosts[0].name;
        int dot = strcmp(host, ".") == 0;
        if (dot)
            snprintf(rel, sizeof rel, "%s", url->path);
        else
            snprintf(rel, sizeof rel, "%s%s%s", host, url->path[0] ? "/" : "", url->path);
        /* sqlite://tmp/x.db is most often /tmp/x.db with a slash left out */
        char rooted[2 * PATH_MAX + 40] = "";
        if (!dot)
            snprintf(rooted, sizeof rooted, "for /%s, sqlite:///%s; ", rel, rel);
        return dlock__fail(DLOCK_EINVAL,
                           "%s: the path must be absolute, after three slashes (two slashes "
                           "read '%s' as a host): %sfor %s in the current directory, "
                           "sqlite://%s/%s",
                           url->text, host, rooted, rel, strcmp(cwd, "/") == 0 ? "" : cwd, rel);
    }
    if (url->nhosts > 0 || url->user != NULL || url->path[0] == '\0')
        return dlock__fail(DLOCK_EINVAL,
                           "%s: want sqlite:///absolute/path/to/file.db (three slashes: the "
                           "path must be absolute, and there is no host)",
                           url->text);
    if (strlen(url->path) + 2 > sizeof s->path)
        return dlock__fail(DLOCK_EINVAL, "%s: the path is too long", url->text);
    snprintf(s->path, sizeof s->path, "/%s", url->path);
    size_t n = strlen(s->path);
    if (n > 1 && s->path[n - 1] == '/')
        return dlock__fail(DLOCK_EINVAL, "%s: %s names a directory, not a database file", url->text,
                           s->path);
    snprintf(s->label, sizeof s->label, "sqlite://%s", s->path);
    return DLOCK_OK;
}

static void sq_close(dlock__store *st, int64_t deadline_us)
{
    (void) deadline_us;
    dlock__sq_store *s = SQSTORE(st);
    if (s == NULL)
        return;
    dlock__sq_db_close(s);
    dlock__sq_wake_close(s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int sq_open(dlock__url *url, const dlock__host *host, dlock__store **out)
{
    dlock__sq_store *s = calloc(1, sizeof *s);
    int rc;

    *out = NULL;
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->base.backend = &dlock__sqlite_backend;
    s->base.caps = dlock__sqlite_backend.caps;
    s->base.host = *host;
    s->base.label = s->label;
    s->timeout_ms = host->cfg->command_timeout_ms;
    snprintf(s->label, sizeof s->label, "sqlite://");
    int64_t connect_ms = s->timeout_ms;
    rc = parse_url(s, url);
    /* connect_timeout (every store takes it): how long the open may wait
     * for another process's write lock (making the tables, WAL mode) */
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "connect_timeout", 1, &connect_ms);
    /* every option this store reads is read: an unknown one is refused
     * here, before the open creates the file (the core's own check comes
     * after the open) */
    if (rc == DLOCK_OK)
        rc = dlock__url_check_unused(url);
    if (rc == DLOCK_OK)
        rc = dlock__sq_boot_id(s->boot, sizeof s->boot);
    if (rc == DLOCK_OK) {
        dlock__sq_self(&s->self);
        /* at once, so that a wrong path is told at open, not at the first
         * lock; a file not there yet is made by the first call that takes
         * a lock, never by an operator's (db.c: dlock__sq_ready) */
        rc = dlock__sq_db_start(s, connect_ms);
    }
    if (rc != DLOCK_OK) {
        sq_close(&s->base, 0);
        return rc;
    }
    *out = &s->base;
    return DLOCK_OK;
}

static int sq_lock_new(dlock__store *st, const char *name, const dlock__lock_spec *spec,
                       dlock__store_lock **out)
{
    (void) st;
    dlock__sq_lock *l = calloc(1, sizeof *l);
    *out = NULL;
    if (l == NULL || (l->name = strdup(name)) == NULL) {
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    l->base.spec = *spec;
    *out = &l->base;
    return DLOCK_OK;
}

static void sq_lock_free(dlock__store *st, dlock__store_lock *sl)
{
    (void) st;
    if (sl == NULL)
        return;
    free(SQLOCK(sl)->name);
    free(SQLOCK(sl));
}

static int sq_reached(dlock__store *st)
{
    (void) st;
    return 1; /* opened at once: an open store has answered */
}

static const char *const schemes[] = {"sqlite", NULL};

const dlock__backend dlock__sqlite_backend = {
    .version = DLOCK__BACKEND_VERSION,
    .name = "SQLite",
    .schemes = schemes,
    .caps = DLOCK_CAP_FENCE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND | DLOCK_CAP_ADOPT |
            DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY | DLOCK_CAP_MULTI_ATOMIC | DLOCK_CAP_LIST |
            DLOCK_CAP_READ_WRITE | DLOCK_CAP_SEMAPHORE,
    .open = sq_open,
    .close = sq_close,
    .lock_new = sq_lock_new,
    .lock_free = sq_lock_free,
    .detach = dlock__sq_detach,
    .acquire = dlock__sq_acquire,
    .acquire_many = dlock__sq_acquire_many,
    .cancel = dlock__sq_cancel,
    .release = dlock__sq_release,
    .extend = dlock__sq_extend,
    .renew = dlock__sq_renew,
    .query = dlock__sq_query,
    .force_unlock = dlock__sq_force_unlock,
    .holders = dlock__sq_holders,
    .list = dlock__sq_list,
    .reached = sq_reached,
};
