/* SPDX-License-Identifier: MIT */
/* checker_exclusion.c - who held at once: two holds that exclude each
 * other and overlap (overlap when the fence does not tell them apart;
 * late-loss when the older holder was told of its loss too late or never,
 * or, after a loss the store caused, neither holder was told within a
 * lease), a stale holder's access accepted after the newer holder's
 * (stale-write), and a write that clobbered another (lost-update).
 *
 * A frozen holder cannot be told in time, nor one whose lock the store
 * lost: the fence is their only protection (docs/faults.md, "What the
 * checker checks"). */
#define _GNU_SOURCE
#include "checker_int.h"

#include <stdlib.h>

/* Whether the holder of h was told its lock was lost (or did not believe
 * it held on: it died, its release failed): not a release that said OK. */
static int told_of_loss(const checker *c, const hold *h)
{
    const attempt *at = &c->att[h->attempt];
    if (h->end == END_LOST_CB || h->end == END_CHECK || h->end == END_TERM ||
        h->end == END_KILLED || h->end == END_EXIT)
        return 1;
    if (h->run)
        return at->run_exit == 75 || at->run_exit >= 128 || at->sent_term;
    return h->end == END_RELEASE && h->rel_rc != DLOCK_OK;
}

/* ...and was told within a lease (its fixed lease, else the client's), a
 * command timeout and the slack of `from`. */
static int told_in_time(const checker *c, const hold *h, int64_t from)
{
    int64_t lease =
        c->att[h->attempt].lease_ms > 0 ? c->att[h->attempt].lease_ms : c->cfg->lease_ms;
    return told_of_loss(c, h) && h->t_end <= from + (lease + c->cfg->timeout_ms) * NS + c->slack;
}

/* Two holds at once where at most one may hold (A older, B newer). */
static void judge_pair(checker *c, int lock, const member *ma, const member *mb)
{
    const hold *a = H(c, ma), *b = H(c, mb);
    const char *name = c->s->locks[lock].name;
    uint64_t fa = fence_of(c, ma), fb = fence_of(c, mb);

    /* The store forgot A's hold and its fences: A's only protection was
     * its loss report, and the documented assumption (such a store keeps
     * its data) did not hold. */
    if (check__fences_reset(c, a->t_ok, b->t_ok) != NULL)
        return;
    /* B may have been granted the lock before A, and the store lost it
     * before B's success was recorded (a multi-lock taking its other
     * members; a `dlock run` starting its command): B is then the older
     * holder, and its writes are the ones to refuse. */
    if (fb < fa && check__data_lost(c, lock, b->t_inv, b->t_ok) != NULL) {
        if (b->last_ok[mb->m] > 0 && a->first_ok[ma->m] > 0 &&
            b->last_ok[mb->m] > a->first_ok[ma->m])
            check__violation(
                c, V_STALE_WRITE, b->t_ok, b->last_ok[mb->m], lock, b->actor, a->actor,
                "lock %s: the resource accepted a%d's access (fence %llu) at %.3f, after "
                "a%d's (fence %llu) at %.3f",
                name, b->actor, (unsigned long long) fb, rel(c, b->last_ok[mb->m]), a->actor,
                (unsigned long long) fa, rel(c, a->first_ok[ma->m]));
        return;
    }
    if (fb <= fa) {
        check__violation(c, V_OVERLAP, a->t_ok, b->t_ok, lock, a->actor, b->actor,
                         "lock %s: a%d (%s, fence %llu) held from %.3f to %.3f (%s) while a%d (%s, "
                         "fence %llu) got it at %.3f: the fence does not tell them apart",
                         name, a->actor, fs_hkind_name(a->hkind), (unsigned long long) fa,
                         rel(c, a->t_ok), rel(c, a->t_end), check__end_name(a->end), b->actor,
                         fs_hkind_name(b->hkind), (unsigned long long) fb, rel(c, b->t_ok));
        return;
    }
    /* A frozen holder cannot be told in time, nor one whose lock the store
     * lost: their protection is the fence alone. */
    const window *fz = check__frozen(c, a->pid, a->sup_pid, a->t_ok, b->t_ok);
    /* (a loss while B was still asking counts too: B's grant may predate
     * it; and while A was asking: a multi-lock's member may have been taken
     * long before the whole was) */
    int64_t since = a->t_inv < b->t_inv ? a->t_inv : b->t_inv;
    const window *dl = check__data_lost(c, lock, since, b->t_ok);
    if (fz == NULL && dl == NULL && a->t_end - b->t_ok > c->slack) {
        check__violation(c, V_LATE_LOSS, a->t_ok, b->t_ok, lock, a->actor, b->actor,
                         "lock %s: a%d (%s, fence %llu, not frozen) held until %.3f (%s), %lld ms "
                         "after a%d (%s, fence %llu) got it at %.3f",
                         name, a->actor, fs_hkind_name(a->hkind), (unsigned long long) fa,
                         rel(c, a->t_end), check__end_name(a->end),
                         (long long) ((a->t_end - b->t_ok) / NS), b->actor, fs_hkind_name(b->hkind),
                         (unsigned long long) fb, rel(c, b->t_ok));
    }
    /* A loss the store caused (a failover's, a wipe's) cannot be told in
     * time, but it is told, never silent: by the next renewal
     * (include/dlock.h), within a lease at the latest (a fixed lease: when
     * it ends). Usually A lost it; in a split brain (a deposed master that
     * still serves) B's grant is the one lost: one of them must be told. */
    if (fz == NULL && dl != NULL) {
        int64_t from = b->t_ok > dl->t1 ? b->t_ok : dl->t1;
        int told_a = told_in_time(c, a, from), told_b = told_in_time(c, b, from);
        if (check__first_time(c, V_COUNT, (uint64_t) a->attempt, (uint64_t) b->attempt)) {
            c->tot->store_losses++;
            /* (wait=N: every change a replica acknowledged survives its
             * promotion, so no loss at all) */
            if (c->cfg->no_store_loss)
                check__violation(c, V_STORE_LOSS, a->t_ok, b->t_ok, lock, a->actor, b->actor,
                                 "lock %s: a%d (%s, fence %llu) and a%d (fence %llu, from %.3f) "
                                 "held it at once after %s, which the run asked never to happen "
                                 "(--no-store-loss)",
                                 name, a->actor, fs_hkind_name(a->hkind), (unsigned long long) fa,
                                 b->actor, (unsigned long long) fb, rel(c, b->t_ok), dl->what);
        }
        if (!told_a && !told_b &&
            check__first_time(c, V_LATE_LOSS, (uint64_t) a->attempt, (uint64_t) b->attempt))
            check__violation(
                c, V_LATE_LOSS, a->t_ok, a->t_end > b->t_end ? a->t_end : b->t_end, lock, a->actor,
                b->actor,
                "lock %s: a%d (%s, fence %llu) and a%d (fence %llu, from %.3f) held it at "
                "once after %s, and neither was told in time: a%d ended at %.3f (%s), a%d "
                "at %.3f (%s)",
                name, a->actor, fs_hkind_name(a->hkind), (unsigned long long) fa, b->actor,
                (unsigned long long) fb, rel(c, b->t_ok), dl->what, a->actor, rel(c, a->t_end),
                check__end_name(a->end), b->actor, rel(c, b->t_end), check__end_name(b->end));
    }
    /* (a semaphore's holders share the resource: its stale accesses are
     * judged by the resource's own rule, not pairwise) */
    if (c->s->locks[lock].kind != LK_SEM && b->first_ok[mb->m] > 0 &&
        a->last_ok[ma->m] > b->first_ok[mb->m]) {
        check__violation(
            c, V_STALE_WRITE, a->t_ok, a->last_ok[ma->m], lock, a->actor, b->actor,
            "lock %s: the resource accepted a%d's access (fence %llu) at %.3f, after a%d's "
            "(fence %llu) at %.3f",
            name, a->actor, (unsigned long long) fa, rel(c, a->last_ok[ma->m]), b->actor,
            (unsigned long long) fb, rel(c, b->first_ok[mb->m]));
    }
}

void check__exclusion(checker *c, int lock)
{
    size_t n;
    member *list = check__members_of(c, lock, &n);
    member *active = malloc(sizeof *active * (n + 1));
    size_t na = 0;
    int sem = c->s->locks[lock].kind == LK_SEM;
    int cap = c->s->locks[lock].capacity;

    for (size_t i = 0; i < n; i++) {
        const hold *b = H(c, &list[i]);
        size_t keep = 0;
        for (size_t j = 0; j < na; j++) {
            if (H(c, &active[j])->t_end > b->t_ok)
                active[keep++] = active[j];
        }
        na = keep;
        if (sem) {
            int used = b->take;
            for (size_t j = 0; j < na; j++)
                used += H(c, &active[j])->take;
            /* too many permits: some holders' permits should have gone. The
             * store does not say whose: a holder that could have lost its
             * permit unseen (frozen, or the store lost its data) is taken
             * first, then the holders that have held longest. Taking the
             * oldest first would blame a live holder for the permit of a
             * frozen one whose session the store rightly ended. */
            while (used > cap && na > 0) {
                size_t low = 0;
                int low_excused = 0;
                for (size_t j = 0; j < na; j++) {
                    const hold *a = H(c, &active[j]);
                    int64_t since = a->t_inv < b->t_inv ? a->t_inv : b->t_inv;
                    int excused = check__frozen(c, a->pid, a->sup_pid, a->t_ok, b->t_ok) != NULL ||
                                  check__data_lost(c, lock, since, b->t_ok) != NULL;
                    if (j == 0 || excused > low_excused ||
                        (excused == low_excused && a->t_ok < H(c, &active[low])->t_ok)) {
                        low = j;
                        low_excused = excused;
                    }
                }
                judge_pair(c, lock, &active[low], &list[i]);
                used -= H(c, &active[low])->take;
                active[low] = active[--na];
            }
        } else {
            for (size_t j = 0; j < na; j++) {
                if (exclusive(H(c, &active[j])->hkind) || exclusive(b->hkind))
                    judge_pair(c, lock, &active[j], &list[i]);
            }
        }
        active[na++] = list[i];
    }
    free(active);
    free(list);
}

void check__lost_updates(checker *c)
{
    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        if (e->type != EV_ACCESS)
            continue;
        c->tot->accesses++;
        if (e->rc)
            c->tot->accepted++;
        else
            c->tot->refused++;
        if (e->flags & EVF_CLOBBER)
            check__violation(
                c, V_LOST_UPDATE, e->t - 500 * NS, e->t, e->lock, e->actor, -1,
                "lock %s: a%d's write (fence %llu) at %.3f overwrote a write made since "
                "its read: an update was lost",
                c->s->locks[e->lock].name, e->actor, (unsigned long long) e->fence, rel(c, e->t));
    }
}
