/* SPDX-License-Identifier: MIT */
/* app.c - the consumer of tests/install: takes and releases one lock on the
 * store given as argv[1], and checks that the header and the library it was
 * linked with are the same version.
 *
 *   app URL      exit 0 when the lock was held and released */
#include <dlock.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: app URL\n");
        return 64;
    }
    if (strcmp(dlock_version(), DLOCK_VERSION) != 0) {
        fprintf(stderr, "app: header %s, library %s\n", DLOCK_VERSION, dlock_version());
        return 1;
    }
    rc = dlock_client_open(argv[1], &c);
    if (rc == DLOCK_OK)
        rc = dlock_lock_open(c, "install-test", 0, &l);
    if (rc == DLOCK_OK)
        rc = dlock_acquire(l, 5000);
    if (rc == DLOCK_OK) {
        printf("app: held install-test with fence %" PRIu64 "\n", dlock_lock_fence(l));
        rc = dlock_release(l);
    }
    if (rc != DLOCK_OK)
        fprintf(stderr, "app: %s: %s\n", dlock_strerror(rc), dlock_errmsg());
    dlock_lock_free(l);
    dlock_client_close(c);
    return rc == DLOCK_OK ? 0 : 1;
}
