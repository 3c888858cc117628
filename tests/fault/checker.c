/* SPDX-License-Identifier: MIT */
/* checker.c - judges a run's history (see fault.h for the properties).
 *
 * The history is rebuilt into attempts (one acquire call each), holds (an
 * acquire that succeeded, from its "acquired" to the moment its holder
 * stopped believing it held: release called, loss reported, process
 * killed), the nemesis's fault windows, and the processes it froze. Every
 * property is then a question about those intervals, on one clock. Each
 * kind of question has a file of its own (checker_int.h lists them); this
 * one reads the history, asks them in turn and prints the verdict.
 *
 * Tolerances, all from the command line: `slack` is what scheduling on a
 * busy machine may add to a time that should be exact (a callback that
 * must come before another client's grant may come that much later);
 * `grace` is how long after a fault ends its errors may still surface
 * (2 command timeouts + 1 s). The margin is the library's own (1% of the
 * lease + 2 ms, and 5%, at most 50 ms, for scheduling). */
#define _GNU_SOURCE
#include "checker_int.h"

#include <stdlib.h>
#include <string.h>

const char *check_class_name(int v)
{
    static const char *const names[V_COUNT] = {
        "overlap",  "late-loss", "stale-write",  "lost-update",   "fence-order", "fair-order",
        "error",    "stall",     "liveness",     "spurious-loss", "phantom",     "cancel",
        "run-exit", "crash",     "early-giveup", "fd-leak",       "store-loss",  "history",
    };
    return v >= 0 && v < V_COUNT ? names[v] : "?";
}

static int by_t(const void *a, const void *b)
{
    const fev *x = *(fev *const *) a, *y = *(fev *const *) b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x < y ? -1 : x > y;
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
        check__violation(&c, V_HISTORY, c.t_end, c.t_end, -1, -1, -1,
                         "the history is full (%llu records): the run cannot be judged",
                         (unsigned long long) s->cap);

    check__build_windows(&c);
    check__rebuild(&c);
    for (int l = 0; l < s->nlocks; l++) {
        check__exclusion(&c, l);
        check__fences(&c, l);
    }
    check__lost_updates(&c);
    check__attempts(&c);
    check__holds(&c);
    check__waiters_at_heal(&c);
    check__cancels(&c);
    check__fair_order(&c);
    check__snapshots(&c);
    check__processes(&c);

    /* each violation in the order the checks found it, with the history
     * around the first few of each class */
    int shown[V_COUNT] = {0}, limit = cfg->verbose ? 1000000 : 3, quiet = 0;
    for (size_t i = 0; i < c.nviols; i++) {
        viol *v = &c.viols[i];
        fprintf(out, "VIOLATION %s: %s\n", check_class_name(v->cls), v->text);
        if (shown[v->cls]++ < limit)
            check__print_context(&c, v);
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
