/* SPDX-License-Identifier: MIT */
/* internal.h - what the files of the Redlock backend share (not a public
 * header): the backend's and a lock's state, and the rounds' helpers
 * (rounds.c), the lock objects (locks.c) and the operators' calls
 * (operator.c), which redlock.c's backend table names. */
#ifndef DLOCK_BACKEND_REDLOCK_INTERNAL_H
#define DLOCK_BACKEND_REDLOCK_INTERNAL_H

#include "../backend.h"
#include "nodes.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rlbackend {
    dlock__store base;
    dlock__client_cfg cfg;
    char *prefix;
    char *label;
    dlock__rlnodes *nodes;
    struct dlock__rtls *tls; /* rediss+redlock://: the TLS context until the nodes own it */
    size_t n, quorum;
    char *record_key;             /* P:owner:<client id> */
    char *records;                /* P:owner: */
    _Atomic int64_t record_until; /* the owner record lasts until then on a quorum (0: never
                                     written) */
    atomic_int record_writing;    /* an attempt is writing it */
    atomic_int record_kept;       /* a hold was detached: the record outlives the client */
} rlbackend;

typedef struct rllock {
    dlock__store_lock base;
    char *keys[3]; /* L (or N in simple mode), the fence counter, the name N (keys.h;
                      one block at keys[0]) */
    size_t key_lens[3];
    char *other;   /* the name's key of the other layout: N for a mutex, L for simple; N
                      for the read-write lock */
    char *waiting; /* the polling waiters' marks (node.lua): P:{E}:waiting of the mutex,
                      W:waiting of readers, W:writing of writers (W = P:{E}:rw) */
    int rw;        /* the read-write lock (a reader or the writer) */
    /* node.lua's steps for this kind: take / rtake / wtake, renew / rrenew,
     * release / rrelease */
    const char *take_op, *renew_op, *release_op;
    /* The last attempt found a quorum out of reach (the caller's thread,
     * as every call on a handle): the cancel that follows is not waited for */
    int out_of_reach;
    /* The last attempt was refused because this owner's token holds the
     * name already (another kind, or a reader beside its write): the
     * cancel that follows sends nothing (a release under that token would
     * end the owner's other handle's hold) */
    int refused_self;
    /* The read-write lock's wait: its place in line (README: turns), the
     * same on every node, from the nodes' clocks at its first refusal (0:
     * none yet), and when an attempt last sent it (the caller's thread) */
    int64_t since_ms;
    int64_t since_sent_us;
} rllock;

#define RLB(s) DLOCK__STORE_OF(rlbackend, s)
#define RLL(l) DLOCK__STORE_OF(rllock, l)

/* ---------------------------------------------------------------- rounds.c */

/* An integer reply, or element i of an array; `fallback` if none. */
long long dlock__rl_int_at(const redisReply *r, size_t i, long long fallback);
/* What node a said to call k: 1, 0, -1 as the script says; NO_ANSWER: no
 * answer (or an error reply). */
#define DLOCK__RL_NO_ANSWER 2
int dlock__rl_said(const dlock__rlanswer *a, size_t k);
/* Whether a node's answer is one the round can use (a status round's
 * reply is an array, not a step's integer). */
typedef int (*dlock__rl_answered_fn)(const dlock__rlanswer *a);
/* Names the nodes that did not answer in buf (len bytes, never cut
 * mid-word), each reason once with the nodes it is of; one not heard from
 * yet only when the wait ran out. answered: NULL for a step's round (an
 * integer reply to call 0). For an error about to be returned: the nodes
 * out of reach it names are told (dlock__rlnodes_told), not warned of
 * again. */
void dlock__rl_unanswered(const rlbackend *b, const dlock__rlanswer *a, int timed_out,
                          dlock__rl_answered_fn answered, char *buf, size_t len);
/* Which nodes a list names: all that did not answer, those that refused
 * this client (DLOCK_ESERVER: AUTH, a certificate, a replica), or those
 * out of reach (any other failure, or silent when the wait ran out). */
enum { DLOCK__RL_ALL, DLOCK__RL_REFUSED, DLOCK__RL_OUT };
/* Fails for want of a quorum, the nodes that refused this client and
 * those out of reach counted and named apart: "<label>: <what>R of N
 * nodes refused this client and O is out of reach (a quorum needs Q):
 * <refused>; out of reach: <out><counts>" (each part only when it has
 * nodes). DLOCK_ESERVER when the refusals alone leave no quorum, else
 * DLOCK_EUNREACHABLE. what: "" or "list: "; counts: "" or "; 1 answered". */
int dlock__rl_fail_no_quorum(const rlbackend *b, const dlock__rlanswer *a, int timed_out,
                             dlock__rl_answered_fn answered, const char *what, const char *counts);
/* A node of a Redis Cluster among the answers (the URL is wrong): fails
 * as its refusal did (DLOCK_EUNREACHABLE, "H:P answered, but not as an
 * independent Redis master") with the URL's label; else DLOCK_OK. */
int dlock__rl_wrong_url(const rlbackend *b, const dlock__rlanswer *a);
/* How the nodes fared in call 0 of a round, each node counted once: it
 * answered; it refused this client (AUTH, a certificate, a replica); it
 * is out of reach (failed, or silent when the wait ran out: timed_out; a
 * node of a cluster fails the round first: dlock__rl_wrong_url); or the
 * round was decided before it answered. */
typedef struct dlock__rlcount {
    size_t answered, refused, out, pending;
} dlock__rlcount;
void dlock__rl_count(const dlock__rlanswer *a, size_t n, int timed_out, dlock__rlcount *c);
/* "1 answered, 1 refused, 1 out of reach, 1 not heard from yet" (the
 * categories with nodes in them; answered always), in buf. */
void dlock__rl_count_text(const dlock__rlcount *c, char *buf, size_t len);
/* A decision on call k: yes from a quorum, or a quorum out of reach (no +
 * failed beyond n - quorum). */
typedef struct dlock__rlverdict {
    const rlbackend *b;
    size_t k; /* the call of each node's batch */
    int yes;  /* the answer that counts as yes */
} dlock__rlverdict;
/* Counts call k's answers: yes, answered otherwise, and not answered. */
void dlock__rl_tally(const dlock__rlanswer *a, size_t n, size_t k, int yes_is, size_t *yes,
                     size_t *no, size_t *none);
/* Nodes that have not answered (or failed) yet. */
size_t dlock__rl_pending_of(const dlock__rlanswer *a, size_t n);
/* A round's decision (arg: a dlock__rlverdict) once the outcome is known. */
int dlock__rl_decided_one(void *arg, const dlock__rlanswer *a, size_t n);
/* A round of one script call on lock l's keys, sent to every node; NULL
 * when out of memory (recorded). */
dlock__rlround *dlock__rl_send_one(rlbackend *b, const rllock *l, size_t argc, const char **argv,
                                   size_t *lens, int64_t deadline_us);

/* One script call on lock l's keys that a quorum must say yes (1) to,
 * waited for until until_us: DLOCK_OK, or DLOCK_EUNREACHABLE "<label>:
 * <what> a quorum of Q of N nodes in time: <the nodes that did not>". */
int dlock__rl_quorum_call(rlbackend *b, const rllock *l, size_t argc, const char **argv,
                          size_t *lens, int64_t until_us, int64_t deadline_us, const char *what);

/* ---------------------------------------------------------------- locks.c */

int dlock__rl_lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                       dlock__store_lock **out);
void dlock__rl_lock_free(dlock__store *s, dlock__store_lock *sl);

/* ---------------------------------------------------------------- operator.c */

int dlock__rl_query(dlock__store *s, dlock__store_lock *sl, dlock_status *out, int64_t deadline_us);
int dlock__rl_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline_us);
int dlock__rl_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline_us);
int dlock__rl_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline_us);

#endif
