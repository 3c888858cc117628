/* SPDX-License-Identifier: MIT */
/* scripts.h - the Lua scripts of the Redis backend and their SHA1 digests,
 * run with EVALSHA and, when the server has not seen them (NOSCRIPT), EVAL.
 *
 * The table is generated at build time by cmake/embed_lua.cmake from the
 * .lua files in scripts/ (see cmake/redis_scripts.cmake for which shared
 * fragments each script gets): text and digest are constants, so nothing is
 * assembled or hashed at run time. */
#ifndef DLOCK_REDIS_SCRIPTS_H
#define DLOCK_REDIS_SCRIPTS_H

#include <stddef.h>

enum dlock__script_id {
    DLOCK__S_ACQUIRE,
    DLOCK__S_RELEASE,
    DLOCK__S_RW_ACQUIRE,
    DLOCK__S_RW_RELEASE,
    DLOCK__S_SEM_ACQUIRE,
    DLOCK__S_SEM_RELEASE,
    DLOCK__S_MULTI_ACQUIRE,
    DLOCK__S_CANCEL,
    DLOCK__S_EXTEND,
    DLOCK__S_RENEW,
    DLOCK__S_HEARTBEAT,
    DLOCK__S_STATUS,
    DLOCK__S_HOLDERS,
    DLOCK__S_COUNT
};

typedef struct dlock__script {
    const char *name;
    const char *body; /* full text as sent with EVAL */
    size_t len;
    char sha[41]; /* SHA1 of body, lower-case hex */
} dlock__script;

/* Generated (build/generated/lua_scripts.c), indexed by dlock__script_id. */
extern const dlock__script dlock__scripts[DLOCK__S_COUNT];

/* The script id; never NULL. */
const dlock__script *dlock__script_get(enum dlock__script_id id);
#endif
