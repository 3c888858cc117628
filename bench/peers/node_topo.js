// SPDX-License-Identifier: MIT
// Peer benchmark beyond one Redis server (bench/topology.sh): npm 'redlock'
// (v5) and 'redis-semaphore' over N independent masters (Redlock), or over
// a Redis Cluster through ioredis' Cluster client.
// Workloads as node_bench.js: seq (1 task), par (C tasks, each its own
// lock), hot (C tasks, one lock).
// usage: node node_topo.js redlock|cluster PORT[,PORT...] WORKLOAD LIB [C] [SECONDS]
//   LIB: redlock (its default retry delay, 200 ms + jitter), redlock-fast
//        (5 ms), semaphore (redis-semaphore: RedlockMutex over the masters,
//        Mutex on the cluster client)
const Redis = require('ioredis');
const { default: Redlock } = require('redlock');
const { Mutex, RedlockMutex } = require('redis-semaphore');

const [topo, portList, wl, lib, C = '50', secs = '3'] = process.argv.slice(2);
const ports = portList.split(',').map(Number);
const conc = wl === 'seq' ? 1 : +C, dur = +secs * 1000;
const clients = topo === 'cluster'
  ? [new Redis.Cluster(ports.map(port => ({ host: '127.0.0.1', port })))]
  : ports.map(port => new Redis({ host: '127.0.0.1', port }));
const delay = lib.includes('fast') ? 5 : 200;
const redlock = new Redlock(clients, { retryCount: -1, retryDelay: delay, retryJitter: delay });
const semOpts = { lockTimeout: 30000, acquireTimeout: 60000 };

async function cycle(name) {
  if (lib.startsWith('redlock')) {
    const l = await redlock.acquire([name], 30000);
    await l.release();
    return;
  }
  const m = topo === 'cluster' ? new Mutex(clients[0], name, semOpts)
                               : new RedlockMutex(clients, name, semOpts);
  await m.acquire();
  await m.release();
}

(async () => {
  const t0 = Date.now();
  let n = 0;
  const lat = [];
  const worker = async (i) => {
    const name = wl === 'hot' ? 'bench:hot' : `bench:${i}`;
    while (Date.now() - t0 < dur) {
      const s = process.hrtime.bigint();
      await cycle(name);
      lat.push(Number(process.hrtime.bigint() - s) / 1e3);
      n++;
    }
  };
  await Promise.all(Array.from({ length: conc }, (_, i) => worker(i)));
  const el = (Date.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const p = q => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))].toFixed(0);
  console.log(JSON.stringify({ lib: `${lib}-${topo}${ports.length}`, wl, conc,
    cycles_per_s: Math.round(n / el), p50_us: +p(0.5), p99_us: +p(0.99) }));
  clients.forEach(c => c.disconnect());
})();
