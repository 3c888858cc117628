#!/usr/bin/env bash
# Benchmarks dlock side by side with the peers of ../shared/peers (node
# redlock, redis-semaphore, redis-py's Lock) and the bare-hiredis floor
# (peers/limit.c), on one private redis-server, interleaved rounds, and
# writes BENCHMARKS.md and bench/results.png.
#
#   bench/compare.sh [--rounds N] [--seconds S] [--threads N] [--procs P]
#
# Needs ../shared/peers beside the checkout, Node.js with npm (for the node
# peers; skipped with a warning if absent) and Debian's python3-redis.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
peers_src=$root/../shared/peers

bash scripts/deps.sh
out=build-bench
cmake -S . -B $out -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $out -j"$(nproc)" >/dev/null

[ -f "$peers_src/limit.c" ] || { echo "compare.sh: $peers_src/limit.c not found" >&2; exit 2; }
gcc -O2 -o $out/limit "$peers_src/limit.c" -lhiredis -lpthread

# The node peers, installed in a copy so ../shared stays untouched.
peers_arg=()
if command -v npm >/dev/null && command -v node >/dev/null; then
  mkdir -p $out/peers
  cp "$peers_src"/{node_bench.js,py_bench.py,multi.sh,package.json,package-lock.json} $out/peers/
  (cd $out/peers && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  peers_arg=(--peers "$root/$out/peers")
else
  echo "compare.sh: node/npm not found: comparing with the floor only" >&2
fi

python3 bench/compare.py --dlock "$root/$out/bin/dlock" --limit "$root/$out/limit" \
  "${peers_arg[@]}" --command "bench/compare.sh $*" "$@"
