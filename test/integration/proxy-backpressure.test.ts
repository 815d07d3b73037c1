/**
 * Clients that stop reading or leave, end to end. A client that stops reading a large answer stalls
 * the backend's writes instead of making fleetgate read the whole body into memory, and every byte
 * arrives once it reads again; one that stays stalled past the stream idle timeout is cut off and
 * the backend's slot freed; a client that leaves with pipelined requests frees them all.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { startGateway } from '../helpers/fleet.js';
import { startRawBackend } from '../helpers/raw-backend.js';
import { waitFor } from '../helpers/wait.js';

const TOTAL = 256 * 1024 * 1024;
const CHUNK = Buffer.alloc(256 * 1024, 'x');

interface Progress {
  written: number;
  lastChange: number;
  upstreamClosed: boolean;
}

const newProgress = (): Progress => ({ written: 0, lastChange: Date.now(), upstreamClosed: false });

/** Writes TOTAL bytes as fast as the socket takes them; `written` counts what the socket accepted. */
function pump(socket: Socket, progress: Progress): void {
  socket.once('close', () => {
    progress.upstreamClosed = true;
  });
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

/** A fleet of one pumping backend and a client that sent its request and reads nothing (yet). */
async function stalledClient(
  t: Parameters<typeof startGateway>[0],
  progress: Progress,
  extra: Record<string, unknown>,
) {
  const backend = await startRawBackend(t, (socket) => pump(socket, progress));
  const { url, gateway } = await startGateway(t, {
    backends: [{ url: backend.url, name: 'big', kind: 'openai' }],
    health: { starting_interval: '50ms' },
    ...extra,
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
  return { client, gateway };
}

test('a client that stops reading stalls the backend; nothing is lost when it reads again', async (t) => {
  const progress = newProgress();
  const { client } = await stalledClient(t, progress, {});
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

test('a client stalled past upstream.stream_idle_timeout is cut off and the backend slot freed', async (t) => {
  const progress = newProgress();
  const { gateway } = await stalledClient(t, progress, { upstream: { stream_idle_timeout: '1s' } });
  assert.ok(progress.written < TOTAL, 'the backend was stalled, not done');
  const backend = gateway.fleet.registry.get('big');
  assert.equal(backend?.inflight, 1, 'the request holds its slot while the client stalls');
  await waitFor(() => backend?.inflight === 0 && progress.upstreamClosed, {
    what: 'the slot freed and the upstream request aborted',
  });
});

test('a client that leaves with pipelined requests frees every one of them', async (t) => {
  const upstreams: Socket[] = [];
  const backend = await startRawBackend(t, (socket) => {
    // One event, then silence: the answer is still being generated.
    socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
    socket.write('b\r\ndata: {}\n\n\n\r\n');
    upstreams.push(socket);
  });
  const { url, gateway } = await startGateway(t, {
    backends: [{ url: backend.url, name: 'slow', kind: 'openai' }],
    health: { starting_interval: '50ms' },
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: 'backend ready' });

  const client = connect(Number(new URL(url).port), '127.0.0.1');
  t.after(() => client.destroy());
  client.write('GET /v1/first HTTP/1.1\r\nHost: fleetgate\r\n\r\nGET /v1/second HTTP/1.1\r\nHost: fleetgate\r\n\r\n');
  const slow = gateway.fleet.registry.get('slow');
  await waitFor(() => backend.seen.length === 2 && slow?.inflight === 2, { what: 'both requests forwarded' });

  client.destroy();
  await waitFor(() => slow?.inflight === 0 && upstreams.every((socket) => socket.destroyed), {
    what: 'both upstream requests aborted and their slots freed',
  });
});
