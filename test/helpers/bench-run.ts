/** Runs a bench script as users do (`node --import tsx`), for the benches' smoke tests. */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { HEAVY } from './heavy.js';

const ROOT = new URL('../../', import.meta.url);

/**
 * A skip reason while fleetgate is not built (the benches run it from dist/), and in CI's second
 * pass: a bench's smoke proves its script, not the runtime (heavy.ts).
 */
export const skipUnlessBuilt = !existsSync(new URL('dist/cli/index.js', ROOT))
  ? 'dist/ is missing: run npm run build'
  : HEAVY.skip;

/** A temporary directory for results files, removed after the file's tests. */
export function benchOutDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs `script` with `args`; killed after 110 s. */
export function runBench(
  script: string,
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 110_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
