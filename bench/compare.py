#!/usr/bin/env python3
"""Side-by-side lock benchmark: dlock, the bare-hiredis floor and the peers.

Runs every program on one private redis-server, interleaved, for several
rounds, takes medians, and writes BENCHMARKS.md (table, ratios, the date,
machine and versions, each peer's wait settings, the command) and
bench/results.png (gnuplot, with the date, machine and versions on it).
Called by bench/compare.sh, which builds everything first; see there and
bench/README.md for the options and what a run needs.

The measurements and the environment are also saved as JSON (--save);
--from FILE writes the report again from such a file without running
anything.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Redis:
    """A throwaway redis-server on a free loopback port."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-bench-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            if self.cli("PING") == "PONG":
                return
            time.sleep(0.01)
        raise SystemExit("redis-server did not start")

    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.port), *args],
                           capture_output=True, text=True)
        return r.stdout.strip()

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_json(cmd, cwd=None, timeout=120):
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
# dlock's server-side queue with the peers' polling at their defaults.
WAITS = {
    "dlock": "no polling: queues on the server (FIFO) and is woken by one PUBLISH to its "
             "client's channel when the lock is handed to it; a heartbeat every 2 s "
             "(waiter_lease 6 s) keeps its place",
    "hiredis-floor": "no pause: sends SET NX again at once until it succeeds (spins); one "
                     "connection per thread",
    "node redlock": "retries after 0-400 ms (retryDelay 200 ms +- retryJitter 200 ms, "
                    "retryCount -1: forever; set in node_bench.js; the library's defaults are "
                    "200 +- 100 ms, 10 retries)",
    "node semaphore": "Mutex tries again every 10 ms (retryInterval, the library's default; "
                      "acquireTimeout 60 s set in node_bench.js)",
    "redis-py": "Lock.acquire polls every 100 ms (sleep=0.1, the library's default)",
}

NODE_PACKAGES = ("redlock", "redis-semaphore", "ioredis")


def programs(a, port):
    """(workload, label, command, cwd) for every comparable run."""
    dlock = [a.dlock, "bench", "-u", f"redis://127.0.0.1:{port}", "--seconds", str(a.seconds)]
    node = ["node", "node_bench.js", str(port)]
    py = ["/usr/bin/python3", "py_bench.py", str(port)]
    multi = ["bash", "multi.sh", str(a.procs)]
    s = str(a.seconds)
    out = [
        ("seq", "hiredis-floor", [a.limit, str(port), "1", s], None),
        ("seq", "dlock", dlock + ["--workload", "seq"], None),
        ("par", "hiredis-floor", [a.limit, str(port), str(a.threads), s], None),
        ("par", "dlock", dlock + ["--workload", "par", "--threads", str(a.threads)], None),
        ("hot", "hiredis-floor", [a.limit, str(port), str(a.procs), s, "hot"], None),
        ("hot", "dlock", dlock + ["--workload", "hot", "--procs", str(a.procs)], None),
    ]
    if a.peers and not a.no_node:
        for lib in ("redlock", "semaphore"):
            out += [
                ("seq", f"node {lib}", node + ["seq", lib, "1", s], a.peers),
                ("par", f"node {lib}", node + ["par", lib, str(a.threads), s], a.peers),
                ("hot", f"node {lib}", multi + node + ["hot", lib, "1", s], a.peers),
            ]
    if a.peers:
        out += [
            ("seq", "redis-py", py + ["seq", "1", s], a.peers),
            ("par", "redis-py", py + ["par", str(a.threads), s], a.peers),
            ("hot", "redis-py", multi + py + ["hot", "1", s], a.peers),
        ]
    return out


KINDS = ("mutex", "fair", "read", "write", "semaphore", "multi")


def kind_programs(a, port):
    """(row, workload, command) for the lock-family table and the client
    option comparisons: dlock only (the peers have no such kinds)."""
    url = f"redis://127.0.0.1:{port}"
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
    vals = [r[key] for r in rows if r is not None and key in r]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlock", help="the dlock command to measure")
    ap.add_argument("--limit", help="the built bench/peers/limit.c")
    ap.add_argument("--peers", default=os.path.join(HERE, "peers"),
                    help="bench/peers, with node_modules installed (npm ci)")
    ap.add_argument("--no-node", action="store_true", help="skip the node peers")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--command", default="bench/compare.sh")
    ap.add_argument("--chart", default=os.path.join(HERE, "results.png"))
    ap.add_argument("--save", default=os.path.join(ROOT, "build-bench", "results.json"),
                    help="where to keep the measurements and environment (JSON)")
    ap.add_argument("--from", dest="from_file",
                    help="write the report from a saved results file; run nothing")
    a = ap.parse_args()

    if a.from_file:
        with open(a.from_file) as f:
            saved = json.load(f)
        for key in ("rounds", "seconds", "threads", "procs", "command"):
            setattr(a, key, saved["args"][key])
        results = {(r["wl"], r["label"]): r["runs"] for r in saved["results"]}
        extra = saved["extra"]
        extra["kinds"] = {(k["row"], k["wl"]): k["runs"] for k in extra.get("kinds", [])}
        write_report(a, results, extra, saved["env"])
        return
    if not a.dlock or not a.limit:
        ap.error("--dlock and --limit are required (unless --from)")

    env = environment(a)
    print("environment: " + json.dumps(env), file=sys.stderr)
    redis = Redis()
    results = {}  # (wl, label) -> [json...]
    kinds = {}  # (row, wl) -> [json...]
    extra = {}
    try:
        plan = programs(a, redis.port)
        kind_plan = kind_programs(a, redis.port)
        for rnd in range(a.rounds):
            print(f"round {rnd + 1}/{a.rounds}", file=sys.stderr)
            for wl, label, cmd, cwd in plan:
                r = run_json(cmd, cwd=cwd)
                print(f"  {wl:4} {label:16} {r}", file=sys.stderr)
                results.setdefault((wl, label), []).append(r)
                redis.cli("FLUSHALL")
            for row, wl, cmd in kind_plan:
                r = run_json(cmd)
                print(f"  {wl:4} {row:18} {r}", file=sys.stderr)
                kinds.setdefault((row, wl), []).append(r)
                redis.cli("FLUSHALL")
        extra["kinds"] = kinds
        base = [a.dlock, "bench", "-u", f"redis://127.0.0.1:{redis.port}"]
        for w in (1, 16, 256):
            r = run_json(base + ["--workload", "herd", "--waiters", str(w), "--seconds", "2"])
            extra[f"herd {w}"] = r
            redis.cli("FLUSHALL")
        for k in (1000, 10000):
            r = run_json(base + ["--workload", "renew", "--locks", str(k), "--seconds", "4"])
            extra[f"renew {k}"] = r
            redis.cli("FLUSHALL")
        extra["memory"] = run_json(base + ["--workload", "memory", "--locks", "10000"])
        extra["instructions"] = instructions(a, redis.port)
    finally:
        redis.stop()

    save(a, results, extra, env)
    write_report(a, results, extra, env)


def save(a, results, extra, env):
    """Keeps the measurements and the environment, for --from."""
    data = {
        "args": {k: getattr(a, k) for k in ("rounds", "seconds", "threads", "procs", "command")},
        "env": env,
        "results": [{"wl": wl, "label": label, "runs": runs}
                    for (wl, label), runs in results.items()],
        "extra": dict(extra, kinds=[{"row": row, "wl": wl, "runs": runs}
                                    for (row, wl), runs in extra.get("kinds", {}).items()]),
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.save)), exist_ok=True)
    with open(a.save, "w") as f:
        json.dump(data, f, indent=1)
    print(f"measurements saved in {a.save}", file=sys.stderr)


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


def instructions(a, port):
    """Client instructions per lock+unlock cycle, one thread, counted by
    callgrind: the difference between a 1 s and a 3 s run, so start-up
    cancels out. Stable on a noisy machine, unlike times."""
    out = {}
    runs = {
        "dlock": lambda s: [a.dlock, "bench", "-u", f"redis://127.0.0.1:{port}",
                            "--seconds", str(s)],
        "hiredis-floor": lambda s: [a.limit, str(port), "1", str(s)],
    }
    for label, cmd in runs.items():
        short, long_ = callgrind(cmd(1), 1), callgrind(cmd(3), 3)
        if short and long_ and long_[1] > short[1]:
            out[label] = (long_[0] - short[0]) / (long_[1] - short[1])
    return out


def command_output(cmd, cwd=None):
    """The first line cmd prints, or None if it cannot run."""
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (r.stdout or r.stderr).strip().splitlines()
    return lines[0].strip() if r.returncode == 0 and lines else None


def environment(a):
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
    redis = command_output(["redis-server", "--version"]) or ""
    redis = next((w[2:] for w in redis.split() if w.startswith("v=")), redis or None)
    dlock = command_output([a.dlock, "--version"])
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "kernel": f"{platform.system()} {platform.release()}",
        "dlock": dlock.split()[-1] if dlock else None,
        "redis-server": redis,
        "redis-py": command_output(["/usr/bin/python3", "-c",
                                    "import redis; print(redis.__version__)"]),
        "node": None,
        "npm": {},
    }
    if a.peers and not a.no_node:
        env["node"] = command_output(["node", "--version"])
        for pkg in NODE_PACKAGES:
            try:
                with open(os.path.join(a.peers, "node_modules", pkg, "package.json")) as f:
                    env["npm"][pkg] = json.load(f)["version"]
            except (OSError, ValueError, KeyError):
                env["npm"][pkg] = None
    return env


def describe(env):
    """(machine, versions) as two lines of text."""
    machine = (f"{env['nproc']} CPUs ({env['cpu']}), {env['kernel']}")
    versions = [f"dlock {env['dlock']}", f"redis-server {env['redis-server']}",
                f"redis-py {env['redis-py']}"]
    if env.get("node"):
        versions.append(f"node {env['node']}")
        versions += [f"{pkg} {v}" for pkg, v in env["npm"].items()]
    return machine, ", ".join(versions)


def write_report(a, results, extra, env):
    med = {}
    for (wl, label), rows in results.items():
        med[(wl, label)] = {k: median_of(rows, k) for k in
                            ("cycles_per_s", "p50_us", "p99_us", "min_proc", "max_proc", "share",
                             "worst_p99_us")}
        if med[(wl, label)]["p99_us"] is None and med[(wl, label)]["worst_p99_us"] is not None:
            # multi.sh reports the worst process's p99 and no p50
            med[(wl, label)]["p99_us"] = med[(wl, label)]["worst_p99_us"]
        med[(wl, label)]["runs"] = " ".join(
            f"{r['cycles_per_s']:.0f}" if r and r.get("cycles_per_s") is not None else "-"
            for r in rows)
    wls = ["seq", "par", "hot"]
    lines = []
    lines.append("# Benchmarks\n")
    machine, versions = describe(env)
    lines.append(f"Measured {env['date']} on {machine}, one private redis-server, "
                 f"{a.rounds} interleaved rounds of {a.seconds} s per program; the numbers are "
                 "**medians** (each run's own figure in the last column). One cycle = acquire "
                 "+ release. This machine is shared and noisy: compare the ratios, which come "
                 "from the same run, not absolute numbers across runs.\n")
    lines.append(f"Versions: {versions}.\n")
    lines.append(f"Reproduce: `{a.command}` (builds dlock, the floor and the peer programs in "
                 "bench/peers, starts its own server, rewrites this file and bench/results.png; "
                 "bench/README.md lists what it needs).\n")
    lines.append("Workloads: **seq** one worker, lock+unlock of its own lock; **par** "
                 f"{a.threads} workers, each its own lock (threads sharing one client for dlock "
                 "and redis-py, one event loop for node, 50 connections for the floor); "
                 f"**hot** {a.procs} processes on one lock, one worker each (the floor: "
                 f"{a.procs} threads spinning on SET NX). *share* = slowest process / fastest.\n")
    lines.append("How each program waits while the lock is held (the **hot** rows compare "
                 "dlock's server-side queue with the peers' polling at their defaults):\n")
    lines.append("| lib | waiting |")
    lines.append("|---|---|")
    for label in sorted({label for (_, label) in med}, key=lambda x: (x != "dlock", x)):
        lines.append(f"| {label} | {WAITS.get(label, '-')} |")
    lines.append("")
    lines.append("| workload | lib | cycles/s | p50 µs | p99 µs | share | runs (cycles/s) |")
    lines.append("|---|---|---:|---:|---:|---:|---|")
    for wl in wls:
        for (w, label), m in sorted(med.items(), key=lambda kv: -(kv[1]["cycles_per_s"] or 0)):
            if w != wl:
                continue
            share = f"{m['share']:.2f}" if m.get("share") else (
                f"{m['min_proc'] / m['max_proc']:.2f}" if m.get("min_proc") and m.get("max_proc")
                else "")
            p50 = f"{m['p50_us']:.0f}" if m.get("p50_us") is not None else "-"
            p99 = f"{m['p99_us']:.0f}" if m.get("p99_us") is not None else "-"
            lines.append(f"| {wl} | {label} | {m['cycles_per_s'] or 0:.0f} | {p50} | {p99} | "
                         f"{share} | {m['runs']} |")
    lines.append("")
    lines.append("## Ratios (same run)\n")
    lines.append("Medians against medians; the last column divides each round's dlock run by "
                 "the floor run just before it, which a noisy neighbour shifts less.\n")
    lines.append("| workload | dlock / floor | dlock / best peer | best peer | dlock / floor, "
                 "each round |")
    lines.append("|---|---:|---:|---|---|")
    for wl in wls:
        d = med.get((wl, "dlock"), {}).get("cycles_per_s")
        f = med.get((wl, "hiredis-floor"), {}).get("cycles_per_s")
        peers = [(m["cycles_per_s"], label) for (w, label), m in med.items()
                 if w == wl and label not in ("dlock", "hiredis-floor") and m["cycles_per_s"]]
        best = max(peers) if peers else (None, "-")
        pairs = zip(results.get((wl, "dlock"), []), results.get((wl, "hiredis-floor"), []))
        each = " ".join(f"{x['cycles_per_s'] / y['cycles_per_s']:.2f}" if x and y and
                        y.get("cycles_per_s") else "-" for x, y in pairs)
        lines.append(f"| {wl} | {d / f if d and f else 0:.2f}x | "
                     f"{d / best[0] if d and best[0] else 0:.2f}x | {best[1]} | {each} |")
    lines.append("")
    lines.append("**Why dlock can beat the floor in par.** The floor (bench/peers/limit.c) "
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
                 "there is nothing to batch, and the floor is the bound.\n")
    lines.append("## dlock only\n")
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
    lines.append("![throughput and p99 per workload](bench/results.png)\n")
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    chart(a.chart, med, wls, f"{env['date']}: {machine}", versions)
    print("\n".join(lines))
    print(f"\n{env['date']}\n{machine}\n{versions}", file=sys.stderr)


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


def gnuplot_text(text):
    """text as a gnuplot single-quoted string."""
    return "'" + text.replace("'", "''") + "'"


def chart(path, med, wls, when, versions):
    if shutil.which("gnuplot") is None:
        print("gnuplot not found: no chart", file=sys.stderr)
        return
    labels = sorted({label for (_, label) in med})
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "data")
        with open(data, "w") as f:
            for label in labels:
                vals = [med.get((w, label), {}).get("cycles_per_s") or 0 for w in wls]
                p99 = [med.get((w, label), {}).get("p99_us") or 0 for w in wls]
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
