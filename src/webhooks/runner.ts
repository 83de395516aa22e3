/**
 * Runs delivery attempts beside request handling, at most MAX_ATTEMPTS_AT_ONCE at a time in an
 * instance, so that deliveries never take more than their share of its sockets and memory.
 *
 * Fairness: each endpoint has its own queue, and may hold at most MAX_ATTEMPTS_PER_ENDPOINT of
 * the slots. When a slot frees, it goes to the endpoint with the fewest attempts running, among
 * those with one waiting (the longest ready first on a tie). So an endpoint that answers after
 * 10 s holds at most 4 slots while its own deliveries queue behind them, and the other endpoints'
 * deliveries start at once; even when several slow endpoints hold every slot, a delivery to
 * another endpoint takes the next slot that frees (within one attempt's 10 s), never waiting
 * behind a slow endpoint's backlog. The cap of 4 rather than 16 trades the throughput of one
 * busy endpoint alone (4 attempts at once) for that room; a cap of 1 would deliver to one busy
 * endpoint at one attempt per round trip.
 *
 * Pure scheduling: what an attempt does, and what time it is, are injected.
 */
import type { Clock } from '../clock.ts';

/** The contract's bound on attempts at once per instance. */
export const MAX_ATTEMPTS_AT_ONCE = 16;
/** The most slots one endpoint may hold. */
export const MAX_ATTEMPTS_PER_ENDPOINT = 4;

export interface RunnerOptions<J> {
  /** Runs one job (an attempt, and recording it); the slot frees when it settles. `waitedMs`: its time in the queue. */
  run(job: J, waitedMs: number): Promise<void>;
  /** The endpoint a job goes to: the key of its queue. */
  endpointOf(job: J): string;
  clock: Clock;
  concurrency?: number;
  perEndpoint?: number;
  /** A job's run rejected (a bug: `run` should record every outcome); the runner goes on. */
  failed?(job: J, error: unknown): void;
}

export interface RunnerLoad {
  readonly running: number;
  readonly queued: number;
  /** Slots free now. */
  readonly free: number;
  /** Endpoints holding all the slots they may: work claimed for them now would only wait. */
  readonly saturated: ReadonlySet<string>;
}

export interface Runner<J> {
  /**
   * Queues `job`; it starts at once if its endpoint and the instance have a slot free. False,
   * and nothing queued, once stopping: the caller gives the job back (its claim ends).
   */
  submit(job: J): boolean;
  load(): RunnerLoad;
  /** Starts nothing more; resolves, with the jobs that never started, once the running ones have settled. */
  stop(): Promise<J[]>;
}

interface Endpoint<J> {
  readonly key: string;
  readonly waiting: { job: J; since: number }[];
  running: number;
}

/** A runner over `options.run`. */
export function createRunner<J>(options: RunnerOptions<J>): Runner<J> {
  const { run, endpointOf, clock, concurrency = MAX_ATTEMPTS_AT_ONCE, perEndpoint = MAX_ATTEMPTS_PER_ENDPOINT } = options;
  const endpoints = new Map<string, Endpoint<J>>();
  // ready[k]: the endpoints with a job waiting, k running and room for one more, longest ready first.
  const ready = Array.from({ length: perEndpoint }, () => new Set<Endpoint<J>>());
  const settled = new Set<Promise<void>>();
  let running = 0;
  let stopped = false;

  const markReady = (endpoint: Endpoint<J>) => {
    if (endpoint.waiting.length > 0 && endpoint.running < perEndpoint) ready[endpoint.running]!.add(endpoint);
  };
  const start = (endpoint: Endpoint<J>) => {
    ready[endpoint.running]!.delete(endpoint);
    const { job, since } = endpoint.waiting.shift()!;
    endpoint.running++;
    running++;
    markReady(endpoint);
    // Started at once (a synchronous throw becomes a rejection), and its slot freed once settled.
    const done = new Promise<void>((resolve) => resolve(run(job, clock() - since)))
      .catch((error: unknown) => options.failed?.(job, error))
      .finally(() => finish(endpoint, done));
    settled.add(done);
  };
  const finish = (endpoint: Endpoint<J>, done: Promise<void>) => {
    settled.delete(done);
    ready[endpoint.running]?.delete(endpoint);
    endpoint.running--;
    running--;
    markReady(endpoint);
    if (endpoint.running === 0 && endpoint.waiting.length === 0) endpoints.delete(endpoint.key);
    pump();
  };
  const pump = () => {
    while (!stopped && running < concurrency) {
      const next = ready.find((endpoints) => endpoints.size > 0)?.values().next().value;
      if (next === undefined) return;
      start(next);
    }
  };

  return {
    submit(job) {
      if (stopped) return false;
      const key = endpointOf(job);
      let endpoint = endpoints.get(key);
      if (endpoint === undefined) endpoints.set(key, (endpoint = { key, waiting: [], running: 0 }));
      endpoint.waiting.push({ job, since: clock() });
      markReady(endpoint);
      pump();
      return true;
    },
    load() {
      const saturated = new Set([...endpoints.values()].filter((endpoint) => endpoint.running >= perEndpoint).map((endpoint) => endpoint.key));
      const queued = [...endpoints.values()].reduce((sum, endpoint) => sum + endpoint.waiting.length, 0);
      return { running, queued, free: Math.max(0, concurrency - running), saturated };
    },
    async stop() {
      stopped = true;
      const unstarted = [...endpoints.values()].flatMap((endpoint) => endpoint.waiting.splice(0).map(({ job }) => job));
      for (const set of ready) set.clear();
      while (settled.size > 0) await Promise.all(settled);
      return unstarted;
    },
  };
}
