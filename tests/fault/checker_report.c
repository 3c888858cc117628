/* SPDX-License-Identifier: MIT */
/* checker_report.c - the checker's violations: each recorded once per
 * cause, and the stretch of history printed with it (the records of the
 * actors and the lock involved, and every fault). */
#define _GNU_SOURCE
#include "checker_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void check__violation(checker *c, int cls, int64_t t_from, int64_t t_focus, int lock, int a1,
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
int check__first_time(checker *c, int cls, uint64_t a, uint64_t b)
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

void check__print_context(checker *c, const viol *v)
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
