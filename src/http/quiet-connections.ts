/**
 * Closing without waiting on connections that carry no request. Node closes idle keep-alive
 * connections when the server closes, but from Node 22 not a connection that has sent nothing yet
 * (it is watched for `headersTimeout` instead): a client that opened one (Node 22's bundled undici
 * reconnects at once when a request is aborted; browsers preconnect) held a close for the whole
 * `shutdown.grace`. A keep-alive connection whose last request finishes during the grace is quiet
 * from then on too.
 */

import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface QuietConnections {
  /** Closes every connection with no response under way. */
  closeQuiet(): void;
}

/** The response a connection is answering now: Node's own idle test reads the same field. */
type ServerSocket = Socket & { _httpMessage?: ServerResponse | null };

export function trackConnections(server: Server): QuietConnections {
  const open = new Set<ServerSocket>();
  server.on('connection', (socket: ServerSocket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  return {
    closeQuiet() {
      for (const socket of open) {
        const answering = socket._httpMessage;
        if (answering === undefined || answering === null || answering.writableFinished) socket.destroy();
      }
    },
  };
}
