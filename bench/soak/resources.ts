/**
 * fleetgate's own resources over a soak, from its `/metrics` (scraped every few seconds): prom-client's
 * process metrics (RSS, heap used, open fds, active handles, event-loop delay p99 from
 * `perf_hooks.monitorEventLoopDelay`) and `fleetgate_upstream_connections` per backend. Pure: parsing
 * a scrape and comparing the first minute with the last.
 */

export interface ResourceSample {
  /** Since the soak started. */
  tMs: number;
  rssBytes: number;
  heapUsedBytes: number;
  openFds: number;
  activeHandles: number;
  eventLoopP99Ms: number;
  socketsByBackend: Record<string, number>;
  /** From the same scrape, for the timeline. */
  readyBackends: number;
  inflight: number;
  queued: number;
}

function sum(text: string, name: string): number {
  let total = 0;
  let seen = false;
  const pattern = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm');
  for (const match of text.matchAll(pattern)) {
    total += Number(match[1]);
    seen = true;
  }
  return seen ? total : Number.NaN;
}

/** One scrape of fleetgate's `/metrics`. */
export function parseSample(text: string, tMs: number): ResourceSample {
  const socketsByBackend: Record<string, number> = {};
  for (const match of text.matchAll(/^fleetgate_upstream_connections\{backend="([^"]+)"\} (\S+)$/gm)) {
    socketsByBackend[match[1]] = Number(match[2]);
  }
  return {
    tMs,
    rssBytes: sum(text, 'process_resident_memory_bytes'),
    heapUsedBytes: sum(text, 'nodejs_heap_size_used_bytes'),
    openFds: sum(text, 'process_open_fds'),
    activeHandles: sum(text, 'nodejs_active_handles_total'),
    eventLoopP99Ms: sum(text, 'nodejs_eventloop_lag_p99_seconds') * 1000,
    socketsByBackend,
    readyBackends: sum(text, 'fleetgate_backend_up'),
    inflight: sum(text, 'fleetgate_backend_inflight_requests'),
    queued: sum(text, 'fleetgate_queue_waiting_requests'),
  };
}

interface WindowFigures {
  rssMiB: number;
  heapUsedMiB: number;
  openFds: number;
  activeHandles: number;
  eventLoopP99Ms: number;
  sockets: number;
}

export interface ResourceReport {
  samples: number;
  firstMinute: WindowFigures;
  lastMinute: WindowFigures;
  /** Last minute over first minute, minus 1 (0.05 = 5% growth). */
  growth: { rss: number; openFds: number; heapUsed: number; activeHandles: number };
  /** The worst event-loop delay p99 seen in any sample. */
  maxEventLoopP99Ms: number;
}

const MiB = 2 ** 20;

function mean(values: number[]): number {
  const finite = values.filter(Number.isFinite);
  return finite.length === 0 ? Number.NaN : finite.reduce((a, b) => a + b, 0) / finite.length;
}

function figures(samples: readonly ResourceSample[]): WindowFigures {
  return {
    rssMiB: mean(samples.map((s) => s.rssBytes)) / MiB,
    heapUsedMiB: mean(samples.map((s) => s.heapUsedBytes)) / MiB,
    openFds: mean(samples.map((s) => s.openFds)),
    activeHandles: mean(samples.map((s) => s.activeHandles)),
    eventLoopP99Ms: Math.max(...samples.map((s) => s.eventLoopP99Ms).filter(Number.isFinite), 0),
    sockets: mean(samples.map((s) => Object.values(s.socketsByBackend).reduce((a, b) => a + b, 0))),
  };
}

/** First `windowMs` of samples against the last `windowMs` (the first window starts after `warmupMs`). */
export function compareWindows(samples: readonly ResourceSample[], windowMs: number, warmupMs = 0): ResourceReport {
  if (samples.length < 2) throw new Error(`resources: ${samples.length} samples, need at least 2`);
  const start = samples[0].tMs + warmupMs;
  const end = samples[samples.length - 1].tMs;
  let first = samples.filter((s) => s.tMs >= start && s.tMs < start + windowMs);
  let last = samples.filter((s) => s.tMs > end - windowMs);
  if (first.length === 0) first = [samples[0]];
  if (last.length === 0) last = [samples[samples.length - 1]];
  const a = figures(first);
  const b = figures(last);
  return {
    samples: samples.length,
    firstMinute: a,
    lastMinute: b,
    growth: {
      rss: b.rssMiB / a.rssMiB - 1,
      openFds: b.openFds / a.openFds - 1,
      heapUsed: b.heapUsedMiB / a.heapUsedMiB - 1,
      activeHandles: b.activeHandles / a.activeHandles - 1,
    },
    maxEventLoopP99Ms: Math.max(...samples.map((s) => s.eventLoopP99Ms).filter(Number.isFinite), 0),
  };
}

/** Why the resources fail the run (growth over `limit`, 0.1 = 10%, of RSS or open fds); empty when flat. */
export function resourceFailures(report: ResourceReport, limit = 0.1): string[] {
  const failures: string[] = [];
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  if (!(report.growth.rss <= limit)) failures.push(`RSS grew ${pct(report.growth.rss)} first to last minute`);
  if (!(report.growth.openFds <= limit))
    failures.push(`open fds grew ${pct(report.growth.openFds)} first to last minute`);
  return failures;
}
