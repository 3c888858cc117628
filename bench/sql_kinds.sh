#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The lock family on the SQL lock tables, dlock against itself: the mutex,
# the read lock, the write lock and the semaphore (2 permits, 1 taken a
# cycle) on PostgreSQL's table mode (postgres://...?mode=table) and
# MariaDB's (mysql://, its default), one throwaway server of each (the test
# harness's `store`):
#
#   bench/sql_kinds.sh [ROUNDS] [SECONDS]
#
# Workloads seq (one worker, its own lock) and par (50 threads of one
# client, each its own lock), in ROUNDS interleaved rounds (default 3) of
# SECONDS each (default 3). Prints every run's JSON line, then the medians
# as a Markdown table with each kind's ratio to the mutex of its store and
# workload: what a kind costs beyond the mutex, on one machine in one run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
rounds=${1:-3}
secs=${2:-3}
out=build-bench
bash scripts/deps.sh --bench
cmake -S . -B $out -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $out -j"$(nproc)" --target dlock_cli store >/dev/null

tmp=$(mktemp -d)
pids=()
stop() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap stop EXIT
start() { # KIND: its URL on stdout, once the server is up
  $out/bin/store "$1" >"$tmp/$1" 2>&1 &
  pids+=($!)
  for _ in $(seq 120); do
    grep -q '://' "$tmp/$1" && break
    sleep 0.5
  done
  grep -o '^[a-z]*://[^ ]*' "$tmp/$1" | head -1
}
start postgres >"$tmp/pg.url"
start mariadb >"$tmp/my.url"
urls=("$(cat "$tmp/pg.url")?mode=table" "$(cat "$tmp/my.url")")
for u in "${urls[@]}"; do
  [ -n "${u%%\?*}" ] || { echo "sql_kinds.sh: a server did not start: $(cat "$tmp"/postgres "$tmp"/mariadb)" >&2; exit 1; }
done
lines=$tmp/lines
for round in $(seq "$rounds"); do
  for u in "${urls[@]}"; do
    for wl in seq par; do
      for k in mutex read write semaphore; do
        line=$($out/bin/dlock bench -u "$u" --workload $wl --kind $k --seconds "$secs")
        echo "$line"
        echo "{\"store\":\"${u%%:*}\",${line#\{}" >>"$lines"
      done
    done
  done
done
python3 - "$lines" <<'PY'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["store"], r["wl"], r["kind"])].append(r)
print("| store | workload | kind | cycles/s | p50 µs | p99 µs | / mutex | runs (cycles/s) |")
print("|---|---|---|---:|---:|---:|---:|---|")
for store in ("postgres", "mysql"):
    for wl in ("seq", "par"):
        base = statistics.median(r["cycles_per_s"] for r in runs[(store, wl, "mutex")])
        for kind in ("mutex", "read", "write", "semaphore"):
            rs = runs[(store, wl, kind)]
            med = statistics.median(r["cycles_per_s"] for r in rs)
            p50 = statistics.median(r["p50_us"] for r in rs)
            p99 = statistics.median(r["p99_us"] for r in rs)
            each = " ".join(str(round(r["cycles_per_s"])) for r in rs)
            print(f"| {store} | {wl} | {kind} | {med:.0f} | {p50:.0f} | {p99:.0f} | {med / base:.2f}x | {each} |")
PY
