/** A PostgreSQL URL without its password, for the `listening` line and the start errors. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parsePostgresUrl, withOneHost, withoutPassword } from '../../src/lib/postgres-url.ts';

test('the password goes, from the user part and from a password parameter; everything else stays', () => {
  assert.equal(withoutPassword('postgres://pets:s3cret@db:5432/pets'), 'postgres://pets@db:5432/pets');
  assert.equal(withoutPassword('postgresql://pets:s%40cret@h1:5432,h2:5432/pets?target_session_attrs=read-write'),
    'postgresql://pets@h1:5432,h2:5432/pets?target_session_attrs=read-write');
  assert.equal(withoutPassword('postgres://db/pets?sslmode=require&password=s3cret'), 'postgres://db/pets?sslmode=require&password=(hidden)');
  assert.equal(withoutPassword('postgres://pets@db'), 'postgres://pets@db');
  assert.equal(withoutPassword('postgres://:s3cret@db/pets'), 'postgres://@db/pets');
});

test('the hosts are read in order, as the driver tries them', () => {
  assert.deepEqual(parsePostgresUrl('postgres://u@h1:5432,h2,10.0.0.3:6432/db?target_session_attrs=read-write'),
    { hosts: [{ host: 'h1', port: 5432 }, { host: 'h2', port: 5432 }, { host: '10.0.0.3', port: 6432 }], targetSessionAttrs: 'read-write' });
  assert.deepEqual(parsePostgresUrl('postgres://u:p@db:6000/x'), { hosts: [{ host: 'db', port: 6000 }], targetSessionAttrs: null });
  assert.deepEqual(parsePostgresUrl('postgres://u@[::1]/x'), { hosts: [{ host: '::1', port: 5432 }], targetSessionAttrs: null });
});

test('one host of a list, to ask it alone: the user, password, database and other parameters stay, target_session_attrs goes', () => {
  assert.equal(withOneHost('postgres://pets:s%40cret@h1:5432,h2:6432/pets?target_session_attrs=read-write&sslmode=require', 'h2', 6432),
    'postgres://pets:s%40cret@h2:6432/pets?sslmode=require');
  assert.equal(withOneHost('postgresql://h1,h2/pets?target_session_attrs=primary', 'h1', 5432), 'postgresql://h1:5432/pets');
});
