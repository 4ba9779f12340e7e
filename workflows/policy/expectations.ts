/**
 * Expected run lengths, from the policy's own observations (zone-stats.ts), in the form
 * the decision rules need: how long capacity seen now will last, how long an outage
 * seen now will go on. All in hours.
 */
import type { Observation } from './types';
import { type StatsTable, expectedRemainingHours, expectedUptimeHours, runAgeHours } from './zone-stats';

/** Mean spot run length in `zone` (pooled when `zone` is unseen), one preemption per horizon as the prior. */
export function meanUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  return expectedUptimeHours(stats, zone, obs.stepHours, obs.hoursUntilDeadline);
}

/**
 * Hours left of the capacity `zone` has now, given how long it has lasted: the pooled
 * runs' conditional mean, scaled by how this zone's mean run compares with all zones'.
 */
export function remainingUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  const mean = meanUptimeHours(stats, obs, zone);
  const pooled = expectedRemainingHours(stats.upRuns, runAgeHours(stats, zone, obs.nowHours));
  if (pooled === undefined) return Math.max(obs.stepHours, mean);
  return Math.max(obs.stepHours, (pooled * mean) / meanUptimeHours(stats, obs, ''));
}

/** Hours until `zone` has capacity again; with no longer outage on record, as long again as this one (Lindy). */
export function remainingDowntimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  const age = runAgeHours(stats, zone, obs.nowHours);
  return Math.max(obs.stepHours, expectedRemainingHours(stats.downRuns, age) ?? age);
}

/** Hours until some zone has capacity again. */
export function remainingOutageHours(stats: StatsTable, obs: Observation): number {
  return Math.min(...obs.zones.map((z) => remainingDowntimeHours(stats, obs, z.zone)));
}
