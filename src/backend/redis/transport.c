/* SPDX-License-Identifier: MIT */
/* transport.c - a socket, or TLS over one, under a Redis connection (see
 * transport.h for what TLS changes and how each change is met). */
#include "transport.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dlock__rtls {
    SSL_CTX *ctx;
    char *sni;
    int insecure;
    int has_cert;    /* a client certificate is offered */
    atomic_int told; /* insecure: the warning was logged (dlock__rtls_insecure_once) */
};

int dlock__rtls_insecure_once(dlock__rtls *t)
{
    return t != NULL && t->insecure && atomic_exchange(&t->told, 1) == 0;
}

/* ---------------------------------------------------------------- the socket BIO */

/* OpenSSL's own socket BIO writes with write(2): a peer gone would raise
 * SIGPIPE in the host program. This one sends with MSG_NOSIGNAL. */
static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int bio_write(BIO *b, const char *buf, int len)
{
    ssize_t n = send(BIO_get_fd(b, NULL), buf, (size_t) len, MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(b);
    return (int) n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    ssize_t n = recv(BIO_get_fd(b, NULL), buf, (size_t) len, 0);
    BIO_clear_retry_flags(b);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_read(b);
    return (int) n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    switch (cmd) {
    case BIO_C_SET_FD:
        BIO_set_data(b, (void *) (intptr_t) * (int *) ptr);
        BIO_set_init(b, 1);
        (void) num;
        return 1;
    case BIO_C_GET_FD:
        if (ptr != NULL)
            *(int *) ptr = (int) (intptr_t) BIO_get_data(b);
        return (int) (intptr_t) BIO_get_data(b);
    case BIO_CTRL_FLUSH:
        return 1;
    default:
        return 0;
    }
}

static void make_bio_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dlock socket");
    if (m != NULL && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
        BIO_meth_set_ctrl(m, bio_ctrl))
        bio_method = m;
}

/* ---------------------------------------------------------------- settings */

/* OpenSSL's reason for the last failure on this thread (and the queue cleared). */
static const char *ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    if (e == 0)
        snprintf(buf, len, "%s", errno != 0 ? strerror(errno) : "unknown error");
    else
        ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

int dlock__rtls_new(const dlock__rtls_opts *opts, dlock__rtls **out)
{
    char why[256];
    int rc = DLOCK_OK;
    dlock__rtls *t = calloc(1, sizeof *t);

    *out = NULL;
    if (t == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_once(&bio_once, make_bio_method);
    t->insecure = opts->insecure;
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (bio_method == NULL || t->ctx == NULL ||
        (opts->sni != NULL && (t->sni = strdup(opts->sni)) == NULL)) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory setting up TLS");
        goto fail;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    /* a write may stop part way and go on from another buffer (conn.c
     * swaps its buffers between writes) */
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* one recv for whatever has arrived, not one for a record's header and
     * one for its body (what is read ahead is what SSL_has_pending sees) */
    SSL_CTX_set_read_ahead(t->ctx, 1);
    if (opts->insecure) {
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
        if (opts->cacert != NULL && access(opts->cacert, R_OK) != 0) {
            rc = dlock__fail(DLOCK_EINVAL, "option cacert=%s: cannot read it: %s", opts->cacert,
                             strerror(errno));
            goto fail;
        }
        int loaded = opts->cacert != NULL
                         ? SSL_CTX_load_verify_locations(t->ctx, opts->cacert, NULL)
                         : SSL_CTX_set_default_verify_paths(t->ctx);
        if (loaded != 1) {
            rc = dlock__fail(DLOCK_EINVAL, "option cacert=%s: cannot load it: %s",
                             opts->cacert != NULL ? opts->cacert : "(the system's)",
                             ssl_reason(why, sizeof why));
            goto fail;
        }
    }
    if (opts->key != NULL && opts->cert == NULL) {
        rc = dlock__fail(DLOCK_EINVAL, "option key= needs cert= (the certificate it goes with)");
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        const char *file = i == 0 ? opts->cert : opts->key;
        if (file != NULL && access(file, R_OK) != 0) {
            rc = dlock__fail(DLOCK_EINVAL, "option %s=%s: cannot read it: %s",
                             i == 0 ? "cert" : "key", file, strerror(errno));
            goto fail;
        }
    }
    if (opts->cert != NULL) {
        const char *key = opts->key != NULL ? opts->key : opts->cert;
        if (SSL_CTX_use_certificate_chain_file(t->ctx, opts->cert) != 1) {
            rc = dlock__fail(DLOCK_EINVAL, "option cert=%s: cannot load it: %s", opts->cert,
                             ssl_reason(why, sizeof why));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(t->ctx) != 1) {
            rc = dlock__fail(DLOCK_EINVAL,
                             opts->key != NULL ? "option key=%s: cannot load it for cert=%s: %s"
                                               : "option cert=%s: no key= given, and no private "
                                                 "key in that file%.0s: %s",
                             key, opts->cert, ssl_reason(why, sizeof why));
            goto fail;
        }
    }
    t->has_cert = opts->cert != NULL;
    *out = t;
    return DLOCK_OK;
fail:
    dlock__rtls_free(t);
    return rc;
}

void dlock__rtls_free(dlock__rtls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    free(t->sni);
    free(t);
}

/* ---------------------------------------------------------------- waiting */

/* 1 when fd is ready for events, 0 at the deadline, -1 on error. */
static int wait_fd(int fd, short events, int64_t deadline_us)
{
    for (;;) {
        int64_t left = deadline_us - dlock__now_us();
        struct pollfd p = {.fd = fd, .events = events};

        if (left <= 0)
            return 0;
        int rc = poll(&p, 1, (int) ((left + 999) / 1000));
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/* ---------------------------------------------------------------- opening */

static int is_ip(const char *host)
{
    unsigned char addr[16];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

static int start_tls(dlock__rlink *l, const dlock__rtls *tls, const char *host, int64_t deadline_us,
                     const char *label, int *code)
{
    char why[256];
    const char *name = tls->sni != NULL ? tls->sni : host;
    int64_t began_us = dlock__now_us();

    l->ssl = SSL_new(tls->ctx);
    BIO *bio = l->ssl != NULL ? BIO_new(bio_method) : NULL;
    if (bio == NULL) {
        *code = dlock__fail(DLOCK_ENOMEM, "%s: out of memory starting TLS", label);
        return -1;
    }
    BIO_set_fd(bio, l->fd, BIO_NOCLOSE);
    SSL_set_bio(l->ssl, bio, bio);
    /* SNI is a host name, never an address (RFC 6066) */
    if (name != NULL && !is_ip(name))
        SSL_set_tlsext_host_name(l->ssl, name);
    if (!tls->insecure && name != NULL) {
        int ok = is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(l->ssl), name)
                             : SSL_set1_host(l->ssl, name);
        if (ok != 1) {
            *code = dlock__fail(DLOCK_EINVAL, "%s: TLS: cannot verify the name '%s'", label, name);
            return -1;
        }
    }
    if (fcntl(l->fd, F_SETFL, fcntl(l->fd, F_GETFL) | O_NONBLOCK) != 0) {
        *code = dlock__fail(DLOCK_EUNREACHABLE, "%s: %s", label, strerror(errno));
        return -1;
    }
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int rc = SSL_connect(l->ssl);
        if (rc == 1)
            return 0;
        int e = SSL_get_error(l->ssl, rc);
        int w = e == SSL_ERROR_WANT_READ    ? wait_fd(l->fd, POLLIN, deadline_us)
                : e == SSL_ERROR_WANT_WRITE ? wait_fd(l->fd, POLLOUT, deadline_us)
                                            : -2;
        if (w == 1)
            continue;
        long verified = SSL_get_verify_result(l->ssl);
        if (w == 0) {
            /* silence: a plain Redis port says nothing to a ClientHello
             * (it waits for a line), and neither does a stopped or hung
             * server: both are named */
            *code = dlock__fail(DLOCK_EUNREACHABLE,
                                "%s: TLS: connected, but no reply to the TLS handshake in %lld ms "
                                "(a port that does not take TLS says nothing to it; so does a "
                                "server that is stopped, hung or overloaded)",
                                label, (long long) ((dlock__now_us() - began_us) / 1000));
        } else if (verified != X509_V_OK) {
            /* no wait helps: the client is set up wrong for this server */
            *code = dlock__fail(DLOCK_ESERVER,
                                "%s: TLS: the server's certificate is not trusted: %s (give its "
                                "CA with option cacert=FILE, its name with sni=NAME, or turn "
                                "verification off with insecure=1)",
                                label, X509_verify_cert_error_string(verified));
        } else {
            *code = dlock__fail(DLOCK_EUNREACHABLE, "%s: TLS handshake failed: %s%s", label,
                                e == SSL_ERROR_SYSCALL && errno == 0 ? "the server closed it"
                                                                     : ssl_reason(why, sizeof why),
                                e == SSL_ERROR_SYSCALL ? " (is it a TLS port?)" : "");
        }
        ERR_clear_error();
        return -1;
    }
}

dlock__rlink *dlock__rlink_open(const char *host, int port, const char *unix_path,
                                const dlock__rtls *tls, int64_t deadline_us, const char *label,
                                int *code, int *accepted)
{
    int64_t left_ms = (deadline_us - dlock__now_us()) / 1000;
    struct timeval tv = {.tv_sec = left_ms / 1000, .tv_usec = (left_ms % 1000) * 1000};
    redisContext *ctx;
    dlock__rlink *l = calloc(1, sizeof *l);

    if (left_ms < 1)
        tv = (struct timeval){0, 1000};
    if (l == NULL || (l->reader = redisReaderCreate()) == NULL) {
        free(l);
        *code = dlock__fail(DLOCK_ENOMEM, "%s: out of memory connecting", label);
        return NULL;
    }
    l->fd = -1;
    *accepted = 0;
    pthread_mutex_init(&l->ssl_mu, NULL);
    /* hiredis connects (names, addresses, the timeout, TCP_NODELAY); its
     * context is dropped at once, keeping the socket */
    if (host != NULL)
        ctx = redisConnectWithTimeout(host, port, tv);
    else
        ctx = redisConnectUnixWithTimeout(unix_path, tv);
    if (ctx == NULL) {
        *code = dlock__fail(DLOCK_ENOMEM, "%s: out of memory connecting", label);
        goto fail;
    }
    if (ctx->err) {
        *code = dlock__fail(DLOCK_EUNREACHABLE, "%s: connect: %s", label, ctx->errstr);
        redisFree(ctx);
        goto fail;
    }
    l->fd = redisFreeKeepFd(ctx);
    *accepted = 1;
    /* A command run under a lock (dlock run) must not inherit the socket. */
    fcntl(l->fd, F_SETFD, FD_CLOEXEC);
    if (tls != NULL && start_tls(l, tls, host, deadline_us, label, code) != 0)
        goto fail;
    l->no_cert = tls != NULL && !tls->has_cert;
    return l;
fail:
    dlock__rlink_close(l);
    return NULL;
}

void dlock__rlink_close(dlock__rlink *l)
{
    if (l == NULL)
        return;
    if (l->ssl != NULL) {
        ERR_clear_error();
        SSL_shutdown(l->ssl); /* non-blocking: one try */
        SSL_free(l->ssl);
        ERR_clear_error();
    }
    if (l->fd >= 0)
        close(l->fd);
    if (l->reader != NULL)
        redisReaderFree(l->reader);
    pthread_mutex_destroy(&l->ssl_mu);
    free(l);
}

void dlock__rlink_shutdown(dlock__rlink *l)
{
    shutdown(l->fd, SHUT_RDWR);
}

int dlock__rlink_set_timeout(dlock__rlink *l, int64_t ms)
{
    if (ms < 1)
        ms = 1;
    l->timeout_ms = ms;
    if (l->ssl != NULL)
        return 0;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- bytes */

/* One SSL call under the link's mutex: what SSL_get_error says of it, and
 * errno as the call left it. */
static int ssl_io(dlock__rlink *l, int writing, void *buf, size_t len, size_t *done, int *err_no)
{
    size_t n = 0;
    pthread_mutex_lock(&l->ssl_mu);
    ERR_clear_error();
    errno = 0;
    int rc = writing ? SSL_write_ex(l->ssl, buf, len, &n) : SSL_read_ex(l->ssl, buf, len, &n);
    int e = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(l->ssl, rc);
    *err_no = errno;
    if (e == SSL_ERROR_SSL || e == SSL_ERROR_SYSCALL)
        ERR_clear_error();
    pthread_mutex_unlock(&l->ssl_mu);
    *done = n;
    return e;
}

static ssize_t tls_io(dlock__rlink *l, int writing, void *buf, size_t len, int64_t deadline_us)
{
    if (deadline_us == 0)
        deadline_us = dlock__now_us() + l->timeout_ms * 1000;
    /* When the last read had to wait, this one likely will too (one
     * caller at a time): wait for the socket first, unless bytes wait
     * inside the SSL object; a poll and a read, not a read that finds
     * nothing, a poll and a read again. When replies were there at once
     * (pipelined, under load), read first. */
    int waited = 0;
    if (!writing && l->poll_first && !dlock__rlink_pending(l)) {
        waited = 1;
        int w = wait_fd(l->fd, POLLIN, deadline_us);
        if (w == 0)
            errno = EAGAIN;
        if (w <= 0)
            return -1;
    }
    for (;;) {
        size_t n;
        int err_no;
        int e = ssl_io(l, writing, buf, len, &n, &err_no);
        int w;
        switch (e) {
        case SSL_ERROR_NONE:
            if (!writing)
                l->poll_first = waited;
            return (ssize_t) n;
        case SSL_ERROR_ZERO_RETURN: /* close_notify */
            if (writing) {
                errno = EPIPE;
                return -1;
            }
            return 0;
        case SSL_ERROR_WANT_READ:
            waited = 1;
            w = wait_fd(l->fd, POLLIN, deadline_us);
            break;
        case SSL_ERROR_WANT_WRITE:
            w = wait_fd(l->fd, POLLOUT, deadline_us);
            break;
        case SSL_ERROR_SYSCALL:
            if (err_no == 0 && !writing)
                return 0; /* the peer closed without close_notify */
            errno = err_no != 0 ? err_no : EPIPE;
            return -1;
        default:
            errno = EPROTO;
            return -1;
        }
        if (w == 0) {
            errno = EAGAIN;
            return -1;
        }
        if (w < 0)
            return -1;
    }
}

ssize_t dlock__rlink_read_slow(dlock__rlink *l, void *buf, size_t len, int64_t deadline_us)
{
    if (l->ssl != NULL)
        return tls_io(l, 0, buf, len, deadline_us);
    int w = wait_fd(l->fd, POLLIN, deadline_us);
    if (w == 0)
        errno = EAGAIN;
    if (w <= 0)
        return -1;
    return read(l->fd, buf, len);
}

ssize_t dlock__rlink_write_slow(dlock__rlink *l, const void *buf, size_t len)
{
    return tls_io(l, 1, (void *) buf, len, 0);
}

int dlock__rlink_pending(dlock__rlink *l)
{
    if (l->ssl == NULL)
        return 0;
    pthread_mutex_lock(&l->ssl_mu);
    int pending = SSL_has_pending(l->ssl);
    pthread_mutex_unlock(&l->ssl_mu);
    return pending;
}

int dlock__rlink_hung_up(dlock__rlink *l)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    char byte;

    if (dlock__rlink_pending(l))
        return 1; /* data nobody asked for */
    if (poll(&p, 1, 0) != 1 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
        return 0;
    if (l->ssl == NULL)
        return 1; /* nothing is due, so anything readable is a hang-up or junk */
    /* a record that carries no data (a session ticket, a key update) is
     * consumed, and leaves the link as it was */
    size_t n;
    int err_no;
    return ssl_io(l, 0, &byte, 1, &n, &err_no) != SSL_ERROR_WANT_READ;
}

/* ---------------------------------------------------------------- commands */

static redisReply *command_fail(dlock__rlink *l, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static redisReply *command_fail(dlock__rlink *l, int err, const char *fmt, ...)
{
    va_list ap;
    l->err = err;
    va_start(ap, fmt);
    vsnprintf(l->errstr, sizeof l->errstr, fmt, ap);
    va_end(ap);
    return NULL;
}

/* A TLS 1.3 server that wants a client certificate says so only after the
 * handshake, in an alert that a reset often overtakes: the first command
 * fails. */
static const char *no_cert_hint(dlock__rlink *l)
{
    int first = l->exchanges == 0;
    return first && l->no_cert ? " (over TLS: if the server wants a client certificate, give "
                                 "it with options cert= and key=)"
                               : "";
}

static redisReply *exchange_once(dlock__rlink *l, int64_t deadline_us, const char *cmd, size_t len)
{
    char buf[16384];
    void *reply = NULL;

    for (size_t done = 0; done < len;) {
        ssize_t n = dlock__rlink_write(l, cmd + done, len - done);
        if (n > 0)
            done += (size_t) n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && errno == EAGAIN)
            return command_fail(l, DLOCK__RLINK_ETIMEDOUT, "write timed out");
        else
            return command_fail(l, DLOCK__RLINK_EIO, "%s%s", strerror(errno), no_cert_hint(l));
    }
    for (;;) {
        if (redisReaderGetReply(l->reader, &reply) != REDIS_OK)
            return command_fail(l, DLOCK__RLINK_EPROTO, "%s",
                                l->reader->errstr[0] ? l->reader->errstr : "malformed reply");
        if (reply != NULL)
            return reply;
        ssize_t got = dlock__rlink_read(l, buf, sizeof buf, deadline_us);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return command_fail(l, DLOCK__RLINK_ETIMEDOUT, "%s", strerror(EAGAIN));
        if (got < 0)
            return command_fail(l, DLOCK__RLINK_EIO, "%s%s", strerror(errno), no_cert_hint(l));
        if (got == 0)
            return command_fail(l, DLOCK__RLINK_EIO, "Server closed the connection%s",
                                no_cert_hint(l));
        if (l->nfirst < sizeof l->first) {
            size_t keep = sizeof l->first - l->nfirst < (size_t) got ? sizeof l->first - l->nfirst
                                                                     : (size_t) got;
            memcpy(l->first + l->nfirst, buf, keep);
            l->nfirst += keep;
        }
        if (l->reader->len - l->reader->pos + (size_t) got > (64u << 20) ||
            redisReaderFeed(l->reader, buf, (size_t) got) != REDIS_OK)
            return command_fail(l, DLOCK__RLINK_EPROTO, "a reply too large");
    }
}

static redisReply *exchange(dlock__rlink *l, int64_t deadline_us, const char *cmd, size_t len)
{
    redisReply *r = exchange_once(l, deadline_us, cmd, len);
    l->exchanges++;
    return r;
}

redisReply *dlock__rlink_exchange(dlock__rlink *l, int64_t deadline_us, const char *cmds,
                                  size_t len)
{
    return exchange(l, deadline_us, cmds, len);
}

redisReply *dlock__rlink_command(dlock__rlink *l, int64_t deadline_us, int argc, const char **argv,
                                 const size_t *lens)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0)
        return command_fail(l, DLOCK__RLINK_EIO, "out of memory");
    redisReply *r = exchange(l, deadline_us, cmd, (size_t) len);
    redisFreeCommand(cmd);
    return r;
}

redisReply *dlock__rlink_commandf(dlock__rlink *l, int64_t deadline_us, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0)
        return command_fail(l, DLOCK__RLINK_EIO, "out of memory");
    redisReply *r = exchange(l, deadline_us, cmd, (size_t) len);
    redisFreeCommand(cmd);
    return r;
}

/* An on/off option: absent (or 0/false/no) is off; given bare (?insecure)
 * or as 1/true/yes, on. */
static int flag_option(dlock__url *url, const char *key, int *on)
{
    const char *v = dlock__url_get(url, key);
    *on = 0;
    if (v == NULL || strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "no") == 0)
        return DLOCK_OK;
    if (*v == '\0' || strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0) {
        *on = 1;
        return DLOCK_OK;
    }
    return dlock__fail(DLOCK_EINVAL, "option %s=%s: want 1 or 0", key, v);
}

int dlock__rtls_from_url(dlock__url *url, int tls, const char *schemes, dlock__rtls **out)
{
    static const char *const keys[] = {"cacert", "cert", "key", "sni", "insecure"};
    dlock__rtls_opts opts = {0};

    *out = NULL;
    if (!tls) {
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            if (dlock__url_get(url, keys[i]) != NULL)
                return dlock__fail(DLOCK_EINVAL, "option %s= is for TLS: use %s", keys[i], schemes);
        }
        return DLOCK_OK;
    }
    opts.cacert = dlock__url_get(url, "cacert");
    opts.cert = dlock__url_get(url, "cert");
    opts.key = dlock__url_get(url, "key");
    opts.sni = dlock__url_get(url, "sni");
    int rc = flag_option(url, "insecure", &opts.insecure);
    return rc == DLOCK_OK ? dlock__rtls_new(&opts, out) : rc;
}
