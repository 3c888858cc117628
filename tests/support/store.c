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
    fprintf(stderr, "%s on 127.0.0.1:%d (data and server.log in %s); Ctrl-C stops it\n", argv[1],
            s.port, s.dir);
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
