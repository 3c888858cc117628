/* SPDX-License-Identifier: MIT */
/* notice.c - see notice.h. Strict on purpose: a notice that does not read
 * exactly as one is dropped (the waiter asks the store again), never read
 * as some other fence. */
#include "notice.h"

#include <string.h>

static int token_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '_' || c == '.';
}

/* A decimal number at *p (up to end), without sign or leading zero. */
static int number(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (s == end || *s < '0' || *s > '9' ||
        (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9'))
        return -1;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (uint64_t) (*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t) (*s - '0');
    }
    *p = s;
    *out = v;
    return 0;
}

int dlock__notice_decode(const char *text, size_t len, dlock__notice *out)
{
    const char *p = text, *end = text + len;
    size_t n = 0;

    while (p < end && token_char(*p) && n < DLOCK__NOTICE_TOKEN_MAX)
        out->token[n++] = *p++;
    out->token[n] = '\0';
    if (n == 0 || p == end || *p++ != ' ')
        return -1;
    if (number(&p, end, &out->wait_id) != 0 || p == end || *p++ != ' ')
        return -1;
    if (number(&p, end, &out->fence) != 0 || p != end || out->fence == 0)
        return -1;
    return 0;
}
