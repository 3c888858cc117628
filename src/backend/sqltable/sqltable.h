/* SPDX-License-Identifier: MIT */
/* sqltable.h - the lock table of the SQL stores (mode=table): its
 * statements and the decoding of their answers, with no I/O and no client
 * library, so that every SQL store shares one design (README.md).
 *
 * The caller gives each value as an SQL literal of its own dialect (its
 * escaping is the store's business) and gets back the text of one request
 * (statements separated by ';', run in one round trip), malloc'd, NULL when
 * out of memory. Answers come back as the text of each column. */
#ifndef DLOCK_BACKEND_SQLTABLE_H
#define DLOCK_BACKEND_SQLTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "../backend.h"

enum dlock__sqlt_dialect {
    DLOCK__SQLT_MARIADB = 1, /* MariaDB 10.11 and MySQL 8: requests of several statements */
    DLOCK__SQLT_PG = 2,      /* PostgreSQL 14+: each request one statement, whose result is
                                the last statement's of MariaDB's request */
};

/* The tables: the locks, and the waiters polling for them (for query and
 * list). */
#define DLOCK__SQLT_TABLE "dlock_lock"
#define DLOCK__SQLT_WAIT  "dlock_lock_wait"

/* One statement, one row: the number of the two tables that exist, and
 * whether the waiters' table has the column since (1 or 0: added by this
 * version). */
char *dlock__sqlt_exists(enum dlock__sqlt_dialect d);
/* What the answer of dlock__sqlt_exists says the schema lacks: 0 nothing,
 * or the step to run next. */
#define DLOCK__SQLT_LACKS_TABLES 1 /* dlock__sqlt_schema, then look again */
#define DLOCK__SQLT_LACKS_SINCE  2 /* dlock__sqlt_upgrade */
int dlock__sqlt_lacks(const char *tables, const char *since);
/* Two statements: the tables made if missing (README.md: schema). */
char *dlock__sqlt_schema(enum dlock__sqlt_dialect d);
/* One statement: the waiters' table of an earlier version gets the column
 * since (idempotent; needs the ALTER right once). */
char *dlock__sqlt_upgrade(enum dlock__sqlt_dialect d);

/* First in line: how often the first waiter in line polls at most (ms)
 * while the row is free but claimed, the next ones twice as long each;
 * beyond DLOCK__SQLT_NEAR_HEAD waiters ahead, and behind a live holder,
 * the core's backoff rules. */
#define DLOCK__SQLT_HEAD_POLL_MS 4
#define DLOCK__SQLT_NEAR_HEAD    5

/* How a MariaDB take's transaction begins (one statement): under the
 * session's own isolation level (REPEATABLE READ unless the server is set
 * otherwise), not DLOCK__SQLT_BEGIN's READ COMMITTED, which a server with
 * binlog_format=STATEMENT refuses for InnoDB writes (error 1665): mutexes
 * and writers keep working there. What made REPEATABLE READ deadlock
 * (shared locks on the waiters' rows and the gaps beside them, held to
 * the COMMIT) is left out: the take counts the older waiters before the
 * transaction, with a plain read (sqltable.c, take). */
#define DLOCK__SQLT_TAKE_BEGIN "START TRANSACTION"
/* The count of the live waiters of key older than owner's wait (a
 * scalar subquery; a free row goes to a contender only when it is 0). */
char *dlock__sqlt_older(enum dlock__sqlt_dialect d, const char *key, const char *owner);
/* MariaDB: five statements (seven for a waiter). First the live waiters of
 * key older than owner (its own live waiter row's since, or now: first in
 * line, README.md) counted, a plain read before the transaction; then one
 * transaction, DLOCK__SQLT_TAKE_BEGIN first and COMMIT last (a request
 * that fails part-way leaves nothing): the row taken if it is already
 * owner's, or free or expired and that count is 0 (one statement, atomic:
 * of two takers one wins), then, the fourth (index 3), (fence, mine,
 * ms_left, ahead, owner, more...) of the row as it is now (ahead: the
 * count; owner: the row's; more: the caller's further columns, SQL text,
 * or NULL).
 * wait_ms > 0 (a caller that waits): two more before the COMMIT, owner's
 * waiter row kept for wait_ms unless it holds the lock now (its since kept
 * while it is live, now when it is new or had lapsed), removed if it does.
 * The caller holds the name's GET_LOCK around the request (every take's
 * guard), so no other take writes key's waiter rows meanwhile. */
char *dlock__sqlt_take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                       const char *owner, const char *info, int64_t lease_ms, int64_t wait_ms,
                       const char *more);
/* As dlock__sqlt_take, with the leases as SQL expressions of microseconds
 * (a literal, or a parameter such as "$4::bigint" for a statement
 * prepared once: the text then depends on no value), wait_us NULL for a
 * caller that does not wait. PG only, guard: a boolean expression (NULL:
 * true) evaluated once before anything is written, in the same statement
 * and transaction; when it is false nothing is written (no take, no
 * waiter row) and the answer's fifth column, 1 when it held, is 0. */
char *dlock__sqlt_take_expr(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                            const char *owner, const char *info, const char *lease_us,
                            const char *wait_us, const char *wait_owner, const char *guard);
/* PG: the owner of a mutex's waiter row is this and its token (a writer's
 * is its lock owner, DLOCK__SQLT_WRITER and its token; a reader's and a
 * semaphore holder's the bare token), so that a release can tell whom it
 * may hand the row to (wait_owner of dlock__sqlt_take_expr; README.md,
 * "The hand-over"). */
#define DLOCK__SQLT_MUTEX_WAIT "m:"
/* PG: a session-mode waiter's row (../pg/pg.c), under this and its token:
 * a session waiter kept out by a table holder takes its place in the
 * table's line, so that a release frees the row for it when it is first
 * (a row handed from one table holder to the next is never free). */
#define DLOCK__SQLT_SESSION_WAIT "s:"
/* PG, one statement: owner's waiter row of key made, or its lease
 * lengthened (its since kept while it is live: a lapsed row is a new
 * wait) to wait_us µs from now. */
char *dlock__sqlt_pg_wait_row(const char *key, const char *owner, const char *wait_us);
/* One statement: owner's waiter row removed (a wait given up). */
char *dlock__sqlt_leave(enum dlock__sqlt_dialect d, const char *key, const char *owner);
/* PG, one statement: the waiter row (wait_owner) removed, and the lock's
 * row freed (its waiters told) if a release handed it to owner and the
 * waiter had not taken it yet; one row: (1 when it freed it, the notice).
 * readers (a writer's leave; NULL: none): SQL of the latest end of the
 * owner's live reader rows, NULL when there is none; when there is, the
 * row becomes the readers' until then instead of free. */
char *dlock__sqlt_pg_leave(const char *key, const char *wait_owner, const char *owner,
                           const char *readers);
/* The take's answer decoded: 1 with *fence when owner holds it
 * now; 0 otherwise, with *left_ms the holder's lease left (>= 1), or -1
 * when the row is free but an older waiter has the first claim on it (for
 * a caller that waits (waits) near the head of the line, then
 * DLOCK__SQLT_HEAD_POLL_MS << ahead instead: its next poll). */
int dlock__sqlt_taken(const char *fence, const char *mine, const char *left, const char *ahead,
                      int waits, uint64_t *fence_out, int64_t *left_ms);

/* What a PostgreSQL release or forced unlock notifies (NOTIFY channel,
 * payload: the hex of the name's first DLOCK__SQLT_TAG_BYTES bytes, the
 * lock's tag; after a hand-over, a space and the hex of the new owner's
 * bytes: only that waiter looks again), for its waiters' wake-ups
 * (../pg/listen.c). */
#define DLOCK__SQLT_NOTIFY    "dlock_lock_free"
#define DLOCK__SQLT_TAG_BYTES 32

/* Two statements: the row freed if owner holds it (matched rows), then the
 * holder now (one row, its owner, or no row when nobody holds it). PG:
 * one statement, (matched, the holder before it, the notice): the row
 * freed only when no live waiter of the name other than owner is there;
 * with one the row is left as it is (matched 0, the holder before it
 * owner) and the caller hands it over with dlock__sqlt_pg_handover
 * (README.md, "The hand-over": the uncontended release stays small).
 * Notifies the lock's waiters when it let go, and its commit does not
 * wait for the WAL's flush. */
char *dlock__sqlt_release(enum dlock__sqlt_dialect d, const char *key, const char *owner);
/* PG, one statement: owner's row handed to the oldest live waiter of key
 * when that one waits for a mutex or a write (a new fence, a lease that
 * ends with its waiter row's, a notice that names it: README.md, "The
 * hand-over"), else freed as dlock__sqlt_release frees it; (matched, the
 * holder before it, the notice, -, 1 when it handed the row over). */
char *dlock__sqlt_pg_handover(const char *key, const char *owner);
/* Two statements: the lease set (at_least: only lengthened; lease_ms 0
 * with at_least: nothing written), then COUNT(*) of rows owner holds (1 or
 * 0). */
char *dlock__sqlt_extend(enum dlock__sqlt_dialect d, const char *key, const char *owner,
                         int64_t lease_ms, int at_least);

/* One held lock of a renewal batch. */
typedef struct dlock__sqlt_hold {
    const char *key_lit, *owner_lit; /* literals, for the request */
    const char *key, *owner;         /* the values, to match the answer's rows */
    int64_t lease_ms;
    int counted; /* MariaDB's shared holds: a reader's (handles of one owner share its row) */
    int held;    /* out: renewed */
} dlock__sqlt_hold;
/* Two statements for the whole batch: every lease renewed (one UPDATE),
 * then (key, owner) of each of them held now. */
char *dlock__sqlt_renew(enum dlock__sqlt_dialect d, const dlock__sqlt_hold *h, size_t n);
/* One row (key, owner) of the renewal's answer: marks the hold it names. */
void dlock__sqlt_renewed(dlock__sqlt_hold *h, size_t n, const char *key, const char *owner);

/* Two statements for the whole batch: every waiter's row of h (key_lit,
 * owner_lit; lease_ms: its waiter lease) kept for its lease if it is
 * live, then (key, owner) of each one kept (dlock__sqlt_renewed). */
char *dlock__sqlt_renew_waits(enum dlock__sqlt_dialect d, const dlock__sqlt_hold *h, size_t n);
/* One statement, one row: (owner, info, fence, ms_left, waiters) of the
 * lock (the first four NULL when it has no row); held when owner is not
 * empty and ms_left > 0. */
char *dlock__sqlt_query(enum dlock__sqlt_dialect d, const char *key);
/* One statement: the row's holder gone (the fence kept in the row). */
char *dlock__sqlt_force(enum dlock__sqlt_dialect d, const char *key);
/* One statement: lock_name of every lock held or waited for now whose name
 * starts with prefix (a literal of the name's bytes), once each. MariaDB:
 * (n, k), k 1 for a name the read-write lock holds, a name in two rows
 * when it is also waited for (the caller groups them). */
char *dlock__sqlt_list(enum dlock__sqlt_dialect d, const char *prefix);

/* The read-write lock (MariaDB only for now: NULL for PG). The name's row
 * is the lock: a writer holds it under DLOCK__SQLT_WRITER and its owner;
 * readers hold it under DLOCK__SQLT_READERS with a lease that ends no
 * sooner than the last reader's, and each reader has a row of its own in
 * DLOCK__SQLT_SHARE. owner: the reader's (the token's literal). */
#define DLOCK__SQLT_SHARE   "dlock_share"
#define DLOCK__SQLT_READERS "r:"
#define DLOCK__SQLT_WRITER  "w:"
#define DLOCK__SQLT_PERMITS "s:" /* a semaphore's holders: "s:N", N its permits */
/* What the owner of a lock row is: 'r' readers, 'w' a writer (*token after
 * its "w:"), 's' a semaphore's holders (*token its permits after "s:"),
 * 'm' a mutex (*token the owner), 0 free. */
int dlock__sqlt_holder_kind(const char *owner, const char **token);
/* The group of kinds one lock is: the mutex 'm', the read-write lock 'w'
 * (of 'r' and 'w'), the semaphore 's'. */
int dlock__sqlt_group(int kind);
/* Why a take of kind asks found the name held, when the holder's kind
 * alone does not say: readers hold it and a reader was refused, because
 * an older waiter (a writer) goes first; NULL otherwise. ahead: the
 * take's count of older live waiters. */
const char *dlock__sqlt_held_why(int row_kind, int asks, const char *ahead);
/* A refused take's holder as the core names it (one name is one lock):
 * DLOCK__HELD_AS_SAME when row_kind is of the lock asked for (asks). */
enum dlock__held_as dlock__sqlt_held_as(int row_kind, int asks);
/* Whether an owner (token) asking for kind asks holds the name already as
 * another kind (a row owned by its token as another kind: 1, else 0), or
 * -1 when shared holders of another kind hold it and only their rows say
 * whether the owner is one of them. A reader beside its owner's write is
 * a downgrade (taken, never asked here). row: the lock row's owner. */
int dlock__sqlt_holds_as_other(const char *row, const char *token, int asks);
/* The refusal of such a take: DLOCK_EDEADLK, naming both kinds. */
int dlock__sqlt_refuse_self(const char *name, const char *row, int asks);
/* DLOCK_OK, or DLOCK_EINVAL when a semaphore (of permits) finds the name
 * held by a semaphore of another number (row_kind 's', in_use its text). */
int dlock__sqlt_check_permits(const char *name, int row_kind, const char *in_use, int semaphore,
                              unsigned permits);
/* How every transaction of the shared holds begins (two statements):
 * READ COMMITTED for that transaction only. Its locking reads of a name's
 * holders' rows locked, under REPEATABLE READ, the gap after them too (the
 * next name's first row): transactions of different names deadlocked. A
 * server with binary logging and binlog_format=STATEMENT refuses InnoDB
 * writes under READ COMMITTED (error 1665); set per transaction, the
 * mutexes' statements, which need no such reads, run there as they are. */
#define DLOCK__SQLT_BEGIN "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION"
/* One statement: the readers' table made when missing. */
char *dlock__sqlt_share_schema(enum dlock__sqlt_dialect d);
/* Six statements (eight for a waiter, wait_ms > 0, as a take's), one
 * transaction (DLOCK__SQLT_BEGIN): the name's row taken or joined for readers (or beside
 * owner's own write), the reader's row written, (fence, mine, ms_left,
 * ahead, owner, shares) as a take's answer (the fifth statement; shares:
 * dlock__sqlt_shares), a waiter's rows, COMMIT last (nothing after it to
 * fail: a request sent again after a deadlock never takes twice). A
 * reader's or a semaphore holder's release, extend and renewal are the
 * same statements (below). */
char *dlock__sqlt_read_take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                            const char *owner, const char *info, int64_t lease_ms, int64_t wait_ms);
/* Eight statements (ten for a waiter), as dlock__sqlt_read_take's with
 * the answer the seventh: take permits of a semaphore of permits, all or
 * nothing, while those held by others leave room and no live waiter is
 * older (the name's row locked, the holders' permits counted with a
 * locking read, in one transaction). reads: see dlock__sqlt_read_take. */
char *dlock__sqlt_sem_take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                           const char *owner, const char *info, int64_t lease_ms, int64_t wait_ms,
                           unsigned permits, unsigned take);
/* Whether owner is among the shared holders of a row whose owner is the
 * readers' or a semaphore's, as an answer's column (SQL text, malloc'd). */
char *dlock__sqlt_shares(enum dlock__sqlt_dialect d, const char *key, const char *owner);
/* Eight statements, one transaction: one hold off the reader's row
 * (counted: a reader's, whose handles of one owner share the row; else a
 * semaphore holder's permits, all at once), the row gone at none
 * (statement 3 matched 1 when it held); the name's row freed, or its
 * lease lowered to the last holder's end. */
char *dlock__sqlt_read_release(enum dlock__sqlt_dialect d, const char *key, const char *owner,
                               int counted);
/* Seven statements: the write let go (statement 4 matched 1 when owner held
 * it), the name's row the readers' when owner reads beside it; the last
 * the holder now, as dlock__sqlt_release's. */
char *dlock__sqlt_write_release(enum dlock__sqlt_dialect d, const char *key, const char *owner);
/* Seven statements: the reader's lease set (as dlock__sqlt_extend; counted:
 * a reader's, whose row handles of one owner share, never lowered while
 * more than one holds it), the last COUNT(*): 1 while it holds. */
char *dlock__sqlt_read_extend(enum dlock__sqlt_dialect d, const char *key, const char *owner,
                              int64_t lease_ms, int at_least, int counted);
/* Seven statements, one transaction: the shared holders of h renewed (a
 * holder's row only while its lock's row is its, the lock's row raised
 * only by a live holder of it); the last (key, owner) of each one that
 * holds (dlock__sqlt_renewed). */
char *dlock__sqlt_read_renew(enum dlock__sqlt_dialect d, const dlock__sqlt_hold *h, size_t n);
/* One statement: (owner, info, count) of each live reader of key. */
char *dlock__sqlt_readers(enum dlock__sqlt_dialect d, const char *key);
/* One statement: every reader's row of key ended (a forced unlock). */
char *dlock__sqlt_share_force(enum dlock__sqlt_dialect d, const char *key);

#endif
