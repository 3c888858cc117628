#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the flash-sale demo from a fresh Debian 12 checkout: installs what the demo needs and
# is missing (scripts/deps.sh --demo: a compiler, cmake, the stores' client libraries,
# redis-server; no Java, ZooKeeper or etcd server), builds the dlock command into build/, then
# runs examples/flash-sale/flash_sale.sh. Exits with the demo's status.
#
#   scripts/demo.sh [-u LOCK_URL]     (-u zk://HOST:PORT or etcd://HOST:PORT: the lock in a
#                                      store you run, e.g. one scripts/store.sh started)
#   scripts/demo.sh --store mariadb [-u LOCK_URL]
#                                     the shop in a throwaway MariaDB (the test harness's
#                                     `store`, built too), each purchase a fenced UPDATE, and
#                                     a holder paused past its lease refused by the database
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

case ${1:-} in
  -h | --help)
    sed -n '3,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac

targets=(dlock_cli)
deps=(--demo)
if [ "${1:-}" = --store ]; then
  case ${2:-} in
    redis) ;;
    mariadb) targets+=(store) deps=(--mariadb) ;;
    *) echo "demo.sh: --store wants redis or mariadb" >&2; exit 2 ;;
  esac
fi

bash scripts/deps.sh "${deps[@]}"

# Configure once; after that the build only recompiles what changed. The demo needs the
# dlock command (and the library it links), not the tests.
build() {
  if [ ! -f build/CMakeCache.txt ]; then
    cmake -S . -B build
  fi
  cmake --build build -j"$(nproc)" --target "${targets[@]}"
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
# Options (--store, -u LOCK_URL: the lock in another store) go to the demo.
exec bash examples/flash-sale/flash_sale.sh "$@" "$root/build/bin/dlock"
