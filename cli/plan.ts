/**
 * `sterna plan spec.json [--json]`: before anything is created, each way the run could be
 * placed, with predicted cost, finish time and deadline risk; `*` marks what the run
 * would try first.
 */
import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { planTrainingRun, type PlanResult, type PlanRow } from '../client/plan';
import type { RunSpecInput } from '../workflows/api';

function hours(h: number): string {
  if (!Number.isFinite(h)) return 'never';
  if (h < 1 / 60) return `${Math.round(h * 3600)} s`;
  return h < 1 ? `${Math.round(h * 60)} min` : `${h.toFixed(1)} h`;
}

function risk(row: PlanRow): string {
  return row.missRisk === undefined ? '-' : `${(row.missRisk * 100).toFixed(row.missRisk > 0 && row.missRisk < 0.01 ? 2 : 0)}%`;
}

function usd(value: number): string {
  return Number.isFinite(value) ? `$${value.toFixed(value < 1 ? 4 : 2)}` : '-';
}

function speed(row: PlanRow): string {
  return row.throughputSource === 'measured' && row.stepsPerSecond !== undefined ? `measured ${row.stepsPerSecond.toPrecision(3)} steps/s` : row.throughputSource;
}

/** The line that says what the work was taken from. */
export function workLine(plan: PlanResult): string | undefined {
  const w = plan.work;
  if (!w) return undefined;
  const on = `${w.accelerator} x${w.acceleratorCount}`;
  if (w.basis === 'measured-steps') {
    return `work: ${w.totalSteps} steps at ${w.stepsPerGpuSecond!.toPrecision(3)} steps/s per GPU, measured on ${on} by earlier runs of this spec (${Math.round(w.measuredSeconds ?? 0)} s of training)`;
  }
  return `work: time.expectedDuration ${hours(w.hours)} on ${on}; other accelerators scaled by ${plan.rows.some((r) => r.throughputSource === 'spec') ? 'time.relativeThroughput' : 'datasheet throughput'}`;
}

/**
 * When the run's first choice costs more for the work than another offer of the same
 * provisioning model: placement ranks offers by price per hour, the plan by what the work costs.
 */
export function dearerPickLine(plan: PlanResult): string | undefined {
  const pick = plan.rows.find((r) => r.pick);
  if (!pick) return undefined;
  const cheapest = plan.rows.filter((r) => r.provisioningModel === pick.provisioningModel).reduce((best, r) => (r.expectedCostUsd < best.expectedCostUsd ? r : best), pick);
  if (cheapest === pick || !(cheapest.expectedCostUsd < pick.expectedCostUsd)) return undefined;
  const more = ((pick.expectedCostUsd / cheapest.expectedCostUsd - 1) * 100).toFixed(0);
  return `the run would try ${pick.accelerator} x${pick.acceleratorCount} in ${pick.zone} first (placement ranks offers by price per hour): expected ${usd(pick.expectedCostUsd)} for the work, ${more}% more than ${cheapest.accelerator} x${cheapest.acceleratorCount} in ${cheapest.zone} at ${usd(cheapest.expectedCostUsd)}`;
}

export function planLines(plan: PlanResult, limit = Infinity): string[] {
  const header = ['', 'accelerator', 'zone', 'model', '$/h', 'hours', 'work $', 'cost', 'finish', 'miss risk', 'preempt/h', 'each costs', 'speed'];
  // The pick is always shown, however far down the list it is.
  const shown = plan.rows.filter((r, i) => i < limit || r.pick);
  const table = shown.map((r) => [
    r.pick ? '*' : '',
    `${r.accelerator} x${r.acceleratorCount}${r.slice ? ` (${r.slice})` : ''}${r.nodes > 1 ? ` x ${r.nodes} nodes` : ''}`,
    r.zone,
    r.provisioningModel === 'SPOT' ? 'spot' : 'on-demand',
    r.pricePerHour.toFixed(3),
    hours(r.expectedHours),
    usd(r.workCostUsd),
    usd(r.expectedCostUsd),
    r.finishAt?.replace(/:\d\d\.\d+Z$/, 'Z') ?? 'never',
    risk(r),
    r.preemptionSource === 'none' ? '-' : `${r.preemptionsPerHour.toFixed(3)}${r.preemptionSource === 'prior' ? ' (prior)' : ''}`,
    r.preemptionSource === 'none' ? '-' : `${Math.round(r.lossSeconds)} s${r.lossSource === 'prior' ? ' (prior)' : ''}`,
    speed(r),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  const lines = [`plan at ${plan.at}${plan.deadline ? `, deadline ${plan.deadline}` : ''}; prices: ${plan.prices.source} as of ${plan.prices.asOf}`, line(header), ...table.map(line)];
  if (shown.length < plan.rows.length) lines.push(`… ${plan.rows.length - shown.length} more (--all shows every row)`);
  if (plan.rows.length === 0) lines.push('no predictable offer: the spec needs time.expectedDuration (or monitoring.totalSteps and earlier runs of the same name), and an accelerator with a throughput figure');
  const work = workLine(plan);
  if (work) lines.push(work);
  const dearer = dearerPickLine(plan);
  if (dearer) lines.push(dearer);
  if (plan.unpredictable.length > 0) lines.push(`not predicted (no throughput figure; give time.relativeThroughput): ${plan.unpredictable.join(', ')}`);
  if (plan.unpriced.length > 0) lines.push(`offered but not priced: ${plan.unpriced.map((u) => `${u.accelerator} in ${u.zone}`).join(', ')}`);
  if (plan.noPick) lines.push(plan.noPick);
  return lines;
}

export function addPlanCommand(program: Command, connect: () => Promise<Client>, readSpec: (path: string) => RunSpecInput): void {
  program
    .command('plan')
    .description('predict cost, finish time and deadline risk of each placement, before anything is created')
    .argument('<spec>', 'path of a JSON run spec')
    .option('--task-queue <queue>', 'task queue of the Sterna workers', 'sterna')
    .option('--json', 'print the plan as JSON (every row)')
    .option('--all', 'print every row, not the cheapest 15')
    .action(async (path: string, opts: { taskQueue: string; json?: boolean; all?: boolean }) => {
      const plan = await planTrainingRun(await connect(), readSpec(path), { taskQueue: opts.taskQueue });
      if (opts.json) return console.log(JSON.stringify(plan, null, 2));
      for (const line of planLines(plan, opts.all ? Infinity : 15)) console.log(line);
    });
}
