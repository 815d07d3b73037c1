/**
 * A JSON object's top-level fields found without parsing the rest: the one reader of fields from a
 * body's bytes. The scalars a traced request's span says of its request (request-trace.ts), where a
 * parse would build the whole body (messages and all) to read four fields; whether a request asks for
 * a stream (request-context-from.ts); where a batch input line's `body` lies (batch-input.ts), sent
 * as its bytes instead of parsed and written out again; a batch output line's `custom_id`
 * (output-ledger.ts), read from gigabytes of answers without parsing them. Strings are skipped with a search for their
 * closing quote, nested objects and arrays by counting brackets. A body that is not a JSON object,
 * or stops being one, yields what was read before that point.
 */

export type Scalar = string | number | boolean | null;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

function skipSpace(body: Buffer, at: number): number {
  let i = at;
  while (i < body.length && isSpace(body[i])) i++;
  return i;
}

/** Just past the string whose opening quote is at `at`; -1 when it does not close. */
function stringEnd(body: Buffer, at: number): number {
  let from = at + 1;
  for (;;) {
    const quote = body.indexOf(QUOTE, from);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (body[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** Just past the value that starts at `at`; -1 when it does not end. */
function valueEnd(body: Buffer, at: number): number {
  const first = body[at];
  if (first === QUOTE) return stringEnd(body, at);
  if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
    let i = at;
    while (i < body.length && body[i] !== COMMA && body[i] !== CLOSE_OBJECT && !isSpace(body[i])) i++;
    return i;
  }
  let depth = 0;
  let i = at;
  while (i < body.length) {
    const byte = body[i];
    if (byte === QUOTE) {
      i = stringEnd(body, i);
      if (i < 0) return -1;
      continue;
    }
    if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) depth++;
    else if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) {
      depth--;
      if (depth === 0) return i + 1;
    }
    i++;
  }
  return -1;
}

/**
 * Calls `visit` with each top-level field of the JSON object in `body`, in order: its key as written
 * (escapes not decoded) and its value's bytes `[start, end)`; a `visit` that returns true ends the walk.
 */
export function forEachTopLevelField(body: Buffer, visit: (key: string, start: number, end: number) => unknown): void {
  walkTopLevel(body, (keyStart, keyEnd, start, end) => visit(body.toString('utf8', keyStart, keyEnd), start, end));
}

/**
 * The walk under both readers: each top-level field's key bytes `[keyStart, keyEnd)` (inside its
 * quotes) and value bytes `[start, end)`, decoding nothing; a `visit` that returns true ends it.
 */
function walkTopLevel(
  body: Buffer,
  visit: (keyStart: number, keyEnd: number, start: number, end: number) => unknown,
): void {
  let i = skipSpace(body, 0);
  if (body[i] !== OPEN_OBJECT) return;
  i++;
  for (;;) {
    i = skipSpace(body, i);
    if (body[i] !== QUOTE) return;
    const keyStart = i + 1;
    const keyEnd = stringEnd(body, i);
    if (keyEnd < 0) return;
    i = skipSpace(body, keyEnd);
    if (body[i] !== COLON) return;
    i = skipSpace(body, i + 1);
    const end = valueEnd(body, i);
    if (end < 0) return;
    if (visit(keyStart, keyEnd - 1, i, end) === true) return;
    i = skipSpace(body, end);
    if (body[i] !== COMMA) return;
    i++;
  }
}

/** The scalar values of `keys` among the top-level fields of the JSON object in `body`. */
export function topLevelFields(body: Buffer, keys: ReadonlySet<string>): Map<string, Scalar> {
  const found = new Map<string, Scalar>();
  forEachTopLevelField(body, (key, start, end) => {
    const first = body[start];
    if (!keys.has(key) || first === OPEN_OBJECT || first === OPEN_ARRAY) return false;
    const value = scalarAt(body, start, end);
    // Bytes that are not JSON end the walk: what was read before stands.
    if (value === undefined) return true;
    found.set(key, value);
    return false;
  });
  return found;
}

/** The few keys `topLevelField` is asked for, as bytes. */
const KEY_BYTES = new Map<string, Buffer>();

/** The scalar value of top-level field `key` (the walk stops there); undefined: none, or not a scalar. */
export function topLevelField(body: Buffer, key: string): Scalar | undefined {
  // Keys are compared as bytes: read per request (`"stream"`), the walk allocates nothing it skips.
  let wanted = KEY_BYTES.get(key);
  if (wanted === undefined) {
    wanted = Buffer.from(key);
    KEY_BYTES.set(key, wanted);
  }
  let value: Scalar | undefined;
  walkTopLevel(body, (keyStart, keyEnd, start, end) => {
    if (keyEnd - keyStart !== wanted.length || body.compare(wanted, 0, wanted.length, keyStart, keyEnd) !== 0)
      return false;
    value = scalarAt(body, start, end);
    return true;
  });
  return value;
}

/** The scalar in `[start, end)`; undefined for an object, an array or bytes that are not JSON. */
function scalarAt(body: Buffer, start: number, end: number): Scalar | undefined {
  const first = body[start];
  if (first === OPEN_OBJECT || first === OPEN_ARRAY) return undefined;
  // The flags read per request, without a parse.
  if (end - start === 4 && body.toString('latin1', start, end) === 'true') return true;
  if (end - start === 5 && body.toString('latin1', start, end) === 'false') return false;
  try {
    return JSON.parse(body.toString('utf8', start, end)) as Scalar;
  } catch {
    return undefined;
  }
}
