/* SPDX-License-Identifier: MIT */
/* test_mysql_row.c - the MariaDB/MySQL backend's row mode (mode=row:
 * SELECT ... FOR UPDATE in a transaction held for the lock's life),
 * against a real MariaDB started once for the program: a holder's
 * connection killed from the server side (KILL) is reported lost before
 * the next holder gets the lock; fences strictly increase across a holder
 * killed (SIGKILL) mid-hold, whose transaction the server rolls back; a
 * wait blocks in the server (a connection in FOR UPDATE, no polling), a
 * try never blocks, a budget ends on time and a cancel reaches the wait;
 * the three modes exclude one another on a name; bad input.
 *
 * The server is looked at with the mariadb client (dt_server_cli), never
 * through the library. Tests that fork do so before they open a client. */
#define _GNU_SOURCE
#include "../support/child_holder.h"
#include "../support/harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static dt_server srv;

/* A client of row mode; options: "&lease=2s", NULL. */
static dlock_client *client(const char *options)
{
    char opts[200];
    snprintf(opts, sizeof opts, "?mode=row%s", options != NULL ? options : "");
    return dt_client(srv.url, opts);
}

/* The mariadb client's one-line answer, as a number (-1: NULL, or none). */
static long long sql_number(const char *sql)
{
    const char *out = dt_server_cli(&srv, "-e \"%s\"", sql);
    if (strncmp(out, "NULL", 4) == 0 || out[0] == '\0')
        return -1;
    return strtoll(out, NULL, 10);
}

/* The server connection holding lock `name` (a plain name: dlock:NAME),
 * as its row's lease says; -1 if none. */
static long long holder_conn(const char *name)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT conn FROM dlock_fence WHERE name = 'dlock:%s' AND expires > "
             "UTC_TIMESTAMP(6)",
             name);
    return sql_number(sql);
}

/* How many connections wait for the row of `name` (in FOR UPDATE, or, at
 * the name's first use, in the INSERT that makes the row). */
static long long waiting(const char *name)
{
    char sql[600], hex[300];
    size_t n = 0;
    char server[200];
    snprintf(server, sizeof server, "dlock:%s", name);
    for (const unsigned char *t = (const unsigned char *) server; *t != '\0'; t++)
        n += (size_t) snprintf(hex + n, sizeof hex - n, "%02x", *t);
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND "
             "INFO LIKE '%%FROM dlock_row WHERE name = X''%s''%%'",
             hex);
    return sql_number(sql);
}

/* ---------------------------------------------------------------- loss */

/* The holder's connection killed in the server (its transaction rolled
 * back, the row let go): the holder is told within about a lease, and the
 * next holder gets the lock only after that (the row's lease), with a
 * larger fence. */
static void killed_holder(void)
{
    dt_lost_box box = {0};
    dlock_client *c = client("&lease=2s"), *c2 = client(NULL);
    dlock_lock *l = dt_lock(c, "term", 0), *l2 = dt_lock(c2, "term", 0);
    dlock_lock_on_lost(l, dt_on_lost, &box);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    CHECK_RC(dlock_try_acquire(l2), DLOCK_EBUSY);
    long long id = holder_conn("term");
    CHECK_INT(id, >, 0);
    int64_t t0 = dt_now_ms();
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    CHECK_RC(dlock_acquire(l2, 5000), DLOCK_OK);
    int64_t granted = dt_now_ms();
    CHECK_INT(dlock_lock_fence(l2), >, fence);
    DT_WAIT_UNTIL(atomic_load(&box.lost) == 1, 3000);
    printf("killed: loss reported after %lld ms, the next holder granted after %lld ms: %s\n",
           (long long) (atomic_load(&box.at_ms) - t0), (long long) (granted - t0), box.why);
    /* not before the holder was told */
    CHECK_INT(atomic_load(&box.at_ms), <=, granted);
    CHECK_RC(dlock_release(l), DLOCK_ELOST);
    CHECK_RC(dlock_release(l2), DLOCK_OK);
    /* the lost handle takes it again, on a new connection */
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, dlock_lock_fence(l2));
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* Status says for how long a holder whose connection the server ended
 * (KILL) still holds: the row is let go, but its lease runs and the next
 * taker waits for it (it said "none (held by its holder's session)", a
 * session that was gone). The lease told is the truth: the next taker gets
 * the lock at its end, not before. A holder alive shows its row's lease
 * too, renewed while it lives. */
static void status_after_kill(void)
{
    dlock_client *c = client("&lease=3s"), *op = client(NULL);
    dlock_lock *l = dt_lock(c, "sk", 0), *l2 = dt_lock(op, "sk", 0);
    CHECK_RC(dlock_acquire(l, 5000), DLOCK_OK);
    dlock_status st = dt_query(op, "sk", 0);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.lease_ms, >, 0);
    CHECK_INT(st.lease_ms, <=, 3000);
    long long id = holder_conn("sk");
    CHECK_INT(id, >, 0);
    dt_server_cli(&srv, "-e \"KILL %lld\"", id);
    dt_dead_holder_status_true(op, "sk", l, l2, 3000);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_close(c);
    dlock_client_close(op);
}

/* A holder process killed (SIGKILL) mid-hold: the server rolls its
 * transaction back, and the next holder's fence is still larger (a fence
 * written inside the holder's transaction would be rolled back with it and
 * given again). Then the same once more, so two such holders in a row. */
static void dead_holder_fence(void)
{
    unsigned long long last = 0;
    for (int round = 0; round < 2; round++) {
        char url[300];
        unsigned long long fence = 0;
        snprintf(url, sizeof url, "%s?mode=row&lease=1s", srv.url);
        pid_t pid = dt_child_hold(url, "dead", DT_CHILD_WAIT, &fence);
        CHECK_INT(fence, >, last);
        dt_kill_reap(pid);
        int64_t t0 = dt_now_ms();
        dlock_client *c = client(NULL);
        dlock_lock *l = dt_lock(c, "dead", 0);
        CHECK_RC(dlock_acquire(l, 10000), DLOCK_OK);
        int64_t took = dt_now_ms() - t0;
        printf("dead holder (lease 1 s, fence %llu): taken after %lld ms, fence %llu\n", fence,
               (long long) took, (unsigned long long) dlock_lock_fence(l));
        CHECK_INT(took, <, 1000 + 1500);
        CHECK_INT(dlock_lock_fence(l), >, fence);
        last = dlock_lock_fence(l);
        CHECK_RC(dlock_release(l), DLOCK_OK);
        dlock_lock_free(l);
        dlock_client_close(c);
    }
}

/* ---------------------------------------------------------------- waits */

struct waiter {
    dlock_lock *l;
    int64_t wait_ms;
    _Atomic int rc;
    _Atomic int done;
    _Atomic long long ended_ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    int rc = dlock_acquire(w->l, w->wait_ms);
    atomic_store(&w->ended_ms, dt_now_ms());
    atomic_store(&w->rc, rc);
    atomic_store(&w->done, 1);
    return NULL;
}

/* A wait blocks in FOR UPDATE (one connection there, no polling), past two
 * command timeouts; a try never blocks; a budget ends on time; a cancel of
 * the blocked wait returns at once and leaves nothing waiting in the
 * server; a release wakes a blocked waiter at once. */
static void blocked_wait(void)
{
    dlock_client *h = client(NULL), *c = client("&timeout=2s");
    dlock_lock *hl = dt_lock(h, "bw", 0), *l = dt_lock(c, "bw", 0);
    /* once, so that the row is there (committed): the waits below are in
     * FOR UPDATE, not in the INSERT of a name's first use */
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);

    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    CHECK_INT(dt_now_ms() - t0, <, 500);
    t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, 700), DLOCK_ETIMEDOUT);
    int64_t took = dt_now_ms() - t0;
    CHECK_INT(took, >=, 690);
    CHECK_INT(took, <, 1500);

    struct waiter w = {.l = l, .wait_ms = 60000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("bw") == 1, 5000);
    dt_sleep_ms(4500); /* two command timeouts and more */
    CHECK(!atomic_load(&w.done));
    CHECK_INT(waiting("bw"), ==, 1);
    dlock_status st = dt_query(h, "bw", 0);
    CHECK_INT(st.held, ==, 1);
    CHECK_INT(st.waiters, ==, 1);
    int64_t cancel_at = dt_now_ms();
    CHECK_RC(dlock_cancel(l), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 2000);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_ECANCELED);
    long long cancel_took = atomic_load(&w.ended_ms) - cancel_at;
    printf("blocked wait: cancelled in %lld ms\n", cancel_took);
    CHECK_INT(cancel_took, <, 300);
    DT_WAIT_UNTIL(waiting("bw") == 0, 2000);

    struct waiter w2 = {.l = l, .wait_ms = 60000};
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w2), ==, 0);
    DT_WAIT_UNTIL(waiting("bw") == 1, 5000);
    int64_t released_at = dt_now_ms();
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w2.done), 2000);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w2.rc), DLOCK_OK);
    printf("blocked wait: granted %lld ms after the release\n",
           (long long) (atomic_load(&w2.ended_ms) - released_at));
    CHECK_INT(atomic_load(&w2.ended_ms) - released_at, <, 300);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* A name's first use: its row is made inside the holder's transaction
 * (not committed while it holds), and a try of another client is busy at
 * once, a wait blocks and is granted at the release (an INSERT made
 * outside the transaction waited behind the holder for the command
 * timeout: the store looked unreachable). */
static void first_use(void)
{
    dlock_client *h = client(NULL), *c = client("&timeout=1s");
    dlock_lock *hl = dt_lock(h, "first", 0), *l = dt_lock(c, "first", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_row WHERE name = 'dlock:first'"), ==, 0);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_try_acquire(l), DLOCK_EBUSY);
    CHECK_INT(dt_now_ms() - t0, <, 500);
    /* a row hold ends with its holder's session: not "no lease" (the
     * new-user trial: it invited a needless unlock --force) */
    CHECK(strstr(dlock_errmsg(), "no lease") == NULL);
    struct waiter w = {.l = l, .wait_ms = 10000};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    DT_WAIT_UNTIL(waiting("first") == 1, 5000);
    dt_sleep_ms(1500); /* past the waiter's command timeout */
    CHECK(!atomic_load(&w.done));
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    DT_WAIT_UNTIL(atomic_load(&w.done), 2000);
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(l), >, dlock_lock_fence(hl));
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_INT(sql_number("SELECT COUNT(*) FROM dlock_row WHERE name = 'dlock:first'"), ==, 1);
    dlock_lock_free(l);
    dlock_lock_free(hl);
    dlock_client_close(c);
    dlock_client_close(h);
}

/* ---------------------------------------------------------------- modes */

/* One lock per name across row, session and table modes: a holder in any
 * of them makes a try in the others busy, and each next holder's fence is
 * larger, whichever mode it takes the name in. */
static void modes_exclude(void)
{
    static const char *const modes[] = {"?mode=row", "?mode=session", "?mode=table"};
    dlock_client *cs[3];
    dlock_lock *ls[3];
    for (int i = 0; i < 3; i++) {
        cs[i] = dt_client(srv.url, modes[i]);
        ls[i] = dt_lock(cs[i], "modes", 0);
    }
    uint64_t last = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++) {
            CHECK_RC(dlock_acquire(ls[i], 5000), DLOCK_OK);
            CHECK_INT(dlock_lock_fence(ls[i]), >, last);
            last = dlock_lock_fence(ls[i]);
            for (int j = 0; j < 3; j++) {
                if (j == i)
                    continue;
                int rc = dlock_try_acquire(ls[j]);
                if (rc != DLOCK_EBUSY)
                    dt_fail(__FILE__, __LINE__, "held in %s, a try in %s: %s (want busy)", modes[i],
                            modes[j], dlock_strerror(rc));
            }
            CHECK_RC(dlock_release(ls[i]), DLOCK_OK);
        }
    }
    /* a row-mode waiter gets the name when a session holder lets go */
    CHECK_RC(dlock_acquire(ls[1], 5000), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(ls[0], 300), DLOCK_ETIMEDOUT);
    CHECK_INT(dt_now_ms() - t0, <, 1500);
    CHECK_RC(dlock_release(ls[1]), DLOCK_OK);
    CHECK_RC(dlock_acquire(ls[0], 5000), DLOCK_OK);
    CHECK_INT(dlock_lock_fence(ls[0]), >, last);
    CHECK_RC(dlock_release(ls[0]), DLOCK_OK);
    for (int i = 0; i < 3; i++) {
        dlock_lock_free(ls[i]);
        dlock_client_close(cs[i]);
    }
}

/* The counters a waiter must leave alone: the name's fences in both tables
 * (row and session modes' dlock_fence, table mode's dlock_lock; -1 when
 * the row is not there), and the rows written server-wide. */
static long long fences(const char *name)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT COALESCE((SELECT fence FROM dlock_fence WHERE name = 'dlock:%s'), 0) + "
             "COALESCE((SELECT fence FROM dlock_lock WHERE name = 'dlock:%s'), 0)",
             name, name);
    return sql_number(sql);
}

static long long rows_written(void)
{
    /* (Handler_*: writes to tables, not the temporary ones a query makes) */
    return sql_number("SELECT SUM(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS WHERE "
                      "VARIABLE_NAME IN ('HANDLER_WRITE', 'HANDLER_UPDATE', 'HANDLER_DELETE')");
}

/* A waiter in one mode on a name held in another (all six pairs) consumes
 * no fence and writes nothing while it waits (the new-user trial: a
 * session-mode waiter beside a row-mode holder bumped the fence at every
 * poll, 2 to 26 in 5 s), and gets the name with a larger fence once the
 * holder lets go. */
static void mixed_waiter_no_fence_churn(void)
{
    static const char *const modes[] = {"row", "session", "table"};
    for (int h = 0; h < 3; h++) {
        for (int w = 0; w < 3; w++) {
            if (w == h)
                continue;
            char opts[100], name[40];
            snprintf(name, sizeof name, "churn-%s-%s", modes[h], modes[w]);
            /* (a lease long enough that no renewal writes in the window) */
            snprintf(opts, sizeof opts, "?mode=%s&lease=60s", modes[h]);
            dlock_client *hc = dt_client(srv.url, opts);
            snprintf(opts, sizeof opts, "?mode=%s&lease=60s", modes[w]);
            dlock_client *wc = dt_client(srv.url, opts);
            dlock_lock *hl = dt_lock(hc, name, 0), *wl = dt_lock(wc, name, 0);
            CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
            /* a first attempt of the waiter's client makes its tables */
            CHECK_RC(dlock_try_acquire(wl), DLOCK_EBUSY);
            long long fence0 = fences(name), written0 = rows_written();
            CHECK_RC(dlock_acquire(wl, 1500), DLOCK_ETIMEDOUT);
            long long fence1 = fences(name), written1 = rows_written();
            printf("%s holder, %s waiter: fences %lld -> %lld, rows written %lld\n", modes[h],
                   modes[w], fence0, fence1, written1 - written0);
            if (fence1 != fence0 || written1 - written0 > 2)
                dt_fail(__FILE__, __LINE__,
                        "held in mode=%s, a mode=%s waiter of 1.5 s moved the fences %lld -> "
                        "%lld and wrote %lld rows (want none)",
                        modes[h], modes[w], fence0, fence1, written1 - written0);
            uint64_t held = dlock_lock_fence(hl);
            CHECK_RC(dlock_release(hl), DLOCK_OK);
            CHECK_RC(dlock_acquire(wl, 5000), DLOCK_OK);
            CHECK_INT(dlock_lock_fence(wl), >, held);
            CHECK_RC(dlock_release(wl), DLOCK_OK);
            dlock_lock_free(hl);
            dlock_lock_free(wl);
            dlock_client_close(hc);
            dlock_client_close(wc);
        }
    }
}

/* Status through a session-mode URL on a name a row-mode holder holds
 * names that holder, also while a session-mode waiter is at work on the
 * name (the new-user trial: it named the waiter's connection). */
static void status_names_row_holder(void)
{
    dlock_client *h = client("&lease=1s"), *s = dt_client(srv.url, "?mode=session");
    dlock_client *op = dt_client(srv.url, "?mode=session");
    dlock_lock *hl = dt_lock(h, "seen", 0), *wl = dt_lock(s, "seen", 0);
    CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
    dlock_status st = dt_query(op, "seen", 0);
    CHECK_INT(st.held, ==, 1);
    CHECK(strcmp(st.owner, dlock_lock_token(hl)) == 0);
    struct waiter w = {.l = wl, .wait_ms = 2500};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_thread, &w), ==, 0);
    int wrong = 0, looks = 0;
    char seen[sizeof st.owner] = "";
    while (!atomic_load(&w.done)) {
        st = dt_query(op, "seen", 0);
        looks++;
        if (!st.held || strcmp(st.owner, dlock_lock_token(hl)) != 0) {
            wrong++;
            snprintf(seen, sizeof seen, "%s", st.held ? st.owner : "(free)");
        }
        dt_sleep_ms(50); /* (a look every 50 ms over the waiter's whole wait) */
    }
    pthread_join(t, NULL);
    CHECK_RC(atomic_load(&w.rc), DLOCK_ETIMEDOUT);
    printf("status during the wait: %d of %d looks named another holder (%s)\n", wrong, looks,
           seen);
    CHECK_INT(looks, >, 10);
    CHECK_INT(wrong, ==, 0);
    CHECK_RC(dlock_release(hl), DLOCK_OK);
    dlock_lock_free(hl);
    dlock_lock_free(wl);
    dlock_client_close(op);
    dlock_client_close(s);
    dlock_client_close(h);
}

/* Status through any mode's URL names the holder in any other mode (one
 * lock per name: it said free, or named a connection, before). */
static void status_across_modes(void)
{
    static const char *const modes[] = {"row", "session", "table"};
    uint64_t highest = 0;
    for (int h = 0; h < 3; h++) {
        char opts[100];
        snprintf(opts, sizeof opts, "?mode=%s", modes[h]);
        dlock_client *hc = dt_client(srv.url, opts);
        dlock_lock *hl = dt_lock(hc, "across", 0);
        CHECK_RC(dlock_acquire(hl, 5000), DLOCK_OK);
        uint64_t held_seen[3];
        for (int s = 0; s < 3; s++) {
            snprintf(opts, sizeof opts, "?mode=%s", modes[s]);
            dlock_client *sc = dt_client(srv.url, opts);
            dlock_status st = dt_query(sc, "across", 0);
            dt_holders hs = dt_query_holders(sc, "across", 0);
            held_seen[s] = st.last_fence;
            /* the last fence is the holder's or above, read where the
             * holder's mode keeps it (table mode's status of a session or
             * row holder said 0) */
            if (!st.held || strcmp(st.owner, dlock_lock_token(hl)) != 0 || hs.n != 1 ||
                strcmp(hs.h[0].owner, dlock_lock_token(hl)) != 0 ||
                st.last_fence < dlock_lock_fence(hl))
                dt_fail(__FILE__, __LINE__,
                        "held in mode=%s by %s (fence %llu), status through mode=%s says %s, "
                        "owner '%s', last fence %llu, %d holders ('%s')",
                        modes[h], dlock_lock_token(hl), (unsigned long long) dlock_lock_fence(hl),
                        modes[s], st.held ? "held" : "free", st.owner,
                        (unsigned long long) st.last_fence, hs.n, hs.n > 0 ? hs.h[0].owner : "");
            dlock_client_close(sc);
        }
        if (held_seen[0] != held_seen[1] || held_seen[1] != held_seen[2])
            dt_fail(__FILE__, __LINE__,
                    "held in mode=%s: last fence through row %llu, session %llu, table %llu",
                    modes[h], (unsigned long long) held_seen[0], (unsigned long long) held_seen[1],
                    (unsigned long long) held_seen[2]);
        if (dlock_lock_fence(hl) > highest)
            highest = dlock_lock_fence(hl);
        CHECK_RC(dlock_release(hl), DLOCK_OK);
        dlock_lock_free(hl);
        dlock_client_close(hc);
        /* free now: one name, one fence sequence, so every mode's status
         * shows the same last fence, the highest any mode issued (before,
         * each mode showed its own table's counter of a free name) */
        uint64_t seen[3];
        for (int s = 0; s < 3; s++) {
            snprintf(opts, sizeof opts, "?mode=%s", modes[s]);
            dlock_client *sc = dt_client(srv.url, opts);
            dlock_status st = dt_query(sc, "across", 0);
            CHECK_INT(st.held, ==, 0);
            seen[s] = st.last_fence;
            dlock_client_close(sc);
        }
        if (seen[0] != seen[1] || seen[1] != seen[2] || seen[0] < highest)
            dt_fail(__FILE__, __LINE__,
                    "free after a holder in mode=%s: last fence through row %llu, session %llu, "
                    "table %llu; the highest issued %llu",
                    modes[h], (unsigned long long) seen[0], (unsigned long long) seen[1],
                    (unsigned long long) seen[2], (unsigned long long) highest);
    }
}

/* ---------------------------------------------------------------- bad input */

static void bad_input(void)
{
    char url[400];
    dlock_client *c = NULL;
    snprintf(url, sizeof url, "%s?mode=row&names=exact", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "mode=session") != NULL);
    snprintf(url, sizeof url, "%s?mode=rows", srv.url);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "mode=row") != NULL);
    /* what the mode cannot do: refused by the core */
    c = client(NULL);
    dlock_lock *l = dt_lock(c, "bad", 0);
    CHECK_RC(dlock_acquire_for(l, 1000, 1000), DLOCK_ENOTSUP);
    dlock_lock *rw = NULL;
    CHECK_RC(dlock_lock_open(c, "bad", DLOCK_READ, &rw), DLOCK_ENOTSUP);
    dlock_lock_free(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"killed_holder", killed_holder},
        {"status_after_kill", status_after_kill},
        {"dead_holder_fence", dead_holder_fence},
        {"blocked_wait", blocked_wait},
        {"first_use", first_use},
        {"modes_exclude", modes_exclude},
        {"mixed_waiter_no_fence_churn", mixed_waiter_no_fence_churn},
        {"status_names_row_holder", status_names_row_holder},
        {"status_across_modes", status_across_modes},
        {"bad_input", bad_input},
    };
    dt_server_start(&srv, "mariadb", 0, NULL); /* once for every test (each a fork) */
    return DT_RUN(tests);
}
