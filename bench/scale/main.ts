/**
 * `npm run bench:scale -- --runs N [--duration 10m] [--preemption-rate 2] [--seed 1] [--observer auto|on|off] [--json]`
 *
 * N concurrent training runs on ONE worker process (default tuning) against the Temporal
 * dev server and the GCE emulator with synthetic guests; reports worker memory and CPU,
 * cloud API calls per run per minute and 403s, history size, activity-slot waits and
 * preemption -> replacement insert latency. See bench/README.md.
 */
import { Command } from 'commander';
import { runBenchCli } from '../common/cli';
import { parseScaleOptions, type ScaleFlags } from './options';
import { formatScaleReport, scaleJson } from './report';
import { runScaleBench } from './run';

const program = new Command('bench:scale')
  .description('N concurrent training runs on one worker: memory, CPU, cloud API calls, history size, slot waits, preemption recovery latency')
  .requiredOption('--runs <n>', 'concurrent training runs')
  .option('--duration <d>', 'training time each run needs (90s, 10m, 1h)', '10m')
  .option('--preemption-rate <r>', 'preemptions per training spot VM per hour, injected at random', '2')
  .option('--seed <n>', 'seed of the injected preemptions', '1')
  .option('--ramp <d>', 'start the runs evenly over this long (default: 10 a second, 5s to 2m)')
  .option('--time-cap <d>', 'cancel what still runs after this long (default: 3 x duration + ramp + 5m)')
  .option('--poll-seconds <s>', "every run's recovery.pollSeconds (default: the spec default)")
  .option('--checkpoint-every <steps>', 'synthetic guests checkpoint every this many 1-second steps', '60')
  .option('--observer <choice>', 'auto (the fleet observer when this build has it), on, or off (per-run looks)', 'auto')
  .option('--observer-interval <s>', "the fleet observer's interval (STERNA_OBSERVER_INTERVAL_SECONDS)")
  .option('--worker-heap-mb <mb>', "not default tuning: the worker's V8 heap limit, STERNA_WORKER_HEAP_MB (its workflow cache is sized from it)")
  .option('--worker-cache <n>', 'not default tuning: workflows the worker keeps cached (STERNA_MAX_CACHED_WORKFLOWS)')
  .option('--history-sample <n>', 'read the histories of at most n runs (default: all)')
  .option('--team-namespaces <n>', 'spread the runs over n team namespaces, the fleet in a system namespace (0: one namespace for all)', '0')
  .option('--cpu-profile <dir>', "write the worker's CPU profiles there (node --cpu-prof, a file per thread) and report its CPU by package and function")
  .option('--keep', 'keep the work directory (logs, emulator state)')
  .option('--json', 'print the result as one JSON object on the last line');

async function main(): Promise<void> {
  const options = parseScaleOptions(program.parse().opts<ScaleFlags>());
  // Progress goes to stderr, so stdout holds only the report (and the JSON line last).
  const result = await runScaleBench(options, (line) => console.error(`bench:scale ${line}`));
  console.log(formatScaleReport(result));
  if (options.json) console.log(scaleJson(result));
}

runBenchCli('bench:scale', main);
