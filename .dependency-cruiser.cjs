/**
 * fleetgate's layer rules (src/README.md explains them). Lowest first; a folder imports only the
 * folders listed for it, and none imports a folder above it:
 *
 *   sim                       the simulated engines: imports no other folder
 *   config                    the configuration's types, defaults and validation
 *   http                      the HTTP server, OpenAI-style error answers, bearer keys, server-level refusals
 *   batch                     `fleetgate batch` and the Batch API's engine: input, ledger, runner, jobs (an HTTP client of fleetgate)
 *   fleet                     backends, their state and the I/O that observes them
 *   launch                    the engines `fleetgate launch` starts and supervises
 *   routing                   load, caps, wait queues, policies
 *   proxy                     the traffic path
 *   metrics                   Prometheus series and the serving view
 *   admin                     fleetgate's own endpoints and the admin API
 *   app.ts                    the composition root: builds, starts and stops all of the above
 *   cli, logging.ts           the command line
 */
const layers = {
  sim: [],
  config: [],
  http: ['config'],
  batch: ['config', 'http'],
  fleet: ['config'],
  launch: ['config', 'fleet'],
  routing: ['config', 'fleet'],
  proxy: ['config', 'http', 'fleet', 'routing'],
  metrics: ['config', 'fleet', 'routing', 'proxy', 'batch'],
  admin: ['config', 'http', 'batch', 'fleet', 'launch', 'routing', 'proxy', 'metrics'],
};

const layerRules = Object.entries(layers).map(([folder, allowed]) => ({
  name: `layer-${folder}`,
  comment: `src/${folder}/ may import only ${allowed.length ? allowed.map((a) => `src/${a}/`).join(', ') : 'its own files'}`,
  severity: 'error',
  from: { path: `^src/${folder}/` },
  to: {
    path: '^src/',
    pathNot: [`^src/${folder}/`, ...allowed.map((a) => `^src/${a}/`)],
  },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment: 'An import cycle: layers would depend on each other both ways.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'app-only-from-cli',
      comment: 'src/app.ts is the composition root: only the command line starts it.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/cli/', '^src/app\\.ts$'] },
      to: { path: '^src/app\\.ts$' },
    },
    {
      name: 'cli-on-top',
      comment: 'Nothing below the command line imports it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
