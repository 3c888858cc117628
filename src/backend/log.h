/* SPDX-License-Identifier: MIT */
/* log.h - a client's log sink (dlock_client_set_log), for the core and,
 * through dlock__host, the stores.
 *
 * Logging is off unless the application asks for it, and then rare (losses,
 * failures, hand-overs): a message that is not wanted costs one relaxed
 * atomic load, and is not even formatted. The application's function is
 * called under a read lock, so that dlock_client_set_log() (the write lock)
 * returns only when no call of the old function is under way. Never log
 * while holding a lock of the core (a shard's, a board's): the function may
 * call back into dlock. Messages never carry an owner token or a password
 * (store labels are masked URLs).
 *
 * A service of the host to its stores (backend.h, dlock__host.log):
 * declared here for them, implemented by the core (core/log.c). */
#ifndef DLOCK_BACKEND_LOG_H
#define DLOCK_BACKEND_LOG_H

#include "dlock.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct dlock__log {
    atomic_int level; /* DLOCK_LOG_*: what is wanted */
    pthread_rwlock_t mu;
    dlock_log_fn fn; /* guarded by mu */
    void *arg;
} dlock__log;

void dlock__log_init(dlock__log *log);
void dlock__log_fini(dlock__log *log);

/* Formats and sends one message (use DLOCK__LOG, which checks the level
 * first). */
void dlock__log_emit(dlock__log *log, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int dlock__log_on(dlock__log *log, int level)
{
    return log != NULL && atomic_load_explicit(&log->level, memory_order_relaxed) >= level;
}

#define DLOCK__LOG(log, lvl, ...)                                                                  \
    do {                                                                                           \
        if (dlock__log_on((log), (lvl)))                                                           \
            dlock__log_emit((log), (lvl), __VA_ARGS__);                                            \
    } while (0)

#endif
