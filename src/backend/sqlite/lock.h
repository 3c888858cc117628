/* SPDX-License-Identifier: MIT */
/* lock.h - a lock's steps in the SQLite store (lock.c). */
#ifndef DLOCK_SQLITE_LOCK_H
#define DLOCK_SQLITE_LOCK_H

#include "internal.h"

int dlock__sq_acquire(dlock__store *st, dlock__store_lock *sl, dlock__attempt *a);
int dlock__sq_acquire_many(dlock__store *st, dlock__store_lock *const *ls, size_t n,
                           const char *token, int64_t lease_ms, int64_t deadline_us,
                           uint64_t *fences, dlock__session **sessions, size_t *busy,
                           int64_t *busy_ttl_ms);
int dlock__sq_cancel(dlock__store *st, dlock__store_lock *sl, const char *token,
                     int64_t deadline_us);
int dlock__sq_release(dlock__store *st, dlock__store_lock *sl, const char *token, uint64_t fence,
                      int64_t deadline_us);
int dlock__sq_extend(dlock__store *st, dlock__store_lock *sl, const char *token, uint64_t fence,
                     int64_t lease_ms, int at_least, int64_t deadline_us);
int dlock__sq_renew(dlock__store *st, dlock__renewal *items, size_t n, int64_t deadline_us);
void dlock__sq_detach(dlock__store *st, dlock__store_lock *sl);

#endif
