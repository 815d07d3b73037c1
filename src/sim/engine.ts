/**
 * Continuous-batching scheduler, modelled on SGLang's: a cap on running requests with a FIFO queue
 * behind it, one token per running request per decode step, a step time that grows with the batch,
 * and a KV pool of `maxTotalNumTokens`. As in SGLang, a request is admitted only if its prompt and
 * all of its `max_new_tokens` fit beside what the running requests hold and are still expected to
 * need, reckoned with the optimistic `new_token_ratio` (0.7 decaying to 0.1), so the pool can
 * overflow; then the request with the fewest output tokens is retracted to the queue and the ratio
 * jumps to 1.0
 * (`KV cache pool is full. Retract requests.`). A prefix cache (prefix-cache.ts) keeps the full pages
 * of prompts seen (and of a finished request's answer, where it says how the answer renders): a
 * request whose leading pages are cached prefills only the rest, and cached pages no running request
 * uses are evicted when the pool needs room. With priority scheduling the queue is admitted by
 * priority, and a request that finds the batch full preempts running requests of a priority lower by
 * more than a threshold (`#preemptFor`). Time comes in through `schedule` and `now`.
 */
import { type CacheObserver, type PageKeys, PrefixCache } from './prefix-cache.js';
import type { DecodeStats, PrefillStats } from './runtime-log.js';
import type { SimEngineOptions } from './types.js';

export type FinishReason = 'length' | 'stop' | 'abort';

export interface EngineRequest {
  readonly id: string;
  readonly promptTokens: number;
  /** `max_new_tokens`: what admission reserves room for. */
  readonly maxTokens: number;
  /** Where the request really ends (<= maxTokens); `stopReason` then says why. */
  readonly targetTokens: number;
  readonly stopReason: 'length' | 'stop';
  /** Keys of the prompt's full pages (prefix-cache.ts), fewer than `promptTokens / pageSize`. */
  readonly prefixKeys?: PageKeys;
  /**
   * Keys of the full pages of the prompt followed by its answer of `generated` tokens, as the next
   * turn of a conversation renders them: SGLang caches both when a request finishes
   * (`cache_finished_req`). Absent: only the prompt's pages stay cached.
   */
  readonly answerKeys?: (generated: number) => PageKeys;
  /** Its `priority` field; read only with `priorityScheduling`. */
  readonly priority?: number;
  /** Prompt tokens found in the prefix cache when the request was first admitted. */
  cachedTokens?: number;
  generated: number;
  retractions: number;
  onToken(request: EngineRequest): void;
  onFinish(request: EngineRequest, reason: FinishReason): void;
}

export interface EngineLog {
  prefill(stats: PrefillStats): void;
  decode(stats: DecodeStats): void;
  retract(count: number, ratioBefore: number, ratioAfter: number): void;
}

export interface EngineStats {
  running: number;
  queued: number;
  usedTokens: number;
  maxTotalNumTokens: number;
  tokenUsage: number;
  genThroughput: number;
  /** Requests retracted by the latest retraction (a sticky gauge, like SGLang's). */
  lastRetracted: number;
  retractionsTotal: number;
  /** Running requests sent back to the queue for a higher-priority one (priority scheduling). */
  preemptionsTotal: number;
  promptTokensTotal: number;
  /** Prompt tokens served from the prefix cache. */
  cachedTokensTotal: number;
  /** Cached share of the prompt tokens admitted since the latest decode log (sticky while idle, like SGLang's gauge). */
  cacheHitRate: number;
  /** Tokens held by cached pages, whether running requests use them or not. */
  cachedPoolTokens: number;
  generationTokensTotal: number;
  requestsTotal: number;
  abortedTotal: number;
}

/** What a running request holds in the KV pool besides its locked cache pages. */
interface Hold {
  /** The prompt tokens after its last full page, plus what it generated. */
  own: number;
}

export type Schedule = (fn: () => void, ms: number) => () => void;

const INIT_RATIO = 0.7;
const MIN_RATIO = 0.1;
const RATIO_DECAY = (INIT_RATIO - MIN_RATIO) / 600;
/** SGLang's default `decode_log_interval`. */
const DECODE_LOG_INTERVAL = 40;
/** SGLang's default `--priority-scheduling-preemption-threshold`. */
const PREEMPTION_THRESHOLD = 10;
/** SGLang's `CLIP_MAX_NEW_TOKENS`: what preemption reckons a new request's output could reach at most. */
const CLIP_MAX_NEW_TOKENS = 4096;

export class Engine {
  #opts: SimEngineOptions;
  #schedule: Schedule;
  #now: () => number;
  #log: EngineLog | null;
  #onRetract: (count: number) => void;
  #queue: EngineRequest[] = [];
  /** When each request last entered the queue (a counter): preemption takes the latest first. */
  readonly #entered = new Map<EngineRequest, number>();
  #entries = 0;
  #running = new Set<EngineRequest>();
  /** Tokens owned by running requests outside the cache (see Hold). */
  #own = 0;
  readonly #holds = new Map<EngineRequest, Hold>();
  readonly #cache: PrefixCache;
  /** Running requests whose prompt is still being prefilled in chunks (`chunkedPrefillTokens`): tokens left. */
  readonly #prefilling = new Map<EngineRequest, number>();
  #windowPrompt = 0;
  #windowCached = 0;
  #ratio = INIT_RATIO;
  #cancelStep: (() => void) | null = null;
  #halted = false;
  #steps = 0;
  #windowStart: number;
  #windowTokens = 0;
  #lastPrefillMs: number;
  #stats = {
    genThroughput: 0,
    lastRetracted: 0,
    retractions: 0,
    preemptions: 0,
    prompt: 0,
    cached: 0,
    cacheHitRate: 0,
    generation: 0,
    requests: 0,
    aborted: 0,
  };

  constructor(
    opts: SimEngineOptions,
    schedule: Schedule,
    {
      now = () => performance.now(),
      log = null as EngineLog | null,
      onRetract = (_count: number): void => {},
      cacheObserver = null as CacheObserver | null,
    } = {},
  ) {
    this.#opts = { ...opts };
    this.#schedule = schedule;
    this.#now = now;
    this.#log = log;
    this.#onRetract = onRetract;
    this.#cache = new PrefixCache(opts.pageSize, cacheObserver);
    this.#windowStart = now();
    this.#lastPrefillMs = now();
  }

  get maxTotalNumTokens(): number {
    return this.#opts.maxTotalNumTokens;
  }

  get pageSize(): number {
    return this.#opts.pageSize;
  }

  /** Tokens running requests hold: their own plus the cache pages they use (SGLang's `num_used_tokens`). */
  get #used(): number {
    return this.#own + this.#cache.lockedTokens;
  }

  /** Whether this page key is cached, and whether a running request uses it (for tests). */
  cachedPage(key: string): 'locked' | 'cached' | 'absent' {
    if (!this.#cache.has(key)) return 'absent';
    return this.#cache.isLocked(key) ? 'locked' : 'cached';
  }

  setSlowdown(factor: number): void {
    this.#opts.slowdown = factor;
  }

  /** Whether a prompt of this size can ever run (SGLang rejects longer inputs up front). */
  fits(promptTokens: number): boolean {
    return promptTokens + 1 <= this.#opts.maxTotalNumTokens;
  }

  submit(request: EngineRequest): void {
    this.#stats.requests++;
    this.#enqueue(request);
    this.#kick();
  }

  /** Frees the request's slot and KV; its `onFinish` gets 'abort'. False if it already finished. */
  abort(request: EngineRequest): boolean {
    if (this.#running.delete(request)) {
      this.#release(request);
    } else {
      const index = this.#queue.indexOf(request);
      if (index < 0) return false;
      this.#queue.splice(index, 1);
    }
    this.#entered.delete(request);
    this.#stats.aborted++;
    request.onFinish(request, 'abort');
    return true;
  }

  /** Abort every request (`abort_all`). */
  abortAll(): void {
    for (const request of [...this.#running, ...this.#queue]) this.abort(request);
  }

  /** Stop stepping for good; requests stay where they are and never progress (a dead or hung scheduler). */
  halt(): void {
    this.#halted = true;
    this.#cancelStep?.();
    this.#cancelStep = null;
  }

  /** Halt and forget every request without callbacks (the process is gone). */
  clear(): void {
    this.halt();
    this.#queue = [];
    this.#entered.clear();
    this.#running.clear();
    this.#holds.clear();
    this.#own = 0;
    this.#cache.clear();
    this.#prefilling.clear();
  }

  get stats(): EngineStats {
    const s = this.#stats;
    return {
      running: this.#running.size,
      queued: this.#queue.length,
      usedTokens: this.#used,
      maxTotalNumTokens: this.#opts.maxTotalNumTokens,
      tokenUsage: this.#used / this.#opts.maxTotalNumTokens,
      genThroughput: s.genThroughput,
      lastRetracted: s.lastRetracted,
      retractionsTotal: s.retractions,
      preemptionsTotal: s.preemptions,
      promptTokensTotal: s.prompt,
      cachedTokensTotal: s.cached,
      cacheHitRate: s.cacheHitRate,
      cachedPoolTokens: this.#cache.tokens,
      generationTokensTotal: s.generation,
      requestsTotal: s.requests,
      abortedTotal: s.aborted,
    };
  }

  #enqueue(request: EngineRequest, front = false): void {
    this.#entered.set(request, this.#entries++);
    if (front) this.#queue.unshift(request);
    else this.#queue.push(request);
  }

  #kick(): void {
    if (this.#halted || this.#cancelStep !== null) return;
    this.#cancelStep = this.#schedule(() => this.#startStep(), 0);
  }

  /** What a running request is still expected to need: `new_token_ratio` x its remaining `max_new_tokens`. */
  #reserve(request: EngineRequest): number {
    return Math.ceil(this.#remainingNew(request) * this.#ratio);
  }

  /**
   * What admission sets aside for a request it admits: all of its remaining `max_new_tokens` and a
   * page, not the ratio's share (SGLang's `PrefillAdder.add_one_req` and `_update_prefill_budget`),
   * so a small request still fits where the last long one stopped.
   * https://github.com/sgl-project/sglang/blob/00550cd11b35def9d584bf761a1e32729c20a21d/python/sglang/srt/managers/schedule_policy.py
   */
  #admissionReserve(request: EngineRequest): number {
    return this.#remainingNew(request) + this.#opts.pageSize;
  }

  #remainingNew(request: EngineRequest): number {
    return Math.min(Math.max(0, request.maxTokens - request.generated), CLIP_MAX_NEW_TOKENS);
  }

  #startStep(): void {
    this.#cancelStep = null;
    if (this.#halted) return;
    this.#retractIfFull();
    const prefillTokens = this.#admit() + this.#prefillChunk();
    if (this.#running.size === 0) return;
    const o = this.#opts;
    const decodeMs = o.tokenMs * (1 + o.batchPenalty * this.#running.size) * o.slowdown;
    const prefillMs = o.prefillTokensPerMs > 0 ? (prefillTokens / o.prefillTokensPerMs) * o.slowdown : 0;
    const ms = decodeMs + prefillMs;
    this.#cancelStep = this.#schedule(() => this.#endStep(), ms < 0.5 ? 0 : ms);
  }

  /** Admits what fits; returns the tokens to prefill (the uncached ones). */
  #admit(): number {
    const admitted: EngineRequest[] = [];
    const o = this.#opts;
    const page = o.pageSize;
    let reserved = 0;
    let prefillTokens = 0;
    let cachedTokens = 0;
    for (const request of this.#running) reserved += this.#reserve(request);
    const runningBefore = this.#running.size;
    // Array.prototype.sort is stable: within a priority the queue keeps its order (arrival, retracted first).
    if (o.priorityScheduling) this.#queue.sort((a, b) => (b.priority ?? 0) - (a.priority ?? 0));
    const preempted: EngineRequest[] = [];
    while (this.#queue.length > 0) {
      const head = this.#queue[0];
      const keys = head.prefixKeys ?? [];
      let hit = this.#cache.match(keys);
      if (this.#running.size >= o.maxRunningRequests) {
        const victims = o.priorityScheduling ? this.#preemptFor(head, hit.blocks * page, reserved) : [];
        if (victims.length === 0) break;
        for (const victim of victims) reserved -= this.#reserve(victim);
        preempted.push(...victims);
        hit = this.#cache.match(keys);
      }
      // Cached pages another running request already holds cost nothing more; evictable ones become held.
      const occupies = head.promptTokens + head.generated - hit.locked * page;
      const wants = occupies + this.#admissionReserve(head);
      // No room in the pool: SGLang's NO_TOKEN, which ends the pass without trying preemption.
      if (this.#running.size > 0 && this.#used + reserved + wants > o.maxTotalNumTokens) break;
      this.#queue.shift();
      this.#cache.lock(keys);
      const own = head.promptTokens + head.generated - keys.length * page;
      this.#holds.set(head, { own });
      this.#own += own;
      this.#running.add(head);
      reserved += this.#admissionReserve(head);
      admitted.push(head);
      const cached = hit.blocks * page;
      head.cachedTokens ??= cached;
      const prefill = head.promptTokens + head.generated - cached;
      // prompt_tokens_total counts what was prefilled (a dead scheduler's stays still), chunk by chunk.
      if (o.chunkedPrefillTokens > 0 && prefill > o.chunkedPrefillTokens) {
        this.#prefilling.set(head, prefill);
        this.#stats.prompt += cached;
      } else {
        prefillTokens += prefill;
        this.#stats.prompt += head.promptTokens;
      }
      cachedTokens += cached;
      this.#windowPrompt += head.promptTokens;
      this.#windowCached += Math.min(cached, head.promptTokens);
    }
    // Preempted requests rejoin the queue after the pass (SGLang's `_add_request_to_queue`), to be prefilled again.
    for (const victim of preempted) this.#enqueue(victim);
    this.#stats.cached += cachedTokens;
    if (this.#windowPrompt > 0) this.#stats.cacheHitRate = this.#windowCached / this.#windowPrompt;
    this.#evictBeyondPool(0);
    if (admitted.length > 0 && this.#log) {
      const now = this.#now();
      const seconds = Math.max(0.001, (now - this.#lastPrefillMs) / 1000);
      this.#lastPrefillMs = now;
      this.#log.prefill({
        newSeqs: admitted.length,
        newTokens: prefillTokens,
        cachedTokens,
        tokenUsage: this.#used / o.maxTotalNumTokens,
        running: runningBefore,
        queued: this.#queue.length,
        inputThroughput: prefillTokens / seconds,
      });
    }
    return prefillTokens;
  }

  /**
   * SGLang's `PrefillAdder.preempt_to_schedule`, tried when `request` heads the queue but the batch
   * holds `max_running_requests`: running requests whose priority is lower by more than the threshold,
   * lowest priority first and, within one, the latest to have entered the queue, until their
   * reservations would cover what `request` needs beyond the free pool. All or none: returns the
   * ones taken out of the batch (their KV freed), or none when they would not be enough.
   * https://github.com/sgl-project/sglang/blob/00550cd11b35def9d584bf761a1e32729c20a21d/python/sglang/srt/managers/schedule_policy.py
   * (`preempt_to_schedule`), called only when the batch is full by count, so a pool full of
   * reservations with free slots preempts nothing (`add_one_req`'s NO_TOKEN ends the pass):
   * https://github.com/sgl-project/sglang/blob/0003215cf1464f44b389cd0b18d0b4c56f2a3da6/python/sglang/srt/managers/scheduler.py
   * (`_get_new_batch_prefill_raw`).
   */
  #preemptFor(request: EngineRequest, cachedTokens: number, reserved: number): EngineRequest[] {
    const threshold = this.#opts.priorityPreemptionThreshold ?? PREEMPTION_THRESHOLD;
    const priority = request.priority ?? 0;
    const candidates = [...this.#running].sort(
      (a, b) => (a.priority ?? 0) - (b.priority ?? 0) || (this.#entered.get(b) ?? 0) - (this.#entered.get(a) ?? 0),
    );
    const free = this.#opts.maxTotalNumTokens - this.#used - reserved;
    let missing =
      request.promptTokens + request.generated - cachedTokens + Math.min(request.maxTokens, CLIP_MAX_NEW_TOKENS) - free;
    const victims: EngineRequest[] = [];
    for (const candidate of candidates) {
      if (priority - (candidate.priority ?? 0) <= threshold) break;
      victims.push(candidate);
      missing -= this.#reserve(candidate);
      if (missing <= 0) break;
    }
    if (victims.length === 0 || missing > 0) return [];
    for (const victim of victims) {
      this.#running.delete(victim);
      this.#release(victim);
    }
    this.#stats.preemptions += victims.length;
    return victims;
  }

  /** Evicts unused cache pages until the pool has `room` tokens free besides what it holds. */
  #evictBeyondPool(room: number): void {
    const excess = this.#own + this.#cache.tokens + room - this.#opts.maxTotalNumTokens;
    if (excess > 0) this.#cache.evict(excess);
  }

  /** A running request leaves the batch: its own tokens are freed, its pages stay cached but unlocked. */
  #release(request: EngineRequest): void {
    const hold = this.#holds.get(request);
    if (hold === undefined) return;
    this.#holds.delete(request);
    this.#prefilling.delete(request);
    this.#own -= hold.own;
    this.#cache.unlock(request.prefixKeys ?? []);
  }

  /** Prefills up to one chunk of the prompts waiting for it, oldest first; returns the tokens done. */
  #prefillChunk(): number {
    let budget = this.#opts.chunkedPrefillTokens;
    let done = 0;
    for (const [request, left] of this.#prefilling) {
      if (budget <= 0) break;
      const take = Math.min(left, budget);
      budget -= take;
      done += take;
      if (take === left) this.#prefilling.delete(request);
      else this.#prefilling.set(request, left - take);
    }
    this.#stats.prompt += done;
    return done;
  }

  /** Before a decode step every running request needs one more slot. */
  #retractIfFull(): void {
    const max = this.#opts.maxTotalNumTokens;
    this.#evictBeyondPool(this.#running.size);
    if (this.#used + this.#running.size <= max) return;
    // SGLang retracts the requests with the fewest output tokens (then the longest inputs) first.
    const victims = [...this.#running].sort((a, b) => b.generated - a.generated || a.promptTokens - b.promptTokens);
    let retracted = 0;
    while (this.#used + this.#running.size > max && this.#running.size > 1) {
      const victim = victims.pop() as EngineRequest;
      this.#running.delete(victim);
      this.#release(victim);
      victim.retractions++;
      this.#enqueue(victim, true);
      retracted++;
    }
    this.#evictBeyondPool(this.#running.size);
    if (retracted > 0) {
      this.#stats.retractions += retracted;
      this.#stats.lastRetracted = retracted;
      this.#log?.retract(retracted, this.#ratio, 1);
      this.#ratio = 1;
      this.#onRetract(retracted);
    }
    // A lone request that outgrew the whole pool ends like one that hit its length limit.
    if (this.#used + this.#running.size > max) {
      for (const request of [...this.#running]) this.#finish(request, 'length');
    }
  }

  #endStep(): void {
    this.#cancelStep = null;
    const batch = [...this.#running];
    let tokens = 0;
    for (const request of batch) {
      // A callback may have aborted another member of the batch (its client went away).
      if (!this.#running.has(request) || this.#prefilling.has(request)) continue;
      request.generated++;
      tokens++;
      this.#own++;
      const hold = this.#holds.get(request);
      if (hold) hold.own++;
      request.onToken(request);
      if (request.generated >= request.targetTokens) this.#finish(request, request.stopReason);
    }
    this.#stats.generation += tokens;
    this.#windowTokens += tokens;
    this.#ratio = Math.max(MIN_RATIO, this.#ratio - RATIO_DECAY);
    this.#steps++;
    if (this.#steps % DECODE_LOG_INTERVAL === 0) this.#logDecode();
    if (this.#halted) return;
    this.#startStep();
  }

  #logDecode(): void {
    const now = this.#now();
    const seconds = Math.max(0.001, (now - this.#windowStart) / 1000);
    this.#stats.genThroughput = this.#windowTokens / seconds;
    this.#windowStart = now;
    this.#windowTokens = 0;
    this.#windowPrompt = 0;
    this.#windowCached = 0;
    this.#log?.decode({
      running: this.#running.size,
      usedTokens: this.#used,
      tokenUsage: this.#used / this.#opts.maxTotalNumTokens,
      genThroughput: this.#stats.genThroughput,
      queued: this.#queue.length,
    });
  }

  #finish(request: EngineRequest, reason: FinishReason): void {
    if (!this.#running.delete(request)) return;
    this.#release(request);
    this.#entered.delete(request);
    if (request.answerKeys !== undefined) {
      this.#cache.insert(request.answerKeys(request.generated));
      this.#evictBeyondPool(0);
    }
    request.onFinish(request, reason);
  }
}
