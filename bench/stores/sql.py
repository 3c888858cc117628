# SPDX-License-Identifier: MIT
"""The SQL stores in bench/compare.py: mysql (MariaDB), postgres, sqlite.

What differs from the other stores lives here: the servers (started with
the test harness's `store KIND`, build-bench/bin/store, which prints the
URL and stops the server and removes its temp dir on SIGTERM), the
programs of each store (dlock in each of its modes, the C floors of the
bare server functions, the node and ShedLock-style peers of
bench/peers/sql), how each waits, and the section of BENCHMARKS.md.

The server's own count of client connections is sampled while each
program runs (MariaDB `Threads_connected`, PostgreSQL `pg_stat_activity`
client backends); the peak, less the sampler's own connection, divided by
the locks the workload holds at once, is the connections used per held
lock. SQLite has no server and no peer here: its section has dlock only.
"""
import os
import signal
import statistics
import subprocess
import threading
import time
import urllib.parse

STORES = ("mysql", "postgres", "sqlite")
TITLES = {"mysql": "MySQL / MariaDB", "postgres": "PostgreSQL", "sqlite": "SQLite"}
HARNESS_KIND = {"mysql": "mariadb", "postgres": "postgres", "sqlite": "sqlite"}
FLOORS = {"mysql": "libmariadb-floor", "postgres": "libpq-floor", "sqlite": None}
# dlock's modes, the default first: (label, URL option)
MODES = {
    "mysql": (("dlock table", ""), ("dlock session", "mode=session")),
    "postgres": (("dlock session", ""), ("dlock table", "mode=table")),
    "sqlite": (("dlock", ""),),
}
NODE_PACKAGES = {"mysql": ("mysql2",), "postgres": ("pg", "advisory-lock")}
SAMPLE_S = 0.1


def url_with(url, option):
    if not option:
        return url
    return url + ("&" if "?" in url else "?") + option


class HarnessServer:
    """One throwaway server started by `store KIND` (tests/support), on a
    free loopback port in a temp dir; stopped by its pid (SIGTERM: the
    harness stops the server and removes the dir)."""

    def __init__(self, store, store_bin):
        self.name = store
        self.proc = subprocess.Popen([store_bin, HARNESS_KIND[store]], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url:
            err = self.proc.stderr.read()
            self.proc.wait()
            raise SystemExit(f"store {HARNESS_KIND[store]} did not start: {err.strip()[-500:]}")
        u = urllib.parse.urlsplit(self.url)
        self.host, self.port = u.hostname, u.port
        self.user, self.password = u.username, u.password
        self.database = u.path.lstrip("/")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def flush(self):
        """Nothing to clear: every program's locks end with its run."""

    def counters(self):
        return None

    def connect(self):
        return None

    def connections(self, conn):
        return None

    def version(self):
        return None

    def run(self, cmd, cwd, run_json):
        """run_json(cmd, cwd) with the server's client connections sampled
        every 0.1 s meanwhile: the line gets `conns_peak` (less the
        sampler's own)."""
        conn = self.connect()
        if conn is None:
            return run_json(cmd, cwd=cwd)
        samples, done = [], threading.Event()

        def sample():
            while not done.is_set():
                try:
                    samples.append(self.connections(conn))
                except Exception:  # a failed sample is left out, the run goes on
                    pass
                done.wait(SAMPLE_S)
        t = threading.Thread(target=sample)
        t.start()
        try:
            r = run_json(cmd, cwd=cwd)
        finally:
            done.set()
            t.join()
            conn.close()
        if r is not None and samples:
            r["conns_peak"] = max(samples) - 1
        return r


class MariaDB(HarnessServer):
    def connect(self):
        import pymysql
        return pymysql.connect(host=self.host, port=self.port, user=self.user,
                               password=self.password, database=self.database, autocommit=True)

    def connections(self, conn):
        with conn.cursor() as c:
            c.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
            return int(c.fetchone()[1])

    WRITES = ("Com_insert", "Com_update", "Com_delete", "Com_replace", "Com_insert_select")

    def counters(self):
        """Statements the clients sent (`Questions`; the sampler's few per
        second are in it) and, of them, writes (INSERT, UPDATE, DELETE...)."""
        conn = self.connect()
        try:
            with conn.cursor() as c:
                c.execute("SHOW GLOBAL STATUS")
                status = {k: v for k, v in c.fetchall()}
        finally:
            conn.close()
        return {"requests": float(status.get("Questions", 0)),
                "writes": float(sum(int(status.get(k, 0)) for k in self.WRITES))}

    def version(self):
        conn = self.connect()
        try:
            with conn.cursor() as c:
                c.execute("SELECT VERSION()")
                return c.fetchone()[0]
        finally:
            conn.close()


class Postgres(HarnessServer):
    def connect(self):
        import psycopg2
        conn = psycopg2.connect(host=self.host, port=self.port, user=self.user,
                                password=self.password, dbname=self.database)
        conn.autocommit = True
        return conn

    def connections(self, conn):
        with conn.cursor() as c:
            c.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
            return int(c.fetchone()[0])

    def counters(self):
        """Transactions ended in the database (`xact_commit` +
        `xact_rollback`: an autocommitted statement is one) and rows
        written (`tup_inserted` + `tup_updated` + `tup_deleted`). A backend
        hands its counts in when it exits: the program's backends are
        waited for (at most 3 s) before they are read."""
        conn = self.connect()
        try:
            for _ in range(60):
                if self.connections(conn) <= 1:
                    break
                time.sleep(0.05)
            with conn.cursor() as c:
                c.execute("SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + "
                          "tup_deleted FROM pg_stat_database WHERE datname = current_database()")
                xacts, rows = c.fetchone()
        finally:
            conn.close()
        return {"requests": float(xacts), "writes": float(rows)}

    def version(self):
        conn = self.connect()
        try:
            with conn.cursor() as c:
                c.execute("SHOW server_version")
                return c.fetchone()[0]
        finally:
            conn.close()


class SQLite(HarnessServer):
    """No server: the harness makes the database file in a temp dir."""


SERVERS = {"mysql": MariaDB, "postgres": Postgres, "sqlite": SQLite}


def peers_dir(a):
    return os.path.join(a.peers, "sql")


def programs(a, store, srv, py):
    """(workload, label, command, cwd) of every comparable run of store,
    interleaved: the floor, each dlock mode, then the peers."""
    s, t, p = str(a.seconds), str(a.threads), str(a.procs)
    multi = ["bash", os.path.join(a.peers, "multi.sh"), p]
    d = peers_dir(a)
    out = []
    floor = {"mysql": a.sql_floor_mysql, "postgres": a.sql_floor_pg}.get(store)
    if floor:
        out += [("seq", FLOORS[store], [floor, srv.url, "1", s], None),
                ("par", FLOORS[store], [floor, srv.url, t, s], None),
                ("hot", FLOORS[store], multi + [floor, srv.url, "1", s, "hot"], None)]
    for label, option in MODES[store]:
        dlock = [a.dlock, "bench", "-u", url_with(srv.url, option), "--seconds", s]
        out += [("seq", label, dlock + ["--workload", "seq"], None),
                ("par", label, dlock + ["--workload", "par", "--threads", t], None),
                ("hot", label, dlock + ["--workload", "hot", "--procs", p], None)]
    if a.candidate:
        for label, option in MODES[store]:
            cand = [a.candidate, "bench", "-u", url_with(srv.url, option), "--seconds", s,
                    "--lib", f"{label}-candidate"]
            name = label.replace("dlock", "dlock-candidate")
            out += [("seq", name, cand + ["--workload", "seq"], None),
                    ("par", name, cand + ["--workload", "par", "--threads", t], None),
                    ("hot", name, cand + ["--workload", "hot", "--procs", p], None)]
    node = ["node", "node_sql_bench.js", srv.url]
    if not a.no_node and store in NODE_PACKAGES:
        for lib in NODE_PACKAGES[store]:
            label = {"mysql2": "node mysql2", "pg": "node pg", "advisory-lock":
                     "node advisory-lock"}[lib]
            out += [("seq", label, node + ["seq", lib, "1", s], d),
                    ("par", label, node + ["par", lib, t, s], d),
                    ("hot", label, multi + node + ["hot", lib, "1", s], d)]
    if store in ("mysql", "postgres"):
        shed = [py, "shedlock_bench.py", srv.url]
        out += [("seq", "shedlock-sql", shed + ["seq", "1", s], d),
                ("par", "shedlock-sql", shed + ["par", t, s], d),
                ("hot", "shedlock-sql", multi + shed + ["hot", "1", s], d)]
    return out


def versions(a, store, srv, py, command_output, deb_version):
    """The versions of what is measured, for the section and the chart."""
    env = {}
    if store == "mysql":
        env["mariadb server"] = srv.version()
        env["libmariadb"] = deb_version("libmariadb3")
        env["pymysql"] = command_output([py, "-c", "import pymysql; print(pymysql.__version__)"])
    elif store == "postgres":
        env["postgresql server"] = srv.version()
        env["libpq"] = deb_version("libpq5")
        env["psycopg2"] = command_output(
            [py, "-c", "import psycopg2; print(psycopg2.__version__.split()[0])"])
    else:
        env["libsqlite3"] = deb_version("libsqlite3-0")
    return env


VERSION_KEYS = {"mysql": ("mariadb server", "libmariadb", "pymysql"),
                "postgres": ("postgresql server", "libpq", "psycopg2"),
                "sqlite": ("libsqlite3",)}

WAITS = {
    "mysql": {
        "dlock table": "dlock's lock table (the default, `mode=table`): a row per lock with "
                       "holder, lease and fence; a waiter **polls** (the core's back-off, bounded "
                       "by the holder's lease left) and keeps a row in `dlock_lock_wait`: "
                       "MariaDB has no notification to wake it (src/backend/mysql/README.md)",
        "dlock session": "`mode=session`: `GET_LOCK` named locks, held by a connection; a waiter "
                         "waits in the server inside `GET_LOCK` (in slices bounded by the wait "
                         "budget), so no polling",
        "libmariadb-floor": "the bare server functions: `SELECT GET_LOCK(name, 30)` + "
                            "`SELECT RELEASE_LOCK(name)`, libmariadb, one connection per thread; "
                            "waits in the server (bench/peers/sql/floor_mysql.c)",
        "node mysql2": "npm mysql2 pool: pins a connection, `GET_LOCK(name, 30)` (asked again "
                       "while it says 0), `RELEASE_LOCK`; waits in the server",
        "shedlock-sql": "ShedLock's lock table SQL (`INSERT IGNORE`, then `UPDATE ... WHERE "
                        "lock_until <= now`); ShedLock never waits, so a waiter polls every 1 ms",
    },
    "postgres": {
        "dlock session": "session mode (the default): advisory locks on a 64-bit key of the name, "
                         "held by a connection; a waiter waits in the server inside "
                         "`pg_advisory_lock` (bounded by `lock_timeout`), so no polling",
        "dlock table": "`mode=table`: dlock's lock table (a row per lock with holder, lease and "
                       "fence); waiters are served oldest first; a waiter behind a live holder "
                       "is woken by the release's `NOTIFY`, the next in line behind a free row "
                       "that an older waiter claims polls (every 4 ms, doubling with each waiter "
                       "ahead) (src/backend/pg/README.md)",
        "libpq-floor": "the bare server functions: `SELECT pg_advisory_lock(hashtext(name))` + "
                       "`pg_advisory_unlock`, libpq, one connection per thread; waits in the "
                       "server (bench/peers/sql/floor_pg.c)",
        "node pg": "npm pg Pool: `pg_advisory_lock(hashtext(name))` + `pg_advisory_unlock` on a "
                   "pooled connection; waits in the server",
        "node advisory-lock": "npm advisory-lock: `pg_advisory_lock` of a SHA-256 of the name, on "
                              "a new connection for every lock() (closed by unlock()); waits in "
                              "the server",
        "shedlock-sql": "ShedLock's lock table SQL (`INSERT ... ON CONFLICT DO UPDATE ... WHERE "
                        "lock_until <= now`, then `UPDATE`); ShedLock never waits, so a waiter "
                        "polls every 1 ms",
    },
    "sqlite": {
        "dlock": "one database file shared by the processes (WAL); SQLite cannot notify, so a "
                 "release wakes the waiters through a futex in a file mapped beside the "
                 "database, and the oldest waiter gets a freed lock "
                 "(src/backend/sqlite/README.md)",
    },
}

SERVER_NOTES = {
    "mysql": "one private MariaDB started by the test harness (`build-bench/bin/store mariadb`: "
             "its own data dir in a temp dir; `innodb_flush_log_at_trx_commit=2`, no binary log: "
             "a commit is not flushed to disk, for every program alike; "
             "tests/support/server_mariadb.c)",
    "postgres": "one private PostgreSQL started by the test harness (`build-bench/bin/store "
                "postgres`: `initdb` into a temp dir; `fsync=off`, `synchronous_commit=off`, "
                "`full_page_writes=off`: a commit is not flushed to disk, for every program "
                "alike; tests/support/server_postgres.c)",
    "sqlite": "one database file in a temp dir made by the test harness (`build-bench/bin/store "
              "sqlite`); no server",
}


def report(a, store, results, med, env, h):
    """The store's section of BENCHMARKS.md. h: compare.py's helpers
    (describe, num, best_peer)."""
    title = TITLES[store]
    machine, vers = h.describe(env, store)
    lines = [f"## {title}\n"]
    smoke = a.rounds < 2 or a.seconds < 2
    if smoke:
        lines.append(f"**Smoke run** ({a.rounds} round of {a.seconds} s): it shows that the "
                     "tooling works, not how fast anything is. Run the reproduce line below "
                     "for numbers.\n")
    lines.append(f"Measured {env['date']} on {machine} (load average {env.get('load', '?')} at "
                 f"the start), {SERVER_NOTES[store]}; {a.rounds} interleaved "
                 f"round{'s' if a.rounds != 1 else ''} of "
                 f"{a.seconds} s per program; the numbers are **medians** (each run's own figure "
                 "in the last column). One cycle = acquire + release. This machine is shared "
                 "and was loaded by other work during the run: compare the ratios, which come "
                 "from the same run, not absolute numbers across runs or sections.\n")
    lines.append(f"Versions: {vers}.\n")
    lines.append(f"Reproduce: `{a.command}` (builds dlock, the harness's `store` and the peer "
                 "programs in bench/peers/sql, starts its own server, rewrites this section and "
                 f"bench/results-{store}.png; bench/README.md lists what it needs).\n")
    modes = ", ".join(f"`{lbl}`" + (f" (`?{opt}`)" if opt else " (the default)")
                      for lbl, opt in MODES[store])
    lines.append(f"dlock's modes, each measured: {modes}. Workloads: **seq** one worker, "
                 f"lock+unlock of its own lock; **par** {a.threads} workers, each its own lock "
                 "(threads sharing one client for dlock; a pool of as many connections for the "
                 f"node peers; a connection per thread for the floors and ShedLock); **hot** "
                 f"{a.procs} processes on one lock, one worker each (the others: {a.procs} "
                 "processes started at once by bench/peers/multi.sh, whose windows overlap the "
                 "others' start-up). *share* = slowest process / fastest." +
                 ("" if store == "sqlite" else
                  " *conns*: the server's count of client connections at its peak during the "
                  "run (" + ("`Threads_connected`" if store == "mysql" else
                             "`pg_stat_activity` client backends") +
                  ", sampled every 0.1 s, less the sampler's own); *conns / held lock* divides "
                  f"it by the locks the workload holds at once ({a.threads} in par, 1 in seq "
                  "and hot).") +
                 (COUNTER_NOTES.get(store, "")
                  if any(m.get("requests_per_cycle") is not None for m in med.values())
                  else "") + "\n")
    lines.append("How each program waits while the lock is held:\n")
    lines.append("| lib | waiting |")
    lines.append("|---|---|")
    for label in sorted({label for (_, label) in med}, key=lambda x: (not x.startswith("dlock"),
                                                                      x)):
        lines.append(f"| {label} | {WAITS[store].get(label, '-')} |")
    lines.append("")
    table(lines, med, a, store, h.num)
    if store == "sqlite":
        lines.append("No peer is measured for SQLite: no lock library of the kind the other "
                     "stores have is packaged for it here, and it has no server functions to "
                     "take a floor of.\n")
    else:
        lines.append("### Ratios (same run)\n")
        lines.append("Medians against medians. *dlock / floor*: against the bare server "
                     "functions of the same server (the goal in seq: at least 0.9x for a session "
                     "mode); *dlock / best peer*: against the fastest peer of the workload (the "
                     "goal in par and hot: at least 1.5x); *each round* divides each round's "
                     "dlock run by that round's run of the best peer.\n")
        lines.append("| workload | dlock mode | dlock / floor | dlock / best peer | best peer | "
                     "each round |")
        lines.append("|---|---|---:|---:|---|---|")
        labels = [lbl for lbl, _ in MODES[store]]
        if a.candidate:
            labels += [lbl.replace("dlock", "dlock-candidate") for lbl, _ in MODES[store]]
        for wl in ("seq", "par", "hot"):
            for lbl in labels:
                d = med.get((wl, lbl), {}).get("cycles_per_s")
                if d is None:
                    continue
                f = med.get((wl, FLOORS[store]), {}).get("cycles_per_s")
                best = h.best_peer(med, wl)
                pairs = zip(results.get((wl, lbl), []), results.get((wl, best[1]), []))
                each = " ".join(f"{x['cycles_per_s'] / y['cycles_per_s']:.2f}" if x and y and
                                y.get("cycles_per_s") else "-" for x, y in pairs)
                lines.append(f"| {wl} | {lbl} | {d / f if f else 0:.2f}x | "
                             f"{d / best[0] if best[0] else 0:.2f}x | {best[1]} | {each} |")
        lines.append("")
    lines.append(f"![{title}: throughput and p99 per workload](bench/results-{store}.png)\n")
    return "\n".join(lines)


COUNTER_COLUMNS = {"mysql": " statements / cycle | writes / cycle |",
                   "postgres": " transactions / cycle | rows written / cycle |"}
COUNTER_NOTES = {
    "mysql": " *statements / cycle*, *writes / cycle*: MariaDB's `Questions` (the statements "
             "clients sent) and `Com_insert` + `Com_update` + `Com_delete` + `Com_replace` over "
             "the run, divided by the cycles it reported.",
    "postgres": " *transactions / cycle*, *rows written / cycle*: `pg_stat_database`'s "
                "`xact_commit` + `xact_rollback` (an autocommitted statement is a transaction) "
                "and `tup_inserted` + `tup_updated` + `tup_deleted` over the run, read once the "
                "program's backends have exited, divided by the cycles it reported.",
}


def table(lines, med, a, store, num):
    statements = any(m.get("requests_per_cycle") is not None for m in med.values())
    head = "| workload | lib | cycles/s | p50 µs | p99 µs | share |"
    rule = "|---|---|---:|---:|---:|---:|"
    if statements:
        head += COUNTER_COLUMNS[store]
        rule += "---:|---:|"
    conns = store != "sqlite"
    if conns:
        head += " conns | conns / held lock |"
        rule += "---:|---:|"
    lines.append(head + " runs (cycles/s) |")
    lines.append(rule + "---|")
    for wl in ("seq", "par", "hot"):
        held = a.threads if wl == "par" else 1
        for (w, label), m in sorted(med.items(), key=lambda kv: -(kv[1]["cycles_per_s"] or 0)):
            if w != wl:
                continue
            share = (f"{m['share']:.2f}" if m.get("share") else
                     f"{m['min_proc'] / m['max_proc']:.2f}" if m.get("min_proc") and
                     m.get("max_proc") else "")
            row = (f"| {wl} | {label} | {m['cycles_per_s'] or 0:.0f} | {num(m['p50_us'])} | "
                   f"{num(m['p99_us'])} | {share} |")
            if statements:
                row += (f" {num(m.get('requests_per_cycle'), '{:.1f}')} | "
                        f"{num(m.get('writes_per_cycle'), '{:.1f}')} |")
            if conns:
                c = m.get("conns_peak")
                row += f" {num(c)} | {num(c / held if c is not None else None, '{:.2f}')} |"
            lines.append(row + f" {m['runs']} |")
    lines.append("")


def median_conns(rows):
    vals = [r["conns_peak"] for r in rows if r and r.get("conns_peak") is not None]
    return statistics.median(vals) if vals else None
