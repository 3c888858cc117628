/* SPDX-License-Identifier: MIT */
/* random.h - random identifiers (owner tokens, client ids) from the kernel. */
#ifndef DLOCK_BASE_RANDOM_H
#define DLOCK_BASE_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* Fills buf with n random bytes written as 2n hex digits and a NUL
 * (n <= 64). Returns 0, or -1 if the kernel gave no randomness. */
int dlock__random_hex(char *buf, size_t n);

/* A random number in [0, n): the jitter of a retry's delay. 0 when n <= 0,
 * or when the kernel gave no randomness. */
int64_t dlock__random_below(int64_t n);

#endif
