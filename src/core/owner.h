/* SPDX-License-Identifier: MIT */
/* owner.h - who holds a lock: the line each client records with its holds
 * (host, pid, start time, label), and reading it back. */
#ifndef DLOCK_CORE_OWNER_H
#define DLOCK_CORE_OWNER_H

#include "dlock.h"

#include <stddef.h>

#define DLOCK__LABEL_MAX 63

/* The client's line: "dlock1 HOST PID STARTED_MS LABEL" (LABEL may be empty
 * and may hold spaces; it is last). label is checked (DLOCK_EINVAL). */
int dlock__owner_info_make(const char *label, char *out, size_t len);

/* Reads a line made by dlock__owner_info_make() into h's host, pid,
 * started_ms and label (pointing into buf, a copy of info). A line it
 * cannot read leaves them "" and 0. */
void dlock__owner_info_read(const char *info, dlock_holder *h, char *buf, size_t len);

#endif
