/* SPDX-License-Identifier: MIT */
/* checker_order.c - the order holders are served in: fences that go up
 * from holder to holder (fence-order), and fair waiters served in the
 * order the store queued them (fair-order). */
#define _GNU_SOURCE
#include "checker_int.h"

#include <stdlib.h>
#include <string.h>

static int by_inv_cmp(const void *a, const void *b, void *arg)
{
    const checker *c = arg;
    int64_t x = H(c, a)->t_inv, y = H(c, b)->t_inv;
    return x < y ? -1 : x > y;
}

/* Fences strictly increase from holder to holder: a hold granted after
 * another was (its acquire began after the other's "acquired") has the
 * larger fence; two readers may share one. */
void check__fences(checker *c, int lock)
{
    size_t n;
    member *list = check__members_of(c, lock, &n);
    member *by_inv = malloc(sizeof *by_inv * (n + 1));
    if (n > 0) /* (list is NULL when no hold took the lock) */
        memcpy(by_inv, list, sizeof *list * n);
    if (n > 1)
        qsort_r(by_inv, n, sizeof *by_inv, by_inv_cmp, c);
    size_t p = 0;
    /* per fence epoch (check__fence_epoch: wipes of a store whose fences
     * come from its data; 0 for other stores): a hold is compared with
     * those granted in the epoch it was granted in */
    enum { EPOCHS = 64 };
    uint64_t max_any[EPOCHS] = {0}, max_excl[EPOCHS] = {0};
    const member *who_any[EPOCHS] = {NULL}, *who_excl[EPOCHS] = {NULL};
    for (size_t i = 0; i < n; i++) {
        const member *b = &by_inv[i];
        while (p < n && H(c, &list[p])->t_ok < H(c, b)->t_inv) {
            int e = check__fence_epoch(c, H(c, &list[p])->t_ok);
            if (e < 0) {
                p++;
                continue;
            }
            e %= EPOCHS;
            uint64_t f = fence_of(c, &list[p]);
            if (f > max_any[e]) {
                max_any[e] = f;
                who_any[e] = &list[p];
            }
            if (H(c, &list[p])->hkind != H_READ && f > max_excl[e]) {
                max_excl[e] = f;
                who_excl[e] = &list[p];
            }
            p++;
        }
        int e = check__fence_epoch(c, H(c, b)->t_ok);
        if (e < 0)
            continue;
        e %= EPOCHS;
        uint64_t fb = fence_of(c, b);
        const member *who = NULL;
        if (H(c, b)->hkind == H_READ) {
            if (fb <= max_excl[e])
                who = who_excl[e];
            else if (fb < max_any[e])
                who = who_any[e];
        } else if (fb <= max_any[e]) {
            who = who_any[e];
        }
        /* The same handle again after its release failed on the connection:
         * the server never let go, so it is the same holder, same fence. */
        if (who != NULL && H(c, who)->actor == H(c, b)->actor && fence_of(c, who) == fb &&
            (H(c, who)->rel_rc == DLOCK_EUNREACHABLE || H(c, who)->rel_rc == DLOCK_ESERVER ||
             H(c, who)->rel_rc == DLOCK_ETIMEDOUT))
            who = NULL;
        if (who != NULL &&
            check__first_time(c, V_FENCE_ORDER, (uint64_t) lock, (uint64_t) who->hold)) {
            check__violation(
                c, V_FENCE_ORDER, H(c, who)->t_ok, H(c, b)->t_ok, lock, H(c, who)->actor,
                H(c, b)->actor,
                "lock %s: a%d got fence %llu at %.3f, after a%d had fence %llu at %.3f "
                "(fences went back; later holds below that fence are not listed)",
                c->s->locks[lock].name, H(c, b)->actor, (unsigned long long) fb,
                rel(c, H(c, b)->t_ok), H(c, who)->actor, (unsigned long long) fence_of(c, who),
                rel(c, H(c, who)->t_ok));
        }
    }
    free(by_inv);
    free(list);
}

/* Fair order (DLOCK_FAIR): fair waiters are served in the order the store
 * queued them. W1 is ahead of W2 for sure when the store said W1 was queued
 * (EV_QUEUED, logged once its answer had come) before W2's acquire began,
 * and so before W2's first request was sent. W2 granted while W1 was still
 * waiting is a violation when W1 cannot have left the queue meanwhile: no
 * fault touched W1's process, its link or the server from its acquire on
 * (nor within the grace before), it was not cancelled, and its budget was
 * not over. Nor may W2 have kept a place from before (a handle makes a new
 * token after a hold or a failed wait, so this is a safeguard): no fault
 * may have touched W2 since its previous acquire either (a dlock run has a
 * token of its own). */
void check__fair_order(checker *c)
{
    cancel_index cancels = check__index_cancels(c);
    int *last = malloc(sizeof *last * ((size_t) c->nactors + 1));
    int *prev = malloc(sizeof *prev * (c->natt + 1));
    size_t *queued = malloc(sizeof *queued * (c->natt + 1));
    size_t nqueued = 0;
    long timed_out = 0;

    for (int i = 0; i <= c->nactors; i++)
        last[i] = -1;
    for (size_t i = 0; i < c->natt; i++) {
        const attempt *a = &c->att[i];
        prev[i] = last[a->actor];
        last[a->actor] = (int) i;
        if (a->hkind == H_FAIR && a->t_queued > 0)
            queued[nqueued++] = i;
        timed_out += a->hkind == H_FAIR && !a->run && a->rc == DLOCK_ETIMEDOUT;
    }
    for (size_t j = 0; j < c->natt; j++) {
        const attempt *w2 = &c->att[j];
        if (w2->hkind != H_FAIR || w2->hold < 0)
            continue;
        int64_t t2 = c->holds[w2->hold].t_ok;
        int64_t since2 = prev[j] >= 0 ? c->att[prev[j]].t_inv : w2->t_inv;
        int fresh = w2->run || check__disturbed(c, w2->actor, 0, since2, t2, c->grace) == NULL;
        for (size_t q = 0; q < nqueued; q++) {
            const attempt *w1 = &c->att[queued[q]];
            if (w1->lock != w2->lock || w1->actor == w2->actor || w1->t_queued >= w2->t_inv)
                continue;
            int64_t r1 = w1->hold >= 0 ? c->holds[w1->hold].t_ok : w1->t_ret;
            if (r1 != 0 && r1 <= w2->t_inv)
                continue; /* over before W2 came */
            if (w1->hold >= 0 && r1 < t2) {
                c->tot->fair_pairs++; /* served first */
                continue;
            }
            if ((r1 != 0 && r1 <= t2) || !fresh)
                continue;
            if (w1->wait_ms >= 0 && w1->t_inv + w1->wait_ms * NS <= t2)
                continue; /* its budget was over: it may have left */
            int64_t since1 = prev[queued[q]] >= 0 ? c->att[prev[queued[q]]].t_inv : 0;
            if (w1->rc == DLOCK_ECANCELED ||
                check__cancelled_between(&cancels, w1->actor, since1, t2))
                continue;
            if (check__disturbed(c, w1->actor, w1->sup_pid, w1->t_inv, t2, c->grace) != NULL)
                continue;
            c->tot->fair_pairs++;
            check__violation(
                c, V_FAIR_ORDER, w1->t_inv, t2, w2->lock, w1->actor, w2->actor,
                "lock %s: a%d (fair%s) got the lock at %.3f, while a%d (fair), which the "
                "store had queued by %.3f, before a%d's acquire began at %.3f, was still "
                "waiting (no fault touched it, not cancelled, its budget not over)",
                c->s->locks[w2->lock].name, w2->actor, w2->run ? ", dlock run" : "", rel(c, t2),
                w1->actor, rel(c, w1->t_queued), w2->actor, rel(c, w2->t_inv));
            break; /* one per grant */
        }
    }
    /* the queued answers come from the library's log text: without them
     * this check judges nothing, and must say so */
    if ((c->cfg->caps & DLOCK_CAP_FAIR) && timed_out >= 20 && c->tot->fair_queued == 0)
        check__violation(c, V_HISTORY, c->t_end, c->t_end, -1, -1, -1,
                         "%ld fair waits timed out, none was seen queued by the store: has the "
                         "library's debug log line \"... waiting (queued in the store)\" changed? "
                         "fair order cannot be judged",
                         timed_out);
    free(queued);
    free(prev);
    free(last);
    check__free_cancels(c, &cancels);
}
