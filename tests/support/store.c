/* SPDX-License-Identifier: MIT */
/* store.c - `store KIND`: one throwaway server of a store to try dlock
 * against, started as the tests start theirs (server.h): on a free loopback
 * port, in a temp dir. Prints the store's dlock URL on a line of its own,
 * then runs until SIGINT (Ctrl-C), SIGTERM or SIGHUP, stops the server
 * cleanly and removes its temp dir. scripts/store.sh installs the server,
 * builds this and runs it.
 *
 * Exits 0 after a stop it was asked for, 1 when the server did not start or
 * exited on its own (its temp dir, with server.log, is kept), 64 on a bad
 * command line. */
#define _GNU_SOURCE
#include "harness.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

/* "127.0.0.1:P1, 127.0.0.1:P2..." for processes `first`..`first + n - 1`
 * of a group, at the end of buf. */
static void ports(char *buf, size_t len, dt_server *s, dt_server *(*member)(dt_server *, int),
                  int first, int n)
{
    for (int i = first; i < first + n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s127.0.0.1:%d", i > first ? ", " : "",
                 member(s, i)->port);
    }
}

/* What runs where: each process of a group with its role and port (a
 * Sentinel group: its master, replica and sentinels; Redlock: its nodes;
 * a Cluster: its masters and replicas), else the one server's port. */
static void describe(dt_server *s, const char *kind, char *buf, size_t len)
{
    buf[0] = '\0';
    if (strncmp(kind, "sentinel", 8) == 0) {
        snprintf(buf, len, "%s: master on 127.0.0.1:%d, replica on 127.0.0.1:%d, sentinels on ",
                 kind, dt_sentinel_node(s, 0)->port, dt_sentinel_node(s, 1)->port);
        ports(buf, len, s, dt_sentinel_sentinel, 0, 3);
        snprintf(buf + strlen(buf), len - strlen(buf), " (the master's");
    } else if (strncmp(kind, "redlock", 7) == 0) {
        snprintf(buf, len, "%s: 3 independent masters on ", kind);
        ports(buf, len, s, dt_redlock_node, 0, 3);
        snprintf(buf + strlen(buf), len - strlen(buf), " (the first one's");
    } else if (strncmp(kind, "cluster", 7) == 0) {
        snprintf(buf, len, "%s: masters on ", kind);
        ports(buf, len, s, dt_cluster_node, 0, 3);
        snprintf(buf + strlen(buf), len - strlen(buf), ", their replicas on ");
        ports(buf, len, s, dt_cluster_node, 3, 3);
        snprintf(buf + strlen(buf), len - strlen(buf), " (the first master's");
    } else {
        snprintf(buf, len, "%s on 127.0.0.1:%d (", kind, s->port);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: store ");
    for (const char *const *k = dt_server_kinds(); *k != NULL; k++)
        fprintf(stderr, "%s%s", k == dt_server_kinds() ? "" : "|", *k);
    fprintf(stderr, "\n");
    return 64;
}

int main(int argc, char **argv)
{
    sigset_t signals;
    dt_server s;
    int known = 0;

    if (argc != 2)
        return usage();
    for (const char *const *k = dt_server_kinds(); *k != NULL; k++)
        known |= strcmp(*k, argv[1]) == 0;
    if (!known)
        return usage();
    /* Blocked before the server is forked, so that a Ctrl-C during its
     * start waits for sigwaitinfo() below and the server is stopped, not
     * left behind by a process killed half way; SIGCHLD tells that the
     * server exited. */
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGCHLD);
    sigprocmask(SIG_BLOCK, &signals, NULL);

    dt_server_start(&s, argv[1], 0, NULL);
    /* where it lives first, then the URL: whoever reads the URL may look at
     * the other line at once (tests/docs/test_store.sh does) */
    char where[1024];
    describe(&s, argv[1], where, sizeof where);
    if (strcmp(argv[1], "sqlite") == 0) /* a file, no server: no host, port or log */
        fprintf(stderr, "sqlite: no server; the database is the file %s; Ctrl-C removes it\n",
                s.url + strlen("sqlite://"));
    else
        fprintf(stderr, "%s%sdata and server.log in %s); Ctrl-C stops it\n", where,
                where[strlen(where) - 1] == '(' ? "" : " ", s.dir);
    printf("%s\n", s.url);
    fflush(stdout);

    for (;;) {
        int status, sig = sigwaitinfo(&signals, NULL);
        if (sig == SIGCHLD) {
            /* (the harness's own helpers, such as etcdctl, exit too) */
            if (waitpid(s.pid, &status, WNOHANG) != s.pid)
                continue;
            dt_untrack_pid(s.pid);
            s.pid = 0;
            dt_fail(__FILE__, __LINE__, "%s exited on its own (log %s/server.log)", argv[1], s.dir);
        }
        if (sig > 0)
            break;
    }
    dt_server_stop(&s);
    fprintf(stderr, "%s stopped\n", argv[1]);
    return 0; /* atexit: its temp dir goes */
}
