/**
 * Start-up warm-up (`upstream.warm_up`): a fresh process meeting its first burst pays at once for
 * every lazily compiled function on the request path, and the burst's tail waits for it. A replica
 * Kubernetes has just restarted meets exactly that burst the moment `/readyz` lets traffic in, so
 * before it does, fleetgate runs a second, private copy of its traffic path (its own listener, the
 * same guards, body parser, admission, dispatcher, reply-from and SSE relay, built by the same code
 * from the same config) in front of an in-process engine, sends it waves of one-token streams over
 * loopback, and throws both away. The functions V8 compiled are the running instance's too; no
 * engine, client budget, counter or backend state of the running instance is touched. Bounded in
 * time; a failure only logs.
 */
import { Pool } from 'undici';
import type { Config } from '../config/types.js';
import { warmUpConfig } from './warm-up-config.js';
import { startWarmUpEngine, WARM_UP_MODEL } from './warm-up-engine.js';

/** Requests sent at once, each on its own connection, in `WAVES` waves: past V8's first tier. */
const REQUESTS = 32;
const WAVES = 2;
/** The whole warm-up gives up after this long (readiness then proceeds cold). */
const TIMEOUT_MS = 10_000;
const READY_POLL_MS = 10;

/** A fleetgate built from a config, as the composition root builds one. */
export interface WarmUpGateway {
  listen(): Promise<string>;
  close(): Promise<void>;
}

export interface WarmUpResult {
  ms: number;
  /** Requests through the copy's traffic path that were answered 200. */
  served: number;
  error: string | null;
}

async function status(pool: Pool, path: string, apiKey: string | null, body?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (apiKey !== null) headers.authorization = `Bearer ${apiKey}`;
  const res = await pool.request({ method: body === undefined ? 'GET' : 'POST', path, headers, body });
  await res.body.dump();
  return res.statusCode;
}

async function untilReady(pool: Pool, signal: AbortSignal): Promise<void> {
  while ((await status(pool, '/readyz', null)) !== 200) {
    signal.throwIfAborted();
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
}

const streamBody = (i: number) =>
  JSON.stringify({
    model: WARM_UP_MODEL,
    messages: [{ role: 'user', content: `warm-up ${i}` }],
    max_tokens: 1,
    stream: true,
  });

/** Runs the warm-up; `stop` (the running fleetgate closing) ends it early, the copy closed. */
export async function warmUp(
  config: Config,
  build: (config: Config) => Promise<WarmUpGateway>,
  stop: AbortSignal,
): Promise<WarmUpResult> {
  const started = performance.now();
  const signal = AbortSignal.any([AbortSignal.timeout(TIMEOUT_MS), stop]);
  const apiKey = config.auth.api_keys[0] ?? null;
  let served = 0;
  const engine = await startWarmUpEngine();
  let gateway: WarmUpGateway | null = null;
  let pool: Pool | null = null;
  try {
    gateway = await build(warmUpConfig(config, engine.url, REQUESTS * WAVES));
    const self = new Pool(await gateway.listen(), { connections: REQUESTS });
    pool = self;
    // One listener for all requests: ending the pool fails every request it holds.
    signal.addEventListener('abort', () => void self.destroy(), { once: true });
    await untilReady(self, signal);
    for (let wave = 0; wave < WAVES; wave++) {
      const answers = await Promise.all(
        Array.from({ length: REQUESTS }, (_, i) => status(self, '/v1/chat/completions', apiKey, streamBody(i))),
      );
      served += answers.filter((code) => code === 200).length;
    }
    return { ms: performance.now() - started, served, error: null };
  } catch (error) {
    const why = stop.aborted ? 'stopped' : signal.aborted ? `gave up after ${TIMEOUT_MS} ms` : (error as Error).message;
    return { ms: performance.now() - started, served, error: why };
  } finally {
    await pool?.destroy();
    await gateway?.close();
    await engine.close();
  }
}
