/**
 * One multi-turn run of bench:prefix through one target, with a line per request: when it was sent
 * (ms since the job started), its session and turn, its time to first token as the client saw it;
 * for fleetgate also its access log (backend, queue_ms, ttfb_ms) in the target's log file. For
 * finding where a latency tail comes from: `node --import tsx bench/prefix/trace.ts
 * --target least --out /tmp/trace-least.json` (`--workload kv-multi-turn`: issue #55's load and fleet).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { engineFor, engineOptions, SERVERS } from '../balance/fleet-spec.js';
import { runPrefixJob } from './job.js';
import { kvFleet, PREFIX_PREFILL_TOKENS_PER_MS, prefixPlans } from './plans.js';
import { PREFIX_TARGETS, TARGET_IDS } from './targets.js';

const { values } = parseArgs({
  options: {
    target: { type: 'string', default: 'least' },
    out: { type: 'string' },
    'proxy-cpu': { type: 'string', default: '0' },
    'client-cpu': { type: 'string', default: '1' },
    'cpu-prof': { type: 'string' },
    'no-warmup': { type: 'boolean' },
    workload: { type: 'string', default: 'multi-turn' },
  },
});
const ids: readonly string[] = TARGET_IDS;
const index = ids.indexOf(values.target ?? '');
if (index < 0) throw new Error(`--target: one of ${ids.join(', ')}`);
const spec = { ...PREFIX_TARGETS[index], accessLog: true };
const plan = prefixPlans(false, 1, 7).find((p) => p.id === values.workload);
if (plan === undefined || plan.workload.kind !== 'conversations')
  throw new Error('--workload: multi-turn or kv-multi-turn');
// The kv-aware arm's fleet (model and KV events), as bench:prefix runs that load for every target.
const model = plan.id === 'kv-multi-turn' ? kvFleet : undefined;
const engine = {
  ...engineOptions({ quick: false, kvTokens: plan.kvTokens }),
  prefillTokensPerMs: PREFIX_PREFILL_TOKENS_PER_MS,
};
const dir = mkdtempSync(join(tmpdir(), 'prefix-trace-'));
const turnOf = new Map<Buffer, number>();
for (const turns of plan.workload.conversations) for (const [i, t] of turns.entries()) turnOf.set(t.body, i);
const lines: Array<{ session: string; turn: number; sentMs: number; ttftMs: number; status: number }> = [];
const metrics = await runPrefixJob(spec, {
  servers: SERVERS,
  engine: (i) => engineFor(engine, i),
  model,
  workload: plan.workload,
  concurrency: plan.concurrency,
  proxyCpu: Number(values['proxy-cpu']),
  clientCpu: Number(values['client-cpu']),
  dir,
  deadlineMs: 300_000,
  warmup: values['no-warmup'] ? 0 : plan.warmup,
  proxyNodeArgs: values['cpu-prof'] === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', values['cpu-prof']],
  onOutcome: (request, outcome) => {
    lines.push({
      session: request.session,
      turn: turnOf.get(request.body) ?? -1,
      sentMs: outcome.startMs,
      ttftMs: outcome.firstMs - outcome.startMs,
      status: outcome.status,
    });
  },
});
const first = Math.min(...lines.map((l) => l.sentMs));
for (const l of lines) l.sentMs -= first;
const out = values.out ?? join(dir, 'trace.json');
writeFileSync(out, JSON.stringify({ target: spec.name, dir, metrics, requests: lines }));
process.stderr.write(
  `${spec.name}: TTFT p50 ${metrics.ttftP50Ms.toFixed(1)} p99 ${metrics.ttftP99Ms.toFixed(1)} ms; trace ${out}; logs ${dir}\n`,
);
