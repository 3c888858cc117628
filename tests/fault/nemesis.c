/* SPDX-License-Identifier: MIT */
/* nemesis.c - the schedule of faults and its execution (see nemesis.h).
 *
 * The schedule is drawn from the seed only: the same seed, run length,
 * lease and store give the same faults at the same offsets. What a client
 * fault hits (which holder, which waiter) is chosen when it happens, from
 * the processes in that state then; the history says which one it was.
 *
 * At most one server-wide fault runs at a time (a paused server is not also
 * killed); client faults and partitions overlap freely, except two
 * partitions of one link. Every start and end is logged in the history,
 * with the time it took effect.
 *
 * A store of independent servers (Redlock's members, cfg->members > 1)
 * gets each fault on one member, chosen by the seed: a kill, restart,
 * pause or operation of that member, or a partition of its proxy. One
 * member at a time (a fault on another waits until it is over), so a
 * quorum always stays; and a member that loses its data stays down longer
 * than the longest lease, as Redlock assumes (nem_min_down_ms). Such a
 * fault is logged with its member (rc = member + 1) and no data loss: the
 * store as a whole keeps every lock. A partition may also hit every
 * member's proxy (a group of clients, or all, cut off from the store). */
#define _GNU_SOURCE
#include "nemesis.h"

#include "../support/redis_node.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *s)
{
    *s = mix(*s);
    return *s;
}

static int64_t between(uint64_t *s, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t) (rnd(s) % (uint64_t) (hi - lo + 1));
}

const char *nem_kind_name(int kind)
{
    static const char *const names[NEM_COUNT] = {
        "kill-client", "pause-client", "kill-server", "restart-server", "pause-server",
        "partition",   "op",           "heal-all",    "failover",       "migrate",
    };
    return kind >= 0 && kind < NEM_COUNT ? names[kind] : "?";
}

/* The name a user gives --nemesis to allow a fault. */
static const char *filter_name(const nem_event *e)
{
    if (e->kind == NEM_OP)
        return e->op;
    if (e->kind == NEM_PARTITION)
        return dt_proxy_mode_name((dt_proxy_mode) e->mode);
    return nem_kind_name(e->kind);
}

static int allowed(const fault_cfg *cfg, const char *name)
{
    const char *list = cfg->nemeses;
    size_t len = strlen(name);
    if (list == NULL || strcmp(list, "all") == 0)
        return 1;
    for (const char *p = list; *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t) (comma - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0)
            return 1;
        if (n == 9 && strncmp(p, "partition", 9) == 0 &&
            (strcmp(name, "blackhole") == 0 || strcmp(name, "drop") == 0 ||
             strcmp(name, "cut") == 0))
            return 1;
        p += n + (comma != NULL);
    }
    return 0;
}

/* Operations of the server kind that are faults, and how long they last
 * (0: instantaneous). */
static int server_wide(const nem_event *e)
{
    if (e->kind == NEM_KILL_SERVER || e->kind == NEM_RESTART_SERVER ||
        e->kind == NEM_PAUSE_SERVER || e->kind == NEM_FAILOVER || e->kind == NEM_MIGRATE)
        return 1;
    return e->kind == NEM_OP;
}

/* A type of fault: what --nemesis names. Partitions come in three modes,
 * operations by name. */
typedef struct nem_type {
    int kind, mode;
    const char *op;
    int weight; /* per cent of the random draws */
} nem_type;

int64_t nem_min_down_ms(const fault_cfg *cfg)
{
    if (cfg->member_down_ms >= 0)
        return cfg->member_down_ms;
    /* the longest lease, plus what scheduling may add to a time */
    return wl_max_lease_ms(cfg) + cfg->slack_ms;
}

/* Which member of a group a fault hits, and how long one that loses its
 * data stays down. Drawn only for a group, so that one server's schedule
 * of a seed stays what it was. */
static void draw_member(nem_event *e, uint64_t *rng, const fault_cfg *cfg)
{
    int64_t down = nem_min_down_ms(cfg);
    e->member = -1;
    if (cfg->members <= 1)
        return;
    switch (e->kind) {
    case NEM_KILL_SERVER: /* a kill -9 loses what a member without persistence held */
        e->member = (int) (rnd(rng) % (uint64_t) cfg->members);
        e->dur_ms = between(rng, down, down + 2 * cfg->lease_ms);
        break;
    case NEM_RESTART_SERVER: /* a wiped one is a stop, then a late start */
        e->member = (int) (rnd(rng) % (uint64_t) cfg->members);
        if (e->target & DT_WIPE)
            e->dur_ms = between(rng, down, down + 2 * cfg->lease_ms);
        break;
    case NEM_PAUSE_SERVER:
    case NEM_OP:
        e->member = (int) (rnd(rng) % (uint64_t) cfg->members);
        break;
    case NEM_PARTITION: /* mostly one member's proxy, else every member's */
        e->member = rnd(rng) % 3 != 0 ? (int) (rnd(rng) % (uint64_t) cfg->members) : -1;
        break;
    default:
        break;
    }
    if (e->member >= 0 && (e->kind == NEM_KILL_SERVER || (e->target & DT_WIPE)) && e->dur_ms < 1)
        e->dur_ms = 1; /* (--member-down 0: its start still comes after its stop) */
}

/* A member's fault that loses its data: it must not be cut short. */
static int member_loses_data(const nem_event *e)
{
    return e->member >= 0 &&
           (e->kind == NEM_KILL_SERVER || (e->kind == NEM_RESTART_SERVER && (e->target & DT_WIPE)));
}

/* Fills e with a fault of type t and its random parameters. */
static void draw_typed(nem_event *e, const nem_type *t, uint64_t *rng, const fault_cfg *cfg)
{
    int64_t lease = cfg->lease_ms;
    memset(e, 0, sizeof *e);
    e->kind = t->kind;
    switch (t->kind) {
    case NEM_KILL_CLIENT:
        e->target = (int) (rnd(rng) % 3);
        break;
    case NEM_PAUSE_CLIENT:
        e->target = (int) (rnd(rng) % 3);
        /* short stalls and ones past the lease (Kleppmann's pause) */
        e->dur_ms = between(rng, 100, 3 * lease);
        break;
    case NEM_KILL_SERVER:
        e->target = rnd(rng) % 10 < 3 ? DT_WIPE : 0;
        e->dur_ms = between(rng, 100, 2 * lease);
        break;
    case NEM_RESTART_SERVER:
        e->target = rnd(rng) % 10 < 3 ? DT_WIPE : 0;
        break;
    case NEM_PAUSE_SERVER:
        e->dur_ms = between(rng, 100, 2 * lease);
        break;
    case NEM_FAILOVER: /* over when the group has settled */
    case NEM_MIGRATE:  /* over when the slot has moved */
        break;
    case NEM_PARTITION:
        e->mode = t->mode;
        e->target = rnd(rng) % 2 ? -1 : (int) (rnd(rng) % (uint64_t) cfg->links);
        e->dur_ms = between(rng, 100, 3 * lease);
        break;
    default:
        snprintf(e->op, sizeof e->op, "%s", t->op);
        if (strcmp(t->op, "drop_lock") == 0) {
            snprintf(e->arg, sizeof e->arg, "%s",
                     fault_locks[rnd(rng) % (uint64_t) fault_nlocks].name);
        } else if (strcmp(t->op, "pause_clients") == 0 || strcmp(t->op, "sleep") == 0) {
            e->dur_ms = between(rng, 100, 2 * lease);
            snprintf(e->arg, sizeof e->arg, "%lld", (long long) e->dur_ms);
        } else if (strcmp(t->op, "persist") == 0) {
            snprintf(e->arg, sizeof e->arg, "%s", rnd(rng) % 2 ? "on" : "off");
        }
        break;
    }
    draw_member(e, rng, cfg);
    if (cfg->master_moves && e->kind == NEM_KILL_SERVER)
        e->target = 0; /* (a Sentinel node keeps no files to wipe; a wiped Cluster node
                          would lose its nodes.conf, and with it its place) */
    /* Cluster: the master a server fault hits is the one serving a lock of
     * the run then (drawn last: other stores' schedules stay as they were),
     * not the simple-mode one, which a cluster refuses */
    if (cfg->cluster && server_wide(e) && e->kind != NEM_OP) {
        int pick = (int) (rnd(rng) % (uint64_t) fault_nlocks);
        while (fault_locks[pick].kind == LK_SIMPLE)
            pick = (pick + 1) % fault_nlocks;
        snprintf(e->arg, sizeof e->arg, "%s", fault_locks[pick].name);
    }
    /* Cluster: half its kills and pauses last past its failover (a node
     * timeout of 2 s, then the replica's election: 3-4 s), so the master
     * comes back a replica of the promoted one; the others end before, and
     * a killed master comes back empty with its slots */
    if (cfg->cluster && (e->kind == NEM_KILL_SERVER || e->kind == NEM_PAUSE_SERVER) &&
        rnd(rng) % 2 == 0)
        e->dur_ms = between(rng, 4500, 7000);
}

/* The allowed types: the generic faults, then the server kind's
 * operations. Weights: client faults and partitions are the common case. */
static int fault_types(const fault_cfg *cfg, dt_server *server, nem_type *types)
{
    /* a group's operations are its members' (node 0's kind has none) */
    const dt_server *of = cfg->members > 1 ? dt_redlock_node(server, 1) : server;
    static const nem_type generic[] = {
        {NEM_KILL_CLIENT, 0, NULL, 16},    {NEM_PAUSE_CLIENT, 0, NULL, 20},
        {NEM_KILL_SERVER, 0, NULL, 8},     {NEM_RESTART_SERVER, 0, NULL, 6},
        {NEM_PAUSE_SERVER, 0, NULL, 8},    {NEM_PARTITION, DT_BLACKHOLE, NULL, 11},
        {NEM_PARTITION, DT_DROP, NULL, 5}, {NEM_PARTITION, DT_CUT, NULL, 8},
    };
    const char *const *ops = dt_server_ops(of);
    int n = 0, nops = 0;
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++) {
        nem_event probe = {.kind = generic[i].kind, .mode = generic[i].mode};
        /* A store with no server process (SQLite's file) has nothing to
         * kill, pause or restart, and its clients no link to cut: such a
         * fault would do nothing but be logged (and excuse the errors of
         * clients it never touched), and a wiped restart would delete the
         * database under its holders. Only client faults apply. */
        if (!dt_server_has_process(server) && probe.kind != NEM_KILL_CLIENT &&
            probe.kind != NEM_PAUSE_CLIENT)
            continue;
        /* Sentinel: no proxy (clients dial the address the sentinels
         * announce), and a restart is a kill's slower twin */
        if (cfg->master_moves && (probe.kind == NEM_PARTITION || probe.kind == NEM_RESTART_SERVER))
            continue;
        if (allowed(cfg, filter_name(&probe)))
            types[n++] = generic[i];
    }
    if (cfg->master_moves && allowed(cfg, "failover"))
        types[n++] = (nem_type){NEM_FAILOVER, 0, NULL, 10};
    if (cfg->cluster && allowed(cfg, "migrate"))
        types[n++] = (nem_type){NEM_MIGRATE, 0, NULL, 10};
    for (int i = 0; ops[i] != NULL; i++)
        nops += allowed(cfg, ops[i]) && (cfg->members <= 1 || !dt_server_op_loses_data(of, ops[i]));
    for (int i = 0; ops[i] != NULL; i++) {
        /* A member that loses its data (FLUSHALL, a deleted key, an
         * eviction) and goes on serving at once breaks what Redlock
         * assumes (it can grant a lock held on the others): left out. */
        if (cfg->members > 1 && dt_server_op_loses_data(of, ops[i]))
            continue;
        if (allowed(cfg, ops[i]))
            /* the operations share what is left of 100 */
            types[n++] = (nem_type){NEM_OP, 0, ops[i], 18 / nops > 0 ? 18 / nops : 1};
    }
    return n;
}

static const nem_type *weighted(const nem_type *types, int n, uint64_t *rng)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += types[i].weight;
    int r = (int) (rnd(rng) % (uint64_t) (total > 0 ? total : 1));
    for (int i = 0; i < n; i++) {
        if (r < types[i].weight)
            return &types[i];
        r -= types[i].weight;
    }
    return &types[n - 1];
}

int nem_schedule(const fault_cfg *cfg, dt_server *server, nem_event **out)
{
    uint64_t rng = mix(cfg->seed ^ 0x6e656d65ull);
    nem_type types[48];
    int ntypes = fault_types(cfg, server, types);
    int n = 0, cap = 64;
    int64_t end_ms = (int64_t) cfg->seconds * 1000;
    int64_t server_busy_until = 0, link_busy_until[DT_PROXY_MAX_LINKS + 1] = {0};
    int64_t member_busy_until = 0; /* a group's member faulted until then */
    int busy_member = -1;
    nem_event *ev = malloc(sizeof *ev * (size_t) cap);
    /* Every type once first, in an order of the seed's, so that even a
     * short run meets each fault; then weighted draws. */
    int pending[48], npending = ntypes;
    for (int i = 0; i < ntypes; i++)
        pending[i] = i;
    for (int i = ntypes - 1; i > 0; i--) {
        int j = (int) (rnd(&rng) % (uint64_t) (i + 1)), x = pending[i];
        pending[i] = pending[j];
        pending[j] = x;
    }

    int64_t t = 300;
    while (ntypes > 0 && t < end_ms - 200) {
        nem_event e;
        int tries = 0, ok = 0;
        /* draw until a fault fits what is running */
        while (!ok && tries++ < 50) {
            int from_pending = tries <= npending;
            const nem_type *type =
                from_pending ? &types[pending[tries - 1]] : weighted(types, ntypes, &rng);
            draw_typed(&e, type, &rng, cfg);
            e.at_ms = t;
            if (e.at_ms + e.dur_ms > end_ms) {
                if (member_loses_data(&e))
                    continue; /* cut short, it would come back too early */
                e.dur_ms = end_ms - e.at_ms;
            }
            if (server_wide(&e) && t < server_busy_until)
                continue;
            /* one member at a time: a quorum stays */
            if (e.member >= 0 && t < member_busy_until && e.member != busy_member)
                continue;
            if (e.kind == NEM_PARTITION) {
                int busy = 0;
                for (int l = 0; l < cfg->links; l++) {
                    if ((e.target < 0 || e.target == l) && t < link_busy_until[l])
                        busy = 1;
                }
                if (busy)
                    continue;
            }
            ok = 1;
            if (from_pending) {
                memmove(&pending[tries - 1], &pending[tries],
                        sizeof *pending * (size_t) (npending - tries));
                npending--;
            }
        }
        if (ok) {
            if (n == cap) {
                cap *= 2;
                ev = realloc(ev, sizeof *ev * (size_t) cap);
            }
            ev[n++] = e;
            if (server_wide(&e))
                /* a restart takes a while: leave it room */
                server_busy_until = t + e.dur_ms + 500;
            if (e.member >= 0 && t + e.dur_ms + 500 > member_busy_until) {
                member_busy_until = t + e.dur_ms + 500;
                busy_member = e.member;
            }
            if (e.kind == NEM_PARTITION) {
                for (int l = 0; l < cfg->links; l++) {
                    if (e.target < 0 || e.target == l)
                        link_busy_until[l] = t + e.dur_ms + 50;
                }
            }
        }
        t += between(&rng, cfg->gap_ms / 2, cfg->gap_ms * 3 / 2);
    }
    *out = ev;
    return n;
}

static void format_one(const nem_event *e, char *buf, size_t len);

void nem_format(const nem_event *e, char *buf, size_t len)
{
    format_one(e, buf, len);
    size_t used = strlen(buf);
    if (e->member >= 0 && e->kind != NEM_KILL_CLIENT && e->kind != NEM_PAUSE_CLIENT)
        snprintf(buf + used, len - used, " on member %d", e->member);
    else if (e->arg[0] != '\0' && (e->kind == NEM_KILL_SERVER || e->kind == NEM_PAUSE_SERVER))
        snprintf(buf + used, len - used, " on the master of %s", e->arg);
}

static void format_one(const nem_event *e, char *buf, size_t len)
{
    static const char *const targets[] = {"any", "holder", "waiter"};
    switch (e->kind) {
    case NEM_KILL_CLIENT:
        snprintf(buf, len, "+%lldms kill-client %s", (long long) e->at_ms, targets[e->target]);
        break;
    case NEM_PAUSE_CLIENT:
        snprintf(buf, len, "+%lldms pause-client %s for %lldms", (long long) e->at_ms,
                 targets[e->target], (long long) e->dur_ms);
        break;
    case NEM_KILL_SERVER:
        snprintf(buf, len, "+%lldms kill-server, start again after %lldms%s", (long long) e->at_ms,
                 (long long) e->dur_ms,
                 e->arg[0] != '\0'       ? "" /* (Cluster: what it kept, see cl_log_start) */
                 : (e->target & DT_WIPE) ? " with its data wiped"
                                         : " with its data");
        break;
    case NEM_RESTART_SERVER:
        if (e->member >= 0 && (e->target & DT_WIPE)) /* a group's member: started late */
            snprintf(buf, len,
                     "+%lldms restart-server, start again after %lldms with its data wiped",
                     (long long) e->at_ms, (long long) e->dur_ms);
        else
            snprintf(buf, len, "+%lldms restart-server%s", (long long) e->at_ms,
                     (e->target & DT_WIPE) ? " with its data wiped" : " with its data");
        break;
    case NEM_PAUSE_SERVER:
        snprintf(buf, len, "+%lldms pause-server for %lldms", (long long) e->at_ms,
                 (long long) e->dur_ms);
        break;
    case NEM_FAILOVER:
        if (e->arg[0] != '\0')
            snprintf(buf, len, "+%lldms failover of the master of %s (CLUSTER FAILOVER)",
                     (long long) e->at_ms, e->arg);
        else
            snprintf(buf, len, "+%lldms failover (SENTINEL FAILOVER)", (long long) e->at_ms);
        break;
    case NEM_MIGRATE:
        snprintf(buf, len, "+%lldms migrate the slot of %s to another master", (long long) e->at_ms,
                 e->arg);
        break;
    case NEM_PARTITION:
        if (e->target < 0)
            snprintf(buf, len, "+%lldms %s all links for %lldms", (long long) e->at_ms,
                     dt_proxy_mode_name((dt_proxy_mode) e->mode), (long long) e->dur_ms);
        else
            snprintf(buf, len, "+%lldms %s link %d for %lldms", (long long) e->at_ms,
                     dt_proxy_mode_name((dt_proxy_mode) e->mode), e->target, (long long) e->dur_ms);
        break;
    case NEM_OP:
        snprintf(buf, len, "+%lldms op %s%s%s", (long long) e->at_ms, e->op, e->arg[0] ? " " : "",
                 e->arg);
        break;
    default:
        snprintf(buf, len, "+%lldms %s", (long long) e->at_ms, nem_kind_name(e->kind));
        break;
    }
}

/* ---------------------------------------------------------------- execution */

static int by_time(const void *a, const void *b)
{
    const nem_action *x = a, *y = b;
    if (x->at_ms != y->at_ms)
        return x->at_ms < y->at_ms ? -1 : 1;
    /* ends before starts at the same moment: a link heals before it is cut again */
    return y->end - x->end;
}

void nem_init(nemesis *n)
{
    n->actions = malloc(sizeof *n->actions * (size_t) (2 * n->nevents + 1));
    n->event_pid = calloc((size_t) n->nevents + 1, sizeof *n->event_pid);
    n->event_ok = calloc((size_t) n->nevents + 1, sizeof *n->event_ok);
    n->event_node = calloc((size_t) n->nevents + 1, sizeof *n->event_node);
    n->nactions = 0;
    for (int i = 0; i < n->nevents; i++) {
        n->actions[n->nactions++] = (nem_action){n->events[i].at_ms, i, 0};
        if (n->events[i].dur_ms > 0)
            n->actions[n->nactions++] =
                (nem_action){n->events[i].at_ms + n->events[i].dur_ms, i, 1};
    }
    qsort(n->actions, (size_t) n->nactions, sizeof *n->actions, by_time);
    n->next_action = 0;
    n->cur_member = -1;
    n->settling = -1;
}

static void log_nem(nemesis *n, int kind, int flags, pid_t pid, int link, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void log_nem(nemesis *n, int kind, int flags, pid_t pid, int link, const char *fmt, ...)
{
    va_list ap;
    fev *e = fs_log(n->shm, EV_NEM, n->lost_lock, -1);
    e->kind = kind;
    e->flags = flags;
    e->pid = (int32_t) pid;
    e->take = link;
    e->rc = n->cur_member + 1;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
    fs_commit(e);
}

static int is_paused(const nemesis *n, pid_t pid)
{
    for (int i = 0; i < n->npaused; i++) {
        if (n->paused[i] == pid)
            return 1;
    }
    return 0;
}

void nem_forget_pid(nemesis *n, pid_t pid)
{
    for (int i = 0; i < n->npaused; i++) {
        if (n->paused[i] == pid)
            n->paused[i] = n->paused[--n->npaused];
    }
}

/* A live client process in the wanted state: a library worker's pid, or
 * the dlock process of a `dlock run` actor. *actor gets the actor seen. */
static pid_t pick_client(nemesis *n, int target, int *actor)
{
    fshm *s = n->shm;
    int count = atomic_load(&s->next_actor);
    int candidates[MAX_ACTORS], nc = 0;
    for (int i = 0; i < count && i < MAX_ACTORS; i++) {
        actor_slot *a = &s->actors[i];
        if (!atomic_load(&a->live))
            continue;
        int st = atomic_load(&a->state);
        if ((target == TG_HOLDER && st != AS_HOLDING) || (target == TG_WAITER && st != AS_WAITING))
            continue;
        pid_t pid = atomic_load(&a->sup_pid) > 0 ? atomic_load(&a->sup_pid) : atomic_load(&a->pid);
        if (pid <= 0 || is_paused(n, pid))
            continue;
        candidates[nc++] = i;
    }
    if (nc == 0)
        return 0;
    int i = candidates[rnd(&n->rng) % (uint64_t) nc];
    *actor = i;
    pid_t sup = atomic_load(&s->actors[i].sup_pid);
    return sup > 0 ? sup : atomic_load(&s->actors[i].pid);
}

static void start_server(nemesis *n, unsigned how)
{
    if (n->server->pid <= 0)
        dt_server_start_again(n->server, how);
}

/* ---- one member of a group (cfg->members > 1; dt_redlock_node's calls) */

static dt_server *member(nemesis *n, int m)
{
    return dt_redlock_node(n->server, m);
}

/* Starts member m again if it is down, not before it may come back. */
static void start_member(nemesis *n, int m, unsigned how)
{
    int64_t wait = n->member_back_ns[m] - fs_now();
    if (member(n, m)->pid > 0)
        return;
    if (wait > 0)
        dt_sleep_ms((int) (wait / 1000000) + 1);
    dt_server_start_again(member(n, m), how);
    n->member_back_ns[m] = 0;
}

/* Member m went down without its data: it stays down long enough. */
static void member_lost_data(nemesis *n, int m)
{
    n->member_back_ns[m] = fs_now() + nem_min_down_ms(n->cfg) * 1000000;
}

static void run_member_action(nemesis *n, const nem_action *a, const nem_event *e, int *failed)
{
    int m = e->member;
    dt_server *s = member(n, m);
    switch (e->kind) {
    case NEM_KILL_SERVER:
        if (!a->end) {
            int lost = !dt_server_keeps_data(s, DT_KILL | (unsigned) e->target);
            dt_redlock_node_kill(n->server, m);
            if (lost)
                member_lost_data(n, m);
            log_nem(n, e->kind, EVF_START, 0, -1, "kill-server member %d%s", m,
                    lost ? " (its data lost)" : "");
        } else {
            start_member(n, m, (unsigned) e->target);
            log_nem(n, e->kind, EVF_END, s->pid, -1, "member %d started%s", m,
                    (e->target & DT_WIPE) ? " (data wiped)" : "");
        }
        break;
    case NEM_RESTART_SERVER:
        if (!(e->target & DT_WIPE)) { /* with its data: SHUTDOWN SAVE, start */
            log_nem(n, e->kind, EVF_START, 0, -1, "restart-server member %d", m);
            if (s->pid > 0)
                dt_redlock_node_stop(n->server, m);
            start_member(n, m, 0);
            log_nem(n, e->kind, EVF_END, s->pid, -1, "member %d restarted", m);
        } else if (!a->end) { /* wiped: stopped now, started late */
            dt_redlock_node_stop(n->server, m);
            member_lost_data(n, m);
            log_nem(n, e->kind, EVF_START, 0, -1, "restart-server member %d (wiped)", m);
        } else {
            start_member(n, m, (unsigned) e->target);
            log_nem(n, e->kind, EVF_END, s->pid, -1, "member %d started (data wiped)", m);
        }
        break;
    case NEM_PAUSE_SERVER:
        if (!a->end) {
            dt_server_pause(s);
            log_nem(n, e->kind, EVF_START, 0, -1, "pause-server member %d", m);
        } else {
            dt_server_resume(s);
            log_nem(n, e->kind, EVF_END, 0, -1, "resume-server member %d", m);
        }
        break;
    case NEM_PARTITION:
        if (!a->end) {
            dt_proxy_set(&n->proxies[m], e->target, (dt_proxy_mode) e->mode);
            log_nem(n, e->kind, EVF_START, 0, e->target, "%s link %d member %d",
                    dt_proxy_mode_name((dt_proxy_mode) e->mode), e->target, m);
        } else {
            dt_proxy_set(&n->proxies[m], e->target, DT_PASS);
            log_nem(n, e->kind, EVF_END, 0, e->target, "heal link %d member %d", e->target, m);
        }
        break;
    case NEM_OP: /* only the operations that lose no data (fault_types) */
        if (!a->end) {
            int rc = s->pid > 0 && !s->paused
                         ? dt_redlock_node_op(n->server, m, e->op, e->arg[0] ? e->arg : NULL)
                         : -1;
            *failed = rc != 0;
            log_nem(n, e->kind, EVF_START | (rc != 0 ? EVF_FAILED : 0), 0, -1,
                    "op %.16s %.12s member %d", e->op, e->arg, m);
            if (e->dur_ms == 0)
                log_nem(n, e->kind, EVF_END | (rc != 0 ? EVF_FAILED : 0), 0, -1,
                        "op %s done member %d", e->op, m);
        } else {
            log_nem(n, e->kind, EVF_END, 0, -1, "op %s over member %d", e->op, m);
        }
        break;
    default:
        break;
    }
}

/* ---- the master of a Sentinel group (cfg->master_moves) */

/* A data node's replication as it says (INFO replication): 1 master, 0 a
 * replica linked to the master on master_port, -1 neither (down, paused,
 * syncing). */
static int node_role(const dt_server *node, int master_port)
{
    int role = -1;
    if (node->pid <= 0 || node->paused)
        return -1;
    redisReply *r = dt__redis_ask(node->port, NULL, 500, "INFO replication");
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        char want[48];
        snprintf(want, sizeof want, "master_port:%d\r", master_port);
        if (strstr(r->str, "role:master\r") != NULL)
            role = 1;
        else if (strstr(r->str, "role:slave\r") != NULL && strstr(r->str, want) != NULL &&
                 strstr(r->str, "master_link_status:up\r") != NULL)
            role = 0;
    }
    if (r != NULL)
        freeReplyObject(r);
    return role;
}

/* (Cluster: below) */
static int cl_settled(nemesis *n, int want);
static void cl_tell_state(nemesis *n);

/* Whether the sentinels name a master (`want`, or either when -1) that
 * says it is one, and the other node follows it, linked: until then a
 * node may be a master the sentinels no longer name (what it takes is lost
 * when it is demoted). Returns the master's index, or -1. A Cluster's
 * settling is cl_settled()'s. */
static int settled_now(nemesis *n, int want)
{
    if (n->cfg->cluster)
        return cl_settled(n, want);
    int m = dt_sentinel_master(n->server);
    if (m >= 0 && (want < 0 || m == want) && node_role(dt_sentinel_node(n->server, m), 0) == 1 &&
        node_role(dt_sentinel_node(n->server, 1 - m), dt_sentinel_node(n->server, m)->port) == 0)
        return m;
    return -1;
}

/* settled_now() for the fault settling. A Cluster's manual failover may
 * not happen (the masters vote for a replica of one master once in two
 * node timeouts: a second failover of a shard within 4 s gets no votes);
 * it gives up after 5 s (Redis's manual failover timeout) and changes
 * nothing: the cluster is then settled with the old master, and *not_done
 * says so. */
static int settle_check(nemesis *n, int *not_done)
{
    int m = settled_now(n, n->settle_want);
    *not_done = 0;
    if (m < 0 && n->cfg->cluster && n->settle_want >= 0 &&
        fs_now() > n->settle_until_ns - 14000000000LL && settled_now(n, -1) >= 0) {
        *not_done = 1;
        m = 0;
    }
    return m;
}

/* The fault waiting for the group to settle ends (logged) when it has,
 * or when `force` (the heal) after waiting up to 30 s. A failover takes
 * the sentinels 10-12 s to settle (the old master is made a replica only
 * after their config's publish period), longer than most gaps between
 * faults: the nemesis goes on meanwhile (client faults), and refuses a new
 * server fault until then. */
static void settle_poll(nemesis *n, int force)
{
    int not_done = 0;
    if (n->settling < 0)
        return;
    int m = settle_check(n, &not_done);
    while (m < 0 && force && fs_now() < n->settle_until_ns + 10000000000LL) {
        dt_sleep_ms(50);
        m = settle_check(n, &not_done);
    }
    if (m < 0 && !force && fs_now() < n->settle_until_ns)
        return;
    const nem_event *e = &n->events[n->settling];
    if (n->cfg->cluster)
        log_nem(n, e->kind, EVF_END | EVF_DATALOSS | EVF_MOVES | (m < 0 ? EVF_FAILED : 0), 0, -1,
                "cluster %s",
                m < 0      ? "not settled"
                : not_done ? "settled, not failed over"
                           : "settled");
    else
        log_nem(n, e->kind, EVF_END | EVF_DATALOSS | EVF_MOVES | (m < 0 ? EVF_FAILED : 0), 0, -1,
                "settled: master node %d%s", m, m < 0 ? " (not settled)" : "");
    if (m < 0 && n->cfg->cluster)
        cl_tell_state(n);
    n->settling = -1;
}

static void settle_from(nemesis *n, int event, int want)
{
    n->settling = event;
    n->settle_want = want;
    n->settle_until_ns = fs_now() + 20000000000LL;
}

/* Starts data node i again in the role the sentinels give it: the master
 * they name, or a replica of it. A node's role is in its command line here
 * (node 0 a master, node 1 a replica of node 0); a real one's is in its
 * config file, which the sentinels rewrite on a failover, so a node killed
 * after a failover comes back a replica of the new master. Without this, a
 * killed master node 1 came back a replica of its own replica and the
 * group never settled. */
static void start_node(nemesis *n, int i)
{
    dt_server *node = dt_sentinel_node(n->server, i);
    if (node->pid > 0)
        return;
    dt_server_start_again(node, 0);
    int named = dt_sentinel_master(n->server);
    redisReply *r = NULL;
    if (named == i)
        r = dt__redis_ask(node->port, NULL, 1000, "REPLICAOF NO ONE");
    else if (named == 1 - i)
        r = dt__redis_ask(node->port, NULL, 1000, "REPLICAOF 127.0.0.1 %d",
                          dt_sentinel_node(n->server, named)->port);
    if (r != NULL)
        freeReplyObject(r);
}

/* A server fault of the master (kill, pause) or a failover. Each loses
 * what the replica had not received (asynchronous replication), or all of
 * it (a master killed and back before the sentinels fail over comes back
 * empty, and its replica follows it): a data loss, until the group has
 * settled. Clients may be served meanwhile by the new master (EVF_MOVES). */
static void run_master_action(nemesis *n, const nem_action *a, const nem_event *e, int *failed)
{
    int flags = EVF_DATALOSS | EVF_MOVES;
    if (!a->end) {
        int m = n->settling >= 0 ? -1 : dt_sentinel_master(n->server);
        n->event_node[a->event] = -1;
        if (m < 0) {
            log_nem(n, e->kind, EVF_START | EVF_END | EVF_FAILED, 0, -1, "%s: %s",
                    nem_kind_name(e->kind),
                    n->settling >= 0 ? "the last one not settled" : "no master named");
            *failed = 1;
            return;
        }
        dt_server *node = dt_sentinel_node(n->server, m);
        if (e->kind == NEM_KILL_SERVER) {
            dt_sentinel_node_kill(n->server, m);
            log_nem(n, e->kind, EVF_START | flags, 0, -1, "kill-server master node %d", m);
        } else if (e->kind == NEM_PAUSE_SERVER) {
            dt_server_pause(node);
            log_nem(n, e->kind, EVF_START | flags, 0, -1, "pause-server master node %d", m);
        } else {
            redisReply *r = dt__redis_ask(dt_sentinel_sentinel(n->server, 0)->port, NULL, 1000,
                                          "SENTINEL FAILOVER %s", DT_SENTINEL_MASTER);
            int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
            log_nem(n, e->kind, EVF_START | (ok ? flags : EVF_END | EVF_FAILED), 0, -1,
                    "failover from node %d%s%.20s", m, ok ? "" : ": ",
                    ok          ? ""
                    : r != NULL ? r->str
                                : "no answer");
            if (r != NULL)
                freeReplyObject(r);
            *failed = !ok;
            if (ok) /* (a refused one changes nothing) */
                settle_from(n, a->event, 1 - m);
            return;
        }
        n->event_node[a->event] = m;
        return;
    }
    int m = n->event_node[a->event];
    if (m < 0)
        return; /* not started */
    if (e->kind == NEM_KILL_SERVER)
        start_node(n, m);
    else
        dt_server_resume(dt_sentinel_node(n->server, m));
    log_nem(n, e->kind, flags, 0, -1, "node %d back", m); /* (the window ends when settled) */
    settle_from(n, a->event, -1);
}

/* ---- the masters of a Redis Cluster (cfg->cluster)
 *
 * Six nodes (dt_cluster_node 0-5), three of them masters, each with a
 * replica; clients dial what the slot map names, so there is no proxy. A
 * server fault hits the master serving the slot of one of the run's locks
 * (the event's arg) when it starts: a kill -9 (started again after the
 * duration: the cluster has failed it over by then and it comes back as a
 * replica of the promoted one, or, before that, with its slots and no
 * data or an old RDB, and its replica follows it), a pause (a long one
 * ends in a failover, and the old master, resumed, serves what its
 * clients sent until it hears it was deposed), CLUSTER FAILOVER on its
 * replica (a manual failover: the master stops its clients until the
 * replica has caught up, so nothing acknowledged is lost), and the lock's
 * slot moved to another master while it is held and waited for
 * (resharding, as test_redis_cluster's migrate_slot does it: SETSLOT
 * IMPORTING and MIGRATING, MIGRATE of each key, CL_KEY_GAP_MS apart,
 * SETSLOT NODE on every master). A kill or a pause loses what the replica
 * had not received, or all: a data loss of the locks that master served
 * then (one start record per lock, so the others' overlaps stay
 * unexcused), until the cluster has settled again. */

#define CL_NODES      6
#define CL_KEY_GAP_MS 20 /* between two keys of a migration */

static dt_server *cl_node(nemesis *n, int i)
{
    return dt_cluster_node(n->server, i);
}

/* Node i's role as it says (ROLE): 1 master, 0 a replica whose link to
 * its master is up (*master_port: that master's port), -1 neither (down,
 * paused, syncing). */
static int cl_role(nemesis *n, int i, int *master_port)
{
    const dt_server *node = cl_node(n, i);
    int role = -1;
    *master_port = 0;
    if (node->pid <= 0 || node->paused)
        return -1;
    redisReply *r = dt__redis_ask(node->port, NULL, 500, "ROLE");
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        if (strcmp(r->element[0]->str, "master") == 0)
            role = 1;
        else if (strcmp(r->element[0]->str, "slave") == 0 && r->elements >= 4 &&
                 r->element[2]->type == REDIS_REPLY_INTEGER &&
                 r->element[3]->type == REDIS_REPLY_STRING &&
                 strcmp(r->element[3]->str, "connected") == 0) {
            *master_port = (int) r->element[2]->integer;
            role = 0;
        }
    }
    if (r != NULL)
        freeReplyObject(r);
    return role;
}

/* Whether node i says cluster_state:ok and knows every node. */
static int cl_state_ok(nemesis *n, int i)
{
    redisReply *r = dt__redis_ask(cl_node(n, i)->port, NULL, 500, "CLUSTER INFO");
    int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:ok\r\n") != NULL &&
             strstr(r->str, "cluster_known_nodes:6\r\n") != NULL;
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

/* Settled: every node up, saying cluster_state:ok; three masters, every
 * other node a replica linked to its master; and node `want` a master
 * (-1: any). Until then a deposed master may still take writes that will
 * be lost. Returns want (0 for any) when settled, else -1, as
 * settled_now(). */
static int cl_settled(nemesis *n, int want)
{
    int masters = 0, port;
    for (int i = 0; i < CL_NODES; i++) {
        if (cl_node(n, i)->pid <= 0 || cl_node(n, i)->paused)
            return -1;
    }
    for (int i = 0; i < CL_NODES; i++) {
        int role = cl_role(n, i, &port);
        if (role < 0 || (i == want && role != 1) || !cl_state_ok(n, i))
            return -1;
        masters += role;
    }
    return masters == 3 ? (want >= 0 ? want : 0) : -1;
}

/* What each node says, on stderr: why the cluster has not settled. */
static void cl_tell_state(nemesis *n)
{
    for (int i = 0; i < CL_NODES; i++) {
        const dt_server *node = cl_node(n, i);
        int port, role = cl_role(n, i, &port);
        char what[48];
        if (role == 0)
            snprintf(what, sizeof what, "replica of port %d", port);
        else
            snprintf(what, sizeof what, "%s", role == 1 ? "master" : "no role");
        fprintf(stderr, "fault: cluster node %d (port %d)%s%s: %s, cluster_state %s\n", i,
                node->port, node->pid <= 0 ? " down" : "", node->paused ? " paused" : "", what,
                cl_state_ok(n, i) ? "ok" : "not ok");
    }
}

/* The slot of lock `name`'s keys (its hash tag), -1 if unknown. */
static int cl_slot(nemesis *n, const char *name)
{
    redisReply *r = dt__redis_ask(cl_node(n, 0)->port, NULL, 500, "CLUSTER KEYSLOT {%s}", name);
    int slot = r != NULL && r->type == REDIS_REPLY_INTEGER ? (int) r->integer : -1;
    if (r != NULL)
        freeReplyObject(r);
    return slot;
}

/* The node serving lock `name`'s slot now, -1 if none or unknown. */
static int cl_master_of(nemesis *n, const char *name)
{
    int slot = cl_slot(n, name);
    return slot < 0 ? -1 : dt_cluster_master_of(n->server, slot);
}

/* The replica linked to master m, -1 if none. */
static int cl_replica_of(nemesis *n, int m)
{
    int port;
    for (int i = 0; i < CL_NODES; i++) {
        if (i != m && cl_role(n, i, &port) == 0 && port == cl_node(n, m)->port)
            return i;
    }
    return -1;
}

/* kill -9 node i alone: node 0 is the group's own dt_server, whose kill
 * would stop all six (as dt_sentinel_node_kill does for Sentinel). */
static void cl_kill(nemesis *n, int i)
{
    dt_server *node = cl_node(n, i);
    void *group = node->group;
    node->group = NULL;
    dt_server_kill(node);
    node->group = group;
}

/* Starts killed node i again, keeping its nodes.conf (its place in the
 * cluster) but not the RDB a full sync wrote when it was a replica: a node
 * without persistence comes back empty. With that old RDB, a master killed
 * before its failover came back holding keys of a slot it no longer served
 * (Redis sets such a slot importing), and in the 600 s run of seed 21 it
 * then said cluster_state:fail to the end (docs/faults.md). */
static void cl_start(nemesis *n, int i)
{
    dt__redis_wipe_files(cl_node(n, i));
    dt_server_start_again(cl_node(n, i), 0);
}

/* Logs the start of a fault of master m: one record for each lock whose
 * slot m serves, with that lock's data loss (none when it loses none), or
 * one for the whole store if m serves none of them. */
static void cl_log_start(nemesis *n, const nem_event *e, int m, int loses, const char *what)
{
    int logged = 0;
    for (int i = 0; i < n->shm->nlocks && loses; i++) {
        if (cl_master_of(n, n->shm->locks[i].name) != m)
            continue;
        n->lost_lock = i;
        log_nem(n, e->kind, EVF_START | EVF_DATALOSS | EVF_MOVES, 0, -1, "%s node %d (%s)", what, m,
                n->shm->locks[i].name);
        logged = 1;
    }
    n->lost_lock = -1;
    if (!logged)
        log_nem(n, e->kind, EVF_START | EVF_MOVES, 0, -1, "%s node %d (master of %s)", what, m,
                e->arg);
}

static int cl_node_id(nemesis *n, int i, char *id, size_t len)
{
    redisReply *r = dt__redis_ask(cl_node(n, i)->port, NULL, 1000, "CLUSTER MYID");
    int ok = r != NULL && r->type == REDIS_REPLY_STRING;
    if (ok)
        snprintf(id, len, "%s", r->str);
    if (r != NULL)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/* One command of the migration; 0 if it succeeded, else -1 with why. */
static int cl_must(nemesis *n, int i, char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int cl_must(nemesis *n, int i, char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = dt__redis_vask(cl_node(n, i)->port, NULL, 6000, fmt, ap);
    va_end(ap);
    int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    if (!ok)
        snprintf(why, len, "node %d: %.60s", i, r != NULL ? r->str : "no answer");
    if (r != NULL)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Moves slot from master `from` to master `to`, key by key, as an
 * operator's resharding does. A key the target has already (a script sent
 * there by ASK, for a key the source lacked, wrote another key of the
 * lock that the source still had) is replaced by the source's, as
 * `redis-cli --cluster reshard --cluster-replace` does (without it the
 * resharding stops there): replaced gets its name. 0, or -1 with why:
 * the slot may then be left migrating. */
static int cl_migrate(nemesis *n, int slot, int from, int to, char *replaced, size_t rlen,
                      char *why, size_t len)
{
    char from_id[48], to_id[48];
    replaced[0] = '\0';
    if (cl_node_id(n, from, from_id, sizeof from_id) != 0 ||
        cl_node_id(n, to, to_id, sizeof to_id) != 0) {
        snprintf(why, len, "no node id");
        return -1;
    }
    if (cl_must(n, to, why, len, "CLUSTER SETSLOT %d IMPORTING %s", slot, from_id) != 0 ||
        cl_must(n, from, why, len, "CLUSTER SETSLOT %d MIGRATING %s", slot, to_id) != 0)
        return -1;
    for (;;) {
        redisReply *keys =
            dt__redis_ask(cl_node(n, from)->port, NULL, 1000, "CLUSTER GETKEYSINSLOT %d 100", slot);
        if (keys == NULL || keys->type != REDIS_REPLY_ARRAY) {
            snprintf(why, len, "GETKEYSINSLOT: %.60s", keys != NULL ? keys->str : "no answer");
            if (keys != NULL)
                freeReplyObject(keys);
            return -1;
        }
        size_t nkeys = keys->elements;
        int rc = 0;
        for (size_t k = 0; k < nkeys && rc == 0; k++) {
            const char *key = keys->element[k]->str;
            /* the keys of a slot that holds more than one lock's take a
             * while to move: a lock's stay split between the two nodes
             * for some time, not for a few microseconds */
            if (k > 0)
                dt_sleep_ms(CL_KEY_GAP_MS);
            rc = cl_must(n, from, why, len, "MIGRATE 127.0.0.1 %d %s 0 5000", cl_node(n, to)->port,
                         key);
            if (rc != 0 && strstr(why, "BUSYKEY") != NULL) {
                snprintf(replaced, rlen, "%s", key);
                rc = cl_must(n, from, why, len, "MIGRATE 127.0.0.1 %d %s 0 5000 REPLACE",
                             cl_node(n, to)->port, key);
            }
        }
        freeReplyObject(keys);
        if (rc != 0)
            return -1;
        if (nkeys == 0)
            break;
    }
    /* the target first, then the source, then the others (Redis's order) */
    if (cl_must(n, to, why, len, "CLUSTER SETSLOT %d NODE %s", slot, to_id) != 0 ||
        cl_must(n, from, why, len, "CLUSTER SETSLOT %d NODE %s", slot, to_id) != 0)
        return -1;
    for (int i = 0; i < CL_NODES; i++) {
        int port;
        if (i != from && i != to && cl_role(n, i, &port) == 1 &&
            cl_must(n, i, why, len, "CLUSTER SETSLOT %d NODE %s", slot, to_id) != 0)
            return -1;
    }
    return 0;
}

/* A lock's slot moves to another master, chosen at run time. Its window
 * opens before the first command and closes once every master was told
 * (no data loss: MIGRATE moves each key whole). */
static void cl_run_migrate(nemesis *n, const nem_event *e, int m, int *failed)
{
    int others[CL_NODES], nothers = 0, port;
    char why[96] = "", replaced[128];
    for (int i = 0; i < CL_NODES; i++) {
        if (i != m && cl_role(n, i, &port) == 1)
            others[nothers++] = i;
    }
    int slot = cl_slot(n, e->arg);
    if (nothers == 0 || slot < 0) {
        log_nem(n, e->kind, EVF_START | EVF_END | EVF_FAILED, 0, -1, "migrate %s: %s", e->arg,
                nothers == 0 ? "no other master" : "no slot");
        *failed = 1;
        return;
    }
    int to = others[rnd(&n->rng) % (uint64_t) nothers];
    /* (whether it moves while held and waited for: the actors on it now) */
    int holding = 0, waiting = 0, count = atomic_load(&n->shm->next_actor);
    for (int i = 0; i < count && i < MAX_ACTORS; i++) {
        actor_slot *act = &n->shm->actors[i];
        if (!atomic_load(&act->live) || act->lock < 0 || act->lock >= n->shm->nlocks ||
            strcmp(n->shm->locks[act->lock].name, e->arg) != 0)
            continue;
        holding += atomic_load(&act->state) == AS_HOLDING;
        waiting += atomic_load(&act->state) == AS_WAITING;
    }
    log_nem(n, e->kind, EVF_START | EVF_MOVES, 0, -1, "migrate %d (%s) %d>%d %dh %dw", slot, e->arg,
            m, to, holding, waiting);
    *failed = cl_migrate(n, slot, m, to, replaced, sizeof replaced, why, sizeof why) != 0;
    if (*failed)
        fprintf(stderr, "fault: migrate slot %d (%s) from node %d to %d failed: %s\n", slot, e->arg,
                m, to, why);
    if (replaced[0] != '\0') {
        /* The target had made that key itself: a script ran there while
         * the slot was migrating, over part of the lock. dlock waits out
         * an ASK to a script (src/backend/redis/calls.c), so this is a
         * bug, not a fault to excuse: no data loss is logged, and what the
         * target had granted shows as an overlap. */
        fprintf(stderr,
                "fault: migrate slot %d (%s) from node %d to %d: key %s was on both nodes "
                "(the source's replaced the target's): a script ran on the importing node\n",
                slot, e->arg, m, to, replaced);
    }
    if (!*failed)
        why[0] = '\0'; /* (a BUSYKEY that REPLACE overcame) */
    log_nem(n, e->kind, EVF_END | EVF_MOVES | (*failed ? EVF_FAILED : 0), 0, -1,
            "slot %d on node %d%s%.40s", slot, *failed ? m : to, *failed ? ": " : "", why);
}

/* A server fault of the master of e->arg's slot, a failover of it, or
 * its slot moved; the ends of a kill and a pause. */
static void run_cluster_action(nemesis *n, const nem_action *a, const nem_event *e, int *failed)
{
    if (!a->end) {
        int m = n->settling < 0 && cl_settled(n, -1) >= 0 ? cl_master_of(n, e->arg) : -1;
        n->event_node[a->event] = -1;
        if (m < 0) {
            log_nem(n, e->kind, EVF_START | EVF_END | EVF_FAILED, 0, -1, "%s: %s",
                    nem_kind_name(e->kind), "the cluster has not settled");
            *failed = 1;
            return;
        }
        if (e->kind == NEM_KILL_SERVER) {
            cl_log_start(n, e, m, 1, "kill-server");
            cl_kill(n, m);
        } else if (e->kind == NEM_PAUSE_SERVER) {
            cl_log_start(n, e, m, 1, "pause-server");
            dt_server_pause(cl_node(n, m));
        } else if (e->kind == NEM_FAILOVER) {
            int r = cl_replica_of(n, m);
            char why[64] = "no replica";
            int ok = r >= 0 && cl_must(n, r, why, sizeof why, "CLUSTER FAILOVER") == 0;
            if (ok)
                cl_log_start(n, e, m, 0, "failover");
            else
                log_nem(n, e->kind, EVF_START | EVF_END | EVF_FAILED, 0, -1,
                        "failover of node %d: %.40s", m, why);
            *failed = !ok;
            if (ok)
                settle_from(n, a->event, r);
            return;
        } else {
            cl_run_migrate(n, e, m, failed);
            return;
        }
        n->event_node[a->event] = m;
        return;
    }
    int m = n->event_node[a->event];
    if (m < 0)
        return; /* not started */
    if (e->kind == NEM_KILL_SERVER) {
        if (cl_node(n, m)->pid <= 0)
            cl_start(n, m);
    } else {
        dt_server_resume(cl_node(n, m));
    }
    log_nem(n, e->kind, EVF_MOVES, 0, -1, "node %d back", m); /* (the window ends when settled) */
    settle_from(n, a->event, -1);
}

static void run_action(nemesis *n, const nem_action *a)
{
    nem_event *e = &n->events[a->event];
    char what[96];
    static const char *const targets[] = {"any", "holder", "waiter"};
    int actor = -1, failed = 0;
    pid_t pid;

    nem_format(e, what, sizeof what);
    n->cur_member = e->member;
    if (e->member >= 0 && e->kind != NEM_KILL_CLIENT && e->kind != NEM_PAUSE_CLIENT) {
        run_member_action(n, a, e, &failed);
        goto done;
    }
    if (n->cfg->cluster && (e->kind == NEM_KILL_SERVER || e->kind == NEM_PAUSE_SERVER ||
                            e->kind == NEM_FAILOVER || e->kind == NEM_MIGRATE)) {
        run_cluster_action(n, a, e, &failed);
        goto done;
    }
    if (n->cfg->master_moves &&
        (e->kind == NEM_KILL_SERVER || e->kind == NEM_PAUSE_SERVER || e->kind == NEM_FAILOVER)) {
        run_master_action(n, a, e, &failed);
        goto done;
    }
    switch (e->kind) {
    case NEM_KILL_CLIENT:
        pid = pick_client(n, e->target, &actor);
        if (pid <= 0) {
            log_nem(n, e->kind, EVF_START | EVF_END | EVF_FAILED, 0, -1, "kill-client %s: none",
                    targets[e->target]);
            failed = 1;
            break;
        }
        kill(pid, SIGKILL);
        log_nem(n, e->kind, EVF_START | EVF_END, pid, -1, "kill-client %s a%d pid %d",
                targets[e->target], actor, (int) pid);
        break;
    case NEM_PAUSE_CLIENT:
        if (!a->end) {
            pid = pick_client(n, e->target, &actor);
            if (pid <= 0 || n->npaused == 64) {
                log_nem(n, e->kind, EVF_START | EVF_FAILED, 0, -1, "pause-client %s: none",
                        targets[e->target]);
                failed = 1;
                break;
            }
            kill(pid, SIGSTOP);
            dt_wait_stopped(pid);
            n->paused[n->npaused++] = pid;
            n->event_pid[a->event] = pid;
            log_nem(n, e->kind, EVF_START, pid, -1, "pause-client %s a%d pid %d",
                    targets[e->target], actor, (int) pid);
        } else if (n->event_pid[a->event] > 0) {
            pid = n->event_pid[a->event];
            if (is_paused(n, pid)) {
                kill(pid, SIGCONT);
                nem_forget_pid(n, pid);
            }
            log_nem(n, e->kind, EVF_END, pid, -1, "resume-client pid %d", (int) pid);
        }
        break;
    case NEM_KILL_SERVER: {
        int lost = !dt_server_keeps_data(n->server, DT_KILL | (unsigned) e->target);
        if (!a->end) {
            dt_server_kill(n->server);
            log_nem(n, e->kind, EVF_START | (lost ? EVF_DATALOSS : 0), 0, -1, "kill-server%s",
                    lost ? " (data lost)" : "");
        } else {
            start_server(n, (unsigned) e->target);
            log_nem(n, e->kind, EVF_END | (lost ? EVF_DATALOSS : 0), n->server->pid, -1,
                    "server started%s", (e->target & DT_WIPE) ? " (data wiped)" : "");
        }
        break;
    }
    case NEM_RESTART_SERVER: {
        int lost = !dt_server_keeps_data(n->server, (unsigned) e->target);
        log_nem(n, e->kind, EVF_START | (lost ? EVF_DATALOSS : 0), 0, -1, "restart-server%s",
                (e->target & DT_WIPE) ? " (data wiped)" : "");
        if (n->server->pid > 0)
            dt_server_restart(n->server, (unsigned) e->target);
        else
            start_server(n, (unsigned) e->target);
        log_nem(n, e->kind, EVF_END | (lost ? EVF_DATALOSS : 0), n->server->pid, -1,
                "server restarted");
        break;
    }
    case NEM_PAUSE_SERVER:
        if (!a->end) {
            dt_server_pause(n->server);
            log_nem(n, e->kind, EVF_START, 0, -1, "pause-server");
        } else {
            dt_server_resume(n->server);
            log_nem(n, e->kind, EVF_END, 0, -1, "resume-server");
        }
        break;
    case NEM_PARTITION: /* (a group: every member's proxy) */
        if (!a->end) {
            for (int m = 0; m < n->cfg->members; m++)
                dt_proxy_set(&n->proxies[m], e->target, (dt_proxy_mode) e->mode);
            log_nem(n, e->kind, EVF_START, 0, e->target, "%s link %d",
                    dt_proxy_mode_name((dt_proxy_mode) e->mode), e->target);
        } else {
            for (int m = 0; m < n->cfg->members; m++)
                dt_proxy_set(&n->proxies[m], e->target, DT_PASS);
            log_nem(n, e->kind, EVF_END, 0, e->target, "heal link %d", e->target);
        }
        break;
    case NEM_OP:
        if (!a->end) {
            int64_t t0 = fs_now();
            int loses = dt_server_op_loses_data(n->server, e->op);
            int up = n->server->pid > 0 || !dt_server_has_process(n->server);
            int rc = up && !n->server->paused
                         ? dt_server_op(n->server, e->op, e->arg[0] ? e->arg : NULL)
                         : -1;
            int flags = (rc != 0 ? EVF_FAILED : 0) | (loses ? EVF_DATALOSS : 0);
            failed = rc != 0;
            /* which lock lost its data: all, or the one named */
            n->lost_lock = -1;
            for (int i = 0; loses == 2 && i < n->shm->nlocks; i++) {
                if (strcmp(n->shm->locks[i].name, e->arg) == 0)
                    n->lost_lock = i;
            }
            /* the op's own time (an eviction takes a while) is part of it:
             * its window opens before the op and closes with "done" */
            fev *ev = fs_log(n->shm, EV_NEM, n->lost_lock, -1);
            ev->t = t0;
            ev->kind = e->kind;
            ev->flags = EVF_START | flags;
            snprintf(ev->text, sizeof ev->text, "op %.20s %.20s", e->op, e->arg);
            fs_commit(ev);
            if (e->dur_ms == 0)
                log_nem(n, e->kind, EVF_END | flags, 0, -1, "op %s done", e->op);
            n->lost_lock = -1;
        } else {
            log_nem(n, e->kind, EVF_END, 0, -1, "op %s over", e->op);
        }
        break;
    default:
        break;
    }
done:
    n->cur_member = -1;
    if (!a->end && !failed)
        n->event_ok[a->event] = 1;
    if (n->cfg->verbose)
        printf("nemesis %s%s%s\n", what, a->end ? " (end)" : "", failed ? " (failed)" : "");
}

int64_t nem_step(nemesis *n, int64_t now_ms)
{
    if (n->cfg->master_moves)
        settle_poll(n, 0);
    while (n->next_action < n->nactions && n->actions[n->next_action].at_ms <= now_ms)
        run_action(n, &n->actions[n->next_action++]);
    int64_t next = n->next_action < n->nactions ? n->actions[n->next_action].at_ms : -1;
    /* (a fault waiting for the group to settle is looked at again soon) */
    if (n->cfg->master_moves && n->settling >= 0 && (next < 0 || next > now_ms + 100))
        next = now_ms + 100;
    return next;
}

void nem_heal_all(nemesis *n)
{
    log_nem(n, NEM_HEAL_ALL, EVF_START, 0, -1, "heal-all");
    for (int i = 0; i < n->npaused; i++)
        kill(n->paused[i], SIGCONT);
    n->npaused = 0;
    for (int m = 0; m < n->cfg->members && !n->cfg->master_moves; m++)
        dt_proxy_set(&n->proxies[m], -1, DT_PASS);
    if (n->cfg->cluster) {
        settle_poll(n, 1);
        for (int i = 0; i < CL_NODES; i++) {
            dt_server_resume(cl_node(n, i));
            if (cl_node(n, i)->pid <= 0)
                cl_start(n, i);
        }
        int64_t until = fs_now() + 30000000000LL;
        while (cl_settled(n, -1) < 0 && fs_now() < until)
            dt_sleep_ms(50);
        if (cl_settled(n, -1) < 0) {
            log_nem(n, NEM_HEAL_ALL, EVF_FAILED, 0, -1, "the cluster did not settle");
            cl_tell_state(n);
        }
    } else if (n->cfg->master_moves) {
        settle_poll(n, 1);
        for (int i = 0; i < 2; i++) {
            dt_server *node = dt_sentinel_node(n->server, i);
            dt_server_resume(node);
            start_node(n, i);
        }
        settle_from(n, -1, -1);
        while (settled_now(n, -1) < 0 && fs_now() < n->settle_until_ns + 10000000000LL)
            dt_sleep_ms(50);
        n->settling = -1;
        if (settled_now(n, -1) < 0)
            log_nem(n, NEM_HEAL_ALL, EVF_FAILED, 0, -1, "the group did not settle");
    } else if (n->cfg->members > 1) {
        /* (a member that lost its data comes back late, as in the run) */
        for (int m = 0; m < n->cfg->members; m++) {
            dt_server_resume(member(n, m));
            start_member(n, m, 0);
        }
    } else {
        dt_server_resume(n->server);
        start_server(n, 0);
    }
    n->next_action = n->nactions;
    log_nem(n, NEM_HEAL_ALL, EVF_END, 0, -1, "all healed");
}
