/**
 * A close waits for the requests in flight, not for connections that carry none: one a client
 * opened and sent nothing on (Node 22 no longer closes it as idle), and a keep-alive one whose
 * stream finished during the grace. With the shipped `shutdown.grace` (25 s), the close ends soon
 * after the last stream does.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { Client } from 'undici';
import { startReadyFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

test('close: a silent connection and a finished keep-alive one do not hold it for shutdown.grace', async (t) => {
  const { url, gateway } = await startReadyFleet(t, [{ engine: { tokenMs: 20 } }]);
  const { hostname, port } = new URL(url);

  const silent = connect(Number(port), hostname);
  const silentClosed = new Promise<void>((resolve) => silent.once('close', () => resolve()));
  silent.on('error', () => {});
  await new Promise<void>((resolve) => silent.once('connect', () => resolve()));

  // Its own client: once the stream ends, its connection stays open, kept alive for the next request.
  const client = new Client(url, { keepAliveTimeout: 60_000 });
  t.after(() => client.destroy());
  const res = await client.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, max_tokens: 40, messages: [{ role: 'user', content: 'go' }] }),
  });
  assert.equal(res.statusCode, 200);
  let body = '';
  let streamEnded = 0;
  const reading = (async () => {
    for await (const chunk of res.body) body += String(chunk);
    streamEnded = performance.now();
  })();
  await waitFor(() => body.length > 0, { what: 'the first chunk' });

  const closing = gateway.close();
  await reading;
  assert.ok(body.trimEnd().endsWith('data: [DONE]'), 'the stream in flight finished whole');
  await Promise.race([
    closing,
    new Promise((_, reject) => setTimeout(() => reject(new Error('close still waiting 3 s after the stream')), 3_000)),
  ]);
  const afterStream = performance.now() - streamEnded;
  assert.ok(afterStream < 3_000, `closed ${afterStream.toFixed(0)} ms after the last stream`);
  await silentClosed;
});
