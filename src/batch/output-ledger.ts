/**
 * A JSONL file that is also the job's ledger: each record is one line written by one `write`, so a
 * kill of the process leaves every earlier line whole and at most the last one torn; `fsync` runs at
 * a bounded interval (and at close), so a machine crash loses at most that interval's lines, which a
 * re-run sends again. Opening reads what is there, drops a torn last line, and returns the
 * `custom_id`s already written: the caller skips them, so no `custom_id` is written twice.
 */
import { closeSync, existsSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';

/** OpenAI's Batch output line. */
export interface BatchOutputRecord {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
}

/** A complete line of the file that is not a record: the file is not a ledger this tool wrote. */
export class LedgerError extends Error {}

export interface LedgerOptions {
  /** Longest time a written line waits for `fsync`, ms. */
  fsyncMs?: number;
  /** Start empty: the errors file of a new run. */
  truncate?: boolean;
}

export const DEFAULT_FSYNC_MS = 1000;

export class OutputLedger {
  readonly path: string;
  /** `custom_id`s written, read at open and added by `append`. */
  readonly written = new Set<string>();
  /** Bytes of a torn last line dropped at open (0: none). */
  readonly droppedBytes: number;
  #fd: number | null;
  #dirty = false;
  #timer: NodeJS.Timeout;

  constructor(path: string, { fsyncMs = DEFAULT_FSYNC_MS, truncate = false }: LedgerOptions = {}) {
    this.path = path;
    const existing = !truncate && existsSync(path) ? readFileSync(path) : Buffer.alloc(0);
    const whole = existing.lastIndexOf(0x0a) + 1;
    this.droppedBytes = existing.length - whole;
    let lineNo = 0;
    for (const text of existing.subarray(0, whole).toString('utf8').split('\n')) {
      lineNo++;
      if (text.trim() === '') continue;
      let record: Partial<BatchOutputRecord>;
      try {
        record = JSON.parse(text) as Partial<BatchOutputRecord>;
      } catch {
        throw new LedgerError(`${path} line ${lineNo} is not JSON: not an output file of fleetgate batch?`);
      }
      if (typeof record.custom_id !== 'string')
        throw new LedgerError(`${path} line ${lineNo} has no custom_id: not an output file of fleetgate batch?`);
      this.written.add(record.custom_id);
    }
    this.#fd = openSync(path, truncate ? 'w' : existsSync(path) ? 'r+' : 'w');
    // A torn line is cut off before anything is appended after it.
    if (this.droppedBytes > 0 || truncate) {
      ftruncateSync(this.#fd, whole);
      fsyncSync(this.#fd);
    }
    this.#position = whole;
    this.#timer = setInterval(() => this.flush(), fsyncMs);
    this.#timer.unref();
  }

  #position: number;

  /** Appends one whole line. */
  append(record: BatchOutputRecord): void {
    if (this.#fd === null) throw new Error(`${this.path} is closed`);
    const line = Buffer.from(`${JSON.stringify(record)}\n`);
    let offset = 0;
    while (offset < line.length) {
      offset += writeSync(this.#fd, line, offset, line.length - offset, this.#position + offset);
    }
    this.#position += line.length;
    this.written.add(record.custom_id);
    this.#dirty = true;
  }

  flush(): void {
    if (this.#fd === null || !this.#dirty) return;
    this.#dirty = false;
    fsyncSync(this.#fd);
  }

  get size(): number {
    return this.#position;
  }

  close(): void {
    if (this.#fd === null) return;
    clearInterval(this.#timer);
    this.flush();
    closeSync(this.#fd);
    this.#fd = null;
  }
}
