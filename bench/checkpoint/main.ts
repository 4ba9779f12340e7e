/**
 * `npm run bench:checkpoint -- --trace <file> [--trace <file>...]`: lost work + checkpoint
 * overhead per GPU-hour of the checkpoint interval policy against fixed 5, 10 and 30
 * minute intervals, for several checkpoint costs (bench/checkpoint/sim.ts has the model).
 * Prints a Markdown table (bench/README.md keeps one), or JSON with --json.
 */
import { basename } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { RULES, simulate, zoneRates, type RuleResult } from './sim';
import { loadTrace } from '../common/trace';

function costs(value: string): number[] {
  const list = value.split(',').map(Number);
  if (list.some((x) => !Number.isFinite(x) || x <= 0)) throw new InvalidArgumentError('expected positive seconds, comma-separated, e.g. 10,60,300');
  return list;
}

const program = new Command('bench:checkpoint')
  .description('Checkpoint interval policy vs fixed intervals on spot traces')
  .requiredOption('--trace <file...>', 'trace JSON files (format: ../shared/traces/README.md)')
  .option('--checkpoint-seconds <list>', 'checkpoint costs to try (seconds the job pauses per checkpoint)', costs, [10, 60, 300])
  .option('--instance-type <name>', 'instance group in traces with several (default: the first)')
  .option('--json', 'print the results as JSON');

interface TraceResult {
  trace: string;
  group: string;
  zones: number;
  meanPreemptionsPerHour: number;
  results: RuleResult[];
}

function main(): void {
  const o = program.parse().opts<{ trace: string[]; checkpointSeconds: number[]; instanceType?: string; json?: boolean }>();
  const all: TraceResult[] = o.trace.map((file) => {
    const trace = loadTrace(file, o.instanceType);
    const rates = zoneRates(trace);
    return {
      trace: basename(file, '.json'),
      group: trace.group,
      zones: trace.zones.length,
      meanPreemptionsPerHour: rates.reduce((s, r) => s + r.preemptionsPerHour, 0) / rates.length,
      results: o.checkpointSeconds.flatMap((cost) => RULES.map((rule) => simulate(trace, rule, cost))),
    };
  });
  if (o.json) {
    console.log(JSON.stringify(all, null, 2));
    return;
  }
  for (const t of all) {
    console.log(`\n${t.trace} — ${t.group}, ${t.zones} zones, mean ${t.meanPreemptionsPerHour.toFixed(2)} preemptions per hour of uptime`);
    console.log('\nminutes lost + checkpointing per GPU-hour (mean interval used)\n');
    console.log(`| rule | ${o.checkpointSeconds.map((c) => `C = ${c} s`).join(' | ')} |`);
    console.log(`|---|${o.checkpointSeconds.map(() => '---:').join('|')}|`);
    for (const rule of RULES) {
      const cells = o.checkpointSeconds.map((cost) => {
        const r = t.results.find((x) => x.rule === rule.name && x.checkpointSeconds === cost)!;
        return `${r.wasteMinutesPerGpuHour.toFixed(2)} (${Math.round(r.meanIntervalSeconds / 60)} min)`;
      });
      console.log(`| ${rule.name} | ${cells.join(' | ')} |`);
    }
  }
}

main();
