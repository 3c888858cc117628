/* SPDX-License-Identifier: MIT */
/* conn.c - a ZooKeeper session and its requests. See conn.h.
 *
 * The end of a connection (its lifetime, the close sequence) is close.c's;
 * the nodes it still has to delete are orphans.c's; conn_int.h is what the
 * three files share.
 *
 * Opening. zookeeper_init returns at once; the session is established by
 * the client library's I/O thread. Callers wait for it (dlock__zconn_ready)
 * no longer than their own deadline, so a slow or refused connect never
 * holds a request past its bound; the first caller to see it connected
 * makes one round trip (which also tells whether the credentials were
 * accepted) and starts the core's session from that round trip's send time.
 *
 * Watches. A predecessor watch has a small context naming the waiter's
 * token; the watcher posts a recheck for it on the board. ZooKeeper calls a
 * watcher once for its node event, and also for session events; a context is
 * freed after its node event, after the session's end, or with the
 * connection. */
#define _GNU_SOURCE
#include "conn.h"
#include "conn_int.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../sockets.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROBE_AFTER_US 100000 /* no session this long after the start: ask why (probe) */

struct dlock__zreq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int refs; /* the waiter's and the completion's */
    int done;
    int abandoned; /* the waiter stopped waiting before the reply */
    int owned;     /* dlock__zreq_create_owned: path is DIR/_c_<uuid>-... */
    char *dir;
    char uuid[37];
    dlock__zconn *conn; /* a reference, while in flight */
    dlock__zresult res;
    /* multi */
    zoo_op_t *ops;
    zoo_op_result_t *results;
    char **strings; /* copies the ops point to */
    int nstrings;
};

/* ---------------------------------------------------------------- session */

/* Adds to inodes the sockets in `table` (/proc/self/net/tcp or tcp6)
 * whose remote port is one of c's. */
static size_t zk_socket_inodes(const dlock__zconn *c, const char *table, unsigned long *inodes,
                               size_t n, size_t max)
{
    FILE *f = fopen(table, "re");
    char line[512];

    if (f == NULL)
        return n;
    while (n < max && fgets(line, sizeof line, f) != NULL) {
        char remote[64];
        unsigned long inode;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*[0-9]: %*s %63s %*s %*s %*s %*s %*s %*s %lu", remote, &inode) != 2)
            continue;
        const char *colon = strrchr(remote, ':');
        int port = colon != NULL ? (int) strtol(colon + 1, NULL, 16) : 0;
        for (size_t i = 0; i < c->nports; i++) {
            if (port == c->ports[i] && inode != 0)
                inodes[n++] = inode;
        }
    }
    fclose(f);
    return n;
}

/* Sets close-on-exec on the sockets connected to a ZooKeeper port: the
 * client library opens them without it, and a command run under a lock
 * must not inherit them. The sockets are found by their inodes, from
 * /proc's tables and fd links, never by calls on the fds themselves: other
 * threads (other handles' I/O threads, the host program's) may be closing
 * them. Only a socket to one of our ports is touched. */
static void close_on_exec(const dlock__zconn *c)
{
    unsigned long inodes[256];
    size_t n = zk_socket_inodes(c, "/proc/self/net/tcp", inodes, 0, 256);
    n = zk_socket_inodes(c, "/proc/self/net/tcp6", inodes, n, 256);
    dlock__open_socket *open = NULL;
    size_t nopen = n > 0 ? dlock__open_sockets(&open) : 0;

    for (size_t k = 0; k < nopen; k++) {
        for (size_t i = 0; i < n; i++) {
            if (inodes[i] == open[k].inode) {
                dlock__set_cloexec(open[k].fd);
                break;
            }
        }
    }
    free(open);
}

/* Wakes token's waiter (NULL: every waiter) to look again. The board is the
 * client's: a handle closed in the background may still call its watchers
 * after the client is gone, so the board is used under mu, and forgotten
 * when the client lets go of the connection (dlock__zconn_detach). */
static void recheck(dlock__zconn *c, const char *token)
{
    pthread_mutex_lock(&c->mu);
    if (c->board != NULL)
        dlock__board_recheck(c->board, token);
    pthread_mutex_unlock(&c->mu);
}

void dlock__zconn_detach(dlock__zconn *c)
{
    pthread_mutex_lock(&c->mu);
    c->board = NULL;
    c->sessions = NULL;
    pthread_mutex_unlock(&c->mu);
}

/* The handle's global watcher: session events only. */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    dlock__zconn *c = ctx;

    (void) path;
    if (type != ZOO_SESSION_EVENT)
        return;
    if (state == ZOO_CONNECTED_STATE) {
        close_on_exec(c);
        pthread_mutex_lock(&c->mu);
        if (c->state == CONNECTING) {
            c->state = CONNECTED;
            c->id = zoo_client_id(zh)->client_id;
            c->timeout_ms = zoo_recv_timeout(zh);
            pthread_cond_broadcast(&c->cv);
        }
        pthread_mutex_unlock(&c->mu);
        dlock__zconn_kick(c); /* what failed while the connection was down */
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        dlock__zk_end_session(c, "the ZooKeeper session expired");
        recheck(c, NULL);        /* waiters: their nodes are gone */
        dlock__zk_close_here(c); /* the handle is of no use any more */
    } else if (state == ZOO_AUTH_FAILED_STATE) {
        pthread_mutex_lock(&c->mu);
        c->auth_failed = 1;
        pthread_mutex_unlock(&c->mu);
        dlock__zk_end_session(c, "authentication failed");
        recheck(c, NULL);
        dlock__zk_close_here(c);
    }
}

/* On fd, connected to host:port and not yet a session: asks the
 * four-letter word srvr, which every ZooKeeper answers (with its stats, or
 * that the word is not allowed), and reads the answer for a second at most
 * (by until_us). 0 when ZooKeeper answered, or nothing did (a server that
 * is only slow), -2 when something else answered, or closed the
 * connection without a word (why says what). A session is not made: a
 * four-letter word's connection is the server's for that word alone. */
static int ask_srvr(int fd, const char *host, const char *port, int64_t until_us, char *why,
                    size_t len)
{
    static const char word[] = "srvr\r\n"; /* the line end: Redis reads a line */
    char got[256];
    size_t n = 0;
    int closed = 0;
    int64_t end = dlock__now_us() + 1000000;

    if (end > until_us)
        end = until_us;
    if (send(fd, word, sizeof word - 1, MSG_NOSIGNAL) != (ssize_t) (sizeof word - 1))
        return 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left_ms = (end - dlock__now_us()) / 1000;
        if (left_ms <= 0)
            break;
        int ready = poll(&p, 1, (int) left_ms);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready != 1)
            break;
        ssize_t r = recv(fd, got + n, sizeof got - 1 - n, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0) {
            closed = 1; /* at its end, or reset */
            break;
        }
        n += (size_t) r;
        got[n] = '\0';
        if (n == sizeof got - 1 || strchr(got, '\n') != NULL) /* a line is enough to tell */
            break;
    }
    got[n] = '\0';
    if (strstr(got, "Zookeeper version") != NULL || strstr(got, "is not executed") != NULL ||
        strstr(got, "not currently serving") != NULL)
        return 0;
    if (n > 0) {
        char what[160];
        dlock__what_answered(got, n, what, sizeof what);
        snprintf(why, len, "%s:%s answered, but not as ZooKeeper (%s)", host, port, what);
        return -2;
    }
    if (!closed)
        return 0; /* silent: perhaps a ZooKeeper that is slow */
    snprintf(why, len,
             "%s:%s answered, but not as ZooKeeper (asked ZooKeeper's 'srvr', it closed the "
             "connection without a word: another service's port (PostgreSQL and etcd close it "
             "so), or a ZooKeeper at its limit of connections from this host)",
             host, port);
    return -2;
}

/* One host:port of a host list: connects (a socket of our own, closed at
 * once) within until_us, and asks it a four-letter word (ask_srvr). 0 when
 * it accepted, -2 when what accepted is not ZooKeeper, else -1; with the
 * cause in why. */
static int probe_one(const char *host, const char *port, int64_t until_us, char *why, size_t len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
    int grc = getaddrinfo(host, port, &hints, &res);
    int err = ETIMEDOUT;

    if (grc != 0) {
        snprintf(why, len, "cannot resolve the name: %s",
                 grc == EAI_SYSTEM ? strerror(errno) : gai_strerror(grc));
        return -1;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        err = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int64_t left_ms = (until_us - dlock__now_us()) / 1000;
            socklen_t elen = sizeof err;
            err = ETIMEDOUT;
            if (left_ms > 0 && poll(&p, 1, (int) left_ms) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
                err = errno;
        }
        int answer = err == 0 ? ask_srvr(fd, host, port, until_us, why, len) : 0;
        close(fd);
        if (err == 0) {
            freeaddrinfo(res);
            return answer;
        }
    }
    freeaddrinfo(res);
    snprintf(why, len, "connect: %s", strerror(err));
    return -1;
}

/* Why there is no session: the client library keeps trying and does not
 * say (its log is quiet), so connect to each host ourselves, by until_us.
 * 1 if one of them accepts as ZooKeeper, or says nothing (the server is
 * there; the session is only slow), else 0 with each host's cause in why
 * ("127.0.0.1:1: connect: Connection refused"), or -2 when one of them is
 * another service ("H:P answered, but not as ZooKeeper (...)"). */
static int probe_hosts(const char *hosts, int64_t until_us, char *why, size_t len)
{
    size_t used = 0;
    int not_zk = 0;

    why[0] = '\0';
    for (const char *p = hosts; *p != '\0';) {
        size_t n = strcspn(p, ",");
        char item[300], cause[700];
        snprintf(item, sizeof item, "%.*s", (int) n, p);
        p += n + (p[n] == ',');
        char *colon = strrchr(item, ':'), *host = item;
        if (colon == NULL)
            continue;
        *colon = '\0';
        if (host[0] == '[' && colon > host && colon[-1] == ']') {
            host++;
            colon[-1] = '\0';
        }
        int probed = probe_one(host, colon + 1, until_us, cause, sizeof cause);
        if (probed == 0)
            return 1;
        if (probed == -2)
            not_zk = 1;
        int w = probed == -2 ? snprintf(why + used, len - used, "%s%s", used ? "; " : "", cause)
                             : snprintf(why + used, len - used, "%s%s%s%s:%s: %s", used ? "; " : "",
                                        host != item ? "[" : "", host, host != item ? "]" : "",
                                        colon + 1, cause);
        if (w > 0)
            used += (size_t) w < len - used ? (size_t) w : len - used - 1;
    }
    return not_zk ? -2 : 0;
}

static void quiet_log(const char *message)
{
    (void) message; /* the library's own log would go to stderr */
}

static void free_session_data(void *data)
{
    dlock__zconn_unref(data);
}

static void parse_ports(dlock__zconn *c, const char *hosts)
{
    for (const char *p = hosts; p != NULL && *p != '\0' && c->nports < MAX_PORTS;) {
        const char *end = strchr(p, ','), *colon = NULL;
        for (const char *q = p; *q != '\0' && (end == NULL || q < end); q++) {
            if (*q == ':')
                colon = q;
        }
        if (colon != NULL)
            c->ports[c->nports++] = atoi(colon + 1);
        p = end != NULL ? end + 1 : NULL;
    }
}

int dlock__zconn_open(const dlock__zconn_cfg *cfg, dlock__zconn **out)
{
    dlock__zconn *c = calloc(1, sizeof *c);
    sigset_t all, old;
    int rc;

    *out = NULL;
    if (c == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    atomic_init(&c->refs, 1);
    pthread_rwlock_init(&c->use, NULL);
    pthread_mutex_init(&c->mu, NULL);
    dlock__cond_init(&c->cv);
    c->watches.prev = c->watches.next = &c->watches;
    c->board = cfg->board;
    c->sessions = cfg->sessions;
    c->opened = dlock__now_us();
    c->connect_until = c->opened + cfg->connect_ms * 1000;
    c->auth = cfg->auth != NULL;
    snprintf(c->label, sizeof c->label, "%s", cfg->label);
    snprintf(c->hosts, sizeof c->hosts, "%s", cfg->hosts);
    parse_ports(c, cfg->hosts);

    /* Its threads inherit this mask: the host program's signals stay with
     * the host program's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    c->zh =
        zookeeper_init2(cfg->hosts, session_watcher, (int) cfg->session_ms, NULL, c, 0, quiet_log);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* The client resolves the host names each time it polls (a cost felt
     * per request); once a minute is enough, and it resolves again on a
     * connection loss anyway. */
    if (c->zh != NULL)
        zoo_set_servers_resolution_delay(c->zh, 60000);
    if (c->zh == NULL) {
        /* it gives up on a host it cannot resolve: say which, and why */
        char why[512];
        if (probe_hosts(c->hosts, c->connect_until, why, sizeof why) == 0)
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot start a ZooKeeper session: %s",
                             cfg->label, why);
        else
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot start a ZooKeeper session: %s",
                             cfg->label, strerror(saved));
        goto fail;
    }
    /* digest auth: sent when the connection is made (again after every
     * reconnect), answered before any later request */
    int zrc = cfg->auth != NULL
                  ? zoo_add_auth(c->zh, "digest", cfg->auth, (int) strlen(cfg->auth), NULL, NULL)
                  : ZOK;
    if (zrc != ZOK) {
        /* the handle gave up already (ZINVALIDSTATE): no server took the
         * connection, which is what to say, not the credentials */
        char why[512];
        if (probe_hosts(c->hosts, c->connect_until, why, sizeof why) == 0)
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot connect: %s", cfg->label, why);
        else
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot send the credentials (%s)", cfg->label,
                             zerror(zrc));
        goto fail;
    }
    *out = c;
    return DLOCK_OK;

fail:
    pthread_mutex_lock(&c->mu);
    dlock__zk_die_locked(c, "could not connect");
    c->closed = c->zh == NULL; /* else it is closed as the reference goes */
    pthread_mutex_unlock(&c->mu);
    dlock__zconn_unref(c);
    return rc;
}

/* The core's session starts once the connection is established, valid from
 * the send time of a request the server answered after it began counting
 * (it counts the timeout from the connect request on). That is the time
 * zookeeper_init was called, if the session came soon after it; else (a
 * slow connect: validity counted from then would be mostly gone) and with
 * credentials (whose answer comes before any later request's), one round
 * trip first. */
static int first_round_trip(dlock__zconn *c, int64_t until)
{
    dlock__zresult r = {0};
    int zrc = ZOK, rc = DLOCK_OK;
    int64_t sent = dlock__now_us();

    pthread_mutex_lock(&c->mu);
    /* (a timeout of more than an hour is no ZooKeeper's: another service
     * that libzookeeper read as one, as a MySQL greeting; the round trip
     * tells) */
    int quick =
        !c->auth && sent - c->opened < c->timeout_ms * 1000 / 2 && c->timeout_ms <= 3600 * 1000;
    pthread_mutex_unlock(&c->mu);
    if (quick) {
        sent = c->opened;
    } else {
        dlock__zreq *q = dlock__zreq_exists(c, "/", &zrc);
        if (q != NULL)
            zrc = dlock__zreq_wait(q, until, &r);
        dlock__zresult_clear(&r);
    }
    pthread_mutex_lock(&c->mu);
    int auth_failed = c->auth_failed || zrc == ZAUTHFAILED;
    int64_t timeout_ms = c->timeout_ms;
    pthread_mutex_unlock(&c->mu);
    if (auth_failed) {
        dlock__zk_end_session(c, "authentication failed");
        pthread_mutex_lock(&c->mu);
        c->auth_failed = 1;
        pthread_mutex_unlock(&c->mu);
        return dlock__fail(DLOCK_ESERVER, "%s: authentication failed (digest user:password)",
                           c->label);
    }
    if (zrc != ZOK)
        return dlock__zk_fail(zrc, c->label, "the first request of the session");
    dlock__session *s = NULL;
    dlock__zconn_ref(c); /* the session's data */
    pthread_mutex_lock(&c->mu);
    dlock__sessions *sessions = c->sessions;
    pthread_mutex_unlock(&c->mu);
    rc = sessions != NULL
             ? dlock__session_start(sessions, timeout_ms, sent, c, free_session_data, &s)
             : dlock__fail(DLOCK_EUNREACHABLE, "%s: the client is closing", c->label);
    if (rc != DLOCK_OK) {
        dlock__zconn_unref(c);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    int ready = c->state == CONNECTED;
    if (ready) {
        c->state = READY;
        c->session = s;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    if (!ready) {
        /* it died meanwhile (expired, killed) */
        dlock__session_end(s, "the ZooKeeper session ended as it was established");
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: the ZooKeeper session ended as it began",
                           c->label);
    }
    return DLOCK_OK;
}

int dlock__zconn_ready(dlock__zconn *c, int64_t deadline_us)
{
    int64_t until = deadline_us < c->connect_until ? deadline_us : c->connect_until;
    int rc = DLOCK_OK, asked = 0, accepted = 0;
    char why[512];

    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->state == READY || c->state == DEAD)
            break;
        if (c->state == CONNECTED && !c->probing) {
            c->probing = 1;
            pthread_mutex_unlock(&c->mu);
            rc = first_round_trip(c, until);
            pthread_mutex_lock(&c->mu);
            c->probing = 0;
            pthread_cond_broadcast(&c->cv);
            if (rc != DLOCK_OK && !asked && c->state != DEAD) {
                /* the first round trip failed: is it ZooKeeper there? */
                asked = 1;
                pthread_mutex_unlock(&c->mu);
                accepted = probe_hosts(c->hosts, until, why, sizeof why);
                pthread_mutex_lock(&c->mu);
                if (accepted == -2)
                    break;
            }
            if (rc != DLOCK_OK && c->state != DEAD && dlock__now_us() < until) {
                /* a connection lost meanwhile: the library connects again;
                 * try once more after a moment */
                int64_t next = dlock__now_us() + 50000;
                struct timespec ts = dlock__timespec(next < until ? next : until);
                pthread_cond_timedwait(&c->cv, &c->mu, &ts);
                continue;
            }
            break;
        }
        int64_t now = dlock__now_us(), ask_at = c->opened + PROBE_AFTER_US;
        if (now >= until)
            break;
        if (c->state == CONNECTING && !asked && !c->asking && now >= ask_at) {
            /* no session yet: a server that refuses or a host that does
             * not resolve is said now, with its cause, not after the
             * request's whole time as "no session yet" */
            asked = c->asking = 1;
            pthread_mutex_unlock(&c->mu);
            accepted = probe_hosts(c->hosts, until, why, sizeof why);
            pthread_mutex_lock(&c->mu);
            c->asking = 0;
            pthread_cond_broadcast(&c->cv);
            if (accepted <= 0 && c->state == CONNECTING)
                break;
            continue;
        }
        struct timespec ts = dlock__timespec(asked || ask_at >= until ? until : ask_at);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    int state = c->state, auth_failed = c->auth_failed;
    if (state != READY && state != DEAD && dlock__now_us() >= c->connect_until)
        dlock__zk_die_locked(c, "no session within the connect timeout");
    pthread_mutex_unlock(&c->mu);
    if (state == READY)
        return DLOCK_OK;
    if (state == DEAD && auth_failed)
        return dlock__fail(DLOCK_ESERVER, "%s: authentication failed (digest user:password)",
                           c->label);
    if (asked && accepted == -2) /* another service's port: the URL is what to fix */
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: %s", c->label, why);
    if (rc != DLOCK_OK)
        return rc;
    if (state == DEAD)
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: the ZooKeeper session is over: %s", c->label,
                           c->why);
    if (asked && !accepted)
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot connect: %s", c->label, why);
    return dlock__fail(DLOCK_EUNREACHABLE,
                       "%s: no ZooKeeper session (yet) within the request's "
                       "time%s",
                       c->label,
                       asked ? ": the server accepts connections but has not answered" : "");
}

int dlock__zconn_alive(dlock__zconn *c)
{
    pthread_mutex_lock(&c->mu);
    int alive = c->state == READY && c->session != NULL && dlock__session_alive(c->session);
    pthread_mutex_unlock(&c->mu);
    return alive;
}

int dlock__zconn_dead(dlock__zconn *c)
{
    pthread_mutex_lock(&c->mu);
    int dead = c->state == DEAD || (c->state == READY && !dlock__session_alive(c->session)) ||
               (c->state != READY && dlock__now_us() >= c->connect_until);
    pthread_mutex_unlock(&c->mu);
    return dead;
}

void dlock__zconn_kill(dlock__zconn *c, const char *why)
{
    dlock__zk_end_session(c, why);
    /* Its waiters' nodes go with it, and no watch of it fires any more:
     * they look again (in the next session). From now on it touches
     * nothing of the client's. */
    recheck(c, NULL);
    dlock__zconn_detach(c);
    dlock__zk_begin_close(c);
}

void dlock__zconn_wait_closed(dlock__zconn *c, int64_t deadline_us)
{
    struct timespec ts = dlock__timespec(deadline_us);
    pthread_mutex_lock(&c->mu);
    while (!c->closed && pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&c->mu);
}

int dlock__zconn_connected(dlock__zconn *c)
{
    pthread_rwlock_rdlock(&c->use);
    int connected = c->zh != NULL && zoo_state(c->zh) == ZOO_CONNECTED_STATE;
    pthread_rwlock_unlock(&c->use);
    return connected;
}

dlock__session *dlock__zconn_session(dlock__zconn *c)
{
    pthread_mutex_lock(&c->mu);
    dlock__session *s = c->session;
    pthread_mutex_unlock(&c->mu);
    return s;
}

dlock__session *dlock__zconn_session_ref(dlock__zconn *c)
{
    /* under mu: the connection's own reference holds it until dlock__zk_end_session
     * takes it away, which it does under mu */
    pthread_mutex_lock(&c->mu);
    dlock__session *s = c->session;
    if (s != NULL)
        dlock__session_ref(s);
    pthread_mutex_unlock(&c->mu);
    return s;
}

int64_t dlock__zconn_id(dlock__zconn *c)
{
    return c->id;
}

/* ---------------------------------------------------------------- requests */

void dlock__zresult_clear(dlock__zresult *r)
{
    free(r->path);
    for (int i = 0; i < r->nchildren; i++)
        free(r->children[i]);
    free(r->children);
    free(r->data);
    for (int i = 0; r->op_paths != NULL && i < r->nops; i++)
        free(r->op_paths[i]);
    free(r->op_paths);
    free(r->op_errors);
    memset(r, 0, sizeof *r);
}

static dlock__zreq *req_new(dlock__zconn *c)
{
    dlock__zreq *q = calloc(1, sizeof *q);

    if (q == NULL)
        return NULL;
    pthread_mutex_init(&q->mu, NULL);
    dlock__cond_init(&q->cv);
    atomic_init(&q->refs, 2);
    dlock__zconn_ref(c);
    q->conn = c;
    return q;
}

static void req_unref(dlock__zreq *q)
{
    if (atomic_fetch_sub(&q->refs, 1) != 1)
        return;
    free(q->dir);
    dlock__zresult_clear(&q->res);
    for (int i = 0; i < q->nstrings; i++)
        free(q->strings[i]);
    free(q->strings);
    free(q->ops);
    free(q->results);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    dlock__zconn_unref(q->conn);
    free(q);
}

/* The completion's part: the result is in, wake the waiter. */
static void req_done(dlock__zreq *q, int rc)
{
    pthread_mutex_lock(&q->mu);
    q->res.rc = rc;
    q->done = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    req_unref(q);
}

/* The request could not be sent: no completion will come. */
static dlock__zreq *req_not_sent(dlock__zreq *q, int zrc, int *rc)
{
    *rc = zrc;
    req_unref(q);
    req_unref(q);
    return NULL;
}

static void on_void(int rc, const void *data)
{
    req_done((dlock__zreq *) data, rc);
}

static void on_stat(int rc, const struct Stat *stat, const void *data)
{
    dlock__zreq *q = (dlock__zreq *) data;
    if (rc == ZOK && stat != NULL) {
        q->res.stat = *stat;
        q->res.have_stat = 1;
    }
    req_done(q, rc);
}

static void on_data(int rc, const char *value, int len, const struct Stat *stat, const void *data)
{
    dlock__zreq *q = (dlock__zreq *) data;
    if (rc == ZOK) {
        if (stat != NULL) {
            q->res.stat = *stat;
            q->res.have_stat = 1;
        }
        if (value != NULL && len > 0 && (q->res.data = malloc((size_t) len + 1)) != NULL) {
            memcpy(q->res.data, value, (size_t) len);
            q->res.data[len] = '\0';
            q->res.datalen = len;
        }
    }
    req_done(q, rc);
}

static void on_created(int rc, const char *path, const struct Stat *stat, const void *data)
{
    dlock__zreq *q = (dlock__zreq *) data;
    char *made = rc == ZOK && path != NULL ? strdup(path) : NULL;
    int unknown = rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || (rc == ZOK && made == NULL);

    /* Whose node is it? The waiter's if it takes this reply, else nobody's:
     * decided under the mutex the waiter gives up under. */
    pthread_mutex_lock(&q->mu);
    int abandoned = q->abandoned;
    if (made != NULL) {
        if (stat != NULL) {
            q->res.stat = *stat;
            q->res.have_stat = 1;
        }
        if (!abandoned) {
            q->res.path = made;
            made = NULL;
        }
    }
    q->res.rc = rc == ZOK && made == NULL && q->res.path == NULL ? ZSYSTEMERROR : rc;
    q->done = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (q->owned && made != NULL)
        dlock__zk_orphan_add(q->conn, made, NULL);
    else if (q->owned && unknown)
        dlock__zk_orphan_add(q->conn, q->dir, q->uuid); /* made or not: look for it */
    free(made);
    req_unref(q);
}

static void on_children(int rc, const struct String_vector *v, const void *data)
{
    dlock__zreq *q = (dlock__zreq *) data;
    if (rc == ZOK && v != NULL && v->count > 0) {
        q->res.children = calloc((size_t) v->count, sizeof *q->res.children);
        if (q->res.children == NULL) {
            rc = ZSYSTEMERROR;
        } else {
            for (int i = 0; i < v->count; i++) {
                q->res.children[i] = strdup(v->data[i]);
                if (q->res.children[i] == NULL) {
                    rc = ZSYSTEMERROR;
                    break;
                }
                q->res.nchildren++;
            }
        }
    }
    req_done(q, rc);
}

static int is_create(const zoo_op_t *op)
{
    return op->type == ZOO_CREATE_OP || op->type == ZOO_CREATE_CONTAINER_OP;
}

/* A create of a contender node: the uuid of its name DIR/_c_<uuid>-..., or
 * NULL. */
static const char *owned_uuid(const zoo_op_t *op)
{
    const char *slash = is_create(op) ? strrchr(op->create_op.path, '/') : NULL;
    if (slash == NULL || strncmp(slash + 1, "_c_", 3) != 0 || strlen(slash + 4) < 36)
        return NULL;
    return slash + 4;
}

/* The contender nodes of a transaction of n ops that nobody will own:
 * deleted (made known), or searched for by their uuids and deleted (made or
 * not). n is the caller's: q->res is the waiter's once done is set. */
static void multi_orphans(dlock__zreq *q, int n, char **made)
{
    for (int i = 0; i < n; i++) {
        const char *uuid = owned_uuid(&q->ops[i]);
        if (uuid == NULL)
            continue;
        if (made != NULL && made[i] != NULL) {
            dlock__zk_orphan_add(q->conn, made[i], NULL);
            continue;
        }
        const char *path = q->ops[i].create_op.path, *slash = strrchr(path, '/');
        char dir[1200], id[37];
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int) (slash - path), path);
        snprintf(id, sizeof id, "%.36s", uuid);
        dlock__zk_orphan_add(q->conn, dir, id);
    }
}

/* As on_created, for every contender node of the transaction: the waiter's
 * if it takes a reply that names them all, else nobody's. */
static void on_multi(int rc, const void *data)
{
    dlock__zreq *q = (dlock__zreq *) data;
    int n = q->res.nops;
    int *errors = calloc((size_t) n, sizeof *errors);
    char **made = calloc((size_t) n, sizeof *made);
    int unknown = rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;

    if (errors == NULL || made == NULL) {
        unknown |= rc == ZOK;
        rc = ZSYSTEMERROR;
    }
    for (int i = 0; errors != NULL && made != NULL && i < n; i++) {
        errors[i] = q->results[i].err;
        if (rc != ZOK || !is_create(&q->ops[i]))
            continue;
        made[i] = q->results[i].value != NULL ? strdup(q->results[i].value) : NULL;
        if (made[i] == NULL) {
            /* made, but which node is not known here: search for them */
            for (int k = 0; k < i; k++) {
                free(made[k]);
                made[k] = NULL;
            }
            unknown = 1;
            rc = ZSYSTEMERROR;
            break;
        }
    }
    pthread_mutex_lock(&q->mu);
    int abandoned = q->abandoned;
    if (!abandoned) {
        q->res.op_errors = errors;
        errors = NULL;
        if (rc == ZOK) {
            q->res.op_paths = made;
            made = NULL;
        }
    }
    q->res.rc = rc;
    q->done = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (rc == ZOK && made != NULL)
        multi_orphans(q, n, made); /* the waiter gave up before the reply */
    else if (unknown)
        multi_orphans(q, n, NULL);
    for (int i = 0; made != NULL && i < n; i++)
        free(made[i]);
    free(made);
    free(errors);
    req_unref(q);
}

dlock__zreq *dlock__zreq_create(dlock__zconn *c, const char *path, const char *data, int datalen,
                                int mode, int *rc)
{
    dlock__zreq *q = req_new(c);
    if (q == NULL)
        return *rc = ZSYSTEMERROR, NULL;
    int zrc =
        start(c, zoo_acreate2(ZH, path, data, datalen, &ZOO_OPEN_ACL_UNSAFE, mode, on_created, q));
    return zrc == ZOK ? q : req_not_sent(q, zrc, rc);
}

dlock__zreq *dlock__zreq_create_owned(dlock__zconn *c, const char *path, const char *data,
                                      int datalen, int *rc)
{
    const char *slash = strrchr(path, '/');
    dlock__zreq *q = req_new(c);
    if (q == NULL)
        return *rc = ZSYSTEMERROR, NULL;
    if (slash == NULL || strncmp(slash + 1, "_c_", 3) != 0 || strlen(slash + 4) < 36 ||
        (q->dir = strndup(path, slash == path ? 1 : (size_t) (slash - path))) == NULL)
        return req_not_sent(q, slash == NULL ? ZBADARGUMENTS : ZSYSTEMERROR, rc);
    memcpy(q->uuid, slash + 4, 36);
    q->uuid[36] = '\0';
    q->owned = 1;
    int zrc = start(c, zoo_acreate2(ZH, path, data, datalen, &ZOO_OPEN_ACL_UNSAFE,
                                    ZOO_EPHEMERAL_SEQUENTIAL, on_created, q));
    return zrc == ZOK ? q : req_not_sent(q, zrc, rc);
}

dlock__zreq *dlock__zreq_delete(dlock__zconn *c, const char *path, int *rc)
{
    dlock__zreq *q = req_new(c);
    if (q == NULL)
        return *rc = ZSYSTEMERROR, NULL;
    int zrc = start(c, zoo_adelete(ZH, path, -1, on_void, q));
    return zrc == ZOK ? q : req_not_sent(q, zrc, rc);
}

dlock__zreq *dlock__zreq_exists(dlock__zconn *c, const char *path, int *rc)
{
    dlock__zreq *q = req_new(c);
    if (q == NULL)
        return *rc = ZSYSTEMERROR, NULL;
    int zrc = start(c, zoo_aexists(ZH, path, 0, on_stat, q));
    return zrc == ZOK ? q : req_not_sent(q, zrc, rc);
}

dlock__zreq *dlock__zreq_get(dlock__zconn *c, const char *path, int *rc)
{
    dlock__zreq *q = req_new(c);
    if (q == NULL)
        return *rc = ZSYSTEMERROR, NULL;
    int zrc = start(c, zoo_aget(ZH, path, 0, on_data, q));
    return zrc == ZOK ? q : req_not_sent(q, zrc, rc);
}

dlock__zreq *dlock__zreq_children(dlock__zconn *c, const char *path, int *rc)
{
    dlock__zreq *q = req_new(c);
    if (q == NULL)
        return *rc = ZSYSTEMERROR, NULL;
    int zrc = start(c, zoo_aget_children(ZH, path, 0, on_children, q));
    return zrc == ZOK ? q : req_not_sent(q, zrc, rc);
}

/* A predecessor watch fired (or the session changed). */
static void watch_fired(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zwatch *w = ctx;
    dlock__zconn *c = w->conn;

    (void) zh, (void) path;
    if (type == ZOO_SESSION_EVENT && state != ZOO_EXPIRED_SESSION_STATE &&
        state != ZOO_AUTH_FAILED_STATE)
        return; /* disconnected or reconnected: the watch stays */
    recheck(c, w->token);
    pthread_mutex_lock(&c->mu);
    w->next->prev = w->prev;
    w->prev->next = w->next;
    pthread_mutex_unlock(&c->mu);
    free(w);
}

/* A watch context, linked to its connection. */
static zwatch *watch_new(dlock__zconn *c, const char *token)
{
    zwatch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->conn = c;
    snprintf(w->token, sizeof w->token, "%s", token);
    pthread_mutex_lock(&c->mu);
    w->next = c->watches.next;
    w->prev = &c->watches;
    c->watches.next->prev = w;
    c->watches.next = w;
    pthread_mutex_unlock(&c->mu);
    return w;
}

/* The request that would have set w failed (a missing node sets no watch). */
static void watch_unset(zwatch *w)
{
    dlock__zconn *c = w->conn;
    pthread_mutex_lock(&c->mu);
    w->next->prev = w->prev;
    w->prev->next = w->next;
    pthread_mutex_unlock(&c->mu);
    free(w);
}

/* A request that sets a watch: the context goes if the watch was not set. */
typedef struct watch_req {
    dlock__zreq *q;
    zwatch *w;
} watch_req;

static void on_watch_data(int rc, const char *value, int len, const struct Stat *stat,
                          const void *data)
{
    watch_req *wr = (watch_req *) data;
    dlock__zreq *q = wr->q;
    if (rc != ZOK)
        watch_unset(wr->w);
    free(wr);
    on_data(rc, value, len, stat, q);
}

static void on_watch_children(int rc, const struct String_vector *v, const void *data)
{
    watch_req *wr = (watch_req *) data;
    dlock__zreq *q = wr->q;
    if (rc != ZOK)
        watch_unset(wr->w);
    free(wr);
    on_children(rc, v, q);
}

static dlock__zreq *watched(dlock__zconn *c, const char *path, const char *token, int children,
                            int *rc)
{
    dlock__zreq *q = req_new(c);
    zwatch *w = q != NULL ? watch_new(c, token) : NULL;
    watch_req *wr = w != NULL ? malloc(sizeof *wr) : NULL;

    if (wr == NULL) {
        if (w != NULL)
            watch_unset(w);
        if (q != NULL)
            return req_not_sent(q, ZSYSTEMERROR, rc);
        return *rc = ZSYSTEMERROR, NULL;
    }
    wr->q = q;
    wr->w = w;
    int zrc = children
                  ? start(c, zoo_awget_children(ZH, path, watch_fired, w, on_watch_children, wr))
                  : start(c, zoo_awget(ZH, path, watch_fired, w, on_watch_data, wr));
    if (zrc == ZOK)
        return q;
    watch_unset(w);
    free(wr);
    return req_not_sent(q, zrc, rc);
}

dlock__zreq *dlock__zreq_watch(dlock__zconn *c, const char *path, const char *token, int *rc)
{
    return watched(c, path, token, 0, rc);
}

dlock__zreq *dlock__zreq_watch_children(dlock__zconn *c, const char *path, const char *token,
                                        int *rc)
{
    return watched(c, path, token, 1, rc);
}

static char *keep(dlock__zreq *q, const char *s, int len)
{
    if (s == NULL)
        return NULL;
    char *copy = malloc(len >= 0 ? (size_t) len + 1 : strlen(s) + 1);
    if (copy == NULL)
        return NULL;
    if (len >= 0) {
        memcpy(copy, s, (size_t) len);
        copy[len] = '\0';
    } else {
        strcpy(copy, s);
    }
    q->strings[q->nstrings++] = copy;
    return copy;
}

dlock__zreq *dlock__zreq_multi(dlock__zconn *c, int n, const zoo_op_t *ops, int *rc)
{
    dlock__zreq *q = req_new(c);
    if (q == NULL)
        return *rc = ZSYSTEMERROR, NULL;
    q->ops = calloc((size_t) n, sizeof *q->ops);
    q->results = calloc((size_t) n, sizeof *q->results);
    q->strings = calloc((size_t) n * 3, sizeof *q->strings);
    if (q->ops == NULL || q->results == NULL || q->strings == NULL)
        return req_not_sent(q, ZSYSTEMERROR, rc);
    q->res.nops = n;
    for (int i = 0; i < n; i++) {
        q->ops[i] = ops[i];
        if (is_create(&ops[i])) {
            q->ops[i].create_op.path = keep(q, ops[i].create_op.path, -1);
            q->ops[i].create_op.data = keep(q, ops[i].create_op.data, ops[i].create_op.datalen);
            q->ops[i].create_op.buflen = ops[i].create_op.buflen;
            q->ops[i].create_op.buf = malloc((size_t) ops[i].create_op.buflen);
            if (q->ops[i].create_op.buf != NULL)
                q->strings[q->nstrings++] = q->ops[i].create_op.buf;
            if (q->ops[i].create_op.path == NULL || q->ops[i].create_op.buf == NULL ||
                (ops[i].create_op.data != NULL && q->ops[i].create_op.data == NULL))
                return req_not_sent(q, ZSYSTEMERROR, rc);
            q->results[i].value = q->ops[i].create_op.buf;
            q->results[i].valuelen = q->ops[i].create_op.buflen;
        } else if (ops[i].type == ZOO_DELETE_OP) {
            q->ops[i].delete_op.path = keep(q, ops[i].delete_op.path, -1);
            if (q->ops[i].delete_op.path == NULL)
                return req_not_sent(q, ZSYSTEMERROR, rc);
        }
    }
    /* zoo_amulti (3.8) does not refuse a session that is over: it fails to
     * marshal, leaking its parts */
    int zrc = start(c, zoo_state(ZH) == ZOO_EXPIRED_SESSION_STATE ||
                               zoo_state(ZH) == ZOO_AUTH_FAILED_STATE
                           ? ZINVALIDSTATE
                           : zoo_amulti(ZH, n, q->ops, q->results, on_multi, q));
    return zrc == ZOK ? q : req_not_sent(q, zrc, rc);
}

int dlock__zreq_wait(dlock__zreq *q, int64_t deadline_us, dlock__zresult *out)
{
    memset(out, 0, sizeof *out);
    if (q == NULL) {
        out->rc = ZSYSTEMERROR;
        return out->rc;
    }
    struct timespec until = dlock__timespec(deadline_us);
    pthread_mutex_lock(&q->mu);
    while (!q->done && pthread_cond_timedwait(&q->cv, &q->mu, &until) != ETIMEDOUT)
        ;
    if (q->done) {
        *out = q->res;
        memset(&q->res, 0, sizeof q->res);
    } else {
        out->rc = ZOPERATIONTIMEOUT;
        q->abandoned = 1; /* its completion disposes of what it made */
    }
    pthread_mutex_unlock(&q->mu);
    req_unref(q);
    return out->rc;
}

/* ---------------------------------------------------------------- errors */

int dlock__zk_fail(int zrc, const char *label, const char *what)
{
    int code;
    switch (zrc) {
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZCLOSING:
    case ZSESSIONEXPIRED:
    case ZSESSIONMOVED:
    case ZINVALIDSTATE:
        code = DLOCK_EUNREACHABLE;
        break;
    case ZNOAUTH:
    case ZAUTHFAILED:
        code = DLOCK_ESERVER;
        break;
    case ZBADARGUMENTS:
        code = DLOCK_EINVAL;
        break;
    case ZSYSTEMERROR:
        code = DLOCK_ENOMEM;
        break;
    default:
        code = DLOCK_ESERVER;
        break;
    }
    return dlock__fail(code, "%s: %s: %s", label, what,
                       zrc == ZOPERATIONTIMEOUT ? "no reply within the command timeout"
                                                : zerror(zrc));
}
