/* SPDX-License-Identifier: MIT */
/* names.c - dlock names as GET_LOCK names, and SQL literals.
 *
 * GET_LOCK names are server-wide (not per database), at most 64
 * characters (MySQL 5.7+; MariaDB allows 192 bytes) and compared without
 * regard to case or trailing spaces. A dlock name maps to one of two
 * disjoint forms (README.md):
 *   - "dlock:" + the name, when the name is at most 58 characters, all of
 *     them lower-case ASCII letters, digits or one of "-_.:/@+=,": two such
 *     strings are equal under any collation only if they are equal bytes;
 *   - "dlock#" + 40 hex digits of the SHA-256 of the name, for every other
 *     name (upper case, other characters, too long).
 * So distinct dlock names never share a GET_LOCK name, save a SHA-256
 * collision of 160 bits. With ?names=exact the name goes to GET_LOCK as it
 * is, to share the lock with code that calls GET_LOCK itself; a name that
 * cannot be passed as it is (over 64 characters) is refused. */
#include "names.h"

#include "../../base/error.h"
#include "dlock.h"

#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- SHA-256 */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void block(uint32_t h[8], const unsigned char *b)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t) b[4 * i] << 24 | (uint32_t) b[4 * i + 1] << 16 |
               (uint32_t) b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
        uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        h[i] += v[i];
}

static void sha256(const unsigned char *data, size_t len, unsigned char out[32])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char last[128] = {0};
    size_t full = len / 64 * 64, rest = len - full;
    for (size_t i = 0; i < full; i += 64)
        block(h, data + i);
    memcpy(last, data + full, rest);
    last[rest] = 0x80;
    size_t tail = rest + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t) len * 8;
    for (int i = 0; i < 8; i++)
        last[tail - 1 - i] = (unsigned char) (bits >> (8 * i));
    block(h, last);
    if (tail == 128)
        block(h, last + 64);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char) (h[i] >> 24);
        out[4 * i + 1] = (unsigned char) (h[i] >> 16);
        out[4 * i + 2] = (unsigned char) (h[i] >> 8);
        out[4 * i + 3] = (unsigned char) h[i];
    }
}

/* ---------------------------------------------------------------- names */

static int plain_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("-_.:/@+=,", ch) != NULL);
}

int dlock__my_name(const char *name, int exact, char *out, size_t len)
{
    size_t n = strlen(name);
    if (exact) {
        size_t chars = 0;
        for (const unsigned char *s = (const unsigned char *) name; *s != '\0'; s++)
            chars += (*s & 0xc0) != 0x80;
        if (chars > DLOCK__MY_NAME_MAX || n >= len)
            return dlock__fail(DLOCK_EINVAL,
                               "lock name '%.64s...' has %zu characters: with names=exact it goes "
                               "to GET_LOCK as it is, which takes at most %d",
                               name, chars, DLOCK__MY_NAME_MAX);
        memcpy(out, name, n + 1);
        return DLOCK_OK;
    }
    int plain = n > 0 && n <= DLOCK__MY_NAME_MAX - strlen(DLOCK__MY_PLAIN_PREFIX);
    for (size_t i = 0; plain && i < n; i++)
        plain = plain_char((unsigned char) name[i]);
    if (plain) {
        snprintf(out, len, "%s%s", DLOCK__MY_PLAIN_PREFIX, name);
        return DLOCK_OK;
    }
    unsigned char d[32];
    sha256((const unsigned char *) name, n, d);
    size_t used = (size_t) snprintf(out, len, "%s", DLOCK__MY_HASHED_PREFIX);
    for (int i = 0; i < 20 && used + 2 < len; i++)
        used += (size_t) snprintf(out + used, len - used, "%02x", d[i]);
    return DLOCK_OK;
}

char *dlock__my_literal(const char *text, int binary)
{
    size_t n = strlen(text);
    char *lit = malloc(2 * n + 40);
    if (lit == NULL)
        return NULL;
    size_t used = 0;
    /* an empty X'' is a valid literal; CONVERT makes it text of the
     * connection's character set, compared as GET_LOCK compares names */
    used += (size_t) sprintf(lit, "%sX'", binary ? "" : "CONVERT(");
    for (size_t i = 0; i < n; i++)
        used += (size_t) sprintf(lit + used, "%02x", (unsigned char) text[i]);
    sprintf(lit + used, "'%s", binary ? "" : " USING utf8mb4)");
    return lit;
}
