/* SPDX-License-Identifier: MIT */
/*
 * dlock.h - the whole public contract of libdlock, a distributed lock client.
 *
 * A process opens a client from a URL that names the store, makes a lock
 * handle for a name, and acquires it. Every acquisition carries a fencing
 * token (a number that strictly increases for each new holder of the name)
 * and either a fixed lease or a lease the client renews on its own until the
 * lock is released. When a held lock is lost, the holder is told: through a
 * callback and through the next call on the handle. Never silently.
 *
 *     dlock_client *c;
 *     dlock_lock *l;
 *     if (dlock_client_open("redis://127.0.0.1:6379", &c) != DLOCK_OK)
 *         die(dlock_errmsg());
 *     dlock_lock_open(c, "nightly-billing", 0, &l);
 *     if (dlock_acquire(l, 10000) == DLOCK_OK) {          // wait up to 10 s
 *         run_billing(dlock_lock_fence(l));              // renewed meanwhile
 *         dlock_release(l);
 *     }
 *     dlock_lock_free(l);
 *     dlock_client_close(c);
 *
 * Threads: a dlock_client may be shared by any number of threads; its
 * connections are multiplexed and pipelined between them. A dlock_lock is
 * one owner. Calls on one handle must not overlap in time (an overlapping
 * call fails with DLOCK_EINVAL rather than corrupting state); a handle may be
 * used from different threads one after another. Two threads that must
 * exclude each other use two handles.
 *
 * Errors: fallible functions return DLOCK_OK (0) or a positive DLOCK_E*
 * code. dlock_strerror() gives the code's static text; dlock_errmsg() gives
 * the detail of the calling thread's last failure. Codes never change
 * meaning.
 *
 * Time: every duration is in milliseconds. Validity is measured on
 * CLOCK_MONOTONIC from the moment a request was sent, never from wall
 * clocks.
 *
 * Guarantees, and what they assume (docs/faults.md shows how they are
 * tested: a seeded fault suite against real servers):
 *  - Exclusion with fences. Two handles hold one name at once only when the
 *    store lost the first one's hold (its lease ran out while it was paused
 *    or cut off, the store was wiped or evicted the key); then the later
 *    holder's fence is larger, so a resource that refuses fences below the
 *    highest it has seen refuses the stale holder's writes.
 *  - Fences strictly increase per name, across holders, clients and
 *    restarts, as long as: Redis: the server's clock (TIME) never goes back
 *    and fewer than one holder per microsecond is granted (a missing
 *    counter starts again from the clock, so FLUSHALL, eviction or a
 *    restart without persistence does not make fences go back); etcd and
 *    ZooKeeper: the store keeps its data (fences are its revisions and
 *    zxids, which start again on a wiped or re-created cluster).
 *  - A lost hold is reported (on_lost callback, DLOCK_ELOST on the next
 *    call, dlock run stopping its command) before another client can take
 *    the lock, provided the two machines' clocks run at the same rate
 *    within the drift margin (1% of the lease + 2 ms) and the holder's
 *    process is not paused (a paused or swapped-out holder is protected by
 *    its fence alone). The margin also allows the holder's threads to be
 *    scheduled up to 5% of the lease (at most 50 ms) late. A store that
 *    deletes the lock (FLUSHALL, eviction, an operator) can hand it out at
 *    once; the holder learns it at its next renewal (a third of the lease).
 *    So can an etcd before 3.5.12 (Debian 12 ships 3.4.23): a leader that
 *    stalls (paused, swapped out) for longer than a lease and comes back
 *    revokes the leases that ran out in its own memory meanwhile, though
 *    their clients renewed them with the new leader (etcd issue 15247);
 *    keep etcd leases longer than the longest stall you expect. A renewal
 *    such a stale leader answers is not believed (its raft term is behind
 *    one the client has seen), when the URL names another member.
 *  - A killed holder's lock is free within its lease (Redis, etcd) or the
 *    session timeout (ZooKeeper); a killed waiter's place within
 *    waiter_lease (Redis) or its session's lease or timeout. A lock handed
 *    to a waiter that had died is free again within about waiter_lease of
 *    its death (Redis: a hand-over carries only what is left of the
 *    waiter's place until its new holder renews it; the waiters behind
 *    learn at their next heartbeat); on ZooKeeper and etcd a dead waiter's
 *    node or key goes with its session.
 *  - A wait returns within its budget plus one command timeout, and a try
 *    (a wait of 0) within one command timeout, whatever the store does; an
 *    unreachable store is retried within the budget and reported as
 *    DLOCK_EUNREACHABLE, never as a lock held by someone else. A wait's
 *    requests end at most a tenth of a command timeout (200 ms at least)
 *    after its budget, and its clean-up (leaving the queue; a multi-lock
 *    giving back the names it took) at most a whole one after it, or as
 *    long as a request if the store did not answer the wait's last one. A try's requests (a
 * multi-lock's one-step request and its names taken one by one) all end one command timeout after
 * the call began, and its clean-up gets what they leave of it. A release of a multi-lock shares one
 * command timeout among its names. A clean-up the store does not answer in time is given up, and
 *    what it would have freed ends with its lease (or waiter lease, or
 *    session) in the store.
 *  - A wait never hangs on a store that does not answer, budget or not: it
 *    tries one that stopped answering for the client's unreachable_wait
 *    (30 s unless the URL says otherwise) from the first failed try, and
 *    one it never reached for 1 s, then returns DLOCK_EUNREACHABLE (its
 *    last try, and leaving the queue, may take a command timeout each). A
 *    wait parked behind a holder finds an outage at the client's next
 *    failed renewal or heartbeat (a third of the lease, or of
 *    waiter_lease), or when the holder's lease ends. A grant that comes
 *    back after its lease could have run out counts as no answer, and
 *    every retry waits a growing, jittered delay first (a few tries a
 *    second at most): a wait that cannot succeed never floods the store.
 *  - A renewal never takes back a lock that lapsed.
 *
 * Since 0.1 unless marked otherwise.
 */
#ifndef DLOCK_H
#define DLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif

#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 3
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION       "0.3.0"

/* Returns the library's version string ("0.3.0"). */
DLOCK_API const char *dlock_version(void);

/* ---------------------------------------------------------------- errors */

enum {
    DLOCK_OK = 0,
    DLOCK_EINVAL = 1,       /* bad argument: malformed URL, bad name, zero lease... */
    DLOCK_ENOMEM = 2,       /* out of memory */
    DLOCK_EBUSY = 3,        /* held by someone else (a try that did not wait) */
    DLOCK_ETIMEDOUT = 4,    /* still held by someone else when the wait budget ran out */
    DLOCK_EUNREACHABLE = 5, /* the server cannot be reached or stopped answering */
    DLOCK_ELOST = 6,        /* a lock this handle held was lost (lease ran out, key removed,
                               taken over) */
    DLOCK_ENOTOWNER = 7,    /* release/extend of a lock this handle (token) does not hold */
    DLOCK_EPROTO = 8,       /* the server answered something that is not a valid reply */
    DLOCK_ESERVER = 9,      /* the server refused the request (auth, OOM, read-only...) */
    DLOCK_ENOTSUP = 10,     /* the backend cannot do this */
    DLOCK_ECANCELED = 11,   /* the wait was ended by dlock_cancel() */
    DLOCK_EDEADLK = 12,     /* it could only wait for itself (a reader asking to write;
                               an owner asking for its name as another kind) */
    DLOCK_EQUEUEFULL = 13,  /* too many threads of this client wait for the lock */
};

/* Static text for a code ("held by someone else"). Never NULL. */
DLOCK_API const char *dlock_strerror(int code);

/* Detail of the calling thread's most recent failed dlock call, e.g.
 * "redis://10.0.0.9:6379: connect: Connection refused". Valid until the
 * thread's next dlock call. "" when there is no detail. Never NULL. */
DLOCK_API const char *dlock_errmsg(void);

/* ---------------------------------------------------------------- client */

typedef struct dlock_client dlock_client;

/*
 * Opens a client for the store named by url. The URL scheme picks the
 * backend:
 *
 *   redis://[user:password@]host[:port][/db][?options]   one Redis server
 *   rediss://[user:password@]host[:port][/db][?options]  (since 0.3) the same over TLS:
 *                         the server's certificate verified (the system's CAs, or
 *                         cacert=FILE) for the host (or sni=NAME); cert=FILE and
 *                         key=FILE a client certificate; insecure=1 verifies
 *                         nothing (logged as a warning). Not verified: DLOCK_ESERVER
 *   redis+unix:///path/to/redis.sock[?options]             the same over a unix socket
 *   redis+sentinel://[user:password@]s1[:port],s2[:port],.../MASTERNAME[?options]
 *                         (since 0.3) the master of a Sentinel-managed Redis, found
 *                         through any sentinel that answers (port 26379 by default),
 *                         followed across failovers; user info is the data nodes'
 *                         auth, sentinel_password=PW (and sentinel_user=NAME) the
 *                         sentinels', db=N the database. A lock whose keys a
 *                         failover lost (asynchronous replication) is reported
 *                         lost by its next renewal; wait=N (below) makes such a
 *                         loss rarer.
 *
 * Redis user info: redis://secret@host and redis://:secret@host send AUTH
 * secret, redis://user:secret@host AUTH user secret (docs/dlock.1, URLS).
 *
 * Options (query string; durations as dlock_parse_duration() reads them: a
 * plain number is seconds, or with a unit: 250ms, 2s, 1m):
 *   prefix=NAME           key prefix (default "dlock"); keys are PREFIX:{name}...
 *                         (letters, digits and _-.:/)
 *   connect_timeout=DUR   connect timeout (default 2s)
 *   timeout=DUR           per-command timeout (default 5s)
 *   lease=DUR             lease of locks acquired with renewal (default 30s,
 *                         at least DLOCK_LEASE_MIN_MS); they are renewed every
 *                         lease/3
 *   unreachable_wait=DUR|forever
 *                         (since 0.3) how long a wait goes on trying a store that stopped
 *                         answering (default 30s), counted from the first
 *                         try that found it so; then the wait ends with
 *                         DLOCK_EUNREACHABLE. forever: until its budget ends
 *                         or it is cancelled. A store this client never
 *                         reached is tried for 1 s at most (less when this is
 *                         shorter), whatever is asked here (any store)
 *   label=TEXT            a label recorded with every hold of this client, next
 *                         to its host name, pid and start time, and shown by
 *                         dlock_query_holders() and `dlock status`: up to 63
 *                         bytes of UTF-8 without control characters (any store)
 *   pool=N                command connections shared by all threads (default 2,
 *                         at most 64); concurrent commands are pipelined on them
 *   waiter_lease=DUR      how long a queued waiter keeps its place without a
 *                         heartbeat (default 6s, at least 100ms); waiters send
 *                         one every third
 *   local_queue=on|off    (default off) threads of this client waiting for the
 *                         same lock queue here, in arrival order, and only the
 *                         first of them queues on the server: one waiter per
 *                         lock and client on the server, one wake-up per release
 *   max_local_waiters=N   with local_queue=on: past N threads waiting for one
 *                         lock here, acquire fails at once with DLOCK_EQUEUEFULL
 *   notify=pubsub|stream  how a release tells this client's waiter it is its
 *                         turn. pubsub (default): PUBLISH to the client's own
 *                         channel (PREFIX:wake:<client id>), which it
 *                         SUBSCRIBEs to on one subscriber connection;
 *                         cheapest, but a notice sent while that connection is
 *                         down is gone, and the waiter finds out by asking the
 *                         server again when it reconnects or at its next
 *                         heartbeat. stream: XADD to one stream per lock and
 *                         client (trimmed to ~64 entries, expiring an hour after
 *                         the last), read with XREAD from where the client
 *                         stopped, so a notice survives a dropped connection;
 *                         costs a key per lock and client that waited, and a
 *                         CLIENT UNBLOCK when a new lock is waited for while
 *                         the client's XREAD is blocked on others.
 *   wait=N                (since 0.3; a master with replicas) each grant,
 *                         renewal, extension and release counts only once N
 *                         replicas (0..64, default 0) acknowledged it (WAIT N,
 *                         on a connection of its own); a grant they did not
 *                         is given back and fails with DLOCK_EUNREACHABLE.
 *                         Makes a failover's loss rarer, not impossible
 *   wait_timeout=DUR      how long such a change waits for them (default 1s,
 *                         less than timeout)
 *
 * The client connects lazily: a server that is down is reported by the first
 * call that needs it, as DLOCK_EUNREACHABLE, within seconds also by a wait
 * (see unreachable_wait), with its address and the cause (refused, a name
 * that does not resolve). Refused credentials are DLOCK_ESERVER, at once. On
 * success *out owns a client
 * that must be closed with dlock_client_close(). On failure *out is NULL.
 * Returns DLOCK_OK, DLOCK_EINVAL (bad URL, detail in dlock_errmsg()) or
 * DLOCK_ENOMEM.
 */
DLOCK_API int dlock_client_open(const char *url, dlock_client **out);

/* (since 0.3) As dlock_client_open(), with more options given apart from
 * the URL: options is a query string without its '?' ("lease=10s&label=
 * night%20job", values %-encoded as in a URL), or NULL or "" for none. They
 * are read as the URL's options would be (the same keys, the same checks),
 * and one the URL sets too is taken from options: a program's own settings
 * (a command line's) over a URL it was handed. The URL stays as given: no
 * message shows options, and url is what messages name. */
DLOCK_API int dlock_client_open_with(const char *url, const char *options, dlock_client **out);

/* Closes the client: stops its renewal thread and closes its connections.
 * Free (or detach) every lock handle of the client first: a handle left open
 * is not released, and its lock stays held on the server until its lease
 * runs out. It returns within about one command timeout (URL option
 * timeout): a renewal already sent is let finish or time out, never cut off
 * half way. On Redlock it does not wait for a node that does not answer:
 * that node's connection is closed in the background, within one command
 * timeout after the call returns. dlock_client_close(NULL) does nothing. */
DLOCK_API void dlock_client_close(dlock_client *client);

/* ---------------------------------------------------------------- logging */

/* Log levels, most severe first. Each level includes those above it. */
enum {
    DLOCK_LOG_OFF = 0,
    DLOCK_LOG_ERROR = 1, /* a hold lost (renewal refused, validity ran out, the store
                            no longer has it), a store's session lost */
    DLOCK_LOG_WARN = 2,  /* a renewal or heartbeat failed and is retried (once per
                            outage; the retries after it at info); the store
                            unreachable during a wait (once per outage); a release
                            that may not have reached the store; credentials the
                            store does not use */
    DLOCK_LOG_INFO = 3,  /* renewals succeed again after failures (the store is back),
                            each further failed renewal of an outage, each retry of
                            a wait on an unreachable store, the store
                            reachable again during a wait, a lock found held
                            and waited for (how: queued, blocked in the store or
                            polling), a lock acquired after a wait or handed over
                            by the store, a wait cancelled, a forced unlock (of
                            a lock dlock_force_unlock2() did not find free) */
    DLOCK_LOG_DEBUG = 4, /* every acquisition, re-entry, release, extension,
                            verification and renewal round trip, a forced
                            unlock of a lock found free */
};

/*
 * Receives one log message: a line of text without a newline, e.g.
 * "lock 'billing' lost: renewal refused: ...". Messages name locks, fences,
 * the store (its URL with the password masked) and errors; never a
 * password or an owner token. `msg` is valid during the call only.
 */
typedef void (*dlock_log_fn)(int level, const char *msg, void *arg);

/*
 * Sends the client's log messages of `level` and more severe to fn (level
 * DLOCK_LOG_OFF or fn NULL: no logging, the default). Logging is per
 * client: two parts of a program with clients of their own log apart.
 *
 * fn is called on the thread where the event happens: the caller's (in an
 * acquire, a release...) or the client's renewal and watchdog threads; it
 * may be called from several threads at once, so it must be thread-safe,
 * and it should return quickly (a renewal waits for it). It may call dlock
 * functions, except dlock_client_set_log(). May be called at any time; once
 * it returns, the previous fn is not called any more. When logging is off a
 * message costs one atomic load.
 * Returns DLOCK_OK or DLOCK_EINVAL (client NULL, level out of range).
 * Since 0.2.
 */
DLOCK_API int dlock_client_set_log(dlock_client *client, int level, dlock_log_fn fn, void *arg);

/* "error", "warn", "info", "debug" ("off" for DLOCK_LOG_OFF, "" for others).
 * Since 0.2. */
DLOCK_API const char *dlock_log_level_name(int level);

/* ---------------------------------------------------------------- capabilities */

/*
 * What a store can do. Every store takes, releases and renews plain locks,
 * and takes multi-locks (all or none); the rest depends on the store, and a
 * call that needs what the client's store lacks fails with DLOCK_ENOTSUP and
 * a message naming the store and the capability. Since 0.2.
 */
enum {
    DLOCK_CAP_FENCE = 1u << 0,        /* "fence": every acquisition carries a fencing token */
    DLOCK_CAP_FIXED_LEASE = 1u << 1,  /* "fixed-lease": dlock_acquire_for() */
    DLOCK_CAP_EXTEND = 1u << 2,       /* "extend": dlock_extend() sets a lease */
    DLOCK_CAP_ADOPT = 1u << 3,        /* "adopt": dlock_lock_adopt() takes over a held lock */
    DLOCK_CAP_FORCE_UNLOCK = 1u << 4, /* "force-unlock": dlock_force_unlock() */
    DLOCK_CAP_QUERY = 1u << 5,        /* "query": dlock_query() */
    DLOCK_CAP_FAIR = 1u << 6,         /* "fair": DLOCK_FAIR */
    DLOCK_CAP_READ_WRITE = 1u << 7,   /* "read-write": DLOCK_READ, DLOCK_WRITE */
    DLOCK_CAP_SEMAPHORE = 1u << 8,    /* "semaphore": dlock_semaphore_open() */
    DLOCK_CAP_MULTI_ATOMIC = 1u << 9, /* "multi-atomic": a multi-lock can be taken in one step */
    DLOCK_CAP_INTEROP = 1u << 10,     /* "interop": DLOCK_SIMPLE */
    DLOCK_CAP_NOTIFY = 1u << 11,      /* "notify": waiters are woken by the store, not polling */
    DLOCK_CAP_SESSION = 1u << 12,     /* "session": locks live as long as the client's session
                                         with the store, not by a lease of their own */
    DLOCK_CAP_LIST = 1u << 13,        /* "list": dlock_list() finds the locks under a prefix */
};

/* The capabilities (DLOCK_CAP_* bits) of the client's store. Since 0.2. */
DLOCK_API unsigned dlock_client_caps(const dlock_client *client);

/* The short name of one capability bit ("fixed-lease"), or "" if cap is not
 * exactly one known bit. Since 0.2. */
DLOCK_API const char *dlock_cap_name(unsigned cap);

/* The name of the client's store ("Redis"). Since 0.2. */
DLOCK_API const char *dlock_client_store(const dlock_client *client);

/* ---------------------------------------------------------------- durations */

/*
 * Parses a duration the way URL options and the command line do: a
 * non-negative decimal number, optionally with a fraction, and a unit: ms,
 * s, m or h. A number without a unit is in seconds. Nothing else is
 * accepted (no spaces, signs, exponents or hexadecimal). Sets *ms (rounded
 * down) and returns DLOCK_OK, or DLOCK_EINVAL with the reason in
 * dlock_errmsg(). Since 0.2.
 */
DLOCK_API int dlock_parse_duration(const char *text, int64_t *ms);

/* The longest lease and the longest wait (other than DLOCK_WAIT_FOREVER)
 * the library takes: 366 days. Longer ones are DLOCK_EINVAL. Since 0.2. */
#define DLOCK_DURATION_MAX_MS (366LL * 24 * 3600 * 1000)

/* The shortest lease the library takes, fixed (dlock_acquire_for,
 * dlock_extend) or renewed (the URL's lease=): 20 ms. Shorter ones are
 * DLOCK_EINVAL. Why: a lease is valid from the send of the request that
 * took it, less the drift margin (1% + 2 ms, and up to 5% for scheduling:
 * 3.2 ms of 20 ms), and the reply's round trip is spent from it as well.
 * 20 ms keeps more than half of the lease after a 5 ms round trip; a 3 ms
 * lease kept 0.8 ms before the reply came, and one of 2 ms or less none at
 * all: a grant that could never be held, only taken and given back.
 * Since 0.3. */
#define DLOCK_LEASE_MIN_MS 20

/* ---------------------------------------------------------------- locks */

typedef struct dlock_lock dlock_lock;

/* Flags for dlock_lock_open() and friends: the kind of lock.
 *
 * One name is one lock: every kind on a name excludes the others, on every
 * store (a plain and a fair handle are the same mutex; the interop key, the
 * read-write lock and the semaphore are kinds of their own). A request of
 * one kind on a name held, or waited for, as another kind is DLOCK_EBUSY
 * for a try (dlock_errmsg() names the kind it is held as), and a wait waits
 * until that kind lets the name go; never do two kinds hold a name at once.
 * An owner asking for its name as another kind than it holds it (a handle
 * made by dlock_lock_dup()) gets DLOCK_EDEADLK at once: it would wait for
 * itself.
 * Across kinds, first come, first served: a request waits behind waiters
 * of another kind that came before it (on Redis for two kinds at a time: a
 * third kind waits by polling, in no order). A waiter behind another kind
 * takes the name within some 100 ms of its release (Redis: it polls for
 * it; ZooKeeper, etcd: a watch). Since 0.3; before, the kinds of one name
 * were separate locks. Use one kind per name. */
enum {
    /* Interop mode: the lock is the plain key NAME holding the owner token,
     * taken with SET NX PX and released by compare-and-delete, the
     * convention of redis-py's Lock, node-redlock and redsync, so all of them
     * exclude each other on the same key. Waiters poll (with backoff bounded
     * by the holder's remaining lease) since other clients publish nothing.
     * Fencing tokens still come from the counter PREFIX:{NAME}:fence. The
     * name's other kinds look at the key NAME too (a key another client set
     * holds the name for them), unless the client's ACL does not let it read
     * NAME; other clients look only at NAME. */
    DLOCK_SIMPLE = 1u << 0,
    /* Fair lock: the same lock as a plain one of that name, taken strictly
     * in the order requests reached the server. A plain handle may take a
     * free lock ahead of the queue (after a holder's lease ran out); a fair
     * handle never does, and hands such a lock to the head of the queue. */
    DLOCK_FAIR = 1u << 1,
    /* Read-write lock NAME: a DLOCK_READ handle holds the name shared with
     * other readers, a DLOCK_WRITE handle alone. First come, first served:
     * readers at the head of the
     * queue go in together, and a reader that comes after a waiting writer
     * waits for it, so writers are not starved. An owner holding the write
     * lock may take the read lock (dlock_lock_dup()) and then release the
     * write lock: a downgrade. A reader asking for the write lock gets
     * DLOCK_EDEADLK at once (it would wait for itself). */
    DLOCK_READ = 1u << 2,
    DLOCK_WRITE = 1u << 3,
    /* The semaphore NAME, for dlock_query() and dlock_force_unlock();
     * handles are made with dlock_semaphore_open(). */
    DLOCK_SEMAPHORE = 1u << 4,
};

/*
 * Makes a handle for the lock `name` on `client`. Nothing is sent to the
 * server. A name is 1..DLOCK_NAME_MAX bytes of well-formed UTF-8 text
 * without control characters: no C0 control (U+0000..U+001F), DEL (U+007F)
 * or C1 control (U+0080..U+009F), no overlong form, surrogate or code point
 * above U+10FFFF (dlock_errmsg() names the byte and why). Every such name
 * is a name on every store, one lock per name, and dlock_list() gives it
 * back as it was given: a store writes into its keys or paths, as
 * percent-escapes (%XX of the UTF-8 bytes), only what it cannot hold or
 * would read as structure (ZooKeeper: characters its paths refuse, empty,
 * "." and ".." parts; etcd: '/'; Redis: a first '}'; each store's doc lists
 * them, '%' with them), so every other name has the key or path peers
 * use for it. The one store limit: a name whose escaped path would be
 * longer than a ZooKeeper lock path may be (959 bytes, the base included)
 * is DLOCK_EINVAL there, saying so. On failure *out is NULL. Each hold
 * of the handle has an owner token of its own (the client's id and 64
 * random bits; an acquisition after a hold, or after one that failed with
 * anything but a try's DLOCK_EBUSY or DLOCK_EDEADLK, makes a new one): a
 * store that comes back with an older state (a failover to a replica that
 * missed the last writes) may bring back an earlier hold, released since,
 * or a queue place left behind, and that is never taken for the current
 * one (it ends with its lease); nor is a hold the store grants again to a
 * wait it has served already (the place it held came back): the current
 * hold is reported lost by its next renewal or release (Redis). Handles that share a token through
 * dlock_lock_dup() keep it. Returns DLOCK_OK,
 * DLOCK_EINVAL (bad name or flags) or DLOCK_ENOMEM.
 */
#define DLOCK_NAME_MAX 512
DLOCK_API int dlock_lock_open(dlock_client *client, const char *name, unsigned flags,
                              dlock_lock **out);

/*
 * Makes a handle that takes over a lock already held under `token` (the
 * owner token another handle or process printed, see dlock_lock_token()),
 * so a lock can be handed from one process to another. The server is asked:
 * if `name` is held under `token`, the handle becomes its holder (one hold)
 * with the name's fence counter as its fence (a valid fence for the
 * current holder: above every earlier holder's) and the remaining lease (fixed; call
 * dlock_extend() or dlock_keepalive() to keep it). Returns DLOCK_OK,
 * DLOCK_ENOTOWNER (not held under that token), DLOCK_EINVAL, or a
 * connection error.
 */
DLOCK_API int dlock_lock_adopt(dlock_client *client, const char *name, const char *token,
                               unsigned flags, dlock_lock **out);

/* A new handle for the same name and the same owner token as `lock` has
 * now (its current hold's), of the kind `flags` says: the way an owner
 * holding the write lock takes the read lock too (a downgrade: take the
 * read lock, then release the write lock). Both handles keep that token
 * from then on (one owner across them), so what dlock_lock_open() says of
 * a store that comes back with an older state does not hold for them.
 * Holds are counted per handle. On Redis, one owner waits for a
 * read-write lock one way at a time (its handles share one place in the
 * queue): while one of its handles waits to write, another's wait to read
 * is refused with DLOCK_EDEADLK, and the other way round. Returns
 * DLOCK_OK, DLOCK_EINVAL or DLOCK_ENOMEM. */
DLOCK_API int dlock_lock_dup(const dlock_lock *lock, unsigned flags, dlock_lock **out);

/*
 * Makes a handle on the counting semaphore `name` of `permits` permits;
 * acquiring it takes `take` permits at once, all or nothing (0 < take <=
 * permits). Each holder's permits carry its lease and are renewed and
 * reported lost like a lock; a holder that dies gives them back when its
 * lease runs out. Waiters are served in order: a large request at the head
 * of the queue is not overtaken by small ones. Every user of a semaphore
 * must give the same `permits`: while anyone holds or waits for permits,
 * acquiring with another number fails with DLOCK_EINVAL (the message names
 * the number in use); an idle semaphore takes the number of the next
 * request. Returns DLOCK_OK, DLOCK_EINVAL or DLOCK_ENOMEM.
 */
DLOCK_API int dlock_semaphore_open(dlock_client *client, const char *name, unsigned permits,
                                   unsigned take, dlock_lock **out);

/*
 * Makes a handle on several mutexes at once (a multi-lock): acquiring it
 * takes all of `names` or none, within one wait budget; releasing it
 * releases them all. On a store with DLOCK_CAP_MULTI_ATOMIC (Redis: one
 * script; ZooKeeper: one multi transaction creating every node) a
 * multi-lock whose names are all free is taken in one atomic step;
 * otherwise, or while the store is unreachable, they are taken one by one in
 * one canonical order (sorted names), given back if the budget runs out, so
 * two multi-locks over the same names never deadlock. Taken one by one, the
 * names already held are renewed while the others are waited for, and a
 * fixed lease (dlock_acquire_for) is then set on every name: it starts when
 * the multi-lock holds them all (one more request per name). Duplicate
 * names count once. flags: 0 or DLOCK_FAIR. Each member has its own fence
 * (dlock_lock_member()); dlock_lock_fence() of the multi-lock is the first
 * member's. Returns DLOCK_OK, DLOCK_EINVAL or DLOCK_ENOMEM.
 */
DLOCK_API int dlock_multi_open(dlock_client *client, const char *const *names, size_t n,
                               unsigned flags, dlock_lock **out);

/* Members of a multi-lock, in the canonical order: count and the i-th (for
 * its name and fence). A single lock is its own only member. The member is
 * owned by the multi-lock; do not free or acquire it. */
DLOCK_API size_t dlock_lock_members(const dlock_lock *lock);
DLOCK_API const dlock_lock *dlock_lock_member(const dlock_lock *lock, size_t i);

/* Frees a handle. A lock it still holds is released first (best effort).
 * dlock_lock_free(NULL) does nothing. */
DLOCK_API void dlock_lock_free(dlock_lock *lock);

/* Frees a handle WITHOUT releasing its lock: the lock stays held on the
 * server under the handle's token until its lease runs out, or until
 * another handle takes it over with dlock_lock_adopt(). Renewal stops. This
 * is how a lock is handed to another process (DLOCK_CAP_ADOPT). On a
 * session store (DLOCK_CAP_SESSION) a lock taken with a renewed lease stays
 * as long as the client's session (until dlock_client_close(), or the
 * session's loss), and one with a fixed lease (dlock_acquire_for) until
 * that lease ends. NULL does nothing. */
DLOCK_API void dlock_lock_detach(dlock_lock *lock);

#define DLOCK_WAIT_FOREVER (-1)

/*
 * Acquires the lock with a lease the client renews by itself (every lease/3,
 * see the client's lease option) until dlock_release().
 *
 * wait_ms: 0 = one attempt; > 0 = wait at most that long; DLOCK_WAIT_FOREVER.
 * Waiting is woken by the server when the holder releases (no polling), and
 * each wait is still bounded by the holder's remaining lease.
 *
 * If the handle already holds the lock, the hold count goes up by one
 * (reentrancy), the fence stays the same, and the server is asked to
 * confirm the hold and keep the lease at least as long. The count lives in
 * the handle: an owner is a handle.
 *
 * Returns DLOCK_OK (held; see dlock_lock_fence()), DLOCK_EBUSY (wait_ms was
 * 0 and someone else holds it), DLOCK_ETIMEDOUT, DLOCK_ECANCELED (see
 * dlock_cancel()), DLOCK_ELOST (the handle had
 * held the lock and lost it; the loss is now reported and cleared),
 * DLOCK_EINVAL, DLOCK_EUNREACHABLE, DLOCK_EPROTO or DLOCK_ESERVER.
 */
DLOCK_API int dlock_acquire(dlock_lock *lock, int64_t wait_ms);

/* As dlock_acquire() but with a fixed lease of lease_ms that is not
 * renewed: the lock expires lease_ms after it was granted unless extended.
 * A lease shorter than DLOCK_LEASE_MIN_MS is DLOCK_EINVAL. */
DLOCK_API int dlock_acquire_for(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms);

/*
 * Ends the current wait on this handle (in another thread), or the next one
 * if none is in progress, with DLOCK_ECANCELED; the waiter leaves the
 * server's queue, and a lock handed to it meanwhile is passed on. A parked
 * waiter sees the cancel at once, one with a request to the store in flight
 * when the request returns (within a command timeout); leaving the queue
 * then takes at most one more command timeout. For a program that must stop
 * waiting on a signal: call it from a thread that waits for signals (it is
 * not async-signal-safe). Returns DLOCK_OK or DLOCK_EINVAL. Since 0.1.
 */
DLOCK_API int dlock_cancel(dlock_lock *lock);

/* dlock_acquire(lock, 0). */
DLOCK_API int dlock_try_acquire(dlock_lock *lock);

/*
 * Gives up one hold. When the count reaches zero the lock is released and
 * handed straight to the next waiter, if any (inner holds are given up
 * locally, without a request).
 * Returns DLOCK_OK, DLOCK_ENOTOWNER (the handle does not hold it, or the
 * server says someone else does: nothing is changed there), DLOCK_ELOST (it
 * was lost before this call; local state is cleared), or a connection error
 * (the lock then expires at the end of its lease).
 */
DLOCK_API int dlock_release(dlock_lock *lock);

/*
 * Leases of a held lock, three calls:
 *
 *   dlock_renew(l)         lease back to its full length now; renewal as it was
 *   dlock_extend(l, ms)    a fixed lease of ms from now; renewal OFF
 *   dlock_keepalive(l)     renewal ON, with the client's lease
 *
 * A lock acquired with dlock_acquire() is renewed by the client until it is
 * released; dlock_extend() turns that off: the lock then ends lease_ms from
 * now unless extended again (call dlock_keepalive() to renew it again).
 * A user of redsync's Extend() or Redisson's lock "touch" wants
 * dlock_renew(), which keeps renewing a renewed lock.
 */

/* Sets the remaining lease of a held lock to lease_ms from now, and turns
 * automatic renewal OFF: the lock is held no longer than lease_ms unless
 * extended again, even if it was acquired with dlock_acquire(). Returns
 * DLOCK_OK, DLOCK_ENOTOWNER, DLOCK_ELOST (the hold ends), DLOCK_EINVAL
 * (lease shorter than DLOCK_LEASE_MIN_MS), DLOCK_ENOTSUP (a store without
 * "extend": ZooKeeper) or a connection error. */
DLOCK_API int dlock_extend(dlock_lock *lock, int64_t lease_ms);

/* Turns automatic renewal on for a held lock (as if acquired with
 * dlock_acquire()). Returns DLOCK_OK, DLOCK_ENOTOWNER or DLOCK_ELOST. */
DLOCK_API int dlock_keepalive(dlock_lock *lock);

/*
 * Renews a held lock now: its lease goes back to its full length from now
 * (the client's lease for a renewed lock; the last fixed lease given, by
 * dlock_acquire_for() or dlock_extend(), for one that is not), and
 * automatic renewal stays as it was: a renewed lock goes on being renewed,
 * a fixed lease stays fixed. A lock held by a session of its store
 * (DLOCK_CAP_SESSION: ZooKeeper, etcd's renewed locks) has no lease of its
 * own: the hold is confirmed with the store, and its session is kept
 * alive by the client as before. Returns DLOCK_OK, DLOCK_ENOTOWNER,
 * DLOCK_ELOST (the hold ends), DLOCK_ENOTSUP or a connection error.
 * Since 0.2.
 */
DLOCK_API int dlock_renew(dlock_lock *lock);

/*
 * Says whether the handle still holds the lock, without asking the server:
 * DLOCK_OK (held and locally valid), DLOCK_ELOST (lost; stays reported until
 * the next acquire or release), DLOCK_ENOTOWNER (not held). It knows what
 * the renewer learned: a lock deleted in the store (dlock_force_unlock(),
 * FLUSHALL) still says DLOCK_OK until the next renewal (a third of the
 * lease) finds it gone; a lock with a fixed lease is not renewed, so only
 * the end of its lease makes it DLOCK_ELOST. Ask the server with
 * dlock_lock_verify().
 */
DLOCK_API int dlock_lock_check(dlock_lock *lock);

/*
 * Asks the store whether this handle still holds the lock (one round trip;
 * Redisson's isHeldByCurrentThread, etcd's IsOwner): DLOCK_OK (the store
 * has it under this handle's owner token, and it is valid here too),
 * DLOCK_ELOST (lost: the store no longer has it under this handle, or it
 * was already known lost), DLOCK_ENOTOWNER (the handle does not hold it),
 * DLOCK_EINVAL, or DLOCK_EUNREACHABLE (and the other connection errors:
 * nothing is known then, and nothing changes).
 *
 * A loss found this way is reported like any other: the on_lost callback
 * is called (on the calling thread, before this returns), and the handle
 * says DLOCK_ELOST (dlock_lock_check(), the next acquire or release) until
 * the next acquire or release. Nothing is changed in the store: the lease
 * is neither lengthened nor shortened.
 *
 * Exclusive kinds (plain, fair, --simple, write): DLOCK_OK means nobody else
 * holds the name. Shared kinds (a read hold, semaphore permits): DLOCK_OK
 * means this handle's share is still there (its read hold, its `take`
 * permits); it says nothing about the other holders. A multi-lock is
 * verified member by member: DLOCK_OK when the store has every one. The
 * answer is the store's at the moment it answered: use the fencing token
 * to protect a resource, not a verification made before writing to it.
 * Since 0.2.
 */
DLOCK_API int dlock_lock_verify(dlock_lock *lock);

/* The fencing token of the current (or last) acquisition, 0 before any.
 * It strictly increases from one holder of the name to the next (numbers
 * may be skipped); pass it to the resource you protect so it can refuse
 * writes from a stale holder (one whose fence is below the highest seen). */
DLOCK_API uint64_t dlock_lock_fence(const dlock_lock *lock);

/* The owner token of the handle's current (or last) acquisition (32 hex
 * digits; a new one after a hold, see dlock_lock_open()): give it to dlock_lock_adopt()
 * in another process to hand the lock over. Owned by the handle. */
DLOCK_API const char *dlock_lock_token(const dlock_lock *lock);

/* The lock's name as given to dlock_lock_open(). Owned by the handle. */
DLOCK_API const char *dlock_lock_name(const dlock_lock *lock);

/* Current hold count of the handle (0 when not held). */
DLOCK_API unsigned dlock_lock_holds(const dlock_lock *lock);

/* Milliseconds of local validity left (lease minus drift margin, measured
 * from when the last grant or renewal was sent); 0 when not held. */
DLOCK_API int64_t dlock_lock_remaining_ms(dlock_lock *lock);

/*
 * Called once when a held lock is lost: its renewal was refused (someone
 * else owns it or the key is gone), or its local validity ran out (fixed
 * lease expired, or renewals failed until the lease could have run out).
 * `code` is DLOCK_ELOST and `why` a readable reason. The callback runs on
 * the client's renewal thread before any other client can have taken the
 * lock (as long as clocks run at the same rate within the drift margin),
 * or on the thread in dlock_lock_verify() when the store tells it the lock
 * is gone; it must return quickly and must not free the handle. A call that ends the
 * hold (dlock_release(), dlock_acquire() and the like returning DLOCK_ELOST
 * for it, dlock_lock_free()) waits for a callback under way, and after it
 * the callback is not called for that hold: when the call told the loss
 * first, the callback never comes. Set before acquiring.
 */
typedef void (*dlock_lost_fn)(dlock_lock *lock, int code, const char *why, void *arg);
DLOCK_API void dlock_lock_on_lost(dlock_lock *lock, dlock_lost_fn fn, void *arg);

/* ---------------------------------------------------------------- operators */

/* What the server says about a lock name. */
typedef struct dlock_status {
    int held;              /* 1 if someone holds it */
    char owner[72];        /* owner token of the holder, "" when free */
    unsigned holds;        /* 1 when held: re-entrant counts live in the owning handle */
    int64_t lease_ms;      /* remaining lease on the server, -1 if none */
    uint64_t last_fence;   /* the fence counter: the holder's fence, or above it when
                              attempts were refused since (fences may skip numbers);
                              ZooKeeper and etcd keep no counter (their fences are
                              zxids and revisions): there it is the holder's fence,
                              0 when free */
    unsigned waiters;      /* waiters queued on the server */
    unsigned shared;       /* readers, or semaphore holders */
    unsigned permits_used; /* semaphore: permits taken */
    unsigned permits;      /* semaphore: permits its users declare */
} dlock_status;

/* Reads the state of `name`. flags pick the lock: 0 or DLOCK_FAIR the
 * mutex, DLOCK_SIMPLE its interop key, DLOCK_READ or DLOCK_WRITE the
 * read-write lock, DLOCK_SEMAPHORE the semaphore.
 * Returns DLOCK_OK, DLOCK_EINVAL or a connection error. */
DLOCK_API int dlock_query(dlock_client *client, const char *name, unsigned flags,
                          dlock_status *out);

/* Operator's override: releases `name` whoever holds it, and hands it to the
 * next waiter if any. The holder learns of the loss at its next renewal.
 * The fence counter is kept, so fences keep increasing. Returns DLOCK_OK
 * (also when it was free), DLOCK_EINVAL or a connection error. */
DLOCK_API int dlock_force_unlock(dlock_client *client, const char *name, unsigned flags);

/*
 * dlock_force_unlock(), and whether the lock was held: the store is asked
 * first (as dlock_query()), then the lock is released whoever holds it.
 * *was_held (if not NULL) is 1 if the query found it held (by an owner,
 * readers or permit holders), 0 if it found it free, -1 if the store cannot
 * say (no DLOCK_CAP_QUERY). Two requests, not one atomic step: a lock taken
 * between them is released all the same but reported as free, and one
 * released between them is reported as held. Returns as
 * dlock_force_unlock(); *was_held is set only on DLOCK_OK. Since 0.2.
 */
DLOCK_API int dlock_force_unlock2(dlock_client *client, const char *name, unsigned flags,
                                  int *was_held);

/*
 * One holder of a lock, as the store has it recorded. Every hold records
 * who took it: the owner token, and the host name, pid and start time of
 * the process's client, with the client's label (URL option label=).
 * A holder whose record the store does not have (a hold taken by another
 * library, e.g. Curator or etcdctl, or whose record expired) shows only
 * its owner token. Since 0.2.
 */
typedef struct dlock_holder {
    const char *owner;  /* owner token (the store's value for a foreign holder) */
    unsigned count;     /* exclusive: 1; readers: the owner's read holds; semaphore: permits */
    const char *host;   /* host name of the holder's process, "" if not recorded */
    long pid;           /* its pid, 0 if not recorded */
    int64_t started_ms; /* when its client was opened, ms since the Unix epoch, 0 if not
                           recorded */
    const char *label;  /* its client's label=, "" if none or not recorded */
} dlock_holder;

/* Called once per holder; the strings are valid during the call only. */
typedef void (*dlock_holder_fn)(const dlock_holder *holder, void *arg);

/*
 * Calls fn for every holder of `name` the store knows of now: the
 * exclusive holder, or each reader or semaphore holder (flags pick the
 * lock as in dlock_query()). A free lock calls fn never. Returns DLOCK_OK,
 * DLOCK_EINVAL, DLOCK_ENOTSUP (no DLOCK_CAP_QUERY) or a connection error.
 * Since 0.2.
 */
DLOCK_API int dlock_query_holders(dlock_client *client, const char *name, unsigned flags,
                                  dlock_holder_fn fn, void *arg);

/* Called once per lock found; `name` is valid during the call only. flags
 * say which lock of that name it is, as dlock_query() and
 * dlock_query_holders() take them: 0 the mutex (and its fair handles),
 * DLOCK_WRITE the read-write lock, DLOCK_SEMAPHORE the semaphore. */
typedef void (*dlock_name_fn)(const char *name, unsigned flags, void *arg);

/*
 * Calls fn for every lock whose name starts with `prefix` ("" for all) that
 * the store holds something of now: a holder or a queued waiter. Locks
 * taken in interop mode (DLOCK_SIMPLE) are not found: their keys look like
 * any other. The store is walked while it changes, so a lock taken or
 * freed meanwhile may be missed or reported, and the order is the store's.
 * At most `limit` locks are reported (0: no limit). Returns DLOCK_OK,
 * DLOCK_EINVAL, DLOCK_ENOTSUP (no DLOCK_CAP_LIST) or a connection error.
 * Since 0.2.
 */
DLOCK_API int dlock_list(dlock_client *client, const char *prefix, size_t limit, dlock_name_fn fn,
                         void *arg);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_H */
