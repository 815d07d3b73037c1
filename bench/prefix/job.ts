/**
 * One run of a prefix workload through one balancer, on a fresh set of simulated servers: makespan,
 * time to first token (the first streamed byte), the fleet's cached share of prompt tokens and each
 * server's share of the requests.
 */
import { mkdirSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { request } from 'undici';
import type { SimEngineOptions } from '../../src/sim/index.js';
import { MODEL } from '../balance/workload.js';
import { closedLoop, LoadClient, type Outcome } from '../lib/load.js';
import { processCpuSeconds } from '../lib/proc-stats.js';
import { waitFor } from '../lib/procs.js';
import { SimHost, type SimModelOptions } from '../lib/sim-control.js';
import { percentileSorted, Samples } from '../lib/stats.js';
import { startReplicas, type TargetSpec } from '../lib/targets.js';
import { simCounters, warmUp } from '../lib/warm-up.js';
import type { PrefixRequest, PrefixWorkload } from './workloads.js';

export interface PrefixJobOptions {
  servers: number;
  engine: (i: number) => SimEngineOptions;
  /** The servers' model directory and KV-event publisher (the kv-aware arm's fleet, for every target of its run). */
  model?: (i: number) => SimModelOptions | undefined;
  workload: PrefixWorkload;
  /** Requests in flight (batch) or conversations under way at once. */
  concurrency: number;
  proxyCpu: number | null;
  clientCpu: number | null;
  dir: string;
  deadlineMs: number;
  /**
   * Before the clock starts: this many one-token requests at once, on as many client connections,
   * with prompts that share nothing with the workload; their sim counters are left out.
   */
  warmup?: number;
  /** Extra node flags for a fleetgate target, e.g. `--cpu-prof`. */
  proxyNodeArgs?: string[];
  /** Told of every request's outcome (for per-request traces). */
  onOutcome?: (request: PrefixRequest, outcome: Outcome) => void;
  /**
   * Processes of the target over the same servers (default 1), the client spreading its requests
   * round-robin over them as a Service does: a conversation's turns land on any of them.
   */
  replicas?: number;
  /** Send `X-Session-Id` with every request (default true); false: routing sees the prompts alone. */
  sessionHeader?: boolean;
}

export interface PrefixJobMetrics {
  makespanSec: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  ttftP90Ms: number;
  /** Output tokens (content deltas) the client received per second of makespan. */
  outputTokensPerSec: number;
  /** kv-aware's picks by decision (`fleetgate_kv_hit_tokens` counts: cache, load, none, fallback); null for others. */
  kvDecisions: Record<string, number> | null;
  /** The balancer's CPU seconds over the job (every replica), per request answered, in µs; null for nginx/haproxy. */
  proxyCpuUsPerRequest: number | null;
  ok: number;
  errors: number;
  /** Cached prompt tokens over prompt tokens, over the fleet's completed requests. */
  cachedRatio: number;
  /** Completed requests per server, in server order. */
  completed: number[];
  cut: boolean;
  /** Sessions (conversations, groups) whose every answered request came from one server, and all sessions seen. */
  sessionsOnOneServer: number;
  sessions: number;
}

const PATH = '/v1/chat/completions';

export async function runPrefixJob(spec: TargetSpec, opts: PrefixJobOptions): Promise<PrefixJobMetrics> {
  mkdirSync(opts.dir, { recursive: true });
  const sims = await SimHost.start({
    count: opts.servers,
    engine: opts.engine,
    model: opts.model,
    cpu: opts.clientCpu,
    logDir: opts.dir,
  });
  try {
    const targets = await startReplicas(spec, opts.replicas ?? 1, {
      backends: sims.urls,
      cpu: opts.proxyCpu,
      dir: opts.dir,
      nodeArgs: opts.proxyNodeArgs,
    });
    const client = new LoadClient(
      targets.flatMap((target) => target.urls),
      opts.concurrency,
    );
    try {
      const ttft = new Samples(4096);
      let ok = 0;
      let errors = 0;
      let outputTokens = 0;
      const servers = new Map<string, Set<string>>();
      const send = async (request: PrefixRequest): Promise<Outcome> => {
        const headers: Record<string, string> = opts.sessionHeader === false ? {} : { 'x-session-id': request.session };
        const outcome = await client.post(PATH, request.body, {}, headers);
        opts.onOutcome?.(request, outcome);
        if (outcome.error === null && outcome.status === 200) {
          ok++;
          outputTokens += outcome.tokens;
          ttft.push(outcome.firstMs - outcome.startMs);
          if (outcome.server !== undefined) {
            const seen = servers.get(request.session) ?? new Set<string>();
            seen.add(outcome.server);
            servers.set(request.session, seen);
          }
        } else errors++;
        return outcome;
      };
      // kv-aware routes on the map only once the engines' events are live: not before the clock starts.
      if (spec.balance === 'kv-aware') for (const target of targets) await kvLive(target.urls[0], opts.servers);
      await warmUp(client, opts.warmup ?? 0, { model: MODEL, headers: (i) => ({ 'x-session-id': `warm-up-${i}` }) });
      const before = await simCounters(sims);
      const pids = spec.kind === 'fleetgate' ? targets.flatMap((t) => (t.proc === null ? [] : [t.proc.pid])) : [];
      const cpuBefore = pids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0);
      const started = performance.now();
      let cut = false;
      const w = opts.workload;
      if (w.kind === 'batch') {
        const result = await closedLoop(client, {
          concurrency: opts.concurrency,
          total: w.requests.length,
          deadlineMs: opts.deadlineMs,
          graceMs: 5_000,
          send: (i) => send(w.requests[i]),
        });
        cut = result.cut;
      } else {
        // Each worker holds one conversation at a time and sends its turns one after another.
        cut = await conversationLoop(w.conversations, opts.concurrency, opts.deadlineMs, send);
      }
      const makespanSec = (performance.now() - started) / 1000;
      const cpu = pids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0) - cpuBefore;
      const after = await simCounters(sims);
      const kvDecisions = spec.balance === 'kv-aware' ? await kvDecisionCounts(targets.map((t) => t.urls[0])) : null;
      const prompt = after.promptTokens - before.promptTokens;
      const cached = after.cachedTokens - before.cachedTokens;
      const sorted = ttft.sorted();
      return {
        makespanSec,
        ttftP50Ms: percentileSorted(sorted, 50),
        ttftP99Ms: percentileSorted(sorted, 99),
        ttftP90Ms: percentileSorted(sorted, 90),
        outputTokensPerSec: outputTokens / makespanSec,
        kvDecisions,
        proxyCpuUsPerRequest: pids.length === 0 ? null : (1e6 * cpu) / Math.max(1, ok + errors),
        ok,
        errors,
        cachedRatio: prompt > 0 ? cached / prompt : 0,
        completed: after.completed.map((n, i) => n - before.completed[i]),
        cut,
        sessionsOnOneServer: [...servers.values()].filter((seen) => seen.size === 1).length,
        sessions: servers.size,
      };
    } finally {
      await client.close();
      await Promise.all(targets.map((target) => target.stop()));
    }
  } finally {
    await sims.stop();
  }
}

/**
 * kv-aware's decisions so far, summed over the replicas' `/metrics`; with `waited`, the requests that
 * waited for the tokenizer's worker, `waitMs`, their mean wait, and `unkeyed_<reason>`, those that went on without keys.
 */
async function kvDecisionCounts(urls: string[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  let waitSec = 0;
  for (const url of urls) {
    const res = await request(`${url}/metrics`, { headersTimeout: 5000 });
    for (const line of (await res.body.text()).split('\n')) {
      const m = /^fleetgate_kv_hit_tokens_count\{decision="(\w+)"\} (\d+)/.exec(line);
      if (m !== null) counts[m[1]] = (counts[m[1]] ?? 0) + Number(m[2]);
      const w = /^fleetgate_kv_tokenize_wait_seconds_(sum|count) ([\d.e+-]+)/.exec(line);
      const u = /^fleetgate_kv_unkeyed_total\{reason="(\w+)"\} (\d+)/.exec(line);
      if (u !== null) counts[`unkeyed_${u[1]}`] = (counts[`unkeyed_${u[1]}`] ?? 0) + Number(u[2]);
      if (w?.[1] === 'sum') waitSec += Number(w[2]);
      else if (w !== null) counts.waited = (counts.waited ?? 0) + Number(w[2]);
    }
  }
  if (counts.waited > 0) counts.waitMs = Number(((1000 * waitSec) / counts.waited).toFixed(2));
  return counts;
}

/** Until every backend's KV events are live on this fleetgate's `/fleet/status` (at most 30 s). */
async function kvLive(url: string, servers: number): Promise<void> {
  await waitFor(
    async () => {
      const res = await request(`${url}/fleet/status`, { headersTimeout: 2000 });
      const body = (await res.body.json()) as { backends?: Array<{ kv_events?: { state?: string } }> };
      const live = (body.backends ?? []).filter((b) => b.kv_events?.state === 'live').length;
      return live >= servers;
    },
    'every backend KV events live',
    30_000,
  );
}

/**
 * Bounded by the conversations' turns and by `deadlineMs` (after which no new turn starts). A turn
 * waits its user's pause (`thinkMs`) after the previous answer.
 */
async function conversationLoop(
  conversations: PrefixRequest[][],
  workers: number,
  deadlineMs: number,
  send: (request: PrefixRequest) => Promise<Outcome>,
): Promise<boolean> {
  const deadline = performance.now() + deadlineMs;
  let next = 0;
  let cut = false;
  const worker = async () => {
    while (next < conversations.length) {
      const turns = conversations[next++];
      for (const turn of turns) {
        if (performance.now() > deadline) {
          cut = true;
          return;
        }
        if (turn.thinkMs !== undefined && turn.thinkMs > 0) await delay(turn.thinkMs);
        const outcome = await send(turn);
        if (outcome.error !== null || outcome.status !== 200) break;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(workers, conversations.length) }, worker));
  return cut;
}
