/* SPDX-License-Identifier: MIT */
/* server_kind.h - what one kind of server plugs into dt_server (server.c).
 *
 * A kind says how to run its server (argv, config files in the temp dir),
 * how to tell it answers, which files are its data, how to stop it cleanly,
 * and what store-specific operations it offers. server.c does everything
 * common: ports, temp dirs, fork/exec with PDEATHSIG, waiting, signals,
 * reaping, restarts. */
#ifndef DLOCK_TEST_SERVER_KIND_H
#define DLOCK_TEST_SERVER_KIND_H

#include "server.h"

typedef struct dt_server_op_entry {
    const char *name;
    const char *help;
    int (*run)(dt_server *s, const char *arg);
    int loses_data; /* acknowledged data may be gone after it (see dt_server_op_loses_data) */
} dt_server_op_entry;

struct dt_server_kind {
    const char *name;   /* "redis" */
    const char *scheme; /* URL scheme: "redis" */
    int needs_peer_port;
    /* Ports a member of an ensemble needs besides its client port (1:
     * peer_port; 2: peer_port and election_port); 0: the kind has no
     * ensembles. */
    int ensemble_ports;
    int durable; /* keeps acknowledged writes across a kill -9 without DT_PERSIST */
    int start_timeout_ms;
    /* How a lease asked of the server may outlive its time there: rounded
     * up to a unit (etcd's whole-second TTLs; 0: kept as asked), and ended
     * up to a lag late (the server's expiry scan: etcd's lessor every
     * 500 ms, ZooKeeper's session buckets of one tick). */
    int lease_unit_ms;
    int expiry_lag_ms;
    /* Writes config files to s->dir if needed and fills argv (NULL-terminated,
     * at most 63 entries; strings may point into bufs). A member of an
     * ensemble (s->ensemble set) names every member's ports. Called at each
     * start and restart. */
    void (*argv)(const dt_server *s, const char **argv, char bufs[][256]);
    /* Extra environment for the server (NULL-terminated "K=V" list) or NULL. */
    const char *const *(*env)(const dt_server *s);
    /* 1 if the server answers now. */
    int (*answers)(const dt_server *s);
    /* Ensembles: 1 if this member says it leads now (it runs, unpaused). */
    int (*leads)(const dt_server *s);
    /* Removes the server's data from s->dir (config and logs stay). */
    void (*wipe)(const dt_server *s);
    /* Optional: asks a running server to stop cleanly, keeping its data or
     * not; returns 0 if asked (server.c then waits for the exit), -1 to
     * have SIGTERM sent instead. */
    int (*shutdown)(dt_server *s, int keep);
    /* Optional: the command line of the kind's CLI client, up to the
     * command (e.g. "redis-cli -p 6379 "). */
    void (*cli_prefix)(const dt_server *s, char *buf, size_t len);
    const dt_server_op_entry *ops; /* terminated by a {NULL} entry */
    /* URL options worth running clients with (NULL-terminated; "" is the
     * default), e.g. Redis's two ways to notify waiters. */
    const char *const *url_variants;
    /* Optional: what the URL holds besides scheme://127.0.0.1:PORT: user
     * and password ("user:pass@") and a path ("/db"); NULL: nothing. */
    const char *url_auth;
    const char *url_path;
    /* Optional: options appended to the URL ("?cacert=DIR/..."). */
    void (*url_options)(const dt_server *s, char *buf, size_t len);
    /* No server at all: the store is a file in s->dir (SQLite). Nothing is
     * started, s->pid and s->port stay 0, the URL is
     * "SCHEME://DIR/<file>" (file below), the store always "answers", and
     * stop, kill, pause and resume have nothing to act on. */
    const char *file;
    /* Optional, for a kind that is a group of processes (a Sentinel
     * deployment): s is its first process, launched; group_start starts
     * the others (state in s->group) and may set s->url; group_stop stops
     * them (kill: kill -9), before s itself is stopped. */
    void (*group_start)(dt_server *s);
    void (*group_stop)(dt_server *s, int kill);
};

extern const dt_server_kind dt__redis_kind;
extern const dt_server_kind dt__redis_tls_kind;
extern const dt_server_kind dt__zookeeper_kind;
extern const dt_server_kind dt__etcd_kind;
extern const dt_server_kind dt__postgres_kind;
extern const dt_server_kind dt__mariadb_kind;
extern const dt_server_kind dt__sqlite_kind;
extern const dt_server_kind dt__sentinel_kind;
extern const dt_server_kind dt__sentinel_tls_kind;
extern const dt_server_kind dt__redlock_kind;
extern const dt_server_kind dt__redlock_tls_kind;
extern const dt_server_kind dt__cluster_kind;
extern const dt_server_kind dt__cluster_tls_kind;

/* Starts a server of a kind not in the table (a group's member), as
 * dt_server_start does; args NULL-terminated (or NULL). */
void dt__server_start_kind(dt_server *s, const dt_server_kind *kind, unsigned flags,
                           const char *const *args);

/* Helpers shared by the kinds (server.c). */
int dt__tcp_connect(int port, int timeout_ms);
/* Runs argv (no shell) with stdout to /dev/null; returns its exit status, or
 * -1 if it could not run or took longer than timeout_ms (then killed). */
int dt__run_quiet(const char *const *argv, int timeout_ms);
/* rm -rf of path (no shell). */
void dt__remove_tree(const char *path);
/* Makes, once, s->dir/tls/: a test CA (ca.crt), a server certificate it
 * signed for 127.0.0.1 and localhost (server.crt/.key), a client's
 * (client.crt/.key) and an unrelated CA (other-ca.crt) (server_redis.c). */
void dt__redis_tls_files(const dt_server *s);
/* Appends to argv (argc entries so far) what makes a redis-server take
 * clients over TLS on s->port with the certificates in dir (as made by
 * dt__redis_tls_files), using bufs[1..4]; returns the new argc. */
int dt__redis_tls_args(const dt_server *s, const char *dir, const char **argv, int argc,
                       char bufs[][256]);

#endif
