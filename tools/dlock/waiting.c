/* SPDX-License-Identifier: MIT */
/* waiting.c - the one line a blocked acquisition prints, so that a `dlock
 * run NAME -- cmd` that waits (by default for ever) is not silent.
 *
 * A thread of its own sleeps CLI_WAITING_NOTICE_MS; if the acquisition has
 * not returned by then, it asks the store who holds the lock (the client is
 * shared by threads, dlock.h) and prints one line on stderr: the name, who
 * holds it as the store has it recorded (host, pid, label), and what the
 * user can do (-w, -v). An acquisition that ends first, or while the store
 * is asked, prints nothing: the line is printed under the same mutex that
 * the end of the wait takes. Nothing on stdout: scripts parse it.
 *
 * The end of the wait joins the thread, which takes up to one query's time
 * when the store is being asked: a store never reached answers no sooner
 * than its connect timeout, after the acquisition has said so. Then the
 * thread is left to the process's exit, with the client it uses (the
 * caller leaves it open): nothing is held in a store that was not
 * reached. */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cli_waiting {
    dlock_client *client;
    cli_kind kind;    /* a copy: the caller's options may be gone before a query ends */
    const char *name; /* NULL for a multi-lock: kind.names */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int done;     /* the acquisition returned */
    int asking;   /* the thread is asking the store */
    int warnings; /* cli_warnings_printed() when the wait began */
    int verbose;  /* -v: the library's log follows the wait already */
};

/* What the store says of the holders: the first one, and how many. */
typedef struct holders_seen {
    unsigned n;
    unsigned mine; /* holders that are this very process (not counted in n) */
    char owner[80], host[80], label[80];
    long pid;
} holders_seen;

/* Whether h is this very process: a waiter's own queued node or read
 * hold, which some stores list among a kind's holders (ZooKeeper's and
 * etcd's read-write queue, with the name held as a mutex: the trial of
 * stop 37 saw the waiter name itself). This process waits for the name:
 * it is not what holds it. */
static int is_this_process(const dlock_holder *h)
{
    char here[256];

    if (h->pid != (long) getpid() || gethostname(here, sizeof here) != 0)
        return 0;
    here[sizeof here - 1] = '\0';
    return strcmp(here, h->host) == 0;
}

static void note_holder(const dlock_holder *h, void *arg)
{
    holders_seen *s = arg;

    if (is_this_process(h)) {
        s->mine++;
        return;
    }
    if (s->n++ > 0)
        return;
    snprintf(s->owner, sizeof s->owner, "%s", h->owner);
    snprintf(s->host, sizeof s->host, "%s", h->host);
    snprintf(s->label, sizeof s->label, "%s", h->label);
    s->pid = h->pid;
}

/* Appends text to buf (of size n) with control characters as \xNN (a
 * label or a foreign owner is not ours to trust). */
static void append_text(char *buf, size_t n, const char *text)
{
    size_t len = strlen(buf);

    for (const unsigned char *p = (const unsigned char *) text; *p != '\0' && len + 5 < n; p++) {
        if (*p < 0x20 || *p == 0x7f)
            len += (size_t) snprintf(buf + len, n - len, "\\x%02x", *p);
        else
            buf[len++] = (char) *p;
    }
    buf[len] = '\0';
}

/* Whether the holder was a process of this host that is gone (its hold
 * lasts until its lease or session ends). A pid in use again may hide
 * that; it never makes a live holder look gone. */
static int gone_here(const holders_seen *s)
{
    char here[256];

    if (gethostname(here, sizeof here) != 0)
        return 0;
    here[sizeof here - 1] = '\0';
    return strcmp(here, s->host) == 0 && kill((pid_t) s->pid, 0) != 0 && errno == ESRCH;
}

/* "held by pid 4242 on host1, label nightly", "held by owner T",
 * or, for nobody the store names, how it stands; "" when this process is
 * all the store names (its own request still in flight: a wait=N grant
 * waiting for its replicas; a queued node some stores list): nothing to
 * say yet. */
static void describe(const holders_seen *s, int rc, char *buf, size_t n)
{
    buf[0] = '\0';
    if (rc == DLOCK_EUNREACHABLE) {
        /* nobody known to hold it: the wait is for the store */
        snprintf(buf, n, "while the store is out of reach (%s): it is tried again",
                 dlock_strerror(rc));
        return;
    }
    if (rc != DLOCK_OK) {
        snprintf(buf, n, "held or queued for (the store did not say who holds it: %s)",
                 dlock_strerror(rc));
        return;
    }
    if (s->n == 0 && s->mine > 0)
        return;
    if (s->n == 0) {
        /* freed since, or a fair queue ahead of us */
        snprintf(buf, n, "with waiters ahead in its queue");
        return;
    }
    if (s->pid != 0) {
        snprintf(buf, n, "held by pid %ld on ", s->pid);
        append_text(buf, n, s->host);
        if (s->label[0] != '\0') {
            append_text(buf, n, ", label ");
            append_text(buf, n, s->label);
        }
        if (gone_here(s))
            append_text(buf, n,
                        " (that process is gone: the name frees when the store ends its hold)");
    } else {
        /* a hold without dlock's record: another library's, or --simple */
        append_text(buf, n, "held by owner '");
        append_text(buf, n, s->owner);
        append_text(buf, n, "' (the store records no host or pid for it)");
    }
    if (s->n > 1) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, " and %u other holder%s", s->n - 1, s->n == 2 ? "" : "s");
    }
}

/* The lock of the query for the kind: dlock_query_holders() takes the
 * kind's flags (a multi-lock's members are plain or fair). */
static unsigned query_flags(const cli_kind *k)
{
    return k->nnames > 0 ? k->flags & DLOCK_FAIR : k->flags;
}

/* Asks the store who holds the lock waited for (for a multi-lock, the
 * first of its names held): *what gets "'NAME'", *who the holder in words
 * (describe()). Returns the query's code; *seen_any whether it named any
 * holder. */
static int ask_who_holds(dlock_client *c, const cli_kind *k, const char *name, char *what,
                         size_t what_size, char *who, size_t who_size, int *seen_any)
{
    holders_seen seen;
    int rc = DLOCK_OK;

    what[0] = '\0';
    /* the first name held is the one waited for */
    size_t nnames = k->nnames > 0 ? k->nnames : 1;
    for (size_t i = 0; i < nnames; i++) {
        const char *one = k->nnames > 0 ? k->names[i] : name;
        memset(&seen, 0, sizeof seen);
        rc = dlock_query_holders(c, one, query_flags(k), note_holder, &seen);
        if (rc != DLOCK_OK || seen.n > 0 || i == nnames - 1) {
            append_text(what, what_size, "'");
            append_text(what, what_size, one);
            append_text(what, what_size, "'");
            if (nnames > 1)
                append_text(what, what_size, " (of the multi-lock)");
            break;
        }
    }
    describe(&seen, rc, who, who_size);
    *seen_any = seen.n > 0;
    return rc;
}

/* ask_who_holds() for the other kinds of the name the client's store
 * has, until one names a holder: a name held as another kind than k's
 * (the refusal, or the wait, is for k). */
static int ask_other_kinds(dlock_client *c, const cli_kind *k, const char *name, char *what,
                           size_t what_size, char *who, size_t who_size, int *seen_any)
{
    static const struct {
        unsigned flags, family, cap;
    } kinds[] = {
        {0, DLOCK_FAIR, 0},
        {DLOCK_WRITE, DLOCK_READ | DLOCK_WRITE, DLOCK_CAP_READ_WRITE},
        {DLOCK_SEMAPHORE, DLOCK_SEMAPHORE, DLOCK_CAP_SEMAPHORE},
        {DLOCK_SIMPLE, DLOCK_SIMPLE, DLOCK_CAP_INTEROP},
    };
    unsigned caps = dlock_client_caps(c), flags = k->flags;
    int rc = DLOCK_OK;
    for (size_t i = 0; !*seen_any && k->nnames == 0 && i < sizeof kinds / sizeof kinds[0]; i++) {
        cli_kind other = *k;
        int mine = kinds[i].flags == 0 ? (flags & ~DLOCK_FAIR) == 0 : (flags & kinds[i].family);
        if (mine || (caps & kinds[i].cap) != kinds[i].cap)
            continue;
        other.flags = kinds[i].flags;
        rc = ask_who_holds(c, &other, name, what, what_size, who, who_size, seen_any);
        if (rc != DLOCK_OK)
            return rc;
    }
    return rc;
}

static void *notice_thread(void *arg)
{
    cli_waiting *w = arg;
    struct timespec until;
    char who[400] = "", what[300] = "";
    int seen_any;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += CLI_WAITING_NOTICE_MS / 1000;
    until.tv_nsec += (long) (CLI_WAITING_NOTICE_MS % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->done && pthread_cond_timedwait(&w->cond, &w->mu, &until) != ETIMEDOUT) {
    }
    int done = w->done || cli_warnings_printed() != w->warnings;
    w->asking = !done;
    pthread_mutex_unlock(&w->mu);
    if (done)
        return NULL;

    if (ask_who_holds(w->client, &w->kind, w->name, what, sizeof what, who, sizeof who,
                      &seen_any) == DLOCK_OK &&
        !seen_any) {
        /* held as another kind, whose holder is the one to name (not
         * "waiters ahead in its queue"); nobody there either: as it was */
        char what2[300], who2[400];
        int seen2 = 0;
        if (ask_other_kinds(w->client, &w->kind, w->name, what2, sizeof what2, who2, sizeof who2,
                            &seen2) == DLOCK_OK &&
            seen2) {
            snprintf(what, sizeof what, "%s", what2);
            snprintf(who, sizeof who, "%s", who2);
        } else if (who[0] != '\0') {
            /* free and nobody in line: this very request is still on its
             * way (a wait=N grant waiting for its replicas, then given
             * back), not a queue ahead of it (trial50: "with waiters
             * ahead in its queue" before a wait= error) */
            dlock_status st;
            const char *one = w->kind.nnames > 0 ? w->kind.names[0] : w->name;
            if (dlock_query(w->client, one, query_flags(&w->kind), &st) == DLOCK_OK && !st.held &&
                st.waiters == 0)
                who[0] = '\0';
        }
    }
    pthread_mutex_lock(&w->mu);
    w->asking = 0;
    if (!w->done && who[0] != '\0')
        fprintf(stderr, "dlock: waiting for lock %s, %s; -w SECONDS bounds the wait%s\n", what, who,
                w->verbose ? "" : ", -v follows it");
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void cli_print_who_holds(dlock_client *c, const cli_opts *o, const char *name)
{
    char who[400] = "", what[300] = "";
    int seen_any;

    /* a store that had trouble answering has said so: no query to wait on */
    if (o->quiet || cli_warnings_printed() > 0)
        return;
    if (ask_who_holds(c, &o->kind, name, what, sizeof what, who, sizeof who, &seen_any) != DLOCK_OK)
        return;
    /* held as another kind (the refusal said which): its holder, as a
     * plain refusal names one */
    if (ask_other_kinds(c, &o->kind, name, what, sizeof what, who, sizeof who, &seen_any) !=
        DLOCK_OK)
        return;
    if (!seen_any)
        return; /* freed since */
    fprintf(stderr, "dlock: lock %s is %s\n", what, who);
}

cli_waiting *cli_waiting_start(dlock_client *c, const cli_opts *o, const char *name)
{
    cli_waiting *w;

    /* -q: nothing; -w, -n: the user bounded it. With -v too: the
     * library's log says that it waits, this line who holds (trial38: -v
     * said less than no -v) */
    if (o->quiet || o->wait_ms != DLOCK_WAIT_FOREVER)
        return NULL;
    w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL; /* the line is a courtesy: the wait goes on without it */
    w->client = c;
    w->kind = o->kind;
    w->name = name;
    w->warnings = cli_warnings_printed();
    w->verbose = o->verbose > 0;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&w->mu, NULL);
    if (pthread_create(&w->thread, NULL, notice_thread, w) != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

int cli_waiting_stop(cli_waiting *w, int rc)
{
    if (w == NULL)
        return 0;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    /* (a wait without a bound times out only on a store that does not
     * answer) */
    int left = w->asking && (rc == DLOCK_EUNREACHABLE || rc == DLOCK_ETIMEDOUT);
    pthread_mutex_unlock(&w->mu);
    if (left) {
        /* freed with the process, as is the client it uses */
        pthread_detach(w->thread);
        return 1;
    }
    /* at most one query's time (the client's command timeout), from a
     * store that answers */
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return 0;
}

_Noreturn void cli_exit_beside_thread(int code)
{
    fflush(NULL);
    _exit(code);
}
