/**
 * `fleetgate batch` in bench:balance's virtual-time model (bench/balance/model.ts): the same KV-limited
 * fleet (the simulator's real `Engine`, one server 1.3x slower) behind fleetgate's real queue,
 * policy, adaptive cap and load reports, and a client that does what the batch runner
 * (src/batch/batch-runner.ts) does: keep `limit()` requests in flight, look at the limit again on
 * every answer and every 100 ms. The limit is the real `ConcurrencyControl`: fixed N, or auto
 * (`autoConcurrency`) from the fleet as `GET /fleet/status` would show it (admin/fleet-summary.ts
 * `backendStatus` of every backend), read every second. No sockets and no real clock, so auto can
 * be set against a sweep of N over many workload seeds without the noise of a shared machine.
 */
import { backendStatus } from '../../src/admin/fleet-summary.js';
import { ConcurrencyControl, type FleetView } from '../../src/batch/auto-concurrency.js';
import type { FleetRegistry } from '../../src/fleet/registry.js';
import { fleetgate, modelEngines, modelRegistry, NETWORK_MS, simRequest, VirtualClock } from '../balance/model.js';
import type { Job } from '../balance/workload.js';

/** `ConcurrencyControl`'s default poll of `/fleet/status`, and the runner's look at `limit()` while waiting. */
const STATUS_POLL_MS = 1000;
const LIMIT_POLL_MS = 100;

export interface BatchModelRun {
  makespanSec: number;
  /** The limit auto (or N) set, over the job: mean and largest. */
  meanLimit: number;
  maxLimit: number;
}

/** What `GET /fleet/status` says of the model's fleet: every backend ready (the model has no lifecycle). */
function modelFleetView(registry: FleetRegistry): FleetView {
  const backends = registry.list().map((backend) => ({
    ...backendStatus(backend),
    state: 'ready',
    serving: { running: backend.reported?.running ?? null, queued: backend.reported?.queued ?? null },
  }));
  return { ready: backends.length, total: backends.length, waiting: {}, backends };
}

/** One batch job through fleetgate in virtual time, with `--concurrency N` or (null) auto. */
export async function modelBatchJob(opts: {
  jobs: Job[];
  concurrency: number | null;
  kvTokens?: number;
}): Promise<BatchModelRun> {
  const { jobs } = opts;
  const clock = new VirtualClock({ settle: true });
  const { base, engines } = modelEngines(clock, opts.kvTokens);
  const registry = modelRegistry();
  let finished = 0;
  let makespan = 0;
  const done = () => finished === jobs.length;
  const route = fleetgate({ capped: true, clock, engines, maxRunning: base.maxRunningRequests, done, registry });
  const control = new ConcurrencyControl({
    fixed: opts.concurrency,
    fetchStatus: async () => modelFleetView(registry),
  });

  let next = 0;
  let active = 0;
  let limitSum = 0;
  let limitSamples = 0;
  let maxLimit = 0;
  const send = (job: Job) => {
    active++;
    route((server, release) => {
      const request = simRequest(engines[server], job.body, {
        onToken: () => {},
        onFinish: () =>
          clock.schedule(() => {
            release();
            finished++;
            makespan = clock.now;
            clock.schedule(() => {
              active--;
              pump();
            }, NETWORK_MS);
          }, NETWORK_MS),
      });
      clock.schedule(() => engines[server].submit(request), NETWORK_MS);
    });
  };
  const pump = () => {
    while (next < jobs.length && active < control.limit()) send(jobs[next++]);
  };
  const poll = () => {
    void control.poll().then(pump);
    const limit = control.limit();
    limitSum += limit;
    limitSamples++;
    maxLimit = Math.max(maxLimit, limit);
    if (!done()) clock.schedule(poll, STATUS_POLL_MS);
  };
  const tick = () => {
    pump();
    if (!done()) clock.schedule(tick, LIMIT_POLL_MS);
  };
  // After the first load report (scheduled at 0 by `fleetgate`), as a batch starts on a fleet already read.
  clock.schedule(poll, 0);
  clock.schedule(tick, LIMIT_POLL_MS);
  await clock.run();
  if (finished !== jobs.length) throw new Error(`batch model: ${finished} of ${jobs.length} requests finished`);
  return { makespanSec: makespan / 1000, meanLimit: limitSum / Math.max(1, limitSamples), maxLimit };
}
