/* SPDX-License-Identifier: MIT */
/* transport.h - what client.c and watch.c share: the client's state, and
 * transport.c's way to etcd (endpoints, the connection pool, curl handles,
 * one POST, the authentication token). It includes neither client.h nor
 * watch.h: the calls run client.c -> transport.c and watch.c ->
 * transport.c, never back. */
#ifndef DLOCK_ETCD_TRANSPORT_H
#define DLOCK_ETCD_TRANSPORT_H

#include "../log.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dlock__etcd dlock__etcd;
typedef struct dlock__etcd_conn dlock__etcd_conn;
typedef struct dlock__etcd_watcher dlock__etcd_watcher;

struct dlock__etcd {
    char **hosts; /* "host:port" */
    size_t n_hosts;
    _Atomic size_t current; /* the endpoint requests go to */
    /* The highest raft term a reply carried: see "raft terms" in client.c. */
    _Atomic int64_t raft_term;
    char *user, *password;
    char *label;
    int64_t connect_timeout_ms, request_timeout_ms;
    size_t max_conns, max_reply;

    /* Idle request connections, most recently used last (so the warm ones
     * are reused and the rest may time out on the server). */
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv; /* a connection came back */
    dlock__etcd_conn **idle;
    size_t n_idle, n_conns;

    /* The token is read by every request and replaced by one thread at a
     * time (auth_mu), so a burst of "invalid auth token" replies costs one
     * authentication, not one per thread. token_gen counts replacements. */
    pthread_mutex_t auth_mu;
    pthread_mutex_t token_mu;
    char *token;
    uint64_t token_gen;
    _Atomic int auth_off; /* the server said auth is not enabled */
    dlock__log *log;      /* the client's, or NULL */

    pthread_mutex_t watcher_mu; /* creating the watcher */
    dlock__etcd_watcher *watcher;

    _Atomic uint64_t stat_conns, stat_auth;
    _Atomic int answered; /* a member sent back a reply once */
};

/* A request connection of the pool: one easy handle and its reply. */
struct dlock__etcd_conn {
    CURLM *multi; /* runs easy, and keeps its connection between requests */
    CURL *easy;
    struct curl_slist *headers;
    uint64_t headers_gen; /* token generation the headers carry */
    int headers_auth;     /* they carry an Authorization line */
    char errbuf[CURL_ERROR_SIZE];
    char *buf; /* the reply body */
    size_t len, cap, max;
    int overflow;
    size_t ep; /* the endpoint its last request went to */
};

/* How a request may be retried on another endpoint once it was sent. */
typedef struct dlock__etcd_call_mode {
    int idempotent; /* may run twice: see transport.c's design note */
    int replayed;   /* out: it was sent again after a try that may have run */
} dlock__etcd_call_mode;

/* The opensocket callback every curl handle of ours uses: the socket is
 * created close-on-exec, so a command run under a lock never inherits it. */
curl_socket_t dlock__etcd_open_socket(void *arg, curlsocktype purpose,
                                      struct curl_sockaddr *address);

/* A new multi handle (NULL: out of memory) whose wakeup socketpair is
 * close-on-exec. libcurl 7.88 makes that pair without it (curl issue
 * #13618, fixed in 8.8), and a command run under a lock must not inherit
 * it. The window is one libcurl call that does no I/O, one caller at a time
 * in the process. */
CURLM *dlock__etcd_multi_new(void);

/* Options every handle of ours gets (HTTP/1.1, no proxy, no signals, the
 * socket opener, error buffer). */
void dlock__etcd_setup_handle(CURL *easy, char *errbuf);

/* The "Authorization: <token>" header line for a request, authenticating
 * first when there is no token yet (or when refresh and the token is still
 * the one of generation seen). *line is malloc'd, or NULL when the client
 * has no user (or the server has auth off); *gen is the token's
 * generation. */
int dlock__etcd_auth_line(dlock__etcd *c, int refresh, uint64_t seen, int64_t deadline_us,
                          char **line, uint64_t *gen);

/* The endpoint requests go to now, and moving on from it after a failure
 * to reach it (a no-op if another thread already moved on). */
size_t dlock__etcd_endpoint(dlock__etcd *c);
void dlock__etcd_endpoint_failed(dlock__etcd *c, size_t ep);

/* 1 when member ep sends back any HTTP reply to a status request
 * (/v3/maintenance/status) by deadline_us: its server is up and serving,
 * whatever it does not say elsewhere. 0 otherwise. */
int dlock__etcd_member_answers(dlock__etcd *c, size_t ep, int64_t deadline_us);

/* Splits "h1:p1,h2,[::1]:p3" into c's "host:port" strings. */
int dlock__etcd_parse_endpoints(dlock__etcd *c, const char *list);

/* ---------------------------------------------------------------- pool */

/* A request connection from c's pool, or a new one, waiting for one to
 * come back while all max_conns are busy (until deadline_us). */
int dlock__etcd_conn_get(dlock__etcd *c, int64_t deadline_us, dlock__etcd_conn **out);
/* Gives k back to the pool. */
void dlock__etcd_conn_put(dlock__etcd *c, dlock__etcd_conn *k);
/* Closes k (NULL is fine). */
void dlock__etcd_conn_free(dlock__etcd_conn *k);

/* ---------------------------------------------------------------- one POST */

/* Gives k the headers of a request, with the current token. */
int dlock__etcd_prepare(dlock__etcd *c, dlock__etcd_conn *k, int64_t deadline_us, uint64_t *gen);
/* Runs one POST on k to the current endpoint, moving to the next endpoint
 * while the request cannot even be sent (or, idempotent, was not answered).
 * On DLOCK_OK the body is in k->buf and *status is the HTTP status. */
int dlock__etcd_post(dlock__etcd *c, dlock__etcd_conn *k, const char *path, const char *body,
                     size_t len, int64_t deadline_us, dlock__etcd_call_mode *mode, long *status);
/* Makes sure a token newer than generation seen exists (any token when
 * !refresh), authenticating on k if needed. */
int dlock__etcd_need_token(dlock__etcd *c, dlock__etcd_conn *k, int refresh, uint64_t seen,
                           int64_t deadline_us);

#endif
