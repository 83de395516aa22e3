/**
 * Structured logging: one JSON line per request on stdout, buffered and written once per
 * event-loop turn instead of one synchronous write per request. Never the key or the
 * Authorization header: only the fields listed in AccessEntry exist.
 */

import { LOG_LEVELS, type LogLevel } from '../config.ts';

// Not `import ... from 'node:fs'`: Node's ES-module view of node:fs reads every export once, which
// loads fs/promises, its streams and watchers, and readline, none of which a start uses (as
// http/server.ts says of node:http); the CommonJS module that getBuiltinModule returns does not.
const { writeSync } = process.getBuiltinModule('node:fs');

/**
 * Most characters of a path that a log line holds. A request line may carry up to
 * 16 KiB of path, and whole paths let a client fill the bounded log buffer so that real lines
 * are dropped; the start of a path says enough.
 */
export const MAX_LOGGED_PATH = 256;

/** The name of an unexpected error, or the type of a thrown value that is not an Error. */
export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** Most frames logged of one error: V8 keeps ten by default, and a line must stay short whatever `Error.stackTraceLimit` says. */
const MAX_FRAMES = 32;

/**
 * The stack frames of an error (`at list (file:///.../pets-store.ts:12:5)`), without the lines
 * before them, which repeat its message: a message may hold input or SQL, a frame holds neither.
 * V8 writes `name: message` (on as many lines as the message has), then one frame a line. When
 * the stack does not start with that (its message or name changed after it was first read), where
 * the message ends is unknown, and a message may hold lines that look like frames: none is kept.
 */
export function stackFrames(error: unknown): string[] {
  if (!(error instanceof Error) || typeof error.stack !== 'string') return [];
  const { name, message, stack } = error;
  const head = name === '' ? message : message === '' ? name : `${name}: ${message}`;
  if (!stack.startsWith(`${head}\n`)) return [];
  const frames: string[] = [];
  for (const line of stack.slice(head.length + 1).split('\n', MAX_FRAMES)) {
    if (FRAME.test(line)) frames.push(line.trim());
  }
  return frames;
}

const FRAME = /^\s+at \S/;

/**
 * What the log line of an unexpected error says of it: its name and its stack frames, never its
 * message. One function, so that every such line (a 500, a chore that failed, a crash) says the
 * same, and anything added for an engine's errors is added once.
 */
export function errorFields(error: unknown): { error: string; frames: string[] } {
  return { error: errorName(error), frames: stackFrames(error) };
}

/** `path` as logged: whole when short, else its start and a marker saying it was cut, 256 characters in all. */
export function loggedPath(path: string): string {
  if (path.length <= MAX_LOGGED_PATH) return path;
  const marker = `...[cut from ${path.length} characters]`;
  return path.slice(0, MAX_LOGGED_PATH - marker.length) + marker;
}

export interface AccessEntry {
  time: number;
  requestId: string;
  method: string;
  path: string;
  status: number;
  durationMs: number;
  keyId: string | null;
}

export interface Logger {
  /** One line for a finished request (level info). */
  access(entry: AccessEntry): void;
  /** Anything else: `{ level, event, ... }`; fields must already be free of secrets. */
  event(fields: Record<string, unknown>): void;
  /** Writes whatever is buffered now (used at shutdown). */
  flush(): void;
}

export interface LoggerOptions {
  level: LogLevel;
  write: (text: string) => void;
  clock: () => number;
  /** Bytes buffered before a write is forced within the same turn. */
  highWaterMark?: number;
}

/** Creates a logger that batches lines and hands them to `write`. */
export function createLogger({ level, write, clock, highWaterMark = 64 * 1024 }: LoggerOptions): Logger {
  const threshold = LOG_LEVELS.indexOf(level);
  let buffer = '';
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    if (buffer === '') return;
    const text = buffer;
    buffer = '';
    write(text);
  };
  const push = (line: string) => {
    buffer += line + '\n';
    if (buffer.length >= highWaterMark) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  const enabled = (wanted: LogLevel) => LOG_LEVELS.indexOf(wanted) >= threshold && level !== 'silent';
  const accessEnabled = enabled('info');
  // Requests answered in the same millisecond share one ISO string: formatting it was a tenth of
  // the line's cost under load.
  let isoOf = NaN;
  let iso = '';
  const isoTime = (time: number) => {
    if (time !== isoOf) {
      isoOf = time;
      iso = new Date(time).toISOString();
    }
    return iso;
  };

  return {
    access(entry) {
      if (!accessEnabled) return;
      push(
        `{"time":"${isoTime(entry.time)}","level":"info","requestId":"${entry.requestId}",` +
          `"method":${JSON.stringify(entry.method)},"path":${JSON.stringify(loggedPath(entry.path))},"status":${entry.status},` +
          `"durationMs":${entry.durationMs},"keyId":${entry.keyId === null ? 'null' : JSON.stringify(entry.keyId)}}`,
      );
    },
    event(fields) {
      const wanted = (LOG_LEVELS as readonly unknown[]).includes(fields.level) ? (fields.level as LogLevel) : 'info';
      if (!enabled(wanted)) return;
      push(JSON.stringify({ time: new Date(clock()).toISOString(), ...fields, level: wanted }));
    },
    flush,
  };
}

/** What boundedWriter needs of a stream: Node's Writable has both. */
export interface LogStream {
  readonly writableLength: number;
  write(text: string): unknown;
}

/**
 * Writes log text to a stream without ever holding more than `limitBytes` of it: stdout to a
 * pipe is asynchronous, and a log reader slower than the server would otherwise grow memory
 * without bound. Lines that do not fit are dropped, never waited for, and counted in a
 * `log_lines_dropped` line once the stream has room again.
 */
export function boundedWriter(stream: LogStream, limitBytes: number, clock: () => number): (text: string) => void {
  let dropped = 0;
  return (text) => {
    if (stream.writableLength > limitBytes) {
      dropped += lineCount(text);
      return;
    }
    if (dropped > 0) {
      stream.write(droppedLinesNote(dropped, clock));
      dropped = 0;
    }
    stream.write(text);
  };
}

/**
 * POSIX makes a write of at most PIPE_BUF bytes to a pipe atomic (Linux: 4096): pieces no larger
 * than this, cut after a newline, never interleave with another thread's pieces.
 */
export const ATOMIC_WRITE_BYTES = 4096;

/**
 * Writes log text straight to a file descriptor, for threads that share the process's stdout
 * (WORKERS): a worker's own `process.stdout` posts every write to the main thread, which would
 * then carry every worker's log. Each turn's text is written in pieces of whole lines of at most
 * `ATOMIC_WRITE_BYTES`, so lines of several threads never mix (a single line longer than that,
 * which no access line is, is written alone). When the descriptor is a non-blocking pipe that is
 * full, the rest is kept and written later, at most `limitBytes` of it; beyond that, lines are
 * dropped and counted in a `log_lines_dropped` line, as `boundedWriter` does.
 */
export function fdWriter(fd: number, limitBytes: number, clock: () => number, write: (fd: number, bytes: Uint8Array, offset: number, length: number) => number = writeSync): (text: string) => void {
  let pending: Buffer | null = null;
  let dropped = 0;
  let retry: NodeJS.Timeout | null = null;

  /** Writes `bytes` from `offset` on; returns the part left unwritten (pipe full), or null. */
  const writeOut = (bytes: Buffer): Buffer | null => {
    let offset = 0;
    while (offset < bytes.length) {
      const lastNewline = bytes.lastIndexOf(0x0a, Math.min(bytes.length, offset + ATOMIC_WRITE_BYTES) - 1);
      const end = lastNewline >= offset ? lastNewline + 1 : (bytes.indexOf(0x0a, offset) + 1 || bytes.length);
      try {
        offset += write(fd, bytes, offset, end - offset);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
        return bytes.subarray(offset);
      }
    }
    return null;
  };
  const drain = () => {
    retry = null;
    if (pending !== null) pending = writeOut(pending);
    if (pending === null && dropped > 0) {
      const note = droppedLinesNote(dropped, clock);
      dropped = 0;
      pending = writeOut(Buffer.from(note));
    }
    if (pending !== null) retry ??= setTimeout(drain, 10).unref();
  };
  return (text) => {
    if (pending !== null && pending.length + text.length > limitBytes) {
      dropped += lineCount(text);
      return;
    }
    const bytes = Buffer.from(text);
    pending = pending === null ? bytes : Buffer.concat([pending, bytes]);
    drain();
  };
}

/** Lines (newlines) in a piece of log text. */
function lineCount(text: string): number {
  let count = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) count++;
  return count;
}

/** The line that says how many log lines a writer had to drop. */
function droppedLinesNote(count: number, clock: () => number): string {
  return `{"time":"${new Date(clock()).toISOString()}","level":"warn","event":"log_lines_dropped","count":${count}}\n`;
}
