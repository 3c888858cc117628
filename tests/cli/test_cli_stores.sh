# SPDX-License-Identifier: MIT
# test_cli_stores.sh - the lock kinds, the messages, and the behaviour that
# differs by store (fences, -v, refusals, status words, leases, holds
# without a command, descriptors, who holds what), sourced by test_cli.sh
# (its helpers, its servers); the by-store tests run on each store of
# DLOCK_CLI_STORES there.
# shellcheck shell=bash disable=SC2016
# ------------------------------------------------------------ tests: kinds

test_kinds_read_write()
{
    local json
    # two readers inside at once: each waits to see the other
    dl_bg "$TMP/t/r1" run --read doc -- sh -c \
        ': > "$0/in1"; i=0; while [ ! -e "$0/in2" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; [ -e "$0/in2" ]' \
        "$TMP/t"
    local r1=$BG
    wait_until 10 test -e "$TMP/t/in1" || { fail "the first reader never started"; return; }
    expect_rc "a writer is kept out while reading" 1 dl run -n --write doc -- true
    expect_rc "a second reader goes in" 0 dl run -w 10 --read doc -- sh -c \
        ': > "$0/in2"; i=0; while kill -0 "$1" 2>/dev/null && [ $i -lt 5 ]; do sleep 0.01; i=$((i+1)); done' \
        "$TMP/t" "$r1"
    reap "$r1" 10
    expect_eq "both readers were in together" 0 "$BG_RC"
    json=$(dl status --read --json doc)
    expect_eq "status of a read-write lock: kind" '"read-write"' "$(json_field kind <<<"$json")"
    expect_eq "status of a read-write lock: readers" 0 "$(json_field shared <<<"$json")"
    expect_rc "the writer now" 0 dl run -n --write doc -- true
    expect_rc "--read with --write" 64 dl run --read --write doc -- true
}

test_kinds_semaphore()
{
    local text
    dl_bg "$TMP/t/s1" run --permits 2 pool -- sh -c ': > "$0/s1"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    local s1=$BG
    dl_bg "$TMP/t/s2" run --permits 2 pool -- sh -c ': > "$0/s2"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    local s2=$BG
    wait_until 10 test -e "$TMP/t/s1" -a -e "$TMP/t/s2" || { fail "two holders never got in"; return; }
    text=$(dl status --permits 2 pool)
    expect_match "permits in status" "permits: +2 of 2 taken, by 2 holders" "$text"
    text=$(dl status --permits 3 pool 2>&1)
    expect_match "status names the count in use" "pool has 2 permits, not 3" "$text"
    expect_rc "--take is for run only" 64 dl status --permits 2 --take 1 pool
    expect_rc "a third finds no permit" 1 dl run -n --permits 2 pool -- true
    expect_rc "two at once do not fit" 1 dl run -n --permits 2 --take 2 pool -- true
    : >"$TMP/t/go"
    reap "$s1" 10
    reap "$s2" 10
    expect_rc "both permits at once" 0 dl run -n --permits 2 --take 2 pool -- true
    expect_rc "--take above --permits" 64 dl run --permits 2 --take 3 pool -- true
    expect_rc "--take without --permits" 64 dl run --take 1 pool -- true
}

test_kinds_fair_and_multi()
{
    local fences
    expect_rc "run --fair" 3 dl run --fair fq -- sh -c 'exit 3'
    fences=$(dl run -m ma -m mb -- sh -c 'echo "$DLOCK_FENCES"')
    expect_match "DLOCK_FENCES names every lock" '^ma=[1-9][0-9]*$' "$(printf '%s\n' "$fences" | sed -n 1p)"
    expect_match "DLOCK_FENCES: one line per lock" '^mb=[1-9][0-9]*$' "$(printf '%s\n' "$fences" | sed -n 2p)"
    fences=$(dl run -m 'x,y' -m 'k=v' -- sh -c 'echo "$DLOCK_FENCES"')
    expect_match "names with , and = read back" '^k=v=[1-9][0-9]*$' "$(printf '%s\n' "$fences" | sed -n 1p)"
    expect_match "names with , and = read back" '^x,y=[1-9][0-9]*$' "$(printf '%s\n' "$fences" | sed -n 2p)"
    fences=$(DLOCK_FENCES=stale dl run single -- sh -c 'echo "${DLOCK_FENCES-unset}"')
    expect_match "a stale DLOCK_FENCES is not passed on" '^unset$' "$fences"
    dl_bg "$TMP/t/m" run -m mb -m ma -- sh -c ': > "$0/m"; while [ ! -e "$0/mgo" ]; do sleep 0.02; done' "$TMP/t"
    local m=$BG
    wait_until 10 test -e "$TMP/t/m" || { fail "the multi-lock never started"; return; }
    expect_rc "a member is taken" 1 dl run -n mb -- true
    expect_rc "so is the other" 1 dl run -n ma -- true
    : >"$TMP/t/mgo"
    reap "$m" 10
    expect_eq "the multi-lock run" 0 "$BG_RC"
    expect_free ma
    expect_free mb
    expect_rc "-m with --read" 64 dl run --read -m a -m b -- true
}

# ------------------------------------------------------------ tests: messages

# What a new user meets: messages that say what is wrong, once, under
# dlock's name, in a line or two.
test_messages()
{
    local args
    # a duration says what is wrong with it, in every duration option
    expect_rc "-l 400d" 64 dl run -l 400d m-msg -- true
    expect_eq "-l 400d: the unit" \
        "dlock run: -l 400d: unknown unit 'd': the units are ms, s, m and h (a number without one is seconds)" \
        "$(cat "$TMP/err")"
    for args in "run -w 5d m-msg -- true" "run --grace 2x m-msg -- true" "run -L 1y m-msg" \
        "lock -l 3w m-msg" "extend --owner 0123456789abcdef0123456789abcdef -l 3days m-msg" \
        "bench --lease 1d"; do
        # shellcheck disable=SC2086 # the words of $args
        expect_rc "dlock $args" 64 dl $args
        expect_match "dlock $args: the unit" "^dlock [a-z]+: -?-?[a-zL]+ [0-9]+[a-z]+: unknown unit '[a-z]+': the units are ms, s, m and h" \
            "$(cat "$TMP/err")"
    done
    expect_rc "-w abc" 64 dl run -w abc m-msg -- true
    expect_match "-w abc: what a duration is" "^dlock run: -w abc: not a duration: give a number and a unit" "$(cat "$TMP/err")"
    # a lease of zero, or one too short, in one wording, whichever says it
    local floor="a lease must be at least 20 ms (of a shorter one, the drift margin and a round trip leave too little to hold)"
    expect_rc "-l 0" 64 dl run -l 0 m-msg -- true
    expect_eq "-l 0: the floor" "dlock run: -l 0: $floor" "$(cat "$TMP/err")"
    expect_rc "-L 0" 64 dl run -L 0 m-msg -- true
    expect_eq "-L 0: the floor" "dlock run: -L 0: $floor" "$(cat "$TMP/err")"
    expect_rc "-l 0.01" 64 dl lock -l 0.01 m-msg
    expect_eq "-l 0.01: the floor" "dlock lock: -l 0.01: $floor" "$(cat "$TMP/err")"
    expect_rc "?lease=0" 64 dl run -u "$DLOCK_URL?lease=0" m-msg -- true
    expect_eq "?lease=0: the floor, and the URL it is in" \
        "dlock: cannot open client: $DLOCK_URL?lease=0: option lease=0: $floor" "$(cat "$TMP/err")"
    DLOCK_URL="$DLOCK_URL?lease=0" expect_rc "\$DLOCK_URL's ?lease=0" 64 dl run m-msg -- true
    expect_eq "\$DLOCK_URL's ?lease=0: where it was" \
        "dlock: \$DLOCK_URL (no -u given): cannot open client: $DLOCK_URL?lease=0: option lease=0: $floor" \
        "$(cat "$TMP/err")"
    expect_rc "--label too long" 64 dl run --label "$(printf '%080d' 0)" m-msg -- true
    expect_match "--label too long: the option given, not the URL's" \
        "^dlock: cannot open client: --label: option label is 80 bytes long" \
        "$(cat "$TMP/err")"
    expect_rc "-w 9000h" 64 dl run -w 9000h m-msg -- true
    expect_match "-w 9000h: too long" "longer than 366 days" "$(cat "$TMP/err")"

    # lock, unlock and extend name the lock once
    expect_rc "lock" 0 dl lock -l 30 m-msg || return
    expect_rc "lock when held" 1 dl lock -n -l 30 m-msg
    expect_match "lock when held: one line" "^dlock: lock 'm-msg' is held by someone else" "$(cat "$TMP/err")"
    expect_eq "lock when held: the name once" 1 "$(head -1 "$TMP/err" | grep -o m-msg | wc -l)"
    expect_match "lock when held: then who holds it" "^dlock: lock 'm-msg' is held by pid [0-9]+ on " \
        "$(sed -n 2p "$TMP/err")"
    expect_rc "unlock by a stranger" 1 dl unlock --owner 0123456789abcdef0123456789abcdef m-msg
    expect_eq "unlock: the name once" "dlock: lock 'm-msg' is held under another owner token" "$(cat "$TMP/err")"
    expect_rc "extend by a stranger" 1 dl extend --owner 0123456789abcdef0123456789abcdef -l 5 m-msg
    expect_eq "extend: the name once" 1 "$(grep -o m-msg "$TMP/err" | wc -l)"
    dl unlock --force m-msg >/dev/null

    # getopt's own messages under dlock's name, then where help is
    expect_rc "unknown option" 64 dl run --frobnicate m-msg -- true
    expect_eq "unknown option: two lines" \
        $'dlock run: unrecognized option \'--frobnicate\'\nTry \'dlock run --help\'.' "$(cat "$TMP/err")"
    expect_rc "a value missing" 64 dl run -w
    expect_match "a value missing" "^dlock run: option requires an argument -- 'w'" "$(cat "$TMP/err")"
    expect_rc "status, unknown option" 64 dl status --frobnicate m-msg
    expect_match "status: dlock status" "^dlock status: unrecognized option" "$(cat "$TMP/err")"
    expect_rc "bench, unknown option" 64 dl bench --frobnicate
    expect_match "bench: dlock bench" "^dlock bench: unrecognized option" "$(cat "$TMP/err")"

    # a usage error is the line that matters and a pointer to --help
    for args in "run" "run -x --read m-msg -- true" "status -l 5 m-msg" "status" "lock m-msg" \
        "unlock m-msg" "extend m-msg" "list a b" "bench nothing" "frobnicate" ""; do
        # shellcheck disable=SC2086 # the words of $args
        expect_rc "dlock $args" 64 dl $args
        if [ "$(wc -l <"$TMP/err")" -gt 2 ]; then
            fail "dlock $args: a usage error of $(wc -l <"$TMP/err") lines: $(cat "$TMP/err")"
        fi
    done
    expect_rc "run: missing NAME" 64 dl run
    expect_eq "run: missing NAME" \
        $'dlock run: missing NAME: give the lock\'s name (a shell variable that is not set, unquoted, is no word at all)\nTry \'dlock run --help\'.' \
        "$(cat "$TMP/err")"
    # help itself is whole
    expect_rc "run --help" 0 dl run --help
    if [ "$(wc -l <"$TMP/out")" -lt 20 ]; then
        fail "dlock run --help is $(wc -l <"$TMP/out") lines"
    fi
}

# A command word that is one of dlock's options, after NAME and before any
# --, is refused before anything is taken.
test_misplaced_options()
{
    local port
    expect_rc "dlock run NAME -w 5 echo hi" 64 dl run m-place -w 5 echo hi
    expect_match "with the fix" "^dlock run: -w after NAME would be the command: put dlock's options before NAME, or use -- before a command that starts with -w" \
        "$(cat "$TMP/err")"
    expect_eq "nothing ran" "" "$(cat "$TMP/out")"
    # refused before the store is asked: 64, not unreachable (69)
    port=$(closed_port)
    expect_rc "before anything is taken" 64 dl run -u "redis://127.0.0.1:$port" m-place -w 5 echo hi
    expect_rc "a long option" 64 dl run m-place --wait=5 echo hi
    expect_rc "an abbreviated one" 64 dl run m-place --nonbl echo hi
    expect_rc "-v" 64 dl run m-place -v true
    expect_free m-place
    # after --, the command's
    expect_rc "dlock run NAME -- -w: the command -w" 127 dl run m-place -- -w 5
    expect_match "-- -w: run as the command" "cannot run '-w'" "$(cat "$TMP/err")"
    # an option of the command, after the command word
    expect_rc "the command's options" 0 dl run m-place echo -w 5
    expect_eq "echo -w 5" "-w 5" "$(cat "$TMP/out")"
}

# flock's -s and -x: --read and --write.
test_flock_shared_exclusive()
{
    dl_bg "$TMP/t/r1" run -s f-rw -- sh -c ': > "$0/in1"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    local r1=$BG
    wait_until 10 test -e "$TMP/t/in1" || { fail "the first reader never started"; return; }
    expect_eq "-s is a reader of the read-write lock" 1 "$(field f-rw shared --read)"
    expect_rc "--shared goes in beside it" 0 dl run -n --shared f-rw -- true
    expect_rc "-x is kept out" 1 dl run -n -x f-rw -- true
    expect_rc "--exclusive too" 1 dl run -n --exclusive f-rw -- true
    expect_rc "the plain lock f-rw is the same name: held" 1 dl run -n f-rw -- true
    touch "$TMP/t/go"
    reap "$r1" 10
    expect_eq "the reader" 0 "$BG_RC"
    expect_rc "-x alone" 0 dl run -n -x f-rw -- sh -c '"$0" status -x --json f-rw' "$DLOCK"
    expect_eq "-x is the writer" '"read-write"' "$(json_field kind <"$TMP/out")"
    expect_match "-x is the writer" '^"[0-9a-f]{32}"$' "$(json_field owner <"$TMP/out")"
    expect_rc "-s with -x" 64 dl run -s -x f-rw -- true
    expect_rc "lock -s: only exclusive holds are handed on" 64 dl lock -s -l 5 f-rw
    expect_rc "lock -x" 0 dl lock -x -l 5 f-rw
    expect_rc "unlock -x --force" 0 dl unlock -x --force --check f-rw
}

# ------------------------------------------------------------ tests: every store

# Each of these runs on every store of STORES (the loop at the end), with
# STORE set to its name and DLOCK_URL to its URL.

# Fences beyond 2^53 (ZooKeeper's are near 2^61) come out of JSON readers
# that read numbers as doubles (jq 1.6, JavaScript) rounded, so that two can
# compare equal: status --json gives the fence as a string too.
test_fence_strings()
{
    local doc fence
    expect_rc "status --json from inside the command" 0 dl run s-fence -- sh -c \
        '"$0" status --json s-fence && echo "$DLOCK_FENCE"' "$DLOCK" || return
    doc=$(sed -n 1p "$TMP/out")
    fence=$(sed -n 2p "$TMP/out")
    expect_match "DLOCK_FENCE" '^[1-9][0-9]*$' "$fence" || return
    if [ "$STORE" = redlock ]; then
        # the highest counter that answered, at least the hold's (see test_hold_without_command)
        local seen num
        seen=$(json_field last_fence_str <<<"$doc")
        num=$(json_field last_fence <<<"$doc")
        expect_match "last_fence_str: a string of digits" '^"[1-9][0-9]*"$' "$seen" || return
        seen=${seen//\"/}
        [ "$seen" -ge "$fence" ] 2>/dev/null || fail "last fence $seen below the hold's $fence"
        expect_eq "last_fence: the same number as the string" "$seen" "$num"
    else
        expect_eq "last_fence_str: the fence, exactly" "\"$fence\"" "$(json_field last_fence_str <<<"$doc")"
        expect_eq "last_fence: the fence, as before" "$fence" "$(json_field last_fence <<<"$doc")"
    fi
    if [ "$STORE" = zookeeper ] && [ "${#fence}" -lt 17 ]; then
        fail "ZooKeeper's fences are above 2^53 (the case the string is for), not $fence"
    fi
}

# -v reports an acquisition nobody contended for, and the release.
test_verbose_reports()
{
    local fence err session
    case $STORE in
    redis | redlock | sqlite | mariadb) session= ;; # (MariaDB: its lock table, the default mode)
    zookeeper) session=ZooKeeper ;;
    etcd) session=etcd ;;
    postgres) session=PostgreSQL ;;
    esac
    expect_rc "run -v" 0 dl run -v s-verbose -- sh -c 'echo "$DLOCK_FENCE"' || return
    fence=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
    expect_eq "run -v: two lines" 2 "$(wc -l <<<"$err")"
    if [ "$session" = ZooKeeper ]; then
        expect_match "run -v: the acquisition, on the store's session" \
            "^dlock: lock 's-verbose' acquired in [0-9]+\.[0-9]+ m?s: fence $fence; held by dlock's $session session \(timeout 30s asked for, within the server's bounds\), kept alive while dlock runs$" \
            "$(sed -n 1p <<<"$err")"
    elif [ -n "$session" ]; then
        # (etcd's session lease, a PostgreSQL connection's: no timeout of
        # its own, as ZooKeeper's session has)
        expect_match "run -v: the acquisition, on the store's session" \
            "^dlock: lock 's-verbose' acquired in [0-9]+\.[0-9]+ m?s: fence $fence; held by dlock's $session session \(lease 30s, kept alive every 10s while dlock runs\)$" \
            "$(sed -n 1p <<<"$err")"
    else
        expect_match "run -v: the acquisition, with a renewed lease" \
            "^dlock: lock 's-verbose' acquired in [0-9]+\.[0-9]+ m?s: fence $fence; lease 30s, renewed every 10s$" \
            "$(sed -n 1p <<<"$err")"
    fi
    expect_match "run -v: the release" \
        "^dlock: lock 's-verbose' released after [0-9]+\.[0-9]+ m?s: fence $fence$" "$(sed -n 2p <<<"$err")"
    expect_rc "run -v -L 3s" 0 dl run -v -L 3s s-verbose -- true
    expect_match "run -v -L 3s: that lease" "(lease 3s, renewed every 1s|\(timeout 3s asked for|\(lease 3s, kept alive every 1s)" "$(cat "$TMP/err")"
    expect_rc "run -v -m" 0 dl run -v -m s-verbose1 -m s-verbose2 -- true
    expect_match "run -v -m: every name and fence" \
        "^dlock: multi-lock of 's-verbose1', 's-verbose2' acquired in [0-9.]+ m?s: fences 's-verbose1' [0-9]+, 's-verbose2' [0-9]+;" \
        "$(cat "$TMP/err")"
    # the kind is named: read, write, semaphore (where the store has them)
    case $STORE in
    redis | zookeeper | etcd | sqlite)
        expect_rc "run -v --read" 0 dl run -v --read s-verbose-rw -- true
        expect_match "run -v --read: a read lock" \
            "^dlock: read lock 's-verbose-rw' acquired in [0-9.]+ m?s: fence [0-9]+;.*"$'\n'"dlock: read lock 's-verbose-rw' released after " \
            "$(cat "$TMP/err")"
        expect_rc "run -v -x" 0 dl run -v -x s-verbose-rw -- true
        expect_match "run -v -x: a write lock" "^dlock: write lock 's-verbose-rw' acquired in " \
            "$(cat "$TMP/err")"
        expect_rc "run -v --permits 3 --take 2" 0 dl run -v --permits 3 --take 2 s-verbose-sem -- true
        expect_match "run -v --permits 3 --take 2: a semaphore, its permits" \
            "^dlock: semaphore 's-verbose-sem' acquired \(2 of 3 permits\) in [0-9.]+ m?s: fence [0-9]+;" \
            "$(cat "$TMP/err")"
        ;;
    esac
    [ "$STORE" = zookeeper ] || [ "$STORE" = postgres ] &&
        return # no fixed leases there
    expect_rc "run -v -l 5" 0 dl run -v -l 5 s-verbose -- true
    expect_match "run -v -l 5: a fixed lease" "acquired in [0-9.]+ m?s: fence [0-9]+; fixed lease 5s, not renewed$" \
        "$(sed -n 1p "$TMP/err")"
    [ "$STORE" = etcd ] && return # no dlock lock there (no adopt)
    expect_rc "lock -v" 0 dl lock -v -l 5 s-verbose
    expect_match "lock -v: left held" \
        "^dlock: lock 's-verbose' acquired in [0-9.]+ m?s: fence [0-9]+; fixed lease 5s, not renewed; left held when dlock exits$" \
        "$(cat "$TMP/err")"
    dl unlock --force s-verbose >/dev/null
}

# expect_refused: expect_rc, keeping its stderr in $TMP/t/refusals.
expect_refused()
{
    expect_rc "$@"
    cat "$TMP/err" >>"$TMP/t/refusals"
}

# A capability the store lacks, asked for by an option, is a usage error
# naming the option (the command line's, not the C API's: no
# dlock_acquire_for, no DLOCK_SIMPLE), the capability and the store, and
# what can do it instead: another mode of the store, or other stores.
test_unsupported_is_usage()
{
    case $STORE in
    zookeeper)
        expect_refused "-l" 64 dl run -l 5 s-cap -- true
        expect_match "-l: named" '^dlock run: -l/--lease: .*ZooKeeper cannot do a fixed lease .*"fixed-lease".*: a store with leases can: redis://' "$(cat "$TMP/err")"
        expect_refused "--simple" 64 dl run --simple s-cap -- true
        expect_match "--simple: named" '^dlock run: --simple: .*ZooKeeper .*"interop"' "$(cat "$TMP/err")"
        expect_refused "lock" 64 dl lock -l 5 s-cap
        expect_match "lock: named, and what to do" \
            $'^dlock lock: -l/--lease: .*"fixed-lease".*\n.*\'dlock run NAME\' holds it until interrupted' "$(cat "$TMP/err")"
        # the stores named can do what dlock lock needs: a fixed lease and adopt (not etcd)
        expect_match "lock: the stores that can" \
            ': a store that can: redis://, redlock://, sqlite://, or mysql:// or postgres:// with \?mode=table$' \
            "$(head -1 "$TMP/err")"
        expect_refused "extend" 64 dl extend --owner 0123456789abcdef0123456789abcdef -l 5 s-cap
        expect_match "extend: named" '^dlock extend: --owner: .*"adopt"' "$(cat "$TMP/err")"
        ;;
    postgres)
        expect_refused "-l" 64 dl run -l 5 s-cap -- true
        expect_match "-l: named" '^dlock run: -l/--lease: .*PostgreSQL in session mode cannot do a fixed lease .*"fixed-lease".*: use \?mode=table' "$(cat "$TMP/err")"
        expect_refused "--simple" 64 dl run --simple s-cap -- true
        expect_match "--simple: named" '^dlock run: --simple: .*PostgreSQL .*"interop"' "$(cat "$TMP/err")"
        # both modes have read locks; the semaphore is the table mode's
        expect_rc "table mode --read: taken" 0 dl run -u "$DLOCK_URL?mode=table" --read s-cap -- true
        expect_rc "table mode --shared -l 5: taken" 0 dl run -u "$DLOCK_URL?mode=table" --shared -l 5 s-cap -- true
        expect_rc "table mode --permits: taken" 0 dl run -u "$DLOCK_URL?mode=table" --permits 2 s-cap -- true
        expect_refused "--permits" 64 dl run --permits 2 s-cap -- true
        expect_match "--permits: named, and the mode that can" '^dlock run: --permits: .*PostgreSQL in session mode .*"semaphore".*: use \?mode=table' "$(cat "$TMP/err")"
        expect_refused "lock" 64 dl lock -l 5 s-cap
        # with --simple too, the option named is the one refused
        expect_refused "lock --simple" 64 dl lock --simple -l 5 s-cap
        expect_match "lock --simple: the option refused" \
            '^dlock lock: --simple: .*"interop".*: a store that can: redis://' "$(cat "$TMP/err")"
        expect_refused "extend --owner" 64 dl extend --owner 0123456789abcdef0123456789abcdef -l 5 s-cap
        expect_match "extend --owner: named, and the mode that can" \
            '^dlock extend: --owner: .*"adopt".*: use \?mode=table' "$(cat "$TMP/err")"
        ;;
    mariadb) # its lock table (the default mode): fixed leases, adopt and every kind but interop
        expect_refused "--simple" 64 dl run --simple s-cap -- true
        expect_match "--simple: named" '^dlock run: --simple: .*MariaDB/MySQL .*"interop"' "$(cat "$TMP/err")"
        expect_rc "--read: taken" 0 dl run --read s-cap -- true
        expect_rc "--permits: taken" 0 dl run --permits 2 s-cap -- true
        expect_rc "--fair: taken" 0 dl run --fair s-cap -- true
        # its session mode has the mutex only: the mode that has the kind named
        expect_refused "session mode --read" 64 dl run -u "$DLOCK_URL?mode=session" --read s-cap -- true
        expect_match "session mode --read: named, and the mode that can" \
            '^dlock run: --read: .*MariaDB/MySQL in session mode .*"read-write".*: drop \?mode=: the lock table' \
            "$(cat "$TMP/err")"
        expect_refused "row mode --permits" 64 dl run -u "$DLOCK_URL?mode=row" --permits 2 s-cap -- true
        expect_match "row mode --permits: named, and the mode that can" \
            '^dlock run: --permits: .*MariaDB/MySQL in row mode .*"semaphore".*: drop \?mode=: the lock table' \
            "$(cat "$TMP/err")"
        # its session mode: no fixed lease, and the mode that has one named
        expect_refused "session mode -l" 64 dl lock -u "$DLOCK_URL?mode=session" -l 5 s-cap
        expect_match "session mode -l: the option, and the mode that can" \
            '^dlock lock: -l/--lease: .*MariaDB/MySQL in session mode cannot do a fixed lease .*: use \?mode=table' \
            "$(cat "$TMP/err")"
        ;;
    etcd)
        expect_refused "--simple" 64 dl run --simple s-cap -- true
        expect_match "--simple: named" '^dlock run: --simple: .*etcd .*"interop"' "$(cat "$TMP/err")"
        expect_refused "status --simple" 64 dl status --simple s-cap
        expect_refused "unlock --owner" 64 dl unlock --owner 0123456789abcdef0123456789abcdef s-cap
        expect_match "unlock --owner: named" '^dlock unlock: --owner: .*etcd .*"adopt"' "$(cat "$TMP/err")"
        # a lock its owner token could not release is not taken
        expect_refused "lock" 64 dl lock -l 5 s-cap
        expect_match "lock: named as the other refusals, and what to do" \
            '^dlock lock: -l/--lease: etcd cannot .*\(capability "adopt" is missing\): a store that can: redis://, redlock://, sqlite://.*dlock run NAME' \
            "$(cat "$TMP/err")"
        expect_eq "lock: one line, no --help hint" 1 "$(wc -l <"$TMP/err")"
        ;;
    redlock) # a mutex, its interop key and the read-write lock, with fixed leases and adopt
        expect_refused "--fair" 64 dl run --fair s-cap -- true
        expect_match "--fair: named" '^dlock run: --fair: .*Redlock .*"fair"' "$(cat "$TMP/err")"
        expect_refused "--permits" 64 dl run --permits 2 s-cap -- true
        expect_match "--permits: named" '^dlock run: --permits: .*Redlock .*"semaphore"' "$(cat "$TMP/err")"
        expect_rc "--read: taken" 0 dl run --read s-cap -- true
        # bench names the kind refused, not one of its own lock names
        expect_refused "bench --kind semaphore" 64 dl bench --kind semaphore --seconds 0.1
        expect_match "bench --kind semaphore: named" \
            '^dlock bench: --kind: .*Redlock cannot do a semaphore \(capability "semaphore" is missing\): a store that can: redis://' \
            "$(cat "$TMP/err")"
        if grep -Eq 'bench:(warm|probe|[0-9])' "$TMP/err"; then
            fail "bench --kind semaphore: an internal lock name shown: $(cat "$TMP/err")"
        fi
        ;;
    sqlite) # every kind but the fair queue and the interop key
        expect_refused "--simple" 64 dl run --simple s-cap -- true
        expect_match "--simple: named" '^dlock run: --simple: .*SQLite .*"interop"' "$(cat "$TMP/err")"
        # named as the user wrote it, with -l given too
        expect_refused "--fair -l 5" 64 dl run --fair -l 5 s-cap -- true
        expect_match "--fair: named as given" '^dlock run: --fair: .*SQLite .*"fair"' "$(cat "$TMP/err")"
        expect_rc "--read: taken" 0 dl run --read s-cap -- true
        expect_rc "--permits: taken" 0 dl run --permits 2 s-cap -- true
        ;;
    esac
    expect_free s-cap
    if grep -E 'dlock_|DLOCK_' "$TMP/t/refusals"; then
        fail "a C API name in the command line's refusals (above)"
    fi
}

# One name is one lock: status of a kind that is free says which other kind
# of the name holds it, and --check calls the name held (on ZooKeeper, the
# read-write lock's status no longer counts a mutex's node as a reader).
test_status_other_kind()
{
    dl_bg "$TMP/t/sk" run --permits 2 s-kind -- sh -c ': > "$0/in"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    local holder=$BG
    wait_until 10 test -e "$TMP/t/in" || { fail "the semaphore holder never started"; return; }
    expect_eq "the mutex's status names the kind, in English, and the options that show it" \
        'state:      held as a semaphore, not as a mutex (one name is one lock: status --permits 2 shows it)' \
        "$(dl status s-kind | grep '^state:')"
    expect_eq "the read-write lock's status: the same" \
        'state:      held as a semaphore, not as a read-write lock (one name is one lock: status --permits 2 shows it)' \
        "$(dl status --read s-kind | grep '^state:')"
    expect_match "the options it names show it" '^state: +held$' "$(dl status --permits 2 s-kind | grep '^state:')"
    expect_rc "status --check: the name is held" 0 dl status --check -q s-kind
    expect_eq "held_as in JSON" '"semaphore"' "$(field s-kind held_as)"
    touch "$TMP/t/go"
    reap "$holder" 10
    # held as a read-write lock, by its writer or by a reader: a
    # semaphore's status says so, and which options show it
    local rw
    for rw in --write --read; do
        rm -f "$TMP/t/go" "$TMP/t/in"
        dl_bg "$TMP/t/rk" run "$rw" s-kind -- sh -c ': > "$0/in"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
        holder=$BG
        wait_until 10 test -e "$TMP/t/in" || { fail "the $rw holder never started"; return; }
        expect_eq "$rw held: the semaphore's status names the kind" \
            'state:      held as a read-write lock, not as a semaphore (one name is one lock: status --write shows it)' \
            "$(dl status --permits 2 s-kind | grep '^state:')"
        expect_eq "$rw held: no permit taken" 'permits:    0 of 2 taken, by 0 holders' \
            "$(dl status --permits 2 s-kind | grep '^permits:')"
        expect_eq "$rw held: held_as in JSON" '"read-write"' "$(field s-kind held_as --permits 2)"
        expect_match "$rw held: the options named show it" '^state: +held$' \
            "$(dl status --write s-kind | grep '^state:')"
        touch "$TMP/t/go"
        reap "$holder" 10
    done
    expect_rc "free once it is let go" 1 dl status --check -q s-kind
    rm -f "$TMP/t/go" "$TMP/t/in"
    dl_bg "$TMP/t/mk" run m-kind -- sh -c ': > "$0/in"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    holder=$BG
    wait_until 10 test -e "$TMP/t/in" || { fail "the mutex holder never started"; return; }
    expect_eq "a mutex's node is no reader" 0 "$(field m-kind shared --read)"
    expect_eq "the read-write lock is held as a mutex" '"mutex"' "$(field m-kind held_as --read)"
    expect_eq "the semaphore's status: held as a mutex" \
        'state:      held as a mutex, not as a semaphore (one name is one lock: status without a kind option shows it)' \
        "$(dl status --permits 2 m-kind | grep '^state:')"
    # a refusal of the kind says who holds it, as a refusal of a held lock does
    local args
    for args in "--read" "--permits 2"; do
        # shellcheck disable=SC2086 # the words of $args
        expect_rc "run -n $args: held as a mutex" 1 dl run -n $args m-kind -- true
        expect_match "run -n $args: the kind it is held as" "^dlock: lock 'm-kind' is (held|still held).* as a mutex" \
            "$(sed -n 1p "$TMP/err")"
        expect_match "run -n $args: then who holds it" "^dlock: lock 'm-kind' is held by pid $holder on " \
            "$(sed -n 2p "$TMP/err")"
    done
    # and a wait without -w names the mutex's holder: not itself (its own
    # queued read, on ZooKeeper and etcd), nor "waiters ahead" (nobody waits)
    dl_bg "$TMP/t/rw" run --read m-kind -- true
    local waiter=$BG
    wait_until 10 grep -q "waiting for" "$TMP/t/rw.err" ||
        fail "the reader said nothing while it waited"
    expect_match "run --read, waiting: the mutex's holder named" \
        "^dlock: waiting for lock 'm-kind', held by pid $holder on " "$(cat "$TMP/t/rw.err")"
    touch "$TMP/t/go"
    reap "$holder" 10
    reap "$waiter" 10
    expect_eq "the reader took it once the mutex was let go" 0 "$BG_RC"
}

# unlock -v --force of a free name: one line that says so (the library's
# info line said "unlocked by force (it was free)" beside the command's
# "NAME was free", on every store); of a held one: the library's line.
test_force_free_one_line()
{
    expect_rc "unlock -v --force, free" 0 dl unlock -v --force f-free
    expect_eq "unlock -v --force, free: one line" "dlock unlock: 'f-free' was free" \
        "$(grep -v '^dlock: warn: .*no lock file' "$TMP/err")"
    # held by a dlock run (a session store's lock cannot outlive dlock lock)
    dl_bg "$TMP/t/fh" run -L 3 f-free -- sh -c ': > "$0/in"; sleep 30' "$TMP/t"
    local holder=$BG
    wait_until 10 test -e "$TMP/t/in" || { fail "the holder never started"; return; }
    expect_rc "unlock -v --force, held" 0 dl unlock -v --force f-free
    expect_eq "unlock -v --force, held: one line" "dlock: info: lock 'f-free' unlocked by force (it was held)" \
        "$(cat "$TMP/err")"
    reap "$holder" 15
    expect_eq "the holder lost it" 75 "$BG_RC"
}

# A message shows the URL as the user gave it: not with the options that
# -L and --label add to it.
test_url_as_given()
{
    local sep='?' url
    [[ $DLOCK_URL == *'?'* ]] && sep='&'
    url="$DLOCK_URL${sep}frobnicate=1"
    expect_rc "an unknown URL option, with -L and --label" 64 \
        dl run -L 5 --label tag -u "$url" u-given -- true
    expect_match "the URL's option named" "frobnicate" "$(cat "$TMP/err")"
    if grep -Eq "lease=|label=" "$TMP/err"; then
        fail "the message shows what the user did not write: $(cat "$TMP/err")"
    fi
    DLOCK_URL=$url expect_rc "\$DLOCK_URL's, with -L" 64 dl run -L 5 u-given -- true
    if grep -q "lease=" "$TMP/err"; then
        fail "\$DLOCK_URL: the message shows what the user did not write: $(cat "$TMP/err")"
    fi
}

# status of a held lock says what frees it: its lease, or, on a store
# whose locks live with their holder's session, that session.
test_status_session_words()
{
    local text doc
    expect_rc "status from inside the command" 0 dl run s-sess -- sh -c \
        '"$0" status s-sess && "$0" status --json s-sess' "$DLOCK" || return
    text=$(grep '^lease left:' "$TMP/out")
    doc=$(grep '^{' "$TMP/out")
    if [ "$STORE" = zookeeper ] || [ "$STORE" = postgres ]; then
        # (a PostgreSQL holder that dies keeps the name for its row lease:
        # the line says how long, not "the session timeout")
        local words="ZooKeeper session: freed within the session timeout if the holder dies"
        [ "$STORE" = postgres ] &&
            words="PostgreSQL session; if the holder dies, the name stays held until its row lease ends: up to the holder's lease (30 s by default) after its last renewal"
        expect_eq "the holder's session" "lease left: none (held by its holder's $words)" "$text"
        expect_eq "json: session" true "$(json_field session <<<"$doc")"
        expect_eq "json: expires" false "$(json_field expires <<<"$doc")"
    else
        expect_match "a lease" '^lease left: +[0-9]+\.[0-9]+ s$' "$text"
        expect_eq "json: session" false "$(json_field session <<<"$doc")"
        expect_eq "json: expires" true "$(json_field expires <<<"$doc")"
    fi
    expect_eq "free: session" null "$(field s-sess session)"
}

# -L sets the renewed lease: a killed dlock blocks the others that long.
test_renewed_lease_flag()
{
    local t0 elapsed
    dl_bg "$TMP/t/h" run -L 1s s-ttl -- sleep 30
    wait_until 10 is_held s-ttl || { fail "the lock was never held"; return; }
    kill -KILL "$BG"
    reap "$BG" 10 2>/dev/null
    t0=$(now_ms)
    wait_until 20 is_free s-ttl || fail "the lock of a killed dlock run -L 1s was never freed"
    elapsed=$(($(now_ms) - t0))
    if [ "$elapsed" -gt 5000 ]; then
        fail "the lock of a killed dlock run -L 1s was freed after $elapsed ms"
    fi
    expect_rc "--ttl, etcdctl's name" 0 dl run -v --ttl 2s s-ttl -- true
    expect_match "--ttl 2s: that lease" "(lease 2s, renewed|\(timeout 2s asked for|\(lease 2s, kept alive)" "$(cat "$TMP/err")"
    expect_rc "-L with -l" 64 dl run -L 2s -l 2s s-ttl -- true
    expect_match "-L with -l: contradict" "contradict" "$(cat "$TMP/err")"
    expect_rc "-L with the URL's lease=" 64 dl run -u "$DLOCK_URL?lease=2s" -L 2s s-ttl -- true
    expect_match "-L with lease=: give one" "-L 2s and the URL's lease=2s say the same thing: give one" "$(cat "$TMP/err")"
    expect_rc "lock -L" 64 dl lock -L 2s s-ttl
}

# dlock run NAME without a command holds the lock until a signal.
test_hold_without_command()
{
    local line token fence pid
    dl_bg "$TMP/t/h" run s-hold
    wait_until 10 test -s "$TMP/t/h.out" || { fail "no owner token and fence printed"; return; }
    line=$(cat "$TMP/t/h.out")
    expect_match "one line: owner token and fence" '^[0-9a-f]{32} [1-9][0-9]*$' "$line" || return
    token=${line% *}
    fence=${line#* }
    expect_eq "held under that owner token" "\"$token\"" "$(field s-hold owner)"
    if [ "$STORE" = redlock ]; then
        # the highest counter that answered: a node that took the name after
        # the quorum decided moved its counter on past the fence (README)
        local seen
        seen=$(field s-hold last_fence_str)
        seen=${seen//\"/}
        [ "$seen" -ge "$fence" ] 2>/dev/null || fail "last fence $seen below the hold's $fence"
    else
        expect_eq "with that fence" "\"$fence\"" "$(field s-hold last_fence_str)"
    fi
    kill -TERM "$BG"
    reap "$BG" 10
    expect_eq "SIGTERM: released, exit 0" 0 "$BG_RC"
    expect_eq "SIGTERM: nothing said" "" "$(cat "$TMP/t/h.err")"
    expect_free s-hold

    # ^C, as in a terminal (a script's background jobs start with SIGINT
    # ignored: env gives it back its default)
    env --default-signal=INT "$DLOCK" run s-hold >"$TMP/t/i.out" 2>"$TMP/t/i.err" &
    pid=$!
    BG_PIDS+=("$pid")
    wait_until 10 test -s "$TMP/t/i.out" || fail "no owner token and fence printed"
    kill -INT "$pid"
    reap "$pid" 10
    expect_eq "SIGINT: released, exit 0" 0 "$BG_RC"
    expect_free s-hold

    # lost meanwhile: 75
    dl_bg "$TMP/t/l" run -L 1s s-hold
    wait_until 10 test -s "$TMP/t/l.out" || { fail "no owner token and fence printed"; return; }
    expect_rc "unlock --force" 0 dl unlock --force s-hold
    reap "$BG" 10
    expect_eq "lost: exit 75" 75 "$BG_RC"
    # (no warning of the 1 s lease: without timeout= its requests are
    # bounded by a third of it, on every store)
    if grep -q "the store request timeout" "$TMP/t/l.err"; then
        fail "short lease: warned of a timeout the user did not set: $(cat "$TMP/t/l.err")"
    fi
    expect_match "lost: said" "^dlock: lock 's-hold' was lost" "$(cat "$TMP/t/l.err")"

    expect_rc "-- and no command" 64 dl run s-hold --
    expect_match "-- and no command: said" "missing COMMAND after --" "$(cat "$TMP/err")"
}

# The numbers of the descriptors `ls -l /proc/self/fd` lists in file $1 (as
# the command's output), but ls's own (the directory it reads) and 0-2.
fd_numbers()
{
    awk '$(NF-1) == "->" && $NF !~ /^\/proc\/[0-9]+\/fd$/ && $(NF-2) > 2 { print $(NF-2) }' "$1" |
        sort -n | tr '\n' ' '
}

# The command inherits no descriptor of dlock's (its connections, the
# libraries' pipes), even while other clients contend for the lock and
# threads connect as the command is started; and none when close_range()
# fails and the fallback closes them.
test_command_inherits_no_descriptors()
{
    local base got i variant url=$DLOCK_URL multi_url=$DLOCK_URL loops=() rd=--read wr=--write
    [ "$STORE" = redis ] && multi_url="$DLOCK_URL?notify=stream"
    # no read-write lock there: the plain lock (-v: its chatter to stderr;
    # on SQLite its database file is what must not reach the command)
    { [ "$STORE" = postgres ] || [ "$STORE" = mariadb ] || [ "$STORE" = redlock ]; } && wr=-v && rd=-v
    [ "$STORE" = sqlite ] && rd=-q wr=-q
    timeout -k 2 20 ls -l /proc/self/fd >"$TMP/t/base"
    base=$(fd_numbers "$TMP/t/base")
    for variant in "$wr" "$rd"; do
        (while [ ! -e "$TMP/t/stop" ]; do "$DLOCK" run "$variant" s-fd -- true; done) >/dev/null 2>&1 &
        loops+=($!)
        BG_PIDS+=($!)
    done
    (while [ ! -e "$TMP/t/stop" ]; do "$DLOCK" run -u "$multi_url" -m s-fd1 -m s-fd2 -- true; done) \
        >/dev/null 2>&1 &
    loops+=($!)
    BG_PIDS+=($!)
    for i in 1 2 3 4 5 6 7 8; do
        for variant in "$rd s-fd" "$wr s-fd" "-m s-fd1 -m s-fd2"; do
            [ "$variant" = "-m s-fd1 -m s-fd2" ] && url=$multi_url || url=$DLOCK_URL
            # shellcheck disable=SC2086 # the words of $variant
            dl run -u "$url" -w 20 $variant -- ls -l /proc/self/fd >"$TMP/t/got" 2>"$TMP/err" ||
                { fail "run $variant: $(cat "$TMP/err")"; continue; }
            got=$(fd_numbers "$TMP/t/got")
            if [ "$got" != "$base" ]; then
                fail "run $variant (run $i): the command has descriptors '$got', without dlock '$base': $(grep -- '->' "$TMP/t/got" | tr '\n' ' ')"
            fi
        done
    done
    # close_range() refused: the fallback closes them, and keeps what dlock
    # was given
    for i in 1 2 3; do
        LD_PRELOAD=$NO_CLOSE_RANGE ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
            dl run -w 20 "$rd" s-fd -- ls -l /proc/self/fd >"$TMP/t/got" 2>"$TMP/err" 7<"$TMP/t/base" ||
            { fail "run without close_range: $(cat "$TMP/err")"; continue; }
        got=$(fd_numbers "$TMP/t/got")
        if [ "$got" != "$(echo "$base" 7 | tr ' ' '\n' | grep . | sort -n | tr '\n' ' ')" ]; then
            fail "without close_range (run $i): the command has descriptors '$got', expected '$base' and 7: $(grep -- '->' "$TMP/t/got" | tr '\n' ' ')"
        fi
    done
    touch "$TMP/t/stop"
    for i in "${loops[@]}"; do
        reap "$i" 20
    done
}

start_redis
export DLOCK_URL="redis://127.0.0.1:$PORT"
T0=$(now_ms)

# Who holds a lock: status shows each holder with its host, pid, start
# and --label; list finds the locks under a prefix. Checked with a JSON
# parser.
test_who_and_list()
{
    local token json holders
    token=$(dl lock -l 30 --label "night job ü" r-who/a | cut -d' ' -f1)
    json=$(dl status --json r-who/a)
    holders=$(json_field holders <<<"$json") || { fail "not valid JSON: $json"; return; }
    expect_eq "one holder, with what its process recorded" \
        "$token $(hostname) night job ü" \
        "$(python3 -c 'import json,sys; h=json.loads(sys.argv[1]); assert len(h)==1, h; h=h[0]
print(h["owner"], h["host"], h["label"]); assert h["pid"]>0 and h["started_ms"]>0 and h["count"]==1' "$holders")"
    expect_match "status text names the holder" \
        "holder: +$token on $(hostname), pid [0-9]+, started [-0-9]+ [0-9:]+ UTC, label night job ü" \
        "$(dl status r-who/a)"
    expect_eq "free: no holders" "[]" "$(field r-who/free holders)"
    # a key set by another client in --simple mode: its value, nothing else
    redis SET r-who/foreign someone-else PX 30000 >/dev/null
    expect_eq "foreign holder" '[{"owner": "someone-else", "count": 1, "host": null, "pid": null, "started_ms": null, "label": null}]' \
        "$(field r-who/foreign holders --simple)"
    redis DEL r-who/foreign >/dev/null

    dl run --read r-who/rw -- sh -c 'while [ ! -e "$0" ]; do sleep 0.05; done' "$TMP/who-done" &
    local reader=$!
    wait_until 10 eval '[ "$(field r-who/rw shared --read)" = 1 ]' || fail "the reader never held r-who/rw"
    dl lock -l 30 r-whoelse >/dev/null
    json=$(dl list --json r-who/)
    expect_eq "list: valid JSON, the locks under the prefix" \
        "r-who/a mutex 1 $token|r-who/rw read-write 1 ?" \
        "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["version"]==1 and d["prefix"]=="r-who/"
print("|".join("%s %s %d %s" % (l["name"], l["kind"], len(l["holders"]), l["holders"][0]["owner"] if l["kind"]=="mutex" else "?") for l in sorted(d["locks"], key=lambda l: l["name"])))' "$json")"
    expect_match "list text" "r-who/a \(mutex\): held, 0 waiters" "$(dl list r-who/)"
    expect_match "list text: holder" "  holder: +$token on $(hostname)" "$(dl list r-who/)"
    expect_match "list of nothing says so" "no lock under 'r-nothing-here' is held or waited for" \
        "$(dl list r-nothing-here)"
    expect_rc "two prefixes" 64 dl list a b
    expect_rc "a bad label" 64 dl lock -l 30 --label $'a\x01' r-who/bad
    expect_rc "--label is not an option of status" 64 dl status --label x r-who/a
    touch "$TMP/who-done"
    wait "$reader" || fail "the reader exited $?"
    dl unlock --force r-who/a >/dev/null
    dl unlock --force r-whoelse >/dev/null
}
