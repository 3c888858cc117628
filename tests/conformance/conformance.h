/* SPDX-License-Identifier: MIT */
/* conformance.h - behaviour tests written once against include/dlock.h and
 * run against every store the harness can start (tests/support/server.h).
 *
 * One program, `conformance --store KIND [TEST...]`. The runner (runner.c)
 * starts one server of KIND, asks a throwaway client what the store can do
 * (dlock_client_caps), and runs each test of the list (list.c) in a process
 * of its own, in its own process group, with a time limit. A test declares
 * the capabilities it needs; on a store that lacks one it is not run but
 * reported as "SKIP <test> on <store>: store lacks <cap>", which is not a
 * failure. Every other outcome is pass or fail.
 *
 * The server is shared by the tests of one run (a ZooKeeper takes seconds
 * to start), so every lock name a test uses goes through CT_NAME(), which
 * prefixes the test's own name: a test that died holding a lock cannot
 * block the next one. A test that needs its server to misbehave puts a
 * proxy (proxy.h) between its client and the server instead of touching
 * the shared server.
 *
 * Processes: the runner never opens a client, so a test starts with no
 * threads. A test that forks workers forks them before it opens its own
 * first client (ThreadSanitizer refuses threads in the child of a threaded
 * process); a program run through exec (the CLI) may be started at any
 * time.
 *
 * Known bugs: a test that finds a bug in a backend or the core keeps its
 * assertion and says so with one line, in one of two ways:
 *   DT_KNOWN_BUG("etcd", "why") at the test's start: on that store the
 *     test's failure is counted as a known bug, printed loudly with the
 *     reason, and does not fail the run (if it passes anyway, the runner
 *     says the marker may be stale);
 *   DT_KNOWN_BUG_CHECK(cond, "etcd", "why") in place of CHECK(cond): on that
 *     store a false cond is printed loudly and the test goes on, so the
 *     checks after it still run; the test then counts as a known bug.
 * On other stores both lines are plain checks. The reasons are the
 * CT_BUG_* strings below, so the list of open bugs is in one place. */
#ifndef DLOCK_CONFORMANCE_H
#define DLOCK_CONFORMANCE_H

#include "../support/harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

/* The store under test, filled by the runner before each test's fork. */
typedef struct ct_context {
    const char *kind;       /* the harness's server kind: "redis", "zookeeper", "etcd" */
    const char *options;    /* --options: URL options every client of the run gets
                               ("mode=table"), NULL: none */
    const char *test;       /* the running test's name */
    unsigned caps;          /* DLOCK_CAP_* of the store */
    char store_name[32];    /* dlock_client_store(): "Redis" */
    dt_server srv;          /* the shared server (do not stop, kill or pause it) */
    char known_bug[512];    /* set by DT_KNOWN_BUG on this store (shared with the runner) */
    int known_bug_declared; /* DT_KNOWN_BUG: a failure of the test is that bug */
    int known_bug_seen;     /* a DT_KNOWN_BUG_CHECK failed on this store */
} ct_context;

extern ct_context *ct;

typedef struct ct_test {
    const char *name;
    unsigned needs; /* DLOCK_CAP_* bits the test cannot run without */
    void (*fn)(void);
    const char *what; /* one line for --list and the README */
} ct_test;

extern const ct_test ct_tests[];
extern const size_t ct_ntests;

/* The tests themselves (list.h), each `void ct_NAME(void)`. */
#include "list.h"
#define CT_DECLARE(name, needs, what) void ct_##name(void);
CT_TEST_LIST(CT_DECLARE)
#undef CT_DECLARE

/* Marks the running test as failing on `store` (a server kind, or a
 * comma-separated list of them) because of a bug outside the tests. */
void ct_known_bug(const char *store, const char *why, const char *file, int line);
#define DT_KNOWN_BUG(store, why) ct_known_bug((store), (why), __FILE__, __LINE__)
void ct_known_bug_check(int ok, const char *cond, const char *store, const char *why,
                        const char *file, int line);
#define DT_KNOWN_BUG_CHECK(cond, store, why)                                                       \
    ct_known_bug_check(!!(cond), #cond, (store), (why), __FILE__, __LINE__)

/* Bugs the suite found, by the stores they show on (see the README). */
#define CT_BUG_ZK_LOG_RACE                                                                         \
    "ThreadSanitizer: two ZooKeeper clients in one process race in libzookeeper_mt's static "      \
    "endpoint buffer (sprintf in its connect-error log lines): the backend discards the log "      \
    "(quiet_log) but leaves its level on, so the arguments are still formatted"

#define CT_BUG_LATE_LOSS                                                                           \
    "the on_lost callback came after another client had the lock: the watchdog woke more than "    \
    "the margin's scheduling allowance (5% of the lease, at most 50 ms) late, in a sanitizer "     \
    "build; dlock_lock_check() said ELOST in time"
/* The holder's loss callback ran before another client had the lock. The
 * margin (1% + 2 ms, and 5% of the lease for scheduling: 62 ms of a 1 s
 * lease) covers the scheduling delays of a loaded machine in a plain build
 * (seen up to 23 ms); under a sanitizer threads run several times slower,
 * and a late callback there is a known bug. The holder's own
 * dlock_lock_check() saying ELOST is checked hard everywhere. */
#if defined(CT_ASAN) || defined(CT_TSAN)
#define CT_TOLD_BEFORE(told_ms, other_ms)                                                          \
    DT_KNOWN_BUG_CHECK((told_ms) <= (other_ms), "redis,zookeeper,etcd", CT_BUG_LATE_LOSS)
#else
#define CT_TOLD_BEFORE(told_ms, other_ms) CHECK((told_ms) <= (other_ms))
#endif

/* The owner a query reports is the holder's token. */
#define CT_CHECK_OWNER(owner, lock) CHECK(strcmp((owner), dlock_lock_token(lock)) == 0)

/* A need of the tests, not a capability of the API: the store is reached
 * over one link (one server at one port) that a proxy can cut, blackhole or
 * slow down. The runner and ct_has() count it as there for every store that
 * is one server; a store with no server (sqlite: a file) lacks it, and so
 * does a Sentinel group (a client asks the sentinels, then connects to the
 * master they name: a proxy before one port cuts neither), and the tests
 * that need it are skipped as "store lacks link". ct->caps is the store's
 * own, without it. */
#define CT_LINK (1u << 30)
/* The name of a need: dlock_cap_name(), or "link". */
const char *ct_need_name(unsigned bit);
/* The store's capabilities and the tests' needs it meets (CT_LINK). */
unsigned ct_have(void);

/* 1 if the store has every capability in caps. */
int ct_has(unsigned caps);

/* "<test>-<name>": a lock name of the running test's own. Static storage,
 * 8 in rotation. */
const char *ct_name(const char *name);
#define CT_NAME(name) ct_name(name)

/* A dlock_name_fn that does nothing. */
void ct_ignore_name(const char *name, unsigned flags, void *arg);

/* A client of the store; options is "" or a query string ("?lease=1s"). */
dlock_client *ct_client(const char *options);
/* A client of the store through another port (a proxy's link). */
dlock_client *ct_client_at(int port, const char *options);
/* The store's URL with options (static storage, 4 in rotation). */
const char *ct_url(const char *options);

dlock_lock *ct_lock(dlock_client *c, const char *name, unsigned flags);
dlock_status ct_query(dlock_client *c, const char *name, unsigned flags);
/* The server's count of waiters for name (needs DLOCK_CAP_QUERY). */
unsigned ct_waiters(dlock_client *c, const char *name, unsigned flags);

/* One acquire on a thread of its own, for the tests that need a waiter
 * while the test's thread does something else. */
typedef struct ct_waiter {
    dlock_lock *lock;
    int64_t wait_ms;
    int64_t lease_ms; /* > 0: dlock_acquire_for */
    pthread_t thread;
    atomic_int done;
    int rc;
    int64_t started_ms, ended_ms;
    char errmsg[512];  /* dlock_errmsg() of the acquire, on its thread */
    dlock_lock *check; /* if set: dlock_lock_check() of it as soon as the acquire returns */
    int check_rc;
} ct_waiter;

void ct_wait_start(ct_waiter *w, dlock_lock *l, int64_t wait_ms);
void ct_wait_start_for(ct_waiter *w, dlock_lock *l, int64_t wait_ms, int64_t lease_ms);
/* As ct_wait_start, and checks `check` (another handle, idle meanwhile) the
 * moment the acquire returns, into w->check_rc. */
void ct_wait_start_check(ct_waiter *w, dlock_lock *l, int64_t wait_ms, dlock_lock *check);
/* 1 once the acquire has returned. */
#define CT_DONE(w) atomic_load(&(w)->done)
/* Joins; returns the acquire's code. */
int ct_wait_join(ct_waiter *w);

/* A loss callback that counts calls and keeps the last reason and time. */
typedef struct ct_loss {
    atomic_int calls;
    atomic_llong at_ms;
    int code;
    char why[256];
} ct_loss;
void ct_on_lost(dlock_lock *l, int code, const char *why, void *arg);

/* A fair waiter process's life: a client with options, the fair lock
 * name, queued once the lock is held and waiters 0..i-1 queued; when it gets
 * the lock it appends i to the file at path, releases and exits. Never
 * returns. */
void ct_fair_waiter(const char *name, const char *options, int i, const char *path)
    __attribute__((noreturn));

/* Reads one line (without its newline) from fd within ms; fails the test
 * if none comes. */
void ct_read_line(int fd, char *buf, size_t len, int ms);
/* Waits for a worker process; fails the test unless it exited with 0. */
void ct_wait_worker(pid_t pid, const char *what);

/* Runs argv (PATH searched) and returns its exit status (128+signal when
 * killed), failing the test if it does not end within timeout_ms. */
int ct_run_program(const char *const *argv, int timeout_ms);
/* Starts argv (PATH searched) and returns its pid. */
pid_t ct_spawn(const char *const *argv);
/* Waits for pid within timeout_ms; returns its exit status as above. */
int ct_wait_program(pid_t pid, int timeout_ms);

/* A small file-backed text value: the tests' shared "resource". */
void ct_write_file(const char *path, const char *text);
void ct_read_file(const char *path, char *buf, size_t len);

#endif
