#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""redis-py's Lock (Debian python3-redis), driven by test_interop.

usage: redispy_lock.py PORT try NAME
           prints "acquired" (then releases) or "busy"
       redispy_lock.py PORT hold NAME
           acquires (blocking up to 10 s), prints "held <token>", holds until a
           line arrives on stdin, releases, prints "released"
"""
import sys

import redis

port, action, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
r = redis.Redis(host="127.0.0.1", port=port)
lock = r.lock(name, timeout=30, sleep=0.01)
if action == "try":
    if lock.acquire(blocking=False):
        print("acquired", flush=True)
        lock.release()
    else:
        print("busy", flush=True)
elif action == "hold":
    if not lock.acquire(blocking=True, blocking_timeout=10):
        print("timeout", flush=True)
        sys.exit(1)
    print("held", lock.local.token.decode(), flush=True)
    sys.stdin.readline()
    lock.release()
    print("released", flush=True)
else:
    sys.exit(2)
