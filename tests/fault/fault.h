/* SPDX-License-Identifier: MIT */
/* fault.h - the fault suite's shared pieces: configuration, the run's shared
 * memory (history, actors, resources), and the parts that use it.
 *
 * One run is one temp dir holding one file, mapped shared by every process
 * of the run (the main process, workers it forks, `dlock run` commands that
 * exec this program again): a header, a table of actors, one fenced
 * resource per lock name, and the history, an append-only array of fixed
 * records. A process killed -9 loses nothing it logged. Times are
 * CLOCK_MONOTONIC nanoseconds: one host, one clock, so intervals from
 * different processes compare directly. */
#ifndef DLOCK_FAULT_H
#define DLOCK_FAULT_H

#include "dlock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---------------------------------------------------------------- locks */

/* What a lock name is on the store: who may hold it together. */
enum { LK_MUTEX, LK_RW, LK_SEM, LK_SIMPLE };

/* How an actor takes it (a handle's kind). */
enum { H_PLAIN, H_FAIR, H_READ, H_WRITE, H_SEM, H_MULTI, H_SIMPLE, H_COUNT };

#define MAX_LOCKS     8
#define MULTI_MEMBERS 2
#define SEM_PERMITS   3
#define MAX_ACTORS    4096
#define RES_TOP       32
#define TEXT_LEN      48
#define MAX_MEMBERS   3 /* servers of one store the nemesis faults one by one (Redlock) */

typedef struct lock_def {
    char name[32];
    int kind;     /* LK_* */
    int capacity; /* semaphore permits, else 1 */
} lock_def;

/* The run's locks (fault.c): two mutexes (plain, fair and the multi-lock's
 * members), a read-write lock, a semaphore, a simple-mode lock. */
extern const lock_def fault_locks[];
extern const int fault_nlocks;

/* ---------------------------------------------------------------- history */

enum {
    EV_ACTOR = 1,  /* an actor starts: pid, kind = H_*, lock, take = proxy link */
    EV_ACQ_INV,    /* acquire invoked: op, kind, wait_ms, lease_ms (0 = renewed), take */
    EV_ACQ_OK,     /* acquired: op, fence (fence2: 2nd member), text = owner token */
    EV_ACQ_FAIL,   /* acquire failed: op, rc, text = detail */
    EV_REL_INV,    /* release invoked: op of the hold */
    EV_REL_OK,     /* released */
    EV_REL_FAIL,   /* release failed: rc, text */
    EV_LOST,       /* on_lost callback: op of the hold, text = why */
    EV_CHECK_LOST, /* dlock_lock_check() said ELOST while holding */
    EV_TERM,       /* a `dlock run` command got SIGTERM (the loss, as dlock run reports it) */
    EV_CANCEL_INV, /* dlock_cancel(): actor = target, op = target's acquire op if waiting */
    EV_CANCEL_RET,
    EV_ACCESS,   /* resource access: fence, kind = ACC_*, rc = 1 accepted / 0 refused,
                    flags EVF_CLOBBER (an accepted write lost another's update), wait_ms = value */
    EV_SPAWN,    /* `dlock run` started: op, pid = dlock's pid */
    EV_RUN_EXIT, /* `dlock run` ended: op, rc = exit status (128+N: signal N) */
    EV_NEM,      /* nemesis: kind = NEM_*, flags EVF_START/EVF_END, pid = target, take =
                    link, rc = member + 1 (a fault of one member of a group of servers,
                    Redlock's; 0: of the whole store), text = detail */
    EV_SNAP,     /* monitor: lock, wait_ms = query start (ns), rc = held, take = shared,
                    lease_ms = permits used, fence = last fence, text = owner */
    EV_PHASE,    /* run phase change: kind = PH_* */
    EV_EXIT,     /* a worker process ended: pid, rc = status (wait() style) */
    EV_VIOL,     /* a violation the main process saw itself: kind = V_*, text */
    EV_QUEUED,   /* the store said a library actor's wait is queued: op, kind (the
                    library's debug log, logged once per wait after the answer came) */
};

enum {
    EVF_REENTRANT = 1 << 0, /* an inner acquire/release of a held lock */
    EVF_CLOBBER = 1 << 1,
    EVF_START = 1 << 2,
    EVF_END = 1 << 3,
    EVF_RUN = 1 << 4,      /* through `dlock run` */
    EVF_FINAL = 1 << 5,    /* after the last heal */
    EVF_FAILED = 1 << 6,   /* nemesis action failed */
    EVF_DATALOSS = 1 << 7, /* nemesis: acknowledged data lost (lock: which, 0xffff: all) */
    EVF_MOVES = 1 << 8     /* nemesis: a fault of the master of a store that fails over to
                              another node (Sentinel, Cluster), or a slot that moves to
                              another master: clients may be served meanwhile */
};

enum { ACC_READ, ACC_WRITE, ACC_READ_SHARED };

typedef struct fev {
    _Atomic uint32_t ready; /* set last: a record is complete once ready */
    uint16_t type;
    uint16_t lock; /* lock index, 0xffff: none */
    int32_t actor; /* -1: not an actor */
    int32_t pid;
    int32_t rc;
    int32_t kind;
    int32_t flags;
    int32_t take;
    int64_t t; /* CLOCK_MONOTONIC ns */
    uint64_t op;
    uint64_t fence, fence2;
    int64_t wait_ms, lease_ms;
    char text[TEXT_LEN];
} fev;

/* ---------------------------------------------------------------- shared state */

enum { AS_IDLE, AS_WAITING, AS_HOLDING };
enum { PH_WARMUP, PH_FAULTS, PH_FINAL, PH_STOP };

typedef struct actor_slot {
    _Atomic int32_t pid;     /* process (library actor) */
    _Atomic int32_t sup_pid; /* `dlock run`: the dlock process now running, else 0 */
    _Atomic int32_t state;   /* AS_* */
    _Atomic int32_t live;
    int32_t kind, lock, link;
} actor_slot;

/* A protected resource: a counter that may be read and written only with a
 * fence no older than the newest it has seen (per the lock's kind). */
typedef struct fres {
    pthread_mutex_t mu; /* process-shared, robust */
    int kind, capacity;
    uint64_t max_excl;   /* highest fence of an exclusive access */
    uint64_t max_shared; /* highest fence of a shared (reader) access */
    int64_t value;
    uint64_t version; /* bumped by every accepted write */
    struct {
        uint64_t fence;
        int32_t actor, permits;
    } top[RES_TOP]; /* semaphore: the newest holders seen, by fence */
    int ntop;
} fres;

typedef struct fshm {
    uint64_t magic;
    uint64_t cap; /* history records */
    int64_t t0;   /* run start, ns */
    _Atomic uint64_t next;
    _Atomic uint64_t next_op;
    _Atomic int32_t next_actor;
    _Atomic int32_t phase;
    _Atomic int32_t overflow;
    int nlocks;
    lock_def locks[MAX_LOCKS];
    int multi[MULTI_MEMBERS]; /* lock indexes of the multi-lock's members */
    actor_slot actors[MAX_ACTORS];
    fres res[MAX_LOCKS];
    /* What the checker judges the history by (fault_cfg's fields of the
     * same names), kept so that `fault check SHM` can judge a kept run
     * again with the checker as it is now. */
    struct {
        char store[32];
        int lease_ms, waiter_lease_ms, timeout_ms, slack_ms, fences_from_data;
        unsigned caps;
        int lease_unit_ms, expiry_lag_ms;
        int no_store_loss;
    } judge;
    fev ev[]; /* cap records */
} fshm;

/* ---------------------------------------------------------------- configuration */

typedef struct fault_cfg {
    const char *store; /* server kind */
    uint64_t seed;
    int seconds;  /* faults are injected this long */
    int final_s;  /* then everything is healed and the run goes on this long */
    int workers;  /* library processes */
    int threads;  /* actors per library process */
    int runners;  /* `dlock run` loops */
    int links;    /* proxy links */
    int lease_ms; /* lease= of renewed locks */
    int waiter_lease_ms;
    int timeout_ms; /* timeout= (command timeout) */
    int slack_ms;   /* scheduling tolerance of the time checks */
    /* The store's fences come from its own data (etcd revisions, ZooKeeper
     * zxids), so they start again when that data is wiped: what dlock
     * documents as assumed of such stores. The checker then judges fences
     * and exclusion afresh from each wipe on. (Redis fences also follow the
     * server's clock and survive a wipe: no excuse for them.) */
    int fences_from_data;
    /* The store is a file every client writes under one lock (SQLite): a
     * client paused inside a write transaction stops every other client's
     * writes until it goes on (documented: src/backend/sqlite/README.md),
     * so a pause-client disturbs every client, as a pause-server does. Set
     * from the store's name, by the run and by `fault check` alike. */
    int pause_stops_store;
    unsigned caps; /* the store's DLOCK_CAP_* bits (the probe asks) */
    /* How long the store's server keeps a lease of L ms: L rounded up to
     * lease_unit_ms (0: as asked), plus expiry_lag_ms (dt_server_kind) */
    int lease_unit_ms, expiry_lag_ms;
    /* --no-store-loss: a loss the store caused (a failover's) is a
     * violation, not a loss to be told (store-loss): what `wait=N` (every
     * change acknowledged by N replicas) is for, on a Sentinel group */
    int no_store_loss;
    int gap_ms; /* mean time between faults */
    int verbose;
    int keep;
    int schedule_only;
    const char *nemeses;   /* comma list of allowed nemesis names, NULL: all */
    const char *url_extra; /* extra URL options (&k=v...) */
    int kinds[H_COUNT];    /* handle kinds in use */
    int nkinds;
    char dir[256];        /* the run's temp dir */
    char bin[512];        /* this program, for `dlock run` commands */
    char dlock[512];      /* the dlock CLI */
    char url[256];        /* through the proxy: filled per link */
    char direct_url[256]; /* straight to the server */
    /* A store of several independent servers (Redlock's): each member has
     * a proxy of its own, and a client's URL names the same link of each.
     * 1 for one server. */
    int members;
    int proxy_ports[MAX_MEMBERS][16]; /* [member][link] */
    /* How long a member that lost its data stays down; -1: longer than the
     * longest lease, as Redlock assumes (nem_min_down_ms). Shorter breaks
     * that assumption on purpose: the checker should then find overlaps. */
    int member_down_ms;
    /* A Sentinel group: the server faults hit the data node the sentinels
     * name as master then, a failover is a fault of its own, and there is
     * no proxy (clients dial the address the sentinels announce). */
    int master_moves;
    /* A Redis Cluster (with master_moves): the server faults hit the
     * master of the slot of one of the run's locks, a failover is CLUSTER
     * FAILOVER on its replica, and a slot may move to another master. */
    int cluster;
} fault_cfg;

/* ---------------------------------------------------------------- calls */

/* shm.c */
fshm *fs_create(const char *path, uint64_t cap);
fshm *fs_attach(const char *path);
int64_t fs_now(void);
fev *fs_log(fshm *s, int type, int lock, int actor); /* fill, then fs_commit() */
void fs_commit(fev *e);
uint64_t fs_new_op(fshm *s);
const char *fs_hkind_name(int hkind);
const char *fs_type_name(int type);
int fs_hkind_lock_kind(int hkind);
void fs_format_event(const fshm *s, const fev *e, char *buf, size_t len);

/* resource.c */
void res_init(fres *r, int kind, int capacity);
/* One access under fence; logs EV_ACCESS. For ACC_READ/ACC_READ_SHARED,
 * *value and *version get the counter; for ACC_WRITE, *value is written if
 * accepted, and the write is a clobber if the version moved since *version.
 * Returns 1 if accepted, 0 if refused as stale. */
int res_access(fshm *s, int lock, int actor, uint64_t op, uint64_t fence, int mode, int permits,
               int64_t *value, uint64_t *version);

/* A semaphore holder is done (before its release): it no longer counts
 * against older holders. */
void res_leave(fshm *s, int lock, int actor, uint64_t fence);

/* workload.c */
void wl_touch(fshm *s, int actor_id, uint64_t op, int hkind, int take, int n, const int *locks,
              const uint64_t *fences, uint64_t *rng);
void wl_library_worker(fshm *s, const fault_cfg *cfg, int widx, const char *url);
void wl_run_worker(fshm *s, const fault_cfg *cfg, int ridx, const char *url);
void wl_monitor(fshm *s, const fault_cfg *cfg);
/* The longest lease a client of the run asks for (a fixed lease's). */
int64_t wl_max_lease_ms(const fault_cfg *cfg);
int wl_command(int argc, char **argv); /* `fault cmd ...`, run by dlock run */

/* checker.c: the properties checked, and the run's verdict. */
enum {
    V_OVERLAP,       /* two holders the fence does not tell apart */
    V_LATE_LOSS,     /* a holder not frozen told of its loss after another took the lock */
    V_STALE_WRITE,   /* a stale holder's access accepted after the newer holder's */
    V_LOST_UPDATE,   /* an accepted write clobbered another's */
    V_FENCE_ORDER,   /* a fence not above every fence handed out before */
    V_FAIR_ORDER,    /* a fair waiter served before one the store had queued ahead of it */
    V_ERROR,         /* an error code outside those documented for the faults then */
    V_STALL,         /* a call past its documented bound */
    V_LIVENESS,      /* after the last heal: a waiter not served, a lock left held */
    V_SPURIOUS_LOSS, /* a loss reported that no fault or lease explains */
    V_PHANTOM,       /* the server shows a holder that cannot hold */
    V_CANCEL,        /* a cancel that ended the wrong wait, or none */
    V_RUN_EXIT,      /* dlock run's exit status says something else than what happened */
    V_CRASH,         /* a client process died by itself, or did not stop */
    V_EARLY_GIVEUP,  /* a wait with budget left ended on a short outage */
    V_FD_LEAK,       /* dlock run's command inherited a socket of dlock's */
    V_STORE_LOSS,    /* --no-store-loss: holds overlapped after the store lost one */
    V_HISTORY,       /* the history overflowed: the run cannot be judged */
    V_COUNT
};
const char *check_class_name(int v);
/* Checks the history; prints each violation with the history around it to
 * out, and fills json with the summary's "violations" and counts. Returns
 * the number of violations. */
typedef struct check_totals {
    long events, acquires, acquired, releases, accesses, accepted, refused, lost_reports, runs,
        cancels, holds, snaps;
    long fair_queued;  /* fair waits the store said were queued (EV_QUEUED) */
    long fair_pairs;   /* fair grants ordered against a wait queued ahead of them */
    long store_losses; /* holds overlapped after the store lost their data (a failover's,
                          a wipe's), judged as told of the loss or not */
    long violations[V_COUNT];
} check_totals;
int check_run(fshm *s, const fault_cfg *cfg, FILE *out, check_totals *totals);

#endif
