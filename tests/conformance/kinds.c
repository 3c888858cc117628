/* SPDX-License-Identifier: MIT */
/* kinds.c - the lock family on every store that has it: fair order of
 * waiters across processes, read-write locks (readers share, a writer is
 * alone and not starved), semaphores (never more than N holders, from
 * several processes), and multi-locks (all or nothing, no deadlock, given
 * back within one command timeout). */
#define _GNU_SOURCE
#include "conformance.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------- fair */

/* Processes queue one after another behind a holder; each writes its
 * number to a file when its turn comes: the file reads 0, 1, 2... */
void ct_fair_fifo(void)
{
    enum { P = 4 };
    const char *name = CT_NAME("fifo");
    char dir[160], path[200], order[64];
    pid_t pids[P];

    dt_make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/order", dir);
    ct_write_file(path, "");
    for (int i = 0; i < P; i++) {
        pids[i] = fork(); /* all before this process has threads */
        if (pids[i] == 0) {
            ct_fair_waiter(name, "", i, path);
        }
    }
    dlock_client *c = ct_client("");
    dlock_lock *holder = ct_lock(c, name, DLOCK_FAIR);
    CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK);
    DT_WAIT_UNTIL(ct_waiters(c, name, DLOCK_FAIR) == P, 15000);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    for (int i = 0; i < P; i++)
        ct_wait_worker(pids[i], "a fair waiter");
    ct_read_file(path, order, sizeof order);
    CHECK(strcmp(order, "0123") == 0); /* granted in the order they queued */
    /* a fair handle and a plain one are the same lock */
    dlock_lock *plain = ct_lock(c, name, 0);
    CHECK_RC(dlock_acquire(holder, 0), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(plain), DLOCK_EBUSY);
    CHECK_RC(dlock_release(holder), DLOCK_OK);
    dlock_lock_free(plain);
    dlock_lock_free(holder);
    dlock_client_close(c);
}

/* ---------------------------------------------------------------- read-write */

void ct_rw_readers_share(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("doc");
    dlock_lock *r1 = ct_lock(c, name, DLOCK_READ), *r2 = ct_lock(c, name, DLOCK_READ);
    dlock_lock *r3 = ct_lock(c2, name, DLOCK_READ), *w = ct_lock(c2, name, DLOCK_WRITE);
    dlock_lock *w2 = ct_lock(c, name, DLOCK_WRITE), *mutex = ct_lock(c, name, 0);
    dlock_lock *up = NULL;

    CHECK_RC(dlock_try_acquire(r1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r3), DLOCK_OK); /* readers of two clients together */
    if (ct_has(DLOCK_CAP_QUERY))
        CHECK_INT(ct_query(c, name, DLOCK_READ).shared, ==, 3);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY);
    CHECK_RC(dlock_acquire(w, 200), DLOCK_ETIMEDOUT);
    /* one name is one lock: the mutex of that name is held too */
    CHECK_RC(dlock_try_acquire(mutex), DLOCK_EBUSY);
    CHECK(strstr(dlock_errmsg(), "held as a read-write lock") != NULL);
    /* a reader asking to write could only wait for itself */
    CHECK_RC(dlock_lock_dup(r1, DLOCK_WRITE, &up), DLOCK_OK);
    CHECK_RC(dlock_acquire(up, 1000), DLOCK_EDEADLK);
    dlock_lock_free(up);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY); /* one reader is enough */
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_RC(dlock_release(r3), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    if (ct_has(DLOCK_CAP_QUERY)) {
        dlock_status st = ct_query(c, name, DLOCK_WRITE);
        CHECK_INT(st.held, ==, 1);
        CT_CHECK_OWNER(st.owner, w);
    }
    /* a writer is alone: no reader, no other writer */
    CHECK_RC(dlock_try_acquire(r1), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_OK);
    CHECK_RC(dlock_release(w2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r1), DLOCK_OK);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(r3);
    dlock_lock_free(w);
    dlock_lock_free(w2);
    dlock_lock_free(mutex);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A downgrade (dlock.h, DLOCK_READ): the writer's owner takes the read
 * lock beside its write (dlock_lock_dup), at once, then lets the write go;
 * until then the name is the writer's alone, after it readers share and a
 * writer waits. */
void ct_rw_downgrade(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("down");
    dlock_lock *w = ct_lock(c, name, DLOCK_WRITE), *down = NULL;
    dlock_lock *r2 = ct_lock(c2, name, DLOCK_READ), *w2 = ct_lock(c2, name, DLOCK_WRITE);

    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &down), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(down, 20000), DLOCK_OK);
    CHECK_INT(dt_now_ms() - t0, <, 2000);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(down), >, dlock_lock_fence(w));
    CHECK_RC(dlock_try_acquire(r2), DLOCK_EBUSY); /* the write still holds */
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK); /* readers share */
    CHECK_RC(dlock_try_acquire(w2), DLOCK_EBUSY);
    if (ct_has(DLOCK_CAP_QUERY))
        CHECK_INT(ct_query(c2, name, DLOCK_READ).shared, ==, 2);
    CHECK_RC(dlock_release(down), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w2), DLOCK_OK);
    CHECK_RC(dlock_release(w2), DLOCK_OK);
    dlock_lock_free(down);
    dlock_lock_free(w);
    dlock_lock_free(r2);
    dlock_lock_free(w2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A reader holds; a writer queues; a later reader must wait behind the
 * writer rather than join the first reader (else a stream of readers would
 * starve the writer). */
void ct_rw_writer_not_starved(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client(""), *c3 = ct_client("");
    const char *name = CT_NAME("hot");
    dlock_lock *r1 = ct_lock(c, name, DLOCK_READ), *w = ct_lock(c2, name, DLOCK_WRITE);
    dlock_lock *r2 = ct_lock(c3, name, DLOCK_READ);
    ct_waiter ww, rw;

    CHECK_RC(dlock_acquire(r1, 0), DLOCK_OK);
    ct_wait_start(&ww, w, 20000);
    DT_WAIT_UNTIL(ct_waiters(c, name, DLOCK_WRITE) == 1, 5000);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_EBUSY);
    /* said so: "held by someone else" reads as if the reader could share */
    if (strstr(dlock_errmsg(), "a writer has waited longer and goes first") == NULL)
        dt_fail(__FILE__, __LINE__, "a reader behind a waiting writer: %s", dlock_errmsg());
    /* and a wait that runs out (etcd and PostgreSQL's session mode said
     * "still held": trial42) */
    CHECK_RC(dlock_acquire(r2, 300), DLOCK_ETIMEDOUT);
    if (strstr(dlock_errmsg(), "a writer has waited longer and goes first") == NULL)
        dt_fail(__FILE__, __LINE__, "a wait behind a waiting writer: %s", dlock_errmsg());
    CHECK(!CT_DONE(&ww));
    ct_wait_start(&rw, r2, 20000);
    DT_WAIT_UNTIL(ct_waiters(c, name, DLOCK_WRITE) == 2, 5000);
    CHECK(!CT_DONE(&ww) && !CT_DONE(&rw));
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    DT_WAIT_UNTIL(CT_DONE(&ww), 3000);
    CHECK_RC(ct_wait_join(&ww), DLOCK_OK);
    CHECK(!CT_DONE(&rw)); /* the writer first, alone */
    CHECK_RC(dlock_release(w), DLOCK_OK);
    DT_WAIT_UNTIL(CT_DONE(&rw), 3000);
    CHECK_RC(ct_wait_join(&rw), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(c);
    dlock_client_close(c2);
    dlock_client_close(c3);
}

/* Handles of one owner (dlock_lock_dup) with leases of their own: a short
 * lease set through one does not cut another's longer fixed lease, so a
 * writer of another client stays out while the longer one runs. Two read
 * handles, then a downgrade (the read lock beside the owner's write, the
 * write's lease set short). (Redis, SQLite, Redlock and MariaDB's and
 * PostgreSQL's lock tables each cut it once. What it costs: the longer end
 * stays in the store after that handle lets go, until the other's is
 * over.) */
void ct_rw_dup_leases(void)
{
    dlock_client *c = ct_client("?lease=2s"), *c2 = ct_client("");
    const char *name = CT_NAME("dup"), *name2 = CT_NAME("down");
    dlock_lock *r1 = ct_lock(c, name, DLOCK_READ), *r2 = NULL, *w = ct_lock(c, name2, DLOCK_WRITE);
    dlock_lock *down = NULL, *other = ct_lock(c2, name, DLOCK_WRITE);
    dlock_lock *other2 = ct_lock(c2, name2, DLOCK_WRITE);

    CHECK_RC(dlock_acquire_for(r1, 0, 20000), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(r1, DLOCK_READ, &r2), DLOCK_OK);
    CHECK_RC(dlock_acquire(r2, 0), DLOCK_OK);
    CHECK_RC(dlock_extend(r2, 100), DLOCK_OK);
    CHECK_RC(dlock_acquire(other, 1500), DLOCK_ETIMEDOUT); /* r1's 20 s run */
    CHECK_RC(dlock_lock_verify(r1), DLOCK_OK);
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    (void) dlock_release(r2); /* (its 100 ms are over) */

    CHECK_RC(dlock_acquire(w, 5000), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &down), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(down, 0, 20000), DLOCK_OK);
    CHECK_RC(dlock_extend(w, 100), DLOCK_OK);
    CHECK_RC(dlock_acquire(other2, 1500), DLOCK_ETIMEDOUT); /* the reader's 20 s run */
    CHECK_RC(dlock_lock_verify(down), DLOCK_OK);
    CHECK_RC(dlock_release(down), DLOCK_OK);
    (void) dlock_release(w);
    /* The store keeps the longer end after its handle let go, until it is
     * over: cleared here (the suite's later tests list every name) */
    if (ct_has(DLOCK_CAP_FORCE_UNLOCK)) {
        CHECK_RC(dlock_force_unlock(c2, name, DLOCK_READ), DLOCK_OK);
        CHECK_RC(dlock_force_unlock(c2, name2, DLOCK_WRITE), DLOCK_OK);
        CHECK_RC(dlock_try_acquire(other), DLOCK_OK);
        CHECK_RC(dlock_release(other), DLOCK_OK);
    }
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_lock_free(down);
    dlock_lock_free(other);
    dlock_lock_free(other2);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* Read handles of one owner (dlock_lock_dup) count their holds: one's
 * release leaves the other's, and another client's writer stays out until
 * both let go (MariaDB's and PostgreSQL's lock tables freed the name at
 * the first release once). */
void ct_rw_dup_readers_counted(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("count");
    dlock_lock *r1 = ct_lock(c, name, DLOCK_READ), *r2 = NULL;
    dlock_lock *w = ct_lock(c2, name, DLOCK_WRITE);

    CHECK_RC(dlock_try_acquire(r1), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(r1, DLOCK_READ, &r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(r2), DLOCK_OK);
    if (ct_has(DLOCK_CAP_FENCE))
        CHECK_INT(dlock_lock_fence(r2), >, dlock_lock_fence(r1));
    CHECK_RC(dlock_release(r1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_EBUSY); /* r2 still reads */
    CHECK_RC(dlock_lock_verify(r2), DLOCK_OK);
    CHECK_RC(dlock_release(r2), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK); /* the last hold gone: free */
    CHECK_RC(dlock_release(w), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* Read handles of one owner, one with a fixed 20 s, the other with the
 * client's lease: the other's lease set short (dlock_extend), set again
 * (dlock_renew: what the renewer does) and then let go does not end the
 * long one's hold: another client's writer stays out while it runs, and
 * gets the name once the long one lets go (MariaDB's lock table set the
 * name's end to the short one's at its release once). */
void ct_rw_dup_reader_released(void)
{
    dlock_client *c = ct_client("?lease=1s"), *c2 = ct_client("");
    const char *name = CT_NAME("rel");
    dlock_lock *longer = ct_lock(c, name, DLOCK_READ), *shorter = NULL;
    dlock_lock *w = ct_lock(c2, name, DLOCK_WRITE);

    CHECK_RC(dlock_acquire_for(longer, 0, 20000), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(longer, DLOCK_READ, &shorter), DLOCK_OK);
    CHECK_RC(dlock_acquire(shorter, 0), DLOCK_OK);
    CHECK_RC(dlock_extend(shorter, 100), DLOCK_OK);
    CHECK_RC(dlock_renew(shorter), DLOCK_OK);
    CHECK_RC(dlock_release(shorter), DLOCK_OK);
    CHECK_RC(dlock_acquire(w, 1500), DLOCK_ETIMEDOUT); /* past the short one's 1 s */
    CHECK_RC(dlock_lock_verify(longer), DLOCK_OK);
    CHECK_RC(dlock_release(longer), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(w), DLOCK_OK);
    CHECK_RC(dlock_release(w), DLOCK_OK);
    dlock_lock_free(longer);
    dlock_lock_free(shorter);
    dlock_lock_free(w);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A writer's owner holds its write (10 s) and a reader beside it (20 s,
 * a downgrade's), then asks for the write again through a second write
 * handle with a 100 ms lease (whatever the answer: a re-entry, a refusal):
 * once that is over, another client's writer still stays out, the reader
 * and the first write still hold (PostgreSQL's lock table set the name's
 * end to the second handle's, below the reader's: another client's writer
 * got in within 400 ms). */
void ct_rw_dup_writer_keeps_reader(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    const char *name = CT_NAME("w2");
    dlock_lock *w1 = ct_lock(c, name, DLOCK_WRITE), *r = NULL, *w2 = NULL;
    dlock_lock *y = ct_lock(c2, name, DLOCK_WRITE);

    CHECK_RC(dlock_acquire_for(w1, 0, 10000), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w1, DLOCK_READ, &r), DLOCK_OK);
    CHECK_RC(dlock_acquire_for(r, 0, 20000), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w1, DLOCK_WRITE, &w2), DLOCK_OK);
    int rc = dlock_acquire_for(w2, 0, 100);
    printf("%s: a second write handle's take: %s\n", ct->kind, dlock_strerror(rc));
    fflush(stdout);
    dt_sleep_ms(400); /* the fault: time passes beyond the second handle's lease */
    CHECK_RC(dlock_lock_check(r), DLOCK_OK);
    CHECK_RC(dlock_lock_check(w1), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(y), DLOCK_EBUSY); /* r (20 s) and w1 (10 s) still hold */
    if (rc == DLOCK_OK)
        (void) dlock_release(w2); /* (its 100 ms are over) */
    CHECK_RC(dlock_release(r), DLOCK_OK);
    CHECK_RC(dlock_release(w1), DLOCK_OK);
    /* nothing left behind: another client's writer gets it */
    rc = dlock_try_acquire(y);
    if (rc != DLOCK_OK && ct_has(DLOCK_CAP_FORCE_UNLOCK)) {
        printf("%s: the name still held after every handle let go (%s)\n", ct->kind,
               dlock_strerror(rc));
        CHECK_RC(dlock_force_unlock(c2, name, DLOCK_WRITE), DLOCK_OK);
    }
    CHECK_RC(rc, DLOCK_OK);
    CHECK_RC(dlock_release(y), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w1);
    dlock_lock_free(w2);
    dlock_lock_free(y);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A write handle whose write was let go by another write handle of its
 * owner (dlock_lock_dup), the owner's reader beside it: either the write
 * still holds (another client's reader is busy) or the name is the
 * readers' and the first write handle is told (PostgreSQL's lock table
 * let another client's reader in and never told it). */
void ct_rw_dup_writer_release_tells(void)
{
    ct_loss loss = {0};
    dlock_client *c = ct_client("?lease=1s"), *c2 = ct_client("");
    const char *name = CT_NAME("told");
    dlock_lock *w1 = ct_lock(c, name, DLOCK_WRITE), *r = NULL, *w2 = NULL;
    dlock_lock *x = ct_lock(c2, name, DLOCK_READ);

    dlock_lock_on_lost(w1, ct_on_lost, &loss);
    CHECK_RC(dlock_acquire(w1, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w1, DLOCK_READ, &r), DLOCK_OK);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    CHECK_RC(dlock_lock_dup(w1, DLOCK_WRITE, &w2), DLOCK_OK);
    int took = dlock_try_acquire(w2);
    printf("%s: a second write handle's try: %s\n", ct->kind, dlock_strerror(took));
    fflush(stdout);
    if (took == DLOCK_OK)
        CHECK_RC(dlock_release(w2), DLOCK_OK);
    int rc = dlock_try_acquire(x);
    printf("%s: then another client's reader: %s\n", ct->kind, dlock_strerror(rc));
    fflush(stdout);
    if (rc == DLOCK_OK) { /* the name is the readers': w1 must be told */
        DT_WAIT_UNTIL(atomic_load(&loss.calls) == 1, 3000);
        CHECK_RC(dlock_lock_check(w1), DLOCK_ELOST);
        CHECK_RC(dlock_release(x), DLOCK_OK);
        CHECK_RC(dlock_release(r), DLOCK_OK);
        CHECK_RC(dlock_release(w1), DLOCK_ELOST);
    } else {
        CHECK_RC(rc, DLOCK_EBUSY);
        CHECK_RC(dlock_lock_check(w1), DLOCK_OK);
        CHECK_INT(atomic_load(&loss.calls), ==, 0);
        CHECK_RC(dlock_release(r), DLOCK_OK);
        CHECK_RC(dlock_release(w1), DLOCK_OK);
    }
    CHECK_RC(dlock_try_acquire(x), DLOCK_OK); /* nothing left behind */
    CHECK_RC(dlock_release(x), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w1);
    dlock_lock_free(w2);
    dlock_lock_free(x);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* Another client's reader waiting behind a write gets the name soon after
 * the writer's owner downgrades (takes the read lock, lets the write go):
 * the name is the readers' then, and its waiters are woken, not left to
 * the write's lease (PostgreSQL's lock table woke them only when the name
 * was freed: 9.6 s). */
void ct_rw_downgrade_wakes_readers(void)
{
    dlock_client *c = ct_client("?lease=10s"), *c2 = ct_client("?lease=10s");
    const char *name = CT_NAME("wake");
    dlock_lock *w = ct_lock(c, name, DLOCK_WRITE), *r = NULL;
    dlock_lock *x = ct_lock(c2, name, DLOCK_READ);
    ct_waiter xw;

    CHECK_RC(dlock_acquire(w, 0), DLOCK_OK);
    ct_wait_start(&xw, x, 20000);
    DT_WAIT_UNTIL(ct_waiters(c, name, DLOCK_WRITE) == 1 || CT_DONE(&xw), 5000);
    CHECK(!CT_DONE(&xw));
    CHECK_RC(dlock_lock_dup(w, DLOCK_READ, &r), DLOCK_OK);
    CHECK_RC(dlock_acquire(r, 0), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_release(w), DLOCK_OK);
    CHECK_RC(ct_wait_join(&xw), DLOCK_OK);
    int64_t took = xw.ended_ms - t0;
    printf("%s: the waiting reader got the name %lld ms after the write's release\n", ct->kind,
           (long long) took);
    CHECK_INT(took, <, 1500);
    CHECK_RC(dlock_release(x), DLOCK_OK);
    CHECK_RC(dlock_release(r), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_lock_free(x);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- semaphore */

typedef struct sem_shared {
    atomic_int inside, most, rounds;
} sem_shared;

void ct_semaphore_bounded(void)
{
    enum { N = 2, P = 4, ROUNDS = 8 };
    const char *name = CT_NAME("pool");
    pid_t pids[P];
    sem_shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    atomic_store(&sh->inside, 0);
    atomic_store(&sh->most, 0);
    atomic_store(&sh->rounds, 0);
    for (int p = 0; p < P; p++) {
        pids[p] = fork(); /* all before this process has threads */
        if (pids[p] == 0) {
            dlock_client *c = ct_client("");
            dlock_lock *l = NULL;
            CHECK_RC(dlock_semaphore_open(c, name, N, 1, &l), DLOCK_OK);
            for (int i = 0; i < ROUNDS; i++) {
                CHECK_RC(dlock_acquire(l, 30000), DLOCK_OK);
                int now = atomic_fetch_add(&sh->inside, 1) + 1;
                int most = atomic_load(&sh->most);
                while (now > most && !atomic_compare_exchange_weak(&sh->most, &most, now))
                    ;
                dt_sleep_ms(20); /* long enough that holders overlap */
                atomic_fetch_sub(&sh->inside, 1);
                CHECK_RC(dlock_release(l), DLOCK_OK);
                atomic_fetch_add(&sh->rounds, 1);
            }
            dlock_lock_free(l);
            dlock_client_close(c);
            _exit(0);
        }
    }
    for (int p = 0; p < P; p++)
        ct_wait_worker(pids[p], "a semaphore user");
    printf("%s: at most %d of %d permits in use at once\n", ct->kind, atomic_load(&sh->most), N);
    CHECK_INT(atomic_load(&sh->rounds), ==, P * ROUNDS);
    CHECK_INT(atomic_load(&sh->most), <=, N);
    CHECK_INT(atomic_load(&sh->most), >=, 1);

    /* N holders, and the next one is refused */
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    dlock_lock *s[N + 1], *big = NULL, *wrong = NULL;
    for (int i = 0; i <= N; i++)
        CHECK_RC(dlock_semaphore_open(i % 2 ? c2 : c, name, N, 1, &s[i]), DLOCK_OK);
    for (int i = 0; i < N; i++)
        CHECK_RC(dlock_try_acquire(s[i]), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s[N]), DLOCK_EBUSY);
    if (strstr(dlock_errmsg(), "too few permits free") == NULL)
        dt_fail(__FILE__, __LINE__, "a try's refusal: %s", dlock_errmsg());
    /* a wait that runs out says so in the same words (permits, not one
     * holder) */
    CHECK_RC(dlock_acquire(s[N], 300), DLOCK_ETIMEDOUT);
    if (strstr(dlock_errmsg(), "still has too few permits free after") == NULL)
        dt_fail(__FILE__, __LINE__, "a wait's refusal: %s", dlock_errmsg());
    if (ct_has(DLOCK_CAP_QUERY)) {
        dlock_status st = ct_query(c, name, DLOCK_SEMAPHORE);
        CHECK_INT(st.permits_used, ==, N);
        CHECK_INT(st.permits, ==, N);
    }
    /* every user must give the same permits while it is in use */
    CHECK_RC(dlock_semaphore_open(c2, name, N + 3, 1, &wrong), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(wrong), DLOCK_EINVAL);
    /* named as the user names it, not by a store's key ("dlock:{x}:sem")
     * nor a path, in the same words on every store */
    char want[300];
    snprintf(want, sizeof want,
             "semaphore '%s' is in use with %d permits, not %d: every user of a semaphore must "
             "give the same number",
             name, N, N + 3);
    if (strchr(dlock_errmsg(), '{') != NULL || strstr(dlock_errmsg(), want) == NULL)
        dt_fail(__FILE__, __LINE__, "want \"%s\", got: %s", want, dlock_errmsg());
    dlock_lock_free(wrong);
    CHECK_RC(dlock_release(s[0]), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s[N]), DLOCK_OK);
    /* take > 1: all or nothing */
    CHECK_RC(dlock_semaphore_open(c, name, N, N, &big), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(big), DLOCK_EBUSY);
    CHECK_RC(dlock_release(s[1]), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(big), DLOCK_EBUSY); /* one free is not two */
    CHECK_RC(dlock_release(s[N]), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(big), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(s[0]), DLOCK_EBUSY);
    CHECK_RC(dlock_release(big), DLOCK_OK);
    wrong = (dlock_lock *) &wrong;
    CHECK_RC(dlock_semaphore_open(c, name, N, N + 1, &wrong), DLOCK_EINVAL);
    CHECK(wrong == NULL);
    for (int i = 0; i <= N; i++)
        dlock_lock_free(s[i]);
    dlock_lock_free(big);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* ---------------------------------------------------------------- multi-lock */

typedef struct multi_loop {
    dlock_client *client;
    const char *names[2];
    int rounds, failures;
} multi_loop;

static void *multi_run(void *p)
{
    multi_loop *m = p;
    dlock_lock *l = NULL;
    if (dlock_multi_open(m->client, m->names, 2, 0, &l) != DLOCK_OK)
        return (void *) 1;
    for (int i = 0; i < m->rounds; i++) {
        if (dlock_acquire(l, 10000) != DLOCK_OK || dlock_release(l) != DLOCK_OK)
            m->failures++;
    }
    dlock_lock_free(l);
    return NULL;
}

/* Whether another client holds l's name now (a try, given back if it
 * took it). */
static int taken_elsewhere(dlock_lock *l)
{
    int rc = dlock_try_acquire(l);
    if (rc == DLOCK_OK)
        CHECK_RC(dlock_release(l), DLOCK_OK);
    return rc == DLOCK_EBUSY;
}

/* A multi-lock with a fixed lease shorter than its wait for a later name:
 * the name taken first is kept (renewed) while the later one is waited
 * for, and the fixed lease starts when every name is held. (Before, the
 * first name's lease ran out meanwhile, another client could take it, and
 * on a hot name the multi-lock never held both at once.) */
void ct_multi_fixed_lease_from_all(void)
{
    enum { LEASE_MS = 400, HOLD_MS = 1500 };
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    char x[128], y[128];
    snprintf(x, sizeof x, "%s", CT_NAME("fx"));
    snprintf(y, sizeof y, "%s", CT_NAME("fy"));
    const char *names[] = {x, y};
    dlock_lock *m = NULL, *px = ct_lock(c2, x, 0), *py = ct_lock(c2, y, 0);

    CHECK_RC(dlock_multi_open(c, names, 2, 0, &m), DLOCK_OK);
    CHECK_RC(dlock_acquire(py, 0), DLOCK_OK); /* the later name (canonical order) */
    int64_t t0 = dt_now_ms();
    ct_waiter w;
    ct_wait_start_for(&w, m, 10000, LEASE_MS);
    /* x taken by the multi-lock, and still held well past its lease */
    DT_WAIT_UNTIL(taken_elsewhere(px), 5000);
    while (dt_now_ms() - t0 < 2 * LEASE_MS)
        dt_sleep_ms(20);
    CHECK(taken_elsewhere(px));
    CHECK(!CT_DONE(&w));
    while (dt_now_ms() - t0 < HOLD_MS)
        dt_sleep_ms(20);
    CHECK_RC(dlock_release(py), DLOCK_OK);
    int64_t freed = dt_now_ms();
    CHECK_RC(ct_wait_join(&w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(px), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(py), DLOCK_EBUSY);
    /* the fixed lease from when both were held: it ends, unrenewed */
    DT_WAIT_UNTIL(dlock_lock_check(m) == DLOCK_ELOST, 5000);
    CHECK_INT(dt_now_ms() - freed, <, LEASE_MS + 1500);
    DT_WAIT_UNTIL(dlock_try_acquire(px) == DLOCK_OK, 5000);
    DT_WAIT_UNTIL(dlock_try_acquire(py) == DLOCK_OK, 5000);
    CHECK_RC(dlock_release(px), DLOCK_OK);
    CHECK_RC(dlock_release(py), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(px);
    dlock_lock_free(py);
    dlock_client_close(c);
    dlock_client_close(c2);
}

void ct_multi_all_or_nothing(void)
{
    dlock_client *c = ct_client(""), *c2 = ct_client("");
    char x[128], y[128];
    snprintf(x, sizeof x, "%s", CT_NAME("x"));
    snprintf(y, sizeof y, "%s", CT_NAME("y"));
    const char *names[] = {y, x, y}; /* duplicates count once */
    dlock_lock *m = NULL, *px = ct_lock(c2, x, 0), *py = ct_lock(c2, y, 0);

    CHECK_RC(dlock_multi_open(c, names, 3, 0, &m), DLOCK_OK);
    CHECK_INT(dlock_lock_members(m), ==, 2);
    CHECK(strcmp(dlock_lock_name(dlock_lock_member(m, 0)), x) == 0); /* canonical order */
    CHECK_RC(dlock_try_acquire(py), DLOCK_OK);
    /* y is held: the multi-lock takes nothing */
    CHECK_RC(dlock_try_acquire(m), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(px), DLOCK_OK);
    CHECK_RC(dlock_release(px), DLOCK_OK);
    CHECK_RC(dlock_acquire(m, 300), DLOCK_ETIMEDOUT);
    CHECK_INT(dlock_lock_holds(m), ==, 0);
    CHECK_RC(dlock_try_acquire(px), DLOCK_OK); /* given back */
    CHECK_RC(dlock_release(px), DLOCK_OK);
    /* y freed while the multi-lock waits: it gets both */
    ct_waiter w;
    ct_wait_start(&w, m, 10000);
    CHECK_RC(dlock_release(py), DLOCK_OK);
    CHECK_RC(ct_wait_join(&w), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(px), DLOCK_EBUSY);
    CHECK_RC(dlock_try_acquire(py), DLOCK_EBUSY);
    if (ct_has(DLOCK_CAP_FENCE)) {
        CHECK(dlock_lock_fence(dlock_lock_member(m, 0)) > 0);
        CHECK(dlock_lock_fence(dlock_lock_member(m, 1)) > 0);
        CHECK_INT(dlock_lock_fence(m), ==, dlock_lock_fence(dlock_lock_member(m, 0)));
    }
    CHECK_RC(dlock_release(m), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(px), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(py), DLOCK_OK);
    CHECK_RC(dlock_release(px), DLOCK_OK);
    CHECK_RC(dlock_release(py), DLOCK_OK);

    /* opposite orders from two clients never deadlock */
    multi_loop a = {c, {x, y}, 15, 0}, b = {c2, {y, x}, 15, 0};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, multi_run, &a) == 0);
    CHECK(pthread_create(&tb, NULL, multi_run, &b) == 0);
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    CHECK(ra == NULL && rb == NULL);
    CHECK_INT(a.failures + b.failures, ==, 0);
    dlock_lock_free(m);
    dlock_lock_free(px);
    dlock_lock_free(py);
    dlock_client_close(c);
    dlock_client_close(c2);
}

/* A multi-lock whose store goes silent gives its members back within one
 * command timeout in all, however many members it has: each release gets a
 * share of the bound, not the whole of it (a member not released in time
 * ends with its lease). Both when the holder releases, and when a wait
 * runs out and the members taken so far are given back. A try of a silent
 * store ends within one command timeout, and so does a try of a slow one:
 * its members' tries share the first request's time, and its give-back
 * gets what they leave. */
enum { MULTI_MEMBERS = 8, MULTI_TIMEOUT_MS = 300, MULTI_SLACK_MS = 300, MULTI_DELAY_MS = 120 };

static dlock_lock *multi_of(dlock_client *c, const char *stem, char names[][128])
{
    const char *list[MULTI_MEMBERS];
    dlock_lock *m = NULL;
    for (int i = 0; i < MULTI_MEMBERS; i++) {
        char part[32];
        snprintf(part, sizeof part, "%s%d", stem, i);
        snprintf(names[i], 128, "%s", CT_NAME(part));
        list[i] = names[i];
    }
    CHECK_RC(dlock_multi_open(c, list, MULTI_MEMBERS, 0, &m), DLOCK_OK);
    return m;
}

/* A try through a link that holds every reply MULTI_DELAY_MS: each
 * request is answered, but the members taken one by one take longer than
 * a command timeout together. With reset, the link's connections are reset
 * while the first request is out, which makes a one-step request fail
 * early (ZooKeeper: the connection lost) so that the members are taken one
 * by one after it. Before, each member's try had a command timeout of its
 * own, and so had the give-back after them. */
static void slow_try(dt_proxy *proxy, const char *stem, int reset)
{
    char names[MULTI_MEMBERS][128];
    ct_waiter w;
    dlock_client *c =
        ct_client_at(proxy->ports[0], "?lease=10s&timeout=300ms&connect_timeout=300ms");
    dlock_lock *m = multi_of(c, stem, names);

    CHECK_RC(dlock_try_acquire(m), DLOCK_OK); /* the session, paths and scripts made */
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dt_proxy_delay(proxy, 0, MULTI_DELAY_MS);
    ct_wait_start(&w, m, 0);
    if (reset) {
        dt_sleep_ms(MULTI_DELAY_MS / 2); /* the fault's timing: the first request is out */
        dt_proxy_reset(proxy, 0);
    }
    int rc = ct_wait_join(&w);
    int64_t took = w.ended_ms - w.started_ms;
    printf("%s: a try of %d members of a store %d ms away%s took %lld ms (%s)\n", ct->kind,
           MULTI_MEMBERS, MULTI_DELAY_MS, reset ? ", its connection reset" : "", (long long) took,
           dlock_strerror(rc));
    CHECK_INT(took, <=, MULTI_TIMEOUT_MS + MULTI_SLACK_MS);
    CHECK_INT(dlock_lock_holds(m), ==, rc == DLOCK_OK ? 1 : 0);
    dt_proxy_delay(proxy, 0, 0);
    if (rc == DLOCK_OK) {
        /* (a release while the client connects again after the reset is
         * not confirmed, and goes on in the background) */
        int released = dlock_release(m);
        CHECK(released == DLOCK_OK || (reset && released == DLOCK_EUNREACHABLE));
    }
    dlock_lock_free(m);
    dlock_client_close(c);
}

/* A multi-lock taken again (re-entry) through a link that holds every reply
 * MULTI_DELAY_MS: each member confirms its hold in turn, all
 * within one command timeout (before, each member had one of its own). */
static void slow_reentry(dt_proxy *proxy, const char *stem)
{
    char names[MULTI_MEMBERS][128];
    dlock_client *c =
        ct_client_at(proxy->ports[0], "?lease=10s&timeout=300ms&connect_timeout=300ms");
    dlock_lock *m = multi_of(c, stem, names);

    CHECK_RC(dlock_acquire(m, 5000), DLOCK_OK);
    dt_proxy_delay(proxy, 0, MULTI_DELAY_MS);
    int64_t t0 = dt_now_ms();
    int rc = dlock_acquire(m, 0);
    int64_t took = dt_now_ms() - t0;
    printf("%s: taking %d members again through a store %d ms away took %lld ms (%s)\n", ct->kind,
           MULTI_MEMBERS, MULTI_DELAY_MS, (long long) took, dlock_strerror(rc));
    CHECK_INT(took, <=, MULTI_TIMEOUT_MS + MULTI_SLACK_MS);
    dt_proxy_delay(proxy, 0, 0);
    /* a re-entry that fails gives the multi-lock up */
    CHECK_INT(dlock_lock_holds(m), ==, rc == DLOCK_OK ? 2 : 0);
    if (rc == DLOCK_OK)
        CHECK_RC(dlock_release(m), DLOCK_OK);
    dlock_lock_free(m); /* (releases the outer hold) */
    dlock_client_close(c);
}

/* A wait that runs out while the store is silent: the last name is busy,
 * the others are taken and then given back, within the budget and one
 * command timeout. lease: the client's lease= (a short one ends while the
 * last name is waited for: the names taken are lost). Each name given back,
 * the lost ones too, the handle is freed at once, the store still silent:
 * before, a lost name was left for dlock_lock_free, which gave it a command
 * timeout of its own (etcd), past the wait's bound. */
static void silent_wait(dt_proxy *proxy, dlock_client *other, const char *stem, const char *lease,
                        int64_t budget)
{
    char names[MULTI_MEMBERS][128], options[128];
    ct_waiter w;

    snprintf(options, sizeof options, "%s&timeout=300ms&connect_timeout=300ms", lease);
    dlock_client *c = ct_client_at(proxy->ports[0], options);
    dlock_lock *m = multi_of(c, stem, names);
    dlock_lock *busy = ct_lock(other, names[MULTI_MEMBERS - 1], 0);
    CHECK_RC(dlock_try_acquire(busy), DLOCK_OK);
    ct_wait_start(&w, m, budget);
    DT_WAIT_UNTIL(ct_waiters(other, names[MULTI_MEMBERS - 1], 0) >= 1 || CT_DONE(&w), 5000);
    CHECK(!CT_DONE(&w)); /* queued for the last member, holding the others */
    dt_proxy_set(proxy, 0, DT_BLACKHOLE);
    int rc = ct_wait_join(&w);
    int64_t took = w.ended_ms - w.started_ms;
    printf("%s: a wait of %lld ms for %d members (%s) ended after %lld ms (%s)\n", ct->kind,
           (long long) budget, MULTI_MEMBERS, lease + 1, (long long) took, dlock_strerror(rc));
    CHECK(rc != DLOCK_OK);
    CHECK_INT(took, <=, budget + MULTI_TIMEOUT_MS + MULTI_SLACK_MS);
    CHECK_INT(dlock_lock_holds(m), ==, 0);
    int64_t t0 = dt_now_ms();
    dlock_lock_free(m);
    took = dt_now_ms() - t0;
    printf("%s: freeing it then took %lld ms\n", ct->kind, (long long) took);
    CHECK_INT(took, <=, MULTI_TIMEOUT_MS / 3);

    dt_proxy_set(proxy, 0, DT_PASS);
    CHECK_RC(dlock_release(busy), DLOCK_OK);
    dlock_lock_free(busy);
    dlock_client_close(c);
}

void ct_multi_bounded_when_silent(void)
{
    char held[MULTI_MEMBERS][128], tried[MULTI_MEMBERS][128];
    dt_proxy proxy;

    dt_proxy_start(&proxy, ct->srv.port, 1); /* before any client's threads */
    dlock_client *c = ct_client_at(proxy.ports[0], "?lease=10s&timeout=300ms"
                                                   "&connect_timeout=300ms");
    dlock_client *other = ct_client("");

    /* released while the store is silent */
    dlock_lock *m = multi_of(c, "r", held);
    CHECK_RC(dlock_acquire(m, 5000), DLOCK_OK);
    dt_proxy_set(&proxy, 0, DT_BLACKHOLE);
    int64_t t0 = dt_now_ms();
    int rc = dlock_release(m);
    int64_t took = dt_now_ms() - t0;
    printf("%s: releasing %d members of a silent store took %lld ms (%s)\n", ct->kind,
           MULTI_MEMBERS, (long long) took, dlock_strerror(rc));
    CHECK_INT(took, <=, MULTI_TIMEOUT_MS + MULTI_SLACK_MS);
    CHECK_INT(dlock_lock_holds(m), ==, 0);
    dlock_lock_free(m);

    /* a new client: the silent one's session may be given up by now */
    dt_proxy_set(&proxy, 0, DT_PASS);
    dlock_client_close(c);
    silent_wait(&proxy, other, "w", "?lease=10s", 1500);
    /* the names taken are lost (their lease ends) while the last is waited for */
    silent_wait(&proxy, other, "l", "?lease=1s", 2500);

    /* a try while the store is silent: one command timeout in all, the
     * store's one-step try and the members' tries together, not one each */
    c = ct_client_at(proxy.ports[0], "?lease=10s&timeout=300ms&connect_timeout=300ms");
    m = multi_of(c, "t", tried);
    CHECK_RC(dlock_try_acquire(m), DLOCK_OK); /* the session and the paths made */
    CHECK_RC(dlock_release(m), DLOCK_OK);
    dt_proxy_set(&proxy, 0, DT_BLACKHOLE);
    t0 = dt_now_ms();
    rc = dlock_try_acquire(m);
    took = dt_now_ms() - t0;
    printf("%s: a try of %d members of a silent store took %lld ms (%s)\n", ct->kind, MULTI_MEMBERS,
           (long long) took, dlock_strerror(rc));
    CHECK(rc != DLOCK_OK);
    CHECK_INT(took, <=, 2 * MULTI_TIMEOUT_MS - 50);
    CHECK_INT(dlock_lock_holds(m), ==, 0);

    dt_proxy_set(&proxy, 0, DT_PASS);
    dlock_lock_free(m);
    dlock_client_close(c);

    /* a try of a slow store, and of one whose one-step request fails early */
    slow_try(&proxy, "s", 0);
    slow_try(&proxy, "z", 1);
    slow_reentry(&proxy, "e");

    dlock_client_close(other);
    dt_proxy_stop(&proxy);
}

/* A semaphore holder of 2 permits sets its lease short (dlock_extend):
 * its permits are back once that has run out, for another client's
 * request, not after the lease it had before (PostgreSQL's lock table
 * kept the longer end once, as for read handles of one owner). */
void ct_semaphore_short_lease(void)
{
    dlock_client *c = ct_client("?lease=10s"), *c2 = ct_client("");
    const char *name = CT_NAME("short");
    dlock_lock *two = NULL, *one = NULL;
    CHECK_RC(dlock_semaphore_open(c, name, 2, 2, &two), DLOCK_OK);
    CHECK_RC(dlock_semaphore_open(c2, name, 2, 1, &one), DLOCK_OK);
    CHECK_RC(dlock_acquire(two, 0), DLOCK_OK);
    CHECK_RC(dlock_try_acquire(one), DLOCK_EBUSY);
    CHECK_RC(dlock_extend(two, 100), DLOCK_OK);
    int64_t t0 = dt_now_ms();
    CHECK_RC(dlock_acquire(one, 5000), DLOCK_OK);
    int64_t waited = dt_now_ms() - t0;
    printf("%s: a permit back %lld ms after the lease was set to 100 ms\n", ct->kind,
           (long long) waited);
    CHECK_INT(waited, <, 3000);
    CHECK_RC(dlock_release(one), DLOCK_OK);
    (void) dlock_release(two);
    dlock_lock_free(two);
    dlock_lock_free(one);
    dlock_client_close(c);
    dlock_client_close(c2);
}
