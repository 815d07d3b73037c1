/**
 * A bug in fleetgate's own bookkeeping (here: a request observer that throws) costs at most the
 * request it happened on, never the process or the other requests.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startGateway } from '../helpers/fleet.js';
import { startRawBackend, writeJson } from '../helpers/raw-backend.js';
import { waitFor } from '../helpers/wait.js';

test('an observer that throws: answers still arrive whole, a cut one stays cut, the proxy keeps serving', async (t) => {
  const backend = await startRawBackend(t, (socket, seen) => {
    if (seen.path !== '/v1/cut') return writeJson(socket, 200, { path: seen.path });
    // Half a body, then the connection dies: the relay ends with an upstream error.
    socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"half":');
    setImmediate(() => socket.destroy());
  });
  const { url, gateway } = await startGateway(t, {
    backends: [{ url: backend.url, name: 'b', kind: 'openai' }],
    health: { starting_interval: '50ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'backend ready' });

  let thrown = 0;
  const faulty = () => {
    thrown++;
    throw new Error('observer bug');
  };
  gateway.events.on('request', faulty);
  const answered = async (path: string) => {
    const res = await request(`${url}${path}`);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(await res.body.json(), { path });
  };
  await answered('/v1/one');
  await assert.rejects(
    request(`${url}/v1/cut`).then((res) => res.body.text()),
    'a cut answer stays cut',
  );
  await answered('/v1/two');
  assert.equal(thrown, 3, 'the observer ran (and threw) for each request');
  assert.equal(gateway.fleet.registry.get('b')?.inflight, 0, 'each slot was released before the observer ran');
  gateway.events.off('request', faulty);
});
