/**
 * A gateway over a first backend (where a test's stream goes) and an in-process spare that is down
 * until `admitSpare`, so the first attempt lands on the first backend whatever the policy and the
 * spare takes the continuation: the setup of the stream-resume and drain-deadline tests. And two
 * raw backends answering as a test scripts them (`rawPair`), for cuts a simulator does not make.
 */
import type { Socket } from 'node:net';
import type { TestContext } from 'node:test';
import type { Gateway } from '../../src/app.js';
import type { SimOptions, SimServer } from '../../src/sim/index.js';
import { createSims, startGateway } from './fleet.js';
import { sampleValue } from './prometheus-text.js';
import { type RawRequest, startRawBackend } from './raw-backend.js';
import { waitFor } from './wait.js';

export const RESUME_HEALTH = { starting_interval: '100ms', interval: '1s', fall: 1 };

export interface ResumeFleet {
  url: string;
  gateway: Gateway;
  /** The in-process backend that takes the continuation; started when `admitSpare` is called. */
  spare: SimServer;
  /** Bodies of the generation requests the spare received. */
  spareBodies: Array<Record<string, unknown>>;
  admitSpare(): Promise<void>;
}

/** `raw` adds to (and may replace) the gateway's config: `health` replaces RESUME_HEALTH whole. */
export async function resumeFleet(
  t: TestContext,
  first: { name: string; url: string },
  raw: object = {},
  spareOptions: Partial<SimOptions> = {},
): Promise<ResumeFleet> {
  const [spare] = await createSims(t, [{ name: 'gpu1', engine: { tokenMs: 5 }, ...spareOptions }]);
  const spareBodies: Array<Record<string, unknown>> = [];
  spare.on('generation', ({ body }) => spareBodies.push(body));
  const { url, gateway } = await startGateway(t, {
    backends: [
      { url: first.url, name: first.name },
      { url: spare.url, name: spare.name },
    ],
    health: RESUME_HEALTH,
    ...raw,
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 1, { what: `${first.name} ready` });
  const admitSpare = async () => {
    spare.start();
    await waitFor(() => gateway.fleet.registry.ready.length === 2, { what: 'the spare ready', timeoutMs: 30_000 });
  };
  return { url, gateway, spare, spareBodies, admitSpare };
}

/** A sample of the gateway's `/metrics`; 0 when the series is absent. */
export async function metricOf(gateway: Gateway, name: string, labels: Record<string, string>): Promise<number> {
  return sampleValue(await gateway.metrics.render(), name, labels) ?? 0;
}

/** An SSE answer that ends when the socket closes (no length, no chunking): `events`, then the close. */
export function sseThenClose(socket: Socket, events: object[], tail = ''): void {
  const body = events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + tail;
  socket.end(`HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n${body}`);
}

export const chunk = (id: string, delta: object, finish: string | null = null) => ({
  id,
  object: 'chat.completion.chunk',
  created: 1,
  model: 'm',
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
});

/** Two raw backends behind one gateway, each answering with `answer(i, body)` (i = its request number). */
export async function rawPair(
  t: TestContext,
  answer: (socket: Socket, n: number, body: { messages: Array<{ content: string }> }) => void,
  raw: object = {},
) {
  let n = 0;
  const handler = (socket: Socket, request: RawRequest) => answer(socket, n++, JSON.parse(request.body));
  const a = await startRawBackend(t, handler);
  const b = await startRawBackend(t, handler);
  const { url, gateway } = await startGateway(t, {
    backends: [
      { url: a.url, name: 'a', kind: 'openai' },
      { url: b.url, name: 'b', kind: 'openai' },
    ],
    health: RESUME_HEALTH,
    ...raw,
  });
  await waitFor(() => gateway.fleet.registry.ready.length === 2, { what: 'both ready' });
  return { url, gateway, seen: () => a.seen.length + b.seen.length };
}
