/* SPDX-License-Identifier: MIT */
/* backend.h - the private interface between the core and every store.
 *
 * The core (src/core) owns what is the same for every store: the lock
 * handle and its hold count, the wait loop (budgets, cancellation, the
 * local queue), leases and renewal on the monotonic clock, and reporting a
 * loss. A backend owns one kind of store: it turns each step of that machine
 * (one attempt, one release, one batch of renewals) into requests, and says
 * what its store can do.
 *
 * What a backend declares (struct dlock__backend):
 *   - the URL schemes it serves and its capabilities (DLOCK_CAP_* of
 *     dlock.h). The core refuses what a store lacks with DLOCK_ENOTSUP and a
 *     message naming the store and the capability, before calling it: a
 *     backend never sees a request for a kind or call it did not declare.
 *   - its steps, as functions of this table. The table starts with a
 *     version and only ever grows at its end, so an older backend keeps
 *     working when the interface gains a step.
 *
 * How long a grant is valid (liveness), one of two ways per grant:
 *   - its own lease: the store keeps the lock lease_ms from when it was
 *     granted; the core counts validity from the send time of the request
 *     that took or last renewed it, minus a drift margin (Redis, lock
 *     tables);
 *   - a session: the grant lives exactly as long as a session of the store
 *     (a ZooKeeper session, an etcd lease, a database connection). The
 *     backend starts sessions on the client's renewer (session.h),
 *     which keeps each alive through renew() and counts its validity the
 *     same way; when a session ends, every grant made under it is lost and
 *     reported.
 *
 * How a waiter waits, as the store can (dlock__attempt.outcome / next):
 *   - queued in the store and woken through the client's board: a hand-over
 *     (GRANTED, with the fence: Redis) or a change to look at (RECHECK: a
 *     watched predecessor went away, ZooKeeper, etcd). A hand-over is kept
 *     by the store at least the shorter of the hold's lease and the waiter
 *     lease, counted from the send time of the waiter's last request the
 *     store answered "queued" (its attempt, or a heartbeat that kept its
 *     place), and no longer than its place would have lived, until the
 *     holder renews it: a waiter that died is not handed a whole lease;
 *   - polled: tried again after a backoff bounded by the holder's lease
 *     (stores that cannot notify, interop keys);
 *   - blocked in the store, up to a slice of the wait budget (a database's
 *     GET_LOCK, an advisory lock under lock_timeout): tried again at once
 *     until the budget ends. The contract of such a store (NEXT_RETRY):
 *       - it blocks only when the attempt says the caller waits (`wait`)
 *         and wait_until_us is still ahead; otherwise it only tries (a try,
 *         and an attempt outside the caller's turn in the local queue, never
 *         block);
 *       - a slice ends by the earlier of wait_until_us (the wait's budget)
 *         and deadline_us (the request's bound, at most one command timeout
 *         away) less the time its reply needs, so a slice never outlives
 *         the budget or the request; a store may make it shorter;
 *       - or, for a store that can tell while it blocks whether the server
 *         still answers (it asks it on another connection every half
 *         command timeout, each question bounded by one), a slice may
 *         last up to wait_until_us (a store may cap it), the request then
 *         bounded by the slice's end plus the time its reply needs (never
 *         less than deadline_us); it ends with DLOCK_EUNREACHABLE as soon
 *         as a question goes unanswered (and its wait in the server with
 *         it). Why: a server's queue is in order (FIFO), and a waiter that
 *         leaves it at every slice's end and joins again at its back is
 *         overtaken by every waiter that keeps its place: one whose turn is
 *         further away than a slice is never served (issue 23);
 *       - while it blocks it asks cancelled(cancel_arg) at least every
 *         50 ms, and when that says so ends the wait in the server (a
 *         cancel request, a KILL QUERY) and answers HELD, NEXT_RETRY (or
 *         TAKEN if the grant won the race: the core gives it back);
 *       - it sets due_us to the slice's end, or, for a store that asks the
 *         server while it blocks, to when it last asked: a store silent
 *         past it is unreachable from then (an outage is not counted from
 *         before it);
 *       - the core goes round again at once after a slice, but after a
 *         growing floor (1 ms doubling to 250 ms, jittered) when slices keep
 *         ending early, so a store that returns at once cannot make it spin.

 * The core bounds every wait by the budget, checks for cancellation between
 * steps, and bounds every park by the holder's lease when the store names
 * one, so a lost wake-up costs at most that.
 *
 * Retries: within one call a backend repeats a request a bounded number of
 * times at most (a race lost to another client, a member that did not
 * answer), never until the store answers; the core tries calls again after
 * a growing, jittered delay, and a backend's own background work
 * (reconnecting, reopening a stream) waits such a delay too. No path sends
 * without a floor, however the store fails.
 *
 * Threads: every function may be called from any thread at once; a backend
 * makes its own state thread-safe. Calls for one store lock never overlap
 * (one owner at a time), except renew(), which may include the lock while
 * its owner is in another call. Each call reports failure as a DLOCK_E*
 * code with the detail recorded through dlock__fail(). */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include "../base/url.h"
#include "board.h"
#include "dlock.h"
#include "log.h"
#include "session.h"

#include <stddef.h>
#include <stdint.h>

#define DLOCK__BACKEND_VERSION 3

/* Client-wide settings the core reads from the URL; backends may read them. */
typedef struct dlock__client_cfg {
    int64_t lease_ms;            /* lease of automatically renewed locks */
    int64_t waiter_lease_ms;     /* how long a queued waiter keeps its place without a heartbeat */
    int64_t command_timeout_ms;  /* bound of every single request */
    int64_t unreachable_wait_ms; /* how long a wait goes on trying a store that stopped
                                    answering; -1: for ever (the core's business) */
    char client_id[17];          /* 16 hex digits, random per client; every owner token the
                                    client makes starts with them */
    /* Who this client is, recorded with every hold so that an operator can
     * tell who holds a lock (core/owner.h): one line of text, never empty.
     * A store that keeps a value with each hold keeps "TOKEN\nINFO" (the
     * owner token, a newline, this), and holders() reports the part after
     * the newline as the holder's info; a store that keeps only the token
     * keeps this once per client, under client_id (the token's start). */
    char owner_info[384];
} dlock__client_cfg;

/* What the core gives a store when it opens it: the host's services. A
 * store sees them only through their declarations here in src/backend
 * (board.h, log.h, session.h), which the core implements, never through
 * the core's own headers: the core includes this file, and nothing here
 * includes the core. */
typedef struct dlock__host {
    const dlock__client_cfg *cfg;
    dlock__board *board;       /* where waiters park: post their wake-ups here (board.h) */
    dlock__sessions *sessions; /* where sessions are started (session.h) */
    /* The client's log (log.h): a store may tell what the core cannot
     * see, e.g. DLOCK__LOG(host->log, DLOCK_LOG_INFO, "%s: reconnected", label)
     * on a reconnect. Never NULL; costs nothing when logging is off. */
    dlock__log *log;
} dlock__host;

/* The kinds of lock. */
enum dlock__kind {
    DLOCK__MUTEX,     /* exclusive; a free lock may be taken ahead of its queue */
    DLOCK__FAIR,      /* exclusive; strictly first come, first served */
    DLOCK__READ,      /* a read-write lock, held to read (shared) */
    DLOCK__WRITE,     /* a read-write lock, held to write (exclusive) */
    DLOCK__SEMAPHORE, /* `take` of `permits` permits (shared) */
};

typedef struct dlock__lock_spec {
    enum dlock__kind kind;
    int simple;       /* the interop layout (a mutex; DLOCK_CAP_INTEROP) */
    unsigned permits; /* semaphore */
    unsigned take;    /* semaphore */
} dlock__lock_spec;

typedef struct dlock__backend dlock__backend;

/* An open store: one per client. A backend's own state embeds it as its
 * first member and converts with DLOCK__STORE_OF. */
typedef struct dlock__store {
    const dlock__backend *backend;
    unsigned caps;     /* DLOCK_CAP_*: the backend's, narrowed by the URL if need be */
    const char *label; /* the store for messages ("redis://10.0.0.9:6379"), no password */
    const char *kind;  /* what it is, for refusals ("MariaDB/MySQL in row mode"); NULL: the
                          backend's name */
    dlock__host host;
} dlock__store;

/* One lock's state in a store, made by lock_new(): its keys or paths, and
 * whatever the store keeps per owner (a waiter's node). Embedded first in
 * the backend's own struct. */
typedef struct dlock__store_lock {
    dlock__lock_spec spec;
} dlock__store_lock;

/* The backend's struct around a base pointer (the base is its first member). */
#define DLOCK__STORE_OF(type, p) ((type *) (void *) (p))

/* ---------------------------------------------------------------- attempts */

enum dlock__outcome {
    DLOCK__TAKEN = 1,  /* the caller holds the lock now */
    DLOCK__HELD = 2,   /* someone else holds it; the caller is not queued (see next) */
    DLOCK__QUEUED = 3, /* someone else holds it; the caller waits in the store's queue
                          and will be woken through the board */
};

/* Which lock of the same name holds it, when that is not the kind an attempt
 * asked for. One name is one lock: every kind on a name excludes the others
 * (a mutex and a fair handle are the same kind; an interop key, the
 * read-write lock and the semaphore are kinds of their own), so a store
 * that finds another kind holding the name answers HELD or QUEUED and says
 * which kind here; the core names it in its message. */
enum dlock__held_as {
    DLOCK__HELD_AS_SAME = 0, /* the kind asked for, or not known */
    DLOCK__HELD_AS_MUTEX,    /* a mutex (plain or fair handles) */
    DLOCK__HELD_AS_SIMPLE,   /* an interop key (DLOCK_SIMPLE) */
    DLOCK__HELD_AS_RW,       /* the read-write lock (readers or a writer) */
    DLOCK__HELD_AS_SEMAPHORE,
};

#define DLOCK__TTL_UNKNOWN (-1)
#define DLOCK__TTL_NONE    (-2)

/* What to do after DLOCK__HELD when the caller waits. */
enum dlock__next {
    DLOCK__NEXT_POLL = 0,    /* try again after a backoff (the store cannot notify) */
    DLOCK__NEXT_PREPARE = 1, /* call prepare_wait(), then try again at once */
    DLOCK__NEXT_RETRY = 2,   /* try again at once (a wait in the store ended a slice) */
};

/* One attempt to take a lock the caller does not hold. (Re-entry is the
 * owning handle's business: it confirms with extend().) */
typedef struct dlock__attempt {
    /* in */
    const char *token;
    int64_t lease_ms;      /* the hold's lease (fixed, or the client's renewed lease) */
    int fixed;             /* a fixed lease (DLOCK_CAP_FIXED_LEASE): not renewed, not a session's */
    int wait;              /* the caller waits if the lock is held: the store may queue it */
    int again;             /* an earlier attempt of this wait was queued */
    uint64_t wait_id;      /* names this attempt in hand-over notices (board) */
    int64_t deadline_us;   /* bound of this request */
    int64_t wait_until_us; /* a store that waits inside the server may block until then */
    /* A store that blocks in the server (NEXT_RETRY) asks this at least every
     * 50 ms and ends its wait when it returns nonzero: dlock_cancel(). NULL:
     * nothing to ask (the store need not block). Asked on the caller's
     * thread during the call only, holding no lock that a call into the
     * client could need: asked 50 ms into the attempt, it also logs that the
     * wait has begun (dlock -v). */
    int (*cancelled)(void *cancel_arg);
    void *cancel_arg;
    /* out */
    enum dlock__outcome outcome;
    uint64_t fence;              /* TAKEN: the holder's fence, > 0 */
    dlock__session *session;     /* TAKEN: the grant lives as long as this session (the
                                    attempt's reference, kept by the hold); NULL: its own
                                    lease, counted from the send time */
    int64_t holder_ttl_ms;       /* HELD, QUEUED: the holder's lease left in ms, or
                                    DLOCK__TTL_UNKNOWN, or DLOCK__TTL_NONE (held without an
                                    expiry: it never ends by itself) */
    enum dlock__next next;       /* HELD; QUEUED: DLOCK__NEXT_RETRY when a recheck posted
                                    for this wait is news of a release (one per release,
                                    not a hint to look again): the next attempt goes at
                                    once, not paced as a flood of wake-ups would be */
    int news;                    /* HELD with DLOCK__NEXT_RETRY: the store's wait ended on
                                    news that the holder let go (a wake of its own, one per
                                    release), not at a slice's end: the next attempt goes
                                    at once, not paced */
    int keep_place;              /* QUEUED: the place lapses unless renew() heartbeats it */
    int in_line;                 /* HELD with NEXT_POLL: the store put the caller in its
                                    line of waiters (a place of its own, first come first
                                    served: a lock table's waiter row), and it polls for its
                                    turn; said in the waiting line (fair order is judged
                                    from it, tests/fault) */
    enum dlock__held_as held_as; /* HELD, QUEUED: held as another kind of lock (its
                                    holder_ttl_ms is that holder's) */
    const char *held_why;        /* HELD: why the store counts the name held when no holder
                                    is known (a static text, said in the refusal; its
                                    holder_ttl_ms is how long), or NULL: a holder has it;
                                    a reader kept out by an older waiting writer is told
                                    DLOCK__WHY_WRITER_FIRST on every store */
    /* When the store's answer was due, if later than the send (a wait blocked
     * in the server: its slice's end): a store that does not answer is
     * counted silent from then, not from the send. 0: the send. */
    int64_t due_us;
} dlock__attempt;

/* Why a reader's take was refused while only readers hold the name: a
 * writer waits, and readers do not overtake it (with no lease to tell: the
 * readers' is not when the name frees). */
#define DLOCK__WHY_WRITER_FIRST                                                                    \
    "readers hold it, but a writer has waited longer and goes first (readers do not overtake a "   \
    "waiting writer)"
/* A lock table's free row kept for the waiters in line (its first takes
 * it at its next look): a try is refused with it. */
#define DLOCK__WHY_IN_LINE                                                                         \
    "nobody holds it, but waiters are in line for it and the first of them takes it next (a try "  \
    "does not overtake them)"

/* ---------------------------------------------------------------- renewal */

/* One item of a renewal batch. */
enum dlock__renew_kind {
    DLOCK__RENEW_HOLD,    /* a held lock: renew its lease, or (session-bound) check it is
                             still held */
    DLOCK__RENEW_WAITER,  /* a queued waiter's heartbeat (attempt.keep_place) */
    DLOCK__RENEW_SESSION, /* keep a session alive */
};

enum dlock__renew_result {
    DLOCK__RENEW_FAILED = 0,  /* no answer (or an error): try again */
    DLOCK__RENEW_OK = 1,      /* renewed / still held / place kept / session alive */
    DLOCK__RENEW_GRANTED = 2, /* waiter: the lock was handed to it (fence set) */
    DLOCK__RENEW_GONE = 3,    /* hold: not the owner any more; waiter: no longer queued;
                                 session: ended */
};

typedef struct dlock__renewal {
    enum dlock__renew_kind kind;
    dlock__store_lock *lock; /* HOLD, WAITER */
    const char *token;       /* HOLD, WAITER */
    uint64_t held_fence;     /* HOLD: the fence it was taken under (0: unknown), as release's */
    int64_t lease_ms;        /* HOLD (own lease): the new lease; WAITER: the lease asked for */
    dlock__session *session; /* SESSION; HOLD: the session it depends on, or NULL */
    enum dlock__renew_result result;
    uint64_t fence; /* GRANTED */
    /* GONE of a HOLD: what happened, in the store's terms, when it can
     * tell (a static string: "its row was deleted: ..."); NULL: the
     * core's words, which name every cause */
    const char *why;
} dlock__renewal;

/* ---------------------------------------------------------------- operators */

/* One holder, as holders() reports it. */
typedef struct dlock__holder_raw {
    const char *owner; /* the owner token as the store has it */
    unsigned count;    /* exclusive 1; a reader's holds; a semaphore holder's permits */
    const char *info;  /* the owner_info its client recorded, NULL if none is known */
} dlock__holder_raw;

/* Receives one holder (holders()) or one lock name (list(); kind is
 * DLOCK__MUTEX, DLOCK__WRITE for a read-write lock, or DLOCK__SEMAPHORE).
 * Returns nonzero to stop: the backend then returns DLOCK_OK at once. */
typedef int (*dlock__holder_sink)(void *arg, const dlock__holder_raw *h);
typedef int (*dlock__name_sink)(void *arg, const char *name, enum dlock__kind kind);

/* ---------------------------------------------------------------- the table */

struct dlock__backend {
    unsigned version;           /* DLOCK__BACKEND_VERSION when written */
    const char *name;           /* the store, for messages: "Redis" */
    const char *const *schemes; /* URL schemes served, NULL-terminated */
    unsigned caps;              /* DLOCK_CAP_* */

    /* Opens a store from the URL parts it knows (marking options used; the
     * core refuses the rest). Connects lazily or at once, as it likes, but
     * starts no session before the first call that needs one. close() ends
     * (dlock__session_end) the sessions it still holds, and returns by
     * deadline_us (what it could not say to the store by then, the store
     * ends by itself: leases, sessions). */
    int (*open)(dlock__url *url, const dlock__host *host, dlock__store **out);
    void (*close)(dlock__store *s, int64_t deadline_us);

    /* Checks `name` for this store and prepares the lock's state. */
    int (*lock_new)(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                    dlock__store_lock **out);
    void (*lock_free)(dlock__store *s, dlock__store_lock *l);
    /* The handle leaves its hold in the store (dlock_lock_detach): forget
     * it here, so that lock_free does not give it up; it lives on for its
     * lease, or as long as its session. NULL: lock_free never gives up a
     * hold by itself. */
    void (*detach)(dlock__store *s, dlock__store_lock *l);

    /* One attempt. DLOCK_EDEADLK when it could only wait for itself (a
     * reader asking to write; an owner asking for its name as another kind
     * than it holds it). */
    int (*acquire)(dlock__store *s, dlock__store_lock *l, dlock__attempt *a);
    /* Several mutexes in one step, if the store can: DLOCK_OK (all taken,
     * fences[i] set, sessions[i] as attempt.session), DLOCK_EBUSY (none
     * taken; *busy is the index of one held by someone else, *busy_ttl_ms
     * its lease left), or DLOCK_ENOTSUP (not these: take them one by one).
     * NULL: never. */
    int (*acquire_many)(dlock__store *s, dlock__store_lock *const *ls, size_t n, const char *token,
                        int64_t lease_ms, int64_t deadline_us, uint64_t *fences,
                        dlock__session **sessions, size_t *busy, int64_t *busy_ttl_ms);
    /* Makes wake-ups flow for waiters of l (after DLOCK__NEXT_PREPARE).
     * DLOCK_ENOTSUP: they cannot, poll instead. */
    int (*prepare_wait)(dlock__store *s, dlock__store_lock *l, int64_t deadline_us);
    /* Waits for w's wake on the board until until_us, doing whatever I/O
     * brings wake-ups meanwhile. NULL: the core parks on the board (the
     * store posts wake-ups from its own threads). */
    enum dlock__wake (*wait)(dlock__store *s, dlock__store_lock *l, dlock__waiter *w,
                             int64_t until_us);
    /* A waiter gives up: leave the queue, and pass the lock on if it had
     * been handed to it meanwhile. */
    int (*cancel)(dlock__store *s, dlock__store_lock *l, const char *token, int64_t deadline_us);
    /* Releases the lock held under token, handing it to the next waiter.
     * DLOCK_ENOTOWNER when someone else holds it, DLOCK_ELOST when nobody
     * does. fence: the fence the hold was taken under (0: unknown); a store
     * that can tell that its hold under token is a later grant than that
     * (Redis: a queue place a failover brought back, served again) may let
     * that hold go and say DLOCK_ELOST. */
    int (*release)(dlock__store *s, dlock__store_lock *l, const char *token, uint64_t fence,
                   int64_t deadline_us);
    /* Confirms that token holds the lock and sets its remaining lease to
     * lease_ms (at_least: only if that lengthens it; a session-bound hold
     * is only confirmed): DLOCK_OK, or DLOCK_ELOST when it does not hold
     * it. at_least with lease_ms 0 lengthens nothing: it only confirms
     * (dlock_lock_verify), and must change nothing in the store. fence: as
     * release's (a later grant under token is not this hold: DLOCK_ELOST). */
    int (*extend)(dlock__store *s, dlock__store_lock *l, const char *token, uint64_t fence,
                  int64_t lease_ms, int at_least, int64_t deadline_us);
    /* Renews a batch; fills each item's result. Returns a code only when
     * the whole batch failed (the detail names why). */
    int (*renew)(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us);
    /* The core has given up on session (its validity ran out before a
     * renewal succeeded): end it in the store if it can still be reached,
     * so that nothing granted under it outlives the loss reported. Called
     * on the renewal thread; may block up to deadline_us. NULL: nothing to
     * do. */
    void (*session_lost)(dlock__store *s, dlock__session *session, int64_t deadline_us);

    int (*query)(dlock__store *s, dlock__store_lock *l, dlock_status *out, int64_t deadline_us);
    int (*force_unlock)(dlock__store *s, dlock__store_lock *l, int64_t deadline_us);

    /* Since version 2. */
    /* Every holder of l the store has now (none when it is free), with the
     * info its client recorded (client_cfg.owner_info). With DLOCK_CAP_QUERY. */
    int (*holders)(dlock__store *s, dlock__store_lock *l, dlock__holder_sink sink, void *arg,
                   int64_t deadline_us);
    /* Every lock whose name starts with prefix ("" for all) of which the
     * store has a holder or a queued waiter now, once per name and kind, in
     * any order. Names the store cannot tell from other data (interop keys)
     * are left out. With DLOCK_CAP_LIST. */
    int (*list)(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                int64_t deadline_us);

    /* Since version 3. */
    /* Whether the store has answered this client since it was opened, on any
     * thread: a connection made and its first exchange answered (a
     * handshake, a session established, a reply to a request). Never back
     * to 0. The core gives a store never reached a moment only (a wrong
     * address or a server that is down is reported within seconds), and
     * one that answered before up to unreachable_wait (an outage). NULL:
     * taken as reached. -1: a server answered at the URL's address, but
     * is not the store the URL names (a node of a Redis Cluster at a
     * redis:// URL, a plain Redis at redis+cluster://): no wait mends a
     * URL, so an attempt that found the store unreachable fails at once,
     * with the detail it recorded. */
    int (*reached)(dlock__store *s);
};

/* registry.c: the backend serving a URL scheme (lower case). NULL with a
 * DLOCK_EINVAL / DLOCK_ENOTSUP detail recorded (unknown scheme, or a store
 * this build was made without). */
const dlock__backend *dlock__backend_find(const char *scheme, const char *url_text, int *code);

#endif
