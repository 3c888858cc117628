#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The flash-sale demo (seed 003, 秒杀): eight buyer processes race for a stock of 100 items.
#
#   flash_sale.sh [--store redis|mariadb] [-u LOCK_URL] [PATH/TO/dlock]   (default: dlock from PATH)
#
# --store mariadb runs the same demo with the shop in a MariaDB table and each purchase a fenced
# UPDATE, and a holder paused past its lease refused by the database (flash_sale_mariadb.sh).
#
# It starts a private redis-server on a free 127.0.0.1 port in a temp dir (the shop: its stock
# and sales), then
#   phase 1: buyers do GET stock / pause / SET stock n-1 with no lock: more than 100 are sold;
#   phase 2: each purchase runs under `dlock run -w 30 flash-sale -- ...`: exactly 100 are sold,
#            and the fencing tokens the purchases record increase strictly in purchase order.
# Exits 0 when phase 2 is correct, 1 when it is not (phase 1 overselling is expected, not
# required), 2 on a set-up problem. The server and the temp dir go away on every exit path.
#
# The lock lives in the same redis-server unless -u names another store: the same demo with the
# lock in ZooKeeper or etcd is `-u zk://HOST:PORT` or `-u etcd://HOST:PORT` (only the URL changes).
set -euo pipefail

readonly STOCK=${STOCK:-100} # the environment may make it smaller (the test suite does)
readonly BUYERS=8

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case ${1:-} in
  -h | --help)
    echo "usage: flash_sale.sh [--store redis|mariadb] [-u LOCK_URL] [PATH/TO/dlock]"
    echo "  the flash-sale demo: 8 buyers race for a stock of $STOCK, without a lock, then each"
    echo "  purchase under 'dlock run'; -u puts the lock in another store (zk://, etcd://, ...)"
    exit 0
    ;;
esac
if [ "${1:-}" = --store ]; then
  case ${2:-} in
    redis) shift 2 ;;
    mariadb) shift 2; exec bash "$here/flash_sale_mariadb.sh" "$@" ;;
    *) echo "flash_sale.sh: --store wants redis or mariadb" >&2; exit 2 ;;
  esac
fi
lock_url=
if [ "${1:-}" = -u ]; then
  lock_url=${2:?flash_sale.sh: -u needs a URL}
  shift 2
fi
DLOCK=${1:-$(command -v dlock || true)}
if [ -z "$DLOCK" ] || [ ! -x "$DLOCK" ]; then
  echo "flash_sale.sh: no dlock binary (give its path as the first argument)" >&2
  exit 2
fi
DLOCK=$(cd "$(dirname "$DLOCK")" && pwd)/$(basename "$DLOCK")
# A lock URL of -u is tried first (check_url.sh).
source "$here/check_url.sh"
for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "flash_sale.sh: $tool not found (run scripts/deps.sh)" >&2; exit 2; }
done

# --- private redis-server ---------------------------------------------------------------------

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-flash-sale.XXXXXX")
server_pid=
buyer_pids=()

# Job control puts every background job (the server, each buyer with its dlock run and
# redis-cli children) in its own process group: Ctrl-C reaches only this script, and cleanup
# stops each buyer's whole group first, then the server the buyers were talking to.
set -m

# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  local pid
  for pid in "${buyer_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${buyer_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The port is free when python3 releases it; another program could take it before
# redis-server binds, so a failed start is retried on a new port.
for _ in 1 2 3 4 5; do
  REDIS_PORT=$(free_port)
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$tmp" --save '' --appendonly no \
    --logfile "$tmp/redis.log" --daemonize no &
  server_pid=$!
  for _ in $(seq 50); do
    if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" PING 2>/dev/null | grep -q PONG; then
      break 2
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
done
if [ -z "$server_pid" ]; then
  echo "flash_sale.sh: redis-server did not start; its log:" >&2
  cat "$tmp/redis.log" >&2 || true
  exit 2
fi
export REDIS_PORT DLOCK
export DLOCK_URL=${lock_url:-"redis://127.0.0.1:$REDIS_PORT"}

rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

echo "redis-server on 127.0.0.1:$REDIS_PORT (temp dir $tmp)"
echo "stock: $STOCK items, buyers: $BUYERS processes, dlock: $DLOCK"
if [ -n "$lock_url" ]; then
  echo "the lock 'flash-sale' is in the store -u gave (${lock_url%%://*}://...)"
fi
echo

# --- one phase: reset the shop, start the buyers, wait for all of them ------------------------

# run_phase MODE: runs BUYERS copies of `buyer.sh MODE ID`; fails if any buyer failed.
run_phase() {
  local mode=$1 i pid failed=0 start end
  rcli DEL stock sold buyers fences >/dev/null
  rcli SET stock "$STOCK" >/dev/null
  rcli SET sold 0 >/dev/null
  start=$(date +%s.%N)
  buyer_pids=()
  for i in $(seq "$BUYERS"); do
    "$here/buyer.sh" "$mode" "$i" &
    buyer_pids+=($!)
  done
  for pid in "${buyer_pids[@]}"; do
    wait "$pid" || failed=1
  done
  buyer_pids=()
  end=$(date +%s.%N)
  elapsed=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
  return "$failed"
}

# Prints how many items each buyer got, from the `buyers` list of the current phase.
per_buyer() {
  rcli LRANGE buyers 0 -1 | sort -n | uniq -c | awk '{ printf " #%s:%s", $2, $1 }'
  echo
}

# --- phase 1: no lock ---------------------------------------------------------------------------

echo "phase 1: $BUYERS buyers, no lock ..."
run_phase nolock || { echo "phase 1: a buyer failed" >&2; exit 2; }
sold1=$(rcli GET sold)
left1=$(rcli GET stock)
over1=$((sold1 - STOCK))
echo "  sold $sold1 in ${elapsed}s; per buyer:$(per_buyer)"

# --- phase 2: every purchase under dlock run ---------------------------------------------------

echo "phase 2: $BUYERS buyers, each purchase under 'dlock run -w 30 flash-sale' ..."
phase2_ok=1
run_phase locked || { echo "phase 2: a buyer failed" >&2; phase2_ok=0; }
sold2=$(rcli GET sold)
left2=$(rcli GET stock)
over2=$((sold2 - STOCK))
echo "  sold $sold2 in ${elapsed}s; per buyer:$(per_buyer)"

# The fences were pushed inside the locked section, so list order is purchase order; each
# must be larger than the one before (a stale holder would show up as a step down).
fences=$(rcli LRANGE fences 0 -1)
nfences=$(printf '%s\n' "$fences" | grep -c . || true)
if [ "$nfences" -ne "$sold2" ]; then
  fences2="NO ($nfences tokens for $sold2 purchases)"
  phase2_ok=0
# Fences are 64-bit (ZooKeeper's are near 2^61): awk's numbers are doubles, so they are
# compared as decimal strings, by length first.
elif step=$(printf '%s\n' "$fences" | awk '
    function le(a, b) { return length(a) < length(b) || (length(a) == length(b) && a "" <= b "") }
    NR > 1 && le($1, prev) && !bad { bad = NR ": " prev " then " $1 }
    { prev = $1 }
    END { if (bad) { print bad; exit 1 } }'); then
  fences2="yes ($nfences tokens, $(printf '%s\n' "$fences" | head -1)..$(printf '%s\n' "$fences" | tail -1))"
else
  fences2="NO (a token was not larger than the one before: purchase $step)"
  phase2_ok=0
fi
[ "$sold2" -eq "$STOCK" ] && [ "$left2" -eq 0 ] || phase2_ok=0

# --- result ------------------------------------------------------------------------------------

echo
printf '%-12s %5s %11s %9s  %s\n' mode sold "stock left" oversold "fences strictly increasing"
printf '%-12s %5s %11s %9s  %s\n' "no lock" "$sold1" "$left1" "$over1" -
printf '%-12s %5s %11s %9s  %s\n' "dlock run" "$sold2" "$left2" "$over2" "$fences2"
echo

if [ "$over1" -gt 0 ]; then
  echo "Without a lock, $over1 more items were sold than the $STOCK in stock."
else
  echo "Without a lock, this run happened not to oversell (the race is real but timing-dependent)."
fi
if [ "$phase2_ok" -eq 1 ]; then
  echo "With dlock run, exactly $STOCK were sold, and every purchase carried a larger fencing token."
  exit 0
fi
echo "FAILED: with dlock run, $sold2 were sold (expected $STOCK), stock left $left2, fences: $fences2" >&2
exit 1
