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

/**
 * The endpoints' queues, and whose job starts next: the endpoint with the fewest running among
 * those with a job waiting and room for one more, the longest ready first on a tie.
 */
function createQueues<J>(perEndpoint: number) {
  const endpoints = new Map<string, Endpoint<J>>();
  // ready[k]: the endpoints with a job waiting, k running and room for one more, longest ready first.
  const ready = Array.from({ length: perEndpoint }, () => new Set<Endpoint<J>>());
  const markReady = (endpoint: Endpoint<J>) => {
    if (endpoint.waiting.length > 0 && endpoint.running < perEndpoint) ready[endpoint.running]!.add(endpoint);
  };
  return {
    endpoints,
    add(key: string, job: J, since: number) {
      let endpoint = endpoints.get(key);
      if (endpoint === undefined) endpoints.set(key, (endpoint = { key, waiting: [], running: 0 }));
      endpoint.waiting.push({ job, since });
      markReady(endpoint);
    },
    /** The next job to start, counted as running; or undefined when none may start. */
    take(): { endpoint: Endpoint<J>; job: J; since: number } | undefined {
      const endpoint: Endpoint<J> | undefined = ready.find((set) => set.size > 0)?.values().next().value;
      if (endpoint === undefined) return undefined;
      ready[endpoint.running]!.delete(endpoint);
      const { job, since } = endpoint.waiting.shift()!;
      endpoint.running++;
      markReady(endpoint);
      return { endpoint, job, since };
    },
    /** One of `endpoint`'s jobs settled. */
    settled(endpoint: Endpoint<J>) {
      ready[endpoint.running]?.delete(endpoint);
      endpoint.running--;
      markReady(endpoint);
      if (endpoint.running === 0 && endpoint.waiting.length === 0) endpoints.delete(endpoint.key);
    },
    /** Every job still waiting, taken out of the queues. */
    clear(): J[] {
      for (const set of ready) set.clear();
      return [...endpoints.values()].flatMap((endpoint) => endpoint.waiting.splice(0).map(({ job }) => job));
    },
  };
}

/** A runner over `options.run`. */
export function createRunner<J>(options: RunnerOptions<J>): Runner<J> {
  const { run, endpointOf, clock, concurrency = MAX_ATTEMPTS_AT_ONCE, perEndpoint = MAX_ATTEMPTS_PER_ENDPOINT } = options;
  const queues = createQueues<J>(perEndpoint);
  const settling = new Set<Promise<void>>();
  let running = 0;
  let stopped = false;

  const start = ({ endpoint, job, since }: NonNullable<ReturnType<typeof queues.take>>) => {
    running++;
    // Started at once (a synchronous throw becomes a rejection), its slot freed once settled.
    const done: Promise<void> = new Promise<void>((resolve) => resolve(run(job, clock() - since)))
      .catch((error: unknown) => options.failed?.(job, error))
      .finally(() => {
        settling.delete(done);
        running--;
        queues.settled(endpoint);
        pump();
      });
    settling.add(done);
  };
  const pump = () => {
    while (!stopped && running < concurrency) {
      const next = queues.take();
      if (next === undefined) return;
      start(next);
    }
  };

  return {
    submit(job) {
      if (stopped) return false;
      queues.add(endpointOf(job), job, clock());
      pump();
      return true;
    },
    load() {
      const endpoints = [...queues.endpoints.values()];
      const saturated = new Set(endpoints.filter((endpoint) => endpoint.running >= perEndpoint).map((endpoint) => endpoint.key));
      const queued = endpoints.reduce((sum, endpoint) => sum + endpoint.waiting.length, 0);
      return { running, queued, free: Math.max(0, concurrency - running), saturated };
    },
    async stop() {
      stopped = true;
      const unstarted = queues.clear();
      while (settling.size > 0) await Promise.all(settling);
      return unstarted;
    },
  };
}
