/* SPDX-License-Identifier: MIT */
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
 * A caller appends its command and, if no replies are due, becomes the
 * writer (when nobody is); while replies are due its bytes wait, and the
 * reader sends everything that gathered as soon as the next replies arrive.
 * So under load the commands of many threads travel in one write and are
 * answered in one read, on both sides. The caller then waits for its
 * replies, becoming the reader whenever nobody is. A reader that has
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
#include "replies.h"

#include "../sockets.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/park.h"

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

#define DIAL_CUT_US 2000 /* a dial that failed this close to its deadline: cut short by it */

enum req_state { REQ_PENDING, REQ_DONE, REQ_FAILED };

/* A request's state is set under `mu` by the reader (or a failure) and read
 * by its owner without the lock: once it leaves PENDING, `reply` is set and
 * the request is the owner's again. */
typedef struct request {
    struct request *next;
    redisReply *reply;
    _Atomic int state;
    int abandoned;               /* under mu: the owner gave up, the reader frees it */
    struct shared_parker *owner; /* under mu: whom to wake; NULL once abandoned */
    int unsent;                  /* under mu: its bytes are still in `out`, at: */
    size_t out_off, out_len;
} request;

struct dlock__rconn {
    pthread_mutex_t mu;
    pthread_cond_t state_cv; /* connection state changes (connect, close) */

    dlock__rendpoint ep; /* strings owned */
    char *label;
    char what[48]; /* which connection, for the log ("command connection 2 of 2"); "" */

    dlock__rlink *link; /* NULL: not connected */
    unsigned connects;  /* made so far */
    unsigned moved;     /* *ep.moved when the connection was made */
    char dropped[300];  /* why the last connection went, logged at the next connect */
    int broken;
    int connecting;
    /* the dials ended so far, and the last one's failure (DLOCK_OK: it
     * made the connection), which a caller that waited for that dial
     * takes as its own (ready_locked) */
    unsigned dials;
    int dial_code;
    int64_t dial_deadline_us; /* the deadline the dial was given... */
    int dial_cut;             /* ...and whether it failed there (cut short by it, maybe) */
    char dial_msg[512];
    int reading, writing;
    redisReader *reader;
    int64_t last_read_us;

    char *out; /* bytes of commands not yet written */
    size_t out_len, out_cap;
    size_t unsent;         /* requests whose bytes are in `out` */
    request *first_unsent; /* the first of them in the FIFO; the rest follow it */
    size_t sent;           /* requests written whose replies are still due */

    request *head, *tail; /* replies due, oldest first */

    int fail_code; /* why the requests failed, for their owners */
    char fail_msg[256];
};

/* Each thread waits on its own parker, and keeps a few request records to
 * reuse: a thread is in one call at a time. A record abandoned at a
 * deadline belongs to the connection from then on (the reader frees it).
 *
 * The parker is shared: a reader may still be waking it just after its
 * owner saw its replies and left (even left the thread), so it is counted,
 * and freed by whichever lets go last. */
#define CACHED_REQUESTS 16
typedef struct shared_parker {
    dlock__parker parker;
    _Atomic int refs;
} shared_parker;

static _Thread_local struct {
    shared_parker *parker;
    request *cache[CACHED_REQUESTS];
} me;

static pthread_key_t thread_end_key;
static pthread_once_t thread_end_once = PTHREAD_ONCE_INIT;

static void drop_parker(shared_parker *p)
{
    if (atomic_fetch_sub(&p->refs, 1) == 1)
        free(p);
}

/* At thread exit: the cached records and the thread's hold on its parker. */
static void thread_end(void *arg)
{
    (void) arg;
    for (size_t i = 0; i < CACHED_REQUESTS; i++) {
        free(me.cache[i]);
        me.cache[i] = NULL;
    }
    if (me.parker != NULL)
        drop_parker(me.parker);
    me.parker = NULL;
}

static void make_thread_end_key(void)
{
    pthread_key_create(&thread_end_key, thread_end);
}

static shared_parker *my_parker(void)
{
    if (me.parker == NULL) {
        me.parker = calloc(1, sizeof *me.parker);
        if (me.parker == NULL)
            return NULL;
        atomic_init(&me.parker->refs, 1);
        pthread_once(&thread_end_once, make_thread_end_key);
        pthread_setspecific(thread_end_key, me.parker); /* non-NULL: the destructor runs */
    }
    return me.parker;
}

static request *take_request(size_t i)
{
    request *r = i < CACHED_REQUESTS ? me.cache[i] : NULL;
    if (r == NULL) {
        r = malloc(sizeof *r);
        if (r != NULL && i < CACHED_REQUESTS)
            me.cache[i] = r;
    }
    if (r != NULL) {
        r->next = NULL;
        r->reply = NULL;
        atomic_init(&r->state, REQ_PENDING);
        r->abandoned = 0;
        r->owner = me.parker;
        r->unsent = 0;
    }
    return r;
}

/* The owner is done with request i. */
static void return_request(request *r, size_t i)
{
    freeReplyObject(r->reply);
    r->reply = NULL;
    if (i >= CACHED_REQUESTS)
        free(r);
}

/* The owner gives request i up to the connection (mu held). */
static void abandon_request(request *r, size_t i)
{
    r->abandoned = 1;
    r->owner = NULL;
    if (i < CACHED_REQUESTS)
        me.cache[i] = NULL;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

int dlock__rconn_new(const dlock__rendpoint *ep, dlock__rconn **out)
{
    dlock__rconn *c = calloc(1, sizeof *c);

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
    c->reader = dlock__rreader_new();
    if ((ep->host != NULL && c->ep.host == NULL) ||
        (ep->unix_path != NULL && c->ep.unix_path == NULL) ||
        (ep->user != NULL && c->ep.user == NULL) ||
        (ep->password != NULL && c->ep.password == NULL) || c->label == NULL || c->reader == NULL) {
        dlock__rconn_free(c);
        return DLOCK_ENOMEM;
    }
    /* Critical sections here are a few hundred instructions; under load
     * many threads pass through: spin briefly before sleeping. */
    pthread_mutexattr_t mattr;
    pthread_mutexattr_init(&mattr);
    pthread_mutexattr_settype(&mattr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&c->mu, &mattr);
    pthread_mutexattr_destroy(&mattr);
    dlock__cond_init(&c->state_cv);
    *out = c;
    return DLOCK_OK;
}

void dlock__rconn_free(dlock__rconn *c)
{
    if (c == NULL)
        return;
    dlock__rlink_close(c->link);
    /* Only abandoned requests can be left: their owners are gone. */
    while (c->head != NULL) {
        request *r = c->head;
        c->head = r->next;
        freeReplyObject(r->reply);
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

void dlock__rconn_describe(dlock__rconn *c, const char *what)
{
    snprintf(c->what, sizeof c->what, "%s", what);
}

void *dlock__rconn_router(const dlock__rconn *c)
{
    return c->ep.router;
}

int dlock__rconn_moved(dlock__rconn *c)
{
    if (c->ep.moved == NULL)
        return 0;
    pthread_mutex_lock(&c->mu);
    /* only if this connection still counts as made to the current node:
     * many replies from one demoted node move the endpoint once */
    if (c->link != NULL && c->moved == atomic_load(c->ep.moved))
        atomic_fetch_add(c->ep.moved, 1);
    pthread_mutex_unlock(&c->mu);
    return 1;
}

int dlock__rreply_not_master(const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ERROR)
        return 0;
    /* a script's error keeps the code of the command that failed in it
     * (Redis 7: "READONLY ... script: ..."); older servers wrap it in
     * "ERR Error running script ...: -READONLY ..." */
    return strncmp(r->str, "READONLY", 8) == 0 || strncmp(r->str, "LOADING", 7) == 0 ||
           strncmp(r->str, "MASTERDOWN", 10) == 0 || strstr(r->str, "-READONLY") != NULL;
}

/* "redis+cluster://HOST:PORT,..." for ep (rediss+cluster:// over TLS):
 * the URL to use for the cluster ep is a node of. */
static void cluster_url(const dlock__rendpoint *ep, char *buf, size_t n)
{
    const char *scheme = ep->tls != NULL ? "rediss+cluster" : "redis+cluster";
    if (ep->host == NULL)
        snprintf(buf, n, "%s://host:port,...", scheme);
    else if (strchr(ep->host, ':') != NULL)
        snprintf(buf, n, "%s://[%s]:%d,...", scheme, ep->host, ep->port);
    else
        snprintf(buf, n, "%s://%s:%d,...", scheme, ep->host, ep->port);
}

static void where(const dlock__rendpoint *ep, char *buf, size_t n);

/* Refuses ep, a node of a Redis Cluster where the URL names one server or
 * independent masters (how: what told it, "cluster_enabled:1" or "acquire:
 * MOVED ..."): another kind of server than the URL asks for, as another
 * service at the port is (DLOCK_EUNREACHABLE, exit 69; it was
 * DLOCK_EINVAL), with the URL to use. */
static int in_cluster(const dlock__rendpoint *ep, const char *how, int how_len)
{
    char at[300], url[300];

    where(ep, at, sizeof at);
    if (ep->in_cluster != NULL)
        atomic_store(ep->in_cluster, 1);
    if (ep->independent > 0)
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "%s answered, but not as an independent Redis master (a node of a "
                           "Redis Cluster: %.*s): Redlock needs %zu independent masters (use "
                           "%s:// for a cluster)",
                           at, how_len, how, ep->independent,
                           ep->tls != NULL ? "rediss+cluster" : "redis+cluster");
    cluster_url(ep, url, sizeof url);
    return dlock__fail(DLOCK_EUNREACHABLE,
                       "%s answered, but not as a single Redis server (a node of a Redis "
                       "Cluster: %.*s): use %s (a cluster client, which follows each name to the "
                       "node of its slot)",
                       at, how_len, how, url);
}

int dlock__rconn_wrong_server(const dlock__rconn *c, const char *what, const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ERROR || c->ep.router != NULL || c->ep.moved != NULL)
        return DLOCK_OK;
    const char *e = r->str;
    int alone = c->ep.single || c->ep.independent > 0;
    if (alone && (strncmp(e, "MOVED ", 6) == 0 || strncmp(e, "ASK ", 4) == 0 ||
                  strncmp(e, "CLUSTERDOWN", 11) == 0 || strncmp(e, "CROSSSLOT", 9) == 0)) {
        char how[300];
        int len = snprintf(how, sizeof how, "%s: %.*s", what, DLOCK__REASON(r));
        return in_cluster(&c->ep, how, len < (int) sizeof how ? len : (int) sizeof how - 1);
    }
    if (strncmp(e, "READONLY", 8) == 0 || strncmp(e, "MASTERDOWN", 10) == 0 ||
        strstr(e, "-READONLY") != NULL) {
        if (c->ep.independent > 0)
            return dlock__fail(DLOCK_ESERVER,
                               "%s is a replica (read-only): Redlock needs %zu independent "
                               "masters: list masters only (%s: %.*s)",
                               c->label, c->ep.independent, what, DLOCK__REASON(r));
        /* (the server's sentence, without the script's digest and line
         * that a script's refusal adds: "... replica. script: 8b5e...") */
        return dlock__fail(DLOCK_ESERVER,
                           "%s: this server is a replica (read-only; %s: %.*s): point the URL at "
                           "the master, or use %s://host:port,.../MASTERNAME to follow the "
                           "master",
                           c->label, what, DLOCK__REASON(r),
                           c->ep.tls != NULL ? "rediss+sentinel" : "redis+sentinel");
    }
    return DLOCK_OK;
}

size_t dlock__rconn_held_back(dlock__rconn *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->unsent;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* ---------------------------------------------------------------- parsing */

static redisReplyObjectFunctions bounded_functions;
static void *(*default_create_array)(const redisReadTask *, int);
static pthread_once_t bounded_once = PTHREAD_ONCE_INIT;
static _Thread_local int refused_elements;

static void *create_array_bounded(const redisReadTask *task, int elements)
{
    if (elements < 0 || elements > DLOCK__REPLY_MAX_ELEMENTS) {
        refused_elements = elements;
        return NULL; /* the parser fails ("out of memory"): dlock__rreader_refused says why */
    }
    return default_create_array(task, elements);
}

static void make_bounded_functions(void)
{
    redisReader *r = redisReaderCreate();
    if (r == NULL)
        return;
    bounded_functions = *r->fn;
    default_create_array = bounded_functions.createArray;
    bounded_functions.createArray = create_array_bounded;
    redisReaderFree(r);
}

redisReader *dlock__rreader_new(void)
{
    pthread_once(&bounded_once, make_bounded_functions);
    if (default_create_array == NULL)
        return NULL;
    redisReader *r = redisReaderCreate();
    if (r != NULL)
        r->fn = &bounded_functions;
    return r;
}

int dlock__rreader_refused(void)
{
    int refused = refused_elements != 0;
    refused_elements = 0;
    return refused;
}

/* ---------------------------------------------------------------- dialing */

/* INFO cluster, as the protocol writes it: "cluster_enabled:1" in its
 * reply marks a node of a Redis Cluster. */
static const char info_cluster[] = "*2\r\n$4\r\nINFO\r\n$7\r\ncluster\r\n";

/* The first command of a connection (AUTH, or PING), followed by INFO
 * cluster for a server named alone, in protocol form (malloc'd) in *out;
 * its length, or -1 for want of memory. */
static int first_commands(const dlock__rendpoint *ep, char **out)
{
    char *cmd = NULL;
    int len;

    *out = NULL;
    if (ep->password != NULL && ep->user != NULL)
        len = redisFormatCommand(&cmd, "AUTH %s %s", ep->user, ep->password);
    else if (ep->password != NULL)
        len = redisFormatCommand(&cmd, "AUTH %s", ep->password);
    else
        len = redisFormatCommand(&cmd, "PING");
    if (len < 0)
        return -1;
    size_t more = ep->single || ep->independent > 0 ? sizeof info_cluster - 1 : 0;
    *out = malloc((size_t) len + more);
    if (*out != NULL) {
        memcpy(*out, cmd, (size_t) len);
        memcpy(*out + len, info_cluster, more);
    }
    redisFreeCommand(cmd);
    return *out != NULL ? len + (int) more : -1;
}

/* "host:port" (or the socket's path) of ep, for "H:P answered, but not as
 * Redis". */
static void where(const dlock__rendpoint *ep, char *buf, size_t n)
{
    if (ep->unix_path != NULL)
        snprintf(buf, n, "%s", ep->unix_path);
    else if (strchr(ep->host, ':') != NULL)
        snprintf(buf, n, "[%s]:%d", ep->host, ep->port);
    else
        snprintf(buf, n, "%s:%d", ep->host, ep->port);
}

/* Whether the first bytes b[0..n) a server sent are a MySQL packet: 3
 * bytes of length, sequence 0, then the greeting's protocol version 10 (or
 * an error packet's 0xff). */
static int mysql_packet(const unsigned char *b, size_t n)
{
    return n >= 5 && b[3] == 0 && (b[4] == 0x0a || b[4] == 0xff);
}

/* Whether the first bytes b[0..n) are no Redis server's: they do not start
 * as a reply of RESP 2 or 3 does, or they are another protocol's. (A
 * Redis-like reply that does not parse stays a bad reply: DLOCK_EPROTO.) */
static int not_redis(const unsigned char *b, size_t n)
{
    return n > 0 && (b[0] == '\0' || strchr("+-:$*_,#!=(%~>|", b[0]) == NULL ||
                     mysql_packet(b, n) || (n >= 2 && b[0] == 0x15 && b[1] == 0x03));
}

/* What sent the first bytes b[0..n) that are no Redis reply, in words
 * (../sockets.h), a TLS port with the scheme to use. */
static void what_answered(const unsigned char *b, size_t n, char *out, size_t size)
{
    if (n >= 2 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03)
        snprintf(out, size, "a TLS %s: the port takes TLS: use rediss://",
                 b[0] == 0x15 ? "alert" : "server's handshake");
    else
        dlock__what_answered(b, n, out, size);
}

/* After an empty INFO cluster: DLOCK_OK unless INFO server says that ep is
 * a Redis Sentinel (redis_mode:sentinel), which keeps no keys and runs no
 * scripts; then -1, with *code DLOCK_EUNREACHABLE: "H:P answered, but not
 * as a Redis server", as for another service at the port (the URL is what
 * to fix, and no wait helps), not a refusal of the first script. */
static int sentinel_at(dlock__rlink *l, const dlock__rendpoint *ep, int64_t deadline_us, int *code)
{
    redisReply *r = dlock__rlink_commandf(l, deadline_us, "INFO server");
    int sentinel =
        r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, "redis_mode:sentinel") != NULL;
    freeReplyObject(r);
    if (!sentinel)
        return 0;
    char at[300];
    where(ep, at, sizeof at);
    *code = DLOCK_EUNREACHABLE;
    if (ep->independent > 0)
        dlock__fail(
            *code,
            "%s answered, but not as a Redis server (a Redis Sentinel: redis_mode:sentinel): "
            "Redlock needs %zu independent masters: list the masters' ports",
            at, ep->independent);
    else
        dlock__fail(
            *code,
            "%s answered, but not as a Redis server (a Redis Sentinel: redis_mode:sentinel): "
            "for the master it watches use %s://%s/MASTERNAME",
            at, ep->tls != NULL ? "rediss+sentinel" : "redis+sentinel", at);
    return -1;
}

/* The first exchange of every connection: AUTH, or without a password a
 * PING, so that a server that wants one says so now (NOAUTH), rather than
 * through a request it cuts off ("Protocol error: unauthenticated
 * multibulk length", and the connection closed), and a connection counts
 * as made only once the server answered. Other refusals of the PING
 * (LOADING...) are left to the requests, as before. A server named alone
 * (or one of Redlock's independent masters: ep->independent) is also
 * asked INFO cluster in the same write (no round trip of its own),
 * and refused if it is a node of a Redis Cluster: a lock whose slot it
 * serves would work, the others would not (MOVED). A server that does not
 * answer INFO (renamed, an ACL) is not refused: a MOVED still is
 * (dlock__rconn_wrong_server). wait_ms: the time each reply is given. */
static int handshake(dlock__rlink *l, const dlock__rendpoint *ep, int64_t wait_ms, int *code,
                     int *foreign)
{
    redisReply *r = NULL;
    const char *step = ep->password != NULL ? "AUTH" : "PING";
    int64_t began_us = dlock__now_us(), deadline_us = began_us + wait_ms * 1000;
    char *cmds = NULL;
    int len = first_commands(ep, &cmds);

    if (len < 0) {
        *code = DLOCK_ENOMEM;
        dlock__fail(*code, "%s: out of memory connecting", ep->label);
        return -1;
    }
    r = dlock__rlink_exchange(l, deadline_us, cmds, (size_t) len);
    free(cmds);
    if (r == NULL || (r->type == REDIS_REPLY_ERROR &&
                      (ep->password != NULL || strncmp(r->str, "NOAUTH", 6) == 0)))
        goto refused;
    freeReplyObject(r);
    if (ep->single || ep->independent > 0) {
        step = "INFO cluster";
        r = dlock__rlink_exchange(l, deadline_us, "", 0);
        if (r == NULL)
            goto refused;
        if (r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_enabled:1") != NULL) {
            *code = in_cluster(ep, "cluster_enabled:1", 17);
            *foreign = 1; /* no server of the kind asked for at the port */
            freeReplyObject(r);
            return -1;
        }
        /* a Sentinel knows no section "cluster": its INFO cluster is
         * empty, where every Redis says cluster_enabled */
        int maybe_sentinel = r->type == REDIS_REPLY_STRING && r->len == 0;
        freeReplyObject(r);
        r = NULL;
        if (maybe_sentinel && sentinel_at(l, ep, deadline_us, code) != 0) {
            *foreign = 1;
            return -1;
        }
    }
    if (ep->db > 0) {
        step = "SELECT";
        r = dlock__rlink_commandf(l, deadline_us, "SELECT %d", ep->db);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto refused;
        freeReplyObject(r);
    }
    return 0;

refused:
    if (r == NULL && l->err == DLOCK__RLINK_ETIMEDOUT) {
        /* the socket's receive timeout: connected, but not answered (the
         * time said is the time waited, which the request's bound may
         * have made shorter than the command timeout) */
        *code = DLOCK_EUNREACHABLE;
        dlock__fail(*code,
                    "%s: connected, but no reply to %s in %lld ms (the server is stopped, hung "
                    "or overloaded)",
                    ep->label, step, (long long) ((dlock__now_us() - began_us) / 1000));
    } else if (r == NULL && l->err == DLOCK__RLINK_EPROTO && l->exchanges <= 1 &&
               not_redis(l->first, l->nfirst)) {
        /* the first reply of the connection is none: another service's
         * port (as if no Redis were there: the URL is what to fix) */
        char at[300], what[160];
        where(ep, at, sizeof at);
        what_answered(l->first, l->nfirst, what, sizeof what);
        *code = DLOCK_EUNREACHABLE;
        *foreign = 1;
        dlock__fail(*code, "%s answered, but not as Redis (%s; to %s: %s)", at, what, step,
                    l->errstr);
    } else if (r == NULL && l->err == DLOCK__RLINK_EPROTO) {
        /* the parser's: what came back is no reply (or one too large) */
        *code = DLOCK_EPROTO;
        dlock__fail(*code, "%s: server sent an invalid reply to %s (%s)", ep->label, step,
                    dlock__rreader_refused() ? "an array too large to be a reply" : l->errstr);
    } else if (r == NULL && l->nfirst == 0 && ep->tls == NULL && l->exchanges <= 1) {
        /* closed at the first command without a word: no Redis does that
         * (a refusal is a reply); another service's port does, and so
         * does a port that takes TLS only */
        char at[300];
        where(ep, at, sizeof at);
        *code = DLOCK_EUNREACHABLE;
        *foreign = 1;
        dlock__fail(*code,
                    "%s answered, but not as Redis (it closed the connection at %s: %s): "
                    "another service's port (etcd, ZooKeeper, PostgreSQL close it so), or a Redis "
                    "port that takes TLS only (then use %s)",
                    at, step, l->errstr, ep->tls_scheme != NULL ? ep->tls_scheme : "rediss://");
    } else if (r == NULL) {
        *code = DLOCK_EUNREACHABLE;
        dlock__fail(*code, "%s: %s: %s", ep->label, step, l->errstr);
    } else if (strncmp(r->str, "NOAUTH", 6) == 0) {
        *code = DLOCK_ESERVER;
        dlock__fail(*code,
                    "%s: the server wants a password (%.*s): give it in the URL, "
                    "redis://:PASSWORD@host or redis://USER:PASSWORD@host",
                    ep->label, DLOCK__REASON(r));
    } else {
        *code = DLOCK_ESERVER;
        dlock__fail(*code, "%s: %s refused: %.*s", ep->label, step, DLOCK__REASON(r));
    }
    freeReplyObject(r);
    return -1;
}

dlock__rlink *dlock__rconn_dial(const dlock__rendpoint *ep, int64_t deadline_us, int *code)
{
    if (ep->dial != NULL)
        return ep->dial(ep, deadline_us, code);
    return dlock__rconn_dial_at(ep, deadline_us, code);
}

dlock__rlink *dlock__rconn_dial_at(const dlock__rendpoint *ep, int64_t deadline_us, int *code)
{
    /* the connect timeout, and the handshake's command timeout, but never
     * past the deadline of the request that needs the connection */
    int64_t now = dlock__now_us(), left_ms = (deadline_us - now) / 1000;
    int64_t connect_ms = ep->connect_timeout_ms < left_ms ? ep->connect_timeout_ms : left_ms;
    int64_t cmd_ms = ep->command_timeout_ms < left_ms ? ep->command_timeout_ms : left_ms;

    if (cmd_ms < 1)
        cmd_ms = 1;
    int accepted = 0, foreign = 0;
    dlock__rlink *l = dlock__rlink_open(ep->host, ep->port, ep->unix_path, ep->tls,
                                        now + (connect_ms < 1 ? 1 : connect_ms) * 1000, ep->label,
                                        code, &accepted);
    if (l == NULL) {
        if (ep->absent != NULL)
            atomic_store(ep->absent, !accepted);
        return NULL;
    }
    redisReader *bounded = dlock__rreader_new();
    if (bounded == NULL) {
        *code = DLOCK_ENOMEM;
        dlock__fail(*code, "%s: out of memory connecting", ep->label);
        dlock__rlink_close(l);
        return NULL;
    }
    redisReaderFree(l->reader);
    l->reader = bounded;
    if (dlock__rlink_set_timeout(l, cmd_ms) != 0) {
        *code = DLOCK_EUNREACHABLE;
        dlock__fail(*code, "%s: cannot set the socket's timeouts: %s", ep->label, strerror(errno));
        dlock__rlink_close(l);
        return NULL;
    }
    if (handshake(l, ep, cmd_ms, code, &foreign) != 0) {
        if (ep->absent != NULL)
            atomic_store(ep->absent, foreign);
        dlock__rlink_close(l);
        return NULL;
    }
    if (ep->absent != NULL)
        atomic_store(ep->absent, 0);
    if (ep->reached != NULL)
        atomic_store(ep->reached, 1);
    if (dlock__rtls_insecure_once((dlock__rtls *) ep->tls))
        DLOCK__LOG(ep->log, DLOCK_LOG_WARN,
                   "%s: insecure=1: the server's certificate is not verified (anyone on the way "
                   "can read and change what is sent)",
                   ep->label);
    return l;
}

/* Called with mu held and no role taken by anyone: opens the socket. */
static int connect_locked(dlock__rconn *c, int64_t deadline_us)
{
    int code = DLOCK_OK;
    dlock__rlink *l;

    c->connecting = 1;
    int again = c->connects > 0;
    /* read before the dial: a move during it makes the next call dial again */
    unsigned moved = c->ep.moved != NULL ? atomic_load(c->ep.moved) : 0;
    char dropped[sizeof c->dropped];
    snprintf(dropped, sizeof dropped, "%s", c->dropped);
    c->dropped[0] = '\0';
    pthread_mutex_unlock(&c->mu);
    /* logged here, with no lock held: the callback may call dlock */
    if (c->ep.log != NULL && dropped[0] != '\0')
        DLOCK__LOG(c->ep.log, DLOCK_LOG_WARN, "%s: connection dropped: %s", c->label, dropped);
    l = dlock__rconn_dial(&c->ep, deadline_us, &code);
    if (c->ep.log != NULL) {
        if (l == NULL)
            DLOCK__LOG(c->ep.log, DLOCK_LOG_DEBUG, "%s", dlock_errmsg());
        else
            DLOCK__LOG(c->ep.log, again ? DLOCK_LOG_INFO : DLOCK_LOG_DEBUG, "%s: %s%s%s%s",
                       c->ep.label, again ? "connected again" : "connected",
                       c->what[0] != '\0' ? " (" : "", c->what, c->what[0] != '\0' ? ")" : "");
    }
    /* blocking (TLS: as if), with send/receive timeouts: the command
     * timeout (the handshake may have had less) */
    if (l != NULL)
        dlock__rlink_set_timeout(l, c->ep.command_timeout_ms);
    pthread_mutex_lock(&c->mu);
    c->connecting = 0;
    c->dials++;
    c->dial_code = l != NULL ? DLOCK_OK : code;
    c->dial_deadline_us = deadline_us;
    c->dial_cut = l == NULL && dlock__now_us() + DIAL_CUT_US >= deadline_us;
    if (l == NULL)
        snprintf(c->dial_msg, sizeof c->dial_msg, "%s", dlock_errmsg());
    if (l != NULL) {
        c->connects++;
        c->moved = moved;
        c->link = l;
        c->broken = 0;
        c->last_read_us = dlock__now_us();
        /* A fresh parser: the old one may hold half a reply. */
        redisReaderFree(c->reader);
        c->reader = dlock__rreader_new();
        if (c->reader == NULL) {
            dlock__rlink_close(l);
            c->link = NULL;
            code = DLOCK_ENOMEM;
        }
    }
    pthread_cond_broadcast(&c->state_cv);
    return code;
}

/* ---------------------------------------------------------------- failure */

/* With mu held: settles r (DONE or FAILED) and wakes its owner, or frees
 * it if abandoned. */
static void settle(request *r, int state, redisReply *reply)
{
    if (r->abandoned) {
        freeReplyObject(reply);
        free(r);
        return;
    }
    r->reply = reply;
    shared_parker *owner = r->owner;
    atomic_fetch_add(&owner->refs, 1); /* the owner may leave once it sees the state */
    atomic_store_explicit(&r->state, state, memory_order_release);
    dlock__unpark(&owner->parker);
    drop_parker(owner);
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
    if (c->link != NULL) {
        /* logged on reconnect, after the label the message starts with */
        size_t n = strlen(c->label);
        const char *why = c->fail_msg;
        if (strncmp(why, c->label, n) == 0 && why[n] == ':' && why[n + 1] == ' ')
            why += n + 2;
        snprintf(c->dropped, sizeof c->dropped, "%s", why);
    }
    if (c->link != NULL)
        dlock__rlink_shutdown(c->link);
    while (c->head != NULL) {
        request *r = c->head;
        c->head = r->next;
        settle(r, REQ_FAILED, NULL);
    }
    c->tail = NULL;
    c->out_len = 0;
    c->unsent = 0;
    c->first_unsent = NULL;
    c->sent = 0;
}

/* With mu held, after giving up a role: closes a broken socket once nobody
 * can be using it. */
static void settle_locked(dlock__rconn *c)
{
    if (c->broken && !c->reading && !c->writing && c->link != NULL) {
        dlock__rlink_close(c->link);
        c->link = NULL;
        pthread_cond_broadcast(&c->state_cv);
    }
}

/* With mu held, on an idle stream: has the server hung up since we last
 * heard from it (a restart, an idle timeout)? Then start afresh rather than
 * send a request whose fate would be unknown. Checked only after a quiet
 * spell, so a busy stream pays nothing. */
#define IDLE_CHECK_US 1000
static void drop_if_hung_up_locked(dlock__rconn *c)
{
    if (c->head != NULL || c->reading || c->writing ||
        dlock__now_us() - c->last_read_us < IDLE_CHECK_US)
        return;
    if (dlock__rlink_hung_up(c->link)) {
        dlock__rlink_close(c->link);
        c->link = NULL;
        snprintf(c->dropped, sizeof c->dropped, "the server closed it while it was idle");
    }
}

/* With mu held: waits until the connection can take commands. A caller
 * that waited for another thread's dial, which failed, fails with it rather
 * than dial again at once (a server that does not answer would cost each
 * waiting thread a connect timeout of its own, one after the other), unless
 * that dial was cut short by a deadline nearer than this caller's. */
static int ready_locked(dlock__rconn *c, int64_t deadline_us)
{
    unsigned dials = c->dials;

    if (c->link != NULL && !c->broken)
        drop_if_hung_up_locked(c);
    if (c->ep.moved != NULL && c->link != NULL && !c->broken &&
        atomic_load(c->ep.moved) != c->moved)
        fail_locked(c, DLOCK_EUNREACHABLE, "%s: the master moved", c->label);
    for (;;) {
        if (c->link != NULL && !c->broken)
            return DLOCK_OK;
        if (!c->connecting && !c->reading && !c->writing) {
            if (c->dials != dials && c->link == NULL && c->dial_code != DLOCK_OK &&
                (!c->dial_cut || c->dial_deadline_us >= deadline_us))
                return dlock__fail(c->dial_code, "%s", c->dial_msg);
            if (c->link != NULL) {
                dlock__rlink_close(c->link);
                c->link = NULL;
            }
            return connect_locked(c, deadline_us);
        }
        struct timespec ts = dlock__timespec(deadline_us);
        if (pthread_cond_timedwait(&c->state_cv, &c->mu, &ts) == ETIMEDOUT)
            return dlock__fail(DLOCK_EUNREACHABLE, "%s: no connection within the command timeout",
                               c->label);
    }
}

/* ---------------------------------------------------------------- roles */

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
        c->sent += c->unsent;
        c->unsent = 0;
        for (request *r = c->first_unsent; r != NULL; r = r->next)
            r->unsent = 0;
        c->first_unsent = NULL;
        dlock__rlink *l = c->link;
        pthread_mutex_unlock(&c->mu);
        const char *err = NULL;
        while (done < len) {
            /* a write to a socket shut down by fail_locked() does not raise
             * SIGPIPE in the host program (transport.h) */
            ssize_t n = dlock__rlink_write(l, buf + done, len - done);
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

/* With mu held: takes the request at the head of the FIFO, whose reply
 * has arrived, off the FIFO. NULL if there is none: a reply nobody asked
 * for (or to bytes not yet sent) means the stream is out of step. */
static request *take_answered_locked(dlock__rconn *c)
{
    request *r = c->head;
    if (r == NULL || c->sent == 0)
        return NULL;
    c->head = r->next;
    if (c->head == NULL)
        c->tail = NULL;
    c->sent--;
    r->next = NULL;
    return r;
}

/* Reader role, entered and left with mu held: one read, then dispatch.
 * The replies read are matched to their requests first, then the commands
 * held back meanwhile are sent, then the owners are woken: the server gets
 * the next batch as early as possible, and a failed send cannot fail a
 * request whose reply is already here.
 * Returns 0 on progress or failure handled, 1 when the deadline passed. */
static int read_some(dlock__rconn *c, int64_t deadline_us)
{
    char buf[16384];
    request *answered = NULL, **last = &answered;
    dlock__rlink *l = c->link;
    int timed_out = 0;
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
        /* with a deadline, the link waits for it (and a TLS link always
         * waits itself: a readable socket may hold no reply yet) */
        ssize_t got = dlock__rlink_read(l, buf, sizeof buf, must_poll ? deadline_us : 0);
        if (got > 0) {
            if (c->reader->len - c->reader->pos + (size_t) got > DLOCK__REPLY_MAX_BYTES) {
                err_code = DLOCK_EPROTO;
                err = "a reply larger than 64 MiB";
            } else if (redisReaderFeed(c->reader, buf, (size_t) got) != REDIS_OK) {
                err = "out of memory";
            }
            break;
        }
        if (got == 0) {
            err = "server closed the connection";
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            timed_out = 1; /* the deadline, or SO_RCVTIMEO */
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
                err = dlock__rreader_refused()       ? "an array too large to be a reply"
                      : c->reader->errstr[0] != '\0' ? c->reader->errstr
                                                     : "malformed reply";
                break;
            }
            if (reply == NULL)
                break;
            request *r = take_answered_locked(c);
            if (r == NULL) {
                freeReplyObject(reply);
                err_code = DLOCK_EPROTO;
                err = "unsolicited reply";
                break;
            }
            r->reply = reply; /* still PENDING: the owner does not look yet */
            *last = r;
            last = &r->next;
        }
    }
    if (err != NULL) {
        if (err_code == DLOCK_EPROTO)
            fail_locked(c, DLOCK_EPROTO, "%s: server sent an invalid reply (%s)", c->label, err);
        else
            fail_locked(c, DLOCK_EUNREACHABLE, "%s: read: %s", c->label, err);
    } else if (answered != NULL && c->out_len > 0 && !c->writing && !c->broken) {
        write_pending(c); /* what was held back while these were due */
    }
    while (answered != NULL) {
        request *r = answered;
        answered = r->next;
        settle(r, REQ_DONE, r->reply);
    }
    c->reading = 0;
    return timed_out;
}

/* With mu held, after leaving the reader role: if replies are still due,
 * wake the owner of the oldest live request to take the role. */
static void pass_reading_locked(dlock__rconn *c)
{
    for (request *r = c->head; r != NULL; r = r->next) {
        if (!r->abandoned) {
            dlock__unpark(&r->owner->parker);
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

/* With mu held: takes a caller's n requests, none of them sent, off the
 * FIFO and their bytes out of the pending buffer, as if never made. They
 * are consecutive in the FIFO (appended together), and every request
 * after them is unsent too. */
static void unqueue_unsent_locked(dlock__rconn *c, request **reqs, size_t n)
{
    size_t off = reqs[0]->out_off, len = 0;
    for (size_t i = 0; i < n; i++)
        len += reqs[i]->out_len;
    memmove(c->out + off, c->out + off + len, c->out_len - off - len);
    c->out_len -= len;
    request *prev = NULL, *after = reqs[n - 1]->next;
    for (request *r = c->head; r != reqs[0]; r = r->next)
        prev = r;
    for (request *r = after; r != NULL; r = r->next)
        r->out_off -= len;
    if (prev != NULL)
        prev->next = after;
    else
        c->head = after;
    if (c->tail == reqs[n - 1])
        c->tail = prev;
    if (c->first_unsent == reqs[0])
        c->first_unsent = after;
    c->unsent -= n;
}

static int all_settled(request **reqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&reqs[i]->state, memory_order_acquire) == REQ_PENDING)
            return 0;
    }
    return 1;
}

int dlock__rconn_call(dlock__rconn *c, size_t n, const dlock__rcmd *cmds, int64_t deadline_us,
                      redisReply **replies)
{
    request *stack_reqs[CACHED_REQUESTS], **reqs = stack_reqs;
    int64_t now = dlock__now_us();
    int rc = DLOCK_OK;
    size_t queued = 0;

    if (deadline_us > now + c->ep.command_timeout_ms * 1000)
        deadline_us = now + c->ep.command_timeout_ms * 1000;
    if (my_parker() == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (n > CACHED_REQUESTS) {
        reqs = malloc(n * sizeof *reqs);
        if (reqs == NULL)
            return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    for (queued = 0; queued < n; queued++) {
        reqs[queued] = take_request(queued);
        if (reqs[queued] == NULL) {
            for (size_t i = 0; i < queued; i++)
                return_request(reqs[i], i);
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
            goto out_unlocked;
        }
    }

    pthread_mutex_lock(&c->mu);
    rc = ready_locked(c, deadline_us);
    if (rc != DLOCK_OK) {
        for (size_t i = 0; i < n; i++)
            return_request(reqs[i], i);
        goto out;
    }
    for (queued = 0; queued < n; queued++) {
        request *r = reqs[queued];
        r->out_off = c->out_len;
        if (append_locked(c, &cmds[queued]) != 0) {
            /* Nothing of this call was sent: take it all back. */
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
            if (queued > 0)
                unqueue_unsent_locked(c, reqs, queued);
            for (size_t i = 0; i < n; i++)
                return_request(reqs[i], i);
            queued = 0;
            break;
        }
        r->out_len = c->out_len - r->out_off;
        r->unsent = 1;
        if (c->first_unsent == NULL)
            c->first_unsent = r;
        if (c->tail != NULL)
            c->tail->next = r;
        else
            c->head = r;
        c->tail = r;
        c->unsent++;
    }
    /* Write now only if no replies are due: otherwise the reader writes
     * these bytes when the next replies arrive, together with whatever
     * other threads add meanwhile. One send and one server read per batch
     * rather than per command (both are system calls, which dominate a
     * cycle's cost on each side); a lone caller still writes at once. */
    if (!c->writing && !c->broken && c->sent == 0)
        write_pending(c);
    settle_locked(c);
    if (queued == 0)
        goto out;

    /* Wait for the replies, reading them ourselves whenever nobody does.
     * A reader wakes us when ours arrive, or when the role is free. */
    for (;;) {
        if (all_settled(reqs, n))
            break;
        if (!c->reading && !c->broken && c->link != NULL) {
            int timed_out = read_some(c, deadline_us);
            settle_locked(c);
            if (timed_out && !all_settled(reqs, n))
                break;
            continue;
        }
        pthread_mutex_unlock(&c->mu);
        dlock__park(&me.parker->parker, deadline_us);
        if (all_settled(reqs, n)) {
            /* The common wake-up: our replies are in; no lock needed. */
            goto collect;
        }
        pthread_mutex_lock(&c->mu);
        if (dlock__now_us() >= deadline_us && !all_settled(reqs, n))
            break;
    }

    if (!all_settled(reqs, n)) {
        /* Deadline. Commands still held back never left: take them back,
         * so they never run. Sent ones are left to the reader (their
         * replies are still due, in order). If the server has sent nothing
         * for a whole command timeout, assume the stream is dead (peer
         * gone without a reset) and start afresh next time. */
        int unsent = reqs[0]->unsent; /* all of a call's, or none */
        if (unsent)
            unqueue_unsent_locked(c, reqs, n);
        for (size_t i = 0; i < n; i++) {
            if (!unsent && atomic_load(&reqs[i]->state) == REQ_PENDING)
                abandon_request(reqs[i], i);
            else
                return_request(reqs[i], i);
        }
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: no reply in %lld ms%s", c->label,
                         (long long) ((dlock__now_us() - now) / 1000),
                         unsent ? " (the commands were not sent)" : "");
        if (dlock__now_us() - c->last_read_us >= c->ep.command_timeout_ms * 1000)
            fail_locked(c, DLOCK_EUNREACHABLE, "%s: server stopped answering", c->label);
        settle_locked(c);
        if (!c->reading)
            pass_reading_locked(c);
        goto out;
    }
    if (!c->reading)
        pass_reading_locked(c);
    pthread_mutex_unlock(&c->mu);

collect:
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&reqs[i]->state) == REQ_FAILED && rc == DLOCK_OK) {
            /* fail_msg is stable: it changes only at the next failure,
             * after a reconnect nobody could have made yet */
            pthread_mutex_lock(&c->mu);
            rc = dlock__fail(c->fail_code, "%s", c->fail_msg);
            pthread_mutex_unlock(&c->mu);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (rc == DLOCK_OK) {
            replies[i] = reqs[i]->reply;
            reqs[i]->reply = NULL;
        }
        return_request(reqs[i], i);
    }
    goto out_unlocked;

out:
    pthread_mutex_unlock(&c->mu);
out_unlocked:
    if (reqs != stack_reqs)
        free(reqs);
    return rc;
}
