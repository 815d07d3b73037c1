/** The `launch:` section: templates split into argv and filled per engine, every mistake a ConfigError naming the key. */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { splitCommand } from '../../src/config/command-template.js';
import { ConfigError } from '../../src/config/errors.js';
import { loadConfig } from '../../src/config/load.js';
import { validateConfig } from '../../src/config/validate.js';

const REPO = join(import.meta.dirname, '../..');
const COMMAND = 'python -m sglang.launch_server --model-path M --port {port} --mem-fraction-static 0.88';

function launch(fields: Record<string, unknown>) {
  return validateConfig({ launch: { command: COMMAND, ports: '30000-30001', ...fields } }, 'test');
}

function rejects(fields: Record<string, unknown>, key: string, problem: RegExp) {
  assert.throws(
    () => launch(fields),
    (error: unknown) => error instanceof ConfigError && error.key === key && problem.test(error.problem),
    `${key} ${problem}`,
  );
}

test('each engine gets its argv, GPUs, log and a backend of the same name', () => {
  const config = launch({ log: 'logs/sglang_gpu{i}.log', env: { HF_HOME: '/data/hf', TAG: '{name}-{port}' } });
  assert.deepEqual(
    config.backends.map((b) => [b.name, b.url, b.log]),
    [
      ['gpu0', 'http://127.0.0.1:30000', 'logs/sglang_gpu0.log'],
      ['gpu1', 'http://127.0.0.1:30001', 'logs/sglang_gpu1.log'],
    ],
  );
  const engine = config.launch?.engines[1];
  assert.deepEqual(engine?.argv, [
    'python',
    '-m',
    'sglang.launch_server',
    '--model-path',
    'M',
    '--port',
    '30001',
    '--mem-fraction-static',
    '0.88',
  ]);
  assert.deepEqual(engine?.env, { CUDA_VISIBLE_DEVICES: '1', HF_HOME: '/data/hf', TAG: 'gpu1-30001' });
  assert.equal(config.launch?.on_exit, 'stop');
  assert.equal(config.launch?.stop_grace, 30_000);
  assert.equal(config.launch?.restart_backoff, 10_000);
  assert.equal(config.launch?.restart_backoff_max, 300_000);
});

test('gpus: N per engine in consecutive groups, or one group per engine', () => {
  assert.deepEqual(
    launch({ gpus: 2 }).launch?.engines.map((e) => e.env.CUDA_VISIBLE_DEVICES),
    ['0,1', '2,3'],
  );
  assert.deepEqual(
    launch({ gpus: ['4,5', [6, 7]] }).launch?.engines.map((e) => e.gpus),
    ['4,5', '6,7'],
  );
  rejects({ gpus: ['0'] }, 'launch.gpus', /1 GPU groups for 2 ports/);
  rejects({ gpus: ['0', 'x'] }, 'launch.gpus[1]', /not a GPU id/);
});

test('the command is split like shell words but never run by one: quotes group, nothing expands', () => {
  assert.deepEqual(splitCommand(`run --chat-template "a b" 'c "d"' $HOME *.py`), [
    'run',
    '--chat-template',
    'a b',
    'c "d"',
    '$HOME',
    '*.py',
  ]);
  rejects({ command: 'run "open' }, 'launch.command', /unclosed " quote/);
});

test('an unknown placeholder or an empty command is an error naming the key', () => {
  rejects(
    { command: 'python -m sglang.launch_server --port {prot}' },
    'launch.command',
    /unknown placeholder \{prot\}/,
  );
  rejects({ command: '' }, 'launch.command', /must not be empty/);
  rejects({ command: '\'\' ""' }, 'launch.command', /names no program/);
  rejects({ log: 'logs/{gpu}.log' }, 'launch.log', /unknown placeholder \{gpu\}/);
  rejects({ env: { X: '{model}' } }, 'launch.env.X', /unknown placeholder \{model\}/);
  rejects({ name: 'engine' }, 'launch.name', /needs \{i\} or \{port\}/);
  rejects({ log: 'logs/all.log' }, 'launch.log', /two engines one log/);
  rejects({ command: undefined }, 'launch.command', /is required/);
  rejects({ on_exit: 'kill' }, 'launch.on_exit', /not one of stop, keep/);
  rejects({ stop_grace: 30 }, 'launch.stop_grace', /no unit/);
  rejects({ restart_backoff: '1m', restart_backoff_max: '10s' }, 'launch.restart_backoff_max', /less than/);
  rejects({ max_restart: 3 }, 'launch.max_restart', /did you mean "max_restarts"/);
});

test('remedies: a step needs the flag with a number in the command; bad regexes and steps are named', () => {
  const ok = launch({
    remedies: [{ when: 'Not enough memory', set: { '--mem-fraction-static': { step: -0.05, min: 0.7 } } }],
  });
  assert.deepEqual(ok.launch?.remedies, [
    { when: 'Not enough memory', set: { '--mem-fraction-static': { step: -0.05, min: 0.7, max: null } } },
  ]);
  rejects(
    { remedies: [{ when: 'OOM', set: { '--cuda-graph-max-bs': { step: -8 } } }] },
    'launch.remedies[0].set.--cuda-graph-max-bs',
    /needs launch.command to pass --cuda-graph-max-bs/,
  );
  rejects(
    { remedies: [{ when: '(', set: { '--x': '1' } }] },
    'launch.remedies[0].when',
    /not a valid regular expression/,
  );
  rejects(
    { remedies: [{ when: 'x', set: { '--mem-fraction-static': { step: 0 } } }] },
    'launch.remedies[0].set.--mem-fraction-static.step',
    /must not be 0/,
  );
  rejects(
    { remedies: [{ when: 'x', set: { 'mem fraction': '1' } }] },
    'launch.remedies[0].set.mem fraction',
    /not a flag/,
  );
});

test('launch backends come before listed ones, and clash with them by name or URL', () => {
  const config = validateConfig(
    { launch: { command: COMMAND, ports: 30000 }, backends: ['http://10.0.0.2:30000'] },
    'test',
  );
  assert.deepEqual(
    config.backends.map((b) => b.name),
    ['gpu0', '10.0.0.2:30000'],
  );
  assert.throws(
    () => validateConfig({ launch: { command: COMMAND, ports: 30000 }, backends: ['http://127.0.0.1:30000'] }, 't'),
    /duplicate url/,
  );
});

test('config/examples/launch.yaml loads: seven engines, one GPU each, the OOM remedy', () => {
  const { config } = loadConfig({ cwd: REPO, argv: ['--config', 'config/examples/launch.yaml'] });
  assert.equal(config.launch?.engines.length, 7);
  assert.deepEqual(
    config.launch?.engines.map((e) => e.env.CUDA_VISIBLE_DEVICES),
    ['0', '1', '2', '3', '4', '5', '6'],
  );
  assert.equal(config.backends[3].log, 'logs/sglang_gpu3.log');
  assert.equal(config.launch?.remedies[0].when, 'Not enough memory|CUDA out of memory');
});
