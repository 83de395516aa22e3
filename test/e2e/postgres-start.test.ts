/**
 * The process edge on PostgreSQL, run for real: the server and the keys command choose the engine
 * by DATABASE_URL, refuse a missing driver or a database they cannot use in one line (a wrong
 * password, an unknown database, a refused connection, a server that is not PostgreSQL), and the
 * keys command works the same on PostgreSQL as on SQLite.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { connectPostgres } from '../../src/storage/postgres/database.ts';
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { describeWithPostgres } from '../support/postgres.ts';
import { startInstance } from '../support/instances.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WITHOUT_DRIVER = fileURLToPath(new URL('../support/without-postgres-driver.ts', import.meta.url));

function run(script: string, args: string[], env: Record<string, string>, nodeOptions: string[] = []) {
  return spawnSync(process.execPath, [...nodeOptions, script, ...args], {
    cwd: ROOT, env: { PATH: process.env.PATH ?? '', PORT: '0', ...env }, encoding: 'utf8', timeout: 20_000,
  });
}

test('without the driver, the server and the keys command exit 1 with one line saying what to install', () => {
  for (const [script, args] of [['src/main.ts', []], ['src/cli/keys.ts', ['list']]] as const) {
    const result = run(script, [...args], { DATABASE_URL: 'postgres://pets@127.0.0.1:1/pets' }, ['--import', WITHOUT_DRIVER]);
    assert.equal(result.status, 1, result.stderr);
    const lines = result.stderr.trim().split('\n');
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, /"npm install --no-save --save-prod --omit=dev postgres@3"/);
  }
});

test('without the driver, a SQLite server starts as before: nothing loads it', () => {
  const result = run('src/main.ts', [], { DATABASE_PATH: ':memory:', PORT: 'x' }, ['--import', WITHOUT_DRIVER]);
  assert.match(result.stderr, /^PORT /, 'the config error comes first; the driver was never asked for');
});

test('DATABASE_URL with DATABASE_PATH stops the server and the keys command, naming both', () => {
  for (const [script, args] of [['src/main.ts', []], ['src/cli/keys.ts', ['list']]] as const) {
    const result = run(script, [...args], { DATABASE_URL: 'postgres://pets@127.0.0.1:1/pets', DATABASE_PATH: 'data/x.db' });
    assert.equal(result.status, 1);
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    assert.match(result.stderr, /DATABASE_URL.*DATABASE_PATH/);
  }
});

/** The server started on `url`: its exit code and its stderr, which must be one line. */
async function startFailure(url: string): Promise<{ status: number | null; line: string; stdout: string }> {
  const child = spawn(process.execPath, ['src/main.ts'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: url }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  const [status] = (await once(child, 'exit')) as [number | null];
  assert.equal(stderr.split('\n').length, 2, `one line: ${stderr}`);
  return { status, line: stderr.trim(), stdout };
}

/** What a server answers before any of it says what it found. */
const BEFORE = (url: string) => `cannot use the PostgreSQL database of DATABASE_URL (${url}): `;

test('a refused connection stops the server at start with one line naming DATABASE_URL without its password, exit 1', async () => {
  const { status, line } = await startFailure('postgres://pets:s3cret@127.0.0.1:1/pets');
  assert.equal(status, 1);
  assert.equal(line, `${BEFORE('postgres://pets@127.0.0.1:1/pets')}the connection was refused: nothing listens there (ECONNREFUSED)`);
});

test('a list of hosts that all refuse stops the server and the keys command with one line saying so, exit 1', async () => {
  const url = 'postgres://pets:s3cret@127.0.0.1:1,127.0.0.1:2/pets?target_session_attrs=read-write';
  const line = `${BEFORE('postgres://pets@127.0.0.1:1,127.0.0.1:2/pets?target_session_attrs=read-write')}every host refused the connection: nothing listens there (ECONNREFUSED)`;
  // Both at once: each waits its 5 s for a host to answer.
  const server = startFailure(url);
  // The command waited for ever on such a list, the driver trying the hosts in turn.
  const keys = run('src/cli/keys.ts', ['list'], { DATABASE_URL: url, APP_ENV: 'staging' });
  assert.deepEqual([keys.status, keys.stderr], [1, `keys: ${line}\n`]);
  const { status, line: started } = await server;
  assert.deepEqual([status, started], [1, line]);
});

test('a server that is not PostgreSQL stops the start with one line saying so, exit 1: an HTTP server, a listener that closes, one that says nothing', async (t) => {
  const http = createHttpServer((_request, response) => response.end('hello'));
  const closing = createServer((socket) => socket.destroy());
  const silent = createServer(() => {});
  const ports = await Promise.all([http, closing, silent].map(async (server) => {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => {
      server.close();
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    });
    return (server.address() as AddressInfo).port;
  }));
  const urls = ports.map((port) => `postgres://pets:s3cret@127.0.0.1:${port}/pets`);
  const [byHttp, byClosing, bySilent] = (await Promise.all(urls.map(startFailure))) as [Awaited<ReturnType<typeof startFailure>>, Awaited<ReturnType<typeof startFailure>>, Awaited<ReturnType<typeof startFailure>>];
  const shown = (port: number) => `postgres://pets@127.0.0.1:${port}/pets`;
  assert.deepEqual([byHttp.status, byClosing.status, bySilent.status], [1, 1, 1]);
  assert.equal(byHttp.line, `${BEFORE(shown(ports[0]!))}127.0.0.1:${ports[0]} answers, but not in PostgreSQL's protocol: it is not PostgreSQL`);
  assert.equal(byClosing.line, `${BEFORE(shown(ports[1]!))}127.0.0.1:${ports[1]} closes every connection before answering as PostgreSQL would: it is not PostgreSQL`);
  assert.equal(bySilent.line, `${BEFORE(shown(ports[2]!))}the server did not answer as PostgreSQL in time (CONNECT_TIMEOUT)`);
});

describeWithPostgres('a PostgreSQL that refuses the service at start', (cluster) => {
  test('a wrong password: one line with the SQLSTATE, not PostgreSQL\'s message, exit 1; the right one starts and says which database', async () => {
    cluster().createRoleWithPassword('pets_login', 'right');
    const wrong = `postgres://pets_login:wrong@127.0.0.1:${cluster().port}/postgres`;
    // In a list of hosts too, where the probe, not a pool, met the refusal (after its 5 s).
    const list = `postgres://pets_login:wrong@127.0.0.1:1,127.0.0.1:${cluster().port}/postgres?target_session_attrs=read-write`;
    const [{ status, line }, inList] = await Promise.all([startFailure(wrong), startFailure(list)]);
    assert.equal(status, 1);
    const refused = 'PostgreSQL refused the password (SQLSTATE 28P01, class invalid_authorization_specification)';
    assert.equal(line, `${BEFORE(`postgres://pets_login@127.0.0.1:${cluster().port}/postgres`)}${refused}`);
    assert.deepEqual([inList.status, inList.line], [1, `${BEFORE(`postgres://pets_login@127.0.0.1:1,127.0.0.1:${cluster().port}/postgres?target_session_attrs=read-write`)}${refused}`]);
    const database = new URL(await cluster().createDatabase()).pathname;
    // Its owner may create the schema in it (public belongs to the database's owner).
    cluster().psql(`ALTER DATABASE ${database.slice(1)} OWNER TO pets_login`);
    const instance = await startInstance({ DATABASE_URL: `postgres://pets_login:right@127.0.0.1:${cluster().port}${database}` });
    try {
      const listening = JSON.parse(instance.stdout.find((text) => text.includes('"event":"listening"'))!) as Record<string, unknown>;
      assert.equal(listening.database, 'postgres');
      assert.equal(listening.databaseUrl, `postgres://pets_login@127.0.0.1:${cluster().port}${database}`, 'the URL without its password');
    } finally {
      assert.equal(await instance.stop(), 0);
    }
  });

  test('an unknown database: one line with the SQLSTATE, exit 1', async () => {
    const url = `postgres://tests:s3cret@127.0.0.1:${cluster().port}/no_such_database`;
    const { status, line } = await startFailure(url);
    assert.equal(status, 1);
    assert.equal(line, `${BEFORE(`postgres://tests@127.0.0.1:${cluster().port}/no_such_database`)}the database does not exist (SQLSTATE 3D000, class invalid_catalog_name)`);
  });

  test('a role that may not create the schema: one line with the SQLSTATE, exit 1', async () => {
    cluster().psql('CREATE ROLE pets_reader LOGIN');
    const database = new URL(await cluster().createDatabase()).pathname;
    cluster().psql('REVOKE CREATE ON SCHEMA public FROM PUBLIC', database.slice(1));
    const url = `postgres://pets_reader@127.0.0.1:${cluster().port}${database}`;
    const { status, line } = await startFailure(url);
    assert.equal(status, 1);
    assert.match(line, /: the role lacks a privilege the service needs to create and update its schema \(SQLSTATE 42501, class syntax_error_or_access_rule_violation\)$/);
  });
});

describeWithPostgres('the keys command on DATABASE_URL', (cluster) => {

  test('creates, lists, changes the scopes of, rotates and revokes keys with the same output and exit codes', async (t) => {
    const url = await cluster().createDatabase();
    const env = { DATABASE_URL: url, APP_ENV: 'staging' };
    const keys = (...args: string[]) => run('src/cli/keys.ts', args, env);

    // A database no server has started on yet has no schema: refused unless told to create it.
    const refused = keys('list');
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /^keys: the PostgreSQL database of DATABASE_URL has no schema yet[^\n]*--create-database[^\n]*\n$/);
    const created = keys('create', '--plan', 'enterprise', '--per-minute', '5', '--per-day', '9', '--scopes', 'pets:read', '--label', 'pg', '--json', '--create-database');
    assert.equal(created.status, 0, created.stderr);
    const issued = JSON.parse(created.stdout);
    assert.deepEqual([issued.plan, issued.perMinute, issued.perDay, issued.label], ['enterprise', 5, 9, 'pg']);
    assert.match(issued.key, /^pk_test_/);

    const listed = keys('list', '--json');
    assert.equal(listed.status, 0, listed.stderr);
    const [record, ...others] = JSON.parse(listed.stdout);
    assert.equal(others.length, 0);
    assert.deepEqual(record, { ...record, id: issued.id, revokedAt: null, expiresAt: null });
    assert.match(keys('list').stdout, new RegExp(`${issued.id}\\s+${issued.account}\\s+\\S+\\s+enterprise\\s+5\\s+9\\s+active`));
    assert.equal(keys('list', '--scope', 'orders:manage').stdout, 'No API key holds orders:manage.\n');
    const widened = keys('scopes', issued.id, 'orders:manage,pets:read');
    assert.deepEqual([widened.status, widened.stdout], [0, `${issued.id} now has the scopes pets:read,orders:manage\n`]);
    assert.deepEqual((JSON.parse(keys('list', '--scope', 'orders:manage', '--json').stdout) as { id: string }[]).map((each) => each.id), [issued.id]);

    const rotated = keys('rotate', issued.id, '--grace', '60');
    assert.equal(rotated.status, 0, rotated.stderr);
    const replacement = rotated.stdout.trim();

    const revoked = keys('revoke', issued.id);
    assert.deepEqual([revoked.status, revoked.stdout], [0, `Revoked ${issued.id}\n`]);
    const again = keys('revoke', issued.id);
    assert.equal(again.status, 0);
    assert.match(again.stdout, /already revoked/);

    const sql = await connectPostgres(url, { poolSize: 1 });
    t.after(() => sql.end());
    const store = createKeysStore(sql, { appEnv: 'staging' });
    assert.equal(await store.findByKey(issued.key, Date.now()), null, 'the server sees the revocation');
    assert.ok(await store.findByKey(replacement, Date.now()));

    const failures = [
      [['revoke', 'key_0123456789abcdef'], 1], [['rotate', issued.id], 1], [['scopes', 'key_0123456789abcdef', 'pets:read'], 1],
      [['create', '--plan', 'gold', '--scopes', 'pets:read'], 2], [['create', '--plan', 'free'], 2], [['scopes', issued.id, 'pets:admin'], 2],
    ] as const;
    for (const [args, status] of failures) {
      const result = keys(...args);
      assert.equal(result.status, status, args.join(' '));
      assert.match(result.stderr, /^keys: [^\n]+\n$/);
    }
  });

  test('an unreachable database is one line on stderr, exit 1', () => {
    const result = run('src/cli/keys.ts', ['list'], { DATABASE_URL: 'postgres://tests@127.0.0.1:1/none' });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /^keys: [^\n]*ECONNREFUSED[^\n]*\n$/);
  });
});
