/* SPDX-License-Identifier: MIT */
/* replies.c - decoding the replies of the Redis backend's scripts and
 * readers; see replies.h. No I/O and no messages here: refusing is -1, and
 * the caller says what was refused and from whom. */
#include "replies.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* An array of exactly n integers. */
static int int_array(const redisReply *r, size_t n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return 0;
    }
    return 1;
}

static int is_string(const redisReply *r, const char *text)
{
    size_t n = strlen(text);
    return r->type == REDIS_REPLY_STRING && r->len == n && memcmp(r->str, text, n) == 0;
}

/* A PTTL as Redis answers it: milliseconds, -1 (no expiry) or -2 (no key). */
static int is_pttl(long long v)
{
    return v >= -2;
}

/* The first occurrence of the NUL-free text `what` in s (len bytes). */
static const char *find(const char *s, size_t len, const char *what)
{
    size_t n = strlen(what);
    for (size_t i = 0; i + n <= len; i++) {
        if (memcmp(s + i, what, n) == 0)
            return s + i;
    }
    return NULL;
}

size_t dlock__reply_reason_len(const char *s, size_t len)
{
    static const char *const echoes[] = {", with args beginning with", " script: "};
    if (s == NULL)
        return 0;
    for (size_t i = 0; i < sizeof echoes / sizeof echoes[0]; i++) {
        const char *at = find(s, len, echoes[i]);
        if (at != NULL)
            len = (size_t) (at - s);
    }
    return len;
}

const char *dlock__reply_reason(const redisReply *r, const char *otherwise, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL)
        snprintf(buf, len, "%s", otherwise);
    else
        snprintf(buf, len, "%.*s", DLOCK__REASON(r));
    return buf;
}

int dlock__reply_acquire(const redisReply *r, dlock__racquire *out)
{
    memset(out, 0, sizeof *out);
    if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
        out->outcome = DLOCK__RACQUIRE_TAKEN;
        out->fence = (uint64_t) r->integer;
        return 0;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == -3) {
        out->outcome = DLOCK__RACQUIRE_UPGRADE;
        return 0;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == -5) {
        out->outcome = DLOCK__RACQUIRE_WAITING;
        return 0;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == -4) {
        out->outcome = DLOCK__RACQUIRE_SELF;
        return 0;
    }
    if (r->type == REDIS_REPLY_STRING && r->len > 8 && strncmp(r->str, "permits ", 8) == 0) {
        out->outcome = DLOCK__RACQUIRE_PERMITS;
        out->permits = r->str + 8;
        return 0;
    }
    if (int_array(r, 2) && is_pttl(r->element[0]->integer) &&
        (r->element[1]->integer == 0 || r->element[1]->integer == 1)) {
        out->outcome = DLOCK__RACQUIRE_BUSY;
        out->holder_pttl = r->element[0]->integer;
        out->queued = r->element[1]->integer == 1;
        return 0;
    }
    if (int_array(r, 3) && is_pttl(r->element[0]->integer) &&
        (r->element[1]->integer == 0 || r->element[1]->integer == 1) &&
        r->element[2]->integer >= 1 && r->element[2]->integer <= 4) {
        out->outcome = DLOCK__RACQUIRE_BUSY;
        out->holder_pttl = r->element[0]->integer;
        out->queued = r->element[1]->integer == 1;
        out->held_as = (int) r->element[2]->integer;
        return 0;
    }
    if (int_array(r, 4) && is_pttl(r->element[0]->integer) &&
        (r->element[1]->integer == 0 || r->element[1]->integer == 1) &&
        r->element[2]->integer == 0 && r->element[3]->integer == 1) {
        out->outcome = DLOCK__RACQUIRE_BUSY;
        out->holder_pttl = r->element[0]->integer;
        out->queued = r->element[1]->integer == 1;
        out->writer_first = 1;
        return 0;
    }
    return -1;
}

int dlock__reply_multi_acquire(const redisReply *r, size_t n, uint64_t *fences, int *busy,
                               size_t *busy_index, long long *busy_pttl)
{
    *busy = 0;
    if (int_array(r, 3) && r->element[0]->integer == -1 && r->element[1]->integer >= 1 &&
        (unsigned long long) r->element[1]->integer <= n && is_pttl(r->element[2]->integer)) {
        *busy = 1;
        *busy_index = (size_t) r->element[1]->integer - 1;
        *busy_pttl = r->element[2]->integer;
        return 0;
    }
    if (n == 0 || !int_array(r, n))
        return -1;
    /* all checked before any is stored: a refused reply leaves no fence */
    for (size_t i = 0; i < n; i++) {
        if (r->element[i]->integer <= 0)
            return -1;
    }
    for (size_t i = 0; i < n; i++)
        fences[i] = (uint64_t) r->element[i]->integer;
    return 0;
}

int dlock__reply_release(const redisReply *r, enum dlock__rrelease *out)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return -1;
    switch (r->integer) {
    case 0:
        *out = DLOCK__RRELEASE_OK;
        return 0;
    case -1:
        *out = DLOCK__RRELEASE_NOTOWNER;
        return 0;
    case -2:
        *out = DLOCK__RRELEASE_LOST;
        return 0;
    default:
        return -1;
    }
}

int dlock__reply_extend(const redisReply *r, int *extended)
{
    if (r->type != REDIS_REPLY_INTEGER || (r->integer != 0 && r->integer != 1))
        return -1;
    *extended = r->integer == 1;
    return 0;
}

int dlock__reply_status(const redisReply *r, dlock_status *st)
{
    memset(st, 0, sizeof *st);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 8 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return -1;
    for (size_t i = 1; i < 8; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return -1;
        long long v = r->element[i]->integer;
        /* the pttl and the last shared lease end may be -1 or -2 (none); the
         * fence counter is any count; the rest are counts an unsigned holds */
        if (i == 1 || i == 7 ? !is_pttl(v) : v < 0 || (i != 2 && v > UINT_MAX))
            return -1;
    }
    const char *owner = r->element[0]->str;
    size_t owner_len = r->element[0]->len;
    if (owner_len >= sizeof st->owner)
        owner_len = sizeof st->owner - 1;
    memcpy(st->owner, owner, owner_len);
    st->owner[owner_len] = '\0';
    st->shared = (unsigned) r->element[4]->integer;
    st->held = st->owner[0] != '\0' || st->shared > 0;
    st->holds = st->owner[0] != '\0' ? 1 : 0;
    st->lease_ms = st->owner[0] != '\0' ? r->element[1]->integer
                   : st->shared > 0     ? r->element[7]->integer
                                        : -1;
    st->last_fence = (uint64_t) r->element[2]->integer;
    st->waiters = (unsigned) r->element[3]->integer;
    st->permits_used = (unsigned) r->element[5]->integer;
    st->permits = (unsigned) r->element[6]->integer;
    return 0;
}

int dlock__reply_renew(const redisReply *r, size_t count, int heartbeat, dlock__rrenewal *out)
{
    size_t per = heartbeat ? 2 : 1;

    if (count == 0 || count > SIZE_MAX / per || !int_array(r, per * count))
        return -1;
    for (size_t i = 0; i < count; i++) {
        long long state = r->element[per * i]->integer;
        long long fence = heartbeat ? r->element[2 * i + 1]->integer : 0;
        /* renew: 0 or 1; heartbeat: 0 or 1 with fence 0, or 2 with the fence
         * counter (0 when it is missing) */
        if (state < 0 || state > (heartbeat ? 2 : 1) || fence < 0 || (state != 2 && fence != 0))
            return -1;
    }
    for (size_t i = 0; i < count; i++) {
        long long state = r->element[per * i]->integer;
        long long fence = heartbeat ? r->element[2 * i + 1]->integer : 0;
        out[i].fence = 0;
        if (state == 1) {
            out[i].result = DLOCK__RRENEWED_OK;
        } else if (state == 2 && fence > 0) {
            out[i].result = DLOCK__RRENEWED_GRANTED;
            out[i].fence = (uint64_t) fence;
        } else {
            /* gone; or handed over with its fence unknown: the waiter asks again */
            out[i].result = DLOCK__RRENEWED_GONE;
        }
    }
    return 0;
}

static int push_notice(const redisReply *r, const char *kind, dlock__notice *out)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !is_string(r->element[0], kind) ||
        r->element[1]->type != REDIS_REPLY_STRING || r->element[2]->type != REDIS_REPLY_STRING)
        return -1;
    return dlock__notice_decode(r->element[2]->str, r->element[2]->len, out);
}

int dlock__reply_message(const redisReply *r, dlock__notice *out)
{
    return push_notice(r, "message", out);
}

int dlock__reply_smessage(const redisReply *r, dlock__notice *out)
{
    return push_notice(r, "smessage", out);
}

/* One stream of an XREAD reply: [key, [[id, [field, value, ...]], ...]]. */
static int read_stream(const redisReply *stream, const dlock__rxread_sink *sink)
{
    if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2 ||
        stream->element[0]->type != REDIS_REPLY_STRING ||
        stream->element[1]->type != REDIS_REPLY_ARRAY)
        return 0;
    const redisReply *entries = stream->element[1];
    const char *last = NULL;
    for (size_t i = 0; i < entries->elements; i++) {
        const redisReply *e = entries->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_ARRAY)
            continue;
        last = e->element[0]->str;
        const redisReply *fields = e->element[1];
        for (size_t f = 0; f + 1 < fields->elements; f += 2) {
            const redisReply *v = fields->element[f + 1];
            dlock__notice n;
            if (v->type == REDIS_REPLY_STRING && dlock__notice_decode(v->str, v->len, &n) == 0)
                sink->on_notice(sink->arg, &n);
        }
    }
    if (last != NULL)
        sink->on_read(sink->arg, stream->element[0]->str, last);
    return 1;
}

int dlock__reply_xread(const redisReply *r, const dlock__rxread_sink *sink)
{
    int streams = 0;

    if (r->type == REDIS_REPLY_NIL)
        return 0;
    if (r->type != REDIS_REPLY_ARRAY)
        return -1;
    for (size_t i = 0; i < r->elements; i++)
        streams += read_stream(r->element[i], sink);
    return streams;
}
