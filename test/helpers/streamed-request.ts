/** A streamed request through fleetgate read as it arrives, so a test can act mid-stream. */
import { request } from 'undici';
import { readStream, type StreamSummary } from './stream-check.js';
import { waitFor } from './wait.js';

export interface LiveStream {
  /** The body received so far. */
  received(): string;
  /** Resolves once the client got `tokens` content pieces. */
  atTokens(tokens: number, timeoutMs?: number): Promise<void>;
  /** The whole body, read. */
  done: Promise<StreamSummary & { body: string; status: number }>;
}

export function streamFrom(url: string, path: string, body: object, headers: Record<string, string> = {}): LiveStream {
  let text = '';
  let status = 0;
  const done = (async () => {
    const res = await request(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    status = res.statusCode;
    for await (const chunk of res.body) text += chunk;
    return { ...readStream(text), body: text, status };
  })();
  // Generated text of any kind: the answer, completions text, or a reasoning parser's reasoning.
  const pieces = () => (text.match(/"(content|text|reasoning_content|reasoning)":"[^"]/g) ?? []).length;
  return {
    received: () => text,
    atTokens: async (tokens, timeoutMs = 20_000) => {
      await waitFor(() => pieces() >= tokens, { what: `${tokens} tokens streamed`, timeoutMs });
    },
    done,
  };
}
