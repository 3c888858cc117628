/* client.c - opening a client from a URL and closing it. */
#include "client.h"

#include "clock.h"
#include "error.h"
#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define DEFAULT_LEASE_MS        30000
#define DEFAULT_WAITER_LEASE_MS 6000
#define DEFAULT_TIMEOUT_MS      5000

static const struct {
    const char *scheme;
    const dlock__backend_ops *ops;
} backends[] = {
    {"redis", &dlock__redis_ops},
    {"redis+unix", &dlock__redis_ops},
};

int dlock__random_hex(char *buf, size_t n)
{
    unsigned char raw[64];
    static const char digits[] = "0123456789abcdef";
    size_t got = 0;

    if (n > sizeof raw)
        return -1;
    while (got < n) {
        ssize_t r = getrandom(raw + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        got += (size_t) r;
    }
    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = digits[raw[i] >> 4];
        buf[2 * i + 1] = digits[raw[i] & 15];
    }
    buf[2 * n] = '\0';
    return 0;
}

int dlock__check_name(const char *name)
{
    size_t len;

    if (name == NULL)
        return dlock__fail(DLOCK_EINVAL, "lock name is NULL");
    len = strlen(name);
    if (len == 0)
        return dlock__fail(DLOCK_EINVAL, "lock name is empty");
    if (len > DLOCK_NAME_MAX)
        return dlock__fail(DLOCK_EINVAL, "lock name is %zu bytes long; the limit is %d", len,
                           DLOCK_NAME_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) name[i];
        if (c < 0x20 || c == 0x7f)
            return dlock__fail(DLOCK_EINVAL,
                               "lock name contains a control character (byte %zu is 0x%02x)", i, c);
    }
    return DLOCK_OK;
}

static int read_core_options(dlock__url *url, dlock__client_cfg *cfg, int *local_queue,
                             long *max_local)
{
    int rc = dlock__url_duration(url, "lease", 10, &cfg->lease_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "timeout", 1, &cfg->command_timeout_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_duration(url, "waiter_lease", 100, &cfg->waiter_lease_ms);
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
    return rc;
}

int dlock_client_open(const char *text, dlock_client **out)
{
    dlock__url url;
    dlock_client *c = NULL;
    int rc;

    dlock__clear_error();
    if (out == NULL)
        return dlock__fail(DLOCK_EINVAL, "out is NULL");
    *out = NULL;
    rc = dlock__url_parse(text, &url);
    if (rc == DLOCK_EINVAL) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", dlock_errmsg());
        return dlock__fail(rc, "bad URL: %s", detail);
    }
    if (rc != DLOCK_OK)
        return rc;

    c = calloc(1, sizeof *c);
    if (c == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        if (strcmp(url.scheme, backends[i].scheme) == 0)
            c->ops = backends[i].ops;
    }
    if (c->ops == NULL) {
        if (strcmp(url.scheme, "rediss") == 0)
            rc = dlock__fail(DLOCK_ENOTSUP,
                             "%s: TLS (rediss://) needs hiredis >= 1.0 built with SSL; this "
                             "build has hiredis without TLS",
                             url.text);
        else
            rc = dlock__fail(DLOCK_EINVAL,
                             "%s: unknown scheme '%s' (supported: redis://, "
                             "redis+unix://)",
                             url.text, url.scheme);
        goto fail;
    }
    c->cfg.lease_ms = DEFAULT_LEASE_MS;
    c->cfg.waiter_lease_ms = DEFAULT_WAITER_LEASE_MS;
    c->cfg.command_timeout_ms = DEFAULT_TIMEOUT_MS;
    int local_queue = 0;
    long max_local = 0;
    rc = read_core_options(&url, &c->cfg, &local_queue, &max_local);
    if (rc == DLOCK_OK && local_queue)
        rc = dlock__lq_new((unsigned) max_local, &c->lq);
    if (rc != DLOCK_OK)
        goto fail;
    if (dlock__random_hex(c->cfg.client_id, 8) != 0) {
        rc = dlock__fail(DLOCK_ENOMEM, "getrandom: %s", strerror(errno));
        goto fail;
    }
    dlock__board_init(&c->board);
    rc = c->ops->open(&url, &c->cfg, &c->board, &c->be);
    if (rc == DLOCK_OK)
        rc = dlock__url_check_unused(&url);
    if (rc != DLOCK_OK) {
        if (c->be != NULL)
            c->ops->close(c->be);
        dlock__board_fini(&c->board);
        goto fail;
    }
    dlock__renewer_init(&c->renewer, c->ops, c->be, &c->board, &c->cfg);
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

void dlock_client_close(dlock_client *c)
{
    if (c == NULL)
        return;
    dlock__renewer_fini(&c->renewer);
    c->ops->close(c->be);
    dlock__board_fini(&c->board);
    dlock__lq_free(c->lq);
    free(c);
}
