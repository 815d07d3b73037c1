/** `fleetgate status [--url URL] [--json]`: one look at the fleet. Exit 0 fetched, 1 unreachable, 2 usage. */
import type { FleetStatus } from '../admin/fleet-summary.js';
import { fetchFleetStatus, UnreachableError } from '../http/fleet-status-client.js';
import { DEFAULT_URL, resolveBaseUrl, UrlError } from './fleetgate-url.js';
import { colorEnabled, renderTable } from './render-status.js';
import { readFlags, verbArgs } from './verb-args.js';

export const USAGE = `usage: fleetgate status [--url URL] [--json]

Prints one row per backend: NAME STATE PHASE/PROGRESS INFLIGHT REASON; then the serving view: the
fleet's requests/s, tokens/s, waiting requests, retries and errors over the last minute, and per
serving backend its rates, reported running/queued requests, KV-cache use and a straggler mark;
then a summary line.

options:
  --url URL   fleetgate to ask (default: $FLEETGATE_URL, else ${DEFAULT_URL})
  --json      print the raw GET /fleet/status JSON
  -h, --help  this text

exit status: 0 printed, 1 fleetgate unreachable, 2 usage error
`;

const REQUEST_TIMEOUT_MS = 5000;

export async function run(argv: string[]): Promise<number> {
  const values = verbArgs('status', USAGE, () => {
    const flags = readFlags(argv, { url: { type: 'string' }, json: { type: 'boolean' } }).values;
    return flags.help ? null : flags;
  });
  if (typeof values === 'number') return values;
  try {
    const base = resolveBaseUrl(values.url);
    const status = await fetchFleetStatus<FleetStatus>(base, REQUEST_TIMEOUT_MS);
    if (values.json) {
      process.stdout.write(`${JSON.stringify(status, null, 2)}\n`);
      return 0;
    }
    const tty = process.stdout.isTTY === true;
    process.stdout.write(
      renderTable(status, { color: colorEnabled(process.stdout), width: tty ? process.stdout.columns : undefined }),
    );
    return 0;
  } catch (error) {
    if (error instanceof UrlError) {
      process.stderr.write(`fleetgate status: ${error.message}\n`);
      return 2;
    }
    if (error instanceof UnreachableError) {
      process.stderr.write(
        `fleetgate status: ${error.message}\n  is fleetgate running? point --url or FLEETGATE_URL at it\n`,
      );
      return 1;
    }
    throw error;
  }
}
