/**
 * The serving view's arithmetic with a fake clock: the sliding window (sums, rates, means, expiry),
 * the straggler rule, and ServingStats fed by request records and registry samples.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { HistogramSeries } from '../../src/metrics/backend-histogram.js';
import { SlidingWindow } from '../../src/metrics/rate-window.js';
import { isServingError, ServingStats } from '../../src/metrics/serving-stats.js';
import { findStragglers, STRAGGLER_RATIO } from '../../src/metrics/stragglers.js';
import { ProxyEventBus, type RequestRecord } from '../../src/proxy/proxy-events.js';

const T0 = 1_000_000;

test('window: sums what was added in the last minute and forgets what is older', () => {
  const w = new SlidingWindow(T0);
  w.add(T0, 5);
  w.add(T0 + 30_000, 2);
  assert.equal(w.sum(T0 + 30_000), 7);
  assert.equal(w.sum(T0 + 59_999), 7, 'the first second is still inside the window');
  assert.equal(w.sum(T0 + 60_000), 2, 'a minute later the first bucket has left');
  assert.equal(w.sum(T0 + 90_000), 0);
  // A bucket slot reused a lap later starts from zero.
  w.add(T0 + 120_000, 1);
  assert.equal(w.sum(T0 + 120_000), 1);
});

test('window: rate per second over the minute, or over its age while younger', () => {
  const w = new SlidingWindow(T0);
  for (let s = 0; s < 10; s++) w.add(T0 + s * 1000, 3);
  assert.equal(w.rate(T0 + 10_000), 3, '30 in the first 10 s is 3/s, not 0.5/s');
  for (let s = 10; s < 120; s++) w.add(T0 + s * 1000, 3);
  assert.equal(w.rate(T0 + 119_500), 3);
  assert.equal(w.rate(T0 + 200_000), 0, 'idle for over a minute');
  assert.equal(w.rate(T0), 0, 'no division by a zero age');
});

test('window: mean of samples, null when there are none', () => {
  const w = new SlidingWindow(T0);
  assert.equal(w.mean(T0), null);
  w.add(T0, 2);
  w.add(T0 + 1000, 4);
  w.add(T0 + 1500, 6);
  assert.equal(w.mean(T0 + 2000), 4);
  assert.equal(w.mean(T0 + 60_000), 5, 'the first sample left the window');
});

test('straggler: below 0.7x the median tokens/s per running request', () => {
  assert.equal(STRAGGLER_RATIO, 0.7);
  const fleet = [
    { name: 'a', tokensPerSecond: 800, meanRunning: 8 }, // 100 per request
    { name: 'b', tokensPerSecond: 400, meanRunning: 4 }, // 100: less work, not slower
    { name: 'c', tokensPerSecond: 550, meanRunning: 8 }, // 68.75 < 70
    { name: 'd', tokensPerSecond: 570, meanRunning: 8 }, // 71.25 >= 70
  ];
  // median of 100, 100, 68.75, 71.25 is 85.6: threshold 59.9, so only a much slower one is marked.
  assert.deepEqual([...findStragglers(fleet)], []);
  const withSlow = [...fleet, { name: 'e', tokensPerSecond: 100, meanRunning: 8 }];
  // median of 100, 100, 71.25, 68.75, 12.5 is 71.25: threshold 49.9.
  assert.deepEqual([...findStragglers(withSlow)], ['e']);
  const three = [
    { name: 'a', tokensPerSecond: 1000, meanRunning: 10 },
    { name: 'b', tokensPerSecond: 680, meanRunning: 10 },
    { name: 'c', tokensPerSecond: 980, meanRunning: 10 },
  ];
  assert.deepEqual([...findStragglers(three)], ['b'], '68 per request < 0.7 x 98');
});

test('straggler: idle or nearly idle backends do not count, and one backend alone is never marked', () => {
  assert.deepEqual(
    [
      ...findStragglers([
        { name: 'busy', tokensPerSecond: 1000, meanRunning: 10 },
        { name: 'idle', tokensPerSecond: 0, meanRunning: 0 },
        { name: 'one-short-request', tokensPerSecond: 1, meanRunning: 0.2 },
        { name: 'unknown', tokensPerSecond: 0, meanRunning: null },
      ]),
    ],
    [],
  );
  assert.deepEqual([...findStragglers([{ name: 'alone', tokensPerSecond: 1, meanRunning: 5 }])], []);
});

test('straggler: a backend that holds requests and generates nothing is marked', () => {
  const stragglers = findStragglers([
    { name: 'a', tokensPerSecond: 500, meanRunning: 5 },
    { name: 'dead', tokensPerSecond: 0, meanRunning: 5 },
  ]);
  assert.deepEqual([...stragglers], ['dead']);
});

function record(fields: Partial<RequestRecord>): RequestRecord {
  return {
    backend: 'gpu0',
    method: 'POST',
    path: '/v1/chat/completions',
    status: 200,
    durationMs: 10,
    ttfbMs: 1,
    queueMs: 0,
    priorityClass: null,
    bytes: 100,
    retries: 0,
    resumes: 0,
    backends: [],
    outcome: 'ok',
    completionTokens: null,
    streamed: false,
    ...fields,
  };
}

function setup() {
  let now = T0;
  const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 60_000, defaultCap: 0, now: () => now });
  for (const name of ['gpu0', 'gpu1'])
    registry.add({ url: `http://127.0.0.1:1/${name}`, name, kind: 'sglang', log: null });
  const events = new ProxyEventBus();
  let waiting = 0;
  const stats = new ServingStats({ registry, events, waiting: () => waiting, now: () => now });
  stats.start();
  return {
    registry,
    events,
    stats,
    advance: (ms: number) => {
      now += ms;
    },
    setWaiting: (n: number) => {
      waiting = n;
    },
    report: (name: string, running: number, generationTokens: number | null, tokenUsage = 0.5) => {
      registry.reportLoad(registry.get(name)!, { running, queued: 1, tokenUsage, maxRunning: null, generationTokens });
    },
  };
}

test('stats: requests/s, usage tokens/s, retries and errors over the last minute, per backend and fleet', (t) => {
  const { events, stats, advance, setWaiting } = setup();
  t.after(() => stats.stop());
  for (let i = 0; i < 20; i++) {
    events.emit('request', record({ completionTokens: 50, retries: i === 0 ? 2 : 0, resumes: i === 1 ? 1 : 0 }));
    advance(500);
  }
  events.emit('request', record({ backend: 'gpu1', status: 502, outcome: 'upstream_error' }));
  events.emit('request', record({ backend: null, status: 503, outcome: 'queue_timeout' }));
  events.emit('request', record({ status: 499, outcome: 'client_abort' }));
  setWaiting(3);
  const view = stats.view(); // 10 s after the start
  assert.equal(view.fleet.window_seconds, 60);
  assert.equal(view.fleet.requests_per_second, 2.3, '23 requests in 10 s');
  assert.equal(view.backends.gpu0.requests_per_second, 2.1);
  assert.equal(view.backends.gpu0.tokens_per_second, 100, '1000 usage tokens in 10 s');
  assert.equal(view.backends.gpu1.requests_per_second, 0.1);
  assert.equal(view.fleet.tokens_per_second, 100);
  assert.equal(view.fleet.retries, 2);
  assert.equal(view.fleet.resumes, 1, 'a stream continued on another backend counts beside the retries');
  assert.equal(view.fleet.errors, 2, 'the 502 and the queue timeout; a client that left is no error');
  assert.equal(view.fleet.waiting, 3);
  assert.equal(view.backends.gpu0.running, null, 'nothing reported');

  advance(60_000);
  const later = stats.view();
  assert.equal(later.fleet.requests_per_second, 0);
  assert.equal(later.fleet.retries, 0);
  assert.equal(later.fleet.resumes, 0);
  assert.equal(later.fleet.errors, 0);
  assert.equal(later.backends.gpu0.tokens_per_second, 0);
});

test('stats: tokens/s from the reported generation counter, reported load, and a straggler mark', (t) => {
  const { stats, advance, report } = setup();
  t.after(() => stats.stop());
  // gpu0 runs 4 requests at 100 tokens/s each; gpu1 runs 4 at 20 tokens/s each.
  let counter0 = 1_000_000; // history from before fleetgate started: not this minute's work
  let counter1 = 5_000;
  for (let s = 0; s <= 20; s++) {
    if (s > 0) advance(1000);
    report('gpu0', 4, counter0, 0.42);
    report('gpu1', 4, counter1);
    stats.sample();
    counter0 += 400;
    counter1 += 80;
  }
  const view = stats.view();
  assert.equal(view.backends.gpu0.tokens_per_second, 400);
  assert.equal(view.backends.gpu1.tokens_per_second, 80);
  assert.equal(view.fleet.tokens_per_second, 480);
  assert.equal(view.backends.gpu0.tokens_per_second_per_request, 100);
  assert.equal(view.backends.gpu0.running, 4);
  assert.equal(view.backends.gpu0.queued, 1);
  assert.equal(view.backends.gpu0.kv_cache_usage, 0.42);
  assert.equal(view.backends.gpu0.straggler, false);
  assert.equal(view.backends.gpu1.straggler, true);

  // gpu1 restarts: its counter starts again from 0; the drop is not negative work.
  report('gpu1', 4, 70);
  stats.sample();
  assert.ok(stats.view().backends.gpu1.tokens_per_second > 80);
});

test('stats: a removed backend leaves the view, and a late record for it is not counted', (t) => {
  const { registry, events, stats } = setup();
  t.after(() => stats.stop());
  registry.remove('gpu1');
  assert.deepEqual(Object.keys(stats.view().backends), ['gpu0']);
  events.emit('request', record({ backend: 'gpu1' }));
  assert.deepEqual(Object.keys(stats.view().backends), ['gpu0']);
  assert.equal(stats.view().fleet.requests_per_second, 1, 'still a request the fleet answered');
});

test('errors are what fleetgate or a backend failed, not clients that left', () => {
  assert.equal(isServingError(record({})), false);
  assert.equal(isServingError(record({ status: 500 })), true);
  assert.equal(isServingError(record({ status: 400 })), false);
  assert.equal(isServingError(record({ outcome: 'queue_full', status: 503 })), true);
  assert.equal(isServingError(record({ outcome: 'client_abort', status: 502 })), false);
});

test("stats: each backend's median time to first token and inter-token gap, and its thinking share, over the minute; null without streams", (t) => {
  let now = T0;
  const registry = new FleetRegistry({ rise: 1, fall: 1, stallAfter: 60_000, defaultCap: 0, now: () => now });
  for (const name of ['gpu0', 'gpu1'])
    registry.add({ url: `http://127.0.0.1:1/${name}`, name, kind: 'sglang', log: null });
  const bounds = [0.01, 0.02, 0.05, 0.1, 0.5];
  const series = new Map(
    ['gpu0', 'gpu1'].map((name) => [
      name,
      {
        firstToken: new HistogramSeries(bounds),
        interToken: new HistogramSeries(bounds),
        outputTokens: new HistogramSeries(bounds),
        reasoningTokens: new HistogramSeries(bounds),
      },
    ]),
  );
  const stats = new ServingStats({
    registry,
    events: new ProxyEventBus(),
    waiting: () => 0,
    now: () => now,
    latency: { latencyOf: (name) => series.get(name) },
  });
  t.after(() => stats.stop());
  stats.sample();
  const gpu0 = series.get('gpu0') as { firstToken: HistogramSeries; interToken: HistogramSeries };
  const gpu1 = series.get('gpu1') as { outputTokens: HistogramSeries; reasoningTokens: HistogramSeries };
  // gpu1 answered 3 requests in the minute, 2 of them thinking: 300 output tokens, 180 reasoning.
  for (const [output, reasoning] of [
    [100, 70],
    [100, 110],
    [100, 0],
  ]) {
    gpu1.outputTokens.observe(output);
    if (reasoning > 0) gpu1.reasoningTokens.observe(reasoning);
  }
  for (let i = 0; i < 10; i++) {
    gpu0.firstToken.observe(0.3);
    gpu0.interToken.observe(0.015);
  }
  now += 1000;
  stats.sample();
  const view = stats.view();
  assert.ok(
    (view.backends.gpu0.ttft_p50_seconds as number) > 0.1 && (view.backends.gpu0.ttft_p50_seconds as number) <= 0.5,
  );
  assert.ok(
    (view.backends.gpu0.inter_token_p50_seconds as number) > 0.01 &&
      (view.backends.gpu0.inter_token_p50_seconds as number) <= 0.02,
  );
  assert.equal(view.backends.gpu1.ttft_p50_seconds, null);
  assert.equal(view.backends.gpu1.inter_token_p50_seconds, null);
  assert.equal(view.backends.gpu1.thinking_share, 0.6, 'reasoning tokens over output tokens');
  assert.equal(view.backends.gpu0.thinking_share, null, 'no answer ended on it');
  // A minute later with nothing new, the share has left the window.
  for (let s = 2; s <= 62; s++) {
    now += 1000;
    stats.sample();
  }
  assert.equal(stats.view().backends.gpu1.thinking_share, null);
});
