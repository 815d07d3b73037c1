/**
 * An OTLP/HTTP trace receiver (`POST /v1/traces`) for tests, and a header tap in front of a backend.
 * Both encodings are decoded: `http/protobuf` with OpenTelemetry's own generated protobuf code for
 * ExportTraceServiceRequest (the protobufjs root that @opentelemetry/otlp-transformer shipped up to
 * 0.217, installed as the dev dependency `otlp-proto-root`; later versions only encode), `http/json`
 * (OTLP's JSON mapping: hex ids, attributes as key/value pairs) with JSON.parse. Both give the same
 * object shape but the ids: bytes in protobuf, hex in JSON.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import protoRoot from 'otlp-proto-root/build/src/generated/root.js';

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};

/** A trace or span id: hex in OTLP's JSON mapping, bytes in protobuf. */
type Id = string | Uint8Array;

interface OtlpSpan {
  traceId: Id;
  spanId: Id;
  parentSpanId?: Id;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: Array<{ key: string; value: AnyValue }>;
  status?: { code?: number };
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
    scopeSpans?: Array<{ spans?: OtlpSpan[] }>;
  }>;
}

/** The generated message type (the root is typed only as a protobufjs Root). */
interface ExportRequestType {
  decode(body: Uint8Array): object;
  toObject(message: object, options: { longs: StringConstructor; enums: NumberConstructor }): ExportRequest;
}

const ExportTraceServiceRequest = (
  protoRoot as unknown as {
    opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ExportRequestType } } } } };
  }
).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

/** An http/protobuf export body, decoded by OpenTelemetry's generated code. */
function decodeProtobuf(body: Buffer): ExportRequest {
  return ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(body), { longs: String, enums: Number });
}

function hex(id: Id | undefined): string {
  if (id === undefined) return '';
  return typeof id === 'string' ? id : Buffer.from(id).toString('hex');
}

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  service: string | undefined;
  statusCode: number;
}

function anyValue(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(anyValue);
  return undefined;
}

function attributesOf(list: Array<{ key: string; value: AnyValue }> | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, anyValue(value)]));
}

export interface Collector {
  /** The base URL to configure as `tracing.otlp_endpoint`. */
  url: string;
  spans: ReceivedSpan[];
  /** Raw bodies and content types of every export. */
  exports: Array<{ contentType: string; body: Buffer }>;
}

export async function startCollector(t: { after(fn: () => unknown): void }): Promise<Collector> {
  const spans: ReceivedSpan[] = [];
  const exports: Collector['exports'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = String(req.headers['content-type'] ?? '');
      exports.push({ contentType, body });
      if (req.url === '/v1/traces') {
        const json = contentType.startsWith('application/json');
        const decoded = json ? (JSON.parse(body.toString()) as ExportRequest) : decodeProtobuf(body);
        spans.push(...spansIn(decoded));
      }
      res.writeHead(200, { 'content-type': contentType || 'application/json' });
      res.end(contentType.startsWith('application/json') ? '{}' : '');
    });
  });
  await listen(server);
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, exports };
}

function spansIn(request: ExportRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const service = attributesOf(resourceSpans.resource?.attributes)['service.name'] as string | undefined;
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        const parent = hex(span.parentSpanId);
        spans.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: parent === '' ? null : parent,
          name: span.name,
          kind: span.kind,
          startMs: Number(BigInt(span.startTimeUnixNano) / 1000n) / 1000,
          endMs: Number(BigInt(span.endTimeUnixNano) / 1000n) / 1000,
          attributes: attributesOf(span.attributes),
          service,
          statusCode: span.status?.code ?? 0,
        });
      }
    }
  }
  return spans;
}

export interface HeaderTap {
  url: string;
  /** Headers of every POST that passed, in order. */
  posts: Array<{ path: string; headers: IncomingHttpHeaders }>;
  /** Shared by taps: while set, the next POST at any of them has its connection reset (and clears it). */
  faults: { resetNext: boolean };
}

/** An HTTP server in front of `target` that records each POST's headers and passes everything on. */
export async function startHeaderTap(
  t: { after(fn: () => unknown): void },
  target: string,
  faults = { resetNext: false },
): Promise<HeaderTap> {
  const tap: HeaderTap = { url: '', posts: [], faults };
  const server = createServer((req, res) => {
    if (req.method === 'POST') {
      if (faults.resetNext) {
        faults.resetNext = false;
        req.socket.destroy();
        return;
      }
      tap.posts.push({ path: req.url ?? '/', headers: req.headers });
    }
    const upstream = httpRequest(`${target}${req.url ?? '/'}`, { method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
      up.on('aborted', () => res.destroy());
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await listen(server);
  t.after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  tap.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return tap;
}

function listen(server: Server): Promise<void> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
}
