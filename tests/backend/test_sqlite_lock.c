/* SPDX-License-Identifier: MIT */
/* test_sqlite_lock.c - the SQLite backend (sqlite:///path) on a database
 * file in a temp dir: many processes on one file counting under the lock
 * with fences, a holder killed with SIGKILL (and one that exits holding)
 * freed at once rather than after its lease, rows of another boot or of a
 * pid now used by another process, a detached hold that outlives its
 * process, the fence counter across deleted rows and force-unlock, the
 * schema made once and reused, and bad input.
 *
 * The file is looked at with SQLite's own API on a connection of the
 * test's, never through the library. Tests that fork do so before the
 * process opens any client (ThreadSanitizer refuses threads in a child
 * forked from a threaded process). */
#define _GNU_SOURCE
#include "../support/harness.h"
#include "../support/hot_name.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[160];
static char url[300];

/* A fresh temp dir and the URL of locks.db in it. */
static void fresh(void)
{
    dt_make_temp_dir(dir, sizeof dir);
    snprintf(url, sizeof url, "sqlite://%s/locks.db", dir);
}

static dlock_client *client(const char *options)
{
    return dt_client(url, options);
}

/* The test's own connection to the file. */
static sqlite3 *db_open(void)
{
    char path[200];
    sqlite3 *db = NULL;
    snprintf(path, sizeof path, "%s/locks.db", dir);
    CHECK_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), ==, SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static int64_t db_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    CHECK_INT(sqlite3_prepare_v2(db, sql, -1, &st, NULL), ==, SQLITE_OK);
    CHECK_INT(sqlite3_step(st), ==, SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void db_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
        dt_fail(__FILE__, __LINE__, "%s: %s", sql, err != NULL ? err : "?");
}

static void read_line(int fd, char *buf, size_t len)
{
    size_t n = 0;
    int64_t until = dt_now_ms() + 20000;
    while (n + 1 < len && dt_now_ms() < until) {
        ssize_t r = read(fd, buf + n, 1);
        if (r == 1 && buf[n] == '\n')
            break;
        if (r == 1)
            n++;
        else if (r == 0)
            break;
    }
    buf[n] = '\0';
}

/* ---------------------------------------------------------------- processes */

enum { WORKERS = 8, ROUNDS = 25 };

typedef struct shared {
    atomic_int inside, most, stale;
    atomic_ullong last_fence;
    long counter; /* only touched under the lock */
} shared;

static void worker(shared *sh)
{
    dlock_client *c = client("?lease=5s");
    dlock_lock *l = dt_lock(c, "counter", 0);
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_RC(dlock_acquire(l, 30000), DLOCK_OK);
        int in = atomic_fetch_add(&sh->inside, 1) + 1;
        int most = atomic_load(&sh->most);
        while (in > most && !atomic_compare_exchange_weak(&sh->most, &most, in))
            ;
        uint64_t fence = dlock_lock_fence(l);
        if (fence <= atomic_load(&sh->last_fence))
            atomic_fetch_add(&sh->stale, 1);
        atomic_store(&sh->last_fence, fence);
        long v = sh->counter;
        usleep(200); /* widen the window a second holder would need */
        sh->counter = v + 1;
        atomic_fetch_sub(&sh->inside, 1);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* 8 processes x 25 fenced increments on one file: never two holders,
 * fences strictly increasing, exactly 200. */
static void many_processes(void)
{
    pid_t pids[WORKERS];
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    fresh();
    int64_t t0 = dt_now_ms();
    for (int i = 0; i < WORKERS; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            worker(sh);
            fflush(NULL);
            _exit(0);
        }
    }
    for (int i = 0; i < WORKERS; i++) {
        int status;
        CHECK_INT(waitpid(pids[i], &status, 0), ==, pids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    printf("%d processes x %d increments = %ld in %lld ms, at most %d inside, last fence %llu\n",
           WORKERS, ROUNDS, sh->counter, (long long) (dt_now_ms() - t0), atomic_load(&sh->most),
           (unsigned long long) atomic_load(&sh->last_fence));
    CHECK_INT(sh->counter, ==, WORKERS * ROUNDS);
    CHECK_INT(atomic_load(&sh->most), ==, 1);
    CHECK_INT(atomic_load(&sh->stale), ==, 0);
    CHECK_INT(atomic_load(&sh->last_fence), ==, WORKERS * ROUNDS);
    munmap(sh, sizeof *sh);
}

/* 8 processes open a new file at the same moment, 10 times over: each
 * open waits out the others' switch to WAL mode and table making (which
 * SQLite may refuse at once, without its busy handler), none fails. */
static void first_opens_race(void)
{
    for (int round = 0; round < 10; round++) {
        int go[2];
        pid_t pids[WORKERS];
        fresh();
        CHECK(pipe(go) == 0);
        fflush(NULL);
        for (int i = 0; i < WORKERS; i++) {
            pids[i] = fork();
            CHECK(pids[i] >= 0);
            if (pids[i] == 0) {
                char byte;
                close(go[1]);
                CHECK(read(go[0], &byte, 1) == 0); /* all start when the pipe closes */
                dlock_client *c = client("");
                dlock_lock *l = dt_lock(c, "first", 0);
                CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
                CHECK_RC(dlock_release(l), DLOCK_OK);
                dlock_lock_free(l);
                dlock_client_close(c);
                fflush(NULL);
                _exit(0);
            }
        }
        close(go[0]);
        close(go[1]);
        for (int i = 0; i < WORKERS; i++) {
            int status;
            CHECK_INT(waitpid(pids[i], &status, 0), ==, pids[i]);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        sqlite3 *db = db_open();
        CHECK_INT(db_int(db, "SELECT fence FROM dlock_fence WHERE name = 'first'"), ==, WORKERS);
        sqlite3_close(db);
    }
}

/* A child takes the lock (a 30 s lease) and tells its fence on the pipe;
 * then it waits to be killed (how 0), or exits holding (how 1). */
static pid_t holder_child(const char *name, int how, int *fd)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dlock_client *c = client("?lease=30s");
        dlock_lock *l = dt_lock(c, name, 0);
        CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
        dprintf(fds[1], "%llu\n", (unsigned long long) dlock_lock_fence(l));
        if (how == 1)
            _exit(0); /* no release, no close: the process is gone */
        for (;;)
            pause();
    }
    close(fds[1]);
    *fd = fds[0];
    return pid;
}

/* A holder killed with SIGKILL (not reaped yet: a zombie) and one that
 * exits holding: the next waiter takes the lock at once, with a larger
 * fence, not after the 30 s lease. */
static void dead_holder_freed(void)
{
    char line[64];
    int fd;

    fresh();
    pid_t killed = holder_child("k", 0, &fd);
    read_line(fd, line, sizeof line);
    close(fd);
    uint64_t f1 = strtoull(line, NULL, 10);
    CHECK(f1 > 0);
    pid_t exited = holder_child("e", 1, &fd);
    read_line(fd, line, sizeof line);
    close(fd);
    uint64_t f2 = strtoull(line, NULL, 10);
    CHECK(f2 > 0);
    int status;
    CHECK_INT(waitpid(exited, &status, 0), ==, exited);

    dlock_client *c = client("");
    dlock_lock *k = dt_lock(c, "k", 0), *e = dt_lock(c, "e", 0);
    CHECK_RC(dlock_try_acquire(k), DLOCK_EBUSY); /* the holder lives */
    kill(killed, SIGKILL);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(k, 5000), DLOCK_OK); /* its zombie is no holder */
    int64_t took = dt_now_ms() - t0;
    printf("a kill -9ed holder's lock (lease 30 s) was taken %lld ms after the kill\n",
           (long long) took);
    CHECK_INT(took, <, 2000);
    CHECK_INT(dlock_lock_fence(k), >, f1);
    CHECK_RC(dlock_try_acquire(e), DLOCK_OK); /* exited holding */
    CHECK_INT(dlock_lock_fence(e), >, f2);
    CHECK_INT(waitpid(killed, &status, 0), ==, killed);
    CHECK_RC(dlock_release(k), DLOCK_OK);
    CHECK_RC(dlock_release(e), DLOCK_OK);
    dlock_lock_free(k);
    dlock_lock_free(e);
    dlock_client_close(c);
}

/* A detached hold is bound to no process: it outlives its process and
 * lasts its lease. */
static void detached_outlives_process(void)
{
    int fds[2];
    char line[64];

    fresh();
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dlock_client *c = client("");
        dlock_lock *l = dt_lock(c, "d", 0);
        CHECK_RC(dlock_acquire_for(l, 0, 1500), DLOCK_OK);
        dlock_lock_detach(l);
        dlock_client_close(c);
        dprintf(fds[1], "detached\n");
        _exit(0);
    }
    close(fds[1]);
    read_line(fds[0], line, sizeof line);
    close(fds[0]);
    CHECK(strcmp(line, "detached") == 0);
    int status;
    CHECK_INT(waitpid(pid, &status, 0), ==, pid);
    dlock_client *c = client("");
    dlock_lock *l = dt_lock(c, "d", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, >=, 500); /* waited for the lease, not for the process */
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* Adopted by another process, extended and detached again (`dlock
     * extend --owner`): still bound to none, so it outlives that process
     * too, with the longer lease. */
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dlock_client *h = client("");
        dlock_lock *held = dt_lock(h, "d", 0);
        CHECK_RC(dlock_acquire_for(held, 0, 1500), DLOCK_OK);
        dprintf(fds[1], "%s\n", dlock_lock_token(held));
        dlock_lock_detach(held);
        dlock_client_close(h);
        _exit(0);
    }
    close(fds[1]);
    char token[128];
    read_line(fds[0], token, sizeof token);
    close(fds[0]);
    CHECK_INT(waitpid(pid, &status, 0), ==, pid);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dlock_client *a = client("");
        dlock_lock *adopted = NULL;
        CHECK_RC(dlock_lock_adopt(a, "d", token, 0, &adopted), DLOCK_OK);
        CHECK_RC(dlock_extend(adopted, 3000), DLOCK_OK);
        dlock_lock_detach(adopted);
        dlock_client_close(a);
        _exit(0);
    }
    CHECK_INT(waitpid(pid, &status, 0), ==, pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    c = client("");
    l = dt_lock(c, "d", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY); /* the extender's exit freed nothing */
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 6000), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, >=, 2000); /* the extended lease, not the first */
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- rows */

/* Rows the library did not write: of another boot, of a pid that is now
 * another process (this one, started earlier), of a pid that does not
 * exist: none is a holder. A row of this process with its own start time
 * and a live lease is. */
static void foreign_rows(void)
{
    char sql[1024];
    fresh();
    dlock_client *c = client("");
    dlock_lock *maker = dt_lock(c, "maker", 0);
    CHECK_RC(dlock_try_acquire(maker), DLOCK_OK); /* the file made (a lock makes it) */
    CHECK_RC(dlock_release(maker), DLOCK_OK);
    dlock_lock_free(maker);
    sqlite3 *db = db_open();
    const char *boot_now = NULL;
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    CHECK(f != NULL && fgets(boot, sizeof boot, f) != NULL);
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    boot_now = boot;
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    long long far = (long long) ts.tv_sec * 1000 + 600000; /* 10 minutes on */
    char ns[64] = "";
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';

    const struct {
        const char *name, *boot;
        long long pid, start;
        int held;
    } rows[] = {
        {"old-boot", "00000000-0000-0000-0000-000000000000", 0, 0, 0},
        {"reused-pid", boot_now, (long long) getpid(), 1, 0}, /* our pid, another start */
        {"no-such-pid", boot_now, 4194303, 5, 0},
        {"detached", boot_now, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO dlock_hold VALUES ('%s', 'someone', 0, 1, 'test', 1, '%s', %lld, "
                 "%lld, %lld, '%s', 0); INSERT INTO dlock_fence VALUES ('%s', 7);",
                 rows[i].name, rows[i].boot, far, rows[i].pid, rows[i].start, ns, rows[i].name);
        db_exec(db, sql);
    }
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        dlock_lock *l = dt_lock(c, rows[i].name, 0);
        dlock_status st = dt_query(c, rows[i].name, 0);
        CHECK_INT(st.held, ==, rows[i].held);
        CHECK_INT(st.last_fence, ==, 7);
        CHECK_RC(dlock_try_acquire(l), rows[i].held ? DLOCK_EBUSY : DLOCK_OK);
        if (!rows[i].held) {
            CHECK_INT(dlock_lock_fence(l), ==, 8);
            CHECK_RC(dlock_release(l), DLOCK_OK);
        }
        dlock_lock_free(l);
    }
    sqlite3_close(db);
    dlock_client_close(c);
}

/* The fence counter never goes back: not when the hold's row is deleted
 * behind the library's back, nor after a force-unlock. */
static void fence_counter_kept(void)
{
    fresh();
    dlock_client *c = client("");
    dlock_lock *l = dt_lock(c, "f", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(l);
    sqlite3 *db = db_open();
    db_exec(db, "DELETE FROM dlock_hold");
    CHECK_RC(dlock_lock_check(l), DLOCK_OK); /* the handle does not know yet */
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    uint64_t f2 = dlock_lock_fence(l);
    CHECK_INT(f2, >, f1);
    CHECK_RC(dlock_force_unlock(c, "f", 0), DLOCK_OK);
    dlock_lock *m = dt_lock(c, "f", 0);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(m), >, f2);
    CHECK_INT(db_int(db, "SELECT fence FROM dlock_fence WHERE name = 'f'"), ==,
              (int64_t) dlock_lock_fence(m));
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(l);
    sqlite3_close(db);
    dlock_client_close(c);
}

/* A hold the handle was told it lost, whose row is still live in the file
 * (the library ends a fixed lease a margin before the store does): the
 * next acquire is a new hold, under a new owner token, and gets a new
 * fence, not the lost one's. The fault suite found it (sqlite seed 7: a
 * multi-lock's fixed lease ran out, the same handle took both names again
 * within the margin and got the same fences). Here the row is made to
 * outlast the handle's lease by a minute: it is someone else's to the new
 * hold (busy) until it ends. */
static void lost_hold_new_fence(void)
{
    fresh();
    dlock_client *c = client("");
    dlock_lock *l = dt_lock(c, "g", 0);
    CHECK_RC(dlock_acquire_for(l, 0, 300), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(l);
    sqlite3 *db = db_open();
    db_exec(db, "UPDATE dlock_hold SET expires = expires + 60000 WHERE name = 'g'");
    DT_WAIT_UNTIL(dlock_lock_check(l) != DLOCK_OK, 5000);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK_INT(db_int(db, "SELECT count(*) FROM dlock_hold WHERE name = 'g'"), ==, 1);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    db_exec(db, "UPDATE dlock_hold SET expires = 0 WHERE name = 'g'"); /* its lease ends */
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, f1);
    CHECK_INT(db_int(db, "SELECT fence FROM dlock_hold WHERE name = 'g'"), ==,
              (int64_t) dlock_lock_fence(l));
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    sqlite3_close(db);
    dlock_client_close(c);
}

/* A call is bounded by its own deadline when another thread of the same
 * client is in a request that waits for the database's write lock (held
 * here by the test's connection, as by a client paused in a transaction):
 * the client's one connection is not waited for past the deadline. The
 * fault suite found waits 320-485 ms past their bound (sqlite seed 11). */
typedef struct trier {
    dlock_lock *l;
    _Atomic int stop;
    _Atomic int started;
} trier;

static void *try_loop(void *arg)
{
    trier *t = arg;
    while (!atomic_load(&t->stop)) {
        atomic_store(&t->started, 1);
        (void) dlock_try_acquire(t->l); /* each waits for the write lock its timeout */
    }
    return NULL;
}

static void bounded_beside_busy_thread(void)
{
    fresh();
    dlock_client *c = client("?timeout=1s");
    dlock_lock *x = dt_lock(c, "x", 0), *y = dt_lock(c, "y", 0);
    CHECK_RC(dlock_try_acquire(y), DLOCK_OK); /* the file and its tables made */
    CHECK_RC(dlock_release(y), DLOCK_OK);
    sqlite3 *db = db_open();
    db_exec(db, "BEGIN IMMEDIATE");
    trier tr = {.l = x};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, try_loop, &tr) == 0);
    DT_WAIT_UNTIL(atomic_load(&tr.started), 2000);
    dt_sleep_ms(100); /* the other thread is in its request */
    int64_t t0 = dt_now_ms();
    int rc = dlock_acquire(y, 300);
    int64_t took = dt_now_ms() - t0;
    atomic_store(&tr.stop, 1);
    printf("wait of 300 ms beside a busy thread: %lld ms, %s\n", (long long) took,
           dlock_strerror(rc));
    CHECK_INT(rc, !=, DLOCK_OK);
    CHECK_INT(took, <, 300 + 1000 + 250); /* its budget, one timeout, slack */
    db_exec(db, "ROLLBACK");
    pthread_join(t, NULL);
    sqlite3_close(db);
    dlock_lock_free(x);
    dlock_lock_free(y);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- no spinning */

static int64_t cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

typedef struct waiting {
    dlock_lock *l;
    int64_t wait_ms;
    int rc;
} waiting;

static void *wait_thread(void *arg)
{
    waiting *w = arg;
    w->rc = dlock_acquire(w->l, w->wait_ms);
    return NULL;
}

/* A waiter polls behind a live holder without burning the CPU; a request
 * that finds the database's write lock taken by another process sleeps in
 * the busy handler until that ends, or fails at its timeout. */
static void no_spin(void)
{
    fresh();
    dlock_client *c = client("?timeout=3s");
    dlock_lock *h = dt_lock(c, "spin", 0), *l = dt_lock(c, "spin", 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    waiting w = {.l = l, .wait_ms = 3000};
    pthread_t t;
    int64_t cpu0 = cpu_ms(), t0 = dt_now_ms();
    CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0);
    pthread_join(t, NULL);
    int64_t cpu = cpu_ms() - cpu0, took = dt_now_ms() - t0;
    printf("a 3 s wait behind a holder: %lld ms, %lld ms of CPU\n", (long long) took,
           (long long) cpu);
    CHECK_RC(w.rc, DLOCK_ETIMEDOUT);
    CHECK_INT(cpu, <, 600); /* a sanitizer's slow polls included */
    CHECK_RC(dlock_release(h), DLOCK_OK);

    /* another process's write transaction: the try waits for it */
    sqlite3 *db = db_open();
    db_exec(db, "BEGIN IMMEDIATE");
    cpu0 = cpu_ms();
    t0 = dt_now_ms();
    dlock_client *quick = client("?timeout=300ms");
    dlock_lock *q = dt_lock(quick, "spin", 0);
    CHECK_RC(dlock_try_acquire(q), DLOCK_EUNREACHABLE);
    took = dt_now_ms() - t0;
    printf("a try while the write lock is taken: %s after %lld ms (%s)\n",
           dlock_strerror(DLOCK_EUNREACHABLE), (long long) took, dlock_errmsg());
    CHECK(strstr(dlock_errmsg(), "locked") != NULL);
    CHECK_INT(took, >=, 250);
    CHECK_INT(took, <, 2000);
    CHECK_INT(cpu_ms() - cpu0, <, 300);
    db_exec(db, "COMMIT");
    CHECK_RC(dlock_try_acquire(q), DLOCK_OK);
    CHECK_RC(dlock_release(q), DLOCK_OK);
    sqlite3_close(db);
    dlock_lock_free(q);
    dlock_client_close(quick);
    dlock_lock_free(h);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- woken, not polled */

enum { CHAIN = 6 };

typedef struct in_line {
    dlock_lock *l;
    int rc;
} in_line;

static void *take_give_back(void *arg)
{
    in_line *k = arg;
    k->rc = dlock_acquire(k->l, 10000);
    if (k->rc == DLOCK_OK)
        k->rc = dlock_release(k->l);
    return NULL;
}

/* CHAIN waiters (a client each) in line behind a holder; the holder lets
 * go, each takes the name and gives it back at once: how long until the
 * last is done (ms), and whether every one was served. */
static int64_t chain_ms(void)
{
    dlock_client *h = client("?lease=10s"), *w[CHAIN];
    dlock_lock *hl = dt_lock(h, "chain", 0);
    in_line k[CHAIN];
    pthread_t t[CHAIN];
    CHECK_RC(dlock_acquire(hl, 0), DLOCK_OK);
    for (int i = 0; i < CHAIN; i++) {
        w[i] = client("?lease=10s");
        k[i] = (in_line){.l = dt_lock(w[i], "chain", 0), .rc = -1};
        CHECK(pthread_create(&t[i], NULL, take_give_back, &k[i]) == 0);
    }
    DT_WAIT_UNTIL(dt_query(h, "chain", 0).waiters == CHAIN, 5000);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    for (int i = 0; i < CHAIN; i++) {
        pthread_join(t[i], NULL);
        CHECK_RC(k[i].rc, DLOCK_OK);
    }
    int64_t took = dt_now_ms() - t0;
    for (int i = 0; i < CHAIN; i++) {
        dlock_lock_free(k[i].l);
        dlock_client_close(w[i]);
    }
    dlock_lock_free(hl);
    dlock_client_close(h);
    return took;
}

/* Every transaction begun by any connection of this process (an SQLite
 * auto extension traces each connection opened after it is registered). */
static atomic_long begins;

static int count_begins(unsigned type, void *ctx, void *stmt, void *sql)
{
    (void) type, (void) ctx, (void) stmt;
    if (strncmp(sql, "BEGIN", 5) == 0)
        atomic_fetch_add(&begins, 1);
    return 0;
}

static int trace_begins(sqlite3 *db, char **err, const struct sqlite3_api_routines *api)
{
    (void) err, (void) api;
    sqlite3_trace_v2(db, SQLITE_TRACE_STMT, count_begins, NULL);
    return SQLITE_OK;
}

/* A waiter sleeps until a release wakes it (the wake counters beside the
 * database), looking again only every few tens of ms for what no release
 * announces, where it used to poll every 4 ms at the head of the line; a
 * line of waiters is served one after another, and is still served when
 * the counters cannot be mapped (a directory in the way: they poll). */
static void waiters_woken(void)
{
    fresh();
    void (*ext)(void) = (void (*)(void)) trace_begins;
    CHECK_INT(sqlite3_auto_extension(ext), ==, SQLITE_OK);
    dlock_client *c = client("?lease=10s"), *w = client("?lease=10s");
    dlock_lock *h = dt_lock(c, "still", 0), *wl = dt_lock(w, "still", 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    waiting wt = {.l = wl, .wait_ms = 10000};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_thread, &wt) == 0);
    DT_WAIT_UNTIL(dt_query(c, "still", 0).waiters == 1, 5000);
    /* the interval measured: what the waiter does while nothing changes */
    long b0 = atomic_load(&begins);
    struct timespec second = {1, 0};
    nanosleep(&second, NULL);
    long looks = atomic_load(&begins) - b0;
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(h), DLOCK_OK);
    pthread_join(th, NULL);
    CHECK_RC(wt.rc, DLOCK_OK);
    printf("a waiter behind a holder for 1 s: %ld transactions; served %lld ms after the "
           "release\n",
           looks, (long long) (dt_now_ms() - t0));
    CHECK_INT(looks, <, 80); /* a look every 32 ms, a renewal or two */
    CHECK_RC(dlock_release(wl), DLOCK_OK);
    sqlite3_cancel_auto_extension(ext);
    dlock_lock_free(h);
    dlock_lock_free(wl);
    dlock_client_close(c);
    dlock_client_close(w);

    int64_t woken = chain_ms();
    fresh();
    char path[200];
    snprintf(path, sizeof path, "%s/locks.db-dlockwake", dir);
    CHECK(mkdir(path, 0700) == 0);
    int64_t polled = chain_ms();
    printf("%d waiters in line served one after another: %lld ms woken, %lld ms polling\n", CHAIN,
           (long long) woken, (long long) polled);
    rmdir(path);
}

/* ---------------------------------------------------------------- first in line */

/* Issue 23: a waiter polls with a backoff that grows to 64 ms, while a
 * client that has just released looks again at once, so under steady load
 * the waiter used to lose every round (the fault suite's final phase: a
 * multi-lock waiter not served in 14 s). A free name now goes to the
 * oldest live waiter first: a plain waiter and a multi-lock waiter on the
 * hot name and another are each served well within their budget beside
 * clients that take and give back the hot name in tight loops. */
static void waiter_not_starved(void)
{
    fresh();
    dt_hot_name_serves_waiters(url, "?lease=5s");
}

/* A free name waited for by an older live waiter is that waiter's: the
 * holder that releases cannot take it straight back, nor can a try; a
 * waiter row of a process that is gone, of another boot or past its lease
 * claims nothing. */
static void free_name_goes_to_waiter(void)
{
    fresh();
    dlock_client *c = client("?lease=5s"), *w = client("?lease=5s");
    dlock_lock *h = dt_lock(c, "q", 0), *t = dt_lock(c, "q", 0), *wl = dt_lock(w, "q", 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    waiting wt = {.l = wl, .wait_ms = 5000};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_thread, &wt) == 0);
    DT_WAIT_UNTIL(dt_query(c, "q", 0).waiters == 1, 5000);
    CHECK_RC(dlock_release(h), DLOCK_OK);
    /* held by the waiter already, or left to it: either way not ours */
    CHECK_RC(dlock_try_acquire(t), DLOCK_EBUSY);
    printf("a try after the release, beside a waiter: %s\n", dlock_errmsg());
    pthread_join(th, NULL);
    CHECK_RC(wt.rc, DLOCK_OK);
    CHECK_RC(dlock_release(wl), DLOCK_OK);

    /* rows that claim nothing: a gone process, another boot, a lapsed one */
    char boot_now[48] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    CHECK(f != NULL && fgets(boot_now, sizeof boot_now, f) != NULL);
    fclose(f);
    boot_now[strcspn(boot_now, "\n")] = '\0';
    char ns[64] = "";
    ssize_t nl = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[nl > 0 ? nl : 0] = '\0';
    sqlite3 *db = db_open();
    char sql[700];
    snprintf(sql, sizeof sql,
             "INSERT INTO dlock_wait (name, owner, boot, expires, pid, start, pidns, since) "
             "VALUES ('q', 'gone', '%s', 1e15, 4194303, 5, '%s', 0), "
             "('q', 'old-boot', '00000000-0000-0000-0000-000000000000', 1e15, %lld, 0, '', 0), "
             "('q', 'lapsed', '%s', 1, %lld, 0, '', 0)",
             boot_now, ns, (long long) getpid(), boot_now, (long long) getpid());
    db_exec(db, sql);
    CHECK_RC(dlock_try_acquire(t), DLOCK_OK);
    CHECK_RC(dlock_release(t), DLOCK_OK);
    /* ... and a live one does: this process, its lease ahead */
    snprintf(sql, sizeof sql,
             "INSERT INTO dlock_wait (name, owner, boot, expires, pid, start, pidns, since) "
             "VALUES ('q', 'live', '%s', 1e15, 0, 0, '', 0)",
             boot_now);
    db_exec(db, sql);
    CHECK_RC(dlock_try_acquire(t), DLOCK_EBUSY);
    db_exec(db, "DELETE FROM dlock_wait WHERE owner = 'live'");
    CHECK_RC(dlock_try_acquire(t), DLOCK_OK);
    CHECK_RC(dlock_release(t), DLOCK_OK);
    sqlite3_close(db);
    dlock_lock_free(h);
    dlock_lock_free(t);
    dlock_lock_free(wl);
    dlock_client_close(w);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- kinds */

/* Read handles that share an owner token (dlock_lock_dup) hold the name
 * twice in one row: one's release leaves the other's hold. A semaphore's
 * permits add up across holders, and its users must agree on their
 * number while it is in use. */
static void shared_holds_counted(void)
{
    fresh();
    dlock_client *c = client(""), *d = client("");
    dlock_lock *r1 = dt_lock(c, "rw", DLOCK_READ), *r2 = NULL;
    dlock_lock *w = dt_lock(d, "rw", DLOCK_WRITE);
    CHECK_RC(dlock_try_acquire(r1), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(r1, DLOCK_READ, &r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK);
    CHECK(dlock_lock_fence(r2) > dlock_lock_fence(r1));
    sqlite3 *db = db_open();
    CHECK_INT(db_int(db, "SELECT count FROM dlock_hold WHERE name = 'rw'"), ==, 2);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY); /* r2 still reads */
    CHECK_INT(dlock_lock_verify(r2), ==, DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    CHECK_RC(dlock_release(w), DLOCK_OK);

    /* two permits of three taken by one client, one by another: full;
     * the two let go, two more fit */
    dlock_lock *s1 = NULL, *s3 = NULL, *s4 = NULL;
    CHECK_RC(dlock_semaphore_open(c, "sem", 3, 2, &s1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s1), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(d, "sem", 3, 1, &s3), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s3), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(d, "sem", 3, 2, &s4), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s4), DLOCK_EBUSY);
    dlock_status st = dt_query(d, "sem", DLOCK_SEMAPHORE);
    CHECK_INT(st.permits_used, ==, 3);
    CHECK_INT(st.permits, ==, 3);
    CHECK_INT(st.shared, ==, 2);
    CHECK_RC(dlock_release(s1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s4), DLOCK_OK);
    CHECK_RC(dlock_release(s3), DLOCK_OK);
    CHECK_RC(dlock_release(s4), DLOCK_OK);
    /* idle, the semaphore takes the next request's number */
    dlock_lock *s5 = NULL;
    CHECK_RC(dlock_semaphore_open(c, "sem", 5, 5, &s5), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s5), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s1), DLOCK_EINVAL); /* 3 permits, while 5 are in use */
    CHECK(strstr(dlock_errmsg(), "5 permits") != NULL);
    CHECK_RC(dlock_release(s5), DLOCK_OK);
    sqlite3_close(db);
    dlock_lock *all[] = {r1, r2, w, s1, s3, s4, s5};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        dlock_lock_free(all[i]);
    dlock_client_close(c);
    dlock_client_close(d);
}

/* ---------------------------------------------------------------- schema */

/* The tables of schema 1 (no since in dlock_wait) or 2 (a hold's key has
 * no kind) made by hand, with a live hold of someone's: the first open
 * upgrades them to 3, the hold stays a hold, and the kinds work. */
static void upgraded(int from)
{
    char sql[2048], boot_now[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    CHECK(f != NULL && fgets(boot_now, sizeof boot_now, f) != NULL);
    fclose(f);
    boot_now[strcspn(boot_now, "\n")] = '\0';
    fresh();
    char path[400];
    sqlite3 *db = NULL;
    snprintf(path, sizeof path, "%s/locks.db", dir);
    CHECK_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), ==,
              SQLITE_OK);
    snprintf(sql, sizeof sql,
             "CREATE TABLE dlock_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT "
             "ROWID; INSERT INTO dlock_meta VALUES ('schema', %d);"
             "CREATE TABLE dlock_fence (name TEXT PRIMARY KEY, fence INTEGER NOT NULL) WITHOUT "
             "ROWID;"
             "CREATE TABLE dlock_hold (name TEXT NOT NULL, owner TEXT NOT NULL, kind INTEGER NOT "
             "NULL, count INTEGER NOT NULL, info TEXT NOT NULL, fence INTEGER NOT NULL, boot "
             "TEXT NOT NULL, expires INTEGER NOT NULL, pid INTEGER NOT NULL, start INTEGER NOT "
             "NULL, pidns TEXT NOT NULL, PRIMARY KEY (name, owner)) WITHOUT ROWID;"
             "CREATE TABLE dlock_wait (name TEXT NOT NULL, owner TEXT NOT NULL, boot TEXT NOT "
             "NULL, expires INTEGER NOT NULL, pid INTEGER NOT NULL, start INTEGER NOT NULL, "
             "pidns TEXT NOT NULL, %s PRIMARY KEY (name, owner)) WITHOUT ROWID;"
             "INSERT INTO dlock_hold VALUES ('kept', 'someone', 0, 1, 'test', 5, '%s', 1e15, 0, "
             "0, ''); INSERT INTO dlock_fence VALUES ('kept', 5);",
             from, from == 1 ? "" : "since INTEGER NOT NULL DEFAULT 0,", boot_now);
    db_exec(db, sql);
    dlock_client *c = client("");
    CHECK_INT(db_int(db, "SELECT value FROM dlock_meta WHERE key = 'schema'"), ==, 3);
    CHECK_INT(db_int(db, "SELECT count(*) FROM pragma_table_info('dlock_wait') WHERE name IN "
                         "('since', 'kind', 'count', 'permits')"),
              ==, 4);
    CHECK_INT(db_int(db, "SELECT count(*) FROM pragma_table_info('dlock_hold') WHERE name = "
                         "'kind' AND pk > 0"),
              ==, 1);
    dlock_lock *l = dt_lock(c, "kept", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY); /* someone's hold, kept */
    db_exec(db, "DELETE FROM dlock_hold WHERE name = 'kept'");
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), ==, 6);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    /* one owner, two kinds of one name: the write lock, then the read lock */
    dlock_lock *w = dt_lock(c, "rw", DLOCK_WRITE), *r = NULL;
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &r), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r), DLOCK_OK);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_close(c);
    sqlite3_close(db);
}

/* The first client makes the tables (WAL mode); a second one finds them
 * and changes nothing in the schema; fences go on where they were. */
static void schema_made_once(void)
{
    fresh();
    dlock_client *c1 = client("");
    dlock_lock *maker = dt_lock(c1, "maker", 0);
    CHECK_RC(dlock_try_acquire(maker), DLOCK_OK); /* the file made (a lock makes it) */
    CHECK_RC(dlock_release(maker), DLOCK_OK);
    dlock_lock_free(maker);
    sqlite3 *db = db_open();
    CHECK_INT(db_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                         "('dlock_meta', 'dlock_fence', 'dlock_hold', 'dlock_wait')"),
              ==, 4);
    CHECK_INT(db_int(db, "SELECT value FROM dlock_meta WHERE key = 'schema'"), ==, 3);
    sqlite3_stmt *st = NULL;
    CHECK_INT(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), ==, SQLITE_OK);
    CHECK_INT(sqlite3_step(st), ==, SQLITE_ROW);
    CHECK(strcmp((const char *) sqlite3_column_text(st, 0), "wal") == 0);
    sqlite3_finalize(st);
    int64_t version = db_int(db, "PRAGMA schema_version");
    dlock_lock *l = dt_lock(c1, "s", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(l);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c1);

    dlock_client *c2 = client("");
    CHECK_INT(db_int(db, "PRAGMA schema_version"), ==, version);
    l = dt_lock(c2, "s", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), ==, f1 + 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c2);

    /* a schema from a newer dlock is refused, not misread */
    db_exec(db, "UPDATE dlock_meta SET value = 99 WHERE key = 'schema'");
    dlock_client *c3 = NULL;
    CHECK_RC(dlock_client_open(url, &c3), DLOCK_ENOTSUP);
    CHECK(strstr(dlock_errmsg(), "newer") != NULL);
    sqlite3_close(db);

    /* the tables of schemas 1 and 2 are upgraded, their holds kept (in
     * files of their own) */
    for (int from = 1; from <= 2; from++)
        upgraded(from);
}

/* ---------------------------------------------------------------- bad input */

static void expect_open(const char *u, int code, const char *says)
{
    dlock_client *c = NULL;
    int rc = dlock_client_open(u, &c);
    printf("%s: %s (%s)\n", u, dlock_strerror(rc), dlock_errmsg());
    CHECK_RC(rc, code);
    CHECK(c == NULL);
    if (says != NULL && strstr(dlock_errmsg(), says) == NULL)
        dt_fail(__FILE__, __LINE__, "'%s' does not say '%s'", dlock_errmsg(), says);
}

/* A database file this user may not write, and a directory where it may
 * not create one: each message names the file or directory and what to do.
 * As root (whom permissions do not stop), in a child that runs as nobody. */
static void unwritable_places(void)
{
    char u[400], ro_file[300], ro_dir[300];

    CHECK(chmod(dir, 0755) == 0); /* nobody may look inside */
    snprintf(ro_dir, sizeof ro_dir, "%s/ro", dir);
    CHECK(mkdir(ro_dir, 0555) == 0);
    snprintf(ro_file, sizeof ro_file, "%s/ro.db", dir);
    dlock_client *c = NULL;
    snprintf(u, sizeof u, "sqlite://%s", ro_file);
    CHECK_RC(dlock_client_open(u, &c), DLOCK_OK); /* a database, made by its owner */
    dlock_lock *maker = dt_lock(c, "maker", 0);
    CHECK_RC(dlock_try_acquire(maker), DLOCK_OK); /* (a lock makes the file) */
    CHECK_RC(dlock_release(maker), DLOCK_OK);
    dlock_lock_free(maker);
    dlock_client_close(c);
    CHECK(chmod(ro_file, 0444) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0)
            CHECK(setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0);
        expect_open(u, DLOCK_ESERVER, "is not readable and writable by this user");
        CHECK(strstr(dlock_errmsg(), ro_file) != NULL && strstr(dlock_errmsg(), "chmod") != NULL);
        snprintf(u, sizeof u, "sqlite://%s/locks.db", ro_dir);
        expect_open(u, DLOCK_ESERVER, "is not writable for this user");
        CHECK(strstr(dlock_errmsg(), ro_dir) != NULL &&
              strstr(dlock_errmsg(), "give the user write permission on the directory") != NULL);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void bad_input(void)
{
    char u[400], path[300];
    fresh();

    /* relative paths: two slashes read the first part as a host */
    expect_open("sqlite://locks.db", DLOCK_EINVAL, "absolute");
    expect_open("sqlite://./locks.db", DLOCK_EINVAL, "absolute");
    expect_open("sqlite://", DLOCK_EINVAL, "absolute");
    expect_open("sqlite:///", DLOCK_EINVAL, "absolute");
    /* ... and the message says the absolute URL of the file meant */
    char cwd[200], want[300];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(want, sizeof want, "sqlite://%s/locks.db", strcmp(cwd, "/") == 0 ? "" : cwd);
    expect_open("sqlite://./locks.db", DLOCK_EINVAL, want);
    snprintf(want, sizeof want, "sqlite://%s/sub/locks.db", strcmp(cwd, "/") == 0 ? "" : cwd);
    expect_open("sqlite://sub/locks.db", DLOCK_EINVAL, want);
    /* ... and, most often meant, the path with its first slash left out */
    expect_open("sqlite://tmp/locks.db", DLOCK_EINVAL, "for /tmp/locks.db, sqlite:///tmp/locks.db");
    /* a directory */
    snprintf(u, sizeof u, "sqlite://%s", dir);
    expect_open(u, DLOCK_EINVAL, "is a directory");
    snprintf(u, sizeof u, "sqlite://%s/", dir);
    expect_open(u, DLOCK_EINVAL, "directory");
    /* a directory that is not there */
    snprintf(u, sizeof u, "sqlite://%s/no/such/dir/locks.db", dir);
    expect_open(u, DLOCK_EINVAL, "does not exist: create it (mkdir -p ");
    /* a file that is not a database: refused, and left as it was */
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    for (int i = 0; i < 100; i++)
        fprintf(f, "line %d of a text file that is not a database\n", i);
    fclose(f);
    struct stat before, after;
    CHECK(stat(path, &before) == 0);
    snprintf(u, sizeof u, "sqlite://%s", path);
    expect_open(u, DLOCK_EINVAL, "not an SQLite database");
    CHECK(stat(path, &after) == 0);
    CHECK_INT(after.st_size, ==, before.st_size);
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
          after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    /* options it does not know, and bad values of the ones it does: refused
     * before the file is made */
    snprintf(u, sizeof u, "%s?mode=wal", url);
    expect_open(u, DLOCK_EINVAL, "unknown option 'mode'");
    snprintf(u, sizeof u, "%s?connect_timeout=soon", url);
    expect_open(u, DLOCK_EINVAL, "connect_timeout");
    snprintf(path, sizeof path, "%s/locks.db", dir);
    CHECK(access(path, F_OK) != 0 && errno == ENOENT);
    /* a read-only place: /proc takes no new files, even from root; and a
     * read-only directory when not root */
    {
        /* (its directory looks writable to root: told at the first lock,
         * which makes the file) */
        dlock_client *p = NULL;
        int prc = dlock_client_open("sqlite:///proc/dlock-test.db", &p);
        if (geteuid() != 0) {
            CHECK_RC(prc, DLOCK_ESERVER);
            CHECK(strstr(dlock_errmsg(), "/proc is not writable") != NULL);
        } else {
            CHECK_RC(prc, DLOCK_OK);
            dlock_lock *pl = dt_lock(p, "x", 0);
            CHECK_RC(dlock_try_acquire(pl), DLOCK_ESERVER);
            CHECK(strstr(dlock_errmsg(), "cannot write") != NULL);
            dlock_lock_free(pl);
            dlock_client_close(p);
        }
    }
    unwritable_places();
    /* after all that, the good URL works */
    dlock_client *c = client("");
    dlock_lock *l = dt_lock(c, "after", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    /* what the API refuses for every store */
    dlock_lock *bad = NULL;
    CHECK_RC(dlock_lock_open(c, "", 0, &bad), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire_for(l, 0, 0), DLOCK_EINVAL);
    CHECK_RC(dlock_lock_open(c, "s", DLOCK_FAIR, &bad), DLOCK_ENOTSUP);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- a file not there */

static void count_call(const char *name, unsigned flags, void *arg)
{
    (void) name;
    (void) flags;
    (*(int *) arg)++;
}

static void count_holder(const dlock_holder *h, void *arg)
{
    (void) h;
    (*(int *) arg)++;
}

typedef struct said {
    int warnings;
    char last[600];
} said;

static void keep_log(int level, const char *msg, void *arg)
{
    said *s = arg;
    if (level == DLOCK_LOG_WARN) {
        s->warnings++;
        snprintf(s->last, sizeof s->last, "%s", msg);
    }
}

/* A path with no file (a mistyped one): the operators' calls (status,
 * holders, list, force-unlock) make no file, say so once, and report what
 * is true: nothing held. The first lock makes it. Before, the client's
 * open made the file, and `dlock status` said "free" of a path nobody
 * uses. */
static void missing_file_not_made(void)
{
    char path[300], wake[320];
    fresh();
    snprintf(path, sizeof path, "%s/locks.db", dir);
    snprintf(wake, sizeof wake, "%s-dlockwake", path);
    dlock_client *c = client("");
    said log = {0};
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, keep_log, &log), DLOCK_OK);
    dlock_status st = dt_query(c, "job", 0);
    CHECK_INT(st.held, ==, 0);
    CHECK_INT(st.last_fence, ==, 0);
    CHECK_INT(st.waiters, ==, 0);
    int n = 0;
    CHECK_RC(dlock_query_holders(c, "job", 0, count_holder, &n), DLOCK_OK);
    CHECK_RC(dlock_list(c, "", 0, count_call, &n), DLOCK_OK);
    CHECK_INT(n, ==, 0);
    int was_held = -2;
    CHECK_RC(dlock_force_unlock2(c, "job", 0, &was_held), DLOCK_OK);
    CHECK_INT(was_held, ==, 0);
    CHECK(access(path, F_OK) != 0 && errno == ENOENT);
    CHECK(access(wake, F_OK) != 0 && errno == ENOENT);
    printf("said: %s\n", log.last);
    CHECK_INT(log.warnings, ==, 1); /* once per client */
    CHECK(strstr(log.last, "no lock file at") != NULL && strstr(log.last, path) != NULL &&
          strstr(log.last, "mistyped") != NULL);

    /* another client makes it by taking a lock: this one then sees it */
    dlock_client *d = client("");
    dlock_lock *l = dt_lock(d, "job", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK(access(path, F_OK) == 0);
    st = dt_query(c, "job", 0);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, dlock_lock_token(l)) == 0);
    CHECK_INT(st.last_fence, ==, dlock_lock_fence(l));
    n = 0;
    CHECK_RC(dlock_list(c, "", 0, count_call, &n), DLOCK_OK);
    CHECK_INT(n, ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(d);
    dlock_client_close(c);

    /* a lock taken by the client that found no file makes it */
    fresh();
    snprintf(path, sizeof path, "%s/locks.db", dir);
    c = client("");
    CHECK(access(path, F_OK) != 0);
    l = dt_lock(c, "job", 0);
    CHECK_RC(dlock_acquire(l, 1000), DLOCK_OK);
    CHECK(dlock_lock_fence(l) > 0);
    CHECK(access(path, F_OK) == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* The longest name the API takes is stored and found as given. */
static void long_names(void)
{
    char name[DLOCK_NAME_MAX + 1];
    fresh();
    memset(name, 'n', DLOCK_NAME_MAX);
    name[DLOCK_NAME_MAX] = '\0';
    memcpy(name, "\xc3\xa9t\xc3\xa9 ", 6);
    dlock_client *c = client("");
    dlock_lock *l = dt_lock(c, name, 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    dlock_status st = dt_query(c, name, 0);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, dlock_lock_token(l)) == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"many_processes", many_processes},
        {"first_opens_race", first_opens_race},
        {"dead_holder_freed", dead_holder_freed},
        {"detached_outlives_process", detached_outlives_process},
        {"foreign_rows", foreign_rows},
        {"fence_counter_kept", fence_counter_kept},
        {"lost_hold_new_fence", lost_hold_new_fence},
        {"bounded_beside_busy_thread", bounded_beside_busy_thread},
        {"no_spin", no_spin},
        {"waiters_woken", waiters_woken},
        {"waiter_not_starved", waiter_not_starved},
        {"free_name_goes_to_waiter", free_name_goes_to_waiter},
        {"shared_holds_counted", shared_holds_counted},
        {"schema_made_once", schema_made_once},
        {"bad_input", bad_input},
        {"long_names", long_names},
        {"missing_file_not_made", missing_file_not_made},
    };
    return DT_RUN(tests);
}
