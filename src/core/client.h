/* client.h - the client object shared by lock handles (internal). */
#ifndef DLOCK_CORE_CLIENT_H
#define DLOCK_CORE_CLIENT_H

#include "../backend/backend.h"
#include "board.h"
#include "renewer.h"

struct dlock_client {
    const dlock__backend_ops *ops;
    void *be;
    dlock__client_cfg cfg;
    dlock__board board;
    dlock__renewer renewer;
};

/* Fills buf with n random bytes as 2n hex digits (plus NUL). */
int dlock__random_hex(char *buf, size_t n);

/* Checks the parts of a lock name every backend shares. */
int dlock__check_name(const char *name);

#endif
