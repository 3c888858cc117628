#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A throwaway server of a store to try dlock against:
#
#   scripts/store.sh redis|redis-tls|sentinel|sentinel-tls|redlock|cluster|cluster-tls|zookeeper|etcd|postgres|mariadb
#
# installs the server when it is missing (scripts/deps.sh), builds the test
# harness's `store` program into build/ (DLOCK_BUILD_DIR to use another), and
# runs it: it starts the server on a free 127.0.0.1 port in a temp dir, prints
# its dlock URL (redis://, zk://, etcd://127.0.0.1:PORT,
# postgres://dlock:dlock@127.0.0.1:PORT/postgres,
# mysql://dlock:dlock@127.0.0.1:PORT/dlock; sentinel: a master, a
# replica and 3 sentinels, redis+sentinel://...; redlock: 3 independent
# redis-servers, redlock://...; cluster: a Redis Cluster of 3 masters and
# 3 replicas, redis+cluster://... (the masters); redis-tls: TLS only, with a throwaway CA,
# rediss://127.0.0.1:PORT?cacert=DIR/tls/ca.crt; sentinel-tls: the
# sentinel group over TLS, rediss+sentinel://...?cacert=...; cluster-tls: the
# cluster over TLS, rediss+cluster://...?cacert=...) on stdout, and on
# Ctrl-C (or SIGTERM) stops it and removes the dir. The URL is all it prints
# on stdout; the rest goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kind=${1:-}
case $kind in
  redis | redis-tls | sentinel | sentinel-tls | redlock | cluster | cluster-tls | zookeeper | etcd | postgres | mariadb) ;;
  *)
    echo "usage: scripts/store.sh redis|redis-tls|sentinel|sentinel-tls|redlock|cluster|cluster-tls|zookeeper|etcd|postgres|mariadb" >&2
    exit 64
    ;;
esac
build=${DLOCK_BUILD_DIR:-$root/build}

deps=${kind/sentinel/redis}
deps=${deps/redlock/redis}
deps=${deps/cluster/redis}
bash "$root/scripts/deps.sh" "--${deps%-tls}" >&2

# The build's chatter stays out of the way, unless the build fails.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build"; } >"$log" 2>&1 ||
  ! cmake --build "$build" --target store >>"$log" 2>&1; then
  cat "$log" >&2
  echo "store.sh: the build of $build/bin/store failed" >&2
  exit 2
fi
rm -f "$log"
trap - EXIT
exec "$build/bin/store" "$kind"
