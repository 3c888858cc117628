/* SPDX-License-Identifier: MIT */
/* runner.c - `conformance --store KIND [TEST...]`: one server of KIND for
 * the whole run, each test in a process (and process group) of its own with
 * a time limit, capability skips, known bugs, and a count line at the end.
 * See conformance.h for the rules a test follows. */
#define _GNU_SOURCE
#include "conformance.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_TEST_TIMEOUT_MS 60000

ct_context *ct;

static void usage(FILE *to)
{
    fprintf(to, "usage: conformance --store KIND [--options URLOPTIONS] [--list] [TEST...]\n"
                "  KIND: a server kind of tests/support (");
    for (const char *const *k = dt_server_kinds(); *k != NULL; k++)
        fprintf(to, "%s%s", k == dt_server_kinds() ? "" : ", ", *k);
    fprintf(to,
            ")\n"
            "  --options URLOPTIONS  added to every client's URL (mode=table)\n"
            "  --list  the tests and the capabilities each needs\n"
            "  CT_TEST_TIMEOUT=SECONDS  each test's limit (default %d)\n",
            DEFAULT_TEST_TIMEOUT_MS / 1000);
}

static void list_tests(void)
{
    for (size_t i = 0; i < ct_ntests; i++) {
        char needs[256] = "";
        size_t used = 0;
        for (unsigned bit = 1; bit != 0 && bit <= ct_tests[i].needs; bit <<= 1) {
            if (ct_tests[i].needs & bit)
                used += (size_t) snprintf(needs + used, sizeof needs - used, "%s%s",
                                          used ? "," : "", ct_need_name(bit));
        }
        printf("%-32s %-28s %s\n", ct_tests[i].name, used ? needs : "-", ct_tests[i].what);
    }
}

/* What the store can do, asked in a child so this process never starts a
 * client's threads (tests fork from it). */
static void probe_store(void)
{
    int fds[2];
    struct {
        int rc;
        unsigned caps;
        char name[32];
        char msg[256];
    } answer;

    if (pipe(fds) != 0)
        dt_fail(__FILE__, __LINE__, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        dlock_client *c = NULL;
        memset(&answer, 0, sizeof answer);
        answer.rc = dlock_client_open(ct_url(""), &c);
        snprintf(answer.msg, sizeof answer.msg, "%s", dlock_errmsg());
        if (answer.rc == DLOCK_OK) {
            answer.caps = dlock_client_caps(c);
            snprintf(answer.name, sizeof answer.name, "%s", dlock_client_store(c));
        }
        dlock_client_close(c);
        _exit(write(fds[1], &answer, sizeof answer) == (ssize_t) sizeof answer ? 0 : 1);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], &answer, sizeof answer);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    if (n != (ssize_t) sizeof answer)
        dt_fail(__FILE__, __LINE__, "the probe client died");
    if (answer.rc != DLOCK_OK)
        dt_fail(__FILE__, __LINE__, "cannot open a client of %s: %s", ct->srv.url, answer.msg);
    ct->caps = answer.caps;
    snprintf(ct->store_name, sizeof ct->store_name, "%s", answer.name);
}

const char *ct_need_name(unsigned bit)
{
    return bit == CT_LINK ? "link" : dlock_cap_name(bit);
}

static void missing_caps(unsigned missing, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned bit = 1; bit != 0 && bit <= missing; bit <<= 1) {
        if ((missing & bit) && used < len)
            used += (size_t) snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                      ct_need_name(bit));
    }
}

enum outcome { PASSED, FAILED, KNOWN_BUG };

static enum outcome run_test(const ct_test *t, int64_t limit_ms)
{
    int status = 0, timed_out = 0;
    int64_t start = dt_now_ms();

    ct->test = t->name;
    ct->known_bug[0] = '\0';
    ct->known_bug_declared = 0;
    ct->known_bug_seen = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        dt_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* its own group: whatever it forks goes with it */
        setpgid(0, 0);
        t->fn();
        fflush(NULL);
        exit(0);
    }
    setpgid(pid, pid);
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR)
            dt_fail(__FILE__, __LINE__, "waitpid: %s", strerror(errno));
        if (dt_now_ms() - start > limit_ms) {
            timed_out = 1;
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        dt_sleep_ms(5);
    }
    /* workers and helpers the test left behind */
    kill(-pid, SIGKILL);
    int64_t took = dt_now_ms() - start;
    int ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (timed_out)
        fprintf(stderr, "FAIL %s: no end within %lld ms (killed)\n", t->name, (long long) limit_ms);
    else if (WIFSIGNALED(status))
        fprintf(stderr, "FAIL %s: killed by signal %d\n", t->name, WTERMSIG(status));
    if (ct->known_bug_seen && (ok || ct->known_bug_declared)) {
        printf("KNOWN-BUG %s on %s (%lld ms): %s\n", t->name, ct->kind, (long long) took,
               ct->known_bug);
        return KNOWN_BUG;
    }
    if (ct->known_bug_declared) {
        if (ok) {
            printf("ok   %s (%lld ms) -- NOTE: marked as a known bug on %s but passed: %s\n",
                   t->name, (long long) took, ct->kind, ct->known_bug);
            return PASSED;
        }
        printf("KNOWN-BUG %s on %s (%lld ms): %s\n", t->name, ct->kind, (long long) took,
               ct->known_bug);
        return KNOWN_BUG;
    }
    printf("%s %s%s%s (%lld ms)\n", ok ? "ok  " : "FAIL", t->name, ok ? "" : " on ",
           ok ? "" : ct->kind, (long long) took);
    return ok ? PASSED : FAILED;
}

int main(int argc, char **argv)
{
    const char *kind = NULL;
    const char *names[256];
    int nnames = 0, list = 0;
    const char *options = NULL;
    int64_t limit_ms = DEFAULT_TEST_TIMEOUT_MS;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--store") == 0 && i + 1 < argc) {
            kind = argv[++i];
        } else if (strncmp(argv[i], "--store=", 8) == 0) {
            kind = argv[i] + 8;
        } else if (strcmp(argv[i], "--options") == 0 && i + 1 < argc) {
            options = argv[++i];
        } else if (strcmp(argv[i], "--list") == 0) {
            list = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' || nnames == (int) (sizeof names / sizeof names[0])) {
            usage(stderr);
            return 2;
        } else {
            names[nnames++] = argv[i];
        }
    }
    if (list) {
        list_tests();
        return 0;
    }
    int known_kind = 0;
    for (const char *const *k = dt_server_kinds(); kind != NULL && *k != NULL; k++)
        known_kind |= strcmp(*k, kind) == 0;
    if (!known_kind) {
        fprintf(stderr, "conformance: %s\n",
                kind == NULL ? "--store is required" : "no such store");
        usage(stderr);
        return 2;
    }
    for (int n = 0; n < nnames; n++) {
        size_t i = 0;
        while (i < ct_ntests && strcmp(ct_tests[i].name, names[n]) != 0)
            i++;
        if (i == ct_ntests) {
            fprintf(stderr, "conformance: no test named '%s' (see --list)\n", names[n]);
            return 2;
        }
    }
    const char *env = getenv("CT_TEST_TIMEOUT");
    if (env != NULL && atoi(env) > 0)
        limit_ms = (int64_t) atoi(env) * 1000;

    /* shared with the tests' processes: the known-bug note comes back here */
    ct = mmap(NULL, sizeof *ct, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ct == MAP_FAILED)
        dt_fail(__FILE__, __LINE__, "mmap: %s", strerror(errno));
    memset(ct, 0, sizeof *ct);
    ct->kind = kind;
    ct->options = options;
    int64_t t0 = dt_now_ms();
    dt_server_start(&ct->srv, kind, 0, NULL);
    probe_store();
    printf("conformance on %s (%s, %s%s%s), started in %lld ms\n", kind, ct->store_name,
           ct->srv.url, options != NULL ? "?" : "", options != NULL ? options : "",
           (long long) (dt_now_ms() - t0));
    fflush(stdout);

    int passed = 0, skipped = 0, known = 0, failed = 0;
    for (size_t i = 0; i < ct_ntests; i++) {
        const ct_test *t = &ct_tests[i];
        int chosen = nnames == 0;
        for (int n = 0; n < nnames; n++)
            chosen |= strcmp(names[n], t->name) == 0;
        if (!chosen)
            continue;
        unsigned missing = t->needs & ~ct_have();
        if (missing != 0) {
            char caps[256];
            missing_caps(missing, caps, sizeof caps);
            printf("SKIP %s on %s: store lacks %s\n", t->name, kind, caps);
            skipped++;
            continue;
        }
        switch (run_test(t, limit_ms)) {
        case PASSED:
            passed++;
            break;
        case KNOWN_BUG:
            known++;
            break;
        case FAILED:
            failed++;
            break;
        }
        fflush(stdout);
    }
    printf("conformance on %s: %d passed / %d skipped-by-capability / %d known-bug / %d failed "
           "(%lld ms)\n",
           kind, passed, skipped, known, failed, (long long) (dt_now_ms() - t0));
    if (known > 0)
        printf("conformance on %s: %d KNOWN BUG%s still failing (see KNOWN-BUG lines above)\n",
               kind, known, known == 1 ? "" : "S");
    dt_server_stop(&ct->srv);
    return failed == 0 ? 0 : 1;
}
