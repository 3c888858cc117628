/* SPDX-License-Identifier: MIT */
/* sentinel.c - finding the master of a Sentinel-managed Redis (sentinel.h).
 *
 * What the Sentinel client guidelines ask, in order: try the sentinels one
 * after the other, and put the first that answers at the head of the list;
 * SENTINEL GET-MASTER-ADDR-BY-NAME; connect to that address and check with
 * ROLE that it is the master, since a sentinel may still name a demoted
 * one. A dial is rare (a new or broken connection, or a move), so each one
 * asks the sentinels afresh: no cached address can be stale.
 *
 * Outcomes, when no master is found: every sentinel that answered says it
 * knows no master of that name, or refused our AUTH: a clear DLOCK_ESERVER
 * at once (waiting will not help); no sentinel answered, or the master
 * named is down or not the master yet (a failover under way): asked again
 * every RETRY_US until the deadline, then DLOCK_EUNREACHABLE naming what
 * each step saw; no sentinel answered at all: DLOCK_EUNREACHABLE after one
 * round, and the core tries again as it tries any store that does not
 * answer (a store never reached is given a moment, not the deadline). */
#define _GNU_SOURCE /* pipe2 */
#include "sentinel.h"
#include "replies.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SENTINEL_PORT 26379
#define RETRY_US              100000 /* between rounds while no master is found */
#define SENTINEL_WAIT_MS      1000   /* the most one sentinel is given to answer */
#define NAME_MAX_LEN          200
#define WATCH_SLICE_MS        1000 /* the longest the watcher's poll sleeps */
#define WATCH_RETRY_US        500000

typedef struct sentinel_addr {
    char *host;
    int port;
} sentinel_addr;

struct dlock__rsentinel {
    pthread_mutex_t mu; /* guards order and master */
    sentinel_addr sentinels[DLOCK__URL_MAX_HOSTS];
    size_t n;
    char *name;
    char *user, *password; /* the sentinels' own (NULL: none) */
    dlock__log *log;
    atomic_uint moved;
    char master_host[256]; /* the master found last ("" before the first) */
    int master_port;

    /* the watcher: a thread subscribed to +switch-master on a sentinel,
     * started by the first dial */
    pthread_t watcher;
    int watching;          /* under mu: started */
    atomic_int stop;       /* the watcher ends */
    int wake[2];           /* a byte written to wake[1] wakes it to end */
    dlock__rendpoint data; /* the data endpoint's timeouts and TLS, for the watcher's dials */
};

static void sleep_until(int64_t until_us)
{
    int64_t left = until_us - dlock__now_us();
    if (left <= 0)
        return;
    struct timespec ts = {(time_t) (left / 1000000), (long) (left % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

int dlock__rsentinel_new(dlock__url *url, dlock__log *log, dlock__rsentinel **out)
{
    dlock__rsentinel *s;
    const char *user = dlock__url_get(url, "sentinel_user");
    const char *password = dlock__url_get(url, "sentinel_password");

    *out = NULL;
    if (url->nhosts == 0)
        return dlock__fail(DLOCK_EINVAL,
                           "%s: want the sentinels and the master's name "
                           "(redis+sentinel://host:port,host:port/MASTERNAME)",
                           url->text);
    if (url->path[0] == '\0')
        return dlock__fail(DLOCK_EINVAL,
                           "%s: no master name: want redis+sentinel://host:port,.../MASTERNAME",
                           url->text);
    if (strlen(url->path) > NAME_MAX_LEN || strpbrk(url->path, "/ \t\r\n") != NULL)
        return dlock__fail(DLOCK_EINVAL, "%s: master name '%s': want one word of at most %d bytes",
                           url->text, url->path, NAME_MAX_LEN);
    if (user != NULL && password == NULL)
        return dlock__fail(DLOCK_EINVAL, "%s: option sentinel_user needs sentinel_password",
                           url->text);
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->wake[0] = s->wake[1] = -1;
    s->log = log;
    s->name = strdup(url->path);
    s->user = user != NULL ? strdup(user) : NULL;
    s->password = password != NULL ? strdup(password) : NULL;
    int oom = s->name == NULL || (user != NULL && s->user == NULL) ||
              (password != NULL && s->password == NULL);
    for (size_t i = 0; i < url->nhosts && !oom; i++) {
        s->sentinels[i].host = strdup(url->hosts[i].name);
        s->sentinels[i].port = url->hosts[i].port ? url->hosts[i].port : DEFAULT_SENTINEL_PORT;
        oom = s->sentinels[i].host == NULL;
        s->n = i + 1;
    }
    if (oom) {
        dlock__rsentinel_free(s);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    *out = s;
    return DLOCK_OK;
}

void dlock__rsentinel_free(dlock__rsentinel *s)
{
    if (s == NULL)
        return;
    if (s->watching) {
        atomic_store(&s->stop, 1);
        ssize_t w = write(s->wake[1], "", 1);
        (void) w; /* a full pipe is already a wake-up */
        pthread_join(s->watcher, NULL);
    }
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    for (size_t i = 0; i < s->n; i++)
        free(s->sentinels[i].host);
    free(s->name);
    free(s->user);
    free(s->password);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const char *dlock__rsentinel_master_name(const dlock__rsentinel *s)
{
    return s->name;
}

/* ---------------------------------------------------------------- asking */

enum answer {
    ANSWER_ADDR,    /* the master's address */
    ANSWER_UNKNOWN, /* no master of that name */
    ANSWER_REFUSED, /* our AUTH */
    ANSWER_FOREIGN, /* a server that is no sentinel (a plain Redis: no command SENTINEL) */
    ANSWER_NONE,    /* unreachable, or no reply in time */
};

/* Asks the sentinel at a for the master's address. why: what went wrong. */
static enum answer ask(dlock__rsentinel *s, const sentinel_addr *a, const dlock__rendpoint *data,
                       int64_t deadline_us, char *host, size_t host_len, int *port, char *why,
                       size_t why_len)
{
    char label[300];
    int code = DLOCK_OK;
    enum answer got = ANSWER_NONE;

    snprintf(label, sizeof label,
             strchr(a->host, ':') ? "sentinel [%.250s]:%d" : "sentinel %.250s:%d", a->host,
             a->port);
    dlock__rendpoint ep = {
        .host = a->host,
        .port = a->port,
        .user = s->user,
        .password = s->password,
        .connect_timeout_ms = data->connect_timeout_ms < SENTINEL_WAIT_MS ? data->connect_timeout_ms
                                                                          : SENTINEL_WAIT_MS,
        .command_timeout_ms = data->command_timeout_ms < SENTINEL_WAIT_MS ? data->command_timeout_ms
                                                                          : SENTINEL_WAIT_MS,
        .tls = data->tls, /* rediss+sentinel://: the sentinels speak TLS too */
        .label = label,
        .log = s->log, /* insecure=1's warning, if this is the first connection */
        .tls_scheme = "rediss+sentinel://",
    };
    dlock__rlink *ctx = dlock__rconn_dial_at(&ep, deadline_us, &code);
    if (ctx == NULL && code == DLOCK_ESERVER && s->password == NULL &&
        strstr(dlock_errmsg(), "NOAUTH") != NULL)
        snprintf(why, why_len,
                 "%s wants a password (NOAUTH): give it as option sentinel_password=", label);
    else if (ctx == NULL)
        snprintf(why, why_len, "%s", dlock_errmsg());
    if (ctx == NULL)
        return code == DLOCK_ESERVER ? ANSWER_REFUSED : ANSWER_NONE;
    redisReply *r = dlock__rlink_commandf(ctx, dlock__now_us() + ep.command_timeout_ms * 1000,
                                          "SENTINEL GET-MASTER-ADDR-BY-NAME %s", s->name);
    if (r == NULL) {
        snprintf(why, why_len, "%s: SENTINEL GET-MASTER-ADDR-BY-NAME: %s", label, ctx->errstr);
    } else if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY && r->elements == 0)) {
        snprintf(why, why_len, "%s knows no master named '%s'", label, s->name);
        got = ANSWER_UNKNOWN;
    } else if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "unknown command") != NULL) {
        /* a Redis server, not its sentinel: another service at the port,
         * as far as this URL goes (the URL is what to fix) */
        const char *open = strchr(a->host, ':') ? "[" : "", *close = open[0] ? "]" : "";
        snprintf(why, why_len,
                 "%s%.250s%s:%d answered, but not as a Redis Sentinel (%.*s: a Redis server; "
                 "for that server use %s://%s%.250s%s:%d, for its sentinels "
                 "%s://SENTINEL:PORT,.../MASTERNAME)",
                 open, a->host, close, a->port, DLOCK__REASON(r),
                 data->tls != NULL ? "rediss" : "redis", open, a->host, close, a->port,
                 data->tls != NULL ? "rediss+sentinel" : "redis+sentinel");
        got = ANSWER_FOREIGN;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, why_len, "%s refused SENTINEL GET-MASTER-ADDR-BY-NAME: %.*s%s", label,
                 DLOCK__REASON(r),
                 strncmp(r->str, "NOAUTH", 6) == 0
                     ? " (give its password: option sentinel_password=...)"
                     : "");
        got = ANSWER_REFUSED;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING && r->element[0]->len < host_len &&
               atoi(r->element[1]->str) > 0 && atoi(r->element[1]->str) < 65536) {
        snprintf(host, host_len, "%s", r->element[0]->str);
        *port = atoi(r->element[1]->str);
        got = ANSWER_ADDR;
    } else {
        snprintf(why, why_len, "%s: unexpected reply to SENTINEL GET-MASTER-ADDR-BY-NAME", label);
    }
    freeReplyObject(r);
    dlock__rlink_close(ctx);
    return got;
}

/* The role a node says it has ("master", "slave", ...) into role. */
static int role_of(dlock__rlink *ctx, int64_t deadline_us, char *role, size_t len)
{
    redisReply *r = dlock__rlink_commandf(ctx, deadline_us, "ROLE");
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
             r->element[0]->type == REDIS_REPLY_STRING;
    if (ok)
        snprintf(role, len, "%s", r->element[0]->str);
    else
        dlock__reply_reason(r, "no reply to ROLE", role, len);
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* One round: the sentinels in turn until one gives an address. */
static enum answer find_master(dlock__rsentinel *s, const dlock__rendpoint *data,
                               int64_t deadline_us, char *host, size_t host_len, int *port,
                               char *why, size_t why_len)
{
    sentinel_addr order[DLOCK__URL_MAX_HOSTS];
    char one[1024];
    enum answer best = ANSWER_NONE;
    size_t n;

    pthread_mutex_lock(&s->mu);
    n = s->n;
    memcpy(order, s->sentinels, n * sizeof *order); /* hosts stay owned by s */
    pthread_mutex_unlock(&s->mu);
    why[0] = '\0';
    size_t i = 0;
    for (; i < n && dlock__now_us() < deadline_us; i++) {
        enum answer a = ask(s, &order[i], data, deadline_us, host, host_len, port, one, sizeof one);
        if (a == ANSWER_ADDR) {
            if (i > 0) {
                /* the one that answered goes first from now on */
                pthread_mutex_lock(&s->mu);
                for (size_t k = 0; k < s->n; k++) {
                    if (s->sentinels[k].host == order[i].host) {
                        sentinel_addr first = s->sentinels[k];
                        memmove(&s->sentinels[1], &s->sentinels[0], k * sizeof first);
                        s->sentinels[0] = first;
                        break;
                    }
                }
                pthread_mutex_unlock(&s->mu);
            }
            return ANSWER_ADDR;
        }
        /* an answer beats no answer in what is reported; each sentinel
         * of the same kind of failure is named (the first alone was) */
        if (why[0] == '\0' || a < best) {
            snprintf(why, why_len, "%s", one);
            best = a;
        } else if (a == best) {
            size_t used = strlen(why);
            snprintf(why + used, why_len - used, "; %s", one);
        }
    }
    if (why[0] == '\0')
        snprintf(why, why_len, "no sentinel asked before the deadline");
    else if (i < n) {
        /* a silent one took the time: the others are named, not asked */
        size_t used = strlen(why);
        used += (size_t) snprintf(why + used, why_len > used ? why_len - used : 0,
                                  "; not asked in the time left:");
        for (size_t k = i; k < n && used < why_len; k++)
            used += (size_t) snprintf(why + used, why_len - used,
                                      strchr(order[k].host, ':') ? "%s [%s]:%d" : "%s %s:%d",
                                      k > i ? "," : "", order[k].host, order[k].port);
    }
    return best;
}

/* Notes the master found; moves the endpoint if it changed. */
static void found(dlock__rsentinel *s, const char *host, int port)
{
    int moved = 0, first = 0;

    pthread_mutex_lock(&s->mu);
    if (strcmp(s->master_host, host) != 0 || s->master_port != port) {
        first = s->master_host[0] == '\0';
        moved = !first;
        snprintf(s->master_host, sizeof s->master_host, "%s", host);
        s->master_port = port;
        if (moved)
            atomic_fetch_add(&s->moved, 1);
    }
    pthread_mutex_unlock(&s->mu);
    if (moved && s->log != NULL)
        DLOCK__LOG(s->log, DLOCK_LOG_WARN, "redis+sentinel: the master of %s is now %s:%d", s->name,
                   host, port);
}

/* ---------------------------------------------------------------- watching */

/* Sleeps `us` unless the watcher is to end. */
static void nap(dlock__rsentinel *s, int64_t us)
{
    struct pollfd p = {.fd = s->wake[0], .events = POLLIN};
    if (!atomic_load(&s->stop))
        poll(&p, 1, (int) (us / 1000));
}

/* Subscribes to +switch-master on the first sentinel that lets it; the
 * link, or NULL. */
static dlock__rlink *watch_subscribe(dlock__rsentinel *s)
{
    sentinel_addr order[DLOCK__URL_MAX_HOSTS];
    char label[300];
    size_t n;

    pthread_mutex_lock(&s->mu);
    n = s->n;
    memcpy(order, s->sentinels, n * sizeof *order);
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < n && !atomic_load(&s->stop); i++) {
        int code = DLOCK_OK;
        snprintf(label, sizeof label, "sentinel %.250s:%d", order[i].host, order[i].port);
        dlock__rendpoint ep = {
            .host = order[i].host,
            .port = order[i].port,
            .user = s->user,
            .password = s->password,
            .connect_timeout_ms = SENTINEL_WAIT_MS,
            .command_timeout_ms = SENTINEL_WAIT_MS,
            .tls = s->data.tls,
            .label = label,
            .log = s->log,
            .tls_scheme = "rediss+sentinel://",
        };
        dlock__rlink *ctx =
            dlock__rconn_dial_at(&ep, dlock__now_us() + SENTINEL_WAIT_MS * 1000, &code);
        if (ctx == NULL)
            continue;
        redisReply *r = dlock__rlink_commandf(ctx, dlock__now_us() + SENTINEL_WAIT_MS * 1000,
                                              "SUBSCRIBE +switch-master");
        int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3;
        freeReplyObject(r);
        if (ok)
            return ctx;
        dlock__rlink_close(ctx);
    }
    return NULL;
}

/* A message of +switch-master: "<name> <old ip> <old port> <new ip> <new port>". */
static void on_message(dlock__rsentinel *s, const redisReply *r)
{
    char name[NAME_MAX_LEN + 1], old_host[256], new_host[256];
    int old_port, new_port;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return;
    if (sscanf(r->element[2]->str, "%200s %255s %d %255s %d", name, old_host, &old_port, new_host,
               &new_port) == 5 &&
        strcmp(name, s->name) == 0 && new_port > 0 && new_port < 65536)
        found(s, new_host, new_port);
}

/* The watcher: the sentinels announce a failover (+switch-master) as soon
 * as it is done, while the old master may still take writes from the
 * clients connected to it, for seconds (until the sentinels reconfigure
 * it, and only then kill its clients): every connection must leave it
 * now, not when it is demoted. A switch while the watcher was not
 * subscribed is found by asking once after each subscription. */
static void *watch_run(void *arg)
{
    dlock__rsentinel *s = arg;
    dlock__rlink *link = NULL;

    while (!atomic_load(&s->stop)) {
        if (link == NULL) {
            link = watch_subscribe(s);
            if (link == NULL) {
                nap(s, WATCH_RETRY_US);
                continue;
            }
            char host[256], why[1024];
            int port = 0;
            if (find_master(s, &s->data, dlock__now_us() + SENTINEL_WAIT_MS * 1000, host,
                            sizeof host, &port, why, sizeof why) == ANSWER_ADDR)
                found(s, host, port);
        }
        /* bytes already inside a TLS link show on no poll() */
        struct pollfd p[2] = {{.fd = link->fd, .events = POLLIN},
                              {.fd = s->wake[0], .events = POLLIN}};
        int ready = dlock__rlink_pending(link) ? 1 : poll(p, 2, WATCH_SLICE_MS);
        if (!dlock__rlink_pending(link) &&
            (ready == 0 || (ready < 0 && errno == EINTR) || (ready > 0 && !p[0].revents)))
            continue;
        char buf[4096];
        redisReader *reader = link->reader;
        /* a TLS record with no data in it (a session ticket) is no message */
        ssize_t got =
            ready > 0 ? dlock__rlink_read(link, buf, sizeof buf, dlock__now_us() + 1000) : -1;
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        int broken = got <= 0 || redisReaderFeed(reader, buf, (size_t) got) != REDIS_OK;
        while (!broken) {
            void *reply = NULL;
            if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
                broken = 1;
                break;
            }
            if (reply == NULL)
                break;
            on_message(s, reply);
            freeReplyObject(reply);
        }
        if (broken) {
            dlock__rlink_close(link);
            link = NULL;
            nap(s, WATCH_RETRY_US / 5);
        }
    }
    dlock__rlink_close(link);
    return NULL;
}

static void start_watching(dlock__rsentinel *s, const dlock__rendpoint *ep)
{
    pthread_mutex_lock(&s->mu);
    if (!s->watching && (s->wake[0] >= 0 || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) == 0)) {
        s->data.connect_timeout_ms = ep->connect_timeout_ms;
        s->data.command_timeout_ms = ep->command_timeout_ms;
        s->data.tls = ep->tls;
        s->watching = dlock__thread_start(&s->watcher, watch_run, s) == 0;
    }
    pthread_mutex_unlock(&s->mu);
}

static dlock__rlink *dial_master(const dlock__rendpoint *ep, int64_t deadline_us, int *code)
{
    dlock__rsentinel *s = ep->node;
    char host[256], why[1024], label[700], role[128];
    int port = 0;

    start_watching(s, ep);
    for (;;) {
        enum answer a = find_master(s, ep, deadline_us, host, sizeof host, &port, why, sizeof why);
        if (a == ANSWER_UNKNOWN || a == ANSWER_REFUSED) {
            *code = DLOCK_ESERVER;
            dlock__fail(*code, "%s: %s", ep->label, why);
            return NULL;
        }
        if (a == ANSWER_FOREIGN) {
            /* no sentinel there (as for another service at the port, a
             * store never reached: the core gives it a moment, no more) */
            *code = DLOCK_EUNREACHABLE;
            dlock__fail(*code, "%s: %s", ep->label, why);
            return NULL;
        }
        if (a == ANSWER_NONE) {
            /* no sentinel answered: the core's outage rules say how long
             * to try again (a store never reached: a moment) */
            *code = DLOCK_EUNREACHABLE;
            dlock__fail(*code, "%s: no sentinel answered: %s", ep->label, why);
            return NULL;
        }
        if (a == ANSWER_ADDR) {
            /* a sentinel answered: the store was reached, so a master that
             * does not answer is an outage (a failover under way), given
             * unreachable_wait, not the moment a wrong address is */
            if (ep->reached != NULL)
                atomic_store(ep->reached, 1);
            found(s, host, port);
            dlock__rendpoint at = *ep;
            at.host = host;
            at.port = port;
            at.unix_path = NULL;
            snprintf(label, sizeof label, "%.400s (master %.250s:%d)", ep->label, host, port);
            at.label = label;
            dlock__rlink *ctx = dlock__rconn_dial_at(&at, deadline_us, code);
            if (ctx == NULL && *code == DLOCK_ESERVER)
                return NULL; /* our AUTH refused by the data node: no wait helps */
            if (ctx == NULL) {
                snprintf(why, sizeof why, "%s", dlock_errmsg());
            } else if (role_of(ctx, dlock__now_us() + ep->command_timeout_ms * 1000, role,
                               sizeof role) == 0 &&
                       strcmp(role, "master") == 0) {
                return ctx;
            } else {
                snprintf(why, sizeof why,
                         "%.700s: the sentinels name it, but it says its role is %.128s", label,
                         role);
                dlock__rlink_close(ctx);
                /* connections made to it before are to a node that is
                 * not the master: they are made again */
                atomic_fetch_add(&s->moved, 1);
            }
        }
        if (dlock__now_us() + RETRY_US >= deadline_us)
            break;
        sleep_until(dlock__now_us() + RETRY_US);
    }
    *code = DLOCK_EUNREACHABLE;
    dlock__fail(*code, "%s: no master found in time: %s", ep->label, why);
    return NULL;
}

void dlock__rsentinel_attach(dlock__rsentinel *s, dlock__rendpoint *ep)
{
    ep->dial = dial_master;
    ep->node = s;
    ep->moved = &s->moved;
    ep->tls_scheme = "rediss+sentinel://";
}
