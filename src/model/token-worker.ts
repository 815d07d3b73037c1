/**
 * The worker thread of background-tokenizer.ts: loads the model named by its `workerData` and
 * answers each `{ id, text }` with the text's token ids (`encode`, no special tokens added).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadChatModel } from './chat-model.js';

interface Ask {
  readonly id: number;
  readonly text: string;
}

const port = parentPort;
if (port === null) throw new Error('token-worker.ts runs as a worker thread');
const model = loadChatModel((workerData as { dir: string }).dir);
port.on('message', ({ id, text }: Ask) => {
  try {
    const ids = Uint32Array.from(model.encode(text));
    port.postMessage({ id, ids }, [ids.buffer]);
  } catch (err) {
    port.postMessage({ id, error: (err as Error).message });
  }
});
