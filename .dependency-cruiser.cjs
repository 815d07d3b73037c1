/**
 * fleetgate's layer rules (src/README.md explains them). Lowest first; a folder imports only the
 * folders listed for it, and none imports a folder above it:
 *
 *   model                     a model's tokenizer and chat template (Hugging Face layout): imports no other folder
 *   sim                       the simulated engines: imports only model
 *   config                    the configuration's types, defaults and validation
 *   tracing                   the OpenTelemetry tracer: SDK, sampler, OTLP exporter, W3C propagation
 *   http                      the HTTP server, OpenAI-style error answers, bearer keys, server-level refusals
 *   batch                     `fleetgate batch` and the Batch API's engine: input, ledger, runner, jobs (an HTTP client of fleetgate)
 *   fleet                     backends, their state and the I/O that observes them
 *   launch                    the engines `fleetgate launch` starts and supervises
 *   routing                   load, caps, wait queues, policies, dispatch (subfolders: routingParts below)
 *   proxy                     the traffic path
 *   metrics                   Prometheus series and the serving view
 *   admin                     fleetgate's own endpoints and the admin API
 *   warm-up                   the start-up warm-up: a private copy of the traffic path before an in-process engine
 *   app.ts                    the composition root: builds, starts and stops all of the above
 *   cli, logging.ts           the command line
 */
const layers = {
  model: [],
  sim: ['model'],
  config: [],
  tracing: ['config'],
  http: ['config'],
  batch: ['config', 'http', 'tracing'],
  fleet: ['config'],
  launch: ['config', 'fleet'],
  routing: ['config', 'fleet'],
  proxy: ['config', 'http', 'fleet', 'routing', 'tracing', 'model'],
  metrics: ['config', 'fleet', 'routing', 'proxy', 'batch'],
  admin: ['config', 'http', 'tracing', 'batch', 'fleet', 'launch', 'routing', 'proxy', 'metrics', 'model'],
  'warm-up': ['config'],
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

/**
 * Inside routing/, four jobs in four folders, each importing only those below it (and the request's
 * own description at routing/ top: request-traits.ts, request-context.ts; and text-hash.ts, the hashes
 * both the request's traits and the policies compute). fleet-routing.ts, at
 * the top, builds them all and nothing in them imports it.
 *
 *   policies   pick a backend among candidates: read the request's traits, nothing of the queue
 *   load       what a backend's load and cap are, seen as a policy's candidate
 *   queue      admission: leases, waiters, priority classes, the drain on the registry's events
 *   dispatch   the fleet as an undici Dispatcher: attempts, pools, the refusal and failure tables
 */
const routingParts = {
  policies: ['request-traits.ts', 'text-hash.ts'],
  load: ['policies/'],
  queue: ['load/', 'policies/', 'request-traits.ts'],
  dispatch: ['queue/', 'request-context.ts'],
};

const routingRules = Object.entries(routingParts).map(([part, allowed]) => ({
  name: `routing-${part}`,
  comment: `src/routing/${part}/ may import from routing/ only ${allowed.map((a) => `routing/${a}`).join(', ')}`,
  severity: 'error',
  from: { path: `^src/routing/${part}/` },
  to: {
    path: '^src/routing/',
    pathNot: [`^src/routing/${part}/`, ...allowed.map((a) => `^src/routing/${a.replace('.', '\\.')}`)],
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
    {
      name: 'fleet-logs-pure',
      comment:
        'src/fleet/logs/ reads logs and says what they mean; only the follower (log-follower.ts) hands that to the registry.',
      severity: 'error',
      from: { path: '^src/fleet/logs/', pathNot: '^src/fleet/logs/log-follower\\.ts$' },
      to: { path: '^src/', pathNot: ['^src/fleet/logs/', '^src/config/'] },
    },
    ...layerRules,
    ...routingRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
