/* client.h - the client object shared by lock handles (internal). */
#ifndef DLOCK_CORE_CLIENT_H
#define DLOCK_CORE_CLIENT_H

#include "../backend/backend.h"
#include "board.h"
#include "local_queue.h"
#include "renewer.h"

#include <stdatomic.h>

struct dlock_client {
    const dlock__backend_ops *ops;
    void *be;
    dlock__client_cfg cfg;
    dlock__board board;
    dlock__renewer renewer;
    dlock__lq *lq; /* the local wait queue, NULL when off */
    atomic_uint_fast64_t next_wait_id;
};

/* A number naming one wait of this client (in hand-over notices). */
static inline uint64_t dlock__client_wait_id(dlock_client *c)
{
    return (uint64_t) atomic_fetch_add(&c->next_wait_id, 1) + 1;
}

/* Fills buf with n random bytes as 2n hex digits (plus NUL). */
int dlock__random_hex(char *buf, size_t n);

/* Checks the parts of a lock name every backend shares. */
int dlock__check_name(const char *name);

#endif
