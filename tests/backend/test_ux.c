/* SPDX-License-Identifier: MIT */
/* test_ux.c - what a user of the library expects beyond taking locks: a
 * log of what happens (levels, renewals failing and coming back, losses,
 * hand-overs, nothing secret in it), a server-checked ownership test
 * (dlock_lock_verify) as opposed to the local one (dlock_lock_check), names
 * refused the same way on every store, a forced unlock that says whether
 * anything was held, and dlock_renew next to dlock_extend. Real servers:
 * Redis, etcd and ZooKeeper, as built. */
#include "../support/harness.h"
#include "core/lock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* ---------------------------------------------------------------- a log */

#define LOG_LINES 256

typedef struct collected {
    pthread_mutex_t mu;
    int levels[LOG_LINES];
    char lines[LOG_LINES][512];
    int n;
} collected;

static collected logged = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void collect(int level, const char *msg, void *arg)
{
    collected *c = arg;
    pthread_mutex_lock(&c->mu);
    if (c->n < LOG_LINES) {
        c->levels[c->n] = level;
        snprintf(c->lines[c->n], sizeof c->lines[0], "%s", msg);
        c->n++;
    }
    pthread_mutex_unlock(&c->mu);
}

/* How many lines at `level` contain all of the words (NULL-terminated). */
static int count_lines(int level, const char *word, const char *word2)
{
    int n = 0;
    pthread_mutex_lock(&logged.mu);
    for (int i = 0; i < logged.n; i++) {
        if (logged.levels[i] == level && strstr(logged.lines[i], word) != NULL &&
            (word2 == NULL || strstr(logged.lines[i], word2) != NULL))
            n++;
    }
    pthread_mutex_unlock(&logged.mu);
    return n;
}

static int total_lines(void)
{
    pthread_mutex_lock(&logged.mu);
    int n = logged.n;
    pthread_mutex_unlock(&logged.mu);
    return n;
}

static void dump_log(void)
{
    pthread_mutex_lock(&logged.mu);
    for (int i = 0; i < logged.n; i++)
        fprintf(stderr, "  log %s: %s\n", dlock_log_level_name(logged.levels[i]), logged.lines[i]);
    pthread_mutex_unlock(&logged.mu);
}

static void clear_log(void)
{
    pthread_mutex_lock(&logged.mu);
    logged.n = 0;
    pthread_mutex_unlock(&logged.mu);
}

/* Fails unless a line at level holds word (and word2, if not NULL). */
static void check_logged(const char *file, int line, int level, const char *word, const char *word2)
{
    if (count_lines(level, word, word2) > 0)
        return;
    dump_log();
    dt_fail(file, line, "no %s line with '%s'%s%s", dlock_log_level_name(level), word,
            word2 != NULL ? "' and '" : "", word2 != NULL ? word2 : "");
}
#define CHECK_LOGGED(level, word, word2) check_logged(__FILE__, __LINE__, level, word, word2)

/* Waits up to ms for a line at level with word; fails showing the log. */
static void wait_logged(const char *file, int line, int level, const char *word, int ms)
{
    int64_t until = dt_now_ms() + ms;
    while (count_lines(level, word, NULL) == 0) {
        if (dt_now_ms() > until) {
            dump_log();
            dt_fail(file, line, "no %s line with '%s' in %d ms", dlock_log_level_name(level), word,
                    ms);
        }
        dt_sleep_ms(5);
    }
}
#define WAIT_LOGGED(level, word, ms) wait_logged(__FILE__, __LINE__, level, word, ms)

/* ---------------------------------------------------------------- log */

/* Off by default; each level lets through what it says; nothing secret. */
static void log_levels_and_secrets(void)
{
    dt_server srv;
    char url[256];
    dlock_client *c = NULL;

    dt_server_start(&srv, "redis", 0, "--requirepass", "s3cretPW", NULL);
    snprintf(url, sizeof url, "redis://:s3cretPW@127.0.0.1:%d", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_client_set_log(NULL, DLOCK_LOG_INFO, collect, &logged), DLOCK_EINVAL);
    CHECK_RC(dlock_client_set_log(c, 7, collect, &logged), DLOCK_EINVAL);
    CHECK_RC(dlock_client_set_log(c, -1, collect, &logged), DLOCK_EINVAL);
    CHECK(strcmp(dlock_log_level_name(DLOCK_LOG_WARN), "warn") == 0);
    CHECK(strcmp(dlock_log_level_name(9), "") == 0);

    /* off: nothing */
    dlock_lock *l = dt_lock(c, "quiet", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(total_lines(), ==, 0);

    /* info: a plain acquire and release are debug, not info */
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(total_lines(), ==, 0);
    CHECK_RC(dlock_force_unlock(c, "quiet", 0), DLOCK_OK);
    CHECK_LOGGED(DLOCK_LOG_INFO, "'quiet' unlocked by force", NULL);

    /* debug: every step, naming the lock and its fence */
    clear_log();
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_DEBUG, collect, &logged), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    char fence[64];
    snprintf(fence, sizeof fence, "fence %llu", (unsigned long long) dlock_lock_fence(l));
    CHECK_LOGGED(DLOCK_LOG_DEBUG, "lock 'quiet' acquired", fence);
    CHECK_LOGGED(DLOCK_LOG_DEBUG, "'quiet' entered again", NULL);
    CHECK_LOGGED(DLOCK_LOG_DEBUG, "'quiet' verified", NULL);
    CHECK_LOGGED(DLOCK_LOG_DEBUG, "'quiet' released", NULL);
    pthread_mutex_lock(&logged.mu);
    for (int i = 0; i < logged.n; i++) {
        if (strstr(logged.lines[i], "s3cretPW") != NULL ||
            strstr(logged.lines[i], dlock_lock_token(l)) != NULL)
            dt_fail(__FILE__, __LINE__, "a log line shows a secret: %s", logged.lines[i]);
    }
    pthread_mutex_unlock(&logged.mu);

    /* off again: the function is not called any more */
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_OFF, collect, &logged), DLOCK_OK);
    int before = total_lines();
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(total_lines(), ==, before);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* A renewed lease shorter than three request timeouts is said at the
 * first hold, once per client: a renewal with no answer would fail too
 * late to be retried (the default 5 s timeout under a 3 s lease: only once
 * the lease has run out, the loss the first thing said). A timeout that
 * leaves room to retry is not warned about. */
static void log_short_lease_warned(void)
{
    dt_server srv;

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=1s");
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, collect, &logged), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "brief", 0), *l2 = dt_lock(c, "brief2", 0);
    for (int i = 0; i < 2; i++) {
        CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
        CHECK_RC(dlock_acquire(l2, 0), DLOCK_OK);
        CHECK_RC(dlock_release(l2), DLOCK_OK);
        CHECK_RC(dlock_release(l), DLOCK_OK);
    }
    if (count_lines(DLOCK_LOG_WARN, "the store request timeout (5000 ms", "lock 'brief'") != 1 ||
        total_lines() != 1) {
        dump_log();
        dt_fail(__FILE__, __LINE__, "want one warning of the short lease");
    }
    CHECK_LOGGED(DLOCK_LOG_WARN, "more than a third of the lease (1000 ms)", "?timeout=333ms");
    /* the URL set no timeout=: the default named, not "the URL's timeout=" */
    CHECK_LOGGED(DLOCK_LOG_WARN, "(5000 ms: the default command timeout of 5 s;", "lock 'brief'");
    /* a fixed lease is not renewed: nothing to warn of */
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    clear_log();
    c = dt_client(srv.url, "?lease=1s");
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, collect, &logged), DLOCK_OK);
    l = dt_lock(c, "brief", 0);
    CHECK_RC(dlock_acquire_for(l, 0, 1000), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    c = dt_client(srv.url, "?lease=1s&timeout=300ms");
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, collect, &logged), DLOCK_OK);
    l = dt_lock(c, "brief", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    if (total_lines() != 0) {
        dump_log();
        dt_fail(__FILE__, __LINE__, "want no warning");
    }
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&srv);
}

/* Renewals that fail are logged and retried; when the server answers again
 * that is logged too; a loss is an error. */
static void log_renewal_failures_and_loss(void)
{
    dt_server srv;

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=3s&timeout=150ms");
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "flaky", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);

    dt_server_pause(&srv);
    DT_WAIT_UNTIL(count_lines(DLOCK_LOG_WARN, "renewal failed", "'flaky'") > 0, 5000);
    dt_server_resume(&srv);
    /* the store named once: the error's own label is not repeated */
    pthread_mutex_lock(&logged.mu);
    for (int i = 0; i < logged.n; i++) {
        const char *first = strstr(logged.lines[i], srv.url);
        if (strstr(logged.lines[i], "renewal failed") != NULL && first != NULL &&
            strstr(first + 1, srv.url) != NULL)
            dt_fail(__FILE__, __LINE__, "the store named twice: %s", logged.lines[i]);
    }
    pthread_mutex_unlock(&logged.mu);
    DT_WAIT_UNTIL(count_lines(DLOCK_LOG_INFO, "renewals succeed again", "'flaky'") > 0, 5000);
    CHECK_RC(dlock_lock_check(l), DLOCK_OK);
    CHECK_INT(count_lines(DLOCK_LOG_ERROR, "lost", NULL), ==, 0);

    /* now for good: the validity runs out, reported as an error; the
     * retries meanwhile are said at info too (every second: -v does not
     * fall silent between the first failure and the loss) */
    int retries_said = count_lines(DLOCK_LOG_INFO, "renewal failed", "'flaky'");
    dt_server_pause(&srv);
    DT_WAIT_UNTIL(count_lines(DLOCK_LOG_ERROR, "lock 'flaky' lost", NULL) > 0, 6000);
    CHECK_INT(count_lines(DLOCK_LOG_INFO, "renewal failed", "'flaky'"), >, retries_said);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    dt_server_resume(&srv);
    dlock_lock_free(l);
    dlock_client_close(c);
}

/* Renewal lines count and name what the user has, not "leases": a waiter's
 * place in the queue, a held lock, the session of a store that has one. */
static void *wait_for_kept(void *arg);

/* No line of the log says "leases", or counts one thing as two. */
static void check_no_lease_count(void)
{
    pthread_mutex_lock(&logged.mu);
    for (int i = 0; i < logged.n; i++) {
        if (strstr(logged.lines[i], "leases") != NULL ||
            strstr(logged.lines[i], " of 1 ") != NULL || strstr(logged.lines[i], " of 2 ") != NULL)
            dt_fail(__FILE__, __LINE__, "a line counts leases: %s", logged.lines[i]);
    }
    pthread_mutex_unlock(&logged.mu);
}

static void log_renewal_names_what_is_kept(void)
{
    dt_server srv;
    dlock_status st;
    pthread_t t;

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *holder_c = dt_client(srv.url, "?lease=3s&timeout=150ms");
    dlock_client *waiter_c = dt_client(srv.url, "?waiter_lease=1s&timeout=150ms");
    dlock_lock *holder = dt_lock(holder_c, "kept", 0);
    CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK);
    dlock_lock *waiter = dt_lock(waiter_c, "kept", 0);
    CHECK(pthread_create(&t, NULL, wait_for_kept, waiter) == 0);
    DT_WAIT_UNTIL(dlock_query(holder_c, "kept", 0, &st) == DLOCK_OK && st.waiters == 1, 5000);
    clear_log();
    CHECK_RC(dlock_client_set_log(holder_c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);
    CHECK_RC(dlock_client_set_log(waiter_c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);

    dt_server_pause(&srv);
    WAIT_LOGGED(DLOCK_LOG_WARN, "renewal failed for the queue place for 'kept':", 5000);
    WAIT_LOGGED(DLOCK_LOG_WARN, "renewal failed for the held lock 'kept':", 5000);
    dt_server_resume(&srv);
    WAIT_LOGGED(DLOCK_LOG_INFO, "renewals succeed again (the held lock 'kept',", 5000);
    check_no_lease_count();
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(dlock_release(waiter), DLOCK_OK);
    CHECK_RC(dlock_client_set_log(waiter_c, DLOCK_LOG_OFF, NULL, NULL), DLOCK_OK);
    CHECK_RC(dlock_client_set_log(holder_c, DLOCK_LOG_OFF, NULL, NULL), DLOCK_OK);
    dlock_lock_free(waiter);
    dlock_lock_free(holder);
    dlock_client_close(waiter_c);
    dlock_client_close(holder_c);
    dt_server_stop(&srv);

#ifdef DLOCK_WITH_ETCD
    /* a store with sessions: one hold is the held lock and the session (the
     * two may be renewed in one batch or apart) */
    clear_log();
    dt_server_start(&srv, "etcd", 0, NULL);
    holder_c = dt_client(srv.url, "?lease=3s&timeout=150ms");
    holder = dt_lock(holder_c, "kept", 0);
    CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK);
    CHECK_RC(dlock_client_set_log(holder_c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);
    dt_server_pause(&srv);
    WAIT_LOGGED(DLOCK_LOG_WARN, "the session: ", 5000);
    dt_server_resume(&srv);
    /* one line at info, for whichever of the two succeeded first */
    WAIT_LOGGED(DLOCK_LOG_INFO, "renewals succeed again (", 5000);
    CHECK_INT(count_lines(DLOCK_LOG_INFO, "renewals succeed again (the session", NULL) +
                  count_lines(DLOCK_LOG_INFO, "renewals succeed again (the held lock 'kept'", NULL),
              ==, 1);
    check_no_lease_count();
    CHECK_RC(dlock_client_set_log(holder_c, DLOCK_LOG_OFF, NULL, NULL), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_client_close(holder_c);
    dt_server_stop(&srv);
#endif
}

/* An outage of many held locks ends in one line at info: their retries
 * are jittered apart, so they succeed again batch after batch, and each
 * batch had its own "renewals succeed again" (8 lines for 8 locks); the
 * others are at debug now. */
static void log_one_recovery_per_outage(void)
{
    enum { N = 8 };
    dt_server srv;
    dlock_lock *l[N];
    char name[16];

    clear_log();
    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=3s&timeout=150ms");
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "out%d", i);
        l[i] = dt_lock(c, name, 0);
        CHECK_RC(dlock_acquire(l[i], 0), DLOCK_OK);
    }
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_DEBUG, collect, &logged), DLOCK_OK);
    dt_server_pause(&srv);
    WAIT_LOGGED(DLOCK_LOG_WARN, "renewal failed", 5000);
    dt_server_resume(&srv);
    /* every lock renewed in one batch again: the outage is over for all */
    WAIT_LOGGED(DLOCK_LOG_DEBUG, "renewed 8 of 8 (8 held locks", 5000);
    for (int i = 0; i < N; i++)
        CHECK_RC(dlock_lock_check(l[i]), DLOCK_OK);
    int info = count_lines(DLOCK_LOG_INFO, "renewals succeed again", NULL);
    if (info != 1) {
        dump_log();
        dt_fail(__FILE__, __LINE__, "%d lines at info say renewals succeed again", info);
    }
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_OFF, NULL, NULL), DLOCK_OK);
    for (int i = 0; i < N; i++)
        dlock_lock_free(l[i]);
    dlock_client_close(c);
    dt_server_stop(&srv);
}

/* A dropped Redis connection is a warning, connecting again news. */
static void log_reconnect(void)
{
    dt_server srv;

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?pool=1");
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);
    dlock_lock *l = dt_lock(c, "re", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(count_lines(DLOCK_LOG_INFO, "connected again", NULL), ==, 0);
    dt_server_restart(&srv, 0);
    /* the first call after the restart finds the old connection closed */
    DT_WAIT_UNTIL(dlock_acquire(l, 0) == DLOCK_OK, 5000);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_LOGGED(DLOCK_LOG_WARN, "connection dropped", NULL);
    CHECK_LOGGED(DLOCK_LOG_INFO, "connected again", srv.url + strlen("redis://"));
    dlock_lock_free(l);
    dlock_client_close(c);
}

typedef struct waiter_arg {
    dlock_lock *l;
    atomic_int rc;
} waiter_arg;

static void *wait_for_lock(void *arg)
{
    waiter_arg *w = arg;
    atomic_store(&w->rc, dlock_acquire(w->l, 20000));
    return NULL;
}

static void *wait_for_kept(void *arg)
{
    CHECK_RC(dlock_acquire(arg, 20000), DLOCK_OK);
    return NULL;
}

/* A waiter's client logs the hand-over, and a cancel. */
static void log_handover_and_cancel(void)
{
    dt_server srv;
    dlock_status st;
    pthread_t t;

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *holder_c = dt_client(srv.url, NULL);
    dlock_client *waiter_c = dt_client(srv.url, NULL);
    CHECK_RC(dlock_client_set_log(waiter_c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);
    dlock_lock *holder = dt_lock(holder_c, "baton", 0);
    CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK);

    waiter_arg w = {.l = dt_lock(waiter_c, "baton", 0)};
    atomic_init(&w.rc, -1);
    CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0);
    DT_WAIT_UNTIL(dlock_query(holder_c, "baton", 0, &st) == DLOCK_OK && st.waiters == 1, 5000);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_OK);
    CHECK_LOGGED(DLOCK_LOG_INFO, "'baton' handed over by the store", NULL);

    /* the holder now waits, and is cancelled */
    waiter_arg h = {.l = holder};
    atomic_init(&h.rc, -1);
    CHECK_RC(dlock_client_set_log(holder_c, DLOCK_LOG_INFO, collect, &logged), DLOCK_OK);
    CHECK(pthread_create(&t, NULL, wait_for_lock, &h) == 0);
    DT_WAIT_UNTIL(dlock_query(holder_c, "baton", 0, &st) == DLOCK_OK && st.waiters == 1, 5000);
    CHECK_RC(dlock_cancel(holder), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&h.rc), DLOCK_ECANCELED);
    CHECK_LOGGED(DLOCK_LOG_INFO, "wait for lock 'baton' cancelled", NULL);

    /* a writer behind a reader: the lines name the kind */
    dlock_lock *reader = dt_lock(holder_c, "rwbaton", DLOCK_READ);
    CHECK_RC(dlock_acquire(reader, 0), DLOCK_OK);
    waiter_arg wr = {.l = dt_lock(waiter_c, "rwbaton", DLOCK_WRITE)};
    atomic_init(&wr.rc, -1);
    CHECK(pthread_create(&t, NULL, wait_for_lock, &wr) == 0);
    DT_WAIT_UNTIL(count_lines(DLOCK_LOG_INFO,
                              "write lock 'rwbaton' is held by someone else: "
                              "waiting",
                              NULL) == 1,
                  5000);
    CHECK_RC(dlock_release(reader), DLOCK_OK);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&wr.rc), DLOCK_OK);
    CHECK_LOGGED(DLOCK_LOG_INFO, "write lock 'rwbaton' handed over by the store", NULL);
    CHECK_RC(dlock_release(wr.l), DLOCK_OK);
    dlock_lock_free(wr.l);
    dlock_lock_free(reader);

    CHECK_RC(dlock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
    dlock_client_close(waiter_c);
    dlock_client_close(holder_c);
}

/* ---------------------------------------------------------------- every store */

static atomic_int lost_calls;

static void count_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) l, (void) why, (void) arg;
    if (code == DLOCK_ELOST)
        atomic_fetch_add(&lost_calls, 1);
}

/* The same names are refused on every store, with a message saying why. */
static void names_refused(dlock_client *c)
{
    static const struct {
        const char *name;
        const char *words;
    } bad[] = {
        {"tab\there", "control character (byte 3 is 0x09)"},
        {"del\x7f", "control character (byte 3 is 0x7f)"},
        {"nel\xc2\x85", "C1 control character (U+0085 at byte 3)"},
        {"csi\xc2\x9b[2J", "C1 control character (U+009B"},
        {"bad\xff", "not valid UTF-8: a byte that never occurs in UTF-8 at byte 3"},
        {"cont\x80", "a continuation byte without a lead byte at byte 4"},
        {"cut\xe2\x82", "a sequence cut short at byte 3"},
        {"over\xc0\xaf", "byte that never occurs"},
        {"over\xe0\x80\xaf", "an overlong form at byte 4"},
        {"sur\xed\xa0\x80", "a surrogate"},
        {"big\xf4\x90\x80\x80", "above U+10FFFF"},
    };
    dlock_lock *l = NULL;
    dlock_status st;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(dlock_lock_open(c, bad[i].name, 0, &l), DLOCK_EINVAL);
        CHECK(l == NULL);
        if (strstr(dlock_errmsg(), bad[i].words) == NULL)
            dt_fail(__FILE__, __LINE__, "name %zu: '%s', want '%s'", i, dlock_errmsg(),
                    bad[i].words);
        CHECK_RC(dlock_query(c, bad[i].name, 0, &st), DLOCK_EINVAL);
        CHECK_RC(dlock_force_unlock(c, bad[i].name, 0), DLOCK_EINVAL);
        const char *names[] = {"fine", bad[i].name};
        CHECK_RC(dlock_multi_open(c, names, 2, 0, &l), DLOCK_EINVAL);
    }
    /* text that is not control characters is a name: accented, CJK,
     * U+00A0 (the first after the C1 block) */
    l = dt_lock(c, "caf\xc3\xa9-\xe6\x97\xa5-\xc2\xa0", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    /* beyond U+FFFF (an emoji): a name on every store (ZooKeeper, whose
     * paths cannot hold it, has it escaped) */
    l = dt_lock(c, "lock-\xf0\x9f\x94\x92", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* dlock_lock_check() knows only what the renewer learned; dlock_lock_verify()
 * asks the store. A loss verify finds is reported like any other. */
static void verify_against(dlock_client *c, dlock_client *op, unsigned flags, const char *name)
{
    dlock_lock *l = dt_lock(c, name, flags);
    int was_held = -7;

    CHECK_RC(dlock_lock_verify(l), DLOCK_ENOTOWNER);
    atomic_store(&lost_calls, 0);
    dlock_lock_on_lost(l, count_lost, NULL);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(l), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(l), DLOCK_OK); /* changes nothing */
    CHECK_RC(dlock_force_unlock2(op, name, flags, &was_held), DLOCK_OK);
    CHECK_INT(was_held, ==, 1);
    /* the renewer has not been round yet (a third of a 30 s lease); but
     * a store whose lock is its connection's may have told already (the
     * forced unlock ended the connection: its watched socket closed) */
    int rc = dlock_lock_check(l);
    if (rc != DLOCK_ELOST || !(dlock_client_caps(c) & DLOCK_CAP_SESSION))
        CHECK_RC(rc, DLOCK_OK);
    CHECK_RC(dlock_lock_verify(l), DLOCK_ELOST);
    CHECK_INT(atomic_load(&lost_calls), ==, 1);
    CHECK_RC(dlock_lock_check(l), DLOCK_ELOST);
    CHECK_RC(dlock_lock_verify(l), DLOCK_ELOST); /* still reported, no second callback */
    CHECK_INT(atomic_load(&lost_calls), ==, 1);
    CHECK_RC(dlock_release(l), DLOCK_ELOST); /* cleared by the release */
    CHECK_RC(dlock_lock_check(l), DLOCK_ENOTOWNER);
    CHECK_RC(dlock_lock_verify(l), DLOCK_ENOTOWNER);
    CHECK_INT(atomic_load(&lost_calls), ==, 1);
    /* free now: the forced unlock says so */
    was_held = -7;
    CHECK_RC(dlock_force_unlock2(op, name, flags, &was_held), DLOCK_OK);
    CHECK_INT(was_held, ==, 0);
    CHECK_RC(dlock_force_unlock2(op, name, flags, NULL), DLOCK_OK);
    dlock_lock_free(l);
}

/* dlock_renew: the lock stays as renewed (or not) as it was. */
static void renew_keeps_mode(dlock_client *c, const char *name)
{
    dlock_lock *l = dt_lock(c, name, 0);

    CHECK_RC(dlock_renew(l), DLOCK_ENOTOWNER);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK_RC(dlock_renew(l), DLOCK_OK);
    CHECK(l->lease.renew == 1);
    if (dlock_client_caps(c) & DLOCK_CAP_EXTEND) {
        CHECK_RC(dlock_extend(l, 20000), DLOCK_OK);
        CHECK(l->lease.renew == 0);
        CHECK_RC(dlock_renew(l), DLOCK_OK);
        CHECK(l->lease.renew == 0); /* a fixed lease stays fixed */
        CHECK_INT(l->lease.lease_ms, ==, 20000);
        CHECK_RC(dlock_keepalive(l), DLOCK_OK);
        CHECK(l->lease.renew == 1);
    } else {
        CHECK_RC(dlock_extend(l, 20000), DLOCK_ENOTSUP);
    }
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void one_store(const char *kind)
{
    dt_server srv;

    dt_server_start(&srv, kind, 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    dlock_client *op = dt_client(srv.url, NULL);
    names_refused(c);
    verify_against(c, op, 0, "verified");
    if (dlock_client_caps(c) & DLOCK_CAP_READ_WRITE) { /* (SQLite: mutexes only) */
        verify_against(c, op, DLOCK_WRITE, "verified-rw");
        verify_against(c, op, DLOCK_READ, "verified-rw");
    }
    renew_keeps_mode(c, "renewed");
    dlock_client_close(op);
    dlock_client_close(c);
}

static void redis_store(void)
{
    one_store("redis");
}

#ifdef DLOCK_WITH_ETCD
static void etcd_store(void)
{
    one_store("etcd");
}
#endif

#ifdef DLOCK_WITH_POSTGRES
static void postgres_store(void)
{
    one_store("postgres");
}
#endif

#ifdef DLOCK_WITH_MYSQL
static void mariadb_store(void)
{
    one_store("mariadb");
}
#endif

#ifdef DLOCK_WITH_ZOOKEEPER
static void zookeeper_store(void)
{
    one_store("zookeeper");
}
#endif

#ifdef DLOCK_WITH_SQLITE
static void sqlite_store(void)
{
    one_store("sqlite");
}
#endif

/* ---------------------------------------------------------------- Redis details */

/* An on_lost callback that asks dlock_lock_verify() about its own lock (on
 * the renewal thread, while its report is under way) is told ELOST at once:
 * verify waits for a report under way on another thread, never for its
 * own. */
static _Atomic int verify_in_callback = -1;

static void verify_on_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    (void) code;
    (void) why;
    (void) arg;
    atomic_store(&verify_in_callback, dlock_lock_verify(l));
}

static void redis_verify_in_on_lost(void)
{
    dt_server srv;

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, "?lease=900ms");
    dlock_lock *l = dt_lock(c, "cb", 0);
    dlock_lock_on_lost(l, verify_on_lost, NULL);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    dt_server_cli(&srv, "DEL dlock:{cb}"); /* the next renewal finds it gone */
    DT_WAIT_UNTIL(atomic_load(&verify_in_callback) != -1, 5000);
    CHECK_INT(atomic_load(&verify_in_callback), ==, DLOCK_ELOST);
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&srv);
}

/* verify changes nothing in the store (no lease lengthened); renew sets the
 * full lease again; shared holds and multi-locks are verified too. */
static void redis_verify_renew_details(void)
{
    dt_server srv;
    dlock_lock *l, *m, *s1, *s2;
    long long pttl;

    dt_server_start(&srv, "redis", 0, NULL);
    dlock_client *c = dt_client(srv.url, NULL);
    l = dt_lock(c, "fixed", 0);
    CHECK_RC(dlock_acquire_for(l, 0, 60000), DLOCK_OK);
    dt_server_cli(&srv, "PEXPIRE dlock:{fixed} 20000");
    CHECK_RC(dlock_lock_verify(l), DLOCK_OK);
    pttl = atoll(dt_server_cli(&srv, "PTTL dlock:{fixed}"));
    CHECK(pttl > 0 && pttl <= 20000);
    CHECK_RC(dlock_renew(l), DLOCK_OK); /* its fixed lease again */
    pttl = atoll(dt_server_cli(&srv, "PTTL dlock:{fixed}"));
    CHECK(pttl > 50000 && pttl <= 60000);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);

    /* a semaphore: each holder's share on its own */
    CHECK_RC(dlock_semaphore_open(c, "pool", 3, 1, &s1), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c, "pool", 3, 2, &s2), DLOCK_OK);
    CHECK_RC(dlock_acquire(s1, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(s2, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(s1), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(s2), DLOCK_OK);
    dt_server_cli(&srv, "HDEL dlock:{pool}:sem:holders %s", dlock_lock_token(s1));
    CHECK_RC(dlock_lock_verify(s1), DLOCK_ELOST);
    CHECK_RC(dlock_lock_verify(s2), DLOCK_OK);
    CHECK_RC(dlock_release(s2), DLOCK_OK);
    dlock_lock_free(s1);
    dlock_lock_free(s2);

    /* a multi-lock: every member */
    const char *names[] = {"m-a", "m-b"};
    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    atomic_store(&lost_calls, 0);
    dlock_lock_on_lost(m, count_lost, NULL);
    CHECK_RC(dlock_acquire(m, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(m), DLOCK_OK);
    CHECK_RC(dlock_force_unlock(c, "m-b", 0), DLOCK_OK);
    CHECK_RC(dlock_lock_check(m), DLOCK_OK);
    CHECK_RC(dlock_lock_verify(m), DLOCK_ELOST);
    CHECK(strstr(dlock_errmsg(), "multi-lock") != NULL);
    CHECK_INT(atomic_load(&lost_calls), ==, 1);
    CHECK_RC(dlock_lock_check(m), DLOCK_ELOST);
    dlock_lock_free(m);

    /* unreachable: nothing known, nothing changed */
    l = dt_lock(c, "cut-off", 0);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    dt_server_kill(&srv);
    CHECK_RC(dlock_lock_verify(l), DLOCK_EUNREACHABLE);
    CHECK_RC(dlock_lock_check(l), DLOCK_OK);
    dlock_lock_detach(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"log_levels_and_secrets", log_levels_and_secrets},
        {"log_renewal_failures_and_loss", log_renewal_failures_and_loss},
        {"log_short_lease_warned", log_short_lease_warned},
        {"log_renewal_names_what_is_kept", log_renewal_names_what_is_kept},
        {"log_one_recovery_per_outage", log_one_recovery_per_outage},
        {"log_reconnect", log_reconnect},
        {"log_handover_and_cancel", log_handover_and_cancel},
        {"redis_store", redis_store},
#ifdef DLOCK_WITH_ETCD
        {"etcd_store", etcd_store},
#endif
#ifdef DLOCK_WITH_POSTGRES
        {"postgres_store", postgres_store},
#endif
#ifdef DLOCK_WITH_MYSQL
        {"mariadb_store", mariadb_store},
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
        {"zookeeper_store", zookeeper_store},
#endif
#ifdef DLOCK_WITH_SQLITE
        {"sqlite_store", sqlite_store},
#endif
        {"redis_verify_renew_details", redis_verify_renew_details},
        {"redis_verify_in_on_lost", redis_verify_in_on_lost},
    };
    return DT_RUN(tests);
}
