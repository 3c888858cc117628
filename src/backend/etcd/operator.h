/* SPDX-License-Identifier: MIT */
/* operator.h - the etcd backend's operator calls and listing (operator.c):
 * its query, force_unlock, holders and list (backend.h). */
#ifndef DLOCK_ETCD_OPERATOR_H
#define DLOCK_ETCD_OPERATOR_H

#include "store.h"

#include <stdint.h>

int dlock__etcd_query(dlock__store *s, dlock__store_lock *sl, dlock_status *st, int64_t deadline);
int dlock__etcd_force_unlock(dlock__store *s, dlock__store_lock *sl, int64_t deadline);
int dlock__etcd_holders(dlock__store *s, dlock__store_lock *sl, dlock__holder_sink sink, void *arg,
                        int64_t deadline);
int dlock__etcd_list(dlock__store *s, const char *prefix, dlock__name_sink sink, void *arg,
                     int64_t deadline_us);

#endif
