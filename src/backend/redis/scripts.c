/* scripts.c - assembling the embedded Lua scripts and their digests. */
#include "scripts.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated from the scripts/ folder by cmake/embed_lua.cmake. */
extern const char dlock__lua_common[], dlock__lua_acquire[], dlock__lua_release[],
    dlock__lua_rw_acquire[], dlock__lua_rw_release[], dlock__lua_sem_acquire[],
    dlock__lua_sem_release[], dlock__lua_multi_acquire[], dlock__lua_cancel[], dlock__lua_extend[],
    dlock__lua_renew[], dlock__lua_heartbeat[], dlock__lua_status[];

/* Scripts that queue, grant or keep shared holders start with common.lua. */
static const struct {
    const char *name;
    const char *prelude; /* a shared fragment, or NULL */
    const char *body;
} sources[DLOCK__S_COUNT] = {
    [DLOCK__S_ACQUIRE] = {"acquire", dlock__lua_common, dlock__lua_acquire},
    [DLOCK__S_RELEASE] = {"release", dlock__lua_common, dlock__lua_release},
    [DLOCK__S_RW_ACQUIRE] = {"rw_acquire", dlock__lua_common, dlock__lua_rw_acquire},
    [DLOCK__S_RW_RELEASE] = {"rw_release", dlock__lua_common, dlock__lua_rw_release},
    [DLOCK__S_SEM_ACQUIRE] = {"sem_acquire", dlock__lua_common, dlock__lua_sem_acquire},
    [DLOCK__S_SEM_RELEASE] = {"sem_release", dlock__lua_common, dlock__lua_sem_release},
    [DLOCK__S_MULTI_ACQUIRE] = {"multi_acquire", NULL, dlock__lua_multi_acquire},
    [DLOCK__S_CANCEL] = {"cancel", dlock__lua_common, dlock__lua_cancel},
    [DLOCK__S_EXTEND] = {"extend", NULL, dlock__lua_extend},
    [DLOCK__S_RENEW] = {"renew", NULL, dlock__lua_renew},
    [DLOCK__S_HEARTBEAT] = {"heartbeat", NULL, dlock__lua_heartbeat},
    [DLOCK__S_STATUS] = {"status", dlock__lua_common, dlock__lua_status},
};

static dlock__script scripts[DLOCK__S_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_failed;

static void assemble(void)
{
    for (int i = 0; i < DLOCK__S_COUNT; i++) {
        size_t pre = sources[i].prelude != NULL ? strlen(sources[i].prelude) : 0;
        size_t len = pre + strlen(sources[i].body);
        char *text = malloc(len + 1);
        unsigned char digest[SHA_DIGEST_LENGTH];

        if (text == NULL) {
            init_failed = 1;
            return;
        }
        if (pre > 0)
            memcpy(text, sources[i].prelude, pre);
        strcpy(text + pre, sources[i].body);
        SHA1((const unsigned char *) text, len, digest);
        for (int j = 0; j < SHA_DIGEST_LENGTH; j++)
            snprintf(scripts[i].sha + 2 * j, 3, "%02x", digest[j]);
        scripts[i].name = sources[i].name;
        scripts[i].body = text;
        scripts[i].len = len;
    }
}

int dlock__scripts_init(void)
{
    pthread_once(&once, assemble);
    return init_failed ? -1 : 0;
}

const dlock__script *dlock__script_get(enum dlock__script_id id)
{
    return &scripts[id];
}
