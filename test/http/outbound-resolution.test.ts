/**
 * Resolving an outbound request's host: an address is never looked up, every address of a name
 * is checked and one refused refuses it, a failed or abandoned lookup says its code, and the
 * connection's lookup answers only with the addresses checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { codeOf, lookupFrom, resolveChecked, systemResolver, type Resolver } from '../../src/http/outbound-resolution.ts';
import { formatIp, type IpAddress } from '../../src/lib/ip-address.ts';

const signal = new AbortController().signal;
/** Refuses 10.0.0.0/8 only. */
const refusal = (address: IpAddress) => (formatIp(address).startsWith('10.') ? 'is private' : null);
const never: Resolver = () => assert.fail('an address is not looked up');

test('an IP address is its own resolution, checked, with no lookup', async () => {
  assert.deepEqual(await resolveChecked('93.184.216.34', { resolve: never, refusal, signal }), { addresses: [{ address: '93.184.216.34', family: 4 }] });
  assert.deepEqual(await resolveChecked('2606:4700::1', { resolve: never, refusal, signal }), { addresses: [{ address: '2606:4700::1', family: 6 }] });
  assert.deepEqual(await resolveChecked('10.0.0.1', { resolve: never, refusal, signal }), { refused: '10.0.0.1 is private' });
});

test('a name is refused when any one of its addresses is refused, wherever it comes in the answer', async () => {
  const answers = [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.1', family: 4 }] as const;
  for (const order of [answers, [...answers].reverse()]) {
    const resolution = await resolveChecked('hooks.example', { resolve: async () => order, refusal, signal });
    assert.deepEqual(resolution, { refused: '"hooks.example" resolves to 10.0.0.1, which is private' });
  }
  const odd = await resolveChecked('hooks.example', { resolve: async () => [{ address: 'not-an-address', family: 4 }], refusal, signal });
  assert.deepEqual(odd, { refused: '"hooks.example" resolves to "not-an-address", which is not an IP address' });
});

test('every address of an allowed name is kept, in the order the resolver gave', async () => {
  const answers = [{ address: '2606:4700::1', family: 6 }, { address: '93.184.216.34', family: 4 }] as const;
  assert.deepEqual(await resolveChecked('hooks.example', { resolve: async () => answers, refusal, signal }), { addresses: answers });
});

test('a failed lookup gives its code, an empty one ENOTFOUND, an abandoned one ABORT_ERR', async () => {
  const failing: Resolver = async () => {
    throw Object.assign(new Error('queryA ETIMEOUT hooks.example'), { code: 'ETIMEOUT' });
  };
  assert.deepEqual(await resolveChecked('hooks.example', { resolve: failing, refusal, signal }), { failed: 'ETIMEOUT' });
  assert.deepEqual(await resolveChecked('hooks.example', { resolve: async () => [], refusal, signal }), { failed: 'ENOTFOUND' });
  const deadline = new AbortController();
  const hanging = resolveChecked('hooks.example', { resolve: () => new Promise(() => {}), refusal, signal: deadline.signal });
  deadline.abort();
  assert.deepEqual(await hanging, { failed: 'ABORT_ERR' });
  assert.deepEqual(await resolveChecked('hooks.example', { resolve: never, refusal, signal: deadline.signal }), { failed: 'ABORT_ERR' }, 'already aborted: not even asked');
});

test('an error\'s code is told, never its message', () => {
  assert.equal(codeOf(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' })), 'ECONNREFUSED');
  assert.equal(codeOf(new Error('secret detail')), 'UNKNOWN');
  assert.equal(codeOf(Object.assign(new Error('x'), { code: 'not a code: a sentence' })), 'UNKNOWN');
  assert.equal(codeOf(null), 'UNKNOWN');
});

/** What a node:net lookup answers, as a promise. */
function ask(lookup: ReturnType<typeof lookupFrom>, name: string, options: { all?: boolean; family?: number }) {
  return new Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }>((resolve) => {
    lookup(name, options, (error, address, family) => resolve({ error, address, family }));
  });
}

test('the connection\'s lookup answers with the checked addresses only, of the family asked, and no other name', async () => {
  const lookup = lookupFrom('hooks.example', [{ address: '2606:4700::1', family: 6 }, { address: '93.184.216.34', family: 4 }]);
  assert.deepEqual((await ask(lookup, 'hooks.example', { all: true })).address, [{ address: '2606:4700::1', family: 6 }, { address: '93.184.216.34', family: 4 }]);
  assert.deepEqual(await ask(lookup, 'hooks.example', {}), { error: null, address: '2606:4700::1', family: 6 });
  assert.deepEqual(await ask(lookup, 'hooks.example', { family: 4 }), { error: null, address: '93.184.216.34', family: 4 });
  assert.equal((await ask(lookup, 'other.example', { all: true })).error?.code, 'ENOTFOUND');
  assert.equal((await ask(lookupFrom('v4.example', [{ address: '93.184.216.34', family: 4 }]), 'v4.example', { family: 6 })).error?.code, 'ENOTFOUND');
});

test('the system resolver answers every address of a name from /etc/hosts', async () => {
  const addresses = await systemResolver('localhost');
  assert.ok(addresses.length >= 1);
  for (const { address, family } of addresses) assert.ok(['127.0.0.1', '::1'].includes(address) && (family === 4 || family === 6), address);
});
