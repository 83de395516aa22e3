/** Which unhandled rejection of the driver the process lets go (src/storage/postgres/driver.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isDroppedTypesQuery } from '../../../src/storage/postgres/driver.ts';

test('only the failure of the driver\'s own query of array types is let go', () => {
  // As the driver sends it first on each new connection, and attaches it to the error it rejects with.
  const typesQuery = `
      select b.oid, b.typarray
      from pg_catalog.pg_type a
      left join pg_catalog.pg_type b on b.oid = a.typelem
      where a.typcategory = 'A'
      group by b.oid, b.typarray
      order by b.oid
    `;
  assert.equal(isDroppedTypesQuery(Object.assign(new Error('server conn crashed?'), { code: '08P01', query: typesQuery })), true);
  assert.equal(isDroppedTypesQuery(Object.assign(new Error('x'), { code: '08P01', query: 'SELECT 1' })), false);
  assert.equal(isDroppedTypesQuery(new TypeError('a bug of ours')), false);
  assert.equal(isDroppedTypesQuery(null), false);
});
