/* SPDX-License-Identifier: MIT */
/* client.h - the client object shared by lock handles (internal). */
#ifndef DLOCK_CORE_CLIENT_H
#define DLOCK_CORE_CLIENT_H

#include "../backend/backend.h"
#include "../backend/board.h"
#include "../backend/log.h"
#include "local_queue.h"
#include "renewer.h"

#include <stdatomic.h>

struct dlock_client {
    dlock__store *store;
    const dlock__backend *backend; /* store->backend */
    dlock__client_cfg cfg;
    dlock__board board;
    dlock__renewer renewer;
    dlock__lq *lq; /* the local wait queue, NULL when off */
    dlock__log log;
    atomic_uint_fast64_t next_wait_id;
    atomic_int lease_warned; /* dlock__client_check_lease said its warning */
    int timeout_given;       /* the URL (or the options) set timeout=: else the default */
};

/* A number naming one attempt of this client (in hand-over notices). */
static inline uint64_t dlock__client_wait_id(dlock_client *c)
{
    return (uint64_t) atomic_fetch_add(&c->next_wait_id, 1) + 1;
}

/* Whether the client's store has answered since the client opened
 * (backend.h: reached). */
int dlock__client_reached(const dlock_client *c);
/* Whether a server answered at the client's URL as another store than the
 * URL names (backend.h: reached, -1): a wrong URL, not an outage. */
int dlock__client_wrong_store(const dlock_client *c);

/* A renewed lease (or session) shorter than three request timeouts: a
 * renewal that gets no answer fails too late to be retried (past two: only
 * once the lease has run out, so the loss is the first thing the user
 * hears). Said once per client (at warn, when the log is on), naming the
 * lock that showed it. */
void dlock__client_check_lease(dlock_client *c, const char *name, int64_t lease_ms);

/* DLOCK_OK if the client's store has every capability in caps, else
 * DLOCK_ENOTSUP naming the store, the first one missing and `what` needs
 * it ("dlock_acquire_for"). */
int dlock__client_require(const dlock_client *c, unsigned caps, const char *what);

/* What the store is, for messages: the backend's name with its mode or
 * topology when it has one ("MariaDB/MySQL in row mode", "Redis Cluster"). */
const char *dlock__client_kind(const dlock_client *c);

#endif
