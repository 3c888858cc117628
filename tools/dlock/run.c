/* SPDX-License-Identifier: MIT */
/* run.c - `dlock run`: hold a lock while a command runs.
 *
 * The lock is taken, the command is started with the fencing token in its
 * environment, and the lease is renewed while it runs (or, with -l, left to
 * run out). If the lock is lost the command is sent SIGTERM, then SIGKILL
 * after a grace period, and dlock exits with EXIT_LOST: the command and
 * every process it started, through the guard it runs under (guard.c),
 * which does the same when dlock dies. Signals sent to dlock with kill(1)
 * are passed on the same way; signals from the terminal already reach
 * them (same process group) and are not sent twice.
 * When the command ends the lock is released and its status is dlock's.
 * Without a command (etcdctl lock's habit) dlock prints the owner token and
 * the fence, and holds the lock until a signal (then releases it, exit 0)
 * or its loss (exit 75).
 *
 * Signals are taken by one thread with sigwaitinfo(), never by handlers, so
 * that a signal while waiting for the lock can cancel the wait properly
 * (leaving the server's queue) and a signal while the command runs is
 * passed on. Signals dlock was started with ignored (nohup, `&` in a
 * script) stay ignored, for dlock and for the command. */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char run_usage[] =
    "usage: dlock run [-u URL] [-n | -w SECONDS] [-l SECONDS | -L SECONDS] [-E CODE]\n"
    "                 [--grace SECONDS] [-q] [-v] [--label TEXT]\n"
    "                 [--simple | --fair | --read | --write | --permits N [--take K]]\n"
    "                 NAME [([--] COMMAND [ARGS...] | -c 'SHELL COMMAND')]\n"
    "       dlock run [options] [--fair] -m NAME -m NAME...\n"
    "                 [([--] COMMAND [ARGS...] | -c 'SHELL COMMAND')]\n"
    "\n"
    "Takes the lock NAME, runs COMMAND while holding it, releases it, and exits\n"
    "with COMMAND's status. Without COMMAND, prints '<owner token> <fence>' and\n"
    "holds the lock until interrupted (SIGINT, SIGTERM: released, exit 0).\n"
    "dlock's options go before NAME; after it, everything is COMMAND's. NAME\n"
    "comes before --: 'dlock run -- COMMAND' is refused (a NAME that starts\n"
    "with '-' has a -- of its own: dlock run [OPTIONS] -- -NAME -- COMMAND, or\n"
    "-- -NAME -c STRING, or, without a command, dlock run [OPTIONS] -- -NAME).\n"
    "\n"
    "  -u, --url URL        store URL (default $DLOCK_URL, else " DEFAULT_URL ")\n"
    "  -n, --nonblock       fail at once if the lock is held\n"
    "  -w, --wait, --timeout SECONDS\n"
    "                       wait at most this long (default: wait forever)\n"
    "  -L, --renewed-lease, --ttl SECONDS\n"
    "                       the RENEWED lease (the default kind): renewed while dlock\n"
    "                       runs; if dlock is killed, the lock ends within SECONDS\n"
    "                       (default 30, or the URL's lease=)\n"
    "  -l, --lease SECONDS  a FIXED lease instead: not renewed, the lock ends SECONDS\n"
    "                       after it was taken even if COMMAND still runs\n"
    "  -E, --conflict-exit-code CODE\n"
    "                       exit code when the lock is not acquired (default 1)\n"
    "  -c, --command STRING run STRING with /bin/sh -c instead of COMMAND (as flock -c)\n"
    "      --simple         interop mode: plain SET NX key NAME, as redis-py, redlock, redsync\n"
    "      --fair           strictly first come, first served\n"
    "  -s, --read, --shared the read-write lock NAME, shared with other readers\n"
    "  -x, --write, --exclusive\n"
    "                       the read-write lock NAME, alone (not the plain lock NAME)\n"
    "      --permits N      the semaphore NAME of N permits; --take K of them (default 1)\n"
    "  -m, --multi NAME     a multi-lock: all the -m names or none (then no NAME)\n"
    "      --grace SECONDS  after a lost lock, SIGTERM then SIGKILL this much later (default 5)\n"
    "      --label TEXT     recorded with the hold, shown by 'dlock status' and 'dlock list'\n"
    "  -q, --quiet          no message when the lock is not acquired, nor while it\n"
    "                       waits (without -w, -v, -q: one line on stderr after 1 s\n"
    "                       of waiting says who holds the lock)\n"
    "  -v, --verbose        on stderr: how long taking the lock took, its fence and\n"
    "                       lease, its release, and what the library does (waits,\n"
    "                       hand-overs, renewal retries, losses); -vv: every step\n"
    "\n"
    "COMMAND gets DLOCK_NAME, DLOCK_FENCE (the fencing token), DLOCK_OWNER (the\n"
    "owner token) and DLOCK_URL in its environment, and DLOCK_TOKEN, the old name\n"
    "of DLOCK_FENCE; a multi-lock adds DLOCK_FENCES (one NAME=FENCE line per name).\n"
    "Durations take a unit: 250ms, 2s, 1m, 1h; a plain number is seconds.\n";

/* Self-pipe: the signal thread and the lost-lock callback write one byte. */
static int wake_pipe[2] = {-1, -1};

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

static pthread_mutex_t sig_mu = PTHREAD_MUTEX_INITIALIZER;
static sigset_t taken;           /* signals the thread takes */
static int ignored[NFORWARDED];  /* ignored when dlock started */
static int pending_signal;       /* to pass on to the command, 0 if none */
static int first_signal;         /* the first one seen, for the exit status */
static dlock_lock *waiting_lock; /* set while waiting for the lock */

static void poke(char c)
{
    if (write(wake_pipe[1], &c, 1) < 0) {
        /* the pipe is full: a wake-up is pending anyway */
    }
}

static void *signal_thread(void *arg)
{
    (void) arg;
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&taken, &info);
        if (sig < 0)
            continue;
        if (sig == SIGCHLD) {
            poke('C');
            continue;
        }
        pthread_mutex_lock(&sig_mu);
        if (first_signal == 0)
            first_signal = sig;
        /* A terminal's ^C already reached the command (same process
         * group): only signals sent to dlock by a process are passed on. */
        if (info.si_code != SI_KERNEL)
            pending_signal = sig;
        if (waiting_lock != NULL)
            dlock_cancel(waiting_lock);
        pthread_mutex_unlock(&sig_mu);
        poke('S');
    }
    return NULL;
}

/* Blocks the signals dlock takes (all threads started later inherit the
 * mask) and starts the thread that takes them. */
static int start_signal_thread(void)
{
    struct sigaction old;
    pthread_t t;

    sigemptyset(&taken);
    sigaddset(&taken, SIGCHLD);
    for (size_t i = 0; i < NFORWARDED; i++) {
        ignored[i] = sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN;
        if (!ignored[i])
            sigaddset(&taken, forwarded[i]);
    }
    if (pthread_sigmask(SIG_BLOCK, &taken, NULL) != 0 ||
        pthread_create(&t, NULL, signal_thread, NULL) != 0)
        return -1;
    pthread_detach(t);
    return 0;
}

static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static char lost_why[512];
static int lost;

/* arg: non-NULL when the lock was taken with -l. A fixed lease that ran
 * out while the command ran was likely meant to be renewed: the loss says
 * which flag does that (trial39: -l typed for -L). */
static void on_lost(dlock_lock *lock, int code, const char *why, void *arg)
{
    static const char fixed[] = "fixed lease";
    (void) lock;
    (void) code;
    pthread_mutex_lock(&lost_mu);
    snprintf(lost_why, sizeof lost_why, "%s%s", why,
             arg != NULL && strncmp(why, fixed, strlen(fixed)) == 0
                 ? "; -l is not renewed: for a lease renewed while dlock runs, -L SECONDS"
                 : "");
    lost = 1;
    pthread_mutex_unlock(&lost_mu);
    poke('L');
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The command's environment: ours without any DLOCK_* variable we set,
 * then the lock's facts. Built before fork(), so the child only execs. */
typedef struct command_env {
    char **vars;
    size_t n, cap;
} command_env;

/* Appends var (malloc'd, or NULL: out of memory), owning it. */
static int env_push(command_env *e, char *var)
{
    if (var != NULL && e->n + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **grown = realloc(e->vars, cap * sizeof *grown);
        if (grown == NULL) {
            free(var);
            return -1;
        }
        e->vars = grown;
        e->cap = cap;
    }
    if (var == NULL)
        return -1;
    e->vars[e->n++] = var;
    e->vars[e->n] = NULL;
    return 0;
}

static int env_add(command_env *e, const char *name, const char *value)
{
    size_t len = strlen(name) + 1 + strlen(value) + 1;
    char *var = malloc(len);
    if (var != NULL)
        snprintf(var, len, "%s=%s", name, value);
    return env_push(e, var);
}

static int env_add_u64(command_env *e, const char *name, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return env_add(e, name, buf);
}

static void env_free(command_env *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->vars[i]);
    free(e->vars);
}

/* DLOCK_TOKEN is DLOCK_FENCE's old name, kept for the scripts that use it. */
static const char *const lock_vars[] = {"DLOCK_NAME",  "DLOCK_TOKEN", "DLOCK_FENCE",
                                        "DLOCK_OWNER", "DLOCK_URL",   "DLOCK_FENCES"};

static int is_lock_var(const char *var)
{
    for (size_t i = 0; i < sizeof lock_vars / sizeof lock_vars[0]; i++) {
        size_t n = strlen(lock_vars[i]);
        if (strncmp(var, lock_vars[i], n) == 0 && var[n] == '=')
            return 1;
    }
    return 0;
}

/* DLOCK_FENCES of a multi-lock: one NAME=FENCE line per name, in the
 * members' (sorted) order. Names hold no control characters, and the fence
 * follows the last '=', so the list reads back unambiguously. */
static int env_add_fences(command_env *e, const dlock_lock *lock)
{
    size_t len = 1;
    for (size_t i = 0; i < dlock_lock_members(lock); i++)
        len += strlen(dlock_lock_name(dlock_lock_member(lock, i))) + 24;
    char *list = malloc(len), *p = list;
    if (list == NULL)
        return -1;
    *p = '\0';
    for (size_t i = 0; i < dlock_lock_members(lock); i++) {
        const dlock_lock *m = dlock_lock_member(lock, i);
        p += snprintf(p, len - (size_t) (p - list), "%s%s=%" PRIu64, i ? "\n" : "",
                      dlock_lock_name(m), dlock_lock_fence(m));
    }
    int rc = env_add(e, "DLOCK_FENCES", list);
    free(list);
    return rc;
}

static int build_env(command_env *e, const dlock_lock *lock, const char *url)
{
    extern char **environ;
    for (char **v = environ; *v != NULL; v++) {
        if (strchr(*v, '=') == NULL || is_lock_var(*v))
            continue;
        if (env_push(e, strdup(*v)) != 0)
            return -1;
    }
    if (env_add(e, "DLOCK_NAME", dlock_lock_name(lock)) != 0 ||
        env_add_u64(e, "DLOCK_TOKEN", dlock_lock_fence(lock)) != 0 ||
        env_add_u64(e, "DLOCK_FENCE", dlock_lock_fence(lock)) != 0 ||
        env_add(e, "DLOCK_OWNER", dlock_lock_token(lock)) != 0 || env_add(e, "DLOCK_URL", url) != 0)
        return -1;
    if (dlock_lock_members(lock) > 1 && env_add_fences(e, lock) != 0)
        return -1;
    return 0;
}

/* The descriptors dlock was started with (beyond 0-2), sorted: the command
 * inherits these and no other. Whatever the libraries opened meanwhile (the
 * store's connections, their internal pipes: libzookeeper's are not
 * close-on-exec) is closed in the child before it runs the command, even a
 * socket a thread opened at the moment of the fork, before it could mark it
 * close-on-exec (hiredis connects without SOCK_CLOEXEC). */
#define MAX_INHERITED 256
static int inherited[MAX_INHERITED];
static size_t ninherited;
static unsigned fd_limit = 1u << 20; /* RLIMIT_NOFILE: no descriptor at or above it */

static int by_fd(const void *a, const void *b)
{
    return *(const int *) a - *(const int *) b;
}

static void note_inherited_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_max != RLIM_INFINITY &&
        limit.rlim_max < fd_limit)
        fd_limit = (unsigned) limit.rlim_max;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL && ninherited < MAX_INHERITED) {
        int fd = atoi(e->d_name);
        if (fd > 2 && fd != dirfd(d))
            inherited[ninherited++] = fd;
    }
    closedir(d);
    qsort(inherited, ninherited, sizeof *inherited, by_fd);
}

/* In the child (async-signal-safe): closes the descriptors first..last
 * (~0u: all above first). close_range() needs Linux 5.9, and a seccomp
 * filter (an older container runtime's) may refuse it: then one by one, up
 * to the limit of descriptors a process may have. */
static void close_fds(unsigned first, unsigned last)
{
    if (close_range(first, last, 0) == 0)
        return;
    for (unsigned fd = first; fd <= last && fd < fd_limit; fd++)
        close((int) fd);
}

/* In the child: closes every descriptor above 2 but the inherited ones and
 * keep. */
static void close_all_but(int keep)
{
    int prev = 2;
    for (size_t i = 0; i <= ninherited; i++) {
        int next = i < ninherited ? inherited[i] : INT_MAX;
        if (keep > prev && keep < next) {
            if (keep > prev + 1)
                close_fds((unsigned) prev + 1, (unsigned) keep - 1);
            prev = keep;
        }
        if (next > prev + 1)
            close_fds((unsigned) prev + 1, next == INT_MAX ? ~0u : (unsigned) next - 1);
        prev = next;
    }
}

/* What the guard needs to start the command (cli_guard_run's start). */
typedef struct command_start {
    char **argv;
    command_env *env;
    int status_fd; /* the exec-status pipe's write end */
} command_start;

/* In the guard: forks the command, which starts as dlock did (default
 * signals, except those that were ignored, nothing blocked) and execs;
 * on exec failure it reports errno through the exec-status pipe. */
static pid_t fork_command(void *arg)
{
    command_start *cs = arg;
    pid_t guard = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        for (size_t i = 0; i < NFORWARDED; i++)
            signal(forwarded[i], ignored[i] ? SIG_IGN : SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* the guard killed (SIGKILL): the command at least is stopped */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != guard)
            _exit(EXIT_LOST);
        close_all_but(cs->status_fd);
        execvpe(cs->argv[0], cs->argv, cs->env->vars);
        int e = errno;
        if (write(cs->status_fd, &e, sizeof e) < 0) {
            /* nothing more can be done */
        }
        _exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
    }
    close(cs->status_fd);
    return pid;
}

/* The guard's control pipe (guard.c): dlock writes a signal's number for
 * the command's tree; its end of file (dlock gone) stops the tree. */
static int to_guard = -1;

/* Sends sig to the command and everything it started (through the guard). */
static void signal_command(pid_t guard, int sig)
{
    unsigned char b = (unsigned char) sig;
    if ((to_guard < 0 || write(to_guard, &b, 1) != 1) && sig != CLI_GUARD_STOP)
        kill(guard, sig); /* (the guard gone: nothing is left of the tree) */
}

/* Starts argv with the lock's facts in its environment, under a guard
 * (guard.c) that stops its whole tree: the guard's pid, which exits with
 * the command's status. On exec failure reports errno through an
 * exec-status pipe. */
static pid_t start_command(char **argv, dlock_lock *lock, const char *url, int64_t grace_ms,
                           int *exec_errno)
{
    int status_pipe[2], control[2];
    command_env env = {0};
    pid_t pid;

    *exec_errno = 0;
    if (build_env(&env, lock, url) != 0) {
        env_free(&env);
        errno = ENOMEM;
        return -1;
    }
    if (pipe2(status_pipe, O_CLOEXEC) != 0) {
        env_free(&env);
        return -1;
    }
    if (pipe2(control, O_CLOEXEC) != 0) {
        close(status_pipe[0]);
        close(status_pipe[1]);
        env_free(&env);
        return -1;
    }
    signal(SIGPIPE, SIG_IGN); /* a write to a guard that is gone fails, not kills */
    pid_t parent = getpid();
    pid = fork();
    if (pid == 0) {
        /* the guard: no lock of its own once dlock has died */
        if (getppid() != parent)
            _exit(EXIT_LOST);
        close(status_pipe[0]);
        close(control[1]);
        /* none of dlock's connections open here (a server would not see
         * them close when dlock does): the guard keeps its pipes and what
         * the command is to inherit */
        if (ninherited < MAX_INHERITED) {
            inherited[ninherited++] = control[0];
            qsort(inherited, ninherited, sizeof *inherited, by_fd);
            close_all_but(status_pipe[1]);
        }
        prctl(PR_SET_NAME, "dlock-guard");
        command_start cs = {argv, &env, status_pipe[1]};
        cli_guard_run(control[0], grace_ms, fork_command, &cs);
    }
    env_free(&env);
    close(status_pipe[1]);
    close(control[0]);
    if (pid > 0) {
        to_guard = control[1];
        ssize_t n;
        do
            n = read(status_pipe[0], exec_errno, sizeof *exec_errno);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t) sizeof *exec_errno)
            *exec_errno = 0;
    } else {
        close(control[1]);
    }
    close(status_pipe[0]);
    return pid;
}

/* Waits for the command, passing signals on and stopping it if the lock
 * is lost. Returns its wait status; *was_lost tells whether the lock went. */
static int supervise(pid_t child, const char *name, int64_t grace_ms, int *was_lost)
{
    int64_t kill_at = -1;
    int status = 0;

    *was_lost = 0;
    for (;;) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child)
            return status;
        pthread_mutex_lock(&sig_mu);
        int sig = pending_signal;
        pending_signal = 0;
        pthread_mutex_unlock(&sig_mu);
        if (sig != 0)
            signal_command(child, sig);
        pthread_mutex_lock(&lost_mu);
        int now_lost = lost;
        pthread_mutex_unlock(&lost_mu);
        if (now_lost && !*was_lost) {
            *was_lost = 1;
            /* the outage's later lines (a node's connection dropped) would
             * follow the news that decides the run */
            cli_log_end();
            pthread_mutex_lock(&lost_mu);
            fprintf(stderr, "dlock: lock '%s' was lost (%s); stopping the command\n", name,
                    lost_why);
            pthread_mutex_unlock(&lost_mu);
            signal_command(child, CLI_GUARD_STOP); /* SIGTERM, to the whole tree */
            kill_at = now_ms() + grace_ms;
        }
        int timeout = -1;
        if (kill_at >= 0) {
            int64_t left = kill_at - now_ms();
            if (left <= 0) {
                signal_command(child, SIGKILL);
                kill_at = -1;
            } else {
                timeout = left < INT_MAX ? (int) left : INT_MAX; /* --grace may be 366 days */
            }
        }
        struct pollfd p = {.fd = wake_pipe[0], .events = POLLIN};
        if (poll(&p, 1, timeout) > 0) {
            char buf[64];
            if (read(wake_pipe[0], buf, sizeof buf) < 0 && errno != EAGAIN && errno != EINTR)
                return status;
        }
    }
}

/* After NAME, flock's `-c STRING` (or --command): the index of STRING, or 0
 * if argv[i] is not that option. */
static int shell_option_at(int argc, char **argv, int i, const char **shell)
{
    if (i < argc && strncmp(argv[i], "--command=", 10) == 0) {
        *shell = argv[i] + 10;
        return i;
    }
    if (i + 1 < argc && (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--command") == 0)) {
        *shell = argv[i + 1];
        return i + 1;
    }
    return 0;
}

/* The command after the options: argv[*first...], or -c's STRING in
 * *shell, or none (*first == argc, *shell NULL: hold until a signal). Sets
 * *name (not with -m). Returns -1 to go on, or EXIT_USAGE. */
static int find_command(int argc, char **argv, cli_opts *o, int *first, const char **name)
{
    int at = *first;

    if (o->kind.nnames == 0) {
        /* dlock run -u URL $UNSET -- cmd: NAME is missing, and the
         * command's first word would be taken for it. A NAME that starts
         * with '-' follows a -- of its own, and a -- (or -c's STRING
         * before) says where the command starts: dlock run -- -x -- cmd.
         * Alone after --, a word that starts with '-' is such a NAME, held
         * without a command: no command's name starts with '-', so it is
         * no $UNSET -- cmd. '-' alone is such a NAME too, as in every
         * command (cli_check_name). */
        if (o->dashdash && at < argc && strcmp(argv[at], "--") == 0)
            return cli_check_name("run", "", argv[at]);
        int name_then_command = at + 1 < argc && strcmp(argv[at + 1], "--") == 0;
        int dash_word = at < argc && argv[at][0] == '-';
        /* dlock run -- -x -c STRING: flock's order, the NAME's -- is enough */
        const char *shell_after = NULL;
        int name_then_shell =
            dash_word && shell_option_at(argc, argv, at + 1, &shell_after) == argc - 1;
        if (o->dashdash && !name_then_command && !name_then_shell &&
            !((dash_word || o->shell != NULL) && at == argc - 1)) {
            if (dash_word && at + 2 == argc &&
                (strcmp(argv[at + 1], "-c") == 0 || strcmp(argv[at + 1], "--command") == 0))
                return cli_usage_error("run", "%s needs a command string", argv[at + 1]);
            if (dash_word)
                return cli_usage_error("run",
                                       "'%s' after -- is a NAME that starts with '-', and what "
                                       "follows it a command: a -- goes before the command too: "
                                       "dlock run [OPTIONS] -- %s -- COMMAND [ARGS...]",
                                       argv[at], argv[at]);
            /* dlock run -x -- cmd: -x is --write, not the name; dlock run
             * --label $UNSET x -- cmd: x is the value of --label */
            if (at >= 3 && cli_word_may_be_name(o, argv[at - 2]))
                return cli_missing_name("run", o, argv, at - 2, " -- COMMAND [ARGS...]");
            return cli_usage_error("run", "a lock name is needed before --: dlock run [OPTIONS] "
                                          "NAME -- COMMAND [ARGS...]");
        }
        if (at >= argc)
            return cli_missing_name("run", o, argv, at - 1, "");
        if (cli_check_name("run", "", argv[at]) != 0)
            return EXIT_USAGE;
        *name = argv[at++];
        /* -u forgotten: dlock run redis://HOST NAME -- cmd would hold a lock
         * named after the URL and run NAME, dlock run NAME redis://HOST cmd
         * run the URL: no -- (nor -c) comes between NAME and the command */
        if (at < argc && argv[at][0] != '-' && cli_url_among_names("run", 2, argv + at - 1) >= 0)
            return EXIT_USAGE;
        if (at < argc && strcmp(argv[at], "--") == 0) {
            if (++at >= argc && o->shell == NULL)
                return cli_usage_error("run",
                                       "missing COMMAND after -- (to hold '%s' until interrupted, "
                                       "without a command: dlock run [OPTIONS] %s%s)",
                                       *name, o->dashdash ? "-- " : "", *name);
        } else if (at < argc) {
            /* dlock run NAME -c STRING, flock's order */
            const char *after = NULL;
            int shell_at = shell_option_at(argc, argv, at, &after);
            if (shell_at > 0 && o->shell != NULL)
                return cli_usage_error("run", "-c given twice: give one command string");
            if (shell_at > 0) {
                o->shell = after;
                at = shell_at + 1;
            } else if (at == argc - 1 &&
                       (strcmp(argv[at], "-c") == 0 || strcmp(argv[at], "--command") == 0)) {
                return cli_usage_error("run", "%s needs a command string", argv[at]);
            } else if (cli_is_option(argv[at])) {
                /* dlock run NAME -w 5 cmd: -w would be run as the command,
                 * after the lock was taken */
                return cli_usage_error("run",
                                       "%s after NAME would be the command: put dlock's options "
                                       "before NAME, or use -- before a command that starts "
                                       "with %s",
                                       argv[at], argv[at]);
            }
        }
    } else if (at >= argc && at > 1 && strcmp(argv[at - 1], "--") == 0 && o->shell == NULL) {
        return cli_usage_error("run", "missing COMMAND after --");
    }
    if (o->shell != NULL && at < argc)
        return cli_usage_error("run", "give COMMAND [ARGS...] or -c STRING, not both");
    *first = at;
    return -1;
}

/* Without a command: holds the lock until a signal (released: 0) or its
 * loss (EXIT_LOST). */
static int hold_until_signal(dlock_lock *lock)
{
    for (;;) {
        pthread_mutex_lock(&sig_mu);
        int sig = first_signal;
        pthread_mutex_unlock(&sig_mu);
        pthread_mutex_lock(&lost_mu);
        int now_lost = lost;
        if (now_lost) {
            cli_log_end();
            fprintf(stderr, "dlock: lock '%s' was lost (%s)\n", dlock_lock_name(lock), lost_why);
        }
        pthread_mutex_unlock(&lost_mu);
        if (now_lost)
            return EXIT_LOST;
        if (sig != 0)
            return 0;
        struct pollfd p = {.fd = wake_pipe[0], .events = POLLIN};
        if (poll(&p, 1, -1) > 0) {
            char buf[64];
            if (read(wake_pipe[0], buf, sizeof buf) < 0 && errno != EAGAIN && errno != EINTR)
                return EXIT_FAILURE_OTHER;
        }
    }
}

/* The option that asked for what the store cannot do (DLOCK_ENOTSUP). */
static const char *unsupported_option(dlock_client *c, const cli_opts *o)
{
    if (o->lease_ms > 0 && !(dlock_client_caps(c) & DLOCK_CAP_FIXED_LEASE))
        return "-l";
    return cli_kind_option_text(&o->kind);
}

/* A failure to take the lock (not a conflict), in one wording: "dlock:
 * cannot take lock 'x': DETAIL" ("multi-lock 'a,b'"). The library's
 * message most often opens with the lock's name as "lock 'x': ", which is
 * then said once. */
static int fail_to_take(int rc, const dlock_lock *lock, const cli_kind *kind)
{
    const char *noun = kind->nnames > 0 ? "multi-lock" : "lock";
    const char *msg = dlock_errmsg();
    char what[600], lead[600];
    size_t n;

    snprintf(what, sizeof what, "cannot take %s '%s'", noun, dlock_lock_name(lock));
    n = (size_t) snprintf(lead, sizeof lead, "%s: ", what + strlen("cannot take "));
    if (n < sizeof lead && strncmp(msg, lead, n) == 0)
        msg += n;
    /* a semaphore in use with another count: the option to give (as
     * status and unlock --force say it) */
    const char *in_use = strstr(msg, " is in use with ");
    unsigned permits = 0;
    char with_hint[1100];
    if (rc == DLOCK_EINVAL && in_use != NULL && strncmp(msg, "semaphore '", 11) == 0 &&
        sscanf(in_use, " is in use with %u permits", &permits) == 1) {
        snprintf(with_hint, sizeof with_hint, "%s (give --permits %u)", msg, permits);
        msg = with_hint;
    }
    return cli_fail_msg(rc, what, msg);
}

int cmd_run(int argc, char **argv)
{
    cli_opts o;
    int first,
        code = cli_parse(argc, argv,
                         CLI_URL | CLI_WAIT | CLI_LEASE | CLI_RENEWED | CLI_CONFLICT | CLI_QUIET |
                             CLI_KIND | CLI_MULTI | CLI_GRACE | CLI_SHELL | CLI_LABEL,
                         1, run_usage, &o, &first);
    const char *name = NULL;
    char *shell_argv[4] = {"/bin/sh", "-c", NULL, NULL};

    if (code >= 0)
        return code;
    note_inherited_fds();
    code = find_command(argc, argv, &o, &first, &name);
    if (code >= 0)
        return code;
    shell_argv[2] = (char *) o.shell;
    char **command = o.shell != NULL ? shell_argv : first < argc ? argv + first : NULL;
    const char *url = o.url;
    int64_t wait_ms = o.wait_ms, lease_ms = o.lease_ms, grace_ms = o.grace_ms;
    int conflict_code = o.conflict_code, quiet = o.quiet;
    cli_kind kind = o.kind;

    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || start_signal_thread() != 0) {
        perror("dlock: cannot set up signal handling");
        return EXIT_FAILURE_OTHER;
    }
    dlock_client *client;
    dlock_lock *lock;
    int rc, client_in_use = 0; /* by the waiting line's thread, left asking an unreached store */
    code = cli_open(url, &client);
    if (code != 0)
        return code;
    rc = cli_kind_open(client, &kind, name, &lock);
    if (rc != DLOCK_OK) {
        code = EXIT_USAGE;
        if (rc == DLOCK_ENOTSUP)
            cli_fail_unsupported("run", unsupported_option(client, &o));
        else if (rc == DLOCK_EINVAL) { /* the name, or the kind's numbers */
            cli_log_end();
            fprintf(stderr, "dlock run: %s\n", dlock_errmsg());
        } else
            code = cli_fail(rc, "cannot make the lock");
        dlock_client_close(client);
        return code;
    }
    dlock_lock_on_lost(lock, on_lost, lease_ms > 0 ? (void *) "-l" : NULL);

    /* A signal while waiting ends the wait (and leaves the queue). */
    pthread_mutex_lock(&sig_mu);
    waiting_lock = lock;
    if (first_signal != 0)
        dlock_cancel(lock);
    pthread_mutex_unlock(&sig_mu);
    int64_t asked_us = cli_now_us();
    cli_waiting *notice = cli_waiting_start(client, &o, name);
    rc = lease_ms > 0 ? dlock_acquire_for(lock, wait_ms, lease_ms) : dlock_acquire(lock, wait_ms);
    client_in_use = cli_waiting_stop(notice, rc);
    int64_t acquired_us = cli_now_us();
    pthread_mutex_lock(&sig_mu);
    waiting_lock = NULL;
    int signalled = first_signal;
    pthread_mutex_unlock(&sig_mu);
    if (rc == DLOCK_ECANCELED || (rc == DLOCK_OK && signalled != 0)) {
        /* as if the signal had ended dlock, minus a lock left behind */
        if (rc == DLOCK_OK)
            dlock_release(lock);
        code = 128 + signalled;
        goto out;
    }
    if (rc == DLOCK_EBUSY || rc == DLOCK_ETIMEDOUT) {
        cli_log_end();
        if (!quiet)
            fprintf(stderr, "dlock: %s\n", dlock_errmsg());
        if (!client_in_use)
            cli_print_who_holds(client, &o, name);
        code = conflict_code;
        goto out;
    }
    if (rc == DLOCK_ENOTSUP) {
        code = cli_fail_unsupported("run", unsupported_option(client, &o));
        goto out;
    }
    if (rc != DLOCK_OK) {
        code = fail_to_take(rc, lock, &kind);
        goto out;
    }
    if (o.verbose > 0)
        cli_report_acquired(client, lock, &kind, url, lease_ms, acquired_us - asked_us, 0);

    int status = 0, was_lost = 0;
    if (command == NULL) {
        /* etcdctl lock's habit: the hold's facts for a script, then wait */
        printf("%s %" PRIu64 "\n", dlock_lock_token(lock), dlock_lock_fence(lock));
        fflush(stdout);
        code = hold_until_signal(lock);
        was_lost = code == EXIT_LOST;
    } else {
        int exec_errno;
        pid_t child = start_command(command, lock, url, grace_ms, &exec_errno);
        if (child < 0 || exec_errno != 0) {
            int e = child < 0 ? errno : exec_errno;
            cli_log_end();
            fprintf(stderr, "dlock: cannot run '%s': %s\n", command[0], strerror(e));
            if (child > 0)
                waitpid(child, NULL, 0);
            code = e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
            dlock_release(lock);
            goto out;
        }
        status = supervise(child, dlock_lock_name(lock), grace_ms, &was_lost);
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (was_lost) {
        code = EXIT_LOST;
    } else {
        rc = dlock_release(lock);
        if (rc == DLOCK_ELOST) {
            /* lost between the command's end and the release */
            cli_log_end();
            fprintf(stderr, "dlock: %s\n", dlock_errmsg());
            code = EXIT_LOST;
        } else if (rc == DLOCK_OK && o.verbose > 0) {
            cli_report_released(lock, &kind, cli_now_us() - acquired_us);
        }
        /* any other failure: the release may not have reached the store,
         * which the library's warning (shown at every verbosity) has said;
         * the command's status stands */
    }
out:
    dlock_lock_free(lock);
    if (client_in_use)
        cli_exit_beside_thread(code);
    dlock_client_close(client);
    return code;
}
