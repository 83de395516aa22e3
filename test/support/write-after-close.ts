/**
 * Run as a child process by test/storage/postgres/driver.test.ts, with a database URL: makes the
 * PostgreSQL driver write to a connection that PostgreSQL has closed, as a transaction's next
 * statement does after its session was ended, and prints the exception that then reaches no
 * caller (one JSON line: its name and stack), or `{"hung":n}` when the driver did not throw in n
 * tries. Each try reserves a connection (as a transaction does), has PostgreSQL end its session,
 * waits until the driver has seen the connection close (its `onclose`), then sends one more
 * statement: the driver queues it for its next turn and writes it to the socket it no longer has.
 *
 * Waiting for the close is what makes this exact. Sent before the close is seen, the statement
 * may be queued in the same turn as the close, whose handler cancels the queued write without
 * forgetting it, so that neither it nor any later statement is ever written (it hangs): the
 * earlier version of this helper raced so, and once lost all of its 20 tries in a full test run.
 */
import { loadDriver } from '../../src/storage/postgres/driver.ts';

const TRIES = 5;
const url = process.argv[2]!;
process.on('uncaughtException', (error: Error) => {
  process.stdout.write(`${JSON.stringify({ name: error.name, stack: error.stack })}\n`);
  process.exit(0);
});
const postgres = await loadDriver();
let onClosed = () => {};
// A connection of its own for each try: the one ended stays reserved.
const sql = postgres(url, { max: TRIES, onnotice: () => {}, onclose: () => onClosed() });
const admin = postgres(url, { max: 1, onnotice: () => {} });
for (let i = 0; i < TRIES; i++) {
  const reserved = await sql.reserve();
  const [row] = await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  const closed = new Promise<void>((resolve) => (onClosed = resolve));
  await admin`SELECT pg_terminate_backend(${row!.pid})`;
  await closed;
  await Promise.race([reserved`SELECT 1`.catch(() => {}), new Promise((resolve) => setTimeout(resolve, 500))]);
}
process.stdout.write(`${JSON.stringify({ hung: TRIES })}\n`);
process.exit(0);
