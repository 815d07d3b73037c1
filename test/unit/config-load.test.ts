import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../../src/config/errors.js';
import { formatConfigError, type LoadOptions, loadConfig, parseServeArgs } from '../../src/config/load.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** A fresh directory holding `files`, removed after the test. */
function workdir(t: TestContext, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-config-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

function load(options: LoadOptions) {
  return loadConfig({ env: {}, ...options });
}

/** The ConfigError `run` throws, formatted for stderr. */
function configErrorOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return formatConfigError(error);
    throw error;
  }
  assert.fail('expected a ConfigError');
}

const BASE_FILE = `
backends:
  - url: http://127.0.0.1:30000
    name: gpu0
  - http://127.0.0.1:30001
health:
  interval: 20s
`;

test('the shipped config/fleetgate.yaml is DESIGN: 0.0.0.0:8080 in front of gpu0..gpu6 on 30000-30006', () => {
  const { config, path } = load({ cwd: REPO });
  assert.equal(path, join(REPO, 'config/fleetgate.yaml'));
  assert.deepEqual(config.listen, { host: '0.0.0.0', port: 8080 });
  assert.deepEqual(
    config.backends,
    [0, 1, 2, 3, 4, 5, 6].map((i) => ({
      url: `http://127.0.0.1:${30000 + i}`,
      name: `gpu${i}`,
      kind: 'sglang',
      log: null,
    })),
  );
});

test('outside the repository the embedded default gives the same config as the shipped file', (t) => {
  const outside = load({ cwd: workdir(t) });
  assert.equal(outside.path, null);
  assert.deepEqual(outside.config, load({ cwd: REPO }).config);
});

test('the shipped examples load', () => {
  const shorthand = load({ cwd: REPO, argv: ['--config', 'config/examples/fleet-shorthand.yaml'] }).config;
  assert.equal(shorthand.backends.length, 7);
  assert.deepEqual(shorthand.backends[3], {
    url: 'http://127.0.0.1:30003',
    name: 'gpu3',
    kind: 'sglang',
    log: 'logs/sglang_gpu3.log',
  });

  const vllm = load({ cwd: REPO, argv: ['--config', 'config/examples/vllm.yaml'] }).config;
  assert.equal(vllm.kind, 'vllm');
  assert.deepEqual(
    vllm.backends.map((backend) => `${backend.name}:${backend.kind}`),
    ['vllm0:vllm', 'vllm1:vllm', 'remote0:vllm', 'other0:openai'],
  );

  const dns = load({ cwd: REPO, argv: ['--config', 'config/examples/dns-discovery.yaml'] }).config;
  assert.deepEqual(dns.backends, []);
  assert.deepEqual(dns.discovery, {
    dns: 'sglang-headless.inference.svc.cluster.local',
    port: 30000,
    interval: 10_000,
    kind: 'sglang',
  });
  assert.deepEqual(dns.metrics_listen, { host: '0.0.0.0', port: 9464 });
});

test('the file is --config, else FLEETGATE_CONFIG, else config/fleetgate.yaml under cwd', (t) => {
  const dir = workdir(t, {
    'config/fleetgate.yaml': 'backends: [http://default:1]',
    'from-env.yaml': 'backends: [http://env:1]',
    'from-flag.yaml': 'backends: [http://flag:1]',
  });
  const hostOf = (options: LoadOptions) => load({ cwd: dir, ...options }).config.backends[0].name;
  assert.equal(hostOf({}), 'default:1');
  assert.equal(hostOf({ env: { FLEETGATE_CONFIG: 'from-env.yaml' } }), 'env:1');
  assert.equal(hostOf({ env: { FLEETGATE_CONFIG: 'from-env.yaml' }, argv: ['--config', 'from-flag.yaml'] }), 'flag:1');
  assert.equal(hostOf({ argv: ['--config', join(dir, 'from-flag.yaml')] }), 'flag:1');
  assert.equal(hostOf({ defaultPath: 'from-env.yaml' }), 'env:1');
  assert.equal(load({ cwd: dir, argv: ['--config=from-flag.yaml'] }).path, join(dir, 'from-flag.yaml'));
});

test('file < environment < flags, each overriding the one before', (t) => {
  const dir = workdir(t, { 'config/fleetgate.yaml': BASE_FILE });
  const env = {
    FLEETGATE__HEALTH__INTERVAL: '5s',
    FLEETGATE_LISTEN: '127.0.0.1:9001',
    FLEETGATE_BACKENDS: 'http://env-a:1, http://env-b:1',
    FLEETGATE_LOG_LEVEL: 'warn',
    FLEETGATE_ADMIN_TOKEN: 'from-env',
  };
  const flags = [
    '--set',
    'health.interval=2s',
    '--listen',
    '127.0.0.1:9002',
    '--backend',
    'http://flag-a:1',
    '--backend=http://flag-b:1',
    '--log-level',
    'debug',
    '--set',
    'admin.token=from-flag',
  ];
  const summary = (options: LoadOptions) => {
    const { config } = load({ cwd: dir, ...options });
    return {
      interval: config.health.interval,
      listen: config.listen.port,
      backends: config.backends.map((backend) => backend.name),
      level: config.log.level,
      token: config.admin.token,
    };
  };
  assert.deepEqual(summary({}), {
    interval: 20_000,
    listen: 8080,
    backends: ['gpu0', '127.0.0.1:30001'],
    level: 'info',
    token: null,
  });
  assert.deepEqual(summary({ env }), {
    interval: 5_000,
    listen: 9001,
    backends: ['env-a:1', 'env-b:1'],
    level: 'warn',
    token: 'from-env',
  });
  assert.deepEqual(summary({ env, argv: flags }), {
    interval: 2_000,
    listen: 9002,
    backends: ['flag-a:1', 'flag-b:1'],
    level: 'debug',
    token: 'from-flag',
  });
});

test('FLEETGATE__A__B sets any key, with numbers, booleans and null coerced; named variables win', (t) => {
  const dir = workdir(t, { 'config/fleetgate.yaml': BASE_FILE });
  const { config } = load({
    cwd: dir,
    env: {
      FLEETGATE__MIN_READY: '2',
      FLEETGATE__LOG__ACCESS: 'false',
      FLEETGATE__ROUTING__MAX_INFLIGHT_PER_BACKEND: 'auto',
      FLEETGATE__LIMITS__BODY_SIZE: '1MiB',
      FLEETGATE__UPSTREAM__API_KEY: '12345',
      FLEETGATE__EXPECT_MODEL: 'null',
      FLEETGATE__LISTEN: '127.0.0.1:1111',
      FLEETGATE_LISTEN: '127.0.0.1:2222',
      FLEETGATE_URL: 'http://used-by-fleetgate-status',
      FLEETGATE_BACKENDS: '',
    },
  });
  assert.equal(config.min_ready, 2);
  assert.equal(config.log.access, false);
  assert.equal(config.routing.max_inflight_per_backend, 'auto');
  assert.equal(config.limits.body_size, 2 ** 20);
  assert.equal(config.upstream.api_key, '12345');
  assert.equal(config.expect_model, null);
  assert.equal(config.listen.port, 2222);
  assert.equal(config.backends.length, 2, 'an empty FLEETGATE_BACKENDS counts as unset');
});

test('--backend replaces the fleet shorthand too; a later flag wins over an earlier one', (t) => {
  const dir = workdir(t, { 'fleet.yaml': 'fleet: { ports: 30000-30006 }\nbackends: [http://extra:1]' });
  const { config } = load({
    cwd: dir,
    argv: [
      '--config',
      'fleet.yaml',
      '--backend',
      'http://only:1',
      '--listen',
      '127.0.0.1:1',
      '--set',
      'listen=127.0.0.1:2',
    ],
  });
  assert.deepEqual(
    config.backends.map((backend) => backend.name),
    ['only:1'],
  );
  assert.equal(config.listen.port, 2);
});

test('--set reaches nested keys and lists; fleet ports from a flag', (t) => {
  const dir = workdir(t, { 'fleet.yaml': 'fleet: { ports: 30000-30006 }' });
  const { config } = load({
    cwd: dir,
    argv: [
      '--config',
      'fleet.yaml',
      '--set',
      'fleet.ports=[30000, 30001]',
      '--set',
      'auth.api_keys=[k1, k2]',
      '--set',
      'queue.max_waiting=7',
    ],
  });
  assert.deepEqual(
    config.backends.map((backend) => backend.name),
    ['gpu0', 'gpu1'],
  );
  assert.deepEqual(config.auth.api_keys, ['k1', 'k2']);
  assert.equal(config.queue.max_waiting, 7);
});

test('positional arguments and everything after -- are returned in rest', () => {
  assert.deepEqual(parseServeArgs(['extra', '--listen', ':1', '--', '--not-a-flag']), {
    configPath: null,
    settings: [{ key: 'listen', value: ':1', origin: '--listen' }],
    rest: ['extra', '--not-a-flag'],
    help: false,
  });
  assert.deepEqual(load({ cwd: REPO, argv: ['a', '--', '--b'] }).rest, ['a', '--b']);
});

test('--help and -h ask for the usage; a flag value or an argument after -- that reads --help does not', () => {
  assert.equal(parseServeArgs(['--listen', ':1', '--help']).help, true);
  assert.equal(parseServeArgs(['-h']).help, true);
  assert.equal(parseServeArgs(['--set=log.destination=--help']).help, false);
  assert.equal(parseServeArgs(['--', '--help']).help, false);
});

test('errors name the key and the line of the file it is on', (t) => {
  const dir = workdir(t, { 'config/fleetgate.yaml': `${BASE_FILE}routing:\n  polcy: round-robin\n` });
  assert.equal(
    configErrorOf(() => load({ cwd: dir })),
    'fleetgate: config error: routing.polcy: unknown key (did you mean "policy"?) (in config/fleetgate.yaml:9)',
  );
  const bad = workdir(t, { 'bad.yaml': 'backends:\n  - http://a:1\n  - url: http://b:1\n    name: a:1\n' });
  assert.equal(
    configErrorOf(() => load({ cwd: bad, argv: ['--config', 'bad.yaml'] })),
    'fleetgate: config error: backends[1].name: duplicate name "a:1" (in bad.yaml:4)',
  );
  const empty = workdir(t, { 'config/fleetgate.yaml': '# nothing\n' });
  assert.equal(
    configErrorOf(() => load({ cwd: empty })),
    'fleetgate: config error: backends: no backends configured (set backends, fleet or discovery) (in config/fleetgate.yaml)',
  );
});

test('errors in values from env or flags name the variable or flag', (t) => {
  const dir = workdir(t, { 'config/fleetgate.yaml': BASE_FILE });
  assert.equal(
    configErrorOf(() => load({ cwd: dir, env: { FLEETGATE__HEALTH__INTERVAL: 'fast' } })),
    'fleetgate: config error: health.interval: "fast" is not a duration (e.g. 500ms, 10s) (from FLEETGATE__HEALTH__INTERVAL)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, argv: ['--set', 'routing.policy=fastest'] })),
    'fleetgate: config error: routing.policy: "fastest" is not one of least-loaded, round-robin, power-of-two, prefix-aware, kv-aware, auto (from --set routing.policy)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, argv: ['--set', 'min_ready=two'] })),
    'fleetgate: config error: min_ready: expected an integer >= 0, got "two" (from --set min_ready)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, argv: ['--backend', 'localhost:30000'] })),
    'fleetgate: config error: backends[0]: "localhost:30000" is not an http(s) URL (e.g. http://127.0.0.1:30000) (from --backend)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, env: { FLEETGATE_LISTEN: '8080' } })),
    'fleetgate: config error: listen: "8080" is not host:port (e.g. 0.0.0.0:8080) (from FLEETGATE_LISTEN)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, env: { FLEETGATE__HEALTH__INTERVL: '1s' } })),
    'fleetgate: config error: health.intervl: unknown key (did you mean "interval"?) (from FLEETGATE__HEALTH__INTERVL)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: REPO, argv: ['--set', 'min_ready=9'] })),
    'fleetgate: config error: min_ready: 9 is more than the 7 configured backends (from --set min_ready)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, argv: ['--set', 'listen.port=1'], env: { FLEETGATE_LISTEN: '127.0.0.1:1' } })),
    'fleetgate: config error: listen: is "127.0.0.1:1", not a section, so listen.port cannot be set (from --set listen.port)',
  );
});

test('bad flags are refused by name', () => {
  const cases: Array<[string[], string]> = [
    [['--lisen', ':1'], 'fleetgate: config error: --lisen: unknown flag (did you mean "--listen"?)'],
    [['--backends', 'http://a:1'], 'fleetgate: config error: --backends: unknown flag (did you mean "--backend"?)'],
    [
      ['--port', '1'],
      'fleetgate: config error: --port: unknown flag (known: --config, --listen, --backend, --set, --log-level, --help)',
    ],
    [['--listen'], 'fleetgate: config error: --listen: needs a value (--listen HOST:PORT)'],
    [['--config', '--listen', ':1'], 'fleetgate: config error: --config: needs a value (--config FILE)'],
    [
      ['--set', 'health.interval'],
      'fleetgate: config error: --set: "health.interval" is not key.path=value (e.g. --set health.interval=2s)',
    ],
    [['--set', '=2s'], 'fleetgate: config error: --set: "=2s" is not key.path=value (e.g. --set health.interval=2s)'],
    [
      ['--set', 'health..interval=2s'],
      'fleetgate: config error: --set: "health..interval=2s" is not key.path=value (e.g. --set health.interval=2s)',
    ],
  ];
  for (const [argv, expected] of cases)
    assert.equal(
      configErrorOf(() => load({ cwd: REPO, argv })),
      expected,
      argv.join(' '),
    );
});

test('unreadable and malformed files are reported with their path', (t) => {
  const dir = workdir(t, {
    'broken.yaml': 'backends:\n  - http://a:1\nhealth: [\n  interval: 1s\n',
    'dupe.yaml': 'min_ready: 1\nmin_ready: 2\n',
    'list.yaml': '- http://a:1\n',
  });
  assert.equal(
    configErrorOf(() => load({ cwd: dir, argv: ['--config', 'missing.yaml'] })),
    'fleetgate: config error: cannot read missing.yaml: no such file (from --config)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, env: { FLEETGATE_CONFIG: 'missing.yaml' } })),
    'fleetgate: config error: cannot read missing.yaml: no such file (from FLEETGATE_CONFIG)',
  );
  assert.match(
    configErrorOf(() => load({ cwd: dir, argv: ['--config', 'broken.yaml'] })),
    /^fleetgate: config error: invalid YAML: .+ \(in broken\.yaml:\d+:\d+\)$/,
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, argv: ['--config', 'dupe.yaml'] })),
    'fleetgate: config error: invalid YAML: Map keys must be unique (in dupe.yaml:2:1)',
  );
  assert.equal(
    configErrorOf(() => load({ cwd: dir, argv: ['--config', 'list.yaml'] })),
    'fleetgate: config error: expected a mapping of settings, got a list (in list.yaml)',
  );
});
