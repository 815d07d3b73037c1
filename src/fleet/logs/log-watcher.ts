/**
 * Follows one log file as it grows, and notices when it is truncated (`>` on restart), replaced
 * (rotated: renamed and recreated) or created late. Emits complete lines (see `LineSplitter`).
 *
 * Polls with one `stat` per interval and reads only the appended bytes. `fs.watch` is not used:
 * it follows an inode, not a path, so it loses the file on rotation, and it is unreliable on
 * network file systems, where model servers' logs often live. An idle log costs one stat per poll.
 */
import { EventEmitter } from 'node:events';
import type { Stats } from 'node:fs';
import { type FileHandle, open, stat } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { LineSplitter } from './line-splitter.js';

export type LogResetReason = 'truncated' | 'replaced' | 'created';

export interface LogWatcherEvents {
  /** Complete lines, in file order. */
  lines: [lines: string[]];
  /** Lines start again from the file's beginning (a new run's log). */
  reset: [reason: LogResetReason];
  /** A file-system error other than "not found"; emitted once per distinct code, only if listened to. */
  error: [error: Error];
}

export interface LogWatcherOptions {
  /** ms between stats (default 250). */
  pollMs?: number;
}

const DEFAULT_POLL_MS = 250;
const READ_CHUNK_BYTES = 256 * 1024;
/**
 * The last bytes read are compared again before reading what was appended: a restart with `>`
 * truncates and rewrites the file, and if the new run wrote past our offset between two polls the
 * size alone would not show it.
 */
const TAIL_CHECK_BYTES = 64;

interface FileIdentity {
  dev: number;
  ino: number;
}

export class LogWatcher extends EventEmitter<LogWatcherEvents> {
  readonly path: string;
  readonly #pollMs: number;
  #timer: NodeJS.Timeout | null = null;
  #inFlight: Promise<void> | null = null;
  /** Bumped by stop(): a poll still in flight from an earlier start() must not emit. */
  #generation = 0;
  #running = false;
  #file: FileIdentity | null = null;
  #everSeen = false;
  #offset = 0;
  #tail: Buffer = Buffer.alloc(0);
  #decoder = new StringDecoder('utf8');
  readonly #splitter = new LineSplitter();
  #lastErrorCode: string | null = null;

  constructor(path: string, options: LogWatcherOptions = {}) {
    super();
    this.path = path;
    this.#pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  }

  /** Starts following; an existing file is read from its beginning. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    const generation = this.#generation;
    const begin = () => {
      if (this.#running && generation === this.#generation) this.#schedule(0);
    };
    // A poll from before a stop() may still be reading: never two reads of one file at once.
    if (this.#inFlight === null) begin();
    else void this.#inFlight.then(begin);
  }

  stop(): void {
    this.#running = false;
    this.#generation++;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #schedule(delayMs: number): void {
    const generation = this.#generation;
    // One poll at a time: the next is scheduled only when this one has finished, so two reads of
    // one file are never in flight.
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#inFlight = this.#poll(generation).then(() => {
        this.#inFlight = null;
        if (this.#running && generation === this.#generation) this.#schedule(this.#pollMs);
      });
    }, delayMs);
  }

  /** Never rejects. */
  async #poll(generation: number): Promise<void> {
    try {
      await this.#check(generation);
      this.#lastErrorCode = null;
    } catch (error) {
      if (!isFileSystemError(error)) {
        // Thrown by a listener: surface it as an emitter called from an I/O callback would.
        queueMicrotask(() => {
          throw error;
        });
        return;
      }
      this.#report(error);
    }
  }

  async #check(generation: number): Promise<void> {
    const current = () => this.#running && generation === this.#generation;
    let stats: Stats;
    try {
      stats = await stat(this.path);
    } catch (error) {
      if (!isMissing(error)) throw error;
      // Gone (rotation in progress, or deleted): whatever appears next is another file.
      this.#file = null;
      return;
    }
    if (!current() || !stats.isFile()) return;
    if (this.#file === null) this.#restart(stats, this.#everSeen ? 'replaced' : 'created');
    else if (stats.ino !== this.#file.ino || stats.dev !== this.#file.dev) this.#restart(stats, 'replaced');
    else if (stats.size < this.#offset) this.#restart(stats, 'truncated');
    if (stats.size === this.#offset) return;
    await this.#readAppended(current);
  }

  #restart(identity: FileIdentity, reason: LogResetReason): void {
    this.#file = { dev: identity.dev, ino: identity.ino };
    this.#everSeen = true;
    this.#offset = 0;
    this.#tail = Buffer.alloc(0);
    this.#decoder = new StringDecoder('utf8');
    this.#splitter.reset();
    this.emit('reset', reason);
  }

  async #readAppended(current: () => boolean): Promise<void> {
    let handle: FileHandle;
    try {
      handle = await open(this.path, 'r');
    } catch (error) {
      if (isMissing(error)) return;
      throw error;
    }
    try {
      const stats = await handle.stat();
      const file = this.#file;
      // Replaced between our stat and open: the next poll sees the new file.
      if (!current() || file === null || stats.ino !== file.ino || stats.dev !== file.dev) return;
      const intact = await this.#tailIntact(handle);
      if (!current()) return;
      if (!intact) this.#restart(stats, 'truncated');
      const buffer = Buffer.alloc(Math.min(READ_CHUNK_BYTES, Math.max(stats.size - this.#offset, 0)));
      while (this.#offset < stats.size && current()) {
        const length = Math.min(buffer.length, stats.size - this.#offset);
        const { bytesRead } = await handle.read(buffer, 0, length, this.#offset);
        if (bytesRead === 0 || !current()) break;
        this.#consume(buffer.subarray(0, bytesRead));
      }
    } finally {
      await handle.close();
    }
  }

  async #tailIntact(handle: FileHandle): Promise<boolean> {
    const expected = this.#tail;
    if (expected.length === 0) return true;
    const actual = Buffer.alloc(expected.length);
    const { bytesRead } = await handle.read(actual, 0, expected.length, this.#offset - expected.length);
    return bytesRead === expected.length && actual.equals(expected);
  }

  #consume(bytes: Buffer): void {
    this.#offset += bytes.length;
    this.#tail = Buffer.from(
      bytes.length >= TAIL_CHECK_BYTES
        ? bytes.subarray(bytes.length - TAIL_CHECK_BYTES)
        : Buffer.concat([this.#tail, bytes]).subarray(-TAIL_CHECK_BYTES),
    );
    const lines = this.#splitter.push(this.#decoder.write(bytes));
    if (lines.length > 0) this.emit('lines', lines);
  }

  /** Once per distinct code, so a log that stays unreadable does not flood the listener. */
  #report(error: NodeJS.ErrnoException): void {
    const code = error.code ?? error.message;
    if (code === this.#lastErrorCode) return;
    this.#lastErrorCode = code;
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }
}

function isFileSystemError(error: unknown): error is NodeJS.ErrnoException {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).syscall === 'string';
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
