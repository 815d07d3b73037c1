import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BackendLifecycle } from '../../src/fleet/backend-lifecycle.js';
import { ProgressWatchdog, type ReportedProgress } from '../../src/fleet/progress-watchdog.js';

const TIMEOUT = 60_000;

interface FakeRequest {
  bytes: number;
  ended: string | null;
  done(completed: boolean): void;
}

function harness({ timeoutMs = TIMEOUT, queued = false } = {}) {
  let clock = 1_000_000;
  const ready = new Set(['a', 'b']);
  const ejections: Array<[string, string]> = [];
  const watchdog = new ProgressWatchdog<string>({
    timeoutMs,
    now: () => clock,
    isReady: (backend) => ready.has(backend),
    hasOwnQueue: () => queued,
    eject: (backend, reason) => {
      ejections.push([backend, reason]);
      ready.delete(backend);
    },
  });
  const send = (backend: string, streamed: boolean): FakeRequest => {
    const request: FakeRequest = { bytes: 0, ended: null, done: () => {} };
    const tracked = watchdog.track(backend, {
      streamed,
      bytes: () => request.bytes,
      end: (reason) => {
        request.ended = reason;
        tracked.done(false);
      },
    });
    request.done = (completed) => tracked.done(completed);
    return request;
  };
  /** Advances the clock in 1 s ticks, as the fleet's timer would. */
  const run = (ms: number, each: () => void = () => {}) => {
    for (let t = 0; t < ms; t += 1_000) {
      clock += 1_000;
      each();
      watchdog.tick();
    }
  };
  return { watchdog, send, run, ejections, ready };
}

const report = (generationTokens: number, kvUsage = 0.1): ReportedProgress => ({
  generationTokens,
  promptTokens: 0,
  kvUsage,
});

describe('progress watchdog: no progress at all', () => {
  test('a backend holding requests with no byte, completion or counter rise for the timeout is ejected, with what was seen', () => {
    const h = harness();
    const requests = [h.send('a', false), h.send('a', true)];
    h.run(TIMEOUT - 1_000);
    assert.deepEqual(h.ejections, []);
    h.run(1_000);
    assert.equal(h.ejections.length, 1);
    assert.equal(h.ejections[0][0], 'a');
    assert.match(h.ejections[0][1], /no progress for 60s with 2 requests in flight/);
    for (const request of requests) assert.match(request.ended ?? '', /no progress/);
  });

  test('an idle backend is never judged, and the silence counts from its first request', () => {
    const h = harness();
    h.run(5 * TIMEOUT);
    const request = h.send('a', false);
    h.run(TIMEOUT - 1_000);
    assert.deepEqual(h.ejections, []);
    assert.equal(request.ended, null);
  });

  test('a non-streamed generation silent for 10 minutes is kept while the backend reports rising tokens', () => {
    const h = harness();
    const request = h.send('a', false);
    let tokens = 0;
    h.run(10 * 60_000, () => {
      tokens += 40;
      h.watchdog.reported('a', report(tokens));
    });
    assert.deepEqual(h.ejections, []);
    assert.equal(request.ended, null);
  });

  test('a long prefill is kept while the backend KV use grows (SGLang counts tokens only at completion)', () => {
    const h = harness();
    const request = h.send('a', false);
    let kv = 0;
    h.run(3 * TIMEOUT, () => {
      kv += 0.001;
      h.watchdog.reported('a', report(0, kv));
    });
    assert.deepEqual(h.ejections, []);
    assert.equal(request.ended, null);
  });

  test('frozen counters (a dead scheduler keeps its last figures) are no progress', () => {
    const h = harness();
    h.send('a', false);
    h.run(TIMEOUT, () => h.watchdog.reported('a', report(500, 0.3)));
    assert.equal(h.ejections.length, 1);
  });

  test('response bytes on any request, or a completed one, are progress', () => {
    const h = harness();
    const silent = h.send('a', false);
    const streaming = h.send('a', true);
    h.run(3 * TIMEOUT, () => {
      streaming.bytes += 10;
    });
    assert.deepEqual(h.ejections, []);
    streaming.done(true);
    h.run(TIMEOUT - 1_000);
    assert.deepEqual(h.ejections, []);
    h.run(1_000);
    assert.equal(h.ejections.length, 1, 'the lone silent request is judged from the last progress');
    assert.ok(silent.ended);
  });

  test('a queue flood: requests wait for minutes while running ones complete, never ejected', () => {
    const h = harness({ queued: true });
    const waiting = Array.from({ length: 20 }, () => h.send('a', true));
    let n = 0;
    h.run(5 * TIMEOUT, () => {
      // Every 5 s the oldest waiting stream starts and finishes (first byte, then done); more arrive.
      if (++n % 5 !== 0) return;
      const next = waiting.shift();
      if (next === undefined) return;
      next.bytes += 100;
      h.watchdog.tick();
      next.done(true);
      waiting.push(h.send('a', true));
    });
    assert.deepEqual(h.ejections, []);
  });

  test('a backend out of rotation is not ejected again, but requests it holds in silence are ended', () => {
    const h = harness();
    const silent = h.send('a', true);
    h.ready.delete('a'); // the probes caught the hang first: unhealthy
    h.run(TIMEOUT - 1_000);
    assert.equal(silent.ended, null);
    h.run(1_000);
    assert.deepEqual(h.ejections, []);
    assert.match(silent.ended ?? '', /out of rotation and made no progress for 60s/);
  });

  test('a request still progressing on a backend out of rotation (draining) is kept', () => {
    const h = harness();
    const streaming = h.send('a', true);
    h.ready.delete('a');
    h.run(3 * TIMEOUT, () => {
      streaming.bytes += 10;
    });
    assert.equal(streaming.ended, null);
  });

  test('once re-admitted, a backend is judged afresh: an old silence does not eject it', () => {
    const h = harness();
    h.send('a', false);
    h.ready.delete('a');
    h.run(2 * TIMEOUT);
    h.ready.add('a');
    h.send('a', false);
    h.run(TIMEOUT);
    assert.deepEqual(h.ejections, [], 'judged from the first tick after re-admission');
    h.run(1_000);
    assert.equal(h.ejections.length, 1);
  });

  test('timeout 0 turns it off', () => {
    const h = harness({ timeoutMs: 0 });
    const request = h.send('a', false);
    h.run(5 * TIMEOUT);
    assert.deepEqual(h.ejections, []);
    assert.equal(request.ended, null);
  });
});

describe('progress watchdog: stuck streams (one dead DP rank)', () => {
  /** Streams alternate between a live and a dead rank; live ones stream bytes every second. */
  function deadRank(h: ReturnType<typeof harness>) {
    const live: FakeRequest[] = [];
    const dead: FakeRequest[] = [];
    const nonStreamedOnDeadRank = h.send('a', false);
    let i = 0;
    const each = () => {
      for (const request of live) request.bytes += 5;
      if (i++ % 10 === 0) (i % 20 === 1 ? dead : live).push(h.send('a', true));
    };
    return { live, dead, nonStreamedOnDeadRank, each };
  }

  test('a stream with no first byte after the timeout while a later one got its own is ended; the second ejects', () => {
    const h = harness();
    const fleet = deadRank(h);
    h.run(TIMEOUT + 10_000, fleet.each);
    assert.ok(fleet.dead[0].ended, 'the first dead-rank stream is ended');
    assert.match(fleet.dead[0].ended ?? '', /no first byte in 60s while requests sent later to the backend got theirs/);
    assert.deepEqual(h.ejections, [], 'one stuck stream does not eject');
    h.run(30_000, fleet.each);
    assert.equal(h.ejections.length, 1);
    assert.match(h.ejections[0][1], /2 streams got no first byte in 60s while requests sent later did/);
    assert.match(
      fleet.nonStreamedOnDeadRank.ended ?? '',
      /was ejected/,
      'its silent non-streamed request goes elsewhere',
    );
    for (const request of fleet.live) assert.equal(request.ended, null, 'streams that progress are left alone');
  });

  test('streams that wait with no later stream answered are not stuck (a long prefill at the head)', () => {
    const h = harness();
    const first = h.send('a', true);
    const other = h.send('a', false);
    let tokens = 0;
    h.run(3 * TIMEOUT, () => {
      tokens += 1;
      h.watchdog.reported('a', report(tokens));
    });
    assert.equal(first.ended, null);
    assert.equal(other.ended, null);
    assert.deepEqual(h.ejections, []);
  });

  test('not judged while the backend reports a queue of its own (a stream may wait behind another rank)', () => {
    const h = harness({ queued: true });
    const fleet = deadRank(h);
    h.run(3 * TIMEOUT, fleet.each);
    assert.deepEqual(h.ejections, []);
    assert.equal(fleet.dead[0].ended, null);
  });

  test('the stuck count starts afresh after re-admission', () => {
    const h = harness();
    const fleet = deadRank(h);
    h.run(TIMEOUT + 10_000, fleet.each);
    assert.equal(h.ejections.length, 0);
    h.ready.delete('a');
    h.run(1_000);
    h.ready.add('a');
    h.run(1_000);
    assert.equal(h.ejections.length, 0);
  });
});

describe('backend lifecycle: no_progress', () => {
  test('ejects a ready backend as unhealthy with the reason; rise passing probes re-admit it', () => {
    const lifecycle = new BackendLifecycle({ rise: 1, fall: 3, stallAfter: 60_000, hasLog: false, now: () => 0 });
    lifecycle.apply({ type: 'probe', result: { ok: true, reachable: true, reason: null } });
    assert.equal(lifecycle.state, 'ready');
    const transition = lifecycle.apply({ type: 'no_progress', reason: 'no progress for 60s' });
    assert.equal(transition?.to, 'unhealthy');
    assert.equal(lifecycle.snapshot.reason, 'no progress for 60s');
    lifecycle.apply({ type: 'probe', result: { ok: true, reachable: true, reason: null } });
    assert.equal(lifecycle.state, 'ready');
  });
});
