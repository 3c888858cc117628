/* SPDX-License-Identifier: MIT */
/* test_redlock_rw.c - the read-write lock of redlock:// over 3 independent
 * redis-servers, where a quorum makes it what it is: readers held on a
 * quorum are counted and a token on a minority is not; a mutex or a
 * writer is refused by readers on a quorum even when one of the nodes it
 * reaches is free of them (two majorities meet); a waiting writer's mark
 * keeps new readers out until it gets in or gives up; a waiting reader is
 * served before the writers that came after it, with the same place on
 * every node, even beside writers in tight loops (turns); readers are renewed
 * by a quorum and lost when a quorum lets them go; force-unlock and list
 * of the read-write lock; and the operator's calls of a user the nodes
 * refuse (said as refused, not out of reach). (The contract every store keeps, readers sharing
 * and kinds excluding one another, is the conformance suite's.)
 *
 * The nodes are 3 servers of kind redis, started by main() before any test
 * forks; a test only freezes and wakes them (SIGSTOP, SIGCONT). */
#include "../support/harness.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NNODES 3
static dt_server nodes[NNODES];
static char url[256];

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

/* An integer command's reply on node i (-100 when none). */
static long long node_int(int i, const char *fmt, const char *arg)
{
    redisReply *r = node_command(i, fmt, arg);
    long long v = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
    freeReplyObject(r);
    return v;
}

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Puts reader token on the nodes listed (-1 ends the list) of lock name's
 * readers, its lease ending in ms (the nodes' clock is this host's). */
static void reader_on(const char *name, const char *token, int ms, const int *which)
{
    char key[128];
    snprintf(key, sizeof key, "redlock:{%s}:rw:r", name);
    for (; *which >= 0; which++) {
        redisReply *r = node_command(*which, "ZADD %s %lld %s", key, wall_ms() + ms, token);
        CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER);
        freeReplyObject(r);
    }
}

static void pause_node(int i)
{
    dt_server_pause(&nodes[i]);
    CHECK(dt_wait_stopped(nodes[i].pid));
}

/* ---------------------------------------------------------------- tests */

/* Readers are counted where a quorum holds them: two taken, and a
 * leftover token on one node is no reader (status, holders); on two it
 * is. */
static void readers_counted_by_quorum(void)
{
    dlock_client *c = dt_client(url, NULL);
    dlock_lock *r1 = dt_lock(c, "rq", DLOCK_READ), *r2 = dt_lock(c, "rq", DLOCK_READ);

    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK);
    /* a leftover on each node, each on that one only (whichever nodes the
     * round hears first, those it did not hear could hold one on a quorum:
     * it hears all three) */
    reader_on("rq", "leftover", 20000, (const int[]){0, -1});
    reader_on("rq", "leftover1", 20000, (const int[]){1, -1});
    reader_on("rq", "leftover2", 20000, (const int[]){2, -1});
    dlock_status st = dt_query(c, "rq", DLOCK_READ);
    CHECK_INT(st.shared, ==, 2);
    CHECK_INT(st.held, ==, 1);
    CHECK(st.owner[0] == '\0'); /* no writer */
    CHECK_INT(st.lease_ms, >, 0);
    CHECK_INT(st.lease_ms, <=, 30000);
    CHECK_INT(dt_query_holders(c, "rq", DLOCK_READ).n, ==, 2);
    reader_on("rq", "leftover", 20000, (const int[]){1, -1});
    CHECK_INT(dt_query(c, "rq", DLOCK_WRITE).shared, ==, 3);
    dt_holders all = dt_query_holders(c, "rq", DLOCK_WRITE);
    CHECK_INT(all.n, ==, 3);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_INT(dt_query(c, "rq", DLOCK_READ).shared, ==, 1);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_client_close(c);
}

/* A reader on nodes 0 and 1 (a quorum), none on node 2: with node 0
 * frozen, the mutex and a writer reach nodes 1 and 2 only, node 2 would
 * grant, but node 1 refuses and no quorum forms: refused, naming the
 * read-write lock (two majorities meet). A reader on one node only
 * refuses nothing. */
static void majorities_meet(void)
{
    dlock_client *c = dt_client(url, "?timeout=1s");
    dlock_lock *m = dt_lock(c, "meet", 0), *w = dt_lock(c, "meet", DLOCK_WRITE);

    reader_on("meet", "reader", 20000, (const int[]){0, 1, -1});
    pause_node(0);
    CHECK_RC(dlock_try_acquire(m), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held as a read-write lock") != NULL);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY);
    dt_server_resume(&nodes[0]);
    freeReplyObject(node_command(1, "DEL redlock:{meet}:rw:r"));

    CHECK_RC(dlock_try_acquire(w), DLOCK_OK); /* the reader on node 0 alone */
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    freeReplyObject(node_command(0, "DEL redlock:{meet}:rw:r"));
    dlock_lock_free(m);
    dlock_lock_free(w);
    dlock_client_close(c);
}

typedef struct waiter {
    dlock_lock *l;
    int64_t budget_ms;
    int rc;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->l, w->budget_ms);
    return NULL;
}

/* A writer waiting behind a reader keeps a new reader out (its mark on
 * the nodes); when it gives up (its budget ends) the mark goes at once
 * and the new reader gets in. */
static void writer_mark_holds_readers(void)
{
    dlock_client *a = dt_client(url, NULL), *b = dt_client(url, NULL), *c = dt_client(url, NULL);
    dlock_lock *r1 = dt_lock(a, "mark", DLOCK_READ), *r2 = dt_lock(c, "mark", DLOCK_READ);
    waiter w = {.l = dt_lock(b, "mark", DLOCK_WRITE), .budget_ms = 1500};
    pthread_t t;

    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    CHECK(pthread_create(&t, NULL, wait_for_it, &w) == 0);
    DT_WAIT_UNTIL(dt_query(a, "mark", DLOCK_WRITE).waiters == 1, 2000);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_EBUSY);
    CHECK_INT(node_int(0, "ZCARD redlock:{%s}:rw:writing", "mark"), ==, 1);
    pthread_join(t, NULL);
    CHECK_RC(w.rc, DLOCK_ETIMEDOUT);
    CHECK_INT(dt_query(a, "mark", DLOCK_WRITE).waiters, ==, 0);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK); /* not 2 s later: the mark went */
    CHECK_INT(dt_query(a, "mark", DLOCK_READ).shared, ==, 2);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w.l);
    dlock_client_close(a);
    dlock_client_close(b);
    dlock_client_close(c);
}

/* The place of node i's one waiting reader of lock name (-1 if none). */
static long long reader_place(int i, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "redlock:{%s}:rw:waiting:since", name);
    redisReply *r = node_command(i, "ZRANGE %s 0 -1 WITHSCORES", key);
    long long v = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
                      ? atoll(r->element[1]->str)
                      : -1;
    freeReplyObject(r);
    return v;
}

/* Turns: a reader waiting behind a writer is served before a writer that
 * came after it, even one that asks while the name is free (the holder
 * taking it straight back, with a try); that writer follows the reader.
 * The reader's place is the same number on every node (each node would
 * put it at its own clock). Before, the later writer's mark kept the
 * reader out and the writers went first. */
static void free_lock_goes_to_older_reader(void)
{
    dlock_client *a = dt_client(url, NULL), *b = dt_client(url, NULL), *c = dt_client(url, NULL);
    dlock_lock *w1 = dt_lock(a, "line", DLOCK_WRITE);
    waiter r = {.l = dt_lock(b, "line", DLOCK_READ), .budget_ms = 5000};
    waiter w2 = {.l = dt_lock(c, "line", DLOCK_WRITE), .budget_ms = 5000};
    pthread_t tr, tw;

    CHECK_RC(dlock_acquire(w1, 0), DLOCK_OK);
    CHECK(pthread_create(&tr, NULL, wait_for_it, &r) == 0);
    DT_WAIT_UNTIL(dt_query(a, "line", DLOCK_WRITE).waiters == 1, 2000);
    DT_WAIT_UNTIL(reader_place(0, "line") > 0 &&
                      reader_place(0, "line") == reader_place(1, "line") &&
                      reader_place(1, "line") == reader_place(2, "line"),
                  2000);
    CHECK(pthread_create(&tw, NULL, wait_for_it, &w2) == 0);
    DT_WAIT_UNTIL(dt_query(a, "line", DLOCK_WRITE).waiters == 2, 2000);
    CHECK_RC(dlock_release(w1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w1), DLOCK_EBUSY); /* the reader's turn */
    printf("a writer's try right after its release, beside a waiting reader: %s\n", dlock_errmsg());
    pthread_join(tr, NULL);
    CHECK_RC(r.rc, DLOCK_OK);
    dlock_status st = dt_query(a, "line", DLOCK_WRITE);
    CHECK_INT(st.shared, ==, 1);
    CHECK(st.owner[0] == '\0'); /* the later writer waits */
    CHECK_RC(dlock_release(r.l), DLOCK_OK);
    pthread_join(tw, NULL);
    CHECK_RC(w2.rc, DLOCK_OK);
    CHECK_RC(dlock_release(w2.l), DLOCK_OK);
    CHECK_INT(reader_place(0, "line"), ==, -1); /* its place went when it got in */
    dlock_lock_free(w1);
    dlock_lock_free(r.l);
    dlock_lock_free(w2.l);
    dlock_client_close(a);
    dlock_client_close(b);
    dlock_client_close(c);
}

/* A reader of a short lease is renewed by the client's renewer through
 * three leases (its score moved on, on the nodes); taken from two nodes'
 * readers, it is reported lost. */
static void reader_renewed_then_lost(void)
{
    dlock_client *c = dt_client(url, "?lease=600ms");
    dlock_lock *r = dt_lock(c, "renewed", DLOCK_READ);
    dt_lost_box box = {0};
    dlock_lock_on_lost(r, dt_on_lost, &box);

    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    dt_sleep_ms(1800); /* time passing beyond the lease is the point */
    CHECK_INT(atomic_load(&box.lost), ==, 0);
    CHECK_RC(dlock_lock_check(r), DLOCK_OK);
    CHECK_INT(dt_query(c, "renewed", DLOCK_READ).shared, ==, 1);
    char key[64];
    snprintf(key, sizeof key, "redlock:{renewed}:rw:r");
    freeReplyObject(node_command(0, "ZREM %s %s", key, dlock_lock_token(r)));
    freeReplyObject(node_command(1, "ZREM %s %s", key, dlock_lock_token(r)));
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 2000);
    CHECK_RC(dlock_release(r), DLOCK_ELOST);
    dlock_lock_free(r);
    dlock_client_close(c);
}

static int listed_kind = -1;
static void keep_kind(const char *name, unsigned flags, void *arg)
{
    (void) arg;
    if (strcmp(name, "ls-rw") == 0)
        listed_kind = (int) flags;
}

/* list finds the read-write lock (held by a reader) as one; force-unlock
 * of it lets its readers go (the holder is told at its next renewal) and
 * leaves the name's mutex keys alone. */
static void force_unlock_and_list(void)
{
    dlock_client *c = dt_client(url, "?lease=900ms"), *op = dt_client(url, NULL);
    dlock_lock *r = dt_lock(c, "ls-rw", DLOCK_READ);
    dt_lost_box box = {0};
    dlock_lock_on_lost(r, dt_on_lost, &box);

    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    CHECK_RC(dlock_list(op, "ls-", 0, keep_kind, NULL), DLOCK_OK);
    CHECK_INT(listed_kind, ==, DLOCK_WRITE);
    CHECK_RC(dlock_force_unlock(op, "ls-rw", DLOCK_READ), DLOCK_OK);
    CHECK_INT(dt_query(op, "ls-rw", DLOCK_READ).held, ==, 0);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 2000);
    listed_kind = -1;
    CHECK_RC(dlock_list(op, "ls-", 0, keep_kind, NULL), DLOCK_OK);
    CHECK_INT(listed_kind, ==, -1);
    dlock_lock_free(r);
    dlock_client_close(c);
    dlock_client_close(op);
}

static void ignore_name(const char *name, unsigned flags, void *arg)
{
    (void) name, (void) flags, (void) arg;
}

/* A user the nodes do not know: status and list say that a quorum of nodes
 * refused this client (DLOCK_ESERVER, exit 70), naming the user and never
 * the password, as a take does; they said "out of reach" (exit 69), and
 * the label dropped the user. */
static void wrong_user_refused(void)
{
    char bad[300];
    dlock_status st;
    snprintf(bad, sizeof bad, "redlock://bob:s3cret@%s", url + strlen("redlock://"));
    dlock_client *c = dt_client(bad, NULL);
    CHECK_RC(dlock_query(c, "wu", DLOCK_WRITE, &st), DLOCK_ESERVER);
    const char *msg = dlock_errmsg();
    if (strstr(msg, "redlock://bob:***@") == NULL || strstr(msg, "refused this client") == NULL ||
        strstr(msg, "WRONGPASS") == NULL || strstr(msg, "s3cret") != NULL)
        dt_fail(__FILE__, __LINE__, "status: %s", msg);
    CHECK_RC(dlock_list(c, "", 0, ignore_name, NULL), DLOCK_ESERVER);
    msg = dlock_errmsg();
    if (strstr(msg, "redlock://bob:***@") == NULL || strstr(msg, "refused this client") == NULL)
        dt_fail(__FILE__, __LINE__, "list: %s", msg);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- turns */

enum { WRITERS = 3, HOLD_US = 30000 };

/* A client taking the write lock of "turns" in a tight loop, working
 * under it for a moment, until told to stop. */
typedef struct looper {
    dlock_client *c;
    unsigned kind;
    atomic_int *stop;
    atomic_long rounds;
    _Atomic int rc; /* the first failure, or DLOCK_OK */
} looper;

static void *loop_taking(void *arg)
{
    looper *lp = arg;
    dlock_lock *l = dt_lock(lp->c, "turns", lp->kind);
    while (!atomic_load(lp->stop) && lp->rc == DLOCK_OK) {
        lp->rc = dlock_acquire(l, 20000);
        if (lp->rc == DLOCK_OK) {
            atomic_fetch_add(&lp->rounds, 1);
            usleep(HOLD_US); /* the work done under the lock */
            lp->rc = dlock_release(l);
        }
    }
    dlock_lock_free(l);
    return NULL;
}

static long rounds_of(looper *lps, int n)
{
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += atomic_load(&lps[i].rounds);
    return sum;
}

/* The fault suite's seed 7 (a reader of rw0 not served in the 14 s after
 * the last heal while three writers took it in turn): writers that keep
 * coming always had a live waiting mark, and a mark kept every reader out,
 * however long the reader had waited. A reader that waits is now served
 * before the writers that came after it: within its budget beside three
 * writers in tight loops, which go on being served. */
static void reader_not_starved_by_writers(void)
{
    atomic_int stop = 0;
    looper lps[WRITERS];
    pthread_t ts[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        lps[i] = (looper){.c = dt_client(url, NULL), .kind = DLOCK_WRITE, .stop = &stop};
        CHECK(pthread_create(&ts[i], NULL, loop_taking, &lps[i]) == 0);
    }
    DT_WAIT_UNTIL(rounds_of(lps, WRITERS) >= 2 * WRITERS, 10000);

    dlock_client *c = dt_client(url, NULL);
    dlock_lock *r = dt_lock(c, "turns", DLOCK_READ);
    for (int round = 0; round < 3; round++) {
        int64_t t0 = dt_now_ms();
        int rc = dlock_acquire(r, 5000);
        int64_t took = dt_now_ms() - t0;
        printf("a reader beside %d writers in tight loops: %s after %lld ms\n", WRITERS,
               dlock_strerror(rc), (long long) took);
        CHECK_RC(rc, DLOCK_OK);
        CHECK_INT(took, <, 3000);
        CHECK_RC(dlock_release(r), DLOCK_OK);
    }
    long before = rounds_of(lps, WRITERS);
    DT_WAIT_UNTIL(rounds_of(lps, WRITERS) >= before + WRITERS, 10000);
    atomic_store(&stop, 1);
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(ts[i], NULL);
        CHECK_RC(lps[i].rc, DLOCK_OK);
        dlock_client_close(lps[i].c);
    }
    dlock_lock_free(r);
    dlock_client_close(c);
}

static void *resume_soon(void *arg)
{
    (void) arg;
    dt_sleep_ms(30);
    dt_server_resume(&nodes[0]);
    dt_server_resume(&nodes[1]);
    return NULL;
}

/* A second write handle of an owner that holds the write and a read
 * (dlock_lock_dup), with node 2 missing the read (a node that restarted
 * empty, or a round decided without it): nodes 0 and 1 refuse it (the
 * owner's own read), node 2 takes it (the owner's write is there). The
 * refusal gives nothing back under the owner's token: a give-back ended
 * the owner's write on every node, and another client's reader got in
 * beside it (review41, F1). */
static void dup_writer_refused_on_mixed_nodes(void)
{
    dlock_client *c = dt_client(url, NULL), *other = dt_client(url, NULL);
    dlock_lock *w = dt_lock(c, "mixed", DLOCK_WRITE), *r = NULL, *w2 = NULL;
    dlock_lock *foreign = dt_lock(other, "mixed", DLOCK_READ);
    CHECK_RC(dlock_acquire_for(w, 0, 30000), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &r), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(r, 0, 30000), DLOCK_OK);
    freeReplyObject(node_command(2, "DEL redlock:{mixed}:rw:r redlock:{mixed}:rw:rc"));
    CHECK_RC(dlock_lock_dup(w, DLOCK_WRITE, &w2), DLOCK_OK);
    /* node 2's answer first (the others 30 ms late), so that the round
     * counts it */
    pause_node(0);
    pause_node(1);
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, resume_soon, NULL), ==, 0);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EDEADLK);
    pthread_join(t, NULL);
    CHECK_RC(dlock_try_acquire(foreign), DLOCK_EBUSY); /* the owner's write holds */
    CHECK_RC(dlock_lock_check(w), DLOCK_OK);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(foreign), DLOCK_OK);
    CHECK_RC(dlock_release(foreign), DLOCK_OK);
    dlock_lock_free(w2);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_lock_free(foreign);
    dlock_client_close(c);
    dlock_client_close(other);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"readers_counted_by_quorum", readers_counted_by_quorum},
        {"majorities_meet", majorities_meet},
        {"writer_mark_holds_readers", writer_mark_holds_readers},
        {"free_lock_goes_to_older_reader", free_lock_goes_to_older_reader},
        {"reader_renewed_then_lost", reader_renewed_then_lost},
        {"force_unlock_and_list", force_unlock_and_list},
        {"wrong_user_refused", wrong_user_refused},
        {"reader_not_starved_by_writers", reader_not_starved_by_writers},
        {"dup_writer_refused_on_mixed_nodes", dup_writer_refused_on_mixed_nodes},
    };
    /* once for the program, before any test forks (no threads yet) */
    for (int i = 0; i < NNODES; i++)
        dt_server_start(&nodes[i], "redis", 0, NULL);
    snprintf(url, sizeof url, "redlock://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", nodes[0].port,
             nodes[1].port, nodes[2].port);
    int rc = DT_RUN(tests);
    for (int i = 0; i < NNODES; i++)
        dt_server_stop(&nodes[i]);
    return rc;
}
