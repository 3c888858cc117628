/* SPDX-License-Identifier: MIT */
/* handle.c - lock handles: making them for a kind of lock, their lifetime
 * (reference counted: the renewer's threads hold a reference while they use
 * one), what they say about themselves, and freeing them. */
#include "lock.h"

#include "../base/clock.h"
#include "../base/error.h"
#include "../base/random.h"
#include "../base/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- leases */

int dlock__check_lease(int64_t lease_ms)
{
    if (lease_ms < DLOCK_LEASE_MIN_MS)
        return dlock__fail(DLOCK_EINVAL,
                           "lease of %lld ms: a lease must be at least %d ms (of a shorter one, "
                           "the drift margin and a round trip leave too little to hold)",
                           (long long) lease_ms, DLOCK_LEASE_MIN_MS);
    if (lease_ms > DLOCK_DURATION_MAX_MS)
        return dlock__fail(DLOCK_EINVAL, "lease of %lld ms: a lease must be at most %lld ms",
                           (long long) lease_ms, (long long) DLOCK_DURATION_MAX_MS);
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- kinds */

int dlock__spec_of(unsigned flags, int semaphore, dlock__lock_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    switch (flags) {
    case 0:
        spec->kind = DLOCK__MUTEX;
        return DLOCK_OK;
    case DLOCK_SIMPLE:
        spec->kind = DLOCK__MUTEX;
        spec->simple = 1;
        return DLOCK_OK;
    case DLOCK_FAIR:
        spec->kind = DLOCK__FAIR;
        return DLOCK_OK;
    case DLOCK_READ:
        spec->kind = DLOCK__READ;
        return DLOCK_OK;
    case DLOCK_WRITE:
        spec->kind = DLOCK__WRITE;
        return DLOCK_OK;
    case DLOCK_SEMAPHORE:
        if (semaphore) {
            spec->kind = DLOCK__SEMAPHORE;
            return DLOCK_OK;
        }
        return dlock__fail(DLOCK_EINVAL, "a semaphore is opened with dlock_semaphore_open()");
    default:
        return dlock__fail(DLOCK_EINVAL,
                           "flags 0x%x: want one of 0, DLOCK_SIMPLE, DLOCK_FAIR, DLOCK_READ, "
                           "DLOCK_WRITE%s",
                           flags, semaphore ? ", DLOCK_SEMAPHORE" : "");
    }
}

int dlock__client_supports_spec(dlock_client *c, const dlock__lock_spec *spec)
{
    static const struct {
        unsigned cap;
        const char *what;
    } need[] = {
        [DLOCK__MUTEX] = {0, "a lock"},
        [DLOCK__FAIR] = {DLOCK_CAP_FAIR, "a fair lock (DLOCK_FAIR)"},
        [DLOCK__READ] = {DLOCK_CAP_READ_WRITE, "a read-write lock (DLOCK_READ)"},
        [DLOCK__WRITE] = {DLOCK_CAP_READ_WRITE, "a read-write lock (DLOCK_WRITE)"},
        [DLOCK__SEMAPHORE] = {DLOCK_CAP_SEMAPHORE, "a semaphore"},
    };
    if (spec->simple)
        return dlock__client_require(c, DLOCK_CAP_INTEROP, "the interop layout (DLOCK_SIMPLE)");
    return dlock__client_require(c, need[spec->kind].cap, need[spec->kind].what);
}

/* ---------------------------------------------------------------- lifetime */

static dlock_lock *lock_of(dlock__lease *e)
{
    return (dlock_lock *) (void *) ((char *) e - offsetof(dlock_lock, lease));
}

static void lease_ref(dlock__lease *e)
{
    atomic_fetch_add(&lock_of(e)->refs, 1);
}

static void lease_unref(dlock__lease *e)
{
    dlock__lock_unref(lock_of(e));
}

/* The renewer lost the lease: tell the owner (a member's loss is its
 * multi-lock's). */
static void lease_report(dlock__lease *e)
{
    dlock_lock *l = lock_of(e);
    dlock__renewer *r = &l->client->renewer;
    char why[sizeof e->why];

    pthread_mutex_lock(&l->report_mu);
    dlock__renewer_lock(r, e);
    snprintf(why, sizeof why, "%s", e->why);
    int pending = e->lost; /* else an owner's call took the loss and ended the hold */
    dlock__renewer_unlock(r, e);
    dlock_lock *target = l->parent != NULL ? l->parent : l;
    /* (a loss while the acquire is still going is found by that acquire:
     * dlock__lock_settle) */
    if (pending && atomic_load(&target->settled)) {
        dlock__renewer_lock(r, &target->lease);
        dlock_lost_fn fn = target->on_lost;
        void *arg = target->on_lost_arg;
        dlock__renewer_unlock(r, &target->lease);
        if (fn != NULL)
            fn(target, DLOCK_ELOST, why, arg);
    }
    pthread_mutex_unlock(&l->report_mu);
}

static const dlock__lease_owner lock_owner = {
    .ref = lease_ref,
    .unref = lease_unref,
    .report = lease_report,
};

static void destroy(dlock_lock *l)
{
    for (size_t i = 0; i < l->nmembers; i++)
        dlock__lock_unref(l->members[i]);
    free(l->members);
    if (l->sl != NULL)
        l->client->backend->lock_free(l->client->store, l->sl);
    pthread_mutex_destroy(&l->report_mu);
    free(l->name);
    free(l);
}

void dlock__lock_unref(dlock_lock *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1)
        destroy(l);
}

int dlock__lock_new(dlock_client *c, const char *name, const dlock__lock_spec *spec,
                    dlock_lock **out)
{
    dlock_lock *l;
    int rc;

    if (out == NULL)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (c == NULL)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    rc = dlock__check_name(name);
    if (rc == DLOCK_OK && spec != NULL)
        rc = dlock__client_supports_spec(c, spec);
    if (rc != DLOCK_OK)
        return rc;
    l = calloc(1, sizeof *l);
    if (l == NULL || (l->name = strdup(name)) == NULL) {
        free(l);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    if (spec != NULL) {
        rc = c->backend->lock_new(c->store, name, spec, &l->sl);
        if (rc != DLOCK_OK) {
            free(l->name);
            free(l);
            return rc;
        }
        l->spec = *spec;
    }
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&l->report_mu, &recursive);
    pthread_mutexattr_destroy(&recursive);
    l->client = c;
    atomic_init(&l->refs, 1);
    atomic_init(&l->busy, 0);
    atomic_init(&l->wait_state, 0);
    atomic_init(&l->cancel_for, 0);
    atomic_init(&l->settled, 0);
    l->lease.owner = &lock_owner;
    l->lease.lock = l->sl;
    l->lease.token = l->token;
    l->lease.name = l->name;
    *out = l;
    return DLOCK_OK;
}

/* A token starts with its client's id (16 hex digits), so a store that
 * keeps only the token can still tell whose it is (owner.h); 64 random bits
 * follow. */
int dlock__token_make(const dlock_client *c, char *out)
{
    memcpy(out, c->cfg.client_id, 16);
    return dlock__random_hex(out + 16, 8);
}

static int new_token(dlock_lock **l)
{
    if (dlock__token_make((*l)->client, (*l)->token) == 0)
        return DLOCK_OK;
    dlock_lock_free(*l);
    *l = NULL;
    return dlock__fail(DLOCK_ENOMEM, "no randomness for the owner token");
}

int dlock_lock_open(dlock_client *c, const char *name, unsigned flags, dlock_lock **out)
{
    dlock__lock_spec spec;
    int rc;

    dlock__clear_error();
    if (out != NULL)
        *out = NULL; /* also when the flags are refused */
    rc = dlock__spec_of(flags, 0, &spec);
    if (rc == DLOCK_OK)
        rc = dlock__lock_new(c, name, &spec, out);
    return rc == DLOCK_OK ? new_token(out) : rc;
}

int dlock_lock_dup(const dlock_lock *l, unsigned flags, dlock_lock **out)
{
    dlock__lock_spec spec;
    int rc;

    dlock__clear_error();
    if (l == NULL || l->nmembers > 0 || l->spec.kind == DLOCK__SEMAPHORE)
        return dlock__fail(DLOCK_EINVAL, "dlock_lock_dup: want a lock handle (not a semaphore "
                                         "or multi-lock)");
    rc = dlock__spec_of(flags, 0, &spec);
    if (rc == DLOCK_OK)
        rc = dlock__lock_new(l->client, l->name, &spec, out);
    if (rc == DLOCK_OK)
        snprintf((*out)->token, sizeof(*out)->token, "%s", l->token);
    return rc;
}

int dlock_semaphore_open(dlock_client *c, const char *name, unsigned permits, unsigned take,
                         dlock_lock **out)
{
    dlock__lock_spec spec = {.kind = DLOCK__SEMAPHORE, .permits = permits, .take = take};
    int rc;

    dlock__clear_error();
    if (out != NULL)
        *out = NULL; /* on every failure, as the other open calls */
    if (permits == 0 || take == 0 || take > permits || permits > 1000000000u)
        return dlock__fail(DLOCK_EINVAL,
                           "semaphore '%s': want 0 < take (%u) <= permits (%u) <= 10^9",
                           name != NULL ? name : "", take, permits);
    rc = dlock__lock_new(c, name, &spec, out);
    return rc == DLOCK_OK ? new_token(out) : rc;
}

/* ---------------------------------------------------------------- calls */

int dlock__lock_enter(dlock_lock *l)
{
    dlock__clear_error();
    if (l == NULL)
        return dlock__fail(DLOCK_EINVAL, "lock handle is NULL");
    if (l->parent != NULL)
        return dlock__fail(DLOCK_EINVAL,
                           "lock '%s' is a member of a multi-lock: use the "
                           "multi-lock",
                           l->name);
    if (atomic_exchange(&l->busy, 1) != 0)
        return dlock__fail(DLOCK_EINVAL,
                           "lock handle '%s' is in use by another call (one owner, one call "
                           "at a time)",
                           l->name);
    l->call_began_us = dlock__now_us();
    return DLOCK_OK;
}

int dlock__lock_leave(dlock_lock *l, int rc)
{
    atomic_store(&l->busy, 0);
    return rc;
}

int64_t dlock__lock_op_deadline(const dlock_lock *l)
{
    return dlock__now_us() + l->client->cfg.command_timeout_ms * 1000;
}

/* The end of a try's time, which its requests and its clean-up share: one
 * command timeout from the start of the call (a member's: its
 * multi-lock's). */
static int64_t try_end(const dlock_lock *l)
{
    const dlock_lock *call = l->parent != NULL ? l->parent : l;
    return call->call_began_us + l->client->cfg.command_timeout_ms * 1000;
}

int64_t dlock__lock_request_deadline(const dlock_lock *l, int64_t deadline)
{
    int64_t now = dlock__now_us(), timeout = l->client->cfg.command_timeout_ms * 1000;
    if (deadline == 0)
        return try_end(l);
    if (deadline == DLOCK__NEVER)
        return now + timeout;
    int64_t cap = deadline + timeout / 2;
    return now + timeout < cap ? now + timeout : cap;
}

int64_t dlock__lock_cleanup_deadline(const dlock_lock *l, int64_t wait_deadline)
{
    int64_t now = dlock__now_us(), timeout = l->client->cfg.command_timeout_ms * 1000;
    if (wait_deadline == 0)
        return try_end(l);
    if (wait_deadline == DLOCK__NEVER || wait_deadline >= now)
        return now + timeout;
    return wait_deadline + timeout;
}

static int release_all(dlock_lock *l)
{
    return l->nmembers > 0 ? dlock__multi_release(l, 1) : dlock__lock_give(l, 1, 0);
}

void dlock_lock_free(dlock_lock *l)
{
    if (l == NULL)
        return;
    if (dlock__lock_enter(l) == DLOCK_OK) {
        if (l->holds > 0)
            release_all(l);
        dlock__lock_stop_holding(l);
        dlock__lock_leave(l, DLOCK_OK);
    }
    dlock__lock_unref(l);
}

void dlock_lock_detach(dlock_lock *l)
{
    if (l == NULL)
        return;
    if (dlock__lock_enter(l) == DLOCK_OK) {
        const dlock__backend *b = l->client->backend;
        int held = l->holds > 0;
        /* off the renewer first: a renewal must not find the hold gone */
        if (l->nmembers > 0)
            dlock__multi_forget(l);
        dlock__lock_stop_holding(l);
        if (held && b->detach != NULL) {
            /* the store keeps what it holds: lock_free must not give it up */
            for (size_t i = 0; i < l->nmembers; i++)
                b->detach(l->client->store, l->members[i]->sl);
            if (l->nmembers == 0)
                b->detach(l->client->store, l->sl);
        }
        dlock__lock_leave(l, DLOCK_OK);
    }
    dlock__lock_unref(l);
}

/* ---------------------------------------------------------------- state */

uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return l != NULL ? l->fence : 0;
}

const char *dlock_lock_token(const dlock_lock *l)
{
    return l != NULL ? l->token : "";
}

const char *dlock_lock_name(const dlock_lock *l)
{
    return l != NULL ? l->name : "";
}

unsigned dlock_lock_holds(const dlock_lock *l)
{
    return l != NULL ? l->holds : 0;
}

size_t dlock_lock_members(const dlock_lock *l)
{
    return l == NULL ? 0 : l->nmembers > 0 ? l->nmembers : 1;
}

const dlock_lock *dlock_lock_member(const dlock_lock *l, size_t i)
{
    if (l == NULL)
        return NULL;
    if (l->nmembers == 0)
        return i == 0 ? l : NULL;
    return i < l->nmembers ? l->members[i] : NULL;
}

void dlock_lock_on_lost(dlock_lock *l, dlock_lost_fn fn, void *arg)
{
    if (l == NULL)
        return;
    dlock__renewer_lock(&l->client->renewer, &l->lease);
    l->on_lost = fn;
    l->on_lost_arg = arg;
    dlock__renewer_unlock(&l->client->renewer, &l->lease);
}
