/**
 * The side-by-side load of bench:overhead (a-cpu, b-cpu): requests in turn, and no proxy holding
 * more than its concurrency, however much slower it answers than the others.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { LoadClient } from '../../bench/lib/load.js';
import { inTurn } from '../../bench/overhead/scenarios.js';

/** A server answering each request after `delayMs`, counting the most it held at once. */
async function countingServer(delayMs: number) {
  const seen = { inFlight: 0, most: 0, served: 0 };
  const server: Server = createServer((req, res) => {
    seen.inFlight++;
    seen.most = Math.max(seen.most, seen.inFlight);
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        seen.inFlight--;
        seen.served++;
        res.end('{}');
      }, delayMs),
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { seen, url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

test('inTurn: each target serves the same requests and a slow one never holds more than the concurrency', async () => {
  const slow = await countingServer(25);
  const fast = await countingServer(0);
  // More connections than the concurrency: the cap must come from the loop, not from the pool.
  const clients = [new LoadClient([slow.url], 16), new LoadClient([fast.url], 16)];
  try {
    const served = await inTurn(clients, {
      concurrency: 3,
      total: 60,
      deadlineMs: 20_000,
      body: Buffer.from('{}'),
    });
    assert.deepEqual(
      served.map((s) => s.ok),
      [60, 60],
    );
    assert.equal(slow.seen.served, 60);
    assert.equal(fast.seen.served, 60);
    assert.ok(slow.seen.most <= 3, `the slow target held ${slow.seen.most} at once`);
    assert.equal(slow.seen.most, 3, 'and it was kept busy up to the concurrency');
    assert.ok(fast.seen.most <= 3, `the fast target held ${fast.seen.most} at once`);
  } finally {
    await Promise.all(clients.map((client) => client.close()));
    await Promise.all([slow.close(), fast.close()]);
  }
});
