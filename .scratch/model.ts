// Discrete-event model of bench:balance: 7 Engines in virtual time, a client at fixed concurrency,
// and balancer variants. For exploring policies only.
import { Engine, type EngineRequest } from '../src/sim/engine.js';
import { makeWorkload } from '../bench/balance/workload.js';

type Ev = { t: number; seq: number; fn: () => void; dead?: boolean };
class Clock {
  now = 0; seq = 0; heap: Ev[] = [];
  at(ms: number, fn: () => void) { const e: Ev = { t: this.now + ms, seq: this.seq++, fn }; this.push(e); return () => { e.dead = true; }; }
  push(e: Ev) { const h = this.heap; h.push(e); let i = h.length - 1; while (i > 0) { const p = (i - 1) >> 1; if (this.lt(h[p], h[i])) break; [h[p], h[i]] = [h[i], h[p]]; i = p; } }
  lt(a: Ev, b: Ev) { return a.t < b.t || (a.t === b.t && a.seq < b.seq); }
  pop(): Ev | undefined { const h = this.heap; if (!h.length) return; const top = h[0]; const last = h.pop()!; if (h.length) { h[0] = last; let i = 0; for (;;) { const l = 2*i+1, r = l+1; let m = i; if (l < h.length && this.lt(h[l], h[m])) m = l; if (r < h.length && this.lt(h[r], h[m])) m = r; if (m === i) break; [h[m], h[i]] = [h[i], h[m]]; i = m; } } return top; }
  run() { for (let e = this.pop(); e; e = this.pop()) { if (e.dead) continue; this.now = e.t; e.fn(); } }
}

const policy = process.argv[2] ?? 'lc';
const scrapeMs = Number(process.argv[3] ?? 250);
const seed = Number(process.argv[4] ?? 7);
const kv = Number(process.argv[5] ?? 10000);
const jobs = makeWorkload({ count: 3000, seed, maxTokens: 1400, longShare: 0.3, shortMedian: 40, longMedian: 400, maxLength: 1300 });
const clock = new Clock();
const N = 7;
const engines: Engine[] = [];
for (let i = 0; i < N; i++) {
  engines.push(new Engine({ maxRunningRequests: 32, maxTotalNumTokens: kv, tokenMs: 6, batchPenalty: 0.002, slowdown: i === 6 ? 1.3 : 1, prefillTokensPerMs: 100, defaultMaxTokens: 100 }, (fn, ms) => clock.at(Math.max(ms, 0), fn), { now: () => clock.now }));
}
const inflight = new Array(N).fill(0);
const cap = new Array(N).fill(policy.startsWith('cap') ? 34 : Infinity);
const reports = engines.map((e) => ({ ...e.stats, inflightAt: 0 }));
let cursor = 0;
let next = 0, done = 0, retractions = 0;
const queue: number[] = [];
const pace: (number|null)[] = new Array(N).fill(null);
const LAT = 0.3;
let lastDone = 0;
const H = Number(process.env.H ?? 0.92);
const HOLD = Number(process.env.HOLD ?? 2);

function pick(): number {
  let best = -1, bestScore = Infinity;
  for (let k = 0; k < N; k++) {
    const i = (cursor + k) % N;
    if (inflight[i] >= cap[i]) continue;
    if (policy === 'kv-oracle' && engines[i].stats.tokenUsage + 0.0 >= H && engines[i].stats.running > 0) continue;
    if (policy === 'kv-oracle2' && (engines[i].stats.usedTokens + (engines[i].stats.queued + inflight[i] - engines[i].stats.running - engines[i].stats.queued) * 150) / kv >= H) continue;
    if (policy === 'tail-oracle' && next > 2776 && i === 6) continue;
    let score = inflight[i];
    if (policy === 'pace' || policy === 'cap-pace') score = (inflight[i] + 1) * (pace[i] ?? 1);
    if (policy === 'cap-fast') score = (pace[i] ?? 1) * 1000 + inflight[i];
    if (policy === 'kvscore' || policy === 'cap-kv') {
      const r = reports[i];
      score = (r.running + r.queued + inflight[i] - r.inflightAt) + 40 * r.tokenUsage;
    }
    if (score < bestScore) { best = i; bestScore = score; }
  }
  if (best >= 0) cursor = best + 1;
  return best;
}
const trace: {j:number;i:number;sent:number;start:number;end:number;n:number}[] = [];
function dispatch(j: number, i: number) {
  inflight[i]++;
  const tr = {j,i,sent: clock.now,start:-1,end:-1,n:jobs[j].outputTokens}; trace.push(tr);
  const job = jobs[j];
  clock.at(LAT, () => {
    const req: EngineRequest = { id: String(j), promptTokens: job.promptTokens, maxTokens: 1400, targetTokens: job.outputTokens, stopReason: 'stop', generated: 0, retractions: 0,
      onToken(r) { if (r.generated === 1) tr.start = clock.now; }, onFinish() { tr.end = clock.now; const smp = (tr.end - tr.sent)/tr.n; pace[i] = pace[i] === null ? smp : pace[i]! + 0.05*(smp - pace[i]!); clock.at(LAT, () => { inflight[i]--; done++; lastDone = clock.now; pump(); sendNext(); }); } };
    engines[i].submit(req);
  });
}
function pump() { while (queue.length) { const i = pick(); if (i < 0) return; dispatch(queue.shift()!, i); } }
let lastSent = 0;
const samples: string[] = [];
function sendNext() { if (next >= jobs.length) return; lastSent = clock.now; queue.push(next++); pump(); }
function scrape() {
  for (let i = 0; i < N; i++) {
    const s = engines[i].stats;
    reports[i] = { ...s, inflightAt: inflight[i] };
    if (policy.startsWith('cap')) {
      if (s.tokenUsage >= H) cap[i] = Math.max(1, Math.min(34, s.running + HOLD));
      else if (s.queued >= 2) cap[i] = Math.max(1, Math.min(34, s.running + 2));
      else if (inflight[i] >= cap[i]) cap[i] = Math.min(34, cap[i] + Math.max(1, Math.ceil(cap[i] * 0.25)));
    }
  }
  pump();
  if (Math.round(clock.now) % 2000 < scrapeMs) samples.push(`${(clock.now/1000).toFixed(1)}s run ${engines.map(e=>e.stats.running).join('/')} q ${engines.map(e=>e.stats.queued).join('/')} fq ${queue.length}`);
  if (done < jobs.length) clock.at(scrapeMs, scrape);
}
for (let c = 0; c < 224; c++) sendNext();
clock.at(scrapeMs, scrape);
clock.run();
for (const e of engines) retractions += e.stats.retractionsTotal;
if (process.env.TRACE) console.log(samples.join('\n'));
trace.sort((a,b)=>b.end-a.end); if (process.env.TRACE) for (const t of trace.slice(0,8)) console.log(`job ${t.j} gpu${t.i} n=${t.n} sent ${(t.sent/1000).toFixed(2)} start ${(t.start/1000).toFixed(2)} end ${(t.end/1000).toFixed(2)}`);
console.log('lastSent', (lastSent/1000).toFixed(2));
console.log(policy, scrapeMs, 'makespan', (lastDone / 1000).toFixed(2), 'retractions', retractions);
