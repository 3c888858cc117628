/* SPDX-License-Identifier: MIT */
/* fuzz_redis_reply.c - libFuzzer target for the Redis backend's reply
 * decoders (src/backend/redis/replies.c) and the hand-over notice
 * (notice.c).
 *
 * The input is a byte stream from a server: it goes through the backend's
 * own bounded reply parser (dlock__rreader_new, the one the connections
 * use), and every complete reply goes to every decoder, with the counts a
 * caller could have sent (its own length, half of it, 1 and 3); every
 * string in it, at any depth, goes to the notice decoder. Results are
 * walked, so a bad pointer in one shows under AddressSanitizer, and checked
 * against what must hold (abort() when it does not): a decoder accepts only
 * the shape its script returns, every fence it gives is above 0, every
 * count and index is in range.
 *
 * Built as a fuzzer with clang (tests/CMakeLists.txt); with any compiler
 * it is also linked to replay.c, which runs the seed corpus as a test. */
#include "backend/redis/conn.h"
#include "backend/redis/notice.h"
#include "backend/redis/replies.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

#define MUST(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_redis_reply: %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int is_int(const redisReply *r, long long v)
{
    return r->type == REDIS_REPLY_INTEGER && r->integer == v;
}

static int is_int_array(const redisReply *r, size_t n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return 0;
    }
    return 1;
}

static void walk_notice(const dlock__notice *n)
{
    size_t len = strlen(n->token);
    MUST(len >= 1 && len <= DLOCK__NOTICE_TOKEN_MAX);
    MUST(n->fence > 0);
    sink += len + (size_t) n->wait_id + (size_t) n->fence;
}

/* An error's reason, as messages quote it: a prefix of the text that
 * echoes nothing of the request (replies.h). */
static int holds(const char *s, size_t len, const char *what)
{
    size_t n = strlen(what);
    for (size_t i = 0; i + n <= len; i++) {
        if (memcmp(s + i, what, n) == 0)
            return 1;
    }
    return 0;
}

static void reason(const redisReply *r)
{
    char buf[64];
    size_t len = dlock__reply_reason_len(r->str, r->len);
    MUST(len <= r->len);
    MUST(!holds(r->str, len, ", with args beginning with"));
    MUST(!holds(r->str, len, " script: "));
    dlock__reply_reason(r, "", buf, sizeof buf);
    MUST(strlen(buf) < sizeof buf && strncmp(buf, r->str, strlen(buf)) == 0);
    sink += len;
}

/* Every string of the reply, at any depth, as a notice; and the parser's
 * bound on arrays. */
static void walk_strings(const redisReply *r, int depth)
{
    dlock__notice n;

    MUST(depth < 10000);
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        MUST(r->str != NULL && r->str[r->len] == '\0');
        if (dlock__notice_decode(r->str, r->len, &n) == 0)
            walk_notice(&n);
        if (r->type == REDIS_REPLY_ERROR)
            reason(r);
        break;
    case REDIS_REPLY_ARRAY:
        MUST(r->elements <= DLOCK__REPLY_MAX_ELEMENTS);
        for (size_t i = 0; i < r->elements; i++)
            walk_strings(r->element[i], depth + 1);
        break;
    default:
        break;
    }
}

static void acquire(const redisReply *r)
{
    dlock__racquire a;

    if (dlock__reply_acquire(r, &a) != 0)
        return;
    switch (a.outcome) {
    case DLOCK__RACQUIRE_TAKEN:
        MUST(r->type == REDIS_REPLY_INTEGER && a.fence > 0 && a.fence == (uint64_t) r->integer);
        break;
    case DLOCK__RACQUIRE_UPGRADE:
        MUST(is_int(r, -3));
        break;
    case DLOCK__RACQUIRE_SELF:
        MUST(is_int(r, -4));
        break;
    case DLOCK__RACQUIRE_WAITING:
        MUST(is_int(r, -5));
        break;
    case DLOCK__RACQUIRE_PERMITS:
        MUST(r->type == REDIS_REPLY_STRING && a.permits == r->str + 8);
        sink += strlen(a.permits);
        break;
    case DLOCK__RACQUIRE_BUSY:
        MUST((is_int_array(r, 2) && a.held_as == 0 && !a.writer_first &&
              (a.queued == 0 || a.queued == 1)) ||
             (is_int_array(r, 3) && a.held_as >= 1 && a.held_as <= 4 && !a.writer_first &&
              (a.queued == 0 || a.queued == 1)) ||
             /* a reader kept out by a writer that waits first (rw_acquire.lua) */
             (is_int_array(r, 4) && a.held_as == 0 && a.writer_first &&
              r->element[2]->integer == 0 && r->element[3]->integer == 1 &&
              (a.queued == 0 || a.queued == 1)));
        MUST(a.holder_pttl >= -2);
        break;
    default:
        MUST(!"an outcome no script has");
    }
}

static void multi_acquire(const redisReply *r, size_t n)
{
    uint64_t *fences = calloc(n + 1, sizeof *fences);
    int busy = -1;
    size_t index = (size_t) -1;
    long long pttl = -100;

    MUST(fences != NULL);
    if (dlock__reply_multi_acquire(r, n, fences, &busy, &index, &pttl) == 0) {
        if (busy) {
            MUST(is_int_array(r, 3) && is_int(r->element[0], -1));
            MUST(index < n && pttl >= -2);
        } else {
            MUST(busy == 0 && is_int_array(r, n));
            for (size_t i = 0; i < n; i++)
                MUST(fences[i] > 0);
        }
    }
    MUST(fences[n] == 0); /* nothing written past the n fences */
    free(fences);
}

static void release(const redisReply *r)
{
    enum dlock__rrelease out;

    if (dlock__reply_release(r, &out) != 0)
        return;
    MUST(r->type == REDIS_REPLY_INTEGER);
    MUST((out == DLOCK__RRELEASE_OK && r->integer == 0) ||
         (out == DLOCK__RRELEASE_NOTOWNER && r->integer == -1) ||
         (out == DLOCK__RRELEASE_LOST && r->integer == -2));
}

static void extend(const redisReply *r)
{
    int extended = -1;

    if (dlock__reply_extend(r, &extended) != 0)
        return;
    MUST(r->type == REDIS_REPLY_INTEGER && r->integer == extended);
}

static void status(const redisReply *r)
{
    dlock_status st;

    if (dlock__reply_status(r, &st) != 0)
        return;
    MUST(r->type == REDIS_REPLY_ARRAY && r->elements == 8);
    MUST(strlen(st.owner) < sizeof st.owner);
    MUST(st.held == (st.owner[0] != '\0' || st.shared > 0));
    MUST(st.holds <= 1 && st.lease_ms >= -2);
    sink += strlen(st.owner) + st.waiters + st.permits_used + st.permits + (size_t) st.last_fence;
}

static void renew(const redisReply *r, size_t count, int heartbeat)
{
    dlock__rrenewal *out = calloc(count + 1, sizeof *out);

    MUST(out != NULL);
    out[count].fence = 12345;
    if (count > 0 && dlock__reply_renew(r, count, heartbeat, out) == 0) {
        MUST(is_int_array(r, heartbeat ? 2 * count : count));
        for (size_t i = 0; i < count; i++) {
            MUST(out[i].result == DLOCK__RRENEWED_OK || out[i].result == DLOCK__RRENEWED_GONE ||
                 (heartbeat && out[i].result == DLOCK__RRENEWED_GRANTED));
            MUST(out[i].result == DLOCK__RRENEWED_GRANTED ? out[i].fence > 0 : out[i].fence == 0);
        }
    }
    MUST(out[count].fence == 12345);
    free(out);
}

static void message(const redisReply *r)
{
    dlock__notice n;

    if (dlock__reply_message(r, &n) != 0)
        return;
    MUST(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    MUST(r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "message") == 0);
    walk_notice(&n);
}

/* A Redis Cluster's sharded push (shards.c). */
static void smessage(const redisReply *r)
{
    dlock__notice n;

    if (dlock__reply_smessage(r, &n) != 0)
        return;
    MUST(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    MUST(r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "smessage") == 0);
    walk_notice(&n);
}

typedef struct xread_seen {
    size_t notices, reads;
} xread_seen;

static void on_notice(void *arg, const dlock__notice *n)
{
    ((xread_seen *) arg)->notices++;
    walk_notice(n);
}

static void on_read(void *arg, const char *key, const char *last_id)
{
    ((xread_seen *) arg)->reads++;
    sink += strlen(key) + strlen(last_id);
}

static void xread(const redisReply *r)
{
    xread_seen seen = {0, 0};
    const dlock__rxread_sink sink_ = {&seen, on_notice, on_read};
    int streams = dlock__reply_xread(r, &sink_);

    if (streams < 0) {
        MUST(r->type != REDIS_REPLY_ARRAY && r->type != REDIS_REPLY_NIL);
        MUST(seen.notices == 0 && seen.reads == 0);
        return;
    }
    MUST(r->type == REDIS_REPLY_ARRAY || (r->type == REDIS_REPLY_NIL && streams == 0));
    MUST((size_t) streams <= r->elements && seen.reads <= (size_t) streams);
}

static void decode_all(const redisReply *r)
{
    size_t counts[4] = {1, 3, 0, 0};

    walk_strings(r, 0);
    acquire(r);
    release(r);
    extend(r);
    status(r);
    message(r);
    smessage(r);
    xread(r);
    if (r->type == REDIS_REPLY_ARRAY) {
        counts[2] = r->elements;
        counts[3] = r->elements / 2;
    }
    for (size_t i = 0; i < 4; i++) {
        if (counts[i] == 0 || (i > 0 && counts[i] == counts[i - 1]))
            continue;
        multi_acquire(r, counts[i]);
        renew(r, counts[i], 0);
        renew(r, counts[i], 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReader *reader = dlock__rreader_new();

    MUST(reader != NULL);
    if (redisReaderFeed(reader, (const char *) data, size) != REDIS_OK)
        goto out;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(reader, &reply) != REDIS_OK || reply == NULL)
            break;
        decode_all(reply);
        freeReplyObject(reply);
    }
    dlock__rreader_refused(); /* reset this thread's flag, as the connection does */
out:
    redisReaderFree(reader);
    return 0;
}
