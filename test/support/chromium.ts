/**
 * Headless Chromium for the browser tests: Debian's `chromium` package driven by playwright-core,
 * which downloads no browser of its own. Outside CI a machine without Chromium skips the browser
 * tests with one line saying how to get it; with CI=true a missing Chromium is a failure.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's chromium package; CHROMIUM_PATH points elsewhere. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/**
 * `false` when Chromium is there, else the reason to skip (for `describe(name, { skip })`).
 * Throws under CI=true, where every test must run.
 */
export function chromiumMissing(): string | false {
  if (existsSync(CHROMIUM_PATH)) return false;
  const reason = `Chromium not found at ${CHROMIUM_PATH}: apt-get install chromium to run the browser tests`;
  if (process.env.CI === 'true') throw new Error(`${reason} (CI=true: a missing component is a failure)`);
  return reason;
}

/**
 * Launches one headless Chromium. `--no-sandbox`: the tests run as root in a container, where
 * Chromium's sandbox cannot start; the browser only ever loads pages from 127.0.0.1 that the
 * tests serve themselves, so the sandbox has nothing to contain.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--disable-extensions'],
  });
}

/**
 * A page of a fresh context of `browser` at `url`, closed when the test ends, with every line the
 * page writes to its console (a test asserts there is none, or the one it expects).
 */
export async function pageAt(browser: Browser, t: { after(fn: () => unknown): void }, url: string): Promise<{ page: Page; console: string[] }> {
  const context = await browser.newContext();
  t.after(() => context.close());
  const page = await context.newPage();
  const console: string[] = [];
  page.on('console', (message) => console.push(`${message.type()}: ${message.text()}`));
  await page.goto(url);
  return { page, console };
}
