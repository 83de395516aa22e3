/**
 * A client of the event stream for tests: `fetch` with `Accept: text/event-stream`, its body read
 * as it comes and cut into frames (server-sent events: `id`, `event`, `data`, or a comment).
 */

/** One frame as sent: an event's fields, or a comment line's text. */
export interface Frame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

export interface OpenStream {
  response: Response;
  /** The next frame, in order; null once the server ended the response (or `close` was called). */
  next(): Promise<Frame | null>;
  /** Frames until one satisfies `until`, or the end; rejects after `timeoutMs`. */
  collect(until: (frame: Frame, all: Frame[]) => boolean, timeoutMs?: number): Promise<Frame[]>;
  /** Resolves once the server ended the response, with the frames not yet taken. */
  ended: Promise<void>;
  close(): void;
}

export interface StreamRequest {
  key: string;
  lastEventId?: string;
  headers?: Record<string, string>;
}

/** Parses one block (the lines before a blank line). */
function parseFrame(block: string): Frame {
  const frame: Frame = {};
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) frame.comment = line.slice(1).trim();
    else {
      const colon = line.indexOf(':');
      const field = line.slice(0, colon) as 'id' | 'event' | 'data';
      frame[field] = line.slice(colon + 1).replace(/^ /, '');
    }
  }
  return frame;
}

/** Opens `url` as a stream; resolves once the answer's headers came (any status). */
export async function openStream(url: string, { key, lastEventId, headers = {} }: StreamRequest): Promise<OpenStream> {
  const abort = new AbortController();
  const response = await fetch(url, {
    headers: { accept: 'text/event-stream', authorization: `Bearer ${key}`, ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }), ...headers },
    signal: abort.signal,
  });
  const queue: Frame[] = [];
  const waiting: ((frame: Frame | null) => void)[] = [];
  let done = false;
  const ended = Promise.withResolvers<void>();
  const push = (frame: Frame | null) => {
    if (frame === null) done = true;
    const taker = waiting.shift();
    if (taker) taker(frame);
    else if (frame !== null) queue.push(frame);
    if (done) for (const rest of waiting.splice(0)) rest(null);
  };
  void (async () => {
    // Any other answer (a JSON error) is left to the caller to read.
    if (response.body === null || !(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      push(null);
      return ended.resolve();
    }
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) !== -1) {
          push(parseFrame(buffer.slice(0, cut)));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch {
      // Aborted by `close`, or the connection was cut: the end, as for the server's.
    }
    push(null);
    ended.resolve();
  })();
  const next = () => (queue.length > 0 ? Promise.resolve(queue.shift()!) : done ? Promise.resolve(null) : new Promise<Frame | null>((resolve) => waiting.push(resolve)));
  return {
    response,
    next,
    async collect(until, timeoutMs = 5_000) {
      const all: Frame[] = [];
      const deadline = AbortSignal.timeout(timeoutMs);
      const timedOut = new Promise<never>((_, reject) => deadline.addEventListener('abort', () => reject(new Error(`no frame ended the wait within ${timeoutMs} ms; got ${JSON.stringify(all)}`))));
      for (;;) {
        const frame = await Promise.race([next(), timedOut]);
        if (frame === null) return all;
        all.push(frame);
        if (until(frame, all)) return all;
      }
    },
    ended: ended.promise,
    close: () => abort.abort(),
  };
}

/** The events of frames (the comments left out), as the feed's JSON. */
export function eventsOf(frames: readonly Frame[]): { id: number; type: string; data: { id: number; [field: string]: unknown }; actor: unknown }[] {
  return frames.filter((frame) => frame.data !== undefined).map((frame) => JSON.parse(frame.data!));
}
