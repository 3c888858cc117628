/* SPDX-License-Identifier: MIT */
/* fuzz_url.c - libFuzzer target for the store URL parser (src/base/url.c)
 * and the duration syntax (dlock_parse_duration). The input is the URL.
 *
 * Beyond crashes it checks what must hold, and aborts when it does not:
 *   - a parsed URL's text is the input with the user-info's secret (the
 *     password, or a user-info without ':', which backends read as one)
 *     replaced by "***", and is the input unchanged when there is none,
 *     but for the values of options whose key may name a secret (a '%', or
 *     pas, pwd, secret, auth, token, cred in any case), also "***";
 *   - no message shows a user-info. Whether a message shows the one of the
 *     input cannot be told from the message alone (it may quote other parts
 *     next to its own words, which can spell the same text), so the input is
 *     parsed again with a canary in its user-info (which ends at the last
 *     '@' ahead of any '?', as the masking of an unparsed URL reads it), once
 *     at its end and once at the start of its secret (after the first ':'):
 *     when that parse fails, its detail (dlock_errmsg) must not show the
 *     canary, so no part of the user-info; when it succeeds and the canary is
 *     in the parsed user-info, neither the masked text nor any option message
 *     may show it;
 *   - a duration that parses is at least 0, at most DLOCK_DURATION_MAX_MS
 *     through the URL (the public parser's own bound is 2^53 ms plus a
 *     fraction of a unit); parsing is deterministic; options read back as
 *     parsed, and dlock__url_clear leaves nothing.
 *
 * Built as a fuzzer with clang (tests/CMakeLists.txt); with any compiler
 * it is also linked to replay.c, which runs the seed corpus as a test. */
#include "base/error.h"
#include "base/url.h"
#include "dlock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* No message's prose has '~' or '!'. */
#define CANARY "~s3cr3t!~"

static void violated(const char *what, const char *url, const char *detail)
{
    fprintf(stderr, "fuzz_url: %s\n  url:    %s\n  detail: %s\n", what, url, detail);
    abort();
}

static void no_canary(const char *url, const char *detail, const char *what)
{
    if (strstr(detail, CANARY) != NULL)
        violated(what, url, detail);
}

/* Where the canary goes: the last '@' after the first "://" and ahead of
 * any '?' (the end of the user-info as an unparsed URL's masking reads it),
 * or NULL. */
static const char *userinfo_end(const char *text)
{
    const char *s = strstr(text, "://"), *end = text + strcspn(text, "?"), *at = NULL;

    if (s == NULL)
        return NULL;
    for (const char *p = s + 3; p < end; p++) {
        if (*p == '@')
            at = p;
    }
    return at;
}

/* The secret of a parsed URL's user-info, as the grammar of url.h reads it:
 * in the authority (up to '/' or '?'), before its last '@'; the part after
 * the first ':' there, or all of it when there is no ':'. Sets *at to the
 * '@'. Returns 0 when the authority has no '@'. */
static int secret_span(const char *text, const char **start, const char **at)
{
    const char *auth = strstr(text, "://"), *end, *colon;

    if (auth == NULL)
        return 0;
    auth += 3;
    end = auth + strcspn(auth, "/?");
    *at = NULL;
    for (const char *p = auth; p < end; p++) {
        if (*p == '@')
            *at = p;
    }
    if (*at == NULL)
        return 0;
    colon = memchr(auth, ':', (size_t) (*at - auth));
    *start = colon != NULL ? colon + 1 : auth;
    return 1;
}

/* Whether an option's key may name a secret, as url.h says messages treat
 * it: a '%' in it, or one of these words in any case. */
static int secret_key(const char *key, size_t len)
{
    static const char *const words[] = {"pas", "pwd", "secret", "auth", "token", "cred"};
    if (memchr(key, '%', len) != NULL)
        return 1;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        for (size_t i = 0; i + strlen(words[w]) <= len; i++) {
            if (strncasecmp(key + i, words[w], strlen(words[w])) == 0)
                return 1;
        }
    }
    return 0;
}

/* s with the value of every option of a secret key replaced by "***"
 * (malloc'd). */
static char *mask_options(const char *s)
{
    char *out = malloc(strlen(s) * 4 + 8);
    if (out == NULL)
        abort();
    const char *q = strchr(s, '?');
    if (q == NULL) {
        strcpy(out, s);
        return out;
    }
    size_t used = (size_t) (q + 1 - s);
    memcpy(out, s, used);
    for (const char *p = q + 1; *p != '\0';) {
        size_t n = strcspn(p, "&"), key = strcspn(p, "=&");
        if (key < n && secret_key(p, key)) {
            memcpy(out + used, p, key + 1);
            memcpy(out + used + key + 1, "***", 3);
            used += key + 4;
        } else {
            memcpy(out + used, p, n);
            used += n;
        }
        p += n;
        if (*p == '&')
            out[used++] = *p++;
    }
    out[used] = '\0';
    return out;
}

static void check_masked(const char *text, const dlock__url *url)
{
    const char *start, *at;
    char *want;

    if ((url->user == NULL && url->password == NULL) || !secret_span(text, &start, &at)) {
        if (url->password != NULL)
            violated("a password was parsed where no user-info is", text, url->text);
        want = mask_options(text);
        if (strcmp(url->text, want) != 0)
            violated("a URL without a secret was changed for messages (but for the values of "
                     "options that may be secrets)",
                     text, url->text);
        free(want);
        return;
    }
    char *user_masked = malloc(strlen(text) + 4);
    if (user_masked == NULL)
        abort();
    memcpy(user_masked, text, (size_t) (start - text));
    strcpy(user_masked + (start - text), "***");
    strcat(user_masked, at);
    want = mask_options(user_masked);
    free(user_masked);
    if (strcmp(url->text, want) != 0)
        violated("the masked URL is not the URL with its secret (and the values of options "
                 "that may be secrets) replaced by ***",
                 text, url->text);
    free(want);
}

static void check_duration(const char *text)
{
    int64_t a = -1, b = -1;
    int rc = dlock_parse_duration(text, &a);

    if (dlock_parse_duration(text, &b) != rc || a != b)
        violated("dlock_parse_duration is not deterministic", text, dlock_errmsg());
    if (rc == DLOCK_OK && (a < 0 || a > (INT64_C(1) << 53) + 3600000))
        violated("dlock_parse_duration gave a value out of range", text, "");
    if (rc != DLOCK_OK && (rc != DLOCK_EINVAL || a != -1))
        violated("dlock_parse_duration failed with another code, or stored a value", text,
                 dlock_errmsg());
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void check_same(const char *text, const dlock__url *a, const dlock__url *b)
{
    int same = same_str(a->text, b->text) && same_str(a->scheme, b->scheme) &&
               same_str(a->user, b->user) && same_str(a->password, b->password) &&
               same_str(a->path, b->path) && a->nhosts == b->nhosts && a->noptions == b->noptions;
    for (size_t i = 0; same && i < a->nhosts; i++)
        same = same_str(a->hosts[i].name, b->hosts[i].name) && a->hosts[i].port == b->hosts[i].port;
    for (size_t i = 0; same && i < a->noptions; i++)
        same = same_str(a->options[i].key, b->options[i].key) &&
               same_str(a->options[i].value, b->options[i].value);
    if (!same)
        violated("two parses of one URL differ", text, a->text);
}

/* The parsed URL's parts, checked. */
static void check_parsed(const char *text, dlock__url *url)
{
    check_masked(text, url);
    if (url->nhosts > DLOCK__URL_MAX_HOSTS || url->noptions > DLOCK__URL_MAX_OPTIONS)
        violated("too many hosts or options were kept", text, url->text);
    for (size_t i = 0; i < url->nhosts; i++) {
        if (url->hosts[i].name[0] == '\0' || url->hosts[i].port < 0 || url->hosts[i].port > 65535)
            violated("a host is empty or its port out of range", text, url->text);
    }
    if (url->noptions > 0 && dlock__url_check_unused(url) != DLOCK_EINVAL)
        violated("an unread option passed the check", text, url->text);
}

/* Reads every option as the backends do (a duration, an integer, a
 * string), checking what comes back; with canary set, that no message
 * shows it. */
static void read_options(const char *text, dlock__url *url, int canary)
{
    for (size_t i = 0; i < url->noptions; i++) {
        const char *key = url->options[i].key;
        int64_t ms = -7;
        long v = -7;

        check_duration(url->options[i].value);
        if (dlock__url_get(url, key) != url->options[i].value || !url->options[i].used)
            violated("dlock__url_get did not find an option", text, key);
        int rc = dlock__url_duration(url, key, 0, &ms);
        if (rc == DLOCK_OK && (ms < 0 || ms > DLOCK_DURATION_MAX_MS))
            violated("an option's duration is out of range", text, key);
        if (rc != DLOCK_OK && ms != -7)
            violated("a refused duration was stored", text, key);
        if (rc != DLOCK_OK && canary)
            no_canary(text, dlock_errmsg(), "a duration option's message shows the user-info");
        rc = dlock__url_int(url, key, -5, 100000, &v);
        if (rc == DLOCK_OK && (v < -5 || v > 100000))
            violated("an option's integer is out of range", text, key);
        if (rc != DLOCK_OK && v != -7)
            violated("a refused integer was stored", text, key);
        if (rc != DLOCK_OK && canary)
            no_canary(text, dlock_errmsg(), "an integer option's message shows the user-info");
    }
    int64_t ms = 42;
    if (dlock__url_duration(url, "no such option", 0, &ms) != DLOCK_OK || ms != 42)
        violated("an absent duration option was not left alone", text, "");
    if (dlock__url_check_unused(url) != DLOCK_OK)
        violated("an option read is still unused", text, dlock_errmsg());
}

/* text parsed with CANARY inserted at text + pos, a place in the user-info
 * that ends at text + at. */
static void canary_parse(const char *text, size_t pos, size_t at)
{
    const char *start, *auth_at;
    char *marked = malloc(strlen(text) + sizeof CANARY);
    dlock__url url;

    if (marked == NULL)
        abort();
    memcpy(marked, text, pos);
    strcpy(marked + pos, CANARY);
    strcat(marked, text + pos);
    if (dlock__url_parse(marked, &url) != DLOCK_OK) {
        no_canary(marked, dlock_errmsg(), "a parse error shows the user-info");
        goto out;
    }
    /* Only what the parse read as the user-info is a secret now (an '@' in
     * the path ends none), and an option may spell the canary (%-escaped). */
    int secret = secret_span(marked, &start, &auth_at) && auth_at == marked + at + strlen(CANARY);
    for (size_t i = 0; secret && i < url.noptions; i++)
        secret = strstr(url.options[i].key, CANARY) == NULL &&
                 strstr(url.options[i].value, CANARY) == NULL;
    if (secret) {
        no_canary(marked, url.text, "the masked URL shows the user-info");
        if (url.noptions > 0 && dlock__url_check_unused(&url) == DLOCK_EINVAL)
            no_canary(marked, dlock_errmsg(), "an unknown option's message shows the user-info");
        read_options(marked, &url, 1);
    }
    dlock__url_clear(&url);
out:
    free(marked);
}

/* The canary at the end of the user-info, and at the start of its secret
 * (after its first ':', if any): a message must show no part of it. */
static void canary_parses(const char *text)
{
    const char *at = userinfo_end(text), *begin, *colon;

    if (at == NULL || strstr(text, CANARY) != NULL)
        return;
    begin = strstr(text, "://") + 3;
    colon = memchr(begin, ':', (size_t) (at - begin));
    canary_parse(text, (size_t) (at - text), (size_t) (at - text));
    canary_parse(text, (size_t) ((colon != NULL ? colon + 1 : begin) - text), (size_t) (at - text));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char first_detail[DLOCK__DETAIL_MAX]; /* as long as a detail can be */
    dlock__url a, b;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    check_duration(text);
    int rc = dlock__url_parse(text, &a);
    snprintf(first_detail, sizeof first_detail, "%s", dlock_errmsg());
    int rc2 = dlock__url_parse(text, &b);
    if (rc != rc2 || (rc != DLOCK_OK && strcmp(first_detail, dlock_errmsg()) != 0))
        violated("two parses of one URL end differently", text, first_detail);
    if (rc == DLOCK_OK) {
        check_same(text, &a, &b);
        dlock__url_clear(&b);
        check_parsed(text, &a);
        read_options(text, &a, 0);
        dlock__url_clear(&a);
        if (a.text != NULL || a.nhosts != 0 || a.noptions != 0)
            violated("dlock__url_clear left something", text, "");
    } else if (rc != DLOCK_EINVAL || first_detail[0] == '\0') {
        violated("the parse failed with another code than EINVAL, or without a detail", text,
                 first_detail);
    }
    canary_parses(text);
    free(text);
    return 0;
}
