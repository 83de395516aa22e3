/**
 * The physical limit the service is compared with: a bare `node:http` server that answers every
 * request, whatever its method and path, with one pre-serialised body and fixed headers. No
 * routing, no parsing, no database, no log. Request bodies are read to the end (and dropped) so
 * that a POST costs the reading of its bytes, as it does in the service.
 *
 *   node bench/baseline.ts RESPONSE.json
 *
 * RESPONSE.json is `{ "headers": { name: value }, "body": "..." }`: bench/compare.ts writes it
 * from the service's own answer to `GET /v1/pets?limit=20`, so both servers send the same header
 * names and values and the same body bytes. Listens on HOST:PORT (127.0.0.1:0 by default) and
 * prints `{"event":"listening","url":...}` on stdout, as src/main.ts does.
 */
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';

const file = process.argv[2];
if (file === undefined) {
  process.stderr.write('usage: node bench/baseline.ts RESPONSE.json\n');
  process.exit(2);
}
const canned = JSON.parse(readFileSync(file, 'utf8')) as { headers: Record<string, string>; body: string };
const BODY = Buffer.from(canned.body);
const HEADERS = { ...canned.headers, 'Content-Length': String(BODY.length) };

const server = createServer((req, res) => {
  const answer = () => res.writeHead(200, HEADERS).end(BODY);
  const hasBody = req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
  if (!hasBody) return answer();
  req.on('end', answer).resume();
});

server.listen(Number(process.env.PORT ?? '0'), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ event: 'listening', url: `http://${address.address}:${address.port}` })}\n`);
});

const stop = () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
