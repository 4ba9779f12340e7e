/**
 * The plan benchmark's arithmetic: each run's prediction (the plan's pick, made just
 * before the run started) against what the run then did, and the error summaries the
 * README reports. Pure, so the numbers can be recomputed from the raw JSON.
 *
 * Relative error = (predicted - actual) / actual: positive when the plan said more
 * (dearer, later) than happened.
 */

/** What the plan said of the row the run would try first. */
export interface PlannedPick {
  zone: string;
  accelerator: string;
  provisioningModel: string;
  pricePerHour: number;
  workHours: number;
  expectedHours: number;
  expectedCostUsd: number;
  expectedPreemptions: number;
  preemptionsPerHour: number;
  preemptionSource: string;
  /** Seconds the plan took one preemption to cost, and whether measured by earlier runs or the prior. */
  lossSeconds: number;
  lossSource: string;
  throughputSource: string;
  /** Seconds from the plan to its predicted finish. */
  finishSeconds: number;
}

/** What the run did. */
export interface RunOutcome {
  status: 'completed' | 'failed';
  failure?: string;
  /** Seconds from the plan to the run's end. */
  seconds: number;
  /** What the emulator billed for the run's VMs (its per-tick trace prices), and what the run's ledger says. */
  billedUsd: number;
  ledgerUsd: number;
  billedSeconds: number;
  preemptions: number;
  attempts: number;
  /** Each attempt's zone and outcome, in order. */
  path: string[];
  /** Seconds between one VM of the run stopping and the next starting (no VM billed), from the emulator's billing. */
  gapsSeconds: number[];
}

export interface PlanBenchRun {
  index: number;
  wave: number;
  workflowId: string;
  plannedAt: string;
  workBasis?: string;
  pick?: PlannedPick;
  outcome: RunOutcome;
  /** Relative errors of the pick's predictions, when the run completed and the plan picked. */
  error?: { cost: number; finish: number };
}

export interface ErrorSummary {
  runs: number;
  /** Of |relative error|. */
  medianAbs: number;
  p90Abs: number;
  /** Of the signed error: its sign is the model's bias. */
  medianSigned: number;
  min: number;
  max: number;
}

export interface PlanBenchSummary {
  cost: ErrorSummary;
  finish: ErrorSummary;
}

export function relativeError(predicted: number, actual: number): number {
  return (predicted - actual) / actual;
}

/** The q-quantile (0..1) of `values`, linearly interpolated between order statistics; NaN for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

export function errorSummary(errors: readonly number[]): ErrorSummary {
  const abs = errors.map(Math.abs);
  return {
    runs: errors.length,
    medianAbs: quantile(abs, 0.5),
    p90Abs: quantile(abs, 0.9),
    medianSigned: quantile(errors, 0.5),
    min: errors.length ? Math.min(...errors) : Number.NaN,
    max: errors.length ? Math.max(...errors) : Number.NaN,
  };
}

/** The run's errors against its plan: only a completed run that the plan predicted has them. */
export function errorsOf(pick: PlannedPick | undefined, outcome: RunOutcome): PlanBenchRun['error'] {
  if (!pick || outcome.status !== 'completed' || !(outcome.billedUsd > 0) || !(outcome.seconds > 0)) return undefined;
  return { cost: relativeError(pick.expectedCostUsd, outcome.billedUsd), finish: relativeError(pick.finishSeconds, outcome.seconds) };
}

export function summarize(runs: readonly PlanBenchRun[]): PlanBenchSummary {
  const judged = runs.filter((r) => r.error !== undefined);
  return { cost: errorSummary(judged.map((r) => r.error!.cost)), finish: errorSummary(judged.map((r) => r.error!.finish)) };
}
