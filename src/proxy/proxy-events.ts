/** What the proxy tells observers (metrics, access log) about each request and attempt. */
import { EventEmitter } from 'node:events';
import type { TokenObserver } from './token-timing.js';

export type RequestOutcome =
  | 'ok'
  | 'client_abort'
  | 'upstream_error'
  | 'queue_timeout'
  | 'queue_full'
  /** The request named a model nobody serves, or none where several are served. */
  | 'model_refused'
  | 'shutdown';

export interface RequestRecord {
  /** The backend that answered (or the last one tried); null if none was reached. */
  backend: string | null;
  method: string;
  path: string;
  status: number;
  durationMs: number;
  /** Time to the first response byte written to the client; null if none. */
  ttfbMs: number | null;
  /** Its priority class; null where none was read (a refused request). */
  priorityClass: string | null;
  /** Time from when its body was read until its latest attempt left the queue; null if none did. */
  queueMs: number | null;
  bytes: number;
  /** Attempts beyond the first. */
  retries: number;
  /** Continuations of its stream after a cut (proxy/stream-resume.ts). */
  resumes: number;
  /** With resumes: the backends that streamed it, in order. */
  backends: readonly string[];
  outcome: RequestOutcome;
  /** Completion tokens the client got (ProxiedRequest.completionTokens); null when nothing told. */
  completionTokens: number | null;
  streamed: boolean;
}

export interface ProxyEvents {
  request: [RequestRecord];
  /** A failed attempt, by error kind (`connect_refused`, `reset`, `headers_timeout`, ...). */
  upstream_error: [{ backend: string; kind: string }];
  retry: [{ backend: string }];
  /** A cut stream continued elsewhere; `backend` is the one that cut it, `reason` the failure's kind. */
  stream_resume: [{ backend: string; reason: string }];
  /** A cut stream that was not continued, and why (continuation.ts ResumeRefusal). */
  stream_resume_failed: [{ reason: string }];
  /** A request refused by `rate_limit`; `by` says what identified the client. */
  rate_limited: [{ by: 'api_key' | 'address' }];
}

export class ProxyEventBus extends EventEmitter<ProxyEvents> {
  /**
   * Told of every generated token as the client receives it (token-timing.ts): a bound series per
   * backend rather than an event per token. Null: token timing is not read.
   */
  tokens: TokenObserver | null = null;
}
