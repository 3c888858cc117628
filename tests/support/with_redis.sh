#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# with_redis.sh PROGRAM [ARGS...]: starts a throwaway redis-server on a free
# loopback port, runs PROGRAM URL ARGS..., stops the server, exits with
# PROGRAM's status.
set -euo pipefail
dir=$(mktemp -d /tmp/dlock-with-redis.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize no >"$dir/log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 500); do
  redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break
  kill -0 "$server" 2>/dev/null || { cat "$dir/log" >&2; exit 2; }
  sleep 0.01
done
program=$1
shift
"$program" "redis://127.0.0.1:$port" "$@"
