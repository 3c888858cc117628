/* SPDX-License-Identifier: MIT */
/* shards.h - a Redis Cluster client's hand-over notices, through sharded
 * pub/sub (SSUBSCRIBE / SPUBLISH, Redis 7).
 *
 * A release on a cluster SPUBLISHes its notice on the channel
 * P:{E}:wake:<client id> of the waiter's client (scripts/queue.lua,
 * grant): under the lock's hash tag, so on its slot's master alone, and
 * heard only by the one client it is for. The client SSUBSCRIBEs to that
 * channel on the master serving the slot (one connection per node with
 * waiters), and one thread of the client's reads every node's connection
 * and posts the notices on its board. The poll of waiting.c stays beneath
 * as the look that can never miss. */
#ifndef DLOCK_REDIS_SHARDS_H
#define DLOCK_REDIS_SHARDS_H

#include "../board.h"
#include "../log.h"
#include "cluster.h"

#include <stdint.h>

typedef struct dlock__rshards dlock__rshards;

/* Notices of cl's nodes posted on board. Connects nothing yet, and starts
 * its thread at the first subscription. DLOCK_OK or DLOCK_ENOMEM. */
int dlock__rshards_new(dlock__rcluster *cl, dlock__board *board, dlock__log *log,
                       dlock__rshards **out);
/* Stops the thread and closes every connection. NULL: nothing. */
void dlock__rshards_free(dlock__rshards *s);

/* Whether channel (of slot) is subscribed now at the node that serves
 * slot as far as the client knows. No I/O. */
int dlock__rshards_live(dlock__rshards *s, const char *channel, unsigned slot);

/* A waiter of the client waits for notices on channel (of slot) until
 * dlock__rshards_unwatch: subscribes it at the master of slot unless it
 * is already, and waits for the server's confirmation until deadline_us.
 * DLOCK_OK once it is live; else the failure, recorded (the waiter then
 * looks for its hand-over by polling). Call unwatch either way. */
int dlock__rshards_watch(dlock__rshards *s, const char *channel, unsigned slot,
                         int64_t deadline_us);
void dlock__rshards_unwatch(dlock__rshards *s, const char *channel);

#endif
