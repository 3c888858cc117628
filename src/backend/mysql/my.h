/* SPDX-License-Identifier: MIT */
/* my.h - the MariaDB/MySQL backend's own state: the store, its connections
 * (conn.c), its names (names.c) and its locks (mysql.c). README.md maps the
 * files.
 *
 * Table mode (mode=table, table.c): a lock is a row of dlock's lock table
 * with a lease on the server's clock (../sqltable/); any pooled connection
 * serves any request, and no hold depends on a connection.
 *
 * Session mode (mode=session): a lock is a GET_LOCK named lock,
 * held by one connection of the store's pool; each connection is a session
 * of the host (session.h), so when it dies every lock it held is lost and
 * reported. A connection holds at most one lock at a time: GET_LOCK is
 * re-entrant per connection, so two handles sharing one would both "hold"
 * the name.
 *
 * Row mode (mode=row, row.c): a lock is SELECT ... FOR UPDATE on a row of
 * dlock_row in a transaction its connection keeps open for the lock's
 * life; a connection per held lock as in session mode, whose fence and
 * lease (dlock_fence) it shares. */
#ifndef DLOCK_BACKEND_MY_H
#define DLOCK_BACKEND_MY_H

#include "../backend.h"
#include "../sockwatch.h"
#include "../sqltable/sqltable.h"
#include "names.h"

#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One connection. Its memory belongs to its session (freed when the last
 * reference to the session goes), so a renewal or a hold that still names
 * it never finds it freed, and a thread that takes it from the store's
 * lists takes a reference first (conn.c, take_listed); the MySQL
 * connection in it is closed earlier, when the store discards it. */
typedef struct dlock__myconn {
    pthread_mutex_t mu; /* one request at a time; held through a request */
    MYSQL *m;           /* NULL once closed */
    dlock__session *session;
    _Atomic int holding;   /* holds a lock now (not in the pool) */
    _Atomic int lost;      /* the core gave up on its session: close at the next chance */
    unsigned long id;      /* its server connection id (CONNECTION_ID()) */
    char nonce[17];        /* random: names it as the holder in the lock's row */
    char *held_lit;        /* the literal of the GET_LOCK name it holds (renewals extend its
                              row's lease), NULL */
    struct kill_job *kill; /* the KILL QUERY last sent for its request, NULL (conn.c) */
    int late_status;       /* a renewal's request still out, unanswered in its bound (a
                              server silent for a while): what it waits for (MYSQL_WAIT_*),
                              finished before the next request (conn.c: settle); 0: none */
    int late_update;       /* that request is an UPDATE (else a ping) */
    int in_pool;           /* in the store's idle list */
    struct dlock__myconn *next_idle;
    struct dlock__myconn *prev_all, *next_all; /* every open connection of the store */
} dlock__myconn;

typedef struct dlock__mystore {
    dlock__store base;
    char label[320];
    char host[200], user[128], password[256], dbname[128];
    unsigned port;
    int exact_names; /* ?names=exact: names go to GET_LOCK as they are */
    int table;       /* mode=table (table.c); else session mode, or row mode: */
    int row;         /* mode=row (row.c) */
    int64_t timeout_ms, connect_ms, lease_ms;
    char *info_lit;     /* the client's owner info as an SQL literal */
    char lease_us[24];  /* the lease in microseconds, for INTERVAL ... MICROSECOND */
    pthread_mutex_t mu; /* the lists below, schema_ready */
    dlock__myconn *idle;
    int nidle;
    dlock__myconn *all;
    int schema_ready; /* session mode: dlock_fence; table mode: dlock_lock */
    /* The other mode's table, which a take looks at so that the two modes
     * are one lock per name (README.md): dlock_lock in session mode,
     * dlock_fence in table mode. 1 there, -1 not there and could not be
     * made, 0 not looked for yet (table.c). */
    _Atomic int other_table;
    _Atomic int share_table; /* table mode: dlock_share is there (1: read.c), 0 not known */
    _Atomic int reached;
    struct dlock__sockwatch *watch; /* session and row mode: every connection's socket watched
                                       while idle, a close by the server seen at once */
} dlock__mystore;

#define MYSTORE(s) DLOCK__STORE_OF(dlock__mystore, s)

/* One lock. */
typedef struct dlock__mylock {
    dlock__store_lock base;
    char *name;
    char server_name[DLOCK__MY_NAME_MAX * 4 + 1]; /* its GET_LOCK name; table mode: its key */
    char *lit;                                    /* server_name as an SQL literal */
    char *name_lit;                               /* name as a binary literal */
    char *key_lit;                                /* server_name as a binary literal */
    dlock__myconn *conn; /* session mode: the connection holding it (the lock's session
                            reference) */
    atomic_int row_seen; /* session mode: dlock_fence has the name's row (a grant
                            leaves out the INSERT while it does) */
    dlock__myconn *bell; /* table mode: the connection holding the hold's bell (bell.c; the
                            bell's session reference), NULL: none */
    int waited;          /* table mode: the last attempt was told the name was held, */
    int look;            /* by its row (not another mode's holder): looked at first, */
    long ahead;          /* with so many waiters ahead, */
    int64_t took_us;     /* and the last answered take (keeps the waiter's row) sent then; */
    int take_next;       /* a look said take, after a wait: the next attempt takes */
    int64_t claimed_us;  /* since when looks found the free row claimed by another (0) */
} dlock__mylock;

#define MYLOCK(p) DLOCK__STORE_OF(dlock__mylock, p)

/* The results of one request (several statements). */
#define DLOCK__MY_MAX_STMTS 16
typedef struct dlock__myres {
    int n;                                  /* statements answered without an error */
    MYSQL_RES *rows[DLOCK__MY_MAX_STMTS];   /* each one's rows, NULL if it had none */
    uint64_t affected[DLOCK__MY_MAX_STMTS]; /* each one's affected rows */
    unsigned err;                           /* the server's error of statement n, 0: none */
    char msg[300];
    int killed; /* a KILL QUERY was sent for it (cancelled) */
} dlock__myres;

/* conn.c: connections. */
/* An idle connection of the pool, or a new one (its session started); its
 * mutex held. */
int dlock__my_get(dlock__mystore *p, int64_t deadline_us, dlock__myconn **out);
/* Back to the pool (or closed when the pool is full), its mutex held by the
 * caller and released here. */
void dlock__my_put(dlock__mystore *p, dlock__myconn *c);
/* Closes the connection (its session ended with why: every lock under it
 * is reported lost), its mutex held by the caller and released here. */
void dlock__my_discard(dlock__mystore *p, dlock__myconn *c, const char *why);
/* Sends sql (statements separated by ';') and reads every result until
 * deadline_us, asking cancelled(arg) every 50 ms (then the query is ended
 * in the server by KILL QUERY, sent from a thread and a connection of its
 * own, and its answer awaited for 150 ms at most: res->killed). DLOCK_OK
 * with *res filled (a server error too: res->err), or DLOCK_EUNREACHABLE
 * (the connection is broken or timed out: discard it) with the detail
 * recorded. dlock__my_res_free() in every case. */
int dlock__my_exec(dlock__mystore *p, dlock__myconn *c, const char *sql, int64_t deadline_us,
                   int (*cancelled)(void *), void *arg, dlock__myres *res);
/* A wait's watch: while a request blocks in the server (a GET_LOCK queued
 * there for longer than a command timeout), every every_us another
 * connection asks the server whether it still answers (SELECT 1, bounded
 * by bound_us; none while the request's own bound is nearer than that);
 * one that does not ends the request: DLOCK_EUNREACHABLE, KILL QUERY sent
 * for it, the connection to discard. asked_us: when the last question was
 * asked (the request's send until one is). */
typedef struct dlock__my_watch {
    int64_t every_us, bound_us;
    int64_t asked_us;
    int64_t next_us; /* (conn.c's: the next question's time) */
    int silent;      /* (conn.c's: a question went unanswered) */
} dlock__my_watch;
/* dlock__my_exec with the server watched while the request blocks. */
int dlock__my_exec_watched(dlock__mystore *p, dlock__myconn *c, const char *sql,
                           int64_t deadline_us, int (*cancelled)(void *), void *arg,
                           dlock__my_watch *watch, dlock__myres *res);
void dlock__my_res_free(dlock__myres *res);
/* 1 while a KILL QUERY sent for an earlier request of c may still reach
 * the server: it would end whatever c runs next, so c is closed rather
 * than used again. */
int dlock__my_kill_in_flight(dlock__myconn *c);
/* The first column of the first row of statement i's rows, NULL if none
 * (or SQL NULL). */
const char *dlock__my_value(const dlock__myres *res, int i, unsigned col);
/* Records res's server error as DLOCK_ESERVER. */
int dlock__my_fail(dlock__mystore *p, const dlock__myres *res, const char *what);
/* Runs an operator's request (or a table mode's) on a pooled connection,
 * bounded by one command timeout: DLOCK_OK with *res (free it), or the
 * failure recorded (a server error: DLOCK_ESERVER naming what). */
int dlock__my_operate(dlock__mystore *p, const char *sql, int64_t deadline, dlock__myres *res,
                      const char *what);
/* Closes every connection (close()); a detached lock's row lease ends
 * first, if the server answers by deadline_us. */
void dlock__my_close_all(dlock__mystore *p, int64_t deadline_us);
/* The socket watcher's look at an idle connection (../sockwatch.h): closed
 * if the server closed it, its session ended and its locks reported lost
 * now. */
enum dlock__sockwatch_verdict dlock__my_watch_check(void *arg, void *item);
/* The core gave up on the session: close its connection. */
void dlock__my_session_lost(dlock__store *s, dlock__session *session, int64_t deadline_us);
/* renew(): every connection named is pinged (all sent, then all read). */
int dlock__my_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us);

/* Session mode's table (README.md: schema). */
#define DLOCK__MY_FENCE_SCHEMA                                                                     \
    "CREATE TABLE IF NOT EXISTS dlock_fence ("                                                     \
    "name VARBINARY(256) NOT NULL PRIMARY KEY, "                                                   \
    "lock_name VARBINARY(2048) NOT NULL, fence BIGINT UNSIGNED NOT NULL, "                         \
    "conn BIGINT UNSIGNED NOT NULL, holder CHAR(16) NOT NULL, expires DATETIME(6) NOT NULL, "      \
    "owner VARCHAR(255) NOT NULL, info TEXT NOT NULL) "                                            \
    "ENGINE=InnoDB"

/* Row mode's table (README.md: row mode): the rows that FOR UPDATE locks. */
#define DLOCK__MY_ROW_SCHEMA                                                                       \
    "CREATE TABLE IF NOT EXISTS dlock_row ("                                                       \
    "name VARBINARY(256) NOT NULL PRIMARY KEY, lock_name VARBINARY(2048) NOT NULL) "               \
    "ENGINE=InnoDB"

/* row.c: row mode (mode=row), the backend's steps for it. */
int dlock__myr_acquire(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a);
int dlock__myr_release(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us);
/* Whether the hold still stands (extend() of a session-bound hold). */
int dlock__myr_confirm(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us);
/* renew(): row holds' leases in one request, every connection pinged. */
int dlock__myr_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us);
int dlock__myr_query(dlock__mystore *p, dlock__mylock *l, dlock_status *st, int64_t deadline_us);
int dlock__myr_holders(dlock__mystore *p, dlock__mylock *l, dlock__holder_sink sink, void *arg,
                       int64_t deadline_us);
/* force_unlock of a session or row holder, through any mode's URL (the
 * connection of dlock_fence's live lease, or of the named lock, killed). */
int dlock__my_force_fenced(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us);
int dlock__my_list_fenced(dlock__mystore *p, const char *prefix, const char *live,
                          dlock__name_sink sink, void *arg, int64_t deadline_us);
int dlock__myr_list(dlock__mystore *p, const char *prefix, dlock__name_sink sink, void *arg,
                    int64_t deadline_us);

/* table.c: table mode (mode=table), the backend's steps for it. */
int dlock__myt_acquire(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a);
int dlock__myt_cancel(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t deadline_us);
int dlock__myt_release(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t deadline_us);
int dlock__myt_extend(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t lease_ms,
                      int at_least, int64_t deadline_us);
/* Renews the items that are table holds (HOLD with no session) but not a
 * reader's (read.c), all in one request; leaves the others as they are
 * and returns how many it took. */
size_t dlock__myt_renew(dlock__mystore *p, dlock__renewal *items, size_t n, int64_t deadline_us);
int dlock__myt_query(dlock__mystore *p, dlock__mylock *l, dlock_status *st, int64_t deadline_us);
int dlock__myt_holders(dlock__mystore *p, dlock__mylock *l, dlock__holder_sink sink, void *arg,
                       int64_t deadline_us);
/* force_unlock of a table holder (the row cleared), through any mode's URL. */
int dlock__myt_force_unlock(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us);
int dlock__myt_list(dlock__mystore *p, const char *prefix, dlock__name_sink sink, void *arg,
                    int64_t deadline_us);
/* The other mode's table (other_table), made when missing if the user may:
 * DLOCK_OK with p->other_table set to 1 or -1, or the failure to reach the
 * server (then still 0). */
int dlock__myt_other_table(dlock__mystore *p, int64_t deadline_us);
/* A table was found gone (ER_NO_SUCH_TABLE: the database wiped or restored
 * under the client): what the store knew of its tables is forgotten, and
 * they are made again. */
int dlock__myt_remake(dlock__mystore *p, int64_t deadline_us);
/* Table mode's read-write lock (../sqltable: "the read-write lock"): the
 * kinds in table.c, a reader's steps in read.c. dlock__myt_share makes
 * the readers' table dlock_share when missing (DLOCK_OK with
 * p->share_table 1, or why not). */
int dlock__myt_share(dlock__mystore *p, int64_t deadline_us);
/* The owner a hold of l is written under in dlock_lock, as a literal: a
 * writer's token after "w:", else the token. */
char *dlock__myt_owner(const dlock__mylock *l, const char *token);
/* 'm' (mutex, fair), 'r', 'w' or 's' (semaphore): l's kind as
 * dlock__sqlt_holder_kind says a holder's. */
int dlock__myt_kind_of(const dlock__mylock *l);
/* The live shared holders of l (readers, a semaphore's): (owner, info,
 * count) rows in *res (freed by the caller). */
int dlock__myt_readers(dlock__mystore *p, dlock__mylock *l, int64_t deadline_us, dlock__myres *res);
/* read.c: a shared holder's steps (table mode: a reader, DLOCK__READ; a
 * semaphore's, DLOCK__SEMAPHORE). */
int dlock__myt_read_acquire(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a);
int dlock__myt_read_release(dlock__mystore *p, dlock__mylock *l, const char *token,
                            int64_t deadline_us);
int dlock__myt_read_extend(dlock__mystore *p, dlock__mylock *l, const char *token, int64_t lease_ms,
                           int at_least, int64_t deadline_us);
/* Renews the shared holds among items, in one request; returns how many
 * (dlock__myt_renew renews the other table holds). */
size_t dlock__myt_read_renew(dlock__mystore *p, dlock__renewal *items, size_t n,
                             int64_t deadline_us);
/* The statement of a guarded take whose rows are its answer: the guard's
 * two first, then dlock__sqlt_take's count of older waiters, its START
 * TRANSACTION and its INSERT (read.c puts a shared take's answer there). */
#define DLOCK__MYT_ANSWER 5
/* Runs a guarded take (table.c: the GET_LOCK of the name around it; sql
 * freed here): DLOCK_OK with *res, *shut when the name was not free for
 * a take (nothing written). bell: NULL, or where the connection goes
 * (its mutex held) instead of the pool when column bell_col of the take's
 * answer is 1: it holds the hold's bell (bell.c). */
int dlock__myt_run_take(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res,
                        int *shut, unsigned bell_col, dlock__myconn **bell);
/* Runs a request of the table (sql freed here), the tables made first. */
int dlock__myt_run(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res,
                   const char *what);
/* Runs a request that opens a transaction (sql freed here): its
 * connection closed, never pooled, when it fails (a transaction may be
 * left open with the name's row locked). */
int dlock__myt_run_tx(dlock__mystore *p, char *sql, int64_t deadline, dlock__myres *res,
                      const char *what);
/* Renews the items pick() takes (table holds), in one request of
 * request()'s (run as one transaction: tx), whose statement answer gives
 * (key, owner) of each one held now; a writer's owner after "w:". Returns
 * how many it took. */
size_t dlock__myt_renew_some(dlock__mystore *p, dlock__renewal *items, size_t n,
                             int (*pick)(const dlock__renewal *),
                             char *(*request)(enum dlock__sqlt_dialect, const dlock__sqlt_hold *,
                                              size_t),
                             int answer, int tx, int64_t deadline_us);
/* A take's answer (statement 3 of res; shut: run_take's) into a's
 * outcome, or DLOCK_EDEADLK when the owner holds the name as another kind. */
int dlock__myt_took(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a, const dlock__myres *res,
                    int shut);
/* The guard's two statements before a take (table.c). */
char *dlock__myt_guard(dlock__mystore *p, dlock__mylock *l, int waits);

/* bell.c: table mode's bell (README.md, "The bell"). The column a
 * waiting take adds to its answer (owner: its owner's literal): 1 when it
 * took the row and holds the bell now. */
char *dlock__myb_take_column(const char *owner);
/* l's bell is held on c (its mutex held, given up here). */
void dlock__myb_hold(dlock__mylock *l, dlock__myconn *c);
/* Lets go of l's bell, if it holds one (after its release: the waiters
 * find the row let go), with its connection pooled again, or closed
 * (close: no request, for a handle freed or detached). */
void dlock__myb_let_go(dlock__mystore *p, dlock__mylock *l, int close, int64_t deadline_us);
/* SQL (a format: '%%' is '%'): the bell of a row of dlock_lock (its
 * columns name and fence): 6 + 40 + 1 + up to 16 characters, within
 * GET_LOCK's 64. */
#define DLOCK__MYB_BELL_OF_ROW "CONCAT('dlock%%', LEFT(SHA2(name, 256), 40), '.', HEX(fence))"
/* SQL around a force-unlock's statements: the row's bell before (a
 * format: key, %s), and after, it and the connection holding it. */
#define DLOCK__MYB_FORCE_FIRST                                                                     \
    "SELECT @dlock_fb := (SELECT " DLOCK__MYB_BELL_OF_ROW " FROM dlock_lock WHERE name = %s)"
#define DLOCK__MYB_FORCE_LAST "SELECT @dlock_fb, IS_USED_LOCK(@dlock_fb)"
/* After a force-unlock (res: its answer, DLOCK__MYB_FORCE_LAST last): the
 * connection that still holds the row's bell is killed, so that the
 * waiters look at once (a failure is left: they look at their wait's
 * end). */
void dlock__myb_silence(dlock__mystore *p, const dlock__myres *res, int64_t deadline_us);
/* What a waiter's wait (dlock__myb_wait) came to. */
enum dlock__bell_answer {
    DLOCK__BELL_NONE = -1,     /* a live holder rang no bell: poll */
    DLOCK__BELL_END = 0,       /* the wait's end (the take sent again keeps the waiter's row) */
    DLOCK__BELL_RUNG = 1,      /* the holder let go: take */
    DLOCK__BELL_FREE = 2,      /* free and the waiter first in line, or the holder changed */
    DLOCK__BELL_CLAIMED = 3,   /* free, for an older waiter (*ahead of them) */
    DLOCK__BELL_FAILED = 4,    /* not asked, cut off (a cancel), or the server's error: the take
                                  says what is wrong */
    DLOCK__BELL_UNREACHED = 5, /* no connection, or no answer (*failed: the error, said) */
};
/* A waiter (owner: its waiter row's owner) looks at the row and the
 * waiters, and (block: one near the head of the line) waits for the
 * holder's bell within a's wait and a third of its waiter lease; no
 * write, no guard. *left_ms: the holder's lease left (-1 none), *ahead:
 * the older waiters. A look that does not block answers
 * DLOCK__BELL_NONE for a held name. */
int dlock__myb_wait(dlock__mystore *p, dlock__mylock *l, dlock__attempt *a, const char *owner,
                    int block, int64_t *left_ms, long *ahead, int *failed);

/* SQL: the milliseconds left of a row's `expires` (its lease). */
#define DLOCK__MY_MS_LEFT "CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires) / 1000)"

/* For status, after the caller's own read (res): the name's row in the
 * other modes' table, one lock per name (README.md): its fence counter
 * (dlock__my_last_fence takes the larger), and, when the own read found no
 * holder (*owner NULL), its holder: table mode looks at dlock_fence's
 * live lease (a session or row holder), session and row modes at table
 * mode's live holder; found, *owner and *info point into *other, and
 * *lease_ms is its lease left (-1: a session holder whose connection
 * still has the named lock: it holds as long as that connection).
 * DLOCK_OK (free res and *other), or the failure recorded (both freed). */
int dlock__my_other_holder(dlock__mystore *p, dlock__mylock *l, int64_t deadline, dlock__myres *res,
                           dlock__myres *other, const char **owner, const char **info,
                           int64_t *lease_ms);
/* The fence counter status tells: the larger of its own mode's (own, as
 * text; NULL: none) and the other mode's holder's, read by
 * dlock__my_other_holder into other (that holder's fence is kept in its
 * own mode's table: 0 there, a table-mode status of a session or row
 * holder said "last fence: 0"). */
uint64_t dlock__my_last_fence(const char *own, const dlock__myres *other);
/* The grant's request of session and row modes (table.c has its
 * statements): GET_LOCK(N, wait_s), dlock_fence's row written for holder
 * nonce on connection conn (SQL: CONNECTION_ID(), or a number) only when no
 * other holder's lease runs in either table, the row read back, and the
 * GET_LOCK let go: always (release: DLOCK__MY_LET_GO), unless the row is
 * ours now (DLOCK__MY_KEEP_OURS), or unless it is ours or a lease runs in
 * the row (DLOCK__MY_KEEP_PLACE: a session waiter first in line waits that
 * lease out holding the named lock, README.md "Waiting"). NULL: out of
 * memory. */
enum { DLOCK__MY_KEEP_OURS = 0, DLOCK__MY_LET_GO = 1, DLOCK__MY_KEEP_PLACE = 2 };
char *dlock__my_grant_sql(dlock__mystore *p, dlock__mylock *l, const char *wait_s, const char *conn,
                          const char *nonce, const char *token, int release, int insert);
/* The same request on a connection that holds the named lock already
 * (kept by DLOCK__MY_KEEP_PLACE): its first statement sleeps nap_s seconds
 * in the server (a KILL QUERY ends it) instead of taking the named lock,
 * and answers 1 while the connection still holds it. */
char *dlock__my_regrant_sql(dlock__mystore *p, dlock__mylock *l, const char *nap_s,
                            const char *nonce, const char *token);

#endif
