/**
 * One timed load on one server, by wrk (a child process on the generator's core) or, when wrk is
 * missing, by autocannon in this process; and what the machine did meanwhile: the CPU the server,
 * the generator and everything else used, how busy the server's and the generator's cores were,
 * and the server's resident memory.
 */
import autocannon from 'autocannon';
import { createHistogram } from 'node:perf_hooks';
import { busiestShare, type Pinning } from './cpu.ts';
import type { Generator } from './options.ts';
import type { ServerProcess } from './processes.ts';
import { readCpuTicks, readMachineTicks, readMemory, TICKS_PER_SECOND } from './processes.ts';
import { runWrk, type Latency } from './wrk.ts';
import type { Workload } from './workloads.ts';

export interface LoadSetup {
  generator: Generator;
  /** wrk's path, for the wrk generator. */
  wrk: string | null;
  /** The cores of the server and of the generator, or null when not pinned. */
  pinning: Pinning | null;
  seconds: number;
  connections: number;
  /** The workload's `Authorization` header, for wrk's scripts (autocannon's requests carry it). */
  authorization: string;
}

export interface LoadResult {
  generator: Generator;
  /** 2xx responses. */
  requests: number;
  non2xx: number;
  /** Connection errors (connect, read, write). */
  errors: number;
  /** Responses slower than the timeout (10 s). */
  timeouts: number;
  /** Seconds the generator ran. */
  durationS: number;
  /** 2xx responses per second. */
  rps: number;
  /** Latencies as measured, in milliseconds: of every response with wrk, of 2xx ones with autocannon. */
  latencyMs: Latency;
  /** wrk only: its own p99, corrected for coordinated omission (see bench/wrk.ts). */
  correctedP99Ms: number | null;
  /** CPU used during the load, in cores (1 = one core busy the whole time). */
  cpu: {
    server: number;
    /** The generator process: wrk, or this process for autocannon. */
    generator: number;
    /** This process when it is not the generator: it reads the service's access log meanwhile. */
    harness: number;
    /** Interrupts, softirqs (loopback networking) and kernel threads (the I/O of fsync). */
    kernel: number;
    /** Other processes, and time taken by the hypervisor: noise, when it is not near 0. */
    other: number;
    /** Busy share (0 to 1) of the server's core (the busiest, if several), whatever ran on it; null when not pinned. */
    serverCore: number | null;
    /** Busy share (0 to 1) of the generator's core (the busiest, if several), whatever ran on it; null when not pinned. */
    generatorCore: number | null;
  };
  /** Highest resident memory of the server seen during the load (sampled every 100 ms), bytes. */
  rssMax: number;
}

/** What the generator itself reports. */
interface Generated {
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationS: number;
  latencyMs: Latency;
  correctedP99Ms: number | null;
  /** CPU ticks of the generator when it is another process than this one. */
  generatorTicks: number | null;
}

/** Runs `workload` against `server` for `setup.seconds` with `setup.connections` keep-alive connections. */
export async function runLoad(server: ServerProcess, workload: Workload, setup: LoadSetup): Promise<LoadResult> {
  let rssMax = 0;
  const sampleRss = () => {
    rssMax = Math.max(rssMax, readMemory(server.pid)?.rss ?? 0);
  };
  const sampler = setInterval(sampleRss, 100);
  const startWall = performance.now();
  const startServerTicks = readCpuTicks(server.pid);
  const startMachine = readMachineTicks();
  const startOwn = process.cpuUsage();

  let generated: Generated;
  try {
    generated = setup.generator === 'wrk' ? await viaWrk(server, workload, setup) : await viaAutocannon(server, workload, setup);
  } finally {
    clearInterval(sampler);
  }

  const wallS = (performance.now() - startWall) / 1000;
  const own = process.cpuUsage(startOwn);
  const serverTicks = readCpuTicks(server.pid) - startServerTicks;
  const endMachine = readMachineTicks();
  sampleRss();

  const ownTicks = ((own.user + own.system) / 1e6) * TICKS_PER_SECOND;
  const generatorTicks = generated.generatorTicks ?? ownTicks;
  const harnessTicks = generated.generatorTicks === null ? 0 : ownTicks;
  const kernelTicks = endMachine.kernel - startMachine.kernel;
  const cores = (ticks: number) => ticks / TICKS_PER_SECOND / wallS;
  const share = (cpus: number[] | undefined) => (cpus === undefined ? null : busiestShare(startMachine.stat, endMachine.stat, cpus));
  return {
    generator: setup.generator,
    requests: generated.requests,
    non2xx: generated.non2xx,
    errors: generated.errors,
    timeouts: generated.timeouts,
    durationS: generated.durationS,
    rps: generated.requests / generated.durationS,
    latencyMs: generated.latencyMs,
    correctedP99Ms: generated.correctedP99Ms,
    cpu: {
      server: cores(serverTicks),
      generator: cores(generatorTicks),
      harness: cores(harnessTicks),
      kernel: cores(kernelTicks),
      // Whatever else ran on the machine meanwhile (the other server is idle): a noisy neighbour shows here.
      other: Math.max(0, cores(endMachine.busy - startMachine.busy - kernelTicks - serverTicks - generatorTicks - harnessTicks)),
      serverCore: share(setup.pinning?.server),
      generatorCore: share(setup.pinning?.generator),
    },
    rssMax,
  };
}

async function viaWrk(server: ServerProcess, workload: Workload, setup: LoadSetup): Promise<Generated> {
  const result = await runWrk(
    setup.wrk!,
    {
      url: server.url,
      script: workload.wrk.script,
      args: workload.wrk.args,
      // One thread per core of its own.
      threads: setup.pinning?.generator.length ?? 1,
      seconds: setup.seconds,
      connections: setup.connections,
      timeoutSeconds: 10,
    },
    setup.pinning?.generator ?? null,
    setup.authorization,
  );
  return {
    requests: result.responses - result.non2xx,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    durationS: result.durationS,
    latencyMs: result.latencyMs,
    correctedP99Ms: result.correctedP99Ms,
    generatorTicks: result.cpuTicks,
  };
}

/**
 * autocannon in this process, with the latency of every 2xx response kept in microseconds
 * (autocannon's own histogram has 1 ms buckets, too coarse for latencies of a few milliseconds).
 */
async function viaAutocannon(server: ServerProcess, workload: Workload, setup: LoadSetup): Promise<Generated> {
  const latencyUs = createHistogram();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: server.url,
        connections: setup.connections,
        duration: setup.seconds,
        pipelining: 1,
        timeout: 10,
        requests: workload.autocannon(),
      },
      (error: unknown, done: autocannon.Result) => (error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(done)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencyUs.record(Math.max(1, Math.round(responseTime * 1000)));
    });
  });
  const ok = result['2xx'];
  const ms = (us: number) => us / 1000;
  return {
    requests: ok,
    non2xx: result.non2xx,
    errors: result.errors - result.timeouts,
    timeouts: result.timeouts,
    durationS: result.duration,
    latencyMs: ok === 0
      ? { p50: Number.NaN, p90: Number.NaN, p99: Number.NaN, mean: Number.NaN, max: Number.NaN }
      : {
          p50: ms(latencyUs.percentile(50)),
          p90: ms(latencyUs.percentile(90)),
          p99: ms(latencyUs.percentile(99)),
          mean: ms(latencyUs.mean),
          max: ms(latencyUs.max),
        },
    correctedP99Ms: null,
    generatorTicks: null,
  };
}
