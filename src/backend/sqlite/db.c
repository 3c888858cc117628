/* SPDX-License-Identifier: MIT */
/* db.c - the SQLite connection of one store: opening the file (and making
 * the lock tables if they are missing), transactions, and what SQLite's
 * codes mean to a caller.
 *
 * One connection per client, used by one thread at a time (the store's
 * mutex, held for a whole transaction; the connection is opened
 * SQLITE_OPEN_NOMUTEX since that mutex already serialises it). Every write
 * is in BEGIN IMMEDIATE, which takes the database's write lock at once, so
 * two writers never both read and then fail to upgrade (SQLITE_BUSY in the
 * middle of a transaction). Reads run in a plain BEGIN: in WAL mode they
 * never wait for a writer.
 *
 * When another process holds the write lock, SQLite calls the busy handler
 * below, which sleeps (1 ms doubling to 32 ms, jittered) until the
 * request's deadline, then gives up: SQLITE_BUSY, reported as
 * DLOCK_EUNREACHABLE (the store did not answer in time). Never a spin. */
#define _GNU_SOURCE
#include "internal.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/random.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA_VERSION 3

/* dlock_hold's columns (schema 3), for the schema and the upgrade from 2. */
#define HOLD_COLUMNS                                                                               \
    "  name TEXT NOT NULL,\n"                                                                      \
    "  owner TEXT NOT NULL,\n"                                                                     \
    "  kind INTEGER NOT NULL,\n"                                                                   \
    "  count INTEGER NOT NULL,\n"                                                                  \
    "  info TEXT NOT NULL,\n"                                                                      \
    "  fence INTEGER NOT NULL,\n"                                                                  \
    "  boot TEXT NOT NULL,\n"                                                                      \
    "  expires INTEGER NOT NULL,\n"                                                                \
    "  pid INTEGER NOT NULL,\n"                                                                    \
    "  start INTEGER NOT NULL,\n"                                                                  \
    "  pidns TEXT NOT NULL,\n"                                                                     \
    "  permits INTEGER NOT NULL DEFAULT 0,\n"                                                      \
    "  PRIMARY KEY (name, owner, kind)\n"

/* The schema (README.md explains each column). */
static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS dlock_meta (\n"
    "  key TEXT PRIMARY KEY,\n"
    "  value INTEGER NOT NULL\n"
    ") WITHOUT ROWID;\n"
    "INSERT OR IGNORE INTO dlock_meta (key, value) VALUES ('schema', 3);\n"
    "CREATE TABLE IF NOT EXISTS dlock_fence (\n"
    "  name TEXT PRIMARY KEY,\n"
    "  fence INTEGER NOT NULL\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS dlock_hold (\n" HOLD_COLUMNS ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS dlock_wait (\n"
    "  name TEXT NOT NULL,\n"
    "  owner TEXT NOT NULL,\n"
    "  boot TEXT NOT NULL,\n"
    "  expires INTEGER NOT NULL,\n"
    "  pid INTEGER NOT NULL,\n"
    "  start INTEGER NOT NULL,\n"
    "  pidns TEXT NOT NULL,\n"
    "  since INTEGER NOT NULL DEFAULT 0,\n"
    "  kind INTEGER NOT NULL DEFAULT 0,\n"
    "  count INTEGER NOT NULL DEFAULT 1,\n"
    "  permits INTEGER NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY (name, owner)\n"
    ") WITHOUT ROWID;\n";

/* Schema 1 to 2: a waiter's row says since when it waits (the oldest live
 * waiter has the first claim on a free name, lock.c). A row written by a
 * dlock of schema 1 has 0 there. */
static const char upgrade_1_sql[] = "ALTER TABLE dlock_wait ADD COLUMN since INTEGER NOT NULL "
                                    "DEFAULT 0;\n"
                                    "UPDATE dlock_meta SET value = 2 WHERE key = 'schema';\n";

/* Schema 2 to 3: the read-write lock and the semaphore. One owner may hold
 * a name as two kinds (a downgrade: the write lock, then the read lock
 * too), so a hold's key has its kind; a semaphore's rows keep its permits,
 * and a waiter's row what it waits for. Every row of schema 2 is a mutex's. */
static const char upgrade_2_sql[] =
    "CREATE TABLE dlock_hold_3 (\n" HOLD_COLUMNS ") WITHOUT ROWID;\n"
    "INSERT INTO dlock_hold_3 (name, owner, kind, count, info, fence, boot, expires, pid, start, "
    "pidns) SELECT name, owner, kind, count, info, fence, boot, expires, pid, start, pidns "
    "FROM dlock_hold;\n"
    "DROP TABLE dlock_hold;\n"
    "ALTER TABLE dlock_hold_3 RENAME TO dlock_hold;\n"
    "ALTER TABLE dlock_wait ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE dlock_wait ADD COLUMN count INTEGER NOT NULL DEFAULT 1;\n"
    "ALTER TABLE dlock_wait ADD COLUMN permits INTEGER NOT NULL DEFAULT 0;\n"
    "UPDATE dlock_meta SET value = 3 WHERE key = 'schema';\n";

static const char *const stmt_sql[SQ_NSTMTS] = {
    [SQ_ROWS] = "SELECT owner, kind, count, info, fence, boot, expires, pid, start, pidns, permits "
                "FROM dlock_hold WHERE name = ?1",
    [SQ_DEL_HOLD] = "DELETE FROM dlock_hold WHERE name = ?1 AND owner = ?2 AND kind = ?3",
    [SQ_NEXT_FENCE] = "INSERT INTO dlock_fence (name, fence) VALUES (?1, 1) "
                      "ON CONFLICT (name) DO UPDATE SET fence = fence + 1 RETURNING fence",
    [SQ_FENCE] = "SELECT fence FROM dlock_fence WHERE name = ?1",
    [SQ_INSERT] = "INSERT INTO dlock_hold (name, owner, kind, count, info, fence, boot, expires, "
                  "pid, start, pidns, permits) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                  "?11, ?12)",
    [SQ_LEASE] = "UPDATE dlock_hold SET expires = ?3, pid = ?4, start = ?5, pidns = ?6 "
                 "WHERE name = ?1 AND owner = ?2 AND kind = ?7",
    [SQ_DETACH] = "UPDATE dlock_hold SET pid = 0 WHERE name = ?1 AND owner = ?2 AND kind = ?3",
    [SQ_DEL_NAME] = "DELETE FROM dlock_hold WHERE name = ?1 AND kind BETWEEN ?2 AND ?3",
    [SQ_ALL_ROWS] = "SELECT name, owner, kind, count, info, fence, boot, expires, pid, start, "
                    "pidns, permits FROM dlock_hold ORDER BY name, kind",
    [SQ_WAITS] = "SELECT owner, kind, count, '', 0, boot, expires, pid, start, pidns, permits, "
                 "since FROM dlock_wait WHERE name = ?1 ORDER BY since, owner",
    [SQ_ALL_WAITS] = "SELECT name, owner, kind, count, '', 0, boot, expires, pid, start, pidns, "
                     "permits FROM dlock_wait ORDER BY name",
    /* a row that had lapsed (another boot, its lease over) starts its wait
     * again: since is kept only for a waiter that kept its place */
    [SQ_WAIT_PUT] =
        "INSERT INTO dlock_wait (name, owner, boot, expires, pid, start, pidns, since, kind, "
        "count, permits) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, max(?8, (SELECT coalesce(max(since), 0) + 1 FROM "
        "dlock_wait WHERE name = ?1 AND boot = ?3)), ?9, ?10, ?11) ON CONFLICT (name, owner) DO "
        "UPDATE SET "
        "since = CASE WHEN dlock_wait.boot = excluded.boot AND dlock_wait.expires > ?8 "
        "THEN dlock_wait.since ELSE excluded.since END, "
        "boot = excluded.boot, expires = excluded.expires, pid = excluded.pid, "
        "start = excluded.start, pidns = excluded.pidns, kind = excluded.kind, "
        "count = excluded.count, permits = excluded.permits",
    [SQ_WAIT_DEL] = "DELETE FROM dlock_wait WHERE name = ?1 AND owner = ?2",
    [SQ_WAIT_SWEEP] = "DELETE FROM dlock_wait WHERE name = ?1 AND (boot <> ?2 OR expires <= ?3)",
    [SQ_SET_COUNT] = "UPDATE dlock_hold SET count = ?4, fence = max(fence, ?5) "
                     "WHERE name = ?1 AND owner = ?2 AND kind = ?3",
};

int dlock__sq_error(dlock__sq_store *s, int rc, const char *what)
{
    const char *msg = s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    int sys = s->db != NULL ? sqlite3_system_errno(s->db) : 0;
    char why[160] = "";

    if (sys != 0)
        snprintf(why, sizeof why, " (%s)", strerror(sys));
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "%s: %s: the database stayed locked by another process until the "
                           "deadline (%s)",
                           s->label, what, msg);
    case SQLITE_NOMEM:
        return dlock__fail(DLOCK_ENOMEM, "%s: %s: out of memory", s->label, what);
    case SQLITE_NOTADB:
        return dlock__fail(DLOCK_EINVAL, "%s: %s: %s is not an SQLite database (%s)", s->label,
                           what, s->path, msg);
    case SQLITE_CORRUPT:
        return dlock__fail(DLOCK_EPROTO, "%s: %s: the database is damaged (%s)", s->label, what,
                           msg);
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return dlock__fail(DLOCK_ESERVER,
                           "%s: %s: cannot write the database or its -wal and -shm files "
                           "beside it: %s%s: the user must be able to create and write files "
                           "in its directory",
                           s->label, what, msg, why);
    default:
        return dlock__fail(DLOCK_ESERVER, "%s: %s: %s%s", s->label, what, msg, why);
    }
}

/* SQLite's busy handler: sleep a little, until the request's deadline. */
static int on_busy(void *arg, int count)
{
    dlock__sq_store *s = arg;
    int64_t left = s->busy_until_us - dlock__now_us();
    if (left <= 0)
        return 0;
    int64_t us = 1000ll << (count < 5 ? count : 5);
    us = us / 2 + dlock__random_below(us / 2 + 1);
    if (us > left)
        us = left;
    dlock__sq_wait_writer(s, us); /* woken early when the writer is done */
    return 1;
}

static int exec(dlock__sq_store *s, const char *sql, const char *what)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? DLOCK_OK : dlock__sq_error(s, rc, what);
}

/* A clear message for a path that cannot be a database file, before
 * SQLite says something vaguer. */
static int check_path(dlock__sq_store *s)
{
    struct stat st;
    char dir[sizeof s->path];

    if (stat(s->path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return dlock__fail(DLOCK_EINVAL, "%s: %s is a directory, not a database file", s->label,
                               s->path);
        if (!S_ISREG(st.st_mode))
            return dlock__fail(DLOCK_EINVAL, "%s: %s is not a regular file", s->label, s->path);
        return DLOCK_OK;
    }
    if (errno != ENOENT)
        return dlock__fail(DLOCK_ESERVER, "%s: %s: %s", s->label, s->path, strerror(errno));
    snprintf(dir, sizeof dir, "%s", s->path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dlock__fail(DLOCK_EINVAL,
                           "%s: the directory %s does not exist: create it (mkdir -p %s) or "
                           "name a file in a directory that exists",
                           s->label, dir, dir);
    return DLOCK_OK;
}

/* Why the database could not be written, said with what to do, when the
 * cause is this user's rights or a read-only file system (SQLite's own
 * words, "attempt to write a readonly database" or "unable to open
 * database file", name neither the file nor the fix); rc when it is
 * something else. */
static int why_unwritable(dlock__sq_store *s, int rc)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char file[sizeof s->path + 8], dir[sizeof s->path];
    unsigned uid = (unsigned) geteuid();

    if (rc != DLOCK_ESERVER)
        return rc;
    /* the database, then the files SQLite keeps beside it in WAL mode */
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(file, sizeof file, "%s%s", s->path, suffixes[i]);
        if (access(file, F_OK) != 0 || access(file, R_OK | W_OK) == 0)
            continue;
        if (errno == EROFS)
            return dlock__fail(DLOCK_ESERVER,
                               "%s: %s is on a read-only file system: put the database on a "
                               "writable one",
                               s->label, file);
        return dlock__fail(DLOCK_ESERVER,
                           "%s: %s is not readable and writable by this user (uid %u)%s: give "
                           "the user read and write permission on it (chown or chmod), or use "
                           "another path",
                           s->label, file, uid,
                           i == 0 ? "" : ", and SQLite keeps it beside the database in WAL mode");
    }
    snprintf(dir, sizeof dir, "%s", s->path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    if (access(dir, W_OK | X_OK) != 0) {
        int rofs = errno == EROFS;
        int exists = access(s->path, F_OK) == 0;
        return dlock__fail(DLOCK_ESERVER,
                           "%s: the directory %s is %s for this user (uid %u), and SQLite "
                           "creates %s -wal and -shm files there: %s",
                           s->label, dir, rofs ? "on a read-only file system" : "not writable", uid,
                           exists ? "the database's" : "the database and its",
                           rofs ? "put the database on a writable file system"
                                : "give the user write permission on the directory, or use a "
                                  "path in one it may write");
    }
    return rc;
}

/* The tables, made if missing; a database made by a newer dlock is
 * refused rather than misread. */
static int schema(dlock__sq_store *s)
{
    sqlite3_stmt *st = NULL;
    int rc, version = 0;

    /* Most opens find the tables there: a read, no write lock. */
    rc = sqlite3_prepare_v2(s->db, "SELECT value FROM dlock_meta WHERE key = 'schema'", -1, &st,
                            NULL);
    if (rc == SQLITE_OK) {
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW)
            version = sqlite3_column_int(st, 0);
        else if (step != SQLITE_DONE)
            rc = step;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_ERROR) /* SQLITE_ERROR: no such table */
        return dlock__sq_error(s, rc, "reading the schema");
    if (version > SCHEMA_VERSION)
        return dlock__fail(DLOCK_ENOTSUP,
                           "%s: the lock tables are of schema %d, made by a newer dlock (this "
                           "one knows %d)",
                           s->label, version, SCHEMA_VERSION);
    if (version == SCHEMA_VERSION)
        return DLOCK_OK;
    rc = exec(s, "BEGIN IMMEDIATE", "creating the lock tables");
    if (rc != DLOCK_OK)
        return rc;
    /* again under the write lock: another process may have made or
     * upgraded the tables since the read above */
    version = 0;
    rc = sqlite3_prepare_v2(s->db, "SELECT value FROM dlock_meta WHERE key = 'schema'", -1, &st,
                            NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    rc = DLOCK_OK;
    if (version > SCHEMA_VERSION)
        rc = dlock__fail(DLOCK_ENOTSUP,
                         "%s: the lock tables are of schema %d, made by a newer dlock (this "
                         "one knows %d)",
                         s->label, version, SCHEMA_VERSION);
    if (version == 1)
        rc = exec(s, upgrade_1_sql, "upgrading the lock tables");
    if (rc == DLOCK_OK && (version == 1 || version == 2))
        rc = exec(s, upgrade_2_sql, "upgrading the lock tables");
    if (rc == DLOCK_OK && version < SCHEMA_VERSION)
        rc = exec(s, schema_sql, "creating the lock tables");
    if (rc == DLOCK_OK)
        rc = exec(s, "COMMIT", "creating the lock tables");
    if (rc != DLOCK_OK)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

static int journal_wal(dlock__sq_store *s)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *mode = (const char *) sqlite3_column_text(st, 0);
            rc = mode != NULL && strcmp(mode, "wal") == 0
                     ? DLOCK_OK
                     : dlock__fail(DLOCK_ESERVER,
                                   "%s: the database cannot use WAL mode (journal mode '%s'): "
                                   "is it on a network file system?",
                                   s->label, mode != NULL ? mode : "");
            sqlite3_finalize(st);
            return rc;
        }
    }
    rc = dlock__sq_error(s, rc, "setting WAL mode");
    sqlite3_finalize(st);
    return rc;
}

static int db_open(dlock__sq_store *s, int64_t connect_ms)
{
    int rc = check_path(s);
    if (rc != DLOCK_OK)
        return rc;
    s->busy_until_us = dlock__now_us() + connect_ms * 1000;
    int src = sqlite3_open_v2(s->path, &s->db,
                              SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                                  SQLITE_OPEN_EXRESCODE,
                              NULL);
    if (src != SQLITE_OK)
        return why_unwritable(s, dlock__sq_error(s, src, "opening the database"));
    sqlite3_busy_handler(s->db, on_busy, s);
    /* Switching a new file to WAL, or reading it while another process
     * does, can be SQLITE_BUSY at once, without the busy handler (SQLite
     * refuses to wait where two connections could wait for each other):
     * try again after the same sleeps, until connect_ms is over. */
    for (int tries = 0;; tries++) {
        rc = journal_wal(s);
        if (rc == DLOCK_OK)
            rc = schema(s);
        if (rc != DLOCK_EUNREACHABLE || !on_busy(s, tries))
            break;
    }
    rc = why_unwritable(s, rc);
    /* FULL: a commit is on disk before it is answered, so that the fence
     * counter never goes back, even across a power loss. */
    if (rc == DLOCK_OK)
        rc = exec(s, "PRAGMA synchronous = FULL", "setting synchronous");
    for (int i = 0; rc == DLOCK_OK && i < SQ_NSTMTS; i++) {
        src = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[i],
                                 NULL);
        if (src != SQLITE_OK)
            rc = dlock__sq_error(s, src, "preparing a statement");
    }
    /* the file as the path names it now, made and in WAL mode: the one
     * db has open (a file put at the path in between is not told) */
    struct stat st;
    if (rc == DLOCK_OK && stat(s->path, &st) == 0) {
        s->file_dev = st.st_dev;
        s->file_ino = st.st_ino;
        s->file_known = 1;
    }
    return rc;
}

const char *dlock__sq_file_gone(const dlock__sq_store *s)
{
    struct stat st;

    if (!s->file_known)
        return NULL;
    if (stat(s->path, &st) != 0)
        return errno == ENOENT || errno == ENOTDIR
                   ? "the database file was removed (a lock taken at its path now is in a new file)"
                   : NULL; /* (not known: as before) */
    if (st.st_dev != s->file_dev || st.st_ino != s->file_ino)
        return "the database file was replaced (a lock taken at its path now is in the new file)";
    return NULL;
}

static int lock_by(dlock__sq_store *s, int64_t deadline_us);

/* Opens the file (making it when create), its tables and the wake file,
 * under the mutex; *missing when it is not there and !create. */
static int open_locked(dlock__sq_store *s, int create, int *missing)
{
    *missing = 0;
    if (atomic_load_explicit(&s->opened, memory_order_relaxed))
        return DLOCK_OK;
    if (!create && access(s->path, F_OK) != 0 && errno == ENOENT) {
        *missing = 1;
        return DLOCK_OK;
    }
    int rc = db_open(s, s->connect_ms);
    if (rc != DLOCK_OK) {
        dlock__sq_db_close(s); /* tried again at the next call */
        return rc;
    }
    dlock__sq_wake_open(s);
    /* every field the open wrote (db, stmts, wake) before the flag: a
     * thread that sees it set reads them without the mutex (wake.c) */
    atomic_store_explicit(&s->opened, 1, memory_order_release);
    return DLOCK_OK;
}

int dlock__sq_db_start(dlock__sq_store *s, int64_t connect_ms)
{
    s->connect_ms = connect_ms;
    int rc = check_path(s);
    if (rc != DLOCK_OK)
        return rc;
    if (access(s->path, F_OK) != 0 && errno == ENOENT) {
        /* Made by the first call that takes a lock, not here: a read-only
         * command (status, list, unlock --force) of a mistyped path made
         * the file and then said "free" of it. A directory this user may
         * not write is still told now. */
        char dir[sizeof s->path];
        snprintf(dir, sizeof dir, "%s", s->path);
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            slash[1] = '\0';
        else if (slash != NULL)
            *slash = '\0';
        if (access(dir, W_OK | X_OK) != 0)
            return why_unwritable(s, DLOCK_ESERVER);
        return DLOCK_OK;
    }
    int missing;
    return open_locked(s, 1, &missing);
}

int dlock__sq_ready(dlock__sq_store *s, int create, int64_t deadline_us, int *missing)
{
    *missing = 0;
    if (atomic_load_explicit(&s->opened, memory_order_acquire))
        return DLOCK_OK;
    if (lock_by(s, deadline_us) != 0)
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "%s: another request of this client kept the database until the "
                           "deadline (opening it)",
                           s->label);
    s->busy_until_us = deadline_us;
    int rc = open_locked(s, create, missing);
    pthread_mutex_unlock(&s->mu);
    if (rc == DLOCK_OK && *missing && !atomic_exchange(&s->missing_said, 1))
        DLOCK__LOG(s->base.host.log, DLOCK_LOG_WARN,
                   "%s: no lock file at %s (nothing was ever locked there, or the path is "
                   "mistyped); it is made by the first lock taken there",
                   s->label, s->path);
    return rc;
}

void dlock__sq_db_close(dlock__sq_store *s)
{
    for (int i = 0; i < SQ_NSTMTS; i++) {
        sqlite3_finalize(s->stmts[i]);
        s->stmts[i] = NULL;
    }
    if (s->db != NULL)
        sqlite3_close_v2(s->db);
    s->db = NULL;
}

sqlite3_stmt *dlock__sq_stmt(dlock__sq_store *s, enum dlock__sq_stmt which)
{
    sqlite3_stmt *st = s->stmts[which];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

/* Takes the store's mutex by deadline_us: 0 if taken. Another thread of
 * the client may hold it for a whole request waiting for the write lock
 * (up to that request's own deadline, which may be later than this one's):
 * waiting for it without a bound made calls overrun theirs (the fault
 * suite on sqlite, seed 11: a wait of 641 ms took 2210 ms). */
static int lock_by(dlock__sq_store *s, int64_t deadline_us)
{
    if (deadline_us >= DLOCK__NEVER)
        return pthread_mutex_lock(&s->mu);
    /* pthread_mutex_timedlock counts on CLOCK_REALTIME: the monotonic
     * time left, from now on that clock */
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    int64_t left = deadline_us - dlock__now_us();
    if (left < 0)
        left = 0;
    int64_t ns = (int64_t) real.tv_nsec + (left % 1000000) * 1000;
    real.tv_sec += (time_t) (left / 1000000 + ns / 1000000000);
    real.tv_nsec = (long) (ns % 1000000000);
    int rc;
    do
        rc = pthread_mutex_timedlock(&s->mu, &real);
    while (rc == EINTR);
    return rc;
}

int dlock__sq_begin(dlock__sq_store *s, int write, int64_t deadline_us)
{
    if (lock_by(s, deadline_us) != 0)
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "%s: another request of this client kept the database until the "
                           "deadline (waiting for another process's write lock)",
                           s->label);
    s->busy_until_us = deadline_us;
    /* a call that is not an operator's makes the file (dlock__sq_ready) */
    int missing;
    int rc = open_locked(s, 1, &missing);
    if (rc != DLOCK_OK) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    rc = exec(s, write ? "BEGIN IMMEDIATE" : "BEGIN", "starting a transaction");
    s->in_write = write && rc == DLOCK_OK;
    if (rc != DLOCK_OK)
        pthread_mutex_unlock(&s->mu);
    return rc;
}

int dlock__sq_end(dlock__sq_store *s, int commit, int rc)
{
    for (int i = 0; i < SQ_NSTMTS; i++)
        sqlite3_reset(s->stmts[i]); /* no statement keeps the transaction open */
    if (commit) {
        /* if the commit fails the transaction is rolled back: nothing of
         * it happened, and the caller reports the failure, not rc */
        int crc = exec(s, "COMMIT", "committing");
        if (crc != DLOCK_OK) {
            rc = crc;
            if (!sqlite3_get_autocommit(s->db))
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        }
    } else if (!sqlite3_get_autocommit(s->db)) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
    int wrote = s->in_write;
    s->in_write = 0;
    pthread_mutex_unlock(&s->mu);
    if (wrote)
        dlock__sq_wake_writers(s);
    return rc;
}

const dlock__sq_proc *dlock__sq_me(dlock__sq_store *s)
{
    if (s->self.pid != (int64_t) getpid())
        dlock__sq_self(&s->self);
    return &s->self;
}
