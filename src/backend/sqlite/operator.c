/* SPDX-License-Identifier: MIT */
/* operator.c - query, holders, force-unlock and list on the SQLite store.
 *
 * Reads run in a read transaction (never waiting for a writer in WAL
 * mode) and see the holds as a contender would: rows of an earlier boot,
 * past their expiry or of a dead process are not holders (rows.c). What
 * is handed to the core's sinks is copied out first, so no sink runs
 * while the store's mutex and a transaction are held. */
#include "operator.h"

#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether a row's kind is of the lock l names: each kind's status,
 * holders and force-unlock are that lock's (as on every store, where
 * they are keys of their own); the name's other kinds are asked apart. */
static int of_lock(const dlock__sq_lock *l, int kind)
{
    return dlock__sq_held_as(kind, dlock__sq_kind(&l->base.spec)) == DLOCK__HELD_AS_SAME;
}

int dlock__sq_query(dlock__store *st, dlock__store_lock *sl, dlock_status *out, int64_t deadline_us)
{
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_lock *l = SQLOCK(sl);
    dlock__sq_row *rows = NULL;
    size_t n = 0;
    uint64_t fence = 0;

    memset(out, 0, sizeof *out);
    out->lease_ms = -1;
    int missing;
    int rc = dlock__sq_ready(s, 0, deadline_us, &missing);
    if (rc != DLOCK_OK || missing) /* no file: nothing held, nothing made */
        return rc;
    rc = dlock__sq_begin(s, 0, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__sq_rows(s, SQ_WAITS, l->name, &rows, &n);
    int64_t now_ms = dlock__sq_boot_ms();
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++)
        out->waiters +=
            (unsigned) (of_lock(l, rows[i].kind) && dlock__sq_row_live(s, &rows[i], now_ms, NULL));
    free(rows);
    rows = NULL;
    if (rc == DLOCK_OK)
        rc = dlock__sq_rows(s, SQ_ROWS, l->name, &rows, &n);
    if (rc == DLOCK_OK)
        rc = dlock__sq_fence(s, l->name, &fence);
    rc = dlock__sq_end(s, 0, rc);
    /* one exclusive holder (a mutex, the write lock) is named with its
     * lease; shared holders (readers, a semaphore's) are counted, with the
     * longest of their leases */
    const dlock__sq_row *alone = NULL;
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++) {
        const dlock__sq_row *r = &rows[i];
        if (!of_lock(l, r->kind) || !dlock__sq_row_live(s, r, now_ms, NULL))
            continue;
        out->held = 1;
        out->shared++;
        alone = r;
        if (r->expires_ms - now_ms > out->lease_ms) /* shared: the longest lease */
            out->lease_ms = r->expires_ms - now_ms;
        if (r->kind == DLOCK__SQ_SEMAPHORE) {
            out->permits_used += (unsigned) r->count;
            out->permits = (unsigned) r->permits;
        }
    }
    if (out->shared == 1 && (alone->kind == DLOCK__SQ_MUTEX || alone->kind == DLOCK__SQ_WRITE)) {
        out->shared = 0;
        out->holds = 1;
        snprintf(out->owner, sizeof out->owner, "%s", alone->owner);
        out->lease_ms = alone->expires_ms - now_ms;
    }
    if (l->base.spec.kind != DLOCK__SEMAPHORE)
        out->permits = out->permits_used = 0;
    out->last_fence = fence;
    free(rows);
    return rc;
}

int dlock__sq_force_unlock(dlock__store *st, dlock__store_lock *sl, int64_t deadline_us)
{
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_lock *l = SQLOCK(sl);
    int missing;
    int rc = dlock__sq_ready(s, 0, deadline_us, &missing);
    if (rc != DLOCK_OK || missing) /* no file: nothing to unlock, nothing made */
        return rc;
    rc = dlock__sq_begin(s, 1, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    /* the fence counter stays: the next holder's fence is still larger */
    sqlite3_stmt *q = dlock__sq_stmt(s, SQ_DEL_NAME);
    int kind = dlock__sq_kind(&l->base.spec);
    sqlite3_bind_text(q, 1, l->name, -1, SQLITE_STATIC);
    /* the lock's kinds only: read and write holds are of one lock */
    sqlite3_bind_int(q, 2, kind == DLOCK__SQ_WRITE ? DLOCK__SQ_READ : kind);
    sqlite3_bind_int(q, 3, kind == DLOCK__SQ_READ ? DLOCK__SQ_WRITE : kind);
    int src = sqlite3_step(q);
    rc = src == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, src, "deleting the holds");
    rc = dlock__sq_end(s, rc == DLOCK_OK, rc);
    if (rc == DLOCK_OK)
        dlock__sq_wake(s, l->name);
    return rc;
}

int dlock__sq_holders(dlock__store *st, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline_us)
{
    dlock__sq_store *s = SQSTORE(st);
    dlock__sq_lock *l = SQLOCK(sl);
    dlock__sq_row *rows = NULL;
    size_t n = 0;
    int missing;
    int rc = dlock__sq_ready(s, 0, deadline_us, &missing);
    if (rc != DLOCK_OK || missing) /* no file: no holder, nothing made */
        return rc;
    rc = dlock__sq_begin(s, 0, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__sq_rows(s, SQ_ROWS, l->name, &rows, &n);
    rc = dlock__sq_end(s, 0, rc);
    int64_t now_ms = dlock__sq_boot_ms();
    for (size_t i = 0; rc == DLOCK_OK && i < n; i++) {
        const dlock__sq_row *r = &rows[i];
        if (!of_lock(l, r->kind) || !dlock__sq_row_live(s, r, now_ms, NULL))
            continue;
        dlock__holder_raw h = {.owner = r->owner,
                               .count = (unsigned) r->count,
                               .info = r->info[0] != '\0' ? r->info : NULL};
        if (sink(arg, &h) != 0)
            break;
    }
    free(rows);
    return rc;
}

/* The names found by list, in order, each once per kind. */
typedef struct found {
    const dlock__sq_store *s;
    const char *prefix;
    size_t prefix_len;
    int64_t now_ms;
    int waits; /* collecting waiters (after the holds) */
    char **names;
    enum dlock__kind *kinds;
    size_t n, cap;
} found;

static enum dlock__kind list_kind(int kind)
{
    switch (kind) {
    case DLOCK__SQ_READ:
    case DLOCK__SQ_WRITE:
        return DLOCK__WRITE;
    case DLOCK__SQ_SEMAPHORE:
        return DLOCK__SEMAPHORE;
    default:
        return DLOCK__MUTEX;
    }
}

static int collect(void *arg, const char *name, const dlock__sq_row *r)
{
    found *f = arg;
    enum dlock__kind kind = list_kind(r->kind);

    if (strncmp(name, f->prefix, f->prefix_len) != 0 ||
        !dlock__sq_row_live(f->s, r, f->now_ms, NULL))
        return DLOCK_OK;
    /* holds come in name order: a name's other holds follow it; a
     * waiter's name may have come with the holds */
    for (size_t i = f->n; i > 0 && (f->waits || i == f->n); i--) {
        if (f->kinds[i - 1] == kind && strcmp(f->names[i - 1], name) == 0)
            return DLOCK_OK;
    }
    if (f->n == f->cap) {
        size_t more = f->cap == 0 ? 16 : f->cap * 2;
        char **names = realloc(f->names, more * sizeof *names);
        if (names != NULL)
            f->names = names;
        enum dlock__kind *kinds = realloc(f->kinds, more * sizeof *kinds);
        if (kinds != NULL)
            f->kinds = kinds;
        if (names == NULL || kinds == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
        f->cap = more;
    }
    f->names[f->n] = strdup(name);
    if (f->names[f->n] == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    f->kinds[f->n++] = kind;
    return DLOCK_OK;
}

int dlock__sq_list(dlock__store *st, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline_us)
{
    dlock__sq_store *s = SQSTORE(st);
    found f = {.s = s, .prefix = prefix, .prefix_len = strlen(prefix)};
    int missing;
    int rc = dlock__sq_ready(s, 0, deadline_us, &missing);
    if (rc != DLOCK_OK || missing) /* no file: no name, nothing made */
        return rc;
    rc = dlock__sq_begin(s, 0, deadline_us);
    if (rc != DLOCK_OK)
        return rc;
    f.now_ms = dlock__sq_boot_ms();
    rc = dlock__sq_each_row(s, SQ_ALL_ROWS, collect, &f);
    f.waits = 1;
    if (rc == DLOCK_OK)
        rc = dlock__sq_each_row(s, SQ_ALL_WAITS, collect, &f);
    rc = dlock__sq_end(s, 0, rc);
    for (size_t i = 0; rc == DLOCK_OK && i < f.n; i++) {
        if (sink(arg, f.names[i], f.kinds[i]) != 0)
            break;
    }
    for (size_t i = 0; i < f.n; i++)
        free(f.names[i]);
    free(f.names);
    free(f.kinds);
    return rc;
}
