/** The X-Request-Id of every answer: the client's own when it is acceptable, else a fresh one. */
export const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's X-Request-Id when it is acceptable, else a fresh one. */
export function requestId(header: string | string[] | undefined, generate: () => string): string {
  return typeof header === 'string' && CLIENT_REQUEST_ID.test(header) ? header : generate();
}
