/* SPDX-License-Identifier: MIT */
/* transport.c - how a request reaches etcd's JSON gateway: the endpoints,
 * a pool of libcurl handles, one POST, and the authentication token.
 * client.c (the typed calls) and watch.c (the watch stream) use it; it
 * calls neither.
 *
 * Design note. Each request takes an easy handle from the client's pool (or
 * makes one, up to max_connections; past that it waits for one to come
 * back, until its deadline), runs it on the calling thread (through a multi
 * handle of its own, so that the deadline is a hard one: see perform) and
 * gives it back. A handle keeps its one HTTP/1.1 connection alive
 * between requests, so a pool of N handles is N kept-alive connections and
 * N requests in flight; threads never share a connection, so there is no
 * pipelining to order (the gateway's HTTP/2 is not usable: cmux hands h2
 * to the gRPC server).
 *
 * Endpoints: every thread sends to c->current. A failure to reach it moves
 * c->current on (compare-and-swap, so one failure moves it once), and the
 * request itself tries the next endpoint only if it was never sent: a
 * request that was sent and then lost its connection or its reply may have
 * run, so it fails with DLOCK_EUNREACHABLE and the caller decides. A
 * request that may run twice (a read, a keepalive, a revoke, a delete the
 * caller declares so) is the exception: with more than one endpoint its
 * first try gets half of its time, and when that passes with no reply, or
 * its connection breaks, it is sent again to the next endpoint with the
 * rest. A member that accepts connections and never answers (paused, or
 * cut off) then costs half a request, not the request; the caller is told
 * that the request was sent twice (`replayed`), since what it finds may be
 * its own first try's doing.
 *
 * Authentication: the token is fetched on first use and again when etcd
 * says it is invalid (simple tokens expire after --auth-token-ttl idle
 * seconds), by one thread at a time; the others wait and reuse it. A
 * request is retried once after a re-authentication.
 *
 * Deadlines: a request's curl timeout is the smaller of the request timeout
 * and what is left of the caller's deadline; running out is
 * DLOCK_EUNREACHABLE (never a conflict). */
#define _GNU_SOURCE
#include "transport.h"

#include "codec.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../sockets.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEFAULT_PORT 2379

/* ================================================================ setup */

curl_socket_t dlock__etcd_open_socket(void *arg, curlsocktype purpose,
                                      struct curl_sockaddr *address)
{
    (void) arg;
    (void) purpose;
    /* curl 7.88 opens its sockets without SOCK_CLOEXEC. */
    int fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    return fd < 0 ? CURL_SOCKET_BAD : fd;
}

CURLM *dlock__etcd_multi_new(void)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    dlock__open_socket *before, *after;

    pthread_mutex_lock(&mu);
    size_t nb = dlock__open_sockets(&before);
    CURLM *multi = curl_multi_init();
    size_t na = dlock__open_sockets(&after);
    for (size_t i = 0; i < na; i++) {
        struct sockaddr_storage a;
        socklen_t len = sizeof a;
        int fd = after[i].fd;
        if ((before != NULL &&
             bsearch(&after[i], before, nb, sizeof *before, dlock__open_socket_cmp) != NULL) ||
            getsockname(fd, (struct sockaddr *) &a, &len) != 0 || a.ss_family != AF_UNIX)
            continue;
        dlock__set_cloexec(fd);
    }
    pthread_mutex_unlock(&mu);
    free(before);
    free(after);
    return multi;
}

void dlock__etcd_setup_handle(CURL *easy, char *errbuf)
{
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http");
#endif
    curl_easy_setopt(easy, CURLOPT_PROXY, ""); /* never an http_proxy from the environment */
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, dlock__etcd_open_socket);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "dlock/" DLOCK_VERSION);
}

/* Splits "h1:p1,h2,[::1]:p3" into "host:port" strings. */
int dlock__etcd_parse_endpoints(dlock__etcd *c, const char *list)
{
    const char *p = list;

    if (list == NULL || list[0] == '\0')
        return dlock__fail(DLOCK_EINVAL, "etcd: no endpoint given");
    for (const char *q = list; *q != '\0'; q++)
        c->n_hosts += *q == ',';
    c->n_hosts++;
    c->hosts = calloc(c->n_hosts, sizeof *c->hosts);
    if (c->hosts == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
    for (size_t i = 0; i < c->n_hosts; i++) {
        size_t n = strcspn(p, ","), host_len = n;
        const char *port = NULL;
        long port_no = DEFAULT_PORT;

        if (p[0] == '[') {
            const char *close = memchr(p, ']', n);
            if (close == NULL || close == p + 1)
                goto bad;
            for (const char *h = p + 1; h < close; h++) {
                if (strchr("0123456789abcdefABCDEF:.", *h) == NULL)
                    goto bad;
            }
            host_len = (size_t) (close - p) + 1;
            if (host_len < n && p[host_len] != ':')
                goto bad;
        } else {
            const char *colon = memchr(p, ':', n);
            host_len = colon != NULL ? (size_t) (colon - p) : n;
            for (size_t j = 0; j < host_len; j++) {
                if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_",
                           p[j]) == NULL)
                    goto bad;
            }
        }
        if (host_len == 0)
            goto bad;
        if (host_len < n) {
            char *end;
            port = p + host_len + 1;
            errno = 0;
            port_no = strtol(port, &end, 10);
            if (end != p + n || end == port || errno != 0 || port_no < 1 || port_no > 65535)
                goto bad;
        }
        c->hosts[i] = malloc(host_len + 8);
        if (c->hosts[i] == NULL)
            return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
        snprintf(c->hosts[i], host_len + 8, "%.*s:%ld", (int) host_len, p, port_no);
        p += n + (p[n] == ',');
    }
    return DLOCK_OK;
bad:
    return dlock__fail(DLOCK_EINVAL, "etcd: bad endpoint \"%.*s\" (want host:port)",
                       (int) strcspn(p, ","), p);
}
size_t dlock__etcd_endpoint(dlock__etcd *c)
{
    return atomic_load(&c->current) % c->n_hosts;
}

void dlock__etcd_endpoint_failed(dlock__etcd *c, size_t ep)
{
    size_t expected = ep;
    if (c->n_hosts > 1)
        atomic_compare_exchange_strong(&c->current, &expected, (ep + 1) % c->n_hosts);
}

/* ================================================================ pool */

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    dlock__etcd_conn *k = arg;
    size_t n = size * nmemb;

    if (n > k->max - k->len) {
        k->overflow = 1;
        return 0; /* CURLE_WRITE_ERROR */
    }
    if (k->len + n + 1 > k->cap) {
        size_t cap = k->cap > 0 ? k->cap : 4096;
        while (cap < k->len + n + 1)
            cap *= 2;
        char *buf = realloc(k->buf, cap);
        if (buf == NULL)
            return 0;
        k->buf = buf;
        k->cap = cap;
    }
    memcpy(k->buf + k->len, data, n);
    k->len += n;
    k->buf[k->len] = '\0';
    return n;
}

static int conn_new(dlock__etcd *c, dlock__etcd_conn **out)
{
    dlock__etcd_conn *k = calloc(1, sizeof *k);

    if (k == NULL || (k->easy = curl_easy_init()) == NULL ||
        (k->multi = dlock__etcd_multi_new()) == NULL) {
        if (k != NULL)
            curl_easy_cleanup(k->easy);
        free(k);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory for a connection");
    }
    k->max = c->max_reply;
    dlock__etcd_setup_handle(k->easy, k->errbuf);
    curl_easy_setopt(k->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(k->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(k->easy, CURLOPT_WRITEDATA, k);
    /* One connection per handle: a handle moved to another endpoint drops
     * the old one instead of keeping it. */
    curl_multi_setopt(k->multi, CURLMOPT_MAXCONNECTS, 1L);
    atomic_fetch_add(&c->stat_conns, 1);
    *out = k;
    return DLOCK_OK;
}

int dlock__etcd_conn_get(dlock__etcd *c, int64_t deadline_us, dlock__etcd_conn **out)
{
    int rc = DLOCK_OK, make = 0;

    pthread_mutex_lock(&c->pool_mu);
    while (c->n_idle == 0 && c->n_conns >= c->max_conns) {
        struct timespec ts = dlock__timespec(deadline_us);
        if (deadline_us != DLOCK__NEVER && dlock__now_us() >= deadline_us) {
            rc = dlock__fail(DLOCK_EUNREACHABLE,
                             "%s: all %zu connections stayed busy until the deadline", c->label,
                             c->max_conns);
            break;
        }
        if (deadline_us == DLOCK__NEVER)
            pthread_cond_wait(&c->pool_cv, &c->pool_mu);
        else
            pthread_cond_timedwait(&c->pool_cv, &c->pool_mu, &ts);
    }
    if (rc == DLOCK_OK) {
        if (c->n_idle > 0) {
            *out = c->idle[--c->n_idle];
        } else {
            c->n_conns++;
            make = 1;
        }
    }
    pthread_mutex_unlock(&c->pool_mu);
    if (make) {
        rc = conn_new(c, out);
        if (rc != DLOCK_OK) {
            pthread_mutex_lock(&c->pool_mu);
            c->n_conns--;
            pthread_cond_signal(&c->pool_cv);
            pthread_mutex_unlock(&c->pool_mu);
        }
    }
    return rc;
}

void dlock__etcd_conn_put(dlock__etcd *c, dlock__etcd_conn *k)
{
    pthread_mutex_lock(&c->pool_mu);
    c->idle[c->n_idle++] = k;
    pthread_cond_signal(&c->pool_cv);
    pthread_mutex_unlock(&c->pool_mu);
}

void dlock__etcd_conn_free(dlock__etcd_conn *k)
{
    if (k == NULL)
        return;
    curl_easy_cleanup(k->easy);
    curl_multi_cleanup(k->multi);
    curl_slist_free_all(k->headers);
    free(k->buf);
    free(k);
}

/* ================================================================ one POST */

/* Runs k's transfer until it ends or until `until_us`, as
 * curl_easy_perform would, but with a hard end: when a reused connection
 * dies before the reply, libcurl sends the request again on a new one, and
 * that retry starts CURLOPT_TIMEOUT_MS afresh (a 1 s request that lost its
 * connection at 0.6 s would end at 1.6 s). Past the end the transfer is
 * dropped, with its connection, and reported as timed out. */
static CURLcode perform(dlock__etcd_conn *k, int64_t until_us)
{
    CURLcode res = CURLE_OPERATION_TIMEDOUT;
    CURLMcode mc = curl_multi_add_handle(k->multi, k->easy);

    if (mc != CURLM_OK)
        return mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
    for (;;) {
        int running = 0, queued = 0;
        mc = curl_multi_perform(k->multi, &running);
        if (mc != CURLM_OK) {
            res = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
            break;
        }
        CURLMsg *m = curl_multi_info_read(k->multi, &queued);
        if (m != NULL && m->msg == CURLMSG_DONE) {
            res = m->data.result;
            break;
        }
        int64_t left_us = until_us - dlock__now_us();
        if (left_us <= 0)
            break;
        curl_multi_poll(k->multi, NULL, 0, (int) ((left_us + 999) / 1000), NULL);
    }
    curl_multi_remove_handle(k->multi, k->easy);
    return res;
}

/* Sends body to path on endpoint ep with k, its reply into k->buf, within
 * left_ms (> 0). */
static CURLcode send_to(dlock__etcd *c, dlock__etcd_conn *k, size_t ep, const char *path,
                        const char *body, size_t len, int64_t left_ms)
{
    char url[320];

    snprintf(url, sizeof url, "http://%s%s", c->hosts[ep], path);
    k->ep = ep;
    curl_easy_setopt(k->easy, CURLOPT_URL, url);
    curl_easy_setopt(k->easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(k->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
    curl_easy_setopt(k->easy, CURLOPT_TIMEOUT_MS, (long) left_ms);
    curl_easy_setopt(k->easy, CURLOPT_CONNECTTIMEOUT_MS,
                     (long) (left_ms < c->connect_timeout_ms ? left_ms : c->connect_timeout_ms));
    curl_easy_setopt(k->easy, CURLOPT_HTTPHEADER, k->headers);
    k->len = 0;
    k->overflow = 0;
    k->errbuf[0] = '\0';
    return perform(k, dlock__now_us() + left_ms * 1000);
}

/* Runs one POST on k to the current endpoint, moving to the next endpoint
 * while the request cannot even be sent (or, idempotent, was not answered).
 * On DLOCK_OK the body is in k->buf and *status is the HTTP status. */
int dlock__etcd_post(dlock__etcd *c, dlock__etcd_conn *k, const char *path, const char *body,
                     size_t len, int64_t deadline_us, dlock__etcd_call_mode *mode, long *status)
{
    size_t tried = 0;
    CURLcode res;
    int64_t until_us = dlock__now_us() + c->request_timeout_ms * 1000;

    if (deadline_us != DLOCK__NEVER && deadline_us < until_us)
        until_us = deadline_us;
    for (;;) {
        size_t ep = dlock__etcd_endpoint(c);
        int64_t left_ms = (until_us - dlock__now_us()) / 1000;
        long sent = 0;

        if (left_ms <= 0)
            return dlock__fail(DLOCK_EUNREACHABLE, "%s%s: deadline passed before it was sent",
                               c->label, path);
        /* an idempotent request's first try keeps half for another member */
        int split = mode->idempotent && tried == 0 && c->n_hosts > 1 && left_ms >= 2;
        if (split)
            left_ms /= 2;
        res = send_to(c, k, ep, path, body, len, left_ms);
        if (res == CURLE_OK) {
            atomic_store(&c->answered, 1);
            curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, status);
            if (k->buf == NULL) { /* no body at all yet on this handle */
                k->buf = malloc(1);
                if (k->buf == NULL)
                    return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
                k->buf[0] = '\0';
                k->cap = 1;
            }
            return DLOCK_OK;
        }
        if (res == CURLE_WRITE_ERROR && k->overflow)
            return dlock__fail(DLOCK_EPROTO, "%s%s: reply larger than %zu bytes", c->label, path,
                               c->max_reply);
        if (res == CURLE_OUT_OF_MEMORY || res == CURLE_WRITE_ERROR)
            return dlock__fail(DLOCK_ENOMEM, "%s%s: out of memory", c->label, path);
        int never_answered = !atomic_load(&c->answered);
        if ((res == CURLE_WEIRD_SERVER_REPLY || res == CURLE_UNSUPPORTED_PROTOCOL ||
             res == CURLE_HTTP2) &&
            never_answered)
            /* another service's port, as if no etcd were there: the URL
             * is what to fix (a MySQL server's greeting, say) */
            return dlock__fail(DLOCK_EUNREACHABLE,
                               "%s answered, but not as etcd (not an HTTP/1.1 server: %s): "
                               "another service's port?",
                               c->hosts[ep], k->errbuf[0] ? k->errbuf : curl_easy_strerror(res));
        if (res == CURLE_WEIRD_SERVER_REPLY || res == CURLE_UNSUPPORTED_PROTOCOL ||
            res == CURLE_BAD_CONTENT_ENCODING || res == CURLE_HTTP2 ||
            res == CURLE_FILESIZE_EXCEEDED)
            return dlock__fail(DLOCK_EPROTO, "%s%s: %s is not an HTTP/1.1 server: %s", c->label,
                               path, c->hosts[ep],
                               k->errbuf[0] ? k->errbuf : curl_easy_strerror(res));
        /* Could not reach it: the next call starts at the next endpoint,
         * and this one goes there too if the request was never sent. */
        dlock__etcd_endpoint_failed(c, ep);
        curl_easy_getinfo(k->easy, CURLINFO_REQUEST_SIZE, &sent);
        int unsent = res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST ||
                     (res == CURLE_OPERATION_TIMEDOUT && sent == 0);
        if (unsent && ++tried < c->n_hosts)
            continue;
        if (split) { /* sent, not answered: again, elsewhere, with the rest */
            mode->replayed = 1;
            tried++;
            continue;
        }
        if (res == CURLE_OPERATION_TIMEDOUT)
            return dlock__fail(DLOCK_EUNREACHABLE,
                               sent == 0 ? "%s%s: no connection to %s within %" PRId64 " ms"
                                         : "%s%s: no reply from %s within %" PRId64
                                           " ms (the request may or may not have run)",
                               c->label, path, c->hosts[ep], left_ms);
        long os_errno = 0;
        if (res == CURLE_COULDNT_CONNECT)
            curl_easy_getinfo(k->easy, CURLINFO_OS_ERRNO, &os_errno);
        if (unsent && os_errno != 0) /* curl's own text hides it: "Couldn't connect" */
            return dlock__fail(DLOCK_EUNREACHABLE, "%s%s: cannot connect to %s: %s", c->label, path,
                               c->hosts[ep], strerror((int) os_errno));
        if (unsent)
            return dlock__fail(DLOCK_EUNREACHABLE, "%s%s: cannot connect to %s: %s", c->label, path,
                               c->hosts[ep], k->errbuf[0] ? k->errbuf : curl_easy_strerror(res));
        if (res == CURLE_GOT_NOTHING && never_answered && c->n_hosts == 1)
            /* closed without a word, and no reply before: no etcd does
             * that, another service's port does (Redis, ZooKeeper and
             * PostgreSQL close it at an HTTP request) */
            return dlock__fail(DLOCK_EUNREACHABLE,
                               "%s answered, but not as etcd (the connection broke before any "
                               "HTTP reply: %s): another service's port?",
                               c->hosts[ep], k->errbuf[0] ? k->errbuf : curl_easy_strerror(res));
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "%s%s: connection to %s broke before the reply (the request may or "
                           "may not have run): %s",
                           c->label, path, c->hosts[ep],
                           k->errbuf[0] ? k->errbuf : curl_easy_strerror(res));
    }
}

/* ================================================================ auth */

/* Rebuilds k's header list when the token changed since it was built. */
static int set_headers(dlock__etcd_conn *k, const char *auth_line, uint64_t gen)
{
    struct curl_slist *h = NULL, *t;

    if (k->headers != NULL && k->headers_gen == gen && k->headers_auth == (auth_line != NULL))
        return DLOCK_OK;
    h = curl_slist_append(NULL, "Content-Type: application/json");
    /* libcurl would wait for a 100-continue on a large body; etcd never
     * needs one. */
    if (h != NULL && (t = curl_slist_append(h, "Expect:")) != NULL)
        h = t;
    else
        goto nomem;
    if (auth_line != NULL) {
        t = curl_slist_append(h, auth_line);
        if (t == NULL)
            goto nomem;
        h = t;
    }
    curl_slist_free_all(k->headers);
    k->headers = h;
    k->headers_gen = gen;
    k->headers_auth = auth_line != NULL;
    return DLOCK_OK;
nomem:
    curl_slist_free_all(h);
    return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
}

/* POST /v3/auth/authenticate on k (without a token) and store the token. */
static int authenticate(dlock__etcd *c, dlock__etcd_conn *k, int64_t deadline_us)
{
    static const char path[] = "/v3/auth/authenticate";
    char *body = NULL, *token = NULL;
    size_t len;
    long status = 0;
    dlock__etcd_call_mode again = {1, 0}; /* a second token is no harm */
    int rc;

    rc = dlock__etcd_encode_authenticate(c->user, c->password, &body, &len);
    if (rc == DLOCK_OK)
        rc = set_headers(k, NULL, 0);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_post(c, k, path, body, len, deadline_us, &again, &status);
    if (body != NULL) {
        explicit_bzero(body, len);
        free(body);
    }
    if (rc != DLOCK_OK)
        return rc;
    if (status == 200) {
        rc = dlock__etcd_decode_token(k->buf, k->len, &token);
        if (rc != DLOCK_OK)
            return rc;
        pthread_mutex_lock(&c->token_mu);
        free(c->token);
        c->token = token;
        c->token_gen++;
        pthread_mutex_unlock(&c->token_mu);
        atomic_fetch_add(&c->stat_auth, 1);
        return DLOCK_OK;
    }
    dlock__etcd_status st;
    if (dlock__etcd_decode_status(k->buf, k->len, &st) != DLOCK_OK)
        return dlock__fail(DLOCK_EPROTO, "%s%s: HTTP %ld and no etcd error in the reply", c->label,
                           path, status);
    if (dlock__etcd_status_kind(&st) == DLOCK__ETCD_ST_AUTH_NOT_ENABLED) {
        /* As etcd's Go client does: a user given to a server without auth
         * is not an error, requests just go without a token. */
        atomic_store(&c->auth_off, 1);
        return DLOCK_OK;
    }
    return dlock__etcd_fail_status(&st, (int) status, c->label, path);
}

/* The current token as a header line in *line (NULL when there is none). */
static int token_line(dlock__etcd *c, char **line, uint64_t *gen)
{
    int have;

    *line = NULL;
    pthread_mutex_lock(&c->token_mu);
    *gen = c->token_gen;
    have = c->token != NULL;
    if (have) {
        size_t n = strlen(c->token) + sizeof "Authorization: ";
        *line = malloc(n);
        if (*line != NULL)
            snprintf(*line, n, "Authorization: %s", c->token);
    }
    pthread_mutex_unlock(&c->token_mu);
    if (have && *line == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory");
    return DLOCK_OK;
}

/* Makes sure a token newer than generation seen exists (any token when
 * !refresh), authenticating on k if needed. */
int dlock__etcd_need_token(dlock__etcd *c, dlock__etcd_conn *k, int refresh, uint64_t seen,
                           int64_t deadline_us)
{
    int rc = DLOCK_OK, turned_off = 0;

    pthread_mutex_lock(&c->auth_mu);
    pthread_mutex_lock(&c->token_mu);
    int fresh = c->token != NULL && (!refresh || c->token_gen != seen);
    pthread_mutex_unlock(&c->token_mu);
    if (!fresh && !atomic_load(&c->auth_off)) {
        rc = authenticate(c, k, deadline_us);
        turned_off = atomic_load(&c->auth_off); /* once: nobody authenticates after */
    }
    pthread_mutex_unlock(&c->auth_mu);
    /* logged with no lock held: the callback may call dlock */
    if (turned_off && c->log != NULL)
        DLOCK__LOG(c->log, DLOCK_LOG_WARN,
                   "%s: authentication is not enabled on this etcd: the URL's user '%s' is not "
                   "used, requests go without a token",
                   c->label, c->user);
    return rc;
}

int dlock__etcd_auth_line(dlock__etcd *c, int refresh, uint64_t seen, int64_t deadline_us,
                          char **line, uint64_t *gen)
{
    dlock__etcd_conn *k;
    int rc;

    *line = NULL;
    *gen = 0;
    if (c->user == NULL || atomic_load(&c->auth_off))
        return DLOCK_OK;
    rc = token_line(c, line, gen);
    if (rc != DLOCK_OK || (*line != NULL && !(refresh && *gen == seen)))
        return rc;
    free(*line);
    *line = NULL;
    rc = dlock__etcd_conn_get(c, deadline_us, &k);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__etcd_need_token(c, k, refresh, seen, deadline_us);
    dlock__etcd_conn_put(c, k);
    return rc != DLOCK_OK ? rc : token_line(c, line, gen);
}

/* Gives k the headers of a request, with the current token. */
int dlock__etcd_prepare(dlock__etcd *c, dlock__etcd_conn *k, int64_t deadline_us, uint64_t *gen)
{
    char *line = NULL;
    int rc;

    *gen = 0;
    if (c->user == NULL || atomic_load(&c->auth_off))
        return set_headers(k, NULL, 0);
    rc = token_line(c, &line, gen);
    if (rc == DLOCK_OK && line == NULL) {
        rc = dlock__etcd_need_token(c, k, 0, 0, deadline_us);
        if (rc == DLOCK_OK)
            rc = token_line(c, &line, gen);
    }
    if (rc == DLOCK_OK)
        rc = set_headers(k, line, *gen);
    free(line);
    return rc;
}

int dlock__etcd_member_answers(dlock__etcd *c, size_t ep, int64_t deadline_us)
{
    dlock__etcd_conn *k = NULL;

    if (ep >= c->n_hosts || dlock__etcd_conn_get(c, deadline_us, &k) != DLOCK_OK)
        return 0;
    int64_t left_ms = (deadline_us - dlock__now_us()) / 1000;
    CURLcode res = CURLE_OPERATION_TIMEDOUT;
    /* any reply will do, so no token is fetched for it */
    if (left_ms > 0 && (k->headers != NULL || set_headers(k, NULL, 0) == DLOCK_OK))
        res = send_to(c, k, ep, "/v3/maintenance/status", "{}", 2, left_ms);
    dlock__etcd_conn_put(c, k);
    return res == CURLE_OK;
}
