/**
 * Takes docs/serving-view.png: a running `fleetgate demo` under a few concurrent clients, its status
 * page in headless Chromium. Start the demo first (npm run build && node dist/cli/index.js demo
 * --port P --base-port B), then:
 *
 *   node --import tsx scripts/serving-view-screenshot.ts http://127.0.0.1:P docs/serving-view.png
 *
 * The load is bounded: WORKERS streamed chat clients, stopped once the screenshot is taken
 * (SHOT_AFTER_MS after the load started), and never longer than MAX_LOAD_MS.
 */
import { chromium } from 'playwright-core';
import { request } from 'undici';
import { chatLoad } from '../test/helpers/chat-load.js';
import { waitFor } from '../test/helpers/wait.js';

const SHOT_AFTER_MS = 30_000;
const MAX_LOAD_MS = 60_000;
const WORKERS = 16;

const [url, out] = process.argv.slice(2);
if (!url || !out) {
  process.stderr.write('usage: serving-view-screenshot.ts URL OUT.png\n');
  process.exit(2);
}

await waitFor(
  async () => {
    const status = (await (await request(`${url}/fleet/status`)).body.json()) as { ready: number };
    return status.ready >= 6;
  },
  { timeoutMs: 120_000, intervalMs: 500, what: '6 ready backends' },
);
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
let load: ReturnType<typeof chatLoad> | null = null;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 600 }, colorScheme: 'light' });
  await page.goto(`${url}/fleet`);
  load = chatLoad(url, { workers: WORKERS, maxTokens: 160, maxMs: MAX_LOAD_MS });
  await new Promise((resolve) => setTimeout(resolve, SHOT_AFTER_MS));
  await page.screenshot({ path: out, fullPage: true });
} finally {
  await browser.close();
  await load?.stop();
}
const statuses = load?.statuses ?? [];
process.stdout.write(`wrote ${out}; ${statuses.length} requests, statuses ${[...new Set(statuses)]}\n`);
