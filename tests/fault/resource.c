/* SPDX-License-Identifier: MIT */
/* resource.c - the protected resource: a counter in the run's shared
 * memory that refuses stale fences, as Kleppmann's storage service does.
 *
 * It is linearizable by itself: every access takes a process-shared robust
 * mutex and is logged (with its time) while the mutex is held, so the
 * history's order of accesses is the resource's own order. A process killed
 * inside an access leaves the mutex to the next one (EOWNERDEAD); no access
 * leaves the state half-changed, since each decision and update is a few
 * plain assignments made after the decision.
 *
 * What "stale" means follows the lock's kind:
 *   mutex, simple: a fence below the highest seen;
 *   read-write:    a writer below the highest of any access, a reader below
 *                  the highest writer's (readers do not exclude readers);
 *   semaphore:     an access is stale when the holders with newer fences
 *                  that have not left fill the permits without it (a fence
 *                  alone cannot say whether a newer holder is still there,
 *                  so holders say when they leave: res_leave()).
 * An accepted write also says whether it clobbered another's write since
 * the writer's own read (a lost update): with fences handed out right and
 * refused when stale, that cannot happen under exclusive kinds. */
#define _GNU_SOURCE
#include "fault.h"

#include <errno.h>
#include <string.h>

void res_init(fres *r, int kind, int capacity)
{
    pthread_mutexattr_t a;
    memset(r, 0, sizeof *r);
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&r->mu, &a);
    pthread_mutexattr_destroy(&a);
    r->kind = kind;
    r->capacity = capacity;
}

static void lock_res(fres *r)
{
    if (pthread_mutex_lock(&r->mu) == EOWNERDEAD)
        pthread_mutex_consistent(&r->mu);
}

/* Semaphore: permits held by others with newer fences than `fence`. */
static int newer_permits(const fres *r, uint64_t fence, int actor)
{
    int n = 0;
    for (int i = 0; i < r->ntop; i++) {
        if (r->top[i].fence > fence && r->top[i].actor != actor)
            n += r->top[i].permits;
    }
    return n;
}

static void note_holder(fres *r, uint64_t fence, int actor, int permits)
{
    int slot = -1, lowest = 0;
    for (int i = 0; i < r->ntop; i++) {
        if (r->top[i].fence == fence && r->top[i].actor == actor)
            return;
        if (r->top[i].fence < r->top[lowest].fence)
            lowest = i;
    }
    if (r->ntop < RES_TOP)
        slot = r->ntop++;
    else if (r->top[lowest].fence < fence)
        slot = lowest;
    if (slot >= 0) {
        r->top[slot].fence = fence;
        r->top[slot].actor = actor;
        r->top[slot].permits = permits;
    }
}

static int admit(fres *r, uint64_t fence, int mode, int actor, int permits)
{
    switch (r->kind) {
    case LK_SEM:
        if (permits + newer_permits(r, fence, actor) > r->capacity)
            return 0;
        note_holder(r, fence, actor, permits);
        return 1;
    case LK_RW:
        if (mode == ACC_READ_SHARED) {
            if (fence < r->max_excl)
                return 0;
            if (fence > r->max_shared)
                r->max_shared = fence;
            return 1;
        }
        if (fence < r->max_excl || fence < r->max_shared)
            return 0;
        r->max_excl = fence;
        return 1;
    default:
        if (fence < r->max_excl)
            return 0;
        r->max_excl = fence;
        return 1;
    }
}

void res_leave(fshm *s, int lock, int actor, uint64_t fence)
{
    fres *r = &s->res[lock];
    lock_res(r);
    for (int i = 0; i < r->ntop; i++) {
        if (r->top[i].fence == fence && r->top[i].actor == actor) {
            r->top[i] = r->top[--r->ntop];
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
}

int res_access(fshm *s, int lock, int actor, uint64_t op, uint64_t fence, int mode, int permits,
               int64_t *value, uint64_t *version)
{
    fres *r = &s->res[lock];
    lock_res(r);
    int ok = admit(r, fence, mode, actor, permits);
    int clobber = 0;
    if (ok && mode == ACC_WRITE) {
        clobber = r->version != *version;
        r->value = *value;
        r->version++;
    } else if (ok) {
        *value = r->value;
        *version = r->version;
    }
    fev *e = fs_log(s, EV_ACCESS, lock, actor);
    e->op = op;
    e->fence = fence;
    e->kind = mode;
    e->rc = ok;
    e->take = permits;
    e->wait_ms = ok ? *value : 0;
    /* A semaphore's holders write together by design: only exclusive
     * kinds can lose an update. */
    if (clobber && r->kind != LK_SEM)
        e->flags |= EVF_CLOBBER;
    fs_commit(e);
    pthread_mutex_unlock(&r->mu);
    return ok;
}
