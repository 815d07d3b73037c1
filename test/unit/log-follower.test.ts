/** How one read of a log (a burst of lines) is turned into lifecycle events. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LogEvent } from '../../src/fleet/logs/log-events.js';
import { withRefinedFatals } from '../../src/fleet/logs/log-follower.js';

const head: LogEvent = { type: 'fatal', reason: 'Scheduler hit an exception' };
const refined: LogEvent = { type: 'fatal_reason', reason: 'Scheduler hit an exception: RuntimeError: boom' };

test('a head and its exception line in one burst: one fatal with the exception line as its reason', () => {
  assert.deepEqual(withRefinedFatals([head, refined]), [
    { type: 'fatal', reason: 'Scheduler hit an exception: RuntimeError: boom' },
  ]);
});

test('a head alone stays the reason; an exception line in a later burst is kept as a refinement', () => {
  assert.deepEqual(withRefinedFatals([head]), [head]);
  assert.deepEqual(withRefinedFatals([refined]), [refined]);
});

test('other events keep their order around the merged fatal', () => {
  const phase: LogEvent = { type: 'phase', phase: 'serving', progress: null, etaSeconds: null };
  assert.deepEqual(withRefinedFatals([phase, head, refined, { type: 'start' }]), [
    phase,
    { type: 'fatal', reason: 'Scheduler hit an exception: RuntimeError: boom' },
    { type: 'start' },
  ]);
});
