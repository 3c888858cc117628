#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_cli.sh - tests of the dlock command against real servers.
#
#   bash tests/cli/test_cli.sh path/to/dlock
#
# Starts its own redis-server on a free loopback port (and a unix socket) in a
# temporary directory, and, for the tests whose behaviour differs by store,
# a ZooKeeper and an etcd too (DLOCK_CLI_STORES: the stores to run those on,
# default "redis zookeeper etcd"; ctest passes the ones the build has), and
# stops them on exit (DLOCK_CLI_ONLY=REGEX: only the tests whose names, as
# "test_x" or "test_x[store]", match). Each test is a function; a failed check prints what was
# expected and what came, and the suite exits 1 at the end. Nothing sleeps in
# place of a condition: helpers poll `dlock status --json`, a file, or a
# process, each with a bound.
#
# Commands for sh -c are single-quoted on purpose: the command's shell expands them.
# shellcheck disable=SC2016
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 path/to/dlock" >&2
    exit 64
fi
DLOCK=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
if [ ! -x "$DLOCK" ]; then
    echo "$0: $1 is not an executable" >&2
    exit 64
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
read -r -a STORES <<<"${DLOCK_CLI_STORES:-redis zookeeper etcd}"
needed=(redis-server redis-cli timeout python3 "${CC:-cc}")
for store in "${STORES[@]}"; do
    case $store in
    redis) ;;
    zookeeper) needed+=(java) ;;
    etcd) needed+=(etcd etcdctl) ;;
    postgres | mariadb | redlock) [ -x "$(dirname "$DLOCK")/store" ] || needed+=("$(dirname "$DLOCK")/store") ;;
    sqlite) ;; # a file, no server
    *)
        echo "$0: DLOCK_CLI_STORES: unknown store '$store' (redis, zookeeper, etcd, postgres, mariadb, redlock, sqlite)" >&2
        exit 64
        ;;
    esac
done
for tool in "${needed[@]}"; do
    if ! command -v "$tool" >/dev/null; then
        echo "$0: $tool not found (scripts/deps.sh installs it; DLOCK_CLI_STORES chooses the stores)" >&2
        exit 1
    fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlock-cli.XXXXXX")
REDIS_PID=
ZK_PID=
ETCD_PID=
PG_PID=
MY_PID=
RL_PID=
BG_PIDS=()

stop_server()
{
    if [ -n "$1" ]; then
        kill -TERM "$1" 2>/dev/null
        wait "$1" 2>/dev/null
    fi
}

cleanup()
{
    local p
    for p in "${BG_PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
    done
    stop_server "$REDIS_PID"
    stop_server "$ZK_PID"
    stop_server "$ETCD_PID"
    if [ -n "$PG_PID" ]; then
        kill -INT "$PG_PID" 2>/dev/null # the harness's store stops its server on SIGINT
        wait "$PG_PID" 2>/dev/null
    fi
    if [ -n "$MY_PID" ]; then
        kill -INT "$MY_PID" 2>/dev/null
        wait "$MY_PID" 2>/dev/null
    fi
    if [ -n "$RL_PID" ]; then
        kill -INT "$RL_PID" 2>/dev/null
        wait "$RL_PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# ------------------------------------------------------------ helpers

now_ms() { date +%s%3N; }

# Polls "$@" every 20 ms until it succeeds; gives up after $1 seconds.
wait_until()
{
    local limit_ms=$(($(now_ms) + $1 * 1000))
    shift
    until "$@"; do
        if [ "$(now_ms)" -ge "$limit_ms" ]; then
            return 1
        fi
        sleep 0.02
    done
}

port_is_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

redis() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }

# dlock with a bound, so that a hang fails the test instead of the suite.
dl() { timeout -k 2 20 "$DLOCK" "$@"; }

# Runs dlock in the background (not under timeout, so that $! is dlock
# itself): stdout to $1.out, stderr to $1.err; the pid is in BG.
dl_bg()
{
    local out=$1
    shift
    "$DLOCK" "$@" >"$out.out" 2>"$out.err" &
    BG=$!
    BG_PIDS+=("$BG")
}

# Waits (at most $2 s) for background pid $1 to end; its status is in BG_RC.
reap()
{
    BG_RC=
    if ! wait_until "$2" eval "! kill -0 $1 2>/dev/null"; then
        kill -KILL "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        BG_RC=timeout
        return 1
    fi
    wait "$1"
    BG_RC=$?
}

# A server that takes connections and never answers, as a stopped one does
# (its port in file $1, its pid in BG).
silent_server()
{
    python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])' >"$1" &
    BG=$!
    BG_PIDS+=("$BG")
    wait_until 5 test -s "$1" || fail "the silent server did not start"
}

# json_field FIELD: one field of the JSON document on stdin, written as JSON
# ("text", 12, true, null). Parsed by Python's json module from strict UTF-8,
# so a document that is not valid JSON fails (status 1, a message).
json_field()
{
    python3 -c '
import json, sys
doc = json.loads(sys.stdin.buffer.read().decode("utf-8"))
print(json.dumps(doc[sys.argv[1]], ensure_ascii=False))' "$1"
}

# json_keys: the keys of the JSON document on stdin, in order, one line.
json_keys()
{
    python3 -c '
import json, sys
print(" ".join(json.loads(sys.stdin.buffer.read().decode("utf-8"))))'
}

# field NAME FIELD [status options...]: that field of `dlock status --json`.
field()
{
    local name=$1 f=$2
    shift 2
    dl status --json "$@" -- "$name" | json_field "$f"
}

is_held() { [ "$(field "$1" held)" = true ]; }
is_free() { [ "$(field "$1" held)" = false ]; }
has_waiters() { [ "$(field "$1" waiters)" = "$2" ]; }

FAILED_TESTS=0
TEST_FAILED=0
CURRENT=

fail()
{
    echo "FAIL $CURRENT: $*" >&2
    TEST_FAILED=1
}

# expect_eq WHAT EXPECTED GOT
expect_eq()
{
    if [ "$2" != "$3" ]; then
        fail "$1: expected '$2', got '$3'"
        return 1
    fi
}

# expect_match WHAT EXTENDED-REGEX GOT
expect_match()
{
    if ! [[ $3 =~ $2 ]]; then
        fail "$1: expected to match /$2/, got '$3'"
        return 1
    fi
}

# expect_rc WHAT EXPECTED COMMAND...: runs COMMAND (stdout to $TMP/out,
# stderr to $TMP/err) and checks its exit status.
expect_rc()
{
    local what=$1 want=$2 rc
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" != "$want" ]; then
        fail "$what: expected exit $want, got $rc (stderr: $(head -c 300 "$TMP/err"))"
        return 1
    fi
}

expect_free()
{
    local held
    held=$(field "$1" held)
    expect_eq "$1 is free afterwards (status --json held)" false "$held"
}

# run_test TEST [LABEL]: LABEL (default TEST) in messages.
run_test()
{
    CURRENT=${2:-$1}
    [[ $CURRENT =~ ${DLOCK_CLI_ONLY:-} ]] || return 0
    TEST_FAILED=0
    rm -rf "${TMP:?}/t"
    mkdir "$TMP/t"
    "$1"
    if [ "$TEST_FAILED" = 0 ]; then
        echo "ok $CURRENT"
    else
        echo "not ok $CURRENT"
        FAILED_TESTS=$((FAILED_TESTS + 1))
    fi
}

# ------------------------------------------------------------ server

start_redis()
{
    local _
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        PORT=$((20000 + RANDOM % 40000))
        port_is_open "$PORT" && continue
        redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$TMP" --unixsocket "$TMP/redis.sock" --unixsocketperm 700 \
            --logfile "$TMP/redis.log" &
        REDIS_PID=$!
        if wait_until 5 eval '[ "$(redis ping 2>/dev/null)" = PONG ] ||
                             ! kill -0 $REDIS_PID 2>/dev/null' &&
            kill -0 "$REDIS_PID" 2>/dev/null; then
            return 0
        fi
        kill -KILL "$REDIS_PID" 2>/dev/null
        wait "$REDIS_PID" 2>/dev/null
        REDIS_PID=
    done
    echo "$0: could not start redis-server (log: $(tail -3 "$TMP/redis.log" 2>/dev/null))" >&2
    exit 1
}

# A loopback port free now (the kernel's choice).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A standalone ZooKeeper 3.8 (Debian's jars), started as tests/support/server_zookeeper.c
# starts it: ticks of 200 ms (sessions from 400 ms), no admin server, a small heap.
# (A server still starting may take the connection and say nothing: bounded.)
zk_serves()
{
    [[ $(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf srvr >&3 && cat <&3' "$1" \
        2>/dev/null) == *"Mode: "* ]]
}
start_zookeeper()
{
    local port dir=$TMP/zookeeper _
    mkdir -p "$dir/data"
    for _ in 1 2 3; do
        port=$(free_port)
        printf '%s\n' tickTime=200 initLimit=10 syncLimit=5 "dataDir=$dir/data" \
            "clientPort=$port" clientPortAddress=127.0.0.1 admin.enableServer=false \
            4lw.commands.whitelist=srvr forceSync=no minSessionTimeout=400 \
            maxSessionTimeout=60000 maxClientCnxns=0 >"$dir/zoo.cfg"
        java -Xmx128m -Xms32m -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
            -XX:-UsePerfData -Dzookeeper.admin.enableServer=false \
            -Dzookeeper.jmx.log4j.disable=true -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
            -cp "${DT_ZK_CLASSPATH:-/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar}" \
            org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" >"$dir/log" 2>&1 &
        ZK_PID=$!
        if wait_until 30 eval 'zk_serves $port || ! kill -0 $ZK_PID 2>/dev/null' &&
            kill -0 "$ZK_PID" 2>/dev/null; then
            ZK_URL="zk://127.0.0.1:$port"
            return 0
        fi
        stop_server "$ZK_PID"
        ZK_PID=
    done
    echo "$0: could not start ZooKeeper (log: $(tail -3 "$dir/log" 2>/dev/null))" >&2
    exit 1
}

# A single-member etcd 3.4, as tests/support/server_etcd.c starts it.
start_etcd()
{
    local port peer dir=$TMP/etcd arch _
    mkdir -p "$dir"
    case $(uname -m) in
    x86_64 | ppc64le) arch= ;;
    aarch64) arch=arm64 ;;
    arm*) arch=arm ;;
    *) arch=$(uname -m) ;;
    esac
    for _ in 1 2 3; do
        port=$(free_port)
        peer=$(free_port)
        ETCD_UNSUPPORTED_ARCH=$arch etcd --name n1 --data-dir "$dir/data" \
            --listen-client-urls "http://127.0.0.1:$port" \
            --advertise-client-urls "http://127.0.0.1:$port" \
            --listen-peer-urls "http://127.0.0.1:$peer" \
            --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
            --initial-cluster "n1=http://127.0.0.1:$peer" --initial-cluster-state new \
            --heartbeat-interval 25 --election-timeout 250 --logger zap --log-level warn \
            >"$dir/log" 2>&1 &
        ETCD_PID=$!
        if wait_until 20 eval 'ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:$port \
                                  --dial-timeout=500ms endpoint health >/dev/null 2>&1 ||
                              ! kill -0 $ETCD_PID 2>/dev/null' &&
            kill -0 "$ETCD_PID" 2>/dev/null; then
            ETCD_URL="etcd://127.0.0.1:$port"
            return 0
        fi
        stop_server "$ETCD_PID"
        ETCD_PID=
        rm -rf "$dir/data"
    done
    echo "$0: could not start etcd (log: $(tail -3 "$dir/log" 2>/dev/null))" >&2
    exit 1
}

# PostgreSQL as the tests start it (tests/support/server_postgres.c), through
# the build's store program: it prints the URL, and stops on SIGINT.
start_postgres()
{
    "$(dirname "$DLOCK")/store" postgres >"$TMP/pg.url" 2>"$TMP/pg.err" &
    PG_PID=$!
    if wait_until 60 eval 'test -s "$TMP/pg.url" || ! kill -0 $PG_PID 2>/dev/null' &&
        test -s "$TMP/pg.url"; then
        PG_URL=$(head -1 "$TMP/pg.url")
        return 0
    fi
    echo "$0: could not start postgres: $(cat "$TMP/pg.err")" >&2
    exit 1
}

# MariaDB as the tests start it (tests/support/server_mariadb.c), likewise.
start_mariadb()
{
    "$(dirname "$DLOCK")/store" mariadb >"$TMP/my.url" 2>"$TMP/my.err" &
    MY_PID=$!
    if wait_until 90 eval 'test -s "$TMP/my.url" || ! kill -0 $MY_PID 2>/dev/null' &&
        test -s "$TMP/my.url"; then
        MY_URL=$(head -1 "$TMP/my.url")
        return 0
    fi
    echo "$0: could not start mariadb: $(cat "$TMP/my.err")" >&2
    exit 1
}

# Redlock's three independent redis-servers as the tests start them
# (tests/support/server_redlock.c), likewise.
start_redlock()
{
    "$(dirname "$DLOCK")/store" redlock >"$TMP/rl.url" 2>"$TMP/rl.err" &
    RL_PID=$!
    if wait_until 30 eval 'test -s "$TMP/rl.url" || ! kill -0 $RL_PID 2>/dev/null' &&
        test -s "$TMP/rl.url"; then
        RL_URL=$(head -1 "$TMP/rl.url")
        return 0
    fi
    echo "$0: could not start redlock's nodes: $(cat "$TMP/rl.err")" >&2
    exit 1
}

# A loopback port nobody listens on.
# (an optional bound below 60000: a Cluster node's bus port is its own + 10000)
closed_port()
{
    local p top=${1:-60000}
    while :; do
        p=$((20000 + RANDOM % (top - 20000)))
        if [ "$p" != "$PORT" ] && ! port_is_open "$p"; then
            echo "$p"
            return
        fi
    done
}

# ------------------------------------------------------------ tests: run

test_run_exit_status()
{
    expect_rc "exit 0 passes through" 0 dl run r-exit -- true
    expect_rc "exit 3 passes through" 3 dl run r-exit -- sh -c 'exit 3'
    expect_rc "command killed by SIGKILL -> 128+9" 137 dl run r-exit -- sh -c 'kill -KILL $$'
    expect_rc "command not found -> 127" 127 dl run r-exit -- "$TMP/no-such-command"
    expect_match "message for a missing command" "cannot run" "$(cat "$TMP/err")"
    printf 'not a program\n' >"$TMP/t/not-exec"
    chmod 644 "$TMP/t/not-exec"
    expect_rc "command not executable -> 126" 126 dl run r-exit -- "$TMP/t/not-exec"
    expect_free r-exit
}

test_run_environment()
{
    local env1 env2 name tok1 fence1 owner1 url1 tok2
    local show='printf "%s|%s|%s|%s|%s\n" "$DLOCK_NAME" "$DLOCK_TOKEN" "$DLOCK_FENCE" "$DLOCK_OWNER" "$DLOCK_URL"'
    expect_rc "first run" 0 dl run r-env -- sh -c "$show" || return
    env1=$(cat "$TMP/out")
    expect_rc "second run" 0 dl run r-env -- sh -c "$show" || return
    env2=$(cat "$TMP/out")
    IFS='|' read -r name tok1 fence1 owner1 url1 <<<"$env1"
    IFS='|' read -r _ tok2 _ _ _ <<<"$env2"
    expect_eq "DLOCK_NAME" r-env "$name"
    expect_match "DLOCK_TOKEN is a positive integer" '^[1-9][0-9]*$' "$tok1" || return
    expect_eq "DLOCK_FENCE equals DLOCK_TOKEN" "$tok1" "$fence1"
    expect_match "DLOCK_OWNER is an owner token" '^[0-9a-f]{32}$' "$owner1"
    expect_eq "DLOCK_URL" "$DLOCK_URL" "$url1"
    expect_match "second DLOCK_TOKEN is a positive integer" '^[1-9][0-9]*$' "$tok2" || return
    if [ "$tok2" -le "$tok1" ]; then
        fail "DLOCK_TOKEN must increase from one run to the next: $tok1 then $tok2"
    fi
    expect_free r-env
}

test_run_holds_lock_while_running()
{
    # The command sees itself as the holder, with the token it was given.
    expect_rc "status from inside the command" 0 dl run r-inside -- sh -c \
        '"$0" status --json r-inside | grep -q "\"owner\":\"$DLOCK_OWNER\"" &&
         "$0" status --json r-inside | grep -q "\"last_fence\":$DLOCK_FENCE,"' "$DLOCK"
    expect_free r-inside
}

test_nonblock_when_held()
{
    local out
    expect_rc "lock -l 30" 0 dl lock -l 30 r-nb || return
    expect_rc "-n when held" 1 dl run -n r-nb -- touch "$TMP/t/ran"
    expect_match "-n message on stderr" "held" "$(cat "$TMP/err")"
    expect_rc "-n -E 9 when held" 9 dl run -n -E 9 r-nb -- touch "$TMP/t/ran"
    expect_rc "-n -q when held" 1 dl run -n -q r-nb -- touch "$TMP/t/ran"
    out=$(cat "$TMP/err")
    expect_eq "-q silences the message" "" "$out"
    [ -e "$TMP/t/ran" ] && fail "the command ran although the lock was not acquired"
    expect_rc "force unlock" 0 dl unlock --force r-nb
    expect_rc "-n when free" 0 dl run -n r-nb -- true
}

test_wait_times_out()
{
    local t0 elapsed
    expect_rc "lock -l 30" 0 dl lock -l 30 r-wt || return
    t0=$(now_ms)
    expect_rc "-w 0.3 when held" 1 dl run -w 0.3 r-wt -- touch "$TMP/t/ran"
    elapsed=$(($(now_ms) - t0))
    expect_match "-w message" "held" "$(cat "$TMP/err")"
    if [ "$elapsed" -lt 250 ] || [ "$elapsed" -gt 5000 ]; then
        fail "-w 0.3 gave up after ${elapsed} ms; expected about 300 ms"
    fi
    [ -e "$TMP/t/ran" ] && fail "the command ran although the wait timed out"
    expect_rc "-w 250ms -E 5" 5 dl run -w 250ms -E 5 -q r-wt -- true
    dl unlock --force r-wt >/dev/null
}

test_wait_succeeds_when_holder_finishes()
{
    local holder waiter t0 waited_ms fence_h fence_w
    dl_bg "$TMP/t/holder" run r-ws -- sh -c \
        'echo $DLOCK_FENCE > "$0/fence-h"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    holder=$BG
    wait_until 10 test -s "$TMP/t/fence-h" || { fail "the holder never started"; return; }
    dl_bg "$TMP/t/waiter" run -w 20 r-ws -- sh -c 'echo $DLOCK_FENCE > "$0/fence-w"' "$TMP/t"
    waiter=$BG
    wait_until 10 has_waiters r-ws 1 || fail "status never showed 1 waiter"
    expect_match "status text shows the waiter" "waiters: +1" "$(dl status r-ws)"
    [ -e "$TMP/t/fence-w" ] && fail "the waiter ran while the lock was held"
    t0=$(now_ms)
    touch "$TMP/t/go"
    reap "$holder" 10
    expect_eq "holder's exit status" 0 "$BG_RC"
    reap "$waiter" 10
    expect_eq "waiter's exit status (stderr: $(cat "$TMP/t/waiter.err"))" 0 "$BG_RC"
    waited_ms=$(($(now_ms) - t0))
    if [ "$waited_ms" -gt 5000 ]; then
        fail "the waiter took ${waited_ms} ms after the holder finished"
    fi
    fence_h=$(cat "$TMP/t/fence-h")
    fence_w=$(cat "$TMP/t/fence-w" 2>/dev/null)
    expect_match "the waiter ran" '^[0-9]+$' "$fence_w" || return
    if [ "$fence_w" -le "$fence_h" ]; then
        fail "the waiter's fence $fence_w is not above the holder's $fence_h"
    fi
    expect_free r-ws
}

# ------------------------------------------------------------ tests: lost lock

# The command writes its pid and then becomes `sleep 30`.
SLEEPER='echo $$ > "$0"; exec sleep 30'

test_lost_fixed_lease()
{
    local t0 elapsed pid
    t0=$(now_ms)
    expect_rc "-l 0.5 with a longer command" 75 dl run -l 0.5 r-lost1 -- \
        sh -c "$SLEEPER" "$TMP/t/pid"
    elapsed=$(($(now_ms) - t0))
    expect_match "message names the loss" "lost" "$(cat "$TMP/err")"
    # and the flag of a lease that would have held (trial39: -l typed for -L)
    expect_match "message points to -L" \
        "^dlock: lock 'r-lost1' was lost \(fixed lease of 500 ms expired; -l is not renewed: for a lease renewed while dlock runs, -L SECONDS\); stopping the command" \
        "$(cat "$TMP/err")"
    if [ "$elapsed" -gt 10000 ]; then
        fail "dlock took ${elapsed} ms to stop the command after a 500 ms lease"
    fi
    pid=$(cat "$TMP/t/pid" 2>/dev/null)
    if [ -z "$pid" ]; then
        fail "the command never started"
    elif kill -0 "$pid" 2>/dev/null; then
        fail "the command (pid $pid) still runs after the lock was lost"
        kill -KILL "$pid"
    fi
}

test_lost_renewed_lock_force_unlocked()
{
    local pid t0 elapsed
    dl_bg "$TMP/t/holder" run -u "$DLOCK_URL?lease=600ms" r-lost2 -- \
        sh -c "$SLEEPER" "$TMP/t/pid"
    wait_until 10 test -s "$TMP/t/pid" || { fail "the command never started"; return; }
    wait_until 10 is_held r-lost2 || fail "status never showed the lock held"
    pid=$(cat "$TMP/t/pid")
    t0=$(now_ms)
    expect_rc "unlock --force from outside" 0 dl unlock --force r-lost2
    reap "$BG" 10
    elapsed=$(($(now_ms) - t0))
    expect_eq "holder's exit status" 75 "$BG_RC"
    expect_match "message names the loss" "lost" "$(cat "$TMP/t/holder.err")"
    if [ "$elapsed" -gt 5000 ]; then
        fail "the loss was noticed ${elapsed} ms after the unlock; renewal is every 200 ms"
    fi
    if kill -0 "$pid" 2>/dev/null; then
        fail "the command (pid $pid) still runs after the lock was lost"
        kill -KILL "$pid"
    fi
}

# What the command started is stopped too, not only the command: the shell
# of -c runs a step that is not its last (a new user's trial: the shell
# died of the loss's SIGTERM and its `sleep` ran on without the lock; and
# kill -9 of dlock left it running while another holder took the lock).
grandchild()
{
    echo "sh -c 'echo \$\$ > $1; exec sleep 30'; true"
}

# lost_tree NAME WHAT [OPTIONS...] -c STRING: a holder runs STRING (which
# writes its step's pid to $TMP/t/pid) and is force-unlocked; it exits 75
# and the step (WHAT, for the message) is gone within 5 s.
lost_tree()
{
    local name=$1 what=$2 pid
    shift 2
    dl_bg "$TMP/t/holder" run -u "$DLOCK_URL?lease=600ms" "$@"
    wait_until 10 test -s "$TMP/t/pid" || { fail "the step never started"; return; }
    pid=$(cat "$TMP/t/pid")
    expect_rc "unlock --force from outside" 0 dl unlock --force "$name"
    reap "$BG" 10
    expect_eq "holder's exit status" 75 "$BG_RC"
    if ! wait_until 5 eval "! kill -0 $pid 2>/dev/null"; then
        fail "$what (pid $pid) still runs after the lock was lost"
        kill -KILL "$pid"
    fi
}

test_lost_stops_whole_tree()
{
    lost_tree r-tree "the shell's step" r-tree -c "$(grandchild "$TMP/t/pid")"
}

# A step that ignores SIGTERM outlives the shell that died of it: it gets
# the SIGKILL after --grace all the same (review rev46: the guard left
# with the shell, and the step ran on).
test_lost_kills_step_ignoring_term()
{
    lost_tree r-tree3 "the step that ignores SIGTERM" --grace 0.5 r-tree3 -c \
        "sh -c 'trap \"\" TERM; echo \$\$ > $TMP/t/pid; exec sleep 30'; true"
}

test_dlock_killed_stops_tree()
{
    local pid holder
    dl_bg "$TMP/t/holder" run r-tree2 -c "$(grandchild "$TMP/t/pid")"
    holder=$BG
    wait_until 10 test -s "$TMP/t/pid" || { fail "the step never started"; return; }
    pid=$(cat "$TMP/t/pid")
    kill -KILL "$holder"
    reap "$holder" 10
    if ! wait_until 5 eval "! kill -0 $pid 2>/dev/null"; then
        fail "the shell's step (pid $pid) still runs after dlock was killed"
        kill -KILL "$pid"
    fi
    expect_rc "unlock --force the dead holder's lock" 0 dl unlock --force r-tree2
}

# The guard's own set-up failing (here its fork of the command, under a
# process limit of another user) is said, not a silent exit 126: some limit
# between dlock's threads and the guard's fork gives 126, and every 126 says
# why.
test_guard_failure_said()
{
    local n rc seen=0 dir lib
    [ "$(id -u)" = 0 ] || { fail "needs root (setpriv to another user)"; return; }
    # (a directory of its own, with dlock and its library: $TMP and the
    # build tree may be the test's user's alone)
    dir=$(mktemp -d /tmp/dlock-guard.XXXXXX) && chmod 777 "$dir" || { fail "mktemp"; return; }
    cp "$DLOCK" "$dir/dlock" && chmod 755 "$dir/dlock" || { fail "copying dlock"; return; }
    lib=$(ldd "$DLOCK" | awk '/libdlock/ { print $3 }')
    [ -z "$lib" ] || cp -L "$lib" "$dir/" || { fail "copying $lib"; return; }
    chmod -R a+rX "$dir"
    for n in 3 4 5 6 7 8 9 10 11 12; do
        setpriv --reuid=65534 --regid=65534 --clear-groups env LD_LIBRARY_PATH="$dir" bash -c \
            "ulimit -u $n; exec timeout 10 \"\$0\" run -u sqlite://$dir/g$n.db job -- true" \
            "$dir/dlock" >"$TMP/out" 2>"$TMP/err"
        rc=$?
        [ "$rc" = 126 ] || continue
        seen=1
        # (the guard's fork or, by a process more or less of the user's
        # still exiting, the command's own: CI's ASan run saw the latter)
        expect_match "exit 126 under ulimit -u $n says why" \
            "guard of the command's tree failed|cannot run 'true': Resource temporarily" \
            "$(cat "$TMP/err")" || break
    done
    rm -rf "$dir"
    [ "$seen" = 1 ] || fail "no process limit from 3 to 12 made a fork fail (exit 126)"
}

test_lost_grace_then_sigkill()
{
    local t0 elapsed pid
    # The command ignores SIGTERM: it gets SIGKILL --grace later.
    t0=$(now_ms)
    expect_rc "-l 0.3 --grace 0.3, command ignores TERM" 75 dl run -l 0.3 --grace 0.3 r-grace -- \
        sh -c "trap '' TERM; $SLEEPER" "$TMP/t/pid"
    elapsed=$(($(now_ms) - t0))
    if [ "$elapsed" -lt 300 ] || [ "$elapsed" -gt 10000 ]; then
        fail "expected SIGKILL about 600 ms after the start, dlock ended after ${elapsed} ms"
    fi
    pid=$(cat "$TMP/t/pid" 2>/dev/null)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        fail "the command (pid $pid) survived SIGKILL"
        kill -KILL "$pid"
    fi
}

# ------------------------------------------------------------ tests: signals

test_signal_forwarded()
{
    local got
    dl_bg "$TMP/t/holder" run r-sig -- sh -c \
        'trap "echo got-term > \"$0/term\"; exit 7" TERM; : > "$0/started"; while :; do sleep 0.05; done' \
        "$TMP/t"
    wait_until 10 test -e "$TMP/t/started" || { fail "the command never started"; return; }
    wait_until 10 is_held r-sig || fail "status never showed the lock held"
    kill -TERM "$BG"
    reap "$BG" 10
    expect_eq "dlock exits with the command's status" 7 "$BG_RC"
    got=$(cat "$TMP/t/term" 2>/dev/null)
    expect_eq "the command saw SIGTERM" got-term "$got"
    expect_free r-sig
}

test_signal_while_waiting_ends_the_wait()
{
    expect_rc "lock -l 30" 0 dl lock -l 30 r-sigwait || return
    dl_bg "$TMP/t/waiter" run r-sigwait -- touch "$TMP/t/ran"
    wait_until 10 has_waiters r-sigwait 1 || fail "status never showed the waiter"
    kill -TERM "$BG"
    reap "$BG" 10
    expect_eq "a waiting dlock ends on SIGTERM" 143 "$BG_RC"
    [ -e "$TMP/t/ran" ] && fail "the command ran although the wait was interrupted"
    expect_eq "the holder keeps the lock" true "$(field r-sigwait held)"
    expect_eq "the interrupted waiter left the queue" 0 "$(field r-sigwait waiters)"
    dl unlock --force r-sigwait >/dev/null
    # not handed to the waiter that was interrupted
    expect_eq "free after the holder lets go" false "$(field r-sigwait held)"
}

test_command_stopped_when_dlock_dies()
{
    local got
    dl_bg "$TMP/t/holder" run -u "$DLOCK_URL?lease=1s" r-death -- sh -c \
        'trap "echo got-term > \"$0/term\"; exit 0" TERM; : > "$0/started"; while :; do sleep 0.05; done' \
        "$TMP/t"
    wait_until 10 test -e "$TMP/t/started" || { fail "the command never started"; return; }
    kill -KILL "$BG"
    reap "$BG" 10 2>/dev/null # without bash's "Killed" notice
    wait_until 10 test -s "$TMP/t/term" || fail "the command did not get SIGTERM when dlock died"
    got=$(cat "$TMP/t/term" 2>/dev/null)
    expect_eq "the command saw SIGTERM" got-term "$got"
    # Nobody releases it: it ends with its 1 s lease.
    wait_until 10 is_free r-death || fail "the lock of a dead dlock never expired"
}

# ------------------------------------------------------------ tests: admin

test_lock_unlock_extend_by_token()
{
    local line token fence owner lease
    expect_rc "lock -l 30" 0 dl lock -l 30 r-adm || return
    line=$(cat "$TMP/out")
    expect_match "lock prints '<token> <fence>'" '^[0-9a-f]{32} [1-9][0-9]*$' "$line" || return
    token=${line% *}
    fence=${line#* }
    owner=$(field r-adm owner)
    expect_eq "held after dlock exits, by that owner" "\"$token\"" "$owner"
    expect_eq "status last_fence" "$fence" "$(field r-adm last_fence)"
    expect_rc "lock when held" 1 dl lock -n -l 30 r-adm
    expect_rc "unlock with a wrong token" 1 dl unlock --token 0123456789abcdef0123456789abcdef r-adm
    expect_eq "still held after a wrong unlock" "\"$token\"" "$(field r-adm owner)"
    expect_rc "extend with a wrong token" 1 dl extend --token 0123456789abcdef0123456789abcdef \
        -l 60 r-adm
    expect_rc "extend -l 60" 0 dl extend --token "$token" -l 60 r-adm
    lease=$(field r-adm lease_ms)
    expect_match "lease_ms is a number" '^[0-9]+$' "$lease" || return
    if [ "$lease" -le 30000 ]; then
        fail "after extend -l 60, lease_ms is $lease; expected > 30000"
    fi
    expect_rc "unlock with the token" 0 dl unlock --token "$token" r-adm
    expect_free r-adm
    expect_rc "unlock again" 1 dl unlock --token "$token" r-adm

    # --force frees a lock held by someone else.
    dl_bg "$TMP/t/other" lock -l 30 r-adm
    reap "$BG" 10
    expect_eq "someone else's lock" 0 "$BG_RC"
    expect_rc "unlock --force" 0 dl unlock --force r-adm
    expect_free r-adm
    expect_rc "unlock --force when free" 0 dl unlock --force r-adm
}

test_lock_handoff_in_shell()
{
    local token
    token=$(dl lock -l 30 r-hand | cut -d' ' -f1)
    expect_match "token" '^[0-9a-f]{32}$' "$token" || return
    expect_rc "a second process cannot take it" 1 dl run -n -q r-hand -- true
    expect_rc "another process releases it by token" 0 \
        sh -c '"$0" unlock --token "$1" r-hand' "$DLOCK" "$token"
    expect_rc "free for the next one" 0 dl run -n r-hand -- true
}

# The fields of every `dlock status --json` document, in order.
STATUS_KEYS="version name kind held held_as owner holds lease_ms expires session last_fence last_fence_str waiters shared permits permits_used holders"

test_status_text_and_json()
{
    local text json token
    text=$(dl status r-st)
    expect_match "free: state" "state: +free" "$text"
    expect_match "free: waiters" "waiters: +0" "$text"
    json=$(dl status --json r-st)
    expect_eq "one line" 1 "$(printf '%s\n' "$json" | wc -l)"
    expect_eq "free: fields" "$STATUS_KEYS" "$(json_keys <<<"$json")"
    expect_eq "free: version" 1 "$(json_field version <<<"$json")"
    expect_eq "free: name" '"r-st"' "$(json_field name <<<"$json")"
    expect_eq "free: kind" '"mutex"' "$(json_field kind <<<"$json")"
    expect_eq "free: held" false "$(json_field held <<<"$json")"
    expect_eq "free: no owner" null "$(json_field owner <<<"$json")"
    expect_eq "free: no lease (not -1)" null "$(json_field lease_ms <<<"$json")"
    expect_eq "free: expires" null "$(json_field expires <<<"$json")"
    expect_eq "free: last_fence" 0 "$(json_field last_fence <<<"$json")"
    expect_eq "free: waiters" 0 "$(json_field waiters <<<"$json")"
    expect_eq "mutex: shared" null "$(json_field shared <<<"$json")"
    expect_eq "mutex: permits" null "$(json_field permits <<<"$json")"
    token=$(dl lock -l 30 r-st | cut -d' ' -f1)
    text=$(dl status r-st)
    expect_match "held: state" "state: +held" "$text"
    expect_match "held: owner" "owner: +$token" "$text"
    expect_match "held: fence" "last fence: +[1-9][0-9]*" "$text"
    expect_match "held: lease" "lease left: +[0-9.]+ s" "$text"
    json=$(dl status --json r-st)
    expect_eq "held: fields" "$STATUS_KEYS" "$(json_keys <<<"$json")"
    expect_eq "held: held" true "$(json_field held <<<"$json")"
    expect_eq "held: owner" "\"$token\"" "$(json_field owner <<<"$json")"
    expect_eq "held: holds" 1 "$(json_field holds <<<"$json")"
    expect_match "held: lease_ms" '^[1-9][0-9]*$' "$(json_field lease_ms <<<"$json")"
    expect_eq "held: expires" true "$(json_field expires <<<"$json")"
    expect_match "held: last_fence" '^[1-9][0-9]*$' "$(json_field last_fence <<<"$json")"
    json=$(dl status --json --fair r-st)
    expect_eq "a fair handle says fair" '"fair"' "$(json_field kind <<<"$json")"
    expect_eq "fair: same lock" "\"$token\"" "$(json_field owner <<<"$json")"
    dl unlock --force r-st >/dev/null
}

# Every kind answers with the same fields; null where one does not apply.
test_status_json_one_shape()
{
    local kind json
    for kind in "" --fair --simple --read --write "--permits 2"; do
        # shellcheck disable=SC2086 # "--permits 2" is two words
        json=$(dl status --json $kind r-shape) || { fail "status --json $kind"; continue; }
        expect_eq "fields of status --json $kind" "$STATUS_KEYS" "$(json_keys <<<"$json")"
    done
    json=$(dl status --json --simple r-shape)
    expect_eq "simple: no queue" null "$(json_field waiters <<<"$json")"
    json=$(dl status --json --read r-shape)
    expect_eq "read-write: readers" 0 "$(json_field shared <<<"$json")"
    expect_eq "read-write: permits" null "$(json_field permits <<<"$json")"
    json=$(dl status --json --permits 2 r-shape)
    expect_eq "semaphore: kind" '"semaphore"' "$(json_field kind <<<"$json")"
    expect_eq "semaphore: permits_used" 0 "$(json_field permits_used <<<"$json")"

    # A key without expiry (set by another client): held, no lease, and
    # "expires": false says so (lease_ms is null only because none runs).
    redis SET r-shape forever >/dev/null
    json=$(dl status --json --simple r-shape)
    expect_eq "no expiry: held" true "$(json_field held <<<"$json")"
    expect_eq "no expiry: lease_ms" null "$(json_field lease_ms <<<"$json")"
    expect_eq "no expiry: expires" false "$(json_field expires <<<"$json")"
    expect_match "no expiry: text" "lease left: +none \(never expires\)" "$(dl status --simple r-shape)"
    redis DEL r-shape >/dev/null
}

# Strings are valid JSON and UTF-8 whatever the bytes: control characters
# escaped, bytes that are not UTF-8 replaced by U+FFFD, and an owner cut to
# fit dlock_status never ends in half a character.
test_status_json_any_bytes()
{
    local json owner long name
    # a foreign client's owner token with control characters, quote,
    # backslash, and bytes that are not UTF-8
    redis SET r-bytes $'a\x01b\nc"d\\e\xff\xc3' PX 30000 >/dev/null
    json=$(dl status --json --simple r-bytes)
    owner=$(json_field owner <<<"$json") || { fail "not valid JSON: $json"; return; }
    expect_eq "owner: escaped and replaced" '"a\u0001b\nc\"d\\e\ufffd\ufffd"' \
        "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])))' "$owner")"
    # 35 two-byte characters and a three-byte one: 73 bytes, of which
    # dlock_status keeps 71; the last character is dropped whole
    long=$(printf 'é%.0s' $(seq 35))
    redis SET r-bytes "$long€" PX 30000 >/dev/null
    json=$(dl status --json --simple r-bytes)
    expect_eq "owner cut at a character boundary" "\"$long\"" "$(json_field owner <<<"$json")"
    redis DEL r-bytes >/dev/null

    # Names with C1 control characters or bytes that are not UTF-8: refused
    # as a usage error (every store refuses them), never shown raw.
    local name
    for name in $'c1\xc2\x85name' $'bad\xffname' $'esc\x1b[2Jname'; do
        expect_rc "status --json of $(printf %q "$name")" 64 dl status --json "$name"
        expect_eq "no document for $(printf %q "$name")" "" "$(cat "$TMP/out")"
    done
}

test_bench_json()
{
    local json
    json=$(dl bench --lib 'my"lib\' --seconds 0.2) || { fail "bench failed: $(cat "$TMP/err" 2>/dev/null)"; return; }
    expect_eq "bench: lib" '"my\"lib\\"' "$(json_field lib <<<"$json")"
    expect_eq "bench: version" 1 "$(json_field version <<<"$json")"
    expect_match "bench: dlock_version" '^"[0-9]+\.[0-9]+\.[0-9]+' "$(json_field dlock_version <<<"$json")"
    expect_match "bench: cycles_per_s" '^[1-9][0-9]*$' "$(json_field cycles_per_s <<<"$json")"
    expect_eq "bench: fields" "version dlock_version lib wl kind conc cycles_per_s p50_us p99_us" \
        "$(json_keys <<<"$json")"
}

test_names()
{
    local long
    expect_rc "hash-tag name" 0 dl run 'order:{42}' -- sh -c \
        '"$0" status --json "order:{42}" | grep -q "\"held\":true"' "$DLOCK"
    expect_free 'order:{42}'
    long=$(printf 'a%.0s' $(seq 513))
    expect_rc "512-byte name" 0 dl status "${long:1}"

    expect_rc "empty name" 64 dl status ''
    expect_match "empty name message" "empty" "$(cat "$TMP/err")"
    expect_rc "empty name (run)" 64 dl run '' -- true
    expect_match "empty name message (run)" "empty" "$(cat "$TMP/err")"
    expect_rc "name with a newline" 64 dl run $'a\nb' -- true
    expect_match "newline message" "control character" "$(cat "$TMP/err")"
    expect_rc "513-byte name" 64 dl run "$long" -- true
    expect_match "long name message" "512" "$(cat "$TMP/err")"
    # braces are name characters like any other, on every store
    expect_rc "a brace in a name" 0 dl run 'a{b' -- true
    expect_rc "a brace in a name (status)" 0 dl status 'a}b'
    expect_rc "two hash tags" 0 dl run '{a}{b}' -- true
    # UTF-8 text without control characters, the same rule on every store
    expect_rc "C1 control (NEL)" 64 dl run $'nel\xc2\x85' -- true
    expect_match "C1 message" "C1 control character \(U\+0085 at byte 3\)" "$(cat "$TMP/err")"
    expect_rc "C1 control (CSI), unlock" 64 dl unlock --force $'csi\xc2\x9b'
    expect_rc "escape (C0), lock" 64 dl lock -l 1 $'esc\x1b[2J'
    expect_match "C0 message" "control character \(byte 3 is 0x1b\)" "$(cat "$TMP/err")"
    expect_rc "not UTF-8" 64 dl status $'bad\xff'
    expect_match "UTF-8 message" "not valid UTF-8" "$(cat "$TMP/err")"
    expect_rc "overlong UTF-8" 64 dl run $'slash\xc0\xaf' -- true
    expect_rc "accented and CJK names" 0 dl run $'caf\xc3\xa9-\xe6\x97\xa5' -- true
}

# ------------------------------------------------------------ tests: shell habits

test_run_shell_command()
{
    expect_rc "run NAME -c 'a && b'" 0 dl run r-sh -c 'echo "one $DLOCK_NAME" && echo "two $DLOCK_FENCE"'
    expect_match "both commands ran, in a shell" $'^one r-sh\ntwo [1-9][0-9]*$' "$(cat "$TMP/out")"
    expect_rc "-c before NAME" 0 dl run -c 'echo first' r-sh
    expect_eq "-c before NAME: output" first "$(cat "$TMP/out")"
    expect_rc "--command=STRING after NAME" 0 dl run r-sh --command='echo long'
    expect_eq "--command=: output" long "$(cat "$TMP/out")"
    expect_rc "the shell's status passes through" 5 dl run r-sh -c 'true && exit 5'
    expect_rc "-c with a multi-lock" 0 dl run -m r-sh1 -m r-sh2 -c 'test -n "$DLOCK_FENCES"'
    expect_rc "not found in the shell: 127" 127 dl run r-sh -c 'no-such-command-here'
    expect_rc "-c and COMMAND" 64 dl run r-sh -c 'true' extra
    expect_match "-c and COMMAND: message" "not both" "$(cat "$TMP/err")"
    expect_rc "-c twice" 64 dl run -c true r-sh -c true
    expect_rc "-c without a string" 64 dl run r-sh -c
    # after --, -c is the command's own
    expect_rc "-- -c is a command" 127 dl run r-sh -- -c true
    expect_free r-sh
}

test_owner_and_fence_names()
{
    local line token fence env
    expect_rc "lock" 0 dl lock -l 30 r-own || return
    line=$(cat "$TMP/out")
    token=${line% *}
    fence=${line#* }
    expect_rc "unlock --owner FENCE" 64 dl unlock --owner "$fence" r-own
    expect_match "the message says it is a fencing token" "fencing token.*not an owner token" \
        "$(cat "$TMP/err")"
    expect_rc "extend --token FENCE" 64 dl extend --token "$fence" -l 30 r-own
    expect_match "extend: the message says it is a fencing token" "fencing token" "$(cat "$TMP/err")"
    expect_eq "still held" "\"$token\"" "$(field r-own owner)"
    expect_rc "extend --owner" 0 dl extend --owner "$token" -l 30 r-own
    expect_rc "extend -o" 0 dl extend -o "$token" -l 30 r-own
    expect_rc "unlock --token (the old name of --owner)" 0 dl unlock --token "$token" r-own
    expect_free r-own

    # In the command: DLOCK_OWNER releases, DLOCK_FENCE and DLOCK_TOKEN do not.
    expect_rc "DLOCK_TOKEN is the fence" 0 dl run r-own -- sh -c \
        'printf "%s %s %s" "$DLOCK_TOKEN" "$DLOCK_FENCE" "$DLOCK_OWNER"'
    env=$(cat "$TMP/out")
    read -r token fence _ <<<"$env"
    expect_eq "DLOCK_TOKEN = DLOCK_FENCE" "$fence" "$token"
    expect_rc "unlock --owner \$DLOCK_TOKEN inside the command" 64 dl run r-own -- sh -c \
        '"$0" unlock --owner "$DLOCK_TOKEN" r-own' "$DLOCK"
    # (dlock then finds its lock gone: 75, as the man page warns)
    expect_rc "unlock --owner \$DLOCK_OWNER inside the command" 75 dl run r-own -- sh -c \
        '"$0" unlock --owner "$DLOCK_OWNER" r-own; echo $? > "$1"' "$DLOCK" "$TMP/t/rc"
    expect_eq "DLOCK_OWNER is the owner token" 0 "$(cat "$TMP/t/rc" 2>/dev/null)"

    # --simple: another client's token may be digits, so it is tried.
    expect_eq "foreign numeric owner" OK "$(redis SET r-own 12345 PX 30000)"
    expect_rc "unlock --simple --owner 12345" 0 dl unlock --simple --owner 12345 r-own
    expect_eq "the foreign key is gone" 0 "$(redis EXISTS r-own)"
    expect_rc "unlock --simple --owner 999 (not held)" 1 dl unlock --simple --owner 999 r-own
    expect_match "with a hint" "if --owner 999 is a fencing token" "$(cat "$TMP/err")"
}

test_status_check()
{
    local port
    expect_rc "--check when free" 1 dl status --check r-chk
    expect_match "--check prints the status" "state: +free" "$(cat "$TMP/out")"
    expect_rc "--check -q when free" 1 dl status --check -q r-chk
    expect_eq "-q prints nothing" "" "$(cat "$TMP/out")"
    expect_rc "lock" 0 dl lock -l 30 r-chk || return
    expect_rc "--check -q when held" 0 dl status --check -q r-chk
    expect_eq "-q prints nothing" "" "$(cat "$TMP/out")"
    expect_rc "--check --json when held" 0 dl status --check --json r-chk
    expect_eq "--check --json: the document" true "$(json_field held <"$TMP/out")"
    expect_rc "without --check: 0 either way" 0 dl status -q r-chk
    dl unlock --force r-chk >/dev/null
    expect_rc "without --check, free: 0" 0 dl status r-chk
    port=$(closed_port)
    expect_rc "--check, unreachable: 69" 69 dl status --check -q -u "redis://127.0.0.1:$port" r-chk
    expect_rc "--json with -q" 64 dl status --json -q r-chk
}

test_force_unlock_says_was_free()
{
    expect_rc "force a free lock" 0 dl unlock --force r-free
    expect_eq "it says so" "dlock unlock: 'r-free' was free" "$(cat "$TMP/err")"
    expect_rc "--check: 1 when it was free" 1 dl unlock --force --check r-free
    expect_rc "-q: nothing said" 0 dl unlock --force -q r-free
    expect_eq "-q: empty stderr" "" "$(cat "$TMP/err")"
    expect_rc "lock" 0 dl lock -l 30 r-free || return
    expect_rc "--check: 0 when it was held" 0 dl unlock --force --check r-free
    expect_eq "held: nothing said" "" "$(cat "$TMP/err")"
    expect_free r-free
    expect_rc "--check without --force" 64 dl unlock --check --owner 0123 r-free
    # every kind
    expect_rc "read lock, free" 1 dl unlock --force --check --read r-free
    expect_rc "semaphore, free" 1 dl unlock --force --check --permits 2 r-free
    # one name is one lock: free as the kind given but held as another is
    # not "free", and nothing was released: the options named it wrongly,
    # a usage error as a semaphore's wrong count is (test_semaphore_count),
    # whatever -E says (1 would read as "free" with --check)
    expect_rc "lock" 0 dl lock -l 30 r-free || return
    expect_rc "--read on a held mutex: not released" 64 dl unlock --force --read r-free
    expect_eq "--read on a held mutex: says what holds it" \
        "dlock unlock: 'r-free' is held as a mutex, not as a read-write lock: nothing was released (force it without a kind option)" \
        "$(cat "$TMP/err")"
    expect_rc "--permits on a held mutex, -E 3" 64 dl unlock -E 3 --force --check --permits 2 r-free
    expect_rc "-q: the same, said" 64 dl unlock -q --force --read r-free
    expect_match "-q: said" "^dlock unlock: 'r-free' is held as a mutex" "$(cat "$TMP/err")"
    expect_rc "still held" 1 dl run -n r-free -- true
    expect_rc "as what holds it" 0 dl unlock --force --check r-free
    expect_free r-free
}

test_verbose()
{
    local port
    # -v: a wait and its hand-over; without it the library says nothing
    expect_rc "lock" 0 dl lock -l 30 r-verbose || return
    dl_bg "$TMP/t/w" run -v -w 10 r-verbose -- true
    local waiter=$BG
    wait_until 5 has_waiters r-verbose 1 || fail "the waiter did not queue"
    expect_rc "unlock" 0 dl unlock --force -q r-verbose
    reap "$waiter" 10
    expect_eq "waiter status" 0 "$BG_RC"
    expect_match "-v: the hand-over" "dlock: info: lock 'r-verbose' (handed over by the store|acquired after a wait)" \
        "$(cat "$TMP/t/w.err")"
    expect_rc "no -v" 0 dl run r-verbose -- true
    expect_eq "no -v: silent" "" "$(cat "$TMP/err")"
    # -vv: every step, on every subcommand
    expect_rc "-vv run" 0 dl run -vv r-verbose -- true
    expect_match "-vv: acquired" "dlock: debug: lock 'r-verbose' acquired \(fence [0-9]+" "$(cat "$TMP/err")"
    expect_match "-vv: released" "dlock: debug: lock 'r-verbose' released" "$(cat "$TMP/err")"
    expect_rc "-v -v = -vv (lock)" 0 dl lock -v -v -l 5 r-verbose
    expect_match "-vv lock" "debug: lock 'r-verbose' acquired" "$(cat "$TMP/err")"
    expect_rc "--verbose (unlock)" 0 dl unlock --verbose --force r-verbose
    expect_match "-v unlock" "info: lock 'r-verbose' unlocked by force \(it was held\)" "$(cat "$TMP/err")"
    expect_rc "-v status" 0 dl status -v r-verbose
    expect_rc "-v bench" 0 dl bench -v --seconds 0.1
    # the store unreachable during a wait: retried, said at -v
    port=$(closed_port)
    expect_rc "-v, unreachable" 69 dl run -v -w 0.5 -u "redis://:pw@127.0.0.1:$port" r-verbose -- true
    expect_match "-v: retries told" "warn: lock 'r-verbose': .*Connection refused; trying again" "$(cat "$TMP/err")"
    if grep -q ':pw@' "$TMP/err"; then
        fail "the password shows in the log: $(cat "$TMP/err")"
    fi
}

test_options_consistent()
{
    expect_rc "lock" 0 dl lock -l 30 r-opt || return
    # lock: --timeout, -E, -q as in run
    expect_rc "lock --timeout 0.2 when held" 1 dl lock --timeout 0.2 -l 30 r-opt
    expect_rc "lock -n -E 7 -q when held" 7 dl lock -n -E 7 -q -l 30 r-opt
    expect_eq "lock -q: no message" "" "$(cat "$TMP/err")"
    # unlock and extend: -E and -q when the owner does not hold it
    expect_rc "unlock -E 3 by a stranger" 3 dl unlock -E 3 --owner 0123456789abcdef0123456789abcdef r-opt
    expect_match "unlock: message" "r-opt" "$(cat "$TMP/err")"
    expect_rc "unlock -q by a stranger" 1 dl unlock -q --owner 0123456789abcdef0123456789abcdef r-opt
    expect_eq "unlock -q: no message" "" "$(cat "$TMP/err")"
    expect_rc "extend -E 4 -q by a stranger" 4 dl extend -E 4 -q -l 9 \
        --owner 0123456789abcdef0123456789abcdef r-opt
    # options after NAME, as before
    expect_rc "status NAME --json" 0 dl status r-opt --json
    dl unlock --force r-opt >/dev/null

    # contradictions are refused, not resolved by order
    expect_rc "run -n -w 2" 64 dl run -n -w 2 r-opt -- true
    expect_match "-n -w message" "contradict" "$(cat "$TMP/err")"
    expect_rc "run -w 2 -n" 64 dl run -w 2 -n r-opt -- true
    expect_rc "lock -n --timeout 2" 64 dl lock -n --timeout 2 -l 5 r-opt
    expect_rc "status --read --write" 64 dl status --read --write r-opt
    expect_rc "lock --fair --simple" 64 dl lock --fair --simple -l 5 r-opt
    expect_rc "unlock --owner and --force" 64 dl unlock --owner x --force r-opt
    # an option of another subcommand is named
    expect_rc "status -l" 64 dl status -l 5 r-opt
    expect_match "status -l: message" "-l is not an option of 'dlock status'" "$(cat "$TMP/err")"
    expect_rc "unlock --grace" 64 dl unlock --grace 1 --force r-opt
    expect_match "unlock --grace: message" "--grace is not an option" "$(cat "$TMP/err")"
    expect_rc "lock -c" 64 dl lock -c true -l 5 r-opt
}

# ok_quietly COMMAND...: runs COMMAND, output discarded; a failure is one.
ok_quietly()
{
    "$@" >/dev/null 2>"$TMP/err" || fail "$*: $(head -c 300 "$TMP/err")"
}

# The scripts' digests are computed at build time: once the server has the
# scripts, every call is an EVALSHA that finds its script (a wrong digest
# would fall back to EVAL on every call).
test_scripts_run_by_digest()
{
    local stats phase line
    for phase in load check; do
        [ "$phase" = check ] && redis CONFIG RESETSTAT >/dev/null
        ok_quietly dl run r-sha -- true
        ok_quietly dl run --fair r-sha -- true
        ok_quietly dl run --read r-sha -- true
        ok_quietly dl run --write r-sha -- true
        ok_quietly dl run --permits 2 r-sha -- true
        ok_quietly dl run -m r-sha1 -m r-sha2 -- true
        ok_quietly dl run -u "$DLOCK_URL?lease=300ms" r-sha -- sleep 0.3
        ok_quietly dl status r-sha
        ok_quietly dl status --permits 2 r-sha
        ok_quietly dl unlock --force r-sha
        ok_quietly dl unlock --force --read r-sha
        line=$(dl lock -l 30 r-sha) || fail "lock r-sha"
        ok_quietly dl extend --owner "${line% *}" -l 30 r-sha
        ok_quietly dl unlock --force r-sha
    done
    stats=$(redis INFO commandstats | tr -d '\r')
    expect_match "scripts ran by digest" "cmdstat_evalsha:calls=[1-9]" "$stats"
    if [[ $stats =~ cmdstat_eval:calls=([0-9]+) ]]; then
        fail "EVAL ran ${BASH_REMATCH[1]} times after the scripts were loaded: a digest is wrong"
    fi
    if [[ $stats =~ cmdstat_evalsha:[^$'\n']*failed_calls=([1-9][0-9]*) ]]; then
        fail "EVALSHA failed ${BASH_REMATCH[1]} times (NOSCRIPT?)"
    fi
}

# ------------------------------------------------------------ tests: bad input

test_bad_input()
{
    local port line sub
    expect_rc "http:// URL" 64 dl run -u 'http://x' r-bad -- true
    expect_match "http:// message" "scheme" "$(cat "$TMP/err")"
    expect_rc "unknown URL option" 64 dl status -u "$DLOCK_URL?bogus=1" r-bad
    expect_rc "bad URL lease" 64 dl status -u "$DLOCK_URL?lease=soon" r-bad
    expect_rc "DLOCK_URL from the environment" 64 env DLOCK_URL=http://x "$DLOCK" status r-bad

    port=$(closed_port)
    # a try fails at once; a wait tries a store it never reached for a
    # moment (a restart under way), not for its budget, then says why
    expect_rc "closed port (run -n)" 69 dl run -n -u "redis://127.0.0.1:$port" r-bad -- true
    expect_eq "one line on stderr" 1 "$(wc -l <"$TMP/err")"
    line=$(cat "$TMP/err")
    expect_match "names the URL" "redis://127.0.0.1:$port" "$line"
    expect_match "says why" "Connection refused" "$line"
    expect_rc "closed port (status)" 69 dl status -u "redis://127.0.0.1:$port" r-bad
    expect_rc "closed port (lock -n)" 69 dl lock -n -u "redis://127.0.0.1:$port" -l 5 r-bad
    local t0
    t0=$(now_ms)
    expect_rc "closed port (run -w 10)" 69 dl run -w 10 -u "redis://127.0.0.1:$port" r-bad -- true
    expect_match "tried for a second, not the budget" "^1[0-9]{3}$|^2[0-9]{3}$" "$(($(now_ms) - t0))"
    expect_match "says why after the wait" "never reached .*Connection refused" "$(cat "$TMP/err")"
    # and is not silent meanwhile: the library's warnings show without -v
    expect_match "the retries are told without -v" \
        "dlock: warn: lock 'r-bad': .*Connection refused; trying again" "$(cat "$TMP/err")"
    # without -w too: it does not wait for ever (a cron job does not pile up)
    t0=$(now_ms)
    expect_rc "closed port (run without -w)" 69 dl run -u "redis://127.0.0.1:$port" r-bad -- true
    expect_match "reported within seconds" "^1[0-9]{3}$|^2[0-9]{3}$" "$(($(now_ms) - t0))"
    expect_rc "no such host (run without -w)" 69 \
        dl run -u "redis://no-such-host.invalid:$port" r-bad -- true
    expect_match "names the host" "never reached .*no-such-host.invalid" "$(cat "$TMP/err")"

    expect_rc "-l 0" 64 dl run -l 0 r-bad -- true
    # a lease too short to hold is refused up front, never tried in a loop
    expect_rc "-l 1ms" 64 dl run -l 1ms r-bad -- true
    expect_match "-l 1ms: the minimum" "at least 20 ms" "$(cat "$TMP/err")"
    expect_rc "-l 0.019" 64 dl run -l 0.019 r-bad -- true
    expect_rc "lock -l 2ms" 64 dl lock -l 2ms r-bad
    expect_rc "URL lease=19ms" 64 dl run -u "$DLOCK_URL?lease=19ms" r-bad -- true
    expect_rc "URL unreachable_wait=soon" 64 dl run -u "$DLOCK_URL?unreachable_wait=soon" r-bad -- true
    expect_rc "-l -1" 64 dl run -l -1 r-bad -- true
    expect_rc "-l 5x" 64 dl run -l 5x r-bad -- true
    expect_rc "-w abc" 64 dl run -w abc r-bad -- true
    expect_rc "-E 300" 64 dl run -E 300 r-bad -- true
    expect_rc "lock -l 0" 64 dl lock -l 0 r-bad
    expect_rc "lock without -l" 64 dl lock r-bad
    expect_rc "missing NAME" 64 dl run
    expect_match "missing NAME message" "NAME" "$(cat "$TMP/err")"
    expect_rc "missing COMMAND after --" 64 dl run r-bad --
    expect_match "missing COMMAND message" "COMMAND" "$(cat "$TMP/err")"
    expect_rc "status without NAME" 64 dl status
    expect_rc "unlock without --token or --force" 64 dl unlock r-bad
    expect_rc "unlock with both" 64 dl unlock --force --token x r-bad
    expect_rc "extend without -l" 64 dl extend --token x r-bad
    expect_rc "option not accepted by status" 64 dl status --force r-bad
    expect_rc "unknown option" 64 dl run --frobnicate r-bad -- true
    expect_rc "unknown subcommand" 64 dl frobnicate r-bad
    expect_match "unknown subcommand message" "unknown command" "$(cat "$TMP/err")"
    expect_rc "an option before the command" 64 dl -u redis://127.0.0.1:1 run r-bad -- true
    expect_match "says where options go" "options go after the command" "$(cat "$TMP/err")"
    expect_rc "an option before status" 64 dl -u redis://127.0.0.1:1 status r-bad
    expect_match "names the command given" "options go after the command \(dlock status -u \.\.\.\)" \
        "$(cat "$TMP/err")"
    expect_rc "no subcommand" 64 dl

    expect_rc "dlock --help" 0 dl --help
    expect_match "dlock --help prints usage" "^usage: dlock" "$(cat "$TMP/out")"
    expect_rc "dlock --version" 0 dl --version
    expect_match "version" "^dlock [0-9]+\.[0-9]+\.[0-9]+" "$(cat "$TMP/out")"
    for sub in run status lock unlock extend bench; do
        expect_rc "dlock $sub --help" 0 dl "$sub" --help
        expect_match "dlock $sub --help prints usage" "usage: dlock $sub" "$(cat "$TMP/out")"
    done
}

# A server that accepts connections and never answers is unreachable, never
# a lock held by someone else: -E 0 must not turn it into success.
test_silent_server_is_unreachable()
{
    local port pid
    silent_server "$TMP/t/silent"
    pid=$BG
    port=$(head -1 "$TMP/t/silent")
    expect_rc "run -n -E 0 against a silent server" 69 \
        dl run -u "redis://127.0.0.1:$port?timeout=500ms" -n -q -E 0 job -- echo ran
    expect_eq "the command did not run" "" "$(cat "$TMP/out")"
    expect_match "says so" "no reply" "$(cat "$TMP/err")"
    # a wait: one request's timeout, and no second one spent leaving a
    # queue the store never heard of (it took two)
    local t0 took
    t0=$(now_ms)
    expect_rc "run -w 60 against a silent server" 69 \
        dl run -u "redis://127.0.0.1:$port?timeout=2s" -w 60 -q job -- echo ran
    took=$(($(now_ms) - t0))
    [ "$took" -lt 3500 ] || fail "a wait on a silent server took $took ms (one 2 s timeout expected)"
    expect_match "never reached" "never reached" "$(cat "$TMP/err")"
    kill "$pid" 2>/dev/null
}

# The command does not inherit dlock's connections to the store.
test_command_inherits_no_sockets()
{
    expect_rc "run a command listing its fds" 0 \
        dl run fdtest -- sh -c 'ls -l /proc/$$/fd'
    if grep -q 'socket:' "$TMP/out"; then
        fail "the command inherited sockets: $(grep socket: "$TMP/out" | tr '\n' ' ')"
    fi
    # what dlock itself was given, the command gets too
    expect_rc "an inherited descriptor" 0 \
        dl run fdtest -- sh -c 'ls -l /proc/$$/fd/7' 7<"$TMP/err"
    expect_match "fd 7 passed on" "7 -> " "$(cat "$TMP/out")"
}

# One duration syntax for flags and URL options: a bare number is seconds.
test_durations()
{
    expect_rc "-w 1h" 0 dl run -w 1h d-ok -- true
    expect_rc "-w 250ms" 0 dl run -w 250ms d-ok -- true
    expect_rc "-l 1.5" 0 dl run -l 1.5 d-ok -- true
    local bad
    for bad in 0x10 1e3 ' 1' -1 1d inf 1.; do
        expect_rc "-w '$bad'" 64 dl run -w "$bad" d-bad -- true
    done
    expect_rc "URL lease=1h" 0 dl run -u "$DLOCK_URL?lease=1h" d-ok -- true
    expect_rc "URL lease=1e3" 64 dl run -u "$DLOCK_URL?lease=1e3" d-bad -- true
    # a value left out: the next word taken for it is said to be that
    expect_rc "-w with no value" 64 dl run -w -- true
    expect_match "-w with no value: said" "^dlock run: -w needs a value .* got '--'" "$(cat "$TMP/err")"
}

# ------------------------------------------------------------ tests: interop

test_simple_mode()
{
    local out owner got
    expect_rc "run --simple" 0 dl run --simple r-simple -- sh -c \
        'echo "$DLOCK_OWNER $(redis-cli -h 127.0.0.1 -p "$0" GET r-simple)"' "$PORT" || return
    out=$(cat "$TMP/out")
    owner=${out% *}
    got=${out#* }
    expect_match "DLOCK_OWNER" '^[0-9a-f]{32}$' "$owner"
    expect_eq "GET NAME while held shows the owner token" "$owner" "$got"
    expect_eq "the key is gone after" 0 "$(redis EXISTS r-simple)"

    # A foreign client (redis-py's Lock does exactly this) holds the key.
    expect_eq "foreign SET NX" OK "$(redis SET r-simple foreign-token NX PX 30000)"
    expect_rc "run --simple -n when held by a foreign client" 1 dl run --simple -n r-simple -- true
    expect_eq "status --simple sees the foreign owner" '"foreign-token"' \
        "$(field r-simple owner --simple)"
    expect_rc "unlock --simple --force" 0 dl unlock --simple --force r-simple
    expect_eq "the foreign key is gone" 0 "$(redis EXISTS r-simple)"

    # And the other way round: a foreign SET NX fails while dlock holds it.
    expect_rc "foreign SET NX while dlock holds it" 0 dl run --simple r-simple -- sh -c \
        '[ -z "$(redis-cli -h 127.0.0.1 -p "$0" SET r-simple intruder NX PX 30000)" ]' "$PORT"
    expect_eq "the key is gone after" 0 "$(redis EXISTS r-simple)"
}

test_unix_socket()
{
    expect_rc "status over redis+unix://" 0 dl status -u "redis+unix://$TMP/redis.sock" r-unix
    expect_rc "run over redis+unix://" 0 dl run -u "redis+unix://$TMP/redis.sock" r-unix -- true
    expect_rc "status over redis+unix:// (no such socket)" 69 \
        dl status -u "redis+unix://$TMP/nope.sock" r-unix
}

# ------------------------------------------------------------ main

# the kinds, the messages, what differs by store (test_cli_stores.sh)
# shellcheck source=tests/cli/test_cli_stores.sh
. "$HERE/test_cli_stores.sh"


run_test test_run_exit_status
run_test test_run_environment
run_test test_run_holds_lock_while_running
run_test test_nonblock_when_held
run_test test_wait_times_out
run_test test_wait_succeeds_when_holder_finishes
run_test test_lost_fixed_lease
run_test test_lost_renewed_lock_force_unlocked
run_test test_guard_failure_said
run_test test_lost_grace_then_sigkill
run_test test_lost_stops_whole_tree
run_test test_lost_kills_step_ignoring_term
run_test test_dlock_killed_stops_tree
run_test test_signal_forwarded
run_test test_signal_while_waiting_ends_the_wait
run_test test_command_stopped_when_dlock_dies
run_test test_lock_unlock_extend_by_token
run_test test_lock_handoff_in_shell
run_test test_status_text_and_json
run_test test_status_json_one_shape
run_test test_status_json_any_bytes
run_test test_bench_json
run_test test_run_shell_command
run_test test_owner_and_fence_names
run_test test_status_check
run_test test_options_consistent
run_test test_force_unlock_says_was_free
run_test test_verbose
run_test test_scripts_run_by_digest
run_test test_names
run_test test_bad_input
run_test test_silent_server_is_unreachable
run_test test_command_inherits_no_sockets
run_test test_durations
run_test test_simple_mode
run_test test_unix_socket
run_test test_kinds_read_write
run_test test_kinds_semaphore
run_test test_kinds_fair_and_multi
run_test test_who_and_list

run_test test_messages
run_test test_misplaced_options
run_test test_flock_shared_exclusive

# what a new user meets first (test_cli_ux.sh)
# shellcheck source=tests/cli/test_cli_ux.sh
. "$HERE/test_cli_ux.sh"
run_test test_waiting_says_who_holds
run_test test_did_you_mean
run_test test_refusal_names_options
run_test test_replica_read_says_so
run_test test_unreached_store_ends_at_once
run_test test_urls_show_user_not_password
run_test test_env_url_named
run_test test_empty_name_and_prefix
run_test test_name_before_dashdash
run_test test_dash_name_forms
run_test test_name_rules_same
run_test test_names_given
run_test test_cannot_take_wording
run_test test_gave_up_says_who_holds
run_test test_long_log_line_whole
run_test test_redlock_nodes_down_told_once
run_test test_redlock_refused_apart_from_out_of_reach
run_test test_unknown_protocol_in_words
run_test test_help_exit_codes
run_test test_help_url_paragraph
run_test test_url_exported_as_typed
run_test test_short_lease_warning_words
run_test test_dashdash_name_then_shell
run_test test_url_values_told
run_test test_lease_flag_meant
run_test test_sqlite_loss_words
run_test test_url_given_as_name
run_test test_url_secret_not_echoed
run_test test_retry_delay_never_zero
run_test test_store_sqlite_banner

# The behaviour that differs by store, on each.
${CC:-cc} -shared -fPIC -o "$TMP/no_close_range.so" "$HERE/no_close_range.c" ||
    { echo "$0: cannot build no_close_range.so" >&2; exit 1; }
NO_CLOSE_RANGE=$TMP/no_close_range.so
REDIS_URL=$DLOCK_URL
for STORE in "${STORES[@]}"; do
    case $STORE in
    redis) DLOCK_URL=$REDIS_URL ;;
    zookeeper)
        start_zookeeper
        DLOCK_URL=$ZK_URL
        ;;
    etcd)
        start_etcd
        DLOCK_URL=$ETCD_URL
        ;;
    postgres)
        start_postgres
        DLOCK_URL=$PG_URL
        ;;
    mariadb)
        start_mariadb
        DLOCK_URL=$MY_URL
        ;;
    redlock)
        start_redlock
        DLOCK_URL=$RL_URL
        ;;
    sqlite) DLOCK_URL=sqlite://$TMP/cli-locks.db ;;
    esac
    for t in test_fence_strings test_verbose_reports test_unsupported_is_usage \
        test_status_session_words test_status_other_kind test_renewed_lease_flag \
        test_hold_without_command test_status_sql_sessions test_wrong_port \
        test_command_inherits_no_descriptors test_refusal_hints_accepted \
        test_force_unlock_any_mode test_semaphore_count test_url_as_given \
        test_force_free_one_line; do
        [ "$t" = test_unsupported_is_usage ] && [ "$STORE" = redis ] && continue # it can do all
        # (it takes the name as a semaphore, which PostgreSQL's session
        # mode, MariaDB's and Redlock do not have)
        [ "$t" = test_status_other_kind ] &&
            { [ "$STORE" = postgres ] || [ "$STORE" = mariadb ] || [ "$STORE" = redlock ]; } &&
            continue
        run_test "$t" "$t[$STORE]"
    done
done
DLOCK_URL=$REDIS_URL

echo "# $(($(now_ms) - T0)) ms"
if [ "$FAILED_TESTS" -ne 0 ]; then
    echo "$FAILED_TESTS test(s) failed" >&2
    exit 1
fi
echo "all tests passed"
