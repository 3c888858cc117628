/* SPDX-License-Identifier: MIT */
/* child_holder.c - see child_holder.h. */
#define _GNU_SOURCE
#include "child_holder.h"

#include "harness.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t dt_child_hold(const char *url, const char *name, enum dt_child_then then,
                    unsigned long long *fence)
{
    int fds[2];
    CHECK_INT(pipe(fds), ==, 0);
    pid_t pid = fork(); /* before any client of this process */
    CHECK(pid >= 0);
    if (pid == 0) {
        dlock_client *c = NULL;
        dlock_lock *l = NULL;
        close(fds[0]);
        if (dlock_client_open(url, &c) != DLOCK_OK || dlock_lock_open(c, name, 0, &l) != 0 ||
            dlock_acquire(l, 10000) != DLOCK_OK)
            _exit(2);
        unsigned long long f = dlock_lock_fence(l);
        if (write(fds[1], &f, sizeof f) != (ssize_t) sizeof f)
            _exit(3);
        if (then == DT_CHILD_FREEZE)
            raise(SIGSTOP);
        for (;;)
            pause();
    }
    close(fds[1]);
    *fence = 0;
    ssize_t n = read(fds[0], fence, sizeof *fence);
    close(fds[0]);
    if (n != (ssize_t) sizeof *fence) {
        int status = 0;
        waitpid(pid, &status, 0);
        dt_fail(__FILE__, __LINE__, "the child holding '%s' (%s) did not take it (exit %d)", name,
                url, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return pid;
}

struct shared {
    _Atomic int inside;
    _Atomic int overlaps;
    _Atomic long long counter;
    _Atomic unsigned long long last_fence;
    _Atomic int stale;
};

/* One process's rounds: its exit code. */
static int rounds_of(struct shared *sh, const char *url, const char *name, int rounds)
{
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    if (dlock_client_open(url, &c) != DLOCK_OK || dlock_lock_open(c, name, 0, &l) != DLOCK_OK)
        return 2;
    for (int r = 0; r < rounds; r++) {
        if (dlock_acquire(l, 60000) != DLOCK_OK)
            return 3;
        if (atomic_fetch_add(&sh->inside, 1) != 0)
            atomic_fetch_add(&sh->overlaps, 1);
        unsigned long long f = dlock_lock_fence(l);
        unsigned long long last = atomic_load(&sh->last_fence);
        if (f <= last) {
            atomic_fetch_add(&sh->stale, 1);
        } else {
            atomic_store(&sh->last_fence, f);
            long long v = atomic_load(&sh->counter);
            usleep(200);
            atomic_store(&sh->counter, v + 1);
        }
        atomic_fetch_sub(&sh->inside, 1);
        if (dlock_release(l) != DLOCK_OK)
            return 4;
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    return 0;
}

void dt_fenced_processes(const char *url, const char *name, int procs, int rounds)
{
    struct shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pid_t pids[64];
    CHECK_INT(procs, <=, 64);
    for (int i = 0; i < procs; i++) {
        pids[i] = fork(); /* before any client of this process */
        CHECK(pids[i] >= 0);
        if (pids[i] == 0)
            _exit(rounds_of(sh, url, name, rounds));
    }
    for (int i = 0; i < procs; i++) {
        int status = 0;
        CHECK_INT(waitpid(pids[i], &status, 0), ==, pids[i]);
        CHECK(WIFEXITED(status));
        CHECK_INT(WEXITSTATUS(status), ==, 0);
    }
    CHECK_INT(atomic_load(&sh->overlaps), ==, 0);
    CHECK_INT(atomic_load(&sh->stale), ==, 0);
    CHECK_INT(atomic_load(&sh->counter), ==, (long long) procs * rounds);
    munmap(sh, sizeof *sh);
}

void dt_dead_holder_status_true(struct dlock_client *op, const char *name,
                                struct dlock_lock *holder, struct dlock_lock *next,
                                long long lease_max_ms)
{
    int64_t asked = dt_now_ms();
    dlock_status st = dt_query(op, name, 0);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, dlock_lock_token(holder)) == 0);
    CHECK_INT(st.lease_ms, >, 0);
    CHECK_INT(st.lease_ms, <=, lease_max_ms);
    CHECK_RC(dlock_acquire(next, 10000), DLOCK_OK);
    int64_t took = dt_now_ms() - asked;
    printf("killed holder: status said %lld ms left, taken after %lld ms\n",
           (long long) st.lease_ms, (long long) took);
    CHECK_INT(took, >=, st.lease_ms - 50);
    CHECK_INT(took, <, st.lease_ms + 1500);
    CHECK_RC(dlock_release(next), DLOCK_OK);
}
