/**
 * Debian's HAProxy for tests, started on free ports with the documented configuration
 * (docs/deployment/haproxy.cfg) and stopped when the test file ends. Outside CI a machine without
 * it skips only the tests that need it, with one line saying how to get it; with CI=true a
 * missing HAProxy is a failure (CI installs it, see .ci/run).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const HAPROXY_CONFIG = new URL('../../docs/deployment/haproxy.cfg', import.meta.url).pathname;

/** Why the HAProxy tests cannot run here, or undefined when they can. Throws under CI=true. */
export const haproxySkip: string | undefined = (() => {
  if (spawnSync('haproxy', ['-v'], { stdio: 'ignore' }).status === 0) return undefined;
  if (process.env.CI === 'true') throw new Error('CI=true but HAProxy is not installed; .ci/run installs it');
  return 'HAProxy is not installed: apt-get install haproxy to run these tests';
})();

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface Haproxy {
  url: string;
  stop(): void;
}

/**
 * Starts HAProxy with the documented configuration, its frontend on `port` and its servers on
 * `serverPorts`, connecting to them from `source` (so that the instances can tell it from the
 * test's clients, which all come from 127.0.0.1). Resolves once it answers.
 */
export async function startHaproxy({ port, serverPorts, source }: { port: number; serverPorts: number[]; source: string }): Promise<Haproxy> {
  const folder = mkdtempSync(join(tmpdir(), 'pets-haproxy-'));
  let config = readFileSync(HAPROXY_CONFIG, 'utf8').replace(/bind 127\.0\.0\.1:\d+/, `bind 127.0.0.1:${port}`);
  const servers = [...config.matchAll(/^ {4}server (\w+) 127\.0\.0\.1:\d+ check$/gm)];
  if (servers.length !== serverPorts.length) throw new Error(`the configuration has ${servers.length} servers, the test ${serverPorts.length}`);
  servers.forEach((match, i) => {
    config = config.replace(match[0], `    server ${match[1]} 127.0.0.1:${serverPorts[i]} check source ${source}`);
  });
  const file = join(folder, 'haproxy.cfg');
  writeFileSync(file, config);
  const child: ChildProcess = spawn('haproxy', ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const url = `http://127.0.0.1:${port}`;
  for (let tries = 0; ; tries++) {
    if (child.exitCode !== null) throw new Error(`haproxy exited ${child.exitCode}: ${stderr}`);
    const up = await fetch(`${url}/healthz`, { headers: { connection: 'close' } }).then((response) => response.status === 200, () => false);
    if (up) break;
    if (tries > 100) throw new Error(`haproxy did not serve within 10 s: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
