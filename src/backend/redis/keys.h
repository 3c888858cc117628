/* SPDX-License-Identifier: MIT */
/* keys.h - where a lock lives in Redis: the keys of (prefix, name, kind),
 * and the lock a key belongs to. Nothing here does I/O.
 *
 * Every key of lock N under prefix P begins with P:{E}, E being N as it
 * is, except that a first '}' or '%' of N is written %7D or %25 (escape.h):
 * the hash tag {E} is then never empty, so all of a lock's keys share one
 * Redis Cluster slot, and a name that begins with a tag of its own
 * ("{acct}:1") shares the slot of every name that begins with it (its tag
 * is "{acct"). The prefix holds no brace (URL option prefix=), so the first
 * '{' of a key follows P:, and no part of a key after the name holds a '}'
 * (kinds, derived keys, owner tokens and client ids do not), so the last
 * '}' closes the name: a key names one lock or none.
 *
 *   P:{E}        mutex (plain and fair)     P:{E}:rw   read-write lock
 *   P:{E}:sem    semaphore                  N          interop key (simple)
 *
 * and the keys derived from each (scripts/README.md): L:queue,
 * L:w:<token>, L:wake:<client id>, L:holders, L:exp, L:used, L:cap. Every
 * kind of a name, the interop lock too, counts fences on one counter, the
 * mutex's P:{E}:fence: one name is one lock, and its fences one sequence
 * (an old read-write lock's P:{E}:rw:fence, or semaphore's, is no longer
 * written; the server's clock keeps fences above them). The interop
 * key N is the name itself, the key other libraries use: it belongs to
 * whoever names it, not to this layout. */
#ifndef DLOCK_REDIS_KEYS_H
#define DLOCK_REDIS_KEYS_H

#include "../backend.h"

#include <stddef.h>

/* The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag
 * (the first {...} that is not empty), else of the whole key. */
unsigned dlock__redis_slot(const char *key, size_t len);

/* The keys of a lock, in one malloc'ed block that keys[0] begins (free
 * keys[0] alone), with their lengths: its base key (keys[0]: L, or N in
 * simple mode), its name's fence counter (keys[1]) and its name N
 * (keys[2], the interop key, which the scripts that take a lock look at).
 * DLOCK_OK or DLOCK_ENOMEM (recorded). */
int dlock__redis_keys_of(const char *prefix, const char *name, enum dlock__kind kind, int simple,
                         char *keys[3], size_t lens[3]);

/* The lock a key of prefix's layout belongs to: 1 with its name in name
 * (cap bytes) and *rest at what follows the name's tag ("", ":rw:queue",
 * ":fence"...), 0 for any other key (another prefix's, an owner record, a
 * tag that is no name's encoding). */
int dlock__redis_key_lock(const char *prefix, const char *key, size_t len, char *name, size_t cap,
                          const char **rest);

/* The SCAN pattern matching the keys of every lock of prefix whose name
 * starts with name_prefix ("" for all). malloc'ed; NULL when out of
 * memory. */
char *dlock__redis_list_pattern(const char *prefix, const char *name_prefix);

/* A prefix= option a key can start with: 1..DLOCK__REDIS_PREFIX_MAX letters,
 * digits and _-.:/ (DLOCK_EINVAL saying so otherwise). */
#define DLOCK__REDIS_PREFIX_MAX 64
int dlock__redis_check_prefix(const char *p);

#endif
