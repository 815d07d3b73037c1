/** The output ledger drops a torn last line and reports what is written; auto concurrency follows the fleet's most room. */
import assert from 'node:assert/strict';
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { AutoConcurrency, batchClassOf, UNCAPPED_ROOM } from '../../src/batch/auto-concurrency.js';
import { customIdOf, OutputLedger, scanLedger } from '../../src/batch/output-ledger.js';
import { tempDir } from '../helpers/batch.js';

const record = (id: string) => ({ id: `batch_req_${id}`, custom_id: id, response: null, error: null });

test('a torn last line is dropped at open and the next line starts clean', async (t) => {
  const path = join(tempDir(t), 'out.jsonl');
  const first = new OutputLedger(path, 0);
  first.append(record('a'));
  first.append(record('b'));
  first.close();
  appendFileSync(path, '{"id": "batch_req_c", "custom_id": "c", "resp');
  const read: string[] = [];
  const scan = await scanLedger(path, (id) => read.push(id));
  assert.deepEqual(read, ['a', 'b']);
  assert.ok(scan.droppedBytes > 0);
  assert.equal(scan.records, 2);
  const second = new OutputLedger(path, scan.wholeBytes);
  second.append(record('c'));
  second.close();
  const ids = readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).custom_id);
  assert.deepEqual(ids, ['a', 'b', 'c']);
});

test('a custom_id is read without a parse of the line, and any JSON record is read by a parse', () => {
  const written = Buffer.from(JSON.stringify({ ...record('q-1'), response: { body: '"custom_id":"not-this"' } }));
  assert.equal(customIdOf(written), 'q-1');
  assert.equal(customIdOf(Buffer.from('{"id": "x", "custom_id": "spaced"}')), 'spaced', 'written by another tool');
  assert.equal(customIdOf(Buffer.from(JSON.stringify(record('a"b\\c')))), 'a"b\\c', 'escapes parsed');
  assert.equal(customIdOf(Buffer.from('{"custom_id":"torn')), null);
  assert.equal(customIdOf(Buffer.from('not json')), null);
});

test('auto concurrency: the ready backends’ caps plus one each; 0 with none ready', () => {
  const backend = (name: string, state: string, cap: number | null) => ({
    name,
    state,
    inflight: 0,
    inflight_cap: cap,
  });
  const view = (backends: ReturnType<typeof backend>[]) => ({ ready: 0, total: backends.length, backends });
  const auto = () => new AutoConcurrency();
  assert.equal(
    auto().next(view([backend('a', 'ready', 64), backend('b', 'ready', 64), backend('c', 'unhealthy', 64)])),
    130,
  );
  assert.equal(auto().next(view([backend('a', 'ready', 4)])), 5, 'one waiting per backend');
  assert.equal(auto().next(view([backend('a', 'starting', 64)])), 0);
  const uncapped = { ...backend('a', 'ready', null), serving: { running: 40, queued: 8 } };
  assert.equal(auto().next(view([uncapped])), 49, 'uncapped: what it reports running and queued');
  assert.equal(auto().next(view([backend('a', 'ready', null)])), UNCAPPED_ROOM + 1, 'uncapped, nothing reported');
  assert.equal(batchClassOf({ ready: 1, total: 1, backends: [], waiting: { interactive: 0, batch: 0 } }), 'batch');
  assert.equal(batchClassOf({ ready: 1, total: 1, backends: [], waiting: { high: 0, low: 0 } }), 'low');
});

test('auto concurrency counts each backend at the most room it showed in the run, while it is ready', () => {
  const auto = new AutoConcurrency();
  const view = (capA: number, capB: number, stateB = 'ready') => ({
    ready: 0,
    total: 2,
    backends: [
      { name: 'a', state: 'ready', inflight: 0, inflight_cap: capA },
      { name: 'b', state: stateB, inflight: 0, inflight_cap: capB },
    ],
  });
  assert.equal(auto.next(view(34, 34)), 70);
  // KV pressure closes a's cap: the limit holds, the slots it reopens are refilled from fleetgate's queue.
  assert.equal(auto.next(view(10, 34)), 70);
  assert.equal(auto.next(view(40, 20)), 76, 'a new most is taken at once');
  assert.equal(auto.next(view(40, 20, 'unhealthy')), 41, 'a backend not ready is not counted');
  assert.equal(auto.next(view(40, 2)), 76, 'back to ready: its most still holds');
  assert.equal(new AutoConcurrency().next(view(40, 2)), 44, 'a new run starts from what it sees');
});
