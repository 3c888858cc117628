/* SPDX-License-Identifier: MIT */
/* names.c - one name is one lock on every store: the same awkward names
 * (upper case, spaces, '/', ':', braces, '%', dots, a kind's suffix,
 * unicode, emoji, characters ZooKeeper refuses in paths) are taken, listed
 * as given and released on every store, and names whose keys or paths
 * would overlap on some store (`a` and `a/0`; the semaphore `S` and the
 * mutex `S/locks`) are locks of their own. */
#include "conformance.h"

#include <string.h>

/* Names that begin or end with what a store escapes cannot carry the
 * test's prefix (CT_NAME): they are used as they are, and released before
 * the test ends (the server is fresh for each run). */
static const char *const plain[] = {"/lead", "trail/", "}x", "%", ".", "..", "/"};

static const char *const prefixed[] = {"Upper Case",
                                       "with space",
                                       "a/b",
                                       "a//b",
                                       "x:y",
                                       "{acct}:1",
                                       "a{b",
                                       "a}b",
                                       "50%",
                                       "%2F",
                                       "x.rwlock",
                                       "x.semaphore",
                                       "S/locks",
                                       "S/leases",
                                       "d/./e",
                                       "x-lock-0000000001",
                                       "caf\xc3\xa9 \xf0\x9f\x94\x92",
                                       "priv\xee\x80\x80use",
                                       "end\xef\xbf\xbf",
                                       "zookeeper"};

#define NAMES (sizeof plain / sizeof plain[0] + sizeof prefixed / sizeof prefixed[0])

/* What a listing found: how often each of the test's names, and how many
 * other locks. */
typedef struct tally {
    char (*names)[DLOCK_NAME_MAX + 1];
    size_t n;
    int times[NAMES];
    int others;
} tally;

static void count(const char *name, unsigned flags, void *arg)
{
    tally *t = arg;
    for (size_t i = 0; i < t->n; i++) {
        if (flags == 0 && strcmp(t->names[i], name) == 0) {
            t->times[i]++;
            return;
        }
    }
    t->others++;
}

static tally listing(dlock_client *c, const char *prefix, char (*names)[DLOCK_NAME_MAX + 1],
                     size_t n)
{
    tally t = {.names = names, .n = n};
    CHECK_RC(dlock_list(c, prefix, 0, count, &t), DLOCK_OK);
    return t;
}

static int found(const tally *t)
{
    int all = t->others;
    for (size_t i = 0; i < t->n; i++)
        all += t->times[i];
    return all;
}

void ct_awkward_names(void)
{
    dlock_client *c = ct_client(""), *other = ct_client("");
    char names[NAMES][DLOCK_NAME_MAX + 1];
    const char *ptrs[NAMES];
    dlock_lock *locks[NAMES];
    size_t n = 0;

    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        snprintf(names[n++], sizeof names[0], "%s", plain[i]);
    for (size_t i = 0; i < sizeof prefixed / sizeof prefixed[0]; i++)
        snprintf(names[n++], sizeof names[0], "%s", ct_name(prefixed[i]));
    /* every name is taken, and is taken from another client's view */
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = names[i];
        if (dlock_lock_open(c, names[i], 0, &locks[i]) != DLOCK_OK)
            dt_fail(__FILE__, __LINE__, "name '%s' refused: %s", names[i], dlock_errmsg());
        CHECK_RC(dlock_acquire(locks[i], 0), DLOCK_OK);
        CHECK(strcmp(dlock_lock_name(locks[i]), names[i]) == 0);
        dlock_lock *again = ct_lock(other, names[i], 0);
        CHECK_RC(dlock_try_acquire(again), DLOCK_EBUSY);
        dlock_lock_free(again);
    }
    /* listed as given, once each */
    if (ct_has(DLOCK_CAP_LIST)) {
        tally all = listing(c, "", names, n);
        for (size_t i = 0; i < n; i++) {
            if (all.times[i] != 1)
                dt_fail(__FILE__, __LINE__, "'%s' listed %d times", names[i], all.times[i]);
        }
        CHECK_INT(all.others, ==, 0);
        tally under_a = listing(c, ct_name("a"), names, n); /* a/b, a//b, a{b, a}b */
        CHECK_INT(found(&under_a), ==, 4);
        CHECK_INT(under_a.others, ==, 0);
        tally brace = listing(c, "}", names, n);
        CHECK_INT(found(&brace), ==, 1);
        CHECK_INT(brace.times[2], ==, 1); /* }x */
    }
    if (ct_has(DLOCK_CAP_QUERY)) {
        for (size_t i = 0; i < n; i++) {
            dlock_status st;
            CHECK_RC(dlock_query(other, names[i], 0, &st), DLOCK_OK);
            CHECK_INT(st.held, ==, 1);
            CHECK(strcmp(st.owner, dlock_lock_token(locks[i])) == 0);
        }
    }
    for (size_t i = 0; i < n; i++) {
        CHECK_RC(dlock_release(locks[i]), DLOCK_OK);
        dlock_lock_free(locks[i]);
    }
    /* all of them at once, as one multi-lock */
    dlock_lock *m = NULL;
    CHECK_RC(dlock_multi_open(c, ptrs, n, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK);
    CHECK_INT(dlock_lock_members(m), ==, n);
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m);
    if (ct_has(DLOCK_CAP_LIST)) {
        tally none = listing(c, "", names, n);
        CHECK_INT(found(&none), ==, 0);
    }
    dlock_client_close(c);
    dlock_client_close(other);
}

void ct_names_apart(void)
{
    dlock_client *c = ct_client(""), *other = ct_client("");

    /* a name and a longer one under it are two locks: held `a/0` (a path
     * ranked first among `a`'s contenders on ZooKeeper, a key in `a/`'s
     * range on etcd) leaves `a` free, and the other way round */
    dlock_lock *below = ct_lock(c, CT_NAME("a/0"), 0), *above = ct_lock(other, CT_NAME("a"), 0);
    CHECK_RC(dlock_acquire(below, 0), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(above), DLOCK_OK);
    CHECK_RC(dlock_release(below), DLOCK_OK);
    CHECK_RC(dlock_release(above), DLOCK_OK);
    /* a mutex named after another kind's keys: `x.rwlock` beside the
     * read-write lock `x`; `S/locks` and `S/leases` beside the semaphore
     * `S`, whose admission and leases they were on ZooKeeper */
    if (ct_has(DLOCK_CAP_READ_WRITE)) {
        dlock_lock *rw = ct_lock(c, CT_NAME("x"), DLOCK_WRITE);
        dlock_lock *mutex = ct_lock(other, CT_NAME("x.rwlock"), 0);
        CHECK_RC(dlock_acquire(mutex, 0), DLOCK_OK);
        CHECK_RC(dlock_try_acquire(rw), DLOCK_OK);
        CHECK_RC(dlock_release(rw), DLOCK_OK);
        CHECK_RC(dlock_release(mutex), DLOCK_OK);
        dlock_lock_free(rw);
        dlock_lock_free(mutex);
    }
    if (ct_has(DLOCK_CAP_SEMAPHORE)) {
        dlock_lock *sem = NULL;
        dlock_lock *locks = ct_lock(other, CT_NAME("S/locks"), 0);
        dlock_lock *leases = ct_lock(other, CT_NAME("S/leases"), 0);
        CHECK_RC(dlock_semaphore_open(c, CT_NAME("S"), 2, 1, &sem), DLOCK_OK);
        CHECK_RC(dlock_acquire(locks, 0), DLOCK_OK);
        CHECK_RC(dlock_acquire(leases, 0), DLOCK_OK);
        CHECK_RC(dlock_try_acquire(sem), DLOCK_OK);
        if (ct_has(DLOCK_CAP_QUERY)) {
            dlock_status st;
            CHECK_RC(dlock_query(c, CT_NAME("S"), DLOCK_SEMAPHORE, &st), DLOCK_OK);
            CHECK_INT(st.permits_used, ==, 1);
        }
        CHECK_RC(dlock_release(sem), DLOCK_OK);
        CHECK_RC(dlock_release(locks), DLOCK_OK);
        CHECK_RC(dlock_release(leases), DLOCK_OK);
        dlock_lock_free(sem);
        dlock_lock_free(locks);
        dlock_lock_free(leases);
    }
    dlock_lock_free(below);
    dlock_lock_free(above);
    dlock_client_close(c);
    dlock_client_close(other);
}
