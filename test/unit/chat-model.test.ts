import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadChatModel, ModelFilesError, packagedQwen3Dir } from '../../src/model/chat-model.js';

const qwen3 = loadChatModel(packagedQwen3Dir());

test('the packaged Qwen3 template renders a thinking prompt and a non-thinking one as the model card says', () => {
  const messages = [{ role: 'user', content: 'Why is the sky blue?' }];
  assert.equal(qwen3.render(messages), '<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(
    qwen3.render(messages, { templateKwargs: { enable_thinking: false } }),
    '<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
  );
});

test('Qwen3 tokens: special tokens are single ids, encode adds none, decode inverts encode', () => {
  assert.deepEqual(qwen3.think, { start: '<think>', end: '</think>' });
  const text = '<|im_start|>assistant\n<think>\nLet me see.\n</think>\n\nParis.';
  const ids = qwen3.encode(text);
  assert.equal(ids[0], 151644, '<|im_start|> is one token, no BOS before it');
  assert.ok(ids.includes(151667) && ids.includes(151668), '<think> and </think> are one token each');
  assert.equal(qwen3.decode(ids), text);
});

test('a directory without tokenizer.json is refused naming the file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-model-'));
  writeFileSync(join(dir, 'tokenizer_config.json'), '{}');
  assert.throws(
    () => loadChatModel(dir),
    (err: Error) => err instanceof ModelFilesError && /tokenizer\.json: missing/.test(err.message),
  );
});
