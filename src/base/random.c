/* SPDX-License-Identifier: MIT */
/* random.c - see random.h. */
#include "random.h"

#include <errno.h>
#include <sys/random.h>

int64_t dlock__random_below(int64_t n)
{
    uint64_t r;

    if (n <= 0 || getrandom(&r, sizeof r, 0) != (ssize_t) sizeof r)
        return 0;
    return (int64_t) (r % (uint64_t) n);
}

int dlock__random_hex(char *buf, size_t n)
{
    unsigned char raw[64];
    static const char digits[] = "0123456789abcdef";
    size_t got = 0;

    if (n > sizeof raw)
        return -1;
    while (got < n) {
        ssize_t r = getrandom(raw + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        got += (size_t) r;
    }
    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = digits[raw[i] >> 4];
        buf[2 * i + 1] = digits[raw[i] & 15];
    }
    buf[2 * n] = '\0';
    return 0;
}
