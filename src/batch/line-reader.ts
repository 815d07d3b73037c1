/**
 * A JSONL file read as a stream of lines, a chunk at a time: what is held is one chunk and the line
 * it cuts, never the file. The read stream's own buffer is the read-ahead, and async iteration of
 * its chunks gives backpressure (a slow consumer pauses the reads).
 */
import { createReadStream } from 'node:fs';

interface FileLine {
  /** The bytes of the line, without its `\n`. */
  readonly bytes: Buffer;
  /** 1-based. */
  readonly number: number;
  /** False for a last line with no `\n` after it. */
  readonly complete: boolean;
}

export interface LineBatch {
  lines: FileLine[];
  /** Bytes of the file read so far. */
  bytesRead: number;
}

/**
 * Bytes read at a time. Each chunk's lines are garbage once handled; small chunks keep what the
 * collector lets pile up small (peak memory: docs/benchmarks.md, bench:batch-scale).
 */
const CHUNK_BYTES = 1 << 18;

/** The file's lines, a chunk's worth per batch; `end` (exclusive) stops at that byte. */
export async function* lineBatches(path: string, end?: number): AsyncGenerator<LineBatch> {
  // The start of a line that runs past the chunks read so far, in pieces (a long line is copied once).
  let carry: Buffer[] = [];
  let number = 0;
  let bytesRead = 0;
  const stream = createReadStream(path, {
    highWaterMark: CHUNK_BYTES,
    ...(end === undefined ? {} : { end: end - 1 }),
  });
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    bytesRead += chunk.length;
    const lines: FileLine[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const head = chunk.subarray(start, nl);
      const bytes = carry.length === 0 ? head : Buffer.concat([...carry, head]);
      carry = [];
      lines.push({ bytes, number: ++number, complete: true });
      start = nl + 1;
    }
    // A copy: a short remainder must not pin the whole chunk while the next ones are read.
    if (start < chunk.length) carry.push(start === 0 ? chunk : Buffer.from(chunk.subarray(start)));
    yield { lines, bytesRead };
  }
  if (carry.length > 0)
    yield { lines: [{ bytes: Buffer.concat(carry), number: ++number, complete: false }], bytesRead };
}
