/** The balancers compared by the balance bench. */
import type { TargetSpec } from '../lib/targets.js';

export interface BalanceTarget extends TargetSpec {
  /** Key for `--targets` (a prefix such as `fleetgate` selects every fleetgate variant). */
  id: string;
  /** Run only when `--targets` names it (not in the default list). */
  optIn?: boolean;
  /** fleetgate processes over the same servers, the client spreading requests over them (default 1). */
  replicas?: number;
}

/** A fixed `max_inflight_per_backend` for the fleet-wide cap check: the servers' max_running_requests. */
export const FIXED_CAP = 32;

export const BALANCE_TARGETS: readonly BalanceTarget[] = [
  { id: 'direct', name: 'direct (client round-robin)', kind: 'direct' },
  { id: 'fleetgate-least-loaded', name: 'fleetgate least-loaded', kind: 'fleetgate', balance: 'least-loaded' },
  // `routing.cap_slow_start`: a backend's cap starts at what it runs + 2 and doubles per report.
  {
    id: 'fleetgate-slow-start',
    name: 'fleetgate least-loaded, cap slow start',
    kind: 'fleetgate',
    balance: 'least-loaded',
    capSlowStart: true,
  },
  // Stream resume off (`retry.resume_limit: 0`): a stream cut by a crash ends with the error event.
  {
    id: 'fleetgate-no-resume',
    name: 'fleetgate least-loaded, stream resume off',
    kind: 'fleetgate',
    balance: 'least-loaded',
    resumeLimit: 0,
    optIn: true,
  },
  { id: 'fleetgate-round-robin', name: 'fleetgate round-robin', kind: 'fleetgate', balance: 'round-robin' },
  { id: 'fleetgate-power-of-two', name: 'fleetgate power-of-two', kind: 'fleetgate', balance: 'power-of-two' },
  // fleetgate's defaults include `max_inflight_per_backend: auto`; this is the same without the cap.
  {
    id: 'fleetgate-no-cap',
    name: 'fleetgate least-loaded, no cap',
    kind: 'fleetgate',
    balance: 'least-loaded',
    maxInflight: 0,
  },
  // Issue #29: two replicas behind one Service (the client spreads requests over both).
  {
    id: 'fleetgate-replicas-2',
    name: 'fleetgate least-loaded, 2 replicas',
    kind: 'fleetgate',
    balance: 'least-loaded',
    replicas: 2,
  },
  {
    id: 'fleetgate-cap-fixed',
    name: `fleetgate least-loaded, max_inflight ${FIXED_CAP}`,
    kind: 'fleetgate',
    balance: 'least-loaded',
    maxInflight: FIXED_CAP,
  },
  {
    id: 'fleetgate-cap-fixed-replicas-2',
    name: `fleetgate least-loaded, max_inflight ${FIXED_CAP}, 2 replicas`,
    kind: 'fleetgate',
    balance: 'least-loaded',
    maxInflight: FIXED_CAP,
    replicas: 2,
  },
  // The same, each replica told there are 2 (`routing.replicas`): each takes half the room a report shows.
  {
    id: 'fleetgate-cap-shared-replicas-2',
    name: `fleetgate least-loaded, max_inflight ${FIXED_CAP}, 2 replicas, routing.replicas 2`,
    kind: 'fleetgate',
    balance: 'least-loaded',
    maxInflight: FIXED_CAP,
    replicas: 2,
    routingReplicas: 2,
  },
  { id: 'nginx-least-conn', name: 'nginx least_conn', kind: 'nginx', balance: 'least_conn' },
  { id: 'nginx-round-robin', name: 'nginx round-robin', kind: 'nginx', balance: 'round-robin' },
  { id: 'haproxy-leastconn', name: 'haproxy leastconn', kind: 'haproxy', balance: 'leastconn' },
  { id: 'haproxy-roundrobin', name: 'haproxy roundrobin', kind: 'haproxy', balance: 'roundrobin' },
];

/** `direct,fleetgate,nginx-least-conn` -> the matching targets, in the table's order. */
export function selectTargets(list: string): BalanceTarget[] {
  const wanted = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const w of wanted) {
    if (!BALANCE_TARGETS.some((t) => t.id === w || t.id.startsWith(`${w}-`))) {
      throw new Error(`--targets: unknown target '${w}' (${BALANCE_TARGETS.map((t) => t.id).join(', ')})`);
    }
  }
  return BALANCE_TARGETS.filter((t) => wanted.some((w) => t.id === w || t.id.startsWith(`${w}-`)));
}
