/**
 * The id of a stored row (a pet, an order, an event, a webhook) as the number the API sends.
 *
 * The database counts every id from 1, so ids stay far below 2^53, where a JSON number is exact
 * in any client. A row put beyond it by hand is refused when read, never rounded onto a
 * neighbour's id: node:sqlite already refuses to read such an integer as a number (a RangeError),
 * and PostgreSQL's ids come as text (or as numbers in a page's JSON), which this checks.
 */
export function rowId(value: number | string | bigint): number {
  const id = Number(value);
  if (!Number.isSafeInteger(id)) throw new RangeError('a stored id beyond 2^53 cannot be sent exactly as a JSON number');
  return id;
}
