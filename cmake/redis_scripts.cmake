# SPDX-License-Identifier: MIT
# The Redis backend's Lua scripts, embedded into libdlock as C strings with
# their SHA1 digests, both computed at build time (cmake/embed_lua.cmake).
# Defines DLOCK_REDIS_SCRIPTS_C, the generated source to compile.
#
# Each entry is NAME:FRAGMENTS, FRAGMENTS being the shared .lua files (joined
# by '+') put before the script or at its "-- @prelude" line: queue.lua for
# the scripts that queue or grant, shared.lua too for those of readers and
# semaphores, kinds.lua for those that take a lock (one name is one lock:
# a kind is not taken while another kind of the name is held or waited for).
# Every id of scripts.h has one entry.
set(DLOCK_REDIS_SCRIPTS
    acquire:queue+kinds
    release:queue+kinds
    rw_acquire:queue+shared+kinds
    rw_release:queue+shared+kinds
    sem_acquire:queue+shared+kinds
    sem_release:queue+shared+kinds
    multi_acquire:queue+kinds
    cancel:queue+shared
    extend
    renew
    heartbeat:queue+shared+kinds
    status:queue+shared
    holders:queue)

set(_dir ${PROJECT_SOURCE_DIR}/src/backend/redis/scripts)
set(DLOCK_REDIS_SCRIPTS_C ${PROJECT_BINARY_DIR}/generated/lua_scripts.c)
file(GLOB _lua CONFIGURE_DEPENDS ${_dir}/*.lua)
string(REPLACE ";" "," _list "${DLOCK_REDIS_SCRIPTS}")
add_custom_command(
  OUTPUT ${DLOCK_REDIS_SCRIPTS_C}
  COMMAND ${CMAKE_COMMAND} -DOUT=${DLOCK_REDIS_SCRIPTS_C} -DDIR=${_dir} -DSCRIPTS=${_list}
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake
  DEPENDS ${_lua} ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake
          ${PROJECT_SOURCE_DIR}/cmake/redis_scripts.cmake
  COMMENT "Embedding Lua scripts and their SHA1 digests")
# The generated table includes scripts.h.
set_source_files_properties(${DLOCK_REDIS_SCRIPTS_C} PROPERTIES
                            INCLUDE_DIRECTORIES ${PROJECT_SOURCE_DIR}/src/backend/redis)
