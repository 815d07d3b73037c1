/**
 * Which queue a request waits in, by the model it names. A single-model fleet never reads the body
 * for it (`ModelRouter.byModel` is false): its requests pay nothing for routing by model.
 */
import { isObject } from '../config/json-object.js';
import type { ErrorType } from '../http/openai-error.js';
import type { ModelRouter } from '../routing/model-route.js';
import type { ModelQueues } from '../routing/queue/model-queues.js';
import type { WaitQueue } from '../routing/queue/wait-queue.js';

export interface ModelRefusal {
  status: 400 | 404;
  type: Extract<ErrorType, 'invalid_request_error' | 'model_not_found'>;
  message: string;
}

/** `json`: the body's JSON, parsed on first call (request-context-from.ts `BodyJson`). */
export type Admission = (json: () => unknown) => WaitQueue | ModelRefusal;

export function createModelAdmission(router: ModelRouter, queues: ModelQueues): Admission {
  return (json) => {
    if (!router.byModel) return queues.any;
    const route = router.route(requestedModel(json()));
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

/** The `model` of a parsed JSON request body; null when there is none. */
function requestedModel(json: unknown): string | null {
  const model = isObject(json) ? json.model : undefined;
  return typeof model === 'string' && model !== '' ? model : null;
}
