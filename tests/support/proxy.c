/* SPDX-License-Identifier: MIT */
/* proxy.c - the fault proxy (see proxy.h).
 *
 * One forked process, one thread, one poll() loop over: the control
 * socket, each link's listening socket, and both sockets of every proxied
 * connection. What a link's mode does is only which events are polled:
 *
 *   pass       read each side into its buffer, write each buffer to the
 *              other side;
 *   blackhole  poll nothing on the link's connections: bytes stay in the
 *              kernel's buffers and ours, both peers see silence; a
 *              connection accepted meanwhile connects upstream on heal;
 *   drop       read both sides and throw the bytes away, remembering that
 *              the connection lost some (it is reset on heal);
 *   cut        reset every connection (SO_LINGER 0 + close sends RST) and
 *              close the listening socket, so connects are refused; it is
 *              bound again to the same port when the link leaves cut.
 *
 * A link's delay holds what the server sends for that long before the
 * client gets it: each read from upstream is a segment due at its arrival
 * plus the delay, and only segments that are due are written on.
 *
 * The control protocol is one line each way: "set LINK MODE" -> "ok",
 * "reset LINK" -> "ok", "count LINK" -> "N", "delay LINK MS" -> "ok",
 * "sent LINK" -> "CHUNKS BYTES", "accepted LINK" -> "N". A mode is in
 * effect when its "ok" is sent. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CONNS 512
#define BUF_SIZE  (64 * 1024)
#define MAX_SEGS  256

typedef struct pipe_buf {
    size_t len;
    char data[BUF_SIZE];
    /* server -> client: the bytes in arrival order, each read a segment
     * with the time it may go on (the link's delay) */
    size_t nsegs;
    struct {
        int64_t due_ms;
        size_t len;
    } segs[MAX_SEGS];
} pipe_buf;

typedef struct conn {
    int used;
    int link;
    int cfd;          /* client side */
    int ufd;          /* upstream side, -1 until connected or connecting */
    int connecting;   /* non-blocking connect to upstream in progress */
    int dropped;      /* bytes were thrown away: the stream is broken */
    pipe_buf *to_up;  /* client -> upstream */
    pipe_buf *to_cli; /* upstream -> client */
} conn;

typedef struct proxy_state {
    int control;
    int links;
    int upstream_port;
    int ports[DT_PROXY_MAX_LINKS];
    int listeners[DT_PROXY_MAX_LINKS];
    dt_proxy_mode modes[DT_PROXY_MAX_LINKS];
    int delay_ms[DT_PROXY_MAX_LINKS];
    long long chunks[DT_PROXY_MAX_LINKS], bytes[DT_PROXY_MAX_LINKS]; /* clients -> server */
    long long accepted[DT_PROXY_MAX_LINKS];
    conn conns[MAX_CONNS];
} proxy_state;

const char *dt_proxy_mode_name(dt_proxy_mode mode)
{
    switch (mode) {
    case DT_PASS:
        return "pass";
    case DT_BLACKHOLE:
        return "blackhole";
    case DT_DROP:
        return "drop";
    case DT_CUT:
        return "cut";
    }
    return "?";
}

static int listen_on(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t) port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(fd, 128) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void reset_fd(int fd)
{
    struct linger lg = {1, 0};
    if (fd < 0)
        return;
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void conn_close(conn *c, int reset)
{
    if (reset) {
        reset_fd(c->cfd);
        reset_fd(c->ufd);
    } else {
        close(c->cfd);
        if (c->ufd >= 0)
            close(c->ufd);
    }
    free(c->to_up);
    free(c->to_cli);
    memset(c, 0, sizeof *c);
    c->cfd = c->ufd = -1;
}

static void connect_upstream(proxy_state *st, conn *c)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t) st->upstream_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    c->ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->ufd < 0) {
        conn_close(c, 1);
        return;
    }
    setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->ufd, (struct sockaddr *) &a, sizeof a) == 0)
        c->connecting = 0;
    else if (errno == EINPROGRESS)
        c->connecting = 1;
    else
        conn_close(c, 1); /* the server is down: the client sees a reset */
}

static void accept_on(proxy_state *st, int link)
{
    for (;;) {
        int one = 1;
        int fd = accept4(st->listeners[link], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        conn *c = NULL;
        for (int i = 0; i < MAX_CONNS; i++) {
            if (!st->conns[i].used) {
                c = &st->conns[i];
                break;
            }
        }
        if (c == NULL) {
            reset_fd(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        st->accepted[link]++;
        memset(c, 0, sizeof *c);
        c->used = 1;
        c->link = link;
        c->cfd = fd;
        c->ufd = -1;
        c->to_up = malloc(sizeof *c->to_up);
        c->to_cli = malloc(sizeof *c->to_cli);
        if (c->to_up == NULL || c->to_cli == NULL) {
            conn_close(c, 1);
            continue;
        }
        c->to_up->len = c->to_cli->len = 0;
        c->to_up->nsegs = c->to_cli->nsegs = 0;
        if (st->modes[link] == DT_PASS)
            connect_upstream(st, c);
    }
}

static void set_mode(proxy_state *st, int link, dt_proxy_mode mode)
{
    dt_proxy_mode old = st->modes[link];
    st->modes[link] = mode;
    for (int i = 0; i < MAX_CONNS; i++) {
        conn *c = &st->conns[i];
        if (!c->used || c->link != link)
            continue;
        if (mode == DT_CUT || (mode == DT_PASS && c->dropped))
            conn_close(c, 1);
        else if (mode == DT_PASS && c->ufd < 0)
            connect_upstream(st, c);
    }
    if (mode == DT_CUT && st->listeners[link] >= 0) {
        close(st->listeners[link]);
        st->listeners[link] = -1;
    }
    if (old == DT_CUT && mode != DT_CUT && st->listeners[link] < 0) {
        /* The port is ours again at once unless someone took it meanwhile:
         * try for a while rather than fail on a TIME_WAIT hiccup. */
        for (int tries = 0; tries < 200 && st->listeners[link] < 0; tries++) {
            st->listeners[link] = listen_on(st->ports[link]);
            if (st->listeners[link] < 0)
                usleep(10000);
        }
    }
}

/* Moves bytes from fd into b (or throws them away); returns -1 on EOF or
 * error, else the number of bytes read. */
static ssize_t pull(int fd, pipe_buf *b, int discard, int *dropped)
{
    char scratch[BUF_SIZE];
    char *dst = discard ? scratch : b->data + b->len;
    size_t room = discard ? sizeof scratch : BUF_SIZE - b->len;
    if (room == 0)
        return 0;
    ssize_t n = read(fd, dst, room);
    if (n == 0)
        return -1;
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (discard)
        *dropped = 1;
    else
        b->len += (size_t) n;
    return n;
}

/* The bytes of b that may go on now: all of them but the segments not due. */
static size_t due_len(const pipe_buf *b, int64_t now_ms)
{
    size_t held = 0;
    for (size_t i = 0; i < b->nsegs; i++) {
        if (b->segs[i].due_ms > now_ms)
            held += b->segs[i].len;
    }
    return held < b->len ? b->len - held : 0;
}

/* Writes what of b is due to fd; -1 on error, else 0. */
static int push(int fd, pipe_buf *b)
{
    size_t len = due_len(b, dt_now_ms());
    if (len == 0)
        return 0;
    ssize_t n = send(fd, b->data, len, MSG_NOSIGNAL);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    memmove(b->data, b->data + n, b->len - (size_t) n);
    b->len -= (size_t) n;
    /* the segments written (those of bytes without one went first) */
    size_t untracked = b->len + (size_t) n, left = (size_t) n;
    for (size_t i = 0; i < b->nsegs; i++)
        untracked -= b->segs[i].len;
    left -= left < untracked ? left : untracked;
    while (left > 0 && b->nsegs > 0) {
        size_t take = left < b->segs[0].len ? left : b->segs[0].len;
        b->segs[0].len -= take;
        left -= take;
        if (b->segs[0].len == 0)
            memmove(b->segs, b->segs + 1, --b->nsegs * sizeof b->segs[0]);
    }
    return 0;
}

static void answer(proxy_state *st, const char *line)
{
    char reply[64];
    int link, mode;
    if (sscanf(line, "set %d %d", &link, &mode) == 2 && link >= 0 && link < st->links &&
        mode >= DT_PASS && mode <= DT_CUT) {
        set_mode(st, link, (dt_proxy_mode) mode);
        snprintf(reply, sizeof reply, "ok\n");
    } else if (sscanf(line, "reset %d", &link) == 1 && link >= 0 && link < st->links) {
        for (int i = 0; i < MAX_CONNS; i++) {
            if (st->conns[i].used && st->conns[i].link == link)
                conn_close(&st->conns[i], 1);
        }
        snprintf(reply, sizeof reply, "ok\n");
    } else if (sscanf(line, "delay %d %d", &link, &mode) == 2 && link >= 0 && link < st->links &&
               mode >= 0) {
        st->delay_ms[link] = mode;
        snprintf(reply, sizeof reply, "ok\n");
    } else if (sscanf(line, "sent %d", &link) == 1 && link >= 0 && link < st->links) {
        snprintf(reply, sizeof reply, "%lld %lld\n", st->chunks[link], st->bytes[link]);
    } else if (sscanf(line, "accepted %d", &link) == 1 && link >= 0 && link < st->links) {
        snprintf(reply, sizeof reply, "%lld\n", st->accepted[link]);
    } else if (sscanf(line, "count %d", &link) == 1) {
        int n = 0;
        for (int i = 0; i < MAX_CONNS; i++)
            n += st->conns[i].used && (link < 0 || st->conns[i].link == link);
        snprintf(reply, sizeof reply, "%d\n", n);
    } else {
        snprintf(reply, sizeof reply, "error\n");
    }
    if (write(st->control, reply, strlen(reply)) < 0)
        _exit(0);
}

static void serve(proxy_state *st)
{
    static struct pollfd fds[2 * MAX_CONNS + DT_PROXY_MAX_LINKS + 1];
    static int owner[2 * MAX_CONNS + DT_PROXY_MAX_LINKS + 1]; /* conn index, or -1-link */
    char line[128];
    size_t line_len = 0;

    for (;;) {
        int n = 0;
        int64_t now_ms = dt_now_ms(), wake_ms = -1; /* the next delayed segment due */
        fds[n] = (struct pollfd){st->control, POLLIN, 0};
        owner[n++] = -1000;
        for (int l = 0; l < st->links; l++) {
            if (st->listeners[l] >= 0) {
                fds[n] = (struct pollfd){st->listeners[l], POLLIN, 0};
                owner[n++] = -1 - l;
            }
        }
        for (int i = 0; i < MAX_CONNS; i++) {
            conn *c = &st->conns[i];
            dt_proxy_mode m;
            if (!c->used)
                continue;
            m = st->modes[c->link];
            if (m == DT_BLACKHOLE || c->ufd < 0) {
                /* blackhole, or drop before upstream connected: the
                 * client's bytes wait (drop reads and discards below) */
                if (m == DT_DROP) {
                    fds[n] = (struct pollfd){c->cfd, POLLIN, 0};
                    owner[n++] = i;
                }
                continue;
            }
            short ce = 0, ue = 0;
            if (m == DT_DROP) {
                ce = ue = POLLIN;
            } else if (c->connecting) {
                ue = POLLOUT;
            } else {
                if (c->to_up->len < BUF_SIZE)
                    ce |= POLLIN;
                if (c->to_cli->len < BUF_SIZE && c->to_cli->nsegs < MAX_SEGS)
                    ue |= POLLIN;
                if (c->to_up->len > 0)
                    ue |= POLLOUT;
                if (due_len(c->to_cli, now_ms) > 0)
                    ce |= POLLOUT;
                for (size_t g = 0; g < c->to_cli->nsegs; g++) {
                    int64_t due = c->to_cli->segs[g].due_ms;
                    if (due > now_ms && (wake_ms < 0 || due - now_ms < wake_ms))
                        wake_ms = due - now_ms;
                }
            }
            fds[n] = (struct pollfd){c->cfd, ce, 0};
            owner[n++] = i;
            fds[n] = (struct pollfd){c->ufd, ue, 0};
            owner[n++] = i;
        }
        if (poll(fds, (nfds_t) n, (int) wake_ms) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        for (int k = 0; k < n; k++) {
            if (fds[k].revents == 0)
                continue;
            if (owner[k] == -1000) {
                ssize_t got = read(st->control, line + line_len, sizeof line - 1 - line_len);
                if (got <= 0)
                    _exit(0); /* the test is gone */
                line_len += (size_t) got;
                line[line_len] = '\0';
                char *nl;
                while ((nl = strchr(line, '\n')) != NULL) {
                    *nl = '\0';
                    answer(st, line);
                    line_len -= (size_t) (nl + 1 - line);
                    memmove(line, nl + 1, line_len + 1);
                }
                /* A mode change may have closed fds polled later in this
                 * round: poll again. */
                break;
            }
            if (owner[k] < 0) {
                accept_on(st, -1 - owner[k]);
                continue;
            }
            conn *c = &st->conns[owner[k]];
            if (!c->used)
                continue;
            int is_client = fds[k].fd == c->cfd;
            int fd = fds[k].fd, bad = 0;
            if (st->modes[c->link] == DT_DROP) {
                if (fds[k].revents & (POLLIN | POLLHUP | POLLERR))
                    bad = pull(fd, NULL, 1, &c->dropped) < 0;
            } else if (!is_client && c->connecting) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err != 0)
                    bad = 1;
                else
                    c->connecting = 0;
            } else {
                pipe_buf *in = is_client ? c->to_up : c->to_cli;
                pipe_buf *out = is_client ? c->to_cli : c->to_up;
                ssize_t got = 0;
                if (fds[k].revents & (POLLIN | POLLHUP | POLLERR))
                    got = pull(fd, in, 0, NULL);
                if (got < 0) {
                    bad = 1;
                } else if (got > 0 && is_client) {
                    st->chunks[c->link]++;
                    st->bytes[c->link] += got;
                } else if (got > 0 && in->nsegs < MAX_SEGS) {
                    in->segs[in->nsegs].due_ms = dt_now_ms() + st->delay_ms[c->link];
                    in->segs[in->nsegs++].len = (size_t) got;
                }
                if (!bad && (fds[k].revents & POLLOUT) && push(fd, out) != 0)
                    bad = 1;
            }
            if (bad) {
                /* One side ended: hand over what it said, then end the other. */
                if (c->ufd >= 0 && !c->connecting)
                    push(c->ufd, c->to_up);
                push(c->cfd, c->to_cli);
                conn_close(c, 1);
            }
        }
    }
}

void dt_proxy_start(dt_proxy *p, int upstream_port, int links)
{
    int sv[2];
    static proxy_state st; /* big: not on the stack */

    if (links < 1 || links > DT_PROXY_MAX_LINKS)
        dt_fail(__FILE__, __LINE__, "proxy: %d links", links);
    memset(p, 0, sizeof *p);
    p->links = links;
    p->upstream_port = upstream_port;
    for (int l = 0; l < links; l++) {
        int fd = -1;
        /* dt_free_port() then listen: retry if the port was taken between */
        for (int tries = 0; tries < 20 && fd < 0; tries++) {
            p->ports[l] = dt_free_port();
            fd = listen_on(p->ports[l]);
        }
        if (fd < 0)
            dt_fail(__FILE__, __LINE__, "proxy: cannot listen: %s", strerror(errno));
        st.listeners[l] = fd;
        st.ports[l] = p->ports[l];
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        dt_fail(__FILE__, __LINE__, "proxy: socketpair: %s", strerror(errno));
    fflush(NULL);
    /* the child never writes to p (it may be in memory shared with it) */
    pid_t pid = fork();
    if (pid < 0)
        dt_fail(__FILE__, __LINE__, "proxy: fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        prctl(PR_SET_NAME, "dt_proxy");
        signal(SIGPIPE, SIG_IGN);
        /* Keep only our sockets: a copy of a test's client connection held
         * here would outlive the client. */
        for (int fd = 3; fd < 1024; fd++) {
            int ours = fd == sv[1];
            for (int l = 0; l < links; l++)
                ours |= fd == st.listeners[l];
            if (!ours)
                close(fd);
        }
        st.control = sv[1];
        st.links = links;
        st.upstream_port = upstream_port;
        for (int i = 0; i < MAX_CONNS; i++)
            st.conns[i].cfd = st.conns[i].ufd = -1;
        serve(&st);
        _exit(0);
    }
    p->pid = pid;
    close(sv[1]);
    for (int l = 0; l < links; l++)
        close(st.listeners[l]);
    p->control = sv[0];
    dt_track_pid(p->pid);
}

static void request(dt_proxy *p, const char *cmd, char *reply, size_t len)
{
    size_t used = 0;
    struct timeval tv = {10, 0};
    if (p->pid <= 0)
        dt_fail(__FILE__, __LINE__, "proxy is not running");
    setsockopt(p->control, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write(p->control, cmd, strlen(cmd)) != (ssize_t) strlen(cmd))
        dt_fail(__FILE__, __LINE__, "proxy: control write: %s", strerror(errno));
    while (used + 1 < len) {
        ssize_t n = read(p->control, reply + used, 1);
        if (n <= 0)
            dt_fail(__FILE__, __LINE__, "proxy (pid %d) did not answer '%.*s'", (int) p->pid,
                    (int) strlen(cmd) - 1, cmd);
        if (reply[used] == '\n')
            break;
        used++;
    }
    reply[used] = '\0';
}

void dt_proxy_set(dt_proxy *p, int link, dt_proxy_mode mode)
{
    char cmd[64], reply[64];
    for (int l = 0; l < p->links; l++) {
        if (link >= 0 && l != link)
            continue;
        snprintf(cmd, sizeof cmd, "set %d %d\n", l, (int) mode);
        request(p, cmd, reply, sizeof reply);
        if (strcmp(reply, "ok") != 0)
            dt_fail(__FILE__, __LINE__, "proxy: %s", reply);
        p->modes[l] = mode;
    }
}

void dt_proxy_reset(dt_proxy *p, int link)
{
    char cmd[64], reply[64];
    for (int l = 0; l < p->links; l++) {
        if (link >= 0 && l != link)
            continue;
        snprintf(cmd, sizeof cmd, "reset %d\n", l);
        request(p, cmd, reply, sizeof reply);
        if (strcmp(reply, "ok") != 0)
            dt_fail(__FILE__, __LINE__, "proxy: %s", reply);
    }
}

int dt_proxy_connections(dt_proxy *p, int link)
{
    char cmd[64], reply[64];
    snprintf(cmd, sizeof cmd, "count %d\n", link);
    request(p, cmd, reply, sizeof reply);
    return atoi(reply);
}

void dt_proxy_delay(dt_proxy *p, int link, int ms)
{
    char cmd[64], reply[64];
    for (int l = 0; l < p->links; l++) {
        if (link >= 0 && l != link)
            continue;
        snprintf(cmd, sizeof cmd, "delay %d %d\n", l, ms);
        request(p, cmd, reply, sizeof reply);
        if (strcmp(reply, "ok") != 0)
            dt_fail(__FILE__, __LINE__, "proxy: %s", reply);
    }
}

void dt_proxy_sent(dt_proxy *p, int link, long long *chunks, long long *bytes)
{
    char cmd[64], reply[64];
    long long c = 0, b = 0;
    snprintf(cmd, sizeof cmd, "sent %d\n", link);
    request(p, cmd, reply, sizeof reply);
    if (sscanf(reply, "%lld %lld", &c, &b) != 2)
        dt_fail(__FILE__, __LINE__, "proxy: %s", reply);
    if (chunks != NULL)
        *chunks = c;
    if (bytes != NULL)
        *bytes = b;
}

long long dt_proxy_accepted(dt_proxy *p, int link)
{
    char cmd[64], reply[64];
    snprintf(cmd, sizeof cmd, "accepted %d\n", link);
    request(p, cmd, reply, sizeof reply);
    return atoll(reply);
}

void dt_proxy_stop(dt_proxy *p)
{
    if (p->pid <= 0)
        return;
    close(p->control);
    dt_kill_reap(p->pid);
    dt_untrack_pid(p->pid);
    p->pid = 0;
}
