/** The restart schedule of a launched engine, on an injected clock: backoff, reset after stable_after, max_restarts. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RestartPolicy } from '../../src/launch/restart-policy.js';
import { restartTrigger } from '../../src/launch/restart-triggers.js';

function policy(overrides: Partial<ConstructorParameters<typeof RestartPolicy>[0]> = {}) {
  const clock = { now: 0 };
  const p = new RestartPolicy({
    backoffMs: 10_000,
    backoffMaxMs: 300_000,
    stableAfterMs: 600_000,
    maxRestarts: 10,
    now: () => clock.now,
    ...overrides,
  });
  return { p, clock };
}

test('backoff doubles from restart_backoff and stops growing at restart_backoff_max', () => {
  const { p } = policy();
  const delays = Array.from({ length: 8 }, () => {
    const decision = p.next();
    assert.ok(decision.restart);
    return decision.delayMs / 1000;
  });
  assert.deepEqual(delays, [10, 20, 40, 80, 160, 300, 300, 300]);
});

test('max_restarts in a row stops the loop; the next decision is to give up with the count', () => {
  const { p } = policy({ maxRestarts: 3 });
  assert.deepEqual(
    [p.next(), p.next(), p.next()].map((d) => d.restart && d.attempt),
    [1, 2, 3],
  );
  assert.deepEqual(p.next(), { restart: false, attempts: 3 });
  assert.deepEqual(p.next(), { restart: false, attempts: 3 }, 'stays given up');
});

test('max_restarts 0 never restarts', () => {
  const { p } = policy({ maxRestarts: 0 });
  assert.deepEqual(p.next(), { restart: false, attempts: 0 });
});

test('ready for stable_after resets the series; a shorter ready period does not', () => {
  const { p, clock } = policy({ maxRestarts: 3 });
  p.next();
  p.next();
  clock.now = 1_000;
  p.ready();
  clock.now = 1_000 + 599_999;
  let decision = p.next();
  assert.ok(decision.restart);
  assert.equal(decision.attempt, 3, 'ready 1 ms short of stable_after: still the same series');
  assert.equal(decision.delayMs, 40_000);

  p.ready();
  clock.now += 600_000;
  decision = p.next();
  assert.ok(decision.restart);
  assert.equal(decision.attempt, 1, 'stable for stable_after: a fresh series');
  assert.equal(decision.delayMs, 10_000);
});

test('ready periods interrupted by unhealthy spells do not add up to stable', () => {
  const { p, clock } = policy({ stableAfterMs: 100 });
  p.next();
  p.next();
  for (let i = 0; i < 3; i++) {
    p.ready();
    clock.now += 60;
    p.notReady();
    clock.now += 10;
  }
  const decision = p.next();
  assert.ok(decision.restart);
  assert.equal(decision.attempt, 3);
});

test('an operator restart (reset) starts a fresh series, even after giving up', () => {
  const { p } = policy({ maxRestarts: 1 });
  p.next();
  assert.equal(p.next().restart, false);
  p.reset();
  const decision = p.next();
  assert.ok(decision.restart);
  assert.equal(decision.delayMs, 10_000);
});

test('restart triggers: failed, a stalled start, an ejection for lack of progress; nothing else', () => {
  assert.equal(restartTrigger('failed', 'RuntimeError: Not enough memory'), 'failed');
  assert.equal(restartTrigger('starting', 'stalled'), 'stalled');
  assert.equal(restartTrigger('unhealthy', 'no progress for 2m while requests are running'), 'no_progress');
  assert.equal(
    restartTrigger('unhealthy', '2 streams got no first byte in 60s while requests sent later did (a dead DP rank?)'),
    'no_progress',
  );
  assert.equal(restartTrigger('unhealthy', 'reset on live traffic'), null);
  assert.equal(restartTrigger('starting', null), null);
  assert.equal(restartTrigger('unhealthy', 'connect refused on live traffic'), null);
  assert.equal(restartTrigger('down', 'connection refused'), null);
  assert.equal(restartTrigger('ready', null), null);
  assert.equal(restartTrigger('draining', 'drained by operator'), null);
});
