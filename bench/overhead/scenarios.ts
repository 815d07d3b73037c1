/**
 * The overhead scenarios: (a)-(d) as the issue names them, one target at a time, and (a-cpu),
 * (b-cpu): the loads of (a) and (b) on every proxy at once, for their CPU ratios. Each warms the
 * targets up, then measures one phase: client-side throughput and latency, the proxy's CPU time and
 * peak RSS from /proc, and how busy core 1 (the simulated backends + this client) was, which says
 * whether the proxy or the test rig was the limit.
 */
import type { SimEngineOptions } from '../../src/sim/index.js';
import { closedLoop, LoadClient, type Outcome } from '../lib/load.js';
import { CpuMeter, resetPeakRss, systemBusySeconds, treePeakRssBytes, treeRssBytes } from '../lib/proc-stats.js';
import type { SimHost } from '../lib/sim-control.js';
import { percentileSorted, Samples } from '../lib/stats.js';
import type { RunningTarget } from '../lib/targets.js';

export type ScenarioId = 'a' | 'a-cpu' | 'b' | 'b-cpu' | 'c' | 'd';
export const SCENARIO_IDS: readonly ScenarioId[] = ['a', 'a-cpu', 'b', 'b-cpu', 'c', 'd'];

export interface Sizes {
  backends: number;
  /** (a) */
  requests: number;
  concurrency: number;
  /** (b): `streams` at once, `rounds` streams per slot, `chunks` tokens each. */
  streams: number;
  rounds: number;
  chunks: number;
  /** (c) */
  pacedStreams: number;
  pacedChunks: number;
  paceMs: number;
  /** (d) */
  sequential: number;
}

export const FULL: Sizes = {
  backends: 4,
  requests: 30_000,
  concurrency: 64,
  streams: 256,
  rounds: 4,
  chunks: 200,
  pacedStreams: 1000,
  pacedChunks: 200,
  paceMs: 20,
  sequential: 200,
};

export const QUICK: Sizes = {
  backends: 2,
  requests: 300,
  concurrency: 32,
  streams: 16,
  rounds: 1,
  chunks: 30,
  pacedStreams: 50,
  pacedChunks: 15,
  paceMs: 20,
  sequential: 10,
};

export type Metrics = Record<string, number>;

interface ScenarioBase {
  id: ScenarioId;
  title: string;
  engine(sizes: Sizes): Partial<SimEngineOptions>;
}

/** Measures one target at a time. */
interface SoloScenario extends ScenarioBase {
  together: false;
  run(target: RunningTarget, sims: SimHost, sizes: Sizes): Promise<Metrics>;
}

/**
 * Measures every proxy at once, all pinned to the proxy core and served in turn request by
 * request: each proxy's CPU is taken over the same seconds, so a machine whose speed drifts from
 * minute to minute (a VM's neighbours) moves them all alike, and their ratio holds still.
 */
interface SideBySideScenario extends ScenarioBase {
  together: true;
  run(targets: readonly RunningTarget[], sims: SimHost, sizes: Sizes): Promise<Metrics[]>;
}

export type Scenario = SoloScenario | SideBySideScenario;

/** Backends that are never the thing being measured: no batch slowdown, no prefill cost, room for every stream. */
const fastEngine = (tokenMs: number): Partial<SimEngineOptions> => ({
  tokenMs,
  maxRunningRequests: 8192,
  maxTotalNumTokens: 100_000_000,
  batchPenalty: 0,
  prefillTokensPerMs: 1_000_000,
  defaultMaxTokens: 16,
});

function chatBody(maxTokens: number, stream: boolean): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: 'meta-llama/Llama-3.1-8B-Instruct',
      messages: [{ role: 'user', content: 'Say something about Paris.' }],
      max_tokens: maxTokens,
      stream,
    }),
  );
}

const PATH = '/v1/chat/completions';

/** CPU of the proxies, the sims and this process over one measured phase. */
class Phase {
  readonly #proxies: (CpuMeter | null)[];
  readonly #sims: CpuMeter;
  readonly #client = process.cpuUsage();
  readonly #system = systemBusySeconds();
  readonly #start = performance.now();

  constructor(targets: readonly RunningTarget[], sims: SimHost) {
    this.#proxies = targets.map((target) => (target.proc ? new CpuMeter(target.proc.pid) : null));
    this.#sims = new CpuMeter(sims.proc.pid);
  }

  end(): { wallSec: number; proxyCpuSec: number[]; core1Busy: number; simCpuSec: number; otherCores: number } {
    const wallSec = (performance.now() - this.#start) / 1000;
    const client = process.cpuUsage(this.#client);
    const clientSec = (client.user + client.system) / 1e6;
    const simCpuSec = this.#sims.seconds();
    const proxyCpuSec = this.#proxies.map((meter) => (meter ? meter.seconds() : Number.NaN));
    const proxiesSec = proxyCpuSec.reduce((sum, sec) => sum + (Number.isNaN(sec) ? 0 : sec), 0);
    const system = systemBusySeconds() - this.#system;
    return {
      wallSec,
      proxyCpuSec,
      simCpuSec,
      core1Busy: (simCpuSec + clientSec) / wallSec,
      // CPU used by anything else (other sessions on the machine, kernel softirq work): a noise gauge.
      otherCores: Math.max(0, system - simCpuSec - clientSec - proxiesSec) / wallSec,
    };
  }
}

function failIfAllFailed(ok: number, errors: number, kinds: Record<string, number>): void {
  if (ok === 0 && errors > 0) throw new Error(`every request failed: ${JSON.stringify(kinds)}`);
}

/** What one target served in a measured phase. */
interface Served {
  ok: number;
  errors: number;
  /** SSE events received. */
  events: number;
  /** Request latency (a) or time to first chunk (b), ms. */
  samples: Samples;
}

interface Load {
  /** Requests in flight per target. */
  concurrency: number;
  /** Requests per target. */
  total: number;
  deadlineMs: number;
  body: Buffer;
  /** What a finished request adds to its target's samples, if anything. */
  sample?: (o: Outcome) => number | null;
}

/** At most `size` holders at once; the others wait in turn. */
class Slots {
  #free: number;
  readonly #waiting: Array<() => void> = [];

  constructor(size: number) {
    this.#free = size;
  }

  async take(): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  give(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#free++;
  }
}

/**
 * One closed loop over every target at once: request `i` goes to target `i mod k`, so each serves
 * the same requests at the same pace, as each would alone with the test rig setting the pace. Each
 * target has at most `concurrency` of them in flight: a proxy that answers slower makes the loop
 * wait for it instead of holding more of its requests (which would stretch that proxy's requests,
 * and what they hold, beyond what the others see). With one target it is a plain closed loop of
 * `concurrency`.
 */
export async function inTurn(clients: readonly LoadClient[], load: Load): Promise<Served[]> {
  const k = clients.length;
  const served: Served[] = clients.map(() => ({ ok: 0, errors: 0, events: 0, samples: new Samples(load.total) }));
  const slots = clients.map(() => new Slots(load.concurrency));
  const result = await closedLoop(clients, {
    concurrency: load.concurrency * k,
    total: load.total * k,
    deadlineMs: load.deadlineMs,
    send: async (i) => {
      const mine = slots[i % k];
      await mine.take();
      try {
        return await clients[i % k].post(PATH, load.body);
      } finally {
        mine.give();
      }
    },
    onOutcome: (o, i) => {
      const s = served[i % k];
      if (o.error === null && o.status >= 200 && o.status < 300) s.ok++;
      else s.errors++;
      s.events += o.events;
      const sample = load.sample?.(o) ?? null;
      if (sample !== null) s.samples.push(sample);
    },
  });
  failIfAllFailed(result.ok, result.errors, result.errorKinds);
  return served;
}

/**
 * A client per target with `connections` to each of its URLs: a warm-up loop, then the measured one,
 * with the CPU of every proxy, the sims and this process taken over the measured loop only.
 */
async function warmThenMeasure(
  targets: readonly RunningTarget[],
  sims: SimHost,
  connections: number,
  warm: Load,
  measured: Load,
) {
  const clients = targets.map((target) => new LoadClient(target.urls, connections));
  try {
    await inTurn(clients, warm);
    const phase = new Phase(targets, sims);
    const served = await inTurn(clients, measured);
    const p = phase.end();
    // Each proxy's RSS right after its measured load (#54: <= 200 MB after a 64-concurrency run).
    const rssMB = targets.map((target) => (target.proc ? treeRssBytes(target.proc.pid) / 2 ** 20 : Number.NaN));
    return { p, served, rssMB };
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
}

/** (a) and (a-cpu): small non-streamed requests at `sizes.concurrency` per target. */
async function nonStreamed(targets: readonly RunningTarget[], sims: SimHost, sizes: Sizes): Promise<Metrics[]> {
  const body = chatBody(4, false);
  const warm = Math.max(200, Math.floor(sizes.requests / 10));
  const { p, served, rssMB } = await warmThenMeasure(
    targets,
    sims,
    sizes.concurrency,
    { concurrency: sizes.concurrency, total: warm, deadlineMs: 30_000, body },
    {
      concurrency: sizes.concurrency,
      total: sizes.requests,
      deadlineMs: 120_000 * targets.length,
      body,
      sample: (o) => o.endMs - o.startMs,
    },
  );
  const allOk = served.reduce((sum, s) => sum + s.ok, 0);
  return served.map((s, t) => {
    const sorted = s.samples.sorted();
    return {
      reqPerSec: s.ok / p.wallSec,
      p50Ms: percentileSorted(sorted, 50),
      p99Ms: percentileSorted(sorted, 99),
      proxyCpuSec: p.proxyCpuSec[t],
      cpuPer1kReq: (p.proxyCpuSec[t] / s.ok) * 1000,
      simCpuPer1kReq: (p.simCpuSec / allOk) * 1000,
      rssMB: rssMB[t],
      core1Busy: p.core1Busy,
      otherCores: p.otherCores,
      errors: s.errors,
    };
  });
}

/** (b) and (b-cpu): SSE streams at full speed, `sizes.streams` at once per target. */
async function fullSpeedStreams(targets: readonly RunningTarget[], sims: SimHost, sizes: Sizes): Promise<Metrics[]> {
  const { p, served, rssMB } = await warmThenMeasure(
    targets,
    sims,
    sizes.streams,
    { concurrency: sizes.streams, total: sizes.streams, deadlineMs: 30_000, body: chatBody(20, true) },
    {
      concurrency: sizes.streams,
      total: sizes.streams * sizes.rounds,
      deadlineMs: 180_000 * targets.length,
      body: chatBody(sizes.chunks, true),
      sample: (o) => (o.firstMs > 0 ? o.firstMs - o.startMs : null),
    },
  );
  const allEvents = served.reduce((sum, s) => sum + s.events, 0);
  return served.map((s, t) => {
    const sorted = s.samples.sorted();
    return {
      chunksPerSec: s.events / p.wallSec,
      ttfcP50Ms: percentileSorted(sorted, 50),
      ttfcP99Ms: percentileSorted(sorted, 99),
      proxyCpuSec: p.proxyCpuSec[t],
      cpuPer100kChunks: (p.proxyCpuSec[t] / s.events) * 100_000,
      simCpuPer100kChunks: (p.simCpuSec / allEvents) * 100_000,
      chunksPerStream: s.events / Math.max(1, s.ok + s.errors),
      rssMB: rssMB[t],
      core1Busy: p.core1Busy,
      otherCores: p.otherCores,
      errors: s.errors,
    };
  });
}

const solo =
  (measure: (targets: readonly RunningTarget[], sims: SimHost, sizes: Sizes) => Promise<Metrics[]>) =>
  async (target: RunningTarget, sims: SimHost, sizes: Sizes): Promise<Metrics> =>
    (await measure([target], sims, sizes))[0];

const scenarioA: SoloScenario = {
  id: 'a',
  title: `(a) non-streamed small requests`,
  engine: () => fastEngine(0),
  together: false,
  run: solo(nonStreamed),
};

const scenarioB: SoloScenario = {
  id: 'b',
  title: `(b) concurrent SSE streams at full speed`,
  engine: () => fastEngine(0),
  together: false,
  run: solo(fullSpeedStreams),
};

const scenarioACpu: SideBySideScenario = {
  id: 'a-cpu',
  title: `(a-cpu) non-streamed small requests, every proxy at once`,
  engine: () => fastEngine(0),
  together: true,
  run: nonStreamed,
};

const scenarioBCpu: SideBySideScenario = {
  id: 'b-cpu',
  title: `(b-cpu) SSE streams at full speed, every proxy at once`,
  engine: () => fastEngine(0),
  together: true,
  run: fullSpeedStreams,
};

const BUCKET_MS = 10;

const scenarioC: SoloScenario = {
  id: 'c',
  title: `(c) many concurrent paced streams`,
  together: false,
  engine: (sizes) => fastEngine(sizes.paceMs),
  async run(target, sims, sizes) {
    const n = sizes.pacedStreams;
    const client = new LoadClient(target.urls, n);
    try {
      // Opens every client and upstream connection before the measured phase.
      const warmBody = chatBody(2, true);
      await closedLoop(client, {
        concurrency: n,
        total: n,
        deadlineMs: 30_000,
        send: () => client.post(PATH, warmBody),
      });
      const idleRss = target.proc ? treeRssBytes(target.proc.pid) : Number.NaN;
      const hwmReset = target.proc ? resetPeakRss(target.proc.pid) : false;
      const body = chatBody(sizes.pacedChunks, true);
      const nominalMs = sizes.pacedChunks * sizes.paceMs;
      const buckets = new Float64Array(Math.ceil((nominalMs * 4 + 60_000) / BUCKET_MS));
      const gaps = new Samples(n * sizes.pacedChunks);
      const firsts: number[] = [];
      const ends: number[] = [];
      let events = 0;
      const phase = new Phase([target], sims);
      const t0 = performance.now();
      const result = await closedLoop(client, {
        concurrency: n,
        total: n,
        deadlineMs: nominalMs * 4 + 30_000,
        graceMs: 10_000,
        send: () => {
          // A gap is the time between two socket reads that completed SSE events. undici calls onData once
          // per HTTP chunk, so several calls can come from one read; they count as one delivery (the
          // parser runs synchronously over a read, so a microtask marks its end).
          let last = 0;
          let inRead = false;
          const endRead = () => {
            inRead = false;
          };
          return client.post(PATH, body, {
            onData(now, count) {
              if (count === 0) return;
              const bucket = Math.floor((now - t0) / BUCKET_MS);
              if (bucket < buckets.length) buckets[bucket] += count;
              if (inRead) return;
              inRead = true;
              queueMicrotask(endRead);
              if (last > 0) gaps.push(now - last);
              last = now;
            },
          });
        },
        onOutcome: (o: Outcome) => {
          events += o.events;
          if (o.firstMs > 0) firsts.push(o.firstMs - t0);
          ends.push(o.endMs - t0);
        },
      });
      const p = phase.end();
      failIfAllFailed(result.ok, result.errors, result.errorKinds);
      // The share is taken while every stream is running: from the last first chunk to the first end.
      const from = Math.max(...firsts);
      const to = Math.min(...ends);
      let inWindow = 0;
      const b0 = Math.ceil(from / BUCKET_MS);
      const b1 = Math.floor(to / BUCKET_MS);
      for (let b = b0; b < b1; b++) inWindow += buckets[b];
      const windowMs = (b1 - b0) * BUCKET_MS;
      const expected = (n * windowMs) / sizes.paceMs;
      const peak = target.proc ? treePeakRssBytes(target.proc.pid) : Number.NaN;
      return {
        rateShare: windowMs > 0 ? inWindow / expected : Number.NaN,
        chunksPerSec: windowMs > 0 ? (inWindow / windowMs) * 1000 : Number.NaN,
        expectedChunksPerSec: (n / sizes.paceMs) * 1000,
        windowSec: windowMs / 1000,
        gapP50Ms: percentileSorted(gaps.sorted(), 50),
        gapP99Ms: percentileSorted(gaps.sorted(), 99),
        peakRssMB: peak / 2 ** 20,
        idleRssMB: idleRss / 2 ** 20,
        peakRssSinceStart: hwmReset ? 0 : 1,
        proxyCpuSec: p.proxyCpuSec[0],
        cpuPer100kChunks: (p.proxyCpuSec[0] / events) * 100_000,
        core1Busy: p.core1Busy,
        otherCores: p.otherCores,
        errors: result.errors,
      };
    } finally {
      await client.close();
    }
  },
};

/** (d) warms up with 10x its sequential streams, this many at a time. */
const WARM_CONCURRENCY = 8;

const scenarioD: SoloScenario = {
  id: 'd',
  title: `(d) time to first chunk, one stream at a time`,
  together: false,
  engine: () => fastEngine(0),
  async run(target, sims, sizes) {
    const body = chatBody(4, true);
    // A proxy in service has long compiled its hot path; 50 streams alone leave a Node proxy's JIT
    // cold, and the measurement would be of V8's interpreter. Same warm-up for every target.
    const warmer = new LoadClient(target.urls, WARM_CONCURRENCY);
    try {
      await closedLoop(warmer, {
        concurrency: WARM_CONCURRENCY,
        total: sizes.sequential * 10,
        deadlineMs: 60_000,
        send: () => warmer.post(PATH, body),
      });
    } finally {
      await warmer.close();
    }
    const client = new LoadClient(target.urls, 1);
    try {
      const send = () => client.post(PATH, body);
      await closedLoop(client, { concurrency: 1, total: Math.max(20, sizes.sequential / 4), deadlineMs: 30_000, send });
      const ttfc = new Samples(sizes.sequential);
      const phase = new Phase([target], sims);
      const result = await closedLoop(client, {
        concurrency: 1,
        total: sizes.sequential,
        deadlineMs: 60_000,
        send,
        onOutcome: (o) => {
          if (o.firstMs > 0) ttfc.push(o.firstMs - o.startMs);
        },
      });
      phase.end();
      failIfAllFailed(result.ok, result.errors, result.errorKinds);
      const sorted = ttfc.sorted();
      return {
        ttfcP50Ms: percentileSorted(sorted, 50),
        ttfcP90Ms: percentileSorted(sorted, 90),
        errors: result.errors,
      };
    } finally {
      await client.close();
    }
  },
};

export const SCENARIOS: Record<ScenarioId, Scenario> = {
  a: scenarioA,
  'a-cpu': scenarioACpu,
  b: scenarioB,
  'b-cpu': scenarioBCpu,
  c: scenarioC,
  d: scenarioD,
};
