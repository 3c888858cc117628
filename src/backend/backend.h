/* backend.h - the private interface every backend implements.
 *
 * The core (src/core) owns the lock state machine: reentrancy, validity on
 * the monotonic clock, waiting, renewal and loss reporting. A backend owns
 * the wire: it turns one step of that machine (one attempt, one release, one
 * batch of renewals) into requests to its store, and posts wake-ups for
 * queued waiters to the client's wait board when the store notifies it.
 *
 * All calls may come from any thread at once; a backend makes its own state
 * thread-safe. Each call reports failure as a DLOCK_E* code with the detail
 * recorded through dlock__fail(). */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include "../core/board.h"
#include "../core/url.h"
#include "dlock.h"

#include <stddef.h>
#include <stdint.h>

/* Client-wide settings the core needs and backends may read. */
typedef struct dlock__client_cfg {
    int64_t lease_ms;           /* lease of automatically renewed locks */
    int64_t waiter_lease_ms;    /* how long a queued waiter keeps its place without a heartbeat */
    int64_t command_timeout_ms; /* bound of every single request */
    char client_id[17];         /* 16 hex digits, random per client */
} dlock__client_cfg;

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
    int simple;       /* interop key (mutex only) */
    unsigned permits; /* semaphore */
    unsigned take;    /* semaphore */
} dlock__lock_spec;

/* One attempt to take a lock the caller does not hold. (Re-entry is the
 * owning handle's business: it only lengthens the lease, see extend.) */
enum dlock__outcome {
    DLOCK__TAKEN = 1, /* the caller holds the lock now */
    DLOCK__HELD = 2,  /* someone else holds it */
};

typedef struct dlock__attempt {
    /* in */
    const char *token;
    int64_t lease_ms;
    int join_queue;   /* when held by someone else, queue up to be handed the lock */
    int was_queued;   /* an earlier attempt of this wait queued (leave the queue on success) */
    uint64_t wait_id; /* names this wait in hand-over notices (board_grant) */
    int64_t deadline_us;
    /* out */
    enum dlock__outcome outcome;
    uint64_t fence;        /* TAKEN: the holder's fence */
    int64_t holder_ttl_ms; /* HELD: remaining lease of the holder, -1 unknown */
    int queued;            /* HELD: the caller is queued and will be woken on the board */
} dlock__attempt;

/* One item of a renewal batch: a held lock to renew, or a queued waiter's
 * heartbeat. */
enum dlock__renew_result {
    DLOCK__RENEW_FAILED = 0,  /* request failed; try again */
    DLOCK__RENEW_OK = 1,      /* renewed (held) or place kept (waiter) */
    DLOCK__RENEW_GRANTED = 2, /* waiter: the lock was handed to it */
    DLOCK__RENEW_GONE = 3,    /* held: not the owner any more; waiter: no longer queued */
};

typedef struct dlock__renewal {
    void *lock; /* backend lock state */
    const char *token;
    int64_t lease_ms; /* held: new lease; waiter: lease it asked for */
    int waiter;       /* 0: held lock, 1: queued waiter */
    enum dlock__renew_result result;
    uint64_t fence; /* GRANTED: fence of the grant */
} dlock__renewal;

typedef struct dlock__backend_ops {
    const char *name;
    /* Reads the URL parts it knows (marking options used). */
    int (*open)(dlock__url *url, const dlock__client_cfg *cfg, dlock__board *board, void **be);
    void (*close)(void *be);

    /* Validates `name` and prepares per-lock state (keys). */
    int (*lock_new)(void *be, const char *name, const dlock__lock_spec *spec, void **bl);
    void (*lock_free)(void *be, void *bl);

    /* Whether waiters of this lock are woken through the board: 0 no (they
     * poll), 1 yes after prepare_wait(), 2 yes and wake-ups already flow. */
    int (*can_notify)(void *be, void *bl);
    /* Makes wake-ups flow before a waiter first joins the queue. */
    int (*prepare_wait)(void *be, void *bl, int64_t deadline_us);
    /* Waits for w's wake on the board until until_us, doing whatever I/O
     * brings wake-ups meanwhile. Returns the wake, or NONE on timeout. */
    enum dlock__wake (*wait)(void *be, void *bl, dlock__waiter *w, int64_t until_us);

    /* DLOCK_EDEADLK when the attempt could only wait for itself (a reader
     * asking to write). */
    int (*acquire)(void *be, void *bl, dlock__attempt *a);
    /* Several mutexes at once if the store can do it in one step: DLOCK_OK
     * (all taken, fences[i] set), DLOCK_EBUSY (none taken; *busy is the
     * index of one held by someone else, *busy_ttl_ms its lease left), or
     * DLOCK_ENOTSUP (not in one step: take them one by one). May be NULL. */
    int (*acquire_many)(void *be, void *const *bls, size_t n, const char *token, int64_t lease_ms,
                        int64_t deadline_us, uint64_t *fences, size_t *busy, int64_t *busy_ttl_ms);
    /* A waiter gives up: leave the queue, and pass the lock on if it had
     * already been handed to us. */
    int (*cancel)(void *be, void *bl, const char *token, int64_t deadline_us);
    /* Releases the lock held under token, handing it to the next waiter.
     * DLOCK_ENOTOWNER when someone else holds it, DLOCK_ELOST when nobody
     * does. */
    int (*release)(void *be, void *bl, const char *token, int64_t deadline_us);
    /* Sets the remaining lease to lease_ms (with at_least: only if that
     * lengthens it) if the token holds the lock: DLOCK_OK, or DLOCK_ELOST
     * when it does not. */
    int (*extend)(void *be, void *bl, const char *token, int64_t lease_ms, int at_least,
                  int64_t deadline_us);
    /* Renews a batch; fills each item's result. Returns a code only when
     * the whole batch failed. */
    int (*renew)(void *be, dlock__renewal *items, size_t n, int64_t deadline_us);

    int (*query)(void *be, void *bl, dlock_status *out, int64_t deadline_us);
    int (*force_unlock)(void *be, void *bl, int64_t deadline_us);
} dlock__backend_ops;

extern const dlock__backend_ops dlock__redis_ops;

#endif
