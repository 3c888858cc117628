#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the flash-sale demo from a fresh Debian 12 checkout: installs what is missing
# (scripts/deps.sh), builds dlock into build/, then runs examples/flash-sale/flash_sale.sh.
# Exits with the demo's status.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/deps.sh

# Configure once; after that the build only recompiles what changed.
build() {
  if [ ! -f build/CMakeCache.txt ]; then
    cmake -S . -B build
  fi
  cmake --build build -j"$(nproc)"
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
