/* SPDX-License-Identifier: MIT */
/* operator.c - calls about a lock name rather than a hold: what the store
 * says of it, an operator's forced release, and taking over a lock another
 * process holds (by its owner token). */
#include "lock.h"
#include "owner.h"

#include "../base/clock.h"
#include "../base/error.h"
#include "../base/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dlock_lock_adopt(dlock_client *c, const char *name, const char *token, unsigned flags,
                     dlock_lock **out)
{
    dlock__lock_spec spec;
    dlock_status st;
    int64_t sent;
    int rc;

    dlock__clear_error();
    if (out != NULL)
        *out = NULL;
    if (c == NULL)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    if (token == NULL || token[0] == '\0' || strlen(token) > DLOCK__TOKEN_MAX)
        return dlock__fail(DLOCK_EINVAL, "owner token must be 1..%d characters", DLOCK__TOKEN_MAX);
    for (const char *p = token; *p != '\0'; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '-' || *p == '_' || *p == '.'))
            return dlock__fail(DLOCK_EINVAL, "owner token '%s': use letters, digits and -_.",
                               token);
    }
    rc = dlock__client_require(c, DLOCK_CAP_ADOPT, "dlock_lock_adopt");
    if (rc == DLOCK_OK)
        rc = dlock__spec_of(flags, 0, &spec);
    if (rc == DLOCK_OK && spec.kind == DLOCK__READ)
        rc = dlock__fail(DLOCK_ENOTSUP, "a read hold cannot be adopted (only an exclusive one)");
    if (rc == DLOCK_OK)
        rc = dlock__lock_new(c, name, &spec, out);
    if (rc != DLOCK_OK)
        return rc;
    dlock_lock *l = *out;
    snprintf(l->token, sizeof l->token, "%s", token);
    sent = dlock__now_us();
    rc = c->backend->query(c->store, l->sl, &st, dlock__lock_op_deadline(l));
    if (rc == DLOCK_OK && strcmp(st.owner, token) != 0)
        rc = dlock__fail(DLOCK_ENOTOWNER, "lock '%s' is %s", name,
                         st.held ? "held under another owner token" : "not held");
    if (rc == DLOCK_OK && st.lease_ms <= 0)
        rc = dlock__fail(DLOCK_ENOTSUP, "lock '%s' has no lease in the store", name);
    if (rc == DLOCK_OK)
        rc = dlock__lock_start_holding(l, st.last_fence, st.last_fence, NULL, st.lease_ms, 0, sent);
    if (rc == DLOCK_OK)
        rc = dlock__lock_settle(l);
    if (rc == DLOCK_OK)
        DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "lock '%s' adopted (fence %llu, %lld ms of lease)",
                   name, (unsigned long long) l->fence, (long long) st.lease_ms);
    if (rc != DLOCK_OK) {
        dlock__lock_unref(l);
        *out = NULL;
    }
    return rc;
}

/* A lock state made for one operator's call on `name` (what: the call,
 * which needs cap), after the checks every such call shares. */
static int lock_for_call(dlock_client *c, const char *name, unsigned flags, unsigned cap,
                         const char *what, dlock__store_lock **sl)
{
    dlock__lock_spec spec;
    int rc;

    dlock__clear_error();
    if (c == NULL)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    rc = dlock__client_require(c, cap, what);
    if (rc == DLOCK_OK)
        rc = dlock__spec_of(flags, 1, &spec);
    if (rc == DLOCK_OK)
        rc = dlock__check_name(name);
    if (rc == DLOCK_OK)
        rc = dlock__client_supports_spec(c, &spec);
    if (rc == DLOCK_OK)
        rc = c->backend->lock_new(c->store, name, &spec, sl);
    return rc;
}

/* Runs query (st != NULL) or force-unlock on a lock state made for the call. */
static int on_name(dlock_client *c, const char *name, unsigned flags, dlock_status *st)
{
    dlock__store_lock *sl = NULL;
    int rc = st != NULL
                 ? lock_for_call(c, name, flags, DLOCK_CAP_QUERY, "dlock_query", &sl)
                 : lock_for_call(c, name, flags, DLOCK_CAP_FORCE_UNLOCK, "dlock_force_unlock", &sl);

    if (rc != DLOCK_OK)
        return rc;
    int64_t deadline = dlock__now_us() + c->cfg.command_timeout_ms * 1000;
    if (st != NULL)
        rc = c->backend->query(c->store, sl, st, deadline);
    else
        rc = c->backend->force_unlock(c->store, sl, deadline);
    c->backend->lock_free(c->store, sl);
    return rc;
}

int dlock_query(dlock_client *c, const char *name, unsigned flags, dlock_status *out)
{
    if (out == NULL)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    memset(out, 0, sizeof *out);
    return on_name(c, name, flags, out);
}

int dlock_force_unlock(dlock_client *c, const char *name, unsigned flags)
{
    int rc = on_name(c, name, flags, NULL);
    if (rc == DLOCK_OK)
        DLOCK__LOG(&c->log, DLOCK_LOG_INFO, "lock '%s' unlocked by force", name);
    return rc;
}

/* A query, then the forced release: two requests, so the answer can be
 * stale by the time the release runs (the header says which way). An
 * atomic answer would need each store's force_unlock to say what it
 * removed. */
int dlock_force_unlock2(dlock_client *c, const char *name, unsigned flags, int *was_held)
{
    dlock_status st;
    int held = -1, rc = DLOCK_OK;

    dlock__clear_error();
    if (c == NULL)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    if (c->store->caps & DLOCK_CAP_QUERY) {
        memset(&st, 0, sizeof st);
        rc = on_name(c, name, flags, &st);
        held = st.held != 0;
    }
    if (rc == DLOCK_OK)
        rc = on_name(c, name, flags, NULL);
    if (rc != DLOCK_OK)
        return rc;
    /* a free lock: nothing was unlocked, and a caller that says so (dlock
     * unlock: "NAME was free") would be told it twice at info */
    if (held == 0)
        DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "lock '%s' was not held: nothing to unlock by force",
                   name);
    else
        DLOCK__LOG(&c->log, DLOCK_LOG_INFO, "lock '%s' unlocked by force (%s)", name,
                   held == 1 ? "it was held" : "the store cannot say whether it was held");
    if (was_held != NULL)
        *was_held = held;
    return DLOCK_OK;
}

/* ---------------------------------------------------------------- who holds */

typedef struct holders_call {
    dlock_holder_fn fn;
    void *arg;
} holders_call;

static int one_holder(void *arg, const dlock__holder_raw *raw)
{
    holders_call *call = arg;
    char buf[512];
    dlock_holder h = {.owner = raw->owner, .count = raw->count};

    dlock__owner_info_read(raw->info, &h, buf, sizeof buf);
    call->fn(&h, call->arg);
    return 0;
}

int dlock_query_holders(dlock_client *c, const char *name, unsigned flags, dlock_holder_fn fn,
                        void *arg)
{
    dlock__store_lock *sl = NULL;
    holders_call call = {fn, arg};
    int rc;

    if (c != NULL && fn == NULL) {
        dlock__clear_error();
        return dlock__fail(DLOCK_EINVAL, "fn is NULL");
    }
    rc = lock_for_call(c, name, flags, DLOCK_CAP_QUERY, "dlock_query_holders", &sl);
    if (rc != DLOCK_OK)
        return rc;
    int64_t deadline = dlock__now_us() + c->cfg.command_timeout_ms * 1000;
    if (c->backend->holders != NULL)
        rc = c->backend->holders(c->store, sl, one_holder, &call, deadline);
    else /* a backend of interface version 1 */
        rc = dlock__fail(DLOCK_ENOTSUP, "%s: %s cannot name the holders of a lock", c->store->label,
                         dlock__client_kind(c));
    c->backend->lock_free(c->store, sl);
    return rc;
}

/* ---------------------------------------------------------------- listing */

typedef struct list_call {
    dlock_name_fn fn;
    void *arg;
    size_t limit, seen;
} list_call;

static int one_name(void *arg, const char *name, enum dlock__kind kind)
{
    list_call *call = arg;
    unsigned flags = kind == DLOCK__SEMAPHORE                      ? DLOCK_SEMAPHORE
                     : kind == DLOCK__READ || kind == DLOCK__WRITE ? DLOCK_WRITE
                                                                   : 0;

    /* A name the store holds that this library would refuse (written by
     * another program) is left out: every name reported can be queried. */
    if (dlock__check_name(name) != DLOCK_OK) {
        dlock__clear_error();
        return 0;
    }
    call->fn(name, flags, call->arg);
    call->seen++;
    return call->limit != 0 && call->seen >= call->limit;
}

int dlock_list(dlock_client *c, const char *prefix, size_t limit, dlock_name_fn fn, void *arg)
{
    list_call call = {fn, arg, limit, 0};
    int rc;

    dlock__clear_error();
    if (c == NULL || fn == NULL)
        return dlock__fail(DLOCK_EINVAL, "%s is NULL", c == NULL ? "client" : "fn");
    if (prefix == NULL)
        prefix = "";
    rc = dlock__client_require(c, DLOCK_CAP_LIST, "dlock_list");
    if (rc == DLOCK_OK && prefix[0] != '\0')
        rc = dlock__check_text(prefix, DLOCK_NAME_MAX, "prefix", "prefixes");
    if (rc != DLOCK_OK)
        return rc;
    /* A walk is many requests; each is bounded by the command timeout,
     * the whole by ten of them. */
    int64_t deadline = dlock__now_us() + c->cfg.command_timeout_ms * 10000;
    return c->backend->list(c->store, prefix, one_name, &call, deadline);
}
