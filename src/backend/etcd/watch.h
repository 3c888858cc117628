/* SPDX-License-Identifier: MIT */
/* watch.h - one watch stream per client (watch.c): watches of a key or a
 * range, told to a callback on the client's watch thread. client.h
 * includes it; watch.c reaches etcd through transport.c and calls nothing
 * of client.c. Thread safety and errors as client.h says. */
#ifndef DLOCK_ETCD_WATCH_H
#define DLOCK_ETCD_WATCH_H

#include "codec.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dlock__etcd dlock__etcd;

/* What a watch callback is told. */
enum {
    /* event: one PUT or DELETE in the watched range. */
    DLOCK__ETCD_WATCH_EVENT = 1,
    /* The server ended the watch: compact_revision > 0 when its start
     * revision was compacted away, else reason says why. The watch is gone;
     * re-range and add a new one. The last note of a watch. */
    DLOCK__ETCD_WATCH_CANCELED,
    /* The stream broke (code and reason say why). The watch is kept and
     * re-created from the revision after the last one delivered when the
     * stream is back, so no event is lost - unless that revision has been
     * compacted by then (then CANCELED follows), or the watch was added
     * without a start revision and the break came before etcd confirmed it.
     * Told once per break, not per reconnection attempt. */
    DLOCK__ETCD_WATCH_BROKEN,
    /* created later than the spec's seen_revision: what changed in between
     * is not delivered; look again */
    DLOCK__ETCD_WATCH_LATE
};

typedef struct dlock__etcd_watch_note {
    int kind;
    int64_t watch; /* the id dlock__etcd_watch_add() returned */
    /* EVENT */
    const dlock__etcd_event *event;
    int64_t revision; /* header revision of the reply that carried it */
    /* CANCELED */
    int64_t compact_revision;
    /* CANCELED, BROKEN */
    const char *reason;
    int code; /* BROKEN: a DLOCK_E* code */
} dlock__etcd_watch_note;

/* Called on the client's watch thread, one note at a time, in stream order.
 * It may add and cancel watches; it must not block for long (every watch
 * of the client waits on it) and must not call dlock__etcd_free(). */
typedef void (*dlock__etcd_watch_fn)(void *arg, const dlock__etcd_watch_note *note);

typedef struct dlock__etcd_watch_spec {
    const char *key;
    const char *range_end;  /* NULL: key alone */
    int64_t start_revision; /* 0: from now; give one to lose nothing */
    int no_put;             /* deletes only */
    /* With start_revision 0: the revision the caller last read at. etcd
     * delivers a watch from the past only once its 100 ms catch-up loop
     * has run, so a watch "from now" is quicker; if "now" turns out later
     * than this, the callback is told WATCH_LATE. */
    int64_t seen_revision;
} dlock__etcd_watch_spec;

/* Adds a watch to the client's one stream (opened, on a thread of its
 * own, by the first watch) and returns at once with its id (> 0) in *id:
 * the watch is created on the server soon after, from start_revision.
 * Errors: DLOCK_EINVAL, DLOCK_ENOMEM; trouble reaching etcd is told to fn
 * as BROKEN, never returned. */
int dlock__etcd_watch_add(dlock__etcd *c, const dlock__etcd_watch_spec *spec,
                          dlock__etcd_watch_fn fn, void *arg, int64_t *id);
/* Ends a watch. Once this returns its callback is not running and will
 * not run again (called from the callback itself: after it returns). An
 * unknown or ended id is fine. */
void dlock__etcd_watch_cancel(dlock__etcd *c, int64_t id);

/* ---------------------------------------------------------------- stats */

/* Counters for tests and diagnostics. */
typedef struct dlock__etcd_stats {
    uint64_t connections_made;  /* request handles created (pool size reached) */
    uint64_t authentications;   /* successful /v3/auth/authenticate calls */
    uint64_t streams_opened;    /* watch stream (re)connections */
    uint64_t watches_created;   /* "created" confirmations received */
    uint64_t cancels_confirmed; /* "canceled" replies to our cancel_requests */
    size_t watches;             /* watches registered now */
} dlock__etcd_stats;

/* For client.c: stops and frees the watcher (client teardown), and fills
 * the watch counters of out. */
void dlock__etcd_watcher_free(dlock__etcd *c);
void dlock__etcd_watcher_stats(dlock__etcd *c, dlock__etcd_stats *out);

#endif
