# SPDX-License-Identifier: MIT
# redlock://'s one Lua script (src/backend/redlock/node.lua), embedded as a C
# string with its SHA1 digest, both computed when CMake configures (the file
# is a configure dependency: editing it configures again). Defines
# DLOCK_REDLOCK_GENERATED, the folder of the generated redlock_script.h.
set(_src ${PROJECT_SOURCE_DIR}/src/backend/redlock/node.lua)
set(DLOCK_REDLOCK_GENERATED ${PROJECT_BINARY_DIR}/generated/redlock)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_src})
file(READ ${_src} _text)
string(SHA1 _sha "${_text}")
string(LENGTH "${_text}" _len)
string(REPLACE "\\" "\\\\" _text "${_text}")
string(REPLACE "\"" "\\\"" _text "${_text}")
string(REPLACE "\n" "\\n\"\n    \"" _text "${_text}")
file(WRITE ${DLOCK_REDLOCK_GENERATED}/redlock_script.h.tmp
     "/* Generated from src/backend/redlock/node.lua by cmake/redlock_script.cmake: do not edit. */\n"
     "#define DLOCK__REDLOCK_SCRIPT_SHA \"${_sha}\"\n"
     "#define DLOCK__REDLOCK_SCRIPT_LEN ${_len}\n"
     "static const char dlock__redlock_script[] =\n    \"${_text}\";\n")
file(COPY_FILE ${DLOCK_REDLOCK_GENERATED}/redlock_script.h.tmp
     ${DLOCK_REDLOCK_GENERATED}/redlock_script.h ONLY_IF_DIFFERENT)
file(REMOVE ${DLOCK_REDLOCK_GENERATED}/redlock_script.h.tmp)
