/* SPDX-License-Identifier: MIT */
/* server_postgres.c - the "postgres" server kind: Debian's PostgreSQL
 * (postgresql-NN) in the temp dir on a loopback port, fsync off.
 *
 * postgres refuses to run as root, and the tests run as root: the temp dir
 * is given to the `postgres` system user the package creates, and initdb
 * and the server run as that user through setpriv, which execs (so the pid
 * server.c holds is the server's) and asks for SIGKILL when the test dies
 * (a change of user clears the PR_SET_PDEATHSIG server.c set). Run as
 * another user, both run as that user directly.
 *
 * The cluster's superuser is `dlock` with password `dlock` (scram over TCP;
 * trust on the private unix socket in the temp dir, for psql), and the URL
 * names the `postgres` database: postgres://dlock:dlock@127.0.0.1:PORT/postgres.
 * A restart keeps the data dir; a wipe removes it and the next start runs
 * initdb again. */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <glob.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The newest /usr/lib/postgresql/NN/bin. */
static const char *pg_bin(void)
{
    static char bin[200];
    if (bin[0] == '\0') {
        glob_t g;
        snprintf(bin, sizeof bin, "/usr/lib/postgresql/15/bin");
        if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) == 0 && g.gl_pathc > 0) {
            size_t best = 0;
            for (size_t i = 1; i < g.gl_pathc; i++) {
                if (atoi(g.gl_pathv[i] + 20) > atoi(g.gl_pathv[best] + 20))
                    best = i;
            }
            snprintf(bin, sizeof bin, "%.*s", (int) (strlen(g.gl_pathv[best]) - 9),
                     g.gl_pathv[best]);
            globfree(&g);
        }
    }
    return bin;
}

static int as_root(void)
{
    return geteuid() == 0;
}

/* initdb into s->dir/data if it is not there yet. */
static void init_cluster(const dt_server *s)
{
    char data[256], pw[256], initdb[300], chdir_to[280];
    struct stat st;
    snprintf(data, sizeof data, "%s/data", s->dir);
    if (stat(data, &st) == 0)
        return;
    snprintf(pw, sizeof pw, "%s/pw", s->dir);
    FILE *f = fopen(pw, "w");
    if (f == NULL)
        dt_fail(__FILE__, __LINE__, "cannot write %s", pw);
    fputs("dlock\n", f);
    fclose(f);
    if (as_root()) {
        struct passwd *u = getpwnam("postgres");
        if (u == NULL)
            dt_fail(__FILE__, __LINE__,
                    "no user 'postgres' to run the server as (apt-get install "
                    "postgresql)");
        if (chown(s->dir, u->pw_uid, u->pw_gid) != 0 || chown(pw, u->pw_uid, u->pw_gid) != 0)
            dt_fail(__FILE__, __LINE__, "cannot give %s to user postgres", s->dir);
    }
    snprintf(initdb, sizeof initdb, "%s/initdb", pg_bin());
    snprintf(chdir_to, sizeof chdir_to, "--chdir=%s", s->dir);
    snprintf(pw, sizeof pw, "--pwfile=%s/pw", s->dir);
    const char *argv[] = {"setpriv",
                          "--reuid=postgres",
                          "--regid=postgres",
                          "--init-groups",
                          "--",
                          "env",
                          chdir_to,
                          initdb,
                          "-D",
                          data,
                          "-U",
                          "dlock",
                          pw,
                          "--auth-local=trust",
                          "--auth-host=scram-sha-256",
                          "--no-sync",
                          "--no-instructions",
                          "-E",
                          "UTF8",
                          NULL};
    const char *const *run = as_root() ? argv : argv + 5;
    if (dt__run_quiet(run, 60000) != 0)
        dt_fail(__FILE__, __LINE__, "initdb into %s failed", data);
}

static void pg_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    int argc = 0;
    init_cluster(s);
    snprintf(bufs[0], 256, "%s/postgres", pg_bin());
    snprintf(bufs[1], 256, "%s/data", s->dir);
    snprintf(bufs[2], 256, "%d", s->port);
    snprintf(bufs[3], 256, "unix_socket_directories=%s", s->dir);
    if (as_root()) {
        argv[argc++] = "setpriv";
        argv[argc++] = "--reuid=postgres";
        argv[argc++] = "--regid=postgres";
        argv[argc++] = "--init-groups";
        argv[argc++] = "--pdeathsig=KILL";
        argv[argc++] = "--";
    }
    argv[argc++] = bufs[0];
    argv[argc++] = "-D";
    argv[argc++] = bufs[1];
    argv[argc++] = "-p";
    argv[argc++] = bufs[2];
    argv[argc++] = "-c";
    argv[argc++] = "listen_addresses=127.0.0.1";
    argv[argc++] = "-c";
    argv[argc++] = bufs[3];
    argv[argc++] = "-c";
    argv[argc++] = "fsync=off";
    argv[argc++] = "-c";
    argv[argc++] = "synchronous_commit=off";
    argv[argc++] = "-c";
    argv[argc++] = "full_page_writes=off";
    argv[argc++] = "-c";
    argv[argc++] = "shared_buffers=16MB";
    argv[argc++] = "-c";
    argv[argc++] = "max_connections=300";
    argv[argc++] = "-c";
    argv[argc++] = "logging_collector=off";
    for (int i = 0; i < s->nargs && argc < 62; i++)
        argv[argc++] = s->args[i];
    argv[argc] = NULL;
}

static int pg_answers(const dt_server *s)
{
    int fd = dt__tcp_connect(s->port, 200);
    if (fd < 0)
        return 0;
    close(fd);
    char isready[300], port[16];
    snprintf(isready, sizeof isready, "%s/pg_isready", pg_bin());
    snprintf(port, sizeof port, "%d", s->port);
    const char *argv[] = {isready, "-q", "-h", s->dir, "-p", port, "-U", "dlock", NULL};
    return dt__run_quiet(argv, 3000) == 0;
}

static void pg_wipe(const dt_server *s)
{
    char path[200];
    snprintf(path, sizeof path, "%s/data", s->dir);
    dt__remove_tree(path);
}

/* A fast shutdown (SIGINT): SIGTERM would wait for every client to leave. */
static int pg_shutdown(dt_server *s, int keep)
{
    (void) keep;
    return kill(s->pid, SIGINT) == 0 ? 0 : -1;
}

static void pg_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s/psql -X -q -At -h %s -p %d -U dlock -d postgres ", pg_bin(), s->dir,
             s->port);
}

/* Deletes lock NAME's row of dlock_fence (its fence counter and lease):
 * the lock table row of a session-mode lock. The advisory lock itself, on
 * its holder's connection, stays. */
static int op_drop_lock(dt_server *s, const char *name)
{
    char psql[300], port[16], sql[600];
    if (name == NULL || strchr(name, '\'') != NULL) {
        fprintf(stderr, "postgres drop_lock: want a lock name without quotes\n");
        return -1;
    }
    snprintf(psql, sizeof psql, "%s/psql", pg_bin());
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(sql, sizeof sql, "DELETE FROM dlock_fence WHERE name = '%s'", name);
    const char *argv[] = {psql,
                          "-X",
                          "-q",
                          "-h",
                          s->dir,
                          "-p",
                          port,
                          "-U",
                          "dlock",
                          "-d",
                          "postgres",
                          "-v",
                          "ON_ERROR_STOP=1",
                          "-c",
                          sql,
                          NULL};
    return dt__run_quiet(argv, 5000) == 0 ? 0 : -1;
}

static const dt_server_op_entry pg_ops[] = {
    {"drop_lock", "delete lock NAME's row of dlock_fence (its fence and lease)", op_drop_lock, 2},
    {NULL, NULL, NULL, 0},
};

const dt_server_kind dt__postgres_kind = {
    .name = "postgres",
    .scheme = "postgres",
    .durable = 1,
    .start_timeout_ms = 30000,
    .argv = pg_argv,
    .answers = pg_answers,
    .wipe = pg_wipe,
    .shutdown = pg_shutdown,
    .cli_prefix = pg_cli_prefix,
    .ops = pg_ops,
    .url_auth = "dlock:dlock@",
    .url_path = "/postgres",
};
