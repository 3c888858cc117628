/* SPDX-License-Identifier: MIT */
/* names.c - see names.h. */
#include "names.h"

#include "../escape.h"

#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* E of name into out (3 * strlen(name) + 1 bytes); its length. The
 * suffixes are escaped only when they end the name. */
static size_t encode(const char *name, int whole, char *out)
{
    size_t at = 0;
    for (const char *p = name; *p != '\0'; p++) {
        if (*p == '%' || *p == '/')
            at += dlock__escape_byte(out + at, (unsigned char) *p);
        else
            out[at++] = *p;
    }
    out[at] = '\0';
    if (whole &&
        (ends_with(out, at, DLOCK__ETCD_RW_SUFFIX) || ends_with(out, at, DLOCK__ETCD_SEM_SUFFIX))) {
        char *dot = strrchr(out, '.');
        memmove(dot + 3, dot + 1, strlen(dot + 1) + 1);
        dlock__escape_byte(dot, '.');
        at += 2;
    }
    return at;
}

char *dlock__etcd_lock_prefix(const char *name, enum dlock__kind kind)
{
    const char *suffix = kind == DLOCK__READ || kind == DLOCK__WRITE ? DLOCK__ETCD_RW_SUFFIX
                         : kind == DLOCK__SEMAPHORE                  ? DLOCK__ETCD_SEM_SUFFIX
                                                                     : "";
    size_t n = 3 * strlen(name) + strlen(suffix) + 2;
    char *out = malloc(n);
    if (out == NULL)
        return NULL;
    size_t at = encode(name, 1, out);
    memcpy(out + at, suffix, strlen(suffix));
    at += strlen(suffix);
    out[at++] = '/';
    out[at] = '\0';
    return out;
}

/* A contender's id, the last part of its key: the lease in lower-case hex
 * (as Go's %x writes it), then "-<slot>" for a further handle of one
 * client. */
static int is_contender_id(const char *id, size_t n)
{
    size_t hex = 0, digits = 0;
    while (hex < n && strchr("0123456789abcdef", id[hex]) != NULL && id[hex] != '\0')
        hex++;
    if (hex == 0 || hex > 16)
        return 0;
    if (hex == n)
        return 1;
    if (id[hex] != '-')
        return 0;
    while (hex + 1 + digits < n && id[hex + 1 + digits] >= '0' && id[hex + 1 + digits] <= '9')
        digits++;
    return digits > 0 && digits <= 10 && hex + 1 + digits == n;
}

int dlock__etcd_key_lock(const char *key, size_t len, char *name, size_t cap,
                         enum dlock__kind *kind)
{
    const char *slash = NULL;
    for (const char *p = key; p < key + len; p++) {
        if (*p == '/')
            slash = p;
    }
    if (slash == NULL || memchr(key, '\0', len) != NULL)
        return 0;
    const char *id = slash + 1;
    size_t idn = len - (size_t) (id - key), n = (size_t) (slash - key);
    *kind = DLOCK__MUTEX;
    if (ends_with(key, n, DLOCK__ETCD_RW_SUFFIX)) {
        if (idn < 2 || (id[0] != 'r' && id[0] != 'w') || id[1] != '-')
            return 0;
        id += 2;
        idn -= 2;
        n -= strlen(DLOCK__ETCD_RW_SUFFIX);
        *kind = DLOCK__WRITE;
    } else if (ends_with(key, n, DLOCK__ETCD_SEM_SUFFIX)) {
        n -= strlen(DLOCK__ETCD_SEM_SUFFIX);
        *kind = DLOCK__SEMAPHORE;
    }
    if (n == 0 || !is_contender_id(id, idn) || dlock__unescape(key, n, name, cap) < 0)
        return 0;
    /* only the way this file writes a name: etcdctl's `a/b` is no name */
    char *again = malloc(3 * strlen(name) + 1);
    if (again == NULL)
        return 0;
    size_t m = encode(name, 1, again);
    int same = m == n && memcmp(again, key, n) == 0;
    free(again);
    return same;
}

char *dlock__etcd_list_start(const char *prefix)
{
    char *out = malloc(3 * strlen(prefix) + 1);
    if (out == NULL)
        return NULL;
    encode(prefix, 0, out);
    /* the last '.' may be written %2E in a name that goes on from the
     * prefix to end in ".rwlock" or ".semaphore": start before it */
    char *dot = strrchr(out, '.');
    if (dot != NULL)
        *dot = '\0';
    return out;
}
