/**
 * `npm run worker`: starts the worker (main.ts) in a Node process tuned as
 * process-tuning.ts says, and hands it the stop signals a supervisor sends this process,
 * so stopping either stops the worker gracefully. Exits as the worker does.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { join } from 'node:path';
import { workerProcess } from './process-tuning';

function start(): void {
  const { nodeFlags, env } = workerProcess(process.env);
  const worker = spawn(process.execPath, [...nodeFlags, join(__dirname, 'main.js')], { env, stdio: 'inherit' });
  // A terminal's Ctrl-C reaches both processes; a signal sent to this one alone is passed on, once.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    let passed = false;
    process.on(signal, () => {
      if (!passed) worker.kill(signal);
      passed = true;
    });
  }
  worker.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 + constants.signals[signal] : 1)));
}

try {
  start();
} catch (err) {
  console.error(`sterna worker: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 2;
}
