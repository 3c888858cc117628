/* SPDX-License-Identifier: MIT */
/* test_redis_cluster.c - redis+cluster://: the URL and what it refuses,
 * locks on every master, a held lock's slot migrated (MOVED) and its
 * master failed over while it is held and waited for, a waiter woken by its
 * hand-over's notice (sharded pub/sub on the lock's master) also after its
 * subscriber connection is killed, no plain PUBLISH anywhere (issue 22),
 * and a frozen node (accepting connections, answering nothing) left for
 * the next: a first seed, a master whose replica is promoted.
 *
 * One cluster (server kind "cluster": 3 masters, 3 replicas) is started by
 * main() for every test; each test runs in a process of its own (dt_run)
 * and asks the cluster where a slot lives now. */
#include "../support/harness.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LEASE "?lease=3s"

static dt_server cluster; /* started by main() */

/* One command to the node on port; its reply (never NULL). */
static redisReply *command(int port, const char *fmt, ...)
{
    va_list ap;
    struct timeval tv = {5, 0};
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

static void must(int port, const char *fmt, const char *a, const char *b)
{
    redisReply *r = command(port, fmt, a, b);
    if (r->type == REDIS_REPLY_ERROR)
        dt_fail(__FILE__, __LINE__, "port %d: %s: %s", port, fmt, r->str);
    freeReplyObject(r);
}

/* command()'s integer reply; -1 for any other. */
static long long command_int(int port, const char *fmt, const char *arg)
{
    redisReply *r = command(port, fmt, arg);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static int node_port(int i)
{
    return dt_cluster_node(&cluster, i)->port;
}

/* The hash slot of lock name's keys (dlock:{name}). */
static int slot_of(const char *name)
{
    char key[256];
    snprintf(key, sizeof key, "dlock:{%s}", name);
    redisReply *r = command(node_port(0), "CLUSTER KEYSLOT %s", key);
    CHECK(r->type == REDIS_REPLY_INTEGER);
    int slot = (int) r->integer;
    freeReplyObject(r);
    return slot;
}

/* A name whose slot node `master` serves now (tried as name0, name1...). */
static void name_on(int master, const char *stem, char *out, size_t len)
{
    for (int i = 0; i < 1000; i++) {
        snprintf(out, len, "%s%d", stem, i);
        if (dt_cluster_master_of(&cluster, slot_of(out)) == master)
            return;
    }
    dt_fail(__FILE__, __LINE__, "no name on node %d", master);
}

static void node_id(int port, char id[64])
{
    redisReply *r = command(port, "CLUSTER MYID");
    CHECK(r->type == REDIS_REPLY_STRING);
    snprintf(id, 64, "%s", r->str);
    freeReplyObject(r);
}

typedef struct waiter {
    int rc;
    uint64_t fence;
    int64_t got_ms;
    char why[256];
    dlock_client *c;
    dlock_lock *l;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->l, 60000);
    w->got_ms = dt_now_ms();
    w->fence = dlock_lock_fence(w->l);
    snprintf(w->why, sizeof w->why, "%s", w->rc != DLOCK_OK ? dlock_errmsg() : "");
    return NULL;
}

static void start_waiter(waiter *w, const char *name, pthread_t *t)
{
    memset(w, 0, sizeof *w);
    w->c = dt_client(cluster.url, LEASE);
    w->l = dt_lock(w->c, name, 0);
    CHECK(pthread_create(t, NULL, wait_for_lock, w) == 0);
}

/* Hands lock `name` from a holder of client `a` to a queued waiter of
 * client wc `rounds` times; returns how many of those reached the waiter
 * within 20 ms of the release: its notice's doing (a waiter whose notices
 * flow looks for itself only every 100 ms, so the poll alone makes it in
 * time 1 in 5). */
static int handovers(dlock_client *a, dlock_client *wc, const char *name, int rounds)
{
    dlock_lock *la = dt_lock(a, name, 0);
    int prompt = 0;

    for (int round = 0; round < rounds; round++) {
        pthread_t t;
        waiter w;
        memset(&w, 0, sizeof w);
        w.c = wc;
        w.l = dt_lock(wc, name, 0);
        CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
        CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0);
        DT_WAIT_UNTIL(dt_query(a, name, 0).waiters == 1, 5000);
        int64_t released = dt_now_ms();
        CHECK_RC(dlock_release(la), DLOCK_OK);
        pthread_join(t, NULL);
        if (w.rc != DLOCK_OK)
            dt_fail(__FILE__, __LINE__, "round %d: the waiter got %d (%s)", round, w.rc, w.why);
        printf("%s, round %d: the waiter got it %lld ms after the release\n", name, round,
               (long long) (w.got_ms - released));
        prompt += w.got_ms - released < 20;
        CHECK_RC(dlock_release(w.l), DLOCK_OK);
        dlock_lock_free(w.l);
    }
    dlock_lock_free(la);
    return prompt;
}

/* The notice channels of lock `name` subscribed at the node on port. */
static size_t channels_at(int port, const char *name)
{
    redisReply *r = command(port, "PUBSUB SHARDCHANNELS dlock:{%s}:wake:*", name);
    CHECK(r->type == REDIS_REPLY_ARRAY);
    size_t n = r->elements;
    freeReplyObject(r);
    return n;
}

/* The waiters' client of lock `name` is subscribed to its notices
 * (dlock:{name}:wake:<client id>) on the master serving its slot now, and
 * nowhere else (a moved slot's old master dropped it). One client waited. */
static void subscribed_at_master(const char *name)
{
    int master = dt_cluster_master_of(&cluster, slot_of(name));
    for (int i = 0; i < 6; i++) {
        size_t n = channels_at(node_port(i), name);
        if (n != (i == master ? 1u : 0u))
            dt_fail(__FILE__, __LINE__, "node %d (the master: %d) has %zu channels of %s", i,
                    master, n, name);
    }
}

/* ---------------------------------------------------------------- the URL */

static void expect_open_fails(const char *url, int code, const char *says)
{
    dlock_client *c = NULL;
    int rc = dlock_client_open(url, &c);
    if (rc != code || strstr(dlock_errmsg(), says) == NULL)
        dt_fail(__FILE__, __LINE__, "%s: got %d (%s), want %d saying '%s'", url, rc, dlock_errmsg(),
                code, says);
    CHECK(c == NULL);
}

/* dlock_list's callback: counts the names. */
static void count_name(const char *name, unsigned flags, void *arg)
{
    (void) name;
    (void) flags;
    ++*(size_t *) arg;
}

static void bad_urls(void)
{
    char url[600];
    expect_open_fails("redis+cluster://", DLOCK_EINVAL, "seed");
    expect_open_fails("redis+cluster://127.0.0.1:1/3", DLOCK_EINVAL, "database 0");
    snprintf(url, sizeof url, "%s?notify=stream", cluster.url);
    expect_open_fails(url, DLOCK_ENOTSUP, "notify=stream is not built for redis+cluster://");
    snprintf(url, sizeof url, "%s?wait=1", cluster.url);
    expect_open_fails(url, DLOCK_ENOTSUP, "wait= is not built for redis+cluster://");
    snprintf(url, sizeof url, "%s?notify=pubsub", cluster.url); /* sharded: the default */
    dlock_client_close(dt_client(url, NULL));

    /* what it cannot do yet is refused by name */
    dlock_client *c = dt_client(cluster.url, NULL);
    unsigned caps = dlock_client_caps(c);
    CHECK((caps & DLOCK_CAP_NOTIFY) != 0); /* sharded pub/sub */
    CHECK((caps & DLOCK_CAP_INTEROP) == 0);
    CHECK((caps & DLOCK_CAP_FAIR) != 0);
    CHECK((caps & DLOCK_CAP_LIST) != 0);
    dlock_lock *l = NULL;
    CHECK_RC(dlock_lock_open(c, "simple", DLOCK_SIMPLE, &l), DLOCK_ENOTSUP);
    CHECK(strstr(dlock_errmsg(), "interop") != NULL);
    dlock_client_close(c);

    /* a node's label names the URL's user, never the password */
    snprintf(url, sizeof url, "redis+cluster://nobody:n0tThis@127.0.0.1:%d", node_port(0));
    c = dt_client(url, NULL);
    l = dt_lock(c, "who", 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    if (strstr(dlock_errmsg(), "redis+cluster node nobody:***@127.0.0.1:") == NULL ||
        strstr(dlock_errmsg(), "n0tThis") != NULL)
        dt_fail(__FILE__, __LINE__, "want the node's label with its user: %s", dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(c);

    /* redis:// at one node of the cluster: refused at its first
     * connection, a name of its own slots too (which would work there and
     * make the wrong URL look right), with the URL to use; dlock_list
     * too, rather than listing that node's locks only. As another kind of
     * server at the port, DLOCK_EUNREACHABLE (exit 69, as redis:// at a
     * sentinel; it was DLOCK_EINVAL, exit 64) */
    int port0 = node_port(0);
    char name[32], want[256], kind[160];
    snprintf(want, sizeof want, "use redis+cluster://127.0.0.1:%d,...", port0);
    snprintf(kind, sizeof kind,
             "127.0.0.1:%d answered, but not as a single Redis server (a node of a Redis Cluster: ",
             port0);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port0);
    dlock_client *one = dt_client(url, NULL);
    for (int master = 0; master < 2; master++) {
        name_on(master, "one-node-", name, sizeof name);
        dlock_lock *e = dt_lock(one, name, 0);
        int rc = dlock_try_acquire(e);
        if (rc != DLOCK_EUNREACHABLE || strstr(dlock_errmsg(), kind) == NULL ||
            strstr(dlock_errmsg(), "Cluster: cluster_enabled:1): ") == NULL ||
            strstr(dlock_errmsg(), want) == NULL)
            dt_fail(__FILE__, __LINE__, "%s (slot on node %d) at node 0: got %d (%s)", name, master,
                    rc, dlock_errmsg());
        dlock_lock_free(e);
    }
    size_t listed = 0;
    CHECK_RC(dlock_list(one, "", 0, count_name, &listed), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), want) != NULL);
    CHECK_INT(listed, ==, 0);
    dlock_client_close(one);

    /* ... and where INFO is not allowed (an ACL), by the first MOVED: the
     * same, and a wait without a bound gives up at once (its handshake
     * answered, but no server of the kind asked for did: a wrong URL), not
     * after unreachable_wait, nor after a store never reached's second */
    must(port0, "ACL SETUSER %s on nopass ~* &* +@all %s", "noinfo", "-info");
    snprintf(url, sizeof url, "redis://noinfo:x@127.0.0.1:%d", port0);
    one = dt_client(url, "?unreachable_wait=20s");
    name_on(1, "moved-", name, sizeof name);
    dlock_lock *e = dt_lock(one, name, 0);
    int rc = dlock_try_acquire(e);
    if (rc != DLOCK_EUNREACHABLE || strstr(dlock_errmsg(), kind) == NULL ||
        strstr(dlock_errmsg(), "Cluster: acquire: MOVED ") == NULL ||
        strstr(dlock_errmsg(), want) == NULL)
        dt_fail(__FILE__, __LINE__, "%s: got %d (%s)", name, rc, dlock_errmsg());
    int64_t t_moved = dt_now_ms();
    CHECK_RC(dlock_acquire(e, DLOCK_WAIT_FOREVER), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t_moved, <, 500);
    CHECK(strstr(dlock_errmsg(), kind) != NULL);
    CHECK(strstr(dlock_errmsg(), "never reached") == NULL);
    dlock_lock_free(e);
    dlock_client_close(one);
    must(port0, "ACL DELUSER %s%s", "noinfo", "");

    /* redis+cluster:// at a plain Redis: refused at the first call (the
     * cluster client's CLUSTER SLOTS: "cluster support disabled") as
     * another kind of server at the port, DLOCK_EUNREACHABLE (exit 69, as
     * for another service there; it was DLOCK_EINVAL, exit 64), with the
     * URL to use, and nothing taken there; a wait without a bound gives
     * up at once, not retried as a store never reached (no wait mends a
     * URL: it took a second before) */
    dt_server plain;
    dt_server_start(&plain, "redis", 0, NULL);
    snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d?unreachable_wait=20s", plain.port);
    snprintf(want, sizeof want,
             "127.0.0.1:%d answered, but not as a node of a Redis Cluster (it is not in cluster "
             "mode: cluster_enabled:0): for that one server use redis://127.0.0.1:%d",
             plain.port, plain.port);
    dlock_client *pc = dt_client(url, NULL);
    e = dt_lock(pc, "on-plain", 0);
    rc = dlock_try_acquire(e);
    if (rc != DLOCK_EUNREACHABLE || strstr(dlock_errmsg(), want) == NULL)
        dt_fail(__FILE__, __LINE__, "%s: got %d (%s)", url, rc, dlock_errmsg());
    CHECK_RC(dlock_list(pc, "", 0, count_name, &listed), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), want) != NULL);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(e, DLOCK_WAIT_FOREVER), DLOCK_EUNREACHABLE);
    CHECK_INT(dt_now_ms() - t0, <, 500);
    CHECK(strstr(dlock_errmsg(), want) != NULL);
    CHECK(strstr(dlock_errmsg(), "never reached") == NULL);
    dlock_lock_free(e);
    dlock_client_close(pc);
    redisReply *r = command(plain.port, "EXISTS dlock:{on-plain}");
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    dt_server_stop(&plain);
}

/* A cluster with a password: the URL's user info is every node's AUTH;
 * without it every node refuses, and the error says how to give it. */
static void with_auth(void)
{
    dt_server g;
    char url[4096];
    dt_server_start(&g, "cluster", 0, "--requirepass", "s3cret", NULL);
    snprintf(url, sizeof url, "redis+cluster://:s3cret@%s", g.url + strlen("redis+cluster://"));
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *l = dt_lock(c, "authed", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);

    c = dt_client(g.url, NULL);
    l = dt_lock(c, "authed", 0);
    int rc = dlock_acquire(l, 0);
    if (rc == DLOCK_OK || strstr(dlock_errmsg(), "NOAUTH") == NULL)
        dt_fail(__FILE__, __LINE__, "no password: got %d (%s)", rc, dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&g);
}

/* ---------------------------------------------------------------- locks */

/* Locks on names of every master, held past their lease: renewal keeps
 * every one (per slot, node by node); another client sees them held, and
 * dlock_list finds them all on their masters. */
static void locks_on_every_master(void)
{
    char names[6][32];
    dlock_lock *locks[6];
    dlock_client *c = dt_client(cluster.url, LEASE), *other = dt_client(cluster.url, NULL);

    for (int i = 0; i < 6; i++) {
        name_on(i % 3, i < 3 ? "every" : "more", names[i], sizeof names[i]);
        locks[i] = dt_lock(c, names[i], 0);
        CHECK_RC(dlock_acquire(locks[i], 0), DLOCK_OK);
    }
    /* past a whole lease (3 s): only renewals keep them */
    dt_sleep_ms(4000);
    for (int i = 0; i < 6; i++) {
        CHECK_RC(dlock_lock_verify(locks[i]), DLOCK_OK);
        dlock_lock *again = dt_lock(other, names[i], 0);
        CHECK_RC(dlock_try_acquire(again), DLOCK_EBUSY);
        dlock_lock_free(again);
        CHECK(dt_query(other, names[i], 0).held);
    }
    dt_holders h = dt_query_holders(other, names[0], 0);
    CHECK_INT(h.n, ==, 1);
    CHECK_INT(h.h[0].pid, ==, (long) getpid()); /* the owner record, in a slot of its own */
    for (int i = 0; i < 6; i++) {
        CHECK_RC(dlock_release(locks[i]), DLOCK_OK);
        dlock_lock_free(locks[i]);
        CHECK(!dt_query(other, names[i], 0).held);
    }
    dlock_client_close(c);
    dlock_client_close(other);
}

/* A multi-lock across slots is taken one by one (canonical order), one
 * within a slot atomically; either way all or nothing. */
static void multi_across_slots(void)
{
    char a[32], b[32];
    name_on(0, "multia", a, sizeof a);
    name_on(2, "multib", b, sizeof b);
    const char *names[] = {a, b};
    dlock_client *c = dt_client(cluster.url, NULL), *other = dt_client(cluster.url, NULL);
    dlock_lock *m = NULL, *lb = dt_lock(other, b, 0);
    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_acquire(lb, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 200), DLOCK_ETIMEDOUT);
    CHECK(!dt_query(other, a, 0).held); /* given back */
    CHECK_RC(dlock_release(lb), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    CHECK(dt_query(other, a, 0).held && dt_query(other, b, 0).held);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(lb);
    dlock_client_close(c);
    dlock_client_close(other);
}

/* ---------------------------------------------------------------- MOVED */

/* Slot s moves from the master on port `from` to the one on port `to`
 * (SETSLOT IMPORTING/MIGRATING, MIGRATE of its keys, SETSLOT NODE on
 * every master), as a resharding does it. */
static void migrate_slot(int s, int from, int to)
{
    char slot[16], from_id[64], to_id[64];
    snprintf(slot, sizeof slot, "%d", s);
    node_id(from, from_id);
    node_id(to, to_id);
    must(to, "CLUSTER SETSLOT %s IMPORTING %s", slot, from_id);
    must(from, "CLUSTER SETSLOT %s MIGRATING %s", slot, to_id);
    for (;;) {
        redisReply *keys = command(from, "CLUSTER GETKEYSINSLOT %d 100", s);
        CHECK(keys->type == REDIS_REPLY_ARRAY);
        size_t n = keys->elements;
        for (size_t i = 0; i < n; i++) {
            redisReply *r =
                command(from, "MIGRATE 127.0.0.1 %d %s 0 5000", to, keys->element[i]->str);
            if (r->type == REDIS_REPLY_ERROR)
                dt_fail(__FILE__, __LINE__, "MIGRATE %s: %s", keys->element[i]->str, r->str);
            freeReplyObject(r);
        }
        freeReplyObject(keys);
        if (n == 0)
            break;
    }
    for (int i = 0; i < 3; i++) {
        int master = dt_cluster_master_of(&cluster, i * 5461);
        CHECK(master >= 0);
        must(node_port(master), "CLUSTER SETSLOT %s NODE %s", slot, to_id);
    }
}

/* The slot of a holder's owner record (P:owner:<client id>, a slot of its
 * own) moves after another client read the slot map: that client's
 * holders' listing follows the MOVED of its read of the record, and still
 * names the holder's host and pid. */
static void owner_record_moved(void)
{
    char name[32], key[128];
    name_on(0, "ownermoved", name, sizeof name);
    dlock_client *a = dt_client(cluster.url, LEASE);
    dlock_lock *la = dt_lock(a, name, 0);
    CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
    dlock_client *b = dt_client(cluster.url, LEASE);
    dt_holders h = dt_query_holders(b, name, 0); /* b reads the map now */
    CHECK_INT(h.n, ==, 1);
    CHECK_INT(h.h[0].pid, ==, (long) getpid());

    snprintf(key, sizeof key, "dlock:owner:%.16s", dlock_lock_token(la));
    redisReply *r = command(node_port(0), "CLUSTER KEYSLOT %s", key);
    CHECK(r->type == REDIS_REPLY_INTEGER);
    int s = (int) r->integer, from = dt_cluster_master_of(&cluster, s), to = -1;
    freeReplyObject(r);
    for (int i = 0; i < 3 && to < 0; i++) {
        int m = dt_cluster_master_of(&cluster, i * 5461);
        if (m >= 0 && m != from)
            to = m;
    }
    CHECK(from >= 0 && to >= 0);
    r = command(node_port(from), "EXISTS %s", key);
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer == 1); /* the record is there */
    freeReplyObject(r);
    migrate_slot(s, node_port(from), node_port(to));
    DT_WAIT_UNTIL(dt_cluster_master_of(&cluster, s) == to, 5000);

    h = dt_query_holders(b, name, 0); /* its MGET meets MOVED */
    CHECK_INT(h.n, ==, 1);
    CHECK_INT(h.h[0].pid, ==, (long) getpid());
    CHECK(h.h[0].host[0] != '\0');
    CHECK_RC(dlock_release(la), DLOCK_OK);
    dlock_lock_free(la);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* The slot of a held and waited-for lock migrates to another master
 * (SETSLOT MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE): the holder's
 * renewals follow the MOVED to the new master, it keeps the lock and
 * releases it there, and the waiter, which the old master unsubscribed,
 * gets it with a larger fence, and its notices at the new master. */
static void moved_while_held(void)
{
    char name[32];
    dt_lost_box lost = {0};
    pthread_t t;
    waiter w;

    name_on(0, "moved", name, sizeof name);
    int s = slot_of(name), from = node_port(0);
    int to_node = dt_cluster_master_of(&cluster, 5461); /* node 1's first slot */
    CHECK(to_node >= 0 && to_node != 0);
    int to = node_port(to_node);

    dlock_client *a = dt_client(cluster.url, LEASE);
    dlock_lock *la = dt_lock(a, name, 0);
    dlock_lock_on_lost(la, dt_on_lost, &lost);
    CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
    uint64_t fence_a = dlock_lock_fence(la);
    start_waiter(&w, name, &t);
    DT_WAIT_UNTIL(dt_query(a, name, 0).waiters == 1, 5000);

    migrate_slot(s, from, to);
    DT_WAIT_UNTIL(dt_cluster_master_of(&cluster, s) == to_node, 5000);
    int64_t moved = dt_now_ms();

    /* past a lease (3 s) after the move: only renewals on the new master
     * keep it */
    dt_sleep_ms(3500);
    if (atomic_load(&lost.lost))
        dt_fail(__FILE__, __LINE__, "the holder lost the lock %lld ms after its slot moved: %s",
                (long long) (atomic_load(&lost.at_ms) - moved), lost.why);
    CHECK_RC(dlock_lock_verify(la), DLOCK_OK);
    if (w.got_ms != 0)
        dt_fail(__FILE__, __LINE__, "the waiter's wait ended (%d: %s)", w.rc, w.why);
    redisReply *r = command(to, "EXISTS dlock:{%s}", name);
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer == 1); /* it lives there now */
    freeReplyObject(r);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(la), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > fence_a);
    printf("the waiter got it %lld ms after the release on the new master\n",
           (long long) (w.got_ms - released));
    CHECK_INT(w.got_ms - released, <, 3000);
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    /* the waiter's client subscribes at the new master: notices again */
    CHECK_INT(handovers(a, w.c, name, 5), >=, 4);
    subscribed_at_master(name);
    dlock_client_close(w.c);
    dlock_lock_free(la);
    dlock_client_close(a);
}

/* A slot stays migrating (SETSLOT IMPORTING and MIGRATING, no key moved
 * yet) while a read-write lock is held by a reader and a semaphore of one
 * permit by its holder: neither has its base key (P:{N}:rw, P:{N}:sem),
 * so the migrating node answers ASK to every script on them. A writer and
 * a second semaphore holder must not be granted at the importing node,
 * which has none of the lock yet (the bug: they were); they wait for the
 * migration's end, then find the name held. */
static void shared_holds_while_migrating(void)
{
    char name[32], slot[16], from_id[64], to_id[64];
    name_on(0, "migrating", name, sizeof name);
    int s = slot_of(name), from = node_port(0);
    int to_node = dt_cluster_master_of(&cluster, 5461);
    CHECK(to_node >= 0 && to_node != 0);
    int to = node_port(to_node);

    dlock_client *a = dt_client(cluster.url, LEASE);
    dlock_lock *reader = dt_lock(a, name, DLOCK_READ), *sem = NULL;
    CHECK_RC(dlock_acquire(reader, 0), DLOCK_OK);
    /* a semaphore in the same slot: N}sem's keys dlock:{N}sem}... hash by
     * N, as N's do */
    char sem2[48];
    snprintf(sem2, sizeof sem2, "%s}sem", name);
    redisReply *r = command(from, "CLUSTER KEYSLOT dlock:{%s}", sem2);
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer == s);
    freeReplyObject(r);
    CHECK_RC(dlock_semaphore_open(a, sem2, 1, 1, &sem), DLOCK_OK);
    CHECK_RC(dlock_acquire(sem, 0), DLOCK_OK);

    snprintf(slot, sizeof slot, "%d", s);
    node_id(from, from_id);
    node_id(to, to_id);
    must(to, "CLUSTER SETSLOT %s IMPORTING %s", slot, from_id);
    must(from, "CLUSTER SETSLOT %s MIGRATING %s", slot, to_id);

    /* timeout=1s: a refused step gives up after a second */
    dlock_client *b = dt_client(cluster.url, "?lease=3s&timeout=1s");
    dlock_lock *writer = dt_lock(b, name, DLOCK_WRITE), *sem_b = NULL;
    CHECK_RC(dlock_semaphore_open(b, sem2, 1, 1, &sem_b), DLOCK_OK);
    int rc = dlock_acquire(writer, 0);
    if (rc == DLOCK_OK)
        dt_fail(__FILE__, __LINE__, "a writer took %s beside its reader during the migration",
                name);
    printf("writer during the migration: %s (%s)\n", dlock_strerror(rc), dlock_errmsg());
    CHECK_RC(rc, DLOCK_EUNREACHABLE);
    rc = dlock_acquire(sem_b, 0);
    if (rc == DLOCK_OK)
        dt_fail(__FILE__, __LINE__, "a second holder took %s's one permit during the migration",
                sem2);
    CHECK_RC(rc, DLOCK_EUNREACHABLE);
    r = command(to, "CLUSTER COUNTKEYSINSLOT %d", s);
    CHECK(r->type == REDIS_REPLY_INTEGER);
    CHECK_INT(r->integer, ==, 0); /* nothing made at the importing node */
    freeReplyObject(r);

    /* the migration ends (every key moved, no BUSYKEY): both still held */
    migrate_slot(s, from, to);
    DT_WAIT_UNTIL(dt_cluster_master_of(&cluster, s) == to_node, 5000);
    CHECK_RC(dlock_acquire(writer, 0), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(sem_b, 0), DLOCK_EBUSY);
    CHECK_RC(dlock_lock_verify(reader), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(sem), DLOCK_OK);
    CHECK_RC(dlock_release(reader), DLOCK_OK);
    CHECK_RC(dlock_release(sem), DLOCK_OK);
    CHECK_RC(dlock_acquire(writer, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(sem_b, 0), DLOCK_OK);
    CHECK_RC(dlock_release(writer), DLOCK_OK);
    CHECK_RC(dlock_release(sem_b), DLOCK_OK);
    dlock_lock_free(writer);
    dlock_lock_free(sem_b);
    dlock_client_close(b);
    dlock_lock_free(reader);
    dlock_lock_free(sem);
    dlock_client_close(a);
}

/* A hold handed over from the queue, whose grant's note (L:g:<token>) has
 * expired, while its slot is migrating (SETSLOT IMPORTING and MIGRATING,
 * its keys still at the source): it is confirmed and released, and its
 * release hands the lock to the next waiter. A script that looked for the
 * missing note was refused by the migrating node (review 49: the holder
 * lost its renewals, and a release's hand-over failed half-way). */
static void handed_hold_while_migrating(void)
{
    char name[32], slot[16], from_id[64], to_id[64], key[128];
    name_on(0, "handmig", name, sizeof name);
    int s = slot_of(name), from = node_port(0);
    int to_node = dt_cluster_master_of(&cluster, 5461);
    CHECK(to_node >= 0 && to_node != 0);
    int to = node_port(to_node);

    dlock_client *a = dt_client(cluster.url, LEASE);
    dlock_lock *h = dt_lock(a, name, 0);
    CHECK_RC(dlock_acquire(h, 0), DLOCK_OK);
    waiter w, v;
    pthread_t tw, tv;
    start_waiter(&w, name, &tw);
    snprintf(key, sizeof key, "dlock:{%s}:queue", name);
    DT_WAIT_UNTIL(command_int(from, "LLEN %s", key) == 1, 5000);
    CHECK_RC(dlock_release(h), DLOCK_OK); /* w served from the queue */
    pthread_join(tw, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    start_waiter(&v, name, &tv);
    DT_WAIT_UNTIL(command_int(from, "LLEN %s", key) == 1, 5000);
    /* w's note gone (its PX: the grant's lease and a second) */
    snprintf(key, sizeof key, "dlock:{%s}:g:%s", name, dlock_lock_token(w.l));
    DT_WAIT_UNTIL(command_int(from, "EXISTS %s", key) == 0, 10000);

    snprintf(slot, sizeof slot, "%d", s);
    node_id(from, from_id);
    node_id(to, to_id);
    must(to, "CLUSTER SETSLOT %s IMPORTING %s", slot, from_id);
    must(from, "CLUSTER SETSLOT %s MIGRATING %s", slot, to_id);
    CHECK_RC(dlock_lock_verify(w.l), DLOCK_OK);
    CHECK_RC(dlock_release(w.l), DLOCK_OK); /* handed to v */
    pthread_join(tv, NULL);
    CHECK_RC(v.rc, DLOCK_OK);
    CHECK_RC(dlock_lock_verify(v.l), DLOCK_OK);
    migrate_slot(s, from, to);
    DT_WAIT_UNTIL(dt_cluster_master_of(&cluster, s) == to_node, 5000);
    CHECK_RC(dlock_release(v.l), DLOCK_OK);
    dlock_lock_free(v.l);
    dlock_client_close(v.c);
    dlock_lock_free(w.l);
    dlock_client_close(w.c);
    dlock_lock_free(h);
    dlock_client_close(a);
}

/* ---------------------------------------------------------------- failover */

/* The master of a held and waited-for lock fails over (CLUSTER FAILOVER
 * on its replica): the holder keeps the lock or is told it lost it, never
 * silently; the waiter is served, and its notices come from the new
 * master. */
static void failover_while_held(void)
{
    char name[32];
    dt_lost_box lost = {0};
    pthread_t t;
    waiter w;

    name_on(2, "failover", name, sizeof name);
    int s = slot_of(name);
    int master = dt_cluster_master_of(&cluster, s);
    dlock_client *a = dt_client(cluster.url, LEASE);
    dlock_lock *la = dt_lock(a, name, 0);
    dlock_lock_on_lost(la, dt_on_lost, &lost);
    CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
    uint64_t fence_a = dlock_lock_fence(la);
    start_waiter(&w, name, &t);
    DT_WAIT_UNTIL(dt_query(a, name, 0).waiters == 1, 5000);

    int64_t t0 = dt_now_ms();
    int now = dt_cluster_failover(&cluster, master);
    printf("failover of node %d to node %d took %lld ms\n", master, now,
           (long long) (dt_now_ms() - t0));
    CHECK_INT(dt_cluster_master_of(&cluster, s), ==, now);
    /* past a lease (3 s): only renewals on the new master keep it */
    dt_sleep_ms(3500);
    int64_t released = dt_now_ms();
    if (atomic_load(&lost.lost)) {
        printf("the holder was told it lost the lock: %s\n", lost.why);
        CHECK_RC(dlock_lock_check(la), DLOCK_ELOST);
    } else {
        CHECK_RC(dlock_lock_verify(la), DLOCK_OK); /* the store agrees: it holds it */
        CHECK_INT(w.got_ms, ==, 0);
        CHECK_RC(dlock_release(la), DLOCK_OK);
    }
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    CHECK(w.fence > fence_a);
    printf("the waiter got it %lld ms after the release\n", (long long) (w.got_ms - released));
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    /* the waiter's client subscribes at the new master: notices again */
    CHECK_INT(handovers(a, w.c, name, 5), >=, 4);
    subscribed_at_master(name);
    dlock_client_close(w.c);
    dlock_lock_free(la);
    dlock_client_close(a);
}

/* ---------------------------------------------------------------- pub/sub */

/* INFO commandstats' count of cmd's calls on the node at port (0: none). */
static long long calls_of(int port, const char *cmd)
{
    char key[64];
    redisReply *r = command(port, "INFO commandstats");
    CHECK(r->type == REDIS_REPLY_STRING);
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    const char *at = strstr(r->str, key);
    long long n = at != NULL ? strtoll(at + strlen(key), NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

/* A queued waiter is woken by its hand-over's notice, SPUBLISHed by the
 * release on the lock's master and SSUBSCRIBEd by the waiter's client,
 * not by its poll: of 8 hand-overs, at least 7 reach the waiter promptly
 * (handovers). The first wait of the name subscribes before it queues.
 * Only the lock's master ran SPUBLISH, once a hand-over. */
static void notice_wakes_waiter(void)
{
    enum { ROUNDS = 8 };
    char name[32];
    long long before[6];

    name_on(1, "notice", name, sizeof name);
    int master = dt_cluster_master_of(&cluster, slot_of(name));
    for (int i = 0; i < 6; i++)
        before[i] = calls_of(node_port(i), "spublish");
    dlock_client *a = dt_client(cluster.url, LEASE), *wc = dt_client(cluster.url, LEASE);
    CHECK_INT(handovers(a, wc, name, ROUNDS), >=, ROUNDS - 1);
    subscribed_at_master(name);
    for (int i = 0; i < 6; i++) {
        long long ran = calls_of(node_port(i), "spublish") - before[i];
        if (i == master)
            CHECK_INT(ran, ==, ROUNDS);
        else if (ran != 0)
            dt_fail(__FILE__, __LINE__,
                    "node %d, not the lock's master %d, ran SPUBLISH %lld times", i, master, ran);
    }
    dlock_client_close(a);
    dlock_client_close(wc);
}

/* The subscriber connection of a queued waiter's client is killed on the
 * lock's master: the waiter looks again, subscribes anew, and is woken by
 * its notice as before. */
static void subscriber_killed(void)
{
    char name[32];
    pthread_t t;
    waiter w;

    name_on(0, "killed", name, sizeof name);
    int port = node_port(dt_cluster_master_of(&cluster, slot_of(name)));
    dlock_client *a = dt_client(cluster.url, LEASE);
    dlock_lock *la = dt_lock(a, name, 0);
    CHECK_RC(dlock_acquire(la, 0), DLOCK_OK);
    start_waiter(&w, name, &t);
    DT_WAIT_UNTIL(dt_query(a, name, 0).waiters == 1, 5000);
    subscribed_at_master(name);
    redisReply *r = command(port, "CLIENT KILL TYPE pubsub");
    CHECK(r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    /* subscribed again, by the waiter's next wait */
    DT_WAIT_UNTIL(channels_at(port, name) == 1, 1000); /* not the holder's lease (3 s) */
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(la), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_OK);
    printf("the waiter got it %lld ms after the release\n", (long long) (w.got_ms - released));
    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    CHECK_INT(handovers(a, w.c, name, 5), >=, 4);
    dlock_client_close(w.c);
    dlock_lock_free(la);
    dlock_client_close(a);
}

/* No node ran a plain PUBLISH (broadcast to every node of a cluster):
 * after the tests above, whose waiters were handed locks. Run last. */
static void no_plain_publish(void)
{
    for (int i = 0; i < 6; i++) {
        redisReply *r = command(node_port(i), "INFO commandstats");
        CHECK(r->type == REDIS_REPLY_STRING);
        if (strstr(r->str, "cmdstat_publish:") != NULL)
            dt_fail(__FILE__, __LINE__, "node %d ran PUBLISH: %s", i,
                    strstr(r->str, "cmdstat_publish:"));
        CHECK(strstr(r->str, "cmdstat_evalsha:") != NULL || i >= 3); /* the masters worked */
        freeReplyObject(r);
    }
}

/* ---------------------------------------------------------------- frozen nodes */

/* A first seed that accepts connections and answers nothing (as a frozen
 * node does: here a socket that listens and never accepts) costs about a
 * second, not the command timeout: the slot map's first read moves on to
 * the next seed, and the lock is taken. */
static void frozen_first_seed(void)
{
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof at;
    char url[4096];
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    CHECK(fd >= 0);
    CHECK(bind(fd, (struct sockaddr *) &at, sizeof at) == 0 && listen(fd, 64) == 0);
    CHECK(getsockname(fd, (struct sockaddr *) &at, &len) == 0);
    snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d,%s", ntohs(at.sin_port),
             cluster.url + strlen("redis+cluster://"));
    dlock_client *c = dt_client(url, LEASE);
    dlock_lock *l = dt_lock(c, "frozen-seed", 0);
    int64_t t0 = dt_now_ms();
    int rc = dlock_acquire(l, 10000);
    int64_t took = dt_now_ms() - t0;
    printf("taken %lld ms after the first try, the first seed frozen\n", (long long) took);
    if (rc != DLOCK_OK)
        dt_fail(__FILE__, __LINE__, "got %d (%s) after %lld ms", rc, dlock_errmsg(),
                (long long) took);
    CHECK_INT(took, <, 3000);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* the frozen node alone: refused in a few seconds, saying what it
     * waited for and how long (not "within 1 ms" after 5 s) */
    snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d", ntohs(at.sin_port));
    c = dt_client(url, LEASE);
    l = dt_lock(c, "frozen-seed", 0);
    t0 = dt_now_ms();
    rc = dlock_try_acquire(l);
    took = dt_now_ms() - t0;
    printf("the frozen node alone: %lld ms: %s\n", (long long) took, dlock_errmsg());
    CHECK_RC(rc, DLOCK_EUNREACHABLE);
    const char *said = strstr(dlock_errmsg(), "no reply to PING in ");
    long long waited_ms = 0;
    CHECK(said != NULL && sscanf(said, "no reply to PING in %lld ms", &waited_ms) == 1);
    CHECK_INT(waited_ms, >=, 900);
    CHECK(strstr(dlock_errmsg(), "stopped, hung or overloaded") != NULL);
    CHECK_INT(took, <, 4000); /* a second each: the map, the owner record, the attempt */
    dlock_lock_free(l);
    dlock_client_close(c);
    close(fd);
}

/* The node that replicates node `master` now (-1: none). */
static int replica_of(int master)
{
    for (int i = 0; i < 6; i++) {
        redisReply *r = command(node_port(i), "ROLE");
        int yes = r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                  strcmp(r->element[0]->str, "slave") == 0 &&
                  r->element[2]->type == REDIS_REPLY_INTEGER &&
                  r->element[2]->integer == node_port(master);
        freeReplyObject(r);
        if (yes)
            return i;
    }
    return -1;
}

/* Whether the replica on port has lock name's base key (READONLY: a
 * replica of a cluster serves reads of its master's slots then). */
static int replica_has(int port, const char *name)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL || c->err)
        dt_fail(__FILE__, __LINE__, "cannot connect to port %d", port);
    redisSetTimeout(c, tv);
    freeReplyObject(redisCommand(c, "READONLY"));
    redisReply *r = redisCommand(c, "EXISTS dlock:{%s}", name);
    int has = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    redisFree(c);
    return has;
}

/* The master of a lock's slot freezes (SIGSTOP: the kernel still accepts
 * connections, nothing answers) and its replica is promoted (the node
 * timeout is 2 s): a client that knew the old master takes the lock of
 * that slot at the promoted replica, well before unreachable_wait (30 s);
 * a holder of a lock of that slot (its key replicated) and of one on
 * another master keeps both past a whole lease counted from the freeze:
 * its renewals move to the promoted replica. The frozen node is resumed
 * and comes back as a replica. Run last: the roles have changed. */
static void frozen_master_left(void)
{
    char name[32], held[32], kept[32];
    dt_lost_box lost_held = {0}, lost_kept = {0};
    int frozen = dt_cluster_master_of(&cluster, 5461); /* never node 0: it is asked */
    int other = dt_cluster_master_of(&cluster, 0);
    int replica = replica_of(frozen);
    CHECK(frozen > 0 && other >= 0 && other != frozen && replica >= 0);
    name_on(frozen, "frozen", name, sizeof name);
    name_on(frozen, "frozenheld", held, sizeof held);
    name_on(other, "frozenkept", kept, sizeof kept);

    dlock_client *h = dt_client(cluster.url, "?lease=8s");
    dlock_lock *lh = dt_lock(h, held, 0), *lk = dt_lock(h, kept, 0);
    dlock_lock_on_lost(lh, dt_on_lost, &lost_held);
    dlock_lock_on_lost(lk, dt_on_lost, &lost_kept);
    CHECK_RC(dlock_acquire(lh, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(lk, 0), DLOCK_OK);
    /* a client that has used the master already */
    dlock_client *w = dt_client(cluster.url, LEASE);
    dlock_lock *lw = dt_lock(w, name, 0);
    CHECK_RC(dlock_acquire(lw, 0), DLOCK_OK);
    CHECK_RC(dlock_release(lw), DLOCK_OK);
    /* replication is async: a key the replica lacks is lost by the
     * failover, and its loss report is right; this one is there */
    DT_WAIT_UNTIL(replica_has(node_port(replica), held), 5000);

    dt_server *node = dt_cluster_node(&cluster, frozen);
    int64_t t0 = dt_now_ms();
    dt_server_pause(node);
    int rc = dlock_acquire(lw, 20000);
    int64_t took = dt_now_ms() - t0;
    printf("node %d frozen: its slot's lock taken %lld ms later\n", frozen, (long long) took);
    if (rc != DLOCK_OK)
        dt_fail(__FILE__, __LINE__, "got %d (%s) %lld ms after the freeze", rc, dlock_errmsg(),
                (long long) took);
    CHECK_INT(took, <, 12000);
    DT_WAIT_UNTIL(dt_cluster_master_of(&cluster, slot_of(name)) == replica, 5000);
    /* past a whole lease (8 s) from the freeze: only renewals at the
     * promoted replica kept the held lock */
    int64_t past = t0 + 8500 - dt_now_ms();
    if (past > 0)
        dt_sleep_ms((int) past);
    if (atomic_load(&lost_held.lost) || atomic_load(&lost_kept.lost))
        dt_fail(__FILE__, __LINE__, "a hold was lost %lld ms after the freeze: %s%s",
                (long long) (atomic_load(&lost_held.lost) ? lost_held.at_ms : lost_kept.at_ms) - t0,
                lost_held.why, lost_kept.why);
    CHECK_RC(dlock_lock_verify(lh), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(lk), DLOCK_OK);
    CHECK_RC(dlock_release(lw), DLOCK_OK);
    CHECK_RC(dlock_release(lh), DLOCK_OK);
    CHECK_RC(dlock_release(lk), DLOCK_OK);

    dt_server_resume(node);
    dt_cluster_wait_settled(&cluster); /* the old master back, as a replica */
    CHECK(replica_of(replica) == frozen);
    dlock_lock_free(lw);
    dlock_lock_free(lh);
    dlock_lock_free(lk);
    dlock_client_close(w);
    dlock_client_close(h);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"bad_urls", bad_urls},
        {"with_auth", with_auth},
        {"locks_on_every_master", locks_on_every_master},
        {"multi_across_slots", multi_across_slots},
        {"moved_while_held", moved_while_held},
        {"owner_record_moved", owner_record_moved},
        {"shared_holds_while_migrating", shared_holds_while_migrating},
        {"handed_hold_while_migrating", handed_hold_while_migrating},
        {"failover_while_held", failover_while_held},
        {"notice_wakes_waiter", notice_wakes_waiter},
        {"subscriber_killed", subscriber_killed},
        {"no_plain_publish", no_plain_publish},
        {"frozen_first_seed", frozen_first_seed},
        {"frozen_master_left", frozen_master_left},
    };
    /* once for the program, before any test forks (no threads yet) */
    dt_server_start(&cluster, "cluster", 0, NULL);
    int rc = DT_RUN(tests);
    dt_server_stop(&cluster);
    return rc;
}
