/**
 * The soak's clients: each sends one request and settles its ledger row with what it received. Two
 * kinds of client: plain HTTP (undici, with a hand-read SSE stream, so that a cut stream, an
 * `event: error` and a missing `[DONE]` are each seen for what they are) and the `openai` npm SDK
 * (maxRetries 0: a retry would hide a failure from the ledger). Modes: read normally, read a stream
 * slowly (a pause per chunk), or abort mid-stream on purpose.
 */
import OpenAI from 'openai';
import { request } from 'undici';
import type { Ledger, LedgerRow } from './ledger.js';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const SLOW_READ_PAUSE_MS = 150;

export interface SendContext {
  url: string;
  ledger: Ledger;
  now: () => number;
  signal: AbortSignal;
}

type Result = Pick<LedgerRow, 'outcome'> & Partial<LedgerRow>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function bodyFor(row: LedgerRow): Record<string, unknown> {
  const stream = row.kind.endsWith('-stream');
  const common = { model: MODEL, max_tokens: row.tokens, stream, temperature: 0 };
  return row.kind.startsWith('chat')
    ? { ...common, messages: [{ role: 'user', content: `soak request ${row.id}` }] }
    : { ...common, prompt: `soak request ${row.id}` };
}

function pathFor(row: LedgerRow): string {
  return row.kind.startsWith('chat') ? '/v1/chat/completions' : '/v1/completions';
}

/** The text a chunk or body adds: chat `delta.content` / `message.content`, completions `text`. */
function textOf(json: unknown): string {
  const choice = (json as { choices?: Array<Record<string, unknown>> })?.choices?.[0];
  if (choice === undefined) return '';
  const delta = choice.delta as { content?: unknown } | undefined;
  const message = choice.message as { content?: unknown } | undefined;
  const value = delta?.content ?? message?.content ?? choice.text;
  return typeof value === 'string' ? value : '';
}

function errorTypeIn(text: string, status: number): string {
  try {
    const type = (JSON.parse(text) as { error?: { type?: unknown } }).error?.type;
    if (typeof type === 'string' && type !== '') return type;
  } catch {}
  return `http_${status}`;
}

function engineOf(headers: Record<string, string | string[] | undefined>): string[] {
  const engine = headers['x-sim-engine'];
  return typeof engine === 'string' ? [engine] : [];
}

/** Reads an SSE body: the whole text at `[DONE]`, a clear error at an error event, else unclear. */
async function readStream(row: LedgerRow, body: AsyncIterable<Buffer>, abort: () => void): Promise<Result> {
  let buffer = '';
  let text = '';
  let chunks = 0;
  for await (const chunk of body) {
    buffer += chunk.toString('utf8');
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trim())
        .join('\n');
      if (/^event: ?error$/m.test(event)) return { outcome: 'error', errorType: errorTypeIn(data, 0), text };
      if (data === '[DONE]') return { outcome: 'complete', text };
      if (data === '') continue;
      let json: unknown;
      try {
        json = JSON.parse(data);
      } catch {
        return { outcome: 'unclear', errorType: 'bad_sse_json', text };
      }
      // fleetgate ends a cut stream with one `data: {"error": {...}}` event and no [DONE].
      const error = (json as { error?: { type?: unknown } }).error;
      if (error !== undefined) return { outcome: 'error', errorType: errorTypeIn(data, 0), text };
      text += textOf(json);
    }
    chunks++;
    if (row.mode === 'abort' && chunks >= 2) {
      abort();
      return { outcome: 'aborted', text };
    }
    if (row.mode === 'slow-reader') await sleep(SLOW_READ_PAUSE_MS);
  }
  return { outcome: 'unclear', errorType: 'stream_ended_without_done_or_error', text };
}

function failureOf(error: unknown, signal: AbortSignal): Result {
  if (signal.aborted) return { outcome: 'lost' };
  const code = (error as { code?: string }).code ?? (error as Error).name ?? 'error';
  return { outcome: 'unclear', errorType: `client_${code}` };
}

/** Plain HTTP (undici). */
export async function sendHttp(row: LedgerRow, ctx: SendContext): Promise<Result> {
  const local = new AbortController();
  const onAbort = () => local.abort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const res = await request(`${ctx.url}${pathFor(row)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(bodyFor(row)),
      signal: local.signal,
    });
    const backends = engineOf(res.headers);
    if (res.statusCode >= 400) {
      const text = await res.body.text();
      return { outcome: 'error', status: res.statusCode, errorType: errorTypeIn(text, res.statusCode), backends };
    }
    if (row.kind.endsWith('-stream')) {
      const result = await readStream(row, res.body, () => local.abort());
      return { ...result, status: res.statusCode, backends };
    }
    const raw = await res.body.text();
    try {
      return { outcome: 'complete', status: res.statusCode, text: textOf(JSON.parse(raw)), backends };
    } catch {
      return { outcome: 'unclear', status: res.statusCode, errorType: 'body_not_json', backends };
    }
  } catch (error) {
    if (row.mode === 'abort' && local.signal.aborted && !ctx.signal.aborted) return { outcome: 'aborted' };
    return failureOf(error, ctx.signal);
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

/** The `openai` SDK: chat, streamed or not. */
export async function sendSdk(row: LedgerRow, ctx: SendContext): Promise<Result> {
  const client = new OpenAI({ baseURL: `${ctx.url}/v1`, apiKey: 'soak', maxRetries: 0, timeout: 10 * 60_000 });
  const local = new AbortController();
  const onAbort = () => local.abort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  const messages = [{ role: 'user' as const, content: `soak request ${row.id}` }];
  try {
    if (row.kind === 'chat-stream') {
      const { data: stream, response } = await client.chat.completions
        .create({ model: MODEL, messages, max_tokens: row.tokens, stream: true }, { signal: local.signal })
        .withResponse();
      const backends = engineOf(Object.fromEntries(response.headers));
      let text = '';
      let chunks = 0;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        chunks++;
        if (row.mode === 'abort' && chunks >= 2) {
          local.abort();
          return { outcome: 'aborted', text, backends };
        }
        if (row.mode === 'slow-reader') await sleep(SLOW_READ_PAUSE_MS);
      }
      return { outcome: 'complete', text, backends, status: response.status };
    }
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages, max_tokens: row.tokens }, { signal: local.signal })
      .withResponse();
    const backends = engineOf(Object.fromEntries(response.headers));
    return { outcome: 'complete', text: data.choices[0]?.message?.content ?? '', backends, status: response.status };
  } catch (error) {
    if (error instanceof OpenAI.APIUserAbortError)
      return ctx.signal.aborted ? { outcome: 'lost' } : { outcome: 'aborted' };
    if (error instanceof OpenAI.APIError && error.status !== undefined) {
      const type = (error.error as { type?: string } | undefined)?.type ?? error.type ?? `http_${error.status}`;
      return { outcome: 'error', status: error.status, errorType: type };
    }
    // A stream's `event: error` reaches the SDK as an APIError without a status.
    if (error instanceof OpenAI.APIError) {
      const type = (error.error as { type?: string } | undefined)?.type ?? error.type;
      return type ? { outcome: 'error', errorType: type } : { outcome: 'unclear', errorType: 'sdk_error_untyped' };
    }
    return failureOf(error, ctx.signal);
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
}
