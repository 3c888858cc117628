#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The flash-sale demo on MariaDB (flash_sale.sh --store mariadb runs this): the shop is a
# table, and the purchases under the lock are the fenced writes of docs/fencing-sql.md.
#
#   flash_sale_mariadb.sh [-u LOCK_URL] [PATH/TO/dlock]        (default: dlock from PATH)
#
# It starts a throwaway MariaDB (the test harness's `store mariadb`: the `store` program
# beside dlock, or scripts/store.sh) on a free 127.0.0.1 port, creates the shop's tables
#   stock   (id, qty, fence)       one row: 100 items and the last fence that wrote it
#   sales   (seq, buyer, fence)    one row per item sold, in purchase order
#   refused (seq, buyer, fence)    one row per fenced write that changed nothing
# and runs
#   phase 1: buyers SELECT qty / pause / UPDATE qty = n - 1 with no lock: more than 100 sold;
#   phase 2: first a stale holder: it takes the lock 'flash-sale' with a 2 s lease, reads the
#            stock and is paused (SIGSTOP) before its write; the lease runs out, eight buyers
#            take the lock in turn and each purchase is
#              UPDATE stock SET qty = qty - 1, fence = F WHERE id = 1 AND fence < F
#            until the stock is 0; then the stale holder is continued and writes with its old
#            fence: 0 rows changed, its write refused and counted (without the fence its
#            decrement would have sold item 101).
# Exits 0 when phase 2 is correct (exactly the stock sold, fences increasing in purchase
# order, the stale write refused), 1 when it is not, 2 on a set-up problem. The server, its
# temp dir and every buyer go away on every exit path.
#
# The lock lives in the same MariaDB (mysql://, dlock's GET_LOCK session mode) unless -u
# names another store.
set -euo pipefail

readonly STOCK=${STOCK:-100} # the environment may make it smaller (the test suite does)
readonly BUYERS=8
readonly STALE_LEASE=2 # seconds: the stale holder's lease, how long the others wait for it

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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
source "$here/check_url.sh"
command -v mysql >/dev/null ||
  { echo "flash_sale.sh: mysql not found (run scripts/deps.sh --mariadb)" >&2; exit 2; }
store=$(dirname "$DLOCK")/store
[ -x "$store" ] || store=$here/../../scripts/store.sh
if [ ! -x "$store" ] && [ ! -f "$store" ]; then
  echo "flash_sale.sh: no store program beside $DLOCK and no scripts/store.sh" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-flash-sale.XXXXXX")
server_pid=
buyer_pids=()
stale_pid=

# Every background job in its own process group: cleanup stops each buyer's whole group
# (a stopped one is continued so that it can die), then the server.
set -m

# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  local pid
  for pid in "${buyer_pids[@]}" $stale_pid; do
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  for pid in "${buyer_pids[@]}" $stale_pid; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- a throwaway MariaDB ------------------------------------------------------------------------

if [ "${store##*.}" = sh ]; then
  bash "$store" mariadb >"$tmp/url" 2>"$tmp/store.log" &
else
  "$store" mariadb >"$tmp/url" 2>"$tmp/store.log" &
fi
server_pid=$!
for _ in $(seq 1200); do # the first build of scripts/store.sh may take a while
  [ -s "$tmp/url" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
url=$(head -1 "$tmp/url" 2>/dev/null || true)
re='^mysql://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([A-Za-z0-9_]+)$'
if ! [[ $url =~ $re ]]; then
  echo "flash_sale.sh: MariaDB did not start; its log:" >&2
  cat "$tmp/store.log" >&2 || true
  exit 2
fi
export MYSQL_USER=${BASH_REMATCH[1]} MYSQL_PWD=${BASH_REMATCH[2]} MYSQL_HOST=${BASH_REMATCH[3]}
export MYSQL_TCP_PORT=${BASH_REMATCH[4]} MYSQL_DB=${BASH_REMATCH[5]}
export DLOCK DLOCK_URL=${lock_url:-$url}

sql() {
  mysql --protocol=TCP -h "$MYSQL_HOST" -P "$MYSQL_TCP_PORT" -u "$MYSQL_USER" -N -B \
    "$MYSQL_DB" -e "$1"
}

sql "CREATE TABLE stock (id INT PRIMARY KEY, qty INT NOT NULL,
                         fence BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB;
     CREATE TABLE sales (seq INT AUTO_INCREMENT PRIMARY KEY, buyer INT NOT NULL,
                         fence BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB;
     CREATE TABLE refused (seq INT AUTO_INCREMENT PRIMARY KEY, buyer INT NOT NULL,
                           fence BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"

echo "MariaDB on $MYSQL_HOST:$MYSQL_TCP_PORT (database $MYSQL_DB; tables stock, sales, refused)"
echo "stock: $STOCK items, buyers: $BUYERS processes, dlock: $DLOCK"
echo "the lock 'flash-sale' is in ${DLOCK_URL%%://*}://... (${lock_url:+-u}${lock_url:-the same MariaDB})"
echo

# --- one phase ----------------------------------------------------------------------------------

reset_shop() {
  sql "DELETE FROM sales; DELETE FROM refused;
       REPLACE INTO stock (id, qty, fence) VALUES (1, $STOCK, 0)"
}

# run_buyers MODE: BUYERS copies of `buyer_mariadb.sh MODE ID`; fails if any failed.
run_buyers() {
  local mode=$1 i pid failed=0 start end
  start=$(date +%s.%N)
  buyer_pids=()
  for i in $(seq "$BUYERS"); do
    "$here/buyer_mariadb.sh" "$mode" "$i" &
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

per_buyer() {
  sql 'SELECT buyer, COUNT(*) FROM sales GROUP BY buyer ORDER BY buyer' |
    awk '{ printf " #%s:%s", $1, $2 }'
  echo
}

# --- phase 1: no lock ---------------------------------------------------------------------------

echo "phase 1: $BUYERS buyers, no lock ..."
reset_shop
run_buyers nolock || { echo "phase 1: a buyer failed" >&2; exit 2; }
sold1=$(sql 'SELECT COUNT(*) FROM sales')
left1=$(sql 'SELECT qty FROM stock WHERE id = 1')
over1=$((sold1 - STOCK))
echo "  sold $sold1 in ${elapsed}s; per buyer:$(per_buyer)"

# --- phase 2: a stale holder, then every purchase a fenced write under dlock run ----------------

echo "phase 2: a holder paused past its ${STALE_LEASE}s lease, then $BUYERS buyers, each purchase"
echo "         a fenced UPDATE under 'dlock run -w 30 flash-sale' ..."
reset_shop
phase2_ok=1
# (a request timeout below a third of its short lease, as dlock advises for one: a renewal of
# the default 5 s could not be answered late and retried before the lease's end)
case $DLOCK_URL in *\?*) stale_url="$DLOCK_URL&timeout=600ms" ;; *) stale_url="$DLOCK_URL?timeout=600ms" ;; esac
# Its own process group (set -m): the group the buyer stops, dlock run (its pid), the guard
# dlock runs commands under and the buyer itself; read from the inner shell's /proc stat (its
# parent is the guard, not dlock run).
# shellcheck disable=SC2016  # $$ and $0 are the inner shell's: its group, the script
STALE_FENCE_FILE=$tmp/stale.fence "$DLOCK" run -q -u "$stale_url" -L "$STALE_LEASE" -w 30 flash-sale -- \
  bash -c 'STALE_PGID=$(awk "{ print \$5 }" /proc/$$/stat) exec "$0" stale 0' "$here/buyer_mariadb.sh" &
stale_pid=$!
# Stopped (state T) once it has read the stock under the lock; or it ended (a failure).
stopped=0
for _ in $(seq 300); do
  state=$(awk '{ print $3 }' "/proc/$stale_pid/stat" 2>/dev/null || echo gone)
  if [ "$state" = T ]; then
    stopped=1
    break
  fi
  [ "$state" = gone ] || [ "$state" = Z ] && break
  sleep 0.1
done
if [ "$stopped" -ne 1 ]; then
  echo "phase 2: the stale holder did not take the lock and pause" >&2
  exit 2
fi
stale_fence=$(cat "$tmp/stale.fence")
echo "  the stale holder took fence $stale_fence, read the stock and is paused"
run_buyers locked || { echo "phase 2: a buyer failed" >&2; phase2_ok=0; }
sold2=$(sql 'SELECT COUNT(*) FROM sales')
over2=$((sold2 - STOCK))
echo "  sold $sold2 in ${elapsed}s; per buyer:$(per_buyer)"
# Continued: its dlock run notices the loss (exit 75); its write goes out first, with the
# old fence, and changes nothing.
kill -CONT -- "-$stale_pid"
stale_status=0
wait "$stale_pid" || stale_status=$?
stale_pid=
refused=$(sql 'SELECT COUNT(*) FROM refused')
stale_refused=$(sql 'SELECT COUNT(*) FROM refused WHERE buyer = 0')
sold_after=$(sql 'SELECT COUNT(*) FROM sales')
left_after=$(sql 'SELECT qty FROM stock WHERE id = 1')
echo "  the stale holder was continued: its write refused: $stale_refused" \
  "(dlock run exit status $stale_status: the lock was lost)"

fences=$(sql 'SELECT fence FROM sales ORDER BY seq')
nfences=$(printf '%s\n' "$fences" | grep -c . || true)
if step=$(printf '%s\n' "$fences" | awk '
    NR > 1 && $1 + 0 <= prev + 0 && !bad { bad = NR ": " prev " then " $1 }
    { prev = $1 }
    END { if (bad) { print bad; exit 1 } }'); then
  fences2="yes ($nfences tokens, $(printf '%s\n' "$fences" | head -1)..$(printf '%s\n' "$fences" | tail -1))"
else
  fences2="NO (purchase $step)"
  phase2_ok=0
fi
[ "$sold_after" -eq "$STOCK" ] && [ "$left_after" -eq 0 ] || phase2_ok=0
[ "$stale_refused" -eq 1 ] && [ "$refused" -eq 1 ] || phase2_ok=0

# --- result ------------------------------------------------------------------------------------

echo
printf '%-12s %5s %11s %9s %14s  %s\n' mode sold "stock left" oversold "stale refused" \
  "fences strictly increasing"
printf '%-12s %5s %11s %9s %14s  %s\n' "no lock" "$sold1" "$left1" "$over1" - -
printf '%-12s %5s %11s %9s %14s  %s\n' "dlock run" "$sold_after" "$left_after" \
  "$((sold_after - STOCK))" "$refused" "$fences2"
echo

if [ "$over1" -gt 0 ]; then
  echo "Without a lock, $over1 more items were sold than the $STOCK in stock."
else
  echo "Without a lock, this run happened not to oversell (the race is real but timing-dependent)."
fi
if [ "$phase2_ok" -eq 1 ]; then
  echo "With dlock run, exactly $STOCK were sold, every purchase wrote a larger fence, and the"
  echo "holder paused past its lease had its write refused by the database (its fence $stale_fence, not larger than the row's)."
  exit 0
fi
echo "FAILED: with dlock run, $sold_after were sold (expected $STOCK, $over2 over before the stale" \
  "write), stock left $left_after, fenced writes refused $refused (expected 1, by the stale" \
  "holder: $stale_refused), fences: $fences2" >&2
exit 1
