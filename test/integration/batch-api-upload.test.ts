/**
 * `POST /v1/files` reads its multipart body as a stream: a file over `batch.max_file_size` is 413
 * and nothing of it is kept, a wrong purpose or a body with no file is 400, a body that is not
 * multipart is 400; a good upload is stored byte for byte whichever order its parts come in.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { chatLine, tempDir } from '../helpers/batch.js';
import { startGateway } from '../helpers/fleet.js';

test('uploads: 413 over the limit with nothing kept, 400 for a bad purpose or body, parts in any order', async (t) => {
  const dir = join(tempDir(t), 'batches');
  const { url } = await startGateway(t, {
    backends: [{ url: 'http://127.0.0.1:9', name: 'none' }],
    batch: { dir, max_file_size: '4KiB' },
    log: { access: false },
  });
  const content = `${Array.from({ length: 10 }, (_, i) => chatLine(`req-${i}`)).join('\n')}\n`;
  const upload = async (parts: Array<[string, string | Blob]>) => {
    const form = new FormData();
    for (const [name, value] of parts)
      if (typeof value === 'string') form.append(name, value);
      else form.append(name, value, 'input.jsonl');
    const res = await fetch(`${url}/v1/files`, { method: 'POST', body: form });
    return {
      status: res.status,
      body: (await res.json()) as { id?: string; bytes?: number; error?: { message: string } },
    };
  };
  const stored = () => readdirSync(join(dir, 'files'));

  const big = await upload([
    ['purpose', 'batch'],
    ['file', new Blob([content.repeat(5)])],
  ]);
  assert.equal(big.status, 413, JSON.stringify(big.body));
  assert.match(big.body.error?.message ?? '', /batch\.max_file_size/);
  assert.deepEqual(stored(), [], 'nothing of it kept');

  const wrong = await upload([
    ['file', new Blob([content])],
    ['purpose', 'fine-tune'],
  ]);
  assert.equal(wrong.status, 400);
  assert.match(wrong.body.error?.message ?? '', /purpose must be 'batch'/);
  assert.deepEqual(stored(), [], 'a refused file is removed');

  const none = await upload([['purpose', 'batch']]);
  assert.equal(none.status, 400);
  assert.match(none.body.error?.message ?? '', /no file/);

  const plain = await fetch(`${url}/v1/files`, {
    method: 'POST',
    body: 'x',
    headers: { 'content-type': 'text/plain' },
  });
  assert.ok(plain.status === 400 || plain.status === 415, `not multipart: ${plain.status}`);
  await plain.body?.cancel();

  const good = await upload([
    ['file', new Blob([content])],
    ['purpose', 'batch'],
  ]);
  assert.equal(good.status, 200, JSON.stringify(good.body));
  assert.equal(good.body.bytes, Buffer.byteLength(content));
  const back = await fetch(`${url}/v1/files/${good.body.id}/content`);
  assert.equal(await back.text(), content, 'the bytes back, streamed');
});
