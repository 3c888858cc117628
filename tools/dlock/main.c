/* SPDX-License-Identifier: MIT */
/* main.c - the dlock command: dispatch, shared helpers, exit codes. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char usage[] =
    "usage: dlock COMMAND [OPTIONS] NAME ...\n"
    "\n"
    "A distributed lock from the command line, shaped like flock(1).\n"
    "\n"
    "commands:\n"
    "  run     hold a lock while a command runs      dlock run NAME -- COMMAND [ARGS...]\n"
    "                                                dlock run NAME -c 'SHELL COMMAND'\n"
    "          or until interrupted                  dlock run NAME\n"
    "  status  show who holds a lock                 dlock status [--json | --check] NAME\n"
    "  list    the locks under a prefix, and holders dlock list [--json] [PREFIX]\n"
    "  lock    take a lock, print its owner token    dlock lock -l SECONDS NAME\n"
    "  unlock  release a lock by owner, or force it  dlock unlock (--owner OWNER | --force) NAME\n"
    "  extend  set the lease of a lock by its owner  dlock extend --owner OWNER -l SECONDS NAME\n"
    "  bench   measure lock throughput (JSON)        dlock bench --help\n"
    "\n"
    "The store is -u URL (after the command: dlock run -u URL NAME -- ...), else\n"
    "$DLOCK_URL, else " DEFAULT_URL ".\n"
    "\n"
    "The library's warnings (a store that does not answer, a renewal retried) go to\n"
    "stderr; every command takes -v for more (waits, hand-overs, retries) and -vv\n"
    "for every step.\n"
    "\n"
    "exit codes (docs/dlock.1, EXIT STATUS, says each in full):\n"
    "  0        success; dlock run: the command's own exit status\n"
    "  1        the lock is held by someone else (-n, or -w ran out; -E sets another\n"
    "           code), the owner token does not hold it, or status --check: it is free\n"
    "  64       usage error: bad option, duration, NAME or URL, or what the store\n"
    "           cannot do\n"
    "  69       the server cannot be reached\n"
    "  70       any other failure: the server refused or answered garbage\n"
    "  75       dlock run lost the lock while the command ran, and stopped it\n"
    "  126      the command was found but could not be executed\n"
    "  127      the command was not found\n"
    "  128+N    the command was killed by signal N, or dlock got it while it waited\n"
    "\n"
    "Run 'dlock COMMAND --help' for a command's options; 'man dlock' (in the source\n"
    "tree: 'man -l docs/dlock.1') for the whole manual.\n";

/* Set when no -u and no $DLOCK_URL named the store: a store that does not
 * answer is then most likely not the one the user meant. */
static int url_defaulted;
/* Set when $DLOCK_URL named it: a mistake in it is not on the command line
 * the user is looking at. */
static int url_from_env;
/* Set when $DLOCK_URL is set but empty (DLOCK_URL= in a script): the
 * default was used, and "not set" would send the user looking elsewhere. */
static int url_env_empty;

const char *cli_url(const char *flag)
{
    const char *env = getenv("DLOCK_URL");
    if (flag != NULL)
        return flag;
    if (env != NULL && env[0] != '\0') {
        url_from_env = 1;
        return env;
    }
    url_defaulted = 1;
    url_env_empty = env != NULL;
    return DEFAULT_URL;
}

const char *cli_url_source(void)
{
    return url_from_env ? "$DLOCK_URL" : "the URL";
}

int cli_url_among_names(const char *cmd, int n, char **words)
{
    for (int i = 0; i < n; i++) {
        if (strstr(words[i], "://") == NULL)
            continue;
        /* its scheme only: the rest may hold a password */
        char scheme[32];
        snprintf(scheme, sizeof scheme, "%.*s", (int) (strstr(words[i], "://") - words[i]),
                 words[i]);
        fprintf(stderr, "dlock %s: '", cmd);
        cli_print_text_to(stderr, scheme);
        fprintf(stderr,
                "://...' looks like a URL, not a lock NAME; a URL goes with -u URL (or "
                "$DLOCK_URL)\n"
                "Try 'dlock %s --help'.\n",
                cmd);
        return EXIT_USAGE;
    }
    return -1;
}

/* After a failure's message: what the user may have meant. */
static void hint(int rc)
{
    if (rc == DLOCK_EUNREACHABLE && url_defaulted)
        fprintf(stderr,
                "dlock: no -u URL was given and $DLOCK_URL is %s, so the store was the "
                "default, " DEFAULT_URL "\n",
                url_env_empty ? "set but empty" : "not set");
    else if (rc == DLOCK_EUNREACHABLE && url_from_env)
        fprintf(stderr, "dlock: no -u URL was given, so the store was $DLOCK_URL's\n");
}

/* The URL's options that the command line's options set (--label, -L). */
typedef struct url_option_of {
    const char *key, *option;
} url_option_of;
static url_option_of added[4];
static size_t nadded;

static void cli_note_url_option(const char *key, const char *option)
{
    if (nadded < sizeof added / sizeof added[0])
        added[nadded++] = (url_option_of){key, option};
}

/* The client options of the command line (-L, --label): "?label=x&lease=5"
 * (its '?' not given to the library), kept for the life of the process. */
static char *client_options;

void cli_add_client_option(const char *key, const char *value, const char *option)
{
    size_t used = client_options != NULL ? strlen(client_options) : 0;
    char *next = realloc(client_options, used + strlen(key) + 3 * strlen(value) + 3);
    char *p;

    if (next == NULL) {
        fputs("dlock: out of memory\n", stderr);
        exit(EXIT_FAILURE_OTHER);
    }
    client_options = next;
    p = next + used;
    p += sprintf(p, "%c%s=", used == 0 ? '?' : '&', key);
    for (const unsigned char *c = (const unsigned char *) value; *c != '\0'; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("-._~", *c) != NULL)
            *p++ = (char) *c;
        else
            p += sprintf(p, "%%%02X", *c);
    }
    *p = '\0';
    cli_note_url_option(key, option);
}

const char *cli_client_option(const char *url, const char *key, size_t *len)
{
    const char *mine = client_options != NULL ? cli_url_option(client_options, key, len) : NULL;
    return mine != NULL ? mine : cli_url_option(url, key, len);
}

const char *cli_url_option(const char *url, const char *key, size_t *len)
{
    const char *q = strchr(url, '?');
    size_t n = strlen(key);

    for (const char *p = q; p != NULL; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, key, n) == 0 && p[1 + n] == '=') {
            *len = strcspn(p + 2 + n, "&");
            return p + 2 + n;
        }
    }
    return NULL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "dlock %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'dlock %s --help'.\n", cmd);
    return EXIT_USAGE;
}

/* The unit after the number at the start of text ("d" in "400d"), if the
 * rest of text is letters: a unit dlock does not know. */
static const char *unknown_unit(const char *text)
{
    const char *p = text + strspn(text, "0123456789");

    if (p == text)
        return NULL;
    if (*p == '.' && p[1] >= '0' && p[1] <= '9')
        p += 1 + strspn(p + 1, "0123456789");
    for (const char *c = p; *c != '\0'; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            return NULL;
    }
    return *p != '\0' ? p : NULL;
}

int cli_duration_option(const char *cmd, const char *opt, const char *text, int64_t min_ms,
                        int64_t *ms)
{
    /* the library's syntax, the same as the URL's: one rule everywhere */
    const char *unit;

    if (dlock_parse_duration(text, ms) != DLOCK_OK) {
        unit = unknown_unit(text);
        if (text[0] == '-' && !isdigit((unsigned char) text[1]) && text[1] != '.')
            /* the next word, an option or --, taken as this one's value */
            fprintf(stderr,
                    "dlock %s: %s needs a value (a duration, as 250ms, 1.5s or 2m), and got "
                    "'%s', which looks like what comes after it\n",
                    cmd, opt, text);
        else if (unit != NULL)
            fprintf(stderr,
                    "dlock %s: %s %s: unknown unit '%s': the units are ms, s, m and h (a "
                    "number without one is seconds)\n",
                    cmd, opt, text, unit);
        else
            fprintf(stderr,
                    "dlock %s: %s %s: not a duration: give a number and a unit, as 250ms, "
                    "1.5s, 2m or 1h (a number without one is seconds)\n",
                    cmd, opt, text);
        return EXIT_USAGE;
    }
    if (*ms > DLOCK_DURATION_MAX_MS) {
        fprintf(stderr, "dlock %s: %s %s: longer than 366 days, the longest dlock takes\n", cmd,
                opt, text);
        return EXIT_USAGE;
    }
    if (*ms < min_ms) {
        if (min_ms == DLOCK_LEASE_MIN_MS) /* the library's words for the URL's lease= */
            fprintf(stderr,
                    "dlock %s: %s %s: a lease must be at least %d ms (of a shorter one, the drift "
                    "margin and a round trip leave too little to hold)\n",
                    cmd, opt, text, DLOCK_LEASE_MIN_MS);
        else if (min_ms == 1)
            fprintf(stderr, "dlock %s: %s %s: must be more than 0\n", cmd, opt, text);
        else
            fprintf(stderr, "dlock %s: %s %s: must be at least %" PRId64 "ms\n", cmd, opt, text,
                    min_ms);
        return EXIT_USAGE;
    }
    return 0;
}

void cli_print_text(const char *text)
{
    cli_print_text_to(stdout, text);
}

void cli_hide_url(const char *word, char *out, size_t n)
{
    const char *sep = strstr(word, "://");
    if (sep == NULL || n < 8) {
        snprintf(out, n, "%s", word);
        return;
    }
    /* what comes before "://" (--url=redis), then nothing of the rest */
    size_t keep = (size_t) (sep - word) + 3;
    if (keep > n - 4)
        keep = n - 4;
    snprintf(out, n, "%.*s...", (int) keep, word);
}

void cli_print_text_to(FILE *f, const char *text)
{
    for (const unsigned char *p = (const unsigned char *) text; *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            putc(*p, f);
    }
}

int cli_fail(int rc, const char *what)
{
    return cli_fail_msg(rc, what, dlock_errmsg());
}

/* The exit code of a failure rc. */
static int exit_code_of(int rc)
{
    switch (rc) {
    case DLOCK_EINVAL:
    case DLOCK_ENOTSUP: /* what the user's options asked of a store that cannot */
        return EXIT_USAGE;
    case DLOCK_EUNREACHABLE:
    case DLOCK_ETIMEDOUT:
        return EXIT_UNREACHABLE;
    case DLOCK_EBUSY:
    case DLOCK_ENOTOWNER:
        return EXIT_NOT_ACQUIRED;
    case DLOCK_ELOST:
        return EXIT_LOST;
    default:
        return EXIT_FAILURE_OTHER;
    }
}

int cli_fail_msg(int rc, const char *what, const char *msg)
{
    cli_log_end();
    fprintf(stderr, "dlock: %s: %s\n", what, msg != NULL && msg[0] ? msg : dlock_strerror(rc));
    hint(rc);
    return exit_code_of(rc);
}

int cli_errmsg_names(const char *name)
{
    const char *msg = dlock_errmsg(), *at;
    size_t n = strlen(name);

    for (at = strchr(msg, '\''); at != NULL; at = strchr(at + 1, '\'')) {
        if (strncmp(at + 1, name, n) == 0 && at[1 + n] == '\'')
            return 1;
    }
    return 0;
}

int cli_fail_lock(int rc, const char *name)
{
    if (cli_errmsg_names(name)) {
        cli_log_end();
        fprintf(stderr, "dlock: %s\n", dlock_errmsg());
        hint(rc);
        return exit_code_of(rc);
    }
    return cli_fail(rc, name);
}

/* Each capability in the command line's words: the option that asks for
 * it (NULL: the subcommand itself), and what it is. The library's message
 * names the C API (dlock_acquire_for, DLOCK_SIMPLE), for C users. */
static const struct {
    const char *cap; /* dlock_cap_name() */
    const char *option;
    const char *what;
} cap_words[] = {
    {"fixed-lease", "-l/--lease", "a fixed lease"},
    {"extend", "-l/--lease", "a new lease for a held lock"},
    {"adopt", "--owner", "a lock taken over by its owner token (from another process)"},
    {"force-unlock", "--force", "a forced unlock"},
    {"query", NULL, "a lock's status"},
    {"fair", "--fair", "a fair (first come, first served) lock"},
    {"read-write", "--read/--write", "a read-write lock"},
    {"semaphore", "--permits", "a semaphore"},
    {"interop", "--simple", "the interop layout"},
    {"list", NULL, "a list of its locks"},
};

/* The URL of the client cli_open() opened last: its scheme says what to
 * suggest instead. */
static const char *opened_url = "";

static int scheme_is(const char *url, const char *const *schemes)
{
    size_t n = strcspn(url, ":");
    for (const char *const *s = schemes; *s != NULL; s++) {
        if (strlen(*s) == n && strncasecmp(url, *s, n) == 0)
            return 1;
    }
    return 0;
}

/* What can do capability `cap` when the store of url cannot, for "dlock
 * cmd": another mode of the same store, or other stores that can do all
 * the command needs (dlock lock and extend: a fixed lease and adopt; etcd
 * has the lease, not adopt). (The CLI maps it: the library's core names no
 * store.) */
static const char *instead(const char *cap, const char *url, const char *cmd)
{
    static const char *const sql[] = {"mysql", "mariadb", "postgres", "postgresql", NULL};
    static const char *const cluster[] = {"redis+cluster", "rediss+cluster", NULL};
    static const char *const pg[] = {"postgres", "postgresql", NULL};
    static const char *const my[] = {"mysql", "mariadb", NULL};

    if (strcmp(cap, "fixed-lease") == 0 || strcmp(cap, "extend") == 0 ||
        strcmp(cap, "adopt") == 0) {
        if (scheme_is(url, sql))
            return "use ?mode=table, a lock table whose locks have a lease of their own";
        int adopt = strcmp(cap, "adopt") == 0 || strcmp(cmd, "lock") == 0 ||
                    strcmp(cmd, "extend") == 0 || strcmp(cmd, "unlock") == 0;
        return adopt ? "a store that can: redis://, redlock://, sqlite://, or mysql:// or "
                       "postgres:// with ?mode=table"
                     : "a store with leases can: redis://, redlock://, etcd://, sqlite://, or "
                       "mysql:// or postgres:// with ?mode=table";
    }
    /* MariaDB/MySQL's table mode (the default) has every kind */
    int my_kind =
        scheme_is(url, my) && (strcmp(cap, "fair") == 0 || strcmp(cap, "read-write") == 0 ||
                               strcmp(cap, "semaphore") == 0);
    if (my_kind)
        return "drop ?mode=: the lock table (mode=table, the default) has it";
    if (strcmp(cap, "fair") == 0 && scheme_is(url, pg))
        return "use ?mode=table: PostgreSQL's lock table serves its waiters in line";
    if (strcmp(cap, "fair") == 0)
        return "a store that can: redis:// (or redis+sentinel://, redis+cluster://), zk://, "
               "etcd://, or mysql:// or postgres:// with ?mode=table";
    if (strcmp(cap, "read-write") == 0)
        return "a store that can: redis:// (or redis+sentinel://, redis+cluster://), "
               "redlock://, zk://, etcd://, sqlite://, mysql:// (its lock table, the default) "
               "or postgres://";
    if (strcmp(cap, "semaphore") == 0 && scheme_is(url, pg))
        return "use ?mode=table: PostgreSQL's lock table has the semaphore";
    if (strcmp(cap, "semaphore") == 0)
        return "a store that can: redis:// (or redis+sentinel://, redis+cluster://), zk://, "
               "etcd://, sqlite://, mysql:// (its lock table, the default) or postgres:// with "
               "?mode=table";
    if (strcmp(cap, "interop") == 0)
        return scheme_is(url, cluster) ? "use redis:// or redis+sentinel:// (on a cluster the "
                                         "plain key lives in another slot than the lock's)"
                                       : "a store that can: redis://, redis+sentinel:// or "
                                         "redlock://";
    return NULL;
}

/* Whether capability cap is a kind of lock, asked for by a kind option. */
static int is_kind_cap(const char *cap)
{
    return strcmp(cap, "fair") == 0 || strcmp(cap, "read-write") == 0 ||
           strcmp(cap, "semaphore") == 0 || strcmp(cap, "interop") == 0;
}

int cli_fail_unsupported(const char *cmd, const char *option)
{
    cli_log_end();
    const char *msg = dlock_errmsg();
    const char *cut = strstr(msg, " cannot do ");
    const char *cap = strstr(msg, "(capability \"");
    size_t i = 0, caplen = 0;

    if (cap != NULL) {
        cap += strlen("(capability \"");
        caplen = strcspn(cap, "\"");
        for (i = 0; i < sizeof cap_words / sizeof cap_words[0]; i++) {
            if (strlen(cap_words[i].cap) == caplen && strncmp(cap, cap_words[i].cap, caplen) == 0)
                break;
        }
    }
    if (cut == NULL || cap == NULL || i == sizeof cap_words / sizeof cap_words[0]) {
        /* not the library's refusal of a capability: its message as it is */
        fprintf(stderr, "dlock %s: %s%s%s\n", cmd, option != NULL ? option : "",
                option != NULL ? ": " : "", msg[0] != '\0' ? msg : dlock_strerror(DLOCK_ENOTSUP));
        return EXIT_USAGE;
    }
    /* "LABEL: KIND cannot do WHAT (capability "CAP" is missing)", in the
     * command line's words: the option that asked for the capability
     * (with --simple and -l both given, the one refused), and what can
     * do it instead */
    const char *asked = cap_words[i].option != NULL ? cap_words[i].option : option;
    if (is_kind_cap(cap_words[i].cap) && cli_kind_words[0] != '\0')
        asked = cli_kind_words; /* as the user wrote it: -s, --shared, --read */
    else if (is_kind_cap(cap_words[i].cap) && strcmp(cmd, "bench") == 0)
        asked = option; /* bench's --kind */
    const char *other = instead(cap_words[i].cap, opened_url, cmd);
    fprintf(stderr, "dlock %s: %s%s%.*s cannot do %s (capability \"%s\" is missing)%s%s\n", cmd,
            asked != NULL ? asked : "", asked != NULL ? ": " : "", (int) (cut - msg), msg,
            cap_words[i].what, cap_words[i].cap, other != NULL ? ": " : "",
            other != NULL ? other : "");
    return EXIT_USAGE;
}

void cli_note_opened(const char *url)
{
    opened_url = url;
}

int cli_fail_missing_cap(const char *cmd, const char *option, const char *store, unsigned cap,
                         const char *what, const char *then)
{
    cli_log_end();
    const char *name = dlock_cap_name(cap);
    const char *other = instead(name, opened_url, cmd);
    fprintf(stderr, "dlock %s: %s%s%s cannot %s (capability \"%s\" is missing)%s%s%s%s\n", cmd,
            option != NULL ? option : "", option != NULL ? ": " : "", store, what, name,
            other != NULL ? ": " : "", other != NULL ? other : "", then != NULL ? "; " : "",
            then != NULL ? then : "");
    return EXIT_USAGE;
}

int cli_log_level = DLOCK_LOG_WARN;

/* Without -v the library's warnings show (a store that does not answer, a
 * renewal that failed and is retried): a wait on a store that is down is
 * not silent. Its errors (a hold lost) are left out: the command reports
 * those itself. */
int cli_log_level_of(int n)
{
    return n <= 0 ? DLOCK_LOG_WARN : n == 1 ? DLOCK_LOG_INFO : DLOCK_LOG_DEBUG;
}

static atomic_int warnings;  /* printed by log_line: cli_warnings_printed() */
static atomic_int log_ended; /* cli_log_end() */

/* The library's log on stderr, one line each, control characters shown
 * as \xNN (a server's error text is not ours to trust). Written as it is
 * read, with no buffer to cut a long message (a Redlock of many nodes, a
 * long URL), under stderr's lock: a line of another thread does not come
 * between its words. */
static void log_line(int level, const char *msg, void *arg)
{
    (void) arg;
    if (level == DLOCK_LOG_ERROR && cli_log_level == DLOCK_LOG_WARN)
        return; /* without -v: the command's own message says it */
    flockfile(stderr);
    if (atomic_load(&log_ended)) {
        funlockfile(stderr);
        return;
    }
    fprintf(stderr, "dlock: %s: ", dlock_log_level_name(level));
    cli_print_text_to(stderr, msg);
    putc('\n', stderr);
    funlockfile(stderr);
    if (level <= DLOCK_LOG_WARN)
        atomic_fetch_add(&warnings, 1);
}

int cli_warnings_printed(void)
{
    return atomic_load(&warnings);
}

void cli_log_end(void)
{
    /* under stderr's lock: a line being written ends first */
    flockfile(stderr);
    atomic_store(&log_ended, 1);
    funlockfile(stderr);
}

/* What to say before the library's refusal of the URL: which option of
 * the command line, or which URL, its "option KEY..." came from (the
 * library names the URL in its refusal of a value the URL gives, but not
 * in every store's own, nor in one of an option added beside the URL:
 * -L, --label). */
static void open_failure_what(char *what, size_t size)
{
    const char *msg = dlock_errmsg();

    if (strncmp(msg, "option ", strlen("option ")) == 0) {
        const char *key = msg + strlen("option ");
        size_t n = strcspn(key, "=: ");
        for (size_t i = 0; i < nadded; i++) {
            if (strlen(added[i].key) == n && strncmp(key, added[i].key, n) == 0) {
                snprintf(what, size, "cannot open client: %s", added[i].option);
                return;
            }
        }
        if (!url_from_env && !url_defaulted) {
            snprintf(what, size, "cannot open client: the URL of -u");
            return;
        }
    }
    snprintf(what, size, "%s",
             url_from_env ? "$DLOCK_URL (no -u given): cannot open client" : "cannot open client");
}

/* The library's default request timeout (dlock.h: timeout=). */
#define LIBRARY_DEFAULT_TIMEOUT_MS 5000

/* Without timeout= (in the URL or given by an option) the requests of a
 * client whose renewed lease (-L, or the URL's lease=) is shorter than
 * three default timeouts are bounded by a third of the lease: a renewal
 * that gets no answer then fails in time to be retried, and the library
 * has nothing to warn of (a user who gave -L 5s was told to add a
 * timeout= to the URL). A timeout= given stays as given, and is warned of
 * when it is too long. */
static void timeout_follows_lease(const char *url)
{
    char text[64], value[32];
    size_t len;
    int64_t lease_ms;

    if (cli_client_option(url, "timeout", &len) != NULL)
        return;
    const char *lease = cli_client_option(url, "lease", &len);
    if (lease == NULL || len >= sizeof text)
        return;
    memcpy(text, lease, len);
    text[len] = '\0';
    /* a bad lease= is the library's to refuse, as it is */
    if (dlock_parse_duration(text, &lease_ms) != DLOCK_OK || lease_ms < DLOCK_LEASE_MIN_MS ||
        lease_ms / 3 >= LIBRARY_DEFAULT_TIMEOUT_MS)
        return;
    snprintf(value, sizeof value, "%lldms", (long long) (lease_ms / 3));
    cli_add_client_option("timeout", value, "-L");
}

int cli_open(const char *url, dlock_client **out)
{
    timeout_follows_lease(url);
    int rc = dlock_client_open_with(url, client_options != NULL ? client_options + 1 : NULL, out);
    char what[128];

    opened_url = url;
    if (rc != DLOCK_OK) {
        open_failure_what(what, sizeof what);
        return cli_fail(rc, what);
    }
    dlock_client_set_log(*out, cli_log_level, log_line, NULL);
    return 0;
}

/* The commands, for a "did you mean" (commands[] of main() and the words
 * of its own options, --help and --version, which users type bare). */
static const char *const command_words[] = {"run",    "status", "list",    "lock", "unlock",
                                            "extend", "bench",  "version", "help"};
#define NCOMMAND_WORDS (sizeof command_words / sizeof command_words[0])

/* The command words typed may mean, at most max: those it begins (un:
 * unlock; l: list or lock), else the nearest by edits (stauts: status),
 * case aside (LOCK: lock). */
static size_t near_commands(const char *typed, const char **out, size_t max)
{
    char lower[33];
    size_t n = strlen(typed), found = 0;
    int best = 3;

    if (n == 0 || n >= sizeof lower)
        return 0;
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char) tolower((unsigned char) typed[i]);
    for (size_t i = 0; i < NCOMMAND_WORDS && found < max; i++) {
        if (strncmp(command_words[i], lower, n) == 0)
            out[found++] = command_words[i];
    }
    if (found > 0)
        return found;
    for (size_t i = 0; i < NCOMMAND_WORDS; i++) {
        int d = cli_nearness(lower, n, command_words[i]);
        if (d < best) {
            best = d;
            out[0] = command_words[i];
            found = 1;
        }
    }
    return found;
}

/* dlock's own options that word (before any command) may be a misspelling
 * of: "--help" for --helpp, -help or --hel, "--version" for --versoin;
 * NULL for anything else (an option of a command, given before it). */
static const char *near_top_option(const char *word)
{
    const char *bare = word + strspn(word, "-");
    size_t n = strcspn(bare, "=");

    /* no option of a command is near these: --verbose is 4 edits away */
    if (n < 3)
        return NULL;
    if (strncasecmp(bare, "help", n) == 0 || cli_nearness(bare, n, "help") < 3)
        return "--help";
    if (strncasecmp(bare, "version", n) == 0 || cli_nearness(bare, n, "version") < 3)
        return "--version";
    return NULL;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } commands[] = {
        {"run", cmd_run},       {"status", cmd_status}, {"lock", cmd_lock}, {"unlock", cmd_unlock},
        {"extend", cmd_extend}, {"bench", cmd_bench},   {"list", cmd_list},
    };

    if (argc < 2) {
        fputs("usage: dlock COMMAND [OPTIONS] NAME ...\n"
              "commands: run, status, list, lock, unlock, extend, bench; 'dlock --help' says "
              "more\n",
              stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("dlock %s\n", dlock_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    }
    if (argv[1][0] == '-' && near_top_option(argv[1]) != NULL) {
        char shown[64];
        cli_hide_url(argv[1], shown, sizeof shown); /* --bogus=URL */
        fputs("dlock: unknown option '", stderr);
        cli_print_text_to(stderr, shown);
        fprintf(stderr, "': did you mean %s?\nTry 'dlock --help'.\n", near_top_option(argv[1]));
        return EXIT_USAGE;
    }
    if (argv[1][0] == '-') {
        /* the command the user gave later on the line (dlock -u URL status
         * x), else run, the one most lines mean */
        const char *cmd = "run";
        for (int a = 2; a < argc && strcmp(cmd, "run") == 0; a++) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
                if (strcmp(argv[a], commands[i].name) == 0)
                    cmd = commands[i].name;
            }
        }
        char shown[200];
        cli_hide_url(argv[1], shown, sizeof shown); /* --url=URL: its password */
        fprintf(stderr, "dlock: options go after the command (dlock %s ", cmd);
        cli_print_text_to(stderr, shown);
        fputs(" ...)\nTry 'dlock --help'.\n", stderr);
        return EXIT_USAGE;
    }
    /* a misspelt command: the one meant, as for a misspelt option */
    const char *near[8];
    size_t nnear = near_commands(argv[1], near, sizeof near / sizeof near[0]);
    char shown[200];
    cli_hide_url(argv[1], shown, sizeof shown); /* a URL where the command goes */
    fputs("dlock: unknown command '", stderr);
    cli_print_text_to(stderr, shown);
    if (nnear == 0)
        fputs("': the commands are run, status, list, lock, unlock, extend and bench", stderr);
    for (size_t i = 0; i < nnear; i++)
        fprintf(stderr, "%s%s%s%s",
                i == 0          ? "': did you mean "
                : i + 1 < nnear ? ", "
                                : " or ",
                strcmp(near[i], "version") == 0 || strcmp(near[i], "help") == 0 ? "'dlock --" : "'",
                near[i], i + 1 == nnear ? "'?" : "'");
    fputs("\nTry 'dlock --help'.\n", stderr);
    return EXIT_USAGE;
}
