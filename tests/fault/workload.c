/* SPDX-License-Identifier: MIT */
/* workload.c - the clients of a fault run: library workers, `dlock run`
 * loops, the command `dlock run` runs, and the monitor.
 *
 * Every actor (one thread with one handle, or one `dlock run` loop) takes
 * its lock over and over: a try, a wait with a budget, or a wait without
 * one that another thread may cancel; a renewed lease or a fixed one
 * (sometimes shorter than the hold, so the lease runs out under it). While
 * it believes it holds the lock it does fenced read-modify-writes on the
 * lock's resource, and checks dlock_lock_check() before each. Everything
 * it does is logged before and after (invoke / ok / fail), and so is every
 * on_lost callback, with the op of the hold it ends, and the moment the
 * store says a wait is queued (the library's debug log), which orders fair
 * waiters.
 *
 * Actors never decide whether something went wrong: the checker does,
 * over the history. An actor only logs and goes on. */
#define _GNU_SOURCE
#include "fault.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 16

/* ---------------------------------------------------------------- randomness */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t next_rand(uint64_t *state)
{
    *state = mix(*state);
    return *state;
}

/* uniform in [lo, hi] */
static int64_t between(uint64_t *state, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t) (next_rand(state) % (uint64_t) (hi - lo + 1));
}

static int chance(uint64_t *state, int percent)
{
    return (int) (next_rand(state) % 100) < percent;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t) (ms / 1000), (long) (ms % 1000) * 1000000};
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int phase(fshm *s)
{
    return atomic_load(&s->phase);
}

/* ---------------------------------------------------------------- choices */

/* How long a budgeted wait may be, how long to hold: in units of the lease,
 * so short and long leases stress the same way. */
typedef struct plan {
    int64_t wait_ms;  /* 0: try, > 0: budget, DLOCK_WAIT_FOREVER */
    int64_t lease_ms; /* 0: renewed, else fixed */
    int64_t hold_ms;
} plan;

static int64_t final_wait_ms(const fault_cfg *cfg)
{
    /* After the last heal a waiter must get the lock within a lease (a
     * killed holder's) plus a bound; several actors queue for each lock. */
    return 4LL * cfg->lease_ms + cfg->waiter_lease_ms + 2LL * cfg->timeout_ms + 4000;
}

int64_t wl_max_lease_ms(const fault_cfg *cfg)
{
    return cfg->lease_ms + cfg->lease_ms / 2;
}

static plan choose(uint64_t *rng, const fault_cfg *cfg, int final)
{
    plan p;
    int64_t lease = cfg->lease_ms;
    if (final) {
        p.wait_ms = final_wait_ms(cfg);
        p.lease_ms = 0;
        p.hold_ms = between(rng, 0, 60);
        return p;
    }
    int w = (int) (next_rand(rng) % 100);
    p.wait_ms = w < 20 ? 0 : w < 85 ? between(rng, 50, 2 * lease) : DLOCK_WAIT_FOREVER;
    p.lease_ms = chance(rng, 30) ? between(rng, lease / 4 + 100, wl_max_lease_ms(cfg)) : 0;
    if (!(cfg->caps & DLOCK_CAP_FIXED_LEASE))
        p.lease_ms = 0; /* (drawn all the same: a seed means one schedule) */
    if (p.lease_ms > 0)
        /* mostly within the lease, sometimes past it: the lease runs out
         * under a holder, which must be told */
        p.hold_ms = chance(rng, 15) ? between(rng, p.lease_ms, p.lease_ms + lease)
                                    : between(rng, 0, p.lease_ms * 2 / 3);
    else
        p.hold_ms = chance(rng, 10) ? between(rng, lease, 3 * lease) : between(rng, 0, lease / 2);
    return p;
}

/* ---------------------------------------------------------------- library actors */

typedef struct actor {
    fshm *s;
    const fault_cfg *cfg;
    dlock_client *client;
    dlock_lock *h;
    int id, hkind, lock, take, link;
    int members[MULTI_MEMBERS]; /* multi: lock index of member i */
    uint64_t rng;
    _Atomic uint64_t acq_op;  /* the acquire in progress, for cancels */
    _Atomic uint64_t hold_op; /* the hold in progress, for on_lost */
    pthread_t thread;
} actor;

/* The actor whose thread this is (library workers). */
static __thread actor *this_actor;

/* What the library logs (info, in the waiting thread, once per wait) when
 * the store's answer to an attempt was that it is queued, or that it put
 * the waiter in its line (a lock table's waiter row) and it polls for its
 * turn (src/core/acquire.c). */
#define QUEUED_LOG  "waiting (queued in the store)"
#define IN_LINE_LOG "waiting (in line in the store"

/* The library's log of a worker's client: the store's word that a wait of
 * this thread's actor has a place in its queue, at the latest now. For fair
 * waiters that is arrival order the checker can rely on. */
/* The worker's library log at info and above (worker-N.log in the run's
 * dir, kept with it when a violation is found): the causes the history's
 * short texts cut off, such as what a retried request got. */
static FILE *worker_log;

static void on_log(int level, const char *msg, void *arg)
{
    actor *a = this_actor;
    if (worker_log != NULL && level <= DLOCK_LOG_INFO) {
        const fshm *s = arg;
        fprintf(worker_log, "%9.3f a%-4d %s: %s\n", (double) (fs_now() - s->t0) / 1e9,
                a != NULL ? a->id : -1,
                level == DLOCK_LOG_ERROR  ? "error"
                : level == DLOCK_LOG_WARN ? "warn"
                                          : "info",
                msg);
    }
    if (a == NULL || (strstr(msg, QUEUED_LOG) == NULL && strstr(msg, IN_LINE_LOG) == NULL))
        return;
    uint64_t op = atomic_load(&a->acq_op);
    if (op == 0)
        return;
    fev *e = fs_log(arg, EV_QUEUED, a->lock, a->id);
    e->op = op;
    e->kind = a->hkind;
    fs_commit(e);
}

static void on_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    actor *a = arg;
    (void) l;
    fev *e = fs_log(a->s, EV_LOST, a->lock, a->id);
    e->op = atomic_load(&a->hold_op);
    e->rc = code;
    e->kind = a->hkind;
    snprintf(e->text, sizeof e->text, "%s", why != NULL ? why : "");
    fs_commit(e);
}

static int lock_index(const fshm *s, const char *name)
{
    for (int i = 0; i < s->nlocks; i++) {
        if (strcmp(s->locks[i].name, name) == 0)
            return i;
    }
    return -1;
}

static int open_handle(actor *a)
{
    fshm *s = a->s;
    const char *name = s->locks[a->lock].name;
    switch (a->hkind) {
    case H_PLAIN:
        return dlock_lock_open(a->client, name, 0, &a->h);
    case H_FAIR:
        return dlock_lock_open(a->client, name, DLOCK_FAIR, &a->h);
    case H_READ:
        return dlock_lock_open(a->client, name, DLOCK_READ, &a->h);
    case H_WRITE:
        return dlock_lock_open(a->client, name, DLOCK_WRITE, &a->h);
    case H_SIMPLE:
        return dlock_lock_open(a->client, name, DLOCK_SIMPLE, &a->h);
    case H_SEM:
        return dlock_semaphore_open(a->client, name, (unsigned) s->locks[a->lock].capacity,
                                    (unsigned) a->take, &a->h);
    case H_MULTI: {
        const char *names[MULTI_MEMBERS];
        for (int i = 0; i < MULTI_MEMBERS; i++)
            names[i] = s->locks[s->multi[i]].name;
        /* fair half the time, where the store can (the same draw either way) */
        unsigned fair = (a->rng & 1) && (s->judge.caps & DLOCK_CAP_FAIR) ? DLOCK_FAIR : 0;
        int rc = dlock_multi_open(a->client, names, MULTI_MEMBERS, fair, &a->h);
        if (rc != DLOCK_OK)
            return rc;
        for (size_t i = 0; i < MULTI_MEMBERS; i++)
            a->members[i] = lock_index(s, dlock_lock_name(dlock_lock_member(a->h, i)));
        return DLOCK_OK;
    }
    }
    return DLOCK_EINVAL;
}

/* The locks an actor's hold covers, with their fences. */
static int held_locks(const actor *a, int *locks, uint64_t *fences)
{
    if (a->hkind == H_MULTI) {
        for (int i = 0; i < MULTI_MEMBERS; i++) {
            locks[i] = a->members[i];
            fences[i] = dlock_lock_fence(dlock_lock_member(a->h, (size_t) i));
        }
        return MULTI_MEMBERS;
    }
    locks[0] = a->lock;
    fences[0] = dlock_lock_fence(a->h);
    return 1;
}

/* One fenced read-modify-write on each resource the hold covers (readers
 * only read). */
void wl_touch(fshm *s, int actor_id, uint64_t op, int hkind, int take, int n, const int *locks,
              const uint64_t *fences, uint64_t *rng)
{
    for (int i = 0; i < n; i++) {
        int64_t value = 0;
        uint64_t version = 0;
        if (hkind == H_READ) {
            res_access(s, locks[i], actor_id, op, fences[i], ACC_READ_SHARED, take, &value,
                       &version);
            continue;
        }
        if (!res_access(s, locks[i], actor_id, op, fences[i], ACC_READ, take, &value, &version))
            continue;
        /* widen the window a lost update needs */
        if (chance(rng, 30))
            sleep_ms(between(rng, 1, 5));
        value++;
        res_access(s, locks[i], actor_id, op, fences[i], ACC_WRITE, take, &value, &version);
    }
}

static void log_fail(actor *a, int type, uint64_t op, int rc, int flags)
{
    fev *e = fs_log(a->s, type, a->lock, a->id);
    e->op = op;
    e->rc = rc;
    e->kind = a->hkind;
    e->flags = flags;
    snprintf(e->text, sizeof e->text, "%s", dlock_errmsg());
    fs_commit(e);
}

static int acquire(actor *a, uint64_t op, const plan *p, int flags)
{
    fev *e = fs_log(a->s, EV_ACQ_INV, a->lock, a->id);
    e->op = op;
    e->kind = a->hkind;
    e->wait_ms = p->wait_ms;
    e->lease_ms = p->lease_ms;
    e->take = a->take;
    e->flags = flags;
    fs_commit(e);
    atomic_store(&a->acq_op, op);
    atomic_store(&a->s->actors[a->id].state, AS_WAITING);
    int rc = p->lease_ms > 0 ? dlock_acquire_for(a->h, p->wait_ms, p->lease_ms)
                             : dlock_acquire(a->h, p->wait_ms);
    atomic_store(&a->acq_op, 0);
    if (rc == DLOCK_OK) {
        int locks[MULTI_MEMBERS];
        uint64_t fences[MULTI_MEMBERS];
        int n = held_locks(a, locks, fences);
        atomic_store(&a->s->actors[a->id].state, AS_HOLDING);
        e = fs_log(a->s, EV_ACQ_OK, a->lock, a->id);
        e->op = op;
        e->kind = a->hkind;
        e->flags = flags;
        e->take = a->take;
        e->fence = fences[0];
        e->fence2 = n > 1 ? fences[1] : 0;
        snprintf(e->text, sizeof e->text, "%s", dlock_lock_token(a->h));
        fs_commit(e);
    } else {
        if (!(flags & EVF_REENTRANT))
            atomic_store(&a->s->actors[a->id].state, AS_IDLE);
        log_fail(a, EV_ACQ_FAIL, op, rc, flags);
    }
    return rc;
}

static void release(actor *a, uint64_t op, int flags)
{
    fev *e = fs_log(a->s, EV_REL_INV, a->lock, a->id);
    e->op = op;
    e->kind = a->hkind;
    e->flags = flags;
    fs_commit(e);
    int rc = dlock_release(a->h);
    if (!(flags & EVF_REENTRANT))
        atomic_store(&a->s->actors[a->id].state, AS_IDLE);
    if (rc == DLOCK_OK) {
        e = fs_log(a->s, EV_REL_OK, a->lock, a->id);
        e->op = op;
        e->kind = a->hkind;
        e->flags = flags;
        fs_commit(e);
    } else {
        log_fail(a, EV_REL_FAIL, op, rc, flags);
    }
}

static void hold(actor *a, uint64_t op, const plan *p, int flags)
{
    int locks[MULTI_MEMBERS];
    uint64_t fences[MULTI_MEMBERS];
    int64_t end = fs_now() + p->hold_ms * 1000000;
    int reentered = 0;
    int reentrant_kind = a->hkind == H_PLAIN || a->hkind == H_FAIR || a->hkind == H_WRITE;

    atomic_store(&a->hold_op, op);
    do {
        if (dlock_lock_check(a->h) == DLOCK_ELOST) {
            fev *e = fs_log(a->s, EV_CHECK_LOST, a->lock, a->id);
            e->op = op;
            e->kind = a->hkind;
            fs_commit(e);
            break;
        }
        int n = held_locks(a, locks, fences);
        wl_touch(a->s, a->id, op, a->hkind, a->take, n, locks, fences, &a->rng);
        if (reentrant_kind && !reentered && chance(&a->rng, 5)) {
            /* an owner taking its lock again: the count goes up, the fence stays */
            plan inner = {0, 0, 0};
            int rc = acquire(a, op, &inner, flags | EVF_REENTRANT);
            reentered = rc == DLOCK_OK;
            if (rc == DLOCK_ELOST)
                break; /* told the lock is lost: no more writes under it */
        }
        sleep_ms(between(&a->rng, 2, 40));
    } while (fs_now() < end && phase(a->s) < PH_STOP);
    if (reentered)
        release(a, op, flags | EVF_REENTRANT);
    if (a->hkind == H_SEM)
        res_leave(a->s, a->lock, a->id, dlock_lock_fence(a->h));
    release(a, op, flags);
    atomic_store(&a->hold_op, 0);
}

static void *actor_main(void *arg)
{
    actor *a = arg;
    this_actor = a;
    fev *e = fs_log(a->s, EV_ACTOR, a->lock, a->id);
    e->kind = a->hkind;
    e->take = a->link;
    snprintf(e->text, sizeof e->text, "%s", dlock_lock_token(a->h));
    fs_commit(e);
    while (phase(a->s) < PH_STOP) {
        int final = phase(a->s) == PH_FINAL;
        plan p = choose(&a->rng, a->cfg, final);
        uint64_t op = fs_new_op(a->s);
        int rc = acquire(a, op, &p, final ? EVF_FINAL : 0);
        if (rc == DLOCK_OK)
            hold(a, op, &p, final ? EVF_FINAL : 0);
        else if (rc == DLOCK_EUNREACHABLE || rc == DLOCK_ESERVER)
            sleep_ms(between(&a->rng, 20, 100)); /* no hot loop while the store is away */
        sleep_ms(between(&a->rng, 0, 30));
    }
    atomic_store(&a->s->actors[a->id].live, 0);
    return NULL;
}

/* Cancels a waiting actor of this process now and then; at the end, every
 * waiting one, so that waits without a budget end. */
typedef struct canceller {
    fshm *s;
    actor *actors;
    int n;
    uint64_t rng;
} canceller;

static void cancel_one(fshm *s, actor *a, int canceller_id)
{
    fev *e = fs_log(s, EV_CANCEL_INV, a->lock, a->id);
    e->op = atomic_load(&a->acq_op);
    e->take = canceller_id;
    fs_commit(e);
    int rc = dlock_cancel(a->h);
    e = fs_log(s, EV_CANCEL_RET, a->lock, a->id);
    e->rc = rc;
    fs_commit(e);
}

static void *canceller_main(void *arg)
{
    canceller *c = arg;
    while (phase(c->s) < PH_STOP) {
        sleep_ms(between(&c->rng, 200, 1500));
        actor *a = &c->actors[next_rand(&c->rng) % (uint64_t) c->n];
        if (phase(c->s) < PH_FINAL && atomic_load(&c->s->actors[a->id].state) == AS_WAITING &&
            atomic_load(&a->acq_op) != 0)
            cancel_one(c->s, a, -1);
    }
    for (;;) {
        int live = 0;
        for (int i = 0; i < c->n; i++) {
            actor *a = &c->actors[i];
            if (!atomic_load(&c->s->actors[a->id].live))
                continue;
            live++;
            if (atomic_load(&c->s->actors[a->id].state) == AS_WAITING &&
                atomic_load(&a->acq_op) != 0)
                cancel_one(c->s, a, -1);
        }
        if (live == 0)
            break;
        sleep_ms(50);
    }
    return NULL;
}

static int new_actor(fshm *s, int hkind, int lock, int link)
{
    int id = atomic_fetch_add(&s->next_actor, 1);
    if (id >= MAX_ACTORS) {
        fprintf(stderr, "fault: more than %d actors\n", MAX_ACTORS);
        _exit(70);
    }
    actor_slot *slot = &s->actors[id];
    atomic_store(&slot->pid, (int32_t) getpid());
    atomic_store(&slot->state, AS_IDLE);
    atomic_store(&slot->live, 1);
    slot->kind = hkind;
    slot->lock = lock;
    slot->link = link;
    return id;
}

/* The lock an actor of kind hkind uses. */
static int lock_for(const fshm *s, int hkind, uint64_t pick)
{
    int want = fs_hkind_lock_kind(hkind);
    int candidates[MAX_LOCKS], n = 0;
    for (int i = 0; i < s->nlocks; i++) {
        if (s->locks[i].kind == want)
            candidates[n++] = i;
    }
    if (hkind == H_MULTI)
        return s->multi[0];
    return n > 0 ? candidates[pick % (uint64_t) n] : 0;
}

void wl_library_worker(fshm *s, const fault_cfg *cfg, int widx, const char *url)
{
    actor actors[MAX_THREADS];
    canceller c;
    pthread_t cancel_thread;
    dlock_client *client = NULL;
    int n = cfg->threads < MAX_THREADS ? cfg->threads : MAX_THREADS;
    int link = widx % cfg->links;

    int rc = dlock_client_open(url, &client);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "fault worker %d: %s: %s\n", widx, url, dlock_errmsg());
        _exit(70);
    }
    char log_path[300];
    snprintf(log_path, sizeof log_path, "%s/worker-%d.log", cfg->dir, widx);
    worker_log = fopen(log_path, "a");
    if (worker_log != NULL)
        setvbuf(worker_log, NULL, _IOLBF, 0); /* whole lines, as a kill -9 may come */
    dlock_client_set_log(client, DLOCK_LOG_DEBUG, on_log, s);
    for (int t = 0; t < n; t++) {
        actor *a = &actors[t];
        memset(a, 0, sizeof *a);
        a->s = s;
        a->cfg = cfg;
        a->client = client;
        a->rng = mix(cfg->seed ^ mix((uint64_t) (widx * 131 + t) ^ (uint64_t) getpid()));
        /* spread the kinds over every worker's threads */
        a->hkind = cfg->kinds[(widx * n + t) % cfg->nkinds];
        a->lock = lock_for(s, a->hkind, next_rand(&a->rng));
        a->take = a->hkind == H_SEM ? (chance(&a->rng, 30) ? 2 : 1) : 1;
        a->link = link;
        a->id = new_actor(s, a->hkind, a->lock, link);
        rc = open_handle(a);
        if (rc != DLOCK_OK) {
            fprintf(stderr, "fault worker %d: open %s handle: %s\n", widx, fs_hkind_name(a->hkind),
                    dlock_errmsg());
            _exit(70);
        }
        dlock_lock_on_lost(a->h, on_lost, a);
    }
    for (int t = 0; t < n; t++)
        pthread_create(&actors[t].thread, NULL, actor_main, &actors[t]);
    c = (canceller){s, actors, n, mix(cfg->seed ^ (uint64_t) widx ^ 0xca)};
    pthread_create(&cancel_thread, NULL, canceller_main, &c);
    for (int t = 0; t < n; t++)
        pthread_join(actors[t].thread, NULL);
    pthread_join(cancel_thread, NULL);
    for (int t = 0; t < n; t++)
        dlock_lock_free(actors[t].h);
    dlock_client_close(client);
    _exit(0);
}

/* ---------------------------------------------------------------- dlock run */

static void fmt_ms(char *buf, size_t len, int64_t ms)
{
    snprintf(buf, len, "%lldms", (long long) ms);
}

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    (void) sig;
    stop_requested = 1;
}

/* One loop that takes the lock with `dlock run`, whose command is this
 * program again ("cmd", below). */
void wl_run_worker(fshm *s, const fault_cfg *cfg, int ridx, const char *url)
{
    uint64_t rng = mix(cfg->seed ^ mix(0x5eed0000ull + (uint64_t) ridx) ^ (uint64_t) getpid());
    int link = ridx % cfg->links;
    int round = 0;

    /* no SA_RESTART: the signal must interrupt waitpid() */
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa, NULL);
    while (phase(s) < PH_STOP && !stop_requested) {
        int hkind = cfg->kinds[(ridx + round++) % cfg->nkinds];
        int lock = lock_for(s, hkind, next_rand(&rng));
        int take = hkind == H_SEM ? (chance(&rng, 30) ? 2 : 1) : 1;
        int final = phase(s) == PH_FINAL;
        plan p = choose(&rng, cfg, final);
        /* dlock run's -w is in whole units; no -w waits forever */
        int id = new_actor(s, hkind, lock, link);
        uint64_t op = fs_new_op(s);
        char wait_s[32], lease_s[32], hold_s[32], actor_s[16], op_s[32], hk_s[8], lock_s[8],
            take_s[8], permits_s[8], path[300];
        const char *argv[48];
        int argc = 0;

        fev *e = fs_log(s, EV_ACTOR, lock, id);
        e->kind = hkind;
        e->take = link;
        e->flags = EVF_RUN;
        fs_commit(e);

        snprintf(path, sizeof path, "%s/shm", cfg->dir);
        snprintf(take_s, sizeof take_s, "%d", take);
        argv[argc++] = cfg->dlock;
        argv[argc++] = "run";
        argv[argc++] = "-q";
        argv[argc++] = "-u";
        argv[argc++] = url;
        if (p.wait_ms == 0) {
            argv[argc++] = "-n";
        } else if (p.wait_ms > 0) {
            fmt_ms(wait_s, sizeof wait_s, p.wait_ms);
            argv[argc++] = "-w";
            argv[argc++] = wait_s;
        }
        if (p.lease_ms > 0) {
            fmt_ms(lease_s, sizeof lease_s, p.lease_ms);
            argv[argc++] = "-l";
            argv[argc++] = lease_s;
        }
        argv[argc++] = "--grace";
        argv[argc++] = "1";
        switch (hkind) {
        case H_FAIR:
            argv[argc++] = "--fair";
            break;
        case H_READ:
            argv[argc++] = "--read";
            break;
        case H_WRITE:
            argv[argc++] = "--write";
            break;
        case H_SIMPLE:
            argv[argc++] = "--simple";
            break;
        case H_SEM:
            snprintf(permits_s, sizeof permits_s, "%d", s->locks[lock].capacity);
            argv[argc++] = "--permits";
            argv[argc++] = permits_s;
            argv[argc++] = "--take";
            argv[argc++] = take_s;
            break;
        default:
            break;
        }
        if (hkind == H_MULTI) {
            for (int i = 0; i < MULTI_MEMBERS; i++) {
                argv[argc++] = "-m";
                argv[argc++] = s->locks[s->multi[i]].name;
            }
        } else {
            argv[argc++] = s->locks[lock].name;
        }
        snprintf(hold_s, sizeof hold_s, "%lld", (long long) p.hold_ms);
        snprintf(actor_s, sizeof actor_s, "%d", id);
        snprintf(op_s, sizeof op_s, "%llu", (unsigned long long) op);
        snprintf(hk_s, sizeof hk_s, "%d", hkind);
        snprintf(lock_s, sizeof lock_s, "%d", lock);
        argv[argc++] = "--";
        argv[argc++] = cfg->bin;
        argv[argc++] = "cmd";
        argv[argc++] = path;
        argv[argc++] = actor_s;
        argv[argc++] = op_s;
        argv[argc++] = hk_s;
        argv[argc++] = lock_s;
        argv[argc++] = hold_s;
        argv[argc++] = take_s;
        argv[argc] = NULL;

        e = fs_log(s, EV_ACQ_INV, lock, id);
        e->op = op;
        e->kind = hkind;
        e->wait_ms = p.wait_ms;
        e->lease_ms = p.lease_ms;
        e->take = take;
        e->flags = EVF_RUN | (final ? EVF_FINAL : 0);
        fs_commit(e);
        atomic_store(&s->actors[id].state, AS_WAITING);

        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            signal(SIGTERM, SIG_DFL);
            int devnull = open("/dev/null", O_WRONLY);
            if (!cfg->verbose && devnull >= 0)
                dup2(devnull, 2);
            execv(cfg->dlock, (char *const *) argv);
            _exit(127);
        }
        atomic_store(&s->actors[id].sup_pid, (int32_t) pid);
        e = fs_log(s, EV_SPAWN, lock, id);
        e->op = op;
        e->rc = (int32_t) pid;
        fs_commit(e);

        int status = 0, sent_term = 0;
        for (;;) {
            pid_t r = waitpid(pid, &status, 0);
            if (r == pid)
                break;
            if (r < 0 && errno == EINTR) {
                /* the run is over: a wait without a budget ends by a
                 * signal, as a user's ^C would end it */
                if (stop_requested && !sent_term) {
                    kill(pid, SIGTERM);
                    sent_term = 1;
                }
                continue;
            }
            break;
        }
        atomic_store(&s->actors[id].sup_pid, 0);
        atomic_store(&s->actors[id].state, AS_IDLE);
        atomic_store(&s->actors[id].live, 0);
        e = fs_log(s, EV_RUN_EXIT, lock, id);
        e->op = op;
        e->kind = hkind;
        e->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        e->flags = EVF_RUN | (sent_term ? EVF_END : 0);
        fs_commit(e);
        sleep_ms(between(&rng, 0, 50));
    }
    _exit(0);
}

/* ---------------------------------------------------------------- the command */

static volatile sig_atomic_t term_seen;
static int64_t term_at;

static void on_term(int sig)
{
    (void) sig;
    if (!term_seen)
        term_at = fs_now();
    term_seen = 1;
}

/* `fault cmd SHM ACTOR OP HKIND LOCK HOLD_MS TAKE`: what `dlock run` runs. It
 * holds the lock (as dlock run says through DLOCK_TOKEN / DLOCK_FENCES) for
 * HOLD_MS, touching the resource, and stops at once on SIGTERM (the lock
 * is lost, or dlock died). */
int wl_command(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: fault cmd SHM ACTOR OP HKIND LOCK HOLD_MS TAKE\n");
        return 64;
    }
    signal(SIGTERM, on_term);
    fshm *s = fs_attach(argv[2]);
    if (s == NULL)
        return 70;
    int actor_id = atoi(argv[3]);
    uint64_t op = strtoull(argv[4], NULL, 10);
    int hkind = atoi(argv[5]), lock = atoi(argv[6]), take = atoi(argv[8]);
    int64_t hold_ms = atoll(argv[7]);
    uint64_t rng = mix(op);
    int locks[MULTI_MEMBERS];
    uint64_t fences[MULTI_MEMBERS];
    int n = 1;

    locks[0] = lock;
    fences[0] = strtoull(getenv("DLOCK_TOKEN") != NULL ? getenv("DLOCK_TOKEN") : "0", NULL, 10);
    if (hkind == H_MULTI) {
        /* DLOCK_FENCES: one NAME=FENCE line per name */
        const char *all = getenv("DLOCK_FENCES");
        n = 0;
        for (int i = 0; i < MULTI_MEMBERS; i++) {
            char key[64];
            const char *name = s->locks[s->multi[i]].name;
            snprintf(key, sizeof key, "%s=", name);
            const char *at = all != NULL ? strstr(all, key) : NULL;
            while (at != NULL && at != all && at[-1] != '\n')
                at = strstr(at + 1, key);
            locks[n] = s->multi[i];
            fences[n++] = at != NULL ? strtoull(at + strlen(key), NULL, 10) : 0;
        }
    }
    /* dlock's connections are its own: a command that inherits one keeps
     * it open after dlock is gone */
    DIR *fds = opendir("/proc/self/fd");
    struct dirent *d;
    int sockets = 0;
    while (fds != NULL && (d = readdir(fds)) != NULL) {
        char path[64], target[64];
        int fd = atoi(d->d_name);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (fd > 2 && fd != dirfd(fds) && len > 0) {
            target[len] = 0;
            sockets += strncmp(target, "socket:", 7) == 0;
        }
    }
    if (fds != NULL)
        closedir(fds);
    if (sockets > 0) {
        fev *v = fs_log(s, EV_VIOL, lock, actor_id);
        v->kind = V_FD_LEAK;
        snprintf(v->text, sizeof v->text, "command of dlock run has %d sockets", sockets % 1000);
        fs_commit(v);
    }

    atomic_store(&s->actors[actor_id].state, AS_HOLDING);
    fev *e = fs_log(s, EV_ACQ_OK, lock, actor_id);
    e->op = op;
    e->kind = hkind;
    e->flags = EVF_RUN;
    e->take = take;
    e->fence = fences[0];
    e->fence2 = n > 1 ? fences[1] : 0;
    snprintf(e->text, sizeof e->text, "%s", getenv("DLOCK_OWNER") ? getenv("DLOCK_OWNER") : "");
    int64_t held_from = e->t;
    fs_commit(e);

    int64_t end = fs_now() + hold_ms * 1000000;
    while (!term_seen && fs_now() < end) {
        wl_touch(s, actor_id, op, hkind, take, n, locks, fences, &rng);
        sleep_ms(between(&rng, 2, 40));
    }
    if (term_seen) {
        /* A SIGTERM that came before the hold was logged (the run ended as
         * the command started) ends it when it was logged, not before: a
         * stop dated before its hold would leave the hold open for good,
         * and its release by dlock would look like a second holder. */
        e = fs_log(s, EV_TERM, lock, actor_id);
        e->t = term_at > held_from ? term_at : held_from;
        e->op = op;
        e->kind = hkind;
        e->flags = EVF_RUN;
        fs_commit(e);
        return 143;
    }
    if (hkind == H_SEM)
        res_leave(s, lock, actor_id, fences[0]);
    e = fs_log(s, EV_REL_INV, lock, actor_id);
    e->op = op;
    e->kind = hkind;
    e->flags = EVF_RUN;
    fs_commit(e);
    return 0;
}

/* ---------------------------------------------------------------- monitor */

/* Asks the server (directly, not through the proxy) what it thinks of each
 * lock, a few times a second: the checker compares that with who may hold. */
void wl_monitor(fshm *s, const fault_cfg *cfg)
{
    dlock_client *c = NULL;
    if (dlock_client_open(cfg->direct_url, &c) != DLOCK_OK) {
        fprintf(stderr, "fault monitor: %s\n", dlock_errmsg());
        _exit(70);
    }
    unsigned char refused[64] = {0}; /* kinds the store lacks are not asked again */
    while (phase(s) < PH_STOP) {
        for (int i = 0; i < s->nlocks && i < 64; i++) {
            static const unsigned flags[] = {[LK_MUTEX] = 0,
                                             [LK_RW] = DLOCK_READ,
                                             [LK_SEM] = DLOCK_SEMAPHORE,
                                             [LK_SIMPLE] = DLOCK_SIMPLE};
            dlock_status st;
            int64_t t0 = fs_now();
            if (refused[i])
                continue;
            int rc = dlock_query(c, s->locks[i].name, flags[s->locks[i].kind], &st);
            refused[i] = rc == DLOCK_ENOTSUP;
            if (rc != DLOCK_OK)
                continue;
            fev *e = fs_log(s, EV_SNAP, i, -1);
            e->wait_ms = t0;
            e->rc = st.held;
            e->take = (int32_t) st.shared;
            e->lease_ms = st.permits_used;
            e->fence = st.last_fence;
            snprintf(e->text, sizeof e->text, "%.47s", st.owner);
            fs_commit(e);
        }
        sleep_ms(100);
    }
    dlock_client_close(c);
    _exit(0);
}
