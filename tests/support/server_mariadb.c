/* SPDX-License-Identifier: MIT */
/* server_mariadb.c - the "mariadb" server kind: Debian's MariaDB (10.11) in
 * the temp dir on a loopback port, with a config of its own (DIR/my.cnf,
 * read through --defaults-file: nothing of /etc/mysql is read).
 *
 * mariadbd runs as the `mysql` system user the package creates when the
 * tests run as root: the temp dir is given to that user, and
 * mariadb-install-db and the server run as it through setpriv, which execs
 * (so the pid server.c holds is the server's) and asks for SIGKILL when
 * the test dies (a change of user clears the PR_SET_PDEATHSIG server.c
 * set). Run as another user, both run as that user directly.
 *
 * Once the server answers, the database `dlock` and the user `dlock` with
 * password `dlock` (all rights on dlock.*) are made if missing, through the
 * root account on the private unix socket in the temp dir; the URL is
 * mysql://dlock:dlock@127.0.0.1:PORT/dlock. A restart keeps the data dir; a
 * wipe removes it and the next start installs it again. */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int as_root(void)
{
    return geteuid() == 0;
}

static void write_config(const dt_server *s)
{
    char path[256];
    snprintf(path, sizeof path, "%s/my.cnf", s->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        dt_fail(__FILE__, __LINE__, "cannot write %s", path);
    fprintf(f,
            "[mysqld]\n"
            "datadir=%s/data\n"
            "socket=%s/mysqld.sock\n"
            "pid-file=%s/mysqld.pid\n"
            /* its own: in the shared /tmp a bootstrap's temporary table
             * was found gone ("Could not remove temporary table
             * '/tmp/#sql-temptable-...'", error 2) while other servers
             * ran, and mariadb-install-db failed */
            "tmpdir=%s\n"
            "port=%d\n"
            "bind-address=127.0.0.1\n"
            "skip-name-resolve\n"
            "skip-log-bin\n"
            "performance-schema=OFF\n"
            "innodb-buffer-pool-size=32M\n"
            "innodb-log-file-size=16M\n"
            "innodb-use-native-aio=0\n"
            "innodb-flush-log-at-trx-commit=2\n"
            "max-connections=400\n"
            "max-connect-errors=100000\n",
            s->dir, s->dir, s->dir, s->dir, s->port);
    fclose(f);
    if (as_root()) {
        struct passwd *u = getpwnam("mysql");
        if (u == NULL)
            dt_fail(__FILE__, __LINE__,
                    "no user 'mysql' to run the server as (apt-get install mariadb-server)");
        if (chown(s->dir, u->pw_uid, u->pw_gid) != 0 || chown(path, u->pw_uid, u->pw_gid) != 0)
            dt_fail(__FILE__, __LINE__, "cannot give %s to user mysql", s->dir);
    }
}

/* mariadb-install-db into s->dir/data if it is not there yet. */
static void install_db(const dt_server *s)
{
    char data[256], defaults[300], log[300];
    struct stat st;
    snprintf(data, sizeof data, "%s/data", s->dir);
    if (stat(data, &st) == 0)
        return;
    snprintf(defaults, sizeof defaults, "--defaults-file=%s/my.cnf", s->dir);
    snprintf(log, sizeof log, "%s/install.log", s->dir);
    /* its output kept in DIR/install.log, to say why when it fails */
    const char *argv[] = {"setpriv",
                          "--reuid=mysql",
                          "--regid=mysql",
                          "--init-groups",
                          "--",
                          "sh",
                          "-c",
                          "log=$1; shift; exec mariadb-install-db \"$@\" >\"$log\" 2>&1",
                          "sh",
                          log,
                          defaults,
                          "--skip-test-db",
                          "--auth-root-authentication-method=socket",
                          NULL};
    const char *const *run = as_root() ? argv : argv + 5;
    if (dt__run_quiet(run, 120000) != 0)
        dt_fail(__FILE__, __LINE__, "mariadb-install-db into %s failed (see %s)", data, log);
}

static void my_argv(const dt_server *s, const char **argv, char bufs[][256])
{
    int argc = 0;
    write_config(s);
    install_db(s);
    snprintf(bufs[0], 256, "--defaults-file=%s/my.cnf", s->dir);
    if (as_root()) {
        argv[argc++] = "setpriv";
        argv[argc++] = "--reuid=mysql";
        argv[argc++] = "--regid=mysql";
        argv[argc++] = "--init-groups";
        argv[argc++] = "--pdeathsig=KILL";
        argv[argc++] = "--";
    }
    argv[argc++] = "/usr/sbin/mariadbd";
    argv[argc++] = bufs[0];
    for (int i = 0; i < s->nargs && argc < 62; i++)
        argv[argc++] = s->args[i];
    argv[argc] = NULL;
}

/* The root client on the private socket (root authenticates by its unix
 * user there: the tests run as root, or as the user that installed it). */
static int root_sql(const dt_server *s, const char *sql)
{
    char sock[256];
    snprintf(sock, sizeof sock, "--socket=%s/mysqld.sock", s->dir);
    const char *argv[] = {"mariadb", "--no-defaults", sock, "-uroot", "-e", sql, NULL};
    return dt__run_quiet(argv, 10000);
}

static int my_answers(const dt_server *s)
{
    int fd = dt__tcp_connect(s->port, 200);
    if (fd < 0)
        return 0;
    close(fd);
    char sql[600];
    snprintf(sql, sizeof sql,
             "CREATE DATABASE IF NOT EXISTS dlock; "
             "CREATE USER IF NOT EXISTS 'dlock'@'127.0.0.1' IDENTIFIED BY 'dlock'; "
             "CREATE USER IF NOT EXISTS 'dlock'@'localhost' IDENTIFIED BY 'dlock'; "
             "GRANT ALL ON dlock.* TO 'dlock'@'127.0.0.1'; "
             "GRANT ALL ON dlock.* TO 'dlock'@'localhost';");
    return root_sql(s, sql) == 0;
}

static void my_wipe(const dt_server *s)
{
    char path[200];
    snprintf(path, sizeof path, "%s/data", s->dir);
    dt__remove_tree(path);
}

static void my_cli_prefix(const dt_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "mariadb --no-defaults -h 127.0.0.1 -P %d -udlock -pdlock -D dlock -N -B ",
             s->port);
}

static const dt_server_op_entry my_ops[] = {
    {NULL, NULL, NULL, 0},
};

const dt_server_kind dt__mariadb_kind = {
    .name = "mariadb",
    .scheme = "mysql",
    .durable = 1,
    .start_timeout_ms = 60000,
    .argv = my_argv,
    .answers = my_answers,
    .wipe = my_wipe,
    .cli_prefix = my_cli_prefix,
    .ops = my_ops,
    .url_auth = "dlock:dlock@",
    .url_path = "/dlock",
};
