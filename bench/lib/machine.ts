/** A description of the machine and tool versions, for reports. */
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';

function run(file: string, args: string[]): string {
  // nginx -v prints to stderr, haproxy -v to stdout.
  const out = spawnSync(file, args, { encoding: 'utf8' });
  return `${out.stdout ?? ''}${out.stderr ?? ''}`.trim();
}

export interface Machine {
  nproc: number;
  cpuModel: string;
  memoryGiB: number;
  kernel: string;
  node: string;
  nginx: string;
  haproxy: string;
  lscpu: string[];
  /** The code under test: git commit, whether src/ has uncommitted changes, when dist/ was built. */
  fleetgate: string;
}

function fleetgateVersion(repo: string): string {
  const commit = run('git', ['-C', repo, 'rev-parse', '--short', 'HEAD']);
  const dirty = run('git', ['-C', repo, 'status', '--porcelain', '--', 'src']) !== '';
  let built = 'not built';
  try {
    built = `dist built ${statSync(`${repo}/dist/cli/index.js`).mtime.toISOString()}`;
  } catch {
    // no dist/
  }
  return `commit ${commit}${dirty ? ' + uncommitted src/ changes' : ''}, ${built}`;
}

export function describeMachine(nginxBin: string, haproxyBin: string, repo: string): Machine {
  const lscpu = run('lscpu', []).split('\n').slice(0, 14);
  return {
    // --all: this process may already be pinned to one core.
    nproc: Number(run('nproc', ['--all'])) || cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: run('uname', ['-r']),
    node: process.version,
    nginx: run(nginxBin, ['-v']).replace(/^nginx version: /, ''),
    haproxy: run(haproxyBin, ['-v']).split('\n')[0] ?? '',
    lscpu,
    fleetgate: fleetgateVersion(repo),
  };
}

export function machineLine(m: Machine): string {
  return `${m.nproc} cores (${m.cpuModel}), ${m.memoryGiB} GiB, Linux ${m.kernel}, Node ${m.node}, nginx ${m.nginx}, ${m.haproxy}; fleetgate ${m.fleetgate}`;
}

/** `YYYY-MM-DD-HHMMSS` in UTC, for result file names. */
export function stamp(date = new Date()): string {
  return date
    .toISOString()
    .replace(/[:T]/g, '-')
    .replace(/\..*$/, '')
    .replace(/-(\d\d)-(\d\d)-(\d\d)$/, '-$1$2$3');
}
