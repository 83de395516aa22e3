/**
 * What the command lines (keys, backup) share. Exit codes: 0 done, 1 the command could not be
 * carried out (no such id, a bad environment variable, a database error), 2 bad arguments.
 */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** Where output goes; `process.stdout` fits, and tests collect strings. */
export interface Output {
  write(text: string): unknown;
}
