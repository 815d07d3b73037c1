/**
 * Where tracing's CPU per request goes (issue #41), outside the proxy: fleetgate's own request
 * trace (src/proxy/request-trace.ts: a server span with the GenAI attributes of a chat body and one
 * attempt span) made at a steady rate in a process of its own, once per part:
 *   unsampled  `sample_ratio` 0: the request trace's own work, spans not recorded
 *   sdk        recorded by the SDK and handed to an exporter that drops them
 *   serialize  ... that serializes them as OTLP protobuf, then drops them
 *   export     the shipped OTLP/HTTP protobuf exporter, to a sink in the parent process
 * Each part's figure is that process's CPU per request (process.cpuUsage), timers and idle loop
 * included; the differences between parts are what each part adds.
 *   node --import tsx bench/overhead/tracing-parts-run.ts [--requests 30000] [--rate 2000] [--repeats 2]
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { RequestRecord } from '../../src/proxy/proxy-events.js';
import { RequestSpan } from '../../src/proxy/request-trace.js';
import { Tracing } from '../../src/tracing/tracing.js';
import { numberFlag, RAW_RESULTS_DIR, runBench, writeResults } from '../lib/cli.js';
import { stamp } from '../lib/machine.js';
import { OtlpSink } from '../lib/otlp-sink.js';
import { median } from '../lib/stats.js';

const PARTS = ['unsampled', 'sdk', 'serialize', 'export'] as const;
type Part = (typeof PARTS)[number];
const PATH = '/v1/chat/completions';
const TICK_MS = 50;
const run = promisify(execFile);

const body = Buffer.from(
  JSON.stringify({
    model: 'meta-llama/Llama-3.1-8B-Instruct',
    messages: [{ role: 'user', content: 'Say something about Paris. '.repeat(10) }],
    max_tokens: 64,
    temperature: 0.7,
    stream: false,
  }),
);
/** The last bytes of a non-streamed chat answer, where its usage and finish reason are. */
const tail = Buffer.from(
  '"finish_reason":"length"}],"usage":{"prompt_tokens":80,"completion_tokens":64,"total_tokens":144}}',
);
const headers = { host: '127.0.0.1:8000', 'content-type': 'application/json', 'user-agent': 'bench' };
const record: RequestRecord = {
  backend: 'gpu0',
  method: 'POST',
  path: PATH,
  status: 200,
  durationMs: 120,
  ttfbMs: 119,
  priorityClass: 'batch',
  queueMs: 0.2,
  bytes: 600,
  retries: 0,
  resumes: 0,
  backends: [],
  outcome: 'ok',
  completionTokens: 64,
  streamed: false,
};

function dropping(serialize: boolean): SpanExporter {
  return {
    export(spans, done) {
      if (serialize) ProtobufTraceSerializer.serializeRequest(spans);
      done({ code: 0 });
    },
    shutdown: async () => {},
  };
}

function tracingFor(part: Part, sinkUrl: string): Tracing {
  const config = {
    otlp_endpoint: sinkUrl,
    otlp_protocol: 'http/protobuf' as const,
    sample_ratio: part === 'unsampled' ? 0 : 1,
    service_name: 'fleetgate',
  };
  if (part === 'sdk' || part === 'serialize') return new Tracing(config, dropping(part === 'serialize'));
  return new Tracing(config);
}

function traceRequests(tracing: Tracing, count: number): void {
  for (let i = 0; i < count; i++) {
    const span = new RequestSpan(tracing, 'POST', PATH, headers, performance.now());
    span.describe(body);
    const attempt = span.attempt('gpu0', 0);
    attempt.responded(200);
    attempt.ended(null);
    span.end(record, { tail, ttftSeconds: null }, performance.now());
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `requests` at `rate` per second in ticks of TICK_MS, after a warm-up; CPU µs per request. */
async function measure(part: Part, sinkUrl: string, requests: number, rate: number): Promise<number> {
  const tracing = tracingFor(part, sinkUrl);
  const perTick = Math.max(1, Math.round((rate * TICK_MS) / 1000));
  const traceFor = async (ticks: number) => {
    for (let i = 0; i < ticks; i++) {
      traceRequests(tracing, perTick);
      await sleep(TICK_MS);
    }
  };
  await traceFor(Math.ceil(requests / perTick / 5));
  await tracing.flush();
  const before = process.cpuUsage();
  const ticks = Math.ceil(requests / perTick);
  await traceFor(ticks);
  await tracing.flush();
  const used = process.cpuUsage(before);
  await tracing.shutdown();
  return (used.user + used.system) / (ticks * perTick);
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      requests: { type: 'string' },
      rate: { type: 'string' },
      repeats: { type: 'string' },
      part: { type: 'string' },
      sink: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const requests = numberFlag(values.requests, 'requests', 30_000);
  const rate = numberFlag(values.rate, 'rate', 2_000);
  if (values.part !== undefined) {
    const us = await measure(values.part as Part, values.sink ?? '', requests, rate);
    process.stdout.write(`${us}\n`);
    return 0;
  }
  const repeats = numberFlag(values.repeats, 'repeats', 2);
  const started = Date.now();
  const sink = await OtlpSink.start();
  const self = fileURLToPath(import.meta.url);
  const perPart: Record<Part, number[]> = { unsampled: [], sdk: [], serialize: [], export: [] };
  for (let r = 0; r < repeats; r++) {
    for (const part of PARTS) {
      const args = ['--import', 'tsx', self, '--part', part, '--sink', sink.url, '--requests', String(requests)];
      // Asynchronously: the sink in this process answers the child's exports meanwhile.
      const { stdout } = await run(process.execPath, [...args, '--rate', String(rate)]);
      const us = Number(stdout.trim());
      perPart[part].push(us);
      process.stdout.write(`${part}: ${us.toFixed(1)} µs CPU per request\n`);
    }
  }
  await sink.close();
  const medians = Object.fromEntries(PARTS.map((p) => [p, median(perPart[p])])) as Record<Part, number>;
  const added = {
    recording: medians.sdk - medians.unsampled,
    serialization: medians.serialize - medians.sdk,
    http_export: medians.export - medians.serialize,
  };
  process.stdout.write(
    `median µs per request: ${PARTS.map((p) => `${p} ${medians[p].toFixed(1)}`).join(', ')}\n` +
      `added: recording ${added.recording.toFixed(1)}, serialization ${added.serialization.toFixed(1)}, ` +
      `HTTP export ${added.http_export.toFixed(1)}; exports ${sink.exports} of ${(sink.bytes / Math.max(1, sink.exports) / 1024).toFixed(1)} KiB\n`,
  );
  const out = values.out ?? `${RAW_RESULTS_DIR}/overhead-tracing-parts-${stamp()}.json`;
  writeResults(out, 'overhead-tracing-parts', started, {
    requests,
    rate,
    repeats,
    cpu_us_per_request: perPart,
    median_cpu_us_per_request: medians,
    added_us_per_request: added,
  });
  process.stdout.write(`${out}\n`);
  return 0;
}

runBench('overhead-tracing-parts', main);
