/* SPDX-License-Identifier: MIT */
/* pg.h - the PostgreSQL backend's own state: the store, its connections
 * (conn.c) and its locks (pg.c). README.md maps the files.
 *
 * Session mode (table mode: table.c): a lock is a session-level advisory
 * lock on a 64-bit key made from its name (dlock__pg_key), held by one
 * connection of the store's pool (a reader's shared, read.c); each connection is a session of the
 * host (session.h), so when it dies every lock it held is lost and
 * reported. A connection holds several locks, never two of one key:
 * advisory locks are re-entrant per connection, so two handles of one name
 * on one connection would both "hold". A wait that blocks in the server
 * takes a connection that holds nothing (its request keeps it busy for a
 * slice); a try or a release is short, and shares. */
#ifndef DLOCK_BACKEND_PG_H
#define DLOCK_BACKEND_PG_H

#include "../backend.h"
#include "../sockwatch.h"
#include "../sqltable/sqltable.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* The high 16 bits of every key dlock makes ('d' 'l'): a dlock key is
 * recognisable in pg_locks (classid 0x646cXXXX). */
#define DLOCK__PG_KEY_NAMESPACE 0x646cULL

/* One connection. Its memory belongs to its session (freed when the last
 * reference to the session goes), so a renewal or a hold that still names
 * it never finds it freed; the PostgreSQL connection in it is closed
 * earlier, when the store discards it. */
typedef struct dlock__pgconn {
    pthread_mutex_t mu; /* one request at a time; held through a request */
    PGconn *pg;         /* NULL once closed */
    dlock__session *session;
    _Atomic int nheld; /* locks it holds now (out of the pool while any) */
    _Atomic int lost;  /* the core gave up on its session: close at the next chance */
    int pending;       /* a renewal's ping was sent and its answer not read yet */
    int pid;           /* its server process (pg_backend_pid) */
    int in_pool;       /* in the store's idle list */
    unsigned prepared; /* the statements (dlock__pg_exec_prepared) prepared on it, by bit */
    int lock_table;    /* table mode's lock table was there when it last looked (pg.c) */
    int64_t *keys;     /* the keys it holds (never one twice: advisory locks re-enter) */
    size_t nkeys, capkeys;
    char nonce[17];            /* random: names it as the holder in the lock's row */
    char fence_base[24];       /* the server run's epoch << 32 (pg.c: the fence), as text */
    char run_epoch[24];        /* the server run's epoch, as text (pg.c: the run rule) */
    char run_until[64];        /* the run's start + the largest lease recorded (timestamptz) */
    struct cancel_job *cancel; /* the last cancel sent for its requests (conn.c), or NULL */
    struct dlock__pgconn *next_idle;
    struct dlock__pgconn *prev_all, *next_all; /* every open connection of the store */
} dlock__pgconn;

typedef struct dlock__pgstore {
    dlock__store base;
    char label[320];
    /* the connection parameters, for PQconnectStartParams */
    const char *keys[20];
    const char *vals[20];
    char host[200], port[16], user[128], password[256], dbname[128], options[512];
    char lease_text[40], sslmode[24], connect_timeout[24], keepalives_idle[16],
        keepalives_interval[16], user_timeout[24];
    int64_t timeout_ms, connect_ms, lease_ms;
    pthread_mutex_t mu; /* the lists below, schema_ready */
    dlock__pgconn *idle;
    int nidle;
    dlock__pgconn *all;
    int nall; /* open connections (in the list all) */
    /* the statements of the hot path (pg.c), prepared by each connection's
     * set-up as "dlock_<i>" in its one round trip; NULL ends the list */
    const char *prep_sql[8];
    char take_try[3072], take_wait[3072];
    int schema_ready;
    int table;                      /* mode=table (table.c); else session mode */
    int table_ready;                /* table mode: its tables are there */
    _Atomic int share_ready;        /* table mode: its shared holds' table is there (shares.c) */
    struct dlock__pglisten *listen; /* table mode: its waiters' wake-ups (listen.c) */
    struct dlock__sockwatch *watch; /* session mode: every connection's socket watched while
                                       idle, a close by the server seen at once (conn.c) */
    struct dlock__pglock *held;     /* session mode: the holds of this client (under mu) */
    _Atomic int reached;
} dlock__pgstore;

#define PGSTORE(s) DLOCK__STORE_OF(dlock__pgstore, s)

/* One lock handle of the store (pg.c). */
typedef struct dlock__pglock {
    dlock__store_lock base;
    char *name;
    int64_t key;
    char key_text[24], classid[16], objid[16];
    char *key_lit;       /* table mode: the name as a bytea literal, its row's key */
    char *name_hex;      /* the name's bytes as bytea text ('\x...'), CHECK_SQL's $1 */
    dlock__pgconn *conn; /* the connection holding it (the lock's session reference) */
    /* while it holds (conn set): its owner token, and its place in the
     * store's list of holds (held, under the store's mu), by which an
     * owner asking for its name as another kind is told EDEADLK (read.c) */
    char owner[72];
    struct dlock__pglock *next_held;
    int handing;    /* table mode: its last release handed the row over (table.c) */
    int table_line; /* session mode: a waiter's row of it in the lock table's line (pg.c) */
    int64_t wait_began_us, wait_until_us; /* session mode: the current wait's first attempt
                                             (monotonic), and its deadline (which wait) */
} dlock__pglock;

#define PGLOCK(p) DLOCK__STORE_OF(dlock__pglock, p)

/* keys: the advisory key of a name (README.md: FNV-1a 64 of the name's
 * bytes, its low 48 bits under the namespace). */
int64_t dlock__pg_key(const char *name);

/* conn.c: connections. */
/* An idle connection of the pool, or a new one (its session started). */
int dlock__pg_get(dlock__pgstore *p, int64_t deadline_us, dlock__pgconn **out);
/* dlock__pg_get for one request: *deadline_us first capped at the command
 * timeout (the request's bound too). */
int dlock__pg_get_for_request(dlock__pgstore *p, int64_t *deadline_us, dlock__pgconn **out);
/* Done with a request's connection: back to the pool when the request was
 * answered (dlock__pg_put), else closed (it may still be answered). */
void dlock__pg_done(dlock__pgstore *p, dlock__pgconn *c, int answered);
/* For a request that does not block: a connection not busy that does not
 * hold key (one that holds locks first), else as dlock__pg_get. */
int dlock__pg_get_shared(dlock__pgstore *p, int64_t key, int64_t deadline_us, dlock__pgconn **out);
/* The connection holds key now / no more (its mutex held). */
int dlock__pg_hold(dlock__pgconn *c, int64_t key);
void dlock__pg_unhold(dlock__pgconn *c, int64_t key);
/* Done with it (its mutex held by the caller and released here): back to
 * the pool if it holds nothing (closed when the pool is full). */
void dlock__pg_put(dlock__pgstore *p, dlock__pgconn *c);
/* Closes the connection (its session ended with why: every lock under it
 * is reported lost), its mutex held by the caller and released here. */
void dlock__pg_discard(dlock__pgstore *p, dlock__pgconn *c, const char *why);
/* Sends sql with text params and reads its one result until deadline_us,
 * checking cancelled(arg) every 50 ms (then the query is cancelled in the
 * server, and its answer still awaited). DLOCK_OK with *res set (an error
 * result too: the caller looks at it), or DLOCK_EUNREACHABLE (the
 * connection is broken or timed out: discard it) with the detail recorded. */
int dlock__pg_exec(dlock__pgstore *p, dlock__pgconn *c, const char *sql, int nparams,
                   const char *const *params, int64_t deadline_us, int (*cancelled)(void *),
                   void *arg, PGresult **res);
/* As dlock__pg_exec, for a statement of the hot path: prepared on the
 * connection (once, as "dlock_<which>", which < 32) and then only bound
 * and executed, so the server parses and plans it once per connection. A
 * failed PREPARE is answered as the statement's own error result. */
int dlock__pg_exec_prepared(dlock__pgstore *p, dlock__pgconn *c, unsigned which, const char *sql,
                            int nparams, const char *const *params, int64_t deadline_us,
                            int (*cancelled)(void *), void *arg, PGresult **res);
/* One statement of a pipeline: prepared as "dlock_<which>" (as
 * dlock__pg_exec_prepared does), then bound and executed; or, which
 * DLOCK__PG_UNNAMED, sent as text with its params in the pipeline (no
 * round trip of its own to prepare it: a step that runs seldom). */
#define DLOCK__PG_UNNAMED 32u
typedef struct dlock__pg_stmt {
    unsigned which;
    const char *sql;
    int nparams;
    const char *const *params;
} dlock__pg_stmt;
/* The n statements in one round trip and one transaction (libpq's pipeline
 * mode, ended by one sync): DLOCK_OK with res[i] the result of each (an
 * error result too; after an error the later ones are
 * PGRES_PIPELINE_ABORTED, or NULL when a PREPARE failed: its error is in
 * its own res[i] and nothing ran), or DLOCK_EUNREACHABLE as dlock__pg_exec. */
/* A wait's watch: while the pipeline blocks in the server (a wait queued
 * there for longer than a command timeout), every every_us another
 * connection asks the server whether it still answers (SELECT 1, bounded
 * by bound_us; none while the request's own bound is nearer than that);
 * one that does not ends the request: DLOCK_EUNREACHABLE, the server's
 * wait cancelled, the connection to discard. asked_us: when the last probe
 * was sent (the request's send until one is). */
typedef struct dlock__pg_watch {
    int64_t every_us, bound_us;
    int64_t asked_us;
} dlock__pg_watch;
int dlock__pg_exec_pipeline(dlock__pgstore *p, dlock__pgconn *c, int n, const dlock__pg_stmt *st,
                            int64_t deadline_us, int (*cancelled)(void *), void *arg,
                            dlock__pg_watch *watch, PGresult **res);
/* Makes dlock's tables when missing (a database wiped under the client). */
int dlock__pg_make_tables(dlock__pgstore *p, dlock__pgconn *c, int64_t deadline_us);
/* Sends without waiting (renewals: all sent, then all read). */
int dlock__pg_send(dlock__pgconn *c, const char *sql, int nparams, const char *const *params);
/* The SQLSTATE of an error result, "" if none. */
const char *dlock__pg_state(const PGresult *r);
/* Records a failed result as DLOCK_ESERVER with its message. */
int dlock__pg_fail(dlock__pgstore *p, const PGresult *r, const char *what);
/* Closes every connection (close()). */
void dlock__pg_close_all(dlock__pgstore *p, int64_t deadline_us);
/* The socket watcher's look at a connection whose socket is readable or
 * hung up while nothing is asked on it (../sockwatch.h): closed if the
 * server closed it, its session ended and its locks reported lost now. */
enum dlock__sockwatch_verdict dlock__pg_watch_check(void *arg, void *item);
/* The core gave up on the session: close its connection. */
void dlock__pg_session_lost(dlock__store *s, dlock__session *session, int64_t deadline_us);
/* renew(): every connection named is pinged (all sent, then all read). */
int dlock__pg_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us);

/* pg.c: what read.c shares of a lock's life. */
/* The prepared statements' numbers (dlock__pg_exec_prepared; table.c's
 * are 7 to 11, shares.c's 17 to 31: the connection's bit set is full). */
enum {
    DLOCK__PGP_TRY,
    DLOCK__PGP_WAIT,
    DLOCK__PGP_RELEASE,
    DLOCK__PGP_UNLOCK,
    DLOCK__PGP_CHECK,
    DLOCK__PGP_READ_TRY = 12,
    DLOCK__PGP_READ_WAIT,
    DLOCK__PGP_READ_RELEASE,
    DLOCK__PGP_READ_UNLOCK,
    DLOCK__PGP_SHARE_CHECK,
};
/* One lock per name across the modes: the ms left of a live holder of the
 * name in table mode's lock table, 0 when none; and whether a live table
 * waiter of the name is ahead of the session grant in the table's line
 * (older than the grant's own place there; without one, older than its
 * wait's beginning, or than now: pg.c). $1: the name's bytes, $2: the
 * grant's owner token, $3: how long before the request its wait began
 * (µs, text), or NULL. Run after a session grant in its round trip (pg.c),
 * in the grant's transaction: now() is the request's beginning, however
 * long the grant blocked. */
#define DLOCK__PG_CHECK_SQL                                                                        \
    "SELECT coalesce(max(ceil(extract(epoch FROM (expires - clock_timestamp())) * "                \
    "1000)::bigint), 0), EXISTS (SELECT 1 FROM " DLOCK__SQLT_WAIT " w WHERE w.name = $1::bytea "   \
    "AND w.expires > clock_timestamp() AND substring(w.owner FROM 1 FOR 2) <> "                    \
    "'" DLOCK__SQLT_SESSION_WAIT                                                                   \
    "'::bytea AND w.since < coalesce((SELECT m.since FROM " DLOCK__SQLT_WAIT                       \
    " m WHERE m.name = $1::bytea AND m.owner = '" DLOCK__SQLT_SESSION_WAIT                         \
    "'::bytea || convert_to($2::text, 'UTF8') AND m.expires > clock_timestamp()), "                \
    "now() - $3::bigint * interval '1 microsecond', clock_timestamp())) "                          \
    "FROM " DLOCK__SQLT_TABLE " WHERE name = $1::bytea AND owner <> ''::bytea AND expires > "      \
    "clock_timestamp()"
/* The name's second advisory key: the two-int form of the key's halves
 * (objsubid 2 in pg_locks, apart from the key itself, objsubid 1), of
 * bigint expression k. A table take holds it shared until its commit
 * (table.c); a reader's grant takes it exclusively, after the key, until
 * its own commit (read.c): the two are never in flight together, so one
 * sees the other committed. The key alone cannot do it: a reader and a
 * table take both hold it shared. */
#define DLOCK__PG_KEY2(k) "((" k ") >> 32)::int4, (((" k ") << 32) >> 32)::int4"
/* The run rule's time has not passed ($9: its end; pg.c, at EARLY). */
#define DLOCK__PG_EARLY "$9::timestamptz > clock_timestamp()"
/* The name's row f holds it for an exclusive holder: its lease runs, or
 * the run rule holds a row no grant of this run ($8) wrote (pg.c). */
#define DLOCK__PG_STILL_HELD                                                                       \
    "(f.expires > clock_timestamp() OR (f.run < $8::bigint AND " DLOCK__PG_EARLY "))"
/* The row's owner of a writer of the read-write lock ("dlock:w:TOKEN";
 * a mutex's is "dlock:TOKEN"): status tells the kinds apart by it. */
#define DLOCK__PG_WRITER "dlock:w:"
/* The read-write lock holds the name of dlock_fence row f: a reader's
 * lease runs, or a writer's row lease (read.c). Status, force-unlock and
 * list tell the kinds apart by it: one name is one lock, and each call
 * names the kind it asks about. */
#define DLOCK__PG_RW_HOLDS                                                                         \
    "(EXISTS (SELECT FROM dlock_share r WHERE r.name = f.name AND r.expires > "                    \
    "clock_timestamp()) OR (f.expires > clock_timestamp() AND starts_with(f.owner, "               \
    "'" DLOCK__PG_WRITER "')))"
/* A row r of dlock_share whose reader's connection is gone while its
 * lease runs: no session of its server pid holds the key shared, or that
 * pid's connection is another one now (its owner record names another
 * id). $1 classid, $2 objid of the key. */
#define DLOCK__PG_READER_GONE                                                                      \
    "(r.expires > clock_timestamp() AND NOT EXISTS (SELECT FROM pg_locks k JOIN dlock_owner o "    \
    "ON o.pid = k.pid AND o.holder = r.holder WHERE k.locktype = 'advisory' AND k.objsubid = 1 "   \
    "AND k.classid = $1::oid AND k.objid = $2::oid AND k.granted AND k.mode = 'ShareLock' AND "    \
    "k.pid = r.holder_pid AND k.database = (SELECT oid FROM pg_database WHERE datname = "          \
    "current_database())))"
/* A reader's release, in one statement (as pg.c's RELEASE_SQL): its
 * lease row deleted (locked until the commit: a writer's check waits for
 * it, read.c), then the shared key let go; the commit does not wait for
 * the WAL's flush. $1 key, $2 name, $3 the connection's id. */
#define DLOCK__PG_READ_RELEASE_SQL                                                                 \
    "WITH d AS (DELETE FROM dlock_share WHERE name = $2 AND holder = $3 RETURNING 1) SELECT "      \
    "pg_advisory_unlock_shared($1::bigint), set_config('synchronous_commit', 'off', true) FROM "   \
    "(SELECT count(*) FROM d) AS x"
/* A reader's grant, a try [0] and a wait [1] (read.c); its parameters are
 * the exclusive grant's (pg.c), and so are its answer's columns. */
extern const char *const dlock__pg_read_sql[2];
/* A reader's shared key let go (after a failed attempt, a lost hold). */
#define DLOCK__PG_READ_UNLOCK_SQL "SELECT pg_advisory_unlock_shared($1::bigint)"
/* The connection goes back to the pool (or is closed: discard), and the
 * lock's reference to its session with it; the hold leaves the store's
 * list. */
void dlock__pg_unbind(dlock__pgstore *p, dlock__pglock *l, int discard, const char *why);
/* Sleeps until `until`, asking cancelled() every 50 ms: 1 if it said so. */
int dlock__pg_sleep_until(int64_t until, int (*cancelled)(void *), void *arg);

/* read.c: the read-write lock's readers in session mode (README.md, "Read
 * locks"), and what the exclusive grants need of them. (A reader's release
 * is pg.c's, with DLOCK__PG_READ_RELEASE_SQL.) */
int dlock__pg_read_acquire(dlock__pgstore *p, dlock__pglock *l, dlock__attempt *a);
/* After a failed attempt of a reader: the connection lets go of the
 * shared key, or is closed. */
void dlock__pg_read_after_failure(dlock__pgstore *p, dlock__pgconn *c, const char *key,
                                  int64_t deadline);
/* An exclusive grant whose row said readers' leases may run
 * (shared_until): the ms left of the longest live reader lease of the
 * name, 0 when none, waiting for a reader's release in flight to commit;
 * DLOCK_EUNREACHABLE or DLOCK_ESERVER as a request. */
int dlock__pg_readers_left(dlock__pgstore *p, dlock__pgconn *c, dlock__pglock *l,
                           int64_t deadline_us, int64_t *left_ms);
/* The part of pg_locks that is l's advisory lock, in this database
 * ($1 classid, $2 objid). */
#define DLOCK__PG_LOCK_ROWS                                                                        \
    "l.locktype = 'advisory' AND l.objsubid = 1 AND l.classid = $1::oid AND "                      \
    "l.objid = $2::oid AND l.database = (SELECT oid FROM pg_database WHERE datname = "             \
    "current_database())"
/* operator.c: the operator calls, in either mode (one lock per name). */
int dlock__pg_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline_us);
int dlock__pg_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline_us);
int dlock__pg_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline_us);
int dlock__pg_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline_us);
/* A mutex's handle (plain or fair): the one kind whose status looks at
 * any kind of holder in the other mode. */
int dlock__pg_mutex_kind(const dlock__pglock *l);
/* After a try found the key held: by which kind of lock, as seen by l
 * (a->held_as), and a reader's why (a->held_why); *broken when c got no
 * answer (to discard). */
void dlock__pg_held_by(dlock__pgstore *p, dlock__pgconn *c, dlock__pglock *l, int64_t deadline_us,
                       dlock__attempt *a, int *broken);
/* Whether l asks about the read-write lock (else the mutex). */
int dlock__pg_is_rw(const dlock__pglock *l);
/* Whether a holder is of the lock l asks about: a reader (reader set), or
 * an exclusive holder whose row's owner is owner (a writer's starts with
 * DLOCK__PG_WRITER; a session that is not dlock's is a mutex's). any: of
 * every kind (the table URL's view of session mode: it asks as a mutex,
 * the only kind table mode has, and sees every holder of the name). */
int dlock__pg_of_kind(const dlock__pglock *l, int any, int reader, const char *owner);
/* Session mode's forced unlock of l's kind through the session URL, as
 * one SQL text into sql (name: the name as a literal; wait_ms: how long
 * pg_terminate_backend waits): only the holders of that kind are ended;
 * its answer is pg.c's (terminated, to terminate, table mode's table). */
int dlock__pg_force_sql(const dlock__pglock *l, const char *name, const char *wait_ms, char *sql,
                        size_t len);
/* The owner token already holds l's name through another handle (of
 * another kind, or exclusively): asking again would wait for itself.
 * When l is a reader and the owner holds the name as a writer (a
 * downgrade), *beside is the writer's connection, where the read is taken
 * (a session's own locks never conflict): a reference to its session is
 * held for dlock__pg_beside_lock, which must follow. *holds: whether the
 * owner holds the name at all (another read, or that write). */
int dlock__pg_owner_clash(dlock__pgstore *p, dlock__pglock *l, const char *token,
                          dlock__pgconn **beside, int *holds);
/* Locks the writer's connection c for a read beside it: 1 (c locked),
 * 0 when it reads key beside its writer already, -1 when token's write of
 * key is no longer on c (released meanwhile, c closed, or back in the pool
 * and taken by another hold: the read goes the ordinary way). Drops the
 * reference dlock__pg_owner_clash took. */
int dlock__pg_beside_lock(dlock__pgstore *p, dlock__pgconn *c, int64_t key, const char *token);
/* l holds now for token / no more (the store's list of holds). */
void dlock__pg_held_add(dlock__pgstore *p, dlock__pglock *l, const char *token);
void dlock__pg_held_remove(dlock__pgstore *p, dlock__pglock *l);

/* table.c: table mode (mode=table), the backend's steps for it. */
/* The take's guard, a statement before it in its transaction, prepared
 * as DLOCK__PGT_PREP_GUARD ($1: the name's advisory key); and the
 * condition on its answer that the take's statement writes under ($1:
 * the name's bytes, $5: its advisory key). */
#define DLOCK__PGT_PREP_GUARD 11
/* The lock's row locked until the commit, before a step that reads the
 * waiters or the shared holders and writes the row after what it read
 * (shares.c; table.c: the hand-over and a waiter's leave), so that the
 * step's next statement sees every change made before the lock was had
 * (a statement's snapshot is taken when it starts); prepared as this
 * number ($1: the name's bytes). */
#define DLOCK__PGT_PREP_LOCK_ROW 22
#define DLOCK__PGT_LOCK_ROW_SQL                                                                    \
    "SELECT 1 FROM " DLOCK__SQLT_TABLE " WHERE name = $1::bytea FOR UPDATE"
/* Before the take, in its transaction, the session mode's advisory lock
 * of the name, shared (table takers do not exclude each other by it) and
 * until the commit: it fails while a session holds the lock, and a session
 * grant that gets the lock after the commit sees the row (pg.c:
 * CHECK_SQL). One lock per name across the modes. And a session holder's
 * row lease (dlock_fence, pg.c) counts as held, as it does for a session
 * grant: a holder whose connection dropped may still think it holds until
 * the lease ends; and so does the run rule (pg.c: a name no session grant
 * of this server run wrote, until the run's start + the largest recorded
 * lease), for a session grant lost in a crash; and so does a session
 * reader's lease (read.c: dlock_share), as the shared advisory lock does
 * not exclude readers; the second key (pg.h: DLOCK__PG_KEY2), shared,
 * keeps a reader's grant from being in flight beside the take, so that one
 * of them sees the other. When it fails, nothing is written
 * (dlock__sqlt_take_expr) and the answer says so.
 *
 * The keys are tried in a statement of their own (DLOCK__PGT_GUARD_SQL, $1 the
 * advisory key), which leaves its answer in a setting of the transaction
 * (the key's text, or '' when a try failed), and the take's statement
 * after it reads the tables: under READ COMMITTED a statement sees what
 * was committed before it started, and the take's must start after the
 * second key was got. In one statement, a reader that committed between
 * the statement's start and its try of the second key (the try then
 * succeeds) was not seen, and both held (test_pg_lock
 * reader_in_take_snapshot). Both statements go in one pipeline: one round
 * trip, one transaction. ($1: the name's bytes; $5: its advisory key.) */
#define DLOCK__PGT_GUARD_SQL                                                                       \
    "SELECT set_config('dlock.take_key', CASE WHEN pg_try_advisory_xact_lock_shared($1::bigint) "  \
    "AND pg_try_advisory_xact_lock_shared(" DLOCK__PG_KEY2("$1::bigint") ") THEN $1::text ELSE "   \
                                                                         "'' END, true)"
#define DLOCK__PGT_SESSION_GUARD                                                                   \
    "coalesce(current_setting('dlock.take_key', true), '') = $5::text AND NOT EXISTS (SELECT "     \
    "FROM dlock_fence WHERE name = convert_from($1::bytea, 'UTF8') AND expires > "                 \
    "clock_timestamp()) AND NOT EXISTS (SELECT FROM dlock_run r WHERE r.started + r.lease_ms * "   \
    "interval '1 millisecond' > clock_timestamp() AND NOT EXISTS (SELECT FROM dlock_fence f "      \
    "WHERE f.name = convert_from($1::bytea, 'UTF8') AND f.run >= r.epoch)) AND NOT EXISTS "        \
    "(SELECT FROM dlock_share WHERE name = convert_from($1::bytea, 'UTF8') AND expires > "         \
    "clock_timestamp())"
/* dlock's tables made when missing (once per store). */
int dlock__pgt_ready(dlock__pgstore *p, int64_t deadline_us);
/* Every table of dlock's made again (found gone under a running client). */
int dlock__pgt_remake(dlock__pgstore *p, int64_t deadline_us);
/* A request of sql (as text, freed here; NULL: out of memory) on a pooled
 * connection once the tables are there: DLOCK_OK with *res (PQclear it),
 * or the failure recorded. */
int dlock__pgt_request(dlock__pgstore *p, char *sql, int64_t deadline_us, PGresult **res,
                       const char *what);
char *dlock__pgt_bytea(const char *text); /* a bytea literal, malloc'd; NULL: no memory */
/* The lock's tag in notices (listen.c): tag has DLOCK__PGL_TAG_MAX bytes. */
void dlock__pgt_tag(const char *name, char *tag);
int dlock__pgt_acquire(dlock__pgstore *p, dlock__pglock *l, dlock__attempt *a);
int dlock__pgt_cancel(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t deadline_us);
int dlock__pgt_release(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t deadline_us);
int dlock__pgt_extend(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t lease_ms,
                      int at_least, int64_t deadline_us);
/* Every hold of h in one request (waits: every queued waiter's row of h,
 * kept for its lease): each one's held set when renewed. */
int dlock__pgt_renew(dlock__pgstore *p, dlock__sqlt_hold *h, size_t n, int waits,
                     int64_t deadline_us);
/* The state, the holders of l's kind (any: of every kind, each a
 * mutex's, as the session URL sees them); force-unlock of them. */
int dlock__pgt_query(dlock__pgstore *p, dlock__pglock *l, int any, dlock_status *st,
                     int64_t deadline_us);
int dlock__pgt_holders(dlock__pgstore *p, dlock__pglock *l, int any, dlock__holder_sink sink,
                       void *arg, int64_t deadline_us);
int dlock__pgt_force_unlock(dlock__pgstore *p, dlock__pglock *l, int any, int64_t deadline_us);
/* A row of dlock_fence (as f) whose name session mode holds or waits for
 * (its key in pg_locks), or whose row lease runs (a holder whose
 * connection ended: status calls it held until the lease ends). */
#define DLOCK__PG_SESSION_LIVE                                                                     \
    "((f.holder <> '' AND f.expires > clock_timestamp()) OR EXISTS (SELECT 1 FROM dlock_share r "  \
    "WHERE r.name = f.name AND r.expires > clock_timestamp()) OR EXISTS (SELECT 1 FROM pg_locks "  \
    "l "                                                                                           \
    "WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND "                                        \
    "((l.classid::bigint << 32) | l.objid::bigint) = f.key AND l.database = (SELECT oid FROM "     \
    "pg_database WHERE datname = current_database())))"
/* Table mode's names held or waited for under prefix, and session mode's
 * (DLOCK__PG_SESSION_LIVE): one lock per name, so through either URL. */
/* kinds: a session holder's kind named (DLOCK__PG_RW_HOLDS), else every
 * name as the mutex (the table URL's: its status sees every kind). */
int dlock__pgt_list(dlock__pgstore *p, const char *prefix, int kinds, dlock__name_sink sink,
                    void *arg, int64_t deadline_us);

/* shares.c: table mode's read-write lock and semaphore (a reader's and a
 * semaphore holder's steps, a writer's release, lease set and renewal). */
#define DLOCK__PGT_SHARE "dlock_lock_share"
/* The shared holds' table made when missing (its first use). */
int dlock__pgts_ready(dlock__pgstore *p, int64_t deadline_us);
/* A reader's or a semaphore holder's take: *answer as a mutex take's
 * (table.c), with whether this owner holds a shared row of the name. */
int dlock__pgts_take(dlock__pgstore *p, dlock__pglock *l, dlock__attempt *a, PGresult **answer);
int dlock__pgts_release(dlock__pgstore *p, dlock__pglock *l, const char *token,
                        int64_t deadline_us);
int dlock__pgts_write_release(dlock__pgstore *p, dlock__pglock *l, const char *token,
                              int64_t deadline_us);
int dlock__pgts_extend(dlock__pgstore *p, dlock__pglock *l, const char *token, int64_t lease_ms,
                       int at_least, int64_t deadline_us);
/* The holds of h in one transaction, kind[i] each one's: 'r' a reader's,
 * 's' a semaphore's, 'w' a writer's. */
int dlock__pgts_renew(dlock__pgstore *p, dlock__sqlt_hold *h, size_t n, const int *kind,
                      int64_t deadline_us);
/* (owner, info, count) of the live shared holders of l's name. */
int dlock__pgts_readers(dlock__pgstore *p, dlock__pglock *l, int64_t deadline_us, PGresult **res);
/* The name's row cleared when held as kind ('m', 'w', 's'; 0: any), with
 * its shared holders' rows. */
int dlock__pgts_force(dlock__pgstore *p, dlock__pglock *l, int kind, int64_t deadline_us);

/* listen.c: table mode's wake-ups by LISTEN/NOTIFY. A release notifies
 * DLOCK__PGL_CHANNEL with the lock's tag: the hex of its name's first
 * DLOCK__SQLT_TAG_BYTES bytes (dlock__pgl_tag). */
#define DLOCK__PGL_CHANNEL DLOCK__SQLT_NOTIFY
#define DLOCK__PGL_TAG_MAX (2 * DLOCK__SQLT_TAG_BYTES + 1)
typedef struct dlock__pglisten dlock__pglisten;
int dlock__pgl_new(dlock__pgstore *p, dlock__pglisten **out);
void dlock__pgl_free(dlock__pglisten *s);
/* The listening connection made, if it is not (prepare_wait). */
int dlock__pgl_connect(dlock__pglisten *s, int64_t deadline_us);
int dlock__pgl_ready(dlock__pglisten *s);
/* token waits for the lock of tag (one lock per token: its latest); gone
 * when it waits no more. */
void dlock__pgl_watch(dlock__pglisten *s, const char *tag, const char *token);
void dlock__pgl_unwatch(dlock__pglisten *s, const char *token);
/* wait(): parks w, reading the connection for every waiter meanwhile. */
enum dlock__wake dlock__pgl_wait(dlock__pglisten *s, dlock__waiter *w, int64_t until_us);

#endif
