/* SPDX-License-Identifier: MIT */
/* one_name.c - one name is one lock: the mutex, the read-write lock, the
 * semaphore and the interop key of one name exclude each other. With one
 * kind held, a try of another is busy and its message names the kind that
 * holds the name; a wait of another gets the name only after the release,
 * woken by the store (well within a lease); contenders of different kinds
 * are served in the order they came; and the command line's kinds do the
 * same. */
#define _GNU_SOURCE
#include "conformance.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A kind of lock, as a user opens it. */
typedef struct kind {
    const char *tag; /* for lock names and messages */
    unsigned flags;  /* dlock_lock_open's, or DLOCK_SEMAPHORE */
    const char *as;  /* how a busy message names a name held as this kind */
    unsigned needs;  /* the capability it takes */
} kind;

enum { PERMITS = 2 }; /* a semaphore holder takes one: the name is held, not full */

static const kind kinds[] = {
    {"mutex", 0, " as a mutex", 0},
    {"read", DLOCK_READ, " as a read-write lock", DLOCK_CAP_READ_WRITE},
    {"write", DLOCK_WRITE, " as a read-write lock", DLOCK_CAP_READ_WRITE},
    {"sem", DLOCK_SEMAPHORE, " as a semaphore", DLOCK_CAP_SEMAPHORE},
    {"simple", DLOCK_SIMPLE, " as an interop key", DLOCK_CAP_INTEROP},
};
enum { NKINDS = sizeof kinds / sizeof kinds[0] };

static const kind *kind_of(const char *tag)
{
    for (int i = 0; i < NKINDS; i++) {
        if (strcmp(kinds[i].tag, tag) == 0)
            return &kinds[i];
    }
    dt_fail(__FILE__, __LINE__, "no kind %s", tag);
    return NULL;
}

static dlock_lock *open_kind(dlock_client *c, const char *name, const kind *k)
{
    dlock_lock *l = NULL;
    if (k->flags == DLOCK_SEMAPHORE)
        CHECK_RC(dlock_semaphore_open(c, name, PERMITS, 1, &l), DLOCK_OK);
    else
        l = ct_lock(c, name, k->flags);
    return l;
}

/* The last failure's message names the kind that holds the name. */
#define CHECK_HELD_AS(k)                                                                           \
    do {                                                                                           \
        if (strstr(dlock_errmsg(), (k)->as) == NULL)                                               \
            dt_fail(__FILE__, __LINE__, "the message does not say the name is held%s: %s",         \
                    (k)->as, dlock_errmsg());                                                      \
    } while (0)

/* A client whose log says when one of its acquires found the name held and
 * started waiting (the core logs it at info level after the store said
 * so): the condition a test waits for before it lets the holder go. */
typedef struct watched_client {
    dlock_client *c;
    atomic_int waiting;
} watched_client;

static void on_log(int level, const char *msg, void *arg)
{
    (void) level;
    if (strstr(msg, "waiting") != NULL)
        atomic_store(&((watched_client *) arg)->waiting, 1);
}

static void watched_open(watched_client *w)
{
    w->c = ct_client("");
    atomic_init(&w->waiting, 0);
    CHECK_RC(dlock_client_set_log(w->c, DLOCK_LOG_DEBUG, on_log, w), DLOCK_OK);
}

/* Starts an acquire of l on w's client, and returns once it waits in the
 * store. */
static void start_waiting(ct_waiter *t, watched_client *w, dlock_lock *l)
{
    atomic_store(&w->waiting, 0);
    ct_wait_start(t, l, 20000);
    DT_WAIT_UNTIL(atomic_load(&w->waiting) || CT_DONE(t), 10000);
    CHECK(!CT_DONE(t)); /* not while another kind holds the name */
}

/* A waiter woken by the store, not found later by a lease or a poll: the
 * clients' leases are 30 s. */
enum { WOKEN_MS = 1500 };

/* a holds; b is refused, naming a's kind; b waits and gets the name only
 * after a's release, promptly; then a is refused, naming b's kind. Each new
 * holder of the name has a larger fence, whatever its kind. */
static void pair(dlock_client *ca, watched_client *wb, const kind *a, const kind *b)
{
    char tag[64];
    snprintf(tag, sizeof tag, "%s-%s", a->tag, b->tag);
    const char *name = CT_NAME(tag);
    dlock_lock *la = open_kind(ca, name, a), *lb = open_kind(wb->c, name, b);
    ct_waiter t;

    CHECK_RC(dlock_try_acquire(la), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(la);
    CHECK_RC(dlock_try_acquire(lb), DLOCK_EBUSY);
    CHECK_HELD_AS(a);
    start_waiting(&t, wb, lb);
    int64_t released = dt_now_ms();
    CHECK_RC(dlock_release(la), DLOCK_OK);
    CHECK_RC(ct_wait_join(&t), DLOCK_OK);
    printf("%s: %s held, %s waited: it got the name %lld ms after the release\n", ct->kind, a->tag,
           b->tag, (long long) (t.ended_ms - released));
    CHECK_INT(t.ended_ms, >=, released);
    CHECK_INT(t.ended_ms - released, <=, WOKEN_MS);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(lb), >, fence);
    fence = dlock_lock_fence(lb);
    CHECK_RC(dlock_try_acquire(la), DLOCK_EBUSY);
    CHECK_HELD_AS(b);
    CHECK_RC(dlock_release(lb), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(la), DLOCK_OK); /* nothing left behind */
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(la), >, fence);
    CHECK_RC(dlock_release(la), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
}

void ct_kinds_exclude(void)
{
    dlock_client *ca = ct_client("");
    watched_client wb;
    int pairs = 0;

    watched_open(&wb);
    for (int i = 0; i < NKINDS; i++) {
        for (int j = 0; j < NKINDS; j++) {
            const kind *a = &kinds[i], *b = &kinds[j];
            /* readers and writers are one kind: they share by its rules */
            if (strcmp(a->as, b->as) == 0 || !ct_has(a->needs | b->needs))
                continue;
            pair(ca, &wb, a, b);
            pairs++;
        }
    }
    printf("%s: %d ordered pairs of kinds\n", ct->kind, pairs);
    CHECK_INT(pairs, >=, 2);

    /* a multi-lock's members are mutexes */
    char x[128], y[128];
    snprintf(x, sizeof x, "%s", CT_NAME("multi-x"));
    snprintf(y, sizeof y, "%s", CT_NAME("multi-y"));
    const char *names[] = {x, y};
    dlock_lock *m = NULL, *other = open_kind(wb.c, y, &kinds[ct_has(DLOCK_CAP_READ_WRITE) ? 1 : 3]);
    CHECK_RC(dlock_multi_open(ca, names, 2, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_EBUSY);
    CHECK_INT(dlock_lock_holds(m), ==, 0);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(other), DLOCK_EBUSY);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(other);
    dlock_client_close(ca);
    dlock_client_close(wb.c);
}

/* First come, first served across kinds: with x holding (a kind that
 * shares), a contender y of another kind waiting, a newcomer z of x's kind
 * does not join x but waits behind y; x's release lets y in, y's lets z. */
void ct_kinds_first_come(void)
{
    static const char *const cases[][3] = {
        {"read", "mutex", "read"},
        {"sem", "write", "sem"},
        {"read", "sem", "read"},
        {"sem", "mutex", "sem"},
    };
    dlock_client *cx = ct_client("");
    watched_client wy, wz;
    int ran = 0;

    watched_open(&wy);
    watched_open(&wz);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kind *x = kind_of(cases[i][0]), *y = kind_of(cases[i][1]), *z = kind_of(cases[i][2]);
        if (!ct_has(x->needs | y->needs))
            continue;
        char tag[64];
        snprintf(tag, sizeof tag, "%s-%s-%s", x->tag, y->tag, z->tag);
        const char *name = CT_NAME(tag);
        dlock_lock *lx = open_kind(cx, name, x), *ly = open_kind(wy.c, name, y);
        dlock_lock *lz = open_kind(wz.c, name, z);
        ct_waiter ty, tz;

        CHECK_RC(dlock_try_acquire(lx), DLOCK_OK);
        start_waiting(&ty, &wy, ly);
        CHECK_RC(dlock_try_acquire(lz), DLOCK_EBUSY); /* x would share, y came first */
        start_waiting(&tz, &wz, lz);
        int64_t released = dt_now_ms();
        CHECK_RC(dlock_release(lx), DLOCK_OK);
        CHECK_RC(ct_wait_join(&ty), DLOCK_OK);
        CHECK_INT(ty.ended_ms - released, <=, WOKEN_MS);
        CHECK(!CT_DONE(&tz)); /* behind y, which holds now */
        released = dt_now_ms();
        CHECK_RC(dlock_release(ly), DLOCK_OK);
        CHECK_RC(ct_wait_join(&tz), DLOCK_OK);
        CHECK_INT(tz.ended_ms - released, <=, WOKEN_MS);
        CHECK_RC(dlock_release(lz), DLOCK_OK);
        dlock_lock_free(lx);
        dlock_lock_free(ly);
        dlock_lock_free(lz);
        ran++;
    }
    CHECK_INT(ran, >=, 1);
    dlock_client_close(cx);
    dlock_client_close(wy.c);
    dlock_client_close(wz.c);
}

/* Processes take one name as every kind in turn, at once: two kinds never
 * hold it together (shared counters, raised after the acquire and lowered
 * before the release), nor two mutex holders or writers, nor a writer and
 * readers, nor more semaphore holders than permits. */
typedef struct inside {
    atomic_int by_kind[NKINDS];
    atomic_int overlaps, rounds;
} inside;

static int overlaps_with(inside *in, int k)
{
    int n = atomic_load(&in->by_kind[k]), clash = 0;
    for (int j = 0; j < NKINDS; j++) {
        if (j != k && atomic_load(&in->by_kind[j]) > 0 &&
            (strcmp(kinds[j].as, kinds[k].as) != 0 || kinds[j].flags == DLOCK_WRITE ||
             kinds[k].flags == DLOCK_WRITE))
            clash = 1; /* another kind, or a writer beside readers */
    }
    int most = kinds[k].flags == DLOCK_SEMAPHORE ? PERMITS
               : kinds[k].flags == DLOCK_READ    ? 1 << 20
                                                 : 1;
    return clash || n > most;
}

void ct_kinds_never_overlap(void)
{
    enum { P = 4, ROUNDS = 12 };
    const char *name = CT_NAME("mixed");
    pid_t pids[P];
    inside *in = mmap(NULL, sizeof *in, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(in != MAP_FAILED);
    memset(in, 0, sizeof *in);
    for (int p = 0; p < P; p++) {
        pids[p] = fork(); /* all before this process has threads */
        if (pids[p] == 0) {
            dlock_client *c = ct_client("");
            dlock_lock *mine[NKINDS] = {0};
            for (int k = 0; k < NKINDS; k++) {
                if (ct_has(kinds[k].needs))
                    mine[k] = open_kind(c, name, &kinds[k]);
            }
            for (int i = 0; i < ROUNDS; i++) {
                int k = (p + i) % NKINDS;
                while (mine[k] == NULL)
                    k = (k + 1) % NKINDS;
                CHECK_RC(dlock_acquire(mine[k], 30000), DLOCK_OK);
                atomic_fetch_add(&in->by_kind[k], 1);
                if (overlaps_with(in, k))
                    atomic_fetch_add(&in->overlaps, 1);
                dt_sleep_ms(5); /* widen the window an overlap needs */
                if (overlaps_with(in, k))
                    atomic_fetch_add(&in->overlaps, 1);
                atomic_fetch_sub(&in->by_kind[k], 1);
                CHECK_RC(dlock_release(mine[k]), DLOCK_OK);
                atomic_fetch_add(&in->rounds, 1);
            }
            for (int k = 0; k < NKINDS; k++)
                dlock_lock_free(mine[k]);
            dlock_client_close(c);
            _exit(0);
        }
    }
    for (int p = 0; p < P; p++)
        ct_wait_worker(pids[p], "a process of mixed kinds");
    printf("%s: %d rounds of mixed kinds, %d overlaps\n", ct->kind, atomic_load(&in->rounds),
           atomic_load(&in->overlaps));
    CHECK_INT(atomic_load(&in->rounds), ==, P * ROUNDS);
    CHECK_INT(atomic_load(&in->overlaps), ==, 0);
    munmap(in, sizeof *in);
}

/* The owner's hold is not the contender just ahead: another client's
 * contender of the held kind stands between (a mutex waiter behind the
 * owner's mutex; a reader ahead of the owner's read hold). Still EDEADLK at
 * once, and the other client's contender is served as before. */
static void self_behind_others(dlock_client *c, watched_client *wb)
{
    ct_waiter t;
    dlock_lock *held = ct_lock(c, CT_NAME("between"), 0), *other = NULL;
    dlock_lock *queued = ct_lock(wb->c, CT_NAME("between"), 0);
    CHECK_RC(dlock_try_acquire(held), DLOCK_OK);
    start_waiting(&t, wb, queued);
    CHECK_RC(dlock_lock_dup(held, DLOCK_READ, &other), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(other, 20000), DLOCK_EDEADLK);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    CHECK_RC(dlock_release(held), DLOCK_OK);
    CHECK_RC(ct_wait_join(&t), DLOCK_OK);
    CHECK_RC(dlock_release(queued), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(queued);
    dlock_lock_free(held);

    dlock_lock *first = ct_lock(wb->c, CT_NAME("second-reader"), DLOCK_READ);
    held = ct_lock(c, CT_NAME("second-reader"), DLOCK_READ);
    CHECK_RC(dlock_try_acquire(first), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(held), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(held, 0, &other), DLOCK_OK);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(other, 20000), DLOCK_EDEADLK);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    CHECK_RC(dlock_release(held), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(other), DLOCK_EBUSY); /* the other reader's, not its own */
    CHECK_RC(dlock_release(first), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
    CHECK_RC(dlock_release(other), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(first);
    dlock_lock_free(held);
}

/* A handle of the owner's that waits holds nothing: with another client
 * holding the name (as a mutex, as a semaphore) and the owner's reader
 * waiting behind it, the owner asking for the mutex is busy, not EDEADLK;
 * once its reader is in, it is EDEADLK. */
static void self_waiting(watched_client *wa, watched_client *wb, const kind *x)
{
    char tag[32];
    snprintf(tag, sizeof tag, "waiting-%s", x->tag);
    const char *name = CT_NAME(tag);
    dlock_lock *holder = open_kind(wb->c, name, x), *reader = ct_lock(wa->c, name, DLOCK_READ);
    dlock_lock *mutex = NULL;
    ct_waiter t;

    CHECK_RC(dlock_try_acquire(holder), DLOCK_OK);
    start_waiting(&t, wa, reader);
    CHECK_RC(dlock_lock_dup(reader, 0, &mutex), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(mutex), DLOCK_EBUSY);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    CHECK_RC(ct_wait_join(&t), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(mutex), DLOCK_EDEADLK);
    CHECK_RC(dlock_release(reader), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(mutex), DLOCK_OK);
    CHECK_RC(dlock_release(mutex), DLOCK_OK);
    dlock_lock_free(mutex);
    dlock_lock_free(reader);
    dlock_lock_free(holder);
}

/* An owner holding the name as one kind asks for it as another, through a
 * handle of its own (dlock_lock_dup): it could only wait for itself, so it
 * is DLOCK_EDEADLK at once, as a reader asking to write is, whatever the
 * budget (before: it waited for itself until the budget ran out, forever
 * with DLOCK_WAIT_FOREVER). */
void ct_kinds_self_deadlock(void)
{
    static const unsigned pairs[][2] = {
        {0, DLOCK_READ}, {0, DLOCK_WRITE}, {DLOCK_READ, 0}, {DLOCK_WRITE, 0}};
    dlock_client *c = ct_client("");

    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "self%zu", i);
        dlock_lock *held = ct_lock(c, CT_NAME(tag), pairs[i][0]), *other = NULL;
        CHECK_RC(dlock_try_acquire(held), DLOCK_OK);
        CHECK_RC(dlock_lock_dup(held, pairs[i][1], &other), DLOCK_OK);
        int64_t t0 = dt_now_ms();
        CHECK_RC(dlock_acquire(other, 20000), DLOCK_EDEADLK);
        CHECK_INT(dt_now_ms() - t0, <, 2000);
        CHECK_RC(dlock_release(held), DLOCK_OK);
        CHECK_RC(dlock_acquire(other, 0), DLOCK_OK); /* free of the other kind: its own */
        CHECK_RC(dlock_release(other), DLOCK_OK);
        dlock_lock_free(other);
        dlock_lock_free(held);
    }

    watched_client wa, wb;
    watched_open(&wa);
    watched_open(&wb);
    self_behind_others(c, &wb);
    self_waiting(&wa, &wb, kind_of("mutex"));
    if (ct_has(DLOCK_CAP_SEMAPHORE))
        self_waiting(&wa, &wb, kind_of("sem"));
    dlock_client_close(wa.c);
    dlock_client_close(wb.c);
    dlock_client_close(c);
}

/* Whether someone else holds l's name: a try is refused (one that gets it
 * gives it back at once). */
static int held_elsewhere(dlock_lock *l)
{
    int rc = dlock_try_acquire(l);
    if (rc == DLOCK_OK)
        CHECK_RC(dlock_release(l), DLOCK_OK);
    return rc == DLOCK_EBUSY;
}

/* The command line: while `dlock run NAME -- sleep` holds the mutex, a
 * `dlock run -n` of every other kind exits 1 without running its command
 * (one cron host with --write must not run the job twice). */
void ct_cli_kinds_exclude(void)
{
    const char *name = CT_NAME("mix");
    char url[512];
    snprintf(url, sizeof url, "%s", ct_url(""));
    const char *holder[] = {dt_bin("dlock"), "run", "-u", url, name, "--", "sleep", "60", NULL};
    static const char *const others[][3] = {
        {"--write", NULL, NULL},  {"--read", NULL, NULL},   {"--permits", "1", NULL},
        {"--permits", "3", NULL}, {"--simple", NULL, NULL},
    };

    pid_t pid = ct_spawn(holder);
    dlock_client *c = ct_client("");
    if (ct_has(DLOCK_CAP_QUERY)) {
        DT_WAIT_UNTIL(ct_query(c, name, 0).held, 10000);
    } else {
        /* a store without dlock_query: held is a try that is refused */
        dlock_lock *probe = ct_lock(c, name, 0);
        DT_WAIT_UNTIL(held_elsewhere(probe), 10000);
        dlock_lock_free(probe);
    }
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        unsigned needs = strcmp(others[i][0], "--simple") == 0    ? DLOCK_CAP_INTEROP
                         : strcmp(others[i][0], "--permits") == 0 ? DLOCK_CAP_SEMAPHORE
                                                                  : DLOCK_CAP_READ_WRITE;
        if (!ct_has(needs))
            continue;
        const char *argv[12];
        int n = 0;
        argv[n++] = dt_bin("dlock");
        argv[n++] = "run";
        argv[n++] = "-n";
        argv[n++] = "-q";
        argv[n++] = "-u";
        argv[n++] = url;
        for (int k = 0; k < 2 && others[i][k] != NULL; k++)
            argv[n++] = others[i][k];
        argv[n++] = name;
        argv[n++] = "--";
        argv[n++] = "true"; /* exits 0 if it ran */
        argv[n] = NULL;
        int status = ct_run_program(argv, 20000);
        if (status != 1)
            dt_fail(__FILE__, __LINE__, "dlock run -n %s%s%s exited %d while the mutex was held",
                    others[i][0], others[i][1] != NULL ? " " : "",
                    others[i][1] != NULL ? others[i][1] : "", status);
    }
    CHECK(kill(pid, SIGTERM) == 0); /* passed on to sleep; the lock is released */
    ct_wait_program(pid, 10000);
    /* free, and said so (the other kinds' tries left nothing that counts) */
    if (ct_has(DLOCK_CAP_QUERY))
        CHECK_INT(ct_query(c, name, 0).held, ==, 0);
    dlock_lock *l = ct_lock(c, name, 0);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}
