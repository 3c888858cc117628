/* SPDX-License-Identifier: MIT */
/* log.c - a client's log sink: see backend/log.h. */
#include "../backend/log.h"
#include "../base/error.h"

#include <stdarg.h>
#include <stdio.h>

void dlock__log_init(dlock__log *log)
{
    atomic_init(&log->level, DLOCK_LOG_OFF);
    pthread_rwlock_init(&log->mu, NULL);
    log->fn = NULL;
    log->arg = NULL;
}

void dlock__log_fini(dlock__log *log)
{
    pthread_rwlock_destroy(&log->mu);
}

void dlock__log_emit(dlock__log *log, int level, const char *fmt, ...)
{
    /* room for a failure's whole detail and what a message puts around it
     * (512 cut a Redlock quorum's message mid-word) */
    char msg[DLOCK__DETAIL_MAX + 512];
    va_list ap;

    va_start(ap, fmt);
    int want = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dlock__fit_words(msg, sizeof msg, want);
    /* the callback may call dlock functions: the detail of the failure
     * being reported stays the caller's */
    dlock__saved_error saved;
    dlock__save_error(&saved);
    pthread_rwlock_rdlock(&log->mu);
    /* the level again: a message formatted as logging was turned off */
    if (log->fn != NULL && atomic_load(&log->level) >= level)
        log->fn(level, msg, log->arg);
    pthread_rwlock_unlock(&log->mu);
    dlock__restore_error(&saved);
}
