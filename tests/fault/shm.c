/* SPDX-License-Identifier: MIT */
/* shm.c - the run's shared file: creating and attaching it, and appending
 * to the history.
 *
 * Appending is lock-free: a writer takes the next slot with one atomic
 * add, fills it, and sets `ready` last (release order). A writer killed
 * between the two leaves a slot that is never ready; readers skip it. The
 * history's order is each record's time, not its slot. Nothing here takes
 * a lock, so a record may be written from a signal handler. */
#define _GNU_SOURCE
#include "fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FS_MAGIC 0x646c6f636b666c74ull /* "dlockflt" */

int64_t fs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t size_for(uint64_t cap)
{
    return sizeof(fshm) + (size_t) cap * sizeof(fev);
}

fshm *fs_create(const char *path, uint64_t cap)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return NULL;
    }
    /* sparse: only the pages written take room */
    if (ftruncate(fd, (off_t) size_for(cap)) != 0) {
        fprintf(stderr, "%s: ftruncate: %s\n", path, strerror(errno));
        close(fd);
        return NULL;
    }
    fshm *s = mmap(NULL, size_for(cap), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED)
        return NULL;
    s->magic = FS_MAGIC;
    s->cap = cap;
    s->t0 = fs_now();
    atomic_store(&s->next_op, 1);
    return s;
}

fshm *fs_attach(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    fshm *s = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED || s->magic != FS_MAGIC)
        return NULL;
    return s;
}

fev *fs_log(fshm *s, int type, int lock, int actor)
{
    static fev sink; /* a full history writes here; the run is failed for it */
    uint64_t i = atomic_fetch_add(&s->next, 1);
    fev *e = i < s->cap ? &s->ev[i] : &sink;
    if (i >= s->cap)
        atomic_store(&s->overflow, 1);
    memset((char *) e + sizeof e->ready, 0, sizeof *e - sizeof e->ready);
    e->type = (uint16_t) type;
    e->lock = (uint16_t) (lock < 0 ? 0xffff : lock);
    e->actor = actor;
    e->pid = (int32_t) getpid();
    e->t = fs_now();
    return e;
}

void fs_commit(fev *e)
{
    atomic_store_explicit(&e->ready, 1, memory_order_release);
}

uint64_t fs_new_op(fshm *s)
{
    return atomic_fetch_add(&s->next_op, 1);
}

const char *fs_hkind_name(int hkind)
{
    static const char *const names[H_COUNT] = {"plain", "fair",  "read",  "write",
                                               "sem",   "multi", "simple"};
    return hkind >= 0 && hkind < H_COUNT ? names[hkind] : "?";
}

int fs_hkind_lock_kind(int hkind)
{
    switch (hkind) {
    case H_READ:
    case H_WRITE:
        return LK_RW;
    case H_SEM:
        return LK_SEM;
    case H_SIMPLE:
        return LK_SIMPLE;
    default:
        return LK_MUTEX;
    }
}

const char *fs_type_name(int type)
{
    static const char *const names[] = {
        "?",          "actor",    "acquire",   "acquired",   "acq-fail", "release",
        "released",   "rel-fail", "LOST",      "check-lost", "TERM",     "cancel",
        "cancel-ret", "access",   "spawn",     "run-exit",   "nemesis",  "snap",
        "phase",      "exit",     "violation", "queued",
    };
    return type > 0 && type < (int) (sizeof names / sizeof names[0]) ? names[type] : "?";
}

void fs_format_event(const fshm *s, const fev *e, char *buf, size_t len)
{
    double t = (double) (e->t - s->t0) / 1e9;
    const char *lock = e->lock < s->nlocks ? s->locks[e->lock].name : "-";
    static const char *const acc[] = {"read", "write", "read-shared"};

    switch (e->type) {
    case EV_ACQ_INV: {
        char lease[32];
        if (e->lease_ms > 0)
            snprintf(lease, sizeof lease, "lease %lld ms", (long long) e->lease_ms);
        else
            snprintf(lease, sizeof lease, "renewed");
        snprintf(buf, len, "%9.3f a%-4d pid %-7d acquire   %-6s %-6s op %llu wait %lld %s%s", t,
                 e->actor, e->pid, lock, fs_hkind_name(e->kind), (unsigned long long) e->op,
                 (long long) e->wait_ms, lease, (e->flags & EVF_REENTRANT) ? " (reentrant)" : "");
        break;
    }
    case EV_ACQ_OK:
        if (e->fence2)
            snprintf(buf, len, "%9.3f a%-4d pid %-7d acquired  %-6s op %llu fences %llu %llu", t,
                     e->actor, e->pid, lock, (unsigned long long) e->op,
                     (unsigned long long) e->fence, (unsigned long long) e->fence2);
        else
            snprintf(buf, len, "%9.3f a%-4d pid %-7d acquired  %-6s op %llu fence %llu", t,
                     e->actor, e->pid, lock, (unsigned long long) e->op,
                     (unsigned long long) e->fence);
        break;
    case EV_ACQ_FAIL:
    case EV_REL_FAIL:
        snprintf(buf, len, "%9.3f a%-4d pid %-7d %-9s %-6s op %llu rc %d %s: %s", t, e->actor,
                 e->pid, fs_type_name(e->type), lock, (unsigned long long) e->op, e->rc,
                 dlock_strerror(e->rc), e->text);
        break;
    case EV_ACCESS:
        snprintf(
            buf, len, "%9.3f a%-4d pid %-7d access    %-6s op %llu fence %llu %s %s value %lld%s",
            t, e->actor, e->pid, lock, (unsigned long long) e->op, (unsigned long long) e->fence,
            e->kind >= 0 && e->kind <= 2 ? acc[e->kind] : "?", e->rc ? "ACCEPTED" : "refused",
            (long long) e->wait_ms, (e->flags & EVF_CLOBBER) ? " CLOBBERED another's write" : "");
        break;
    case EV_NEM:
        snprintf(buf, len, "%9.3f ----- nemesis %s %s%s", t,
                 (e->flags & EVF_END) ? "end  " : "start", e->text,
                 (e->flags & EVF_FAILED) ? " (FAILED)" : "");
        break;
    case EV_SNAP:
        snprintf(buf, len,
                 "%9.3f ----- server    %-6s held %d owner %s shared %d permits %lld fence %llu", t,
                 lock, e->rc, e->text[0] ? e->text : "-", e->take, (long long) e->lease_ms,
                 (unsigned long long) e->fence);
        break;
    case EV_RUN_EXIT:
        snprintf(buf, len, "%9.3f a%-4d pid %-7d run-exit  %-6s op %llu status %d", t, e->actor,
                 e->pid, lock, (unsigned long long) e->op, e->rc);
        break;
    case EV_SPAWN:
        snprintf(buf, len, "%9.3f a%-4d pid %-7d dlock-run %-6s op %llu (dlock pid %d)", t,
                 e->actor, e->pid, lock, (unsigned long long) e->op, e->rc);
        break;
    case EV_ACTOR:
        snprintf(buf, len, "%9.3f a%-4d pid %-7d actor     %-6s %s link %d", t, e->actor, e->pid,
                 lock, fs_hkind_name(e->kind), e->take);
        break;
    case EV_PHASE:
        snprintf(buf, len, "%9.3f ----- phase %s", t,
                 e->kind == PH_FAULTS  ? "faults"
                 : e->kind == PH_FINAL ? "final (all healed)"
                 : e->kind == PH_STOP  ? "stop"
                                       : "warm-up");
        break;
    case EV_EXIT:
        snprintf(buf, len, "%9.3f ----- process %d ended (status 0x%x)", t, e->pid, e->rc);
        break;
    default:
        snprintf(buf, len, "%9.3f a%-4d pid %-7d %-9s %-6s op %llu %s", t, e->actor, e->pid,
                 fs_type_name(e->type), lock, (unsigned long long) e->op, e->text);
        break;
    }
}
