/* SPDX-License-Identifier: MIT */
/* checker_int.h - the inside of the fault suite's checker, shared by the
 * files that implement check_run() (fault.h): not for use outside them.
 *
 *   checker.c            check_run: reads the history, runs every check in
 *                        turn, prints the verdict; the classes' names
 *   checker_history.c    the history rebuilt into attempts and holds
 *   checker_faults.c     the nemesis's fault windows, and what they excuse
 *   checker_exclusion.c  overlap, late-loss, stale-write, lost-update
 *   checker_order.c      fence-order, fair-order
 *   checker_calls.c      each call's code and time, each process's end:
 *                        error, stall, early-giveup, liveness,
 *                        spurious-loss, cancel, run-exit, crash
 *   checker_snapshots.c  the server's view against the history: phantom
 *   checker_report.c     each violation recorded, and the history around it
 *
 * All times are CLOCK_MONOTONIC nanoseconds (fault.h). */
#ifndef DLOCK_FAULT_CHECKER_INT_H
#define DLOCK_FAULT_CHECKER_INT_H

#include "fault.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#define NS 1000000LL /* ns per ms */

/* How a hold ended (check__end_name says it in words). */
enum { END_OPEN, END_RELEASE, END_LOST_CB, END_CHECK, END_TERM, END_KILLED, END_EXIT };

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

static inline double rel(const checker *c, int64_t t)
{
    return (double) (t - c->s->t0) / 1e9;
}

static inline int exclusive(int hkind)
{
    return hkind != H_READ && hkind != H_SEM;
}

typedef struct member {
    int hold, m; /* hold index, member index within it */
} member;

static inline const hold *H(const checker *c, const member *x)
{
    return &c->holds[x->hold];
}

static inline uint64_t fence_of(const checker *c, const member *x)
{
    return c->holds[x->hold].fences[x->m];
}

/* The times of the dlock_cancel() calls aimed at each actor. */
typedef struct cancel_index {
    int64_t **by_actor;
    int *count;
} cancel_index;

/* ---------------------------------------------------------------- checker_report.c */

/* Records a violation of class cls: its text, and the stretch of history
 * (t_from to t_focus, on lock, of actors a1 and a2; -1: none) printed
 * with it. */
void check__violation(checker *c, int cls, int64_t t_from, int64_t t_focus, int lock, int a1,
                      int a2, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* 1 the first time a cause (class + what identifies it) is met, 0 after. */
int check__first_time(checker *c, int cls, uint64_t a, uint64_t b);
/* Prints the records of the history around v to c->out (at most 60, the
 * last ones). */
void check__print_context(checker *c, const viol *v);

/* ---------------------------------------------------------------- checker_faults.c */

/* Builds c->win from the nemesis's records, and sets c->t_heal (needs c->ev
 * and c->t_end). */
void check__build_windows(checker *c);
/* Each returns the fault window that answers yes, or NULL. */
const window *check__disturbed(const checker *c, int actor, pid_t sup, int64_t t0, int64_t t1,
                               int64_t grace);
const window *check__unreachable(const checker *c, int actor, pid_t sup, int64_t t0, int64_t t1,
                                 int64_t grace);
const window *check__frozen(const checker *c, pid_t pid, pid_t sup, int64_t t0, int64_t t1);
const window *check__data_lost(const checker *c, int lock, int64_t t0, int64_t t1);
const window *check__fences_reset(const checker *c, int64_t t0, int64_t t1);
const window *check__cut_off(const checker *c, int actor, int64_t t0, int64_t t1);
int check__fence_epoch(const checker *c, int64_t t);
/* When the nemesis killed process pid (0: it did not). */
int64_t check__killed_at(const checker *c, pid_t pid);

/* ---------------------------------------------------------------- checker_history.c */

/* Builds the actors, attempts and holds from c->ev (needs c->t_end). */
void check__rebuild(checker *c);
/* The attempt of an outer acquire's op, or NULL. */
attempt *check__attempt_of_op(checker *c, uint64_t op);
/* How a hold ended (END_*), in words. */
const char *check__end_name(int end);
/* The holds that took lock (a multi-lock's: each member), by grant time;
 * the caller frees the list. */
member *check__members_of(checker *c, int lock, size_t *n);
cancel_index check__index_cancels(const checker *c);
void check__free_cancels(const checker *c, cancel_index *x);
/* Was dlock_cancel() called on actor's handle in [t0, t1]? */
int check__cancelled_between(const cancel_index *x, int actor, int64_t t0, int64_t t1);

/* ---------------------------------------------------------------- the checks */

/* checker_exclusion.c */
void check__exclusion(checker *c, int lock);
void check__lost_updates(checker *c);
/* checker_order.c */
void check__fences(checker *c, int lock);
void check__fair_order(checker *c);
/* checker_calls.c */
void check__attempts(checker *c);
void check__holds(checker *c);
void check__waiters_at_heal(checker *c);
void check__cancels(checker *c);
void check__processes(checker *c);
/* checker_snapshots.c */
void check__snapshots(checker *c);

#endif
