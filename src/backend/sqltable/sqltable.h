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

enum dlock__sqlt_dialect {
    DLOCK__SQLT_MARIADB = 1, /* MariaDB 10.11 and MySQL 8: requests of several statements */
    DLOCK__SQLT_PG = 2,      /* PostgreSQL 14+: each request one statement, whose result is
                                the last statement's of MariaDB's request */
};

/* The tables: the locks, and the waiters polling for them (for query and
 * list). */
#define DLOCK__SQLT_TABLE "dlock_lock"
#define DLOCK__SQLT_WAIT  "dlock_lock_wait"

/* One statement: 1 row, 1 column, the number of the two tables that exist. */
char *dlock__sqlt_exists(enum dlock__sqlt_dialect d);
/* Two statements: the tables (README.md: schema). */
char *dlock__sqlt_schema(enum dlock__sqlt_dialect d);

/* Two statements: the row taken if it is free, expired or already owner's
 * (one statement, atomic: of two takers one wins), then (fence, mine,
 * ms_left) of the row as it is now. wait_ms > 0 (a caller that waits):
 * two more, owner's waiter row kept for wait_ms unless it holds the lock
 * now, removed if it does. */
char *dlock__sqlt_take(enum dlock__sqlt_dialect d, const char *key, const char *lock_name,
                       const char *owner, const char *info, int64_t lease_ms, int64_t wait_ms);
/* One statement: owner's waiter row removed (a wait given up). */
char *dlock__sqlt_leave(enum dlock__sqlt_dialect d, const char *key, const char *owner);
/* The take's second statement decoded: 1 with *fence when owner holds it
 * now; 0 with *left_ms (the holder's lease left, >= 1) otherwise. */
int dlock__sqlt_taken(const char *fence, const char *mine, const char *left, uint64_t *fence_out,
                      int64_t *left_ms);

/* Two statements: the row freed if owner holds it (matched rows), then the
 * holder now (one row, its owner, or no row when nobody holds it). */
char *dlock__sqlt_release(enum dlock__sqlt_dialect d, const char *key, const char *owner);
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
    int held; /* out: renewed */
} dlock__sqlt_hold;
/* Two statements for the whole batch: every lease renewed (one UPDATE),
 * then (key, owner) of each of them held now. */
char *dlock__sqlt_renew(enum dlock__sqlt_dialect d, const dlock__sqlt_hold *h, size_t n);
/* One row (key, owner) of the renewal's answer: marks the hold it names. */
void dlock__sqlt_renewed(dlock__sqlt_hold *h, size_t n, const char *key, const char *owner);

/* One statement, one row: (owner, info, fence, ms_left, waiters) of the
 * lock (the first four NULL when it has no row); held when owner is not
 * empty and ms_left > 0. */
char *dlock__sqlt_query(enum dlock__sqlt_dialect d, const char *key);
/* One statement: the row's holder gone (the fence kept in the row). */
char *dlock__sqlt_force(enum dlock__sqlt_dialect d, const char *key);
/* One statement: lock_name of every lock held or waited for now whose name
 * starts with prefix (a literal of the name's bytes), once each. */
char *dlock__sqlt_list(enum dlock__sqlt_dialect d, const char *prefix);

#endif
