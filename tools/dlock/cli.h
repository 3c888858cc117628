/* cli.h - shared pieces of the dlock command-line tool. The tool uses only
 * the public API (include/dlock.h). */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include "dlock.h"

#include <stdint.h>

/* Exit codes (documented in docs/dlock.1). */
enum {
    EXIT_NOT_ACQUIRED = 1,   /* held by someone else / not the owner (-E changes it for run) */
    EXIT_USAGE = 64,         /* bad flags, URL, name or duration */
    EXIT_UNREACHABLE = 69,   /* the server cannot be reached */
    EXIT_FAILURE_OTHER = 70, /* the server refused, answered garbage, or an internal error */
    EXIT_LOST = 75,          /* the lock was lost while the command ran */
    EXIT_CANNOT_EXEC = 126,
    EXIT_NOT_FOUND = 127,
};

#define DEFAULT_URL "redis://127.0.0.1:6379"

/* Common options of the subcommands. */
typedef struct cli_common {
    const char *url;
    int simple;
    int json;
} cli_common;

/* The kind of lock the options chose (kind.c). */
typedef struct cli_kind {
    unsigned flags;        /* DLOCK_SIMPLE, _FAIR, _READ, _WRITE, or DLOCK_SEMAPHORE */
    unsigned permits;      /* --permits */
    unsigned take;         /* --take (default 1) */
    const char *names[64]; /* -m NAME... */
    size_t nnames;
} cli_kind;

/* getopt codes of the long-only kind options */
enum {
    CLI_OPT_SIMPLE = 256,
    CLI_OPT_FAIR,
    CLI_OPT_READ,
    CLI_OPT_WRITE,
    CLI_OPT_PERMITS,
    CLI_OPT_TAKE,
};
#define CLI_KIND_OPTIONS                                                                           \
    {"simple", no_argument, NULL, CLI_OPT_SIMPLE}, {"fair", no_argument, NULL, CLI_OPT_FAIR},      \
        {"read", no_argument, NULL, CLI_OPT_READ}, {"write", no_argument, NULL, CLI_OPT_WRITE},    \
        {"permits", required_argument, NULL, CLI_OPT_PERMITS},                                     \
        {"take", required_argument, NULL, CLI_OPT_TAKE},                                           \
    {                                                                                              \
        "multi", required_argument, NULL, 'm'                                                      \
    }

/* Handles a kind option: 1 if it was one, 0 if not, -1 if its value is bad
 * (a message was printed). */
int cli_kind_option(cli_kind *k, int opt, const char *arg, const char *cmd);
/* Checks the combination: 0, or EXIT_USAGE (a message was printed). */
int cli_kind_check(cli_kind *k, const char *cmd, int allow_multi);
/* Opens the handle the options describe. */
int cli_kind_open(dlock_client *c, const cli_kind *k, const char *name, dlock_lock **out);

/* The URL: -u, else $DLOCK_URL, else DEFAULT_URL. */
const char *cli_url(const char *flag);

/* Parses "1.5", "250ms", "2s", "1m" into milliseconds (plain numbers are
 * seconds, as with flock -w). Returns 0, or -1 if malformed or negative. */
int cli_duration_ms(const char *text, int64_t *ms);

/* Prints "dlock: <what>: <detail>" and returns the exit code for rc. */
int cli_fail(int rc, const char *what);
/* As cli_fail(), with the detail msg (say, from another thread). */
int cli_fail_msg(int rc, const char *what, const char *msg);

/* Opens the client, or prints why not and returns the exit code. */
int cli_open(const char *url, dlock_client **out);

int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_unlock(int argc, char **argv);
int cmd_lock(int argc, char **argv);
int cmd_extend(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
