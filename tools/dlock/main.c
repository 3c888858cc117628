/* SPDX-License-Identifier: MIT */
/* main.c - the dlock command: dispatch, shared helpers, exit codes. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: dlock COMMAND [OPTIONS] NAME ...\n"
    "\n"
    "A distributed lock from the command line, shaped like flock(1).\n"
    "\n"
    "commands:\n"
    "  run     hold a lock while a command runs      dlock run NAME -- COMMAND [ARGS...]\n"
    "                                                dlock run NAME -c 'SHELL COMMAND'\n"
    "  status  show who holds a lock                 dlock status [--json | --check] NAME\n"
    "  list    the locks under a prefix, and holders dlock list [--json] [PREFIX]\n"
    "  lock    take a lock, print its owner token    dlock lock -l SECONDS NAME\n"
    "  unlock  release a lock by owner, or force it  dlock unlock (--owner OWNER | --force) NAME\n"
    "  extend  set the lease of a lock by its owner  dlock extend --owner OWNER -l SECONDS NAME\n"
    "  bench   measure lock throughput (JSON)        dlock bench --help\n"
    "\n"
    "The store is -u URL (after the command: dlock run -u URL NAME -- ...), else\n"
    "$DLOCK_URL, else " DEFAULT_URL ".\n"
    "The library's warnings (a store that does not answer, a renewal retried) go to\n"
    "stderr; every command takes -v for more (waits, hand-overs, retries) and -vv\n"
    "for every step.\n"
    "Run 'dlock COMMAND --help' for a command's options; 'man dlock' for exit codes.\n";

const char *cli_url(const char *flag)
{
    const char *env = getenv("DLOCK_URL");
    if (flag != NULL)
        return flag;
    return env != NULL && env[0] != '\0' ? env : DEFAULT_URL;
}

int cli_duration_ms(const char *text, int64_t *ms)
{
    /* the library's syntax, the same as the URL's: one rule everywhere */
    return dlock_parse_duration(text, ms) == DLOCK_OK ? 0 : -1;
}

void cli_print_text(const char *text)
{
    cli_print_text_to(stdout, text);
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

int cli_fail_msg(int rc, const char *what, const char *msg)
{
    fprintf(stderr, "dlock: %s: %s\n", what, msg != NULL && msg[0] ? msg : dlock_strerror(rc));
    switch (rc) {
    case DLOCK_EINVAL:
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

int cli_log_level = DLOCK_LOG_WARN;

/* Without -v the library's warnings show (a store that does not answer, a
 * renewal that failed and is retried): a wait on a store that is down is
 * not silent. Its errors (a hold lost) are left out: the command reports
 * those itself. */
int cli_log_level_of(int n)
{
    return n <= 0 ? DLOCK_LOG_WARN : n == 1 ? DLOCK_LOG_INFO : DLOCK_LOG_DEBUG;
}

/* The library's log on stderr, one line each, control characters shown
 * as \xNN (a server's error text is not ours to trust). */
static void log_line(int level, const char *msg, void *arg)
{
    char line[1024];
    size_t n = 0;

    (void) arg;
    if (level == DLOCK_LOG_ERROR && cli_log_level == DLOCK_LOG_WARN)
        return; /* without -v: the command's own message says it */
    for (const unsigned char *p = (const unsigned char *) msg; *p != '\0' && n + 5 < sizeof line;
         p++) {
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t) snprintf(line + n, sizeof line - n, "\\x%02x", *p);
        else
            line[n++] = (char) *p;
    }
    line[n] = '\0';
    fprintf(stderr, "dlock: %s: %s\n", dlock_log_level_name(level), line);
}

int cli_open(const char *url, dlock_client **out)
{
    int rc = dlock_client_open(url, out);
    if (rc != DLOCK_OK)
        return cli_fail(rc, "cannot open client");
    dlock_client_set_log(*out, cli_log_level, log_line, NULL);
    return 0;
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
        fputs(usage, stderr);
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
    if (argv[1][0] == '-')
        fprintf(stderr, "dlock: options go after the command (dlock run %s ...)\n%s", argv[1],
                usage);
    else
        fprintf(stderr, "dlock: unknown command '%s'\n%s", argv[1], usage);
    return EXIT_USAGE;
}
