/**
 * A PostgreSQL cluster of the tests' own (Debian's `postgresql` package, installed by
 * scripts/ensure-test-deps.sh): `initdb` in a temporary directory, the server on a free loopback
 * port, one database per test, stopped and removed after. `initdb` and `postgres` refuse to run as
 * root, so they run as the `postgres` user.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePorts } from './net.js';

type After = { after(fn: () => unknown): void };

export interface PgCluster {
  readonly port: number;
  /** A new empty database; its URL. */
  createDatabase(): Promise<string>;
  /** Stops the server (fast: connections cut), the test's process free meanwhile. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  if (versions[0] === undefined) throw new Error(`no PostgreSQL under ${root}: run scripts/ensure-test-deps.sh`);
  return join(root, versions[0], 'bin');
}

const run = promisify(execFile);

async function asPostgres(command: string, args: string[]): Promise<void> {
  const asRoot = userInfo().uid === 0;
  await run(asRoot ? 'runuser' : command, asRoot ? ['-u', 'postgres', '--', command, ...args] : args);
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
  await asPostgres(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']);
  const [port] = (await freePorts(1)) as [number];
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  let running = false;
  const cluster: PgCluster = {
    port,
    async start() {
      await asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
      running = true;
    },
    async stop() {
      if (!running) return;
      running = false;
      await asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']);
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
  await cluster.start();
  t.after(async () => {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return cluster;
}
