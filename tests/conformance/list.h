/* SPDX-License-Identifier: MIT */
/* list.h - every conformance test, listed once: name, the capabilities it
 * needs (DLOCK_CAP_*), and one line on what it checks. The runner runs them
 * in this order; tests/conformance/README.md has the same table. */
#ifndef DLOCK_CONFORMANCE_LIST_H
#define DLOCK_CONFORMANCE_LIST_H

/* clang-format off */
#define CT_TEST_LIST(X)                                                                            \
    X(open_close, 0,                                                                               \
      "client open/close (no error logged), caps, store name, handles before use, free releases")   \
    X(bad_url_options, 0,                                                                          \
      "unknown or malformed URL options and ports are EINVAL naming the option")                   \
    X(unreachable_server, CT_LINK,                                                                 \
      "refused and silent servers are EUNREACHABLE within connect_timeout + timeout")              \
    X(acquire_release, 0,                                                                          \
      "try / acquire / release, holds, check, remaining, bad waits")                               \
    X(second_client_excluded, 0,                                                                   \
      "another client gets EBUSY / ETIMEDOUT until the release, other names stay free")            \
    X(reentry, 0,                                                                                  \
      "re-acquiring counts holds on the handle, keeps the fence, last release frees")              \
    X(release_not_held, 0,                                                                         \
      "release by a non-holder is ENOTOWNER and changes nothing; a second release too")            \
    X(wait_timeout, DLOCK_CAP_QUERY,                                                               \
      "a wait ends with ETIMEDOUT at its budget, leaves the queue, is not handed the lock")         \
    X(wake_on_release, DLOCK_CAP_NOTIFY | DLOCK_CAP_QUERY,                                         \
      "waiters are woken by each release within 1.5 s (the lease is 30 s), one per release")       \
    X(cancel_from_thread, DLOCK_CAP_QUERY,                                                         \
      "dlock_cancel from another thread ends the wait with ECANCELED and leaves the queue")        \
    X(fences_increase, DLOCK_CAP_FENCE,                                                            \
      "fences strictly increase across handles, clients and hand-overs")                           \
    X(query_state, DLOCK_CAP_QUERY,                                                                \
      "dlock_query: held, owner, holds, waiters, lease, last fence")                               \
    X(force_unlock, DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY,                                      \
      "force-unlock hands the lock to the waiter; the holder is told and gets ELOST")              \
    X(refuses_what_it_lacks, 0,                                                                    \
      "each call a missing capability guards is ENOTSUP naming the store and capability")         \
    X(close_bounded_when_silent, CT_LINK,                                                          \
      "dlock_client_close on a silent store, a renewal in flight, returns in one command timeout")  \
    X(killed_holder_expires, 0,                                                                    \
      "a kill -9ed holder process's lock is free within its lease / session timeout")              \
    X(fair_fifo_after_holder_killed, DLOCK_CAP_FAIR | DLOCK_CAP_QUERY | CT_LINK,                   \
      "5 fair waiters behind a kill -9ed holder are served in the order they queued (3 rounds)")   \
    X(lost_when_cut, CT_LINK,                                                                      \
      "holder's link reset: on_lost + ELOST within the lease, before another client holds")        \
    X(lost_when_blackholed, CT_LINK,                                                               \
      "holder's link silent: on_lost + ELOST within the lease, before another client holds")       \
    X(never_reached, CT_LINK,                                                                      \
      "a store never reached (refused, no such host) is EUNREACHABLE in seconds; dlock run exits 69") \
    X(outage_bounded, CT_LINK,                                                                     \
      "an outage in a wait is ridden through up to unreachable_wait, then EUNREACHABLE; or forever") \
    X(no_flood_late_grants, DLOCK_CAP_FIXED_LEASE | CT_LINK,                                       \
      "grants that always come back too late: a few requests a second, EUNREACHABLE after the bound") \
    X(no_flood_multi_short_lease, DLOCK_CAP_FIXED_LEASE | CT_LINK,                                 \
      "a multi-lock whose lease runs out as it gathers its names backs off, a few requests a second") \
    X(no_flood_behind_holder, CT_LINK,                                                             \
      "a waiter behind a holder that never lets go sends a few requests a second")                 \
    X(renewal_outlives_lease, 0,                                                                   \
      "a renewed hold lasts three leases and more, with no loss reported")                         \
    X(fixed_lease_expires, DLOCK_CAP_FIXED_LEASE,                                                  \
      "dlock_acquire_for: the lease runs out, the holder is told before the next one holds")       \
    X(extend_and_keepalive, DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND,                              \
      "dlock_extend lengthens and shortens a lease; dlock_keepalive renews it")                     \
    X(session_lifetime, DLOCK_CAP_SESSION,                                                         \
      "closing a client ends its session: its detached locks are free at once")                    \
    X(detached_lock_lifetime, 0,                                                                   \
      "a detached lock of a closed client lives until its lease (session: its session)")           \
    X(fair_fifo, DLOCK_CAP_FAIR | DLOCK_CAP_QUERY,                                                 \
      "fair waiters in 4 processes are served in the order they queued")                           \
    X(rw_readers_share, DLOCK_CAP_READ_WRITE,                                                      \
      "readers share, a writer is alone, a reader asking to write is EDEADLK")                     \
    X(rw_downgrade, DLOCK_CAP_READ_WRITE,                                                          \
      "the writer's owner takes the read lock beside its write, then lets the write go")           \
    X(rw_writer_not_starved, DLOCK_CAP_READ_WRITE | DLOCK_CAP_QUERY,                               \
      "a reader arriving after a waiting writer waits behind it")                                  \
    X(rw_dup_leases, DLOCK_CAP_READ_WRITE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND,               \
      "a short lease set through one handle of an owner does not cut another's longer one")        \
    X(rw_dup_readers_counted, DLOCK_CAP_READ_WRITE,                                                \
      "read handles of one owner count their holds: a writer waits until both let go")             \
    X(rw_dup_reader_released, DLOCK_CAP_READ_WRITE | DLOCK_CAP_FIXED_LEASE | DLOCK_CAP_EXTEND,      \
      "a read handle's short lease, renewed and let go, does not end its owner's longer one")      \
    X(rw_dup_writer_keeps_reader, DLOCK_CAP_READ_WRITE | DLOCK_CAP_FIXED_LEASE,                    \
      "a second write handle's short lease does not end its owner's reader and write")             \
    X(rw_dup_writer_release_tells, DLOCK_CAP_READ_WRITE,                                           \
      "a write let go by its owner's other handle: still held, or the first handle is told")       \
    X(rw_downgrade_wakes_readers, DLOCK_CAP_READ_WRITE | DLOCK_CAP_QUERY,                          \
      "a reader waiting behind a write is woken by the writer's downgrade, not its lease")         \
    X(semaphore_bounded, DLOCK_CAP_SEMAPHORE,                                                      \
      "4 processes on 2 permits never exceed 2; take K is all or nothing; permits must agree")      \
    X(semaphore_short_lease, DLOCK_CAP_SEMAPHORE | DLOCK_CAP_EXTEND,                                \
      "a semaphore holder's lease set short gives its permits back when it runs out")              \
    X(kinds_exclude, DLOCK_CAP_READ_WRITE,                                                         \
      "one name is one lock: every pair of kinds excludes, busy names the kind, waits are woken")   \
    X(kinds_first_come, DLOCK_CAP_READ_WRITE,                                                      \
      "across kinds first come, first served: a newcomer waits behind another kind's waiter")      \
    X(kinds_self_deadlock, DLOCK_CAP_READ_WRITE,                                                   \
      "an owner asking for its name as another kind (dlock_lock_dup) gets EDEADLK at once")         \
    X(kinds_never_overlap, DLOCK_CAP_READ_WRITE,                                                   \
      "4 processes take one name as every kind in turn: two kinds never hold it at once")          \
    X(who_holds, DLOCK_CAP_QUERY,                                                                  \
      "dlock_query_holders: token, host, pid, start and label of every holder; bad labels")        \
    X(owner_per_hold, DLOCK_CAP_QUERY,                                                             \
      "each hold of a handle has a token of its own, and the store names the current one")        \
    X(list_locks, DLOCK_CAP_LIST,                                                                  \
      "dlock_list: held and waited-for locks under a prefix, each once, with its kind; limit")     \
    X(awkward_names, 0,                                                                            \
      "the same awkward names (/ : { } % . kind suffixes, emoji) taken, listed as given, released") \
    X(names_apart, 0,                                                                              \
      "`a` and `a/0`, `x` and `x.rwlock`, the semaphore `S` and `S/locks` are locks of their own")   \
    X(multi_all_or_nothing, 0,                                                                     \
      "a multi-lock takes all names or none, gives back on timeout, no deadlock")                  \
    X(multi_fixed_lease_from_all, DLOCK_CAP_FIXED_LEASE,                                           \
      "a multi-lock's fixed lease starts when it holds every name; gathered, none is let go")     \
    X(multi_bounded_when_silent, DLOCK_CAP_QUERY | CT_LINK,                                        \
      "8 members released, or given back by a wait, in one command timeout of a silent store")    \
    X(fenced_counter, DLOCK_CAP_FENCE,                                                             \
      "8 processes x 25 fenced increments through the lock = exactly 200")                         \
    X(cli_run, 0,                                                                                  \
      "dlock run: fence in DLOCK_TOKEN, command's status, -n / -E / -w, exit 64, 69, 127")         \
    X(cli_run_lost, DLOCK_CAP_FORCE_UNLOCK | DLOCK_CAP_QUERY,                                      \
      "dlock run exits 75 when the lock is taken away while the command runs")                     \
    X(cli_kinds_exclude, 0,                                                                        \
      "dlock run -n --write/--read/--permits/--simple exits 1 while dlock run holds the mutex")     \
    X(flash_sale_demo, DLOCK_CAP_FENCE,                                                            \
      "the README's demo with its lock in this store: exactly 100 sold, fences increasing")
/* clang-format on */

#endif
