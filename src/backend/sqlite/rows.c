/* SPDX-License-Identifier: MIT */
/* rows.c - the holds of dlock_hold as rows, and whether each is live.
 *
 * A row is a hold until one of three things ends it, judged by whoever
 * reads it (there is no server to expire it):
 *   - it was written under another boot of the host (boot column);
 *   - its expiry (CLOCK_BOOTTIME ms) has passed;
 *   - the process that holds it is gone (pid, start, pidns: host.c), which
 *     frees the lock at once instead of after the lease. A detached hold
 *     (pid 0) is bound to no process and lives its lease.
 * A writer that finds a dead row deletes it in the transaction that
 * needs the name; a reader just skips it. */
#include "internal.h"

#include "../../base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void text_col(sqlite3_stmt *st, int col, char *buf, size_t len)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    snprintf(buf, len, "%s", v != NULL ? (const char *) v : "");
}

/* Columns from `first` on: owner, kind, count, info, fence, boot, expires,
 * pid, start, pidns, permits, and a waiter's since if there is a twelfth. */
static void read_row(sqlite3_stmt *st, int first, dlock__sq_row *r)
{
    memset(r, 0, sizeof *r);
    text_col(st, first, r->owner, sizeof r->owner);
    r->kind = sqlite3_column_int(st, first + 1);
    r->count = sqlite3_column_int64(st, first + 2);
    text_col(st, first + 3, r->info, sizeof r->info);
    r->fence = (uint64_t) sqlite3_column_int64(st, first + 4);
    text_col(st, first + 5, r->boot, sizeof r->boot);
    r->expires_ms = sqlite3_column_int64(st, first + 6);
    r->proc.pid = sqlite3_column_int64(st, first + 7);
    r->proc.start = sqlite3_column_int64(st, first + 8);
    text_col(st, first + 9, r->proc.pidns, sizeof r->proc.pidns);
    r->permits = sqlite3_column_int64(st, first + 10);
    if (sqlite3_column_count(st) > first + 11)
        r->since_ms = sqlite3_column_int64(st, first + 11); /* a waiter's row */
}

int dlock__sq_rows(dlock__sq_store *s, enum dlock__sq_stmt which, const char *name,
                   dlock__sq_row **rows, size_t *n)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, which);
    size_t cap = 0;
    int rc;

    *rows = NULL;
    *n = 0;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t more = cap == 0 ? 2 : cap * 2;
            dlock__sq_row *grown = realloc(*rows, more * sizeof *grown);
            if (grown == NULL) {
                free(*rows);
                *rows = NULL;
                *n = 0;
                sqlite3_reset(st);
                return dlock__fail(DLOCK_ENOMEM, "out of memory");
            }
            *rows = grown;
            cap = more;
        }
        read_row(st, 0, &(*rows)[(*n)++]);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        free(*rows);
        *rows = NULL;
        *n = 0;
        return dlock__sq_error(s, rc, "reading the holds");
    }
    return DLOCK_OK;
}

int dlock__sq_row_live(const dlock__sq_store *s, const dlock__sq_row *r, int64_t now_ms,
                       const char **why)
{
    const char *dead = NULL;
    if (strcmp(r->boot, s->boot) != 0)
        dead = "written before the host's last boot";
    else if (r->expires_ms <= now_ms)
        dead = "its lease ran out";
    else if (dlock__sq_proc_gone(&r->proc))
        dead = "its process is gone";
    if (why != NULL)
        *why = dead;
    return dead == NULL;
}

int dlock__sq_delete(dlock__sq_store *s, const char *name, const char *owner, int kind)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_DEL_HOLD);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, owner, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, kind);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? DLOCK_OK : dlock__sq_error(s, rc, "deleting a hold");
}

int dlock__sq_fence(dlock__sq_store *s, const char *name, uint64_t *fence)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, SQ_FENCE);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    *fence = rc == SQLITE_ROW ? (uint64_t) sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? DLOCK_OK
                                                 : dlock__sq_error(s, rc, "reading the fence");
}

int dlock__sq_kind(const dlock__lock_spec *spec)
{
    switch (spec->kind) {
    case DLOCK__READ:
        return DLOCK__SQ_READ;
    case DLOCK__WRITE:
        return DLOCK__SQ_WRITE;
    case DLOCK__SEMAPHORE:
        return DLOCK__SQ_SEMAPHORE;
    default:
        return DLOCK__SQ_MUTEX;
    }
}

/* The lock a kind belongs to: read and write holds are of one lock. */
static enum dlock__held_as lock_of(int kind)
{
    switch (kind) {
    case DLOCK__SQ_READ:
    case DLOCK__SQ_WRITE:
        return DLOCK__HELD_AS_RW;
    case DLOCK__SQ_SEMAPHORE:
        return DLOCK__HELD_AS_SEMAPHORE;
    default:
        return DLOCK__HELD_AS_MUTEX;
    }
}

enum dlock__held_as dlock__sq_held_as(int kind, int want)
{
    return lock_of(kind) == lock_of(want) ? DLOCK__HELD_AS_SAME : lock_of(kind);
}

int dlock__sq_each_row(dlock__sq_store *s, enum dlock__sq_stmt which,
                       int (*fn)(void *arg, const char *name, const dlock__sq_row *r), void *arg)
{
    sqlite3_stmt *st = dlock__sq_stmt(s, which);
    dlock__sq_row r;
    int rc, code = DLOCK_OK;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(st, 0);
        read_row(st, 1, &r);
        code = fn(arg, name != NULL ? (const char *) name : "", &r);
        if (code != DLOCK_OK)
            break;
    }
    if (code == DLOCK_OK && rc != SQLITE_DONE)
        code = dlock__sq_error(s, rc, "reading the holds");
    sqlite3_reset(st);
    return code;
}
