/**
 * Where a batch's progress goes: on a terminal a bar redrawn in place; piped (a log file, CI) one
 * plain line every 30 s, so a log stays readable; `--json-progress` one JSON object per line for
 * machines. A last line is written at the end in every mode.
 */
import type { BatchProgress, ProgressSnapshot } from './batch-progress.js';
import { progressBar, progressLine } from './batch-progress.js';

export type ProgressMode = 'tty' | 'plain' | 'json';

const PLAIN_INTERVAL_MS = 30_000;
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

const SCAN_INTERVAL_MS: Record<ProgressMode, number> = { tty: 250, plain: 5000, json: JSON_INTERVAL_MS };

function sizeIn(bytes: number, unit: number): string {
  return (bytes / unit).toFixed(1);
}

/** `reading out.jsonl: 3.1 of 5.0 GB, 540,000 answers` */
function scanLine(verb: string, file: string, bytes: number, total: number, count: number, noun: string): string {
  const [unit, name] = total >= 1e9 ? [1e9, 'GB'] : [1e6, 'MB'];
  return `${verb} ${file}: ${sizeIn(bytes, unit)} of ${sizeIn(total, unit)} ${name}, ${count.toLocaleString('en-US')} ${noun}`;
}

/**
 * Progress of a pass over a file (the input's check, the output's read on resume), at most once per
 * mode's interval and once at its end; `now` injected for tests.
 */
export function scanReporter(
  out: Writable,
  mode: ProgressMode,
  what: { verb: string; file: string; noun: string },
  now: () => number = Date.now,
): (bytes: number, total: number, count: number) => void {
  const started = now();
  let last = started;
  let printed = false;
  let ended = false;
  return (bytes, total, count) => {
    const end = bytes >= total;
    if (ended) return;
    ended = end;
    // A pass of under a second says nothing; a longer one says where it is, and where it ended.
    if (end ? !printed && now() - started < 1000 : now() - last < SCAN_INTERVAL_MS[mode]) return;
    last = now();
    printed = true;
    if (mode === 'json') {
      out.write(
        `${JSON.stringify({ event: what.verb, file: what.file, bytes, total_bytes: total, [what.noun]: count })}\n`,
      );
      return;
    }
    const line = scanLine(what.verb, what.file, bytes, total, count, what.noun);
    if (mode === 'tty') out.write(`\r\x1b[2K${line}${end ? '\n' : ''}`);
    else out.write(`${line}\n`);
  };
}
