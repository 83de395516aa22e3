/**
 * Run as a child process by test/storage/postgres/driver.test.ts, with a database URL: makes the
 * PostgreSQL driver write to a connection that PostgreSQL has closed, as a transaction's next
 * statement does after its session was ended, and prints the exception that then reaches no
 * caller (one JSON line: its name and stack), or `{"hung":n}` when the driver did not throw in n
 * tries. Each try reserves a connection (as a transaction does), has PostgreSQL end its session,
 * lets the driver see the reset, then sends one more statement. Whether that statement is written
 * on a later turn (and throws) or never written at all depends on when the reset arrived, so a
 * try that hangs is followed by another.
 */
import { loadDriver } from '../../src/storage/postgres/driver.ts';

const TRIES = 20;
const url = process.argv[2]!;
process.on('uncaughtException', (error: Error) => {
  process.stdout.write(`${JSON.stringify({ name: error.name, stack: error.stack })}\n`);
  process.exit(0);
});
const postgres = await loadDriver();
// A connection of its own for each try: the one ended stays reserved.
const sql = postgres(url, { max: TRIES, onnotice: () => {} });
const admin = postgres(url, { max: 1, onnotice: () => {} });
for (let i = 0; i < TRIES; i++) {
  const reserved = await sql.reserve();
  const [row] = await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  await admin`SELECT pg_terminate_backend(${row!.pid})`;
  await reserved`SELECT 1`.catch(() => {});
  await Promise.race([reserved`SELECT 2`.catch(() => {}), new Promise((resolve) => setTimeout(resolve, 500))]);
}
process.stdout.write(`${JSON.stringify({ hung: TRIES })}\n`);
process.exit(0);
