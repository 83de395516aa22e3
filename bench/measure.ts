/**
 * One timed load on one server: autocannon in this process, with the latency of every 2xx
 * response kept in microseconds (autocannon's own histogram has 1 ms buckets, too coarse for
 * latencies of a few milliseconds), and the CPU and memory the server used meanwhile.
 */
import autocannon from 'autocannon';
import { createHistogram } from 'node:perf_hooks';
import type { ServerProcess } from './processes.ts';
import { readCpuTicks, readMachineTicks, readMemory, TICKS_PER_SECOND } from './processes.ts';
import type { Workload } from './workloads.ts';

export interface LoadOptions {
  seconds: number;
  connections: number;
}

export interface LoadResult {
  /** 2xx responses. */
  requests: number;
  non2xx: number;
  /** Connection errors, timeouts included. */
  errors: number;
  timeouts: number;
  /** Seconds autocannon ran. */
  durationS: number;
  /** 2xx responses per second. */
  rps: number;
  /** Latency of 2xx responses, in milliseconds. */
  latencyMs: { p50: number; p90: number; p99: number; mean: number; max: number };
  /** CPU used during the load, in cores (1 = one core busy the whole time). */
  cpu: {
    server: number;
    generator: number;
    /** Interrupts, softirqs (loopback networking) and kernel threads (the I/O of fsync). */
    kernel: number;
    /** Other processes, and time taken by the hypervisor: noise, when it is not near 0. */
    other: number;
  };
  /** Highest resident memory of the server seen during the load (sampled every 100 ms), bytes. */
  rssMax: number;
}

/** Runs `workload` against `server` for `seconds` with `connections` keep-alive connections. */
export async function runLoad(server: ServerProcess, workload: Workload, { seconds, connections }: LoadOptions): Promise<LoadResult> {
  const latencyUs = createHistogram();
  let rssMax = 0;
  const sampleRss = () => {
    rssMax = Math.max(rssMax, readMemory(server.pid)?.rss ?? 0);
  };
  const sampler = setInterval(sampleRss, 100);
  const startWall = performance.now();
  const startServerTicks = readCpuTicks(server.pid);
  const startMachine = readMachineTicks();
  const startOwn = process.cpuUsage();

  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: server.url,
        connections,
        duration: seconds,
        pipelining: 1,
        timeout: 10,
        requests: workload.requests(),
      },
      (error: unknown, done: autocannon.Result) => (error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(done)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencyUs.record(Math.max(1, Math.round(responseTime * 1000)));
    });
  });

  const wallS = (performance.now() - startWall) / 1000;
  const own = process.cpuUsage(startOwn);
  const serverTicks = readCpuTicks(server.pid) - startServerTicks;
  const endMachine = readMachineTicks();
  const machineTicks = endMachine.busy - startMachine.busy;
  const kernelTicks = endMachine.kernel - startMachine.kernel;
  clearInterval(sampler);
  sampleRss();

  const ownTicks = ((own.user + own.system) / 1e6) * TICKS_PER_SECOND;
  const cores = (ticks: number) => ticks / TICKS_PER_SECOND / wallS;
  const ok = result['2xx'];
  const ms = (us: number) => us / 1000;
  return {
    requests: ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    durationS: result.duration,
    rps: ok / result.duration,
    latencyMs: ok === 0
      ? { p50: Number.NaN, p90: Number.NaN, p99: Number.NaN, mean: Number.NaN, max: Number.NaN }
      : {
          p50: ms(latencyUs.percentile(50)),
          p90: ms(latencyUs.percentile(90)),
          p99: ms(latencyUs.percentile(99)),
          mean: ms(latencyUs.mean),
          max: ms(latencyUs.max),
        },
    cpu: {
      server: cores(serverTicks),
      generator: cores(ownTicks),
      kernel: cores(kernelTicks),
      // Whatever else ran on the machine meanwhile (the other server is idle): a noisy neighbour shows here.
      other: Math.max(0, cores(machineTicks - kernelTicks - serverTicks - ownTicks)),
    },
    rssMax,
  };
}
