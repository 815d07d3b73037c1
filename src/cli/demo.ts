/**
 * `fleetgate demo`: a simulated fleet of 7 SGLang-like servers, each its own `fleetgate sim` process
 * started and supervised by `fleetgate launch`'s code, and fleetgate in front of it. gpu3 dies of CUDA
 * OOM during graph capture; fleetgate restarts it with `--mem-fraction-static` lowered by the remedy,
 * and then it starts cleanly (the sim fails only above 0.85).
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGateway } from '../app.js';
import { validateConfig } from '../config/validate.js';
import { createLogger } from '../logging.js';
import { packagedQwen3Dir } from '../model/chat-model.js';
import { colorEnabled } from './render-status.js';
import { runUntilSignal } from './serve.js';
import { readFlags, verbArgs } from './verb-args.js';

const usage = `usage: fleetgate demo [--port 8080] [--base-port 30000] [--backends 7] [--host 127.0.0.1]

Launches one simulated SGLang server (a fleetgate sim process) per port base-port..base-port+N-1
through fleetgate launch, staggered, in thinking mode (Qwen3's chat template and tokenizer,
--reasoning-parser qwen3: answers stream reasoning_content, then content); gpu3 dies of CUDA OOM during graph capture and fleetgate restarts
it with a lower --mem-fraction-static (the remedy, shown on the status page); gpu5 generates 3x
slower, a straggler under load. Ctrl-C stops all.
`;

const FAILING_GPU = 'gpu3';
/** Generates 3x slower: a straggler for the serving view to mark under load. */
const SLOW_GPU = 'gpu5';
const RESTART_BACKOFF = '3s';

/** One word of the command template, quoted for the template splitter (never a shell). */
function quoted(word: string): string {
  return `"${word.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/** This very program's `sim` verb, from source (tsx) or from dist alike. */
function simCommand(host: string): string {
  const self = [process.execPath, ...process.execArgv, process.argv[1]].map(quoted).join(' ');
  return [
    self,
    'sim --port {port} --host',
    quoted(host),
    '--name {name} --log-stdout --exit-on-failure --speed demo --start-delay {i}s',
    // Thinking mode, as the real job runs: Qwen3's template and tokenizer (the tests' model directory).
    '--model-path',
    quoted(packagedQwen3Dir()),
    '--reasoning-parser qwen3',
    `--fail 0:cuda_oom_capture --fail-only-on ${FAILING_GPU}`,
    '--mem-fraction-static 0.88 --fail-if-mem-fraction-above 0.85',
    `--slow-on ${SLOW_GPU}:3`,
  ].join(' ');
}

export async function run(argv: string[]): Promise<number> {
  const values = verbArgs('demo', usage, () => {
    const flags = readFlags(argv, {
      port: { type: 'string', default: '8080' },
      'base-port': { type: 'string', default: '30000' },
      backends: { type: 'string', default: '7' },
      host: { type: 'string', default: '127.0.0.1' },
    }).values;
    return flags.help ? null : flags;
  });
  if (typeof values === 'number') return values;
  const count = Number(values.backends);
  const basePort = Number(values['base-port']);
  if (!Number.isInteger(count) || count < 1 || count > 64) {
    process.stderr.write(`fleetgate demo: --backends must be an integer from 1 to 64\n`);
    return 2;
  }
  if (!Number.isInteger(basePort) || basePort < 1 || basePort + count > 65535) {
    process.stderr.write(`fleetgate demo: --base-port must leave room for ${count} ports\n`);
    return 2;
  }

  const logDir = await mkdtemp(join(tmpdir(), 'fleetgate-demo-'));
  const ports = Array.from({ length: count }, (_, i) => basePort + i);

  const config = validateConfig(
    {
      listen: `${values.host}:${values.port}`,
      launch: {
        command: simCommand(values.host),
        host: values.host,
        ports: `${ports[0]}-${ports.at(-1)}`,
        log: join(logDir, 'sglang_gpu{i}.log'),
        restart_backoff: RESTART_BACKOFF,
        stop_grace: '5s',
        remedies: [
          {
            when: 'Not enough memory|CUDA out of memory',
            set: { '--mem-fraction-static': { step: -0.05, min: 0.7 } },
          },
        ],
      },
      health: { starting_interval: '500ms' },
      log: { level: 'info' },
    },
    'fleetgate demo',
  );
  const logger = createLogger(config.log, { pretty: true, color: colorEnabled(process.stdout) });
  const gateway = await createGateway(config, { logger, launch: true });
  let url: string;
  try {
    url = await gateway.listen();
  } catch (error) {
    process.stderr.write(
      `fleetgate demo: cannot listen on ${values.host}:${values.port}: ${(error as Error).message}\n`,
    );
    await gateway.close();
    return 1;
  }
  const base = url.replace('0.0.0.0', '127.0.0.1');
  process.stdout.write(`
fleetgate demo: ${count} simulated SGLang servers (one fleetgate sim process each, started by fleetgate launch)
  on ports ${ports[0]}-${ports.at(-1)}, logs in ${logDir}
  proxy        ${base}
  status page  ${base}/fleet
  metrics      ${base}/metrics
  CLI          fleetgate status --url ${base}    |    fleetgate wait --url ${base} --ready 6

Try (requests are held until a backend is ready, then streamed):
  curl -N ${base}/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model": "default", "stream": true, "max_tokens": 128, "messages": [{"role": "user", "content": "Hello"}]}'
  (the servers think first: reasoning_content deltas, then the answer in content)

Ctrl-C stops everything.
`);
  return runUntilSignal(gateway);
}
