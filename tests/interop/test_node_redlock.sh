#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_node_redlock.sh path/to/dlock WORKDIR: dlock's Redlock and npm
# redlock (v5, the Node.js client most Redlock users run) exclude one
# another on one name over the same 3 masters when dlock takes the name's
# plain key (`dlock run --simple`, the layout node-redlock and redsync
# use). A dlock lock in its own layout also looks at that key, so it is
# refused while node holds the name; node does not look at dlock's layout
# (src/backend/redlock/README.md). The `store` program beside dlock starts the masters; the npm
# packages (tests/interop/node/package-lock.json) are installed by `npm ci`
# into WORKDIR once.
set -u
dlock=${1:?usage: test_node_redlock.sh path/to/dlock WORKDIR}
work=${2:?usage: test_node_redlock.sh path/to/dlock WORKDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
store=$(dirname "$dlock")/store
fail=0
failed() { echo "FAIL: $*" >&2; fail=1; }

for tool in node npm "$store"; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (scripts/deps.sh installs node and npm)" >&2; exit 1; }
done
mkdir -p "$work"
if ! cmp -s "$here/node/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules" ]; then
  cp "$here/node/package.json" "$here/node/package-lock.json" "$work/"
  (cd "$work" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) ||
    { echo "FAIL: npm ci of the node peers in $work" >&2; exit 1; }
fi
cp "$here/node/node_redlock.js" "$work/"
node_redlock() { (cd "$work" && timeout 30 node node_redlock.js "$@"); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-node-redlock.XXXXXX")
store_pid= holder_pid=
cleanup()
{
  [ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null
  exec 7>&- 2>/dev/null
  [ -n "$store_pid" ] && { kill -INT "$store_pid" 2>/dev/null; wait "$store_pid" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT

"$store" redlock >"$tmp/store.out" 2>&1 &
store_pid=$!
url=
for _ in $(seq 1 300); do
  url=$(grep -o '^redlock://[^ ]*' "$tmp/store.out")
  [ -n "$url" ] && break
  kill -0 "$store_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { cat "$tmp/store.out" >&2; echo "FAIL: the redlock store did not start" >&2; exit 1; }
ports=$(sed -e 's|^redlock://||' -e 's|?.*||' -e 's|127\.0\.0\.1:||g' <<<"$url")

# 1. dlock holds (--simple): node is refused
got=$(timeout 60 "$dlock" run --simple -u "$url" -n jobs -- bash -c 'cd "$1" && node node_redlock.js "$2" jobs try' _ "$work" "$ports" 2>"$tmp/err")
rc=$?
[ "$rc" -eq 0 ] || failed "dlock run --simple: exit $rc ($(head -c 300 "$tmp/err"))"
[ "$got" = refused ] || failed "node redlock while dlock run --simple holds 'jobs': '$got', not 'refused'"

# and with nobody holding it, node takes it
got=$(node_redlock "$ports" jobs try)
[ "$got" = taken ] || failed "node redlock on a free 'jobs': '$got', not 'taken'"

# 2. node holds: dlock is refused (exit 1), in either layout, until node lets go
mkfifo "$tmp/hold"
node_redlock "$ports" jobs hold <"$tmp/hold" >"$tmp/holder.out" 2>&1 &
holder_pid=$!
exec 7>"$tmp/hold"
for _ in $(seq 1 300); do
  grep -q . "$tmp/holder.out" && break
  sleep 0.1
done
[ "$(head -1 "$tmp/holder.out")" = held ] || failed "node redlock did not take 'jobs': $(cat "$tmp/holder.out")"
for how in --simple ""; do
  timeout 60 "$dlock" run $how -u "$url" -n -q jobs -- echo ran >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 1 ] || failed "dlock run $how -n while node holds 'jobs': exit $rc, not 1 ($(head -c 300 "$tmp/err"))"
  [ ! -s "$tmp/out" ] || failed "dlock run $how ran its command while node held 'jobs'"
done
exec 7>&-
wait "$holder_pid"
holder_pid=
grep -q released "$tmp/holder.out" || failed "node redlock did not release: $(cat "$tmp/holder.out")"
for how in --simple ""; do
  got=$(timeout 60 "$dlock" run $how -u "$url" -n -q jobs -- echo ran 2>"$tmp/err")
  [ "$got" = ran ] || failed "dlock run $how after node released 'jobs': '$got' ($(head -c 300 "$tmp/err"))"
done

[ "$fail" -eq 0 ] && echo "dlock's Redlock and npm redlock exclude one another"
exit "$fail"
