/* SPDX-License-Identifier: MIT */
/* checker_snapshots.c - the server's own view, polled by the monitor,
 * against the history (phantom). Most of it is how long the server may
 * rightly keep a grant: its lease as the server counts it, a session
 * restored after a restart, bytes a blackhole held back. */
#define _GNU_SOURCE
#include "checker_int.h"
#include "nemesis.h"

#include <stdlib.h>
#include <string.h>

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
        if (h->run && check__disturbed(c, h->actor, h->sup_pid, h->t_end, until, c->grace))
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
    if (check__frozen(c, h->pid, h->sup_pid, h->t_ok, c->t_end))
        until = c->t_end;
    return restored_until(c, h->t_inv, until, lease);
}

static int64_t attempt_until(const checker *c, const attempt *a, int64_t lease)
{
    int64_t end = a->t_ret > 0 ? a->t_ret : c->t_end;
    /* a request held back by a partition may be granted when it heals */
    const window *w = check__disturbed(c, a->actor, a->sup_pid, a->t_inv, end, 0);
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

void check__snapshots(checker *c)
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
            check__violation(
                c, V_PHANTOM, e->wait_ms - 2000 * NS, e->t, e->lock, -1, -1,
                "lock %s: at %.3f the server says %s holds it; no hold or attempt under "
                "that token can then (released, lost or dead)",
                c->s->locks[e->lock].name, rel(c, e->t), e->text);
        snprintf(last_phantom[e->lock], TEXT_LEN, "%s", phantom);
        if (kind == LK_RW || kind == LK_SEM) {
            int want = kind == LK_RW ? e->take : (int) e->lease_ms;
            int can = kind == LK_RW ? active_shared[e->lock] : active_permits[e->lock];
            if (want > can && check__first_time(c, V_PHANTOM, (uint64_t) e->lock,
                                                (uint64_t) (e->t / (1000 * NS))))
                check__violation(
                    c, V_PHANTOM, e->wait_ms - 2000 * NS, e->t, e->lock, -1, -1,
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
