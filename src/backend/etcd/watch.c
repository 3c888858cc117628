/* SPDX-License-Identifier: MIT */
/* watch.c - one etcd watch stream per client, shared by all its watches.
 *
 * Design note. etcd's gateway serves the Watch RPC as one HTTP/1.1 POST to
 * /v3/watch: it decodes a sequence of WatchRequest objects from the request
 * body and streams WatchResponse lines back. New watches join the open
 * stream by writing create_request / cancel_request lines into the body
 * while it is still being sent (a libcurl read callback that pauses when it
 * has nothing to send and is resumed when a line is queued). Two facts of
 * the 3.4 gateway (Go 1.19 net/http), found by experiment and checked by
 * tests/backend/test_etcd_wire.c, shape how the body is sent:
 *
 *  - It must declare a large Content-Length, not be chunked. Before writing
 *    its response header Go's HTTP/1 server discards up to 256 KiB of an
 *    unread request body unless that much is declared still to come; on a
 *    chunked body it would block there until the body ends (no reply ever
 *    comes) or eat the requests that follow. With a declared length of
 *    STREAM_BODY bytes it answers "Connection: close" and leaves the body to
 *    the gateway. The stream is reopened before that many bytes are sent.
 *  - Writing the response header waits for a read of the body in progress
 *    to return (the body's lock is held across the read), so the first
 *    reply only leaves once the client sends more. Until the header has
 *    arrived the thread writes a newline (whitespace between JSON values)
 *    every NUDGE_MS; about two are needed.
 *
 * Threads: the stream is driven by one thread per client, started by the
 * first watch, with a curl multi handle it alone touches. Other threads
 * only change the watch table and the outgoing bytes under `mu`, then wake
 * it with curl_multi_wakeup. Watch ids are ours and sent as watch_id (etcd
 * 3.4+), so they survive reconnection; "created" replies come in request
 * order and are also matched against the FIFO of creates sent (a failed
 * create answers with watch_id -1).
 *
 * A member that stops answering (paused, or cut off behind a middlebox that
 * keeps the connection open) would leave the stream silent, and its waiters
 * woken only by their rechecks. So after a second with nothing received
 * (and watches to serve), the stream sends a progress request (etcd 3.4+),
 * which etcd 3.4.23 answers at once with its revision. When no byte comes
 * back within the request timeout, the member is asked for its status on a
 * request connection: if that too goes unanswered, the member is dropped,
 * the client moves on to the next endpoint, and the watches are re-created
 * there. Later etcd releases answer a progress request only while every
 * watch of the stream is synced and not ahead of the store (etcd PRs 15237
 * and 20229), so a member that answers its status is kept, and the stream
 * waits twice as long before its next progress request (up to 30 s).
 *
 * The stream asks for a leader (the hasleader metadata, through the
 * gateway's Grpc-Metadata- headers): a member cut off from the quorum ends
 * it (the gateway closes it, or says "no leader" to a new one), and the
 * client moves on to the next endpoint.
 *
 * No event is lost across a reconnection: each watch remembers the revision
 * after the last event delivered (or after the revision it was created at)
 * and is re-created from there. Callbacks run on the stream thread without
 * `mu` held; `delivering` lets dlock__etcd_watch_cancel wait out a callback
 * in progress, so after it returns the callback never runs again. */
#define _GNU_SOURCE
#include "watch.h"
#include "transport.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/random.h"
#include "../../base/thread.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STREAM_BODY    ((curl_off_t) 1 << 30)
#define STREAM_SLACK   (1 << 20) /* reopen once less than this is left to send */
#define NUDGE_MS       2
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define IDLE_POLL_MS   1000
/* A stream silent this long asks the member for its progress (doubling up
 * to the maximum while the member answers its status and not that). */
#define PROGRESS_IDLE_MS     1000
#define PROGRESS_IDLE_MAX_MS 30000
#define PROGRESS_LINE        "{\"progress_request\":{}}\n"
/* A create refused this soon after reopening for a refusal is believed. */
#define DENIED_RETRY_MS 10000

enum { W_NEW, W_SENT, W_ACTIVE, W_DEAD };

typedef struct watch {
    int64_t id;
    char *key, *range_end;
    int no_put;
    int64_t next_rev; /* re-create from here; 0: unknown ("now") */
    int64_t seen_rev; /* spec's seen_revision */
    int state;        /* W_* on the current stream */
    int broken_told;  /* BROKEN told for the current outage */
    dlock__etcd_watch_fn fn;
    void *arg;
} watch;

struct dlock__etcd_watcher {
    dlock__etcd *c;
    pthread_t thread;
    CURLM *multi;

    pthread_mutex_t mu;
    pthread_cond_t delivered; /* a callback returned */
    int stop;
    watch **watches;
    size_t n_watches, cap_watches;
    int64_t next_id;
    int64_t delivering; /* id whose callback runs now, 0 if none */
    char *out;          /* bytes queued for the request body */
    size_t out_len, out_off, out_cap;
    int paused;    /* the read callback paused the upload */
    int connected; /* a stream is open: new watches are sent on it */
    uint64_t stat_streams, stat_created, stat_cancels;

    /* The stream thread's own state. */
    CURL *easy;
    curl_socket_t sock; /* its connection, CURL_SOCKET_BAD when none */
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *headers;
    size_t endpoint;
    int64_t opened_us, last_nudge_us, retry_at_us, backoff_ms;
    int64_t served_us;   /* when the stream's 200 came; 0 before */
    int64_t last_rx_us;  /* when a reply byte last came */
    int64_t progress_us; /* when an unanswered progress request went; 0: none */
    int64_t progress_idle_ms;
    int got_header;
    long http_status;
    curl_off_t body_sent;
    int64_t *pending; /* ids of creates sent and not yet confirmed, in order */
    size_t n_pending, cap_pending;
    char *line; /* reply bytes not yet ending in a newline */
    size_t line_len, line_cap;
    int fail_code; /* why the stream is being dropped, set by a callback */
    char fail_msg[300];
    int need_reauth;
    uint64_t token_gen;
    int64_t denied_reopen_us; /* when a denied create last made us reopen */
};

/* ================================================================ table */

static watch *find(dlock__etcd_watcher *w, int64_t id)
{
    for (size_t i = 0; i < w->n_watches; i++) {
        if (w->watches[i]->id == id)
            return w->watches[i];
    }
    return NULL;
}

static void watch_free(watch *wt)
{
    if (wt == NULL)
        return;
    free(wt->key);
    free(wt->range_end);
    free(wt);
}

static void remove_watch(dlock__etcd_watcher *w, int64_t id)
{
    for (size_t i = 0; i < w->n_watches; i++) {
        if (w->watches[i]->id == id) {
            watch_free(w->watches[i]);
            w->watches[i] = w->watches[--w->n_watches];
            return;
        }
    }
}

/* Appends bytes to the request body queue (under mu). */
static int queue_bytes(dlock__etcd_watcher *w, const char *p, size_t n)
{
    if (w->out_off > 0 && w->out_off == w->out_len)
        w->out_off = w->out_len = 0;
    if (w->out_len + n > w->out_cap) {
        size_t cap = w->out_cap > 0 ? w->out_cap : 1024;
        while (cap < w->out_len + n)
            cap *= 2;
        char *out = realloc(w->out, cap);
        if (out == NULL)
            return -1;
        w->out = out;
        w->out_cap = cap;
    }
    memcpy(w->out + w->out_len, p, n);
    w->out_len += n;
    return 0;
}

static int push_pending(dlock__etcd_watcher *w, int64_t id)
{
    if (w->n_pending == w->cap_pending) {
        size_t cap = w->cap_pending > 0 ? 2 * w->cap_pending : 16;
        int64_t *p = realloc(w->pending, cap * sizeof *p);
        if (p == NULL)
            return -1;
        w->pending = p;
        w->cap_pending = cap;
    }
    w->pending[w->n_pending++] = id;
    return 0;
}

/* Queues the create_request of wt on the open stream (under mu). */
static int send_create(dlock__etcd_watcher *w, watch *wt)
{
    dlock__etcd_watch_create req = {.key = wt->key,
                                    .range_end = wt->range_end,
                                    .start_revision = wt->next_rev,
                                    .watch_id = wt->id,
                                    .no_put = wt->no_put};
    char *line;
    size_t len;
    int rc = dlock__etcd_encode_watch_create(&req, &line, &len);

    if (rc != DLOCK_OK)
        return rc;
    if (push_pending(w, wt->id) != 0 || queue_bytes(w, line, len) != 0) {
        free(line);
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory queueing a watch");
    }
    free(line);
    wt->state = W_SENT;
    return DLOCK_OK;
}

static void send_cancel(dlock__etcd_watcher *w, int64_t id)
{
    char *line;
    size_t len;

    /* Out of memory here only leaves a watch running on the server whose
     * events we drop. */
    if (dlock__etcd_encode_watch_cancel(id, &line, &len) == DLOCK_OK) {
        (void) queue_bytes(w, line, len);
        free(line);
    }
}

/* ================================================================ delivery */

/* Tells the watch `id` one note, unless it was canceled meanwhile. Called
 * on the stream thread with mu held; releases it around the callback. A
 * CANCELED note is the watch's last: it is dropped afterwards. */
static void deliver(dlock__etcd_watcher *w, dlock__etcd_watch_note *note)
{
    watch *wt = find(w, note->watch);
    dlock__etcd_watch_fn fn;
    void *arg;

    if (wt == NULL)
        return;
    fn = wt->fn;
    arg = wt->arg;
    w->delivering = note->watch;
    pthread_mutex_unlock(&w->mu);
    fn(arg, note);
    pthread_mutex_lock(&w->mu);
    w->delivering = 0;
    pthread_cond_broadcast(&w->delivered);
    if (note->kind == DLOCK__ETCD_WATCH_CANCELED)
        remove_watch(w, note->watch);
}

/* The stream is gone: every watch is told once per outage and will be
 * re-created on the next stream. Under mu. */
static void tell_broken(dlock__etcd_watcher *w, int code, const char *reason)
{
    size_t n = w->n_watches;
    int64_t *ids = n > 0 ? malloc(n * sizeof *ids) : NULL;

    w->connected = 0;
    w->n_pending = 0;
    w->out_len = w->out_off = 0;
    for (size_t i = 0; i < w->n_watches; i++) {
        if (w->watches[i]->state != W_DEAD)
            w->watches[i]->state = W_NEW;
    }
    if (ids == NULL)
        return;
    /* The table may change while a callback runs, so go by id. */
    for (size_t i = 0; i < n; i++)
        ids[i] = w->watches[i]->id;
    for (size_t i = 0; i < n; i++) {
        watch *wt = find(w, ids[i]);
        if (wt == NULL || wt->broken_told || wt->state == W_DEAD)
            continue;
        wt->broken_told = 1;
        dlock__etcd_watch_note note = {
            .kind = DLOCK__ETCD_WATCH_BROKEN, .watch = ids[i], .code = code, .reason = reason};
        deliver(w, &note);
    }
    free(ids);
}

/* ================================================================ replies */

static int stream_fail(dlock__etcd_watcher *w, int code, const char *fmt, const char *detail)
{
    if (w->fail_code == 0) {
        w->fail_code = code;
        snprintf(w->fail_msg, sizeof w->fail_msg, fmt, w->c->label, detail);
    }
    return -1;
}

/* A "created" reply: the oldest create sent is now a watch on the server,
 * or failed to be one. Under mu. */
static int on_created(dlock__etcd_watcher *w, const dlock__etcd_watch_response *r)
{
    int64_t id;
    watch *wt;

    if (w->n_pending == 0)
        return stream_fail(w, DLOCK_EPROTO, "%s /v3/watch: %s", "\"created\" for no request");
    id = w->pending[0];
    memmove(w->pending, w->pending + 1, --w->n_pending * sizeof *w->pending);
    if (r->watch_id != id && r->watch_id != -1)
        return stream_fail(w, DLOCK_EPROTO, "%s /v3/watch: %s",
                           "\"created\" for another watch than requested");
    w->stat_created++;
    wt = find(w, id);
    if (r->watch_id == -1 || r->canceled) {
        int64_t now = dlock__now_us();
        if (w->c->user != NULL && r->cancel_reason != NULL &&
            (strstr(r->cancel_reason, "invalid auth token") != NULL ||
             strstr(r->cancel_reason, "permission denied") != NULL) &&
            now - w->denied_reopen_us > DENIED_RETRY_MS * 1000) {
            /* etcd checks the stream's token on every create, and a simple
             * token expires when idle (--auth-token-ttl): reopen the
             * stream once with a new token before believing the refusal. */
            w->need_reauth = 1;
            w->denied_reopen_us = now;
            return stream_fail(w, DLOCK_ESERVER,
                               "%s /v3/watch: create refused, authenticating again: %s",
                               r->cancel_reason);
        }
        if (wt != NULL) {
            wt->state = W_DEAD;
            dlock__etcd_watch_note note = {
                .kind = DLOCK__ETCD_WATCH_CANCELED,
                .watch = id,
                .compact_revision = r->compact_revision,
                .reason = r->cancel_reason != NULL ? r->cancel_reason : "watch refused by etcd"};
            deliver(w, &note);
        }
        return 0;
    }
    if (wt == NULL) {
        send_cancel(w, id); /* canceled while its create was on the way */
        return 0;
    }
    wt->state = W_ACTIVE;
    wt->broken_told = 0;
    if (wt->next_rev == 0) {
        wt->next_rev = r->revision + 1;
        if (wt->seen_rev > 0 && r->revision > wt->seen_rev) {
            dlock__etcd_watch_note note = {
                .kind = DLOCK__ETCD_WATCH_LATE, .watch = id, .revision = r->revision};
            wt->seen_rev = 0;
            deliver(w, &note);
        }
    }
    return 0;
}

/* One complete reply line. Under mu. Returns -1 to drop the stream. */
static int on_line(dlock__etcd_watcher *w, const char *p, size_t n)
{
    dlock__etcd_watch_response r;
    int rc = 0;

    while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' '))
        n--;
    if (n == 0)
        return 0;
    if (dlock__etcd_decode_watch(p, n, &r) != DLOCK_OK)
        return stream_fail(w, DLOCK_EPROTO, "%s /v3/watch: %s", dlock_errmsg());
    if (r.error.code != 0) {
        int kind = dlock__etcd_status_kind(&r.error);
        w->need_reauth = kind == DLOCK__ETCD_ST_REAUTH || kind == DLOCK__ETCD_ST_AUTH_REQUIRED;
        int code = dlock__etcd_fail_status(&r.error, 200, w->c->label, "/v3/watch");
        rc = stream_fail(w, code, "%.0s%s", dlock_errmsg()); /* the detail names the client */
        goto out;
    }
    if (r.created) {
        rc = on_created(w, &r);
        goto out;
    }
    if (r.canceled) {
        watch *wt = find(w, r.watch_id);
        if (wt == NULL)
            w->stat_cancels++; /* one we canceled */
        if (wt != NULL && wt->state != W_DEAD) {
            wt->state = W_DEAD;
            dlock__etcd_watch_note note = {.kind = DLOCK__ETCD_WATCH_CANCELED,
                                           .watch = r.watch_id,
                                           .compact_revision = r.compact_revision,
                                           .reason = r.cancel_reason != NULL
                                                         ? r.cancel_reason
                                                         : (r.compact_revision > 0
                                                                ? "start revision compacted"
                                                                : "watch canceled by etcd")};
            deliver(w, &note);
        }
        goto out;
    }
    for (size_t i = 0; i < r.n_events; i++) {
        watch *wt = find(w, r.watch_id);
        if (wt == NULL || wt->state == W_DEAD)
            break;
        if (r.events[i].kv.mod_revision >= wt->next_rev)
            wt->next_rev = r.events[i].kv.mod_revision + 1;
        dlock__etcd_watch_note note = {.kind = DLOCK__ETCD_WATCH_EVENT,
                                       .watch = r.watch_id,
                                       .event = &r.events[i],
                                       .revision = r.revision};
        deliver(w, &note);
    }
out:
    dlock__etcd_watch_response_free(&r);
    return rc;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    dlock__etcd_watcher *w = arg;
    size_t n = size * nmemb, max = w->c->max_reply;
    int ok = 1;

    w->last_rx_us = dlock__now_us();
    w->progress_us = 0;
    if (n > max || w->line_len > max - n) {
        stream_fail(w, DLOCK_EPROTO, "%s /v3/watch: %s", "reply line larger than the reply limit");
        return 0;
    }
    if (w->line_len + n > w->line_cap) {
        size_t cap = w->line_cap > 0 ? w->line_cap : 4096;
        while (cap < w->line_len + n)
            cap *= 2;
        char *line = realloc(w->line, cap);
        if (line == NULL) {
            stream_fail(w, DLOCK_ENOMEM, "%s /v3/watch: %s", "out of memory");
            return 0;
        }
        w->line = line;
        w->line_cap = cap;
    }
    memcpy(w->line + w->line_len, data, n);
    w->line_len += n;
    if (w->http_status != 200)
        return n; /* an error body, read whole when the reply ends */
    pthread_mutex_lock(&w->mu);
    size_t start = 0;
    for (size_t i = w->line_len - n; ok && i < w->line_len; i++) {
        if (w->line[i] == '\n') {
            ok = on_line(w, w->line + start, i - start) == 0;
            start = i + 1;
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (!ok)
        return 0;
    memmove(w->line, w->line + start, w->line_len - start);
    w->line_len -= start;
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    dlock__etcd_watcher *w = arg;
    size_t n = size * nmemb;

    /* The empty line ends the header; a 1xx header is followed by another. */
    if (n <= 2 && (n == 0 || data[0] == '\r' || data[0] == '\n')) {
        long status = 0;
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200) {
            w->http_status = status;
            w->got_header = 1;
        }
    }
    return n;
}

/* Hands queued bytes to libcurl, pausing the upload when there are none. */
static size_t on_read(char *buf, size_t size, size_t nitems, void *arg)
{
    dlock__etcd_watcher *w = arg;
    size_t room = size * nitems, n;

    pthread_mutex_lock(&w->mu);
    n = w->out_len - w->out_off;
    if (n == 0) {
        w->paused = 1;
        pthread_mutex_unlock(&w->mu);
        return CURL_READFUNC_PAUSE;
    }
    if (n > room)
        n = room;
    memcpy(buf, w->out + w->out_off, n);
    w->out_off += n;
    pthread_mutex_unlock(&w->mu);
    w->body_sent += (curl_off_t) n;
    return n;
}

/* ================================================================ stream */

/* The stream's socket is remembered as it is opened and closed
 * (CURLINFO_ACTIVESOCKET only answers once a transfer is over). */
static curl_socket_t open_stream_socket(void *arg, curlsocktype purpose,
                                        struct curl_sockaddr *address)
{
    dlock__etcd_watcher *w = arg;
    w->sock = dlock__etcd_open_socket(NULL, purpose, address);
    return w->sock;
}

static int close_stream_socket(void *arg, curl_socket_t fd)
{
    dlock__etcd_watcher *w = arg;
    if (fd == w->sock)
        w->sock = CURL_SOCKET_BAD;
    return close(fd);
}

static void close_stream(dlock__etcd_watcher *w)
{
    if (w->easy == NULL)
        return;
    curl_multi_remove_handle(w->multi, w->easy);
    curl_easy_cleanup(w->easy);
    w->easy = NULL;
}

/* Opens the stream and queues a create for every watch. Runs without mu. */
static int open_stream(dlock__etcd_watcher *w)
{
    dlock__etcd *c = w->c;
    char url[320], *auth = NULL;
    int64_t deadline = dlock__now_us() + (c->connect_timeout_ms + c->request_timeout_ms) * 1000;
    int rc;

    rc = dlock__etcd_auth_line(c, w->need_reauth, w->token_gen, deadline, &auth, &w->token_gen);
    if (rc != DLOCK_OK)
        return rc;
    w->need_reauth = 0;
    curl_slist_free_all(w->headers);
    w->headers = NULL;
    /* hasleader: a member that has no leader (cut off from the quorum)
     * ends the stream with "no leader" after three election timeouts,
     * instead of serving it from a store that no longer moves. */
    const char *lines[] = {"Content-Type: application/json",
                           "Expect:", "Grpc-Metadata-hasleader: true", auth};
    for (size_t i = 0; i < 4 && lines[i] != NULL; i++) {
        struct curl_slist *h = curl_slist_append(w->headers, lines[i]);
        if (h == NULL) {
            curl_slist_free_all(w->headers);
            w->headers = NULL;
            break;
        }
        w->headers = h;
    }
    free(auth);
    w->easy = w->headers != NULL ? curl_easy_init() : NULL;
    if (w->easy == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory opening the watch stream");
    w->endpoint = dlock__etcd_endpoint(c);
    snprintf(url, sizeof url, "http://%s/v3/watch", c->hosts[w->endpoint]);
    dlock__etcd_setup_handle(w->easy, w->errbuf);
    curl_easy_setopt(w->easy, CURLOPT_URL, url);
    curl_easy_setopt(w->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(w->easy, CURLOPT_POSTFIELDSIZE_LARGE, STREAM_BODY);
    curl_easy_setopt(w->easy, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(w->easy, CURLOPT_READDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(w->easy, CURLOPT_HEADERDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->headers);
    curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS, (long) c->connect_timeout_ms);
    curl_easy_setopt(w->easy, CURLOPT_OPENSOCKETFUNCTION, open_stream_socket);
    curl_easy_setopt(w->easy, CURLOPT_OPENSOCKETDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_CLOSESOCKETFUNCTION, close_stream_socket);
    curl_easy_setopt(w->easy, CURLOPT_CLOSESOCKETDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPIDLE, 10L);
    curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPINTVL, 5L);

    w->got_header = 0;
    w->http_status = 0;
    w->body_sent = 0;
    w->line_len = 0;
    w->fail_code = 0;
    w->fail_msg[0] = '\0';
    w->opened_us = w->last_nudge_us = w->last_rx_us = dlock__now_us();
    w->progress_us = 0;

    pthread_mutex_lock(&w->mu);
    w->out_len = w->out_off = 0;
    w->n_pending = 0;
    w->paused = 0;
    rc = DLOCK_OK;
    for (size_t i = 0; rc == DLOCK_OK && i < w->n_watches; i++) {
        if (w->watches[i]->state != W_DEAD)
            rc = send_create(w, w->watches[i]);
    }
    if (rc == DLOCK_OK) {
        w->connected = 1;
        w->stat_streams++;
    }
    pthread_mutex_unlock(&w->mu);
    if (rc == DLOCK_OK && curl_multi_add_handle(w->multi, w->easy) != CURLM_OK)
        rc = dlock__fail(DLOCK_ENOMEM, "etcd: cannot add the watch stream to its multi handle");
    if (rc != DLOCK_OK) {
        curl_easy_cleanup(w->easy);
        w->easy = NULL;
    }
    return rc;
}

/* The transfer ended (it never should while watches exist): why, as a
 * dlock code and message. */
static int ended(dlock__etcd_watcher *w, CURLcode res, char *msg, size_t size)
{
    dlock__etcd *c = w->c;
    const char *host = c->hosts[w->endpoint];
    const char *why = w->errbuf[0] ? w->errbuf : curl_easy_strerror(res);

    if (w->fail_code != 0) {
        if (w->fail_code == DLOCK_EUNREACHABLE) /* e.g. "no leader": try another */
            dlock__etcd_endpoint_failed(c, w->endpoint);
        snprintf(msg, size, "%s", w->fail_msg);
        return w->fail_code;
    }
    if (res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST ||
        (res == CURLE_OPERATION_TIMEDOUT && !w->got_header)) {
        dlock__etcd_endpoint_failed(c, w->endpoint);
        snprintf(msg, size, "%s /v3/watch: cannot connect to %s: %s", c->label, host, why);
        return DLOCK_EUNREACHABLE;
    }
    if (res != CURLE_OK) {
        dlock__etcd_endpoint_failed(c, w->endpoint);
        snprintf(msg, size, "%s /v3/watch: stream from %s broke: %s", c->label, host, why);
        return res == CURLE_WEIRD_SERVER_REPLY || res == CURLE_UNSUPPORTED_PROTOCOL
                   ? DLOCK_EPROTO
                   : DLOCK_EUNREACHABLE;
    }
    if (w->http_status != 200) {
        dlock__etcd_status st;
        int code;
        if (dlock__etcd_decode_status(w->line, w->line_len, &st) != DLOCK_OK) {
            snprintf(msg, size, "%s /v3/watch: HTTP %ld and no etcd error in the reply", c->label,
                     w->http_status);
            return DLOCK_EPROTO;
        }
        int kind = dlock__etcd_status_kind(&st);
        w->need_reauth = kind == DLOCK__ETCD_ST_REAUTH || kind == DLOCK__ETCD_ST_AUTH_REQUIRED;
        code = dlock__etcd_fail_status(&st, (int) w->http_status, c->label, "/v3/watch");
        if (code == DLOCK_EUNREACHABLE)
            dlock__etcd_endpoint_failed(c, w->endpoint);
        snprintf(msg, size, "%s", dlock_errmsg());
        return code;
    }
    snprintf(msg, size, "%s /v3/watch: %s ended the stream", c->label, host);
    return DLOCK_EUNREACHABLE;
}

/* Whether the server closed the connection. libcurl sees the end of the
 * response, but a transfer only ends when both directions have, and the
 * upload is paused, waiting for us: it would never report it. So look at
 * the socket: a peek that reads end-of-file (or an error) means it is gone;
 * pending data or nothing to read means it is alive. */
static int server_closed(dlock__etcd_watcher *w)
{
    char byte;

    if (w->sock == CURL_SOCKET_BAD)
        return 0;
    ssize_t n = recv(w->sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Drops the stream and tells every watch (under mu). */
static void drop_stream(dlock__etcd_watcher *w, int code, const char *msg)
{
    pthread_mutex_unlock(&w->mu);
    close_stream(w);
    pthread_mutex_lock(&w->mu);
    tell_broken(w, code, msg);
    /* A stream that served a while starts the backoff afresh; one that
     * ends as it opens (a member without a leader answers 200, then
     * closes) makes it grow, as a refused one does: never a reopening loop
     * at the floor. Jittered: clients that lost a member together do not
     * come back in step. */
    int64_t now = dlock__now_us();
    if (w->served_us != 0 && now - w->served_us >= BACKOFF_MAX_MS * 1000)
        w->backoff_ms = BACKOFF_MIN_MS;
    w->served_us = 0;
    w->retry_at_us = now + w->backoff_ms * 1000 + dlock__random_below(w->backoff_ms * 500);
    w->backoff_ms = w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : w->backoff_ms * 2;
}

static void *run(void *arg)
{
    dlock__etcd_watcher *w = arg;
    dlock__etcd *c = w->c;
    char msg[400];

    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        int64_t now = dlock__now_us(), wait_ms = IDLE_POLL_MS;

        if (w->easy == NULL && w->n_watches > 0 && now >= w->retry_at_us) {
            pthread_mutex_unlock(&w->mu);
            int rc = open_stream(w);
            if (rc != DLOCK_OK)
                snprintf(msg, sizeof msg, "%s", dlock_errmsg());
            pthread_mutex_lock(&w->mu);
            if (rc != DLOCK_OK)
                drop_stream(w, rc, msg);
            continue;
        }
        if (w->easy != NULL) {
            int running = 0, queued;
            CURLMsg *m;

            pthread_mutex_unlock(&w->mu);
            curl_multi_perform(w->multi, &running);
            m = curl_multi_info_read(w->multi, &queued);
            pthread_mutex_lock(&w->mu);
            if (m != NULL && m->msg == CURLMSG_DONE) {
                int code = ended(w, m->data.result, msg, sizeof msg);
                drop_stream(w, code, msg);
                continue;
            }
            if (server_closed(w)) {
                snprintf(msg, sizeof msg, "%s /v3/watch: %s closed the stream", c->label,
                         c->hosts[w->endpoint]);
                dlock__etcd_endpoint_failed(c, w->endpoint); /* e.g. it lost its leader */
                drop_stream(w, DLOCK_EUNREACHABLE, msg);
                continue;
            }
            now = dlock__now_us();
            if (w->got_header && w->http_status == 200 && w->served_us == 0)
                w->served_us = now;
            if (!w->got_header) {
                if (now - w->opened_us > (c->connect_timeout_ms + c->request_timeout_ms) * 1000) {
                    snprintf(msg, sizeof msg,
                             "%s /v3/watch: no reply from %s within %" PRId64 " ms", c->label,
                             c->hosts[w->endpoint], c->connect_timeout_ms + c->request_timeout_ms);
                    drop_stream(w, DLOCK_EUNREACHABLE, msg);
                    continue;
                }
                if (now - w->last_nudge_us >= NUDGE_MS * 1000) {
                    (void) queue_bytes(w, "\n", 1);
                    w->last_nudge_us = now;
                }
                wait_ms = NUDGE_MS;
            }
            if (w->n_watches == 0)
                w->progress_us = 0; /* nothing to serve: nothing to ask */
            if (w->got_header && w->http_status == 200 && w->n_watches > 0) {
                int64_t next_us;
                if (w->progress_us != 0) {
                    next_us = w->progress_us + c->request_timeout_ms * 1000;
                    if (now >= next_us) {
                        size_t ep = w->endpoint;
                        pthread_mutex_unlock(&w->mu);
                        int alive = dlock__etcd_member_answers(
                            c, ep, dlock__now_us() + c->request_timeout_ms * 1000);
                        pthread_mutex_lock(&w->mu);
                        if (alive) { /* it serves, and keeps its progress to itself */
                            w->progress_us = 0;
                            w->last_rx_us = dlock__now_us();
                            w->progress_idle_ms = w->progress_idle_ms * 2 > PROGRESS_IDLE_MAX_MS
                                                      ? PROGRESS_IDLE_MAX_MS
                                                      : w->progress_idle_ms * 2;
                            continue;
                        }
                        snprintf(msg, sizeof msg,
                                 "%s /v3/watch: %s answered neither a progress request nor a "
                                 "status request within %" PRId64 " ms each",
                                 c->label, c->hosts[ep], c->request_timeout_ms);
                        dlock__etcd_endpoint_failed(c, ep);
                        drop_stream(w, DLOCK_EUNREACHABLE, msg);
                        continue;
                    }
                } else {
                    next_us = w->last_rx_us + w->progress_idle_ms * 1000;
                    if (now >= next_us &&
                        queue_bytes(w, PROGRESS_LINE, strlen(PROGRESS_LINE)) == 0) {
                        w->progress_us = now;
                        next_us = now + c->request_timeout_ms * 1000;
                    }
                }
                int64_t in_ms = next_us > now ? (next_us - now) / 1000 + 1 : 1;
                if (in_ms < wait_ms)
                    wait_ms = in_ms;
            }
            if (w->body_sent + (curl_off_t) (w->out_len - w->out_off) >
                STREAM_BODY - STREAM_SLACK) {
                snprintf(msg, sizeof msg, "%s /v3/watch: request body used up, reopening",
                         c->label);
                drop_stream(w, DLOCK_EUNREACHABLE, msg);
                continue;
            }
            if (w->paused && w->out_len > w->out_off) {
                w->paused = 0;
                pthread_mutex_unlock(&w->mu);
                curl_easy_pause(w->easy, CURLPAUSE_CONT);
                pthread_mutex_lock(&w->mu);
                continue;
            }
        } else if (w->n_watches > 0) {
            wait_ms = (w->retry_at_us - now) / 1000 + 1;
        }
        pthread_mutex_unlock(&w->mu);
        curl_multi_poll(w->multi, NULL, 0, (int) wait_ms, NULL);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    close_stream(w);
    return NULL;
}

/* ================================================================ API */

static int watcher_new(dlock__etcd *c, dlock__etcd_watcher **out)
{
    dlock__etcd_watcher *w = calloc(1, sizeof *w);

    if (w == NULL)
        return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory for the watcher");
    w->c = c;
    w->sock = CURL_SOCKET_BAD;
    w->next_id = 1;
    w->backoff_ms = BACKOFF_MIN_MS;
    w->progress_idle_ms = PROGRESS_IDLE_MS;
    pthread_mutex_init(&w->mu, NULL);
    dlock__cond_init(&w->delivered);
    w->multi = dlock__etcd_multi_new();
    if (w->multi == NULL || dlock__thread_start(&w->thread, run, w) != 0) {
        curl_multi_cleanup(w->multi);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->delivered);
        free(w);
        return dlock__fail(DLOCK_ENOMEM, "etcd: cannot start the watch thread");
    }
    *out = w;
    return DLOCK_OK;
}

void dlock__etcd_watcher_free(dlock__etcd *c)
{
    dlock__etcd_watcher *w = c->watcher;

    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_mutex_unlock(&w->mu);
    curl_multi_wakeup(w->multi);
    pthread_join(w->thread, NULL);
    curl_multi_cleanup(w->multi);
    curl_slist_free_all(w->headers);
    for (size_t i = 0; i < w->n_watches; i++)
        watch_free(w->watches[i]);
    free(w->watches);
    free(w->out);
    free(w->pending);
    free(w->line);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->delivered);
    free(w);
    c->watcher = NULL;
}

void dlock__etcd_watcher_stats(dlock__etcd *c, dlock__etcd_stats *out)
{
    dlock__etcd_watcher *w;

    pthread_mutex_lock(&c->watcher_mu);
    w = c->watcher;
    pthread_mutex_unlock(&c->watcher_mu);
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    out->streams_opened = w->stat_streams;
    out->watches_created = w->stat_created;
    out->cancels_confirmed = w->stat_cancels;
    out->watches = w->n_watches;
    pthread_mutex_unlock(&w->mu);
}

int dlock__etcd_watch_add(dlock__etcd *c, const dlock__etcd_watch_spec *spec,
                          dlock__etcd_watch_fn fn, void *arg, int64_t *id)
{
    dlock__etcd_watcher *w;
    watch *wt = NULL;
    int rc = DLOCK_OK;

    if (spec->key == NULL || spec->key[0] == '\0' || strlen(spec->key) > DLOCK__ETCD_MAX_KEY ||
        (spec->range_end != NULL && strlen(spec->range_end) > DLOCK__ETCD_MAX_KEY) ||
        spec->start_revision < 0 || fn == NULL)
        return dlock__fail(DLOCK_EINVAL, "etcd: watch: bad key, revision or callback");
    pthread_mutex_lock(&c->watcher_mu);
    if (c->watcher == NULL)
        rc = watcher_new(c, &c->watcher);
    w = c->watcher;
    pthread_mutex_unlock(&c->watcher_mu);
    if (rc != DLOCK_OK)
        return rc;

    wt = calloc(1, sizeof *wt);
    if (wt == NULL || (wt->key = strdup(spec->key)) == NULL ||
        (spec->range_end != NULL && (wt->range_end = strdup(spec->range_end)) == NULL))
        goto nomem;
    wt->no_put = spec->no_put;
    wt->next_rev = spec->start_revision;
    wt->seen_rev = spec->start_revision == 0 ? spec->seen_revision : 0;
    wt->fn = fn;
    wt->arg = arg;
    wt->state = W_NEW;

    pthread_mutex_lock(&w->mu);
    if (w->n_watches == w->cap_watches) {
        size_t cap = w->cap_watches > 0 ? 2 * w->cap_watches : 16;
        watch **ws = realloc(w->watches, cap * sizeof *ws);
        if (ws == NULL) {
            pthread_mutex_unlock(&w->mu);
            goto nomem;
        }
        w->watches = ws;
        w->cap_watches = cap;
    }
    wt->id = w->next_id++;
    w->watches[w->n_watches++] = wt;
    *id = wt->id;
    /* Joins the open stream; otherwise the thread opens one with it. */
    if (w->connected && send_create(w, wt) != DLOCK_OK)
        wt->state = W_NEW; /* sent with the next stream */
    pthread_mutex_unlock(&w->mu);
    curl_multi_wakeup(w->multi);
    return DLOCK_OK;
nomem:
    watch_free(wt);
    return dlock__fail(DLOCK_ENOMEM, "etcd: out of memory adding a watch");
}

void dlock__etcd_watch_cancel(dlock__etcd *c, int64_t id)
{
    dlock__etcd_watcher *w;
    watch *wt;
    int wake = 0;

    pthread_mutex_lock(&c->watcher_mu);
    w = c->watcher;
    pthread_mutex_unlock(&c->watcher_mu);
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    wt = find(w, id);
    if (wt != NULL) {
        /* A create still on its way is canceled when its "created" comes. */
        if (w->connected && wt->state == W_ACTIVE) {
            send_cancel(w, id);
            wake = 1;
        }
        remove_watch(w, id);
    }
    if (!pthread_equal(pthread_self(), w->thread)) {
        while (w->delivering == id)
            pthread_cond_wait(&w->delivered, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    if (wake)
        curl_multi_wakeup(w->multi);
}
