import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, configWarnings, loadConfig, unknownVariables } from '../src/config.ts';

/** Asserts that `env` is refused with a one-line ConfigError naming `variable`. */
function assertRefused(env: Record<string, string>, variable: string): void {
  assert.throws(
    () => loadConfig(env),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.variable, variable);
      assert.ok(error.message.startsWith(`${variable} `), error.message);
      assert.ok(!error.message.includes('\n'), 'the message is one line');
      return true;
    },
  );
}

test('an empty environment gives every default of the contract', () => {
  assert.deepEqual(loadConfig({}, { availableParallelism: () => 2, cpuQuota: () => null }), {
    port: 8080,
    host: '127.0.0.1',
    appEnv: 'development',
    databasePath: 'data/development.db',
    databasePathIsDefault: true,
    databaseUrl: null,
    databasePoolSize: 8,
    databasePooler: 'none',
    publicBaseUrl: null,
    stagingBaseUrl: null,
    trustProxy: false,
    rateLimitBanThreshold: 30,
    rateLimitBanSeconds: 900,
    maxConnectionsPerAddress: 64,
    logLevel: 'info',
    metricsPort: null,
    allowedHosts: null,
    corsAllowedOrigins: null,
    workers: 1,
    writer: 'thread',
    webhookAllowedNetworks: [],
    webhookRetrySchedule: [5, 300, 1800, 7200, 18000, 36000, 36000],
    orderHoldSeconds: 172800,
    maxOpenOrdersPerAccount: 3,
    eventsRetentionDays: 30,
  });
});

test('ALLOWED_HOSTS is comma-separated host names, lower-cased, without scheme, port or path', () => {
  assert.deepEqual(loadConfig({ ALLOWED_HOSTS: 'Pets.Example, api.pets.example.,pets.example' }).allowedHosts, ['pets.example', 'api.pets.example']);
  for (const value of ['https://pets.example', 'pets.example:443', 'pets.example/v1', '*.pets.example', 'pets.example,', ' ']) {
    assertRefused({ ALLOWED_HOSTS: value }, 'ALLOWED_HOSTS');
  }
});

test('an empty variable counts as unset', () => {
  assert.equal(loadConfig({ PORT: '', APP_ENV: '', TRUST_PROXY: '' }).port, 8080);
  assert.equal(loadConfig({ APP_ENV: '' }).appEnv, 'development');
});

test('PORT accepts 0 to 65535 in decimal digits, leading zeros included', () => {
  assert.equal(loadConfig({ PORT: '0' }).port, 0);
  assert.equal(loadConfig({ PORT: '3000' }).port, 3000);
  assert.equal(loadConfig({ PORT: '65535' }).port, 65535);
  assert.equal(loadConfig({ PORT: '080' }).port, 80);
});

test('PORT refuses anything but digits in range', () => {
  for (const value of ['abc', '65536', '-1', '+80', ' 80', '80 ', '1e3', '0x50', '8080.0', '99999999999999999999']) {
    assertRefused({ PORT: value }, 'PORT');
  }
});

test('PORT error message quotes the value', () => {
  assert.throws(() => loadConfig({ PORT: 'abc' }), { message: 'PORT must be an integer from 0 to 65535, got "abc"' });
});

test('a value with a newline still gives a one-line message', () => {
  assertRefused({ PORT: '80\n81' }, 'PORT');
});

test('METRICS_PORT: unset or empty is no metrics listener; a port is taken as PORT is', () => {
  assert.equal(loadConfig({}).metricsPort, null);
  assert.equal(loadConfig({ METRICS_PORT: '' }).metricsPort, null);
  assert.equal(loadConfig({ METRICS_PORT: '9464' }).metricsPort, 9464);
  assert.equal(loadConfig({ METRICS_PORT: '08080', PORT: '3000' }).metricsPort, 8080);
  // 0 is any free port, as for PORT, so two zeros cannot clash.
  assert.equal(loadConfig({ METRICS_PORT: '0', PORT: '0' }).metricsPort, 0);
});

test('METRICS_PORT refuses anything but digits in range, and the API\'s own port', () => {
  for (const value of ['abc', '65536', '-1', ' 9464', '9464.0']) assertRefused({ METRICS_PORT: value }, 'METRICS_PORT');
  assertRefused({ METRICS_PORT: '8080' }, 'METRICS_PORT');
  assertRefused({ METRICS_PORT: '3000', PORT: '3000' }, 'METRICS_PORT');
  assertRefused({ METRICS_PORT: '03000', PORT: '3000' }, 'METRICS_PORT');
});

test('HOST accepts IPv4, IPv6 and host names', () => {
  assert.equal(loadConfig({ HOST: '0.0.0.0' }).host, '0.0.0.0');
  assert.equal(loadConfig({ HOST: '::' }).host, '::');
  assert.equal(loadConfig({ HOST: '::1' }).host, '::1');
  assert.equal(loadConfig({ HOST: 'localhost' }).host, 'localhost');
  assert.equal(loadConfig({ HOST: 'api.internal-1.example' }).host, 'api.internal-1.example');
});

test('HOST refuses an address with a port, a URL or spaces', () => {
  for (const value of ['0.0.0.0:8080', 'http://localhost', 'local host', '-bad', 'a..b']) {
    assertRefused({ HOST: value }, 'HOST');
  }
});

test('APP_ENV accepts the three environments', () => {
  for (const value of ['production', 'staging', 'development'] as const) {
    assert.equal(loadConfig({ APP_ENV: value }).appEnv, value);
  }
});

test('APP_ENV refuses other names, case included', () => {
  for (const value of ['prod', 'Production', 'test', 'dev']) {
    assertRefused({ APP_ENV: value }, 'APP_ENV');
  }
});

test('DATABASE_PATH defaults to data/<APP_ENV>.db', () => {
  assert.equal(loadConfig({ APP_ENV: 'production' }).databasePath, 'data/production.db');
  assert.equal(loadConfig({ APP_ENV: 'staging' }).databasePath, 'data/staging.db');
});

test('DATABASE_PATH takes a file path or :memory:', () => {
  assert.equal(loadConfig({ DATABASE_PATH: '/var/lib/pets/pets.db' }).databasePath, '/var/lib/pets/pets.db');
  assert.equal(loadConfig({ DATABASE_PATH: ':memory:' }).databasePath, ':memory:');
});

test('an invalid APP_ENV is reported even when DATABASE_PATH is set', () => {
  assertRefused({ APP_ENV: 'qa', DATABASE_PATH: ':memory:' }, 'APP_ENV');
});

for (const name of ['PUBLIC_BASE_URL', 'STAGING_BASE_URL'] as const) {
  const field = name === 'PUBLIC_BASE_URL' ? 'publicBaseUrl' : 'stagingBaseUrl';

  test(`${name} accepts an absolute http(s) URL ending in /v1`, () => {
    assert.equal(loadConfig({ [name]: 'https://api.example.com/v1' })[field], 'https://api.example.com/v1');
    assert.equal(loadConfig({ [name]: 'http://localhost:8080/v1' })[field], 'http://localhost:8080/v1');
    assert.equal(loadConfig({ [name]: 'https://example.com/pets/v1' })[field], 'https://example.com/pets/v1');
  });

  test(`${name} is returned in canonical form`, () => {
    assert.equal(loadConfig({ [name]: 'HTTPS://API.Example.COM:443/v1' })[field], 'https://api.example.com/v1');
  });

  test(`${name} refuses relative, non-http, trailing-slash and decorated URLs`, () => {
    for (const value of [
      '/v1',
      'api.example.com/v1',
      'ftp://example.com/v1',
      'https://example.com/v1/',
      'https://example.com/v2',
      'https://example.com',
      'https://example.com/v1?x=1',
      'https://example.com/v1#top',
      'https://user:pw@example.com/v1',
    ]) {
      assertRefused({ [name]: value }, name);
    }
  });
}

test('TRUST_PROXY is true, false, or a list of the proxies\' addresses and CIDR ranges', () => {
  assert.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true);
  assert.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false);
  assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.5' }).trustProxy, ['10.0.0.5']);
  assert.deepEqual(loadConfig({ TRUST_PROXY: ' 10.0.0.5, 10.1.0.0/16,fd00::/8 ,::1,10.0.0.5' }).trustProxy, ['10.0.0.5', '10.1.0.0/16', 'fd00::/8', '::1']);
  assert.deepEqual(loadConfig({ TRUST_PROXY: '0.0.0.0/0' }).trustProxy, ['0.0.0.0/0']);
  for (const value of ['1', 'yes', 'TRUE', 'on', 'proxy.example', '10.0.0.5:80', '10.1.2.3/16', '10.0.0.0/33', 'fd00::/129', '10.0.0.0/', '10.0.0.0/x', '10.0.0.5,', 'true,10.0.0.5']) {
    assertRefused({ TRUST_PROXY: value }, 'TRUST_PROXY');
  }
  assertRefused({ TRUST_PROXY: Array.from({ length: 101 }, (_, i) => `10.0.0.${i}`).join(',') }, 'TRUST_PROXY');
});

test('TRUST_PROXY=true with a HOST other hosts can reach is a warning at start; a list, or loopback, is not', () => {
  const warned = (env: Record<string, string>) => configWarnings(loadConfig(env)).map((warning) => warning.event);
  assert.deepEqual(warned({ TRUST_PROXY: 'true', HOST: '0.0.0.0' }), ['trust_proxy_any_peer']);
  assert.deepEqual(warned({ TRUST_PROXY: 'true', HOST: '10.0.0.7' }), ['trust_proxy_any_peer']);
  assert.deepEqual(warned({ TRUST_PROXY: 'true', HOST: '::' }), ['trust_proxy_any_peer']);
  assert.deepEqual(warned({ TRUST_PROXY: 'true' }), []);
  assert.deepEqual(warned({ TRUST_PROXY: 'true', HOST: '::1' }), []);
  assert.deepEqual(warned({ TRUST_PROXY: 'true', HOST: 'localhost' }), []);
  assert.deepEqual(warned({ TRUST_PROXY: '10.0.0.5', HOST: '0.0.0.0' }), []);
  assert.deepEqual(warned({ HOST: '0.0.0.0' }), []);
});

test('a set variable that looks like one of the service\'s but is none it reads is a warning at start, naming the one probably meant', () => {
  const warnings = (env: Record<string, string>) => configWarnings(loadConfig({}), env);
  assert.deepEqual(warnings({ DATABASE_PATHS: 'data/x.db' }), [{ event: 'unknown_variable', message: 'DATABASE_PATHS is set, but the service reads no such variable and ignores it: did you mean DATABASE_PATH? (see docs/configuration.md)' }]);
  assert.deepEqual(unknownVariables({ WORKER: '2', PORTS: '80', RATE_LIMIT_BAN: '5', CORS_ORIGINS: '*', LOG_LEVELS: 'warn', APP_ENVIRONMENT: 'production', METRICS: '1' }), ['APP_ENVIRONMENT', 'CORS_ORIGINS', 'LOG_LEVELS', 'PORTS', 'RATE_LIMIT_BAN', 'WORKER']);
  // The service's own variables, empty ones, and the rest of an environment are not its business.
  assert.deepEqual(unknownVariables({ DATABASE_PATH: 'x', DATABASE_URL: '', DATABASE_HOST_OF_ANOTHER_APP: '', PATH: '/bin', HOSTNAME: 'box', NODE_ENV: 'production', NODE_COMPILE_CACHE: '/c', npm_config_cache: '/n' }), []);
  const known = ['PORT', 'HOST', 'APP_ENV', 'DATABASE_PATH', 'DATABASE_URL', 'DATABASE_POOL_SIZE', 'PUBLIC_BASE_URL', 'STAGING_BASE_URL', 'TRUST_PROXY', 'RATE_LIMIT_BAN_THRESHOLD', 'RATE_LIMIT_BAN_SECONDS', 'MAX_CONNECTIONS_PER_ADDRESS', 'LOG_LEVEL', 'METRICS_PORT', 'ALLOWED_HOSTS', 'CORS_ALLOWED_ORIGINS', 'WORKERS', 'WEBHOOK_ALLOWED_NETWORKS', 'WEBHOOK_RETRY_SCHEDULE', 'ORDER_HOLD_SECONDS', 'MAX_OPEN_ORDERS_PER_ACCOUNT'];
  assert.deepEqual(unknownVariables(Object.fromEntries(known.map((name) => [name, 'x']))), [], 'every variable the configuration reads is known');
});

test('RATE_LIMIT_BAN_THRESHOLD is an integer from 1 to 10000', () => {
  assert.equal(loadConfig({ RATE_LIMIT_BAN_THRESHOLD: '5' }).rateLimitBanThreshold, 5);
  assert.equal(loadConfig({ RATE_LIMIT_BAN_THRESHOLD: '1' }).rateLimitBanThreshold, 1);
  assert.equal(loadConfig({ RATE_LIMIT_BAN_THRESHOLD: '10000' }).rateLimitBanThreshold, 10000);
  for (const value of ['0', '-3', '2.5', 'ten', '10001']) {
    assertRefused({ RATE_LIMIT_BAN_THRESHOLD: value }, 'RATE_LIMIT_BAN_THRESHOLD');
  }
});

test('RATE_LIMIT_BAN_SECONDS is a positive integer no longer than the 24 h cap', () => {
  assert.equal(loadConfig({ RATE_LIMIT_BAN_SECONDS: '60' }).rateLimitBanSeconds, 60);
  assert.equal(loadConfig({ RATE_LIMIT_BAN_SECONDS: '86400' }).rateLimitBanSeconds, 86400);
  for (const value of ['0', '86401', '1.5', '15m']) {
    assertRefused({ RATE_LIMIT_BAN_SECONDS: value }, 'RATE_LIMIT_BAN_SECONDS');
  }
});

test('MAX_CONNECTIONS_PER_ADDRESS is an integer from 1 to the server\'s 1024 connections, default 64', () => {
  assert.equal(loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '32' }).maxConnectionsPerAddress, 32);
  assert.equal(loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '1' }).maxConnectionsPerAddress, 1);
  assert.equal(loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '1024' }).maxConnectionsPerAddress, 1024);
  for (const value of ['0', '1025', '-1', '6.4', 'many']) {
    assertRefused({ MAX_CONNECTIONS_PER_ADDRESS: value }, 'MAX_CONNECTIONS_PER_ADDRESS');
  }
});

test('ORDER_HOLD_SECONDS is an integer from 1 to 2592000 (30 days), default 172800 (48 h)', () => {
  assert.equal(loadConfig({}).orderHoldSeconds, 172_800);
  assert.equal(loadConfig({ ORDER_HOLD_SECONDS: '1' }).orderHoldSeconds, 1);
  assert.equal(loadConfig({ ORDER_HOLD_SECONDS: '2592000' }).orderHoldSeconds, 2_592_000);
  for (const value of ['0', '2592001', '-1', '1.5', '1e3', '48h', ' 60']) {
    assertRefused({ ORDER_HOLD_SECONDS: value }, 'ORDER_HOLD_SECONDS');
  }
  assert.throws(() => loadConfig({ ORDER_HOLD_SECONDS: '0' }), { message: 'ORDER_HOLD_SECONDS must be an integer from 1 to 2592000, got "0"' });
});

test('MAX_OPEN_ORDERS_PER_ACCOUNT is an integer from 1 to 1000, default 3', () => {
  assert.equal(loadConfig({}).maxOpenOrdersPerAccount, 3);
  assert.equal(loadConfig({ MAX_OPEN_ORDERS_PER_ACCOUNT: '1' }).maxOpenOrdersPerAccount, 1);
  assert.equal(loadConfig({ MAX_OPEN_ORDERS_PER_ACCOUNT: '1000' }).maxOpenOrdersPerAccount, 1000);
  for (const value of ['0', '1001', '-3', '2.0', 'three']) {
    assertRefused({ MAX_OPEN_ORDERS_PER_ACCOUNT: value }, 'MAX_OPEN_ORDERS_PER_ACCOUNT');
  }
});

test('EVENTS_RETENTION_DAYS is an integer from 1 to 3650, default 30', () => {
  assert.equal(loadConfig({}).eventsRetentionDays, 30);
  assert.equal(loadConfig({ EVENTS_RETENTION_DAYS: '1' }).eventsRetentionDays, 1);
  assert.equal(loadConfig({ EVENTS_RETENTION_DAYS: '3650' }).eventsRetentionDays, 3650);
  for (const value of ['0', '3651', '-1', '7.5', '30d']) {
    assertRefused({ EVENTS_RETENTION_DAYS: value }, 'EVENTS_RETENTION_DAYS');
  }
});

test('WORKERS is 1 by default, an integer from 1 to 256, or auto (the cores this process may use)', () => {
  const file = { DATABASE_PATH: 'data/x.db' };
  assert.equal(loadConfig({ ...file, WORKERS: '1' }).workers, 1);
  assert.equal(loadConfig({ ...file, WORKERS: '4' }).workers, 4);
  assert.equal(loadConfig({ ...file, WORKERS: '256' }).workers, 256);
  assert.equal(loadConfig({ ...file, WORKERS: 'auto' }, { availableParallelism: () => 6, cpuQuota: () => null }).workers, 6);
  assert.equal(loadConfig({ ...file, WORKERS: 'auto' }, { availableParallelism: () => 1, cpuQuota: () => null }).workers, 1);
  for (const value of ['0', '257', '-1', '2.5', 'all', 'AUTO', ' 2']) assertRefused({ ...file, WORKERS: value }, 'WORKERS');
});

test('WORKERS above 1 needs a SQLite file: refused with :memory: and with DATABASE_URL', () => {
  assertRefused({ DATABASE_PATH: ':memory:', WORKERS: '2' }, 'WORKERS');
  assertRefused({ DATABASE_URL: 'postgres://localhost/pets', WORKERS: '2' }, 'WORKERS');
  // One worker is the plain single process, which runs on either.
  assert.equal(loadConfig({ DATABASE_PATH: ':memory:', WORKERS: '1' }).workers, 1);
  assert.equal(loadConfig({ DATABASE_URL: 'postgres://localhost/pets', WORKERS: 'auto' }, { availableParallelism: () => 1, cpuQuota: () => null }).workers, 1);
});

test('WRITER=auto is inline where the process gets at most one core (cores or CPU quota), a thread otherwise', () => {
  const machine = (cores: number, quota: number | null) => ({ availableParallelism: () => cores, cpuQuota: () => quota });
  assert.equal(loadConfig({}, machine(1, null)).writer, 'inline');
  assert.equal(loadConfig({}, machine(2, null)).writer, 'thread');
  assert.equal(loadConfig({}, machine(8, 1)).writer, 'inline');
  assert.equal(loadConfig({}, machine(8, 1.5)).writer, 'inline');
  assert.equal(loadConfig({}, machine(8, 2)).writer, 'thread');
  assert.equal(loadConfig({}, machine(1, 4)).writer, 'inline');
  assert.equal(loadConfig({ WRITER: 'auto' }, machine(1, null)).writer, 'inline');
  // Set, it wins over the machine.
  assert.equal(loadConfig({ WRITER: 'thread' }, machine(1, 1)).writer, 'thread');
  assert.equal(loadConfig({ WRITER: 'inline' }, machine(8, null)).writer, 'inline');
  for (const value of ['Inline', 'threads', 'none']) assertRefused({ WRITER: value }, 'WRITER');
});

test('WORKERS above 1 share one writer thread: WRITER=inline is refused, auto is the thread', () => {
  const file = { DATABASE_PATH: 'data/x.db', WORKERS: '2' };
  assert.equal(loadConfig(file, { availableParallelism: () => 1, cpuQuota: () => 1 }).writer, 'thread');
  assert.equal(loadConfig({ ...file, WRITER: 'thread' }).writer, 'thread');
  assertRefused({ ...file, WRITER: 'inline' }, 'WRITER');
});

test('LOG_LEVEL is one of the five levels', () => {
  for (const value of ['debug', 'info', 'warn', 'error', 'silent'] as const) {
    assert.equal(loadConfig({ LOG_LEVEL: value }).logLevel, value);
  }
  for (const value of ['warning', 'INFO', 'trace']) assertRefused({ LOG_LEVEL: value }, 'LOG_LEVEL');
});

test('CORS_ALLOWED_ORIGINS refuses an origin longer than any DNS name allows (the document bounds the header by it)', () => {
  const longest = `https://${'a'.repeat(61)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}:65535`;
  assert.equal(longest.length, 8 + 253 + 6);
  assert.deepEqual(loadConfig({ CORS_ALLOWED_ORIGINS: longest }).corsAllowedOrigins, [longest]);
  assertRefused({ CORS_ALLOWED_ORIGINS: `https://${'a'.repeat(62)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}:65535` }, 'CORS_ALLOWED_ORIGINS');
});

test('CORS_ALLOWED_ORIGINS is unset (null), * or a list of exact origins', () => {
  assert.equal(loadConfig({}).corsAllowedOrigins, null);
  assert.equal(loadConfig({ CORS_ALLOWED_ORIGINS: '' }).corsAllowedOrigins, null);
  assert.equal(loadConfig({ CORS_ALLOWED_ORIGINS: '*' }).corsAllowedOrigins, '*');
  assert.deepEqual(loadConfig({ CORS_ALLOWED_ORIGINS: 'https://shop.example' }).corsAllowedOrigins, ['https://shop.example']);
  assert.deepEqual(
    loadConfig({ CORS_ALLOWED_ORIGINS: 'https://shop.example, http://localhost:3000,http://127.0.0.1:8081,http://[::1]:5173' }).corsAllowedOrigins,
    ['https://shop.example', 'http://localhost:3000', 'http://127.0.0.1:8081', 'http://[::1]:5173'],
  );
  assert.deepEqual(loadConfig({ CORS_ALLOWED_ORIGINS: 'https://a.example,https://a.example' }).corsAllowedOrigins, ['https://a.example']);
});

test('CORS_ALLOWED_ORIGINS refuses anything that is not an origin exactly as a browser sends it', () => {
  for (const value of [
    'shop.example', // no scheme
    'https://shop.example/', // a path, even /
    'https://shop.example/app',
    'HTTPS://shop.example', // browsers send the scheme and host in lower case
    'https://Shop.example',
    'https://shop.example:443', // and no default port
    'https://shop.example?x=1',
    'https://user@shop.example',
    'ftp://shop.example',
    'chrome-extension://abcdefghijklmnop',
    'null', // the origin of sandboxed and file: pages, which any page can claim
    '*, https://shop.example',
    'https://a.example,,https://b.example',
    'https://a.example,',
    '**',
  ]) {
    assertRefused({ CORS_ALLOWED_ORIGINS: value }, 'CORS_ALLOWED_ORIGINS');
  }
});

test('a CORS_ALLOWED_ORIGINS near miss is refused with the exact form to write', () => {
  assert.throws(() => loadConfig({ CORS_ALLOWED_ORIGINS: 'https://Shop.example/' }), {
    message: 'CORS_ALLOWED_ORIGINS must be * or comma-separated origins such as https://shop.example, got "https://Shop.example/" (write it as "https://shop.example")',
  });
});

test('variables outside the contract are ignored', () => {
  assert.deepEqual(loadConfig({ NODE_ENV: 'production', HOME: '/root' }), loadConfig({}));
});

test('DATABASE_URL selects PostgreSQL; it must be a postgres:// or postgresql:// URL with a host', () => {
  assert.equal(loadConfig({ DATABASE_URL: 'postgres://pets@db.internal:5432/pets' }).databaseUrl, 'postgres://pets@db.internal:5432/pets');
  assert.equal(loadConfig({ DATABASE_URL: 'postgresql://localhost/pets' }).databaseUrl, 'postgresql://localhost/pets');
  for (const value of ['mysql://localhost/pets', 'localhost:5432', 'postgres:///pets', 'data/pets.db']) {
    assertRefused({ DATABASE_URL: value }, 'DATABASE_URL');
  }
});

test('a refused DATABASE_URL is never echoed, since it may carry a password', () => {
  for (const value of ['http://user:s3cret@host/db', 'postgres://user:s3cret@h1,h2/db', 'postgres://user:s3cret@h1/db?target_session_attrs=s3cret']) {
    assert.throws(() => loadConfig({ DATABASE_URL: value }), (error: Error) => !error.message.includes('s3cret'));
  }
});

test('DATABASE_URL may list several hosts with target_session_attrs, as the driver reads them: the primary is the one used', () => {
  for (const value of [
    'postgres://pets:secret@db1.internal:5432,db2.internal:5433/pets?target_session_attrs=read-write',
    'postgresql://pets@10.0.0.1,10.0.0.2:6432/pets?target_session_attrs=primary&sslmode=require',
    'postgres://pets@db.internal/pets?target_session_attrs=read-write',
  ]) {
    assert.equal(loadConfig({ DATABASE_URL: value }).databaseUrl, value);
  }
  const refused: [string, RegExp][] = [
    // Without it the driver takes the first host that answers, a standby as well.
    ['postgres://pets@db1,db2/pets', /several hosts but no target_session_attrs/],
    ['postgres://pets@db1,db2/pets?target_session_attrs=read-only', /cannot write to/],
    ['postgres://pets@db1/pets?target_session_attrs=prefer-standby', /cannot write to/],
    ['postgres://pets@db1,,db2/pets?target_session_attrs=read-write', /several hosts/],
    ['postgres://pets@db1:99999,db2/pets?target_session_attrs=read-write', /several hosts/],
    ['postgres://pets@db1,[::1]:5432/pets?target_session_attrs=read-write', /no IPv6/],
    ['postgres://pets:p@ss@db1/pets', /%40/],
  ];
  for (const [value, reason] of refused) {
    assertRefused({ DATABASE_URL: value }, 'DATABASE_URL');
    assert.throws(() => loadConfig({ DATABASE_URL: value }), reason, value);
  }
});

test('DATABASE_POOLER says whether a pooler in transaction mode stands in front of PostgreSQL: none (the default) or transaction', () => {
  assert.equal(loadConfig({}).databasePooler, 'none');
  assert.equal(loadConfig({ DATABASE_URL: 'postgres://pets@pgbouncer:6432/pets', DATABASE_POOLER: 'transaction' }).databasePooler, 'transaction');
  for (const value of ['pgbouncer', 'session', 'Transaction', 'on']) assertRefused({ DATABASE_POOLER: value }, 'DATABASE_POOLER');
});

test('DATABASE_URL and DATABASE_PATH together are refused, naming both', () => {
  assertRefused({ DATABASE_URL: 'postgres://localhost/pets', DATABASE_PATH: 'data/pets.db' }, 'DATABASE_URL');
  assert.throws(() => loadConfig({ DATABASE_URL: 'postgres://localhost/pets', DATABASE_PATH: 'x.db' }), /DATABASE_PATH/);
});

test('DATABASE_POOL_SIZE is a positive integer, default 8', () => {
  assert.equal(loadConfig({ DATABASE_POOL_SIZE: '20' }).databasePoolSize, 20);
  for (const value of ['0', '-1', 'ten', '1001']) assertRefused({ DATABASE_POOL_SIZE: value }, 'DATABASE_POOL_SIZE');
});

test('WEBHOOK_ALLOWED_NETWORKS is comma-separated IP addresses and CIDR ranges of either family, none by default', () => {
  assert.deepEqual(loadConfig({}).webhookAllowedNetworks, []);
  assert.deepEqual(loadConfig({ WEBHOOK_ALLOWED_NETWORKS: '127.0.0.1' }).webhookAllowedNetworks, ['127.0.0.1']);
  assert.deepEqual(loadConfig({ WEBHOOK_ALLOWED_NETWORKS: ' 10.0.0.0/8, fd00::/8,::1 ,169.254.0.0/16,10.0.0.0/8' }).webhookAllowedNetworks, ['10.0.0.0/8', 'fd00::/8', '::1', '169.254.0.0/16']);
  for (const value of ['10.0.0.0/33', '10.1.2.3/16', 'fd00::/129', 'hooks.example', '10.0.0.1,', '10.0.0.1;10.0.0.2', '[::1]', 'true', '0x7f.1', '127.1']) {
    assertRefused({ WEBHOOK_ALLOWED_NETWORKS: value }, 'WEBHOOK_ALLOWED_NETWORKS');
  }
  assertRefused({ WEBHOOK_ALLOWED_NETWORKS: Array.from({ length: 101 }, (_, i) => `10.0.0.${i}`).join(',') }, 'WEBHOOK_ALLOWED_NETWORKS');
  assert.throws(() => loadConfig({ WEBHOOK_ALLOWED_NETWORKS: '10.1.2.3/16' }), { message: 'WEBHOOK_ALLOWED_NETWORKS must be comma-separated IP addresses and CIDR ranges such as 10.0.0.5,10.1.0.0/16,fd00::/8; a range must be written with its first address, got "10.1.2.3/16"' });
});

test('WEBHOOK_RETRY_SCHEDULE is 1 to 20 positive whole seconds, the contract\'s seven waits by default', () => {
  assert.deepEqual(loadConfig({}).webhookRetrySchedule, [5, 300, 1800, 7200, 18000, 36000, 36000]);
  assert.deepEqual(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '1' }).webhookRetrySchedule, [1]);
  assert.deepEqual(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '1, 2,3' }).webhookRetrySchedule, [1, 2, 3]);
  assert.deepEqual(loadConfig({ WEBHOOK_RETRY_SCHEDULE: Array(20).fill('60').join(',') }).webhookRetrySchedule, Array(20).fill(60));
  assert.deepEqual(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '9999999999' }).webhookRetrySchedule, [9_999_999_999]);
  for (const value of ['0', '5,0', '-5', '1.5', '5,,300', '5,', ',5', 'five', '1e3', '0x10', '99999999999', Array(21).fill('1').join(','), '5 300']) {
    assertRefused({ WEBHOOK_RETRY_SCHEDULE: value }, 'WEBHOOK_RETRY_SCHEDULE');
  }
});
