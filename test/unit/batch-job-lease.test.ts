/**
 * A runner whose lease passed while it ran (a pause, a stalled renewal) and whose job another
 * replica then claimed: its next save is refused as `lease-lost` and the run stops where it is,
 * sending nothing more, saving nothing more, and leaving the new holder's lease alone. Renewals are
 * stubbed to report the lease held, so the refused save is the only way the runner can learn it.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { BatchJobs } from '../../src/batch/batch-jobs.js';
import type { SendOutcome } from '../../src/batch/batch-sender.js';
import type { LeaseState } from '../../src/batch/batch-store.js';
import { DirStore } from '../../src/batch/dir-store.js';
import { chatLine, tempDir } from '../helpers/batch.js';
import { waitFor } from '../helpers/wait.js';

/** Renewals that extend nothing: the lease passes while the runner believes it holds it. */
class StalledRenewals extends DirStore {
  override async renew(): Promise<LeaseState> {
    return 'held';
  }
}

const LEASE_MS = 300;
const REQUESTS = 100;
/** Answered at once; the rest wait until their run is stopped. */
const ANSWERED = 10;

test('a replica whose lease passed and was taken over is refused its save and stops its run', async (t) => {
  const store = new StalledRenewals(tempDir(t));
  const lines = Array.from({ length: REQUESTS }, (_, i) => chatLine(`r-${i}`)).join('\n');
  const fileId = await store.writeContent(Readable.from([Buffer.from(`${lines}\n`)]));
  await store.describeFile(fileId, 'input.jsonl', 'batch', 1);
  let sent = 0;
  const send = (_request: unknown, signal: AbortSignal): Promise<SendOutcome> => {
    sent++;
    if (sent <= ANSWERED)
      return Promise.resolve({ kind: 'answer', status: 200, requestId: `q-${sent}`, body: { ok: true }, tokens: 1 });
    return new Promise((resolve) =>
      signal.addEventListener('abort', () => resolve({ kind: 'not_sent', reason: 'stopped' }), { once: true }),
    );
  };
  // Polls far apart: the replica's own claim loop would otherwise take its expired lease back.
  const jobs = new BatchJobs({ store, maxFileSize: 1 << 20, leaseMs: LEASE_MS, pollMs: 60_000 });
  t.after(() => jobs.stop());
  const backend = { name: 'a', state: 'ready', inflight: 0, inflight_cap: 8 };
  jobs.start({ send, fetchStatus: async () => ({ ready: 1, total: 1, backends: [backend] }) });
  const { id } = await jobs.create({
    input_file_id: fileId,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  await waitFor(async () => sent > ANSWERED, { timeoutMs: 10_000, what: 'the run under way' });
  await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 100));
  const taken = await store.claim('another-replica', 60_000);
  assert.equal(taken?.batch.id, id, 'the passed lease is taken over');

  await waitFor(async () => jobs.runningIds().length === 0, { timeoutMs: 5000, what: 'the run stopped' });
  const sentAtStop = sent;
  assert.ok(sentAtStop < REQUESTS, `stopped early: ${sentAtStop} of ${REQUESTS} sent`);
  const stored = await store.batch(id);
  assert.equal(stored?.batch.status, 'in_progress', 'left as the new holder found it, not finished');
  assert.equal(await DirStore.prototype.renew.call(store, id, 'another-replica', 60_000), 'held', 'its lease kept');
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(sent, sentAtStop, 'nothing sent after the stop');
});
