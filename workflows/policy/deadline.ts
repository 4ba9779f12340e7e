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

/** Work this action completes before the next decision point. */
export function progressThisStep(obs: Observation, action: Action): number {
  if (action.kind === ActionKind.Idle) return 0;
  const warmup = sameAction(action, obs.current) ? obs.changeoverRemainingHours : obs.changeoverHours;
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
  return slackAfter >= obs.changeoverHours - EPS_HOURS;
}

/** Ties go to `preferZone`, so a run stays near its data and its earlier choices. */
export function cheapestOnDemand(zones: readonly ZoneObservation[], preferZone?: string): ZoneObservation {
  const cheapest = Math.min(...zones.map((z) => z.onDemandPrice));
  const ties = zones.filter((z) => z.onDemandPrice <= cheapest + EPS_USD_PER_HOUR);
  return ties.find((z) => z.zone === preferZone) ?? ties[0];
}

/** The on-demand action that keeps a running on-demand instance instead of paying a new changeover. */
export function onDemandAction(obs: Observation, preferZone?: string): Action {
  if (obs.current.kind === ActionKind.OnDemand) return obs.current;
  const near = preferZone ?? (obs.current.kind === ActionKind.Spot ? obs.current.zone : undefined);
  return { kind: ActionKind.OnDemand, zone: cheapestOnDemand(obs.zones, near).zone };
}

/**
 * Replace `action` by on-demand when taking it would risk the deadline (the safety net).
 * When even on-demand can no longer make it, keep the action: it is the best effort left.
 */
export function withSafetyNet(obs: Observation, action: Action, preferZone?: string): Action {
  if (action.kind === ActionKind.OnDemand || canRiskStep(obs, action)) return action;
  const fallback = onDemandAction(obs, preferZone);
  const warmup = sameAction(fallback, obs.current) ? obs.changeoverRemainingHours : obs.changeoverHours;
  return slackHours(obs) >= warmup - EPS_HOURS ? fallback : action;
}

export function isAvailable(zone: ZoneObservation): boolean {
  return zone.spotAvailable === true;
}
