/**
 * The Standard Webhooks signature and secrets: the specification's own example signs as it
 * says, the reference library and Svix's verify what we sign and refuse what was changed, and a
 * secret is 32 random bytes in the form those libraries read.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { deliveryHeaders, generateSecret, isSecret, signatureOf } from '../../src/webhooks/signature.ts';

test('the specification\'s example is signed as the specification signs it', () => {
  // The example of the Standard Webhooks specification and of Svix's documentation.
  const signature = signatureOf('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
  assert.equal(signature, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
});

test('a secret is whsec_ and the standard base64 of 32 random bytes, and the libraries take it as it is', () => {
  const fixed = generateSecret(() => Buffer.alloc(32, 0xfb));
  assert.equal(fixed, `whsec_${Buffer.alloc(32, 0xfb).toString('base64')}`);
  assert.match(fixed, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const secrets = new Set(Array.from({ length: 100 }, () => generateSecret()));
  assert.equal(secrets.size, 100);
  for (const secret of secrets) {
    assert.ok(isSecret(secret));
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
    assert.doesNotThrow(() => new StandardWebhook(secret));
    assert.doesNotThrow(() => new SvixWebhook(secret));
  }
  for (const secret of ['', 'whsec_', 'whsec_abc', `whsec_${'A'.repeat(43)}`, `whsk_${'A'.repeat(43)}=`, `whsec_${Buffer.alloc(24).toString('base64')}`]) assert.equal(isSecret(secret), false, secret);
  assert.throws(() => signatureOf('whsec_not base64!', '1', 1, '{}'));
});

test('both libraries verify what is signed, and refuse a changed body, timestamp, id or secret', () => {
  const secret = generateSecret();
  const now = Math.floor(Date.now() / 1000);
  const body = '{"id":7,"type":"pet.created","occurredAt":"2026-11-28T10:00:00.000Z","actor":null,"data":{"id":3,"name":"Rex","categoryId":1,"status":"available"}}';
  const headers = deliveryHeaders(secret, '7', now, body);
  assert.deepEqual(Object.keys(headers), ['content-type', 'webhook-id', 'webhook-timestamp', 'webhook-signature']);
  assert.equal(headers['content-type'], 'application/json');
  const verifiers = { standardwebhooks: (s: string, h: Record<string, string>, b: string) => new StandardWebhook(s).verify(b, h), svix: (s: string, h: Record<string, string>, b: string) => new SvixWebhook(s).verify(b, h) };
  for (const [name, verify] of Object.entries(verifiers)) {
    assert.doesNotThrow(() => verify(secret, headers, body), name);
    assert.throws(() => verify(secret, headers, body.replace('Rex', 'Rey')), name);
    assert.throws(() => verify(secret, { ...headers, 'webhook-timestamp': String(now + 1) }, body), name);
    assert.throws(() => verify(secret, { ...headers, 'webhook-id': '8' }, body), name);
    assert.throws(() => verify(generateSecret(), headers, body), name);
  }
});
