/**
 * Issue #28's fault bench: a backend that crashed while fleetgate scraped its load came back with no
 * cap and took the whole central queue (734 requests at once). A scrape that fails, or that the
 * backend's state changed under, must leave the cap controller's unread cap in place. Real TCP: a
 * backend that holds `/metrics` until the test lets it answer or drops the connection.
 */
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { test } from 'node:test';
import { LoadScraper } from '../../src/fleet/load-scraper.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { UNREAD_CAP } from '../../src/routing/load/adaptive-cap.js';
import { QUEUE_ALLOWANCE } from '../../src/routing/load/backend-load.js';
import { CapController } from '../../src/routing/load/cap-controller.js';
import { waitFor } from '../helpers/wait.js';

const OK = { ok: true, reachable: true, reason: null };
const FAIL = { ok: false, reachable: false, reason: 'connection refused' };
const METRICS = 'sglang:num_running_reqs 3\nsglang:num_queue_reqs 0\nsglang:token_usage 0.05\n';
const INFO = JSON.stringify({ max_running_requests: 32 });

/** A backend whose requests wait in `held` (path and socket) until the test answers or drops them. */
async function heldBackend(t: { after(fn: () => unknown): void }) {
  const held: Array<{ path: string; socket: Socket }> = [];
  const server = createServer((socket) => {
    socket.on('error', () => {});
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      if (!buffered.includes('\r\n\r\n')) return;
      held.push({ path: buffered.split(' ')[1], socket });
      buffered = '';
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const { socket } of held) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  return { url: `http://127.0.0.1:${address.port}`, held };
}

function answer(socket: Socket, body: string): void {
  socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

async function setup(t: { after(fn: () => unknown): void }) {
  const backend = await heldBackend(t);
  const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 60_000, defaultCap: 0 });
  new CapController({ registry, scraping: true });
  const scraper = new LoadScraper({ registry, intervalMs: 0, timeoutMs: 10_000, apiKey: null });
  t.after(() => scraper.stop());
  const gpu = registry.add({ url: backend.url, name: 'gpu2', kind: 'sglang', log: null });
  registry.apply(gpu, { type: 'probe', result: OK });
  assert.equal(gpu.state, 'ready');
  assert.equal(gpu.cap, UNREAD_CAP);
  return { registry, scraper, gpu, held: backend.held };
}

test('a backend that crashes during its first scrape comes back with the unread cap, not uncapped', async (t) => {
  const { registry, scraper, gpu, held } = await setup(t);
  const scrape = scraper.scrapeAll();
  await waitFor(() => held.length === 1, { what: 'the scrape reaches the backend' });
  registry.apply(gpu, { type: 'probe', result: FAIL });
  held[0].socket.destroy();
  await scrape;
  assert.equal(gpu.cap, UNREAD_CAP, 'the failed scrape is no "reports no figures"');
  registry.apply(gpu, { type: 'probe', result: OK });
  assert.equal(gpu.cap, UNREAD_CAP, 'back ready: it takes a few requests until it is read');
});

test('a ready backend whose first scrape fails stays at the unread cap until a scrape succeeds', async (t) => {
  const { scraper, gpu, held } = await setup(t);
  const failed = scraper.scrapeAll();
  await waitFor(() => held.length === 1, { what: 'the first scrape reaches the backend' });
  held[0].socket.destroy();
  await failed;
  assert.equal(gpu.cap, UNREAD_CAP);
  const read = scraper.scrapeAll();
  await waitFor(() => held.length === 2, { what: 'the second scrape reaches the backend' });
  answer(held[1].socket, METRICS);
  await waitFor(() => held.length === 3, { what: 'it asks for /server_info' });
  assert.equal(held[2].path, '/server_info');
  answer(held[2].socket, INFO);
  await read;
  assert.equal(gpu.cap, 32 + QUEUE_ALLOWANCE, 'read: max_running_requests + the allowance');
});

test('figures read before the backend left ready are not taken for the process that comes back', async (t) => {
  const { registry, scraper, gpu, held } = await setup(t);
  const scrape = scraper.scrapeAll();
  await waitFor(() => held.length === 1, { what: 'the scrape reaches the backend' });
  registry.apply(gpu, { type: 'probe', result: FAIL });
  answer(held[0].socket, METRICS);
  await waitFor(() => held.length === 2, { what: 'it asks for /server_info' });
  answer(held[1].socket, INFO);
  await scrape;
  assert.equal(gpu.cap, UNREAD_CAP, 'still unread');
  assert.equal(gpu.reported, null);
});
