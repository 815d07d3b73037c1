/** The output ledger drops a torn last line and reports what is written; auto concurrency follows the fleet's room. */
import assert from 'node:assert/strict';
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { autoConcurrency, batchClassOf } from '../../src/batch/auto-concurrency.js';
import { OutputLedger } from '../../src/batch/output-ledger.js';
import { tempDir } from '../helpers/batch.js';

const record = (id: string) => ({ id: `batch_req_${id}`, custom_id: id, response: null, error: null });

test('a torn last line is dropped at open and the next line starts clean', (t) => {
  const path = join(tempDir(t), 'out.jsonl');
  const first = new OutputLedger(path);
  first.append(record('a'));
  first.append(record('b'));
  first.close();
  appendFileSync(path, '{"id": "batch_req_c", "custom_id": "c", "resp');
  const second = new OutputLedger(path);
  assert.deepEqual([...second.written], ['a', 'b']);
  assert.ok(second.droppedBytes > 0);
  second.append(record('c'));
  second.close();
  const ids = readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).custom_id);
  assert.deepEqual(ids, ['a', 'b', 'c']);
});

test('auto concurrency: the ready backends’ caps plus a headroom; 0 with none ready', () => {
  const backend = (state: string, cap: number | null) => ({ state, inflight: 0, inflight_cap: cap });
  const view = (backends: ReturnType<typeof backend>[]) => ({ ready: 0, total: backends.length, backends });
  assert.equal(autoConcurrency(view([backend('ready', 64), backend('ready', 64), backend('unhealthy', 64)])), 130);
  assert.equal(autoConcurrency(view([backend('ready', 4)])), 5, 'one waiting per backend');
  assert.equal(autoConcurrency(view([backend('starting', 64)])), 0);
  assert.equal(batchClassOf({ ready: 1, total: 1, backends: [], waiting: { interactive: 0, batch: 0 } }), 'batch');
  assert.equal(batchClassOf({ ready: 1, total: 1, backends: [], waiting: { high: 0, low: 0 } }), 'low');
});
