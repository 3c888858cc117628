/* SPDX-License-Identifier: MIT */
/* lease.c - what keeps a hold alive, in words: the status line of a lock
 * with no lease running out.
 *
 * A hold has a fixed lease (-l), a lease the client renews (the URL's
 * lease=), or, on a session store (DLOCK_CAP_SESSION), lives with the
 * client's session with the store, kept alive as long as dlock runs: what a
 * user needs to know is how long a killed holder would block the others. */
#include "cli.h"

#include <stdio.h>

void cli_print_no_lease(unsigned caps, const char *store)
{
    if (caps & DLOCK_CAP_SESSION)
        printf("none (held by its holder's %s session: freed within the session timeout if "
               "the holder dies)",
               store);
    else
        printf("none (never expires)");
}
