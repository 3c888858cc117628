/* SPDX-License-Identifier: MIT */
/* text.c - the checks of text a caller gives (lock names, prefixes, owner
 * labels): see text.h. */
#include "text.h"

#include "error.h"

#include <string.h>

/* Length of the UTF-8 sequence at s (of at most n bytes), or 0 with *cp
 * set to the code point decoded (or -1 if the bytes are no UTF-8 at all)
 * and *why saying what is wrong. */
static size_t utf8_sequence(const unsigned char *s, size_t n, long *cp_out, const char **why)
{
    size_t len;
    unsigned long cp;

    *cp_out = -1;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        *why = s[0] >= 0x80 && s[0] <= 0xbf ? "a continuation byte without a lead byte"
                                            : "a byte that never occurs in UTF-8";
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if (i >= n || (s[i] & 0xc0) != 0x80) {
            *why = "a sequence cut short";
            return 0;
        }
        cp = cp << 6 | (s[i] & 0x3f);
    }
    *cp_out = (long) cp;
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
        *why = "an overlong form";
    else if (cp > 0x10ffff)
        *why = "a code point above U+10FFFF";
    else if (cp >= 0xd800 && cp <= 0xdfff)
        *why = "a surrogate (U+D800..U+DFFF)";
    else if (cp >= 0x80 && cp <= 0x9f)
        *why = "a C1 control character";
    else
        return len;
    return 0;
}

/* Text that prints as itself, so that it reads the same in a message, a
 * log line, a JSON document or a terminal: no control characters (which
 * would move the cursor or end a line) and no bytes that are not UTF-8
 * (which JSON cannot carry). `what` names it in messages ("lock name"),
 * `whats` names its kind ("names"). */
int dlock__check_text(const char *s, size_t max, const char *what, const char *whats)
{
    size_t len = strlen(s);

    if (len > max)
        return dlock__fail(DLOCK_EINVAL, "%s is %zu bytes long; the limit is %zu", what, len, max);
    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *) s + i;
        const char *why = "";
        long cp;
        if (*p < 0x20 || *p == 0x7f)
            return dlock__fail(DLOCK_EINVAL,
                               "%s contains a control character (byte %zu is 0x%02x); "
                               "%s are UTF-8 text without control characters",
                               what, i, *p, whats);
        size_t n = utf8_sequence(p, len - i, &cp, &why);
        if (n == 0 && cp >= 0x80 && cp <= 0x9f)
            return dlock__fail(DLOCK_EINVAL,
                               "%s contains a C1 control character (U+%04lX at byte %zu); "
                               "%s are UTF-8 text without control characters",
                               what, (unsigned long) cp, i, whats);
        if (n == 0)
            return dlock__fail(DLOCK_EINVAL, "%s is not valid UTF-8: %s at byte %zu (0x%02x)", what,
                               why, i, *p);
        i += n;
    }
    return DLOCK_OK;
}

/* Every store takes the same names. */
int dlock__check_name(const char *name)
{
    if (name == NULL)
        return dlock__fail(DLOCK_EINVAL, "lock name is NULL");
    if (name[0] == '\0')
        return dlock__fail(DLOCK_EINVAL, "lock name is empty");
    return dlock__check_text(name, DLOCK_NAME_MAX, "lock name", "names");
}
