/**
 * The status page in headless Chromium against a real fleetgate and simulated servers: every backend
 * shown, live updates without reload when one turns ready and when one fails, a phone viewport with
 * no horizontal overflow, and screenshots under test-output/ (with UPDATE_DOCS=1 the demo one is also
 * written to docs/status-page.png).
 *
 * Chromium must be installed at /usr/bin/chromium (CI installs it): without it this test fails.
 */
import assert from 'node:assert/strict';
import { copyFile, mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
import type { SimOptions } from '../../src/sim/index.js';
import { cardState, launch, OUTPUT, overflow, ROOT, startFleet, UI_TIMEOUT } from '../helpers/status-page-browser.js';
import { waitFor } from '../helpers/wait.js';

test('the page shows every backend and follows it live: ready, then failed, without a reload', async (t) => {
  const { sims, url } = await startFleet(t, [
    {},
    { timing: { shards: 10, shardMs: 40 } },
    { failure: { mode: 'cuda_oom_capture' }, timing: { shards: 10, shardMs: 20 } },
  ]);
  sims[0].start();
  await sims[0].whenReady(5000);
  const browser = await launch(t);
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(msg.text());
  });
  await page.goto(`${url}/fleet`);

  await page.waitForFunction(() => document.querySelectorAll('.card').length === 3, undefined, { timeout: UI_TIMEOUT });
  await cardState(page, 'gpu0', 'ready');
  const cards = page.locator('.card');
  assert.deepEqual(await cards.locator('.name').allTextContents(), ['gpu0', 'gpu1', 'gpu2']);
  assert.equal(await page.locator('.card[data-name="gpu1"] .badge').textContent(), 'down');
  assert.equal(await page.locator('.card[data-name="gpu1"] .url').textContent(), sims[1].url);
  await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live', undefined, {
    timeout: UI_TIMEOUT,
  });
  assert.match((await page.locator('#summary').textContent()) ?? '', /^1\/3 ready, 2 down/);

  // Anything set now survives only if the page is never reloaded.
  await page.evaluate(() => {
    (window as unknown as { marker: number }).marker = 42;
  });

  sims[1].start();
  // On its way it shows its start-up phase in words.
  await page.waitForFunction(
    () =>
      /loading weights \d+\/10|capturing CUDA graphs|warming up/.test(
        document.querySelector('.card[data-name="gpu1"] .phase')?.textContent ?? '',
      ),
    undefined,
    { timeout: UI_TIMEOUT },
  );
  await cardState(page, 'gpu1', 'ready');
  assert.match((await page.locator('#summary').textContent()) ?? '', /^2\/3 ready, 1 down/);

  sims[2].start();
  await cardState(page, 'gpu2', 'failed');
  const reason = page.locator('.card[data-name="gpu2"] .reason');
  assert.equal(await reason.isVisible(), true);
  assert.match((await reason.textContent()) ?? '', /Capture cuda graph failed|CUDA out of memory/);
  await page.waitForFunction(
    () => document.getElementById('summary')?.textContent?.startsWith('2/3 ready, 1 failed'),
    undefined,
    {
      timeout: UI_TIMEOUT,
    },
  );
  assert.equal(await page.title(), '2/3 ready · fleetgate');
  assert.equal(await page.evaluate(() => (window as unknown as { marker?: number }).marker), 42, 'no reload');
  // The failed card is red, the ready one green (colours by state).
  const colours = await page.evaluate(() =>
    ['gpu0', 'gpu2'].map(
      (n) => getComputedStyle(document.querySelector(`.card[data-name="${n}"] .badge`)!).backgroundColor,
    ),
  );
  assert.notEqual(colours[0], colours[1]);

  await mkdir(OUTPUT, { recursive: true });
  await page.screenshot({ path: join(OUTPUT, 'status-page.png'), fullPage: true });
  assert.deepEqual(errors, []);
});

/**
 * The demo's fleet mid-start: three ready, one warming up, one loading weights, one capturing CUDA
 * graphs, one failed with CUDA out of memory during capture.
 */
const DEMO: Array<Partial<SimOptions>> = [
  { timing: { shards: 8, shardMs: 150, graphBatches: 4, graphBatchMs: 100 } },
  { timing: { shards: 8, shardMs: 180, graphBatches: 4, graphBatchMs: 100 } },
  { timing: { shards: 8, shardMs: 200, graphBatches: 4, graphBatchMs: 100 } },
  { timing: { shards: 8, shardMs: 10, warmupMs: 60_000 } },
  // Loading and capturing last ~30 s, so the page still finds them mid-way on a busy machine.
  { timing: { shards: 83, shardMs: 400 } },
  { timing: { shards: 8, shardMs: 10, graphBatches: 52, graphBatchMs: 600 } },
  { timing: { shards: 8, shardMs: 10, graphBatches: 52, graphBatchMs: 10 }, failure: { mode: 'cuda_oom_capture' } },
];

test('a 7-backend fleet mid-start: laptop screenshot, and a phone viewport without sideways overflow', async (t) => {
  const { sims, url, gateway } = await startFleet(t, DEMO);
  for (const sim of sims) sim.start();
  const registry = gateway.fleet.registry;
  await waitFor(
    () => {
      const [g0, g1, g2, g3, g4, g5, g6] = sims.map((s) => registry.get(s.name)!.lifecycle.snapshot);
      return (
        g0.state === 'ready' &&
        g1.state === 'ready' &&
        g2.state === 'ready' &&
        g3.phase === 'warming_up' &&
        g5.phase === 'capturing_cuda_graphs' &&
        g6.state === 'failed' &&
        (g4.progress?.done ?? 0) >= 4
      );
    },
    { timeoutMs: 15_000, what: 'the fleet mid-start' },
  );

  const browser = await launch(t);
  const laptop = await browser.newPage({ viewport: { width: 1280, height: 540 }, colorScheme: 'light' });
  await laptop.goto(`${url}/fleet`);
  await laptop.waitForFunction(() => document.querySelectorAll('.card').length === 7, undefined, {
    timeout: UI_TIMEOUT,
  });
  await cardState(laptop, 'gpu6', 'failed');
  const summary = (await laptop.locator('#summary').textContent()) ?? '';
  assert.match(summary, /^3\/7 ready, 1 failed, /);
  assert.match(summary, /1 warming up/);
  assert.match(summary, /1 loading weights \d+\/83/);
  assert.match(summary, /1 capturing CUDA graphs \d+\/52/);
  assert.match(
    (await laptop.locator('.card[data-name="gpu4"] .phase').textContent()) ?? '',
    /^loading weights \d+\/83$/,
  );
  assert.match((await laptop.locator('.card[data-name="gpu4"] .eta').textContent()) ?? '', /^\d+%/);
  assert.equal(await laptop.locator('.card[data-name="gpu4"] .bar').isVisible(), true);
  assert.match((await laptop.locator('.card[data-name="gpu6"] .reason').textContent()) ?? '', /CUDA out of memory/);
  assert.match(
    (await laptop.locator('.card[data-name="gpu6"] .phase').textContent()) ?? '',
    /^stopped at capturing CUDA graphs/,
  );
  assert.equal(await laptop.locator('.card[data-name="gpu6"] .eta').isVisible(), false);

  await mkdir(OUTPUT, { recursive: true });
  const demoShot = join(OUTPUT, 'status-page-demo.png');
  await laptop.screenshot({ path: demoShot, fullPage: true });
  assert.ok((await stat(demoShot)).size < 300_000, 'a small screenshot');
  if (process.env.UPDATE_DOCS === '1') {
    await mkdir(join(ROOT, 'docs'), { recursive: true });
    await copyFile(demoShot, join(ROOT, 'docs', 'status-page.png'));
  }

  const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await phone.goto(`${url}/fleet`);
  await phone.waitForFunction(() => document.querySelectorAll('.card').length === 7, undefined, {
    timeout: UI_TIMEOUT,
  });
  const sizes = await overflow(phone);
  assert.ok(sizes.scrollWidth <= sizes.innerWidth, `overflows: ${JSON.stringify(sizes)}`);
  assert.deepEqual(sizes.wide, []);
  // One card per row on a phone.
  const lefts = await phone
    .locator('.card')
    .evaluateAll((els) => els.map((e) => Math.round(e.getBoundingClientRect().left)));
  assert.equal(new Set(lefts).size, 1);
  await phone.screenshot({ path: join(OUTPUT, 'status-page-phone.png'), fullPage: true });
});

test("each card shows its backend's KV events (live with the blocks held, or off), updated live", async (t) => {
  const model = packagedQwen3Dir();
  const publishing: Partial<SimOptions> = {
    modelPath: model,
    engine: { tokenMs: 0, pageSize: 16, defaultMaxTokens: 4 },
    kvEvents: {
      endpoint: 'tcp://127.0.0.1:0',
      topic: 'kv-events',
      replayEndpoint: null,
      bufferSteps: 100,
      encoding: 'array',
      dropSeqs: null,
    },
  };
  const { sims, url } = await startFleet(t, [publishing, { modelPath: model }], {
    model: { dir: model },
    routing: { policy: 'kv-aware' },
  });
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady(5000)));
  const browser = await launch(t);
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(`${url}/fleet`);
  const kvText = (name: string) => page.locator(`.card[data-name="${name}"] .kv-events`).textContent();
  await page.waitForFunction(
    () => document.querySelector('.card[data-name="gpu0"] .kv-events')?.getAttribute('data-kv') === 'live',
    undefined,
    { timeout: UI_TIMEOUT },
  );
  assert.equal(await kvText('gpu0'), 'KV events live · 0 blocks');
  assert.equal(await kvText('gpu1'), 'KV events off');
  assert.equal(await page.locator('.card[data-name="gpu1"] .kv-events').isVisible(), true);
  // A prompt cached on gpu0 (sent to it directly): its blocks reach the page through the summary
  // events, without a reload.
  const res = await fetch(`${sims[0].url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': 'one' },
    body: JSON.stringify({
      model: 'qwen3',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'Describe the rack layout in detail, please. '.repeat(12) }],
    }),
  });
  assert.equal(res.status, 200);
  await res.text();
  const held = await waitFor(
    async () => {
      const body = (await (await fetch(`${url}/fleet/status`)).json()) as {
        backends: Array<{ name: string; kv_events: { blocks: number } }>;
      };
      return body.backends.reduce((n, b) => n + b.kv_events.blocks, 0) || null;
    },
    { what: 'blocks in the map' },
  );
  await page.waitForFunction(
    (n) =>
      /KV events live · [\d,]+ blocks/.test(
        document.querySelector('.card[data-name="gpu0"] .kv-events')?.textContent ?? '',
      ) &&
      !document.querySelector('.card[data-name="gpu0"] .kv-events')?.textContent?.includes(' 0 blocks') &&
      n > 0,
    held,
    { timeout: UI_TIMEOUT },
  );
  assert.match((await kvText('gpu0')) ?? '', /^KV events live · \d[\d,]* blocks$/);
});
