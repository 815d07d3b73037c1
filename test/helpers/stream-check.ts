/**
 * Checks a client's streamed answer from the simulator for a seamless whole, from the client side
 * only: the sim's answer is a fixed sequence of one-word tokens (src/sim/text-gen.ts), and a
 * continuation goes on from the token number its prompt already holds, so a stream cut and
 * continued any number of times is whole exactly when its text equals `outputText(n)` for the
 * `n` tokens it reports: no gap, no repeat. A soak ledger can run the same check per request.
 */
import assert from 'node:assert/strict';
import { outputText } from '../../src/sim/text-gen.js';

export interface StreamSummary {
  /** Every `data:` payload but `[DONE]`, parsed. */
  events: Array<Record<string, unknown>>;
  comments: string[];
  text: string;
  finishReasons: string[];
  roles: number;
  done: number;
  errors: number;
  /** The last `usage` seen. */
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  ids: Set<unknown>;
}

interface SseEvent {
  [key: string]: unknown;
  id?: unknown;
  error?: unknown;
  object?: unknown;
  usage?: StreamSummary['usage'];
  choices?: Array<{ text?: unknown; delta?: { content?: unknown; role?: unknown }; finish_reason?: string | null }>;
}

/** Reads an SSE body (chat or completions chunks) as the client received it. */
export function readStream(body: string): StreamSummary {
  const out: StreamSummary = {
    events: [],
    comments: [],
    text: '',
    finishReasons: [],
    roles: 0,
    done: 0,
    errors: 0,
    usage: null,
    ids: new Set(),
  };
  for (const block of body.split('\n\n')) {
    if (block.trim() === '') continue;
    if (block.startsWith(':')) {
      out.comments.push(block.slice(1).trim());
      continue;
    }
    const data = block.replace(/^data: ?/, '');
    if (data === '[DONE]') {
      out.done++;
      continue;
    }
    const event = JSON.parse(data) as SseEvent;
    out.events.push(event);
    if (event.error !== undefined || event.object === 'error') {
      out.errors++;
      continue;
    }
    out.ids.add(event.id);
    if (event.usage) out.usage = event.usage;
    for (const choice of event.choices ?? []) {
      const piece = choice.delta ? choice.delta.content : choice.text;
      if (typeof piece === 'string') out.text += piece;
      if (choice.delta?.role) out.roles++;
      if (choice.finish_reason) out.finishReasons.push(choice.finish_reason);
    }
  }
  return out;
}

/** `text` is the sim's uncut answer of `tokens` tokens: nothing repeated, nothing missing. */
export function assertSeamless(text: string, tokens: number, what = 'the streamed text'): void {
  assert.equal(text, outputText(tokens), `${what} is the uncut answer of ${tokens} tokens`);
}

/** One whole stream: no error event, one finish_reason, one [DONE], one role, one id; its text seamless. */
export function assertWholeStream(summary: StreamSummary, tokens: number): void {
  assert.equal(summary.errors, 0, 'no error event');
  assert.equal(summary.finishReasons.length, 1, 'exactly one finish_reason');
  assert.equal(summary.done, 1, 'exactly one [DONE]');
  assert.ok(summary.roles <= 1, 'no second role');
  assert.equal(summary.ids.size, 1, 'one id across the stream');
  assertSeamless(summary.text, tokens);
}
