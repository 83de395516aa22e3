/** Milliseconds since the Unix epoch. Injected everywhere time matters, so tests move a number. */
export type Clock = () => number;

/** The real clock; only `main.ts` and the key command line pass it in. */
export const systemClock: Clock = () => Date.now();
