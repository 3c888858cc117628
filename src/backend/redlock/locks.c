/* SPDX-License-Identifier: MIT */
/* locks.c - a Redlock lock's keys on every node (../redis/keys.h): the hold
 * P:{E} (or the name N in simple mode), its fence counter, the other
 * layout's key, and the polling waiters' marks. */
#include "../../base/error.h"
#include "../redis/keys.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The waiting marks' key of a lock (malloc'ed): P:{E}:waiting from the
 * name's fence counter P:{E}:fence for the mutex (and its interop key);
 * W:waiting (readers) or W:writing (writers) from the read-write lock's
 * W = P:{E}:rw. */
static char *waiting_key(const rllock *l)
{
    static const char fence[] = "fence";
    const char *suffix = l->base.spec.kind == DLOCK__READ    ? ":waiting"
                         : l->base.spec.kind == DLOCK__WRITE ? ":writing"
                                                             : "waiting";
    const char *stem_of = l->rw ? l->keys[0] : l->keys[1];
    size_t stem = l->rw ? l->key_lens[0] : l->key_lens[1] - (sizeof fence - 1);
    char *key = malloc(stem + strlen(suffix) + 1);
    if (key != NULL) {
        memcpy(key, stem_of, stem);
        memcpy(key + stem, suffix, strlen(suffix) + 1);
    }
    return key;
}

int dlock__rl_lock_new(dlock__store *s, const char *name, const dlock__lock_spec *spec,
                       dlock__store_lock **out)
{
    rlbackend *b = RLB(s);
    rllock *l = calloc(1, sizeof *l);
    *out = NULL;
    if (l == NULL)
        return dlock__fail(DLOCK_ENOMEM, "out of memory");
    l->base.spec = *spec;
    l->rw = !spec->simple && (spec->kind == DLOCK__READ || spec->kind == DLOCK__WRITE);
    l->take_op = !l->rw ? "take" : spec->kind == DLOCK__READ ? "rtake" : "wtake";
    l->renew_op = l->rw && spec->kind == DLOCK__READ ? "rrenew" : "renew";
    l->release_op = l->rw && spec->kind == DLOCK__READ ? "rrelease" : "release";
    int rc = dlock__redis_keys_of(b->prefix, name, l->rw ? spec->kind : DLOCK__MUTEX, spec->simple,
                                  l->keys, l->key_lens);
    if (rc != DLOCK_OK) {
        free(l);
        return rc;
    }
    if (spec->simple) {
        char *keys[3];
        size_t lens[3];
        rc = dlock__redis_keys_of(b->prefix, name, DLOCK__MUTEX, 0, keys, lens);
        if (rc == DLOCK_OK) {
            l->other = strdup(keys[0]);
            free(keys[0]);
        }
    } else {
        l->other = strdup(l->keys[2]);
    }
    if (rc == DLOCK_OK)
        l->waiting = waiting_key(l);
    if (rc == DLOCK_OK && (l->other == NULL || l->waiting == NULL))
        rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
    if (rc != DLOCK_OK) {
        free(l->keys[0]);
        free(l->other);
        free(l->waiting);
        free(l);
        return rc;
    }
    *out = &l->base;
    return DLOCK_OK;
}

void dlock__rl_lock_free(dlock__store *s, dlock__store_lock *sl)
{
    (void) s;
    if (sl == NULL)
        return;
    free(RLL(sl)->keys[0]);
    free(RLL(sl)->other);
    free(RLL(sl)->waiting);
    free(RLL(sl));
}
