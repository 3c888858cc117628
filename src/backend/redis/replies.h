/* SPDX-License-Identifier: MIT */
/* replies.h - what each reply of the Redis backend's scripts and readers
 * means, decoded without I/O so it can be fuzzed (tests/fuzz).
 *
 * Design note. A decoder takes a reply as hiredis built it (and the counts
 * the caller sent) and either accepts it, filling a small result, or refuses
 * it (-1), writing no message: the caller owns the connection, knows which
 * lock and server it asked, and says so (dlock__redis_bad_reply). A decoder
 * accepts exactly the shapes its script returns (the .lua files in scripts/) and nothing
 * that merely resembles one: the reply of another script, an array one
 * element short or long, a string where a number belongs. Every fence it
 * hands out is above 0, since 0 is what the core reads as "no fence".
 * Strings in a result point into the reply and live as long as it. */
#ifndef DLOCK_REDIS_REPLIES_H
#define DLOCK_REDIS_REPLIES_H

#include "dlock.h"
#include "notice.h"

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* The server's own reason in an error reply's text (s, len bytes), without
 * what Redis adds after it that echoes the request: ", with args beginning
 * with: ..." (an unknown command's first arguments: a script's digest, its
 * keys and owner token) and " script: ..." (the digest and line of the
 * script that failed). Its length: the bytes of s to quote. Every message
 * that quotes a server's error goes through it, so that no owner token, no
 * password given to an unknown AUTH and no digest reaches a message or a
 * log (DLOCK__REASON). */
size_t dlock__reply_reason_len(const char *s, size_t len);
/* The printf arguments of "%.*s" quoting error reply r's reason. */
#define DLOCK__REASON(r) (int) dlock__reply_reason_len((r)->str, (r)->len), (r)->str
/* The same copied into buf (len bytes, cut there if need be): r's reason
 * if r is an error reply, else `otherwise`. Returns buf. */
const char *dlock__reply_reason(const redisReply *r, const char *otherwise, char *buf, size_t len);

/* acquire.lua, rw_acquire.lua, sem_acquire.lua */
enum dlock__racquire_outcome {
    DLOCK__RACQUIRE_TAKEN,   /* a fence > 0: the lock is ours */
    DLOCK__RACQUIRE_BUSY,    /* {pttl, 0}: held by another; {pttl, 1}: and we are queued;
                                {pttl, queued, kind}: held as another kind of lock */
    DLOCK__RACQUIRE_UPGRADE, /* -3: this owner holds the read lock and asked for the write lock */
    DLOCK__RACQUIRE_SELF,    /* -4: this owner holds the name as another kind of lock */
    DLOCK__RACQUIRE_WAITING, /* -5: this owner waits for the read-write lock as the other kind */
    DLOCK__RACQUIRE_PERMITS, /* "permits N": the semaphore is in use with another count */
};

typedef struct dlock__racquire {
    enum dlock__racquire_outcome outcome;
    uint64_t fence;        /* TAKEN */
    long long holder_pttl; /* BUSY: the holder's PTTL (-1: no expiry, -2: gone meanwhile) */
    int queued;            /* BUSY */
    int held_as;           /* BUSY: {pttl, queued, kind}: held as another kind of lock of the
                              name (enum dlock__held_as of backend.h, 1..4), else 0 */
    int writer_first;      /* BUSY: {pttl, queued, 0, 1}: readers hold it, and a reader is
                              kept out by a writer that waits first */
    const char *permits;   /* PERMITS: the count the semaphore's users declare (in the reply) */
} dlock__racquire;

int dlock__reply_acquire(const redisReply *r, dlock__racquire *out);

/* multi_acquire.lua for n names: n fences (stored in fences[0..n)), or
 * {-1, i, pttl} when the i-th name (1-based) is held: then *busy is 1,
 * *busy_index = i - 1 and *busy_pttl the holder's PTTL. */
int dlock__reply_multi_acquire(const redisReply *r, size_t n, uint64_t *fences, int *busy,
                               size_t *busy_index, long long *busy_pttl);

/* release.lua, rw_release.lua, sem_release.lua: an integer. */
enum dlock__rrelease {
    DLOCK__RRELEASE_OK,       /* released (or handed over) */
    DLOCK__RRELEASE_NOTOWNER, /* -1: another owner holds it */
    DLOCK__RRELEASE_LOST,     /* -2: not held by this owner any more */
};
int dlock__reply_release(const redisReply *r, enum dlock__rrelease *out);

/* extend.lua: 1 extended, 0 not held by this owner; *extended says which. */
int dlock__reply_extend(const redisReply *r, int *extended);

/* status.lua: {owner, pttl, fence counter, waiters, shared holders, permits
 * used, permits declared, last shared lease end}. Fills *st whole. */
int dlock__reply_status(const redisReply *r, dlock_status *st);

/* renew.lua over count locks (one 0/1 each), or with heartbeat set
 * heartbeat.lua over count waiters ({state, fence} each: 1 place kept,
 * 2 handed the lock, 0 gone). */
enum dlock__rrenewed {
    DLOCK__RRENEWED_OK,      /* renewed, or place kept */
    DLOCK__RRENEWED_GRANTED, /* heartbeat: the waiter holds the lock now, with fence */
    DLOCK__RRENEWED_GONE,    /* not held / not queued any more */
};
typedef struct dlock__rrenewal {
    enum dlock__rrenewed result;
    uint64_t fence; /* GRANTED: > 0; else 0 */
} dlock__rrenewal;
int dlock__reply_renew(const redisReply *r, size_t count, int heartbeat, dlock__rrenewal *out);

/* A pub/sub push ["message", channel, notice]: 0 with *out set when it is a
 * message whose text is a hand-over notice (notice.h). */
int dlock__reply_message(const redisReply *r, dlock__notice *out);
/* A sharded pub/sub push ["smessage", channel, notice] (a Redis Cluster's
 * SPUBLISH): the same. */
int dlock__reply_smessage(const redisReply *r, dlock__notice *out);

/* An XREAD reply: nil (timed out), or [[key, [[id, [field, value, ...]],
 * ...]], ...]. For each well-formed stream, calls on_notice for every value
 * that is a hand-over notice, in order, then on_read with the stream's key
 * and the id of its last entry (when it has one): where the next XREAD of
 * that key starts. Streams and entries of another shape are skipped, as a
 * stale or foreign entry is (the waiter asks the store again). Returns the
 * number of streams read, or -1 when the reply is neither nil nor an
 * array. */
typedef struct dlock__rxread_sink {
    void *arg;
    void (*on_notice)(void *arg, const dlock__notice *n);
    void (*on_read)(void *arg, const char *key, const char *last_id);
} dlock__rxread_sink;
int dlock__reply_xread(const redisReply *r, const dlock__rxread_sink *sink);

#endif
