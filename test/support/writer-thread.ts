/**
 * The writer thread of in-process tests: what src/writer.ts (the production entry) does, and one
 * thing more: the test may run a statement on that very connection through a BroadcastChannel
 * named after the file (`writerFaults` in test-server.ts), to fault it as a full disk would
 * (PRAGMA max_page_count is per connection), or hold the thread until it lets go.
 */
import { BroadcastChannel, parentPort, workerData } from 'node:worker_threads';
import { closeDatabase, openWriterDatabase } from '../../src/storage/sqlite/database.ts';
import { loadWriterThread, type WriterStart } from '../../src/storage/sqlite/writer.ts';

const { path, memory } = workerData as WriterStart;
const db = openWriterDatabase(path);
const faults = new BroadcastChannel(`writer-faults:${path}`);
faults.unref();
faults.onmessage = (event) => {
  const { sql, pause } = (event as { data: { sql?: string; pause?: SharedArrayBuffer } }).data;
  if (sql !== undefined) {
    db.exec(sql);
    faults.postMessage({ done: sql });
  } else if (pause !== undefined) {
    // Holds the writer's event loop, as a long commit would, until the test lets go.
    faults.postMessage({ paused: true });
    Atomics.wait(new Int32Array(pause), 0, 0);
  }
};
const { runWriter } = await loadWriterThread();
await runWriter({ db, memory, control: parentPort! });
faults.close();
closeDatabase(db);
