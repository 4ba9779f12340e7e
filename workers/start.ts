/**
 * `npm run worker`: starts the worker (main.ts) in a Node process tuned as
 * process-tuning.ts says, on a supported Node.js (processes/node-runtime.ts), and hands it
 * the stop signals a supervisor sends this process, so stopping either stops the worker
 * gracefully. Exits as the worker does.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { join } from 'node:path';
import { supportedNodeBinary } from '../processes/node-runtime';
import { workerProcess } from './process-tuning';

function start(): void {
  const { nodeFlags, env } = workerProcess(process.env);
  // Started by hand or by a supervisor with an older node (not through npm, whose scripts
  // find the supported one first on PATH), the worker still runs on a supported one.
  const node = supportedNodeBinary((line) => console.error(line));
  // Its own process group, so each stop signal reaches it once, through here: the SDK
  // begins a graceful shutdown at the first and, as when run directly, a second one ends it.
  const worker = spawn(node, [...nodeFlags, join(__dirname, 'main.js')], { env, stdio: 'inherit', detached: true });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => worker.kill(signal));
  worker.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 + constants.signals[signal] : 1)));
}

try {
  start();
} catch (err) {
  console.error(`sterna worker: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 2;
}
