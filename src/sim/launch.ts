/**
 * One run of the simulated process, from spawn to exit: its log file, engine, HTTP listener and
 * timers. A restart is a new Launch; `teardown()` leaves no timer, socket or file handle behind.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { loadChatModel } from '../model/chat-model.js';
import { Engine, type EngineRequest } from './engine.js';
import { createHandler, type HttpHost } from './http.js';
import type { InfoContext } from './info.js';
import { SimKvPublisher } from './kv-publisher.js';
import { type LaunchHost, launchSglang, launchVllm } from './lifecycle.js';
import { LogWriter } from './log-writer.js';
import { gpuIndex, memoryFigures } from './memory.js';
import type { ResolvedSimOptions } from './options.js';
import type { RuntimeLog } from './runtime-log.js';
import { SglangLog } from './sglang-log.js';
import type { ThinkingConfig } from './thinking-prompt.js';
import { Timers } from './timers.js';
import type { SimCounters, SimStatus } from './types.js';
import { VllmLog } from './vllm-log.js';

/** What a launch reports to its SimServer. */
export interface LaunchOwner {
  readonly counters: SimCounters;
  readonly status: SimStatus;
  setStatus(status: SimStatus): void;
  received(path: string, method: string): void;
  generationBody(path: string, body: unknown): void;
  clientGone(): void;
  ready(): void;
  /** The process is gone (port closed); the owner sets `exited` and emits `exit`. */
  exited(reason: string): void;
}

const WARMUP_PROMPT_TOKENS = 7; // "The capital city of France is" (ref 1.2; real logs show #new-token: 7)

export class Launch implements LaunchHost, HttpHost {
  readonly timers = new Timers();
  readonly engine: Engine;
  readonly log: SglangLog | VllmLog;
  readonly info: InfoContext;
  readonly held = new Set<ServerResponse>();
  readonly active = new Map<string, EngineRequest>();
  readonly pid = 1000 + Math.floor(Math.random() * 4_000_000);
  readonly thinking: ThinkingConfig | null;
  /** `--kv-events-config`: the KV-event publisher, bound with the listener; null without. */
  readonly kvPublisher: SimKvPublisher | null;
  readonly kvTokens: ((text: string) => readonly number[]) | null;
  #opts: ResolvedSimOptions;
  #owner: LaunchOwner;
  #server: Server | null = null;
  #sockets = new Set<Socket>();
  #scripted = true;
  #closed = false;
  #dying = false;
  /** With `dp_rank_dead`: the share of new requests that land on the dead rank (0 = none). */
  #deadRankShare = 0;
  #deadRankDebt = 0;

  constructor(opts: ResolvedSimOptions, owner: LaunchOwner, { truncateLog }: { truncateLog: boolean }) {
    this.#opts = opts;
    this.#owner = owner;
    const writer = new LogWriter(opts.logFile, { truncate: truncateLog });
    const memory = memoryFigures(opts.model, opts.engine.maxTotalNumTokens);
    const common = {
      model: opts.model,
      host: opts.host,
      port: opts.port,
      gpu: gpuIndex(opts.name),
      maxRunningRequests: opts.engine.maxRunningRequests,
      maxTotalNumTokens: opts.engine.maxTotalNumTokens,
      contextLen: opts.contextLen,
      memory,
    };
    this.log =
      opts.kind === 'vllm'
        ? new VllmLog(writer, { ...common, pid: this.pid })
        : new SglangLog(writer, {
            ...common,
            version: opts.version,
            apiKey: opts.apiKey,
            enableMetrics: opts.enableMetrics,
          });
    this.kvPublisher =
      opts.kvEvents === null ? null : new SimKvPublisher(opts.kvEvents, opts.engine.pageSize, opts.kind);
    this.kvTokens = opts.kvEvents === null ? null : kvTokensOf(opts);
    this.engine = new Engine(opts.engine, (fn, ms) => this.timers.set(fn, ms), {
      cacheObserver: this.kvPublisher,
      log: writer.enabled ? this.log : null,
      onRetract: (count) => {
        owner.counters.retractions += count;
      },
    });
    this.thinking = thinkingConfig(opts);
    this.info = {
      model: opts.model,
      host: opts.host,
      port: opts.port,
      kind: opts.kind,
      version: opts.version,
      engine: opts.engine,
      contextLen: opts.contextLen,
      enableMetrics: opts.enableMetrics,
      startedAt: Math.floor(Date.now() / 1000),
    };
  }

  // LaunchHost / HttpHost views of the options and owner.
  get name(): string {
    return this.#opts.name;
  }
  get timing() {
    return this.#opts.timing;
  }
  get failure() {
    return this.#opts.failure;
  }
  get status(): SimStatus {
    return this.#owner.status;
  }
  get counters(): SimCounters {
    return this.#owner.counters;
  }
  get model(): string {
    return this.#opts.model;
  }
  get serverName(): string {
    return this.#opts.name;
  }
  get kind(): 'sglang' | 'vllm' {
    return this.#opts.kind;
  }
  get defaultMaxTokens(): number {
    return this.#opts.engine.defaultMaxTokens;
  }
  get apiKey(): string | null {
    return this.#opts.apiKey;
  }
  get healthMs(): number {
    return this.#opts.timing.healthMs;
  }
  get healthTimeoutMs(): number {
    return this.#opts.timing.healthTimeoutMs;
  }

  run(): void {
    const script =
      this.#opts.kind === 'vllm' ? launchVllm(this, this.log as VllmLog) : launchSglang(this, this.log as SglangLog);
    script.catch((error: unknown) => {
      if (this.alive()) this.exit(`simulator error: ${error instanceof Error ? error.message : String(error)}`);
    });
  }

  alive(): boolean {
    return this.#scripted && !this.#closed;
  }

  sleep(ms: number): Promise<void> {
    return this.timers.sleep(ms);
  }

  setStatus(status: SimStatus): void {
    if (!this.#closed) this.#owner.setStatus(status);
  }

  generationBody(path: string, body: unknown): void {
    this.#owner.generationBody(path, body);
  }

  received(path: string, method: string): void {
    this.#owner.received(path, method);
  }

  dying(): boolean {
    return this.#dying || this.#closed;
  }

  clientGone(): void {
    this.#owner.clientGone();
  }

  async listen(): Promise<boolean> {
    try {
      await this.kvPublisher?.start();
    } catch {
      return false;
    }
    if (this.kvPublisher !== null) this.info.kvEvents = this.kvPublisher;
    const server = createServer({ keepAliveTimeout: 5000, requestTimeout: 0 }, createHandler(this));
    server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    return new Promise((resolve) => {
      server.once('error', () => resolve(false));
      // uvicorn's default backlog.
      server.listen({ port: this.#opts.port, host: this.#opts.host, backlog: 2048 }, () => {
        if (this.#closed) {
          server.close();
          return resolve(false);
        }
        this.#server = server;
        resolve(true);
      });
    });
  }

  warmup(extraMs: number): Promise<void> {
    return new Promise((resolve) => {
      this.timers.set(() => {
        this.engine.submit({
          id: 'warmup',
          promptTokens: WARMUP_PROMPT_TOKENS,
          maxTokens: 8,
          targetTokens: 8,
          stopReason: 'length',
          generated: 0,
          retractions: 0,
          onToken() {},
          onFinish: () => resolve(),
        });
      }, extraMs);
    });
  }

  ready(): void {
    this.#owner.ready();
    const failure = this.#opts.failure;
    if (failure === null || !('afterMs' in failure)) return;
    this.timers.set(() => {
      if (failure.mode === 'crash_after_ready') void this.crash();
      else if (failure.mode === 'scheduler_dead_http_alive') this.schedulerDead();
      else if (failure.mode === 'dp_rank_dead') this.dpRankDead(failure.fraction);
      else this.hang();
    }, failure.afterMs);
  }

  /** One DP rank dies: `fraction` of new generation requests hang with no byte; the rest still work. */
  dpRankDead(fraction = 0.5): void {
    this.#deadRankShare = fraction;
  }

  /**
   * Whether this new request lands on the dead DP rank: spread evenly (every other one at 0.5), as
   * DP round-robin would send them.
   */
  landsOnDeadRank(streamed: boolean): boolean {
    if (this.#deadRankShare === 0) return false;
    this.#deadRankDebt += this.#deadRankShare;
    if (this.#deadRankDebt < 1) return false;
    this.#deadRankDebt -= 1;
    this.counters.deadRank++;
    if (streamed) this.counters.deadRankStreams++;
    return true;
  }

  exit(reason: string): void {
    if (this.#closed) return;
    void this.teardown().then(() => this.#owner.exited(reason));
  }

  /** Scheduler exception; the whole process exits, dropping every connection (ref 1.5). */
  async crash(message = 'RuntimeError: CUDA error: an illegal memory access was encountered'): Promise<void> {
    if (this.#closed) return;
    this.#dying = true;
    if (this.log instanceof SglangLog) {
      this.log.runtimeException(message);
      this.log.sigquitRunning();
    } else {
      this.log.engineDead(message);
    }
    await this.teardown();
    this.#owner.exited(`Scheduler hit an exception: ${message}`);
  }

  /** The scheduler dies but HTTP lives on (issue #6624): generation and scheduler-backed endpoints hang. */
  schedulerDead(message = 'RuntimeError: CUDA error: an illegal memory access was encountered'): void {
    if (this.#closed) return;
    this.#scripted = false;
    if (this.log instanceof SglangLog) this.log.runtimeException(message);
    else this.log.engineDead(message);
    this.engine.halt();
    this.#owner.setStatus('failed');
  }

  /** Stops answering anything; start-up, if still running, prints nothing more. */
  hang(): void {
    if (this.#closed) return;
    this.#scripted = false;
    this.engine.halt();
    this.#owner.setStatus('hung');
  }

  /** Closes the port, drops every connection, clears every timer and closes the log. */
  async teardown(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#dying = true;
    this.timers.clearAll();
    this.engine.clear();
    this.active.clear();
    const server = this.#server;
    this.#server = null;
    if (server !== null) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of this.#sockets) socket.destroy();
      server.closeAllConnections();
      await closed;
    }
    this.held.clear();
    await this.kvPublisher?.close();
    (this.log as RuntimeLog).close();
  }
}

/** The prompt's token ids the KV events carry: the model's tokenizer, else one stand-in id per 4 characters. */
function kvTokensOf(opts: ResolvedSimOptions): (text: string) => readonly number[] {
  if (opts.modelPath !== null) {
    const model = loadChatModel(opts.modelPath);
    return (text) => model.encode(text);
  }
  return (text) => {
    const ids: number[] = new Array(Math.floor(text.length / 4));
    for (let i = 0; i < ids.length; i++) {
      let h = 0x811c9dc5;
      for (let j = i * 4; j < i * 4 + 4; j++) h = Math.imul(h ^ text.charCodeAt(j), 0x01000193);
      ids[i] = (h >>> 0) % 150_000;
    }
    return ids;
  };
}

/**
 * Thinking mode from the options: on with a reasoning parser, or with a model directory whose
 * vocabulary has think markers (a thinking model without a parser writes its tags into `content`).
 */
function thinkingConfig(opts: ResolvedSimOptions): ThinkingConfig | null {
  const model = opts.modelPath === null ? null : loadChatModel(opts.modelPath);
  if (opts.reasoningParser === null && model?.think == null) return null;
  return {
    parser: opts.reasoningParser,
    thinkTokens: opts.thinkTokens,
    model,
    vllmField: opts.vllmReasoningField,
  };
}
