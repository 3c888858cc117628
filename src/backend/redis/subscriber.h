/* subscriber.h - the client's pub/sub connection that receives hand-overs. */
#ifndef DLOCK_REDIS_SUBSCRIBER_H
#define DLOCK_REDIS_SUBSCRIBER_H

#include "../../core/board.h"
#include "conn.h"

typedef struct dlock__rsub dlock__rsub;

/* Starts the subscriber thread for `pattern`; wake-ups go to `board`.
 * ep's strings must outlive the subscriber. */
int dlock__rsub_start(const dlock__rendpoint *ep, const char *pattern, dlock__board *board,
                      dlock__rsub **out);

/* Waits until the subscription is live. DLOCK_OK, DLOCK_ETIMEDOUT, or the
 * code of the last failed attempt (DLOCK_EUNREACHABLE...). */
int dlock__rsub_wait_ready(dlock__rsub *s, int64_t deadline_us);

/* Whether the subscription is live now (no waiting). */
int dlock__rsub_ready(dlock__rsub *s);

/* Stops the thread and frees s. NULL is a no-op. */
void dlock__rsub_stop(dlock__rsub *s);

#endif
