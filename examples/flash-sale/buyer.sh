#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One buyer of the flash-sale demo (seed 003, 秒杀). flash_sale.sh starts eight of these at once.
#
#   buyer.sh nolock ID   buy until sold out, no lock at all (phase 1: oversells)
#   buyer.sh locked ID   buy until sold out, each attempt under `dlock run` (phase 2)
#   buyer.sh once ID     one purchase attempt; what `dlock run` runs in phase 2
#
# Environment: REDIS_PORT (the demo's private redis-server on 127.0.0.1), and for `locked`
# DLOCK (path of the dlock binary) and DLOCK_URL. `once` records DLOCK_TOKEN, the fencing
# token dlock run hands to the command it runs, when it is set.
#
# A purchase is a deliberately non-atomic read-check-write, as naive shop code does it:
#   GET stock; if it is > 0: pause; SET stock n-1; INCR sold; record the purchase.
# Between the GET and the SET another buyer can read the same n, and both sell "the last"
# item. The pause only widens that window so the race shows on every machine.
set -euo pipefail

readonly SOLD_OUT=3       # exit status of `once` when there was nothing left to buy
readonly NO_LOCK=75       # exit status of `dlock run` when the lock did not come within -w
readonly PAUSE=${PAUSE:-0.01}

mode=${1:?usage: buyer.sh nolock|locked|once ID}
id=${2:?usage: buyer.sh nolock|locked|once ID}

rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# One attempt: 0 = bought one item, SOLD_OUT = stock was 0, 1 = Redis error.
# Failures are checked by hand: callers test the status, and `set -e` is off in that case.
buy_once() {
  local n
  n=$(rcli GET stock) || return 1
  case $n in
    '' | *[!0-9-]*) echo "buyer $id: unexpected stock '$n'" >&2; return 1 ;;
  esac
  if [ "$n" -le 0 ]; then
    return "$SOLD_OUT"
  fi
  sleep "$PAUSE"
  # The writes go in one redis-cli call (one process instead of three); they are still
  # separate commands, not a transaction, and the stale n read above is what gets written.
  {
    echo "SET stock $((n - 1))"
    echo "INCR sold"
    echo "RPUSH buyers $id"
    if [ -n "${DLOCK_TOKEN:-}" ]; then
      echo "RPUSH fences $DLOCK_TOKEN"
    fi
  } | rcli >/dev/null || return 1
}

case $mode in
  once)
    buy_once
    ;;
  nolock)
    while :; do
      status=0
      buy_once || status=$?
      case $status in
        0) ;;                                   # bought one; try again
        "$SOLD_OUT") exit 0 ;;
        *) exit 1 ;;
      esac
    done
    ;;
  locked)
    # One `dlock run` process per attempt: the lock is held exactly for one read-check-write.
    while :; do
      status=0
      "$DLOCK" run -q -w 30 -E "$NO_LOCK" flash-sale -- "$0" once "$id" || status=$?
      case $status in
        0) ;;                                   # bought one; try again
        "$SOLD_OUT") exit 0 ;;                  # sold out: this buyer is done
        "$NO_LOCK") echo "buyer $id: lock not acquired within 30 s" >&2; exit 1 ;;
        *) echo "buyer $id: dlock run failed with status $status" >&2; exit 1 ;;
      esac
    done
    ;;
  *)
    echo "buyer.sh: unknown mode '$mode' (nolock, locked or once)" >&2
    exit 2
    ;;
esac
