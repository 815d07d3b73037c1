/**
 * Warms a proxy before a bench's clock starts. A fresh proxy process meets its first burst cold: its
 * connections still to accept and open, its code not yet optimised. A long-running one has met many
 * bursts, and a fresh Node process pays for its first one in the tail (docs/decisions.md, #20
 * "tail6"; bench/README.md). So a bench that opens with a burst first sends `count` one-token
 * streamed requests at once through the client it will measure with, on as many connections, which
 * stay open for the job. Prompts share nothing with any workload.
 */
import type { LoadClient } from './load.js';
import type { SimHost } from './sim-control.js';

const PATH = '/v1/chat/completions';

export interface WarmUpOptions {
  /** The model the bench's requests name. */
  model: string;
  /** Extra headers of request `i` (e.g. a session id for a balancer that hashes on it). */
  headers?: (i: number) => Record<string, string>;
}

/** Throws when any warm-up request fails: a proxy that cannot serve it would spoil the measurement. */
export async function warmUp(client: LoadClient, count: number, opts: WarmUpOptions): Promise<void> {
  if (count <= 0) return;
  const outcomes = await Promise.all(
    Array.from({ length: count }, (_, i) => {
      const messages = [{ role: 'user', content: `Warm-up request ${i} <sim:len=1>` }];
      const body = Buffer.from(JSON.stringify({ model: opts.model, messages, max_tokens: 1, stream: true }));
      return client.post(PATH, body, {}, opts.headers?.(i) ?? {});
    }),
  );
  const failed = outcomes.filter((o) => o.error !== null || o.status !== 200).length;
  if (failed > 0) throw new Error(`warm-up: ${failed} of ${count} requests failed`);
}

/** The simulated servers' counters summed over the fleet and per server: to leave a warm-up out of a run's figures. */
export async function simCounters(sims: SimHost) {
  const stats = await sims.stats();
  const sum = (pick: (c: (typeof stats)[number]['counters']) => number) =>
    stats.reduce((total, s) => total + pick(s.counters), 0);
  return {
    promptTokens: sum((c) => c.promptTokens),
    cachedTokens: sum((c) => c.cachedTokens),
    generatedTokens: sum((c) => c.generatedTokens),
    retractions: sum((c) => c.retractions),
    completed: stats.map((s) => s.counters.completed),
    requests: stats.map((s) => s.counters.requests),
    peakHeld: stats.map((s) => s.counters.peakHeld),
  };
}
