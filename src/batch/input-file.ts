/**
 * A batch input file, read twice as a stream: once to check it whole before anything is sent
 * (`checkInputFile`: every line, a bad one anywhere is an error naming it), then again while
 * sending (`pendingRequests`: the lines not yet answered, pulled as the runner has room). Neither
 * pass holds more than a chunk of the file.
 */
import { stat } from 'node:fs/promises';
import {
  BatchInputError,
  type BatchRequest,
  type CheckOptions,
  InputChecker,
  isBlank,
  parseRequestLine,
} from './batch-input.js';
import type { IdIndex } from './id-index.js';
import { lineBatches } from './line-reader.js';

/** A checked input: where each `custom_id` is, and the file as it was checked. */
export interface CheckedInput {
  readonly path: string;
  /** Requests in it. */
  readonly requests: number;
  /** Lines in it (blank ones included). */
  readonly lines: number;
  /** The line of each `custom_id`. A run empties it once its output is matched (it is the largest thing held). */
  readonly ids: IdIndex;
  readonly size: number;
  readonly mtimeMs: number;
}

/** `(bytes read, file size, requests so far)`, after each chunk. */
export type ScanProgress = (bytes: number, total: number, count: number) => void;

export async function checkInputFile(
  path: string,
  opts: CheckOptions & { progress?: ScanProgress } = {},
): Promise<CheckedInput> {
  const { size, mtimeMs } = await stat(path);
  const checker = new InputChecker(opts);
  for await (const batch of lineBatches(path, size)) {
    for (const line of batch.lines) checker.add(line.bytes, line.number, size);
    opts.progress?.(batch.bytesRead, size, checker.ids.size);
  }
  checker.finish();
  return { path, requests: checker.ids.size, lines: checker.lines, ids: checker.ids, size, mtimeMs };
}

/**
 * The input's requests on the lines `skip` does not name, in order, read again from the file. A file
 * changed since it was checked is an error (its lines are not the ones matched to the output).
 */
export async function* pendingRequests(
  input: CheckedInput,
  skip: (line: number) => boolean,
  endpoint: CheckOptions['endpoint'] = null,
): AsyncGenerator<BatchRequest> {
  const now = await stat(input.path);
  const changed = () => new BatchInputError(null, `${input.path} changed since it was checked: run again`);
  if (now.size !== input.size || now.mtimeMs !== input.mtimeMs) throw changed();
  for await (const batch of lineBatches(input.path, input.size)) {
    for (const line of batch.lines) {
      if (skip(line.number) || isBlank(line.bytes)) continue;
      let request: BatchRequest;
      try {
        request = parseRequestLine(line.bytes, line.number, endpoint);
      } catch (error) {
        if (error instanceof BatchInputError) throw changed();
        throw error;
      }
      yield request;
    }
  }
}
