/* SPDX-License-Identifier: MIT */
/* keys.c - see keys.h. */
#include "keys.h"

#include "../../base/error.h"
#include "../escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* N's text inside the tag (strlen(name) + 3 bytes at most, no NUL). A
 * first '}' would close an empty tag, which Redis does not hash by; a first
 * '%' is escaped so that the two escapes read back as one name. */
static size_t encode(const char *name, char *out)
{
    size_t n = strlen(name), at = 0;
    if (name[0] == '}' || name[0] == '%')
        at = dlock__escape_byte(out, (unsigned char) name[0]);
    else
        out[at++] = name[0];
    memcpy(out + at, name + 1, n - 1);
    return at + n - 1;
}

int dlock__redis_keys_of(const char *prefix, const char *name, enum dlock__kind kind, int simple,
                         char *keys[2], size_t lens[2])
{
    static const char *const kinds[] = {[DLOCK__MUTEX] = "",
                                        [DLOCK__FAIR] = "",
                                        [DLOCK__READ] = ":rw",
                                        [DLOCK__WRITE] = ":rw",
                                        [DLOCK__SEMAPHORE] = ":sem"};
    const char *kind_text = simple ? "" : kinds[kind];
    size_t plen = strlen(prefix), cap = plen + 3 * strlen(name) + 32;

    keys[0] = malloc(cap);
    keys[1] = malloc(cap);
    if (keys[0] == NULL || keys[1] == NULL) {
        free(keys[0]);
        free(keys[1]);
        keys[0] = keys[1] = NULL;
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    /* P:{E}<kind> */
    memcpy(keys[0], prefix, plen);
    size_t at = plen;
    keys[0][at++] = ':';
    keys[0][at++] = '{';
    at += encode(name, keys[0] + at);
    keys[0][at++] = '}';
    /* one fence counter for every kind of the name: one name is one lock */
    lens[1] = (size_t) snprintf(keys[1], cap, "%.*s:fence", (int) at, keys[0]);
    at += (size_t) snprintf(keys[0] + at, cap - at, "%s", kind_text);
    if (simple) {
        snprintf(keys[0], cap, "%s", name);
        at = strlen(name);
    }
    lens[0] = at;
    return DLOCK_OK;
}

int dlock__redis_key_lock(const char *prefix, const char *key, size_t len, char *name, size_t cap,
                          const char **rest)
{
    size_t plen = strlen(prefix);

    if (len < plen + 4 || memcmp(key, prefix, plen) != 0 || key[plen] != ':' ||
        key[plen + 1] != '{' || memchr(key, '\0', len) != NULL)
        return 0;
    const char *tag = key + plen + 2, *close = NULL;
    for (const char *p = tag; p < key + len; p++) {
        if (*p == '}')
            close = p;
    }
    if (close == NULL || close == tag || tag[0] == '}')
        return 0;
    size_t n = (size_t) (close - tag);
    if (tag[0] == '%') {
        /* the first byte escaped, and only a '}' or a '%' ever is */
        if (n < 3 || (strncmp(tag, "%7D", 3) != 0 && strncmp(tag, "%25", 3) != 0) || n - 2 >= cap)
            return 0;
        name[0] = tag[1] == '7' ? '}' : '%';
        memcpy(name + 1, tag + 3, n - 3);
        name[n - 2] = '\0';
    } else {
        if (n >= cap)
            return 0;
        memcpy(name, tag, n);
        name[n] = '\0';
    }
    *rest = close + 1;
    return 1;
}

/* A Redis glob matching text as written. */
static size_t glob_escape(const char *text, size_t n, char *out)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("*?[]\\", text[i]) != NULL)
            out[at++] = '\\';
        out[at++] = text[i];
    }
    return at;
}

char *dlock__redis_list_pattern(const char *prefix, const char *name_prefix)
{
    size_t plen = strlen(prefix), n = strlen(name_prefix);
    char *pattern = malloc(plen + 6 * n + 16);
    char *tag = malloc(3 * n + 4);

    if (pattern == NULL || tag == NULL) {
        free(pattern);
        free(tag);
        return NULL;
    }
    /* a name's first byte alone may be escaped: the prefix's is the same */
    size_t tlen = n > 0 ? encode(name_prefix, tag) : 0;
    size_t at = (size_t) sprintf(pattern, "%s:{", prefix);
    at += glob_escape(tag, tlen, pattern + at);
    pattern[at++] = '*';
    pattern[at] = '\0';
    free(tag);
    return pattern;
}
