/**
 * The behaviours a run decides by, each behind the patch its change was recorded under:
 * a run recorded before a change replays without it (test/histories/ keeps such runs).
 * Called in this order every time, as the markers were first written.
 */
import { patched } from '@temporalio/workflow';
import { hasChange } from './changes';
import type { StatsRules } from '../policy/zone-stats';
import { FIRST_HISTORY_BUDGET, HISTORY_EVENTS_PER_EXECUTION, type Context } from './machine';

export type RunPatches = Pick<Context, 'asksObserver' | 'teamAdmission' | 'gpuUtil' | 'autoCosts' | 'flexCut' | 'liveInterval' | 'releaseBeside' | 'endsOnExit' | 'policyStats' | 'historyBudget'>;

export function runPatches(): RunPatches {
  // Runs recorded before runs asked for the observer themselves replay without asking.
  const asksObserver = hasChange('sterna-run-asks-observer');
  // Runs recorded before team admission place without asking their team.
  const teamAdmission = hasChange('sterna-team-admission');
  // Runs recorded before GPU readings and the idle rule replay without them.
  const gpuUtil = hasChange('sterna-gpu-util');
  // Runs recorded before auto weighed flex-start and data cost by expected cost keep the fixed rules.
  const autoCosts = hasChange('sterna-auto-costs');
  // Runs recorded before the run-duration guard neither move before a flex-start cut nor size it from the run's end.
  const flexCut = hasChange('sterna-flex-cut');
  // Runs recorded before live checkpoint intervals replay without their reads and updates.
  const liveInterval = hasChange('sterna-live-interval');
  // Runs recorded before placed their next attempt only once the last one was released.
  const releaseBeside = hasChange('sterna-release-beside');
  // Runs recorded before ended a preempted attempt only once its VM was down.
  const endsOnExit = hasChange('sterna-end-on-exit');
  // Runs recorded before auto's policy pooled found runs and stopped measuring along others' looks keep the first rules.
  const policyStats = hasChange('sterna-policy-stats');
  // Runs recorded before continued as new only when the server suggested it; then at 400 events.
  const historyBudget = hasChange('sterna-history-budget') ? (hasChange('sterna-history-budget-150') ? HISTORY_EVENTS_PER_EXECUTION : FIRST_HISTORY_BUDGET) : undefined;
  return { asksObserver, teamAdmission, gpuUtil, autoCosts, flexCut, liveInterval, releaseBeside, endsOnExit, policyStats, historyBudget };
}

/**
 * The policy's rules made after the baseline (changes.ts), each behind its own patch and
 * the zone-statistics rules it brings (policy/zone-stats.ts), in the order they were made.
 */
export const POLICY_RULE_PATCHES: readonly (readonly [patch: string, rules: StatsRules])[] = [
  // A decision that saw some zone and none with capacity counts as dry.
  ['sterna-policy-dry-spells', 3],
  // A probe's failed launches are priced as what they cost once outages are on record.
  ['sterna-policy-probe-cost', 4],
  // An hour of slack is priced at no more than the spot progress it buys.
  ['sterna-policy-slack-exchange', 5],
  // The changeovers ahead are counted at the mean uptime of all zones, not the longest-lasting one's.
  ['sterna-policy-market-uptime', 6],
  // Another run's look across a gap that finds the state last seen: held since its streak of such looks began if runs that lasted as long mostly outlast the gap, else from the gap's midpoint.
  ['sterna-policy-others-gap', 7],
  // Capacity that has lasted longer than every run on record is likely to last as long again.
  ['sterna-policy-as-long-again', 8],
  // Leaving on-demand, the changeovers' slack costs nothing when a wait would spend it for free.
  ['sterna-policy-free-return', 9],
];

/**
 * The rules an `auto` policy starting now keeps to: the first for runs recorded before
 * `policyStats`, else 2 and one step for each later patch, asked in order and only while
 * the one before is in the history. Asked only when a policy starts, so only `auto` runs
 * record these patches; a run keeps its rules in the policy's state to the end.
 */
export function policyRules(policyStats: boolean | undefined): StatsRules {
  if (policyStats !== true) return 1;
  let rules: StatsRules = 2;
  for (const [patch, next] of POLICY_RULE_PATCHES) {
    if (!patched(patch)) break;
    rules = next;
  }
  return rules;
}

/**
 * Whether a training command that exits 126 or 127 ends the run at once (run/endings.ts
 * NOT_RUNNABLE_EXITS). Asked only when such an exit is seen: a run recorded before the row
 * has no marker there and restarts as it did.
 */
export function notRunnableExits(): boolean {
  return patched('sterna-not-runnable-exits');
}

/**
 * Whether the first placement checks that every dataset object exists before any VM is
 * created (run/datasets.ts). Asked only at a run's first placements: a run recorded before
 * the check replays without it.
 */
export function checksDatasets(): boolean {
  return patched('sterna-dataset-check');
}
