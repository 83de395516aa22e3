/**
 * `npm run screenshot`: regenerates the README's picture of `GET /docs` (docs-page.png beside this
 * file): the top of the page, as a newcomer first sees it, with a key pasted. It starts the real
 * service on 127.0.0.1 over an in-memory database and opens the page in headless Chromium.
 */
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createLogger } from '../../src/http/access-log.ts';
import { createService } from '../../src/service/service.ts';
import { openStores } from '../../src/storage/sqlite/stores.ts';
import { systemClock } from '../../src/clock.ts';
import { chromiumMissing, launchChromium } from '../support/chromium.ts';

const OUTPUT = fileURLToPath(new URL('./docs-page.png', import.meta.url));

const missing = chromiumMissing();
if (missing !== false) {
  process.stderr.write(`${missing}\n`);
  process.exit(1);
}

const db = openDatabase(':memory:');
const service = createService({
  config: { appEnv: 'development', trustProxy: false, rateLimitBanThreshold: 30, rateLimitBanSeconds: 900, publicBaseUrl: null, stagingBaseUrl: null },
  stores: openStores(db, { appEnv: 'development', clock: systemClock, banThreshold: 30, banSeconds: 900 }),
  clock: systemClock,
  logger: createLogger({ level: 'silent', clock: systemClock, write: () => {} }),
});
const { key } = service.stores.keys.create({ plan: 'free', label: 'screenshot', now: systemClock() });
await new Promise<void>((resolve) => service.server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(service.server.address() as AddressInfo).port}`;
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1240 }, deviceScaleFactor: 1 });
  await page.goto(`${url}/docs`);
  await page.fill('#api-key', key);
  await page.locator('#api-key').blur();
  await page.screenshot({ path: OUTPUT });
  process.stdout.write(`wrote ${OUTPUT}\n`);
} finally {
  await browser.close();
  service.server.closeAllConnections();
  await new Promise((resolve) => service.server.close(resolve));
  db.close();
}
