/**
 * The writer thread of in-process tests: what src/writer.ts (the production entry) does, and one
 * thing more: the test may run a statement on that very connection through a BroadcastChannel
 * named after the file (`writerFaults` in test-server.ts), to fault it as a full disk would
 * (PRAGMA max_page_count is per connection).
 */
import { BroadcastChannel, parentPort, workerData } from 'node:worker_threads';
import { closeDatabase, openWriterDatabase } from '../../src/storage/sqlite/database.ts';
import { runWriter } from '../../src/storage/sqlite/writer-thread.ts';
import type { WriterStart } from '../../src/storage/sqlite/writer-host.ts';
import { REMEMBERED } from '../../src/api/idempotent-writes.ts';

const { path, memory } = workerData as WriterStart;
const db = openWriterDatabase(path);
const faults = new BroadcastChannel(`writer-faults:${path}`);
faults.unref();
faults.onmessage = (event) => {
  const { sql } = (event as { data: { sql: string } }).data;
  db.exec(sql);
  faults.postMessage({ done: sql });
};
await runWriter({ db, memory, control: parentPort!, responders: REMEMBERED });
faults.close();
closeDatabase(db);
