#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian 12 packages dlock needs to build, test, run the demo and
# the benchmarks, when they are missing. Safe to run again.
#
#   scripts/deps.sh           build, tests, demo, the benchmark chart
#   scripts/deps.sh --bench   also the peers bench/compare.sh measures dlock
#                             against (Curator and kazoo are in the tests'
#                             list already, for the interop tests; this adds
#                             python3-etcd3, which no test needs)
set -euo pipefail

packages=(
  build-essential cmake pkg-config        # build
  libhiredis-dev                          # libdlock: Redis protocol
  libzookeeper-mt-dev                     # libdlock: ZooKeeper client
  libcurl4-openssl-dev libssl-dev         # libdlock: etcd v3 JSON gateway (HTTP; base64)
  libjson-c-dev                           # libdlock (etcd) and the dlock command: JSON
  redis-server redis-tools                # tests and demo start their own servers
  zookeeper default-jdk-headless          # test harness: ZooKeeper 3.8 servers (tests/support)
  etcd-server etcd-client                 # test harness: etcd 3.4 servers, etcdctl
  python3 python3-redis                   # interop test with redis-py's Lock
  python3-kazoo                           # interop test with kazoo's Lock (ZooKeeper)
  libcurator-recipes-java libcurator-framework-java libcurator-client-java
  libzookeeper-java libslf4j-java         # interop test with Curator (javac at test time)
  clang-format                            # style check
  clang libclang-rt-14-dev                # fuzz targets: libFuzzer (only recommended by clang-14)
  gnuplot-nox                             # benchmark chart
)
if [ "${1:-}" = "--bench" ]; then
  packages+=(
    python3-etcd3                         # bench/peers/etcd: python-etcd3
  )
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
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
