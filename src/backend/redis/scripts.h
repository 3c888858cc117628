/* scripts.h - the Lua scripts of the Redis backend and their SHA1 digests,
 * run with EVALSHA and, when the server has not seen them (NOSCRIPT), EVAL. */
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
    DLOCK__S_FENCE,
    DLOCK__S_COUNT
};

typedef struct dlock__script {
    const char *name;
    const char *body; /* full text as sent with EVAL */
    size_t len;
    char sha[41];
} dlock__script;

/* The scripts, assembled and digested once per process. Never NULL after
 * dlock__scripts_init() returned 0. */
const dlock__script *dlock__script_get(enum dlock__script_id id);
int dlock__scripts_init(void);

#endif
