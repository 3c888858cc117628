/* SPDX-License-Identifier: MIT */
/* cli.h - shared pieces of the dlock command-line tool. The tool uses only
 * the public API (include/dlock.h). */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include "dlock.h"

#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes (documented in docs/dlock.1). */
enum {
    EXIT_NOT_ACQUIRED = 1,   /* held by someone else / not the owner / free (status --check);
                                -E changes it where it means a conflict */
    EXIT_USAGE = 64,         /* bad flags, URL, name or duration; a kind of lock or an
                                option the store cannot do (DLOCK_ENOTSUP) */
    EXIT_UNREACHABLE = 69,   /* the server cannot be reached */
    EXIT_FAILURE_OTHER = 70, /* the server refused, answered garbage, or an internal error */
    EXIT_LOST = 75,          /* the lock was lost while the command ran */
    EXIT_CANNOT_EXEC = 126,
    EXIT_NOT_FOUND = 127,
};

#define DEFAULT_URL "redis://127.0.0.1:6379"

/* The kind of lock the options chose (kind.c). */
typedef struct cli_kind {
    unsigned flags;        /* DLOCK_SIMPLE, _FAIR, _READ, _WRITE, or DLOCK_SEMAPHORE */
    unsigned permits;      /* --permits */
    unsigned take;         /* --take (default 1) */
    const char *names[64]; /* -m NAME... */
    size_t nnames;
    char option[64]; /* the option that chose the kind as the user wrote it
                        ("-s", "--read"), "" for the plain mutex */
} cli_kind;

/* Handles a kind option (an option code of options.c): 1 if it was one, 0
 * if not, -1 if its value is bad (a message was printed). */
int cli_kind_option(cli_kind *k, int opt, const char *arg, const char *cmd);
/* Checks the combination: 0, or EXIT_USAGE (a message was printed). */
int cli_kind_check(cli_kind *k, const char *cmd, int allow_multi);
/* The kind's name in messages and documents: "mutex", "fair", "simple",
 * "read-write" or "semaphore". */
const char *cli_kind_name(const cli_kind *k);
/* The option that chose the kind as the user wrote it ("--simple", "-s",
 * "-m"...), NULL for the plain mutex: for a message on what a store cannot
 * do. */
const char *cli_kind_option_text(const cli_kind *k);
/* Opens the handle the options describe. */
int cli_kind_open(dlock_client *c, const cli_kind *k, const char *name, dlock_lock **out);

/* ---------------------------------------------------------------- options */

/* getopt codes of the long-only options (short ones are their letter) */
enum {
    CLI_OPT_SIMPLE = 256,
    CLI_OPT_FAIR,
    CLI_OPT_READ,
    CLI_OPT_WRITE,
    CLI_OPT_PERMITS,
    CLI_OPT_TAKE,
    CLI_OPT_FORCE,
    CLI_OPT_JSON,
    CLI_OPT_CHECK,
    CLI_OPT_GRACE,
    CLI_OPT_LABEL,
};

/* The options a subcommand accepts (options.c), so that one option means
 * the same in every subcommand that takes it. */
enum {
    CLI_URL = 1u << 0,      /* -u, --url */
    CLI_WAIT = 1u << 1,     /* -n, --nonblock; -w, --wait, --timeout */
    CLI_LEASE = 1u << 2,    /* -l, --lease */
    CLI_CONFLICT = 1u << 3, /* -E, --conflict-exit-code */
    CLI_QUIET = 1u << 4,    /* -q, --quiet */
    CLI_KIND = 1u << 5,     /* --simple --fair --read --write --permits */
    CLI_MULTI = 1u << 6,    /* -m, --multi; --take */
    CLI_OWNER = 1u << 7,    /* -o, --owner (alias -t, --token) */
    CLI_FORCE = 1u << 8,    /* --force */
    CLI_JSON = 1u << 9,     /* --json */
    CLI_CHECK = 1u << 10,   /* --check */
    CLI_GRACE = 1u << 11,   /* --grace */
    CLI_SHELL = 1u << 12,   /* -c, --command */
    CLI_LABEL = 1u << 13,   /* --label */
    CLI_RENEWED = 1u << 14, /* -L, --renewed-lease, --ttl */
};

typedef struct cli_opts {
    const char *url;   /* -u, else $DLOCK_URL, else DEFAULT_URL */
    const char *owner; /* --owner / --token */
    const char *shell; /* -c STRING */
    const char *label; /* --label: the client option label= */
    cli_kind kind;
    int64_t wait_ms;  /* DLOCK_WAIT_FOREVER unless -n / -w */
    int64_t lease_ms; /* -l, the fixed lease; 0: none given */
    const char *ttl;  /* -L as given: the client option lease= */
    int64_t grace_ms; /* 5 s */
    int conflict_code;
    int quiet, json, force, check;
    int verbose;  /* -v: 1 (info), -vv: 2 (debug) */
    int dashdash; /* the options ended at "--" (the first operand follows it) */
    /* the last option's value when it was a word of its own ("-u URL",
     * "--owner OWNER"), as in argv, and that option as written: a NAME
     * taken for a value tells the user so */
    const char *value_word;
    char value_of[64];
} cli_opts;

/* The level of the library's log, on stderr, for every client cli_open()
 * opens: off by default (dlock's own messages say what failed), INFO with
 * -v (and so warnings and errors: retries, losses), DEBUG with -vv. Set by
 * cli_parse(). */
extern int cli_log_level;
/* The level for n -v flags. */
int cli_log_level_of(int n);
/* How many warnings of the library's log have been printed (on any
 * thread): a wait that printed some (a store that does not answer) has
 * told the user what goes on. */
int cli_warnings_printed(void);
/* The command reports its failure now: the library's log is dropped from
 * here on, so that the failure's message is the last thing the user reads
 * (a Redlock node's worker logged its connection's debug lines, and a
 * spare node's warning, after the error line: a release sent without
 * waiting, a request that timed out as the round did). What the library
 * says of the failed call itself has been logged before it returned. */
void cli_log_end(void);

/* Parses the options of subcommand argv[0], which accepts `accepted`
 * (CLI_* bits). In-order mode stops at the first operand (dlock run: what
 * follows NAME is the command's); otherwise options and operands may mix.
 * Refuses options of other subcommands and contradictions (-n with -w).
 * Returns -1 and sets *first to the first operand's index, or an exit code
 * to return (0 after --help). */
int cli_parse(int argc, char **argv, unsigned accepted, int in_order, const char *usage,
              cli_opts *o, int *first);

/* Whether word is one of dlock's options as getopt would read it ("-w",
 * "-w5", "-nq", "--wait=5", "--wai"), so that one found where the command
 * should start is told apart from the command. */
int cli_is_option(const char *word);

/* The refusal of a missing NAME in "dlock cmd" (returns EXIT_USAGE).
 * argv[last] is the word before NAME's place (last <= 0: none); when it
 * may have been meant as NAME (cli_word_may_be_name), the message says how
 * it was read: an option's value, or options, and then the form that takes
 * a NAME that starts with '-', "dlock cmd [OPTIONS] -- -NAME" and `after`
 * (" -- COMMAND" for run). */
int cli_missing_name(const char *cmd, const cli_opts *o, char **argv, int last, const char *after);

/* Whether word, the last before NAME's place, may have been meant as NAME:
 * the value of an option that takes free text (-u without "://", --owner
 * that is no owner token, --label), or options written as no option is
 * written out ("-x", "-nx", "--wri"; not "--force"). */
int cli_word_may_be_name(const cli_opts *o, const char *word);

/* Describes how getopt reads the option word `word` ("-x", "-nw5",
 * "--wri") into buf: its options by their long names ("--write",
 * "--nonblock --wait 5"). Returns the number of options. */
int cli_option_reading(const char *word, char *buf, size_t size);

/* How near typed[0..n) is to the known word, for a "did you mean" (of an
 * option, of a subcommand): 0 to 2 edits (insertions, deletions,
 * substitutions, swaps of neighbours), or 3 when it is no near miss (more
 * than 2 edits, or 2 in a word of 3 characters or fewer). */
int cli_nearness(const char *typed, size_t n, const char *known);

/* A usage error of "dlock cmd": prints "dlock CMD: MESSAGE" and a pointer
 * to 'dlock CMD --help' (help itself prints the whole usage), and returns
 * EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The refusal of a NAME given as '' (a shell variable unset, most often);
 * list's empty PREFIX is every lock. */
#define CLI_EMPTY_NAME                                                                             \
    "NAME is '', an empty name (a shell variable that is not set?): give the lock's name"

/* The rules of NAME, the same in every command (docs/dlock.1, NAMES): 0
 * for a name dlock takes, or a message printed and EXIT_USAGE for '' and
 * for '--', the word that ends dlock's options (`option`: "-m " when -m
 * gave it, else ""). A NAME that starts with '-', '-' alone too, goes after
 * a -- of its own. */
int cli_check_name(const char *cmd, const char *option, const char *name);
/* Whether word begins as a URL of one of dlock's schemes ("redis://...",
 * "rediss+sentinel://..."; not "x://y", which may be a lock's name): 1
 * with its scheme in scheme (size n), else 0. A NAME or a PREFIX that
 * looks like one is refused (cli_check_name), the URL not shown past its
 * scheme (it may hold a password). */
int cli_url_like(const char *word, char *scheme, size_t n);

/* The refusal of a URL among the words[0..n) "dlock cmd" took for NAMEs (a
 * word with "://": dlock lock redis://HOST NAME, -u forgotten): says so
 * and returns EXIT_USAGE; -1 when there is none. */
int cli_url_among_names(const char *cmd, int n, char **words);

/* guard.c: runs as `dlock run`'s guard, between dlock and COMMAND, and
 * never returns: start(arg) forks the command; control is the pipe dlock
 * writes signal numbers to (each sent to the command and every process
 * descended from the guard), whose end of file (dlock died) is a stop
 * (CLI_GUARD_STOP); exits with the command's status (128 + N for a signal
 * N). */
_Noreturn void cli_guard_run(int control, int64_t grace_ms, pid_t (*start)(void *), void *arg);
/* On the guard's control pipe: a stop (a lost lock): SIGTERM to the tree,
 * SIGKILL after grace_ms, and the guard exits only once the tree is gone
 * (a step that ignores SIGTERM outlives the command). Any other byte is a
 * signal to pass on. */
#define CLI_GUARD_STOP 0

/* The URL: -u, else $DLOCK_URL, else DEFAULT_URL. */
const char *cli_url(const char *flag);
/* Where the URL cli_url() returned came from, for messages: "$DLOCK_URL",
 * or "the URL" (-u, or the default). */
const char *cli_url_source(void);

/* Adds the command line's `option` ("--label") as the client option `key`
 * ("label") of value `value`, given to the library beside the URL
 * (dlock_client_open_with), never in it: the URL stays as the user gave it,
 * in messages and in a command's $DLOCK_URL. A refusal of that key names
 * the option the user gave. */
void cli_add_client_option(const char *key, const char *value, const char *option);
/* The value of option `key` for the client cli_open() opens (as written,
 * up to the next '&'), or NULL; *len gets its length: the command line's
 * (cli_add_client_option), else url's. */
const char *cli_client_option(const char *url, const char *key, size_t *len);

/* The value of option `key` in url's query string (as written, up to the
 * next '&'), or NULL; *len gets its length. */
const char *cli_url_option(const char *url, const char *key, size_t *len);

/* Reads the duration `text` of option `opt` of "dlock cmd" with
 * dlock_parse_duration() ("1.5", "250ms", "2s", "1m", "1h"; plain numbers
 * are seconds, as with flock -w; the URL's options read the same), at
 * least min_ms and at most DLOCK_DURATION_MAX_MS. Returns 0, or prints what
 * is wrong (an unknown unit, the units there are; too short or too long)
 * and returns EXIT_USAGE. */
int cli_duration_option(const char *cmd, const char *opt, const char *text, int64_t min_ms,
                        int64_t *ms);

/* ---------------------------------------------------------------- output */

/* Prints "dlock: <what>: <detail>" and returns the exit code for rc. */
int cli_fail(int rc, const char *what);
/* As cli_fail(), with the detail msg (say, from another thread). */
int cli_fail_msg(int rc, const char *what, const char *msg);
/* As cli_fail() for a call on lock `name`: "dlock: <detail>" when the
 * detail names the lock already ('NAME'), else "dlock: NAME: <detail>". */
int cli_fail_lock(int rc, const char *name);
/* Whether dlock_errmsg() names lock `name` ('NAME'). */
int cli_errmsg_names(const char *name);
/* What the store cannot do, asked for by the user's `option` of "dlock
 * cmd" (DLOCK_ENOTSUP: the library's detail names the store and the
 * capability): "dlock CMD: OPTION: <detail>" ("dlock CMD: <detail>" when
 * option is NULL: the subcommand itself), and EXIT_USAGE. */
int cli_fail_unsupported(const char *cmd, const char *option);
/* The same refusal made by the command itself: "dlock CMD: OPTION: STORE
 * cannot WHAT (capability "CAP" is missing): <what can>; THEN" (no
 * "OPTION: " when option is NULL, no "; THEN" when then is NULL), and
 * EXIT_USAGE. */
int cli_fail_missing_cap(const char *cmd, const char *option, const char *store, unsigned cap,
                         const char *what, const char *then);
/* The URL of a client opened without cli_open(): its scheme says what a
 * refusal suggests instead. */
void cli_note_opened(const char *url);

/* The kind option of the command line as the user wrote it ("" if none),
 * set by cli_parse(): cli_fail_unsupported() names it when the store
 * cannot do that kind. */
extern char cli_kind_words[64];

/* Opens the client, or prints why not and returns the exit code. */
int cli_open(const char *url, dlock_client **out);

/* Prints text for a terminal: control characters as \xNN. */
void cli_print_text(const char *text);
void cli_print_text_to(FILE *f, const char *text);
/* word as a message may show it (size n): a word with "://" (a URL, a
 * --url=URL) up to and including the "://", then "...": the rest may hold a
 * password; any other word whole. */
void cli_hide_url(const char *word, char *out, size_t n);

/* JSON documents (json.c). CLI_JSON_VERSION is every document's "version":
 * raised when a field changes meaning or goes away (a new field does not
 * raise it). A number that can exceed 2^53 (a fence: ZooKeeper's are near
 * 2^61), which JSON tools read as a double and round, comes twice: "F" as a
 * number, for the documents' earlier readers, and "F_str" as its decimal
 * string, exact for every reader (cli_json_add_u64). */
#define CLI_JSON_VERSION 1
/* A new document: an object holding "version". */
json_object *cli_json_doc(void);
/* A JSON string of text made valid UTF-8; may_be_cut: text may have been
 * cut at the end of a buffer (an incomplete last character is dropped). */
json_object *cli_json_text(const char *text, int may_be_cut);
/* A number printed with `decimals` decimals (an integer for 0). */
json_object *cli_json_fixed(double v, int decimals);
/* Adds "key": v and "key_str": "v" to doc. */
void cli_json_add_u64(json_object *doc, const char *key, uint64_t v);
/* Prints doc on one line and frees it. */
void cli_json_print(json_object *doc);
/* text with every byte that is not part of well-formed UTF-8 replaced by
 * U+FFFD (malloc'd). */
char *cli_utf8_clean(const char *text, int may_be_cut);

/* who.c: the holders of a lock, as a JSON array (*rc: the query's code),
 * or printed a line each ("holder: TOKEN on HOST, pid N, ..."). */
json_object *cli_holders_json(dlock_client *c, const char *name, unsigned flags, int *rc);
int cli_print_holders(dlock_client *c, const char *name, unsigned flags);

/* lease.c: what holds a lock when no lease of its own runs out, in words,
 * and the -v reports of an acquisition and a release. */
/* Prints the -v line of an acquisition of kind k that took took_us: the
 * kind ("read lock 'x'"), its fence, and its lease (fixed_ms > 0: fixed;
 * else renewed, from url's lease=, or the store's session); left_held:
 * dlock lock, which leaves it held. */
void cli_report_acquired(dlock_client *c, const dlock_lock *l, const cli_kind *k, const char *url,
                         int64_t fixed_ms, int64_t took_us, int left_held);
/* Prints the -v line of a release, after held_us held. */
void cli_report_released(const dlock_lock *l, const cli_kind *k, int64_t held_us);
/* What keeps held lock st (of kind flags, read through url) held, for the
 * status line "lease left: ...", without a newline: the lease left, or
 * what holds it when no lease of its own runs out (its holder's session),
 * and on an SQL store's session mode, a lease left by a holder whose
 * session is gone. */
void cli_print_lease_left(dlock_client *c, const char *url, unsigned flags, const dlock_status *st);
/* Whether held lock st lives as long as its holder's session: no lease of
 * its own on a session store, or, on a store without sessions, a holder
 * that another mode's session holds (MariaDB's table mode sees session
 * mode's holders). */
int cli_held_by_session(unsigned caps, unsigned flags, const dlock_status *st);
/* A monotonic clock in microseconds. */
int64_t cli_now_us(void);

/* waiting.c: after CLI_WAITING_NOTICE_MS of an acquisition that waits
 * without a bound, one line on stderr: the lock waited for, who holds it
 * (host, pid, label, as the store has it recorded) and how to bound or
 * follow the wait. Not with -q, -v (the library's log follows the wait),
 * -n or -w, nor after the wait printed a warning (the store's trouble is
 * told, and asking it who holds the lock would only hold the exit up).
 * cli_waiting_start() is called before the acquisition (NULL: nothing to
 * stop), cli_waiting_stop() after it returns, with its result; name must
 * live as long as the process. cli_waiting_stop() returns 1 when the store
 * did not answer (rc DLOCK_EUNREACHABLE or DLOCK_ETIMEDOUT) while the
 * thread is still asking it, which would hold the exit up by a connect
 * timeout: the thread is left running, and the caller must then leave the
 * client open (the process's exit ends both); 0 otherwise. */
#define CLI_WAITING_NOTICE_MS 1000
typedef struct cli_waiting cli_waiting;
cli_waiting *cli_waiting_start(dlock_client *c, const cli_opts *o, const char *name);
int cli_waiting_stop(cli_waiting *w, int rc);
/* After an acquisition that gave up (-n, -w: DLOCK_EBUSY, DLOCK_ETIMEDOUT)
 * and said so: one line on stderr, who holds the lock as the waiting line
 * says it ("dlock: lock 'NAME' is held by pid N on HOST, label L"), from
 * one query (and, when the kind asked for has no holder, one per other
 * kind the store has: the holder of a name held as another kind). Nothing
 * with -q, when the store has had trouble answering (a warning was
 * printed), or when it names no holder (freed since). */
void cli_print_who_holds(dlock_client *c, const cli_opts *o, const char *name);
/* Ends the process with code when cli_waiting_stop() left its thread
 * asking the store: stdio flushed, no exit handlers or library
 * destructors (they would run under that thread: libpq's Kerberos
 * libraries tear down what it uses). Never returns. */
_Noreturn void cli_exit_beside_thread(int code);

int cmd_run(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_unlock(int argc, char **argv);
int cmd_lock(int argc, char **argv);
int cmd_extend(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
