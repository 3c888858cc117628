/* SPDX-License-Identifier: MIT */
/* kind.c - the options that choose a kind of lock, shared by the
 * subcommands: --simple, --fair, --read (flock's -s), --write (flock's -x),
 * --permits N [--take K], and -m NAME (repeated: a multi-lock). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count(const char *cmd, const char *what, const char *arg, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(arg, &end, 10);
    if (errno != 0 || *end != '\0' || end == arg || v == 0 || v > 1000000000UL || arg[0] == '-') {
        fprintf(stderr, "dlock %s: %s %s: want a count >= 1\n", cmd, what, arg);
        return -1;
    }
    *out = (unsigned) v;
    return 1;
}

int cli_kind_option(cli_kind *k, int opt, const char *arg, const char *cmd)
{
    switch (opt) {
    case CLI_OPT_SIMPLE:
        k->flags |= DLOCK_SIMPLE;
        return 1;
    case CLI_OPT_FAIR:
        k->flags |= DLOCK_FAIR;
        return 1;
    case CLI_OPT_READ:
    case 's':
        k->flags |= DLOCK_READ;
        return 1;
    case CLI_OPT_WRITE:
    case 'x':
        k->flags |= DLOCK_WRITE;
        return 1;
    case CLI_OPT_PERMITS:
        k->flags |= DLOCK_SEMAPHORE;
        return count(cmd, "--permits", arg, &k->permits);
    case CLI_OPT_TAKE:
        return count(cmd, "--take", arg, &k->take);
    case 'm':
        if (k->nnames == sizeof k->names / sizeof k->names[0]) {
            fprintf(stderr, "dlock %s: at most %zu names with -m\n", cmd,
                    sizeof k->names / sizeof k->names[0]);
            return -1;
        }
        if (cli_check_name(cmd, "-m ", arg) != 0)
            return -1;
        k->names[k->nnames++] = arg;
        return 1;
    default:
        return 0;
    }
}

int cli_kind_check(cli_kind *k, const char *cmd, int allow_multi)
{
    unsigned f = k->flags;
    int kinds = !!(f & DLOCK_SIMPLE) + !!(f & DLOCK_FAIR) + !!(f & DLOCK_READ) +
                !!(f & DLOCK_WRITE) + !!(f & DLOCK_SEMAPHORE);
    if (kinds > 1 || (f == DLOCK_SEMAPHORE && k->nnames > 0) ||
        (k->nnames > 0 && (f & ~(unsigned) DLOCK_FAIR) != 0)) {
        fprintf(stderr,
                "dlock %s: choose one kind: --simple, --fair, --read (-s), --write (-x) or "
                "--permits (-m works with plain or --fair locks)\n",
                cmd);
        return EXIT_USAGE;
    }
    if (k->take != 0 && !(f & DLOCK_SEMAPHORE)) {
        fprintf(stderr, "dlock %s: --take goes with --permits\n", cmd);
        return EXIT_USAGE;
    }
    if ((f & DLOCK_SEMAPHORE) && k->take == 0)
        k->take = 1;
    if ((f & DLOCK_SEMAPHORE) && k->take > k->permits) {
        fprintf(stderr, "dlock %s: --take %u is more than --permits %u\n", cmd, k->take,
                k->permits);
        return EXIT_USAGE;
    }
    if (k->nnames > 0 && !allow_multi) {
        fprintf(stderr, "dlock %s: -m (a multi-lock) is for dlock run\n", cmd);
        return EXIT_USAGE;
    }
    return 0;
}

const char *cli_kind_name(const cli_kind *k)
{
    unsigned f = k->flags;
    return f & DLOCK_SEMAPHORE              ? "semaphore"
           : f & (DLOCK_READ | DLOCK_WRITE) ? "read-write"
           : f & DLOCK_SIMPLE               ? "simple"
           : f & DLOCK_FAIR                 ? "fair"
                                            : "mutex";
}

const char *cli_kind_option_text(const cli_kind *k)
{
    unsigned f = k->flags;
    if (k->option[0] != '\0')
        return k->option;
    return f & DLOCK_SIMPLE      ? "--simple"
           : f & DLOCK_SEMAPHORE ? "--permits"
           : f & DLOCK_READ      ? "--read"
           : f & DLOCK_WRITE     ? "--write"
           : f & DLOCK_FAIR      ? "--fair"
           : k->nnames > 0       ? "-m"
                                 : NULL;
}

int cli_kind_open(dlock_client *c, const cli_kind *k, const char *name, dlock_lock **out)
{
    if (k->nnames > 0)
        return dlock_multi_open(c, k->names, k->nnames, k->flags, out);
    if (k->flags & DLOCK_SEMAPHORE)
        return dlock_semaphore_open(c, name, k->permits, k->take, out);
    return dlock_lock_open(c, name, k->flags, out);
}
