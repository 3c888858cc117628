/* SPDX-License-Identifier: MIT */
/* hot_name.c - see hot_name.h. */
#define _GNU_SOURCE
#include "hot_name.h"

#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

enum { HAMMERS = 4, HOLD_US = 30000, ROUNDS_EACH = 8 };

/* A client in the loops. */
typedef struct hammer {
    dlock_client *c;
    atomic_int *stop;
    atomic_long rounds;
    _Atomic int rc; /* the first failure, or DLOCK_OK */
} hammer;

/* Takes "hot", works under it for a moment and gives it back, until told
 * to stop. */
static void *hammer_loop(void *arg)
{
    hammer *h = arg;
    dlock_lock *l = dt_lock(h->c, "hot", 0);
    while (!atomic_load(h->stop) && h->rc == DLOCK_OK) {
        h->rc = dlock_acquire(l, 20000);
        if (h->rc == DLOCK_OK) {
            atomic_fetch_add(&h->rounds, 1);
            usleep(HOLD_US); /* the work done under the lock */
            h->rc = dlock_release(l);
        }
    }
    dlock_lock_free(l);
    return NULL;
}

static long rounds_sum(hammer *hs)
{
    long sum = 0;
    for (int i = 0; i < HAMMERS; i++)
        sum += atomic_load(&hs[i].rounds);
    return sum;
}

/* The hammers served in turn: over ROUNDS_EACH rounds each, the one served
 * least got at least half as many as the one served most (a releaser that
 * took the name straight back used to get most of them). */
static void hammers_take_turns(hammer *hs)
{
    long before[HAMMERS], least = -1, most = 0, goal = HAMMERS * ROUNDS_EACH;
    for (int i = 0; i < HAMMERS; i++) {
        before[i] = atomic_load(&hs[i].rounds);
        goal += before[i];
    }
    DT_WAIT_UNTIL(rounds_sum(hs) >= goal, 20000);
    for (int i = 0; i < HAMMERS; i++) {
        long n = atomic_load(&hs[i].rounds) - before[i];
        least = least < 0 || n < least ? n : least;
        most = n > most ? n : most;
    }
    printf("rounds of %d hammers over %d: least %ld, most %ld\n", HAMMERS, HAMMERS * ROUNDS_EACH,
           least, most);
    CHECK_INT(least * 2, >=, most);
}

/* How long a wait for l takes beside the hammers (its budget: 5 s). */
static int64_t served_in(dlock_lock *l, const char *what)
{
    int64_t t0 = dt_now_ms();
    int rc = dlock_acquire(l, 5000);
    int64_t took = dt_now_ms() - t0;
    printf("%s beside %d clients in tight loops: %s after %lld ms\n", what, HAMMERS,
           dlock_strerror(rc), (long long) took);
    CHECK_RC(rc, DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    return took;
}

void dt_hot_name_serves_waiters(const char *url, const char *options)
{
    atomic_int stop = 0;
    hammer hs[HAMMERS];
    pthread_t ts[HAMMERS];
    for (int i = 0; i < HAMMERS; i++) {
        hs[i] = (hammer){.c = dt_client(url, options), .stop = &stop, .rc = DLOCK_OK};
        CHECK(pthread_create(&ts[i], NULL, hammer_loop, &hs[i]) == 0);
    }
    DT_WAIT_UNTIL(rounds_sum(hs) >= HAMMERS, 10000);

    dlock_client *c = dt_client(url, options);
    dlock_lock *plain = dt_lock(c, "hot", 0), *multi = NULL;
    const char *names[] = {"hot", "other"};
    CHECK_RC(dlock_multi_open(c, names, 2, 0, &multi), DLOCK_OK);
    int64_t took_plain = served_in(plain, "a plain waiter");
    int64_t took_multi = served_in(multi, "a multi-lock waiter (hot, other)");
    hammers_take_turns(hs);
    atomic_store(&stop, 1);
    for (int i = 0; i < HAMMERS; i++) {
        pthread_join(ts[i], NULL);
        CHECK_RC(hs[i].rc, DLOCK_OK);
        dlock_client_close(hs[i].c);
    }
    CHECK_INT(took_plain, <, 3000);
    CHECK_INT(took_multi, <, 3000);
    dlock_lock_free(plain);
    dlock_lock_free(multi);
    dlock_client_close(c);
}
