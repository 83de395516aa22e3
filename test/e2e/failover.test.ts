/**
 * A failover, run for real: a primary and a streaming standby made as an operator makes one
 * (pg_basebackup -R), synchronous replication (synchronous_standby_names), two instances whose
 * DATABASE_URL lists both hosts with target_session_attrs=read-write (one the primary first, one
 * the standby first), creates running all along.
 * The primary is killed (SIGKILL, postmaster and all), the standby promoted (pg_ctl promote); the
 * instances serve again without a restart, and every create they acknowledged is on the new
 * primary; no pool of theirs ever opens a session on the standby while it is one. The figures are
 * printed as diagnostics; docs/postgresql.md quotes them.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { classifyError, connectPostgres, postgresPools, PROBE_APPLICATION_NAME } from '../../src/storage/postgres/database.ts';
import { watchAvailability } from '../../src/storage/postgres/availability.ts';
import { DatabaseUnavailableError } from '../../src/storage/errors.ts';
import { killAll, startInstance, type Instance } from '../support/instances.ts';
import { openTestDatabase, postgresSkip, startPostgres, startStandby, type PostgresCluster } from '../support/postgres.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** How long the load runs before the kill, without a primary, and after the first 201 that follows. */
const BEFORE_MS = 1_500;
const WITHOUT_PRIMARY_MS = 3_000;
const AFTER_MS = 1_500;
/** From the kill, how long the instances take to find that there is no primary (their 1 s bound, and some). */
const SETTLE_MS = 1_500;

interface Answer {
  status: number;
  /** The pet's id and name when it was created (201). */
  id: number | null;
  name: string;
  /** performance.now() when it was sent and answered. */
  sentAt: number;
  answeredAt: number;
}

describe('failover to a synchronous standby, with both hosts in DATABASE_URL', { skip: postgresSkip }, () => {
  let primary: PostgresCluster;
  let standby: PostgresCluster;
  let database: string;
  let key: string;
  const instances: Instance[] = [];
  /**
   * The sessions pools opened on the standby, told from the probe's by their application name;
   * `elsewhere` counts those of the tests that open pools on it on purpose.
   */
  const poolSessions = () => (standby.log().match(/connection authorized: .*application_name=pets$/gm) ?? []).length;
  const probeSessions = () => (standby.log().match(new RegExp(`connection authorized: .*application_name=${PROBE_APPLICATION_NAME}$`, 'gm')) ?? []).length;
  let elsewhere = 0;
  const counted = async <T>(work: () => Promise<T>): Promise<T> => {
    const before = poolSessions();
    try {
      return await work();
    } finally {
      elsewhere += poolSessions() - before;
    }
  };

  before(async () => {
    primary = await startPostgres();
    // Each connection logged: how many the instances open on the standby while it is one.
    standby = await startStandby(primary, 'standby1', { log_connections: 'on' });
    // After the base backup, as an operator would: the standby does not wait for a standby of its own once promoted.
    primary.psql(`ALTER SYSTEM SET synchronous_standby_names = 'standby1'`);
    primary.psql('SELECT pg_reload_conf()');
    for (let tries = 0; primary.psql(`SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'`).trim() !== 'sync'; tries++) {
      assert.ok(tries < 100, 'the standby is synchronous within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const direct = await primary.createDatabase();
    database = new URL(direct).pathname;
    const opened = await openTestDatabase({ after: () => {} }, primary, { url: direct, poolSize: 1 });
    key = (await createKeysStore(opened.sql, { appEnv: 'staging' }).create({ plan: 'enterprise', perMinute: 10_000_000, perDay: 100_000_000, now: Date.now() })).key;
    await opened.sql.end({ timeout: 1 });
    // The second instance lists the standby first: it too opens its pool on the primary alone.
    const hosts = [`127.0.0.1:${primary.port},127.0.0.1:${standby.port}`, `127.0.0.1:${standby.port},127.0.0.1:${primary.port}`];
    instances.push(...(await Promise.all(hosts.map((list) => startInstance({ DATABASE_URL: `postgres://tests@${list}${database}?target_session_attrs=read-write`, APP_ENV: 'staging' })))));
  });
  after(() => {
    killAll(instances);
    primary?.remove();
    standby?.remove();
  });

  test('the probe names the host that is the primary; a pool opened on one host of the list refuses it once it is a standby', async (t) => {
    const url = `postgres://tests@127.0.0.1:${standby.port},127.0.0.1:${primary.port}${database}?target_session_attrs=read-write`;
    const open = await postgresPools(url, { poolSize: 1 });
    assert.deepEqual(await open.probe!(), { host: '127.0.0.1', port: primary.port });
    const onPrimary = open({ host: '127.0.0.1', port: primary.port });
    const onStandby = open({ host: '127.0.0.1', port: standby.port });
    t.after(() => Promise.all([onPrimary.end({ timeout: 1 }), onStandby.end({ timeout: 1 })]));
    const [row] = await onPrimary<{ port: number }[]>`SELECT current_setting('port')::integer AS port`;
    assert.equal(row!.port, primary.port);
    await counted(async () => {
      await assert.rejects(onStandby`SELECT 1`, { code: 'CONNECTION_DESTROYED' });
      await assert.rejects(onStandby.begin(async () => {}), { code: 'CONNECTION_DESTROYED' });
    });
  });

  test('a pool on a host that has become a standby (a switchover): the next call is 503 and turns it down, and the probe brings it up on the primary', async (t) => {
    const url = `postgres://tests@127.0.0.1:${primary.port},127.0.0.1:${standby.port}${database}?target_session_attrs=read-write`;
    const open = await postgresPools(url, { poolSize: 2 });
    const changes: [boolean, string | null][] = [];
    const onStandby = { host: '127.0.0.1', port: standby.port };
    // As an instance whose primary was switched over while it was idle: its pool is on the old one.
    const availability = watchAvailability({ open, initial: open(onStandby), server: onStandby, probe: open.probe, changed: (up, reason) => changes.push([up, reason]) });
    t.after(() => availability.end({ timeout: 1 }));
    const port = () => availability.sql<{ port: number }[]>`SELECT current_setting('port')::integer AS port`;
    await counted(() => assert.rejects(port(), (error: unknown) => (error as { code?: string }).code === 'CONNECTION_DESTROYED' && classifyError(error) instanceof DatabaseUnavailableError));
    assert.equal(availability.isUp(), false);
    await assert.rejects(port(), (error: unknown) => error instanceof DatabaseUnavailableError && error.reason === 'CONNECTION_DESTROYED');
    const asked = performance.now();
    while (!availability.isUp()) {
      assert.ok(performance.now() - asked < 5_000, 'up again within 5 s');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.deepEqual((await port()).map((row) => row.port), [primary.port]);
    assert.deepEqual(changes, [[false, 'CONNECTION_DESTROYED'], [true, null]]);
  });

  test('a start whose hosts are all standbys is one line saying so, exit 1', async () => {
    const url = `postgres://tests:s3cret@127.0.0.1:1,127.0.0.1:${standby.port}${database}?target_session_attrs=read-write`;
    const child = spawn(process.execPath, ['src/main.ts'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: url }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    const pools = poolSessions();
    const probes = probeSessions();
    const [status] = await once(child, 'exit') as [number | null];
    assert.equal(status, 1);
    // The start asked the probe every 250 ms for its 5 s, and opened no pool: no pool took the list.
    assert.equal(poolSessions(), pools, 'no pool session on the standby');
    const asked = probeSessions() - probes;
    assert.ok(asked >= 10 && asked <= 21, `${asked} probe sessions on the standby, one every 250 ms at most`);
    assert.equal(stderr, `cannot use the PostgreSQL database of DATABASE_URL (postgres://tests@127.0.0.1:1,127.0.0.1:${standby.port}${database}?target_session_attrs=read-write): `
      + 'no host took a read-write session within 5 s (target_session_attrs): the primary is down, or every host that answers is a standby\n');
  });

  test('kill -9 of the primary, then pg_ctl promote: served again within seconds, without a restart; every acknowledged create is on the new primary', async (t) => {
    const answers: Answer[] = [];
    let running = true;
    let sent = 0;
    const create = async (client: number) => {
      const name = `failover ${client}-${sent++}`;
      const sentAt = performance.now();
      try {
        const response = await fetch(`${instances[client % 2]!.url}/v1/pets`, {
          method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ name, categoryId: 1 }),
        });
        const body = await response.text();
        answers.push({ status: response.status, id: response.status === 201 ? (JSON.parse(body) as { id: number }).id : null, name, sentAt, answeredAt: performance.now() });
      } catch {
        answers.push({ status: 0, id: null, name, sentAt, answeredAt: performance.now() });
      }
    };
    const load = Promise.all(Array.from({ length: 8 }, async (_, client) => {
      while (running) await create(client);
    }));

    await new Promise((resolve) => setTimeout(resolve, BEFORE_MS));
    const sessions = () => (standby.log().match(/connection authorized/g) ?? []).length;
    const sessionsAtKill = sessions();
    primary.kill();
    const killedAt = performance.now();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const sessionsSettled = sessions();
    await new Promise((resolve) => setTimeout(resolve, WITHOUT_PRIMARY_MS - SETTLE_MS));
    const sessionsFound = sessions() - sessionsAtKill;
    const sessionsSince = sessions() - sessionsSettled;
    const poolSessionsBeforePromotion = poolSessions() - elsewhere;
    const promoting = performance.now();
    standby.promote();
    const promotedAt = performance.now();
    let firstAfter: Answer | undefined;
    while (firstAfter === undefined) {
      assert.ok(performance.now() - promotedAt < 30_000, 'a create succeeds within 30 s of the promotion');
      await new Promise((resolve) => setTimeout(resolve, 10));
      firstAfter = answers.find((answer) => answer.status === 201 && answer.sentAt >= promotedAt);
    }
    await new Promise((resolve) => setTimeout(resolve, AFTER_MS));
    running = false;
    await load;

    const tally = (from: number, to: number) => answers.filter((a) => a.answeredAt >= from && a.answeredAt < to).reduce<Record<number, number>>((counts, a) => ({ ...counts, [a.status]: (counts[a.status] ?? 0) + 1 }), {});
    const window = answers.filter((a) => a.sentAt >= killedAt + 100 && a.answeredAt < promoting);
    const acknowledged = answers.filter((a) => a.status === 201);
    const sql = await connectPostgres(`postgres://tests@127.0.0.1:${standby.port}${database}`, { poolSize: 1 });
    t.after(() => sql.end({ timeout: 1 }));
    const stored = new Map((await sql<{ id: string; name: string }[]>`SELECT id::text, name FROM pets`).map((row) => [Number(row.id), row.name]));
    const missing = acknowledged.filter((a) => stored.get(a.id!) !== a.name);
    t.diagnostic(`before the kill: ${JSON.stringify(tally(0, killedAt))}; without a primary (${WITHOUT_PRIMARY_MS} ms): ${JSON.stringify(tally(killedAt, promoting))}, slowest ${Math.round(Math.max(...window.map((a) => a.answeredAt - a.sentAt)))} ms; pg_ctl promote took ${Math.round(promotedAt - promoting)} ms`);
    t.diagnostic(`first 201 ${Math.round(firstAfter.answeredAt - promotedAt)} ms after the promotion; after it: ${JSON.stringify(tally(promotedAt, Infinity))}; ${acknowledged.length} creates acknowledged, ${acknowledged.length - missing.length} of them on the new primary; ${sessionsFound} sessions opened on the standby while it was one, ${sessionsFound - sessionsSince} of them in the first ${SETTLE_MS} ms, then ${Math.round(sessionsSince / ((WITHOUT_PRIMARY_MS - SETTLE_MS) / 1000))} a second`);

    assert.deepEqual(missing.map((a) => a.name), [], 'every acknowledged create is on the new primary');
    // The pools are opened on the primary alone: none reaches the standby while it is one. Given
    // the list, the driver connected to the standby again at once (135 to 312 sessions a second),
    // and a pool closed while a transaction waited for a connection kept doing so (about 130).
    assert.equal(poolSessionsBeforePromotion, 0, 'no pool of the instances opened a session on the standby while it was one, from their start');
    // An instance that found no primary asks each host every 250 ms, on a connection of its own.
    assert.ok(sessionsSince / ((WITHOUT_PRIMARY_MS - SETTLE_MS) / 1000) < 40, `${sessionsSince} sessions on the standby in ${WITHOUT_PRIMARY_MS - SETTLE_MS} ms`);
    assert.ok(sessionsFound > 0 && standby.log().includes(`application_name=${PROBE_APPLICATION_NAME}`), 'the probe asked the standby');
    assert.ok(acknowledged.some((a) => a.answeredAt < killedAt), 'creates were acknowledged before the kill');
    assert.ok(firstAfter.answeredAt - promotedAt < 5_000, `served again ${Math.round(firstAfter.answeredAt - promotedAt)} ms after the promotion`);
    assert.ok(window.length > 0 && window.every((a) => a.status === 503), `without a primary every create is 503: ${JSON.stringify(tally(killedAt + 100, promoting))}`);
    assert.ok(window.every((a) => a.answeredAt - a.sentAt < 1_500), 'and answered within the 1 s an instance waits for PostgreSQL');
    assert.ok(!answers.some((a) => a.status === 500 || a.status === 0), `no 500 and no connection dropped: ${JSON.stringify(tally(0, Infinity))}`);
    for (const instance of instances) assert.equal(instance.child.exitCode, null, 'no instance stopped');
  });
});
