/* SPDX-License-Identifier: MIT */
/* test_interop.c - simple mode against redis-py's Lock on the same key:
 * each excludes the other, both ways, and a dlock waiter gets the lock when
 * redis-py releases it. */
#include "../support/harness.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DT_SOURCE_DIR
#define DT_SOURCE_DIR "."
#endif

static dt_server srv;

/* Runs the redis-py helper with `action` and returns its first line. */
static const char *redispy(const char *action, const char *name)
{
    static char line[256];
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/interop/redispy_lock.py %d %s '%s'",
             DT_SOURCE_DIR, srv.port, action, name);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    line[0] = '\0';
    if (fgets(line, sizeof line, p) == NULL)
        line[0] = '\0';
    CHECK_INT(pclose(p), ==, 0);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static void redispy_blocked_by_dlock(void)
{
    dlock_client *c;
    dlock_lock *l;

    dt_server_start(&srv, "redis", 0, NULL);
    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "shared-job", DLOCK_SIMPLE, &l), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    /* the plain key, holding our token, as redis-py expects */
    CHECK(strcmp(dt_server_cli(&srv, "GET shared-job"), dlock_lock_token(l)) == 0);
    CHECK(strcmp(redispy("try", "shared-job"), "busy") == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK(strcmp(redispy("try", "shared-job"), "acquired") == 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void dlock_blocked_by_redispy(void)
{
    dlock_client *c;
    dlock_lock *l;
    char cmd[512], line[256];

    dt_server_start(&srv, "redis", 0, NULL);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/interop/redispy_lock.py %d hold shared",
             DT_SOURCE_DIR, srv.port);
    int to_py[2], from_py[2];
    CHECK(pipe(to_py) == 0 && pipe(from_py) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_py[0], 0);
        dup2(from_py[1], 1);
        close(to_py[1]);
        close(from_py[0]);
        execl("/bin/sh", "sh", "-c", cmd, (char *) NULL);
        _exit(127);
    }
    close(to_py[0]);
    close(from_py[1]);
    FILE *out = fdopen(from_py[0], "r");
    CHECK(fgets(line, sizeof line, out) != NULL);
    CHECK(strncmp(line, "held ", 5) == 0);
    line[strcspn(line, "\n")] = '\0';

    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "shared", DLOCK_SIMPLE, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    dlock_status st;
    CHECK_RC(dlock_query(c, "shared", DLOCK_SIMPLE, &st), DLOCK_OK);
    CHECK(st.held && strcmp(st.owner, line + 5) == 0);

    /* tell redis-py to release, and wait for it (polling in simple mode) */
    CHECK(write(to_py[1], "\n", 1) == 1);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 5000); /* not the 30 s lease */
    CHECK(fgets(line, sizeof line, out) != NULL);
    CHECK(strncmp(line, "released", 8) == 0);
    CHECK(strcmp(dt_server_cli(&srv, "GET shared"), dlock_lock_token(l)) == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK(strcmp(dt_server_cli(&srv, "EXISTS shared"), "0") == 0);
    fclose(out);
    close(to_py[1]);
    waitpid(pid, NULL, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void simple_release_refuses_foreign_token(void)
{
    dlock_client *c;
    dlock_lock *l;

    dt_server_start(&srv, "redis", 0, NULL);
    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "k", DLOCK_SIMPLE, &l), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(l, 0, 10000), DLOCK_OK);
    /* someone else's client overwrote the key (expiry + re-take) */
    dt_server_cli(&srv, "SET k someone-else PX 10000");
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK(strcmp(dt_server_cli(&srv, "GET k"), "someone-else") == 0); /* not deleted */
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"redispy_blocked_by_dlock", redispy_blocked_by_dlock},
        {"dlock_blocked_by_redispy", dlock_blocked_by_redispy},
        {"simple_release_refuses_foreign_token", simple_release_refuses_foreign_token},
    };
    return DT_RUN(tests);
}
