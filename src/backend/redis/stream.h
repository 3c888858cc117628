/* SPDX-License-Identifier: MIT */
/* stream.h - hand-over notices through Redis Streams (see stream.c). */
#ifndef DLOCK_REDIS_STREAM_H
#define DLOCK_REDIS_STREAM_H

#include "../board.h"
#include "conn.h"

typedef struct dlock__rstream dlock__rstream;

/* ep's strings must outlive it; it connects when first read. */
int dlock__rstream_new(const dlock__rendpoint *ep, dlock__board *board, dlock__rstream **out);
void dlock__rstream_free(dlock__rstream *s);

/* Reads the stream `key` while at least one waiter watches it. Sets
 * *interrupt_id to the CLIENT ID of the reading connection if an XREAD is
 * blocked there without `key` (else 0): the caller sends CLIENT UNBLOCK for
 * it, so that the next XREAD covers `key` without waiting out the slice. */
int dlock__rstream_watch(dlock__rstream *s, const char *key, long long *interrupt_id);
void dlock__rstream_unwatch(dlock__rstream *s, const char *key);

/* As dlock__rsub_wait(): waits for w's wake, reading notices meanwhile if
 * nobody else does. */
enum dlock__wake dlock__rstream_wait(dlock__rstream *s, dlock__waiter *w, int64_t until_us);

#endif
