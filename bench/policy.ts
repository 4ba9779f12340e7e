/**
 * `npm run bench:policy -- --trace <file> [...]`: online placement policies against the
 * omniscient optimum on seeded windows of a spot availability trace.
 */
import { writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_FLEX } from './flex';
import { formatReport } from './report';
import { DEFAULT_FLEET_FRACTION, DEFAULT_MEMORY_HOURS, Memory, runBench } from './run';
import { View } from './simulate';
import { loadTrace, resample, scaleOnDemand } from './trace';

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

function share(value: string): number {
  const x = Number(value);
  if (!Number.isFinite(x) || x <= 0 || x > 1) throw new InvalidArgumentError('expected a number > 0 and <= 1');
  return x;
}

function fraction(value: string): number {
  const x = Number(value);
  if (!Number.isFinite(x) || x < 0 || x > 1) throw new InvalidArgumentError('expected a number from 0 to 1');
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
  .option('--nodes <n>', 'a gang of n nodes: a zone has capacity only when availableNodes >= n there (traces that count nodes), at n x the price', count, 1)
  .addOption(new Option('--view <view>', 'what the online policies see: every zone each tick, what a live run learns, or that plus the fleet observer').choices(Object.values(View)).default(View.Live))
  .addOption(new Option('--memory <memory>', 'zone statistics from before the window (warm) or none (cold)').choices(Object.values(Memory)).default(Memory.Cold))
  .option('--memory-hours <h>', 'warm memory: hours of trace before the window', positive, DEFAULT_MEMORY_HOURS)
  .option('--probe-fraction <f>', 'share of a tick a failed launch from idle costs (live and fleet views)', share, 1)
  .option('--fleet-fraction <f>', 'fleet view: chance another run sees a given zone at a given tick', fraction, DEFAULT_FLEET_FRACTION)
  .option('--reverse-zones', 'list the zones in reverse order (where prices tie, the policies\' tie-breaks follow the order)')
  .option('--on-demand-price-factor <f>', 'multiply every on-demand price (a stress test of the price ratio)', positive, 1)
  .option('--hindsight', 'also report the two-threshold policy with thresholds chosen per window in hindsight')
  .option('--flex', 'offer the flex-start (DWS) tier: the optimum and sterna with and without it')
  .option('--flex-wait-hours <h>', 'flex-start: mean wait for capacity (each zone within x2 of it)', positive, DEFAULT_FLEX.meanWaitHours)
  .option('--flex-max-wait-hours <h>', 'flex-start: a request\'s wait window', positive, DEFAULT_FLEX.maxWaitHours)
  .option('--out <file>', 'write the full results as JSON');

function main(): void {
  const o = program.parse().opts<{ trace: string; jobHours: number; deadlineHours: number; changeoverHours: number; windows: number; seed: number; gridSeconds?: number; instanceType?: string; nodes: number; view: View; memory: Memory; memoryHours: number; probeFraction: number; fleetFraction: number; onDemandPriceFactor: number; reverseZones?: boolean; hindsight?: boolean; flex?: boolean; flexWaitHours: number; flexMaxWaitHours: number; out?: string }>();
  // The workflow refuses flex-start for GCE gangs (workflows/spec.ts): the bench does not offer what no gang can use.
  if (o.flex === true && o.nodes > 1) throw new Error('--flex with --nodes above 1: flex-start is not offered to gangs (a GCE gang cannot use it); drop one of them');
  const started = performance.now();
  const loaded = loadTrace(o.trace, o.instanceType, o.nodes);
  const ordered = o.reverseZones === true ? { ...loaded, zones: [...loaded.zones].reverse() } : loaded;
  const trace = scaleOnDemand(resample(ordered, o.gridSeconds ?? ordered.gapSeconds), o.onDemandPriceFactor);
  const flex = o.flex === true ? { meanWaitHours: o.flexWaitHours, maxWaitHours: o.flexMaxWaitHours } : undefined;
  const result = runBench(trace, { ...o, flex }, { view: o.view, memory: o.memory });
  console.log(formatReport(result, (performance.now() - started) / 1000));
  if (o.out !== undefined) writeFileSync(o.out, `${JSON.stringify(result)}\n`);
}

try {
  main();
} catch (err) {
  console.error(`bench:policy: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 2;
}
