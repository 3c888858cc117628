/* SPDX-License-Identifier: MIT */
/* sockwatch.h - a thread that watches the sockets of a store's open
 * connections while nothing is asked on them, so that a connection the
 * server closed (an operator's KILL or pg_terminate_backend, a restart, an
 * idle timeout) is noticed at once, not at the next renewal's ping: for
 * the stores whose connection is the lock (SQL session modes), a passive
 * read on the socket.
 *
 * The store adds each connection's socket once it is open and removes it
 * before it closes it. When a socket is readable or hung up, the thread
 * calls the store's check() with the connection: the store looks (without
 * waiting: a connection in use is looked at later) and closes it if the
 * server did. The thread starts with the first socket added. */
#ifndef DLOCK_BACKEND_SOCKWATCH_H
#define DLOCK_BACKEND_SOCKWATCH_H

enum dlock__sockwatch_verdict {
    DLOCK__SW_KEEP,  /* open: go on watching it */
    DLOCK__SW_LATER, /* cannot tell now (in use, or data a request will read): again in a
                        while */
    DLOCK__SW_GONE,  /* closed: the store removed it (from check() itself is allowed) */
};

typedef struct dlock__sockwatch dlock__sockwatch;

/* check(arg, item): on the watcher's thread, never for an item removed. */
int dlock__sockwatch_new(enum dlock__sockwatch_verdict (*check)(void *arg, void *item), void *arg,
                         dlock__sockwatch **out);
/* Stops the thread; every item must have been removed. */
void dlock__sockwatch_free(dlock__sockwatch *w);
/* Watches fd for item (nothing happens if memory or a thread is lacking:
 * the renewal's ping still finds a closed connection). */
void dlock__sockwatch_add(dlock__sockwatch *w, int fd, void *item);
/* Watches item no more: when it returns, check() is not running for item
 * and will not be called for it again, so its socket may be closed. */
void dlock__sockwatch_remove(dlock__sockwatch *w, void *item);

#endif
