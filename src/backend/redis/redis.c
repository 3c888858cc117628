/* redis.c - the single-server Redis backend: URL, keys, and each step of
 * the lock protocol as one script call.
 *
 * Keys of lock N under prefix P share the hash tag {N} (or N's own tag), so
 * a lock lives in one Cluster slot; the layout is in scripts/README.md. All
 * commands of one lock go over one of the client's pooled connections,
 * picked by the key's hash, and calls from many threads are pipelined
 * there (conn.c). */
#include "../../core/clock.h"
#include "../../core/error.h"
#include "../backend.h"
#include "conn.h"
#include "scripts.h"
#include "subscriber.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT   6379
#define DEFAULT_PREFIX "dlock"
#define DEFAULT_POOL   2
#define MAX_POOL       64
#define PREFIX_MAX     64
#define RENEW_BATCH    256 /* keys per renewal script call */

typedef struct rbackend {
    dlock__client_cfg cfg;
    char *prefix;
    dlock__rendpoint ep;
    char *host, *unix_path, *user, *password, *label;
    dlock__rconn *pool[MAX_POOL];
    size_t npool;
    dlock__board *board;

    pthread_mutex_t mu; /* guards sub */
    dlock__rsub *sub;
} rbackend;

typedef struct rlock {
    int simple;
    dlock__rconn *conn;
    /* the lock (P:{N}, or N itself in simple mode) and its fence counter;
     * the scripts derive the rest from the lock key */
    char *keys[2];
    size_t key_lens[2];
} rlock;

/* ---------------------------------------------------------------- scripts */

/* Argument vector of one EVALSHA: "EVALSHA" sha numkeys keys... args... */
typedef struct evalcall {
    enum dlock__script_id script;
    size_t argc;
    const char **argv;
    size_t *lens;
} evalcall;

/* The command of a call: EVALSHA <sha>, or EVAL <body>, then the rest. */
static dlock__rcmd as_command(const evalcall *e, int with_body)
{
    const dlock__script *s = dlock__script_get(e->script);
    e->argv[0] = with_body ? "EVAL" : "EVALSHA";
    e->lens[0] = with_body ? 4 : 7;
    e->argv[1] = with_body ? s->body : s->sha;
    e->lens[1] = with_body ? s->len : 40;
    return (dlock__rcmd){e->argc, e->argv, e->lens};
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

static void free_replies(redisReply **replies, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        freeReplyObject(replies[j]);
        replies[j] = NULL;
    }
}

/* Runs n script calls as one pipelined batch on c; a script the server
 * does not have is sent again in full. Replies that are errors are turned
 * into DLOCK_ESERVER. On DLOCK_OK every replies[i] is set. */
static int run_scripts(dlock__rconn *c, size_t n, const evalcall *calls, int64_t deadline,
                       redisReply **replies)
{
    dlock__rcmd stack_cmds[8] = {{0}}, *cmds = n <= 8 ? stack_cmds : calloc(n, sizeof *cmds);
    int rc;

    if (cmds == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        cmds[i] = as_command(&calls[i], 0);
    rc = dlock__rconn_call(c, n, cmds, deadline, replies);
    if (cmds != stack_cmds)
        free(cmds);
    if (rc != DLOCK_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!is_noscript(replies[i]))
            continue;
        /* Flushed scripts (restart, SCRIPT FLUSH): EVAL loads them again. */
        freeReplyObject(replies[i]);
        replies[i] = NULL;
        dlock__rcmd full = as_command(&calls[i], 1);
        rc = dlock__rconn_call(c, 1, &full, deadline, &replies[i]);
        if (rc != DLOCK_OK) {
            free_replies(replies, n);
            return rc;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (replies[i]->type == REDIS_REPLY_ERROR) {
            const char *e = replies[i]->str;
            int auth = strncmp(e, "NOAUTH", 6) == 0 || strstr(e, "unauthenticated") != NULL;
            rc = dlock__fail(DLOCK_ESERVER, "%s: server refused %s: %s%s", dlock__rconn_label(c),
                             dlock__script_get(calls[i].script)->name, e,
                             auth ? " (NOAUTH: the server wants a password: "
                                    "redis://:PASSWORD@host)"
                                  : "");
            free_replies(replies, n);
            break;
        }
    }
    return rc;
}

static int run_script(dlock__rconn *c, const evalcall *call, int64_t deadline, redisReply **reply)
{
    return run_scripts(c, 1, call, deadline, reply);
}

/* ---------------------------------------------------------------- replies */

static int bad_reply(const rbackend *b, const char *what, const redisReply *r)
{
    static const char *types[] = {"?", "string", "array", "integer", "nil", "status", "error"};
    int t = r != NULL && r->type >= 1 && r->type <= 6 ? r->type : 0;
    return dlock__fail(DLOCK_EPROTO, "%s: unexpected reply to %s (%s)", b->label, what, types[t]);
}

/* An array reply of at least n integers. */
static int int_array(const redisReply *r, size_t n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < n)
        return 0;
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- keys */

/* Braces in a name are allowed only as one Redis Cluster hash tag with
 * something inside, which then decides the slot of all the lock's keys. */
static int name_has_tag(const char *name, int *has_tag)
{
    const char *open = strchr(name, '{'), *close = strchr(name, '}');

    *has_tag = 0;
    if (open == NULL && close == NULL)
        return DLOCK_OK;
    if (open != NULL && close != NULL && close > open + 1 && strchr(open + 1, '{') == NULL &&
        strchr(close + 1, '}') == NULL && strchr(close + 1, '{') == NULL) {
        *has_tag = 1;
        return DLOCK_OK;
    }
    return dlock__fail(DLOCK_EINVAL,
                       "lock name '%s': braces are allowed only as one Redis "
                       "Cluster hash tag, e.g. 'order:{42}'",
                       name);
}

static char *join(const char *a, const char *b, const char *c, const char *d, size_t *len)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + strlen(d);
    char *s = malloc(n + 1);
    if (s != NULL)
        snprintf(s, n + 1, "%s%s%s%s", a, b, c, d);
    *len = n;
    return s;
}

static uint32_t hash_key(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s != '\0')
        h = (h ^ (unsigned char) *s++) * 16777619u;
    return h;
}

static void free_rlock(rlock *l)
{
    if (l == NULL)
        return;
    for (int i = 0; i < 2; i++)
        free(l->keys[i]);
    free(l);
}

static int lock_new(void *be, const char *name, unsigned flags, void **out)
{
    rbackend *b = be;
    rlock *l;
    int has_tag, rc;
    size_t unused;

    *out = NULL;
    rc = name_has_tag(name, &has_tag);
    if (rc != DLOCK_OK)
        return rc;
    l = calloc(1, sizeof *l);
    if (l == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    /* base: P:{N}, or P:N when N carries its own tag */
    const char *open = has_tag ? ":" : ":{", *close = has_tag ? "" : "}";
    size_t base_len;
    char *base = join(b->prefix, open, name, close, &base_len);
    if (base == NULL)
        goto oom;
    l->simple = (flags & DLOCK_SIMPLE) != 0;
    if (l->simple) {
        l->keys[0] = strdup(name);
        l->key_lens[0] = strlen(name);
    } else {
        l->keys[0] = join(base, "", "", "", &l->key_lens[0]);
    }
    l->keys[1] = join(base, ":fence", "", "", &l->key_lens[1]);
    free(base);
    base = NULL;
    if (l->keys[0] == NULL || l->keys[1] == NULL)
        goto oom;
    l->conn = b->pool[hash_key(l->keys[0]) % b->npool];
    (void) unused;
    *out = l;
    return DLOCK_OK;
oom:
    free(base);
    free_rlock(l);
    return dlock__fail(DLOCK_ENOMEM, "out of memory");
}

static void lock_free(void *be, void *bl)
{
    (void) be;
    free_rlock(bl);
}

/* ---------------------------------------------------------------- waiting */

static int can_notify(void *be, void *bl)
{
    rbackend *b = be;
    int ready;

    if (((rlock *) bl)->simple)
        return 0; /* other clients publish nothing: poll */
    pthread_mutex_lock(&b->mu);
    ready = b->sub != NULL && dlock__rsub_ready(b->sub);
    pthread_mutex_unlock(&b->mu);
    return ready ? 2 : 1;
}

static int prepare_wait(void *be, void *bl, int64_t deadline_us)
{
    rbackend *b = be;
    char pattern[PREFIX_MAX + 32];
    int rc = DLOCK_OK;
    int64_t cap = dlock__now_us() + (b->ep.connect_timeout_ms + b->cfg.command_timeout_ms) * 1000;

    (void) bl;
    pthread_mutex_lock(&b->mu);
    if (b->sub == NULL) {
        snprintf(pattern, sizeof pattern, "%s:*:wake:%s", b->prefix, b->cfg.client_id);
        rc = dlock__rsub_new(&b->ep, pattern, b->board, &b->sub);
    }
    pthread_mutex_unlock(&b->mu);
    return rc != DLOCK_OK ? rc : dlock__rsub_connect(b->sub, deadline_us < cap ? deadline_us : cap);
}

static enum dlock__wake wait_wake(void *be, dlock__waiter *w, int64_t until_us)
{
    rbackend *b = be;
    /* The subscriber exists: prepare_wait made it before anyone queued. */
    if (!dlock__rsub_ready(b->sub))
        prepare_wait(be, NULL, until_us); /* dropped meanwhile: come back */
    return dlock__rsub_wait(b->sub, w, until_us);
}

/* ---------------------------------------------------------------- steps */

/* Decimal text of a non-negative count or duration into buf (24 bytes);
 * returns its length. (snprintf was 5% of a lock cycle's instructions.) */
static size_t put_number(char *buf, int64_t v)
{
    char digits[24];
    size_t k = 0, n = 0;
    uint64_t u = v < 0 ? 0 : (uint64_t) v;
    do
        digits[k++] = (char) ('0' + u % 10);
    while ((u /= 10) != 0);
    while (k > 0)
        buf[n++] = digits[--k];
    buf[n] = '\0';
    return n;
}
#define NUM(buf, v) put_number((buf), (int64_t) (v))

/* Puts the lock's first nkeys keys (1: the lock; 2: and its fence counter)
 * as a script's keys at argv[2] (after EVALSHA and the digest). Returns the
 * next free index. */
static size_t put_keys(const rlock *l, const char **argv, size_t *lens, size_t nkeys)
{
    argv[2] = nkeys == 1 ? "1" : "2";
    lens[2] = 1;
    for (size_t i = 0; i < nkeys; i++) {
        argv[3 + i] = l->keys[i];
        lens[3 + i] = l->key_lens[i];
    }
    return 3 + nkeys;
}

/* The element of an EXEC reply, or NULL if the shape is wrong. */
static const redisReply *exec_element(const redisReply *r, size_t i)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements > i ? r->element[i] : NULL;
}

/*
 * An attempt that will not queue, without a script: MULTI, SET NX PX,
 * INCR, PTTL, EXEC, one round trip and a fraction of a script's cost on the
 * server. The INCR runs even when the SET finds the lock held, so fences
 * skip numbers; they still strictly increase from one holder to the next,
 * because a holder's INCR comes after every earlier holder's and before
 * every later one's. PTTL tells a refused caller how long the holder has.
 * (A caller that already holds the lock under its token, after a lost
 * reply, is refused here; when it waits, the queueing script finds it.)
 */
static int take_plain(rbackend *b, rlock *l, dlock__attempt *a, const char *lease, size_t nlease)
{
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    const char *set[] = {"SET", l->keys[0], a->token, "NX", "PX", lease};
    const char *incr[] = {"INCR", l->keys[1]}, *pttl[] = {"PTTL", l->keys[0]};
    size_t multi_len[] = {5}, exec_len[] = {4}, incr_len[] = {4, l->key_lens[1]};
    size_t set_len[] = {3, l->key_lens[0], strlen(a->token), 2, 2, nlease};
    size_t pttl_len[] = {4, l->key_lens[0]};
    dlock__rcmd cmds[5] = {{1, multi, multi_len},
                           {6, set, set_len},
                           {2, incr, incr_len},
                           {2, pttl, pttl_len},
                           {1, exec, exec_len}};
    redisReply *r[5];
    int rc = dlock__rconn_call(l->conn, 5, cmds, a->deadline_us, r);

    if (rc != DLOCK_OK)
        return rc;
    for (int i = 0; i < 5 && rc == DLOCK_OK; i++) {
        if (r[i]->type == REDIS_REPLY_ERROR)
            rc = dlock__fail(DLOCK_ESERVER, "%s: server refused %s: %s%s", b->label,
                             i == 4 ? "EXEC" : "MULTI", r[i]->str,
                             strncmp(r[i]->str, "NOAUTH", 6) == 0
                                 ? " (the server wants a password: redis://:PASSWORD@host)"
                                 : "");
    }
    const redisReply *taken = exec_element(r[4], 0), *fence = exec_element(r[4], 1),
                     *ttl = exec_element(r[4], 2);
    if (rc == DLOCK_OK && fence != NULL && fence->type == REDIS_REPLY_ERROR)
        rc = dlock__fail(DLOCK_ESERVER, "%s: server refused INCR %s: %s", b->label, l->keys[1],
                         fence->str);
    if (rc == DLOCK_OK) {
        if (taken == NULL || fence == NULL || ttl == NULL || fence->type != REDIS_REPLY_INTEGER ||
            ttl->type != REDIS_REPLY_INTEGER ||
            (taken->type != REDIS_REPLY_STATUS && taken->type != REDIS_REPLY_NIL)) {
            rc = bad_reply(b, "acquire", r[4]);
        } else if (taken->type == REDIS_REPLY_STATUS) {
            a->outcome = DLOCK__TAKEN;
            a->fence = (uint64_t) fence->integer;
        } else {
            a->outcome = DLOCK__HELD;
            a->holder_ttl_ms = ttl->integer;
        }
    }
    for (int i = 0; i < 5; i++)
        freeReplyObject(r[i]);
    return rc;
}

static int acquire(void *be, void *bl, dlock__attempt *a)
{
    rbackend *b = be;
    rlock *l = bl;
    char lease[24], wlease[24];
    const char *argv[12];
    size_t lens[12];
    redisReply *r = NULL;
    int join = a->join_queue && !l->simple;
    size_t nlease = NUM(lease, a->lease_ms);
    if (!join)
        return take_plain(b, l, a, lease, nlease);
    size_t n = put_keys(l, argv, lens, 1);
    int rc;

    argv[n] = a->token;
    lens[n++] = strlen(a->token);
    argv[n] = lease;
    lens[n++] = nlease;
    argv[n] = wlease;
    lens[n++] = NUM(wlease, b->cfg.waiter_lease_ms);
    argv[n] = b->cfg.client_id;
    lens[n++] = 16;
    argv[n] = a->was_queued ? "1" : "0";
    lens[n++] = 1;
    evalcall call = {DLOCK__S_ACQUIRE, n, argv, lens};
    rc = run_script(l->conn, &call, a->deadline_us, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
        a->outcome = DLOCK__TAKEN;
        a->fence = (uint64_t) r->integer;
    } else if (int_array(r, 2)) {
        a->outcome = DLOCK__HELD;
        a->holder_ttl_ms = r->element[0]->integer;
        a->queued = r->element[1]->integer == 1;
    } else {
        rc = bad_reply(b, "acquire", r);
    }
    freeReplyObject(r);
    return rc;
}

static int cancel(void *be, void *bl, const char *token, int64_t deadline)
{
    rlock *l = bl;
    const char *argv[7];
    size_t lens[7];
    redisReply *r = NULL;
    int rc;

    (void) be;
    if (l->simple)
        return DLOCK_OK; /* never queued */
    size_t n = put_keys(l, argv, lens, 1);
    argv[n] = token;
    lens[n++] = strlen(token);
    evalcall call = {DLOCK__S_CANCEL, n, argv, lens};
    rc = run_script(l->conn, &call, deadline, &r);
    freeReplyObject(r);
    return rc;
}

/* release.lua for token (NULL: forced). */
static int run_release(rbackend *b, rlock *l, const char *token, int64_t deadline)
{
    const char *argv[10];
    size_t lens[10];
    redisReply *r = NULL;
    size_t n = put_keys(l, argv, lens, 1);
    int rc;

    argv[n] = token != NULL ? token : "";
    lens[n++] = token != NULL ? strlen(token) : 0;
    argv[n] = token == NULL ? "f" : l->simple ? "s" : "";
    lens[n] = strlen(argv[n]);
    n++;
    evalcall call = {DLOCK__S_RELEASE, n, argv, lens};
    rc = run_script(l->conn, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_INTEGER)
        rc = bad_reply(b, "release", r);
    else if (r->integer == -1)
        rc = dlock__fail(DLOCK_ENOTOWNER, "%s is held by another owner", l->keys[0]);
    else if (r->integer == -2)
        rc = dlock__fail(DLOCK_ELOST,
                         "%s is not held by anyone (its lease had run out or it "
                         "was deleted)",
                         l->keys[0]);
    freeReplyObject(r);
    return rc;
}

static int release(void *be, void *bl, const char *token, int64_t deadline)
{
    return run_release(be, bl, token, deadline);
}

static int extend(void *be, void *bl, const char *token, int64_t lease_ms, int at_least,
                  int64_t deadline)
{
    rbackend *b = be;
    rlock *l = bl;
    char lease[24];
    const char *argv[7];
    size_t lens[7];
    size_t n = put_keys(l, argv, lens, 1);
    redisReply *r = NULL;
    int rc;

    argv[n] = token;
    lens[n++] = strlen(token);
    argv[n] = lease;
    lens[n++] = NUM(lease, lease_ms);
    argv[n] = at_least ? "1" : "0";
    lens[n++] = 1;
    evalcall call = {DLOCK__S_EXTEND, n, argv, lens};
    rc = run_script(l->conn, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_INTEGER)
        rc = bad_reply(b, "extend", r);
    else if (r->integer != 1)
        rc = dlock__fail(DLOCK_ELOST, "%s is no longer held by this owner", l->keys[0]);
    freeReplyObject(r);
    return rc;
}

/* ---------------------------------------------------------------- renewal */

/* A renewal batch is split into script calls over items of one group (held
 * locks with the same lease; or waiters), at most RENEW_BATCH items each,
 * and all the calls go out as one pipeline. */
typedef struct slot {
    int waiter;
    int64_t lease_ms;
    size_t item;
} slot;

static int by_group(const void *pa, const void *pb)
{
    const slot *a = pa, *b = pb;
    if (a->waiter != b->waiter)
        return a->waiter - b->waiter;
    return (a->lease_ms > b->lease_ms) - (a->lease_ms < b->lease_ms);
}

static int renew(void *be, dlock__renewal *items, size_t n, int64_t deadline)
{
    rbackend *b = be;
    slot *order = calloc(n, sizeof *order);
    size_t *first = calloc(n + 1, sizeof *first); /* chunk c: order[first[c]..first[c+1]) */
    evalcall *calls = calloc(n, sizeof *calls);
    redisReply **replies = calloc(n, sizeof *replies);
    char(*numbers)[24] = calloc(2 * n, sizeof *numbers);
    /* per chunk: EVALSHA sha numkeys lease; per item: its lock key + token */
    const char **argv = calloc(4 * n + 5 * n, sizeof *argv);
    size_t *lens = calloc(4 * n + 5 * n, sizeof *lens);
    size_t nchunks = 0, nargs = 0;
    int rc = DLOCK_OK;

    for (size_t i = 0; i < n; i++)
        items[i].result = DLOCK__RENEW_FAILED;
    if (order == NULL || first == NULL || calls == NULL || replies == NULL || numbers == NULL ||
        argv == NULL || lens == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        order[i].waiter = items[i].waiter;
        order[i].lease_ms = items[i].waiter ? 0 : items[i].lease_ms;
        order[i].item = i;
    }
    qsort(order, n, sizeof *order, by_group);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || i - first[nchunks - 1] == RENEW_BATCH ||
            by_group(&order[i - 1], &order[i]) != 0)
            first[nchunks++] = i;
    }
    first[nchunks] = n;

    for (size_t c = 0; c < nchunks; c++) {
        const dlock__renewal *lead = &items[order[first[c]].item];
        size_t count = first[c + 1] - first[c], at = 2;
        evalcall *call = &calls[c];

        call->script = lead->waiter ? DLOCK__S_HEARTBEAT : DLOCK__S_RENEW;
        call->argv = argv + nargs;
        call->lens = lens + nargs;
        call->argv[at] = numbers[2 * c];
        call->lens[at++] = NUM(numbers[2 * c], count);
        for (size_t i = first[c]; i < first[c + 1]; i++) {
            const rlock *l = items[order[i].item].lock;
            call->argv[at] = l->keys[0];
            call->lens[at++] = l->key_lens[0];
        }
        call->argv[at] = numbers[2 * c + 1];
        call->lens[at++] =
            NUM(numbers[2 * c + 1], lead->waiter ? b->cfg.waiter_lease_ms : lead->lease_ms);
        for (size_t i = first[c]; i < first[c + 1]; i++) {
            call->argv[at] = items[order[i].item].token;
            call->lens[at++] = strlen(items[order[i].item].token);
        }
        call->argc = at;
        nargs += at;
    }

    rc = run_scripts(b->pool[0], nchunks, calls, deadline, replies);
    if (rc != DLOCK_OK)
        goto out;
    for (size_t c = 0; c < nchunks; c++) {
        size_t count = first[c + 1] - first[c];
        int hb = calls[c].script == DLOCK__S_HEARTBEAT;
        if (!int_array(replies[c], hb ? 2 * count : count)) {
            rc = bad_reply(b, "renewal", replies[c]);
            continue;
        }
        for (size_t i = 0; i < count; i++) {
            dlock__renewal *it = &items[order[first[c] + i].item];
            long long v = replies[c]->element[hb ? 2 * i : i]->integer;
            if (hb) {
                it->result = v == 1   ? DLOCK__RENEW_OK
                             : v == 2 ? DLOCK__RENEW_GRANTED
                                      : DLOCK__RENEW_GONE;
                it->fence = (uint64_t) replies[c]->element[2 * i + 1]->integer;
            } else {
                it->result = v == 1 ? DLOCK__RENEW_OK : DLOCK__RENEW_GONE;
            }
        }
    }
    for (size_t c = 0; c < nchunks; c++)
        freeReplyObject(replies[c]);
out:
    free(order);
    free(first);
    free(calls);
    free(replies);
    free(numbers);
    free(argv);
    free(lens);
    return rc;
}

/* ---------------------------------------------------------------- operators */

static int query(void *be, void *bl, dlock_status *st, int64_t deadline)
{
    rbackend *b = be;
    rlock *l = bl;
    const char *argv[6];
    size_t lens[6];
    redisReply *r = NULL;
    size_t n = put_keys(l, argv, lens, 2);
    int rc;

    memset(st, 0, sizeof *st);
    argv[n] = l->simple ? "0" : "1"; /* has a queue */
    lens[n++] = 1;
    evalcall call = {DLOCK__S_STATUS, n, argv, lens};
    rc = run_script(l->conn, &call, deadline, &r);
    if (rc != DLOCK_OK)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_INTEGER ||
        r->element[2]->type != REDIS_REPLY_INTEGER || r->element[3]->type != REDIS_REPLY_INTEGER) {
        rc = bad_reply(b, "status", r);
    } else {
        snprintf(st->owner, sizeof st->owner, "%s", r->element[0]->str);
        st->held = st->owner[0] != '\0';
        st->holds = st->held ? 1 : 0;
        st->lease_ms = st->held ? r->element[1]->integer : -1;
        st->last_fence = (uint64_t) r->element[2]->integer;
        st->waiters = (unsigned) r->element[3]->integer;
    }
    freeReplyObject(r);
    return rc;
}

static int force_unlock(void *be, void *bl, int64_t deadline)
{
    return run_release(be, bl, NULL, deadline);
}

/* ---------------------------------------------------------------- client */

static void close_backend(void *be)
{
    rbackend *b = be;

    if (b == NULL)
        return;
    dlock__rsub_free(b->sub);
    for (size_t i = 0; i < b->npool; i++)
        dlock__rconn_free(b->pool[i]);
    pthread_mutex_destroy(&b->mu);
    free(b->prefix);
    free(b->host);
    free(b->unix_path);
    free(b->user);
    free(b->password);
    free(b->label);
    free(b);
}

static int check_prefix(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > PREFIX_MAX)
        return dlock__fail(DLOCK_EINVAL, "option prefix=%s: want 1..%d characters", p, PREFIX_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) p[i];
        if (!(isalnum(c) || c == '_' || c == '-' || c == '.' || c == ':' || c == '/'))
            return dlock__fail(DLOCK_EINVAL, "option prefix=%s: use letters, digits and _-.:/", p);
    }
    return DLOCK_OK;
}

static int parse_endpoint(rbackend *b, dlock__url *url)
{
    char label[300];

    if (strcmp(url->scheme, "redis+unix") == 0) {
        if (url->nhosts != 0 || url->path[0] == '\0')
            return dlock__fail(DLOCK_EINVAL, "%s: want redis+unix:///path/to/socket", url->text);
        size_t n = strlen(url->path) + 2;
        b->unix_path = malloc(n);
        if (b->unix_path == NULL)
            return DLOCK_ENOMEM;
        snprintf(b->unix_path, n, "/%s", url->path);
        snprintf(label, sizeof label, "redis+unix://%s", b->unix_path);
    } else {
        char *end;
        long db;
        if (url->nhosts != 1)
            return dlock__fail(DLOCK_EINVAL, "%s: want exactly one host (redis://host:port)",
                               url->text);
        b->host = strdup(url->hosts[0].name);
        if (b->host == NULL)
            return DLOCK_ENOMEM;
        b->ep.port = url->hosts[0].port ? url->hosts[0].port : DEFAULT_PORT;
        if (url->path[0] != '\0') {
            db = strtol(url->path, &end, 10);
            if (*end != '\0' || db < 0 || db > 1000000 || end == url->path)
                return dlock__fail(DLOCK_EINVAL, "%s: database '%s' is not a number", url->text,
                                   url->path);
            b->ep.db = (int) db;
        }
        if (strchr(b->host, ':') != NULL)
            snprintf(label, sizeof label, "redis://[%s]:%d", b->host, b->ep.port);
        else
            snprintf(label, sizeof label, "redis://%s:%d", b->host, b->ep.port);
    }
    b->label = strdup(label);
    if ((url->user != NULL && (b->user = strdup(url->user)) == NULL) ||
        (url->password != NULL && (b->password = strdup(url->password)) == NULL) ||
        b->label == NULL)
        return DLOCK_ENOMEM;
    if (b->user != NULL && b->password == NULL) {
        /* redis://secret@host: the user-info is the password (redis-py). */
        b->password = b->user;
        b->user = NULL;
    }
    b->ep.host = b->host;
    b->ep.unix_path = b->unix_path;
    b->ep.user = b->user;
    b->ep.password = b->password;
    b->ep.label = b->label;
    return DLOCK_OK;
}

static int open_backend(dlock__url *url, const dlock__client_cfg *cfg, dlock__board *board,
                        void **out)
{
    rbackend *b = calloc(1, sizeof *b);
    const char *prefix;
    long pool = DEFAULT_POOL;
    int rc;

    *out = NULL;
    if (b == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&b->mu, NULL);
    b->cfg = *cfg;
    b->board = board;
    b->ep.connect_timeout_ms = 2000;
    b->ep.command_timeout_ms = cfg->command_timeout_ms;
    if (dlock__scripts_init() != 0) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto fail;
    }
    rc = parse_endpoint(b, url);
    if (rc == DLOCK_ENOMEM)
        dlock__fail(rc, "out of memory");
    if (rc != DLOCK_OK)
        goto fail;
    prefix = dlock__url_get(url, "prefix");
    rc = check_prefix(prefix != NULL ? prefix : DEFAULT_PREFIX);
    if (rc != DLOCK_OK)
        goto fail;
    b->prefix = strdup(prefix != NULL ? prefix : DEFAULT_PREFIX);
    rc = dlock__url_duration(url, "connect_timeout", 1, &b->ep.connect_timeout_ms);
    if (rc == DLOCK_OK)
        rc = dlock__url_int(url, "pool", 1, MAX_POOL, &pool);
    if (rc != DLOCK_OK)
        goto fail;
    if (b->prefix == NULL) {
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        goto fail;
    }
    for (b->npool = 0; b->npool < (size_t) pool; b->npool++) {
        rc = dlock__rconn_new(&b->ep, &b->pool[b->npool]);
        if (rc != DLOCK_OK) {
            dlock__fail(rc, "out of memory");
            goto fail;
        }
    }
    *out = b;
    return DLOCK_OK;
fail:
    close_backend(b);
    return rc;
}

const dlock__backend_ops dlock__redis_ops = {
    .name = "redis",
    .open = open_backend,
    .close = close_backend,
    .lock_new = lock_new,
    .lock_free = lock_free,
    .can_notify = can_notify,
    .prepare_wait = prepare_wait,
    .wait = wait_wake,
    .acquire = acquire,
    .cancel = cancel,
    .release = release,
    .extend = extend,
    .renew = renew,
    .query = query,
    .force_unlock = force_unlock,
};
