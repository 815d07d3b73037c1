/**
 * bench:prefix in virtual time: the same fleet (the simulator's real `Engine` with its prefix cache,
 * gpu6 1.3x slower, prefill at bench:prefix's speed), the same three workloads and clients, and
 * fleetgate's real admission queue, adaptive cap and policies (bench/balance/model.ts), against least-connections
 * and consistent hashing of the session key (HAProxy `hdr(X-Session-Id)`). No sockets, no proxy CPU,
 * no timer jitter: one job takes a second or so, so a policy can be judged over several seeds.
 *
 *   node --import tsx bench/prefix/model.ts [--seeds 5] [--first-seed 1] [--workloads group,multi-turn,unique]
 *     [--balancers LIST] [--prefill TOKENS_PER_MS]
 *
 * bench:prefix runs seed 7 (its `--seed`): `--first-seed 7 --seeds 1` models the very jobs it runs.
 * Other seeds draw other prompts and lengths: group makespans of seeds 1-3 are ~1.6 s shorter (medians).
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import { promptTraits, type RequestTraits } from '../../src/routing/request-traits.js';
import { Engine } from '../../src/sim/engine.js';
import { engineFor, engineOptions, SERVERS } from '../balance/fleet-spec.js';
import { fleetgate, leastConnections, type Router, simRequest, VirtualClock } from '../balance/model.js';
import { numberFlag } from '../lib/cli.js';
import { median } from '../lib/stats.js';
import { PREFIX_PREFILL_TOKENS_PER_MS, prefixPlans } from './plans.js';
import type { PrefixRequest } from './workloads.js';

const NETWORK_MS = 0.3;
const BLOCK_CHARS = 128;
const PATH = '/v1/chat/completions';
/** Tuning under test, e.g. PREFIX_MODEL_OPTIONS='{"loadGap":8}'. */
const PREFIX_OPTIONS = JSON.parse(process.env.PREFIX_MODEL_OPTIONS ?? '{}') as Record<string, number>;

export type PrefixModelBalancer =
  | 'prefix-aware'
  | 'prefix-aware-no-hold'
  | 'least-loaded'
  | 'least-conn'
  | 'session-hash';

/** HAProxy `hash-type consistent`: a ring of points per server; a key goes to the next point clockwise. */
function sessionHash(): Router {
  const ring: { point: number; server: number }[] = [];
  const hash = (s: string) => createHash('sha1').update(s).digest().readUInt32BE(0);
  for (let server = 0; server < SERVERS; server++)
    for (let k = 0; k < 100; k++) ring.push({ point: hash(`gpu${server}-${k}`), server });
  ring.sort((a, b) => a.point - b.point);
  return (send, traits) => {
    const h = hash(traits?.session ?? '');
    const at = ring.find((p) => p.point >= h) ?? ring[0];
    send(at.server, () => {});
  };
}

interface ModelResult {
  makespanSec: number;
  ttftP50Ms: number;
  cachedRatio: number;
  completed: number[];
}

export async function prefixModelJob(
  balancer: PrefixModelBalancer,
  plan: ReturnType<typeof prefixPlans>[number],
  prefillTokensPerMs = PREFIX_PREFILL_TOKENS_PER_MS,
): Promise<ModelResult> {
  const clock = new VirtualClock();
  const base = { ...engineOptions({ quick: false, kvTokens: plan.kvTokens }), prefillTokensPerMs };
  const engines = Array.from(
    { length: SERVERS },
    (_, i) => new Engine(engineFor(base, i), clock.schedule, { now: () => clock.now }),
  );
  const maxRunning = base.maxRunningRequests;
  let outstanding = 0;
  const done = () => outstanding === 0 && started && finishedAll;
  let started = false;
  let finishedAll = false;
  const withPolicy = (name: 'prefix-aware' | 'least-loaded', lookahead: number) =>
    fleetgate({
      capped: true,
      clock,
      engines,
      maxRunning,
      done,
      firstReportMs: 0,
      policy: createPolicy(name, { random: Math.random, now: () => clock.now, prefix: PREFIX_OPTIONS }),
      queueOptions: { affinityLookahead: lookahead, affinityHoldMs: 2_000 },
    });
  const route: Router = {
    'prefix-aware': () => withPolicy('prefix-aware', 32),
    'prefix-aware-no-hold': () => withPolicy('prefix-aware', 0),
    'least-loaded': () => withPolicy('least-loaded', 0),
    'least-conn': leastConnections,
    'session-hash': sessionHash,
  }[balancer]();
  const completed = new Array<number>(SERVERS).fill(0);
  const ttft: number[] = [];
  let makespan = 0;

  const send = (request: PrefixRequest): Promise<void> =>
    new Promise((resolve) => {
      const sentAt = clock.now;
      const traits = {
        ...promptTraits(PATH, { 'x-session-id': request.session }, JSON.parse(request.body.toString()), {
          blockChars: BLOCK_CHARS,
          sessionHeader: 'x-session-id',
        }),
        priority: 'default',
        apiKey: null,
      } as RequestTraits;
      outstanding++;
      route((server, release) => {
        let first = true;
        const engineRequest = simRequest(engines[server], request.body, {
          onToken: () => {
            if (first) ttft.push(clock.now + NETWORK_MS - sentAt);
            first = false;
          },
          onFinish: () =>
            clock.schedule(() => {
              release();
              completed[server]++;
              outstanding--;
              makespan = clock.now;
              resolve();
            }, NETWORK_MS),
        });
        clock.schedule(() => engines[server].submit(engineRequest), NETWORK_MS);
      }, traits);
    });

  const w = plan.workload;
  const worker = async (next: () => (() => Promise<void>) | null) => {
    for (let job = next(); job !== null; job = next()) await job();
  };
  let index = 0;
  const jobs: (() => Promise<void>)[] =
    w.kind === 'batch'
      ? w.requests.map((r) => () => send(r))
      : w.conversations.map((turns) => async () => {
          for (const turn of turns) {
            if (turn.thinkMs !== undefined && turn.thinkMs > 0)
              await new Promise<void>((resolve) => clock.schedule(resolve, turn.thinkMs as number));
            await send(turn);
          }
        });
  const next = () => (index < jobs.length ? jobs[index++] : null);
  // The client starts once fleetgate has read every backend's load, as in the bench (it waits for ready).
  let all: Promise<void> = Promise.resolve();
  clock.schedule(() => {
    started = true;
    const workers = Array.from({ length: Math.min(plan.concurrency, jobs.length) }, () => worker(next));
    all = Promise.all(workers).then(() => {
      finishedAll = true;
    });
  }, 1);
  await clock.run();
  await all;
  const prompt = engines.reduce((sum, e) => sum + e.stats.promptTokensTotal, 0);
  const cached = engines.reduce((sum, e) => sum + e.stats.cachedTokensTotal, 0);
  return { makespanSec: makespan / 1000, ttftP50Ms: median(ttft), cachedRatio: cached / prompt, completed };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seeds: { type: 'string' },
      'first-seed': { type: 'string' },
      workloads: { type: 'string' },
      balancers: { type: 'string' },
      prefill: { type: 'string' },
    },
  });
  const seeds = numberFlag(values.seeds, 'seeds', 5);
  const firstSeed = numberFlag(values['first-seed'], 'first-seed', 1, 0);
  // A huge prefill speed leaves only the decode steps: the part of TTFT no cache can save.
  const prefill = numberFlag(values.prefill, 'prefill', PREFIX_PREFILL_TOKENS_PER_MS);
  const wanted = (values.workloads ?? 'group,multi-turn,unique').split(',');
  const balancers = (
    values.balancers ?? 'prefix-aware,prefix-aware-no-hold,least-loaded,least-conn,session-hash'
  ).split(',') as PrefixModelBalancer[];
  for (const id of wanted) {
    const rows = new Map<PrefixModelBalancer, ModelResult[]>(balancers.map((b) => [b, []]));
    for (let seed = firstSeed; seed < firstSeed + seeds; seed++) {
      const plan = prefixPlans(false, 1, seed).find((p) => p.id === id);
      if (!plan) throw new Error(`unknown workload ${id}`);
      for (const b of balancers) rows.get(b)?.push(await prefixModelJob(b, plan, prefill));
    }
    console.log(
      `\n${id} (${seeds} seeds, medians)\n| balancer | makespan s | TTFT p50 ms | cached | share % |\n|---|---|---|---|---|`,
    );
    for (const b of balancers) {
      const rs = rows.get(b) ?? [];
      const m = (f: (r: ModelResult) => number) => median(rs.map(f));
      const total = rs[0].completed.reduce((a, c) => a + c, 0);
      console.log(
        `| ${b} | ${m((r) => r.makespanSec).toFixed(2)} | ${m((r) => r.ttftP50Ms).toFixed(1)} | ${(100 * m((r) => r.cachedRatio)).toFixed(1)} % | ${rs[0].completed.map((c) => ((100 * c) / total).toFixed(0)).join('/')} |`,
      );
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
