/** A recording stand-in for the client's ServerResponse, for the response relay without sockets. */
import { EventEmitter } from 'node:events';

/** What the client would receive. */
export class ClientResponse extends EventEmitter {
  written: string[] = [];
  writableEnded = false;
  writableFinished = false;
  destroyed = false;
  /** `write` answers false (the socket's buffer is full) while this is set. */
  full = false;

  write(chunk: Buffer | string): boolean {
    this.written.push(String(chunk));
    return !this.full;
  }
  end(chunk?: string) {
    if (chunk !== undefined) this.written.push(chunk);
    this.writableEnded = true;
    this.writableFinished = true;
    return this;
  }
  destroy() {
    this.destroyed = true;
    return this;
  }
  cork() {}
  uncork() {}
  get body(): string {
    return this.written.join('');
  }
}
