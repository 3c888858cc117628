/* SPDX-License-Identifier: MIT */
/* who.c - who holds a lock: the holders `dlock status` shows, and `dlock
 * list`, the locks under a prefix with their holders. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- holders */

/* The holders of a lock as JSON objects, collected by the callback. */
static void holder_to_json(const dlock_holder *h, void *arg)
{
    json_object *list = arg, *o = json_object_new_object();

    json_object_object_add(o, "owner", cli_json_text(h->owner, 0));
    json_object_object_add(o, "count", json_object_new_int64(h->count));
    int known = h->pid != 0;
    json_object_object_add(o, "host", known ? cli_json_text(h->host, 0) : NULL);
    json_object_object_add(o, "pid", known ? json_object_new_int64(h->pid) : NULL);
    json_object_object_add(o, "started_ms", known ? json_object_new_int64(h->started_ms) : NULL);
    json_object_object_add(o, "label",
                           known && h->label[0] != '\0' ? cli_json_text(h->label, 0) : NULL);
    json_object_array_add(list, o);
}

json_object *cli_holders_json(dlock_client *c, const char *name, unsigned flags, int *rc)
{
    json_object *list = json_object_new_array();

    *rc = dlock_query_holders(c, name, flags, holder_to_json, list);
    return list;
}

/* "2026-11-23 19:04:05 UTC" */
static void utc_text(int64_t ms, char *buf, size_t n)
{
    time_t t = (time_t) (ms / 1000);
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(buf, n, "%" PRId64 " ms", ms);
}

/* One holder on a line: the owner token, then who took it. */
static void print_holder(const dlock_holder *h, void *arg)
{
    const char *lead = arg;
    char when[64];

    printf("%-12s", lead);
    cli_print_text(h->owner);
    if (h->count > 1)
        printf(" (%u)", h->count);
    if (h->pid != 0) {
        utc_text(h->started_ms, when, sizeof when);
        printf(" on ");
        cli_print_text(h->host);
        printf(", pid %ld, started %s", h->pid, when);
        if (h->label[0] != '\0') {
            printf(", label ");
            cli_print_text(h->label);
        }
    }
    putchar('\n');
}

int cli_print_holders(dlock_client *c, const char *name, unsigned flags)
{
    return dlock_query_holders(c, name, flags, print_holder, "holder:");
}

/* ---------------------------------------------------------------- list */

typedef struct found {
    char *name;
    unsigned flags;
} found;

typedef struct found_list {
    found *items;
    size_t n, cap;
    int oom;
} found_list;

static void collect(const char *name, unsigned flags, void *arg)
{
    found_list *all = arg;

    if (all->n == all->cap) {
        size_t more = all->cap != 0 ? all->cap * 2 : 32;
        found *grown = realloc(all->items, more * sizeof *grown);
        if (grown == NULL) {
            all->oom = 1;
            return;
        }
        all->items = grown;
        all->cap = more;
    }
    if ((all->items[all->n].name = strdup(name)) == NULL) {
        all->oom = 1;
        return;
    }
    all->items[all->n++].flags = flags;
}

static const char *kind_of(unsigned flags)
{
    return flags & DLOCK_SEMAPHORE ? "semaphore" : flags & DLOCK_WRITE ? "read-write" : "mutex";
}

/* One lock: its state and holders, a line of text or an object of JSON. */
static int show_lock(dlock_client *c, const found *f, json_object *locks)
{
    dlock_status st;
    int rc = dlock_query(c, f->name, f->flags, &st);

    if (rc != DLOCK_OK)
        return rc;
    if (locks != NULL) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", cli_json_text(f->name, 0));
        json_object_object_add(o, "kind", json_object_new_string(kind_of(f->flags)));
        json_object_object_add(o, "held", json_object_new_boolean(st.held));
        json_object_object_add(o, "waiters", json_object_new_int64(st.waiters));
        json_object *holders = cli_holders_json(c, f->name, f->flags, &rc);
        json_object_object_add(o, "holders", holders);
        json_object_array_add(locks, o);
        return rc;
    }
    cli_print_text(f->name);
    printf(" (%s): %s, %u waiter%s\n", kind_of(f->flags), st.held ? "held" : "free", st.waiters,
           st.waiters == 1 ? "" : "s");
    return dlock_query_holders(c, f->name, f->flags, print_holder, "  holder:");
}

int cmd_list(int argc, char **argv)
{
    static const char usage[] =
        "usage: dlock list [-u URL] [--json] [PREFIX]\n"
        "Lists the locks whose names start with PREFIX (all without one) that\n"
        "are held or waited for now, each with its holders: owner token, host,\n"
        "pid, start time and label of the process that took it. Locks taken with\n"
        "--simple are not found (their keys look like any other).\n"
        "\n"
        "  --json    one line of JSON instead (fields in 'man dlock')\n";
    cli_opts o;
    found_list all = {0};
    dlock_client *c;
    int first, code = cli_parse(argc, argv, CLI_URL | CLI_JSON, 0, usage, &o, &first);

    if (code >= 0)
        return code;
    if (argc - first > 1 && cli_url_among_names("list", argc - first, argv + first) >= 0)
        return EXIT_USAGE;
    if (argc - first > 1)
        return cli_usage_error("list", "want at most one PREFIX");
    char scheme[32];
    if (first < argc && cli_url_like(argv[first], scheme, sizeof scheme))
        return cli_usage_error("list",
                               "'%s://...' looks like a URL, not a PREFIX; a URL goes with -u "
                               "URL (or $DLOCK_URL)",
                               scheme);
    const char *prefix = first < argc ? argv[first] : "";
    if (strcmp(prefix, "--") == 0)
        return cli_usage_error("list",
                               "'--' is no PREFIX: it is the word that ends dlock's options (a "
                               "PREFIX that starts with '-' goes after a -- of its own: dlock list "
                               "-- -PREFIX)");
    code = cli_open(o.url, &c);
    if (code != 0)
        return code;
    int rc = dlock_list(c, prefix, 0, collect, &all);
    if (all.oom) {
        fputs("dlock: out of memory\n", stderr);
        exit(EXIT_FAILURE_OTHER);
    }
    json_object *doc = o.json ? cli_json_doc() : NULL;
    json_object *locks = o.json ? json_object_new_array() : NULL;
    /* A lock freed since it was listed shows as free, with no holder. */
    for (size_t i = 0; i < all.n && rc == DLOCK_OK; i++)
        rc = show_lock(c, &all.items[i], locks);
    if (rc != DLOCK_OK) {
        code = rc == DLOCK_ENOTSUP ? cli_fail_unsupported("list", NULL)
                                   : cli_fail(rc, "cannot list the locks");
        json_object_put(locks);
        json_object_put(doc);
    } else if (doc != NULL) {
        json_object_object_add(doc, "prefix", cli_json_text(prefix, 0));
        json_object_object_add(doc, "locks", locks);
        cli_json_print(doc);
    } else if (all.n == 0 && prefix[0] == '\0') {
        /* no PREFIX (or an empty one) is every lock, not a name '' */
        printf("no lock is held or waited for\n");
    } else if (all.n == 0) {
        printf("no lock under '");
        cli_print_text(prefix);
        printf("' is held or waited for\n");
    }
    for (size_t i = 0; i < all.n; i++)
        free(all.items[i].name);
    free(all.items);
    dlock_client_close(c);
    return code;
}
