/**
 * What the pipeline reports as it answers, for the metrics (src/ops/metrics.ts); the pipeline
 * knows nothing of how it is counted. Called on the hot path: implementations must be cheap.
 */
export interface PipelineObserver {
  /** A response was written. `route` is the router's template, or null when no route matched. */
  responded(method: string, route: string | null, status: number, seconds: number): void;
  rateLimitRejected(code: 'rate_limited' | 'temporarily_banned'): void;
  apiKeyRejected(code: 'missing_api_key' | 'invalid_api_key' | 'insufficient_scope'): void;
  /** A request failed on a database error (answered 503 or 500). */
  databaseError(): void;
}

/** Nobody listening. */
export const NO_OBSERVER: PipelineObserver = { responded() {}, rateLimitRejected() {}, apiKeyRejected() {}, databaseError() {} };
