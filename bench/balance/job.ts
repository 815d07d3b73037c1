/**
 * One run of the batch job through one balancer, on a fresh set of simulated servers: the job's
 * requests go out at a fixed concurrency through one URL (no client retries, like a plain
 * generation script), optionally with faults: one server starts late, one crashes mid-run and is
 * relaunched a moment later.
 */
import { mkdirSync } from 'node:fs';
import type { SimEngineOptions } from '../../src/sim/index.js';
import { BENCH_DEADLINE, closedLoop, LoadClient, REQUEST_TIME_LIMIT } from '../lib/load.js';
import { SimHost } from '../lib/sim-control.js';
import { percentileSorted, Samples } from '../lib/stats.js';
import { startReplicas, type TargetSpec } from '../lib/targets.js';
import { simCounters, warmUp } from '../lib/warm-up.js';
import { type Job, MODEL } from './workload.js';

export interface FaultPlan {
  /** This server is started `lateMs` after the job begins. */
  lateIndex: number;
  lateMs: number;
  /** This server crashes once this share of the job's requests has completed, and relaunches after `restartAfterMs`. */
  crashIndex: number;
  crashAtShare: number;
  restartAfterMs: number;
}

/**
 * One server's scheduler dies once this share of the job is done; its HTTP server stays up and its
 * `/health` keeps answering 200 (SGLang v0.4 with no log to read): only traffic can tell.
 */
export interface SchedulerDeadPlan {
  index: number;
  atShare: number;
}

export interface JobOptions {
  servers: number;
  engine: (i: number) => SimEngineOptions;
  jobs: Job[];
  concurrency: number;
  fault: FaultPlan | null;
  schedulerDead?: SchedulerDeadPlan | null;
  /** The client aborts a request still running after this long (0 = never). */
  requestTimeoutMs?: number;
  /** After `deadlineMs` no request starts; after this much more the ones in flight are aborted. */
  graceMs?: number;
  proxyCpu: number | null;
  /** Extra node flags for fleetgate, e.g. `--cpu-prof`. */
  proxyNodeArgs?: string[];
  clientCpu: number | null;
  dir: string;
  deadlineMs: number;
  /**
   * Before the clock starts: this many one-token requests at once through the job's client (warm-up.ts);
   * the servers' counters leave them out. 0 or absent: none, the job meets a cold balancer.
   */
  warmup?: number;
  /** Processes of the target over the same servers (default 1), the client spreading requests round-robin over them. */
  replicas?: number;
  /** Started (and awaited) once the balancer is ready, just before the job; stopped when the job is done. */
  alongside?: (urls: string[]) => Promise<{ stop(): Promise<void> }>;
}

export interface JobMetrics {
  makespanSec: number;
  p50Sec: number;
  p99Sec: number;
  ok: number;
  errors: number;
  errorKinds: Record<string, number>;
  retractions: number;
  /** Completed requests per server, in server order. */
  completed: number[];
  /** Requests received per server (retried or failed ones included). */
  received: number[];
  generatedTokens: number;
  /** Whether the deadline cut the job short. */
  cut: boolean;
  /** Requests that never completed: cut by the per-request or the run's time limit, or never sent. */
  neverCompleted: number;
  /** Requests the servers completed before the clock started (the warm-up's); the counters above leave them out. */
  warmedUp: number;
  /**
   * Content deltas of the answers the client got whole (streamed jobs): the generated tokens it can
   * use. The rest of `generatedTokens` was thrown away: never sent, or part of a cut stream.
   */
  deliveredTokens: number;
  /** Most generation requests each server held at once (running and queued), every replica's together. */
  peakHeld: number[];
}

const PATH = '/v1/chat/completions';

export async function runJob(spec: TargetSpec, opts: JobOptions): Promise<JobMetrics> {
  const fault = opts.fault;
  const dead = opts.schedulerDead ?? null;
  mkdirSync(opts.dir, { recursive: true });
  const sims = await SimHost.start({
    count: opts.servers,
    engine: opts.engine,
    cpu: opts.clientCpu,
    logDir: opts.dir,
    lateMs: (i) => (fault && i === fault.lateIndex ? fault.lateMs : undefined),
    restartAfterMs: fault ? fault.restartAfterMs : null,
    version: dead ? 'old' : undefined,
  });
  try {
    const targets = await startReplicas(spec, opts.replicas ?? 1, {
      backends: sims.urls,
      cpu: opts.proxyCpu,
      dir: opts.dir,
      readyBackends: fault ? opts.servers - 1 : opts.servers,
      nodeArgs: opts.proxyNodeArgs,
    });
    const urls = targets.flatMap((target) => target.urls);
    const client = new LoadClient(urls, opts.concurrency, { requestTimeoutMs: opts.requestTimeoutMs });
    try {
      const latencies = new Samples(opts.jobs.length);
      let done = 0;
      let crashed = false;
      let timedOut = 0;
      let deliveredTokens = 0;
      const crashAt = fault ? Math.floor(opts.jobs.length * fault.crashAtShare) : Number.POSITIVE_INFINITY;
      const deadAt = dead ? Math.floor(opts.jobs.length * dead.atShare) : Number.POSITIVE_INFINITY;
      await warmUp(client, opts.warmup ?? 0, { model: MODEL });
      const before = await simCounters(sims);
      if (fault) await sims.go();
      const side = await opts.alongside?.(urls);
      const result = await closedLoop(client, {
        concurrency: opts.concurrency,
        total: opts.jobs.length,
        deadlineMs: opts.deadlineMs,
        graceMs: opts.graceMs ?? 5_000,
        send: (i) => client.post(PATH, opts.jobs[i].body),
        onOutcome: (o) => {
          latencies.push(o.endMs - o.startMs);
          if (o.error === null && o.status === 200) deliveredTokens += o.tokens;
          done++;
          if (o.error === REQUEST_TIME_LIMIT || o.error === BENCH_DEADLINE) timedOut++;
          if (dead && done === deadAt) void sims.schedulerDead(dead.index);
          if (fault && !crashed && done >= crashAt) {
            crashed = true;
            void sims.crash(fault.crashIndex);
          }
        },
      });
      await side?.stop();
      const after = await simCounters(sims);
      const sorted = latencies.sorted();
      return {
        makespanSec: result.elapsedMs / 1000,
        p50Sec: percentileSorted(sorted, 50) / 1000,
        p99Sec: percentileSorted(sorted, 99) / 1000,
        ok: result.ok,
        errors: result.errors + (opts.jobs.length - result.sent),
        errorKinds: result.errorKinds,
        retractions: after.retractions - before.retractions,
        completed: after.completed.map((n, i) => n - before.completed[i]),
        received: after.requests.map((n, i) => n - before.requests[i]),
        generatedTokens: after.generatedTokens - before.generatedTokens,
        cut: result.cut,
        neverCompleted: timedOut + (opts.jobs.length - result.sent),
        warmedUp: before.completed.reduce((sum, n) => sum + n, 0),
        deliveredTokens,
        peakHeld: after.peakHeld,
      };
    } finally {
      await client.close();
      await Promise.all(targets.map((target) => target.stop()));
    }
  } finally {
    await sims.stop();
  }
}
