/**
 * The entry of SQLite's writer thread, which main.ts starts on a database file (through
 * storage/sqlite/writer/host.ts): it opens the one connection of the server that writes the file
 * and serves the writes of every other thread on it (storage/sqlite/writer/thread.ts) until told
 * to close. Like main.ts, an edge: the file is opened here and handed down.
 *
 * Not main.ts itself: a thread that ran main.ts would load the whole service to use none of it,
 * about 18 MiB more of resident memory for the process.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { closeDatabase, openWriterDatabase } from './storage/sqlite/database.ts';
import { loadWriterThread, type WriterStart } from './storage/sqlite/writer.ts';

const { path, memory } = workerData as WriterStart;
// The server's first connection migrated the file before starting this thread.
const db = openWriterDatabase(path);
const { runWriter } = await loadWriterThread();
await runWriter({ db, memory, control: parentPort! });
closeDatabase(db);
