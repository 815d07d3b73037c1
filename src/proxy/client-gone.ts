/**
 * A one-shot "the client went away" signal. `AbortController` builds on EventTarget, which cost
 * a visible share of a small proxied request's CPU in the profile (creation plus two listeners); the wait queue
 * and the forwarder need only `aborted` and add/removeEventListener('abort').
 */
import type { Socket } from 'node:net';
import type { AbortLike } from '../routing/wait-queue.js';

export class ClientGone implements AbortLike {
  aborted = false;
  #listeners: Array<() => void> = [];

  addEventListener(_type: 'abort', listener: () => void): void {
    this.#listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const index = this.#listeners.indexOf(listener);
    if (index >= 0) this.#listeners.splice(index, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    for (const listener of this.#listeners.splice(0)) listener();
  }
}

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
