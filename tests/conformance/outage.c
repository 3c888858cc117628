/* SPDX-License-Identifier: MIT */
/* outage.c - never hang, never flood: waits on a store that cannot be
 * reached, that stops answering, or whose answers come too late.
 *
 * A store never reached since the client opened (nobody listens on the
 * port; a name that does not resolve) is reported within seconds, even to a
 * wait without a budget and to `dlock run` without -w; an outage during a
 * wait is ridden through for the client's unreachable_wait and no longer
 * (for ever when asked); and a wait that cannot succeed sends a few
 * requests a second, not a loop of them. The requests are counted by the
 * proxy between the waiting client and the store: every store's requests
 * alike. */
#define _GNU_SOURCE
#include "conformance.h"

#include <string.h>

/* How soon a store never reached is reported: the core tries it for 1 s
 * (acquire.c), and each try here ends within connect_timeout. */
enum { NEVER_REACHED_MS = 1000, NEVER_SLACK_MS = 2500 };

/* A few requests a second at most, where a retry loop without a floor sends
 * hundreds: the proxy counts reads of the client's sockets, about one per
 * request. */
enum { MAX_REQUESTS_PER_S = 20 };

/* A copy of url with 127.0.0.1 replaced by host (static storage). */
static const char *with_host(const char *url, const char *host)
{
    static char buf[512];
    const char *at = strstr(url, "127.0.0.1");
    CHECK(at != NULL);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int) (at - url), url, host, at + strlen("127.0.0.1"));
    return buf;
}

static int contains_any(const char *text, const char *a, const char *b)
{
    return strcasestr(text, a) != NULL || (b != NULL && strcasestr(text, b) != NULL);
}

/* A wait without a budget, and `dlock run` without -w, on url: both end
 * with EUNREACHABLE (exit 69) within seconds, naming `where` and a cause
 * (one of cause_a, cause_b). */
static void never_reached_at(const char *url, const char *where, const char *cause_a,
                             const char *cause_b)
{
    dlock_client *c = NULL;
    ct_waiter w;

    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    dlock_lock *l = ct_lock(c, CT_NAME("x"), 0);
    ct_wait_start(&w, l, DLOCK_WAIT_FOREVER);
    DT_WAIT_UNTIL(CT_DONE(&w), NEVER_REACHED_MS + 1000 + NEVER_SLACK_MS);
    CHECK_RC(ct_wait_join(&w), DLOCK_EUNREACHABLE);
    const char *msg = w.errmsg;
    printf("%s: a wait without a budget on %s ended after %lld ms: %s\n", ct->kind, where,
           (long long) (w.ended_ms - w.started_ms), msg);
    if (strstr(msg, where) == NULL || !contains_any(msg, cause_a, cause_b))
        dt_fail(__FILE__, __LINE__, "the message does not name %s and its cause (%s): %s", where,
                cause_a, msg);
    CHECK(strstr(msg, "never reached") != NULL);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* dlock run without -w: the same, as exit 69 */
    const char *argv[] = {dt_bin("dlock"), "run", "-q",   "-u", url,
                          CT_NAME("x"),    "--",  "true", NULL};
    int64_t t0 = dt_now_ms();
    CHECK_INT(ct_run_program(argv, NEVER_REACHED_MS + 1000 + NEVER_SLACK_MS), ==, 69);
    printf("%s: dlock run without -w on %s exited 69 after %lld ms\n", ct->kind, where,
           (long long) (dt_now_ms() - t0));
}

void ct_never_reached(void)
{
    char base[256], where[64], url[512];
    int port = dt_free_port(); /* nobody listens there */

    dt_server_url_at(&ct->srv, port, base, sizeof base);
    /* (the TLS store's URL has options of its own) */
    snprintf(url, sizeof url, "%s%cconnect_timeout=1s&timeout=1s", base,
             strchr(base, '?') != NULL ? '&' : '?');
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    never_reached_at(url, where, "refused", NULL);

    snprintf(where, sizeof where, "no-such-host.invalid");
    never_reached_at(with_host(url, where), where, "resol", "not known");
}

/* ---------------------------------------------------------------- outages */

enum { OUTAGE_BOUND_MS = 2000, OUTAGE_SLACK_MS = 3000 };

/* Waiters cut off from the store while they wait behind a holder: an
 * outage shorter than unreachable_wait is ridden through, a longer (and
 * silent) one ends the wait with EUNREACHABLE about unreachable_wait after
 * the waiter found the store gone (within a renewal period and a request
 * of the cut), and unreachable_wait=forever goes on waiting until
 * cancelled. */
void ct_outage_bounded(void)
{
    /* heartbeats and session renewals every third of a second, so that a
     * parked waiter hears of the outage soon */
    const char *bounded = "?unreachable_wait=2s&lease=1s&waiter_lease=1s&timeout=500ms"
                          "&connect_timeout=500ms";
    const char *forever = "?unreachable_wait=forever&lease=1s&waiter_lease=1s&timeout=500ms"
                          "&connect_timeout=500ms";
    const char *name = CT_NAME("out");
    dt_proxy proxy;
    ct_waiter w1, w2, w3;

    dt_proxy_start(&proxy, ct->srv.port, 3); /* before any client's threads */
    dlock_client *holder = ct_client("");
    dlock_client *c1 = ct_client_at(proxy.ports[0], bounded);
    dlock_client *c2 = ct_client_at(proxy.ports[1], bounded);
    dlock_client *c3 = ct_client_at(proxy.ports[2], forever);
    dlock_lock *h = ct_lock(holder, name, 0);
    dlock_lock *l1 = ct_lock(c1, name, 0), *l2 = ct_lock(c2, name, 0), *l3 = ct_lock(c3, name, 0);

    /* a short outage: ridden through, the lock comes after it */
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    ct_wait_start(&w1, l1, DLOCK_WAIT_FOREVER);
    if (ct_has(DLOCK_CAP_QUERY))
        DT_WAIT_UNTIL(ct_waiters(holder, name, 0) == 1, 5000);
    dt_proxy_set(&proxy, 0, DT_CUT);
    dt_sleep_ms(OUTAGE_BOUND_MS / 2); /* the fault: half the bound */
    dt_proxy_set(&proxy, 0, DT_PASS);
    CHECK(!CT_DONE(&w1));
    CHECK_RC(dlock_release(h), DLOCK_OK);
    DT_WAIT_UNTIL(CT_DONE(&w1), 10000);
    CHECK_RC(ct_wait_join(&w1), DLOCK_OK);
    CHECK_RC(dlock_release(l1), DLOCK_OK);

    /* a long one: the bounded wait ends, the other goes on */
    CHECK_RC(dlock_acquire(h, 5000), DLOCK_OK);
    ct_wait_start(&w2, l2, DLOCK_WAIT_FOREVER);
    ct_wait_start(&w3, l3, DLOCK_WAIT_FOREVER);
    if (ct_has(DLOCK_CAP_QUERY))
        DT_WAIT_UNTIL(ct_waiters(holder, name, 0) == 2, 5000);
    int64_t cut_at = dt_now_ms();
    dt_proxy_set(&proxy, 1, DT_BLACKHOLE); /* silence: nothing tells them but their requests */
    dt_proxy_set(&proxy, 2, DT_BLACKHOLE);
    DT_WAIT_UNTIL(CT_DONE(&w2), OUTAGE_BOUND_MS + OUTAGE_SLACK_MS);
    CHECK_RC(ct_wait_join(&w2), DLOCK_EUNREACHABLE);
    int64_t took = w2.ended_ms - cut_at;
    printf("%s: a wait cut off for good ended after %lld ms (unreachable_wait %d ms): %s\n",
           ct->kind, (long long) took, OUTAGE_BOUND_MS, w2.errmsg);
    /* the outage counts from the send time of the first request that got
     * no answer, which may have gone out up to a request (timeout=500ms)
     * before the cut: under TSan, ZooKeeper's ended 1741 ms after it */
    CHECK_INT(took, >=, OUTAGE_BOUND_MS - 500);
    CHECK(strstr(w2.errmsg, "unreachable_wait") != NULL);
    CHECK_INT(dlock_lock_holds(l2), ==, 0);
    /* unreachable_wait=forever: still waiting well past the others' bound */
    dt_sleep_ms(1000);
    CHECK(!CT_DONE(&w3));
    int64_t cancelled_at = dt_now_ms();
    CHECK_RC(dlock_cancel(l3), DLOCK_OK);
    DT_WAIT_UNTIL(CT_DONE(&w3), 3000);
    CHECK_RC(ct_wait_join(&w3), DLOCK_ECANCELED);
    printf("%s: a wait with unreachable_wait=forever was still on after %lld ms, cancelled in "
           "%lld ms\n",
           ct->kind, (long long) (cancelled_at - cut_at), (long long) (w3.ended_ms - cancelled_at));

    dt_proxy_set(&proxy, -1, DT_PASS);
    CHECK_RC(dlock_release(h), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(l1);
    dlock_lock_free(l2);
    dlock_lock_free(l3);
    dlock_client_close(holder);
    dlock_client_close(c1);
    dlock_client_close(c2);
    dlock_client_close(c3);
    dt_proxy_stop(&proxy);
}

/* ---------------------------------------------------------------- floods */

/* The requests a client sent through link per second over [from, now]. */
static double requests_per_s(dt_proxy *p, int link, long long before, int64_t from_ms)
{
    long long chunks = 0;
    dt_proxy_sent(p, link, &chunks, NULL);
    double s = (double) (dt_now_ms() - from_ms) / 1000.0;
    return (double) (chunks - before) / (s > 0 ? s : 1);
}

/* Every grant comes back after its lease could have run out (the proxy
 * holds the replies longer than the shortest lease leaves valid): a wait
 * with no budget tries again only after a growing delay, as on a store that
 * does not answer, and ends after unreachable_wait. Before, each late grant
 * was given back and the next try sent at once, as fast as the round trips
 * allowed. */
void ct_no_flood_late_grants(void)
{
    enum { DELAY_MS = 25, WAIT_MS = 3000 };
    dt_proxy proxy;
    ct_waiter w;
    long long before;

    dt_proxy_start(&proxy, ct->srv.port, 1);
    dlock_client *c = ct_client_at(proxy.ports[0], "?unreachable_wait=3s");
    dlock_lock *l = ct_lock(c, CT_NAME("late"), 0);
    CHECK_RC(dlock_acquire_for(l, 0, DLOCK_LEASE_MIN_MS - 1), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "at least") != NULL);
    /* connected, and the lock free: a late grant is the only obstacle */
    CHECK_RC(dlock_acquire_for(l, 0, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_proxy_delay(&proxy, 0, DELAY_MS);
    dt_proxy_sent(&proxy, 0, &before, NULL);
    int64_t t0 = dt_now_ms();
    ct_wait_start_for(&w, l, DLOCK_WAIT_FOREVER, DLOCK_LEASE_MIN_MS);
    dt_sleep_ms(WAIT_MS - 500); /* the requests of most of the wait */
    double rate = requests_per_s(&proxy, 0, before, t0);
    printf("%s: grants late by %d ms: %.1f requests/s\n", ct->kind, DELAY_MS, rate);
    CHECK(rate <= MAX_REQUESTS_PER_S);
    DT_WAIT_UNTIL(CT_DONE(&w), 500 + OUTAGE_SLACK_MS);
    CHECK_RC(ct_wait_join(&w), DLOCK_EUNREACHABLE);
    printf("%s: the wait ended after %lld ms: %s\n", ct->kind, (long long) (w.ended_ms - t0),
           w.errmsg);
    CHECK_INT(w.ended_ms - t0, >=, WAIT_MS - 100);
    CHECK(strstr(w.errmsg, "could have run out") != NULL);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_proxy_stop(&proxy);
}

/* A holder that never lets go: its waiter, with the shortest lease, waits
 * for wake-ups and the holder's lease, and sends a few requests a second. */
void ct_no_flood_behind_holder(void)
{
    enum { WATCH_MS = 3000 };
    const char *name = CT_NAME("held");
    dt_proxy proxy;
    ct_waiter w;
    long long before;

    dt_proxy_start(&proxy, ct->srv.port, 1);
    dlock_client *holder = ct_client("?lease=1s");
    dlock_client *c = ct_client_at(proxy.ports[0], "");
    dlock_lock *h = ct_lock(holder, name, 0), *l = ct_lock(c, name, 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY); /* connected */
    dt_proxy_sent(&proxy, 0, &before, NULL);
    int64_t t0 = dt_now_ms();
    if (ct_has(DLOCK_CAP_FIXED_LEASE))
        ct_wait_start_for(&w, l, DLOCK_WAIT_FOREVER, DLOCK_LEASE_MIN_MS);
    else
        ct_wait_start(&w, l, DLOCK_WAIT_FOREVER);
    dt_sleep_ms(WATCH_MS); /* the holder holds on meanwhile */
    double rate = requests_per_s(&proxy, 0, before, t0);
    printf("%s: a waiter behind a holder that never lets go: %.1f requests/s\n", ct->kind, rate);
    CHECK(!CT_DONE(&w));
    CHECK(rate <= MAX_REQUESTS_PER_S);
    CHECK_RC(dlock_cancel(l), DLOCK_OK);
    CHECK_RC(ct_wait_join(&w), DLOCK_ECANCELED);
    CHECK_RC(dlock_release(h), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(l);
    dlock_client_close(holder);
    dlock_client_close(c);
    dt_proxy_stop(&proxy);
}

/* A multi-lock whose lease runs out while its names are gathered (each
 * reply comes 10 ms late; the shortest lease leaves 16.8 ms): the first
 * name is lost by the time the last is taken, every time. It gathers them
 * again after a growing pause, not at once, and ends at its budget. */
void ct_no_flood_multi_short_lease(void)
{
    enum { DELAY_MS = 10, WAIT_MS = 3000, MAX_MULTI_PER_S = 40 };
    const char *names[] = {CT_NAME("m1"), CT_NAME("m2")};
    dt_proxy proxy;
    dlock_lock *m = NULL;
    long long before;

    dt_proxy_start(&proxy, ct->srv.port, 1);
    dlock_client *c = ct_client_at(proxy.ports[0], "");
    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(m, 0, 5000), DLOCK_OK); /* connected, both free */
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dt_proxy_delay(&proxy, 0, DELAY_MS);
    dt_proxy_sent(&proxy, 0, &before, NULL);
    int64_t t0 = dt_now_ms();
    int rc = dlock_acquire_for(m, WAIT_MS, DLOCK_LEASE_MIN_MS);
    double rate = requests_per_s(&proxy, 0, before, t0);
    printf("%s: a multi-lock losing a name while it gathers the rest: %.1f requests/s, ended "
           "after %lld ms: %s\n",
           ct->kind, rate, (long long) (dt_now_ms() - t0), dlock_errmsg());
    CHECK(rc != DLOCK_OK);
    CHECK(rate <= MAX_MULTI_PER_S);
    CHECK_INT(dlock_lock_holds(m), ==, 0);
    dlock_lock_free(m);
    dlock_client_close(c);
    dt_proxy_stop(&proxy);
}
