/**
 * The reference page renders whatever the OpenAPI document holds: these tests read the page as
 * text against the document, and show that an operation added to the document appears with no
 * change to the page's code. How it looks and works is tested in Chromium
 * (test/browser/docs.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildOpenApiDocument } from '../../../src/api/openapi/document.ts';
import { renderReferencePage } from '../../../src/api/reference-page/reference-page.ts';
import { errorCodes, operationGroups, type Json } from '../../../src/api/reference-page/document.ts';
import { exampleOf, rulesOf } from '../../../src/api/reference-page/schema-text.ts';
import { ERROR_STATUS } from '../../../src/api/errors.ts';

const OPTIONS = { basePath: '/v1', documentPath: '/v1/openapi.json' };
const freshDocument = () => structuredClone(buildOpenApiDocument({ appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null })) as any;

/** The HTML of one operation's article. */
function article(page: string, operationId: string): string {
  const start = page.indexOf(`<article class="operation`, page.indexOf(`id="op-${operationId}"`) - 60);
  assert.ok(start >= 0, `an article for ${operationId}`);
  return page.slice(start, page.indexOf('</article>', start));
}

const text = (markup: string) => markup.replace(/<[^>]+>/g, '').replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');

test('every operation of the document has its section, its entry in the contents and a try-it form', () => {
  const document = freshDocument();
  const page = renderReferencePage(document, OPTIONS);
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) {
      const section = article(page, operation.operationId);
      assert.ok(page.includes(`href="#op-${operation.operationId}"`), `${operation.operationId} in the contents`);
      assert.ok(section.includes(`data-method="${method.toUpperCase()}" data-path="/v1${path}"`), `${operation.operationId} try-it form`);
      assert.ok(text(section).includes(operation.summary));
      for (const parameter of operation.parameters ?? []) {
        assert.ok(section.includes(`<code>${parameter.name}</code>`), `${operation.operationId} documents ${parameter.name}`);
        assert.ok(section.includes(`name="${parameter.name}" data-in="${parameter.in}"`), `${operation.operationId} form field ${parameter.name}`);
      }
      for (const status of Object.keys(operation.responses)) assert.ok(text(section).includes(status), `${operation.operationId} ${status}`);
      const scope = operation.security?.[0]?.bearerAuth?.[0];
      if (scope) assert.ok(text(section).includes(`Needs an API key with the scope ${scope}.`), `${operation.operationId} names its scope`);
    }
  }
  assert.match(text(article(page, 'updateOrder')), /Needs an API key with the scope orders:write\./);
  assert.match(text(article(page, 'getOpenApiDocument')), /API key optional\./);
});

test('every parameter and body field shows its rules', () => {
  const page = renderReferencePage(freshDocument(), OPTIONS);
  const list = text(article(page, 'listPets'));
  assert.match(list, /limit\s*query\s*integer \(int32\) · 1 to 100 · default 20/);
  assert.match(list, /status\s*query\s*PetStatus · one of "available", "pending", "sold"/);
  assert.match(list, /cursor\s*query\s*string · 1 to 64 characters/);
  const create = text(article(page, 'createPet'));
  assert.match(create, /name required\s*string · 1 to 100 characters · matches \^/);
  assert.match(create, /categoryId required\s*integer \(int64\) · 1 to 9223372036854775807/);
  assert.match(create, /Any other field is refused\./);
  assert.match(create, /Idempotency-Key\s*header\s*string · 1 to 257 characters · matches/);
});

test('every error code of the document is listed once, with its status and who answers it', () => {
  const document = freshDocument();
  const page = renderReferencePage(document, OPTIONS);
  const codes = document.components.schemas.Error.properties.code.enum as string[];
  assert.deepEqual(codes, Object.keys(ERROR_STATUS));
  for (const code of codes) {
    const row = page.slice(page.indexOf(`<tr id="error-${code}">`), page.indexOf('</tr>', page.indexOf(`<tr id="error-${code}">`)));
    assert.ok(row.length > 0, code);
    assert.match(text(row), new RegExp(`^\\s*${ERROR_STATUS[code as keyof typeof ERROR_STATUS]}\\s*${code}\\s*\\S`), code);
  }
  const entries = errorCodes(document as Json, operationGroups(document as Json));
  assert.deepEqual(entries.find((entry) => entry.code === 'invalid_query')!.operations.map((entry) => entry.operationId), ['listPets', 'listOrders', 'getInventory', 'listEvents', 'listWebhooks']);
  assert.deepEqual(entries.find((entry) => entry.code === 'not_found')!.elsewhere.length, 1, 'a path with no operation');
  assert.equal(entries.find((entry) => entry.code === 'rate_limited')!.operations.length, 18);
  assert.deepEqual(entries.find((entry) => entry.code === 'precondition_failed')!.operations.map((entry) => entry.operationId), ['updatePet', 'deletePet', 'updateOrder']);
  assert.deepEqual(entries.find((entry) => entry.code === 'too_many_streams')!.operations.map((entry) => entry.operationId), ['listEvents'], 'the feed\'s own 429');
});

test('the feed shows its stream: the second content type of its 200 and its 429 too_many_streams', () => {
  const feed = text(article(renderReferencePage(freshDocument(), OPTIONS), 'listEvents'));
  assert.match(feed, /Body application\/json/);
  assert.match(feed, /Body text\/event-stream/);
  assert.match(feed, /Last-Event-ID/);
  assert.match(feed, /too_many_streams/);
});

test('a deprecated operation says so in the contents, its heading and a callout, and comes last in its group', () => {
  const document = freshDocument();
  const page = renderReferencePage(document, OPTIONS);
  const section = article(page, 'getPet');
  assert.match(section, /<article class="operation deprecated"/);
  assert.match(section, /<span class="badge-deprecated">Deprecated<\/span>/);
  assert.match(text(section.slice(section.indexOf('callout-deprecated'))), /removed on 2030-12-05/);
  const pets = operationGroups(document as Json).find((group) => group.tag === 'pets')!;
  assert.deepEqual(pets.operations.map((entry) => entry.operationId), ['listPets', 'createPet', 'updatePet', 'deletePet', 'getPet']);
});

test('an operation added to the document appears in its place, with its body and content types, and no code knows it', () => {
  const document = freshDocument();
  document.paths['/pets/{petId}'].patch = {
    operationId: 'updatePet',
    tags: ['pets'],
    summary: 'Change a pet',
    parameters: document.paths['/pets/{petId}'].get.parameters,
    requestBody: {
      required: true,
      content: {
        'application/merge-patch+json': { schema: { $ref: '#/components/schemas/NewPet' } },
        'application/json': { schema: { $ref: '#/components/schemas/NewPet' } },
      },
    },
    responses: { 200: { description: 'The pet after the change.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Pet' } } } } },
  };
  document.paths['/pets/{petId}'].delete = {
    operationId: 'deletePet', tags: ['pets'], summary: 'Remove a pet',
    parameters: document.paths['/pets/{petId}'].get.parameters,
    responses: { 204: { description: 'Removed.' } },
  };
  const groups = operationGroups(document as Json);
  assert.deepEqual(groups[0]!.operations.map((entry) => entry.operationId), ['listPets', 'createPet', 'updatePet', 'deletePet', 'getPet']);
  const page = renderReferencePage(document, OPTIONS);
  const patch = article(page, 'updatePet');
  assert.match(patch, /<span class="method method-patch">PATCH<\/span> <code class="path">\/v1\/pets\/\{petId\}<\/code>/);
  assert.match(patch, /<select id="try-updatePet-type" data-in="content-type"><option>application\/merge-patch\+json<\/option><option>application\/json<\/option><\/select>/);
  assert.match(patch, /<textarea id="try-updatePet-body" data-in="body" rows="2" spellcheck="false" autocomplete="off">\{\}<\/textarea>/, 'a change starts from {}, which changes nothing');
  assert.match(text(article(page, 'deletePet')), /204 Removed\.\s*No body\./);
  assert.ok(page.includes('href="#op-deletePet"'));
});

test('text of the document is escaped wherever it appears', () => {
  const document = freshDocument();
  document.info.title = '<script>alert(1)</script>';
  document.paths['/pets'].get.summary = '"><img src=x onerror=alert(1)>';
  document.paths['/pets'].get.description = 'a `<b>` and <i>';
  const page = renderReferencePage(document, OPTIONS);
  assert.ok(!page.includes('<script>alert(1)'));
  assert.ok(!page.includes('<img src=x'));
  assert.ok(page.includes('a <code>&lt;b&gt;</code> and &lt;i&gt;'));
});

test('examples come from the schemas: examples, then const, default or enum, then the bounds', () => {
  const document = freshDocument() as Json;
  assert.deepEqual(exampleOf(document, { $ref: '#/components/schemas/Pet' }), { id: 1, name: 'Rex', categoryId: 1, status: 'available' });
  assert.deepEqual(exampleOf(document, { $ref: '#/components/schemas/Pets' }), [{ id: 1, name: 'Rex', categoryId: 1, status: 'available' }]);
  const error = (document as any).paths['/pets'].get.responses[400].content['application/json'].schema;
  assert.deepEqual(exampleOf(document, error), { code: 'invalid_query', message: '…', status: 400 });
  assert.equal(exampleOf(document, { type: 'integer', minimum: 5 }), 5);
  assert.equal(exampleOf(document, { type: 'integer', default: 20, minimum: 1 }), 20);
});

test('rules are said in words and a default beside a reference belongs to that use', () => {
  const document = freshDocument() as Json;
  const words = (schema: unknown) => rulesOf(document, schema).map((rule) => text(rule.text));
  assert.deepEqual(words({ type: 'integer', minimum: 1, maximum: 100, default: 20 }), ['1 to 100', 'default 20']);
  assert.deepEqual(words({ type: 'string', minLength: 1, maxLength: 1 }), ['exactly 1 characters']);
  assert.deepEqual(words({ $ref: '#/components/schemas/PetStatus', default: 'sold' }), ['one of "available", "pending", "sold"', 'default "sold"']);
  assert.deepEqual(words({ type: 'integer', const: 400 }), ['always 400']);
});

test('what the service sends to a webhook has its section and its entry in the contents: the headers, the Event body, what 2XX and the rest mean, no form', () => {
  const document = freshDocument();
  const page = renderReferencePage(document, OPTIONS);
  assert.ok(page.includes('href="#webhooks-sent"') && page.includes('href="#webhook-event"'), 'in the contents');
  const start = page.indexOf('<article class="operation" id="webhook-event"');
  assert.ok(start >= 0);
  const section = page.slice(start, page.indexOf('</article>', start));
  const words = text(section);
  assert.match(words, /An event delivered to a webhook/);
  assert.match(words, /POST your webhook's url/);
  for (const header of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) assert.match(words, new RegExp(`${header} required\\s*header\\s*string`), header);
  assert.match(words, /Content type application\/json: Event\./);
  assert.match(words, /2XX\s*Delivered: any 2xx within 10 s/);
  assert.match(words, /default\s*Not delivered/);
  assert.match(words, /no API key: check webhook-signature instead/);
  assert.ok(!section.includes('<form'), 'the reader\'s server receives it: nothing to try from the page');
  // Without webhooks in the document, no section and no entry.
  delete document.webhooks;
  const without = renderReferencePage(document, OPTIONS);
  assert.ok(!without.includes('webhooks-sent'));
});
