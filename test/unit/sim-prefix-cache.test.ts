/**
 * The simulator's prefix cache: least recently used eviction of pages no running request uses, and
 * the engine's accounting under KV pressure, driven by a manual clock (no sockets, no timers).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine, type EngineRequest } from '../../src/sim/engine.js';
import { parseGeneration } from '../../src/sim/generation.js';
import { PrefixCache, prefixKeys } from '../../src/sim/prefix-cache.js';
import { engineFor } from '../../src/sim/presets.js';
import { outputText } from '../../src/sim/text-gen.js';
import { engineRequest } from '../helpers/engine-request.js';
import { manualClock } from '../helpers/manual-clock.js';

function request(id: string, text: string, pageSize: number, tokens: number, maxTokens: number): EngineRequest {
  const promptTokens = Math.ceil(text.length / 4);
  return engineRequest({
    id,
    promptTokens,
    maxTokens,
    targetTokens: tokens,
    prefixKeys: prefixKeys(text, pageSize, Math.floor((promptTokens - 1) / pageSize)),
  });
}

const text = (seed: string, chars: number) => seed.repeat(Math.ceil(chars / seed.length)).slice(0, chars);

test('keys name whole prefixes: the same text gives the same keys, a changed first page changes every key', () => {
  const a = prefixKeys(text('abc', 256), 16, 10);
  assert.equal(a.length, 4);
  assert.deepEqual(prefixKeys(text('abc', 256), 16, 10), a);
  const b = prefixKeys(`X${text('abc', 255)}`, 16, 10);
  for (let i = 0; i < 4; i++) assert.notEqual(b[i], a[i]);
  assert.deepEqual(
    prefixKeys(`${text('abc', 128)}different tail...`.padEnd(256, '.'), 16, 10).slice(0, 2),
    a.slice(0, 2),
  );
});

test('the cache evicts the least recently used unlocked pages and never a locked one', () => {
  const cache = new PrefixCache(16);
  cache.lock(['a1', 'a2']);
  cache.lock(['b1', 'b2']);
  cache.unlock(['b1', 'b2']);
  cache.lock(['c1']);
  cache.unlock(['c1']);
  assert.equal(cache.tokens, 5 * 16);
  assert.equal(cache.lockedTokens, 2 * 16);
  // Within a prefix the tail goes first (a radix cache evicts leaves), and older prefixes before newer.
  assert.equal(cache.evict(16), 16);
  assert.equal(cache.has('b2'), false);
  assert.equal(cache.has('b1'), true);
  assert.equal(cache.evict(1000), 32);
  assert.deepEqual(
    ['a1', 'a2', 'b1', 'c1'].map((key) => cache.has(key)),
    [true, true, false, false],
  );
  assert.deepEqual(cache.match(['a1', 'a2', 'x']), { blocks: 2, locked: 2 });
});

test('a repeated prompt is reported cached and prefills only the uncached tokens', () => {
  const clock = manualClock();
  const opts = engineFor('fast', { tokenMs: 1, batchPenalty: 0, prefillTokensPerMs: 1, maxTotalNumTokens: 100_000 });
  const engine = new Engine(opts, clock.schedule, { now: clock.now });
  const prompt = text('the system prompt. ', 4000);
  const finishedAt: number[] = [];
  const run = (id: string) => {
    const start = clock.now();
    const r = request(id, prompt, opts.pageSize, 1, 1);
    r.onFinish = () => finishedAt.push(clock.now() - start);
    engine.submit(r);
    clock.run();
    return r;
  };
  const first = run('first');
  const second = run('second');
  assert.equal(first.cachedTokens, 0);
  assert.equal(second.cachedTokens, Math.floor((first.promptTokens - 1) / 16) * 16);
  // 1000 prompt tokens at 1 token/ms: the first pays ~1000 ms of prefill, the second only its last page.
  assert.ok(finishedAt[0] >= 1000, `first took ${finishedAt[0]} ms`);
  assert.ok(finishedAt[1] <= 20, `second took ${finishedAt[1]} ms`);
  assert.equal(engine.stats.cachedTokensTotal, second.cachedTokens);
  assert.ok(engine.stats.cacheHitRate > 0.4);
});

test('under KV pressure finished prompts are evicted, never the pages of a running request', () => {
  const clock = manualClock();
  const opts = engineFor('fast', { tokenMs: 1, batchPenalty: 0, prefillTokensPerMs: 0, maxTotalNumTokens: 2000 });
  const engine = new Engine(opts, clock.schedule, { now: clock.now });
  const long = request('long', text('long running conversation ', 2400), opts.pageSize, 500, 500);
  engine.submit(long);
  clock.run(() => long.generated >= 1);
  const longKeys = long.prefixKeys ?? [];
  assert.ok(longKeys.length > 30);
  // Each short request caches 600 tokens' pages; a few of them overflow the pool, so older ones must go.
  const shorts: EngineRequest[] = [];
  for (let i = 0; i < 6; i++) {
    const short = request(`s${i}`, text(`short prompt ${i} `, 2400), opts.pageSize, 2, 2);
    shorts.push(short);
    engine.submit(short);
    clock.run(() => short.generated >= 2);
    for (const key of longKeys) assert.equal(engine.cachedPage(key), 'locked', `after short ${i}`);
    assert.ok(engine.stats.cachedPoolTokens + 1 <= opts.maxTotalNumTokens + 16);
  }
  assert.equal(engine.cachedPage((shorts[0].prefixKeys ?? [])[0]), 'absent', 'the oldest finished prompt was evicted');
  assert.notEqual(engine.cachedPage((shorts[5].prefixKeys ?? [])[0]), 'absent', 'the newest is still cached');
  clock.run();
  assert.equal(long.generated, 500);
  assert.equal(engine.cachedPage(longKeys[0]), 'cached', 'its pages stay cached after it finished');
});

test("a finished request's answer stays cached: the next turn of its conversation prefills only its new text", () => {
  const clock = manualClock();
  const opts = engineFor('fast', { tokenMs: 1, batchPenalty: 0, prefillTokensPerMs: 1, maxTotalNumTokens: 100_000 });
  const engine = new Engine(opts, clock.schedule, { now: clock.now });
  const host = { engine, defaultMaxTokens: 16, model: 'm' } as unknown as Parameters<typeof parseGeneration>[2];
  const turn = (messages: { role: string; content: string }[], answer: number): EngineRequest => {
    const spec = parseGeneration('chat', { messages, max_tokens: 600 }, host);
    if (typeof spec === 'string') throw new Error(spec);
    return engineRequest({
      id: spec.job.rid,
      promptTokens: spec.job.promptTokens,
      maxTokens: spec.maxTokens,
      targetTokens: answer,
      stopReason: spec.stopReason,
      prefixKeys: spec.prefixKeys,
      answerKeys: spec.answerKeys,
    });
  };
  const messages = [
    { role: 'system', content: text('You are a guide. ', 1200) },
    { role: 'user', content: `${text('first question ', 800)} <sim:len=300>` },
  ];
  const first = turn(messages, 300);
  engine.submit(first);
  clock.run();
  messages.push({ role: 'assistant', content: outputText(300) }, { role: 'user', content: 'and then?' });
  const second = turn(messages, 1);
  engine.submit(second);
  clock.run();
  const promptPages = Math.floor((first.promptTokens - 1) / 16) * 16;
  // Its answer's 300 tokens are cached too: all but the pages after the first turn's answer.
  assert.ok(
    (second.cachedTokens ?? 0) >= promptPages + 300 - 2 * 16,
    `cached ${second.cachedTokens} of ${second.promptTokens} (first prompt's pages ${promptPages})`,
  );
  // Without the answer's pages the same turn prefills the answer again.
  const forgetful = new Engine(opts, clock.schedule, { now: clock.now });
  const again = { ...first, id: 'again', answerKeys: undefined, generated: 0 };
  forgetful.submit(again);
  clock.run();
  const next = turn(messages, 1);
  forgetful.submit(next);
  clock.run();
  assert.equal(next.cachedTokens, promptPages);
});
