/* SPDX-License-Identifier: MIT */
/* etcd.h - what the etcd backend shows its own tests (nothing else uses it). */
#ifndef DLOCK_ETCD_BACKEND_H
#define DLOCK_ETCD_BACKEND_H

#include "../backend.h"
#include "client.h"

#include <stdint.h>

typedef struct dlock__etcd_store_stats {
    uint64_t wakeups;  /* watch events that woke a waiter (a key it waited on went) */
    uint64_t rounds;   /* acquisition round trips (the Txn that puts or finds a key) */
    uint64_t sessions; /* session leases granted */
    uint64_t pending;  /* deletes and revokes waiting to be retried */
} dlock__etcd_store_stats;

/* The counters of an etcd store, and its wire client (for the watch
 * stream's counters). s must be an etcd store. */
void dlock__etcd_store_stats_get(dlock__store *s, dlock__etcd_store_stats *out);
dlock__etcd *dlock__etcd_store_client(dlock__store *s);

#endif
