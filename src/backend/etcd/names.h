/* SPDX-License-Identifier: MIT */
/* names.h - the etcd keys of a lock name, and the lock of a key. Nothing
 * here does I/O.
 *
 * Contenders of lock N put their keys under one prefix per kind:
 *
 *   E/<id>                   mutex (etcd's concurrency.Mutex, etcdctl lock)
 *   E.rwlock/r-<id>, w-<id>  read-write lock
 *   E.semaphore/<id>         semaphore
 *
 * <id> being the lease in lower-case hex, then "-<slot>" for a further
 * handle of one client. E is N as it is, but for what would put one lock's
 * keys inside another's range (escape.h): '%' (%25); '/' (%2F), or the
 * lock `a` (which ranks every key under `a/`, as etcd's Mutex does) would
 * rank the keys of `a/b`; and the '.' of a name ending in ".rwlock" or
 * ".semaphore" (%2E), whose mutex keys would be another lock's read-write
 * or semaphore keys. So no key of one lock is under another's prefix, and
 * a name without those characters is the key etcdctl and Go use for it. */
#ifndef DLOCK_ETCD_NAMES_H
#define DLOCK_ETCD_NAMES_H

#include "../backend.h"

#include <stddef.h>

#define DLOCK__ETCD_RW_SUFFIX  ".rwlock"
#define DLOCK__ETCD_SEM_SUFFIX ".semaphore"

/* The prefix of the keys of lock (name, kind): "E/", "E.rwlock/" or
 * "E.semaphore/". malloc'ed; NULL when out of memory. */
char *dlock__etcd_lock_prefix(const char *name, enum dlock__kind kind);

/* The lock whose contender key is key (len bytes): 1 with its name in name
 * (cap bytes) and its kind (DLOCK__MUTEX, DLOCK__WRITE or
 * DLOCK__SEMAPHORE), 0 for a key that is no contender's of a name as this
 * file writes it. */
int dlock__etcd_key_lock(const char *key, size_t len, char *name, size_t cap,
                         enum dlock__kind *kind);

/* The first key a walk over the locks whose name starts with prefix needs
 * to read (every such lock's keys are at or after it, and under its
 * etcd prefix range). malloc'ed; NULL when out of memory. */
char *dlock__etcd_list_start(const char *prefix);

#endif
