/* scripts.c - assembling the embedded Lua scripts and their digests. */
#include "scripts.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated from the scripts/ folder by cmake/embed_lua.cmake. */
extern const char dlock__lua_queue[], dlock__lua_shared[], dlock__lua_acquire[],
    dlock__lua_release[], dlock__lua_rw_acquire[], dlock__lua_rw_release[],
    dlock__lua_sem_acquire[], dlock__lua_sem_release[], dlock__lua_multi_acquire[],
    dlock__lua_cancel[], dlock__lua_extend[], dlock__lua_renew[], dlock__lua_heartbeat[],
    dlock__lua_status[], dlock__lua_fence[];

/* A script is its body with shared functions before it: queue.lua for the
 * scripts that queue or grant, and shared.lua too for those of readers and
 * semaphores. The functions go at the body's line "-- @prelude" if it has
 * one, so that a fast path above it does not pay for defining them. */
static const struct {
    const char *name;
    const char *prelude[2]; /* shared fragments, or NULL */
    const char *body;
} sources[DLOCK__S_COUNT] = {
    [DLOCK__S_ACQUIRE] = {"acquire", {dlock__lua_queue}, dlock__lua_acquire},
    [DLOCK__S_RELEASE] = {"release", {dlock__lua_queue}, dlock__lua_release},
    [DLOCK__S_RW_ACQUIRE] = {"rw_acquire",
                             {dlock__lua_queue, dlock__lua_shared},
                             dlock__lua_rw_acquire},
    [DLOCK__S_RW_RELEASE] = {"rw_release",
                             {dlock__lua_queue, dlock__lua_shared},
                             dlock__lua_rw_release},
    [DLOCK__S_SEM_ACQUIRE] = {"sem_acquire",
                              {dlock__lua_queue, dlock__lua_shared},
                              dlock__lua_sem_acquire},
    [DLOCK__S_SEM_RELEASE] = {"sem_release",
                              {dlock__lua_queue, dlock__lua_shared},
                              dlock__lua_sem_release},
    [DLOCK__S_MULTI_ACQUIRE] = {"multi_acquire", {dlock__lua_queue}, dlock__lua_multi_acquire},
    [DLOCK__S_CANCEL] = {"cancel", {dlock__lua_queue, dlock__lua_shared}, dlock__lua_cancel},
    [DLOCK__S_EXTEND] = {"extend", {NULL}, dlock__lua_extend},
    [DLOCK__S_RENEW] = {"renew", {NULL}, dlock__lua_renew},
    [DLOCK__S_HEARTBEAT] = {"heartbeat", {NULL}, dlock__lua_heartbeat},
    [DLOCK__S_STATUS] = {"status", {dlock__lua_queue, dlock__lua_shared}, dlock__lua_status},
    [DLOCK__S_FENCE] = {"fence", {dlock__lua_queue}, dlock__lua_fence},
};

#define PRELUDE_MARK "-- @prelude\n"

static dlock__script scripts[DLOCK__S_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_failed;

static void assemble(void)
{
    for (int i = 0; i < DLOCK__S_COUNT; i++) {
        const char *body = sources[i].body, *mark = strstr(body, PRELUDE_MARK);
        size_t head = mark != NULL ? (size_t) (mark - body) : 0, len = strlen(body);
        for (int k = 0; k < 2 && sources[i].prelude[k] != NULL; k++)
            len += strlen(sources[i].prelude[k]);
        char *text = malloc(len + 1), *p = text;
        unsigned char digest[SHA_DIGEST_LENGTH];

        if (text == NULL) {
            init_failed = 1;
            return;
        }
        memcpy(p, body, head);
        p += head;
        for (int k = 0; k < 2 && sources[i].prelude[k] != NULL; k++)
            p = stpcpy(p, sources[i].prelude[k]);
        strcpy(p, body + head);
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
