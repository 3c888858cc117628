/* SPDX-License-Identifier: MIT */
/* test_bad_input.c - wrong URLs, unreachable servers, bad names and leases,
 * and a server that answers garbage: each a clear error, no crash, nothing
 * held by mistake. */
#include "../support/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void expect_open_fails(const char *url, int code, const char *words)
{
    dlock_client *c = (dlock_client *) 1;
    int rc = dlock_client_open(url, &c);
    if (rc != code || c != NULL || strstr(dlock_errmsg(), words) == NULL)
        dt_fail(__FILE__, __LINE__, "open(%s): got %d '%s', want %d with '%s'", url ? url : "NULL",
                rc, dlock_errmsg(), code, words);
}

static void malformed_urls(void)
{
    expect_open_fails(NULL, DLOCK_EINVAL, "empty URL");
    expect_open_fails("", DLOCK_EINVAL, "empty URL");
    expect_open_fails("localhost:6379", DLOCK_EINVAL, "not a URL");
    expect_open_fails("http://localhost", DLOCK_EINVAL, "unknown scheme 'http'");
    expect_open_fails("redis://", DLOCK_EINVAL, "exactly one host");
    expect_open_fails("redis://a,b", DLOCK_EINVAL, "exactly one host");
    expect_open_fails("redis://host:0", DLOCK_EINVAL, "bad port");
    expect_open_fails("redis://host:99999", DLOCK_EINVAL, "bad port");
    expect_open_fails("redis://host:12ab", DLOCK_EINVAL, "bad port");
    /* which host of several */
    expect_open_fails("redlock://a:1,b:x2,c:3", DLOCK_EINVAL, "bad port 'x2' in 'b:x2'");
    expect_open_fails("redlock://h:1,h:2,h:x3", DLOCK_EINVAL,
                      "bad port 'x3' in 'h:x3', the URL's 3rd host");
    expect_open_fails("redis://[::1", DLOCK_EINVAL, "unclosed '['");
    expect_open_fails("redis://ho st", DLOCK_EINVAL, "space");
    expect_open_fails("redis://host/notadb", DLOCK_EINVAL, "not a number");
    expect_open_fails("redis://host?lease=0", DLOCK_EINVAL, "lease");
    expect_open_fails("redis://host?lease=soon", DLOCK_EINVAL, "not a duration");
    expect_open_fails("redis://host?timeout=-5", DLOCK_EINVAL, "not a duration");
    expect_open_fails("redis://host?pool=0", DLOCK_EINVAL, "pool");
    expect_open_fails("redis://host?pool=1000", DLOCK_EINVAL, "pool");
    expect_open_fails("redis://host?prefix=a*b", DLOCK_EINVAL, "prefix");
    expect_open_fails("redis://host?colour=red", DLOCK_EINVAL, "unknown option 'colour'");
    CHECK(strstr(dlock_errmsg(), "did you mean") == NULL); /* nothing near it */
    /* a near miss of an option the store knows: which one */
    expect_open_fails("redis://host?leese=5s", DLOCK_EINVAL,
                      "unknown option 'leese' (did you mean lease=?)");
    expect_open_fails("redis://host?pool=2&tiemout=5s", DLOCK_EINVAL,
                      "unknown option 'tiemout' (did you mean timeout=?)");
    expect_open_fails("rediss://host?cacret=/x", DLOCK_EINVAL, "(did you mean cacert=?)");
    expect_open_fails("etcd://host?leese=5s", DLOCK_EINVAL, "(did you mean lease=?)");
    expect_open_fails("sqlite:///nonexistent/x.db?leese=5s", DLOCK_EINVAL,
                      "(did you mean lease=?)");
    /* a misspelt mode= value, as a misspelt option name: what was meant */
#ifdef DLOCK_WITH_MYSQL
    expect_open_fails("mysql://u@127.0.0.1/db?mode=tabel", DLOCK_EINVAL,
                      "unknown mode 'tabel' (did you mean mode=table? want mode=table, the "
                      "default, mode=session or mode=row)");
    expect_open_fails("mariadb://u@127.0.0.1/db?mode=rwo", DLOCK_EINVAL, "(did you mean mode=row?");
    expect_open_fails("mysql://u@127.0.0.1/db?mode=sesion", DLOCK_EINVAL,
                      "(did you mean mode=session?");
    expect_open_fails("mysql://u@127.0.0.1/db?mode=banana", DLOCK_EINVAL,
                      "unknown mode 'banana' (want mode=table");
#endif
#ifdef DLOCK_WITH_POSTGRES
    expect_open_fails("postgres://u@127.0.0.1/db?mode=tabel", DLOCK_EINVAL,
                      "unknown mode 'tabel' (did you mean mode=table? want mode=session, the "
                      "default, or mode=table)");
    expect_open_fails("postgresql://u@127.0.0.1/db?mode=sesion", DLOCK_EINVAL,
                      "(did you mean mode=session?");
    expect_open_fails("postgres://u@127.0.0.1/db?mode=row", DLOCK_EINVAL,
                      "unknown mode 'row' (want mode=session");
#endif
    expect_open_fails("redis://host?lease=1s&lease=2s", DLOCK_EINVAL,
                      "given twice in 'redis://host?lease=1s&lease=2s'");
    expect_open_fails("redis://host?lease", DLOCK_EINVAL, "not key=value");
    expect_open_fails("redis://us%zzer@host", DLOCK_EINVAL, "escape");
    expect_open_fails("redis://host?insecure=1", DLOCK_EINVAL, "is for TLS");
    expect_open_fails("rediss://host?cacert=/nonexistent", DLOCK_EINVAL, "cacert");
    expect_open_fails("rediss+sentinel://host/m?cacert=/nonexistent", DLOCK_EINVAL, "cacert");
    expect_open_fails("redis+sentinel://host/m?insecure=1", DLOCK_EINVAL, "is for TLS");
    /* the password never shows in messages, even in URLs that do not parse */
    expect_open_fails("redis://user:s3cret@host?bogus=1", DLOCK_EINVAL, "***");
    CHECK(strstr(dlock_errmsg(), "s3cret") == NULL);
    static const char *const with_secrets[] = {
        "re_dis://:secretPW@127.0.0.1:1", "redis:/:secretPW@127.0.0.1:1",
        "redis//:secretPW@127.0.0.1:1",   "redis://secretPW@host:6379?bogus=1",
        "foo://:secretPW@host",           "redis://u:secretPW@host:99999",
    };
    for (size_t i = 0; i < sizeof with_secrets / sizeof with_secrets[0]; i++) {
        dlock_client *c = NULL;
        CHECK(dlock_client_open(with_secrets[i], &c) != DLOCK_OK);
        if (strstr(dlock_errmsg(), "secretPW") != NULL)
            dt_fail(__FILE__, __LINE__, "%s: the message shows the password: %s", with_secrets[i],
                    dlock_errmsg());
    }
    /* durations: one syntax, a bare number is seconds */
    expect_open_fails("redis://host?lease=1e3", DLOCK_EINVAL, "not a duration");
    expect_open_fails("redis://host?lease=0x10", DLOCK_EINVAL, "not a duration");
    expect_open_fails("redis://host?lease=%202s", DLOCK_EINVAL, "not a duration");
    expect_open_fails("redis://host?lease=400d", DLOCK_EINVAL, "not a duration");
    expect_open_fails("redis://host?lease=9000h", DLOCK_EINVAL, "at most 366 days");
}

static void durations(void)
{
    static const struct {
        const char *text;
        int64_t ms;
    } good[] = {{"0", 0},         {"2", 2000},     {"1.5", 1500},  {"250ms", 250}, {"2s", 2000},
                {"1.25m", 75000}, {"1h", 3600000}, {"0.0005s", 0}, {"10.5ms", 10}};
    static const char *const bad[] = {"",
                                      " 1s",
                                      "1s ",
                                      "-1",
                                      "+1",
                                      "1e3",
                                      "0x10",
                                      "inf",
                                      "nan",
                                      "1.",
                                      ".5",
                                      "1 s",
                                      "1sec",
                                      "1d",
                                      "s",
                                      "1.5.5",
                                      "99999999999999999999h"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ms = -1;
        CHECK_RC(dlock_parse_duration(good[i].text, &ms), DLOCK_OK);
        if (ms != good[i].ms)
            dt_fail(__FILE__, __LINE__, "'%s' read as %lld ms, want %lld", good[i].text,
                    (long long) ms, (long long) good[i].ms);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 7;
        if (dlock_parse_duration(bad[i], &ms) != DLOCK_EINVAL || ms != 7)
            dt_fail(__FILE__, __LINE__, "'%s' was accepted as a duration", bad[i]);
    }
    CHECK_RC(dlock_parse_duration(NULL, NULL), DLOCK_EINVAL);
}

static void good_urls(void)
{
    const char *urls[] = {
        "redis://127.0.0.1",
        "redis://localhost:6380/2",
        "REDIS://[::1]:6379?prefix=app:locks&lease=10s&timeout=500ms&connect_timeout=1s",
        "redis://:pass@host",
        "redis://user:pa%40ss@host:7000/0?pool=4&waiter_lease=2s",
        "redis+unix:///var/run/redis.sock?lease=1m",
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        dlock_client *c = NULL;
        CHECK_RC(dlock_client_open(urls[i], &c), DLOCK_OK); /* lazy: no connection yet */
        dlock_client_close(c);
    }
}

static void unreachable_server(void)
{
    char url[128];
    dlock_client *c;
    dlock_lock *l;
    dlock_status st;
    int port = dt_free_port(); /* nobody listens there */

    snprintf(url, sizeof url, "redis://127.0.0.1:%d?connect_timeout=500ms", port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "Connection refused") != NULL);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    CHECK(strstr(dlock_errmsg(), want) != NULL);
    CHECK_RC(dlock_acquire(l, 1000), DLOCK_EUNREACHABLE);
    CHECK_RC(dlock_query(c, "x", 0, &st), DLOCK_EUNREACHABLE);
    CHECK_RC(dlock_force_unlock(c, "x", 0), DLOCK_EUNREACHABLE);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK_RC(dlock_release(l), DLOCK_ENOTOWNER);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* a name that does not resolve */
    CHECK_RC(dlock_client_open("redis://no-such-host.invalid:6379?connect_timeout=1s", &c),
             DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "no-such-host.invalid") != NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void bad_names_and_leases(void)
{
    dt_server srv;
    dlock_client *c;
    dlock_lock *l = NULL;
    char long_name[DLOCK_NAME_MAX + 2];

    dt_server_start(&srv, "redis", 0, NULL);
    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "", 0, &l), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "empty") != NULL);
    CHECK_RC(dlock_lock_open(c, NULL, 0, &l), DLOCK_EINVAL);
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK_RC(dlock_lock_open(c, long_name, 0, &l), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "limit is 512") != NULL);
    long_name[DLOCK_NAME_MAX] = '\0';
    CHECK_RC(dlock_lock_open(c, long_name, 0, &l), DLOCK_OK); /* exactly the limit */
    dlock_lock_free(l);
    CHECK_RC(dlock_lock_open(c, "line\nbreak", 0, &l), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "control character") != NULL);
    /* names are UTF-8 text: no broken sequences, no C1 controls */
    static const char *const not_text[] = {"bad\xff",
                                           "cut\xc3",
                                           "c1\xc2\x85",
                                           "over\xc0\xaf",
                                           "surrogate\xed\xa0\x80",
                                           "big\xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof not_text / sizeof not_text[0]; i++) {
        CHECK_RC(dlock_lock_open(c, not_text[i], 0, &l), DLOCK_EINVAL);
        CHECK(strstr(dlock_errmsg(), "UTF-8") != NULL);
    }
    CHECK_RC(dlock_lock_open(c, "caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x94\x92", 0, &l), DLOCK_OK);
    dlock_lock_free(l);
    /* every name is a name, braces too: each is its own lock's tag P:{N},
     * so no name spells another lock's keys ('{acct}:fence' is not the
     * fence counter of 'acct') */
    static const char *const braced[] = {
        "{acct}:fence", "{a}:rw", "{a}:w:0123abcd", "a{b", "a{}b", "{a}{b}", "}x", "%7Dx"};
    for (size_t i = 0; i < sizeof braced / sizeof braced[0]; i++) {
        CHECK_RC(dlock_lock_open(c, braced[i], 0, &l), DLOCK_OK);
        CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
        dlock_lock_free(l);
    }
    CHECK(strcmp(dt_server_cli(&srv, "EXISTS 'dlock:{acct}:fence' 'dlock:{{acct}:fence}:fence'"),
                 "1") == 0);
    CHECK(strcmp(dt_server_cli(&srv, "EXISTS %s", "'dlock:{%7Dx}:fence' 'dlock:{%257Dx}:fence'"),
                 "2") == 0);
    CHECK_RC(dlock_lock_open(c, "x", 0x80, &l), DLOCK_EINVAL);
    CHECK(l == NULL);

    /* a name with braces is wrapped like any other (keys.h) */
    CHECK_RC(dlock_lock_open(c, "order:{42}", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK(strcmp(dt_server_cli(&srv, "GET 'dlock:{order:{42}}'"), dlock_lock_token(l)) == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);

    CHECK_RC(dlock_acquire_for(l, 0, 0), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "lease must be at least 20 ms") != NULL);
    CHECK_RC(dlock_acquire_for(l, 0, DLOCK_LEASE_MIN_MS - 1), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire_for(l, 0, -5), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire(l, -7), DLOCK_EINVAL);
    /* leases and waits are bounded: nothing near INT64 overflow reaches the store */
    CHECK_RC(dlock_acquire_for(l, 0, 922337203685477580), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire_for(l, 0, INT64_MAX), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire_for(l, 0, DLOCK_DURATION_MAX_MS + 1), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "at most") != NULL);
    CHECK_RC(dlock_acquire(l, DLOCK_DURATION_MAX_MS + 1), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire(l, INT64_MAX), DLOCK_EINVAL);
    CHECK_RC(dlock_acquire_for(l, 0, DLOCK_DURATION_MAX_MS), DLOCK_OK);
    CHECK_RC(dlock_extend(l, INT64_MAX), DLOCK_EINVAL);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    CHECK_RC(dlock_extend(l, 1000), DLOCK_ENOTOWNER);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK(strcmp(dt_server_cli(&srv, "EXISTS 'dlock:order:{42}'"), "0") == 0);
    dlock_lock_free(l);

    /* NULL handles are refused, not dereferenced */
    CHECK_RC(dlock_acquire(NULL, 0), DLOCK_EINVAL);
    CHECK_RC(dlock_release(NULL), DLOCK_EINVAL);
    CHECK_RC(dlock_lock_check(NULL), DLOCK_EINVAL);
    CHECK_RC(dlock_query(NULL, "x", 0, NULL), DLOCK_EINVAL);
    CHECK_RC(dlock_lock_adopt(c, "x", "", 0, &l), DLOCK_EINVAL);
    CHECK_RC(dlock_lock_adopt(c, "x", "has space", 0, &l), DLOCK_EINVAL);
    CHECK_RC(dlock_lock_adopt(c, "x", "a:b", 0, &l), DLOCK_EINVAL);
    dlock_lock_free(NULL);
    dlock_client_close(NULL);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- garbage */

typedef struct fake {
    pthread_t thread;
    int listen_fd, port;
    const char *answer; /* sent once per command-ish read */
    size_t answer_len;
    int close_after; /* close the connection after answering */
    int per_read;    /* one answer per read, whatever was read (not Redis) */
} fake;

static void *fake_server(void *p)
{
    fake *f = p;
    for (;;) {
        int fd = accept(f->listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char buf[4096];
        ssize_t got;
        while ((got = read(fd, buf, sizeof buf)) > 0) {
            /* one answer per command: each starts a line with '*' */
            int commands = f->per_read;
            for (ssize_t i = 0; i < got && !f->per_read; i++)
                commands += buf[i] == '*' && (i == 0 || buf[i - 1] == '\n');
            for (int k = 0; k < commands; k++) {
                if (send(fd, f->answer, f->answer_len, MSG_NOSIGNAL) < 0)
                    break;
            }
            if (f->close_after)
                break;
        }
        close(fd);
    }
}

static void start_fake(fake *f, const char *answer, size_t len, int close_after, int per_read)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(bind(f->listen_fd, (struct sockaddr *) &a, sizeof a) == 0);
    CHECK(listen(f->listen_fd, 16) == 0);
    CHECK(getsockname(f->listen_fd, (struct sockaddr *) &a, &alen) == 0);
    f->port = ntohs(a.sin_port);
    f->answer = answer;
    f->answer_len = len;
    f->close_after = close_after;
    f->per_read = per_read;
    pthread_create(&f->thread, NULL, fake_server, f);
}

/* A client of url_format (its %d: the fake's port) against a fake that
 * answers `answer`: the try fails with want and words, and nothing holds. */
static void against_fake_at(const char *url_format, const char *answer, size_t len, int close_after,
                            int want, const char *words)
{
    fake f;
    char url[128];
    dlock_client *c;
    dlock_lock *l;
    dlock_status st;

    start_fake(&f, answer, len, close_after, strncmp(url_format, "redis", 5) != 0);
    snprintf(url, sizeof url, url_format, f.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    int rc = dlock_try_acquire(l);
    if (rc != want || strstr(dlock_errmsg(), words) == NULL)
        dt_fail(__FILE__, __LINE__, "answer %.*s: got %d '%s', want %d with '%s'", (int) len,
                answer, rc, dlock_errmsg(), want, words);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    CHECK(dlock_query(c, "x", 0, &st) != DLOCK_OK);
    CHECK(dlock_acquire(l, 300) != DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
    shutdown(f.listen_fd, SHUT_RDWR); /* wakes accept() */
    pthread_join(f.thread, NULL);
    close(f.listen_fd);
}

static void against_fake(const char *answer, size_t len, int close_after, int want,
                         const char *words)
{
    against_fake_at("redis://127.0.0.1:%d?timeout=1s", answer, len, close_after, want, words);
}

static void server_answers_garbage(void)
{
    static const char html[] = "HTTP/1.1 400 Bad Request\r\n\r\n<html>";
    static const char wrong_type[] = "+OK\r\n";
    static const char wrong_shape[] = "*2\r\n:1\r\n$3\r\nabc\r\n";
    static const char bad_length[] = "$-9\r\n";
    static const char error[] = "-ERR unknown command 'EVALSHA'\r\n";
    static const char binary[] = "\x00\x01\x02\xff\r\n";
    static const char mysql_greeting[] = "\x5b\x00\x00\x00\x0a"
                                         "5.5.5-10.11.6-MariaDB";

    /* another service's port: as unreachable as no Redis there, and says
     * what answered */
    against_fake(html, sizeof html - 1, 0, DLOCK_EUNREACHABLE,
                 "answered, but not as Redis (an HTTP server's reply");
    against_fake(wrong_type, sizeof wrong_type - 1, 0, DLOCK_EPROTO, "unexpected reply");
    against_fake(wrong_shape, sizeof wrong_shape - 1, 0, DLOCK_EPROTO, "unexpected reply");
    against_fake(bad_length, sizeof bad_length - 1, 0, DLOCK_EPROTO, "invalid reply");
    against_fake(error, sizeof error - 1, 0, DLOCK_ESERVER, "unknown command");
    against_fake(
        binary, sizeof binary - 1, 0, DLOCK_EUNREACHABLE,
        "answered, but not as Redis (an unknown protocol: none of dlock's stores, nor HTTP or "
        "TLS");
    against_fake(mysql_greeting, sizeof mysql_greeting - 1, 0, DLOCK_EUNREACHABLE,
                 "answered, but not as Redis (a MySQL or MariaDB server's greeting: use mysql://");
    against_fake("", 0, 1, DLOCK_EUNREACHABLE,
                 "answered, but not as Redis (it closed the connection at PING");
    /* a server that never answers is unreachable, never a conflict */
    against_fake("", 0, 0, DLOCK_EUNREACHABLE, "no reply");
    /* an array header no reply of ours can have is refused before it costs
     * memory (hiredis would allocate it whole) */
    int64_t t0 = dt_now_ms();
    against_fake("*2147483647\r\n", 13, 0, DLOCK_EPROTO, "too large");
    against_fake("*100000000\r\n", 12, 0, DLOCK_EPROTO, "too large");
    CHECK(dt_now_ms() - t0 < 5000);
}

#ifdef DLOCK_WITH_POSTGRES
/* Another service at a postgres:// URL's port: unreachable, and the
 * message says what answered (an HTTP server was called a MySQL one, a
 * new user's trial), with and without libpq's SSL request first. */
static void pg_server_answers_garbage(void)
{
    static const char html[] = "HTTP/1.1 400 Bad Request\r\n\r\n<html>";
    static const char mysql_greeting[] = "\x5b\x00\x00\x00\x0a"
                                         "5.5.5-10.11.6-MariaDB";
    const char *urls[] = {"postgres://u:p@127.0.0.1:%d/db?timeout=1s",
                          "postgres://u:p@127.0.0.1:%d/db?timeout=1s&sslmode=disable"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        against_fake_at(urls[i], html, sizeof html - 1, 0, DLOCK_EUNREACHABLE,
                        "H): an HTTP server's port?");
        against_fake_at(urls[i], mysql_greeting, sizeof mysql_greeting - 1, 0, DLOCK_EUNREACHABLE,
                        "a MySQL or MariaDB server greets so");
    }
}
#endif

/* A fake that answers the acquire script with `reply`. */
static void against_fake_reply(const char *reply, int want, const char *words)
{
    fake f;
    char url[128];
    dlock_client *c;
    dlock_lock *l;

    start_fake(&f, reply, strlen(reply), 0, 0);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout=1s", f.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    int rc = dlock_try_acquire(l);
    if (rc != want || strstr(dlock_errmsg(), words) == NULL)
        dt_fail(__FILE__, __LINE__,
                "acquire answered %s: got %d '%s' (fence %llu), want %d with '%s'", reply, rc,
                dlock_errmsg(), (unsigned long long) dlock_lock_fence(l), want, words);
    CHECK_INT(dlock_lock_holds(l), ==, 0);
    dlock_lock_free(l);
    dlock_client_close(c);
    shutdown(f.listen_fd, SHUT_RDWR);
    pthread_join(f.thread, NULL);
    close(f.listen_fd);
}

static void server_answers_bad_fences(void)
{
    /* a fence the server made up is not believed, nor a reply of another
     * shape */
    against_fake_reply(":-7\r\n", DLOCK_EPROTO, "unexpected reply");
    against_fake_reply(":0\r\n", DLOCK_EPROTO, "unexpected reply");
    against_fake_reply("$2\r\n12\r\n", DLOCK_EPROTO, "unexpected reply");
    against_fake_reply("*2\r\n:30000\r\n:7\r\n", DLOCK_EPROTO, "unexpected reply");
    against_fake_reply("*3\r\n:30000\r\n:0\r\n:0\r\n", DLOCK_EPROTO, "unexpected reply");
}

/* Everything a client logs, one line after another. */
typedef struct logged {
    pthread_mutex_t mu;
    char text[4096];
} logged;

static void log_into(int level, const char *msg, void *arg)
{
    logged *into = arg;
    (void) level;
    pthread_mutex_lock(&into->mu);
    size_t n = strlen(into->text);
    snprintf(into->text + n, sizeof into->text - n, "%s\n", msg);
    pthread_mutex_unlock(&into->mu);
}

static void wrong_password(void)
{
    dt_server srv;
    char url[160];
    dlock_client *c;
    dlock_lock *l;

    dt_server_start(&srv, "redis", 0, "--requirepass", "right", NULL);
    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "AUTH") != NULL);
    CHECK(strstr(dlock_errmsg(), "wrong") == NULL || strstr(dlock_errmsg(), "WRONGPASS"));
    int64_t t_wrong = dt_now_ms();
    CHECK_RC(dlock_acquire(l, DLOCK_WAIT_FOREVER), DLOCK_ESERVER); /* refused: not retried */
    CHECK_INT(dt_now_ms() - t_wrong, <, 1000);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* no password at all: said plainly (not the server's protocol error on
     * a long command it cut off, nor a connection "dropped" after it), and
     * at once, also to a wait without a budget */
    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    logged warned = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_RC(dlock_client_set_log(c, DLOCK_LOG_WARN, log_into, &warned), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "NOAUTH") != NULL);
    CHECK(strstr(dlock_errmsg(), "wants a password") != NULL);
    CHECK(strstr(dlock_errmsg(), "Protocol error") == NULL);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(l, DLOCK_WAIT_FOREVER), DLOCK_ESERVER);
    CHECK_INT(dt_now_ms() - t0, <, 1000);
    if (strstr(warned.text, "dropped") != NULL)
        dt_fail(__FILE__, __LINE__, "a spurious warning: %s", warned.text);
    dlock_lock_free(l);
    dlock_client_close(c);

    snprintf(url, sizeof url, "redis://:right@127.0.0.1:%d/3", srv.port);
    CHECK_RC(dlock_client_open(url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK(strcmp(dt_server_cli(&srv, "-a right -n 3 --no-auth-warning EXISTS dlock:{x}"), "1") ==
          0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void scripts_flushed(void)
{
    dt_server srv;
    dlock_client *c;
    dlock_lock *l;

    dt_server_start(&srv, "redis", 0, NULL);
    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    dt_server_cli(&srv, "SCRIPT FLUSH");
    CHECK_RC(dlock_release(l), DLOCK_OK); /* NOSCRIPT: sent again in full */
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void foreign_value_at_the_key(void)
{
    dt_server srv;
    dlock_client *c;
    dlock_lock *l;

    dt_server_start(&srv, "redis", 0, NULL);
    /* something that is not ours, with no expiry, sits at the lock's key */
    dt_server_cli(&srv, "HSET dlock:{taken} not a-string");
    CHECK_RC(dlock_client_open(srv.url, &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "taken", 0, &l), DLOCK_OK);
    /* the acquire script says what it is */
    CHECK_RC(dlock_try_acquire(l), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "WRONGTYPE") != NULL);
    CHECK_RC(dlock_acquire(l, 200), DLOCK_ESERVER);
    CHECK(strstr(dlock_errmsg(), "WRONGTYPE") != NULL);
    CHECK(strcmp(dt_server_cli(&srv, "HGET dlock:{taken} not"), "a-string") == 0); /* untouched */
    dlock_lock_free(l);
    dlock_client_close(c);
}

static void copy_label(const dlock_holder *h, void *arg)
{
    snprintf((char *) arg, 64, "%s", h->label);
}

/* dlock_client_open_with(): options beside the URL, applied as the URL's
 * (over the URL's own), never shown in messages. */
static void open_with_options(void)
{
    dt_server srv;
    dlock_client *c = (dlock_client *) 1;
    dlock_lock *l;
    dlock_status st;
    char url[300], label[64] = "";

    dt_server_start(&srv, "redis", 0, NULL);
    snprintf(url, sizeof url, "%s%slease=60s&label=from-url", srv.url,
             strchr(srv.url, '?') != NULL ? "&" : "?");
    CHECK_RC(dlock_client_open_with(url, "lease=2s&label=night%20job", &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "open-with", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_OK);
    CHECK_RC(dlock_query(c, "open-with", 0, &st), DLOCK_OK);
    CHECK(st.held && st.lease_ms > 0 && st.lease_ms <= 2000); /* the options' lease, not 60 s */
    CHECK_RC(dlock_query_holders(c, "open-with", 0, copy_label, label), DLOCK_OK);
    CHECK(strcmp(label, "night job") == 0);
    CHECK_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);

    /* NULL or "" options: dlock_client_open() */
    CHECK_RC(dlock_client_open_with(srv.url, NULL, &c), DLOCK_OK);
    dlock_client_close(c);
    CHECK_RC(dlock_client_open_with(srv.url, "", &c), DLOCK_OK);
    dlock_client_close(c);

    /* a bad option is refused by name, and the URL shown is the one given */
    c = (dlock_client *) 1;
    CHECK_RC(dlock_client_open_with(srv.url, "lease=soon", &c), DLOCK_EINVAL);
    CHECK(c == NULL && strstr(dlock_errmsg(), "option lease: 'soon'") != NULL);
    CHECK_RC(dlock_client_open_with(srv.url, "frobnicate=1&label=x", &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "unknown option 'frobnicate'") != NULL);
    CHECK(strstr(dlock_errmsg(), "label=") == NULL);
    CHECK_RC(dlock_client_open_with(srv.url, "label", &c), DLOCK_EINVAL);
    CHECK(strstr(dlock_errmsg(), "not key=value") != NULL);

    /* messages after the open: the URL as given, not the options */
    int port = dt_free_port();
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?connect_timeout=500ms", port);
    CHECK_RC(dlock_client_open_with(url, "label=tag&lease=5s", &c), DLOCK_OK);
    CHECK_RC(dlock_lock_open(c, "x", 0, &l), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(l), DLOCK_EUNREACHABLE);
    CHECK(strstr(dlock_errmsg(), "label=") == NULL && strstr(dlock_errmsg(), "lease=") == NULL);
    dlock_lock_free(l);
    dlock_client_close(c);
    dt_server_stop(&srv);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"malformed_urls", malformed_urls},
        {"durations", durations},
        {"good_urls", good_urls},
        {"unreachable_server", unreachable_server},
        {"bad_names_and_leases", bad_names_and_leases},
        {"server_answers_garbage", server_answers_garbage},
#ifdef DLOCK_WITH_POSTGRES
        {"pg_server_answers_garbage", pg_server_answers_garbage},
#endif
        {"server_answers_bad_fences", server_answers_bad_fences},
        {"wrong_password", wrong_password},
        {"scripts_flushed", scripts_flushed},
        {"foreign_value_at_the_key", foreign_value_at_the_key},
        {"open_with_options", open_with_options},
    };
    return DT_RUN(tests);
}
