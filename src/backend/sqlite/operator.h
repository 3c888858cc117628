/* SPDX-License-Identifier: MIT */
/* operator.h - operator calls on the SQLite store (operator.c). */
#ifndef DLOCK_SQLITE_OPERATOR_H
#define DLOCK_SQLITE_OPERATOR_H

#include "internal.h"

int dlock__sq_query(dlock__store *st, dlock__store_lock *sl, dlock_status *out,
                    int64_t deadline_us);
int dlock__sq_force_unlock(dlock__store *st, dlock__store_lock *sl, int64_t deadline_us);
int dlock__sq_holders(dlock__store *st, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                      int64_t deadline_us);
int dlock__sq_list(dlock__store *st, const char *prefix, dlock__name_sink sink, void *arg,
                   int64_t deadline_us);

#endif
