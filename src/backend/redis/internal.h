/* SPDX-License-Identifier: MIT */
/* internal.h - what the files of the Redis backend share. */
#ifndef DLOCK_REDIS_INTERNAL_H
#define DLOCK_REDIS_INTERNAL_H

#include "../backend.h"
#include "cluster.h"
#include "conn.h"
#include "keys.h"
#include "scripts.h"
#include "sentinel.h"
#include "shards.h"
#include "stream.h"
#include "subscriber.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAX_POOL    64
#define RENEW_BATCH 256 /* locks per renewal script call */

typedef struct rbackend {
    dlock__store base;
    dlock__client_cfg cfg;
    char *prefix;
    dlock__rendpoint ep;
    dlock__rsentinel *sentinel; /* redis+sentinel://: ep is its master's (sentinel.h) */
    dlock__rcluster *cluster;   /* redis+cluster://: its nodes, pool empty (cluster.h) */
    dlock__rshards *shards;     /* redis+cluster://: its sharded pub/sub notices (shards.h) */
    dlock__rtls *tls;           /* rediss://: ep.tls (transport.h); NULL: plain */
    atomic_int reached;         /* a connection was made (ep.reached) */
    atomic_int in_cluster;      /* redis://: the server is a node of a cluster (ep.in_cluster) */
    atomic_int role_asked;      /* status or list asked ROLE (replicas.c) */
    char *host, *unix_path, *user, *password, *label;
    dlock__rconn *pool[MAX_POOL];
    size_t npool;
    dlock__board *board;

    int notify_stream;              /* hand-over notices through streams, not pub/sub */
    char *wake_channel;             /* P:wake:<client id>: this client's pub/sub notices */
    char *owner_key;                /* P:owner:<client id>: this client's owner record (owner.c) */
    _Atomic int64_t owner_until_us; /* when the record written last ends (monotonic) */
    _Atomic int64_t owner_retry_us; /* after a refusal: not tried again before */
    atomic_int owner_writing;       /* a thread is writing it */
    atomic_int owner_kept;          /* a hold was detached: keep the record at close */
    pthread_mutex_t mu;             /* guards sub and stream */
    dlock__rsub *sub;
    dlock__rstream *stream;

    /* wait=N (replicas.c): 0, or the replicas that must have each change */
    unsigned sync_replicas;
    int64_t sync_timeout_ms; /* WAIT's bound (wait_timeout=) */
    pthread_mutex_t sync_mu; /* guards the idle connections below */
    dlock__rconn *sync_idle[8];
    size_t sync_nidle;
} rbackend;

/* One lock of the client. Its base key L is P:{N} (a mutex), P:{N}:rw (a
 * read-write lock), P:{N}:sem (a semaphore), or N itself (a mutex in
 * simple mode), as keys.h writes them; the scripts derive the rest from L
 * (scripts/queue.lua). */
typedef struct rlock {
    dlock__store_lock base;
    dlock__lock_spec spec;
    unsigned slot;      /* Cluster hash slot of its keys */
    dlock__rconn *conn; /* its connection (NULL on a cluster: dlock__redis_conn) */
    char *keys[3];      /* L, its fence counter, and the name N (its interop key, which
                           the scripts that take a lock look at: one name is one lock) */
    size_t key_lens[3];
    char *interop_off;   /* on a cluster, keys[2] when N is in another slot (redis.c) */
    char *wake_channel;  /* on a cluster, P:{E}:wake:<client id>: its sharded notices */
    atomic_int prepared; /* on a cluster, a wait's subscription was tried (waiting.c) */
} rlock;

/* One EVALSHA: argv[0], argv[1] are filled in (EVALSHA sha / EVAL body),
 * argv[2] is the number of keys, then keys, then arguments. */
typedef struct evalcall {
    enum dlock__script_id script;
    size_t argc;
    const char **argv;
    size_t *lens;
} evalcall;

/* The connection a call on lock l goes over: its own, or on a cluster
 * that of the node serving its slot now. */
static inline dlock__rconn *dlock__redis_conn(rbackend *b, const rlock *l, int64_t deadline)
{
    return b->cluster == NULL ? l->conn : dlock__rcluster_conn(b->cluster, l->slot, deadline);
}

/* calls.c */
/* One plain command on c (dlock__rconn_call); on a Redis Cluster its
 * MOVED, ASK, TRYAGAIN and CLUSTERDOWN followed as a script's are; on one
 * server, a refusal that says the URL names the wrong kind of server (a
 * node of a cluster, a replica) fails as dlock__rconn_wrong_server says.
 * *reply is the last reply (another error reply included) on DLOCK_OK. */
int dlock__redis_call(dlock__rconn *c, const dlock__rcmd *cmd, int64_t deadline,
                      redisReply **reply);
int dlock__redis_run_scripts(dlock__rconn *c, size_t n, const evalcall *calls, int64_t deadline,
                             redisReply **replies);
int dlock__redis_run_script(dlock__rconn *c, const evalcall *call, int64_t deadline,
                            redisReply **reply);
/* As dlock__redis_run_script, with the command `before` in the same
 * write, ahead of the script: no round trip of its own. *before_reply gets
 * its reply, whatever it is, if the batch was answered (NULL if not); the
 * caller frees it. */
int dlock__redis_run_script_after(dlock__rconn *c, const dlock__rcmd *before, const evalcall *call,
                                  int64_t deadline, redisReply **before_reply, redisReply **reply);
/* n script calls with `before` ahead and `after` behind them, in one
 * write (as above; either may be NULL, and its reply pointer then too). */
int dlock__redis_run_between(dlock__rconn *c, const dlock__rcmd *before, size_t n,
                             const evalcall *calls, const dlock__rcmd *after, int64_t deadline,
                             redisReply **before_reply, redisReply **replies,
                             redisReply **after_reply);
int dlock__redis_bad_reply(const rbackend *b, const char *what, const redisReply *r);
size_t dlock__redis_number(char *buf, int64_t v);
#define NUM(buf, v) dlock__redis_number((buf), (int64_t) (v))

extern const dlock__backend dlock__redis_backend;

#define RBACKEND(s) DLOCK__STORE_OF(rbackend, s)
#define RLOCK(l)    DLOCK__STORE_OF(rlock, l)

/* replicas.c */
/* A step that changes locks: n script calls (after `before`, as
 * dlock__redis_run_between) on c; with wait=N, on a connection of its own
 * followed by WAIT, and *acked is the number of replicas that acknowledged
 * it in time (else -1: not asked). */
int dlock__redis_step(rbackend *b, dlock__rconn *c, const dlock__rcmd *before, size_t n,
                      const evalcall *calls, int64_t deadline, redisReply **before_reply,
                      redisReply **replies, long long *acked);
/* Whether a step's *acked falls short of wait=N. */
int dlock__redis_unconfirmed(const rbackend *b, long long acked);
/* How many replicas the master behind c says are connected to it (ROLE),
 * or -1 if it does not say. */
long long dlock__redis_replicas_connected(rbackend *b, dlock__rconn *c, int64_t deadline);
/* At close: the idle connections of wait=N. */
void dlock__redis_replicas_close(rbackend *b);
/* Before the first read of status or list: when the server is a replica,
 * whose data may lag its master's, a warning in the client's log (once).
 * DLOCK_EUNREACHABLE when the server cannot be reached (asked again next
 * time), else DLOCK_OK. */
int dlock__redis_note_replica(rbackend *b, dlock__rconn *c, int64_t deadline);

/* waiting.c */
/* Whether hand-over notices reach this client's waiters of l now (no
 * waiting): a waiter queues only then. */
int dlock__redis_notices_flow(rbackend *b, rlock *l);
int dlock__redis_prepare_wait(dlock__store *store, dlock__store_lock *l, int64_t deadline_us);
enum dlock__wake dlock__redis_wait(dlock__store *store, dlock__store_lock *sl, dlock__waiter *w,
                                   int64_t until_us);

/* steps.c */
int dlock__redis_acquire(dlock__store *s, dlock__store_lock *l, dlock__attempt *a);
int dlock__redis_acquire_many(dlock__store *s, dlock__store_lock *const *ls, size_t n,
                              const char *token, int64_t lease_ms, int64_t deadline_us,
                              uint64_t *fences, dlock__session **sessions, size_t *busy,
                              int64_t *busy_ttl_ms);
int dlock__redis_cancel(dlock__store *s, dlock__store_lock *l, const char *token, int64_t deadline);
int dlock__redis_release(dlock__store *s, dlock__store_lock *l, const char *token, uint64_t fence,
                         int64_t deadline);
int dlock__redis_extend(dlock__store *s, dlock__store_lock *l, const char *token, uint64_t fence,
                        int64_t lease_ms, int at_least, int64_t deadline);
int dlock__redis_query(dlock__store *s, dlock__store_lock *l, dlock_status *st, int64_t deadline);
int dlock__redis_force_unlock(dlock__store *s, dlock__store_lock *l, int64_t deadline);

/* owner.c */
/* The SET of this client's owner record, sent with an attempt when the
 * record is missing or would end within lease_ms (or a day). */
typedef struct dlock__owner_write {
    const char *argv[5];
    size_t lens[5];
    char ttl[24];
    int64_t until_us; /* when the record ends at the latest, if written */
    dlock__rcmd cmd;
} dlock__owner_write;
/* 1 and w filled when an attempt of lease_ms should carry the record (one
 * thread at a time: it must then call dlock__redis_owner_sent), else 0. */
int dlock__redis_owner_due(rbackend *b, int64_t lease_ms, dlock__owner_write *w);
/* The reply to w's SET (NULL: none came), which it frees. A refusal only
 * delays the next try: the record informs, the lock does not need it. */
void dlock__redis_owner_sent(rbackend *b, dlock__owner_write *w, redisReply *reply);
/* At close: deletes the record unless a hold of this client was left in
 * the store (detach), whose holder it still names. */
void dlock__redis_owner_forget(rbackend *b, int64_t deadline_us);
/* The connection an owner record's key goes over: any on one server, that
 * of the node serving its slot on a cluster (an owner record has no hash
 * tag: it lives apart from the locks it names). */
dlock__rconn *dlock__redis_owner_conn(rbackend *b, const char *key);
/* The key of the owner record of the client whose token this is (it starts
 * with the client's id): 1 with it in key (n bytes), 0 if the token is no
 * dlock owner token. */
int dlock__redis_owner_record_key(const rbackend *b, const char *token, size_t len, char *key,
                                  size_t n);

/* holders.c */
int dlock__redis_holders(dlock__store *s, dlock__store_lock *l, dlock__holder_sink sink, void *arg,
                         int64_t deadline);
int dlock__redis_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                      int64_t deadline);

/* renewal.c */
int dlock__redis_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline);

#endif
