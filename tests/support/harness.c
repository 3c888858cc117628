/* harness.c - see harness.h. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef DT_DEFAULT_BIN_DIR
#define DT_DEFAULT_BIN_DIR "."
#endif

static const char *current_test = "?";

static void stop_all(void);

void dt_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s at %s:%d: ", current_test, file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    stop_all();
    _exit(1);
}

int64_t dt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

const char *dt_bin(const char *name)
{
    static char path[4][512];
    static int next;
    const char *dir = getenv("DT_BIN_DIR");
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir != NULL ? dir : DT_DEFAULT_BIN_DIR, name);
    return p;
}

int dt_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *) &a, &len) != 0)
        dt_fail(__FILE__, __LINE__, "no free port: %s", strerror(errno));
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* ---------------------------------------------------------------- redis */

/* Servers still running when the test process exits are stopped by pid:
 * the dt_redis structs themselves usually lived on a test's stack. */
#define MAX_SERVERS 16
static pid_t servers[MAX_SERVERS];

static void kill_and_reap(pid_t pid)
{
    int status;
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

static void stop_all(void)
{
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (servers[i] > 0)
            kill_and_reap(servers[i]);
        servers[i] = 0;
    }
}

static void forget(pid_t pid)
{
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (servers[i] == pid)
            servers[i] = 0;
    }
}

static int ping(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t) port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char buf[64];
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok = 0;

    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *) &a, sizeof a) == 0 &&
        send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        /* -NOAUTH: alive, and wants a password */
        ok = n >= 5 && (memcmp(buf, "+PONG", 5) == 0 || memcmp(buf, "-NOAUTH", 7) == 0);
    }
    close(fd);
    return ok;
}

static void start(dt_redis *r, int port, va_list extra)
{
    char port_s[16];
    const char *argv[64];
    int argc = 0;

    if (r->dir[0] == '\0') {
        snprintf(r->dir, sizeof r->dir, "/tmp/dlock-test-XXXXXX");
        if (mkdtemp(r->dir) == NULL)
            dt_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
    }
    r->port = port;
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", port);
    argv[argc++] = "redis-server";
    argv[argc++] = "--port";
    argv[argc++] = port_s;
    argv[argc++] = "--bind";
    argv[argc++] = "127.0.0.1";
    argv[argc++] = "--save";
    argv[argc++] = "";
    argv[argc++] = "--appendonly";
    argv[argc++] = "no";
    argv[argc++] = "--dir";
    argv[argc++] = r->dir;
    argv[argc++] = "--logfile";
    argv[argc++] = "redis.log";
    argv[argc++] = "--daemonize";
    argv[argc++] = "no";
    if (extra != NULL) {
        const char *a;
        while ((a = va_arg(extra, const char *)) != NULL && argc < 62)
            argv[argc++] = a;
    }
    argv[argc] = NULL;

    r->pid = fork();
    if (r->pid < 0)
        dt_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (r->pid == 0) {
        /* The server goes when the test goes, however it ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execvp("redis-server", (char *const *) argv);
        _exit(127);
    }
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (servers[i] == 0) {
            servers[i] = r->pid;
            break;
        }
    }
    static int hooked;
    if (!hooked) {
        atexit(stop_all);
        hooked = 1;
    }
    int64_t until = dt_now_ms() + 10000;
    while (!ping(port)) {
        int status;
        if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
            forget(r->pid);
            r->pid = 0;
            dt_fail(__FILE__, __LINE__, "redis-server exited at start (port %d, log %s/redis.log)",
                    port, r->dir);
        }
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__, "redis-server on port %d did not answer PING", port);
        dt_sleep_ms(5);
    }
}

void dt_redis_start(dt_redis *r, ...)
{
    va_list ap;
    memset(r, 0, sizeof *r);
    va_start(ap, r);
    start(r, dt_free_port(), ap);
    va_end(ap);
}

void dt_redis_start_on(dt_redis *r, int port)
{
    start(r, port, NULL);
}

void dt_redis_stop(dt_redis *r)
{
    if (r->pid <= 0)
        return;
    kill_and_reap(r->pid);
    forget(r->pid);
    r->pid = 0;
}

const char *dt_redis_cli(const dt_redis *r, const char *fmt, ...)
{
    static char out[4096];
    char cmd[2048], line[1024];
    va_list ap;
    int n = snprintf(cmd, sizeof cmd, "redis-cli -p %d ", r->port);

    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof cmd - (size_t) n, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (p == NULL)
        return out;
    size_t used = 0;
    while (fgets(line, sizeof line, p) != NULL && used + strlen(line) < sizeof out) {
        strcpy(out + used, line);
        used += strlen(line);
    }
    pclose(p);
    while (used > 0 && (out[used - 1] == '\n' || out[used - 1] == '\r'))
        out[--used] = '\0';
    return out;
}

/* ---------------------------------------------------------------- runner */

static int run_one(const dt_test *t)
{
    int status;
    int64_t start_ms = dt_now_ms();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        current_test = t->name;
        t->fn();
        fflush(NULL);
        exit(0); /* runs atexit: servers of this test stop */
    }
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && WIFSIGNALED(status))
        fprintf(stderr, "FAIL %s: killed by signal %d\n", t->name, WTERMSIG(status));
    printf("%s %s (%lld ms)\n", ok ? "ok  " : "FAIL", t->name,
           (long long) (dt_now_ms() - start_ms));
    fflush(stdout);
    return ok;
}

int dt_run(int argc, char **argv, const dt_test *tests, size_t n)
{
    int failed = 0, ran = 0;

    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
            continue;
        ran++;
        if (!run_one(&tests[i]))
            failed++;
    }
    if (ran == 0) {
        fprintf(stderr, "no test named '%s'\n", argc > 1 ? argv[1] : "");
        return 1;
    }
    printf("%d/%d passed\n", ran - failed, ran);
    return failed ? 1 : 0;
}
