/**
 * Continuous-batching scheduler, modelled on SGLang's: a cap on running requests with a FIFO queue
 * behind it, one token per running request per decode step, a step time that grows with the batch,
 * and a KV pool of `maxTotalNumTokens`. Admission reserves room for future tokens with SGLang's
 * optimistic `new_token_ratio` (0.7 decaying to 0.1), so the pool can overflow; then the request
 * with the fewest output tokens is retracted to the queue and the ratio jumps to 1.0
 * (`KV cache pool is full. Retract requests.`). Time comes in through `schedule` and `now`.
 */
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
  promptTokensTotal: number;
  generationTokensTotal: number;
  requestsTotal: number;
  abortedTotal: number;
}

export type Schedule = (fn: () => void, ms: number) => () => void;

const INIT_RATIO = 0.7;
const MIN_RATIO = 0.1;
const RATIO_DECAY = (INIT_RATIO - MIN_RATIO) / 600;
/** SGLang's default `decode_log_interval`. */
const DECODE_LOG_INTERVAL = 40;

export class Engine {
  #opts: SimEngineOptions;
  #schedule: Schedule;
  #now: () => number;
  #log: EngineLog | null;
  #onRetract: (count: number) => void;
  #queue: EngineRequest[] = [];
  #running = new Set<EngineRequest>();
  /** Running requests whose prompt is still being prefilled in chunks: tokens left. */
  #prefilling = new Map<EngineRequest, number>();
  #used = 0;
  #ratio = INIT_RATIO;
  #cancelStep: (() => void) | null = null;
  #halted = false;
  #steps = 0;
  #windowStart: number;
  #windowTokens = 0;
  #lastPrefillMs: number;
  #stats = { genThroughput: 0, lastRetracted: 0, retractions: 0, prompt: 0, generation: 0, requests: 0, aborted: 0 };

  constructor(
    opts: SimEngineOptions,
    schedule: Schedule,
    { now = () => performance.now(), log = null as EngineLog | null, onRetract = (_count: number): void => {} } = {},
  ) {
    this.#opts = { ...opts };
    this.#schedule = schedule;
    this.#now = now;
    this.#log = log;
    this.#onRetract = onRetract;
    this.#windowStart = now();
    this.#lastPrefillMs = now();
  }

  get maxTotalNumTokens(): number {
    return this.#opts.maxTotalNumTokens;
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
    this.#queue.push(request);
    this.#kick();
  }

  /** Frees the request's slot and KV; its `onFinish` gets 'abort'. False if it already finished. */
  abort(request: EngineRequest): boolean {
    if (this.#running.has(request)) {
      this.#release(request);
    } else {
      const index = this.#queue.indexOf(request);
      if (index < 0) return false;
      this.#queue.splice(index, 1);
    }
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
    this.#running.clear();
    this.#prefilling.clear();
    this.#used = 0;
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
      promptTokensTotal: s.prompt,
      generationTokensTotal: s.generation,
      requestsTotal: s.requests,
      abortedTotal: s.aborted,
    };
  }

  #kick(): void {
    if (this.#halted || this.#cancelStep !== null) return;
    this.#cancelStep = this.#schedule(() => this.#startStep(), 0);
  }

  #reserve(request: EngineRequest): number {
    return Math.max(0, Math.ceil((request.maxTokens - request.generated) * this.#ratio));
  }

  #startStep(): void {
    this.#cancelStep = null;
    if (this.#halted) return;
    this.#retractIfFull();
    const admitted = this.#admit();
    if (this.#running.size === 0) return;
    const o = this.#opts;
    let prefillTokens = this.#prefillChunk();
    for (const request of admitted) {
      if (!this.#prefilling.has(request)) prefillTokens += request.promptTokens + request.generated;
    }
    const decodeMs = o.tokenMs * (1 + o.batchPenalty * this.#running.size) * o.slowdown;
    const prefillMs = o.prefillTokensPerMs > 0 ? (prefillTokens / o.prefillTokensPerMs) * o.slowdown : 0;
    const ms = decodeMs + prefillMs;
    this.#cancelStep = this.#schedule(() => this.#endStep(), ms < 0.5 ? 0 : ms);
  }

  #admit(): EngineRequest[] {
    const admitted: EngineRequest[] = [];
    const o = this.#opts;
    let reserved = 0;
    for (const request of this.#running) reserved += this.#reserve(request);
    const runningBefore = this.#running.size;
    while (this.#queue.length > 0 && this.#running.size < o.maxRunningRequests) {
      const head = this.#queue[0];
      const occupies = head.promptTokens + head.generated;
      const wants = occupies + Math.max(1, this.#reserve(head));
      if (this.#running.size > 0 && this.#used + reserved + wants > o.maxTotalNumTokens) break;
      this.#queue.shift();
      this.#running.add(head);
      if (o.chunkedPrefillTokens > 0 && occupies > o.chunkedPrefillTokens) {
        this.#prefilling.set(head, occupies);
      } else {
        this.#used += occupies;
        this.#stats.prompt += occupies;
      }
      reserved += this.#reserve(head);
      admitted.push(head);
    }
    if (admitted.length > 0 && this.#log) {
      const now = this.#now();
      let newTokens = 0;
      for (const request of admitted) newTokens += request.promptTokens + request.generated;
      const seconds = Math.max(0.001, (now - this.#lastPrefillMs) / 1000);
      this.#lastPrefillMs = now;
      this.#log.prefill({
        newSeqs: admitted.length,
        newTokens,
        tokenUsage: this.#used / o.maxTotalNumTokens,
        running: runningBefore,
        queued: this.#queue.length,
        inputThroughput: newTokens / seconds,
      });
    }
    return admitted;
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
      this.#used += take;
      if (take === left) this.#prefilling.delete(request);
      else this.#prefilling.set(request, left - take);
    }
    this.#stats.prompt += done;
    return done;
  }

  /** KV slots the request holds now (less than its length while its prompt is still prefilling). */
  #allocated(request: EngineRequest): number {
    return request.promptTokens + request.generated - (this.#prefilling.get(request) ?? 0);
  }

  /** Takes a running request out of the batch and frees its KV. */
  #release(request: EngineRequest): void {
    this.#used -= this.#allocated(request);
    this.#prefilling.delete(request);
    this.#running.delete(request);
  }

  /** Before a decode step every running request needs one more slot. */
  #retractIfFull(): void {
    const max = this.#opts.maxTotalNumTokens;
    if (this.#used + this.#running.size <= max) return;
    // SGLang retracts the requests with the fewest output tokens (then the longest inputs) first.
    const victims = [...this.#running].sort((a, b) => b.generated - a.generated || a.promptTokens - b.promptTokens);
    let retracted = 0;
    while (this.#used + this.#running.size > max && this.#running.size > 1) {
      const victim = victims.pop() as EngineRequest;
      this.#release(victim);
      victim.retractions++;
      this.#queue.unshift(victim);
      retracted++;
    }
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
      this.#used++;
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
    this.#log?.decode({
      running: this.#running.size,
      usedTokens: this.#used,
      tokenUsage: this.#used / this.#opts.maxTotalNumTokens,
      genThroughput: this.#stats.genThroughput,
      queued: this.#queue.length,
    });
  }

  #finish(request: EngineRequest, reason: FinishReason): void {
    if (!this.#running.has(request)) return;
    this.#release(request);
    request.onFinish(request, reason);
  }
}
