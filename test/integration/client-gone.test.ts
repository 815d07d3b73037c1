import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { test } from 'node:test';
import { unwatchConnection, watchConnection } from '../../src/proxy/client-gone.js';

/** A real loopback connection; returns the server's side of it. */
async function serverSide(t: { after(fn: () => void): void }): Promise<Socket> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as { port: number };
  const accepted = once(server, 'connection');
  const client = connect(port, '127.0.0.1');
  t.after(() => client.destroy());
  const [socket] = (await accepted) as [Socket];
  return socket;
}

test('watchConnection: one close listener per connection, every watcher hears the close, unwatched ones do not', async (t) => {
  const socket = await serverSide(t);
  const before = socket.listenerCount('close');
  const heard: string[] = [];
  const a = () => heard.push('a');
  const b = () => heard.push('b');
  const c = () => heard.push('c');
  watchConnection(socket, a);
  watchConnection(socket, b);
  watchConnection(socket, c);
  assert.equal(socket.listenerCount('close'), before + 1);
  unwatchConnection(socket, b);
  socket.destroy();
  await once(socket, 'close');
  assert.deepEqual(heard, ['a', 'c']);
});

test('watchConnection on a connection already closed calls the listener at once', async (t) => {
  const socket = await serverSide(t);
  socket.destroy();
  await once(socket, 'close');
  let heard = 0;
  watchConnection(socket, () => heard++);
  assert.equal(heard, 1);
});
