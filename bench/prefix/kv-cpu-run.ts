/**
 * What kv-aware adds to fleetgate's CPU per request (issue #55), measured in-process on bench:prefix's
 * shared-prefix multi-turn load: every request's block keys read as fleetgate reads them
 * (proxy/kv-request-blocks.ts: the packaged Qwen3 template, tokenized per message with the bounded
 * cache), in the order a fleet sees the turns (every conversation's turn t before any turn t + 1),
 * with the tokenizer's own share timed apart, and the first request of the load (the long system
 * prompt seen for the first time) reported on its own. The body's JSON parse is not counted: every
 * policy gets the parsed body. Least-loaded adds none of this, so this is kv-aware's addition over it
 * on the traffic path (the event subscriptions' CPU is in bench:prefix's proxy CPU column).
 *
 *   node --import tsx bench/prefix/kv-cpu-run.ts [--rounds N] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
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

// The tokenizer's share: the one model instance fleetgate's reader loads, its encode timed.
const model = loadChatModel(dir);
const encode = model.encode.bind(model);
let encodeUs = 0;
let encodeCalls = 0;
model.encode = (text: string) => {
  const t0 = process.cpuUsage();
  const ids = encode(text);
  const d = process.cpuUsage(t0);
  encodeUs += d.user + d.system;
  encodeCalls++;
  return ids;
};

const cpuUs = (t0: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(t0);
  return d.user + d.system;
};

interface Round {
  firstRequestUs: number;
  perRequestUs: number;
  tokenizerUsPerRequest: number;
  encodeCallsPerRequest: number;
  maxRequestUs: number;
}

const results: Round[] = [];
for (let round = 0; round < rounds; round++) {
  // A fresh reader per round (its caches empty), as a fleetgate just started.
  const keys = createKvKeys({ model: { dir, dirs: {} }, blockSize: () => 16, cacheSize: 10_000 });
  if (keys === null) throw new Error('no kv keys reader');
  encodeUs = 0;
  encodeCalls = 0;
  // The template probe runs once per model at the first request: outside the figures, as start-up is.
  keys('/v1/chat/completions', { model: 'qwen3', messages: [{ role: 'user', content: 'warm' }] });
  encodeUs = 0;
  encodeCalls = 0;
  let first = 0;
  let max = 0;
  const t0 = process.cpuUsage();
  for (let i = 0; i < bodies.length; i++) {
    const r0 = process.cpuUsage();
    keys('/v1/chat/completions', bodies[i]);
    const us = cpuUs(r0);
    if (i === 0) first = us;
    max = Math.max(max, us);
  }
  const total = cpuUs(t0);
  results.push({
    firstRequestUs: first,
    perRequestUs: total / bodies.length,
    tokenizerUsPerRequest: encodeUs / bodies.length,
    encodeCallsPerRequest: encodeCalls / bodies.length,
    maxRequestUs: max,
  });
  process.stderr.write(`[kv-cpu] round ${round + 1}/${rounds}: ${JSON.stringify(results.at(-1))}\n`);
}
const m = (f: (r: Round) => number) => median(results.map(f));
const summary = {
  requests: bodies.length,
  conversations: conversations.length,
  rounds,
  perRequestUs: m((r) => r.perRequestUs),
  tokenizerUsPerRequest: m((r) => r.tokenizerUsPerRequest),
  tokenizerShare: m((r) => r.tokenizerUsPerRequest / r.perRequestUs),
  encodeCallsPerRequest: m((r) => r.encodeCallsPerRequest),
  firstRequestUs: m((r) => r.firstRequestUs),
  maxRequestUs: m((r) => r.maxRequestUs),
  runs: results,
};
process.stdout.write(
  [
    `## kv-aware's block keys per request (${bodies.length} requests of ${conversations.length} conversations, medians of ${rounds} rounds)`,
    '',
    '| CPU per request µs | of which the tokenizer | tokenizer calls per request | first request µs | slowest request µs |',
    '|---|---|---|---|---|',
    `| ${summary.perRequestUs.toFixed(1)} | ${summary.tokenizerUsPerRequest.toFixed(1)} (${(100 * summary.tokenizerShare).toFixed(0)} %) | ${summary.encodeCallsPerRequest.toFixed(2)} | ${summary.firstRequestUs.toFixed(0)} | ${summary.maxRequestUs.toFixed(0)} |`,
    '',
  ].join('\n'),
);
if (values.out !== undefined) writeFileSync(values.out, `${JSON.stringify(summary, null, 2)}\n`);
