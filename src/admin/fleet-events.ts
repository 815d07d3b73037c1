/**
 * The body of `GET /fleet/events`: one registry subscription shared by every connected client.
 *
 * Wire format (server-sent events, UTF-8, one JSON object per `data:` line):
 *
 *   retry: 2000
 *   event: snapshot   data: the whole `GET /fleet/status` JSON, first on every connection
 *   event: backend    data: one backend's status JSON (as in `backends[]`) when it changed
 *                     (added, state, phase, progress, reason...); at most one per backend per
 *                     COALESCE_MS, always carrying the latest values
 *   event: removed    data: {"name": "gpu3"}
 *   event: summary    data: {"ready", "total", "min_ready", "states", "inflight": {name: n}, "waiting": {class: n},
 *                     "cache_hit_rate": {name: rate or null}, "kv_events": {name: {state, blocks}}}, at most
 *                     once per SUMMARY_MS and only when something in it changed; in-flight counts
 *                     change per request, and the KV-event blocks held per scheduler step, so they travel only here
 *   event: serving    data: the serving view, {"fleet": {...}, "backends": {name: {...}}} (the
 *                     `serving` fields of `GET /fleet/status`), at most once per SUMMARY_MS and only
 *                     when it changed
 *   : keepalive       a comment every HEARTBEAT_MS so idle proxies keep the stream open
 *
 * A reconnecting client (EventSource does so by itself) gets a fresh snapshot, so no event ids.
 * Messages are serialized once and written to every client.
 */
import type { ServerResponse } from 'node:http';
import type { Backend, FleetRegistry } from '../fleet/registry.js';
import type { ServingView } from '../metrics/serving-stats.js';
import { backendStatus, cacheHitRate, countStates, fleetStatus, kvEvents } from './fleet-summary.js';

/** A loading bar redraws per shard; a page needs no more than ~10 frames a second per backend. */
const COALESCE_MS = 100;
const SUMMARY_MS = 1000;
const HEARTBEAT_MS = 15_000;
const RETRY_MS = 2000;
/** A client this far behind is dropped; it reconnects and starts again from a snapshot. */
const MAX_BUFFERED_BYTES = 1 << 20;

export interface FleetEventStreamOptions {
  minReady: () => number;
  /** The serving view's figures; without it no `serving` events and no serving fields in the snapshot. */
  serving?: () => ServingView;
  /** Requests waiting in the queue, per priority class (highest first). */
  waiting?: () => Record<string, number>;
  coalesceMs?: number;
  summaryMs?: number;
  heartbeatMs?: number;
}

function sseMessage(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export class FleetEventStream {
  readonly #registry: FleetRegistry;
  readonly #minReady: () => number;
  readonly #serving: (() => ServingView) | null;
  readonly #waiting: () => Record<string, number>;
  readonly #coalesceMs: number;
  readonly #summaryMs: number;
  readonly #heartbeatMs: number;
  readonly #clients = new Set<ServerResponse>();
  /** Per backend name: when its latest `backend` event went out. */
  readonly #lastSent = new Map<string, number>();
  /** Per backend name: the trailing send of a coalesced burst. */
  readonly #pending = new Map<string, NodeJS.Timeout>();
  #lastSummary = '';
  #lastServing = '';
  #summaryTimer: NodeJS.Timeout | null = null;
  #heartbeatTimer: NodeJS.Timeout | null = null;

  constructor(registry: FleetRegistry, opts: FleetEventStreamOptions) {
    this.#registry = registry;
    this.#minReady = opts.minReady;
    this.#serving = opts.serving ?? null;
    this.#waiting = opts.waiting ?? (() => ({}));
    this.#coalesceMs = opts.coalesceMs ?? COALESCE_MS;
    this.#summaryMs = opts.summaryMs ?? SUMMARY_MS;
    this.#heartbeatMs = opts.heartbeatMs ?? HEARTBEAT_MS;
  }

  get clients(): number {
    return this.#clients.size;
  }

  /** Takes over a response whose head is not written yet; it stays subscribed until it closes. */
  add(res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      // nginx buffers proxied responses unless told otherwise.
      'x-accel-buffering': 'no',
    });
    res.socket?.setNoDelay(true);
    if (this.#clients.size === 0) this.#subscribe();
    this.#clients.add(res);
    res.once('close', () => this.#drop(res));
    const status = fleetStatus(this.#registry, this.#minReady(), this.#waiting(), this.#serving?.());
    res.write(`retry: ${RETRY_MS}\n\n${sseMessage('snapshot', status)}`);
  }

  /** Ends every stream (server shutdown): open SSE connections would otherwise hold `close()`. */
  closeAll(): void {
    for (const res of this.#clients) res.end();
  }

  #subscribe(): void {
    this.#registry.on('change', this.#onChange);
    this.#registry.on('removed', this.#onRemoved);
    this.#summaryTimer = setInterval(() => {
      this.#sendSummary();
      this.#sendServing();
    }, this.#summaryMs).unref();
    this.#heartbeatTimer = setInterval(() => this.#broadcast(': keepalive\n\n'), this.#heartbeatMs).unref();
    this.#lastSummary = this.#summaryKey();
    this.#lastServing = '';
  }

  #unsubscribe(): void {
    this.#registry.off('change', this.#onChange);
    this.#registry.off('removed', this.#onRemoved);
    if (this.#summaryTimer) clearInterval(this.#summaryTimer);
    if (this.#heartbeatTimer) clearInterval(this.#heartbeatTimer);
    this.#summaryTimer = null;
    this.#heartbeatTimer = null;
    for (const timer of this.#pending.values()) clearTimeout(timer);
    this.#pending.clear();
    this.#lastSent.clear();
  }

  #drop(res: ServerResponse): void {
    if (!this.#clients.delete(res)) return;
    if (this.#clients.size === 0) this.#unsubscribe();
  }

  readonly #onChange = (backend: Backend): void => {
    const name = backend.name;
    if (this.#pending.has(name)) return;
    const wait = (this.#lastSent.get(name) ?? Number.NEGATIVE_INFINITY) + this.#coalesceMs - Date.now();
    if (wait <= 0) {
      this.#sendBackend(backend);
      return;
    }
    const timer = setTimeout(() => {
      this.#pending.delete(name);
      if (this.#registry.get(name) === backend) this.#sendBackend(backend);
    }, wait);
    this.#pending.set(name, timer.unref());
  };

  readonly #onRemoved = (backend: Backend): void => {
    const name = backend.name;
    clearTimeout(this.#pending.get(name));
    this.#pending.delete(name);
    this.#lastSent.delete(name);
    this.#broadcast(sseMessage('removed', { name }));
  };

  #sendBackend(backend: Backend): void {
    this.#lastSent.set(backend.name, Date.now());
    this.#broadcast(sseMessage('backend', backendStatus(backend)));
  }

  #summaryKey(): string {
    const backends = this.#registry.list();
    const inflight: Record<string, number> = {};
    const hitRates: Record<string, number | null> = {};
    const kv: Record<string, ReturnType<typeof kvEvents>> = {};
    for (const b of backends) {
      inflight[b.name] = b.inflight;
      hitRates[b.name] = cacheHitRate(b);
      kv[b.name] = kvEvents(b);
    }
    return JSON.stringify({
      ready: this.#registry.ready.length,
      total: backends.length,
      min_ready: this.#minReady(),
      states: countStates(backends),
      inflight,
      waiting: this.#waiting(),
      cache_hit_rate: hitRates,
      kv_events: kv,
    });
  }

  #sendSummary(): void {
    const key = this.#summaryKey();
    if (key === this.#lastSummary) return;
    this.#lastSummary = key;
    this.#broadcast(`event: summary\ndata: ${key}\n\n`);
  }

  #sendServing(): void {
    if (this.#serving === null) return;
    const data = JSON.stringify(this.#serving());
    if (data === this.#lastServing) return;
    this.#lastServing = data;
    this.#broadcast(`event: serving\ndata: ${data}\n\n`);
  }

  #broadcast(message: string): void {
    for (const res of this.#clients) {
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        res.destroy();
        continue;
      }
      res.write(message);
    }
  }
}
