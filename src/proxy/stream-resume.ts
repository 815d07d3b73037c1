/**
 * Stream resume (docs/stream-resume.md): a streamed chat or completions answer cut mid-generation
 * (the backend died, sent an error event, was ejected by the progress watchdog or drained past its
 * deadline, or the stream ended without `[DONE]`) continues on another ready backend in the same client stream, as NVIDIA Dynamo's
 * request migration does. The continuation goes through fleetgate's own dispatcher and queue, so
 * readiness, caps, the request's model queue and priority class apply; it waits at most
 * `retry.resume_wait` for a backend, and a stream is continued at most `retry.resume_limit` times.
 *
 * The stream's one reader, its journal (stream-journal.ts), is made by the answer's owner and read
 * by the relay for every chunk (whole events, the text and tokens sent, an error event, `[DONE]`);
 * the relay calls this module only with `resume(failure)` when the attempt ended early. The pure
 * parts (eligibility, the continuation body) are in continuation.ts and token-continuation.ts.
 */
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { isObject } from '../config/json-object.js';
import type { BackendKind } from '../config/types.js';
import { isEventStream } from '../http/event-stream.js';
import type { ChatModel } from '../model/chat-model.js';
import type { UpstreamFailure } from '../routing/dispatch/upstream-failures.js';
import { AdmissionError } from '../routing/queue/wait-queue.js';
import type { ContextCarrier, RequestContext } from '../routing/request-context.js';
import {
  type Body,
  bodyRefusal,
  continuationBody,
  type ResumeApi,
  type ResumeRefusal,
  remainingBudget,
} from './continuation.js';
import type { ProxyEventBus } from './proxy-events.js';
import { chatFromRaw } from './raw-to-chat.js';
import type { StreamJournal } from './stream-journal.js';
import { type TokenPlan, tokenPlan } from './token-continuation.js';

/**
 * The `reason`s of `fleetgate_stream_resumes_total` exported at 0 for every backend from its start
 * (docs/stream-resume.md): the usual ways a streamed attempt is cut. Any other failure kind a resume
 * follows (`UpstreamFailure.kind`, e.g. `headers_timeout`) is counted under its own name too.
 */
export const RESUME_TRIGGERS = [
  'reset',
  'error_event',
  'closed',
  'no_progress',
  'stream_idle_timeout',
  'drain_deadline',
] as const;

/** What the relay does next after a cut. */
export type ResumeStep =
  /** Relay this body (the continuation's, rewritten by `pass`). */
  | { type: 'continue'; body: Readable }
  /** The generation was whole (or its budget ran out): write these last events and end. */
  | { type: 'end'; tail: string }
  /** Not continued: the error event stands; `event` is the upstream's own when it sent one. */
  | { type: 'fail'; event: Buffer | null };

export interface ResumeSettings {
  /** The fleet: the continuation's context goes with its one dispatch. */
  dispatcher: Pick<Dispatcher, 'request'> & ContextCarrier;
  /** The origin the dispatcher ignores (it picks the backend). */
  origin: string;
  events: ProxyEventBus;
  /** `retry.resume_limit`. */
  limit: number;
  /** `retry.resume_wait`, ms. */
  waitMs: number;
  /** Token-exact resume of chat streams (config `model`); absent, every stream resumes as text. */
  tokens?: TokenResumeSettings;
}

export interface TokenResumeSettings {
  /** The tokenizer and chat template of the model a body names; null: not known. */
  modelFor(body: Body): ChatModel | null;
  /** The engine kind of a backend: which raw API continues its streams. */
  kindOf(backend: string): BackendKind;
}

export interface ResumableRequest {
  api: ResumeApi;
  path: string;
  /**
   * The body as sent upstream (with the class's `priority` stamped in, where configured), as JSON:
   * parsed once per request (proxy/request-context-from.ts); a continuation copies, never mutates it.
   */
  json: () => unknown;
  /** The upstream request's headers as fleetgate sent them. */
  headers: Record<string, unknown>;
  /** The original request's context: its class, model queue, tried backends and client. */
  context: RequestContext;
}

/** The upstream sent an error event mid-stream. */
export const ERROR_EVENT_FAILURE: UpstreamFailure = {
  kind: 'error_event',
  outcome: null,
  status: 502,
  retryable: false,
  message: 'backend sent an error event mid-stream',
};

/** The upstream's stream ended cleanly but before `[DONE]`. */
export const EARLY_END_FAILURE: UpstreamFailure = {
  kind: 'closed',
  outcome: null,
  status: 502,
  retryable: false,
  message: 'backend ended the stream before its final event',
};

export class StreamResume {
  readonly #settings: ResumeSettings;
  readonly #request: ResumableRequest;
  readonly #journal: StreamJournal;
  /** Backends of the attempts that reached the client, in order. */
  readonly #backends: string[];
  #parsed: Record<string, unknown> | null | undefined;
  #cancel: (() => void) | null = null;
  /** The client left: the relay has ended, and no continuation is wanted any more. */
  #clientLeft = false;

  /** `journal`: the stream's reader, made with `reframe` (only whole events go out). */
  constructor(settings: ResumeSettings, request: ResumableRequest, journal: StreamJournal) {
    this.#settings = settings;
    this.#request = request;
    this.#journal = journal;
    this.#backends = request.context.backend === null ? [] : [request.context.backend];
  }

  /** Continuations made so far. */
  get count(): number {
    return Math.max(0, this.#backends.length - 1);
  }

  get backends(): readonly string[] {
    return this.#backends;
  }

  /** Completion tokens that reached the client across the attempts (StreamJournal.tokens). */
  get tokens(): number {
    return this.#journal.tokens;
  }

  /** The client left while a continuation was being sought. */
  cancel(): void {
    this.#clientLeft = true;
    this.#cancel?.();
  }

  /** The current attempt was cut by `failure`: its span ends so, before its body is let go (a client abort). */
  cut(failure: UpstreamFailure): void {
    this.#request.context.trace?.cut(failure.kind);
  }

  /** The current attempt ended early with `failure`: continue the stream, end it, or give up. */
  async resume(failure: UpstreamFailure): Promise<ResumeStep> {
    const journal = this.#journal;
    const upstreamEvent = journal.errorEvent;
    const failed = this.#backends[this.#backends.length - 1] ?? 'unknown';
    const cutAt = performance.now();
    if (journal.finished) return { type: 'end', tail: 'data: [DONE]\n\n' };
    const plan = this.#tokenPlan(failed);
    const refusal = this.#refusal(plan !== null);
    if (refusal !== null) return this.#refused(refusal, upstreamEvent, failed, cutAt);
    const body = this.#parsed as Body;
    const generated = plan?.generatedTokens ?? journal.tokens;
    const budget = remainingBudget(body, generated);
    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    if (budget !== null && budget <= 0) return { type: 'end', tail: journal.lengthEnding(includeUsage) };
    const answer =
      plan === null
        ? await this.#dispatch(this.#request.path, continuationBody(this.#request.api, body, journal.text, generated))
        : await this.#dispatch(plan.path, plan.body);
    // A client that left meanwhile is no failure to resume: the relay already ended.
    if (this.#clientLeft || this.#request.context.clientGone.aborted) {
      if (typeof answer !== 'string') answer.stream.destroy();
      return { type: 'fail', event: null };
    }
    if (typeof answer === 'string') return this.#refused(answer, upstreamEvent, failed, cutAt);
    const { backend, stream } = answer;
    this.#backends.push(backend);
    this.#request.context.trace?.resumed(failed, backend, failure.kind, cutAt);
    this.#settings.events.emit('stream_resume', { backend: failed, reason: failure.kind });
    journal.beginAttempt(`: resumed on ${backend} after ${failed} failed\n\n`, generated);
    const field = journal.reasoningField ?? 'reasoning_content';
    return { type: 'continue', body: plan === null ? stream : chatFromRaw(stream, plan, field, includeUsage) };
  }

  /**
   * The token-exact continuation of a chat stream whose model is known and that streamed something
   * (with nothing streamed, the original body is sent again as it was); null: resume as text.
   */
  #tokenPlan(failed: string): TokenPlan | null {
    const settings = this.#settings.tokens;
    const journal = this.#journal;
    if (settings === undefined || this.#request.api !== 'chat') return null;
    if (this.#parsed === undefined) this.#parsed = asObject(this.#request.json());
    const body = this.#parsed;
    if (body === null || bodyRefusal('chat', body) !== null || body.continue_final_message === true) return null;
    if (journal.text === '' && journal.reasoning === '') return null;
    if (journal.refusal !== null && journal.refusal !== 'reasoning') return null;
    const model = settings.modelFor(body);
    const kind = settings.kindOf(failed);
    // An OpenAI-compatible server of unknown make has no raw API to continue tokens on.
    if (model === null || kind === 'openai') return null;
    return tokenPlan(model, kind, body, journal.reasoning, journal.text);
  }

  /** Why this stream cannot be continued; `tokenExact`: its reasoning can be re-entered. */
  #refusal(tokenExact: boolean): ResumeRefusal | null {
    const journal = this.#journal;
    if (this.#parsed === undefined) this.#parsed = asObject(this.#request.json());
    const fromBody = bodyRefusal(this.#request.api, this.#parsed);
    if (fromBody !== null) return fromBody;
    if (journal.refusal !== null && !(tokenExact && journal.refusal === 'reasoning')) return journal.refusal;
    if (this.count >= this.#settings.limit) return 'limit';
    return null;
  }

  #refused(reason: ResumeRefusal, event: Buffer | null, failed: string, cutAt: number): ResumeStep {
    this.#settings.events.emit('stream_resume_failed', { reason });
    this.#request.context.trace?.resumed(failed, null, reason, cutAt);
    return { type: 'fail', event };
  }

  /** Sends the continuation through the fleet; its backend and body, or why it got none. */
  async #dispatch(path: string, body: Body): Promise<{ backend: string; stream: Readable } | ResumeRefusal> {
    const original = this.#request.context;
    const context = original.forContinuation();
    const headers: Record<string, unknown> = { ...this.#request.headers };
    delete headers['content-length'];
    const gone = () => context.clientGone.abort();
    original.clientGone.addEventListener('abort', gone);
    // No backend in time: leave the queue (an abort there is an AdmissionError, a refusal below).
    let timedOut = false;
    const timer = setTimeout(() => {
      if (context.dispatchedAt !== null) return;
      timedOut = true;
      context.clientGone.abort();
    }, this.#settings.waitMs);
    this.#cancel = gone;
    try {
      const { dispatcher, origin } = this.#settings;
      const res = await dispatcher.carrying(context, () =>
        dispatcher.request({
          origin,
          path,
          method: 'POST',
          headers: headers as Record<string, string>,
          body: JSON.stringify(body),
        }),
      );
      const sse = isEventStream(res.headers);
      if (res.statusCode !== 200 || !sse) {
        res.body.resume();
        res.body.on('error', () => {});
        return 'rejected';
      }
      original.tried = context.tried;
      return { backend: context.backend ?? 'unknown', stream: res.body };
    } catch (error) {
      // The queue gave up (full, its own timeout) or `resume_wait` passed: no backend for it.
      const cause = (error as Error).cause ?? error;
      return timedOut || error instanceof AdmissionError || cause instanceof AdmissionError ? 'no_backend' : 'rejected';
    } finally {
      clearTimeout(timer);
      this.#cancel = null;
      if (!original.clientGone.aborted) original.clientGone.removeEventListener('abort', gone);
    }
  }
}

const asObject = (json: unknown): Record<string, unknown> | null => (isObject(json) ? json : null);
