/* SPDX-License-Identifier: MIT */
/* close.c - the end of a ZooKeeper connection: its session ended, its
 * handle closed (by the handle's own completion thread), and the connection
 * freed. See conn.h.
 *
 * Lifetimes. The core's session (dlock__session) keeps a reference to the
 * connection as its data, so that the renewal thread may use the connection
 * as long as it may see the session; the connection holds the store's
 * reference to the session until it ends. A connection ends its session when
 * ZooKeeper says it expired, when authentication fails, or when it is killed
 * (the core gave up on it, or the store closes). Its handle is closed when
 * it is killed, when ZooKeeper says the session is over, or when the last
 * reference goes; the connection itself is freed once its handle is closed
 * and no reference is left, whichever comes last.
 *
 * Closing (the handle's own completion thread does it). zookeeper_close()
 * completes the requests still in flight with ZCLOSING, but in
 * libzookeeper_mt 3.8 only those its completion thread still finds: it
 * sets close_requested, on which that thread stops looking, before it
 * queues them, and the I/O thread may queue more (a reply, a session event)
 * until it is joined; destroy() in the multi-threaded build processes no
 * completions, so whatever is queued after the completion thread's last
 * look is never called nor freed, and a request of ours among them leaks
 * with its connection. Called from a callback on the completion thread,
 * zookeeper_close() instead joins the I/O thread and returns; the
 * completion thread then goes on with its queue, which holds everything
 * there will ever be, calls each completion (ZCLOSING for those still
 * waiting), and frees the handle as it ends (sending the server the close
 * first, waiting up to 4.5 s for a server that does not answer). To get
 * onto that thread, closing sends one request (exists "/") whose
 * completion closes: it comes within a round trip, or when the library
 * gives up on the connection (2/3 of the session timeout at most); on a
 * session that is over (no request can be sent), the session event that
 * says so closes. The completion thread's end (a thread-specific value's
 * destructor) tells that no callback of the handle runs any more. */
#include "conn_int.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* Frees c: its handle is closed and no reference is left. */
static void destroy(dlock__zconn *c)
{
    while (c->orphans != NULL) {
        orphan *o = c->orphans;
        c->orphans = o->next;
        free(o->path);
        free(o);
    }
    while (c->watches.next != &c->watches) {
        zwatch *w = c->watches.next;
        w->next->prev = w->prev;
        w->prev->next = w->next;
        free(w);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    pthread_rwlock_destroy(&c->use);
    free(c);
}

/* The handle is gone: no callback of it runs any more. c goes too if no
 * reference is left; nothing of c is touched afterwards. */
static void handle_gone(dlock__zconn *c)
{
    pthread_mutex_lock(&c->mu);
    c->closed = 1;
    int doomed = c->doomed;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (doomed)
        destroy(c);
}

/* Set on a completion thread that closed its handle: its end is the
 * handle's. */
static pthread_key_t gone_key;
static int gone_key_made;
static pthread_once_t gone_once = PTHREAD_ONCE_INIT;

static void thread_gone(void *c)
{
    handle_gone(c);
}

static void make_gone_key(void)
{
    gone_key_made = pthread_key_create(&gone_key, thread_gone) == 0;
}

typedef struct closer {
    dlock__zconn *conn;
    zhandle_t *zh;
} closer;

static void *closer_main(void *arg)
{
    closer *k = arg;
    zookeeper_close(k->zh); /* no callback of it runs after this */
    handle_gone(k->conn);
    free(k);
    return NULL;
}

/* The last resort, when zh cannot be closed from its completion thread (no
 * memory): zookeeper_close() on a thread of its own, which may leave a
 * completion behind (see the design note). With no thread to spare either,
 * zh is closed here and c is never freed: a callback of it may still come. */
static void close_elsewhere(dlock__zconn *c, zhandle_t *zh)
{
    closer *k = malloc(sizeof *k);
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int err = ENOMEM;

    if (k != NULL) {
        k->conn = c;
        k->zh = zh;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        err = pthread_create(&t, &attr, closer_main, k);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (err != 0) {
        free(k);
        zookeeper_close(zh);
    }
}

/* On c's completion thread (a callback of its handle): closes the handle c
 * still has, if nobody has yet. */
void dlock__zk_close_here(dlock__zconn *c)
{
    pthread_rwlock_wrlock(&c->use);
    zhandle_t *zh = c->zh != NULL ? c->zh : c->close_zh;
    c->zh = NULL;
    c->close_zh = NULL;
    pthread_rwlock_unlock(&c->use);
    if (zh == NULL)
        return;
    pthread_once(&gone_once, make_gone_key);
    if (!gone_key_made || pthread_setspecific(gone_key, c) != 0) {
        close_elsewhere(c, zh);
        return;
    }
    /* Returns once the I/O thread is joined; this thread then completes
     * what is queued, frees the handle and ends (thread_gone). */
    zookeeper_close(zh);
}

static void on_close_reply(int rc, const struct Stat *stat, const void *data)
{
    (void) rc, (void) stat;
    dlock__zk_close_here((dlock__zconn *) data);
}

/* Starts closing c's handle (once) and returns at once; safe on any thread.
 * No request of ours is sent on it any more. */
void dlock__zk_begin_close(dlock__zconn *c)
{
    pthread_rwlock_wrlock(&c->use);
    zhandle_t *zh = c->zh;
    c->zh = NULL;
    if (zh != NULL) {
        c->close_zh = zh;
        int zrc = zoo_aexists(zh, "/", 0, on_close_reply, c);
        /* ZINVALIDSTATE: the session is over, and the event saying so
         * comes (or came: then it found c->zh) on the completion thread,
         * which closes (session_watcher, conn.c) */
        if (zrc == ZOK || zrc == ZINVALIDSTATE)
            zh = NULL;
        else
            c->close_zh = NULL;
    }
    pthread_rwlock_unlock(&c->use);
    if (zh != NULL)
        close_elsewhere(c, zh);
}

void dlock__zconn_ref(dlock__zconn *c)
{
    atomic_fetch_add(&c->refs, 1);
}

/* Drops a reference from anywhere, ZooKeeper's threads included: the last
 * one closes the handle, and c goes once it is closed. */
void dlock__zconn_unref(dlock__zconn *c)
{
    if (c == NULL || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    dlock__zk_begin_close(c); /* before doomed: until then nothing frees c */
    pthread_mutex_lock(&c->mu);
    c->doomed = 1;
    int closed = c->closed;
    pthread_mutex_unlock(&c->mu);
    if (closed)
        destroy(c);
}

/* ---------------------------------------------------------------- the session's end */

/* With mu held: the connection is dead; its session ends (once). */
void dlock__zk_die_locked(dlock__zconn *c, const char *why)
{
    if (c->state == DEAD)
        return;
    c->state = DEAD;
    snprintf(c->why, sizeof c->why, "%s", why);
    pthread_cond_broadcast(&c->cv);
}

void dlock__zk_end_session(dlock__zconn *c, const char *why)
{
    pthread_mutex_lock(&c->mu);
    dlock__session *s = c->session;
    c->session = NULL;
    dlock__zk_die_locked(c, why);
    pthread_mutex_unlock(&c->mu);
    if (s != NULL) {
        char text[300];
        snprintf(text, sizeof text, "%s: %s", c->label, why);
        dlock__session_end(s, text);
    }
}
