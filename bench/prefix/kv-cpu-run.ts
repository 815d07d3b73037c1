/**
 * What kv-aware adds to fleetgate's CPU per request (issue #55), measured in-process: every request's
 * block keys read as fleetgate reads them (proxy/kv-request-blocks.ts: the packaged Qwen3 template,
 * tokenized per message with the bounded cache, new text only as far as an engine holds what is
 * before it, a conversation's new messages learned from the engines' blocks), with the event loop's
 * share (what delays other requests) apart from the other threads' (the tokenizer's worker, V8's
 * compiler and collector), first turns (text seen first) apart from a conversation's later turns.
 * Two loads:
 * - `kv-multi-turn`: bench:prefix's shared-prefix multi-turn load, in the order a fleet sees the
 *   turns (every conversation's turn t before any turn t + 1);
 * - `batch`: a batch job, one shared system prompt (3,000 characters) and a unique user prompt of
 *   1,000-4,000 characters per request.
 * The engines' caches: a few requests after a request is keyed, its prompt and answer are held by its
 * engine (a conversation's, one of 7), whose `BlockStored` events for the blocks new to it go to the
 * fleet's real map (fleet/kv-events/kv-block-map.ts: recorded, hashed, told to the reader's learner;
 * counted, their decoding not), and the policy's pick reads the map for each request's keys (counted). `--answers thinking`
 * (default; the real job: Qwen3 reasoning first, which the next turn's history drops) or `plain`
 * (the answer as the history renders it: the engine holds it, and the learned messages' chain starts
 * inside it, so each turn's new messages are tokenized instead).
 * The body's JSON parse is not counted: every policy gets the parsed body. Least-loaded adds none of
 * this, so this is kv-aware's addition over it on the traffic path (the subscriptions' decoding is in
 * bench:prefix's proxy CPU column).
 *
 *   node --import tsx bench/prefix/kv-cpu-run.ts [--workload kv-multi-turn|batch] [--answers thinking|plain] [--rounds N] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { blockKeys } from '../../src/fleet/kv-events/block-keys.js';
import { KvBlockMap } from '../../src/fleet/kv-events/kv-block-map.js';
import type { KvEvent } from '../../src/fleet/kv-events/kv-decode.js';
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
import { createKvKeys } from '../../src/proxy/kv-request-blocks.js';
import { rng } from '../balance/workload.js';
import { median } from '../lib/stats.js';
import { prefixPlans } from './plans.js';
import { prose } from './workloads.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string' },
    out: { type: 'string' },
    workload: { type: 'string' },
    answers: { type: 'string' },
  },
});
const rounds = Math.max(1, Math.min(10, Number(values.rounds ?? 3)));
const workload = values.workload ?? 'kv-multi-turn';
const answers = values.answers ?? 'thinking';
if (answers !== 'thinking' && answers !== 'plain') throw new Error(`--answers: thinking or plain, not ${answers}`);
const BLOCK = 16;
/** Engines, as bench:prefix's fleet: a conversation stays on one (its turns' blocks chain there). */
const ENGINES = 7;
const dir = packagedQwen3Dir();

type Message = { role: string; content: string };
interface Body {
  model: string;
  messages: Message[];
}

/** The request bodies in the order a fleet sees them, and for each the request whose prompt its answer extends. */
function load(): { bodies: Body[]; next: Array<number | null>; engines: number[]; label: string } {
  if (workload === 'batch') {
    const random = rng(7);
    const system = { role: 'system', content: prose(random, 3000, 'You are a careful data labeller') };
    const bodies = Array.from({ length: 1000 }, (_, i) => ({
      model: 'qwen3',
      messages: [system, { role: 'user', content: prose(random, 1000 + Math.floor(random() * 3000), `Item ${i}`) }],
    }));
    const engines = bodies.map((_, i) => i % ENGINES);
    return { bodies, next: bodies.map(() => null), engines, label: '1,000 requests of a batch job' };
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
  const engines = order.map(({ c }) => c % ENGINES);
  return { bodies, next, engines, label: `${bodies.length} requests of ${conversations.length} conversations` };
}

const { bodies, next, engines, label } = load();
// What the engines store once a request has been served (outside the figures: the engines' work):
// its prompt, then its answer as the engine generated it. `thinking` (the real job: Qwen3 in thinking
// mode): reasoning first, which the next turn's history drops, so that turn's prefill stores its
// history anew from the answer on; `plain`: the answer as the next turn's history renders it.
const model = loadChatModel(dir);
const idsOf = (messages: Message[]) => model.encode(model.render(messages, { addGenerationPrompt: true }));
const REASONING = model.encode('<think>\nThe user asks for figures; check the rows, then answer.\n</think>\n\n');
const served = next.map((after, i) => {
  const prompt = idsOf(bodies[i].messages);
  if (after === null) return [...prompt, ...REASONING, ...model.encode('The answer, as generated. '.repeat(4))];
  const answer = bodies[after].messages.at(-2)?.content ?? '';
  return [...prompt, ...(answers === 'thinking' ? REASONING : []), ...model.encode(answer)];
});
/** Each served chain's block keys, computed before the clock starts (the engines' work, not the reader's). */
const servedKeys = served.map((ids) => blockKeys(ids, BLOCK));
/**
 * Each served chain's `BlockStored` events (as kv-decode.ts gives them; fleetgate's key stands in for
 * the engine's hash): the blocks its engine did not hold yet, in the order served.
 */
const storedEvents = (() => {
  const seen = Array.from({ length: ENGINES }, () => new Set<number>());
  return servedKeys.map((keys, request): KvEvent[] => {
    const held = seen[engines[request]];
    const fresh = keys.flatMap((key, block) => (held.has(key) ? [] : [block]));
    for (const key of keys) held.add(key);
    return fresh.map((block) => ({
      type: 'stored',
      hashes: [keys[block]],
      parent: block === 0 ? null : keys[block - 1],
      tokens: served[request].slice(block * BLOCK, (block + 1) * BLOCK),
      blockSize: BLOCK,
      unkeyable: null,
    }));
  });
})();

/** Requests keyed between one's keys and its engine's events. */
const ENGINE_LAG = 8;

const cpuUs = (t0: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(t0);
  return d.user + d.system;
};
const cpuBetween = (from: NodeJS.CpuUsage, to: NodeJS.CpuUsage) => to.user - from.user + to.system - from.system;

/** CPU of a stretch of requests, per request. */
interface Share {
  requests: number;
  /** The event loop's: cache lookups, the keys' hashes, the worker's messages, the engines' blocks learned from. */
  loopUs: number;
  /** Of the event loop's, the engines' events: the map's hash of each block stored, the learner's reading of them. */
  eventsUs: number;
  /** The process's, the tokenizer's worker thread included. */
  processUs: number;
  /** Of the other threads', the tokenizer's worker (its thread busy, as it reports it). */
  tokenizerUs: number;
  /** Requests whose keys waited for the worker (some text new to the cache). */
  waitedShare: number;
}

interface Round {
  all: Share;
  /** Requests with no answer in them (a conversation's first turn, every batch request): their text seen first. */
  firstTurns: Share;
  /** A conversation's later turns: what it repeats of earlier turns, the last answer and the newest message. */
  laterTurns: Share;
  /** Chat messages learned from the engines' blocks, per request. */
  learnedPerRequest: number;
  firstRequestUs: number;
}

/** In the order the fleet sees them, every first turn comes before any later turn. */
const laterFrom = (() => {
  const at = bodies.findIndex((body) => body.messages.some((m) => m.role === 'assistant'));
  return at < 0 ? bodies.length : at;
})();

const results: Round[] = [];
// One round first, not counted: a fleetgate that has run a while has its code compiled (V8's
// background compiler and its first collections cost ~2x a warm round's CPU on this load).
for (let round = -1; round < rounds; round++) {
  // The fleet's map, as kv-events keeps it: every engine's blocks, and the learner told of each.
  const map = new KvBlockMap(1_000_000);
  const longestHeld = (keys: readonly number[]) => Math.max(0, ...map.leadingRuns(keys).values());
  // A fresh reader per round (its caches and worker new), as a fleetgate just started.
  let learned = 0;
  const keys = createKvKeys({
    model: { dir, dirs: {} },
    blockSize: () => BLOCK,
    cacheSize: 10_000,
    longestHeld,
    learned: (messages) => {
      learned += messages;
    },
  });
  if (keys === null) throw new Error('no kv keys reader');
  // The worker loads its tokenizer on start: one request waits for it, outside the figures, as start-up is.
  await keys('/v1/chat/completions', { model: 'qwen3', messages: [{ role: 'user', content: 'warm' }] });
  map.onStored(keys.stored);
  // The map records (and hashes) each block an engine reports storing: that is counted; which blocks
  // an engine had not held (its radix tree's work) and the events' decoding are not.
  const store = (request: number) => map.apply(`gpu${engines[request]}`, storedEvents[request]);
  let first = 0;
  const waited = [0, 0];
  const eventsMs = [0, 0];
  const timedStore = (request: number, phase: number) => {
    const t0 = performance.now();
    store(request);
    eventsMs[phase] += performance.now() - t0;
  };
  const marks: Array<{ cpu: NodeJS.CpuUsage; loop: EventLoopUtilization; tokenizerMs: number }> = [];
  const mark = () =>
    marks.push({
      cpu: process.cpuUsage(),
      loop: performance.eventLoopUtilization(),
      tokenizerMs: keys.tokenizerBusyMs(),
    });
  mark();
  for (let i = 0; i < bodies.length; i++) {
    if (i === laterFrom) mark();
    const r0 = i === 0 ? process.cpuUsage() : undefined;
    let answer = keys('/v1/chat/completions', bodies[i]);
    if (answer instanceof Promise) {
      waited[i < laterFrom ? 0 : 1]++;
      answer = await answer;
    }
    // The policy's pick: the runs of the keys each engine holds.
    if (answer !== undefined) map.leadingRuns(answer);
    if (r0 !== undefined) first = cpuUs(r0);
    // The engine's BlockStored events for a request, as kv-events' map hears them, once it has been
    // prefilled and has answered: a few requests later (an engine takes ms, the reader µs).
    if (i >= ENGINE_LAG) timedStore(i - ENGINE_LAG, i < laterFrom ? 0 : 1);
  }
  for (let i = Math.max(0, bodies.length - ENGINE_LAG); i < bodies.length; i++) timedStore(i, 1);
  if (laterFrom === bodies.length) mark();
  mark();
  await keys.close();
  const share = (from: number, to: number, requests: number, waits: number, events: number): Share => ({
    requests,
    loopUs: ((marks[to].loop.active - marks[from].loop.active) * 1000) / Math.max(1, requests),
    eventsUs: (events * 1000) / Math.max(1, requests),
    processUs: cpuBetween(marks[from].cpu, marks[to].cpu) / Math.max(1, requests),
    tokenizerUs: ((marks[to].tokenizerMs - marks[from].tokenizerMs) * 1000) / Math.max(1, requests),
    waitedShare: waits / Math.max(1, requests),
  });
  if (round < 0) continue;
  results.push({
    all: share(0, 2, bodies.length, waited[0] + waited[1], eventsMs[0] + eventsMs[1]),
    firstTurns: share(0, 1, laterFrom, waited[0], eventsMs[0]),
    laterTurns: share(1, 2, bodies.length - laterFrom, waited[1], eventsMs[1]),
    learnedPerRequest: learned / bodies.length,
    firstRequestUs: first,
  });
  process.stderr.write(`[kv-cpu] round ${round + 1}/${rounds}: ${JSON.stringify(results.at(-1))}\n`);
}
const m = (f: (r: Round) => number) => median(results.map(f));
const medianShare = (pick: (r: Round) => Share): Share => ({
  requests: pick(results[0]).requests,
  loopUs: m((r) => pick(r).loopUs),
  eventsUs: m((r) => pick(r).eventsUs),
  processUs: m((r) => pick(r).processUs),
  tokenizerUs: m((r) => pick(r).tokenizerUs),
  waitedShare: m((r) => pick(r).waitedShare),
});
const summary = {
  workload,
  answers,
  requests: bodies.length,
  rounds,
  all: medianShare((r) => r.all),
  firstTurns: medianShare((r) => r.firstTurns),
  laterTurns: medianShare((r) => r.laterTurns),
  learnedPerRequest: m((r) => r.learnedPerRequest),
  firstRequestUs: m((r) => r.firstRequestUs),
  runs: results,
};
const row = (name: string, share: Share) =>
  `| ${name} | ${share.requests} | ${share.processUs.toFixed(1)} | ${share.loopUs.toFixed(1)} | ${share.eventsUs.toFixed(1)} | ${(share.processUs - share.loopUs).toFixed(1)} | ${share.tokenizerUs.toFixed(1)} | ${(100 * share.waitedShare).toFixed(0)} % |`;
process.stdout.write(
  [
    `## kv-aware's block keys per request (${label}, ${answers} answers, medians of ${rounds} rounds)`,
    '',
    "| requests | count | process CPU µs | event loop µs | of which the engines' events µs | other threads µs (tokenizer worker, V8 compiler and collector) | of which the tokenizer worker µs | waited for the worker |",
    '|---|---|---|---|---|---|---|---|',
    row('all', summary.all),
    row('first turns (text seen first)', summary.firstTurns),
    ...(summary.laterTurns.requests > 0 ? [row('later turns', summary.laterTurns)] : []),
    '',
    `Messages learned from the engines' blocks: ${summary.learnedPerRequest.toFixed(2)} per request; the first request (the system prompt seen first): ${summary.firstRequestUs.toFixed(0)} µs.`,
    '',
  ].join('\n'),
);
if (values.out !== undefined) writeFileSync(values.out, `${JSON.stringify(summary, null, 2)}\n`);
