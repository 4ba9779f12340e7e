/**
 * `npm run bench:chaos -- --runs N --minutes M --seed S [--json]`
 *
 * N concurrent training runs against the Temporal dev server (persistent SQLite) and the
 * GCE emulator (synthetic guests) under worker SIGKILLs, a dev-server restart, API
 * faults, a 200 s GET outage, cancels during in-flight inserts, a reused workflow id,
 * trace-driven preemptions and terminated runs; then the reaper. See bench/README.md.
 */
import { Command } from 'commander';
import { runBenchCli } from '../common/cli';
import { seconds, wholeNumber, ScaleOptionError } from '../scale/options';
import { DEFAULT_TRACE, runChaosBench, type ChaosOptions, type ChaosResult } from './run';

interface ChaosFlags {
  runs: string;
  minutes: string;
  seed: string;
  outage: string;
  train?: string;
  reaperInterval: string;
  reaperGrace: string;
  trace: string;
  traceTick: string;
  faultMix: string;
  teamNamespaces?: string;
  keep?: boolean;
  json?: boolean;
}

export function parseChaosOptions(flags: ChaosFlags): ChaosOptions {
  const minutes = Number(flags.minutes);
  if (!Number.isFinite(minutes) || minutes < 1 || minutes > 24 * 60) throw new ScaleOptionError(`--minutes: expected minutes from 1 to 1440 (the fault window), got "${flags.minutes}"`);
  const options: ChaosOptions = {
    runs: wholeNumber('runs', flags.runs, 10, 10_000),
    minutes,
    seed: wholeNumber('seed', flags.seed, 0, 2 ** 31),
    outageSeconds: seconds('outage', flags.outage),
    trainSeconds: flags.train !== undefined ? seconds('train', flags.train) : undefined,
    reaperIntervalSeconds: seconds('reaper-interval', flags.reaperInterval, 10),
    reaperGraceSeconds: seconds('reaper-grace', flags.reaperGrace),
    trace: flags.trace,
    traceTickSeconds: seconds('trace-tick', flags.traceTick),
    faultMixPct: percent('fault-mix', flags.faultMix),
    teamNamespaces: wholeNumber('team-namespaces', flags.teamNamespaces ?? '0', 0, 16),
    keep: flags.keep ?? false,
    json: flags.json ?? false,
  };
  if (options.outageSeconds >= minutes * 60) throw new ScaleOptionError(`--outage: ${options.outageSeconds} s does not fit in a ${minutes}-minute fault window`);
  return options;
}

function percent(flag: string, text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0 || value > 90) throw new ScaleOptionError(`--${flag}: expected a per cent from 0 to 90, got "${text}"`);
  return value;
}

export function chaosReport(r: ChaosResult): string {
  const rec = Object.entries(r.recovery).map(([k, s]) => `  ${k.padEnd(22)} n=${s.count} p50 ${s.p50S ?? '-'} s, p99 ${s.p99S ?? '-'} s, max ${s.maxS ?? '-'} s`);
  return [
    `bench:chaos  ${r.runs} runs, ${r.minutes} min fault window, seed ${r.seed}, runs train ${r.trainSeconds} s; ${r.teamNamespaces > 0 ? `runs spread over ${r.teamNamespaces} team namespaces, the fleet in sterna-system` : 'one namespace for runs and fleet'}  (${r.machine})`,
    `runs: ${r.completed} completed, ${r.failedNamed} failed with a named reason, ${r.cancelled} cancelled, ${r.terminated} terminated, ${r.failedOther} failed otherwise, ${r.stuck} stuck`,
    `failures: ${JSON.stringify(r.failures)}; reused workflow id's second run: ${r.reusedIdOutcome}`,
    `leaked after the reaper's next pass: ${r.leakedAfterReap}; reaped ${r.reaped}; orphans lived p50 ${r.orphanLifetime.p50S ?? '-'} s, max ${r.orphanLifetime.maxS ?? '-'} s`,
    `duplicate VMs: ${r.duplicateVms}; largest ledger-to-billing gap: ${r.maxLedgerGapPct}%`,
    `someone else's VMs under runs' names: ${r.foreignVms}, touched by Sterna: ${r.foreignTouched}`,
    `faults: ${JSON.stringify({ ...r.faults, apiFaultRules: undefined })}`,
    'recovery:',
    ...rec,
    `wall ${r.wallSeconds} s`,
  ].join('\n');
}

const program = new Command('bench:chaos')
  .description('N concurrent runs under faults; then the reaper. Reports stuck runs, leaks, duplicates, ledger gaps, recovery times')
  .requiredOption('--runs <n>', 'concurrent training runs (at least 10)')
  .option('--minutes <m>', 'the fault window; runs train in it and the benchmark gives up at twice it', '10')
  .option('--seed <n>', 'seed of every random choice', '1')
  .option('--outage <d>', 'length of the all-GET outage', '200s')
  .option('--train <d>', 'training time of each run (default: 40% of the window)')
  .option('--reaper-interval <d>', "the reaper Schedule's interval", '60s')
  .option('--reaper-grace <d>', "the reaper's grace period", '60s')
  .option('--trace <file>', 'spot availability trace whose zone outages preempt VMs', DEFAULT_TRACE)
  .option('--trace-tick <d>', 'real time per trace tick', '5s')
  .option('--fault-mix <percent>', 'per cent of GCE calls answered 503, 429 or hung (a light mix: 6; a heavy one: 25)', '6')
  .option('--team-namespaces <n>', 'spread the runs over n team namespaces, the fleet in a system namespace (0: one namespace for all)', '0')
  .option('--keep', 'keep the work directory (logs, SQLite, emulator state)')
  .option('--json', 'print the result as one JSON object on the last line');

async function main(): Promise<void> {
  const options = parseChaosOptions(program.parse().opts<ChaosFlags>());
  const result = await runChaosBench(options, (line) => console.error(`bench:chaos ${line}`));
  console.log(chaosReport(result));
  if (options.json) console.log(JSON.stringify(result));
}

if (require.main === module) runBenchCli('bench:chaos', main);
