/* SPDX-License-Identifier: MIT */
/* store.h - the etcd store's state that outlives one request: its
 * sessions, the key names its handles claimed, the deletes and revokes it
 * retries until etcd answers, and the read-write locks it holds; and a
 * handle's key. Shared by etcd.c (the lock recipe), lease.c (keeping holds
 * alive), operator.c (query, holders, force-unlock, listing) and store.c
 * (this bookkeeping). See etcd.c's design note for why each exists.
 *
 * Locking: the store's mutex guards its part; a handle's mutex guards the
 * handle's key (the renewal thread reads it). The store's mutex is never
 * taken while a handle's is held. */
#ifndef DLOCK_ETCD_STORE_H
#define DLOCK_ETCD_STORE_H

#include "../backend.h"
#include "client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define DLOCK__ETCD_CLAIM_BUCKETS 256
#define DLOCK__ETCD_MAX_PENDING   1024
/* A key's value: "4294967295/4294967295\n", a token, '\n', an owner_info. */
#define DLOCK__ETCD_VALUE_MAX 512
_Static_assert(DLOCK__ETCD_VALUE_MAX >= sizeof "4294967295/4294967295\n" +
                                            sizeof(((dlock_status *) 0)->owner) +
                                            sizeof(((dlock__client_cfg *) 0)->owner_info),
               "a key's value holds the permits, a token and an owner_info");

/* A session: one lease of the client, and the core's session for it. */
typedef struct dlock__etcd_session {
    _Atomic int refs;
    int64_t lease;
    int64_t ttl_s;
    dlock__session *session; /* the store's reference, NULL once ended (store mu) */
} dlock__etcd_session;

/* A claimed key name (see "Slots"). */
typedef struct dlock__etcd_claim {
    struct dlock__etcd_claim *next;
    char key[];
} dlock__etcd_claim;

/* Work the store could not confirm, retried until etcd answers: delete
 * key (if it still has create revision rev; any if rev is 0), or revoke
 * lease. key, if set, is claimed until then. */
typedef struct dlock__etcd_pending {
    char *key;
    int64_t rev;
    int64_t lease;
} dlock__etcd_pending;

/* A read-write hold of this client: a reader asking to write gets EDEADLK,
 * and a writer's own read (a downgrade) passes its write. */
typedef struct dlock__etcd_rw_hold {
    struct dlock__etcd_rw_hold *next;
    const void *owner; /* the handle (dlock__etcd_lock) */
    char *prefix;
    char *key;
    char token[72];
    int writer;
} dlock__etcd_rw_hold;

typedef struct dlock__etcd_store {
    dlock__store base;
    dlock__etcd *cli;
    int64_t timeout_ms;
    int64_t ttl_s; /* session lease asked for */

    pthread_mutex_t mu;       /* everything below */
    pthread_cond_t cv;        /* a session start ended */
    dlock__etcd_session *cur; /* the current session (a reference), NULL before the first */
    int starting;
    dlock__etcd_claim *claims[DLOCK__ETCD_CLAIM_BUCKETS];
    dlock__etcd_pending pending[DLOCK__ETCD_MAX_PENDING];
    size_t npending;
    dlock__etcd_rw_hold *rw_holds;

    _Atomic uint64_t stat_wakeups, stat_rounds, stat_sessions;
} dlock__etcd_store;

/* A handle's key, moved out of the handle as a whole. */
typedef struct dlock__etcd_key {
    char *key;
    int64_t rev; /* its create revision; 0: unknown (a put whose outcome is unknown) */
    dlock__etcd_session *sess; /* the session it was made in (a reference), or NULL */
    int64_t own_lease;         /* != 0: it is on this lease of its own (a fixed lease) */
    int64_t own_ttl_s;
} dlock__etcd_key;

typedef struct dlock__etcd_lock {
    dlock__store_lock base;
    char *name;
    char *prefix, *prefix_end;   /* the contenders' keys */
    char *writers, *writers_end; /* read-write: the writers' keys */
    /* The other kinds' contenders of the name (one name is one lock: the
     * mutex, the read-write lock and the semaphore of a name exclude each
     * other), and what a busy message calls each. */
    char *others[2], *others_end[2];
    enum dlock__held_as others_as[2];
    const char *marker; /* read-write: "r-" or "w-" in front of the id */
    /* What our key holds (made at the first attempt): "TOKEN\nINFO", the
     * owner token and the client's owner_info; a semaphore's starts with
     * "TAKE/PERMITS\n" before them. */
    char value[DLOCK__ETCD_VALUE_MAX];
    size_t value_len;
    char value_token[72]; /* the token in value: an acquisition under another
                             one (the handle's next owner) makes it again */

    pthread_mutex_t mu; /* k: read by the renewal thread */
    dlock__etcd_key k;
    /* Moving the key to another lease, by its owner (extend) or the renewal
     * thread (keepalive of a fixed lease): one at a time, or the one that
     * finishes last could revoke the lease the other just put the key on. */
    pthread_mutex_t moving;

    /* the owner's */
    char *releasing; /* the key of a release etcd did not confirm: retried in the background */
    int queued;      /* the current wait was queued: a semaphore grant tells the next */
    struct dlock__etcd_wake *watch; /* what the waiter waits on, NULL if nothing */
    int64_t watch_id;
    char *watched;
} dlock__etcd_lock;

void dlock__etcd_store_init(dlock__etcd_store *e);
/* Frees what the store still keeps (claims, work left, read-write holds). */
void dlock__etcd_store_fini(dlock__etcd_store *e);

/* ---------------------------------------------------------------- for the lock's files */

/* deadline_us, capped by the store's command timeout. */
int64_t dlock__etcd_deadline_of(const dlock__etcd_store *e, int64_t deadline_us);
/* deadline_us, capped for tidying: a revoke or delete of what ends by
 * itself when its lease runs out (a lost session's lease, the key of a hold
 * already lost, work left pending). etcd gets DLOCK__ETCD_TIDY_MS (or the
 * command timeout, if shorter) to answer; what it does not answer is left
 * to the background and, at the latest, to the lease. */
#define DLOCK__ETCD_TIDY_MS 300
int64_t dlock__etcd_tidy_deadline(const dlock__etcd_store *e, int64_t deadline_us);
/* Whole seconds, rounded up: etcd leases have no finer grain. */
int64_t dlock__etcd_ttl_of(int64_t lease_ms);
/* What messages call l's kind: "lock", "read-write lock" or "semaphore". */
const char *dlock__etcd_kind_name(const dlock__etcd_lock *l);
/* "take/permits" of a semaphore key (its value's first line); 0 if it is
 * not one of ours. */
int dlock__etcd_parse_permits(const dlock__etcd_kv *kv, unsigned *take, unsigned *permits);

/* ---------------------------------------------------------------- sessions */

dlock__etcd_session *dlock__etcd_session_ref(dlock__etcd_session *es);
void dlock__etcd_session_unref(dlock__etcd_session *es);
/* The current session, started (a lease granted, the core's session
 * started) if there is none alive. *out is a reference. */
int dlock__etcd_session_get(dlock__etcd_store *e, int64_t deadline, dlock__etcd_session **out);
/* The session is over in etcd (or given up): its holds are lost, waiters
 * look again. Once. */
void dlock__etcd_session_end(dlock__etcd_store *e, dlock__etcd_session *es, const char *why);
/* A reference to es's core session for a grant, or NULL if it is no longer
 * alive (ended, or its validity ran out). */
dlock__session *dlock__etcd_session_for_grant(dlock__etcd_store *e, dlock__etcd_session *es);

/* ---------------------------------------------------------------- key names */

/* Claims the first free slot of base (base, base-1, base-2...) into *out. */
int dlock__etcd_claim_key(dlock__etcd_store *e, const char *base, char **out);
void dlock__etcd_unclaim_key(dlock__etcd_store *e, const char *key);

/* ---------------------------------------------------------------- a handle's key */

/* Moves the handle's key out (leaving none), or back in. */
void dlock__etcd_take_key(dlock__etcd_lock *l, dlock__etcd_key *out);
void dlock__etcd_put_key(dlock__etcd_lock *l, const dlock__etcd_key *k);
/* Forgets a key without touching etcd (its lease is gone, or it is). */
void dlock__etcd_discard_key(dlock__etcd_store *e, dlock__etcd_key *k);
/* Deletes key if its create revision is still rev (any, when rev is 0):
 * DLOCK_OK with *deleted, or the request's error. */
int dlock__etcd_delete_key(dlock__etcd_store *e, const char *key, int64_t rev, int64_t deadline,
                           int *deleted);
/* Removes k from etcd (its own lease revoked, or the key deleted), or hands
 * that to the background. 1: it was there, 0: gone already, -1: not known
 * now (retried in the background). */
int dlock__etcd_remove_key(dlock__etcd_store *e, dlock__etcd_key *k, int64_t deadline);

/* ---------------------------------------------------------------- work retried */

void dlock__etcd_pend_revoke(dlock__etcd_store *e, int64_t lease);
/* Retries the work left, until etcd stops answering. */
void dlock__etcd_retry_pending(dlock__etcd_store *e, int64_t deadline);
int dlock__etcd_has_pending(dlock__etcd_store *e);
/* Whether the delete of key is still waiting. */
int dlock__etcd_pending_has(dlock__etcd_store *e, const char *key);

/* ---------------------------------------------------------------- read-write holds */

void dlock__etcd_rw_remember(dlock__etcd_store *e, dlock__etcd_lock *l, const char *key,
                             const char *token);
void dlock__etcd_rw_forget(dlock__etcd_store *e, const dlock__etcd_lock *l);
/* Whether token holds the write key `key` in this client. */
int dlock__etcd_own_write_hold(dlock__etcd_store *e, const char *key, const char *token);
/* Whether token holds the read lock of l's name in this client. */
int dlock__etcd_own_read_hold(dlock__etcd_store *e, const dlock__etcd_lock *l, const char *token);

#endif
