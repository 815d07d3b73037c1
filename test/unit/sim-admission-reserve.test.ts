/**
 * The simulator's KV admission, as SGLang's (`PrefillAdder`): a request is admitted only if its
 * prompt and all of its remaining `max_new_tokens` (plus a page) fit beside what the running requests
 * hold and are still expected to need, which is only `new_token_ratio` (0.7 at first) x their
 * remaining `max_new_tokens`. So a request admitted in one pass counts whole until the next step.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from '../../src/sim/engine.js';
import { engineFor } from '../../src/sim/presets.js';
import { engineRequest } from '../helpers/engine-request.js';
import { manualClock } from '../helpers/manual-clock.js';

test('in one pass an admitted request sets aside all its max_new_tokens, from the next step only the ratio x them', () => {
  const clock = manualClock();
  const opts = engineFor('fast', {
    tokenMs: 10,
    batchPenalty: 0,
    prefillTokensPerMs: 0,
    maxRunningRequests: 8,
    maxTotalNumTokens: 300,
    pageSize: 16,
  });
  const engine = new Engine(opts, clock.schedule, { now: clock.now });
  const firstTokenAt = new Map<string, number>();
  for (const id of ['a', 'b', 'c']) {
    const request = engineRequest({
      id,
      maxTokens: 100,
      targetTokens: 5,
      stopReason: 'stop',
      onToken: () => {
        if (!firstTokenAt.has(id)) firstTokenAt.set(id, clock.now());
      },
    });
    engine.submit(request);
  }
  clock.run();
  // a and b: 2 x (10 + 100 + 16) = 252 of 300; c's 126 more does not fit in the first pass. At the
  // next step a and b hold 11 each and are expected to need ceil(0.699 x 99) = 70 each: 162 + 126 fits.
  // (With the ratio's share for c too, 20 + 2 x 70 + 10 + 70 = 240 would have let c in at once.)
  assert.equal(firstTokenAt.get('a'), 10);
  assert.equal(firstTokenAt.get('b'), 10);
  assert.equal(firstTokenAt.get('c'), 20);
});
