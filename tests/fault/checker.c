/* SPDX-License-Identifier: MIT */
/* checker.c - judges a run's history (see fault.h for the properties).
 *
 * The history is rebuilt into attempts (one acquire call each), holds (an
 * acquire that succeeded, from its "acquired" to the moment its holder
 * stopped believing it held: release called, loss reported, process
 * killed), the nemesis's fault windows, and the processes it froze. Every
 * property is then a question about those intervals, on one clock.
 *
 * Tolerances, all from the command line: `slack` is what scheduling on a
 * busy machine may add to a time that should be exact (a callback that
 * must come before another client's grant may come that much later);
 * `grace` is how long after a fault ends its errors may still surface
 * (2 command timeouts + 1 s). The margin is the library's own (1% of the
 * lease + 2 ms, and 5%, at most 50 ms, for scheduling). */
#define _GNU_SOURCE
#include "fault.h"
#include "nemesis.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define NS 1000000LL /* ns per ms */
/* The core's (src/core/acquire.c): a wait tries a store its client never
 * reached for this long, whatever its budget, then gives up. */
#define FIRST_CONTACT_MS 1000

const char *check_class_name(int v)
{
    static const char *const names[V_COUNT] = {
        "overlap",  "late-loss", "stale-write",  "lost-update",   "fence-order", "fair-order",
        "error",    "stall",     "liveness",     "spurious-loss", "phantom",     "cancel",
        "run-exit", "crash",     "early-giveup", "fd-leak",       "history",
    };
    return v >= 0 && v < V_COUNT ? names[v] : "?";
}

enum { END_OPEN, END_RELEASE, END_LOST_CB, END_CHECK, END_TERM, END_KILLED, END_EXIT };

static const char *end_name(int end)
{
    static const char *const names[] = {
        "never ended",      "release called",         "on_lost callback",
        "dlock_lock_check", "SIGTERM from dlock run", "process killed",
        "process ended"};
    return names[end];
}

typedef struct actor_info {
    int known, run, hkind, lock, link;
    pid_t pid;
    char token[TEXT_LEN];
} actor_info;

typedef struct attempt {
    int actor, hkind, lock, run, flags, take;
    uint64_t op;
    int64_t t_inv, t_ret; /* t_ret 0: never returned */
    int64_t t_queued;     /* the store said it is queued, at the latest then (0: not known) */
    int rc;               /* -1: unknown */
    int64_t wait_ms, lease_ms;
    int hold;
    pid_t pid, sup_pid;
    int run_exit; /* -1: unknown */
    int sent_term;
    int64_t t_run_exit;
    int64_t t_early_loss; /* an on_lost before the acquire's return was logged (0: none) */
    char detail[TEXT_LEN];
    char early_why[TEXT_LEN];
} attempt;

typedef struct hold {
    int attempt, actor, hkind, take, run;
    int nl;
    int locks[MULTI_MEMBERS];
    uint64_t fences[MULTI_MEMBERS];
    int64_t t_inv, t_ok, t_end, t_report, t_rel_ret;
    int end, rel_rc, report_kind;
    int64_t first_ok[MULTI_MEMBERS], last_ok[MULTI_MEMBERS];
    int renewed; /* taken again with a renewed lease: renewed from then on */
    pid_t pid, sup_pid;
    char token[TEXT_LEN];
} hold;

enum { W_ALL, W_LINK, W_PID };

typedef struct window {
    int64_t t0, t1;
    int scope, link, kind;
    int dataloss, lock; /* acknowledged data lost: of lock (-1: of all) */
    int member;         /* a fault of one member of a group (Redlock's), -1: of the store */
    int moves;          /* a fault of a master the store fails over from (Sentinel) */
    pid_t pid;
    char what[TEXT_LEN];
} window;

typedef struct viol {
    int cls;
    int64_t t_focus, t_from;
    int lock, actors[2];
    char text[512];
} viol;

typedef struct checker {
    fshm *s;
    const fault_cfg *cfg;
    FILE *out;
    check_totals *tot;
    fev **ev;
    size_t nev;
    actor_info *actors;
    int nactors;
    attempt *att;
    size_t natt, catt;
    hold *holds;
    size_t nholds, cholds;
    window *win;
    size_t nwin, cwin;
    int *att_by_op; /* op -> attempt index (outer acquires only) */
    uint64_t nops;
    int64_t t_end, t_heal, t_final_end;
    int64_t slack, grace;
    viol *viols;
    size_t nviols, cviols;
    uint64_t *seen; /* keys of causes already reported (open addressing) */
    size_t nseen, cseen;
} checker;

#define GROW(arr, n, cap)                                                                          \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? 2 * (cap) : 256;                                                       \
            (arr) = realloc((arr), sizeof *(arr) * (cap));                                         \
        }                                                                                          \
    } while (0)

static double rel(const checker *c, int64_t t)
{
    return (double) (t - c->s->t0) / 1e9;
}

static void violation(checker *c, int cls, int64_t t_from, int64_t t_focus, int lock, int a1,
                      int a2, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

static void violation(checker *c, int cls, int64_t t_from, int64_t t_focus, int lock, int a1,
                      int a2, const char *fmt, ...)
{
    va_list ap;
    c->tot->violations[cls]++;
    GROW(c->viols, c->nviols, c->cviols);
    viol *v = &c->viols[c->nviols++];
    v->cls = cls;
    v->t_from = t_from;
    v->t_focus = t_focus;
    v->lock = lock;
    v->actors[0] = a1;
    v->actors[1] = a2;
    va_start(ap, fmt);
    vsnprintf(v->text, sizeof v->text, fmt, ap);
    va_end(ap);
}

/* 1 the first time a cause (class + what identifies it) is met, 0 after:
 * one data loss makes every later fence of the lock "go back", one outage
 * makes every wait in it give up; each is reported once. */
static int first_time(checker *c, int cls, uint64_t a, uint64_t b)
{
    uint64_t key =
        ((uint64_t) cls << 56) ^ (a * 0x9e3779b97f4a7c15ull) ^ (b + 0x632be59bd9b4e019ull);
    if (key == 0)
        key = 1;
    if (2 * (c->nseen + 1) > c->cseen) {
        size_t cap = c->cseen ? 2 * c->cseen : 1024;
        uint64_t *old = c->seen;
        size_t old_cap = c->cseen;
        c->seen = calloc(cap, sizeof *c->seen);
        c->cseen = cap;
        c->nseen = 0;
        for (size_t i = 0; i < old_cap; i++) {
            if (old[i] != 0) {
                size_t j = old[i] % cap;
                while (c->seen[j] != 0)
                    j = (j + 1) % cap;
                c->seen[j] = old[i];
                c->nseen++;
            }
        }
        free(old);
    }
    size_t j = key % c->cseen;
    while (c->seen[j] != 0) {
        if (c->seen[j] == key)
            return 0;
        j = (j + 1) % c->cseen;
    }
    c->seen[j] = key;
    c->nseen++;
    return 1;
}

static size_t window_index(const checker *c, const window *w)
{
    return w == NULL ? (size_t) -1 : (size_t) (w - c->win);
}

static int by_t(const void *a, const void *b)
{
    const fev *x = *(fev *const *) a, *y = *(fev *const *) b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int64_t drift_ns(int64_t lease_ms)
{
    /* the library's: 1% + 2 ms, and 5% (at most 50 ms) for scheduling */
    int64_t allowance = lease_ms * 50 < 50000 ? lease_ms * 50 : 50000;
    return (lease_ms * 10 + 2000) * 1000 + allowance * 1000;
}

/* ---------------------------------------------------------------- windows */

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

static void build_windows(checker *c)
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
static const window *disturbed(const checker *c, int actor, pid_t sup, int64_t t0, int64_t t1,
                               int64_t grace)
{
    return disturbed_by(c, actor, sup, t0, t1, grace, 1);
}

/* A fault that may make the store out of reach for actor: not one
 * member's (src/backend/redlock/README.md, "Errors": one node down
 * changes nothing). */
static const window *unreachable(const checker *c, int actor, pid_t sup, int64_t t0, int64_t t1,
                                 int64_t grace)
{
    return disturbed_by(c, actor, sup, t0, t1, grace, 0);
}

/* Was the process of a hold (or its dlock) stopped at some time in [t0, t1]? */
static const window *frozen(const checker *c, pid_t pid, pid_t sup, int64_t t0, int64_t t1)
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
static const window *data_lost(const checker *c, int lock, int64_t t0, int64_t t1)
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
static const window *fences_reset(const checker *c, int64_t t0, int64_t t1)
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
static int fence_epoch(const checker *c, int64_t t)
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
static const window *cut_off(const checker *c, int actor, int64_t t0, int64_t t1)
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

static int64_t killed_at(const checker *c, pid_t pid)
{
    for (size_t i = 0; i < c->nwin; i++) {
        if (c->win[i].kind == NEM_KILL_CLIENT && c->win[i].pid == pid)
            return c->win[i].t0;
    }
    return 0;
}

/* ---------------------------------------------------------------- rebuilding */

static hold *hold_of_op(checker *c, uint64_t op)
{
    if (op == 0 || op >= c->nops || c->att_by_op[op] < 0)
        return NULL;
    int h = c->att[c->att_by_op[op]].hold;
    return h >= 0 ? &c->holds[h] : NULL;
}

static attempt *attempt_of_op(checker *c, uint64_t op)
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

static void rebuild(checker *c)
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
            if ((a = attempt_of_op(c, e->op)) != NULL)
                a->sup_pid = e->rc;
            break;
        case EV_QUEUED:
            if ((a = attempt_of_op(c, e->op)) != NULL && a->t_queued == 0) {
                a->t_queued = e->t;
                c->tot->fair_queued += a->hkind == H_FAIR;
            }
            break;
        case EV_ACQ_OK:
            if ((e->flags & EVF_REENTRANT) || (a = attempt_of_op(c, e->op)) == NULL)
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
            if (!(e->flags & EVF_REENTRANT) && (a = attempt_of_op(c, e->op)) != NULL) {
                if (a->t_early_loss > 0)
                    violation(c, V_SPURIOUS_LOSS, a->t_early_loss - 1500 * NS, a->t_early_loss,
                              a->lock, a->actor, -1,
                              "lock %s: a%d's on_lost callback came at %.3f (\"%s\") during an "
                              "acquire that then failed (%d)",
                              c->s->locks[a->lock].name, a->actor, rel(c, a->t_early_loss),
                              a->early_why, e->rc);
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
            a = e->op != 0                              ? attempt_of_op(c, e->op)
                : ai != NULL && last_att[e->actor] >= 0 ? &c->att[last_att[e->actor]]
                                                        : NULL;
            if (a != NULL && a->t_ret == 0 && a->hold < 0 && !a->run && a->t_early_loss == 0) {
                a->t_early_loss = e->t;
                snprintf(a->early_why, sizeof a->early_why, "%s", e->text);
                break;
            }
            violation(c, V_SPURIOUS_LOSS, e->t - 1500 * NS, e->t, e->lock, e->actor, -1,
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
            if ((a = attempt_of_op(c, e->op)) != NULL) {
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

/* ---------------------------------------------------------------- properties */

static int exclusive(int hkind)
{
    return hkind != H_READ && hkind != H_SEM;
}

typedef struct member {
    int hold, m; /* hold index, member index within it */
} member;

static const hold *H(const checker *c, const member *x)
{
    return &c->holds[x->hold];
}

static uint64_t fence_of(const checker *c, const member *x)
{
    return c->holds[x->hold].fences[x->m];
}

static int by_ok(const void *a, const void *b, void *arg)
{
    const checker *c = arg;
    int64_t x = H(c, a)->t_ok, y = H(c, b)->t_ok;
    return x < y ? -1 : x > y;
}

static int by_inv_cmp(const void *a, const void *b, void *arg)
{
    const checker *c = arg;
    int64_t x = H(c, a)->t_inv, y = H(c, b)->t_inv;
    return x < y ? -1 : x > y;
}

static member *members_of(checker *c, int lock, size_t *n)
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
    if (fences_reset(c, a->t_ok, b->t_ok) != NULL)
        return;
    /* B may have been granted the lock before A, and the store lost it
     * before B's success was recorded (a multi-lock taking its other
     * members; a `dlock run` starting its command): B is then the older
     * holder, and its writes are the ones to refuse. */
    if (fb < fa && data_lost(c, lock, b->t_inv, b->t_ok) != NULL) {
        if (b->last_ok[mb->m] > 0 && a->first_ok[ma->m] > 0 &&
            b->last_ok[mb->m] > a->first_ok[ma->m])
            violation(c, V_STALE_WRITE, b->t_ok, b->last_ok[mb->m], lock, b->actor, a->actor,
                      "lock %s: the resource accepted a%d's access (fence %llu) at %.3f, after "
                      "a%d's (fence %llu) at %.3f",
                      name, b->actor, (unsigned long long) fb, rel(c, b->last_ok[mb->m]), a->actor,
                      (unsigned long long) fa, rel(c, a->first_ok[ma->m]));
        return;
    }
    if (fb <= fa) {
        violation(c, V_OVERLAP, a->t_ok, b->t_ok, lock, a->actor, b->actor,
                  "lock %s: a%d (%s, fence %llu) held from %.3f to %.3f (%s) while a%d (%s, "
                  "fence %llu) got it at %.3f: the fence does not tell them apart",
                  name, a->actor, fs_hkind_name(a->hkind), (unsigned long long) fa, rel(c, a->t_ok),
                  rel(c, a->t_end), end_name(a->end), b->actor, fs_hkind_name(b->hkind),
                  (unsigned long long) fb, rel(c, b->t_ok));
        return;
    }
    /* A frozen holder cannot be told in time, nor one whose lock the store
     * lost: their protection is the fence alone. */
    const window *fz = frozen(c, a->pid, a->sup_pid, a->t_ok, b->t_ok);
    /* (a loss while B was still asking counts too: B's grant may predate
     * it; and while A was asking: a multi-lock's member may have been taken
     * long before the whole was) */
    int64_t since = a->t_inv < b->t_inv ? a->t_inv : b->t_inv;
    const window *dl = data_lost(c, lock, since, b->t_ok);
    if (fz == NULL && dl == NULL && a->t_end - b->t_ok > c->slack) {
        violation(c, V_LATE_LOSS, a->t_ok, b->t_ok, lock, a->actor, b->actor,
                  "lock %s: a%d (%s, fence %llu, not frozen) held until %.3f (%s), %lld ms "
                  "after a%d (%s, fence %llu) got it at %.3f",
                  name, a->actor, fs_hkind_name(a->hkind), (unsigned long long) fa,
                  rel(c, a->t_end), end_name(a->end), (long long) ((a->t_end - b->t_ok) / NS),
                  b->actor, fs_hkind_name(b->hkind), (unsigned long long) fb, rel(c, b->t_ok));
    }
    /* A loss the store caused (a failover's, a wipe's) cannot be told in
     * time, but it is told, never silent: by the next renewal
     * (include/dlock.h), within a lease at the latest (a fixed lease: when
     * it ends). Usually A lost it; in a split brain (a deposed master that
     * still serves) B's grant is the one lost: one of them must be told. */
    if (fz == NULL && dl != NULL) {
        int64_t from = b->t_ok > dl->t1 ? b->t_ok : dl->t1;
        int told_a = told_in_time(c, a, from), told_b = told_in_time(c, b, from);
        if (first_time(c, V_COUNT, (uint64_t) a->attempt, (uint64_t) b->attempt))
            c->tot->store_losses++;
        if (!told_a && !told_b &&
            first_time(c, V_LATE_LOSS, (uint64_t) a->attempt, (uint64_t) b->attempt))
            violation(c, V_LATE_LOSS, a->t_ok, a->t_end > b->t_end ? a->t_end : b->t_end, lock,
                      a->actor, b->actor,
                      "lock %s: a%d (%s, fence %llu) and a%d (fence %llu, from %.3f) held it at "
                      "once after %s, and neither was told in time: a%d ended at %.3f (%s), a%d "
                      "at %.3f (%s)",
                      name, a->actor, fs_hkind_name(a->hkind), (unsigned long long) fa, b->actor,
                      (unsigned long long) fb, rel(c, b->t_ok), dl->what, a->actor,
                      rel(c, a->t_end), end_name(a->end), b->actor, rel(c, b->t_end),
                      end_name(b->end));
    }
    /* (a semaphore's holders share the resource: its stale accesses are
     * judged by the resource's own rule, not pairwise) */
    if (c->s->locks[lock].kind != LK_SEM && b->first_ok[mb->m] > 0 &&
        a->last_ok[ma->m] > b->first_ok[mb->m]) {
        violation(c, V_STALE_WRITE, a->t_ok, a->last_ok[ma->m], lock, a->actor, b->actor,
                  "lock %s: the resource accepted a%d's access (fence %llu) at %.3f, after a%d's "
                  "(fence %llu) at %.3f",
                  name, a->actor, (unsigned long long) fa, rel(c, a->last_ok[ma->m]), b->actor,
                  (unsigned long long) fb, rel(c, b->first_ok[mb->m]));
    }
}

static void check_exclusion(checker *c, int lock)
{
    size_t n;
    member *list = members_of(c, lock, &n);
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
                    int excused = frozen(c, a->pid, a->sup_pid, a->t_ok, b->t_ok) != NULL ||
                                  data_lost(c, lock, since, b->t_ok) != NULL;
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

/* Fences strictly increase from holder to holder: a hold granted after
 * another was (its acquire began after the other's "acquired") has the
 * larger fence; two readers may share one. */
static void check_fences(checker *c, int lock)
{
    size_t n;
    member *list = members_of(c, lock, &n);
    member *by_inv = malloc(sizeof *by_inv * (n + 1));
    if (n > 0) /* (list is NULL when no hold took the lock) */
        memcpy(by_inv, list, sizeof *list * n);
    if (n > 1)
        qsort_r(by_inv, n, sizeof *by_inv, by_inv_cmp, c);
    size_t p = 0;
    /* per fence epoch (fence_epoch: wipes of a store whose fences come from
     * its data; 0 for other stores): a hold is compared with those granted
     * in the epoch it was granted in */
    enum { EPOCHS = 64 };
    uint64_t max_any[EPOCHS] = {0}, max_excl[EPOCHS] = {0};
    const member *who_any[EPOCHS] = {NULL}, *who_excl[EPOCHS] = {NULL};
    for (size_t i = 0; i < n; i++) {
        const member *b = &by_inv[i];
        while (p < n && H(c, &list[p])->t_ok < H(c, b)->t_inv) {
            int e = fence_epoch(c, H(c, &list[p])->t_ok);
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
        int e = fence_epoch(c, H(c, b)->t_ok);
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
        if (who != NULL && first_time(c, V_FENCE_ORDER, (uint64_t) lock, (uint64_t) who->hold)) {
            violation(c, V_FENCE_ORDER, H(c, who)->t_ok, H(c, b)->t_ok, lock, H(c, who)->actor,
                      H(c, b)->actor,
                      "lock %s: a%d got fence %llu at %.3f, after a%d had fence %llu at %.3f "
                      "(fences went back; later holds below that fence are not listed)",
                      c->s->locks[lock].name, H(c, b)->actor, (unsigned long long) fb,
                      rel(c, H(c, b)->t_ok), H(c, who)->actor,
                      (unsigned long long) fence_of(c, who), rel(c, H(c, who)->t_ok));
        }
    }
    free(by_inv);
    free(list);
}

static void check_lost_updates(checker *c)
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
            violation(c, V_LOST_UPDATE, e->t - 500 * NS, e->t, e->lock, e->actor, -1,
                      "lock %s: a%d's write (fence %llu) at %.3f overwrote a write made since "
                      "its read: an update was lost",
                      c->s->locks[e->lock].name, e->actor, (unsigned long long) e->fence,
                      rel(c, e->t));
    }
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
static void check_attempts(checker *c)
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
        const window *w = disturbed(c, a->actor, a->sup_pid, a->t_inv, t_ret, c->grace);
        const window *wu = unreachable(c, a->actor, a->sup_pid, a->t_inv, t_ret, c->grace);
        const window *fz = frozen(c, a->pid, a->sup_pid, a->t_inv, t_ret);
        int64_t took = t_ret - a->t_inv;

        /* the bound of a wait: its budget plus a command timeout; a `dlock
         * run` ends when its process does, which starts (300 ms) and closes
         * its client (another command timeout: dlock_client_close lets a
         * renewal in flight end) */
        if (a->wait_ms >= 0 && fz == NULL) {
            int64_t bound =
                a->wait_ms * NS + timeout + c->slack + (a->run ? 300 * NS + timeout : 0);
            if (took > bound)
                violation(c, V_STALL, a->t_inv, t_ret, a->lock, a->actor, -1,
                          "lock %s: a%d's acquire (wait %lld ms) took %lld ms (bound %lld ms)%s%s",
                          name, a->actor, (long long) a->wait_ms, (long long) (took / NS),
                          (long long) (bound / NS), w ? "; during " : "", w ? w->what : "");
        }
        if (a->hold >= 0) {
            const window *off = cut_off(c, a->actor, a->t_inv, t_ret);
            if (off != NULL)
                violation(c, V_ERROR, a->t_inv, t_ret, a->lock, a->actor, -1,
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
                violation(c, V_LIVENESS, a->t_inv, t_ret, a->lock, a->actor, -1,
                          "lock %s: a%d's acquire after the last heal (at %.3f) failed at "
                          "%.3f: %s %s",
                          name, a->actor, rel(c, c->t_heal), rel(c, t_ret),
                          a->rc >= 0 ? dlock_strerror(a->rc) : "?", a->detail);
            continue;
        }
        if (!ok && first_time(c, V_ERROR, (uint64_t) a->actor << 8 | (uint64_t) a->rc,
                              window_index(c, wu))) {
            violation(c, V_ERROR, a->t_inv, t_ret, a->lock, a->actor, -1,
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
                first_time(c, V_EARLY_GIVEUP, (uint64_t) a->actor, window_index(c, wu)))
                violation(c, V_EARLY_GIVEUP, a->t_inv, t_ret, a->lock, a->actor, -1,
                          "lock %s: a%d gave up its wait (budget %lld ms) after %lld ms with "
                          "\"%s\", during %s (over at %.3f, well within the budget)",
                          name, a->actor, (long long) a->wait_ms, (long long) (took / NS),
                          a->detail, wu->what, rel(c, wu->t1));
        }
    }
}

/* After the last heal, a waiter still waiting then is served within the
 * bound the final phase's waits get. */
static void check_waiters_at_heal(checker *c)
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
        if (t_ret == 0 &&
            (killed_at(c, a->pid) > 0 || (a->sup_pid && killed_at(c, a->sup_pid) > 0)))
            continue; /* its process was killed: nobody is waiting any more */
        if (a->wait_ms >= 0 && a->t_inv + a->wait_ms * NS < c->t_heal + bound)
            continue; /* its budget ends first: the stall check judges it */
        if (t_ret != 0 && t_ret >= c->t_final_end && a->rc == DLOCK_ECANCELED)
            continue; /* cancelled when the run stopped... */
        if (t_ret == 0 && c->t_heal + bound > c->t_final_end)
            continue; /* ...or still waiting then, before its bound */
        violation(c, V_LIVENESS, c->t_heal, t_ret ? t_ret : c->t_final_end, a->lock, a->actor, -1,
                  "lock %s: a%d waited since %.3f (%s) and was not served within %lld ms of "
                  "the last heal at %.3f",
                  c->s->locks[a->lock].name, a->actor, rel(c, a->t_inv), fs_hkind_name(a->hkind),
                  (long long) (bound / NS), rel(c, c->t_heal));
    }
}

static void check_holds(checker *c)
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
            const window *w = unreachable(c, h->actor, 0, h->t_inv, h->t_rel_ret, c->grace);
            const window *fz = frozen(c, h->pid, 0, h->t_end, h->t_rel_ret);
            int rc = h->rel_rc;
            int ok = rc == DLOCK_OK || rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER ||
                     ((rc == DLOCK_EUNREACHABLE || rc == DLOCK_ESERVER) && (w || fz));
            if (!ok)
                violation(c, V_ERROR, h->t_end, h->t_rel_ret, a->lock, h->actor, -1,
                          "lock %s: a%d's release returned %d (%s)%s", name, h->actor, rc,
                          dlock_strerror(rc), w == NULL ? " with no fault going on" : "");
            const window *off = cut_off(c, h->actor, h->t_end, h->t_rel_ret);
            if (rc == DLOCK_OK && off != NULL)
                violation(c, V_ERROR, h->t_end, h->t_rel_ret, a->lock, h->actor, -1,
                          "lock %s: a%d's release returned OK at %.3f, but it could not reach "
                          "the server from %.3f on (%s): the lock stays held on the server",
                          name, h->actor, rel(c, h->t_rel_ret), rel(c, h->t_end), off->what);
            if (fz == NULL && h->t_rel_ret - h->t_end > timeout + c->slack)
                violation(c, V_STALL, h->t_end, h->t_rel_ret, a->lock, h->actor, -1,
                          "lock %s: a%d's release took %lld ms", name, h->actor,
                          (long long) ((h->t_rel_ret - h->t_end) / NS));
        }
        /* nothing reported lost that was not */
        if (h->t_report > 0 && !(h->run && a->run_exit != 75)) {
            int64_t lease_end =
                a->lease_ms > 0 ? h->t_inv + a->lease_ms * NS - drift_ns(a->lease_ms) : 0;
            const window *w = disturbed(c, h->actor, h->sup_pid, h->t_inv, h->t_report, c->grace);
            const window *fz = frozen(c, h->pid, h->sup_pid, h->t_inv, h->t_report);
            int expired = a->lease_ms > 0 && h->t_report >= lease_end - c->slack;
            if (w == NULL && fz == NULL && !expired)
                violation(c, V_SPURIOUS_LOSS, h->t_ok, h->t_report, a->lock, h->actor, -1,
                          "lock %s: a%d (%s, %s) was told at %.3f (%s) it lost the lock it got "
                          "at %.3f, with no fault going on%s",
                          name, h->actor, fs_hkind_name(h->hkind),
                          a->lease_ms > 0 ? "fixed lease" : "renewed", rel(c, h->t_report),
                          end_name(h->report_kind), rel(c, h->t_ok),
                          a->lease_ms > 0 ? " and its lease not over" : "");
        }
        /* dlock run's word against what happened */
        if (h->run && a->run_exit >= 0) {
            int killed = killed_at(c, a->sup_pid) > 0;
            int st = a->run_exit;
            /* 75 with a command that ran to its end: the loss showed only at
             * the release (the command may have run without the lock: 75
             * says so) */
            if (st == 75 && h->end != END_TERM && h->end != END_RELEASE &&
                !frozen(c, 0, a->sup_pid, h->t_ok, a->t_run_exit))
                violation(c, V_RUN_EXIT, h->t_ok, a->t_run_exit, a->lock, h->actor, -1,
                          "lock %s: dlock run (a%d) exited 75 (lost) but its command was not "
                          "stopped (%s)",
                          name, h->actor, end_name(h->end));
            else if (h->end == END_TERM && st != 75 && !killed && !a->sent_term)
                violation(c, V_RUN_EXIT, h->t_ok, a->t_run_exit, a->lock, h->actor, -1,
                          "lock %s: dlock run (a%d) stopped its command at %.3f but exited %d",
                          name, h->actor, rel(c, h->t_end), st);
            else if (st != 0 && st != 75 && !killed && !a->sent_term)
                violation(c, V_RUN_EXIT, h->t_ok, a->t_run_exit, a->lock, h->actor, -1,
                          "lock %s: dlock run (a%d) held the lock and exited %d", name, h->actor,
                          st);
        }
    }
    /* a dlock run that did not get the lock */
    for (size_t i = 0; i < c->natt; i++) {
        attempt *a = &c->att[i];
        if (!a->run || a->hold >= 0 || a->run_exit < 0)
            continue;
        int st = a->run_exit;
        int killed = killed_at(c, a->sup_pid) > 0;
        /* 75 (lost): dlock run took the lock, started its command and
         * stopped it when the lock was lost, before the command could
         * record its hold (its first instructions, on a loaded machine).
         * Only a fault that can end a hold explains that. */
        if (st == 75 && disturbed(c, a->actor, a->sup_pid, a->t_inv, a->t_run_exit, c->grace))
            continue;
        if (st == 64 || st == 127 || st == 126 || st == 75 || st == 0 ||
            (st >= 128 && !killed && !a->sent_term && !(a->flags & EVF_FINAL)))
            violation(c, V_RUN_EXIT, a->t_inv, a->t_run_exit, a->lock, a->actor, -1,
                      "lock %s: dlock run (a%d, %s) exited %d without running its command",
                      c->s->locks[a->lock].name, a->actor, fs_hkind_name(a->hkind), st);
    }
}

/* The times of the dlock_cancel() calls aimed at each actor. */
typedef struct cancel_index {
    int64_t **by_actor;
    int *count;
} cancel_index;

static cancel_index index_cancels(const checker *c)
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

static void free_cancels(const checker *c, cancel_index *x)
{
    for (int i = 0; i < c->nactors; i++)
        free(x->by_actor[i]);
    free(x->by_actor);
    free(x->count);
}

/* Was dlock_cancel() called on actor's handle in [t0, t1]? */
static int cancelled_between(const cancel_index *x, int actor, int64_t t0, int64_t t1)
{
    for (int i = 0; i < x->count[actor]; i++) {
        if (x->by_actor[actor][i] >= t0 && x->by_actor[actor][i] <= t1)
            return 1;
    }
    return 0;
}

/* A cancel ends the wait in progress, or the next one if none is. It must
 * not end a later wait when the wait it hit had already ended by itself. */
static void check_cancels(checker *c)
{
    cancel_index cancels = index_cancels(c);
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
        attempt *hit = attempt_of_op(c, e->op);
        if (hit == NULL || t_ret == 0 || hit->t_ret == 0)
            continue;
        int64_t hit_ret = hit->hold >= 0 ? c->holds[hit->hold].t_ok : hit->t_ret;
        if (hit->rc == DLOCK_ECANCELED || hit_ret < t_ret)
            continue; /* it ended that wait, or the wait ended first */
        if (frozen(c, hit->pid, hit->sup_pid, e->t, hit_ret))
            continue; /* a stopped process cannot act on it */
        /* the wait it hit went on: it must end with ECANCELED, or have been
         * settled (granted) before the cancel could act; a request already
         * in flight finishes first (at most a command timeout) */
        if (hit_ret - t_ret > (int64_t) c->cfg->timeout_ms * NS + c->slack)
            violation(c, V_CANCEL, e->t, hit_ret, hit->lock, e->actor, -1,
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
                if (!cancelled_between(&cancels, e->actor, hit_ret, next->t_ret))
                    violation(c, V_CANCEL, e->t, next->t_ret, next->lock, e->actor, -1,
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
        if (!cancelled_between(&cancels, a->actor, 0, a->t_ret))
            violation(c, V_CANCEL, a->t_inv, a->t_ret, a->lock, a->actor, -1,
                      "lock %s: a%d's wait ended ECANCELED with no dlock_cancel() ever called",
                      c->s->locks[a->lock].name, a->actor);
    }
    free_cancels(c, &cancels);
}

/* Fair order (DLOCK_FAIR): fair waiters are served in the order the store
 * queued them. W1 is ahead of W2 for sure when the store said W1 was queued
 * (EV_QUEUED, logged once its answer had come) before W2's acquire began,
 * and so before W2's first request was sent. W2 granted while W1 was still
 * waiting is a violation when W1 cannot have left the queue meanwhile: no
 * fault touched W1's process, its link or the server from its acquire on
 * (nor within the grace before), it was not cancelled, and its budget was
 * not over. W2 cannot have kept a place from before: every acquisition
 * has an owner token of its own (a place an earlier wait failed to leave
 * is someone else's), but W2 is judged only when no fault touched it from
 * its acquire on. */
static void check_fair_order(checker *c)
{
    cancel_index cancels = index_cancels(c);
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
        int fresh = w2->run || disturbed(c, w2->actor, 0, w2->t_inv, t2, c->grace) == NULL;
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
            if (w1->rc == DLOCK_ECANCELED || cancelled_between(&cancels, w1->actor, since1, t2))
                continue;
            if (disturbed(c, w1->actor, w1->sup_pid, w1->t_inv, t2, c->grace) != NULL)
                continue;
            c->tot->fair_pairs++;
            violation(c, V_FAIR_ORDER, w1->t_inv, t2, w2->lock, w1->actor, w2->actor,
                      "lock %s: a%d (fair%s) got the lock at %.3f, while a%d (fair), which the "
                      "store had queued by %.3f, before a%d's acquire began at %.3f, was still "
                      "waiting (no fault touched it, not cancelled, its budget not over)",
                      c->s->locks[w2->lock].name, w2->actor, w2->run ? ", dlock run" : "",
                      rel(c, t2), w1->actor, rel(c, w1->t_queued), w2->actor, rel(c, w2->t_inv));
            break; /* one per grant */
        }
    }
    /* the queued answers come from the library's log text: without them
     * this check judges nothing, and must say so */
    if ((c->cfg->caps & DLOCK_CAP_FAIR) && timed_out >= 20 && c->tot->fair_queued == 0)
        violation(c, V_HISTORY, c->t_end, c->t_end, -1, -1, -1,
                  "%ld fair waits timed out, none was seen queued by the store: has the "
                  "library's debug log line \"... waiting (queued in the store)\" changed? "
                  "fair order cannot be judged",
                  timed_out);
    free(queued);
    free(prev);
    free(last);
    free_cancels(c, &cancels);
}

/* The server's view against who may hold: an owner, or a count of readers
 * or permits, that no hold or attempt in the history accounts for at that
 * moment is a hold nobody has (revived after its holder was told it was
 * lost, or never released).
 *
 * Each hold and each failed attempt gets the interval in which the server
 * may rightly count it; snapshots come from one monitor, one at a time, so
 * both their starts and ends increase and one sweep over the intervals
 * (added by start, removed by end) answers every snapshot. */
typedef struct span {
    int64_t from, until;
    int lock, key, take, shared;
} span;

/* How long the server may keep a grant of `lease` ms after its last
 * renewal (etcd rounds leases up to whole seconds and scans for expired
 * ones twice a second). */
static int64_t server_lease(const checker *c, int64_t lease)
{
    int64_t unit = c->cfg->lease_unit_ms;
    if (unit > 0)
        lease = (lease + unit - 1) / unit * unit;
    return lease + c->cfg->expiry_lag_ms;
}

/* A store whose grants live as long as a session (ZooKeeper, etcd) restores
 * its sessions when it is started again with its data, and gives each a
 * fresh timeout from then (ZooKeeper's session tracker on loading; etcd's
 * lessor on promotion): a node or key whose session's client is gone (it
 * released in vain while the server was down, was told of the loss, or
 * died) stays until a timeout after the restart. So what was still there
 * when the server went down may be there up to a lease after it came
 * back. */
static int64_t restored_until(const checker *c, int64_t from, int64_t until, int64_t lease)
{
    if (!(c->cfg->caps & DLOCK_CAP_SESSION))
        return until;
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        if (w->kind == NEM_PAUSE_SERVER) {
            /* a stopped server ends nothing: what falls due while it is
             * stopped ends once it goes on (its next expiry round) */
            int64_t lag = server_lease(c, 0) * NS + c->slack;
            if (until >= w->t0 && until < w->t1 + lag)
                until = w->t1 + lag;
            /* and it reads what its clients sent meanwhile only then: a
             * keep-alive sent during the pause by a client that has since
             * died or been told of its loss gives the session a fresh
             * timeout from the resume (ZooKeeper, seed 7 under load: a
             * dlock run ended 0.7 s into a 2 s pause, its node stayed
             * until a session timeout after the resume) */
            if (from <= w->t1 && until >= w->t0 && until < w->t1 + lease * NS + lag)
                until = w->t1 + lease * NS + lag;
            continue;
        }
        if (w->kind != NEM_KILL_SERVER && w->kind != NEM_RESTART_SERVER)
            continue;
        if (w->t0 - c->slack > until || w->t1 < from || w->t1 + lease * NS <= until)
            continue;
        until = w->t1 + lease * NS;
    }
    return until;
}

/* The last heal, in [t0, t1], of a blackhole on actor's link (0: none):
 * the bytes it held back reach the server then, late (tests/support/proxy.h),
 * and a keep-alive among them renews a session or lease from then. */
static int64_t last_blackhole_heal(const checker *c, int actor, int64_t t0, int64_t t1)
{
    const actor_info *a = &c->actors[actor];
    int64_t last = 0;
    for (size_t i = 0; i < c->nwin; i++) {
        const window *w = &c->win[i];
        if (w->kind != NEM_PARTITION || strncmp(w->what, "blackhole", 9) != 0)
            continue;
        if (w->t0 - c->slack > t1 || w->t1 < t0)
            continue;
        if ((w->scope == W_ALL || (w->scope == W_LINK && (w->link < 0 || w->link == a->link))) &&
            w->t1 > last)
            last = w->t1;
    }
    return last;
}

static int64_t hold_until(const checker *c, const hold *h, int64_t lease)
{
    int64_t until;
    if (h->end == END_RELEASE) {
        until = h->t_rel_ret > 0 ? h->t_rel_ret : c->t_end;
        /* dlock run says nothing of its release: one cut off from the
         * server leaves the lock to its lease */
        if (h->run && disturbed(c, h->actor, h->sup_pid, h->t_end, until, c->grace))
            until += lease * NS;
    } else if (h->end == END_LOST_CB || h->end == END_CHECK || h->end == END_TERM) {
        /* Validity is counted from when a request was sent, and a lock
         * handed over by a release was granted later than the waiter's
         * last request: the server may keep it up to a lease longer. */
        until = h->t_end + lease * NS;
    } else {
        until = h->t_end + lease * NS; /* killed: its lease runs out */
    }
    if (h->rel_rc == DLOCK_EUNREACHABLE || h->rel_rc == DLOCK_ESERVER ||
        h->rel_rc == DLOCK_ETIMEDOUT)
        until += lease * NS;
    if (h->end != END_RELEASE || h->run || h->rel_rc != DLOCK_OK) {
        /* not confirmed gone: the holder's last words may come late */
        int64_t heal = last_blackhole_heal(c, h->actor, h->t_end, until);
        if (heal > 0 && heal + lease * NS > until)
            until = heal + lease * NS;
    }
    if (frozen(c, h->pid, h->sup_pid, h->t_ok, c->t_end))
        until = c->t_end;
    return restored_until(c, h->t_inv, until, lease);
}

static int64_t attempt_until(const checker *c, const attempt *a, int64_t lease)
{
    int64_t end = a->t_ret > 0 ? a->t_ret : c->t_end;
    /* a request held back by a partition may be granted when it heals */
    const window *w = disturbed(c, a->actor, a->sup_pid, a->t_inv, end, 0);
    if (w != NULL && w->t1 > end)
        end = w->t1;
    return restored_until(c, a->t_inv, end + lease * NS, lease);
}

/* The key of an owner token: the actor for a library handle (each of its
 * holds has a token of its own), the hold for a dlock run. -1: unknown (an
 * attempt that failed: its token is not logged). */
typedef struct token_map {
    char (*tokens)[TEXT_LEN];
    int *keys;
    size_t n, cap;
} token_map;

static uint64_t hash_token(const char *t)
{
    uint64_t h = 1469598103934665603ull;
    while (*t)
        h = (h ^ (unsigned char) *t++) * 1099511628211ull;
    return h;
}

static void token_put(token_map *m, const char *token, int key)
{
    if (token[0] == '\0')
        return;
    if (2 * (m->n + 1) > m->cap) {
        token_map old = *m;
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->tokens = calloc(m->cap, sizeof *m->tokens);
        m->keys = calloc(m->cap, sizeof *m->keys);
        m->n = 0;
        for (size_t i = 0; i < old.cap; i++) {
            if (old.tokens[i][0] != '\0')
                token_put(m, old.tokens[i], old.keys[i]);
        }
        free(old.tokens);
        free(old.keys);
    }
    size_t j = hash_token(token) % m->cap;
    while (m->tokens[j][0] != '\0' && strcmp(m->tokens[j], token) != 0)
        j = (j + 1) % m->cap;
    if (m->tokens[j][0] == '\0')
        m->n++;
    snprintf(m->tokens[j], TEXT_LEN, "%s", token);
    m->keys[j] = key;
}

static int token_get(const token_map *m, const char *token)
{
    if (m->cap == 0 || token[0] == '\0')
        return -1;
    size_t j = hash_token(token) % m->cap;
    while (m->tokens[j][0] != '\0') {
        if (strcmp(m->tokens[j], token) == 0)
            return m->keys[j];
        j = (j + 1) % m->cap;
    }
    return -1;
}

static int by_from(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

static int by_until(const void *a, const void *b)
{
    const span *x = *(const span *const *) a, *y = *(const span *const *) b;
    return x->until < y->until ? -1 : x->until > y->until;
}

static void check_snapshots(checker *c)
{
    token_map tokens = {0};
    span *spans = malloc(sizeof *spans * (c->nholds + c->natt + 1));
    size_t n = 0;
    int nkeys = c->nactors;

    for (int i = 0; i < c->nactors; i++)
        if (!c->actors[i].run)
            token_put(&tokens, c->actors[i].token, i);
    for (size_t k = 0; k < c->nholds; k++) {
        const hold *h = &c->holds[k];
        const attempt *a = &c->att[h->attempt];
        int64_t lease_ms = a->lease_ms > 0 ? a->lease_ms : c->cfg->lease_ms;
        if (h->renewed && lease_ms < c->cfg->lease_ms)
            lease_ms = c->cfg->lease_ms;
        int64_t lease = server_lease(c, lease_ms);
        int key = h->actor;
        if (h->run)
            key = nkeys++;
        token_put(&tokens, h->token, key);
        spans[n++] = (span){h->t_inv, hold_until(c, h, lease), h->locks[0], key,
                            h->take,  !exclusive(h->hkind)};
    }
    for (size_t k = 0; k < c->natt; k++) {
        const attempt *a = &c->att[k];
        int64_t lease = server_lease(c, a->lease_ms > 0 ? a->lease_ms : c->cfg->lease_ms);
        if (a->hold >= 0)
            continue;
        /* a dlock run that failed: its token is unknown, only counts matter */
        spans[n++] = (span){a->t_inv,
                            attempt_until(c, a, lease),
                            a->lock,
                            a->run ? -1 : a->actor,
                            a->take > 0 ? a->take : 1,
                            !exclusive(a->hkind)};
    }
    qsort(spans, n, sizeof *spans, by_from);
    span **ending = malloc(sizeof *ending * (n + 1));
    for (size_t i = 0; i < n; i++)
        ending[i] = &spans[i];
    qsort(ending, n, sizeof *ending, by_until);

    int *active_key = calloc((size_t) nkeys + 1, sizeof *active_key);
    int active_shared[MAX_LOCKS] = {0}, active_permits[MAX_LOCKS] = {0};
    size_t next_add = 0, next_remove = 0;
    char last_phantom[MAX_LOCKS][TEXT_LEN] = {{0}};

    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        if (e->type != EV_SNAP)
            continue;
        c->tot->snaps++;
        if (e->t > c->t_final_end)
            continue;
        int64_t q0 = e->wait_ms - c->slack, q1 = e->t + c->slack;
        for (; next_add < n && spans[next_add].from <= q1; next_add++) {
            span *sp = &spans[next_add];
            if (sp->key >= 0)
                active_key[sp->key]++;
            if (sp->shared && sp->lock < MAX_LOCKS) {
                active_shared[sp->lock]++;
                active_permits[sp->lock] += sp->take;
            }
        }
        for (; next_remove < n && ending[next_remove]->until < q0; next_remove++) {
            span *sp = ending[next_remove];
            if (sp->key >= 0)
                active_key[sp->key]--;
            if (sp->shared && sp->lock < MAX_LOCKS) {
                active_shared[sp->lock]--;
                active_permits[sp->lock] -= sp->take;
            }
        }
        int kind = c->s->locks[e->lock].kind;
        char phantom[TEXT_LEN] = "";
        if (e->text[0] != '\0') {
            int key = token_get(&tokens, e->text);
            if (key >= 0 && active_key[key] <= 0)
                snprintf(phantom, sizeof phantom, "%s", e->text);
        }
        /* a multi-lock's spans sit on its first member: count its other
         * members' shared use only through the owner check above */
        if (phantom[0] != '\0' && strcmp(phantom, last_phantom[e->lock]) != 0)
            violation(c, V_PHANTOM, e->wait_ms - 2000 * NS, e->t, e->lock, -1, -1,
                      "lock %s: at %.3f the server says %s holds it; no hold or attempt under "
                      "that token can then (released, lost or dead)",
                      c->s->locks[e->lock].name, rel(c, e->t), e->text);
        snprintf(last_phantom[e->lock], TEXT_LEN, "%s", phantom);
        if (kind == LK_RW || kind == LK_SEM) {
            int want = kind == LK_RW ? e->take : (int) e->lease_ms;
            int can = kind == LK_RW ? active_shared[e->lock] : active_permits[e->lock];
            if (want > can &&
                first_time(c, V_PHANTOM, (uint64_t) e->lock, (uint64_t) (e->t / (1000 * NS))))
                violation(c, V_PHANTOM, e->wait_ms - 2000 * NS, e->t, e->lock, -1, -1,
                          "lock %s: at %.3f the server counts %d %s, but at most %d could be "
                          "held then",
                          c->s->locks[e->lock].name, rel(c, e->t), want,
                          kind == LK_RW ? "readers" : "permits taken", can);
        }
    }
    free(active_key);
    free(ending);
    free(spans);
    free(tokens.tokens);
    free(tokens.keys);
}

static void check_processes(checker *c)
{
    for (size_t i = 0; i < c->nev; i++) {
        fev *e = c->ev[i];
        if (e->type == EV_VIOL && e->kind >= 0 && e->kind < V_COUNT &&
            (e->kind != V_FD_LEAK || first_time(c, V_FD_LEAK, 0, 0)))
            violation(c, e->kind, e->t - 2000 * NS, e->t, e->lock < c->s->nlocks ? e->lock : -1,
                      e->actor, -1, "%s%s", e->text,
                      e->kind == V_FD_LEAK ? " (reported once per run)" : "");
        if (e->type != EV_EXIT)
            continue;
        int status = e->rc;
        int nemesis_kill =
            WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && killed_at(c, e->pid) > 0;
        if (!nemesis_kill && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            violation(c, V_CRASH, e->t - 2000 * NS, e->t, -1, -1, -1,
                      "worker process %d ended by itself at %.3f (status 0x%x: %s %d)", e->pid,
                      rel(c, e->t), status, WIFSIGNALED(status) ? "signal" : "exit",
                      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}

/* ---------------------------------------------------------------- output */

static int involved(const viol *v, const fev *e)
{
    if (e->type == EV_NEM || e->type == EV_PHASE)
        return 1;
    if (e->type == EV_VIOL)
        return e->actor < 0 || e->actor == v->actors[0] || e->actor == v->actors[1];
    if (e->type == EV_SNAP)
        return v->lock >= 0 && e->lock == v->lock;
    if (e->actor >= 0 && (e->actor == v->actors[0] || e->actor == v->actors[1]))
        return e->type != EV_ACCESS || e->rc == 0 || (e->flags & EVF_CLOBBER) ||
               e->kind == ACC_WRITE;
    /* other actors' grants and ends on the lock, when the lock is the point */
    return v->actors[1] < 0 && v->lock >= 0 && e->lock == v->lock &&
           (e->type == EV_ACQ_OK || e->type == EV_REL_INV || e->type == EV_LOST);
}

/* A server snapshot worth a line: the first, or one that says something new. */
static int new_snapshot(const fev *e, const fev **last)
{
    const fev *p = last[e->lock];
    last[e->lock] = e;
    return p == NULL || p->rc != e->rc || p->take != e->take || p->lease_ms != e->lease_ms ||
           p->fence != e->fence || strcmp(p->text, e->text) != 0;
}

static void print_context(checker *c, const viol *v)
{
    enum { MAX_LINES = 60 };
    int64_t from = v->t_from - 500 * NS, to = v->t_focus + 300 * NS;
    size_t count = 0, seen = 0;
    char line[400];
    const fev *last[MAX_LOCKS] = {NULL};
    for (size_t i = 0; i < c->nev; i++) {
        const fev *e = c->ev[i];
        if (e->t >= from && e->t <= to && involved(v, e) &&
            (e->type != EV_SNAP || new_snapshot(e, last)))
            count++;
    }
    memset(last, 0, sizeof last);
    size_t skip = count > MAX_LINES ? count - MAX_LINES : 0;
    if (skip)
        fprintf(c->out, "    ... %zu earlier events left out (fault dump shows all)\n", skip);
    for (size_t i = 0; i < c->nev; i++) {
        const fev *e = c->ev[i];
        if (e->t < from || e->t > to || !involved(v, e) ||
            (e->type == EV_SNAP && !new_snapshot(e, last)))
            continue;
        if (seen++ < skip)
            continue;
        fs_format_event(c->s, e, line, sizeof line);
        fprintf(c->out, "    %s%s\n", line, e->t == v->t_focus ? "   <==" : "");
    }
}

int check_run(fshm *s, const fault_cfg *cfg, FILE *out, check_totals *totals)
{
    checker c;
    memset(&c, 0, sizeof c);
    memset(totals, 0, sizeof *totals);
    c.s = s;
    c.cfg = cfg;
    c.out = out;
    c.tot = totals;
    c.slack = (int64_t) cfg->slack_ms * NS;
    c.grace = (2LL * cfg->timeout_ms + 1000) * NS;

    uint64_t n = atomic_load(&s->next);
    if (n > s->cap)
        n = s->cap;
    c.ev = malloc(sizeof *c.ev * (n + 1));
    for (uint64_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&s->ev[i].ready, memory_order_acquire))
            c.ev[c.nev++] = &s->ev[i];
    }
    qsort(c.ev, c.nev, sizeof *c.ev, by_t);
    totals->events = (long) c.nev;
    c.t_end = c.nev > 0 ? c.ev[c.nev - 1]->t : s->t0;
    c.t_final_end = c.t_end;
    for (size_t i = 0; i < c.nev; i++) {
        if (c.ev[i]->type == EV_PHASE && c.ev[i]->kind == PH_STOP)
            c.t_final_end = c.ev[i]->t;
    }
    if (atomic_load(&s->overflow))
        violation(&c, V_HISTORY, c.t_end, c.t_end, -1, -1, -1,
                  "the history is full (%llu records): the run cannot be judged",
                  (unsigned long long) s->cap);

    build_windows(&c);
    rebuild(&c);
    for (int l = 0; l < s->nlocks; l++) {
        check_exclusion(&c, l);
        check_fences(&c, l);
    }
    check_lost_updates(&c);
    check_attempts(&c);
    check_holds(&c);
    check_waiters_at_heal(&c);
    check_cancels(&c);
    check_fair_order(&c);
    check_snapshots(&c);
    check_processes(&c);

    /* each violation in time order, with the history around the first few
     * of each class */
    int shown[V_COUNT] = {0}, limit = cfg->verbose ? 1000000 : 3, quiet = 0;
    for (size_t i = 0; i < c.nviols; i++) {
        viol *v = &c.viols[i];
        fprintf(out, "VIOLATION %s: %s\n", check_class_name(v->cls), v->text);
        if (shown[v->cls]++ < limit)
            print_context(&c, v);
        else
            quiet++;
    }
    if (quiet > 0)
        fprintf(out, "(the history around %d more violations is left out: --verbose shows it)\n",
                quiet);
    int total = (int) c.nviols;
    free(c.ev);
    free(c.actors);
    free(c.att);
    free(c.holds);
    free(c.win);
    free(c.att_by_op);
    free(c.viols);
    free(c.seen);
    return total;
}
