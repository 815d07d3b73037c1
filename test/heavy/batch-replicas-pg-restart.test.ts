/**
 * PostgreSQL restarted under a running Batch API job (a replica as a child process, sims in this
 * process): the job pauses and completes once the database is back, every custom_id exactly once;
 * meanwhile the traffic path serves every ordinary request and the Batch API answers 503 naming why.
 * (A cancel through another replica, and PostgreSQL down at start: test/integration/batch-replicas-pg.test.ts.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  assertCompletes,
  type BatchReplica,
  COUNT,
  createJob,
  get,
  post,
  setUpShared,
  storedAnswers,
} from '../helpers/batch-replicas.js';
import { HEAVY } from '../helpers/heavy.js';
import { waitFor } from '../helpers/wait.js';

test(
  'PostgreSQL restarted mid-job: the job completes, nothing lost or twice; ordinary traffic served meanwhile',
  HEAVY,
  async (t) => {
    const { cluster, db, replicas } = await setUpShared(t, 1);
    const replica = replicas[0] as BatchReplica;
    const id = await createJob(t, replica);
    await waitFor(async () => (await storedAnswers(db, id)) >= COUNT / 4, {
      timeoutMs: 60_000,
      intervalMs: 50,
      what: 'a quarter of the answers stored',
    });
    await cluster.stop();
    const downSince = Date.now();
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob(['{}\n']), 'input.jsonl');
    const upload = await fetch(`${replica.url}/v1/files`, { method: 'POST', body: form });
    assert.equal(upload.status, 503, 'an upload while the database is down is refused, not hung');
    assert.match(await upload.text(), /batch\.database_url/);
    let ordinary = 0;
    let refusals = 0;
    while (Date.now() - downSince < 4000) {
      const chat = await post(replica.url, '/v1/chat/completions', {
        model: 'default',
        max_tokens: 2,
        messages: [{ role: 'user', content: `ordinary ${ordinary}` }],
      });
      assert.equal(chat.status, 200, 'the traffic path serves every ordinary request');
      ordinary++;
      const batch = await get(replica.url, `/v1/batches/${id}`);
      if (batch.status === 503) {
        assert.match(batch.text, /batch database.*cannot be reached/);
        refusals++;
      }
    }
    assert.ok(ordinary > 10, `${ordinary} ordinary requests while the database was down`);
    assert.ok(refusals > 0, 'the Batch API answered 503 with the reason');
    const metrics = await get(replica.url, '/metrics');
    assert.match(metrics.text, /fleetgate_batch_store_up 0/, 'the store counted down');
    await cluster.start();
    await db.end().catch(() => {});
    await assertCompletes(replica, id, 60_000);
  },
);
