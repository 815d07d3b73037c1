/**
 * Fills a proxied request's context, once, from its headers and buffered body: its priority class
 * and API key, the prompt traits of a policy that routes on them, the queue of the model it names,
 * and whether it asks for a stream (for the progress watchdog). The one place that reads a request
 * for admission; a request that cannot be admitted gets the refusal to answer instead.
 * The body is parsed as JSON here, at most once per request and only when something asks for it
 * (routing by model, prefix-aware routing, `backend_priority`, a stream's resume): `json` hands the
 * one result on, so a fleet that needs none of them never parses a body.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { BATCH_HEADER } from '../http/batch-header.js';
import type { ErrorType } from '../http/openai-error.js';
import { topLevelField } from '../http/top-level-fields.js';
import { RequestContext } from '../routing/request-context.js';
import type { PromptTraits, RequestTraits } from '../routing/request-traits.js';
import type { PendingTraits } from './kv-prompt-traits.js';
import type { Admission } from './model-admission.js';
import type { RequestOutcome } from './proxy-events.js';
import type { TraitsReader } from './request-traits-from.js';

export interface ContextRefusal {
  status: 400 | 404;
  type: ErrorType;
  message: string;
  /** What the access record says; null: no record (a malformed request, as for a 400 from a guard). */
  outcome: RequestOutcome | null;
}

export interface ContextReaderOptions {
  traitsOf: TraitsReader;
  /** The queue a request waits in (its model's), or why it is refused. */
  admission: Admission;
  /**
   * The prompt traits the policy routes on, from the parsed body; set only for a policy that uses
   * them. A promise when they wait for the tokenizer (kv-aware): the request is routed once it settles.
   */
  promptTraits?: (path: string, headers: IncomingHttpHeaders, json: unknown) => PendingTraits;
  /** The progress watchdog is on: it judges streams apart, so the body's `"stream"` is read. */
  watchStreams: () => boolean;
}

/** The body's JSON value, parsed on the first call; undefined without a body or when it is not JSON. */
export type BodyJson = () => unknown;

/** A request admitted to its queue: its context, and its body's JSON for whoever else reads it. */
export interface ReadRequest {
  context: RequestContext;
  json: BodyJson;
  /** Settles when the context's traits are whole (prompt traits waiting for the tokenizer); null: they are. */
  ready: Promise<void> | null;
}

export type ContextReader = (
  path: string,
  headers: IncomingHttpHeaders,
  body: Buffer | null,
) => ReadRequest | ContextRefusal;

export function createContextReader(opts: ContextReaderOptions): ContextReader {
  return (path, headers, body) => {
    const { traits, problem } = opts.traitsOf(headers);
    if (problem !== null) {
      return { status: 400, type: 'invalid_request_error', message: problem, outcome: null };
    }
    const json = jsonOnce(body);
    const queue = opts.admission(json);
    if (!('acquire' in queue)) return { ...queue, outcome: 'model_refused' };
    const context = new RequestContext();
    const prompt = opts.promptTraits?.(path, headers, json());
    let ready: Promise<void> | null = null;
    if (prompt instanceof Promise) {
      context.traits = traits;
      ready = prompt.then((later) => {
        context.traits = withPrompt(traits, later);
      });
    } else context.traits = withPrompt(traits, prompt);
    context.queue = queue;
    // A batch's stream is no client's: the watchdog judges it as the answer it was before it streamed.
    context.streamed = opts.watchStreams() && headers[BATCH_HEADER] === undefined && asksForStream(body);
    return { context, json, ready };
  };
}

function withPrompt(traits: RequestTraits, prompt: PromptTraits | undefined): RequestTraits {
  return prompt === undefined ? traits : { ...traits, ...prompt };
}

/** `body`'s JSON value, parsed on the first call only. */
export function jsonOnce(body: Buffer | null): BodyJson {
  let parsed = false;
  let value: unknown;
  return () => {
    if (!parsed) {
      parsed = true;
      value = parseJson(body);
    }
    return value;
  };
}

function parseJson(body: Buffer | null): unknown {
  if (body === null || body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    // Not JSON: the backend answers it; routing has nothing to read.
    return undefined;
  }
}

/** Whether a JSON body asks for `"stream": true`, without parsing it (the body may be megabytes). */
export function asksForStream(body: Buffer | null): boolean {
  return body !== null && topLevelField(body, 'stream') === true;
}
