/**
 * Where a batch's progress goes: on a terminal a bar redrawn in place; piped (a log file, CI) one
 * plain line every 30 s, so a log stays readable; `--json-progress` one JSON object per line for
 * machines. A last line is written at the end in every mode.
 */
import type { BatchProgress, ProgressSnapshot } from './batch-progress.js';
import { progressBar, progressLine } from './batch-progress.js';

export type ProgressMode = 'tty' | 'plain' | 'json';

export const PLAIN_INTERVAL_MS = 30_000;
const TTY_INTERVAL_MS = 250;
const JSON_INTERVAL_MS = 2000;

export interface Writable {
  write(text: string): unknown;
}

export class ProgressReporter {
  readonly #progress: BatchProgress;
  readonly #out: Writable;
  readonly #mode: ProgressMode;
  #timer: NodeJS.Timeout | null = null;

  constructor(progress: BatchProgress, out: Writable, mode: ProgressMode) {
    this.#progress = progress;
    this.#out = out;
    this.#mode = mode;
  }

  start(): void {
    const every = this.#mode === 'tty' ? TTY_INTERVAL_MS : this.#mode === 'json' ? JSON_INTERVAL_MS : PLAIN_INTERVAL_MS;
    this.#timer = setInterval(() => this.#print(false), every);
    this.#timer.unref();
  }

  #print(last: boolean): ProgressSnapshot {
    const p = this.#progress.snapshot();
    if (this.#mode === 'json') this.#out.write(`${JSON.stringify({ event: last ? 'done' : 'progress', ...p })}\n`);
    else if (this.#mode === 'tty') this.#out.write(`\r\x1b[2K${progressBar(p)}${last ? '\n' : ''}`);
    else this.#out.write(`${progressLine(p)}\n`);
    return p;
  }

  /** Stops and prints the final state. */
  stop(): ProgressSnapshot {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    return this.#print(true);
  }
}
