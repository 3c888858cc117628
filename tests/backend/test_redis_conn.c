/* SPDX-License-Identifier: MIT */
/* test_redis_conn.c - the pipelined connection that threads share
 * (src/backend/redis/conn.c), against a real redis-server: commands issued
 * while replies are due travel together, and every reply reaches the
 * thread that asked, in order, even when some of them gave up waiting. */
#include "../support/harness.h"
#include "backend/redis/conn.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static dt_server srv;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static dlock__rconn *open_conn(void)
{
    dlock__rendpoint ep = {.host = "127.0.0.1",
                           .port = srv.port,
                           .connect_timeout_ms = 2000,
                           .command_timeout_ms = 20000,
                           .label = srv.url};
    dlock__rconn *c;
    CHECK_RC(dlock__rconn_new(&ep, &c), DLOCK_OK);
    return c;
}

/* One command; returns its reply (the caller frees it) or NULL with *rc. */
static redisReply *call(dlock__rconn *c, int64_t timeout_ms, int *rc, int argc, ...)
{
    const char *argv[8];
    size_t lens[8];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++) {
        argv[i] = va_arg(ap, const char *);
        lens[i] = strlen(argv[i]);
    }
    va_end(ap);
    dlock__rcmd cmd = {(size_t) argc, argv, lens};
    redisReply *r = NULL;
    *rc = dlock__rconn_call(c, 1, &cmd, now_us() + timeout_ms * 1000, &r);
    return *rc == DLOCK_OK ? r : NULL;
}

static long stat_number(const char *field)
{
    const char *at = strstr(dt_server_cli(&srv, "INFO stats"), field);
    return at != NULL ? strtol(at + strlen(field), NULL, 10) : -1;
}

typedef struct echo_arg {
    dlock__rconn *c;
    char word[32];
    int64_t timeout_ms;
    int rc;
    int matched;   /* the reply was this thread's own word */
    char msg[256]; /* dlock_errmsg() of the call */
} echo_arg;

static void *echo(void *p)
{
    echo_arg *e = p;
    redisReply *r = call(e->c, e->timeout_ms, &e->rc, 2, "ECHO", e->word);
    e->matched = r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, e->word) == 0;
    snprintf(e->msg, sizeof e->msg, "%s", dlock_errmsg());
    freeReplyObject(r);
    return NULL;
}

typedef struct blpop_arg {
    dlock__rconn *c;
    int rc;
    int popped;
} blpop_arg;

/* Holds a reply due on the connection until the test pushes to `gate`. */
static void *blpop(void *p)
{
    blpop_arg *b = p;
    redisReply *r = call(b->c, 15000, &b->rc, 3, "BLPOP", "gate", "10");
    b->popped = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2;
    freeReplyObject(r);
    return NULL;
}

static void start_blocked(dlock__rconn *c, blpop_arg *b, pthread_t *t)
{
    *b = (blpop_arg){c, -1, 0};
    pthread_create(t, NULL, blpop, b);
    DT_WAIT_UNTIL(strstr(dt_server_cli(&srv, "CLIENT LIST"), "cmd=blpop") != NULL, 5000);
}

/* While the BLPOP's reply is due, 16 threads' commands wait in the client
 * and reach the server in one read; each thread gets its own reply. */
static void commands_gather_while_replies_due(void)
{
    enum { N = 16 };
    dt_server_start(&srv, "redis", 0, NULL);
    dlock__rconn *c = open_conn();
    blpop_arg b;
    pthread_t tb, t[N];
    echo_arg e[N];

    start_blocked(c, &b, &tb);
    long reads0 = stat_number("total_reads_processed:");
    for (int i = 0; i < N; i++) {
        e[i] = (echo_arg){.c = c, .timeout_ms = 15000, .rc = -1};
        snprintf(e[i].word, sizeof e[i].word, "word-%d", i);
        pthread_create(&t[i], NULL, echo, &e[i]);
    }
    DT_WAIT_UNTIL(dlock__rconn_held_back(c) == N, 5000);
    CHECK(strcmp(dt_server_cli(&srv, "RPUSH gate x"), "1") == 0);
    pthread_join(tb, NULL);
    CHECK_RC(b.rc, DLOCK_OK);
    CHECK(b.popped);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECK_RC(e[i].rc, DLOCK_OK);
        CHECK(e[i].matched);
    }
    /* the batch (one read, two if the bytes came in two segments) plus
     * about four of the test's own redis-cli calls (a read each, and one
     * more when a connection closes): far from one read per command */
    CHECK_INT(stat_number("total_reads_processed:") - reads0, <, N / 2);
    CHECK_INT(dlock__rconn_held_back(c), ==, 0);
    dlock__rconn_free(c);
}

static long echo_calls(void)
{
    const char *at = strstr(dt_server_cli(&srv, "INFO commandstats"), "cmdstat_echo:calls=");
    return at != NULL ? strtol(at + strlen("cmdstat_echo:calls="), NULL, 10) : 0;
}

/* A thread whose deadline passes while its command is held back gives up,
 * and its command is taken back: it never runs, and the commands held back
 * before and after it still reach the server and their own threads. */
static void held_back_command_taken_back(void)
{
    dt_server_start(&srv, "redis", 0, NULL);
    dlock__rconn *c = open_conn();
    blpop_arg b;
    pthread_t tb, t[3];
    echo_arg e[3] = {{.c = c, .word = "before", .timeout_ms = 15000, .rc = -1},
                     {.c = c, .word = "gives-up", .timeout_ms = 100, .rc = -1},
                     {.c = c, .word = "after", .timeout_ms = 15000, .rc = -1}};

    start_blocked(c, &b, &tb);
    for (int i = 0; i < 3; i++) {
        pthread_create(&t[i], NULL, echo, &e[i]);
        DT_WAIT_UNTIL(dlock__rconn_held_back(c) == (size_t) i + 1, 5000);
    }
    pthread_join(t[1], NULL);
    CHECK_RC(e[1].rc, DLOCK_EUNREACHABLE);
    CHECK(strstr(e[1].msg, "were not sent") != NULL);
    CHECK_INT(dlock__rconn_held_back(c), ==, 2);
    CHECK(strcmp(dt_server_cli(&srv, "RPUSH gate x"), "1") == 0);
    pthread_join(tb, NULL);
    CHECK_RC(b.rc, DLOCK_OK);
    CHECK(b.popped);
    for (int i = 0; i < 3; i += 2) {
        pthread_join(t[i], NULL);
        CHECK_RC(e[i].rc, DLOCK_OK);
        CHECK(e[i].matched);
    }
    CHECK_INT(echo_calls(), ==, 2); /* "gives-up" never reached the server */

    echo_arg late = {.c = c, .word = "late", .timeout_ms = 5000, .rc = -1};
    echo(&late);
    CHECK_RC(late.rc, DLOCK_OK);
    CHECK(late.matched);
    dlock__rconn_free(c);
}

int main(int argc, char **argv)
{
    static const dt_test tests[] = {
        {"commands_gather_while_replies_due", commands_gather_while_replies_due},
        {"held_back_command_taken_back", held_back_command_taken_back},
    };
    return DT_RUN(tests);
}
