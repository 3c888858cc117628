# SPDX-License-Identifier: MIT
# test_cli_ux.sh - what a new user meets first, sourced by test_cli.sh (its
# helpers, its redis-server in DLOCK_URL): a blocked wait says who holds the
# lock, a misspelt option says what was meant, a refusal names the options
# the user gave.
# shellcheck shell=bash disable=SC2016

# A wait without a bound says, once, after a second, what it waits for and
# who holds it (on stderr); nothing with -q, -w, -v, nor when the lock is
# free at once.
test_waiting_says_who_holds()
{
    local holder quiet bounded waiter locker line
    dl_bg "$TMP/t/holder" run --label "night job" u-wait -- sh -c \
        ': > "$0/held"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    holder=$BG
    wait_until 10 test -e "$TMP/t/held" || { fail "the holder never started"; return; }
    # the silent ones first: when the last one has spoken, they have waited
    # longer than it
    dl_bg "$TMP/t/quiet" run -q u-wait -- true
    quiet=$BG
    dl_bg "$TMP/t/bounded" run -w 30 u-wait -- true
    bounded=$BG
    wait_until 10 has_waiters u-wait 2 || fail "status never showed the 2 waiters"
    dl_bg "$TMP/t/waiter" run u-wait -- echo ran
    waiter=$BG
    dl_bg "$TMP/t/locker" lock -l 30 u-wait
    locker=$BG
    dl_bg "$TMP/t/verbose" run -v u-wait -- true
    verbose=$BG
    wait_until 10 grep -q "waiting for" "$TMP/t/waiter.err" ||
        fail "dlock run said nothing while it waited"
    wait_until 10 grep -q "waiting for" "$TMP/t/locker.err" ||
        fail "dlock lock said nothing while it waited"
    line=$(cat "$TMP/t/waiter.err")
    expect_eq "run: one line, who holds it, what to do" \
        "dlock: waiting for lock 'u-wait', held by pid $holder on $(hostname), label night job; -w SECONDS bounds the wait, -v follows it" \
        "$line"
    expect_eq "lock: the same line" "$line" "$(cat "$TMP/t/locker.err")"
    # -v: the library's log, and who holds it too (trial38: -v said less)
    wait_until 10 grep -q "waiting for" "$TMP/t/verbose.err" ||
        fail "dlock run -v did not say who holds it"
    expect_match "-v: who holds it" \
        "^dlock: waiting for lock 'u-wait', held by pid $holder on $(hostname), label night job; -w SECONDS bounds the wait$" \
        "$(grep "waiting for lock" "$TMP/t/verbose.err")"
    expect_eq "-q: nothing" "" "$(cat "$TMP/t/quiet.err")"
    expect_eq "-w: nothing" "" "$(cat "$TMP/t/bounded.err")"
    touch "$TMP/t/go"
    # `dlock lock` leaves it held: freed when it has it, for those after it
    wait_until 20 test -s "$TMP/t/locker.out" || fail "dlock lock never took it"
    dl unlock --force u-wait >/dev/null
    for p in "$holder" "$quiet" "$bounded" "$waiter" "$locker" "$verbose"; do
        reap "$p" 20
        expect_eq "every one took it in turn" 0 "$BG_RC"
    done
    expect_eq "the message is stderr's: stdout is the command's" ran "$(cat "$TMP/t/waiter.out")"
    expect_eq "still one line, once" 1 "$(wc -l <"$TMP/t/waiter.err")"
    expect_rc "free at once" 0 dl run u-wait -- true
    expect_eq "free at once: nothing said" "" "$(cat "$TMP/err")"
    # a hold without dlock's record (another library's --simple key): its owner
    redis SET u-foreign someone-else PX 3000 >/dev/null
    dl_bg "$TMP/t/foreign" run --simple u-foreign -- true
    wait_until 10 grep -q "waiting for" "$TMP/t/foreign.err" || fail "--simple: nothing said"
    expect_eq "--simple: the owner the store has" \
        "dlock: waiting for lock 'u-foreign', held by owner 'someone-else' (the store records no host or pid for it); -w SECONDS bounds the wait, -v follows it" \
        "$(cat "$TMP/t/foreign.err")"
    reap "$BG" 10
    expect_eq "--simple: taken when the key expired" 0 "$BG_RC"
    # a holder of this host whose process is gone (dlock lock leaves its
    # hold when it exits): the line says so, and the hold ends with its lease
    local gone
    dl_bg "$TMP/t/gone" lock -l 3 u-gone
    gone=$BG
    reap "$gone" 10
    expect_eq "dlock lock took it and left" 0 "$BG_RC"
    dl_bg "$TMP/t/after" run u-gone -- true
    wait_until 10 grep -q "waiting for" "$TMP/t/after.err" || fail "a gone holder: nothing said"
    expect_eq "a gone holder: said so" \
        "dlock: waiting for lock 'u-gone', held by pid $gone on $(hostname) (that process is gone: the name frees when the store ends its hold); -w SECONDS bounds the wait, -v follows it" \
        "$(cat "$TMP/t/after.err")"
    reap "$BG" 10
    expect_eq "a gone holder: taken when its lease ended" 0 "$BG_RC"
}

# A misspelt long option or URL option: what was likely meant.
test_did_you_mean()
{
    expect_rc "--leese" 64 dl run --leese 5 u-dym -- true
    expect_match "--leese: getopt's word and ours" \
        "unrecognized option '--leese'.*"$'\n'"dlock run: did you mean --lease\?"$'\n'"Try 'dlock run --help'." \
        "$(cat "$TMP/err")"
    expect_rc "--wiat=5" 64 dl run --wiat=5 u-dym -- true
    expect_match "--wiat=5" "did you mean --wait\?" "$(cat "$TMP/err")"
    # only the subcommand's own options: status has no --force
    expect_rc "status --jsno" 64 dl status --jsno u-dym
    expect_match "status --jsno" "did you mean --json\?" "$(cat "$TMP/err")"
    expect_rc "status --forse" 64 dl status --forse u-dym
    [[ $(cat "$TMP/err") == *"did you mean"* ]] && fail "status --forse: suggested $(cat "$TMP/err")"
    expect_rc "nothing near" 64 dl run --colour u-dym -- true
    [[ $(cat "$TMP/err") == *"did you mean"* ]] && fail "--colour: suggested $(cat "$TMP/err")"
    expect_rc "?leese=5s" 64 dl run -u "$DLOCK_URL?leese=5s" u-dym -- true
    expect_match "?leese=5s" "unknown option 'leese' \(did you mean lease=\?\)" "$(cat "$TMP/err")"
    # a misspelt scheme: the one meant, not the list of all
    local hp=127.0.0.1:$PORT
    expect_rc "redsi://" 64 dl status -u "redsi://$hp" u-dym
    expect_eq "redsi://" "dlock: cannot open client: redsi://$hp: unknown scheme 'redsi': did you mean redis://?" \
        "$(cat "$TMP/err")"
    expect_rc "rediss+clustr://" 64 dl status -u "rediss+clustr://$hp" u-dym
    expect_match "rediss+clustr://" "did you mean rediss\+cluster://\?$" "$(cat "$TMP/err")"
    expect_rc "postgress://" 64 dl status -u "postgress://$hp" u-dym
    expect_match "postgress://" "did you mean postgres://\?$" "$(cat "$TMP/err")"
    # TLS asked in the scheme: the store's TLS scheme, or that it has none
    expect_rc "redis+tls://" 64 dl status -u "redis+tls://$hp" u-dym
    expect_match "redis+tls://" "did you mean rediss://\?$" "$(cat "$TMP/err")"
    expect_rc "redis+sentinel+tls://" 64 dl status -u "redis+sentinel+tls://$hp" u-dym
    expect_match "redis+sentinel+tls://" "did you mean rediss\+sentinel://\?$" "$(cat "$TMP/err")"
    expect_rc "zk+tls://" 64 dl status -u "zk+tls://$hp" u-dym
    expect_match "zk+tls://" "unknown scheme 'zk\+tls': did you mean zk://\? \(it has no TLS scheme; the schemes with TLS in their name: rediss://, " \
        "$(cat "$TMP/err")"
    # nothing near: the schemes this build serves
    # a misspelt subcommand, by the same measure as an option
    expect_rc "dlock lok" 64 dl lok u-dym
    expect_eq "dlock lok" $'dlock: unknown command \'lok\': did you mean \'lock\'?\nTry \'dlock --help\'.' \
        "$(cat "$TMP/err")"
    expect_rc "dlock stauts" 64 dl stauts u-dym
    expect_match "dlock stauts: a swap" "did you mean 'status'\?" "$(cat "$TMP/err")"
    expect_rc "dlock unlcok" 64 dl unlcok u-dym
    expect_match "dlock unlcok" "did you mean 'unlock'\?" "$(cat "$TMP/err")"
    # the start of one (un: unlock, not run, 1 edit away), all when several
    # start so; any case; dlock's own --help and --version, misspelt or as
    # words
    expect_rc "dlock un" 64 dl un u-dym
    expect_match "dlock un: the one it starts" "did you mean 'unlock'\?$" "$(head -1 "$TMP/err")"
    expect_rc "dlock l" 64 dl l u-dym
    expect_match "dlock l: both" "did you mean 'list' or 'lock'\?$" "$(head -1 "$TMP/err")"
    expect_rc "dlock LOCK" 64 dl LOCK u-dym
    expect_match "dlock LOCK" "did you mean 'lock'\?$" "$(head -1 "$TMP/err")"
    expect_rc "dlock version" 64 dl version
    expect_eq "dlock version" $'dlock: unknown command \'version\': did you mean \'dlock --version\'?\nTry \'dlock --help\'.' \
        "$(cat "$TMP/err")"
    local word
    for word in --helpp -help --hel; do
        expect_rc "dlock $word" 64 dl "$word"
        expect_eq "dlock $word" "dlock: unknown option '$word': did you mean --help?" "$(head -1 "$TMP/err")"
    done
    expect_rc "dlock --versoin" 64 dl --versoin
    expect_match "dlock --versoin" "did you mean --version\?$" "$(head -1 "$TMP/err")"
    expect_rc "dlock --verbose: a command's option" 64 dl --verbose run u-dym
    expect_match "dlock --verbose: where it goes" "options go after the command \(dlock run --verbose" \
        "$(cat "$TMP/err")"
    expect_rc "dlock xyz: nothing near" 64 dl xyz u-dym
    expect_match "dlock xyz: the commands" "^dlock: unknown command 'xyz': the commands are run, status, " \
        "$(cat "$TMP/err")"
    expect_rc "bogus://" 64 dl status -u "bogus://$hp" u-dym
    expect_match "bogus://" "unknown scheme 'bogus' \(this build serves redis://, " "$(cat "$TMP/err")"
    [[ $(cat "$TMP/err") == *"did you mean"* ]] && fail "bogus://: suggested $(cat "$TMP/err")"
}

# A refusal names the options that caused it as the user wrote them.
test_refusal_names_options()
{
    expect_rc "lock --read -l 10" 64 dl lock --read -l 10 u-ref
    expect_match "lock --read: named" "^dlock lock: --read: only an exclusive hold" "$(cat "$TMP/err")"
    expect_rc "lock -s -l 10" 64 dl lock -s -l 10 u-ref
    expect_match "lock -s: named as given" "^dlock lock: -s: .*'dlock run -s NAME -- COMMAND'" \
        "$(cat "$TMP/err")"
    expect_rc "lock --permits 2 -l 10" 64 dl lock --permits 2 -l 10 u-ref
    expect_match "lock --permits: named" "^dlock lock: --permits: " "$(cat "$TMP/err")"
    expect_free u-ref
}

# status and list read a replica when the URL names one: they say its data
# may lag the master's (on stderr), and the master's say nothing of it.
test_replica_read_says_so()
{
    local rport rpid _
    for _ in 1 2 3 4 5; do
        rport=$(free_port)
        redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/t" \
            --replicaof 127.0.0.1 "$PORT" --logfile "$TMP/t/replica.log" &
        rpid=$!
        BG_PIDS+=("$rpid")
        wait_until 10 eval 'redis-cli -p $rport info replication 2>/dev/null | grep -q "master_link_status:up" ||
                            ! kill -0 $rpid 2>/dev/null' && kill -0 "$rpid" 2>/dev/null && break
        stop_server "$rpid"
        rpid=
    done
    [ -n "$rpid" ] || { fail "no replica started: $(tail -3 "$TMP/t/replica.log")"; return; }
    expect_rc "lock on the master" 0 dl lock -l 30 u-replica
    wait_until 10 eval '[ "$(redis-cli -p $rport exists dlock:{u-replica})" = 1 ]' ||
        fail "the replica never had the lock"
    expect_rc "status on the replica" 0 dl status -u "redis://127.0.0.1:$rport" u-replica
    expect_match "status on the replica: held, as it has it" "state: +held" "$(cat "$TMP/out")"
    expect_match "status on the replica: said" \
        "^dlock: warn: redis://127.0.0.1:$rport: reading a replica \(of 127.0.0.1:$PORT\): what it shows may lag the master" \
        "$(cat "$TMP/err")"
    expect_eq "said once" 1 "$(wc -l <"$TMP/err")"
    expect_rc "list on the replica" 0 dl list -u "redis://127.0.0.1:$rport" u-replica
    expect_match "list on the replica: said" "reading a replica" "$(cat "$TMP/err")"
    expect_rc "status on the master" 0 dl status u-replica
    expect_eq "status on the master: nothing said" "" "$(cat "$TMP/err")"
    dl unlock --force u-replica >/dev/null
    stop_server "$rpid"
}

# The SQL stores' session modes: a holder whose connection is gone holds
# the name by its row lease until it ends, and status says so; a live
# session holder seen through MariaDB's table mode is held by that session,
# not "never expires".
test_status_sql_sessions()
{
    local session=$DLOCK_URL holder
    case $STORE in
    mariadb) session="$DLOCK_URL?mode=session" ;;
    postgres) ;; # session mode is its default
    *) return 0 ;;
    esac
    dl_bg "$TMP/t/h" run -u "$session" u-sql -- sleep 60
    holder=$BG
    wait_until 10 is_held u-sql -u "$session" || { fail "the lock was never held"; return; }
    if [ "$STORE" = mariadb ]; then
        expect_match "table mode sees the session's holder" \
            "^lease left: none \(held by a session-mode holder's connection; if the holder dies, the name stays held until its row lease ends: up to the holder's lease \(30 s by default\) after its last renewal\)$" \
            "$(dl status u-sql | grep '^lease left:')"
        expect_eq "json: session" true "$(field u-sql session)"
    fi
    kill -KILL "$holder"
    reap "$holder" 10 2>/dev/null
    wait_until 10 eval 'dl status -u "$session" u-sql | grep -q "^lease left: [0-9]"' ||
        { fail "no lease left shown after the holder's connection ended: $(dl status -u "$session" u-sql)"; return; }
    expect_match "session gone: said" \
        "^lease left: [0-9.]+ s \(no session holds it now: its holder's connection is gone(, or it is held in table( or row)? mode)?; the name frees when this lease ends\)$" \
        "$(dl status -u "$session" u-sql | grep '^lease left:')"
    dl unlock -u "$session" --force u-sql >/dev/null
}

# MariaDB's and PostgreSQL's modes are one lock per name, and status names
# a holder of any mode through any mode's URL: so does a forced unlock
# release it (before, it released the URL's own mode's holder only, and
# `unlock --force --check` exited 0, "it was held", while the holder ran
# on), and list names a name a killed session holder's row lease keeps
# (before, list said nothing was held while status said held).
test_force_unlock_any_mode()
{
    local base modes h f holder
    case $STORE in
    mariadb) modes="table session row" ;;
    postgres) modes="session table" ;;
    *) return 0 ;;
    esac
    base=${DLOCK_URL%%\?*}
    for h in $modes; do
        for f in $modes; do
            [ "$h" = "$f" ] && continue
            rm -f "$TMP/t/fence"
            dl_bg "$TMP/t/h" run -u "$base?mode=$h" -L 3 u-any -- \
                sh -c 'echo "$DLOCK_FENCE" >"$0"; sleep 60' "$TMP/t/fence"
            holder=$BG
            wait_until 10 is_held u-any -u "$base?mode=$h" ||
                { fail "mode=$h: the lock was never held"; kill "$holder"; return; }
            expect_rc "mode=$h holder, --force --check through mode=$f" 0 \
                dl unlock --force --check -u "$base?mode=$f" u-any
            reap "$holder" 10
            expect_eq "mode=$h holder, --force through mode=$f: the holder stopped (75)" 75 "$BG_RC"
            expect_rc "mode=$h holder, --force through mode=$f: free" 0 \
                dl run -n -u "$base?mode=$h" u-any -- sh -c 'echo "$DLOCK_FENCE"'
            # the fence rule: the next holder's fence (same mode) is larger
            [ "$(cat "$TMP/out")" -gt "$(cat "$TMP/t/fence")" ] 2>/dev/null ||
                fail "mode=$h: fence after --force through mode=$f: $(cat "$TMP/out"), not above $(cat "$TMP/t/fence")"
        done
    done
    h=session
    dl_bg "$TMP/t/k" run -u "$base?mode=$h" -L 20 u-killed -- sleep 20
    holder=$BG
    wait_until 10 is_held u-killed -u "$base?mode=$h" ||
        { fail "the session holder never held it"; kill "$holder"; return; }
    kill -KILL "$holder"
    reap "$holder" 10 2>/dev/null
    expect_rc "killed holder: held by its row lease (run -n)" 1 dl run -n -u "$base" u-killed -- true
    for f in $modes; do
        expect_rc "killed holder: list through mode=$f" 0 dl list -u "$base?mode=$f" u-killed
        expect_match "killed holder: list through mode=$f names it" "^u-killed \(mutex\): held" \
            "$(cat "$TMP/out")"
    done
    # its row lease ended through the other mode's URL: free at once
    expect_rc "killed holder: --force --check through mode=table" 0 \
        dl unlock --force --check -u "$base?mode=table" u-killed
    expect_rc "killed holder: free after --force through mode=table" 0 \
        dl run -n -u "$base?mode=$h" u-killed -- true
}

# A URL of one store at another store's port: at once (within the connect
# timeout, 2 s), exit 69 as for no server there, and a message that says
# what answered: "H:P answered, but not as Redis (...)", or, for a server
# that waits for its own protocol's first words, that it did not answer.
# The same for a Redis topology at a plain Redis: redis+sentinel:// ("not
# as a Redis Sentinel"; it was exit 70) and redis+cluster:// ("not as a
# node of a Redis Cluster"; it was exit 64); and for redis:// and a
# redlock:// node at a node of a Redis Cluster ("not as a single Redis
# server", "not as an independent Redis master"; they were exit 64).
test_wrong_port()
{
    local hp scheme url t0 elapsed others=() cnode= cport= at status_ms=
    case $STORE in
    redis | zookeeper | etcd | postgres | mariadb) ;;
    *) return 0 ;; # (SQLite is a file; Redlock's nodes are Redis servers)
    esac
    hp=$(sed -E 's#^[a-z+]+://([^@/]*@)?([^/?]+).*#\2#' <<<"$DLOCK_URL")
    for scheme in "${STORES[@]}"; do
        [ "$scheme" = "$STORE" ] && continue
        case $scheme in
        redis) others+=("redis://$hp") ;;
        zookeeper) others+=("zk://$hp") ;;
        etcd) others+=("etcd://$hp") ;;
        postgres) others+=("postgres://dlock:dlock@$hp/postgres") ;;
        mariadb) others+=("mysql://dlock:dlock@$hp/dlock") ;;
        esac
    done
    if [ "$STORE" = redis ]; then
        others+=("redis+sentinel://$hp/mymaster" "redis+cluster://$hp")
        # a node of a Redis Cluster (one, no slots: INFO cluster says so);
        # its bus port (its own + 10000) must be free too, and another
        # test's server may take either between the look and the bind (a
        # quick suite's run: "bind: Address already in use" on the bus
        # port): tried again on other ports
        local attempt up=
        for attempt in 1 2 3 4 5; do
            cport=$(closed_port 55535)
            port_is_open $((cport + 10000)) && continue
            rm -rf "$TMP/cnode"
            mkdir -p "$TMP/cnode"
            redis-server --port "$cport" --bind 127.0.0.1 --save '' --appendonly no \
                --cluster-enabled yes --dir "$TMP/cnode" --logfile "$TMP/cnode/log" &
            cnode=$!
            BG_PIDS+=("$cnode")
            wait_until 20 eval '[ "$(redis-cli -p "$cport" ping 2>/dev/null)" = PONG ] ||
                ! kill -0 "$cnode" 2>/dev/null'
            if [ "$(redis-cli -p "$cport" ping 2>/dev/null)" = PONG ]; then
                up=1
                break
            fi
            kill "$cnode" 2>/dev/null
            wait "$cnode" 2>/dev/null
        done
        if [ -n "$up" ]; then
            others+=("redis://127.0.0.1:$cport")
        else
            fail "a node of a Redis Cluster did not start: $(tail -3 "$TMP/cnode/log")"
        fi
    fi
    for url in "${others[@]}"; do
        t0=$(now_ms)
        expect_rc "status -u $url (at $STORE's port)" 69 dl status -u "$url" u-port
        elapsed=$(($(now_ms) - t0))
        if [ "$elapsed" -gt 4000 ]; then
            fail "$url at $STORE's port: told after $elapsed ms"
        fi
        at=$hp
        if [ -n "$cport" ] && [ "$url" = "redis://127.0.0.1:$cport" ]; then
            at=127.0.0.1:$cport
            status_ms=$elapsed
        fi
        expect_match "$url at $STORE's port: said" \
            "$at (answered, but not as [A-Za-z ]+ \(|accepted the connection, but (did not answer as PostgreSQL|sent no MySQL greeting))" \
            "$(cat "$TMP/err")"
    done
    if [ -n "$cnode" ]; then
        # a wait at the wrong kind of server is told at once, once: no
        # retried "never reached" (no wait mends a URL; it took a second,
        # with a warning before the same words). Timed against `status` at
        # the same node, one attempt by design, so a sanitizer's slower
        # start does not count: a retry costs the first-contact second.
        t0=$(now_ms)
        expect_rc "run -u redis:// at a node of a cluster" 69 \
            dl run -u "redis://127.0.0.1:$cport" u-port -- true
        elapsed=$(($(now_ms) - t0))
        [ "$elapsed" -gt $((${status_ms:-0} + 700)) ] &&
            fail "run at a node of a cluster: told after $elapsed ms (status: ${status_ms:-?} ms)"
        [[ "$(cat "$TMP/err")" == *"never reached"* || "$(cat "$TMP/err")" == *"warn:"* ]] &&
            fail "run at a node of a cluster: retried as a store never reached: $(cat "$TMP/err")"
        # a Redlock node is only refused where a take reaches it
        expect_rc "run -u redlock:// with a node of a cluster" 69 \
            dl run -u "redlock://$hp,127.0.0.1:$cport,127.0.0.1:$(closed_port)" u-port -- true
        expect_match "redlock:// with a node of a cluster: said" \
            "127.0.0.1:$cport answered, but not as an independent Redis master \(a node of a Redis Cluster" \
            "$(cat "$TMP/err")"
        kill -TERM "$cnode" 2>/dev/null
        wait "$cnode" 2>/dev/null
    fi
}

# A store that never answers (a SQL URL at the Redis port: the server waits
# for its own protocol) ends `dlock run` and `dlock lock` when the
# acquisition gives up (the connect timeout, 2 s), not a query later: the
# waiting line's thread, which asks the same store who holds the lock after
# 1 s, does not hold the exit up.
test_unreached_store_ends_at_once()
{
    local url t0 elapsed rc tried=0
    local base
    for url in "postgres://dlock:dlock@127.0.0.1:$PORT/postgres" \
        "mysql://dlock:dlock@127.0.0.1:$PORT/dlock"; do
        # the same failure with -v, which has no waiting line: how long this
        # build takes without that thread (a sanitizer's build is slower)
        t0=$(now_ms)
        dl run -v -u "$url" u-unreached -- true >"$TMP/out" 2>"$TMP/err"
        base=$(($(now_ms) - t0))
        grep -q "not built\|unknown scheme" "$TMP/err" && continue # (a build without it)
        t0=$(now_ms)
        dl run -u "$url" u-unreached -- true >"$TMP/out" 2>"$TMP/err"
        rc=$?
        elapsed=$(($(now_ms) - t0))
        tried=$((tried + 1))
        expect_eq "run -u $url: unreachable" 69 "$rc"
        expect_match "run -u $url: said" "accepted the connection, but" "$(cat "$TMP/err")"
        [ "$elapsed" -lt $((base + 600)) ] ||
            fail "run -u $url: ended after $elapsed ms (with -v, no waiting line: $base ms)"
        t0=$(now_ms)
        expect_rc "lock -u $url?mode=table" 69 dl lock -l 5 -u "$url?mode=table" u-unreached
        elapsed=$(($(now_ms) - t0))
        [ "$elapsed" -lt $((base + 600)) ] ||
            fail "lock -u $url: ended after $elapsed ms (with -v, no waiting line: $base ms)"
    done
    [ "$tried" -gt 0 ] || fail "neither postgres:// nor mysql:// is built"
}

# Messages show a URL's user, never its password: user:password shows the
# user; one word of user info is a password on the Redis schemes and a user
# name on the others; an option that names a password shows no value.
test_urls_show_user_not_password()
{
    local s re hosts err path
    for s in redis rediss redis+cluster rediss+cluster redlock rediss+redlock zk etcd postgres \
        postgresql redis+sentinel mysql mariadb; do
        hosts=127.0.0.1:1
        re=${s//+/\\+}
        case $s in *redlock) hosts=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3 ;; esac
        dl status -u "$s://alice:s3cretPW@$hosts/?leese=1" u-url >/dev/null 2>"$TMP/err"
        err=$(cat "$TMP/err")
        [[ $err == *"this build of dlock has no"* ]] && continue
        expect_match "$s://alice:s3cretPW@: the user shown" "$re://alice:\*\*\*@" "$err"
        [[ $err == *s3cretPW* ]] && fail "$s://alice:s3cretPW@: the password shown: $err"
        dl status -u "$s://alice@$hosts/?leese=1" u-url >/dev/null 2>"$TMP/err"
        err=$(cat "$TMP/err")
        case $s in
        redis* | redlock)
            expect_match "$s://alice@: a password there" "$re://\*\*\*@" "$err"
            [[ $err == *alice* ]] && fail "$s://alice@: the password shown: $err"
            ;;
        *) expect_match "$s://alice@: a user there" "$re://alice@" "$err" ;;
        esac
    done
    # a connection refused: the store's label names the user, not the
    # password (it dropped both on redis://, zk://, mysql://, redlock://),
    # in the same words as the URL's own messages ("alice:***@": labels
    # dropped the password and its ':' while those masked it), and one
    # word that Redis may read as a password is masked there too (labels
    # showed it)
    for s in redis zk etcd mysql postgres redlock redis+sentinel redis+cluster; do
        hosts=127.0.0.1:1
        [ "$s" = redlock ] && hosts=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3
        re=${s//+/\\+}
        case $s in mysql | postgres) path=/db ;; redis+sentinel) path=/m ;; *) path= ;; esac
        dl status -u "$s://alice:s3cretPW@$hosts$path" u-url >/dev/null 2>"$TMP/err"
        err=$(cat "$TMP/err")
        [[ $err == *"this build of dlock has no"* ]] && continue
        case $s in
        redis+cluster) re="redis\\+cluster node " ;;
        *) re="$re://" ;;
        esac
        expect_match "$s://alice:s3cretPW@ refused: the user in the label" \
            "${re}alice:\*\*\*@127\.0\.0\.1:1" "$err"
        [[ $err == *s3cretPW* ]] && fail "$s://alice:s3cretPW@ refused: the password shown: $err"
        [[ $err == *" /v3/"* ]] && fail "$s://alice:s3cretPW@ refused: a space inside the URL: $err"
        case $s in redis* | redlock) ;; *) continue ;; esac
        dl status -u "$s://s3cretPW@$hosts$path" u-url >/dev/null 2>"$TMP/err"
        err=$(cat "$TMP/err")
        expect_match "$s://s3cretPW@ refused: masked in the label" "${re}\*\*\*@127\.0\.0\.1:1" \
            "$err"
        [[ $err == *s3cretPW* ]] && fail "$s://s3cretPW@ refused: a password shown: $err"
    done
    dl status -u "redis+sentinel://127.0.0.1:1/m?sentinel_password=s3cretPW&leese=1" u-url \
        >/dev/null 2>"$TMP/err"
    expect_match "sentinel_password=: masked" "sentinel_password=\*\*\*&leese=1: unknown option" \
        "$(cat "$TMP/err")"
    # misspelt, the value is still a password: hidden, and the key still
    # gets its "did you mean"
    local key
    for key in sentinel_pasword sentinel_passwd pass pwd auth_token; do
        dl status -u "redis+sentinel://127.0.0.1:1/m?$key=s3cretPW" u-url >/dev/null 2>"$TMP/err"
        expect_match "$key=: masked" "$key=\*\*\*: unknown option '$key'" "$(cat "$TMP/err")"
        [[ $(cat "$TMP/err") == *s3cretPW* ]] && fail "$key=: the password shown: $(cat "$TMP/err")"
    done
    expect_match "sentinel_pasword=: did you mean" "did you mean sentinel_password=" \
        "$(dl status -u "redis+sentinel://127.0.0.1:1/m?sentinel_pasword=x" u-url 2>&1)"
}

# A mistake in $DLOCK_URL (no -u given) is said to be there, not on the
# command line the user is looking at.
test_env_url_named()
{
    local port
    DLOCK_URL="redsi://127.0.0.1:$PORT" expect_rc "\$DLOCK_URL=redsi://" 64 dl status u-env
    expect_eq "\$DLOCK_URL=redsi://: named" \
        "dlock: \$DLOCK_URL (no -u given): cannot open client: redsi://127.0.0.1:$PORT: unknown scheme 'redsi': did you mean redis://?" \
        "$(cat "$TMP/err")"
    expect_rc "-u redsi://" 64 dl status -u "redsi://127.0.0.1:$PORT" u-env
    expect_match "-u redsi://: not \$DLOCK_URL" "^dlock: cannot open client: redsi://" "$(cat "$TMP/err")"
    # $DLOCK_URL's options are defaults the command line overrides (the
    # new-user trial: -L could not override its lease=); a -u URL's are
    # the user's own words, given twice
    DLOCK_URL="$DLOCK_URL?label=a" expect_rc "--label over \$DLOCK_URL's label=" 0 \
        dl run --label b u-env -- "$DLOCK" status u-env
    expect_match "--label over \$DLOCK_URL's label=: the holder's label" "label b$" \
        "$(cat "$TMP/out")"
    expect_rc "--label and -u URL's label=" 64 dl run -u "$DLOCK_URL?label=a" --label b u-env -- true
    expect_match "--label and -u URL's label=: named" \
        "^dlock run: --label b and the URL's label=a contradict each other: give one" "$(cat "$TMP/err")"
    # set but empty (DLOCK_URL= in a script): the default, said so (not
    # "not set"); only where nothing listens at the default's port
    if ! port_is_open 6379; then
        DLOCK_URL= expect_rc "\$DLOCK_URL empty: the default, nothing there" 69 dl status u-env
        expect_match "\$DLOCK_URL empty: said so" \
            $'\n'"dlock: no -u URL was given and \\\$DLOCK_URL is set but empty, so the store was the default, redis://127.0.0.1:6379$" \
            "$(cat "$TMP/err")"
        (
            unset DLOCK_URL
            expect_rc "\$DLOCK_URL unset" 69 dl status u-env
            expect_match "\$DLOCK_URL unset: said so" "\\\$DLOCK_URL is not set, so the store was the default" \
                "$(cat "$TMP/err")"
            [ "$TEST_FAILED" = 0 ]
        ) || TEST_FAILED=1
    else
        echo "# something listens at 127.0.0.1:6379: the default URL's message is not checked"
    fi
    port=$(free_port)
    DLOCK_URL="redis://127.0.0.1:$port" expect_rc "\$DLOCK_URL: nothing there" 69 dl status u-env
    expect_match "\$DLOCK_URL: nothing there: named" \
        $'\n'"dlock: no -u URL was given, so the store was \\\$DLOCK_URL's$" "$(cat "$TMP/err")"
}

# An empty NAME is refused, saying what it likely is; list's empty PREFIX is
# every lock, and an empty list says so without a name ''.
test_empty_name_and_prefix()
{
    local db="redis://127.0.0.1:$PORT/7" args # a database of its own: nothing else there
    expect_rc "list ''" 0 dl list -u "$db" ''
    expect_eq "list '': all locks, none" "no lock is held or waited for" "$(cat "$TMP/out")"
    expect_rc "list" 0 dl list -u "$db"
    expect_eq "list: the same" "no lock is held or waited for" "$(cat "$TMP/out")"
    expect_rc "lock u-empty" 0 dl lock -u "$db" -l 30 u-empty
    expect_rc "list '' with one" 0 dl list -u "$db" ''
    expect_match "list '': every lock" "^u-empty \(mutex\): held" "$(cat "$TMP/out")"
    dl unlock -u "$db" --force u-empty >/dev/null
    expect_rc "list 'x' of nothing" 0 dl list -u "$db" x
    expect_eq "list 'x': named" "no lock under 'x' is held or waited for" "$(cat "$TMP/out")"
    for args in "run '' -- true" "status ''" "lock -l 5 ''" "unlock --force ''" \
        "extend -l 5 --owner 0123456789abcdef0123456789abcdef ''" "run -m '' -m b -- true"; do
        eval "set -- $args"
        expect_rc "$args" 64 dl "$1" -u "$db" "${@:2}"
        expect_match "$args: said" \
            "^dlock $1: (-m )?NAME is '', an empty name \(a shell variable that is not set\?\): give the lock's name"$'\n'"Try 'dlock $1 --help'.$" \
            "$(cat "$TMP/err")"
    done
}

# A refusal's way out is one this store accepts: the 'dlock run ...' it
# names runs, the ?mode= it names takes the lock (other stores it names are
# not tried).
test_refusal_hints_accepted()
{
    local args rc err url hinted=0 owner=0123456789abcdef0123456789abcdef
    local re_run="'dlock run ([^']*)NAME -- COMMAND'" re_hold="'dlock run NAME' holds it"
    local re_mode="use \?(mode=[a-z]+)"
    for args in "lock -s -l 10 u-hint" "lock --permits 2 -l 10 u-hint" "lock -l 10 u-hint" \
        "extend -l 10 --owner $owner u-hint" "unlock --owner $owner --read u-hint" \
        "run -l 10 u-hint -- true"; do
        # shellcheck disable=SC2086 # the words of $args
        dl $args >/dev/null 2>"$TMP/err" </dev/null
        rc=$?
        err=$(cat "$TMP/err")
        [ "${args%% *}" = lock ] && [ "$rc" = 0 ] && dl unlock --force u-hint >/dev/null 2>&1
        [ "$rc" = 64 ] || continue
        if [[ $err =~ $re_run ]]; then
            hinted=$((hinted + 1))
            # shellcheck disable=SC2086 # the hint's options
            expect_rc "$args: its hint 'dlock run ${BASH_REMATCH[1]}NAME -- COMMAND'" 0 \
                dl run ${BASH_REMATCH[1]} u-hint -- true
        fi
        if [[ $err =~ $re_hold ]]; then
            hinted=$((hinted + 1))
            expect_rc "$args: its hint 'dlock run NAME'" 0 dl run u-hint -- true
        fi
        if [[ $err =~ $re_mode ]]; then
            hinted=$((hinted + 1))
            url=$DLOCK_URL
            [[ $url == *\?* ]] && url="${url%%\?*}?$(sed -E 's/(^|&)mode=[a-z]+//; s/^&//' <<<"${url#*\?}")"
            [[ $url == *\? ]] && url=${url%\?}
            url="$url$([[ $url == *\?* ]] && echo '&' || echo '?')${BASH_REMATCH[1]}"
            expect_rc "$args: its hint ?${BASH_REMATCH[1]} ($url)" 0 dl lock -u "$url" -l 10 u-hint
            dl unlock -u "$url" --force u-hint >/dev/null 2>&1
        fi
    done
    echo "# $STORE: $hinted hints tried"
    expect_free u-hint
}

# dlock run's NAME comes before --: 'dlock run -u URL $UNSET -- echo hi' (the
# variable that should hold the name, unset) is refused, not run as the
# lock 'echo' with the command 'hi'; a multi-lock has no NAME, and its --
# stays.
test_name_before_dashdash()
{
    local unset_var=
    # shellcheck disable=SC2086 # the point: an unset variable, unquoted
    expect_rc "run -u URL \$UNSET -- echo hi" 64 dl run -u "$DLOCK_URL" $unset_var -- echo hi
    expect_eq "run -- echo hi: said" \
        $'dlock run: a lock name is needed before --: dlock run [OPTIONS] NAME -- COMMAND [ARGS...]\nTry \'dlock run --help\'.' \
        "$(cat "$TMP/err")"
    expect_eq "run -- echo hi: nothing run" "" "$(cat "$TMP/out")"
    expect_free echo
    expect_rc "run -w 5 -- echo hi" 64 dl run -w 5 -- echo hi
    expect_rc "run NAME -- echo hi" 0 dl run u-dash -- echo hi
    expect_eq "run NAME -- echo hi: ran" hi "$(cat "$TMP/out")"
    expect_rc "run -m a -m b -- echo hi" 0 dl run -m u-dash1 -m u-dash2 -- echo hi
    expect_eq "run -m -- echo hi: ran" hi "$(cat "$TMP/out")"
    expect_rc "run -u -- (a URL '--')" 64 dl run -u -- u-dash -- true
    [[ $(cat "$TMP/err") == *"a lock name is needed"* ]] && fail "-u --: the URL taken for the end of options"
    expect_match "the usage says so" "NAME"$'\n'"comes before --: 'dlock run -- COMMAND' is refused" \
        "$(dl run --help)"
    # a name that starts with a dash: a -- of its own, and one before the
    # command (or -c's string before it)
    expect_rc "run -- -dash -- echo hi" 0 dl run -- -u-dash -- echo hi
    expect_eq "run -- -dash -- echo hi: ran" hi "$(cat "$TMP/out")"
    expect_rc "run -c 'echo hi' -- -dash" 0 dl run -c 'echo hi' -- -u-dash
    expect_eq "run -c -- -dash: ran" hi "$(cat "$TMP/out")"
    expect_rc "run -- -dash echo hi" 64 dl run -- -u-dash echo hi
}

# A NAME that starts with '-': an option dlock does not know says where such
# a name goes, an option taken for the name says how it was read, and the
# forms the messages give work: -- -NAME -- COMMAND, and -- -NAME alone,
# held until interrupted (it was refused as "a lock name is needed").
test_dash_name_forms()
{
    expect_rc "run -u-foo -- true" 64 dl run -u-foo -- true
    expect_rc "run -foo -- true" 64 dl run -foo -- true
    expect_eq "run -foo: where such a name goes" \
        "dlock run: invalid option -- 'f'"$'\n'"dlock run: if -foo is the lock's name, it goes after a -- of its own: dlock run [OPTIONS] -- -foo -- COMMAND [ARGS...]"$'\n'"Try 'dlock run --help'." \
        "$(cat "$TMP/err")"
    expect_rc "the form it gives" 0 dl run -- -foo -- true
    expect_rc "status -foo" 64 dl status -foo
    expect_match "status -foo: the form" "^dlock status: if -foo is the lock's name, it goes after a -- of its own: dlock status \[OPTIONS\] -- -foo$" \
        "$(sed -n 2p "$TMP/err")"
    expect_rc "the form it gives" 0 dl status -- -foo
    # -x is --write: no NAME was given
    expect_rc "run -x -- true" 64 dl run -x -- true
    expect_eq "run -x --: how -x was read" \
        "dlock run: missing NAME: '-x' is read as dlock's option --write (a NAME that starts with '-' goes after a -- of its own: dlock run [OPTIONS] -- -x -- COMMAND [ARGS...])" \
        "$(head -1 "$TMP/err")"
    expect_rc "run -nx -- true" 64 dl run -nx -- true
    expect_match "run -nx --: both" "'-nx' is read as dlock's options --nonblock --write \(" "$(cat "$TMP/err")"
    expect_rc "run -x" 64 dl run -x
    expect_match "run -x: the form without a command" "dlock run \[OPTIONS\] -- -x\)$" "$(head -1 "$TMP/err")"
    expect_rc "unlock --force -x" 64 dl unlock --force -x
    expect_match "unlock --force -x" "^dlock unlock: missing NAME: '-x' is read as dlock's option --write \(.*dlock unlock \[OPTIONS\] -- -x\)$" \
        "$(head -1 "$TMP/err")"
    # -- -NAME alone: held until interrupted, as dlock run NAME
    dl_bg "$TMP/t/hold" run -- -u-held
    wait_until 10 test -s "$TMP/t/hold.out" || { fail "run -- -u-held: no owner token printed ($(cat "$TMP/t/hold.err"))"; return; }
    expect_eq "run -- -u-held: held" true "$(field -u-held held)"
    kill -TERM "$BG" # (SIGINT stays ignored in a script's background job)
    reap "$BG" 10
    expect_eq "run -- -u-held: released on SIGTERM, exit 0" 0 "$BG_RC"
    expect_free -u-held
    expect_rc "run -- -u-held --" 64 dl run -- -u-held --
    expect_eq "run -- -u-held --: the form without a command" \
        "dlock run: missing COMMAND after -- (to hold '-u-held' until interrupted, without a command: dlock run [OPTIONS] -- -u-held)" \
        "$(head -1 "$TMP/err")"
    expect_rc "run -- -u-held echo hi" 64 dl run -- -u-held echo hi
    expect_eq "run -- -u-held echo hi: said" \
        "dlock run: '-u-held' after -- is a NAME that starts with '-', and what follows it a command: a -- goes before the command too: dlock run [OPTIONS] -- -u-held -- COMMAND [ARGS...]" \
        "$(head -1 "$TMP/err")"
    expect_eq "nothing ran" "" "$(cat "$TMP/out")"
}

# NAME's rules are the same in every command: '-' is a NAME (after a -- of
# its own, as every NAME that starts with '-'), '--' is none.
test_name_rules_same()
{
    local cmd
    expect_rc "status -- -" 0 dl status -- -
    dl_bg "$TMP/t/dash" run -- -
    wait_until 10 test -s "$TMP/t/dash.out" || { fail "run -- -: not held ($(cat "$TMP/t/dash.err"))"; return; }
    expect_eq "run -- -: '-' held" true "$(field - held)"
    kill -TERM "$BG"
    reap "$BG" 10
    expect_eq "run -- -: released on SIGTERM, exit 0" 0 "$BG_RC"
    expect_rc "run -- - -- true" 0 dl run -- - -- true
    expect_rc "lock -- -" 0 dl lock -l 30 -- -
    expect_rc "unlock --force -- -" 0 dl unlock --force -- -
    for cmd in "run -- --" "run -- -- -- true" "run -- -- -c true" "status -- --" "lock -l 5 -- --" \
        "unlock --force -- --" "extend --owner 0123456789abcdef0123456789abcdef -l 5 -- --"; do
        # shellcheck disable=SC2086 # the words of $cmd
        expect_rc "$cmd" 64 dl $cmd
        expect_match "$cmd: '--' is no NAME" "^dlock [a-z]+: '--' is no lock name: it is the word that ends dlock's options" \
            "$(head -1 "$TMP/err")"
    done
    expect_rc "run -m -- -m b -- true" 64 dl run -m -- -m b -- true
    expect_match "-m --: no NAME either" "^dlock run: -m '--' is no lock name" "$(head -1 "$TMP/err")"
}

# status, lock, unlock and extend want one NAME: an empty one among several
# is called what it likely is, each word given is named, and a NAME taken
# for an option's value ($OWNER unset) is said to be (all said "want
# exactly one NAME").
test_names_given()
{
    local args unset_var=
    for args in "status" "lock -l 5" "unlock --force" "extend -l 5 --owner 0123456789abcdef0123456789abcdef"; do
        # shellcheck disable=SC2086 # the words of $args
        expect_rc "$args u-given ''" 64 dl $args u-given ''
        expect_eq "$args u-given '': the empty one named" \
            "dlock ${args%% *}: want one NAME, got 2: 'u-given', '' ('' is an empty NAME: a shell variable that is not set?)" \
            "$(head -1 "$TMP/err")"
        # shellcheck disable=SC2086
        expect_rc "$args (none)" 64 dl $args
        expect_eq "$args (none)" \
            "dlock ${args%% *}: missing NAME: give the lock's name (a shell variable that is not set, unquoted, is no word at all)" \
            "$(head -1 "$TMP/err")"
    done
    expect_rc "lock a b" 64 dl lock -l 5 u-a u-b
    expect_eq "lock a b: each named" \
        "dlock lock: want one NAME, got 2: 'u-a', 'u-b' (a NAME of several words is one quoted word)" \
        "$(head -1 "$TMP/err")"
    # shellcheck disable=SC2086 # the point: an unset variable, unquoted
    expect_rc "unlock --owner \$UNSET u-given" 64 dl unlock --owner $unset_var u-given
    expect_eq "unlock --owner \$UNSET u-given: the name taken for the value" \
        "dlock unlock: missing NAME: 'u-given' is the value of --owner (if it is the lock's name, the value of --owner is missing: a shell variable that is not set?)" \
        "$(head -1 "$TMP/err")"
    # shellcheck disable=SC2086
    expect_rc "run --label \$UNSET u-given -- true" 64 dl run --label $unset_var u-given -- true
    expect_match "run --label \$UNSET u-given --: said" "^dlock run: missing NAME: 'u-given' is the value of --label \(" \
        "$(head -1 "$TMP/err")"
    expect_free u-given
    # an option written out whole, a value that is no name: NAME forgotten
    expect_rc "unlock --force (none)" 64 dl unlock --force
    [[ $(cat "$TMP/err") == *"read as"* ]] && fail "unlock --force: --force called a name: $(cat "$TMP/err")"
    expect_rc "run -u URL (none)" 64 dl run -u "$DLOCK_URL"
    [[ $(cat "$TMP/err") == *"the value of"* ]] && fail "run -u URL: the URL called a name: $(cat "$TMP/err")"
}

# A failure to take the lock, in one wording: "cannot take lock 'x': ...",
# the name said once (it was "cannot take the lock: lock 'x': ..." when the
# library's message named it, "cannot take lock 'x'" when not).
test_cannot_take_wording()
{
    local url
    url="redis://127.0.0.1:$(closed_port)"
    expect_rc "run, nothing at the URL" 69 dl run -u "$url" u-take -- true
    expect_match "run: one wording, the name once" \
        "^dlock: cannot take lock 'u-take': the store was never reached \(tried for [0-9]+ ms\): $url: " \
        "$(grep -v '^dlock: warn:' "$TMP/err")"
    expect_rc "run -m, nothing at the URL" 69 dl run -u "$url" -m u-take1 -m u-take2 -- true
    expect_match "run -m: the multi-lock" \
        "^dlock: cannot take multi-lock 'u-take1,u-take2': lock 'u-take1': the store was never reached" \
        "$(grep -v '^dlock: warn:' "$TMP/err")"
}

# A wait that gave up (-w, -n) says who holds the lock, as the waiting line
# does: pid, host, label.
test_gave_up_says_who_holds()
{
    local holder
    dl_bg "$TMP/t/holder" run --label nightly u-gaveup -- sh -c \
        ': > "$0/held"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    holder=$BG
    wait_until 10 test -e "$TMP/t/held" || { fail "the holder never started"; return; }
    local who="dlock: lock 'u-gaveup' is held by pid $holder on $(hostname), label nightly"
    expect_rc "run -w 0.2" 1 dl run -w 0.2 u-gaveup -- true
    expect_match "run -w: who holds it" "^dlock: lock 'u-gaveup' is still held by someone else after [0-9]+ ms"$'\n'"$who$" \
        "$(cat "$TMP/err")"
    expect_rc "run -n" 1 dl run -n u-gaveup -- true
    expect_eq "run -n: who holds it" "$who" "$(sed -n 2p "$TMP/err")"
    expect_rc "lock -w 0.2 -E 3" 3 dl lock -w 0.2 -E 3 -l 5 u-gaveup
    expect_eq "lock -w: who holds it" "$who" "$(sed -n 2p "$TMP/err")"
    expect_rc "run -m -w 0.2" 1 dl run -m u-gaveup0 -m u-gaveup -w 0.2 -- true
    expect_eq "run -m: the name held" \
        "dlock: lock 'u-gaveup' (of the multi-lock) is held by pid $holder on $(hostname), label nightly" \
        "$(sed -n 2p "$TMP/err")"
    expect_rc "run -q -n: nothing" 1 dl run -q -n u-gaveup -- true
    expect_eq "run -q -n: nothing said" "" "$(cat "$TMP/err")"
    expect_rc "--read on the mutex: the refusal says it" 1 dl run --read -n u-gaveup -- true
    expect_eq "--read on the mutex: then who holds it, as a plain refusal" \
        "dlock: lock 'u-gaveup' is held by pid $holder on $(hostname), label nightly" \
        "$(sed -n 2p "$TMP/err")"
    expect_eq "--read on the mutex: two lines" 2 "$(wc -l <"$TMP/err")"
    touch "$TMP/t/go"
    reap "$holder" 10
}

# A message of the library longer than a line buffer (a Redlock of 16
# nodes out of reach, a long name) is printed whole: it was cut at 1,019
# bytes, mid-word.
test_long_log_line_whole()
{
    local name hosts="" i line port
    name=u-long-$(printf '%0400d' 0)
    for i in $(seq 1 16); do
        port=$(closed_port)
        [[ ,$hosts, == *":$port,"* ]] || hosts="$hosts${hosts:+,}127.0.0.1:$port"
    done
    expect_rc "redlock of 16 nodes out of reach" 69 \
        dl run -w 1 -u "redlock://$hosts?connect_timeout=200ms" "$name" -- true
    line=$(grep "^dlock: warn: lock '$name'" "$TMP/err" | head -1)
    [ "${#line}" -gt 1100 ] || fail "the line of the whole Redlock is ${#line} bytes: $line"
    expect_match "the line ends as the library's message does" "ms\)$" "$line"
}

# A URL at a port where something else answers says what answered, in
# words: a recognised server, or an unknown protocol, never its bytes.
test_unknown_protocol_in_words()
{
    local port pid
    port=$(free_port)
    python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
print("up", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"\x01\x02garbage\xff\xfe")
    c.close()' "$port" >"$TMP/t/junk.out" 2>&1 &
    pid=$!
    BG_PIDS+=("$pid")
    wait_until 10 grep -q up "$TMP/t/junk.out" || { fail "the junk server never started"; return; }
    expect_rc "zk:// at a junk server" 69 dl status -u "zk://127.0.0.1:$port" u-junk
    if ! grep -q "not built\|unknown scheme" "$TMP/err"; then
        expect_match "zk://: in words" \
            "127.0.0.1:$port answered, but not as ZooKeeper \(an unknown protocol: none of dlock's stores, nor HTTP or TLS\)$" \
            "$(cat "$TMP/err")"
        expect_rc "zk:// at the Redis port" 69 dl status -u "zk://127.0.0.1:$PORT" u-junk
        expect_match "zk:// at the Redis port: named" "\(a Redis server's error: use redis://\)$" \
            "$(cat "$TMP/err")"
    fi
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# A semaphore's count: an idle one's status shows the count asked for (it
# showed "0 of 0 taken"); unlock --force with another count than its users
# declare is refused as status refuses it, and nothing is released (it
# released every holder).
test_semaphore_count()
{
    local holder
    case $STORE in
    redis | zookeeper | etcd | sqlite) ;;
    *) return 0 ;; # no semaphores there
    esac
    expect_match "idle: the count asked for" "^permits: +0 of 3 taken, by 0 holders$" \
        "$(dl status --permits 3 u-count | grep '^permits:')"
    dl_bg "$TMP/t/h" run --permits 3 u-count -- sh -c \
        ': > "$0/held"; while [ ! -e "$0/go" ]; do sleep 0.02; done' "$TMP/t"
    holder=$BG
    wait_until 10 test -e "$TMP/t/held" || { fail "the holder never started"; return; }
    expect_rc "unlock --force --permits 5 of a semaphore of 3" 64 dl unlock --force --permits 5 u-count
    expect_eq "--permits 5: said as status says it" \
        "dlock unlock: u-count has 3 permits, not 5: nothing was released (its users declare 3: give --permits 3)" \
        "$(cat "$TMP/err")"
    expect_match "--permits 5: still held" "^permits: +1 of 3 taken, by 1 holder$" \
        "$(dl status --permits 3 u-count | grep '^permits:')"
    kill -0 "$holder" 2>/dev/null || fail "--permits 5: the holder stopped"
    # every refusal of that count is 64, the usage error dlock --help and
    # dlock(1) document (status warned and exited 0, also with --check)
    expect_rc "run --permits 5" 64 dl run --permits 5 u-count -- true
    expect_match "run --permits 5: one wording" "^dlock: cannot take lock 'u-count': .*in use with 3 permits" \
        "$(cat "$TMP/err")"
    expect_match "run --permits 5: what to give" "must give the same number \(give --permits 3\)" \
        "$(cat "$TMP/err")"
    expect_rc "status --permits 5" 64 dl status --permits 5 u-count
    expect_eq "status --permits 5: what to give" \
        "dlock status: u-count has 3 permits, not 5 (its users declare 3: give --permits 3)" "$(cat "$TMP/err")"
    expect_match "status --permits 5: shown all the same" "^permits: +1 of 3 taken, by 1 holder$" \
        "$(grep '^permits:' "$TMP/out")"
    expect_rc "status --check --permits 5" 64 dl status --check -q --permits 5 u-count
    expect_rc "status --check --permits 3" 0 dl status --check -q --permits 3 u-count
    # and the kind not named: the count to give
    expect_eq "status: the options that show it" \
        "state:      held as a semaphore, not as a mutex (one name is one lock: status --permits 3 shows it)" \
        "$(dl status u-count | grep '^state:')"
    expect_rc "unlock --force without --permits" 64 dl unlock --force u-count
    expect_eq "unlock --force: the count to give" \
        "dlock unlock: 'u-count' is held as a semaphore, not as a mutex: nothing was released (force it with --permits 3)" \
        "$(cat "$TMP/err")"
    expect_rc "unlock --force --permits 3" 0 dl unlock --force --check --permits 3 u-count
    reap "$holder" 20
    expect_eq "--permits 3: the holder lost it (75)" 75 "$BG_RC"
}

# dlock --help lists the exit codes, each one docs/dlock.1 lists (EXIT
# STATUS), and no other.
test_help_exit_codes()
{
    local man=$HERE/../../docs/dlock.1 code listed
    expect_rc "--help" 0 dl --help || return
    listed=$(sed -n '/^exit codes/,/^$/p' "$TMP/out" | grep -Eo '^  [0-9]+(\+N)?' | tr -d ' ' | tr '\n' ' ')
    local documented
    documented=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH SIGNALS/p' "$man" |
        sed -nE 's/^\.B ([0-9]+)$/\1/p; s/^\.BI 128\+ N$/128+N/p' | tr '\n' ' ')
    [ -n "$documented" ] || { fail "no exit codes found in $man"; return; }
    expect_eq "--help lists the exit codes dlock.1 lists" "$documented" "$listed"
    for code in $documented; do
        grep -Eq "^  ${code/+/\\+} +[a-z]" "$TMP/out" || fail "--help: exit code $code without its meaning"
    done
}

# Where the store comes from (-u, $DLOCK_URL, the default) is a paragraph
# of its own in --help: it ran on into the sentence about the library's
# warnings (a new user's trial read past it).
test_help_url_paragraph()
{
    expect_rc "--help" 0 dl --help || return
    expect_eq "--help: the store's paragraph" \
        "The store is -u URL (after the command: dlock run -u URL NAME -- ...), else
\$DLOCK_URL, else redis://127.0.0.1:6379." \
        "$(sed -n '/^The store is/,/^$/p' "$TMP/out" | sed '/^$/d')"
}

# -L and --label reach the library apart from the URL: the command's
# $DLOCK_URL is the URL the user gave, so a dlock inside the command may
# give its own -L (the new-user trial: it was refused, the URL's lease=
# and -L both given).
test_url_exported_as_typed()
{
    expect_rc "run -L --label: the command's \$DLOCK_URL" 0 \
        dl run -L 10 --label tag u-typed -- sh -c 'printf "%s\n" "$DLOCK_URL"'
    expect_eq "run -L --label: \$DLOCK_URL as given" "$DLOCK_URL" "$(cat "$TMP/out")"
    expect_rc "a dlock run -L inside, on the command's \$DLOCK_URL" 0 \
        dl run -L 10 u-typed -- sh -c '"$0" run -L 20 -u "$DLOCK_URL" u-typed2 -- "$0" status u-typed2' "$DLOCK"
    expect_match "the inner -L holds" "renewed lease 20s|lease left: +(19|20)" "$(cat "$TMP/out")"
    # $DLOCK_URL with a lease= of its own, handed on with -u "$DLOCK_URL":
    # still the handed-down default that -L overrides (trial38: refused)
    expect_rc "a dlock run -L -u \$DLOCK_URL inside, the URL with lease=10s" 0 \
        timeout -k 2 20 env DLOCK_URL="$DLOCK_URL?lease=10s" "$DLOCK" run -L 20 u-typed -- \
        sh -c '"$0" run -L 20 -u "$DLOCK_URL" u-typed2 -- "$0" status u-typed2' "$DLOCK"
    expect_match "the inner -L over \$DLOCK_URL's lease=" "renewed lease 20s|lease left: +(19|20)" \
        "$(cat "$TMP/out")"
    # a -u URL's lease= and -L: refused, and whether they differ said
    expect_rc "-u URL's lease=5s and -L 10" 64 dl run -u "$DLOCK_URL?lease=5s" -L 10 u-typed -- true
    expect_eq "-u URL's lease=5s and -L 10: they differ" \
        "dlock run: -L 10 and the URL's lease=5s contradict each other: give one" "$(cat "$TMP/err")"
    expect_rc "-u URL's lease=5s and -L 5" 64 dl run -u "$DLOCK_URL?lease=5s" -L 5 u-typed -- true
    expect_eq "-u URL's lease=5s and -L 5: the same" \
        "dlock run: -L 5 and the URL's lease=5s say the same thing: give one" "$(cat "$TMP/err")"
}

# The short-lease warning names the timeout the user set, or says it is
# the default (the new-user trial: "the URL's timeout= option" for a URL
# with none).
test_short_lease_warning_words()
{
    # without timeout= the request timeout follows the lease (a third of
    # it): nothing to warn of, and no URL to edit (the new-user trial: the
    # README's own `dlock run -L 5s billing -- true` warned on every store)
    expect_rc "-L 3, no timeout=" 0 dl run -L 3 u-short -- true
    expect_eq "-L 3, no timeout=: no warning" "" "$(cat "$TMP/err")"
    expect_rc "-L 5s, no timeout=" 0 dl run -L 5s u-short -- true
    expect_eq "-L 5s, no timeout=: no warning" "" "$(cat "$TMP/err")"
    expect_rc "URL lease=3s, no timeout=" 0 dl run -u "$DLOCK_URL?lease=3s" u-short -- true
    expect_eq "URL lease=3s, no timeout=: no warning" "" "$(cat "$TMP/err")"
    expect_rc "-L 3, timeout=2s" 0 dl run -u "$DLOCK_URL?timeout=2s" -L 3 u-short -- true
    expect_match "-L 3 timeout=2s: the URL's named" \
        "^dlock: warn: lock 'u-short': the store request timeout \(2000 ms, the URL's timeout= option" \
        "$(cat "$TMP/err")"
}

# A NAME after a -- of its own takes flock's -c STRING too, and '--' is
# no PREFIX of list (the new-user trial: `run -- -foo -c '...'` refused,
# `list -- --` listed the locks under '--').
test_dashdash_name_then_shell()
{
    expect_rc "run -- -u-dash -c STRING" 0 dl run -- -u-dash -c 'echo ran "$DLOCK_NAME"'
    expect_eq "run -- -u-dash -c STRING: ran" "ran -u-dash" "$(cat "$TMP/out")"
    expect_rc "run -- -u-dash --command=STRING" 0 dl run -- -u-dash --command='echo ran'
    expect_eq "run -- -u-dash --command=STRING: ran" "ran" "$(cat "$TMP/out")"
    expect_free -u-dash
    expect_rc "run -- -u-dash -c STRING more" 64 dl run -- -u-dash -c 'echo ran' more
    # a -c without its STRING is said as such (trial38: "a -- goes before the command")
    expect_rc "run -- -u-dash -c" 64 dl run -- -u-dash -c
    expect_match "run -- -u-dash -c: said" "^dlock run: -c needs a command string" "$(cat "$TMP/err")"
    expect_rc "list -- --" 64 dl list -- --
    expect_match "list -- --: said" "^dlock list: '--' is no PREFIX" "$(cat "$TMP/err")"
    expect_rc "list -- -u-" 0 dl list -- -u-
}

# A URL option's value from a fixed set, misspelt, says what was meant; an
# empty one says it is empty; both list the choices. A lease= too short
# names the URL, as an unknown option does, its password masked (trial39:
# ?names=exct and ?mode= had no did-you-mean, ?lease=0 no URL).
test_url_values_told()
{
    local hp=127.0.0.1:$PORT
    expect_rc "?notify=pubsb" 64 dl status -u "redis://$hp?notify=pubsb" u-val
    expect_eq "?notify=pubsb: what was meant, and the choices" \
        "dlock: cannot open client: redis://$hp?notify=pubsb: unknown notify 'pubsb' (did you mean notify=pubsub? want notify=pubsub, the default, or notify=stream)" \
        "$(cat "$TMP/err")"
    expect_rc "?notify=" 64 dl status -u "redis://$hp?notify=" u-val
    expect_eq "?notify=: empty, and the choices" \
        "dlock: cannot open client: redis://$hp?notify=: notify= is empty (want notify=pubsub, the default, or notify=stream)" \
        "$(cat "$TMP/err")"
    # the SQL stores' choices (no server needed: refused at open)
    expect_rc "?names=exct" 64 dl status -u "mysql://u:p@$hp/db?names=exct" u-val
    expect_eq "?names=exct: what was meant" \
        "dlock: cannot open client: mysql://u:***@$hp/db?names=exct: unknown names 'exct' (did you mean names=exact? want names=mapped, the default, or names=exact)" \
        "$(cat "$TMP/err")"
    expect_rc "mysql ?mode=" 64 dl status -u "mysql://u:p@$hp/db?mode=" u-val
    expect_eq "mysql ?mode=: empty, and the choices" \
        "dlock: cannot open client: mysql://u:***@$hp/db?mode=: mode= is empty (want mode=table, the default, mode=session or mode=row)" \
        "$(cat "$TMP/err")"
    expect_rc "?sslmode=requir" 64 dl status -u "postgres://u:p@$hp/db?sslmode=requir" u-val
    expect_eq "?sslmode=requir: what was meant" \
        "dlock: cannot open client: postgres://u:***@$hp/db?sslmode=requir: unknown sslmode 'requir' (did you mean sslmode=require? want sslmode=disable, sslmode=allow, sslmode=prefer, the default, sslmode=require, sslmode=verify-ca or sslmode=verify-full)" \
        "$(cat "$TMP/err")"
    local floor="a lease must be at least 20 ms (of a shorter one, the drift margin and a round trip leave too little to hold)"
    local lease
    for lease in 0 0s; do
        expect_rc "?lease=$lease" 64 dl run -u "redis://:pw0rd@$hp?lease=$lease" u-val -- true
        expect_eq "?lease=$lease: the URL named, its password masked" \
            "dlock: cannot open client: redis://:***@$hp?lease=$lease: option lease=$lease: $floor" \
            "$(cat "$TMP/err")"
        expect_rc "sqlite ?lease=$lease" 64 dl run -u "sqlite://$TMP/t/v.db?lease=$lease" u-val -- true
        expect_eq "sqlite ?lease=$lease: the URL named" \
            "dlock: cannot open client: sqlite://$TMP/t/v.db?lease=$lease: option lease=$lease: $floor" \
            "$(cat "$TMP/err")"
    done
    # a -L beside the URL is the option named, not the URL
    expect_rc "-L 0" 64 dl run -u "redis://$hp" -L 0 u-val -- true
    expect_eq "-L 0: the option" "dlock run: -L 0: $floor" "$(cat "$TMP/err")"
}

# -L (a renewed lease, dlock run's) given to lock or extend, whose lease is
# -l (fixed): the refusal says -l was likely meant and why (trial39: "-L is
# not an option of 'dlock lock'" and nothing more).
test_lease_flag_meant()
{
    local form name
    for form in "-L 30" "--ttl 30" "--renewed-lease=30"; do
        name=${form%% *}
        name=${name%%=*}
        # shellcheck disable=SC2086 # the words of $form
        expect_rc "lock $form" 64 dl lock $form u-flag
        expect_match "lock $form: -l meant" \
            "^dlock lock: $name is not an option of 'dlock lock': did you mean -l\? \(-l SECONDS is the fixed lease of a lock left held; $name, a lease renewed while dlock runs, is dlock run's\)" \
            "$(cat "$TMP/err")"
    done
    expect_rc "extend -L" 64 dl extend --owner 0123 -L 30 u-flag
    expect_match "extend -L: -l meant" \
        "^dlock extend: -L is not an option of 'dlock extend': did you mean -l\? \(-l SECONDS is the fixed lease a held lock is given; -L, a lease renewed while dlock runs, is dlock run's\)" \
        "$(cat "$TMP/err")"
    expect_free u-flag
    # run has both: -L is its own
    expect_rc "run -L" 0 dl run -L 30 u-flag -- true
    # an option of no lease: nothing of -l
    expect_rc "status -L" 64 dl status -L 30 u-flag
    [[ $(cat "$TMP/err") == *"did you mean"* ]] && fail "status -L: suggested $(cat "$TMP/err")"
}

# A lost SQLite lock says what happened, in the store's terms: its row
# deleted (force-unlocked), taken over by another holder, or the database
# file removed (trial39: one generic "renewal refused" line for all; a
# removed file went unnoticed, the command ran on, while a lock taken at
# the path was in a new file).
test_sqlite_loss_words()
{
    local db=$TMP/t/loss.db holder
    local url="sqlite://$db?timeout=300ms"
    dl_bg "$TMP/t/h1" run -u "$url" -L 1 u-sqlost -- sh -c ': > "$0/held1"; exec sleep 10' "$TMP/t"
    holder=$BG
    wait_until 10 test -e "$TMP/t/held1" || { fail "the first holder never started"; return; }
    expect_rc "force-unlock" 0 dl unlock -u "$url" --force u-sqlost
    reap "$holder" 10
    expect_eq "force-unlocked: lost" 75 "$BG_RC"
    expect_match "force-unlocked: said so" \
        "^dlock: lock 'u-sqlost' was lost \(its row was deleted: it was force-unlocked, or cleared after its lease ran out\); stopping the command" \
        "$(cat "$TMP/t/h1.err")"

    # taken over: another holder has the name by the time the loss is seen
    dl_bg "$TMP/t/h2" run -u "$url" -L 1 u-sqlost -- sh -c ': > "$0/held2"; exec sleep 10' "$TMP/t"
    holder=$BG
    wait_until 10 test -e "$TMP/t/held2" || { fail "the second holder never started"; return; }
    kill -STOP "$holder"
    expect_rc "force-unlock, then a new holder" 0 dl unlock -u "$url" --force u-sqlost
    dl_bg "$TMP/t/h3" run -u "$url" u-sqlost -- sh -c ': > "$0/held3"; exec sleep 10' "$TMP/t"
    local taker=$BG
    wait_until 10 test -e "$TMP/t/held3" || fail "the taker never took it"
    kill -CONT "$holder"
    reap "$holder" 10
    expect_eq "taken over: lost" 75 "$BG_RC"
    expect_match "taken over: said so" \
        "lock 'u-sqlost' was lost \((its row was taken over by another holder \(after its lease ran out, or a force-unlock\)|lease ran out: no successful renewal)" \
        "$(cat "$TMP/t/h2.err")"
    kill -TERM "$taker"
    reap "$taker" 10

    # the file removed under a holder: lost, not held in a file no one else opens
    dl_bg "$TMP/t/h4" run -u "$url" -L 1 u-sqlost -- sh -c ': > "$0/held4"; exec sleep 10' "$TMP/t"
    holder=$BG
    wait_until 10 test -e "$TMP/t/held4" || { fail "the fourth holder never started"; return; }
    rm -f "$db" "$db-wal" "$db-shm"
    reap "$holder" 10
    expect_eq "file removed: lost" 75 "$BG_RC"
    expect_match "file removed: said so" \
        "^dlock: lock 'u-sqlost' was lost \(the database file was removed \(a lock taken at its path now is in a new file\)\); stopping the command" \
        "$(cat "$TMP/t/h4.err")"
}

# A Redlock with a quorum of its nodes down (issue 22, a new user's trial:
# two of three stopped, then all three): the error is the last line, every
# warning about the attempt before it (the nodes' warnings came after it
# when their requests timed out as the round did), and a command that
# tries once names each node down once (a warning per node and the error
# named them, and the error said "out of reach" twice). A spare node down
# is still a warning, with or without -v.
test_redlock_nodes_down_told_once()
{
    local s1 s2 f1 p1 p2 p3 url v cmd line words args rport rpid
    silent_server "$TMP/t/s1"
    s1=$BG
    silent_server "$TMP/t/s2"
    s2=$BG
    f1=$(head -1 "$TMP/t/s1")
    p1=$(closed_port)
    p2=$(closed_port)
    p3=$(closed_port)
    for url in "redlock://127.0.0.1:$PORT,127.0.0.1:$f1,127.0.0.1:$(head -1 "$TMP/t/s2")?timeout=500ms" \
        "redlock://127.0.0.1:$PORT,127.0.0.1:$p1,127.0.0.1:$p2" \
        "redlock://127.0.0.1:$p1,127.0.0.1:$p2,127.0.0.1:$p3"; do
        for v in "" -v -vv; do
            for cmd in "lock -n -l 10" "lock -w 1 -l 10" status "unlock --force" "run -n" \
                "run -w 1" list; do
                read -r -a words <<<"$cmd"
                args=("${words[0]}" ${v:+"$v"} -u "$url" "${words[@]:1}")
                [ "${words[0]}" = list ] || args+=(u-down)
                [ "${words[0]}" = run ] && args+=(-- true)
                expect_rc "$cmd $v on $url" 69 dl "${args[@]}" || continue
                line=$(tail -1 "$TMP/err")
                if [[ $line =~ ^dlock:\ (warn|info|debug|error):\  ]] || [[ $line != dlock* ]]; then
                    fail "$cmd $v on $url: the error is not the last line: $(cat "$TMP/err")"
                    continue
                fi
                [[ $line =~ out\ of\ reach.*out\ of\ reach ]] &&
                    fail "$cmd $v on $url: 'out of reach' twice in the error: $line"
                [[ $cmd == *-w* ]] && continue # a wait's first retry is a warning too
                [ "$v" = -vv ] && continue         # every node's connection at debug
                expect_eq "$cmd $v on $url: the node down named in one line" 1 \
                    "$(grep -cE "127\.0\.0\.1:($p1|$f1)\b" "$TMP/err")" ||
                    cat "$TMP/err" >&2
            done
        done
    done
    stop_server "$s1"
    stop_server "$s2"
    # a spare node down: the others decide, and the node is a warning
    rport=$(free_port)
    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/t" \
        --logfile "$TMP/t/node2.log" &
    rpid=$!
    BG_PIDS+=("$rpid")
    wait_until 10 eval '[ "$(redis-cli -p $rport ping 2>/dev/null)" = PONG ]' ||
        { fail "the second node did not start"; return; }
    url="redlock://127.0.0.1:$PORT,127.0.0.1:$rport,127.0.0.1:$p1"
    for v in "" -v; do
        expect_rc "lock -n $v with a spare node down" 0 dl lock -n ${v:+"$v"} -l 10 -u "$url" u-spare
        expect_eq "lock -n $v with a spare node down: a warning" 1 \
            "$(grep -c "^dlock: warn: 127\.0\.0\.1:$p1: node out of reach" "$TMP/err")"
        expect_rc "unlock $v with a spare node down" 0 dl unlock --force ${v:+"$v"} -u "$url" u-spare
        expect_rc "list $v with a spare node down" 0 dl list ${v:+"$v"} -u "$url"
        expect_eq "list $v with a spare node down: a warning" 1 \
            "$(grep -c "^dlock: warn: 127\.0\.0\.1:$p1: node out of reach" "$TMP/err")"
        expect_eq "list $v with a spare node down: the node named once" 1 \
            "$(grep -o "127\.0\.0\.1:$p1\b" "$TMP/err" | wc -l)"
    done
    # a spare node hung (connected, silent): a one-shot command ends before
    # the node's request times out, and says so before it exits (it said
    # nothing: the new-user trial)
    silent_server "$TMP/t/s3"
    s1=$BG
    url="redlock://127.0.0.1:$PORT,127.0.0.1:$rport,127.0.0.1:$(head -1 "$TMP/t/s3")"
    for cmd in "lock -n -l 10" status "unlock --force"; do
        read -r -a words <<<"$cmd"
        expect_rc "$cmd with a spare node hung" 0 dl "${words[0]}" -u "$url" "${words[@]:1}" u-hung
        expect_match "$cmd with a spare node hung: a warning" \
            "^dlock: warn: 127\.0\.0\.1:$(head -1 "$TMP/t/s3"): node out of reach \(the others decide while a quorum answers\): no reply in [0-9]+ ms" \
            "$(grep '^dlock: warn:' "$TMP/err")"
        expect_eq "$cmd with a spare node hung: one warning" 1 "$(grep -c '^dlock: warn:' "$TMP/err")"
    done
    stop_server "$s1"
    stop_server "$rpid"
    # a walk that fails: each node named once, "H:P (why)", in the error alone
    url="redlock://127.0.0.1:$PORT,127.0.0.1:$p1,127.0.0.1:$p2"
    expect_rc "list -v, two nodes closed" 69 dl list -v -u "$url"
    expect_eq "list -v, two nodes closed: the error alone" \
        "dlock: cannot list the locks: $url: list: 2 of 3 nodes are out of reach (a quorum needs 2): 127.0.0.1:$p1, 127.0.0.1:$p2 (connect: Connection refused); 1 walked" \
        "$(cat "$TMP/err")"
}

# A Redlock whose nodes refuse this client (a wrong password) with a node
# closed besides (a new user's trial): the nodes that refused and the node
# out of reach are told apart, each named once (the closed node was listed
# among the refusals, after "2 of 3 nodes refused this client").
test_redlock_refused_apart_from_out_of_reach()
{
    local p1 ports=() pids=() i cmd words args line url
    p1=$(closed_port)
    for i in 0 1 2; do
        ports[i]=$(free_port)
        redis-server --port "${ports[i]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/t" \
            --dbfilename "n$i.rdb" --logfile "$TMP/t/n$i.log" --requirepass "$([ "$i" = 2 ] && echo other || echo secret)" &
        pids[i]=$!
        BG_PIDS+=("${pids[i]}")
    done
    for i in 0 1 2; do
        wait_until 10 eval '[ "$(redis-cli -p ${ports[i]} --no-auth-warning -a x ping 2>&1)" != "" ] && port_is_open ${ports[i]}' ||
            { fail "node $i did not start"; return; }
    done
    # 3 nodes: 2 refuse, 1 closed: refused (70), the closed node apart
    url="redlock://:wrong@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:$p1"
    for cmd in "lock -n -l 10" status "unlock --force" "run -n" list; do
        read -r -a words <<<"$cmd"
        args=("${words[0]}" -u "$url" "${words[@]:1}")
        [ "${words[0]}" = list ] || args+=(u-refused)
        [ "${words[0]}" = run ] && args+=(-- true)
        expect_rc "$cmd: refused" 70 dl "${args[@]}" || continue
        line=$(tail -1 "$TMP/err")
        expect_match "$cmd: the refusals, then the node out of reach" \
            "2 of 3 nodes refused this client and 1 is out of reach \(a quorum needs 2\): 127\.0\.0\.1:${ports[0]}, 127\.0\.0\.1:${ports[1]} \(AUTH refused: WRONGPASS[^;]*\); out of reach: 127\.0\.0\.1:$p1 \(connect: Connection refused\)" \
            "$line"
        expect_eq "$cmd: each node named once (besides the URL)" 3 \
            "$(sed -E 's#redlock://[^ ]*##' "$TMP/err" | grep -oE "127\.0\.0\.1:(${ports[0]}|${ports[1]}|$p1)\b" | wc -l)"
    done
    # 3 nodes, one refusing this client: a quorum answers, and the refusing
    # node is warned of once (it said nothing: trial50)
    url="redlock://:secret@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
    expect_rc "one node refusing: taken" 0 dl lock -u "$url" -n -l 10 u-one-refused
    expect_match "one node refusing: warned" \
        "warn: 127\.0\.0\.1:${ports[2]}: node out of reach .*AUTH refused: WRONGPASS" "$(cat "$TMP/err")"
    expect_eq "one node refusing: warned once" 1 "$(grep -c "AUTH refused" "$TMP/err")"
    expect_rc "one node refusing: unlocked" 0 dl unlock -u "$url" --force u-one-refused
    # 5 nodes: 2 answer, 2 refuse, 1 closed: no quorum, neither kind of it
    url="redlock://:secret@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:$PORT,127.0.0.1:${ports[2]},127.0.0.1:$p1"
    for cmd in "lock -n -l 10" status "unlock --force" "run -n"; do
        read -r -a words <<<"$cmd"
        args=("${words[0]}" -u "$url" "${words[@]:1}" u-refused)
        [ "${words[0]}" = run ] && args+=(-- true)
        expect_rc "$cmd, 5 nodes: unreachable" 69 dl "${args[@]}" || continue
        expect_match "$cmd, 5 nodes: the refusals, then the node out of reach" \
            "2 of 5 nodes refused this client and 1 is out of reach \(a quorum needs 3\): 127\.0\.0\.1:$PORT \(AUTH refused: [^;]*\); 127\.0\.0\.1:${ports[2]} \(AUTH refused: WRONGPASS[^;]*\); out of reach: 127\.0\.0\.1:$p1 \(connect: Connection refused\); 2 answered" \
            "$(tail -1 "$TMP/err")"
    done
    for i in 0 1 2; do
        stop_server "${pids[i]}"
    done
}

# A URL given as a word, without -u (dlock lock redis://HOST:PORT NAME),
# among the NAMEs, or alone (a NAME, a -m NAME, list's PREFIX): said to be
# a URL, with how to give it (it was "want one NAME, got 2", or a lock
# named after the URL), shown by its scheme only (the rest may hold a
# password); run does not take it for the NAME or the command, and runs
# nothing.
test_url_given_as_name()
{
    local args want want2
    want="looks like a URL, not a lock NAME; a URL goes with -u URL (or \$DLOCK_URL)"
    for args in "status" "lock -l 5" "unlock --force" "extend -l 5 --owner 0123456789abcdef0123456789abcdef" "list"; do
        # shellcheck disable=SC2086 # the words of $args
        expect_rc "$args URL NAME" 64 dl $args redis://127.0.0.1:6379 u-url-word
        expect_eq "$args URL NAME: the URL told" "dlock ${args%% *}: 'redis://...' $want" \
            "$(head -1 "$TMP/err")"
        # shellcheck disable=SC2086
        expect_rc "$args NAME URL" 64 dl $args u-url-word redis://127.0.0.1:6379
        expect_eq "$args NAME URL: the URL told" "dlock ${args%% *}: 'redis://...' $want" \
            "$(head -1 "$TMP/err")"
        # a URL alone, where the NAME goes (a new user's trial: it took a
        # lock named after the URL, and messages showed its password)
        # shellcheck disable=SC2086
        expect_rc "$args URL" 64 dl $args 'redis://:s3cretPW@127.0.0.1:6379'
        [ "${args%% *}" = list ] && want2=${want/lock NAME/PREFIX} || want2=$want
        expect_eq "$args URL: the URL told" "dlock ${args%% *}: 'redis://...' $want2" \
            "$(head -1 "$TMP/err")"
        grep -q s3cretPW "$TMP/err" && fail "$args URL: the password shown: $(cat "$TMP/err")"
    done
    expect_rc "run -m NAME -m URL" 64 dl run -m u-url-word -m 'rediss+sentinel://:s3cretPW@h/m' -- true
    expect_eq "run -m URL: told" \
        "dlock run: -m 'rediss+sentinel://...' looks like a URL, not a lock NAME; a URL goes with -u URL (or \$DLOCK_URL)" \
        "$(head -1 "$TMP/err")"
    expect_rc "run URL -- COMMAND" 64 dl run 'postgres://u:s3cretPW@h/db' -- touch "$TMP/t/ran"
    expect_rc "lock URL-with-password NAME" 64 dl lock -l 5 'redis://alice:s3cretPW@127.0.0.1:6379/?password=x' u-url-word
    expect_eq "lock URL-with-password NAME: not shown" "dlock lock: 'redis://...' $want" \
        "$(head -1 "$TMP/err")"
    for args in "redis://127.0.0.1:6379 u-url-word -- touch $TMP/t/ran" \
        "redis://127.0.0.1:6379 u-url-word" "u-url-word redis://127.0.0.1:6379 touch $TMP/t/ran"; do
        # shellcheck disable=SC2086
        expect_rc "run $args" 64 dl run $args
        expect_eq "run $args: the URL told" "dlock run: 'redis://...' $want" "$(head -1 "$TMP/err")"
    done
    [ -e "$TMP/t/ran" ] && fail "run URL NAME -- COMMAND: the command ran"
    expect_free u-url-word
    # a NAME may hold "://" when what comes before is no scheme of dlock's
    expect_rc "run -- URL-like NAME" 0 dl run -- x://y -- true
}

# A URL where another word goes (an option's value when a shell variable
# is not set, an option before the command, a URL as the command): the
# refusal shows it up to its "://" only (trial45b: the password was
# printed, twice for --url=URL).
test_url_secret_not_echoed()
{
    local u='redis://:s3cretPW@127.0.0.1:1' args
    local -a cases=(
        "unlock --owner $u"
        "run --label $u -- true"
        "--url=$u status n"
        "-u$u status n"
        "run --url=$u"
        "lock --url=$u"
        "$u"
        "--bogus=$u"
    )
    for args in "${cases[@]}"; do
        # shellcheck disable=SC2086 # the words of $args
        expect_rc "$args" 64 dl $args
        grep -q s3cretPW "$TMP/err" && fail "$args: the password shown: $(cat "$TMP/err")"
        expect_match "$args: the URL cut at ://" "redis://\.\.\." "$(cat "$TMP/err")"
    done
}

# A retry right away is "trying again in 1 ms", not "in 0 ms" (a
# ZooKeeper URL at a closed port said that first).
test_retry_delay_never_zero()
{
    local url err
    for url in "zk://127.0.0.1:$(closed_port)" "redis://127.0.0.1:$(closed_port)"; do
        dl run -v -w 1 -u "$url" u-retry -- true >/dev/null 2>"$TMP/err"
        err=$(cat "$TMP/err")
        [[ $err == *"this build of dlock has no"* ]] && continue
        expect_match "$url: retries told" "trying again in [0-9]+ ms" "$err"
        [[ $err == *"trying again in 0 ms"* ]] && fail "$url: a retry in 0 ms: $err"
    done
}

# build/bin/store sqlite (no server): names the database file, not a host
# and port (it said "sqlite on 127.0.0.1:0").
test_store_sqlite_banner()
{
    local store pid line url
    store=$(dirname "$DLOCK")/store
    [ -x "$store" ] || return 0
    "$store" sqlite >"$TMP/t/url" 2>"$TMP/t/banner" &
    pid=$!
    BG_PIDS+=("$pid")
    wait_until 10 test -s "$TMP/t/url" || { fail "store sqlite printed no URL"; return; }
    url=$(head -1 "$TMP/t/url")
    line=$(head -1 "$TMP/t/banner")
    kill -INT "$pid"
    reap "$pid" 10
    expect_eq "store sqlite: exit 0 on SIGINT" 0 "$BG_RC"
    expect_match "store sqlite: the URL" "^sqlite:///.*/locks\.db$" "$url"
    expect_eq "store sqlite: the banner" \
        "sqlite: no server; the database is the file ${url#sqlite://}; Ctrl-C removes it" "$line"
}
