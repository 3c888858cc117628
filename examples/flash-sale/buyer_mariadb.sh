#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One buyer of the flash-sale demo on MariaDB (flash_sale.sh --store mariadb starts eight).
#
#   buyer_mariadb.sh nolock ID   buy until sold out, no lock at all (phase 1: oversells)
#   buyer_mariadb.sh locked ID   buy until sold out, each attempt under `dlock run` (phase 2)
#   buyer_mariadb.sh once ID     one fenced purchase; what `dlock run` runs in phase 2
#   buyer_mariadb.sh stale ID    one fenced purchase that pauses its own holder (SIGSTOP of
#                                process group STALE_PGID: its dlock run and itself) between
#                                the read and the write, as a GC pause or a frozen VM would
#
# Environment: MYSQL_HOST, MYSQL_TCP_PORT, MYSQL_USER, MYSQL_PWD, MYSQL_DB (the shop: tables
# stock, sales, refused; flash_sale_mariadb.sh creates them), and for `locked` DLOCK and
# DLOCK_URL. `once` and `stale` write with DLOCK_FENCE, the fencing token of `dlock run`.
#
# A purchase reads the stock, pauses (the window in which another buyer can read the same
# number), then writes. Without a lock (phase 1) the write is the stale read minus one, as
# naive shop code does it: two buyers both sell "the last" item. Under the lock the write is
# the fenced one of docs/fencing-sql.md: it decrements and records its fence only when the
# row's fence is smaller, and 0 rows changed means this holder is stale: it is refused and
# recorded in `refused`, and the buyer stops.
set -euo pipefail

readonly SOLD_OUT=3  # exit status of `once` when there was nothing left to buy
readonly REFUSED=4   # exit status of `once`/`stale` when the fenced write changed no row
readonly NO_LOCK=75  # exit status of `dlock run` when the lock did not come within -w
readonly PAUSE=${PAUSE:-0.01}

mode=${1:?usage: buyer_mariadb.sh nolock|locked|once|stale ID}
id=${2:?usage: buyer_mariadb.sh nolock|locked|once|stale ID}

sql() {
  mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_TCP_PORT" -u "$MYSQL_USER" -N -B \
    "$MYSQL_DB" -e "$1"
}

# The stock left, checked to be a number; fails on a database error.
read_stock() {
  local n
  n=$(sql 'SELECT qty FROM stock WHERE id = 1') || return 1
  case $n in
    '' | *[!0-9-]*) echo "buyer $id: unexpected stock '$n'" >&2; return 1 ;;
  esac
  echo "$n"
}

# phase 1: 0 = bought one, SOLD_OUT, 1 = database error. The write is the stale n - 1.
buy_unlocked() {
  local n
  n=$(read_stock) || return 1
  [ "$n" -gt 0 ] || return "$SOLD_OUT"
  sleep "$PAUSE"
  sql "UPDATE stock SET qty = $n - 1 WHERE id = 1;
       INSERT INTO sales (buyer, fence) VALUES ($id, 0)" || return 1
}

# Under the lock: 0 = bought one, SOLD_OUT, REFUSED (a stale fence), 1 = database error.
# `pause` (stale mode) stops this holder after the read: when it is continued, its lease has
# run out and later holders have written with larger fences.
buy_fenced() {
  local pause=$1 n fence=${DLOCK_FENCE:?buyer_mariadb.sh: no DLOCK_FENCE (run it under dlock run)}
  case $fence in
    '' | *[!0-9]*) echo "buyer $id: unexpected fence '$fence'" >&2; return 1 ;;
  esac
  n=$(read_stock) || return 1
  [ "$n" -gt 0 ] || return "$SOLD_OUT"
  if [ "$pause" = 1 ]; then
    # A stale holder writes before it notices its loss: dlock run's SIGTERM on loss is
    # ignored for this one write (a write already on its way when the pause began).
    trap '' TERM
    [ -z "${STALE_FENCE_FILE:-}" ] || echo "$fence" >"$STALE_FENCE_FILE"
    kill -STOP -- "-${STALE_PGID:?buyer_mariadb.sh: stale needs STALE_PGID}"
  else
    sleep "$PAUSE"
  fi
  local ok
  ok=$(sql "START TRANSACTION;
            UPDATE stock SET qty = qty - 1, fence = $fence WHERE id = 1 AND fence < $fence;
            SET @ok = ROW_COUNT();
            INSERT INTO sales (buyer, fence) SELECT $id, $fence FROM DUAL WHERE @ok = 1;
            INSERT INTO refused (buyer, fence) SELECT $id, $fence FROM DUAL WHERE @ok = 0;
            COMMIT;
            SELECT @ok") || return 1
  case $ok in
    1) return 0 ;;
    0) echo "buyer $id: fence $fence refused (a later holder wrote with a larger one)" >&2
       return "$REFUSED" ;;
    *) echo "buyer $id: unexpected row count '$ok'" >&2; return 1 ;;
  esac
}

case $mode in
  once) buy_fenced 0 ;;
  stale) buy_fenced 1 ;;
  nolock)
    while :; do
      status=0
      buy_unlocked || status=$?
      case $status in
        0) ;;
        "$SOLD_OUT") exit 0 ;;
        *) exit 1 ;;
      esac
    done
    ;;
  locked)
    while :; do
      status=0
      "$DLOCK" run -q -w 30 -E "$NO_LOCK" flash-sale -- "$0" once "$id" || status=$?
      case $status in
        0) ;;
        "$SOLD_OUT") exit 0 ;;
        "$REFUSED") echo "buyer $id: stopped: its fence was refused" >&2; exit 0 ;;
        "$NO_LOCK") echo "buyer $id: lock not acquired within 30 s" >&2; exit 1 ;;
        *) echo "buyer $id: dlock run failed with status $status" >&2; exit 1 ;;
      esac
    done
    ;;
  *)
    echo "buyer_mariadb.sh: unknown mode '$mode' (nolock, locked, once or stale)" >&2
    exit 2
    ;;
esac
