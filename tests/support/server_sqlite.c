/* SPDX-License-Identifier: MIT */
/* server_sqlite.c - the "sqlite" kind: no server at all. The store is the
 * database file locks.db in the kind's temp dir, which the first client
 * makes; its URL is sqlite:///TMPDIR/locks.db. Nothing is started, so
 * there is nothing to stop, kill, pause or cut off with a proxy: the
 * conformance tests that need a link to a server are skipped ("link",
 * tests/conformance/conformance.h). */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void sqlite_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    (void) s;
    (void) bufs;
    argv[0] = NULL; /* never run: the kind has a file, not a server */
}

static int sqlite_answers(const dt_server *s)
{
    (void) s;
    return 1;
}

static void sqlite_wipe(const dt_server *s)
{
    static const char *const files[] = {"locks.db", "locks.db-wal", "locks.db-shm"};
    char path[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", s->dir, files[i]);
        unlink(path);
    }
}

static void sqlite_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "sqlite3 %s/locks.db ", s->dir);
}

/* Deletes lock NAME's hold rows (dlock_hold): the store forgets who holds
 * it. Its fence counter (dlock_fence) stays. */
static int op_drop_lock(dt_server *s, const char *name)
{
    char path[256], sql[600];
    if (name == NULL || strchr(name, '\'') != NULL) {
        fprintf(stderr, "sqlite drop_lock: want a lock name without quotes\n");
        return -1;
    }
    snprintf(path, sizeof path, "%s/locks.db", s->dir);
    snprintf(sql, sizeof sql, "DELETE FROM dlock_hold WHERE name = '%s';", name);
    const char *argv[] = {"sqlite3", "-bail", "-cmd", ".timeout 5000", path, sql, NULL};
    return dt__run_quiet(argv, 8000) == 0 ? 0 : -1;
}

static const dt_server_op_entry sqlite_ops[] = {
    {"drop_lock", "delete lock NAME's hold rows (dlock_hold; the fence counter stays)",
     op_drop_lock, 2},
    {NULL, NULL, NULL, 0},
};

const dt_server_kind dt__sqlite_kind = {
    .name = "sqlite",
    .scheme = "sqlite",
    .durable = 1,
    .start_timeout_ms = 1000,
    .argv = sqlite_argv,
    .answers = sqlite_answers,
    .wipe = sqlite_wipe,
    .cli_prefix = sqlite_cli_prefix,
    .ops = sqlite_ops,
    .file = "locks.db",
};
