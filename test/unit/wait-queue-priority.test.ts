import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendConfig } from '../../src/config/types.js';
import { FleetRegistry } from '../../src/fleet/registry.js';
import { createPolicy } from '../../src/routing/policies/create-policy.js';
import { AdmissionError, type Lease, type QueueClass } from '../../src/routing/queue/wait-queue.js';
import { queueOn } from '../helpers/wait-queue.js';

const OK = { ok: true, reachable: true, reason: null };

function cls(name: string, extra: Partial<QueueClass> = {}): QueueClass {
  return { name, maxWaiting: 100, timeoutMs: 0, timeoutOnlyWhenNoneReady: false, ...extra };
}

/** One ready backend with a cap of `cap`, classes interactive > batch, and a clock the test moves. */
function setup(
  opts: { cap?: number; classes?: QueueClass[]; maxStarvationMs?: number; reserve?: number; maxWaiting?: number } = {},
) {
  const registry = new FleetRegistry({ rise: 1, fall: 3, stallAfter: 60_000, defaultCap: opts.cap ?? 1 });
  const config: BackendConfig = { url: 'http://127.0.0.1:40000', name: 'b0', kind: 'sglang', log: null };
  const backend = registry.add(config);
  registry.apply(backend, { type: 'probe', result: OK });
  const clock = { now: 0 };
  const waited: Array<[string, number]> = [];
  const queue = queueOn(registry, {
    maxWaiting: opts.maxWaiting ?? 1000,
    classes: opts.classes ?? [cls('interactive'), cls('batch')],
    defaultClass: 'batch',
    maxStarvationMs: opts.maxStarvationMs ?? 0,
    reserve: opts.reserve ?? 0,
    now: () => clock.now,
    policy: createPolicy('least-loaded'),
  });
  queue.observeWaits((name, ms) => waited.push([name, ms]));
  /** Queues a request and records the order in which requests get their lease. */
  const served: string[] = [];
  const leases = new Map<string, Lease>();
  const enqueue = (label: string, priority: string, apiKey: string | null = null, signal?: AbortSignal) => {
    const admitted = queue.acquire(signal, undefined, { priority, apiKey });
    assert.ok(admitted instanceof Promise, `${label} waits`);
    const tracked = admitted.then((lease) => {
      served.push(label);
      leases.set(label, lease);
      return lease;
    });
    tracked.catch(() => {});
    return tracked;
  };
  /** Releases `lease` and returns the lease of whoever the queue served with the freed slot. */
  const handOver = async (lease: Lease): Promise<Lease> => {
    const before = served.length;
    lease.release();
    await new Promise(setImmediate);
    assert.equal(served.length, before + 1, 'one waiter served per freed slot');
    return leases.get(served[before]) as Lease;
  };
  return { registry, backend, queue, clock, served, waited, enqueue, handOver };
}

/** Serves the queue one slot at a time: releases the held lease, lets the next waiter take it. */
async function serveAll(first: Lease, pending: Promise<Lease>[]): Promise<void> {
  let held = first;
  for (const next of pending) {
    held.release();
    held = await next;
  }
  held.release();
}

describe('wait queue: priority classes', () => {
  test('strict priority: a freed slot goes to the highest class with a waiter, whatever arrived first', async () => {
    const { queue, served, enqueue, handOver } = setup();
    const held = queue.acquire(undefined, undefined, { priority: 'batch', apiKey: null }) as Lease;
    const pending = [
      enqueue('batch-1', 'batch'),
      enqueue('batch-2', 'batch'),
      enqueue('interactive-1', 'interactive'),
      enqueue('batch-3', 'batch'),
      enqueue('interactive-2', 'interactive'),
    ];
    assert.equal(queue.waitingIn('batch'), 3);
    assert.equal(queue.waitingIn('interactive'), 2);
    let current = held;
    for (let i = 0; i < pending.length; i++) current = await handOver(current);
    current.release();
    assert.deepEqual(served, ['interactive-1', 'interactive-2', 'batch-1', 'batch-2', 'batch-3']);
  });

  test('a request without traits is of the default class; a new high-class request skips lower waiters', async () => {
    const { queue, served, enqueue } = setup();
    const held = queue.acquire() as Lease;
    const batch = queue.acquire() as Promise<Lease>;
    assert.equal(queue.waitingIn('batch'), 1, 'no traits: the default class');
    const interactive = enqueue('interactive', 'interactive');
    held.release();
    const lease = await interactive;
    assert.deepEqual(served, ['interactive']);
    assert.equal(queue.waitingIn('batch'), 1);
    await serveAll(lease, [batch]);
  });

  test('promotion: a batch request that waited longer than max_starvation goes before later interactive ones', async () => {
    const { queue, clock, served, enqueue, handOver } = setup({ maxStarvationMs: 10_000 });
    const held = queue.acquire() as Lease;
    enqueue('batch-old', 'batch');
    clock.now = 5_000;
    enqueue('batch-young', 'batch');
    enqueue('interactive-1', 'interactive');
    let current = await handOver(held);
    assert.deepEqual(served, ['interactive-1'], 'not starved yet: strict priority');
    clock.now = 12_000;
    enqueue('interactive-2', 'interactive');
    current = await handOver(current);
    assert.deepEqual(
      served,
      ['interactive-1', 'batch-old'],
      'starved 12 s: promoted above interactive-2 (arrived at 12 s > 0 + 10 s)',
    );
    clock.now = 16_000;
    enqueue('interactive-3', 'interactive');
    current = await handOver(current);
    current = await handOver(current);
    current = await handOver(current);
    current.release();
    // batch-young is starved too (11 s at 16 s) and counts as arriving at 15 s: between the two.
    assert.deepEqual(served.slice(2), ['interactive-2', 'batch-young', 'interactive-3']);
  });

  test('promotion is bounded: a starved request does not pass interactive ones that came before it would count as arrived', async () => {
    const { queue, clock, served, enqueue, handOver } = setup({ maxStarvationMs: 10_000 });
    const held = queue.acquire() as Lease;
    enqueue('batch', 'batch');
    clock.now = 3_000;
    enqueue('interactive', 'interactive');
    clock.now = 20_000;
    let current = await handOver(held);
    current = await handOver(current);
    current.release();
    assert.deepEqual(
      served,
      ['interactive', 'batch'],
      'interactive (3 s) is before the batch request promoted as of 10 s',
    );
  });

  test('without max_starvation nothing is promoted', async () => {
    const { queue, clock, served, enqueue } = setup({ maxStarvationMs: 0 });
    const held = queue.acquire() as Lease;
    const old = enqueue('batch-old', 'batch');
    clock.now = 1e9;
    const i1 = enqueue('interactive-1', 'interactive');
    held.release();
    const l1 = await i1;
    assert.deepEqual(served, ['interactive-1']);
    await serveAll(l1, [old]);
  });

  test('per-class max_waiting: a full class is refused while another class still queues', async () => {
    const { queue, enqueue } = setup({ classes: [cls('interactive', { maxWaiting: 1 }), cls('batch')] });
    const held = queue.acquire() as Lease;
    const first = enqueue('interactive-1', 'interactive');
    await assert.rejects(
      queue.acquire(undefined, undefined, { priority: 'interactive', apiKey: null }) as Promise<Lease>,
      (e: unknown) =>
        e instanceof AdmissionError &&
        e.reason === 'queue_full' &&
        e.className === 'interactive' &&
        !e.fleetUnavailable &&
        /class "interactive"/.test(e.message),
    );
    const batch = enqueue('batch-1', 'batch');
    assert.equal(queue.rejectedIn('interactive').queue_full, 1);
    assert.equal(queue.rejectedIn('batch').queue_full, 0);
    await serveAll(held, [first, batch]);
  });

  test('the total max_waiting bounds every class together', async () => {
    const { queue, enqueue } = setup({ maxWaiting: 2 });
    const held = queue.acquire() as Lease;
    const waiting = [enqueue('b1', 'batch'), enqueue('b2', 'batch')];
    await assert.rejects(
      queue.acquire(undefined, undefined, { priority: 'interactive', apiKey: null }) as Promise<Lease>,
      (e: unknown) => e instanceof AdmissionError && e.reason === 'queue_full' && e.className === 'interactive',
    );
    await serveAll(held, waiting);
  });

  test('per-class timeout: an interactive wait is bounded while batch waits on', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { queue, enqueue } = setup({
      classes: [
        cls('interactive', { timeoutMs: 2_000 }),
        cls('batch', { timeoutMs: 60_000, timeoutOnlyWhenNoneReady: true }),
      ],
    });
    const held = queue.acquire() as Lease;
    const batch = enqueue('batch', 'batch');
    const interactive = enqueue('interactive', 'interactive');
    t.mock.timers.tick(2_000);
    await assert.rejects(
      interactive,
      (e: unknown) =>
        e instanceof AdmissionError && e.reason === 'timeout' && e.className === 'interactive' && !e.fleetUnavailable,
    );
    t.mock.timers.tick(120_000);
    assert.equal(queue.waitingIn('batch'), 1, 'batch times out only while no backend is ready');
    assert.equal(queue.rejectedIn('interactive').timeout, 1);
    assert.equal(queue.rejectedIn('batch').timeout, 0);
    await serveAll(held, [batch]);
  });

  test('round-robin between API keys within a class: one key with many waiters does not hold back another', async () => {
    const { queue, served, enqueue, handOver } = setup();
    const held = queue.acquire() as Lease;
    const pending = [
      enqueue('a1', 'batch', 'key-a'),
      enqueue('a2', 'batch', 'key-a'),
      enqueue('a3', 'batch', 'key-a'),
      enqueue('a4', 'batch', 'key-a'),
      enqueue('b1', 'batch', 'key-b'),
      enqueue('b2', 'batch', 'key-b'),
      enqueue('n1', 'batch', null),
    ];
    let current = held;
    for (let i = 0; i < pending.length; i++) current = await handOver(current);
    current.release();
    assert.deepEqual(served, ['a1', 'b1', 'n1', 'a2', 'b2', 'a3', 'a4']);
  });

  test('a client that leaves frees its place: the next waiter moves up and the count drops', async () => {
    const { queue, served, enqueue, backend } = setup();
    const held = queue.acquire() as Lease;
    const leaving = new AbortController();
    const gone = enqueue('gone', 'interactive', null, leaving.signal);
    const stays = enqueue('stays', 'batch');
    leaving.abort();
    await assert.rejects(gone, (e: unknown) => e instanceof AdmissionError && e.reason === 'aborted');
    assert.equal(queue.waiting, 1);
    assert.equal(queue.waitingIn('interactive'), 0);
    held.release();
    const lease = await stays;
    assert.deepEqual(served, ['stays']);
    assert.equal(backend.inflight, 1, 'only the remaining waiter took a slot');
    lease.release();
    assert.equal(backend.inflight, 0);
  });

  test('reserve: slots above the cap that the lowest class may not fill and the highest class may', async () => {
    const { queue, backend, enqueue } = setup({ cap: 2, reserve: 1 });
    const b1 = queue.acquire() as Lease;
    const b2 = queue.acquire() as Lease;
    assert.equal(backend.inflight, 2, 'batch fills the whole cap');
    const b3 = enqueue('batch-3', 'batch');
    assert.equal(queue.waitingIn('batch'), 1, 'the slot above the cap is reserved');
    const interactive = queue.acquire(undefined, undefined, { priority: 'interactive', apiKey: null });
    assert.ok(!(interactive instanceof Promise), 'the interactive request takes the reserved slot at once');
    assert.equal(backend.inflight, 3);
    const second = enqueue('interactive-2', 'interactive');
    assert.equal(queue.waitingIn('interactive'), 1, 'no more than `reserve` above the cap');
    interactive.release();
    (await second).release();
    assert.equal(queue.waitingIn('batch'), 1, 'a freed reserved slot still is not for batch');
    b1.release();
    (await b3).release();
    b2.release();
    assert.equal(backend.inflight, 0);
  });

  test('reserve with a single class: nothing above the cap', () => {
    const { queue, backend } = setup({ cap: 2, reserve: 1, classes: [cls('batch')] });
    queue.acquire();
    queue.acquire();
    assert.ok(queue.acquire() instanceof Promise, 'the third waits');
    assert.equal(backend.inflight, 2);
  });

  test('observeWaits reports the class and how long a served waiter waited', async () => {
    const { queue, clock, waited, enqueue } = setup();
    const held = queue.acquire() as Lease;
    const pending = enqueue('i', 'interactive');
    clock.now = 1_500;
    held.release();
    (await pending).release();
    assert.deepEqual(waited, [['interactive', 1_500]]);
  });
});
