/**
 * The webhook URL and address policy: every address form that is not public is refused in every
 * spelling a URL can give it, with a reason that names it; names are judged by every address they
 * resolve to; the operator's allowed networks open exactly themselves, and plain http only there.
 * No test here connects anywhere: public addresses are only ever checked, never called.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAddressPolicy, vetWebhookUrl } from '../../src/webhooks/address-policy.ts';
import { MAX_URL_LENGTH } from '../../src/webhooks/terms.ts';
import { systemResolver, type Resolver } from '../../src/http/outbound-resolution.ts';
import { REFUSED_ADDRESS_FORMS } from '../support/webhook-addresses.ts';

const none = createAddressPolicy([]);
const signal = new AbortController().signal;

/** A resolver of fixed answers; any other name does not exist. */
function resolverOf(answers: Record<string, string[]>): Resolver {
  return async (hostname) => {
    const addresses = answers[hostname];
    if (addresses === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}


for (const [url, reason] of REFUSED_ADDRESS_FORMS) {
  test(`refused: ${url}`, () => {
    const checked = none.checkUrl(url);
    assert.equal(checked.ok, false, url);
    if (!checked.ok) {
      assert.match(checked.reason, /^url's host /);
      assert.match(checked.reason, reason);
    }
  });
}

test('public addresses and names are accepted over https, and the URL is kept as the parser normalises it', () => {
  for (const url of ['https://93.184.216.34/hook', 'https://[2606:4700:4700::1111]/x', 'https://hooks.example/store?kind=pets', 'https://1.1.1.1:8443/', 'https://[::ffff:8.8.8.8]/']) {
    const checked = none.checkUrl(url);
    assert.ok(checked.ok, url);
  }
  const checked = none.checkUrl('HTTPS://Hooks.Example:443/a/../b?x=1');
  assert.ok(checked.ok);
  assert.equal(checked.value.url.href, 'https://hooks.example/b?x=1');
  assert.equal(checked.value.hostname, 'hooks.example');
  const ipv6 = none.checkUrl('https://[2606:4700:4700:0::1111]:8443/');
  assert.ok(ipv6.ok);
  assert.equal(ipv6.value.hostname, '2606:4700:4700::1111', 'without brackets, to resolve and to connect to');
});

test('a URL of the wrong form is refused, saying what is wrong', () => {
  const cases: [string, RegExp][] = [
    ['hooks.example/store', /absolute URL/],
    ['//hooks.example/store', /absolute URL/],
    ['https:hooks.example/store', /absolute URL/],
    ['https:/hooks.example/store', /absolute URL/],
    ['https://', /absolute URL/],
    ['', /absolute URL/],
    ['https://[fe80::1%25eth0]/', /absolute URL/],
    ['ftp://hooks.example/', /must use https:/],
    ['wss://hooks.example/', /must use https:/],
    ['javascript://hooks.example/%0aalert(1)', /must use https:/],
    ['https://user@hooks.example/', /user information/],
    ['https://user:secret@hooks.example/', /user information/],
    ['https://:secret@hooks.example/', /user information/],
    ['https://hooks.example/#section', /fragment/],
    ['https://hooks.example/#', /fragment/],
    ['https://hooks.example/ store', /spaces, control characters/],
    ['https://hooks.example/\tstore', /spaces, control characters/],
    ['https://hooks.example/store\n', /spaces, control characters/],
    [' https://hooks.example/', /spaces, control characters/],
    ['https:\\\\hooks.example\\store', /backslashes/],
    [`https://hooks.example/${'a'.repeat(MAX_URL_LENGTH)}`, /at most 2048 characters$/],
    [`https://hooks.example/${'é'.repeat(700)}`, /at most 2048 characters once percent-encoded/],
  ];
  for (const [url, reason] of cases) {
    const checked = none.checkUrl(url);
    assert.equal(checked.ok, false, url);
    if (!checked.ok) assert.match(checked.reason, reason, url);
  }
  assert.ok(none.checkUrl(`https://hooks.example/${'a'.repeat(MAX_URL_LENGTH - 'https://hooks.example/'.length)}`).ok, '2048 characters exactly');
});

test('plain http is refused outside the allowed networks, even to a public address', () => {
  for (const url of ['http://93.184.216.34/', 'http://[2606:4700:4700::1111]/']) {
    const checked = none.checkUrl(url);
    assert.equal(checked.ok, false);
    if (!checked.ok) assert.match(checked.reason, /where alone http: may be used: use https:/);
  }
});

test('the allowed networks open exactly themselves, in every spelling, and http inside them', () => {
  const policy = createAddressPolicy(['127.0.0.0/8', 'fd00::/8', '10.1.0.0/16']);
  for (const url of ['http://127.0.0.1:8080/hook', 'https://0x7f.1/', 'http://2130706433/', 'http://[::ffff:127.0.0.1]/', 'http://[fd00::1]/', 'https://10.1.2.3/']) {
    assert.ok(policy.checkUrl(url).ok, url);
  }
  for (const url of ['https://10.2.0.1/', 'https://169.254.169.254/', 'https://[::1]/', 'https://[fe80::1]/', 'http://93.184.216.34/']) {
    assert.equal(policy.checkUrl(url).ok, false, url);
  }
  // A public address inside an allowed network may use http too.
  assert.ok(createAddressPolicy(['93.184.216.0/24']).checkUrl('http://93.184.216.34/').ok);
});

test('an IPv6 form is refused for the IPv4 address it carries, even inside an allowed network, unless that address is allowed too', () => {
  const nat64 = createAddressPolicy(['64:ff9b::/96']);
  const refused = nat64.checkUrl('https://[64:ff9b::7f00:1]/');
  assert.equal(refused.ok, false);
  if (!refused.ok) assert.match(refused.reason, /form of 127\.0\.0\.1, which is loopback/);
  assert.ok(nat64.checkUrl('https://[64:ff9b::808:808]/').ok, 'a public IPv4 address through an allowed translator');
  assert.ok(createAddressPolicy(['64:ff9b::/96', '127.0.0.0/8']).checkUrl('https://[64:ff9b::7f00:1]/').ok);
});

test('at creation a name is judged by every address it resolves to: one refused address refuses it', async () => {
  const resolve = resolverOf({
    'hooks.example': ['93.184.216.34', '2606:4700:4700::1111'],
    'mixed.example': ['93.184.216.34', '10.0.0.5'],
    'inside.example': ['169.254.169.254'],
    'mapped.example': ['::ffff:127.0.0.1'],
    'empty.example': [],
  });
  assert.ok((await vetWebhookUrl('https://hooks.example/store', none, resolve, signal)).ok);
  const cases: [string, RegExp][] = [
    ['https://mixed.example/', /^url's host "mixed\.example" resolves to 10\.0\.0\.5, which is private-use \(RFC 1918\), not a public address$/],
    ['https://inside.example/', /resolves to 169\.254\.169\.254, which is link-local/],
    ['https://mapped.example/', /resolves to ::ffff:127\.0\.0\.1, which is loopback/],
    ['https://unknown.example/', /^url's host "unknown\.example" does not resolve \(ENOTFOUND\)$/],
    ['https://empty.example/', /does not resolve \(ENOTFOUND\)/],
    ['http://hooks.example/', /resolves to 93\.184\.216\.34, which is outside the networks the operator allows, where alone http: may be used/],
    ['https://127.0.0.1/', /^url's host 127\.0\.0\.1 is loopback/],
  ];
  for (const [url, reason] of cases) {
    const vetted = await vetWebhookUrl(url, none, resolve, signal);
    assert.equal(vetted.ok, false, url);
    if (!vetted.ok) assert.match(vetted.reason, reason, url);
  }
});

test('names of this machine are refused by what they resolve to, however the URL spells them', async () => {
  for (const url of ['https://localhost/', 'https://LOCALHOST:8443/', 'https://%6c%6f%63%61%6c%68%6f%73%74/']) {
    const vetted = await vetWebhookUrl(url, none, systemResolver, signal);
    assert.equal(vetted.ok, false, url);
    if (!vetted.ok) assert.match(vetted.reason, /resolves to (127\.0\.0\.1|::1), which is loopback/, url);
  }
  // With its trailing dot the name is absolute: the system's resolver may not find it in
  // /etc/hosts (refused as not resolving); a DNS that answers it gets it judged like any name.
  assert.equal((await vetWebhookUrl('https://localhost./', none, systemResolver, signal)).ok, false);
  const vetted = await vetWebhookUrl('https://hooks.example./', none, resolverOf({ 'hooks.example.': ['127.0.0.1'] }), signal);
  assert.equal(vetted.ok, false);
  if (!vetted.ok) assert.match(vetted.reason, /"hooks\.example\." resolves to 127\.0\.0\.1, which is loopback/);
});

test('a reason quotes a long host name cut short, so a message stays small', async () => {
  const name = `${'a'.repeat(60)}.example`;
  const vetted = await vetWebhookUrl(`https://${name}/`, none, resolverOf({ [name]: ['10.0.0.1'] }), signal);
  assert.equal(vetted.ok, false);
  if (!vetted.ok) {
    assert.ok(vetted.reason.length < 160, vetted.reason);
    assert.match(vetted.reason, /"a{32}\.\.\."/);
  }
});

test('a URL longer than the limit is refused for its length before it is parsed', () => {
  const checked = none.checkUrl(`https://${'1.'.repeat(1_000_000)}1/`);
  assert.equal(checked.ok, false);
  if (!checked.ok) assert.match(checked.reason, /at most 2048 characters$/);
});
