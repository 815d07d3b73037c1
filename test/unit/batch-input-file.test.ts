/**
 * The input read twice as a stream: the check finds a bad line anywhere and indexes every
 * custom_id; the sending pass yields only the lines not skipped, in order, and refuses a file
 * changed since it was checked.
 */
import assert from 'node:assert/strict';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BatchInputError } from '../../src/batch/batch-input.js';
import { checkInputFile, pendingRequests } from '../../src/batch/input-file.js';
import { chatLine, tempDir } from '../helpers/batch.js';

test('check, then the pending lines in order; a file changed since the check is refused', async (t) => {
  const path = join(tempDir(t), 'input.jsonl');
  // A blank line and a last line with no newline: both read as in the file.
  writeFileSync(path, `${chatLine('a')}\n\n${chatLine('b')}\n${chatLine('c')}`);
  const input = await checkInputFile(path);
  assert.equal(input.requests, 3);
  assert.equal(input.lines, 4);
  assert.equal(input.ids.lineOf('c'), 4);
  const ids: string[] = [];
  for await (const request of pendingRequests(input, (line) => line === 1)) ids.push(request.custom_id);
  assert.deepEqual(ids, ['b', 'c'], 'line 1 skipped');

  appendFileSync(path, `\n${chatLine('d')}`);
  await assert.rejects(
    async () => {
      for await (const _ of pendingRequests(input, () => false));
    },
    (error: unknown) => error instanceof BatchInputError && /changed since it was checked/.test(error.message),
  );

  writeFileSync(path, `${chatLine('a')}\n${chatLine('b')}\n${chatLine('a')}\n`);
  await assert.rejects(checkInputFile(path), /line 3: duplicate custom_id "a" \(first on line 1\)/);
});

test("a line's body is sent as the line wrote it; a key spelled with escapes falls back to the parse", async (t) => {
  const path = join(tempDir(t), 'input.jsonl');
  const spaced = '{ "model" : "m",  "messages" : [ {"role":"user","content":"say \\"body\\": {}"} ] }';
  const lines = [
    `{"custom_id":"spaced","method":"POST","url":"/v1/chat/completions","body":${spaced}}`,
    // JSON.parse keeps the last of two keys alike: so is the body sent.
    `{"body":{"model":"first"},"custom_id":"twice","method":"POST","url":"/v1/chat/completions","body":{"model":"last"}}`,
    // "bod\u0079" is "body" to JSON.parse, not to a search of the bytes.
    `{"custom_id":"escaped","method":"POST","url":"/v1/chat/completions","body":{"model":"a"},"bod\\u0079":{"model":"b"}}`,
  ];
  writeFileSync(path, `${lines.join('\n')}\n`);
  const sent: Record<string, string> = {};
  for await (const request of pendingRequests(await checkInputFile(path), () => false))
    sent[request.custom_id] = request.body.toString();
  assert.equal(sent.spaced, spaced, 'the bytes as written, spaces and all');
  assert.deepEqual(JSON.parse(sent.twice), { model: 'last' });
  assert.deepEqual(JSON.parse(sent.escaped), { model: 'b' });
});
