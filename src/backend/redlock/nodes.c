/* SPDX-License-Identifier: MIT */
/* nodes.c - one worker thread per node sends the rounds (nodes.h).
 *
 * Why a thread per node: conn.c's call blocks its caller until the replies
 * are in, and one caller must reach N nodes at once. A worker per node keeps
 * conn.c as it is (one caller at a time per node here) and makes the rounds
 * overlap; a node that is frozen holds up only its own worker, whose queue
 * then drops requests whose time passed without sending them.
 *
 * Ownership: a round is counted, once for its caller and once for every
 * worker it was handed to; the last to let go frees it and the replies.
 * The nodes are counted too, once for their owner and once for every
 * worker still running: close waits for the workers only a moment (a
 * frozen node would hold it up for a whole command timeout), and the last
 * to let go frees them. So that a worker that outlives the close touches
 * nothing of the client's, the workers and their connections log through
 * the nodes' own log, which forwards to the client's until the close, and
 * the nodes keep the TLS context and the `reached` flags themselves. */
#include "nodes.h"

#include "../../base/clock.h"
#include "../../base/error.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rlcall {
    size_t argc; /* with EVALSHA and the digest */
    const char **argv;
    size_t *lens;
    char *block; /* the copied arguments */
} rlcall;

struct dlock__rlround {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    size_t ncmds;
    rlcall *calls;
    int64_t deadline_us;
    dlock__rlanswer answers[DLOCK__REDLOCK_MAX_NODES];
    dlock__rlanswer snap[DLOCK__REDLOCK_MAX_NODES];
    size_t nnodes, ndone;
    /* The caller's test while it waits (NULL: nobody waits): a worker
     * wakes the caller only when its answer decides the round (or is the
     * last), not for every answer, so that a round costs its caller one
     * wake-up. */
    int (*decided)(void *arg, const dlock__rlanswer *a, size_t n);
    void *decided_arg;
    /* Telling a node lost (see tell_lost): while the caller holds its
     * reference (held), a node found out of reach in this round is its to
     * tell, when it drops the round (untold: those nodes' bits), so that
     * the warning comes before anything the caller reports, or not at all
     * when the caller's error names the node (dlock__rlnodes_told). */
    struct dlock__rlnodes *nodes;
    int held;
    unsigned untold;
};

typedef struct job {
    struct job *next;
    dlock__rlround *round;
} job;

typedef struct node {
    struct dlock__rlnodes *owner;
    size_t index;
    dlock__rconn *conn;
    char *label;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    int stop;
    int64_t stop_deadline_us;
    atomic_int down; /* its last batch found it out of reach (set by the worker) */
    atomic_int told; /* its being out of reach was told (a warning, or an error naming it) */
    /* when the worker's batch in progress began (0: none): a node still
     * silent when the client closes is told (dlock__rlnodes_free) */
    atomic_llong busy_since_us;
    /* The node is no independent master (a node of a Redis Cluster, a
     * replica): refused by this client from then on, every request
     * answered with this failure unsent (the worker's alone) */
    int refused_rc;
    char refused[256];
    int ended; /* the worker is done (under the nodes' mu) */
    int idle;  /* the worker waits for a job (under mu) */
} node;

struct dlock__rlnodes {
    size_t n;
    const char *script;
    size_t script_len;
    char sha[41];
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a worker ended, or found its node out of reach */
    int refs;          /* the owner's, and one per worker running */
    dlock__log log;    /* the workers' and connections': forwards to client_log until closed */
    dlock__log *client_log;
    dlock__rtls *tls; /* every node's (NULL: plain), freed with the nodes */
    atomic_int reached[DLOCK__REDLOCK_MAX_NODES];    /* the endpoints' `reached` */
    atomic_int absent[DLOCK__REDLOCK_MAX_NODES];     /* and `absent` */
    atomic_int in_cluster[DLOCK__REDLOCK_MAX_NODES]; /* and `in_cluster` */
    node nodes[DLOCK__REDLOCK_MAX_NODES];
};

/* ---------------------------------------------------------------- rounds */

dlock__rlround *dlock__rlround_new(size_t ncmds)
{
    dlock__rlround *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->calls = calloc(ncmds ? ncmds : 1, sizeof *r->calls);
    if (r->calls == NULL) {
        free(r);
        return NULL;
    }
    dlock__cond_init(&r->cv);
    pthread_mutex_init(&r->mu, NULL);
    r->refs = 1;
    r->held = 1;
    r->ncmds = ncmds;
    return r;
}

int dlock__rlround_set(dlock__rlround *r, size_t i, size_t argc, const char *const *argv,
                       const size_t *lens)
{
    rlcall *c = &r->calls[i];
    size_t bytes = 0;
    for (size_t k = 0; k < argc; k++)
        bytes += lens[k] + 1;
    c->argv = calloc(argc + 2, sizeof *c->argv);
    c->lens = calloc(argc + 2, sizeof *c->lens);
    c->block = malloc(bytes ? bytes : 1);
    if (c->argv == NULL || c->lens == NULL || c->block == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    char *p = c->block;
    for (size_t k = 0; k < argc; k++) {
        memcpy(p, argv[k], lens[k]);
        p[lens[k]] = '\0';
        c->argv[k + 2] = p;
        c->lens[k + 2] = lens[k];
        p += lens[k] + 1;
    }
    c->argc = argc + 2;
    return DLOCK_OK;
}

static void round_unref(dlock__rlround *r)
{
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left > 0)
        return;
    for (size_t i = 0; i < r->nnodes; i++) {
        if (r->answers[i].replies != NULL) {
            for (size_t k = 0; k < r->ncmds; k++)
                freeReplyObject(r->answers[i].replies[k]);
            free(r->answers[i].replies);
        }
    }
    for (size_t k = 0; k < r->ncmds; k++) {
        free(r->calls[k].argv);
        free(r->calls[k].lens);
        free(r->calls[k].block);
    }
    free(r->calls);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static void tell_lost(node *nd, const char *err);

void dlock__rlround_drop(dlock__rlround *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->held = 0;
    unsigned untold = r->untold;
    pthread_mutex_unlock(&r->mu);
    /* (an answer done stays as it is: read without the lock) A node that
     * answered again since (another round of this caller's, before this
     * drop) is not told lost: that would come after its "answers again",
     * and leave it told, so that its next outage went unsaid (review42) */
    for (size_t i = 0; i < r->nnodes; i++) {
        if ((untold & (1u << i)) && atomic_load(&r->nodes->nodes[i].down))
            tell_lost(&r->nodes->nodes[i], r->answers[i].err);
    }
    round_unref(r);
}

/* Puts round r on node i's queue, counted for its worker. */
static void enqueue(dlock__rlnodes *ns, dlock__rlround *r, size_t i)
{
    node *nd = &ns->nodes[i];
    job *j = malloc(sizeof *j);
    if (j == NULL) {
        pthread_mutex_lock(&r->mu);
        r->answers[i].done = 1;
        r->answers[i].rc = DLOCK_ENOMEM;
        snprintf(r->answers[i].err, sizeof r->answers[i].err, "%s: out of memory", nd->label);
        r->ndone++;
        pthread_mutex_unlock(&r->mu);
        return;
    }
    j->next = NULL;
    j->round = r;
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&nd->mu);
    if (nd->tail != NULL)
        nd->tail->next = j;
    else
        nd->head = j;
    nd->tail = j;
    int idle = nd->idle;
    pthread_mutex_unlock(&nd->mu);
    /* signalled once the lock is let go: woken under it, the worker would
     * only block on it again (a context switch more on a busy machine) */
    if (idle)
        pthread_cond_signal(&nd->cv);
}

static void prepare(dlock__rlnodes *ns, dlock__rlround *r, int64_t deadline_us)
{
    r->deadline_us = deadline_us;
    r->nnodes = ns->n;
    r->nodes = ns;
    for (size_t k = 0; k < r->ncmds; k++) {
        r->calls[k].argv[0] = "EVALSHA";
        r->calls[k].lens[0] = 7;
        r->calls[k].argv[1] = ns->sha;
        r->calls[k].lens[1] = 40;
    }
}

void dlock__rlround_send(dlock__rlnodes *ns, dlock__rlround *r, int64_t deadline_us)
{
    prepare(ns, r, deadline_us);
    for (size_t i = 0; i < ns->n; i++)
        enqueue(ns, r, i);
}

void dlock__rlround_send_to(dlock__rlnodes *ns, dlock__rlround *r, size_t i, int64_t deadline_us)
{
    prepare(ns, r, deadline_us);
    pthread_mutex_lock(&r->mu);
    for (size_t k = 0; k < ns->n; k++) {
        if (k == i)
            continue;
        r->answers[k].done = 1;
        r->answers[k].rc = DLOCK_ENOTSUP;
        snprintf(r->answers[k].err, sizeof r->answers[k].err, "not asked");
        r->ndone++;
    }
    pthread_mutex_unlock(&r->mu);
    enqueue(ns, r, i);
}

const dlock__rlanswer *dlock__rlround_wait(dlock__rlround *r,
                                           int (*decided)(void *arg, const dlock__rlanswer *a,
                                                          size_t n),
                                           void *arg, int64_t until_us)
{
    struct timespec ts = {until_us / 1000000, (long) (until_us % 1000000) * 1000};
    pthread_mutex_lock(&r->mu);
    r->decided = decided;
    r->decided_arg = arg;
    while (r->ndone < r->nnodes && !decided(arg, r->answers, r->nnodes)) {
        if (dlock__now_us() >= until_us)
            break;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    r->decided = NULL; /* (arg may be gone once this returns) */
    memcpy(r->snap, r->answers, r->nnodes * sizeof r->snap[0]);
    pthread_mutex_unlock(&r->mu);
    return r->snap;
}

/* ---------------------------------------------------------------- workers */

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Runs n calls (of one or more rounds) on node nd as one pipelined batch:
 * EVALSHA, and EVAL for those the server did not have (a restart, SCRIPT
 * FLUSH). The calls are shared by the N workers and only read here; an
 * EVAL is a vector of the worker's own. */
static int run_calls(dlock__rlnodes *ns, node *nd, const rlcall *const *calls, size_t n,
                     int64_t deadline, redisReply **replies)
{
    dlock__rcmd stack[16];
    dlock__rcmd *cmds = n <= 16 ? stack : calloc(n, sizeof *cmds);
    int rc;
    if (cmds == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    for (size_t k = 0; k < n; k++)
        cmds[k] = (dlock__rcmd){calls[k]->argc, calls[k]->argv, calls[k]->lens};
    rc = dlock__rconn_call(nd->conn, n, cmds, deadline, replies);
    if (cmds != stack)
        free(cmds);
    for (size_t k = 0; rc == DLOCK_OK && k < n; k++) {
        if (!is_noscript(replies[k]))
            continue;
        freeReplyObject(replies[k]);
        replies[k] = NULL;
        const rlcall *c = calls[k];
        const char **argv = calloc(c->argc, sizeof *argv);
        size_t *lens = calloc(c->argc, sizeof *lens);
        if (argv == NULL || lens == NULL) {
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
        } else {
            memcpy(argv, c->argv, c->argc * sizeof *argv);
            memcpy(lens, c->lens, c->argc * sizeof *lens);
            argv[0] = "EVAL";
            lens[0] = 4;
            argv[1] = ns->script;
            lens[1] = ns->script_len;
            dlock__rcmd full = {c->argc, argv, lens};
            rc = dlock__rconn_call(nd->conn, 1, &full, deadline, &replies[k]);
        }
        free(argv);
        free(lens);
        if (rc != DLOCK_OK) {
            for (size_t j = 0; j < n; j++) {
                freeReplyObject(replies[j]);
                replies[j] = NULL;
            }
        }
    }
    return rc;
}

/* The step a call runs (node.lua's ARGV[1], after the keys), for messages. */
static const char *step_of(const rlcall *c)
{
    size_t keys = c->argc > 2 ? (size_t) strtoul(c->argv[2], NULL, 10) : 0;
    return keys + 3 < c->argc ? c->argv[keys + 3] : "EVALSHA";
}

/* Whether the node, by the replies to its calls (or its handshake: rc),
 * shows that it is no independent master: a node of a Redis Cluster
 * (MOVED..., cluster_enabled:1: DLOCK_EUNREACHABLE with in_cluster set,
 * the URL is wrong) or a replica (READONLY: DLOCK_ESERVER). Such a node is refused by this client
 * from then on (told once, as a warning), and its answers are that
 * refusal: it never takes part in a quorum, whether or not the others make
 * one without it. Returns the code (the replies freed), or rc as it was. */
static int refuse_if_not_master(node *nd, const rlcall *const *calls, size_t n, int rc,
                                redisReply **replies, char *err, size_t err_len)
{
    int said = 0; /* a reply said so (a replica's READONLY, a MOVED) */
    for (size_t k = 0; rc == DLOCK_OK && k < n; k++) {
        int code = dlock__rconn_wrong_server(nd->conn, step_of(calls[k]), replies[k]);
        if (code == DLOCK_OK)
            continue;
        rc = code;
        said = 1;
        snprintf(err, err_len, "%s", dlock_errmsg());
        for (size_t j = 0; j < n; j++) {
            freeReplyObject(replies[j]);
            replies[j] = NULL;
        }
    }
    /* refused from now on: what a reply said, or the handshake's (INFO
     * cluster said cluster_enabled:1) */
    int cluster = atomic_load(&nd->owner->in_cluster[nd->index]) != 0;
    if (rc == DLOCK_OK || (!cluster && !said))
        return rc;
    nd->refused_rc = rc;
    snprintf(nd->refused, sizeof nd->refused, "%s", err);
    /* (a node of a cluster fails every attempt: the error says it) */
    DLOCK__LOG(&nd->owner->log, cluster ? DLOCK_LOG_INFO : DLOCK_LOG_WARN,
               "%s; this client does not count it from now on", err);
    return rc;
}

/* A node going and coming is told once each way: the quorum hides it
 * from every call, and a spare node lost is an operator's to know. Told
 * once per outage, by whoever comes first: a warning here, or an error of
 * a caller that names the node (dlock__rlnodes_told; the warning then
 * would say it twice). err: the failure, "LABEL: why". */
static void tell_lost(node *nd, const char *err)
{
    if (atomic_exchange(&nd->told, 1))
        return;
    size_t len = strlen(nd->label);
    const char *why = strncmp(err, nd->label, len) == 0 && err[len] == ':' ? err + len + 2 : err;
    DLOCK__LOG(&nd->owner->log, DLOCK_LOG_WARN,
               "%s: node out of reach (the others decide while a quorum answers): %s", nd->label,
               why);
}

void dlock__rlnodes_told(dlock__rlnodes *ns, size_t i)
{
    atomic_store(&ns->nodes[i].told, 1);
}

/* Node nd's answer to round r: rc, and on DLOCK_OK its replies (taken).
 * lost: this answer found the node out of reach; 1 if the round's caller
 * tells it then (it still holds the round: its drop tells it), 0 if it
 * is the worker's to tell. */
static int answer(node *nd, dlock__rlround *r, int rc, redisReply **replies, const char *err,
                  int lost)
{
    pthread_mutex_lock(&r->mu);
    dlock__rlanswer *a = &r->answers[nd->index];
    int deferred = lost && r->held;
    if (deferred)
        r->untold |= 1u << nd->index;
    a->rc = rc;
    if (rc == DLOCK_OK)
        a->replies = replies;
    snprintf(a->err, sizeof a->err, "%s", err);
    a->done = 1;
    r->ndone++;
    /* the caller's test runs here, under the round's lock, as in its wait */
    int wake = r->decided != NULL &&
               (r->ndone == r->nnodes || r->decided(r->decided_arg, r->answers, r->nnodes));
    pthread_mutex_unlock(&r->mu);
    /* (after the lock, as in enqueue; the worker's reference keeps r) */
    if (wake)
        pthread_cond_broadcast(&r->cv);
    round_unref(r);
    return deferred;
}

/* Sends the rounds of jobs (n of them, taken off the queue, freed here) in one
 * pipelined batch: the requests of many callers share a write and a read,
 * as conn.c does for the threads of one client. A round whose time passed
 * while the node was busy is answered without being sent. */
static void run_jobs(node *nd, job **jobs, size_t n, int64_t stop_deadline)
{
    size_t ncalls = 0, live = 0;
    int64_t deadline = 0, now = dlock__now_us();
    char err[256], lost_err[256];
    int lost = 0, deferred = 0;

    atomic_store(&nd->busy_since_us, now);
    for (size_t i = 0; i < n; i++) {
        dlock__rlround *r = jobs[i]->round;
        if (nd->refused_rc != DLOCK_OK) {
            answer(nd, r, nd->refused_rc, NULL, nd->refused, 0);
            free(jobs[i]);
            continue;
        }
        if (now >= r->deadline_us || now >= stop_deadline) {
            snprintf(err, sizeof err, "%s: not sent in time (busy with an earlier request)",
                     nd->label);
            answer(nd, r, DLOCK_EUNREACHABLE, NULL, err, 0);
            free(jobs[i]);
            continue;
        }
        jobs[live++] = jobs[i];
        ncalls += r->ncmds;
        if (r->deadline_us > deadline)
            deadline = r->deadline_us;
    }
    if (live == 0)
        return;
    if (deadline > stop_deadline)
        deadline = stop_deadline;
    const rlcall **calls = calloc(ncalls, sizeof *calls);
    redisReply **replies = calloc(ncalls, sizeof *replies);
    int rc = DLOCK_ENOMEM;
    snprintf(err, sizeof err, "%s: out of memory", nd->label);
    if (calls != NULL && replies != NULL) {
        size_t k = 0;
        for (size_t i = 0; i < live; i++) {
            for (size_t c = 0; c < jobs[i]->round->ncmds; c++)
                calls[k++] = &jobs[i]->round->calls[c];
        }
        rc = run_calls(nd->owner, nd, calls, ncalls, deadline, replies);
        if (rc != DLOCK_OK)
            snprintf(err, sizeof err, "%s", dlock_errmsg());
        rc = refuse_if_not_master(nd, calls, ncalls, rc, replies, err, sizeof err);
        /* The node lost is told (tell_lost) by the caller of a round it
         * answers, if one still holds it, after the answers are in: not
         * here before them, nor by this thread after the caller reported
         * its failure (a frozen node's request times out as the round
         * does), which put the warning after the command's error line. */
        /* (a node that refuses this client's credentials is as good as
         * gone: told as well, once; it said nothing, even with -v) */
        if ((rc == DLOCK_EUNREACHABLE || rc == DLOCK_ESERVER) && !atomic_load(&nd->down) &&
            !dlock__rlnodes_in_cluster(nd->owner, nd->index)) {
            /* a close waiting for this worker need not any more */
            pthread_mutex_lock(&nd->owner->mu);
            atomic_store(&nd->down, 1);
            pthread_cond_broadcast(&nd->owner->cv);
            pthread_mutex_unlock(&nd->owner->mu);
            lost = 1;
            snprintf(lost_err, sizeof lost_err, "%s", err);
        } else if (rc == DLOCK_OK) {
            if (atomic_load(&nd->told))
                atomic_store(&nd->told, 0);
            if (atomic_load(&nd->down)) {
                atomic_store(&nd->down, 0);
                DLOCK__LOG(&nd->owner->log, DLOCK_LOG_INFO, "%s: node answers again", nd->label);
            }
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < live; i++) {
        dlock__rlround *r = jobs[i]->round;
        redisReply **mine = NULL;
        int my_rc = rc;
        if (rc == DLOCK_OK) {
            mine = calloc(r->ncmds ? r->ncmds : 1, sizeof *mine);
            if (mine == NULL) {
                my_rc = DLOCK_ENOMEM;
                snprintf(err, sizeof err, "%s: out of memory", nd->label);
                for (size_t c = 0; c < r->ncmds; c++)
                    freeReplyObject(replies[k + c]);
            } else {
                memcpy(mine, replies + k, r->ncmds * sizeof *mine);
            }
            k += r->ncmds;
        }
        deferred |= answer(nd, r, my_rc, mine, my_rc == DLOCK_OK ? "" : err, lost);
        free(jobs[i]);
    }
    atomic_store(&nd->busy_since_us, 0);
    if (lost && !deferred)
        tell_lost(nd, lost_err); /* no caller holds these rounds any more */
    free(calls);
    free(replies);
}

#define MAX_BATCH 256 /* rounds sent in one write */
/* A request in flight that long when the client closes, while a majority
 * answered all of theirs: the node is told silent (dlock__rlnodes_free). */
#define SILENT_AT_CLOSE_US 200000

static void nodes_unref(dlock__rlnodes *ns);

static void *worker(void *arg)
{
    node *nd = arg;
    job *batch[MAX_BATCH];
    pthread_mutex_lock(&nd->mu);
    for (;;) {
        if (nd->head == NULL && !nd->stop) {
            /* Let the caller that was just answered run first: its next
             * round (the release after a take) is often queued by the time
             * this thread runs again, and then neither side makes a futex
             * call (as ../../base/park.h). */
            pthread_mutex_unlock(&nd->mu);
            sched_yield();
            pthread_mutex_lock(&nd->mu);
        }
        while (nd->head == NULL && !nd->stop) {
            nd->idle = 1;
            pthread_cond_wait(&nd->cv, &nd->mu);
            nd->idle = 0;
        }
        if (nd->head == NULL)
            break; /* stopped, and nothing left to send */
        size_t n = 0;
        while (nd->head != NULL && n < MAX_BATCH) {
            batch[n++] = nd->head;
            nd->head = nd->head->next;
        }
        if (nd->head == NULL)
            nd->tail = NULL;
        int64_t stop_deadline = nd->stop ? nd->stop_deadline_us : INT64_MAX;
        pthread_mutex_unlock(&nd->mu);
        run_jobs(nd, batch, n, stop_deadline);
        pthread_mutex_lock(&nd->mu);
    }
    pthread_mutex_unlock(&nd->mu);
    dlock__rlnodes *ns = nd->owner;
    pthread_mutex_lock(&ns->mu);
    nd->ended = 1;
    pthread_cond_broadcast(&ns->cv);
    pthread_mutex_unlock(&ns->mu);
    nodes_unref(ns); /* nd may be gone after this */
    return NULL;
}

/* ---------------------------------------------------------------- nodes */

/* The nodes' log: what the workers and connections say goes to the client's
 * log while the client is open (closed: nowhere). */
static void forward(int level, const char *msg, void *arg)
{
    DLOCK__LOG((dlock__log *) arg, level, "%s", msg);
}

/* Frees the nodes, once no worker runs. */
static void nodes_destroy(dlock__rlnodes *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        node *nd = &ns->nodes[i];
        dlock__rconn_free(nd->conn);
        free(nd->label);
        pthread_mutex_destroy(&nd->mu);
        pthread_cond_destroy(&nd->cv);
    }
    dlock__rtls_free(ns->tls); /* after every link made with it */
    dlock__log_fini(&ns->log);
    pthread_mutex_destroy(&ns->mu);
    pthread_cond_destroy(&ns->cv);
    free(ns);
}

static void nodes_unref(dlock__rlnodes *ns)
{
    pthread_mutex_lock(&ns->mu);
    int left = --ns->refs;
    pthread_mutex_unlock(&ns->mu);
    if (left == 0)
        nodes_destroy(ns);
}

int dlock__rlnodes_new(const dlock__rendpoint *eps, size_t n, const char *script, const char *sha,
                       dlock__rtls *tls, dlock__rlnodes **out)
{
    dlock__rlnodes *ns = calloc(1, sizeof *ns);
    int rc = DLOCK_OK;

    *out = NULL;
    if (ns == NULL) {
        dlock__rtls_free(tls);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    ns->script = script;
    ns->script_len = strlen(script);
    snprintf(ns->sha, sizeof ns->sha, "%s", sha);
    pthread_mutex_init(&ns->mu, NULL);
    dlock__cond_init(&ns->cv);
    ns->refs = 1;
    ns->tls = tls;
    ns->client_log = n > 0 ? eps[0].log : NULL;
    dlock__log_init(&ns->log);
    if (ns->client_log != NULL) {
        /* every message is formatted here, and the client's level
         * decides there: these are rare (connections, a node lost) */
        ns->log.fn = forward;
        ns->log.arg = ns->client_log;
        atomic_store(&ns->log.level, DLOCK_LOG_DEBUG);
    }
    for (size_t i = 0; i < n; i++) {
        node *nd = &ns->nodes[i];
        dlock__rendpoint ep = eps[i];
        nd->owner = ns;
        nd->index = i;
        pthread_mutex_init(&nd->mu, NULL);
        pthread_cond_init(&nd->cv, NULL);
        ns->n = i + 1;
        ep.log = &ns->log;
        ep.tls = tls;
        ep.reached = &ns->reached[i];
        ep.absent = &ns->absent[i];
        ep.in_cluster = &ns->in_cluster[i];
        nd->label = strdup(eps[i].label);
        if (nd->label == NULL || dlock__rconn_new(&ep, &nd->conn) != DLOCK_OK) {
            rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
            goto fail;
        }
        pthread_mutex_lock(&ns->mu);
        ns->refs++; /* the worker's */
        pthread_mutex_unlock(&ns->mu);
        if (pthread_create(&nd->thread, NULL, worker, nd) != 0) {
            pthread_mutex_lock(&ns->mu);
            ns->refs--;
            pthread_mutex_unlock(&ns->mu);
            rc = dlock__fail(DLOCK_ENOMEM, "cannot start a thread for %s", nd->label);
            goto fail;
        }
        nd->started = 1;
    }
    *out = ns;
    return DLOCK_OK;
fail:
    dlock__rlnodes_free(ns, dlock__now_us(), DLOCK__NEVER); /* (idle: they end at once) */
    return rc;
}

/* Whether close still waits for worker nd: running, on a node that was
 * not found out of reach. With the nodes' mu held. */
static int worth_waiting_for(node *nd)
{
    return nd->started && !nd->ended && !atomic_load(&nd->down);
}

void dlock__rlnodes_free(dlock__rlnodes *ns, int64_t deadline_us, int64_t wait_until_us)
{
    int ended[DLOCK__REDLOCK_MAX_NODES] = {0};

    if (ns == NULL)
        return;
    for (size_t i = 0; i < ns->n; i++) {
        node *nd = &ns->nodes[i];
        pthread_mutex_lock(&nd->mu);
        nd->stop = 1;
        nd->stop_deadline_us = deadline_us;
        pthread_cond_signal(&nd->cv);
        pthread_mutex_unlock(&nd->mu);
    }
    struct timespec ts = dlock__timespec(wait_until_us);
    pthread_mutex_lock(&ns->mu);
    for (;;) {
        size_t waiting = 0;
        for (size_t i = 0; i < ns->n; i++)
            waiting += worth_waiting_for(&ns->nodes[i]);
        if (waiting == 0 || dlock__now_us() >= wait_until_us)
            break;
        pthread_cond_timedwait(&ns->cv, &ns->mu, &ts);
    }
    for (size_t i = 0; i < ns->n; i++)
        ended[i] = ns->nodes[i].ended;
    pthread_mutex_unlock(&ns->mu);
    /* A node still silent now (a spare one, hung: the others decided every
     * round without it, and its request has not timed out yet) is told
     * before the client goes, once, as a node lost is: a one-shot command
     * (dlock lock -n, status) ended before its request timed out, and said
     * nothing of it. Only while a majority of the nodes answered all they
     * were sent, and after the wait (250 ms): not a node a little slower
     * than the others, nor every node on a loaded machine. */
    int64_t now = dlock__now_us();
    size_t done = 0;
    for (size_t i = 0; i < ns->n; i++)
        done += ended[i];
    for (size_t i = 0; i < ns->n && done > ns->n / 2; i++) {
        node *nd = &ns->nodes[i];
        int64_t since = atomic_load(&nd->busy_since_us);
        if (nd->started && !ended[i] && since > 0 && now - since >= SILENT_AT_CLOSE_US &&
            !atomic_load(&nd->down)) {
            char why[96];
            snprintf(why, sizeof why, "no reply in %lld ms, while the others answered all",
                     (long long) ((now - since) / 1000));
            tell_lost(nd, why);
        }
    }
    /* A worker that ended is joined; one still busy (a node that does not
     * answer) is let go, and ends when its request times out. The owner's
     * reference, held until here, keeps the threads' handles. */
    for (size_t i = 0; i < ns->n; i++) {
        node *nd = &ns->nodes[i];
        if (!nd->started)
            continue;
        if (ended[i])
            pthread_join(nd->thread, NULL);
        else
            pthread_detach(nd->thread);
    }
    /* Nothing more to the client's log, which goes with the client: the
     * write lock waits for a message being sent. */
    pthread_rwlock_wrlock(&ns->log.mu);
    atomic_store(&ns->log.level, DLOCK_LOG_OFF);
    ns->log.fn = NULL;
    pthread_rwlock_unlock(&ns->log.mu);
    nodes_unref(ns);
}

size_t dlock__rlnodes_reached(const dlock__rlnodes *ns)
{
    size_t n = 0;
    for (size_t i = 0; i < ns->n; i++)
        n += atomic_load(&ns->reached[i]) != 0;
    return n;
}

size_t dlock__rlnodes_absent(const dlock__rlnodes *ns)
{
    size_t n = 0;
    for (size_t i = 0; i < ns->n; i++)
        n += atomic_load(&ns->reached[i]) == 0 && atomic_load(&ns->absent[i]) != 0;
    return n;
}

int dlock__rlnodes_in_cluster(const dlock__rlnodes *ns, size_t i)
{
    return atomic_load(&ns->in_cluster[i]) != 0;
}

int dlock__rlnodes_silent_for(dlock__rlnodes *ns, size_t i, int64_t us)
{
    int64_t since = atomic_load(&ns->nodes[i].busy_since_us);
    return since > 0 && dlock__now_us() - since >= us;
}

size_t dlock__rlnodes_count(const dlock__rlnodes *ns)
{
    return ns->n;
}

const char *dlock__rlnodes_label(const dlock__rlnodes *ns, size_t i)
{
    return ns->nodes[i].label;
}
