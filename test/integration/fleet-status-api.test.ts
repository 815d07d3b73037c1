/**
 * `GET /fleet/status` and `GET /fleet/events` against simulated SGLang servers whose logs fleetgate
 * follows: the JSON shape of DESIGN.md with backends in known phases, and the event stream (snapshot,
 * then a `backend` event when one turns ready or fails, coalesced progress, in-flight in `summary`,
 * heartbeats, no listener left behind when clients go).
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, get, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import pino from 'pino';
import { request } from 'undici';
import { FleetEventStream } from '../../src/admin/fleet-events.js';
import type { BackendStatus, FleetStatus } from '../../src/admin/fleet-summary.js';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import { backendsFor, createSims, startGateway } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const HEALTH = { starting_interval: '100ms', interval: '1s' };

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-status-api-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

interface SseEvent {
  event: string;
  data: string;
}

/** A raw SSE client that keeps every event and comment it received, in order. */
class SseClient extends EventEmitter {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  response!: IncomingMessage;
  #closed = false;
  #buffer = '';
  #req: ReturnType<typeof get> | null = null;

  static async open(t: TestContext, url: string): Promise<SseClient> {
    const client = new SseClient();
    await new Promise<void>((resolve, reject) => {
      client.#req = get(url, (res) => {
        client.response = res;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => client.#push(chunk));
        res.on('close', () => {
          client.#closed = true;
          client.emit('closed');
        });
        resolve();
      });
      client.#req.on('error', reject);
    });
    t.after(() => client.close());
    return client;
  }

  get closed(): boolean {
    return this.#closed;
  }

  close(): void {
    this.#req?.destroy();
  }

  #push(chunk: string): void {
    this.#buffer += chunk;
    for (let end = this.#buffer.indexOf('\n\n'); end >= 0; end = this.#buffer.indexOf('\n\n')) {
      const block = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) this.comments.push(line.slice(1).trim());
        else if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length > 0) {
        this.events.push({ event, data: data.join('\n') });
        this.emit('event');
      }
    }
  }

  /** The first event (from `from` on) that matches; waits for it, bounded. */
  async next<T>(from: number, match: (event: string, data: T) => boolean, what: string, timeoutMs = 5000) {
    return waitFor(
      () => {
        for (let i = from; i < this.events.length; i++) {
          const e = this.events[i];
          const data = JSON.parse(e.data) as T;
          if (match(e.event, data)) return { index: i, data };
        }
        return null;
      },
      { timeoutMs, what },
    );
  }

  backendEvents(name: string): BackendStatus[] {
    return this.events
      .filter((e) => e.event === 'backend')
      .map((e) => JSON.parse(e.data) as BackendStatus)
      .filter((b) => b.name === name);
  }
}

async function getStatus(url: string): Promise<FleetStatus> {
  const res = await request(`${url}/fleet/status`);
  assert.equal(res.statusCode, 200);
  return (await res.body.json()) as FleetStatus;
}

const BACKEND_KEYS = [
  'cache_hit_rate',
  'eta_seconds',
  'inflight',
  'inflight_cap',
  'kind',
  'kv_events',
  'last_log_line',
  'models',
  'name',
  'phase',
  'progress',
  'ready_seconds',
  'reason',
  'serving',
  'since',
  'state',
  'supervision',
  'url',
];

test('/fleet/status: every backend with state, phase, progress and reason from its log', async (t) => {
  const dir = await tempDir(t);
  const log = (i: number) => join(dir, `sglang_gpu${i}.log`);
  const sims = await createSims(t, [
    { logFile: log(0) },
    // 200 shards of 200 ms: loading weights for the whole test.
    { logFile: log(1), timing: { shards: 200, shardMs: 200 } },
    // Never started: its log does not exist and nothing listens.
    { logFile: log(2) },
    { logFile: log(3), failure: { mode: 'cuda_oom_capture' } },
    { logFile: log(4), timing: { warmupMs: 60_000 } },
  ]);
  const { url } = await startGateway(t, {
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: HEALTH,
    min_ready: 2,
  });
  for (const i of [0, 1, 3, 4]) sims[i].start();

  const status = await waitFor(
    async () => {
      const s = await getStatus(url);
      const [ready, loading, down, failed, warming] = s.backends;
      return ready.state === 'ready' &&
        loading.phase === 'loading_weights' &&
        (loading.progress?.done ?? 0) >= 2 &&
        down.state === 'down' &&
        failed.state === 'failed' &&
        warming.phase === 'warming_up'
        ? s
        : null;
    },
    { timeoutMs: 10_000, what: 'backends in their phases' },
  );

  assert.deepEqual(Object.keys(status).sort(), [
    'backends',
    'min_ready',
    'ready',
    'serving',
    'states',
    'total',
    'waiting',
  ]);
  assert.deepEqual(status.waiting, { interactive: 0, batch: 0 }, 'waiting per priority class, highest first');
  assert.equal(status.ready, 1);
  assert.equal(status.total, 5);
  assert.equal(status.min_ready, 2);
  assert.deepEqual(status.states, { ready: 1, starting: 2, failed: 1, down: 1 });
  for (const b of status.backends) {
    assert.deepEqual(Object.keys(b).sort(), BACKEND_KEYS, b.name);
    assert.equal(b.kind, 'sglang');
    assert.equal(b.inflight, 0);
    assert.ok(!Number.isNaN(Date.parse(b.since)) && b.since.endsWith('Z'), b.since);
  }
  const [ready, loading, down, failed, warming] = status.backends;
  assert.deepEqual(
    status.backends.map((b) => [b.name, b.url]),
    sims.map((s) => [s.name, s.url]),
  );

  assert.equal(ready.phase, null);
  assert.equal(ready.progress, null);
  assert.equal(typeof ready.ready_seconds, 'number');
  assert.equal(ready.reason, null);

  assert.equal(loading.state, 'starting');
  assert.equal(loading.progress?.total, 200);
  assert.ok(loading.progress!.done >= 2 && loading.progress!.done < 200);
  assert.equal(loading.ready_seconds, null);
  assert.match(loading.last_log_line ?? '', /Loading safetensors checkpoint shards/);

  assert.equal(down.phase, null);
  assert.equal(down.last_log_line, null);

  assert.match(failed.reason ?? '', /Capture cuda graph failed|CUDA out of memory/);

  assert.equal(warming.state, 'starting');
  assert.equal(warming.progress, null);
});

test('/fleet/events: snapshot, then an event when a backend turns ready and when one fails', async (t) => {
  const dir = await tempDir(t);
  const log = (i: number) => join(dir, `sglang_gpu${i}.log`);
  const sims = await createSims(t, [
    { logFile: log(0) },
    // Slow enough that its loading phase outlasts the 100 ms coalescing window.
    { logFile: log(1), timing: { shards: 10, shardMs: 30 } },
    { logFile: log(2), failure: { mode: 'cuda_oom_capture' } },
  ]);
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: HEALTH,
  });
  const registry = gateway.fleet.registry;
  const baseline = registry.listenerCount('change');
  const baselineRemoved = registry.listenerCount('removed');
  sims[0].start();
  await waitFor(async () => (await getStatus(url)).ready === 1, { what: 'gpu0 ready' });

  const client = await SseClient.open(t, `${url}/fleet/events`);
  assert.equal(client.response.statusCode, 200);
  assert.match(String(client.response.headers['content-type']), /^text\/event-stream/);
  assert.equal(client.response.headers['cache-control'], 'no-cache');
  assert.equal(registry.listenerCount('change'), baseline + 1);
  assert.equal(registry.listenerCount('removed'), baselineRemoved + 1);

  const snapshot = await client.next<FleetStatus>(0, (event) => event === 'snapshot', 'snapshot');
  assert.equal(snapshot.index, 0, 'the snapshot comes first');
  assert.equal(snapshot.data.ready, 1);
  assert.deepEqual(
    snapshot.data.backends.map((b) => [b.name, b.state]),
    [
      ['gpu0', 'ready'],
      ['gpu1', 'down'],
      ['gpu2', 'down'],
    ],
  );

  sims[1].start();
  const ready = await client.next<BackendStatus>(
    1,
    (event, b) => event === 'backend' && b.name === 'gpu1' && b.state === 'ready',
    'gpu1 ready event',
  );
  assert.equal(ready.data.phase, null);
  assert.equal(typeof ready.data.ready_seconds, 'number');
  // It went through its start-up phases on the way, each seen as a `backend` event.
  const phases = new Set(client.backendEvents('gpu1').map((b) => b.phase));
  assert.ok(phases.has('loading_weights') || phases.has('capturing_cuda_graphs'), [...phases].join());

  sims[2].start();
  const failed = await client.next<BackendStatus>(
    ready.index + 1,
    (event, b) => event === 'backend' && b.name === 'gpu2' && b.state === 'failed',
    'gpu2 failed event',
  );
  assert.match(failed.data.reason ?? '', /Capture cuda graph failed|CUDA out of memory/);

  // A second client also starts from a snapshot, which already shows the failure; both share one listener.
  const second = await SseClient.open(t, `${url}/fleet/events`);
  const again = await second.next<FleetStatus>(0, (event) => event === 'snapshot', 'second snapshot');
  assert.equal(again.data.backends[2].state, 'failed');
  assert.equal(registry.listenerCount('change'), baseline + 1);

  client.close();
  second.close();
  await waitFor(
    () => registry.listenerCount('change') === baseline && registry.listenerCount('removed') === baselineRemoved,
    {
      timeoutMs: 2000,
      what: 'listeners removed after the clients left',
    },
  );
});

test('/fleet/events: progress bursts are coalesced per backend; in-flight travels in `summary`', async (t) => {
  const dir = await tempDir(t);
  const sims = await createSims(t, [
    // 120 shards, 4 ms each: ~480 ms of loading, a log line per shard.
    { logFile: join(dir, 'gpu0.log'), timing: { shards: 120, shardMs: 4 }, engine: { tokenMs: 20 } },
  ]);
  const { url } = await startGateway(t, {
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: HEALTH,
  });
  const client = await SseClient.open(t, `${url}/fleet/events`);
  await client.next(0, (event) => event === 'snapshot', 'snapshot');
  const startedAt = Date.now();
  sims[0].start();
  await client.next<BackendStatus>(1, (e, b) => e === 'backend' && b.state === 'ready', 'gpu0 ready');
  const elapsedMs = Date.now() - startedAt;
  const loading = client.backendEvents('gpu0').filter((b) => b.phase === 'loading_weights');
  assert.ok(loading.length >= 1, 'loading progress was sent');
  // One event per 100 ms at most (plus the leading one), not one per shard.
  const bound = Math.ceil(elapsedMs / 100) + 2;
  assert.ok(
    client.backendEvents('gpu0').length <= bound,
    `${client.backendEvents('gpu0').length} events in ${elapsedMs} ms`,
  );
  assert.ok(loading.length < 60, `${loading.length} loading events for 120 shards`);
  const dones = loading.map((b) => b.progress?.done ?? 0);
  assert.deepEqual(
    dones,
    [...dones].sort((a, b) => a - b),
    'progress only moves forward',
  );

  // A generation in flight shows up in the next summary (within about a second), not per request.
  const from = client.events.length;
  const abort = new AbortController();
  const generation = request(`${url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 500 } }),
    signal: abort.signal,
  }).catch(() => null);
  const summary = await client.next<{ inflight: Record<string, number>; ready: number; total: number }>(
    from,
    (event, s) => event === 'summary' && s.inflight.gpu0 === 1,
    'summary with gpu0 in flight',
    4000,
  );
  assert.equal(summary.data.ready, 1);
  assert.equal(summary.data.total, 1);
  abort.abort();
  await generation;
  await client.next<{ inflight: Record<string, number> }>(
    summary.index + 1,
    (event, s) => event === 'summary' && s.inflight.gpu0 === 0,
    'summary with nothing in flight',
    4000,
  );
  const summaries = client.events.slice(from).filter((e) => e.event === 'summary');
  assert.ok(summaries.length <= 3, `only changed summaries are sent, got ${summaries.length}`);
});

test('/fleet/events: heartbeats while idle; open streams do not hold shutdown', async (t) => {
  const config = validateConfig(
    { listen: '127.0.0.1:0', backends: ['http://127.0.0.1:9'], shutdown: { drain_timeout: '10s' } },
    'test',
  );
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }), logPollMs: 25 });
  const url = await gateway.listen();
  let closed = false;
  t.after(() => (closed ? undefined : gateway.close()));

  // The hub with a short heartbeat, on its own server over the same registry.
  const stream = new FleetEventStream(gateway.fleet.registry, { minReady: () => 1, heartbeatMs: 50 });
  const server = createServer((_req, res) => stream.add(res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  const beating = await SseClient.open(t, `http://127.0.0.1:${address.port}/`);
  await waitFor(() => beating.comments.filter((c) => c === 'keepalive').length >= 2, { what: 'two heartbeats' });
  assert.equal(stream.clients, 1);
  beating.close();
  await waitFor(() => stream.clients === 0, { what: 'client dropped' });

  const client = await SseClient.open(t, `${url}/fleet/events`);
  await client.next(0, (event) => event === 'snapshot', 'snapshot');
  const started = Date.now();
  await gateway.close();
  closed = true;
  assert.ok(Date.now() - started < 3000, `close took ${Date.now() - started} ms`);
  await waitFor(() => client.closed, { timeoutMs: 2000, what: 'stream ended by shutdown' });
});

test('/fleet serves the self-contained status page', async (t) => {
  const { url } = await startGateway(t, { backends: ['http://127.0.0.1:9'] });
  const res = await request(`${url}/fleet`);
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  const csp = String(res.headers['content-security-policy']);
  assert.match(csp, /script-src 'sha256-/);
  const html = await res.body.text();
  assert.match(html, /<meta name="viewport"/);
  assert.match(html, /new EventSource\('fleet\/events'\)/);
  // Nothing from elsewhere: works offline.
  assert.doesNotMatch(html, /(src|href)="https?:/);
  const slash = await request(`${url}/fleet/`);
  assert.equal(slash.statusCode, 301);
  assert.equal(new URL(String(slash.headers.location), `${url}/fleet/`).pathname, '/fleet');
  await slash.body.dump();
});
