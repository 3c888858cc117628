/* SPDX-License-Identifier: MIT */
/* duration.c - the one duration syntax of URL options and the command line:
 * digits, an optional fraction, and a unit (ms, s, m, h; none = seconds).
 * Parsed by hand rather than with strtod, which would also take spaces,
 * signs, exponents, hexadecimal, "inf" and "nan". */
#include "error.h"

#include <string.h>

int dlock_parse_duration(const char *text, int64_t *ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"", 1000}};
    const int64_t limit = INT64_C(1) << 53; /* far beyond any lease, and exact */
    int64_t whole = 0, frac = 0, frac_scale = 1;
    const char *p = text;

    if (text == NULL || ms == NULL)
        return dlock__fail(DLOCK_EINVAL, "duration is NULL");
    if (*p < '0' || *p > '9')
        goto bad;
    while (*p >= '0' && *p <= '9') {
        whole = whole * 10 + (*p++ - '0');
        if (whole > limit)
            return dlock__fail(DLOCK_EINVAL, "duration '%s' is too long", text);
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            goto bad;
        while (*p >= '0' && *p <= '9') {
            if (frac_scale < 1000000000) { /* further digits are below a nanosecond */
                frac = frac * 10 + (*p - '0');
                frac_scale *= 10;
            }
            p++;
        }
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].unit) != 0)
            continue;
        if (whole > limit / units[i].ms)
            return dlock__fail(DLOCK_EINVAL, "duration '%s' is too long", text);
        *ms = whole * units[i].ms + frac * units[i].ms / frac_scale;
        return DLOCK_OK;
    }
bad:
    return dlock__fail(DLOCK_EINVAL,
                       "'%s' is not a duration (want a number and a unit: 250ms, 1.5s, 2m, 1h; "
                       "a bare number is seconds)",
                       text);
}
