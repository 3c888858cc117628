/* SPDX-License-Identifier: MIT */
/* guard.c - `dlock run`'s guard: the process between dlock and COMMAND that
 * stops COMMAND's whole tree, not COMMAND alone.
 *
 * A signal sent to COMMAND reaches that one process: the shell of
 * `-c 'step1; step2'` dies of it and step1 runs on, without the lock (a
 * new user's trial: kill -9 of dlock left `sleep` running while another
 * holder took the lock). So dlock starts a guard, and the guard starts
 * COMMAND. The guard is a child subreaper (what COMMAND starts and leaves
 * behind is reparented to it, not to init), and on dlock's word (a signal
 * number on the control pipe: a loss's SIGTERM, then SIGKILL after the
 * grace period; a signal passed on) it signals every process descended
 * from it, found by their parents in /proc. When dlock dies (the pipe's
 * end of file) it does what a loss does: SIGTERM to the tree, SIGKILL
 * after the grace period. It stays in dlock's process group, so the
 * terminal's signals reach COMMAND as before (the guard blocks them), and
 * it exits with COMMAND's status (128 + N for a signal N, which dlock
 * reports as it did). */
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
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 32768

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The parent of process pid (from /proc/pid/stat), or -1. */
static pid_t parent_of(const char *pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC); /* (no stdio in a child of a threaded dlock) */
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and ')' */
    const char *close = strrchr(buf, ')');
    int ppid;
    if (close == NULL || sscanf(close + 1, " %*c %d", &ppid) != 1)
        return -1;
    return ppid;
}

/* Sends sig to every process descended from root (root excluded); the
 * number it found. */
static int signal_descendants(pid_t root, int sig)
{
    static pid_t pids[MAX_PROCS], ppids[MAX_PROCS];
    size_t n = 0;
    if (root <= 1)
        return 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < MAX_PROCS) {
        if (!isdigit((unsigned char) e->d_name[0]))
            continue;
        pid_t ppid = parent_of(e->d_name);
        if (ppid < 0)
            continue;
        pids[n] = (pid_t) atoi(e->d_name);
        ppids[n++] = ppid;
    }
    closedir(d);
    /* marked[i]: pids[i] is root's (its parent root, or a marked one) */
    static char marked[MAX_PROCS];
    memset(marked, 0, n);
    int found = 0, more = 1;
    while (more) {
        more = 0;
        for (size_t i = 0; i < n; i++) {
            if (marked[i] || pids[i] == root)
                continue;
            int below = ppids[i] == root;
            for (size_t j = 0; j < n && !below; j++)
                below = marked[j] && pids[j] == ppids[i];
            if (below) {
                marked[i] = 1;
                found++;
                more = 1;
            }
        }
    }
    /* signalled once all are known: none is reparented to root before */
    for (size_t i = 0; i < n; i++) {
        if (marked[i] && pids[i] > 1)
            kill(pids[i], sig);
    }
    return found;
}

void cli_guard_run(int control, int64_t grace_ms, pid_t (*start)(void *), void *arg)
{
    sigset_t all, chld;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL); /* (the command unblocks its own) */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        _exit(EXIT_CANNOT_EXEC);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
    pid_t command = start(arg);
    if (command < 0 || sfd < 0) {
        if (command > 0)
            kill(command, SIGKILL);
        _exit(EXIT_CANNOT_EXEC);
    }
    pid_t self = getpid();
    int64_t kill_at = -1;
    for (;;) {
        int status;
        pid_t done;
        while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
            if (done == command)
                _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
        struct pollfd p[2] = {{.fd = control, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        int timeout = -1;
        if (kill_at >= 0) {
            int64_t left = kill_at - mono_ms();
            timeout = left <= 0 ? 0 : left < 3600000 ? (int) left : 3600000;
        }
        if (poll(p, 2, timeout) < 0 && errno != EINTR) /* (a closed control: fd -1, ignored) */
            _exit(EXIT_CANNOT_EXEC);
        if (kill_at >= 0 && mono_ms() >= kill_at) {
            /* again while any is found: one may have forked meanwhile */
            for (int round = 0; round < 10 && signal_descendants(self, SIGKILL) > 0; round++)
                ;
            kill_at = -1;
        }
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) < 0 && errno != EAGAIN && errno != EINTR)
                _exit(EXIT_CANNOT_EXEC);
        }
        if (control >= 0 && (p[0].revents & (POLLIN | POLLHUP))) {
            unsigned char sig;
            ssize_t n = read(control, &sig, 1);
            if (n == 1 && sig == SIGKILL) {
                for (int round = 0; round < 10 && signal_descendants(self, SIGKILL) > 0; round++)
                    ;
            } else if (n == 1) {
                signal_descendants(self, sig);
            } else if (n == 0) {
                /* dlock died: the command holds no lock any more */
                close(control);
                control = -1;
                signal_descendants(self, SIGTERM);
                kill_at = mono_ms() + grace_ms;
            }
        }
    }
}
