/**
 * Cost that stays current: while a resource is billed the run wakes at least every
 * COST_REFRESH_SECONDS, so `SternaCostUsd` (rounded to cents, upserted when it changes)
 * follows the ledger in the web UI rather than only on phase changes. And the cost
 * summary a run leaves in its memo when it ends, which `sterna cost` reads from
 * visibility without asking a worker. Pure.
 */
import { gangSize } from './gang';
import { DEFAULT_TEAM } from '../teams/rules';
import { runTeamOf } from './team';
import type { RunSpec } from '../spec';
import { AttemptOutcome, type RunState } from './state';
import { runningSeconds } from './views';

export const COST_REFRESH_SECONDS = 120;
/** The memo key of a run's cost summary. */
export const COST_MEMO = 'sternaCost';

/** The wait's end, brought forward to the next refresh. */
export function costRefreshAt(untilMs: number | undefined, nowMs: number): number {
  return Math.min(untilMs ?? Infinity, nowMs + COST_REFRESH_SECONDS * 1000);
}

/** One line per zone, accelerator and model: what the report groups by. */
export interface CostLine {
  zone: string;
  accelerator: string;
  provisioningModel: string;
  /** GPUs per attempt on this line. */
  gpus: number;
  attempts: number;
  preemptions: number;
  runningSeconds: number;
  gpuSeconds: number;
  costUsd: number;
  onDemandCostUsd: number;
}

export interface CostMemo {
  team: string;
  project?: string;
  phase: string;
  /** The ledger's totals, exactly as the run's result has them. */
  costUsd: number;
  onDemandCostUsd: number;
  preemptions: number;
  lines: CostLine[];
}

export function costMemoOf(state: RunState, spec: RunSpec, nowMs: number): CostMemo {
  const lines = new Map<string, CostLine>();
  let costUsd = 0;
  let onDemandCostUsd = 0;
  for (const a of state.attempts) {
    const seconds = runningSeconds(a, nowMs);
    const cost = (a.offer.pricePerHour * seconds) / 3600;
    const onDemand = (a.offer.onDemandPricePerHour * seconds) / 3600;
    // Summed in attempt order, as views.ts ledger() does: the totals equal the result's.
    costUsd += cost;
    onDemandCostUsd += onDemand;
    const key = `${a.offer.zone}/${a.offer.accelerator}/${a.offer.acceleratorCount}/${a.offer.provisioningModel}`;
    // A gang's GPUs are every node's.
    const gpus = a.offer.acceleratorCount * gangSize(a.offer);
    const line = lines.get(key) ?? { zone: a.offer.zone, accelerator: a.offer.accelerator, provisioningModel: a.offer.provisioningModel, gpus, attempts: 0, preemptions: 0, runningSeconds: 0, gpuSeconds: 0, costUsd: 0, onDemandCostUsd: 0 };
    line.attempts++;
    if (a.outcome === AttemptOutcome.Preempted) line.preemptions++;
    line.runningSeconds += seconds;
    line.gpuSeconds += seconds * gpus;
    line.costUsd += cost;
    line.onDemandCostUsd += onDemand;
    lines.set(key, line);
  }
  return {
    team: runTeamOf(state) ?? DEFAULT_TEAM,
    ...(spec.labels.project ? { project: spec.labels.project } : {}),
    phase: state.phase,
    costUsd,
    onDemandCostUsd,
    preemptions: state.preemptions,
    lines: [...lines.values()],
  };
}
