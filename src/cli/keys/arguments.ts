/**
 * The keys command's arguments, parsed and validated into a KeysCommand. Parsed by hand rather
 * than with `util.parseArgs`, which silently keeps the last of a repeated option and words its
 * errors over several clauses. Bad arguments are a UsageError (exit code 2).
 */
import type { Plan } from '../../limits/plans.ts';
import { isPlan, PLAN_NAMES, PLANS } from '../../limits/plans.ts';
import { isScope, orderedScopes, SCOPE_MEANINGS, SCOPES, type Scope } from '../../keys/scopes.ts';
import { quote } from './output.ts';

export const DEFAULT_GRACE_SECONDS = 86_400;
/** A longer grace is certainly a typo, and 100 years keeps `now + grace` an exact integer. */
export const MAX_GRACE_SECONDS = 100 * 365 * 86_400;
const MAX_LABEL_LENGTH = 100;

export const USAGE = `Usage: npm run --silent keys -- <command>

Commands:
  create --plan PLAN --scopes LIST [--account ACCOUNT] [--label TEXT]
         [--per-minute N --per-day N] [--expires ISO-TIME] [--json] [--create-database]
      Create a key and print it once. PLAN is ${PLAN_NAMES.join(', ')};
      --per-minute and --per-day are required for enterprise and only for enterprise.
      LIST is comma-separated: give the key only what it needs.
      Without --account the key gets a new account of its own; with it, it joins that one.
      --create-database: the database may be new (a new file, or PostgreSQL without the schema);
      without it a database that does not exist yet is refused, as every other command does.
  list [--scope SCOPE] [--json]
      List every key (never the key itself), or only the keys that hold SCOPE.
  scopes ID LIST
      Replace the key's scopes; every request that starts afterwards is answered with them.
  revoke ID
      Stop a key at once.
  rotate ID [--grace SECONDS] [--json]
      Create a key with the same account, scopes, plan, numbers and label; the old one
      keeps working for the grace period (default ${DEFAULT_GRACE_SECONDS} s).

Scopes:
${SCOPES.map((scope) => `  ${scope.padEnd(17)}${SCOPE_MEANINGS[scope]}`).join('\n')}

Exit codes: 0 done, 1 failed (unknown ID or account, bad environment variable), 2 bad arguments.
`;

/** A parsed, validated command line. */
export type KeysCommand =
  | { name: 'help' }
  | {
      name: 'create';
      plan: Plan;
      /** Absent: a new account of its own. */
      account: string | undefined;
      scopes: Scope[];
      label: string;
      perMinute: number | undefined;
      perDay: number | undefined;
      expiresAt: number | null;
      json: boolean;
      /** `--create-database`: a database that does not exist yet may be created. */
      createDatabase: boolean;
    }
  | { name: 'list'; json: boolean; scope: Scope | undefined }
  | { name: 'scopes'; id: string; scopes: Scope[] }
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
    options: {
      plan: 'string', scopes: 'string', account: 'string', label: 'string', 'per-minute': 'string', 'per-day': 'string', expires: 'string',
      json: 'boolean', 'create-database': 'boolean',
    },
    positionals: [],
  },
  list: { options: { json: 'boolean', scope: 'string' }, positionals: [] },
  scopes: { options: {}, positionals: ['ID', 'LIST'] },
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
    case 'create':
      return parseCreate(values, json, now);
    case 'list': {
      const scope = values.get('scope');
      if (scope !== undefined && !isScope(scope)) throw new UsageError(`unknown scope ${quote(scope)} for --scope (${SCOPES.join(', ')})`);
      return { name, json, scope };
    }
    case 'scopes':
      return { name, id: positionals[0]!, scopes: parseScopes(positionals[1]!, 'LIST') };
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

/** The options of `create`, checked one by one (`now`: an `--expires` in the past is refused). */
function parseCreate(values: Map<string, string>, json: boolean, now: number): Extract<KeysCommand, { name: 'create' }> {
  const planName = values.get('plan');
  if (planName === undefined) throw new UsageError('create needs --plan');
  if (!isPlan(planName)) throw new UsageError(`unknown plan ${quote(planName)} (${PLAN_NAMES.join(', ')})`);
  const scopeList = values.get('scopes');
  // No default: a key that may do everything must have been asked for.
  if (scopeList === undefined) throw new UsageError(`create needs --scopes, a comma-separated list of ${SCOPES.join(', ')}`);
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
  const account = values.get('account');
  if (account !== undefined && (account === '' || [...account].length > MAX_LABEL_LENGTH || CONTROL.test(account))) {
    throw new UsageError(`--account must be an account id such as acct_0123456789abcdef, got ${quote(account)}`);
  }
  return {
    name: 'create', plan: planName, account, scopes: parseScopes(scopeList, '--scopes'), label, perMinute, perDay, expiresAt, json,
    createDatabase: values.has('create-database'),
  };
}

/** A list of scopes (`a,b`) as `--scopes` and `scopes ID LIST` take it: each a scope, none empty. */
function parseScopes(list: string, what: string): Scope[] {
  const scopes = list.split(',');
  for (const scope of scopes) {
    if (!isScope(scope)) throw new UsageError(`${scope === '' ? 'an empty scope' : `unknown scope ${quote(scope)}`} in ${what} (${SCOPES.join(', ')})`);
  }
  return orderedScopes(scopes as Scope[]);
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
