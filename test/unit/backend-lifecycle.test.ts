/** fleet/backend-lifecycle.ts: the state machine a backend's probes, logs and traffic outcomes drive. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type BackendEvent, BackendLifecycle, type ProbeResult } from '../../src/fleet/backend-lifecycle.js';

const OK: ProbeResult = { ok: true, reachable: true, reason: null };
const REFUSED: ProbeResult = { ok: false, reachable: false, reason: 'connection refused' };
const WARMING: ProbeResult = { ok: false, reachable: true, reason: '/health 503 (warming up)', phase: 'warming_up' };
const TIMEOUT: ProbeResult = { ok: false, reachable: true, reason: 'no answer within 5000 ms' };

function machine({
  rise = 1,
  fall = 3,
  stallAfter = 60_000,
  hasLog = false,
  ejectionTime = 0,
  maxEjectionTime = 300_000,
} = {}) {
  let clock = 1_000_000;
  const lifecycle = new BackendLifecycle({
    rise,
    fall,
    stallAfter,
    hasLog,
    ejectionTime,
    maxEjectionTime,
    now: () => clock,
  });
  return {
    lifecycle,
    advance: (ms: number) => {
      clock += ms;
    },
    feed: (...events: BackendEvent[]) => events.map((event) => lifecycle.apply(event)),
    probe: (result: ProbeResult) => lifecycle.apply({ type: 'probe', result }),
  };
}

const log = {
  start: { type: 'log', event: { type: 'start' } } as const,
  loading: (done: number, total: number) =>
    ({
      type: 'log',
      event: { type: 'phase', phase: 'loading_weights', progress: { done, total }, etaSeconds: 4 },
    }) as const,
  capturing: {
    type: 'log',
    event: { type: 'phase', phase: 'capturing_cuda_graphs', progress: null, etaSeconds: null },
  } as const,
  ready: { type: 'log', event: { type: 'ready' } } as const,
  fatal: (reason: string) => ({ type: 'log', event: { type: 'fatal', reason } }) as const,
  fatalReason: (reason: string) => ({ type: 'log', event: { type: 'fatal_reason', reason } }) as const,
};

describe('backend lifecycle', () => {
  test('starts down, and a refused probe keeps it down with the reason', () => {
    const m = machine();
    assert.equal(m.lifecycle.state, 'down');
    assert.equal(m.probe(REFUSED), null);
    assert.equal(m.lifecycle.snapshot.reason, 'connection refused');
  });

  test('down -> starting when HTTP answers but is not ready (SGLang warm-up 503)', () => {
    const m = machine();
    const t = m.probe(WARMING);
    assert.deepEqual([t?.from, t?.to], ['down', 'starting']);
    assert.equal(m.lifecycle.snapshot.phase, 'warming_up');
    assert.equal(m.lifecycle.snapshot.reason, null, 'a warm-up 503 is normal, not a reason');
  });

  test('down -> starting from the log while the port is still closed', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start, log.loading(3, 8));
    m.probe(REFUSED);
    assert.equal(m.lifecycle.state, 'starting');
    assert.deepEqual(m.lifecycle.snapshot.progress, { done: 3, total: 8 });
    assert.equal(m.lifecycle.snapshot.phase, 'loading_weights');
    assert.equal(m.lifecycle.snapshot.etaSeconds, 4);
  });

  test('starting -> ready after `rise` passing probes, and not before', () => {
    const m = machine({ rise: 2 });
    m.probe(WARMING);
    assert.equal(m.probe(OK), null);
    assert.equal(m.lifecycle.state, 'starting');
    const t = m.probe(OK);
    assert.deepEqual([t?.from, t?.to], ['starting', 'ready']);
  });

  test('a failure between passes restarts the rise count', () => {
    const m = machine({ rise: 2 });
    m.probe(OK);
    m.probe(WARMING);
    m.probe(OK);
    assert.notEqual(m.lifecycle.state, 'ready');
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'ready');
  });

  test('down -> ready directly when the first probe passes (no log)', () => {
    const m = machine();
    const t = m.probe(OK);
    assert.deepEqual([t?.from, t?.to], ['down', 'ready']);
  });

  test('with a log, /health 200 is not enough: the ready line is required (old SGLang answers 200 in warm-up)', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start);
    m.probe(OK);
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'starting');
    m.feed(log.ready);
    assert.equal(m.lifecycle.state, 'ready');
  });

  test('ready stays ready through fewer than `fall` failed probes, then -> unhealthy', () => {
    const m = machine({ fall: 3 });
    m.probe(OK);
    assert.equal(m.probe(TIMEOUT), null);
    assert.equal(m.probe(TIMEOUT), null);
    const t = m.probe(TIMEOUT);
    assert.deepEqual([t?.from, t?.to], ['ready', 'unhealthy']);
    assert.match(m.lifecycle.snapshot.reason ?? '', /no answer/);
  });

  test('a passing probe resets the fall count', () => {
    const m = machine({ fall: 2 });
    m.probe(OK);
    m.probe(TIMEOUT);
    m.probe(OK);
    m.probe(TIMEOUT);
    assert.equal(m.lifecycle.state, 'ready');
  });

  test('unhealthy -> ready after `rise` passing probes', () => {
    const m = machine({ fall: 1, rise: 2 });
    m.probe(OK);
    m.probe(OK);
    m.probe(TIMEOUT);
    assert.equal(m.lifecycle.state, 'unhealthy');
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'unhealthy');
    const t = m.probe(OK);
    assert.deepEqual([t?.from, t?.to], ['unhealthy', 'ready']);
  });

  describe('ejection time (health.ejection_time)', () => {
    const DEAD_RANK = { type: 'no_progress', reason: '2 streams got no first byte (a dead DP rank?)' } as const;
    const ejectedAndBack = (m: ReturnType<typeof machine>) => {
      m.feed(DEAD_RANK);
      assert.equal(m.lifecycle.state, 'unhealthy');
    };

    test('an ejected backend whose probes pass stays out until the ejection time is over', () => {
      const m = machine({ ejectionTime: 30_000 });
      m.probe(OK);
      ejectedAndBack(m);
      m.advance(29_000);
      assert.equal(m.probe(OK), null, 'a passing probe inside the ejection time does not re-admit');
      m.advance(1_000);
      assert.equal(m.probe(OK)?.to, 'ready');
    });

    test('ejections in a row hold it out longer each time, up to max_ejection_time', () => {
      const m = machine({ ejectionTime: 30_000, maxEjectionTime: 75_000 });
      m.probe(OK);
      const heldFor = () => {
        m.feed(DEAD_RANK);
        let held = 0;
        while (m.lifecycle.state !== 'ready') {
          m.advance(1_000);
          held += 1_000;
          m.probe(OK);
          assert.ok(held <= 600_000, 'never re-admitted');
        }
        return held;
      };
      assert.deepEqual([heldFor(), heldFor(), heldFor()], [30_000, 60_000, 75_000]);
      assert.equal(m.lifecycle.snapshot.reason, null);
      m.feed(DEAD_RANK);
      assert.match(m.lifecycle.snapshot.reason ?? '', /dead DP rank\?\) \(ejection 4 in a row: out 75 s\)/);
    });

    test('each full ejection time spent ready takes one ejection off the count', () => {
      const m = machine({ ejectionTime: 10_000 });
      m.probe(OK);
      for (let i = 0; i < 3; i++) {
        ejectedAndBack(m);
        m.advance(10_000 * (i + 1));
        m.probe(OK);
        assert.equal(m.lifecycle.state, 'ready');
      }
      // Three in a row; 20 s ready forgives two: the next ejection is the second in a row.
      m.advance(20_000);
      ejectedAndBack(m);
      m.advance(19_000);
      assert.equal(m.probe(OK), null);
      m.advance(1_000);
      assert.equal(m.probe(OK)?.to, 'ready');
    });

    test('a restarted process starts clean: no hold', () => {
      const m = machine({ ejectionTime: 30_000, fall: 1 });
      m.probe(OK);
      ejectedAndBack(m);
      m.probe(REFUSED);
      m.advance(1_000);
      assert.equal(m.probe(OK)?.to, 'ready');
    });

    test('`fall` failures in a row on traffic hold it out; a refused connection does not (probes see that)', () => {
      const m = machine({ ejectionTime: 30_000, fall: 2 });
      m.probe(OK);
      m.feed({ type: 'traffic', outcome: 'http_5xx' }, { type: 'traffic', outcome: 'http_5xx' });
      assert.equal(m.lifecycle.state, 'unhealthy');
      m.advance(1_000);
      assert.equal(m.probe(OK), null, 'held out');
      m.advance(29_000);
      assert.equal(m.probe(OK)?.to, 'ready');
      m.feed({ type: 'traffic', outcome: 'connect_refused' });
      assert.equal(m.lifecycle.state, 'unhealthy');
      m.advance(1_000);
      assert.equal(m.probe(OK)?.to, 'ready');
    });

    test('more failures while ejected do not count as more ejections', () => {
      const m = machine({ ejectionTime: 30_000 });
      m.probe(OK);
      ejectedAndBack(m);
      m.feed(DEAD_RANK, { type: 'traffic', outcome: 'http_5xx' }, { type: 'traffic', outcome: 'timeout' });
      m.advance(30_000);
      assert.equal(m.probe(OK)?.to, 'ready');
    });
  });

  test('connection refused on live traffic ejects at once; probes re-admit', () => {
    const m = machine({ rise: 1 });
    m.probe(OK);
    const t = m.lifecycle.apply({ type: 'traffic', outcome: 'connect_refused' });
    assert.deepEqual([t?.from, t?.to], ['ready', 'unhealthy']);
    assert.match(m.lifecycle.snapshot.reason ?? '', /connect refused on live traffic/);
    const back = m.probe(OK);
    assert.deepEqual([back?.from, back?.to], ['unhealthy', 'ready']);
  });

  test('a reset on live traffic ejects at once', () => {
    const m = machine();
    m.probe(OK);
    m.lifecycle.apply({ type: 'traffic', outcome: 'reset' });
    assert.equal(m.lifecycle.state, 'unhealthy');
  });

  test('5xx and timeouts eject only after `fall` in a row; an ok answer in between resets', () => {
    const m = machine({ fall: 3 });
    m.probe(OK);
    m.feed({ type: 'traffic', outcome: 'http_5xx' }, { type: 'traffic', outcome: 'timeout' });
    m.feed({ type: 'traffic', outcome: 'ok' });
    m.feed({ type: 'traffic', outcome: 'http_5xx' }, { type: 'traffic', outcome: 'http_5xx' });
    assert.equal(m.lifecycle.state, 'ready');
    m.feed({ type: 'traffic', outcome: 'http_5xx' });
    assert.equal(m.lifecycle.state, 'unhealthy');
  });

  test('ready -> failed on a fatal log line even though /health still answers 200', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start, log.ready);
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'ready');
    const [t] = m.feed(log.fatal('Scheduler hit an exception: RuntimeError: boom'));
    assert.deepEqual([t?.from, t?.to], ['ready', 'failed']);
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'failed');
    assert.equal(m.lifecycle.snapshot.reason, 'Scheduler hit an exception: RuntimeError: boom');
  });

  test('a crash head fails at once; the exception line refines the reason without a transition', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start, log.ready);
    m.probe(OK);
    const [failed] = m.feed(log.fatal('Scheduler hit an exception'));
    assert.deepEqual([failed?.from, failed?.to, failed?.reason], ['ready', 'failed', 'Scheduler hit an exception']);
    const since = m.lifecycle.snapshot.since;
    m.advance(5);
    const [refined] = m.feed(log.fatalReason('Scheduler hit an exception: RuntimeError: boom'));
    assert.equal(refined, null, 'the state stays failed');
    assert.equal(m.lifecycle.state, 'failed');
    assert.equal(m.lifecycle.snapshot.reason, 'Scheduler hit an exception: RuntimeError: boom');
    assert.equal(m.lifecycle.snapshot.since, since, 'failed since the head');
  });

  test('a refined reason alone never fails a backend, nor one that restarted since its crash', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start, log.ready);
    m.probe(OK);
    m.feed(log.fatalReason('Scheduler hit an exception: RuntimeError: boom'));
    assert.equal(m.lifecycle.state, 'ready');
    assert.equal(m.lifecycle.snapshot.reason, null);
    m.feed(log.fatal('Scheduler hit an exception'), log.start);
    m.feed(log.fatalReason('Scheduler hit an exception: RuntimeError: boom'));
    assert.equal(m.lifecycle.state, 'starting');
    assert.equal(m.lifecycle.snapshot.reason, null);
  });

  test('starting -> failed on a fatal line; later phase lines do not clear it', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start, log.capturing, log.fatal('Capture cuda graph failed: CUDA out of memory'));
    assert.equal(m.lifecycle.state, 'failed');
    m.feed(log.loading(1, 2));
    m.probe(REFUSED);
    assert.equal(m.lifecycle.state, 'failed');
  });

  test('failed -> starting when the log shows a fresh start, then ready again', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start, log.fatal('Not enough memory'));
    m.probe(REFUSED);
    const [t] = m.feed(log.start);
    assert.deepEqual([t?.from, t?.to], ['failed', 'starting']);
    assert.equal(m.lifecycle.snapshot.reason, null);
    m.feed(log.ready);
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'ready');
  });

  test('failed -> starting when seen down and then up again (no new log line)', () => {
    const m = machine({ hasLog: true });
    m.feed(log.start, log.ready);
    m.probe(OK);
    m.feed(log.fatal('Scheduler hit an exception'));
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'failed', 'still up: stays failed');
    m.probe(REFUSED);
    assert.equal(m.lifecycle.state, 'failed');
    m.probe(WARMING);
    assert.equal(m.lifecycle.state, 'starting');
  });

  test('unhealthy -> starting when the backend went down and came back (a restart)', () => {
    const m = machine();
    m.probe(OK);
    m.lifecycle.apply({ type: 'traffic', outcome: 'connect_refused' });
    m.probe(REFUSED);
    assert.equal(m.lifecycle.state, 'unhealthy');
    m.probe(WARMING);
    assert.equal(m.lifecycle.state, 'starting');
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'ready');
  });

  test('any state -> draining on drain; resume returns to what the facts say', () => {
    const m = machine();
    m.probe(OK);
    const [t] = m.feed({ type: 'drain' });
    assert.deepEqual([t?.from, t?.to], ['ready', 'draining']);
    m.probe(OK);
    assert.equal(m.lifecycle.state, 'draining', 'probes do not undo an operator drain');
    const [back] = m.feed({ type: 'resume' });
    assert.deepEqual([back?.from, back?.to], ['draining', 'ready']);
  });

  test('draining a starting backend resumes to starting', () => {
    const m = machine();
    m.probe(WARMING);
    m.feed({ type: 'drain' });
    assert.equal(m.lifecycle.state, 'draining');
    m.feed({ type: 'resume' });
    assert.equal(m.lifecycle.state, 'starting');
  });

  test('starting with no log progress for stall_after shows reason "stalled", state stays starting', () => {
    const m = machine({ hasLog: true, stallAfter: 10_000 });
    m.feed(log.start, log.capturing);
    m.advance(9_999);
    m.feed({ type: 'tick' });
    assert.equal(m.lifecycle.snapshot.reason, null);
    m.advance(1);
    m.feed({ type: 'tick' });
    assert.equal(m.lifecycle.state, 'starting');
    assert.equal(m.lifecycle.snapshot.reason, 'stalled');
    m.feed(log.loading(2, 3));
    assert.equal(m.lifecycle.snapshot.reason, null, 'progress clears the stall');
  });

  test('a wrong-model answer keeps the backend out with the reason', () => {
    const m = machine();
    m.probe({ ok: false, reachable: true, reason: 'serves model "old", expected "new"' });
    assert.equal(m.lifecycle.state, 'starting');
    assert.equal(m.lifecycle.snapshot.reason, 'serves model "old", expected "new"');
  });

  test('since and ready_seconds follow the injected clock', () => {
    const m = machine();
    m.advance(2_500);
    m.probe(WARMING);
    const since = m.lifecycle.snapshot.since;
    m.advance(1_500);
    m.probe(OK);
    assert.equal(m.lifecycle.snapshot.since, since + 1_500);
    assert.equal(m.lifecycle.snapshot.readySeconds, 4);
  });

  test('last log line is kept, truncated when huge', () => {
    const m = machine({ hasLog: true });
    m.feed({ type: 'log_line', line: 'x'.repeat(1000) });
    assert.equal(m.lifecycle.snapshot.lastLogLine?.length, 301);
  });
});
