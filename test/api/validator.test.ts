import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../../src/http/api-error.ts';
import { validateBody, validatePath, validateQuery } from '../../src/api/validator.ts';
import { getPetParameters, listPetsParameters, newPetSchema, newWebhookSchema, petPatchSchema, webhookPatchSchema } from '../../src/api/schemas.ts';
import { EVENT_TYPES } from '../../src/storage/events.ts';

function rejects(run: () => unknown, code: string, ...named: string[]): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof ApiError);
    assert.equal(error.code, code);
    for (const name of named) assert.match(error.message, new RegExp(name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    return true;
  });
}

test('a valid new pet passes and an omitted status defaults to available', () => {
  assert.deepEqual(validateBody({ name: 'Rex', categoryId: 3n }, newPetSchema), { name: 'Rex', categoryId: 3n, status: 'available' });
  assert.deepEqual(validateBody({ status: 'sold', categoryId: 9223372036854775807n, name: ' a ' }, newPetSchema), {
    name: ' a ', categoryId: 9223372036854775807n, status: 'sold',
  });
});

test('a body that is not an object is invalid_body', () => {
  for (const value of [null, [], 'x', 1n, true]) rejects(() => validateBody(value, newPetSchema), 'invalid_body');
});

test('the message names every bad field at once', () => {
  rejects(() => validateBody({ name: '', categoryId: 0n, status: null, id: 1n, extra: 1 }, newPetSchema),
    'invalid_body', 'name', 'categoryId', 'status', '"id"', '"extra"');
  rejects(() => validateBody({}, newPetSchema), 'invalid_body', 'name is required', 'categoryId is required');
});

test('name: 1 to 100 code points, not blank, no control characters, no lone surrogates', () => {
  const ok = (name: string) => validateBody({ name, categoryId: 1n }, newPetSchema);
  assert.equal(ok('x'.repeat(100)).name, 'x'.repeat(100));
  assert.equal(ok('🐶'.repeat(100)).name, '🐶'.repeat(100), 'an astral character counts once');
  assert.equal(ok('Zoë  the\tcat'.replace('\t', ' ')).name, 'Zoë  the cat');
  for (const name of ['', ' ', '\u00a0\u2003', 'x'.repeat(101), '🐶'.repeat(101), 'a\u0000', 'a\nb', 'a\u007f', 'a\u0085', 'a\u009f', 'a\ud800', '\udc00b']) {
    rejects(() => ok(name), 'invalid_body', 'name');
  }
  for (const name of [1n, null, ['x'], { x: 1 }]) rejects(() => validateBody({ name, categoryId: 1n }, newPetSchema), 'invalid_body', 'name');
});

test('categoryId must be an int64 bigint of at least 1, never a number or a string', () => {
  for (const categoryId of [0n, -1n, 9223372036854775808n, 1, 1.5, '5', null, true]) {
    rejects(() => validateBody({ name: 'x', categoryId }, newPetSchema), 'invalid_body', 'categoryId');
  }
});

test('status must be one of the three values; null is not a value', () => {
  for (const status of ['AVAILABLE', 'adopted', '', null, 1n]) {
    rejects(() => validateBody({ name: 'x', categoryId: 1n, status }, newPetSchema), 'invalid_body', 'status');
  }
});

test('__proto__ and friends are unknown properties, not prototype changes', () => {
  const body = JSON.parse('{"name":"x","categoryId":1,"__proto__":{"admin":true}}');
  body.categoryId = 1n;
  rejects(() => validateBody(body, newPetSchema), 'invalid_body', '"__proto__"');
});

// --- the merge patch of updatePet (contract 1.1) -------------------------------------------

test('a patch may hold any of name, categoryId and status; nothing is required and nothing is defaulted', () => {
  assert.deepEqual(validateBody({}, petPatchSchema), {}, '{} changes nothing: no status appears');
  assert.deepEqual(validateBody({ status: 'sold' }, petPatchSchema), { status: 'sold' });
  assert.deepEqual(validateBody({ categoryId: 9223372036854775807n }, petPatchSchema), { categoryId: 9223372036854775807n });
  assert.deepEqual(validateBody({ status: 'available', name: ' Rex ', categoryId: 2n }, petPatchSchema), { name: ' Rex ', categoryId: 2n, status: 'available' });
});

test('a patch field follows its creation rule', () => {
  for (const name of ['', ' ', 'x'.repeat(101), 'a\u0000', 'a\ud800', 5n]) rejects(() => validateBody({ name }, petPatchSchema), 'invalid_body', 'name');
  for (const categoryId of [0n, -1n, 9223372036854775808n, 1, '5', true]) rejects(() => validateBody({ categoryId }, petPatchSchema), 'invalid_body', 'categoryId');
  for (const status of ['SOLD', 'adopted', '', 1n]) rejects(() => validateBody({ status }, petPatchSchema), 'invalid_body', 'status');
});

test('null is refused for every field of a patch: no field can be removed', () => {
  for (const field of ['name', 'categoryId', 'status']) rejects(() => validateBody({ [field]: null }, petPatchSchema), 'invalid_body', `${field} must be`, 'not null');
});

test('a patch with any other property, id included, is refused, and the message names every bad field', () => {
  for (const extra of ['id', 'version', 'owner', '__proto__', 'Name']) {
    const body = JSON.parse(`{"${extra}":1}`);
    rejects(() => validateBody(body, petPatchSchema), 'invalid_body', `"${extra}"`);
  }
  rejects(() => validateBody({ id: 1n, name: null, categoryId: 1.5, status: 'lost', owner: 'x' }, petPatchSchema), 'invalid_body', '"id"', '"owner"', 'name', 'categoryId', 'status');
});

test('a patch that is not a JSON object is refused (RFC 7396 would replace the whole pet with it)', () => {
  for (const value of [null, [], [{ name: 'x' }], 'x', 1n, true]) rejects(() => validateBody(value, petPatchSchema), 'invalid_body');
});

test('list query: defaults, leading zeros, each value checked', () => {
  assert.deepEqual(validateQuery(new URLSearchParams(''), listPetsParameters), { limit: 20 });
  assert.deepEqual(validateQuery(new URLSearchParams('limit=05&status=sold&cursor=abc'), listPetsParameters), {
    limit: 5, status: 'sold', cursor: 'abc',
  });
  assert.deepEqual(validateQuery(new URLSearchParams('limit=100'), listPetsParameters), { limit: 100 });
  for (const limit of ['0', '101', '-1', '+5', '5.0', '1e1', '', ' 5', 'abc', '99999999999999999999999']) {
    rejects(() => validateQuery(new URLSearchParams({ limit }), listPetsParameters), 'invalid_query', 'limit');
  }
  rejects(() => validateQuery(new URLSearchParams('status=lost'), listPetsParameters), 'invalid_query', 'status');
  rejects(() => validateQuery(new URLSearchParams('cursor='), listPetsParameters), 'invalid_query', 'cursor');
});

test('list query: unknown and repeated parameters are named', () => {
  rejects(() => validateQuery(new URLSearchParams('offset=5'), listPetsParameters), 'invalid_query', '"offset"');
  rejects(() => validateQuery(new URLSearchParams('limit=5&limit=6'), listPetsParameters), 'invalid_query', '"limit" is repeated');
  rejects(() => validateQuery(new URLSearchParams('status=sold&status=sold'), listPetsParameters), 'invalid_query', '"status"');
});

test('petId: an int64 in decimal with optional minus and leading zeros', () => {
  assert.deepEqual(validatePath({ petId: '42' }, getPetParameters), { petId: 42n });
  assert.deepEqual(validatePath({ petId: '-0007' }, getPetParameters), { petId: -7n });
  assert.deepEqual(validatePath({ petId: '000000000000000000000009223372036854775807' }, getPetParameters), { petId: 9223372036854775807n });
  for (const petId of ['', 'abc', '1.0', '+1', '9223372036854775808', '-9223372036854775809', '1e3', '%31', ' 1']) {
    rejects(() => validatePath({ petId }, getPetParameters), 'invalid_path', 'petId');
  }
});

// --- bounded messages, linear passes --------------------------------------------------------

/** The problems a message names, without its prefix and its count of the others. */
function namedProblems(message: string): string[] {
  return message.replace(/^[^:]*: /, '').replace(/(; and \d+ more)?\.$/, '').split('; ');
}

test('a message names at most five problems and counts the others exactly', () => {
  const body = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`extra${i}`, 1n]));
  assert.throws(() => validateBody(body, newPetSchema), (error: ApiError) => {
    // name and categoryId are missing: 14 problems, 5 named, 9 counted.
    assert.deepEqual(namedProblems(error.message), ['name is required', 'categoryId is required', '"extra0" is not a known property', '"extra1" is not a known property', '"extra2" is not a known property']);
    assert.match(error.message, /; and 9 more\.$/);
    return true;
  });
  const query = new URLSearchParams(['x0=1', 'limit=0', 'x1=1'].join('&'));
  assert.throws(() => validateQuery(query, listPetsParameters), (error: ApiError) => {
    assert.deepEqual(namedProblems(error.message), ['limit must be an integer from 1 to 100', '"x0" is not a known parameter', '"x1" is not a known parameter']);
    assert.doesNotMatch(error.message, /more/);
    return true;
  });
});

test('the operation\'s own fields and parameters are named before any unknown one, however many there are', () => {
  const body: Record<string, unknown> = {};
  for (let i = 0; i < 1_000; i++) body[`x${i}`] = 1n;
  Object.assign(body, { name: '', categoryId: 0n, status: 'lost' });
  assert.throws(() => validateBody(body, newPetSchema), (error: ApiError) => {
    assert.deepEqual(namedProblems(error.message).map((problem) => problem.split(' ')[0]), ['name', 'categoryId', 'status', '"x0"', '"x1"']);
    assert.match(error.message, /; and 998 more\.$/);
    return true;
  });
});

test('a name the client sent is quoted up to 32 bytes, so no message grows with the request', () => {
  const long = 'n'.repeat(10_000);
  assert.throws(() => validateBody({ [long]: 1n, name: 'x', categoryId: 1n }, newPetSchema), (error: ApiError) => {
    assert.equal(error.message, `Invalid body: "${'n'.repeat(32)}..." is not a known property.`);
    return true;
  });
  const names = Array.from({ length: 3_000 }, (_, i) => `${'\u0001'.repeat(40)}${i}`);
  for (const run of [
    () => validateBody(Object.fromEntries(names.map((name) => [name, 1n])), newPetSchema),
    () => validateQuery(new URLSearchParams(names.map((name): [string, string] => [name, '1'])), listPetsParameters),
  ]) {
    assert.throws(run, (error: ApiError) => {
      assert.ok(error.message.length < 450, `${error.message.length} characters: ${error.message}`);
      return true;
    });
  }
});

test('repeated names are found in one pass: 2,000 names sent twice are refused, naming a few', () => {
  const names = Array.from({ length: 2_000 }, (_, i) => `p${i}`);
  const query = new URLSearchParams([...names, ...names, 'limit=1', 'limit=2'].join('&'));
  assert.throws(() => validateQuery(query, listPetsParameters), (error: ApiError) => {
    assert.equal(error.code, 'invalid_query');
    // More parameters than any operation takes: refused after reading a few of them.
    assert.match(error.message, /^Invalid query: 4002 parameters, more than any operation takes \(4\): "p0" is not a known parameter; /);
    assert.equal(namedProblems(error.message).length, 5);
    return true;
  });
  // As many parameters as an operation may take: every value read, the repeat named.
  rejects(() => validateQuery(new URLSearchParams('limit=1&limit=2&status=x'), listPetsParameters), 'invalid_query', '"limit" is repeated', 'status must be');
  rejects(() => validateQuery(new URLSearchParams('x=1&x=2'), listPetsParameters), 'invalid_query', '"x" is not a known parameter');
});

test('a query of many copies of one known name is refused early and names it', () => {
  rejects(() => validateQuery(new URLSearchParams('limit=1&'.repeat(3_000)), listPetsParameters), 'invalid_query', '3000 parameters', '"limit" is repeated');
  rejects(() => validateQuery(new URLSearchParams('a=1&b=1&c=1&d=1'), []), 'invalid_query', '"a" is not a known parameter');
});

test('a webhook: url required, orders defaults to own, types left out when omitted (the handler fills in all of them)', () => {
  assert.deepEqual(validateBody({ url: 'https://hooks.example/a' }, newWebhookSchema), { url: 'https://hooks.example/a', orders: 'own' });
  assert.deepEqual(validateBody({ url: 'https://x.example/', types: ['order.placed', 'pet.created'], orders: 'all' }, newWebhookSchema), {
    url: 'https://x.example/', types: ['order.placed', 'pet.created'], orders: 'all',
  });
  assert.deepEqual(validateBody({ url: 'https://x.example/', types: [...EVENT_TYPES] }, newWebhookSchema).types, [...EVENT_TYPES]);
  rejects(() => validateBody({}, newWebhookSchema), 'invalid_body', 'url is required');
});

test('webhook types: an array of 1 to 7 distinct event types; empty, unknown, repeated or not an array is refused, naming why', () => {
  const refused = (types: unknown, ...named: string[]) => rejects(() => validateBody({ url: 'https://x.example/', types }, newWebhookSchema), 'invalid_body', 'types must be an array of 1 to 7 distinct items', ...named);
  refused([], 'not an empty array');
  refused(['pet.created', 'pet.created'], '"pet.created" is repeated');
  refused(['pet.created', 'pet.adopted']);
  refused(['PET.CREATED']);
  refused('pet.created');
  refused(null, 'not null');
  refused([1n]);
  refused([['pet.created']]);
  refused([...EVENT_TYPES, 'pet.created']);
  refused(Array.from({ length: 10_000 }, () => 'pet.created'));
});

test('webhook orders: own or all; a patch may hold any of url, types, orders and status, with no default', () => {
  rejects(() => validateBody({ url: 'https://x.example/', orders: 'mine' }, newWebhookSchema), 'invalid_body', 'orders must be one of own, all');
  assert.deepEqual(validateBody({}, webhookPatchSchema), {});
  assert.deepEqual(validateBody({ status: 'disabled', types: ['pet.deleted'] }, webhookPatchSchema), { status: 'disabled', types: ['pet.deleted'] });
  rejects(() => validateBody({ status: 'paused', url: null, types: [], secret: 'x' }, webhookPatchSchema), 'invalid_body', 'status', 'url', 'types', '"secret"');
  rejects(() => validateBody({ url: 'x'.repeat(2049) }, webhookPatchSchema), 'invalid_body', 'url must be a string of 1 to 2048 characters');
});
