/** What an operation answers with, the headers every answer has, and the Error body. */
import type { ServerResponse } from 'node:http';

/** Headers on every response (the OpenAPI document describes them from here). */
export const COMMON_HEADERS = {
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'Content-Type': 'application/json; charset=utf-8',
} as const;

export interface Reply {
  status: number;
  /** The serialised JSON body; `''` for none. */
  body: string;
  headers?: Record<string, string>;
  /**
   * A response that stays open (an event stream): once the status and headers are written,
   * without a length, it is handed the response to write to and end. `body` is not sent.
   */
  stream?: (res: ServerResponse) => void;
}

/** The contract's Error body: exactly code, message, status. */
export function errorJson(code: string, message: string, status: number): string {
  return `{"code":"${code}","message":${JSON.stringify(message)},"status":${status}}`;
}
