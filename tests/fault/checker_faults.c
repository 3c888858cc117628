/* SPDX-License-Identifier: MIT */
/* checker_faults.c - the nemesis's faults as windows of time (a start and
 * an end, and whom they touch: a client process, a link, the whole
 * store, one member of it), and the questions the checks ask of them: was
 * a client disturbed, cut off from the server, frozen; was a lock's data
 * lost; were the fences started again.
 *
 * A fault is logged once it is done: it may act up to the slack before
 * its record, and its effects last a grace after it ends (checker.c). */
#define _GNU_SOURCE
#include "checker_int.h"
#include "nemesis.h"

#include <string.h>

static window *open_window(checker *c, int64_t t, int scope, int link, pid_t pid, int kind,
                           const char *what)
{
    GROW(c->win, c->nwin, c->cwin);
    window *w = &c->win[c->nwin++];
    memset(w, 0, sizeof *w);
    w->t0 = t;
    w->t1 = -1;
    w->scope = scope;
    w->link = link;
    w->pid = pid;
    w->kind = kind;
    w->member = -1;
    snprintf(w->what, sizeof w->what, "%s", what);
    return w;
}

static void close_windows(checker *c, int64_t t, int kind, int scope, int link, pid_t pid)
{
    for (size_t i = 0; i < c->nwin; i++) {
        window *w = &c->win[i];
        if (w->t1 >= 0 || (kind >= 0 && w->kind != kind))
            continue;
        if (scope == W_LINK && (w->scope != W_LINK || w->link != link))
            continue;
        if (scope == W_PID && (w->scope != W_PID || w->pid != pid))
            continue;
        w->t1 = t;
    }
}

void check__build_windows(checker *c)
{
    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        if (e->type != EV_NEM)
            continue;
        switch (e->kind) {
        case NEM_KILL_CLIENT:
            if (!(e->flags & EVF_FAILED)) {
                window *w = open_window(c, e->t, W_PID, -1, e->pid, e->kind, e->text);
                w->t1 = e->t;
            }
            break;
        case NEM_PAUSE_CLIENT:
            if ((e->flags & EVF_START) && !(e->flags & EVF_FAILED))
                open_window(c, e->t, W_PID, -1, e->pid, e->kind, e->text);
            else if (e->flags & EVF_END)
                close_windows(c, e->t, e->kind, W_PID, -1, e->pid);
            break;
        case NEM_PARTITION:
            if (e->flags & EVF_START)
                open_window(c, e->t, W_LINK, e->take, 0, e->kind, e->text)->member = e->rc - 1;
            else
                close_windows(c, e->t, e->kind, W_LINK, e->take, 0);
            break;
        case NEM_HEAL_ALL:
            if (e->flags & EVF_START)
                c->t_heal = e->t;
            if (e->flags & EVF_END)
                close_windows(c, e->t, -1, W_ALL, -1, 0);
            break;
        default: /* server-wide */
            if (e->flags & EVF_START) {
                window *w = open_window(c, e->t, W_ALL, -1, 0, e->kind, e->text);
                w->dataloss = (e->flags & EVF_DATALOSS) != 0;
                w->lock = e->lock < c->s->nlocks ? e->lock : -1;
                w->member = e->rc - 1;
                w->moves = (e->flags & EVF_MOVES) != 0;
                if (e->flags & EVF_END)
                    w->t1 = e->t;
            } else if (e->flags & EVF_END) {
                close_windows(c, e->t, e->kind, W_ALL, -1, 0);
            }
            break;
        }
    }
    for (size_t i = 0; i < c->nwin; i++) {
        if (c->win[i].t1 < 0)
            c->win[i].t1 = c->t_end;
    }
}

/* A fault that could have disturbed a call of `actor` (or of the dlock
 * process sup) between t0 and t1, its effects lasting `grace` after it
 * ends; with members 0, not a fault of one member of a group, which its
 * quorum rides out. Returns the window or NULL. */
static const window *disturbed_by(const checker *c, int actor, pid_t sup, int64_t t0, int64_t t1,
                                  int64_t grace, int members)
{
    const actor_info *a = &c->actors[actor];
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        /* (a fault is logged once done: it may act up to the slack before) */
        if (w->t0 - c->slack > t1 || w->t1 + grace < t0)
            continue;
        if (w->member >= 0 && !members)
            continue;
        if (w->scope == W_ALL || (w->scope == W_LINK && (w->link < 0 || w->link == a->link)) ||
            (w->scope == W_PID && (w->pid == a->pid || (sup > 0 && w->pid == sup))))
            return w;
        /* a paused client may hold the store's one write lock (SQLite) */
        if (w->kind == NEM_PAUSE_CLIENT && c->cfg->pause_stops_store)
            return w;
    }
    return NULL;
}

/* Any fault, one member's included: losing a member can end a hold that
 * a quorum no longer keeps (the other two split, or one of them emptied
 * by an earlier fault). */
const window *check__disturbed(const checker *c, int actor, pid_t sup, int64_t t0, int64_t t1,
                               int64_t grace)
{
    return disturbed_by(c, actor, sup, t0, t1, grace, 1);
}

/* A fault that may make the store out of reach for actor: not one
 * member's (src/backend/redlock/README.md, "Errors": one node down
 * changes nothing). */
const window *check__unreachable(const checker *c, int actor, pid_t sup, int64_t t0, int64_t t1,
                                 int64_t grace)
{
    return disturbed_by(c, actor, sup, t0, t1, grace, 0);
}

/* Was the process of a hold (or its dlock) stopped at some time in [t0, t1]? */
const window *check__frozen(const checker *c, pid_t pid, pid_t sup, int64_t t0, int64_t t1)
{
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        if (w->kind != NEM_PAUSE_CLIENT || w->t0 > t1 || w->t1 < t0)
            continue;
        if (w->pid == pid || (sup > 0 && w->pid == sup))
            return w;
    }
    return NULL;
}

/* Was lock's data lost (so it could be granted again) in [t0, t1]? */
const window *check__data_lost(const checker *c, int lock, int64_t t0, int64_t t1)
{
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        if (w->dataloss && (w->lock < 0 || w->lock == lock) && w->t0 <= t1 && w->t1 >= t0)
            return w;
    }
    return NULL;
}

/* Was the whole store's data wiped in (t0, t1], on a store whose fences
 * come from that data (fault_cfg.fences_from_data)? Returns the window or
 * NULL. */
const window *check__fences_reset(const checker *c, int64_t t0, int64_t t1)
{
    if (!c->cfg->fences_from_data)
        return NULL;
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        if (w->dataloss && w->lock < 0 && w->t1 + c->slack > t0 && w->t0 - c->slack <= t1)
            return w;
    }
    return NULL;
}

/* How many such wipes were over by t; -1 while one was under way (a grant
 * then may come from the old data or the new: it is compared with none). */
int check__fence_epoch(const checker *c, int64_t t)
{
    int n = 0;
    if (!c->cfg->fences_from_data)
        return 0;
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        if (!w->dataloss || w->lock >= 0 || w->t0 - c->slack > t)
            continue;
        if (w->t1 + c->slack >= t)
            return -1;
        n++;
    }
    return n;
}

/* Could no request of actor reach the server at any time in [t0, t1]? (its
 * link partitioned, the server stopped or down, all along) */
const window *check__cut_off(const checker *c, int actor, int64_t t0, int64_t t1)
{
    const actor_info *a = &c->actors[actor];
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        /* a server answers, and a healed link carries, before the nemesis
         * logs it (after it is done, when the scheduler lets it): the
         * end is known to within the scheduling slack */
        int64_t end = w->t1 - c->slack;
        if (w->member >= 0 || w->moves)
            continue; /* one member: the others make a quorum; or another node takes over */
        if (w->kind == NEM_KILL_SERVER && 100 * NS > c->slack)
            end = w->t1 - 100 * NS; /* (a start is logged once it answers a probe) */
        else if (w->kind != NEM_PAUSE_SERVER &&
                 !(w->kind == NEM_PARTITION && (w->link < 0 || w->link == a->link)))
            continue;
        if (w->t0 <= t0 && end >= t1)
            return w;
    }
    return NULL;
}

int64_t check__killed_at(const checker *c, pid_t pid)
{
    for (size_t i = 0; i < c->nwin; i++) {
        if (c->win[i].kind == NEM_KILL_CLIENT && c->win[i].pid == pid)
            return c->win[i].t0;
    }
    return 0;
}
