/* SPDX-License-Identifier: MIT */
/* hello.c - the README's ten lines with defaults for the URL and the lock's
 * name, and an exit status for each outcome: take a lock with a renewed
 * lease, use its fencing token, release it.
 *
 *   build/bin/hello [URL] [NAME]     (default redis://127.0.0.1:6379 hello) */
#include <dlock.h>

#include <inttypes.h>
#include <stdio.h>

static void on_lost(dlock_lock *lock, int code, const char *why, void *arg)
{
    (void) code;
    (void) arg;
    fprintf(stderr, "lost %s: %s\n", dlock_lock_name(lock), why);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    const char *name = argc > 2 ? argv[2] : "hello";
    dlock_client *c;
    dlock_lock *l;
    int rc;

    if (dlock_client_open(url, &c) != DLOCK_OK || dlock_lock_open(c, name, 0, &l) != DLOCK_OK) {
        fprintf(stderr, "hello: %s\n", dlock_errmsg());
        return 2;
    }
    dlock_lock_on_lost(l, on_lost, NULL);
    rc = dlock_acquire(l, 10000); /* wait up to 10 s; the lease is renewed */
    if (rc == DLOCK_OK) {
        printf("holding %s with fence %" PRIu64 "\n", name, dlock_lock_fence(l));
        rc = dlock_release(l);
    }
    if (rc != DLOCK_OK)
        fprintf(stderr, "hello: %s: %s\n", dlock_strerror(rc), dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(c);
    return rc == DLOCK_OK ? 0 : 1;
}
