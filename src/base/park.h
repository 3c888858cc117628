/* SPDX-License-Identifier: MIT */
/* park.h - a thread's wake-up word: park until someone unparks you or a
 * deadline passes. A futex with three states (empty, posted, sleeping): an
 * unpark costs a system call only if the thread is actually asleep, and the
 * woken thread needs no lock to see why. Callers always re-check their
 * condition after dlock__park() returns. */
#ifndef DLOCK_BASE_PARK_H
#define DLOCK_BASE_PARK_H

#include "clock.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct dlock__parker {
    _Atomic uint32_t word; /* 0 empty, 1 posted, 2 sleeping */
} dlock__parker;

static inline void dlock__park(dlock__parker *p, int64_t deadline_us)
{
    uint32_t empty = 0;

    if (atomic_exchange(&p->word, 0) == 1)
        return; /* a post came first */
    /* Let the thread that will post run first: the reply to a pipelined
     * command is often in by the time we are scheduled again, and then
     * neither side makes a futex call. One yield measured 1.4x the 50-thread
     * throughput of sleeping at once (bench/README.md); more did not help. */
    sched_yield();
    if (atomic_load(&p->word) == 1) {
        atomic_store(&p->word, 0);
        return;
    }
    if (!atomic_compare_exchange_strong(&p->word, &empty, 2)) {
        atomic_store(&p->word, 0);
        return;
    }
    while (atomic_load(&p->word) == 2) {
        int64_t left = deadline_us - dlock__now_us();
        if (left <= 0)
            break;
        struct timespec ts = {left / 1000000, (long) (left % 1000000) * 1000};
        syscall(SYS_futex, &p->word, FUTEX_WAIT_PRIVATE, 2, &ts, NULL, 0);
    }
    atomic_store(&p->word, 0);
}

static inline void dlock__unpark(dlock__parker *p)
{
    if (atomic_exchange(&p->word, 1) == 2)
        syscall(SYS_futex, &p->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#endif
