/* SPDX-License-Identifier: MIT */
/* lease.h - keeping an etcd hold alive (lease.c): the backend's extend,
 * renew and session_lost (backend.h), and the move of a held key to a
 * lease of its own, which etcd.c's acquire uses for a fixed lease. */
#ifndef DLOCK_ETCD_LEASE_H
#define DLOCK_ETCD_LEASE_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

/* Moves l's key to a lease of its own of lease_ms (rounded up to seconds),
 * if it still has its create revision (DLOCK_ELOST: it does not); one move
 * of a handle at a time (l->moving). */
int dlock__etcd_to_own_lease(dlock__etcd_store *e, dlock__etcd_lock *l, int64_t lease_ms,
                             int64_t deadline);

int dlock__etcd_extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                       int64_t lease_ms, int at_least, int64_t deadline);
int dlock__etcd_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline);
void dlock__etcd_session_lost(dlock__store *s, dlock__session *session, int64_t deadline);

#endif
