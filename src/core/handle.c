/* SPDX-License-Identifier: MIT */
/* handle.c - lock handles: making them for a kind of lock, their lifetime
 * (reference counted: the renewer's threads hold a reference while they use
 * one), the owner's calls on them (entered one at a time) and their
 * bounds, their wait's cancellation, and freeing them. The public calls on
 * a handle are calls.c's. */
#include "lock.h"

#include "../base/clock.h"
#include "../base/error.h"
#include "../base/random.h"
#include "../base/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAST_WAIT_MIN_US 200000 /* a wait's request may end this long after the wait, at least */

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
    atomic_init(&l->token_shared, 0);
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

int dlock__lock_new_owner(dlock_lock *l)
{
    char token[DLOCK__TOKEN_MAX + 1];

    if (!l->token_used || atomic_load(&l->token_shared))
        return DLOCK_OK;
    if (dlock__token_make(l->client, token) != 0)
        return dlock__fail(DLOCK_ENOMEM, "no randomness for the owner token");
    snprintf(l->token, sizeof l->token, "%s", token);
    l->token_used = 0;
    for (size_t i = 0; i < l->nmembers; i++)
        snprintf(l->members[i]->token, sizeof l->members[i]->token, "%s", token);
    return DLOCK_OK;
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
    int64_t cap = deadline + dlock__lock_past_wait_us(l);
    return now + timeout < cap ? now + timeout : cap;
}

int64_t dlock__lock_past_wait_us(const dlock_lock *l)
{
    /* a tenth of a command timeout, 200 ms at least (a reply on its way),
     * half of one at most */
    int64_t timeout = l->client->cfg.command_timeout_ms * 1000;
    int64_t past = timeout / 10 > PAST_WAIT_MIN_US ? timeout / 10 : PAST_WAIT_MIN_US;
    return past > timeout / 2 ? timeout / 2 : past;
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

/* ---------------------------------------------------------------- cancel */

void dlock__lock_begin_wait(dlock_lock *l)
{
    uint64_t n = (atomic_load(&l->wait_state) >> 1) + 1;
    atomic_store(&l->wait_state, n << 1 | 1);
}

void dlock__lock_end_wait(dlock_lock *l)
{
    atomic_store(&l->wait_state, atomic_load(&l->wait_state) & ~(uint64_t) 1);
}

int dlock__lock_cancelled(dlock_lock *l)
{
    dlock_lock *o = dlock__lock_owner(l);
    uint64_t state = atomic_load(&o->wait_state);
    return (state & 1) && atomic_load(&o->cancel_for) == state >> 1;
}
