/**
 * An engine that, like SGLang with its scheduler and detokenizer, starts a child process of its own,
 * then runs `fleetgate sim` with the rest of its arguments. The child ignores SIGTERM, so only SIGKILL
 * to the whole process group (after launch.stop_grace) ends it. Prints `child pid N` to stdout (the log).
 */
import { spawn } from 'node:child_process';
import { run } from '../../src/cli/sim.js';

const child = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 60_000);"], {
  stdio: 'ignore',
});
child.unref();
process.stdout.write(`child pid ${child.pid}\n`);
process.exitCode = await run(process.argv.slice(2));
