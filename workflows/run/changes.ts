/**
 * The changes to a run, each first shipped behind its own patch so that a run recorded
 * before it replays without it, now recorded under one marker.
 *
 * A new execution takes every one of them, and each `patched()` costs it a marker and a
 * `TemporalChangeVersion` upsert: 38 of a 150-event execution for the 19 a run usually asks
 * for (`sterna-plan-throughput` only when its spec is named), and as
 * many state machines the worker's SDK core keeps for every cached run (most of the
 * worker's native memory at 2,000 runs: bench/README.md, row Q5). An execution started
 * since the baseline records its marker alone; one recorded before carries the markers of
 * the changes it had, and replays by them (the baseline is absent there, so each change
 * is asked for as before, in the same order).
 *
 * A change made after the baseline is not in it: it calls `patched()` itself until a later
 * baseline takes it in (adding it here would switch it on when replaying runs recorded
 * under this baseline, before the change existed).
 */
import { patched } from '@temporalio/workflow';

export const RUN_BASELINE_PATCH = 'sterna-run-baseline-1';

/** A change the baseline covers: every patch a run called before it. */
export type RunChange =
  | 'sterna-run-asks-observer'
  | 'sterna-team-admission'
  | 'sterna-gpu-util'
  | 'sterna-auto-costs'
  | 'sterna-flex-cut'
  | 'sterna-live-interval'
  | 'sterna-release-beside'
  | 'sterna-end-on-exit'
  | 'sterna-policy-stats'
  | 'sterna-history-budget'
  | 'sterna-history-budget-150'
  | 'sterna-current-details'
  | 'sterna-notify'
  | 'sterna-one-record'
  | 'sterna-memory-with-capacity'
  | 'sterna-zone-memory'
  | 'sterna-bucket-location'
  | 'sterna-cost-refresh'
  | 'sterna-record-beside'
  | 'sterna-plan-throughput';

/** Whether this execution runs with `change`: it began under the baseline, or recorded (or now records) the change's own patch. */
export function hasChange(change: RunChange): boolean {
  return patched(RUN_BASELINE_PATCH) || patched(change);
}
