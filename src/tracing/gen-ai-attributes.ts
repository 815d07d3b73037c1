/**
 * The OpenTelemetry GenAI semantic-convention attribute names fleetgate's spans carry, a proxied
 * request's (proxy/request-trace.ts) and a Batch API request's (batch/batch-trace.ts). They are
 * incubating conventions, spelled out here rather than imported from
 * `@opentelemetry/semantic-conventions/incubating` (which may rename them in a minor release): a
 * rename is one edit, in the one layer both may import.
 */
export const GEN_AI = {
  operation: 'gen_ai.operation.name',
  requestModel: 'gen_ai.request.model',
  maxTokens: 'gen_ai.request.max_tokens',
  temperature: 'gen_ai.request.temperature',
  stream: 'gen_ai.request.stream',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  finishReasons: 'gen_ai.response.finish_reasons',
  ttft: 'gen_ai.server.time_to_first_token',
} as const;
