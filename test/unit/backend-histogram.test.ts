import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { BackendHistogram } from '../../src/metrics/backend-histogram.js';
import { LLM_LATENCY_BUCKETS } from '../../src/metrics/definitions.js';

const family = { name: 'x_duration_seconds', help: 'Time.' };

test("renders exactly what prom-client's Histogram renders for the same observations", async () => {
  const ours = new Registry();
  const theirs = new Registry();
  const histogram = new BackendHistogram({ ...family, buckets: LLM_LATENCY_BUCKETS, registers: [ours] });
  const reference = new Histogram({
    ...family,
    labelNames: ['backend'] as const,
    buckets: [...LLM_LATENCY_BUCKETS],
    registers: [theirs],
  });
  // On a bound, between bounds, below the first, above the last, zero.
  const values = [0, 0.001, 0.005, 0.0051, 0.3, 1, 2.5, 7, 1800, 1800.5, 5000];
  for (const [i, value] of values.entries()) {
    const backend = i % 3 === 0 ? 'gpu-a' : 'gpu"b';
    histogram.series(backend).observe(value);
    reference.labels({ backend }).observe(value);
  }
  histogram.series('idle');
  reference.zero({ backend: 'idle' });
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.match(await ours.metrics(), /x_duration_seconds_bucket\{le="0.01",backend="gpu-a"\} 2\n/);
});

test('a removed series is no longer exported; a non-finite value is refused', async () => {
  const registry = new Registry();
  const histogram = new BackendHistogram({ ...family, buckets: [1, 2], registers: [registry] });
  histogram.series('gone').observe(1);
  histogram.series('kept').observe(3);
  histogram.remove('gone');
  const text = await registry.metrics();
  assert.doesNotMatch(text, /gone/);
  assert.match(text, /x_duration_seconds_bucket\{le="\+Inf",backend="kept"\} 1\n/);
  assert.match(text, /x_duration_seconds_bucket\{le="2",backend="kept"\} 0\n/);
  assert.throws(() => histogram.series('kept').observe(Number.NaN), /not a valid number/);
});

test('observe(value, n) counts n observations of value, as n calls would (values exact in binary)', async () => {
  const once = new Registry();
  const each = new Registry();
  const a = new BackendHistogram({ ...family, buckets: LLM_LATENCY_BUCKETS, registers: [once] });
  const b = new BackendHistogram({ ...family, buckets: LLM_LATENCY_BUCKETS, registers: [each] });
  for (const [value, n] of [
    [0.0078125, 3],
    [0.25, 1],
    [9000, 2],
  ]) {
    a.series('gpu0').observe(value, n);
    for (let i = 0; i < n; i++) b.series('gpu0').observe(value);
  }
  assert.equal(await once.metrics(), await each.metrics());
  assert.match(await once.metrics(), /x_duration_seconds_count\{backend="gpu0"\} 6\n/);
});
