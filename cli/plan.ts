/**
 * `sterna plan spec.json [--json]`: before anything is created, each way the run could be
 * placed, with predicted cost, finish time and deadline risk; `*` marks what the run
 * would try first.
 */
import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { planTrainingRun, type PlanResult, type PlanRow } from '../client/plan';
import type { RunSpecInput } from '../workflows/spec';

function hours(h: number): string {
  if (!Number.isFinite(h)) return 'never';
  return h < 1 ? `${Math.round(h * 60)} min` : `${h.toFixed(1)} h`;
}

function risk(row: PlanRow): string {
  return row.missRisk === undefined ? '-' : `${(row.missRisk * 100).toFixed(row.missRisk > 0 && row.missRisk < 0.01 ? 2 : 0)}%`;
}

export function planLines(plan: PlanResult, limit = Infinity): string[] {
  const header = ['', 'accelerator', 'zone', 'model', '$/h', 'hours', 'cost', 'finish', 'miss risk', 'preempt/h'];
  // The pick is always shown, however far down the list it is.
  const shown = plan.rows.filter((r, i) => i < limit || r.pick);
  const table = shown.map((r) => [
    r.pick ? '*' : '',
    `${r.accelerator} x${r.acceleratorCount}`,
    r.zone,
    r.provisioningModel === 'SPOT' ? 'spot' : 'on-demand',
    r.pricePerHour.toFixed(3),
    hours(r.expectedHours),
    Number.isFinite(r.expectedCostUsd) ? `$${r.expectedCostUsd.toFixed(r.expectedCostUsd < 1 ? 4 : 2)}` : '-',
    r.finishAt?.replace(/:\d\d\.\d+Z$/, 'Z') ?? 'never',
    risk(r),
    r.preemptionSource === 'none' ? '-' : `${r.preemptionsPerHour.toFixed(3)}${r.preemptionSource === 'prior' ? ' (prior)' : ''}`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  const lines = [`plan at ${plan.at}${plan.deadline ? `, deadline ${plan.deadline}` : ''}; prices: ${plan.prices.source} as of ${plan.prices.asOf}`, line(header), ...table.map(line)];
  if (shown.length < plan.rows.length) lines.push(`… ${plan.rows.length - shown.length} more (--all shows every row)`);
  if (plan.rows.length === 0) lines.push('no predictable offer: the spec needs time.expectedDuration, and an accelerator with a throughput figure');
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
