/** Streamed chat completions through fleetgate, one at a time or as a bounded client load. */
import { request } from 'undici';

export async function chat(url: string, maxTokens: number): Promise<{ status: number; body: string }> {
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'default',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: maxTokens,
      messages: [{ role: 'user', content: 'Hello' }],
    }),
  });
  return { status: res.statusCode, body: await res.body.text() };
}

export interface ChatLoadOptions {
  workers: number;
  maxTokens: number;
  /** The load stops by itself after this long, or this many requests, whichever comes first. */
  maxMs?: number;
  maxRequests?: number;
}

/** `workers` clients sending streamed chats back to back until `stop()`; bounded in time and count. */
export function chatLoad(url: string, opts: ChatLoadOptions) {
  const deadline = Date.now() + (opts.maxMs ?? 30_000);
  const maxRequests = opts.maxRequests ?? 2_000;
  let sent = 0;
  let stopped = false;
  const statuses: number[] = [];
  const done = Promise.all(
    Array.from({ length: opts.workers }, async () => {
      while (!stopped && Date.now() < deadline && sent < maxRequests) {
        sent++;
        statuses.push((await chat(url, opts.maxTokens)).status);
      }
    }),
  );
  return {
    statuses,
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}
