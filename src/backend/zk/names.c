/* SPDX-License-Identifier: MIT */
/* names.c - see names.h. */
#include "names.h"

#include "../../base/error.h"
#include "../escape.h"
#include "dlock.h"
#include "recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of the UTF-8 character at p that ZooKeeper refuses in a path
 * (PathUtils.validatePath, on Java's UTF-16): private use, the last 16 of
 * the BMP, every character above U+FFFF (a surrogate pair there); 0 for
 * one it takes. The core refused control characters and surrogates. */
static size_t refused_char(const unsigned char *p)
{
    if (p[0] >= 0xf0)
        return 4; /* U+10000 and above */
    if (p[0] == 0xee || (p[0] == 0xef && p[1] < 0xa4))
        return 3;                                                /* U+E000..U+F8FF */
    return p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xb0 ? 3 : 0; /* U+FFF0..U+FFFF */
}

/* One part of the path: name[from, to) with the '/' of it (those that would
 * make an empty part) escaped, written at out. Returns its length. */
static size_t encode_part(const char *name, size_t from, size_t to, int first, int at_root,
                          char *out)
{
    size_t at = 0;
    for (size_t i = from; i < to;) {
        const unsigned char *p = (const unsigned char *) name + i;
        size_t refused = p[0] >= 0xe0 ? refused_char(p) : 0;
        if (refused > 0) {
            for (size_t k = 0; k < refused; k++)
                at += dlock__escape_byte(out + at, p[k]);
            i += refused;
            continue;
        }
        if (p[0] == '%' || p[0] == '/')
            at += dlock__escape_byte(out + at, p[0]);
        else
            out[at++] = (char) p[0];
        i++;
    }
    out[at] = '\0';
    if (strcmp(out, ".") == 0 || strcmp(out, "..") == 0) {
        size_t dots = at;
        at = 0;
        for (size_t k = 0; k < dots; k++)
            at += dlock__escape_byte(out + at, '.');
        out[at] = '\0';
    } else if (strcmp(out, "locks") == 0 || strcmp(out, "leases") == 0 ||
               (first && at_root && strcmp(out, "zookeeper") == 0)) {
        unsigned char letter = (unsigned char) out[0];
        memmove(out + 3, out + 1, at); /* the rest, and its NUL */
        dlock__escape_byte(out, letter);
        at += 2;
    } else if (dlock__zk_contender(out) >= 0) {
        unsigned char last = (unsigned char) out[at - 1];
        at += dlock__escape_byte(out + at - 1, last) - 1;
        out[at] = '\0';
    }
    return at;
}

/* The escaped name into out (3 * strlen(name) + 1 bytes at least). */
static size_t encode(const char *name, int at_root, char *out)
{
    size_t n = strlen(name), at = 0, from = 0;
    int first = 1;

    /* A '/' separates two parts only between two characters other than
     * '/': every other one is escaped inside a part. */
    for (size_t i = 0; i <= n; i++) {
        int cut = i == n || (name[i] == '/' && i > 0 && name[i - 1] != '/' && i + 1 < n &&
                             name[i + 1] != '/');
        if (!cut)
            continue;
        at += encode_part(name, from, i, first, at_root, out + at);
        if (i < n)
            out[at++] = '/';
        from = i + 1;
        first = 0;
    }
    out[at] = '\0';
    return at;
}

int dlock__zk_path_of(const char *base, const char *name, char *out, size_t cap)
{
    int at_root = strcmp(base, "/") == 0;
    size_t blen = at_root ? 0 : strlen(base);
    char *escaped = malloc(3 * strlen(name) + 1);

    if (escaped == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    size_t elen = encode(name, at_root, escaped);
    size_t len = blen + 1 + elen;
    int rc = DLOCK_OK;
    if (len > DLOCK__ZK_PATH_MAX || len >= cap)
        rc = dlock__fail(DLOCK_EINVAL,
                         "lock name '%.60s%s' is too long for ZooKeeper: its path would be %zu "
                         "bytes (base '%.60s', the name %zu bytes as escaped), over the %d bytes "
                         "a ZooKeeper lock path may have",
                         name, strlen(name) > 60 ? "..." : "", len, base, elen, DLOCK__ZK_PATH_MAX);
    else
        snprintf(out, cap, "%s/%s", at_root ? "" : base, escaped);
    free(escaped);
    return rc;
}

int dlock__zk_name_of(int at_root, const char *rel, char *name, size_t cap)
{
    size_t n = strlen(rel);
    if (n == 0 || cap == 0 || dlock__unescape(rel, n, name, cap) < 0)
        return 0;
    char *again = malloc(3 * strlen(name) + 1);
    if (again == NULL)
        return 0;
    encode(name, at_root, again);
    int same = strcmp(again, rel) == 0;
    free(again);
    return same;
}

int dlock__zk_no_name_under(const char *rel, char *text, size_t cap)
{
    return dlock__unescape(rel, strlen(rel), text, cap) < 0;
}
