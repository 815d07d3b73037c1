/**
 * `fleetgate drain NAME`, `fleetgate resume NAME` and `fleetgate restart NAME`: `POST /fleet/backends/NAME/drain|resume|restart` on a
 * running fleetgate. Exit 0 done, 1 refused or unreachable (the server's message is printed), 2 usage.
 */
import type { BackendStatus } from '../admin/fleet-summary.js';
import { DEFAULT_URL, resolveBaseUrl, UrlError } from './fleetgate-url.js';
import { readFlags, UsageError, verbArgs } from './verb-args.js';

export type AdminVerb = 'drain' | 'resume' | 'restart';

const DOES: Record<AdminVerb, string> = {
  drain:
    'stop sending new requests to backend NAME; its in-flight requests finish, or are ended after the drain deadline (--deadline, else health.drain_deadline) to resume or be re-sent on another backend',
  resume: 'undo drain: NAME gets traffic again once it passes the readiness checks',
  restart:
    'stop the engine NAME that fleetgate launch started (SIGTERM to its process group, SIGKILL after launch.stop_grace) and start it again now; drain it first to let its requests finish',
};

const PAST: Record<AdminVerb, string> = { drain: 'drained', resume: 'resumed', restart: 'restarting' };

const DEADLINE_OPTION = `  --deadline D   this drain's deadline, e.g. 10s; 0 = none (default: health.drain_deadline)
`;

const usage = (
  verb: AdminVerb,
) => `usage: fleetgate ${verb} NAME${verb === 'drain' ? ' [--deadline D]' : ''} [--url URL] [--token TOKEN]

${DOES[verb]}.

options:
${verb === 'drain' ? DEADLINE_OPTION : ''}  --url URL      fleetgate to ask (default: $FLEETGATE_URL, else ${DEFAULT_URL})
  --token TOKEN  admin token (default: $FLEETGATE_ADMIN_TOKEN); not needed on loopback when admin.token is unset
  -h, --help     this text

exit status: 0 done, 1 refused by fleetgate or unreachable, 2 usage error
`;

const REQUEST_TIMEOUT_MS = 10_000;

export async function run(verb: AdminVerb, argv: string[]): Promise<number> {
  const args = verbArgs(verb, usage(verb), () => {
    const flags = { url: { type: 'string' }, token: { type: 'string' } } as const;
    const { values, positionals } = readFlags(
      argv,
      verb === 'drain' ? { ...flags, deadline: { type: 'string' } } : flags,
      true,
    );
    if (values.help) return null;
    if (positionals.length !== 1) {
      throw new UsageError(
        positionals.length === 0 ? 'needs a backend NAME' : `takes one NAME, got ${positionals.length}`,
      );
    }
    return { ...values, name: positionals[0] };
  });
  if (typeof args === 'number') return args;
  const values = args;
  let base: URL;
  try {
    base = resolveBaseUrl(values.url);
  } catch (error) {
    if (!(error instanceof UrlError)) throw error;
    process.stderr.write(`fleetgate ${verb}: ${error.message}\n`);
    return 2;
  }
  const name = args.name;
  const token = values.token ?? (process.env.FLEETGATE_ADMIN_TOKEN || undefined);
  const url = new URL(`fleet/backends/${encodeURIComponent(name)}/${verb}`, base);
  const deadline = (values as { deadline?: string }).deadline;
  if (deadline !== undefined) url.searchParams.set('deadline', deadline);
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    process.stderr.write(
      `fleetgate ${verb}: cannot reach fleetgate at ${base.origin}: ${cause?.code ?? cause?.message ?? (error as Error).message}\n`,
    );
    return 1;
  }
  const text = await res.text();
  if (!res.ok) {
    process.stderr.write(`fleetgate ${verb}: ${res.status} ${serverMessage(text)}\n`);
    return 1;
  }
  const backend = JSON.parse(text) as BackendStatus & { drain_deadline?: string | null };
  const until = backend.drain_deadline ? `, drain deadline ${backend.drain_deadline}` : '';
  process.stdout.write(`${PAST[verb]} ${backend.name}: ${backend.state}, ${backend.inflight} in flight${until}\n`);
  return 0;
}

/** The `error.message` of an OpenAI-style body, else the text itself. */
function serverMessage(text: string): string {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof message === 'string') return message;
  } catch {}
  return text.trim() || '(empty answer)';
}
