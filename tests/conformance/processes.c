/* SPDX-License-Identifier: MIT */
/* processes.c - many processes on one lock: the fenced counter (8
 * processes x N increments through the lock make exactly 8N, every write
 * with a larger fence than the one before), and the command line's
 * `dlock run` on the store (the fence in DLOCK_TOKEN, exit codes). */
#define _GNU_SOURCE
#include "conformance.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- fenced counter */

/* The resource: "VALUE FENCE" in a file, read, changed and written back
 * with no atomicity of its own. A write whose fence is not above the last
 * one is refused (counted), as a fenced storage service would. */
void ct_fenced_counter(void)
{
    enum { P = 8, N = 25 };
    const char *name = CT_NAME("counter");
    char dir[160], path[200], refused_path[200], text[128];
    pid_t pids[P];

    dt_make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/counter", dir);
    snprintf(refused_path, sizeof refused_path, "%s/refused", dir);
    ct_write_file(path, "0 0\n");
    for (int p = 0; p < P; p++) {
        pids[p] = fork(); /* all before this process has threads */
        if (pids[p] == 0) {
            dlock_client *c = ct_client("");
            dlock_lock *l = ct_lock(c, name, 0);
            for (int i = 0; i < N; i++) {
                long value = -1;
                uint64_t last = 0;
                CHECK_RC(dlock_acquire(l, 60000), DLOCK_OK);
                uint64_t fence = dlock_lock_fence(l);
                ct_read_file(path, text, sizeof text);
                CHECK(sscanf(text, "%ld %" SCNu64, &value, &last) == 2);
                usleep(200); /* widen the window a lost update needs */
                if (fence > last) {
                    snprintf(text, sizeof text, "%ld %" PRIu64 "\n", value + 1, fence);
                    ct_write_file(path, text);
                } else {
                    FILE *f = fopen(refused_path, "a");
                    fprintf(f, "fence %" PRIu64 " after %" PRIu64 "\n", fence, last);
                    fclose(f);
                }
                CHECK_RC(dlock_release(l), DLOCK_OK);
            }
            dlock_lock_free(l);
            dlock_client_close(c);
            _exit(0);
        }
    }
    int64_t t0 = dt_now_ms();
    for (int p = 0; p < P; p++)
        ct_wait_worker(pids[p], "a counter process");
    long value = -1;
    uint64_t last = 0;
    ct_read_file(path, text, sizeof text);
    CHECK(sscanf(text, "%ld %" SCNu64, &value, &last) == 2);
    char refused[512];
    ct_read_file(refused_path, refused, sizeof refused);
    printf("%s: %d processes x %d increments = %ld in %lld ms\n", ct->kind, P, N, value,
           (long long) (dt_now_ms() - t0));
    if (refused[0] != '\0')
        dt_fail(__FILE__, __LINE__, "stale fences were refused: %s", refused);
    CHECK_INT(value, ==, P * N);
}

/* ---------------------------------------------------------------- dlock run */

static int dlock_run(const char *url, const char *const *args, int timeout_ms)
{
    const char *argv[24];
    int n = 0;
    argv[n++] = dt_bin("dlock");
    argv[n++] = "run";
    argv[n++] = "-u";
    argv[n++] = url;
    for (int i = 0; args[i] != NULL && n < 23; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return ct_run_program(argv, timeout_ms);
}

static uint64_t fence_in(const char *path)
{
    char text[64];
    ct_read_file(path, text, sizeof text);
    return strtoull(text, NULL, 10);
}

void ct_cli_run(void)
{
    const char *name = CT_NAME("cli");
    char dir[160], out[200], script[400], bad[300], unreachable[300];

    dt_make_temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/fence", dir);
    snprintf(script, sizeof script, "printf %%s \"$DLOCK_TOKEN\" > %s; exit 7", out);
    const char *url = ct_url("");

    /* the command runs holding the lock, with its fence; its status is dlock's */
    const char *run1[] = {name, "--", "/bin/sh", "-c", script, NULL};
    CHECK_INT(dlock_run(url, run1, 20000), ==, 7);
    uint64_t f1 = fence_in(out);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK(f1 > 0);

    /* held by a library client: -n fails at once, -E picks the code, -w waits then fails */
    dlock_client *c = ct_client("");
    dlock_lock *l = ct_lock(c, name, 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(l), >, f1);
    const char *busy[] = {"-n", "-q", name, "--", "true", NULL};
    CHECK_INT(dlock_run(url, busy, 20000), ==, 1);
    const char *busy_e[] = {"-n", "-q", "-E", "42", name, "--", "true", NULL};
    CHECK_INT(dlock_run(url, busy_e, 20000), ==, 42);
    int64_t t0 = dt_now_ms();
    const char *busy_w[] = {"-w", "300ms", "-q", name, "--", "true", NULL};
    CHECK_INT(dlock_run(url, busy_w, 20000), ==, 1);
    CHECK_INT(dt_now_ms() - t0, >=, 290);
    if (ct_has(DLOCK_CAP_QUERY))
        CHECK_INT(ct_waiters(c, name, 0), ==, 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    /* the next holder has a larger fence, and the lock is free after */
    CHECK_INT(dlock_run(url, run1, 20000), ==, 7);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(fence_in(out), >, dlock_lock_fence(l));
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    /* a command that is not there, a bad URL, a store nobody answers for */
    const char *missing[] = {name, "--", "/nonexistent/program", NULL};
    CHECK_INT(dlock_run(url, missing, 20000), ==, 127);
    snprintf(bad, sizeof bad, "%s", ct_url("?no_such_option=1"));
    CHECK_INT(dlock_run(bad, run1, 20000), ==, 64);
    if (ct_has(CT_LINK)) { /* a file store has no address to miss */
        char base[256];
        dt_server_url_at(&ct->srv, dt_free_port(), base, sizeof base);
        snprintf(unreachable, sizeof unreachable, "%s%cconnect_timeout=300ms&timeout=500ms", base,
                 strchr(base, '?') != NULL ? '&' : '?');
        const char *quick[] = {"-w", "500ms", "-q", name, "--", "true", NULL};
        CHECK_INT(dlock_run(unreachable, quick, 20000), ==, 69);
    }
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK); /* nothing was left held */
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* The flash-sale demo (scripts/demo.sh) with its lock in this store: its
 * shop stays in the demo's own redis-server, only the lock's URL changes.
 * It exits 0 only when exactly the stock was sold and the fences its
 * purchases recorded increase. A stock of 30 keeps it short. */
void ct_flash_sale_demo(void)
{
    setenv("STOCK", "30", 1);
    char url[512];
    snprintf(url, sizeof url, "%s", ct_url(""));
    const char *argv[] = {
        "bash", DT_SOURCE_DIR "/examples/flash-sale/flash_sale.sh", "-u", url, dt_bin("dlock"),
        NULL};
    CHECK_INT(ct_run_program(argv, 120000), ==, 0);
}

/* The lock is taken away while the command runs: dlock stops it and exits
 * 75 (EX_TEMPFAIL). */
void ct_cli_run_lost(void)
{
    const char *name = CT_NAME("cli-lost");
    char url[512], started[128], script[256];
    snprintf(url, sizeof url, "%s", ct_url("?lease=1s"));
    /* The command says it runs: the grant has returned. (Held in the store
     * is not enough: a force-unlock inside the grant's request, between a
     * session store's lock and its fence, fails that attempt, and dlock
     * takes the lock again, running the command only then.) */
    snprintf(started, sizeof started, "/tmp/dlock-cli-lost-%d", (int) getpid());
    unlink(started);
    snprintf(script, sizeof script, ": > %s; exec sleep 60", started);
    const char *argv[] = {dt_bin("dlock"), "run", "-u", url, "--grace", "1s", name, "-c",
                          script,          NULL};

    pid_t pid = ct_spawn(argv);
    dlock_client *c = ct_client("");
    DT_WAIT_UNTIL(access(started, F_OK) == 0, 10000);
    unlink(started);
    CHECK(ct_query(c, name, 0).held);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_force_unlock(c, name, 0), DLOCK_OK);
    CHECK_INT(ct_wait_program(pid, 10000), ==, 75);
    CHECK_INT(dt_now_ms() - t0, <, 1000 + 1000 + 2000); /* a renewal, the grace, slack */
    dlock_client_close(c);
}
