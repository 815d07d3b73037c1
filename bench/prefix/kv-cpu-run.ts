/**
 * What kv-aware adds to fleetgate's CPU per request (issue #55), measured in-process on bench:prefix's
 * shared-prefix multi-turn load: every request's block keys read as fleetgate reads them
 * (proxy/kv-request-blocks.ts: the packaged Qwen3 template, tokenized per message with the bounded
 * cache), in the order a fleet sees the turns (every conversation's turn t before any turn t + 1),
 * with the event loop's share (what delays other requests) apart from the tokenizer's worker thread,
 * and the first request of the load (the long system prompt seen for the first time) on its own. The body's JSON parse is not counted: every
 * policy gets the parsed body. Least-loaded adds none of this, so this is kv-aware's addition over it
 * on the traffic path (the event subscriptions' CPU is in bench:prefix's proxy CPU column).
 *
 *   node --import tsx bench/prefix/kv-cpu-run.ts [--rounds N] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import { createKvKeys } from '../../src/proxy/kv-request-blocks.js';
import { median } from '../lib/stats.js';
import { prefixPlans } from './plans.js';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, out: { type: 'string' } } });
const rounds = Math.max(1, Math.min(10, Number(values.rounds ?? 3)));
const dir = packagedQwen3Dir();
const plan = prefixPlans(false, 1, 7).find((p) => p.id === 'kv-multi-turn');
if (plan === undefined || plan.workload.kind !== 'conversations') throw new Error('no kv-multi-turn workload');
const conversations = plan.workload.conversations;
const turns = Math.max(...conversations.map((c) => c.length));
const bodies: unknown[] = [];
for (let t = 0; t < turns; t++)
  for (const c of conversations) if (t < c.length) bodies.push(JSON.parse(c[t].body.toString()));

const cpuUs = (t0: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(t0);
  return d.user + d.system;
};

/** The main thread's busy time since `from`, µs: the event loop's active time (idle while it awaits the worker). */
const loopUs = (from: EventLoopUtilization) => performance.eventLoopUtilization(from).active * 1000;

interface Round {
  /** The event loop's CPU per request: cache lookups, the keys' hashes, the worker's messages. */
  loopUsPerRequest: number;
  /** The process's, the tokenizer's worker thread included. */
  perRequestUs: number;
  /** The worker's (the tokenizer): the process's less the event loop's. */
  tokenizerUsPerRequest: number;
  /** Requests whose keys waited for the worker (some text new to the cache). */
  waitedShare: number;
  firstRequestUs: number;
}

const results: Round[] = [];
for (let round = 0; round < rounds; round++) {
  // A fresh reader per round (its caches and worker new), as a fleetgate just started.
  const keys = createKvKeys({ model: { dir, dirs: {} }, blockSize: () => 16, cacheSize: 10_000 });
  if (keys === null) throw new Error('no kv keys reader');
  // The worker loads its tokenizer on start: one request waits for it, outside the figures, as start-up is.
  await keys('/v1/chat/completions', { model: 'qwen3', messages: [{ role: 'user', content: 'warm' }] });
  let waited = 0;
  let first = 0;
  const t0 = process.cpuUsage();
  const l0 = performance.eventLoopUtilization();
  for (let i = 0; i < bodies.length; i++) {
    const r0 = process.cpuUsage();
    const answer = keys('/v1/chat/completions', bodies[i]);
    if (answer instanceof Promise) {
      waited++;
      await answer;
    }
    if (i === 0) first = cpuUs(r0);
  }
  const loop = loopUs(l0);
  const total = cpuUs(t0);
  await keys.close();
  results.push({
    loopUsPerRequest: loop / bodies.length,
    perRequestUs: total / bodies.length,
    tokenizerUsPerRequest: (total - loop) / bodies.length,
    waitedShare: waited / bodies.length,
    firstRequestUs: first,
  });
  process.stderr.write(`[kv-cpu] round ${round + 1}/${rounds}: ${JSON.stringify(results.at(-1))}\n`);
}
const m = (f: (r: Round) => number) => median(results.map(f));
const summary = {
  requests: bodies.length,
  conversations: conversations.length,
  rounds,
  loopUsPerRequest: m((r) => r.loopUsPerRequest),
  perRequestUs: m((r) => r.perRequestUs),
  tokenizerUsPerRequest: m((r) => r.tokenizerUsPerRequest),
  waitedShare: m((r) => r.waitedShare),
  firstRequestUs: m((r) => r.firstRequestUs),
  runs: results,
};
process.stdout.write(
  [
    `## kv-aware's block keys per request (${bodies.length} requests of ${conversations.length} conversations, medians of ${rounds} rounds)`,
    '',
    '| event loop CPU µs | process CPU µs | of which the tokenizer (worker) | requests that waited for it | first request µs |',
    '|---|---|---|---|---|',
    `| ${summary.loopUsPerRequest.toFixed(1)} | ${summary.perRequestUs.toFixed(1)} | ${summary.tokenizerUsPerRequest.toFixed(1)} | ${(100 * summary.waitedShare).toFixed(0)} % | ${summary.firstRequestUs.toFixed(0)} |`,
    '',
  ].join('\n'),
);
if (values.out !== undefined) writeFileSync(values.out, `${JSON.stringify(summary, null, 2)}\n`);
