/**
 * The cost report, pure: runs' cost records in, one row per group out (namespace, team,
 * project, accelerator or zone) with spend, GPU-hours, preemptions, savings against
 * on-demand and runs per group. Namespace, team and project group whole runs (a run is its
 * namespace and workflow id: two teams may use the same id); accelerator and zone group each
 * run's ledger lines, so a run that moved zones counts in each zone it paid for.
 * Money is reported to the micro-dollar.
 */
import type { CostLine } from '../workflows/api';

export const GroupBy = { Namespace: 'namespace', Team: 'team', Project: 'project', Accelerator: 'accelerator', Zone: 'zone' } as const;
export type GroupBy = (typeof GroupBy)[keyof typeof GroupBy];

/** One run's costs, as visibility and its result give them (client/cost.ts). */
export interface RunCost {
  /** The Temporal namespace the run executes in (with a namespace per team, its team's). */
  namespace: string;
  workflowId: string;
  team: string;
  project?: string;
  costUsd: number;
  onDemandCostUsd: number;
  preemptions: number;
  lines: CostLine[];
  /** Where the figures come from: the run's final memo, its result, or (still running) its search attributes. */
  source: 'memo' | 'result' | 'search-attributes';
}

export interface CostRow {
  group: string;
  runs: number;
  costUsd: number;
  onDemandCostUsd: number;
  savingsUsd: number;
  /** Savings as a share of the on-demand cost, 0..1 (0 when nothing was spent). */
  savingsRatio: number;
  gpuHours: number;
  preemptions: number;
}

export interface CostReport {
  by: GroupBy;
  groups: CostRow[];
  total: CostRow;
}

/** Rounds to the micro-dollar (and GPU-hours to the millionth), so sums compare exactly. */
export function micro(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

const NONE = '(none)';

interface Acc {
  runs: Set<string>;
  cost: number;
  onDemand: number;
  gpuSeconds: number;
  preemptions: number;
}

function row(group: string, a: Acc): CostRow {
  const savings = a.onDemand - a.cost;
  return {
    group,
    runs: a.runs.size,
    costUsd: micro(a.cost),
    onDemandCostUsd: micro(a.onDemand),
    savingsUsd: micro(savings),
    savingsRatio: a.onDemand > 0 ? Math.round((savings / a.onDemand) * 1e4) / 1e4 : 0,
    gpuHours: micro(a.gpuSeconds / 3600),
    preemptions: a.preemptions,
  };
}

/** The group of a whole run, for the groupings that take whole runs. */
const RUN_GROUP: Record<typeof GroupBy.Namespace | typeof GroupBy.Team | typeof GroupBy.Project, (run: RunCost) => string | undefined> = {
  [GroupBy.Namespace]: (run) => run.namespace,
  [GroupBy.Team]: (run) => run.team,
  [GroupBy.Project]: (run) => run.project,
};

export function costReport(runs: readonly RunCost[], by: GroupBy): CostReport {
  const groups = new Map<string, Acc>();
  const total: Acc = { runs: new Set(), cost: 0, onDemand: 0, gpuSeconds: 0, preemptions: 0 };
  const add = (key: string, run: string, cost: number, onDemand: number, gpuSeconds: number, preemptions: number) => {
    const a = groups.get(key) ?? { runs: new Set<string>(), cost: 0, onDemand: 0, gpuSeconds: 0, preemptions: 0 };
    a.runs.add(run);
    a.cost += cost;
    a.onDemand += onDemand;
    a.gpuSeconds += gpuSeconds;
    a.preemptions += preemptions;
    groups.set(key, a);
  };
  const keyOf = (run: RunCost) => `${run.namespace}/${run.workflowId}`;
  // A fixed order of addition: the same runs give the same sums, whatever order they were listed in.
  for (const run of [...runs].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0))) {
    const gpuSeconds = run.lines.reduce((s, l) => s + l.gpuSeconds, 0);
    const key = keyOf(run);
    total.runs.add(key);
    total.cost += run.costUsd;
    total.onDemand += run.onDemandCostUsd;
    total.gpuSeconds += gpuSeconds;
    total.preemptions += run.preemptions;
    if (by === GroupBy.Namespace || by === GroupBy.Team || by === GroupBy.Project) {
      add(RUN_GROUP[by](run) || NONE, key, run.costUsd, run.onDemandCostUsd, gpuSeconds, run.preemptions);
    } else {
      for (const l of run.lines) add((by === GroupBy.Zone ? l.zone : l.accelerator) || NONE, key, l.costUsd, l.onDemandCostUsd, l.gpuSeconds, l.preemptions);
    }
  }
  const rows = [...groups].map(([group, a]) => row(group, a));
  rows.sort((a, b) => b.costUsd - a.costUsd || (a.group < b.group ? -1 : 1));
  return { by, groups: rows, total: row('total', total) };
}

const CSV_COLUMNS = ['group', 'runs', 'costUsd', 'onDemandCostUsd', 'savingsUsd', 'savingsRatio', 'gpuHours', 'preemptions'] as const;

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
function csvField(value: string | number): string {
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function costCsv(report: CostReport): string {
  const lines = [CSV_COLUMNS.join(','), ...[...report.groups, report.total].map((r) => CSV_COLUMNS.map((c) => csvField(r[c])).join(','))];
  return `${lines.join('\n')}\n`;
}
