/**
 * The figures of this Node process that the metrics expose under Prometheus' conventional names.
 * Started only when metrics are on (main.ts): the event-loop monitor is a 10 ms timer.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { EventLoopDelay, ProcessProbe } from './metrics.ts';

/** perf_hooks' sampling interval: each sample is the time between two ticks of this timer. */
const RESOLUTION_MS = 10;
const QUANTILES = [0.5, 0.9, 0.99] as const;

/** Starts sampling the event loop; `stop` ends it (at shutdown). */
export function startProcessProbe(): ProcessProbe & { stop(): void } {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  // A sample is the whole interval between two timer ticks, so the delay is what exceeds the
  // interval itself (perf_hooks reports nanoseconds).
  const delaySeconds = (nanoseconds: number) => Math.max(0, nanoseconds / 1e6 - RESOLUTION_MS) / 1000;
  return {
    residentMemoryBytes: () => process.memoryUsage.rss(),
    cpuSeconds: () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1e6;
    },
    startTimeSeconds: () => Math.round(performance.timeOrigin) / 1000,
    eventLoopDelay: (): EventLoopDelay => {
      const count = histogram.count;
      if (count === 0) return { count: 0, sumSeconds: 0, maxSeconds: 0, quantiles: QUANTILES.map((quantile) => [quantile, Number.NaN]) };
      return {
        count,
        sumSeconds: delaySeconds(histogram.mean) * count,
        maxSeconds: delaySeconds(histogram.max),
        quantiles: QUANTILES.map((quantile) => [quantile, delaySeconds(histogram.percentile(quantile * 100))]),
      };
    },
    stop: () => histogram.disable(),
  };
}
