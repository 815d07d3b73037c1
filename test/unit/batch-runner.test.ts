import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import type { BatchRequest } from '../../src/batch/batch-input.js';
import { runBatch } from '../../src/batch/batch-runner.js';
import type { BatchOutputRecord } from '../../src/batch/output-ledger.js';

const IN_FLIGHT = 200;

function requests(count: number): BatchRequest[] {
  return Array.from({ length: count }, (_, i) => ({
    custom_id: `req-${i}`,
    url: '/v1/chat/completions',
    body: Buffer.from('{"messages":[]}'),
    line: i + 1,
  }));
}

test('requests in flight listen on signals of their own: the run signal holds a few listeners, not one per request; aborting it aborts each', async (t) => {
  const run = new AbortController();
  // A failed assertion must not leave the run polling for room forever.
  t.after(() => run.abort());
  const signals: AbortSignal[] = [];
  let allStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    allStarted = resolve;
  });
  const output: BatchOutputRecord[] = [];
  const done = runBatch(requests(IN_FLIGHT), {
    limit: () => IN_FLIGHT,
    maxAttempts: 1,
    output: { append: (record) => output.push(record) },
    errors: { append: (record) => output.push(record) },
    signal: run.signal,
    send: (_request, signal) => {
      signals.push(signal);
      if (signals.length === IN_FLIGHT) allStarted();
      // As undici does: a listener on the signal it is given, taken off when the request settles.
      return new Promise((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    },
  });
  await started;
  assert.equal(new Set(signals).size, IN_FLIGHT, 'each request has its own signal');
  // The run's own: one for the requests, one for its wait for room.
  assert.ok(
    getEventListeners(run.signal, 'abort').length <= 2,
    `the run signal holds ${getEventListeners(run.signal, 'abort').length} listeners with ${IN_FLIGHT} requests in flight`,
  );
  run.abort();
  const summary = await done;
  assert.ok(
    signals.every((signal) => signal.aborted),
    'every request in flight is aborted with the run',
  );
  assert.deepEqual(summary, { completed: 0, failed: 0, abandoned: IN_FLIGHT });
  assert.equal(output.length, 0, 'nothing abandoned is written');
  assert.equal(getEventListeners(run.signal, 'abort').length, 0, 'the ended run leaves no listener behind');
});

test('a request that settles gives its signal back: nothing is aborted when a finished run signal aborts later', async () => {
  const run = new AbortController();
  const signals: AbortSignal[] = [];
  const output: BatchOutputRecord[] = [];
  const summary = await runBatch(requests(5), {
    limit: () => 5,
    maxAttempts: 1,
    output: { append: (record) => output.push(record) },
    errors: { append: (record) => output.push(record) },
    signal: run.signal,
    send: async (request, signal) => {
      signals.push(signal);
      return { kind: 'answer', status: 200, requestId: request.custom_id, body: {}, tokens: 1 };
    },
  });
  assert.deepEqual(summary, { completed: 5, failed: 0, abandoned: 0 });
  run.abort();
  assert.ok(
    signals.every((signal) => !signal.aborted),
    'settled requests are not aborted',
  );
});
