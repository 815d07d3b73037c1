/**
 * Readiness checks per backend kind: the HTTP calls only. The verdict's consequences (rise/fall,
 * state) are the state machine's. Facts behind each rule: docs/sglang-vllm-behaviour.md.
 */
import { type Client, errors } from 'undici';
import type { BackendKind } from '../config/types.js';
import type { ProbeResult } from './backend-lifecycle.js';
import { servesModel } from './model-names.js';

export interface ReadinessTarget {
  kind: BackendKind;
  expectModel: string | null;
  timeoutMs: number;
  /** Sent as `Authorization: Bearer` to backends started with `--api-key`. */
  apiKey: string | null;
}

interface HttpAnswer {
  status: number;
  body: string;
}

/** Ready, serving `models` (the names a request's `model` may use). */
function ok(models: string[]): ProbeResult {
  return { ok: true, reachable: true, reason: null, models };
}

export async function checkReadiness(client: Client, target: ReadinessTarget): Promise<ProbeResult> {
  try {
    switch (target.kind) {
      case 'sglang':
        return await checkSglang(client, target);
      case 'vllm':
        return await checkVllm(client, target);
      case 'openai':
        return await checkModels(client, target);
    }
  } catch (error) {
    return failureOf(error, target.timeoutMs);
  }
}

/**
 * SGLang >= 0.5 answers `/health` 503 until its warm-up request succeeded (reference 1.3); the
 * model endpoint proves the HTTP process serves the model we expect (a stale old process may not).
 */
async function checkSglang(client: Client, target: ReadinessTarget): Promise<ProbeResult> {
  const health = await get(client, '/health', target);
  if (health.status === 503) return notReady('/health 503 (warming up)', 'warming_up');
  if (health.status !== 200) return notReady(`/health answered ${health.status}`);
  let info = await get(client, '/model_info', target);
  if (info.status === 404) info = await get(client, '/get_model_info', target);
  if (info.status !== 200) return notReady(`/model_info answered ${info.status}`);
  const served = modelNamesOf(info.body);
  if (target.expectModel === null || servesModel(served, target.expectModel)) return ok(served);
  return notReady(`serves model "${served[0] ?? 'unknown'}", expected "${target.expectModel}"`);
}

/** vLLM opens its port only once the engine is built, so `/health` 200 is ready (reference 6). */
async function checkVllm(client: Client, target: ReadinessTarget): Promise<ProbeResult> {
  const health = await get(client, '/health', target);
  if (health.status !== 200) return notReady(`/health answered ${health.status}`);
  return checkModels(client, target);
}

async function checkModels(client: Client, target: ReadinessTarget): Promise<ProbeResult> {
  const models = await get(client, '/v1/models', target);
  if (models.status !== 200) return notReady(`/v1/models answered ${models.status}`);
  const ids = modelIdsOf(models.body);
  if (target.expectModel === null || servesModel(ids, target.expectModel)) return ok(ids);
  return notReady(`serves model ${ids.map((id) => `"${id}"`).join(', ') || 'none'}, expected "${target.expectModel}"`);
}

/** SGLang's `/model_info`: `served_model_name` (where the server has one) first, then `model_path`. */
function modelNamesOf(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as { served_model_name?: unknown; model_path?: unknown };
    const names = [parsed.served_model_name, parsed.model_path].filter((n): n is string => typeof n === 'string');
    return [...new Set(names)];
  } catch {
    return [];
  }
}

function modelIdsOf(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as { data?: Array<{ id?: unknown }> };
    return (parsed.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === 'string');
  } catch {
    return [];
  }
}

async function get(client: Client, path: string, target: ReadinessTarget): Promise<HttpAnswer> {
  const headers: Record<string, string> = {};
  if (target.apiKey !== null) headers.authorization = `Bearer ${target.apiKey}`;
  const res = await client.request({
    method: 'GET',
    path,
    headers,
    headersTimeout: target.timeoutMs,
    bodyTimeout: target.timeoutMs,
    signal: AbortSignal.timeout(target.timeoutMs),
  });
  return { status: res.statusCode, body: await res.body.text() };
}

function notReady(reason: string, phase: ProbeResult['phase'] = null): ProbeResult {
  return { ok: false, reachable: true, reason, phase };
}

function failureOf(error: unknown, timeoutMs: number): ProbeResult {
  const code = (error as { code?: string }).code;
  if (code === 'ECONNREFUSED') return { ok: false, reachable: false, reason: 'connection refused' };
  if (error instanceof errors.ConnectTimeoutError || code === 'EHOSTUNREACH' || code === 'ENETUNREACH') {
    return { ok: false, reachable: false, reason: `cannot connect (${code ?? 'connect timeout'})` };
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return { ok: false, reachable: false, reason: `DNS: ${code}` };
  const timedOut =
    error instanceof errors.HeadersTimeoutError ||
    error instanceof errors.BodyTimeoutError ||
    (error as { name?: string }).name === 'TimeoutError';
  if (timedOut) return { ok: false, reachable: true, reason: `no answer within ${timeoutMs} ms` };
  return { ok: false, reachable: true, reason: `probe failed: ${(error as Error).message ?? String(error)}` };
}
