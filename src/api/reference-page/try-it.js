// The try-it forms of the API reference page: each sends its operation with fetch to this same
// origin, with the key pasted once at the top, and shows the status, the headers and the body.
// Text only ever goes into the page through textContent (the page demands Trusted Types).
'use strict';
(() => {
  const keyInput = document.getElementById('api-key');
  document.getElementById('api-key-form').addEventListener('submit', (event) => event.preventDefault());

  // Indents JSON text without parsing it, so that int64 values keep every digit (JSON.parse
  // would round them above 2^53).
  const indentJson = (text) => {
    let out = '';
    let depth = 0;
    let inString = false;
    const newline = () => '\n' + '  '.repeat(depth);
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        out += c;
        if (c === '\\') out += text[++i] ?? '';
        else if (c === '"') inString = false;
      } else if (c === '"') {
        inString = true;
        out += c;
      } else if (c === '{' || c === '[') {
        const close = c === '{' ? '}' : ']';
        if (text[i + 1] === close) {
          out += c + close;
          i++;
        } else {
          depth++;
          out += c + newline();
        }
      } else if (c === '}' || c === ']') {
        depth--;
        out += newline() + c;
      } else if (c === ',') {
        out += c + newline();
      } else if (c === ':') {
        out += ': ';
      } else if (c.trim() !== '') {
        out += c;
      }
    }
    return out;
  };

  const show = (form, outcome, headers, body) => {
    const result = form.querySelector('.result');
    result.hidden = false;
    result.querySelector('.outcome').textContent = outcome;
    result.querySelector('.response-headers').textContent = headers;
    result.querySelector('.response-text').textContent = body;
  };

  const send = async (form) => {
    let path = form.dataset.path;
    const query = new URLSearchParams();
    const headers = new Headers();
    let body;
    for (const field of form.querySelectorAll('[data-in]')) {
      const { value, name } = field;
      switch (field.dataset.in) {
        case 'path':
          path = path.replace(`{${name}}`, encodeURIComponent(value));
          break;
        case 'query':
          if (value !== '') query.append(name, value);
          break;
        case 'header':
          if (value !== '') headers.set(name, value);
          break;
        case 'content-type':
          headers.set('Content-Type', value);
          break;
        case 'body':
          body = value;
          break;
      }
    }
    const key = keyInput.value.trim();
    if (key !== '') headers.set('Authorization', `Bearer ${key}`);
    const method = form.dataset.method;
    const url = query.size > 0 ? `${path}?${query}` : path;
    // Busy rather than disabled: disabling the focused button would drop the keyboard focus.
    form.setAttribute('aria-busy', 'true');
    const started = performance.now();
    try {
      const response = await fetch(url, { method, headers, body, cache: 'no-store', credentials: 'omit', redirect: 'manual' });
      const text = await response.text();
      const took = Math.round(performance.now() - started);
      const lines = [];
      for (const [name, value] of response.headers) lines.push(`${name}: ${value}`);
      const json = (response.headers.get('content-type') ?? '').includes('json');
      show(
        form,
        `${method} ${url} answered ${response.status} ${response.statusText} in ${took} ms`,
        lines.join('\n'),
        text === '' ? '(no body)' : json ? indentJson(text) : text,
      );
    } catch (error) {
      show(form, `${method} ${url} failed: ${error instanceof Error ? error.message : String(error)}`, '', '');
    } finally {
      form.removeAttribute('aria-busy');
    }
  };

  for (const form of document.querySelectorAll('form.try')) {
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      send(form);
    });
  }
})();
