/**
 * Config files for the proxies under test, written the way their users would: keep-alive to the
 * upstreams, no buffering of SSE, long read timeouts for generations, passive (nginx) or active
 * (HAProxy, fleetgate) health checks with default-ish settings.
 */

export interface ProxyConfigInput {
  /** Listen port on 127.0.0.1. */
  port: number;
  /** Backend origins, e.g. `http://127.0.0.1:30000`. */
  backends: string[];
}

const hostPort = (url: string) => new URL(url).host;

/** nginx 1.22 as an OpenAI-API reverse proxy; everything lives under `prefix` (a temp dir). */
export function nginxConfig(
  input: ProxyConfigInput & { prefix: string; balance: 'least_conn' | 'round-robin' },
): string {
  const servers = input.backends.map((b) => `    server ${hostPort(b)} max_fails=1 fail_timeout=10s;`).join('\n');
  const p = input.prefix;
  return `worker_processes 1;
worker_rlimit_nofile 20000;
pid ${p}/nginx.pid;
error_log ${p}/error.log warn;
events {
  worker_connections 10000;
}
http {
  access_log off;
  client_body_temp_path ${p}/temp/body;
  proxy_temp_path ${p}/temp/proxy;
  fastcgi_temp_path ${p}/temp/fastcgi;
  uwsgi_temp_path ${p}/temp/uwsgi;
  scgi_temp_path ${p}/temp/scgi;
  client_max_body_size 32m;
  keepalive_timeout 75s;
  keepalive_requests 100000;
  upstream sims {
${input.balance === 'least_conn' ? '    least_conn;\n' : ''}${servers}
    keepalive 64;
    keepalive_requests 100000;
    keepalive_timeout 60s;
  }
  server {
    listen 127.0.0.1:${input.port} backlog=4096;
    location / {
      proxy_pass http://sims;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
    }
  }
}
`;
}

/**
 * HAProxy 2.6, one thread, with the usual keep-alive / reuse / health-check settings, and
 * `option http-no-delay`, which HAProxy's manual recommends for interactive streams: without it,
 * SSE events reach the client in bursts about 200 ms apart (measured by scenario (c)).
 */
export function haproxyConfig(
  input: ProxyConfigInput & { balance: 'leastconn' | 'roundrobin' | 'hdr(X-Session-Id)' },
): string {
  const servers = input.backends
    .map((b, i) => `  server gpu${i} ${hostPort(b)} check inter 2s fall 3 rise 2`)
    .join('\n');
  return `global
  nbthread 1
  maxconn 8000

defaults
  mode http
  option http-keep-alive
  http-reuse always
  no option http-buffer-request
  # Without it HAProxy sends with MSG_MORE and the kernel holds small SSE events for up to 200 ms.
  option http-no-delay
  option redispatch
  retries 3
  maxconn 8000
  timeout connect 5s
  timeout client 1h
  timeout server 1h
  timeout http-request 30s
  timeout http-keep-alive 75s

frontend fe
  bind 127.0.0.1:${input.port}
  default_backend sims

backend sims
  balance ${input.balance}
${input.balance.startsWith('hdr(') ? '  hash-type consistent\n' : ''}  option httpchk GET /health
${servers}
`;
}

/** fleetgate with access log off and default health intervals. */
export function fleetgateConfig(
  input: ProxyConfigInput & {
    policy?: string;
    maxInflight?: number | 'auto';
    loadInterval?: string;
    capSlowStart?: boolean;
    queueYaml?: string;
    logLevel?: string;
    modelAliases?: Record<string, string>;
    accessLog?: boolean;
    resumeLimit?: number;
    warmUp?: boolean;
    balanceFactor?: number;
    routingReplicas?: number;
    /** `routing.kv_events.tokenize_wait`. */
    kvTokenizeWait?: string;
  },
): string {
  const backends = input.backends.map((b, i) => `  - url: ${b}\n    name: gpu${i}`).join('\n');
  // Unset keys keep fleetgate's own defaults.
  const routing = [
    input.policy === undefined ? '' : `  policy: ${input.policy}\n`,
    input.maxInflight === undefined ? '' : `  max_inflight_per_backend: ${input.maxInflight}\n`,
    input.loadInterval === undefined ? '' : `  load_interval: ${input.loadInterval}\n`,
    input.capSlowStart === undefined ? '' : `  cap_slow_start: ${input.capSlowStart}\n`,
    input.routingReplicas === undefined ? '' : `  replicas: ${input.routingReplicas}\n`,
    input.balanceFactor === undefined ? '' : `  prefix:\n    balance_factor: ${input.balanceFactor}\n`,
    input.kvTokenizeWait === undefined ? '' : `  kv_events:\n    tokenize_wait: ${input.kvTokenizeWait}\n`,
  ].join('');
  // Off unless a target asks: each bench warms every proxy alike before its clock starts.
  const upstream = `upstream:\n  warm_up: ${input.warmUp ?? false}\n`;
  const aliases = Object.entries(input.modelAliases ?? {});
  const models =
    aliases.length === 0 ? '' : `models:\n${aliases.map(([alias, name]) => `  ${alias}: ${name}\n`).join('')}`;
  return `listen: 127.0.0.1:${input.port}
backends:
${backends}
${models}${routing ? `routing:\n${routing}` : ''}${upstream}${input.resumeLimit === undefined ? '' : `retry:\n  resume_limit: ${input.resumeLimit}\n`}queue:
  max_waiting: 100000
  timeout: 30m
${input.queueYaml ?? ''}log:
  level: ${input.accessLog ? 'info' : (input.logLevel ?? 'warn')}
  access: ${input.accessLog === true}
shutdown:
  grace: 1s
`;
}
