/* SPDX-License-Identifier: MIT */
/* basic.c - the plain lock on every store: a client's lifecycle, bad URLs,
 * an unreachable server, acquire / try / release, exclusion, re-entry,
 * waiting (timed out, woken, cancelled), fences, operators' calls, and the
 * refusal of what a store cannot do. */
#define _GNU_SOURCE
#include "conformance.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- clients */

/* A log callback counting the error lines, and printing them. */
static void count_errors(int level, const char *msg, void *arg)
{
    if (level == DLOCK_LOG_ERROR) {
        fprintf(stderr, "logged as an error: %s\n", msg);
        atomic_fetch_add((atomic_int *) arg, 1);
    }
}

void ct_open_close(void)
{
    dlock_client *c = (dlock_client *) &c;

    CHECK_RC(dlock_client_open(ct_url(""), NULL), DLOCK_EINVAL);
    CHECK_RC(dlock_client_open(ct_url(""), &c), DLOCK_OK);
    CHECK(c != NULL);
    CHECK_INT(dlock_client_caps(c), ==, ct->caps);
    CHECK(strcmp(dlock_client_store(c), ct->store_name) == 0 && ct->store_name[0] != '\0');
    /* every capability the store declares is one the header names */
    for (unsigned bit = 1; bit != 0; bit <<= 1) {
        if (ct->caps & bit)
            CHECK(dlock_cap_name(bit)[0] != '\0');
    }
    CHECK(strcmp(dlock_cap_name(DLOCK_CAP_FENCE | DLOCK_CAP_QUERY), "") == 0);

    /* a handle sends nothing until used */
    dlock_lock *l = ct_lock(c, CT_NAME("a"), 0);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK_INT(dlock_lock_fence(l), ==, 0);
    CHECK_INT(dlock_lock_remaining_ms(l), ==, 0);
    CHECK_INT(strlen(dlock_lock_token(l)), ==, 32);
    CHECK(strcmp(dlock_lock_name(l), CT_NAME("a")) == 0);
    CHECK_INT(dlock_lock_members(l), ==, 1);
    CHECK_RC(dlock_lock_check(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* open, use and close again and again: nothing is left behind that
     * keeps the next client from the lock, and nothing is logged as an
     * error (closing a client ends its session: an end, not a failure) */
    atomic_int errors = 0;
    for (int i = 0; i < 5; i++) {
        c = ct_client("");
        CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_DEBUG, count_errors, &errors), DLOCK_OK);
        l = ct_lock(c, CT_NAME("cycle"), 0);
        CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
        CHECK_RC(dlock_release(l), DLOCK_OK);
        dlock_lock_free(l);
        dlock_client_close(c);
    }
    CHECK_INT(atomic_load(&errors), ==, 0);
    /* freeing a handle that holds its lock releases it */
    c = ct_client("");
    dlock_client *other = ct_client("");
    l = ct_lock(c, CT_NAME("freed"), 0);
    dlock_lock *m = ct_lock(other, CT_NAME("freed"), 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_EBUSY);
    dlock_lock_free(l);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_client_close(c);
    dlock_client_close(other);

    dlock_client_close(NULL);
    dlock_lock_free(NULL);
    dlock_lock_detach(NULL);
}

static void expect_bad_url(const char *url, const char *words)
{
    dlock_client *c = (dlock_client *) &c;
    int rc = dlock_client_open(url, &c);
    if (rc != DLOCK_EINVAL || c != NULL || strstr(dlock_errmsg(), words) == NULL)
        dt_fail(__FILE__, __LINE__, "open %s: got %d (%s: %s), want EINVAL naming '%s'", url, rc,
                dlock_strerror(rc), dlock_errmsg(), words);
}

void ct_bad_url_options(void)
{
    expect_bad_url(ct_url("?no_such_option=1"), "no_such_option");
    expect_bad_url(ct_url("?lease=abc"), "lease");
    expect_bad_url(ct_url("?lease=-1s"), "lease");
    expect_bad_url(ct_url("?lease=19ms"), "lease"); /* below DLOCK_LEASE_MIN_MS */
    expect_bad_url(ct_url("?unreachable_wait=soon"), "unreachable_wait");
    expect_bad_url(ct_url("?timeout=soon"), "timeout");
    expect_bad_url(ct_url("?connect_timeout=1y"), "connect_timeout");
    expect_bad_url(ct_url("?waiter_lease=x"), "waiter_lease");
    expect_bad_url(ct_url("?local_queue=maybe"), "local_queue");
    expect_bad_url(ct_url("?max_local_waiters=3"), "local_queue");
    expect_bad_url(ct_url("?lease=1s&bogus"), "bogus");

    /* the same store with a port that cannot be */
    char url[256];
    snprintf(url, sizeof url, "%.*s://127.0.0.1:99999",
             (int) (strstr(ct->srv.url, "://") - ct->srv.url), ct->srv.url);
    expect_bad_url(url, "99999");

    /* and options every store shares are taken by every store */
    dlock_client *c = ct_client("?lease=2s&timeout=3s&connect_timeout=1s&waiter_lease=2s"
                                "&local_queue=on&max_local_waiters=8&unreachable_wait=forever");
    dlock_lock *l = ct_lock(c, CT_NAME("good"), 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK(dlock_lock_remaining_ms(l) <= 2000);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- unreachable */

void ct_unreachable_server(void)
{
    enum { CONNECT_MS = 500, TIMEOUT_MS = 1000, SLACK_MS = 1500 };
    const char *options = "?connect_timeout=500ms&timeout=1s";
    char base[256], where[64];
    dt_proxy proxy;
    dlock_status st;

    /* the proxy first: this process has no threads yet */
    dt_proxy_start(&proxy, ct->srv.port, 1);
    dt_proxy_set(&proxy, 0, DT_BLACKHOLE);

    /* nobody listens on the port */
    int port = dt_free_port();
    dt_server_url_at(&ct->srv, port, base, sizeof base);
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    dlock_client *c = ct_client_at(port, options);
    dlock_lock *l = ct_lock(c, CT_NAME("x"), 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <=, CONNECT_MS + TIMEOUT_MS + SLACK_MS);
    if (strstr(dlock_errmsg(), where) == NULL)
        dt_fail(__FILE__, __LINE__, "message does not name %s: %s", where, dlock_errmsg());
    /* a wait tries it within its budget (a store never reached: for a
     * moment only), then says why */
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 1000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <=, 1000 + TIMEOUT_MS + SLACK_MS);
    if (ct_has(DLOCK_CAP_QUERY))
        CHECK_RC(dlock_query(c, CT_NAME("x"), 0, &st), DLOCK_EUNREACHABLE);
    if (ct_has(DLOCK_CAP_FORCE_UNLOCK))
        CHECK_RC(dlock_force_unlock(c, CT_NAME("x"), 0), DLOCK_EUNREACHABLE);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK_RC(dlock_release(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* a server that accepts the connection and never answers */
    c = ct_client_at(proxy.ports[0], options);
    l = ct_lock(c, CT_NAME("x"), 0);
    t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <=, CONNECT_MS + TIMEOUT_MS + SLACK_MS);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 1000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <=, 1000 + CONNECT_MS + TIMEOUT_MS + SLACK_MS);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    /* and once the path heals, the same client works */
    dt_proxy_set(&proxy, 0, DT_PASS);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_proxy_stop(&proxy);
}

/* ---------------------------------------------------------------- taking */

void ct_acquire_release(void)
{
    dlock_client *c = ct_client("");
    const char *name = CT_NAME("job");
    dlock_lock *a = ct_lock(c, name, 0), *b = ct_lock(c, name, 0);

    CHECK_RC(dlock_try_acquire(a), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 1);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK(dlock_lock_fence(a) > 0);
    CHECK_RC(dlock_lock_check(a), DLOCK_OK);
    CHECK(dlock_lock_remaining_ms(a) > 0);
    /* another handle of the same client is another owner */
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
    CHECK(dlock_errmsg()[0] != '\0');
    CHECK_INT(dlock_lock_holds(b), ==, 0);
    CHECK_RC(dlock_acquire(b, 0), DLOCK_EBUSY);

    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 0);
    CHECK_INT(dlock_lock_remaining_ms(a), ==, 0);
    CHECK_RC(dlock_lock_check(a), DLOCK_ENOTOWNER);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    /* a free lock is taken at once by a wait of any length */
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(a, DLOCK_WAIT_FOREVER), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_acquire(a, 10000), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    /* bad waits */
    CHECK_RC(dlock_acquire(a, -5), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire(a, DLOCK_DURATION_MAX_MS + 1), DLOCK_EINVAL);
    CHECK_INT(dlock_lock_holds(a), ==, 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
}

void ct_second_client_excluded(void)
{
    dlock_client *c1 = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("one");
    dlock_lock *a = ct_lock(c1, name, 0), *b = ct_lock(c2, name, 0);
    dlock_lock *other = ct_lock(c2, CT_NAME("two"), 0);

    CHECK_RC(dlock_try_acquire(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(b, 300), DLOCK_ETIMEDOUT);
    /* only that name: another is free */
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(a), DLOCK_EBUSY);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(other);
    dlock_client_close(c1);
    dlock_client_close(c2);
}

void ct_reentry(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("re");
    dlock_lock *a = ct_lock(c, name, 0), *b = ct_lock(c2, name, 0);

    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(a);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(a, 1000), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 3);
    CHECK_INT(dlock_lock_fence(a), ==, fence); /* re-entry mints no fence */
    if (ct_has(DLOCK_CAP_QUERY)) {
        dlock_status st = ct_query(c2, name, 0);
        CHECK_INT(st.holds, ==, 1); /* counts are the handle's */
        CT_CHECK_OWNER(st.owner, a);
    }
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 1);
    CHECK_RC(dlock_lock_check(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_ENOTOWNER);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    dlock_client_close(c2);
}

void ct_release_not_held(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("mine");
    dlock_lock *a = ct_lock(c, name, 0), *b = ct_lock(c, name, 0), *d = ct_lock(c2, name, 0);

    CHECK_RC(dlock_release(b), DLOCK_ENOTOWNER); /* never held, lock free */
    CHECK_RC(dlock_try_acquire(a), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_ENOTOWNER); /* held by a handle of the same client */
    CHECK(dlock_errmsg()[0] != '\0');
    CHECK_RC(dlock_release(d), DLOCK_ENOTOWNER); /* and of another client */
    /* nothing changed: a still holds it */
    CHECK_RC(dlock_lock_check(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(d), DLOCK_EBUSY);
    if (ct_has(DLOCK_CAP_QUERY))
        CT_CHECK_OWNER(ct_query(c2, name, 0).owner, a);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_ENOTOWNER); /* twice */
    CHECK_RC(dlock_try_acquire(d), DLOCK_OK);
    CHECK_RC(dlock_release(d), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(d);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- waiting */

/* Counts the info lines saying that a wait has begun. */
static void count_waiting(int level, const char *msg, void *arg)
{
    if (level == DLOCK_LOG_INFO && strstr(msg, "is held by someone else: waiting") != NULL)
        atomic_fetch_add((atomic_int *) arg, 1);
}

void ct_wait_timeout(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("busy");
    dlock_lock *a = ct_lock(c, name, 0), *b = ct_lock(c2, name, 0);
    atomic_int said = 0;

    CHECK_RC(dlock_client_set_log(c2, DLOCK_LOG_INFO, count_waiting, &said), DLOCK_OK);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(b, 300), DLOCK_ETIMEDOUT);
    int64_t took = dt_now_ms() - t0;
    CHECK_INT(took, >=, 290);
    CHECK_INT(took, <, 300 + 2000);
    CHECK(dlock_errmsg()[0] != '\0');
    /* the wait was told as it began (dlock -v), once, also by a store that
     * blocks in the server for the whole of it */
    CHECK_INT(atomic_load(&said), ==, 1);
    CHECK_RC(dlock_client_set_log(c2, DLOCK_LOG_OFF, NULL, NULL), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(b), ==, 0);
    /* the waiter that gave up left the queue */
    CHECK_INT(ct_waiters(c, name, 0), ==, 0);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    /* ...and the lock was not handed to it */
    CHECK_INT(ct_query(c, name, 0).held, ==, 0);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    dlock_client_close(c2);
}

void ct_wake_on_release(void)
{
    enum { PROMPT_MS = 1500 }; /* the holder's lease is 30 s: only a notice is this fast */
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("wake");
    dlock_lock *a = ct_lock(c, name, 0), *b = ct_lock(c2, name, 0), *d = ct_lock(c2, name, 0);
    ct_waiter w, w2;

    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    ct_wait_start(&w, b, DLOCK_WAIT_FOREVER);
    DT_WAIT_UNTIL(ct_waiters(c, name, 0) == 1, 5000);
    ct_wait_start(&w2, d, 20000);
    DT_WAIT_UNTIL(ct_waiters(c, name, 0) == 2, 5000);
    CHECK(!CT_DONE(&w) && !CT_DONE(&w2));
    CHECK_RC(dlock_release(a), DLOCK_OK);
    DT_WAIT_UNTIL(CT_DONE(&w) || CT_DONE(&w2), PROMPT_MS);
    ct_waiter *first = CT_DONE(&w) ? &w : &w2, *second = first == &w ? &w2 : &w;
    CHECK_RC(first->rc, DLOCK_OK);
    CHECK(!CT_DONE(second)); /* one wake-up, one holder */
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(first->lock), >, dlock_lock_fence(a));
    CT_CHECK_OWNER(ct_query(c, name, 0).owner, first->lock);
    CHECK_INT(ct_waiters(c, name, 0), ==, 1);
    /* and the next release wakes the next one as promptly */
    CHECK_RC(dlock_release(first->lock), DLOCK_OK);
    DT_WAIT_UNTIL(CT_DONE(second), PROMPT_MS);
    CHECK_RC(second->rc, DLOCK_OK);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(second->lock), >, dlock_lock_fence(first->lock));
    CHECK_INT(ct_waiters(c, name, 0), ==, 0);
    CHECK_RC(dlock_release(second->lock), DLOCK_OK);
    ct_wait_join(&w);
    ct_wait_join(&w2);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(d);
    dlock_client_close(c);
    dlock_client_close(c2);
}

void ct_cancel_from_thread(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("cancel");
    dlock_lock *a = ct_lock(c, name, 0), *b = ct_lock(c2, name, 0);
    ct_waiter w;

    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    ct_wait_start(&w, b, 30000);
    DT_WAIT_UNTIL(ct_waiters(c, name, 0) == 1, 5000);
    CHECK_RC(dlock_cancel(b), DLOCK_OK);
    DT_WAIT_UNTIL(CT_DONE(&w), 2000);
    CHECK_RC(ct_wait_join(&w), DLOCK_ECANCELED);
    CHECK_INT(dlock_lock_holds(b), ==, 0);
    CHECK_INT(ct_waiters(c, name, 0), ==, 0); /* it left the queue */
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_INT(ct_query(c, name, 0).held, ==, 0); /* not handed to it */

    /* a cancel with no wait in progress ends the next one */
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    CHECK_RC(dlock_cancel(b), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(b, 5000), DLOCK_ECANCELED);
    CHECK_INT(dt_now_ms() - t0, <, 1000);
    /* ...and only that one */
    CHECK_RC(dlock_acquire(b, 0), DLOCK_EBUSY);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_acquire(b, 1000), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    CHECK_RC(dlock_cancel(NULL), DLOCK_EINVAL);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- fences */

void ct_fences_increase(void)
{
    dlock_client *c1 = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("fenced");
    dlock_lock *h[3] = {ct_lock(c1, name, 0), ct_lock(c2, name, 0), ct_lock(c1, name, 0)};
    uint64_t last = 0;
    ct_waiter w;

    /* holder after holder, across handles and clients */
    for (int i = 0; i < 15; i++) {
        dlock_lock *l = h[i % 3];
        CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
        CHECK_INT(dlock_lock_fence(l), >, last);
        last = dlock_lock_fence(l);
        CHECK_RC(dlock_release(l), DLOCK_OK);
        CHECK_INT(dlock_lock_fence(l), ==, last); /* the last acquisition's, after release */
    }
    /* a hand-over to a waiter of another client */
    CHECK_RC(dlock_acquire(h[0], 0), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(h[0]), >, last);
    ct_wait_start(&w, h[1], 10000);
    if (ct_has(DLOCK_CAP_QUERY))
        DT_WAIT_UNTIL(ct_waiters(c1, name, 0) == 1, 5000);
    CHECK_RC(dlock_release(h[0]), DLOCK_OK);
    CHECK_RC(ct_wait_join(&w), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(h[1]), >, dlock_lock_fence(h[0]));
    last = dlock_lock_fence(h[1]);
    if (ct_has(DLOCK_CAP_QUERY))
        CHECK_INT(ct_query(c1, name, 0).last_fence, >=, last);
    CHECK_RC(dlock_release(h[1]), DLOCK_OK);
    /* names have fences of their own, but never 0 */
    dlock_lock *other = ct_lock(c1, CT_NAME("other"), 0);
    CHECK_RC(dlock_acquire(other, 0), DLOCK_OK);
    CHECK(dlock_lock_fence(other) > 0);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    dlock_lock_free(other);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(h[i]);
    dlock_client_close(c1);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- operators */

void ct_query_state(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("q");
    dlock_lock *a = ct_lock(c, name, 0), *b1 = ct_lock(c2, name, 0), *b2 = ct_lock(c2, name, 0);
    ct_waiter w1, w2;
    dlock_status st;

    st = ct_query(c, name, 0);
    CHECK_INT(st.held, ==, 0);
    CHECK(st.owner[0] == '\0');
    CHECK_INT(st.waiters, ==, 0);
    CHECK_INT(st.lease_ms, ==, -1);

    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    st = ct_query(c2, name, 0);
    CHECK_INT(st.held, ==, 1);
    CT_CHECK_OWNER(st.owner, a);
    CHECK_INT(st.holds, ==, 1);
    CHECK_INT(st.waiters, ==, 0);
    CHECK(st.lease_ms == -1 || st.lease_ms > 0);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(st.last_fence, >=, dlock_lock_fence(a));

    ct_wait_start(&w1, b1, 20000);
    ct_wait_start(&w2, b2, 20000);
    DT_WAIT_UNTIL(ct_waiters(c, name, 0) == 2, 5000);
    CT_CHECK_OWNER(ct_query(c, name, 0).owner, a);
    CHECK_RC(dlock_cancel(b1), DLOCK_OK);
    CHECK_RC(ct_wait_join(&w1), DLOCK_ECANCELED);
    CHECK_INT(ct_waiters(c, name, 0), ==, 1);
    CHECK_RC(dlock_cancel(b2), DLOCK_OK);
    CHECK_RC(ct_wait_join(&w2), DLOCK_ECANCELED);
    CHECK_INT(ct_waiters(c, name, 0), ==, 0);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    st = ct_query(c, name, 0);
    CHECK_INT(st.held, ==, 0);
    CHECK(st.owner[0] == '\0');
    /* bad calls */
    CHECK_RC(dlock_query(c, "", 0, &st), DLOCK_EINVAL);
    CHECK_RC(dlock_query(NULL, name, 0, &st), DLOCK_EINVAL);
    CHECK_RC(dlock_query(c, name, 0x4000, &st), DLOCK_EINVAL);
    dlock_lock_free(a);
    dlock_lock_free(b1);
    dlock_lock_free(b2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

void ct_force_unlock(void)
{
    dlock_client *c = ct_client("?lease=1s"), *op = ct_client("");
    const char *name = CT_NAME("stuck");
    dlock_lock *a = ct_lock(c, name, 0), *b = ct_lock(op, name, 0);
    ct_loss loss = {0};
    ct_waiter w;

    CHECK_RC(dlock_force_unlock(op, name, 0), DLOCK_OK); /* free: nothing to do */
    dlock_lock_on_lost(a, ct_on_lost, &loss);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    ct_wait_start(&w, b, 10000);
    DT_WAIT_UNTIL(ct_waiters(op, name, 0) == 1, 5000);
    CHECK_RC(dlock_force_unlock(op, name, 0), DLOCK_OK);
    /* handed to the waiter */
    DT_WAIT_UNTIL(CT_DONE(&w), 3000);
    CHECK_RC(ct_wait_join(&w), DLOCK_OK);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(b), >, dlock_lock_fence(a));
    CT_CHECK_OWNER(ct_query(op, name, 0).owner, b);
    /* the holder learns of it at its next renewal (every lease/3) */
    DT_WAIT_UNTIL(atomic_load(&loss.calls) == 1, 3000);
    CHECK_RC(loss.code, DLOCK_ELOST);
    CHECK_RC(dlock_lock_check(a), DLOCK_ELOST);
    CHECK_RC(dlock_release(a), DLOCK_ELOST);
    CHECK_RC(dlock_release(a), DLOCK_ENOTOWNER); /* reported once */
    CHECK_RC(dlock_release(b), DLOCK_OK);
    CHECK_RC(dlock_force_unlock(op, "", 0), DLOCK_EINVAL);
    CHECK_INT(atomic_load(&loss.calls), ==, 1);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    dlock_client_close(op);
}

/* ---------------------------------------------------------------- capabilities */

/* Each call a capability guards: DLOCK_ENOTSUP with a message naming the
 * store and the capability when the store lacks it, and never when it has
 * it. The capabilities without a call of their own (fence, multi-atomic,
 * notify, session) are properties: tests that rely on them declare them. */
void ct_refuses_what_it_lacks(void)
{
    dlock_client *c = ct_client("");
    dlock_lock *held = ct_lock(c, CT_NAME("held"), 0), *l = NULL;
    dlock_status st;
    int refused = 0, served = 0;
    char list[512] = "";

    CHECK_RC(dlock_acquire(held, 0), DLOCK_OK);
    for (unsigned cap = 1; cap <= DLOCK_CAP_LIST; cap <<= 1) {
        int rc;
        l = NULL;
        switch (cap) {
        case DLOCK_CAP_FIXED_LEASE:
            l = ct_lock(c, CT_NAME("fixed"), 0);
            rc = dlock_acquire_for(l, 0, 5000);
            break;
        case DLOCK_CAP_EXTEND:
            rc = dlock_extend(held, 30000);
            break;
        case DLOCK_CAP_ADOPT:
            rc = dlock_lock_adopt(c, CT_NAME("held"), "0123456789abcdef0123456789abcdef", 0, &l);
            CHECK(rc == DLOCK_OK || l == NULL);
            break;
        case DLOCK_CAP_FORCE_UNLOCK:
            rc = dlock_force_unlock(c, CT_NAME("free"), 0);
            break;
        case DLOCK_CAP_QUERY:
            rc = dlock_query(c, CT_NAME("free"), 0, &st);
            break;
        case DLOCK_CAP_FAIR:
            rc = dlock_lock_open(c, CT_NAME("fair"), DLOCK_FAIR, &l);
            break;
        case DLOCK_CAP_READ_WRITE:
            rc = dlock_lock_open(c, CT_NAME("rw"), DLOCK_READ, &l);
            if (rc == DLOCK_OK) {
                dlock_lock_free(l);
                l = NULL;
            }
            if (rc == DLOCK_ENOTSUP)
                CHECK_RC(dlock_lock_open(c, CT_NAME("rw"), DLOCK_WRITE, &l), DLOCK_ENOTSUP);
            else
                rc = dlock_lock_open(c, CT_NAME("rw"), DLOCK_WRITE, &l);
            break;
        case DLOCK_CAP_SEMAPHORE:
            rc = dlock_semaphore_open(c, CT_NAME("sem"), 3, 1, &l);
            if (rc == DLOCK_ENOTSUP && ct_has(DLOCK_CAP_QUERY))
                CHECK_RC(dlock_query(c, CT_NAME("sem"), DLOCK_SEMAPHORE, &st), DLOCK_ENOTSUP);
            break;
        case DLOCK_CAP_INTEROP:
            rc = dlock_lock_open(c, CT_NAME("simple"), DLOCK_SIMPLE, &l);
            break;
        case DLOCK_CAP_LIST:
            rc = dlock_list(c, CT_NAME(""), 0, ct_ignore_name, NULL);
            break;
        default:
            continue; /* a property, not a call */
        }
        if (ct_has(cap)) {
            if (rc == DLOCK_ENOTSUP)
                dt_fail(__FILE__, __LINE__, "%s declares %s but refused it: %s", ct->store_name,
                        dlock_cap_name(cap), dlock_errmsg());
            served++;
        } else {
            if (rc != DLOCK_ENOTSUP)
                dt_fail(__FILE__, __LINE__, "%s lacks %s: got %d (%s: %s), want DLOCK_ENOTSUP",
                        ct->store_name, dlock_cap_name(cap), rc, dlock_strerror(rc),
                        dlock_errmsg());
            char quoted[64];
            snprintf(quoted, sizeof quoted, "\"%s\"", dlock_cap_name(cap));
            if (strstr(dlock_errmsg(), quoted) == NULL ||
                strstr(dlock_errmsg(), ct->store_name) == NULL)
                dt_fail(__FILE__, __LINE__, "refusal of %s does not name it and %s: %s",
                        dlock_cap_name(cap), ct->store_name, dlock_errmsg());
            if (cap != DLOCK_CAP_FIXED_LEASE)
                CHECK(l == NULL); /* an open that failed made no handle */
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                     dlock_cap_name(cap));
            refused++;
        }
        if (l != NULL && dlock_lock_holds(l) > 0)
            CHECK_RC(dlock_release(l), DLOCK_OK);
        dlock_lock_free(l);
    }
    /* a fair multi-lock needs the fair lock too */
    const char *names[] = {CT_NAME("m1"), CT_NAME("m2")};
    l = NULL;
    int rc = dlock_multi_open(c, names, 2, DLOCK_FAIR, &l);
    CHECK_RC(rc, ct_has(DLOCK_CAP_FAIR) ? DLOCK_OK : DLOCK_ENOTSUP);
    dlock_lock_free(l);
    printf("%s: %d guarded calls served, %d refused%s%s\n", ct->store_name, served, refused,
           refused ? ": " : "", list);
    CHECK_INT(served + refused, ==, 10);
    CHECK_RC(dlock_release(held), DLOCK_OK);
    dlock_lock_free(held);
    dlock_client_close(c);
}
