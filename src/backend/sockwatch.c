/* SPDX-License-Identifier: MIT */
/* sockwatch.c - the watcher of idle connections' sockets (sockwatch.h). */
#include "sockwatch.h"

#include "../base/clock.h"
#include "board.h"
#include "sockets.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* How long a socket the store could not judge is left out of the watch. */
#define LATER_US 100000

typedef struct entry {
    int fd;
    void *item;
    int64_t skip_until; /* left out until then (LATER) */
} entry;

struct dlock__sockwatch {
    enum dlock__sockwatch_verdict (*check)(void *arg, void *item);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* busy cleared */
    entry *entries;
    size_t n, cap;
    void *busy;   /* the item check() runs for now */
    int wake[2];  /* a byte: the set changed, or stop */
    int started;  /* the thread runs */
    int stopping; /* the thread is to end */
    pthread_t thread;
};

int dlock__sockwatch_new(enum dlock__sockwatch_verdict (*check)(void *arg, void *item), void *arg,
                         dlock__sockwatch **out)
{
    dlock__sockwatch *w = calloc(1, sizeof *w);
    *out = NULL;
    if (w == NULL)
        return -1;
    w->check = check;
    w->arg = arg;
    w->wake[0] = w->wake[1] = -1;
    pthread_mutex_init(&w->mu, NULL);
    dlock__cond_init(&w->cv);
    *out = w;
    return 0;
}

static void poke(dlock__sockwatch *w)
{
    if (w->wake[1] >= 0) {
        ssize_t k = write(w->wake[1], "x", 1);
        (void) k; /* a full pipe is a wake-up already */
    }
}

void dlock__sockwatch_free(dlock__sockwatch *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    int started = w->started;
    poke(w);
    pthread_mutex_unlock(&w->mu);
    if (started)
        pthread_join(w->thread, NULL);
    if (w->wake[0] >= 0) {
        close(w->wake[0]);
        close(w->wake[1]);
    }
    free(w->entries);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

static entry *find(dlock__sockwatch *w, const void *item)
{
    for (size_t i = 0; i < w->n; i++) {
        if (w->entries[i].item == item)
            return &w->entries[i];
    }
    return NULL;
}

/* One round: poll the sockets not left out (and the wake pipe), then ask
 * check() of each that is readable or hung up. With w->mu held. */
static void round_locked(dlock__sockwatch *w, struct pollfd *fds, void **items, size_t cap)
{
    size_t k = 1;
    int64_t now = dlock__now_us(), next = DLOCK__NEVER;
    fds[0] = (struct pollfd){.fd = w->wake[0], .events = POLLIN};
    for (size_t i = 0; i < w->n && k < cap; i++) {
        if (w->entries[i].skip_until > now) {
            if (w->entries[i].skip_until < next)
                next = w->entries[i].skip_until;
            continue;
        }
        fds[k] = (struct pollfd){.fd = w->entries[i].fd, .events = POLLIN};
        items[k++] = w->entries[i].item;
    }
    int timeout = next == DLOCK__NEVER ? -1 : (int) ((next - now + 999) / 1000);
    pthread_mutex_unlock(&w->mu);
    int ready = poll(fds, k, timeout);
    if (ready > 0 && (fds[0].revents & POLLIN)) {
        char buf[64];
        while (read(w->wake[0], buf, sizeof buf) > 0)
            ;
    }
    pthread_mutex_lock(&w->mu);
    for (size_t i = 1; ready > 0 && i < k && !w->stopping; i++) {
        if (fds[i].revents == 0 || find(w, items[i]) == NULL)
            continue; /* quiet, or removed meanwhile (its fd may be another's now) */
        w->busy = items[i];
        pthread_mutex_unlock(&w->mu);
        enum dlock__sockwatch_verdict v = w->check(w->arg, items[i]);
        pthread_mutex_lock(&w->mu);
        w->busy = NULL;
        pthread_cond_broadcast(&w->cv);
        entry *e = v == DLOCK__SW_LATER ? find(w, items[i]) : NULL;
        if (e != NULL)
            e->skip_until = dlock__now_us() + LATER_US;
    }
}

static void *watch_main(void *arg)
{
    dlock__sockwatch *w = arg;
    struct pollfd *fds = NULL;
    void **items = NULL;
    size_t cap = 0;

    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        if (cap < w->n + 1) {
            size_t want = w->n + 16;
            struct pollfd *f = realloc(fds, want * sizeof *f);
            void **it = f != NULL ? realloc(items, want * sizeof *it) : NULL;
            if (f != NULL)
                fds = f;
            if (it != NULL) {
                items = it;
                cap = want;
            }
        }
        if (cap == 0) { /* no memory: the renewal's pings still see closed connections */
            pthread_mutex_unlock(&w->mu);
            dlock__sleep_until(dlock__now_us() + LATER_US);
            pthread_mutex_lock(&w->mu);
            continue;
        }
        round_locked(w, fds, items, cap);
    }
    pthread_mutex_unlock(&w->mu);
    free(fds);
    free(items);
    return NULL;
}

/* With w->mu held: the wake pipe and the thread, made once. */
static int start_locked(dlock__sockwatch *w)
{
    if (w->started)
        return 0;
    if (w->wake[0] < 0) {
        if (pipe(w->wake) != 0)
            return -1;
        for (int i = 0; i < 2; i++) {
            dlock__set_cloexec(w->wake[i]);
            fcntl(w->wake[i], F_SETFL, fcntl(w->wake[i], F_GETFL) | O_NONBLOCK);
        }
    }
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0)
        return -1;
    w->started = 1;
    return 0;
}

void dlock__sockwatch_add(dlock__sockwatch *w, int fd, void *item)
{
    if (w == NULL || fd < 0)
        return;
    pthread_mutex_lock(&w->mu);
    if (!w->stopping && start_locked(w) == 0) {
        if (w->n == w->cap) {
            size_t want = w->cap ? 2 * w->cap : 16;
            entry *e = realloc(w->entries, want * sizeof *e);
            if (e != NULL) {
                w->entries = e;
                w->cap = want;
            }
        }
        if (w->n < w->cap) {
            w->entries[w->n++] = (entry){.fd = fd, .item = item};
            poke(w);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

void dlock__sockwatch_remove(dlock__sockwatch *w, void *item)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    entry *e = find(w, item);
    if (e != NULL) {
        *e = w->entries[--w->n];
        poke(w); /* the poll set is made again without it */
    }
    int self = w->started && pthread_equal(pthread_self(), w->thread);
    while (!self && w->busy == item)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}
