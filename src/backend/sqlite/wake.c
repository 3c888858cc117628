/* SPDX-License-Identifier: MIT */
/* wake.c - waking the waiters of a name on this host, without polling.
 *
 * SQLite tells nobody that a row changed. Every process of the host that
 * opens the database also maps a small file beside it (PATH-dlockwake):
 * WAKE_WORDS counters, one per hash of a name. A process that frees a
 * name, or leaves its line, adds one to the name's counter after its
 * commit and wakes whoever sleeps on that word (a futex on a shared
 * mapping: it works between processes). A waiter reads the counter before
 * it looks at the name, and sleeps on it only while the counter has not
 * moved, so a release between its look and its sleep is never missed.
 * Names that share a word only wake each other for nothing: they look
 * again and sleep again. Word 0 is the database's write lock: a
 * transaction that held it wakes, as it ends, whoever waits for it in
 * SQLite's busy handler (db.c), which would otherwise sleep blind.
 *
 * The file holds no lock state: deleting it, or a process that cannot map
 * it (a read-only directory), costs only speed. Such a process polls as
 * before, and one that maps it read-only sleeps but wakes nobody (others
 * find its releases at their next look, see lock.c's WAKE_LOOK_MS). */
#include "internal.h"

#include "../../base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WAKE_WORDS 1024
#define WAKE_BYTES (WAKE_WORDS * sizeof(uint32_t))

void dlock__sq_wake_open(dlock__sq_store *s)
{
    char path[sizeof s->path + 16];
    snprintf(path, sizeof path, "%s-dlockwake", s->path);
    int writable = 1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
        writable = 0;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        ((size_t) st.st_size >= WAKE_BYTES || (writable && ftruncate(fd, WAKE_BYTES) == 0))) {
        void *p = mmap(NULL, WAKE_BYTES, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                       fd, 0);
        if (p != MAP_FAILED) {
            s->wake = p;
            s->wake_writable = writable;
        }
    }
    int err = errno;
    if (fd >= 0)
        close(fd);
    /* said at the first wait (dlock__sq_wake_explain): a log set after the
     * open (dlock -v) would miss it now */
    if (s->wake == NULL)
        snprintf(s->wake_why, sizeof s->wake_why,
                 "waiters poll: %s cannot be mapped (%s); releases wake no one", path,
                 fd >= 0 ? "not a regular file of 4 KiB or more that this user may extend"
                         : strerror(err));
    else if (!writable)
        snprintf(s->wake_why, sizeof s->wake_why,
                 "%s is read-only for this user: this process's releases wake no one (the other "
                 "processes find them at their next look, within 32 ms)",
                 path);
}

void dlock__sq_wake_explain(dlock__sq_store *s)
{
    if (s->wake_why[0] != '\0' && !atomic_exchange(&s->wake_said, 1))
        DLOCK__LOG(s->base.host.log, DLOCK_LOG_INFO, "%s: %s", s->label, s->wake_why);
}

void dlock__sq_wake_close(dlock__sq_store *s)
{
    if (s->wake != NULL)
        munmap((void *) s->wake, WAKE_BYTES);
    s->wake = NULL;
}

static _Atomic uint32_t *word(dlock__sq_store *s, const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *) name; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    return &s->wake[1 + h % (WAKE_WORDS - 1)]; /* word 0: the write lock's */
}

uint32_t dlock__sq_wake_seq(dlock__sq_store *s, const char *name)
{
    return s->wake != NULL ? atomic_load(word(s, name)) : 0;
}

int dlock__sq_wake_wait(dlock__sq_store *s, const char *name, uint32_t seq, int64_t until_us)
{
    if (s->wake == NULL)
        return 0;
    _Atomic uint32_t *w = word(s, name);
    int64_t left = until_us - dlock__now_us();
    if (left <= 0 || atomic_load(w) != seq)
        return atomic_load(w) != seq;
    struct timespec ts = {.tv_sec = left / 1000000, .tv_nsec = (left % 1000000) * 1000};
    /* a shared futex (no FUTEX_PRIVATE_FLAG): the word is in a file that
     * other processes map */
    if (syscall(SYS_futex, (uint32_t *) w, FUTEX_WAIT, seq, &ts, NULL, 0) != 0 && errno != EAGAIN &&
        errno != ETIMEDOUT && errno != EINTR)
        nanosleep(&ts, NULL); /* a kernel that refuses the wait: sleep, never spin */
    return atomic_load(w) != seq;
}

static void wake_word(dlock__sq_store *s, _Atomic uint32_t *w)
{
    if (s->wake == NULL || !s->wake_writable)
        return;
    atomic_fetch_add(w, 1);
    syscall(SYS_futex, (uint32_t *) w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void dlock__sq_wake(dlock__sq_store *s, const char *name)
{
    if (s->wake != NULL)
        wake_word(s, word(s, name));
}

void dlock__sq_wake_writers(dlock__sq_store *s)
{
    if (s->wake != NULL)
        wake_word(s, &s->wake[0]);
}

void dlock__sq_wait_writer(dlock__sq_store *s, int64_t us)
{
    if (s->wake == NULL) {
        struct timespec ts = {(time_t) (us / 1000000), (long) (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
        return;
    }
    /* a release before this read is missed: the sleep is then as long
     * as without the counters, never longer */
    uint32_t seq = atomic_load(&s->wake[0]);
    struct timespec ts = {(time_t) (us / 1000000), (long) (us % 1000000) * 1000};
    if (syscall(SYS_futex, (uint32_t *) &s->wake[0], FUTEX_WAIT, seq, &ts, NULL, 0) != 0 &&
        errno != EAGAIN && errno != ETIMEDOUT && errno != EINTR)
        nanosleep(&ts, NULL); /* a kernel that refuses the wait: sleep, never spin */
}
