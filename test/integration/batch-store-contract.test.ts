/**
 * One contract for both Batch API stores (batch-store.ts): the directory store and the PostgreSQL
 * store (a real server, started by the test) pass the same cases: files streamed in and out, jobs
 * listed newest first, a cancel no save of the runner undoes, saves that follow the status rules of
 * batch-status.ts for every pair of statuses, leases (one holder at a time, a cancel seen at
 * renewal, released for another, a save by a replica whose lease passed refused), answers stored
 * and read back. Then what only the shared store promises: an expired lease is taken over, and two
 * runners of one job store each answer once.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { after, before, describe, test } from 'node:test';
import { mayReplace } from '../../src/batch/batch-status.js';
import type { BatchStore, StoredBatch } from '../../src/batch/batch-store.js';
import { BATCH_STATUSES, newId, newStoredBatch } from '../../src/batch/batch-store.js';
import { DirStore } from '../../src/batch/dir-store.js';
import { PgStore } from '../../src/batch/pg-store.js';
import { tempDir } from '../helpers/batch.js';
import { type PgCluster, startPostgres } from '../helpers/postgres.js';

const cleanups: Array<() => unknown> = [];
/** Cleanups run once the file's tests end (the cluster last: it was first). */
const hooks = { after: (fn: () => unknown) => cleanups.unshift(fn) };
after(async () => {
  for (const fn of cleanups) await fn();
});

function job(createdAt: number, status: StoredBatch['batch']['status'] = 'validating'): StoredBatch {
  const stored = newStoredBatch(
    { endpoint: '/v1/chat/completions', input_file_id: newId('file-'), metadata: null },
    createdAt,
  );
  stored.batch.status = status;
  stored.batch.expires_at = null;
  return stored;
}

function answer(customId: string) {
  return {
    id: `batch_req_${customId}`,
    custom_id: customId,
    response: { status_code: 200, request_id: 'r', body: { ok: customId } },
    error: null,
  };
}

/** Bytes in pieces of `piece`, as an upload arrives. */
function pieces(bytes: Buffer, piece: number): Readable {
  return Readable.from(
    (function* () {
      for (let i = 0; i < bytes.length; i += piece) yield bytes.subarray(i, i + piece);
    })(),
  );
}

let cluster: PgCluster;
before(async () => {
  cluster = await startPostgres(hooks);
});

const stores: Array<[string, () => Promise<BatchStore>]> = [
  ['directory', async () => new DirStore(tempDir(hooks))],
  [
    'postgres',
    async () => {
      const store = new PgStore(await cluster.createDatabase(), join(tempDir(hooks), 'cache'));
      hooks.after(() => store.close());
      return store;
    },
  ],
];

for (const [name, open] of stores) {
  describe(`${name} store`, () => {
    test('a file is streamed in, described, streamed out; an undescribed one is not a file', async () => {
      const store = await open();
      const bytes = randomBytes(3 * 2 ** 20 + 12345);
      const id = await store.writeContent(pieces(bytes, 64 * 1024));
      assert.equal(await store.file(id), null, 'no File object before describeFile');
      const file = await store.describeFile(id, 'in.jsonl', 'batch', 100);
      assert.equal(file.bytes, bytes.length);
      assert.deepEqual(await store.file(id), file);
      const back = Buffer.concat(await store.readContent(id).toArray());
      assert.ok(back.equals(bytes), 'the same bytes come back');
      const local = await store.openInput(id);
      assert.ok(readFileSync(local.path).equals(bytes), 'a run reads the same bytes');
      await local.close();
      const dropped = await store.writeContent(pieces(Buffer.from('x\n'), 1));
      await store.removeContent(dropped);
      assert.equal(await store.file(dropped), null);
      assert.equal(await store.file('file-000000000000000000000000'), null);
    });

    test('a file is deleted with its bytes, but not while a job not yet ended reads it', async () => {
      const store = await open();
      const id = await store.writeContent(pieces(Buffer.from('{"a":1}\n'), 1));
      await store.describeFile(id, 'in.jsonl', 'batch', 100);
      const running = job(1);
      running.batch.input_file_id = id;
      await store.insertBatch(running);
      assert.equal(await store.deleteFile(id), 'in-use');
      assert.ok(await store.file(id), 'kept for the job');
      const stored = (await store.claim('a', 60_000)) as StoredBatch;
      stored.batch.status = 'completed';
      assert.equal(await store.saveBatch(stored, 'a'), 'saved');
      assert.equal(await store.deleteFile(id), 'deleted');
      assert.equal(await store.file(id), null);
      const left: Buffer[] = await store
        .readContent(id)
        .toArray()
        .catch(() => []);
      assert.equal(Buffer.concat(left).length, 0, 'its bytes are gone');
      assert.equal(await store.deleteFile(id), 'missing');
      assert.equal(await store.deleteFile('file-000000000000000000000000'), 'missing');
    });

    test('jobs: stored, listed newest first in pages, counted by status', async () => {
      const store = await open();
      const jobs = [job(10), job(30), job(20, 'completed')];
      for (const stored of jobs) await store.insertBatch(stored);
      const first = await store.listBatches(2, undefined);
      assert.deepEqual(
        first.data.map((b) => b.created_at),
        [30, 20],
      );
      assert.equal(first.has_more, true);
      const second = await store.listBatches(2, first.data[1]?.id);
      assert.deepEqual(
        second.data.map((b) => b.created_at),
        [10],
      );
      assert.equal(second.has_more, false);
      assert.deepEqual(await store.countByStatus(), { validating: 2, completed: 1 });
      assert.equal((await store.batch(jobs[0]?.batch.id as string))?.batch.created_at, 10);
      assert.equal(await store.batch('batch_000000000000000000000000'), null);
    });

    test('a cancel is not undone by a save of an older copy; an ended job stays ended', async () => {
      const store = await open();
      await store.insertBatch(job(1));
      const stored = (await store.claim('a', 60_000)) as StoredBatch;
      stored.batch.status = 'in_progress';
      assert.equal(await store.saveBatch(stored, 'a'), 'saved');
      const cancelling = await store.requestCancel(stored.batch.id, 5);
      assert.equal(cancelling?.batch.status, 'cancelling');
      assert.equal(cancelling?.batch.cancelling_at, 5);
      stored.batch.request_counts.completed = 7;
      assert.equal(await store.saveBatch(stored, 'a'), 'status-kept', 'the runner saves in_progress: refused');
      assert.equal((await store.batch(stored.batch.id))?.batch.status, 'cancelling');
      stored.batch.status = 'cancelled';
      assert.equal(await store.saveBatch(stored, 'a'), 'saved');
      stored.batch.status = 'in_progress';
      assert.equal(await store.saveBatch(stored, 'a'), 'status-kept');
      assert.equal((await store.requestCancel(stored.batch.id, 6))?.batch.status, 'cancelled');
    });

    test('a save follows the status rules (mayReplace) for every pair of statuses', async () => {
      const store = await open();
      for (const current of BATCH_STATUSES)
        for (const next of BATCH_STATUSES) {
          await store.insertBatch(job(1, 'in_progress'));
          const stored = (await store.claim('a', 60_000)) as StoredBatch;
          stored.batch.status = current;
          assert.equal(await store.saveBatch(stored, 'a'), 'saved', `in_progress → ${current}`);
          stored.batch.status = next;
          const expected = mayReplace(current, next) ? 'saved' : 'status-kept';
          assert.equal(await store.saveBatch(stored, 'a'), expected, `${current} → ${next}`);
        }
    });

    test('leases: one holder; a cancel is seen at renewal; released, the job is claimed again', async () => {
      const store = await open();
      const done = job(1, 'completed');
      const stored = job(2);
      await store.insertBatch(done);
      await store.insertBatch(stored);
      const claimed = await store.claim('a', 60_000);
      assert.equal(claimed?.batch.id, stored.batch.id, 'the active job, not the ended one');
      assert.equal(await store.claim('b', 60_000), null, 'held: nobody else gets it');
      assert.equal(await store.renew(stored.batch.id, 'a', 60_000), 'held');
      await store.requestCancel(stored.batch.id, 3);
      assert.equal(await store.renew(stored.batch.id, 'a', 60_000), 'cancelling');
      await store.release(stored.batch.id, 'a');
      assert.equal((await store.claim('b', 60_000))?.batch.id, stored.batch.id);
    });

    test('a replica whose lease passed is refused a save (before and after another claims it); the holder saves', async () => {
      const store = await open();
      const inserted = job(1, 'in_progress');
      await store.insertBatch(inserted);
      const stale = (await store.claim('a', 200)) as StoredBatch;
      assert.equal(stale.batch.id, inserted.batch.id);
      await new Promise((resolve) => setTimeout(resolve, 400));
      const id = inserted.batch.id;
      const overwrite = async (): Promise<unknown> => {
        stale.batch.status = 'finalizing';
        stale.batch.request_counts.completed = 99;
        const outcome = await store.saveBatch(stale, 'a');
        const kept = (await store.batch(id))?.batch;
        assert.deepEqual(
          [kept?.status, kept?.request_counts.completed],
          ['in_progress', 0],
          'the stale write did not land',
        );
        return outcome;
      };
      assert.equal(await overwrite(), 'lease-lost', 'expired, not yet taken: refused');
      const holder = (await store.claim('b', 60_000)) as StoredBatch;
      assert.equal(holder?.batch.id, id, 'the expired lease is taken over');
      assert.equal(await overwrite(), 'lease-lost', 'taken by another: refused');
      holder.batch.request_counts.completed = 3;
      assert.equal(await store.saveBatch(holder, 'b'), 'saved');
      assert.equal((await store.batch(id))?.batch.request_counts.completed, 3);
      assert.equal(await store.renew(id, 'a', 60_000), 'lost');
    });

    test('answers: stored, scanned back, read as output and error files', async () => {
      const store = await open();
      const stored = job(1);
      await store.insertBatch(stored);
      const results = await store.openResults(stored);
      await results.scanAnswered(() => assert.fail('nothing stored yet'));
      for (let i = 0; i < 50; i++) results.output.append(answer(`ok-${i}`));
      results.errors.append({ ...answer('bad-0'), response: null, error: { code: 'x', message: 'failed' } });
      await results.close();
      const output = await store.describeResults(stored, 'output', 9);
      const errors = await store.describeResults(stored, 'error', 9);
      const outText = await text(store.readContent(output.id));
      assert.equal(output.bytes, Buffer.byteLength(outText));
      assert.equal(outText.trim().split('\n').length, 50);
      assert.match(await text(store.readContent(errors.id)), /"custom_id":"bad-0"/);
      const again = await store.openResults(stored);
      const seen: string[] = [];
      await again.scanAnswered((id) => seen.push(id));
      await again.close();
      assert.deepEqual(
        seen.sort(),
        Array.from({ length: 50 }, (_, i) => `ok-${i}`).sort(),
        'the answers, not the failures: those are tried again',
      );
      assert.equal(output.filename, `${stored.batch.id}_output.jsonl`);
    });
  });
}

describe('postgres store: what sharing promises', () => {
  test('an expired lease is claimed by another owner; the old owner finds it lost', async () => {
    const store = new PgStore(await cluster.createDatabase(), join(tempDir(hooks), 'cache'));
    hooks.after(() => store.close());
    const stored = job(1);
    await store.insertBatch(stored);
    assert.equal((await store.claim('a', 200))?.batch.id, stored.batch.id);
    assert.equal(await store.claim('b', 200), null);
    const deadline = Date.now() + 10_000;
    let taken: StoredBatch | null = null;
    while (taken === null && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      taken = await store.claim('b', 60_000);
    }
    assert.equal(taken?.batch.id, stored.batch.id, 'taken over once expired');
    assert.equal(await store.renew(stored.batch.id, 'a', 200), 'lost');
    assert.deepEqual(await store.leaseOf(stored.batch.id), { owner: 'b', live: true });
  });

  test('two runners of one job, two connections: each custom_id stored once; a success replaces a failure', async () => {
    const url = await cluster.createDatabase();
    const one = new PgStore(url, join(tempDir(hooks), 'cache'));
    const two = new PgStore(url, join(tempDir(hooks), 'cache'));
    hooks.after(() => Promise.all([one.close(), two.close()]));
    const stored = job(1);
    await one.insertBatch(stored);
    const a = await one.openResults(stored);
    const b = await two.openResults(stored);
    b.errors.append({ ...answer('r-7'), response: null, error: { code: 'x', message: 'failed' } });
    await b.close();
    for (let i = 0; i < 2000; i++) {
      a.output.append(answer(`r-${i}`));
      b.output.append(answer(`r-${1999 - i}`));
    }
    await Promise.all([a.close(), b.close()]);
    assert.deepEqual(await a.counts(), { completed: 2000, failed: 0 });
    const output = await one.describeResults(stored, 'output', 1);
    const ids = (await text(two.readContent(output.id)))
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { custom_id: string }).custom_id);
    assert.equal(ids.length, 2000);
    assert.equal(new Set(ids).size, 2000);
  });

  test('schema: two stores migrating one database at once both work; a third finds it migrated', async () => {
    const url = await cluster.createDatabase();
    const stores = [0, 1, 2].map(() => new PgStore(url, join(tempDir(hooks), 'cache')));
    hooks.after(() => Promise.all(stores.map((s) => s.close())));
    await Promise.all(stores.slice(0, 2).map((s) => s.countByStatus()));
    assert.deepEqual(await stores[2]?.countByStatus(), {});
  });
});
