/* SPDX-License-Identifier: MIT */
/* support.c - helpers the conformance tests share (conformance.h). */
#define _GNU_SOURCE
#include "conformance.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* 1 if the store under test is one of the comma-separated kinds. */
static int on_store(const char *stores)
{
    size_t len = strlen(ct->kind);
    for (const char *p = stores; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t) (end - p) : strlen(p);
        if (n == len && strncmp(p, ct->kind, len) == 0)
            return 1;
        p = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

static void note_bug(const char *why, const char *file, int line)
{
    size_t used = strlen(ct->known_bug);
    if (strstr(ct->known_bug, why) == NULL && used + 8 < sizeof ct->known_bug)
        snprintf(ct->known_bug + used, sizeof ct->known_bug - used, "%s%s (%s:%d)",
                 used ? "; " : "", why, file, line);
}

void ct_known_bug(const char *store, const char *why, const char *file, int line)
{
    if (!on_store(store))
        return;
    note_bug(why, file, line);
    ct->known_bug_declared = 1;
    fprintf(stderr, "*** KNOWN BUG in %s on %s: %s\n", ct->test, ct->kind, why);
}

void ct_known_bug_check(int ok, const char *cond, const char *store, const char *why,
                        const char *file, int line)
{
    if (ok)
        return;
    if (!on_store(store))
        dt_fail(file, line, "CHECK(%s) failed", cond);
    note_bug(why, file, line);
    ct->known_bug_seen = 1;
    fprintf(stderr, "*** KNOWN BUG in %s on %s at %s:%d: CHECK(%s) failed: %s\n", ct->test,
            ct->kind, file, line, cond, why);
}

unsigned ct_have(void)
{
    /* one server, one port: a link */
    return ct->caps | (ct->srv.port != 0 && ct->srv.group == NULL ? CT_LINK : 0);
}

int ct_has(unsigned caps)
{
    return (ct_have() & caps) == caps;
}

const char *ct_name(const char *name)
{
    static char bufs[8][DLOCK_NAME_MAX + 1];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s-%s", ct->test, name);
    return b;
}

/* base, the run's options (--options) and a test's own ("?lease=1s"); a
 * URL with options of its own already (the TLS store's ?cacert=...) takes
 * more after '&'. */
static const char *with_options(const char *base, const char *options)
{
    static char bufs[4][512];
    static int next;
    char *b = bufs[next++ % 4];
    if (options == NULL)
        options = "";
    char sep = strchr(base, '?') != NULL ? '&' : '?';
    if (ct->options != NULL && ct->options[0] != '\0')
        snprintf(b, sizeof bufs[0], "%s%c%s%s%s", base, sep, ct->options, options[0] ? "&" : "",
                 options[0] == '?' || options[0] == '&' ? options + 1 : options);
    else if (options[0] == '?' && sep == '&')
        snprintf(b, sizeof bufs[0], "%s&%s", base, options + 1);
    else
        snprintf(b, sizeof bufs[0], "%s%s", base, options);
    return b;
}

const char *ct_url(const char *options)
{
    return with_options(ct->srv.url, options);
}

dlock_client *ct_client(const char *options)
{
    dlock_client *c = NULL;
    CHECK_RC(dlock_client_open(ct_url(options), &c), DLOCK_OK);
    return c;
}

dlock_client *ct_client_at(int port, const char *options)
{
    char base[256];
    dlock_client *c = NULL;
    dt_server_url_at(&ct->srv, port, base, sizeof base);
    CHECK_RC(dlock_client_open(with_options(base, options), &c), DLOCK_OK);
    return c;
}

dlock_lock *ct_lock(dlock_client *c, const char *name, unsigned flags)
{
    return dt_lock(c, name, flags);
}

dlock_status ct_query(dlock_client *c, const char *name, unsigned flags)
{
    return dt_query(c, name, flags);
}

unsigned ct_waiters(dlock_client *c, const char *name, unsigned flags)
{
    return ct_query(c, name, flags).waiters;
}

static void *waiter_main(void *p)
{
    ct_waiter *w = p;
    w->started_ms = dt_now_ms();
    w->rc = w->lease_ms > 0 ? dlock_acquire_for(w->lock, w->wait_ms, w->lease_ms)
                            : dlock_acquire(w->lock, w->wait_ms);
    w->ended_ms = dt_now_ms();
    snprintf(w->errmsg, sizeof w->errmsg, "%s", dlock_errmsg());
    if (w->check != NULL)
        w->check_rc = dlock_lock_check(w->check);
    atomic_store(&w->done, 1);
    return NULL;
}

void ct_wait_start_for(ct_waiter *w, dlock_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    memset(w, 0, sizeof *w);
    w->lock = l;
    w->wait_ms = wait_ms;
    w->lease_ms = lease_ms;
    w->rc = -1;
    CHECK(pthread_create(&w->thread, NULL, waiter_main, w) == 0);
}

void ct_wait_start(ct_waiter *w, dlock_lock *l, int64_t wait_ms)
{
    ct_wait_start_for(w, l, wait_ms, 0);
}

void ct_wait_start_check(ct_waiter *w, dlock_lock *l, int64_t wait_ms, dlock_lock *check)
{
    memset(w, 0, sizeof *w);
    w->lock = l;
    w->wait_ms = wait_ms;
    w->check = check;
    w->rc = -1;
    CHECK(pthread_create(&w->thread, NULL, waiter_main, w) == 0);
}

int ct_wait_join(ct_waiter *w)
{
    CHECK(pthread_join(w->thread, NULL) == 0);
    /* the waiter's own words (a failed check after this prints the
     * test thread's dlock_errmsg(), which is not the waiter's) */
    if (w->rc != DLOCK_OK)
        fprintf(stderr, "# waiter on its thread: %s (%d) after %lld ms: %s\n",
                dlock_strerror(w->rc), w->rc, (long long) (w->ended_ms - w->started_ms), w->errmsg);
    return w->rc;
}

void ct_on_lost(dlock_lock *l, int code, const char *why, void *arg)
{
    ct_loss *loss = arg;
    (void) l;
    loss->code = code;
    snprintf(loss->why, sizeof loss->why, "%s", why);
    atomic_store(&loss->at_ms, (long long) dt_now_ms());
    atomic_fetch_add(&loss->calls, 1);
}

void ct_read_line(int fd, char *buf, size_t len, int ms)
{
    size_t used = 0;
    int64_t until = dt_now_ms() + ms;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (used + 1 < len) {
        ssize_t n = read(fd, buf + used, 1);
        if (n == 1) {
            if (buf[used] == '\n')
                break;
            used++;
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            dt_fail(__FILE__, __LINE__, "the worker's pipe closed");
        if (dt_now_ms() > until)
            dt_fail(__FILE__, __LINE__, "no line from the worker within %d ms", ms);
        dt_sleep_ms(2);
    }
    buf[used] = '\0';
}

void ct_wait_worker(pid_t pid, const char *what)
{
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            dt_fail(__FILE__, __LINE__, "waitpid %s: %s", what, strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        dt_fail(__FILE__, __LINE__, "%s failed (status 0x%x)", what, status);
}

pid_t ct_spawn(const char *const *argv)
{
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *) argv, environ);
    if (rc != 0)
        dt_fail(__FILE__, __LINE__, "cannot run %s: %s", argv[0], strerror(rc));
    return pid;
}

int ct_wait_program(pid_t pid, int timeout_ms)
{
    int status;
    int64_t until = dt_now_ms() + timeout_ms;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR)
            dt_fail(__FILE__, __LINE__, "waitpid: %s", strerror(errno));
        if (dt_now_ms() > until) {
            dt_kill_reap(pid);
            dt_fail(__FILE__, __LINE__, "program did not end within %d ms", timeout_ms);
        }
        dt_sleep_ms(5);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int ct_run_program(const char *const *argv, int timeout_ms)
{
    return ct_wait_program(ct_spawn(argv), timeout_ms);
}

void ct_write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    size_t n = strlen(text);
    CHECK(fd >= 0);
    CHECK(write(fd, text, n) == (ssize_t) n);
    close(fd);
}

void ct_read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
}

void ct_fair_waiter(const char *name, const char *options, int i, const char *path)
{
    dlock_client *c = ct_client(options);
    dlock_lock *l = ct_lock(c, name, DLOCK_FAIR);
    dlock_status st;
    /* queue once the lock is held and every earlier one queued */
    DT_WAIT_UNTIL(dlock_query(c, name, DLOCK_FAIR, &st) == DLOCK_OK && st.held &&
                      st.waiters == (unsigned) i,
                  20000);
    CHECK_RC(dlock_acquire(l, 30000), DLOCK_OK);
    FILE *f = fopen(path, "a");
    CHECK(f != NULL);
    fprintf(f, "%d", i);
    fclose(f);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    _exit(0);
}
