/* SPDX-License-Identifier: MIT */
/* json.c - the JSON documents the dlock command prints, built with json-c.
 *
 * Every document is one object on one line whose first field, "version",
 * is CLI_JSON_VERSION: the shape of the documents, raised when a field
 * changes meaning or goes away (new fields may appear without it).
 *
 * JSON text is UTF-8, but lock names and owner tokens are bytes (a foreign
 * client's token in a --simple key can be anything), and json-c copies bytes
 * of 0x80 and above as they are. So every string is made valid UTF-8 here
 * first: each byte that does not start a well-formed sequence (RFC 3629: no
 * overlong forms, surrogates or code points above U+10FFFF) becomes U+FFFD.
 * json-c then escapes '"', '\' and the control characters below 0x20. A
 * string that may have been cut at the end of a fixed buffer (the owner in
 * dlock_status) loses an incomplete last sequence rather than ending in a
 * replacement character for half a character.
 *
 * Numbers are doubles to most JSON readers (jq 1.6, JavaScript): exact up
 * to 2^53 only. A fence can be far above (ZooKeeper's are creation time
 * times 2^20 plus a zxid, near 2^61): two fences would read as one. So a
 * 64-bit number comes as a decimal string too (cli_json_add_u64). */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *need(void *p)
{
    if (p == NULL) {
        fputs("dlock: out of memory\n", stderr);
        exit(EXIT_FAILURE_OTHER);
    }
    return p;
}

/* The length of the well-formed UTF-8 sequence at s (n bytes left): 1..4,
 * 0 if s does not start one, -1 if it starts one that n cuts short. */
static int utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned lead = s[0], lo = 0x80, hi = 0xbf;
    size_t len;

    if (lead < 0x80)
        return 1;
    if (lead >= 0xc2 && lead <= 0xdf) {
        len = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        len = 3;
        lo = lead == 0xe0 ? 0xa0 : 0x80; /* overlong */
        hi = lead == 0xed ? 0x9f : 0xbf; /* surrogates */
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        len = 4;
        lo = lead == 0xf0 ? 0x90 : 0x80; /* overlong */
        hi = lead == 0xf4 ? 0x8f : 0xbf; /* above U+10FFFF */
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if (i >= n)
            return -1;
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
            return 0;
    }
    return (int) len;
}

char *cli_utf8_clean(const char *text, int may_be_cut)
{
    const unsigned char *s = (const unsigned char *) text;
    size_t n = strlen(text), at = 0, out_len = 0;
    char *out = need(malloc(3 * n + 1));

    while (at < n) {
        int len = utf8_sequence(s + at, n - at);
        if (len < 0 && may_be_cut)
            break;
        if (len <= 0) {
            memcpy(out + out_len, "\xef\xbf\xbd", 3);
            out_len += 3;
            at++;
            continue;
        }
        memcpy(out + out_len, s + at, (size_t) len);
        out_len += (size_t) len;
        at += (size_t) len;
    }
    out[out_len] = '\0';
    return out;
}

json_object *cli_json_doc(void)
{
    json_object *doc = need(json_object_new_object());
    json_object_object_add(doc, "version", need(json_object_new_int(CLI_JSON_VERSION)));
    return doc;
}

json_object *cli_json_text(const char *text, int may_be_cut)
{
    char *clean = cli_utf8_clean(text, may_be_cut);
    json_object *s = need(json_object_new_string(clean));
    free(clean);
    return s;
}

json_object *cli_json_fixed(double v, int decimals)
{
    char digits[64];

    if (!isfinite(v))
        return NULL; /* null */
    if (decimals <= 0)
        return need(json_object_new_int64(llround(v)));
    /* json-c would print a double with 17 significant digits */
    snprintf(digits, sizeof digits, "%.*f", decimals, v);
    return need(json_object_new_double_s(v, digits));
}

void cli_json_add_u64(json_object *doc, const char *key, uint64_t v)
{
    char name[64], digits[24];

    snprintf(name, sizeof name, "%s_str", key);
    snprintf(digits, sizeof digits, "%" PRIu64, v);
    json_object_object_add(doc, key, need(json_object_new_uint64(v)));
    json_object_object_add(doc, name, need(json_object_new_string(digits)));
}

void cli_json_print(json_object *doc)
{
    const char *line = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);
    if (line == NULL) {
        fputs("dlock: out of memory\n", stderr);
        exit(EXIT_FAILURE_OTHER);
    }
    puts(line);
    fflush(stdout);
    json_object_put(doc);
}
