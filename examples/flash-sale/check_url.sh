# SPDX-License-Identifier: MIT
# Sourced by flash_sale.sh and flash_sale_mariadb.sh once $DLOCK and $lock_url are set: the
# lock URL -u gave is tried first, so a mistaken one (a typo, a store not running) is told once,
# before any phase runs, not by every buyer of phase 2. Exits 2 then.
if [ -n "$lock_url" ]; then
  rc=0
  err=$("$DLOCK" status -u "$lock_url" flash-sale 2>&1 >/dev/null) || rc=$?
  if [ $rc -ne 0 ]; then
    echo "flash_sale.sh: the lock's store (-u) cannot be used (dlock status exited $rc):" >&2
    echo "$err" >&2
    exit 2
  fi
fi
