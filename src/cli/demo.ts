/**
 * `fleetgate demo`: a simulated fleet of 7 SGLang-like servers with staggered starts (gpu3 dies of
 * CUDA OOM during graph capture and is relaunched a little later; gpu5 generates 3x slower, a
 * straggler for the serving view to mark under load) and fleetgate in front of it.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { validateConfig } from '../config/validate.js';
import { createLogger } from '../logging.js';
import { createGateway } from '../proxy/gateway.js';
import { fleetOptions, SimFleet } from '../sim/index.js';
import { colorEnabled } from './render-status.js';
import { runUntilSignal } from './serve.js';

const usage = `usage: fleetgate demo [--port 8080] [--base-port 30000] [--backends 7] [--host 127.0.0.1]

Starts simulated SGLang servers on base-port..base-port+N-1 (staggered starts; gpu3 dies of CUDA OOM
during graph capture and is relaunched ~10 s later; gpu5 generates 3x slower, a straggler under
load) and fleetgate in front of them. Ctrl-C stops all.
`;

const FAILING_GPU = 3;
const STAGGER_MS = 2_500;
const RESTART_AFTER_MS = 10_000;
const SLOW_GPU = 5;
const SLOWDOWN = 3;

export async function run(argv: string[]): Promise<number> {
  let values: { port: string; 'base-port': string; backends: string; host: string; help?: boolean };
  try {
    values = parseArgs({
      args: argv,
      options: {
        port: { type: 'string', default: '8080' },
        'base-port': { type: 'string', default: '30000' },
        backends: { type: 'string', default: '7' },
        host: { type: 'string', default: '127.0.0.1' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values as typeof values;
  } catch (error) {
    process.stderr.write(`fleetgate demo: ${(error as Error).message}\n\n${usage}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
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
  const failures = new Map(count > FAILING_GPU ? [[FAILING_GPU, { mode: 'cuda_oom_capture' as const }]] : []);
  const options = fleetOptions({
    ports,
    host: values.host,
    speed: 'demo',
    logDir,
    staggerMs: STAGGER_MS,
    failures,
    restartAfterMs: RESTART_AFTER_MS,
  });
  if (count > SLOW_GPU) options[SLOW_GPU].engine = { ...options[SLOW_GPU].engine, slowdown: SLOWDOWN };
  const fleet = new SimFleet(options);

  const config = validateConfig(
    {
      listen: `${values.host}:${values.port}`,
      fleet: { host: values.host, ports: `${ports[0]}-${ports.at(-1)}`, log: join(logDir, 'sglang_gpu{i}.log') },
      health: { starting_interval: '500ms' },
      log: { level: 'info' },
    },
    'fleetgate demo',
  );
  const logger = createLogger(config.log, { pretty: true, color: colorEnabled(process.stdout) });
  const gateway = await createGateway(config, { logger });
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
  fleet.start();

  const base = url.replace('0.0.0.0', '127.0.0.1');
  process.stdout.write(`
fleetgate demo: ${count} simulated SGLang servers on ports ${ports[0]}-${ports.at(-1)}, logs in ${logDir}
  proxy        ${base}
  status page  ${base}/fleet
  metrics      ${base}/metrics
  CLI          fleetgate status --url ${base}    |    fleetgate wait --url ${base} --ready 6

Try (requests are held until a backend is ready, then streamed):
  curl -N ${base}/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model": "default", "stream": true, "max_tokens": 32, "messages": [{"role": "user", "content": "Hello"}]}'

Ctrl-C stops everything.
`);
  return runUntilSignal(gateway, () => fleet.stop());
}
