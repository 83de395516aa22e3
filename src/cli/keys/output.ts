/**
 * What the keys command prints: a key once (alone, so that scripts can capture it, or as one
 * JSON object), the table of `list`, and the notes for people on stderr.
 */
import type { ApiKeyRecord, IssuedKey } from '../../storage/keys.ts';
import { EXIT_FAILURE, type Output } from '../exit-codes.ts';

export const SHOWN_ONCE = 'Store the key now: it is not shown again.';

export function printIssued(issued: IssuedKey, json: boolean, context: { stdout: Output }, extra: Record<string, string> = {}): void {
  if (!json) {
    context.stdout.write(`${issued.key}\n`);
    return;
  }
  const { id, account, scopes, label, plan, perMinute, perDay, createdAt, expiresAt } = toJson(issued.record);
  context.stdout.write(`${JSON.stringify({ id, key: issued.key, account, scopes, label, plan, perMinute, perDay, createdAt, expiresAt, ...extra })}\n`);
}

export function noSuchKey(id: string, stderr: Output): number {
  stderr.write(`keys: no key with id ${quote(id)}\n`);
  return EXIT_FAILURE;
}

export function describe(record: ApiKeyRecord): string {
  const label = record.label === '' ? '' : `, label ${quote(record.label)}`;
  const expiry = record.expiresAt === null ? '' : `, expires ${isoTime(record.expiresAt)}`;
  return `${record.id} (account ${record.account}, scopes ${record.scopes.join(',')}; plan ${record.plan}: ${record.perMinute}/min, ${record.perDay}/day${label}${expiry})`;
}

/** The `list --json` shape: times as ISO 8601 UTC strings, null when unset. */
export function toJson(record: ApiKeyRecord) {
  return {
    id: record.id,
    account: record.account,
    scopes: record.scopes,
    label: record.label,
    plan: record.plan,
    perMinute: record.perMinute,
    perDay: record.perDay,
    createdAt: isoTime(record.createdAt),
    expiresAt: record.expiresAt === null ? null : isoTime(record.expiresAt),
    revokedAt: record.revokedAt === null ? null : isoTime(record.revokedAt),
  };
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

export function formatTable(records: readonly ApiKeyRecord[], now: number): string {
  // Whole seconds are enough to read; --json has the milliseconds.
  const time = (ms: number | null) => (ms === null ? '-' : isoTime(ms).replace(/\.\d{3}Z$/, 'Z'));
  const status = (record: ApiKeyRecord) =>
    record.revokedAt !== null ? 'revoked' : record.expiresAt !== null && record.expiresAt <= now ? 'expired' : 'active';
  const rows = [
    ['ID', 'ACCOUNT', 'SCOPES', 'PLAN', 'PER MIN', 'PER DAY', 'STATUS', 'CREATED', 'EXPIRES', 'REVOKED', 'LABEL'],
    ...records.map((record) => [
      record.id,
      record.account,
      record.scopes.join(','),
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

export function quote(text: string): string {
  return JSON.stringify(text);
}
