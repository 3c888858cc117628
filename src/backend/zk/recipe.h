/* SPDX-License-Identifier: MIT */
/* recipe.h - the lock recipe's names and order, as Apache Curator writes and
 * reads them, so that dlock and Curator exclude one another on one path.
 *
 * A contender creates an EPHEMERAL_SEQUENTIAL child of the lock's path,
 * named "_c_" + a random UUID + "-" + a marker, to which ZooKeeper appends a
 * 10-digit sequence number:
 *
 *   mutex (InterProcessMutex)               _c_<uuid>-lock-0000000042
 *   read-write (InterProcessReadWriteLock)  _c_<uuid>-__READ__0000000043
 *                                           _c_<uuid>-__WRIT__0000000044
 *   semaphore (InterProcessSemaphoreV2)     leases/_c_<uuid>-lease-0000000007
 *                                           (admission: locks/_c_<uuid>-lock-...)
 *
 * Curator ranks the contenders of one recipe by the text after its own
 * marker (the sequence), and any other child by its whole name, after its
 * own: so its mutex and its read-write lock on one path do not exclude each
 * other. dlock ranks the contenders of every kind on the path together, by
 * their sequence (dlock__zk_rank_all): ZooKeeper numbers a path's children
 * from one counter, so that is the order they were created in, and one name
 * is one lock (a mutex contender and a read-write contender block each
 * other, first come, first served). Within one recipe this is Curator's
 * order. kazoo's Lock nodes (<hex>__lock__<seq>) are mutex contenders too,
 * where Curator puts them last (by their whole name): so a kazoo holder
 * (given extra_lock_patterns=["-lock-"] to see ours) excludes dlock too.
 * Ranking them earlier only ever makes a dlock contender wait more than
 * Curator would, never less. Nothing here does I/O. */
#ifndef DLOCK_ZK_RECIPE_H
#define DLOCK_ZK_RECIPE_H

#include <stddef.h>

enum dlock__zk_marker {
    DLOCK__ZK_LOCK,  /* "lock-" */
    DLOCK__ZK_READ,  /* "__READ__" */
    DLOCK__ZK_WRITE, /* "__WRIT__" */
    DLOCK__ZK_LEASE, /* "lease-" */
    DLOCK__ZK_KAZOO, /* "__lock__": kazoo's Lock, ranked by its sequence (never made) */
};

/* The marker's text. */
const char *dlock__zk_marker_text(enum dlock__zk_marker m);

/* Writes "_c_<uuid>-<marker>" into buf (at least 64 bytes). uuid is 36
 * characters. */
void dlock__zk_node_prefix(char *buf, size_t len, const char *uuid, enum dlock__zk_marker m);

/* A fresh random UUID (version 4, lower-case, 36 characters + NUL). Returns
 * 0, or -1 if the kernel gave no randomness. */
int dlock__zk_uuid(char out[37]);

/* The key a child is ranked by among contenders that use `markers` (the
 * read-write lock ranks by either of its two markers). */
const char *dlock__zk_sort_key(const char *child, const enum dlock__zk_marker *markers,
                               size_t nmarkers);

/* Sorts children in place by their sort keys. */
void dlock__zk_rank(char **children, size_t n, const enum dlock__zk_marker *markers,
                    size_t nmarkers);

/* Sorts children in place: the contenders of every kind first
 * (dlock__zk_contender), by their sequence, then the other children (a
 * semaphore's locks/ and leases/, the parts of longer names, which never
 * hold anything), by name. */
void dlock__zk_rank_all(char **children, size_t n);

/* Whether child was made by the contender whose node name starts with
 * "_c_<uuid>-" (Curator's protection: finding one's node after a connection
 * loss during its create). */
int dlock__zk_is_ours(const char *child, const char *uuid);

/* Whether child holds the write marker (a writer of a read-write lock). */
int dlock__zk_is_writer(const char *child);

/* The marker of a contender's node: a name ending in a marker and the
 * 10-digit sequence ZooKeeper appends ("..._c_<uuid>-lock-0000000042",
 * "<hex>__lock__0000000007"). -1 for any other name (a lock path's part,
 * a semaphore's "locks" or "leases"). */
int dlock__zk_contender(const char *child);

#endif
