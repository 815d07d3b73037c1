/**
 * DNS discovery (`discovery: {dns, port, interval, kind}`): every A and AAAA record of `dns` is a
 * backend at `http://<address>:<port>`, named `<address>:<port>` like a static backend without a
 * name (`10.0.3.7:30000`, `[fd00::7]:30000`). This is how fleetgate follows a Kubernetes headless
 * Service (one record per ready pod) or a Consul service.
 *
 * Records that appear are added and go through the readiness gate like any backend; records that
 * vanish are drained and removed once their in-flight requests finished.
 *
 * Only an answer counts: NXDOMAIN (`ENOTFOUND`) and "no records of this type" (`ENODATA`) mean zero
 * records, so a Service scaled to 0 empties the fleet. Anything else (SERVFAIL, timeout, refused)
 * says nothing about the pods, so the current set is kept and the next round tries again: a DNS
 * outage must not drain a healthy fleet.
 *
 * The default resolver is `node:dns/promises` `resolve4`/`resolve6` (c-ares, straight to the
 * configured name servers; it does not read /etc/hosts).
 */
import { resolve4, resolve6 } from 'node:dns/promises';
import { isIPv6 } from 'node:net';
import type { Logger } from 'pino';
import type { BackendConfig, DnsDiscoveryConfig } from '../config/types.js';
import { validateBackend } from '../config/validate.js';
import { BackendSync } from './backend-sync.js';
import type { FleetRegistry } from './registry.js';

export interface DnsResolver {
  resolve4(hostname: string): Promise<string[]>;
  resolve6(hostname: string): Promise<string[]>;
}

const systemResolver: DnsResolver = { resolve4, resolve6 };

/** Answers that mean "no such records" rather than "could not find out". */
const NO_RECORDS = new Set(['ENOTFOUND', 'ENODATA']);

export interface DnsDiscoveryOptions {
  registry: FleetRegistry;
  config: DnsDiscoveryConfig;
  resolver?: DnsResolver;
  logger?: Logger;
  /** Backends a previous discovery found (a reload that changed `discovery`): reconciled on the first round. */
  adopt?: BackendSync;
}

/** All A and AAAA addresses of `name`, sorted; throws when either lookup failed for another reason than "none". */
export async function resolveAddresses(resolver: DnsResolver, name: string): Promise<string[]> {
  const results = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
  const addresses: string[] = [];
  for (const result of results) {
    if (result.status === 'fulfilled') addresses.push(...result.value);
    else if (!NO_RECORDS.has((result.reason as NodeJS.ErrnoException).code ?? '')) throw result.reason;
  }
  return [...new Set(addresses)].sort();
}

export function backendForAddress(address: string, config: DnsDiscoveryConfig): BackendConfig {
  const host = isIPv6(address) ? `[${address}]` : address;
  return validateBackend(
    { url: `http://${host}:${config.port}`, kind: config.kind },
    config.kind,
    `discovery.dns (${address})`,
  );
}

export class DnsDiscovery {
  readonly config: DnsDiscoveryConfig;
  readonly sync: BackendSync;
  readonly #registry: FleetRegistry;
  readonly #resolver: DnsResolver;
  readonly #logger: Logger | undefined;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  /** Records skipped because a static backend has their address; warned about once. */
  readonly #skipped = new Set<string>();
  /** Until `start()`, `refresh()` runs one round and schedules no next one (tests drive rounds). */
  #started = false;
  #stopped = false;
  /** The last round's error message, null after a good round. */
  lastError: string | null = null;

  constructor(opts: DnsDiscoveryOptions) {
    this.config = opts.config;
    this.#registry = opts.registry;
    this.sync = opts.adopt ?? new BackendSync(opts.registry);
    this.#resolver = opts.resolver ?? systemResolver;
    this.#logger = opts.logger;
  }

  start(): void {
    this.#started = true;
    this.#stopped = false;
    void this.refresh();
  }

  /** Stops resolving; the backends found so far stay (a reload may hand them to the next discovery). */
  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** One round now (rounds never overlap); resolves when the fleet follows the answer. */
  refresh(): Promise<void> {
    this.#running ??= this.#round().finally(() => {
      this.#running = null;
      this.#schedule();
    });
    return this.#running;
  }

  /** Drains and removes every discovered backend (discovery switched off by a reload). */
  removeAll(): void {
    this.sync.apply([]);
    this.sync.close();
  }

  async #round(): Promise<void> {
    const { dns } = this.config;
    let addresses: string[];
    try {
      addresses = await resolveAddresses(this.#resolver, dns);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      this.lastError = `cannot resolve ${dns}: ${code}`;
      this.#logger?.warn(
        { dns, code, kept: this.sync.members.length },
        `discovery: ${this.lastError}; keeping the current backends`,
      );
      return;
    }
    this.lastError = null;
    if (this.#stopped) return;
    try {
      const wanted = addresses.map((address) => backendForAddress(address, this.config));
      const diff = this.sync.apply(wanted.filter((backend) => this.#usable(backend)));
      if (diff.added.length > 0 || diff.removed.length > 0 || diff.changed.length > 0) {
        this.#logger?.info({ dns, ...diff, unchanged: diff.unchanged.length }, 'discovery: fleet follows DNS');
      }
    } catch (error) {
      // A round must never take the process down; the next one tries again.
      this.lastError = (error as Error).message;
      this.#logger?.error({ dns, err: error }, `discovery: ${this.lastError}`);
    }
  }

  #usable(backend: BackendConfig): boolean {
    const problem = this.sync.owns(backend.name) ? null : this.#takenByOthers(backend);
    if (problem === null) {
      this.#skipped.delete(backend.name);
      return true;
    }
    if (!this.#skipped.has(backend.name)) {
      this.#skipped.add(backend.name);
      this.#logger?.warn(
        { dns: this.config.dns, backend: backend.name },
        `discovery: skipping ${backend.url}: ${problem}`,
      );
    }
    return false;
  }

  /** A static backend already serving this address wins; the record is skipped. */
  #takenByOthers(backend: BackendConfig): string | null {
    const other = this.#registry
      .list()
      .find((b) => (b.name === backend.name || b.url === backend.url) && !this.sync.owns(b.name));
    return other === undefined || other.removing ? null : `already configured as backend "${other.name}"`;
  }

  #schedule(): void {
    if (!this.#started || this.#stopped) return;
    this.#timer = setTimeout(() => void this.refresh(), this.config.interval);
    this.#timer.unref();
  }
}
