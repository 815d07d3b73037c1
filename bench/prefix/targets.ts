/** bench:prefix's targets and the ids its `--targets` takes, in the same order. */
import type { TargetSpec } from '../lib/targets.js';

export const PREFIX_TARGETS: readonly TargetSpec[] = [
  { name: 'fleetgate prefix-aware', kind: 'fleetgate', balance: 'prefix-aware' },
  { name: 'fleetgate least-loaded', kind: 'fleetgate', balance: 'least-loaded' },
  { name: 'nginx least_conn', kind: 'nginx', balance: 'least_conn' },
  { name: 'haproxy leastconn', kind: 'haproxy', balance: 'leastconn' },
  { name: 'haproxy hdr(X-Session-Id) consistent', kind: 'haproxy', balance: 'hdr(X-Session-Id)' },
];
export const TARGET_IDS = ['prefix', 'least', 'nginx', 'haproxy', 'affinity'] as const;
