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
    wait_until 10 grep -q "waiting for" "$TMP/t/waiter.err" ||
        fail "dlock run said nothing while it waited"
    wait_until 10 grep -q "waiting for" "$TMP/t/locker.err" ||
        fail "dlock lock said nothing while it waited"
    line=$(cat "$TMP/t/waiter.err")
    expect_eq "run: one line, who holds it, what to do" \
        "dlock: waiting for lock 'u-wait', held by pid $holder on $(hostname), label night job; -w SECONDS bounds the wait, -v follows it" \
        "$line"
    expect_eq "lock: the same line" "$line" "$(cat "$TMP/t/locker.err")"
    expect_eq "-q: nothing" "" "$(cat "$TMP/t/quiet.err")"
    expect_eq "-w: nothing" "" "$(cat "$TMP/t/bounded.err")"
    touch "$TMP/t/go"
    # `dlock lock` leaves it held: freed when it has it, for those after it
    wait_until 20 test -s "$TMP/t/locker.out" || fail "dlock lock never took it"
    dl unlock --force u-wait >/dev/null
    for p in "$holder" "$quiet" "$bounded" "$waiter" "$locker"; do
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
            "^lease left: none \(held by a session-mode holder: the name frees when its connection ends\)$" \
            "$(dl status u-sql | grep '^lease left:')"
        expect_eq "json: session" true "$(field u-sql session)"
    fi
    kill -KILL "$holder"
    reap "$holder" 10 2>/dev/null
    wait_until 10 eval 'dl status -u "$session" u-sql | grep -q "^lease left: [0-9]"' ||
        { fail "no lease left shown after the holder's connection ended: $(dl status -u "$session" u-sql)"; return; }
    expect_match "session gone: said" \
        "^lease left: [0-9.]+ s \(no session holds it now: its holder's connection is gone(, or it is held in table or row mode)?; the name frees when this lease ends\)$" \
        "$(dl status -u "$session" u-sql | grep '^lease left:')"
    dl unlock -u "$session" --force u-sql >/dev/null
}

# A URL of one store at another store's port: at once (within the connect
# timeout, 2 s), exit 69 as for no server there, and a message that says
# what answered: "H:P answered, but not as Redis (...)", or, for a server
# that waits for its own protocol's first words, that it did not answer.
# The same for a Redis topology at a plain Redis: redis+sentinel:// ("not
# as a Redis Sentinel"; it was exit 70) and redis+cluster:// ("not as a
# node of a Redis Cluster"; it was exit 64).
test_wrong_port()
{
    local hp scheme url t0 elapsed others=()
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
    fi
    for url in "${others[@]}"; do
        t0=$(now_ms)
        expect_rc "status -u $url (at $STORE's port)" 69 dl status -u "$url" u-port
        elapsed=$(($(now_ms) - t0))
        if [ "$elapsed" -gt 4000 ]; then
            fail "$url at $STORE's port: told after $elapsed ms"
        fi
        expect_match "$url at $STORE's port: said" \
            "$hp (answered, but not as [A-Za-z ]+ \(|accepted the connection, but (did not answer as PostgreSQL|sent no MySQL greeting))" \
            "$(cat "$TMP/err")"
    done
}
