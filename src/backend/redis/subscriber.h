/* SPDX-License-Identifier: MIT */
/* subscriber.h - the client's pub/sub connection that receives hand-overs. */
#ifndef DLOCK_REDIS_SUBSCRIBER_H
#define DLOCK_REDIS_SUBSCRIBER_H

#include "../board.h"
#include "conn.h"

typedef struct dlock__rsub dlock__rsub;

/* A subscriber for `channel` posting wake-ups to `board`; not connected
 * yet. ep's strings must outlive it. */
int dlock__rsub_new(const dlock__rendpoint *ep, const char *channel, dlock__board *board,
                    dlock__rsub **out);
void dlock__rsub_free(dlock__rsub *s);

/* Connects and subscribes unless already done. DLOCK_OK, or the failure. */
int dlock__rsub_connect(dlock__rsub *s, int64_t deadline_us);

/* Whether the subscription is live now (no waiting). */
int dlock__rsub_ready(dlock__rsub *s);

/* Waits until w (on the board) is woken or until_us passes, reading the
 * connection meanwhile if nobody else does. Returns the wake (GRANTED,
 * RECHECK) or DLOCK__WAKE_NONE on timeout. */
enum dlock__wake dlock__rsub_wait(dlock__rsub *s, dlock__waiter *w, int64_t until_us);

#endif
