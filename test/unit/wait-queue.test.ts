import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendConfig } from '../../src/config/types.js';
import { validateConfig } from '../../src/config/validate.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { createRouting } from '../../src/routing/fleet-routing.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import { AdmissionError, type Lease } from '../../src/routing/queue/wait-queue.js';
import { queueOn } from '../helpers/wait-queue.js';

const OK = { ok: true, reachable: true, reason: null };

function setup({ backends = 2, cap = 0, maxWaiting = 10, timeoutMs = 5_000, timeoutOnlyWhenNoneReady = false } = {}) {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: cap });
  const list = Array.from({ length: backends }, (_, i) => {
    const config: BackendConfig = { url: `http://127.0.0.1:${40000 + i}`, name: `b${i}`, kind: 'sglang', log: null };
    return registry.add(config);
  });
  const queue = queueOn(registry, {
    maxWaiting,
    timeoutMs,
    timeoutOnlyWhenNoneReady,
    policy: createPolicy('least-loaded'),
  });
  const makeReady = (i: number) => registry.apply(list[i], { type: 'probe', result: OK });
  return { registry, list, queue, makeReady };
}

describe('wait queue', () => {
  test('a ready backend with a free slot gives a lease at once, counting in-flight', () => {
    const { queue, makeReady, list } = setup();
    makeReady(0);
    const lease = queue.acquire() as Lease;
    assert.equal(lease.backend, list[0]);
    assert.equal(list[0].inflight, 1);
    lease.release();
    lease.release();
    assert.equal(list[0].inflight, 0, 'release is idempotent');
  });

  test('nothing ready: the request waits and is served when a backend turns ready', async () => {
    const { queue, makeReady, list } = setup();
    const pending = queue.acquire() as Promise<Lease>;
    assert.equal(queue.waiting, 1);
    makeReady(1);
    const lease = await pending;
    assert.equal(lease.backend, list[1]);
    assert.equal(queue.waiting, 0);
  });

  test('times out with reason "timeout" and leaves the queue', async () => {
    const { queue } = setup({ timeoutMs: 20 });
    await assert.rejects(
      queue.acquire() as Promise<Lease>,
      (e: unknown) => e instanceof AdmissionError && e.reason === 'timeout',
    );
    assert.equal(queue.waiting, 0);
    assert.equal(queue.rejected.timeout, 1);
  });

  test('a full queue rejects at once with "queue_full"', async () => {
    const { queue } = setup({ maxWaiting: 1 });
    const first = queue.acquire() as Promise<Lease>;
    await assert.rejects(
      queue.acquire() as Promise<Lease>,
      (e: unknown) => e instanceof AdmissionError && e.reason === 'queue_full',
    );
    queue.close();
    await assert.rejects(first);
  });

  test('close() fails every waiter as a shutdown and counts them', async () => {
    const { queue } = setup();
    const waiters = [queue.acquire() as Promise<Lease>, queue.acquire() as Promise<Lease>];
    queue.close();
    for (const waiter of waiters)
      await assert.rejects(waiter, (e: unknown) => e instanceof AdmissionError && e.reason === 'shutdown');
    assert.equal(queue.waiting, 0);
    assert.equal(queue.rejected.shutdown, 2);
    assert.equal(queue.rejected.aborted, 0);
  });

  test('an aborted waiter leaves the queue', async () => {
    const { queue, makeReady, list } = setup();
    const controller = new AbortController();
    const pending = queue.acquire(controller.signal) as Promise<Lease>;
    controller.abort();
    await assert.rejects(pending, (e: unknown) => e instanceof AdmissionError && e.reason === 'aborted');
    assert.equal(queue.waiting, 0);
    makeReady(0);
    assert.equal(list[0].inflight, 0, 'no slot was taken for the departed client');
  });

  test('a client already gone gets no slot even when one is free', async () => {
    const { queue, makeReady, list } = setup();
    makeReady(0);
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(
      Promise.resolve(queue.acquire(controller.signal)),
      (e: unknown) => e instanceof AdmissionError && e.reason === 'aborted',
    );
    assert.equal(list[0].inflight, 0);
  });

  test('with a cap, requests wait for a free slot and go to whichever backend frees first', async () => {
    const { queue, makeReady, list } = setup({ cap: 1 });
    makeReady(0);
    makeReady(1);
    const a = queue.acquire() as Lease;
    const b = queue.acquire() as Lease;
    assert.notEqual(a.backend, b.backend);
    const waiting = queue.acquire() as Promise<Lease>;
    assert.equal(queue.waiting, 1);
    b.release();
    const c = await waiting;
    assert.equal(c.backend, b.backend);
    for (const backend of list) assert.ok(backend.inflight <= 1);
  });

  test('a cap that opens (setCap) serves waiting requests at once; one that closes does not', async () => {
    const { queue, registry, makeReady, list } = setup({ backends: 1, cap: 1 });
    makeReady(0);
    const held = queue.acquire() as Lease;
    const waiting = queue.acquire() as Promise<Lease>;
    registry.setCap(list[0], 1);
    assert.equal(queue.waiting, 1, 'the same cap admits nothing more');
    registry.setCap(list[0], 2);
    assert.equal((await waiting).backend, list[0]);
    assert.equal(list[0].inflight, 2);
    held.release();
  });

  test('timeoutOnlyWhenNoneReady: a wait for a capped but ready backend is not timed out', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { queue, makeReady, list } = setup({ backends: 1, cap: 1, timeoutMs: 1_000, timeoutOnlyWhenNoneReady: true });
    makeReady(0);
    const held = queue.acquire() as Lease;
    const waiting = queue.acquire() as Promise<Lease>;
    t.mock.timers.tick(10_000);
    assert.equal(queue.waiting, 1, 'still waiting after 10 timeouts: the backend is ready, only full');
    held.release();
    assert.equal((await waiting).backend, list[0]);
  });

  test('timeoutOnlyWhenNoneReady: with nothing ready the timeout still applies', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { queue } = setup({ timeoutMs: 1_000, timeoutOnlyWhenNoneReady: true });
    const waiting = queue.acquire() as Promise<Lease>;
    t.mock.timers.tick(1_000);
    await assert.rejects(waiting, (e: unknown) => e instanceof AdmissionError && e.reason === 'timeout');
    assert.equal(queue.waiting, 0);
  });

  test('a backend that already failed this request is avoided while another is free', () => {
    const { queue, makeReady, list } = setup();
    makeReady(0);
    makeReady(1);
    for (let i = 0; i < 4; i++) {
      const lease = queue.acquire(undefined, new Set([list[0]])) as Lease;
      assert.equal(lease.backend, list[1]);
      lease.release();
    }
  });

  test('a removed backend is dropped once its last lease is released', () => {
    const { queue, makeReady, registry } = setup();
    makeReady(0);
    const lease = queue.acquire() as Lease;
    registry.remove('b0');
    assert.ok(registry.get('b0'), 'still there while a request is in flight');
    assert.equal(registry.ready.length, 0, 'but receives nothing new');
    lease.release();
    assert.equal(registry.get('b0'), undefined);
  });
});

describe('the drain on a request end (routing as createRouting wires it)', () => {
  /** One backend with a cap of 1, routing built as app.ts builds it; `drains` counts the queue's drains. */
  function routed() {
    const config = validateConfig({ backends: ['http://127.0.0.1:40100'] }, 'test');
    const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: 1 });
    const routing = createRouting(config, registry);
    const backend = registry.add({ url: 'http://127.0.0.1:40100', name: 'b0', kind: 'sglang', log: null });
    registry.apply(backend, { type: 'probe', result: OK });
    const queue = routing.queue.of(null);
    let drains = 0;
    const drain = queue.drain.bind(queue);
    queue.drain = () => {
      drains++;
      drain();
    };
    return { backend, queue, drains: () => drains };
  }

  test('a freed slot goes to a waiter as the lease is released', async () => {
    const { backend, queue } = routed();
    const running = queue.acquire() as Lease;
    const waiting = queue.acquire() as Promise<Lease>;
    assert.ok(waiting instanceof Promise, 'the cap of 1 is taken: the second request waits');
    assert.equal(queue.waiting, 1);
    running.release();
    assert.equal(queue.waiting, 0, 'served in the release itself, not on some later event');
    assert.equal((await waiting).backend, backend);
    assert.equal(backend.inflight, 1);
  });

  test('one release drains the queues once (through the registry), not twice', () => {
    const { queue, drains } = routed();
    const running = queue.acquire() as Lease;
    const before = drains();
    running.release();
    assert.equal(drains() - before, 1);
    running.release();
    assert.equal(drains() - before, 1, 'a second release of the same lease is a no-op');
  });
});
