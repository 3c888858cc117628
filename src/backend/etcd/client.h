/* SPDX-License-Identifier: MIT */
/* client.h - the etcd v3 wire layer: a client for etcd's JSON gateway.
 *
 * Everything that talks to etcd and nothing about locks: leases, kv range /
 * put / delete / txn, and one watch stream per client. Request bodies and
 * replies are typed (codec.h); HTTP/1.1 over libcurl, with a bounded pool
 * of kept-alive connections shared by all threads.
 *
 * Thread safety: every call may be made from any thread at once, except
 * dlock__etcd_free(). Each call takes a deadline on the monotonic clock
 * (dlock__now_us(); DLOCK__NEVER for none), further capped by the request
 * timeout.
 *
 * Errors: DLOCK_OK, or
 *   DLOCK_EUNREACHABLE  no endpoint accepted a connection, the connection
 *                       broke, or no reply came in time (a request that was
 *                       sent may or may not have run; the message says
 *                       which); also etcd's own "unavailable" (no leader...)
 *   DLOCK_ELOST         the lease named does not exist (expired or revoked:
 *                       etcd's "requested lease not found")
 *   DLOCK_ESERVER       etcd refused the request (authentication failed,
 *                       permission denied, ...; the message names it)
 *   DLOCK_EINVAL        a bad argument, caught here or by etcd
 *   DLOCK_EPROTO        the reply is malformed, oversized or not etcd's
 *   DLOCK_ENOMEM
 * with the detail in dlock_errmsg(). Results are only set on DLOCK_OK. */
#ifndef DLOCK_ETCD_CLIENT_H
#define DLOCK_ETCD_CLIENT_H

#include "codec.h"
#include "watch.h"

#include "../log.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dlock__etcd dlock__etcd;

typedef struct dlock__etcd_config {
    /* "host:port[,host:port...]" (port 2379 when omitted; [v6]:port).
     * Requests go to one endpoint; a connection failure moves every
     * thread on to the next. */
    const char *endpoints;
    const char *user;           /* NULL: no authentication */
    const char *password;       /* never shown in messages */
    const char *userinfo;       /* the user-info as messages show it ("user:***@"); NULL: none */
    int64_t connect_timeout_ms; /* 0: 2000 */
    int64_t request_timeout_ms; /* 0: 10000 */
    size_t max_connections;     /* pool bound for requests; 0: 64 */
    size_t max_reply_bytes;     /* larger replies are DLOCK_EPROTO; 0: 4 MiB */
    dlock__log *log;            /* the client's log: what is worth telling */
} dlock__etcd_config;

/* Copies what it needs from cfg. Does not connect. DLOCK_EINVAL for a bad
 * endpoint list. */
int dlock__etcd_new(const dlock__etcd_config *cfg, dlock__etcd **out);
/* Stops the watch stream (no callback runs once this returns) and closes
 * every connection. NULL is fine. */
void dlock__etcd_free(dlock__etcd *c);

/* "etcd://[user@]host:port,...", for messages. */
const char *dlock__etcd_label(const dlock__etcd *c);

/* ---------------------------------------------------------------- leases */

/* Grants a lease of ttl_s seconds (id 0: the server picks the id). */
int dlock__etcd_lease_grant(dlock__etcd *c, int64_t ttl_s, int64_t id, int64_t deadline_us,
                            dlock__etcd_lease *out);
/* One keepalive round trip. out->ttl is the TTL renewed to. DLOCK_ELOST
 * when the lease no longer exists. */
int dlock__etcd_lease_keepalive(dlock__etcd *c, int64_t id, int64_t deadline_us,
                                dlock__etcd_lease *out);
/* Revokes a lease, deleting its keys. DLOCK_ELOST if it did not exist
 * (DLOCK_OK if it was sent twice, to two members: the first may have
 * revoked it). Keepalives, TTL queries, ranges, compactions and revokes
 * may run twice, so with more than one endpoint they move on to the next
 * one when a member does not answer in half their time (transport.c). */
int dlock__etcd_lease_revoke(dlock__etcd *c, int64_t id, int64_t deadline_us);
/* out->ttl is -1 when the lease does not exist (not an error). With keys,
 * the attached keys too; free with dlock__etcd_lease_ttl_free(). */
int dlock__etcd_lease_timetolive(dlock__etcd *c, int64_t id, int keys, int64_t deadline_us,
                                 dlock__etcd_lease_ttl *out);

/* ---------------------------------------------------------------- kv */

/* Free results with dlock__etcd_range_result_free / _txn_result_free. */
int dlock__etcd_kv_range(dlock__etcd *c, const dlock__etcd_range *req, int64_t deadline_us,
                         dlock__etcd_range_result *out);
int dlock__etcd_kv_put(dlock__etcd *c, const dlock__etcd_put *req, int64_t deadline_us,
                       int64_t *revision);
int dlock__etcd_kv_delete(dlock__etcd *c, const dlock__etcd_delete *req, int64_t deadline_us,
                          int64_t *revision, int64_t *deleted);
int dlock__etcd_kv_txn(dlock__etcd *c, const dlock__etcd_txn *req, int64_t deadline_us,
                       dlock__etcd_txn_result *out);
/* A transaction that may run twice (its compares make a second run do
 * nothing: a delete of one revision of a key, a read): as a keepalive, it
 * moves on to the next endpoint when a member does not answer in half its
 * time. *replayed: it was sent twice, so what it found (a key gone, a
 * compare failed) may be its own first run's doing. */
int dlock__etcd_kv_txn_again(dlock__etcd *c, const dlock__etcd_txn *req, int64_t deadline_us,
                             dlock__etcd_txn_result *out, int *replayed);
/* Compacts the history up to revision (physical). */
int dlock__etcd_compact(dlock__etcd *c, int64_t revision, int64_t deadline_us);

/* Watches (one stream per client): watch.h, included above. */

/* 1 once a member has sent back a reply (any HTTP status) to a request
 * of this client. */
int dlock__etcd_answered(dlock__etcd *c);

/* ---------------------------------------------------------------- stats */

/* Counters for tests and diagnostics: dlock__etcd_stats (watch.h; the
 * watcher fills most of them). */
void dlock__etcd_get_stats(dlock__etcd *c, dlock__etcd_stats *out);

#endif
