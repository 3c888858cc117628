#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Peer benchmark: the "lock table" pattern, with ShedLock's own SQL (JdbcTemplateLockProvider, usingDbTime()):
# a row per lock name with holder and expiry; acquire = insert the row, or take it over if expired; release =
# set lock_until back to now. ShedLock never waits (it skips the job), so a waiter here polls every `sleep` s.
# Each statement runs alone in autocommit (ShedLock wraps each in its own transaction: one commit apiece).
# Debian python3-pymysql / python3-psycopg2.  usage: shedlock_bench.py URL seq|par|hot THREADS SECONDS [sleep]
import sys, time, threading, json, os, socket
from urllib.parse import urlparse
url, wl, C, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
sleep = float(sys.argv[5]) if len(sys.argv) > 5 else 0.001
u, AT_MOST = urlparse(url), 30_000  # lockAtMostFor 30 s, lockAtLeastFor 0
MY = u.scheme.startswith('mysql')
if MY:
    import pymysql
    connect = lambda: pymysql.connect(host=u.hostname, port=u.port, user=u.username, password=u.password,
                                      database=u.path[1:], autocommit=True)
    NOW, UNTIL = 'UTC_TIMESTAMP(3)', 'TIMESTAMPADD(MICROSECOND, %(us)s, UTC_TIMESTAMP(3))'
    TABLE = 'CREATE TABLE IF NOT EXISTS shedlock(name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3) NULL, ' \
            'locked_at TIMESTAMP(3) NULL, locked_by VARCHAR(255) NOT NULL) ENGINE=InnoDB'
    INSERT = f'INSERT IGNORE INTO shedlock(name, lock_until, locked_at, locked_by) VALUES(%(name)s, {UNTIL}, {NOW}, %(by)s)'
    UNLOCK = f'UPDATE shedlock SET lock_until = IF(locked_at > {NOW}, locked_at, {NOW}) WHERE name = %(name)s AND locked_by = %(by)s'
else:
    import psycopg2
    def connect():
        c = psycopg2.connect(url); c.autocommit = True; return c
    NOW = "timezone('utc', CURRENT_TIMESTAMP)"; UNTIL = f"{NOW} + cast(%(iv)s as interval)"
    TABLE = 'CREATE TABLE IF NOT EXISTS shedlock(name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3), ' \
            'locked_at TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL)'
    INSERT = f'INSERT INTO shedlock(name, lock_until, locked_at, locked_by) VALUES(%(name)s, {UNTIL}, {NOW}, %(by)s) ' \
             f'ON CONFLICT (name) DO UPDATE SET lock_until = {UNTIL}, locked_at = {NOW}, locked_by = %(by)s ' \
             f'WHERE shedlock.name = %(name)s AND shedlock.lock_until <= {NOW}'
    UNLOCK = f'UPDATE shedlock SET lock_until = CASE WHEN locked_at > {NOW} THEN locked_at ELSE {NOW} END ' \
             'WHERE name = %(name)s AND locked_by = %(by)s'
UPDATE = f'UPDATE shedlock SET lock_until = {UNTIL}, locked_at = {NOW}, locked_by = %(by)s WHERE name = %(name)s AND lock_until <= {NOW}'
try:
    connect().cursor().execute(TABLE)
except Exception:
    pass  # a concurrent CREATE from another process of multi.sh won the race
lat, n, lk, go = [], [0], threading.Lock(), threading.Barrier((1 if wl == 'seq' else C) + 1)
def worker(i):
    c = connect(); cur = c.cursor(); name = 'bench:hot' if wl == 'hot' else f'bench:{i}'
    p = {'name': name, 'by': f'{socket.gethostname()}-{os.getpid()}-{i}', 'us': AT_MOST * 1000, 'iv': f'{AT_MOST} milliseconds'}
    known = False  # ShedLock's LockRecordRegistry: once the row exists, go straight to UPDATE
    def try_lock():
        nonlocal known
        if not known:
            known = True
            cur.execute(INSERT, p)
            if cur.rowcount > 0: return True
        cur.execute(UPDATE, p); return cur.rowcount > 0
    go.wait(); t0 = time.time(); mine = []
    while time.time() - t0 < secs:
        s = time.perf_counter()
        while not try_lock(): time.sleep(sleep)
        cur.execute(UNLOCK, p); mine.append((time.perf_counter() - s) * 1e6)
    with lk: lat.extend(mine); n[0] += len(mine)
    c.close()
ts = [threading.Thread(target=worker, args=(i,)) for i in range(1 if wl == 'seq' else C)]
[t.start() for t in ts]; go.wait(); t0 = time.time(); [t.join() for t in ts]; el = time.time() - t0; lat.sort()
q = lambda f: round(lat[min(len(lat) - 1, int(f * len(lat)))])
print(json.dumps({"lib": f"shedlock-sql/{'mariadb' if MY else 'pg'}(sleep={sleep})", "wl": wl, "conc": len(ts),
                  "cycles_per_s": round(n[0] / el), "p50_us": q(.5), "p99_us": q(.99)}))
