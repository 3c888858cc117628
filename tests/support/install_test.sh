#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_DIR: installs the build into a temporary
# prefix and builds the README's example against it through pkg-config, as a
# user would, with both the shared and the static library; checks the man page.
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d /tmp/dlock-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name dlock.pc)")
export PKG_CONFIG_PATH="$libdir"
# dlock.pc was generated for the configured prefix: point it at this one.
sed -i "s|^prefix=.*|prefix=$prefix|" "$libdir/dlock.pc"

test -f "$prefix/include/dlock.h"
test -f "$prefix/share/man/man1/dlock.1"
test -x "$prefix/bin/dlock"

cc -o "$prefix/hello" "$src/examples/hello/hello.c" $(pkg-config --cflags --libs dlock) \
  -Wl,-rpath,"$(pkg-config --variable=libdir dlock)"
# Nobody listens on port 1: the program runs and reports that clearly.
out=$("$prefix/hello" "redis://127.0.0.1:1" 2>&1 || true)
grep -q "Connection refused" <<<"$out"

cc -o "$prefix/hello-static" "$src/examples/hello/hello.c" \
  $(pkg-config --cflags dlock) "$(pkg-config --variable=libdir dlock)/libdlock.a" \
  $(pkg-config --libs --static hiredis) -lpthread
out=$("$prefix/hello-static" "redis://127.0.0.1:1" 2>&1 || true)
grep -q "Connection refused" <<<"$out"
echo "installed, and built against through pkg-config (shared and static)"
