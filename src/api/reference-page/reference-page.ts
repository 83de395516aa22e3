/**
 * `GET /docs`: the API reference as one HTML page, rendered once (on its first request) from the
 * OpenAPI document object, so it shows exactly what the document says (and every operation it gains).
 *
 * The page loads nothing: its style and script are in the page, allowed by their SHA-256 in the
 * Content-Security-Policy, which allows nothing else but requests to this origin (the try-it
 * forms). Its script builds every node with DOM methods and `textContent`, never markup, so the
 * policy can also demand Trusted Types and no string ever becomes HTML.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Reply } from '../../http/reply.ts';
import { arrayAt, errorCodes, isObject, objectAt, operationGroups, responseErrors, stringAt, type Json, type OperationGroup } from './document.ts';
import { html, prose, raw, type Html } from './html.ts';
import {
  anchor, createHeaderIndex, deliverySection, fieldsTable, operationAnchor, operationSection, responseAnchor, responseDetails, type HeaderIndex,
} from './operation-section.ts';
import { descriptionOf, exampleOf, schemaAnchor, typeAndRules } from './schema-text.ts';

export interface ReferencePageOptions {
  /** Where this server serves the document's paths (its base address as a path), e.g. `/v1`. */
  basePath: string;
  /** Where this server serves the OpenAPI document itself. */
  documentPath: string;
}

// The page's own style and script, hand-written beside this file and read once when it loads,
// like the module itself: they are part of the code, not of the environment.
const STYLE = readFileSync(new URL('./reference-page.css', import.meta.url), 'utf8');
const SCRIPT = readFileSync(new URL('./try-it.js', import.meta.url), 'utf8');

/** A paw print, drawn inline (a data: URL, so the browser asks the server for no favicon). */
const ICON =
  "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32'%3E%3Cg fill='%230f6b5c'%3E" +
  "%3Cellipse cx='16' cy='22' rx='8' ry='7'/%3E%3Ccircle cx='6' cy='13' r='3.5'/%3E%3Ccircle cx='12' cy='7' r='3.5'/%3E" +
  "%3Ccircle cx='20' cy='7' r='3.5'/%3E%3Ccircle cx='26' cy='13' r='3.5'/%3E%3C/g%3E%3C/svg%3E";

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * Nothing but this page's own style and script, the data: icon, and requests to this origin.
 * No framing, no `<base>`, no form posting elsewhere, and Trusted Types for every DOM sink.
 */
export function contentSecurityPolicy(style: string, script: string): string {
  return [
    "default-src 'none'",
    `script-src ${sha256(script)}`,
    `style-src ${sha256(style)}`,
    "img-src data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
  ].join('; ');
}

function intro(document: Json, options: ReferencePageOptions): Html {
  const info = objectAt(document, 'info');
  const schemes = Object.entries(objectAt(objectAt(document, 'components'), 'securitySchemes'));
  const servers = arrayAt(document, 'servers');
  return html`<section id="start" aria-labelledby="start-title">
<h2 id="start-title">Getting started</h2>
<dl class="facts">
<dt>Base address</dt>
<dd><ul class="plain">${servers.map((server) => html`<li><code>${stringAt(server, 'url') ?? ''}</code> ${stringAt(server, 'description') ?? ''}</li>`)}</ul></dd>
${schemes.map(([name, scheme]) => html`<dt>Authentication</dt><dd>${prose(stringAt(scheme, 'description') ?? name)}</dd>`)}
<dt>Description</dt>
<dd><a href="${options.documentPath}">OpenAPI ${stringAt(document, 'openapi') ?? ''} document</a> (JSON), from which this page is made${stringAt(objectAt(info, 'license'), 'name') !== undefined ? html`; license ${stringAt(objectAt(info, 'license'), 'name')!}` : null}.</dd>
</dl>
<form id="api-key-form" class="key" autocomplete="off">
<label for="api-key">Your API key</label>
<input id="api-key" name="api-key" type="password" autocomplete="off" spellcheck="false" aria-describedby="api-key-help" placeholder="pk_test_…">
<p id="api-key-help" class="note">Paste it once: every <strong>Send</strong> button below uses it, from this page to this server only. It is kept in this tab and forgotten when you leave.</p>
</form>
</section>`;
}

/** The requests the service sends, by their key in the document's `webhooks` and their method. */
function deliveries(document: Json): { name: string; method: string; operation: Json }[] {
  return Object.entries(objectAt(document, 'webhooks')).flatMap(([name, item]) =>
    Object.entries(isObject(item) ? item : {}).filter(([, operation]) => isObject(operation)).map(([method, operation]) => ({ name, method, operation: operation as Json })));
}

function contents(document: Json, groups: readonly OperationGroup[], options: ReferencePageOptions): Html {
  const sent = deliveries(document);
  return html`<nav class="contents" aria-label="Contents">
<h2 class="contents-title">Contents</h2>
<ol>
<li><a href="#start">Getting started</a></li>
${groups.map((group) => html`<li><a class="group-name" href="#${anchor('tag', group.tag)}">${group.tag}</a>
<ol>${group.operations.map((entry) => html`<li><a href="#${operationAnchor(entry)}"><span class="method method-${entry.method.toLowerCase()}">${entry.method}</span> <span class="label">${stringAt(entry.operation, 'summary') ?? `${options.basePath}${entry.path}`}</span>${
  // The badge, unless the summary already says so.
  entry.deprecated && !/deprecated/i.test(stringAt(entry.operation, 'summary') ?? '') ? html` <span class="badge-deprecated">Deprecated</span>` : null}</a></li>`)}</ol></li>`)}
${sent.length > 0 ? html`<li><a class="group-name" href="#webhooks-sent">Webhooks: what the service sends</a>
<ol>${sent.map(({ name, method, operation }) => html`<li><a href="#${anchor('webhook', name)}"><span class="method method-${method}">${method.toUpperCase()}</span> <span class="label">${stringAt(operation, 'summary') ?? name}</span></a></li>`)}</ol></li>` : null}
<li><a href="#errors">Errors</a></li>
<li><a href="#common-responses">Common responses</a></li>
<li><a href="#schemas">Schemas</a></li>
<li><a href="#headers">Response headers</a></li>
</ol>
</nav>`;
}

function groupSection(document: Json, group: OperationGroup, options: ReferencePageOptions, headers: HeaderIndex): Html {
  const id = anchor('tag', group.tag);
  return html`<section class="group" id="${id}" aria-labelledby="${id}-title">
<h2 id="${id}-title">${group.tag}</h2>
${group.description !== undefined ? html`<p>${prose(group.description)}</p>` : null}
${group.operations.map((entry) => operationSection(document, entry, options.basePath, headers))}
</section>`;
}

function webhooksSection(document: Json, headers: HeaderIndex): Html | null {
  const sent = deliveries(document);
  if (sent.length === 0) return null;
  return html`<section class="group" id="webhooks-sent" aria-labelledby="webhooks-sent-title">
<h2 id="webhooks-sent-title">Webhooks: what the service sends</h2>
<p>Requests the service makes to the URLs of your webhooks, as events happen: your server answers them.</p>
${sent.map(({ name, method, operation }) => deliverySection(document, name, method, operation, headers))}
</section>`;
}

function errorsSection(document: Json, groups: readonly OperationGroup[], options: ReferencePageOptions): Html {
  const every = groups.flatMap((group) => group.operations);
  const errorSchema = objectAt(objectAt(objectAt(document, 'components'), 'schemas'), 'Error');
  return html`<section id="errors" aria-labelledby="errors-title">
<h2 id="errors-title">Errors</h2>
<p>${prose(descriptionOf(document, errorSchema) ?? '')} See <a href="#${schemaAnchor('Error')}">Error</a>.</p>
<div class="table"><table class="codes">
<thead><tr><th scope="col">Status</th><th scope="col">Code</th><th scope="col">Answered by</th></tr></thead>
<tbody>${errorCodes(document, groups).map((entry) => html`<tr id="${anchor('error', entry.code)}">
<td>${entry.status ?? ''}</td>
<th scope="row"><code>${entry.code}</code></th>
<td>${entry.operations.length === every.length && every.length > 1
    ? 'every operation'
    : entry.operations.map((operation, i) => [i > 0 ? ', ' : '', html`<a href="#${operationAnchor(operation)}">${operation.method} ${options.basePath}${operation.path}</a>`])}${
    entry.elsewhere.map((description, i) => [i > 0 || entry.operations.length > 0 ? '; ' : '', prose(description.replace(/ Codes: .*$/, ''))])}</td>
</tr>`)}</tbody>
</table></div>
</section>`;
}

/** The status(es) of a shared response, from its narrowed schema: `404`, or `408, 431`. */
function statusesOf(document: Json, response: unknown): string {
  return [...new Set(responseErrors(document, response).map((error) => error.status ?? ''))].join(', ');
}

function commonResponses(document: Json, headers: HeaderIndex): Html {
  const components = Object.entries(objectAt(objectAt(document, 'components'), 'responses'));
  return html`<section id="common-responses" aria-labelledby="common-responses-title">
<h2 id="common-responses-title">Common responses</h2>
<p>Responses that read the same wherever they occur, by name.</p>
${components.map(([name, response]) => responseDetails(document, statusesOf(document, response), response, {
    open: false, headers, id: responseAnchor(name), name,
  }))}
</section>`;
}

function schemasSection(document: Json): Html {
  const schemas = Object.entries(objectAt(objectAt(document, 'components'), 'schemas'));
  return html`<section id="schemas" aria-labelledby="schemas-title">
<h2 id="schemas-title">Schemas</h2>
${schemas.map(([name, schema]) => {
    const fields = fieldsTable(document, schema);
    return html`<article class="schema" id="${schemaAnchor(name)}" aria-labelledby="${schemaAnchor(name)}-title">
<h3 id="${schemaAnchor(name)}-title"><code>${name}</code></h3>
<p>${prose(descriptionOf(document, schema) ?? '')}</p>
<p>${typeAndRules(document, schema)}</p>
${fields ?? null}
${fields !== null ? html`<details class="example-details"><summary>Example</summary><pre tabindex="0"><code>${JSON.stringify(exampleOf(document, schema), null, 2)}</code></pre></details>` : null}
</article>`;
  })}
</section>`;
}

function headersSection(document: Json, headers: HeaderIndex): Html {
  return html`<section id="headers" aria-labelledby="headers-title">
<h2 id="headers-title">Response headers</h2>
<p>Each response above lists the headers it carries; here is what they mean.</p>
<div class="table"><table class="headers">
<thead><tr><th scope="col">Header</th><th scope="col">Type and rules</th><th scope="col">Description</th></tr></thead>
<tbody>${headers.entries().map(({ id, name, header }) => html`<tr id="${id}">
<th scope="row"><code>${name}</code></th>
<td>${typeAndRules(document, header.schema)}</td>
<td>${prose(stringAt(header, 'description') ?? '')}</td>
</tr>`)}</tbody>
</table></div>
</section>`;
}

/** The page's HTML, built from `document`. */
export function renderReferencePage(document: Json, options: ReferencePageOptions): string {
  const groups = operationGroups(document);
  const info = objectAt(document, 'info');
  const title = stringAt(info, 'title') ?? 'API';
  const version = stringAt(info, 'version') ?? '';
  // Filled while the responses are rendered, then listed in the last section.
  const headers = createHeaderIndex();
  return `<!doctype html>\n${html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} API reference</title>
<link rel="icon" href="${ICON}">
<style>${raw(STYLE)}</style>
</head>
<body>
<a class="skip" href="#main">Skip to the reference</a>
<header class="masthead">
<div class="masthead-inner">
<p class="eyebrow">API reference · version ${version}</p>
<h1>${title}</h1>
${stringAt(info, 'description') !== undefined ? html`<p class="lede">${prose(stringAt(info, 'description')!)}</p>` : null}
</div>
</header>
<div class="layout">
${contents(document, groups, options)}
<main id="main" tabindex="-1">
${intro(document, options)}
${groups.map((group) => groupSection(document, group, options, headers))}
${webhooksSection(document, headers)}
${errorsSection(document, groups, options)}
${commonResponses(document, headers)}
${schemasSection(document)}
${headersSection(document, headers)}
</main>
</div>
<script>${raw(SCRIPT)}</script>
</body>
</html>
`}`;
}

/** The answer to `GET /docs` (service.ts builds it once, on the first request, and keeps it). */
export function referencePageReply(document: Json, options: ReferencePageOptions): Reply {
  return {
    status: 200,
    body: renderReferencePage(document, options),
    headers: {
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Security-Policy': contentSecurityPolicy(STYLE, SCRIPT),
      'Referrer-Policy': 'no-referrer',
    },
  };
}
