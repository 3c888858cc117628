#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Side-by-side lock benchmark: dlock against the peers of each store.

For each store asked for (--store redis|zookeeper|etcd|all), starts one
private server of it on a free loopback port, runs dlock and every peer
program of that store interleaved for several rounds, takes medians, and
writes that store's section of BENCHMARKS.md (table, ratios, the date,
machine and versions, how each program waits, the command) and its chart
(bench/results.png for Redis, bench/results-<store>.png for the others).
The other stores' sections are kept as they are, so each store can be
measured on its own. Called by bench/compare.sh, which builds everything
first; see there and bench/README.md for the options and what a run needs.

Redis is measured against the bare-hiredis floor (bench/peers/limit.c) and
the node and Python peers; ZooKeeper against Curator (InterProcessMutex,
InterProcessSemaphoreMutex) and kazoo (bench/peers/zk); etcd against npm
etcd3 and python-etcd3 (bench/peers/etcd). For ZooKeeper and etcd the
server's own counters (mntr, /metrics) are read around every run, which
gives each program's requests per cycle, and around `dlock bench --workload
herd`, which gives the cost of a hand-over as waiters grow.

The measurements and the environment are also saved as JSON
(build-bench/results-<store>.json); --from FILE writes that store's section
again from such a file without running anything.
"""
import argparse
import base64
import concurrent.futures
import datetime
import glob
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from stores import sql  # noqa: E402  (the SQL stores: bench/stores/sql.py)

STORES = ("redis", "zookeeper", "etcd") + sql.STORES
TITLES = dict({"redis": "Redis", "zookeeper": "ZooKeeper", "etcd": "etcd"}, **sql.TITLES)
WLS = ("seq", "par", "hot")
CANDIDATE = "dlock-candidate"
PY = "/usr/bin/python3"  # Debian's python: the peers' modules are installed for it


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(check, seconds, what, proc):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited at start (status {proc.returncode})")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{what} did not answer within {seconds} s")


class Server:
    """A throwaway server in a temp dir, stopped by its pid."""

    name = "server"

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def flush(self):
        """Clears what one program left, before the next one runs."""

    def counters(self):
        """The server's request counters (requests, writes, notices), or None."""
        return None

    def run(self, cmd, cwd, run):
        """One program's run: run(cmd, cwd) (a server may watch it meanwhile)."""
        return run(cmd, cwd=cwd)


class Redis(Server):
    """A throwaway redis-server on a free loopback port (under callgrind when
    `wrap` says so: Server cost below)."""

    name = "redis"

    def __init__(self, wrap=()):
        self.dir = tempfile.mkdtemp(prefix="dlock-bench-")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            list(wrap) +
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: self.cli("PING") == "PONG", 60 if wrap else 10, "redis-server",
                   self.proc)

    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.port), *args],
                           capture_output=True, text=True)
        return r.stdout.strip()

    def flush(self):
        self.cli("FLUSHALL")


class ZooKeeper(Server):
    """A throwaway standalone ZooKeeper (Debian's jars, started with java).

    forceSync=no: no fsync per write (like redis-server --save ''), so the
    clients, not a shared disk, are what is measured. The container reaper
    is held off (znode.container.checkIntervalMs one day): Curator creates
    lock paths as containers, and kazoo, which made sure of a path once,
    fails with NoNode when the reaper removes a container it is about to
    use; in one run, every program's paths stay."""

    name = "zookeeper"
    CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-bench-zk-")
        self.port = free_port()
        self.hostport = f"127.0.0.1:{self.port}"
        self.url = f"zk://{self.hostport}/bench"
        with open(os.path.join(self.dir, "zoo.cfg"), "w") as f:
            f.write(f"tickTime=2000\ndataDir={self.dir}/data\nclientPort={self.port}\n"
                    "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                    "4lw.commands.whitelist=ruok,srvr,mntr\nforceSync=no\nmaxClientCnxns=0\n")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.jmx.log4j.disable=true",
             "-Dznode.container.checkIntervalMs=86400000",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", self.CLASSPATH,
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", f"{self.dir}/zoo.cfg"],
            stdout=open(os.path.join(self.dir, "zk.log"), "w"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        wait_until(lambda: "Mode: " in self.four("srvr"), 60, "zookeeper", self.proc)

    def four(self, word):
        """The answer to a four-letter command."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(word.encode())
            out = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        return out.decode(errors="replace")

    def mntr(self):
        out = {}
        for line in self.four("mntr").splitlines():
            k, _, v = line.partition("\t")
            out[k] = v
        return out

    def version(self):
        v = self.mntr().get("zk_version", "")
        return v.split("-")[0] if v else None

    def counters(self):
        """Requests on paths under /bench (the namespace counters: pings and
        Curator's warm-up on /bench-warm are left out), of which writes, and
        watchers triggered (any path)."""
        m = self.mntr()

        def n(k):
            try:
                return float(m.get(k, 0))
            except ValueError:
                return 0.0
        writes = n("zk_cnt_bench_write_per_namespace")
        return {"requests": n("zk_cnt_bench_read_per_namespace") + writes, "writes": writes,
                "notices": sum(n(f"zk_sum_node_{k}_watch_count")
                               for k in ("deleted", "changed", "children", "created"))}


class Etcd(Server):
    """A throwaway single-member etcd 3.4, data dir in the temp dir."""

    name = "etcd"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-bench-etcd-")
        self.port, peer = free_port(), free_port()
        self.hostport = f"127.0.0.1:{self.port}"
        self.url = f"etcd://{self.hostport}"
        c, p = f"http://{self.hostport}", f"http://127.0.0.1:{peer}"
        env = dict(os.environ)
        machine = platform.machine()
        if machine not in ("x86_64", "ppc64le"):  # etcd 3.4 asks for it elsewhere
            env["ETCD_UNSUPPORTED_ARCH"] = {"aarch64": "arm64", "i686": "386"}.get(
                machine, "arm" if machine.startswith("arm") else machine)
        self.proc = subprocess.Popen(
            ["etcd", "--name", "n1", "--data-dir", f"{self.dir}/data",
             "--listen-client-urls", c, "--advertise-client-urls", c,
             "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", f"n1={p}", "--initial-cluster-state", "new",
             "--initial-cluster-token", f"t{self.port}",
             "--quota-backend-bytes", str(256 * 1024 * 1024), "--logger", "zap",
             "--log-level", "warn"],
            stdout=open(os.path.join(self.dir, "etcd.log"), "w"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env)
        wait_until(lambda: b'"health":"true"' in self.get("/health"), 20, "etcd", self.proc)

    def get(self, path):
        with urllib.request.urlopen(f"http://{self.hostport}{path}", timeout=10) as r:
            return r.read()

    def post(self, path, body):
        req = urllib.request.Request(f"http://{self.hostport}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def version(self):
        try:
            return json.loads(self.get("/version"))["etcdserver"]
        except (OSError, ValueError, KeyError):
            return None

    def flush(self):
        """Revokes every lease and deletes every key: the python peer leaves
        a 30 s lease behind per acquisition, whose expiry would otherwise
        load the server while the next program runs."""
        try:
            leases = self.post("/v3/lease/leases", {}).get("leases") or []
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda l: self.revoke(l["ID"]), leases))
            zero = base64.b64encode(b"\0").decode()
            self.post("/v3/kv/deleterange", {"key": zero, "range_end": zero})
        except OSError as e:
            print(f"  etcd flush: {e}", file=sys.stderr)

    def revoke(self, lease):
        try:
            self.post("/v3/lease/revoke", {"ID": lease})
        except OSError:
            pass  # gone already

    def metrics(self):
        out = {}
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith("#") or " " not in line:
                continue
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out

    def counters(self):
        """Unary requests (the JSON gateway's calls and the gRPC peers'),
        raft proposals committed (writes, lease expiries included), and
        events sent to watchers."""
        m = self.metrics()
        return {"requests": sum(v for k, v in m.items()
                                if k.startswith("etcd_server_client_requests_total{")
                                and 'type="unary"' in k),
                "writes": m.get("etcd_server_proposals_committed_total", 0.0),
                "notices": m.get("etcd_debugging_mvcc_events_total", 0.0)}


SERVERS = {"redis": Redis, "zookeeper": ZooKeeper, "etcd": Etcd}


def run_json(cmd, cwd=None, timeout=180):
    """Runs cmd, returns the last JSON line it printed (or None)."""
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("  timeout:", " ".join(cmd), file=sys.stderr)
        return None
    for line in reversed(r.stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    print("  no result from:", " ".join(cmd), r.stderr.strip()[-300:], file=sys.stderr)
    return None


# How each program waits while the lock is held: the hot workload compares
# dlock's server-side queue with the peers' waiting at their defaults.
WAITS = {
    "redis": {
        "dlock": "no polling: queues on the server (FIFO) and is woken by one PUBLISH to its "
                 "client's channel when the lock is handed to it; a heartbeat every 2 s "
                 "(waiter_lease 6 s) keeps its place",
        "hiredis-floor": "no pause: sends SET NX again at once until it succeeds (spins); one "
                         "connection per thread",
        "node redlock": "retries after 0-400 ms (retryDelay 200 ms +- retryJitter 200 ms, "
                        "retryCount -1: forever; set in node_bench.js; the library's defaults "
                        "are 200 +- 100 ms, 10 retries)",
        "node semaphore": "Mutex tries again every 10 ms (retryInterval, the library's default; "
                          "acquireTimeout 60 s set in node_bench.js)",
        "redis-py": "Lock.acquire polls every 100 ms (sleep=0.1, the library's default)",
    },
    "zookeeper": {
        "dlock": "no polling: an EPHEMERAL_SEQUENTIAL node `_c_<uuid>-lock-<seq>` under the lock's "
                 "path (Curator's layout); a waiter watches only the node just ahead of it, so a "
                 "release wakes one waiter, which lists the children again",
        "curator": "InterProcessMutex: the same layout and the same wait (a getData watch on the "
                   "node just ahead, then list again): one waiter woken per release",
        "curator-semaphore": "InterProcessSemaphoreMutex: waiters queue on an internal "
                             "InterProcessMutex (`locks/`, predecessor watch); the first of them "
                             "creates a `leases/` node and watches the children of `leases/` "
                             "until it is the only one; about twice the round trips of a mutex",
        "kazoo": "Lock: an EPHEMERAL_SEQUENTIAL `<uuid>__lock__<seq>`; a waiter watches the node "
                 "just ahead of it (get with a watch), then lists again: one waiter per release",
        "zk-floor": "never waits (seq and par only, each thread its own lock): the bare requests "
                    "of an uncontended lock on one session, synchronous libzookeeper_mt calls "
                    "(create EPHEMERAL_SEQUENTIAL, list, delete; bench/peers/zk/floor.c)",
    },
    "etcd": {
        "dlock": "no polling: concurrency.Mutex layout (a key NAME/<lease hex> per contender, "
                 "one session lease per client); a waiter watches only the key just ahead of it "
                 "(by create revision) for its DELETE, on the client's one watch stream: a "
                 "release wakes one waiter",
        "etcd-floor": "never waits (seq and par only, each thread its own lock): the bare "
                      "requests of an uncontended lock over the JSON gateway, libcurl, one "
                      "connection per thread (a Txn put-if-absent + read, a delete; "
                      "bench/peers/etcd/floor.c)",
        "npm-etcd3": "try-only: Lock.acquire fails on a held lock (each attempt a lease grant, "
                     "a Txn and a revoke), so node_bench.js retries after a random 0-10 ms "
                     "pause: polling",
        "python-etcd3": "each attempt is the recipe's acquire(timeout=0) (a new 30 s lease + a "
                        "Txn); a busy lock is waited for with watch_once on the lock's key (at "
                        "most 1 s), then tried again: every waiter watches the same key, so each "
                        "release wakes all of them (the recipe's blocking acquire crashes on "
                        "Debian 12: bench/peers/etcd/README.md)",
    },
}
WAITS.update(sql.WAITS)

NODE_PACKAGES = {"redis": ("redlock", "redis-semaphore", "ioredis"),
                 "etcd": ("etcd3", "@grpc/grpc-js"), "mysql": ("mysql2",),
                 "postgres": ("pg", "advisory-lock")}


def peers_dir(a, store):
    if store in sql.STORES:
        return sql.peers_dir(a)
    return {"redis": a.peers, "zookeeper": os.path.join(a.peers, "zk"),
            "etcd": os.path.join(a.peers, "etcd")}[store]


def programs(a, store, srv):
    """(workload, label, command, cwd) for every comparable run of store."""
    if store in sql.STORES:
        return sql.programs(a, store, srv, PY)
    s = str(a.seconds)
    dlock = [a.dlock, "bench", "-u", srv.url, "--seconds", s]
    multi = ["bash", os.path.join(a.peers, "multi.sh"), str(a.procs)]
    out = [
        ("seq", "dlock", dlock + ["--workload", "seq"], None),
        ("par", "dlock", dlock + ["--workload", "par", "--threads", str(a.threads)], None),
        ("hot", "dlock", dlock + ["--workload", "hot", "--procs", str(a.procs)], None),
    ]
    if a.candidate:
        # another build of dlock (a change being tried), in the same rounds
        cand = [a.candidate] + dlock[1:] + ["--lib", CANDIDATE]
        out += [
            ("seq", CANDIDATE, cand + ["--workload", "seq"], None),
            ("par", CANDIDATE, cand + ["--workload", "par", "--threads", str(a.threads)], None),
            ("hot", CANDIDATE, cand + ["--workload", "hot", "--procs", str(a.procs)], None),
        ]
    d = peers_dir(a, store)
    if store == "redis":
        port = str(srv.port)
        node = ["node", "node_bench.js", port]
        py = [PY, "py_bench.py", port]
        out = [
            ("seq", "hiredis-floor", [a.limit, port, "1", s], None), out[0],
            ("par", "hiredis-floor", [a.limit, port, str(a.threads), s], None), out[1],
            ("hot", "hiredis-floor", [a.limit, port, str(a.procs), s, "hot"], None), out[2],
        ]
        if not a.no_node:
            for lib in ("redlock", "semaphore"):
                out += [
                    ("seq", f"node {lib}", node + ["seq", lib, "1", s], d),
                    ("par", f"node {lib}", node + ["par", lib, str(a.threads), s], d),
                    ("hot", f"node {lib}", multi + node + ["hot", lib, "1", s], d),
                ]
        out += [
            ("seq", "redis-py", py + ["seq", "1", s], d),
            ("par", "redis-py", py + ["par", str(a.threads), s], d),
            ("hot", "redis-py", multi + py + ["hot", "1", s], d),
        ]
    elif store == "zookeeper":
        hp = srv.hostport
        if a.zk_floor:
            out = [
                ("seq", FLOORS[store], [a.zk_floor, hp, "1", s], None), out[0],
                ("par", FLOORS[store], [a.zk_floor, hp, str(a.threads), s], None), out[1], out[2],
            ] + out[3:]
        if not a.no_java:
            for lib in ("curator", "curator-semaphore"):
                run = ["bash", "run.sh", hp]
                out += [
                    ("seq", lib, run + ["seq", "1", s, lib], d),
                    ("par", lib, run + ["par", str(a.threads), s, lib], d),
                    ("hot", lib, multi + run + ["hot", "1", s, lib], d),
                ]
        kz = [PY, "kazoo_bench.py", hp]
        out += [
            ("seq", "kazoo", kz + ["seq", "1", s], d),
            ("par", "kazoo", kz + ["par", str(a.threads), s], d),
            ("hot", "kazoo", multi + kz + ["hot", "1", s], d),
        ]
    else:
        hp = srv.hostport
        if a.etcd_floor:
            out = [
                ("seq", FLOORS[store], [a.etcd_floor, hp, "1", s], None), out[0],
                ("par", FLOORS[store], [a.etcd_floor, hp, str(a.threads), s], None), out[1], out[2],
            ] + out[3:]
        if not a.no_node:
            node = ["node", "node_bench.js", hp]
            out += [
                ("seq", "npm-etcd3", node + ["seq", "1", s], d),
                ("par", "npm-etcd3", node + ["par", str(a.threads), s], d),
                ("hot", "npm-etcd3", multi + node + ["hot", "1", s], d),
            ]
        py = [PY, "py_bench.py", hp]
        out += [
            ("seq", "python-etcd3", py + ["seq", "1", s], d),
            ("par", "python-etcd3", py + ["par", str(a.threads), s], d),
            ("hot", "python-etcd3", multi + py + ["hot", "1", s], d),
        ]
    return out


KINDS = ("mutex", "fair", "read", "write", "semaphore", "multi")


def kind_programs(a, srv):
    """(row, workload, command) for the Redis lock-family table and the
    client option comparisons: dlock only (the peers have no such kinds)."""
    url = srv.url
    dlock = [a.dlock, "bench", "--seconds", str(a.seconds)]
    out = []
    for kind in KINDS:
        k = ["-u", url, "--kind", kind]
        out += [(kind, "seq", dlock + k + ["--workload", "seq"]),
                (kind, "hot", dlock + k + ["--workload", "hot", "--procs", str(a.procs)])]
    # many threads of a few processes on one lock: the in-process queue on and off
    for lq in ("off", "on"):
        out.append((f"local_queue={lq}", "hot", dlock + [
            "-u", f"{url}?local_queue={lq}", "--workload", "hot", "--procs", "2",
            "--threads", "16"]))
    for notify in ("pubsub", "stream"):
        out.append((f"notify={notify}", "hot", dlock + [
            "-u", f"{url}?notify={notify}", "--workload", "hot", "--procs", str(a.procs)]))
    return out


def median_of(rows, key):
    vals = [r[key] for r in rows if r is not None and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def counted(srv, cmd, seconds, cwd=None):
    """Runs cmd (lasting about `seconds`); adds the server's counters over
    the whole run, in all and per cycle."""
    before = srv.counters()
    r = srv.run(cmd, cwd, run_json)
    after = srv.counters()
    if r is not None and before is not None and after is not None:
        cycles = (r.get("cycles_per_s") or 0) * seconds
        r["server"] = {k: after[k] - before[k] for k in before}
        if cycles > 0:
            for k in before:
                r[f"{k}_per_cycle"] = round((after[k] - before[k]) / cycles, 2)
    return r


def herd_counted(srv, cmd):
    """`dlock bench --workload herd` for 2 s and for 5 s, with the server's
    counters around each: the differences (counters, hand-overs) leave out
    what both runs spent joining the queue and warming up, so what is left
    is the cost of the hand-overs alone. The 5 s run's line, with the
    counters per hand-over added."""
    runs = []
    for seconds in ("2", "5"):
        before = srv.counters()
        r = run_json(cmd + ["--seconds", seconds])
        after = srv.counters()
        if r is None or before is None or after is None or not r.get("handoffs"):
            return r
        runs.append((r, {k: after[k] - before[k] for k in before}))
        srv.flush()
    (short, c0), (long_, c1) = runs
    handoffs = long_["handoffs"] - short["handoffs"]
    if handoffs > 0:
        for k in c0:
            long_[f"{k}_per_cycle"] = round((c1[k] - c0[k]) / handoffs, 2)
    return long_


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default="all", choices=STORES + ("all",),
                    help="which store's peers to measure dlock against (default all)")
    ap.add_argument("--dlock", help="the dlock command to measure")
    ap.add_argument("--limit", help="the built bench/peers/limit.c (Redis)")
    ap.add_argument("--zk-floor", help="the built bench/peers/zk/floor.c (ZooKeeper)")
    ap.add_argument("--etcd-floor", help="the built bench/peers/etcd/floor.c (etcd)")
    ap.add_argument("--sql-floor-mysql", help="the built bench/peers/sql/floor_mysql.c")
    ap.add_argument("--sql-floor-pg", help="the built bench/peers/sql/floor_pg.c")
    ap.add_argument("--store-bin", help="the test harness's `store` program (build-bench/bin/"
                    "store), which starts the SQL stores' servers")
    ap.add_argument("--peers", default=os.path.join(HERE, "peers"),
                    help="bench/peers (node_modules installed by npm ci here and in etcd/)")
    ap.add_argument("--no-node", action="store_true", help="skip the node peers")
    ap.add_argument("--no-java", action="store_true", help="skip the Curator peers")
    ap.add_argument("--candidate", help="another dlock build to run alongside (a change being "
                    "tried): rows labelled dlock-candidate, left out of the best peer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--command", default="bench/compare.sh")
    ap.add_argument("--save-dir", default=os.path.join(ROOT, "build-bench"),
                    help="where to keep the measurements and environment (results-STORE.json)")
    ap.add_argument("--from", dest="from_file",
                    help="write a store's section from a saved results file; run nothing")
    ap.add_argument("--server-cost-only", action="store_true",
                    help="only count the Redis server's instructions per cycle of each program "
                    "(callgrind) and print them as JSON; write nothing")
    a = ap.parse_args()
    if a.server_cost_only:
        if not a.dlock or not a.limit:
            ap.error("--server-cost-only needs --dlock and --limit")
        print(json.dumps(server_cost(a)))
        return

    if a.from_file:
        with open(a.from_file) as f:
            saved = json.load(f)
        store = saved.get("store", "redis")
        for key in ("rounds", "seconds", "threads", "procs", "command"):
            setattr(a, key, saved["args"][key])
        results = {(r["wl"], r["label"]): r["runs"] for r in saved["results"]}
        extra = saved["extra"]
        extra["kinds"] = {(k["row"], k["wl"]): k["runs"] for k in extra.get("kinds", [])}
        write_report(a, store, results, extra, saved["env"])
        return
    if not a.dlock:
        ap.error("--dlock is required (unless --from)")
    stores = STORES if a.store == "all" else (a.store,)
    if "redis" in stores and not a.limit:
        ap.error("--limit is required to measure Redis")
    if set(stores) & set(sql.STORES) and not a.store_bin:
        ap.error("--store-bin is required to measure the SQL stores")
    for store in stores:
        measure(a, store)


def measure(a, store):
    print(f"== {store}", file=sys.stderr)
    srv = sql.SERVERS[store](store, a.store_bin) if store in sql.STORES else SERVERS[store]()
    results = {}  # (wl, label) -> [json...]
    kinds = {}  # (row, wl) -> [json...]
    extra = {}
    try:
        env = environment(a, store, srv)
        print("environment: " + json.dumps(env), file=sys.stderr)
        plan = programs(a, store, srv)
        kind_plan = kind_programs(a, srv) if store == "redis" else []
        if store != "redis":
            # A fresh JVM server runs its first seconds slowly, and its JIT
            # would favour whoever runs later: warm it (and etcd) up first.
            for wl in ("seq", "par"):
                run_json([a.dlock, "bench", "-u", srv.url, "--seconds", "2", "--workload", wl])
            srv.flush()
        for rnd in range(a.rounds):
            print(f"round {rnd + 1}/{a.rounds}", file=sys.stderr)
            for wl, label, cmd, cwd in plan:
                t0 = time.monotonic()
                r = (counted(srv, cmd, a.seconds, cwd) if store != "redis" else
                     run_json(cmd, cwd=cwd))
                print(f"  {wl:4} {label:18} {r} ({time.monotonic() - t0:.1f} s)", file=sys.stderr)
                results.setdefault((wl, label), []).append(r)
                srv.flush()
            for row, wl, cmd in kind_plan:
                r = run_json(cmd)
                print(f"  {wl:4} {row:18} {r}", file=sys.stderr)
                kinds.setdefault((row, wl), []).append(r)
                srv.flush()
        extra["kinds"] = kinds
        base = [a.dlock, "bench", "-u", srv.url]
        # the SQL stores: no hand-over counters to read around herd runs
        for w in (1, 16, 256) if store not in sql.STORES else ():
            cmd = base + ["--workload", "herd", "--waiters", str(w)]
            r = run_json(cmd + ["--seconds", "2"]) if store == "redis" else herd_counted(srv, cmd)
            print(f"  herd {w:3} {r}", file=sys.stderr)
            extra[f"herd {w}"] = r
            srv.flush()
        if store == "redis":
            for k in (1000, 10000):
                r = run_json(base + ["--workload", "renew", "--locks", str(k), "--seconds", "4"])
                extra[f"renew {k}"] = r
                srv.flush()
            extra["memory"] = run_json(base + ["--workload", "memory", "--locks", "10000"])
            extra["instructions"] = instructions(a, srv)
    finally:
        srv.stop()
    if store == "redis":
        extra["server_cost"] = server_cost(a)

    save(a, store, results, extra, env)
    write_report(a, store, results, extra, env)


def save(a, store, results, extra, env):
    """Keeps the measurements and the environment, for --from."""
    data = {
        "store": store,
        "args": {k: getattr(a, k) for k in ("rounds", "seconds", "threads", "procs", "command")},
        "env": env,
        "results": [{"wl": wl, "label": label, "runs": runs}
                    for (wl, label), runs in results.items()],
        "extra": dict(extra, kinds=[{"row": row, "wl": wl, "runs": runs}
                                    for (row, wl), runs in extra.get("kinds", {}).items()]),
    }
    path = os.path.join(a.save_dir, f"results-{store}.json")
    os.makedirs(a.save_dir, exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    print(f"measurements saved in {path}", file=sys.stderr)


def callgrind(cmd, seconds):
    """(instructions, cycles) of one run of cmd (lasting `seconds`) under
    callgrind."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/out"] + cmd,
                           capture_output=True, text=True, timeout=300)
    total = None
    for line in r.stderr.splitlines():
        if "Collected :" in line:
            total = int(line.split(":")[-1].strip())
    res = None
    for line in r.stdout.strip().splitlines():
        try:
            res = json.loads(line)
        except ValueError:
            pass
    if total is None or res is None:
        return None
    return total, res["cycles_per_s"] * seconds


def instructions(a, srv):
    """Client instructions per lock+unlock cycle, one thread, counted by
    callgrind: the difference between a 1 s and a 3 s run, so start-up
    cancels out. Stable on a noisy machine, unlike times."""
    out = {}
    runs = {
        "dlock": lambda s: [a.dlock, "bench", "-u", srv.url, "--seconds", str(s)],
        "hiredis-floor": lambda s: [a.limit, str(srv.port), "1", str(s)],
    }
    for label, cmd in runs.items():
        short, long_ = callgrind(cmd(1), 1), callgrind(cmd(3), 3)
        if short and long_ and long_[1] > short[1]:
            out[label] = (long_[0] - short[0]) / (long_[1] - short[1])
    return out


def server_cost(a):
    """Server instructions per lock+unlock cycle of each program, one
    worker (seq), counted by callgrind on a redis-server of its own: what
    bounds every client in par once the single-threaded server saturates,
    and, unlike times, stable on a noisy machine. Counters are zeroed before
    and dumped after each program's run (callgrind_control); the cycles are
    the DEL commands the server ran (every program's release deletes its
    key once), so start-up and INFO are in, a few hundred instructions per
    cycle at most. Returns {label: {"instructions": n, "commands": m}}."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {}
    out = {}
    with tempfile.TemporaryDirectory() as d:
        srv = Redis(wrap=["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg"])
        try:
            port, s = str(srv.port), "3"
            peers = os.path.join(a.peers)
            runs = [
                ("dlock", [a.dlock, "bench", "-u", srv.url, "--seconds", s], None),
                ("hiredis-floor", [a.limit, port, "1", s], None),
            ]
            if not a.no_node:
                runs += [(f"node {lib}", ["node", "node_bench.js", port, "seq", lib, "1", s], peers)
                         for lib in ("semaphore", "redlock")]
            runs.append(("redis-py", [PY, "py_bench.py", port, "seq", "1", s], peers))
            for label, cmd, cwd in runs:
                # a first run loads the program's scripts; the second is measured
                for measured in (False, True):
                    srv.flush()
                    srv.cli("CONFIG", "RESETSTAT")
                    subprocess.run(["callgrind_control", "-z", str(srv.proc.pid)],
                                   capture_output=True)
                    run_json(cmd, cwd=cwd)
                stats = srv.cli("INFO", "commandstats")
                for f in glob.glob(f"{d}/cg*"):
                    os.unlink(f)
                subprocess.run(["callgrind_control", "-d", str(srv.proc.pid)], capture_output=True)
                total = 0
                for f in glob.glob(f"{d}/cg*"):
                    with open(f) as fh:
                        for line in fh:
                            if line.startswith(("summary:", "totals:")):
                                total = max(total, int(line.split()[1]))
                calls = {m.group(1): int(m.group(2))
                         for m in re.finditer(r"cmdstat_([^:]+):calls=(\d+)", stats)}
                cycles = calls.get("del", 0)
                commands = sum(v for k, v in calls.items() if k not in ("info", "config|resetstat"))
                if total and cycles:
                    out[label] = {"instructions": round(total / cycles),
                                  "commands": round(commands / cycles, 1)}
                print(f"  server cost {label:18} {out.get(label)}", file=sys.stderr)
        finally:
            srv.stop()
    return out


def command_output(cmd, cwd=None):
    """The first line cmd prints, or None if it cannot run."""
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (r.stdout or r.stderr).strip().splitlines()
    return lines[0].strip() if r.returncode == 0 and lines else None


def deb_version(pkg):
    return command_output(["dpkg-query", "-W", "-f=${Version}", pkg])


def npm_version(d, pkg):
    try:
        with open(os.path.join(d, "node_modules", pkg, "package.json")) as f:
            return json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return None


def environment(a, store, srv):
    """When, on what, and with which versions: printed, saved and put on the
    report and the chart."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    dlock = command_output([a.dlock, "--version"])
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "kernel": f"{platform.system()} {platform.release()}",
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "dlock": dlock.split()[-1] if dlock else None,
        "node": None,
        "npm": {},
    }
    use_node = not a.no_node and store in NODE_PACKAGES
    if use_node:
        env["node"] = command_output(["node", "--version"])
        env["npm"] = {p: npm_version(peers_dir(a, store), p) for p in NODE_PACKAGES[store]}
    if store == "redis":
        redis = command_output(["redis-server", "--version"]) or ""
        env["redis-server"] = next((w[2:] for w in redis.split() if w.startswith("v=")),
                                   redis or None)
        env["redis-py"] = command_output([PY, "-c", "import redis; print(redis.__version__)"])
    elif store == "zookeeper":
        env["zookeeper server"] = srv.version()
        env["libzookeeper-mt"] = deb_version("libzookeeper-mt2")
        env["java"] = command_output(["java", "-version"])
        if not a.no_java:
            env["curator"] = deb_version("libcurator-recipes-java")
        env["kazoo"] = command_output([PY, "-c", "import kazoo.version as v; print(v.__version__)"])
    elif store in sql.STORES:
        env.update(sql.versions(a, store, srv, PY, command_output, deb_version))
    else:
        env["etcd server"] = srv.version()
        env["libcurl"] = deb_version("libcurl4")
        env["python-etcd3"] = command_output([PY, "-c", "import etcd3; print(etcd3.__version__)"])
        env["grpcio (python)"] = command_output([PY, "-c", "import grpc; print(grpc.__version__)"])
    return env


def describe(env, store):
    """(machine, versions) as two lines of text."""
    machine = (f"{env['nproc']} CPUs ({env['cpu']}), {env['kernel']}")
    keys = {"redis": ("redis-server", "redis-py"),
            "zookeeper": ("zookeeper server", "libzookeeper-mt", "curator", "kazoo", "java"),
            "etcd": ("etcd server", "libcurl", "python-etcd3", "grpcio (python)"),
            **sql.VERSION_KEYS}[store]
    versions = [f"dlock {env['dlock']}"] + [f"{k} {env[k]}" for k in keys if env.get(k)]
    if env.get("node"):
        versions.append(f"node {env['node']}")
        versions += [f"{pkg} {v}" for pkg, v in env["npm"].items()]
    return machine, ", ".join(versions)


def medians(results):
    med = {}
    for (wl, label), rows in results.items():
        med[(wl, label)] = {k: median_of(rows, k) for k in
                            ("cycles_per_s", "p50_us", "p99_us", "min_proc", "max_proc", "share",
                             "worst_p99_us", "requests_per_cycle", "writes_per_cycle")}
        if med[(wl, label)]["p99_us"] is None and med[(wl, label)]["worst_p99_us"] is not None:
            # multi.sh reports the worst process's p99 and no p50
            med[(wl, label)]["p99_us"] = med[(wl, label)]["worst_p99_us"]
        med[(wl, label)]["conns_peak"] = sql.median_conns(rows)
        med[(wl, label)]["runs"] = " ".join(
            f"{r['cycles_per_s']:.0f}" if r and r.get("cycles_per_s") is not None else "-"
            for r in rows)
    return med


def share_cell(m):
    if m.get("share"):
        return f"{m['share']:.2f}"
    if m.get("min_proc") and m.get("max_proc"):
        return f"{m['min_proc'] / m['max_proc']:.2f}"
    return ""


def num(v, fmt="{:.0f}"):
    return fmt.format(v) if v is not None else "-"


FLOORS = dict({"redis": "hiredis-floor", "zookeeper": "zk-floor", "etcd": "etcd-floor"},
              **sql.FLOORS)


def best_peer(med, wl, exclude=tuple(FLOORS.values())):
    """The fastest peer of the workload: neither a floor nor a dlock row
    (dlock, its modes on the SQL stores, a candidate)."""
    peers = [(m["cycles_per_s"], label) for (w, label), m in med.items()
             if w == wl and label not in exclude and not label.startswith("dlock")
             and m["cycles_per_s"]]
    return max(peers) if peers else (None, "-")


def write_report(a, store, results, extra, env):
    med = medians(results)
    if store in sql.STORES:
        text = sql.report(a, store, results, med, env, sys.modules[__name__])
    else:
        text = (redis_report if store == "redis" else store_report)(a, store, results, med,
                                                                     extra, env)
    write_section(a.out, store, text)
    machine, versions = describe(env, store)
    chart(chart_path(store), med, f"{TITLES[store]}, {env['date']}: {machine}", versions)
    print(text)
    print(f"\n{env['date']}\n{machine}\n{versions}", file=sys.stderr)


def chart_path(store):
    return os.path.join(HERE, "results.png" if store == "redis" else f"results-{store}.png")


def results_table(lines, med, counters=False):
    head = "| workload | lib | cycles/s | p50 µs | p99 µs | share |"
    rule = "|---|---|---:|---:|---:|---:|"
    if counters:
        head += " requests / cycle | writes / cycle |"
        rule += "---:|---:|"
    lines.append(head + " runs (cycles/s) |")
    lines.append(rule + "---|")
    for wl in WLS:
        for (w, label), m in sorted(med.items(), key=lambda kv: -(kv[1]["cycles_per_s"] or 0)):
            if w != wl:
                continue
            row = (f"| {wl} | {label} | {m['cycles_per_s'] or 0:.0f} | {num(m['p50_us'])} | "
                   f"{num(m['p99_us'])} | {share_cell(m)} |")
            if counters:
                row += (f" {num(m['requests_per_cycle'], '{:.1f}')} | "
                        f"{num(m['writes_per_cycle'], '{:.1f}')} |")
            lines.append(row + f" {m['runs']} |")
    lines.append("")


def waits_table(lines, store, med):
    lines.append("| lib | waiting |")
    lines.append("|---|---|")
    for label in sorted({label for (_, label) in med}, key=lambda x: (x != "dlock", x)):
        lines.append(f"| {label} | {WAITS[store].get(label, WAITS[store]['dlock'])} |")
    lines.append("")


def redis_report(a, store, results, med, extra, env):
    lines = []
    machine, versions = describe(env, store)
    lines.append("## Redis\n")
    lines.append(f"Measured {env['date']} on {machine}, one private redis-server, "
                 f"{a.rounds} interleaved rounds of {a.seconds} s per program; the numbers are "
                 "**medians** (each run's own figure in the last column). One cycle = acquire "
                 "+ release. This machine is shared and noisy: compare the ratios, which come "
                 "from the same run, not absolute numbers across runs.\n")
    lines.append(f"Versions: {versions}.\n")
    lines.append(f"Reproduce: `{a.command}` (builds dlock, the floor and the peer programs in "
                 "bench/peers, starts its own server, rewrites this section and "
                 "bench/results.png; bench/README.md lists what it needs).\n")
    lines.append("Workloads: **seq** one worker, lock+unlock of its own lock; **par** "
                 f"{a.threads} workers, each its own lock (threads sharing one client for dlock "
                 "and redis-py, one event loop for node, 50 connections for the floor); "
                 f"**hot** {a.procs} processes on one lock, one worker each (the floor: "
                 f"{a.procs} threads spinning on SET NX). *share* = slowest process / fastest.\n")
    lines.append("How each program waits while the lock is held (the **hot** rows compare "
                 "dlock's server-side queue with the peers' polling at their defaults):\n")
    waits_table(lines, store, med)
    results_table(lines, med)
    lines.append("### Ratios (same run)\n")
    lines.append("Medians against medians; the last column divides each round's dlock run by "
                 "the floor run just before it, which a noisy neighbour shifts less.\n")
    lines.append("| workload | dlock / floor | dlock / best peer | best peer | dlock / floor, "
                 "each round |")
    lines.append("|---|---:|---:|---|---|")
    for wl in WLS:
        d = med.get((wl, "dlock"), {}).get("cycles_per_s")
        f = med.get((wl, "hiredis-floor"), {}).get("cycles_per_s")
        best = best_peer(med, wl)
        pairs = zip(results.get((wl, "dlock"), []), results.get((wl, "hiredis-floor"), []))
        each = " ".join(f"{x['cycles_per_s'] / y['cycles_per_s']:.2f}" if x and y and
                        y.get("cycles_per_s") else "-" for x, y in pairs)
        lines.append(f"| {wl} | {d / f if d and f else 0:.2f}x | "
                     f"{d / best[0] if d and best[0] else 0:.2f}x | {best[1]} | {each} |")
    lines.append("")
    lines.append("**dlock and the floor in par.** The floor (bench/peers/limit.c) "
                 "gives each of its threads a connection of its own and writes one command at "
                 "a time, waiting for its reply: with 50 threads, 50 connections, and the "
                 "server reads, runs and answers one command per system call. dlock's threads "
                 "share the client's few connections (`pool=2`): while replies are due on a "
                 "connection, the commands other threads issue wait in its buffer and leave "
                 "together in one write when those replies arrive, so the server reads a "
                 "batch of commands per system call and answers them in one write (INFO stats "
                 "`total_reads_processed`: about 0.2 reads per cycle instead of 1). The floor "
                 "bounds a client that sends one command per round trip on each connection, "
                 "not one that batches the commands of many threads; with one thread (seq) "
                 "there is nothing to batch, and the floor is the bound. Batching pays where "
                 "the server's system calls are the limit; where its CPU is (two cores shared "
                 "by the server and every client), dlock's two scripts per cycle cost it "
                 "about ten times what SET NX and DEL do (INFO commandstats, usec_per_call), "
                 "and dlock stays below the floor.\n")
    lines.append("### dlock only\n")
    kind_table(a, lines, extra.get("kinds") or {})
    lines.append("Hand-over cost as waiters grow (Redis commands executed per hand-over, from "
                 "INFO commandstats: scripts and the commands they run):\n")
    lines.append("| waiters | hand-overs/s | commands per hand-over | scripts per hand-over |"
                 " p50 µs | p99 µs |")
    lines.append("|---:|---:|---:|---:|---:|---:|")
    for w in (1, 16, 256):
        r = extra.get(f"herd {w}")
        if r:
            lines.append(f"| {w} | {r['cycles_per_s']} | {r['cmds_per_handoff']} | "
                         f"{r['scripts_per_handoff']} | {r['p50_us']} | {r['p99_us']} |")
    lines.append("")
    lines.append("Renewal of many held locks (lease 3 s, renewed every 1 s, one client):\n")
    lines.append("| locks | script calls per period | locks per call | commands per period "
                 "| client CPU ms per period | lost |")
    lines.append("|---:|---:|---:|---:|---:|---:|")
    for k in (1000, 10000):
        r = extra.get(f"renew {k}")
        if r:
            lines.append(f"| {k} | {r['scripts_per_period']} | {r['locks_per_script']} | "
                         f"{r['cmds_per_period']} | {r['cpu_ms_per_period']} | {r['lost']} |")
    lines.append("")
    m = extra.get("memory")
    if m:
        lines.append(f"Memory, 10,000 held locks: **{m['client_bytes_per_lock']} bytes** per "
                     f"held lock in the client (heap), **{m['redis_bytes_per_lock']} bytes** per "
                     f"lock in Redis (used_memory; MEMORY USAGE of the lock key "
                     f"{m.get('lock_key_bytes') or '-'} B and of its fence counter "
                     f"{m.get('fence_key_bytes') or '-'} B).\n")
    ins = extra.get("instructions") or {}
    if ins:
        lines.append("Client instructions per lock+unlock cycle, one thread (callgrind; the "
                     "difference between a 1 s and a 3 s run, so start-up cancels out): " +
                     ", ".join(f"**{k}** {v:,.0f}" for k, v in ins.items()) + ".\n")
    cost = extra.get("server_cost") or {}
    if cost:
        lines.append("Server instructions per lock+unlock cycle, one worker (callgrind on a "
                     "redis-server of its own, counters zeroed before each program's second "
                     "run; cycles = the DEL commands it ran), and the Redis commands per cycle "
                     "(INFO commandstats: scripts and the commands they run, SET NX, DEL...). "
                     "In par the single-threaded server saturates, so this bounds each "
                     "program's throughput there:\n")
        lines.append("| lib | server instructions per cycle | commands per cycle |")
        lines.append("|---|---:|---:|")
        for label, c in sorted(cost.items(), key=lambda kv: kv[1]["instructions"]):
            lines.append(f"| {label} | {c['instructions']:,} | {c['commands']} |")
        lines.append("")
    lines.append("![Redis: throughput and p99 per workload](bench/results.png)\n")
    return "\n".join(lines)


SERVER_NOTES = {
    "zookeeper": "one private standalone ZooKeeper (Debian's jars, `forceSync=no`: no fsync per "
                 "write, like redis-server with `--save ''`; the container reaper held off so "
                 "that Curator's container paths stay for kazoo; a 2 s dlock seq and par run "
                 "first warms its JIT up and is not counted)",
    "etcd": "one private single-member etcd, data dir in a temp dir on disk (each write is a "
            "WAL fsync, batched by etcd across concurrent requests); every lease is revoked and "
            "every key deleted between programs, so the 30 s leases python-etcd3 leaves behind "
            "do not expire during the next program's run",
}

CLIENT_NOTES = {
    "zookeeper": "threads sharing one client: dlock's client has one session; Curator's "
                 "CuratorFramework and kazoo's KazooClient one each. Curator runs a 1 s warm-up "
                 f"of the same workload on /bench-warm first; dlock 0.2 s on its own lock names",
    "etcd": "threads sharing one client for dlock (libcurl over the v3 JSON gateway, HTTP/1.1) "
            "and python-etcd3 (gRPC), async tasks on one client for npm etcd3 (gRPC)",
}

COUNTER_NOTES = {
    "zookeeper": "*requests / cycle* and *writes / cycle*: ZooKeeper's own counters (`mntr`: "
                 "`zk_cnt_bench_read_per_namespace` + `zk_cnt_bench_write_per_namespace`, the "
                 "requests on paths under /bench; pings and Curator's /bench-warm warm-up are "
                 "not in them) over the run, divided by the cycles it reported; dlock's 0.2 s "
                 "warm-up is, and adds a few per cent",
    "etcd": "*requests / cycle* and *writes / cycle*: etcd's own counters (`/metrics`: "
            "`etcd_server_client_requests_total{type=\"unary\"}`, which counts the gateway's "
            "calls as well as gRPC ones, and `etcd_server_proposals_committed_total`, the raft "
            "writes) over the run, divided by the cycles it reported (dlock's 0.2 s warm-up "
            "adds a few per cent)",
}


def store_report(a, store, results, med, extra, env):
    title = TITLES[store]
    lines = []
    machine, versions = describe(env, store)
    lines.append(f"## {title}\n")
    lines.append(f"Measured {env['date']} on {machine} (load average {env.get('load', '?')} at "
                 f"the start), {SERVER_NOTES[store]}; {a.rounds} interleaved rounds of "
                 f"{a.seconds} s per program; the numbers are **medians** (each run's own figure "
                 "in the last column). One cycle = acquire + release. This machine is shared "
                 "and noisy: compare the ratios, which come from the same run, not absolute "
                 "numbers across runs or sections.\n")
    lines.append(f"Versions: {versions}.\n")
    lines.append(f"Reproduce: `{a.command}` (builds dlock and the peer programs in "
                 f"bench/peers/{'zk' if store == 'zookeeper' else 'etcd'}, starts its own "
                 f"server, rewrites this section and bench/results-{store}.png; bench/README.md "
                 "lists what it needs).\n")
    lines.append(f"Workloads: **seq** one worker, lock+unlock of its own lock; **par** "
                 f"{a.threads} workers, each its own lock ({CLIENT_NOTES[store]}); **hot** "
                 f"{a.procs} processes on one lock, one worker each (the peers: "
                 f"{a.procs} processes started at once by bench/peers/multi.sh, whose {a.seconds} s "
                 "windows overlap the others' start-up). *share* = slowest process / fastest. "
                 f"{COUNTER_NOTES[store]}.\n")
    lines.append("How each program waits while the lock is held (the herd question: how many "
                 "waiters one release wakes):\n")
    waits_table(lines, store, med)
    results_table(lines, med, counters=True)
    lines.append("### Ratios (same run)\n")
    lines.append("Medians against medians; the last column divides each round's dlock run by "
                 "that round's run of the same peer.\n")
    lines.append("| workload | dlock / best peer | best peer | each round | dlock / floor |")
    lines.append("|---|---:|---|---|---:|")
    for lib in ("dlock", CANDIDATE):
        for wl in WLS:
            d = med.get((wl, lib), {}).get("cycles_per_s")
            if lib != "dlock" and d is None:
                continue
            best = best_peer(med, wl)
            pairs = zip(results.get((wl, lib), []), results.get((wl, best[1]), []))
            each = " ".join(f"{x['cycles_per_s'] / y['cycles_per_s']:.2f}" if x and y and
                            y.get("cycles_per_s") else "-" for x, y in pairs)
            name = wl if lib == "dlock" else f"{wl} ({lib})"
            f = med.get((wl, FLOORS[store]), {}).get("cycles_per_s")
            floor = f"{d / f:.2f}x" if d and f else "-"
            lines.append(f"| {name} | {d / best[0] if d and best[0] else 0:.2f}x | {best[1]} | "
                         f"{each} | {floor} |")
    lines.append("")
    lines.append("### Hand-over cost as waiters grow (dlock)\n")
    lines.append("`dlock bench --workload herd`: one holder and W waiters on one lock, over up "
                 "to 8 processes. The server's counters per hand-over, from the difference "
                 "between a 2 s and a 5 s run (so joining the queue and warming up cancel "
                 "out): *requests* and *writes* as above, *watch notifications* = " +
                 ("watchers ZooKeeper triggered (`mntr` `zk_sum_node_*_watch_count`)"
                  if store == "zookeeper" else
                  "events etcd sent to watchers (`etcd_debugging_mvcc_events_total`)") +
                 ". No herd: a release wakes one waiter, so these stay flat as W grows.\n")
    lines.append("| waiters | hand-overs/s | requests per hand-over | writes per hand-over | "
                 "watch notifications per hand-over | p50 µs | p99 µs |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|")
    for w in (1, 16, 256):
        r = extra.get(f"herd {w}")
        if r:
            lines.append(f"| {w} | {r['cycles_per_s']} | {num(r.get('requests_per_cycle'), '{}')}"
                         f" | {num(r.get('writes_per_cycle'), '{}')} | "
                         f"{num(r.get('notices_per_cycle'), '{}')} | {r['p50_us']} | "
                         f"{r['p99_us']} |")
    lines.append("")
    lines.append(f"![{title}: throughput and p99 per workload](bench/results-{store}.png)\n")
    return "\n".join(lines)


def kind_table(a, lines, kinds):
    """The lock family and the client options, medians of the rounds."""
    def cell(row, wl, key, fmt="{:.0f}"):
        v = median_of(kinds.get((row, wl), []), key)
        return fmt.format(v) if v is not None else "-"

    if not kinds:
        return
    lines.append(f"Each kind of lock: **seq** one thread, lock+unlock of its own lock; **hot** "
                 f"{a.procs} processes on one lock, one thread each (for *read*, readers share "
                 "it; *semaphore* has 2 permits, each cycle takes 1; *multi* takes two names in "
                 "one hash slot). *share* = slowest process / fastest.\n")
    lines.append("| kind | seq cycles/s | hot cycles/s | hot share | hot p50 µs | hot p99 µs |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        lines.append(f"| {kind} | {cell(kind, 'seq', 'cycles_per_s')} | "
                     f"{cell(kind, 'hot', 'cycles_per_s')} | "
                     f"{cell(kind, 'hot', 'share', '{:.2f}')} | {cell(kind, 'hot', 'p50_us')} | "
                     f"{cell(kind, 'hot', 'p99_us')} |")
    lines.append("")
    lines.append("Client options on the hot lock: the in-process wait queue (`local_queue`, 2 "
                 "processes of 16 threads each) and hand-over notices through a Redis Stream "
                 f"instead of pub/sub (`notify`, {a.procs} processes):\n")
    lines.append("| URL option | hot cycles/s | share | p50 µs | p99 µs |")
    lines.append("|---|---:|---:|---:|---:|")
    for row in ("local_queue=off", "local_queue=on", "notify=pubsub", "notify=stream"):
        lines.append(f"| `{row}` | {cell(row, 'hot', 'cycles_per_s')} | "
                     f"{cell(row, 'hot', 'share', '{:.2f}')} | {cell(row, 'hot', 'p50_us')} | "
                     f"{cell(row, 'hot', 'p99_us')} |")
    lines.append("")


HEADER = """# Benchmarks

dlock against the peers of each store it speaks, side by side on one private
server of that store, in interleaved rounds. Each section below comes from
one run of `bench/compare.sh --store STORE` and says when and on what it was
measured, with which versions, and how to reproduce it; the script rewrites
only its own store's section. Compare the ratios within one section (one
run), never numbers across sections or runs: the machines are shared and
noisy.

The goals (product brief, section 4): against the best peer of the same
store, at least 1.5x under concurrency (**par**, **hot**), a fair share in
**hot**, and no herd (the cost of a hand-over stays flat as waiters grow).
"""


def write_section(path, store, text):
    """Replaces store's section of BENCHMARKS.md (between its markers) and
    keeps the others; sections stay in STORES order, then any other
    (written by hand)."""
    sections = {}
    try:
        with open(path) as f:
            old = f.read()
    except OSError:
        old = ""
    # every section, its own stores' and those written by hand (kept, after them)
    for m in re.finditer(r"<!-- store:([a-z0-9_-]+) -->\n(.*?)<!-- /store:\1 -->\n", old, re.S):
        sections[m.group(1)] = m.group(2)
    sections[store] = text.rstrip("\n") + "\n"
    out = [HEADER]
    for s in list(STORES) + [s for s in sections if s not in STORES]:
        if s in sections:
            out.append(f"<!-- store:{s} -->\n{sections[s]}<!-- /store:{s} -->\n")
    with open(path, "w") as f:
        f.write("\n".join(out))


def gnuplot_text(text):
    """text as a gnuplot single-quoted string."""
    return "'" + text.replace("'", "''") + "'"


def chart(path, med, when, versions):
    if shutil.which("gnuplot") is None:
        print("gnuplot not found: no chart", file=sys.stderr)
        return
    labels = sorted({label for (_, label) in med})
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "data")
        with open(data, "w") as f:
            for label in labels:
                vals = [med.get((w, label), {}).get("cycles_per_s") or 0 for w in WLS]
                p99 = [med.get((w, label), {}).get("p99_us") or 0 for w in WLS]
                f.write('"%s" %s %s\n' % (label, " ".join(f"{v:.0f}" for v in vals),
                                          " ".join(f"{v:.0f}" for v in p99)))
        script = f"""
set terminal pngcairo size 1100,520 font 'DejaVu Sans,10'
set output {gnuplot_text(path)}
set multiplot layout 1,2 title {gnuplot_text(when)} . "\\n" . {gnuplot_text(versions)} \
    font 'DejaVu Sans,9'
set bmargin 5
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top right
set xtics rotate by -20
set grid ytics
set title 'Throughput (cycles/s, median; higher is better)'
plot '{data}' using 2:xtic(1) title 'seq', '' using 3 title 'par', '' using 4 title 'hot'
set logscale y
set title 'p99 latency of one cycle (µs, log scale; lower is better)'
plot '{data}' using 5:xtic(1) title 'seq', '' using 6 title 'par', '' using 7 title 'hot'
unset multiplot
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=False)


if __name__ == "__main__":
    main()
