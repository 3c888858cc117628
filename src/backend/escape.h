/* SPDX-License-Identifier: MIT */
/* escape.h - the escape every store uses for what its keys or paths cannot
 * hold of a lock name, or would read as structure.
 *
 * One name is one lock on every store (include/dlock.h): every name of
 * UTF-8 text is taken, and each store writes it into its keyspace one to
 * one. Where a store cannot take a byte as it is (a character ZooKeeper
 * refuses, a '/' that would make another lock's range on etcd), it writes
 * the byte as '%' and two upper-case hex digits, and '%' itself as "%25"
 * (on the stores that escape anything), so every other name is written as
 * it is and peers (Curator, etcdctl, redis-py) see the name they know.
 * Decoding is the same for every store; which bytes a store escapes is its
 * own (redis/keys.h, zk/names.h, etcd/names.h), and a key or path is a
 * lock's only when encoding its decoded name gives it back (canonical).
 * Nothing here does I/O. */
#ifndef DLOCK_BACKEND_ESCAPE_H
#define DLOCK_BACKEND_ESCAPE_H

#include <stddef.h>

/* Writes c as "%XX" at out (3 bytes, no NUL). Returns 3. */
size_t dlock__escape_byte(char *out, unsigned char c);

/* Decodes n bytes of text with %XX escapes into out (cap bytes, NUL
 * included). Returns the decoded length, or -1 when a '%' is not followed
 * by two hex digits, the text decodes to a NUL, or the result does not
 * fit. */
long dlock__unescape(const char *in, size_t n, char *out, size_t cap);

#endif
