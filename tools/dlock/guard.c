/* SPDX-License-Identifier: MIT */
/* guard.c - `dlock run`'s guard: the process between dlock and COMMAND that
 * stops COMMAND's whole tree, not COMMAND alone.
 *
 * A signal sent to COMMAND reaches that one process: the shell of
 * `-c 'step1; step2'` dies of it and step1 runs on, without the lock (a
 * new user's trial: kill -9 of dlock left `sleep` running while another
 * holder took the lock). So dlock starts a guard, and the guard starts
 * COMMAND. The guard is a child subreaper (what COMMAND starts and leaves
 * behind is reparented to it, not to init, while the guard runs), in
 * dlock's process group (the terminal's signals reach COMMAND as before;
 * the guard blocks them). dlock writes to it on the control pipe: a
 * signal to pass on, sent to COMMAND and to every live process descended
 * from the guard (found by their parents in /proc); or a stop (a loss:
 * CLI_GUARD_STOP), SIGTERM to all of them and SIGKILL after the grace
 * period, the guard staying until none is left, even when COMMAND itself
 * died of the SIGTERM. The pipe's end of file (dlock died) is a stop too.
 * It exits with COMMAND's status (128 + N for a signal N, which dlock
 * reports as it did). Where /proc is not this PID namespace's (a sandbox
 * that kept its parent's), only COMMAND itself is signalled, as before
 * the guard. A guard killed with SIGKILL leaves COMMAND a SIGTERM (its
 * PDEATHSIG) and the rest of the tree running. */
#define _GNU_SOURCE
#include "cli.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PROCS 65536
#define TICK_MS   50 /* how often a stop looks whether the tree is gone */

/* One process of /proc: its pid, its parent's, and whether it is a zombie
 * (dead, its status not yet collected: nothing to stop). */
typedef struct proc {
    pid_t pid, ppid;
    char zombie, below;
} proc;

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const proc *) a)->pid, y = ((const proc *) b)->pid;
    return x < y ? -1 : x > y;
}

/* pid's parent and state from /proc/pid/stat; 0 when it is gone. */
static int read_stat(const char *pid, proc *out)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and ')' */
    const char *close_paren = strrchr(buf, ')');
    char state;
    int ppid;
    if (close_paren == NULL || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2)
        return 0;
    out->pid = (pid_t) atoi(pid);
    out->ppid = ppid;
    out->zombie = state == 'Z' || state == 'X';
    out->below = 0;
    return 1;
}

/* Sends sig to every live process descended from root (root excluded);
 * the number of them. One snapshot of /proc, sorted by pid, each process
 * marked once its parent is root or marked (a pass per level of the
 * tree). A pid may be reused between the snapshot and kill(): only within
 * root's tree, whose processes root (a subreaper) or their parents reap. */
static int signal_descendants(pid_t root, int sig)
{
    static proc ps[MAX_PROCS];
    size_t n = 0;
    if (root <= 1)
        return 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < MAX_PROCS) {
        if (isdigit((unsigned char) e->d_name[0]) && read_stat(e->d_name, &ps[n]))
            n++;
    }
    closedir(d);
    qsort(ps, n, sizeof *ps, by_pid);
    for (int more = 1; more;) {
        more = 0;
        for (size_t i = 0; i < n; i++) {
            if (ps[i].below || ps[i].pid == root)
                continue;
            proc key = {.pid = ps[i].ppid};
            const proc *parent =
                ps[i].ppid == root ? NULL : bsearch(&key, ps, n, sizeof *ps, by_pid);
            if (ps[i].ppid == root || (parent != NULL && parent->below)) {
                ps[i].below = 1;
                more = 1;
            }
        }
    }
    int live = 0;
    for (size_t i = 0; i < n; i++) {
        if (ps[i].below && !ps[i].zombie && ps[i].pid > 1) {
            kill(ps[i].pid, sig);
            live++;
        }
    }
    return live;
}

/* Whether this /proc is our PID namespace's (its "self" is our pid): its
 * numbers are the ones kill() takes. A sandbox that left its parent's
 * /proc mounted (unshare -p without --mount-proc) has another's. */
static int proc_is_ours(void)
{
    char self[32];
    ssize_t n = readlink("/proc/self", self, sizeof self - 1);
    if (n <= 0)
        return 0;
    self[n] = '\0';
    return atoi(self) == getpid();
}

/* The guard could not do its part: said on stderr (dlock's), and the guard
 * exits 126, which dlock passes on (before, silently). After the command
 * started, the command gets its SIGTERM (PDEATHSIG) as the guard goes. */
static void guard_fail(const char *what, int started)
{
    fprintf(stderr, "dlock: the guard of the command's tree failed (%s: %s)%s\n", what,
            strerror(errno),
            started ? "; the command is sent SIGTERM" : ": the command did not run");
    _exit(EXIT_CANNOT_EXEC);
}

void cli_guard_run(int control, int64_t grace_ms, pid_t (*start)(void *), void *arg)
{
    sigset_t all, chld;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL); /* (the command unblocks its own) */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        guard_fail("prctl PR_SET_CHILD_SUBREAPER", 0);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
    if (sfd < 0)
        guard_fail("signalfd", 0);
    pid_t command = start(arg);
    if (command < 0)
        guard_fail("fork", 0);
    pid_t self = getpid();
    /* without our /proc, only the command itself can be signalled */
    int tree = proc_is_ours();
    int code = -1;        /* the command's status, once collected */
    int64_t kill_at = -1; /* a stop: SIGKILL due then */
    int stopping = 0, killed = 0;
    for (;;) {
        int status;
        pid_t done;
        while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
            if (done == command)
                code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        /* the command ended: done, unless a stop is under way, which ends
         * when nothing of the tree is left (or after its SIGKILL) */
        if (code >= 0 && (!stopping || !tree || signal_descendants(self, 0) == 0))
            _exit(code);
        if (stopping && killed && code >= 0)
            _exit(code); /* (what SIGKILL leaves is no process of ours) */
        struct pollfd p[2] = {{.fd = control, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        int timeout = stopping ? TICK_MS : -1;
        if (kill_at >= 0) {
            int64_t left = kill_at - cli_now_us() / 1000;
            if (left < timeout || timeout < 0)
                timeout = left <= 0 ? 0 : left < 3600000 ? (int) left : 3600000;
        }
        if (poll(p, 2, timeout) < 0 && errno != EINTR) /* (a closed control: fd -1, ignored) */
            guard_fail("poll", 1);
        int sig = 0;
        if (control >= 0 && (p[0].revents & (POLLIN | POLLHUP))) {
            unsigned char b;
            ssize_t n = read(control, &b, 1);
            if (n == 1) {
                sig = b;
            } else if (n == 0) {
                close(control); /* dlock died: the command holds no lock any more */
                control = -1;
                sig = CLI_GUARD_STOP;
            }
        }
        if (sig == CLI_GUARD_STOP && !stopping) {
            stopping = 1;
            kill_at = cli_now_us() / 1000 + grace_ms;
            sig = SIGTERM;
        }
        if (kill_at >= 0 && cli_now_us() / 1000 >= kill_at) {
            sig = SIGKILL;
            kill_at = -1;
        }
        if (sig == SIGKILL)
            killed = stopping = 1;
        if (sig > 0 && sig != CLI_GUARD_STOP) {
            if (code < 0)
                kill(command, sig); /* (ours to reap: never another's pid) */
            /* SIGKILL again while any is found: one may have forked */
            for (int round = 0;
                 tree && round < (sig == SIGKILL ? 10 : 1) && signal_descendants(self, sig) > 0;
                 round++)
                ;
        }
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) < 0 && errno != EAGAIN && errno != EINTR)
                guard_fail("reading its signals", 1);
        }
    }
}
