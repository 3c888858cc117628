/* SPDX-License-Identifier: MIT */
/* names.h - dlock names as GET_LOCK names, and SQL literals (names.c;
 * README.md: name mapping). No I/O, no libmariadb: tests/unit/test_names.c
 * checks the mapping alone. */
#ifndef DLOCK_BACKEND_MY_NAMES_H
#define DLOCK_BACKEND_MY_NAMES_H

#include <stddef.h>

/* GET_LOCK's name limit (MySQL 5.7+: 64 characters; MariaDB: 192 bytes). */
#define DLOCK__MY_NAME_MAX 64
/* dlock's names in the server: "dlock:NAME" as it is, "dlock#HASH" else. */
#define DLOCK__MY_PLAIN_PREFIX  "dlock:"
#define DLOCK__MY_HASHED_PREFIX "dlock#"

/* The GET_LOCK name of a dlock name: *out gets at most DLOCK__MY_NAME_MAX
 * characters (len: DLOCK__MY_NAME_MAX * 4 + 1 holds any). DLOCK_EINVAL
 * (exact: a name that cannot be exact). */
int dlock__my_name(const char *name, int exact, char *out, size_t len);
/* 'text' as an SQL literal: CONVERT(X'..' USING utf8mb4) (binary: X'..'),
 * malloc'ed; NULL when out of memory. */
char *dlock__my_literal(const char *text, int binary);

#endif
