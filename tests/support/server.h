/* SPDX-License-Identifier: MIT */
/* server.h - real servers for tests, one abstraction for every store.
 *
 * A dt_server is one server process of some kind ("redis", "zookeeper",
 * "etcd"), started on a free loopback port in its own temp dir, and driven
 * through one set of calls: start, stop, kill -9, pause (SIGSTOP) and
 * resume, restart on the same port with its data kept or wiped, and the
 * kind's own operations (Redis: FLUSHALL, CLIENT PAUSE, DEBUG SLEEP, ...)
 * looked up by name, so a fault test needs to know no store's commands. A
 * new store is a new entry in server.c's table (see server_kind.h), not a
 * new harness.
 *
 * Every server dies with the process that started it, however that ends:
 * PR_SET_PDEATHSIG in the server, and an atexit kill by pid. PDEATHSIG
 * follows the *thread* that forked the server: start, restart and stop
 * servers from a thread that outlives them (the main thread). Processes
 * forked by the test (workers) never stop the servers when they exit.
 *
 * A dt_ensemble (below) is several servers of one kind forming one
 * replicated store (a ZooKeeper ensemble, an etcd cluster); each member is
 * a dt_server like any other. */
#ifndef DLOCK_TEST_SERVER_H
#define DLOCK_TEST_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct dt_server_kind dt_server_kind;
typedef struct dt_ensemble dt_ensemble;

#define DT_SERVER_MAX_ARGS 16

typedef struct dt_server {
    const dt_server_kind *kind;
    pid_t pid;         /* 0 when not running */
    int port;          /* client port on 127.0.0.1 */
    int peer_port;     /* a second port the kind needs (etcd's peer port, ZooKeeper's
                          quorum port in an ensemble), else 0 */
    int election_port; /* a third (ZooKeeper's leader election port in an ensemble), else 0 */
    unsigned flags;    /* DT_PERSIST... as given to dt_server_start() */
    int paused;        /* stopped with SIGSTOP */
    int restarts;      /* times restarted */
    char dir[128];     /* temp dir: data, config and log (server.log) */
    char url[160];     /* the store's URL: redis://127.0.0.1:PORT, zk://..., etcd://... */
    /* The ensemble it is a member of, and its index there; NULL and 0 alone. */
    const dt_ensemble *ensemble;
    int member;
    /* Extra command-line arguments given at start, kept for restarts. */
    int nargs;
    char args[DT_SERVER_MAX_ARGS][128];
    void *group; /* a kind that is a group of processes: the others (server_kind.h) */
} dt_server;

/* Start flags. */
enum {
    /* Every acknowledged write survives a kill -9 (Redis: appendonly yes,
     * appendfsync always). ZooKeeper and etcd always keep their log. */
    DT_PERSIST = 1u << 0,
};

/* Restart flags. */
enum {
    DT_KILL = 1u << 0, /* kill -9 the server instead of stopping it cleanly */
    DT_WIPE = 1u << 1, /* delete its data before starting again */
};

/* Starts a server of `kind` on a free loopback port and waits until it
 * really answers (Redis PING, ZooKeeper "srvr", etcd health). Extra
 * command-line arguments for the server (NULL-terminated) may follow.
 * Aborts the test if it cannot. */
void dt_server_start(dt_server *s, const char *kind, unsigned flags, ...);
/* Stops it cleanly (SIGTERM; SIGKILL if it does not exit within 10 s) and
 * reaps it. Nothing if not running. */
void dt_server_stop(dt_server *s);
/* kill -9 and reap. */
void dt_server_kill(dt_server *s);
/* SIGSTOP / SIGCONT. */
void dt_server_pause(dt_server *s);
void dt_server_resume(dt_server *s);
/* Stops (DT_KILL: kills) the server if running, and starts it again on the
 * same port and dir, with its data (DT_WIPE: wiped). Returns once it
 * answers. What "kept" keeps is what the server itself kept: with
 * DT_PERSIST everything acknowledged; a Redis without it keeps what a
 * clean shutdown saves (SHUTDOWN SAVE), nothing after a kill -9. */
void dt_server_restart(dt_server *s, unsigned how);
/* The start half of a restart: starts a stopped or killed server again. */
void dt_server_start_again(dt_server *s, unsigned how);
/* 1 if the server answers now (within about 200 ms). */
int dt_server_answers(const dt_server *s);
/* 1 if the kind runs a server process (0: the store is a file, SQLite):
 * only then can it be stopped, killed, paused, restarted or cut off by a
 * proxy. */
int dt_server_has_process(const dt_server *s);

/* The server's URL with another port in it (to go through a proxy). */
const char *dt_server_url_at(const dt_server *s, int port, char *buf, size_t len);

/* 1 if a restart with `how` (DT_KILL, DT_WIPE) keeps every write the
 * server acknowledged: not wiped, and the kind is durable (ZooKeeper, etcd)
 * or started with DT_PERSIST, or the stop is clean (Redis saves then). */
int dt_server_keeps_data(const dt_server *s, unsigned how);
/* The longest a grant of a lease of lease_ms (renewed last at t) may stay
 * on the server after t: the lease as the server rounds it, and the lag of
 * its expiry scan. */
int64_t dt_server_lease_bound_ms(const dt_server *s, int64_t lease_ms);

/* The kind's own operations, by name (NULL-terminated list; each with a
 * one-line description in dt_server_op_help()). dt_server_op() runs one:
 * returns 0 on success, -1 on failure (detail on stderr), -2 if the kind
 * has no such operation. `arg` is operation-specific (a lock name, a
 * duration in ms, "on"/"off"); NULL when unused.
 *
 *   redis:     wipe (FLUSHALL), drop_lock NAME (every key of lock NAME),
 *              pause_clients MS (CLIENT PAUSE), sleep MS (DEBUG SLEEP,
 *              returns at once), evict (maxmemory + allkeys-lru until
 *              keys are evicted, then back to no limit), persist on|off
 *              (appendonly, appendfsync always), kill_clients (CLIENT KILL
 *              TYPE normal and pubsub)
 *   etcd:      wipe (delete every key), drop_lock NAME (keys under NAME/
 *              and NAME), compact (compact to the current revision)
 *   zookeeper: none yet
 *   postgres:  drop_lock NAME (its row of dlock_fence)
 *   sqlite:    drop_lock NAME (its rows of dlock_hold) */
const char *const *dt_server_ops(const dt_server *s);
const char *dt_server_op_help(const dt_server *s, const char *op);
/* 1 if the operation may lose acknowledged data (wipe, drop_lock, evict):
 * after it a lock may be taken while its holder still holds it. 2 if only
 * the lock named by its argument. */
int dt_server_op_loses_data(const dt_server *s, const char *op);
int dt_server_op(dt_server *s, const char *op, const char *arg);

/* The i-th set of URL options clients of this kind are worth testing with
 * (query-string text, "" for the defaults), i taken modulo their number:
 * a test spreads its clients over them. */
const char *dt_server_url_variant(const dt_server *s, int i);

/* Runs the kind's command-line client (redis-cli -p PORT, etcdctl
 * --endpoints..., zkCli.sh -server...) with the rest of the line (shell
 * syntax) and returns its stdout without the trailing newline (static
 * buffer, valid until the next call). */
const char *dt_server_cli(const dt_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The kinds this harness knows (NULL-terminated), e.g. for a self-test. */
const char *const *dt_server_kinds(void);
/* 1 if the kind is a group of servers (sentinel, redlock, cluster), 0 if one
 * server (or a file), -1 if the harness has no such kind. */
int dt_server_kind_is_group(const char *kind);

/* ---------------------------------------------------------------- ensembles */

#define DT_ENSEMBLE_MAX 5

/* n servers of one kind forming one store: ZooKeeper (server.N lines,
 * myid files) or etcd (--initial-cluster). Every member is a dt_server in
 * its own temp dir with its own ports, so the one-server calls work on
 * &e->members[i] too; the calls below add what only an ensemble has. A
 * member points back to its ensemble: do not copy a started dt_ensemble. */
struct dt_ensemble {
    int n;
    dt_server members[DT_ENSEMBLE_MAX];
    char url[512]; /* every member's client address: zk://h:p1,h:p2,h:p3, etcd://... */
};

/* Starts n (at most DT_ENSEMBLE_MAX) servers of `kind` as one ensemble and
 * waits until every member answers (which needs a quorum, so all are
 * started before any is waited for). Extra server arguments
 * (NULL-terminated) go to every member. Aborts the test if it cannot, or
 * if the kind has no ensembles (redis). */
void dt_ensemble_start(dt_ensemble *e, const char *kind, int n, ...);
/* Stops every member cleanly. */
void dt_ensemble_stop(dt_ensemble *e);
/* The index of the member that says it leads now (ZooKeeper "srvr": Mode:
 * leader; etcd: its endpoint status names itself as leader), asking only
 * members running and not paused; -1 when none or more than one does. */
int dt_ensemble_leader(const dt_ensemble *e);
/* How many members answer now (a ZooKeeper member answers only while it
 * serves, an etcd member only while a quorum lets it read). */
int dt_ensemble_answering(const dt_ensemble *e);
/* One member: kill -9, stop cleanly, SIGSTOP, SIGCONT (as the dt_server
 * calls). */
void dt_ensemble_kill(dt_ensemble *e, int i);
void dt_ensemble_stop_member(dt_ensemble *e, int i);
void dt_ensemble_pause(dt_ensemble *e, int i);
void dt_ensemble_resume(dt_ensemble *e, int i);
/* Starts a stopped or killed member again (DT_KILL: kills it first if it
 * runs), with its data: it rejoins the ensemble and catches up. Returns
 * once it answers, which needs a quorum. DT_WIPE is refused: an etcd
 * member that lost its data must be removed and added again. */
void dt_ensemble_restart(dt_ensemble *e, int i, unsigned how);
/* The ensemble's URL with member `first` listed first and the others in
 * order (a client tries its first endpoint first). */
const char *dt_ensemble_url_from(const dt_ensemble *e, int first, char *buf, size_t len);

/* ---------------------------------------------------------------- Sentinel */

/* The kind "sentinel" is a Sentinel deployment started and stopped as one
 * server: its dt_server is the first master (a redis-server), and its
 * start also starts a replica of it and 3 sentinels watching it as master
 * DT_SENTINEL_MASTER (down-after 1 s, failover-timeout 4 s), and waits
 * until they can fail over. Its url is
 * redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/DT_SENTINEL_MASTER.
 * Extra start arguments go to both data nodes, except those starting with
 * "sentinel:", whose rest is a line of every sentinel's config.
 * dt_server_op() and the CLI reach the first master, whatever its role
 * now. */
#define DT_SENTINEL_MASTER "dtmaster"
/* Data node i (0: the first master, 1: its replica) and sentinel i (0..2). */
dt_server *dt_sentinel_node(dt_server *s, int i);
dt_server *dt_sentinel_sentinel(dt_server *s, int i);
/* The data node the sentinels name as master now (0 or 1), -1 if none. */
int dt_sentinel_master(dt_server *s);
/* kill -9 data node i alone (node 0 too, leaving the rest of the group
 * up); dt_server_start_again(dt_sentinel_node(s, i), 0) starts it again
 * (node 0 as a master, node 1 as a replica of node 0: the sentinels then
 * make it follow the master they name). */
void dt_sentinel_node_kill(dt_server *s, int i);
/* SENTINEL FAILOVER, and waits (20 s at most, else the test fails) until
 * every sentinel names the other node, which says it is the master, and
 * the old one follows it as a replica, in sync. Returns the new master's
 * index. */
int dt_sentinel_failover(dt_server *s);

/* ---------------------------------------------------------------- Redlock */

/* The kind "redlock" is 3 independent redis-servers started and stopped as
 * one server: its dt_server is the first node, and its url is
 * redlock://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3. Extra start arguments
 * go to every node. Stopping or killing the dt_server stops every node;
 * to fault one node alone, use the calls below. */
dt_server *dt_redlock_node(dt_server *s, int i);
/* Node i alone (node 0 too, leaving the others up): kill -9, stop cleanly
 * (SHUTDOWN SAVE: it keeps its data), and the redis kind's operations
 * (dt_server_op). dt_server_start_again(dt_redlock_node(s, i), how)
 * starts it again, DT_WIPE wiping its data; pause and resume it with
 * dt_server_pause and dt_server_resume. */
void dt_redlock_node_kill(dt_server *s, int i);
void dt_redlock_node_stop(dt_server *s, int i);
int dt_redlock_node_op(dt_server *s, int i, const char *op, const char *arg);

/* ---------------------------------------------------------------- Redis Cluster */

/* The kind "cluster" is a Redis Cluster of 3 masters and 3 replicas (one
 * of each) started and stopped as one server: its dt_server is the first
 * master, each node's cluster bus is on its peer_port, slots 0-5460,
 * 5461-10921 and 10922-16383 go to nodes 0, 1 and 2 and nodes 3, 4, 5
 * replicate them; the start returns once every node says
 * cluster_state:ok and every replica is linked. Its url is
 * redis+cluster://127.0.0.1:P0,127.0.0.1:P1,127.0.0.1:P2. Extra start
 * arguments go to every node ("--requirepass X" also sets masterauth).
 * The kind "cluster-tls" is the same over TLS (tls-cluster and
 * tls-replication yes, one test CA in the first node's dir/tls): each
 * node's clients use its port over TLS, the harness its plain peer_port,
 * the bus its election_port; its url is
 * rediss+cluster://127.0.0.1:P0,...?cacert=DIR/tls/ca.crt. */
/* Node i (0..5: 0-2 the first masters, 3-5 their replicas, whatever
 * their roles now). */
dt_server *dt_cluster_node(dt_server *s, int i);
/* The node that serves slot now (as node 0 sees it), -1 if none. */
int dt_cluster_master_of(dt_server *s, int slot);
/* CLUSTER FAILOVER on the replica of node `master`, and waits (30 s at
 * most) until it is a master and the cluster is settled again. Returns
 * the index of the new master. */
int dt_cluster_failover(dt_server *s, int master);
/* Waits (30 s at most) until every node says cluster_state:ok, 3 are
 * masters and every replica is linked to its master: after a node was
 * paused and resumed (a master that was failed over meanwhile comes back
 * as a replica). */
void dt_cluster_wait_settled(dt_server *s);

/* ---------------------------------------------------------------- Redis (old API) */

/* Kept for tests written before dt_server: a dt_redis is a dt_server of
 * kind "redis". New tests use dt_server_* directly. */
typedef dt_server dt_redis;
#define dt_redis_start(r, ...)  dt_server_start((r), "redis", 0, __VA_ARGS__)
#define dt_redis_start_on(r, p) dt_server_start_again((r), DT_WIPE)
#define dt_redis_stop(r)        dt_server_kill(r)
#define dt_redis_cli            dt_server_cli

#endif
