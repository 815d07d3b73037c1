/**
 * The progress watchdog with no `log:` configured, against simulated backends under load: a backend
 * whose scheduler died (HTTP alive), one that hangs, and one with a dead DP rank each leave rotation
 * within `health.progress_timeout` + 5 s, and every request in flight on them ends as it should
 * (non-streamed ones re-sent and answered, streams ended with the error event and no [DONE]).
 * progress-watchdog-healthy.test.ts has the healthy slow cases.
 */
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import type { SimServer } from '../../src/sim/index.js';
import { startReadyFleet } from '../helpers/fleet.js';
import { CONFIG, load, PROGRESS_TIMEOUT_MS, transitions } from '../helpers/progress-load.js';
import { waitFor } from '../helpers/wait.js';

interface FaultCase {
  config?: Record<string, unknown>;
  /** Concurrent client loops (a batch script's in-flight requests). */
  clients?: number;
  maxTokens?: number;
  streamed?: (client: number, n: number) => boolean;
  /** When traffic can first see the fault; the deadline counts from then (default: at injection). */
  visible?: (sim: SimServer) => boolean;
  /** Wait for this before injecting the fault (default: nothing more than traffic on gpu0). */
  injectWhen?: (sim: SimServer) => boolean;
}

// Bounded but generous: the 2-core machine these run on may be 10x slower than nominal.
const EJECTION_WAIT_MS = PROGRESS_TIMEOUT_MS + 30_000;

async function faultUnderLoad(
  t: TestContext,
  inject: (sim: SimServer) => void,
  reason: RegExp,
  {
    config = CONFIG,
    clients = 9,
    maxTokens = 150,
    streamed = (i, n) => (i + n) % 2 === 0,
    visible = () => true,
    injectWhen = () => true,
  }: FaultCase = {},
) {
  // Old SGLang: `/health` answers 200 whatever the scheduler does, so only the watchdog can tell.
  const spec = { version: 'old', engine: { tokenMs: 4 } } as const;
  const { gateway, url, sims } = await startReadyFleet(t, [spec, spec, spec], config);
  const seen = transitions(gateway);
  const traffic = load(url, clients, maxTokens, streamed);
  await waitFor(() => sims[0].counters.requests >= 6 && injectWhen(sims[0]), {
    timeoutMs: 30_000,
    what: 'traffic on gpu0',
  });
  inject(sims[0]);
  await waitFor(() => visible(sims[0]), { timeoutMs: EJECTION_WAIT_MS, what: 'traffic meeting the fault' });
  const visibleAt = performance.now();
  const ejected = await waitFor(() => seen.find((e) => e.backend === 'gpu0' && e.to === 'unhealthy'), {
    timeoutMs: EJECTION_WAIT_MS,
    what: 'gpu0 ejected',
  });
  const tookMs = ejected.at - visibleAt;
  assert.ok(tookMs <= PROGRESS_TIMEOUT_MS + 5_000, `ejected ${Math.round(tookMs)} ms after traffic met the fault`);
  assert.match(ejected.reason ?? '', reason);
  // Some more traffic after the ejection, then everything must have ended.
  const answeredAtEjection = traffic.outcomes.length;
  await waitFor(() => traffic.outcomes.length >= answeredAtEjection + 2 * clients, {
    timeoutMs: 60_000,
    what: 'answers after the ejection',
  });
  const outcomes = await traffic.stop();
  for (const o of outcomes) {
    assert.equal(o.error, null, 'no request hangs or fails at the client');
    if (!o.streamed) assert.ok(o.complete && o.status === 200, 'every plain request is answered');
    else assert.ok(o.complete !== o.errorEvent, 'every stream ends complete or with the error event, never both');
  }
  assert.ok(
    seen.every((e) => e.backend === 'gpu0'),
    'healthy backends are never ejected',
  );
  return { outcomes, gateway };
}

test('scheduler_dead_http_alive, stream resume off: ejected within progress_timeout + 5 s; streams on it end with the error event, plain requests re-sent', async (t) => {
  const { outcomes } = await faultUnderLoad(t, (sim) => sim.killScheduler(), /no progress for .* requests? in flight/, {
    // stream-resume.test.ts has the same fault with resume on.
    config: { ...CONFIG, retry: { resume_limit: 0 } },
    // A stream already answering when the scheduler dies: it cannot be re-sent, so it must be cut.
    injectWhen: (sim) => sim.counters.openStreams > 0,
  });
  assert.ok(
    outcomes.some((o) => o.streamed && o.errorEvent),
    'a stream cut on the dead backend got the error event',
  );
});

test('hang_after_ready: ejected within progress_timeout + 5 s; every request in flight ends', async (t) => {
  // Whether a stream was mid-answer on gpu0 when it hung is up to timing (those get the error event,
  // the others are re-sent); the scheduler_dead case above asserts the error event itself.
  await faultUnderLoad(t, (sim) => sim.hang(), /no progress for/);
});

test('dp_rank_dead: two streams with no first byte while later ones got theirs eject the backend; stuck requests are re-sent; its passing probes do not re-admit it', async (t) => {
  const { outcomes, gateway } = await faultUnderLoad(
    t,
    (sim) => sim.killDpRank(0.5),
    /(?:[2-9]|\d{2,}) streams got no first byte .* while requests sent later did/,
    {
      // Its `/health` stays 200 and is probed every 100 ms: the default health.ejection_time (30 s)
      // keeps it out of rotation.
      config: { ...CONFIG, health: { ...CONFIG.health, starting_interval: '100ms' } },
      // A generation script: eight requests in flight per backend, three in four streamed. Stuck
      // requests keep gpu0 the most loaded, so least-loaded sends it nothing new once as many are stuck
      // there as the others run: with four per backend, four stuck with at most one stream among them
      // (~5 %) left the fault unseen; with eight that is ~0.04 %.
      clients: 24,
      maxTokens: 60,
      streamed: (i, n) => (i + n) % 4 !== 0,
      // The rule judges streams that land on the dead rank (running ones finish, a plain one there
      // waits for the ejection): the deadline counts from the second such stream.
      visible: (sim) => sim.counters.deadRankStreams >= 2,
    },
  );
  const gpu0 = gateway.fleet.registry.get('gpu0')!;
  let passed = 0;
  const onProbe = (backend: unknown, result: { ok: boolean }) => {
    if (backend === gpu0 && result.ok) passed++;
  };
  gateway.fleet.registry.on('probe', onProbe);
  t.after(() => gateway.fleet.registry.off('probe', onProbe));
  await waitFor(() => passed >= 5, { timeoutMs: 10_000, what: 'five more passing probes of gpu0' });
  assert.equal(gpu0.state, 'unhealthy', 'a dead rank that /health cannot see stays out');
  // The dead rank sends no byte at all, so every stuck request could be re-sent whole.
  assert.ok(outcomes.every((o) => o.complete));
  assert.ok(
    outcomes.some((o) => !o.streamed),
    'plain requests ran too (those on the dead rank are re-sent when the backend is ejected)',
  );
});
