/* SPDX-License-Identifier: MIT */
/* fenced_update.c - dlock's fencing token checked by the database, the
 * pattern of docs/fencing-sql.md: the protected row keeps the fence of the
 * last holder that wrote it, and each write is an UPDATE conditional on
 * `fence < ?`.
 *
 *   build/bin/fenced_update mysql://user:pass@host:port/db [LOCK_URL]
 *
 * The data lives in the MariaDB/MySQL database of the first URL; the lock
 * at LOCK_URL (any store; default: the same MariaDB). Holder A takes the
 * lock and adds 10 to an account with a fenced write; its lock ends and
 * holder B takes it (a larger fence) and adds 5. Then A's late write
 * arrives, as from a holder paused past its lease: it changes 0 rows, and A
 * is told its fence was refused. On a store with fixed leases A's lock ends
 * as a paused holder's does, its 300 ms lease running out while it waits;
 * on the others (MariaDB's GET_LOCK lives with its connection) by a
 * release. Exits 0 when the balance is 15 and the late write was refused;
 * 1 when not; 2 on a set-up error. */
#include <dlock.h>

#include <mysql.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A mysql:// URL's parts. */
struct db_url {
    char user[128], pass[128], host[128], db[128];
    unsigned port;
};

static int parse_db_url(const char *url, struct db_url *u)
{
    /* mysql://user:pass@host:port/db, the form of the dlock URL */
    int end = 0;
    if (sscanf(url, "mysql://%127[^:@/]:%127[^@/]@%127[^:/]:%u/%127[A-Za-z0-9_]%n", u->user,
               u->pass, u->host, &u->port, u->db, &end) != 5 ||
        url[end] != '\0') {
        fprintf(stderr, "fenced_update: want mysql://user:pass@host:port/db, not %s\n", url);
        return -1;
    }
    return 0;
}

static int run_sql(MYSQL *db, const char *sql)
{
    if (mysql_query(db, sql) != 0) {
        fprintf(stderr, "fenced_update: %s: %s\n", sql, mysql_error(db));
        return -1;
    }
    return 0;
}

/* The fenced write: adds amount to account 1 if fence is larger than the
 * row's, and records it. Returns the rows changed (1, or 0 for a stale
 * fence) or -1 on an error. The numbers are formatted, not strings: no
 * quoting is needed. */
static long long fenced_add(MYSQL *db, uint64_t fence, int amount)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE fenced_account SET balance = balance + %d, fence = %" PRIu64
             " WHERE id = 1 AND fence < %" PRIu64,
             amount, fence, fence);
    if (run_sql(db, sql) != 0)
        return -1;
    return (long long) mysql_affected_rows(db);
}

static long long balance(MYSQL *db)
{
    long long value = -1;
    if (run_sql(db, "SELECT balance FROM fenced_account WHERE id = 1") != 0)
        return -1;
    MYSQL_RES *res = mysql_store_result(db);
    MYSQL_ROW row = res != NULL ? mysql_fetch_row(res) : NULL;
    if (row != NULL && row[0] != NULL)
        value = strtoll(row[0], NULL, 10);
    mysql_free_result(res);
    return value;
}

/* Takes the lock with handle l (a fixed lease of lease_ms, or renewed
 * when 0), prints its fence, and makes its write. */
static long long take_and_write(dlock_lock *l, const char *who, int64_t lease_ms, MYSQL *db,
                                int amount)
{
    int rc = lease_ms > 0 ? dlock_acquire_for(l, 10000, lease_ms) : dlock_acquire(l, 10000);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "fenced_update: %s: %s\n", who, dlock_errmsg());
        return -1;
    }
    long long changed = fenced_add(db, dlock_lock_fence(l), amount);
    printf("%s holds the lock with fence %" PRIu64 ": +%d, %lld row changed\n", who,
           dlock_lock_fence(l), amount, changed);
    return changed;
}

int main(int argc, char **argv)
{
    struct db_url u;
    dlock_client *c = NULL;
    dlock_lock *a = NULL, *b = NULL;
    MYSQL *db = NULL;
    int status = 2;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: fenced_update mysql://user:pass@host:port/db [LOCK_URL]\n");
        return 2;
    }
    if (parse_db_url(argv[1], &u) != 0)
        return 2;
    db = mysql_init(NULL);
    if (db == NULL ||
        mysql_real_connect(db, u.host, u.user, u.pass, u.db, u.port, NULL, 0) == NULL) {
        fprintf(stderr, "fenced_update: %s\n", db != NULL ? mysql_error(db) : "out of memory");
        goto done;
    }
    /* the protected row carries the last fence that wrote it */
    if (run_sql(db, "DROP TABLE IF EXISTS fenced_account") != 0 ||
        run_sql(db, "CREATE TABLE fenced_account (id INT PRIMARY KEY, balance BIGINT NOT NULL, "
                    "fence BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB") != 0 ||
        run_sql(db, "INSERT INTO fenced_account (id, balance) VALUES (1, 0)") != 0)
        goto done;
    if (dlock_client_open(argv[argc - 1], &c) != DLOCK_OK ||
        dlock_lock_open(c, "account-1", 0, &a) != DLOCK_OK ||
        dlock_lock_open(c, "account-1", 0, &b) != DLOCK_OK) {
        fprintf(stderr, "fenced_update: %s\n", dlock_errmsg());
        goto done;
    }

    int fixed = (dlock_client_caps(c) & DLOCK_CAP_FIXED_LEASE) != 0;
    if (take_and_write(a, "A", fixed ? 300 : 0, db, 10) != 1)
        goto fail;
    uint64_t fence_a = dlock_lock_fence(a);
    /* A's lock ends and B takes it, with a larger fence: A is paused and
     * B's wait outlasts A's lease; or, where a lock lives with its
     * connection, A releases. */
    if (fixed)
        printf("A pauses; its 300 ms lease runs out\n");
    else
        dlock_release(a);
    if (take_and_write(b, "B", 0, db, 5) != 1)
        goto fail;
    /* A resumes and sends the write it had prepared under fence_a */
    long long late = fenced_add(db, fence_a, 10);
    if (late != 0) {
        printf("A's late write with fence %" PRIu64 " was NOT refused (%lld rows)\n", fence_a,
               late);
        goto fail;
    }
    printf("A's late write with fence %" PRIu64 ": 0 rows changed: refused, A stops\n", fence_a);
    dlock_release(b);
    long long total = balance(db);
    printf("balance %lld\n", total);
    status = total == 15 ? 0 : 1;
    goto done;
fail:
    status = 1;
done:
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    if (db != NULL)
        mysql_close(db);
    return status;
}
