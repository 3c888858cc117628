/* SPDX-License-Identifier: MIT */
/* test_ensemble.c - ZooKeeper and etcd as three-member ensembles (the
 * harness's dt_ensemble), through the public API only: the leader killed
 * (kill -9) or paused (SIGSTOP) while a lock is held and another client
 * waits, and a member down while clients come and go.
 *
 * What a leader change may do to a holder is the store's business: its
 * session or lease may survive it or not. What must hold either way:
 *  - the holder keeps its lock (the store confirms it, dlock_lock_check
 *    says so, and a write fenced with its token is still accepted by the
 *    resource) or it is told it lost it (dt_on_lost, DLOCK_ELOST), before the
 *    waiter is granted;
 *  - whenever the holder believes it holds, the resource accepts its
 *    write: the waiter writes as soon as it is granted, with its larger
 *    fence, so a holder still believing it holds after that is refused,
 *    and the test fails;
 *  - the waiter is granted after the release or the loss, with a strictly
 *    larger fence, within the session (lease) and an election;
 *  - fences keep increasing across the leader change, for old clients and
 *    new ones.
 * Sessions and leases are short (2 s; etcd's 6 s, below) so that each case
 * takes seconds, and every wait is for a condition, bounded by what the
 * store promises.
 *
 * `test_ensemble zookeeper` (or etcd) runs one store's tests, as ctest
 * does; `test_ensemble TEST` one test; DT_LOG=1 shows the clients' logs. */
#define _GNU_SOURCE
#include "../support/harness.h"
#include "../support/server_kind.h" /* dt__tcp_connect */

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

typedef struct store {
    const char *kind;
    /* Client URL options: a short session (ZooKeeper) or lease (etcd),
     * and requests short enough that a client stuck on a paused member
     * moves on well within it. */
    const char *options;
    /* The waiter's: its session or lease outlasts every pause of a leader
     * here (see etcd's, below). */
    const char *waiter_options;
    int64_t session_ms;
    /* The longest the remaining members may take to agree on a new
     * leader after losing theirs (twice what runs here take, loaded). */
    int64_t election_ms;
    const char *server_args; /* for every member (NULL: none) */
} store;

/* ZooKeeper (ticks of 200 ms): followers leave a silent leader after
 * syncLimit (5 ticks), then a round of votes (finalizeWait 200 ms) and the
 * new leader's sync. etcd (election timeout 500 ms): randomized in
 * [500, 1000) ms, then a vote. */
static const store zookeeper = {.kind = "zookeeper",
                                .options = "?session_timeout=2s&timeout=1s",
                                .waiter_options = "?session_timeout=2s&timeout=1s",
                                .session_ms = 2000,
                                .election_ms = 8000,
                                .server_args = "4lw.commands.whitelist=*"};
/* etcd's leases are longer than a paused leader stays paused where the
 * test expects a hold to survive: etcd 3.4.23 has a known defect (etcd
 * issues 12528 and 15247, fixed by PR 16822 in 3.5.12) where a leader that
 * stalls and comes back revokes the leases that ran out in its own memory
 * during the stall, though the clients renewed them with the new leader
 * all along. No client can report that loss before it happens
 * (docs/etcd.md says to keep leases longer than the longest stall). The
 * holder's 6 s covers the pause when it reaches every member (with 2 s, 1
 * run in 25-50 under ThreadSanitizer lost the waiter's hold so); when it is
 * stranded with the paused leader the pause outlasts its lease by design,
 * so the waiter's lease is longer still (with 6 s, 1 run in 14 under
 * ThreadSanitizer lost the waiter's hold on the old leader's return). */
static const store etcd = {.kind = "etcd",
                           .options = "?lease=6s&timeout=500ms",
                           .waiter_options = "?lease=20s&timeout=500ms",
                           .session_ms = 6000,
                           .election_ms = 5000};

static int64_t t_start;

/* ---------------------------------------------------------------- helpers */

static void log_line(int level, const char *msg, void *arg)
{
    fprintf(stderr, "%6lld %-6s %s: %s\n", (long long) (dt_now_ms() - t_start), (const char *) arg,
            dlock_log_level_name(level), msg);
}

static dlock_client *client_at(const char *url, const char *options, const char *role)
{
    char full[768];
    dlock_client *c = NULL;
    snprintf(full, sizeof full, "%s%s", url, options);
    CHECK_RC(dlock_client_open(full, &c), DLOCK_OK);
    const char *log = getenv("DT_LOG");
    if (log != NULL && (strcmp(log, "1") == 0 || strcmp(log, "debug") == 0))
        CHECK_RC(dlock_client_set_log(c, log[0] == '1' ? DLOCK_LOG_INFO : DLOCK_LOG_DEBUG, log_line,
                                      (void *) role),
                 DLOCK_OK);
    return c;
}

static unsigned waiters(dlock_client *c, const char *name)
{
    dlock_status st;
    return dlock_query(c, name, 0, &st) == DLOCK_OK ? st.waiters : 0;
}

/* The resource the lock protects: it refuses a write fenced below the
 * highest fence it has accepted. */
typedef struct resource {
    pthread_mutex_t mu;
    uint64_t highest;
} resource;

static int fenced_write(resource *r, uint64_t fence)
{
    pthread_mutex_lock(&r->mu);
    int ok = fence >= r->highest;
    if (ok)
        r->highest = fence;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* An acquisition on a thread of its own that writes to the resource as
 * soon as it is granted. */
typedef struct waiter {
    pthread_t thread;
    dlock_lock *lock;
    resource *res;
    atomic_int done;
    atomic_llong at_ms; /* when the call returned */
    int rc;
    uint64_t fence;
    int accepted; /* its write */
} waiter;

static void *waiter_run(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_acquire(w->lock, 60000);
    atomic_store(&w->at_ms, dt_now_ms());
    if (w->rc == DLOCK_OK) {
        w->fence = dlock_lock_fence(w->lock);
        w->accepted = fenced_write(w->res, w->fence);
    }
    atomic_store(&w->done, 1);
    return NULL;
}

/* The holder writes whenever it believes it holds: the resource must
 * accept it. 1 if it believed so. */
static int holder_writes(dlock_lock *h, resource *res, uint64_t fence)
{
    if (dlock_lock_check(h) != DLOCK_OK)
        return 0;
    if (!fenced_write(res, fence))
        dt_fail(__FILE__, __LINE__,
                "the holder (fence %llu) believes it holds, but the resource has seen fence %llu: "
                "two holders at once",
                (unsigned long long) fence, (unsigned long long) res->highest);
    return 1;
}

/* Waits until a member other than `not` (-1: any) leads and at least
 * `answering` members answer; returns the leader. With h, the holder
 * writes meanwhile whenever it believes it holds. */
static int wait_leader(dt_ensemble *e, int not, int answering, int64_t ms, dlock_lock *h,
                       resource *res, uint64_t fence)
{
    int64_t until = dt_now_ms() + ms;
    for (;;) {
        int leader = dt_ensemble_leader(e);
        if (leader >= 0 && leader != not &&dt_ensemble_answering(e) >= answering)
            return leader;
        if (h != NULL)
            holder_writes(h, res, fence);
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__,
                    "no leader (but member %d) and %d members answering in %lld ms", not, answering,
                    (long long) ms);
        dt_sleep_ms(20);
    }
}

/* A ZooKeeper four-letter command's answer from member i ("" if none). */
static const char *four_letters(const dt_ensemble *e, int i, const char *cmd)
{
    static char buf[16384];
    size_t used = 0;
    ssize_t n;
    buf[0] = '\0';
    int fd = dt__tcp_connect(e->members[i].port, 1000);
    if (fd < 0)
        return buf;
    if (write(fd, cmd, 4) == 4) {
        while (used + 1 < sizeof buf && (n = read(fd, buf + used, sizeof buf - 1 - used)) > 0)
            used += (size_t) n;
    }
    buf[used] = '\0';
    close(fd);
    return buf;
}

/* Waits until the waiter's call returns, at most until `until`; if it
 * does not, says what the store has (a fresh client's dlock_query, and
 * ZooKeeper's sessions and connections on each member) before failing:
 * e.g. the lock still held in a session whose client reported it lost,
 * and a connection of that session still pinging ("cons"). */
static void wait_granted(const dt_ensemble *e, const store *st, waiter *w, int64_t until)
{
    while (!atomic_load(&w->done)) {
        if (dt_now_ms() > until) {
            dlock_status qs = {0};
            dlock_client *c = client_at(e->url, st->options, "query");
            int rc = dlock_query(c, "leader", 0, &qs);
            for (int i = 0; strcmp(st->kind, "zookeeper") == 0 && i < e->n; i++) {
                if (e->members[i].pid <= 0 || e->members[i].paused)
                    continue;
                fprintf(stderr, "member %d srvr:\n%s", i, four_letters(e, i, "srvr"));
                fprintf(stderr, "member %d dump:\n%s", i, four_letters(e, i, "dump"));
                fprintf(stderr, "member %d cons:\n%s", i, four_letters(e, i, "cons"));
            }
            dt_fail(__FILE__, __LINE__,
                    "the waiter (token %s) still waits; the store says (%s): held %d by %s, %u "
                    "waiters, last fence %llu",
                    dlock_lock_token(w->lock), dlock_strerror(rc), qs.held, qs.owner, qs.waiters,
                    (unsigned long long) qs.last_fence);
        }
        dt_sleep_ms(5);
    }
}

/* ---------------------------------------------------------------- the leader lost */

enum {
    KILL = 0,          /* kill -9 the leader, and start it again at the end */
    PAUSE = 1u << 0,   /* SIGSTOP it, and SIGCONT at the end */
    STRANDED = 1u << 1 /* the holder's client reaches only the leader */
};

/* A client that reaches only member i. */
static dlock_client *client_of_member(const dt_ensemble *e, int i, const store *st,
                                      const char *role)
{
    char url[512];
    dt_ensemble_url_from(e, i, url, sizeof url);
    *strchr(url, ',') = '\0';
    return client_at(url, st->options, role);
}

/* The leader lost (kill -9 or SIGSTOP) while a holder holds and a waiter
 * waits. A holder that reaches every member may keep its lock; one
 * stranded with the old leader must lose it, and be told before the
 * waiter is granted. The old leader, started again or resumed, follows
 * the new one: a client that reaches only it finds the waiter's hold, and
 * takes the lock after it above every fence so far. */
static void leader_lost(const store *st, unsigned how)
{
    dt_ensemble e;
    dt_lost_box box = {0}, wbox = {0};
    resource res = {PTHREAD_MUTEX_INITIALIZER, 0};
    waiter ww;
    int old;

    t_start = dt_now_ms();
    dt_ensemble_start(&e, st->kind, 3, st->server_args, NULL);
    int64_t started = dt_now_ms() - t_start;
    old = wait_leader(&e, -1, 3, st->election_ms, NULL, NULL, 0);
    dlock_client *ch = (how & STRANDED) ? client_of_member(&e, old, st, "holder")
                                        : client_at(e.url, st->options, "holder");
    dlock_client *cw = client_at(e.url, st->waiter_options, "waiter");
    dlock_lock *h = dt_lock(ch, "leader", 0), *w = dt_lock(cw, "leader", 0);
    dlock_lock_on_lost(h, dt_on_lost, &box);
    dlock_lock_on_lost(w, dt_on_lost, &wbox);
    CHECK_RC(dlock_acquire(h, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(h);
    CHECK(holder_writes(h, &res, fence));
    memset(&ww, 0, sizeof ww);
    ww.lock = w;
    ww.res = &res;
    CHECK_INT(pthread_create(&ww.thread, NULL, waiter_run, &ww), ==, 0);
    DT_WAIT_UNTIL(waiters(ch, "leader") == 1, 5000);

    /* The leader now: a stranded holder's premise is that it is the one
     * found above; for the others, it may have moved meanwhile. */
    int now = wait_leader(&e, -1, 0, st->election_ms, NULL, NULL, 0);
    if (how & STRANDED)
        CHECK_INT(now, ==, old);
    old = now;
    int64_t t0 = dt_now_ms();
    if (how & PAUSE)
        dt_ensemble_pause(&e, old);
    else
        dt_ensemble_kill(&e, old);
    int leader = wait_leader(&e, old, 0, st->election_ms, h, &res, fence);
    int64_t elected = dt_now_ms() - t0;

    /* The holder's fate, as the store sees it once it has a new leader. */
    int64_t bound = st->session_ms + st->election_ms;
    int verdict;
    for (;;) {
        verdict = dlock_lock_verify(h);
        if (verdict == DLOCK_OK || verdict == DLOCK_ELOST)
            break;
        CHECK_RC(verdict, DLOCK_EUNREACHABLE);
        holder_writes(h, &res, fence);
        if (dt_now_ms() - t0 > bound)
            dt_fail(__FILE__, __LINE__, "the holder's hold neither confirmed nor lost in %lld ms",
                    (long long) bound);
        dt_sleep_ms(20);
    }
    int64_t decided = dt_now_ms() - t0, freed_at;
    const char *outcome = verdict == DLOCK_OK ? "kept its lock" : "lost its lock";
    if (how & STRANDED)
        CHECK_RC(verdict, DLOCK_ELOST);
    if (verdict == DLOCK_OK) {
        /* Kept, the store said: the holder's fenced write goes through
         * while it believes it holds, and the waiter is not granted before
         * a release or a loss. Verifying lengthens nothing, so the hold
         * may still lapse here (its session's keepalives failed): then it
         * is told. */
        holder_writes(h, &res, fence);
        if (atomic_load(&ww.done) && !atomic_load(&box.lost))
            dt_fail(__FILE__, __LINE__, "the waiter returned %d (%s) while the holder holds", ww.rc,
                    dlock_strerror(ww.rc));
        freed_at = dt_now_ms();
        int rc = dlock_release(h);
        if (rc == DLOCK_ELOST) {
            CHECK(atomic_load(&box.lost));
            freed_at = atomic_load(&box.at_ms);
            outcome = "kept its lock, then lost it before its release";
        } else {
            CHECK_RC(rc, DLOCK_OK);
        }
    } else {
        /* Lost: told through dt_on_lost, and by the next call. */
        DT_WAIT_UNTIL(atomic_load(&box.lost), 1000);
        freed_at = atomic_load(&box.at_ms);
        CHECK_RC(dlock_lock_check(h), DLOCK_ELOST);
        CHECK_RC(dlock_release(h), DLOCK_ELOST);
    }
    wait_granted(&e, st, &ww, t0 + bound + 1000);
    pthread_join(ww.thread, NULL);
    CHECK_RC(ww.rc, DLOCK_OK);
    CHECK(ww.fence > fence);
    CHECK(ww.accepted);
    /* granted after the release, or after the holder was told of its loss */
    CHECK_INT(atomic_load(&ww.at_ms), >=, freed_at);
    CHECK_INT(atomic_load(&ww.at_ms) - t0, <=, bound + 1000);
    CHECK_RC(dlock_lock_check(h), DLOCK_ENOTOWNER); /* released, or its loss told */

    /* The old leader back, following the new one (just resumed, it may
     * still say it leads, for a moment). */
    int64_t t1 = dt_now_ms();
    if (how & PAUSE)
        dt_ensemble_resume(&e, old);
    else
        dt_ensemble_restart(&e, old, 0);
    wait_leader(&e, old, 3, 20000, NULL, NULL, 0);
    int64_t back = dt_now_ms() - t1;
    dlock_client *co = client_of_member(&e, old, st, "old");
    dlock_lock *o = dt_lock(co, "leader", 0);
    /* The waiter went through the change too: it may have lost its hold
     * since (told, as the holder), or hold it still (its write accepted). */
    int took = dlock_try_acquire(o);
    if (took == DLOCK_OK) {
        CHECK(atomic_load(&wbox.lost));
        CHECK_RC(dlock_release(w), DLOCK_ELOST);
    } else {
        CHECK_RC(took, DLOCK_EBUSY);
        holder_writes(w, &res, ww.fence);
        int rc = dlock_release(w);
        if (rc != DLOCK_OK) {
            CHECK_RC(rc, DLOCK_ELOST);
            CHECK(atomic_load(&wbox.lost));
        }
        CHECK_RC(dlock_acquire(o, 5000), DLOCK_OK);
    }
    CHECK(dlock_lock_fence(o) > ww.fence);
    CHECK(fenced_write(&res, dlock_lock_fence(o)));
    CHECK_RC(dlock_release(o), DLOCK_OK);
    /* and the holder's client takes it again, above every fence so far */
    CHECK_RC(dlock_acquire(h, 5000), DLOCK_OK);
    CHECK(dlock_lock_fence(h) > res.highest);
    CHECK_RC(dlock_release(h), DLOCK_OK);

    printf("  %s, leader (member %d) %s%s: started in %lld ms; member %d led after %lld ms; "
           "holder %s after %lld ms; waiter granted %lld ms after that; old leader back in %lld "
           "ms\n",
           st->kind, old, (how & PAUSE) ? "paused" : "killed",
           (how & STRANDED) ? " with the holder" : "", (long long) started, leader,
           (long long) elected, outcome, (long long) decided,
           (long long) (atomic_load(&ww.at_ms) - freed_at), (long long) back);
    dlock_lock_free(h);
    dlock_lock_free(w);
    dlock_lock_free(o);
    dlock_client_close(ch);
    dlock_client_close(cw);
    dlock_client_close(co);
    dt_ensemble_stop(&e);
}

/* ---------------------------------------------------------------- a member down */

/* Takes and releases l, checking its fence is above *last. */
static void take_release(dlock_lock *l, uint64_t *last)
{
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK(dlock_lock_fence(l) > *last);
    *last = dlock_lock_fence(l);
    CHECK_RC(dlock_release(l), DLOCK_OK);
}

/* The leader stopped: with two members of three the store goes on; a new
 * client whose URL names the stopped member first connects and takes the
 * lock; fences keep increasing across the change, for the old client and
 * the new one; the member restarted catches up, and a client that reaches
 * only it takes the lock above every fence so far. */
static void member_down(const store *st)
{
    dt_ensemble e;
    char url[512];
    uint64_t last = 0;

    t_start = dt_now_ms();
    dt_ensemble_start(&e, st->kind, 3, NULL);
    dlock_client *c1 = client_at(e.url, st->options, "old");
    dlock_lock *l1 = dt_lock(c1, "down", 0);
    for (int i = 0; i < 3; i++)
        take_release(l1, &last);

    int old = wait_leader(&e, -1, 3, st->election_ms, NULL, NULL, 0);
    int64_t t0 = dt_now_ms();
    dt_ensemble_stop_member(&e, old);
    int leader = wait_leader(&e, old, 0, st->election_ms, NULL, NULL, 0);
    int64_t elected = dt_now_ms() - t0;

    int64_t t1 = dt_now_ms();
    dt_ensemble_url_from(&e, old, url, sizeof url); /* the stopped member first */
    dlock_client *c2 = client_at(url, st->options, "new");
    dlock_lock *l2 = dt_lock(c2, "down", 0);
    take_release(l2, &last);
    int64_t first = dt_now_ms() - t1;
    CHECK_INT(first, <=, 5000);
    for (int i = 0; i < 3; i++) {
        take_release(l1, &last);
        take_release(l2, &last);
    }

    int64_t t2 = dt_now_ms();
    dt_ensemble_restart(&e, old, 0);
    int64_t rejoined = dt_now_ms() - t2;
    CHECK_INT(dt_ensemble_answering(&e), ==, 3);
    dlock_client *c3 = client_of_member(&e, old, st, "back");
    dlock_lock *l3 = dt_lock(c3, "down", 0);
    take_release(l3, &last);
    take_release(l1, &last);
    take_release(l2, &last);

    printf("  %s, leader (member %d) stopped: member %d led after %lld ms, a new client's first "
           "lock took %lld ms, the member rejoined in %lld ms\n",
           st->kind, old, leader, (long long) elected, (long long) first, (long long) rejoined);
    dlock_lock_free(l1);
    dlock_lock_free(l2);
    dlock_lock_free(l3);
    dlock_client_close(c1);
    dlock_client_close(c2);
    dlock_client_close(c3);
    dt_ensemble_stop(&e);
}

static void zookeeper_leader_killed(void)
{
    leader_lost(&zookeeper, KILL);
}

static void zookeeper_leader_paused(void)
{
    leader_lost(&zookeeper, PAUSE);
}

static void zookeeper_leader_killed_holder_stranded(void)
{
    leader_lost(&zookeeper, KILL | STRANDED);
}

static void zookeeper_leader_paused_holder_stranded(void)
{
    leader_lost(&zookeeper, PAUSE | STRANDED);
}

static void zookeeper_member_down(void)
{
    member_down(&zookeeper);
}

static void etcd_leader_killed(void)
{
    leader_lost(&etcd, KILL);
}

static void etcd_leader_paused(void)
{
    leader_lost(&etcd, PAUSE);
}

static void etcd_leader_killed_holder_stranded(void)
{
    leader_lost(&etcd, KILL | STRANDED);
}

static void etcd_leader_paused_holder_stranded(void)
{
    leader_lost(&etcd, PAUSE | STRANDED);
}

static void etcd_member_down(void)
{
    member_down(&etcd);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"zookeeper_leader_killed", zookeeper_leader_killed},
        {"zookeeper_leader_paused", zookeeper_leader_paused},
        {"zookeeper_leader_killed_holder_stranded", zookeeper_leader_killed_holder_stranded},
        {"zookeeper_leader_paused_holder_stranded", zookeeper_leader_paused_holder_stranded},
        {"zookeeper_member_down", zookeeper_member_down},
        {"etcd_leader_killed", etcd_leader_killed},
        {"etcd_leader_paused", etcd_leader_paused},
        {"etcd_leader_killed_holder_stranded", etcd_leader_killed_holder_stranded},
        {"etcd_leader_paused_holder_stranded", etcd_leader_paused_holder_stranded},
        {"etcd_member_down", etcd_member_down},
    };
    enum { N = sizeof tests / sizeof tests[0] };
    /* `test_ensemble STORE`: every test named STORE_... */
    if (argc == 2 && (strcmp(argv[1], "zookeeper") == 0 || strcmp(argv[1], "etcd") == 0)) {
        dt_test mine[N];
        size_t n = 0, len = strlen(argv[1]);
        for (size_t i = 0; i < N; i++) {
            if (strncmp(tests[i].name, argv[1], len) == 0 && tests[i].name[len] == '_')
                mine[n++] = tests[i];
        }
        return dt_run(1, argv, mine, n);
    }
    return DT_RUN(tests);
}
