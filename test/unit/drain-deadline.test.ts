/**
 * DrainDeadlines on a manual clock: a drain starts the configured deadline, a drain call's own
 * replaces it (0 = none, kept through a later drain), a resume or a removal cancels it, and when it
 * passes exactly the attempts still on that backend are ended, once, with a reason that says so.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DrainDeadlines, type DrainedAttempt } from '../../src/fleet/drain-deadline.js';
import { manualClock } from '../helpers/manual-clock.js';

function setup(defaultMs: number) {
  const clock = manualClock();
  const passed: Array<{ backend: string; ended: number; ms: number; at: number }> = [];
  const drains = new DrainDeadlines<string>({
    defaultMs,
    schedule: clock.schedule,
    passed: (backend, ended, ms) => passed.push({ backend, ended, ms, at: clock.now() }),
  });
  return { clock, drains, passed };
}

function attempt(): DrainedAttempt & { reasons: string[] } {
  const reasons: string[] = [];
  return { reasons, endDrained: (reason) => reasons.push(reason) };
}

test('the configured deadline passes: the attempts still on the drained backend are ended, no others', () => {
  const { clock, drains, passed } = setup(30_000);
  const [a1, a2, finished, elsewhere] = [attempt(), attempt(), attempt(), attempt()];
  drains.track('a', a1);
  drains.track('a', a2);
  drains.track('a', finished);
  drains.track('b', elsewhere);
  drains.drained('a');
  assert.equal(drains.deadlineOf('a'), 30_000);
  assert.equal(drains.deadlineOf('b'), null, 'b is not draining');
  drains.untrack('a', finished);
  clock.run();
  assert.deepEqual(passed, [{ backend: 'a', ended: 2, ms: 30_000, at: 30_000 }]);
  assert.deepEqual(a1.reasons, ['the backend was drained and its drain deadline (30s) passed']);
  assert.equal(a2.reasons.length, 1);
  assert.deepEqual(finished.reasons, [], 'an attempt that ended is not ended again');
  assert.deepEqual(elsewhere.reasons, [], 'another backend is untouched');
});

test('a resume or a removal before the deadline cancels it', () => {
  const { clock, drains, passed } = setup(1_000);
  const a = attempt();
  drains.track('a', a);
  drains.drained('a');
  drains.undrained('a');
  assert.equal(drains.deadlineOf('a'), null);
  clock.run();
  assert.deepEqual(passed, []);
  assert.deepEqual(a.reasons, []);
});

test("a drain call's own deadline replaces the configured one, from the call; 0 is none and stays through a later drain", () => {
  const { clock, drains, passed } = setup(60_000);
  const a = attempt();
  drains.track('a', a);
  drains.drained('a');
  drains.set('a', 300);
  clock.run();
  assert.deepEqual(passed, [{ backend: 'a', ended: 1, ms: 300, at: 300 }], 'only the call’s deadline fired');

  const off = setup(60_000);
  const b = attempt();
  off.drains.track('b', b);
  off.drains.drained('b');
  off.drains.set('b', 0);
  off.drains.drained('b');
  assert.equal(off.drains.deadlineOf('b'), 0);
  off.clock.run();
  assert.deepEqual(off.passed, []);
  assert.deepEqual(b.reasons, []);
});

test('health.drain_deadline: 0 sets no timer, but a drain call may still set one', () => {
  const { clock, drains, passed } = setup(0);
  const a = attempt();
  drains.track('a', a);
  drains.drained('a');
  clock.run();
  assert.deepEqual(passed, []);
  drains.set('a', 2_000);
  clock.run();
  assert.equal(passed.length, 1);
  assert.deepEqual(a.reasons, ['the backend was drained and its drain deadline (2s) passed']);
});

test('stop cancels every deadline', () => {
  const { clock, drains, passed } = setup(1_000);
  drains.track('a', attempt());
  drains.drained('a');
  drains.stop();
  clock.run();
  assert.deepEqual(passed, []);
});
