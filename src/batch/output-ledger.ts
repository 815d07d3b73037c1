/**
 * A JSONL file that is also the job's ledger: each record is one line written by one `write`, so a
 * kill of the process leaves every earlier line whole and at most the last one torn; `fsync` runs at
 * a bounded interval (and at close), so a machine crash loses at most that interval's lines, which a
 * re-run sends again. `scanLedger` reads what is there as a stream (a 10 GB output as a 10 KB one),
 * handing each line's `custom_id` to the caller, who skips them, so no `custom_id` is written twice;
 * `OutputLedger` then opens the file with a torn last line cut off.
 */
import { closeSync, existsSync, fsyncSync, ftruncateSync, openSync, statSync, writeSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { topLevelField } from '../http/top-level-fields.js';
import { isBlank } from './batch-input.js';
import { lineBatches } from './line-reader.js';

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
}

const DEFAULT_FSYNC_MS = 1000;

/**
 * The `custom_id` of a record line, or null when it has none. Read without parsing the line (an
 * answer runs to KBs; a scan of GBs must not parse them): a record written by `append` has it second,
 * after its `id`, where the walk of its top-level fields stops.
 */
export function customIdOf(line: Buffer): string | null {
  const id = topLevelField(line, 'custom_id');
  return typeof id === 'string' ? id : null;
}

export interface LedgerScan {
  /** Bytes of whole lines: where the next record goes. */
  wholeBytes: number;
  /** Bytes of a torn last line, dropped (0: none). */
  droppedBytes: number;
  /** Records read. */
  records: number;
}

/**
 * Reads the ledger at `path` (none: empty) line by line, handing each record's `custom_id` to
 * `onRecord`; `progress(bytes read, size, records)` after each chunk. A complete line that is not a
 * record is a `LedgerError`.
 */
export async function scanLedger(
  path: string,
  onRecord: (customId: string) => void,
  progress?: (bytes: number, total: number, records: number) => void,
): Promise<LedgerScan> {
  if (!existsSync(path)) return { wholeBytes: 0, droppedBytes: 0, records: 0 };
  const { size } = await stat(path);
  let wholeBytes = 0;
  let records = 0;
  for await (const batch of lineBatches(path, size)) {
    for (const line of batch.lines) {
      if (!line.complete) continue;
      wholeBytes += line.bytes.length + 1;
      if (isBlank(line.bytes)) continue;
      const id = customIdOf(line.bytes);
      if (id === null)
        throw new LedgerError(
          `${path} line ${line.number} is not a record with a custom_id: not an output file of fleetgate batch?`,
        );
      records++;
      onRecord(id);
    }
    progress?.(batch.bytesRead, size, records);
  }
  return { wholeBytes, droppedBytes: size - wholeBytes, records };
}

export class OutputLedger {
  readonly path: string;
  #fd: number | null;
  #dirty = false;
  #timer: NodeJS.Timeout;
  #position: number;

  /** Opens `path` to append after its first `size` bytes (what a scan found whole); 0 starts it empty. */
  constructor(path: string, size: number, { fsyncMs = DEFAULT_FSYNC_MS }: LedgerOptions = {}) {
    this.path = path;
    this.#fd = openSync(path, existsSync(path) ? 'r+' : 'w');
    // A torn line is cut off before anything is appended after it.
    if (statSync(path).size > size) {
      ftruncateSync(this.#fd, size);
      fsyncSync(this.#fd);
    }
    this.#position = size;
    this.#timer = setInterval(() => this.flush(), fsyncMs);
    this.#timer.unref();
  }

  /** Appends one whole line. */
  append(record: BatchOutputRecord): void {
    if (this.#fd === null) throw new Error(`${this.path} is closed`);
    const line = Buffer.from(`${JSON.stringify(record)}\n`);
    let offset = 0;
    while (offset < line.length) {
      offset += writeSync(this.#fd, line, offset, line.length - offset, this.#position + offset);
    }
    this.#position += line.length;
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
