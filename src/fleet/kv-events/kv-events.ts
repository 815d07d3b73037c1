/**
 * The fleet's KV-event subscriptions and the map they build (issue #55): each ready backend's
 * engine stream is subscribed, at the endpoint `routing.kv_events.endpoint` names (a template with
 * `{host}`) or the one its SGLang `/server_info` describes (`kv_events`: host `*` = the backend's own,
 * port base + DP rank, topic, block size); one stream per DP rank, each rank its own holder in the map
 * (`name#rank`, ranks beyond 0). A backend that leaves `ready` for anything but `draining` (its engine
 * restarted, died, or was ejected) or is removed loses its map at once, and is subscribed again when
 * it is ready again. Every replica subscribes to every engine, so all hold the same map without
 * talking to each other. Counters for the metrics; `status` for `/fleet/status`.
 */
import { request } from 'undici';
import type { Config } from '../../config/types.js';
import type { Backend, FleetRegistry } from '../registry.js';
import { KvBlockMap } from './kv-block-map.js';
import type { KvState } from './kv-stream.js';
import { KvSubscription } from './kv-subscriber.js';

type KvEventsConfig = Config['routing']['kv_events'];

export interface KvBackendStatus {
  readonly state: KvState;
  /** Blocks the map holds for it (all its DP ranks). */
  readonly blocks: number;
  /** The PUB endpoints subscribed. */
  readonly endpoints: readonly string[];
}

export interface KvCounters {
  batches: number;
  events: number;
  storedBlocks: number;
  removedBlocks: number;
  skippedBlocks: number;
  cleared: number;
  gaps: number;
  replays: number;
  replayFailures: number;
  restarts: number;
  decodeErrors: number;
}

interface Endpoints {
  readonly streams: readonly { endpoint: string; replay: string | null; holder: string }[];
  readonly topic: string;
  readonly blockSize: number;
}

interface Subscribed {
  readonly subs: KvSubscription[];
  readonly holders: readonly string[];
  readonly endpoints: readonly string[];
}

export interface KvEventsOptions {
  readonly config: KvEventsConfig;
  readonly registry: FleetRegistry;
  readonly now?: () => number;
  readonly apiKey?: string | null;
  readonly log?: (message: string) => void;
}

/** Each backend's subscriptions' owner, for `/fleet/status` (admin/fleet-summary.ts). */
const owners = new WeakMap<Backend, KvEvents>();

/** A backend's `kv_events` status; `off` where fleetgate does not subscribe. */
export function kvStatusOf(backend: Backend): KvBackendStatus {
  return owners.get(backend)?.status(backend.name) ?? { state: 'off', blocks: 0, endpoints: [] };
}

const WILDCARD_HOSTS = new Set(['*', '0.0.0.0', '::', '[::]', '']);

function fill(template: string, host: string): string {
  return template.replaceAll('{host}', host);
}

/** `tcp://HOST:PORT` moved by `offset` ports (a DP rank). */
function offsetPort(endpoint: string, offset: number): string {
  if (offset === 0) return endpoint;
  const at = endpoint.lastIndexOf(':');
  return `${endpoint.slice(0, at)}:${Number(endpoint.slice(at + 1)) + offset}`;
}

export class KvEvents {
  readonly map: KvBlockMap;
  readonly counters: KvCounters = {
    batches: 0,
    events: 0,
    storedBlocks: 0,
    removedBlocks: 0,
    skippedBlocks: 0,
    cleared: 0,
    gaps: 0,
    replays: 0,
    replayFailures: 0,
    restarts: 0,
    decodeErrors: 0,
  };
  readonly #opts: KvEventsOptions;
  readonly #now: () => number;
  readonly #subscribed = new Map<string, Subscribed>();
  /** Backends being subscribed (their `/server_info` read is under way), with the generation that asked. */
  readonly #pending = new Map<string, number>();
  #generation = 0;
  #blockSize: number | null = null;
  #closed = false;

  constructor(opts: KvEventsOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? (() => performance.now());
    this.map = new KvBlockMap(opts.config.max_blocks);
  }

  /** Subscribes to every ready backend now and follows the registry from here on. */
  start(): void {
    const { registry } = this.#opts;
    registry.on('transition', ({ backend, to }) => {
      if (to === 'ready') void this.#subscribe(backend);
      else if (to !== 'draining') this.#drop(backend.name);
    });
    registry.on('removed', (backend) => this.#drop(backend.name));
    registry.on('added', (backend) => owners.set(backend, this));
    for (const backend of registry.list()) owners.set(backend, this);
    for (const backend of registry.ready) void this.#subscribe(backend);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const name of [...this.#subscribed.keys()]) this.#drop(name);
  }

  /** Tokens per block the engines key their events at (null until one is known). */
  get blockSize(): number | null {
    return this.#blockSize;
  }

  /** Whether any backend's events are live now (what makes `routing.policy: auto` route on them). */
  get anyLive(): boolean {
    for (const name of this.#subscribed.keys()) if (this.state(name) === 'live') return true;
    return false;
  }

  state(name: string): KvState {
    const subscribed = this.#subscribed.get(name);
    if (subscribed === undefined) return 'off';
    return subscribed.subs.some((s) => s.state === 'stale') ? 'stale' : 'live';
  }

  status(name: string): KvBackendStatus {
    const subscribed = this.#subscribed.get(name);
    return {
      state: this.state(name),
      blocks: subscribed === undefined ? 0 : subscribed.holders.reduce((n, h) => n + this.map.heldBy(h), 0),
      endpoints: subscribed?.endpoints ?? [],
    };
  }

  /**
   * Leading blocks of `keys` each live backend holds (the most over its DP ranks); backends absent
   * hold none, or are not live (stale, off): a policy routes those as it would without events.
   */
  leadingRuns(keys: readonly number[]): Map<string, number> {
    const runs = new Map<string, number>();
    for (const [holder, run] of this.map.leadingRuns(keys)) {
      const hash = holder.indexOf('#');
      const name = hash < 0 ? holder : holder.slice(0, hash);
      if ((runs.get(name) ?? 0) < run) runs.set(name, run);
    }
    return runs;
  }

  async #subscribe(backend: Backend): Promise<void> {
    const name = backend.name;
    if (this.#closed || this.#subscribed.has(name) || this.#pending.has(name)) return;
    const generation = ++this.#generation;
    this.#pending.set(name, generation);
    let endpoints: Endpoints | null = null;
    try {
      endpoints = await this.#endpointsOf(backend);
    } catch (error) {
      this.#opts.log?.(`kv events: ${name}: /server_info unreadable (${(error as Error).message}); not subscribed`);
    }
    if (this.#pending.get(name) !== generation) return;
    this.#pending.delete(name);
    if (endpoints === null || this.#closed || backend.state !== 'ready') return;
    if (this.#blockSize !== null && this.#blockSize !== endpoints.blockSize) {
      this.#opts.log?.(
        `kv events: ${name} keys blocks of ${endpoints.blockSize} tokens, others ${this.#blockSize}; not subscribed`,
      );
      return;
    }
    this.#blockSize = endpoints.blockSize;
    const config = this.#opts.config;
    const subs = endpoints.streams.map(
      ({ endpoint, replay, holder }) =>
        new KvSubscription({
          endpoint,
          replayEndpoint: replay,
          topic: endpoints.topic,
          staleForMs: config.stale_for,
          replayTimeoutMs: 2_000,
          now: this.#now,
          onRestart: () => {
            this.counters.restarts++;
            this.map.clear(holder);
          },
          onBatch: (batch) => {
            const c = this.counters;
            c.batches++;
            c.events += batch.events.length;
            for (const event of batch.events) if (event.type === 'cleared') c.cleared++;
            const applied = this.map.apply(holder, batch.events);
            c.storedBlocks += applied.stored;
            c.removedBlocks += applied.removed;
            c.skippedBlocks += applied.skipped;
          },
          onGap: (_missing, replayed) => {
            this.counters.gaps++;
            if (replayed !== null) {
              this.counters.replays++;
              return;
            }
            if (replay !== null) this.counters.replayFailures++;
            this.map.clear(holder);
          },
          onDecodeError: (error) => {
            this.counters.decodeErrors++;
            this.#opts.log?.(`kv events: ${name}: ${error.message}`);
          },
        }),
    );
    this.#subscribed.set(name, {
      subs,
      holders: endpoints.streams.map((s) => s.holder),
      endpoints: endpoints.streams.map((s) => s.endpoint),
    });
  }

  #drop(name: string): void {
    this.#pending.delete(name);
    const subscribed = this.#subscribed.get(name);
    if (subscribed === undefined) return;
    this.#subscribed.delete(name);
    for (const sub of subscribed.subs) sub.close();
    for (const holder of subscribed.holders) this.map.clear(holder);
  }

  /** The configured endpoint template, else the backend's `/server_info` `kv_events`; null: none. */
  async #endpointsOf(backend: Backend): Promise<Endpoints | null> {
    const config = this.#opts.config;
    const host = new URL(backend.url).hostname;
    if (config.endpoint !== null) {
      return {
        streams: [
          {
            endpoint: fill(config.endpoint, host),
            replay: config.replay_endpoint === null ? null : fill(config.replay_endpoint, host),
            holder: backend.name,
          },
        ],
        topic: config.topic ?? '',
        blockSize: config.block_size,
      };
    }
    if (!config.discover) return null;
    const headers: Record<string, string> = {};
    if (this.#opts.apiKey) headers.authorization = `Bearer ${this.#opts.apiKey}`;
    const response = await request(new URL('/server_info', backend.url), {
      headers,
      headersTimeout: 5_000,
      bodyTimeout: 5_000,
    });
    if (response.statusCode !== 200) {
      await response.body.dump();
      return null;
    }
    const info = (await response.body.json()) as { kv_events?: Record<string, unknown> | null };
    const kv = info.kv_events;
    if (kv === null || kv === undefined || kv.publisher !== 'zmq') return null;
    const advertised = String(kv.endpoint_host ?? '*');
    const kvHost = WILDCARD_HOSTS.has(advertised) ? host : advertised;
    const base = Number(kv.endpoint_port_base);
    const dpSize = Math.max(1, Number(kv.dp_size ?? 1));
    const blockSize = Number(kv.block_size);
    if (!Number.isInteger(base) || base < 1 || !Number.isInteger(blockSize) || blockSize < 1) return null;
    const streams = [];
    for (let rank = 0; rank < dpSize; rank++) {
      streams.push({
        endpoint: `tcp://${kvHost}:${base + rank}`,
        replay: config.replay_endpoint === null ? null : offsetPort(fill(config.replay_endpoint, host), rank),
        holder: rank === 0 ? backend.name : `${backend.name}#${rank}`,
      });
    }
    return { streams, topic: typeof kv.topic === 'string' ? kv.topic : '', blockSize };
  }
}
