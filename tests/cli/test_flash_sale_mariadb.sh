#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_flash_sale_mariadb.sh path/to/dlock: the flash-sale demo on MariaDB
# (examples/flash-sale/flash_sale.sh --store mariadb, stock 10; the `store`
# program beside dlock starts the server): it must exit 0, sell exactly the
# stock with dlock, and report the paused holder's fenced write refused, once.
set -u
dlock=${1:?usage: test_flash_sale_mariadb.sh path/to/dlock}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(STOCK=10 bash "$root/examples/flash-sale/flash_sale.sh" --store mariadb "$dlock" 2>&1)
status=$?
printf '%s\n' "$out"
fail=0
[ "$status" -eq 0 ] || { echo "FAIL: the demo exited $status, not 0" >&2; fail=1; }
# mode, sold, stock left, oversold, stale refused, fences increasing
if ! printf '%s\n' "$out" | grep -Eq '^dlock run +10 +0 +0 +1 +yes \(10 tokens'; then
  echo "FAIL: no 'dlock run  10  0  0  1  yes (10 tokens' row in the demo's table" >&2
  fail=1
fi
if ! printf '%s\n' "$out" | grep -q 'fence [0-9]* refused'; then
  echo "FAIL: the stale buyer did not say its fence was refused" >&2
  fail=1
fi
exit "$fail"
