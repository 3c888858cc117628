/* SPDX-License-Identifier: MIT */
/* who.c - who holds a lock (dlock_query_holders, the label= option) and
 * which locks there are (dlock_list). */
#include "conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define MAX_SEEN 16

typedef struct seen_holder {
    char owner[80], host[256], label[80];
    unsigned count;
    long pid;
    int64_t started_ms;
} seen_holder;

typedef struct seen_holders {
    seen_holder h[MAX_SEEN];
    int n;
} seen_holders;

static void keep_holder(const dlock_holder *h, void *arg)
{
    seen_holders *all = arg;

    CHECK(h->owner != NULL && h->host != NULL && h->label != NULL);
    if (all->n == MAX_SEEN)
        return;
    seen_holder *s = &all->h[all->n++];
    snprintf(s->owner, sizeof s->owner, "%s", h->owner);
    snprintf(s->host, sizeof s->host, "%s", h->host);
    snprintf(s->label, sizeof s->label, "%s", h->label);
    s->count = h->count;
    s->pid = h->pid;
    s->started_ms = h->started_ms;
}

static seen_holders holders_of(dlock_client *c, const char *name, unsigned flags)
{
    seen_holders all = {0};
    CHECK_RC(dlock_query_holders(c, name, flags, keep_holder, &all), DLOCK_OK);
    return all;
}

static const seen_holder *holder_with(const seen_holders *all, const dlock_lock *l)
{
    for (int i = 0; i < all->n; i++) {
        if (strcmp(all->h[i].owner, dlock_lock_token(l)) == 0)
            return &all->h[i];
    }
    dt_fail(__FILE__, __LINE__, "no holder has the owner token %s", dlock_lock_token(l));
    return NULL;
}

/* Fails the test unless the store names l's current token among the
 * holders of name. */
static void holder_in(dlock_client *c, const char *name, unsigned flags, const dlock_lock *l)
{
    seen_holders all = holders_of(c, name, flags);
    (void) holder_with(&all, l);
}

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* A holder this process's client recorded: its host, pid, start, label. */
static void check_mine(const seen_holder *h, int64_t opened_ms, const char *label)
{
    char host[256];

    CHECK(gethostname(host, sizeof host) == 0);
    CHECK(strcmp(h->host, host) == 0);
    CHECK_INT(h->pid, ==, (long) getpid());
    CHECK_INT(h->started_ms, >=, opened_ms - 1000);
    CHECK_INT(h->started_ms, <=, opened_ms + 1000);
    CHECK(strcmp(h->label, label) == 0);
}

/* The holder the store names, hold after hold of one handle: each hold
 * has an owner token of its own (a store that comes back with an older
 * state must not bring an earlier hold back as the current one), and the
 * store names the current one, after a release and after a wait that
 * failed. Every kind the store has. */
static void owner_each_hold(dlock_client *c, dlock_client *other, dlock_lock *l, dlock_lock *rival,
                            const char *name, unsigned flags)
{
    char before[80];

    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    snprintf(before, sizeof before, "%s", dlock_lock_token(l));
    holder_in(other, name, flags, l);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    CHECK(strcmp(dlock_lock_token(l), before) != 0);
    holder_in(other, name, flags, l);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    /* a wait that failed behind another holder, then a hold */
    CHECK_RC(dlock_acquire(rival, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 100), DLOCK_ETIMEDOUT);
    CHECK_RC(dlock_release(rival), DLOCK_OK);
    CHECK_RC(dlock_acquire(l, 0), DLOCK_OK);
    holder_in(c, name, flags, l);
    CHECK_RC(dlock_release(l), DLOCK_OK);
}

void ct_owner_per_hold(void)
{
    dlock_client *c = ct_client(""), *other = ct_client("");
    const char *name = CT_NAME("m");
    dlock_lock *l = ct_lock(c, name, 0), *rival = ct_lock(other, name, 0);
    owner_each_hold(c, other, l, rival, name, 0);
    dlock_lock_free(l);
    dlock_lock_free(rival);
    if (ct_has(DLOCK_CAP_READ_WRITE)) {
        const char *rw = CT_NAME("rw");
        l = ct_lock(c, rw, DLOCK_WRITE);
        rival = ct_lock(other, rw, DLOCK_READ);
        owner_each_hold(c, other, l, rival, rw, DLOCK_WRITE);
        dlock_lock_free(l);
        dlock_lock_free(rival);
    }
    if (ct_has(DLOCK_CAP_SEMAPHORE)) {
        const char *sem = CT_NAME("sem");
        CHECK_RC(dlock_semaphore_open(c, sem, 2, 1, &l), DLOCK_OK);
        CHECK_RC(dlock_semaphore_open(other, sem, 2, 2, &rival), DLOCK_OK);
        owner_each_hold(c, other, l, rival, sem, DLOCK_SEMAPHORE);
        dlock_lock_free(l);
        dlock_lock_free(rival);
    }
    dlock_client_close(c);
    dlock_client_close(other);
}

void ct_who_holds(void)
{
    int64_t opened_ms = wall_ms();
    dlock_client *c = ct_client("?label=conformance%20run%20%231"), *other = ct_client("");
    const char *name = CT_NAME("m");
    dlock_lock *a = ct_lock(c, name, 0);
    seen_holders all;

    all = holders_of(other, name, 0);
    CHECK_INT(all.n, ==, 0); /* free */
    CHECK_RC(dlock_acquire(a, 0), DLOCK_OK);
    all = holders_of(other, name, 0);
    CHECK_INT(all.n, ==, 1);
    const seen_holder *h = holder_with(&all, a);
    if (h != NULL) {
        CHECK_INT(h->count, ==, 1);
        check_mine(h, opened_ms, "conformance run #1");
    }
    /* the token starts with the client's part: two handles of one client
     * share it, and differ after it */
    dlock_lock *a2 = ct_lock(c, CT_NAME("m2"), 0);
    CHECK(strncmp(dlock_lock_token(a), dlock_lock_token(a2), 16) == 0);
    CHECK(strcmp(dlock_lock_token(a), dlock_lock_token(a2)) != 0);
    dlock_lock_free(a2);
    CHECK_RC(dlock_release(a), DLOCK_OK);
    all = holders_of(other, name, 0);
    CHECK_INT(all.n, ==, 0);

    if (ct_has(DLOCK_CAP_READ_WRITE)) {
        const char *rw = CT_NAME("rw");
        dlock_lock *r1 = ct_lock(c, rw, DLOCK_READ), *r2 = ct_lock(other, rw, DLOCK_READ);
        CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
        CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK);
        all = holders_of(other, rw, DLOCK_WRITE);
        CHECK_INT(all.n, ==, 2);
        if ((h = holder_with(&all, r1)) != NULL)
            check_mine(h, opened_ms, "conformance run #1");
        if ((h = holder_with(&all, r2)) != NULL)
            check_mine(h, opened_ms, ""); /* no label */
        CHECK_RC(dlock_release(r1), DLOCK_OK);
        CHECK_RC(dlock_release(r2), DLOCK_OK);
        dlock_lock *w = ct_lock(other, rw, DLOCK_WRITE);
        CHECK_RC(dlock_acquire(w, 0), DLOCK_OK);
        all = holders_of(c, rw, DLOCK_READ);
        CHECK_INT(all.n, ==, 1);
        if ((h = holder_with(&all, w)) != NULL)
            CHECK_INT(h->count, ==, 1);
        CHECK_RC(dlock_release(w), DLOCK_OK);
        dlock_lock_free(r1);
        dlock_lock_free(r2);
        dlock_lock_free(w);
    }
    if (ct_has(DLOCK_CAP_SEMAPHORE)) {
        const char *sem = CT_NAME("sem");
        dlock_lock *s2 = NULL, *s1 = NULL;
        CHECK_RC(dlock_semaphore_open(c, sem, 5, 2, &s2), DLOCK_OK);
        CHECK_RC(dlock_semaphore_open(other, sem, 5, 1, &s1), DLOCK_OK);
        CHECK_RC(dlock_acquire(s2, 0), DLOCK_OK);
        CHECK_RC(dlock_acquire(s1, 0), DLOCK_OK);
        all = holders_of(other, sem, DLOCK_SEMAPHORE);
        CHECK_INT(all.n, ==, 2);
        if ((h = holder_with(&all, s2)) != NULL)
            CHECK_INT(h->count, ==, 2);
        if ((h = holder_with(&all, s1)) != NULL)
            CHECK_INT(h->count, ==, 1);
        CHECK_RC(dlock_release(s2), DLOCK_OK);
        CHECK_RC(dlock_release(s1), DLOCK_OK);
        dlock_lock_free(s1);
        dlock_lock_free(s2);
    }

    /* labels: UTF-8 text without control characters, 63 bytes at most */
    dlock_client *bad = NULL;
    CHECK_RC(dlock_client_open(ct_url("?label=a%01b"), &bad), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "label") != NULL);
    CHECK_RC(dlock_client_open(ct_url("?label=%C2%85"), &bad), DLOCK_EINVAL);
    CHECK_RC(dlock_client_open(ct_url("?label=%FF"), &bad), DLOCK_EINVAL);
    char url[256], long_label[80];
    memset(long_label, 'x', 64);
    long_label[64] = '\0';
    snprintf(url, sizeof url, "?label=%s", long_label);
    CHECK_RC(dlock_client_open(ct_url(url), &bad), DLOCK_EINVAL);
    long_label[63] = '\0';
    snprintf(url, sizeof url, "?label=%s", long_label);
    CHECK_RC(dlock_client_open(ct_url(url), &bad), DLOCK_OK);
    dlock_client_close(bad);
    /* bad calls */
    CHECK_RC(dlock_query_holders(c, "", 0, keep_holder, &all), DLOCK_EINVAL);
    CHECK_RC(dlock_query_holders(c, name, 0, NULL, NULL), DLOCK_EINVAL);
    CHECK_RC(dlock_query_holders(NULL, name, 0, keep_holder, &all), DLOCK_EINVAL);
    dlock_lock_free(a);
    dlock_client_close(c);
    dlock_client_close(other);
}

/* ---------------------------------------------------------------- list */

typedef struct seen_names {
    char name[MAX_SEEN][DLOCK_NAME_MAX + 1];
    unsigned flags[MAX_SEEN];
    int n;
} seen_names;

static void keep_name(const char *name, unsigned flags, void *arg)
{
    seen_names *all = arg;
    if (all->n < MAX_SEEN) {
        snprintf(all->name[all->n], sizeof all->name[0], "%s", name);
        all->flags[all->n++] = flags;
    }
}

static seen_names names_under(dlock_client *c, const char *prefix)
{
    seen_names all = {0};
    CHECK_RC(dlock_list(c, prefix, 0, keep_name, &all), DLOCK_OK);
    return all;
}

/* 1 if name (CT_NAME'd) with flags is in all, exactly once. */
static int listed(const seen_names *all, const char *name, unsigned flags)
{
    int times = 0;
    for (int i = 0; i < all->n; i++)
        times += strcmp(all->name[i], ct_name(name)) == 0 && all->flags[i] == flags;
    return times == 1;
}

void ct_list_locks(void)
{
    dlock_client *c = ct_client(""), *other = ct_client("");
    dlock_lock *abc = ct_lock(c, CT_NAME("a/b/c"), 0), *abb = ct_lock(c, CT_NAME("a/bb"), 0);
    dlock_lock *ab = ct_lock(c, CT_NAME("ab"), 0), *rw = NULL, *sem = NULL;
    dlock_lock *waiter = ct_lock(other, CT_NAME("a/b/c"), 0);
    int expect_a = 2;
    seen_names all;
    ct_waiter w;

    all = names_under(c, CT_NAME(""));
    CHECK_INT(all.n, ==, 0); /* nothing yet: handles send nothing */
    CHECK_RC(dlock_acquire(abc, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(abb, 0), DLOCK_OK);
    CHECK_RC(dlock_acquire(ab, 0), DLOCK_OK);
    if (ct_has(DLOCK_CAP_READ_WRITE)) {
        rw = ct_lock(c, CT_NAME("a/rw"), DLOCK_READ);
        CHECK_RC(dlock_acquire(rw, 0), DLOCK_OK);
        expect_a++;
    }
    if (ct_has(DLOCK_CAP_SEMAPHORE)) {
        CHECK_RC(dlock_semaphore_open(c, CT_NAME("a/sem"), 3, 1, &sem), DLOCK_OK);
        CHECK_RC(dlock_acquire(sem, 0), DLOCK_OK);
        expect_a++;
    }

    all = names_under(c, CT_NAME("a/"));
    CHECK_INT(all.n, ==, expect_a);
    CHECK(listed(&all, "a/b/c", 0));
    CHECK(listed(&all, "a/bb", 0));
    if (rw != NULL)
        CHECK(listed(&all, "a/rw", DLOCK_WRITE));
    if (sem != NULL)
        CHECK(listed(&all, "a/sem", DLOCK_SEMAPHORE));
    all = names_under(c, CT_NAME("a/b"));
    CHECK_INT(all.n, ==, 2);
    CHECK(listed(&all, "a/b/c", 0) && listed(&all, "a/bb", 0));
    all = names_under(c, CT_NAME(""));
    CHECK_INT(all.n, ==, expect_a + 1);
    CHECK(listed(&all, "ab", 0));
    all = names_under(c, CT_NAME("a/b/c"));
    CHECK_INT(all.n, ==, 1);
    all = names_under(c, CT_NAME("a/b/c/"));
    CHECK_INT(all.n, ==, 0);
    /* every lock listed can be queried with the flags it came with */
    all = names_under(c, CT_NAME(""));
    for (int i = 0; i < all.n; i++) {
        dlock_status st;
        CHECK_RC(dlock_query(c, all.name[i], all.flags[i], &st), DLOCK_OK);
        CHECK_INT(st.held, ==, 1);
    }
    /* at most limit */
    seen_names some = {0};
    CHECK_RC(dlock_list(c, CT_NAME(""), 2, keep_name, &some), DLOCK_OK);
    CHECK_INT(some.n, ==, 2);

    /* a released lock goes; one handed to its waiter stays; none is left
     * when nobody holds or waits */
    CHECK_RC(dlock_release(abb), DLOCK_OK);
    all = names_under(c, CT_NAME("a/b"));
    CHECK_INT(all.n, ==, 1);
    CHECK(listed(&all, "a/b/c", 0));
    ct_wait_start(&w, waiter, 20000);
    if (ct_has(DLOCK_CAP_QUERY))
        DT_WAIT_UNTIL(ct_waiters(c, CT_NAME("a/b/c"), 0) == 1, 5000);
    CHECK_RC(dlock_release(abc), DLOCK_OK);
    CHECK_RC(ct_wait_join(&w), DLOCK_OK);
    all = names_under(c, CT_NAME("a/b"));
    CHECK(listed(&all, "a/b/c", 0));
    CHECK_RC(dlock_release(waiter), DLOCK_OK);
    CHECK_RC(dlock_release(ab), DLOCK_OK);
    if (rw != NULL)
        CHECK_RC(dlock_release(rw), DLOCK_OK);
    if (sem != NULL)
        CHECK_RC(dlock_release(sem), DLOCK_OK);
    all = names_under(c, CT_NAME(""));
    CHECK_INT(all.n, ==, 0);

    /* bad calls */
    CHECK_RC(dlock_list(c, "a\001", 0, keep_name, &all), DLOCK_EINVAL);
    CHECK_RC(dlock_list(c, "", 0, NULL, NULL), DLOCK_EINVAL);
    CHECK_RC(dlock_list(NULL, "", 0, keep_name, &all), DLOCK_EINVAL);
    dlock_lock_free(abc);
    dlock_lock_free(abb);
    dlock_lock_free(ab);
    dlock_lock_free(waiter);
    dlock_lock_free(rw);
    dlock_lock_free(sem);
    dlock_client_close(c);
    dlock_client_close(other);
}

void ct_ignore_name(const char *name, unsigned flags, void *arg)
{
    (void) name;
    (void) flags;
    (void) arg;
}
