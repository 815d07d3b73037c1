/**
 * Where bench:overhead (b)'s time to first chunk goes (issue #37): (b)'s load (streams at full speed
 * over simulated backends that never limit anything), each request timed in every process it passes
 * through (bench/lib/request-trace.mjs, preloaded into the proxies and the sims): the client's send,
 * the proxy parsing it, sending it upstream, the sim parsing it and writing its first byte, the proxy
 * reading the upstream's headers and writing its first byte, the client's first byte. Also what
 * fleetgate's own queue held (`fleetgate_queue_wait_seconds`, its caps) and the sims' own queues.
 * Diagnostic, not a benchmark: the preload costs a little in every process.
 *   node --import tsx bench/overhead/ttfc-trace-run.ts [--targets fleetgate,fastify-floor] [--together]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { closedLoop, LoadClient } from '../lib/load.js';
import { pinSelf } from '../lib/procs.js';
import { SimHost } from '../lib/sim-control.js';
import { percentileSorted } from '../lib/stats.js';
import { type RunningTarget, startTarget, type TargetKind } from '../lib/targets.js';
import { FULL } from './scenarios.js';

const { values } = parseArgs({
  options: {
    targets: { type: 'string', default: 'fleetgate,fastify-floor' },
    together: { type: 'boolean', default: false },
    streams: { type: 'string', default: String(FULL.streams) },
    rounds: { type: 'string', default: String(FULL.rounds) },
    chunks: { type: 'string', default: String(FULL.chunks) },
  },
});
const kinds = (values.targets ?? '').split(',') as TargetKind[];
const streams = Number(values.streams);
const rounds = Number(values.rounds);
const chunks = Number(values.chunks);
const PRELOAD = new URL('../lib/request-trace.mjs', import.meta.url).pathname;
const PATH = '/v1/chat/completions';
const epoch = () => performance.timeOrigin + performance.now();

interface Stamps {
  arrive?: number;
  dispatch?: number;
  upHeaders?: number;
  firstWrite?: number;
}
interface ClientRecord {
  target: string;
  start: number;
  first: number;
  end: number;
}

const chatBody = (maxTokens: number) =>
  Buffer.from(
    JSON.stringify({
      model: 'meta-llama/Llama-3.1-8B-Instruct',
      messages: [{ role: 'user', content: 'Say something about Paris.' }],
      max_tokens: maxTokens,
      stream: true,
    }),
  );

async function metricsText(url: string): Promise<string> {
  const res = await request(`${url}/metrics`);
  return res.body.text();
}
const values_ = (text: string, name: string) =>
  text
    .split('\n')
    .filter((line) => line.startsWith(name))
    .map((line) => Number(line.slice(line.lastIndexOf(' ') + 1)));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** One measurement: sims and `group` started with the preload, warmed up, then (b)'s load, in turn over the group. */
async function measure(group: TargetKind[]): Promise<void> {
  const traceDir = mkdtempSync(join(tmpdir(), 'ttfc-trace-'));
  process.env.TRACE_DIR = traceDir;
  process.env.NODE_OPTIONS = `--import ${PRELOAD}`;
  const sims = await SimHost.start({
    count: FULL.backends,
    engine: () => ({
      tokenMs: 0,
      maxRunningRequests: 8192,
      maxTotalNumTokens: 100_000_000,
      batchPenalty: 0,
      prefillTokensPerMs: 1_000_000,
      defaultMaxTokens: 16,
    }),
    cpu: 1,
    logDir: traceDir,
  });
  const targets: RunningTarget[] = [];
  const clients: LoadClient[] = [];
  const records = new Map<string, ClientRecord>();
  const simPeaks = { queued: 0, running: 0 };
  let fleetgateBefore = '';
  let fleetgateAfter = '';
  try {
    for (const kind of group)
      targets.push(await startTarget({ name: kind, kind }, { backends: sims.urls, cpu: 0, dir: join(traceDir, kind) }));
    delete process.env.NODE_OPTIONS;
    for (const target of targets) clients.push(new LoadClient(target.urls, streams));
    const k = targets.length;
    await closedLoop(clients, {
      concurrency: streams * k,
      total: streams * k,
      deadlineMs: 60_000,
      send: (i) => clients[i % k].post(PATH, chatBody(20)),
    });
    const fleetgate = targets.find((t) => t.spec.kind === 'fleetgate');
    if (fleetgate) fleetgateBefore = await metricsText(fleetgate.urls[0]);
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const text of await Promise.all(sims.urls.map(metricsText))) {
          simPeaks.queued = Math.max(simPeaks.queued, ...values_(text, 'sglang:num_queue_reqs'));
          simPeaks.running = Math.max(simPeaks.running, ...values_(text, 'sglang:num_running_reqs'));
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const body = chatBody(chunks);
    await closedLoop(clients, {
      concurrency: streams * k,
      total: streams * rounds * k,
      deadlineMs: 600_000,
      send: (i) => {
        const id = `${group[i % k]}-${i}`;
        const start = epoch();
        return clients[i % k].post(PATH, body, {}, { 'x-trace-id': id }).then((o) => {
          records.set(id, {
            target: group[i % k],
            start,
            first: start + (o.firstMs - o.startMs),
            end: start + (o.endMs - o.startMs),
          });
          return o;
        });
      },
    });
    sampling = false;
    await sampler;
    if (fleetgate) fleetgateAfter = await metricsText(fleetgate.urls[0]);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(targets.map((t) => t.stop()));
    await sims.stop();
  }
  const proxy = new Map<string, Stamps>();
  const sim = new Map<string, Stamps>();
  const lines: string[] = [];
  for (const file of readdirSync(traceDir).filter((f) => f.startsWith('trace-'))) {
    const trace = JSON.parse(readFileSync(join(traceDir, file), 'utf8')) as {
      summary: Record<string, number | string>;
      requests: Record<string, Stamps>;
    };
    const s = trace.summary;
    const who = String(s.script).includes('sim-host') ? 'sims' : String(s.script).split('/').slice(-2).join('/');
    lines.push(
      `  ${who}: event-loop utilization ${Number(s.elu).toFixed(2)}, CPU ${Number(s.cpuSec).toFixed(2)} s, loop delay p50 ${Number(s.loopDelayP50Ms).toFixed(1)} ms p99 ${Number(s.loopDelayP99Ms).toFixed(1)} ms`,
    );
    for (const [id, stamps] of Object.entries(trace.requests))
      (stamps.dispatch !== undefined ? proxy : sim).set(id, stamps);
  }
  rmSync(traceDir, { recursive: true, force: true });
  console.log(`### ${group.join(' + ')}${group.length > 1 ? ' (at once, requests in turn)' : ''}`);
  for (const line of lines) console.log(line);
  console.log(
    `  sims: peak running ${simPeaks.running}, peak queued ${simPeaks.queued} (per sim, sampled every 100 ms)`,
  );
  if (fleetgateAfter !== '') {
    const waited =
      sum(values_(fleetgateAfter, 'fleetgate_queue_wait_seconds_count')) -
      sum(values_(fleetgateBefore, 'fleetgate_queue_wait_seconds_count'));
    const caps = values_(fleetgateAfter, 'fleetgate_backend_inflight_cap');
    console.log(`  fleetgate: requests that waited in its queue ${waited}; caps at the end ${caps.join(', ')}`);
  }
  const pct = (xs: number[]) => {
    const sorted = xs.filter(Number.isFinite).sort((a, b) => a - b);
    return `p50 ${percentileSorted(sorted, 50).toFixed(1)}  p90 ${percentileSorted(sorted, 90).toFixed(1)}`;
  };
  for (const kind of group) {
    const mine = [...records.entries()].filter(([, r]) => r.target === kind);
    const P = (id: string) => proxy.get(id) ?? {};
    const S = (id: string) => sim.get(id) ?? {};
    const row = (label: string, f: (id: string, r: ClientRecord) => number) =>
      console.log(`    ${label.padEnd(34)} ${pct(mine.map(([id, r]) => f(id, r)))}`);
    const byStart = mine.map(([, r]) => r).sort((a, b) => a.start - b.start);
    console.log(`  ${kind} (ms, ${mine.length} streams):`);
    row('client TTFC', (_, r) => r.first - r.start);
    console.log(
      `    ${'  first wave (the first streams)'.padEnd(34)} ${pct(byStart.slice(0, streams).map((r) => r.first - r.start))}`,
    );
    console.log(`    ${'  later streams'.padEnd(34)} ${pct(byStart.slice(streams).map((r) => r.first - r.start))}`);
    row('client send -> proxy parsed it', (id, r) => (P(id).arrive ?? Number.NaN) - r.start);
    row('proxy parsed -> sent upstream', (id) => (P(id).dispatch ?? Number.NaN) - (P(id).arrive ?? Number.NaN));
    row('sent upstream -> sim parsed it', (id) => (S(id).arrive ?? Number.NaN) - (P(id).dispatch ?? Number.NaN));
    row('sim parsed -> sim first write', (id) => (S(id).firstWrite ?? Number.NaN) - (S(id).arrive ?? Number.NaN));
    row(
      'sim first write -> proxy read hdrs',
      (id) => (P(id).upHeaders ?? Number.NaN) - (S(id).firstWrite ?? Number.NaN),
    );
    row(
      'proxy read hdrs -> its first write',
      (id) => (P(id).firstWrite ?? Number.NaN) - (P(id).upHeaders ?? Number.NaN),
    );
    row('proxy first write -> client got it', (id, r) => r.first - (P(id).firstWrite ?? Number.NaN));
    row('stream body (client)', (_, r) => r.end - r.first);
  }
}

pinSelf(1);
if (values.together) await measure(kinds);
else for (const kind of kinds) await measure([kind]);
