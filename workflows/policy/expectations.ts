/**
 * Expected run lengths, from the policy's own observations (zone-stats.ts), in the form
 * the decision rules need: how long capacity seen now will last, how long an outage
 * seen now will go on. All in hours.
 */
import type { Observation } from './types';
import { type StatsTable, expectedRemainingHours, expectedUptimeHours, medianRemainingHours, runAgeHours } from './zone-stats';

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

/**
 * Hours the capacity `zone` has now will, at least as likely as not, still last: the
 * median of the pooled longer runs' remainders. With bursty capacity the mean is carried
 * by rare multi-day runs while most returns meet a blip; a decision that risks scarce
 * slack should count on the likely run. The mean estimate when no longer run is on record.
 */
export function likelyRemainingUptimeHours(stats: StatsTable, obs: Observation, zone: string): number {
  const median = medianRemainingHours(stats.upRuns, runAgeHours(stats, zone, obs.nowHours));
  return median === undefined ? remainingUptimeHours(stats, obs, zone) : Math.max(obs.stepHours, median);
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
