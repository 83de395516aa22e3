/**
 * `npm run --silent keys -- <command>`: create, list, revoke and rotate API keys, and change
 * their scopes, in the same database as the server.
 *
 * Exit codes: 0 done, 1 the command could not be carried out (no such id, a bad environment
 * variable, a database error), 2 bad arguments. Every error is one line on stderr. With `create`
 * and `rotate`, stdout carries only the key (or one JSON object) so that scripts can capture it;
 * notes for people go to stderr.
 *
 * The arguments are parsed by keys/arguments.ts, the answers printed by keys/output.ts, and the
 * database opened by keys/database.ts; this file carries the commands out.
 */
import type { Clock } from '../clock.ts';
import { systemClock } from '../clock.ts';
import { loadConfig } from '../config.ts';
import { UnknownAccountError, type IssuedKey, type KeysStore } from '../storage/keys.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Output } from './exit-codes.ts';
import { parseKeysArgs, USAGE, UsageError, type KeysCommand } from './keys/arguments.ts';
import { openKeys } from './keys/database.ts';
import { describe, formatTable, isoTime, noSuchKey, printIssued, quote, SHOWN_ONCE, toJson } from './keys/output.ts';

/** What the command line touches outside the database. */
export interface KeysCliIo {
  stdout: Output;
  stderr: Output;
  clock: Clock;
}

export interface KeysCliContext extends KeysCliIo {
  /** The key store of the server's database (SQLite or PostgreSQL). */
  keys: KeysStore;
}

/**
 * Runs one command on an open database. Returns the exit code; never throws for bad arguments
 * or an unknown id (database failures do throw).
 */
export async function runKeysCommand(argv: readonly string[], context: KeysCliContext): Promise<number> {
  const command = parseOrReport(argv, context);
  return typeof command === 'number' ? command : executeKeysCommand(command, context);
}

/** The parsed command, or the usage exit code once the error is on stderr. */
function parseOrReport(argv: readonly string[], io: KeysCliIo): KeysCommand | number {
  try {
    return parseKeysArgs(argv, io.clock());
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr.write(`keys: ${error.message}\n`);
    return EXIT_USAGE;
  }
}

/** Carries out one kind of command; returns the exit code. */
type Execute<C extends KeysCommand> = (command: C, context: KeysCliContext, now: number) => Promise<number>;

const createKey: Execute<Extract<KeysCommand, { name: 'create' }>> = async (command, context, now) => {
  const { stderr, keys: store } = context;
  let issued: IssuedKey;
  try {
    issued = await store.create({
      plan: command.plan,
      ...(command.account !== undefined ? { account: command.account } : {}),
      scopes: command.scopes,
      label: command.label,
      perMinute: command.perMinute,
      perDay: command.perDay,
      expiresAt: command.expiresAt,
      now,
    });
  } catch (error) {
    if (!(error instanceof UnknownAccountError)) throw error;
    stderr.write(`keys: no account ${quote(error.account)}; an account exists once a key was created for it\n`);
    return EXIT_FAILURE;
  }
  printIssued(issued, command.json, context);
  if (!command.json) stderr.write(`Created ${describe(issued.record)}. ${SHOWN_ONCE}\n`);
  return EXIT_OK;
};

const listKeys: Execute<Extract<KeysCommand, { name: 'list' }>> = async ({ scope, json }, { stdout, keys: store }, now) => {
  // Holding, not allowing: `--scope orders:write` does not list the keys of orders:manage.
  const records = (await store.list()).filter((record) => scope === undefined || record.scopes.includes(scope));
  if (json) {
    stdout.write(`${JSON.stringify(records.map(toJson))}\n`);
  } else if (records.length === 0) {
    stdout.write(scope === undefined ? 'No API keys.\n' : `No API key holds ${scope}.\n`);
  } else {
    stdout.write(formatTable(records, now));
  }
  return EXIT_OK;
};

const setScopes: Execute<Extract<KeysCommand, { name: 'scopes' }>> = async ({ id, scopes }, { stdout, stderr, keys: store }) => {
  const record = await store.setScopes(id, scopes);
  if (record === null) return noSuchKey(id, stderr);
  stdout.write(`${record.id} now has the scopes ${record.scopes.join(',')}\n`);
  return EXIT_OK;
};

const revokeKey: Execute<Extract<KeysCommand, { name: 'revoke' }>> = async ({ id }, { stdout, stderr, keys: store }, now) => {
  const record = await store.get(id);
  if (record === null) return noSuchKey(id, stderr);
  if (record.revokedAt !== null) {
    stdout.write(`${record.id} was already revoked at ${isoTime(record.revokedAt)}\n`);
  } else {
    await store.revoke(record.id, now);
    stdout.write(`Revoked ${record.id}\n`);
  }
  return EXIT_OK;
};

const rotateKey: Execute<Extract<KeysCommand, { name: 'rotate' }>> = async (command, context, now) => {
  const { stderr, keys: store } = context;
  const result = await store.rotate(command.id, command.graceSeconds, now);
  switch (result.outcome) {
    case 'not_found':
      return noSuchKey(command.id, stderr);
    case 'revoked':
      stderr.write(`keys: ${command.id} was revoked at ${isoTime(result.previous.revokedAt!)}; create a new key instead\n`);
      return EXIT_FAILURE;
    case 'expired':
      stderr.write(`keys: ${command.id} expired at ${isoTime(result.previous.expiresAt!)}; create a new key instead\n`);
      return EXIT_FAILURE;
    case 'rotated':
      printIssued(result, command.json, context, {
        replacedId: result.previous.id,
        replacedExpiresAt: isoTime(result.previous.expiresAt!),
      });
      if (!command.json) {
        stderr.write(
          `Created ${describe(result.record)} to replace ${result.previous.id}, ` +
            `which stops working at ${isoTime(result.previous.expiresAt!)}. ${SHOWN_ONCE}\n`,
        );
      }
      return EXIT_OK;
  }
};

/** Each command's work, by name: a new command that has no entry here does not compile. */
const EXECUTE: { [N in KeysCommand['name']]: Execute<Extract<KeysCommand, { name: N }>> } = {
  help: async (_command, { stdout }) => {
    stdout.write(USAGE);
    return EXIT_OK;
  },
  create: createKey,
  list: listKeys,
  scopes: setScopes,
  revoke: revokeKey,
  rotate: rotateKey,
};

/** Carries out a parsed command. Returns the exit code. */
export function executeKeysCommand(command: KeysCommand, context: KeysCliContext): Promise<number> {
  // TypeScript cannot tie the entry to the command's own kind; the table's type does.
  const execute = EXECUTE[command.name] as Execute<KeysCommand>;
  return execute(command, context, context.clock());
}

/**
 * The whole command line: arguments, then the environment, then the database (the SQLite file,
 * or the PostgreSQL of DATABASE_URL, migrated if needed; one that does not exist yet only with
 * `create --create-database`, which creates the file and its folder private to this account). Arguments come first so that a typo creates no file. Any
 * failure is one line on stderr and an exit code.
 */
export async function runKeysCli(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: KeysCliIo): Promise<number> {
  const { stdout, stderr, clock } = io;
  const command = parseOrReport(argv, io);
  if (typeof command === 'number') return command;
  if (command.name === 'help') {
    stdout.write(USAGE);
    return EXIT_OK;
  }
  let close: () => unknown = () => {};
  try {
    const config = loadConfig(env);
    const opened = await openKeys(config, { create: command.name === 'create' && command.createDatabase });
    close = opened.close;
    return await executeKeysCommand(command, { keys: opened.keys, clock, stdout, stderr });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    stderr.write(`keys: ${message.split('\n')[0]}\n`);
    return EXIT_FAILURE;
  } finally {
    await close();
  }
}

/**
 * A reader that stops early (`keys list --json | head -c1`) closes the pipe under a write: the
 * command is over, and ends quietly with exit code 0, as `cat` or `ls` do (without a handler,
 * Node reports the EPIPE as an uncaught error with its stack). Any other failure of stdout is
 * said in one line on stderr, and of stderr in nothing, since nothing can be said any more.
 */
function endOnFailedOutput(stream: 'stdout' | 'stderr') {
  return (error: NodeJS.ErrnoException): void => {
    if (error.code === 'EPIPE') process.exit(EXIT_OK);
    if (stream === 'stderr') process.exit(EXIT_FAILURE);
    process.stderr.write(`keys: cannot write the output (${error.code ?? 'error'})\n`, () => process.exit(EXIT_FAILURE));
  };
}

if (import.meta.main) {
  process.stdout.on('error', endOnFailedOutput('stdout'));
  process.stderr.on('error', endOnFailedOutput('stderr'));
  process.exitCode = await runKeysCli(process.argv.slice(2), process.env, {
    stdout: process.stdout,
    stderr: process.stderr,
    clock: systemClock,
  });
}
