/* SPDX-License-Identifier: MIT */
/* notice.h - the hand-over notice a release sends to the waiter it hands the
 * lock to: "<owner token> <wait id> <fence>" (scripts/queue.lua, grant). The
 * decoder does no I/O, so it can be fuzzed. */
#ifndef DLOCK_REDIS_NOTICE_H
#define DLOCK_REDIS_NOTICE_H

#include <stddef.h>
#include <stdint.h>

#define DLOCK__NOTICE_TOKEN_MAX 64

typedef struct dlock__notice {
    char token[DLOCK__NOTICE_TOKEN_MAX + 1];
    uint64_t wait_id;
    uint64_t fence; /* > 0 */
} dlock__notice;

/* Decodes text[0..len). Returns 0, or -1 if it is not exactly a notice: a
 * token of 1..64 characters [A-Za-z0-9._-], a wait id and a fence in
 * decimal without sign or leading zero (the fence above 0), one space
 * apart, nothing else. */
int dlock__notice_decode(const char *text, size_t len, dlock__notice *out);

#endif
