/**
 * The OpenAI Batch input format, checked whole before anything is sent: one JSON object per line,
 * `{custom_id, method: "POST", url, body}`. A job that stops at line 3,000 on a typo would leave a
 * half-done output behind; so a bad line, a repeated `custom_id`, an unknown `url` or a file over
 * the size limit is an error naming the line, and no request goes out. Pure: input-file.ts reads
 * the file (twice: to check it, then to send).
 */
import { formatSize } from '../config/duration.js';
import { isObject } from '../config/json-object.js';
import { forEachTopLevelField } from '../http/top-level-fields.js';
import { IdIndex } from './id-index.js';

/** The endpoints a batch line may name (OpenAI's Batch API takes the same, plus /v1/responses). */
export const BATCH_URLS = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'] as const;
export type BatchUrl = (typeof BATCH_URLS)[number];

export interface BatchRequest {
  readonly custom_id: string;
  readonly url: BatchUrl;
  /** The request's JSON body as the line wrote it: sent as it is. */
  readonly body: Buffer;
  /** 1-based line of the input it came from. */
  readonly line: number;
}

/** A line's fields, checked. */
interface CheckedLine {
  readonly custom_id: string;
  readonly url: BatchUrl;
  readonly body: Record<string, unknown>;
}

/** A problem with the input; `line` null for the file as a whole. */
export class BatchInputError extends Error {
  constructor(
    readonly line: number | null,
    readonly problem: string,
  ) {
    super(line === null ? problem : `line ${line}: ${problem}`);
    this.name = 'BatchInputError';
  }
}

const KNOWN_KEYS = new Set(['custom_id', 'method', 'url', 'body']);

function checkLine(value: unknown, line: number, endpoint: BatchUrl | null): CheckedLine {
  if (!isObject(value)) throw new BatchInputError(line, 'expected a JSON object {custom_id, method, url, body}');
  const unknown = Object.keys(value).filter((key) => !KNOWN_KEYS.has(key));
  if (unknown.length > 0) throw new BatchInputError(line, `unknown key ${JSON.stringify(unknown[0])}`);
  const { custom_id, method, url, body } = value;
  if (typeof custom_id !== 'string' || custom_id === '')
    throw new BatchInputError(line, 'custom_id must be a non-empty string');
  if (method !== 'POST') throw new BatchInputError(line, `method must be "POST", got ${JSON.stringify(method)}`);
  if (typeof url !== 'string' || !(BATCH_URLS as readonly string[]).includes(url)) {
    throw new BatchInputError(line, `unknown url ${JSON.stringify(url)} (expected one of ${BATCH_URLS.join(', ')})`);
  }
  if (endpoint !== null && url !== endpoint)
    throw new BatchInputError(line, `url ${url} differs from the batch's endpoint ${endpoint}`);
  if (!isObject(body)) throw new BatchInputError(line, 'body must be a JSON object');
  if (body.stream === true) throw new BatchInputError(line, 'body.stream must not be true: batch answers are whole');
  return { custom_id, url: url as BatchUrl, body };
}

/** True when the bytes are only spaces, tabs and `\r`: a blank line, skipped. */
export function isBlank(bytes: Buffer): boolean {
  for (const byte of bytes) if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d) return false;
  return true;
}

/** One line's fields, checked; throws a `BatchInputError` naming the line. */
function readLine(bytes: Buffer, line: number, endpoint: BatchUrl | null): CheckedLine {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new BatchInputError(line, `not valid JSON: ${(error as Error).message}`);
  }
  return checkLine(value, line, endpoint);
}

/** The request of one line, checked; throws a `BatchInputError` naming the line. */
export function parseRequestLine(bytes: Buffer, line: number, endpoint: BatchUrl | null): BatchRequest {
  const { custom_id, url, body } = readLine(bytes, line, endpoint);
  return { custom_id, url, body: bodyBytes(bytes, body), line };
}

/**
 * The bytes of a checked line's `body` value, copied out of the line: no second copy of the body as
 * a string, which for a prompt of hundreds of KB is garbage the collector lets pile up. Written out
 * again from its parse only when a key is spelled with escapes (where the bytes' last `body` may
 * not be the one JSON.parse kept).
 */
function bodyBytes(line: Buffer, parsed: Record<string, unknown>): Buffer {
  let range = null as { start: number; end: number } | null;
  let escapedKey = false;
  forEachTopLevelField(line, (key, start, end) => {
    if (key.includes('\\')) escapedKey = true;
    else if (key === 'body') range = { start, end };
  });
  if (range === null || escapedKey) return Buffer.from(JSON.stringify(parsed));
  return Buffer.from(line.subarray(range.start, range.end));
}

export interface CheckOptions {
  /** Largest input accepted, bytes; null: no limit. */
  maxBytes?: number | null;
  /** The API's batch names one endpoint; every line must use it. Null: any of BATCH_URLS. */
  endpoint?: BatchUrl | null;
}

/**
 * The check of a whole input, fed one line at a time (the file is read as a stream): each line is a
 * request, no `custom_id` twice, the input within `maxBytes`. It keeps the line of each
 * `custom_id`, which is also what a resumed run needs to match its output against the input.
 */
export class InputChecker {
  /** The line of each `custom_id`. */
  readonly ids = new IdIndex();
  lines = 0;
  #bytes = 0;
  readonly #maxBytes: number | null;
  readonly #endpoint: BatchUrl | null;

  constructor({ maxBytes = null, endpoint = null }: CheckOptions = {}) {
    this.#maxBytes = maxBytes;
    this.#endpoint = endpoint;
  }

  /** Throws a `BatchInputError` at the first problem. */
  add(bytes: Buffer, line: number, fileSize: number): void {
    this.lines = line;
    this.#bytes += bytes.length + 1;
    if (this.#maxBytes !== null && this.#bytes - 1 > this.#maxBytes) {
      throw new BatchInputError(
        line,
        `the input passes the ${formatSize(this.#maxBytes)} limit on this line (the file is ${formatSize(fileSize)})`,
      );
    }
    if (isBlank(bytes)) return;
    const request = readLine(bytes, line, this.#endpoint);
    const first = this.ids.add(request.custom_id, line);
    if (first !== 0)
      throw new BatchInputError(
        line,
        `duplicate custom_id ${JSON.stringify(request.custom_id)} (first on line ${first})`,
      );
  }

  /** Throws when no line held a request. */
  finish(): void {
    if (this.ids.size === 0) throw new BatchInputError(null, 'the input holds no requests');
  }
}
