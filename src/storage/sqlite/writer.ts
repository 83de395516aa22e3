/**
 * The SQLite writer, the one entry to its folder (writer/): every write the server makes to its
 * file, as data (executor.ts), recorded for the answer caches as the database logs it
 * (touched-pets.ts, journal.ts), and made either by the writer thread (thread.ts, started and
 * stopped by host.ts, reached through client.ts over the messages of protocol.ts) or inline on
 * the request thread's own connection (inline.ts), as config.ts's `WRITER` says.
 *
 * The writer thread's modules are loaded only by a process that uses the thread: here are their
 * types, and their functions come from the two loaders below. A start with the inline writer (one
 * core) loads none of them, each module costing a start about 0.3 ms.
 */
export * from './writer/executor.ts';
export * from './writer/journal.ts';
export * from './writer/touched-pets.ts';
export * from './writer/inline.ts';
export type * from './writer/client.ts';
export type * from './writer/host.ts';
export type * from './writer/protocol.ts';
export type * from './writer/thread.ts';

/** A request thread's side of the writer thread: starting it (host.ts), and a client of a port to it (client.ts). */
export async function loadWriterThreadHost() {
  const [{ startWriterThread }, { createWriterClient }] = await Promise.all([import('./writer/host.ts'), import('./writer/client.ts')]);
  return { startWriterThread, createWriterClient };
}

/** The writer thread's own side: the loop that serves the writes (thread.ts), for the thread's entry. */
export async function loadWriterThread() {
  const { runWriter } = await import('./writer/thread.ts');
  return { runWriter };
}
