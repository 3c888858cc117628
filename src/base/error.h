/* SPDX-License-Identifier: MIT */
/* error.h - error codes' text and the calling thread's failure detail.
 *
 * The function that detects a failure records its detail once, with
 * dlock__fail(); a caller that knows more (which lock, which step) puts its
 * context in front with dlock__fail_context(), never by copying the detail
 * and failing again. */
#ifndef DLOCK_BASE_ERROR_H
#define DLOCK_BASE_ERROR_H

#include "dlock.h"

/* Records a printf-style detail for the calling thread and returns code. */
int dlock__fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Puts "<context>: " in front of the calling thread's detail and returns
 * code (so `return dlock__fail_context(rc, "lock '%s'", name);`). */
int dlock__fail_context(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's detail (start of a public call). */
void dlock__clear_error(void);

/* The longest failure detail kept (a quorum's or a cluster's message names
 * each node's reason: 512 cut them mid-word). */
#define DLOCK__DETAIL_MAX 2048

/* text, written by a vsnprintf into size bytes that returned want: if it
 * was cut, ends it after the last whole word that fits, with "...", never
 * mid-word. */
void dlock__fit_words(char *text, size_t size, int want);

/* Keeps the calling thread's detail across calls that may overwrite it
 * (cleanup after a failure): save, clean up, restore. */
typedef struct dlock__saved_error {
    char text[DLOCK__DETAIL_MAX];
} dlock__saved_error;
void dlock__save_error(dlock__saved_error *saved);
void dlock__restore_error(const dlock__saved_error *saved);

#endif
