/**
 * The key store of the configured database, for the keys command: the SQLite file or the
 * PostgreSQL of DATABASE_URL, migrated if needed.
 */
import { ConfigError, type Config } from '../../config.ts';
import type { KeysStore } from '../../storage/keys.ts';
import { closeDatabase, openDatabase } from '../../storage/sqlite/database.ts';
import { createKeysStore } from '../../storage/sqlite/keys-store.ts';
import { connectPostgres, migratePostgres } from '../../storage/postgres/database.ts';
import { createKeysStore as createPostgresKeysStore } from '../../storage/postgres/keys-store.ts';

/** The key store of the configured database, and how to let go of it. */
export async function openKeys(config: Config): Promise<{ keys: KeysStore; close(): unknown }> {
  if (config.databaseUrl !== null) {
    // One connection: the command runs one statement at a time.
    const sql = await connectPostgres(config.databaseUrl, { poolSize: 1 });
    try {
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
  // Creates a missing folder (0700) and file (0600), as the server does.
  const db = openDatabase(config.databasePath);
  return { keys: createKeysStore(db, { appEnv: config.appEnv }), close: () => closeDatabase(db) };
}
