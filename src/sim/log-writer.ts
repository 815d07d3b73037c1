/**
 * The simulated process's stderr, redirected to a file (`> log 2>&1`). Writes are buffered and
 * flushed once per event-loop turn, in order; `close()` flushes synchronously.
 * Progress bars redraw with `\r` like tqdm and end with `\n`.
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { MeterState } from './tqdm.js';

export interface ProgressBar {
  /** Redraw with `n` done (and optionally a new description). */
  update(n: number, desc?: string): void;
  /** tqdm's close(): redraw the final state once more, then `\n`. */
  close(): void;
  /** End the line where the bar stopped (an exception interrupted it). */
  abandon(): void;
}

const two = (n: number) => String(n).padStart(2, '0');

/** `logFile` value for the process's stdout, as under `fleetgate launch` (which appends it to the engine's log). */
export const STDOUT_LOG = '-';

export class LogWriter {
  #fd: number | null;
  /** False for stdout, which is not ours to close. */
  #ownsFd = true;
  #pending: string[] = [];
  #flushScheduled: NodeJS.Immediate | null = null;
  #now: () => Date;
  #stampSecond = -1;
  #stampLong = '';
  #stampShort = '';

  /** `truncate`: start the file afresh (a relaunch with `> log`); otherwise append. */
  constructor(path: string | null, { truncate = false, now = () => new Date() } = {}) {
    this.#now = now;
    if (path === null) {
      this.#fd = null;
      return;
    }
    if (path === STDOUT_LOG) {
      this.#fd = 1;
      this.#ownsFd = false;
      return;
    }
    mkdirSync(dirname(path), { recursive: true });
    this.#fd = openSync(path, truncate ? 'w' : 'a');
  }

  get enabled(): boolean {
    return this.#fd !== null;
  }

  write(text: string): void {
    if (this.#fd === null) return;
    this.#pending.push(text);
    if (this.#flushScheduled === null) this.#flushScheduled = setImmediate(() => this.flush());
  }

  flush(): void {
    if (this.#flushScheduled !== null) {
      clearImmediate(this.#flushScheduled);
      this.#flushScheduled = null;
    }
    if (this.#fd === null || this.#pending.length === 0) return;
    const text = this.#pending.join('');
    this.#pending = [];
    writeSync(this.#fd, text);
  }

  close(): void {
    this.flush();
    if (this.#fd !== null && this.#ownsFd) closeSync(this.#fd);
    this.#fd = null;
  }

  #refreshStamp(): void {
    const date = this.#now();
    const second = Math.floor(date.getTime() / 1000);
    if (second === this.#stampSecond) return;
    this.#stampSecond = second;
    const md = `${two(date.getMonth() + 1)}-${two(date.getDate())}`;
    const hms = `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`;
    this.#stampLong = `${date.getFullYear()}-${md} ${hms}`;
    this.#stampShort = `${md} ${hms}`;
  }

  /** `2026-11-29 13:56:01` (Python logging `%Y-%m-%d %H:%M:%S`, local time). */
  timestamp(): string {
    this.#refreshStamp();
    return this.#stampLong;
  }

  /** `11-29 13:56:01` (vLLM's `%m-%d %H:%M:%S`). */
  shortTimestamp(): string {
    this.#refreshStamp();
    return this.#stampShort;
  }

  /** A tqdm bar; `render` turns the description and state into one line of text. */
  bar(desc: string, total: number, render: (desc: string, state: MeterState) => string): ProgressBar {
    const started = performance.now();
    let current = 0;
    let currentDesc = desc;
    let open = true;
    const draw = () => {
      const elapsedSeconds = (performance.now() - started) / 1000;
      this.write(`\r${render(currentDesc, { n: current, total, elapsedSeconds })}`);
    };
    draw();
    return {
      update: (n, newDesc) => {
        if (!open) return;
        current = n;
        if (newDesc !== undefined) currentDesc = newDesc;
        draw();
      },
      close: () => {
        if (!open) return;
        open = false;
        draw();
        this.write('\n');
      },
      abandon: () => {
        if (!open) return;
        open = false;
        this.write('\n');
      },
    };
  }
}
