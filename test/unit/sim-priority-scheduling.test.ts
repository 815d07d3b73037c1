/**
 * The simulator's `--enable-priority-scheduling`, as SGLang's: the waiting queue is admitted by
 * `priority` (larger first), then in arrival order; without the flag `priority` is ignored.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from '../../src/sim/engine.js';
import { engineFor } from '../../src/sim/presets.js';
import { engineRequest } from '../helpers/engine-request.js';
import { manualClock } from '../helpers/manual-clock.js';

/** One running slot; a long request holds it while `queued` wait; returns the order they finish in. */
function finishOrder(priorityScheduling: boolean, queued: Array<[string, number | undefined]>): string[] {
  const clock = manualClock();
  const opts = engineFor('fast', { tokenMs: 1, maxRunningRequests: 1, priorityScheduling });
  const engine = new Engine(opts, clock.schedule, { now: clock.now });
  const finished: string[] = [];
  const make = (id: string, priority: number | undefined, tokens: number) =>
    engineRequest({ id, maxTokens: tokens, priority, onFinish: () => finished.push(id) });
  engine.submit(make('running', 0, 50));
  // They arrive once the long one runs.
  clock.schedule(() => {
    for (const [id, priority] of queued) engine.submit(make(id, priority, 5));
  }, 1);
  clock.run();
  return finished;
}

const QUEUED: Array<[string, number | undefined]> = [
  ['batch-1', 0],
  ['batch-2', undefined],
  ['interactive', 1],
  ['batch-3', 0],
];

test('with priority scheduling, a higher priority is admitted first; equal ones (or none, as 0) in arrival order', () => {
  assert.deepEqual(finishOrder(true, QUEUED), ['running', 'interactive', 'batch-1', 'batch-2', 'batch-3']);
});

test('without it, the queue is first come first served whatever the priority', () => {
  assert.deepEqual(finishOrder(false, QUEUED), ['running', 'batch-1', 'batch-2', 'interactive', 'batch-3']);
});
