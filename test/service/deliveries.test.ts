/**
 * The delivery worker end to end, on SQLite (in memory, and a file written by the writer thread)
 * and on PostgreSQL: a real server, a webhook made through the store, a pet created over HTTP,
 * and a real receiver (node:http or node:https with an openssl certificate) that gets the POST.
 * What arrives is verified as receivers verify it (the Standard Webhooks library and Svix's),
 * and each refuses it once its body or timestamp is changed. Time is the test's clock, set to the
 * real time (the libraries check the timestamp against it) and moved for retries and disabling;
 * the worker's timer is set far off, and each case makes it claim (`tick`) when it wants.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import type { Resolver } from '../../src/http/outbound-resolution.ts';
import { startDeliveryWorker, type DeliveryWorker, type DeliveryWorkerDeps } from '../../src/service/deliveries.ts';
import { EVENT_TYPES } from '../../src/storage/events.ts';
import type { Stores } from '../../src/storage/stores.ts';
import { MAX_WEBHOOKS_PER_ACCOUNT, type CreatedWebhook, type WebhookCreation } from '../../src/storage/webhooks.ts';
import type { DeliveryError } from '../../src/webhooks/terms.ts';
import { DISABLE_AFTER_MS } from '../../src/webhooks/retries.ts';
import { generateSecret } from '../../src/webhooks/signature.ts';
import { describeWithPostgres, openTestDatabase, type PostgresCluster } from '../support/postgres.ts';
import { fakeClock, json, startPostgresTestServer, startTestServer, startWriterTestServer, type FakeClock } from '../support/test-server.ts';
import { makeCertificates, opensslSkip, startReceiver, type Answer, type Received } from '../support/webhook-receivers.ts';

const DAY = 24 * 3_600_000;

/** What a case needs of a server, whichever the engine. */
interface Served {
  url: string;
  clock: FakeClock;
  keyId: string;
  stores: Stores;
  request(path: string, init?: RequestInit): Promise<Response>;
  post(path: string, body: unknown): Promise<Response>;
}

type Start = (t: TestContext, clock: FakeClock) => Promise<Served>;

/** A resolver of fixed answers, which a case may change; any other name does not exist. */
function resolverOf(answers: Record<string, string[]>): Resolver & { answers: Record<string, string[]> } {
  const resolve = async (hostname: string) => {
    const addresses = answers[hostname];
    if (addresses === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? (6 as const) : (4 as const) }));
  };
  return Object.assign(resolve, { answers });
}

/** A metrics observer that remembers what it was told. */
function observed() {
  const attempts: (DeliveryError | 'success')[] = [];
  return { attempts, pending: [] as number[], webhookAttempted: (error: DeliveryError | null) => attempts.push(error ?? 'success'), webhookDeliveriesPending(n: number) { this.pending.push(n); } };
}

interface Harness extends Served {
  account: string;
  worker: DeliveryWorker;
  observer: ReturnType<typeof observed>;
  logs: Record<string, unknown>[];
  /** A webhook of the server's key's account. */
  webhook(url: string, extra?: Partial<WebhookCreation>): Promise<CreatedWebhook>;
  /** Creates a pet over HTTP; resolves with its id. */
  createPet(name?: string): Promise<number>;
  /** Claims what is due now and waits until every attempt started is recorded. */
  deliver(): Promise<void>;
}

async function harness(t: TestContext, start: Start, deps: Partial<DeliveryWorkerDeps> = {}): Promise<Harness> {
  const clock = fakeClock(Date.now());
  // Stopped before the server and its database close (hooks run in the order they were added).
  let worker: DeliveryWorker | undefined;
  t.after(() => worker?.stop());
  const served = await start(t, clock);
  const { account } = (await served.stores.keys.get(served.keyId))!;
  const observer = observed();
  const logs: Record<string, unknown>[] = [];
  worker = startDeliveryWorker({
    store: served.stores.webhooks, clock, allowedNetworks: ['127.0.0.0/8'], schedule: [1, 1],
    resolve: resolverOf({}), intervalMs: 3_600_000, observer: () => observer,
    log: (fields) => logs.push(fields), failed: (event, error) => assert.fail(`${event}: ${String(error)}`),
    crashed: (event, error) => assert.fail(`${event}: ${String(error)}`),
    ...deps,
  });
  return {
    ...served, account, worker, observer, logs,
    async webhook(url, extra = {}) {
      const made = await served.stores.webhooks.create({
        account, url, types: EVENT_TYPES, orders: 'own', secret: generateSecret(), now: clock(), maxPerAccount: MAX_WEBHOOKS_PER_ACCOUNT, ...extra,
      });
      assert.ok('kind' in made && made.kind === 'created');
      return made;
    },
    async createPet(name = 'Rex') {
      const response = await served.post('/v1/pets', { name, categoryId: 1, status: 'available' });
      assert.equal(response.status, 201);
      return (await json(response)).id as number;
    },
    async deliver() {
      await worker.tick();
      await worker.idle();
    },
  };
}

async function until(ready: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!ready()) {
    assert.ok(Date.now() < deadline, 'not within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const answering = (status: number, headers: Record<string, string> = {}): Answer => (_request, response) => {
  response.writeHead(status, headers);
  response.end();
};

function verifiers(secret: string) {
  const standard = new StandardWebhook(secret);
  const svix = new SvixWebhook(secret);
  return (received: Received) => {
    const headers = received.headers as Record<string, string>;
    standard.verify(received.body, headers);
    svix.verify(received.body, headers);
    // Refused once changed: the body, or the timestamp (signed too).
    const tampered = received.body.replace('"Rex"', '"Tex"');
    assert.throws(() => standard.verify(tampered, headers));
    assert.throws(() => svix.verify(tampered, headers));
    const later = { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 1) };
    assert.throws(() => standard.verify(received.body, later));
    assert.throws(() => svix.verify(received.body, later));
  };
}

function deliveryCases(start: Start): void {
  test('a pet created is POSTed to the webhook with the Standard Webhooks headers, its body the event as the feed shows it; both libraries verify it, and refuse it changed', async (t) => {
    const h = await harness(t, start, { pendingIntervalMs: 10 });
    const receiver = await startReceiver(t, answering(204));
    const { webhook, secret } = await h.webhook(`http://127.0.0.1:${receiver.port}/hooks/pets?x=1`);
    const petId = await h.createPet();
    assert.equal(await h.stores.webhooks.pending(), 1, 'stored with its event');
    await until(() => h.observer.pending.at(-1) === 1);
    await h.deliver();
    await until(() => h.observer.pending.at(-1) === 0);
    assert.equal(receiver.requests.length, 1);
    const [received] = receiver.requests;
    assert.equal(received!.method, 'POST');
    assert.equal(received!.target, '/hooks/pets?x=1');
    assert.equal(received!.headers['content-type'], 'application/json');
    const feed = await json(await h.request('/v1/events'));
    const event = feed.find((e: { type: string }) => e.type === 'pet.created');
    assert.equal(received!.headers['webhook-id'], String(event.id));
    assert.equal(received!.headers['webhook-timestamp'], String(Math.floor(h.clock.now / 1000)));
    assert.deepEqual(JSON.parse(received!.body), event, 'the event as the feed shows it to a key of the account');
    assert.equal(JSON.parse(received!.body).data.id, petId);
    verifiers(secret)(received!);
    assert.equal(await h.stores.webhooks.pending(), 0);
    const log = await h.stores.webhooks.attempts(h.account, webhook.id);
    assert.deepEqual(log!.map(({ durationMs: _d, ...rest }) => rest), [{ eventId: event.id, attempt: 1, attemptedAt: h.clock.now, status: 204, error: null }]);
    assert.deepEqual(h.observer.attempts, ['success']);
  });

  test('an https receiver with its openssl certificate, reached by its name: the delivery is made over TLS to the checked address', { skip: opensslSkip }, async (t) => {
    const certificates = makeCertificates(t, ['hooks.test']);
    const resolver = resolverOf({ 'hooks.test': ['127.0.0.1'] });
    const h = await harness(t, start, { resolve: resolver, ca: certificates.ca });
    const receiver = await startReceiver(t, answering(200), { tls: certificates.leaves['hooks.test']! });
    const { secret } = await h.webhook(`https://hooks.test:${receiver.port}/in`);
    await h.createPet();
    await h.deliver();
    assert.equal(receiver.requests.length, 1);
    assert.equal(receiver.requests[0]!.servername, 'hooks.test');
    verifiers(secret)(receiver.requests[0]!);
    assert.deepEqual(h.observer.attempts, ['success']);
  });

  test('a failure is retried after each wait of the schedule, as the next attempt; after the last the delivery is abandoned; the log says each', async (t) => {
    const h = await harness(t, start, { schedule: [1, 3] });
    const statuses = [503, 500, 404];
    const receiver = await startReceiver(t, (_request, response) => answering(statuses.shift() ?? 204)(_request, response));
    const { webhook } = await h.webhook(`http://127.0.0.1:${receiver.port}/`);
    await h.createPet();
    await h.deliver();
    assert.equal(receiver.requests.length, 1);
    h.clock.advance(999);
    await h.deliver();
    assert.equal(receiver.requests.length, 1, 'not before its wait');
    h.clock.advance(1);
    await h.deliver();
    assert.equal(receiver.requests.length, 2);
    h.clock.advance(3_000);
    await h.deliver();
    assert.equal(receiver.requests.length, 3);
    assert.equal(new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size, 1, 'every attempt of one event has its id');
    assert.equal(await h.stores.webhooks.pending(), 0, 'abandoned after the last wait');
    h.clock.advance(DAY);
    await h.deliver();
    assert.equal(receiver.requests.length, 3);
    const log = (await h.stores.webhooks.attempts(h.account, webhook.id))!;
    assert.deepEqual(log.map((a) => [a.attempt, a.status, a.error]), [[3, 404, 'http_status'], [2, 500, 'http_status'], [1, 503, 'http_status']]);
    assert.deepEqual(h.observer.attempts, ['http_status', 'http_status', 'http_status']);
    assert.deepEqual(h.logs.map((line) => [line.event, line.attempt, line.abandoned]), [['webhook_attempt_failed', 1, false], ['webhook_attempt_failed', 2, false], ['webhook_attempt_failed', 3, true]]);
  });

  test('a 3xx is a failure, its status logged, and its Location is never followed', async (t) => {
    const h = await harness(t, start);
    const elsewhere = await startReceiver(t, answering(204));
    const receiver = await startReceiver(t, answering(307, { location: `http://127.0.0.1:${elsewhere.port}/` }));
    const { webhook } = await h.webhook(`http://127.0.0.1:${receiver.port}/`);
    await h.createPet();
    await h.deliver();
    assert.equal(receiver.requests.length, 1);
    assert.equal(elsewhere.requests.length, 0);
    assert.deepEqual((await h.stores.webhooks.attempts(h.account, webhook.id))!.map((a) => [a.status, a.error]), [[307, 'redirect']]);
    assert.equal(await h.stores.webhooks.pending(), 1, 'due again');
  });

  test('an answer after the deadline, or none ever, is a timeout with no status', async (t) => {
    const h = await harness(t, start, { deadlineMs: 300 });
    const slow = await startReceiver(t, (_request, response) => setTimeout(() => answering(200)(_request, response), 1_000).unref());
    const silent = await startReceiver(t, () => {});
    const one = await h.webhook(`http://127.0.0.1:${slow.port}/`);
    const two = await h.webhook(`http://127.0.0.1:${silent.port}/`);
    await h.createPet();
    await h.deliver();
    for (const { webhook } of [one, two]) {
      const [attempt] = (await h.stores.webhooks.attempts(h.account, webhook.id))!;
      assert.deepEqual([attempt!.status, attempt!.error], [null, 'timeout']);
      assert.ok(attempt!.durationMs >= 290 && attempt!.durationMs < 1_000, `${attempt!.durationMs} ms`);
    }
  });

  test('a host whose address changed to a refused one after the webhook was made is refused at delivery, and nothing is sent', async (t) => {
    const resolver = resolverOf({ 'hooks.test': ['127.0.0.1'] });
    const h = await harness(t, start, { resolve: resolver });
    const receiver = await startReceiver(t, answering(204));
    const { webhook } = await h.webhook(`http://hooks.test:${receiver.port}/`);
    resolver.answers['hooks.test'] = ['127.0.0.1', '10.0.0.7'];
    await h.createPet();
    await h.deliver();
    assert.equal(receiver.requests.length, 0);
    assert.deepEqual((await h.stores.webhooks.attempts(h.account, webhook.id))!.map((a) => [a.status, a.error]), [[null, 'address_refused']]);
    assert.match(String(h.logs[0]!.detail), /10\.0\.0\.7/);
  });

  test('an endpoint failing for 5 days is disabled: its deliveries stop; enabled again, it gets the events from then on', async (t) => {
    const h = await harness(t, start, { schedule: Array(10).fill(DAY / 1000) });
    let status = 500;
    const receiver = await startReceiver(t, (_request, response) => answering(status)(_request, response));
    const { webhook } = await h.webhook(`http://127.0.0.1:${receiver.port}/`);
    await h.createPet('Rex');
    for (let day = 0; day <= 5; day++) {
      await h.deliver();
      assert.equal(receiver.requests.length, day + 1);
      assert.equal((await h.stores.webhooks.get(h.account, webhook.id))!.status, day < 5 ? 'enabled' : 'disabled', `day ${day}`);
      h.clock.advance(DAY);
    }
    assert.equal(await h.stores.webhooks.pending(), 0);
    await h.createPet('Tom');
    await h.deliver();
    assert.equal(receiver.requests.length, 6, 'nothing while disabled');
    await h.stores.webhooks.change({ id: webhook.id, account: h.account, status: 'enabled', now: h.clock() });
    status = 204;
    await h.createPet('Ann');
    await h.deliver();
    assert.equal(receiver.requests.length, 7);
    assert.equal(JSON.parse(receiver.requests[6]!.body).data.name, 'Ann');
    assert.ok(DISABLE_AFTER_MS === 5 * DAY);
  });

  test('a receiver that answers after 9 s does not slow GET /v1/pets: its p99 with the slow attempts running is within 1.5x (+5 ms) of without', async (t) => {
    // Each answer after 9 s; all at once when the measures are done, so that the test ends then.
    const waiting = new Set<() => void>();
    const slow = await startReceiver(t, (request, response) => {
      const answer = () => {
        waiting.delete(answer);
        clearTimeout(timer);
        answering(200)(request, response);
      };
      const timer = setTimeout(answer, 9_000);
      waiting.add(answer);
    });
    const h = await harness(t, start);
    for (let i = 0; i < 4; i++) await h.webhook(`http://127.0.0.1:${slow.port}/${i}`);
    for (let i = 0; i < 24; i++) await h.createPet(`P${i}`);
    const p99 = async () => {
      const times: number[] = [];
      for (let i = 0; i < 200; i++) {
        const started = performance.now();
        const response = await h.request('/v1/pets?limit=20');
        await response.arrayBuffer();
        times.push(performance.now() - started);
      }
      return times.sort((a, b) => a - b)[Math.floor(times.length * 0.99)]!;
    };
    // Rounds of without, then with 16 attempts waiting on the slow receiver, each round's attempts
    // then answered; the best p99 of each kind is compared (other tests share the machine).
    await p99();
    const withouts: number[] = [];
    const withs: number[] = [];
    for (let round = 1; round <= 5; round++) {
      withouts.push(await p99());
      void h.worker.tick();
      await until(() => slow.requests.length === 16 * round);
      assert.equal(waiting.size, 16, 'every slot busy on the slow endpoints: 4 webhooks, 4 each');
      withs.push(await p99());
      for (const answer of [...waiting]) answer();
      await h.worker.idle();
    }
    const without = Math.min(...withouts);
    const withSlow = Math.min(...withs);
    t.diagnostic(`GET /v1/pets p99, best of 5 rounds: ${without.toFixed(2)} ms without, ${withSlow.toFixed(2)} ms with 16 attempts waiting on the slow receiver (${withouts.map((x) => x.toFixed(1))} | ${withs.map((x) => x.toFixed(1))})`);
    assert.ok(withSlow <= without * 1.5 + 5, `p99 ${withSlow.toFixed(2)} ms with the slow receiver, ${without.toFixed(2)} ms without`);
  });
}

const sqliteInMemory: Start = async (t, clock) => {
  const server = await startTestServer(t, { clock });
  return { ...server, stores: server.service.stores };
};

describe('deliveries on SQLite in memory', () => {
  deliveryCases(sqliteInMemory);
});

describe('deliveries on a SQLite file written by the writer thread', () => {
  deliveryCases(async (t, clock) => {
    const server = await startWriterTestServer(t, { clock });
    return { ...server, stores: server.service.stores };
  });
});

describeWithPostgres('deliveries on PostgreSQL', (cluster: () => PostgresCluster) => {
  deliveryCases(async (t, clock) => {
    const server = await startPostgresTestServer(t, (await openTestDatabase(t, cluster(), { poolSize: 4 })).sql, { clock });
    return { ...server, stores: server.service.stores };
  });
});

test('after a failed claim (the database down) the worker waits before claiming again, logging one failure per wait, and resumes once a claim works', async (t) => {
  const server = await startTestServer(t, { clock: fakeClock(Date.now()) });
  const store = server.service.stores.webhooks;
  let down = true;
  let claims = 0;
  const failures: string[] = [];
  const worker = startDeliveryWorker({
    store: { ...store, claimDue: (...args) => {
      claims++;
      if (down) throw Object.assign(new Error('the database is unavailable'), { name: 'DatabaseUnavailableError' });
      return store.claimDue(...args);
    } },
    clock: server.clock, allowedNetworks: ['127.0.0.0/8'], schedule: [1], intervalMs: 3_600_000,
    log: () => {}, failed: (event) => failures.push(event), crashed: (event) => assert.fail(event),
  });
  t.after(() => worker.stop());
  await worker.tick();
  await worker.tick();
  await worker.tick();
  assert.deepEqual([claims, failures], [1, ['webhook_claim_failed']], 'one claim, then a wait of 1 s');
  await new Promise((resolve) => setTimeout(resolve, 1_050));
  down = false;
  await worker.tick();
  await worker.tick();
  assert.deepEqual([claims, failures.length], [3, 1], 'claiming again after the wait, at every tick once it works');
});

test('an attempt that throws is reported as a crash of this code, not as a database failure, and its delivery stays claimed', async (t) => {
  const crashes: [string, unknown][] = [];
  const h = await harness(t, sqliteInMemory, {
    // The report of an attempt's outcome is the last step that can throw outside the database's calls.
    observer: () => ({ webhookAttempted: () => { throw new Error('the metrics broke'); }, webhookDeliveriesPending: () => {} }),
    crashed: (event, error) => crashes.push([event, error]),
  });
  const receiver = await startReceiver(t, answering(204));
  await h.webhook(`http://127.0.0.1:${receiver.port}/in`);
  await h.createPet();
  await h.deliver();
  await until(() => crashes.length > 0);
  assert.deepEqual(crashes.map(([event, error]) => [event, (error as Error).message]), [['webhook_attempt_crashed', 'the metrics broke']]);
  assert.equal(receiver.requests.length, 1, 'the attempt itself was made');
  assert.equal(await h.stores.webhooks.pending(), 1, 'not recorded: tried again once its lease ends');
});
