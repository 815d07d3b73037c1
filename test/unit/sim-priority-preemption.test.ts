/**
 * The simulator's priority preemption, as SGLang's (`--priority-scheduling-preemption-threshold`,
 * default 10): a waiting request that finds every batch slot taken preempts running requests whose
 * priority is lower by more than the threshold; the preempted one rejoins the queue and is prefilled
 * again. A pool full of reservations with free slots preempts nothing (SGLang tries preemption only
 * when the batch is full by count).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from '../../src/sim/engine.js';
import { engineFor } from '../../src/sim/presets.js';
import type { SimEngineOptions } from '../../src/sim/types.js';
import { engineRequest } from '../helpers/engine-request.js';
import { manualClock } from '../helpers/manual-clock.js';

const TOKEN_MS = 10;

interface Seen {
  firstTokenAt: Map<string, number>;
  finished: string[];
  engine: Engine;
}

/** `running` fill the batch at 0 ms; `late` arrives at 25 ms, mid-way through the third decode step. */
function scenario(
  engine: Partial<SimEngineOptions>,
  running: Array<[string, number, number]>,
  late: [string, number, number],
): Seen {
  const clock = manualClock();
  const opts = engineFor('fast', {
    tokenMs: TOKEN_MS,
    batchPenalty: 0,
    prefillTokensPerMs: 0,
    priorityScheduling: true,
    ...engine,
  });
  const sim = new Engine(opts, clock.schedule, { now: clock.now });
  const seen: Seen = { firstTokenAt: new Map(), finished: [], engine: sim };
  const make = ([id, priority, tokens]: [string, number, number]) =>
    engineRequest({
      id,
      maxTokens: tokens,
      priority,
      onToken: () => {
        if (!seen.firstTokenAt.has(id)) seen.firstTokenAt.set(id, clock.now());
      },
      onFinish: () => seen.finished.push(id),
    });
  for (const request of running) sim.submit(make(request));
  clock.schedule(() => sim.submit(make(late)), 25);
  clock.run();
  return seen;
}

const BATCH: Array<[string, number, number]> = [
  ['batch-1', 0, 100],
  ['batch-2', 0, 100],
];

test('a request of a priority higher by more than the threshold preempts the latest running one at the next step', () => {
  const seen = scenario({ maxRunningRequests: 2 }, BATCH, ['interactive', 11, 5]);
  // The step under way ends at 30 ms; the interactive request is admitted in the next and has its token at 40 ms.
  assert.equal(seen.firstTokenAt.get('interactive'), 40);
  assert.equal(seen.engine.stats.preemptionsTotal, 1);
  // batch-2 entered the queue last, so it is the one preempted: it finishes after batch-1, and
  // after the interactive request, having kept the tokens it had (prefilled again, not started over).
  assert.deepEqual(seen.finished, ['interactive', 'batch-1', 'batch-2']);
  assert.equal(seen.engine.stats.generationTokensTotal, 205);
});

test('a priority gap at or below the threshold preempts nothing: the request waits for a free slot', () => {
  const seen = scenario({ maxRunningRequests: 2 }, BATCH, ['interactive', 10, 5]);
  assert.equal(seen.engine.stats.preemptionsTotal, 0);
  // Both batch requests finish at step 100 (1000 ms); the interactive one runs after.
  assert.equal(seen.firstTokenAt.get('interactive'), 1010);
  assert.deepEqual(seen.finished, ['batch-1', 'batch-2', 'interactive']);
});

test('the threshold is configurable (SGLang --priority-scheduling-preemption-threshold)', () => {
  const seen = scenario({ maxRunningRequests: 2, priorityPreemptionThreshold: 0 }, BATCH, ['interactive', 1, 5]);
  assert.equal(seen.engine.stats.preemptionsTotal, 1);
  assert.equal(seen.firstTokenAt.get('interactive'), 40);
});

test('without priority scheduling nothing is preempted', () => {
  const seen = scenario({ maxRunningRequests: 2, priorityScheduling: false }, BATCH, ['interactive', 100, 5]);
  assert.equal(seen.engine.stats.preemptionsTotal, 0);
  assert.equal(seen.firstTokenAt.get('interactive'), 1010);
});

test('a pool full of reservations with free batch slots preempts nothing, as in SGLang', () => {
  // 2 of 8 slots taken, and the two batch requests' reservations (~0.7 x their remaining 47 tokens
  // each) leave no room in a 152-token pool for the interactive request's 10 + 40 + a page of 16:
  // SGLang's NO_TOKEN ends the pass without trying preemption, so it waits until both have finished
  // (500 ms).
  const seen = scenario(
    { maxRunningRequests: 8, maxTotalNumTokens: 152 },
    [
      ['batch-1', 0, 50],
      ['batch-2', 0, 50],
    ],
    ['interactive', 100, 40],
  );
  assert.equal(seen.engine.stats.preemptionsTotal, 0);
  assert.equal(seen.engine.stats.retractionsTotal, 0);
  assert.equal(seen.firstTokenAt.get('interactive'), 510);
});

test('preemption takes the lowest priority first, and only as many as the new request needs', () => {
  const seen = scenario(
    { maxRunningRequests: 3 },
    [
      ['low', 0, 100],
      ['middle', 20, 100],
      ['also-low', 0, 100],
    ],
    ['interactive', 50, 5],
  );
  assert.equal(seen.engine.stats.preemptionsTotal, 1);
  assert.equal(seen.firstTokenAt.get('interactive'), 40);
  // also-low entered last among the lowest: it is preempted and finishes last (middle, admitted first, ends first).
  assert.deepEqual(seen.finished, ['interactive', 'middle', 'low', 'also-low']);
});
