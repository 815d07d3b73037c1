/**
 * The OpenAI Batch input format, checked whole before anything is sent: one JSON object per line,
 * `{custom_id, method: "POST", url, body}`. A job that stops at line 3,000 on a typo would leave a
 * half-done output behind; so a bad line, a repeated `custom_id`, an unknown `url` or a file over
 * the size limit is an error naming the line, and no request goes out.
 */
import { formatSize } from '../config/duration.js';

/** The endpoints a batch line may name (OpenAI's Batch API takes the same, plus /v1/responses). */
export const BATCH_URLS = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'] as const;
export type BatchUrl = (typeof BATCH_URLS)[number];

export interface BatchRequest {
  readonly custom_id: string;
  readonly url: BatchUrl;
  readonly body: Record<string, unknown>;
  /** 1-based line of the input it came from. */
  readonly line: number;
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

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const KNOWN_KEYS = new Set(['custom_id', 'method', 'url', 'body']);

function checkLine(value: unknown, line: number, endpoint: BatchUrl | null): BatchRequest {
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
  return { custom_id, url: url as BatchUrl, body, line };
}

/**
 * The error for an input over `maxBytes`, naming the line where it passes the limit; `head` holds
 * at least the first `maxBytes` bytes (a huge file need not be read whole to say so).
 */
export function oversizeError(head: Buffer, maxBytes: number, fileSize: number): BatchInputError {
  let line = 1;
  for (let i = head.indexOf(0x0a); i !== -1 && i < maxBytes; i = head.indexOf(0x0a, i + 1)) line++;
  const problem = `the input passes the ${formatSize(maxBytes)} limit on this line (the file is ${formatSize(fileSize)})`;
  return new BatchInputError(line, problem);
}

export interface ParseOptions {
  /** Largest input accepted, bytes. */
  maxBytes: number;
  /** The API's batch names one endpoint; every line must use it. Null: any of BATCH_URLS. */
  endpoint?: BatchUrl | null;
}

/** Every request of the input, in order; throws a `BatchInputError` at the first problem. */
export function parseBatchInput(input: Buffer, { maxBytes, endpoint = null }: ParseOptions): BatchRequest[] {
  const requests: BatchRequest[] = [];
  const seen = new Map<string, number>();
  let start = 0;
  let line = 0;
  while (start < input.length) {
    line++;
    const newline = input.indexOf(0x0a, start);
    const end = newline === -1 ? input.length : newline;
    if (end > maxBytes) throw oversizeError(input, maxBytes, input.length);
    const text = input.subarray(start, end).toString('utf8').trim();
    start = end + 1;
    if (text === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new BatchInputError(line, `not valid JSON: ${(error as Error).message}`);
    }
    const request = checkLine(value, line, endpoint);
    const first = seen.get(request.custom_id);
    if (first !== undefined)
      throw new BatchInputError(
        line,
        `duplicate custom_id ${JSON.stringify(request.custom_id)} (first on line ${first})`,
      );
    seen.set(request.custom_id, line);
    requests.push(request);
  }
  if (requests.length === 0) throw new BatchInputError(null, 'the input holds no requests');
  return requests;
}
