/* SPDX-License-Identifier: MIT */
/* escape.c - see escape.h. */
#include "escape.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

size_t dlock__escape_byte(char *out, unsigned char c)
{
    static const char digits[] = "0123456789ABCDEF";
    out[0] = '%';
    out[1] = digits[c >> 4];
    out[2] = digits[c & 15];
    return 3;
}

long dlock__unescape(const char *in, size_t n, char *out, size_t cap)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char) in[i];
        if (c == '%') {
            int hi = i + 2 < n ? hex_value(in[i + 1]) : -1;
            int lo = hi >= 0 ? hex_value(in[i + 2]) : -1;
            if (lo < 0)
                return -1;
            c = hi << 4 | lo;
            i += 2;
        }
        if (c == 0 || len + 1 >= cap)
            return -1;
        out[len++] = (char) c;
    }
    if (len >= cap)
        return -1;
    out[len] = '\0';
    return (long) len;
}
