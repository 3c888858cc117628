#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_store.sh SOURCE_DIR BUILD_DIR DLOCK KIND...: the README's way to try a
# store, for each KIND: scripts/store.sh KIND starts a server and prints its
# URL; a lock taken there with the dlock command is held in that server (a
# second dlock asks it while the first holds the lock); Ctrl-C (SIGINT) stops
# the server (its port closed), removes its temp dir and exits 0.
set -euo pipefail
src=$1 build=$2 dlock=$3
shift 3
tmp=$(mktemp -d /tmp/dlock-test-store.XXXXXX)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

fail() {
  echo "test_store: $*" >&2
  cat "$tmp/err" >&2 2>/dev/null || true
  exit 1
}

rc=0
bash "$src/scripts/store.sh" nosuch 2>/dev/null || rc=$?
[ "$rc" -eq 64 ] || fail "store.sh nosuch: status $rc, want 64 (usage)"

for kind in "$@"; do
  rm -f "$tmp/url"
  mkfifo "$tmp/url"
  DLOCK_BUILD_DIR=$build bash "$src/scripts/store.sh" "$kind" >"$tmp/url" 2>"$tmp/err" &
  pid=$!
  # the URL line, or end of file if the store never got that far
  exec 3<"$tmp/url"
  read -r -t 120 -u 3 url || fail "$kind: no URL from store.sh"
  # (a Sentinel group: its sentinels, then the master's name; Redlock: its
  # nodes; TLS: its CA)
  [[ $url =~ ^(redis|zk|etcd|postgres|mysql)://([a-z]+:[a-z]+@)?127\.0\.0\.1:([0-9]+)(/[a-z]+)?$ ||
    $url =~ ^(redis\+sentinel)://()127\.0\.0\.1:([0-9]+)(,127\.0\.0\.1:[0-9]+)+/[a-z]+$ ||
    $url =~ ^(redlock)://()127\.0\.0\.1:([0-9]+)(,127\.0\.0\.1:[0-9]+){2}$ ||
    $url =~ ^(rediss)://()127\.0\.0\.1:([0-9]+)\?cacert=/[^?\&]+/ca\.crt$ ]] ||
    fail "$kind: printed '$url'"
  port=${BASH_REMATCH[3]}
  dir=$(sed -n 's/.* in \(\/[^)]*\)).*/\1/p' "$tmp/err")
  [ -d "$dir" ] || fail "$kind: no temp dir named on stderr"

  if [ "$kind" = redlock ]; then
    # (no dlock status there: a second dlock run -n is refused, exit 1)
    rc=0
    "$dlock" run -u "$url" docs-store -- "$dlock" run -n -q -u "$url" docs-store -- true || rc=$?
    [ "$rc" -eq 1 ] || fail "$kind: a lock taken with 'dlock run -u $url' is not seen held there"
  else
    "$dlock" run -u "$url" docs-store -- "$dlock" status -u "$url" --check -q docs-store ||
      fail "$kind: a lock taken with 'dlock run -u $url' is not seen held there"
  fi

  kill -INT "$pid"
  rc=0
  wait "$pid" || rc=$?
  pid=
  exec 3<&-
  [ "$rc" -eq 0 ] || fail "$kind: store.sh exited $rc after SIGINT, want 0"
  ! (exec 4<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || fail "$kind: port $port still open"
  [ ! -e "$dir" ] || fail "$kind: $dir left behind"
  echo "ok $kind: $url, a lock taken and seen there, stopped on SIGINT"
done
