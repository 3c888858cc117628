/* SPDX-License-Identifier: MIT */
/* sentinel.h - a changeable endpoint: the master of a Sentinel-managed
 * Redis (redis+sentinel://s1:port,s2:port/MASTERNAME).
 *
 * The endpoint's dial (conn.h) asks the sentinels, in turn, for the address
 * of the master, connects to it and asks it its ROLE; a node that is not
 * the master (the sentinels have not seen a failover yet, or it was
 * demoted) is not used: the sentinels are asked again until the deadline.
 * Whenever the master found differs from the one known before, or a node
 * turns out not to be the master, the endpoint's `moved` count goes up, and
 * every connection made before (pool, subscriber, stream reader) is made
 * again, to the master found then.
 *
 * A thread of the endpoint, started by its first dial, subscribes to
 * +switch-master on a sentinel: the old master of a failover takes writes
 * for seconds after the switch (until the sentinels demote it, and only then
 * kill its clients), so the switch itself must move every connection. It
 * ends at dlock__rsentinel_free (at once, unless it is asking a sentinel
 * that does not answer: up to a second per sentinel). */
#ifndef DLOCK_REDIS_SENTINEL_H
#define DLOCK_REDIS_SENTINEL_H

#include "../../base/url.h"
#include "conn.h"

typedef struct dlock__rsentinel dlock__rsentinel;

/* The sentinels of url (hosts, 26379 when no port is given), the master's
 * name (its path) and the sentinels' own auth (options sentinel_user,
 * sentinel_password). DLOCK_OK, DLOCK_EINVAL (detail recorded) or
 * DLOCK_ENOMEM. Does not connect. */
int dlock__rsentinel_new(dlock__url *url, dlock__log *log, dlock__rsentinel **out);
void dlock__rsentinel_free(dlock__rsentinel *s);

/* Points ep (which keeps its auth, db and timeouts for the data nodes) at
 * the master of s: its dial, node and moved count. */
void dlock__rsentinel_attach(dlock__rsentinel *s, dlock__rendpoint *ep);

/* The master's name, for messages. */
const char *dlock__rsentinel_master_name(const dlock__rsentinel *s);

#endif
