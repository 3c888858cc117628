/* SPDX-License-Identifier: MIT */
/* test_redis_lock.c - the single-Redis lock against a real redis-server:
 * acquire/release, fences, reentrancy, ownership, leases, renewal, waiting,
 * operators' calls and hand-over by token. */
#include "../support/harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dt_server srv;
static dlock_client *client;

static void setup(const char *options)
{
    char url[256];
    dt_server_start(&srv, "redis", 0, NULL);
    snprintf(url, sizeof url, "%s%s", srv.url, options != NULL ? options : "");
    CHECK_RC(dlock_client_open(url, &client), DLOCK_OK);
}

static dlock_lock *open_lock(const char *name, unsigned flags)
{
    dlock_lock *l = NULL;
    CHECK_RC(dlock_lock_open(client, name, flags, &l), DLOCK_OK);
    return l;
}

static void acquire_release(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("job", 0), *b = open_lock("job", 0);

    CHECK_RC(dlock_try_acquire(a), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 1);
    CHECK(dlock_lock_fence(a) > 0);
    CHECK_RC(dlock_lock_check(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held by someone else") != NULL);

    dlock_status st;
    CHECK_RC(dlock_query(client, "job", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, dlock_lock_token(a)) == 0);
    /* the counter is the holder's fence (b's refused attempt took none) */
    CHECK_INT(st.last_fence, ==, dlock_lock_fence(a));
    CHECK(st.lease_ms > 20000 && st.lease_ms <= 30000);

    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 0);
    CHECK_RC(dlock_query(client, "job", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0);
    CHECK_INT(st.lease_ms, ==, -1);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void fences_increase(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("fenced", 0), *b = open_lock("fenced", 0);
    uint64_t last = 0;

    for (int i = 0; i < 20; i++) {
        dlock_lock *l = i % 2 ? a : b;
        CHECK_RC(dlock_acquire_for(l, 0, 10000), DLOCK_OK);
        CHECK_INT(dlock_lock_fence(l), >, last);
        last = dlock_lock_fence(l);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    /* Force-unlock keeps the counter: the next holder still gets more. */
    CHECK_RC(dlock_acquire_for(a, 0, 10000), DLOCK_OK);
    CHECK_RC(dlock_force_unlock(client, "fenced", 0), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(b, 0, 10000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(b), >, dlock_lock_fence(a));
    dlock_status st;
    CHECK_RC(dlock_query(client, "fenced", 0, &st), DLOCK_OK);
    CHECK_INT(st.last_fence, ==, dlock_lock_fence(b));
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void reentrancy(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("re", 0), *b = open_lock("re", 0);
    dlock_status st;

    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(a);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(a, 0, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 3);
    CHECK_INT(dlock_lock_fence(a), ==, fence); /* reentry mints no fence */
    CHECK_RC(dlock_query(client, "re", 0, &st), DLOCK_OK);
    CHECK_INT(st.holds, ==, 1); /* counts are the handle's; the server knows the owner */
    CHECK(st.lease_ms > 20000); /* re-entry did not shorten the renewed 30 s lease */

    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(a), ==, 1);
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_release(a), DLOCK_ENOTOWNER);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void non_owner_release_refused(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("mine", 0), *b = open_lock("mine", 0), *thief = NULL;
    dlock_status st;

    CHECK_RC(dlock_release(b), DLOCK_ENOTOWNER); /* never held */
    CHECK_RC(dlock_acquire_for(a, 0, 10000), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_ENOTOWNER);
    CHECK(strstr(dlock_errmsg(), "not held by this handle") != NULL);
    /* A handle that claims a token it does not have is refused too. */
    CHECK_RC(dlock_lock_adopt(client, "mine", "0123456789abcdef0123456789abcdef", 0, &thief),
             DLOCK_ENOTOWNER);
    CHECK(thief == NULL);
    CHECK_RC(dlock_query(client, "mine", 0, &st), DLOCK_OK);
    CHECK(strcmp(st.owner, dlock_lock_token(a)) == 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void adopt_by_token(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("handover", 0), *b = NULL;
    dlock_client *other;

    CHECK_RC(dlock_acquire_for(a, 0, 20000), DLOCK_OK);
    CHECK_RC(dlock_client_open(srv.url, &other), DLOCK_OK);
    CHECK_RC(dlock_lock_adopt(other, "handover", dlock_lock_token(a), 0, &b), DLOCK_OK);
    CHECK_INT(dlock_lock_holds(b), ==, 1);
    CHECK_INT(dlock_lock_fence(b), ==, dlock_lock_fence(a));
    CHECK(dlock_lock_remaining_ms(b) > 10000);
    CHECK_RC(dlock_keepalive(b), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_status st;
    CHECK_RC(dlock_query(client, "handover", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0);
    dlock_lock_free(b);
    dlock_client_close(other);
    /* a's lock was released by b: a learns it at its next call */
    CHECK_RC(dlock_release(a), DLOCK_ELOST);
    dlock_lock_free(a);
    dlock_client_close(client);
}

static int lost_calls;
static int64_t lost_at;
static char lost_why[256];
static void on_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l;
    (void) arg;
    CHECK_RC(code, DLOCK_ELOST);
    snprintf(lost_why, sizeof lost_why, "%s", why);
    lost_at = dt_now_ms();
    __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

static void fixed_lease_expires(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("short", 0), *b = open_lock("short", 0);

    dlock_lock_on_lost(a, on_lost, NULL);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire_for(a, 0, 1000), DLOCK_OK);
    CHECK(dlock_lock_remaining_ms(a) <= 1000);
    /* b gets it only once the server has expired a's lease */
    CHECK_RC(dlock_acquire_for(b, 5000, 5000), DLOCK_OK);
    int64_t b_at = dt_now_ms();
    CHECK_INT(b_at - t0, >=, 950);
    CHECK_INT(dlock_lock_fence(b), >, dlock_lock_fence(a));
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 5000);
    CHECK(strstr(lost_why, "expired") != NULL);
    /* a was told before b could have the lock */
    CHECK_INT(lost_at, <=, b_at);
    CHECK_RC(dlock_lock_check(a), DLOCK_ELOST);
    CHECK_RC(dlock_release(a), DLOCK_ELOST);
    CHECK_RC(dlock_release(a), DLOCK_ENOTOWNER); /* reported once, then cleared */
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void renewal_outlives_lease(void)
{
    setup("?lease=300ms");
    dlock_lock *a = open_lock("renewed", 0), *b = open_lock("renewed", 0);

    dlock_lock_on_lost(a, on_lost, NULL);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    int64_t until = dt_now_ms() + 2000; /* more than six leases */
    while (dt_now_ms() < until) {
        CHECK_RC(dlock_lock_check(a), DLOCK_OK);
        dt_sleep_ms(50);
    }
    CHECK_RC(dlock_try_acquire(b), DLOCK_EBUSY);
    dlock_status st;
    CHECK_RC(dlock_query(client, "renewed", 0, &st), DLOCK_OK);
    CHECK(st.lease_ms > 0 && st.lease_ms <= 300);
    CHECK_INT(lost_calls, ==, 0);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void deleted_key_reported_lost(void)
{
    setup("?lease=600ms");
    dlock_lock *a = open_lock("victim", 0);

    dlock_lock_on_lost(a, on_lost, NULL);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    dt_server_cli(&srv, "DEL dlock:{victim}");
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 3000);
    CHECK(strstr(lost_why, "renewal refused") != NULL);
    CHECK_RC(dlock_lock_check(a), DLOCK_ELOST);
    CHECK_RC(dlock_release(a), DLOCK_ELOST);
    dlock_lock_free(a);
    dlock_client_close(client);
}

static void server_restart_reported_lost(void)
{
    setup("?lease=600ms&timeout=300ms");
    dlock_lock *a = open_lock("restart", 0);

    dlock_lock_on_lost(a, on_lost, NULL);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    dt_server_restart(&srv, DT_KILL | DT_WIPE); /* same port, empty: the lock is gone */
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 5000);
    CHECK_RC(dlock_lock_check(a), DLOCK_ELOST);
    /* The client reconnects by itself. */
    dlock_lock *b = open_lock("restart", 0);
    CHECK_RC(dlock_try_acquire(b), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

typedef struct waiter_arg {
    dlock_lock *lock;
    int rc;
    int64_t acquired_at;
} waiter_arg;

static void *wait_for_lock(void *p)
{
    waiter_arg *w = p;
    w->rc = dlock_acquire(w->lock, 20000);
    w->acquired_at = dt_now_ms();
    return NULL;
}

static void waiter_woken_by_release(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("wake", 0);
    waiter_arg w = {.lock = open_lock("wake", 0)};
    pthread_t t;
    dlock_status st;

    CHECK_RC(dlock_acquire_for(a, 0, 30000), DLOCK_OK);
    pthread_create(&t, NULL, wait_for_lock, &w);
    /* the waiter is queued on the server: a condition, not a sleep */
    DT_WAIT_UNTIL(dlock_query(client, "wake", 0, &st) == DLOCK_OK && st.waiters == 1, 5000);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(a), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    /* woken by the release, far sooner than the 30 s lease */
    CHECK_INT(w.acquired_at - released, <, 5000);
    CHECK_INT(dlock_lock_fence(w.lock), >, dlock_lock_fence(a));
    CHECK_RC(dlock_query(client, "wake", 0, &st), DLOCK_OK);
    CHECK(strcmp(st.owner, dlock_lock_token(w.lock)) == 0);
    CHECK_INT(st.waiters, ==, 0);
    CHECK_RC(dlock_release(w.lock), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(w.lock);
    dlock_client_close(client);
}

static void wait_times_out_and_leaves_queue(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("busy", 0), *b = open_lock("busy", 0);
    dlock_status st;

    CHECK_RC(dlock_acquire_for(a, 0, 30000), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(b, 300), DLOCK_ETIMEDOUT);
    CHECK_INT(dt_now_ms() - t0, >=, 290);
    CHECK(strstr(dlock_errmsg(), "still held") != NULL);
    CHECK_RC(dlock_query(client, "busy", 0, &st), DLOCK_OK);
    CHECK_INT(st.waiters, ==, 0);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_query(client, "busy", 0, &st), DLOCK_OK);
    CHECK_INT(st.held, ==, 0); /* not handed to the waiter that gave up */
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void handover_keeps_fifo_order(void)
{
    setup(NULL);
    enum { N = 5 };
    dlock_lock *holder = open_lock("fifo", 0);
    waiter_arg w[N];
    pthread_t t[N];
    dlock_status st;

    CHECK_RC(dlock_acquire_for(holder, 0, 30000), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        w[i] = (waiter_arg){.lock = open_lock("fifo", 0)};
        pthread_create(&t[i], NULL, wait_for_lock, &w[i]);
        DT_WAIT_UNTIL(dlock_query(client, "fifo", 0, &st) == DLOCK_OK &&
                          st.waiters == (unsigned) i + 1,
                      5000);
    }
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        /* the i-th waiter holds the lock now; the others still wait */
        DT_WAIT_UNTIL(dlock_query(client, "fifo", 0, &st) == DLOCK_OK &&
                          strcmp(st.owner, dlock_lock_token(w[i].lock)) == 0,
                      5000);
        pthread_join(t[i], NULL);
        CHECK_RC(w[i].rc, DLOCK_OK);
        if (i > 0)
            CHECK_INT(dlock_lock_fence(w[i].lock), >, dlock_lock_fence(w[i - 1].lock));
        CHECK_RC(dlock_release(w[i].lock), DLOCK_OK);
    }
    for (int i = 0; i < N; i++)
        dlock_lock_free(w[i].lock);
    dlock_lock_free(holder);
    dlock_client_close(client);
}

static void overlapping_calls_on_one_handle(void)
{
    setup(NULL);
    dlock_lock *a = open_lock("shared-handle", 0), *b = open_lock("shared-handle", 0);
    waiter_arg w = {.lock = b};
    pthread_t t;
    dlock_status st;

    CHECK_RC(dlock_acquire_for(a, 0, 30000), DLOCK_OK);
    pthread_create(&t, NULL, wait_for_lock, &w);
    DT_WAIT_UNTIL(dlock_query(client, "shared-handle", 0, &st) == DLOCK_OK && st.waiters == 1,
                  5000);
    CHECK_RC(dlock_release(b), DLOCK_EINVAL); /* b is busy waiting in another thread */
    CHECK(strstr(dlock_errmsg(), "in use") != NULL);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
}

static void extend_and_keepalive(void)
{
    setup("?lease=400ms");
    dlock_lock *a = open_lock("ext", 0);
    dlock_status st;

    CHECK_RC(dlock_extend(a, 1000), DLOCK_ENOTOWNER);
    CHECK_RC(dlock_acquire_for(a, 0, 500), DLOCK_OK);
    CHECK_RC(dlock_extend(a, 0), DLOCK_EINVAL);
    CHECK_RC(dlock_extend(a, 20000), DLOCK_OK);
    CHECK_RC(dlock_query(client, "ext", 0, &st), DLOCK_OK);
    CHECK(st.lease_ms > 10000);
    CHECK(dlock_lock_remaining_ms(a) > 10000);
    CHECK_RC(dlock_extend(a, 300), DLOCK_OK);
    CHECK_RC(dlock_keepalive(a), DLOCK_OK);
    dt_sleep_ms(1200); /* three of the client's 400 ms leases: renewals keep it */
    CHECK_RC(dlock_lock_check(a), DLOCK_OK);
    CHECK_RC(dlock_query(client, "ext", 0, &st), DLOCK_OK);
    CHECK(strcmp(st.owner, dlock_lock_token(a)) == 0);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_client_close(client);
}

static void count_holders(const dlock_holder *h, void *arg)
{
    int *n = arg;
    (*n)++;
    /* a record the client could not write: the token alone */
    CHECK(h->pid == 0 && h->host[0] == '\0' && h->label[0] == '\0');
}

/* Who holds a lock: one record per client, P:owner:<client id>, found from
 * the token's first 16 digits; keys of locks and records never mix; a
 * store refusing the record still locks. */
static void owner_records(void)
{
    setup("?label=batch%20one");
    dlock_lock *a = open_lock("rec", 0), *b = open_lock("rec2", 0);
    char key[64], want[512], host[256];

    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(b, 0), DLOCK_OK);
    snprintf(key, sizeof key, "dlock:owner:%.16s", dlock_lock_token(a));
    CHECK(gethostname(host, sizeof host) == 0);
    snprintf(want, sizeof want, "dlock1 %s %ld ", host, (long) getpid());
    const char *rec = dt_server_cli(&srv, "GET %s", key);
    CHECK(strncmp(rec, want, strlen(want)) == 0);
    CHECK(strstr(rec, " batch one") != NULL);
    long ttl = strtol(dt_server_cli(&srv, "PTTL %s", key), NULL, 10);
    CHECK(ttl > 47L * 3600 * 1000 && ttl <= 48L * 3600 * 1000);
    /* one record for the client's holds */
    CHECK_INT(strtol(dt_server_cli(&srv, "EVAL \"return #redis.call('KEYS', "
                                         "'dlock:owner:*')\" 0"),
                     NULL, 10),
              ==, 1);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    CHECK_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(client);
    /* closed, with nothing left held: its record goes with it */
    CHECK_INT(strtol(dt_server_cli(&srv, "EXISTS %s", key), NULL, 10), ==, 0);
    /* a hold left in the store keeps its client's record after the close */
    CHECK_RC(dlock_client_open(srv.url, &client), DLOCK_OK);
    a = open_lock("left", 0);
    CHECK_RC(dlock_acquire_for(a, 0, 30000), DLOCK_OK);
    snprintf(key, sizeof key, "dlock:owner:%.16s", dlock_lock_token(a));
    dlock_lock_detach(a);
    dlock_client_close(client);
    CHECK_INT(strtol(dt_server_cli(&srv, "EXISTS %s", key), NULL, 10), ==, 1);

    /* a user that may lock but not write records: locking works, the
     * holder shows with its token only */
    dt_server_cli(&srv, "ACL SETUSER lockonly on '>pw' '~dlock:{*' '&*' +@all");
    char url[256];
    snprintf(url, sizeof url, "redis://lockonly:pw@127.0.0.1:%d", srv.port);
    CHECK_RC(dlock_client_open(url, &client), DLOCK_OK);
    a = open_lock("rec", 0);
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    int n = 0;
    dlock_client *admin = NULL;
    CHECK_RC(dlock_client_open(srv.url, &admin), DLOCK_OK);
    CHECK_RC(dlock_query_holders(admin, "rec", 0, count_holders, &n), DLOCK_OK);
    CHECK_INT(n, ==, 1);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_client_close(client);
    dlock_client_close(admin);
}

static void keep_name(const char *name, unsigned flags, void *arg)
{
    (void) flags;
    strcat((char *) arg, name);
    strcat((char *) arg, ";");
}

/* The keys of readers and queues outlive their members until a script
 * touches the lock: a lock whose holders all lapsed is not listed. */
static void list_skips_lapsed_holders(void)
{
    setup(NULL);
    dlock_lock *r = open_lock("lapsed", DLOCK_READ), *m = open_lock("held", 0);
    char names[256] = "";

    CHECK_RC(dlock_acquire_for(r, 0, 300), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    CHECK_RC(dlock_list(client, "", 0, keep_name, names), DLOCK_OK);
    CHECK(strcmp(names, "held;lapsed;") == 0);
    dlock_lock_detach(r); /* as a reader that died */
    dt_sleep_ms(600);     /* the fault: its lease runs out */
    CHECK_INT(strtol(dt_server_cli(&srv, "EXISTS dlock:{lapsed}:rw:holders"), NULL, 10), ==, 1);
    names[0] = '\0';
    CHECK_RC(dlock_list(client, "", 0, keep_name, names), DLOCK_OK);
    CHECK(strcmp(names, "held;") == 0);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_client_close(client);
}

/* redis:// at a Redis Sentinel's port (issue 22): the sentinel knows no
 * EVALSHA, and its refusal echoes the command's first arguments ("ERR
 * unknown command 'EVALSHA', with args beginning with: '<digest>' '1'
 * 'dlock:{job}' '<owner token>' ..."). No script is sent now: the
 * connection's handshake finds the sentinel (redis_mode:sentinel) and says
 * so as of another service at the port, DLOCK_EUNREACHABLE (exit 69; it
 * was the refusal of the script, DLOCK_ESERVER), with the hint, and
 * neither the owner token nor the digest. */
static void sentinel_port_leaks_nothing(void)
{
    dt_server group;
    char url[256];
    int port = 0;

    dt_server_start(&group, "sentinel", 0, NULL);
    const char *first = strstr(group.url, "://127.0.0.1:");
    CHECK(first != NULL && sscanf(first, "://127.0.0.1:%d", &port) == 1);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    CHECK_RC(dlock_client_open(url, &client), DLOCK_OK);
    dlock_lock *l = open_lock("job", 0);
    char token[64];
    snprintf(token, sizeof token, "%s", dlock_lock_token(l));
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    const char *msg = dlock_errmsg();
    if (strstr(msg, "answered, but not as a Redis server (a Redis Sentinel") == NULL ||
        strstr(msg, "redis+sentinel://") == NULL || strstr(msg, token) != NULL ||
        strstr(msg, "with args beginning") != NULL || strstr(msg, "dlock:{job}") != NULL)
        dt_fail(__FILE__, __LINE__, "want the reason and the hint, no arguments: %s", msg);
    dlock_lock_free(l);
    dlock_client_close(client);
    dt_server_stop(&group);
}

/* A store can come back with an older state: a failover to a replica that
 * missed the last writes. Here the release of an earlier hold is lost, so
 * the hold is there again under the owner token it had. The handle's next
 * acquisition is a new owner: it neither takes the stale hold over (as its
 * own, with whatever fence the store's counter gives, perhaps below one
 * handed out since) nor renews it as its own (its own hold gone, the stale
 * one back: a loss, reported). */
static void stale_hold_is_not_mine(void)
{
    setup("?lease=600ms");
    dlock_lock *a = open_lock("stale", 0);
    char old[80];

    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    snprintf(old, sizeof old, "%s", dlock_lock_token(a));
    CHECK_RC(dlock_release(a), DLOCK_OK);
    dt_server_cli(&srv, "SET dlock:{stale} %s PX 1500", old); /* the release lost */
    CHECK_RC(dlock_try_acquire(a), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(a, 5000), DLOCK_OK); /* once the stale hold ran out */
    CHECK(strcmp(dlock_lock_token(a), old) != 0);

    /* The store goes back again: a's hold gone, the stale one there. */
    __atomic_store_n(&lost_calls, 0, __ATOMIC_SEQ_CST);
    dlock_lock_on_lost(a, on_lost, NULL);
    dt_server_cli(&srv, "SET dlock:{stale} %s PX 1500", old);
    DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 3000);
    CHECK_RC(dlock_release(a), DLOCK_ELOST);
    dlock_lock_free(a);
    dlock_client_close(client);
}

/* One round of regranted_place_is_not_mine on cl: a fair mutex or a
 * semaphore of one permit, the loss found (how) by the renewal (0,
 * on_lost), the release (1) or dlock_renew (2). */
static void ghost_round(dlock_client *cl, int sem, int how)
{
    char name[16], L[32], tok[96], place[256];
    dlock_lock *h = NULL, *x = NULL;
    waiter_arg w = {0};
    pthread_t t;

    snprintf(name, sizeof name, "rg%d%d", sem, how);
    snprintf(L, sizeof L, sem ? "dlock:{%s}:sem" : "dlock:{%s}", name);
    if (sem) {
        CHECK_RC(dlock_semaphore_open(cl, name, 1, 1, &h), DLOCK_OK);
        CHECK_RC(dlock_semaphore_open(cl, name, 1, 1, &w.lock), DLOCK_OK);
        CHECK_RC(dlock_semaphore_open(cl, name, 1, 1, &x), DLOCK_OK);
    } else {
        CHECK_RC(dlock_lock_open(cl, name, DLOCK_FAIR, &h), DLOCK_OK);
        CHECK_RC(dlock_lock_open(cl, name, DLOCK_FAIR, &w.lock), DLOCK_OK);
        CHECK_RC(dlock_lock_open(cl, name, DLOCK_FAIR, &x), DLOCK_OK);
    }
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    pthread_create(&t, NULL, wait_for_lock, &w);
    DT_WAIT_UNTIL(atoi(dt_server_cli(&srv, "LLEN '%s:queue'", L)) == 1, 5000);
    snprintf(tok, sizeof tok, "%s", dt_server_cli(&srv, "LINDEX '%s:queue' 0", L));
    snprintf(place, sizeof place, "%s", dt_server_cli(&srv, "GET '%s:w:%s'", L, tok));
    CHECK(place[0] != '\0');
    CHECK_RC(dlock_release(h), DLOCK_OK); /* handed to w */
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    uint64_t fence = dlock_lock_fence(w.lock);

    /* A failover to a replica that missed the grant: w's hold gone, its
     * place back. */
    __atomic_store_n(&lost_calls, 0, __ATOMIC_SEQ_CST);
    dlock_lock_on_lost(w.lock, on_lost, NULL);
    if (sem)
        dt_server_cli(&srv,
                      "EVAL \"redis.call('HDEL', KEYS[1] .. ':holders', ARGV[1]); "
                      "redis.call('ZREM', KEYS[1] .. ':exp', ARGV[1])\" 1 '%s' '%s'",
                      L, tok);
    else
        dt_server_cli(&srv, "DEL '%s'", L);
    dt_server_cli(&srv, "DEL '%s:g:%s'", L, tok);
    dt_server_cli(&srv, "SET '%s:w:%s' '%s' PX 5000", L, tok, place);
    dt_server_cli(&srv, "RPUSH '%s:queue' '%s'", L, tok);
    /* a newcomer finds the place at the head: the store serves it again */
    CHECK_RC(dlock_try_acquire(x), DLOCK_EBUSY);

    if (how == 1) {
        /* told by the release, which lets the stale grant go */
        CHECK_RC(dlock_release(w.lock), DLOCK_ELOST);
        CHECK_RC(dlock_try_acquire(x), DLOCK_OK);
        CHECK_RC(dlock_release(x), DLOCK_OK);
    } else if (how == 2) {
        CHECK_RC(dlock_lock_verify(w.lock), DLOCK_ELOST);
        CHECK_RC(dlock_release(w.lock), DLOCK_ELOST);
    } else {
        DT_WAIT_UNTIL(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 1, 3000);
        CHECK_RC(dlock_release(w.lock), DLOCK_ELOST);
    }
    /* (how it knew: the stale grant's fence, noted beside it) */
    CHECK(strtoull(dt_server_cli(&srv, "GET '%s:g:%s'", L, tok), NULL, 10) > fence);
    dlock_lock_free(x);
    dlock_lock_free(w.lock);
    dlock_lock_free(h);
}

/* A waiter's place that a failover brings back after the hold it was
 * served with (the replica missed the grant) may be served again: that
 * hold is not the waiter's, whose own grant is gone. The grant notes its
 * fence (queue.lua), and the waiter's renewal and release, under its lower
 * fence, are told the lock was lost (fault_sentinel seed 7 in CI: a
 * semaphore's permit taken during a failover, released "OK" after another
 * holder took it on the new master). Fails without the note: the renewal
 * renews the stale grant and the release says DLOCK_OK. */
static void regranted_place_is_not_mine(void)
{
    setup(NULL); /* a 30 s lease: no renewal within a round */
    char url[256];
    dlock_client *quick = NULL;
    snprintf(url, sizeof url, "%s?lease=600ms", srv.url);
    CHECK_RC(dlock_client_open(url, &quick), DLOCK_OK);
    for (int sem = 0; sem <= 1; sem++) {
        ghost_round(quick, sem, 0);
        ghost_round(client, sem, 1);
        ghost_round(client, sem, 2);
    }
    dlock_client_close(quick);
    dlock_client_close(client);
}

static void *acquire_thread(void *p)
{
    waiter_arg *w = p;
    w->rc = dlock_acquire(w->lock, w->acquired_at > 0 ? w->acquired_at : 20000);
    return NULL;
}

/* Two read holds of one owner (dlock_lock_dup), each served from the
 * queue: the second grant does not make the first look like a stale one
 * (review 49: the first's verify, renewal and release said DLOCK_ELOST
 * while its share was held). */
static void nested_reads_from_queue(void)
{
    setup(NULL);
    dlock_client *c2 = NULL;
    CHECK_RC(dlock_client_open(srv.url, &c2), DLOCK_OK);
    dlock_lock *x = NULL, *r2 = NULL, *r3 = NULL;
    waiter_arg r1 = {0}, z = {0}, w2 = {0};
    pthread_t t1, tz, t2;
    CHECK_RC(dlock_lock_open(c2, "nest", DLOCK_WRITE, &x), DLOCK_OK);
    CHECK_RC(dlock_lock_open(client, "nest", DLOCK_READ, &r1.lock), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c2, "nest", DLOCK_WRITE, &z.lock), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c2, "nest", DLOCK_READ, &r3), DLOCK_OK);

    CHECK_RC(dlock_acquire(x, 0), DLOCK_OK);
    pthread_create(&t1, NULL, acquire_thread, &r1);
    DT_WAIT_UNTIL(atoi(dt_server_cli(&srv, "LLEN 'dlock:{nest}:rw:queue'")) == 1, 5000);
    CHECK_RC(dlock_release(x), DLOCK_OK); /* r1 served from the queue */
    pthread_join(t1, NULL);
    CHECK_RC(r1.rc, DLOCK_OK);
    /* a writer waits behind the reader, and a second read of r1's owner
     * behind the writer */
    z.acquired_at = 1500; /* (its wait) */
    pthread_create(&tz, NULL, acquire_thread, &z);
    DT_WAIT_UNTIL(atoi(dt_server_cli(&srv, "LLEN 'dlock:{nest}:rw:queue'")) == 1, 5000);
    CHECK_RC(dlock_lock_dup(r1.lock, DLOCK_READ, &r2), DLOCK_OK);
    w2.lock = r2;
    pthread_create(&t2, NULL, acquire_thread, &w2);
    DT_WAIT_UNTIL(atoi(dt_server_cli(&srv, "LLEN 'dlock:{nest}:rw:queue'")) == 2, 5000);
    pthread_join(tz, NULL);
    CHECK_RC(z.rc, DLOCK_ETIMEDOUT);
    /* another reader's try admits the second read, if the writer's leave
     * did not */
    int rc3 = dlock_try_acquire(r3);
    pthread_join(t2, NULL);
    CHECK_RC(w2.rc, DLOCK_OK);
    CHECK(dlock_lock_fence(r2) > dlock_lock_fence(r1.lock));

    CHECK_RC(dlock_lock_verify(r1.lock), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(r2), DLOCK_OK);
    CHECK_RC(dlock_release(r1.lock), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    if (rc3 == DLOCK_OK)
        CHECK_RC(dlock_release(r3), DLOCK_OK);
    dlock_lock_free(r3);
    dlock_lock_free(r2);
    dlock_lock_free(z.lock);
    dlock_lock_free(r1.lock);
    dlock_lock_free(x);
    dlock_client_close(c2);
    dlock_client_close(client);
}

/* A write wait and a read wait of one owner (dlock_lock_dup) at once: the
 * second is refused (DLOCK_EDEADLK). They had one place in the queue (the
 * token's), and a read share handed to it was taken by the write wait too:
 * a writer beside another client's reader (review 49). */
static void dup_waits_one_way(void)
{
    setup(NULL);
    dlock_client *c2 = NULL;
    CHECK_RC(dlock_client_open(srv.url, &c2), DLOCK_OK);
    dlock_lock *x = NULL, *r = NULL;
    waiter_arg w = {0};
    pthread_t t;
    CHECK_RC(dlock_lock_open(c2, "dupw", DLOCK_WRITE, &x), DLOCK_OK);
    CHECK_RC(dlock_lock_open(client, "dupw", DLOCK_WRITE, &w.lock), DLOCK_OK);
    CHECK_RC(dlock_acquire(x, 0), DLOCK_OK);
    pthread_create(&t, NULL, acquire_thread, &w);
    DT_WAIT_UNTIL(atoi(dt_server_cli(&srv, "LLEN 'dlock:{dupw}:rw:queue'")) == 1, 5000);
    CHECK_RC(dlock_lock_dup(w.lock, DLOCK_READ, &r), DLOCK_OK);
    CHECK_RC(dlock_acquire(r, 1000), DLOCK_EDEADLK);
    CHECK(strstr(dlock_errmsg(), "waits for this read-write lock as the other kind") != NULL);
    CHECK_RC(dlock_release(x), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK_RC(dlock_try_acquire(x), DLOCK_EBUSY);
    CHECK_RC(dlock_release(w.lock), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w.lock);
    dlock_lock_free(x);
    dlock_client_close(c2);
    dlock_client_close(client);
}

/* Which failures make the next acquisition a new owner: a try the store
 * answered "busy" left nothing under its token, and the next attempt keeps
 * it; a wait that ended unserved may have left its queue place behind (a
 * leave lost), so the next acquisition has a new token, and a place the
 * store brings back under the old one is someone else's. Handles that
 * share a token through dlock_lock_dup() keep it. */
static void token_after_failures(void)
{
    setup(NULL);
    dlock_lock *h = open_lock("tf", 0), *a = open_lock("tf", 0), *d = NULL;
    char first[80];

    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(a), DLOCK_EBUSY);
    snprintf(first, sizeof first, "%s", dlock_lock_token(a));
    CHECK_RC(dlock_try_acquire(a), DLOCK_EBUSY);
    CHECK(strcmp(dlock_lock_token(a), first) == 0);
    CHECK_RC(dlock_acquire(a, 200), DLOCK_ETIMEDOUT);
    CHECK(strcmp(dlock_lock_token(a), first) == 0); /* the wait's own */
    CHECK_RC(dlock_try_acquire(a), DLOCK_EBUSY);
    CHECK(strcmp(dlock_lock_token(a), first) != 0);

    CHECK_RC(dlock_lock_dup(h, 0, &d), DLOCK_OK);
    snprintf(first, sizeof first, "%s", dlock_lock_token(h));
    CHECK_RC(dlock_release(h), DLOCK_OK);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    CHECK(strcmp(dlock_lock_token(h), first) == 0);
    CHECK(strcmp(dlock_lock_token(d), first) == 0);
    CHECK_RC(dlock_release(h), DLOCK_OK);
    dlock_lock_free(d);
    dlock_lock_free(a);
    dlock_lock_free(h);
    dlock_client_close(client);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"acquire_release", acquire_release},
        {"fences_increase", fences_increase},
        {"reentrancy", reentrancy},
        {"non_owner_release_refused", non_owner_release_refused},
        {"adopt_by_token", adopt_by_token},
        {"fixed_lease_expires", fixed_lease_expires},
        {"renewal_outlives_lease", renewal_outlives_lease},
        {"deleted_key_reported_lost", deleted_key_reported_lost},
        {"server_restart_reported_lost", server_restart_reported_lost},
        {"waiter_woken_by_release", waiter_woken_by_release},
        {"wait_times_out_and_leaves_queue", wait_times_out_and_leaves_queue},
        {"handover_keeps_fifo_order", handover_keeps_fifo_order},
        {"overlapping_calls_on_one_handle", overlapping_calls_on_one_handle},
        {"extend_and_keepalive", extend_and_keepalive},
        {"owner_records", owner_records},
        {"list_skips_lapsed_holders", list_skips_lapsed_holders},
        {"sentinel_port_leaks_nothing", sentinel_port_leaks_nothing},
        {"stale_hold_is_not_mine", stale_hold_is_not_mine},
        {"regranted_place_is_not_mine", regranted_place_is_not_mine},
        {"nested_reads_from_queue", nested_reads_from_queue},
        {"dup_waits_one_way", dup_waits_one_way},
        {"token_after_failures", token_after_failures},
    };
    return DT_RUN(tests);
}
