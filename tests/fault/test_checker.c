/* SPDX-License-Identifier: MIT */
/* test_checker.c - the fault checker judged on histories made by hand, for
 * the classes a run cannot be counted on to show: each test writes a short
 * history into a run file (what the workload and the nemesis would have
 * logged) and asks check_run() for its verdict.
 *
 * fair_order: a holder of mx0 is killed while two fair waiters are queued
 * behind it, a1 first (the store said so before a2's acquire began); the
 * store then serves a2 before a1. That is a fair-order violation, unless
 * something let a1 leave the queue or kept a2 an older place: each variant
 * adds one such thing and must not be judged a violation.
 *
 * sem_frozen_holder: a semaphore of 3 permits held by a0 (2) and a1 (1);
 * a1 is frozen past its lease and a2 is granted its permit. The store did
 * right: a1 is the one whose permit went. Judged a late loss only when a1
 * was not frozen (then someone held a permit the store had given away).
 *
 * member_fault: a server fault of one member of a group (Redlock's) is no
 * outage and loses no lock: a holder not told of its loss while another
 * client takes the lock, and a call that says the store is out of reach
 * meanwhile, are violations; the same history with the whole store killed
 * (its data lost) is not, as long as the holder is told of its loss
 * (here: its release says so); a release that says OK is a loss never told. */
#define _GNU_SOURCE
#include "../support/harness.h"
#include "fault.h"
#include "nemesis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

enum { HOLDER, FIRST, SECOND }; /* actors a0, a1, a2 */
enum { LINK_HOLDER, LINK_FIRST, LINK_SECOND };

static fshm *shm;
static char shm_path[300];
static uint64_t next_op;

/* A record at `at` seconds into the run. */
static fev *rec(int type, int actor, double at)
{
    fev *e = fs_log(shm, type, 0, actor); /* lock 0: mx0 */
    e->t = shm->t0 + (int64_t) (at * 1e9);
    e->pid = actor >= 0 ? 100 + actor : 1;
    return e;
}

static void actor(int id, int hkind, int run)
{
    fev *e = rec(EV_ACTOR, id, 0.1);
    e->kind = hkind;
    e->take = id; /* its link */
    e->flags = run ? EVF_RUN : 0;
    fs_commit(e);
}

/* An acquire (wait_ms: its budget); returns its op. */
static uint64_t acquire(int id, int hkind, int run, int64_t wait_ms, double at)
{
    fev *e = rec(EV_ACQ_INV, id, at);
    e->op = next_op++;
    e->kind = hkind;
    e->wait_ms = wait_ms;
    e->flags = run ? EVF_RUN : 0;
    fs_commit(e);
    return e->op;
}

static void record(int type, int id, uint64_t op, double at)
{
    fev *e = rec(type, id, at);
    e->op = op;
    e->fence = op; /* fences grow with the op, as grants come here */
    fs_commit(e);
}

static void fault_at(int kind, int flags, int pid, int link, double at, const char *what)
{
    fev *e = rec(EV_NEM, -1, at);
    e->kind = kind;
    e->flags = flags;
    e->pid = pid;
    e->take = link;
    snprintf(e->text, sizeof e->text, "%s", what);
    fs_commit(e);
}

/* A server fault of one member (member >= 0: rc = member + 1, as the
 * nemesis logs it), or of the whole store (-1). */
static void server_fault_at(int kind, int flags, int member, double at, const char *what)
{
    fev *e = rec(EV_NEM, -1, at);
    e->kind = kind;
    e->flags = flags;
    e->take = -1;
    e->rc = member + 1;
    snprintf(e->text, sizeof e->text, "%s", what);
    fs_commit(e);
}

/* What a variant adds to the history. */
enum variant {
    V_PLAIN,         /* nothing: a2 overtakes a1 */
    V_IN_ORDER,      /* a1 is served first */
    V_FIRST_CUT_OFF, /* a1's link is partitioned while it waits */
    V_SERVER_KILLED, /* the server is killed while they wait */
    V_FIRST_CANCEL,  /* a1's wait is cancelled as a2 is served */
    V_FIRST_BUDGET,  /* a1's budget is over before a2 is served (it returns later) */
    V_QUEUED_LATE,   /* a1 is said queued only after a2's acquire began */
    V_SECOND_OLD,    /* a2's previous wait was cut off: its old place may be kept */
    V_SECOND_RUN,    /* a2 is a dlock run (a token of its own) */
};

/* A new, empty run file with one lock, mx0, and three actors. */
static void start_history(void)
{
    char dir[256];

    dt_make_temp_dir(dir, sizeof dir);
    snprintf(shm_path, sizeof shm_path, "%s/shm", dir);
    shm = fs_create(shm_path, 1000);
    CHECK(shm != NULL);
    shm->nlocks = 1;
    shm->locks[0] = (lock_def){"mx0", LK_MUTEX, 1};
    next_op = 1;
    atomic_store(&shm->next_actor, 3);
}

/* The checker's verdict on the history (the run's default options). */
static check_totals verdict(void)
{
    fault_cfg cfg;
    check_totals totals;

    atomic_store(&shm->next_op, next_op);
    memset(&cfg, 0, sizeof cfg);
    cfg.store = "test";
    cfg.lease_ms = 1500;
    cfg.waiter_lease_ms = 2000;
    cfg.timeout_ms = 1000;
    cfg.slack_ms = 250;
    cfg.caps = DLOCK_CAP_FAIR;
    FILE *out = fopen("/dev/null", "w");
    CHECK(out != NULL);
    check_run(shm, &cfg, out, &totals);
    fclose(out);
    return totals;
}

static check_totals judge(enum variant v)
{
    int run2 = v == V_SECOND_RUN;

    start_history();
    actor(HOLDER, H_PLAIN, 0);
    actor(FIRST, H_FAIR, 0);
    actor(SECOND, H_FAIR, run2);
    if (v == V_SECOND_OLD) {
        /* a2 waited before, and its link was cut meanwhile: leaving the
         * queue may have failed, and its handle's token keeps its place */
        uint64_t old = acquire(SECOND, H_FAIR, 0, 500, 0.3);
        fault_at(NEM_PARTITION, EVF_START, 0, LINK_SECOND, 0.4, "cut link 2");
        fault_at(NEM_PARTITION, EVF_END, 0, LINK_SECOND, 0.5, "heal link 2");
        fev *e = rec(EV_ACQ_FAIL, SECOND, 0.8);
        e->op = old;
        e->rc = DLOCK_ETIMEDOUT;
        fs_commit(e);
    }
    uint64_t held = acquire(HOLDER, H_PLAIN, 0, 0, 1.0);
    record(EV_ACQ_OK, HOLDER, held, 1.01);
    uint64_t first = acquire(FIRST, H_FAIR, 0, v == V_FIRST_BUDGET ? 1500 : 10000, 1.1);
    record(EV_QUEUED, FIRST, first, v == V_QUEUED_LATE ? 1.25 : 1.12);
    uint64_t second = acquire(SECOND, H_FAIR, run2, 10000, 1.2);
    if (!run2)
        record(EV_QUEUED, SECOND, second, 1.22);
    fault_at(NEM_KILL_CLIENT, EVF_START | EVF_END, 100 + HOLDER, -1, 1.5, "kill-client holder a0");
    if (v == V_FIRST_CUT_OFF) {
        fault_at(NEM_PARTITION, EVF_START, 0, LINK_FIRST, 2.0, "blackhole link 1");
        fault_at(NEM_PARTITION, EVF_END, 0, LINK_FIRST, 2.2, "heal link 1");
    }
    if (v == V_SERVER_KILLED) {
        fault_at(NEM_KILL_SERVER, EVF_START, 0, -1, 2.0, "kill-server");
        fault_at(NEM_KILL_SERVER, EVF_END, 0, -1, 2.2, "server started");
    }
    if (v == V_FIRST_CANCEL) {
        fev *e = rec(EV_CANCEL_INV, FIRST, 3.0);
        e->op = first;
        fs_commit(e);
        fs_commit(rec(EV_CANCEL_RET, FIRST, 3.01));
    }
    /* who is served first */
    int a = v == V_IN_ORDER ? FIRST : SECOND, b = v == V_IN_ORDER ? SECOND : FIRST;
    uint64_t op_a = a == FIRST ? first : second, op_b = a == FIRST ? second : first;
    record(EV_ACQ_OK, a, op_a, 3.1);
    record(EV_REL_INV, a, op_a, 3.2);
    record(EV_REL_OK, a, op_a, 3.21);
    if (run2 && a == SECOND) {
        fev *e = rec(EV_RUN_EXIT, SECOND, 3.22);
        e->op = second;
        fs_commit(e);
    }
    if (v == V_FIRST_CANCEL || v == V_FIRST_BUDGET) {
        fev *e = rec(EV_ACQ_FAIL, FIRST, 3.15);
        e->op = first;
        e->rc = v == V_FIRST_CANCEL ? DLOCK_ECANCELED : DLOCK_ETIMEDOUT;
        fs_commit(e);
    } else {
        record(EV_ACQ_OK, b, op_b, 3.3);
        record(EV_REL_INV, b, op_b, 3.4);
        record(EV_REL_OK, b, op_b, 3.41);
    }
    return verdict();
}

static void fair_order(void)
{
    static const struct {
        enum variant v;
        const char *what;
        long violations;
    } cases[] = {
        {V_PLAIN, "a2 served before a1", 1},
        {V_IN_ORDER, "a1 served first", 0},
        {V_FIRST_CUT_OFF, "a1's link cut meanwhile", 0},
        {V_SERVER_KILLED, "the server killed meanwhile", 0},
        {V_FIRST_CANCEL, "a1 cancelled", 0},
        {V_FIRST_BUDGET, "a1's budget over first", 0},
        {V_QUEUED_LATE, "a1 queued after a2 began", 0},
        {V_SECOND_OLD, "a2's earlier wait cut off", 0},
        {V_SECOND_RUN, "a2 a dlock run, served before a1", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_totals t = judge(cases[i].v);
        printf("  %-36s fair-order %ld (pairs judged %ld)\n", cases[i].what,
               t.violations[V_FAIR_ORDER], t.fair_pairs);
        CHECK_INT(t.violations[V_FAIR_ORDER], ==, cases[i].violations);
        /* the history is otherwise sound: no other class objects */
        long others = 0;
        for (int k = 0; k < V_COUNT; k++)
            others += k != V_FAIR_ORDER ? t.violations[k] : 0;
        CHECK_INT(others, ==, 0);
    }
}

/* A hold with a fixed lease of 500 ms taken again with a renewed one
 * (re-entry keeps the lease at least the client's, renewed from then on),
 * then its process killed: the store may show its owner up to a renewed
 * lease (1.5 s) after the kill, not only the fixed one; past that it is a
 * phantom all the same. */
static void reentered_lease(void)
{
    static const struct {
        double seen; /* the server names the owner this long after the kill */
        long phantoms;
    } cases[] = {{0.8, 0}, {2.5, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        start_history();
        fev *e = rec(EV_ACTOR, HOLDER, 0.1);
        e->kind = H_PLAIN;
        snprintf(e->text, sizeof e->text, "token-a0");
        fs_commit(e);
        e = rec(EV_ACQ_INV, HOLDER, 1.0);
        e->op = next_op++;
        e->kind = H_PLAIN;
        e->lease_ms = 500;
        fs_commit(e);
        uint64_t op = e->op;
        record(EV_ACQ_OK, HOLDER, op, 1.01);
        e = rec(EV_ACQ_INV, HOLDER, 1.1);
        e->op = op;
        e->kind = H_PLAIN;
        e->flags = EVF_REENTRANT; /* lease_ms 0: renewed */
        fs_commit(e);
        e = rec(EV_ACQ_OK, HOLDER, 1.11);
        e->op = op;
        e->flags = EVF_REENTRANT;
        fs_commit(e);
        fault_at(NEM_KILL_CLIENT, EVF_START | EVF_END, 100 + HOLDER, -1, 1.2, "kill-client a0");
        e = rec(EV_SNAP, -1, 1.2 + cases[i].seen);
        e->wait_ms = e->t - 1000000; /* the query's start */
        e->rc = 1;
        snprintf(e->text, sizeof e->text, "token-a0");
        fs_commit(e);
        check_totals t = verdict();
        printf("  owner seen %.1f s after the kill: phantom %ld\n", cases[i].seen,
               t.violations[V_PHANTOM]);
        CHECK_INT(t.violations[V_PHANTOM], ==, cases[i].phantoms);
    }
}

/* One semaphore hold: acquire at `at` (take permits), granted at ok,
 * released at rel. */
static void sem_hold(int id, int take, double at, double ok, double rel)
{
    fev *e = rec(EV_ACQ_INV, id, at);
    e->op = next_op++;
    e->kind = H_SEM;
    e->take = take;
    e->wait_ms = 10000;
    fs_commit(e);
    uint64_t op = e->op;
    record(EV_ACQ_OK, id, op, ok);
    record(EV_REL_INV, id, op, rel);
    record(EV_REL_OK, id, op, rel + 0.01);
}

/* The history of sem_frozen_holder: a1 frozen or not. */
static void sem_history(int frozen)
{
    start_history();
    shm->locks[0] = (lock_def){"sem0", LK_SEM, 3};
    actor(HOLDER, H_SEM, 0);
    actor(FIRST, H_SEM, 0);
    actor(SECOND, H_SEM, 0);
    sem_hold(HOLDER, 2, 1.0, 1.01, 3.5);
    sem_hold(FIRST, 1, 1.1, 1.11, 4.1);
    if (frozen) {
        fault_at(NEM_PAUSE_CLIENT, EVF_START, 100 + FIRST, -1, 1.5, "pause-client a1");
        fault_at(NEM_PAUSE_CLIENT, EVF_END, 100 + FIRST, -1, 4.0, "resume-client a1");
    }
    sem_hold(SECOND, 1, 1.2, 3.0, 3.2);
}

static void sem_frozen_holder(void)
{
    for (int frozen = 1; frozen >= 0; frozen--) {
        sem_history(frozen);
        check_totals t = verdict();
        long others = 0;
        for (int k = 0; k < V_COUNT; k++)
            others += k != V_LATE_LOSS ? t.violations[k] : 0;
        printf("  a1 %s: late-loss %ld, others %ld\n", frozen ? "frozen" : "not frozen",
               t.violations[V_LATE_LOSS], others);
        CHECK_INT(t.violations[V_LATE_LOSS], ==, frozen ? 0 : 1);
        CHECK_INT(others, ==, 0);
    }
}

/* A grant lost while its process was paused (the link cut meanwhile): at
 * the resume the acquire returns OK and the renewer finds the connection
 * dead at once, so the on_lost callback may run before the worker logs
 * the return, with no hold op yet (postgres seed 7: a4 on mx1). That is
 * the loss of the hold about to be logged; one during an acquire that
 * then fails is spurious all the same. */
static void loss_before_return(void)
{
    for (int fails = 0; fails <= 1; fails++) {
        start_history();
        actor(HOLDER, H_PLAIN, 0);
        uint64_t op = acquire(HOLDER, H_PLAIN, 0, 10000, 1.0);
        fault_at(NEM_PAUSE_CLIENT, EVF_START, 100 + HOLDER, -1, 1.1, "pause-client a0");
        fault_at(NEM_PARTITION, EVF_START, 0, LINK_HOLDER, 1.5, "cut link 0");
        fault_at(NEM_PAUSE_CLIENT, EVF_END, 100 + HOLDER, -1, 2.0, "resume-client a0");
        fev *e = rec(EV_LOST, HOLDER, 2.0);
        e->op = 0; /* (the worker's hold op, not set yet) */
        e->rc = DLOCK_ELOST;
        snprintf(e->text, sizeof e->text, "the lock is not held any more");
        fs_commit(e);
        if (fails) {
            e = rec(EV_ACQ_FAIL, HOLDER, 2.001);
            e->op = op;
            e->rc = DLOCK_ETIMEDOUT;
            fs_commit(e);
        } else {
            record(EV_ACQ_OK, HOLDER, op, 2.001);
            record(EV_REL_INV, HOLDER, op, 2.002);
            e = rec(EV_REL_FAIL, HOLDER, 2.003);
            e->op = op;
            e->rc = DLOCK_ELOST;
            fs_commit(e);
        }
        fault_at(NEM_PARTITION, EVF_END, 0, LINK_HOLDER, 2.5, "heal link 0");
        check_totals t = verdict();
        printf("  the acquire %s: spurious-loss %ld\n", fails ? "fails" : "returns OK",
               t.violations[V_SPURIOUS_LOSS]);
        CHECK_INT(t.violations[V_SPURIOUS_LOSS], ==, fails);
    }
}

static void member_fault(void)
{
    static const struct {
        int member; /* the fault's member, -1: the whole store (its data lost) */
        int told;   /* a0's release says the lock was lost (else OK: never told) */
        long late, error;
        const char *what;
    } cases[] = {
        {1, 1, 1, 1, "one member killed"},
        {-1, 1, 0, 0, "the store killed (data lost), a0 told"},
        {-1, 0, 1, 0, "the store killed (data lost), a0 never told"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int member = cases[i].member;
        int lost = member < 0 ? EVF_DATALOSS : 0;
        start_history();
        actor(HOLDER, H_PLAIN, 0);
        actor(FIRST, H_PLAIN, 0);
        actor(SECOND, H_PLAIN, 0);
        uint64_t held = acquire(HOLDER, H_PLAIN, 0, 0, 1.0);
        record(EV_ACQ_OK, HOLDER, held, 1.01);
        server_fault_at(NEM_KILL_SERVER, EVF_START | lost, member, 1.5, "kill-server");
        uint64_t gave_up = acquire(SECOND, H_PLAIN, 0, 500, 1.6);
        fev *e = rec(EV_ACQ_FAIL, SECOND, 1.9);
        e->op = gave_up;
        e->rc = DLOCK_EUNREACHABLE;
        fs_commit(e);
        server_fault_at(NEM_KILL_SERVER, EVF_END | lost, member, 2.0, "server started");
        uint64_t took = acquire(FIRST, H_PLAIN, 0, 10000, 2.5);
        record(EV_ACQ_OK, FIRST, took, 2.6);
        record(EV_REL_INV, FIRST, took, 2.8);
        record(EV_REL_OK, FIRST, took, 2.81);
        record(EV_REL_INV, HOLDER, held, 3.5);
        if (cases[i].told) {
            e = rec(EV_REL_FAIL, HOLDER, 3.51);
            e->op = held;
            e->rc = DLOCK_ELOST;
            fs_commit(e);
        } else {
            record(EV_REL_OK, HOLDER, held, 3.51);
        }
        check_totals t = verdict();
        long others = 0;
        for (int k = 0; k < V_COUNT; k++)
            others += k != V_LATE_LOSS && k != V_ERROR ? t.violations[k] : 0;
        printf("  %-44s late-loss %ld, error %ld, others %ld\n", cases[i].what,
               t.violations[V_LATE_LOSS], t.violations[V_ERROR], others);
        CHECK_INT(t.violations[V_LATE_LOSS], ==, cases[i].late);
        CHECK_INT(t.violations[V_ERROR], ==, cases[i].error);
        CHECK_INT(others, ==, 0);
    }
}

/* With no fault going on, a wait may say unreachable only when its budget
 * ran out before its process had reached the store (a slow first
 * connection on a loaded machine); after a reach, or before the budget's
 * end, it is an error. */
static void first_contact_slow(void)
{
    static const struct {
        int reached_first;
        double ends; /* when the 500 ms wait returned (invoked at 1.0) */
        long error;
        const char *what;
    } cases[] = {
        {0, 1.55, 0, "budget out before the first contact"},
        {0, 1.3, 1, "unreachable before the budget's end"},
        {1, 2.55, 1, "budget out after the store was reached"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        start_history();
        actor(FIRST, H_PLAIN, 0);
        double at = 1.0;
        if (cases[i].reached_first) {
            uint64_t op = acquire(FIRST, H_PLAIN, 0, 0, 1.0);
            record(EV_ACQ_OK, FIRST, op, 1.01);
            record(EV_REL_INV, FIRST, op, 1.02);
            record(EV_REL_OK, FIRST, op, 1.03);
            at = 2.0;
        }
        uint64_t op = acquire(FIRST, H_PLAIN, 0, 500, at);
        fev *e = rec(EV_ACQ_FAIL, FIRST, cases[i].ends);
        e->op = op;
        e->rc = DLOCK_EUNREACHABLE;
        fs_commit(e);
        check_totals t = verdict();
        printf("  %-44s error %ld\n", cases[i].what, t.violations[V_ERROR]);
        CHECK_INT(t.violations[V_ERROR], ==, cases[i].error);
    }
}

/* `fault check SHM` on a kept history: the settings the run kept in it,
 * and the exit status saying whether it found a violation. */
static int fault_check(void)
{
    char cmd[700];
    atomic_store(&shm->next_op, next_op);
    msync(shm, sizeof *shm, MS_SYNC);
    snprintf(cmd, sizeof cmd, "%s check %s >/dev/null 2>&1", dt_bin("fault"), shm_path);
    int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void check_again(void)
{
    for (int frozen = 1; frozen >= 0; frozen--) {
        sem_history(frozen);
        /* kept before the clients start: a run that never started */
        CHECK_INT(fault_check(), ==, 70);
        snprintf(shm->judge.store, sizeof shm->judge.store, "test");
        shm->judge.lease_ms = 1500;
        shm->judge.waiter_lease_ms = 2000;
        shm->judge.timeout_ms = 1000;
        shm->judge.slack_ms = 250;
        shm->judge.caps = DLOCK_CAP_FAIR;
        int rc = fault_check();
        printf("  a1 %s: fault check exits %d\n", frozen ? "frozen" : "not frozen", rc);
        CHECK_INT(rc, ==, frozen ? 0 : 1);
    }
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"fair_order", fair_order},
        {"reentered_lease", reentered_lease},
        {"sem_frozen_holder", sem_frozen_holder},
        {"check_again", check_again},
        {"loss_before_return", loss_before_return},
        {"member_fault", member_fault},
        {"first_contact_slow", first_contact_slow},
    };
    return DT_RUN(tests);
}
