/* harness.h - the test harness: checks that report both sides, and real
 * servers started on free loopback ports in temp dirs, stopped at exit.
 *
 * A suite is one program: main() calls dt_run() with its table of tests;
 * `prog NAME` runs one test, `prog` runs them all, each in a fork so one
 * crash does not hide the others. */
#ifndef DLOCK_TEST_HARNESS_H
#define DLOCK_TEST_HARNESS_H

#include "dlock.h"

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

typedef struct dt_redis {
    pid_t pid;
    int port;
    char dir[128];
    char url[160]; /* redis://127.0.0.1:PORT */
} dt_redis;

/* Starts redis-server on a free loopback port (extra "--opt value" pairs
 * may follow, NULL-terminated) and waits until it answers PING. Aborts the
 * test if it cannot. Stopped at exit if still running. */
void dt_redis_start(dt_redis *r, ...);
/* Same, on a given port (a restart keeps the port). */
void dt_redis_start_on(dt_redis *r, int port);
void dt_redis_stop(dt_redis *r);
/* Runs a redis-cli command line against r; returns its stdout (static). */
const char *dt_redis_cli(const dt_redis *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A free TCP port on 127.0.0.1 (bound and released). */
int dt_free_port(void);

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

/* Path of a built program (bin/dlock, test helpers) from the DT_BIN_DIR
 * environment variable or the build's default. */
const char *dt_bin(const char *name);

#endif
