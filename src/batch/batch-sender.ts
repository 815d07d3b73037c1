/**
 * Sends one batch request to fleetgate's URL (undici) and says what came of it, in the terms the
 * runner decides on: an answer to keep (2xx), an answer that failed for good (4xx), one worth
 * another attempt (5xx, 408, a body cut short or not JSON), or a request fleetgate never sent
 * anywhere (refused connection, 429, 503 with no backend ready): that one costs no attempt, since
 * no engine saw it. Chat and completions lines are sent streamed and assembled back into the
 * non-streamed answer (stream-assembler.ts) unless `streamUpstream` is off: a stream cut by a dying
 * engine is resumed on another by fleetgate, where a non-streamed request starts over.
 */
import { randomUUID } from 'node:crypto';
import { Agent, errors, request } from 'undici';
import { isObject } from '../config/json-object.js';
import { BATCH_HEADER } from '../http/batch-header.js';
import { isEventStream } from '../http/event-stream.js';
import type { BatchRequest } from './batch-input.js';
import { type StreamApi, StreamAssembler, streamable, streamedBody } from './stream-assembler.js';

export type SendOutcome =
  | { kind: 'answer'; status: number; requestId: string; body: unknown; tokens: number }
  | { kind: 'rejected'; status: number; requestId: string; body: unknown }
  | { kind: 'retry'; reason: string; status: number | null; requestId: string | null; body: unknown }
  | { kind: 'not_sent'; reason: string };

/** `headers`: more to send (a trace's `traceparent`). */
export type Send = (
  request: BatchRequest,
  signal: AbortSignal,
  headers?: Record<string, string>,
) => Promise<SendOutcome>;

export interface SenderOptions {
  /** fleetgate's base URL, ending in `/`. */
  base: URL;
  /** `X-Fleetgate-Priority`; null sends none (fleetgate's default class applies). */
  priorityClass: string | null;
  /** Sent as `Authorization: Bearer ...` when fleetgate has `auth.api_keys`. */
  apiKey: string | null;
  /** Longest wait for a whole answer, ms. */
  timeoutMs: number;
  connections: number;
  /** Send chat and completions lines streamed and assemble the answer (default true). */
  streamUpstream?: boolean;
}

/** Completion tokens of an OpenAI answer (prompt tokens for embeddings), for tokens/s. */
function tokensOf(body: unknown): number {
  const usage = (body as { usage?: { completion_tokens?: unknown; prompt_tokens?: unknown } } | null)?.usage;
  const n = usage?.completion_tokens ?? usage?.prompt_tokens;
  return typeof n === 'number' && Number.isFinite(n) ? n : 0;
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

function errorTypeIn(body: unknown): string | null {
  const type = (body as { error?: { type?: unknown } } | null)?.error?.type;
  return typeof type === 'string' ? type : null;
}

/** Network failures before fleetgate took the request: nothing reached an engine. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

export class BatchSender {
  readonly #agent: Agent;
  readonly #opts: SenderOptions;
  #streamed = 0;

  constructor(opts: SenderOptions) {
    this.#opts = opts;
    this.#agent = new Agent({
      connections: opts.connections,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      keepAliveTimeout: 30_000,
    });
  }

  /** Requests sent streamed upstream so far (attempts, retries included). */
  get streamed(): number {
    return this.#streamed;
  }

  /** The API to stream `batchRequest` under and the body to send, or null: sent as the line wrote it. */
  #streamPlan(batchRequest: BatchRequest): { api: StreamApi; body: string } | null {
    if (this.#opts.streamUpstream === false) return null;
    const parsed = parseJson(batchRequest.body.toString('utf8'));
    if (!parsed.ok || !isObject(parsed.value)) return null;
    const api = streamable(batchRequest.url, parsed.value);
    return api === null ? null : { api, body: JSON.stringify(streamedBody(parsed.value)) };
  }

  readonly send: Send = async (batchRequest, signal, extra) => {
    const url = new URL(batchRequest.url.slice(1), this.#opts.base);
    const headers: Record<string, string> = { ...extra, 'content-type': 'application/json', [BATCH_HEADER]: '1' };
    const plan = this.#streamPlan(batchRequest);
    let assembled: ReturnType<StreamAssembler['finish']> | null = null;
    if (this.#opts.priorityClass !== null) headers['x-fleetgate-priority'] = this.#opts.priorityClass;
    if (this.#opts.apiKey !== null) headers.authorization = `Bearer ${this.#opts.apiKey}`;
    let status: number;
    let text: string;
    let requestId: string;
    try {
      const res = await request(url, {
        method: 'POST',
        headers,
        body: plan === null ? batchRequest.body : plan.body,
        dispatcher: this.#agent,
        signal,
      });
      if (plan !== null) this.#streamed++;
      status = res.statusCode;
      requestId = String(res.headers['x-request-id'] ?? `req_${randomUUID().replaceAll('-', '')}`);
      const sse = isEventStream(res.headers);
      try {
        if (plan !== null && sse && status >= 200 && status < 300) {
          const assembler = new StreamAssembler(plan.api);
          res.body.setEncoding('utf8');
          for await (const chunk of res.body) assembler.push(chunk as string);
          assembled = assembler.finish();
          text = '';
        } else {
          text = await res.body.text();
        }
      } catch (error) {
        return {
          kind: 'retry',
          reason: `answer cut short: ${(error as Error).message}`,
          status,
          requestId,
          body: null,
        };
      }
    } catch (error) {
      if (signal.aborted) throw error;
      const code = (error as { code?: string }).code ?? '';
      const message = (error as Error).message;
      if (NOT_SENT_CODES.has(code)) return { kind: 'not_sent', reason: `cannot reach fleetgate: ${code}` };
      if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
        return {
          kind: 'retry',
          reason: `no answer in ${this.#opts.timeoutMs} ms`,
          status: null,
          requestId: null,
          body: null,
        };
      }
      return { kind: 'retry', reason: `${code || 'error'}: ${message}`, status: null, requestId: null, body: null };
    }
    if (assembled !== null) {
      if (!assembled.ok) return { kind: 'retry', reason: assembled.reason, status, requestId, body: assembled.body };
      return { kind: 'answer', status, requestId, body: assembled.body, tokens: tokensOf(assembled.body) };
    }
    const parsed = parseJson(text);
    const body = parsed.ok ? parsed.value : text;
    if (status >= 200 && status < 300) {
      if (!parsed.ok) return { kind: 'retry', reason: 'answer is not JSON (cut?)', status, requestId, body: null };
      return { kind: 'answer', status, requestId, body, tokens: tokensOf(body) };
    }
    const type = errorTypeIn(body);
    if (status === 429 || (status === 503 && (type === 'fleet_unavailable' || type === null))) {
      return { kind: 'not_sent', reason: `fleetgate answered ${status}${type ? ` ${type}` : ''}` };
    }
    if (status >= 500 || status === 408) return { kind: 'retry', reason: `HTTP ${status}`, status, requestId, body };
    return { kind: 'rejected', status, requestId, body };
  };

  close(): Promise<void> {
    return this.#agent.close();
  }
}
