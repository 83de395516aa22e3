/**
 * The SQLite writer, the one entry to its folder (writer/): every write the server makes to its
 * file, as data (executor.ts), recorded for the answer caches as the database logs it
 * (touched-pets.ts, journal.ts), and made either by the writer thread (thread.ts, started and
 * stopped by host.ts, reached through client.ts over the messages of protocol.ts) or inline on
 * the request thread's own connection (inline.ts), as config.ts's `WRITER` says.
 */
export * from './writer/executor.ts';
export * from './writer/journal.ts';
export * from './writer/touched-pets.ts';
export * from './writer/client.ts';
export * from './writer/host.ts';
export * from './writer/protocol.ts';
export * from './writer/thread.ts';
export * from './writer/inline.ts';
