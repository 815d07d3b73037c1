/**
 * bench:balance in virtual time: the same fleet (the simulator's real `Engine`, one server 1.3x
 * slower), the same job and closed-loop client, and a balancer, with no sockets and no real clock,
 * so one job takes a fraction of a second and a policy can be judged over many workload seeds
 * instead of three noisy runs of one. fleetgate is modelled with its real admission queue, policy,
 * adaptive cap and load formula (`backendLoad`), fed reports every `load_interval`; the peers'
 * least-connections sends each request straight to the server with the fewest in flight; `oracle`
 * bounds what any central queue could gain over it; `-x2` runs two replicas of a balancer.
 * Not a replacement for the bench: no proxy CPU, no timer jitter, a fixed network delay.
 *
 *   node --import tsx bench/balance/model.ts [--seeds 20] [--concurrency 896] [--kv-tokens 10000]
 *     [--balancers least-conn,fleetgate,fleetgate-x2] [--cap 32] [--replicas 2] [--cap-scope replica]
 *
 * `--cap N`: a fixed `max_inflight_per_backend` instead of `auto`; `--replicas N`: `routing.replicas`
 * (each replica takes 1/N of the room a report shows); `--cap-scope replica`: caps count this
 * replica's requests only (before issue #29's fleet-wide `auto` cap). Besides makespans it prints the
 * most one server held at once, every replica together, against the most dispatched to one server
 * within one load interval: what a cap can be overshot by when replicas see each other a report late.
 */
import { parseArgs } from 'node:util';
import type { BackendConfig } from '../../src/config/types.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { CapController } from '../../src/routing/load/cap-controller.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import type { Policy } from '../../src/routing/policies/policy-contract.js';
import { type Lease, WaitQueue, type WaitQueueOptions } from '../../src/routing/queue/wait-queue.js';
import type { RequestTraits } from '../../src/routing/request-traits.js';
import { Engine, type EngineRequest } from '../../src/sim/engine.js';
import { parseGeneration } from '../../src/sim/generation.js';
import { numberFlag } from '../lib/cli.js';
import { engineFor, engineOptions, SCRIPT_CONCURRENCY_PER_SLOT, SERVERS, workloadSpec } from './fleet-spec.js';
import { type Job, makeWorkload } from './workload.js';

/** One way, client to balancer to server (and back): a loopback hop through a proxy. */
export const NETWORK_MS = 0.3;
const LOAD_INTERVAL_MS = 250;

export type ModelBalancer =
  | 'least-conn'
  | 'least-conn-x2'
  | 'fleetgate'
  | 'fleetgate-no-cap'
  | 'fleetgate-x2'
  | 'oracle';

/** A virtual clock: a binary heap of timers; `run` fires them in order, letting promises settle between. */
interface Timer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

export class VirtualClock {
  now = 0;
  #seq = 0;
  #heap: Timer[] = [];
  readonly #settle: boolean;

  /**
   * `settle`: after each timer, let every promise chain it started run to its end before time moves
   * on (a macrotask turn), not one microtask turn: a chain of several awaits (a batch client reading
   * the fleet's status) would otherwise finish at some later timer, late in virtual time.
   */
  constructor({ settle = false } = {}) {
    this.#settle = settle;
  }

  /** Like the simulator's timers: Node truncates a delay to whole milliseconds (at least 1); 0 = next turn. */
  schedule = (fn: () => void, ms: number): (() => void) => {
    const timer: Timer = {
      at: this.now + (ms <= 0 ? 0.01 : Math.max(1, Math.trunc(ms))),
      seq: this.#seq++,
      fn,
      cancelled: false,
    };
    this.#push(timer);
    return () => {
      timer.cancelled = true;
    };
  };

  async run(): Promise<void> {
    for (let timer = this.#pop(); timer !== undefined; timer = this.#pop()) {
      if (timer.cancelled) continue;
      this.now = timer.at;
      timer.fn();
      // The admission queue resolves waiters through promises.
      if (this.#settle) await new Promise((resolve) => setImmediate(resolve));
      else await Promise.resolve();
    }
  }

  #before(a: Timer, b: Timer): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  #push(timer: Timer): void {
    const heap = this.#heap;
    heap.push(timer);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (this.#before(heap[parent], heap[i])) break;
      [heap[parent], heap[i]] = [heap[i], heap[parent]];
      i = parent;
    }
  }

  #pop(): Timer | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last !== undefined) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        let least = i;
        if (left < heap.length && this.#before(heap[left], heap[least])) least = left;
        if (left + 1 < heap.length && this.#before(heap[left + 1], heap[least])) least = left + 1;
        if (least === i) break;
        [heap[least], heap[i]] = [heap[i], heap[least]];
        i = least;
      }
    }
    return top;
  }
}

/** Routes a request to a server index and calls `release` when its answer is back; `traits` for prefix-aware. */
export type Router = (send: (server: number, release: () => void) => void, traits?: RequestTraits) => void;

export function leastConnections(): Router {
  const inflight = new Array<number>(SERVERS).fill(0);
  let cursor = 0;
  return (send) => {
    let best = -1;
    for (let step = 0; step < SERVERS; step++) {
      const i = (cursor + step) % SERVERS;
      if (best < 0 || inflight[i] < inflight[best]) best = i;
    }
    cursor = best + 1;
    inflight[best]++;
    send(best, () => inflight[best]--);
  };
}

/**
 * A reference, not a product: the best a central queue can do without knowing answer lengths. It
 * reads every server's exact state at every step (no scrape, no lag) and sends a request only to a
 * server with nothing queued and a batch slot free, the least busy first; the rest wait centrally
 * and go to whichever server frees room first.
 */
function oracle(clock: VirtualClock, engines: Engine[], maxRunning: number, done: () => boolean): Router {
  // Sent but not yet arrived at the server (the network hop), so not in its stats yet.
  const pending = new Array<number>(SERVERS).fill(0);
  const inflight = new Array<number>(SERVERS).fill(0);
  const waiting: Array<(server: number) => void> = [];
  const freeServer = () => {
    let best = -1;
    for (let i = 0; i < SERVERS; i++) {
      const s = engines[i].stats;
      if (s.queued + pending[i] > 0 || s.running + pending[i] >= maxRunning) continue;
      if (best < 0 || inflight[i] < inflight[best]) best = i;
    }
    return best;
  };
  const pump = () => {
    while (waiting.length > 0) {
      const i = freeServer();
      if (i < 0) break;
      const go = waiting.shift() as (server: number) => void;
      go(i);
    }
  };
  const poll = () => {
    pump();
    if (!done()) clock.schedule(poll, 1);
  };
  clock.schedule(poll, 1);
  return (send) => {
    const go = (i: number) => {
      pending[i]++;
      inflight[i]++;
      clock.schedule(() => pending[i]--, NETWORK_MS + 1);
      send(i, () => {
        inflight[i]--;
        pump();
      });
    };
    waiting.push(go);
    pump();
  };
}

export function modelRegistry(defaultCap = 0): FleetRegistry {
  return new FleetRegistry({ rise: 1, fall: 1, stallAfter: Number.MAX_SAFE_INTEGER, defaultCap });
}

/** How the replicas of a model run share caps, as the config sets it (fleet-routing.ts). */
export interface ModelCaps {
  /** A fixed `max_inflight_per_backend` (fleet-wide, held against the reported load) instead of `auto`. */
  fixedCap?: number;
  /** `routing.replicas`: each replica takes 1/N of the room a report shows. Default 1. */
  capShare?: number;
  /** `routing.cap_scope: fleet` (default true): caps (fixed or auto) count every replica's requests via the reports. */
  fleetWide?: boolean;
}

export function fleetgate(opts: {
  capped: boolean;
  /** Default least-loaded. */
  policy?: Policy;
  /** Extra wait-queue options (prefix-aware's affinity lookahead). */
  queueOptions?: Partial<WaitQueueOptions>;
  clock: VirtualClock;
  engines: Engine[];
  maxRunning: number;
  done: () => boolean;
  /** Which replica (0, 1): replicas take their load reports at different moments. */
  replica?: number;
  /** When the first load report is read (default at once, as real fleetgate reads a backend as it turns ready). */
  firstReportMs?: number;
  /** The registry to count in (default a fresh one), for a caller that reads the fleet as `/fleet/status` would. */
  registry?: FleetRegistry;
  caps?: ModelCaps;
}): Router {
  const { capped, clock, engines, maxRunning, done, replica = 0 } = opts;
  const { fixedCap, capShare = 1, fleetWide = true } = opts.caps ?? {};
  // The queue and the policy read only the load figures; the lifecycle is never consulted here.
  const registry = opts.registry ?? modelRegistry(fixedCap ?? 0);
  // fleetgate's own controller: each backend holds UNREAD_CAP until its first report.
  if (capped && fixedCap === undefined) new CapController({ registry, scraping: true, fleetWide });
  const backends = engines.map((_, i) =>
    registry.add({ name: `gpu${i}`, url: `http://gpu${i}`, kind: 'sglang', log: null } as BackendConfig),
  );
  // Replicas are not synchronised: the second one's reports fall between the first one's.
  const offset = replica * (LOAD_INTERVAL_MS / 2);
  const queue = new WaitQueue({
    maxWaiting: Number.MAX_SAFE_INTEGER,
    timeoutMs: 0,
    ready: () => backends,
    policy: opts.policy ?? createPolicy('least-loaded'),
    // The queue drains where fleetgate drains it on a request's end (there through the registry's
    // `capacity` event, registry-wiring.ts), and once per round of load reports below, after every
    // backend's figures are in. Not on each `capacity` and `load` event as the wiring would: a cap
    // opened mid-round would route on the other backends' old figures (27.0 s became 28.1 s, 3 seeds).
    slots: {
      take: (backend) => registry.take(backend),
      release: (backend) => {
        registry.release(backend);
        queue.drain();
      },
    },
    now: () => clock.now,
    // As fleet-routing.ts sets them with load reports on.
    fleetWideCap: fleetWide,
    replicas: capShare,
    ...opts.queueOptions,
  });
  const report = () => {
    backends.forEach((backend, i) => {
      const { running, queued, tokenUsage, maxTotalNumTokens } = engines[i].stats;
      registry.reportLoad(backend, { running, queued, tokenUsage, maxRunning, kvTokens: maxTotalNumTokens });
    });
    queue.drain();
    if (!done()) clock.schedule(report, LOAD_INTERVAL_MS);
  };
  clock.schedule(report, opts.firstReportMs ?? offset);
  const router: Router = (send, traits) => {
    const go = (lease: Lease) => {
      send(backends.indexOf(lease.backend), () => lease.release());
    };
    const admitted = queue.acquire(undefined, undefined, traits);
    if (admitted instanceof Promise) void admitted.then(go);
    else go(admitted);
  };
  return router;
}

/**
 * Two replicas of a balancer behind a client that alternates. Each has its own registry (in-flight
 * counts, caps), queue and cap controller; they share nothing but the servers, whose load each reads
 * in its own reports (the second's fall between the first's).
 */
function replicas(create: (replica: number) => Router): Router {
  const routers = [create(0), create(1)];
  let next = 0;
  return (send, traits) => {
    const router = routers[next];
    next = 1 - next;
    router(send, traits);
  };
}

export interface ModelRun {
  makespanSec: number;
  /** Completed requests per server. */
  completed: number[];
  /** Most requests each server held at once, from every replica together (dispatched, not yet answered). */
  peakHeld: number[];
  /** Most requests dispatched to one server within one load interval (a sliding window), per server. */
  peakArrivals: number[];
}

/**
 * The engine request the simulator's HTTP layer makes of a chat body (its prompt tokens, `max_tokens`,
 * stop and prefix-cache pages), so the model's servers hold the KV the real ones do: the bench's
 * prompts share their leading pages, which the prefix cache holds once per server.
 */
export function simRequest(
  engine: Engine,
  body: Buffer,
  handlers: Pick<EngineRequest, 'onToken' | 'onFinish'>,
): EngineRequest {
  const host = { engine, defaultMaxTokens: 16 } as unknown as Parameters<typeof parseGeneration>[2];
  const spec = parseGeneration('chat', JSON.parse(body.toString()), host);
  if (typeof spec === 'string') throw new Error(spec);
  return {
    id: spec.job.rid,
    promptTokens: spec.job.promptTokens,
    maxTokens: spec.maxTokens,
    targetTokens: spec.target,
    stopReason: spec.stopReason,
    prefixKeys: spec.prefixKeys,
    answerKeys: spec.answerKeys,
    generated: 0,
    retractions: 0,
    ...handlers,
  };
}

/** The bench's fleet of simulated engines on `clock`. */
export function modelEngines(clock: VirtualClock, kvTokens?: number) {
  const base = engineOptions({ quick: false, kvTokens });
  const engines = Array.from(
    { length: SERVERS },
    (_, i) => new Engine(engineFor(base, i), clock.schedule, { now: () => clock.now }),
  );
  return { base, engines };
}

/** One job through one balancer, in virtual time. */
export async function modelJob(opts: {
  balancer: ModelBalancer;
  jobs: Job[];
  /** `max_tokens` of every request, what admission reserves KV for. */
  maxTokens: number;
  concurrency: number;
  kvTokens?: number;
  caps?: ModelCaps;
}): Promise<ModelRun> {
  const clock = new VirtualClock();
  const { base, engines } = modelEngines(clock, opts.kvTokens);
  const { jobs } = opts;
  const completed = new Array<number>(SERVERS).fill(0);
  let next = 0;
  let finished = 0;
  let makespan = 0;
  const done = () => finished === jobs.length;
  const maxRunning = base.maxRunningRequests;
  const { caps } = opts;
  const routers: Record<ModelBalancer, () => Router> = {
    'least-conn': leastConnections,
    'least-conn-x2': () => replicas(leastConnections),
    fleetgate: () => fleetgate({ capped: true, clock, engines, maxRunning, done, caps }),
    'fleetgate-no-cap': () => fleetgate({ capped: false, clock, engines, maxRunning, done }),
    'fleetgate-x2': () =>
      replicas((replica) => fleetgate({ capped: true, clock, engines, maxRunning, done, replica, caps })),
    oracle: () => oracle(clock, engines, maxRunning, done),
  };
  const route = routers[opts.balancer]();
  const held = new Array<number>(SERVERS).fill(0);
  const peakHeld = new Array<number>(SERVERS).fill(0);
  const peakArrivals = new Array<number>(SERVERS).fill(0);
  const arrivals: number[][] = Array.from({ length: SERVERS }, () => []);

  const sendNext = () => {
    if (next >= jobs.length) return;
    const job = jobs[next++];
    route((server, release) => {
      held[server]++;
      peakHeld[server] = Math.max(peakHeld[server], held[server]);
      const window = arrivals[server];
      window.push(clock.now);
      while (window[0] <= clock.now - LOAD_INTERVAL_MS) window.shift();
      peakArrivals[server] = Math.max(peakArrivals[server], window.length);
      const request = simRequest(engines[server], job.body, {
        onToken: () => {},
        onFinish: () =>
          clock.schedule(() => {
            held[server]--;
            release();
            completed[server]++;
            finished++;
            makespan = clock.now;
            clock.schedule(sendNext, NETWORK_MS);
          }, NETWORK_MS),
      });
      clock.schedule(() => engines[server].submit(request), NETWORK_MS);
    });
  };
  for (let i = 0; i < opts.concurrency; i++) clock.schedule(sendNext, 0);
  await clock.run();
  if (finished !== jobs.length) throw new Error(`model: ${finished} of ${jobs.length} requests finished`);
  return { makespanSec: makespan / 1000, completed, peakHeld, peakArrivals };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seeds: { type: 'string' },
      concurrency: { type: 'string' },
      'kv-tokens': { type: 'string' },
      balancers: { type: 'string' },
      cap: { type: 'string' },
      replicas: { type: 'string' },
      'cap-scope': { type: 'string' },
    },
  });
  const scope = values['cap-scope'] ?? 'fleet';
  if (scope !== 'fleet' && scope !== 'replica') throw new Error(`--cap-scope: 'fleet' or 'replica', not '${scope}'`);
  const caps: ModelCaps = {
    fixedCap: values.cap === undefined ? undefined : numberFlag(values.cap, 'cap', 0),
    capShare: numberFlag(values.replicas, 'replicas', 1),
    fleetWide: scope === 'fleet',
  };
  const seeds = numberFlag(values.seeds, 'seeds', 20);
  const slots = engineOptions({ quick: false }).maxRunningRequests * SERVERS;
  const concurrency = numberFlag(values.concurrency, 'concurrency', SCRIPT_CONCURRENCY_PER_SLOT * slots);
  const kvTokens = numberFlag(values['kv-tokens'], 'kv-tokens', 10_000, 2);
  const balancers = (values.balancers ?? 'least-conn,fleetgate,fleetgate-no-cap').split(',') as ModelBalancer[];
  const known: ModelBalancer[] = [
    'least-conn',
    'least-conn-x2',
    'fleetgate',
    'fleetgate-no-cap',
    'fleetgate-x2',
    'oracle',
  ];
  for (const b of balancers)
    if (!known.includes(b)) throw new Error(`--balancers: unknown '${b}' (${known.join(', ')})`);
  const makespans = new Map<ModelBalancer, number[]>(balancers.map((b) => [b, []]));
  const peaks = new Map<ModelBalancer, { held: number; arrivals: number; meanArrivals: number[] }>();
  for (let seed = 1; seed <= seeds; seed++) {
    const spec = workloadSpec({ quick: false, seed });
    const jobs = makeWorkload(spec);
    for (const balancer of balancers) {
      const run = await modelJob({ balancer, jobs, maxTokens: spec.maxTokens, concurrency, kvTokens, caps });
      makespans.get(balancer)?.push(run.makespanSec);
      const peak = peaks.get(balancer) ?? { held: 0, arrivals: 0, meanArrivals: [] };
      peak.meanArrivals.push(jobs.length / SERVERS / ((run.makespanSec * 1000) / LOAD_INTERVAL_MS));
      peak.held = Math.max(peak.held, ...run.peakHeld);
      peak.arrivals = Math.max(peak.arrivals, ...run.peakArrivals);
      peaks.set(balancer, peak);
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const reference = mean(makespans.get(balancers[0]) ?? []);
  const capText = caps.fixedCap === undefined ? 'auto' : String(caps.fixedCap);
  console.log(
    `virtual-time model: concurrency ${concurrency}, kv ${kvTokens} tokens, ${seeds} workload seeds, ` +
      `max_inflight_per_backend ${capText}, routing.replicas ${caps.capShare}, cap scope ${scope}\n`,
  );
  console.log(
    `| balancer | mean makespan s | vs ${balancers[0]} | fastest in seeds | peak held on one server | arrivals at one server in ${LOAD_INTERVAL_MS} ms: mean / most |`,
  );
  console.log('|---|---|---|---|---|---|');
  for (const balancer of balancers) {
    const xs = makespans.get(balancer) ?? [];
    const wins = xs.filter((x, seed) => balancers.every((b) => x <= (makespans.get(b)?.[seed] ?? x))).length;
    const peak = peaks.get(balancer);
    console.log(
      `| ${balancer} | ${mean(xs).toFixed(2)} | ${(mean(xs) / reference).toFixed(3)}x | ${wins}/${seeds} | ${peak?.held} | ${mean(peak?.meanArrivals ?? []).toFixed(1)} / ${peak?.arrivals} |`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
