/**
 * Deadline arithmetic shared by every policy: how much slack is left and whether an
 * action still leaves room to finish on on-demand if the next step goes wrong.
 */
import { type Action, ActionKind, type Observation, type ZoneObservation, sameAction } from './types';

/** Float tolerance for hour comparisons (a trace tick is ~1e-2 h; this is far below it). */
export const EPS_HOURS = 1e-9;
const EPS_USD_PER_HOUR = 1e-9;

/** Time that is not needed for work: spent by idling and by changeovers. */
export function slackHours(obs: Observation): number {
  return obs.hoursUntilDeadline - obs.remainingWorkHours;
}

/** A start in `zone`: the changeover plus the staging of the run's data there (none when unknown). */
export function changeoverIn(obs: Observation, zone: string): number {
  return obs.changeoverHours + (obs.zones.find((z) => z.zone === zone)?.startHours ?? 0);
}

/** Work this action completes before the next decision point. */
export function progressThisStep(obs: Observation, action: Action): number {
  if (action.kind === ActionKind.Idle) return 0;
  const warmup = sameAction(action, obs.current) ? obs.changeoverRemainingHours : changeoverIn(obs, action.zone);
  return Math.min(obs.remainingWorkHours, Math.max(0, obs.stepHours - warmup));
}

/**
 * True when, after taking `action` for one step and then losing it, a fresh on-demand
 * instance (one more changeover) still finishes by the deadline.
 */
export function canRiskStep(obs: Observation, action: Action): boolean {
  const done = progressThisStep(obs, action);
  if (done >= obs.remainingWorkHours - EPS_HOURS) return obs.stepHours <= obs.hoursUntilDeadline + EPS_HOURS;
  const slackAfter = obs.hoursUntilDeadline - obs.stepHours - (obs.remainingWorkHours - done);
  return slackAfter >= changeoverIn(obs, cheapestOnDemand(obs.zones, undefined, obs.remainingWorkHours).zone) - EPS_HOURS;
}

/**
 * Ties go to `preferZone`, so a run stays near its earlier choices. Where the run's data
 * costs something to bring (`startUsd`, `startHours`), the zone with the lowest expected
 * cost of the work left (`hours`) there wins instead of the lowest price.
 */
export function cheapestOnDemand(zones: readonly ZoneObservation[], preferZone?: string, hours = 0): ZoneObservation {
  const withData = zones.some((z) => z.startUsd !== undefined || z.startHours !== undefined);
  const cost = (z: ZoneObservation) => (withData ? z.onDemandPrice * (hours + (z.startHours ?? 0)) + (z.startUsd ?? 0) : z.onDemandPrice);
  const cheapest = Math.min(...zones.map(cost));
  const ties = zones.filter((z) => cost(z) <= cheapest + EPS_USD_PER_HOUR);
  return ties.find((z) => z.zone === preferZone) ?? ties[0];
}

/** The on-demand action that keeps a running on-demand instance instead of paying a new changeover. */
export function onDemandAction(obs: Observation, preferZone?: string): Action {
  if (obs.current.kind === ActionKind.OnDemand) return obs.current;
  const near = preferZone ?? (obs.current.kind === ActionKind.Spot ? obs.current.zone : undefined);
  return { kind: ActionKind.OnDemand, zone: cheapestOnDemand(obs.zones, near, obs.remainingWorkHours).zone };
}

/**
 * Replace `action` by on-demand when taking it would risk the deadline (the safety net).
 * When even on-demand can no longer make it, keep the action: it is the best effort left.
 */
export function withSafetyNet(obs: Observation, action: Action, preferZone?: string): Action {
  // A running flex-start VM is never preempted: keeping it risks nothing.
  const unpreempted = action.kind === ActionKind.OnDemand || (action.kind === ActionKind.FlexStart && sameAction(action, obs.current));
  if (unpreempted || canRiskStep(obs, action)) return action;
  const fallback = onDemandAction(obs, preferZone);
  const warmup = sameAction(fallback, obs.current) ? obs.changeoverRemainingHours : fallback.kind === ActionKind.Idle ? obs.changeoverHours : changeoverIn(obs, fallback.zone);
  return slackHours(obs) >= warmup - EPS_HOURS ? fallback : action;
}

export function isAvailable(zone: ZoneObservation): boolean {
  return zone.spotAvailable === true;
}
