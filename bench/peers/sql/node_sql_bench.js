// SPDX-License-Identifier: MIT
// Peer benchmark: the SQL locks Node users pick. Same workloads and JSON line as ../node_bench.js.
//   advisory-lock : npm 'advisory-lock' (PostgreSQL pg_advisory_lock(int4,int4) of a sha256 of the name);
//                   it opens a NEW connection for every lock() and closes it in unlock()
//   pg            : the same lock on a warm npm 'pg' Pool: pg_advisory_lock(hashtext(name)) + pg_advisory_unlock
//   mysql2        : the common MariaDB/MySQL pattern on a warm npm 'mysql2' pool: pin a connection,
//                   SELECT GET_LOCK(name, 30) (again while it says 0), SELECT RELEASE_LOCK(name), give it back
// usage: node node_sql_bench.js URL seq|par|hot advisory-lock|pg|mysql2 [C] [SECONDS]
const { default: advisoryLock } = require('advisory-lock');
const pg = require('pg');
const mysql = require('mysql2/promise');
const [url, wl, lib, C = '50', secs = '3'] = process.argv.slice(2);
const conc = wl === 'seq' ? 1 : +C, dur = +secs * 1000;
if (!['advisory-lock', 'pg', 'mysql2'].includes(lib) || !['seq', 'par', 'hot'].includes(wl)) {
  console.error('usage: node node_sql_bench.js URL seq|par|hot advisory-lock|pg|mysql2 [C] [SECONDS]'); process.exit(2); }
const pool = lib === 'mysql2' ? mysql.createPool({ uri: url, connectionLimit: conc })
  : lib === 'pg' ? new pg.Pool({ connectionString: url, max: conc }) : null;
const mutexes = new Map(), factory = lib === 'advisory-lock' ? advisoryLock(url) : null;
async function cycle(name) {
  if (lib === 'advisory-lock') {
    if (!mutexes.has(name)) mutexes.set(name, factory(name));
    const unlock = await mutexes.get(name).lock(); await unlock();
  } else if (lib === 'pg') {
    const c = await pool.connect();
    try { await c.query('SELECT pg_advisory_lock(hashtext($1))', [name]); await c.query('SELECT pg_advisory_unlock(hashtext($1))', [name]); }
    finally { c.release(); }
  } else {
    const c = await pool.getConnection();
    try {
      for (;;) { const [[r]] = await c.query('SELECT GET_LOCK(?, 30) AS ok', [name]); if (r.ok === 1) break; }
      await c.query('SELECT RELEASE_LOCK(?)', [name]);
    } finally { c.release(); }
  }
}
async function warm() {   // open the pool's connections before the clock starts
  if (lib === 'pg') await Promise.all(Array.from({ length: conc }, () => pool.connect())).then(cs => cs.forEach(c => c.release()));
  if (lib === 'mysql2') await Promise.all(Array.from({ length: conc }, () => pool.getConnection())).then(cs => cs.forEach(c => c.release()));
}
(async () => {
  await warm();
  const t0 = Date.now(); let n = 0; const lat = [];
  const worker = async (i) => { const name = wl === 'hot' ? 'bench:hot' : `bench:${i}`;
    while (Date.now() - t0 < dur) { const s = process.hrtime.bigint(); await cycle(name); lat.push(Number(process.hrtime.bigint() - s) / 1e3); n++; } };
  await Promise.all(Array.from({ length: conc }, (_, i) => worker(i)));
  const el = (Date.now() - t0) / 1000; lat.sort((a, b) => a - b);
  const p = q => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))].toFixed(0);
  console.log(JSON.stringify({ lib, wl, conc, cycles_per_s: Math.round(n / el), p50_us: +p(0.5), p99_us: +p(0.99) }));
  if (pool) await pool.end();
})().catch(e => { console.error(e); process.exit(1); });
