/* SPDX-License-Identifier: MIT */
/* clock.h - monotonic time. Validity and deadlines never use wall clocks. */
#ifndef DLOCK_CORE_CLOCK_H
#define DLOCK_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define DLOCK__NEVER INT64_MAX

/* Microseconds on CLOCK_MONOTONIC. */
static inline int64_t dlock__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The CLOCK_MONOTONIC timespec for a deadline in microseconds, for
 * pthread_cond_timedwait on condition variables bound to CLOCK_MONOTONIC. */
static inline struct timespec dlock__timespec(int64_t at_us)
{
    struct timespec ts;
    ts.tv_sec = at_us / 1000000;
    ts.tv_nsec = (long) (at_us % 1000000) * 1000;
    return ts;
}

/* A condition variable whose timed waits count on CLOCK_MONOTONIC (their
 * deadlines: dlock__timespec). */
static inline void dlock__cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

/* now + ms, saturating, for deadlines. ms < 0 means never. */
static inline int64_t dlock__deadline_after_ms(int64_t now_us, int64_t ms)
{
    if (ms < 0 || ms > (DLOCK__NEVER - now_us) / 1000)
        return DLOCK__NEVER;
    return now_us + ms * 1000;
}

#endif
