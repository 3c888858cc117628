#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian 12 packages dlock needs, when they are missing. Safe to
# run again. What to install is the union of the groups named (the build's
# packages always):
#
#   scripts/deps.sh                the build, the demo and the tests (a developer's machine)
#   scripts/deps.sh --build        the library and the dlock command: compiler, cmake,
#                                  the client libraries of every store
#   scripts/deps.sh --demo         and redis-server (scripts/demo.sh; -u zk:// or etcd://
#                                  needs only the client libraries, which the build has)
#   scripts/deps.sh --redis | --zookeeper | --etcd | --postgres | --mariadb
#                                  and that store's server (scripts/store.sh)
#   scripts/deps.sh --test         and every server, the interop peers (redis-py, kazoo,
#                                  Curator with a JDK, Node.js and npm for npm redlock),
#                                  clang for the fuzz targets and clang-format (scripts/test.sh)
#   scripts/deps.sh --bench        the tests' and the peers bench/compare.sh measures dlock
#                                  against (python3-etcd3, which no test needs), and gnuplot
#                                  for the chart
set -euo pipefail

build=(
  build-essential cmake pkg-config # compiler and build
  libhiredis-dev                   # libdlock: Redis protocol
  libzookeeper-mt-dev              # libdlock: ZooKeeper client (C, no Java)
  libcurl4-openssl-dev libssl-dev  # libdlock: etcd v3 JSON gateway (HTTP; base64); rediss:// (TLS)
  libjson-c-dev                    # libdlock (etcd) and the dlock command: JSON
  libpq-dev                        # libdlock: PostgreSQL client (libpq)
  libsqlite3-dev                   # libdlock: SQLite backend (sqlite:///path)
  libmariadb-dev                   # libdlock: MariaDB/MySQL client (libmariadb)
)
redis=(redis-server redis-tools openssl) # openssl: the throwaway CA of a redis-tls test server
# ZooKeeper 3.8 started straight with java (tests/support/server_zookeeper.c):
# its jars and slf4j-simple's; the package brings a Java runtime.
zookeeper=(zookeeper libzookeeper-java libslf4j-java)
etcd=(etcd-server etcd-client) # etcd 3.4; the harness checks it with etcdctl
postgres=(postgresql)          # PostgreSQL 15: initdb, postgres, psql (run as user postgres)
# MariaDB 10.11: mariadb-install-db, mariadbd (user mysql); the mysql client (demo --store mariadb)
mariadb=(mariadb-server mariadb-client)
demo=("${redis[@]}" python3)   # examples/flash-sale: its shop's own redis-server
test=(
  "${redis[@]}" "${zookeeper[@]}" "${etcd[@]}" # servers the tests start
  "${postgres[@]}" "${mariadb[@]}"
  python3 python3-redis                        # interop test with redis-py's Lock
  python3-kazoo                                # interop test with kazoo's Lock (ZooKeeper)
  libcurator-recipes-java libcurator-framework-java libcurator-client-java
  default-jdk-headless  # interop test with Curator (javac at test time)
  clang-format          # style check
  clang libclang-rt-14-dev # fuzz targets: libFuzzer (only recommended by clang-14)
)
bench=(
  "${test[@]}"
  python3-etcd3 # bench/peers/etcd: python-etcd3
  python3-pymysql python3-psycopg2 # bench/peers/sql: the ShedLock-style table peer
  gnuplot-nox   # the benchmark chart
)

usage() {
  sed -n 's/^# \{0,1\}//; 3,19p' "${BASH_SOURCE[0]}" >&2
  exit 64
}

packages=("${build[@]}")
[ $# -gt 0 ] || set -- --demo --test
for group in "$@"; do
  case $group in
    --build) ;;
    --demo) packages+=("${demo[@]}") ;;
    --redis) packages+=("${redis[@]}") ;;
    --zookeeper) packages+=("${zookeeper[@]}") ;;
    --etcd) packages+=("${etcd[@]}") ;;
    --postgres) packages+=("${postgres[@]}") ;;
    --mariadb) packages+=("${mariadb[@]}") ;;
    --test) packages+=("${test[@]}") ;;
    --bench) packages+=("${bench[@]}") ;;
    *)
      echo "deps.sh: no group $group" >&2
      usage
      ;;
  esac
done

missing=()
for p in $(printf '%s\n' "${packages[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (the interop test with npm redlock, tests/interop/
# test_node_redlock.sh; the bench's node peers): Debian's, only when the
# commands are missing (a machine may have them from elsewhere, NodeSource's
# nodejs with npm inside, which Debian's npm package would fight).
case " $* " in
  *" --test "* | *" --bench "*)
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
      missing+=(nodejs npm)
    fi
    ;;
esac
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "Installing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The packaged redis-server starts a system instance; tests never use it.
