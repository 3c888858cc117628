#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmarks dlock beyond one Redis server side by side with the npm peers
# (bench/peers/node_topo.js: redlock v5 and redis-semaphore) on one
# throwaway deployment that the test harness's `store` starts:
#
#   bench/topology.sh redlock [ROUNDS] [SECONDS]   3 independent masters
#   bench/topology.sh cluster [ROUNDS] [SECONDS]   3 masters + 3 replicas
#
# Workloads seq (one worker), par (50 workers, each its own lock) and hot
# (8 processes of one worker on one lock), in ROUNDS interleaved rounds
# (default 3) of SECONDS each (default 3). Prints every run's JSON line,
# then the medians as a Markdown table with dlock's ratio to the best peer.
# Needs Node.js with npm (scripts/deps.sh --bench). Loads every core: quote
# the ratios, not the numbers.
#
# BEFORE=path/to/dlock (a build of an earlier commit, with its own library)
# runs that one too, in the same rounds, as the column "dlock (before)",
# with the ratio after / before: a change measured on one machine in one run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
topo=${1:?usage: bench/topology.sh redlock|cluster [ROUNDS] [SECONDS]}
rounds=${2:-3}
secs=${3:-3}
case $topo in
  redlock | cluster) ;;
  *) echo "topology.sh: $topo: want redlock or cluster" >&2; exit 64 ;;
esac
for tool in node npm; do
  command -v $tool >/dev/null || { echo "topology.sh: $tool not found (scripts/deps.sh --bench)" >&2; exit 1; }
done
out=build-bench
cmake -S . -B $out -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $out -j"$(nproc)" --target dlock_cli store >/dev/null
[ -d bench/peers/node_modules ] ||
  (cd bench/peers && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

tmp=$(mktemp -d)
"$out/bin/store" "$topo" >"$tmp/store.out" 2>"$tmp/store.err" &
store_pid=$!
trap 'kill -INT $store_pid 2>/dev/null; wait $store_pid 2>/dev/null; rm -rf "$tmp"' EXIT
url=
for _ in $(seq 1 600); do
  url=$(head -1 "$tmp/store.out")
  [ -n "$url" ] && break
  kill -0 $store_pid 2>/dev/null || { cat "$tmp/store.err" >&2; exit 1; }
  sleep 0.1
done
ports=$(sed -e 's|^[a-z+]*://||' -e 's|[/?].*||' -e 's|127\.0\.0\.1:||g' <<<"$url")
echo "# $url (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2

node_topo() { (cd bench/peers && node node_topo.js "$topo" "$ports" "$@"); }
results=$tmp/results.jsonl
for r in $(seq 1 "$rounds"); do
  for wl in seq par hot; do
    if [ -n "${BEFORE:-}" ]; then
      if [ $wl = hot ]; then shape="--procs 8"; else shape="--threads 50"; fi
      "$BEFORE" bench -u "$url" --workload $wl $shape --seconds "$secs" |
        sed 's/"lib":"dlock"/"lib":"dlock-before"/' | tee -a "$results"
    fi
    if [ $wl = hot ]; then
      "$out/bin/dlock" bench -u "$url" --workload hot --procs 8 --seconds "$secs" | tee -a "$results"
      for lib in redlock redlock-fast semaphore; do
        bash bench/peers/multi.sh 8 bash -c 'cd bench/peers && node node_topo.js "$@"' _ \
          "$topo" "$ports" hot $lib 1 "$secs" | tee -a "$results"
      done
    else
      "$out/bin/dlock" bench -u "$url" --workload $wl --threads 50 --seconds "$secs" | tee -a "$results"
      for lib in redlock redlock-fast semaphore; do
        node_topo $wl $lib 50 "$secs" | tee -a "$results"
      done
    fi
  done
  echo "# round $r of $rounds done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

python3 - "$results" "$topo" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def wl_of(r):
    return "hot" if r["wl"] in ("hot", "hot-procs") else r["wl"]
def lib_of(r):
    if r["lib"] == "dlock-before":
        return "dlock (before)"
    return "dlock" if r["lib"].startswith("dlock") else r["lib"]
med = {}
for r in rows:
    med.setdefault((lib_of(r), wl_of(r)), []).append(r["cycles_per_s"])
ours = ["dlock"] + (["dlock (before)"] if any(l == "dlock (before)" for l, _ in med) else [])
libs = ours + sorted({l for l, _ in med if l not in ours})
extra = " dlock / before |" if len(ours) > 1 else ""
print(f"| {sys.argv[2]}: cycles/s (median) | " + " | ".join(libs) + " | dlock / best peer |" + extra)
print("|---" * (len(libs) + 2 + (len(ours) > 1)) + "|")
def median_of(l, wl):
    return statistics.median(med[(l, wl)]) if (l, wl) in med else None
for wl in ("seq", "par", "hot"):
    cells, best = [], 0
    for l in libs:
        v = median_of(l, wl)
        cells.append("-" if v is None else f"{v:,.0f}")
        if l not in ours and v is not None:
            best = max(best, v)
    d = median_of("dlock", wl) or 0
    ratio = f"{d / best:.2f}x" if best else "-"
    before = median_of("dlock (before)", wl)
    tail = (f" {d / before:.2f}x |" if before else " - |") if extra else ""
    print(f"| {wl} | " + " | ".join(cells) + f" | {ratio} |" + tail)
PY
