/* SPDX-License-Identifier: MIT */
/* child_holder.h - locks held by forked child processes, which a test can
 * kill (SIGKILL: a holder that dies mid-hold) or which stop themselves
 * (SIGSTOP: a holder that freezes with its socket open); and processes
 * that take a name in turn, each write fenced (the SQL stores' tests
 * share them). Fork before the calling process opens any client: a fork
 * carries none of a client's threads. */
#ifndef DLOCK_TEST_CHILD_HOLDER_H
#define DLOCK_TEST_CHILD_HOLDER_H

#include <sys/types.h>

enum dt_child_then {
    DT_CHILD_WAIT,   /* holds until killed */
    DT_CHILD_FREEZE, /* stops itself (SIGSTOP) once it holds */
};

/* Forks a child that opens url (options included), takes lock `name`
 * (waiting up to 10 s), sends its fence back, then does `then`. Returns
 * the child's pid with *fence set; fails the test if the child could not
 * take the lock. The caller ends it (dt_kill_reap). */
pid_t dt_child_hold(const char *url, const char *name, enum dt_child_then then,
                    unsigned long long *fence);

/* Forks `procs` processes that each open url and, `rounds` times, take
 * lock `name` (waiting up to 60 s), increment a shared counter under it
 * (a slow read-modify-write; a fence not above the last one written is
 * refused) and release it. Fails the test unless every process ended
 * well, no two were ever inside at once, no fence was stale and the
 * counter is procs * rounds. */
void dt_fenced_processes(const char *url, const char *name, int procs, int rounds);

/* After holder's connection was ended in the server (KILL, a terminate):
 * what op's status of `name` tells is true. Held, by holder, with a lease
 * left of at most lease_max_ms, and `next` (of another client) takes the
 * name when that lease ends, not before. */
struct dlock_client;
struct dlock_lock;
void dt_dead_holder_status_true(struct dlock_client *op, const char *name,
                                struct dlock_lock *holder, struct dlock_lock *next,
                                long long lease_max_ms);

#endif
