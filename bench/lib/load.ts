/**
 * The load generator: undici Pools (one per URL, the client spreading requests round-robin over
 * them) driven through `dispatch` with a bare handler, so the client spends as little CPU as it
 * can per request and per SSE chunk. Every loop is bounded by a count and a deadline.
 */
import { Pool } from 'undici';

const LFLF = Buffer.from('\n\n');
const SIM_SERVER = 'x-sim-server';
const LF = 0x0a;
const QUOTE = 0x22;
const CONTENT = Buffer.from('"content":"');
const DONE = Buffer.from('data: [DONE]');
/** The error of a stream that ended without `data: [DONE]` (cut, with or without an error event). */
const STREAM_CUT = 'stream cut (no [DONE])';

/** The error of a request aborted by the client's per-request time limit. */
export const REQUEST_TIME_LIMIT = 'request time limit';
/** The error of a request aborted by the run's hard deadline (`LoadClient.abortAll`). */
export const BENCH_DEADLINE = 'bench deadline';

export interface Outcome {
  status: number;
  /** performance.now() at send, first body byte, end. */
  startMs: number;
  firstMs: number;
  endMs: number;
  /** SSE events (`\n\n`-terminated blocks) received; 0 for non-streamed bodies is normal. */
  events: number;
  /** Chat content deltas received (non-empty `"content":"`): output tokens that reached the client. */
  tokens: number;
  bytes: number;
  error: string | null;
  /** The simulated server that answered (its `x-sim-server` header), when it says. */
  server?: string;
}

export interface StreamHooks {
  /** Each body chunk as it arrives: its time and how many SSE events it completed. */
  onData?(now: number, events: number, first: boolean): void;
}

export class LoadClient {
  readonly #pools: Pool[];
  #next = 0;
  readonly #inflight = new Set<(error: Error) => void>();
  readonly #requestTimeoutMs: number;

  /** `requestTimeoutMs`: a request still running after this long is aborted (`request time limit`); 0 = none. */
  constructor(urls: string[], connectionsPerUrl: number, { requestTimeoutMs = 0 } = {}) {
    this.#requestTimeoutMs = requestTimeoutMs;
    this.#pools = urls.map(
      (url) =>
        new Pool(url, {
          connections: connectionsPerUrl,
          pipelining: 1,
          headersTimeout: 30 * 60_000,
          bodyTimeout: 10 * 60_000,
          keepAliveTimeout: 60_000,
          keepAliveMaxTimeout: 10 * 60_000,
        }),
    );
  }

  /** POSTs `body` (JSON) to `path` on the next URL in turn, with `headers` besides the JSON ones. */
  post(path: string, body: Buffer, hooks: StreamHooks = {}, headers: Record<string, string> = {}): Promise<Outcome> {
    const pool = this.#pools[this.#next];
    this.#next = (this.#next + 1) % this.#pools.length;
    const inflight = this.#inflight;
    return new Promise((resolve) => {
      const out: Outcome = {
        status: 0,
        startMs: performance.now(),
        firstMs: 0,
        endMs: 0,
        events: 0,
        tokens: 0,
        bytes: 0,
        error: null,
      };
      let done = false;
      let lastLf = false;
      let abort: ((error: Error) => void) | null = null;
      let timedOut = false;
      const limit =
        this.#requestTimeoutMs > 0
          ? setTimeout(() => {
              timedOut = true;
              abort?.(new Error(REQUEST_TIME_LIMIT));
            }, this.#requestTimeoutMs)
          : null;
      const finish = (error: string | null) => {
        if (limit) clearTimeout(limit);
        if (abort) inflight.delete(abort);
        out.endMs = performance.now();
        out.error = error;
        resolve(out);
      };
      pool.dispatch(
        {
          path,
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'content-length': String(body.length) },
          body,
        },
        {
          onConnect(fn: (error?: Error) => void) {
            abort = fn;
            inflight.add(fn);
            if (timedOut) fn(new Error(REQUEST_TIME_LIMIT));
          },
          onHeaders(statusCode: number, raw: Buffer[]) {
            out.status = statusCode;
            for (let i = 0; i < raw.length; i += 2) {
              if (raw[i].length === SIM_SERVER.length && raw[i].toString('latin1').toLowerCase() === SIM_SERVER) {
                out.server = raw[i + 1].toString('latin1');
              }
            }
            return true;
          },
          onData(chunk: Buffer) {
            const now = performance.now();
            const first = out.firstMs === 0;
            if (first) out.firstMs = now;
            out.bytes += chunk.length;
            let events = 0;
            if (lastLf && chunk[0] === LF) events++;
            let at = chunk.indexOf(LFLF);
            while (at >= 0) {
              events++;
              at = chunk.indexOf(LFLF, at + 2);
            }
            lastLf = chunk[chunk.length - 1] === LF;
            out.events += events;
            if (events > 0) {
              for (let c = chunk.indexOf(CONTENT); c >= 0; c = chunk.indexOf(CONTENT, c + CONTENT.length)) {
                if (chunk[c + CONTENT.length] !== QUOTE) out.tokens++;
              }
              if (!done && chunk.includes(DONE)) done = true;
            }
            hooks.onData?.(now, events, first);
            return true;
          },
          onComplete() {
            // An event stream is whole only with its `[DONE]`; a plain JSON body has no events.
            finish(out.events > 0 && !done ? STREAM_CUT : null);
          },
          onError(error: Error) {
            finish((error as NodeJS.ErrnoException).code ?? error.message);
          },
        } as never,
      );
    });
  }

  /** Aborts every request still in flight (a bench's hard deadline). */
  abortAll(): number {
    const n = this.#inflight.size;
    for (const abort of [...this.#inflight]) abort(new Error(BENCH_DEADLINE));
    return n;
  }

  async close(): Promise<void> {
    await Promise.all(this.#pools.map((pool) => pool.destroy()));
  }
}

export interface LoopOptions {
  concurrency: number;
  /** Requests to send in all. */
  total: number;
  /** No new request starts after this many ms; in-flight ones are aborted `graceMs` later. */
  deadlineMs: number;
  graceMs?: number;
  /** Sends request number `i`. */
  send(i: number): Promise<Outcome>;
  /** Each finished request. */
  onOutcome?(outcome: Outcome, i: number): void;
}

export interface LoopResult {
  sent: number;
  ok: number;
  errors: number;
  /** Error kinds (status or code) and their counts. */
  errorKinds: Record<string, number>;
  elapsedMs: number;
  /** True when the deadline cut the loop short. */
  cut: boolean;
}

/**
 * A closed loop: `concurrency` workers, each sending its next request when the previous one ended.
 * `clients` are the ones `send` uses: the hard deadline aborts what they have in flight.
 */
export async function closedLoop(clients: LoadClient | readonly LoadClient[], opts: LoopOptions): Promise<LoopResult> {
  const started = performance.now();
  const deadline = started + opts.deadlineMs;
  let next = 0;
  let ok = 0;
  let errors = 0;
  const errorKinds: Record<string, number> = {};
  let cut = false;
  const hard = setTimeout(
    () => {
      cut = true;
      for (const client of clients instanceof LoadClient ? [clients] : clients) client.abortAll();
    },
    opts.deadlineMs + (opts.graceMs ?? 30_000),
  );
  const worker = async () => {
    while (next < opts.total) {
      if (performance.now() > deadline) {
        cut = true;
        return;
      }
      const i = next++;
      const outcome = await opts.send(i);
      if (outcome.error === null && outcome.status >= 200 && outcome.status < 300) ok++;
      else {
        errors++;
        const kind = outcome.error ?? String(outcome.status);
        errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
      }
      opts.onOutcome?.(outcome, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, opts.total) }, worker));
  clearTimeout(hard);
  return { sent: next, ok, errors, errorKinds, elapsedMs: performance.now() - started, cut };
}
