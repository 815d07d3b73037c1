/**
 * The progress watchdog: catches a ready backend that takes requests and returns nothing, which
 * `/health` cannot see (old SGLang answers 200 whatever the scheduler does; with DP > 1 a dead rank
 * is hidden by the live ones, sgl-project/sglang#6624, #4191). Pure: the proxy reports requests,
 * the load scraper reports the backend's counters, a timer calls `tick()`; the clock is injected.
 *
 * Two rules, both judged only on `ready` backends (docs/decisions.md, "Progress watchdog"); a
 * backend already out of rotation (the probes caught a hang first, or it drains) is not ejected
 * again, but requests it holds with no progress for `timeoutMs` are ended, so they go on elsewhere
 * (a retry, a stream resume) instead of waiting out the upstream timeouts:
 * - **No progress.** The backend holds requests and, for `timeoutMs`, none of them received a
 *   response byte or completed, and its reported token counters and KV use did not move. It is
 *   ejected and every request on it is ended.
 * - **Stuck streams (one dead DP rank).** A stream with no first byte after `timeoutMs`, while a
 *   request dispatched later to the same backend got its first byte, is stuck and ended. The second
 *   stuck stream ejects the backend; then every request on it with no byte yet is ended too (it may
 *   sit on the dead rank). Not judged while the backend reports a queue of its own: there a stream may wait
 *   its turn behind others on another rank.
 *
 * Bytes are polled at each tick (`bytes()`), so the data path pays nothing per chunk.
 *
 * Wiring (the whole interface; fleet.ts owns the instance, the ticks and `reported`/`forget`):
 * per upstream attempt, once the backend is chosen, the data path calls
 * `track(backend, { streamed, bytes, end })` and keeps the handle; `streamed` is the body's
 * `"stream": true`, `bytes()` the 2xx body bytes relayed so far, `end(reason)` abandons the attempt
 * through the same path as an upstream failure (re-sent if nothing reached the client, else the SSE
 * error event or a cut). When the attempt ends for any reason it calls `handle.done(completed)`.
 */

/** What the backend's `/metrics` says about work done; any rise or change is progress. */
export interface ReportedProgress {
  /** `sglang:generation_tokens_total` / `vllm:generation_tokens_total`; null if not reported. */
  generationTokens: number | null;
  /** `..:prompt_tokens_total`: vLLM counts prefill chunks as they run. */
  promptTokens: number | null;
  /** KV-cache use: SGLang's grows with each prefill chunk and decode step, and freezes with the scheduler. */
  kvUsage: number | null;
}

export interface TrackedRequestSpec {
  /** The request asked for a stream (`"stream": true`). */
  streamed: boolean;
  /** Response body bytes relayed so far (2xx answers only). */
  bytes: () => number;
  /** Ends the request as an upstream failure would (retry if nothing reached the client). */
  end: (reason: string) => void;
}

export interface TrackedRequest {
  /** The exchange is over; `completed`: a whole successful answer went out. */
  done(completed: boolean): void;
}

export interface ProgressWatchdogOptions<B> {
  /** ms without progress; 0 = off (nothing is tracked). */
  timeoutMs: number;
  now: () => number;
  isReady: (backend: B) => boolean;
  /** The backend reports requests waiting in its own queue. */
  hasOwnQueue: (backend: B) => boolean;
  /** Take the backend out of rotation as `unhealthy`, with this reason. */
  eject: (backend: B, reason: string) => void;
}

/** The spec is kept as given (not copied): an attempt object may be its own spec. */
interface Request {
  spec: TrackedRequestSpec;
  dispatchedAt: number;
  seenBytes: number;
  firstByteAt: number | null;
  ended: boolean;
}

interface Watch {
  requests: Set<Request>;
  /** Start of the current silence: the latest progress, or when the backend began to hold requests. */
  silentSince: number;
  /** Dispatch time of the latest-dispatched request that got its first byte (a stream's first chunk, a whole plain answer). */
  latestAnswered: number;
  stuckStreams: number;
  wasReady: boolean;
  reported: ReportedProgress | null;
}

const NOT_TRACKED: TrackedRequest = { done() {} };

export class ProgressWatchdog<B> {
  readonly #opts: ProgressWatchdogOptions<B>;
  readonly #watches = new Map<B, Watch>();

  constructor(opts: ProgressWatchdogOptions<B>) {
    this.#opts = opts;
  }

  get enabled(): boolean {
    return this.#opts.timeoutMs > 0;
  }

  track(backend: B, spec: TrackedRequestSpec): TrackedRequest {
    if (!this.enabled) return NOT_TRACKED;
    const now = this.#opts.now();
    const watch = this.#watch(backend);
    if (watch.requests.size === 0) watch.silentSince = Math.max(watch.silentSince, now);
    const request: Request = { spec, dispatchedAt: now, seenBytes: 0, firstByteAt: null, ended: false };
    watch.requests.add(request);
    return {
      done: (completed) => {
        if (!watch.requests.delete(request)) return;
        this.#seeBytes(watch, request);
        if (completed) watch.silentSince = this.#opts.now();
      },
    };
  }

  /** Figures from the backend's latest scrape. */
  reported(backend: B, progress: ReportedProgress): void {
    if (!this.enabled) return;
    const watch = this.#watch(backend);
    const before = watch.reported;
    watch.reported = progress;
    if (before !== null && moved(before, progress)) watch.silentSince = this.#opts.now();
  }

  forget(backend: B): void {
    this.#watches.delete(backend);
  }

  tick(): void {
    if (!this.enabled) return;
    for (const [backend, watch] of this.#watches) {
      const now = this.#opts.now();
      if (!this.#opts.isReady(backend)) {
        watch.wasReady = false;
        this.#endSilent(watch, now);
        continue;
      }
      if (!watch.wasReady) {
        // Re-admitted: judged afresh from now.
        watch.wasReady = true;
        watch.stuckStreams = 0;
        watch.silentSince = now;
      }
      for (const request of watch.requests) this.#seeBytes(watch, request);
      this.#judge(backend, watch, now);
    }
  }

  #judge(backend: B, watch: Watch, now: number): void {
    const timeout = this.#opts.timeoutMs;
    const live = [...watch.requests].filter((r) => !r.ended);
    if (live.length === 0) return;
    const silentMs = now - watch.silentSince;
    if (silentMs >= timeout) {
      const reason =
        `no progress for ${seconds(silentMs)} with ${live.length} request${live.length === 1 ? '' : 's'} in flight ` +
        '(no response byte, no completion, no rise in its token counters)';
      this.#opts.eject(backend, reason);
      this.#end(live, `the backend made no progress for ${seconds(silentMs)}`);
      return;
    }
    if (this.#opts.hasOwnQueue(backend)) return;
    const stuck = live.filter(
      (r) =>
        r.spec.streamed &&
        r.firstByteAt === null &&
        now - r.dispatchedAt >= timeout &&
        r.dispatchedAt < watch.latestAnswered,
    );
    if (stuck.length === 0) return;
    watch.stuckStreams += stuck.length;
    const what = `no first byte in ${seconds(timeout)} while requests sent later to the backend got theirs`;
    this.#end(stuck, what);
    if (watch.stuckStreams < 2) return;
    this.#opts.eject(
      backend,
      `${watch.stuckStreams} streams got no first byte in ${seconds(timeout)} while requests sent later did (a dead DP rank?)`,
    );
    // Out of rotation: any of its requests with no byte yet may sit on the dead rank; they go elsewhere.
    const silent = live.filter((r) => !r.ended && r.firstByteAt === null);
    this.#end(silent, 'the backend was ejected (a dead DP rank?) before this request got a byte');
  }

  #endSilent(watch: Watch, now: number): void {
    for (const request of watch.requests) this.#seeBytes(watch, request);
    const silentMs = now - watch.silentSince;
    if (silentMs < this.#opts.timeoutMs) return;
    const live = [...watch.requests].filter((r) => !r.ended);
    this.#end(live, `the backend is out of rotation and made no progress for ${seconds(silentMs)}`);
  }

  #end(requests: Request[], reason: string): void {
    for (const request of requests) request.ended = true;
    for (const request of requests) request.spec.end(reason);
  }

  #seeBytes(watch: Watch, request: Request): void {
    const bytes = request.spec.bytes();
    if (bytes <= request.seenBytes) return;
    request.seenBytes = bytes;
    const now = this.#opts.now();
    watch.silentSince = now;
    if (request.firstByteAt !== null) return;
    request.firstByteAt = now;
    watch.latestAnswered = Math.max(watch.latestAnswered, request.dispatchedAt);
  }

  #watch(backend: B): Watch {
    let watch = this.#watches.get(backend);
    if (watch === undefined) {
      watch = {
        requests: new Set(),
        silentSince: this.#opts.now(),
        latestAnswered: Number.NEGATIVE_INFINITY,
        stuckStreams: 0,
        wasReady: this.#opts.isReady(backend),
        reported: null,
      };
      this.#watches.set(backend, watch);
    }
    return watch;
  }
}

function moved(before: ReportedProgress, after: ReportedProgress): boolean {
  const rose = (a: number | null, b: number | null) => a !== null && b !== null && b > a;
  return (
    rose(before.generationTokens, after.generationTokens) ||
    rose(before.promptTokens, after.promptTokens) ||
    (before.kvUsage !== null && after.kvUsage !== null && before.kvUsage !== after.kvUsage)
  );
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`;
}
