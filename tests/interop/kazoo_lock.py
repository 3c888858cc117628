#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""kazoo's Lock (Debian python3-kazoo), driven by test_zk_interop.

usage: kazoo_lock.py HOST:PORT PATH
Prints "ready" once connected, then reads commands on stdin, one a line,
and answers each with one line:
    try      "acquired" (then releases) or "busy"
    hold     acquires (waiting up to 20 s): "held NODE" or "timeout"
    release  "released"
    quit
The Lock is given extra_lock_patterns=["-lock-"], so that it counts
Curator's (and dlock's) nodes as contenders: without it kazoo ignores them.
"""
import sys

from kazoo.client import KazooClient

hosts, path = sys.argv[1], sys.argv[2]
zk = KazooClient(hosts=hosts)
zk.start(timeout=20)
lock = zk.Lock(path, identifier="kazoo", extra_lock_patterns=["-lock-"])
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "try":
        if lock.acquire(blocking=False):
            print("acquired", flush=True)
            lock.release()
        else:
            print("busy", flush=True)
    elif cmd == "hold":
        if lock.acquire(timeout=20):
            print("held", lock.node, flush=True)
        else:
            print("timeout", flush=True)
    elif cmd == "release":
        lock.release()
        print("released", flush=True)
    elif cmd == "quit":
        break
zk.stop()
zk.close()
