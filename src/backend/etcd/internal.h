/* SPDX-License-Identifier: MIT */
/* internal.h - the client's transport (transport.h), under the name
 * tests/backend/test_etcd_wire.c includes it by (for
 * dlock__etcd_endpoint_failed). Code of this folder includes transport.h. */
#ifndef DLOCK_ETCD_INTERNAL_H
#define DLOCK_ETCD_INTERNAL_H

#include "transport.h"

#endif
