/* SPDX-License-Identifier: MIT */
/* rounds.c - reading a round's answers (nodes.h) the Redlock way: what each
 * node said, whether a quorum decided, which nodes to name when none did. */
#include "../../base/clock.h"
#include "../../base/error.h"
#include "../redis/replies.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An integer reply, or the first element of an array; `fallback` if none. */
long long dlock__rl_int_at(const redisReply *r, size_t i, long long fallback)
{
    if (r == NULL)
        return fallback;
    if (r->type == REDIS_REPLY_INTEGER && i == 0)
        return r->integer;
    if (r->type == REDIS_REPLY_ARRAY && i < r->elements &&
        r->element[i]->type == REDIS_REPLY_INTEGER)
        return r->element[i]->integer;
    return fallback;
}

/* What node i said to call k (internal.h). */
int dlock__rl_said(const dlock__rlanswer *a, size_t k)
{
    if (!a->done || a->rc != DLOCK_OK || a->replies[k]->type == REDIS_REPLY_ERROR)
        return DLOCK__RL_NO_ANSWER;
    return (int) dlock__rl_int_at(a->replies[k], 0, DLOCK__RL_NO_ANSWER);
}

/* Why node i is named among those that did not answer, or NULL if it is
 * not: one that answered (answered(), or by default a reply of a step to
 * call 0), or one not heard from yet unless the wait ran out. *sentence:
 * the reason is a sentence that names the node itself ("H:P is a
 * replica..."), quoted as it is; otherwise the node's label is taken off
 * its front ("H:P: why"). reason: room for a reply's reason. */
static const char *unanswered_why(const rlbackend *b, const dlock__rlanswer *a, size_t i,
                                  int timed_out, dlock__rl_answered_fn answered, int which,
                                  char *reason, size_t len, int *sentence)
{
    if (!a[i].done && !timed_out)
        return NULL;
    if (answered != NULL ? answered(&a[i]) : dlock__rl_said(&a[i], 0) != DLOCK__RL_NO_ANSWER)
        return NULL;
    int refused = a[i].done && a[i].rc == DLOCK_ESERVER;
    if ((which == DLOCK__RL_REFUSED && !refused) || (which == DLOCK__RL_OUT && refused))
        return NULL;
    const char *why = !a[i].done ? "no reply in time"
                      : a[i].rc != DLOCK_OK
                          ? a[i].err
                          : dlock__reply_reason(a[i].replies[0], "unexpected reply", reason, len);
    const char *label = dlock__rlnodes_label(b->nodes, i);
    size_t label_len = strlen(label);
    *sentence = strncmp(why, label, label_len) == 0 && why[label_len] == ' ';
    if (strncmp(why, label, label_len) == 0 && strncmp(why + label_len, ": ", 2) == 0)
        why += label_len + 2;
    return why;
}

/* The message naming the nodes that did not answer: "h1:p1, h2:p2 (why);
 * h3:p3 (why)", each reason once with the nodes it is of, in len bytes:
 * the nodes that do not fit are counted ("and 2 more"), so that the text
 * never ends mid-word. A node that had not answered yet is named only when
 * the wait ran out (timed_out): a round decided before it answered did not
 * wait for it, and it may well be up. */
static void unanswered(const rlbackend *b, const dlock__rlanswer *a, int timed_out,
                       dlock__rl_answered_fn answered, int which, char *buf, size_t len)
{
    enum { MORE = 16 }; /* room kept for " and 15 more" */
    size_t used = 0, more = 0;
    char reason[256], other_reason[256];
    int sentence, other_sentence;

    buf[0] = '\0';
    for (size_t i = 0; i < b->n; i++) {
        const char *why =
            unanswered_why(b, a, i, timed_out, answered, which, reason, sizeof reason, &sentence);
        if (why == NULL)
            continue;
        /* the error names it: its warning would say it twice */
        if (!a[i].done || a[i].rc == DLOCK_EUNREACHABLE || a[i].rc == DLOCK_ESERVER)
            dlock__rlnodes_told(b->nodes, i);
        /* the nodes of the same reason after it, and whether one before it
         * had that reason (then it was named with that one) */
        int named = 0;
        size_t group = 1, need = (used ? 2 : 0) + strlen(why);
        if (!sentence)
            need += strlen(dlock__rlnodes_label(b->nodes, i)) + 3;
        for (size_t j = 0; j < b->n && !sentence && !named; j++) {
            if (j == i)
                continue;
            const char *also = unanswered_why(b, a, j, timed_out, answered, which, other_reason,
                                              sizeof other_reason, &other_sentence);
            if (also == NULL || other_sentence || strcmp(also, why) != 0)
                continue;
            if (j < i) {
                named = 1;
            } else {
                group++;
                need += 2 + strlen(dlock__rlnodes_label(b->nodes, j));
            }
        }
        if (named)
            continue;
        if (more > 0 || used + need + MORE >= len) {
            more += group;
            continue;
        }
        if (sentence) {
            used += (size_t) snprintf(buf + used, len - used, "%s%s", used ? "; " : "", why);
            continue;
        }
        used += (size_t) snprintf(buf + used, len - used, "%s%s", used ? "; " : "",
                                  dlock__rlnodes_label(b->nodes, i));
        for (size_t j = i + 1; j < b->n && group > 1; j++) {
            const char *also = unanswered_why(b, a, j, timed_out, answered, which, other_reason,
                                              sizeof other_reason, &other_sentence);
            if (also != NULL && !other_sentence && strcmp(also, why) == 0)
                used += (size_t) snprintf(buf + used, len - used, ", %s",
                                          dlock__rlnodes_label(b->nodes, j));
        }
        used += (size_t) snprintf(buf + used, len - used, " (%s)", why);
    }
    if (more > 0)
        snprintf(buf + used, len - used, "%s%zu more", used ? " and " : "", more);
}

void dlock__rl_unanswered(const rlbackend *b, const dlock__rlanswer *a, int timed_out,
                          dlock__rl_answered_fn answered, char *buf, size_t len)
{
    unanswered(b, a, timed_out, answered, DLOCK__RL_ALL, buf, len);
}

/* The nodes that refused this client and those out of reach, apart: a
 * wrong password is to mend, a node down to start, and one list after
 * "refused this client" named the closed node among the refusals (a new
 * user's trial). */
int dlock__rl_fail_no_quorum(const rlbackend *b, const dlock__rlanswer *a, int timed_out,
                             dlock__rl_answered_fn answered, const char *what, const char *counts)
{
    char refused_why[1000], out_why[1000], unused[256];
    size_t refused = 0, out = 0;
    int sentence;

    for (size_t i = 0; i < b->n; i++) {
        refused += unanswered_why(b, a, i, timed_out, answered, DLOCK__RL_REFUSED, unused,
                                  sizeof unused, &sentence) != NULL;
        out += unanswered_why(b, a, i, timed_out, answered, DLOCK__RL_OUT, unused, sizeof unused,
                              &sentence) != NULL;
    }
    unanswered(b, a, timed_out, answered, DLOCK__RL_REFUSED, refused_why, sizeof refused_why);
    unanswered(b, a, timed_out, answered, DLOCK__RL_OUT, out_why, sizeof out_why);
    /* refusals that leave no quorum: a set-up to mend (AUTH, a
     * certificate, a replica), not an outage to wait out */
    int rc = refused > b->n - b->quorum ? DLOCK_ESERVER : DLOCK_EUNREACHABLE;
    if (refused == 0)
        return dlock__fail(rc, "%s: %s%zu of %zu nodes are out of reach (a quorum needs %zu): %s%s",
                           b->label, what, out, b->n, b->quorum, out_why, counts);
    if (out == 0)
        return dlock__fail(rc,
                           "%s: %s%zu of %zu nodes refused this client (a quorum needs %zu): %s%s",
                           b->label, what, refused, b->n, b->quorum, refused_why, counts);
    return dlock__fail(rc,
                       "%s: %s%zu of %zu nodes refused this client and %zu %s out of reach (a "
                       "quorum needs %zu): %s; out of reach: %s%s",
                       b->label, what, refused, b->n, out, out == 1 ? "is" : "are", b->quorum,
                       refused_why, out_why, counts);
}

/* A node that is a node of a Redis Cluster (nodes.c refused it): the URL
 * is wrong, whatever the others said. Said as another kind of server at a
 * node's port is (DLOCK_EUNREACHABLE; it was DLOCK_EINVAL). */
int dlock__rl_wrong_url(const rlbackend *b, const dlock__rlanswer *a)
{
    for (size_t i = 0; i < b->n; i++) {
        if (a[i].done && a[i].rc != DLOCK_OK && dlock__rlnodes_in_cluster(b->nodes, i))
            return dlock__fail(a[i].rc, "%s: %s", b->label, a[i].err);
    }
    return DLOCK_OK;
}

/* How the nodes fared in call 0 of a round (internal.h). */
void dlock__rl_count(const dlock__rlanswer *a, size_t n, int timed_out, dlock__rlcount *c)
{
    *c = (dlock__rlcount){0};
    for (size_t i = 0; i < n; i++) {
        if (!a[i].done)
            *(timed_out ? &c->out : &c->pending) += 1;
        else if (dlock__rl_said(&a[i], 0) != DLOCK__RL_NO_ANSWER)
            c->answered++;
        else if (a[i].rc == DLOCK_ESERVER)
            c->refused++;
        else
            c->out++;
    }
}

/* "1 answered, 1 refused, 1 out of reach" (the categories with nodes in
 * them; answered always), in buf. */
void dlock__rl_count_text(const dlock__rlcount *c, char *buf, size_t len)
{
    int used = snprintf(buf, len, "%zu answered", c->answered);
    if (c->refused > 0 && used >= 0 && (size_t) used < len)
        used += snprintf(buf + used, len - (size_t) used, ", %zu refused", c->refused);
    if (c->out > 0 && used >= 0 && (size_t) used < len)
        used += snprintf(buf + used, len - (size_t) used, ", %zu out of reach", c->out);
    if (c->pending > 0 && used >= 0 && (size_t) used < len)
        snprintf(buf + used, len - (size_t) used, ", %zu not heard from yet", c->pending);
}

/* Counts call k's answers: yes, answered otherwise, and not answered. */
void dlock__rl_tally(const dlock__rlanswer *a, size_t n, size_t k, int yes_is, size_t *yes,
                     size_t *no, size_t *none)
{
    *yes = *no = *none = 0;
    for (size_t i = 0; i < n; i++) {
        int says = dlock__rl_said(&a[i], k);
        if (says == DLOCK__RL_NO_ANSWER)
            (*none)++;
        else if (says == yes_is)
            (*yes)++;
        else
            (*no)++;
    }
}

/* Nodes that have not answered (or failed) yet. */
size_t dlock__rl_pending_of(const dlock__rlanswer *a, size_t n)
{
    size_t pending = 0;
    for (size_t i = 0; i < n; i++)
        pending += !a[i].done;
    return pending;
}

/* Decided once the outcome is known: yes from a quorum, no from more than
 * a quorum spares, or neither whatever the nodes not heard from yet say
 * (too many failed). Not before: a live node that is a little slower is
 * waited for rather than counted out. */
int dlock__rl_decided_one(void *arg, const dlock__rlanswer *a, size_t n)
{
    const dlock__rlverdict *v = arg;
    size_t yes, no, none, pending = dlock__rl_pending_of(a, n), q = v->b->quorum;
    dlock__rl_tally(a, n, v->k, v->yes, &yes, &no, &none);
    return yes >= q || no > n - q || (yes + pending < q && no + pending <= n - q);
}

/* A round of one script call (the same on every node), sent. NULL when out
 * of memory (recorded). */
dlock__rlround *dlock__rl_send_one(rlbackend *b, const rllock *l, size_t argc, const char **argv,
                                   size_t *lens, int64_t deadline_us)
{
    /* numkeys, the three keys, then the step's arguments */
    const char *all[16] = {"3", l->keys[0], l->keys[1], l->waiting};
    size_t all_lens[16] = {1, l->key_lens[0], l->key_lens[1], strlen(l->waiting)};
    for (size_t i = 0; i < argc && i < 12; i++) {
        all[4 + i] = argv[i];
        all_lens[4 + i] = lens[i];
    }
    dlock__rlround *r = dlock__rlround_new(1);
    if (r == NULL) {
        dlock__fail(DLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    if (dlock__rlround_set(r, 0, argc + 4, all, all_lens) != DLOCK_OK) {
        dlock__rlround_drop(r);
        return NULL;
    }
    dlock__rlround_send(b->nodes, r, deadline_us);
    return r;
}

int dlock__rl_quorum_call(rlbackend *b, const rllock *l, size_t argc, const char **argv,
                          size_t *lens, int64_t until_us, int64_t deadline_us, const char *what)
{
    dlock__rlround *r = dlock__rl_send_one(b, l, argc, argv, lens, deadline_us);
    if (r == NULL)
        return DLOCK_ENOMEM;
    dlock__rlverdict v = {b, 0, 1};
    const dlock__rlanswer *a = dlock__rlround_wait(r, dlock__rl_decided_one, &v, until_us);
    size_t yes, no, none;
    int rc = DLOCK_OK;
    dlock__rl_tally(a, b->n, 0, 1, &yes, &no, &none);
    if (yes < b->quorum && (rc = dlock__rl_wrong_url(b, a)) != DLOCK_OK) {
        /* (a node of a Redis Cluster: the URL is wrong) */
    } else if (yes < b->quorum) {
        char why[1500];
        dlock__rl_unanswered(b, a, !dlock__rl_decided_one(&v, a, b->n), NULL, why, sizeof why);
        rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: %s a quorum of %zu of %zu nodes in time: %s",
                         b->label, what, b->quorum, b->n, why);
    }
    dlock__rlround_drop(r);
    return rc;
}
