// Experiment: a worker thread's access log through process.stdout against straight to fd 1 (docs/deployment.md, Logs).
/**
 * `node_modules/.bin/node bench/experiments/worker-log.ts stdout|fd | cat > /dev/null`:
 * what a worker thread's access log costs written through its own `process.stdout` (every write
 * is posted to the main thread, which writes it) or straight to fd 1 with `fdWriter`. A worker
 * writes 200,000 access lines, 50 per event-loop turn; the figures are printed on stderr at exit:
 * the worker's own time in its writes, when everything was written, how busy the main thread was
 * (with WORKERS the main thread is the limiter of every worker), and the process's CPU time.
 */
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { fdWriter } from '../../src/http/access-log.ts';

const LINE = '{"time":"2026-11-23T03:29:39.490Z","level":"info","requestId":"0a4a5dda-08b3-4b7f-b530-1ec270bd4102","method":"GET","path":"/v1/pets","status":200,"durationMs":0.604,"keyId":"key_9b399e3dc12dc3e1"}\n';
const PER_TURN = 50;
const TURNS = 4000;

if (isMainThread) {
  const mode = process.argv[2];
  if (mode !== 'stdout' && mode !== 'fd') {
    process.stderr.write('Usage: node bench/experiments/worker-log.ts stdout|fd | cat > /dev/null\n');
    process.exit(2);
  }
  const cpu = process.cpuUsage();
  const started = performance.now();
  const loop = performance.eventLoopUtilization();
  let workerMs = 0;
  new Worker(new URL(import.meta.url), { workerData: mode }).on('message', (ms: number) => (workerMs = ms));
  process.on('exit', () => {
    const used = process.cpuUsage(cpu);
    process.stderr.write(
      `${mode}: ${PER_TURN * TURNS} lines; the worker's writes took ${workerMs.toFixed(0)} ms; all written after ${(performance.now() - started).toFixed(0)} ms; ` +
        `main thread busy ${performance.eventLoopUtilization(loop).active.toFixed(0)} ms; process CPU ${((used.user + used.system) / 1000).toFixed(0)} ms\n`,
    );
  });
} else {
  const write = workerData === 'fd' ? fdWriter(1, 1 << 20, Date.now) : (text: string) => void process.stdout.write(text);
  const batch = LINE.repeat(PER_TURN);
  let spent = 0;
  let turn = 0;
  const step = () => {
    const started = performance.now();
    write(batch);
    spent += performance.now() - started;
    if (++turn < TURNS) setImmediate(step);
    else parentPort!.postMessage(spent);
  };
  step();
}
