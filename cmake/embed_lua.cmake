# SPDX-License-Identifier: MIT
# cmake -DOUT=file.c -DDIR=scripts/ -DSCRIPTS=name:frag+frag,name:,... -P embed_lua.cmake
#
# Writes OUT: the table dlock__scripts[] of scripts.h, one entry per script of
# SCRIPTS, each holding the exact text the Redis server receives with EVAL and
# the SHA1 digest it answers EVALSHA by, both computed here, at build time, so
# that libdlock needs no hash function at run time.
#
# A script's text is its DIR/NAME.lua with the shared fragments listed after
# its ':' (DIR/FRAG.lua, in that order) inserted at its line "-- @prelude",
# or before its first line if it has none: a fast path above the mark then
# does not pay for defining the fragments' functions.
set(mark "-- @prelude\n")
set(body "/* Generated from ${DIR} by cmake/embed_lua.cmake: do not edit. */\n")
string(APPEND body "#include \"scripts.h\"\n\n")
string(APPEND body "const dlock__script dlock__scripts[DLOCK__S_COUNT] = {\n")
string(REPLACE "," ";" SCRIPTS "${SCRIPTS}")
set(count 0)
foreach(entry IN LISTS SCRIPTS)
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 name)
  list(LENGTH parts nparts)
  set(prelude "")
  if(nparts GREATER 1)
    list(GET parts 1 frags)
    string(REPLACE "+" ";" frags "${frags}")
    foreach(frag IN LISTS frags)
      file(READ "${DIR}/${frag}.lua" text)
      string(APPEND prelude "${text}")
    endforeach()
  endif()
  file(READ "${DIR}/${name}.lua" text)
  string(FIND "${text}" "${mark}" at)
  if(at LESS 0)
    set(at 0)
  endif()
  string(SUBSTRING "${text}" 0 ${at} head)
  string(SUBSTRING "${text}" ${at} -1 tail)
  set(text "${head}${prelude}${tail}")
  string(SHA1 sha "${text}")
  string(LENGTH "${text}" len)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n\"\n        \"" text "${text}")
  string(TOUPPER "${name}" id)
  string(APPEND body "    [DLOCK__S_${id}] = {\"${name}\",\n        \"${text}\",\n")
  string(APPEND body "        ${len}, \"${sha}\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
string(APPEND body "};\n\n")
# Every script of the enum has its entry (the list has no duplicates).
string(APPEND body "_Static_assert(${count} == DLOCK__S_COUNT, \"a script of scripts.h is missing\");\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
