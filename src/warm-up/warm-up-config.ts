/**
 * The configuration of the warm-up's own fleetgate: the running one's traffic path (routing,
 * queue classes, keys, limits, resume, access log) in front of the warm-up's engine alone, with
 * nothing that reaches beyond the process (no engines, discovery, launch, batch jobs, metrics
 * listener, traces) and no warm-up of its own. Pure.
 */
import type { Config } from '../config/types.js';

export function warmUpConfig(config: Config, engineUrl: string, requests: number): Config {
  return {
    ...config,
    listen: { host: '127.0.0.1', port: 0 },
    metrics_listen: null,
    backends: [{ url: engineUrl, name: 'warm-up', kind: config.kind, log: null }],
    discovery: null,
    launch: null,
    expect_model: null,
    models: {},
    default_model: null,
    min_ready: 1,
    health: { ...config.health, starting_interval: 20, fatal_patterns: [] },
    upstream: { ...config.upstream, api_key: null, warm_up: false },
    // Its own store, so the limit's code runs but no client's budget is spent; never its refusal.
    rate_limit: { ...config.rate_limit, max: Math.max(config.rate_limit.max, requests) },
    batch: { ...config.batch, enabled: false },
    tracing: { ...config.tracing, otlp_endpoint: null },
    shutdown: { grace: 1000 },
  };
}
