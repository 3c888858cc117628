/* SPDX-License-Identifier: MIT */
/* transport.h - the byte stream under every Redis connection: a plain
 * socket, or TLS (OpenSSL) over one (rediss://).
 *
 * hiredis 0.14 (Debian 12) has no TLS and does its own read(2)/write(2) in
 * its blocking calls, so no connection of ours uses those: a link is
 * connected here, and every byte of it goes through dlock__rlink_read and
 * dlock__rlink_write; the few blocking exchanges (the AUTH/SELECT handshake,
 * SUBSCRIBE, XREAD, the sentinels' questions) are dlock__rlink_command.
 * hiredis stays the protocol codec.
 *
 * What one SSL object does not allow, and a socket did:
 *   - one thread reading while another writes: every SSL call on a link is
 *     made under the link's own mutex, and never blocks under it (the
 *     socket of a TLS link is non-blocking; a call that wants the network
 *     lets go of the mutex and polls);
 *   - poll() before a read: bytes may already wait, decrypted, inside the
 *     SSL object; a readable socket may carry no application data at all (a
 *     TLS 1.3 session ticket after the handshake). dlock__rlink_read does
 *     its own waiting, and dlock__rlink_hung_up tells a hang-up from a
 *     record that is not data;
 *   - SO_RCVTIMEO / SO_SNDTIMEO: a TLS link keeps the timeouts itself.
 * A plain link is what the connection layer had before: a blocking socket
 * with the kernel's timeouts, read and written with one system call each. */
#ifndef DLOCK_REDIS_TRANSPORT_H
#define DLOCK_REDIS_TRANSPORT_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

/* TLS settings, named as redis-cli names its flags. */
typedef struct dlock__rtls_opts {
    const char *cacert; /* PEM file of the CAs to trust; NULL: the system's */
    const char *cert;   /* client certificate (PEM), for a server that asks for one */
    const char *key;    /* its private key (PEM); NULL: in cert's file */
    const char *sni;    /* the name sent (SNI) and verified; NULL: the host connected to */
    int insecure;       /* verify nothing (logged as a warning by the caller) */
} dlock__rtls_opts;

/* An OpenSSL context made once per client and shared, read-only, by every
 * link made with it. */
typedef struct dlock__rtls dlock__rtls;

/* Loads the files; a file that cannot be read is DLOCK_EINVAL, with the
 * option and OpenSSL's reason in the message. */
int dlock__rtls_new(const dlock__rtls_opts *opts, dlock__rtls **out);
void dlock__rtls_free(dlock__rtls *t);
/* The TLS options of a URL (cacert, cert, key, sni, insecure): with tls,
 * *out made from them (none given: the system's CAs, verification on);
 * without, *out is NULL and any of them is DLOCK_EINVAL saying which
 * schemes take it (schemes: "rediss://, ..."). */
struct dlock__url;
int dlock__rtls_from_url(struct dlock__url *url, int tls, const char *schemes, dlock__rtls **out);
/* 1 the first time it is asked of a context with verification off
 * (insecure=1), so that the warning is logged once, at the first
 * connection: the client's log may be set only after it opened. */
int dlock__rtls_insecure_once(dlock__rtls *t);

enum { DLOCK__RLINK_EIO = 1, DLOCK__RLINK_ETIMEDOUT, DLOCK__RLINK_EPROTO };

typedef struct dlock__rlink {
    int fd;
    struct ssl_st *ssl; /* NULL: plain */
    pthread_mutex_t ssl_mu;
    int64_t timeout_ms;  /* a TLS link's receive and send timeout */
    redisReader *reader; /* for dlock__rlink_command, and whoever reads replies after */
    int err;             /* the last dlock__rlink_command's failure (DLOCK__RLINK_E...) */
    unsigned exchanges;  /* commands sent by dlock__rlink_command */
    int no_cert;         /* TLS, with no client certificate offered */
    int poll_first;      /* TLS: the last read had to wait (the reader's own) */
    char errstr[200];
    unsigned char first[16]; /* the first bytes the server sent: what answered, when it is
                                not Redis (the reader drops them on a protocol error) */
    size_t nfirst;
} dlock__rlink;

/* Connects to host:port (or the unix socket path when host is NULL) within
 * deadline_us, and with tls non-NULL makes the TLS handshake there (SNI and
 * verification as tls says). The socket is close-on-exec. On failure returns
 * NULL, with *code set and the detail recorded (dlock_errmsg), starting
 * with label, and *accepted 0 when no connection was made at all (refused,
 * no such host, the connect timeout), 1 when one was (a TLS handshake that
 * failed or got no reply). */
dlock__rlink *dlock__rlink_open(const char *host, int port, const char *unix_path,
                                const dlock__rtls *tls, int64_t deadline_us, const char *label,
                                int *code, int *accepted);
/* Closes it (a TLS link says close_notify first, without waiting). */
void dlock__rlink_close(dlock__rlink *l);
/* Wakes any thread blocked on it (a read sees the end); no SSL call, so
 * safe while other threads use the link. */
void dlock__rlink_shutdown(dlock__rlink *l);
/* The receive and send timeout of reads and writes given no deadline. */
int dlock__rlink_set_timeout(dlock__rlink *l, int64_t ms);

ssize_t dlock__rlink_read_slow(dlock__rlink *l, void *buf, size_t len, int64_t deadline_us);
ssize_t dlock__rlink_write_slow(dlock__rlink *l, const void *buf, size_t len);

/* read(2)'s contract: > 0 bytes, 0 at the end of the stream, -1 with errno
 * (EAGAIN: nothing by deadline_us, or within the receive timeout when
 * deadline_us is 0). Safe beside a writer on another thread. */
static inline ssize_t dlock__rlink_read(dlock__rlink *l, void *buf, size_t len, int64_t deadline_us)
{
    if (l->ssl == NULL && deadline_us == 0)
        return read(l->fd, buf, len);
    return dlock__rlink_read_slow(l, buf, len, deadline_us);
}

/* send(2)'s contract (some bytes, or -1 with errno; EAGAIN: the send
 * timeout), never raising SIGPIPE. Safe beside a reader on another thread. */
static inline ssize_t dlock__rlink_write(dlock__rlink *l, const void *buf, size_t len)
{
    if (l->ssl == NULL)
        return send(l->fd, buf, len, MSG_NOSIGNAL);
    return dlock__rlink_write_slow(l, buf, len);
}

/* On a link with no reply due: whether the server hung up (or sent junk).
 * Anything readable on a plain socket is; on TLS, a record that is no data
 * (a session ticket) is not. Not beside another user of the link. */
int dlock__rlink_hung_up(dlock__rlink *l);

/* Whether bytes wait that a poll() of the socket would not show. */
int dlock__rlink_pending(dlock__rlink *l);

/* Sends one command and reads its reply, by deadline_us. NULL on failure,
 * with l->err and l->errstr set (the link is unusable then). */
redisReply *dlock__rlink_command(dlock__rlink *l, int64_t deadline_us, int argc, const char **argv,
                                 const size_t *lens);
/* Sends len bytes of commands already in the protocol's form, pipelined
 * in one write, and reads the reply of the first command due, by
 * deadline_us; with len 0 sends nothing and reads the next reply due (of
 * a command sent before). NULL on failure, as dlock__rlink_command. */
redisReply *dlock__rlink_exchange(dlock__rlink *l, int64_t deadline_us, const char *cmds,
                                  size_t len);
/* The same with hiredis's format ("SUBSCRIBE %s"). */
redisReply *dlock__rlink_commandf(dlock__rlink *l, int64_t deadline_us, const char *fmt, ...);

#endif
