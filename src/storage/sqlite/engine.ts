/**
 * The one way to open the SQLite engine on a file, or `:memory:`, in order: open and migrate the
 * file on a first connection, let the caller seed it (the development key, test keys), start the
 * writer (inline on the first connection, or a thread: config.ts's `WRITER`), open the stores;
 * and close in the reverse order. main.ts, the tests' servers on a file and the soak all use it.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { Limiter } from '../../limits/limiter.ts';
import { closeDatabase, openServerDatabase, readOnly } from './database.ts';
import { type DataSync, type InlineWriter, loadWriterThreadHost, startInlineWriter, type WriterHost } from './writer.ts';
import { openReaderStores, openStores, type ReaderStores, type SqliteStores, type SqliteStoresOptions } from './stores.ts';

interface Opened {
  /** The first connection: it migrated the file; in the `thread` engine it only reads. */
  db: DatabaseSync;
  /** Resolves, with one line saying why, if the writer fails: the server must stop. */
  failed: Promise<string>;
  /** Closes the stores' connection and the writer, the writer last. */
  close(): Promise<void>;
}

/** The engine: one connection that writes itself (`memory`), or a file and its writer. */
export type SqliteEngine =
  | (Opened & { kind: 'memory'; stores: SqliteStores; limiter: Limiter })
  | (Opened & { kind: 'inline'; stores: ReaderStores; limiter: Limiter; writer: InlineWriter })
  | (Opened & { kind: 'thread'; stores: ReaderStores; limiter: Limiter; writer: WriterHost });

export interface EngineOptions {
  /** A file, or `:memory:`. */
  path: string;
  /** How the file's writes are made (`:memory:` writes itself either way). */
  writer: 'inline' | 'thread';
  /** Warnings and notices of opening the file (permissions, the folder made private). */
  log: (fields: Record<string, unknown>) => void;
  /** The file is in the service's own data/ folder, made private rather than warned about. */
  ownFolder?: boolean;
  stores: SqliteStoresOptions;
  /** The writer thread's entry: src/writer.ts (an edge, as main.ts is), or a test's. */
  threadEntry: URL;
  /** The inline writer's `fdatasync` (tests fail it). */
  sync?: DataSync;
}

const NEVER = new Promise<string>(() => {});

/** Opens the engine; `seed` runs on the migrated file before any writer starts. */
export async function openSqliteEngine<Seeded>(options: EngineOptions, seed: (db: DatabaseSync) => Seeded | Promise<Seeded>): Promise<{ engine: SqliteEngine; seeded: Seeded }> {
  const db = openServerDatabase(options.path, options.log, { ownFolder: options.ownFolder ?? false });
  const seeded = await seed(db);
  if (options.path === ':memory:') {
    const stores = openStores(db, options.stores);
    return { engine: { kind: 'memory', db, stores, limiter: stores.limiter as Limiter, failed: NEVER, close: async () => closeDatabase(db) }, seeded };
  }
  if (options.writer === 'inline') {
    const writer = startInlineWriter(db, options.sync ? { sync: options.sync } : {});
    const stores = openReaderStores(db, { submit: writer.submit, journal: writer.journal, durableEventId: writer.durableEventId }, options.stores);
    const close = async () => {
      await writer.close();
      closeDatabase(db);
    };
    return { engine: { kind: 'inline', db, stores, limiter: stores.limiter as Limiter, writer, failed: writer.failed, close }, seeded };
  }
  const { startWriterThread, createWriterClient } = await loadWriterThreadHost();
  const writer = startWriterThread({ entry: options.threadEntry, path: options.path });
  const client = createWriterClient(writer.connect());
  const stores = openReaderStores(readOnly(db), { submit: client.submit, memory: writer.memory }, options.stores);
  // The reader first, so that the writer is the last connection: it checkpoints the WAL as it closes.
  const close = async () => {
    closeDatabase(db);
    client.close();
    await writer.close();
  };
  return { engine: { kind: 'thread', db, stores, limiter: stores.limiter as Limiter, writer, failed: writer.failed, close }, seeded };
}
