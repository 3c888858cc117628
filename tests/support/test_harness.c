/* SPDX-License-Identifier: MIT */
/* test_harness.c - the test harness itself: every server kind starts on a
 * free port and answers, pauses and resumes, restarts on the same port with
 * its data kept or wiped, dies with kill -9; the fault proxy passes,
 * blackholes, drops, cuts, delays and heals. A store that cannot be started
 * here fails the test: the fault suite depends on all of them. */
#define _GNU_SOURCE
#include "harness.h"
#include "server_kind.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A value written through the kind's CLI, to see whether a restart kept it. */
static void put_marker(dt_server *s)
{
    if (strcmp(s->kind->name, "redis") == 0)
        CHECK(strcmp(dt_server_cli(s, "SET dt-marker kept"), "OK") == 0);
    else if (strcmp(s->kind->name, "etcd") == 0)
        CHECK(strcmp(dt_server_cli(s, "put dt-marker kept"), "OK") == 0);
    else
        CHECK(strstr(dt_server_cli(s, "create /dt-marker kept 2>&1"), "Created") != NULL);
}

static int has_marker(dt_server *s)
{
    if (strcmp(s->kind->name, "redis") == 0)
        return strcmp(dt_server_cli(s, "GET dt-marker"), "kept") == 0;
    if (strcmp(s->kind->name, "etcd") == 0)
        return strstr(dt_server_cli(s, "get dt-marker --print-value-only"), "kept") != NULL;
    return strstr(dt_server_cli(s, "get /dt-marker 2>&1"), "kept") != NULL;
}

static void lifecycle(const char *kind)
{
    dt_server s;
    int64_t t0 = dt_now_ms();
    dt_server_start(&s, kind, DT_PERSIST, NULL);
    printf("  %s: answers on port %d after %lld ms (%s)\n", kind, s.port,
           (long long) (dt_now_ms() - t0), s.url);
    CHECK(dt_server_answers(&s));
    int port = s.port;

    /* pause: it stops answering; resume: it answers again */
    dt_server_pause(&s);
    CHECK(!s.kind->answers(&s));
    dt_server_resume(&s);
    DT_WAIT_UNTIL(dt_server_answers(&s), 5000);

    /* restart keeping data, after a clean stop and after kill -9 */
    put_marker(&s);
    t0 = dt_now_ms();
    dt_server_restart(&s, 0);
    printf("  %s: restarted (clean stop) in %lld ms\n", kind, (long long) (dt_now_ms() - t0));
    CHECK_INT(s.port, ==, port);
    CHECK(has_marker(&s));
    t0 = dt_now_ms();
    dt_server_restart(&s, DT_KILL);
    printf("  %s: restarted (kill -9) in %lld ms\n", kind, (long long) (dt_now_ms() - t0));
    CHECK_INT(s.port, ==, port);
    CHECK(has_marker(&s));

    /* restart with data wiped */
    t0 = dt_now_ms();
    dt_server_restart(&s, DT_KILL | DT_WIPE);
    printf("  %s: restarted (kill -9, wiped) in %lld ms\n", kind, (long long) (dt_now_ms() - t0));
    fflush(stdout);
    CHECK_INT(s.port, ==, port);
    CHECK(!has_marker(&s));

    /* kill -9: nothing answers on the port any more, the pid is reaped */
    pid_t pid = s.pid;
    dt_server_kill(&s);
    CHECK_INT(s.pid, ==, 0);
    CHECK(kill(pid, 0) != 0 && errno == ESRCH);
    CHECK(!s.kind->answers(&s));
    dt_server_start_again(&s, 0);
    CHECK(dt_server_answers(&s));
    dt_server_stop(&s);
    CHECK(!s.kind->answers(&s));
}

static void redis_lifecycle(void)
{
    lifecycle("redis");
}

static void zookeeper_lifecycle(void)
{
    lifecycle("zookeeper");
}

static void etcd_lifecycle(void)
{
    lifecycle("etcd");
}

/* Redis without DT_PERSIST: a clean restart keeps (SHUTDOWN SAVE), a kill -9
 * loses everything; its operations do what they say. */
static void redis_operations(void)
{
    dt_server s;
    dt_server_start(&s, "redis", 0, NULL);
    put_marker(&s);
    dt_server_restart(&s, 0);
    CHECK(has_marker(&s));
    /* written after the last save: gone with the kill */
    CHECK(strcmp(dt_server_cli(&s, "SET late v"), "OK") == 0);
    dt_server_restart(&s, DT_KILL);
    CHECK(has_marker(&s));
    CHECK(strcmp(dt_server_cli(&s, "EXISTS late"), "0") == 0);

    dt_server_cli(&s, "SET 'dlock:{acct}' x");
    dt_server_cli(&s, "SET 'dlock:{acct}:fence' 7");
    dt_server_cli(&s, "SET acct y");
    dt_server_cli(&s, "SET 'dlock:{other}:fence' 3");
    CHECK_INT(dt_server_op(&s, "drop_lock", "acct"), ==, 0);
    CHECK(strcmp(dt_server_cli(&s, "EXISTS 'dlock:{acct}' 'dlock:{acct}:fence' acct"), "0") == 0);
    CHECK(strcmp(dt_server_cli(&s, "GET 'dlock:{other}:fence'"), "3") == 0);

    CHECK_INT(dt_server_op(&s, "evict", NULL), ==, 0);
    CHECK(strcmp(dt_server_cli(&s, "EXISTS 'dlock:{other}:fence'"), "0") == 0);
    CHECK(strcmp(dt_server_cli(&s, "CONFIG GET maxmemory"), "maxmemory\n0") == 0);

    dt_server_cli(&s, "SET k v");
    CHECK_INT(dt_server_op(&s, "wipe", NULL), ==, 0);
    CHECK(strcmp(dt_server_cli(&s, "DBSIZE"), "0") == 0);

    /* persistence switched on at run time survives a kill -9 */
    CHECK_INT(dt_server_op(&s, "persist", "on"), ==, 0);
    put_marker(&s);
    dt_server_restart(&s, DT_KILL);
    CHECK(has_marker(&s));
    CHECK_INT(dt_server_op(&s, "persist", "off"), ==, 0);

    /* the server stalls for the time asked, then answers */
    int64_t t0 = dt_now_ms();
    CHECK_INT(dt_server_op(&s, "sleep", "600"), ==, 0);
    CHECK_INT(dt_now_ms() - t0, <, 400);
    CHECK(strcmp(dt_server_cli(&s, "PING"), "PONG") == 0);
    CHECK_INT(dt_now_ms() - t0, >=, 550);

    CHECK_INT(dt_server_op(&s, "pause_clients", "500"), ==, 0);
    t0 = dt_now_ms();
    CHECK(strcmp(dt_server_cli(&s, "SET a b"), "OK") == 0);
    CHECK_INT(dt_now_ms() - t0, >=, 400);

    CHECK_INT(dt_server_op(&s, "no_such_op", NULL), ==, -2);
    for (const char *const *op = dt_server_ops(&s); *op != NULL; op++)
        CHECK(dt_server_op_help(&s, *op) != NULL);
}

/* ---------------------------------------------------------------- proxy */

static int connect_to(int port)
{
    int fd = dt__tcp_connect(port, 1000);
    CHECK(fd >= 0);
    return fd;
}

/* Sends a line to redis (inline command) and reads the reply line. Returns
 * bytes read, 0 on EOF, -1 on timeout, -2 on reset. */
static int roundtrip(int fd, const char *cmd, char *buf, size_t len, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) < 0)
        return errno == ECONNRESET || errno == EPIPE ? -2 : -1;
    if (poll(&p, 1, ms) != 1)
        return -1;
    ssize_t n = recv(fd, buf, len - 1, 0);
    if (n < 0)
        return errno == ECONNRESET ? -2 : -1;
    buf[n] = '\0';
    return (int) n;
}

static void proxy_modes(void)
{
    dt_server s;
    dt_proxy p;
    char buf[256];

    dt_server_start(&s, "redis", 0, NULL);
    dt_proxy_start(&p, s.port, 2);
    int a = connect_to(p.ports[0]), b = connect_to(p.ports[1]);
    CHECK_INT(roundtrip(a, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK(strncmp(buf, "+PONG", 5) == 0);
    CHECK_INT(roundtrip(b, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK_INT(dt_proxy_connections(&p, -1), ==, 2);

    /* blackhole link 0: silence there (no reset), link 1 unaffected */
    dt_proxy_set(&p, 0, DT_BLACKHOLE);
    CHECK_INT(roundtrip(a, "INCR n\r\n", buf, sizeof buf, 300), ==, -1);
    CHECK_INT(roundtrip(b, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    /* a new connection is accepted, and silent too */
    int a2 = connect_to(p.ports[0]);
    CHECK_INT(roundtrip(a2, "INCR n\r\n", buf, sizeof buf, 300), ==, -1);
    /* the held command has not reached the server */
    CHECK(strcmp(dt_server_cli(&s, "GET n"), "") == 0);
    /* heal: the held bytes go through, late */
    dt_proxy_set(&p, 0, DT_PASS);
    struct pollfd pf = {a, POLLIN, 0};
    CHECK_INT(poll(&pf, 1, 2000), ==, 1);
    CHECK_INT(recv(a, buf, sizeof buf - 1, 0), >, 0);
    CHECK(buf[0] == ':');
    pf.fd = a2;
    CHECK_INT(poll(&pf, 1, 2000), ==, 1);
    CHECK_INT(recv(a2, buf, sizeof buf - 1, 0), >, 0);
    CHECK(strcmp(dt_server_cli(&s, "GET n"), "2") == 0);

    /* drop: bytes thrown away, and the connection that lost some is reset
     * on heal; one that lost none goes on */
    dt_proxy_set(&p, 0, DT_DROP);
    CHECK_INT(roundtrip(a, "INCR n\r\n", buf, sizeof buf, 300), ==, -1);
    dt_proxy_set(&p, 0, DT_PASS);
    CHECK(strcmp(dt_server_cli(&s, "GET n"), "2") == 0);
    int r = roundtrip(a, "PING\r\n", buf, sizeof buf, 2000);
    CHECK(r == 0 || r == -2);
    CHECK_INT(roundtrip(a2, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK(strncmp(buf, "+PONG", 5) == 0);

    /* cut: open connections reset, new ones refused, until healed */
    dt_proxy_set(&p, -1, DT_CUT);
    r = roundtrip(b, "PING\r\n", buf, sizeof buf, 2000);
    CHECK(r == 0 || r == -2);
    CHECK_INT(dt__tcp_connect(p.ports[1], 500), <, 0);
    dt_proxy_set(&p, -1, DT_PASS);
    int c = connect_to(p.ports[1]);
    CHECK_INT(roundtrip(c, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK(strncmp(buf, "+PONG", 5) == 0);

    /* delay: the server's bytes held 200 ms on link 0 (a round trip of
     * 200 ms, answered in full), link 1 as fast as ever */
    dt_proxy_delay(&p, 0, 200);
    int d = connect_to(p.ports[0]);
    int64_t t0 = dt_now_ms();
    CHECK_INT(roundtrip(d, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK_INT(dt_now_ms() - t0, >=, 195);
    CHECK(strncmp(buf, "+PONG", 5) == 0);
    t0 = dt_now_ms();
    CHECK_INT(roundtrip(c, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK_INT(dt_now_ms() - t0, <, 100);
    dt_proxy_delay(&p, 0, 0);
    t0 = dt_now_ms();
    CHECK_INT(roundtrip(d, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK_INT(dt_now_ms() - t0, <, 100);
    close(d);

    /* the server killed behind the proxy: the client sees the end */
    dt_server_kill(&s);
    r = roundtrip(c, "PING\r\n", buf, sizeof buf, 2000);
    CHECK(r == 0 || r == -2);
    close(a);
    close(a2);
    close(b);
    close(c);
    dt_proxy_stop(&p);
}

/* A link's delay holds the server's replies for that long, and the proxy
 * counts what the clients sent. */
static void proxy_delay_and_count(void)
{
    dt_server s;
    dt_proxy p;
    char buf[256];
    long long chunks, bytes;

    dt_server_start(&s, "redis", 0, NULL);
    dt_proxy_start(&p, s.port, 2);
    int a = connect_to(p.ports[0]), b = connect_to(p.ports[1]);
    dt_proxy_delay(&p, 0, 300);
    int64_t t0 = dt_now_ms();
    CHECK_INT(roundtrip(a, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK(strncmp(buf, "+PONG", 5) == 0);
    CHECK_INT(dt_now_ms() - t0, >=, 290);
    /* the other link is not delayed */
    t0 = dt_now_ms();
    CHECK_INT(roundtrip(b, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK_INT(dt_now_ms() - t0, <, 250);
    /* the request itself went at once: the server had it before the reply */
    CHECK_INT(roundtrip(a, "INCR n\r\n", buf, sizeof buf, 100), ==, -1);
    CHECK(strcmp(dt_server_cli(&s, "GET n"), "1") == 0);
    struct pollfd pf = {a, POLLIN, 0};
    CHECK_INT(poll(&pf, 1, 2000), ==, 1);
    CHECK_INT(recv(a, buf, sizeof buf - 1, 0), >, 0);
    dt_proxy_delay(&p, 0, 0);
    t0 = dt_now_ms();
    CHECK_INT(roundtrip(a, "PING\r\n", buf, sizeof buf, 2000), >, 0);
    CHECK_INT(dt_now_ms() - t0, <, 250);
    /* three requests on link 0 (20 bytes), one on link 1 */
    dt_proxy_sent(&p, 0, &chunks, &bytes);
    CHECK_INT(chunks, ==, 3);
    CHECK_INT(bytes, ==, 6 + 8 + 6);
    dt_proxy_sent(&p, 1, &chunks, &bytes);
    CHECK_INT(chunks, ==, 1);
    CHECK_INT(dt_proxy_accepted(&p, 0), ==, 1);
    close(a);
    close(b);
    dt_proxy_stop(&p);
    dt_server_stop(&s);
}

/* A server and a proxy die with the process that started them, also on
 * kill -9. */
static void helpers_die_with_test(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t child = fork();
    if (child == 0) {
        dt_server s;
        dt_proxy p;
        dt_server_start(&s, "redis", 0, NULL);
        dt_proxy_start(&p, s.port, 1);
        pid_t pids[2] = {s.pid, p.pid};
        if (write(fds[1], pids, sizeof pids) != sizeof pids)
            _exit(1);
        pause();
        _exit(0);
    }
    pid_t pids[2];
    CHECK(read(fds[0], pids, sizeof pids) == sizeof pids);
    CHECK(kill(pids[0], 0) == 0 && kill(pids[1], 0) == 0);
    kill(child, SIGKILL);
    dt_kill_reap(child);
    DT_WAIT_UNTIL(kill(pids[0], 0) != 0 && kill(pids[1], 0) != 0, 5000);
}

/* A server of the same kind that someone else runs on our port answers the
 * kind's check, while ours exits at start (the port is taken): the start
 * fails, rather than hand the test someone else's server. */
static void foreign_server_is_not_ours(void)
{
    dt_server s;
    dt_server_start(&s, "redis", 0, NULL);
    int port = s.port;
    dt_server_stop(&s);

    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    pid_t foreign = fork();
    if (foreign == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execlp("redis-server", "redis-server", "--port", portstr, "--bind", "127.0.0.1", "--save",
               "", "--appendonly", "no", (char *) NULL);
        _exit(127);
    }
    CHECK(foreign > 0);
    dt_track_pid(foreign);
    DT_WAIT_UNTIL(s.kind->answers(&s), 10000);

    /* a child starts ours on that port: it must fail */
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t child = fork();
    if (child == 0) {
        dup2(fds[1], 2); /* its failure's words, to check below */
        dt_server_start_again(&s, 0);
        _exit(0);
    }
    close(fds[1]);
    char said[1024] = "";
    ssize_t n, got = 0;
    while ((n = read(fds[0], said + got, sizeof said - 1 - (size_t) got)) > 0)
        got += n;
    said[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    CHECK(strstr(said, "exited at start") != NULL);
    dt_kill_reap(foreign);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"redis_lifecycle", redis_lifecycle},
        {"zookeeper_lifecycle", zookeeper_lifecycle},
        {"etcd_lifecycle", etcd_lifecycle},
        {"redis_operations", redis_operations},
        {"proxy_modes", proxy_modes},
        {"proxy_delay_and_count", proxy_delay_and_count},
        {"helpers_die_with_test", helpers_die_with_test},
        {"foreign_server_is_not_ours", foreign_server_is_not_ours},
    };
    return DT_RUN(tests);
}
