/**
 * One operation of the reference page: what it does, its parameters and body with their rules,
 * its responses with their headers and examples, and a form to try it from the page.
 */
import { arrayAt, isObject, objectAt, refName, resolve, stringAt, type Json, type OperationEntry } from './document.ts';
import { html, prose, type Html, type Part } from './html.ts';
import { descriptionOf, exampleOf, typeAndRules, typeOf } from './schema-text.ts';

/** An id usable in HTML and in a URL fragment, from a name of the document. */
export const anchor = (prefix: string, name: string) => `${prefix}-${name.replace(/[^A-Za-z0-9_-]/g, '-')}`;
export const operationAnchor = (entry: OperationEntry) => anchor('op', entry.operationId);
export const responseAnchor = (name: string) => anchor('response', name);

/** `GET /v1/pets`: the method as a badge and the full path, as a caller writes them. */
export function methodAndPath(entry: OperationEntry, basePath: string): Html {
  return html`<span class="method method-${entry.method.toLowerCase()}">${entry.method}</span> <code class="path">${basePath}${entry.path}</code>`;
}


/** Pretty JSON for an example; examples are small, made of the document's own values. */
const exampleBlock = (label: string, value: unknown) =>
  html`<figure class="example"><figcaption>${label}</figcaption><pre tabindex="0"><code>${JSON.stringify(value, null, 2)}</code></pre></figure>`;

function securityNote(document: Json, operation: Json): Html {
  const requirements = Array.isArray(operation.security) ? operation.security : arrayAt(document, 'security');
  if (requirements.length === 0) return html`No API key needed.`;
  const anonymous = requirements.some((requirement) => isObject(requirement) && Object.keys(requirement).length === 0);
  if (anonymous) return html`API key optional.`;
  const scopes = requirements.flatMap((requirement) => (isObject(requirement) ? Object.values(requirement).flat() : [])).filter((scope) => typeof scope === 'string');
  return scopes.length === 0 ? html`Needs an API key.` : html`Needs an API key with the scope ${scopes.map((scope, i) => html`${i > 0 ? ' or ' : ''}<code>${scope}</code>`)}.`;
}

function parametersTable(document: Json, entry: OperationEntry): Html | null {
  if (entry.parameters.length === 0) return null;
  return html`<h4>Parameters</h4>
<div class="table"><table>
<thead><tr><th scope="col">Name</th><th scope="col">In</th><th scope="col">Type and rules</th><th scope="col">Description</th></tr></thead>
<tbody>${entry.parameters.map((parameter) => html`<tr>
<th scope="row"><code>${stringAt(parameter, 'name') ?? ''}</code>${parameter.required === true ? html` <span class="required">required</span>` : null}</th>
<td class="in">${stringAt(parameter, 'in') ?? ''}</td>
<td>${typeAndRules(document, parameter.schema)}</td>
<td>${prose(stringAt(parameter, 'description') ?? descriptionOf(document, parameter.schema) ?? '')}</td>
</tr>`)}</tbody>
</table></div>`;
}

/** The fields of an object schema, each with its rules; used for bodies and the schemas section. */
export function fieldsTable(document: Json, schema: unknown): Html | null {
  const resolved = resolve(document, schema);
  const properties = Object.entries(objectAt(resolved, 'properties'));
  if (properties.length === 0) return null;
  const required = arrayAt(resolved, 'required');
  return html`<div class="table"><table>
<thead><tr><th scope="col">Field</th><th scope="col">Type and rules</th><th scope="col">Description</th></tr></thead>
<tbody>${properties.map(([name, property]) => html`<tr>
<th scope="row"><code>${name}</code>${required.includes(name) ? html` <span class="required">required</span>` : null}</th>
<td>${typeAndRules(document, property)}</td>
<td>${prose(descriptionOf(document, property) ?? '')}</td>
</tr>`)}</tbody>
</table></div>${resolved.additionalProperties === false ? html`<p class="note">Any other field is refused.</p>` : null}`;
}

function requestBody(document: Json, entry: OperationEntry): Html | null {
  if (!isObject(entry.operation.requestBody)) return null;
  const body = resolve(document, entry.operation.requestBody);
  const media = Object.entries(objectAt(body, 'content'));
  return html`<h4>Request body${body.required === true ? html` <span class="required">required</span>` : null}</h4>
${stringAt(body, 'description') !== undefined ? html`<p>${prose(stringAt(body, 'description')!)}</p>` : null}
${media.map(([type, content]) => html`<p>Content type <code>${type}</code>: ${typeOf(document, objectAt(content, 'schema'))}. ${prose(descriptionOf(document, objectAt(content, 'schema')) ?? '')}</p>`)}
${media.length > 0 ? [fieldsTable(document, objectAt(media[0]![1], 'schema')), exampleBlock('Example body', exampleOf(document, objectAt(media[0]![1], 'schema')))] : null}`;
}

/**
 * The headers of the page, each described once in its own section: responses list theirs by name,
 * linking there. A header is one entry per name and description, whether a response refers to the
 * document's component or writes it in place (where it may also make it optional).
 */
export interface HeaderIndex {
  /** The anchor of a header's entry, registering the header on first sight. */
  anchorOf(name: string, header: Json): string;
  entries(): { id: string; name: string; header: Json }[];
}

export function createHeaderIndex(): HeaderIndex {
  const byKey = new Map<string, { id: string; name: string; header: Json }>();
  const ids = new Set<string>();
  return {
    anchorOf(name, header) {
      // The schema too: a header described for each operation (a Link to its own next page) reads alike on each.
      const key = `${name}\n${stringAt(header, 'description') ?? ''}\n${JSON.stringify(header.schema ?? null)}`;
      let entry = byKey.get(key);
      if (entry === undefined) {
        let id = anchor('header', name);
        for (let n = 2; ids.has(id); n++) id = anchor('header', `${name}-${n}`);
        ids.add(id);
        entry = { id, name, header };
        byKey.set(key, entry);
      }
      return entry.id;
    },
    entries: () => [...byKey.values()],
  };
}

/** A response's headers by name, each a link to its description; optional ones say so. */
function headerList(document: Json, headers: Json, index: HeaderIndex): Html | null {
  const entries = Object.entries(headers);
  if (entries.length === 0) return null;
  return html`<p class="header-list">Headers: ${entries.map(([name, header], i) => {
    const resolved = resolve(document, header);
    return [
      i > 0 ? ', ' : '',
      html`<a href="#${index.anchorOf(name, resolved)}"><code>${name}</code></a>`,
      resolved.required === true ? null : html` <span class="optional">optional</span>`,
    ];
  })}.</p>`;
}

/** One response as a disclosure: status and description, then headers, body schema and example. */
export function responseDetails(
  document: Json,
  status: string,
  response: unknown,
  options: { open: boolean; headers: HeaderIndex; id?: string; name?: string },
): Html {
  const resolved = resolve(document, response);
  const media = Object.entries(objectAt(resolved, 'content'));
  const kind = status.startsWith('2') ? 'success' : status.startsWith('4') || status.startsWith('5') ? 'failure' : 'other';
  return html`<details class="response"${options.open ? html` open` : null}${options.id !== undefined ? html` id="${options.id}"` : null}>
<summary><span class="status status-${kind}">${status}</span> ${options.name !== undefined ? html`<strong>${options.name}</strong> ` : null}${prose(stringAt(resolved, 'description') ?? '')}</summary>
<div class="response-body">
${media.length === 0 ? html`<p class="note">No body.</p>` : media.map(([type, content]) => html`<p>Body <code>${type}</code>: ${typeOf(document, objectAt(content, 'schema'))}.</p>
${exampleBlock(`Example ${status} body`, exampleOf(document, objectAt(content, 'schema')))}`)}
${headerList(document, objectAt(resolved, 'headers'), options.headers)}
</div>
</details>`;
}

function responses(document: Json, entry: OperationEntry, headers: HeaderIndex): Html {
  const all = Object.entries(objectAt(entry.operation, 'responses'));
  const own = all.filter(([, response]) => refName(response) === undefined);
  const shared = all.filter(([, response]) => refName(response) !== undefined);
  return html`<h4>Responses</h4>
${own.map(([status, response]) => responseDetails(document, status, response, { open: status.startsWith('2'), headers }))}
${shared.length > 0 ? html`<p class="shared">Also, as described under <a href="#common-responses">Common responses</a>: ${shared.map(([status, response], i) => [
    i > 0 ? ', ' : '',
    html`<a href="#${responseAnchor(refName(response)!)}">${status} ${refName(response)!}</a>`,
  ])}.</p>` : null}`;
}

/** A form field for one parameter: a choice list for an enum, else a text box (to send any value). */
function parameterField(document: Json, entry: OperationEntry, parameter: Json): Html {
  const name = stringAt(parameter, 'name') ?? '';
  const where = stringAt(parameter, 'in') ?? 'query';
  const id = anchor(`try-${entry.operationId}`, `${where}-${name}`);
  const required = parameter.required === true;
  const label = html`<label for="${id}"><code>${name}</code> <span class="where">${where}${required ? ', required' : ''}</span></label>`;
  const common = html`id="${id}" name="${name}" data-in="${where}"${required ? html` required` : null}`;
  const values = arrayAt(resolve(document, parameter.schema), 'enum');
  if (values.length > 0) {
    return html`<div class="field">${label}<select ${common}>${required ? null : html`<option value="">(not sent)</option>`}${values.map((value) => html`<option>${String(value)}</option>`)}</select></div>`;
  }
  const example = exampleOf(document, parameter.schema);
  const numeric = stringAt(resolve(document, parameter.schema), 'type') === 'integer';
  return html`<div class="field">${label}<input type="text" ${common} autocomplete="off" spellcheck="false"${numeric ? html` inputmode="numeric"` : null} placeholder="${where === 'path' || numeric ? String(example) : ''}"></div>`;
}

function tryItForm(document: Json, entry: OperationEntry, basePath: string): Html {
  const id = anchor('try', entry.operationId);
  const body = isObject(entry.operation.requestBody) ? resolve(document, entry.operation.requestBody) : null;
  const media = body === null ? [] : Object.entries(objectAt(body, 'content'));
  const bodyId = `${id}-body`;
  const typeId = `${id}-type`;
  let bodyField: Part = null;
  if (media.length > 0) {
    // A change starts from `{}`, which changes nothing: a whole example pet, sent unchanged,
    // renamed the pet it was sent to. A create starts from the example, which only adds a pet.
    const example = entry.method === 'POST' ? JSON.stringify(exampleOf(document, objectAt(media[0]![1], 'schema')), null, 2) : '{}';
    bodyField = [
      media.length > 1
        ? html`<div class="field"><label for="${typeId}">Content type</label><select id="${typeId}" data-in="content-type">${media.map(([type]) => html`<option>${type}</option>`)}</select></div>`
        : html`<input type="hidden" data-in="content-type" value="${media[0]![0]}">`,
      html`<div class="field field-wide"><label for="${bodyId}">Body <span class="where">${media.length === 1 ? media[0]![0] : 'as chosen above'}</span></label><textarea id="${bodyId}" data-in="body" rows="${Math.min(12, example.split('\n').length + 1)}" spellcheck="false" autocomplete="off">${example}</textarea></div>`,
    ];
  }
  // Named "Try it" and the operation's title, so that each form is a landmark of its own.
  return html`<form class="try" data-method="${entry.method}" data-path="${basePath}${entry.path}" aria-labelledby="${id}-title ${operationAnchor(entry)}-title">
<h4 id="${id}-title">Try it</h4>
${entry.parameters.length + media.length === 0 ? html`<p class="note">No parameters: send it as is.</p>` : null}
<div class="fields">${entry.parameters.map((parameter) => parameterField(document, entry, parameter))}${bodyField}</div>
<button type="submit">Send ${entry.method} ${basePath}${entry.path}</button>
<div class="result" hidden>
<output class="outcome"></output>
<pre class="response-headers" tabindex="0" aria-label="Response headers"></pre>
<pre class="response-text" tabindex="0" aria-label="Response body"></pre>
</div>
</form>`;
}

/** The whole section of one operation. */
export function operationSection(document: Json, entry: OperationEntry, basePath: string, headers: HeaderIndex): Html {
  const id = operationAnchor(entry);
  const description = stringAt(entry.operation, 'description');
  const summary = stringAt(entry.operation, 'summary');
  return html`<article class="operation${entry.deprecated ? ' deprecated' : ''}" id="${id}" aria-labelledby="${id}-title">
<h3 id="${id}-title">${summary ?? `${entry.method} ${basePath}${entry.path}`}${entry.deprecated ? html` <span class="badge-deprecated">Deprecated</span>` : null}</h3>
<p class="endpoint">${methodAndPath(entry, basePath)}</p>
${entry.deprecated
    ? html`<div class="callout-deprecated" role="note"><p>${
      // The document's description usually says it first; the callout says it once.
      /^deprecated\b/i.test(description ?? '') ? null : html`<strong>Deprecated.</strong> `}${prose(description ?? 'Do not use it in new code.')}</p></div>`
    : description !== undefined ? html`<p>${prose(description)}</p>` : null}
<p class="meta">${securityNote(document, entry.operation)} Operation id <code>${entry.operationId}</code>.</p>
${parametersTable(document, entry)}
${requestBody(document, entry)}
${responses(document, entry, headers)}
${tryItForm(document, entry, basePath)}
</article>`;
}

/**
 * What the service itself sends (the document's top-level `webhooks`): one article per request,
 * with its headers, its body and what its answers mean, and no form, since the reader's server
 * receives it. `name` is its key in `webhooks`.
 */
export function deliverySection(document: Json, name: string, method: string, operation: Json, headers: HeaderIndex): Html {
  const entry: OperationEntry = {
    method: method.toUpperCase(), path: name, operationId: stringAt(operation, 'operationId') ?? `${method}-${name}`, operation,
    parameters: arrayAt(operation, 'parameters').map((parameter) => resolve(document, parameter)), deprecated: false,
  };
  const id = anchor('webhook', name);
  const description = stringAt(operation, 'description');
  return html`<article class="operation" id="${id}" aria-labelledby="${id}-title">
<h3 id="${id}-title">${stringAt(operation, 'summary') ?? name}</h3>
<p class="endpoint"><span class="method method-${method.toLowerCase()}">${entry.method}</span> <code class="path">your webhook's url</code></p>
${description !== undefined ? html`<p>${prose(description)}</p>` : null}
<p class="meta">Sent by the service to your server, with no API key: check <code>webhook-signature</code> instead. Operation id <code>${entry.operationId}</code>.</p>
${parametersTable(document, entry)}
${requestBody(document, entry)}
${responses(document, entry, headers)}
</article>`;
}
