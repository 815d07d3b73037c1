import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clientResponseHeaders, upstreamRequestHeaders } from '../../src/proxy/headers.js';

/** The flat `[name, value, ...]` list as name -> values, names lower-cased. */
function byName(flat: string[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i].toLowerCase();
    map.set(name, [...(map.get(name) ?? []), flat[i + 1]]);
  }
  return map;
}

test('upstream request: hop-by-hop, Connection-listed, Host, Content-Length and Expect stay behind', () => {
  const out = byName(
    upstreamRequestHeaders(
      [
        'Host',
        'evil.example',
        'Connection',
        'keep-alive',
        'Connection',
        'X-Secret, Upgrade',
        'X-Secret',
        '1',
        'Keep-Alive',
        'timeout=5',
        'TE',
        'trailers',
        'Transfer-Encoding',
        'chunked',
        'Content-Length',
        '12',
        'Expect',
        '100-continue',
        'Proxy-Authorization',
        'Basic x',
        'Content-Type',
        'application/json',
        'X-Request-Id',
        'abc',
      ],
      { peer: '127.0.0.1', apiKey: null },
    ),
  );
  assert.deepEqual([...out.keys()].sort(), ['content-type', 'x-forwarded-for', 'x-forwarded-proto', 'x-request-id']);
  assert.deepEqual(out.get('x-request-id'), ['abc'], 'names keep their case on the wire, values pass as sent');
});

test('upstream request: X-Forwarded-For appends the peer to every prior hop; Authorization replaced only with an api key', () => {
  const raw = ['X-Forwarded-For', '203.0.113.9', 'x-forwarded-for', '198.51.100.2', 'Authorization', 'Bearer client'];
  const kept = byName(upstreamRequestHeaders(raw, { peer: '10.0.0.5', apiKey: null }));
  assert.deepEqual(kept.get('x-forwarded-for'), ['203.0.113.9, 198.51.100.2, 10.0.0.5']);
  assert.deepEqual(kept.get('x-forwarded-proto'), ['http']);
  assert.deepEqual(kept.get('authorization'), ['Bearer client']);
  const replaced = byName(upstreamRequestHeaders(raw, { peer: '10.0.0.5', apiKey: 'sk-fleet' }));
  assert.deepEqual(replaced.get('authorization'), ['Bearer sk-fleet'], "the client's key never reaches the backend");
  assert.deepEqual(byName(upstreamRequestHeaders([], { peer: '10.0.0.5', apiKey: null })).get('x-forwarded-for'), [
    '10.0.0.5',
  ]);
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
  assert.deepEqual(out, ['content-type', 'text/event-stream', 'set-cookie', 'a=1', 'set-cookie', 'b=2']);
});
