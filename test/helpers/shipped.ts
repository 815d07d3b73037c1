/**
 * fleetgate as its users run it: started from the shipped `config/fleetgate.yaml`, or from the
 * settings of the shipped Kubernetes ConfigMap, overriding only the listen address, the backends
 * and the probe timing (plus whatever a test names in `overrides`, the setting it is about).
 */
import { readFileSync } from 'node:fs';
import pino from 'pino';
import { parse } from 'yaml';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import type { RunningGateway } from './fleet.js';

export type Profile = 'shipped' | 'k8s';
export const PROFILES: readonly Profile[] = ['shipped', 'k8s'];

type Raw = Record<string, unknown>;

function profileSettings(profile: Profile): Raw {
  if (profile === 'shipped') return parse(readFileSync('config/fleetgate.yaml', 'utf8')) as Raw;
  const map = parse(readFileSync('config/k8s/configmap.yaml', 'utf8')) as { data: Record<string, string> };
  return parse(map.data['fleetgate.yaml']) as Raw;
}

const isObject = (value: unknown): value is Raw => typeof value === 'object' && value !== null && !Array.isArray(value);

function merged(base: Raw, over: Raw): Raw {
  const out: Raw = { ...base };
  for (const [key, value] of Object.entries(over))
    out[key] = isObject(value) && isObject(base[key]) ? merged(base[key] as Raw, value) : value;
  return out;
}

/** Probes fast enough for a test; everything else as shipped. */
const PROBE_TIMING = { health: { interval: '100ms', starting_interval: '50ms', timeout: '500ms' } };

export function shippedConfig(profile: Profile, backends: unknown[], overrides: Raw = {}) {
  const raw = merged(
    merged(profileSettings(profile), { listen: '127.0.0.1:0', backends, discovery: null, ...PROBE_TIMING }),
    overrides,
  );
  return validateConfig(raw, `${profile} config`);
}

export async function startShipped(
  t: { after(fn: () => unknown): void },
  profile: Profile,
  backends: unknown[],
  overrides: Raw = {},
): Promise<RunningGateway> {
  const gateway = await createGateway(shippedConfig(profile, backends, overrides), {
    logger: pino({ level: 'silent' }),
  });
  const url = await gateway.listen();
  t.after(() => gateway.close());
  return { gateway, url };
}
