/* SPDX-License-Identifier: MIT */
/* admin.c - the operator's subcommands: status, lock, unlock, extend.
 *
 * `lock` takes a lock with a fixed lease and leaves it held, printing the
 * owner token; `unlock --owner` and `extend --owner` act on it later from
 * any process, so a shell script can hold a lock across several commands. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The refusal of n > 1 operands: each named, and an empty one called what
 * it likely is ('' from "$UNSET"). Returns EXIT_USAGE. */
static int several_names(const char *cmd, int n, char **names)
{
    int empty = 0;

    fprintf(stderr, "dlock %s: want one NAME, got %d: ", cmd, n);
    for (int i = 0; i < n && i < 4; i++) {
        fputs(i > 0 ? ", '" : "'", stderr);
        cli_print_text_to(stderr, names[i]);
        putc('\'', stderr);
    }
    for (int i = 0; i < n; i++)
        empty += names[i][0] == '\0';
    if (n > 4)
        fputs(", ...", stderr);
    if (empty > 0)
        fputs(" ('' is an empty NAME: a shell variable that is not set?)", stderr);
    else
        fputs(" (a NAME of several words is one quoted word)", stderr);
    fprintf(stderr, "\nTry 'dlock %s --help'.\n", cmd);
    return EXIT_USAGE;
}

/* Parses a subcommand's options and its one NAME. Returns -1 to go on, or
 * an exit code. */
static int parse(int argc, char **argv, unsigned accepted, const char *usage, cli_opts *o,
                 const char **name)
{
    int first, code = cli_parse(argc, argv, accepted, 0, usage, o, &first);

    *name = NULL; /* (set on -1 only; gcc -O3 cannot tell) */
    if (code >= 0)
        return code;
    if (first >= argc) /* the last word may have been meant as NAME */
        return cli_missing_name(argv[0], o, argv, o->dashdash ? 0 : argc - 1, "");
    if (first < argc - 1 && cli_url_among_names(argv[0], argc - first, argv + first) >= 0)
        return EXIT_USAGE;
    if (first < argc - 1)
        return several_names(argv[0], argc - first, argv + first);
    if (cli_check_name(argv[0], "", argv[first]) != 0)
        return EXIT_USAGE;
    *name = argv[first];
    return -1;
}

/* The exit code for rc of a call on lock `name` by "dlock cmd": a conflict
 * (held by someone else, not the owner) gives -E's code and, with -q, no
 * message; what the store cannot do is a usage error naming `option`, and
 * so is a bad name (the message says what is wrong with it, byte by byte:
 * the name itself may not print). */
static int fail(const cli_opts *o, int rc, const char *name, const char *cmd, const char *option)
{
    if (rc == DLOCK_ENOTSUP)
        return cli_fail_unsupported(cmd, option);
    if (rc == DLOCK_EINVAL) {
        cli_log_end();
        fprintf(stderr, "dlock %s: %s\n", cmd, dlock_errmsg());
        return EXIT_USAGE;
    }
    if (rc == DLOCK_EBUSY || rc == DLOCK_ETIMEDOUT || rc == DLOCK_ENOTOWNER) {
        if (!o->quiet)
            cli_fail_lock(rc, name);
        return o->conflict_code;
    }
    return cli_fail_lock(rc, name);
}

/* Owner tokens and fencing tokens are easy to mix up in a script: the
 * owner token is what `dlock lock` printed first and what DLOCK_OWNER
 * holds, 32 hex digits; the fencing token is a decimal number (DLOCK_FENCE,
 * and DLOCK_TOKEN, its old name). An owner token of digits only and another
 * length is a fencing token given by mistake. */
static int looks_like_fence(const char *owner)
{
    size_t digits = strspn(owner, "0123456789");
    return digits > 0 && owner[digits] == '\0' && digits != 32;
}

static void fence_message(const char *cmd, const char *owner, const char *lead)
{
    fprintf(stderr,
            "dlock %s: %s--owner %s is a fencing token (DLOCK_FENCE, DLOCK_TOKEN), not an owner "
            "token: give the owner token 'dlock lock' printed first, or DLOCK_OWNER\n",
            cmd, lead, owner);
}

/* Refuses a fencing token where the owner token is wanted. On a --simple
 * lock another client may hold the key under any token, digits included:
 * there it only explains a failure (after_fail). */
static int check_owner(const cli_opts *o, const char *cmd)
{
    if (looks_like_fence(o->owner) && !(o->kind.flags & DLOCK_SIMPLE)) {
        fence_message(cmd, o->owner, "");
        return EXIT_USAGE;
    }
    return 0;
}

static void explain_owner_failure(const cli_opts *o, const char *cmd, int rc)
{
    if (rc == DLOCK_ENOTOWNER && !o->quiet && looks_like_fence(o->owner))
        fence_message(cmd, o->owner, "if ");
}

/* lock, extend and unlock --token hand over exclusive holds only. The
 * refusal points to 'dlock run' with the kind when the store has it, and
 * is the store's own refusal of the kind when it has not (a 'dlock run -s'
 * it would refuse too is no way out). */
static int exclusive_only(const cli_opts *o, const char *cmd, dlock_client *c, const char *name)
{
    unsigned cap = o->kind.flags & DLOCK_READ ? DLOCK_CAP_READ_WRITE : DLOCK_CAP_SEMAPHORE;
    if ((o->kind.flags & (DLOCK_READ | DLOCK_SEMAPHORE)) && !(dlock_client_caps(c) & cap)) {
        dlock_lock *l = NULL;
        int rc = cli_kind_open(c, &o->kind, name, &l);
        dlock_lock_free(l);
        if (rc == DLOCK_ENOTSUP) {
            cli_fail_unsupported(cmd, cli_kind_option_text(&o->kind));
            return EXIT_USAGE;
        }
    }
    if (o->kind.flags & (DLOCK_READ | DLOCK_SEMAPHORE)) {
        char run_kind[80];
        if (o->kind.flags & DLOCK_READ)
            snprintf(run_kind, sizeof run_kind, "%s", cli_kind_option_text(&o->kind));
        else if (o->kind.take > 1)
            snprintf(run_kind, sizeof run_kind, "--permits %u --take %u", o->kind.permits,
                     o->kind.take);
        else
            snprintf(run_kind, sizeof run_kind, "--permits %u", o->kind.permits);
        /* named as the user wrote it: -s, --shared, --read, --permits */
        fprintf(stderr,
                "dlock %s: %s: only an exclusive hold (plain, --simple, --fair, --write) can be "
                "handed from process to process; a %s hold lives as long as the process that "
                "took it: 'dlock run %s NAME -- COMMAND' holds it while COMMAND runs\n",
                cmd, cli_kind_option_text(&o->kind),
                o->kind.flags & DLOCK_READ ? "read" : "semaphore", run_kind);
        return EXIT_USAGE;
    }
    return 0;
}

/* One name is one lock: when the kind asked about is free, which other
 * kind of the name holds it ("semaphore"), or NULL; *permits gets a
 * semaphore's count. One query per other kind the store has; an error
 * counts as not held (the status shown is the kind asked about). */
static const char *held_as_other_kind(dlock_client *c, const char *name, unsigned flags,
                                      unsigned *permits)
{
    static const struct {
        unsigned flags, family, cap;
        const char *kind;
    } kinds[] = {
        {0, DLOCK_FAIR, 0, "mutex"},
        {DLOCK_WRITE, DLOCK_READ | DLOCK_WRITE, DLOCK_CAP_READ_WRITE, "read-write"},
        {DLOCK_SEMAPHORE, DLOCK_SEMAPHORE, DLOCK_CAP_SEMAPHORE, "semaphore"},
        {DLOCK_SIMPLE, DLOCK_SIMPLE, DLOCK_CAP_INTEROP, "simple"},
    };
    unsigned caps = dlock_client_caps(c);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        dlock_status st;
        int mine = kinds[i].flags == 0 ? (flags & ~DLOCK_FAIR) == 0 : (flags & kinds[i].family);
        if (mine || (caps & kinds[i].cap) != kinds[i].cap)
            continue;
        if (dlock_query(c, name, kinds[i].flags, &st) == DLOCK_OK && st.held) {
            *permits = st.permits;
            return kinds[i].kind;
        }
    }
    return NULL;
}

/* "a read-write lock" for a kind word of held_as_other_kind() or
 * cli_kind_name(). */
static const char *kind_noun(const char *kind)
{
    return strcmp(kind, "read-write") == 0  ? "a read-write lock"
           : strcmp(kind, "semaphore") == 0 ? "a semaphore"
           : strcmp(kind, "simple") == 0    ? "an interop key"
                                            : "a mutex";
}

/* The kind option that names that kind ("--permits 3" for a semaphore of
 * that count), "" for the mutex. */
static void kind_option(const char *kind, unsigned permits, char *buf, size_t size)
{
    if (strcmp(kind, "semaphore") == 0)
        snprintf(buf, size, "--permits %u", permits);
    else
        snprintf(buf, size, "%s",
                 strcmp(kind, "read-write") == 0 ? "--write"
                 : strcmp(kind, "simple") == 0   ? "--simple"
                                                 : "");
}

/* The document of `dlock status --json`: the same fields for every kind,
 * null where a field does not apply (docs/dlock.1). */
static void print_status_json(const char *name, const cli_kind *k, const dlock_status *st,
                              unsigned caps, json_object *holders, const char *held_as)
{
    unsigned f = k->flags;
    int shared = (f & (DLOCK_READ | DLOCK_WRITE | DLOCK_SEMAPHORE)) != 0;
    int semaphore = (f & DLOCK_SEMAPHORE) != 0;
    json_object *doc = cli_json_doc();

    json_object_object_add(doc, "name", cli_json_text(name, 0));
    json_object_object_add(doc, "kind", json_object_new_string(cli_kind_name(k)));
    json_object_object_add(doc, "held", json_object_new_boolean(st->held));
    /* free as this kind, held as another kind of the same name */
    json_object_object_add(doc, "held_as",
                           held_as != NULL ? json_object_new_string(held_as) : NULL);
    /* the owner may have been cut to fit dlock_status */
    json_object_object_add(doc, "owner",
                           st->owner[0] != '\0'
                               ? cli_json_text(st->owner, strlen(st->owner) == sizeof st->owner - 1)
                               : NULL);
    json_object_object_add(doc, "holds", json_object_new_int64(st->holds));
    /* free: no lease and no expiry to speak of (null, null); held: the
     * lease left and "expires": true, or, for a key without expiry (set by
     * another client in --simple mode), null and false */
    json_object_object_add(doc, "lease_ms",
                           st->held && st->lease_ms >= 0 ? json_object_new_int64(st->lease_ms)
                                                         : NULL);
    json_object_object_add(doc, "expires",
                           st->held ? json_object_new_boolean(st->lease_ms >= 0) : NULL);
    /* held with no lease of its own on a session store: it lives as long
     * as its holder's session (ZooKeeper) */
    json_object_object_add(doc, "session",
                           st->held ? json_object_new_boolean(cli_held_by_session(caps, f, st))
                                    : NULL);
    cli_json_add_u64(doc, "last_fence", st->last_fence);
    /* --simple keys have no queue */
    json_object_object_add(doc, "waiters",
                           f & DLOCK_SIMPLE ? NULL : json_object_new_int64(st->waiters));
    json_object_object_add(doc, "shared", shared ? json_object_new_int64(st->shared) : NULL);
    json_object_object_add(doc, "permits", semaphore ? json_object_new_int64(st->permits) : NULL);
    json_object_object_add(doc, "permits_used",
                           semaphore ? json_object_new_int64(st->permits_used) : NULL);
    json_object_object_add(doc, "holders", holders);
    cli_json_print(doc);
}

static void print_status_text(const char *name, const cli_kind *k, const dlock_status *st,
                              dlock_client *c, const char *url, const char *held_as,
                              unsigned held_as_permits)
{
    unsigned f = k->flags;
    char option[32];

    printf("name:       ");
    cli_print_text(name);
    printf(" (%s)\n", cli_kind_name(k));
    if (held_as != NULL) {
        /* the options that show it: a semaphore's count is asked for */
        kind_option(held_as, held_as_permits, option, sizeof option);
        printf("state:      held as %s, not as %s (one name is one lock: %s%s shows it)\n",
               kind_noun(held_as), kind_noun(cli_kind_name(k)),
               option[0] != '\0' ? "status " : "status without a kind option", option);
    } else
        printf("state:      %s\n", st->held ? "held" : "free");
    if (st->owner[0] != '\0') {
        printf("%-12s", f & (DLOCK_READ | DLOCK_WRITE) ? "writer:" : "owner:");
        cli_print_text(st->owner);
        printf("\nholds:      %u\n", st->holds);
    }
    if (f & DLOCK_SEMAPHORE) {
        /* nobody holds or waits: no count is declared (the store has none,
         * or its last users'), the next user's rules: the one asked for */
        int idle = st->permits_used == 0 && st->waiters == 0;
        printf("permits:    %u of %u taken, by %u holder%s\n", st->permits_used,
               idle ? k->permits : st->permits, st->shared, st->shared == 1 ? "" : "s");
    } else if (f & (DLOCK_READ | DLOCK_WRITE))
        printf("readers:    %u\n", st->shared);
    if (st->held) {
        printf("lease left: ");
        cli_print_lease_left(c, url, f, st);
        putchar('\n');
    }
    printf("last fence: %" PRIu64 "\n", st->last_fence);
    if (!(f & DLOCK_SIMPLE))
        printf("waiters:    %u\n", st->waiters);
}

int cmd_status(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock status [-u URL] [--simple | --fair | --read | --write | --permits N]\n"
        "                    [--json | --check [-q] | -q] NAME\n"
        "Shows whether NAME is held, by which owner token, for how much longer,\n"
        "its fence and how many waiters are queued, and each holder: owner token,\n"
        "host, pid, start time and label. For a semaphore in use, the\n"
        "permit count shown is the one its holders agreed on (if not N: a\n"
        "warning, and exit 64, as 'dlock run' refuses that N).\n"
        "\n"
        "  --json    one line of JSON instead (fields in 'man dlock')\n"
        "  --check   exit 0 if NAME is held, 1 if it is free (69/70 on errors, 64\n"
        "            for a semaphore's count other than N)\n"
        "  -q        print nothing (with --check: only the exit status)\n";
    cli_opts o;
    const char *name;
    dlock_client *c;
    dlock_status st;
    int code =
        parse(argc, argv, CLI_URL | CLI_KIND | CLI_JSON | CLI_CHECK | CLI_QUIET, usage, &o, &name);

    if (code >= 0)
        return code;
    code = cli_open(o.url, &c);
    if (code != 0)
        return code;
    int rc = dlock_query(c, name, o.kind.flags, &st);
    if (rc != DLOCK_OK) {
        code = rc == DLOCK_ENOTSUP ? cli_fail_unsupported("status", NULL)
                                   : cli_fail(rc, "cannot read the lock's state");
        dlock_client_close(c);
        return code;
    }
    /* a semaphore in use with another count: shown, and refused as run and
     * unlock --force refuse that count (64) */
    int other_count = (o.kind.flags & DLOCK_SEMAPHORE) && (st.permits_used > 0 || st.waiters > 0) &&
                      st.permits != o.kind.permits;
    if (other_count) {
        fputs("dlock status: ", stderr);
        cli_print_text_to(stderr, name);
        fprintf(stderr, " has %u permits, not %u (its users declare %u: give --permits %u)\n",
                st.permits, o.kind.permits, st.permits, st.permits);
    }
    unsigned held_as_permits = 0;
    const char *held_as =
        st.held ? NULL : held_as_other_kind(c, name, o.kind.flags, &held_as_permits);
    /* Who holds it: a second request, so a holder may have come or gone
     * since the first. */
    if (o.json) {
        json_object *holders = cli_holders_json(c, name, o.kind.flags, &rc);
        print_status_json(name, &o.kind, &st, dlock_client_caps(c), rc == DLOCK_OK ? holders : NULL,
                          held_as);
        if (rc != DLOCK_OK)
            json_object_put(holders);
    } else if (!o.quiet) {
        print_status_text(name, &o.kind, &st, c, o.url, held_as, held_as_permits);
        rc = cli_print_holders(c, name, o.kind.flags);
    }
    dlock_client_close(c);
    if (rc == DLOCK_ENOTSUP)
        return cli_fail_unsupported("status", NULL);
    if (rc != DLOCK_OK)
        return cli_fail(rc, "cannot read who holds the lock");
    if (other_count)
        return EXIT_USAGE;
    return o.check && !st.held && held_as == NULL ? EXIT_NOT_ACQUIRED : 0;
}

/* The option of lock, unlock or extend that asked for what the store
 * cannot do (DLOCK_ENOTSUP): `option` if the store lacks `cap`, what the
 * subcommand needs it for, else the kind option (NULL: none). */
static const char *lock_option(const cli_opts *o, dlock_client *c, unsigned cap, const char *option)
{
    return !(dlock_client_caps(c) & cap) ? option : cli_kind_option_text(&o->kind);
}

int cmd_lock(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock lock [-u URL] [-n | -w SECONDS] -l SECONDS [-E CODE] [-q] [-v]\n"
        "                  [--label TEXT] [--simple | --fair | --write | -x] NAME\n"
        "Takes NAME with a fixed lease (-l, not renewed) and leaves it held when\n"
        "dlock exits. Prints '<owner token> <fence>'; pass the owner token to\n"
        "'dlock unlock --owner' or 'dlock extend --owner' from any process. Exit 1\n"
        "(or -E CODE) if it is held by someone else; -q: no message then, nor the\n"
        "line that says who holds it after 1 s of waiting without -w. --timeout\n"
        "is -w. -v: how long taking it took, its fence and lease, on stderr.\n"
        "(To hold a lock with a renewed lease until interrupted: 'dlock run NAME'.)\n";
    cli_opts o;
    const char *name;
    dlock_client *c;
    dlock_lock *l;
    int client_in_use = 0; /* by the waiting line's thread, left asking an unreached store */
    int code =
        parse(argc, argv,
              CLI_URL | CLI_WAIT | CLI_LEASE | CLI_CONFLICT | CLI_QUIET | CLI_KIND | CLI_LABEL,
              usage, &o, &name);

    if (code >= 0)
        return code;
    if (o.lease_ms <= 0)
        return cli_usage_error("lock", "-l SECONDS is required: a lock left held needs a lease "
                                       "(to hold one until interrupted: dlock run NAME)");
    code = cli_open(o.url, &c);
    if (code != 0)
        return code;
    if (exclusive_only(&o, "lock", c, name) != 0) {
        dlock_client_close(c);
        return EXIT_USAGE;
    }
    unsigned caps = dlock_client_caps(c);
    if ((caps & DLOCK_CAP_FIXED_LEASE) && !(caps & DLOCK_CAP_ADOPT)) {
        /* It could take the lock, but its owner token could never release
         * or extend it from another process: refused before it is taken. */
        code = cli_fail_missing_cap(
            "lock", "-l/--lease", dlock_client_store(c), DLOCK_CAP_ADOPT,
            "hand a lock from one process to another",
            "a lock 'dlock lock' left held could not be released with its owner token: 'dlock "
            "run NAME' holds it until interrupted, 'dlock run NAME -- COMMAND' while COMMAND "
            "runs");
        dlock_client_close(c);
        return code;
    }
    int rc = dlock_lock_open(c, name, o.kind.flags, &l);
    if (rc == DLOCK_OK) {
        int64_t asked_us = cli_now_us();
        cli_waiting *notice = cli_waiting_start(c, &o, name);
        rc = dlock_acquire_for(l, o.wait_ms, o.lease_ms);
        client_in_use = cli_waiting_stop(notice, rc);
        if (rc == DLOCK_OK) {
            printf("%s %" PRIu64 "\n", dlock_lock_token(l), dlock_lock_fence(l));
            fflush(stdout);
            if (o.verbose > 0)
                cli_report_acquired(c, l, &o.kind, o.url, o.lease_ms, cli_now_us() - asked_us, 1);
        }
        code = rc == DLOCK_OK
                   ? 0
                   : fail(&o, rc, name, "lock", lock_option(&o, c, DLOCK_CAP_FIXED_LEASE, "-l"));
        if ((rc == DLOCK_EBUSY || rc == DLOCK_ETIMEDOUT) && !client_in_use)
            cli_print_who_holds(c, &o, name);
        if (rc == DLOCK_ENOTSUP && !(dlock_client_caps(c) & DLOCK_CAP_FIXED_LEASE) &&
            (dlock_client_caps(c) & DLOCK_CAP_SESSION))
            fprintf(stderr,
                    "(a %s lock lives with its holder's session and cannot outlive dlock: "
                    "'dlock run NAME' holds it until interrupted)\n",
                    dlock_client_store(c));
        dlock_lock_detach(l); /* stays held: that is the point */
    } else {
        code = fail(&o, rc, name, "lock", lock_option(&o, c, DLOCK_CAP_FIXED_LEASE, "-l"));
    }
    if (client_in_use)
        cli_exit_beside_thread(code);
    dlock_client_close(c);
    return code;
}

/* Takes over the lock held under o->owner. */
static int adopt(const cli_opts *o, const char *cmd, const char *name, dlock_client *c,
                 dlock_lock **l)
{
    int rc = dlock_lock_adopt(c, name, o->owner, o->kind.flags, l);
    if (rc == DLOCK_OK)
        return 0;
    int code = fail(o, rc, name, cmd, lock_option(o, c, DLOCK_CAP_ADOPT, "--owner"));
    explain_owner_failure(o, cmd, rc);
    return code;
}

/* unlock --force --permits N of a semaphore in use with another count:
 * refused as every user of it with another count is (status says the same
 * and shows it), before anything is released. Returns 0 to go on, or an
 * exit code (a message printed). */
static int permits_match(dlock_client *c, const cli_opts *o, const char *name)
{
    dlock_status st;
    int rc = dlock_query(c, name, o->kind.flags, &st);

    if (rc != DLOCK_OK) /* a store that cannot answer: as the release would fail */
        return fail(o, rc, name, "unlock", cli_kind_option_text(&o->kind));
    if ((st.permits_used > 0 || st.waiters > 0) && st.permits != o->kind.permits) {
        fputs("dlock unlock: ", stderr);
        cli_print_text_to(stderr, name);
        fprintf(stderr,
                " has %u permits, not %u: nothing was released (its users declare %u: give "
                "--permits %u)\n",
                st.permits, o->kind.permits, st.permits, st.permits);
        return EXIT_USAGE;
    }
    return 0;
}

int cmd_unlock(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock unlock [-u URL] [--simple | --fair | --write] [-E CODE] [-q]\n"
        "                    (--owner OWNER | --force [--check]) NAME\n"
        "       dlock unlock [-u URL] (--read | --write | --permits N) --force [--check] NAME\n"
        "Releases NAME: the lock held under the owner token OWNER (as printed by\n"
        "'dlock lock', or DLOCK_OWNER; --token is an old name of --owner), or, with\n"
        "--force, whoever holds it (the holder learns it lost the lock at its next\n"
        "renewal; fences keep increasing). Exit 1 (or -E CODE) if OWNER does not\n"
        "hold it; -q: no message then. --force says \"'NAME' was free\" on stderr\n"
        "when nothing was held (-q: not) and exits 0; with --check it exits 1 then. A\n"
        "name held as another kind than the options name, or a semaphore in use with\n"
        "another count than N, is not released: exit 64.\n";
    cli_opts o;
    const char *name;
    dlock_client *c;
    dlock_lock *l;
    int code =
        parse(argc, argv,
              CLI_URL | CLI_OWNER | CLI_FORCE | CLI_CHECK | CLI_CONFLICT | CLI_QUIET | CLI_KIND,
              usage, &o, &name);

    if (code >= 0)
        return code;
    if ((o.owner == NULL) == (o.force == 0))
        return cli_usage_error("unlock", "give either --owner OWNER or --force");
    if (o.check && !o.force) {
        fprintf(stderr, "dlock unlock: --check goes with --force (was anything held?)\n");
        return EXIT_USAGE;
    }
    if (o.owner != NULL && check_owner(&o, "unlock") != 0)
        return EXIT_USAGE;
    code = cli_open(o.url, &c);
    if (code != 0)
        return code;
    if (o.owner != NULL && exclusive_only(&o, "unlock --owner", c, name) != 0) {
        dlock_client_close(c);
        return EXIT_USAGE;
    }
    if (o.force && (o.kind.flags & DLOCK_SEMAPHORE)) {
        code = permits_match(c, &o, name);
        if (code != 0) {
            dlock_client_close(c);
            return code;
        }
    }
    if (o.force) {
        /* a query, then the release: "was free" can be stale (dlock.h) */
        int was_held = -1;
        int rc = dlock_force_unlock2(c, name, o.kind.flags, &was_held);
        code = rc == DLOCK_OK ? 0
                              : fail(&o, rc, name, "unlock",
                                     lock_option(&o, c, DLOCK_CAP_FORCE_UNLOCK, "--force"));
        /* one name is one lock: free as this kind, it may be held as
         * another, which this release did not touch */
        unsigned other_permits = 0;
        const char *other = rc == DLOCK_OK && was_held == 0
                                ? held_as_other_kind(c, name, o.kind.flags, &other_permits)
                                : NULL;
        if (other != NULL) {
            /* the options named the lock wrongly, as a count other than
             * the semaphore's (permits_match): a usage error, whatever -q
             * and -E say (a conflict's exit code would read as "free"
             * with --check) */
            char option[32];
            kind_option(other, other_permits, option, sizeof option);
            fputs("dlock unlock: '", stderr);
            cli_print_text_to(stderr, name);
            fprintf(stderr, "' is held as %s, not as %s: nothing was released (force it %s%s)\n",
                    kind_noun(other), kind_noun(cli_kind_name(&o.kind)),
                    option[0] != '\0' ? "with " : "without a kind option", option);
            code = EXIT_USAGE;
        } else if (rc == DLOCK_OK && was_held == 0) {
            if (!o.quiet) {
                fputs("dlock unlock: '", stderr);
                cli_print_text_to(stderr, name);
                fputs("' was free\n", stderr);
            }
            if (o.check)
                code = EXIT_NOT_ACQUIRED;
        }
    } else {
        code = adopt(&o, "unlock", name, c, &l);
        if (code == 0) {
            int rc = DLOCK_OK;
            while (rc == DLOCK_OK && dlock_lock_holds(l) > 0)
                rc = dlock_release(l);
            code = rc == DLOCK_OK ? 0 : fail(&o, rc, name, "unlock", NULL);
            dlock_lock_free(l);
        }
    }
    dlock_client_close(c);
    return code;
}

int cmd_extend(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock extend [-u URL] [--simple | --fair | --write] [-E CODE] [-q]\n"
        "                    --owner OWNER -l SECONDS NAME\n"
        "Sets the remaining lease of NAME, held under the owner token OWNER, to\n"
        "SECONDS from now. Exit 1 (or -E CODE) if OWNER does not hold it.\n";
    cli_opts o;
    const char *name;
    dlock_client *c;
    dlock_lock *l;
    int code =
        parse(argc, argv, CLI_URL | CLI_OWNER | CLI_LEASE | CLI_CONFLICT | CLI_QUIET | CLI_KIND,
              usage, &o, &name);

    if (code >= 0)
        return code;
    if (o.owner == NULL || o.lease_ms <= 0)
        return cli_usage_error("extend", "--owner and -l are required");
    if (check_owner(&o, "extend") != 0)
        return EXIT_USAGE;
    code = cli_open(o.url, &c);
    if (code != 0)
        return code;
    if (exclusive_only(&o, "extend", c, name) != 0) {
        dlock_client_close(c);
        return EXIT_USAGE;
    }
    code = adopt(&o, "extend", name, c, &l);
    if (code == 0) {
        int rc = dlock_extend(l, o.lease_ms);
        /* A lease that ran out between the adoption and the extension: the
         * owner no longer holds the lock, as if it had not at all (1). */
        if (rc == DLOCK_ELOST)
            rc = DLOCK_ENOTOWNER;
        code = rc == DLOCK_OK
                   ? 0
                   : fail(&o, rc, name, "extend", lock_option(&o, c, DLOCK_CAP_EXTEND, "-l"));
        dlock_lock_detach(l);
    }
    dlock_client_close(c);
    return code;
}
