/* SPDX-License-Identifier: MIT */
/* options.c - the options of run, lock, unlock, extend and status, parsed
 * in one place so that an option means the same wherever it is accepted.
 *
 * Every subcommand's getopt knows every option: one that belongs to another
 * subcommand is refused by name ("--force is not an option of dlock
 * status"), not as unknown. Contradictions are refused, not resolved by
 * order: -n with -w, -l with -L, --json with -q, -c twice. -v (more: -vv)
 * is every subcommand's. */
#include "cli.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct option_spec {
    const char *name; /* long name */
    int has_arg;
    int code;     /* getopt code: the short letter, or CLI_OPT_* */
    unsigned bit; /* CLI_* that accepts it; 0: every subcommand (--help) */
} option_spec;

static const option_spec specs[] = {
    {"url", required_argument, 'u', CLI_URL},
    {"nonblock", no_argument, 'n', CLI_WAIT},
    {"wait", required_argument, 'w', CLI_WAIT},
    {"timeout", required_argument, 'w', CLI_WAIT},
    {"lease", required_argument, 'l', CLI_LEASE},
    {"renewed-lease", required_argument, 'L', CLI_RENEWED},
    {"ttl", required_argument, 'L', CLI_RENEWED}, /* etcdctl lock's name */
    {"conflict-exit-code", required_argument, 'E', CLI_CONFLICT},
    {"quiet", no_argument, 'q', CLI_QUIET},
    {"simple", no_argument, CLI_OPT_SIMPLE, CLI_KIND},
    {"fair", no_argument, CLI_OPT_FAIR, CLI_KIND},
    {"read", no_argument, CLI_OPT_READ, CLI_KIND},
    {"write", no_argument, CLI_OPT_WRITE, CLI_KIND},
    {"shared", no_argument, 's', CLI_KIND},    /* flock's name of --read */
    {"exclusive", no_argument, 'x', CLI_KIND}, /* flock's name of --write */
    {"permits", required_argument, CLI_OPT_PERMITS, CLI_KIND},
    {"take", required_argument, CLI_OPT_TAKE, CLI_MULTI},
    {"multi", required_argument, 'm', CLI_MULTI},
    {"owner", required_argument, 'o', CLI_OWNER},
    {"token", required_argument, 't', CLI_OWNER}, /* the old name of --owner */
    {"force", no_argument, CLI_OPT_FORCE, CLI_FORCE},
    {"json", no_argument, CLI_OPT_JSON, CLI_JSON},
    {"check", no_argument, CLI_OPT_CHECK, CLI_CHECK},
    {"grace", required_argument, CLI_OPT_GRACE, CLI_GRACE},
    {"command", required_argument, 'c', CLI_SHELL},
    {"label", required_argument, CLI_OPT_LABEL, CLI_LABEL},
    {"verbose", no_argument, 'v', 0},
    {"help", no_argument, 'h', 0},
};
#define NSPECS (sizeof specs / sizeof specs[0])

static const option_spec *spec_of(int code)
{
    for (size_t i = 0; i < NSPECS; i++) {
        if (specs[i].code == code)
            return &specs[i];
    }
    return NULL;
}

/* How the user wrote option `code`: "--name" or "-x". */
static void option_text(int code, int longindex, char *buf, size_t size)
{
    if (longindex >= 0)
        snprintf(buf, size, "--%s", specs[longindex].name);
    else
        snprintf(buf, size, "-%c", code);
}

static int bad_value(const char *cmd, const char *opt, const char *arg, const char *want)
{
    fprintf(stderr, "dlock %s: %s %s: %s\n", cmd, opt, arg, want);
    return EXIT_USAGE;
}

/* The edit distance of a[0..n) and b (insertions, deletions, substitutions
 * and swaps of neighbours, each 1), or 3 when it is more than 2. */
static int distance(const char *a, size_t n, const char *b)
{
    enum { MAXLEN = 32 };
    int d[MAXLEN + 1][MAXLEN + 1];
    size_t m = strlen(b);

    if (n > MAXLEN || m > MAXLEN || (n > m ? n - m : m - n) > 2)
        return 3;
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int) i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int) j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m] > 2 ? 3 : d[n][m];
}

int cli_nearness(const char *typed, size_t n, const char *known)
{
    int d = distance(typed, n, known);
    /* a short word is near everything short: 1 edit at most there */
    return d == 2 && n <= 3 ? 3 : d;
}

/* After getopt's "unrecognized option '--leese'": the long option of the
 * subcommand (which accepts `accepted`) that word is likely a misspelling
 * of, if one is near (1 or 2 edits; 1 for a short word). */
static void suggest(const char *cmd, const char *word, unsigned accepted)
{
    const char *near = NULL;
    int best = 3;

    if (strncmp(word, "--", 2) != 0 || cli_is_option(word))
        return; /* a short option, or an ambiguous or incomplete long one */
    size_t n = strcspn(word + 2, "=");
    for (size_t i = 0; i < NSPECS; i++) {
        if (specs[i].bit != 0 && !(accepted & specs[i].bit))
            continue;
        int d = cli_nearness(word + 2, n, specs[i].name);
        if (d < best) {
            best = d;
            near = specs[i].name;
        }
    }
    if (near != NULL)
        fprintf(stderr, "dlock %s: did you mean --%s?\n", cmd, near);
}

int cli_is_option(const char *word)
{
    if (word[0] != '-' || word[1] == '\0')
        return 0;
    if (word[1] == '-') { /* getopt_long takes any unambiguous prefix */
        size_t n = strcspn(word + 2, "=");
        for (size_t i = 0; n > 0 && i < NSPECS; i++) {
            if (strncmp(specs[i].name, word + 2, n) == 0)
                return 1;
        }
        return 0;
    }
    for (size_t i = 0; i < NSPECS; i++) {
        if (specs[i].code == (unsigned char) word[1])
            return 1;
    }
    return 0;
}

/* The long name of short option letter c, as the usages name it: -x is
 * --write (--exclusive, flock's name, is its alias), -s --read, -t --owner. */
static const char *long_name_of(int c)
{
    const option_spec *spec = spec_of(c);

    if (c == 'x')
        return "write";
    if (c == 's')
        return "read";
    if (c == 't')
        return "owner";
    return spec != NULL ? spec->name : NULL;
}

/* Appends "--name" (and " value") to buf. */
static void append_reading(char *buf, size_t size, const char *name, const char *value)
{
    size_t used = strlen(buf);

    snprintf(buf + used, size - used, "%s--%s%s%s", used > 0 ? " " : "", name,
             value != NULL ? " " : "", value != NULL ? value : "");
}

int cli_option_reading(const char *word, char *buf, size_t size)
{
    int n = 0;

    buf[0] = '\0';
    if (word[0] != '-' || word[1] == '\0')
        return 0;
    if (word[1] == '-') { /* as getopt_long: the name, or a prefix of one */
        size_t len = strcspn(word + 2, "=");
        const option_spec *found = NULL;
        for (size_t i = 0; len > 0 && i < NSPECS; i++) {
            if (strncmp(specs[i].name, word + 2, len) != 0)
                continue;
            if (found == NULL || strlen(specs[i].name) == len)
                found = &specs[i];
        }
        if (found == NULL)
            return 0;
        append_reading(buf, size, found->name, word[2 + len] == '=' ? word + 3 + len : NULL);
        return 1;
    }
    for (const char *p = word + 1; *p != '\0'; p++) {
        const option_spec *spec = spec_of((unsigned char) *p);
        if (spec == NULL)
            return n;
        n++;
        if (spec->has_arg == required_argument) { /* the rest of the word is its value */
            append_reading(buf, size, long_name_of(spec->code), p[1] != '\0' ? p + 1 : NULL);
            return n;
        }
        append_reading(buf, size, long_name_of(spec->code), NULL);
    }
    return n;
}

/* text for a message, control characters as \xNN, cut to fit out. */
static void printable(const char *word, char *out, size_t size)
{
    size_t used = 0;
    char text[200];

    cli_hide_url(word, text, sizeof text); /* (a URL's password) */
    for (const unsigned char *p = (const unsigned char *) text; *p != '\0' && used + 5 < size;
         p++) {
        if (*p < 0x20 || *p == 0x7f)
            used += (size_t) snprintf(out + used, size - used, "\\x%02x", *p);
        else
            out[used++] = (char) *p;
    }
    out[used] = '\0';
}

/* After getopt's "invalid option -- 'f'" (a short option it does not
 * know, in a word at argv[from] or after): the word may be a NAME that
 * starts with '-' (dlock run -foo -- cmd), which goes after a -- of its
 * own. */
static void dash_name_hint(const char *cmd, int argc, char **argv, int from)
{
    const char *what = strcmp(cmd, "list") == 0 ? "PREFIX" : "the lock's name";
    char text[200];

    /* in-order (run) getopt reads argv[from]; permuting, it steps over the
     * operands before the next option word */
    while (from < argc && (argv[from][0] != '-' || argv[from][1] == '\0'))
        from++;
    if (from >= argc || argv[from][1] == '-')
        return;
    printable(argv[from], text, sizeof text);
    fprintf(stderr,
            "dlock %s: if %s is %s, it goes after a -- of its own: dlock %s [OPTIONS] -- %s%s\n",
            cmd, text, what, cmd, text, strcmp(cmd, "run") == 0 ? " -- COMMAND [ARGS...]" : "");
}

/* Whether value is the free text of option `option` (as written) that a
 * NAME may have been taken for: -u's when it is no URL, --owner's when it
 * is no owner token, --label's. */
static int value_may_be_name(const char *option, const char *value)
{
    size_t hex = strspn(value, "0123456789abcdef");

    if (strcmp(option, "-u") == 0 || strcmp(option, "--url") == 0)
        return strstr(value, "://") == NULL;
    if (strcmp(option, "-o") == 0 || strcmp(option, "-t") == 0 || strcmp(option, "--owner") == 0 ||
        strcmp(option, "--token") == 0)
        return !(hex == 32 && value[hex] == '\0');
    return strcmp(option, "--label") == 0;
}

int cli_word_may_be_name(const cli_opts *o, const char *word)
{
    char reading[200];

    if (word == o->value_word)
        return value_may_be_name(o->value_of, word);
    /* -x, -nx, --wri: not an option written out whole (--force) */
    if (cli_option_reading(word, reading, sizeof reading) == 0)
        return 0;
    return word[1] != '-' || strcmp(word, reading) != 0;
}

int cli_missing_name(const char *cmd, const cli_opts *o, char **argv, int last, const char *after)
{
    const char *word = last > 0 ? argv[last] : NULL;
    char text[200], reading[200];
    int n = 0;

    if (word == NULL || !cli_word_may_be_name(o, word))
        return cli_usage_error(cmd, "missing NAME: give the lock's name (a shell variable that is "
                                    "not set, unquoted, is no word at all)");
    printable(word, text, sizeof text);
    if (word == o->value_word)
        return cli_usage_error(cmd,
                               "missing NAME: '%s' is the value of %s (if it is the lock's name, "
                               "the value of %s is missing: a shell variable that is not set?)",
                               text, o->value_of, o->value_of);
    n = cli_option_reading(word, reading, sizeof reading);
    char shown[200];
    cli_hide_url(reading, shown, sizeof shown); /* --url URL: its password */
    return cli_usage_error(cmd,
                           "missing NAME: '%s' is read as dlock's option%s %s (a NAME that starts "
                           "with '-' goes after a -- of its own: dlock %s [OPTIONS] -- %s%s)",
                           text, n > 1 ? "s" : "", shown, cmd, text, after);
}

int cli_url_like(const char *word, char *scheme, size_t n)
{
    /* the first word of dlock's schemes (redis, rediss+sentinel, ...) */
    static const char *const stores[] = {"redis",     "rediss",  "redlock",  "zk",
                                         "zookeeper", "etcd",    "postgres", "postgresql",
                                         "mysql",     "mariadb", "sqlite"};
    const char *sep = strstr(word, "://");
    size_t len = sep != NULL ? (size_t) (sep - word) : 0, base = strcspn(word, "+");
    if (len == 0 || len >= n)
        return 0;
    if (base > len)
        base = len; /* (a '+' past the scheme is the URL's) */
    for (size_t i = 0; i < len; i++) {
        if (!isalnum((unsigned char) word[i]) && strchr("+.-", word[i]) == NULL)
            return 0;
    }
    for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
        if (strlen(stores[i]) == base && strncasecmp(word, stores[i], base) == 0) {
            snprintf(scheme, n, "%.*s", (int) len, word);
            return 1;
        }
    }
    return 0;
}

int cli_check_name(const char *cmd, const char *option, const char *name)
{
    char scheme[32];
    if (cli_url_like(name, scheme, sizeof scheme))
        /* its scheme only: the rest may hold a password */
        return cli_usage_error(cmd,
                               "%s'%s://...' looks like a URL, not a lock NAME; a URL goes "
                               "with -u URL (or $DLOCK_URL)",
                               option, scheme);
    if (name[0] == '\0')
        return cli_usage_error(cmd, "%s" CLI_EMPTY_NAME, option);
    if (strcmp(name, "--") == 0 && option[0] != '\0')
        return cli_usage_error(cmd,
                               "%s'--' is no lock name: it is the word that ends dlock's options: "
                               "give another NAME",
                               option);
    if (strcmp(name, "--") == 0)
        return cli_usage_error(cmd,
                               "'--' is no lock name: it is the word that ends dlock's options "
                               "(give another NAME; one that starts with '-' goes after a -- of "
                               "its own: dlock %s [OPTIONS] -- -NAME)",
                               cmd);
    return 0;
}

/* Gives key=value to the client beside the URL (cli_add_client_option),
 * or prints a message and returns -1 when a -u URL sets key itself: the
 * user's own word twice (a $DLOCK_URL's is a default the command line
 * overrides: the library takes the client option over the URL's; and so is
 * a -u URL that is $DLOCK_URL's text, as a command under `dlock run` hands
 * it on: -u "$DLOCK_URL"). */
static int client_option(const char *cmd, const char *url, const char *key, const char *value,
                         const char *option)
{
    size_t len;
    const char *in_url = cli_url_option(url, key, &len);
    int64_t a, b;
    char text[64];

    const char *env = getenv("DLOCK_URL");
    int handed =
        strcmp(cli_url_source(), "$DLOCK_URL") == 0 || (env != NULL && strcmp(env, url) == 0);
    if (in_url != NULL && !handed) {
        snprintf(text, sizeof text, "%.*s", (int) (len < sizeof text ? len : sizeof text - 1),
                 in_url);
        int same = strcmp(text, value) == 0 ||
                   (strcmp(key, "lease") == 0 && dlock_parse_duration(text, &a) == DLOCK_OK &&
                    dlock_parse_duration(value, &b) == DLOCK_OK && a == b);
        fprintf(stderr, "dlock %s: %s ", cmd, option);
        cli_print_text_to(stderr, value);
        fprintf(stderr, " and %s's %s=", cli_url_source(), key);
        cli_print_text_to(stderr, text);
        fprintf(stderr, " %s: give one\n", same ? "say the same thing" : "contradict each other");
        return -1;
    }
    cli_add_client_option(key, value, option);
    return 0;
}

char cli_kind_words[64];

int cli_parse(int argc, char **argv, unsigned accepted, int in_order, const char *usage,
              cli_opts *o, int *first)
{
    struct option longopts[NSPECS + 1];
    char shortopts[2 * NSPECS + 2] = "", *p = shortopts;
    const char *cmd = argv[0];
    char prog[64];
    int nonblock = 0, wait = 0, opt, longindex;

    memset(o, 0, sizeof *o);
    o->wait_ms = DLOCK_WAIT_FOREVER;
    o->grace_ms = 5000;
    o->conflict_code = EXIT_NOT_ACQUIRED;
    if (in_order)
        *p++ = '+'; /* stop at NAME: what follows is the command's */
    for (size_t i = 0; i < NSPECS; i++) {
        longopts[i] = (struct option){specs[i].name, specs[i].has_arg, NULL, specs[i].code};
        if (specs[i].code < 256 && strchr(shortopts, specs[i].code) == NULL) {
            *p++ = (char) specs[i].code;
            if (specs[i].has_arg == required_argument)
                *p++ = ':';
            *p = '\0';
        }
    }
    *p = '\0';
    longopts[NSPECS] = (struct option){NULL, 0, NULL, 0};

    snprintf(prog, sizeof prog, "dlock %s", cmd);
    optind = 1;
    for (;;) {
        int before = optind;
        longindex = -1;
        /* getopt's own messages begin with argv[0]: "dlock run", as ours */
        argv[0] = prog;
        opt = getopt_long(argc, argv, shortopts, longopts, &longindex);
        argv[0] = (char *) cmd;
        if (opt == -1) {
            /* it steps over a "--" that ends the options, and only then */
            o->dashdash = optind == before + 1 && strcmp(argv[before], "--") == 0;
            break;
        }
        const option_spec *spec = spec_of(opt);
        char name[64];
        char *end;

        if (spec == NULL) { /* getopt said what was wrong */
            suggest(cmd, optind > 1 && optind <= argc ? argv[optind - 1] : "", accepted);
            if (optopt != 0 && spec_of(optopt) == NULL)
                dash_name_hint(cmd, argc, argv, before);
            fprintf(stderr, "Try 'dlock %s --help'.\n", cmd);
            return EXIT_USAGE;
        }
        option_text(opt, longindex, name, sizeof name);
        if (optarg != NULL && optind > 1 && optarg == argv[optind - 1]) {
            o->value_word = optarg;
            snprintf(o->value_of, sizeof o->value_of, "%s", name);
        }
        if (spec->bit == CLI_RENEWED && !(accepted & CLI_RENEWED) && (accepted & CLI_LEASE))
            /* lock, extend: a renewed lease is run's, theirs is fixed */
            return cli_usage_error(
                cmd,
                "%s is not an option of 'dlock %s': did you mean -l? (-l SECONDS is the fixed "
                "lease %s; %s, a lease renewed while dlock runs, is dlock run's)",
                name, cmd,
                strcmp(cmd, "lock") == 0 ? "of a lock left held" : "a held lock is given", name);
        if (spec->bit != 0 && !(accepted & spec->bit))
            return cli_usage_error(cmd, "%s is not an option of 'dlock %s'", name, cmd);
        int k = cli_kind_option(&o->kind, opt, optarg, cmd);
        if (k < 0)
            return EXIT_USAGE;
        if (k > 0) {
            if (opt != CLI_OPT_TAKE && (opt != 'm' || o->kind.option[0] == '\0'))
                snprintf(o->kind.option, sizeof o->kind.option, "%s", name);
            snprintf(cli_kind_words, sizeof cli_kind_words, "%s", o->kind.option);
            continue;
        }
        switch (opt) {
        case 'u':
            o->url = optarg;
            break;
        case 'n':
            nonblock = 1;
            o->wait_ms = 0;
            break;
        case 'w':
            wait = 1;
            if (cli_duration_option(cmd, name, optarg, 0, &o->wait_ms) != 0)
                return EXIT_USAGE;
            break;
        case 'l':
            if (cli_duration_option(cmd, name, optarg, DLOCK_LEASE_MIN_MS, &o->lease_ms) != 0)
                return EXIT_USAGE;
            break;
        case 'L': {
            int64_t ms;
            if (cli_duration_option(cmd, name, optarg, DLOCK_LEASE_MIN_MS, &ms) != 0)
                return EXIT_USAGE;
            o->ttl = optarg;
            break;
        }
        case 'E': {
            long code = strtol(optarg, &end, 10);
            if (*end != '\0' || end == optarg || code < 0 || code > 255)
                return bad_value(cmd, name, optarg, "want an exit code 0..255");
            o->conflict_code = (int) code;
            break;
        }
        case 'q':
            o->quiet = 1;
            break;
        case 'o':
        case 't':
            o->owner = optarg;
            break;
        case CLI_OPT_FORCE:
            o->force = 1;
            break;
        case CLI_OPT_JSON:
            o->json = 1;
            break;
        case CLI_OPT_CHECK:
            o->check = 1;
            break;
        case CLI_OPT_GRACE:
            if (cli_duration_option(cmd, name, optarg, 0, &o->grace_ms) != 0)
                return EXIT_USAGE;
            break;
        case 'c':
            if (o->shell != NULL) {
                fprintf(stderr, "dlock %s: -c given twice: give one command string\n", cmd);
                return EXIT_USAGE;
            }
            o->shell = optarg;
            break;
        case CLI_OPT_LABEL:
            o->label = optarg;
            break;
        case 'v':
            o->verbose++;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        }
    }
    if (nonblock && wait) {
        fprintf(stderr,
                "dlock %s: -n (do not wait) and -w (wait so long) contradict each other: give "
                "one\n",
                cmd);
        return EXIT_USAGE;
    }
    if (o->lease_ms > 0 && o->ttl != NULL) {
        fprintf(stderr,
                "dlock %s: -l (a fixed lease) and -L (a renewed lease) contradict each other: "
                "give one\n",
                cmd);
        return EXIT_USAGE;
    }
    if (o->json && o->quiet) {
        fprintf(stderr, "dlock %s: --json prints a document and -q prints nothing: give one\n",
                cmd);
        return EXIT_USAGE;
    }
    if (cli_kind_check(&o->kind, cmd, (accepted & CLI_MULTI) != 0) != 0)
        return EXIT_USAGE;
    cli_log_level = cli_log_level_of(o->verbose);
    o->url = cli_url(o->url);
    if (o->label != NULL && client_option(cmd, o->url, "label", o->label, "--label") != 0)
        return EXIT_USAGE;
    if (o->ttl != NULL && client_option(cmd, o->url, "lease", o->ttl, "-L") != 0)
        return EXIT_USAGE;
    *first = optind;
    return -1;
}
