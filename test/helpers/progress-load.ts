/** Load and observation for the progress watchdog's integration tests. */
import type { Gateway } from '../../src/app.js';

export const PROGRESS_TIMEOUT_MS = 1_500;
export const CONFIG = {
  health: { progress_timeout: `${PROGRESS_TIMEOUT_MS}ms`, interval: '10s', starting_interval: '3s' },
  routing: { load_interval: '100ms' },
};

export interface Outcome {
  streamed: boolean;
  status: number;
  /** Streams: ended with `data: [DONE]`. Plain: a JSON body with a completion. */
  complete: boolean;
  /** Streams: the SSE error event fleetgate writes when the upstream fails mid-stream. */
  errorEvent: boolean;
  error: string | null;
}

export async function call(url: string, streamed: boolean, maxTokens: number): Promise<Outcome> {
  const outcome: Outcome = { streamed, status: 0, complete: false, errorEvent: false, error: null };
  try {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', prompt: 'hello', max_tokens: maxTokens, stream: streamed }),
      signal: AbortSignal.timeout(20_000),
    });
    outcome.status = res.status;
    const text = await res.text();
    if (streamed) {
      outcome.complete = text.includes('data: [DONE]');
      outcome.errorEvent = /data: \{"error":\{"message":"[^"]*","type":"upstream_error","code":502\}\}\n\n$/.test(text);
    } else {
      outcome.complete = res.status === 200 && Array.isArray(JSON.parse(text).choices);
    }
  } catch (error) {
    outcome.error = (error as Error).message;
  }
  return outcome;
}

/** `clients` loops until `stop()`, bounded in count; `streamed(client, n)` picks each request's kind. */
export function load(url: string, clients: number, maxTokens: number, streamed: (i: number, n: number) => boolean) {
  let stopped = false;
  const outcomes: Outcome[] = [];
  const loops = Array.from({ length: clients }, async (_, i) => {
    for (let n = 0; n < 200 && !stopped; n++) outcomes.push(await call(url, streamed(i, n), maxTokens));
  });
  return {
    outcomes,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
      return outcomes;
    },
  };
}

export function transitions(gateway: Gateway) {
  const seen: Array<{ backend: string; to: string; reason: string | null; at: number }> = [];
  gateway.fleet.registry.on('transition', (e) =>
    seen.push({ backend: e.backend.name, to: e.to, reason: e.reason, at: performance.now() }),
  );
  return seen;
}
