/** Test fixtures: a gateway on a free port and simulated backends, all cleaned up after the test. */
import type { TestContext } from 'node:test';
import pino from 'pino';
import { createGateway, type Gateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import type { SimOptions } from '../../src/sim/index.js';
import { SimServer } from '../../src/sim/index.js';
import { freePorts } from './net.js';
import { waitFor } from './wait.js';

type After = Pick<TestContext, 'after'> | { after(fn: () => unknown): void };

export interface RunningGateway {
  gateway: Gateway;
  url: string;
}

/**
 * Starts fleetgate with `raw` merged over a loopback listen address; closes it after the test. The
 * start-up warm-up is off unless `raw` turns it on, only to save its half second of CPU per start:
 * it sends nothing to a backend (warm-up-engines.test.ts), and the core contract runs with it on,
 * from the shipped config (core-contract.test.ts, helpers/shipped.ts).
 */
export async function startGateway(t: After, raw: Record<string, unknown>): Promise<RunningGateway> {
  const upstream = { warm_up: false, ...(raw.upstream as Record<string, unknown> | undefined) };
  const config = validateConfig({ listen: '127.0.0.1:0', ...raw, upstream }, 'test');
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }) });
  const url = await gateway.listen();
  t.after(() => gateway.close());
  return { gateway, url };
}

/** Creates (not starts) simulated servers on free ports; stops them after the test. */
export async function createSims(t: After, specs: Array<Partial<SimOptions>>): Promise<SimServer[]> {
  const ports = await freePorts(specs.length);
  const sims = specs.map((spec, i) => new SimServer({ port: ports[i], name: `gpu${i}`, ...spec }));
  t.after(() => Promise.all(sims.map((sim) => sim.stop())));
  return sims;
}

/** Backend entries for the gateway config, one per sim, named like the sims. */
export function backendsFor(
  sims: SimServer[],
  extra: (sim: SimServer, i: number) => Record<string, unknown> = () => ({}),
) {
  return sims.map((sim, i) => ({ url: sim.url, name: sim.name, ...extra(sim, i) }));
}

export function stateOf(gateway: Gateway, name: string): string | undefined {
  return gateway.fleet.registry.get(name)?.state;
}

/** Simulated backends started and ready, and a gateway in front of them with every one admitted. */
export async function startReadyFleet(
  t: After,
  specs: Array<Partial<SimOptions>>,
  raw: Record<string, unknown> = {},
): Promise<RunningGateway & { sims: SimServer[] }> {
  const sims = await createSims(t, specs);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const running = await startGateway(t, { backends: backendsFor(sims), ...raw });
  await waitFor(() => running.gateway.fleet.registry.ready.length === sims.length, { what: 'every backend ready' });
  return { ...running, sims };
}

/**
 * Counts what the registry sends to `backend` (`take`) once `armed()`: what was sent, not what the
 * backend counted, since a request already on the wire arrives after any instant a test picks.
 */
export function takesOf(
  registry: Gateway['fleet']['registry'],
  backend: unknown,
): { arm(): void; readonly count: number } {
  let armed = false;
  let count = 0;
  const take = registry.take.bind(registry);
  registry.take = (taken) => {
    if (armed && taken === backend) count++;
    take(taken);
  };
  return {
    arm: () => {
      armed = true;
    },
    get count() {
      return count;
    },
  };
}
