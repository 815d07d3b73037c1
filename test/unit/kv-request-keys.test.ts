import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { blockKeys, chainKey } from '../../src/fleet/kv-events/block-keys.js';
import { BackgroundTokenizer, TokenizerBusy } from '../../src/model/background-tokenizer.js';
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
import { withKvKeys } from '../../src/proxy/kv-prompt-traits.js';
import { createKvKeys, type KvKeysOptions, type KvKeysReader } from '../../src/proxy/kv-request-blocks.js';
import type { KvRouting } from '../../src/proxy/kv-routing.js';
import { waitFor } from '../helpers/wait.js';

const dir = packagedQwen3Dir();
const qwen3 = loadChatModel(dir);
const BLOCK = 16;
const SYSTEM = `You are a careful assistant for a data-centre team. ${'Answer with numbers and units. '.repeat(20)}`;

/** A reader over the packaged Qwen3 model (blocks of `BLOCK`, a cache of 100 messages), closed after the test. */
function readerFor(t: TestContext, opts: Partial<KvKeysOptions> = {}): KvKeysReader {
  const keys = createKvKeys({
    model: { dir, dirs: {} },
    blockSize: () => BLOCK,
    cacheSize: 100,
    longestHeld: (blocks) => blocks.length,
    ...opts,
  });
  assert.ok(keys !== null);
  t.after(() => keys.close());
  return keys;
}

/** The longest leading run of keys in `held`: the engines' map, as `longestHeld` reads it. */
function runIn(held: ReadonlySet<number>): (keys: readonly number[]) => number {
  return (keys) => {
    let run = 0;
    while (run < keys.length && held.has(keys[run])) run++;
    return run;
  };
}

/** Counts the main thread's tokenizer calls from now on (the reader's probe included). */
function countEncodes(): { calls: () => number; restore: () => void } {
  const encode = qwen3.encode;
  let calls = 0;
  qwen3.encode = (text: string) => {
    calls++;
    return encode.call(qwen3, text);
  };
  const restore = () => {
    qwen3.encode = encode;
  };
  return { calls: () => calls, restore };
}

test('the worker tokenizes as the model does; the same text asked twice at once is tokenized once', async (t) => {
  const worker = new BackgroundTokenizer(dir);
  t.after(() => worker.close());
  const texts = ['<|im_start|>user\nHello there<|im_end|>\n', 'Ünïcödé, 数字 12345 and <think>tags</think>', ''];
  for (const text of texts) assert.deepEqual(Array.from(await worker.encode(text)), qwen3.encode(text));
  const [a, b] = [worker.encode(SYSTEM), worker.encode(SYSTEM)];
  assert.equal(worker.inFlight, 1, 'one job for both');
  assert.deepEqual(await a, await b);
});

test("a chat's keys: new text waits for the worker, never the event loop's tokenizer; then the cache answers at once", async (t) => {
  const keys = readerFor(t);
  const messages = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: 'How many kW does rack 12 draw at peak?' },
  ];
  const whole = blockKeys(qwen3.encode(qwen3.render(messages, { addGenerationPrompt: true })), BLOCK);
  assert.ok(whole.length >= 8);
  const encodes = countEncodes();
  t.after(encodes.restore);

  const first = keys('/v1/chat/completions', { model: 'qwen3', messages });
  assert.ok(first instanceof Promise, 'text the cache has not seen goes to the worker');
  assert.deepEqual(await first, whole, 'the keys of the whole rendered prompt');
  const again = keys('/v1/chat/completions', { model: 'qwen3', messages });
  assert.ok(Array.isArray(again), 'every message is cached now: keys at once');
  assert.deepEqual(again, whole);

  // A raw prompt and a chat the frame does not cover (template kwargs) are tokenized whole, off the loop too.
  const raw = keys('/v1/completions', { prompt: SYSTEM });
  assert.ok(raw instanceof Promise);
  assert.deepEqual(await raw, blockKeys(qwen3.encode(SYSTEM), BLOCK));
  const kwargs = { enable_thinking: false };
  const rendered = qwen3.render(messages, { addGenerationPrompt: true, templateKwargs: kwargs });
  const withKwargs = await keys('/v1/chat/completions', { messages, chat_template_kwargs: kwargs });
  assert.deepEqual(withKwargs, blockKeys(qwen3.encode(rendered), BLOCK));
  assert.equal(
    encodes.calls(),
    2,
    'only the two checks above called the event loop tokenizer (the probe ran at start-up)',
  );
});

test('not waiting (tokenize_wait 0): keys at once on the text known, the rest tokenized meanwhile for the next request', async (t) => {
  const keys = readerFor(t, { waits: false });
  await keys.ready();
  const messages = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: 'How many kW does rack 12 draw at peak? Give the figure for each of its phases.' },
  ];
  const whole = blockKeys(qwen3.encode(qwen3.render(messages, { addGenerationPrompt: true })), BLOCK);
  const first = keys('/v1/chat/completions', { model: 'qwen3', messages });
  assert.ok(Array.isArray(first), 'nothing known yet: keys at once');
  assert.ok(Math.abs(first.length - whole.length) <= whole.length * 0.3, 'about as many blocks as the prompt has');
  assert.ok(
    first.every((key) => key === 0),
    'none known: every block keyed 0',
  );
  // The system prompt is tokenized meanwhile; then a new question after it is keyed on it at once.
  await waitFor(() => {
    const next = keys('/v1/chat/completions', { model: 'qwen3', messages });
    return Array.isArray(next) && next[0] !== 0;
  });
  const other = [messages[0], { role: 'user', content: 'And rack 14, at night?' }];
  const otherWhole = blockKeys(qwen3.encode(qwen3.render(other, { addGenerationPrompt: true })), BLOCK);
  const second = keys('/v1/chat/completions', { model: 'qwen3', messages: other });
  assert.ok(Array.isArray(second), 'a new message after a known system prompt: keys at once');
  const systemBlocks = Math.floor(qwen3.encode(qwen3.render([messages[0]], {})).length / BLOCK);
  assert.deepEqual(second.slice(0, systemBlocks), otherWhole.slice(0, systemBlocks), "the system prompt's blocks");
});

test('a tokenizer worker that cannot load its model rejects, and the reader routes without keys', async (t) => {
  const broken = mkdtempSync(join(tmpdir(), 'fleetgate-model-'));
  writeFileSync(join(broken, 'tokenizer_config.json'), '{}');
  const worker = new BackgroundTokenizer(broken);
  t.after(() => worker.close());
  await assert.rejects(worker.encode('hello'), /tokenizer\.json: missing/);
  await assert.rejects(worker.encode('again'), /tokenizer\.json: missing/, 'a failed worker answers at once');
  const waits: number[] = [];
  const reasons: string[] = [];
  const kv = {
    events: { anyLive: true },
    keys: () => worker.encode('third').then(() => [1]),
    tokenizeWaitMs: 5000,
    waited: (seconds: number) => waits.push(seconds),
    unkeyed: (reason: string) => reasons.push(reason),
  };
  const traitsOf = withKvKeys(() => ({ key: 7 }), kv as unknown as KvRouting);
  assert.deepEqual(await traitsOf?.('/v1/chat/completions', {}, {}), { key: 7 }, 'the traits without kvKeys');
  assert.equal(waits.length, 1, 'the wait is counted (fleetgate_kv_tokenize_wait_seconds)');
  assert.deepEqual(reasons, ['error'], 'and why it has no keys (fleetgate_kv_unkeyed_total)');
});

test('tokenize_wait bounds the wait: past it, a busy worker or 0, the request goes on without keys, counted by reason', async () => {
  const counted: string[] = [];
  const routing = (keys: () => Promise<number[]>, tokenizeWaitMs: number) =>
    ({
      events: { anyLive: true },
      keys,
      tokenizeWaitMs,
      waited: () => {},
      unkeyed: (reason: string) => counted.push(reason),
    }) as unknown as KvRouting;
  const base = () => ({ key: 7 });
  const never = () => new Promise<number[]>(() => {});
  const late = withKvKeys(base, routing(never, 20));
  assert.deepEqual(await late?.('/v1/chat/completions', {}, {}), { key: 7 }, 'settled by the timer alone');
  const busy = withKvKeys(
    base,
    routing(() => Promise.reject(new TokenizerBusy('full')), 1000),
  );
  assert.deepEqual(await busy?.('/v1/chat/completions', {}, {}), { key: 7 });
  const zero = withKvKeys(base, routing(never, 0));
  assert.deepEqual(zero?.('/v1/chat/completions', {}, {}), { key: 7 }, 'at once, no promise');
  const inTime = withKvKeys(
    base,
    routing(async () => [1, 2], 1000),
  );
  assert.deepEqual(await inTime?.('/v1/chat/completions', {}, {}), { key: 7, kvKeys: [1, 2] });
  assert.deepEqual(counted, ['wait', 'busy', 'wait']);
});

test('the worker refuses texts past its backlog at once, and answers the rest', async (t) => {
  const worker = new BackgroundTokenizer(dir);
  t.after(() => worker.close());
  await worker.loaded;
  assert.equal(worker.inFlight, 0, 'loaded: its start-up job answered');
  const asks = Array.from({ length: 300 }, (_, i) => worker.encode(`text number ${i}`));
  const settled = await Promise.allSettled(asks);
  const refused = settled.filter((s) => s.status === 'rejected');
  assert.equal(refused.length, 300 - 256);
  assert.ok(refused.every((s) => s.status === 'rejected' && s.reason instanceof TokenizerBusy));
  assert.deepEqual(
    Array.from((settled[0] as PromiseFulfilledResult<Uint32Array>).value),
    qwen3.encode('text number 0'),
  );
});

test('new text is tokenized only as far as a backend could hold it; the blocks past it are keyed 0', async (t) => {
  const held = new Set<number>();
  const longestHeld = runIn(held);
  let untokenized = 0;
  const keys = readerFor(t, {
    longestHeld,
    untokenized: (blocks) => {
      untokenized += blocks;
    },
  });
  const wholeKeys = (messages: Array<{ role: string; content: string }>) =>
    blockKeys(qwen3.encode(qwen3.render(messages, { addGenerationPrompt: true })), BLOCK);
  const words = 'rack power budget cooling loop sensor breaker feed phase load peak idle'.split(' ');
  const prose = (seed: number, chars: number) => {
    let text = '';
    for (let i = seed; text.length < chars; i = (i * 7 + 3) % 101) text += `${words[i % words.length]} ${i} `;
    return text.trim();
  };
  // A batch job: the shared system prompt every engine has stored, then a unique 6 KB prompt.
  const system = { role: 'system', content: SYSTEM };
  const systemKeys = blockKeys(qwen3.encode(`<|im_start|>system\n${SYSTEM}<|im_end|>\n`), BLOCK);
  for (const key of systemKeys) held.add(key);
  const job = [system, { role: 'user', content: prose(1, 6000) }];
  const whole = wholeKeys(job);
  const read = await keys('/v1/chat/completions', { messages: job });
  assert.ok(read !== undefined, 'keys');
  const known = read.indexOf(0);
  assert.ok(known > systemKeys.length, `tokenized past the held system prompt (${known} blocks)`);
  assert.ok(known <= systemKeys.length + 3, `but only about two blocks past it (${known} of ${whole.length})`);
  assert.deepEqual(read.slice(0, known), whole.slice(0, known), 'the head keys as the whole prompt has them');
  assert.ok(read.slice(known).every((key) => key === 0));
  assert.ok(Math.abs(read.length - whole.length) <= whole.length * 0.25, `${read.length} blocks ~ ${whole.length}`);
  const [ownRun, wholeRun] = [read, whole].map(longestHeld);
  assert.equal(ownRun, wholeRun, 'every backend holds as long a run of them as of the whole keys');
  assert.equal(untokenized, read.length - known, 'the untokenized blocks counted');

  // routing.kv_events.tokenize_whole: every prompt whole, held or not.
  const wholeReader = readerFor(t, { longestHeld, tokenizeWhole: true });
  assert.deepEqual(await wholeReader('/v1/chat/completions', { messages: job }), whole, 'tokenize_whole: the whole');

  // Once an engine holds the whole prompt (a second sample of it, a retry), it is tokenized whole.
  for (const key of whole) held.add(key);
  assert.deepEqual(await keys('/v1/chat/completions', { messages: job }), whole, 'held: tokenized whole');

  // A conversation whose earlier turns the cache lacks (no engine's blocks taught them): they are
  // tokenized, its last answer too (the cache keeps them for its next turns); its newest turn is not.
  const chat = [
    system,
    { role: 'user', content: prose(2, 700) },
    { role: 'assistant', content: prose(3, 300) },
    { role: 'user', content: prose(4, 3000) },
  ];
  const chatWhole = wholeKeys(chat);
  const chatRead = await keys('/v1/chat/completions', { messages: chat });
  assert.ok(chatRead !== undefined, 'chat keys');
  const newest = qwen3.encode(`<|im_start|>user\n${chat[3].content}<|im_end|>\n<|im_start|>assistant\n`);
  const history = Math.floor((qwen3.encode(qwen3.render(chat)).length - newest.length) / BLOCK);
  assert.deepEqual(chatRead.slice(0, history), chatWhole.slice(0, history), 'the earlier turns tokenized');
  assert.ok(
    chatRead.slice(history).every((key) => key === 0),
    'the newest turn not',
  );
  assert.ok(
    Math.abs(chatRead.length - chatWhole.length) <= chatWhole.length * 0.25,
    `${chatRead.length} blocks ~ ${chatWhole.length}`,
  );
  const cachedNow = keys('/v1/chat/completions', {
    messages: chat.slice(0, 3).concat({ role: 'user', content: 'Hi' }),
  });
  assert.ok(Array.isArray(cachedNow), 'its history is in the cache: keys at once');
});

test("a conversation's newest message: a head read for routing, the rest learned from the engine's blocks", async (t) => {
  const held = new Set<number>();
  const longestHeld = runIn(held);
  const keys = readerFor(t, { longestHeld });
  const idsOf = (messages: Array<{ role: string; content: string }>) =>
    qwen3.encode(qwen3.render(messages, { addGenerationPrompt: true }));
  /** An engine prefills `ids`: what kv-events' map hears of it, blocks hanging from the root. */
  const prefill = (ids: number[]) => {
    let parent = 0;
    for (let from = 0; from + BLOCK <= ids.length; from += BLOCK) {
      const key = chainKey(parent, ids, from, from + BLOCK);
      keys.stored(parent, key, ids, from, from + BLOCK);
      held.add(key);
      parent = key;
    }
  };
  const history = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: 'Which racks run hottest?' },
    { role: 'assistant', content: 'Racks 12 and 14, by about four degrees.' },
  ];
  // Its earlier turns, served and cached.
  await keys('/v1/chat/completions', { messages: [...history, { role: 'user', content: 'Why?' }] });
  prefill(idsOf([...history, { role: 'user', content: 'Why?' }]));
  const turn = [
    ...history,
    {
      role: 'user',
      content: `Then plan the move: ${'rack twelve goes to row four, rack fourteen to row six; '.repeat(12)}`,
    },
  ];
  const whole = blockKeys(idsOf(turn), BLOCK);
  const routed = await keys('/v1/chat/completions', { messages: turn });
  assert.ok(routed?.includes(0), 'routed on a head of the newest message');
  assert.notDeepEqual(routed, whole);
  // The engine stores the prompt's full pages, then with its answer the page the prompt ends in.
  prefill([
    ...idsOf(turn),
    ...qwen3.encode('Row four first, then row six; both moves within the hour, one at a time.'),
  ]);
  const next = keys('/v1/chat/completions', { messages: turn });
  assert.ok(Array.isArray(next), 'its ids learned from the engine: the cache answers at once');
  assert.deepEqual(next, whole, 'exactly the tokenizer’s');
});

for (const reasoning of [true, false])
  test(`a conversation's turns, ${reasoning ? 'answers reasoning first (the history drops it)' : 'answers kept as generated'}: the last answer and the newest message learned from the engine, nothing tokenized after the first turn`, async (t) => {
    const held = new Set<number>();
    const longestHeld = runIn(held);
    let learned = 0;
    const keys = readerFor(t, {
      longestHeld,
      learned: (messages) => {
        learned += messages;
      },
    });
    const idsOf = (messages: Array<{ role: string; content: string }>) =>
      qwen3.encode(qwen3.render(messages, { addGenerationPrompt: true }));
    /**
     * A Qwen3 engine serves `messages`: its radix cache stores the prompt's pages and, at the end, the
     * page the prompt ends in with its answer (reasoning first in thinking mode; the end-of-turn token
     * last, whose KV it never computes, left out). kv-events' map hears only blocks the engine did not
     * hold (a prefill stores from where its match ends).
     */
    const serve = (messages: Array<{ role: string; content: string }>, answer: string) => {
      const generated = reasoning ? `<think>\nThe user asks; work it out.\n</think>\n\n${answer}` : answer;
      const ids = [...idsOf(messages), ...qwen3.encode(generated)];
      let parent = 0;
      for (let from = 0; from + BLOCK <= ids.length; from += BLOCK) {
        const key = chainKey(parent, ids, from, from + BLOCK);
        if (!held.has(key)) keys.stored(parent, key, ids, from, from + BLOCK);
        held.add(key);
        parent = key;
      }
    };
    // Every engine holds the system prompt (other conversations have used it).
    for (const key of blockKeys(qwen3.encode(`<|im_start|>system\n${SYSTEM}<|im_end|>\n`), BLOCK)) held.add(key);
    const chat = [
      { role: 'system', content: SYSTEM },
      {
        role: 'user',
        content: `Which racks run hottest, and by how much? ${'Row by row, with the inlet and outlet temperatures. '.repeat(16)}`,
      },
    ];
    // The first turn: the system prompt and the head of the message are tokenized (new text).
    const first = keys('/v1/chat/completions', { messages: chat });
    assert.ok(first instanceof Promise, 'new text waits for the worker');
    assert.ok((await first)?.includes(0), 'the message only as far as its head');
    const answers = [
      'Racks 12 and 14, by about four degrees over the median.',
      'Because their blanking panels are missing: the cold aisle leaks into the hot one.',
      'Fit the panels on both this week and check the inlet sensors again on Friday.',
    ];
    const follows = [
      'Why those two? Walk me through what the sensors say, one rack at a time.',
      'What do we do about it, and in what order, given the change freeze next week?',
    ];
    serve(chat, answers[0]);
    assert.equal(learned, 1, 'the first message learned from its prefill');
    for (let turn = 0; turn < follows.length; turn++) {
      chat.push({ role: 'assistant', content: answers[turn] }, { role: 'user', content: follows[turn] });
      const routed: readonly number[] | unknown = keys('/v1/chat/completions', { messages: chat });
      assert.ok(Array.isArray(routed), `turn ${turn + 2}: keys at once, nothing tokenized`);
      const whole = blockKeys(idsOf(chat), BLOCK);
      const known: number = routed.indexOf(0);
      assert.ok(known > 0, 'keyed as far as the messages known before the last answer');
      assert.deepEqual(routed.slice(0, known), whole.slice(0, known), 'exactly the tokenizer’s keys so far');
      assert.ok(Math.abs(routed.length - whole.length) <= 2, `${routed.length} blocks ~ ${whole.length}`);
      serve(chat, answers[turn + 1]);
      assert.equal(learned, 1 + 2 * (turn + 1), 'the last answer and the newest message learned');
    }
    // The same turn again (a retry): every message known, its keys exactly the tokenizer's.
    const retry = keys('/v1/chat/completions', { messages: chat });
    assert.ok(Array.isArray(retry));
    assert.deepEqual(retry, blockKeys(idsOf(chat), BLOCK));
  });
