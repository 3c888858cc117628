/* SPDX-License-Identifier: MIT */
/* scripts.c - access to the embedded Lua scripts and their digests, which
 * the build assembled and hashed (cmake/embed_lua.cmake). */
#include "scripts.h"

const dlock__script *dlock__script_get(enum dlock__script_id id)
{
    return &dlock__scripts[id];
}
