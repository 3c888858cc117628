/* SPDX-License-Identifier: MIT */
/* checker_history.c - the history rebuilt: the actors, the attempts (one
 * acquire call each) and the holds (an acquire that succeeded, from its
 * "acquired" to the moment its holder stopped believing it held: release
 * called, loss reported, process killed or ended), and the indexes the
 * checks look them up by (the holds of a lock, the cancels aimed at an
 * actor).
 *
 * Records are read in time order. A loss report that comes before the
 * acquire's return was logged is kept on the attempt and judged when the
 * return comes (a spurious-loss when no hold follows). */
#define _GNU_SOURCE
#include "checker_int.h"
#include "nemesis.h"

#include <stdlib.h>
#include <string.h>

const char *check__end_name(int end)
{
    static const char *const names[] = {
        "never ended",      "release called",         "on_lost callback",
        "dlock_lock_check", "SIGTERM from dlock run", "process killed",
        "process ended"};
    return names[end];
}

static hold *hold_of_op(checker *c, uint64_t op)
{
    if (op == 0 || op >= c->nops || c->att_by_op[op] < 0)
        return NULL;
    int h = c->att[c->att_by_op[op]].hold;
    return h >= 0 ? &c->holds[h] : NULL;
}

attempt *check__attempt_of_op(checker *c, uint64_t op)
{
    if (op == 0 || op >= c->nops || c->att_by_op[op] < 0)
        return NULL;
    return &c->att[c->att_by_op[op]];
}

static void end_hold(hold *h, int64_t t, int end)
{
    if (h->t_end == 0) {
        h->t_end = t;
        h->end = end;
    }
}

static void report_loss(hold *h, int64_t t, int kind)
{
    if (h->t_report == 0) {
        h->t_report = t;
        h->report_kind = kind;
    }
    end_hold(h, t, kind);
}

void check__rebuild(checker *c)
{
    c->nactors = atomic_load(&c->s->next_actor);
    if (c->nactors > MAX_ACTORS)
        c->nactors = MAX_ACTORS;
    c->actors = calloc((size_t) c->nactors + 1, sizeof *c->actors);
    c->nops = atomic_load(&c->s->next_op) + 1;
    c->att_by_op = malloc(sizeof *c->att_by_op * c->nops);
    for (uint64_t i = 0; i < c->nops; i++)
        c->att_by_op[i] = -1;
    int *last_hold = malloc(sizeof *last_hold * ((size_t) c->nactors + 1));
    int *last_att = malloc(sizeof *last_att * ((size_t) c->nactors + 1));
    for (int i = 0; i <= c->nactors; i++)
        last_hold[i] = last_att[i] = -1;

    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        actor_info *ai = e->actor >= 0 && e->actor < c->nactors ? &c->actors[e->actor] : NULL;
        attempt *a;
        hold *h;
        switch (e->type) {
        case EV_ACTOR:
            if (ai == NULL)
                break;
            ai->known = 1;
            ai->run = (e->flags & EVF_RUN) != 0;
            ai->hkind = e->kind;
            ai->lock = e->lock;
            ai->link = e->take;
            ai->pid = e->pid;
            snprintf(ai->token, sizeof ai->token, "%s", e->text);
            break;
        case EV_ACQ_INV:
            /* a re-entry keeps the lease at least the client's, renewed
             * from then on (it may have reached the store even if it failed) */
            if ((e->flags & EVF_REENTRANT) && e->lease_ms == 0 &&
                (h = hold_of_op(c, e->op)) != NULL)
                h->renewed = 1;
            if (ai == NULL || (e->flags & EVF_REENTRANT))
                break;
            GROW(c->att, c->natt, c->catt);
            a = &c->att[c->natt];
            memset(a, 0, sizeof *a);
            a->actor = e->actor;
            a->hkind = e->kind;
            a->lock = e->lock;
            a->run = (e->flags & EVF_RUN) != 0;
            a->flags = e->flags;
            a->take = e->take;
            a->op = e->op;
            a->t_inv = e->t;
            a->rc = -1;
            a->run_exit = -1;
            a->wait_ms = e->wait_ms;
            a->lease_ms = e->lease_ms;
            a->hold = -1;
            a->pid = e->pid;
            if (e->op < c->nops)
                c->att_by_op[e->op] = (int) c->natt;
            last_att[a->actor] = (int) c->natt;
            c->natt++;
            break;
        case EV_SPAWN:
            if ((a = check__attempt_of_op(c, e->op)) != NULL)
                a->sup_pid = e->rc;
            break;
        case EV_QUEUED:
            if ((a = check__attempt_of_op(c, e->op)) != NULL && a->t_queued == 0) {
                a->t_queued = e->t;
                c->tot->fair_queued += a->hkind == H_FAIR;
            }
            break;
        case EV_ACQ_OK:
            if ((e->flags & EVF_REENTRANT) || (a = check__attempt_of_op(c, e->op)) == NULL)
                break;
            if (!a->run) {
                a->t_ret = e->t;
                a->rc = DLOCK_OK;
            }
            GROW(c->holds, c->nholds, c->cholds);
            h = &c->holds[c->nholds];
            memset(h, 0, sizeof *h);
            h->attempt = (int) (a - c->att);
            h->actor = a->actor;
            h->hkind = a->hkind;
            h->take = a->take > 0 ? a->take : 1;
            h->run = a->run;
            h->t_inv = a->t_inv;
            h->t_ok = e->t;
            h->pid = e->pid;
            h->sup_pid = a->sup_pid;
            snprintf(h->token, sizeof h->token, "%s", e->text);
            if (a->hkind == H_MULTI) {
                h->nl = MULTI_MEMBERS;
                for (int m = 0; m < MULTI_MEMBERS; m++)
                    h->locks[m] = c->s->multi[m];
                h->fences[0] = e->fence;
                h->fences[1] = e->fence2;
            } else {
                h->nl = 1;
                h->locks[0] = a->lock;
                h->fences[0] = e->fence;
            }
            a->hold = (int) c->nholds++;
            last_hold[a->actor] = a->hold;
            c->tot->holds++;
            if (a->t_early_loss > 0)
                report_loss(h, e->t, END_LOST_CB); /* (told as it returned) */
            break;
        case EV_ACQ_FAIL:
            /* taking a held lock again is one way to be told it is lost */
            if ((e->flags & EVF_REENTRANT) && e->rc == DLOCK_ELOST &&
                (h = hold_of_op(c, e->op)) != NULL) {
                report_loss(h, e->t, END_CHECK);
                break;
            }
            if (!(e->flags & EVF_REENTRANT) && (a = check__attempt_of_op(c, e->op)) != NULL) {
                if (a->t_early_loss > 0)
                    check__violation(
                        c, V_SPURIOUS_LOSS, a->t_early_loss - 1500 * NS, a->t_early_loss, a->lock,
                        a->actor, -1,
                        "lock %s: a%d's on_lost callback came at %.3f (\"%s\") during an "
                        "acquire that then failed (%d)",
                        c->s->locks[a->lock].name, a->actor, rel(c, a->t_early_loss), a->early_why,
                        e->rc);
                a->t_ret = e->t;
                a->rc = e->rc;
                snprintf(a->detail, sizeof a->detail, "%s", e->text);
            }
            break;
        case EV_REL_INV:
            if (!(e->flags & EVF_REENTRANT) && (h = hold_of_op(c, e->op)) != NULL)
                end_hold(h, e->t, END_RELEASE);
            break;
        case EV_REL_OK:
        case EV_REL_FAIL:
            if (!(e->flags & EVF_REENTRANT) && (h = hold_of_op(c, e->op)) != NULL) {
                h->t_rel_ret = e->t;
                h->rel_rc = e->type == EV_REL_OK ? DLOCK_OK : e->rc;
                if (h->rel_rc == DLOCK_ELOST || h->rel_rc == DLOCK_ENOTOWNER)
                    if (h->t_report == 0) {
                        h->t_report = h->t_end; /* told when it released */
                        h->report_kind = END_RELEASE;
                    }
            }
            break;
        case EV_LOST:
            if ((h = hold_of_op(c, e->op)) != NULL) {
                report_loss(h, e->t, END_LOST_CB);
                break;
            }
            /* A release that failed on the connection leaves the lock to
             * its lease, and the handle may report it lost when that ends. */
            h = ai != NULL && last_hold[e->actor] >= 0 ? &c->holds[last_hold[e->actor]] : NULL;
            if (h != NULL &&
                (h->rel_rc == DLOCK_EUNREACHABLE || h->rel_rc == DLOCK_ESERVER ||
                 h->rel_rc == DLOCK_ETIMEDOUT) &&
                e->t <= h->t_rel_ret +
                            (c->att[h->attempt].lease_ms > 0 ? c->att[h->attempt].lease_ms
                                                             : c->cfg->lease_ms) *
                                NS +
                            c->slack)
                break;
            /* The renewer may find a grant lost as soon as the acquire has
             * taken it as held (the process paused with the grant on its
             * way, its connection cut meanwhile): the on_lost callback then
             * runs before the worker logs the acquire's return (with no
             * hold op yet). Judged when that return comes. */
            a = e->op != 0                              ? check__attempt_of_op(c, e->op)
                : ai != NULL && last_att[e->actor] >= 0 ? &c->att[last_att[e->actor]]
                                                        : NULL;
            if (a != NULL && a->t_ret == 0 && a->hold < 0 && !a->run && a->t_early_loss == 0) {
                a->t_early_loss = e->t;
                snprintf(a->early_why, sizeof a->early_why, "%s", e->text);
                break;
            }
            check__violation(
                c, V_SPURIOUS_LOSS, e->t - 1500 * NS, e->t, e->lock, e->actor, -1,
                "lock %s: a%d's on_lost callback came at %.3f (\"%s\") while its handle "
                "held nothing (no acquire of it had returned DLOCK_OK)",
                c->s->locks[e->lock].name, e->actor, rel(c, e->t), e->text);
            break;
        case EV_CHECK_LOST:
            if ((h = hold_of_op(c, e->op)) != NULL)
                report_loss(h, e->t, END_CHECK);
            break;
        case EV_TERM:
            if ((h = hold_of_op(c, e->op)) != NULL)
                end_hold(h, e->t, END_TERM);
            break;
        case EV_RUN_EXIT:
            if ((a = check__attempt_of_op(c, e->op)) != NULL) {
                a->run_exit = e->rc;
                a->t_run_exit = e->t;
                a->sent_term = (e->flags & EVF_END) != 0;
                if (a->hold < 0) {
                    a->t_ret = e->t;
                    /* as the library would have said it */
                    a->rc = e->rc == 1     ? (a->wait_ms == 0 ? DLOCK_EBUSY : DLOCK_ETIMEDOUT)
                            : e->rc == 69  ? DLOCK_EUNREACHABLE
                            : e->rc == 70  ? DLOCK_ESERVER
                            : e->rc == 75  ? DLOCK_ELOST /* judged with the runs */
                            : e->rc >= 128 ? DLOCK_ECANCELED
                                           : -2;
                } else {
                    hold *hh = &c->holds[a->hold];
                    /* exit 75 is dlock run's report of the loss */
                    if (e->rc == 75 && hh->end == END_TERM && hh->t_report == 0) {
                        hh->t_report = hh->t_end;
                        hh->report_kind = END_TERM;
                    }
                    hh->t_rel_ret = e->t;
                }
            }
            break;
        case EV_EXIT:
            /* a library worker ended: its open holds end with it */
            for (size_t k = 0; k < c->nholds; k++) {
                if (!c->holds[k].run && c->holds[k].pid == e->pid)
                    end_hold(&c->holds[k], e->t, END_EXIT);
            }
            break;
        case EV_NEM:
            if (e->kind == NEM_KILL_CLIENT && !(e->flags & EVF_FAILED)) {
                for (size_t k = 0; k < c->nholds; k++) {
                    if (!c->holds[k].run && c->holds[k].pid == e->pid)
                        end_hold(&c->holds[k], e->t, END_KILLED);
                }
            }
            break;
        case EV_ACCESS:
            if ((h = hold_of_op(c, e->op)) != NULL && e->rc) {
                for (int m = 0; m < h->nl; m++) {
                    if (h->locks[m] != e->lock)
                        continue;
                    if (h->first_ok[m] == 0)
                        h->first_ok[m] = e->t;
                    h->last_ok[m] = e->t;
                }
            }
            break;
        default:
            break;
        }
    }
    for (size_t k = 0; k < c->nholds; k++)
        end_hold(&c->holds[k], c->t_end, END_OPEN);
    free(last_hold);
    free(last_att);
}

static int by_ok(const void *a, const void *b, void *arg)
{
    const checker *c = arg;
    int64_t x = H(c, a)->t_ok, y = H(c, b)->t_ok;
    return x < y ? -1 : x > y;
}

member *check__members_of(checker *c, int lock, size_t *n)
{
    member *list = NULL;
    size_t cap = 0;
    *n = 0;
    for (size_t k = 0; k < c->nholds; k++) {
        for (int m = 0; m < c->holds[k].nl; m++) {
            if (c->holds[k].locks[m] == lock) {
                GROW(list, *n, cap);
                list[(*n)++] = (member){(int) k, m};
            }
        }
    }
    if (*n > 1) /* (list is NULL when no hold took the lock) */
        qsort_r(list, *n, sizeof *list, by_ok, c);
    return list;
}

cancel_index check__index_cancels(const checker *c)
{
    cancel_index x = {calloc((size_t) c->nactors + 1, sizeof *x.by_actor),
                      calloc((size_t) c->nactors + 1, sizeof *x.count)};
    int *caps = calloc((size_t) c->nactors + 1, sizeof *caps);
    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        if (e->type != EV_CANCEL_INV || e->actor < 0 || e->actor >= c->nactors)
            continue;
        GROW(x.by_actor[e->actor], x.count[e->actor], caps[e->actor]);
        x.by_actor[e->actor][x.count[e->actor]++] = e->t;
    }
    free(caps);
    return x;
}

void check__free_cancels(const checker *c, cancel_index *x)
{
    for (int i = 0; i < c->nactors; i++)
        free(x->by_actor[i]);
    free(x->by_actor);
    free(x->count);
}

/* Was dlock_cancel() called on actor's handle in [t0, t1]? */
int check__cancelled_between(const cancel_index *x, int actor, int64_t t0, int64_t t1)
{
    for (int i = 0; i < x->count[actor]; i++) {
        if (x->by_actor[actor][i] >= t0 && x->by_actor[actor][i] <= t1)
            return 1;
    }
    return 0;
}
