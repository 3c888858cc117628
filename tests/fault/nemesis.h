/* SPDX-License-Identifier: MIT */
/* nemesis.h - the faults of a run: a schedule made from the seed alone
 * (so --seed N replays it), and its execution against the run's server,
 * proxy and client processes. */
#ifndef DLOCK_FAULT_NEMESIS_H
#define DLOCK_FAULT_NEMESIS_H

#include "../support/harness.h"
#include "fault.h"

enum {
    NEM_KILL_CLIENT,    /* kill -9 a client process (a holder, a waiter, any) */
    NEM_PAUSE_CLIENT,   /* SIGSTOP a client process, SIGCONT after the duration */
    NEM_KILL_SERVER,    /* kill -9 the server, start it again after the duration */
    NEM_RESTART_SERVER, /* stop it cleanly and start it again */
    NEM_PAUSE_SERVER,   /* SIGSTOP the server for the duration */
    NEM_PARTITION,      /* a proxy link (or all) blackholed, dropping or cut, then healed */
    NEM_OP,             /* one of the server kind's own operations */
    NEM_HEAL_ALL,       /* the end of the fault phase: everything back */
    NEM_FAILOVER,       /* Sentinel: SENTINEL FAILOVER; Cluster: CLUSTER FAILOVER on the
                           replica of a lock's master; over once the group settles */
    NEM_MIGRATE,        /* Cluster: a lock's slot moved to another master (resharding) */
    NEM_COUNT
};

enum { TG_ANY, TG_HOLDER, TG_WAITER };

typedef struct nem_event {
    int64_t at_ms;  /* from the start of the fault phase */
    int64_t dur_ms; /* 0: instantaneous */
    int kind;       /* NEM_* */
    int target;     /* clients: TG_*; partition: link or -1; server: DT_WIPE or 0 */
    int mode;       /* partition: dt_proxy_mode */
    int member;     /* a group's member it hits (server faults, operations, partitions of
                       that member's proxy); -1: the whole store (every member's proxy) */
    char op[24];    /* NEM_OP: the operation */
    char arg[40];   /* and its argument; Cluster's server faults: the lock whose slot's
                       master they hit (or whose slot moves) */
} nem_event;

typedef struct nem_action {
    int64_t at_ms;
    int event;
    int end; /* 0: the fault starts, 1: it ends */
} nem_action;

typedef struct nemesis {
    fshm *shm;
    const fault_cfg *cfg;
    dt_server *server; /* the store (a group's first member, whose stop stops all) */
    dt_proxy *proxies; /* cfg->members of them: one in front of each member */
    nem_event *events;
    int nevents;
    nem_action *actions;
    int nactions, next_action;
    pid_t *event_pid;        /* the process a client fault hit */
    unsigned char *event_ok; /* the fault was injected (its start did not fail) */
    uint64_t rng;            /* target choices at run time */
    /* processes stopped by pause-client, until their end */
    pid_t paused[64];
    int npaused;
    int64_t t0_ns; /* start of the fault phase */
    int lost_lock; /* while logging a data loss of one lock: its index, else -1 */
    /* A member that lost its data may not start again before this (ns, 0:
     * any time): Redlock's delayed restart (see nem_min_down_ms) */
    int64_t member_back_ns[MAX_MEMBERS];
    int cur_member;  /* while running a fault of one member: its index, else -1 */
    int *event_node; /* Sentinel, Cluster: the data node a server fault hit (the master
                        then), -1 none */
    /* Sentinel: the fault whose window closes once the group settles (-1:
     * none), the master it should settle on (-1: either), and until when */
    int settling, settle_want;
    int64_t settle_until_ns;
} nemesis;

/* How long a member of a group that lost its data (killed without
 * persistence, restarted wiped) stays down: longer than the longest lease
 * a client asks for, so every lock it held has expired on the others or
 * is held there by a live holder before it comes back empty (Redlock's
 * delayed restart, src/backend/redlock/README.md, "Assumptions"). */
int64_t nem_min_down_ms(const fault_cfg *cfg);

/* Makes the schedule for cfg (seed, seconds, lease, nemeses allowed, the
 * server kind's operations). Returns the number of events (malloc'd in
 * *out). */
int nem_schedule(const fault_cfg *cfg, dt_server *server, nem_event **out);
void nem_format(const nem_event *e, char *buf, size_t len);
const char *nem_kind_name(int kind);

/* Orders the schedule's starts and ends; call before nem_step(). */
void nem_init(nemesis *n);
/* Runs the actions due at now_ms (from the fault phase's start); returns the
 * time of the next one, or -1 when none is left. */
int64_t nem_step(nemesis *n, int64_t now_ms);
/* Ends every fault: resumes stopped processes and the server, heals every
 * link, starts the server if it is down. */
void nem_heal_all(nemesis *n);
/* Called when a process the nemesis stopped died. */
void nem_forget_pid(nemesis *n, pid_t pid);

#endif
