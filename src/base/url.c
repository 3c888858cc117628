/* SPDX-License-Identifier: MIT */
/* url.c - store URL parsing. See url.h for the grammar. */
#include "url.h"

#include "error.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* A malloc'd, percent-decoded copy of s[0..n). NULL with *bad = 1 when an
 * escape is malformed or decodes to NUL; NULL with *bad = 0 on OOM. */
static char *decode(const char *s, size_t n, int *bad)
{
    char *out = malloc(n + 1);
    size_t j = 0;

    *bad = 0;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[j++] = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval((unsigned char) s[i + 1]) : -1;
        int lo = i + 2 < n ? hexval((unsigned char) s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            *bad = 1;
            return NULL;
        }
        out[j++] = (char) (hi * 16 + lo);
        i += 2;
    }
    out[j] = '\0';
    return out;
}

static char *dupn(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out != NULL) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

void dlock__url_clear(dlock__url *url)
{
    free(url->text);
    free(url->text_with_user);
    free(url->userinfo);
    free(url->scheme);
    free(url->user);
    free(url->password);
    for (size_t i = 0; i < url->nhosts; i++)
        free(url->hosts[i].name);
    free(url->path);
    for (size_t i = 0; i < url->noptions; i++) {
        free(url->options[i].key);
        free(url->options[i].value);
    }
    memset(url, 0, sizeof *url);
}

/* "2nd", "3rd", ... of a host's place in the URL (2 to DLOCK__URL_MAX_HOSTS). */
static const char *ordinal(int k)
{
    static const char *const names[] = {"",     "1st",  "2nd",  "3rd",  "4th",  "5th",
                                        "6th",  "7th",  "8th",  "9th",  "10th", "11th",
                                        "12th", "13th", "14th", "15th", "16th"};
    return k > 0 && k < (int) (sizeof names / sizeof names[0]) ? names[k] : "next";
}

static int parse_port(const char *s, size_t n, int *port)
{
    long v = 0;
    if (n == 0 || n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char) s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -1;
    *port = (int) v;
    return 0;
}

/* One "host[:port]" or "[v6]:port" item of the host list. Messages quote
 * the item only when quote is set: an item that lies where an unparsed URL
 * is masked (masked_raw) may be part of a password ("redis://:abc/def@h"
 * reads "abc" as a port), and then they show the masked URL instead. */
static int parse_host(dlock__url *url, const char *s, size_t n, int quote)
{
    const char *name = s, *colon = NULL;
    size_t name_len = n;
    int port = 0;

    if (url->nhosts == DLOCK__URL_MAX_HOSTS)
        return dlock__fail(DLOCK_EINVAL, "too many hosts (at most %d)", DLOCK__URL_MAX_HOSTS);
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL)
            return dlock__fail(DLOCK_EINVAL, "unclosed '[' in host");
        name = s + 1;
        name_len = (size_t) (close - s - 1);
        if (close + 1 < s + n) {
            if (close[1] != ':')
                return dlock__fail(DLOCK_EINVAL, "junk after ']' in host");
            colon = close + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        if (colon != NULL)
            name_len = (size_t) (colon - s);
    }
    if (colon != NULL && parse_port(colon + 1, (size_t) (s + n - colon - 1), &port) != 0)
        return quote ? dlock__fail(DLOCK_EINVAL, "bad port '%.*s' in '%.*s'%s%s%s (want 1-65535)",
                                   (int) (s + n - colon - 1), colon + 1, (int) n, s,
                                   url->nhosts > 0 ? ", the URL's " : "",
                                   url->nhosts > 0 ? ordinal(url->nhosts + 1) : "",
                                   url->nhosts > 0 ? " host" : "")
                     : dlock__fail(DLOCK_EINVAL, "bad port in '%s' (want 1-65535)", url->text);
    if (name_len == 0)
        return dlock__fail(DLOCK_EINVAL, "empty host name");
    for (size_t i = 0; i < name_len; i++) {
        unsigned char c = (unsigned char) name[i];
        if (!(isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':' || c == '%'))
            return quote ? dlock__fail(DLOCK_EINVAL, "bad character '%c' in host name", c)
                         : dlock__fail(DLOCK_EINVAL, "bad character in a host name of '%s'",
                                       url->text);
    }
    url->hosts[url->nhosts].name = dupn(name, name_len);
    if (url->hosts[url->nhosts].name == NULL)
        return DLOCK_ENOMEM;
    url->hosts[url->nhosts].port = port;
    url->nhosts++;
    return DLOCK_OK;
}

static int parse_query(dlock__url *url, const char *q)
{
    while (*q != '\0') {
        size_t n = strcspn(q, "&");
        const char *eq = memchr(q, '=', n);
        int bad;

        if (n == 0) {
            q++;
            continue;
        }
        if (url->noptions == DLOCK__URL_MAX_OPTIONS)
            return dlock__fail(DLOCK_EINVAL, "too many options");
        if (eq == NULL || eq == q)
            return dlock__fail(DLOCK_EINVAL, "option '%.*s' is not key=value", (int) n, q);
        dlock__url_option *o = &url->options[url->noptions];
        o->key = decode(q, (size_t) (eq - q), &bad);
        if (o->key == NULL)
            return bad ? dlock__fail(DLOCK_EINVAL, "bad %%-escape in option name") : DLOCK_ENOMEM;
        o->value = decode(eq + 1, (size_t) (q + n - eq - 1), &bad);
        if (o->value == NULL) {
            int rc = bad ? dlock__fail(DLOCK_EINVAL, "bad %%-escape in option '%s'", o->key)
                         : DLOCK_ENOMEM;
            free(o->key);
            o->key = NULL;
            return rc;
        }
        for (size_t i = 0; i < url->noptions; i++) {
            if (strcmp(url->options[i].key, o->key) == 0) {
                int rc =
                    dlock__fail(DLOCK_EINVAL, "option '%s' given twice in '%s'", o->key, url->text);
                free(o->key);
                free(o->value);
                o->key = o->value = NULL;
                return rc;
            }
        }
        url->noptions++;
        q += n;
    }
    return DLOCK_OK;
}

/* text with [from, to) replaced by "***" (malloc'd). */
static char *splice_mask(const char *text, const char *from, const char *to)
{
    size_t head = (size_t) (from - text);
    char *out = malloc(head + 3 + strlen(to) + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, text, head);
    memcpy(out + head, "***", 3);
    strcpy(out + head + 3, to);
    return out;
}

/* Whether an option's key (len bytes) may name a secret: a password
 * (sentinel_password=), misspelt too (sentinel_pasword=, pass=, pwd=), or
 * a token or credential of some sort. No option a store reads but those
 * has such a word in its key, so hiding more costs nothing. */
static int secret_key(const char *key, size_t len)
{
    static const char *const words[] = {"pas", "pwd", "secret", "auth", "token", "cred"};
    /* (a %-escape in the key may spell any of them) */
    if (memchr(key, '%', len) != NULL)
        return 1;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t n = strlen(words[w]);
        for (size_t i = 0; i + n <= len; i++) {
            if (strncasecmp(key + i, words[w], n) == 0)
                return 1;
        }
    }
    return 0;
}

/* s (malloc'd, freed) with the value of every option whose key may name a
 * secret (secret_key) replaced by "***" (malloc'd), or NULL: messages show
 * the user, never a password. */
static char *mask_options(char *s)
{
    if (s == NULL)
        return NULL;
    char *q = strchr(s, '?');
    if (q == NULL)
        return s;
    size_t options = 1;
    for (const char *p = q; *p != '\0'; p++)
        options += *p == '&';
    /* a value may be empty: each "***" may lengthen the text */
    char *out = malloc(strlen(s) + 1 + 3 * options);
    if (out == NULL) {
        free(s);
        return NULL;
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
    free(s);
    return out;
}

/* A URL that may not parse, safe to print: whatever could be user info
 * (from after "scheme:" or "scheme://" up to the last '@' before any '?')
 * is replaced by "***". It may hide more than the credentials; it never
 * shows them. raw_userinfo() returns that '@' (or NULL) and sets *start. */
static const char *raw_userinfo(const char *text, const char **start)
{
    const char *end = text + strcspn(text, "?"), *at = NULL;

    *start = strstr(text, "://");
    if (*start != NULL)
        *start += 3;
    else if ((*start = strchr(text, ':')) != NULL)
        *start += 1;
    else
        *start = text;
    for (const char *p = *start; p < end; p++) {
        if (*p == '@')
            at = p;
    }
    return at;
}

static char *masked_raw(const char *text)
{
    const char *start, *at = raw_userinfo(text, &start);
    return at != NULL ? splice_mask(text, start, at) : strdup(text);
}

/* url->userinfo (malloc'd): as masked() shows it in the URL's text; a
 * one-word user-info is a name only once its store says so (a_name). */
static char *shown_userinfo(const dlock__url *url, int a_name)
{
    const char *user = url->user != NULL ? url->user : "";
    const char *tail = url->password != NULL ? ":***@" : url->user == NULL ? "" : "@";
    if (url->user != NULL && url->password == NULL && !a_name)
        user = "***";
    size_t n = strlen(user) + strlen(tail) + 1;
    char *out = malloc(n);
    if (out != NULL)
        snprintf(out, n, "%s%s", user, tail);
    return out;
}

/* The parsed URL for messages: the password replaced by "***" (the user
 * stays); a user-info without ':' is all password (see the backends). */
static char *masked(const char *text, const dlock__url *url)
{
    const char *scheme_end = strstr(text, "://");
    const char *at, *colon;
    size_t auth_len;

    if ((url->password == NULL && url->user == NULL) || scheme_end == NULL)
        return strdup(text);
    auth_len = strcspn(scheme_end + 3, "/?");
    at = NULL;
    for (const char *p = scheme_end + 3; p < scheme_end + 3 + auth_len; p++) {
        if (*p == '@')
            at = p;
    }
    if (at == NULL)
        return strdup(text);
    colon = memchr(scheme_end + 3, ':', (size_t) (at - scheme_end - 3));
    if (colon == NULL)
        return splice_mask(text, scheme_end + 3, at);
    size_t head = (size_t) (colon + 1 - text);
    char *out = malloc(head + 3 + strlen(at) + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, text, head);
    memcpy(out + head, "***", 3);
    strcpy(out + head + 3, at);
    return out;
}

int dlock__url_parse(const char *text, dlock__url *url)
{
    const char *p, *auth, *auth_end, *at, *hosts, *hidden_from, *hidden_to;
    int rc = DLOCK_EINVAL, bad;

    memset(url, 0, sizeof *url);
    if (text == NULL || *text == '\0')
        return dlock__fail(DLOCK_EINVAL, "empty URL");
    for (const char *s = text; *s != '\0'; s++) {
        if ((unsigned char) *s <= ' ' || *s == 0x7f)
            return dlock__fail(DLOCK_EINVAL, "URL contains a space or control character");
    }
    /* From here on messages show the URL only masked: it may hold a
     * password even when it does not parse. */
    url->text = mask_options(masked_raw(text));
    if (url->text == NULL)
        goto oom;
    hidden_to = raw_userinfo(text, &hidden_from);
    p = strstr(text, "://");
    if (p == NULL || p == text) {
        if (strncmp(text, "sqlite:", 7) == 0)
            rc = dlock__fail(DLOCK_EINVAL,
                             "'%s' is not a URL: an SQLite database is sqlite:///absolute/path"
                             "/to/file.db (three slashes)",
                             url->text);
        else
            rc = dlock__fail(DLOCK_EINVAL, "'%s' is not a URL (want scheme://host...)", url->text);
        goto fail;
    }
    for (const char *s = text; s < p; s++) {
        if (!(isalnum((unsigned char) *s) || *s == '+' || *s == '-' || *s == '.')) {
            rc = dlock__fail(DLOCK_EINVAL, "bad character in URL scheme of '%s'", url->text);
            goto fail;
        }
    }
    url->scheme = dupn(text, (size_t) (p - text));
    if (url->scheme == NULL)
        goto oom;
    for (char *s = url->scheme; *s != '\0'; s++)
        *s = (char) tolower((unsigned char) *s);

    auth = p + 3;
    /* options joined by '&' with no '?' before them: the first would be
     * read as a port's or a database's name ("bad port", "database does
     * not exist") */
    if (strchr(text, '?') == NULL) {
        const char *amp = strchr(hidden_to != NULL ? hidden_to : auth, '&');
        size_t key = amp != NULL ? strspn(amp + 1, "abcdefghijklmnopqrstuvwxyz_") : 0;
        if (key > 0 && amp[1 + key] == '=') {
            rc = dlock__fail(DLOCK_EINVAL,
                             "'%s': options go after a '?' (scheme://host/path?key=value&key=value)"
                             ": this URL has '&' and no '?'",
                             url->text);
            goto fail;
        }
    }
    auth_end = auth + strcspn(auth, "/?");
    at = NULL;
    for (const char *s = auth; s < auth_end; s++) {
        if (*s == '@')
            at = s; /* the last '@' ends the user info */
    }
    hosts = auth;
    if (at != NULL) {
        const char *colon = memchr(auth, ':', (size_t) (at - auth));
        const char *user_end = colon != NULL ? colon : at;
        if (user_end > auth) {
            url->user = decode(auth, (size_t) (user_end - auth), &bad);
            if (url->user == NULL)
                goto decode_failed;
        }
        if (colon != NULL) {
            url->password = decode(colon + 1, (size_t) (at - colon - 1), &bad);
            if (url->password == NULL)
                goto decode_failed;
        }
        hosts = at + 1;
    }
    while (hosts < auth_end) {
        const char *comma = memchr(hosts, ',', (size_t) (auth_end - hosts));
        const char *item_end = comma != NULL ? comma : auth_end;
        rc = parse_host(url, hosts, (size_t) (item_end - hosts),
                        hidden_to == NULL || hosts > hidden_to);
        if (rc != DLOCK_OK)
            goto fail;
        hosts = comma != NULL ? comma + 1 : auth_end;
        if (comma != NULL && hosts == auth_end) {
            rc = dlock__fail(DLOCK_EINVAL, "empty host after ','");
            goto fail;
        }
    }

    p = auth_end;
    if (*p == '/') {
        size_t n = strcspn(p + 1, "?");
        url->path = decode(p + 1, n, &bad);
        if (url->path == NULL)
            goto decode_failed;
        p += 1 + n;
    } else {
        url->path = strdup("");
        if (url->path == NULL)
            goto oom;
    }
    if (*p == '?') {
        rc = parse_query(url, p + 1);
        if (rc != DLOCK_OK)
            goto fail;
    }
    free(url->text);
    url->text = mask_options(masked(text, url));
    if (url->text == NULL)
        goto oom;
    /* one word of user-info is in text as typed: no password beside it */
    if (url->user != NULL && url->password == NULL) {
        url->text_with_user = mask_options(strdup(text));
        if (url->text_with_user == NULL)
            goto oom;
    }
    url->userinfo = shown_userinfo(url, 0);
    if (url->userinfo == NULL)
        goto oom;
    return DLOCK_OK;

decode_failed:
    if (!bad)
        goto oom;
    rc = dlock__fail(DLOCK_EINVAL, "bad %%-escape in URL user info or path");
    goto fail;
oom:
    rc = dlock__fail(DLOCK_ENOMEM, "out of memory parsing URL");
fail:
    dlock__url_clear(url);
    return rc;
}

int dlock__url_add_options(dlock__url *url, const char *query)
{
    dlock__url more;
    int rc;

    memset(&more, 0, sizeof more);
    rc = parse_query(&more, query);
    for (size_t i = 0; rc == DLOCK_OK && i < more.noptions; i++) {
        dlock__url_option *o = &more.options[i];
        size_t k = 0;
        while (k < url->noptions && strcmp(url->options[k].key, o->key) != 0)
            k++;
        if (k == DLOCK__URL_MAX_OPTIONS) {
            rc = dlock__fail(DLOCK_EINVAL, "too many options");
            break;
        }
        if (k < url->noptions) {
            free(url->options[k].key);
            free(url->options[k].value);
        } else {
            url->noptions++;
        }
        url->options[k] = (dlock__url_option){o->key, o->value, 0, 1};
        o->key = o->value = NULL;
    }
    for (size_t i = 0; i < more.noptions; i++) {
        free(more.options[i].key);
        free(more.options[i].value);
    }
    return rc;
}

const char *dlock__url_get(dlock__url *url, const char *key)
{
    size_t k = 0;

    while (k < url->nasked && strcmp(url->asked[k], key) != 0)
        k++;
    if (k == url->nasked && k < DLOCK__URL_MAX_ASKED)
        url->asked[url->nasked++] = key;
    for (size_t i = 0; i < url->noptions; i++) {
        if (strcmp(url->options[i].key, key) == 0) {
            url->options[i].used = 1;
            return url->options[i].value;
        }
    }
    return NULL;
}

/* What a refusal of option key's value begins with: the URL and ": ",
 * as every refusal of the URL names it, or "" when the option was added
 * beside the URL (dlock__url_add_options), which its text does not show:
 * the caller that added it knows where it came from (the CLI's -L). */
static const char *refusing(const dlock__url *url, const char *key, char *buf, size_t size)
{
    for (size_t i = 0; i < url->noptions; i++) {
        if (strcmp(url->options[i].key, key) == 0 && url->options[i].added)
            return "";
    }
    snprintf(buf, size, "%s: ", url->text);
    return buf;
}

/* Room for refusing(): a URL as long as a message holds, no more */
#define REFUSING_MAX 1024

int dlock__url_lease(dlock__url *url, const char *key, int64_t min_ms, int64_t *ms)
{
    const char *v = dlock__url_get(url, key);
    char where[REFUSING_MAX];
    int64_t parsed;

    if (v != NULL && dlock_parse_duration(v, &parsed) == DLOCK_OK && parsed < min_ms)
        return dlock__fail(
            DLOCK_EINVAL,
            "%soption %s=%s: a lease must be at least %lld ms " DLOCK__LEASE_FLOOR_WHY,
            refusing(url, key, where, sizeof where), key, v, (long long) min_ms);
    return dlock__url_duration(url, key, min_ms, ms);
}

int dlock__url_duration(dlock__url *url, const char *key, int64_t min_ms, int64_t *ms)
{
    const char *v = dlock__url_get(url, key);
    char where[REFUSING_MAX];
    int64_t parsed;

    if (v == NULL)
        return DLOCK_OK;
    if (dlock_parse_duration(v, &parsed) != DLOCK_OK)
        return dlock__fail_context(DLOCK_EINVAL, "%soption %s",
                                   refusing(url, key, where, sizeof where), key);
    if (parsed < min_ms)
        return dlock__fail(DLOCK_EINVAL, "%soption %s=%s: must be at least %lldms",
                           refusing(url, key, where, sizeof where), key, v, (long long) min_ms);
    if (parsed > DLOCK_DURATION_MAX_MS)
        return dlock__fail(DLOCK_EINVAL, "%soption %s=%s: must be at most 366 days",
                           refusing(url, key, where, sizeof where), key, v);
    *ms = parsed;
    return DLOCK_OK;
}

int dlock__url_duration_or_forever(dlock__url *url, const char *key, int64_t *ms)
{
    const char *v = dlock__url_get(url, key);
    char where[REFUSING_MAX];

    if (v != NULL && strcmp(v, "forever") == 0) {
        *ms = -1;
        return DLOCK_OK;
    }
    if (v != NULL && dlock_parse_duration(v, &(int64_t){0}) != DLOCK_OK)
        return dlock__fail(DLOCK_EINVAL, "%soption %s=%s: want a duration or forever",
                           refusing(url, key, where, sizeof where), key, v);
    return dlock__url_duration(url, key, 0, ms);
}

int dlock__url_int(dlock__url *url, const char *key, long min, long max, long *value)
{
    const char *v = dlock__url_get(url, key);
    char where[REFUSING_MAX];
    char *end;
    long parsed;

    if (v == NULL)
        return DLOCK_OK;
    errno = 0;
    parsed = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || parsed < min || parsed > max)
        return dlock__fail(DLOCK_EINVAL, "%soption %s=%s: want an integer in %ld..%ld",
                           refusing(url, key, where, sizeof where), key, v, min, max);
    *value = parsed;
    return DLOCK_OK;
}

/* "KEY=A, the default, KEY=B or KEY=C" into buf: the n choices. */
static void list_choices(const char *key, const char *const *choices, size_t n, int dflt, char *buf,
                         size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t k = 0; k < n && used < size; k++) {
        const char *before = k == 0                             ? ""
                             : k + 1 < n                        ? ", "
                             : (int) k - 1 == dflt && dflt >= 0 ? ", or "
                                                                : " or ";
        int w = snprintf(buf + used, size - used, "%s%s=%s%s", before, key, choices[k],
                         (int) k == dflt ? ", the default" : "");
        if (w < 0)
            break;
        used += (size_t) w;
    }
}

int dlock__url_choice(dlock__url *url, const char *key, const char *const *choices, size_t n,
                      int dflt, const char **value)
{
    const char *v = dlock__url_get(url, key);
    char where[REFUSING_MAX], want[512];

    if (v == NULL) {
        *value = NULL;
        return DLOCK_OK;
    }
    for (size_t k = 0; k < n; k++) {
        if (strcmp(v, choices[k]) == 0) {
            *value = choices[k];
            return DLOCK_OK;
        }
    }
    list_choices(key, choices, n, dflt, want, sizeof want);
    const char *at = refusing(url, key, where, sizeof where);
    if (*v == '\0')
        return dlock__fail(DLOCK_EINVAL, "%s%s= is empty (want %s)", at, key, want);
    const char *near = dlock__url_nearest(v, choices, n);
    if (near != NULL)
        return dlock__fail(DLOCK_EINVAL, "%sunknown %s '%s' (did you mean %s=%s? want %s)", at, key,
                           v, key, near, want);
    return dlock__fail(DLOCK_EINVAL, "%sunknown %s '%s' (want %s)", at, key, v, want);
}

/* The edit distance of a and b (insertions, deletions, substitutions and
 * swaps of neighbours, each 1), or 3 when it is more than 2: only a near
 * miss is worth a suggestion. */
static int distance(const char *a, const char *b)
{
    enum { MAXLEN = 32 };
    int d[MAXLEN + 1][MAXLEN + 1];
    size_t n = strlen(a), m = strlen(b);

    if (n > MAXLEN || m > MAXLEN || (n > m ? n - m : m - n) > 2)
        return 3;
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int) i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int) j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] +
                       (tolower((unsigned char) a[i - 1]) != tolower((unsigned char) b[j - 1]));
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m] > 2 ? 3 : d[n][m];
}

void dlock__url_user_is_a_name(dlock__url *url)
{
    if (url->text_with_user == NULL)
        return;
    free(url->text);
    url->text = url->text_with_user;
    url->text_with_user = NULL;
    char *shown = shown_userinfo(url, 1);
    if (shown != NULL) { /* (out of memory: "***@" stays, which hides more) */
        free(url->userinfo);
        url->userinfo = shown;
    }
}

int dlock__url_nearness(const char *typed, const char *known)
{
    int d = distance(typed, known);
    /* a short word is near everything short: 1 edit at most there */
    return d == 2 && strlen(typed) <= 3 ? 3 : d;
}

const char *dlock__url_nearest(const char *typed, const char *const *known, size_t n)
{
    const char *near = NULL;
    int best = 3;
    for (size_t k = 0; k < n; k++) {
        int d = dlock__url_nearness(typed, known[k]);
        if (d < best) {
            best = d;
            near = known[k];
        }
    }
    return near;
}

int dlock__url_check_unused(const dlock__url *url)
{
    for (size_t i = 0; i < url->noptions; i++) {
        const char *key = url->options[i].key;
        if (url->options[i].used)
            continue;
        const char *near = dlock__url_nearest(key, (const char *const *) url->asked, url->nasked);
        if (near != NULL)
            return dlock__fail(DLOCK_EINVAL, "%s: unknown option '%s' (did you mean %s=?)",
                               url->text, key, near);
        return dlock__fail(DLOCK_EINVAL, "%s: unknown option '%s'", url->text, key);
    }
    return DLOCK_OK;
}
