/* SPDX-License-Identifier: MIT */
/* test_redlock.c - redlock:// over 3 independent redis-servers: the URL and
 * its mistakes, a node frozen or killed (the quorum carries on), a
 * majority gone (fails fast, a hold is reported lost), a wait's budget that
 * bounds it with a majority frozen, a release and close that do not wait
 * for a frozen node, fences across
 * nodes failing and coming back, a release that reaches a node only once
 * it answers again, a waiter that polls its way to the lock, renewal by
 * quorum, the interop key of simple mode, fences after a node comes back
 * empty, and five masters.
 *
 * The nodes are 3 servers of kind redis, so that each can be paused,
 * stopped and restarted alone. main() starts them before any test forks,
 * for the tests that only freeze and wake nodes (SIGSTOP, SIGCONT: any
 * process may); a test that stops and restarts nodes starts 3 of its own
 * (a server is reaped and started again by the process that started it).
 * Every test runs in a process of its own (dt_run). */
#include "../support/harness.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NNODES 3
static dt_server nodes[NNODES];
static char url[256];

static char *url_with(char *buf, size_t len, const char *options)
{
    snprintf(buf, len, "%s%s%s", url, options != NULL ? "?" : "", options != NULL ? options : "");
    return buf;
}

/* One command to node i; NULL if it does not answer within 1 s. */
static redisReply *node_command(int i, const char *fmt, ...)
{
    va_list ap;
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", nodes[i].port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

/* Whether lock `name`'s key is on node i (with the default prefix). */
static int key_on(int i, const char *name)
{
    redisReply *r = node_command(i, "EXISTS redlock:{%s}", name);
    if (r == NULL)
        dt_fail(__FILE__, __LINE__, "node %d does not answer", i);
    int there = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return there;
}

/* The acquisition returns once a quorum has the lock: the other node's
 * take may land after it, on any node. */
static int key_on_all(const char *name)
{
    for (int i = 0; i < NNODES; i++) {
        if (!key_on(i, name))
            return 0;
    }
    return 1;
}

static void pause_node(int i)
{
    dt_server_pause(&nodes[i]);
    CHECK(dt_wait_stopped(nodes[i].pid));
}

/* The connections node i has (this check's included); -1 if it does not
 * answer. */
static int clients_on(int i)
{
    redisReply *r = node_command(i, "CLIENT LIST");
    int n = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        n = 0;
        for (const char *p = r->str; (p = strchr(p, '\n')) != NULL; p++)
            n++;
    }
    freeReplyObject(r);
    return n;
}

static void start_nodes(void)
{
    for (int i = 0; i < NNODES; i++)
        dt_server_start(&nodes[i], "redis", 0, NULL);
    snprintf(url, sizeof url, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", nodes[0].port,
             nodes[1].port, nodes[2].port);
}

/* ---------------------------------------------------------------- URLs */

static void expect_open_fails(const char *text, int code, const char *says)
{
    dlock_client *c = NULL;
    int rc = dlock_client_open(text, &c);
    if (rc != code || strstr(dlock_errmsg(), says) == NULL)
        dt_fail(__FILE__, __LINE__, "open %s: got %d (%s), want %d saying '%s'", text, rc,
                dlock_errmsg(), code, says);
    CHECK(c == NULL);
}

static void bad_urls(void)
{
    char text[512];
    expect_open_fails("redlock://127.0.0.1:1", DLOCK_EINVAL, "at least 3");
    expect_open_fails("redlock://127.0.0.1:1,127.0.0.1:2", DLOCK_EINVAL, "at least 3");
    expect_open_fails("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:1", DLOCK_EINVAL,
                      "127.0.0.1:1 is listed twice");
    expect_open_fails("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/0", DLOCK_EINVAL, "no path");
    expect_open_fails(url_with(text, sizeof text, "bogus=1"), DLOCK_EINVAL, "bogus");
    expect_open_fails(url_with(text, sizeof text, "prefix=a{b"), DLOCK_EINVAL, "prefix");
    /* TLS options: for rediss+redlock:// only; a file that cannot be read
     * is named */
    expect_open_fails(url_with(text, sizeof text, "cacert=/x"), DLOCK_EINVAL,
                      "for TLS: use rediss+redlock://");
    expect_open_fails("rediss+redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?cacert=/nonexistent",
                      DLOCK_EINVAL, "cacert");

    /* what it cannot do is refused by name */
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = NULL;
    CHECK_RC(dlock_lock_open(c, "x", DLOCK_FAIR, &l), DLOCK_ENOTSUP);
    CHECK(strstr(dlock_errmsg(), "fair") != NULL);
    /* (no semaphore: a majority cannot bound its permits, README.md) */
    CHECK_RC(dlock_semaphore_open(c, "x", 2, 1, &l), DLOCK_ENOTSUP);
    CHECK(strstr(dlock_errmsg(), "semaphore") != NULL);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- faults */

/* One node frozen, then one killed: taking, renewing and releasing go on
 * with the other two, without waiting for the one that is gone. */
static void one_node_down(void)
{
    start_nodes(); /* its own: it stops and restarts them */
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "lease=600ms&timeout=3s"), NULL);
    dt_lost_box box = {0};

    pause_node(2);
    dlock_lock *l = dt_lock(c, "one-down", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    /* two answers make the quorum: not the frozen node's timeout of 3 s */
    CHECK_INT(dt_now_ms() - t0, <, 1000);
    CHECK(dlock_lock_fence(l) > 0);
    CHECK(key_on(0, "one-down") && key_on(1, "one-down"));
    /* renewed through three leases by the two that answer */
    dt_sleep_ms(1800);
    CHECK_INT(atomic_load(&box.lost), ==, 0);
    CHECK_RC(dlock_lock_check(l), DLOCK_OK);
    t0 = dt_now_ms();
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 1000);
    CHECK(!key_on(0, "one-down") && !key_on(1, "one-down"));
    dt_server_resume(&nodes[2]);

    /* killed (connection refused) rather than frozen */
    dt_server_stop(&nodes[1]);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    dt_sleep_ms(1200);
    CHECK_INT(atomic_load(&box.lost), ==, 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_server_start_again(&nodes[1], 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Two of three stopped: an attempt fails at once with EUNREACHABLE naming
 * them; two frozen: a hold is reported lost within about its lease. */
static void majority_down(void)
{
    start_nodes(); /* its own: it stops and restarts them */
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "lease=1s&timeout=500ms"), NULL);
    dt_lost_box box = {0};
    dlock_lock *l = dt_lock(c, "majority", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);

    dt_server_stop(&nodes[1]);
    dt_server_stop(&nodes[2]);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 1000);
    char port1[16], port2[16];
    snprintf(port1, sizeof port1, ":%d", nodes[1].port);
    snprintf(port2, sizeof port2, ":%d", nodes[2].port);
    if (strstr(dlock_errmsg(), port1) == NULL || strstr(dlock_errmsg(), port2) == NULL ||
        strstr(dlock_errmsg(), "quorum") == NULL)
        dt_fail(__FILE__, __LINE__, "the message names neither the nodes nor the quorum: %s",
                dlock_errmsg());
    /* nothing left on the one that answered (the give-back is sent without
     * waiting: it may land just after) */
    DT_WAIT_UNTIL(!key_on(0, "majority"), 300); /* (its lease is 1 s) */
    dt_server_start_again(&nodes[1], 0);
    dt_server_start_again(&nodes[2], 0);

    /* held, then two frozen: lost within about a lease */
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    pause_node(1);
    pause_node(2);
    int64_t frozen = dt_now_ms();
    DT_WAIT_UNTIL(atomic_load(&box.lost) != 0, 3000);
    CHECK_INT(atomic_load(&box.at_ms) - frozen, <=, 1000 + 300);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    /* the reason, with the last renewal's error if one came in time, is
     * whole: not cut by the report's fixed size */
    size_t why_len = strlen(box.why);
    if (why_len == 0 || (strchr(box.why, '(') != NULL && box.why[why_len - 1] != ')'))
        dt_fail(__FILE__, __LINE__, "the reason of the loss is cut: '%s'", box.why);
    dt_server_resume(&nodes[1]);
    dt_server_resume(&nodes[2]);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A quorum out of reach ends an attempt at once: two nodes held by
 * another owner, the third frozen, a try is EBUSY without waiting for the
 * third, and what it may take there is given back. */
static void fails_fast(void)
{
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=3s"), NULL);
    for (int i = 0; i < 2; i++)
        freeReplyObject(node_command(i, "SET redlock:{fast} someone-else PX 10000"));
    pause_node(2);
    dlock_lock *l = dt_lock(c, "fast", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    CHECK_INT(dt_now_ms() - t0, <, 1000);
    dt_server_resume(&nodes[2]);
    /* the take sent to the frozen node ran when it woke, and the release
     * sent behind it gave it back */
    DT_WAIT_UNTIL(!key_on(2, "fast"), 2000);
    for (int i = 0; i < 2; i++)
        freeReplyObject(node_command(i, "DEL redlock:{fast}"));
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A release while a node is frozen reaches it when it wakes: the lock is
 * not left there for its lease. */
static void release_reaches_frozen_node(void)
{
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "late-release", 0);
    CHECK_RC(dlock_acquire_for(l, 0, 20000), DLOCK_OK);
    DT_WAIT_UNTIL(key_on_all("late-release"), 2000);
    pause_node(2);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK(!key_on(0, "late-release") && !key_on(1, "late-release"));
    dt_server_resume(&nodes[2]);
    /* well before its lease of 20 s */
    DT_WAIT_UNTIL(!key_on(2, "late-release"), 2000);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A wait with a budget while a majority is frozen (issue 22): the budget
 * bounds the whole wait, the frozen nodes' requests included, rather than
 * a command timeout (4 s here) each; the error says how many nodes are out
 * of reach and how many answered, and that the wait ran out, not that the
 * store was never reached (one node answered). Both with nodes frozen
 * before the client ever reached them (their first exchange unanswered)
 * and frozen after. The close that follows does not wait for them either. */
static void budget_bounds_frozen_majority(void)
{
    char text[512];
    for (int reached_first = 0; reached_first < 2; reached_first++) {
        dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=4s"), NULL);
        dlock_lock *l = dt_lock(c, "budget", 0);
        if (reached_first) {
            CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
            CHECK_RC(dlock_release(l), DLOCK_OK);
        }
        pause_node(1);
        pause_node(2);
        for (int attempt = 0; attempt < 2; attempt++) {
            int64_t t0 = dt_now_ms();
            CHECK_RC(dlock_acquire(l, 1500), DLOCK_EUNREACHABLE);
            int64_t took = dt_now_ms() - t0;
            if (took > 1500 + 700)
                dt_fail(__FILE__, __LINE__, "%s attempt %d: a wait of 1.5 s took %lld ms: %s",
                        reached_first ? "reached" : "never reached", attempt, (long long) took,
                        dlock_errmsg());
            const char *msg = dlock_errmsg();
            if (strstr(msg, "2 of 3 nodes are out of reach (a quorum needs 2)") == NULL ||
                strstr(msg, "1 answered") == NULL || strstr(msg, "wait ran out") == NULL ||
                strstr(msg, "never reached") != NULL)
                dt_fail(__FILE__, __LINE__, "the message does not say what happened: %s", msg);
        }
        int64_t t0 = dt_now_ms();
        dlock_lock_free(l);
        dlock_client_close(c);
        CHECK_INT(dt_now_ms() - t0, <, 1000);
        dt_server_resume(&nodes[1]);
        dt_server_resume(&nodes[2]);
        /* what was still queued for them is finished once they wake, and
         * the workers left to it end (their connections closed) */
        DT_WAIT_UNTIL(clients_on(1) == 1 && clients_on(2) == 1, 3000);
        CHECK(!key_on(0, "budget") && !key_on(1, "budget") && !key_on(2, "budget"));
    }
}

/* One node frozen (issue 22): the release returns once a quorum answered
 * it, and the close that follows does not wait a command timeout (3 s
 * here) for the frozen node either; the hold is never reported lost.
 * Meanwhile another client takes the lock by the two others (the quorum is
 * the rule); the frozen node's part is finished when it wakes, or ends with
 * its lease, after which a quorum that needs that node takes the lock too.
 * Frozen before the client reached it (its first exchange unanswered), and
 * frozen while connected with the lock held there. */
static void release_and_close_past_frozen_node(void)
{
    char text[512];
    for (int connected = 0; connected < 2; connected++) {
        dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=3s&lease=2s"), NULL);
        dlock_lock *l = dt_lock(c, "frozen-release", 0);
        dt_lost_box box = {0};
        dlock_lock_on_lost(l, dt_on_lost, &box);
        if (connected) {
            CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
            /* (the third node's take lands after the quorum's: 2 s was
             * not always enough under ASan in CI) */
            int64_t asked = dt_now_ms();
            while (!key_on_all("frozen-release") && dt_now_ms() - asked < 6000)
                dt_sleep_ms(10);
            if (!key_on_all("frozen-release"))
                dt_fail(__FILE__, __LINE__,
                        "the lock is not on every node 6 s after its take: %d %d %d",
                        key_on(0, "frozen-release"), key_on(1, "frozen-release"),
                        key_on(2, "frozen-release"));
            pause_node(2);
        } else {
            pause_node(2);
            CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
        }
        int64_t t0 = dt_now_ms();
        CHECK_RC(dlock_release(l), DLOCK_OK);
        CHECK_INT(dt_now_ms() - t0, <, 500);
        CHECK(!key_on(0, "frozen-release") && !key_on(1, "frozen-release"));
        dlock_lock_free(l);
        dlock_client_close(c);
        int64_t took = dt_now_ms() - t0;
        if (took >= 1000)
            dt_fail(__FILE__, __LINE__, "%s: release and close took %lld ms",
                    connected ? "frozen while connected" : "frozen before", (long long) took);
        CHECK_INT(atomic_load(&box.lost), ==, 0);

        /* another client, by the quorum of the two others */
        dlock_client *o = dt_client(url_with(text, sizeof text, "timeout=3s"), NULL);
        dlock_lock *ol = dt_lock(o, "frozen-release", 0);
        CHECK_RC(dlock_try_acquire(ol), DLOCK_OK);
        CHECK_RC(dlock_release(ol), DLOCK_OK);
        dlock_lock_free(ol);
        t0 = dt_now_ms();
        dlock_client_close(o);
        CHECK_INT(dt_now_ms() - t0, <, 1000);

        dt_server_resume(&nodes[2]);
        /* released there when it woke, or expired with the lease of 2 s */
        DT_WAIT_UNTIL(!key_on(2, "frozen-release"), 3000);
        /* and the closed clients' workers for it are done */
        DT_WAIT_UNTIL(clients_on(2) == 1, 3000);
        /* the only quorum left includes the node that was frozen */
        pause_node(0);
        o = dt_client(url_with(text, sizeof text, "timeout=3s"), NULL);
        ol = dt_lock(o, "frozen-release", 0);
        CHECK_RC(dlock_acquire(ol, 3000), DLOCK_OK);
        CHECK_RC(dlock_release(ol), DLOCK_OK);
        dlock_lock_free(ol);
        dlock_client_close(o);
        dt_server_resume(&nodes[0]);
        /* The closed client's worker for node 0 sends its take and the
         * release behind it once the node wakes: done before the next
         * round's take, else that take can land between them, find the
         * name held there, and leave node 0 without the lock for good
         * (renewals never re-create a key), as it did one run in four. */
        DT_WAIT_UNTIL(clients_on(0) == 1, 4000);
        CHECK(!key_on(0, "frozen-release"));
    }
}

/* Fences strictly increase across holders while nodes freeze, wake, stop
 * and restart with their data, one at a time: a node back from a stop
 * has a counter lower than the others', which a quorum outvotes. */
static void fences_increase_across_faults(void)
{
    start_nodes(); /* its own: it stops and restarts them */
    char text[512];
    dlock_client *a = dt_client(url_with(text, sizeof text, "timeout=2s"), NULL);
    dlock_client *b = dt_client(url_with(text, sizeof text, "timeout=2s"), NULL);
    dlock_lock *la = dt_lock(a, "fenced", 0), *lb = dt_lock(b, "fenced", 0);
    uint64_t last = 0;

    for (int round = 0; round < 60; round++) {
        int node = round / 10 % NNODES;
        switch (round % 10) {
        case 2:
            pause_node(node);
            break;
        case 4:
            dt_server_resume(&nodes[node]);
            break;
        case 5:             /* stopped: it misses the counters written meanwhile */
            if (node > 0) { /* (node 0 keeps running: the others restart) */
                /* once it ran the last release, which a quorum answered
                 * before it: stopped before, it would come back holding
                 * that take for a whole lease (README: Release) */
                DT_WAIT_UNTIL(!key_on(node, "fenced"), 2000);
                dt_server_stop(&nodes[node]);
            }
            break;
        case 8: /* back with its data, behind the others, and in the only quorum left */
            if (node > 0) {
                dt_server_start_again(&nodes[node], 0);
                pause_node(3 - node);
            }
            break;
        case 9:
            if (node > 0)
                dt_server_resume(&nodes[3 - node]);
            break;
        default:
            break;
        }
        dlock_lock *l = round % 2 ? la : lb;
        CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
        uint64_t fence = dlock_lock_fence(l);
        if (fence <= last)
            dt_fail(__FILE__, __LINE__, "round %d: fence %llu after %llu", round,
                    (unsigned long long) fence, (unsigned long long) last);
        last = fence;
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    for (int i = 0; i < NNODES; i++) {
        if (nodes[i].paused)
            dt_server_resume(&nodes[i]);
    }
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* The fence counter of `name` on node i (-1: none, or no answer). */
static long long counter_on(int i, const char *name)
{
    redisReply *r = node_command(i, "GET redlock:{%s}:fence", name);
    long long v = r != NULL && r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

/* How many nodes have a fence counter of at least `fence` for name. */
static int counters_at_least(const char *name, long long fence)
{
    int n = 0;
    for (int i = 0; i < NNODES; i++)
        n += counter_on(i, name) >= fence;
    return n;
}

/* The fence is on a quorum when the acquisition returns: written by the
 * take itself where a quorum of the nodes that took the lock stored the
 * same counter (no write-back round), written back when they differ (a
 * node's counter ahead of the others'). */
static void fence_on_quorum_before_return(void)
{
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "fence-quorum", 0);

    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    /* the counters agree now (the first take wrote the highest back) */
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    long long fence = (long long) dlock_lock_fence(l);
    CHECK_INT(counters_at_least("fence-quorum", fence), >=, 2);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    /* node 0 ahead, and in the only quorum (node 2 frozen): only it stores
     * the highest counter at the take, which must be written back to node
     * 1 before the acquisition returns */
    long long ahead = fence + 1000000;
    redisReply *r = node_command(0, "SET redlock:{fence-quorum}:fence %lld", ahead);
    CHECK(r != NULL);
    freeReplyObject(r);
    pause_node(2);
    int rc = dlock_acquire(l, 0);
    long long taken = (long long) dlock_lock_fence(l);
    dt_server_resume(&nodes[2]); /* before any check: the next tests need it */
    CHECK_RC(rc, DLOCK_OK);
    /* ahead + 1, or more when a loaded machine made an attempt run past its
     * validity and the next one moved the counters on again */
    CHECK_INT(taken, >=, ahead + 1);
    CHECK_INT(counter_on(0, "fence-quorum"), ==, taken);
    CHECK_INT(counter_on(1, "fence-quorum"), ==, taken);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    /* agreed again (the write-back went to every node): one more each */
    DT_WAIT_UNTIL(counters_at_least("fence-quorum", taken) == 3, 2000);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_INT((long long) dlock_lock_fence(l), >, taken);
    CHECK_INT(counters_at_least("fence-quorum", (long long) dlock_lock_fence(l)), >=, 2);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Many threads on one client, each taking and releasing a lock of its own,
 * with a node frozen all along: every step is decided by the two that
 * answer (a caller is woken when its round is decided, by whichever
 * worker's answer decides it), none waits for the frozen node's timeout,
 * and the fences of each name increase. */
#define MANY_THREADS 8
#define MANY_CYCLES  25

typedef struct many_arg {
    dlock_client *c;
    int index;
    int failures;
    int64_t slowest_ms;
} many_arg;

static void *many_cycles(void *arg)
{
    many_arg *m = arg;
    char name[32];
    snprintf(name, sizeof name, "many-%d", m->index);
    dlock_lock *l = NULL;
    if (dlock_lock_open(m->c, name, 0, &l) != DLOCK_OK) {
        m->failures++;
        return NULL;
    }
    uint64_t last = 0;
    for (int i = 0; i < MANY_CYCLES; i++) {
        int64_t t0 = dt_now_ms();
        int ok = dlock_acquire(l, 0) == DLOCK_OK && dlock_lock_fence(l) > last;
        last = dlock_lock_fence(l);
        ok = ok && dlock_release(l) == DLOCK_OK;
        m->failures += !ok;
        if (dt_now_ms() - t0 > m->slowest_ms)
            m->slowest_ms = dt_now_ms() - t0;
    }
    dlock_lock_free(l);
    return NULL;
}

static void many_threads_past_frozen_node(void)
{
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=3s"), NULL);
    pthread_t threads[MANY_THREADS];
    many_arg args[MANY_THREADS];

    pause_node(1);
    int started = 0;
    for (int i = 0; i < MANY_THREADS; i++) {
        args[i] = (many_arg){c, i, 0, 0};
        started += pthread_create(&threads[i], NULL, many_cycles, &args[i]) == 0;
    }
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    dt_server_resume(&nodes[1]);
    CHECK_INT(started, ==, MANY_THREADS);
    for (int i = 0; i < MANY_THREADS; i++) {
        CHECK_INT(args[i].failures, ==, 0);
        /* a cycle is two or three rounds of two answers: never the frozen
         * node's 3 s (slow machines: a generous bound) */
        CHECK_INT(args[i].slowest_ms, <, 1500);
    }
    dlock_client_close(c);
}

/* Renewal by quorum: a hold whose key one node lost (a restart without its
 * data, an eviction) is still held while the other two keep it; once two
 * lost it, the next renewal reports the loss, long before the lease. */
static void renewal_by_quorum(void)
{
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "lease=900ms"), NULL);
    dt_lost_box box = {0};
    dlock_lock *l = dt_lock(c, "quorum-renew", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);

    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    DT_WAIT_UNTIL(key_on_all("quorum-renew"), 2000);
    freeReplyObject(node_command(2, "DEL redlock:{quorum-renew}"));
    dt_sleep_ms(2000); /* six renewals */
    CHECK_INT(atomic_load(&box.lost), ==, 0);
    CHECK_RC(dlock_lock_check(l), DLOCK_OK);
    CHECK(key_on(0, "quorum-renew") && key_on(1, "quorum-renew"));
    CHECK(!key_on(2, "quorum-renew")); /* renewal never re-creates a key */

    int64_t dropped = dt_now_ms();
    freeReplyObject(node_command(1, "DEL redlock:{quorum-renew}"));
    DT_WAIT_UNTIL(atomic_load(&box.lost) != 0, 2000);
    /* told by the next renewal (every lease/3), not by the lease running out */
    CHECK_INT(atomic_load(&box.at_ms) - dropped, <, 600);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static int plain_key_set(int i)
{
    redisReply *r = node_command(i, "EXISTS plain-job");
    int set = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return set;
}

/* Simple mode (DLOCK_SIMPLE): the plain key NAME holding the owner token
 * on a quorum, as node-redlock and redsync keep it, so that they and dlock
 * exclude each other; and one name is one lock: the mutex and the plain
 * key of a name exclude each other, each saying which holds it. */
static void simple_mode(void)
{
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *simple = dt_lock(c, "plain-job", DLOCK_SIMPLE);
    dlock_lock *mutex = dt_lock(c, "plain-job", 0);

    CHECK_RC(dlock_acquire(simple, 0), DLOCK_OK);
    /* the third may come after the quorum, on any node */
    DT_WAIT_UNTIL(plain_key_set(0) && plain_key_set(1) && plain_key_set(2), 2000);
    for (int i = 0; i < NNODES; i++) {
        redisReply *r = node_command(i, "GET plain-job");
        CHECK(r != NULL && r->type == REDIS_REPLY_STRING);
        CHECK(strcmp(r->str, dlock_lock_token(simple)) == 0);
        freeReplyObject(r);
    }
    CHECK(!key_on(0, "plain-job"));
    CHECK_RC(dlock_try_acquire(mutex), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "interop") != NULL);
    uint64_t fence = dlock_lock_fence(simple);
    CHECK_RC(dlock_release(simple), DLOCK_OK);
    /* (released on a quorum when it returns; on every node soon after) */
    DT_WAIT_UNTIL(!plain_key_set(0) && !plain_key_set(1) && !plain_key_set(2), 2000);

    /* the mutex holds the name: the plain key is not taken */
    CHECK_RC(dlock_acquire(mutex, 0), DLOCK_OK);
    CHECK(dlock_lock_fence(mutex) > fence); /* one name, one sequence */
    CHECK_RC(dlock_try_acquire(simple), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "mutex") != NULL);
    CHECK_RC(dlock_release(mutex), DLOCK_OK);

    /* a foreign holder of the plain key on a quorum (node-redlock's SET)
     * keeps dlock out */
    for (int i = 0; i < 2; i++)
        freeReplyObject(node_command(i, "SET plain-job f00d PX 10000"));
    CHECK_RC(dlock_try_acquire(simple), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(mutex), DLOCK_EBUSY);
    for (int i = 0; i < 2; i++)
        freeReplyObject(node_command(i, "DEL plain-job"));
    dlock_lock_free(simple);
    dlock_lock_free(mutex);
    dlock_client_close(c);
}

/* A node restarted without its data, after the delayed restart the README
 * asks for (one lease), in the only quorum left with a node that missed
 * the last fences: the fence still increases (the counter never starts
 * below the node's clock). */
static void fences_after_wiped_restart(void)
{
    start_nodes(); /* its own: it stops, wipes and restarts them */
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "lease=500ms&timeout=2s"), NULL);
    dlock_lock *l = dt_lock(c, "wiped", 0);
    uint64_t last = 0;

    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_server_stop(&nodes[2]); /* misses the fences below */
    for (int i = 0; i < 20; i++) {
        CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
        CHECK(dlock_lock_fence(l) > last);
        last = dlock_lock_fence(l);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    dt_server_start_again(&nodes[2], 0); /* back with its older counter */
    dt_server_stop(&nodes[1]);
    dt_sleep_ms(500); /* the delayed restart: one lease down */
    dt_server_start_again(&nodes[1], DT_WIPE);
    pause_node(0); /* the quorum is {1: wiped, 2: behind} */
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    if (dlock_lock_fence(l) <= last)
        dt_fail(__FILE__, __LINE__, "fence %llu after %llu",
                (unsigned long long) dlock_lock_fence(l), (unsigned long long) last);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_server_resume(&nodes[0]);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Five masters: the quorum is 3; two down changes nothing, three down is
 * a clear error with nothing left held on the two that answer. */
static void five_nodes(void)
{
    dt_server five[5];
    char text[512];
    size_t used = (size_t) snprintf(text, sizeof text, "redlock://");
    for (int i = 0; i < 5; i++) {
        dt_server_start(&five[i], "redis", 0, NULL);
        used += (size_t) snprintf(text + used, sizeof text - used, "%s127.0.0.1:%d", i ? "," : "",
                                  five[i].port);
    }
    dlock_client *c = dt_client(text, "?lease=1s");
    dlock_lock *l = dt_lock(c, "five", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    dt_server_stop(&five[3]);
    dt_server_stop(&five[4]);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK(dlock_lock_fence(l) > fence);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    dt_server_stop(&five[2]);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "3 of 5 nodes are out of reach (a quorum needs 3)") != NULL);
    for (int i = 0; i < 2; i++) {
        redisReply *r = NULL;
        int64_t until = dt_now_ms() + 300; /* (the give-back is not waited for) */
        for (;;) {
            redisContext *rc = redisConnect("127.0.0.1", five[i].port);
            CHECK(rc != NULL && !rc->err);
            r = redisCommand(rc, "EXISTS redlock:{five}");
            redisFree(rc);
            CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER);
            if (r->integer == 0 || dt_now_ms() > until)
                break;
            freeReplyObject(r);
            dt_sleep_ms(5);
        }
        CHECK_INT(r->integer, ==, 0);
        freeReplyObject(r);
    }
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A waiter polls: it gets the lock soon after the release, within a bound
 * that does not depend on the holder's lease. */
typedef struct waiter {
    dlock_lock *l;
    int rc;
    atomic_llong got_ms;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->l, 20000);
    atomic_store(&w->got_ms, dt_now_ms());
    return NULL;
}

static void waiter_gets_it(void)
{
    dlock_client *a = dt_client(url, NULL), *b = dt_client(url, NULL);
    dlock_lock *held = dt_lock(a, "handover", 0);
    waiter w = {.l = dt_lock(b, "handover", 0)};
    pthread_t t;

    CHECK_RC(dlock_acquire(held, 0), DLOCK_OK);
    uint64_t first = dlock_lock_fence(held);
    CHECK(pthread_create(&t, NULL, wait_for_it, &w) == 0);
    dt_sleep_ms(300); /* the waiter is polling behind the holder */
    CHECK_INT(atomic_load(&w.got_ms), ==, 0);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(held), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_INT(atomic_load(&w.got_ms) - released, <, 500);
    CHECK(dlock_lock_fence(w.l) > first);
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(held);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* ---------------------------------------------------------------- operators */

/* Sets key to value on the nodes listed (-1 ends the list), expiring in px ms. */
static void set_on(const char *key, const char *value, int px, const int *which)
{
    for (; *which >= 0; which++) {
        redisReply *r = node_command(*which, "SET %s %s PX %d", key, value, px);
        CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
}

static void del_everywhere_but(int but, const char *key)
{
    for (int i = 0; i < NNODES; i++) {
        if (i != but)
            freeReplyObject(node_command(i, "DEL %s", key));
    }
}

static void del_everywhere(const char *key)
{
    del_everywhere_but(-1, key);
}

static int holder_count;
static char holder_owner[80];
static void keep_holder(const dlock_holder *h, void *arg)
{
    (void) arg;
    holder_count++;
    snprintf(holder_owner, sizeof holder_owner, "%s", h->owner);
}

/* The holder of a name is the value a quorum has: a minority's leftover
 * is free, two different values on two nodes are free, the lease is the
 * quorum's (the second longest of those that answered), the interop key counts for the
 * name; with one node silent and the two others split, nobody can tell:
 * EUNREACHABLE after the request's bound, naming the silent node. */
static void query_by_quorum(void)
{
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=1s"), NULL);
    dlock_status st;

    set_on("redlock:{q}", "leftover", 10000, (const int[]){0, -1});
    st = dt_query(c, "q", 0);
    CHECK_INT(st.held, ==, 0);
    CHECK_INT(st.lease_ms, ==, -1);
    holder_count = 0;
    CHECK_RC(dlock_query_holders(c, "q", 0, keep_holder, NULL), DLOCK_OK);
    CHECK_INT(holder_count, ==, 0);

    set_on("redlock:{q}", "other", 10000, (const int[]){1, -1});
    CHECK_INT(dt_query(c, "q", 0).held, ==, 0); /* a split vote */

    set_on("redlock:{q}", "leftover", 4000, (const int[]){1, -1});
    set_on("redlock:{q}", "leftover", 20000, (const int[]){2, -1});
    st = dt_query(c, "q", 0);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, "leftover") == 0);
    /* a quorum's: node 0's 10 s, the second longest (every node answers);
     * never node 2's 20 s */
    CHECK_INT(st.lease_ms, >, 9000);
    CHECK_INT(st.lease_ms, <=, 10000);
    holder_count = 0;
    CHECK_RC(dlock_query_holders(c, "q", 0, keep_holder, NULL), DLOCK_OK);
    CHECK_INT(holder_count, ==, 1);
    CHECK(strcmp(holder_owner, "leftover") == 0);
    del_everywhere("redlock:{q}");

    /* the interop key held on a quorum: the name is held */
    set_on("q", "f00d", 10000, (const int[]){0, 2, -1});
    st = dt_query(c, "q", 0);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, "f00d") == 0);
    del_everywhere("q");

    /* one node silent, the others split: unknown */
    set_on("redlock:{q}", "leftover", 10000, (const int[]){0, -1});
    pause_node(2);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_query(c, "q", 0, &st), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    char port[16];
    snprintf(port, sizeof port, ":%d", nodes[2].port);
    if (strstr(dlock_errmsg(), port) == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not name the silent node: %s",
                dlock_errmsg());
    /* and says which node said what (it named only the silent one) */
    char said[96];
    snprintf(said, sizeof said, "127.0.0.1:%d says held, 127.0.0.1:%d says free", nodes[0].port,
             nodes[1].port);
    if (strstr(dlock_errmsg(), said) == NULL || strstr(dlock_errmsg(), "leftover") != NULL)
        dt_fail(__FILE__, __LINE__, "want '%s' (and no token): %s", said, dlock_errmsg());
    /* ...but two that agree decide without it */
    del_everywhere_but(2, "redlock:{q}");
    t0 = dt_now_ms();
    CHECK_INT(dt_query(c, "q", 0).held, ==, 0);
    CHECK_INT(dt_now_ms() - t0, <, 500);
    dt_server_resume(&nodes[2]);
    dlock_client_close(c);
}

static void *unpause_node1_soon(void *arg)
{
    (void) arg;
    dt_sleep_ms(20);
    dt_server_resume(&nodes[1]);
    return NULL;
}

/* A holder's extend is confirmed by a quorum; the last node may take it
 * after it answered another client's status. That status waits a little for
 * the node still to answer rather than report the lagging node's short lease
 * (CI saw conformance extend_and_keepalive read 1 s after an extend to 20 s);
 * a node that stays silent costs only that little. */
static void query_waits_for_late_lease(void)
{
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=2s"), NULL);

    set_on("redlock:{late}", "holder", 20000, (const int[]){0, 1, -1});
    set_on("redlock:{late}", "holder", 1000, (const int[]){2, -1}); /* its extend to come */
    /* node 1 answers 20 ms late */
    pause_node(1);
    pthread_t t;
    pthread_create(&t, NULL, unpause_node1_soon, NULL);
    dlock_status st = dt_query(c, "late", 0);
    pthread_join(t, NULL);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.lease_ms, >, 10000);

    pause_node(1);
    int64_t t0 = dt_now_ms();
    st = dt_query(c, "late", 0);
    CHECK_INT(dt_now_ms() - t0, <, 500);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.lease_ms, <=, 1000); /* nodes 0 and 2 only: a lower bound */
    dt_server_resume(&nodes[1]);
    del_everywhere("redlock:{late}");
    dlock_client_close(c);
}

/* Polling waiters are counted (their marks), and leave the count when they
 * give up or get the lock. */
static void waiters_counted(void)
{
    dlock_client *a = dt_client(url, NULL), *b = dt_client(url, NULL);
    dlock_lock *held = dt_lock(a, "counted", 0);
    waiter w = {.l = dt_lock(b, "counted", 0)};
    pthread_t t;

    CHECK_RC(dlock_acquire(held, 0), DLOCK_OK);
    CHECK(pthread_create(&t, NULL, wait_for_it, &w) == 0);
    DT_WAIT_UNTIL(dt_query(a, "counted", 0).waiters == 1, 2000);
    CHECK_RC(dlock_release(held), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    dlock_status st = dt_query(a, "counted", 0);
    CHECK_INT(st.waiters, ==, 0);
    CHECK(strcmp(st.owner, dlock_lock_token(w.l)) == 0);
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(held);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* A hold another process left (detached) is taken over by its token when
 * a quorum holds it, with the highest counter read as its fence, written
 * back to a quorum first (a later holder's quorum without the node that
 * had it still goes above it); then renewed and released as the
 * adopter's. A token on no node, or on a minority, is ENOTOWNER. */
static void adopt_by_quorum(void)
{
    dlock_client *a = dt_client(url, NULL), *b = dt_client(url, NULL);
    dlock_lock *left = dt_lock(a, "adopted", 0), *mine = NULL, *next = dt_lock(b, "adopted", 0);
    char token[80];

    CHECK_RC(dlock_acquire_for(left, 0, 20000), DLOCK_OK);
    snprintf(token, sizeof token, "%s", dlock_lock_token(left));
    /* above every node's counter (a node that took it late started its
     * counter at its clock then) */
    uint64_t ahead = 0;
    DT_WAIT_UNTIL(key_on_all("adopted"), 2000);
    for (int i = 0; i < NNODES; i++) {
        redisReply *f = node_command(i, "GET redlock:{adopted}:fence");
        CHECK(f != NULL && f->type == REDIS_REPLY_STRING);
        if (strtoull(f->str, NULL, 10) + 1000 > ahead)
            ahead = strtoull(f->str, NULL, 10) + 1000;
        freeReplyObject(f);
    }
    dlock_lock_detach(left);
    dlock_client_close(a);
    CHECK_RC(dlock_lock_adopt(b, "adopted", "0123456789abcdef0123456789abcdef", 0, &mine),
             DLOCK_ENOTOWNER);
    CHECK(mine == NULL);
    set_on("redlock:{minority}", token, 10000, (const int[]){0, -1});
    CHECK_RC(dlock_lock_adopt(b, "minority", token, 0, &mine), DLOCK_ENOTOWNER);
    del_everywhere("redlock:{minority}");
    /* a node whose counter a failed take moved on */
    redisReply *r = node_command(2, "SET redlock:{adopted}:fence %llu", (unsigned long long) ahead);
    freeReplyObject(r);
    /* node 1 frozen: the quorum read is nodes 0 and 2, the fence node 2's */
    pause_node(1);
    CHECK_RC(dlock_lock_adopt(b, "adopted", token, 0, &mine), DLOCK_OK);
    dt_server_resume(&nodes[1]);
    CHECK_INT(dlock_lock_fence(mine), ==, ahead);
    CHECK_INT(dlock_lock_remaining_ms(mine), >, 10000);
    CHECK_RC(dlock_extend(mine, 40000), DLOCK_OK);
    r = node_command(0, "PTTL redlock:{adopted}");
    CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 30000);
    freeReplyObject(r);
    CHECK_RC(dlock_release(mine), DLOCK_OK);
    DT_WAIT_UNTIL(!key_on(0, "adopted") && !key_on(1, "adopted"), 2000);
    pause_node(2);
    CHECK_RC(dlock_acquire(next, 0), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(next), >, ahead);
    CHECK_RC(dlock_release(next), DLOCK_OK);
    dt_server_resume(&nodes[2]);
    dlock_lock_free(next);
    dlock_lock_free(mine);
    dlock_client_close(b);
}

/* force-unlock with a node frozen: the two others let go and it is done;
 * the holder's next renewal reports the loss; the name is free when the
 * frozen node wakes. A quorum out of reach: EUNREACHABLE. */
static void force_unlock_by_quorum(void)
{
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "lease=3s&timeout=1s"), NULL);
    dlock_client *op = dt_client(url_with(text, sizeof text, "timeout=1s"), NULL);
    dlock_lock *l = dt_lock(c, "forced", 0);
    dt_lost_box box = {0};

    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    DT_WAIT_UNTIL(key_on_all("forced"), 2000);
    pause_node(2);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_force_unlock(op, "forced", 0), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 500);
    CHECK(!key_on(0, "forced") && !key_on(1, "forced"));
    DT_WAIT_UNTIL(atomic_load(&box.lost) != 0, 3000); /* renewed every second */
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    dt_server_resume(&nodes[2]);
    /* whether the unlock queued for it reaches it in time or not, a
     * leftover there would be a minority's */
    CHECK_INT(dt_query(op, "forced", 0).held, ==, 0);

    /* a quorum out of reach: EUNREACHABLE */
    pause_node(1);
    pause_node(2);
    CHECK_RC(dlock_force_unlock(op, "forced", 0), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "quorum") != NULL);
    dt_server_resume(&nodes[1]);
    dt_server_resume(&nodes[2]);
    dlock_lock_free(l);
    dlock_client_close(c);
    dlock_client_close(op);
}

static int listed_count;
static char listed_names[8][64];
static void keep_name(const char *name, unsigned flags, void *arg)
{
    (void) arg;
    CHECK_INT(flags, ==, 0);
    if (listed_count < 8)
        snprintf(listed_names[listed_count], sizeof listed_names[0], "%s", name);
    listed_count++;
}

/* list: the names a quorum holds (or waiters mark), not a minority's
 * leftover; with one node frozen, the two others are walked, and the
 * frozen one costs a command timeout once (the round that asks about a
 * name the two others split on), not for its page of SCAN too: the first
 * pages go out at once, and a node beyond a quorum is waited for 250 ms. */
static void list_by_quorum(void)
{
    char text[512];
    dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=1s"), NULL);
    dlock_lock *l = dt_lock(c, "ls/held", 0);

    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    set_on("redlock:{ls/leftover}", "gone", 10000, (const int[]){1, -1});
    listed_count = 0;
    CHECK_RC(dlock_list(c, "ls/", 0, keep_name, NULL), DLOCK_OK);
    CHECK_INT(listed_count, ==, 1);
    CHECK(strcmp(listed_names[0], "ls/held") == 0);

    pause_node(0);
    int64_t t0 = dt_now_ms();
    listed_count = 0;
    CHECK_RC(dlock_list(c, "ls/", 0, keep_name, NULL), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 1000 + 900); /* 250 ms for its SCAN, 1 s for its status */
    CHECK_INT(listed_count, ==, 1);
    pause_node(1);
    CHECK_RC(dlock_list(c, "ls/", 0, keep_name, NULL), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "quorum") != NULL);
    dt_server_resume(&nodes[0]);
    dt_server_resume(&nodes[1]);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    del_everywhere("redlock:{ls/leftover}");
    listed_count = 0;
    CHECK_RC(dlock_list(c, "ls/", 0, keep_name, NULL), DLOCK_OK);
    CHECK_INT(listed_count, ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A node down (refusing) and one slow but up (CLIENT PAUSE): the slow one
 * is waited for, not counted out. A try on a lock another owner holds on
 * both up nodes is EBUSY, not "a quorum out of reach"; an extend that one
 * up node confirms and the other denies is EUNREACHABLE naming the node
 * that is down, not the slow one as "no reply yet". */
static void slow_node_is_not_down(void)
{
    start_nodes(); /* its own: it stops and restarts one */
    char text[512], port1[16];
    dlock_client *c = dt_client(url_with(text, sizeof text, "timeout=3s"), NULL);
    dlock_lock *l = dt_lock(c, "slow", 0), *mine = dt_lock(c, "slow2", 0);

    snprintf(port1, sizeof port1, ":%d", nodes[1].port);
    set_on("redlock:{slow}", "someone-else", 10000, (const int[]){0, 1, -1});
    dt_server_stop(&nodes[2]);
    CHECK_RC(dlock_acquire_for(mine, 0, 10000), DLOCK_OK);
    freeReplyObject(node_command(1, "CLIENT PAUSE 300 ALL"));
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held by someone else") != NULL);

    freeReplyObject(node_command(0, "DEL redlock:{slow2}"));
    freeReplyObject(node_command(1, "CLIENT PAUSE 300 ALL"));
    CHECK_RC(dlock_extend(mine, 10000), DLOCK_EUNREACHABLE);
    /* (the store's label, first, names every node) */
    const char *named = strstr(dlock_errmsg(), "the lock: ");
    if (named == NULL || strstr(named, port1) != NULL)
        dt_fail(__FILE__, __LINE__, "the message names the node that is up (%s): %s", port1,
                dlock_errmsg());
    dt_server_start_again(&nodes[2], 0);
    dlock_lock_free(l);
    dlock_lock_free(mine);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- nodes that are no masters */

/* One command to the server on port; NULL if it does not answer in 1 s. */
static redisReply *port_command(int port, const char *cmd)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r = NULL;
    if (c != NULL && !c->err) {
        redisSetTimeout(c, tv);
        r = redisCommand(c, cmd);
    }
    if (c != NULL)
        redisFree(c);
    return r;
}

/* Whether the replica on port has synced with its master. */
static int replica_synced(int port)
{
    redisReply *r = port_command(port, "INFO replication");
    int up = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "master_link_status:up") != NULL;
    freeReplyObject(r);
    return up;
}

/* What the client logged at warning level (or worse), every message. */
typedef struct warnings {
    pthread_mutex_t mu;
    char text[4096];
} warnings;

static void keep_warning(int level, const char *msg, void *arg)
{
    warnings *w = arg;
    (void) level;
    pthread_mutex_lock(&w->mu);
    size_t used = strlen(w->text);
    snprintf(w->text + used, sizeof w->text - used, "%s\n", msg);
    pthread_mutex_unlock(&w->mu);
}

static int warned(warnings *w, const char *says)
{
    pthread_mutex_lock(&w->mu);
    int found = strstr(w->text, says) != NULL;
    pthread_mutex_unlock(&w->mu);
    return found;
}

/* The nodes of a Redis Cluster listed as Redlock's (issue 22): each node
 * would answer MOVED for the slots it does not serve, which counted as
 * out of reach and was retried for unreachable_wait. A wrong URL, said at
 * once, naming the node and what to use (the handshake's INFO cluster). */
static void cluster_nodes_refused(void)
{
    dt_server cluster;
    char text[512];
    int p[3];

    dt_server_start(&cluster, "cluster", 0, NULL);
    CHECK(sscanf(cluster.url, "redis+cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", &p[0],
                 &p[1], &p[2]) == 3);
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", p[0], p[1],
             p[2]);
    dlock_client *c = dt_client(text, "?unreachable_wait=30s");
    dlock_lock *l = dt_lock(c, "job", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    const char *msg = dlock_errmsg();
    if (strstr(msg, " answered, but not as an independent Redis master (a node of a Redis "
                    "Cluster: cluster_enabled:1)") == NULL ||
        strstr(msg, "Redlock needs 3 independent masters") == NULL ||
        strstr(msg, "use redis+cluster://") == NULL)
        dt_fail(__FILE__, __LINE__, "want a node of a cluster named: %s", msg);
    /* and again: the node is refused from then on */
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), " answered, but not as an independent Redis master") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* one node of the cluster among two masters: the quorum of the two
     * does not hide it, and the wait is not an outage ridden out for
     * unreachable_wait (the masters answered: the URL is still wrong) */
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", nodes[0].port,
             nodes[1].port, p[0]);
    c = dt_client(text, "?unreachable_wait=30s");
    l = dt_lock(c, "job-mixed", 0);
    /* the two masters' quorum may decide a round before the cluster
     * node's handshake is answered: that round's take is a good one (two
     * independent masters hold it); once the node is known, it is refused */
    int rc;
    int64_t until = dt_now_ms() + 5000;
    for (;;) {
        t0 = dt_now_ms();
        rc = dlock_acquire(l, DLOCK_WAIT_FOREVER);
        if (rc != DLOCK_OK || dt_now_ms() > until)
            break;
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    CHECK_RC(rc, DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 2500);
    if (strstr(dlock_errmsg(), " answered, but not as an independent Redis master") == NULL)
        dt_fail(__FILE__, __LINE__, "want the node of a cluster named: %s", dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&cluster);
}

/* The same where INFO is not allowed (renamed here, an ACL elsewhere): the
 * handshake cannot tell, and the MOVED of the nodes that do not serve the
 * name's slot does. */
static void cluster_nodes_refused_by_moved(void)
{
    dt_server cluster;
    char text[512];
    int p[3];

    dt_server_start(&cluster, "cluster", 0, "--rename-command", "INFO", "", NULL);
    CHECK(sscanf(cluster.url, "redis+cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", &p[0],
                 &p[1], &p[2]) == 3);
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", p[0], p[1],
             p[2]);
    dlock_client *c = dt_client(text, "?unreachable_wait=30s");
    dlock_lock *l = dt_lock(c, "job", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    const char *msg = dlock_errmsg();
    if (strstr(msg, " answered, but not as an independent Redis master (a node of a Redis "
                    "Cluster: take: MOVED ") == NULL ||
        strstr(msg, "Redlock needs 3 independent masters") == NULL)
        dt_fail(__FILE__, __LINE__, "want a node of a cluster named by its MOVED: %s", msg);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&cluster);
}

/* Replicas listed as Redlock's masters (issue 22): a replica refuses the
 * take (READONLY), which went unsaid while two masters made the quorum,
 * and counted as out of reach (retried for unreachable_wait) when it left
 * none. A replica is refused by the client with a warning naming it; two
 * of three refused is DLOCK_ESERVER at once, every node counted once, and
 * without the script's digest the server's reply adds. */
static void replicas_refused(void)
{
    dt_server replicas[2];
    char of[32], text[512];
    warnings w = {PTHREAD_MUTEX_INITIALIZER, ""};

    snprintf(of, sizeof of, "%d", nodes[0].port);
    for (int i = 0; i < 2; i++)
        dt_server_start(&replicas[i], "redis", 0, "--replicaof", "127.0.0.1", of, NULL);
    for (int i = 0; i < 2; i++)
        DT_WAIT_UNTIL(replica_synced(replicas[i].port), 10000);

    /* one replica, two masters: the lock works, and the replica is told */
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", nodes[0].port,
             nodes[1].port, replicas[0].port);
    dlock_client *c = dt_client(text, NULL);
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, keep_warning, &w), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "replica", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    char says[160];
    snprintf(says, sizeof says,
             "127.0.0.1:%d is a replica (read-only): Redlock needs 3 independent masters",
             replicas[0].port);
    /* (told by the replica's worker, which may answer after the quorum
     * of the two masters decided the take and the release) */
    DT_WAIT_UNTIL(warned(&w, says), 2000);
    pthread_mutex_lock(&w.mu);
    if (strstr(w.text, says) == NULL || strstr(w.text, " script: ") != NULL)
        dt_fail(__FILE__, __LINE__, "want a warning '%s', got: %s", says, w.text);
    pthread_mutex_unlock(&w.mu);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* two replicas: no quorum can be made, said at once */
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", nodes[0].port,
             replicas[0].port, replicas[1].port);
    c = dt_client(text, "?unreachable_wait=30s");
    l = dt_lock(c, "replica", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 10000), DLOCK_ESERVER);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    const char *msg = dlock_errmsg();
    if (strstr(msg, "2 of 3 nodes refused this client (a quorum needs 2)") == NULL ||
        strstr(msg, "is a replica (read-only)") == NULL || strstr(msg, "; 1 answered") == NULL ||
        strstr(msg, "2 refused") != NULL || strstr(msg, " script: ") != NULL ||
        strstr(msg, "@user_script") != NULL)
        dt_fail(__FILE__, __LINE__, "want two replicas refused, one answered: %s", msg);
    dlock_lock_free(l);
    dlock_client_close(c);
    for (int i = 0; i < 2; i++)
        dt_server_stop(&replicas[i]);
}

/* A quorum out of reach at once (two ports that refuse connections): the
 * message counts every node once, and the healthy node, a little slower
 * (a first connection, the script loaded), as answered every time, not
 * "0 answered" one attempt in two (issue 22). */
static void out_of_reach_counts_every_node(void)
{
    char text[512];
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:1,127.0.0.1:2", nodes[0].port);
    for (int round = 0; round < 5; round++) {
        dlock_client *c = dt_client(text, NULL); /* a new one: its first connection */
        dlock_lock *l = dt_lock(c, "counted", 0);
        CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
        const char *msg = dlock_errmsg();
        /* (the nodes out of reach counted once, in the head: issue 22) */
        if (strstr(msg, "2 of 3 nodes are out of reach (a quorum needs 2)") == NULL ||
            strstr(msg, "); 1 answered") == NULL || strstr(msg, "2 out of reach") != NULL ||
            strstr(msg, "127.0.0.1:1, 127.0.0.1:2 (") == NULL)
            dt_fail(__FILE__, __LINE__, "attempt %d: want 2 out of reach, 1 answered: %s", round,
                    msg);
        dlock_lock_free(l);
        dlock_client_close(c);
    }
}

typedef struct taker {
    dlock_lock *lock;
    int rc;
} taker;

static void *take_forever(void *p)
{
    taker *t = p;
    t->rc = dlock_acquire(t->lock, DLOCK_WAIT_FOREVER);
    return NULL;
}

/* A quorum out of reach from the start (two nodes where nothing listens,
 * one that answers): a wait without a bound gives up as for one server
 * where nothing listens (its second: the core's first contact), with
 * DLOCK_EUNREACHABLE naming the nodes, not after unreachable_wait (it
 * rode out 30 s because one node answered). An outage of nodes this client
 * had reached is still ridden out: two of three stopped for longer than
 * that second, then started again, and the wait takes the lock. */
static void quorum_never_reached_fails_fast(void)
{
    char text[512];
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:1,127.0.0.1:2", nodes[0].port);
    dlock_client *c = dt_client(text, "?unreachable_wait=20s");
    dlock_lock *l = dt_lock(c, "never-quorum", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, DLOCK_WAIT_FOREVER), DLOCK_EUNREACHABLE);
    int64_t took = dt_now_ms() - t0;
    const char *msg = dlock_errmsg();
    if (took > 2500)
        dt_fail(__FILE__, __LINE__, "a quorum never reached: gave up after %lld ms: %s",
                (long long) took, msg);
    if (strstr(msg, "2 of 3 nodes are out of reach (a quorum needs 2)") == NULL ||
        strstr(msg, "127.0.0.1:1, 127.0.0.1:2 (") == NULL ||
        strstr(msg, "2 never answered this client") == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not name what is out of reach: %s", msg);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* reached, then two nodes down for 2 s: an outage, ridden out */
    start_nodes(); /* its own: it stops and restarts them */
    c = dt_client(url_with(text, sizeof text, "unreachable_wait=20s"), NULL);
    l = dt_lock(c, "outage", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dt_server_stop(&nodes[1]);
    dt_server_stop(&nodes[2]);
    taker t = {l, -1};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, take_forever, &t) == 0);
    dt_sleep_ms(2000); /* the outage: longer than a store never reached is given */
    dt_server_start_again(&nodes[1], 0);
    dt_server_start_again(&nodes[2], 0);
    pthread_join(thread, NULL);
    if (t.rc != DLOCK_OK)
        dt_fail(__FILE__, __LINE__, "an outage of reached nodes was not ridden out: %d (%s)", t.rc,
                dlock_errmsg());
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* How many times `part` is in text. */
static int times_in(const char *text, const char *part)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, part)) != NULL; p += strlen(part))
        n++;
    return n;
}

/* A quorum out of reach, said whole: the warning of each retry and the
 * failure end as written (the log's 512 bytes cut the warning mid-word,
 * "(never rea"), and each node's reason is said once, after the nodes it
 * is of, not once per node. Five nodes, four where nothing listens, and a
 * long name: the longest such message a user meets. */
static void quorum_message_whole(void)
{
    char text[512], name[301];
    warnings w = {PTHREAD_MUTEX_INITIALIZER, ""};

    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf(text, sizeof text,
             "redlock://127.0.0.1:1,127.0.0.1:%d,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4",
             nodes[0].port);
    dlock_client *c = dt_client(text, NULL);
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, keep_warning, &w), DLOCK_OK);
    dlock_lock *l = dt_lock(c, name, 0);
    CHECK_RC(dlock_acquire(l, DLOCK_WAIT_FOREVER), DLOCK_EUNREACHABLE);
    const char *msg = dlock_errmsg();
    const char *end = "no quorum until they are started (or the URL mended)";
    size_t len = strlen(msg);
    if (len < strlen(end) || strcmp(msg + len - strlen(end), end) != 0)
        dt_fail(__FILE__, __LINE__, "the failure is cut: %s", msg);
    if (times_in(msg, "Connection refused") != 1 ||
        strstr(msg, "127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3, 127.0.0.1:4 (connect: ") == NULL)
        dt_fail(__FILE__, __LINE__, "want the four nodes, then their reason once: %s", msg);
    pthread_mutex_lock(&w.mu);
    const char *retry = strstr(w.text, "; trying again in ");
    const char *eol = retry != NULL ? strchr(retry, '\n') : NULL;
    static const char given[] = " ms (never reached yet: given 1000 ms)";
    if (eol == NULL || (size_t) (eol - retry) < strlen(given) ||
        strncmp(eol - strlen(given), given, strlen(given)) != 0 ||
        times_in(w.text, "(connect: Connection refused)") != 1)
        dt_fail(__FILE__, __LINE__, "want the retry's warning whole: %s", w.text);
    pthread_mutex_unlock(&w.mu);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A status with a quorum out of reach names the nodes that did not answer,
 * not the one that did: its status reply (an array) was read as a step's
 * integer reply, and the healthy node called "unexpected reply". */
static void status_names_silent_nodes_only(void)
{
    char text[512], up[32];
    snprintf(text, sizeof text, "redlock://127.0.0.1:%d,127.0.0.1:1,127.0.0.1:2", nodes[0].port);
    snprintf(up, sizeof up, "127.0.0.1:%d", nodes[0].port);
    dlock_client *c = dt_client(text, NULL);
    dlock_status st;
    CHECK_RC(dlock_query(c, "status-quorum", 0, &st), DLOCK_EUNREACHABLE);
    /* in the words of a take's (trial42: "a quorum of 2 of 3 nodes is out
     * of reach (1 answered)" read oddly beside them) */
    const char *msg = dlock_errmsg(), *named = strstr(msg, "(a quorum needs 2): ");
    if (named == NULL || strstr(named, up) != NULL ||
        strstr(msg, "2 of 3 nodes are out of reach (a quorum needs 2)") == NULL ||
        strstr(msg, "; 1 answered") == NULL ||
        strstr(msg, "127.0.0.1:1, 127.0.0.1:2 (connect: ") == NULL ||
        strstr(msg, "unexpected reply") != NULL)
        dt_fail(__FILE__, __LINE__, "want the two silent nodes named, not %s: %s", up, msg);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"bad_urls", bad_urls},
        {"one_node_down", one_node_down},
        {"majority_down", majority_down},
        {"fails_fast", fails_fast},
        {"release_reaches_frozen_node", release_reaches_frozen_node},
        {"budget_bounds_frozen_majority", budget_bounds_frozen_majority},
        {"release_and_close_past_frozen_node", release_and_close_past_frozen_node},
        {"fences_increase_across_faults", fences_increase_across_faults},
        {"waiter_gets_it", waiter_gets_it},
        {"renewal_by_quorum", renewal_by_quorum},
        {"simple_mode", simple_mode},
        {"fences_after_wiped_restart", fences_after_wiped_restart},
        {"fence_on_quorum_before_return", fence_on_quorum_before_return},
        {"many_threads_past_frozen_node", many_threads_past_frozen_node},
        {"five_nodes", five_nodes},
        {"query_by_quorum", query_by_quorum},
        {"query_waits_for_late_lease", query_waits_for_late_lease},
        {"waiters_counted", waiters_counted},
        {"force_unlock_by_quorum", force_unlock_by_quorum},
        {"adopt_by_quorum", adopt_by_quorum},
        {"list_by_quorum", list_by_quorum},
        {"slow_node_is_not_down", slow_node_is_not_down},
        {"cluster_nodes_refused", cluster_nodes_refused},
        {"cluster_nodes_refused_by_moved", cluster_nodes_refused_by_moved},
        {"replicas_refused", replicas_refused},
        {"out_of_reach_counts_every_node", out_of_reach_counts_every_node},
        {"quorum_never_reached_fails_fast", quorum_never_reached_fails_fast},
        {"quorum_message_whole", quorum_message_whole},
        {"status_names_silent_nodes_only", status_names_silent_nodes_only},
    };
    /* once for the program, before any test forks (no threads yet) */
    start_nodes();
    int rc = DT_RUN(tests);
    for (int i = 0; i < NNODES; i++)
        dt_server_stop(&nodes[i]);
    return rc;
}
