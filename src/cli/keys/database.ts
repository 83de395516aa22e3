/**
 * The key store of the configured database, for the keys command: the SQLite file or the
 * PostgreSQL of DATABASE_URL, migrated if needed.
 */
import { existsSync } from 'node:fs';
import { ConfigError, type Config } from '../../config.ts';
import type { KeysStore } from '../../storage/keys.ts';
import { closeDatabase, openDatabase } from '../../storage/sqlite/database.ts';
import { createKeysStore } from '../../storage/sqlite/keys-store.ts';
import { guard, migratePostgres, postgresPools } from '../../storage/postgres/database.ts';
import { contactedPool, DatabaseStartError, unusableDatabaseLine } from '../../storage/postgres/first-contact.ts';
import { createKeysStore as createPostgresKeysStore } from '../../storage/postgres/keys-store.ts';

/** The database names no existing database: refused unless the command was told to create one. */
export class NoDatabaseError extends Error {
  constructor(what: string) {
    super(`${what}; set the server's APP_ENV and DATABASE_PATH (or DATABASE_URL), or pass --create-database to create keys for a new database`);
    this.name = 'NoDatabaseError';
  }
}

/**
 * The key store of the configured database, and how to let go of it. A database that does not
 * exist yet (no SQLite file; a PostgreSQL database without the schema) is refused unless `create`:
 * a mistyped DATABASE_PATH used to create an empty database, print "No API keys." and exit 0, and
 * `create` issued a key into a file no server reads.
 */
export async function openKeys(config: Config, { create = false }: { create?: boolean } = {}): Promise<{ keys: KeysStore; close(): unknown }> {
  const url = config.databaseUrl;
  if (url !== null) {
    // One connection: the command runs one statement at a time. Reached as the server reaches it
    // (first-contact.ts): a failure is one line on why, within a bound, and a list of hosts is
    // used through the one that is the primary (the driver, left to try the hosts, never gave up).
    const open = await postgresPools(url, { poolSize: 1, transactionPooler: config.databasePooler === 'transaction' });
    const { pool: sql } = await contactedPool(open, url).catch((error: unknown) => {
      throw error instanceof DatabaseStartError ? new Error(unusableDatabaseLine(url, error)) : error;
    });
    try {
      if (!create) {
        const [row] = await guard(() => sql<{ migrated: boolean }[]>`SELECT to_regclass('schema_migrations') IS NOT NULL AS migrated`);
        if (!row!.migrated) throw new NoDatabaseError('the PostgreSQL database of DATABASE_URL has no schema yet (no server has started on it)');
      }
      await migratePostgres(sql);
    } catch (error) {
      await sql.end();
      throw error;
    }
    return { keys: createPostgresKeysStore(sql, { appEnv: config.appEnv }), close: () => sql.end({ timeout: 5 }) };
  }
  if (config.databasePath === ':memory:') {
    // Keys made here would vanish with the process while the key is printed as if it worked.
    throw new ConfigError('DATABASE_PATH', 'DATABASE_PATH must be a file for the keys command, got ":memory:"');
  }
  if (!create && !existsSync(config.databasePath)) throw new NoDatabaseError(`no database at ${config.databasePath} (DATABASE_PATH)`);
  // Creates a missing folder (0700) and file (0600), as the server does.
  const db = openDatabase(config.databasePath);
  return { keys: createKeysStore(db, { appEnv: config.appEnv }), close: () => closeDatabase(db) };
}
