/**
 * `npm run --silent keys -- <command>`: create, list, revoke and rotate API keys in the same
 * database as the server (contract, API keys).
 *
 * Exit codes: 0 done, 1 the command could not be carried out (no such id, a bad environment
 * variable, a database error), 2 bad arguments. Every error is one line on stderr. With `create`
 * and `rotate`, stdout carries only the key (or one JSON object) so that scripts can capture it;
 * notes for people go to stderr.
 *
 * Arguments are parsed by hand rather than with `util.parseArgs`, which silently keeps the last of
 * a repeated option and words its errors over several clauses.
 */
import type { Clock } from '../clock.ts';
import { systemClock } from '../clock.ts';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { closeDatabase, openDatabase } from '../storage/sqlite/database.ts';
import type { ApiKeyRecord, IssuedKey, KeysStore } from '../storage/keys.ts';
import { createKeysStore } from '../storage/sqlite/keys-store.ts';
import { connectPostgres, migratePostgres } from '../storage/postgres/database.ts';
import { createKeysStore as createPostgresKeysStore } from '../storage/postgres/keys-store.ts';
import type { Plan } from '../limits/plans.ts';
import { isPlan, PLAN_NAMES, PLANS } from '../limits/plans.ts';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export const DEFAULT_GRACE_SECONDS = 86_400;
/** A longer grace is certainly a typo, and 100 years keeps `now + grace` an exact integer. */
export const MAX_GRACE_SECONDS = 100 * 365 * 86_400;
const MAX_LABEL_LENGTH = 100;

export const USAGE = `Usage: npm run --silent keys -- <command>

Commands:
  create --plan PLAN [--label TEXT] [--per-minute N --per-day N] [--expires ISO-TIME] [--json]
      Create a key and print it once. PLAN is ${PLAN_NAMES.join(', ')};
      --per-minute and --per-day are required for enterprise and only for enterprise.
  list [--json]
      List every key (never the key itself).
  revoke ID
      Stop a key at once.
  rotate ID [--grace SECONDS] [--json]
      Create a key with the same plan, numbers and label; the old one keeps working
      for the grace period (default ${DEFAULT_GRACE_SECONDS} s).

Exit codes: 0 done, 1 failed (unknown ID, bad environment variable), 2 bad arguments.
`;

/** Where output goes; `process.stdout` fits, and tests collect strings. */
export interface Output {
  write(text: string): unknown;
}

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

/** A parsed, validated command line. */
export type KeysCommand =
  | { name: 'help' }
  | {
      name: 'create';
      plan: Plan;
      label: string;
      perMinute: number | undefined;
      perDay: number | undefined;
      expiresAt: number | null;
      json: boolean;
    }
  | { name: 'list'; json: boolean }
  | { name: 'revoke'; id: string }
  | { name: 'rotate'; id: string; graceSeconds: number; json: boolean };

/** Bad arguments: exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

type OptionKind = 'string' | 'boolean';

interface CommandSpec {
  options: Readonly<Record<string, OptionKind>>;
  positionals: readonly string[];
}

const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  create: {
    options: { plan: 'string', label: 'string', 'per-minute': 'string', 'per-day': 'string', expires: 'string', json: 'boolean' },
    positionals: [],
  },
  list: { options: { json: 'boolean' }, positionals: [] },
  revoke: { options: {}, positionals: ['ID'] },
  rotate: { options: { grace: 'string', json: 'boolean' }, positionals: ['ID'] },
};

/**
 * Parses and validates `argv` (the words after `keys`). `now` is needed to refuse an `--expires`
 * in the past. Throws `UsageError` with a one-line message.
 */
export function parseKeysArgs(argv: readonly string[], now: number): KeysCommand {
  const [name, ...rest] = argv;
  if (name === undefined) throw new UsageError(`missing command (${Object.keys(COMMANDS).join(', ')}); try "help"`);
  if (name === 'help' || name === '--help' || name === '-h') {
    if (rest.length > 0) throw new UsageError(`unexpected argument ${quote(rest[0]!)} for help`);
    return { name: 'help' };
  }
  const spec = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (spec === undefined) throw new UsageError(`unknown command ${quote(name)}; try "help"`);
  // "keys create --help" asks for help, not about an unknown option.
  const end = rest.indexOf('--');
  if ((end === -1 ? rest : rest.slice(0, end)).some((arg) => arg === '--help' || arg === '-h')) return { name: 'help' };
  const { values, positionals } = tokenize(name, spec, rest);
  const json = values.has('json');

  switch (name) {
    case 'create': {
      const planName = values.get('plan');
      if (planName === undefined) throw new UsageError('create needs --plan');
      if (!isPlan(planName)) throw new UsageError(`unknown plan ${quote(planName)} (${PLAN_NAMES.join(', ')})`);
      const perMinute = optionalPositiveInteger(values, 'per-minute', Number.MAX_SAFE_INTEGER);
      const perDay = optionalPositiveInteger(values, 'per-day', Number.MAX_SAFE_INTEGER);
      if (PLANS[planName] === null) {
        if (perMinute === undefined) throw new UsageError(`plan ${planName} needs --per-minute`);
        if (perDay === undefined) throw new UsageError(`plan ${planName} needs --per-day`);
      } else if (perMinute !== undefined || perDay !== undefined) {
        throw new UsageError(`--per-minute and --per-day are only for plan enterprise, not ${planName}`);
      }
      const expires = values.get('expires');
      let expiresAt: number | null = null;
      if (expires !== undefined) {
        expiresAt = parseIsoTime(expires);
        if (Number.isNaN(expiresAt)) {
          throw new UsageError(
            `--expires must be an ISO 8601 date or a date-time with Z or an offset (2030-12-31, 2030-12-31T23:59:59Z), got ${quote(expires)}`,
          );
        }
        if (expiresAt <= now) throw new UsageError(`--expires is in the past: ${new Date(expiresAt).toISOString()}`);
      }
      const label = values.get('label') ?? '';
      if ([...label].length > MAX_LABEL_LENGTH || CONTROL.test(label)) {
        throw new UsageError(`--label must be at most ${MAX_LABEL_LENGTH} characters, without control characters`);
      }
      return { name, plan: planName, label, perMinute, perDay, expiresAt, json };
    }
    case 'list':
      return { name, json };
    case 'revoke':
      return { name, id: positionals[0]! };
    default:
      return {
        name: 'rotate',
        id: positionals[0]!,
        graceSeconds: optionalPositiveInteger(values, 'grace', MAX_GRACE_SECONDS) ?? DEFAULT_GRACE_SECONDS,
        json,
      };
  }
}

/** Control characters would break the one-line-per-key table. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function tokenize(command: string, spec: CommandSpec, args: readonly string[]) {
  const values = new Map<string, string>();
  const positionals: string[] = [];
  let onlyPositionals = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!onlyPositionals && arg === '--') {
      onlyPositionals = true;
    } else if (!onlyPositionals && arg.startsWith('--')) {
      const equals = arg.indexOf('=');
      const option = equals === -1 ? arg.slice(2) : arg.slice(2, equals);
      const kind = Object.hasOwn(spec.options, option) ? spec.options[option] : undefined;
      if (kind === undefined) throw new UsageError(`unknown option ${quote(`--${option}`)} for ${command}`);
      if (values.has(option)) throw new UsageError(`option --${option} is given more than once`);
      if (kind === 'boolean') {
        if (equals !== -1) throw new UsageError(`option --${option} takes no value`);
        values.set(option, '');
      } else if (equals !== -1) {
        values.set(option, arg.slice(equals + 1));
      } else {
        const value = args[i + 1];
        // "--label --json" is a forgotten value, not a label; "--label=--json" says otherwise.
        if (value === undefined || value.startsWith('--')) throw new UsageError(`option --${option} needs a value`);
        values.set(option, value);
        i++;
      }
    } else if (!onlyPositionals && arg.startsWith('-') && arg !== '-') {
      throw new UsageError(`unknown option ${quote(arg)} for ${command}`);
    } else if (positionals.length < spec.positionals.length) {
      positionals.push(arg);
    } else {
      throw new UsageError(`unexpected argument ${quote(arg)} for ${command}`);
    }
  }
  const missing = spec.positionals[positionals.length];
  if (missing !== undefined) throw new UsageError(`${command} needs ${missing}`);
  return { values, positionals };
}

function optionalPositiveInteger(values: Map<string, string>, option: string, max: number): number | undefined {
  const raw = values.get(option);
  if (raw === undefined) return undefined;
  const value = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= 1 && value <= max)) {
    const bound = max === Number.MAX_SAFE_INTEGER ? '' : ` up to ${max}`;
    throw new UsageError(`--${option} must be a positive integer${bound}, got ${quote(raw)}`);
  }
  return value;
}

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:(Z)|([+-])(\d{2}):(\d{2})))?$/i;

/**
 * Milliseconds for an ISO 8601 date (`2030-12-31`, midnight UTC) or date-time with `Z` or an
 * offset; NaN otherwise. `Date.parse` alone would take "2030-02-30" as 2 March and read a time
 * without a zone in the machine's local time.
 */
export function parseIsoTime(text: string): number {
  const match = ISO_TIME.exec(text);
  if (match === null) return Number.NaN;
  const [, y, mo, d, h = '0', mi = '0', s = '0', fraction = '', , sign = '+', oh = '0', om = '0'] = match;
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = [y, mo, d, h, mi, s, oh, om].map(Number) as [
    number, number, number, number, number, number, number, number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return Number.NaN;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return Number.NaN;
  const date = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not map years 0 to 99 onto 1900 to 1999.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, Number(fraction.slice(0, 3).padEnd(3, '0')));
  const offset = (sign === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
  return date.getTime() - offset;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const;

function daysInMonth(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!;
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

/** Carries out a parsed command. Returns the exit code. */
export async function executeKeysCommand(command: KeysCommand, context: KeysCliContext): Promise<number> {
  const { stdout, stderr, clock, keys: store } = context;
  const now = clock();
  switch (command.name) {
    case 'help':
      stdout.write(USAGE);
      return EXIT_OK;

    case 'create': {
      const issued = await store.create({
        plan: command.plan,
        label: command.label,
        perMinute: command.perMinute,
        perDay: command.perDay,
        expiresAt: command.expiresAt,
        now,
      });
      printIssued(issued, command.json, context);
      if (!command.json) stderr.write(`Created ${describe(issued.record)}. ${SHOWN_ONCE}\n`);
      return EXIT_OK;
    }

    case 'list': {
      const records = await store.list();
      if (command.json) {
        stdout.write(`${JSON.stringify(records.map(toJson))}\n`);
      } else {
        stdout.write(records.length === 0 ? 'No API keys.\n' : formatTable(records, now));
      }
      return EXIT_OK;
    }

    case 'revoke': {
      const record = await store.get(command.id);
      if (record === null) return noSuchKey(command.id, stderr);
      if (record.revokedAt !== null) {
        stdout.write(`${record.id} was already revoked at ${isoTime(record.revokedAt)}\n`);
      } else {
        await store.revoke(record.id, now);
        stdout.write(`Revoked ${record.id}\n`);
      }
      return EXIT_OK;
    }

    case 'rotate': {
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
    }
  }
}

const SHOWN_ONCE = 'Store the key now: it is not shown again.';

function printIssued(issued: IssuedKey, json: boolean, context: KeysCliIo, extra: Record<string, string> = {}): void {
  if (!json) {
    context.stdout.write(`${issued.key}\n`);
    return;
  }
  const { id, label, plan, perMinute, perDay, createdAt, expiresAt } = toJson(issued.record);
  context.stdout.write(`${JSON.stringify({ id, key: issued.key, label, plan, perMinute, perDay, createdAt, expiresAt, ...extra })}\n`);
}

function noSuchKey(id: string, stderr: Output): number {
  stderr.write(`keys: no key with id ${quote(id)}\n`);
  return EXIT_FAILURE;
}

function describe(record: ApiKeyRecord): string {
  const label = record.label === '' ? '' : `, label ${quote(record.label)}`;
  const expiry = record.expiresAt === null ? '' : `, expires ${isoTime(record.expiresAt)}`;
  return `${record.id} (plan ${record.plan}: ${record.perMinute}/min, ${record.perDay}/day${label}${expiry})`;
}

/** The `list --json` shape: times as ISO 8601 UTC strings, null when unset. */
function toJson(record: ApiKeyRecord) {
  return {
    id: record.id,
    label: record.label,
    plan: record.plan,
    perMinute: record.perMinute,
    perDay: record.perDay,
    createdAt: isoTime(record.createdAt),
    expiresAt: record.expiresAt === null ? null : isoTime(record.expiresAt),
    revokedAt: record.revokedAt === null ? null : isoTime(record.revokedAt),
  };
}

function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

function formatTable(records: readonly ApiKeyRecord[], now: number): string {
  // Whole seconds are enough to read; --json has the milliseconds.
  const time = (ms: number | null) => (ms === null ? '-' : isoTime(ms).replace(/\.\d{3}Z$/, 'Z'));
  const status = (record: ApiKeyRecord) =>
    record.revokedAt !== null ? 'revoked' : record.expiresAt !== null && record.expiresAt <= now ? 'expired' : 'active';
  const rows = [
    ['ID', 'PLAN', 'PER MIN', 'PER DAY', 'STATUS', 'CREATED', 'EXPIRES', 'REVOKED', 'LABEL'],
    ...records.map((record) => [
      record.id,
      record.plan,
      String(record.perMinute),
      String(record.perDay),
      status(record),
      time(record.createdAt),
      time(record.expiresAt),
      time(record.revokedAt),
      record.label,
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd() + '\n').join('');
}

function quote(text: string): string {
  return JSON.stringify(text);
}

/**
 * The whole command line: arguments, then the environment, then the database (the SQLite file,
 * created with its folder if missing, private to this account, or the PostgreSQL of
 * DATABASE_URL, migrated if needed). Arguments come first so that a typo creates no file. Any
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
    const opened = await openKeys(config);
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

/** The key store of the configured database, and how to let go of it. */
async function openKeys(config: Config): Promise<{ keys: KeysStore; close(): unknown }> {
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

if (import.meta.main) {
  process.exitCode = await runKeysCli(process.argv.slice(2), process.env, {
    stdout: process.stdout,
    stderr: process.stderr,
    clock: systemClock,
  });
}
