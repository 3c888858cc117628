/* SPDX-License-Identifier: MIT */
/* internal.h - what the files of the ZooKeeper backend share: the store and
 * lock structs, and the dlock__zk_ functions one file defines and others
 * call (README.md maps the files; zk.c has the design note). Not for use
 * outside src/backend/zk/. */
#ifndef DLOCK_ZK_INTERNAL_H
#define DLOCK_ZK_INTERNAL_H

#include "../backend.h"
#include "conn.h"
#include "recipe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PATH_MAX_LEN  1024
#define NODE_DATA_MAX 512 /* a token, its lease's take/permits, the owner_info */

/* A hold of a read-write lock in this client: a reader asking to write gets
 * EDEADLK, and a writer's own read hold passes its write node (downgrade). */
typedef struct rw_hold {
    struct rw_hold *next;
    char *node; /* full path */
    char *token;
    int writer;
} rw_hold;

typedef struct zstore {
    dlock__store base;
    dlock__zconn_cfg cfg;
    char *hosts, *auth, *base_path, *label;
    int64_t timeout_ms;

    pthread_mutex_t mu; /* conn, connecting, rw_holds */
    pthread_cond_t cv;  /* connecting ends (CLOCK_MONOTONIC) */
    dlock__zconn *conn; /* the current session (a reference), NULL before the first */
    int connecting;
    rw_hold *rw_holds;
    atomic_int reached; /* a session was established once */
} zstore;

typedef struct zlock {
    dlock__store_lock base;
    char *path;         /* BASE/name */
    pthread_mutex_t mu; /* node, conn, fence: read by the renewal thread */
    char *node;         /* our node for the current wait or hold (full path) */
    dlock__zconn *conn; /* the session it lives in (a reference) */
    uint64_t fence;
    int64_t czxid; /* node's creation zxid: its place among the contenders of every
                      kind of the name (see "One name, one lock", kinds.c) */
    /* a semaphore: node is the admission node (in locks/) while it waits;
     * leases are its lease nodes (in leases/), `take` of them once admitted */
    char *locks_path, *leases_path;
    char **leases;
    unsigned nleases;
    uint64_t lease_fence; /* the largest of the lease nodes' fences */
    char uuid[37];        /* of the node being made */
} zlock;

#define ZSTORE(s) DLOCK__STORE_OF(zstore, s)
#define ZLOCK(l)  DLOCK__STORE_OF(zlock, l)

/* session.c: the session and single requests */
int64_t dlock__zk_deadline_of(const zstore *z, int64_t deadline_us);
int64_t dlock__zk_release_deadline(const zstore *z, dlock__zconn *c, int64_t deadline_us);
uint64_t dlock__zk_fence_of(const struct Stat *st);
int dlock__zk_get_conn(zstore *z, int64_t deadline, dlock__zconn **out);
int dlock__zk_open_call(zstore *z, int64_t *deadline, dlock__zconn **out);
int dlock__zk_session_ended(const zstore *z);
int dlock__zk_run(dlock__zreq *q, int zrc, int64_t deadline, dlock__zresult *r);
int dlock__zk_children(dlock__zconn *c, const char *path, int64_t deadline, dlock__zresult *r);
int dlock__zk_exists(dlock__zconn *c, const char *path, int64_t deadline, dlock__zresult *r);
int dlock__zk_delete(dlock__zconn *c, const char *path, int64_t deadline);
int dlock__zk_make_parents(dlock__zconn *c, const char *path, int64_t deadline);

/* node.c: a lock's node, its state on the handle, ranking, read-write holds */
void dlock__zk_forget_rw_hold(zstore *z, const char *node);
int dlock__zk_delete_node(zstore *z, dlock__zconn *conn, char *node, int64_t deadline);
void dlock__zk_take_node(zlock *l, char **node, dlock__zconn **conn);
char **dlock__zk_take_leases(zlock *l, unsigned *n, dlock__zconn **conn);
void dlock__zk_set_node(zlock *l, char *node, dlock__zconn *conn, const struct Stat *st);
void dlock__zk_drop_node(zlock *l);
enum dlock__zk_marker dlock__zk_marker_of(const zlock *l);
extern const enum dlock__zk_marker dlock__zk_mutex_markers[2];
int dlock__zk_is_rw(const zlock *l);
int dlock__zk_rank_own(const zlock *l, char **children, int n);
void dlock__zk_node_data(const zstore *z, const char *first, char *buf, size_t len);
void dlock__zk_discard(dlock__zreq *q);
int dlock__zk_create_child(zstore *z, zlock *l, dlock__zconn *c, const char *dir,
                           enum dlock__zk_marker marker, const char *data, int64_t deadline,
                           char **out, struct Stat *st, dlock__zreq **listing);
int dlock__zk_own_write_hold(zstore *z, const char *node, const char *token);
int dlock__zk_own_read_hold(zstore *z, const char *path, const char *token);
void dlock__zk_remember_rw_hold(zstore *z, const char *node, const char *token, int writer);

/* kinds.c: one name, one lock: the other kinds of the name */
enum dlock__held_as dlock__zk_kind_of_node(const char *child);
enum dlock__held_as dlock__zk_kind_of_lock(const zlock *l);
int dlock__zk_has_semaphore(char **children, int n);
int dlock__zk_semaphore_ahead(const zlock *l, dlock__zconn *c, int64_t mine, int64_t deadline,
                              char *blocker);
int dlock__zk_kinds_ahead(const zlock *l, dlock__zconn *c, char **children, int n, int64_t mine,
                          int64_t deadline, char *blocker, enum dlock__held_as *held_as);

/* sem.c: the semaphore */
void dlock__zk_sem_give_up(zstore *z, zlock *l, int64_t deadline);
int dlock__zk_sem_acquire(zstore *z, zlock *l, dlock__zconn *c, dlock__attempt *a,
                          int64_t deadline);
int dlock__zk_sem_release(zstore *z, zlock *l, int64_t deadline);

/* lock.c: acquire, cancel, release, extend, renew of one lock */
int dlock__zk_standing(zstore *z, const zlock *l, char **children, int n, const char *ours,
                       const char *token, const char **ahead, enum dlock__held_as *held_as);
int dlock__zk_acquire(dlock__store *s, dlock__store_lock *sl, dlock__attempt *a);
int dlock__zk_release(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                      int64_t deadline);
int dlock__zk_cancel(dlock__store *s, dlock__store_lock *sl, const char *token, int64_t deadline);
int dlock__zk_extend(dlock__store *s, dlock__store_lock *sl, const char *token, uint64_t fence,
                     int64_t lease_ms, int at_least, int64_t deadline);
int dlock__zk_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline);
void dlock__zk_session_lost(dlock__store *s, dlock__session *session, int64_t deadline);

/* multi.c: multi-locks */
int dlock__zk_acquire_many(dlock__store *s, dlock__store_lock *const *ls, size_t n,
                           const char *token, int64_t lease_ms, int64_t deadline_us,
                           uint64_t *fences, dlock__session **sessions, size_t *busy,
                           int64_t *busy_ttl_ms);

/* ops.c: the operators' calls */
int dlock__zk_owner_leads(zstore *z, const zlock *l, dlock__zconn *c, char **children, int n,
                          int me, const char *token, int64_t deadline, int *leads);
int dlock__zk_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline);
int dlock__zk_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline);
int dlock__zk_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline);

/* list.c: listing */
int dlock__zk_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline);

#endif
