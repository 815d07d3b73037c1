/**
 * A PostgreSQL cluster of the tests' own (Debian's `postgresql` package, installed by
 * scripts/ensure-test-deps.sh): `initdb` in a temporary directory, the server on a free loopback
 * port, one database per test, stopped and removed after. `initdb` and `postgres` refuse to run as
 * root, so they run as the `postgres` user.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePorts } from './net.js';

type After = { after(fn: () => unknown): void };

export interface PgCluster {
  readonly port: number;
  /** A new empty database; its URL. */
  createDatabase(): Promise<string>;
  stop(): void;
  start(): void;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  if (versions[0] === undefined) throw new Error(`no PostgreSQL under ${root}: run scripts/ensure-test-deps.sh`);
  return join(root, versions[0], 'bin');
}

function asPostgres(command: string, args: string[]): void {
  const asRoot = userInfo().uid === 0;
  execFileSync(asRoot ? 'runuser' : command, asRoot ? ['-u', 'postgres', '--', command, ...args] : args, {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

let databases = 0;

export async function startPostgres(t: After): Promise<PgCluster> {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-pg-'));
  if (userInfo().uid === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  asPostgres(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']);
  const [port] = (await freePorts(1)) as [number];
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  let running = false;
  const cluster: PgCluster = {
    port,
    start() {
      asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
      running = true;
    },
    stop() {
      if (!running) return;
      running = false;
      asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']);
    },
    async createDatabase() {
      const name = `fleetgate_test_${process.pid}_${++databases}`;
      const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
      await client.connect();
      await client.query(`CREATE DATABASE ${name}`);
      await client.end();
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
  };
  cluster.start();
  t.after(() => {
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return cluster;
}
