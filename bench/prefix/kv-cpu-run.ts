/**
 * What kv-aware adds to fleetgate's CPU per request (issue #55), measured in-process: every request's
 * block keys read as fleetgate reads them (proxy/kv-request-blocks.ts: the packaged Qwen3 template,
 * tokenized per message with the bounded cache, new text only as far as an engine holds what is
 * before it), with the event loop's share (what delays other requests) apart from the tokenizer's
 * worker thread, and the first request (the long system prompt seen for the first time) on its own.
 * Two loads:
 * - `kv-multi-turn`: bench:prefix's shared-prefix multi-turn load, in the order a fleet sees the
 *   turns (every conversation's turn t before any turn t + 1);
 * - `batch`: a batch job, one shared system prompt (3,000 characters) and a unique user prompt of
 *   1,000-4,000 characters per request.
 * The engines' caches are simulated as kv-events' map would report them: once a request is keyed,
 * its prompt and answer are held, and their blocks are told to the reader as the map tells it of
 * every block stored (a conversation's newest message is learned from them).
 * The body's JSON parse is not counted: every policy gets the parsed body. Least-loaded adds none of
 * this, so this is kv-aware's addition over it on the traffic path (the event subscriptions' CPU is in
 * bench:prefix's proxy CPU column).
 *
 *   node --import tsx bench/prefix/kv-cpu-run.ts [--workload kv-multi-turn|batch] [--rounds N] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { chainKey, ROOT_KEY } from '../../src/fleet/kv-events/block-keys.js';
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
import { createKvKeys } from '../../src/proxy/kv-request-blocks.js';
import { rng } from '../balance/workload.js';
import { median } from '../lib/stats.js';
import { prefixPlans } from './plans.js';
import { prose } from './workloads.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string' }, out: { type: 'string' }, workload: { type: 'string' } },
});
const rounds = Math.max(1, Math.min(10, Number(values.rounds ?? 3)));
const workload = values.workload ?? 'kv-multi-turn';
const BLOCK = 16;
const dir = packagedQwen3Dir();

type Message = { role: string; content: string };
interface Body {
  model: string;
  messages: Message[];
}

/** The request bodies in the order a fleet sees them, and for each the request whose prompt its answer extends. */
function load(): { bodies: Body[]; next: Array<number | null>; label: string } {
  if (workload === 'batch') {
    const random = rng(7);
    const system = { role: 'system', content: prose(random, 3000, 'You are a careful data labeller') };
    const bodies = Array.from({ length: 1000 }, (_, i) => ({
      model: 'qwen3',
      messages: [system, { role: 'user', content: prose(random, 1000 + Math.floor(random() * 3000), `Item ${i}`) }],
    }));
    return { bodies, next: bodies.map(() => null), label: '1,000 requests of a batch job' };
  }
  if (workload !== 'kv-multi-turn') throw new Error(`--workload: kv-multi-turn or batch, not ${workload}`);
  const plan = prefixPlans(false, 1, 7).find((p) => p.id === 'kv-multi-turn');
  if (plan === undefined || plan.workload.kind !== 'conversations') throw new Error('no kv-multi-turn workload');
  const conversations = plan.workload.conversations;
  const turns = Math.max(...conversations.map((c) => c.length));
  const order: Array<{ c: number; t: number }> = [];
  for (let t = 0; t < turns; t++)
    for (let c = 0; c < conversations.length; c++) if (t < conversations[c].length) order.push({ c, t });
  const index = new Map(order.map(({ c, t }, i) => [`${c}/${t}`, i]));
  const bodies = order.map(({ c, t }) => JSON.parse(conversations[c][t].body.toString()) as Body);
  const next = order.map(({ c, t }) => index.get(`${c}/${t + 1}`) ?? null);
  return { bodies, next, label: `${bodies.length} requests of ${conversations.length} conversations` };
}

const { bodies, next, label } = load();
// What the engines store once a request has been served (outside the figures: the engines' work):
// its prompt and answer, which for a conversation is its next turn's prompt up to the newest message.
const model = loadChatModel(dir);
const idsOf = (messages: Message[]) => model.encode(model.render(messages, { addGenerationPrompt: true }));
const CLOSE = model.encode('<|im_end|>\n');
const ANSWER = model.encode(' The answer, as the engine generated it, fills the page its prompt ends in. '.repeat(2));
const served = next.map((after, i) => {
  if (after === null) return [...idsOf(bodies[i].messages), ...ANSWER];
  const turn = bodies[after].messages;
  const newest = model.encode(`<|im_start|>user\n${turn.at(-1)?.content}<|im_end|>\n<|im_start|>assistant\n`);
  const ids = idsOf(turn);
  // Less the answer's close (`<|im_end|>\n`): an engine caches what it generated, the end-of-turn
  // token last, whose KV it never computes.
  return ids.slice(0, ids.length - newest.length - CLOSE.length);
});

/** Requests keyed between one's keys and its engine's events. */
const ENGINE_LAG = 8;

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
  /** Conversations' newest messages learned from the engines' blocks, per request. */
  learnedShare: number;
  firstRequestUs: number;
}

const results: Round[] = [];
for (let round = 0; round < rounds; round++) {
  const held = new Set<number>();
  const longestHeld = (keys: readonly number[]) => {
    let run = 0;
    while (run < keys.length && held.has(keys[run])) run++;
    return run;
  };
  // A fresh reader per round (its caches and worker new), as a fleetgate just started.
  let learned = 0;
  const keys = createKvKeys({
    model: { dir, dirs: {} },
    blockSize: () => BLOCK,
    cacheSize: 10_000,
    longestHeld,
    learned: () => learned++,
  });
  if (keys === null) throw new Error('no kv keys reader');
  // The worker loads its tokenizer on start: one request waits for it, outside the figures, as start-up is.
  await keys('/v1/chat/completions', { model: 'qwen3', messages: [{ role: 'user', content: 'warm' }] });
  const store = (request: number) => {
    const ids = served[request];
    for (let from = 0, parent = ROOT_KEY; from + BLOCK <= ids.length; from += BLOCK) {
      const key = chainKey(parent, ids, from, from + BLOCK);
      if (!held.has(key)) keys.stored(parent, key, ids, from, from + BLOCK);
      held.add(key);
      parent = key;
    }
  };
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
    // The engine's BlockStored events for a request, as kv-events' map hears them, once it has been
    // prefilled: a few requests later (an engine takes ms, the reader µs).
    if (i >= ENGINE_LAG) store(i - ENGINE_LAG);
  }
  for (let i = Math.max(0, bodies.length - ENGINE_LAG); i < bodies.length; i++) store(i);
  const loop = loopUs(l0);
  const total = cpuUs(t0);
  await keys.close();
  results.push({
    loopUsPerRequest: loop / bodies.length,
    perRequestUs: total / bodies.length,
    tokenizerUsPerRequest: (total - loop) / bodies.length,
    waitedShare: waited / bodies.length,
    learnedShare: learned / bodies.length,
    firstRequestUs: first,
  });
  process.stderr.write(`[kv-cpu] round ${round + 1}/${rounds}: ${JSON.stringify(results.at(-1))}\n`);
}
const m = (f: (r: Round) => number) => median(results.map(f));
const summary = {
  workload,
  requests: bodies.length,
  rounds,
  loopUsPerRequest: m((r) => r.loopUsPerRequest),
  perRequestUs: m((r) => r.perRequestUs),
  tokenizerUsPerRequest: m((r) => r.tokenizerUsPerRequest),
  waitedShare: m((r) => r.waitedShare),
  learnedShare: m((r) => r.learnedShare),
  firstRequestUs: m((r) => r.firstRequestUs),
  runs: results,
};
process.stdout.write(
  [
    `## kv-aware's block keys per request (${label}, medians of ${rounds} rounds)`,
    '',
    '| event loop CPU µs | process CPU µs | of which the tokenizer (worker) | requests that waited for it | messages learned | first request µs |',
    '|---|---|---|---|---|---|',
    `| ${summary.loopUsPerRequest.toFixed(1)} | ${summary.perRequestUs.toFixed(1)} | ${summary.tokenizerUsPerRequest.toFixed(1)} | ${(100 * summary.waitedShare).toFixed(0)} % | ${(100 * summary.learnedShare).toFixed(0)} % | ${summary.firstRequestUs.toFixed(0)} |`,
    '',
  ].join('\n'),
);
if (values.out !== undefined) writeFileSync(values.out, `${JSON.stringify(summary, null, 2)}\n`);
