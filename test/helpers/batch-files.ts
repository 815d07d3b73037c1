/**
 * Batch files of a real job's size, for tests and bench:batch-scale: inputs of N requests with
 * prompts of a given size, and outputs already holding the answers of the first K (as after a
 * kill), written as streams; and a streamed check of an output too large to read whole.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createWriteStream, readFileSync } from 'node:fs';
import { lineBatches } from '../../src/batch/line-reader.js';

/** Writes `count` lines `lineOf(0..count-1)` to `path` as a stream; the bytes written. */
export async function writeLines(path: string, count: number, lineOf: (i: number) => string): Promise<number> {
  const out = createWriteStream(path);
  let bytes = 0;
  let text = '';
  const flush = async () => {
    bytes += Buffer.byteLength(text);
    if (!out.write(text)) await once(out, 'drain');
    text = '';
  };
  for (let i = 0; i < count; i++) {
    text += `${lineOf(i)}\n`;
    if (text.length >= 1 << 20) await flush();
  }
  await flush();
  out.end();
  await once(out, 'close');
  return bytes;
}

/** A chat request `req-i` whose prompt is about `promptBytes` long. */
export function promptLineOf(promptBytes: number, maxTokens = 4): (i: number) => string {
  const filler = 'lorem ipsum dolor sit amet '.repeat(Math.ceil(promptBytes / 27)).slice(0, promptBytes);
  const head = '{"custom_id":"req-';
  const middle = `","method":"POST","url":"/v1/chat/completions","body":{"model":"default","max_tokens":${maxTokens},"messages":[{"role":"user","content":"question `;
  return (i) => `${head}${i}${middle}${i}: ${filler}"}]}}`;
}

/** An output line answering `req-i`, as the batch writes it, with an answer of about `answerBytes`. */
export function answerLineOf(answerBytes: number): (i: number) => string {
  const content = 'x'.repeat(Math.max(1, answerBytes));
  return (i) => {
    const hex = i.toString(16).padStart(32, '0');
    return `{"id":"batch_req_${hex}","custom_id":"req-${i}","response":{"status_code":200,"request_id":"req_${hex}","body":{"id":"chatcmpl-${hex}","object":"chat.completion","created":0,"model":"default","choices":[{"index":0,"message":{"role":"assistant","content":"${content}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":4,"total_tokens":12}}},"error":null}`;
  };
}

/**
 * An output holding the answers of `req-0..count-1` in about `totalBytes`, and a torn last line (a
 * kill mid-write); the bytes of its whole lines.
 */
export async function writeAnsweredOutput(path: string, count: number, totalBytes: number): Promise<number> {
  const lineOf = answerLineOf(Math.floor(totalBytes / count) - 260);
  const whole = await writeLines(path, count, lineOf);
  const torn = lineOf(count).slice(0, 100);
  const out = createWriteStream(path, { flags: 'a' });
  out.end(torn);
  await once(out, 'close');
  return whole;
}

/**
 * Reads an output of any size as a stream: every `req-0..count-1` exactly once, each a 200 chat
 * answer with content; the lines it holds.
 */
export async function assertCompleteOutputStreamed(path: string, count: number): Promise<number> {
  const seen = new Uint8Array(count);
  let lines = 0;
  for await (const batch of lineBatches(path)) {
    for (const line of batch.lines) {
      assert.ok(line.complete, `line ${line.number} is whole`);
      const record = JSON.parse(line.bytes.toString('utf8')) as {
        id: string;
        custom_id: string;
        response: { status_code: number; body: { choices?: Array<{ message?: { content?: string } }> } } | null;
        error: unknown;
      };
      const match = /^req-(\d+)$/.exec(record.custom_id);
      assert.ok(match, `line ${line.number}: custom_id ${record.custom_id}`);
      const i = Number(match[1]);
      assert.ok(i < count, `line ${line.number}: ${record.custom_id} is of the input`);
      assert.equal(seen[i], 0, `${record.custom_id} written twice`);
      seen[i] = 1;
      assert.match(record.id, /^batch_req_/);
      assert.equal(record.error, null, record.custom_id);
      assert.equal(record.response?.status_code, 200, record.custom_id);
      const content = record.response?.body.choices?.[0]?.message?.content;
      assert.ok(typeof content === 'string' && content.length > 0, `${record.custom_id}: an answer`);
      lines++;
    }
  }
  assert.equal(lines, count, `${count} lines`);
  return lines;
}

/** VmHWM (peak resident set) of `pid` in bytes; 0 once it is gone. */
export function peakRssBytes(pid: number): number {
  try {
    const match = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Follows a process's peak resident set while it lives (read every `everyMs`: its last reading is kept). */
export function watchPeakRss(pid: number, everyMs = 100): { peak: () => number; stop: () => number } {
  let peak = 0;
  const read = () => {
    peak = Math.max(peak, peakRssBytes(pid));
  };
  read();
  const timer = setInterval(read, everyMs);
  return {
    peak: () => peak,
    stop: () => {
      read();
      clearInterval(timer);
      return peak;
    },
  };
}
