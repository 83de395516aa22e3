/**
 * The documented nginx site (docs/deployment/nginx.conf) run for real, with TLS, in front of an
 * instance: a request passes through, and nginx's own errors reach the client in the service's
 * Error shape, as the service itself would send them: a body over 16 KiB (413, answered by nginx
 * before the instance sees anything) and no instance able to answer (502 from nginx, sent as the
 * service's 503 with Retry-After).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type RequestOptions } from 'node:https';
import { freePort } from '../support/haproxy.ts';
import { nginxFolder, nginxSkip, startNginx } from '../support/nginx.ts';
import { startTestServer } from '../support/test-server.ts';

type Answer = { status: number; headers: Record<string, string | string[] | undefined>; body: string };

/** One HTTPS request to nginx as pets.example, on a fresh connection. */
function send(port: number, ca: string, options: RequestOptions & { body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const sent = request({ host: '127.0.0.1', port, servername: 'pets.example', ca, agent: false, ...options }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (text: string) => (body += text)).on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body }));
    });
    sent.on('error', reject);
    sent.end(options.body);
  });
}

test('nginx in front of an instance: requests pass, and its own 413 and 502 answer in the Error shape, as the service would', { skip: nginxSkip }, async (t) => {
  const server = await startTestServer(t);
  const [https, http, down1, down2] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const folder = nginxFolder(t, { https, http, upstreams: [Number(new URL(server.url).port), down1, down2] });
  await startNginx(t, folder, https);
  const authorization = `Bearer ${server.key}`;

  // Through nginx to the instance (the two others refuse: nginx tries the next one).
  const pets = await send(https, folder.cert, { path: '/v1/pets', headers: { authorization } });
  assert.equal(pets.status, 200, pets.body);
  assert.equal(pets.body, '[]');

  // A body over 16 KiB: nginx answers, with the body the instance gives the same request itself.
  const large = JSON.stringify({ name: 'Rex', categoryId: 1, padding: 'x'.repeat(20_000) });
  const direct = await server.post('/v1/pets', large);
  assert.equal(direct.status, 413);
  const refused = await send(https, folder.cert, { method: 'POST', path: '/v1/pets', headers: { authorization, 'content-type': 'application/json', 'content-length': Buffer.byteLength(large) }, body: large });
  assert.equal(refused.status, 413);
  assert.match(String(refused.headers['content-type']), /^application\/json/);
  assert.equal(refused.body, await direct.text());

  // No instance answers: nginx's 502 becomes the service's 503 with Retry-After.
  await server.close();
  const down = await send(https, folder.cert, { path: '/v1/pets', headers: { authorization } });
  assert.equal(down.status, 503, down.body);
  assert.equal(down.headers['retry-after'], '1');
  assert.match(String(down.headers['content-type']), /^application\/json/);
  assert.deepEqual(JSON.parse(down.body), { code: 'unavailable', message: 'No instance can take the request right now; retry shortly.', status: 503 });
});
