/* SPDX-License-Identifier: MIT */
/* names.h - the znode path of a lock name, and the name of a path. Nothing
 * here does I/O.
 *
 * The lock `name` under the base is BASE/E, E the name as it is, its '/'
 * separating path parts, except for what ZooKeeper cannot hold or would
 * read as another lock's node, which is percent-escaped (escape.h):
 *   - '%' (%25), and the characters ZooKeeper refuses in paths
 *     (U+E000..U+F8FF, U+FFF0..U+FFFF, above U+FFFF: each UTF-8 byte);
 *   - a '/' that would make an empty part: at either end, or next to
 *     another '/' (%2F);
 *   - a part "." or ".." (its dots, %2E);
 *   - a part "locks" or "leases" (its first letter, %6C): a semaphore's
 *     own nodes are BASE/E/locks and BASE/E/leases;
 *   - "zookeeper" as the first part under the base "/" (%7A), ZooKeeper's
 *     own;
 *   - a part that ends as a contender's node does (a recipe marker and ten
 *     digits, recipe.h: "x-lock-0000000001"; its last digit), so that no
 *     lock's path is ever taken for a contender of the lock above it.
 * Every other name's path is the one Curator and kazoo use for it. */
#ifndef DLOCK_ZK_NAMES_H
#define DLOCK_ZK_NAMES_H

#include <stddef.h>

/* The longest lock path (base, '/', escaped name) dlock makes: its
 * contenders' nodes and a semaphore's are made below it in buffers of
 * 1024 bytes. */
#define DLOCK__ZK_PATH_MAX 959

/* Writes the path of `name` under base ("/dlock", or "/") into out (cap
 * bytes). DLOCK_OK, or DLOCK_EINVAL (recorded) when it would be longer
 * than DLOCK__ZK_PATH_MAX. */
int dlock__zk_path_of(const char *base, const char *name, char *out, size_t cap);

/* The name whose escaped form is rel (a path below the base, without the
 * base and its '/'; at_root: the base is "/"), into name (cap bytes): 1 if
 * rel is a name's path, 0 if not (no name is written that way). */
int dlock__zk_name_of(int at_root, const char *rel, char *name, size_t cap);

/* Whether no name's path has rel below the base, or has it as its
 * beginning: rel does not decode (escape.h). Else 0, with what it decodes
 * to in text (cap bytes), to match against a listing's prefix. */
int dlock__zk_no_name_under(const char *rel, char *text, size_t cap);

#endif
