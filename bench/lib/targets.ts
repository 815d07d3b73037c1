/**
 * The things a client can talk to: the backends directly (the client spreads its requests
 * round-robin), fleetgate, NGINX or HAProxy, each proxy in its own process pinned to a core.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { request } from 'undici';
import { freePort, type Managed, spawnPinned, waitFor } from './procs.js';
import { fleetgateConfig, haproxyConfig, nginxConfig } from './proxy-configs.js';
import { REPO_ROOT } from './sim-control.js';

/**
 * `node-floor`: a bare node:http + undici proxy (node-floor-proxy.ts), the floor for any Node proxy.
 * `fastify-floor`: bare fastify + @fastify/http-proxy with a least-connections picker
 * (fastify-floor-proxy.ts), the floor of fleetgate's own stack.
 */
export type TargetKind = 'direct' | 'fleetgate' | 'nginx' | 'haproxy' | 'node-floor' | 'fastify-floor';
type FloorKind = 'node-floor' | 'fastify-floor';

export interface TargetSpec {
  /** Unique label in reports, e.g. `nginx least_conn`. */
  name: string;
  kind: TargetKind;
  /** fleetgate: a routing policy; nginx: least_conn | round-robin; haproxy: leastconn | roundrobin | hdr(X-Session-Id) (consistent hashing). */
  balance?: string;
  /** fleetgate only. */
  maxInflight?: number | 'auto';
  /** fleetgate only: `routing.load_interval`, e.g. `250ms`. */
  loadInterval?: string;
  /** fleetgate only: `routing.cap_slow_start`. */
  capSlowStart?: boolean;
  /** fleetgate only: extra `queue:` keys, YAML lines indented by two spaces (e.g. priority classes). */
  queueYaml?: string;
  /** fleetgate only: `models` aliases (turns on routing by each request's `model`). */
  modelAliases?: Record<string, string>;
  /** fleetgate only: write the access log (info level) to the target's log file, for traces. */
  accessLog?: boolean;
  /** fleetgate only: `retry.resume_limit` (0 = stream resume off). */
  resumeLimit?: number;
  /** fleetgate only: `upstream.warm_up` (default off: the bench's own warm-up treats every proxy alike). */
  warmUp?: boolean;
  /** fleetgate only: `routing.prefix.balance_factor` (default: fleetgate's own). */
  balanceFactor?: number;
  /** fleetgate only: `routing.replicas` (default: fleetgate's own). */
  routingReplicas?: number;
  /** `routing.kv_events.tokenize_wait` (fleetgate's default when unset). */
  kvTokenizeWait?: string;
  /** fleetgate only: top-level YAML sections added to its config (e.g. `tracing:`), keys the build knows. */
  extraYaml?: string;
  /** fleetgate only: the build's CLI to run (another commit's `dist/cli/index.js`); default FLEETGATE_CLI. */
  cli?: string;
}

export interface RunningTarget {
  readonly spec: TargetSpec;
  /** Where the client sends requests: the backends for `direct`, else the proxy's one URL. */
  readonly urls: string[];
  /** The proxy process (null for direct). */
  readonly proc: Managed | null;
  stop(): Promise<void>;
}

export const NGINX = process.env.NGINX_BIN ?? '/usr/sbin/nginx';
export const HAPROXY = process.env.HAPROXY_BIN ?? '/usr/sbin/haproxy';
/** `FLEETGATE_CLI`: another build to run, e.g. to compare two commits. */
export const FLEETGATE_CLI = process.env.FLEETGATE_CLI ?? join(REPO_ROOT, 'dist/cli/index.js');
const FLOOR_SCRIPTS: Record<FloorKind, { path: string; modules: string[] }> = {
  'node-floor': { path: join(REPO_ROOT, 'bench/lib/node-floor-proxy.ts'), modules: ['undici'] },
  'fastify-floor': {
    path: join(REPO_ROOT, 'bench/lib/fastify-floor-proxy.ts'),
    modules: ['undici', 'fastify', '@fastify/http-proxy'],
  },
};

export interface StartOptions {
  backends: string[];
  /** Core for the proxy process. */
  cpu: number | null;
  /** A fresh directory for this target's config, pid and logs. */
  dir: string;
  /** fleetgate: wait until this many backends are ready (default all). */
  readyBackends?: number;
  /** Extra node flags for fleetgate, e.g. `--cpu-prof`. */
  nodeArgs?: string[];
}

/** Checks the binaries exist; returns a message per missing one. */
export function missingBinaries(kinds: Iterable<TargetKind>): string[] {
  const missing: string[] = [];
  const set = new Set(kinds);
  if (set.has('nginx') && !existsSync(NGINX)) missing.push(`nginx not found at ${NGINX} (set NGINX_BIN)`);
  if (set.has('haproxy') && !existsSync(HAPROXY)) missing.push(`haproxy not found at ${HAPROXY} (set HAPROXY_BIN)`);
  if (set.has('fleetgate') && !existsSync(FLEETGATE_CLI)) missing.push(`${FLEETGATE_CLI} missing: run npm run build`);
  return missing;
}

/** A floor proxy's script as plain JS, its packages imported by absolute URL so it runs from a temp dir. */
async function transpileFloor(kind: FloorKind): Promise<string> {
  const ts = (await import('typescript')).default;
  const { path, modules } = FLOOR_SCRIPTS[kind];
  let { outputText } = ts.transpileModule(readFileSync(path, 'utf8'), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  });
  const require = createRequire(import.meta.url);
  for (const name of modules) {
    outputText = outputText.replace(`from '${name}'`, `from '${pathToFileURL(require.resolve(name)).href}'`);
  }
  return outputText;
}

async function httpStatus(url: string): Promise<number> {
  const res = await request(url, { headersTimeout: 2000, bodyTimeout: 2000 });
  await res.body.dump();
  return res.statusCode;
}

function watchExit(proc: Managed): () => void {
  let exited = false;
  void proc.exited.then(() => {
    exited = true;
  });
  return () => {
    if (exited) throw new Error(`${proc.name} exited early (see its log)`);
  };
}

/**
 * `count` processes of one target over the same backends (replicas behind one Service), each in its
 * own `proxy-<r>` folder of `opts.dir`; if one fails to start, those already started are stopped.
 */
export async function startReplicas(spec: TargetSpec, count: number, opts: StartOptions): Promise<RunningTarget[]> {
  const targets: RunningTarget[] = [];
  try {
    for (let r = 0; r < count; r++)
      targets.push(await startTarget(spec, { ...opts, dir: join(opts.dir, `proxy-${r}`) }));
    return targets;
  } catch (err) {
    await Promise.all(targets.map((target) => target.stop()));
    throw err;
  }
}

export async function startTarget(spec: TargetSpec, opts: StartOptions): Promise<RunningTarget> {
  if (spec.kind === 'direct') {
    return { spec, urls: opts.backends, proc: null, stop: async () => {} };
  }
  mkdirSync(opts.dir, { recursive: true });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = join(opts.dir, `${spec.kind}.log`);
  let proc: Managed;
  if (spec.kind === 'nginx') {
    mkdirSync(join(opts.dir, 'temp'), { recursive: true });
    const conf = join(opts.dir, 'nginx.conf');
    const balance = spec.balance === 'round-robin' ? 'round-robin' : 'least_conn';
    writeFileSync(conf, nginxConfig({ port, backends: opts.backends, prefix: opts.dir, balance }));
    proc = spawnPinned(
      'nginx',
      NGINX,
      ['-p', opts.dir, '-e', join(opts.dir, 'error.log'), '-c', conf, '-g', 'daemon off;'],
      { cpu: opts.cpu, logFile: log },
    );
  } else if (spec.kind === 'haproxy') {
    const conf = join(opts.dir, 'haproxy.cfg');
    const balance = spec.balance === 'roundrobin' || spec.balance === 'hdr(X-Session-Id)' ? spec.balance : 'leastconn';
    writeFileSync(conf, haproxyConfig({ port, backends: opts.backends, balance }));
    proc = spawnPinned('haproxy', HAPROXY, ['-db', '-f', conf], { cpu: opts.cpu, logFile: log });
  } else if (spec.kind === 'node-floor' || spec.kind === 'fastify-floor') {
    // Plain node like fleetgate from dist/, not under tsx (whose loader adds ~30 MB of RSS).
    const script = join(opts.dir, `${spec.kind}-proxy.mjs`);
    writeFileSync(script, await transpileFloor(spec.kind));
    proc = spawnPinned(spec.kind, process.execPath, [script, String(port), ...opts.backends], {
      cpu: opts.cpu,
      logFile: log,
      cwd: REPO_ROOT,
    });
  } else {
    const conf = join(opts.dir, 'fleetgate.yaml');
    writeFileSync(
      conf,
      fleetgateConfig({
        port,
        backends: opts.backends,
        policy: spec.balance,
        maxInflight: spec.maxInflight,
        loadInterval: spec.loadInterval,
        capSlowStart: spec.capSlowStart,
        queueYaml: spec.queueYaml,
        modelAliases: spec.modelAliases,
        accessLog: spec.accessLog,
        resumeLimit: spec.resumeLimit,
        warmUp: spec.warmUp,
        balanceFactor: spec.balanceFactor,
        routingReplicas: spec.routingReplicas,
        kvTokenizeWait: spec.kvTokenizeWait,
      }) + (spec.extraYaml ?? ''),
    );
    proc = spawnPinned(
      'fleetgate',
      process.execPath,
      [...(opts.nodeArgs ?? []), spec.cli ?? FLEETGATE_CLI, 'serve', '--config', conf],
      { cpu: opts.cpu, logFile: log, cwd: opts.dir },
    );
  }
  const alive = watchExit(proc);
  try {
    if (spec.kind === 'fleetgate') {
      const want = opts.readyBackends ?? opts.backends.length;
      await waitFor(
        async () => {
          alive();
          const res = await request(`${url}/fleet/status`, { headersTimeout: 2000 });
          const body = (await res.body.json()) as { ready?: number };
          // And /readyz: its start-up warm-up (upstream.warm_up) done, as a load balancer would wait.
          return (body.ready ?? 0) >= want && (await httpStatus(`${url}/readyz`)) === 200;
        },
        `fleetgate with ${want} ready backends`,
        30_000,
      );
    } else {
      // Through the proxy to a backend's /health.
      await waitFor(
        async () => {
          alive();
          return (await httpStatus(`${url}/health`)) === 200;
        },
        `${spec.kind} up`,
        15_000,
      );
    }
  } catch (error) {
    await proc.stop(1000);
    throw error;
  }
  return { spec, urls: [url], proc, stop: () => proc.stop(5000) };
}
