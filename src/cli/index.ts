#!/usr/bin/env node
/** `fleetgate <verb> ...`: each verb lives in its own module and returns the process exit code. */
import { readFileSync } from 'node:fs';

const verbs: Record<string, () => Promise<{ run(argv: string[]): Promise<number> }>> = {
  serve: () => import('./serve.js'),
  launch: () => import('./launch.js'),
  demo: () => import('./demo.js'),
  sim: () => import('./sim.js'),
  batch: () => import('./batch.js'),
  status: () => import('./status.js'),
  wait: () => import('./wait.js'),
  drain: () => import('./admin-verbs.js').then((m) => ({ run: (argv: string[]) => m.run('drain', argv) })),
  resume: () => import('./admin-verbs.js').then((m) => ({ run: (argv: string[]) => m.run('resume', argv) })),
  restart: () => import('./admin-verbs.js').then((m) => ({ run: (argv: string[]) => m.run('restart', argv) })),
};

const usage = `usage: fleetgate <command> [options]

commands:
  serve   [--config FILE] [--listen HOST:PORT] [--backend URL ...]   run the proxy
  launch  [--config FILE] [serve options]                            start and supervise the engines of launch:, then serve
  status  [--url URL] [--json]                                       print the fleet
  wait    [--url URL] [--ready N|all] [--timeout DUR] [--fail-fast]  block until backends are ready
  drain   NAME [--url URL] [--token T]                               stop sending new requests to a backend
  resume  NAME [--url URL] [--token T]                               undo drain
  restart NAME [--url URL] [--token T]                               restart an engine fleetgate launch started
  batch   INPUT.jsonl -o OUTPUT.jsonl [--url URL | --serve|--launch] run an OpenAI Batch input file through fleetgate, resumably
  demo                                                               simulated fleet of 7 + proxy
  sim     --ports 30000-30006 [...]                                  simulated SGLang servers

fleetgate <command> --help prints the command's options; fleetgate --version prints the version.
`;

/** Read at run time: ../../package.json is the package root from both src/cli/ and dist/cli/. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function main(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === '--help' || verb === '-h' || verb === 'help') {
    process.stdout.write(usage);
    return verb === undefined ? 2 : 0;
  }
  if (verb === '--version' || verb === '-v') {
    process.stdout.write(`fleetgate ${packageVersion()}\n`);
    return 0;
  }
  const load = verbs[verb];
  if (!load) {
    process.stderr.write(`fleetgate: unknown command '${verb}'\n\n${usage}`);
    return 2;
  }
  return (await load()).run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`fleetgate: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
