// Follows the store's event feed for ever, printing each event once as one JSON line, and
// resumes where it stopped: the id of the last event handled is saved after each page.
// Plain JavaScript for Node 20 or later (fetch is built in); see docs/events.md.
//
//   STORE_URL=https://pets.example STORE_KEY=pk_live_... node follow-events.js
//
// STATE_FILE (default ./last-event-id) keeps the position; STOP_AFTER=n stops after the page that
// brings the events handled to n or more.
import { readFile, rename, writeFile } from 'node:fs/promises';

const base = process.env.STORE_URL ?? 'http://127.0.0.1:8080';
const key = process.env.STORE_KEY;
const stateFile = process.env.STATE_FILE ?? 'last-event-id';
const stopAfter = Number(process.env.STOP_AFTER ?? Infinity);

/** What to do with one event: here, print it. Make it idempotent: after a crash, a page may come again. */
function handle(event) {
  console.log(JSON.stringify(event));
}

/** The saved position, or null the first time. */
async function savedPosition() {
  try {
    return (await readFile(stateFile, 'utf8')).trim();
  } catch {
    return null;
  }
}

/** Saves the position so that a crash between two writes never leaves a torn file. */
async function save(id) {
  await writeFile(`${stateFile}.tmp`, String(id));
  await rename(`${stateFile}.tmp`, stateFile);
}

const saved = await savedPosition();
// wait=30: an empty page waits up to 30 s for the next event, so following costs one request per page.
let next = `/v1/events?limit=100&wait=30${saved === null ? '' : `&after=${saved}`}`;
let handled = 0;
let pause = 1000;
while (handled < stopAfter) {
  let response;
  try {
    response = await fetch(new URL(next, base), { headers: { authorization: `Bearer ${key}` } });
  } catch {
    response = null;
  }
  if (response?.status === 410) {
    // Events after our position were deleted: read the pets and orders in full again, then
    // follow the feed from its start (see "When the feed answers 410" in docs/events.md).
    console.error('cursor_expired: start again from a full read of the pets and orders');
    process.exit(3);
  }
  if (response === null || !response.ok) {
    // A restart, a deploy, a 429 or a 503: try the same page again, a little later each time.
    await new Promise((resolve) => setTimeout(resolve, Number(response?.headers.get('retry-after') ?? 0) * 1000 || pause));
    pause = Math.min(pause * 2, 30_000);
    continue;
  }
  pause = 1000;
  const events = await response.json();
  for (const event of events) handle(event);
  handled += events.length;
  // The Link always names the next page: after the last event returned, or the same position.
  next = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link'))[1];
  if (events.length > 0) await save(events.at(-1).id);
}
