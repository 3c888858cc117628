/* SPDX-License-Identifier: MIT */
/* text.h - checks of the text a caller gives: lock names, list prefixes,
 * owner labels. */
#ifndef DLOCK_BASE_TEXT_H
#define DLOCK_BASE_TEXT_H

#include <stddef.h>

/* Checks the parts of a lock name every store shares. */
int dlock__check_name(const char *name);
/* DLOCK_OK if s is at most max bytes of UTF-8 without control characters;
 * else DLOCK_EINVAL naming it as `what` ("lock name") of `whats` ("names"). */
int dlock__check_text(const char *s, size_t max, const char *what, const char *whats);

#endif
