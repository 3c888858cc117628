/* SPDX-License-Identifier: MIT */
/* lease.c - what keeps a hold alive, in words: the -v reports of an
 * acquisition and a release (as flock -v says how long the lock took), and
 * the status line of a lock with no lease running out.
 *
 * A hold has a fixed lease (-l), a lease the client renews (the URL's
 * lease=, or -L), or, on a session store (DLOCK_CAP_SESSION), lives
 * with the client's session with the store, kept alive as long as dlock
 * runs: what a user needs to know is how long a killed holder would block
 * the others. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The library's default of lease= (dlock.h, dlock_client_open). */
#define LIBRARY_DEFAULT_LEASE_MS 30000

int64_t cli_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* "30s", "1m", "250ms" */
static void duration_text(int64_t ms, char *buf, size_t n)
{
    if (ms % 3600000 == 0)
        snprintf(buf, n, "%" PRId64 "h", ms / 3600000);
    else if (ms % 60000 == 0)
        snprintf(buf, n, "%" PRId64 "m", ms / 60000);
    else if (ms % 1000 == 0)
        snprintf(buf, n, "%" PRId64 "s", ms / 1000);
    else
        snprintf(buf, n, "%" PRId64 "ms", ms);
}

/* "2.3 ms", "1.520 s" */
static void elapsed_text(int64_t us, char *buf, size_t n)
{
    if (us < 1000000)
        snprintf(buf, n, "%.1f ms", (double) us / 1000);
    else
        snprintf(buf, n, "%.3f s", (double) us / 1000000);
}

/* A duration option of the client (the command line's, else url's), or
 * fallback when it has none (or a bad one: the client would not have
 * opened). */
static int64_t url_duration(const char *url, const char *key, int64_t fallback)
{
    char text[64];
    size_t len;
    int64_t ms;
    const char *value = cli_client_option(url, key, &len);

    if (value == NULL || len >= sizeof text)
        return fallback;
    memcpy(text, value, len);
    text[len] = '\0';
    return dlock_parse_duration(text, &ms) == DLOCK_OK ? ms : fallback;
}

/* The names and fences of l: "lock 'x' ... fence 17", the kind named
 * ("read lock 'x'", "semaphore 'x' ... (2 of 3 permits)"), or, for a
 * multi-lock, each name with its own. */
static void print_what(const dlock_lock *l, const cli_kind *k, const char *verb, const char *took)
{
    size_t n = dlock_lock_members(l);
    unsigned f = k->flags;

    if (n <= 1) {
        const char *noun = f & DLOCK_SEMAPHORE ? "semaphore"
                           : f & DLOCK_READ    ? "read lock"
                           : f & DLOCK_WRITE   ? "write lock"
                           : f & DLOCK_FAIR    ? "fair lock"
                                               : "lock";
        char permits[64] = "";
        if (f & DLOCK_SEMAPHORE)
            snprintf(permits, sizeof permits, " (%u of %u permits)", k->take, k->permits);
        fprintf(stderr, "dlock: %s '%s' %s%s%s: fence %" PRIu64, noun, dlock_lock_name(l), verb,
                permits, took, dlock_lock_fence(l));
        return;
    }
    fputs("dlock: multi-lock of", stderr);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s '%s'", i > 0 ? "," : "", dlock_lock_name(dlock_lock_member(l, i)));
    fprintf(stderr, " %s%s: fences", verb, took);
    for (size_t i = 0; i < n; i++) {
        const dlock_lock *m = dlock_lock_member(l, i);
        fprintf(stderr, "%s '%s' %" PRIu64, i > 0 ? "," : "", dlock_lock_name(m),
                dlock_lock_fence(m));
    }
}

void cli_report_acquired(dlock_client *c, const dlock_lock *l, const cli_kind *k, const char *url,
                         int64_t fixed_ms, int64_t took_us, int left_held)
{
    char elapsed[32], took[48], lease[32], every[32];
    int64_t renewed_ms = url_duration(url, "lease", LIBRARY_DEFAULT_LEASE_MS);

    elapsed_text(took_us, elapsed, sizeof elapsed);
    snprintf(took, sizeof took, " in %s", elapsed);
    print_what(l, k, "acquired", took);
    if (fixed_ms > 0) {
        duration_text(fixed_ms, lease, sizeof lease);
        fprintf(stderr, "; fixed lease %s, not renewed", lease);
    } else if ((dlock_client_caps(c) & DLOCK_CAP_SESSION) &&
               strcmp(dlock_client_store(c), "ZooKeeper") == 0) {
        /* a ZooKeeper session's timeout is its own option, by default the
         * lease, and the server bounds it */
        duration_text(url_duration(url, "session_timeout", renewed_ms), lease, sizeof lease);
        fprintf(stderr,
                "; held by dlock's %s session (timeout %s asked for, within the server's "
                "bounds), kept alive while dlock runs",
                dlock_client_store(c), lease);
    } else if (dlock_client_caps(c) & DLOCK_CAP_SESSION) {
        /* etcd's session lease, a SQL connection's: the client's lease */
        duration_text(renewed_ms, lease, sizeof lease);
        duration_text(renewed_ms / 3, every, sizeof every);
        fprintf(stderr,
                "; held by dlock's %s session (lease %s, kept alive every %s while dlock runs)",
                dlock_client_store(c), lease, every);
    } else {
        duration_text(renewed_ms, lease, sizeof lease);
        duration_text(renewed_ms / 3, every, sizeof every);
        fprintf(stderr, "; lease %s, renewed every %s", lease, every);
    }
    fprintf(stderr, "%s\n", left_held ? "; left held when dlock exits" : "");
}

void cli_report_released(const dlock_lock *l, const cli_kind *k, int64_t held_us)
{
    char elapsed[32], held[48];

    elapsed_text(held_us, elapsed, sizeof elapsed);
    snprintf(held, sizeof held, " after %s", elapsed);
    print_what(l, k, "released", held);
    fputc('\n', stderr);
}

int cli_held_by_session(unsigned caps, unsigned flags, const dlock_status *st)
{
    /* a lock dlock took has a lease or a session; only a --simple key set
     * by another client (no expiry) has neither */
    return st->held && st->lease_ms < 0 && ((caps & DLOCK_CAP_SESSION) || !(flags & DLOCK_SIMPLE));
}

/* Whether the client's store is one of the SQL stores, whose session modes
 * keep a row lease beside the session's lock (src/backend/mysql/README.md,
 * src/backend/pg/README.md). */
static int sql_store(dlock_client *c, int *mysql)
{
    const char *store = dlock_client_store(c);
    *mysql = strcmp(store, "MariaDB/MySQL") == 0;
    return *mysql || strcmp(store, "PostgreSQL") == 0;
}

void cli_print_lease_left(dlock_client *c, const char *url, unsigned flags, const dlock_status *st)
{
    unsigned caps = dlock_client_caps(c);
    const char *store = dlock_client_store(c);
    size_t len;
    const char *mode = cli_url_option(url, "mode", &len);
    int mysql, row = mode != NULL && len == 3 && strncmp(mode, "row", 3) == 0;

    if (st->lease_ms >= 0) {
        printf("%.3f s", (double) st->lease_ms / 1000);
        if (st->owner[0] == '\0')
            printf(" (the longest shared lease)");
        else if ((caps & DLOCK_CAP_SESSION) && !row && sql_store(c, &mysql))
            /* session mode shows no lease while the holder's connection
             * has the lock: this lease is a holder's without one */
            printf(" (no session holds it now: its holder's connection is gone%s; the name "
                   "frees when this lease ends)",
                   mysql ? ", or it is held in table or row mode"
                         : ", or it is held in table mode");
        return;
    }
    if ((caps & DLOCK_CAP_SESSION) && sql_store(c, &mysql))
        /* a dead holder's session ends at once (a killed process) or within
         * about 1.5 leases (a host gone), and its row lease keeps the name
         * until it ends: up to a lease after its last renewal */
        printf("none (held by its holder's %s session; if the holder dies, the name stays "
               "held until its row lease ends: up to the holder's lease (30 s by default) "
               "after its last renewal)",
               store);
    else if (caps & DLOCK_CAP_SESSION)
        printf("none (held by its holder's %s session: freed within the session timeout if "
               "the holder dies)",
               store);
    else if (!(flags & DLOCK_SIMPLE))
        /* seen from a mode without sessions: another mode's holder, whose
         * row lease keeps the name after its connection ends (a killed
         * holder: up to its lease; "frees when its connection ends" was
         * not so) */
        printf("none (held by a session-mode holder's connection; if the holder dies, the name "
               "stays held until its row lease ends: up to the holder's lease (30 s by "
               "default) after its last renewal)");
    else
        printf("none (never expires)");
}
