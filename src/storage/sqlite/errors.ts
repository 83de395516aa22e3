/**
 * SQLite's failures as the error mapping needs them (see storage/errors.ts): node:sqlite throws
 * its own errors, whose primary result code says whether the database cannot be written right
 * now (503, retried) or something is wrong (500).
 */
import type { DatabaseErrorOf } from '../errors.ts';

/** SQLite primary result codes meaning "the database cannot be written right now". */
const UNAVAILABLE_SQLITE_CODES = new Set([
  5, // SQLITE_BUSY: another connection holds the write lock past busy_timeout
  6, // SQLITE_LOCKED
  8, // SQLITE_READONLY
  10, // SQLITE_IOERR
  13, // SQLITE_FULL: the disk is full
  14, // SQLITE_CANTOPEN
]);

/** Any error node:sqlite threw, with its primary result code; null for every other error. */
export const sqliteErrorOf: DatabaseErrorOf = (error) => {
  const sqliteCode = sqlitePrimaryCode(error);
  return sqliteCode === undefined ? null : { unavailable: UNAVAILABLE_SQLITE_CODES.has(sqliteCode), fields: { sqliteCode } };
};

function sqlitePrimaryCode(error: unknown): number | undefined {
  if (error instanceof Error && (error as { code?: unknown }).code === 'ERR_SQLITE_ERROR') {
    const errcode = (error as { errcode?: unknown }).errcode;
    if (typeof errcode === 'number') return errcode & 0xff;
  }
  return undefined;
}
