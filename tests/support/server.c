/* SPDX-License-Identifier: MIT */
/* server.c - dt_server: what every kind of server has in common (see
 * server.h; each kind's specifics are in server_<kind>.c).
 *
 * A server is a child of the test process, run with exec (no shell) in
 * its own temp dir, stdout and stderr to DIR/server.log. Its pid is the
 * only handle on it: stop, kill, pause and resume are signals to that pid,
 * and a stopped server is always reaped, so a port is free again when
 * dt_server_stop() returns. */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const dt_server_kind *const kinds[] = {
    &dt__redis_kind,      &dt__zookeeper_kind,    &dt__etcd_kind,    &dt__postgres_kind,
    &dt__sqlite_kind,     &dt__sentinel_kind,     &dt__mariadb_kind, &dt__redlock_kind,
    &dt__redis_tls_kind,  &dt__sentinel_tls_kind, &dt__cluster_kind, &dt__cluster_tls_kind,
    &dt__redlock_tls_kind};
#define NKINDS (sizeof kinds / sizeof kinds[0])

const char *const *dt_server_kinds(void)
{
    static const char *names[NKINDS + 1];
    for (size_t i = 0; i < NKINDS; i++)
        names[i] = kinds[i]->name;
    return names;
}

static const dt_server_kind *find_kind(const char *name)
{
    for (size_t i = 0; i < NKINDS; i++) {
        if (strcmp(kinds[i]->name, name) == 0)
            return kinds[i];
    }
    /* short names people type */
    if (strcmp(name, "zk") == 0)
        return &dt__zookeeper_kind;
    return NULL;
}

int dt_server_kind_is_group(const char *name)
{
    const dt_server_kind *k = find_kind(name);
    return k == NULL ? -1 : k->group_start != NULL;
}

/* ---------------------------------------------------------------- helpers */

int dt__tcp_connect(int port, int timeout_ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t) port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *) &a, sizeof a) != 0) {
        struct pollfd pfd = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (errno != EINPROGRESS || poll(&pfd, 1, timeout_ms) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            close(fd);
            return -1;
        }
    }
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

int dt__run_quiet(const char *const *argv, int timeout_ms)
{
    int status;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execvp(argv[0], (char *const *) argv);
        _exit(127);
    }
    int64_t until = dt_now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0 && errno != EINTR)
            return -1;
        if (dt_now_ms() > until) {
            dt_kill_reap(pid);
            return -1;
        }
        dt_sleep_ms(2);
    }
}

void dt__remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        char child[1024];
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            dt__remove_tree(child);
        }
        if (d != NULL)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* ---------------------------------------------------------------- lifecycle */

static int reap_nohang(dt_server *s)
{
    int status;
    if (s->pid > 0 && waitpid(s->pid, &status, WNOHANG) == s->pid) {
        dt_untrack_pid(s->pid);
        s->pid = 0;
        s->paused = 0;
        return 1;
    }
    return 0;
}

/* Forks and execs the server; returns at once. */
static void spawn(dt_server *s)
{
    const char *argv[64];
    char bufs[16][256];
    char log[200];

    s->kind->argv(s, argv, bufs);
    snprintf(log, sizeof log, "%s/server.log", s->dir);
    const char *const *env = s->kind->env != NULL ? s->kind->env(s) : NULL;

    fflush(NULL);
    /* The child never writes to s: s may be in memory shared with it (the
     * conformance runner's), where its fork() result 0 would overwrite
     * the pid the parent keeps. */
    pid_t pid = fork();
    if (pid < 0)
        dt_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* The server goes when the test goes, however it ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Its own process group: a terminal's ^C reaches the test, which
         * stops it, not the server behind its back. */
        setpgid(0, 0);
        /* Signals the starter blocks (build/bin/store waits for SIGTERM and
         * SIGINT in sigwaitinfo) must reach the server: a blocked SIGTERM
         * is inherited through exec, and `kill PID` would do nothing. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        if (in >= 0)
            dup2(in, 0);
        if (chdir(s->dir) != 0)
            _exit(126);
        for (int i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *) env[i]);
        execvp(argv[0], (char *const *) argv);
        _exit(127);
    }
    s->pid = pid;
    s->paused = 0;
    dt_track_pid(s->pid);
}

/* Ports handed out to one server or ensemble: dt_free_port() may give a
 * port twice, since it releases what it found. */
typedef struct port_set {
    int n;
    int ports[3 * DT_ENSEMBLE_MAX];
} port_set;

static int new_port(port_set *ps)
{
    int p, again;
    do {
        p = dt_free_port();
        again = 0;
        for (int i = 0; i < ps->n; i++)
            again |= ps->ports[i] == p;
    } while (again);
    ps->ports[ps->n++] = p;
    return p;
}

/* Adds to `inodes` the socket inodes listening on TCP `port` in one of
 * /proc/net/tcp or tcp6 (hex "local_address:port", state 0A). */
static int listening_inodes(const char *table, int port, unsigned long *inodes, int n, int max)
{
    FILE *f = fopen(table, "r");
    char line[512];
    if (f == NULL)
        return n;
    while (fgets(line, sizeof line, f) != NULL && n < max) {
        char local[128], remote[128], state[8];
        unsigned long inode;
        unsigned lport;
        /* sl local remote st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %127s %127s %7s %*s %*s %*s %*s %*s %lu", local, remote, state,
                   &inode) != 4)
            continue;
        const char *colon = strrchr(local, ':');
        if (colon == NULL || sscanf(colon + 1, "%x", &lport) != 1)
            continue;
        if ((int) lport == port && strcmp(state, "0A") == 0)
            inodes[n++] = inode;
    }
    fclose(f);
    return n;
}

/* Whether what listens on the server's port is the server we started:
 * another process (a server of the same kind left by someone else) may
 * hold the port, answer the kind's check, and make ours exit at start.
 * 1 when it is ours or cannot be told (no /proc). */
static int listener_is_ours(const dt_server *s)
{
    unsigned long inodes[16];
    int n = listening_inodes("/proc/net/tcp", s->port, inodes, 0, 16);
    n = listening_inodes("/proc/net/tcp6", s->port, inodes, n, 16);
    if (n == 0 || s->port == 0)
        return 1; /* a unix socket, or no /proc: the kind's check decides */
    char dir[64], path[400], target[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int) s->pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0; /* gone, or not ours to read */
    int ours = 0;
    for (struct dirent *e; !ours && (e = readdir(d)) != NULL;) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        unsigned long inode;
        if (sscanf(target, "socket:[%lu]", &inode) != 1)
            continue;
        for (int i = 0; i < n; i++)
            ours |= inodes[i] == inode;
    }
    closedir(d);
    return ours;
}

/* Waits until a spawned server answers on its port, and the listener
 * there is that server, at most until `until`: 1, or 0 if it exited
 * (reaped). */
static int wait_answers(dt_server *s, int64_t until)
{
    while (!s->kind->answers(s) || !listener_is_ours(s)) {
        if (reap_nohang(s))
            return 0;
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__, "%s on port %d did not answer in %d ms (log %s/server.log)",
                    s->kind->name, s->port, s->kind->start_timeout_ms, s->dir);
        dt_sleep_ms(10);
    }
    return 1;
}

static off_t log_size(const dt_server *s)
{
    char log[200];
    struct stat st;
    snprintf(log, sizeof log, "%s/server.log", s->dir);
    return stat(log, &st) == 0 ? st.st_size : 0;
}

/* Whether what the server logged from offset `from` on says a port of its
 * was taken (every kind's words for EADDRINUSE). */
static int port_was_taken(const dt_server *s, off_t from)
{
    char log[200], buf[8192];
    snprintf(log, sizeof log, "%s/server.log", s->dir);
    int fd = open(log, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    for (char *p = buf; *p != '\0'; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char) (*p - 'A' + 'a');
    return strstr(buf, "already in use") != NULL;
}

/* Starts the server. dt_free_port() checks a port is free, but another
 * process (another test, a client's local end) can take it before the
 * server binds it: a first start that failed so takes new ports, up to 3
 * times (a restart keeps its port: tests reach the server there). */
static void launch(dt_server *s, int first)
{
    if (s->kind->file != NULL)
        return; /* serverless: nothing to start */
    for (int tries = 1;; tries++) {
        off_t from = log_size(s);
        spawn(s);
        if (wait_answers(s, dt_now_ms() + s->kind->start_timeout_ms))
            return;
        if (!first || s->ensemble != NULL || tries == 3 || !port_was_taken(s, from))
            dt_fail(__FILE__, __LINE__, "%s exited at start (port %d, log %s/server.log)",
                    s->kind->name, s->port, s->dir);
        port_set taken = {0};
        taken.ports[taken.n++] = s->port;
        if (s->peer_port != 0)
            taken.ports[taken.n++] = s->peer_port;
        if (s->election_port != 0)
            taken.ports[taken.n++] = s->election_port;
        fprintf(stderr, "%s: port %d (or another of its) was taken before it bound it: new ports\n",
                s->kind->name, s->port);
        s->port = new_port(&taken);
        if (s->peer_port != 0)
            s->peer_port = new_port(&taken);
        if (s->election_port != 0)
            s->election_port = new_port(&taken);
        dt_server_url_at(s, s->port, s->url, sizeof s->url);
    }
}

/* Fills s (kind, temp dir, ports, URL) for a server not started yet. */
static void prepare_kind(dt_server *s, const dt_server_kind *kind, unsigned flags,
                         const dt_ensemble *e, int member, port_set *ports)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->flags = flags;
    s->ensemble = e;
    s->member = member;
    dt_make_temp_dir(s->dir, sizeof s->dir);
    if (s->kind->file != NULL) {
        if ((size_t) snprintf(s->url, sizeof s->url, "%s://%s/%s", s->kind->scheme, s->dir,
                              s->kind->file) >= sizeof s->url)
            dt_fail(__FILE__, __LINE__, "temp dir %s too long for a URL", s->dir);
        return;
    }
    s->port = new_port(ports);
    int extra = e != NULL ? s->kind->ensemble_ports : s->kind->needs_peer_port;
    if (extra >= 1)
        s->peer_port = new_port(ports);
    if (extra >= 2)
        s->election_port = new_port(ports);
    dt_server_url_at(s, s->port, s->url, sizeof s->url);
}

static void prepare(dt_server *s, const char *kind, unsigned flags, const dt_ensemble *e,
                    int member, port_set *ports)
{
    const dt_server_kind *k = find_kind(kind);
    if (k == NULL)
        dt_fail(__FILE__, __LINE__, "no server kind '%s'", kind);
    prepare_kind(s, k, flags, e, member, ports);
}

static void add_args(dt_server *s, va_list ap)
{
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL) {
        if (s->nargs == DT_SERVER_MAX_ARGS)
            dt_fail(__FILE__, __LINE__, "more than %d server arguments", DT_SERVER_MAX_ARGS);
        snprintf(s->args[s->nargs++], sizeof s->args[0], "%s", a);
    }
}

void dt_server_start(dt_server *s, const char *kind, unsigned flags, ...)
{
    va_list ap;
    port_set ports = {0};

    prepare(s, kind, flags, NULL, 0, &ports);
    va_start(ap, flags);
    add_args(s, ap);
    va_end(ap);
    launch(s, 1);
    if (s->kind->group_start != NULL)
        s->kind->group_start(s);
}

void dt__server_start_kind(dt_server *s, const dt_server_kind *kind, unsigned flags,
                           const char *const *args)
{
    port_set ports = {0};

    prepare_kind(s, kind, flags, NULL, 0, &ports);
    for (int i = 0; args != NULL && args[i] != NULL; i++) {
        if (s->nargs == DT_SERVER_MAX_ARGS)
            dt_fail(__FILE__, __LINE__, "more than %d server arguments", DT_SERVER_MAX_ARGS);
        snprintf(s->args[s->nargs++], sizeof s->args[0], "%s", args[i]);
    }
    launch(s, 1);
}

static void wait_exit(dt_server *s, int ms)
{
    int64_t until = dt_now_ms() + ms;
    while (s->pid > 0 && !reap_nohang(s)) {
        if (dt_now_ms() > until) {
            fprintf(stderr, "%s (pid %d) did not exit in %d ms: SIGKILL\n", s->kind->name,
                    (int) s->pid, ms);
            dt_server_kill(s);
            return;
        }
        dt_sleep_ms(5);
    }
}

/* The server's children (PostgreSQL's postmaster has a backend per
 * connection, each in a session of its own, so not in the server's
 * process group), at most max of them. */
static int children(const dt_server *s, pid_t *pids, int max)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && n < max && (e = readdir(d)) != NULL) {
        char path[300], buf[512], state = 0;
        pid_t pid = (pid_t) atoi(e->d_name), ppid = 0;
        if (pid <= 0 || pid == s->pid)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *after = strrchr(buf, ')'); /* the name may hold spaces */
        if (after != NULL && sscanf(after + 1, " %c %d", &state, &ppid) == 2 && ppid == s->pid)
            pids[n++] = pid;
    }
    if (d != NULL)
        closedir(d);
    return n;
}

/* A signal to the server and its children: a server of several processes
 * stops and goes on as a whole; a stopped postmaster alone would leave its
 * connections served. The server first: a stopped server starts no more
 * children. */
static void signal_all(const dt_server *s, int sig)
{
    pid_t pids[512];
    kill(s->pid, sig);
    int n = children(s, pids, 512);
    for (int i = 0; i < n; i++)
        kill(pids[i], sig);
}

/* Whether a process has exited (gone, or a zombie: its memory let go). */
static int exited(pid_t pid)
{
    char path[64], buf[512], state = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *after = strrchr(buf, ')');
    return after == NULL || sscanf(after + 1, " %c", &state) != 1 || state == 'Z';
}

static void stop(dt_server *s, int keep)
{
    if (s->kind != NULL && s->kind->group_stop != NULL)
        s->kind->group_stop(s, 0);
    if (s->pid <= 0)
        return;
    if (s->paused)
        dt_server_resume(s);
    if (s->kind->shutdown == NULL || s->kind->shutdown(s, keep) != 0)
        kill(s->pid, SIGTERM);
    wait_exit(s, 10000);
}

void dt_server_stop(dt_server *s)
{
    stop(s, 1);
}

void dt_server_kill(dt_server *s)
{
    if (s->kind != NULL && s->kind->group_stop != NULL)
        s->kind->group_stop(s, 1);
    if (s->pid <= 0)
        return;
    /* The whole server, as a crash of its machine: its children too,
     * found while it is stopped (it starts no more), and gone before it
     * starts again (PostgreSQL's backends outlive a killed postmaster for
     * a moment, and a new postmaster refuses to start beside them). */
    pid_t pids[512];
    kill(s->pid, SIGSTOP);
    int n = children(s, pids, 512);
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++)
        DT_WAIT_UNTIL(exited(pids[i]), 5000);
    dt_kill_reap(s->pid);
    dt_untrack_pid(s->pid);
    s->pid = 0;
    s->paused = 0;
}

void dt_server_pause(dt_server *s)
{
    if (s->pid > 0 && !s->paused) {
        signal_all(s, SIGSTOP);
        s->paused = 1;
        dt_wait_stopped(s->pid);
    }
}

void dt_server_resume(dt_server *s)
{
    if (s->pid > 0 && s->paused) {
        signal_all(s, SIGCONT);
        s->paused = 0;
    }
}

void dt_server_start_again(dt_server *s, unsigned how)
{
    if (s->pid > 0)
        dt_fail(__FILE__, __LINE__, "%s on port %d is still running", s->kind->name, s->port);
    if (how & DT_WIPE)
        s->kind->wipe(s);
    s->restarts++;
    launch(s, 0);
}

void dt_server_restart(dt_server *s, unsigned how)
{
    if (how & DT_KILL)
        dt_server_kill(s);
    else
        stop(s, !(how & DT_WIPE));
    dt_server_start_again(s, how);
}

int dt_server_answers(const dt_server *s)
{
    if (s->kind->file != NULL)
        return 1;
    return s->pid > 0 && !s->paused && s->kind->answers(s);
}

int dt_server_has_process(const dt_server *s)
{
    return s->kind->file == NULL;
}

const char *dt_server_url_at(const dt_server *s, int port, char *buf, size_t len)
{
    if (s->kind->file != NULL) { /* no port to go through */
        if (buf != s->url)
            snprintf(buf, len, "%.*s", (int) sizeof s->url, s->url);
        return buf;
    }
    char options[256] = "";
    if (s->kind->url_options != NULL)
        s->kind->url_options(s, options, sizeof options);
    snprintf(buf, len, "%s://%s127.0.0.1:%d%s%s", s->kind->scheme,
             s->kind->url_auth != NULL ? s->kind->url_auth : "", port,
             s->kind->url_path != NULL ? s->kind->url_path : "", options);
    return buf;
}

/* ---------------------------------------------------------------- ensembles */

/* Every member is prepared (ports for all of them known) before any is
 * started, since each one's configuration names the others; and every
 * one is started before any is waited for, since none answers without a
 * quorum. */
void dt_ensemble_start(dt_ensemble *e, const char *kind, int n, ...)
{
    va_list ap;
    port_set ports = {0};
    size_t used;

    memset(e, 0, sizeof *e);
    if (n < 1 || n > DT_ENSEMBLE_MAX)
        dt_fail(__FILE__, __LINE__, "an ensemble of %d servers (1 to %d)", n, DT_ENSEMBLE_MAX);
    e->n = n;
    for (int i = 0; i < n; i++) {
        dt_server *s = &e->members[i];
        prepare(s, kind, 0, e, i, &ports);
        if (s->kind->ensemble_ports == 0 || s->kind->leads == NULL)
            dt_fail(__FILE__, __LINE__, "%s servers do not form ensembles here", s->kind->name);
        va_start(ap, n);
        add_args(s, ap);
        va_end(ap);
    }
    used = (size_t) snprintf(e->url, sizeof e->url, "%s://", e->members[0].kind->scheme);
    for (int i = 0; i < n && used < sizeof e->url; i++)
        used += (size_t) snprintf(e->url + used, sizeof e->url - used, "%s127.0.0.1:%d",
                                  i > 0 ? "," : "", e->members[i].port);
    for (int i = 0; i < n; i++)
        spawn(&e->members[i]);
    int64_t until = dt_now_ms() + e->members[0].kind->start_timeout_ms;
    for (int i = 0; i < n; i++) {
        if (!wait_answers(&e->members[i], until))
            dt_fail(__FILE__, __LINE__, "%s exited at start (port %d, log %s/server.log)",
                    e->members[i].kind->name, e->members[i].port, e->members[i].dir);
    }
}

void dt_ensemble_stop(dt_ensemble *e)
{
    for (int i = 0; i < e->n; i++)
        dt_server_stop(&e->members[i]);
}

int dt_ensemble_leader(const dt_ensemble *e)
{
    int leader = -1, seen = 0;
    for (int i = 0; i < e->n; i++) {
        const dt_server *s = &e->members[i];
        if (s->pid > 0 && !s->paused && s->kind->leads(s)) {
            leader = i;
            seen++;
        }
    }
    return seen == 1 ? leader : -1;
}

int dt_ensemble_answering(const dt_ensemble *e)
{
    int n = 0;
    for (int i = 0; i < e->n; i++)
        n += dt_server_answers(&e->members[i]);
    return n;
}

static dt_server *member(dt_ensemble *e, int i)
{
    if (i < 0 || i >= e->n)
        dt_fail(__FILE__, __LINE__, "no member %d in an ensemble of %d", i, e->n);
    return &e->members[i];
}

void dt_ensemble_kill(dt_ensemble *e, int i)
{
    dt_server_kill(member(e, i));
}

void dt_ensemble_stop_member(dt_ensemble *e, int i)
{
    dt_server_stop(member(e, i));
}

void dt_ensemble_pause(dt_ensemble *e, int i)
{
    dt_server_pause(member(e, i));
}

void dt_ensemble_resume(dt_ensemble *e, int i)
{
    dt_server_resume(member(e, i));
}

void dt_ensemble_restart(dt_ensemble *e, int i, unsigned how)
{
    dt_server *s = member(e, i);
    if (how & DT_WIPE)
        dt_fail(__FILE__, __LINE__, "an ensemble member restarts with its data (no DT_WIPE)");
    if (how & DT_KILL)
        dt_server_kill(s);
    else
        stop(s, 1);
    dt_server_start_again(s, 0);
}

const char *dt_ensemble_url_from(const dt_ensemble *e, int first, char *buf, size_t len)
{
    size_t used = (size_t) snprintf(buf, len, "%s://", e->members[0].kind->scheme);
    for (int k = 0; k < e->n && used < len; k++) {
        int i = (first + k) % e->n;
        used += (size_t) snprintf(buf + used, len - used, "%s127.0.0.1:%d", k > 0 ? "," : "",
                                  e->members[i].port);
    }
    return buf;
}

/* ---------------------------------------------------------------- operations */

const char *const *dt_server_ops(const dt_server *s)
{
    static const char *names[32];
    int n = 0;
    for (const dt_server_op_entry *o = s->kind->ops; o != NULL && o->name != NULL && n < 31; o++)
        names[n++] = o->name;
    names[n] = NULL;
    return names;
}

static const dt_server_op_entry *find_op(const dt_server *s, const char *op)
{
    for (const dt_server_op_entry *o = s->kind->ops; o != NULL && o->name != NULL; o++) {
        if (strcmp(o->name, op) == 0)
            return o;
    }
    return NULL;
}

const char *dt_server_op_help(const dt_server *s, const char *op)
{
    const dt_server_op_entry *o = find_op(s, op);
    return o != NULL ? o->help : NULL;
}

int dt_server_op_loses_data(const dt_server *s, const char *op)
{
    const dt_server_op_entry *o = find_op(s, op);
    return o != NULL ? o->loses_data : 0;
}

int dt_server_keeps_data(const dt_server *s, unsigned how)
{
    if (how & DT_WIPE)
        return 0;
    return s->kind->durable || (s->flags & DT_PERSIST) || !(how & DT_KILL);
}

int64_t dt_server_lease_bound_ms(const dt_server *s, int64_t lease_ms)
{
    int64_t unit = s->kind->lease_unit_ms;
    if (unit > 0)
        lease_ms = (lease_ms + unit - 1) / unit * unit;
    return lease_ms + s->kind->expiry_lag_ms;
}

int dt_server_op(dt_server *s, const char *op, const char *arg)
{
    const dt_server_op_entry *o = find_op(s, op);
    if (o == NULL)
        return -2;
    return o->run(s, arg);
}

const char *dt_server_url_variant(const dt_server *s, int i)
{
    int n = 0;
    while (s->kind->url_variants != NULL && s->kind->url_variants[n] != NULL)
        n++;
    return n == 0 ? "" : s->kind->url_variants[(i % n + n) % n];
}

const char *dt_server_cli(const dt_server *s, const char *fmt, ...)
{
    static char out[8192];
    char cmd[4096], line[1024];
    va_list ap;
    size_t used = 0;

    out[0] = '\0';
    if (s->kind->cli_prefix == NULL)
        return out;
    s->kind->cli_prefix(s, cmd, sizeof cmd);
    size_t n = strlen(cmd);
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof cmd - n, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return out;
    while (fgets(line, sizeof line, p) != NULL && used + strlen(line) < sizeof out) {
        strcpy(out + used, line);
        used += strlen(line);
    }
    pclose(p);
    while (used > 0 && (out[used - 1] == '\n' || out[used - 1] == '\r'))
        out[--used] = '\0';
    return out;
}
