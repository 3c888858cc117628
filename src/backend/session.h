/* SPDX-License-Identifier: MIT */
/* session.h - sessions: the liveness a store's grants share.
 *
 * Some stores keep a lock exactly as long as something of their own lives:
 * a ZooKeeper session (its ephemeral nodes), an etcd lease (the keys attached
 * to it), a database connection (its named locks). Such a store starts a
 * session here for each of those, and makes every grant under it name the
 * session (dlock__attempt.session). The client's renewer then:
 *   - keeps the session alive through the backend's renew() (an item of kind
 *     DLOCK__RENEW_SESSION) every lease_ms / 3;
 *   - counts its validity from the send time of the last renewal that
 *     succeeded, plus lease_ms, minus the drift margin, on CLOCK_MONOTONIC,
 *     exactly as it does for a lock's own lease;
 *   - when the validity runs out, or the store says the session is over
 *     (dlock__session_end), reports every hold made under it lost, and
 *     asks the store to end the session if it still can (session_lost in
 *     the backend table), so that nothing granted under it outlives the
 *     report.
 * A session that is lost is never revived: the store starts a new one for
 * its next grant (dlock__session_alive says when).
 *
 * A service of the host to its stores (backend.h, dlock__host.sessions):
 * declared here for them, implemented by the core (core/renewer.c). */
#ifndef DLOCK_BACKEND_SESSION_H
#define DLOCK_BACKEND_SESSION_H

#include <stdint.h>

typedef struct dlock__session dlock__session;
typedef struct dlock__renewer dlock__sessions; /* the client's renewer, as stores see it */

/*
 * Starts a session of lease_ms, valid from sent_us (the send time of the
 * request that created or confirmed it in the store). `data` is the
 * store's (dlock__session_data); free_data, if not NULL, is called with it
 * when the last reference goes. On DLOCK_OK *out holds the store's
 * reference, given back with dlock__session_end(). DLOCK_ENOMEM if the
 * renewer's threads cannot start.
 */
int dlock__session_start(dlock__sessions *ss, int64_t lease_ms, int64_t sent_us, void *data,
                         void (*free_data)(void *), dlock__session **out);

void *dlock__session_data(const dlock__session *s);

/* Whether new grants may be made under s: not ended, not lost, and still
 * valid now. */
int dlock__session_alive(dlock__session *s);

/* Another reference, for an attempt that granted under s. */
void dlock__session_ref(dlock__session *s);
void dlock__session_unref(dlock__session *s);

/*
 * The store learned that s is over (expired, revoked, its connection
 * closed): every hold made under it is lost now and reported with `why`.
 * Drops the store's reference. Safe from any thread; a session is ended at
 * most once (later calls only drop their reference).
 */
void dlock__session_end(dlock__session *s, const char *why);

#endif
