#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# with_store.sh STORE KIND PROGRAM [ARGS...]: starts a throwaway server of
# KIND with the harness's store program (STORE: build/bin/store), runs
# PROGRAM URL ARGS..., stops the server by its pid, exits with PROGRAM's
# status (2 when the server did not start).
set -uo pipefail
store=${1:?usage: with_store.sh STORE KIND PROGRAM [ARGS...]}
kind=${2:?usage: with_store.sh STORE KIND PROGRAM [ARGS...]}
shift 2
dir=$(mktemp -d /tmp/dlock-with-store.XXXXXX)
"$store" "$kind" >"$dir/url" 2>"$dir/log" &
server=$!
trap 'kill -TERM "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 600); do
  [ -s "$dir/url" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$dir/url" ]; then
  echo "with_store.sh: $kind did not start:" >&2
  cat "$dir/log" >&2
  exit 2
fi
program=$1
shift
"$program" "$(head -1 "$dir/url")" "$@"
