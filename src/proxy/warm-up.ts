/**
 * Start-up warm-up (`upstream.warm_up`): a fresh process meeting its first burst pays at once for
 * every lazily compiled function on the request path and for every upstream connection it opens,
 * and the burst's tail waits for all of it (a few hundred ms at 64 streams: bench/cold-start). A
 * replica Kubernetes has just restarted meets exactly that burst the moment `/readyz` lets traffic
 * in, so before it does: open keep-alive connections to every ready backend, then send waves of
 * one-token streamed chat completions to its own listener over loopback, through the whole
 * traffic path (node's HTTP server, the API key guard, body parser, prompt traits, admission, the
 * fleet dispatcher, reply-from and the SSE relay), on the ready backends' models. An in-process
 * `inject` was tried first: it skips the server's socket path and left most of the stall in place.
 * Bounded in time; a failure only logs. They count in fleetgate's and the backends' figures like
 * any request (header `x-fleetgate-warm-up: 1`).
 */
import { Pool } from 'undici';
import type { Backend } from '../fleet/registry.js';

/** Connections opened per ready backend. */
export const WARM_CONNECTIONS = 16;
/**
 * Requests sent through the traffic path at once, on as many connections, in `WARM_WAVES` waves:
 * enough for the path's functions to be compiled past V8's first tier.
 */
export const WARM_REQUESTS = 32;
export const WARM_WAVES = 2;
/** The whole warm-up gives up after this long (readiness then proceeds cold). */
export const WARM_UP_TIMEOUT_MS = 10_000;

export interface WarmUpDeps {
  /** fleetgate's own listener, e.g. `http://127.0.0.1:8080`. */
  selfUrl: string;
  ready: () => readonly Backend[];
  /** Opens `connections` keep-alive connections to the backend (upstream-pools.ts). */
  preconnect: (backend: Backend, connections: number) => Promise<void>;
  /** A configured API key for the traffic path's guard, or null. */
  apiKey: string | null;
  /** Most requests to send in all (a rate limit's budget: they count against the key's or loopback's). */
  maxRequests: number;
}

export interface WarmUpResult {
  ms: number;
  /** Requests through the traffic path that were answered 200. */
  served: number;
  error: string | null;
}

async function throughTrafficPath(self: Pool, apiKey: string | null, model: string, i: number): Promise<boolean> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-fleetgate-warm-up': '1' };
  if (apiKey !== null) headers.authorization = `Bearer ${apiKey}`;
  try {
    const res = await self.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers,
      body: JSON.stringify({
        model,
        messages: [{ role: 'user', content: `fleetgate warm-up ${i}` }],
        max_tokens: 1,
        stream: true,
      }),
    });
    await res.body.dump();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

export async function warmUp(deps: WarmUpDeps): Promise<WarmUpResult> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up after ${WARM_UP_TIMEOUT_MS} ms`)), WARM_UP_TIMEOUT_MS);
  });
  let served = 0;
  const self = new Pool(deps.selfUrl, { connections: WARM_REQUESTS });
  const work = async () => {
    const ready = deps.ready();
    await Promise.all(ready.map((backend) => deps.preconnect(backend, WARM_CONNECTIONS)));
    const models = ready.map((backend) => backend.model).filter((m): m is string => m !== null);
    if (models.length === 0) return;
    const perWave = Math.min(WARM_REQUESTS, Math.floor(deps.maxRequests / WARM_WAVES));
    for (let wave = 0; wave < WARM_WAVES && perWave > 0; wave++) {
      const answers = await Promise.all(
        Array.from({ length: perWave }, (_, i) => throughTrafficPath(self, deps.apiKey, models[i % models.length], i)),
      );
      served += answers.filter(Boolean).length;
    }
  };
  try {
    await Promise.race([work(), timeout]);
    return { ms: performance.now() - started, served, error: null };
  } catch (error) {
    return { ms: performance.now() - started, served, error: (error as Error).message };
  } finally {
    clearTimeout(timer);
    void self.destroy();
  }
}
