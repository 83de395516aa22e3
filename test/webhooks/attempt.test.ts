/**
 * Delivery attempts against real receivers: node:http and node:https servers on loopback,
 * allowed by the policy as WEBHOOK_ALLOWED_NETWORKS would allow them, answering 2xx, 3xx, 4xx,
 * 5xx, slowly, never, or without end. What arrives is verified as receivers verify it: with the
 * Standard Webhooks library, Svix's, and the lines docs/webhooks.md gives. Where the contract's
 * 10 s would make a test slow, the test shortens the deadline; one test proves the 10 s is the
 * one an attempt gets. No attempt here connects anywhere but loopback.
 */
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { createAddressPolicy, vetWebhookUrl } from '../../src/webhooks/address-policy.ts';
import { ATTEMPT_DEADLINE_MS, createAttempt, MAX_RESPONSE_BYTES, type AttemptDeps, type Delivery } from '../../src/webhooks/attempt.ts';
import { generateSecret } from '../../src/webhooks/signature.ts';
import type { Resolver } from '../../src/http/outbound-resolution.ts';
import { readRepoFile } from '../support/markdown.ts';
import { needsLoopbackRange } from '../support/loopback.ts';
import { makeCertificates, opensslSkip, startReceiver, type Received } from '../support/webhook-receivers.ts';

const loopback = createAddressPolicy(['127.0.0.0/8']);
const secret = generateSecret();
const body = JSON.stringify({ id: 42, type: 'pet.created', occurredAt: '2026-11-28T10:20:00.000Z', actor: null, data: { id: 3, name: 'Rex', categoryId: 1, status: 'available' } });

/** A resolver of fixed answers; any other name does not exist. */
function resolverOf(answers: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    const addresses = answers[hostname];
    if (addresses === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? (6 as const) : (4 as const) }));
  };
  return Object.assign(resolve, { calls });
}

/** An attempt over loopback, `receiver.test` resolving to 127.0.0.1, on the real clock (the libraries check the timestamp against it). */
function attemptWith(deps: Partial<AttemptDeps> = {}) {
  return createAttempt({ policy: loopback, resolve: resolverOf({ 'receiver.test': ['127.0.0.1'] }), clock: () => Date.now(), ...deps });
}

const delivery = (url: string, overrides: Partial<Delivery> = {}): Delivery => ({ url, secret, eventId: '42', body, ...overrides });

/** The verifier of docs/webhooks.md, exactly as the page prints it, loaded as a module. */
async function docsVerifier(t: { after(fn: () => void): void }): Promise<(secret: string, headers: Received['headers'], body: string, nowSeconds?: number) => boolean> {
  const block = [...readRepoFile('docs/webhooks.md').matchAll(/```js\n([\s\S]*?)```/g)].map((match) => match[1]!).find((code) => code.includes('export function verifyWebhook'));
  assert.ok(block, 'docs/webhooks.md shows verifyWebhook');
  const dir = mkdtempSync(join(tmpdir(), 'pets-webhook-docs-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'verify.mjs'), block);
  return (await import(pathToFileURL(join(dir, 'verify.mjs')).href)).verifyWebhook;
}

test('a 2xx succeeds: a POST of the event with the Standard Webhooks headers, which both libraries and the docs\' lines verify, and refuse once changed', async (t) => {
  const receiver = await startReceiver(t, (_request, response) => response.writeHead(204).end());
  const started = Date.now();
  const outcome = await attemptWith()(delivery(`http://receiver.test:${receiver.port}/hooks/pets?source=store`));
  assert.equal(outcome.status, 204);
  assert.equal(outcome.error, null);
  assert.equal(outcome.detail, null);
  assert.ok(outcome.attemptedAt >= started && outcome.attemptedAt <= Date.now());
  assert.ok(outcome.durationMs >= 0 && outcome.durationMs < ATTEMPT_DEADLINE_MS);
  const [received] = receiver.requests;
  assert.equal(receiver.requests.length, 1);
  assert.equal(received!.method, 'POST');
  assert.equal(received!.target, '/hooks/pets?source=store');
  assert.equal(received!.body, body);
  const { headers } = received!;
  assert.equal(headers.host, `receiver.test:${receiver.port}`, 'the host name is kept for Host');
  assert.equal(headers['content-type'], 'application/json');
  assert.equal(headers['content-length'], String(Buffer.byteLength(body)));
  assert.equal(headers['webhook-id'], '42');
  assert.equal(headers['webhook-timestamp'], String(Math.floor(outcome.attemptedAt / 1000)));
  assert.match(headers['webhook-signature'] as string, /^v1,[A-Za-z0-9+/]{43}=$/);
  const plain = headers as Record<string, string>;
  const verifyDocs = await docsVerifier(t);
  const verifiers = {
    standardwebhooks: (h: Record<string, string>, b: string) => void new StandardWebhook(secret).verify(b, h),
    svix: (h: Record<string, string>, b: string) => new SvixWebhook(secret).verify(b, h),
    'docs/webhooks.md': (h: Record<string, string>, b: string) => assert.ok(verifyDocs(secret, h, b)),
  };
  for (const [name, verify] of Object.entries(verifiers)) {
    assert.doesNotThrow(() => verify(plain, received!.body), name);
    assert.throws(() => verify(plain, received!.body.replace('Rex', 'Rey')), `${name}: a changed body`);
    assert.throws(() => verify({ ...plain, 'webhook-timestamp': String(Number(plain['webhook-timestamp']) - 1) }, received!.body), `${name}: a changed timestamp`);
    assert.throws(() => verify({ ...plain, 'webhook-id': '43' }, received!.body), `${name}: a changed id`);
  }
  assert.equal(verifyDocs(secret, plain, received!.body, Date.now() / 1000 + 301), false, 'the docs\' lines refuse a delivery replayed 5 minutes later');
});

test('the delivery docs/webhooks.md shows is a real one: its headers and body are what a receiver gets', async (t) => {
  const page = readRepoFile('docs/webhooks.md');
  const shown = /```http\n([\s\S]*?)```/.exec(page)![1]!;
  const [head, shownBody] = shown.split('\n\n') as [string, string];
  const shownSecret = /secret was\s+`(whsec_[^`]+)`/.exec(page)![1]!;
  const timestamp = Number(/webhook-timestamp: (\d+)/.exec(head)![1]);
  const receiver = await startReceiver(t, (_request, response) => response.writeHead(200).end());
  const attempt = attemptWith({ resolve: resolverOf({ 'hooks.example': ['127.0.0.1'] }), clock: () => timestamp * 1000 + 250 });
  const outcome = await attempt({ url: `http://hooks.example:${receiver.port}/hooks/pets`, secret: shownSecret, eventId: '42', body: shownBody.trimEnd() });
  assert.equal(outcome.error, null);
  const received = receiver.requests[0]!;
  const raw = await rawHeadOf(received);
  assert.equal(raw.replace(`hooks.example:${receiver.port}`, 'hooks.example'), head);
  assert.equal(received.body, shownBody.trimEnd());
  const verifyDocs = await docsVerifier(t);
  assert.ok(verifyDocs(shownSecret, received.headers, received.body, timestamp), 'and the page\'s own lines verify it');
});

/** The request line and headers as they came on the wire (names as sent, in order). */
async function rawHeadOf(received: Received): Promise<string> {
  const names = Object.keys(received.headers);
  const sent = ['content-type', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'host', 'content-length', 'connection'];
  assert.deepEqual(names, sent, 'the headers, in the order the client sends them');
  const lines = sent.map((name) => `${name === 'connection' ? 'Connection' : name}: ${received.headers[name]}`);
  return [`${received.method} ${received.target} HTTP/1.1`, ...lines].join('\n');
}

test('any 2xx is a success; any other status fails as http_status, with the status recorded', async (t) => {
  let status = 200;
  const receiver = await startReceiver(t, (_request, response) => response.writeHead(status).end('ignored'));
  const attempt = attemptWith();
  for (const code of [200, 201, 202, 204, 299, 400, 401, 404, 410, 429, 500, 502, 503, 599]) {
    status = code;
    const outcome = await attempt(delivery(`http://127.0.0.1:${receiver.port}/`));
    assert.deepEqual([outcome.status, outcome.error], [code, code < 300 ? null : 'http_status'], String(code));
  }
});

test('a redirect is not followed: a 3xx fails as redirect, with its status, and its Location gets nothing', async (t) => {
  const target = await startReceiver(t, (_request, response) => response.writeHead(204).end());
  let status = 301;
  const redirecting = await startReceiver(t, (_request, response) => response.writeHead(status, { location: `http://127.0.0.1:${target.port}/elsewhere` }).end());
  for (const code of [300, 301, 302, 303, 307, 308]) {
    status = code;
    const outcome = await attemptWith()(delivery(`http://127.0.0.1:${redirecting.port}/`));
    assert.deepEqual([outcome.status, outcome.error], [code, 'redirect'], String(code));
  }
  assert.equal(target.requests.length, 0);
});

test('a receiver that answers after the deadline fails as timeout, with no status, cut at the deadline', async (t) => {
  const receiver = await startReceiver(t, (_request, response) => setTimeout(() => response.writeHead(204).end(), 3000).unref());
  const outcome = await attemptWith({ deadlineMs: 300 })(delivery(`http://127.0.0.1:${receiver.port}/`));
  assert.equal(outcome.status, null);
  assert.equal(outcome.error, 'timeout');
  assert.ok(outcome.durationMs >= 290 && outcome.durationMs < 2500, `${outcome.durationMs} ms`);
});

test('a receiver that never answers fails as timeout, and its connection is closed', async (t) => {
  const receiver = await startReceiver(t, () => {});
  const outcome = await attemptWith({ deadlineMs: 300 })(delivery(`http://127.0.0.1:${receiver.port}/`));
  assert.deepEqual([outcome.status, outcome.error], [null, 'timeout']);
  assert.equal(receiver.requests.length, 1, 'the request had arrived');
  while (receiver.connections.closed < receiver.connections.opened) await new Promise((resolve) => setTimeout(resolve, 10));
});

test('a peer that accepts the connection and never speaks HTTP fails as timeout', async (t) => {
  const silent = createServer(() => {}).listen(0, '127.0.0.1');
  await once(silent, 'listening');
  t.after(() => silent.close());
  const outcome = await attemptWith({ deadlineMs: 300 })(delivery(`http://127.0.0.1:${(silent.address() as AddressInfo).port}/`));
  assert.deepEqual([outcome.status, outcome.error], [null, 'timeout']);
});

test('a 2xx whose body never ends is a success: the status came in time; the body is cut at the deadline', async (t) => {
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/plain' });
    response.write('partial');
  });
  const outcome = await attemptWith({ deadlineMs: 300 })(delivery(`http://127.0.0.1:${receiver.port}/`));
  assert.deepEqual([outcome.status, outcome.error], [200, null]);
  assert.ok(outcome.durationMs >= 290, 'it read until the deadline');
});

test('a huge answer is read up to 64 KiB and thrown away, then the connection is dropped', async (t) => {
  let written = 0;
  let closed = false;
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(200);
    response.on('close', () => (closed = true));
    const chunk = Buffer.alloc(16 * 1024, 'x');
    const pump = () => {
      while (!closed && written < 256 * 1024 * 1024 && response.write(chunk)) written += chunk.length;
      if (!closed) response.once('drain', pump);
    };
    pump();
  });
  assert.equal(MAX_RESPONSE_BYTES, 64 * 1024);
  const outcome = await attemptWith()(delivery(`http://127.0.0.1:${receiver.port}/`));
  assert.deepEqual([outcome.status, outcome.error], [200, null]);
  assert.ok(outcome.durationMs < 5000, `${outcome.durationMs} ms: it stopped reading, it did not wait for the end`);
  while (!closed) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(written < 64 * 1024 * 1024, `the receiver could write only ${written} bytes before the connection was dropped`);
});

test('a connection refused fails as connection_failed, and a name that does not resolve too', async () => {
  const closed = createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = (closed.address() as AddressInfo).port;
  closed.close();
  await once(closed, 'close');
  const refused = await attemptWith()(delivery(`http://127.0.0.1:${port}/`));
  assert.deepEqual([refused.status, refused.error, refused.detail], [null, 'connection_failed', 'ECONNREFUSED']);
  const unknown = await attemptWith()(delivery('https://nowhere.test/'));
  assert.deepEqual([unknown.status, unknown.error, unknown.detail], [null, 'connection_failed', 'ENOTFOUND']);
});

test('an address the policy refuses now is address_refused at delivery, without a connection', async (t) => {
  const receiver = await startReceiver(t, (_request, response) => response.writeHead(204).end());
  const attempt = attemptWith({ policy: createAddressPolicy([]) });
  const literal = await attempt(delivery(`https://127.0.0.1:${receiver.port}/`));
  assert.deepEqual([literal.status, literal.error], [null, 'address_refused']);
  assert.match(literal.detail!, /127\.0\.0\.1 is loopback/);
  const named = await attemptWith({ policy: createAddressPolicy([]) })(delivery(`https://receiver.test:${receiver.port}/`));
  assert.deepEqual([named.status, named.error], [null, 'address_refused']);
  assert.match(named.detail!, /"receiver\.test" resolves to 127\.0\.0\.1, which is loopback/);
  const plain = await attemptWith({ policy: createAddressPolicy(['127.0.0.2']) })(delivery(`http://127.0.0.1:${receiver.port}/`));
  assert.deepEqual([plain.status, plain.error], [null, 'address_refused']);
  assert.equal(receiver.connections.opened, 0);
});

test('every attempt has a connection of its own, closed at its end: nothing is pooled', async (t) => {
  const receiver = await startReceiver(t, (_request, response) => response.writeHead(204).end());
  const attempt = attemptWith();
  for (let i = 0; i < 3; i++) assert.equal((await attempt(delivery(`http://receiver.test:${receiver.port}/`))).error, null);
  assert.equal(receiver.connections.opened, 3);
  assert.ok(receiver.requests.every((request) => request.headers.connection === 'close'));
  while (receiver.connections.closed < 3) await new Promise((resolve) => setTimeout(resolve, 10));
});

test('DNS rebinding: a name that resolved to an allowed address at creation and resolves to a refused one at delivery is refused, and nothing is sent', async (t) => {
  if (!(await needsLoopbackRange(t))) return;
  const allowed = await startReceiver(t, (_request, response) => response.writeHead(204).end(), { host: '127.0.0.2' });
  const other = await startReceiver(t, (_request, response) => response.writeHead(204).end(), { host: '127.0.0.3', port: allowed.port });
  const policy = createAddressPolicy(['127.0.0.2']);
  const url = `http://rebind.test:${allowed.port}/`;
  assert.ok((await vetWebhookUrl(url, policy, resolverOf({ 'rebind.test': ['127.0.0.2'] }), new AbortController().signal)).ok, 'accepted at creation');
  const rebound = await createAttempt({ policy, resolve: resolverOf({ 'rebind.test': ['127.0.0.3'] }), clock: Date.now })(delivery(url));
  assert.deepEqual([rebound.status, rebound.error], [null, 'address_refused']);
  assert.match(rebound.detail!, /resolves to 127\.0\.0\.3/);
  const mixed = await createAttempt({ policy, resolve: resolverOf({ 'rebind.test': ['127.0.0.2', '127.0.0.3'] }), clock: Date.now })(delivery(url));
  assert.deepEqual([mixed.status, mixed.error], [null, 'address_refused'], 'one refused address refuses the name');
  assert.equal(allowed.requests.length + other.requests.length, 0);
  assert.equal(allowed.connections.opened + other.connections.opened, 0);
});

test('DNS rebinding between check and connect: the name is looked up once, and the request goes to the address that was checked', async (t) => {
  if (!(await needsLoopbackRange(t))) return;
  const allowed = await startReceiver(t, (_request, response) => response.writeHead(204).end(), { host: '127.0.0.2' });
  const other = await startReceiver(t, (_request, response) => response.writeHead(204).end(), { host: '127.0.0.3', port: allowed.port });
  // The first answer is allowed, every later one is not: a client that looked the name up again
  // to connect (as http.request would by itself) would reach 127.0.0.3.
  const calls: string[] = [];
  const rebinding: Resolver = async (hostname) => {
    calls.push(hostname);
    return [{ address: calls.length === 1 ? '127.0.0.2' : '127.0.0.3', family: 4 }];
  };
  const policy = createAddressPolicy(['127.0.0.2']);
  for (const scheme of ['http']) {
    const outcome = await createAttempt({ policy, resolve: rebinding, clock: Date.now })(delivery(`${scheme}://rebind.test:${allowed.port}/`));
    assert.deepEqual([outcome.status, outcome.error], [204, null]);
  }
  assert.deepEqual(calls, ['rebind.test'], 'one lookup');
  assert.equal(allowed.requests.length, 1);
  assert.equal(allowed.requests[0]!.address, '127.0.0.2');
  assert.equal(allowed.requests[0]!.headers.host, `rebind.test:${allowed.port}`);
  assert.equal(other.requests.length, 0);
  assert.equal(other.connections.opened, 0);
});

test('https: the certificate is checked for the URL\'s host name, which goes in SNI and Host, against the authority the test trusts', async (t) => {
  if (opensslSkip !== undefined) return t.skip(opensslSkip);
  const { ca, leaves } = makeCertificates(t, ['receiver.test', 'other.test']);
  const receiver = await startReceiver(t, (_request, response) => response.writeHead(200).end(), { tls: leaves['receiver.test']! });
  const resolve = resolverOf({ 'receiver.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] });
  const ok = await attemptWith({ resolve, ca })(delivery(`https://receiver.test:${receiver.port}/hooks`));
  assert.deepEqual([ok.status, ok.error], [200, null]);
  const received = receiver.requests[0]!;
  assert.equal(received.servername, 'receiver.test');
  assert.equal(received.headers.host, `receiver.test:${receiver.port}`);
  assert.ok(new StandardWebhook(secret).verify(received.body, received.headers as Record<string, string>));
  const failures = {
    'a certificate for another name': await attemptWith({ resolve, ca })(delivery(`https://other.test:${receiver.port}/`)),
    'an address, which the certificate does not name': await attemptWith({ resolve, ca })(delivery(`https://127.0.0.1:${receiver.port}/`)),
    'an authority Node does not trust': await attemptWith({ resolve })(delivery(`https://receiver.test:${receiver.port}/`)),
  };
  for (const [why, outcome] of Object.entries(failures)) assert.deepEqual([outcome.status, outcome.error], [null, 'connection_failed'], why);
  assert.equal(failures['a certificate for another name'].detail, 'ERR_TLS_CERT_ALTNAME_INVALID');
  assert.equal(receiver.requests.length, 1, 'nothing was sent over a connection whose certificate failed');
});

test('an attempt\'s deadline is the contract\'s 10 s, counted from its start', async (t) => {
  assert.equal(ATTEMPT_DEADLINE_MS, 10_000);
  const receiver = await startReceiver(t, () => {});
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  let settled = false;
  const attempt = attemptWith()(delivery(`http://127.0.0.1:${receiver.port}/`)).finally(() => (settled = true));
  await receiver.nextRequest();
  mock.timers.tick(ATTEMPT_DEADLINE_MS - 1);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, false, 'still waiting 1 ms before the deadline');
  mock.timers.tick(1);
  const outcome = await attempt;
  assert.deepEqual([outcome.status, outcome.error], [null, 'timeout']);
});
