/** Default values of every config key (durations in ms, sizes in bytes). config/fleetgate.yaml shows the same. */

import type { BackendKind, Config, HostPort, PolicyName, RateLimitKey } from './types.js';

export const DEFAULT_LISTEN: Readonly<HostPort> = { host: '0.0.0.0', port: 8080 };
/** Host for `listen: ":8080"`. */
export const DEFAULT_LISTEN_HOST = '0.0.0.0';
export const DEFAULT_METRICS_LISTEN = null;
export const DEFAULT_EXPECT_MODEL = null;
export const DEFAULT_MIN_READY = 1;
export const DEFAULT_KIND: BackendKind = 'sglang';

/** `fleet:` shorthand. */
export const DEFAULT_FLEET_HOST = '127.0.0.1';
export const DEFAULT_FLEET_NAME = 'gpu{i}';

export const DEFAULT_HEALTH_INTERVAL = 10_000;
export const DEFAULT_HEALTH_STARTING_INTERVAL = 1_000;
export const DEFAULT_HEALTH_TIMEOUT = 5_000;
export const DEFAULT_HEALTH_RISE = 1;
export const DEFAULT_HEALTH_FALL = 3;
/** A hang during CUDA graph capture prints nothing more; loading 54 GB from a slow disk still logs every shard. */
export const DEFAULT_HEALTH_STALL_AFTER = 10 * 60_000;

export const DEFAULT_ROUTING_POLICY: PolicyName = 'least-loaded';
/** `auto`: the adaptive cap (src/routing/adaptive-cap.ts); it finished bench:balance's job first. */
export const DEFAULT_MAX_INFLIGHT_PER_BACKEND: number | 'auto' = 'auto';
export const DEFAULT_ROUTING_RETRIES = 2;
/** Short enough for the adaptive cap to follow a backend's KV cache as answers grow. */
export const DEFAULT_LOAD_INTERVAL = 250;

export const DEFAULT_QUEUE_MAX_WAITING = 10_000;
export const DEFAULT_QUEUE_TIMEOUT = 120_000;

export const DEFAULT_UPSTREAM_CONNECT_TIMEOUT = 5_000;
/** Non-streamed (e.g. thinking-mode) generations send no header until they are done, minutes later. */
export const DEFAULT_UPSTREAM_HEADERS_TIMEOUT = 60 * 60_000;
export const DEFAULT_UPSTREAM_STREAM_IDLE_TIMEOUT = 10 * 60_000;
export const DEFAULT_UPSTREAM_API_KEY = null;

export const DEFAULT_BODY_SIZE = 32 * 2 ** 20;
export const DEFAULT_HEADER_SIZE = 64 * 2 ** 10;
export const DEFAULT_CLIENT_HEADERS_TIMEOUT = 30_000;
/** Longer than the 60 s idle timeout of common load balancers in front, so they close first. */
export const DEFAULT_KEEP_ALIVE_TIMEOUT = 72_000;
/** 0 = unlimited. */
export const DEFAULT_MAX_CONNECTIONS = 0;

export const DEFAULT_ADMIN_TOKEN = null;
export const DEFAULT_DISCOVERY_INTERVAL = 10_000;

export const DEFAULT_LOG_LEVEL: Config['log']['level'] = 'info';
export const DEFAULT_LOG_DESTINATION = 'stdout';
export const DEFAULT_LOG_ACCESS = true;

export const DEFAULT_DRAIN_TIMEOUT = 30_000;
export const DEFAULT_RATE_LIMIT_ENABLED = false;
export const DEFAULT_RATE_LIMIT_MAX = 60;
export const DEFAULT_RATE_LIMIT_WINDOW = 60_000;
export const DEFAULT_RATE_LIMIT_BY: RateLimitKey = 'api_key';

/**
 * The config used when no file is given and `config/fleetgate.yaml` does not exist (fleetgate run outside
 * its repository): DESIGN's default fleet of seven SGLang servers on 127.0.0.1:30000-30006, named gpu0..gpu6.
 * A test checks that it and the shipped config/fleetgate.yaml give the same result.
 */
export const EMBEDDED_CONFIG: Readonly<Record<string, unknown>> = {
  fleet: { host: DEFAULT_FLEET_HOST, ports: '30000-30006', name: DEFAULT_FLEET_NAME },
};
