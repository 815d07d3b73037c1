/**
 * Faults of the shared Batch API (replicas as child processes, one PostgreSQL, sims in this
 * process): the replica running a job is SIGKILLed (found from the job's lease) and another
 * finishes it; two replicas run one job at once (the runner stopped past its lease, then resumed):
 * each time the output holds every custom_id exactly once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generationRequests } from '../helpers/batch.js';
import {
  assertCompletes,
  type BatchReplica,
  COUNT,
  createJob,
  LEASE_MS,
  leaseHolder,
  setUpShared,
  storedAnswers,
} from '../helpers/batch-replicas.js';
import { HEAVY } from '../helpers/heavy.js';
import { waitFor } from '../helpers/wait.js';

test(
  'SIGKILL of the replica running a job: another finishes it within batch.lease + 10 s, each answer once',
  HEAVY,
  async (t) => {
    const { db, sims, replicas } = await setUpShared(t, 2);
    const before = generationRequests(sims);
    const id = await createJob(t, replicas[0] as BatchReplica);
    await waitFor(async () => (await storedAnswers(db, id)) >= COUNT / 4, {
      timeoutMs: 60_000,
      intervalMs: 50,
      what: 'a quarter of the answers stored',
    });
    const runner = await leaseHolder(db, id, replicas);
    assert.ok(runner, 'the lease names a replica');
    runner.child.kill('SIGKILL');
    await runner.exited;
    const killedAt = Date.now();
    const sentAtKill = generationRequests(sims) - before;
    const inFlight = sentAtKill - (await storedAnswers(db, id));
    const other = replicas.find((r) => r !== runner) as BatchReplica;
    await assertCompletes(other, id, LEASE_MS + 10_000);
    assert.ok(Date.now() - killedAt <= LEASE_MS + 10_000, 'finished within batch.lease + 10 s');
    const sent = generationRequests(sims) - before;
    assert.ok(inFlight >= 0 && inFlight < COUNT / 2, `${inFlight} sent but not stored at the kill`);
    assert.ok(sent <= COUNT + inFlight, `engines got ${sent}: at most ${COUNT} + ${inFlight} in flight at the kill`);
  },
);

test(
  'two replicas run one job at once (its runner stopped past its lease, then resumed): each answer once',
  HEAVY,
  async (t) => {
    const { db, sims, replicas } = await setUpShared(t, 2);
    const before = generationRequests(sims);
    const id = await createJob(t, replicas[1] as BatchReplica);
    await waitFor(async () => (await storedAnswers(db, id)) >= COUNT / 5, {
      timeoutMs: 60_000,
      intervalMs: 50,
      what: 'a fifth of the answers stored',
    });
    const first = await leaseHolder(db, id, replicas);
    assert.ok(first);
    first.child.kill('SIGSTOP');
    const second = replicas.find((r) => r !== first) as BatchReplica;
    try {
      await waitFor(async () => (await leaseHolder(db, id, replicas)) === second, {
        timeoutMs: LEASE_MS + 10_000,
        intervalMs: 100,
        what: 'the expired lease taken over',
      });
      await waitFor(async () => (await storedAnswers(db, id)) >= COUNT / 2, {
        timeoutMs: 30_000,
        intervalMs: 50,
        what: 'the second runner under way',
      });
    } finally {
      first.child.kill('SIGCONT');
    }
    await assertCompletes(second, id, 60_000);
    const sent = generationRequests(sims) - before;
    assert.ok(sent > COUNT, `both ran some requests (${sent} sent for ${COUNT})`);
    assert.equal(first.child.exitCode, null, 'the first replica runs on');
  },
);
