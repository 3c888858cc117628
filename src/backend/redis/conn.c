/* conn.c - a pipelined Redis connection shared by threads.
 *
 * Design note. The state is one socket, one reply parser, a byte buffer of
 * commands not yet written, and a FIFO of requests whose replies are due, in
 * the order their bytes sit in the stream. Two roles exist, each taken by at
 * most one caller at a time and only while holding `mu` to take or give it:
 *
 *   writer: moves the pending bytes out to the socket (outside the mutex);
 *   reader: reads the socket, parses replies, and completes the requests at
 *           the head of the FIFO, waking their owners.
 *
 * A caller appends its command, becomes the writer if nobody is, then waits
 * for its replies, becoming the reader whenever nobody is. A reader that has
 * its own replies gives the role back and wakes the owner of the oldest
 * unfinished request, so the stream always has a reader when replies are
 * due. No thread of ours runs in the background: an idle connection costs
 * nothing, and a lone caller does a write and a read itself.
 *
 * Failure: a broken stream fails every request in the FIFO (they may or may
 * not have run on the server). The socket is shut down at once, to wake a
 * reader or writer blocked on it, and closed by whoever leaves the last role,
 * so no thread ever polls a closed (and possibly reused) descriptor. The next
 * call reconnects.
 *
 * A caller whose deadline passes abandons its requests: they stay in the
 * FIFO (their replies are still due, in order) and the reader frees them. */
#include "conn.h"

#include "../../core/clock.h"
#include "../../core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum req_state { REQ_PENDING, REQ_DONE, REQ_FAILED };

typedef struct request {
    struct request *next;
    redisReply *reply;
    enum req_state state;
    int abandoned;      /* the caller gave up: the reader frees it */
    pthread_cond_t *cv; /* the owner's condition variable */
} request;

struct dlock__rconn {
    pthread_mutex_t mu;
    pthread_cond_t state_cv; /* connection state changes (connect, close) */

    dlock__rendpoint ep; /* strings owned */
    char *label;

    int fd; /* -1: not connected */
    int broken;
    int connecting;
    int reading, writing;
    redisReader *reader;
    int64_t last_read_us;

    char *out; /* bytes of commands not yet written */
    size_t out_len, out_cap;

    request *head, *tail; /* replies due, oldest first */
    request *free_reqs;

    int fail_code; /* why the requests failed, for their owners */
    char fail_msg[256];
};

/* Each thread waits on its own condition variable, bound to the monotonic
 * clock; a thread waits for one call at a time. */
static _Thread_local struct {
    pthread_cond_t cv;
    int ready;
} me;

static pthread_cond_t *my_cv(void)
{
    if (!me.ready) {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&me.cv, &attr);
        pthread_condattr_destroy(&attr);
        me.ready = 1;
    }
    return &me.cv;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

int dlock__rconn_new(const dlock__rendpoint *ep, dlock__rconn **out)
{
    dlock__rconn *c = calloc(1, sizeof *c);
    pthread_condattr_t attr;

    *out = NULL;
    if (c == NULL)
        return DLOCK_ENOMEM;
    c->ep = *ep;
    c->ep.host = dup_or_null(ep->host);
    c->ep.unix_path = dup_or_null(ep->unix_path);
    c->ep.user = dup_or_null(ep->user);
    c->ep.password = dup_or_null(ep->password);
    c->label = strdup(ep->label);
    c->ep.label = c->label;
    c->reader = redisReaderCreate();
    if ((ep->host != NULL && c->ep.host == NULL) ||
        (ep->unix_path != NULL && c->ep.unix_path == NULL) ||
        (ep->user != NULL && c->ep.user == NULL) ||
        (ep->password != NULL && c->ep.password == NULL) || c->label == NULL || c->reader == NULL) {
        dlock__rconn_free(c);
        return DLOCK_ENOMEM;
    }
    c->fd = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->state_cv, &attr);
    pthread_condattr_destroy(&attr);
    *out = c;
    return DLOCK_OK;
}

void dlock__rconn_free(dlock__rconn *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    while (c->head != NULL) {
        request *r = c->head;
        c->head = r->next;
        freeReplyObject(r->reply);
        free(r);
    }
    while (c->free_reqs != NULL) {
        request *r = c->free_reqs;
        c->free_reqs = r->next;
        free(r);
    }
    if (c->reader != NULL) {
        redisReaderFree(c->reader);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->state_cv);
    }
    free((char *) c->ep.host);
    free((char *) c->ep.unix_path);
    free((char *) c->ep.user);
    free((char *) c->ep.password);
    free(c->label);
    free(c->out);
    free(c);
}

const char *dlock__rconn_label(const dlock__rconn *c)
{
    return c->label;
}

/* ---------------------------------------------------------------- dialing */

static int handshake(redisContext *ctx, const dlock__rendpoint *ep, int *code)
{
    redisReply *r = NULL;

    if (ep->password != NULL) {
        if (ep->user != NULL)
            r = redisCommand(ctx, "AUTH %s %s", ep->user, ep->password);
        else
            r = redisCommand(ctx, "AUTH %s", ep->password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto refused;
        freeReplyObject(r);
    }
    if (ep->db > 0) {
        r = redisCommand(ctx, "SELECT %d", ep->db);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto refused;
        freeReplyObject(r);
    }
    return 0;

refused:
    if (r == NULL) {
        *code = DLOCK_EUNREACHABLE;
        dlock__fail(*code, "%s: %s", ep->label, ctx->errstr);
    } else {
        *code = DLOCK_ESERVER;
        dlock__fail(*code, "%s: %s refused: %.*s", ep->label,
                    ep->password != NULL ? "AUTH" : "SELECT", (int) r->len, r->str);
        freeReplyObject(r);
    }
    return -1;
}

/* hiredis writes the handshake with write(2). A peer that closes first
 * (say, maxclients reached) would raise SIGPIPE in the host program: keep it
 * blocked meanwhile and swallow one raised here. */
static int handshake_guarded(redisContext *ctx, const dlock__rendpoint *ep, int *code)
{
    sigset_t pipe_only, old, pending;
    struct timespec zero = {0, 0};
    int rc;

    if (ep->password == NULL && ep->db <= 0)
        return 0;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    rc = handshake(ctx, ep, code);
    if (!sigismember(&old, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE))
        sigtimedwait(&pipe_only, NULL, &zero);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

redisContext *dlock__rconn_dial(const dlock__rendpoint *ep, int *code)
{
    struct timeval tv = {.tv_sec = ep->connect_timeout_ms / 1000,
                         .tv_usec = (ep->connect_timeout_ms % 1000) * 1000};
    struct timeval cmd_tv = {.tv_sec = ep->command_timeout_ms / 1000,
                             .tv_usec = (ep->command_timeout_ms % 1000) * 1000};
    redisContext *ctx;

    if (ep->host != NULL)
        ctx = redisConnectWithTimeout(ep->host, ep->port, tv);
    else
        ctx = redisConnectUnixWithTimeout(ep->unix_path, tv);
    if (ctx == NULL) {
        *code = DLOCK_ENOMEM;
        dlock__fail(*code, "%s: out of memory connecting", ep->label);
        return NULL;
    }
    if (ctx->err) {
        *code = DLOCK_EUNREACHABLE;
        dlock__fail(*code, "%s: connect: %s", ep->label, ctx->errstr);
        redisFree(ctx);
        return NULL;
    }
    if (redisSetTimeout(ctx, cmd_tv) != REDIS_OK || handshake_guarded(ctx, ep, code) != 0) {
        if (ctx->err) {
            *code = DLOCK_EUNREACHABLE;
            dlock__fail(*code, "%s: %s", ep->label, ctx->errstr);
        }
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

/* Called with mu held and no role taken by anyone: opens the socket. */
static int connect_locked(dlock__rconn *c)
{
    int code = DLOCK_OK, fd;
    redisContext *ctx;

    c->connecting = 1;
    pthread_mutex_unlock(&c->mu);
    ctx = dlock__rconn_dial(&c->ep, &code);
    fd = -1;
    if (ctx != NULL)
        fd = redisFreeKeepFd(ctx); /* blocking, with send/receive timeouts */
    pthread_mutex_lock(&c->mu);
    c->connecting = 0;
    if (fd >= 0) {
        c->fd = fd;
        c->broken = 0;
        c->last_read_us = dlock__now_us();
        /* A fresh parser: the old one may hold half a reply. */
        redisReaderFree(c->reader);
        c->reader = redisReaderCreate();
        if (c->reader == NULL) {
            close(fd);
            c->fd = -1;
            code = DLOCK_ENOMEM;
        }
    }
    pthread_cond_broadcast(&c->state_cv);
    return code;
}

/* ---------------------------------------------------------------- failure */

static void wake(request *r)
{
    if (r->cv != NULL)
        pthread_cond_signal(r->cv);
}

static void release_request(dlock__rconn *c, request *r)
{
    freeReplyObject(r->reply);
    r->reply = NULL;
    r->next = c->free_reqs;
    c->free_reqs = r;
}

/* With mu held: the stream is unusable. Fails every request due. */
static void fail_locked(dlock__rconn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_locked(dlock__rconn *c, int code, const char *fmt, ...)
{
    va_list ap;

    if (c->broken)
        return;
    c->broken = 1;
    c->fail_code = code;
    va_start(ap, fmt);
    vsnprintf(c->fail_msg, sizeof c->fail_msg, fmt, ap);
    va_end(ap);
    if (c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
    while (c->head != NULL) {
        request *r = c->head;
        c->head = r->next;
        if (r->abandoned) {
            release_request(c, r);
        } else {
            r->state = REQ_FAILED;
            wake(r);
        }
    }
    c->tail = NULL;
    c->out_len = 0;
}

/* With mu held, after giving up a role: closes a broken socket once nobody
 * can be using it. */
static void settle_locked(dlock__rconn *c)
{
    if (c->broken && !c->reading && !c->writing && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
        pthread_cond_broadcast(&c->state_cv);
    }
}

/* With mu held: waits until the connection can take commands. */
/* With mu held, on an idle stream: has the server hung up since we last
 * heard from it (a restart, an idle timeout)? Then start afresh rather than
 * send a request whose fate would be unknown. Checked only after a quiet
 * spell, so a busy stream pays nothing. */
#define IDLE_CHECK_US 50000
static void drop_if_hung_up_locked(dlock__rconn *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};

    if (c->head != NULL || c->reading || c->writing ||
        dlock__now_us() - c->last_read_us < IDLE_CHECK_US)
        return;
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        /* Nothing is due, so anything readable is a hang-up or junk. */
        close(c->fd);
        c->fd = -1;
    }
}

static int ready_locked(dlock__rconn *c, int64_t deadline_us)
{
    if (c->fd >= 0 && !c->broken)
        drop_if_hung_up_locked(c);
    for (;;) {
        if (c->fd >= 0 && !c->broken)
            return DLOCK_OK;
        if (!c->connecting && !c->reading && !c->writing) {
            if (c->fd >= 0) {
                close(c->fd);
                c->fd = -1;
            }
            return connect_locked(c);
        }
        struct timespec ts = dlock__timespec(deadline_us);
        if (pthread_cond_timedwait(&c->state_cv, &c->mu, &ts) == ETIMEDOUT)
            return dlock__fail(DLOCK_ETIMEDOUT, "%s: timed out waiting for the connection",
                               c->label);
    }
}

/* ---------------------------------------------------------------- roles */

static int wait_fd(int fd, short events, int64_t deadline_us)
{
    for (;;) {
        int64_t left = deadline_us - dlock__now_us();
        struct pollfd p = {.fd = fd, .events = events};
        int rc;

        if (left <= 0)
            return 0;
        rc = poll(&p, 1, (int) ((left + 999) / 1000));
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/* Writer role, entered and left with mu held. */
static void write_pending(dlock__rconn *c)
{
    char *buf = NULL;
    size_t cap = 0;

    c->writing = 1;
    while (c->out_len > 0 && !c->broken) {
        /* Take the bytes so others can keep appending while we write. */
        size_t len = c->out_len, done = 0;
        char *spare = buf;
        size_t spare_cap = cap;
        buf = c->out;
        cap = c->out_cap;
        c->out = spare;
        c->out_cap = spare_cap;
        c->out_len = 0;
        int fd = c->fd;
        pthread_mutex_unlock(&c->mu);
        const char *err = NULL;
        while (done < len) {
            /* send(): a write to a socket shut down by fail_locked() must not
             * raise SIGPIPE in the host program. */
            ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL);
            if (n > 0) {
                done += (size_t) n;
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                err = "write timed out"; /* SO_SNDTIMEO: the server reads nothing */
                break;
            } else {
                err = strerror(errno);
                break;
            }
        }
        pthread_mutex_lock(&c->mu);
        if (err != NULL)
            fail_locked(c, DLOCK_EUNREACHABLE, "%s: write: %s", c->label, err);
    }
    /* Keep the larger buffer for the next round. */
    if (buf != NULL) {
        if (c->out == NULL || c->out_cap < cap) {
            free(c->out);
            c->out = buf;
            c->out_cap = cap;
        } else {
            free(buf);
        }
    }
    c->writing = 0;
}

/* Hands the replies parsed so far to their requests. mu held. */
static void dispatch_locked(dlock__rconn *c, redisReply **replies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        request *r = c->head;
        if (r == NULL) {
            /* A reply nobody asked for: the stream is out of step. */
            freeReplyObject(replies[i]);
            fail_locked(c, DLOCK_EPROTO, "%s: unsolicited reply from server", c->label);
            continue;
        }
        c->head = r->next;
        if (c->head == NULL)
            c->tail = NULL;
        if (r->abandoned) {
            freeReplyObject(replies[i]);
            release_request(c, r);
            continue;
        }
        r->reply = replies[i];
        r->state = REQ_DONE;
        wake(r);
    }
}

/* Reader role, entered and left with mu held: one read, then dispatch.
 * Returns 0 on progress or failure handled, 1 when the deadline passed. */
static int read_some(dlock__rconn *c, int64_t deadline_us)
{
    char buf[16384];
    redisReply *replies[64];
    size_t n = 0;
    int fd = c->fd, timed_out = 0;
    const char *err = NULL;
    int err_code = DLOCK_EUNREACHABLE;

    c->reading = 1;
    pthread_mutex_unlock(&c->mu);
    /* The socket blocks, with the command timeout as its receive timeout:
     * a read that may wait that long needs no poll() first (one system
     * call per reply, as a bare hiredis loop). A shorter deadline (the
     * renewer racing a lease) polls first. */
    int64_t left = deadline_us - dlock__now_us();
    int must_poll = left < c->ep.command_timeout_ms * 900;
    for (;;) {
        if (must_poll) {
            int w = wait_fd(fd, POLLIN, deadline_us);
            if (w == 0) {
                timed_out = 1;
                break;
            }
            if (w < 0) {
                err = strerror(errno);
                break;
            }
        }
        ssize_t got = read(fd, buf, sizeof buf);
        if (got > 0) {
            if (redisReaderFeed(c->reader, buf, (size_t) got) != REDIS_OK)
                err = "out of memory";
            break;
        }
        if (got == 0) {
            err = "server closed the connection";
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            timed_out = 1; /* SO_RCVTIMEO */
            break;
        }
        err = strerror(errno);
        break;
    }
    pthread_mutex_lock(&c->mu);
    if (err == NULL && !timed_out) {
        c->last_read_us = dlock__now_us();
        for (;;) {
            void *reply = NULL;
            if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
                err_code = DLOCK_EPROTO;
                err = c->reader->errstr[0] != '\0' ? c->reader->errstr : "malformed reply";
                break;
            }
            if (reply == NULL)
                break;
            replies[n++] = reply;
            if (n == sizeof replies / sizeof replies[0]) {
                dispatch_locked(c, replies, n);
                n = 0;
            }
        }
        dispatch_locked(c, replies, n);
    }
    if (err != NULL) {
        if (err_code == DLOCK_EPROTO)
            fail_locked(c, DLOCK_EPROTO, "%s: server sent an invalid reply (%s)", c->label, err);
        else
            fail_locked(c, DLOCK_EUNREACHABLE, "%s: read: %s", c->label, err);
    }
    c->reading = 0;
    return timed_out;
}

/* With mu held, after leaving the reader role: if replies are still due,
 * wake the owner of the oldest live request to take the role. */
static void pass_reading_locked(dlock__rconn *c)
{
    for (request *r = c->head; r != NULL; r = r->next) {
        if (!r->abandoned && r->state == REQ_PENDING) {
            wake(r);
            return;
        }
    }
}

/* ---------------------------------------------------------------- calls */

static int reserve_locked(dlock__rconn *c, size_t more)
{
    if (c->out_len + more > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 1024;
        while (cap < c->out_len + more)
            cap *= 2;
        char *grown = realloc(c->out, cap);
        if (grown == NULL)
            return -1;
        c->out = grown;
        c->out_cap = cap;
    }
    return 0;
}

/* "<prefix><n>\r\n" at p; returns the end. */
static char *put_header(char *p, char prefix, size_t n)
{
    char digits[24];
    int k = 0;
    *p++ = prefix;
    do
        digits[k++] = (char) ('0' + n % 10);
    while ((n /= 10) != 0);
    while (k > 0)
        *p++ = digits[--k];
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* Encodes one command in RESP straight into the pending bytes. Not
 * hiredis's redisFormatCommandArgv: in 0.14 it runs sprintf for every
 * argument and mallocs the result, which was half of a lock cycle's client
 * instructions; this writes each byte once, with no allocation. Parsing
 * replies stays with hiredis's reader. */
static int append_locked(dlock__rconn *c, const dlock__rcmd *cmd)
{
    size_t need = 16;
    for (size_t i = 0; i < cmd->argc; i++)
        need += cmd->lens[i] + 24;
    if (reserve_locked(c, need) != 0)
        return -1;
    char *p = put_header(c->out + c->out_len, '*', cmd->argc);
    for (size_t i = 0; i < cmd->argc; i++) {
        p = put_header(p, '$', cmd->lens[i]);
        memcpy(p, cmd->argv[i], cmd->lens[i]);
        p += cmd->lens[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    c->out_len = (size_t) (p - c->out);
    return 0;
}

static request *new_request_locked(dlock__rconn *c)
{
    request *r = c->free_reqs;
    if (r != NULL)
        c->free_reqs = r->next;
    else
        r = malloc(sizeof *r);
    if (r != NULL)
        memset(r, 0, sizeof *r);
    return r;
}

static int all_settled(request **reqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (reqs[i]->state == REQ_PENDING)
            return 0;
    }
    return 1;
}

int dlock__rconn_call(dlock__rconn *c, size_t n, const dlock__rcmd *cmds, int64_t deadline_us,
                      redisReply **replies)
{
    request *stack_reqs[16], **reqs = stack_reqs;
    pthread_cond_t *cv = my_cv();
    int64_t now = dlock__now_us();
    int rc = DLOCK_OK;
    size_t queued = 0;

    if (deadline_us > now + c->ep.command_timeout_ms * 1000)
        deadline_us = now + c->ep.command_timeout_ms * 1000;
    if (n > sizeof stack_reqs / sizeof stack_reqs[0]) {
        reqs = malloc(n * sizeof *reqs);
        if (reqs == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }

    pthread_mutex_lock(&c->mu);
    rc = ready_locked(c, deadline_us);
    if (rc != DLOCK_OK)
        goto out;
    for (queued = 0; queued < n; queued++) {
        request *r = new_request_locked(c);
        if (r == NULL || append_locked(c, &cmds[queued]) != 0) {
            if (r != NULL)
                release_request(c, r);
            /* The commands appended so far must still be answered in
             * order: abandon them rather than unqueue them. */
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
            for (size_t i = 0; i < queued; i++)
                reqs[i]->abandoned = 1;
            queued = 0;
            goto flush;
        }
        r->cv = cv;
        if (c->tail != NULL)
            c->tail->next = r;
        else
            c->head = r;
        c->tail = r;
        reqs[queued] = r;
    }

flush:
    if (!c->writing && !c->broken)
        write_pending(c);
    settle_locked(c);
    if (queued == 0)
        goto out;

    while (!all_settled(reqs, n)) {
        if (!c->reading && !c->broken && c->fd >= 0) {
            int timed_out = read_some(c, deadline_us);
            settle_locked(c);
            if (timed_out && !all_settled(reqs, n))
                break;
            continue;
        }
        struct timespec ts = dlock__timespec(deadline_us);
        if (pthread_cond_timedwait(cv, &c->mu, &ts) == ETIMEDOUT && !all_settled(reqs, n))
            break;
    }

    if (!all_settled(reqs, n)) {
        /* Deadline: leave the requests to the reader. If the server has
         * sent nothing for a whole command timeout, assume the stream is
         * dead (peer gone without a reset) and start afresh next time. */
        for (size_t i = 0; i < n; i++) {
            if (reqs[i]->state == REQ_PENDING) {
                reqs[i]->abandoned = 1;
                reqs[i]->cv = NULL;
            } else {
                release_request(c, reqs[i]);
            }
        }
        rc = dlock__fail(DLOCK_ETIMEDOUT, "%s: no reply within the command timeout", c->label);
        if (dlock__now_us() - c->last_read_us >= c->ep.command_timeout_ms * 1000)
            fail_locked(c, DLOCK_ETIMEDOUT, "%s: server stopped answering", c->label);
        settle_locked(c);
        if (!c->reading)
            pass_reading_locked(c);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (reqs[i]->state == REQ_FAILED && rc == DLOCK_OK)
            rc = dlock__fail(c->fail_code, "%s", c->fail_msg);
    }
    for (size_t i = 0; i < n; i++) {
        if (rc == DLOCK_OK) {
            replies[i] = reqs[i]->reply;
            reqs[i]->reply = NULL;
        }
        release_request(c, reqs[i]);
    }
    if (!c->reading)
        pass_reading_locked(c);

out:
    pthread_mutex_unlock(&c->mu);
    if (reqs != stack_reqs)
        free(reqs);
    return rc;
}
