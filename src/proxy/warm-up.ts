/**
 * Start-up warm-up (`upstream.warm_up`): a fresh process meeting its first burst pays at once for
 * every lazily compiled function on the request path and for every upstream connection it opens,
 * and the burst's tail waits for all of it (a few hundred ms at 64 streams: bench/cold-start). A
 * replica Kubernetes has just restarted meets exactly that burst the moment `/readyz` lets traffic
 * in, so before it does: open keep-alive connections to every ready backend, then send a few
 * one-token streamed chat completions through the whole traffic path in-process (fastify's
 * `inject`: API key guard, body parser, prompt traits, admission, the fleet dispatcher, reply-from
 * and the SSE relay), each on a ready backend's model. Bounded in time; a failure only logs.
 */
import type { FastifyInstance } from 'fastify';
import type { Backend } from '../fleet/registry.js';

/** Connections opened per ready backend. */
export const WARM_CONNECTIONS = 16;
/** Requests sent through the traffic path, at once: enough for each function on it to be compiled. */
export const WARM_REQUESTS = 8;
/** The whole warm-up gives up after this long (readiness then proceeds cold). */
export const WARM_UP_TIMEOUT_MS = 10_000;

export interface WarmUpDeps {
  app: FastifyInstance;
  ready: () => readonly Backend[];
  /** Opens `connections` keep-alive connections to the backend (upstream-pools.ts). */
  preconnect: (backend: Backend, connections: number) => Promise<void>;
  /** A configured API key for the traffic path's guard, or null. */
  apiKey: string | null;
}

export interface WarmUpResult {
  ms: number;
  /** Requests through the traffic path that were answered 200. */
  served: number;
  error: string | null;
}

async function throughTrafficPath(deps: WarmUpDeps, model: string, i: number): Promise<boolean> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-fleetgate-warm-up': '1' };
  if (deps.apiKey !== null) headers.authorization = `Bearer ${deps.apiKey}`;
  const res = await deps.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers,
    payload: JSON.stringify({
      model,
      messages: [{ role: 'user', content: `fleetgate warm-up ${i}` }],
      max_tokens: 1,
      stream: true,
    }),
  });
  return res.statusCode === 200;
}

export async function warmUp(deps: WarmUpDeps): Promise<WarmUpResult> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up after ${WARM_UP_TIMEOUT_MS} ms`)), WARM_UP_TIMEOUT_MS);
  });
  let served = 0;
  const work = async () => {
    const ready = deps.ready();
    await Promise.all(ready.map((backend) => deps.preconnect(backend, WARM_CONNECTIONS)));
    const models = ready.map((backend) => backend.model).filter((m): m is string => m !== null);
    if (models.length === 0) return;
    const answers = await Promise.all(
      Array.from({ length: WARM_REQUESTS }, (_, i) => throughTrafficPath(deps, models[i % models.length], i)),
    );
    served = answers.filter(Boolean).length;
  };
  try {
    await Promise.race([work(), timeout]);
    return { ms: performance.now() - started, served, error: null };
  } catch (error) {
    return { ms: performance.now() - started, served, error: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}
