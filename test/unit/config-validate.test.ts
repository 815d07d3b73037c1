import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import type { Config } from '../../src/config/types.js';
import { coerceSettingText, validateBackend, validateConfig } from '../../src/config/validate.js';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';

const QWEN3 = packagedQwen3Dir();

const ONE_BACKEND = { backends: ['http://127.0.0.1:30000'] };

const DEFAULTS_WITH_ONE_BACKEND: Config = {
  listen: { host: '0.0.0.0', port: 8080 },
  metrics_listen: null,
  backends: [{ url: 'http://127.0.0.1:30000', name: '127.0.0.1:30000', kind: 'sglang', log: null }],
  expect_model: null,
  models: {},
  default_model: null,
  min_ready: 1,
  kind: 'sglang',
  health: {
    interval: 10_000,
    starting_interval: 1_000,
    timeout: 5_000,
    rise: 1,
    fall: 3,
    stall_after: 600_000,
    progress_timeout: 60_000,
    drain_deadline: 60_000,
    ejection_time: 30_000,
    max_ejection_time: 300_000,
    fatal_patterns: [],
    failure_quiet: 5_000,
  },
  routing: {
    policy: 'least-loaded',
    max_inflight_per_backend: 'auto',
    retries: 2,
    load_interval: 250,
    cap_slow_start: false,
    replicas: 1,
    cap_scope: 'fleet',
    prefix: {
      block_chars: 128,
      max_blocks: 65_536,
      ttl: 600_000,
      min_match: 0.3,
      load_gap: 4,
      load_ratio: 1.5,
      balance_factor: 1.25,
      session_header: 'x-session-id',
      queue_lookahead: 32,
      queue_hold: 2_000,
    },
    kv_events: {
      enabled: true,
      endpoint: null,
      replay_endpoint: null,
      topic: null,
      block_size: 16,
      discover: true,
      max_blocks: 1_000_000,
      stale_for: 30_000,
      token_cache: 10_000,
      tokenize_wait: 50,
      tokenize_whole: false,
    },
  },
  queue: {
    max_waiting: 10_000,
    timeout: 120_000,
    classes: [
      { name: 'interactive', max_waiting: null, timeout: null, api_keys: [], backend_priority: null },
      { name: 'batch', max_waiting: null, timeout: null, api_keys: [], backend_priority: null },
    ],
    default_class: 'batch',
    max_starvation: 60_000,
    reserve: 0,
  },
  retry: { resume_limit: 2, resume_wait: 10_000 },
  upstream: {
    connect_timeout: 5_000,
    headers_timeout: 3_600_000,
    stream_idle_timeout: 600_000,
    api_key: null,
    warm_up: true,
  },
  limits: {
    body_size: 32 * 2 ** 20,
    header_size: 64 * 2 ** 10,
    headers_timeout: 30_000,
    keep_alive_timeout: 72_000,
    max_connections: 0,
  },
  auth: { api_keys: [] },
  rate_limit: { enabled: false, max: 60, window: 60_000, by: 'api_key' },
  admin: { token: null },
  discovery: null,
  log: { level: 'info', destination: 'stdout', access: true },
  shutdown: { grace: 25_000 },
  batch: {
    enabled: true,
    dir: 'fleetgate-batches',
    max_file_size: 200 * 2 ** 20,
    database_url: null,
    lease: 15_000,
    stream_upstream: true,
  },
  metrics: { token_latency: true },
  tracing: { otlp_endpoint: null, otlp_protocol: 'http/protobuf', sample_ratio: 1, service_name: 'fleetgate' },
  launch: null,
  model: { dir: null, dirs: {} },
};

test('every key has its documented default', () => {
  assert.deepEqual(validateConfig(ONE_BACKEND, 'test'), DEFAULTS_WITH_ONE_BACKEND);
});

test('empty sections and lists (`health:` with nothing under it) mean defaults', () => {
  const config = validateConfig(
    { ...ONE_BACKEND, health: { fatal_patterns: null }, routing: {}, log: null, auth: { api_keys: null } },
    'test',
  );
  assert.deepEqual(config, DEFAULTS_WITH_ONE_BACKEND);
});

test('every key is read and converted', () => {
  const raw = {
    listen: '127.0.0.1:9000',
    metrics_listen: '[::1]:9464',
    backends: [
      'https://gpu-a.example:8443/v1/ignored?path=yes',
      { url: 'http://127.0.0.1:30001', name: 'gpu1', kind: 'vllm', log: 'logs/gpu1.log' },
      { url: 'http://[::1]:30002' },
    ],
    expect_model: 'Qwen/Qwen3-8B',
    models: { 'gpt-4o-mini': 'Qwen/Qwen3-8B' },
    default_model: 'Qwen/Qwen3-8B',
    min_ready: 2,
    kind: 'openai',
    health: {
      interval: '5s',
      starting_interval: '250ms',
      timeout: '1.5s',
      rise: 2,
      fall: 4,
      stall_after: '15m',
      progress_timeout: 0,
      ejection_time: '10s',
      max_ejection_time: '2m',
      fatal_patterns: ['NCCL error', 'Segmentation fault \\(core dumped\\)'],
      failure_quiet: '2s',
    },
    routing: {
      policy: 'power-of-two',
      max_inflight_per_backend: 'auto',
      retries: 0,
      load_interval: '0',
      cap_slow_start: true,
    },
    queue: { max_waiting: 0, timeout: '1m' },
    retry: { resume_limit: 0, resume_wait: '3s' },
    upstream: { connect_timeout: '2s', headers_timeout: '2h', stream_idle_timeout: '30s', api_key: 'sk-backend' },
    limits: {
      body_size: '1MiB',
      header_size: 16384,
      headers_timeout: '10s',
      keep_alive_timeout: '5s',
      max_connections: 500,
    },
    auth: { api_keys: ['k1', 'k2'] },
    admin: { token: 's3cret' },
    discovery: { dns: 'sglang.svc.cluster.local', port: 30000, interval: '30s', kind: 'sglang' },
    log: { level: 'debug', destination: '/var/log/fleetgate.log', access: false },
    shutdown: { drain_timeout: '90s' },
    batch: {
      enabled: false,
      dir: '/var/lib/fleetgate/batches',
      max_file_size: '1MiB',
      database_url: 'postgres://fg:pw@db:5432/fleetgate',
      lease: '20s',
      stream_upstream: false,
    },
    metrics: { token_latency: false },
    tracing: {
      otlp_endpoint: 'http://127.0.0.1:4318',
      otlp_protocol: 'http/json',
      sample_ratio: 0.25,
      service_name: 'gw',
    },
    model: { dir: QWEN3, dirs: { 'Qwen/Qwen3-8B': QWEN3 } },
  };
  const expected: Config = {
    listen: { host: '127.0.0.1', port: 9000 },
    metrics_listen: { host: '::1', port: 9464 },
    backends: [
      { url: 'https://gpu-a.example:8443', name: 'gpu-a.example:8443', kind: 'openai', log: null },
      { url: 'http://127.0.0.1:30001', name: 'gpu1', kind: 'vllm', log: 'logs/gpu1.log' },
      { url: 'http://[::1]:30002', name: '[::1]:30002', kind: 'openai', log: null },
    ],
    expect_model: 'Qwen/Qwen3-8B',
    models: { 'gpt-4o-mini': 'Qwen/Qwen3-8B' },
    default_model: 'Qwen/Qwen3-8B',
    min_ready: 2,
    kind: 'openai',
    health: {
      interval: 5_000,
      starting_interval: 250,
      timeout: 1_500,
      rise: 2,
      fall: 4,
      stall_after: 900_000,
      progress_timeout: 0,
      drain_deadline: 60_000,
      ejection_time: 10_000,
      max_ejection_time: 120_000,
      fatal_patterns: ['NCCL error', 'Segmentation fault \\(core dumped\\)'],
      failure_quiet: 2_000,
    },
    routing: {
      policy: 'power-of-two',
      max_inflight_per_backend: 'auto',
      retries: 0,
      load_interval: 0,
      cap_slow_start: true,
      replicas: 1,
      cap_scope: 'fleet',
      prefix: {
        block_chars: 128,
        max_blocks: 65_536,
        ttl: 600_000,
        min_match: 0.3,
        load_gap: 4,
        load_ratio: 1.5,
        balance_factor: 1.25,
        session_header: 'x-session-id',
        queue_lookahead: 32,
        queue_hold: 2_000,
      },
      kv_events: {
        enabled: true,
        endpoint: null,
        replay_endpoint: null,
        topic: null,
        block_size: 16,
        discover: true,
        max_blocks: 1_000_000,
        stale_for: 30_000,
        token_cache: 10_000,
        tokenize_wait: 50,
        tokenize_whole: false,
      },
    },
    queue: {
      max_waiting: 0,
      timeout: 60_000,
      classes: [
        { name: 'interactive', max_waiting: null, timeout: null, api_keys: [], backend_priority: null },
        { name: 'batch', max_waiting: null, timeout: null, api_keys: [], backend_priority: null },
      ],
      default_class: 'batch',
      max_starvation: 60_000,
      reserve: 0,
    },
    retry: { resume_limit: 0, resume_wait: 3_000 },
    upstream: {
      connect_timeout: 2_000,
      headers_timeout: 7_200_000,
      stream_idle_timeout: 30_000,
      api_key: 'sk-backend',
      warm_up: true,
    },
    limits: {
      body_size: 2 ** 20,
      header_size: 16384,
      headers_timeout: 10_000,
      keep_alive_timeout: 5_000,
      max_connections: 500,
    },
    auth: { api_keys: ['k1', 'k2'] },
    rate_limit: { enabled: false, max: 60, window: 60_000, by: 'api_key' },
    admin: { token: 's3cret' },
    discovery: { dns: 'sglang.svc.cluster.local', port: 30000, interval: 30_000, kind: 'sglang' },
    log: { level: 'debug', destination: '/var/log/fleetgate.log', access: false },
    // Its former name drain_timeout still sets it.
    shutdown: { grace: 90_000 },
    batch: {
      enabled: false,
      dir: '/var/lib/fleetgate/batches',
      max_file_size: 2 ** 20,
      database_url: 'postgres://fg:pw@db:5432/fleetgate',
      lease: 20_000,
      stream_upstream: false,
    },
    metrics: { token_latency: false },
    tracing: {
      otlp_endpoint: 'http://127.0.0.1:4318',
      otlp_protocol: 'http/json',
      sample_ratio: 0.25,
      service_name: 'gw',
    },
    launch: null,
    model: { dir: QWEN3, dirs: { 'Qwen/Qwen3-8B': QWEN3 } },
  };
  assert.deepEqual(validateConfig(raw, 'test'), expected);
});

test('listen accepts host:port, [ipv6]:port and :port', () => {
  const listen = (value: string) => validateConfig({ ...ONE_BACKEND, listen: value }, 'test').listen;
  assert.deepEqual(listen('localhost:80'), { host: 'localhost', port: 80 });
  assert.deepEqual(listen('[::]:8080'), { host: '::', port: 8080 });
  assert.deepEqual(listen(':8080'), { host: '0.0.0.0', port: 8080 });
  assert.deepEqual(listen('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
});

test('fleet shorthand expands to one backend per port, with {i} and {port}', () => {
  const config = validateConfig(
    { fleet: { host: '127.0.0.1', ports: '30000-30002', log: 'logs/sglang_gpu{i}.log' } },
    'test',
  );
  assert.deepEqual(config.backends, [
    { url: 'http://127.0.0.1:30000', name: 'gpu0', kind: 'sglang', log: 'logs/sglang_gpu0.log' },
    { url: 'http://127.0.0.1:30001', name: 'gpu1', kind: 'sglang', log: 'logs/sglang_gpu1.log' },
    { url: 'http://127.0.0.1:30002', name: 'gpu2', kind: 'sglang', log: 'logs/sglang_gpu2.log' },
  ]);
});

test('fleet ports may be a single port, a list, or a list with ranges; name and kind templates apply', () => {
  const single = validateConfig({ fleet: { ports: 30000 } }, 'test').backends;
  assert.deepEqual(single, [{ url: 'http://127.0.0.1:30000', name: 'gpu0', kind: 'sglang', log: null }]);

  const listed = validateConfig(
    { kind: 'vllm', fleet: { host: '10.0.0.5', ports: [8000, '8002-8003'], name: 'node5-{port}', kind: 'openai' } },
    'test',
  );
  assert.deepEqual(
    listed.backends.map((backend) => [backend.name, backend.url, backend.kind]),
    [
      ['node5-8000', 'http://10.0.0.5:8000', 'openai'],
      ['node5-8002', 'http://10.0.0.5:8002', 'openai'],
      ['node5-8003', 'http://10.0.0.5:8003', 'openai'],
    ],
  );
});

test('fleet and backends together: the fleet first, then the listed backends', () => {
  const config = validateConfig(
    { fleet: { ports: '30000-30001' }, backends: [{ url: 'http://10.0.0.2:30000', name: 'remote' }] },
    'test',
  );
  assert.deepEqual(
    config.backends.map((backend) => backend.name),
    ['gpu0', 'gpu1', 'remote'],
  );
});

test('a list of fleets covers several hosts', () => {
  const config = validateConfig(
    {
      fleet: [
        { host: '10.0.0.1', ports: '30000-30001', name: 'a{i}' },
        { host: '10.0.0.2', ports: '30000-30001', name: 'b{i}' },
      ],
    },
    'test',
  );
  assert.deepEqual(
    config.backends.map((backend) => `${backend.name}=${backend.url}`),
    ['a0=http://10.0.0.1:30000', 'a1=http://10.0.0.1:30001', 'b0=http://10.0.0.2:30000', 'b1=http://10.0.0.2:30001'],
  );
});

test('per-backend kind overrides the top-level kind; discovery inherits it too', () => {
  const config = validateConfig(
    {
      kind: 'vllm',
      backends: ['http://a:1', { url: 'http://b:1', kind: 'sglang' }],
      discovery: { dns: 'x.svc', port: 8000 },
    },
    'test',
  );
  assert.deepEqual(
    config.backends.map((backend) => backend.kind),
    ['vllm', 'sglang'],
  );
  assert.deepEqual(config.discovery, { dns: 'x.svc', port: 8000, interval: 10_000, kind: 'vllm' });
});

test('no static backends is fine when discovery is set', () => {
  const config = validateConfig({ discovery: { dns: 'sglang-headless', port: 30000 } }, 'test');
  assert.deepEqual(config.backends, []);
  assert.equal(config.discovery?.dns, 'sglang-headless');
});

test('validateBackend reads one entry, as for POST /fleet/backends', () => {
  assert.deepEqual(validateBackend({ url: 'http://127.0.0.1:30007/', name: 'gpu7', log: 'logs/gpu7.log' }, 'sglang'), {
    url: 'http://127.0.0.1:30007',
    name: 'gpu7',
    kind: 'sglang',
    log: 'logs/gpu7.log',
  });
  assert.deepEqual(validateBackend('http://h:9/x', 'vllm'), {
    url: 'http://h:9',
    name: 'h:9',
    kind: 'vllm',
    log: null,
  });
  assert.throws(() => validateBackend({ url: 'ftp://h:9' }, 'vllm'), {
    message: 'backend.url: "ftp://h:9" is not an http(s) URL (e.g. http://127.0.0.1:30000)',
  });
});

/** [raw config, exact message] */
const BAD_CONFIGS: Array<[string, unknown, string]> = [
  ['wrong type', { ...ONE_BACKEND, min_ready: 'two' }, 'min_ready: expected an integer >= 0, got "two"'],
  [
    'negative integer',
    { ...ONE_BACKEND, routing: { retries: -1 } },
    'routing.retries: expected an integer >= 0, got -1',
  ],
  ['fraction', { ...ONE_BACKEND, health: { rise: 1.5 } }, 'health.rise: expected an integer >= 1, got 1.5'],
  ['zero rise', { ...ONE_BACKEND, health: { rise: 0 } }, 'health.rise: expected an integer >= 1, got 0'],
  [
    'unknown key',
    { ...ONE_BACKEND, routing: { polcy: 'round-robin' } },
    'routing.polcy: unknown key (did you mean "policy"?)',
  ],
  [
    'swapped letters',
    { ...ONE_BACKEND, health: { intreval: '1s' } },
    'health.intreval: unknown key (did you mean "interval"?)',
  ],
  [
    'dashes for underscores',
    { ...ONE_BACKEND, routing: { 'max-inflight-per-backend': 4 } },
    'routing.max-inflight-per-backend: unknown key (did you mean "max_inflight_per_backend"?)',
  ],
  [
    'key at the wrong level',
    { ...ONE_BACKEND, interval: '5s' },
    'interval: unknown key (did you mean "health.interval"?)',
  ],
  [
    'unknown key, nothing close',
    { ...ONE_BACKEND, queue: { zzz: 1 } },
    'queue.zzz: unknown key (known: max_waiting, timeout, classes, default_class, max_starvation, reserve)',
  ],
  [
    'unknown backend key',
    { backends: [{ url: 'http://a:1', nmae: 'x' }] },
    'backends[0].nmae: unknown key (did you mean "name"?)',
  ],
  [
    'bad duration',
    { ...ONE_BACKEND, health: { interval: 'fast' } },
    'health.interval: "fast" is not a duration (e.g. 500ms, 10s)',
  ],
  [
    'duration without unit',
    { ...ONE_BACKEND, queue: { timeout: 30 } },
    'queue.timeout: 30 has no unit (e.g. 500ms, 10s)',
  ],
  ['zero interval', { ...ONE_BACKEND, health: { interval: '0s' } }, 'health.interval: must be more than 0'],
  [
    'bad progress_timeout',
    { ...ONE_BACKEND, health: { progress_timeout: 'never' } },
    'health.progress_timeout: "never" is not a duration (e.g. 500ms, 10s)',
  ],
  ['zero stall_after', { ...ONE_BACKEND, health: { stall_after: 0 } }, 'health.stall_after: must be more than 0'],
  [
    'zero max_ejection_time',
    { ...ONE_BACKEND, health: { max_ejection_time: '0s' } },
    'health.max_ejection_time: must be more than 0',
  ],
  [
    'bad size',
    { ...ONE_BACKEND, limits: { body_size: '32M' } },
    'limits.body_size: "32M" is not a size (e.g. 512KiB, 32MiB)',
  ],
  [
    'enum',
    { ...ONE_BACKEND, routing: { policy: 'fastest' } },
    'routing.policy: "fastest" is not one of least-loaded, round-robin, power-of-two, prefix-aware, kv-aware, auto',
  ],
  ['kind enum', { ...ONE_BACKEND, kind: 'tgi' }, 'kind: "tgi" is not one of sglang, vllm, openai'],
  [
    'log level',
    { ...ONE_BACKEND, log: { level: 'verbose' } },
    'log.level: "verbose" is not one of trace, debug, info, warn, error, fatal, silent',
  ],
  ['boolean', { ...ONE_BACKEND, log: { access: 'yes' } }, 'log.access: expected true or false, got "yes"'],
  [
    'cap_scope',
    { ...ONE_BACKEND, routing: { cap_scope: 'process' } },
    'routing.cap_scope: "process" is not one of fleet, replica',
  ],
  [
    'cap_slow_start',
    { ...ONE_BACKEND, routing: { cap_slow_start: 'on' } },
    'routing.cap_slow_start: expected true or false, got "on"',
  ],
  [
    'inflight',
    { ...ONE_BACKEND, routing: { max_inflight_per_backend: 'many' } },
    'routing.max_inflight_per_backend: expected an integer >= 0 or "auto", got "many"',
  ],
  [
    'unquoted numeric token',
    { ...ONE_BACKEND, admin: { token: 12345 } },
    'admin.token: expected a string, got 12345 (quote it in YAML)',
  ],
  ['empty string', { ...ONE_BACKEND, expect_model: '' }, 'expect_model: must not be empty'],
  [
    'section not a mapping',
    { ...ONE_BACKEND, queue: 5 },
    'queue: expected a mapping of max_waiting, timeout, classes, default_class, max_starvation, reserve, got 5',
  ],
  ['models not a mapping', { ...ONE_BACKEND, models: ['a'] }, 'models: expected a mapping, got a list'],
  [
    'model alias to a number',
    { ...ONE_BACKEND, models: { fast: 7 } },
    'models.fast: expected a string, got 7 (quote it in YAML)',
  ],
  ['list expected', { ...ONE_BACKEND, auth: { api_keys: 'k1' } }, 'auth.api_keys: expected a list, got "k1"'],
  ['bad listen', { ...ONE_BACKEND, listen: '8080' }, 'listen: "8080" is not host:port (e.g. 0.0.0.0:8080)'],
  [
    'unbracketed IPv6',
    { ...ONE_BACKEND, listen: '::1:8080' },
    'listen: "::1:8080" is not host:port (e.g. 0.0.0.0:8080; write IPv6 as "[::1]:8080", quoted)',
  ],
  [
    'listen port too big',
    { ...ONE_BACKEND, listen: '0.0.0.0:70000' },
    'listen: "0.0.0.0:70000" is not host:port (e.g. 0.0.0.0:8080)',
  ],
  [
    'metrics on the main port',
    { ...ONE_BACKEND, metrics_listen: '0.0.0.0:8080' },
    'metrics_listen: 0.0.0.0:8080 is also the main listen address',
  ],
  ['empty config', {}, 'backends: no backends configured (set backends, fleet or discovery)'],
  ['empty fleet', { fleet: { ports: [] } }, 'backends: no backends configured (set backends, fleet or discovery)'],
  ['empty backends', { backends: [] }, 'backends: no backends configured (set backends, fleet or discovery)'],
  ['reversed range', { fleet: { ports: '30006-30000' } }, 'fleet.ports: range 30006-30000 is reversed'],
  ['bad port', { fleet: { ports: [30000, 70000] } }, 'fleet.ports[1]: 70000 is not a port (1-65535)'],
  [
    'bad ports',
    { fleet: { ports: 'many' } },
    'fleet.ports: expected a port, a range like 30000-30006 or a list of ports, got "many"',
  ],
  ['fleet without ports', { fleet: { host: '127.0.0.1' } }, 'fleet.ports: is required'],
  [
    'fleet name without index',
    { fleet: { ports: '1-2', name: 'gpu' } },
    'fleet.name: "gpu" needs {i} or {port} to tell 2 backends apart',
  ],
  [
    'fleet shared log',
    { fleet: { ports: '1-2', log: 'sglang.log' } },
    'fleet.log: "sglang.log" needs {i} or {port}: 2 backends cannot share one log',
  ],
  [
    'fleet placeholder',
    { fleet: { ports: 1, log: 'logs/{gpu}.log' } },
    'fleet.log: unknown placeholder {gpu} (use {i} or {port})',
  ],
  [
    'URL without scheme',
    { backends: ['127.0.0.1:30000'] },
    'backends[0]: "127.0.0.1:30000" is not an http(s) URL (e.g. http://127.0.0.1:30000)',
  ],
  [
    'URL with another scheme',
    { backends: [{ url: 'grpc://h:1' }] },
    'backends[0].url: "grpc://h:1" is not an http(s) URL (e.g. http://127.0.0.1:30000)',
  ],
  [
    'URL without port',
    { backends: ['http://gpu1/v1'] },
    'backends[0]: "http://gpu1/v1" has no port (e.g. http://127.0.0.1:30000)',
  ],
  [
    'URL with credentials',
    { backends: ['http://u:p@h:1'] },
    'backends[0]: "http://u:p@h:1" must not contain credentials (set upstream.api_key)',
  ],
  [
    'backend not a URL',
    { backends: [30000] },
    'backends[0]: expected a URL or a mapping of url, name, kind, log, got 30000',
  ],
  ['backend without url', { backends: [{ name: 'gpu0' }] }, 'backends[0].url: is required'],
  ['backends not a list', { backends: 'http://a:1' }, 'backends: expected a list, got "http://a:1"'],
  [
    'backend name with slash',
    { backends: [{ url: 'http://a:1', name: 'gpu/0' }] },
    'backends[0].name: "gpu/0" must not contain "/" or whitespace',
  ],
  [
    'duplicate names',
    {
      backends: [
        { url: 'http://a:1', name: 'gpu0' },
        { url: 'http://a:2', name: 'gpu1' },
        { url: 'http://a:3', name: 'gpu2' },
        { url: 'http://a:4', name: 'gpu1' },
      ],
    },
    'backends[3].name: duplicate name "gpu1"',
  ],
  [
    'duplicate name from fleet',
    { fleet: { ports: '1-2' }, backends: [{ url: 'http://b:1', name: 'gpu1' }] },
    'backends[0].name: duplicate name "gpu1"',
  ],
  ['duplicate URL', { backends: ['http://a:1', 'http://a:1/v1'] }, 'backends[1]: duplicate url "http://a:1"'],
  ['duplicate port in fleet', { fleet: { ports: [1, 1] } }, 'fleet.ports: duplicate url "http://127.0.0.1:1"'],
  [
    'bad regex',
    { ...ONE_BACKEND, health: { fatal_patterns: ['ok', '(unclosed'] } },
    'health.fatal_patterns[1]: "(unclosed" is not a valid regular expression (Unterminated group)',
  ],
  ['min_ready above backends', { ...ONE_BACKEND, min_ready: 2 }, 'min_ready: 2 is more than the 1 configured backends'],
  ['discovery without dns', { discovery: { port: 30000 } }, 'discovery.dns: is required'],
  [
    'discovery port',
    { discovery: { dns: 'x', port: 0 } },
    'discovery.port: expected an integer from 1 to 65535, got 0',
  ],
  [
    'prefix queue lookahead',
    { ...ONE_BACKEND, routing: { prefix: { queue_lookahead: -1 } } },
    'routing.prefix.queue_lookahead: expected an integer from 0 to 10000, got -1',
  ],
  [
    'prefix queue hold',
    { ...ONE_BACKEND, routing: { prefix: { queue_hold: 'soon' } } },
    'routing.prefix.queue_hold: "soon" is not a duration (e.g. 500ms, 10s)',
  ],
  ['not a mapping', ['http://a:1'], 'expected a mapping of settings, got a list'],
];

for (const [name, raw, message] of BAD_CONFIGS) {
  test(`rejects ${name}: ${message}`, () => {
    assert.throws(
      () => validateConfig(raw, 'fleet.yaml'),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.message, message);
        assert.equal(error.source, 'in fleet.yaml');
        assert.equal(message.startsWith(error.key === '' ? '' : `${error.key}: `), true);
        return true;
      },
    );
  });
}

test('strings from env and flags are coerced to what the schema wants', () => {
  assert.equal(coerceSettingText(['min_ready'], '3'), 3);
  assert.equal(coerceSettingText(['min_ready'], 'two'), 'two');
  assert.equal(coerceSettingText(['log', 'access'], 'false'), false);
  assert.equal(coerceSettingText(['log', 'access'], 'TRUE'), true);
  assert.equal(coerceSettingText(['health', 'interval'], '2s'), '2s');
  assert.equal(coerceSettingText(['admin', 'token'], '12345'), '12345');
  assert.equal(coerceSettingText(['admin', 'token'], 'null'), null);
  assert.equal(coerceSettingText(['expect_model'], ''), null);
  assert.equal(coerceSettingText(['routing', 'max_inflight_per_backend'], 'auto'), 'auto');
  assert.equal(coerceSettingText(['routing', 'max_inflight_per_backend'], '8'), 8);
  assert.equal(coerceSettingText(['discovery', 'port'], '30000'), 30000);
  assert.equal(coerceSettingText(['fleet', 'ports'], '30000-30006'), '30000-30006');
  assert.deepEqual(coerceSettingText(['fleet', 'ports'], '[30000, 30002]'), [30000, 30002]);
  assert.deepEqual(coerceSettingText(['auth', 'api_keys'], '[k1, k2]'), ['k1', 'k2']);
  assert.equal(coerceSettingText(['routing', 'polcy'], '3'), '3');
});

test('batch.database_url: a postgres:// URL, else an error naming the key', () => {
  for (const bad of ['mysql://db/x', 'not a url', 'postgres://']) {
    assert.throws(
      () => validateConfig({ ...ONE_BACKEND, batch: { database_url: bad } }, 'test'),
      (error: unknown) =>
        error instanceof ConfigError && error.key === 'batch.database_url' && /postgres:\/\//.test(error.message),
      bad,
    );
  }
  assert.equal(
    validateConfig({ ...ONE_BACKEND, batch: { database_url: 'postgresql://u@db/x' } }, 'test').batch.database_url,
    'postgresql://u@db/x',
  );
});

test("model.dir auto takes launch.command's local --model-path; a hub id or a directory without a tokenizer is no model", () => {
  const launch = (modelPath: string) => ({
    launch: { command: `python -m sglang.launch_server --model-path ${modelPath} --port {port}`, ports: '30000-30001' },
  });
  assert.deepEqual(validateConfig(launch(QWEN3), 'test').model, { dir: QWEN3, dirs: {} });
  assert.deepEqual(validateConfig(launch('Qwen/Qwen3-8B'), 'test').model, { dir: null, dirs: {} });
  assert.deepEqual(validateConfig({ ...ONE_BACKEND }, 'test').model, { dir: null, dirs: {} });
});

test('a model directory without tokenizer.json is refused naming the key', () => {
  assert.throws(
    () => validateConfig({ ...ONE_BACKEND, model: { dir: '/nonexistent/model' } }, 'test'),
    (error: Error) =>
      error instanceof ConfigError && error.key === 'model.dir' && /tokenizer\.json/.test(error.message),
  );
  assert.throws(
    () => validateConfig({ ...ONE_BACKEND, model: { dirs: { m: '/tmp' } } }, 'test'),
    (error: Error) => error instanceof ConfigError && error.key === 'model.dirs.m',
  );
});
