/**
 * `sterna cost`: spend, GPU-hours, preemptions, savings against on-demand and runs per
 * namespace, team, project, accelerator or zone, over a window of run start times, in the
 * profile's namespace or the ones --namespace names (with a namespace per team, each is a
 * team's: an admin's report across teams).
 *
 *   sterna cost --by team --since 7d
 *   sterna cost --namespace team-a,team-b --by namespace --since 30d
 *   sterna cost --by zone --since 2026-12-01T00:00:00Z --until 2026-12-08T00:00:00Z --csv
 */
import type { Client } from '@temporalio/client';
import { InvalidArgumentError, type Command } from 'commander';
import { costCsv, costReport, GroupBy, type CostReport } from '../client/cost-report';
import { runCosts } from '../client/cost';
import { inNamespace } from '../client/connect';
import { isDurationString, parseDurationSeconds } from '../workflows/api';
import { ExitCode } from './report';

/** An ISO 8601 time, or a duration ago ("7d", "12h"). */
export function timeArgument(value: string, nowMs = Date.now()): Date {
  if (isDurationString(value)) return new Date(nowMs - parseDurationSeconds(value) * 1000);
  const ms = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(ms)) throw new InvalidArgumentError(`expected an ISO 8601 time such as 2026-12-01T00:00:00Z, or a duration ago such as 7d or 12h; got ${JSON.stringify(value)}`);
  return new Date(ms);
}

function groupArgument(value: string): GroupBy {
  const groups = Object.values(GroupBy) as string[];
  if (!groups.includes(value)) throw new InvalidArgumentError(`one of ${groups.join(', ')}; got ${JSON.stringify(value)}`);
  return value as GroupBy;
}

/** Each --namespace value, once; "team-a,team-b" counts as two. */
function namespacesArgument(value: string, previous: string[] = []): string[] {
  const names = value.split(',').map((n) => n.trim()).filter((n) => n !== '');
  if (names.length === 0) throw new InvalidArgumentError('name a Temporal namespace, e.g. team-a');
  return [...new Set([...previous, ...names])];
}

const dollars = (usd: number) => `$${usd.toFixed(2)}`;

export function costTable(report: CostReport): string[] {
  const header = [report.by, 'runs', 'spend', 'on-demand', 'saved', 'GPU-hours', 'preemptions'];
  const rows = [...report.groups, report.total].map((r) => [r.group, String(r.runs), dollars(r.costUsd), dollars(r.onDemandCostUsd), `${dollars(r.savingsUsd)} (${Math.round(r.savingsRatio * 100)}%)`, r.gpuHours.toFixed(2), String(r.preemptions)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), ...rows.map(line)];
}

export function addCostCommand(program: Command, connect: () => Promise<Client>): void {
  program
    .command('cost')
    .description('spend, GPU-hours, preemptions and savings per team, project, accelerator or zone')
    .option('--by <group>', 'namespace, team, project, accelerator or zone', groupArgument, GroupBy.Team)
    .option('--namespace <namespace...>', 'the namespaces to report on, each a team\'s (default: the profile\'s, TEMPORAL_NAMESPACE); these credentials must be allowed to read each', namespacesArgument)
    .option('--since <time>', 'runs started at or after: an ISO time, or a duration ago (7d)', (v) => timeArgument(v))
    .option('--until <time>', 'runs started before: an ISO time, or a duration ago', (v) => timeArgument(v))
    .option('--query <visibilityQuery>', 'narrow the runs further, e.g. \'TaskQueue = "sterna"\'')
    .option('--json', 'print the report as JSON: { by, groups: [...], total }')
    .option('--csv', 'print the report as CSV, one row per group and a total row')
    .action(async (opts: { by: GroupBy; namespace?: string[]; since?: Date; until?: Date; query?: string; json?: boolean; csv?: boolean }) => {
      if (opts.json && opts.csv) {
        console.error('sterna cost: give --json or --csv, not both');
        process.exitCode = ExitCode.BadInput;
        return;
      }
      const client = await connect();
      const window = { since: opts.since, until: opts.until, query: opts.query };
      const runs = [];
      for (const namespace of opts.namespace ?? [client.options.namespace]) runs.push(...(await runCosts(inNamespace(client, namespace), window)));
      const report = costReport(runs, opts.by);
      if (opts.json) return console.log(JSON.stringify(report, null, 2));
      if (opts.csv) {
        process.stdout.write(costCsv(report));
        return;
      }
      for (const line of costTable(report)) console.log(line);
    });
}
