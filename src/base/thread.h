/* SPDX-License-Identifier: MIT */
/* thread.h - starting the library's own threads. */
#ifndef DLOCK_CORE_THREAD_H
#define DLOCK_CORE_THREAD_H

#include <pthread.h>
#include <signal.h>

/* pthread_create with every signal blocked in the new thread: the host
 * program's signals (SIGINT, SIGCHLD, SIGTERM...) go to its own threads,
 * and a SIGPIPE raised by a write on one of ours stays pending and harmless
 * instead of killing the process. */
static inline int dlock__thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

#endif
