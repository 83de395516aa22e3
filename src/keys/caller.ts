/**
 * The caller of a request that carries a valid API key, as the pipeline identifies it and a
 * handler sees it: the key's id, its account, its scopes and its limits.
 */
import type { Limits } from '../limits/plans.ts';
import type { Scope } from './scopes.ts';

export interface Caller extends Limits {
  /** The key's id (never the key itself). */
  id: string;
  /** The key's account: orders belong to accounts. */
  account: string;
  scopes: readonly Scope[];
}

/** The caller as the event log records who made a change: its account and its key's id. */
export function actorOf(caller: Pick<Caller, 'account' | 'id'>): { account: string; keyId: string } {
  return { account: caller.account, keyId: caller.id };
}
