/**
 * A preload (`node --import`) for bench/overhead/ttfc-trace-run.ts: per-request timestamps (epoch ms)
 * in a proxy or sim process, keyed by the request's `x-trace-id` header, from Node's and undici's
 * diagnostics channels: when the request was parsed (`arrive`), sent upstream (`dispatch`), when the
 * upstream's headers were read (`upHeaders`) and the first body byte written back (`firstWrite`).
 * Also the process's event-loop utilization, CPU and loop delay from its first traced request on.
 * Written to `$TRACE_DIR/trace-<pid>.json` at exit.
 */
import dc from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

const HEADER = 'x-trace-id';
const now = () => performance.timeOrigin + performance.now();
const records = new Map();
const delay = monitorEventLoopDelay({ resolution: 5 });
let base = null;

const recordOf = (id) => {
  let record = records.get(id);
  if (record === undefined) {
    record = {};
    records.set(id, record);
  }
  return record;
};

/** undici's request headers: a flat array, a raw string or an object. */
function traceIdOf(headers) {
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2)
      if (String(headers[i]).toLowerCase() === HEADER) return String(headers[i + 1]);
    return null;
  }
  if (typeof headers === 'string') return /x-trace-id: ([^\r\n]+)/i.exec(headers)?.[1] ?? null;
  return headers?.[HEADER] ?? null;
}

dc.subscribe('http.server.request.start', ({ request }) => {
  const id = request.headers[HEADER];
  if (id === undefined) return;
  if (base === null) {
    base = { elu: performance.eventLoopUtilization(), cpu: process.cpuUsage() };
    delay.enable();
  }
  recordOf(id).arrive = now();
});

const upstreamIds = new WeakMap();
dc.subscribe('undici:request:create', ({ request }) => {
  const id = traceIdOf(request.headers);
  if (id === null) return;
  recordOf(id).dispatch = now();
  upstreamIds.set(request, id);
});
dc.subscribe('undici:request:headers', ({ request }) => {
  const id = upstreamIds.get(request);
  if (id !== undefined) recordOf(id).upHeaders = now();
});

const write = http.ServerResponse.prototype.write;
http.ServerResponse.prototype.write = function traced(...args) {
  const id = this.req?.headers?.[HEADER];
  if (id !== undefined) {
    const record = recordOf(id);
    record.firstWrite ??= now();
  }
  return write.apply(this, args);
};

process.on('exit', () => {
  if (base === null) return;
  const cpu = process.cpuUsage(base.cpu);
  const summary = {
    script: process.argv[1],
    elu: performance.eventLoopUtilization(base.elu).utilization,
    cpuSec: (cpu.user + cpu.system) / 1e6,
    loopDelayP50Ms: delay.percentile(50) / 1e6,
    loopDelayP99Ms: delay.percentile(99) / 1e6,
  };
  const file = `${process.env.TRACE_DIR}/trace-${process.pid}.json`;
  writeFileSync(file, JSON.stringify({ summary, requests: Object.fromEntries(records) }));
});
