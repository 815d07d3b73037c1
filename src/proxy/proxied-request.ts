/**
 * One proxied request, from its admission to its access record: the one owner of what the traffic
 * path knows of it. It holds its dispatch context (routing reads that, and only that: class and key,
 * model queue, the backend and retries the dispatcher writes back), its body as JSON as sent
 * upstream (parsed at most once, request-context-from.ts), the upstream headers, the stream's
 * resume, its trace and token clock; and it writes the record its ending emits, with the one count
 * of the completion tokens the client got (`completionTokens`).
 */
import type { RequestContext } from '../routing/request-context.js';
import { completionTokensIn } from './answer-tail.js';
import type { RequestHeaders } from './headers.js';
import type { RequestOutcome, RequestRecord } from './proxy-events.js';
import type { RequestSpan } from './request-trace.js';
import type { RelayResult } from './response-relay.js';
import type { StreamJournal } from './stream-journal.js';
import type { StreamResume } from './stream-resume.js';
import type { TokenClock } from './token-timing.js';

declare module 'fastify' {
  interface FastifyRequest {
    traffic: ProxiedRequest | null;
  }
}

export class ProxiedRequest {
  readonly context: RequestContext;
  readonly method: string;
  readonly path: string;
  /** performance.now() at admission; the dispatcher stamps `dispatchedAt` on the same clock. */
  readonly started: number;
  readonly trace: RequestSpan | null;
  /** Aborts the dispatch when the client's connection closes before the answer is written. */
  readonly onClientClose: () => void;
  /** The body as sent upstream, as JSON (the class's `priority` stamped in); null: no body. */
  sent: (() => unknown) | null = null;
  /** The headers as sent upstream: a stream's continuation is sent with them. */
  upstreamHeaders: RequestHeaders | null = null;
  /** Its stream may be continued after a cut (not with `x-fleetgate-resume: off`). */
  resumable = true;
  /** The answer is an SSE stream. */
  sse = false;
  resume: StreamResume | null = null;
  /** Its SSE answer's one reader (stream-journal.ts); null for what is no generation's stream. */
  reader: StreamJournal | null = null;
  /** Times its generated tokens (token-timing.ts); null for what is no generation's answer. */
  tokens: TokenClock | null = null;

  constructor(
    context: RequestContext,
    request: { method: string; path: string; started: number; trace: RequestSpan | null },
    onClientClose: () => void,
  ) {
    this.context = context;
    this.method = request.method;
    this.path = request.path;
    this.started = request.started;
    this.trace = request.trace;
    this.onClientClose = onClientClose;
  }

  /**
   * The request ended at `endedAt` with `status` and `outcome` (`relay`: when a body was relayed):
   * its token clock and trace end with it, and its access record, for the bus, is returned. All three
   * read the one count of its completion tokens (`completionTokens`).
   */
  end(status: number, outcome: RequestOutcome, relay: RelayResult | null, endedAt: number): RequestRecord {
    const tokens = this.completionTokens(relay);
    if (outcome === 'ok' && relay !== null) this.tokens?.finished(endedAt, tokens);
    const entry = this.#recordOf(status, outcome, relay, endedAt, tokens);
    this.#endTrace(entry, relay, endedAt);
    return entry;
  }

  /**
   * How many completion tokens the client got. A resumable stream's journal counts them across its
   * attempts (each attempt's own `usage` where it sent one, else its content events): the figure the
   * client's final `usage` shows, which the answer's last bytes need not (a stream ended on its
   * budget at a cut). Otherwise the answer's own `usage` (its tail), else the content events the
   * token clock saw; null when nothing tells.
   */
  completionTokens(relay: RelayResult | null): number | null {
    if (this.resume !== null) return this.resume.tokens;
    const reported = relay === null ? null : completionTokensIn(relay.tail);
    if (reported !== null) return reported;
    const events = this.reader?.tokens ?? 0;
    return events > 0 ? events : null;
  }

  #recordOf(
    status: number,
    outcome: RequestOutcome,
    relay: RelayResult | null,
    endedAt: number,
    completionTokens: number | null,
  ): RequestRecord {
    const context = this.context;
    return {
      backend: context.backend,
      method: this.method,
      path: this.path,
      status,
      durationMs: endedAt - this.started,
      ttfbMs: relay?.firstByteAt != null ? relay.firstByteAt - this.started : null,
      priorityClass: context.traits?.priority ?? null,
      queueMs: context.dispatchedAt !== null ? context.dispatchedAt - this.started : null,
      bytes: relay?.bytes ?? 0,
      retries: context.retries,
      resumes: this.resume?.count ?? 0,
      backends: this.resume?.backends ?? [],
      outcome,
      completionTokens,
      streamed: this.sse,
    };
  }

  /** Ends its trace (when tracing is on) with the record and what the answer's last events say. */
  #endTrace(entry: RequestRecord, relay: RelayResult | null, endedAt: number): void {
    if (this.trace === null) return;
    const firstAt = this.tokens?.firstTokenAt ?? null;
    const ttftSeconds = firstAt !== null ? (firstAt - this.started) / 1000 : null;
    this.trace.end(entry, { tail: relay?.tail ?? null, ttftSeconds }, endedAt);
  }
}
