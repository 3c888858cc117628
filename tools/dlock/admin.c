/* admin.c - the operator's subcommands: status, lock, unlock, extend.
 *
 * `lock` takes a lock with a fixed lease and leaves it held, printing the
 * owner token; `unlock --token` and `extend --token` act on it later from
 * any process, so a shell script can hold a lock across several commands. */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct admin_args {
    const char *url;
    const char *token;
    const char *name;
    cli_kind kind;
    int json, force;
    int64_t wait_ms, lease_ms;
} admin_args;

/* Parses the options every admin command shares; `allowed` lists the short
 * option letters that this command accepts. Returns -1 to continue, or an
 * exit code. */
static int parse(int argc, char **argv, const char *allowed, const char *usage, admin_args *a)
{
    static const struct option options[] = {
        CLI_KIND_OPTIONS,
        {"url", required_argument, NULL, 'u'},
        {"json", no_argument, NULL, 'j'},
        {"force", no_argument, NULL, 'f'},
        {"token", required_argument, NULL, 't'},
        {"nonblock", no_argument, NULL, 'n'},
        {"wait", required_argument, NULL, 'w'},
        {"lease", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    memset(a, 0, sizeof *a);
    a->wait_ms = DLOCK_WAIT_FOREVER;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "u:t:nw:l:hm:", options, NULL)) != -1) {
        int kind_opt = opt >= CLI_OPT_SIMPLE || opt == 'm';
        if (opt != '?' && opt != 'h' && strchr(allowed, kind_opt ? 'K' : opt) == NULL) {
            fprintf(stderr, "dlock %s: option not accepted here\n%s", argv[0], usage);
            return EXIT_USAGE;
        }
        if (opt == CLI_OPT_TAKE) {
            fprintf(stderr, "dlock %s: --take is for dlock run\n%s", argv[0], usage);
            return EXIT_USAGE;
        }
        if (kind_opt) {
            if (cli_kind_option(&a->kind, opt, optarg, argv[0]) < 0)
                return EXIT_USAGE;
            continue;
        }
        switch (opt) {
        case 'u':
            a->url = optarg;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'f':
            a->force = 1;
            break;
        case 't':
            a->token = optarg;
            break;
        case 'n':
            a->wait_ms = 0;
            break;
        case 'w':
            if (cli_duration_ms(optarg, &a->wait_ms) != 0) {
                fprintf(stderr, "dlock %s: -w %s: not a duration\n", argv[0], optarg);
                return EXIT_USAGE;
            }
            break;
        case 'l':
            if (cli_duration_ms(optarg, &a->lease_ms) != 0 || a->lease_ms <= 0) {
                fprintf(stderr, "dlock %s: -l %s: the lease must be a duration > 0\n", argv[0],
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "dlock %s: want exactly one NAME\n%s", argv[0], usage);
        return EXIT_USAGE;
    }
    if (cli_kind_check(&a->kind, argv[0], 0) != 0)
        return EXIT_USAGE;
    a->name = argv[optind];
    a->url = cli_url(a->url);
    return -1;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* lock, extend and unlock --token hand over exclusive holds only. */
static int exclusive_only(const admin_args *a, const char *cmd)
{
    if (a->kind.flags & (DLOCK_READ | DLOCK_SEMAPHORE)) {
        fprintf(stderr,
                "dlock %s: only an exclusive hold (plain, --simple, --fair, --write) can be "
                "handed from process to process\n",
                cmd);
        return EXIT_USAGE;
    }
    return 0;
}

int cmd_status(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock status [-u URL] [--simple | --fair | --read | --write | --permits N]\n"
        "                    [--json] NAME\n"
        "Shows whether NAME is held, by which owner token, for how much longer,\n"
        "its fence and how many waiters are queued. For a semaphore in use, the\n"
        "permit count shown is the one its holders agreed on (a warning if not N).\n";
    admin_args a;
    dlock_client *c;
    dlock_status st;
    int code = parse(argc, argv, "uKj", usage, &a);

    if (code >= 0)
        return code;
    code = cli_open(a.url, &c);
    if (code != 0)
        return code;
    int rc = dlock_query(c, a.name, a.kind.flags, &st);
    dlock_client_close(c);
    if (rc != DLOCK_OK)
        return cli_fail(rc, "cannot read the lock's state");
    unsigned f = a.kind.flags;
    if ((f & DLOCK_SEMAPHORE) && (st.permits_used > 0 || st.waiters > 0) &&
        st.permits != a.kind.permits)
        fprintf(stderr, "dlock status: %s has %u permits, not %u\n", a.name, st.permits,
                a.kind.permits);
    const char *kind = f & DLOCK_SEMAPHORE              ? "semaphore"
                       : f & (DLOCK_READ | DLOCK_WRITE) ? "read-write"
                       : f & DLOCK_SIMPLE               ? "simple"
                                                        : "mutex";
    if (a.json) {
        printf("{\"name\":");
        json_string(a.name);
        printf(",\"held\":%s,\"owner\":", st.held ? "true" : "false");
        json_string(st.owner);
        printf(",\"holds\":%u,\"lease_ms\":%" PRId64 ",\"last_fence\":%" PRIu64
               ",\"waiters\":%u,\"kind\":\"%s\",\"shared\":%u",
               st.holds, st.lease_ms, st.last_fence, st.waiters, kind, st.shared);
        if (f & DLOCK_SEMAPHORE)
            printf(",\"permits\":%u,\"permits_used\":%u", st.permits, st.permits_used);
        printf("}\n");
        return 0;
    }
    printf("name:       %s (%s)\n", a.name, kind);
    printf("state:      %s\n", st.held ? "held" : "free");
    if (st.owner[0] != '\0') {
        printf("%-12s%s\n", f & (DLOCK_READ | DLOCK_WRITE) ? "writer:" : "owner:", st.owner);
        printf("holds:      %u\n", st.holds);
    }
    if (f & DLOCK_SEMAPHORE)
        printf("permits:    %u of %u taken, by %u holder%s\n", st.permits_used, st.permits,
               st.shared, st.shared == 1 ? "" : "s");
    else if (f & (DLOCK_READ | DLOCK_WRITE))
        printf("readers:    %u\n", st.shared);
    if (st.held) {
        if (st.lease_ms >= 0)
            printf("lease left: %.3f s%s\n", (double) st.lease_ms / 1000,
                   st.owner[0] == '\0' ? " (the longest shared lease)" : "");
        else
            printf("lease left: none (never expires)\n");
    }
    printf("last fence: %" PRIu64 "\n", st.last_fence);
    if (!(f & DLOCK_SIMPLE))
        printf("waiters:    %u\n", st.waiters);
    return 0;
}

int cmd_lock(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock lock [-u URL] [-n | -w SECONDS] -l SECONDS [--simple | --fair | --write]\n"
        "                  NAME\n"
        "Takes NAME with a fixed lease and leaves it held when dlock exits. Prints\n"
        "'<owner token> <fence>'; pass the token to 'dlock unlock --token' or\n"
        "'dlock extend --token' from any process. Exit 1 if it is held by someone else.\n";
    admin_args a;
    dlock_client *c;
    dlock_lock *l;
    int code = parse(argc, argv, "unwlK", usage, &a);

    if (code >= 0)
        return code;
    if (a.lease_ms <= 0) {
        fprintf(stderr, "dlock lock: -l SECONDS is required: a lock left held needs a lease\n");
        return EXIT_USAGE;
    }
    if (exclusive_only(&a, "lock") != 0)
        return EXIT_USAGE;
    code = cli_open(a.url, &c);
    if (code != 0)
        return code;
    int rc = dlock_lock_open(c, a.name, a.kind.flags, &l);
    if (rc == DLOCK_OK) {
        rc = dlock_acquire_for(l, a.wait_ms, a.lease_ms);
        if (rc == DLOCK_OK)
            printf("%s %" PRIu64 "\n", dlock_lock_token(l), dlock_lock_fence(l));
        if (rc == DLOCK_ETIMEDOUT)
            rc = DLOCK_EBUSY;
        code = rc == DLOCK_OK ? 0 : cli_fail(rc, a.name);
        dlock_lock_detach(l); /* stays held: that is the point */
    } else {
        code = cli_fail(rc, a.name);
    }
    dlock_client_close(c);
    return code;
}

/* Takes over the lock held under a.token. */
static int adopt(const admin_args *a, dlock_client *c, dlock_lock **l)
{
    int rc = dlock_lock_adopt(c, a->name, a->token, a->kind.flags, l);
    return rc == DLOCK_OK ? 0 : cli_fail(rc, a->name);
}

int cmd_unlock(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock unlock [-u URL] [--simple | --fair | --write] (--token TOKEN | --force) "
        "NAME\n"
        "       dlock unlock [-u URL] (--read | --write | --permits N) --force NAME\n"
        "Releases NAME: the lock held under TOKEN (as printed by 'dlock lock'), or,\n"
        "with --force, whoever holds it (the holder learns it lost the lock at its\n"
        "next renewal; fences keep increasing). Exit 1 if TOKEN does not hold it.\n";
    admin_args a;
    dlock_client *c;
    dlock_lock *l;
    int code = parse(argc, argv, "utfK", usage, &a);

    if (code >= 0)
        return code;
    if ((a.token == NULL) == (a.force == 0)) {
        fprintf(stderr, "dlock unlock: give either --token TOKEN or --force\n%s", usage);
        return EXIT_USAGE;
    }
    if (a.token != NULL && exclusive_only(&a, "unlock --token") != 0)
        return EXIT_USAGE;
    code = cli_open(a.url, &c);
    if (code != 0)
        return code;
    if (a.force) {
        int rc = dlock_force_unlock(c, a.name, a.kind.flags);
        code = rc == DLOCK_OK ? 0 : cli_fail(rc, a.name);
    } else {
        code = adopt(&a, c, &l);
        if (code == 0) {
            int rc = DLOCK_OK;
            while (rc == DLOCK_OK && dlock_lock_holds(l) > 0)
                rc = dlock_release(l);
            code = rc == DLOCK_OK ? 0 : cli_fail(rc, a.name);
            dlock_lock_free(l);
        }
    }
    dlock_client_close(c);
    return code;
}

int cmd_extend(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock extend [-u URL] [--simple | --fair | --write] --token TOKEN -l SECONDS NAME\n"
        "Sets the remaining lease of NAME, held under TOKEN, to SECONDS from now.\n";
    admin_args a;
    dlock_client *c;
    dlock_lock *l;
    int code = parse(argc, argv, "utlK", usage, &a);

    if (code >= 0)
        return code;
    if (a.token == NULL || a.lease_ms <= 0) {
        fprintf(stderr, "dlock extend: --token and -l are required\n%s", usage);
        return EXIT_USAGE;
    }
    if (exclusive_only(&a, "extend") != 0)
        return EXIT_USAGE;
    code = cli_open(a.url, &c);
    if (code != 0)
        return code;
    code = adopt(&a, c, &l);
    if (code == 0) {
        int rc = dlock_extend(l, a.lease_ms);
        /* A lease that ran out between the adoption and the extension: the
         * token no longer holds the lock, as if it had not at all (1). */
        if (rc == DLOCK_ELOST)
            rc = DLOCK_ENOTOWNER;
        code = rc == DLOCK_OK ? 0 : cli_fail(rc, a.name);
        dlock_lock_detach(l);
    }
    dlock_client_close(c);
    return code;
}
