/**
 * The warm-up's engine: an in-process upstream on a loopback port that speaks just enough of the
 * SGLang, vLLM and OpenAI protocols for a fleetgate to admit it (the readiness probes of every kind,
 * the load scrape's `/metrics` and `/server_info`) and to serve generation requests with a short
 * stream. It exists only while the warm-up runs, so the warm-up never sends an engine a request.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const WARM_UP_MODEL = 'fleetgate-warm-up';
/** The batch size it reports: far above the warm-up's burst, so its auto cap never holds one back. */
const MAX_RUNNING = 1024;

const models = JSON.stringify({
  object: 'list',
  data: [{ id: WARM_UP_MODEL, object: 'model', owned_by: 'fleetgate' }],
});
const modelInfo = JSON.stringify({ model_path: WARM_UP_MODEL, served_model_name: WARM_UP_MODEL, is_generation: true });
const serverInfo = JSON.stringify({ model_path: WARM_UP_MODEL, max_running_requests: MAX_RUNNING });
const metrics = [
  'sglang:num_running_reqs 0',
  'sglang:num_queue_reqs 0',
  'sglang:token_usage 0',
  'vllm:num_requests_running 0',
  'vllm:num_requests_waiting 0',
  '',
].join('\n');

const INFO: Record<string, [type: string, body: string]> = {
  '/health': ['text/plain', ''],
  '/v1/models': ['application/json', models],
  '/model_info': ['application/json', modelInfo],
  '/get_model_info': ['application/json', modelInfo],
  '/server_info': ['application/json', serverInfo],
  '/metrics': ['text/plain; version=0.0.4', metrics],
};

/** One generated token, as each API streams it. */
function chunkOf(path: string): unknown {
  if (path === '/v1/chat/completions') {
    return { object: 'chat.completion.chunk', model: WARM_UP_MODEL, choices: [{ index: 0, delta: { content: 'ok' } }] };
  }
  if (path === '/generate') return { text: 'ok', meta_info: { completion_tokens: 1 } };
  return { object: 'text_completion', model: WARM_UP_MODEL, choices: [{ index: 0, text: 'ok' }] };
}

function answerGeneration(path: string, body: string, res: ServerResponse): void {
  let stream = false;
  try {
    stream = (JSON.parse(body) as { stream?: unknown }).stream === true;
  } catch {
    // A body the warm-up did not send: answered like any other, as one JSON document.
  }
  const chunk = JSON.stringify(chunkOf(path));
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(chunk) });
    res.end(chunk);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(`data: ${chunk}\n\n`);
  res.end('data: [DONE]\n\n');
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '/').split('?')[0];
  const info = INFO[path];
  if (info !== undefined) {
    res.writeHead(200, { 'content-type': info[0], 'content-length': Buffer.byteLength(info[1]) });
    res.end(info[1]);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => answerGeneration(path, Buffer.concat(chunks).toString('utf8'), res));
}

export interface WarmUpEngine {
  readonly url: string;
  close(): Promise<void>;
}

export async function startWarmUpEngine(): Promise<WarmUpEngine> {
  const server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
