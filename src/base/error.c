/* SPDX-License-Identifier: MIT */
/* error.c - the error taxonomy's text and a per-thread failure detail.
 *
 * A client is shared by threads, so "the detail of the last failure" is kept
 * per thread: each thread sees the reason of its own last failed call. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_detail[DLOCK__DETAIL_MAX];

const char *dlock_strerror(int code)
{
    switch (code) {
    case DLOCK_OK:
        return "success";
    case DLOCK_EINVAL:
        return "invalid argument";
    case DLOCK_ENOMEM:
        return "out of memory";
    case DLOCK_EBUSY:
        return "held by someone else";
    case DLOCK_ETIMEDOUT:
        return "timed out waiting for the lock";
    case DLOCK_EUNREACHABLE:
        return "server unreachable";
    case DLOCK_ELOST:
        return "lock lost";
    case DLOCK_ENOTOWNER:
        return "not the owner of the lock";
    case DLOCK_EPROTO:
        return "invalid reply from server";
    case DLOCK_ESERVER:
        return "server refused the request";
    case DLOCK_ENOTSUP:
        return "not supported by this backend";
    case DLOCK_ECANCELED:
        return "wait cancelled";
    case DLOCK_EDEADLK:
        return "would wait for itself";
    case DLOCK_EQUEUEFULL:
        return "too many local waiters";
    default:
        return "unknown error";
    }
}

const char *dlock_errmsg(void)
{
    return last_detail;
}

const char *dlock_version(void)
{
    return DLOCK_VERSION;
}

void dlock__fit_words(char *text, size_t size, int want)
{
    static const char cut[] = "...";
    if (want < 0 || (size_t) want < size || size < sizeof cut)
        return;
    /* the last word that fits with the "..." after it ends at a space */
    size_t end = size - sizeof cut;
    while (end > 0 && text[end] != ' ')
        end--;
    while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == ';' || text[end - 1] == ','))
        end--;
    if (end == 0) /* one word longer than the room: cut it */
        end = size - sizeof cut;
    memcpy(text + end, cut, sizeof cut);
}

int dlock__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int want = vsnprintf(last_detail, sizeof last_detail, fmt, ap);
    va_end(ap);
    dlock__fit_words(last_detail, sizeof last_detail, want);
    return code;
}

int dlock__fail_context(int code, const char *fmt, ...)
{
    char context[sizeof last_detail], detail[sizeof last_detail];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    /* context, ": ", then as much of the old detail as fits */
    memcpy(detail, last_detail, sizeof detail);
    size_t n = strlen(context);
    memcpy(last_detail, context, n + 1);
    if (detail[0] != '\0' && n + 2 < sizeof last_detail) {
        memcpy(last_detail + n, ": ", 3);
        n += 2;
        size_t more = strnlen(detail, sizeof detail - 1);
        int cut = more > sizeof last_detail - 1 - n;
        if (cut)
            more = sizeof last_detail - 1 - n;
        memcpy(last_detail + n, detail, more);
        last_detail[n + more] = '\0';
        if (cut)
            dlock__fit_words(last_detail, sizeof last_detail, (int) sizeof last_detail);
    }
    return code;
}

void dlock__clear_error(void)
{
    last_detail[0] = '\0';
}

void dlock__save_error(dlock__saved_error *saved)
{
    snprintf(saved->text, sizeof saved->text, "%s", last_detail);
}

void dlock__restore_error(const dlock__saved_error *saved)
{
    snprintf(last_detail, sizeof last_detail, "%s", saved->text);
}
