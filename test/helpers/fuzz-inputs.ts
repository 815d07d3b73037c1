/**
 * fast-check arbitraries for fleetgate's HTTP surface (request bodies with every OpenAI field valid or of
 * a wrong type, paths, methods, headers) and the judge every fuzzed answer must pass: a clear
 * OpenAI-shaped error from fleetgate itself, a backend's own answer relayed, never a fleetgate 5xx.
 */
import fc from 'fast-check';

export const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

/** Any JSON value, a few levels deep, with odd strings (control characters, lone surrogates). */
const anyJson = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(-1, 0, 1e308, -0, 2 ** 53 + 1, 3.5, '', 'null', true, false, null),
);

/** An OpenAI field: usually a plausible value, else anything (a wrong type). */
function field<T>(valid: fc.Arbitrary<T>) {
  return fc.oneof({ weight: 3, arbitrary: valid }, { weight: 2, arbitrary: anyJson });
}

const message = fc.record(
  {
    role: field(fc.constantFrom('user', 'system', 'assistant', 'tool', 'developer')),
    content: field(
      fc.oneof(
        fc.string({ maxLength: 60 }),
        fc.array(fc.record({ type: fc.constant('text'), text: fc.string({ maxLength: 20 }) }), { maxLength: 2 }),
      ),
    ),
    name: field(fc.string({ maxLength: 10 })),
  },
  { requiredKeys: [] },
);

const common = {
  model: field(fc.constantFrom(MODEL, 'default', 'no-such-model', '', MODEL.toUpperCase())),
  max_tokens: field(fc.integer({ min: -2, max: 6 })),
  max_completion_tokens: field(fc.integer({ min: 0, max: 6 })),
  stream: field(fc.boolean()),
  stream_options: field(fc.record({ include_usage: field(fc.boolean()) }, { requiredKeys: [] })),
  temperature: field(fc.double({ min: -1, max: 3, noNaN: true })),
  top_p: field(fc.double({ min: 0, max: 1, noNaN: true })),
  n: field(fc.integer({ min: 0, max: 3 })),
  stop: field(fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.string({ maxLength: 5 }), { maxLength: 4 }))),
  seed: field(fc.integer()),
  user: field(fc.string({ maxLength: 10 })),
  priority: field(fc.integer({ min: -5, max: 5 })),
  logprobs: field(fc.boolean()),
  presence_penalty: field(fc.double({ min: -2, max: 2, noNaN: true })),
  frequency_penalty: field(fc.double({ min: -2, max: 2, noNaN: true })),
  response_format: field(fc.record({ type: fc.constantFrom('text', 'json_object', 'json_schema') })),
  ignore_eos: field(fc.boolean()),
};

export const chatBody = fc.record(
  {
    ...common,
    messages: field(fc.array(message, { maxLength: 4 })),
    tools: field(fc.array(fc.record({ type: fc.constant('function') }), { maxLength: 2 })),
    tool_choice: field(fc.constantFrom('auto', 'none', 'required')),
  },
  { requiredKeys: [] },
);

export const completionBody = fc.record(
  {
    ...common,
    prompt: field(fc.oneof(fc.string({ maxLength: 60 }), fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }))),
    echo: field(fc.boolean()),
    suffix: field(fc.string({ maxLength: 5 })),
    best_of: field(fc.integer({ min: 0, max: 3 })),
  },
  { requiredKeys: [] },
);

export const generateBody = fc.record(
  {
    text: field(fc.string({ maxLength: 60 })),
    input_ids: field(fc.array(fc.integer({ min: 0, max: 5000 }), { maxLength: 8 })),
    sampling_params: field(
      fc.record(
        { max_new_tokens: field(fc.integer({ min: 0, max: 6 })), temperature: field(fc.double({ noNaN: true })) },
        { requiredKeys: [] },
      ),
    ),
    stream: field(fc.boolean()),
    rid: field(fc.string({ maxLength: 8 })),
  },
  { requiredKeys: [] },
);

export const PUBLIC_PATHS = [
  '/v1/chat/completions',
  '/v1/completions',
  '/generate',
  '/v1/models',
  '/v1/models/x',
  '/model_info',
  '/server_info',
  '/get_model_info',
  '/v1/embeddings',
  '/livez',
  '/readyz',
  '/health',
  '/metrics',
  '/fleet',
  '/fleet/status',
  '/',
] as const;

/** A body sent as bytes: JSON of a generated object, or something that is not JSON at all. */
export const rawBody = fc.oneof(
  { weight: 4, arbitrary: fc.oneof(chatBody, completionBody, generateBody).map((b) => Buffer.from(JSON.stringify(b))) },
  { weight: 1, arbitrary: fc.string({ maxLength: 80 }).map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 80 }).map((a) => Buffer.from(a)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(chatBody, fc.nat(40))
      .map(([b, cut]) => Buffer.from(JSON.stringify(b).slice(0, Math.max(1, cut)))),
  },
  {
    weight: 1,
    // Invalid UTF-8 inside a JSON string: a lone continuation byte, an overlong form, a cut sequence.
    arbitrary: fc
      .constantFrom([0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xff, 0xfe], [0xed, 0xa0, 0x80])
      .map((bad) =>
        Buffer.concat([
          Buffer.from(`{"model":"${MODEL}","messages":[{"role":"user","content":"a`),
          Buffer.from(bad),
          Buffer.from('"}],"max_tokens":2}'),
        ]),
      ),
  },
);

const headerValue = fc.string({ unit: 'grapheme-ascii', maxLength: 30 }).filter((v) => !/[\r\n\0]/.test(v));

/**
 * Extra request headers, from the ones fleetgate reads to arbitrary names. `Expect`, `Connection` and
 * the like are refused by the HTTP client itself; the raw-socket cases send those.
 */
export const extraHeaders = fc.dictionary(
  fc.oneof(
    fc.constantFrom(
      'content-type',
      'authorization',
      'x-fleetgate-priority',
      'x-session-id',
      'x-forwarded-for',
      'accept',
      'transfer-encoding-x',
      'x-fleetgate-resume',
    ),
    fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/),
  ),
  fc.oneof(
    headerValue,
    fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'Bearer x', 'close'),
  ),
  { maxKeys: 4 },
);

export const method = fc.constantFrom('GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS');

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** The simulated engine answers as uvicorn; fleetgate's own answers carry no such header. */
export function fromBackend(answer: Answer): boolean {
  return answer.headers.server === 'uvicorn';
}

/**
 * Why an answer breaks the contract, or null: fleetgate never answers 5xx itself here (the backends
 * are healthy), and each of its own errors is `{"error": {"message", "type", "code"}}` with a
 * message. A backend's answer is relayed as it is, whatever its shape.
 */
export function contractBreach(answer: Answer, method: string): string | null {
  if (fromBackend(answer)) return null;
  if (answer.status >= 500) return `fleetgate answered ${answer.status}: ${answer.body.slice(0, 200)}`;
  if (answer.status < 400 || method === 'HEAD') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.body);
  } catch {
    return `fleetgate's ${answer.status} is not JSON: ${answer.body.slice(0, 200)}`;
  }
  const error = (parsed as { error?: { message?: unknown; type?: unknown; code?: unknown } }).error;
  if (typeof error?.message !== 'string' || error.message === '') return `no error.message: ${answer.body}`;
  if (typeof error.type !== 'string') return `no error.type: ${answer.body}`;
  if (error.code !== answer.status) return `error.code ${String(error.code)} is not the status ${answer.status}`;
  return null;
}

/** `fc.assert`, but the failing case's own error is the message (node:test shows no `cause`). */
export async function assertProperty<T>(property: fc.IAsyncProperty<T>, params: fc.Parameters<T>): Promise<void> {
  const out = await fc.check(property, params);
  if (!out.failed) return;
  const error = out.errorInstance as Error | undefined;
  throw new Error(
    `property failed after ${out.numRuns} runs (seed ${out.seed}, path ${out.counterexamplePath}): ${error?.message ?? out}`,
  );
}
