/**
 * Batch API replicas over one PostgreSQL (replicas as child processes, sims in this process): a
 * cancel through one replica stops the job on the replica running it at its next lease renewal; a
 * replica started while the database is down serves traffic, and its Batch API answers 503 until the
 * database is up. (PostgreSQL restarted mid-job: test/heavy/batch-replicas-pg-restart.test.ts.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generationRequests } from '../helpers/batch.js';
import {
  type BatchReplica,
  COUNT,
  createJob,
  get,
  LEASE_MS,
  leaseHolder,
  post,
  setUpShared,
  storedAnswers,
} from '../helpers/batch-replicas.js';
import { waitFor } from '../helpers/wait.js';

test('a cancel through a replica not running the job reaches its runner within one lease renewal', async (t) => {
  const { db, sims, replicas } = await setUpShared(t, 2);
  const id = await createJob(t, replicas[0] as BatchReplica);
  await waitFor(async () => (await storedAnswers(db, id)) >= COUNT / 5, {
    timeoutMs: 60_000,
    intervalMs: 50,
    what: 'a fifth of the answers stored',
  });
  const runner = await leaseHolder(db, id, replicas);
  const other = replicas.find((r) => r !== runner) as BatchReplica;
  assert.ok(runner && other);
  const cancelledAt = Date.now();
  const cancel = await post(other.url, `/v1/batches/${id}/cancel`, {});
  assert.equal(cancel.status, 200);
  assert.equal((cancel.json as { status: string }).status, 'cancelling');
  const done = await waitFor(
    async () => {
      const batch = JSON.parse((await get(other.url, `/v1/batches/${id}`)).text) as {
        status: string;
        request_counts: { completed: number };
      };
      return batch.status === 'cancelled' ? batch : null;
    },
    { timeoutMs: LEASE_MS / 3 + 5000, intervalMs: 50, what: 'cancelled within one renewal' },
  );
  const tookMs = Date.now() - cancelledAt;
  // Requests already on the wire when the job settled may still arrive: let them land first.
  let sentAtCancel = -1;
  let steadySince = Date.now();
  await waitFor(
    () => {
      const sent = generationRequests(sims);
      if (sent !== sentAtCancel) [sentAtCancel, steadySince] = [sent, Date.now()];
      return Date.now() - steadySince >= 500;
    },
    { timeoutMs: 10_000, intervalMs: 50, what: 'the requests on the wire at the cancel arrived' },
  );
  await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 3 + 500));
  assert.equal(generationRequests(sims), sentAtCancel, 'the runner sends nothing more');
  assert.ok(done.request_counts.completed < COUNT, 'stopped before the end');
  t.diagnostic(`cancel reached the runner in ${tookMs} ms (renewal every ${LEASE_MS / 3} ms)`);
});

test('PostgreSQL down at start: fleetgate starts and serves traffic, the Batch API is a 503 until it is up', async (t) => {
  const { cluster, replicas } = await setUpShared(t, 1, { stopDatabase: true });
  const replica = replicas[0] as BatchReplica;
  const chat = await post(replica.url, '/v1/chat/completions', {
    model: 'default',
    max_tokens: 2,
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(chat.status, 200, 'the traffic path is up');
  const down = await get(replica.url, '/v1/batches');
  assert.equal(down.status, 503);
  assert.match(down.text, /batch database \(batch\.database_url\) cannot be reached/);
  await cluster.start();
  await waitFor(async () => (await get(replica.url, '/v1/batches')).status === 200, {
    timeoutMs: 15_000,
    intervalMs: 200,
    what: 'the Batch API once the database is up (schema created then)',
  });
});
