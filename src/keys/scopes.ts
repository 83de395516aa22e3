/**
 * The scopes of API keys: what a key may do. Every operation names the least scope it needs (its
 * entry in src/api/operations.ts); a key without it gets `403 insufficient_scope`.
 *
 * `orders:manage` includes everything `orders:write` allows, on every account's orders; the two
 * pet scopes are separate, so a key can read the catalogue without being able to change it. A
 * key gets only the scopes it is given: the keys command refuses a key without `--scopes`, so
 * that no key can do everything unless someone asked for it.
 */

/** Every scope, in the order the keys command and the documentation list them. */
export const SCOPES = ['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read', 'webhooks:manage'] as const;
export type Scope = (typeof SCOPES)[number];

/** What each scope allows, as the OpenAPI document and the keys command's usage say it. */
export const SCOPE_MEANINGS: Readonly<Record<Scope, string>> = {
  'pets:read': 'read pets and the inventory',
  'pets:write': 'add, change and delete pets',
  'orders:write': 'place orders, read and cancel the account\'s own orders',
  'orders:manage': 'what orders:write allows, on every account\'s orders; approve and complete orders',
  'events:read': 'read the event feed',
  'webhooks:manage': 'manage the account\'s webhooks',
};

/** Scopes that include another one. */
const INCLUDED: Readonly<Partial<Record<Scope, Scope>>> = { 'orders:write': 'orders:manage' };

export function isScope(text: string): text is Scope {
  return (SCOPES as readonly string[]).includes(text);
}

/** Whether a key with `granted` may do what needs `needed`. */
export function allows(granted: readonly Scope[], needed: Scope): boolean {
  if (granted.includes(needed)) return true;
  const wider = INCLUDED[needed];
  return wider !== undefined && granted.includes(wider);
}

/** The scopes in the order of SCOPES, each once. */
export function orderedScopes(scopes: Iterable<Scope>): Scope[] {
  const set = new Set(scopes);
  return SCOPES.filter((scope) => set.has(scope));
}

/** As stored: space-separated, in the order of SCOPES (the form of OAuth's `scope`, RFC 6749). */
export function formatScopes(scopes: readonly Scope[]): string {
  return orderedScopes(scopes).join(' ');
}

/** The stored text back to scopes; anything else is a corrupt row, a programmer error. */
export function parseStoredScopes(text: string): Scope[] {
  const scopes = text.split(' ');
  if (scopes.length === 0 || !scopes.every(isScope)) throw new TypeError(`not a list of scopes: ${JSON.stringify(text)}`);
  return scopes;
}
