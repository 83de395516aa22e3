import { test } from 'node:test';
import assert from 'node:assert/strict';
import { escapeHtml, html, prose, raw } from '../../../src/api/reference-page/html.ts';

test('interpolated text is escaped, markup built by html or raw is not', () => {
  const name = '<img src=x onerror="alert(1)">&\'';
  assert.equal(html`<p title="${name}">${name}</p>`.text, '<p title="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;">&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;</p>');
  assert.equal(html`<div>${html`<b>${'<'}</b>`}${raw('<i>x</i>')}</div>`.text, '<div><b>&lt;</b><i>x</i></div>');
});

test('lists are joined and null, undefined and false leave nothing', () => {
  assert.equal(html`<ul>${['a', 'b'].map((item) => html`<li>${item}</li>`)}${null}${undefined}${false}${0}</ul>`.text, '<ul><li>a</li><li>b</li>0</ul>');
});

test('prose turns backtick spans into code and escapes everything', () => {
  assert.equal(prose('Use `GET /pets?a=1&b=<2>` <now>').text, 'Use <code>GET /pets?a=1&amp;b=&lt;2&gt;</code> &lt;now&gt;');
  assert.equal(prose('an unpaired ` stays').text, 'an unpaired ` stays');
  assert.equal(escapeHtml(`"'<>&`), '&quot;&#39;&lt;&gt;&amp;');
});
