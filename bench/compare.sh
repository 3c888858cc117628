#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmarks dlock side by side with the peers of each store, on one private
# server per store, in interleaved rounds, and writes that store's section of
# BENCHMARKS.md and its chart (bench/compare.py does the measuring):
#
#   redis      the bare-hiredis floor (bench/peers/limit.c), node redlock and
#              redis-semaphore, redis-py's Lock
#   zookeeper  Curator InterProcessMutex and InterProcessSemaphoreMutex,
#              kazoo's Lock (bench/peers/zk)
#   etcd       npm etcd3 and python-etcd3 (bench/peers/etcd)
#   mysql      dlock's table and session modes on MariaDB; the C floor of bare
#              GET_LOCK, node mysql2, a ShedLock-style table (bench/peers/sql)
#   postgres   dlock's session and table modes; the C floor of bare advisory
#              locks, node pg and advisory-lock, a ShedLock-style table
#   sqlite     dlock alone (no peer)
#
#   bench/compare.sh [--store redis|zookeeper|etcd|mysql|postgres|sqlite|all]
#                    [--rounds N] [--seconds S]
#                    [--threads N] [--procs P]
#
# bench/README.md says what it needs: scripts/deps.sh --bench installs the
# Debian packages (run here first); Node.js with npm for the node peers
# (skipped with a warning without them), a JDK for Curator (likewise).
# It takes minutes per store and loads every core: run it on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
peers=$root/bench/peers

store=all
args=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    --store) store=${2:?--store needs redis, zookeeper, etcd, mysql, postgres, sqlite or all}; shift 2 ;;
    --store=*) store=${1#--store=}; shift ;;
    *) shift ;;
  esac
done
case $store in
  redis | zookeeper | etcd | mysql | postgres | sqlite | all) ;;
  *) echo "compare.sh: --store $store: want redis, zookeeper, etcd, mysql, postgres, sqlite or all" >&2; exit 64 ;;
esac
wants() { [ "$store" = all ] || [ "$store" = "$1" ]; }

bash scripts/deps.sh --bench
out=build-bench
cmake -S . -B $out -DCMAKE_BUILD_TYPE=Release >/dev/null
# store: the test harness's throwaway servers (the SQL stores' are started with it)
cmake --build $out -j"$(nproc)" --target dlock_cli store >/dev/null
extra=(--store-bin "$root/$out/bin/store")

have_node=0
if command -v npm >/dev/null && command -v node >/dev/null; then
  have_node=1
else
  echo "compare.sh: node/npm not found: the node peers are left out" >&2
  extra+=(--no-node)
fi
# npm ci: the node peers at the versions package-lock.json pins, once.
npm_ci() {
  if [ $have_node = 1 ] && [ ! -d "$1/node_modules" ]; then
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}

if wants redis; then
  gcc -O2 -o $out/limit "$peers/limit.c" -lhiredis -lpthread
  extra+=(--limit "$root/$out/limit")
  npm_ci "$peers"
fi
if wants zookeeper; then
  gcc -O2 -o $out/zk_floor "$peers/zk/floor.c" -lzookeeper_mt -lpthread
  extra+=(--zk-floor "$root/$out/zk_floor")
  if command -v javac >/dev/null; then
    bash "$peers/zk/build.sh" >/dev/null
  else
    echo "compare.sh: javac not found: the Curator peers are left out" >&2
    extra+=(--no-java)
  fi
fi
if wants etcd; then
  gcc -O2 -o $out/etcd_floor "$peers/etcd/floor.c" -lcurl -lpthread
  extra+=(--etcd-floor "$root/$out/etcd_floor")
  npm_ci "$peers/etcd"
fi

if wants mysql; then
  gcc -O2 -o $out/floor_mysql "$peers/sql/floor_mysql.c" $(mariadb_config --cflags --libs) -lpthread
  extra+=(--sql-floor-mysql "$root/$out/floor_mysql")
fi
if wants postgres; then
  gcc -O2 -o $out/floor_pg "$peers/sql/floor_pg.c" -I"$(pg_config --includedir)" -lpq -lpthread
  extra+=(--sql-floor-pg "$root/$out/floor_pg")
fi
if wants mysql || wants postgres; then
  npm_ci "$peers/sql"
fi

# Debian's python3: the SQL servers' connection counts are read with its
# python3-pymysql / python3-psycopg2 (deps.sh --bench), as the peers use them
/usr/bin/python3 bench/compare.py --dlock "$root/$out/bin/dlock" --peers "$peers" \
  "${extra[@]}" --command "bench/compare.sh ${args[*]}" "${args[@]}"
