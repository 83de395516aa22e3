/** Which unhandled rejection and which uncaught exception of the driver the process lets go (src/storage/postgres/driver.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { isDroppedTypesQuery, isWriteAfterClose } from '../../../src/storage/postgres/driver.ts';
import { describeWithPostgres } from '../../support/postgres.ts';

const run = promisify(execFile);

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

/** A TypeError whose stack is `frames` (as V8 writes them, one per line). */
function typeErrorWith(frames: string[]): TypeError {
  return Object.assign(new TypeError("Cannot read properties of null (reading 'write')"), {
    stack: ["TypeError: Cannot read properties of null (reading 'write')", ...frames.map((frame) => `    at ${frame}`)].join('\n'),
  });
}

test('only the driver\'s own write to a closed connection is let go, recognised by its first frame', () => {
  assert.equal(isWriteAfterClose(typeErrorWith(['Immediate.nextWrite (file:///srv/pets/node_modules/postgres/src/connection.js:255:22)', 'process.processImmediate (node:internal/timers:574:21)'])), true);
  assert.equal(isWriteAfterClose(typeErrorWith(['nextWrite (C:\\srv\\pets\\node_modules\\postgres\\src\\connection.js:255:22)'])), true);
  // The same message from anywhere else is a fault of ours, or of another package.
  assert.equal(isWriteAfterClose(typeErrorWith(['list (file:///srv/pets/src/storage/postgres/pets-store.ts:12:5)', 'Immediate.nextWrite (file:///srv/pets/node_modules/postgres/src/connection.js:255:22)'])), false);
  assert.equal(isWriteAfterClose(typeErrorWith(['Immediate.nextWrite (file:///srv/pets/node_modules/other/src/connection.js:255:22)'])), false);
  assert.equal(isWriteAfterClose(typeErrorWith(['Immediate.write (file:///srv/pets/node_modules/postgres/src/connection.js:255:22)'])), false);
  assert.equal(isWriteAfterClose(Object.assign(new Error('x'), { stack: typeErrorWith(['Immediate.nextWrite (file:///srv/pets/node_modules/postgres/src/connection.js:255:22)']).stack })), false);
  assert.equal(isWriteAfterClose(null), false);
});

describeWithPostgres('the driver on a connection PostgreSQL ended', (cluster) => {
  test('the exception the installed driver throws, from no caller, when a reserved connection\'s session was ended is the one let go', async () => {
    const url = await cluster().createDatabase();
    const script = fileURLToPath(new URL('../../support/write-after-close.ts', import.meta.url));
    const { stdout } = await run(process.execPath, [script, url], { encoding: 'utf8', timeout: 60_000 });
    const thrown = JSON.parse(stdout.trim()) as { name?: string; stack?: string; hung?: number };
    // A driver that no longer throws here (fixed upstream) makes this fail: then the handler can go.
    assert.equal(thrown.hung, undefined, 'the driver never wrote to the closed connection in 5 tries');
    assert.equal(thrown.name, 'TypeError');
    assert.equal(isWriteAfterClose(Object.assign(new TypeError('as thrown'), { stack: thrown.stack })), true, thrown.stack);
  });
});
