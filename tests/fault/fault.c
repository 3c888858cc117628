/* SPDX-License-Identifier: MIT */
/* fault.c - the fault suite: many clients on every lock kind, a nemesis on
 * a seeded schedule, and a checker over the recorded history (Jepsen's
 * method, on one machine). See docs/faults.md.
 *
 *   fault [--store redis] [--seconds 30] [--seed N] ...   one run
 *   fault cmd ...                                          (what dlock run runs)
 *
 * A run: start the store's server (dt_server) and a fault proxy in front of
 * it; fork the monitor, the library workers and the `dlock run` loops; warm
 * up; inject the schedule's faults for --seconds; heal everything; go on
 * for --final seconds, where every waiter must be served; stop the clients;
 * check the store is left with no holder; judge the history. The program
 * knows the store only by its server kind and URL, and its faults only
 * through dt_server's calls and the kind's operations.
 *
 * The main process stays single-threaded and opens no dlock client before
 * its last fork: its children are forked from a process with one thread. */
#define _GNU_SOURCE
#include "fault.h"
#include "nemesis.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

const lock_def fault_locks[] = {
    {"mx0", LK_MUTEX, 1},          {"mx1", LK_MUTEX, 1},   {"rw0", LK_RW, 1},
    {"sem0", LK_SEM, SEM_PERMITS}, {"smp0", LK_SIMPLE, 1},
};
const int fault_nlocks = (int) (sizeof fault_locks / sizeof fault_locks[0]);

#define MAX_WORKERS 32

static const char usage[] =
    "usage: fault [options]        one fault run; exit 0 when no violation\n"
    "       fault dump SHM [aN|LOCK]...   a run's history (SHM: RUN_DIR/shm)\n"
    "       fault check SHM [-v]          judge a kept run's history again\n"
    "  --store KIND        server kind: redis (default), zookeeper, etcd, postgres,\n"
    "                      mariadb, sqlite, redlock (3 masters, faulted one at a time),\n"
    "                      sentinel (faults on the master, failovers; no proxy),\n"
    "                      cluster (faults on a lock's master, failovers, slots moved;\n"
    "                      no proxy)\n"
    "  --seconds N         faults are injected for N s (default 30)\n"
    "  --final N           then all is healed and clients go on N s (default from the lease)\n"
    "  --seed N            the schedule's seed (default: from the clock; printed)\n"
    "  --workers N         library client processes (default 4)\n"
    "  --threads N         actors (threads, one handle each) per process (default 4)\n"
    "  --runners N         `dlock run` loops (default 2)\n"
    "  --links N           fault proxy links; processes are spread over them (default 3)\n"
    "  --lease MS          lease of renewed locks, URL lease= (default 1500)\n"
    "  --waiter-lease MS   URL waiter_lease= (default 2000)\n"
    "  --timeout MS        command timeout, URL timeout= (default 1000)\n"
    "  --gap MS            mean time between faults (default 1200)\n"
    "  --slack MS          scheduling tolerance of the time checks (default 250)\n"
    "  --nemesis LIST      faults allowed, comma-separated (default all): kill-client,\n"
    "                      pause-client, kill-server, restart-server, pause-server,\n"
    "                      partition (= blackhole,drop,cut), failover (sentinel,\n"
    "                      cluster), migrate (cluster), or a store operation\n"
    "                      (redis: wipe, drop_lock, evict, pause_clients, sleep, persist,\n"
    "                      kill_clients); none: no faults\n"
    "  --kinds LIST        lock kinds: plain,fair,read,write,sem,multi,simple (default all)\n"
    "  --url-options OPTS  URL options for every client, e.g. notify=stream (default: the\n"
    "                      server kind's variants, spread over the processes)\n"
    "  --no-store-loss     holds that overlap after the store lost one (a failover's) are\n"
    "                      a violation (store-loss), not a loss to be told: for wait=N\n"
    "  --member-down MS    redlock: how long a member that lost its data stays down\n"
    "                      (default: the longest lease + the slack, as Redlock assumes;\n"
    "                      shorter breaks that on purpose)\n"
    "  --schedule          print the schedule and exit\n"
    "  --keep              keep the run's dir (kept anyway when a violation is found)\n"
    "  --verbose           every violation in full, nemesis actions as they happen\n";

static int parse_kinds(fault_cfg *cfg, const char *list)
{
    cfg->nkinds = 0;
    for (int k = 0; k < H_COUNT; k++) {
        const char *name = fs_hkind_name(k);
        const char *at = list == NULL ? name : strstr(list, name);
        size_t len = strlen(name);
        if (at != NULL && (at == list || list == NULL || at[-1] == ',') &&
            (at[len] == '\0' || at[len] == ','))
            cfg->kinds[cfg->nkinds++] = k;
    }
    return cfg->nkinds > 0 ? 0 : -1;
}

/* A client's URL: through proxy link `link` (-1: straight to the server),
 * with the run's options and the server kind's variant number `variant`
 * (-1: none), so clients of one run use the store in each way it offers. */
static void build_url(char *buf, size_t len, const dt_server *srv, int link, int variant,
                      const fault_cfg *cfg)
{
    char base[160];
    const char *v = variant >= 0 && !cfg->url_extra ? dt_server_url_variant(srv, variant) : "";
    if (link < 0 || cfg->master_moves) {
        /* straight to the server, or to every member of a group (Sentinel:
         * the sentinels, which name the master; Cluster: the first masters,
         * whose slot map names the others) */
        if (cfg->members > 1 || cfg->master_moves)
            snprintf(base, sizeof base, "%s", srv->url);
        else
            dt_server_url_at(srv, srv->port, base, sizeof base);
    } else if (cfg->members > 1) {
        /* the group's scheme, then that link of each member's proxy */
        const char *sep = strstr(srv->url, "://");
        size_t used = (size_t) snprintf(base, sizeof base, "%.*s://",
                                        sep != NULL ? (int) (sep - srv->url) : 0, srv->url);
        for (int m = 0; m < cfg->members && used < sizeof base; m++)
            used += (size_t) snprintf(base + used, sizeof base - used, "%s127.0.0.1:%d",
                                      m > 0 ? "," : "", cfg->proxy_ports[m][link]);
    } else {
        dt_server_url_at(srv, cfg->proxy_ports[0][link], base, sizeof base);
    }
    snprintf(buf, len, "%s?lease=%dms&waiter_lease=%dms&timeout=%dms%s%s%s%s", base, cfg->lease_ms,
             cfg->waiter_lease_ms, cfg->timeout_ms, cfg->url_extra ? "&" : "",
             cfg->url_extra ? cfg->url_extra : "", v[0] ? "&" : "", v);
}

static void set_phase(fshm *s, int phase)
{
    atomic_store(&s->phase, phase);
    fev *e = fs_log(s, EV_PHASE, -1, -1);
    e->kind = phase;
    fs_commit(e);
}

static void note_violation(fshm *s, int cls, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note_violation(fshm *s, int cls, const char *fmt, ...)
{
    va_list ap;
    fev *e = fs_log(s, EV_VIOL, -1, -1);
    e->kind = cls;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
    fs_commit(e);
}

/* ---------------------------------------------------------------- processes */

typedef struct proc {
    pid_t pid;
    int role; /* 0 library worker, 1 runner, 2 monitor */
    int idx;
    int64_t respawn_at; /* ns, 0: none pending */
} proc;

static fshm *shm;
static fault_cfg cfg;
static dt_server server;
static dt_proxy proxies[MAX_MEMBERS]; /* one in front of each member */
/* The server kind's operations the nemesis may run (a group's: its
 * members', those that lose no data), read while it runs (a group's
 * members are gone once it is stopped) */
static const char *server_ops[32];
static proc procs[2 * MAX_WORKERS + 1];
static int nprocs;

static pid_t spawn(int role, int idx)
{
    char url[256];
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 0;
    }
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* a worker that crashes leaves a core (where kernel.core_pattern says) */
    struct rlimit core;
    if (getrlimit(RLIMIT_CORE, &core) == 0 && core.rlim_cur != core.rlim_max) {
        core.rlim_cur = core.rlim_max;
        setrlimit(RLIMIT_CORE, &core);
    }
    if (role == 2)
        wl_monitor(shm, &cfg);
    /* library workers and runners take the variants in turn */
    build_url(url, sizeof url, &server, idx % cfg.links, role == 0 ? idx : idx + 1, &cfg);
    if (role == 0)
        wl_library_worker(shm, &cfg, idx, url);
    else
        wl_run_worker(shm, &cfg, idx, url);
    _exit(0);
}

/* Reaps ended workers, logs them, and starts a new one in place of each
 * the nemesis killed (load goes on). */
static void supervise(nemesis *nem, int respawn)
{
    int64_t now = fs_now();
    for (int i = 0; i < nprocs; i++) {
        proc *p = &procs[i];
        int status;
        if (p->pid > 0 && waitpid(p->pid, &status, WNOHANG) == p->pid) {
            fev *e = fs_log(shm, EV_EXIT, -1, -1);
            e->pid = p->pid;
            e->rc = status;
            fs_commit(e);
            if (nem != NULL)
                nem_forget_pid(nem, p->pid);
            p->pid = 0;
            p->respawn_at = respawn ? now + (int64_t) (200 + (now / 1000) % 1300) * 1000000 : 0;
        }
        if (p->pid == 0 && p->respawn_at > 0 && now >= p->respawn_at && respawn) {
            p->pid = spawn(p->role, p->idx);
            p->respawn_at = 0;
        }
    }
}

/* Sleeps until t (ns), supervising meanwhile. */
static void wait_until(nemesis *nem, int64_t t, int respawn)
{
    for (;;) {
        supervise(nem, respawn);
        int64_t left = t - fs_now();
        if (left <= 0)
            return;
        dt_sleep_ms(left > 20000000 ? 20 : (int) (left / 1000000) + 1);
    }
}

/* ---------------------------------------------------------------- capability probe */

/* Which kinds the store can do: a kind whose handle or try-acquire says
 * ENOTSUP is left out of the run (and named in the summary). Run in a
 * child: the main process opens no client. */
static int probe_kinds(const char *url, int *unsupported, unsigned *caps)
{
    int fds[2], status = 0;
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dlock_client *c = NULL;
        unsigned char res[H_COUNT + sizeof(unsigned)] = {0};
        if (dlock_client_open(url, &c) != DLOCK_OK) {
            fprintf(stderr, "fault: %s\n", dlock_errmsg());
            _exit(3);
        }
        {
            for (int k = 0; k < H_COUNT; k++) {
                dlock_lock *l = NULL;
                const char *names[] = {"probe-a", "probe-b"};
                static const unsigned flags[H_COUNT] = {0, DLOCK_FAIR, DLOCK_READ,  DLOCK_WRITE,
                                                        0, 0,          DLOCK_SIMPLE};
                int rc = k == H_SEM     ? dlock_semaphore_open(c, "probe-s", 2, 1, &l)
                         : k == H_MULTI ? dlock_multi_open(c, names, 2, 0, &l)
                                        : dlock_lock_open(c, "probe", flags[k], &l);
                if (rc == DLOCK_OK)
                    rc = dlock_try_acquire(l);
                if (rc == DLOCK_OK)
                    dlock_release(l);
                res[k] = rc == DLOCK_ENOTSUP;
                dlock_lock_free(l);
            }
            unsigned have = dlock_client_caps(c);
            memcpy(res + H_COUNT, &have, sizeof have);
            dlock_client_close(c);
        }
        if (write(fds[1], res, sizeof res) != (ssize_t) sizeof res)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    unsigned char res[H_COUNT + sizeof(unsigned)] = {0};
    if (read(fds[0], res, sizeof res) == (ssize_t) sizeof res) {
        for (int k = 0; k < H_COUNT; k++)
            unsupported[k] = res[k];
        memcpy(caps, res + H_COUNT, sizeof *caps);
    }
    close(fds[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- the end */

/* After the clients stopped, every lock must be free within a lease (a
 * killed holder's, a fixed one) and a waiter's place. */
static void check_left_free(void)
{
    static const unsigned flags[] = {[LK_MUTEX] = 0,
                                     [LK_RW] = DLOCK_READ,
                                     [LK_SEM] = DLOCK_SEMAPHORE,
                                     [LK_SIMPLE] = DLOCK_SIMPLE};
    dlock_client *c = NULL;
    if (dlock_client_open(cfg.direct_url, &c) != DLOCK_OK)
        return;
    int64_t bound_ms = 3LL * cfg.lease_ms / 2 + cfg.waiter_lease_ms + 2LL * cfg.timeout_ms + 1000;
    int64_t until = fs_now() + bound_ms * 1000000;
    for (int i = 0; i < shm->nlocks; i++) {
        dlock_status st;
        int rc;
        for (;;) {
            rc = dlock_query(c, shm->locks[i].name, flags[shm->locks[i].kind], &st);
            if (rc == DLOCK_ENOTSUP)
                break; /* a kind the store lacks: never used in the run */
            if (rc == DLOCK_OK && !st.held && st.shared == 0 && st.permits_used == 0 &&
                st.waiters == 0)
                break;
            if (fs_now() > until) {
                if (rc == DLOCK_OK) {
                    /* the history's text is short: the whole state goes to stderr */
                    fprintf(stderr,
                            "left held: %s owner '%s' lease %lld ms shared %u permits %u/%u "
                            "waiters %u\n",
                            shm->locks[i].name, st.owner, (long long) st.lease_ms, st.shared,
                            st.permits_used, st.permits, st.waiters);
                    note_violation(shm, V_LIVENESS,
                                   "%s still held %lld ms after all stopped (owner %.8s shared %u "
                                   "waiters %u)",
                                   shm->locks[i].name, (long long) bound_ms, st.owner, st.shared,
                                   st.waiters);
                } else
                    note_violation(shm, V_LIVENESS, "%s: query failed after the run: %s",
                                   shm->locks[i].name, dlock_strerror(rc));
                break;
            }
            dt_sleep_ms(50);
        }
    }
    dlock_client_close(c);
}

static void stop_clients(int64_t bound_ms)
{
    /* runners end a wait without budget with a signal, as a user would */
    for (int i = 0; i < nprocs; i++) {
        if (procs[i].pid > 0 && procs[i].role == 1)
            kill(procs[i].pid, SIGTERM);
    }
    int64_t until = fs_now() + bound_ms * 1000000;
    for (;;) {
        int live = 0;
        supervise(NULL, 0);
        for (int i = 0; i < nprocs; i++)
            live += procs[i].pid > 0;
        if (live == 0)
            return;
        if (fs_now() > until) {
            for (int i = 0; i < nprocs; i++) {
                if (procs[i].pid <= 0)
                    continue;
                note_violation(shm, V_CRASH, "%s %d (pid %d) did not stop within %lld ms",
                               procs[i].role == 0   ? "worker"
                               : procs[i].role == 1 ? "runner"
                                                    : "monitor",
                               procs[i].idx, (int) procs[i].pid, (long long) bound_ms);
                kill(procs[i].pid, SIGKILL);
            }
            bound_ms = 0;
            until = fs_now() + 5000000000LL;
        }
        dt_sleep_ms(20);
    }
}

/* One JSON line: the run, what was done, the faults injected (not only
 * scheduled), the violations by property. */
static void print_json(const check_totals *t, const nemesis *nem, const int *unsupported,
                       int violations, double elapsed)
{
    int counts[NEM_COUNT] = {0}, modes[4] = {0};
    for (int i = 0; i < nem->nevents; i++) {
        if (!nem->event_ok[i])
            continue;
        counts[nem->events[i].kind]++;
        if (nem->events[i].kind == NEM_PARTITION)
            modes[nem->events[i].mode]++;
    }
    printf("{\"store\":\"%s\",\"members\":%d,\"seed\":%llu,\"seconds\":%d,\"elapsed_s\":%.1f,"
           "\"workers\":%d,"
           "\"threads\":%d,\"runners\":%d,\"lease_ms\":%d,\"kinds\":[",
           cfg.store, cfg.members, (unsigned long long) cfg.seed, cfg.seconds, elapsed, cfg.workers,
           cfg.threads, cfg.runners, cfg.lease_ms);
    for (int k = 0; k < cfg.nkinds; k++)
        printf("%s\"%s\"", k ? "," : "", fs_hkind_name(cfg.kinds[k]));
    printf("],\"unsupported\":[");
    for (int k = 0, first = 1; k < H_COUNT; k++) {
        if (unsupported[k]) {
            printf("%s\"%s\"", first ? "" : ",", fs_hkind_name(k));
            first = 0;
        }
    }
    printf("],\"history_records\":%ld,\"ops\":{\"acquire\":%ld,\"acquired\":%ld,\"release\":%ld,"
           "\"dlock_run\":%ld,"
           "\"cancel\":%ld,\"access\":%ld,\"accepted\":%ld,\"refused_stale\":%ld,"
           "\"loss_reports\":%ld,\"server_snapshots\":%ld,\"fair_queued\":%ld,"
           "\"fair_pairs\":%ld,\"store_losses\":%ld},",
           t->events, t->acquires, t->acquired, t->releases, t->runs, t->cancels, t->accesses,
           t->accepted, t->refused, t->lost_reports, t->snaps, t->fair_queued, t->fair_pairs,
           t->store_losses);
    printf("\"faults\":{\"kill-client\":%d,\"pause-client\":%d,\"kill-server\":%d,"
           "\"restart-server\":%d,\"pause-server\":%d,\"blackhole\":%d,\"drop\":%d,\"cut\":%d",
           counts[NEM_KILL_CLIENT], counts[NEM_PAUSE_CLIENT], counts[NEM_KILL_SERVER],
           counts[NEM_RESTART_SERVER], counts[NEM_PAUSE_SERVER], modes[DT_BLACKHOLE],
           modes[DT_DROP], modes[DT_CUT]);
    if (cfg.master_moves)
        printf(",\"failover\":%d", counts[NEM_FAILOVER]);
    if (cfg.cluster)
        printf(",\"migrate\":%d", counts[NEM_MIGRATE]);
    /* (a group's operations are its members') */
    const char *const *ops = server_ops;
    for (int k = 0; ops[k] != NULL; k++) {
        int n = 0;
        for (int i = 0; i < nem->nevents; i++)
            n += nem->event_ok[i] && nem->events[i].kind == NEM_OP &&
                 strcmp(nem->events[i].op, ops[k]) == 0;
        printf(",\"%s\":%d", ops[k], n);
    }
    printf("},\"violations\":{");
    for (int v = 0; v < V_COUNT; v++)
        printf("%s\"%s\":%ld", v ? "," : "", check_class_name(v), t->violations[v]);
    printf("},\"result\":\"%s\"}\n", violations == 0 ? "pass" : "fail");
}

/* ---------------------------------------------------------------- main */

static int by_time(const void *a, const void *b)
{
    const fev *x = *(fev *const *) a, *y = *(fev *const *) b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* `fault dump SHM [ACTOR|LOCK]...`: a run's history, readable, in time
 * order; with arguments only the events of those actors (a12) or locks
 * (mx0), and the nemesis's. */
static int dump(int argc, char **argv)
{
    char line[400];
    if (argc < 3) {
        fprintf(stderr, "usage: fault dump SHM [aN | LOCK]...\n");
        return 64;
    }
    fshm *s = fs_attach(argv[2]);
    if (s == NULL)
        return 70;
    uint64_t n = atomic_load(&s->next);
    if (n > s->cap)
        n = s->cap;
    fev **ev = malloc(sizeof *ev * (n + 1));
    size_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (atomic_load(&s->ev[i].ready))
            ev[m++] = &s->ev[i];
    }
    qsort(ev, m, sizeof *ev, by_time);
    for (size_t i = 0; i < m; i++) {
        int show = argc == 3 || ev[i]->type == EV_NEM || ev[i]->type == EV_PHASE;
        for (int a = 3; a < argc && !show; a++) {
            if (argv[a][0] == 'a' && argv[a][1] >= '0' && argv[a][1] <= '9')
                show = ev[i]->actor == atoi(argv[a] + 1);
            else
                show = ev[i]->lock < s->nlocks && strcmp(s->locks[ev[i]->lock].name, argv[a]) == 0;
        }
        if (!show)
            continue;
        fs_format_event(s, ev[i], line, sizeof line);
        printf("%s\n", line);
    }
    free(ev);
    return 0;
}

/* Keeps in the history what the checker judges it by (fshm.judge). */
static void judge_keep(fshm *s, const fault_cfg *c)
{
    snprintf(s->judge.store, sizeof s->judge.store, "%s", c->store);
    s->judge.lease_ms = c->lease_ms;
    s->judge.waiter_lease_ms = c->waiter_lease_ms;
    s->judge.timeout_ms = c->timeout_ms;
    s->judge.slack_ms = c->slack_ms;
    s->judge.fences_from_data = c->fences_from_data;
    s->judge.caps = c->caps;
    s->judge.lease_unit_ms = c->lease_unit_ms;
    s->judge.expiry_lag_ms = c->expiry_lag_ms;
    s->judge.no_store_loss = c->no_store_loss;
}

/* `fault check SHM [-v]`: judges a kept run's history again, by the
 * settings it ran with, with this build's checker (a checker fixed since
 * the run, or one told to show every violation). Exits 0 when it finds no
 * violation, 1 when it does, 70 when the history cannot be read. */
static int check_again(int argc, char **argv)
{
    if (argc < 3 || (argc > 3 && strcmp(argv[3], "-v") != 0)) {
        fprintf(stderr, "usage: fault check SHM [-v]\n");
        return 64;
    }
    fshm *s = fs_attach(argv[2]);
    if (s == NULL)
        return 70;
    if (s->judge.lease_ms <= 0) {
        fprintf(stderr,
                "%s: this history keeps no settings to judge it by (a run of an older "
                "fault, or one that ended before its clients started)\n",
                argv[2]);
        return 70;
    }
    fault_cfg c = {0};
    c.store = s->judge.store;
    c.lease_ms = s->judge.lease_ms;
    c.waiter_lease_ms = s->judge.waiter_lease_ms;
    c.timeout_ms = s->judge.timeout_ms;
    c.slack_ms = s->judge.slack_ms;
    c.fences_from_data = s->judge.fences_from_data;
    c.pause_stops_store = strcmp(c.store, "sqlite") == 0;
    c.caps = s->judge.caps;
    c.lease_unit_ms = s->judge.lease_unit_ms;
    c.expiry_lag_ms = s->judge.expiry_lag_ms;
    c.no_store_loss = s->judge.no_store_loss;
    c.verbose = argc > 3;
    printf("fault check: %s, a run on %s (lease %d ms, timeout %d ms)\n", argv[2], c.store,
           c.lease_ms, c.timeout_ms);
    check_totals totals;
    int violations = check_run(s, &c, stdout, &totals);
    printf("checked %ld history records: %d violation%s\n", totals.events, violations,
           violations == 1 ? "" : "s");
    return violations > 0 ? 1 : 0;
}

static int self_path(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"store", required_argument, NULL, 's'},
        {"seconds", required_argument, NULL, 'S'},
        {"final", required_argument, NULL, 'F'},
        {"seed", required_argument, NULL, 'x'},
        {"workers", required_argument, NULL, 'w'},
        {"threads", required_argument, NULL, 't'},
        {"runners", required_argument, NULL, 'r'},
        {"links", required_argument, NULL, 'L'},
        {"lease", required_argument, NULL, 'l'},
        {"waiter-lease", required_argument, NULL, 'W'},
        {"timeout", required_argument, NULL, 'T'},
        {"gap", required_argument, NULL, 'g'},
        {"slack", required_argument, NULL, 'k'},
        {"nemesis", required_argument, NULL, 'n'},
        {"kinds", required_argument, NULL, 'K'},
        {"url-options", required_argument, NULL, 'u'},
        {"no-store-loss", no_argument, NULL, 'N'},
        {"member-down", required_argument, NULL, 'D'},
        {"schedule", no_argument, NULL, 'P'},
        {"keep", no_argument, NULL, 'e'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt, have_seed = 0;
    const char *kinds = NULL;

    if (argc > 1 && strcmp(argv[1], "cmd") == 0)
        return wl_command(argc, argv);
    if (argc > 1 && strcmp(argv[1], "dump") == 0)
        return dump(argc, argv);
    if (argc > 1 && strcmp(argv[1], "check") == 0)
        return check_again(argc, argv);

    cfg.store = "redis";
    cfg.seconds = 30;
    cfg.final_s = -1;
    cfg.workers = 4;
    cfg.threads = 4;
    cfg.runners = 2;
    cfg.links = 3;
    cfg.lease_ms = 1500;
    cfg.waiter_lease_ms = 2000;
    cfg.timeout_ms = 1000;
    cfg.gap_ms = 1200;
    cfg.slack_ms = 250;
    cfg.member_down_ms = -1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            cfg.store = optarg;
            break;
        case 'S':
            cfg.seconds = atoi(optarg);
            break;
        case 'F':
            cfg.final_s = atoi(optarg);
            break;
        case 'x':
            cfg.seed = strtoull(optarg, NULL, 10);
            have_seed = 1;
            break;
        case 'w':
            cfg.workers = atoi(optarg);
            break;
        case 't':
            cfg.threads = atoi(optarg);
            break;
        case 'r':
            cfg.runners = atoi(optarg);
            break;
        case 'L':
            cfg.links = atoi(optarg);
            break;
        case 'l':
            cfg.lease_ms = atoi(optarg);
            break;
        case 'W':
            cfg.waiter_lease_ms = atoi(optarg);
            break;
        case 'T':
            cfg.timeout_ms = atoi(optarg);
            break;
        case 'g':
            cfg.gap_ms = atoi(optarg);
            break;
        case 'k':
            cfg.slack_ms = atoi(optarg);
            break;
        case 'n':
            cfg.nemeses = optarg;
            break;
        case 'K':
            kinds = optarg;
            break;
        case 'u':
            cfg.url_extra = optarg;
            break;
        case 'N':
            cfg.no_store_loss = 1;
            break;
        case 'D':
            cfg.member_down_ms = atoi(optarg);
            break;
        case 'P':
            cfg.schedule_only = 1;
            break;
        case 'e':
            cfg.keep = 1;
            break;
        case 'v':
            cfg.verbose = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 64;
        }
    }
    if (optind != argc || cfg.seconds < 1 || cfg.workers < 0 || cfg.workers > MAX_WORKERS ||
        cfg.threads < 1 || cfg.threads > 16 || cfg.runners < 0 || cfg.runners > MAX_WORKERS ||
        cfg.links < 1 || cfg.links > 16 || cfg.lease_ms < 100 || cfg.timeout_ms < 10 ||
        cfg.gap_ms < 50 || parse_kinds(&cfg, kinds) != 0) {
        fputs(usage, stderr);
        return 64;
    }
    /* Redlock's members are independent servers: a proxy in front of each,
     * and the nemesis faults one at a time. Sentinel and Cluster fail over
     * between their members, and their clients dial the nodes the store
     * names: no proxy (one would fault one address and leave the others
     * untouched); the nemesis faults the master (of a lock's slot) and
     * fails it over. cluster-tls is not run (the same faults, over TLS). */
    cfg.members = strcmp(cfg.store, "redlock") == 0 ? 3 : 1;
    cfg.cluster = strcmp(cfg.store, "cluster") == 0;
    cfg.master_moves = strcmp(cfg.store, "sentinel") == 0 || cfg.cluster;
    int group = dt_server_kind_is_group(cfg.store);
    if (group != 0 && cfg.members == 1 && !cfg.master_moves) {
        fprintf(stderr, "fault: --store %s: %s; the fault suite runs on ", cfg.store,
                group > 0 ? "a group of servers that fails over" : "no such kind");
        for (const char *const *k = dt_server_kinds(); *k != NULL; k++) {
            if (dt_server_kind_is_group(*k) == 0 || strcmp(*k, "redlock") == 0 ||
                strcmp(*k, "sentinel") == 0 || strcmp(*k, "cluster") == 0)
                fprintf(stderr, "%s%s", k == dt_server_kinds() ? "" : ", ", *k);
        }
        fprintf(stderr, "\n");
        return 64;
    }
    if (!have_seed)
        cfg.seed = (uint64_t) fs_now() ^ ((uint64_t) getpid() << 32);
    if (cfg.final_s < 0)
        cfg.final_s =
            (int) ((4LL * cfg.lease_ms + cfg.waiter_lease_ms + 2LL * cfg.timeout_ms + 4000 + 999) /
                   1000);
    if (self_path(cfg.bin, sizeof cfg.bin) != 0) {
        perror("/proc/self/exe");
        return 70;
    }
    snprintf(cfg.dlock, sizeof cfg.dlock, "%s", dt_bin("dlock"));

    printf("fault: store %s, seed %llu, %d s of faults + %d s healed, %d workers x %d threads, "
           "%d dlock run loops, lease %d ms\n",
           cfg.store, (unsigned long long) cfg.seed, cfg.seconds, cfg.final_s, cfg.workers,
           cfg.threads, cfg.runners, cfg.lease_ms);
    printf("replay: %s --store %s --seed %llu --seconds %d", argv[0], cfg.store,
           (unsigned long long) cfg.seed, cfg.seconds);
    if (cfg.nemeses)
        printf(" --nemesis %s", cfg.nemeses);
    if (kinds)
        printf(" --kinds %s", kinds);
    if (cfg.member_down_ms >= 0)
        printf(" --member-down %d", cfg.member_down_ms);
    printf(" (same lease, workers and options)\n");

    if (!cfg.schedule_only && access(cfg.dlock, X_OK) != 0) {
        fprintf(stderr, "fault: %s: not found (DT_BIN_DIR names the build's bin dir)\n", cfg.dlock);
        return 70;
    }

    /* The store, and the proxy in front of it. */
    /* (Redis's and Redlock's fences follow the server's clock as well) */
    cfg.fences_from_data = strcmp(cfg.store, "redis") != 0 && strcmp(cfg.store, "redlock") != 0 &&
                           strcmp(cfg.store, "sentinel") != 0 && !cfg.cluster;
    cfg.pause_stops_store = strcmp(cfg.store, "sqlite") == 0;
    dt_server_start(&server, cfg.store, 0, NULL);
    {
        dt_server *of = cfg.members > 1 ? dt_redlock_node(&server, 1) : &server;
        const char *const *ops = dt_server_ops(of);
        for (int i = 0, n = 0; ops[i] != NULL && n < 31; i++) {
            if (cfg.members == 1 || !dt_server_op_loses_data(of, ops[i]))
                server_ops[n++] = ops[i];
        }
    }
    /* the kind's lease rounding, read back through the harness's bound:
     * a lease of 0 ends a lag late, one of 1 ms a unit and a lag late */
    cfg.expiry_lag_ms = (int) dt_server_lease_bound_ms(&server, 0);
    cfg.lease_unit_ms = (int) dt_server_lease_bound_ms(&server, 1) - cfg.expiry_lag_ms;
    if (cfg.lease_unit_ms <= 1)
        cfg.lease_unit_ms = 0;
    nem_event *events = NULL;
    int nevents = cfg.nemeses != NULL && strcmp(cfg.nemeses, "none") == 0
                      ? 0
                      : nem_schedule(&cfg, &server, &events);
    printf("schedule (%d faults):\n", nevents);
    for (int i = 0; i < nevents; i++) {
        char line[160];
        nem_format(&events[i], line, sizeof line);
        printf("  %s\n", line);
    }
    fflush(stdout);
    if (cfg.schedule_only)
        return 0;

    for (int m = 0; m < cfg.members && !cfg.master_moves; m++) {
        const dt_server *at = cfg.members > 1 ? dt_redlock_node(&server, m) : &server;
        dt_proxy_start(&proxies[m], at->port, cfg.links);
        for (int l = 0; l < cfg.links; l++)
            cfg.proxy_ports[m][l] = proxies[m].ports[l];
    }
    build_url(cfg.direct_url, sizeof cfg.direct_url, &server, -1, -1, &cfg);
    dt_make_temp_dir(cfg.dir, sizeof cfg.dir);
    char path[300];
    snprintf(path, sizeof path, "%s/shm", cfg.dir);
    /* a run records a few hundred events per second and actor at most; the
     * file is sparse, so room to spare costs nothing */
    uint64_t cap = (uint64_t) (cfg.seconds + cfg.final_s + 30) *
                       (uint64_t) (cfg.workers * cfg.threads + cfg.runners + 10) * 300 +
                   100000;
    shm = fs_create(path, cap);
    if (shm == NULL) {
        fprintf(stderr, "fault: cannot map %s\n", path);
        return 70;
    }
    shm->nlocks = fault_nlocks;
    for (int i = 0; i < fault_nlocks; i++) {
        shm->locks[i] = fault_locks[i];
        res_init(&shm->res[i], fault_locks[i].kind, fault_locks[i].capacity);
    }
    shm->multi[0] = 0;
    shm->multi[1] = 1;

    int unsupported[H_COUNT] = {0};
    if (probe_kinds(cfg.direct_url, unsupported, &cfg.caps) != 0) {
        fprintf(stderr, "fault: this libdlock cannot use %s (no backend for it yet?)\n",
                cfg.direct_url);
        return 70;
    }
    {
        int n = 0;
        for (int k = 0; k < cfg.nkinds; k++) {
            if (!unsupported[cfg.kinds[k]])
                cfg.kinds[n++] = cfg.kinds[k];
            else
                printf("fault: the store cannot do %s locks (ENOTSUP): left out\n",
                       fs_hkind_name(cfg.kinds[k]));
        }
        cfg.nkinds = n;
        if (n == 0) {
            fprintf(stderr, "fault: no lock kind left to run\n");
            return 70;
        }
    }

    judge_keep(shm, &cfg);

    /* Clients. */
    int64_t start = fs_now();
    procs[nprocs++] = (proc){spawn(2, 0), 2, 0, 0};
    for (int i = 0; i < cfg.workers; i++)
        procs[nprocs++] = (proc){spawn(0, i), 0, i, 0};
    for (int i = 0; i < cfg.runners; i++)
        procs[nprocs++] = (proc){spawn(1, i), 1, i, 0};
    set_phase(shm, PH_WARMUP);
    nemesis nem = {.shm = shm,
                   .cfg = &cfg,
                   .server = &server,
                   .proxies = proxies,
                   .events = events,
                   .nevents = nevents,
                   .rng = cfg.seed ^ 0x7467ull,
                   .lost_lock = -1};
    nem_init(&nem);
    wait_until(&nem, fs_now() + 1500000000LL, 0);

    /* Faults. */
    set_phase(shm, PH_FAULTS);
    nem.t0_ns = fs_now();
    int64_t end = nem.t0_ns + (int64_t) cfg.seconds * 1000000000LL;
    for (;;) {
        int64_t now_ms = (fs_now() - nem.t0_ns) / 1000000;
        int64_t next = nem_step(&nem, now_ms);
        int64_t until = next < 0 ? end : nem.t0_ns + next * 1000000;
        if (until > end)
            until = end;
        wait_until(&nem, until, 1);
        if (fs_now() >= end)
            break;
    }
    nem_heal_all(&nem);

    /* Healed: every waiter must be served. */
    set_phase(shm, PH_FINAL);
    wait_until(&nem, fs_now() + (int64_t) cfg.final_s * 1000000000LL, 1);
    set_phase(shm, PH_STOP);
    stop_clients(4LL * cfg.lease_ms + 2LL * cfg.timeout_ms + 5000);
    check_left_free();
    double elapsed = (double) (fs_now() - start) / 1e9;
    for (int m = 0; m < cfg.members && !cfg.master_moves; m++)
        dt_proxy_stop(&proxies[m]);
    dt_server_stop(&server);

    /* The verdict. */
    check_totals totals;
    fflush(stdout);
    int64_t t_check = fs_now();
    int violations = check_run(shm, &cfg, stdout, &totals);
    printf("checked %ld history records in %.1f s\n", totals.events,
           (double) (fs_now() - t_check) / 1e9);
    print_json(&totals, &nem, unsupported, violations, elapsed);
    if (violations > 0 || cfg.keep) {
        dt_keep_dirs();
        printf("history: %s/shm (run dir kept)\n", cfg.dir);
    }
    fflush(stdout);
    return violations > 0 ? 1 : 0;
}
