/* SPDX-License-Identifier: MIT */
/* checker_calls.c - each call against what was going on when it ran: the
 * codes an acquire or release may return then (error), how long it may
 * take (stall), a wait that gives up while its budget and the store allow
 * more (early-giveup), waiters served after the last heal (liveness), a
 * loss reported that nothing explains (spurious-loss), cancels
 * (cancel); and each process's end: dlock run's exit status (run-exit), a
 * worker that died by itself (crash), and what the workers found
 * themselves (an fd leak). */
#define _GNU_SOURCE
#include "checker_int.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

/* The core's (src/core/acquire.c): a wait tries a store its client never
 * reached for this long, whatever its budget, then gives up. */
#define FIRST_CONTACT_MS 1000

static size_t window_index(const checker *c, const window *w)
{
    return w == NULL ? (size_t) -1 : (size_t) (w - c->win);
}

static int64_t drift_ns(int64_t lease_ms)
{
    /* the library's: 1% + 2 ms, and 5% (at most 50 ms) for scheduling */
    int64_t allowance = lease_ms * 50 < 50000 ? lease_ms * 50 : 50000;
    return (lease_ms * 10 + 2000) * 1000 + allowance * 1000;
}

/* Whether a's client had been answered by the store before a began: a
 * `dlock run` is a client of its own, fresh each time; a worker's client is
 * the process's, answered once one of its calls got a grant or found the
 * lock held. */
static int reached_before(const checker *c, const attempt *a)
{
    if (a->run)
        return 0;
    for (size_t i = 0; i < c->natt; i++) {
        const attempt *b = &c->att[i];
        int64_t t_ret = b->hold >= 0 ? c->holds[b->hold].t_ok : b->t_ret;
        if (b->pid == a->pid && !b->run && t_ret != 0 && t_ret < a->t_inv &&
            (b->hold >= 0 || b->rc == DLOCK_EBUSY || b->rc == DLOCK_ETIMEDOUT))
            return 1;
    }
    return 0;
}

/* The codes a call may return, given what was going on. */
void check__attempts(checker *c)
{
    int64_t timeout = (int64_t) c->cfg->timeout_ms * NS;
    for (size_t i = 0; i < c->natt; i++) {
        attempt *a = &c->att[i];
        const char *name = c->s->locks[a->lock].name;
        c->tot->acquires++;
        if (a->run)
            c->tot->runs++;
        if (a->hold >= 0)
            c->tot->acquired++;
        int64_t t_ret = a->hold >= 0 ? c->holds[a->hold].t_ok : a->t_ret;
        if (t_ret == 0)
            continue; /* killed while waiting, or still waiting at the end */
        const window *w = check__disturbed(c, a->actor, a->sup_pid, a->t_inv, t_ret, c->grace);
        const window *wu = check__unreachable(c, a->actor, a->sup_pid, a->t_inv, t_ret, c->grace);
        const window *fz = check__frozen(c, a->pid, a->sup_pid, a->t_inv, t_ret);
        int64_t took = t_ret - a->t_inv;

        /* the bound of a wait: its budget plus a command timeout; a `dlock
         * run` ends when its process does, which starts (300 ms) and closes
         * its client (another command timeout: dlock_client_close lets a
         * renewal in flight end) */
        if (a->wait_ms >= 0 && fz == NULL) {
            int64_t bound =
                a->wait_ms * NS + timeout + c->slack + (a->run ? 300 * NS + timeout : 0);
            if (took > bound)
                check__violation(
                    c, V_STALL, a->t_inv, t_ret, a->lock, a->actor, -1,
                    "lock %s: a%d's acquire (wait %lld ms) took %lld ms (bound %lld ms)%s%s", name,
                    a->actor, (long long) a->wait_ms, (long long) (took / NS),
                    (long long) (bound / NS), w ? "; during " : "", w ? w->what : "");
        }
        if (a->hold >= 0) {
            const window *off = check__cut_off(c, a->actor, a->t_inv, t_ret);
            if (off != NULL)
                check__violation(
                    c, V_ERROR, a->t_inv, t_ret, a->lock, a->actor, -1,
                    "lock %s: a%d's acquire said it got the lock at %.3f, but it could not "
                    "reach the server from %.3f on (%s)",
                    name, a->actor, rel(c, t_ret), rel(c, a->t_inv), off->what);
            continue;
        }
        int ok;
        switch (a->rc) {
        case DLOCK_EBUSY:
            ok = a->wait_ms == 0;
            break;
        case DLOCK_ETIMEDOUT:
            /* held by someone else when the budget ran out: not before */
            ok = a->wait_ms > 0 && took >= a->wait_ms * NS - c->slack;
            break;
        case DLOCK_EUNREACHABLE:
            /* also a wait whose budget ran out before its process's first
             * connection was made (a loaded machine: a PostgreSQL backend
             * forked and authenticated in more than a short budget) */
            ok = wu != NULL || fz != NULL ||
                 (a->wait_ms > 0 && took >= a->wait_ms * NS && !reached_before(c, a));
            break;
        case DLOCK_ESERVER:
            ok = wu != NULL || fz != NULL;
            break;
        case DLOCK_ECANCELED:
        case DLOCK_ELOST:
            ok = 1; /* judged with the cancels / the holds */
            break;
        default:
            ok = 0;
            break;
        }
        if (a->flags & EVF_FINAL) {
            /* after the last heal every waiter is served (a cancel is judged
             * with the cancels) */
            if (a->rc != DLOCK_ECANCELED)
                check__violation(c, V_LIVENESS, a->t_inv, t_ret, a->lock, a->actor, -1,
                                 "lock %s: a%d's acquire after the last heal (at %.3f) failed at "
                                 "%.3f: %s %s",
                                 name, a->actor, rel(c, c->t_heal), rel(c, t_ret),
                                 a->rc >= 0 ? dlock_strerror(a->rc) : "?", a->detail);
            continue;
        }
        if (!ok && check__first_time(c, V_ERROR, (uint64_t) a->actor << 8 | (uint64_t) a->rc,
                                     window_index(c, wu))) {
            check__violation(
                c, V_ERROR, a->t_inv, t_ret, a->lock, a->actor, -1,
                "lock %s: a%d's acquire (%s, wait %lld ms) returned %d after %lld ms (%s: "
                "%s)%s%s",
                name, a->actor, fs_hkind_name(a->hkind), (long long) a->wait_ms, a->rc,
                (long long) (took / NS),
                a->rc >= 0 ? dlock_strerror(a->rc) : "dlock run exit status", a->detail,
                wu == NULL && fz == NULL
                    ? (w != NULL ? " with only one member out: " : " with no fault going on")
                    : "",
                wu == NULL && fz == NULL && w != NULL ? w->what : "");
        } else if (a->rc == DLOCK_EUNREACHABLE && a->wait_ms > 0 && wu != NULL && fz == NULL) {
            /* a waiter with budget left must ride out a short outage, but a
             * client that never reached the store tries it for a moment only
             * (a wrong address is said within seconds) */
            int64_t outage_end = wu->t1;
            int64_t budget_end = a->t_inv + a->wait_ms * NS;
            int first_contact = took >= FIRST_CONTACT_MS * NS - c->slack && !reached_before(c, a);
            if (t_ret < budget_end - timeout && outage_end + 2 * timeout < budget_end &&
                t_ret < outage_end + timeout && !first_contact &&
                check__first_time(c, V_EARLY_GIVEUP, (uint64_t) a->actor, window_index(c, wu)))
                check__violation(
                    c, V_EARLY_GIVEUP, a->t_inv, t_ret, a->lock, a->actor, -1,
                    "lock %s: a%d gave up its wait (budget %lld ms) after %lld ms with "
                    "\"%s\", during %s (over at %.3f, well within the budget)",
                    name, a->actor, (long long) a->wait_ms, (long long) (took / NS), a->detail,
                    wu->what, rel(c, wu->t1));
        }
    }
}

/* After the last heal, a waiter still waiting then is served within the
 * bound the final phase's waits get. */
void check__waiters_at_heal(checker *c)
{
    int64_t bound =
        (4LL * c->cfg->lease_ms + c->cfg->waiter_lease_ms + 2LL * c->cfg->timeout_ms + 4000) * NS;
    if (c->t_heal == 0)
        return;
    for (size_t i = 0; i < c->natt; i++) {
        attempt *a = &c->att[i];
        int64_t t_ret = a->hold >= 0 ? c->holds[a->hold].t_ok : a->t_ret;
        if (a->t_inv >= c->t_heal || (t_ret != 0 && t_ret <= c->t_heal + bound))
            continue;
        if (t_ret == 0 && (check__killed_at(c, a->pid) > 0 ||
                           (a->sup_pid && check__killed_at(c, a->sup_pid) > 0)))
            continue; /* its process was killed: nobody is waiting any more */
        if (a->wait_ms >= 0 && a->t_inv + a->wait_ms * NS < c->t_heal + bound)
            continue; /* its budget ends first: the stall check judges it */
        if (t_ret != 0 && t_ret >= c->t_final_end && a->rc == DLOCK_ECANCELED)
            continue; /* cancelled when the run stopped... */
        if (t_ret == 0 && c->t_heal + bound > c->t_final_end)
            continue; /* ...or still waiting then, before its bound */
        check__violation(c, V_LIVENESS, c->t_heal, t_ret ? t_ret : c->t_final_end, a->lock,
                         a->actor, -1,
                         "lock %s: a%d waited since %.3f (%s) and was not served within %lld ms of "
                         "the last heal at %.3f",
                         c->s->locks[a->lock].name, a->actor, rel(c, a->t_inv),
                         fs_hkind_name(a->hkind), (long long) (bound / NS), rel(c, c->t_heal));
    }
}

void check__holds(checker *c)
{
    int64_t timeout = (int64_t) c->cfg->timeout_ms * NS;
    for (size_t k = 0; k < c->nholds; k++) {
        hold *h = &c->holds[k];
        attempt *a = &c->att[h->attempt];
        const char *name = c->s->locks[a->lock].name;
        if (h->t_report > 0)
            c->tot->lost_reports++;
        if (!h->run && h->t_rel_ret > 0) {
            c->tot->releases++;
            const window *w = check__unreachable(c, h->actor, 0, h->t_inv, h->t_rel_ret, c->grace);
            const window *fz = check__frozen(c, h->pid, 0, h->t_end, h->t_rel_ret);
            int rc = h->rel_rc;
            int ok = rc == DLOCK_OK || rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER ||
                     ((rc == DLOCK_EUNREACHABLE || rc == DLOCK_ESERVER) && (w || fz));
            if (!ok)
                check__violation(c, V_ERROR, h->t_end, h->t_rel_ret, a->lock, h->actor, -1,
                                 "lock %s: a%d's release returned %d (%s)%s", name, h->actor, rc,
                                 dlock_strerror(rc), w == NULL ? " with no fault going on" : "");
            const window *off = check__cut_off(c, h->actor, h->t_end, h->t_rel_ret);
            if (rc == DLOCK_OK && off != NULL)
                check__violation(
                    c, V_ERROR, h->t_end, h->t_rel_ret, a->lock, h->actor, -1,
                    "lock %s: a%d's release returned OK at %.3f, but it could not reach "
                    "the server from %.3f on (%s): the lock stays held on the server",
                    name, h->actor, rel(c, h->t_rel_ret), rel(c, h->t_end), off->what);
            if (fz == NULL && h->t_rel_ret - h->t_end > timeout + c->slack)
                check__violation(c, V_STALL, h->t_end, h->t_rel_ret, a->lock, h->actor, -1,
                                 "lock %s: a%d's release took %lld ms", name, h->actor,
                                 (long long) ((h->t_rel_ret - h->t_end) / NS));
        }
        /* nothing reported lost that was not */
        if (h->t_report > 0 && !(h->run && a->run_exit != 75)) {
            int64_t lease_end =
                a->lease_ms > 0 ? h->t_inv + a->lease_ms * NS - drift_ns(a->lease_ms) : 0;
            const window *w =
                check__disturbed(c, h->actor, h->sup_pid, h->t_inv, h->t_report, c->grace);
            const window *fz = check__frozen(c, h->pid, h->sup_pid, h->t_inv, h->t_report);
            int expired = a->lease_ms > 0 && h->t_report >= lease_end - c->slack;
            if (w == NULL && fz == NULL && !expired)
                check__violation(
                    c, V_SPURIOUS_LOSS, h->t_ok, h->t_report, a->lock, h->actor, -1,
                    "lock %s: a%d (%s, %s) was told at %.3f (%s) it lost the lock it got "
                    "at %.3f, with no fault going on%s",
                    name, h->actor, fs_hkind_name(h->hkind),
                    a->lease_ms > 0 ? "fixed lease" : "renewed", rel(c, h->t_report),
                    check__end_name(h->report_kind), rel(c, h->t_ok),
                    a->lease_ms > 0 ? " and its lease not over" : "");
        }
        /* dlock run's word against what happened */
        if (h->run && a->run_exit >= 0) {
            int killed = check__killed_at(c, a->sup_pid) > 0;
            int st = a->run_exit;
            /* 75 with a command that ran to its end: the loss showed only at
             * the release (the command may have run without the lock: 75
             * says so) */
            if (st == 75 && h->end != END_TERM && h->end != END_RELEASE &&
                !check__frozen(c, 0, a->sup_pid, h->t_ok, a->t_run_exit))
                check__violation(
                    c, V_RUN_EXIT, h->t_ok, a->t_run_exit, a->lock, h->actor, -1,
                    "lock %s: dlock run (a%d) exited 75 (lost) but its command was not "
                    "stopped (%s)",
                    name, h->actor, check__end_name(h->end));
            else if (h->end == END_TERM && st != 75 && !killed && !a->sent_term)
                check__violation(
                    c, V_RUN_EXIT, h->t_ok, a->t_run_exit, a->lock, h->actor, -1,
                    "lock %s: dlock run (a%d) stopped its command at %.3f but exited %d", name,
                    h->actor, rel(c, h->t_end), st);
            else if (st != 0 && st != 75 && !killed && !a->sent_term)
                check__violation(c, V_RUN_EXIT, h->t_ok, a->t_run_exit, a->lock, h->actor, -1,
                                 "lock %s: dlock run (a%d) held the lock and exited %d", name,
                                 h->actor, st);
        }
    }
    /* a dlock run that did not get the lock */
    for (size_t i = 0; i < c->natt; i++) {
        attempt *a = &c->att[i];
        if (!a->run || a->hold >= 0 || a->run_exit < 0)
            continue;
        int st = a->run_exit;
        int killed = check__killed_at(c, a->sup_pid) > 0;
        /* 75 (lost): dlock run took the lock, started its command and
         * stopped it when the lock was lost, before the command could
         * record its hold (its first instructions, on a loaded machine).
         * Only a fault that can end a hold explains that. */
        if (st == 75 &&
            check__disturbed(c, a->actor, a->sup_pid, a->t_inv, a->t_run_exit, c->grace))
            continue;
        if (st == 64 || st == 127 || st == 126 || st == 75 || st == 0 ||
            (st >= 128 && !killed && !a->sent_term && !(a->flags & EVF_FINAL)))
            check__violation(c, V_RUN_EXIT, a->t_inv, a->t_run_exit, a->lock, a->actor, -1,
                             "lock %s: dlock run (a%d, %s) exited %d without running its command",
                             c->s->locks[a->lock].name, a->actor, fs_hkind_name(a->hkind), st);
    }
}

/* A cancel ends the wait in progress, or the next one if none is. It must
 * not end a later wait when the wait it hit had already ended by itself. */
void check__cancels(checker *c)
{
    cancel_index cancels = check__index_cancels(c);
    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        if (e->type != EV_CANCEL_INV || e->actor < 0 || e->actor >= c->nactors)
            continue;
        c->tot->cancels++;
        /* the call's return */
        int64_t t_ret = 0;
        for (size_t j = i + 1; j < c->nev && j < i + 20000; j++) {
            if (c->ev[j]->type == EV_CANCEL_RET && c->ev[j]->actor == e->actor) {
                t_ret = c->ev[j]->t;
                break;
            }
        }
        attempt *hit = check__attempt_of_op(c, e->op);
        if (hit == NULL || t_ret == 0 || hit->t_ret == 0)
            continue;
        int64_t hit_ret = hit->hold >= 0 ? c->holds[hit->hold].t_ok : hit->t_ret;
        if (hit->rc == DLOCK_ECANCELED || hit_ret < t_ret)
            continue; /* it ended that wait, or the wait ended first */
        if (check__frozen(c, hit->pid, hit->sup_pid, e->t, hit_ret))
            continue; /* a stopped process cannot act on it */
        /* the wait it hit went on: it must end with ECANCELED, or have been
         * settled (granted) before the cancel could act; a request already
         * in flight finishes first (at most a command timeout) */
        if (hit_ret - t_ret > (int64_t) c->cfg->timeout_ms * NS + c->slack)
            check__violation(c, V_CANCEL, e->t, hit_ret, hit->lock, e->actor, -1,
                             "lock %s: dlock_cancel() of a%d's wait returned at %.3f, but the wait "
                             "went on until %.3f and returned %s",
                             c->s->locks[hit->lock].name, e->actor, rel(c, t_ret), rel(c, hit_ret),
                             hit->rc >= 0 ? dlock_strerror(hit->rc) : "?");
        /* and a cancel that returned while its wait was still going must not
         * stay pending for the next wait (one that came when no wait was
         * going ends the next one: documented) */
        if (t_ret >= hit_ret)
            continue;
        for (size_t j = (size_t) c->att_by_op[hit->op] + 1; j < c->natt; j++) {
            attempt *next = &c->att[j];
            if (next->actor != e->actor)
                continue;
            if (next->rc == DLOCK_ECANCELED && next->t_ret > 0) {
                /* any other cancel aimed at this wait? */
                if (!check__cancelled_between(&cancels, e->actor, hit_ret, next->t_ret))
                    check__violation(
                        c, V_CANCEL, e->t, next->t_ret, next->lock, e->actor, -1,
                        "lock %s: a%d's next wait (begun %.3f) ended ECANCELED at %.3f "
                        "by a cancel aimed at the wait before, which had already "
                        "returned %s",
                        c->s->locks[next->lock].name, e->actor, rel(c, next->t_inv),
                        rel(c, next->t_ret), hit->rc >= 0 ? dlock_strerror(hit->rc) : "?");
            }
            break;
        }
    }
    /* ECANCELED with no cancel at all */
    for (size_t i = 0; i < c->natt; i++) {
        attempt *a = &c->att[i];
        if (a->rc != DLOCK_ECANCELED || a->run)
            continue;
        if (!check__cancelled_between(&cancels, a->actor, 0, a->t_ret))
            check__violation(
                c, V_CANCEL, a->t_inv, a->t_ret, a->lock, a->actor, -1,
                "lock %s: a%d's wait ended ECANCELED with no dlock_cancel() ever called",
                c->s->locks[a->lock].name, a->actor);
    }
    check__free_cancels(c, &cancels);
}

void check__processes(checker *c)
{
    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        if (e->type == EV_VIOL && e->kind >= 0 && e->kind < V_COUNT &&
            (e->kind != V_FD_LEAK || check__first_time(c, V_FD_LEAK, 0, 0)))
            check__violation(c, e->kind, e->t - 2000 * NS, e->t,
                             e->lock < c->s->nlocks ? e->lock : -1, e->actor, -1, "%s%s", e->text,
                             e->kind == V_FD_LEAK ? " (reported once per run)" : "");
        if (e->type != EV_EXIT)
            continue;
        int status = e->rc;
        int nemesis_kill =
            WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && check__killed_at(c, e->pid) > 0;
        if (!nemesis_kill && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            check__violation(c, V_CRASH, e->t - 2000 * NS, e->t, -1, -1, -1,
                             "worker process %d ended by itself at %.3f (status 0x%x: %s %d)",
                             e->pid, rel(c, e->t), status, WIFSIGNALED(status) ? "signal" : "exit",
                             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}
