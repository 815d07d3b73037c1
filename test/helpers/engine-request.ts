/** A simulator engine request for the engine's unit tests: a 10-token prompt run to `length`, no-op hooks. */
import type { EngineRequest } from '../../src/sim/engine.js';

export function engineRequest(
  fields: Pick<EngineRequest, 'id' | 'maxTokens'> & Partial<Omit<EngineRequest, 'generated' | 'retractions'>>,
): EngineRequest {
  return {
    promptTokens: 10,
    targetTokens: fields.maxTokens,
    stopReason: 'length',
    onToken() {},
    onFinish() {},
    ...fields,
    generated: 0,
    retractions: 0,
  };
}
