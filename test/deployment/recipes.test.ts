/**
 * The deployment recipes of docs/deployment/, checked with the tools this machine has: the
 * Dockerfile is linted (dockerfile-utils) and read for what it promises; the systemd unit goes
 * through `systemd-analyze verify`; the nginx configuration through `nginx -t`. The install and start
 * of the image and of the unit are run by test/deployment/install.test.ts, the HAProxy
 * configuration by test/e2e/haproxy.test.ts. Every recipe
 * and every page starts the server with the one production command.
 *
 * Outside CI a machine without systemd-analyze, nginx or openssl skips only the test that needs
 * it, with one line saying how to get it; with CI=true a missing one is a failure (.ci/run
 * installs them).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validate } from 'dockerfile-utils';
import { nginxFolder, nginxSkip } from '../support/nginx.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const RECIPES = join(ROOT, 'docs', 'deployment');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** The one production command: the pinned Node, the memory option, the compile-cache entry. */
const PRODUCTION_ARGS = '--max-semi-space-size=4 src/start.js';

/** undefined when `command` runs here; else the reason to skip (a failure under CI=true). */
function missing(command: string, args: string[], install: string): string | undefined {
  if (spawnSync(command, args, { stdio: 'ignore' }).status === 0) return undefined;
  const why = `${command} is not installed: apt-get install ${install} to run this test`;
  if (process.env.CI === 'true') throw new Error(`${why} (CI=true: a missing component is a failure; .ci/run installs it)`);
  return why;
}

test('one production command everywhere: npm start, the Dockerfile, the systemd unit and every page start the server the same way', () => {
  const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
  assert.equal(pkg.scripts.start, `exec node ${PRODUCTION_ARGS}`);
  assert.match(read('docs/deployment/Dockerfile'), /^CMD \["\/srv\/pets\/node_modules\/\.bin\/node", "--max-semi-space-size=4", "src\/start\.js"\]$/m);
  assert.match(read('docs/deployment/pets.service'), new RegExp(`^ExecStart=/srv/pets/node_modules/\\.bin/node ${PRODUCTION_ARGS.replace(/\./g, '\\.')}$`, 'm'));
  const pages = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];
  for (const page of pages) {
    const text = read(page);
    // Any other way of starting the server (src/main.ts directly, node without the option).
    assert.doesNotMatch(text, /node(_modules\/\.bin\/node)? (--[\w-]+=?\S* )*src\/main\.ts/, `${page} starts the server another way`);
    for (const match of text.matchAll(/node_modules\/\.bin\/node ([^\n`]*src\/start\.js)/g)) assert.equal(match[1], PRODUCTION_ARGS, page);
  }
});

test('the Dockerfile lints clean and keeps its promises: only the project\'s files, a non-root user, data/ as a volume, a health check, SIGTERM to the server', () => {
  const text = read('docs/deployment/Dockerfile');
  assert.deepEqual(validate(text).map((problem) => `${problem.range.start.line + 1}: ${problem.message}`), []);
  const lines = text.split('\n').filter((line) => !line.startsWith('#') && line.trim() !== '');
  const runtime = lines.slice(lines.findLastIndex((line) => line.startsWith('FROM ')));
  const instruction = (name: string) => runtime.filter((line) => line.startsWith(`${name} `));
  // What goes into the image from the build context: the package files and src/, nothing else.
  const copied = lines.filter((line) => line.startsWith('COPY ') && !line.includes('--from=')).map((line) => line.replace(/^COPY (--\S+ )*/, ''));
  assert.deepEqual(copied, ['package.json package-lock.json ./', 'src ./src']);
  assert.deepEqual(readFileSync(join(RECIPES, 'Dockerfile.dockerignore'), 'utf8').split('\n').filter((line) => line && !line.startsWith('#')), ['*', '!package.json', '!package-lock.json', '!src/']);
  // The runtime stage: its own user, not root, from before the command on.
  const user = instruction('USER');
  assert.equal(user.length, 1);
  assert.match(user[0]!, /^USER pets$/);
  assert.ok(runtime.indexOf(user[0]!) < runtime.findIndex((line) => line.startsWith('CMD ')), 'USER comes before CMD');
  assert.deepEqual(instruction('VOLUME'), ['VOLUME ["/srv/pets/data"]']);
  assert.match(text, /DATABASE_PATH=\/srv\/pets\/data\/production\.db/);
  assert.match(text, /RUN mkdir -m 0700 data && chown pets:pets data/, 'the volume starts private to the service');
  // Fixed ids, which a host folder mounted on data/ must be given; the page says which.
  assert.match(text, /groupadd --system --gid 10001 pets\b/);
  assert.match(text, /useradd --system --uid 10001 --gid pets /);
  assert.match(read('docs/deployment.md'), /UID and GID 10001/);
  assert.doesNotMatch(text, /apt-get install[^\n]*\b(nodejs|npm)\b/, 'npm comes with the build stage\'s image, not from Debian');
  assert.equal(instruction('HEALTHCHECK').length, 1);
  assert.match(text, /HEALTHCHECK [^\n]*\\\n\s+CMD \["\/srv\/pets\/node_modules\/\.bin\/node", "-e", "[^"]*\/healthz/);
  // Exec form, node itself: the server is process 1 and receives SIGTERM (no shell, no npm).
  const cmd = instruction('CMD');
  assert.equal(cmd.length, 1);
  const argv = JSON.parse(cmd[0]!.slice(4)) as string[];
  assert.deepEqual(argv, ['/srv/pets/node_modules/.bin/node', '--max-semi-space-size=4', 'src/start.js']);
  assert.deepEqual(instruction('STOPSIGNAL'), ['STOPSIGNAL SIGTERM']);
  assert.ok(!runtime.some((line) => line.startsWith('ENTRYPOINT')), 'no entrypoint wraps the command');
});

test('the systemd unit passes systemd-analyze verify, with no warning, and is confined', { skip: missing('systemd-analyze', ['--version'], 'systemd') }, (t) => {
  const unit = read('docs/deployment/pets.service');
  for (const line of ['User=pets', 'ProtectSystem=strict', 'NoNewPrivileges=yes', 'Restart=on-failure', 'KillSignal=SIGTERM', 'StateDirectoryMode=0700', 'PrivateTmp=yes']) {
    assert.match(unit, new RegExp(`^${line}$`, 'm'), line);
  }
  const dir = mkdtempSync(join(tmpdir(), 'pets-unit-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // verify checks that ExecStart's program exists: point the unit at this checkout.
  const here = unit.replaceAll('/srv/pets/node_modules/.bin/node', join(ROOT, 'node_modules', '.bin', 'node')).replace('WorkingDirectory=/srv/pets', `WorkingDirectory=${ROOT}`);
  const file = join(dir, 'pets.service');
  writeFileSync(file, here);
  const verified = spawnSync('systemd-analyze', ['verify', file], { encoding: 'utf8' });
  assert.equal(verified.status, 0, verified.stderr);
  assert.equal(verified.stderr, '', 'systemd-analyze verify prints nothing: no unknown key, no bad value');
  const security = spawnSync('systemd-analyze', ['security', '--offline=yes', file], { encoding: 'utf8' });
  const exposure = /Overall exposure level for pets\.service: ([\d.]+) (\w+)/.exec(security.stdout);
  assert.ok(exposure, security.stdout + security.stderr);
  t.diagnostic(`systemd-analyze security: exposure ${exposure[1]} ${exposure[2]}`);
  assert.ok(Number(exposure[1]) <= 2, `exposure ${exposure[1]}`);
});

test('the nginx configuration passes nginx -t', { skip: nginxSkip }, (t) => {
  const { dir, site } = nginxFolder(t);
  const tested = spawnSync('nginx', ['-t', '-q', '-p', dir, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' });
  assert.equal(tested.status, 0, tested.stderr);
  for (const directive of ['proxy_request_buffering on;', 'client_max_body_size 16k;', 'proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;', 'max_conns=64', 'zone pets ', 'error_page 413 @payload_too_large;', 'error_page 502 503 504 =503 @unavailable;']) {
    assert.ok(site.includes(directive), directive);
  }
});
