#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the flash-sale demo from a fresh Debian 12 checkout: installs what the demo needs and
# is missing (scripts/deps.sh --demo: a compiler, cmake, the stores' client libraries,
# redis-server; no Java, ZooKeeper or etcd server), builds the dlock command into build/, then
# runs examples/flash-sale/flash_sale.sh. Exits with the demo's status.
#
#   scripts/demo.sh [-u LOCK_URL]     (-u zk://HOST:PORT or etcd://HOST:PORT: the lock in a
#                                      store you run, e.g. one scripts/store.sh started)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/deps.sh --demo

# Configure once; after that the build only recompiles what changed. The demo needs the
# dlock command (and the library it links), not the tests.
build() {
  if [ ! -f build/CMakeCache.txt ]; then
    cmake -S . -B build
  fi
  cmake --build build -j"$(nproc)" --target dlock_cli
}

# The build's chatter stays out of the demo's output, unless the build fails.
echo "building dlock ..."
log=$(mktemp)
if ! build >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "demo.sh: the build failed" >&2
  exit 2
fi
rm -f "$log"

echo
# Options (-u LOCK_URL: the lock in another store) go to the demo.
exec bash examples/flash-sale/flash_sale.sh "$@" "$root/build/bin/dlock"
