/** Headless Chromium on fleetgate's status page: the browser, a simulated fleet with logs, page probes. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { type Browser, chromium, type Page } from 'playwright-core';
import type { SimOptions } from '../../src/sim/index.js';
import { backendsFor, createSims, startGateway } from './fleet.js';

export const ROOT = join(import.meta.dirname, '..', '..');
export const OUTPUT = join(ROOT, 'test-output');
const CHROMIUM = '/usr/bin/chromium';
const HEALTH = { starting_interval: '100ms', interval: '1s' };
export const UI_TIMEOUT = 10_000;

export async function launch(t: TestContext): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
  t.after(() => browser.close());
  return browser;
}

export async function logDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-status-page-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export async function startFleet(
  t: TestContext,
  specs: Array<Partial<SimOptions>>,
  /** More of fleetgate's config (e.g. `model` and `routing` for kv-aware). */
  config: Record<string, unknown> = {},
) {
  const dir = await logDir(t);
  const sims = await createSims(
    t,
    specs.map((spec, i) => ({ logFile: join(dir, `sglang_gpu${i}.log`), ...spec })),
  );
  const { url, gateway } = await startGateway(t, {
    backends: backendsFor(sims, (sim) => ({ log: sim.options.logFile })),
    health: HEALTH,
    ...config,
  });
  return { sims, url, gateway };
}

/** The card's visible state, as the page shows it (`data-state`). */
export function cardState(page: Page, name: string, state: string) {
  return page.waitForFunction(
    ([n, s]) => document.querySelector(`.card[data-name="${n}"]`)?.getAttribute('data-state') === s,
    [name, state] as const,
    { timeout: UI_TIMEOUT },
  );
}

/** Nothing wider than the viewport: no sideways scrolling on a phone. */
export function overflow(page: Page) {
  return page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    wide: [...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5)
      .map((e) => `${e.tagName}.${e.className}`),
  }));
}
