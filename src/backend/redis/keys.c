/* SPDX-License-Identifier: MIT */
/* keys.c - see keys.h. */
#include "keys.h"

#include "../../base/error.h"
#include "../escape.h"

#include <ctype.h>
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

/* P:{E} at out (plen + strlen(name) + 5 bytes at most, no NUL); its length. */
static size_t write_tag(const char *prefix, size_t plen, const char *name, char *out)
{
    memcpy(out, prefix, plen);
    size_t at = plen;
    out[at++] = ':';
    out[at++] = '{';
    at += encode(name, out + at);
    out[at++] = '}';
    return at;
}

int dlock__redis_keys_of(const char *prefix, const char *name, enum dlock__kind kind, int simple,
                         char *keys[3], size_t lens[3])
{
    static const char *const kinds[] = {[DLOCK__MUTEX] = "",
                                        [DLOCK__FAIR] = "",
                                        [DLOCK__READ] = ":rw",
                                        [DLOCK__WRITE] = ":rw",
                                        [DLOCK__SEMAPHORE] = ":sem"};
    static const char fence[] = ":fence";
    const char *kind_text = simple ? "" : kinds[kind];
    size_t plen = strlen(prefix), nlen = strlen(name), klen = strlen(kind_text);
    /* L, the fence counter and N, each with its NUL: a tag P:{E} is at most
     * plen + nlen + 5 bytes (E: nlen + 2) */
    size_t tag_cap = plen + nlen + 5;
    char *block = malloc((tag_cap + klen + 1) + (tag_cap + sizeof fence) + (nlen + 1));

    if (block == NULL) {
        keys[0] = keys[1] = keys[2] = NULL;
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    char *at = block;
    size_t tag;
    if (simple) {
        /* L is N itself */
        memcpy(at, name, nlen + 1);
        keys[0] = keys[2] = at;
        lens[0] = lens[2] = nlen;
        at += nlen + 1;
        tag = write_tag(prefix, plen, name, at);
    } else {
        tag = write_tag(prefix, plen, name, at);
        memcpy(at + tag, kind_text, klen + 1);
        keys[0] = at;
        lens[0] = tag + klen;
        at += tag + klen + 1;
        memcpy(at, block, tag);
    }
    /* one fence counter for every kind of the name: one name is one lock */
    memcpy(at + tag, fence, sizeof fence);
    keys[1] = at;
    lens[1] = tag + sizeof fence - 1;
    if (!simple) {
        at += tag + sizeof fence;
        memcpy(at, name, nlen + 1);
        keys[2] = at;
        lens[2] = nlen;
    }
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

int dlock__redis_check_prefix(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > DLOCK__REDIS_PREFIX_MAX)
        return dlock__fail(DLOCK_EINVAL, "option prefix=%s: want 1..%d characters", p,
                           DLOCK__REDIS_PREFIX_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) p[i];
        if (!(isalnum(c) || c == '_' || c == '-' || c == '.' || c == ':' || c == '/'))
            return dlock__fail(DLOCK_EINVAL, "option prefix=%s: use letters, digits and _-.:/", p);
    }
    return DLOCK_OK;
}

/* The Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag. */
unsigned dlock__redis_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        const char *close = memchr(open + 1, '}', (size_t) (key + len - open - 1));
        if (close != NULL && close > open + 1) {
            key = open + 1;
            len = (size_t) (close - open - 1);
        }
    }
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned) (unsigned char) key[i] << 8;
        for (int bit = 0; bit < 8; bit++)
            crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc & 16383;
}
