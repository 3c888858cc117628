/* SPDX-License-Identifier: MIT */
/* local_queue.c - see local_queue.h. A small hash table of lock keys, each
 * with the tickets of its local waiters in arrival order; the first ticket
 * has the turn. */
#include "local_queue.h"

#include "../base/clock.h"
#include "../base/error.h"
#include "dlock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 64

typedef struct dlock__lq_entry {
    struct dlock__lq_entry *next;
    char *key; /* kind + name */
    dlock__lq_ticket *head, *tail;
    unsigned count;
} lq_entry;

struct dlock__lq {
    pthread_mutex_t mu;
    unsigned max_waiters;
    lq_entry *buckets[BUCKETS];
};

int dlock__lq_new(unsigned max_waiters, dlock__lq **out)
{
    dlock__lq *q = calloc(1, sizeof *q);

    *out = NULL;
    if (q == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    q->max_waiters = max_waiters;
    pthread_mutex_init(&q->mu, NULL);
    *out = q;
    return DLOCK_OK;
}

void dlock__lq_free(dlock__lq *q)
{
    if (q == NULL)
        return;
    for (unsigned i = 0; i < BUCKETS; i++) {
        while (q->buckets[i] != NULL) {
            lq_entry *e = q->buckets[i];
            q->buckets[i] = e->next;
            free(e->key);
            free(e);
        }
    }
    pthread_mutex_destroy(&q->mu);
    free(q);
}

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    while (*s != '\0')
        h = (h ^ (unsigned char) *s++) * 16777619u;
    return h % BUCKETS;
}

/* With mu held: the entry for key, made if absent (NULL if out of memory). */
static lq_entry *find(dlock__lq *q, const char *key)
{
    unsigned b = hash(key);
    for (lq_entry *e = q->buckets[b]; e != NULL; e = e->next) {
        if (strcmp(e->key, key) == 0)
            return e;
    }
    lq_entry *e = calloc(1, sizeof *e);
    if (e == NULL || (e->key = strdup(key)) == NULL) {
        free(e);
        return NULL;
    }
    e->next = q->buckets[b];
    q->buckets[b] = e;
    return e;
}

/* With mu held: takes t out of its entry, forgetting the entry if empty. */
static void remove_ticket(dlock__lq *q, dlock__lq_ticket *t)
{
    lq_entry *e = t->entry;
    dlock__lq_ticket *prev = NULL;

    for (dlock__lq_ticket *p = e->head; p != NULL; prev = p, p = p->next) {
        if (p != t)
            continue;
        if (prev != NULL)
            prev->next = p->next;
        else
            e->head = p->next;
        if (e->tail == p)
            e->tail = prev;
        e->count--;
        break;
    }
    if (e->head != NULL)
        pthread_cond_signal(&e->head->cv); /* its turn, if it was not already */
    if (e->count > 0)
        return;
    for (lq_entry **p = &q->buckets[hash(e->key)]; *p != NULL; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            free(e->key);
            free(e);
            return;
        }
    }
}

int dlock__lq_enter(dlock__lq *q, int kind, const char *name, int64_t deadline_us,
                    dlock__lq_cancelled cancelled, void *arg, dlock__lq_ticket *t)
{
    char key[DLOCK_NAME_MAX + 16];
    int rc = DLOCK_OK;

    snprintf(key, sizeof key, "%d:%s", kind, name);
    pthread_mutex_lock(&q->mu);
    lq_entry *e = find(q, key);
    if (e == NULL) {
        pthread_mutex_unlock(&q->mu);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    if (q->max_waiters > 0 && e->count > q->max_waiters) {
        rc = dlock__fail(DLOCK_EQUEUEFULL,
                         "lock '%s': %u threads of this client wait for it already (the limit "
                         "is %u)",
                         name, e->count - 1, q->max_waiters);
        pthread_mutex_unlock(&q->mu);
        return rc;
    }
    dlock__cond_init(&t->cv);
    t->entry = e;
    t->next = NULL;
    if (e->tail != NULL)
        e->tail->next = t;
    else
        e->head = t;
    e->tail = t;
    e->count++;
    while (e->head != t) {
        if (cancelled(arg)) {
            rc = dlock__fail(DLOCK_ECANCELED, "wait for lock '%s' cancelled", name);
            break;
        }
        if (dlock__now_us() >= deadline_us) {
            rc = dlock__fail(DLOCK_ETIMEDOUT, "lock '%s' is still held by someone else", name);
            break;
        }
        struct timespec ts = dlock__timespec(deadline_us);
        pthread_cond_timedwait(&t->cv, &q->mu, &ts);
    }
    if (rc != DLOCK_OK) {
        remove_ticket(q, t);
        pthread_cond_destroy(&t->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void dlock__lq_leave(dlock__lq *q, dlock__lq_ticket *t)
{
    pthread_mutex_lock(&q->mu);
    remove_ticket(q, t);
    pthread_mutex_unlock(&q->mu);
    pthread_cond_destroy(&t->cv);
}

unsigned dlock__lq_waiting(dlock__lq *q, int kind, const char *name)
{
    char key[DLOCK_NAME_MAX + 16];
    unsigned n = 0;

    snprintf(key, sizeof key, "%d:%s", kind, name);
    pthread_mutex_lock(&q->mu);
    for (lq_entry *e = q->buckets[hash(key)]; e != NULL; e = e->next) {
        if (strcmp(e->key, key) == 0)
            n = e->count;
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

void dlock__lq_wake(dlock__lq *q)
{
    pthread_mutex_lock(&q->mu);
    for (unsigned i = 0; i < BUCKETS; i++) {
        for (lq_entry *e = q->buckets[i]; e != NULL; e = e->next) {
            for (dlock__lq_ticket *t = e->head; t != NULL; t = t->next)
                pthread_cond_signal(&t->cv);
        }
    }
    pthread_mutex_unlock(&q->mu);
}
