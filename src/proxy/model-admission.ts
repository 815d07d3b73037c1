/**
 * Which queue a request waits in, by the model it names. A single-model fleet never reads the body
 * for it (`ModelRouter.byModel` is false): its requests pay nothing for routing by model.
 */
import type { ErrorType } from '../http/openai-error.js';
import type { ModelQueues } from '../routing/model-queues.js';
import type { ModelRouter } from '../routing/model-route.js';
import type { WaitQueue } from '../routing/wait-queue.js';

export interface ModelRefusal {
  status: 400 | 404;
  type: Extract<ErrorType, 'invalid_request_error' | 'model_not_found'>;
  message: string;
}

export type Admission = (body: Buffer | null) => WaitQueue | ModelRefusal;

export function createModelAdmission(router: ModelRouter, queues: ModelQueues): Admission {
  return (body) => {
    if (!router.byModel) return queues.any;
    const route = router.route(requestedModel(body));
    switch (route.kind) {
      case 'any':
        return queues.any;
      case 'model':
        return queues.of(route.model);
      case 'unknown':
        return {
          status: 404,
          type: 'model_not_found',
          message: `model "${route.requested}" is not served here; served models: ${route.known.join(', ') || 'none yet'}`,
        };
      case 'unnamed':
        return {
          status: 400,
          type: 'invalid_request_error',
          message: `this fleet serves several models (${route.known.join(', ')}): name one in "model", or set default_model`,
        };
    }
  };
}

/** The `model` of a JSON request body; null when there is none. */
export function requestedModel(body: Buffer | null): string | null {
  if (body === null || body.length === 0) return null;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    const model = (parsed as { model?: unknown } | null)?.model;
    return typeof model === 'string' && model !== '' ? model : null;
  } catch {
    return null;
  }
}
