/** Client connections and their end. */
import type { Socket } from 'node:net';

/**
 * One 'close' listener per client connection, however many requests it carries: adding and
 * removing an EventEmitter listener per request showed in the profile, a Set entry does not. The
 * connection, not the response, because a pipelined request's response has no socket yet and hears
 * no 'close' when the client leaves.
 */
const watchers = new WeakMap<Socket, Set<() => void>>();

/** Calls `listener` when the connection closes, at once if it already has. */
export function watchConnection(socket: Socket, listener: () => void): void {
  if (socket.destroyed) {
    listener();
    return;
  }
  let listeners = watchers.get(socket);
  if (listeners === undefined) {
    const created = new Set<() => void>();
    listeners = created;
    watchers.set(socket, created);
    socket.once('close', () => {
      watchers.delete(socket);
      for (const each of created) each();
    });
  }
  listeners.add(listener);
}

export function unwatchConnection(socket: Socket, listener: () => void): void {
  watchers.get(socket)?.delete(listener);
}
