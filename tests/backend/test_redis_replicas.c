/* SPDX-License-Identifier: MIT */
/* test_redis_replicas.c - option wait=N (issue 22): a grant, renewal or
 * release counts only once N replicas acknowledged it (WAIT), and a WAIT
 * does not hold back the other threads' commands; redis:// at a replica
 * is refused with a hint (issue 23).
 *
 * main() starts a master and one replica of it (plain redis-servers) once;
 * each test runs in a process of its own (dt_run). A replica that falls
 * behind is one stopped with SIGSTOP: the master keeps its link, and WAIT
 * counts it out until it answers again. */
#include "../support/harness.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static dt_server master, replica;

static redisReply *command(int port, const char *fmt, ...)
{
    va_list ap;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL || c->err)
        dt_fail(__FILE__, __LINE__, "cannot connect to port %d", port);
    redisSetTimeout(c, tv);
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    if (r == NULL)
        dt_fail(__FILE__, __LINE__, "no reply from port %d", port);
    return r;
}

static long long exists(int port, const char *key)
{
    redisReply *r = command(port, "EXISTS %s", key);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* Whether a client of the master is blocked in WAIT now. */
static int blocked_in_wait(void)
{
    redisReply *r = command(master.port, "CLIENT LIST");
    int yes = r->type == REDIS_REPLY_STRING && strstr(r->str, "cmd=wait") != NULL;
    freeReplyObject(r);
    return yes;
}

/* Both in sync: the replica is linked and has what the master has. */
static void wait_in_sync(void)
{
    DT_WAIT_UNTIL(exists(replica.port, "dlock:sync-probe") == 0, 5000);
    freeReplyObject(command(master.port, "SET dlock:sync-probe 1"));
    DT_WAIT_UNTIL(exists(replica.port, "dlock:sync-probe") == 1, 5000);
    freeReplyObject(command(master.port, "DEL dlock:sync-probe"));
    DT_WAIT_UNTIL(exists(replica.port, "dlock:sync-probe") == 0, 5000);
}

/* With the replica in sync: every step counts, and what each step did is
 * on the replica when it returns (WAIT came first). */
static void confirmed(void)
{
    wait_in_sync();
    dlock_client *c = dt_client(master.url, "?wait=1&lease=1s");
    dlock_lock *l = dt_lock(c, "ok", 0);
    dt_lost_box lost = {0};
    dlock_lock_on_lost(l, dt_on_lost, &lost);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_INT(exists(replica.port, "dlock:{ok}"), ==, 1);
    /* renewed (every third of a second) and confirmed for three leases */
    int64_t until = dt_now_ms() + 3000;
    while (dt_now_ms() < until && !atomic_load(&lost.lost))
        dt_sleep_ms(100);
    CHECK_INT(atomic_load(&lost.lost), ==, 0);
    CHECK_RC(dlock_lock_verify(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(exists(replica.port, "dlock:{ok}"), ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* The replica does not acknowledge: the grant is given back and the
 * attempt fails saying why; a release still releases. */
static void replica_behind_refuses(void)
{
    wait_in_sync();
    dlock_client *c = dt_client(master.url, "?wait=1&wait_timeout=300ms");
    dlock_lock *l = dt_lock(c, "behind", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);

    dt_server_pause(&replica);
    CHECK_RC(dlock_release(l), DLOCK_OK); /* released on the master; a warning */
    CHECK_INT(exists(master.port, "dlock:{behind}"), ==, 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    int64_t took = dt_now_ms() - t0;
    if (strstr(dlock_errmsg(), "wait=1") == NULL || strstr(dlock_errmsg(), "gave it back") == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not say why: %s", dlock_errmsg());
    printf("refused after %lld ms: %s\n", (long long) took, dlock_errmsg());
    CHECK_INT(exists(master.port, "dlock:{behind}"), ==, 0); /* given back */
    CHECK_INT(took, <, 3000);
    dt_server_resume(&replica);

    wait_in_sync();
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A holder whose renewals the replica stops acknowledging is told it lost
 * the lock within about a lease: a failover then would lose it. */
static void renewal_unconfirmed_is_lost(void)
{
    wait_in_sync();
    dlock_client *c = dt_client(master.url, "?wait=1&wait_timeout=200ms&lease=1500ms");
    dlock_lock *l = dt_lock(c, "renewed", 0);
    dt_lost_box lost = {0};
    dlock_lock_on_lost(l, dt_on_lost, &lost);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    dt_server_pause(&replica);
    DT_WAIT_UNTIL(atomic_load(&lost.lost) == 1, 5000);
    printf("told %lld ms after the replica stopped: %s\n",
           (long long) (atomic_load(&lost.at_ms) - t0), lost.why);
    CHECK_INT(atomic_load(&lost.at_ms) - t0, <=, 2500);
    dt_server_resume(&replica);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    dlock_release(l); /* ELOST, or OK if the key was still there */
    dlock_lock_free(l);
    dlock_client_close(c);
}

typedef struct attempt {
    dlock_lock *l;
    atomic_int done;
    int rc;
} attempt;

static void *release_in_thread(void *arg)
{
    attempt *a = arg;
    a->rc = dlock_release(a->l);
    atomic_store(&a->done, 1);
    return NULL;
}

/* While one thread's step waits for the replica (its release, in WAIT),
 * another thread of the same client, on the same pooled connection
 * (pool=1), is answered: the WAIT is still blocked when it is. */
static void wait_does_not_block_others(void)
{
    wait_in_sync();
    dlock_client *c = dt_client(master.url, "?wait=1&wait_timeout=2s&timeout=4s&pool=1");
    attempt a = {.l = dt_lock(c, "slow", 0)};
    pthread_t t;

    CHECK_RC(dlock_try_acquire(a.l), DLOCK_OK);
    dt_server_pause(&replica);
    CHECK(pthread_create(&t, NULL, release_in_thread, &a) == 0);
    DT_WAIT_UNTIL(blocked_in_wait() || atomic_load(&a.done), 3000);
    dlock_status st;
    CHECK_RC(dlock_query(c, "other", 0, &st), DLOCK_OK);
    CHECK_INT(atomic_load(&a.done), ==, 0);
    CHECK(blocked_in_wait()); /* answered while the WAIT still waits */
    pthread_join(t, NULL);
    CHECK_RC(a.rc, DLOCK_OK); /* released on the master */
    dt_server_resume(&replica);
    dlock_lock_free(a.l);
    dlock_client_close(c);
}

static void expect_open_fails(const char *url, const char *says)
{
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    if (strstr(dlock_errmsg(), says) == NULL)
        dt_fail(__FILE__, __LINE__, "%s: the message does not say '%s': %s", url, says,
                dlock_errmsg());
}

static void bad_options(void)
{
    char url[256];
    snprintf(url, sizeof url, "%s?wait=x", master.url);
    expect_open_fails(url, "wait=x");
    snprintf(url, sizeof url, "%s?wait=-1", master.url);
    expect_open_fails(url, "wait=-1");
    snprintf(url, sizeof url, "%s?wait=1&wait_timeout=0", master.url);
    expect_open_fails(url, "wait_timeout");
    snprintf(url, sizeof url, "%s?wait=1&wait_timeout=5s&timeout=5s", master.url);
    expect_open_fails(url, "less than the request timeout");

    snprintf(url, sizeof url, "%s?wait_timeout=1s", master.url);
    expect_open_fails(url, "give wait=N too");

    /* More replicas asked than the master has: a setting, not an outage.
     * Refused at once (ESERVER, which a wait does not wait out), even by a
     * wait, and nothing left held. */
    wait_in_sync();
    dlock_client *c = dt_client(master.url, "?wait=2&wait_timeout=200ms");
    dlock_lock *l = dt_lock(c, "two", 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_ESERVER);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    if (strstr(dlock_errmsg(), "1 connected replica,") == NULL)
        dt_fail(__FILE__, __LINE__, "the message does not count: %s", dlock_errmsg());
    CHECK_INT(exists(master.port, "dlock:{two}"), ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* redis:// at the replica: every change is refused (READONLY), with what
 * to use instead (the master, or Sentinel to follow it), and reading
 * still works. A forced unlock (a plain refusal of another script) says
 * the same. */
static void url_at_replica(void)
{
    wait_in_sync();
    dlock_client *c = dt_client(replica.url, NULL);
    dlock_lock *l = dt_lock(c, "at-replica", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    const char *msg = dlock_errmsg();
    if (strstr(msg, "this server is a replica (read-only") == NULL ||
        strstr(msg, "point the URL at the master, or use redis+sentinel://") == NULL ||
        strstr(msg, "script: ") != NULL)
        dt_fail(__FILE__, __LINE__, "acquire at the replica: %s", msg);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK_RC(dlock_force_unlock(c, "at-replica", 0), DLOCK_ESERVER);
    if (strstr(dlock_errmsg(), "this server is a replica (read-only") == NULL)
        dt_fail(__FILE__, __LINE__, "force unlock at the replica: %s", dlock_errmsg());
    CHECK(!dt_query(c, "at-replica", 0).held); /* reads are fine there */
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"confirmed", confirmed},
        {"replica_behind_refuses", replica_behind_refuses},
        {"renewal_unconfirmed_is_lost", renewal_unconfirmed_is_lost},
        {"wait_does_not_block_others", wait_does_not_block_others},
        {"bad_options", bad_options},
        {"url_at_replica", url_at_replica},
    };
    char of[32];
    dt_server_start(&master, "redis", 0, "--repl-diskless-sync-delay", "0", NULL);
    snprintf(of, sizeof of, "%d", master.port);
    dt_server_start(&replica, "redis", 0, "--repl-diskless-sync-delay", "0", "--replicaof",
                    "127.0.0.1", of, NULL);
    int rc = DT_RUN(tests);
    dt_server_stop(&replica);
    dt_server_stop(&master);
    return rc;
}
