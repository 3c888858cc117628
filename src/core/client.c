/* SPDX-License-Identifier: MIT */
/* client.c - opening a client from a URL, what its store can do, its log,
 * closing it. The backend is found by the URL's scheme
 * (backend/registry.c); the core reads the options every store shares and
 * the store the rest. */
#include "client.h"

#include "../base/clock.h"
#include "../base/error.h"
#include "../base/random.h"
#include "../base/url.h"
#include "owner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LEASE_MS        30000
#define DEFAULT_WAITER_LEASE_MS 6000
#define DEFAULT_TIMEOUT_MS      5000
/* As long as a hold with the default lease rides an outage. */
#define DEFAULT_UNREACHABLE_WAIT_MS 30000

static const char *const cap_names[] = {
    "fence",      "fixed-lease", "extend",       "adopt",   "force-unlock", "query",   "fair",
    "read-write", "semaphore",   "multi-atomic", "interop", "notify",       "session", "list",
};

const char *dlock_cap_name(unsigned cap)
{
    for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++) {
        if (cap == 1u << i)
            return cap_names[i];
    }
    return "";
}

unsigned dlock_client_caps(const dlock_client *c)
{
    return c != NULL ? c->store->caps : 0;
}

const char *dlock_client_store(const dlock_client *c)
{
    return c != NULL ? c->backend->name : "";
}

int dlock__client_reached(const dlock_client *c)
{
    const dlock__backend *b = c->backend;
    return b->version < 3 || b->reached == NULL || b->reached(c->store) > 0;
}

int dlock__client_wrong_store(const dlock_client *c)
{
    const dlock__backend *b = c->backend;
    return b->version >= 3 && b->reached != NULL && b->reached(c->store) < 0;
}

const char *dlock__client_kind(const dlock_client *c)
{
    return c->store->kind != NULL ? c->store->kind : c->backend->name;
}

int dlock__client_require(const dlock_client *c, unsigned caps, const char *what)
{
    unsigned missing = caps & ~c->store->caps;

    if (missing == 0)
        return DLOCK_OK;
    return dlock__fail(DLOCK_ENOTSUP, "%s: %s cannot do %s (capability \"%s\" is missing)",
                       c->store->label, dlock__client_kind(c), what,
                       dlock_cap_name(missing & -missing));
}

int dlock_client_set_log(dlock_client *c, int level, dlock_log_fn fn, void *arg)
{
    dlock__clear_error();
    if (c == NULL)
        return dlock__fail(DLOCK_EINVAL, "client is NULL");
    if (level < DLOCK_LOG_OFF || level > DLOCK_LOG_DEBUG)
        return dlock__fail(DLOCK_EINVAL, "log level %d: want DLOCK_LOG_OFF..DLOCK_LOG_DEBUG",
                           level);
    pthread_rwlock_wrlock(&c->log.mu);
    c->log.fn = level != DLOCK_LOG_OFF ? fn : NULL;
    c->log.arg = arg;
    atomic_store(&c->log.level, fn != NULL ? level : DLOCK_LOG_OFF);
    pthread_rwlock_unlock(&c->log.mu);
    DLOCK__LOG(&c->log, DLOCK_LOG_DEBUG, "%s: logging at level %s", c->store->label,
               dlock_log_level_name(level));
    return DLOCK_OK;
}

const char *dlock_log_level_name(int level)
{
    static const char *const names[] = {"off", "error", "warn", "info", "debug"};
    return level >= DLOCK_LOG_OFF && level <= DLOCK_LOG_DEBUG ? names[level] : "";
}

/* ---------------------------------------------------------------- open */

static int read_core_options(dlock__url *url, dlock__client_cfg *cfg, int *local_queue,
                             long *max_local)
{
    int rc = dlock__url_lease(url, "lease", DLOCK_LEASE_MIN_MS, &cfg->lease_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "timeout", 1, &cfg->command_timeout_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "waiter_lease", 100, &cfg->waiter_lease_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration_or_forever(url, "unreachable_wait", &cfg->unreachable_wait_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_int(url, "max_local_waiters", 0, 1000000000L, max_local);
    const char *lq = dlock__url_get(url, "local_queue");
    if (rc == DLOCK_OK && lq != NULL) {
        if (strcmp(lq, "on") == 0 || strcmp(lq, "1") == 0)
            *local_queue = 1;
        else if (strcmp(lq, "off") == 0 || strcmp(lq, "0") == 0)
            *local_queue = 0;
        else
            rc = dlock__fail(DLOCK_EINVAL, "option local_queue=%s: want on or off", lq);
    }
    if (rc == DLOCK_OK && *max_local > 0 && !*local_queue)
        rc = dlock__fail(DLOCK_EINVAL, "option max_local_waiters needs local_queue=on");
    if (rc == DLOCK_OK)
        rc = dlock__owner_info_make(dlock__url_get(url, "label"), cfg->owner_info,
                                    sizeof cfg->owner_info);
    return rc;
}

int dlock_client_open(const char *text, dlock_client **out)
{
    return dlock_client_open_with(text, NULL, out);
}

int dlock_client_open_with(const char *text, const char *options, dlock_client **out)
{
    dlock__url url;
    dlock_client *c = NULL;
    const dlock__backend *backend;
    int rc, local_queue = 0;
    long max_local = 0;

    dlock__clear_error();
    if (out == NULL)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    *out = NULL;
    rc = dlock__url_parse(text, &url);
    if (rc == DLOCK_EINVAL)
        return dlock__fail_context(rc, "bad URL");
    if (rc != DLOCK_OK)
        return rc;
    if (options != NULL && options[0] != '\0') {
        rc = dlock__url_add_options(&url, options);
        if (rc != DLOCK_OK) {
            dlock__url_clear(&url);
            return rc == DLOCK_EINVAL ? dlock__fail_context(rc, "bad options") : rc;
        }
    }
    backend = dlock__backend_find(url.scheme, url.text, &rc);
    if (backend == NULL)
        goto fail;

    c = calloc(1, sizeof *c);
    if (c == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto fail;
    }
    c->backend = backend;
    c->cfg.lease_ms = DEFAULT_LEASE_MS;
    c->cfg.waiter_lease_ms = DEFAULT_WAITER_LEASE_MS;
    c->cfg.command_timeout_ms = DEFAULT_TIMEOUT_MS;
    c->cfg.unreachable_wait_ms = DEFAULT_UNREACHABLE_WAIT_MS;
    rc = read_core_options(&url, &c->cfg, &local_queue, &max_local);
    for (size_t i = 0; i < url.noptions; i++)
        c->timeout_given |= strcmp(url.options[i].key, "timeout") == 0;
    if (rc == DLOCK_OK && local_queue)
        rc = dlock__lq_new((unsigned) max_local, &c->lq);
    if (rc != DLOCK_OK)
        goto fail;
    if (dlock__random_hex(c->cfg.client_id, 8) != 0) {
        rc = dlock__fail(DLOCK_ENOMEM, "getrandom: %s", strerror(errno));
        goto fail;
    }
    dlock__board_init(&c->board);
    dlock__log_init(&c->log);
    /* The renewer is the sessions' home: ready before the store opens. */
    dlock__renewer_init(&c->renewer, NULL, &c->cfg, &c->log);
    dlock__host host = {
        .cfg = &c->cfg, .board = &c->board, .sessions = &c->renewer, .log = &c->log};
    rc = backend->open(&url, &host, &c->store);
    if (rc == DLOCK_OK)
        rc = dlock__url_check_unused(&url);
    if (rc != DLOCK_OK) {
        dlock__renewer_stop(&c->renewer);
        if (c->store != NULL)
            backend->close(c->store, dlock__now_us() + c->cfg.command_timeout_ms * 1000);
        dlock__renewer_fini(&c->renewer);
        dlock__board_fini(&c->board);
        dlock__log_fini(&c->log);
        goto fail;
    }
    c->renewer.store = c->store;
    dlock__url_clear(&url);
    *out = c;
    return DLOCK_OK;

fail:
    if (c != NULL)
        dlock__lq_free(c->lq);
    free(c);
    dlock__url_clear(&url);
    return rc;
}

void dlock__client_check_lease(dlock_client *c, const char *name, int64_t lease_ms)
{
    /* a renewal is sent a third into the lease and waited for up to a
     * request timeout: one longer than a third leaves no time to retry
     * (longer than two thirds: it fails only once the lease is over) */
    int64_t timeout_ms = c->cfg.command_timeout_ms;
    if (timeout_ms * 3 <= lease_ms || atomic_load(&c->lease_warned) ||
        !dlock__log_on(&c->log, DLOCK_LOG_WARN) || atomic_exchange(&c->lease_warned, 1))
        return;
    long long third = lease_ms / 3 > 1 ? (long long) (lease_ms / 3) : 1;
    /* named as the user set it: a URL without timeout= has the default */
    char whose[80], fix[96];
    if (c->timeout_given) {
        snprintf(whose, sizeof whose, "%lld ms, the URL's timeout= option", (long long) timeout_ms);
        snprintf(fix, sizeof fix, "set the URL's timeout= to %lldms or less", third);
    } else {
        snprintf(whose, sizeof whose, "%lld ms: the default command timeout of %d s",
                 (long long) timeout_ms, DEFAULT_TIMEOUT_MS / 1000);
        snprintf(fix, sizeof fix, "add ?timeout=%lldms (or &timeout=%lldms) to the URL", third,
                 third);
    }
    dlock__log_emit(&c->log, DLOCK_LOG_WARN,
                    "lock '%s': the store request timeout (%s; not a wait's) is more than a third "
                    "of the lease (%lld ms): a renewal that gets no answer would fail too late to "
                    "be retried before the lease runs out; %s",
                    name, whose, (long long) lease_ms, fix);
}

void dlock_client_close(dlock_client *c)
{
    if (c == NULL)
        return;
    /* One command timeout in all: a renewal in flight, then the store's
     * goodbyes, share it. */
    int64_t deadline = dlock__now_us() + c->cfg.command_timeout_ms * 1000;
    /* Threads first: they call into the store, which may still end its
     * sessions on the renewer as it closes. */
    dlock__renewer_stop(&c->renewer);
    c->backend->close(c->store, deadline);
    dlock__renewer_fini(&c->renewer);
    dlock__board_fini(&c->board);
    dlock__lq_free(c->lq);
    dlock__log_fini(&c->log);
    free(c);
}
