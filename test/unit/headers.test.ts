import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clientResponseHeaders, upstreamRequestHeaders } from '../../src/proxy/headers.js';

test('upstream request: hop-by-hop, Connection-listed, Host and Expect stay behind; the body length stays', () => {
  const out = upstreamRequestHeaders(
    {
      host: 'evil.example',
      connection: 'keep-alive, X-Secret, Upgrade',
      'x-secret': '1',
      'keep-alive': 'timeout=5',
      te: 'trailers',
      'transfer-encoding': 'chunked',
      'content-length': '12',
      expect: '100-continue',
      'proxy-authorization': 'Basic x',
      'content-type': 'application/json',
      'x-request-id': 'abc',
    },
    { peer: '127.0.0.1', apiKey: null },
  );
  assert.deepEqual(Object.keys(out).sort(), [
    'content-length',
    'content-type',
    'x-forwarded-for',
    'x-forwarded-proto',
    'x-request-id',
  ]);
  assert.equal(out['x-request-id'], 'abc');
});

test('upstream request: X-Forwarded-For appends the peer to every prior hop; Authorization replaced only with an api key', () => {
  // node joins repeated X-Forwarded-For headers with ', '.
  const raw = () => ({ 'x-forwarded-for': '203.0.113.9, 198.51.100.2', authorization: 'Bearer client' });
  const kept = upstreamRequestHeaders(raw(), { peer: '10.0.0.5', apiKey: null });
  assert.equal(kept['x-forwarded-for'], '203.0.113.9, 198.51.100.2, 10.0.0.5');
  assert.equal(kept['x-forwarded-proto'], 'http');
  assert.equal(kept.authorization, 'Bearer client');
  const replaced = upstreamRequestHeaders(raw(), { peer: '10.0.0.5', apiKey: 'sk-fleet' });
  assert.equal(replaced.authorization, 'Bearer sk-fleet', "the client's key never reaches the backend");
  assert.equal(upstreamRequestHeaders({}, { peer: '10.0.0.5', apiKey: null })['x-forwarded-for'], '10.0.0.5');
  assert.equal(
    upstreamRequestHeaders({ 'x-forwarded-proto': 'https' }, { peer: '10.0.0.5', apiKey: null })['x-forwarded-proto'],
    'http',
  );
});

test('client response: hop-by-hop and Connection-listed headers dropped, repeated ones kept apart', () => {
  const out = clientResponseHeaders({
    connection: ['keep-alive', 'X-Upstream-Hop'] as unknown as string,
    'keep-alive': 'timeout=3, max=7',
    'x-upstream-hop': '1',
    'transfer-encoding': 'chunked',
    'content-type': 'text/event-stream',
    'set-cookie': ['a=1', 'b=2'],
  });
  assert.deepEqual(out, { 'content-type': 'text/event-stream', 'set-cookie': ['a=1', 'b=2'] });
});
