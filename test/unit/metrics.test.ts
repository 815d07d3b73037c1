import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendConfig } from '../../src/config/types.js';
import { BACKEND_STATES, type BackendState } from '../../src/fleet/backend-lifecycle.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { LLM_LATENCY_BUCKETS } from '../../src/metrics/definitions.js';
import { GatewayMetrics } from '../../src/metrics/gateway-metrics.js';
import { ProxyEventBus, type RequestRecord } from '../../src/proxy/proxy-events.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import { AdmissionError, type Lease } from '../../src/routing/queue/wait-queue.js';
import { queueOn } from '../helpers/wait-queue.js';

const PASS = { ok: true, reachable: true, reason: null };
const FAIL = { ok: false, reachable: true, reason: '/health 500' };
const REFUSED = { ok: false, reachable: false, reason: 'connection refused' };

function setup({ fall = 2 } = {}) {
  let clock = 1_000_000;
  const registry = new FleetRegistry({ rise: 1, fall, stallAfter: 600_000, defaultCap: 0, now: () => clock });
  const events = new ProxyEventBus();
  const queue = queueOn(registry, {
    maxWaiting: 10,
    timeoutMs: 60_000,
    policy: createPolicy('least-loaded'),
  });
  const add = (name: string, log: string | null = null) => {
    const config: BackendConfig = { url: `http://127.0.0.1:${40000 + registry.size}`, name, kind: 'sglang', log };
    return registry.add(config);
  };
  const metrics = new GatewayMetrics(registry, events, queue);
  return {
    registry,
    events,
    queue,
    metrics,
    add,
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

type Labels = Record<string, string | number>;

/** The value of one series, read through prom-client (runs scrape-time `collect`s); undefined if absent. */
async function value(metrics: GatewayMetrics, name: string, labels: Labels = {}, sample = name) {
  const metric = metrics.registry.getSingleMetric(name);
  assert.ok(metric, `metric ${name} is registered`);
  // Histogram values carry the sample name (`_bucket`, `_sum`, `_count`); the typings omit it.
  const values = (await metric.get()).values as Array<{ value: number; labels: Labels; metricName?: string }>;
  const found = values.find(
    (v) =>
      (v.metricName ?? name) === sample &&
      Object.entries(labels).every(([k, want]) => String(v.labels[k]) === String(want)) &&
      Object.keys(v.labels).length === Object.keys(labels).length,
  );
  return found?.value;
}

async function stateGauges(metrics: GatewayMetrics, backend: string) {
  const out: Partial<Record<BackendState, number | undefined>> = {};
  for (const state of BACKEND_STATES) out[state] = await value(metrics, 'fleetgate_backend_state', { backend, state });
  return out;
}

function record(over: Partial<RequestRecord>): RequestRecord {
  return {
    backend: 'gpu0',
    method: 'POST',
    path: '/v1/chat/completions',
    status: 200,
    durationMs: 10,
    ttfbMs: 5,
    queueMs: 0,
    priorityClass: null,
    bytes: 100,
    retries: 0,
    resumes: 0,
    backends: [],
    outcome: 'ok',
    completionTokens: null,
    streamed: false,
    ...over,
  };
}

describe('backend state metrics', () => {
  test('a new backend exports up=0 and all six states, down=1', async () => {
    const { metrics, add } = setup();
    add('gpu0');
    assert.equal(await value(metrics, 'fleetgate_backend_up', { backend: 'gpu0' }), 0);
    assert.deepEqual(await stateGauges(metrics, 'gpu0'), {
      down: 1,
      starting: 0,
      ready: 0,
      unhealthy: 0,
      draining: 0,
      failed: 0,
    });
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'down' }), 1);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'ready' }), 0);
  });

  test('backends added before the metrics existed are bound too', async () => {
    const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 1000, defaultCap: 0 });
    registry.add({ url: 'http://127.0.0.1:1', name: 'early', kind: 'sglang', log: null });
    const queue = queueOn(registry, {
      maxWaiting: 1,
      timeoutMs: 1000,
      policy: createPolicy('round-robin'),
    });
    const metrics = new GatewayMetrics(registry, new ProxyEventBus(), queue);
    assert.equal(await value(metrics, 'fleetgate_backend_state', { backend: 'early', state: 'down' }), 1);
  });

  test('gauges follow the lifecycle up and down; progress and time-to-ready are exported', async () => {
    const { registry, metrics, add, advance } = setup({ fall: 2 });
    const gpu = add('gpu0', 'logs/gpu0.log');

    registry.apply(gpu, { type: 'log', event: { type: 'start' } });
    registry.apply(gpu, {
      type: 'log',
      event: { type: 'phase', phase: 'loading_weights', progress: { done: 33, total: 132 }, etaSeconds: 60 },
    });
    assert.equal(gpu.state, 'starting');
    assert.equal(await value(metrics, 'fleetgate_backend_load_progress_ratio', { backend: 'gpu0' }), 0.25);
    assert.equal((await stateGauges(metrics, 'gpu0')).starting, 1);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'starting' }), 1);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'down' }), 0);

    registry.apply(gpu, {
      type: 'log',
      event: { type: 'phase', phase: 'warming_up', progress: null, etaSeconds: null },
    });
    assert.equal(await value(metrics, 'fleetgate_backend_load_progress_ratio', { backend: 'gpu0' }), 0);
    assert.equal(await value(metrics, 'fleetgate_backend_ready_seconds', { backend: 'gpu0' }), undefined);

    advance(42_000);
    registry.apply(gpu, { type: 'log', event: { type: 'ready' } });
    registry.apply(gpu, { type: 'probe', result: PASS });
    assert.equal(gpu.state, 'ready');
    assert.equal(await value(metrics, 'fleetgate_backend_up', { backend: 'gpu0' }), 1);
    assert.deepEqual(await stateGauges(metrics, 'gpu0'), {
      down: 0,
      starting: 0,
      ready: 1,
      unhealthy: 0,
      draining: 0,
      failed: 0,
    });
    assert.equal(await value(metrics, 'fleetgate_backend_ready_seconds', { backend: 'gpu0' }), 42);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'ready' }), 1);

    registry.apply(gpu, { type: 'probe', result: FAIL });
    assert.equal(await value(metrics, 'fleetgate_backend_up', { backend: 'gpu0' }), 1, 'one failure < fall');
    registry.apply(gpu, { type: 'probe', result: FAIL });
    assert.equal(gpu.state, 'unhealthy');
    assert.equal(await value(metrics, 'fleetgate_backend_up', { backend: 'gpu0' }), 0);
    assert.equal((await stateGauges(metrics, 'gpu0')).unhealthy, 1);
    assert.equal((await stateGauges(metrics, 'gpu0')).ready, 0);

    registry.apply(gpu, { type: 'log', event: { type: 'fatal', reason: 'CUDA out of memory' } });
    assert.equal(gpu.state, 'failed');
    assert.equal((await stateGauges(metrics, 'gpu0')).failed, 1);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'failed' }), 1);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'unhealthy' }), 0);

    const transitions = [
      ['down', 'starting'],
      ['starting', 'ready'],
      ['ready', 'unhealthy'],
      ['unhealthy', 'failed'],
    ];
    assert.equal(
      await value(metrics, 'fleetgate_backend_transitions_total', { backend: 'gpu0', from: 'ready', to: 'draining' }),
      0,
      'transitions into and out of ready are exported from the start',
    );
    assert.equal(
      await value(metrics, 'fleetgate_backend_transitions_total', { backend: 'gpu0', from: 'down', to: 'failed' }),
      undefined,
      'other pairs appear when they happen',
    );
    for (const [from, to] of transitions) {
      assert.equal(
        await value(metrics, 'fleetgate_backend_transitions_total', { backend: 'gpu0', from, to }),
        1,
        `${from} -> ${to}`,
      );
    }
    assert.equal(await value(metrics, 'fleetgate_health_checks_total', { backend: 'gpu0', result: 'pass' }), 1);
    assert.equal(await value(metrics, 'fleetgate_health_checks_total', { backend: 'gpu0', result: 'fail' }), 2);
  });

  test('counters only rise through flapping, while up goes 1, 0, 1, 0', async () => {
    const { registry, metrics, add } = setup({ fall: 1 });
    const gpu = add('gpu0');
    const seen: number[] = [];
    let lastTransitions = 0;
    let lastChecks = 0;
    for (let i = 0; i < 4; i++) {
      registry.apply(gpu, { type: 'probe', result: i % 2 === 0 ? PASS : REFUSED });
      seen.push((await value(metrics, 'fleetgate_backend_up', { backend: 'gpu0' })) as number);
      const text = await metrics.render();
      const transitions = sumSamples(text, 'fleetgate_backend_transitions_total');
      const checks = sumSamples(text, 'fleetgate_health_checks_total');
      assert.ok(transitions > lastTransitions, 'every flip is counted');
      assert.equal(checks, lastChecks + 1);
      lastTransitions = transitions;
      lastChecks = checks;
    }
    assert.deepEqual(seen, [1, 0, 1, 0]);
    assert.equal(await value(metrics, 'fleetgate_health_checks_total', { backend: 'gpu0', result: 'pass' }), 2);
    assert.equal(await value(metrics, 'fleetgate_health_checks_total', { backend: 'gpu0', result: 'fail' }), 2);
  });

  test('a drained backend reports draining; a removed one leaves no series, and late records do not revive it', async () => {
    const { registry, metrics, events, add } = setup();
    const a = add('gpu0');
    add('gpu1');
    registry.apply(a, { type: 'probe', result: PASS });
    events.emit('request', record({ backend: 'gpu0', status: 200 }));
    events.emit('upstream_error', { backend: 'gpu0', kind: 'reset' });
    registry.apply(a, { type: 'drain' });
    assert.equal((await stateGauges(metrics, 'gpu0')).draining, 1);
    assert.match(await metrics.render(), /backend="gpu0"/);

    // A resume after a failure kind that is not among the ones exported at 0 binds a series of its own.
    events.emit('stream_resume', { backend: 'gpu0', reason: 'headers_timeout' });
    assert.equal(
      await value(metrics, 'fleetgate_stream_resumes_total', { backend: 'gpu0', reason: 'headers_timeout' }),
      1,
    );
    registry.remove('gpu0');
    assert.equal(registry.get('gpu0'), undefined);
    events.emit('request', record({ backend: 'gpu0', status: 200 }));
    events.emit('stream_resume', { backend: 'gpu0', reason: 'reset' });
    events.emit('retry', { backend: 'gpu0' });
    const text = await metrics.render();
    assert.doesNotMatch(text, /backend="gpu0"/);
    assert.match(text, /fleetgate_backend_up\{backend="gpu1"\} 0/);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'draining' }), 0);
    assert.equal(await value(metrics, 'fleetgate_backends', { state: 'down' }), 1);
  });

  test('a backend re-added under the same name starts fresh series', async () => {
    const { registry, metrics, add } = setup();
    const a = add('gpu0');
    registry.apply(a, { type: 'probe', result: PASS });
    registry.remove('gpu0');
    add('gpu0');
    assert.equal(await value(metrics, 'fleetgate_backend_up', { backend: 'gpu0' }), 0);
    assert.equal(
      await value(metrics, 'fleetgate_backend_transitions_total', { backend: 'gpu0', from: 'down', to: 'ready' }),
      0,
    );
  });
});

describe('request metrics', () => {
  test('histograms observe the recorded durations in seconds', async () => {
    const { metrics, events, add } = setup();
    add('gpu0');
    events.emit('request', record({ durationMs: 3, ttfbMs: 2 }));
    events.emit('request', record({ durationMs: 700, ttfbMs: 40 }));
    events.emit('request', record({ durationMs: 90_000, ttfbMs: null, status: 504 }));

    const bucket = (le: number) =>
      value(
        metrics,
        'fleetgate_request_duration_seconds',
        { backend: 'gpu0', le },
        'fleetgate_request_duration_seconds_bucket',
      );
    assert.equal(await bucket(0.005), 1);
    assert.equal(await bucket(0.5), 1);
    assert.equal(await bucket(1), 2);
    assert.equal(await bucket(60), 2);
    assert.equal(await bucket(120), 3);
    assert.equal(await bucket(1800), 3);
    const sum = await value(
      metrics,
      'fleetgate_request_duration_seconds',
      { backend: 'gpu0' },
      'fleetgate_request_duration_seconds_sum',
    );
    assert.ok(Math.abs((sum as number) - 90.703) < 1e-9, `sum ${sum}`);
    assert.equal(
      await value(
        metrics,
        'fleetgate_request_duration_seconds',
        { backend: 'gpu0' },
        'fleetgate_request_duration_seconds_count',
      ),
      3,
    );

    const ttfbCount = await value(
      metrics,
      'fleetgate_time_to_first_byte_seconds',
      { backend: 'gpu0' },
      'fleetgate_time_to_first_byte_seconds_count',
    );
    assert.equal(ttfbCount, 2, 'a request with no first byte is not observed');
    const ttfbSum = await value(
      metrics,
      'fleetgate_time_to_first_byte_seconds',
      { backend: 'gpu0' },
      'fleetgate_time_to_first_byte_seconds_sum',
    );
    assert.ok(Math.abs((ttfbSum as number) - 0.042) < 1e-9);

    assert.equal(await value(metrics, 'fleetgate_requests_total', { backend: 'gpu0', code: 200 }), 2);
    assert.equal(await value(metrics, 'fleetgate_requests_total', { backend: 'gpu0', code: 504 }), 1);
  });

  test('buckets span 5 ms to 30 min, and the rendered text has them', async () => {
    const { metrics, add } = setup();
    add('gpu0');
    assert.equal(LLM_LATENCY_BUCKETS[0], 0.005);
    assert.equal(LLM_LATENCY_BUCKETS.at(-1), 1800);
    const text = await metrics.render();
    assert.match(text, /fleetgate_request_duration_seconds_bucket\{le="1800",backend="gpu0"\} 0/);
    assert.match(text, /fleetgate_time_to_first_byte_seconds_bucket\{le="\+Inf",backend="gpu0"\} 0/);
  });

  test('requests that reached no backend count under backend="none"', async () => {
    const { metrics, events, add } = setup();
    add('gpu0');
    events.emit(
      'request',
      record({ backend: null, status: 503, outcome: 'queue_timeout', ttfbMs: 1, durationMs: 120_000 }),
    );
    assert.equal(await value(metrics, 'fleetgate_requests_total', { backend: 'none', code: 503 }), 1);
    assert.equal(
      await value(
        metrics,
        'fleetgate_request_duration_seconds',
        { backend: 'none', le: 120 },
        'fleetgate_request_duration_seconds_bucket',
      ),
      1,
    );
  });

  test('tokens, upstream errors and retries are counted per backend', async () => {
    const { metrics, events, add } = setup();
    add('gpu0');
    add('gpu1');
    assert.equal(await value(metrics, 'fleetgate_backend_generated_tokens_total', { backend: 'gpu0' }), 0);
    assert.equal(await value(metrics, 'fleetgate_retries_total', { backend: 'gpu0' }), 0);
    events.emit('request', record({ backend: 'gpu0', completionTokens: 120 }));
    events.emit('request', record({ backend: 'gpu0', completionTokens: 30 }));
    events.emit('request', record({ backend: 'gpu0', completionTokens: null }));
    events.emit('upstream_error', { backend: 'gpu1', kind: 'connect_refused' });
    events.emit('upstream_error', { backend: 'gpu1', kind: 'connect_refused' });
    events.emit('upstream_error', { backend: 'gpu1', kind: 'reset' });
    events.emit('retry', { backend: 'gpu1' });
    assert.equal(await value(metrics, 'fleetgate_backend_generated_tokens_total', { backend: 'gpu0' }), 150);
    assert.equal(await value(metrics, 'fleetgate_backend_generated_tokens_total', { backend: 'gpu1' }), 0);
    assert.equal(
      await value(metrics, 'fleetgate_upstream_errors_total', { backend: 'gpu1', kind: 'connect_refused' }),
      2,
    );
    assert.equal(await value(metrics, 'fleetgate_upstream_errors_total', { backend: 'gpu1', kind: 'reset' }), 1);
    assert.equal(await value(metrics, 'fleetgate_retries_total', { backend: 'gpu1' }), 1);
  });
});

describe('scrape-time gauges', () => {
  test('in-flight requests and queue waiting are read when scraped', async () => {
    const { registry, metrics, queue, add } = setup();
    const gpu = add('gpu0');
    const waiting = queue.acquire() as Promise<Lease>;
    assert.equal(await value(metrics, 'fleetgate_queue_waiting_requests', { class: 'default' }), 1);
    registry.apply(gpu, { type: 'probe', result: PASS });
    const lease = await waiting;
    assert.equal(await value(metrics, 'fleetgate_queue_waiting_requests', { class: 'default' }), 0);
    assert.equal(await value(metrics, 'fleetgate_backend_inflight_requests', { backend: 'gpu0' }), 1);
    lease.release();
    assert.equal(await value(metrics, 'fleetgate_backend_inflight_requests', { backend: 'gpu0' }), 0);
  });

  test('the in-flight cap is read when scraped and follows setCap (0 = none)', async () => {
    const { registry, metrics, add } = setup();
    const gpu = add('gpu0');
    assert.equal(await value(metrics, 'fleetgate_backend_inflight_cap', { backend: 'gpu0' }), 0);
    registry.setCap(gpu, 14);
    assert.equal(await value(metrics, 'fleetgate_backend_inflight_cap', { backend: 'gpu0' }), 14);
    registry.setCap(gpu, 5);
    assert.equal(await value(metrics, 'fleetgate_backend_inflight_cap', { backend: 'gpu0' }), 5);
  });

  test("a backend's load is what it reported plus this replica's dispatches since, times routing.replicas", async () => {
    const registry = new FleetRegistry({ rise: 1, fall: 2, stallAfter: 600_000, defaultCap: 0 });
    const metrics = new GatewayMetrics(
      registry,
      new ProxyEventBus(),
      queueOn(registry, { maxWaiting: 0, policy: createPolicy('least-loaded') }),
      null,
      3,
    );
    const gpu = registry.add({ url: 'http://127.0.0.1:40000', name: 'gpu0', kind: 'sglang', log: null });
    registry.take(gpu);
    assert.equal(await value(metrics, 'fleetgate_backend_load', { backend: 'gpu0' }), 1, 'no report: in flight');
    registry.reportLoad(gpu, { running: 5, queued: 2, tokenUsage: 0.2, maxRunning: 8 });
    registry.take(gpu);
    registry.take(gpu);
    assert.equal(await value(metrics, 'fleetgate_backend_load', { backend: 'gpu0' }), 7 + 2 * 3);
  });

  test('queue rejections are counted by reason and never go down', async () => {
    const { metrics, queue, add } = setup();
    add('gpu0');
    for (const reason of ['queue_full', 'timeout', 'aborted']) {
      assert.equal(await value(metrics, 'fleetgate_queue_rejected_total', { reason, class: 'default' }), 0);
    }
    const abort = new AbortController();
    const pending = queue.acquire(abort.signal) as Promise<Lease>;
    abort.abort();
    await assert.rejects(pending, AdmissionError);
    assert.equal(await value(metrics, 'fleetgate_queue_rejected_total', { reason: 'aborted', class: 'default' }), 1);
    assert.equal(
      await value(metrics, 'fleetgate_queue_rejected_total', { reason: 'aborted', class: 'default' }),
      1,
      'no double count',
    );

    const held = Array.from({ length: 10 }, () => queue.acquire() as Promise<Lease>);
    await assert.rejects(queue.acquire() as Promise<Lease>, AdmissionError);
    assert.equal(await value(metrics, 'fleetgate_queue_rejected_total', { reason: 'queue_full', class: 'default' }), 1);
    queue.close();
    await Promise.allSettled(held);
    assert.equal(await value(metrics, 'fleetgate_queue_waiting_requests', { class: 'default' }), 0);
  });

  test('queue depth, waits and rejections carry the priority class', async () => {
    const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 1000, defaultCap: 0 });
    const gpu = registry.add({ url: 'http://127.0.0.1:1', name: 'gpu0', kind: 'sglang', log: null });
    let clock = 0;
    const queue = queueOn(registry, {
      maxWaiting: 10,
      classes: ['interactive', 'batch'].map((name) => ({
        name,
        maxWaiting: name === 'interactive' ? 1 : 10,
        timeoutMs: 0,
        timeoutOnlyWhenNoneReady: false,
      })),
      defaultClass: 'batch',
      now: () => clock,
      policy: createPolicy('round-robin'),
    });
    const metrics = new GatewayMetrics(registry, new ProxyEventBus(), queue);
    const interactive = { priority: 'interactive', apiKey: null };
    const first = queue.acquire(undefined, undefined, interactive) as Promise<Lease>;
    await assert.rejects(queue.acquire(undefined, undefined, interactive) as Promise<Lease>, AdmissionError);
    const batch = [queue.acquire() as Promise<Lease>, queue.acquire() as Promise<Lease>];
    assert.equal(await value(metrics, 'fleetgate_queue_waiting_requests', { class: 'interactive' }), 1);
    assert.equal(await value(metrics, 'fleetgate_queue_waiting_requests', { class: 'batch' }), 2);
    assert.equal(
      await value(metrics, 'fleetgate_queue_rejected_total', { reason: 'queue_full', class: 'interactive' }),
      1,
    );
    assert.equal(await value(metrics, 'fleetgate_queue_rejected_total', { reason: 'queue_full', class: 'batch' }), 0);
    clock = 2_500;
    registry.apply(gpu, { type: 'probe', result: PASS });
    for (const lease of await Promise.all([first, ...batch])) lease.release();
    const waited = (sample: string) => value(metrics, 'fleetgate_queue_wait_seconds', { class: 'interactive' }, sample);
    assert.equal(await waited('fleetgate_queue_wait_seconds_count'), 1);
    assert.equal(await waited('fleetgate_queue_wait_seconds_sum'), 2.5);
    assert.equal(
      await value(metrics, 'fleetgate_queue_wait_seconds', { class: 'batch' }, 'fleetgate_queue_wait_seconds_count'),
      2,
    );
  });
});

describe('exposition', () => {
  test('every metric of the design table is exported with its type, plus process metrics', async () => {
    const { metrics, add } = setup();
    add('gpu0');
    const text = await metrics.render();
    const expected: Record<string, string> = {
      fleetgate_backend_up: 'gauge',
      fleetgate_backend_state: 'gauge',
      fleetgate_backends: 'gauge',
      fleetgate_backend_inflight_requests: 'gauge',
      fleetgate_backend_inflight_cap: 'gauge',
      fleetgate_backend_load: 'gauge',
      fleetgate_backend_load_progress_ratio: 'gauge',
      fleetgate_backend_ready_seconds: 'gauge',
      fleetgate_requests_total: 'counter',
      fleetgate_request_duration_seconds: 'histogram',
      fleetgate_time_to_first_byte_seconds: 'histogram',
      fleetgate_upstream_errors_total: 'counter',
      fleetgate_retries_total: 'counter',
      fleetgate_health_checks_total: 'counter',
      fleetgate_backend_transitions_total: 'counter',
      fleetgate_queue_waiting_requests: 'gauge',
      fleetgate_queue_rejected_total: 'counter',
      fleetgate_backend_generated_tokens_total: 'counter',
    };
    for (const [name, type] of Object.entries(expected)) {
      assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, 'm'), name);
    }
    assert.match(text, /^process_cpu_user_seconds_total /m);
    assert.match(text, /^nodejs_eventloop_lag_seconds /m);
    assert.match(metrics.contentType, /^text\/plain/);
  });

  test('two gateways in one process keep separate registries', async () => {
    const one = setup();
    const two = setup();
    one.add('gpu0');
    two.add('other');
    assert.doesNotMatch(await one.metrics.render(), /backend="other"/);
    assert.doesNotMatch(await two.metrics.render(), /backend="gpu0"/);
  });
});

function sumSamples(text: string, name: string): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

test('close() removes every listener it added to the proxy events, rate_limited included', async () => {
  const { events, metrics } = setup();
  const names = ['request', 'upstream_error', 'retry', 'rate_limited'] as const;
  for (const name of names) assert.ok(events.listenerCount(name) > 0, `${name} is listened to`);
  await metrics.close();
  for (const name of names) assert.equal(events.listenerCount(name), 0, `${name} has no listener after close()`);
});
