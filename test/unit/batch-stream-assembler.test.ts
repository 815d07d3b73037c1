/**
 * A batch line's streamed answer read back as the engine's non-streamed one: SGLang's chat stream
 * (every delta key, `reasoning_content`, `matched_stop`, the usage chunk), vLLM's (only the set keys;
 * `reasoning`, or both names), completions, tool calls, events split anywhere; an error event or a
 * stream without its finish or `[DONE]` is not an answer. Which lines stream at all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StreamAssembler, streamable, streamedBody } from '../../src/batch/stream-assembler.js';

const head = '"id":"abc","created":1700000000,"model":"qwen"';

function sse(...events: (object | string)[]): string {
  return events.map((e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`).join('');
}

function chatChunk(delta: object, finish: string | null = null, extra: object = {}): string {
  return `{${head},"object":"chat.completion.chunk","choices":[${JSON.stringify({ index: 0, delta, logprobs: null, finish_reason: finish, ...extra })}],"usage":null}`;
}

function sglangDelta(content: string | null, reasoning: string | null): object {
  return { role: null, content, reasoning_content: reasoning, tool_calls: null };
}

const sglangUsage = {
  prompt_tokens: 12,
  total_tokens: 17,
  completion_tokens: 5,
  prompt_tokens_details: { cached_tokens: 0 },
  reasoning_tokens: 3,
};

/** SGLang with `--reasoning-parser qwen3`: reasoning deltas, then content, finish, usage, [DONE]. */
const SGLANG_THINKING = sse(
  chatChunk({ role: 'assistant', content: '', reasoning_content: null, tool_calls: null }, null, {
    matched_stop: null,
  }),
  chatChunk(sglangDelta(null, 'Let me'), null, { matched_stop: null }),
  chatChunk(sglangDelta(null, ' think.'), null, { matched_stop: null }),
  chatChunk(sglangDelta('The answer', null), null, { matched_stop: null }),
  chatChunk(sglangDelta(' is 4.', null), null, { matched_stop: null }),
  chatChunk(sglangDelta(null, null), 'stop', { matched_stop: 151645 }),
  `{${head},"object":"chat.completion.chunk","choices":[],"usage":${JSON.stringify(sglangUsage)}}`,
  '[DONE]',
);

function assemble(kind: 'chat' | 'completion', text: string, split = 0): ReturnType<StreamAssembler['finish']> {
  const assembler = new StreamAssembler(kind);
  if (split <= 0) assembler.push(text);
  else for (let i = 0; i < text.length; i += split) assembler.push(text.slice(i, i + split));
  return assembler.finish();
}

test('SGLang thinking chat stream: the non-streamed chat.completion, reasoning_content, matched_stop and usage', () => {
  const expected = {
    id: 'abc',
    object: 'chat.completion',
    created: 1700000000,
    model: 'qwen',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: 'The answer is 4.',
          reasoning_content: 'Let me think.',
          tool_calls: null,
        },
        logprobs: null,
        finish_reason: 'stop',
        matched_stop: 151645,
      },
    ],
    usage: sglangUsage,
  };
  assert.deepEqual(assemble('chat', SGLANG_THINKING), { ok: true, body: expected });
  for (const split of [1, 7, 64]) {
    assert.deepEqual(assemble('chat', SGLANG_THINKING, split), { ok: true, body: expected }, `split every ${split}`);
  }
  assert.deepEqual(assemble('chat', SGLANG_THINKING.replaceAll('\n', '\r\n')), { ok: true, body: expected }, 'CRLF');
});

test('SGLang without reasoning: content a string, reasoning_content null', () => {
  const text = sse(
    chatChunk({ role: 'assistant', content: '', reasoning_content: null, tool_calls: null }),
    chatChunk(sglangDelta('hi', null)),
    chatChunk(sglangDelta(null, null), 'length', { matched_stop: null }),
    '[DONE]',
  );
  const result = assemble('chat', text);
  assert.ok(result.ok);
  const [choice] = result.body.choices as Record<string, unknown>[];
  assert.deepEqual(choice.message, { role: 'assistant', content: 'hi', reasoning_content: null, tool_calls: null });
  assert.equal(choice.finish_reason, 'length');
  assert.equal(result.body.usage, null, 'no usage chunk: none');
});

test('vLLM `reasoning` (exclude_unset deltas): that field only, tool_calls [], usage with completion_tokens_details', () => {
  const usage = {
    prompt_tokens: 9,
    total_tokens: 13,
    completion_tokens: 4,
    completion_tokens_details: { reasoning_tokens: 2 },
  };
  const text = sse(
    chatChunk({ role: 'assistant', content: '' }),
    chatChunk({ reasoning: 'Hmm' }),
    chatChunk({ reasoning: ', yes' }),
    chatChunk({ content: 'Yes.' }),
    chatChunk({}, 'stop', { stop_reason: null }),
    `{${head},"object":"chat.completion.chunk","choices":[],"usage":${JSON.stringify(usage)}}`,
    '[DONE]',
  );
  const result = assemble('chat', text, 5);
  assert.ok(result.ok);
  const [choice] = result.body.choices as Record<string, unknown>[];
  assert.deepEqual(choice.message, { role: 'assistant', content: 'Yes.', reasoning: 'Hmm, yes', tool_calls: [] });
  assert.equal(choice.stop_reason, null);
  assert.deepEqual(result.body.usage, usage);
});

test('vLLM writing both names: both fields, the text once; all reasoning, no content: content null', () => {
  const text = sse(
    chatChunk({ role: 'assistant', content: '' }),
    chatChunk({ reasoning: 'abc', reasoning_content: 'abc' }),
    chatChunk({ reasoning: 'def', reasoning_content: 'def' }),
    chatChunk({}, 'length'),
    '[DONE]',
  );
  const result = assemble('chat', text);
  assert.ok(result.ok);
  const [choice] = result.body.choices as Record<string, unknown>[];
  assert.deepEqual(choice.message, {
    role: 'assistant',
    content: null,
    reasoning_content: 'abcdef',
    reasoning: 'abcdef',
    tool_calls: [],
  });
});

test('tool calls: name and arguments joined per index', () => {
  const text = sse(
    chatChunk({ role: 'assistant', content: '' }),
    chatChunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '' } }] }),
    chatChunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
    chatChunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
    chatChunk({}, 'tool_calls'),
    '[DONE]',
  );
  const result = assemble('chat', text);
  assert.ok(result.ok);
  const [choice] = result.body.choices as Record<string, unknown>[];
  assert.deepEqual((choice.message as Record<string, unknown>).tool_calls, [
    { id: 'call_1', type: 'function', function: { name: 'get', arguments: '{"city":"Paris"}' } },
  ]);
  assert.equal(choice.finish_reason, 'tool_calls');
});

test('completions: text_completion with the text joined', () => {
  const chunk = (text: string, finish: string | null) =>
    `{${head},"object":"text_completion","choices":[{"index":0,"text":${JSON.stringify(text)},"logprobs":null,"finish_reason":${JSON.stringify(finish)},"matched_stop":null}],"usage":null}`;
  const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
  const text = sse(
    chunk('Once', null),
    chunk(' upon', null),
    chunk('', 'length'),
    `{${head},"object":"text_completion","choices":[],"usage":${JSON.stringify(usage)}}`,
    '[DONE]',
  );
  assert.deepEqual(assemble('completion', text, 3), {
    ok: true,
    body: {
      id: 'abc',
      object: 'text_completion',
      created: 1700000000,
      model: 'qwen',
      choices: [{ index: 0, text: 'Once upon', logprobs: null, finish_reason: 'length', matched_stop: null }],
      usage,
    },
  });
});

test('an error event, a stream without its finish or without [DONE]: not an answer', () => {
  const started = sse(chatChunk({ role: 'assistant', content: '' }), chatChunk({ content: 'part' }));
  const error = assemble('chat', started + sse({ error: { message: 'backend died', type: 'upstream_error' } }));
  assert.equal(error.ok, false);
  assert.match(error.ok ? '' : error.reason, /error event.*backend died/);
  const sglangError = assemble('chat', started + sse({ object: 'error', message: 'oom', code: 500 }) + sse('[DONE]'));
  assert.equal(sglangError.ok, false);
  const noFinish = assemble('chat', started);
  assert.deepEqual(noFinish.ok ? null : noFinish.reason, 'stream ended before its finish');
  const noDone = assemble('chat', started + sse(chatChunk({}, 'stop')));
  assert.deepEqual(noDone.ok ? null : noDone.reason, 'stream ended without [DONE]');
  assert.equal(assemble('chat', '').ok, false, 'an empty body');
});

test('which lines stream: chat and completions with one choice and no logprobs; the body asks for usage', () => {
  assert.equal(streamable('/v1/chat/completions', { messages: [] }), 'chat');
  assert.equal(streamable('/v1/completions', { prompt: 'x', n: 1 }), 'completion');
  assert.equal(streamable('/v1/embeddings', { input: 'x' }), null);
  assert.equal(streamable('/v1/chat/completions', { messages: [], n: 2 }), null);
  assert.equal(streamable('/v1/chat/completions', { messages: [], logprobs: true }), null);
  assert.equal(streamable('/v1/chat/completions', { messages: [], logprobs: false }), 'chat');
  assert.equal(streamable('/v1/completions', { prompt: 'x', logprobs: 0 }), null);
  assert.equal(streamable('/v1/completions', { prompt: 'x', echo: true }), null);
  assert.equal(streamable('/v1/chat/completions', { messages: [], stream: true }), null);
  assert.deepEqual(streamedBody({ messages: [], stream_options: { continuous_usage_stats: false } }), {
    messages: [],
    stream: true,
    stream_options: { continuous_usage_stats: false, include_usage: true },
  });
});
