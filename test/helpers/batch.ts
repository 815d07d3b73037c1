/** Batch test fixtures: an OpenAI Batch input file, and what an output file holds. */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimServer } from '../../src/sim/index.js';

type After = { after(fn: () => unknown): void };

/** A fresh temporary directory, removed after the test. */
export function tempDir(t: After, prefix = 'fleetgate-batch-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** One Batch input line. */
export function batchLine(customId: string, url: string, body: Record<string, unknown>): string {
  return JSON.stringify({ custom_id: customId, method: 'POST', url, body });
}

/** One Batch input line: a short chat completion. */
export function chatLine(customId: string, maxTokens = 4): string {
  return batchLine(customId, '/v1/chat/completions', {
    model: 'default',
    max_tokens: maxTokens,
    messages: [{ role: 'user', content: `question ${customId}` }],
  });
}

/** One Batch input line: a short text completion. */
export function completionLine(customId: string, maxTokens = 4): string {
  return batchLine(customId, '/v1/completions', {
    model: 'default',
    max_tokens: maxTokens,
    prompt: `text ${customId}`,
  });
}

/** One Batch input line: embeddings of two texts. */
export function embeddingLine(customId: string): string {
  return batchLine(customId, '/v1/embeddings', {
    model: 'default',
    input: [`first ${customId}`, `second ${customId}`],
  });
}

/** `count` chat requests `req-0`.. into `dir/input.jsonl`; returns its path. */
export function writeChatInput(dir: string, count: number, maxTokens = 4): string {
  const path = join(dir, 'input.jsonl');
  const lines = Array.from({ length: count }, (_, i) => chatLine(`req-${i}`, maxTokens));
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

/** The parts of an OpenAI answer body the tests look at (chat, completions or embeddings). */
export interface AnswerBody {
  object?: string;
  choices?: Array<{ message?: { content?: string }; text?: string }>;
  data?: Array<{ object?: string; embedding?: unknown; index?: number }>;
  usage?: { prompt_tokens?: number };
}

export interface OutputLine {
  id: string;
  custom_id: string;
  response: {
    status_code: number;
    request_id: string;
    body: AnswerBody;
  } | null;
  error: unknown;
}

/** The whole lines of a JSONL file (a torn last line is left out), parsed. */
export function readJsonl(path: string): OutputLine[] {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  const whole = text.slice(0, text.lastIndexOf('\n') + 1);
  return whole
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as OutputLine);
}

/** Every id of `req-0..count-1` exactly once, each a 200 chat answer with content. */
export function assertCompleteOutput(lines: OutputLine[], count: number): void {
  const ids = lines.map((l) => l.custom_id);
  assert.equal(new Set(ids).size, ids.length, 'no custom_id twice');
  assert.equal(ids.length, count, `${count} lines`);
  const present = new Set(ids);
  for (let i = 0; i < count; i++) assert.ok(present.has(`req-${i}`), `req-${i} present`);
  for (const line of lines) {
    assert.equal(line.error, null, line.custom_id);
    assert.equal(line.response?.status_code, 200, line.custom_id);
    assert.match(line.id, /^batch_req_/);
    assert.ok(line.response?.request_id, 'a request id');
    assertAnswerShape('/v1/chat/completions', line.response?.body, line.custom_id);
  }
}

/** The answer body has the shape its url answers with: a chat message, a completion text, or one vector per input. */
export function assertAnswerShape(url: string, body: AnswerBody | undefined, what: string): void {
  if (url === '/v1/embeddings') {
    assert.equal(body?.object, 'list', what);
    assert.ok(Array.isArray(body?.data) && body.data.length > 0, `${what}: data`);
    body.data.forEach((item, i) => {
      assert.equal(item.object, 'embedding', what);
      assert.equal(item.index, i, `${what}: index`);
      assert.ok(
        Array.isArray(item.embedding) && item.embedding.length > 0 && item.embedding.every(Number.isFinite),
        `${what}: a vector of numbers`,
      );
    });
    assert.ok((body.usage?.prompt_tokens ?? 0) > 0, `${what}: usage.prompt_tokens`);
    return;
  }
  const choice = body?.choices?.[0];
  const text = url === '/v1/chat/completions' ? choice?.message?.content : choice?.text;
  assert.ok(typeof text === 'string' && text.length > 0, `${what}: an answer for ${url}`);
}

/** Requests to `path` the sims received, together. */
export function requestsTo(sims: SimServer[], path: string): number {
  return sims.reduce((sum, sim) => sum + (sim.counters.byPath[path] ?? 0), 0);
}

/** Generation requests the sims received, together. */
export function generationRequests(sims: SimServer[]): number {
  return requestsTo(sims, '/v1/chat/completions');
}
