/** http/loopback.ts: the one way fleetgate reaches its own listener. */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { loopbackOrigin } from '../../src/http/loopback.js';

test('loopbackOrigin: wildcards through loopback, IPv6 in brackets, names and addresses as they are', () => {
  assert.equal(loopbackOrigin('0.0.0.0', 8080), 'http://127.0.0.1:8080');
  assert.equal(loopbackOrigin('', 8080), 'http://127.0.0.1:8080');
  assert.equal(loopbackOrigin('::', 8080), 'http://[::1]:8080');
  assert.equal(loopbackOrigin('[::]', 8080), 'http://[::1]:8080');
  assert.equal(loopbackOrigin('::1', 9), 'http://[::1]:9');
  assert.equal(loopbackOrigin('127.0.0.2', 9), 'http://127.0.0.2:9');
  assert.equal(loopbackOrigin('localhost', 9), 'http://localhost:9');
});

test('loopbackOrigin reaches a server listening on the wildcard address', async () => {
  const server = createServer((_req, res) => res.end('here'));
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`${loopbackOrigin('0.0.0.0', port)}/`);
    assert.equal(await response.text(), 'here');
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
