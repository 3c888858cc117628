// SPDX-License-Identifier: MIT
// node_redlock.js - npm redlock (v5) over N independent masters, for
// test_node_redlock.sh: does it exclude dlock's Redlock (--simple) and the
// other way round?
//
//   node node_redlock.js PORT,PORT,... NAME try    prints "taken" (then
//       releases) or "refused" (someone else holds NAME on a quorum)
//   node node_redlock.js PORT,PORT,... NAME hold   takes NAME (or exits 1),
//       prints "held", keeps it until stdin closes, releases, prints
//       "released"
const Redis = require('ioredis');
const { default: Redlock, ExecutionError } = require('redlock');

const [portList, name, what] = process.argv.slice(2);
if (!portList || !name || (what !== 'try' && what !== 'hold')) {
  console.error('usage: node node_redlock.js PORT,PORT,... NAME try|hold');
  process.exit(64);
}
const clients = portList.split(',').map(port => new Redis({ host: '127.0.0.1', port: +port }));
// one attempt: a refusal is an answer here, not something to wait out
const redlock = new Redlock(clients, { retryCount: 0 });

(async () => {
  let lock;
  try {
    lock = await redlock.acquire([name], 30000);
  } catch (e) {
    if (!(e instanceof ExecutionError)) throw e;
    console.log('refused');
    clients.forEach(c => c.disconnect());
    process.exit(what === 'try' ? 0 : 1);
  }
  if (what === 'try') {
    console.log('taken');
  } else {
    console.log('held');
    process.stdin.resume();
    await new Promise(done => process.stdin.on('end', done));
  }
  await lock.release();
  if (what === 'hold') console.log('released');
  clients.forEach(c => c.disconnect());
})().catch(e => {
  console.error(`node_redlock.js: ${e.stack || e}`);
  process.exit(70);
});
