/**
 * Resume's added latency: one stream at a time through fleetgate to two simulated engines; after
 * `cutAfter` events the engine serving it (its `x-sim-server` header) is `kill -9`ed, in the same
 * tick that read the event, and the time from the kill to the continuation's first event at the client
 * (the first after fleetgate's `: resumed on` comment) is the sample. Token-exact: fleetgate with the model, a thinking answer cut mid-reasoning. Text: fleetgate
 * without a model, the same engines answering without thinking (`enable_thinking: false`), resumed as
 * text as before #52. Either includes the new engine's prefill and first decode step (`tokenMs`). The
 * killed engine is started again, and both fleetgates see it ready, before the next sample. It runs
 * on the job's engines (their `--token-ms`, reasoning longer than the cut).
 */
import { join } from 'node:path';
import { request } from 'undici';
import { median } from '../lib/stats.js';
import { type RunningTarget, startTarget } from '../lib/targets.js';
import type { Engine, Fleet } from './engines.js';

export interface LatencyArm {
  arm: 'token-exact, mid-reasoning' | 'text, no thinking';
  samplesMs: number[];
  medianMs: number;
  /** Samples whose stream ended with [DONE] and the continuation in the expected field. */
  ok: number;
  samples: number;
}

interface Sample {
  ms: number;
  ok: boolean;
}

/** One stream, cut after `cutAfter` events by killing its engine. */
async function cutOne(
  target: RunningTarget,
  engines: readonly Engine[],
  body: string,
  cutAfter: number,
  field: 'reasoning_content' | 'content',
): Promise<Sample> {
  const res = await request(`${target.urls[0]}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
    signal: AbortSignal.timeout(120_000),
  });
  const victim = engines.find((e) => e.name === res.headers['x-sim-server']) ?? null;
  let events = 0;
  let killedAt = 0;
  let firstAfter = 0;
  let after = '';
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    const now = performance.now();
    if (killedAt > 0) {
      after += chunk.toString();
      // Bytes the dead engine sent before the kill can still arrive: the continuation is what follows
      // fleetgate's `: resumed on` comment, its first event.
      const mark = after.indexOf(': resumed on');
      if (firstAfter === 0 && mark >= 0 && after.indexOf('data: ', mark) >= 0) firstAfter = now;
      continue;
    }
    events += chunk.toString().split('data: ').length - 1;
    if (events >= cutAfter && victim !== null) {
      process.kill(victim.proc.pid, 'SIGKILL');
      killedAt = performance.now();
    }
  }
  // The continuation goes on in the field the stream was cut in.
  const continued = new RegExp(`"${field}":"[^"]`).test(after);
  const ok = killedAt > 0 && firstAfter > 0 && after.includes('data: [DONE]') && continued;
  return { ms: firstAfter > 0 ? firstAfter - killedAt : Number.NaN, ok };
}

export interface LatencySetup {
  samples: number;
  cutAfter: number;
  maxTokens: number;
  dir: string;
  proxyCpu: number | null;
  progress: (line: string) => void;
}

/** On the job's fleet: its fleetgate (model known) for token-exact, and a fleetgate without a model for text. */
export async function measureResumeLatency(setup: LatencySetup, fleet: Fleet): Promise<LatencyArm[]> {
  const { engines } = fleet;
  await fleet.whole();
  const plain = await startTarget(
    { name: 'fleetgate', kind: 'fleetgate' },
    { backends: engines.map((e) => e.url), cpu: setup.proxyCpu, dir: join(setup.dir, 'latency-plain') },
  );
  const targets = [fleet.fleetgate, plain];
  try {
    const arms = [
      { arm: 'token-exact, mid-reasoning' as const, target: fleet.fleetgate, thinking: true },
      { arm: 'text, no thinking' as const, target: plain, thinking: false },
    ];
    const out: LatencyArm[] = [];
    for (const { arm, target, thinking } of arms) {
      const samples: Sample[] = [];
      for (let s = 0; s < setup.samples; s++) {
        await fleet.whole(targets);
        const body = JSON.stringify({
          model: 'qwen3',
          messages: [{ role: 'user', content: `Sample ${s} of ${arm}: tell me about Paris.` }],
          max_tokens: setup.maxTokens,
          stream: true,
          ...(thinking ? {} : { chat_template_kwargs: { enable_thinking: false } }),
        });
        const sample = await cutOne(target, engines, body, setup.cutAfter, thinking ? 'reasoning_content' : 'content');
        samples.push(sample);
        setup.progress(
          `resume latency, ${arm}: sample ${s + 1}: ${sample.ms.toFixed(1)} ms${sample.ok ? '' : ' (NOT ok)'}`,
        );
      }
      const ms = samples.map((x) => x.ms);
      out.push({
        arm,
        samplesMs: ms,
        medianMs: median(ms),
        ok: samples.filter((x) => x.ok).length,
        samples: samples.length,
      });
    }
    return out;
  } finally {
    await plain.stop();
  }
}
