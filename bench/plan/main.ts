/**
 * `npm run bench:plan -- [--runs 12] [--concurrency 3] [--time-factor 60] [--work 150s]
 *   [--checkpoint 10s] [--staging <d>] [--poll-seconds 1] [--trace <file>] [--start-tick <n>] [--seed 1]
 *   [--out <file.json>] [--keep]`
 *
 * Predictions against outcomes: each run is planned (`planRun`, as `sterna plan`), then
 * run on the emulator replaying a spot trace; prints the predicted and actual cost and
 * finish time of every run and the median and p90 of their relative errors. See
 * bench/README.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Command } from 'commander';
import { runBenchCli } from '../common/cli';
import { quantile, type ErrorSummary, type PlanBenchSummary } from './analysis';
import { DEFAULT_PLAN_TRACE, runPlanBench, type PlanBenchResult } from './run';
import { ScaleOptionError, seconds, wholeNumber } from '../scale/options';

const program = new Command('bench:plan')
  .description("predicted vs actual cost and finish time of runs planned with `sterna plan`'s workflow, then run on the emulator under a spot trace")
  .option('--runs <n>', 'runs in all', '12')
  .option('--concurrency <n>', 'runs per wave (planned and run together; later waves plan with what earlier ones taught)', '3')
  .option('--time-factor <n>', 'the trace (and the synthetic trainer) run this many times faster than real time', '60')
  .option('--work <d>', 'real training time each run needs, uninterrupted', '150s')
  .option('--checkpoint <d>', "real time between the trainer's checkpoints (the spec's pinned interval)", '10s')
  .option('--staging <d>', "real time each attempt stages data before training (default: the emulator's 5 emulated seconds)")
  .option('--poll-seconds <s>', "every run's recovery.pollSeconds", '1')
  .option('--trace <file>', 'spot availability trace (../shared/traces)', DEFAULT_PLAN_TRACE)
  .option('--start-tick <n>', 'trace tick at the start (default: drawn from the seed)')
  .option('--seed <n>', 'seed of the start tick and the emulator', '1')
  .option('--out <file>', 'write the raw result as JSON here')
  .option('--keep', 'keep the work directory (logs, emulator state)');

function pct(x: number): string {
  return Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%` : 'inf';
}

function summaryLine(label: string, s: ErrorSummary): string {
  return `${label.padEnd(28)} runs ${String(s.runs).padStart(3)}  |err| median ${pct(s.medianAbs).padStart(8)}  p90 ${pct(s.p90Abs).padStart(8)}  signed median ${pct(s.medianSigned).padStart(8)}  range ${pct(s.min)} .. ${pct(s.max)}`;
}

function summaryLines(label: string, s: PlanBenchSummary): string[] {
  return [summaryLine(`${label} cost`, s.cost), summaryLine(`${label} finish time`, s.finish)];
}

function formatPlanReport(r: PlanBenchResult): string {
  const o = r.options;
  const lines = [
    `bench:plan — ${r.runs.length} runs, trace ${r.trace.name} (${r.trace.accelerator}) from tick ${o.startTick}, ${o.timeFactor}x; work ${o.workSeconds} s, checkpoint every ${o.checkpointSeconds} s${o.stagingSeconds !== undefined ? `, staging ${o.stagingSeconds} s per attempt` : ''}; waves of ${o.concurrency}`,
    '',
    'run wave  zone            pred s  actual s  pred $    billed $  ledger $  pred preempt  preempt  rate/h (source)  loss s (source)  speed      cost err  finish err',
  ];
  for (const x of r.runs) {
    const p = x.pick;
    lines.push(
      [
        String(x.index).padStart(3),
        String(x.wave).padStart(4),
        (p?.zone ?? '-').padEnd(14),
        (p ? (Number.isFinite(p.finishSeconds) ? p.finishSeconds.toFixed(0) : 'never') : '-').padStart(7),
        x.outcome.seconds.toFixed(0).padStart(8),
        (p ? p.expectedCostUsd.toFixed(4) : '-').padStart(8),
        x.outcome.billedUsd.toFixed(4).padStart(9),
        x.outcome.ledgerUsd.toFixed(4).padStart(9),
        (p ? p.expectedPreemptions.toFixed(2) : '-').padStart(13),
        String(x.outcome.preemptions).padStart(8),
        `${p ? `${p.preemptionsPerHour.toFixed(1)} (${p.preemptionSource})` : '-'}`.padStart(15),
        `${p ? `${p.lossSeconds.toFixed(0)} (${p.lossSource})` : '-'}`.padStart(15),
        (p?.throughputSource ?? '-').padEnd(9),
        (x.error ? pct(x.error.cost) : x.outcome.status).padStart(9),
        (x.error ? pct(x.error.finish) : '').padStart(11),
      ].join('  '),
    );
  }
  lines.push('', ...summaryLines('all', r.overall), ...summaryLines('cold (wave 0)', r.cold), ...summaryLines('warm (waves 1+)', r.warm));
  const gaps = r.runs.flatMap((x) => x.outcome.gapsSeconds);
  const preempted = r.runs.reduce((s, x) => s + x.outcome.preemptions, 0);
  const predicted = r.runs.reduce((s, x) => s + (x.pick?.expectedPreemptions ?? 0), 0);
  lines.push(`preemptions: ${preempted} seen, ${predicted.toFixed(1)} predicted; gaps with no VM between a run's VMs: ${gaps.length}, median ${quantile(gaps, 0.5).toFixed(1)} s, max ${gaps.length ? Math.max(...gaps).toFixed(1) : '-'} s`);
  lines.push('', `wall ${r.wallSeconds.toFixed(0)} s on ${r.machine}, ${r.date}`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const f = program.parse().opts<{ runs: string; concurrency: string; timeFactor: string; work: string; checkpoint: string; pollSeconds: string; staging?: string; trace: string; startTick?: string; seed: string; out?: string; keep?: boolean }>();
  const timeFactor = Number(f.timeFactor);
  if (!Number.isFinite(timeFactor) || timeFactor < 1 || timeFactor > 3600) throw new ScaleOptionError(`--time-factor: expected a number from 1 to 3600, got "${f.timeFactor}"`);
  const pollSeconds = Number(f.pollSeconds);
  if (!Number.isFinite(pollSeconds) || pollSeconds < 0.2 || pollSeconds > 60) throw new ScaleOptionError(`--poll-seconds: the spec allows recovery.pollSeconds from 0.2 to 60, got "${f.pollSeconds}"`);
  const result = await runPlanBench(
    {
      runs: wholeNumber('runs', f.runs, 1, 1000),
      concurrency: wholeNumber('concurrency', f.concurrency, 1, 100),
      timeFactor,
      workSeconds: seconds('work', f.work, 10),
      checkpointSeconds: seconds('checkpoint', f.checkpoint, 1),
      ...(f.staging !== undefined ? { stagingSeconds: seconds('staging', f.staging) } : {}),
      pollSeconds,
      trace: f.trace,
      ...(f.startTick !== undefined ? { startTick: wholeNumber('start-tick', f.startTick, 0) } : {}),
      seed: wholeNumber('seed', f.seed, 0, 2 ** 31),
      keep: f.keep ?? false,
    },
    (line) => console.error(`bench:plan ${line}`),
  );
  console.log(formatPlanReport(result));
  if (f.out) {
    mkdirSync(dirname(f.out), { recursive: true });
    // Infinity (a prediction of "never") is written as null by JSON.
    writeFileSync(f.out, `${JSON.stringify(result, null, 2)}\n`);
    console.error(`bench:plan wrote ${f.out}`);
  }
}

runBenchCli('bench:plan', main);
