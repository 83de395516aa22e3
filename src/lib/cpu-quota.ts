/**
 * How many cores the kernel's CPU controller lets this process use: a container started with
 * `--cpus=1`, or a systemd unit with `CPUQuota=100%`, may run on a machine of many cores and
 * still get one core's time. `os.availableParallelism()` sees the cores (and the affinity mask),
 * not the quota; this reads the quota of the process's cgroup and of every cgroup above it,
 * cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us` and `cpu.cfs_period_us`).
 */
// Not `import ... from 'node:fs'`: its ES-module view loads what a start does not use (http/access-log.ts).
const { readFileSync } = process.getBuiltinModule('node:fs');

/** Reads a file's text, or null if it cannot be read. */
export type ReadText = (path: string) => string | null;

const readText: ReadText = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
};

/** cgroup v2's `cpu.max`: "max 100000" (no limit) or "<quota> <period>" in microseconds. */
export function parseCpuMax(text: string): number | null {
  const [quota, period = '100000'] = text.trim().split(/\s+/);
  return quotaOf(quota, period);
}

/** cgroup v1's `cpu.cfs_quota_us` (-1 for no limit) and `cpu.cfs_period_us`. */
export function parseCfs(quota: string, period: string): number | null {
  return quotaOf(quota.trim(), period.trim());
}

/** Cores as a fraction (150000 of 100000 is 1.5), or null for none or anything unreadable. */
function quotaOf(quota: string | undefined, period: string): number | null {
  if (quota === undefined || !/^[0-9]+$/.test(quota) || !/^[0-9]+$/.test(period)) return null;
  const cores = Number(quota) / Number(period);
  return cores > 0 && Number.isFinite(cores) ? cores : null;
}

/** The folder `path` and each folder above it, up to the root `/`. */
function selfAndAncestors(path: string): string[] {
  const folders = [path];
  for (let at = path; at !== '/' && at !== ''; ) {
    at = at.slice(0, Math.max(1, at.lastIndexOf('/')));
    folders.push(at);
  }
  return folders;
}

/**
 * The smallest CPU quota, in cores, of the cgroups that hold this process (`/proc/self/cgroup`),
 * or null when none is set or none can be read. `read` and `root` are the filesystem's; tests
 * pass their own.
 */
export function cgroupCpuQuota(read: ReadText = readText, root = '/sys/fs/cgroup'): number | null {
  const membership = read('/proc/self/cgroup');
  if (membership === null) return null;
  const limits: number[] = [];
  for (const line of membership.split('\n')) {
    const [, controllers, path] = /^[0-9]+:([^:]*):(\/.*)$/.exec(line.trim()) ?? [];
    if (controllers === undefined || path === undefined) continue;
    for (const folder of selfAndAncestors(path)) {
      const under = folder === '/' ? '' : folder;
      if (controllers === '') {
        const max = read(`${root}${under}/cpu.max`);
        const cores = max === null ? null : parseCpuMax(max);
        if (cores !== null) limits.push(cores);
      } else if (controllers.split(',').includes('cpu')) {
        // The v1 controller is mounted as cpu, or as cpu,cpuacct with cpu a link to it.
        for (const mount of [`${root}/cpu`, `${root}/${controllers}`]) {
          const quota = read(`${mount}${under}/cpu.cfs_quota_us`);
          const period = read(`${mount}${under}/cpu.cfs_period_us`);
          const cores = quota === null || period === null ? null : parseCfs(quota, period);
          if (cores !== null) {
            limits.push(cores);
            break;
          }
        }
      }
    }
  }
  return limits.length === 0 ? null : Math.min(...limits);
}
