/* SPDX-License-Identifier: MIT */
/* internal.h - the SQLite backend's state, shared by its files (README.md
 * has the map, sqlite.c the design note). */
#ifndef DLOCK_SQLITE_INTERNAL_H
#define DLOCK_SQLITE_INTERNAL_H

#include "../backend.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

/* The kind column of dlock_hold and dlock_wait: which lock of the name a
 * row holds or waits for (one name is one lock: the kinds exclude each
 * other, lock.c). */
enum { DLOCK__SQ_MUTEX = 0, DLOCK__SQ_READ = 1, DLOCK__SQ_WRITE = 2, DLOCK__SQ_SEMAPHORE = 3 };

/* The kind column's value for a lock of this spec. */
int dlock__sq_kind(const dlock__lock_spec *spec);

/* Who a process is on this host: pid, its start time (clock ticks after
 * boot, /proc/PID/stat field 22) and its pid namespace
 * (readlink /proc/self/ns/pid), all three needed to tell it apart from a
 * later process that got the same pid. */
typedef struct dlock__sq_proc {
    int64_t pid;
    int64_t start;
    char pidns[48];
} dlock__sq_proc;

/* The statements a store keeps prepared (db.c has their text). */
enum dlock__sq_stmt {
    SQ_ROWS,       /* the holds of a name */
    SQ_DEL_HOLD,   /* one hold (name, owner, kind) */
    SQ_NEXT_FENCE, /* the name's fence counter, one up */
    SQ_FENCE,      /* the name's fence counter */
    SQ_INSERT,     /* a new hold */
    SQ_LEASE,      /* a hold's new expiry and process */
    SQ_DETACH,     /* a hold no longer bound to its process */
    SQ_DEL_NAME,   /* every hold of a name, of kinds ?2 to ?3 */
    SQ_ALL_ROWS,   /* every hold (list) */
    SQ_WAITS,      /* the waiters of a name, as rows of holds, oldest first */
    SQ_ALL_WAITS,  /* every waiter (list) */
    SQ_WAIT_PUT,   /* a waiter's row, new or renewed */
    SQ_WAIT_DEL,   /* a waiter's row gone */
    SQ_WAIT_SWEEP, /* the expired waiter rows of a name gone */
    SQ_SET_COUNT,  /* a shared hold's count (read holds, permits) of one owner */
    SQ_NSTMTS
};

typedef struct dlock__sq_store {
    dlock__store base;
    pthread_mutex_t mu; /* one transaction at a time on db */
    sqlite3 *db;
    sqlite3_stmt *stmts[SQ_NSTMTS];
    int64_t busy_until_us; /* the busy handler gives up then (under mu) */
    int64_t timeout_ms;    /* the client's command timeout */
    int in_write;          /* the transaction under way holds the write lock (under mu) */
    dlock__sq_proc self; /* this process, as holds record it (under mu; read again after a fork) */
    char boot[48];       /* this boot's id */
    _Atomic uint32_t *wake;  /* the wake counters (wake.c), mapped; NULL: waiters poll */
    int wake_writable;       /* mapped for writing: this process's releases wake */
    char wake_why[4400];     /* why not, or why read-only ("": mapped for writing) */
    atomic_int wake_said;    /* wake_why logged (at the first wait) */
    _Atomic int opened;      /* the database and the wake file are open (set once, under mu) */
    atomic_int missing_said; /* the warning of a missing file logged (dlock__sq_ready) */
    int64_t connect_ms;      /* how long an open waits for another process's write lock */
    dev_t file_dev;          /* the file db has open, as the path named it at the open */
    ino_t file_ino;          /* (file_known: set when it opened) */
    int file_known;
    char path[4096];
    char label[4200]; /* "sqlite:///path" */
} dlock__sq_store;

typedef struct dlock__sq_lock {
    dlock__store_lock base;
    char *name;
    char token[72]; /* the owner token of the last grant (for detach) */
} dlock__sq_lock;

#define SQSTORE(s) DLOCK__STORE_OF(dlock__sq_store, s)
#define SQLOCK(l)  DLOCK__STORE_OF(dlock__sq_lock, l)

/* One row of dlock_hold, as read (strings point into buffers of the row). */
typedef struct dlock__sq_row {
    char owner[72];
    int kind;
    int64_t count;   /* 1; an owner's read holds; a semaphore holder's (waiter's) permits */
    int64_t permits; /* a semaphore's permits, as its holder (waiter) declared them */
    char info[400];
    uint64_t fence;
    char boot[48];
    int64_t expires_ms; /* on CLOCK_BOOTTIME of boot */
    dlock__sq_proc proc;
    int64_t since_ms; /* a waiter's: since when it waits (CLOCK_BOOTTIME) */
} dlock__sq_row;

/* ------------------------------------------------ host.c: this host's clock and processes */

/* Milliseconds on CLOCK_BOOTTIME: shared by every process of the host,
 * never going back while the host runs (suspend included). */
int64_t dlock__sq_boot_ms(void);
/* This boot's id (/proc/sys/kernel/random/boot_id) into buf. */
int dlock__sq_boot_id(char *buf, size_t len);
/* Who the calling process is (read again after a fork). */
void dlock__sq_self(dlock__sq_proc *out);
/* Whether the process p names is gone: 1 gone (no such pid, or the pid is
 * another process now, or a zombie), 0 alive or not known (another pid
 * namespace, /proc unreadable, p->pid 0: a detached hold). */
int dlock__sq_proc_gone(const dlock__sq_proc *p);

/* ------------------------------------------------ db.c: the connection and transactions */

/* At the store's open: checks s->path and opens the database there with
 * the lock tables, WAL mode and the busy handler (waiting up to
 * connect_ms for another process's write lock), and the wake file; or,
 * when there is no file at the path yet, leaves both to the first call
 * that needs them (dlock__sq_ready), after checking that its directory
 * may be written. */
int dlock__sq_db_start(dlock__sq_store *s, int64_t connect_ms);
/* Before a call's first transaction: the database opened, and made when
 * create. A read-only call (an operator's: query, holders, list,
 * force-unlock) passes create 0: when there is no file at the path it
 * makes none, sets *missing (the call then reports nothing held) and logs
 * a warning, once per store, that says so. dlock__sq_begin opens (and
 * makes) it too, for every other call. */
int dlock__sq_ready(dlock__sq_store *s, int create, int64_t deadline_us, int *missing);
void dlock__sq_db_close(dlock__sq_store *s);
/* Takes the store's mutex and bounds SQLite's busy waits by deadline_us;
 * then BEGIN IMMEDIATE (write) or BEGIN (read). On failure the mutex is
 * released and the code returned. */
int dlock__sq_begin(dlock__sq_store *s, int write, int64_t deadline_us);
/* COMMIT (commit) or ROLLBACK, and releases the mutex; returns rc, or
 * COMMIT's failure if it failed (nothing was written then). */
int dlock__sq_end(dlock__sq_store *s, int commit, int rc);
/* A prepared statement, reset and cleared (under the mutex). */
sqlite3_stmt *dlock__sq_stmt(dlock__sq_store *s, enum dlock__sq_stmt which);
/* A DLOCK_E* code for SQLite's rc, with the detail recorded. */
int dlock__sq_error(dlock__sq_store *s, int rc, const char *what);
/* Why the path no longer names the file db has open (it was removed, or
 * replaced by another file), a static string; NULL while it does. Holds
 * in the file db has open then exclude no one: a lock taken at the path
 * is in another file. */
const char *dlock__sq_file_gone(const dlock__sq_store *s);

/* This process (under the mutex). */
const dlock__sq_proc *dlock__sq_me(dlock__sq_store *s);

/* ------------------------------------------------ wake.c: waking waiters on this host */

/* Maps the wake counters beside the database (PATH-dlockwake), creating
 * the file if need be; on failure the store's waiters poll (logged). */
void dlock__sq_wake_open(dlock__sq_store *s);
void dlock__sq_wake_close(dlock__sq_store *s);
/* Logs once, at info, why this process polls or wakes no one, if it does. */
void dlock__sq_wake_explain(dlock__sq_store *s);
/* The counter of name's word: read before looking at the name. */
uint32_t dlock__sq_wake_seq(dlock__sq_store *s, const char *name);
/* Sleeps while name's counter is still seq, until until_us (monotonic) at
 * most; 1 if it moved (someone woke the name's word), 0 if not. Returns at
 * once when the store has no counters. */
int dlock__sq_wake_wait(dlock__sq_store *s, const char *name, uint32_t seq, int64_t until_us);
/* After a commit that freed name or changed its line: wakes its waiters. */
void dlock__sq_wake(dlock__sq_store *s, const char *name);
/* After a write transaction ended (the write lock is free): wakes those
 * waiting for it. */
void dlock__sq_wake_writers(dlock__sq_store *s);
/* Waits for the write lock to be let go, us at most (SQLite's busy
 * handler: it then tries again). */
void dlock__sq_wait_writer(dlock__sq_store *s, int64_t us);

/* ------------------------------------------------ rows.c: holds as rows */

/* Reads every hold (which: SQ_ROWS) or waiter (SQ_WAITS) of name into
 * *rows (malloc'd, *n of them). */
int dlock__sq_rows(dlock__sq_store *s, enum dlock__sq_stmt which, const char *name,
                   dlock__sq_row **rows, size_t *n);
/* 1 if the row's hold is live now (this boot, before its expiry, its
 * process not known gone); why (if not NULL) says why not. */
int dlock__sq_row_live(const dlock__sq_store *s, const dlock__sq_row *r, int64_t now_ms,
                       const char **why);
/* Deletes one hold (of name, by owner, of kind). */
int dlock__sq_delete(dlock__sq_store *s, const char *name, const char *owner, int kind);
/* The name's fence counter (0: never held). */
int dlock__sq_fence(dlock__sq_store *s, const char *name, uint64_t *fence);
/* Calls fn for every hold (which: SQ_ALL_ROWS) or waiter (SQ_ALL_WAITS)
 * of every name, in name order, until it returns a code other than
 * DLOCK_OK (returned). */
int dlock__sq_each_row(dlock__sq_store *s, enum dlock__sq_stmt which,
                       int (*fn)(void *arg, const char *name, const dlock__sq_row *r), void *arg);
/* The held_as of a row's kind, seen by a contender of kind want. */
enum dlock__held_as dlock__sq_held_as(int kind, int want);

#endif
