/* SPDX-License-Identifier: MIT */
/* harness.h - the test harness: checks that report both sides, real
 * servers started on free loopback ports in temp dirs and stopped at exit
 * (server.h), and a fault proxy to put between clients and a server
 * (proxy.h).
 *
 * A suite is one program: main() calls dt_run() with its table of tests;
 * `prog NAME` runs one test, `prog` runs them all, each in a fork so one
 * crash does not hide the others. */
#ifndef DLOCK_TEST_HARNESS_H
#define DLOCK_TEST_HARNESS_H

#include "dlock.h"
#include "proxy.h"
#include "server.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

void dt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            dt_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);                                \
    } while (0)

#define CHECK_INT(a, op, b)                                                                        \
    do {                                                                                           \
        long long a_ = (long long) (a), b_ = (long long) (b);                                      \
        if (!(a_ op b_))                                                                           \
            dt_fail(__FILE__, __LINE__, "%s %s %s: %lld vs %lld", #a, #op, #b, a_, b_);            \
    } while (0)

/* rc must equal the expected DLOCK_ code; prints the detail if not. */
#define CHECK_RC(rc, want)                                                                         \
    do {                                                                                           \
        int rc_ = (rc), want_ = (want);                                                            \
        if (rc_ != want_)                                                                          \
            dt_fail(__FILE__, __LINE__, "%s: got %d (%s: %s), want %d (%s)", #rc, rc_,             \
                    dlock_strerror(rc_), dlock_errmsg(), want_, dlock_strerror(want_));            \
    } while (0)

typedef struct dt_test {
    const char *name;
    void (*fn)(void);
} dt_test;

int dt_run(int argc, char **argv, const dt_test *tests, size_t n);
#define DT_RUN(tests) dt_run(argc, argv, tests, sizeof(tests) / sizeof(tests)[0])

/* ---------------------------------------------------------------- servers */

/* A free TCP port on 127.0.0.1 (bound and released). */
int dt_free_port(void);

/* Processes and temp dirs the harness cleans up at exit: helper processes
 * (servers, proxies) are killed by pid and reaped, dirs removed, but only
 * in the process that registered them (a forked worker that exits stops
 * nothing), and dirs are kept when a check failed or DT_KEEP=1 is set, so
 * the logs can be read. */
void dt_track_pid(pid_t pid);
void dt_untrack_pid(pid_t pid);
void dt_track_dir(const char *dir);
/* Makes a fresh temp dir (/tmp/dlock-test-XXXXXX, or under $TMPDIR),
 * removed at exit as above. */
void dt_make_temp_dir(char *buf, size_t len);
/* Keep temp dirs at exit (a failure found outside CHECK: call it first). */
void dt_keep_dirs(void);
/* Waits until SIGSTOP took effect on pid (every thread stopped: a signal is
 * delivered asynchronously); 1 if stopped, 0 if it is gone or did not stop
 * within 2 s. */
int dt_wait_stopped(pid_t pid);
/* SIGKILL and reap (EINTR-safe); nothing if pid <= 0. */
void dt_kill_reap(pid_t pid);

/* ---------------------------------------------------------------- misc */

int64_t dt_now_ms(void);
/* Polls cond (an expression) every 5 ms until true or ms pass. */
#define DT_WAIT_UNTIL(cond, ms)                                                                    \
    do {                                                                                           \
        int64_t until_ = dt_now_ms() + (ms);                                                       \
        while (!(cond)) {                                                                          \
            if (dt_now_ms() > until_)                                                              \
                dt_fail(__FILE__, __LINE__, "condition %s not met in %d ms", #cond, (int) (ms));   \
            dt_sleep_ms(5);                                                                        \
        }                                                                                          \
    } while (0)
void dt_sleep_ms(int ms);

/* Under ThreadSanitizer the same code takes several times the CPU: a test
 * that bounds CPU time multiplies its bound by this. */
#if defined(__SANITIZE_THREAD__)
#define DT_CPU_SCALE 2
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DT_CPU_SCALE 2
#endif
#endif
#ifndef DT_CPU_SCALE
#define DT_CPU_SCALE 1
#endif

/* Loss reports: dt_on_lost, given to dlock_lock_on_lost with a dt_lost_box,
 * checks the code is DLOCK_ELOST and records why and when. */
typedef struct dt_lost_box {
    atomic_int lost;
    atomic_llong at_ms; /* dt_now_ms() of the report */
    char why[256];
} dt_lost_box;
void dt_on_lost(dlock_lock *l, int code, const char *why, void *arg);

/* Checked calls of the public API for a test's set-up: a failure fails the
 * test. dt_client opens url with options appended ("?lease=1s"; NULL:
 * none). */
dlock_client *dt_client(const char *url, const char *options);
dlock_lock *dt_lock(dlock_client *c, const char *name, unsigned flags);
dlock_status dt_query(dlock_client *c, const char *name, unsigned flags);

/* What dlock_query_holders reported, one entry per holder (8 at most). */
typedef struct dt_holders {
    int n;
    struct {
        char owner[128], host[256], label[64];
        unsigned count;
        long pid;
        int64_t started_ms;
    } h[8];
} dt_holders;
dt_holders dt_query_holders(dlock_client *c, const char *name, unsigned flags);

/* Path of a built program (bin/dlock, test helpers) from the DT_BIN_DIR
 * environment variable or the build's default. */
const char *dt_bin(const char *name);

#endif
