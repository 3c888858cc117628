#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# install_test.sh BUILD_DIR SOURCE_DIR: follows the README as a user would.
#
# The README's "Build and install" commands are marked <!-- install_test: X -->
# and run here as written, with HOME set to a temporary directory, so their
# "$HOME/.local" is a fresh prefix the system knows nothing of:
#   install     cmake --install into $HOME/.local
#   pkg-config  a program built through the installed dlock.pc, unmodified
#   cmake       tests/install (whose CMakeLists.txt holds the README's lines)
#               built through find_package(dlock): dlock::dlock and
#               dlock::dlock_static
# Then every program runs against a real redis-server (with_redis.sh), and
# the installed bin/dlock must start without LD_LIBRARY_PATH (its RPATH).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/dlock-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH

fail() {
  echo "install_test: $*" >&2
  exit 1
}

# readme_block NAME: the fenced block after <!-- install_test: NAME -->.
readme_block() {
  local text
  text=$(awk -v tag="<!-- install_test: $1 -->" '
    $0 == tag { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    found && inside { print }' "$src/README.md")
  [ -n "$text" ] || fail "README.md has no block marked install_test: $1"
  printf '%s\n' "$text"
}

# run_block NAME DIR: runs the README's block NAME in DIR, as written.
run_block() {
  local block
  block=$(readme_block "$1")
  (cd "$2" && HOME="$tmp/home" bash -euo pipefail -c "$block") ||
    fail "the README's '$1' commands failed:"$'\n'"$block"
}

# loads_dlock_from PROGRAM: the directory whose libdlock.so.0 PROGRAM loads.
loads_dlock_from() {
  local lib
  lib=$(ldd "$1" | awk '$1 == "libdlock.so.0" { print $3 }')
  [ -n "$lib" ] && dirname "$(readlink -f "$lib")"
}

mkdir -p "$tmp/home" "$tmp/src"
prefix=$tmp/home/.local

# install: the README says `cmake --install build ...` from the source tree.
ln -s "$build" "$tmp/src/build"
run_block install "$tmp/src"
test -f "$prefix/include/dlock.h" || fail "no include/dlock.h"
test -f "$prefix/share/man/man1/dlock.1" || fail "no man page"
test -f "$prefix/share/doc/dlock/LICENSE" || fail "no LICENSE"
test -x "$prefix/bin/dlock" || fail "no bin/dlock"
libdir=$(readlink -f "$prefix/lib")
! grep -rq "$build" "$prefix/lib/pkgconfig" "$prefix/lib/cmake" ||
  fail "the installed package files name the build directory"

# bin/dlock starts from this prefix and uses its libdlock, found through
# its RUNPATH ($ORIGIN/../lib), not through the environment.
out=$("$prefix/bin/dlock" --version) || fail "installed bin/dlock does not start: $out"
grep -q '^dlock [0-9]' <<<"$out" || fail "bin/dlock --version: $out"
[ "$(loads_dlock_from "$prefix/bin/dlock")" = "$libdir" ] ||
  fail "bin/dlock does not load the installed libdlock: $(ldd "$prefix/bin/dlock" | grep dlock)"

# pkg-config, with the .pc file exactly as installed.
mkdir "$tmp/pc"
cp "$src/examples/hello/hello.c" "$tmp/pc/app.c"
run_block pkg-config "$tmp/pc"
bash "$src/tests/support/with_redis.sh" "$tmp/pc/app" >"$tmp/pc/out" 2>&1 ||
  fail "the program built through pkg-config failed: $(cat "$tmp/pc/out")"
grep -q "holding hello with fence" "$tmp/pc/out" || fail "pkg-config program: $(cat "$tmp/pc/out")"
[ "$(loads_dlock_from "$tmp/pc/app")" = "$libdir" ] ||
  fail "the pkg-config program does not load the installed libdlock"

# The static library through pkg-config: no libdlock.so needed to run.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
cc -o "$tmp/pc/app-static" "$tmp/pc/app.c" $(pkg-config --cflags dlock) \
  "$(pkg-config --variable=libdir dlock)/libdlock.a" \
  $(pkg-config --libs-only-l --static dlock | sed 's/-ldlock\b//')
unset PKG_CONFIG_PATH
! ldd "$tmp/pc/app-static" | grep -q libdlock || fail "app-static needs libdlock.so"
bash "$src/tests/support/with_redis.sh" "$tmp/pc/app-static" >"$tmp/pc/out" 2>&1 ||
  fail "the static program failed: $(cat "$tmp/pc/out")"

# CMake: the README's CMakeLists.txt lines are those of tests/install.
lists=$(readme_block cmake-lists)
while IFS= read -r line; do
  [ -z "$line" ] || grep -Fxq -- "$line" "$src/tests/install/CMakeLists.txt" ||
    fail "tests/install/CMakeLists.txt lacks the README's line: $line"
done <<<"$lists"
cp -r "$src/tests/install" "$tmp/consumer"
run_block cmake "$tmp/consumer"
for app in app app_static; do
  test -x "$tmp/consumer/build/$app" || fail "find_package build made no $app"
  bash "$src/tests/support/with_redis.sh" "$tmp/consumer/build/$app" >"$tmp/consumer/out" 2>&1 ||
    fail "$app (find_package) failed: $(cat "$tmp/consumer/out")"
  grep -q "held install-test with fence" "$tmp/consumer/out" || fail "$app: $(cat "$tmp/consumer/out")"
done
[ "$(loads_dlock_from "$tmp/consumer/build/app")" = "$libdir" ] ||
  fail "app (dlock::dlock) does not load the installed libdlock"
! ldd "$tmp/consumer/build/app_static" | grep -q libdlock ||
  fail "app_static (dlock::dlock_static) needs libdlock.so"

echo "installed; built against through pkg-config and find_package (shared and static); ran"
