/**
 * The behaviours a run decides by, each behind the patch its change was recorded under:
 * a run recorded before a change replays without it (test/histories/ keeps such runs).
 * Called in this order every time, as the markers were first written.
 */
import { patched } from '@temporalio/workflow';
import { hasChange } from './changes';
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
 * After the baseline (changes.ts), so asked by its own patch, and only when `auto` starts
 * its policy: runs recorded before keep the rules they started with (zone-stats rules 2).
 */
export const POLICY_DRY_SPELLS_PATCH = 'sterna-policy-dry-spells';

export function policyDrySpells(): boolean {
  return patched(POLICY_DRY_SPELLS_PATCH);
}

/** After the dry-spell patch, asked the same way: runs recorded before keep zone-stats rules 3. */
export const POLICY_PROBE_COST_PATCH = 'sterna-policy-probe-cost';

export function policyProbeCost(): boolean {
  return patched(POLICY_PROBE_COST_PATCH);
}

/** After the probe-cost patch, asked the same way: runs recorded before keep zone-stats rules 4. */
export const POLICY_SLACK_EXCHANGE_PATCH = 'sterna-policy-slack-exchange';

export function policySlackExchange(): boolean {
  return patched(POLICY_SLACK_EXCHANGE_PATCH);
}
