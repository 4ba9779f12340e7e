/**
 * `sterna team set|show`: a team's budget per period, its GPU quota, and what it has
 * spent, runs and queues now. Changes apply to the team's queued runs at once. A team is
 * named by its namespace (docs/tenancy.md): its runs are those that execute there.
 *
 *   sterna team set team-a --budget 500 --period week --max-gpus 8
 *   sterna team set team-a --budget none          # remove the budget
 *   sterna team show team-a [--json]
 */
import type { Client } from '@temporalio/client';
import { InvalidArgumentError, type Command } from 'commander';
import { getTeam, setTeamLimits, type LimitsChange, type TeamView } from '../client/teams';
import { PERIODS, type Period } from '../workflows/api';

/** Commander stores a parser's null as '': "none" is kept as itself and becomes null in the change. */
const NONE = 'none';

function budgetOption(value: string): number | typeof NONE {
  if (value === NONE) return NONE;
  const usd = /^\s*$/.test(value) ? NaN : Number(value);
  if (!(Number.isFinite(usd) && usd > 0)) throw new InvalidArgumentError(`a number of USD above 0, e.g. 500, or "none" to remove the budget; got ${JSON.stringify(value)}`);
  return usd;
}

function gpusOption(value: string): number | typeof NONE {
  if (value === NONE) return NONE;
  const gpus = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(gpus)) throw new InvalidArgumentError(`a whole number of GPUs, e.g. 8, or "none" to remove the quota; got ${JSON.stringify(value)}`);
  return gpus;
}

function periodOption(value: string): Period {
  if (!(PERIODS as readonly string[]).includes(value)) throw new InvalidArgumentError(`one of ${PERIODS.join(', ')}; got ${JSON.stringify(value)}`);
  return value as Period;
}

const dollars = (usd: number) => `$${usd.toFixed(2)}`;

export function teamLines(view: TeamView): string[] {
  const { budget, maxGpus } = view.limits;
  return [
    `team ${view.team}`,
    `  budget:  ${budget ? `${dollars(budget.usd)} per ${budget.period}` : 'none'}; spent ${dollars(view.spentUsd)} this ${view.period.kind} (from ${view.period.start}), committed ${dollars(view.committedUsd)}`,
    `  GPUs:    ${view.runningGpus} running${maxGpus !== undefined ? ` of at most ${maxGpus}` : ' (no quota)'}`,
    ...view.running.map((r) => `  running  ${r.runId}  ${r.gpus} GPU  priority ${r.priority}  spent ${dollars(r.spentUsd)}`),
    ...view.queue.map((q) => `  queued   #${q.position} ${q.runId}  ${q.gpus} GPU  priority ${q.priority}  since ${q.askedAt}`),
    ...view.history.map((h) => `  ${h.period} from ${h.start}: spent ${dollars(h.spentUsd)}`),
  ];
}

export function addTeamCommands(program: Command, connect: () => Promise<Client>, timeoutMs: () => number): void {
  const team = program.command('team').description('team budgets, GPU quotas and queues (a team is named by its namespace; with a namespace per team, act in the system namespace as an admin)');
  team
    .command('set')
    .description('set a team\'s budget per period and its GPU quota (applies to queued runs at once)')
    .argument('<team>', 'the team: the namespace its runs execute in (on the dev server, "default")')
    .option('--budget <usd>', 'USD per period, or "none"', budgetOption)
    .option('--period <period>', `the budget's period: ${PERIODS.join(', ')} (month when first set without one)`, periodOption)
    .option('--max-gpus <n>', 'GPUs the team\'s runs may hold at once, or "none"', gpusOption)
    .option('--task-queue <queue>', 'task queue of the Sterna workers', 'sterna')
    .option('--json', 'print the team as JSON')
    .action(async (name: string, opts: { budget?: number | typeof NONE; period?: Period; maxGpus?: number | typeof NONE; taskQueue: string; json?: boolean }) => {
      const change: LimitsChange = {
        ...(opts.budget !== undefined ? { budgetUsd: opts.budget === NONE ? null : opts.budget } : {}),
        ...(opts.period !== undefined ? { period: opts.period } : {}),
        ...(opts.maxGpus !== undefined ? { maxGpus: opts.maxGpus === NONE ? null : opts.maxGpus } : {}),
      };
      const view = await setTeamLimits(await connect(), name, change, { taskQueue: opts.taskQueue, timeoutMs: timeoutMs() });
      if (opts.json) return console.log(JSON.stringify(view, null, 2));
      for (const line of teamLines(view)) console.log(line);
    });
  team
    .command('show')
    .description('a team\'s limits, its spend this period, its running runs and its queue')
    .argument('<team>', 'the team: the namespace its runs execute in')
    .option('--task-queue <queue>', 'task queue of the Sterna workers', 'sterna')
    .option('--json', 'print the team as JSON')
    .action(async (name: string, opts: { taskQueue: string; json?: boolean }) => {
      const view = await getTeam(await connect(), name, { taskQueue: opts.taskQueue, timeoutMs: timeoutMs() });
      if (opts.json) return console.log(JSON.stringify(view, null, 2));
      for (const line of teamLines(view)) console.log(line);
    });
}
