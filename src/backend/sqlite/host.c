/* SPDX-License-Identifier: MIT */
/* host.c - the host as the SQLite store sees it: one clock every process
 * shares, the boot it belongs to, and who a process is.
 *
 * A hold's expiry is a time on CLOCK_BOOTTIME, which every process of the
 * host reads alike and which never goes back while the host runs (it goes
 * on through a suspend); the boot id says which run of the host the time
 * belongs to, so a row written before a reboot is expired whatever its
 * time says.
 *
 * A process is told apart from a later one that got the same pid by its
 * start time (/proc/PID/stat field 22), and from one in another pid
 * namespace by that namespace's inode. A holder is judged gone only when
 * the kernel says so: no such pid (kill(pid, 0) is ESRCH, which hidepid=
 * does not hide), or the pid's start time differs, or the process is a
 * zombie (killed, not reaped yet). Anything unsure is "alive": its hold
 * then lasts its lease, as on any store. */
#define _GNU_SOURCE
#include "internal.h"

#include "../../base/error.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t dlock__sq_boot_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads a small file into buf (NUL-terminated, trailing newline cut);
 * returns its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    if (fd < 0)
        return -1;
    do
        n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    return n;
}

int dlock__sq_boot_id(char *buf, size_t len)
{
    if (read_small("/proc/sys/kernel/random/boot_id", buf, len) <= 0)
        return dlock__fail(DLOCK_ENOTSUP,
                           "sqlite: cannot read /proc/sys/kernel/random/boot_id (%s): the SQLite "
                           "store needs Linux's boot id to tell holds of an earlier boot",
                           strerror(errno));
    return DLOCK_OK;
}

/* The state letter and start time of pid from /proc/PID/stat; -1 if it
 * cannot be read. The command name (field 2) may hold spaces and
 * parentheses: the fields after it start after its last ')'. */
static int proc_stat(int64_t pid, char *state, int64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long) pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    const char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ')
        return -1;
    p += 2;
    *state = *p;
    /* p is at field 3; field 22 is 19 fields on */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (p == NULL)
            return -1;
        p++;
    }
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno != 0 || end == p)
        return -1;
    *start = v;
    return 0;
}

static void pid_ns(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/ns/pid", buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
}

void dlock__sq_self(dlock__sq_proc *out)
{
    char state;
    memset(out, 0, sizeof *out);
    out->pid = (int64_t) getpid();
    if (proc_stat(out->pid, &state, &out->start) != 0)
        out->start = -1;
    pid_ns(out->pidns, sizeof out->pidns);
}

int dlock__sq_proc_gone(const dlock__sq_proc *p)
{
    char ns[sizeof p->pidns], state;
    int64_t start;

    if (p->pid <= 0 || p->start < 0 || p->pidns[0] == '\0')
        return 0; /* bound to no process (detached), or not known */
    pid_ns(ns, sizeof ns);
    if (strcmp(ns, p->pidns) != 0)
        return 0; /* a pid of another namespace means nothing here */
    if (kill((pid_t) p->pid, 0) != 0 && errno == ESRCH)
        return 1;
    if (proc_stat(p->pid, &state, &start) != 0)
        return 0; /* there, but hidden from us: alive for all we know */
    return start != p->start || state == 'Z' || state == 'X';
}
