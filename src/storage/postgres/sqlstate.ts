/**
 * What may be said of a PostgreSQL failure: its SQLSTATE, its class, and a description of our own,
 * never the server's message. A message can hold data (a key that violated a constraint, a value
 * that did not parse) and, at connection time, whatever the client sent (a user or database name,
 * a start-up parameter a pooler refused), so it goes neither in a log line nor in a start error.
 */
import type { DatabaseErrorOf } from '../errors.ts';
import { DatabaseUnavailableError } from '../errors.ts';

/** SQLSTATE classes (PostgreSQL's "Errcodes" appendix), by their first two characters. */
const CLASSES: Readonly<Record<string, string>> = {
  '01': 'warning', '02': 'no_data', '03': 'sql_statement_not_yet_complete', '08': 'connection_exception',
  '09': 'triggered_action_exception', '0A': 'feature_not_supported', '0B': 'invalid_transaction_initiation',
  '0F': 'locator_exception', '0L': 'invalid_grantor', '0P': 'invalid_role_specification', '0Z': 'diagnostics_exception',
  '20': 'case_not_found', '21': 'cardinality_violation', '22': 'data_exception', '23': 'integrity_constraint_violation',
  '24': 'invalid_cursor_state', '25': 'invalid_transaction_state', '26': 'invalid_sql_statement_name',
  '27': 'triggered_data_change_violation', '28': 'invalid_authorization_specification',
  '2B': 'dependent_privilege_descriptors_still_exist', '2D': 'invalid_transaction_termination', '2F': 'sql_routine_exception',
  '34': 'invalid_cursor_name', '38': 'external_routine_exception', '39': 'external_routine_invocation_exception',
  '3B': 'savepoint_exception', '3D': 'invalid_catalog_name', '3F': 'invalid_schema_name', '40': 'transaction_rollback',
  '42': 'syntax_error_or_access_rule_violation', '44': 'with_check_option_violation', '53': 'insufficient_resources',
  '54': 'program_limit_exceeded', '55': 'object_not_in_prerequisite_state', '57': 'operator_intervention',
  '58': 'system_error', '72': 'snapshot_too_old', 'F0': 'config_file_error', 'HV': 'fdw_error', 'P0': 'plpgsql_error',
  'XX': 'internal_error',
};

/**
 * Whether `code` is a SQLSTATE: five characters of a known class. (A DatabaseUnavailableError's
 * reason is a SQLSTATE or a driver's or system's code; EPIPE, five letters too, is of no class.)
 */
function isSqlstate(code: string): boolean {
  return /^[0-9A-Z]{5}$/.test(code) && code.slice(0, 2) in CLASSES;
}

/** The SQLSTATE of an error PostgreSQL sent (the driver's PostgresError), or null. */
export function sqlstateOf(error: unknown): string | null {
  if (!(error instanceof Error) || error.name !== 'PostgresError') return null;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && isSqlstate(code) ? code : null;
}

/** The log fields of a SQLSTATE: itself and its class's name. */
export function sqlstateFields(code: string): { sqlstate: string; sqlstateClass: string } {
  return { sqlstate: code, sqlstateClass: CLASSES[code.slice(0, 2)]! };
}

/**
 * The PostgreSQL engine's failures for the one error mapping: a DatabaseUnavailableError (503) with
 * its reason, and the SQLSTATE and class when the reason is one; any other error PostgreSQL sent
 * (500) with its SQLSTATE and class.
 */
export const postgresErrorOf: DatabaseErrorOf = (error) => {
  if (error instanceof DatabaseUnavailableError) {
    return { unavailable: true, fields: { reason: error.reason, ...(isSqlstate(error.reason) ? sqlstateFields(error.reason) : {}) } };
  }
  const code = sqlstateOf(error);
  return code === null ? null : { unavailable: false, fields: sqlstateFields(code) };
};

/** What the errors a start meets most often mean, in words of our own. */
const DESCRIPTIONS: Readonly<Record<string, string>> = {
  '28P01': 'PostgreSQL refused the password',
  '28000': 'PostgreSQL refused the role: it does not exist, or pg_hba.conf allows it no connection from here',
  '3D000': 'the database does not exist',
  '42501': 'the role lacks a privilege the service needs to create and update its schema',
  '53300': 'PostgreSQL has no connection slot left',
  '57P03': 'PostgreSQL is starting up, shutting down or recovering, and takes no connection now',
  '08P01': 'a pooler in front of PostgreSQL refused the session, or the server broke the protocol (PgBouncer answers so for a database or user it does not know, and while it cannot reach PostgreSQL)',
  '25006': 'the server is a standby, which cannot be written to: name the primary, or list every host with target_session_attrs=read-write',
  ECONNREFUSED: 'the connection was refused: nothing listens there',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved now',
  EHOSTUNREACH: 'the host cannot be reached',
  ENETUNREACH: 'the network cannot be reached',
  ETIMEDOUT: 'the connection timed out',
  CONNECT_TIMEOUT: 'the server did not answer as PostgreSQL in time',
};

/** The code of a failure to connect: a SQLSTATE, or a driver's or system's code; null for none. */
function failureCode(error: unknown): string | null {
  if (error instanceof DatabaseUnavailableError) return error.reason;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : null;
}

/** One line on why the database could not be used at start: a description of our own and the code. */
export function describeFailure(error: unknown): string {
  const code = failureCode(error);
  if (code === null) return 'the database could not be used';
  if (isSqlstate(code)) {
    const { sqlstateClass } = sqlstateFields(code);
    return `${DESCRIPTIONS[code] ?? 'PostgreSQL refused'} (SQLSTATE ${code}, class ${sqlstateClass})`;
  }
  return `${DESCRIPTIONS[code] ?? 'the connection failed'} (${code})`;
}
