/**
 * Backpressure end to end: a client that stops reading a large answer stalls the backend's writes
 * instead of making fleetgate read the whole body into memory; once the client reads again, every
 * byte arrives.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { startGateway } from '../helpers/fleet.js';
import { startRawBackend } from '../helpers/raw-backend.js';
import { waitFor } from '../helpers/wait.js';

const TOTAL = 256 * 1024 * 1024;
const CHUNK = Buffer.alloc(256 * 1024, 'x');

/** Writes TOTAL bytes as fast as the socket takes them; `written` counts what the socket accepted. */
function pump(socket: Socket, progress: { written: number; lastChange: number }): void {
  socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${TOTAL}\r\n\r\n`);
  const more = () => {
    while (progress.written < TOTAL) {
      progress.written += CHUNK.length;
      progress.lastChange = Date.now();
      if (!socket.write(CHUNK)) {
        socket.once('drain', more);
        return;
      }
    }
    socket.end();
  };
  more();
}

test('a client that stops reading stalls the backend; nothing is lost when it reads again', async (t) => {
  const progress = { written: 0, lastChange: Date.now() };
  const backend = await startRawBackend(t, (socket) => pump(socket, progress));
  const { url, gateway } = await startGateway(t, {
    backends: [{ url: backend.url, name: 'big', kind: 'openai' }],
    health: { starting_interval: '50ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'backend ready' });

  const client = connect(Number(new URL(url).port), '127.0.0.1');
  t.after(() => client.destroy());
  client.pause();
  client.write('GET /v1/big HTTP/1.1\r\nHost: fleetgate\r\nConnection: close\r\n\r\n');

  await waitFor(() => progress.written > 0, { what: 'the backend starts answering' });
  // Stalled: the backend's socket took nothing for 300 ms (bounded by the 20 s wait).
  await waitFor(() => Date.now() - progress.lastChange > 300 || progress.written >= TOTAL, {
    timeoutMs: 20_000,
    what: 'the backend to stall or finish',
  });
  assert.ok(
    progress.written < TOTAL / 4,
    `the backend wrote ${progress.written >> 20} MiB of ${TOTAL >> 20} MiB to a client reading nothing: fleetgate buffered it`,
  );

  let received = 0;
  let headerSeen = false;
  let head = '';
  const done = new Promise<void>((resolve, reject) => {
    client.on('data', (data: Buffer) => {
      if (!headerSeen) {
        head += data.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        headerSeen = true;
        assert.match(head, /^HTTP\/1\.1 200 /);
        received += Buffer.byteLength(head, 'latin1') - (end + 4);
        return;
      }
      received += data.length;
    });
    client.on('end', resolve);
    client.on('error', reject);
  });
  client.resume();
  await done;
  assert.equal(received, TOTAL, 'every byte of the answer arrived');
});
