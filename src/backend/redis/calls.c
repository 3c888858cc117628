/* SPDX-License-Identifier: MIT */
/* calls.c - running the Lua scripts over a connection, and reading their
 * replies. */
#include "../../base/error.h"
#include "internal.h"
#include "replies.h"

#include "../../base/clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* run_batch_once's: every script was refused by a node that is not the
 * master (never returned by run_batch) */
#define DLOCK__NOT_MASTER -1
#define NOT_MASTER_TRIES  3
/* Redis Cluster: redirections followed for one call, and the pause before
 * a call refused with TRYAGAIN or CLUSTERDOWN is sent again */
#define MAX_REDIRECTS  16
#define RETRY_PAUSE_US 20000

/* A Redis Cluster's answer that a script must wait for its slot's
 * migration to end (follow_redirects). */
static int migrating(const redisReply *r)
{
    return strncmp(r->str, "ASK ", 4) == 0 || strncmp(r->str, "TRYAGAIN", 8) == 0 ||
           strncmp(r->str, "ERR Script attempted to access a non local key", 46) == 0;
}

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

/* A call on c: on a Redis Cluster, a node that did not answer is
 * suspect, and the map is read again at the next call; one that answered
 * is not (cluster.h); a URL that names a plain Redis is refused. */
static int call_on(dlock__rconn *c, size_t n, const dlock__rcmd *cmds, int64_t deadline,
                   redisReply **replies)
{
    dlock__rcluster *cl = dlock__rconn_router(c);
    int rc = cl != NULL ? dlock__rcluster_check(cl) : DLOCK_OK; /* a plain Redis */
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__rconn_call(c, n, cmds, deadline, replies);
    return cl != NULL ? dlock__rcluster_noted(cl, c, rc) : rc;
}

static void free_replies(redisReply **replies, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        freeReplyObject(replies[j]);
        replies[j] = NULL;
    }
}

/* One script call on c: EVALSHA, and EVAL if the node lacks the script. */
static int send_one(dlock__rconn *c, const evalcall *call, int64_t deadline, redisReply **reply)
{
    dlock__rcmd cmd = as_command(call, 0);
    int rc = call_on(c, 1, &cmd, deadline, reply);
    if (rc != DLOCK_OK || !is_noscript(*reply))
        return rc;
    freeReplyObject(*reply);
    *reply = NULL;
    cmd = as_command(call, 1);
    return call_on(c, 1, &cmd, deadline, reply);
}

/* A Redis Cluster's redirection of one call that came from c (cluster.h):
 * a script call (call) or a plain command (cmd, when call is NULL), sent
 * again to the node a MOVED names (the map learns it), after ASKING to
 * the node an ASK names (the map does not change), or to the same node a
 * little later after TRYAGAIN or CLUSTERDOWN (the map read again after
 * CLUSTERDOWN), until
 * its reply is none of these, or the deadline; *reply is then the last
 * reply. Only this call is sent again, not its batch.
 *
 * A script is never sent where an ASK points. Its node answers ASK when
 * the slot is migrating and the script's declared key (the lock's base
 * key: the others are derived, README) is not there, which is the normal
 * state of a free mutex, a read-write lock held by readers alone and any
 * semaphore; the importing node would run it after ASKING over whatever
 * of the lock has reached it, none of what is still to come (a reader's
 * hold, a permit), and grant beside it (and the keys it made there stop
 * the migration with BUSYKEY). So an ASK to a script is waited out like
 * a TRYAGAIN: the migrating node keeps the lock until the slot has moved
 * (MOVED then), and runs a script only while every key it touches is
 * still there ("non local key" otherwise: the same again). Waits count
 * against the deadline, redirections against MAX_REDIRECTS. */
static int follow_redirects(dlock__rcluster *cl, dlock__rconn *c, const evalcall *call,
                            const dlock__rcmd *cmd, int64_t deadline, redisReply **reply)
{
    static const char *const asking_argv[] = {"ASKING"};
    static const size_t asking_lens[] = {6};

    for (int hops = 0; hops < MAX_REDIRECTS;) {
        dlock__rconn *to = c;
        redisReply *got[2] = {NULL, NULL};
        int rc;
        enum dlock__rredirect what = dlock__rcluster_redirect(cl, *reply, &to);
        if (what == DLOCK__RR_NONE)
            return DLOCK_OK;
        if (what == DLOCK__RR_FULL)
            return DLOCK_ESERVER; /* recorded: more nodes than a client follows */
        if (what == DLOCK__RR_ASK && call != NULL) {
            what = DLOCK__RR_RETRY; /* the slot is migrating: wait for its end */
            to = c;
        }
        if (what == DLOCK__RR_RETRY) {
            if (dlock__now_us() + RETRY_PAUSE_US >= deadline)
                return DLOCK_OK; /* the refusal stands, with its text */
            struct timespec ts = {0, RETRY_PAUSE_US * 1000L};
            nanosleep(&ts, NULL);
            /* (a migration keeps the map as it is until its end) */
            if (strncmp((*reply)->str, "CLUSTERDOWN", 11) == 0)
                dlock__rcluster_refresh(cl, deadline);
        } else {
            hops++;
        }
        if (what == DLOCK__RR_ASK) {
            /* a plain command of one key (the owner record): the key is
             * where the ASK says; its node may not know the slot yet */
            dlock__rcmd cmds[2] = {{1, asking_argv, asking_lens}, *cmd};
            rc = call_on(to, 2, cmds, dlock__rcluster_bound(cl, to, deadline), got);
            if (rc == DLOCK_OK) {
                freeReplyObject(got[0]);
                got[0] = got[1];
            }
        } else if (call != NULL) {
            rc = send_one(to, call, dlock__rcluster_bound(cl, to, deadline), &got[0]);
        } else {
            rc = call_on(to, 1, cmd, dlock__rcluster_bound(cl, to, deadline), &got[0]);
        }
        if (rc != DLOCK_OK)
            return rc;
        freeReplyObject(*reply);
        *reply = got[0];
        c = to;
    }
    return DLOCK_OK;
}

int dlock__redis_call(dlock__rconn *c, const dlock__rcmd *cmd, int64_t deadline, redisReply **reply)
{
    dlock__rcluster *cl = dlock__rconn_router(c);
    int rc =
        call_on(c, 1, cmd, cl != NULL ? dlock__rcluster_bound(cl, c, deadline) : deadline, reply);
    if (rc != DLOCK_OK)
        return rc;
    if (cl == NULL) {
        /* (as a script's: a node of a cluster, or a replica) */
        rc = dlock__rconn_wrong_server(c, cmd->argv[0], *reply);
        if (rc != DLOCK_OK) {
            freeReplyObject(*reply);
            *reply = NULL;
        }
        return rc;
    }
    rc = follow_redirects(cl, c, NULL, cmd, deadline, reply);
    if (rc != DLOCK_OK) {
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return rc;
}

/* Runs n script calls as one pipelined batch on c, after the command
 * `before` if not NULL (its reply, whatever it is, in *before_reply) and
 * before the command `after` if not NULL (its reply in *after_reply: it
 * comes after every script has run, those sent again included); a
 * script the server does not have is sent again in full. Replies of the
 * scripts that are errors are turned into DLOCK_ESERVER. On DLOCK_OK every
 * replies[i] is set. */
static int run_batch_once(dlock__rconn *c, const dlock__rcmd *before, size_t n,
                          const evalcall *calls, const dlock__rcmd *after, int64_t deadline,
                          redisReply **before_reply, redisReply **replies, redisReply **after_reply)
{
    size_t k = before != NULL ? 1 : 0, m = n + k + (after != NULL ? 1 : 0);
    dlock__rcmd stack_cmds[10] = {{0}};
    dlock__rcmd *cmds = m <= 10 ? stack_cmds : calloc(m, sizeof *cmds);
    redisReply *stack_replies[10] = {NULL};
    redisReply **got = m <= 10 ? stack_replies : calloc(m, sizeof *got);
    int rc, sent_again = 0;

    if (cmds == NULL || got == NULL) {
        if (cmds != stack_cmds)
            free(cmds);
        if (got != stack_replies)
            free(got);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    if (before != NULL)
        cmds[0] = *before;
    for (size_t i = 0; i < n; i++)
        cmds[k + i] = as_command(&calls[i], 0);
    if (after != NULL)
        cmds[m - 1] = *after;
    rc = call_on(c, m, cmds, deadline, got);
    if (rc == DLOCK_OK) {
        if (before != NULL)
            *before_reply = got[0];
        memcpy(replies, got + k, n * sizeof *replies);
        if (after != NULL)
            *after_reply = got[m - 1];
    }
    if (cmds != stack_cmds)
        free(cmds);
    if (got != stack_replies)
        free(got);
    if (rc != DLOCK_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!is_noscript(replies[i]))
            continue;
        /* Flushed scripts (restart, SCRIPT FLUSH): EVAL loads them again. */
        freeReplyObject(replies[i]);
        replies[i] = NULL;
        dlock__rcmd full = as_command(&calls[i], 1);
        rc = call_on(c, 1, &full, deadline, &replies[i]);
        if (rc != DLOCK_OK) {
            free_replies(replies, n);
            return rc;
        }
        sent_again = 1;
    }
    if (sent_again && after != NULL) {
        /* `after` must follow every script: those sent again came later */
        freeReplyObject(*after_reply);
        *after_reply = NULL;
        rc = call_on(c, 1, after, deadline, after_reply);
        if (rc != DLOCK_OK) {
            free_replies(replies, n);
            return rc;
        }
    }
    dlock__rcluster *cl = dlock__rconn_router(c);
    for (size_t i = 0; cl != NULL && i < n; i++) {
        rc = follow_redirects(cl, c, &calls[i], NULL, deadline, &replies[i]);
        if (rc != DLOCK_OK) {
            free_replies(replies, n);
            return rc;
        }
    }
    size_t not_master = 0;
    for (size_t i = 0; i < n; i++)
        not_master += dlock__rreply_not_master(replies[i]);
    if (not_master > 0 && dlock__rconn_moved(c)) {
        /* The node does not take writes as the master (a demoted master,
         * a replica loading): nothing of a refused script ran. A fixed
         * server (redis://) that says so is refused below, as before. */
        char why[512];
        rc = dlock__fail(not_master == n ? DLOCK__NOT_MASTER : DLOCK_EUNREACHABLE, "%s: %s: %s%s",
                         dlock__rconn_label(c), dlock__script_get(calls[0].script)->name,
                         not_master == n ? "" : "the node stopped being the master in a batch: ",
                         dlock__reply_reason(replies[0], "", why, sizeof why));
        free_replies(replies, n);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (replies[i]->type == REDIS_REPLY_ERROR && cl != NULL && migrating(replies[i])) {
            /* still migrating at the deadline: the store is there, and
             * a wait goes on (DLOCK_EUNREACHABLE is what a wait outlasts) */
            rc = dlock__fail(DLOCK_EUNREACHABLE,
                             "%s: %s: the lock's slot is being migrated to another master "
                             "(resharding) and its scripts wait for the migration's end; it had "
                             "not ended in time (%.*s)",
                             dlock__rconn_label(c), dlock__script_get(calls[i].script)->name,
                             DLOCK__REASON(replies[i]));
            free_replies(replies, n);
            break;
        }
        if (replies[i]->type == REDIS_REPLY_ERROR) {
            const char *e = replies[i]->str;
            const char *what = dlock__script_get(calls[i].script)->name;
            int auth = strncmp(e, "NOAUTH", 6) == 0 || strstr(e, "unauthenticated") != NULL;
            /* a sentinel knows no scripts */
            int sentinel = strstr(e, "unknown command 'EVALSHA'") != NULL ||
                           strstr(e, "unknown command 'EVAL'") != NULL;
            /* a node of a cluster, or a replica, where the URL names one
             * server (a cluster client followed a cluster's above) */
            rc = dlock__rconn_wrong_server(c, what, replies[i]);
            if (rc == DLOCK_OK)
                rc = dlock__fail(DLOCK_ESERVER, "%s: server refused %s: %.*s%s",
                                 dlock__rconn_label(c), what, DLOCK__REASON(replies[i]),
                                 auth       ? " (NOAUTH: the server wants a password: "
                                              "redis://:PASSWORD@host)"
                                 : sentinel ? " (a Redis Sentinel? use "
                                              "redis+sentinel://host:port,host:port/MASTERNAME)"
                                            : "");
            free_replies(replies, n);
            break;
        }
    }
    return rc;
}

/* run_batch_once, again while the node it reached was not the master
 * (READONLY, LOADING, MASTERDOWN: nothing ran) and time is left: each try
 * connects to the master found then (sentinel.c). On a Redis Cluster a
 * node suspect of not answering is given a second (cluster.h), and one
 * that does not answer has the map read again at the next call, so that
 * it goes to the node serving its slot then (a promoted replica). */
static int run_batch(dlock__rconn *c, const dlock__rcmd *before, size_t n, const evalcall *calls,
                     const dlock__rcmd *after, int64_t deadline, redisReply **before_reply,
                     redisReply **replies, redisReply **after_reply)
{
    dlock__rcluster *cl = dlock__rconn_router(c);
    int rc;
    for (int tries = 0;; tries++) {
        rc = run_batch_once(c, before, n, calls, after,
                            cl != NULL ? dlock__rcluster_bound(cl, c, deadline) : deadline,
                            before_reply, replies, after_reply);
        if (rc != DLOCK__NOT_MASTER && rc != DLOCK_OK && after_reply != NULL) {
            freeReplyObject(*after_reply); /* replies only on success */
            *after_reply = NULL;
        }
        if (rc != DLOCK__NOT_MASTER)
            return rc;
        if (before_reply != NULL) {
            freeReplyObject(*before_reply);
            *before_reply = NULL;
        }
        if (after_reply != NULL) {
            freeReplyObject(*after_reply);
            *after_reply = NULL;
        }
        if (tries == NOT_MASTER_TRIES - 1 || dlock__now_us() >= deadline)
            break;
    }
    return dlock__fail(DLOCK_EUNREACHABLE, "%s (no master took it in time)", dlock_errmsg());
}

int dlock__redis_run_scripts(dlock__rconn *c, size_t n, const evalcall *calls, int64_t deadline,
                             redisReply **replies)
{
    return run_batch(c, NULL, n, calls, NULL, deadline, NULL, replies, NULL);
}

int dlock__redis_run_script(dlock__rconn *c, const evalcall *call, int64_t deadline,
                            redisReply **reply)
{
    return run_batch(c, NULL, 1, call, NULL, deadline, NULL, reply, NULL);
}

int dlock__redis_run_script_after(dlock__rconn *c, const dlock__rcmd *before, const evalcall *call,
                                  int64_t deadline, redisReply **before_reply, redisReply **reply)
{
    *before_reply = NULL;
    return run_batch(c, before, 1, call, NULL, deadline, before_reply, reply, NULL);
}

int dlock__redis_run_between(dlock__rconn *c, const dlock__rcmd *before, size_t n,
                             const evalcall *calls, const dlock__rcmd *after, int64_t deadline,
                             redisReply **before_reply, redisReply **replies,
                             redisReply **after_reply)
{
    if (before_reply != NULL)
        *before_reply = NULL;
    if (after_reply != NULL)
        *after_reply = NULL;
    return run_batch(c, before, n, calls, after, deadline, before_reply, replies, after_reply);
}

int dlock__redis_bad_reply(const rbackend *b, const char *what, const redisReply *r)
{
    static const char *types[] = {"?", "string", "array", "integer", "nil", "status", "error"};
    int t = r != NULL && r->type >= 1 && r->type <= 6 ? r->type : 0;
    return dlock__fail(DLOCK_EPROTO, "%s: unexpected reply to %s (%s)", b->label, what, types[t]);
}

/* Decimal text of a non-negative count or duration into buf (24 bytes);
 * returns its length. (snprintf was 5% of a lock cycle's instructions.) */
size_t dlock__redis_number(char *buf, int64_t v)
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
