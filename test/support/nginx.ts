/**
 * Debian's nginx for tests, on the documented site configuration (docs/deployment/nginx.conf)
 * with a throwaway certificate: checked with `nginx -t`, or run on free ports in front of given
 * instances. Outside CI a machine without nginx or openssl skips only the tests that need them,
 * with one line saying how to get them; with CI=true a missing one is a failure (.ci/run installs
 * them).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';

export const NGINX_SITE = new URL('../../docs/deployment/nginx.conf', import.meta.url).pathname;

/** Why the nginx tests cannot run here, or undefined when they can. Throws under CI=true. */
export const nginxSkip: string | undefined = (() => {
  const missing = [['nginx', '-v', 'nginx-light'], ['openssl', 'version', 'openssl']].find(([command, flag]) => spawnSync(command!, [flag!], { stdio: 'ignore' }).status !== 0);
  if (missing === undefined) return undefined;
  const why = `${missing[0]} is not installed: apt-get install ${missing[2]} to run this test`;
  if (process.env.CI === 'true') throw new Error(`${why} (CI=true: a missing component is a failure; .ci/run installs it)`);
  return why;
})();

export interface NginxFolder {
  dir: string;
  /** The throwaway certificate of pets.example, PEM. */
  cert: string;
  /** The documented site with the certificate's paths, and the given ports when `ports` is set. */
  site: string;
  /** The whole nginx.conf around the site, run from `dir`. */
  config: string;
}

/**
 * A folder holding the site and a main configuration that includes it, with a fresh certificate.
 * With `ports`, the site listens on 127.0.0.1:`https` (and :`http` for the redirect) and its
 * upstream servers are `upstreams`, in order.
 */
export function nginxFolder(t: { after(fn: () => void): void }, ports?: { https: number; http: number; upstreams: number[] }): NginxFolder {
  const dir = mkdtempSync(join(tmpdir(), 'pets-nginx-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=pets.example', '-addext', 'subjectAltName=DNS:pets.example'], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(made.stderr);
  let site = readFileSync(NGINX_SITE, 'utf8').replace('/etc/ssl/pets/fullchain.pem', join(dir, 'cert.pem')).replace('/etc/ssl/pets/privkey.pem', join(dir, 'key.pem'));
  if (ports !== undefined) {
    site = site.replace(/^ {4}listen \[::\]:\d+.*\n/gm, '').replace('listen 443 ssl;', `listen 127.0.0.1:${ports.https} ssl;`).replace('listen 80;', `listen 127.0.0.1:${ports.http};`);
    const servers = [...site.matchAll(/^ {4}server 127\.0\.0\.1:\d+ /gm)];
    if (servers.length !== ports.upstreams.length) throw new Error(`the site has ${servers.length} upstream servers, the test ${ports.upstreams.length}`);
    servers.forEach((match, index) => (site = site.replace(match[0], `    server 127.0.0.1:${ports.upstreams[index]} `)));
  }
  writeFileSync(join(dir, 'pets.conf'), site);
  // As root, nginx's workers would run as nobody, who cannot write this private folder.
  const user = process.getuid?.() === 0 ? 'user root;\n' : '';
  const config = `${user}pid ${dir}/nginx.pid;\nerror_log stderr;\ndaemon off;\nworker_processes 2;\nevents {}\nhttp {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n  include ${dir}/pets.conf;\n}\n`;
  writeFileSync(join(dir, 'nginx.conf'), config);
  return { dir, cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), site, config };
}

/** Runs nginx on the folder's configuration until the test ends; resolves once it accepts TLS. */
export async function startNginx(t: { after(fn: () => Promise<void> | void): void }, folder: NginxFolder, https: number): Promise<void> {
  const child = spawn('nginx', ['-p', folder.dir, '-c', join(folder.dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.after(async () => {
    child.kill('SIGQUIT');
    await exited;
  });
  for (let tries = 0; ; tries++) {
    if (child.exitCode !== null) throw new Error(`nginx exited ${child.exitCode}: ${stderr}`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: https, servername: 'pets.example', ca: folder.cert }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (up) return;
    if (tries > 100) throw new Error(`nginx did not accept connections within 10 s: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
