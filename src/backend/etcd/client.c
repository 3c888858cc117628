/* SPDX-License-Identifier: MIT */
/* client.c - the etcd client's typed calls (leases, kv, compaction), the
 * raft terms their replies carry, and the client's life (new, free, stats).
 * A request reaches etcd through transport.c; the watch stream is watch.c's.
 *
 * Design note.
 *
 * Raft terms: every reply's header carries the raft term of the member that
 * answered. etcd 3.4 answers keepalives and TTL queries from the leader's
 * own memory, without a quorum, so a leader that was paused or cut off and
 * has not yet heard that another member leads in a later term still renews
 * leases, while the real leader lets them run out (etcd issue 15247). Its
 * replies carry its old term. The client keeps the highest term it has
 * seen, and does not believe a lease alive on the word of a member behind
 * it: the request goes to the next member, and with none left it fails
 * with DLOCK_EUNREACHABLE, never as renewed. A lease said to be gone is
 * believed from any member (a loss told early is safe). A grant is
 * committed through raft, so one answered from a lower term means the
 * cluster was made anew (wiped and started again): the client follows it
 * from there. */
#define _GNU_SOURCE
#include "client.h"
#include "transport.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CONNECT_TIMEOUT_MS 2000
#define DEFAULT_REQUEST_TIMEOUT_MS 10000
#define DEFAULT_MAX_CONNECTIONS    64
#define DEFAULT_MAX_REPLY          (4u << 20)

/* ================================================================ setup */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

/* curl_global_init is not thread-safe and must run once per process; it is
 * never undone (another user of libcurl in the process may still need it). */
static void init_curl(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int make_label(dlock__etcd *c, const char *userinfo)
{
    /* (a config with no URL's: its user, and "***" for a password, as the
     * URL's messages show them) */
    char own[300] = "";
    if (userinfo == NULL && c->user != NULL)
        snprintf(own, sizeof own, "%.200s%s", c->user, c->password[0] != '\0' ? ":***@" : "@");
    if (userinfo == NULL)
        userinfo = own;
    size_t n = strlen("etcd://") + strlen(userinfo) + 1;
    char *l;

    for (size_t i = 0; i < c->n_hosts; i++)
        n += strlen(c->hosts[i]) + 1;
    l = malloc(n);
    if (l == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
    strcpy(l, "etcd://");
    strcat(l, userinfo);
    for (size_t i = 0; i < c->n_hosts; i++) {
        if (i > 0)
            strcat(l, ",");
        strcat(l, c->hosts[i]);
    }
    c->label = l;
    return DLOCK_OK;
}

static pthread_cond_t *init_monotonic_cond(pthread_cond_t *cv)
{
    dlock__cond_init(cv);
    return cv;
}

int dlock__etcd_new(const dlock__etcd_config *cfg, dlock__etcd **out)
{
    dlock__etcd *c;
    int rc;

    pthread_once(&curl_once, init_curl);
    if (curl_init_result != CURLE_OK)
        return dlock__fail(DLOCK_ENOMEM, "etcd: curl_global_init failed: %s",
                           curl_easy_strerror(curl_init_result));
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
    pthread_mutex_init(&c->pool_mu, NULL);
    init_monotonic_cond(&c->pool_cv);
    pthread_mutex_init(&c->auth_mu, NULL);
    pthread_mutex_init(&c->token_mu, NULL);
    pthread_mutex_init(&c->watcher_mu, NULL);
    c->connect_timeout_ms =
        cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    c->request_timeout_ms =
        cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : DEFAULT_REQUEST_TIMEOUT_MS;
    c->max_conns = cfg->max_connections > 0 ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
    c->max_reply = cfg->max_reply_bytes > 0 ? cfg->max_reply_bytes : DEFAULT_MAX_REPLY;
    c->log = cfg->log;
    rc = dlock__etcd_parse_endpoints(c, cfg->endpoints);
    if (rc != DLOCK_OK)
        goto fail;
    if (cfg->user != NULL && cfg->user[0] != '\0') {
        c->user = strdup(cfg->user);
        c->password = strdup(cfg->password != NULL ? cfg->password : "");
        if (c->user == NULL || c->password == NULL) {
            rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
            goto fail;
        }
    }
    rc = make_label(c, cfg->userinfo);
    if (rc != DLOCK_OK)
        goto fail;
    c->idle = calloc(c->max_conns, sizeof *c->idle);
    if (c->idle == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
        goto fail;
    }
    *out = c;
    return DLOCK_OK;
fail:
    dlock__etcd_free(c);
    return rc;
}

void dlock__etcd_free(dlock__etcd *c)
{
    if (c == NULL)
        return;
    dlock__etcd_watcher_free(c);
    for (size_t i = 0; i < c->n_idle; i++)
        dlock__etcd_conn_free(c->idle[i]);
    free(c->idle);
    for (size_t i = 0; i < c->n_hosts; i++)
        free(c->hosts[i]);
    free(c->hosts);
    if (c->password != NULL)
        explicit_bzero(c->password, strlen(c->password));
    free(c->user);
    free(c->password);
    free(c->token);
    free(c->label);
    pthread_mutex_destroy(&c->pool_mu);
    pthread_cond_destroy(&c->pool_cv);
    pthread_mutex_destroy(&c->auth_mu);
    pthread_mutex_destroy(&c->token_mu);
    pthread_mutex_destroy(&c->watcher_mu);
    free(c);
}

const char *dlock__etcd_label(const dlock__etcd *c)
{
    return c->label;
}

void dlock__etcd_get_stats(dlock__etcd *c, dlock__etcd_stats *out)
{
    memset(out, 0, sizeof *out);
    out->connections_made = atomic_load(&c->stat_conns);
    out->authentications = atomic_load(&c->stat_auth);
    dlock__etcd_watcher_stats(c, out);
}

int dlock__etcd_answered(dlock__etcd *c)
{
    return atomic_load(&c->answered);
}

/* ================================================================ calls */

typedef int (*decode_fn)(dlock__etcd *c, const char *path, const char *body, size_t n, void *out);

/* A decoder's verdict on a reply that a member behind the newest term gave
 * from its own memory (see "raft terms" above). The detail is recorded;
 * call() sends the request to the next member, or fails with
 * DLOCK_EUNREACHABLE. Never returned from this file. */
#define BEHIND 1000

static void term_seen(dlock__etcd *c, int64_t term)
{
    int64_t seen = atomic_load(&c->raft_term);
    while (term > seen && !atomic_compare_exchange_weak(&c->raft_term, &seen, term))
        ;
}

/* A grant is committed through raft: one answered from a term below the
 * newest seen means the cluster was made anew, and its terms are followed
 * from there. (A grant answered by a member that has not yet heard of an
 * election the client saw elsewhere lowers it too, for as long as the next
 * reply from the new leader takes to raise it again: then a stale renewal
 * is believed, as it was before terms were checked.) */
static void term_follow_grant(dlock__etcd *c, int64_t term)
{
    int64_t seen = atomic_load(&c->raft_term);
    if (term <= 0)
        return;
    if (term >= seen)
        term_seen(c, term);
    else
        atomic_compare_exchange_strong(&c->raft_term, &seen, term);
}

/* BEHIND when a reply from `term` saying lease id is alive is not to be
 * believed; else DLOCK_OK, the term noted. */
static int lease_alive_at(dlock__etcd *c, const char *path, int64_t id, int64_t term)
{
    int64_t seen = atomic_load(&c->raft_term);
    if (term > 0 && term < seen)
        return dlock__fail(BEHIND,
                           "%s%s: lease %" PRId64 " said alive by a member at raft term %" PRId64
                           ", behind term %" PRId64 " (a leader that has not heard of the next "
                           "one): not believed",
                           c->label, path, id, term, seen);
    term_seen(c, term);
    return DLOCK_OK;
}

/* One request: body to path, the 2xx reply decoded into out. Errors from
 * etcd are mapped to dlock codes; an expired token is renewed once. */
static int call(dlock__etcd *c, const char *path, char *body, size_t len, int64_t deadline_us,
                dlock__etcd_call_mode *mode, decode_fn decode, void *out)
{
    dlock__etcd_conn *k = NULL;
    dlock__etcd_status st;
    int rc;

    int64_t until_us = 0; /* the bound of the tries since the last authentication */
    size_t behind = 0;    /* members skipped as behind the newest term */
    int reauthed = 0;     /* once per call */

    rc = dlock__etcd_conn_get(c, deadline_us, &k);
    if (rc != DLOCK_OK)
        goto out;
    for (;;) {
        uint64_t gen;
        long status = 0;

        rc = dlock__etcd_prepare(c, k, deadline_us, &gen);
        if (rc == DLOCK_OK && until_us == 0) {
            /* one bound for the request's tries: a member behind the newest
             * term is skipped within it */
            until_us = dlock__now_us() + c->request_timeout_ms * 1000;
            if (deadline_us != DLOCK__NEVER && deadline_us < until_us)
                until_us = deadline_us;
        }
        if (rc == DLOCK_OK)
            rc = dlock__etcd_post(c, k, path, body, len, until_us, mode, &status);
        if (rc != DLOCK_OK)
            break;
        if (status >= 200 && status < 300) {
            rc = decode(c, path, k->buf, k->len, out);
            if (rc == BEHIND) {
                dlock__etcd_endpoint_failed(c, k->ep);
                mode->replayed = 1; /* the next member gets it again */
                if (++behind < c->n_hosts && dlock__now_us() < until_us)
                    continue;
                rc = DLOCK_EUNREACHABLE; /* the detail says why */
            }
            break;
        }
        if (dlock__etcd_decode_status(k->buf, k->len, &st) != DLOCK_OK) {
            rc = dlock__fail(DLOCK_EPROTO, "%s%s: HTTP %ld and no etcd error in the reply",
                             c->label, path, status);
            break;
        }
        int kind = dlock__etcd_status_kind(&st);
        if (!reauthed && c->user != NULL && kind == DLOCK__ETCD_ST_REAUTH) {
            reauthed = 1;
            rc = dlock__etcd_need_token(c, k, 1, gen, deadline_us);
            if (rc != DLOCK_OK)
                break;
            until_us = 0; /* the request again, with its own time */
            continue;
        }
        if (!reauthed && c->user != NULL && kind == DLOCK__ETCD_ST_AUTH_REQUIRED &&
            atomic_load(&c->auth_off)) {
            /* auth was enabled since we were told it was off */
            reauthed = 1;
            atomic_store(&c->auth_off, 0);
            until_us = 0;
            continue;
        }
        rc = dlock__etcd_fail_status(&st, (int) status, c->label, path);
        break;
    }
out:
    if (k != NULL)
        dlock__etcd_conn_put(c, k);
    free(body);
    return rc;
}

/* A decoder's detail names the field; the path and endpoint are added here. */
static int with_context(dlock__etcd *c, const char *path, int rc)
{
    if (rc == DLOCK_EPROTO) {
        char detail[400];
        snprintf(detail, sizeof detail, "%s", dlock_errmsg());
        return dlock__fail(rc, "%s%s: %s", c->label, path, detail);
    }
    return rc;
}

static int dec_header(dlock__etcd *c, const char *path, const char *body, size_t n, void *out)
{
    return with_context(c, path, dlock__etcd_decode_header(body, n, out));
}

static int dec_grant(dlock__etcd *c, const char *path, const char *body, size_t n, void *out)
{
    dlock__etcd_lease *lease = out;
    int rc = with_context(c, path, dlock__etcd_decode_lease_grant(body, n, lease));

    if (rc == DLOCK_OK)
        term_follow_grant(c, lease->raft_term);
    return rc;
}

static int dec_keepalive(dlock__etcd *c, const char *path, const char *body, size_t n, void *out)
{
    dlock__etcd_lease *lease = out;
    dlock__etcd_status st;
    int rc = with_context(c, path, dlock__etcd_decode_keepalive(body, n, lease, &st));

    if (rc != DLOCK_OK)
        return rc;
    if (st.code != 0)
        return dlock__etcd_fail_status(&st, 200, c->label, path);
    /* A lease that no longer exists is answered with no TTL. */
    if (lease->ttl <= 0)
        return dlock__fail(DLOCK_ELOST, "%s%s: lease %" PRId64 " not found (expired or revoked)",
                           c->label, path, lease->id);
    return lease_alive_at(c, path, lease->id, lease->raft_term);
}

static int dec_ttl(dlock__etcd *c, const char *path, const char *body, size_t n, void *out)
{
    dlock__etcd_lease_ttl *t = out;
    int rc = with_context(c, path, dlock__etcd_decode_lease_ttl(body, n, t));

    if (rc == DLOCK_OK && t->ttl >= 0) {
        rc = lease_alive_at(c, path, t->id, t->raft_term);
        if (rc != DLOCK_OK)
            dlock__etcd_lease_ttl_free(t);
    }
    return rc;
}

static int dec_range(dlock__etcd *c, const char *path, const char *body, size_t n, void *out)
{
    dlock__etcd_range_result *r = out;
    int rc = with_context(c, path, dlock__etcd_decode_range(body, n, r));

    if (rc == DLOCK_OK)
        term_seen(c, r->raft_term);
    return rc;
}

typedef struct delete_out {
    int64_t revision, deleted;
} delete_out;

static int dec_delete(dlock__etcd *c, const char *path, const char *body, size_t n, void *out)
{
    delete_out *d = out;
    return with_context(c, path, dlock__etcd_decode_delete(body, n, &d->revision, &d->deleted));
}

static int dec_txn(dlock__etcd *c, const char *path, const char *body, size_t n, void *out)
{
    dlock__etcd_txn_result *t = out;
    int rc = with_context(c, path, dlock__etcd_decode_txn(body, n, t));

    if (rc == DLOCK_OK)
        term_seen(c, t->raft_term);
    return rc;
}

int dlock__etcd_lease_grant(dlock__etcd *c, int64_t ttl_s, int64_t id, int64_t deadline_us,
                            dlock__etcd_lease *out)
{
    dlock__etcd_call_mode once = {0, 0};
    char *body;
    size_t len;
    int rc = dlock__etcd_encode_lease_grant(ttl_s, id, &body, &len);
    return rc != DLOCK_OK
               ? rc
               : call(c, "/v3/lease/grant", body, len, deadline_us, &once, dec_grant, out);
}

int dlock__etcd_lease_keepalive(dlock__etcd *c, int64_t id, int64_t deadline_us,
                                dlock__etcd_lease *out)
{
    dlock__etcd_call_mode again = {1, 0};
    char *body;
    size_t len;
    int rc = dlock__etcd_encode_lease_id(id, 0, &body, &len);
    return rc != DLOCK_OK
               ? rc
               : call(c, "/v3/lease/keepalive", body, len, deadline_us, &again, dec_keepalive, out);
}

int dlock__etcd_lease_revoke(dlock__etcd *c, int64_t id, int64_t deadline_us)
{
    dlock__etcd_call_mode again = {1, 0};
    char *body;
    size_t len;
    int64_t revision;
    int rc = dlock__etcd_encode_lease_id(id, 0, &body, &len);
    if (rc == DLOCK_OK)
        rc = call(c, "/v3/lease/revoke", body, len, deadline_us, &again, dec_header, &revision);
    /* sent twice: the first may have revoked it */
    return rc == DLOCK_ELOST && again.replayed ? DLOCK_OK : rc;
}

int dlock__etcd_lease_timetolive(dlock__etcd *c, int64_t id, int keys, int64_t deadline_us,
                                 dlock__etcd_lease_ttl *out)
{
    dlock__etcd_call_mode again = {1, 0};
    char *body;
    size_t len;
    int rc = dlock__etcd_encode_lease_id(id, keys, &body, &len);
    return rc != DLOCK_OK
               ? rc
               : call(c, "/v3/lease/timetolive", body, len, deadline_us, &again, dec_ttl, out);
}

int dlock__etcd_kv_range(dlock__etcd *c, const dlock__etcd_range *req, int64_t deadline_us,
                         dlock__etcd_range_result *out)
{
    dlock__etcd_call_mode again = {1, 0};
    char *body;
    size_t len;
    int rc = dlock__etcd_encode_range(req, &body, &len);
    return rc != DLOCK_OK ? rc
                          : call(c, "/v3/kv/range", body, len, deadline_us, &again, dec_range, out);
}

int dlock__etcd_kv_put(dlock__etcd *c, const dlock__etcd_put *req, int64_t deadline_us,
                       int64_t *revision)
{
    dlock__etcd_call_mode once = {0, 0};
    char *body;
    size_t len;
    int rc = dlock__etcd_encode_put(req, &body, &len);
    return rc != DLOCK_OK
               ? rc
               : call(c, "/v3/kv/put", body, len, deadline_us, &once, dec_header, revision);
}

int dlock__etcd_kv_delete(dlock__etcd *c, const dlock__etcd_delete *req, int64_t deadline_us,
                          int64_t *revision, int64_t *deleted)
{
    dlock__etcd_call_mode once = {0, 0};
    char *body;
    size_t len;
    delete_out d = {0, 0};
    int rc = dlock__etcd_encode_delete(req, &body, &len);

    if (rc == DLOCK_OK)
        rc = call(c, "/v3/kv/deleterange", body, len, deadline_us, &once, dec_delete, &d);
    if (rc == DLOCK_OK) {
        if (revision != NULL)
            *revision = d.revision;
        if (deleted != NULL)
            *deleted = d.deleted;
    }
    return rc;
}

static int txn(dlock__etcd *c, const dlock__etcd_txn *req, int64_t deadline_us,
               dlock__etcd_call_mode *mode, dlock__etcd_txn_result *out)
{
    char *body;
    size_t len;
    int rc = dlock__etcd_encode_txn(req, &body, &len);
    return rc != DLOCK_OK ? rc : call(c, "/v3/kv/txn", body, len, deadline_us, mode, dec_txn, out);
}

int dlock__etcd_kv_txn(dlock__etcd *c, const dlock__etcd_txn *req, int64_t deadline_us,
                       dlock__etcd_txn_result *out)
{
    dlock__etcd_call_mode once = {0, 0};
    return txn(c, req, deadline_us, &once, out);
}

int dlock__etcd_kv_txn_again(dlock__etcd *c, const dlock__etcd_txn *req, int64_t deadline_us,
                             dlock__etcd_txn_result *out, int *replayed)
{
    dlock__etcd_call_mode again = {1, 0};
    int rc = txn(c, req, deadline_us, &again, out);
    *replayed = again.replayed;
    return rc;
}

int dlock__etcd_compact(dlock__etcd *c, int64_t revision, int64_t deadline_us)
{
    dlock__etcd_call_mode again = {1, 0};
    char *body;
    size_t len;
    int64_t header_rev;
    int rc = dlock__etcd_encode_compaction(revision, &body, &len);
    return rc != DLOCK_OK ? rc
                          : call(c, "/v3/kv/compaction", body, len, deadline_us, &again, dec_header,
                                 &header_rev);
}
