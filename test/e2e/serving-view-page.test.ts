/**
 * The serving view on the status page in headless Chromium, under real streamed traffic through
 * fleetgate to simulated servers: fleet totals in the header, per-backend rates and reported load,
 * the streams' median time to first token and inter-token gap, a slowed backend marked a straggler, live without a reload, and no sideways overflow on a phone.
 * Its own file so that the status page's files each stay well inside the per-file test timeout.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { chatLoad } from '../helpers/chat-load.js';
import { cardState, launch, OUTPUT, overflow, startFleet, UI_TIMEOUT } from '../helpers/status-page-browser.js';

test('the serving view under load: fleet totals, per-backend rates and reported load, a slowed backend marked', async (t) => {
  const { sims, url } = await startFleet(t, [
    { engine: { tokenMs: 10 } },
    { engine: { tokenMs: 10 } },
    { engine: { tokenMs: 10 } },
  ]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  sims[2].slow(20);
  const browser = await launch(t);
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 }, colorScheme: 'light' });
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${url}/fleet`);
  await cardState(page, 'gpu2', 'ready');
  assert.equal(await page.locator('#serving').isVisible(), true, 'the totals show once the fleet is up');
  assert.match(
    (await page.locator('#serving').textContent()) ?? '',
    /^0tok\/s0req\/s0waiting0retries0resumes0errorsin the last 60 s$/,
  );

  const clients = chatLoad(url, { workers: 8, maxTokens: 12 });
  t.after(() => clients.stop());
  // Live, without a reload: rates above zero on every card and in the header, gpu2 marked.
  await page.waitForFunction(
    () =>
      ['#serving b', ...['gpu0', 'gpu1', 'gpu2'].map((n) => `.card[data-name="${n}"] .rates b`)].every(
        (sel) => Number.parseFloat(document.querySelector(sel)?.textContent ?? '') > 0,
      ) && document.querySelector('.card[data-name="gpu2"]')?.classList.contains('straggler'),
    undefined,
    { timeout: 30_000 },
  );
  const gpu2 = page.locator('.card[data-name="gpu2"]');
  assert.equal(await gpu2.locator('.mark').isVisible(), true);
  assert.match(
    (await gpu2.locator('.slow').textContent()) ?? '',
    /tok\/s per running request: below 0\.7× the fleet median/,
  );
  assert.equal(await page.locator('.card[data-name="gpu0"] .mark').isVisible(), false);
  assert.match((await page.locator('.card[data-name="gpu0"] .load').textContent()) ?? '', /^\d+ running · \d+ queued$/);
  assert.match((await page.locator('.card[data-name="gpu0"] .kv').textContent()) ?? '', /^KV \d+%$/);
  assert.match((await page.locator('#serving').textContent()) ?? '', /req\/s.*waiting.*retries.*errors/);
  // The streams' medians: the slowed backend's inter-token gap is far above the others'.
  const latency = async (name: string) => {
    const text = (await page.locator(`.card[data-name="${name}"] .latency`).textContent()) ?? '';
    const match = /^p50 TTFT ([\d.]+) (m?s) · inter-token ([\d.]+) (m?s)$/.exec(text);
    assert.ok(match, `${name}: ${text}`);
    const ms = (value: string, unit: string) => Number(value) * (unit === 's' ? 1000 : 1);
    return { ttft: ms(match[1], match[2]), interToken: ms(match[3], match[4]) };
  };
  // Both medians known on both cards ("–" until a backend's streams have given one).
  await page.waitForFunction(
    () =>
      ['gpu0', 'gpu2'].every((name) =>
        /TTFT [\d.]+ m?s · inter-token [\d.]+ m?s$/.test(
          document.querySelector(`.card[data-name="${name}"] .latency`)?.textContent ?? '',
        ),
      ),
    undefined,
    { timeout: UI_TIMEOUT },
  );
  const fast = await latency('gpu0');
  const slow = await latency('gpu2');
  assert.ok(slow.ttft > fast.ttft, `TTFT p50: gpu2 ${slow.ttft} ms, gpu0 ${fast.ttft} ms`);
  assert.ok(
    slow.interToken > 3 * fast.interToken,
    `inter-token p50: gpu2 ${slow.interToken} ms, gpu0 ${fast.interToken} ms`,
  );

  await mkdir(OUTPUT, { recursive: true });
  await page.screenshot({ path: join(OUTPUT, 'serving-view.png'), fullPage: true });
  const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await phone.goto(`${url}/fleet`);
  await phone.waitForFunction(() => document.querySelector('.card[data-name="gpu2"] .mark:not([hidden])'), undefined, {
    timeout: UI_TIMEOUT,
  });
  const sizes = await overflow(phone);
  assert.ok(sizes.scrollWidth <= sizes.innerWidth, `overflows: ${JSON.stringify(sizes)}`);
  assert.deepEqual(sizes.wide, []);
  await clients.stop();
  assert.deepEqual(errors, []);
});
