/* SPDX-License-Identifier: MIT */
/* recipe.c - see recipe.h. */
#include "recipe.h"

#include "../../base/random.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const marker_texts[] = {
    [DLOCK__ZK_LOCK] = "lock-",   [DLOCK__ZK_READ] = "__READ__",  [DLOCK__ZK_WRITE] = "__WRIT__",
    [DLOCK__ZK_LEASE] = "lease-", [DLOCK__ZK_KAZOO] = "__lock__",
};

const char *dlock__zk_marker_text(enum dlock__zk_marker m)
{
    return marker_texts[m];
}

void dlock__zk_node_prefix(char *buf, size_t len, const char *uuid, enum dlock__zk_marker m)
{
    snprintf(buf, len, "_c_%s-%s", uuid, marker_texts[m]);
}

int dlock__zk_uuid(char out[37])
{
    char hex[33];
    if (dlock__random_hex(hex, 16) != 0)
        return -1;
    /* version 4, variant 10xx, as java.util.UUID.randomUUID() */
    hex[12] = '4';
    hex[16] = "89ab"[hex[16] % 4];
    snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
    return 0;
}

/* The text after the last occurrence of m in child, or NULL. */
static const char *after_last(const char *child, const char *m)
{
    const char *found = NULL, *p = child;
    size_t n = strlen(m);
    while ((p = strstr(p, m)) != NULL) {
        found = p + n;
        p += 1;
    }
    return found;
}

const char *dlock__zk_sort_key(const char *child, const enum dlock__zk_marker *markers,
                               size_t nmarkers)
{
    /* Curator applies each marker in turn to what the previous one left. */
    const char *key = child;
    for (size_t i = 0; i < nmarkers; i++) {
        const char *after = after_last(key, marker_texts[markers[i]]);
        if (after != NULL)
            key = after;
    }
    return key;
}

/* qsort has no context argument: the markers of the current sort. */
static _Thread_local const enum dlock__zk_marker *sorting_markers;
static _Thread_local size_t sorting_nmarkers;

static int by_key(const void *a, const void *b)
{
    const char *x = *(char *const *) a, *y = *(char *const *) b;
    return strcmp(dlock__zk_sort_key(x, sorting_markers, sorting_nmarkers),
                  dlock__zk_sort_key(y, sorting_markers, sorting_nmarkers));
}

void dlock__zk_rank(char **children, size_t n, const enum dlock__zk_marker *markers,
                    size_t nmarkers)
{
    if (n < 2)
        return; /* children may be NULL then */
    sorting_markers = markers;
    sorting_nmarkers = nmarkers;
    qsort(children, n, sizeof *children, by_key);
}

/* A contender ranks by the sequence ZooKeeper appended, its last 10 digits
 * (dlock__zk_contender checked them), before any other child. */
static int by_sequence(const void *a, const void *b)
{
    const char *x = *(char *const *) a, *y = *(char *const *) b;
    int cx = dlock__zk_contender(x) >= 0, cy = dlock__zk_contender(y) >= 0;
    if (cx != cy)
        return cy - cx;
    if (!cx)
        return strcmp(x, y);
    return strcmp(x + strlen(x) - 10, y + strlen(y) - 10);
}

void dlock__zk_rank_all(char **children, size_t n)
{
    if (n >= 2)
        qsort(children, n, sizeof *children, by_sequence);
}

int dlock__zk_is_ours(const char *child, const char *uuid)
{
    return strncmp(child, "_c_", 3) == 0 && strncmp(child + 3, uuid, 36) == 0 && child[39] == '-';
}

int dlock__zk_is_writer(const char *child)
{
    return strstr(child, marker_texts[DLOCK__ZK_WRITE]) != NULL;
}

int dlock__zk_contender(const char *child)
{
    size_t n = strlen(child);

    if (n < 10)
        return -1;
    for (size_t i = n - 10; i < n; i++) {
        if (child[i] < '0' || child[i] > '9')
            return -1;
    }
    for (size_t m = 0; m < sizeof marker_texts / sizeof marker_texts[0]; m++) {
        size_t ml = strlen(marker_texts[m]);
        if (n - 10 >= ml && memcmp(child + n - 10 - ml, marker_texts[m], ml) == 0)
            return (int) m;
    }
    return -1;
}
