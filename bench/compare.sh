#!/usr/bin/env bash
# Benchmarks dlock side by side with the peer programs in bench/peers (node
# redlock, redis-semaphore, redis-py's Lock) and the bare-hiredis floor
# (bench/peers/limit.c), on one private redis-server, interleaved rounds, and
# writes BENCHMARKS.md and bench/results.png. bench/README.md says what it
# needs: Node.js with npm (the node peers are skipped with a warning
# without them), Debian's python3-redis, gcc and libhiredis-dev.
#
#   bench/compare.sh [--rounds N] [--seconds S] [--threads N] [--procs P]
#
# It takes minutes and loads every core: run it on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
peers=$root/bench/peers

bash scripts/deps.sh
out=build-bench
cmake -S . -B $out -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $out -j"$(nproc)" >/dev/null

gcc -O2 -o $out/limit "$peers/limit.c" -lhiredis -lpthread

# The node peers, at the versions package-lock.json pins (npm ci).
peers_arg=()
if command -v npm >/dev/null && command -v node >/dev/null; then
  if [ ! -d "$peers/node_modules" ]; then
    (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  peers_arg=(--peers "$peers")
else
  echo "compare.sh: node/npm not found: comparing with the floor and redis-py only" >&2
  peers_arg=(--peers "$peers" --no-node)
fi

python3 bench/compare.py --dlock "$root/$out/bin/dlock" --limit "$root/$out/limit" \
  "${peers_arg[@]}" --command "bench/compare.sh $*" "$@"
