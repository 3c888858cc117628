/* SPDX-License-Identifier: MIT */
/* listen.c - table mode's wake-ups: LISTEN/NOTIFY (pg.h, README.md).
 *
 * A release of a lock's row, and a forced unlock, notify the channel
 * DLOCK__PGL_CHANNEL with the lock's tag (the first bytes of its name, in
 * hex: sqltable.c) in the same statement, so the notice leaves with the
 * commit. Each client listens on one connection of its own (outside the
 * pool, no session: it holds nothing), made when its first waiter parks.
 * A waiter that found the lock held registers its token under the lock's
 * tag and parks on the board; the waiting threads read the connection one
 * at a time (the reader role, board.h) and post a recheck to every waiter
 * of the tag they read, which then asks the table again; a release that
 * handed the row to the oldest waiter names it after the tag, and only
 * that waiter asks again (the others are behind a live holder still). A
 * notice for a waiter that left is ignored; a tag shared by two names
 * (their first 32 bytes alike) costs a needless recheck only.
 *
 * Nothing is granted by a notice (the table decides: first in line, or
 * the row already handed over), so a lost notice costs time, not safety:
 * a waiter parks at most until the holder's lease ends (a hand-over's
 * lease ends with the waiter's row), and when the connection breaks every
 * waiter asks again and the next one connects anew. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "pg.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often a reader looks up from the socket for wake-ups posted by
 * others (a cancel, a recheck from a heartbeat). */
#define READER_SLICE_US 50000

enum listen_state { LISTEN_DOWN, LISTEN_CONNECTING, LISTEN_READY };

typedef struct watch {
    struct watch *next;
    char tag[DLOCK__PGL_TAG_MAX];
    char token[];
} watch;

struct dlock__pglisten {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* state changes */
    enum listen_state state;
    PGconn *pg;  /* READY: listening (read by the reader only) */
    int reading; /* a waiter holds the reader role */
    watch *watches;
    dlock__pgstore *p;
};

int dlock__pgl_new(dlock__pgstore *p, dlock__pglisten **out)
{
    dlock__pglisten *s = calloc(1, sizeof *s);

    *out = NULL;
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    s->p = p;
    pthread_mutex_init(&s->mu, NULL);
    dlock__cond_init(&s->cv);
    *out = s;
    return DLOCK_OK;
}

void dlock__pgl_free(dlock__pglisten *s)
{
    if (s == NULL)
        return;
    if (s->pg != NULL)
        PQfinish(s->pg);
    while (s->watches != NULL) {
        watch *w = s->watches;
        s->watches = w->next;
        free(w);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int dlock__pgl_ready(dlock__pglisten *s)
{
    pthread_mutex_lock(&s->mu);
    int ready = s->state == LISTEN_READY;
    pthread_mutex_unlock(&s->mu);
    return ready;
}

/* Connects and listens; the connection, or NULL (detail recorded). */
static PGconn *listen_on(dlock__pgstore *p, int64_t deadline_us, int *code)
{
    PGconn *pg = PQconnectStartParams(p->keys, p->vals, 0);
    if (pg == NULL) {
        *code = dlock__fail(DLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (PQstatus(pg) != CONNECTION_BAD && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
        int64_t now = dlock__now_us();
        if (now >= deadline_us)
            break;
        struct pollfd pfd = {.fd = PQsocket(pg),
                             .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT};
        int n = poll(&pfd, 1, (int) ((deadline_us - now + 999) / 1000));
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0)
            st = PQconnectPoll(pg);
    }
    if (st != PGRES_POLLING_OK || PQstatus(pg) != CONNECTION_OK) {
        *code = dlock__fail(DLOCK_EUNREACHABLE, "%s: the wake-up connection: %s", p->label,
                            st == PGRES_POLLING_OK || PQstatus(pg) == CONNECTION_BAD
                                ? PQerrorMessage(pg)
                                : "not made in time");
        PQfinish(pg);
        return NULL;
    }
    /* it only listens: the server must not end it as an idle session */
    int ok = PQsendQuery(pg, "SET idle_session_timeout = 0; LISTEN " DLOCK__PGL_CHANNEL) == 1;
    char why[300] = "no answer in time";
    for (int done = 0; ok && !done;) {
        while (ok && !PQisBusy(pg)) {
            PGresult *r = PQgetResult(pg);
            if (r == NULL) {
                done = 1;
                break;
            }
            if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                snprintf(why, sizeof why, "%s", PQresultErrorMessage(r));
                ok = 0;
            }
            PQclear(r);
        }
        int64_t now = dlock__now_us();
        if (done || !ok || now >= deadline_us) {
            ok = ok && done;
            break;
        }
        struct pollfd pfd = {.fd = PQsocket(pg), .events = POLLIN};
        if (poll(&pfd, 1, (int) ((deadline_us - now + 999) / 1000)) < 0 && errno != EINTR)
            ok = 0;
        if (ok && PQconsumeInput(pg) == 0) {
            snprintf(why, sizeof why, "%s", PQerrorMessage(pg));
            ok = 0;
        }
    }
    if (!ok)
        *code =
            dlock__fail(DLOCK_EUNREACHABLE, "%s: LISTEN " DLOCK__PGL_CHANNEL ": %s", p->label, why);
    if (ok && PQsetnonblocking(pg, 1) != 0) {
        *code = dlock__fail(DLOCK_ENOMEM, "%s: the wake-up connection: %s", p->label,
                            PQerrorMessage(pg));
        ok = 0;
    }
    if (!ok) {
        PQfinish(pg);
        return NULL;
    }
    return pg;
}

int dlock__pgl_connect(dlock__pglisten *s, int64_t deadline_us)
{
    int rc = DLOCK_OK;

    pthread_mutex_lock(&s->mu);
    while (s->state == LISTEN_CONNECTING) {
        struct timespec ts = dlock__timespec(deadline_us);
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) {
            pthread_mutex_unlock(&s->mu);
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: the wake-up connection not ready in time",
                               s->p->label);
        }
    }
    if (s->state == LISTEN_DOWN) {
        s->state = LISTEN_CONNECTING;
        pthread_mutex_unlock(&s->mu);
        PGconn *pg = listen_on(s->p, deadline_us, &rc);
        pthread_mutex_lock(&s->mu);
        s->pg = pg;
        s->state = pg != NULL ? LISTEN_READY : LISTEN_DOWN;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void dlock__pgl_watch(dlock__pglisten *s, const char *tag, const char *token)
{
    size_t n = strlen(token);
    watch *w = malloc(sizeof *w + n + 1);
    if (w == NULL)
        return; /* no wake-up: it asks again when the holder's lease ends */
    snprintf(w->tag, sizeof w->tag, "%s", tag);
    memcpy(w->token, token, n + 1);
    pthread_mutex_lock(&s->mu);
    watch **pp = &s->watches;
    while (*pp != NULL && strcmp((*pp)->token, token) != 0)
        pp = &(*pp)->next;
    if (*pp != NULL) { /* the same waiter again: its latest lock */
        watch *old = *pp;
        *pp = old->next;
        free(old);
    }
    w->next = s->watches;
    s->watches = w;
    pthread_mutex_unlock(&s->mu);
}

void dlock__pgl_unwatch(dlock__pglisten *s, const char *token)
{
    pthread_mutex_lock(&s->mu);
    for (watch **pp = &s->watches; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->token, token) == 0) {
            watch *w = *pp;
            *pp = w->next;
            free(w);
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---------------------------------------------------------------- reading */

/* Whether owner (a row's owner, as the notice names it) is token's: a
 * mutex's row is under its token, a writer's under "w:" and its token. */
static int owner_is(const char *owner, const char *token)
{
    size_t w = strlen(DLOCK__SQLT_WRITER);
    return strcmp(owner, token) == 0 ||
           (strncmp(owner, DLOCK__SQLT_WRITER, w) == 0 && strcmp(owner + w, token) == 0);
}

/* The owner a hand-over's notice names (the hex after the tag's space),
 * decoded into out (size n); 0 when the hex is not whole or too long. */
static int named_owner(const char *hex, char *out, size_t n)
{
    size_t len = strlen(hex);
    if (len % 2 != 0 || len / 2 >= n)
        return 0;
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || v == 0)
            return 0;
        out[i] = (char) v;
    }
    out[len / 2] = '\0';
    return 1;
}

/* A notice: its tag, and after a space the owner a release handed the
 * lock to (sqltable.h: DLOCK__SQLT_NOTIFY). Every waiter of the tag asks
 * again, or after a hand-over only the one it names (if it is ours): the
 * others are behind a live holder still. A notice that names an owner
 * this process cannot read wakes every waiter of the tag. */
static void notify_tag(dlock__pglisten *s, const char *payload)
{
    dlock__board *board = s->p->base.host.board;
    char tag[DLOCK__PGL_TAG_MAX], owner[160]; /* a token and its kind's prefix */
    const char *space = strchr(payload, ' ');
    size_t n = space != NULL ? (size_t) (space - payload) : strlen(payload);
    if (n >= sizeof tag)
        return; /* not ours: no tag is that long */
    memcpy(tag, payload, n);
    tag[n] = '\0';
    int named = space != NULL && named_owner(space + 1, owner, sizeof owner);
    pthread_mutex_lock(&s->mu);
    for (watch *w = s->watches; w != NULL; w = w->next) {
        if (strcmp(w->tag, tag) == 0 && (!named || owner_is(owner, w->token)))
            dlock__board_recheck(board, w->token);
    }
    pthread_mutex_unlock(&s->mu);
}

static int take_role(void *source)
{
    dlock__pglisten *s = source;
    pthread_mutex_lock(&s->mu);
    int take = s->state == LISTEN_READY && !s->reading;
    if (take)
        s->reading = 1;
    pthread_mutex_unlock(&s->mu);
    return take;
}

/* The reader's loop: reads notices and posts rechecks until w is woken or
 * until_us. 0, or -1 when the connection is gone. */
static int pump(void *source, dlock__waiter *w, int64_t until_us)
{
    dlock__pglisten *s = source;
    dlock__board *board = s->p->base.host.board;

    while (!dlock__board_woken(board, w)) {
        int64_t now = dlock__now_us();
        if (now >= until_us)
            return 0;
        int64_t until = until_us - now > READER_SLICE_US ? now + READER_SLICE_US : until_us;
        struct pollfd pfd = {.fd = PQsocket(s->pg), .events = POLLIN};
        int n = poll(&pfd, 1, (int) ((until - now + 999) / 1000));
        if (n < 0 && errno != EINTR)
            return -1;
        if (n <= 0)
            continue;
        if (PQconsumeInput(s->pg) == 0 || PQstatus(s->pg) == CONNECTION_BAD)
            return -1;
        PGnotify *note;
        while ((note = PQnotifies(s->pg)) != NULL) {
            notify_tag(s, note->extra);
            PQfreemem(note);
        }
    }
    return 0;
}

static void leave_role(void *source, int broken)
{
    dlock__pglisten *s = source;
    pthread_mutex_lock(&s->mu);
    s->reading = 0;
    if (broken && s->state == LISTEN_READY) {
        PQfinish(s->pg);
        s->pg = NULL;
        s->state = LISTEN_DOWN;
    }
    pthread_mutex_unlock(&s->mu);
}

enum dlock__wake dlock__pgl_wait(dlock__pglisten *s, dlock__waiter *w, int64_t until_us)
{
    const dlock__reading reading = {s, take_role, pump, leave_role};
    return dlock__board_wait_reading(s->p->base.host.board, w, until_us, &reading);
}
