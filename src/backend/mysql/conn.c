/* SPDX-License-Identifier: MIT */
/* conn.c - the MariaDB/MySQL backend's connections: opened with a
 * deadline, pooled while idle, each one a session of the host's renewer,
 * and every request on them bounded by a deadline. libmariadb's blocking
 * calls have no deadline below a second: everything here runs on its
 * non-blocking calls (MYSQL_OPT_NONBLOCK, *_start / *_cont) and poll().
 *
 * A connection is a session (session.h): the renewer keeps it alive by a
 * ping (renew() below: every connection's ping started first, then every
 * answer read, so N connections cost one round trip, not N). A ping that
 * finds the connection closed (KILL, the server restarted, wait_timeout, a
 * broken link) ends its session: every lock under it is reported lost. A
 * ping that finds the connection busy with a wait of its own (an attempt
 * blocked in GET_LOCK: it holds nothing yet) counts as alive, since that
 * request finds a dead connection by itself.
 *
 * The server's own bound on a dead holder is set close to the lease: the
 * session's wait_timeout is 1.5 leases (the renewer pings every third of
 * one), so a frozen or vanished client's connection, and its lock, end in
 * the server within about a lease and a half; TCP keepalive and
 * TCP_USER_TIMEOUT on the client's socket find a dead server as soon. */
#define _GNU_SOURCE
#include "my.h"

#include "../../base/clock.h"
#include "../../base/error.h"
#include "../../base/random.h"
#include "../../base/thread.h"

#include <errmsg.h>
#include <errno.h>
#include <mysqld_error.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define POOL_MAX       8      /* idle connections kept */
#define CANCEL_STEP_US 50000  /* how often a blocked request asks whether it is cancelled */
#define CANCEL_WAIT_US 150000 /* how long a cancelled request waits for its answer */
#define KILLS_MAX      16     /* KILL QUERY threads in flight in the process, at most */

static pthread_once_t library_once = PTHREAD_ONCE_INIT;

static void library_init(void)
{
    (void) mysql_library_init(0, NULL, NULL);
}

/* ---------------------------------------------------------------- helpers */

/* Waits for what a non-blocking call asked (status: MYSQL_WAIT_*) until
 * *deadline, asking cancelled() every 50 ms; then KILL QUERY is sent once
 * (*killed) and *deadline brought to within CANCEL_WAIT_US. The events that
 * came, to pass to *_cont, or -1 when the deadline passed. */
static int step(dlock__mystore *p, dlock__myconn *c, int status, int64_t *deadline,
                int (*cancelled)(void *), void *arg, int *killed, dlock__my_watch *w);

static void kill_unref(struct kill_job *j);

static void conn_free(void *arg)
{
    dlock__myconn *c = arg;
    kill_unref(c->kill);
    if (c->m != NULL)
        mysql_close(c->m);
    free(c->held_lit);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Closes a connection whatever state its request was left in: the socket
 * is shut first, so that mysql_close's goodbye cannot block. */
static void hang_up(MYSQL *m)
{
    int fd = (int) mysql_get_socket(m);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
    mysql_close(m);
}

/* Whether a client error code means the connection is gone. */
static int broken(unsigned err)
{
    return err >= 2000 && err < 3000;
}

void dlock__my_res_free(dlock__myres *res)
{
    for (int i = 0; i < DLOCK__MY_MAX_STMTS; i++) {
        if (res->rows[i] != NULL)
            mysql_free_result(res->rows[i]);
        res->rows[i] = NULL;
    }
}

const char *dlock__my_value(const dlock__myres *res, int i, unsigned col)
{
    if (i >= res->n || res->rows[i] == NULL || mysql_num_fields(res->rows[i]) <= col)
        return NULL;
    mysql_data_seek(res->rows[i], 0);
    MYSQL_ROW row = mysql_fetch_row(res->rows[i]);
    return row != NULL ? row[col] : NULL;
}

int dlock__my_fail(dlock__mystore *p, const dlock__myres *res, const char *what)
{
    /* (a server that logs statements refuses what READ COMMITTED writes:
     * said in the user's terms, with what to change) */
    if (res->err == ER_BINLOG_STMT_MODE_AND_ROW_ENGINE)
        return dlock__fail(DLOCK_ESERVER,
                           "%s: %s: the server's binlog_format is STATEMENT, and it refuses "
                           "InnoDB writes in a READ COMMITTED transaction (error %u), which "
                           "this needs (table mode's read-write lock and semaphore, row mode; "
                           "mutexes in table or session mode work): set binlog_format to MIXED "
                           "(MariaDB's default) or ROW",
                           p->label, what, res->err);
    return dlock__fail(DLOCK_ESERVER, "%s: %s: %s (error %u)", p->label, what, res->msg, res->err);
}

/* KILL QUERY from a connection of its own, on a thread of its own that
 * the cancelled request does not wait for. libmariadb's blocking connect
 * and query have no bound below its timeouts (2 s each here): with the
 * server paused, or the link silent or dropping bytes, the cancelled wait
 * returned only when the fault ended (the fault suite's `stall` on
 * mariadb, seed 10: a wait of 2409 ms took 4859 ms). The request waits
 * CANCEL_WAIT_US more for its answer (a healthy server ends the wait at
 * once) and then gives up and closes its connection; a connection whose
 * KILL may still arrive is not used again, since the KILL would end
 * whatever it ran next. The job is shared by the thread and the
 * connection, freed by whichever lets go last; it copies what it needs of
 * the store, which may close before the thread ends. */
typedef struct kill_job {
    char host[200], user[128], password[256], dbname[128];
    unsigned port;
    unsigned long id; /* the connection whose query is to end */
    _Atomic int done; /* the server has it (or it failed) */
    _Atomic int refs;
} kill_job;

static _Atomic int kills_running;

static void kill_unref(kill_job *j)
{
    if (j != NULL && atomic_fetch_sub(&j->refs, 1) == 1)
        free(j);
}

static void *kill_main(void *arg)
{
    kill_job *j = arg;
    unsigned int secs = 2;
    char sql[64];
    (void) mysql_thread_init(); /* a no-op in Connector/C 3; libmysqlclient wants it */
    MYSQL *m = mysql_init(NULL);
    if (m != NULL) {
        mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &secs);
        mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &secs);
        mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &secs);
        snprintf(sql, sizeof sql, "KILL QUERY %lu", j->id);
        /* ER_NO_SUCH_THREAD, a failure: the request ends by its bound anyway */
        if (mysql_real_connect(m, j->host, j->user, j->password, j->dbname, j->port, NULL, 0) !=
            NULL)
            (void) mysql_query(m, sql);
        mysql_close(m);
    }
    mysql_thread_end();
    atomic_store(&j->done, 1);
    atomic_fetch_sub(&kills_running, 1);
    kill_unref(j);
    return NULL;
}

/* Sends KILL QUERY for c's request without waiting for it. With no thread
 * to spare, none is sent: the request gives up within CANCEL_WAIT_US all
 * the same, and its connection is closed. */
static void send_kill(dlock__mystore *p, dlock__myconn *c)
{
    if (atomic_fetch_add(&kills_running, 1) >= KILLS_MAX) {
        atomic_fetch_sub(&kills_running, 1);
        return;
    }
    kill_job *j = calloc(1, sizeof *j);
    pthread_t t;
    if (j == NULL) {
        atomic_fetch_sub(&kills_running, 1);
        return;
    }
    memcpy(j->host, p->host, sizeof j->host);
    memcpy(j->user, p->user, sizeof j->user);
    memcpy(j->password, p->password, sizeof j->password);
    memcpy(j->dbname, p->dbname, sizeof j->dbname);
    j->port = p->port;
    j->id = c->id;
    atomic_store(&j->refs, 2);
    if (dlock__thread_start(&t, kill_main, j) != 0) {
        free(j);
        atomic_fetch_sub(&kills_running, 1);
        return;
    }
    pthread_detach(t);
    kill_unref(c->kill); /* an earlier one's, done or not */
    c->kill = j;
}

int dlock__my_kill_in_flight(dlock__myconn *c)
{
    if (c->kill == NULL)
        return 0;
    if (!atomic_load(&c->kill->done))
        return 1;
    kill_unref(c->kill);
    c->kill = NULL;
    return 0;
}

/* Asks the server on another connection (one holding nothing: it is
 * closed when it gets no answer) whether it still answers, while a
 * request blocks there: DLOCK_OK (it answered, or the question could not
 * be asked for a reason that is not silence, or a cancel came meanwhile:
 * the caller's step sees it), or DLOCK_EUNREACHABLE (no answer by bound). */
static int probe(dlock__mystore *p, dlock__my_watch *w, int64_t bound, int (*cancelled)(void *),
                 void *arg)
{
    dlock__myconn *o;
    dlock__myres res;
    w->asked_us = dlock__now_us();
    int rc = dlock__my_get(p, bound, &o);
    if (rc != DLOCK_OK)
        return rc == DLOCK_EUNREACHABLE ? rc : DLOCK_OK;
    rc = dlock__my_exec(p, o, "SELECT 1", bound, cancelled, arg, &res);
    int cut_short = res.killed; /* (cancelled meanwhile: not silence) */
    if (rc == DLOCK_OK && res.err == 0) {
        dlock__my_res_free(&res);
        dlock__my_put(p, o);
        return DLOCK_OK;
    }
    dlock__my_res_free(&res);
    dlock__my_discard(p, o, "closed: a question to the server got no answer");
    return cut_short ? DLOCK_OK : DLOCK_EUNREACHABLE;
}

static int step(dlock__mystore *p, dlock__myconn *c, int status, int64_t *deadline,
                int (*cancelled)(void *), void *arg, int *killed, dlock__my_watch *w)
{
    int fd = (int) mysql_get_socket(c->m);
    int64_t lib_until = -1;
    if (status & MYSQL_WAIT_TIMEOUT)
        lib_until = dlock__now_us() + (int64_t) mysql_get_timeout_value_ms(c->m) * 1000;
    for (;;) {
        int64_t now = dlock__now_us();
        if (now >= *deadline)
            return -1;
        if (killed != NULL && !*killed && cancelled != NULL && cancelled(arg)) {
            send_kill(p, c);
            *killed = 1;
            /* a healthy server answers a killed wait at once; one that
             * does not (paused, cut off) is given up on soon: the caller
             * wanted out, and the connection is then closed */
            if (*deadline > now + CANCEL_WAIT_US)
                *deadline = now + CANCEL_WAIT_US;
        }
        /* (a request whose own bound is as near finds silence as soon) */
        int watching = w != NULL && killed != NULL && !*killed;
        if (watching && now >= w->next_us && *deadline - now > w->bound_us) {
            int silent = probe(p, w, now + w->bound_us, cancelled, arg);
            w->next_us = dlock__now_us() + w->every_us;
            if (silent == DLOCK_EUNREACHABLE) {
                /* the server's wait is ended too, if the KILL gets there */
                send_kill(p, c);
                w->silent = 1;
                return -1;
            }
            continue; /* (asks cancelled() again) */
        }
        if (lib_until >= 0 && now >= lib_until)
            return MYSQL_WAIT_TIMEOUT;
        int64_t until = *deadline;
        if (cancelled != NULL && killed != NULL && !*killed && until - now > CANCEL_STEP_US)
            until = now + CANCEL_STEP_US;
        if (watching && *deadline - now > w->bound_us && until > w->next_us)
            until = w->next_us;
        if (lib_until >= 0 && lib_until < until)
            until = lib_until;
        struct pollfd pfd = {.fd = fd, .events = 0};
        if (status & MYSQL_WAIT_READ)
            pfd.events |= POLLIN;
        if (status & MYSQL_WAIT_WRITE)
            pfd.events |= POLLOUT;
        if (status & MYSQL_WAIT_EXCEPT)
            pfd.events |= POLLPRI;
        int n = poll(&pfd, 1, (int) ((until - now + 999) / 1000));
        if (n > 0) {
            int ev = 0;
            if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
                ev |= MYSQL_WAIT_READ;
            if (pfd.revents & (POLLOUT | POLLHUP | POLLERR))
                ev |= MYSQL_WAIT_WRITE;
            if (pfd.revents & POLLPRI)
                ev |= MYSQL_WAIT_EXCEPT;
            ev &= status | MYSQL_WAIT_READ | MYSQL_WAIT_WRITE;
            return ev != 0 ? ev : status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE);
        }
        if (n < 0 && errno != EINTR)
            return status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE); /* let libmariadb fail */
    }
}

/* ---------------------------------------------------------------- requests */

/* Finishes the renewal's request left out on c (late_status) until
 * deadline: DLOCK_OK once it is answered (whatever it said: the next
 * request tells), DLOCK_EUNREACHABLE if it is not by then, or if the
 * connection broke. A connection stays open through a silence shorter
 * than the lease: it is the lock (README.md). */
static int settle(dlock__mystore *p, dlock__myconn *c, int64_t deadline)
{
    int err = 0, st = c->late_status;
    while (st != 0) {
        int ev = step(p, c, st, &deadline, NULL, NULL, NULL, NULL);
        if (ev < 0) {
            c->late_status = st;
            return dlock__fail(DLOCK_EUNREACHABLE,
                               "%s: no answer yet to a renewal sent during a silence", p->label);
        }
        st = c->late_update ? mysql_real_query_cont(&err, c->m, ev)
                            : mysql_ping_cont(&err, c->m, ev);
    }
    c->late_status = 0;
    if (err != 0 && broken(mysql_errno(c->m)))
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection lost: %s (error %u)", p->label,
                           mysql_error(c->m), mysql_errno(c->m));
    return DLOCK_OK;
}

int dlock__my_exec(dlock__mystore *p, dlock__myconn *c, const char *sql, int64_t deadline_us,
                   int (*cancelled)(void *), void *arg, dlock__myres *res)
{
    return dlock__my_exec_watched(p, c, sql, deadline_us, cancelled, arg, NULL, res);
}

int dlock__my_exec_watched(dlock__mystore *p, dlock__myconn *c, const char *sql,
                           int64_t deadline_us, int (*cancelled)(void *), void *arg,
                           dlock__my_watch *w, dlock__myres *res)
{
    int err = 0, ev;
    memset(res, 0, sizeof *res);
    if (c->m == NULL)
        return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection closed", p->label);
    if (c->late_status != 0 && settle(p, c, deadline_us) != DLOCK_OK)
        return DLOCK_EUNREACHABLE;
    if (w != NULL) {
        w->asked_us = dlock__now_us();
        w->next_us = w->asked_us + w->every_us;
        w->silent = 0;
    }
    int st = mysql_real_query_start(&err, c->m, sql, (unsigned long) strlen(sql));
    while (st != 0) {
        if ((ev = step(p, c, st, &deadline_us, cancelled, arg, &res->killed, w)) < 0)
            goto late;
        st = mysql_real_query_cont(&err, c->m, ev);
    }
    for (;;) {
        if (err != 0) {
            res->err = mysql_errno(c->m);
            snprintf(res->msg, sizeof res->msg, "%s", mysql_error(c->m));
            if (broken(res->err) || res->err == ER_CONNECTION_KILLED || res->err == 0)
                goto gone;
            return DLOCK_OK; /* a statement failed: the later ones did not run */
        }
        if (res->n >= DLOCK__MY_MAX_STMTS)
            return dlock__fail(DLOCK_EPROTO, "%s: too many results", p->label);
        if (mysql_field_count(c->m) > 0) {
            MYSQL_RES *rows = NULL;
            st = mysql_store_result_start(&rows, c->m);
            while (st != 0) {
                if ((ev = step(p, c, st, &deadline_us, NULL, NULL, NULL, NULL)) < 0)
                    goto late;
                st = mysql_store_result_cont(&rows, c->m, ev);
            }
            if (rows == NULL) {
                err = 1;
                continue;
            }
            res->rows[res->n] = rows;
        } else {
            res->affected[res->n] = (uint64_t) mysql_affected_rows(c->m);
        }
        res->n++;
        if (!mysql_more_results(c->m))
            break;
        st = mysql_next_result_start(&err, c->m);
        while (st != 0) {
            if ((ev = step(p, c, st, &deadline_us, cancelled, arg, &res->killed, w)) < 0)
                goto late;
            st = mysql_next_result_cont(&err, c->m, ev);
        }
        if (err < 0)
            break; /* no more */
    }
    atomic_store(&p->reached, 1);
    return DLOCK_OK;
late:
    dlock__my_res_free(res);
    if (w != NULL && w->silent)
        return dlock__fail(DLOCK_EUNREACHABLE,
                           "%s: no answer to a question within %lld ms while a wait was blocked "
                           "in the server",
                           p->label, (long long) (w->bound_us / 1000));
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: %s", p->label,
                       res->killed ? "no answer to a cancelled (killed) request"
                                   : "no answer within the request's bound");
gone:
    dlock__my_res_free(res);
    return dlock__fail(DLOCK_EUNREACHABLE, "%s: connection lost: %s (error %u)", p->label, res->msg,
                       res->err);
}

int dlock__my_operate(dlock__mystore *p, const char *sql, int64_t deadline, dlock__myres *res,
                      const char *what)
{
    dlock__myconn *c;
    int64_t cap = dlock__now_us() + p->timeout_ms * 1000;
    if (deadline > cap)
        deadline = cap;
    int rc = dlock__my_get(p, deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__my_exec(p, c, sql, deadline, NULL, NULL, res);
    if (rc != DLOCK_OK) {
        dlock__my_discard(p, c, "closed: a request got no answer");
        return rc;
    }
    dlock__my_put(p, c);
    if (res->err != 0) {
        rc = dlock__my_fail(p, res, what);
        dlock__my_res_free(res);
    }
    return rc;
}

/* ---------------------------------------------------------------- connecting */

/* The server's bound on this connection (wait_timeout, 1.5 leases),
 * autocommit on (every statement of table and session mode commits by
 * itself, and row mode begins its transactions itself: a server whose
 * init_connect turned it off would keep each client's first statement open,
 * its row locks held and its writes unseen; test_mysql_lock
 * autocommit_off_by_server), and (session mode) dlock's table if missing
 * (README.md: schema), once per store; table mode makes its own table
 * (table.c). */
static int set_up(dlock__mystore *p, dlock__myconn *c, int64_t deadline)
{
    static const char schema[] = "; " DLOCK__MY_FENCE_SCHEMA;
    static const char row_schema[] = "; " DLOCK__MY_FENCE_SCHEMA "; " DLOCK__MY_ROW_SCHEMA;
    char sql[sizeof row_schema + 200];
    dlock__myres res;
    pthread_mutex_lock(&p->mu);
    int ready = p->schema_ready || p->table;
    pthread_mutex_unlock(&p->mu);
    int64_t wait_s = (p->lease_ms * 3 / 2 + 999) / 1000;
    /* (table mode's shared holds run their transactions under READ
     * COMMITTED, each set for its own: ../sqltable, DLOCK__SQLT_BEGIN) */
    snprintf(sql, sizeof sql,
             "SET SESSION wait_timeout = %lld, SESSION interactive_timeout = %lld, SESSION "
             "autocommit = 1%s",
             (long long) (wait_s > 1 ? wait_s : 1), (long long) (wait_s > 1 ? wait_s : 1),
             ready    ? ""
             : p->row ? row_schema
                      : schema);
    int rc = dlock__my_exec(p, c, sql, deadline, NULL, NULL, &res);
    if (rc == DLOCK_OK && res.err != 0)
        rc = dlock__my_fail(p, &res,
                            ready ? "setting the session's wait_timeout"
                                  : "creating dlock's tables (dlock_fence, dlock_row)");
    dlock__my_res_free(&res);
    if (rc == DLOCK_OK && !ready) {
        pthread_mutex_lock(&p->mu);
        p->schema_ready = 1;
        pthread_mutex_unlock(&p->mu);
    }
    return rc;
}

static void keepalive(dlock__mystore *p, int fd)
{
    int on = 1, idle = (int) (p->lease_ms / 3000), intvl = (int) (p->lease_ms / 9000), cnt = 3;
    unsigned int user_timeout = (unsigned int) p->lease_ms;
    if (idle < 1)
        idle = 1;
    if (intvl < 1)
        intvl = 1;
    (void) setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    (void) setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

/* What a user may do of a refused connection, after the server's words:
 * MariaDB refuses a database that does not exist with 1044 (access denied
 * to it) to a user without rights to see it, and with 1049 to one who has. */
static const char *refusal_hint(unsigned err)
{
    switch (err) {
    case 1044: /* ER_DBACCESS_DENIED_ERROR */
        return " (does the database in the URL's path exist? MariaDB says this of one that does "
               "not, too; if it does, the user needs rights on it: GRANT ... ON db.* TO user)";
    case 1049: /* ER_BAD_DB_ERROR */
        return " (create the database, or name one that exists in the URL's path)";
    case 1045: /* ER_ACCESS_DENIED_ERROR */
        return " (a wrong password, or a user the server does not know from this host)";
    }
    return "";
}

/* A new connection, set up, its session started; its mutex held. */
static int connect_one(dlock__mystore *p, int64_t deadline, dlock__myconn **out)
{
    int64_t sent = dlock__now_us();
    int64_t until = sent + p->connect_ms * 1000;
    int rc, ev;
    MYSQL *ret = NULL;

    *out = NULL;
    pthread_once(&library_once, library_init);
    if (until > deadline)
        until = deadline;
    dlock__myconn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->m = mysql_init(NULL);
    if (c->m == NULL) {
        conn_free(c);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    unsigned int secs = (unsigned int) ((p->connect_ms + 999) / 1000);
    my_bool off = 0;
    mysql_options(c->m, MYSQL_OPT_NONBLOCK, 0);
    mysql_options(c->m, MYSQL_OPT_CONNECT_TIMEOUT, &secs);
    mysql_options(c->m, MYSQL_OPT_RECONNECT, &off); /* a new connection would hold nothing */
    mysql_options(c->m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(c->m, MYSQL_OPT_LOCAL_INFILE, &off);
    int st = mysql_real_connect_start(&ret, c->m, p->host, p->user, p->password,
                                      p->dbname[0] ? p->dbname : NULL, p->port, NULL,
                                      CLIENT_MULTI_STATEMENTS | CLIENT_FOUND_ROWS);
    while (st != 0) {
        if ((ev = step(p, c, st, &until, NULL, NULL, NULL, NULL)) < 0) {
            struct sockaddr_storage peer;
            socklen_t plen = sizeof peer;
            int connected =
                (st & MYSQL_WAIT_READ) &&
                getpeername((int) mysql_get_socket(c->m), (struct sockaddr *) &peer, &plen) == 0;
            hang_up(c->m);
            c->m = NULL;
            if (connected)
                /* a MySQL server greets at once: silence is another
                 * service's port, waiting for its own first words */
                rc = dlock__fail(DLOCK_EUNREACHABLE,
                                 "%s: %s:%u accepted the connection, but sent no MySQL greeting "
                                 "within %lld ms: another service's port (Redis, etcd, ZooKeeper "
                                 "and PostgreSQL wait so), or a server that hangs",
                                 p->label, p->host, p->port != 0 ? p->port : 3306u,
                                 (long long) ((dlock__now_us() - sent) / 1000));
            else
                rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: no connection within %lld ms", p->label,
                                 (long long) ((dlock__now_us() - sent) / 1000));
            goto fail;
        }
        st = mysql_real_connect_cont(&ret, c->m, ev);
    }
    if (ret == NULL) {
        unsigned err = mysql_errno(c->m);
        /* The server answered and refused (a password, a database that is
         * not there, too many connections): not an outage. */
        if (!broken(err)) {
            atomic_store(&p->reached, 1);
            rc =
                dlock__fail(DLOCK_ESERVER, "%s: the server refused the connection: %s (error %u)%s",
                            p->label, mysql_error(c->m), err, refusal_hint(err));
        } else {
            /* libmariadb ends its message with the errno in parentheses:
             * say it in words too */
            const char *msg = mysql_error(c->m), *paren = strrchr(msg, '(');
            int sys = paren != NULL ? atoi(paren + 1) : 0;
            rc = dlock__fail(DLOCK_EUNREACHABLE, "%s: cannot connect: %s%s%s", p->label, msg,
                             sys != 0 ? ": " : "",
                             sys > 0   ? strerror(sys)
                             : sys < 0 ? gai_strerror(sys)
                                       : "");
        }
        goto fail;
    }
    atomic_store(&p->reached, 1);
    c->id = mysql_thread_id(c->m);
    if (dlock__random_hex(c->nonce, 8) != 0) {
        rc = dlock__fail(DLOCK_ENOMEM, "no random bytes for a connection's id");
        goto fail;
    }
    keepalive(p, (int) mysql_get_socket(c->m));
    rc = set_up(p, c, deadline);
    if (rc != DLOCK_OK)
        goto fail;
    pthread_mutex_lock(&c->mu);
    rc = dlock__session_start(p->base.host.sessions, p->lease_ms, sent, c, conn_free, &c->session);
    if (rc != DLOCK_OK) {
        pthread_mutex_unlock(&c->mu);
        goto fail;
    }
    pthread_mutex_lock(&p->mu);
    c->next_all = p->all;
    if (p->all != NULL)
        p->all->prev_all = c;
    p->all = c;
    pthread_mutex_unlock(&p->mu);
    dlock__sockwatch_add(p->watch, (int) mysql_get_socket(c->m), c);
    *out = c;
    return DLOCK_OK;
fail:
    if (c->m != NULL) {
        hang_up(c->m);
        c->m = NULL;
    }
    conn_free(c);
    return rc;
}

/* ---------------------------------------------------------------- the pool */

/* Whether an idle connection still looks open: a passive look at its
 * socket (the server sends nothing to an idle connection unless it closes
 * it: KILL, wait_timeout, a shutdown). */
static int still_open(dlock__myconn *c)
{
    if (c->m == NULL || atomic_load(&c->lost) || c->late_status != 0)
        return 0;
    struct pollfd pfd = {.fd = (int) mysql_get_socket(c->m), .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

/* A connection taken from the store's lists is referred to only by the
 * store's reference to its session until its mutex is held: the renewer
 * may close it meanwhile (a ping that found it dead, or a session the core
 * gave up on) and drop that reference, which frees it. So it is taken with
 * a reference of the taker's own, under the lists' mutex, given back once
 * the connection is known to be open (the store's reference then still
 * holds it) or after it is closed. (Without it, a thread that took an
 * idle connection locked and read freed memory: the fault suite's session
 * runs aborted in glibc's "malloc(): unsorted double linked list
 * corrupted", the mutex being the first bytes of the freed block.) */
static dlock__myconn *take_listed(dlock__mystore *p, dlock__myconn *c)
{
    if (c != NULL)
        dlock__session_ref(c->session);
    pthread_mutex_unlock(&p->mu);
    if (c != NULL)
        pthread_mutex_lock(&c->mu);
    return c;
}

int dlock__my_get(dlock__mystore *p, int64_t deadline_us, dlock__myconn **out)
{
    for (;;) {
        pthread_mutex_lock(&p->mu);
        dlock__myconn *c = p->idle;
        if (c != NULL) {
            p->idle = c->next_idle;
            p->nidle--;
            c->in_pool = 0;
            c->next_idle = NULL;
        }
        if (take_listed(p, c) == NULL)
            return connect_one(p, deadline_us, out);
        dlock__session *mine = c->session;
        if (still_open(c)) {
            dlock__session_unref(mine); /* the store's still holds it */
            *out = c;
            return DLOCK_OK;
        }
        dlock__my_discard(p, c, "its connection was closed");
        dlock__session_unref(mine);
    }
}

void dlock__my_put(dlock__mystore *p, dlock__myconn *c)
{
    atomic_store(&c->holding, 0);
    free(c->held_lit);
    c->held_lit = NULL;
    if (c->m == NULL || atomic_load(&c->lost)) {
        dlock__my_discard(p, c, "its connection was closed");
        return;
    }
    if (dlock__my_kill_in_flight(c)) {
        dlock__my_discard(p, c, "closed: a KILL QUERY sent for its wait may still arrive");
        return;
    }
    pthread_mutex_lock(&p->mu);
    int keep = p->nidle < POOL_MAX;
    if (keep) {
        c->next_idle = p->idle;
        p->idle = c;
        p->nidle++;
        c->in_pool = 1;
    }
    pthread_mutex_unlock(&p->mu);
    if (keep)
        pthread_mutex_unlock(&c->mu);
    else
        dlock__my_discard(p, c, "closed: the pool has enough idle connections");
}

void dlock__my_discard(dlock__mystore *p, dlock__myconn *c, const char *why)
{
    pthread_mutex_lock(&p->mu);
    if (c->in_pool) {
        dlock__myconn **pp = &p->idle;
        while (*pp != NULL && *pp != c)
            pp = &(*pp)->next_idle;
        if (*pp == c)
            *pp = c->next_idle;
        p->nidle--;
        c->in_pool = 0;
    }
    int listed = c->m != NULL;
    if (listed) {
        if (c->prev_all != NULL)
            c->prev_all->next_all = c->next_all;
        else if (p->all == c)
            p->all = c->next_all;
        if (c->next_all != NULL)
            c->next_all->prev_all = c->prev_all;
        c->prev_all = c->next_all = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    if (listed)
        dlock__sockwatch_remove(p->watch, c); /* before its socket closes */
    if (c->m != NULL) {
        hang_up(c->m);
        c->m = NULL;
    }
    dlock__session *s = c->session;
    pthread_mutex_unlock(&c->mu);
    if (listed)
        dlock__session_end(s, why); /* the store's reference: c may be freed */
}

enum dlock__sockwatch_verdict dlock__my_watch_check(void *arg, void *item)
{
    dlock__mystore *p = arg;
    dlock__myconn *c = item;
    char why[600], b;

    if (pthread_mutex_trylock(&c->mu) != 0)
        return DLOCK__SW_LATER; /* a request reads it */
    if (c->m == NULL || c->late_status != 0 || atomic_load(&c->lost)) {
        pthread_mutex_unlock(&c->mu); /* a late answer is the renewal's to read */
        return DLOCK__SW_LATER;
    }
    /* a look that reads nothing: the end of the stream, or an error, is a
     * close; bytes (an error packet, TLS records) are a request's to read */
    ssize_t n = recv((int) mysql_get_socket(c->m), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) {
        pthread_mutex_unlock(&c->mu);
        return n > 0 ? DLOCK__SW_LATER : DLOCK__SW_KEEP;
    }
    snprintf(why, sizeof why, "%s: the server closed the connection (%s)", p->label,
             n == 0 ? "end of stream: KILL, a restart or wait_timeout" : strerror(errno));
    dlock__my_discard(p, c, why);
    return DLOCK__SW_GONE;
}

void dlock__my_close_all(dlock__mystore *p, int64_t deadline_us)
{
    for (;;) {
        pthread_mutex_lock(&p->mu);
        dlock__myconn *c = take_listed(p, p->all);
        if (c == NULL)
            return;
        dlock__session *mine = c->session;
        if (c->held_lit != NULL && c->m != NULL && !atomic_load(&c->lost) &&
            dlock__now_us() < deadline_us) {
            /* a detached lock: its row's lease ends with it, so that the
             * next holder does not wait for it (closing the connection
             * frees the named lock) */
            char sql[1200];
            dlock__myres res;
            snprintf(sql, sizeof sql,
                     "UPDATE dlock_fence SET expires = UTC_TIMESTAMP(6) WHERE name = %s AND holder "
                     "= '%s'%s",
                     c->held_lit, c->nonce, p->row ? "; COMMIT" : "");
            if (dlock__my_exec(p, c, sql, deadline_us, NULL, NULL, &res) == DLOCK_OK)
                dlock__my_res_free(&res);
        }
        dlock__my_discard(p, c, "the client closed");
        dlock__session_unref(mine);
    }
}

void dlock__my_session_lost(dlock__store *s, dlock__session *session, int64_t deadline_us)
{
    dlock__myconn *c = dlock__session_data(session);
    (void) deadline_us;
    atomic_store(&c->lost, 1);
    /* busy: its user finds it lost when done, and closes it */
    if (pthread_mutex_trylock(&c->mu) == 0) {
        if (c->m != NULL)
            dlock__my_discard(MYSTORE(s), c, "its session was lost");
        else
            pthread_mutex_unlock(&c->mu);
    }
}

/* ---------------------------------------------------------------- renewal */

enum ping { PING_NONE, PING_SENT, PING_ALIVE, PING_BUSY_WAITING, PING_BUSY, PING_DEAD };

struct pinged {
    dlock__myconn *c;
    enum ping state;
    int status; /* what the ping waits for (MYSQL_WAIT_*) */
    int update; /* an UPDATE of its row's lease, not a ping */
};

static dlock__myconn *conn_of(const dlock__renewal *it)
{
    return it->session != NULL ? dlock__session_data(it->session) : NULL;
}

static void ping_done(dlock__mystore *p, struct pinged *pg, int err)
{
    char why[400];
    if (err == 0 && pg->update && mysql_affected_rows(pg->c->m) != 1) {
        pg->state = PING_DEAD;
        snprintf(why, sizeof why, "%s: the lock's row is not its holder's any more", p->label);
        dlock__my_discard(p, pg->c, why);
        return;
    }
    if (err == 0) {
        pg->state = PING_ALIVE;
        pthread_mutex_unlock(&pg->c->mu);
        return;
    }
    pg->state = PING_DEAD;
    snprintf(why, sizeof why, "%s: connection lost: %s (error %u)", p->label, mysql_error(pg->c->m),
             mysql_errno(pg->c->m));
    dlock__my_discard(p, pg->c, why);
}

int dlock__my_renew(dlock__store *s, dlock__renewal *items, size_t n, int64_t deadline_us)
{
    dlock__mystore *p = MYSTORE(s);
    struct pinged *ps = calloc(n > 0 ? n : 1, sizeof *ps);
    struct pollfd *fds = calloc(n > 0 ? n : 1, sizeof *fds);
    size_t np = 0;
    int err;

    if (ps == NULL || fds == NULL) {
        free(ps);
        free(fds);
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    /* every connection once: its ping started */
    for (size_t i = 0; i < n; i++) {
        dlock__myconn *c = conn_of(&items[i]);
        size_t j = 0;
        while (j < np && ps[j].c != c)
            j++;
        if (c == NULL || j < np)
            continue;
        ps[np].c = c;
        if (pthread_mutex_trylock(&c->mu) != 0) {
            /* in use: a wait blocked in the server holds nothing, and finds
             * a dead connection by itself; a holder's call is short */
            ps[np++].state = atomic_load(&c->holding) ? PING_BUSY : PING_BUSY_WAITING;
            continue;
        }
        if (c->m == NULL || atomic_load(&c->lost)) {
            pthread_mutex_unlock(&c->mu);
            ps[np++].state = PING_DEAD;
            continue;
        }
        /* the last renewal's request still out: what came of it meanwhile
         * (read, not waited for: 1 ms); answered, the connection is asked
         * again now (counted from this batch's send) */
        if (c->late_status != 0 && settle(p, c, dlock__now_us() + 1000) != DLOCK_OK) {
            if (c->late_status != 0) {
                pthread_mutex_unlock(&c->mu);
                ps[np++].state = PING_BUSY;
            } else {
                ps[np].state = PING_DEAD;
                dlock__my_discard(p, c, dlock_errmsg());
                np++;
            }
            continue;
        }
        err = 0;
        /* a connection holding a lock renews its row's lease (README.md);
         * another one is only pinged (row mode: the holder's connection is
         * inside its transaction, and row.c renews the leases) */
        if (c->held_lit != NULL && !p->row) {
            char sql[1200];
            snprintf(sql, sizeof sql,
                     "UPDATE dlock_fence SET expires = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND "
                     "WHERE name = %s AND holder = '%s'",
                     p->lease_us, c->held_lit, c->nonce);
            ps[np].update = 1;
            ps[np].status = mysql_real_query_start(&err, c->m, sql, (unsigned long) strlen(sql));
        } else {
            ps[np].status = mysql_ping_start(&err, c->m);
        }
        ps[np].state = PING_SENT;
        if (ps[np].status == 0)
            ping_done(p, &ps[np], err);
        np++;
    }
    /* then every answer */
    for (;;) {
        size_t nf = 0;
        for (size_t j = 0; j < np; j++) {
            if (ps[j].state != PING_SENT)
                continue;
            fds[nf].fd = (int) mysql_get_socket(ps[j].c->m);
            fds[nf].events = (short) (((ps[j].status & MYSQL_WAIT_READ) ? POLLIN : 0) |
                                      ((ps[j].status & MYSQL_WAIT_WRITE) ? POLLOUT : 0));
            fds[nf].revents = 0;
            nf++;
        }
        int64_t left = deadline_us - dlock__now_us();
        if (nf == 0 || left <= 0)
            break;
        int ready = poll(fds, nf, (int) ((left + 999) / 1000));
        if (ready < 0 && errno != EINTR)
            break;
        size_t f = 0;
        for (size_t j = 0; j < np; j++) {
            if (ps[j].state != PING_SENT)
                continue;
            short rev = fds[f++].revents;
            if (rev == 0)
                continue;
            int ev = ((rev & (POLLIN | POLLHUP | POLLERR)) ? MYSQL_WAIT_READ : 0) |
                     ((rev & (POLLOUT | POLLHUP | POLLERR)) ? MYSQL_WAIT_WRITE : 0);
            err = 0;
            ev = ev & ps[j].status ? ev & ps[j].status : ps[j].status;
            ps[j].status = ps[j].update ? mysql_real_query_cont(&err, ps[j].c->m, ev)
                                        : mysql_ping_cont(&err, ps[j].c->m, ev);
            if (ps[j].status == 0)
                ping_done(p, &ps[j], err);
        }
    }
    /* a ping still out: kept, its answer read before the connection's
     * next request (settle), so that a server silent for less than the
     * lease costs no lock; the core gives the connection up when its
     * validity ends */
    for (size_t j = 0; j < np; j++) {
        if (ps[j].state == PING_SENT) {
            ps[j].state = PING_BUSY;
            ps[j].c->late_status = ps[j].status;
            ps[j].c->late_update = ps[j].update;
            pthread_mutex_unlock(&ps[j].c->mu);
        }
    }
    for (size_t i = 0; i < n; i++) {
        dlock__myconn *c = conn_of(&items[i]);
        enum ping st = PING_DEAD;
        for (size_t j = 0; j < np; j++) {
            if (ps[j].c == c)
                st = ps[j].state;
        }
        items[i].result = st == PING_ALIVE || st == PING_BUSY_WAITING ? DLOCK__RENEW_OK
                          : st == PING_DEAD                           ? DLOCK__RENEW_GONE
                                                                      : DLOCK__RENEW_FAILED;
    }
    free(ps);
    free(fds);
    return DLOCK_OK;
}
