/**
 * `npm run bench:policy -- --trace <file> [...]`: online placement policies against the
 * omniscient optimum on seeded windows of a spot availability trace.
 */
import { writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { formatReport } from './report';
import { runBench } from './run';
import { loadTrace, resample } from './trace';

function positive(value: string): number {
  const x = Number(value);
  if (!Number.isFinite(x) || x <= 0) throw new InvalidArgumentError('expected a positive number');
  return x;
}

function nonNegative(value: string): number {
  const x = Number(value);
  if (!Number.isFinite(x) || x < 0) throw new InvalidArgumentError('expected a number >= 0');
  return x;
}

function count(value: string): number {
  const x = Number(value);
  if (!Number.isInteger(x) || x < 1) throw new InvalidArgumentError('expected a whole number >= 1');
  return x;
}

const program = new Command('bench:policy')
  .description('Spot placement policies vs the omniscient optimum on trace windows')
  .requiredOption('--trace <file>', 'trace JSON (format: ../shared/traces/README.md)')
  .option('--job-hours <h>', 'work the job needs (C)', positive, 48)
  .option('--deadline-hours <h>', 'deadline after the start (R)', positive, 52)
  .option('--changeover-hours <h>', 'paid delay without progress per start or switch (d)', nonNegative, 0.2)
  .option('--windows <n>', 'number of windows', count, 30)
  .option('--seed <n>', 'seed for window start ticks', (v) => Number.parseInt(v, 10), 1)
  .option('--grid-seconds <s>', 'resample to this tick length (default: the trace gap)', positive)
  .option('--instance-type <name>', 'instance group in traces with several (default: the first)')
  .option('--hindsight', 'also report the two-threshold policy with thresholds chosen per window in hindsight')
  .option('--out <file>', 'write the full results as JSON');

function main(): void {
  const o = program.parse().opts<{ trace: string; jobHours: number; deadlineHours: number; changeoverHours: number; windows: number; seed: number; gridSeconds?: number; instanceType?: string; hindsight?: boolean; out?: string }>();
  const started = performance.now();
  const loaded = loadTrace(o.trace, o.instanceType);
  const trace = resample(loaded, o.gridSeconds ?? loaded.gapSeconds);
  const result = runBench(trace, o);
  console.log(formatReport(result, (performance.now() - started) / 1000));
  if (o.out !== undefined) writeFileSync(o.out, `${JSON.stringify(result)}\n`);
}

try {
  main();
} catch (err) {
  console.error(`bench:policy: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 2;
}
